internal import CStrataZstd

/// An error from zstd, or a decompression that broke the caller's bound.
///
/// zstd's own codes are its `ZSTD_ErrorCode` values (`zstd_errors.h`) with
/// `ZSTD_getErrorName`'s text; codes from 1000 up are Strata's.
public struct ZstdError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A zstd error code (`ZSTD_ErrorCode`) or one of Strata's.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        /// The numeric code.
        public let rawValue: Int
        /// Creates a code from its number.
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// `ZSTD_error_GENERIC`.
        public static let generic = Code(rawValue: 1)
        /// `ZSTD_error_prefix_unknown`: the input doesn't start with a zstd frame.
        public static let unknownPrefix = Code(rawValue: 10)
        /// `ZSTD_error_version_unsupported`.
        public static let versionUnsupported = Code(rawValue: 12)
        /// `ZSTD_error_frameParameter_unsupported`.
        public static let frameParameterUnsupported = Code(rawValue: 14)
        /// `ZSTD_error_frameParameter_windowTooLarge`: the frame needs more memory than allowed.
        public static let windowTooLarge = Code(rawValue: 16)
        /// `ZSTD_error_corruption_detected`.
        public static let corruptionDetected = Code(rawValue: 20)
        /// `ZSTD_error_checksum_wrong`: the content checksum doesn't match.
        public static let checksumWrong = Code(rawValue: 22)
        /// `ZSTD_error_dictionary_corrupted`.
        public static let dictionaryCorrupted = Code(rawValue: 30)
        /// `ZSTD_error_dictionary_wrong`: the frame was written with another dictionary.
        public static let dictionaryWrong = Code(rawValue: 32)
        /// `ZSTD_error_dictionaryCreation_failed`.
        public static let dictionaryCreationFailed = Code(rawValue: 34)
        /// `ZSTD_error_memory_allocation`.
        public static let memoryAllocation = Code(rawValue: 64)
        /// `ZSTD_error_dstSize_tooSmall`.
        public static let destinationTooSmall = Code(rawValue: 70)
        /// `ZSTD_error_srcSize_wrong`: the input is truncated or has trailing bytes.
        public static let sourceSizeWrong = Code(rawValue: 72)

        /// Strata: the frames claim or produce more bytes than the caller's bound.
        public static let exceedsBound = Code(rawValue: 1000)
        /// Strata: the input ended in the middle of a frame.
        public static let truncated = Code(rawValue: 1001)
        /// Strata: no input at all where a frame was expected.
        public static let emptyInput = Code(rawValue: 1002)
        /// Strata: dictionary training was given too little to work with.
        public static let trainingFailed = Code(rawValue: 1003)

        /// The code's name.
        public var description: String {
            switch self {
            case .generic: "ZSTD_error_GENERIC"
            case .unknownPrefix: "ZSTD_error_prefix_unknown"
            case .versionUnsupported: "ZSTD_error_version_unsupported"
            case .frameParameterUnsupported: "ZSTD_error_frameParameter_unsupported"
            case .windowTooLarge: "ZSTD_error_frameParameter_windowTooLarge"
            case .corruptionDetected: "ZSTD_error_corruption_detected"
            case .checksumWrong: "ZSTD_error_checksum_wrong"
            case .dictionaryCorrupted: "ZSTD_error_dictionary_corrupted"
            case .dictionaryWrong: "ZSTD_error_dictionary_wrong"
            case .dictionaryCreationFailed: "ZSTD_error_dictionaryCreation_failed"
            case .memoryAllocation: "ZSTD_error_memory_allocation"
            case .destinationTooSmall: "ZSTD_error_dstSize_tooSmall"
            case .sourceSizeWrong: "ZSTD_error_srcSize_wrong"
            case .exceedsBound: "STRATA_EXCEEDS_BOUND"
            case .truncated: "STRATA_TRUNCATED"
            case .emptyInput: "STRATA_EMPTY_INPUT"
            case .trainingFailed: "STRATA_TRAINING_FAILED"
            default: "ZSTD error \(rawValue)"
            }
        }
    }

    /// What went wrong.
    public let code: Code
    /// The zstd function or Strata operation that failed.
    public let operation: String
    /// zstd's text (`ZSTD_getErrorName`) or Strata's.
    public let message: String

    init(_ code: Code, operation: String, message: String) {
        self.code = code
        self.operation = operation
        self.message = message
    }

    /// `operation: message (CODE)`.
    public var description: String { "\(operation): \(message) (\(code))" }
}

/// Returns `result` or throws the zstd error it encodes (`ZSTD_isError`).
@inline(__always)
func checkZstd(_ result: Int, _ operation: @autoclosure () -> String) throws(ZstdError) -> Int {
    if ZSTD_isError(result) != 0 {
        throw ZstdError(
            ZstdError.Code(rawValue: Int(ZSTD_getErrorCode(result).rawValue)), operation: operation(),
            message: String(cString: ZSTD_getErrorName(result)))
    }
    return result
}
