internal import CStrataZstd
public import Foundation

/// One-shot zstd compression and bounded decompression.
///
/// Frames carry their content size and a content checksum, so the stock `zstd -t` and
/// `zstd -dc` check and read them. Decompression always takes a bound: a frame that
/// claims, or turns out to produce, more than the bound is an error — never a huge
/// allocation — and corrupt or truncated input is an error, never a crash.
///
/// ```swift
/// let frame = try Zstd.compress(bytes, level: 3)
/// let back = try Zstd.decompress(frame, maximumSize: 64 << 20)
/// ```
public enum Zstd {
    /// zstd's default level (3).
    public static var defaultLevel: Int { Int(ZSTD_defaultCLevel()) }
    /// The fastest level zstd accepts (negative levels trade ratio for speed).
    public static var minimumLevel: Int { Int(ZSTD_minCLevel()) }
    /// The strongest level (22).
    public static var maximumLevel: Int { Int(ZSTD_maxCLevel()) }
    /// The version of the zstd library in use, such as `1.5.4`.
    public static var libraryVersion: String { String(cString: ZSTD_versionString()) }

    /// Compresses `input` into one frame with content size and checksum (`ZSTD_compress2`).
    ///
    /// - Parameters:
    ///   - level: from ``minimumLevel`` to ``maximumLevel``; out-of-range levels are clamped.
    ///   - dictionary: a dictionary the reader must also pass to ``decompress(_:maximumSize:dictionary:)``.
    public static func compress(
        _ input: some ContiguousBytes, level: Int = defaultLevel, dictionary: ZstdDictionary? = nil
    ) throws -> [UInt8] {
        let context = try CompressionContext(level: level, dictionary: dictionary)
        return try input.withUnsafeBytes { source in
            let capacity = ZSTD_compressBound(source.count)
            return try [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialized in
                initialized = try checkZstd(
                    ZSTD_compress2(context.handle, buffer.baseAddress, capacity, source.baseAddress, source.count),
                    "ZSTD_compress2")
            }
        }
    }

    /// Decompresses one or more concatenated frames, refusing to produce more than
    /// `maximumSize` bytes.
    ///
    /// When every frame states its content size, the sum is checked against the bound
    /// before anything is allocated; otherwise decompression streams and stops at the bound.
    ///
    /// - Throws: ``ZstdError`` — ``ZstdError/Code/exceedsBound`` past the bound,
    ///   ``ZstdError/Code/truncated`` for a cut-off frame, zstd's codes for corruption,
    ///   a wrong checksum or a missing dictionary.
    public static func decompress(
        _ input: some ContiguousBytes, maximumSize: Int, dictionary: ZstdDictionary? = nil
    ) throws -> [UInt8] {
        try input.withUnsafeBytes { source in
            guard source.count > 0, let base = source.baseAddress else {
                throw ZstdError(.emptyInput, operation: "decompress", message: "no input where a zstd frame was expected")
            }
            // Walk the frames to learn the total content size without decompressing.
            var offset = 0
            var total = 0
            var allSizesKnown = true
            while offset < source.count {
                let remaining = source.count - offset
                let frameSize = ZSTD_findFrameCompressedSize(base + offset, remaining)
                if ZSTD_isError(frameSize) != 0 {
                    let code = Int(ZSTD_getErrorCode(frameSize).rawValue)
                    if code == ZstdError.Code.sourceSizeWrong.rawValue {
                        throw ZstdError(
                            .truncated, operation: "decompress",
                            message: "the input ends inside a frame at byte \(offset) of \(source.count)")
                    }
                    _ = try checkZstd(frameSize, "ZSTD_findFrameCompressedSize (frame at byte \(offset))")
                }
                let contentSize = ZSTD_getFrameContentSize(base + offset, frameSize)
                if contentSize == zstdContentSizeError {
                    throw ZstdError(
                        .unknownPrefix, operation: "ZSTD_getFrameContentSize",
                        message: "the bytes at \(offset) are not a valid zstd frame header")
                } else if contentSize == zstdContentSizeUnknown {
                    allSizesKnown = false
                } else {
                    let (sum, overflow) = total.addingReportingOverflow(Int(clamping: contentSize))
                    if overflow || sum > maximumSize {
                        throw ZstdError(
                            .exceedsBound, operation: "decompress",
                            message: "the frames claim \(overflow ? "more than \(Int.max)" : "\(sum)") bytes, over the bound of \(maximumSize)")
                    }
                    total = sum
                }
                offset += frameSize
            }
            if !allSizesKnown {
                let stream = try ZstdDecompressionStream(maximumOutputSize: maximumSize, dictionary: dictionary)
                var output = try stream.decompress(UnsafeRawBufferPointer(source))
                output += try stream.finish()
                return output
            }
            let context = try DecompressionContext(dictionary: dictionary)
            return try [UInt8](unsafeUninitializedCapacity: max(total, 1)) { buffer, initialized in
                let produced = try checkZstd(
                    ZSTD_decompressDCtx(context.handle, buffer.baseAddress, total, base, source.count),
                    "ZSTD_decompressDCtx")
                guard produced == total else {
                    throw ZstdError(
                        .corruptionDetected, operation: "decompress",
                        message: "the frames produced \(produced) bytes but claimed \(total)")
                }
                initialized = produced
            }
        }
    }

    /// The content size a single frame claims in its header; nil when the header doesn't say.
    ///
    /// - Throws: ``ZstdError/Code/unknownPrefix`` when the bytes don't start a zstd frame.
    public static func frameContentSize(_ frame: some ContiguousBytes) throws -> Int? {
        try frame.withUnsafeBytes { source in
            let size = ZSTD_getFrameContentSize(source.baseAddress, source.count)
            if size == zstdContentSizeUnknown { return nil }
            if size == zstdContentSizeError {
                throw ZstdError(.unknownPrefix, operation: "ZSTD_getFrameContentSize", message: "not a zstd frame header")
            }
            return Int(clamping: size)
        }
    }

    /// The dictionary ID a frame names (0 if none): tells which dictionary to load.
    public static func dictionaryID(ofFrame frame: some ContiguousBytes) -> UInt32 {
        frame.withUnsafeBytes { ZSTD_getDictID_fromFrame($0.baseAddress, $0.count) }
    }
}

/// `ZSTD_CONTENTSIZE_UNKNOWN` (`0ULL - 1`), which Swift can't import from the macro.
let zstdContentSizeUnknown = UInt64.max
/// `ZSTD_CONTENTSIZE_ERROR` (`0ULL - 2`).
let zstdContentSizeError = UInt64.max - 1

// MARK: - Contexts

/// An owned `ZSTD_CCtx` set up for Strata's frames: level, content size, checksum, dictionary.
final class CompressionContext {
    let handle: OpaquePointer

    init(level: Int, dictionary: ZstdDictionary?) throws {
        guard let context = ZSTD_createCCtx() else {
            throw ZstdError(.memoryAllocation, operation: "ZSTD_createCCtx", message: "cannot allocate a compression context")
        }
        handle = context
        let clamped = min(max(level, Zstd.minimumLevel), Zstd.maximumLevel)
        _ = try checkZstd(
            ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, Int32(clamped)), "ZSTD_CCtx_setParameter(level)")
        _ = try checkZstd(ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1), "ZSTD_CCtx_setParameter(checksum)")
        _ = try checkZstd(
            ZSTD_CCtx_setParameter(context, ZSTD_c_contentSizeFlag, 1), "ZSTD_CCtx_setParameter(contentSize)")
        if let dictionary {
            _ = try dictionary.bytes.withUnsafeBytes {
                try checkZstd(ZSTD_CCtx_loadDictionary(context, $0.baseAddress, $0.count), "ZSTD_CCtx_loadDictionary")
            }
        }
    }

    deinit { ZSTD_freeCCtx(handle) }
}

/// An owned `ZSTD_DCtx`, with a dictionary if given and the window limited to 128 MiB so a
/// hostile frame can't demand gigabytes of memory.
final class DecompressionContext {
    let handle: OpaquePointer

    init(dictionary: ZstdDictionary?) throws {
        guard let context = ZSTD_createDCtx() else {
            throw ZstdError(.memoryAllocation, operation: "ZSTD_createDCtx", message: "cannot allocate a decompression context")
        }
        handle = context
        _ = try checkZstd(ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, 27), "ZSTD_DCtx_setParameter(windowLogMax)")
        if let dictionary {
            _ = try dictionary.bytes.withUnsafeBytes {
                try checkZstd(ZSTD_DCtx_loadDictionary(context, $0.baseAddress, $0.count), "ZSTD_DCtx_loadDictionary")
            }
        }
    }

    deinit { ZSTD_freeDCtx(handle) }
}
