internal import CStrataZstd

/// A zstd dictionary: shared content that makes small, similar frames compress far better.
///
/// Train one from samples of the data (``train(samples:capacity:)``, which wraps
/// `ZDICT_trainFromBuffer`), store it beside what it compressed, and give it to both the
/// compressor and the decompressor; a frame names the ID of the dictionary it needs.
public struct ZstdDictionary: Sendable, Hashable {
    /// The dictionary's bytes, as zstd's CLI writes them with `--train`.
    public let bytes: [UInt8]

    /// Wraps dictionary bytes (from ``train(samples:capacity:)`` or `zstd --train`).
    ///
    /// - Throws: ``ZstdError/Code/dictionaryCorrupted`` for empty bytes.
    public init(bytes: [UInt8]) throws {
        guard !bytes.isEmpty else {
            throw ZstdError(.dictionaryCorrupted, operation: "ZstdDictionary", message: "a dictionary can't be empty")
        }
        self.bytes = bytes
    }

    /// The dictionary's ID (`ZDICT_getDictID`); 0 for a raw-content dictionary.
    public var id: UInt32 {
        bytes.withUnsafeBytes { ZDICT_getDictID($0.baseAddress, $0.count) }
    }

    /// Trains a dictionary of at most `capacity` bytes from `samples` (`ZDICT_trainFromBuffer`).
    ///
    /// zstd wants many samples (hundreds) and a total of roughly a hundred times the capacity;
    /// with too little it fails, and this throws ``ZstdError/Code/trainingFailed`` saying so.
    public static func train(samples: [[UInt8]], capacity: Int = 110 << 10) throws -> ZstdDictionary {
        let sizes = samples.map(\.count)
        let total = sizes.reduce(0, +)
        guard samples.count >= 8, total > 0 else {
            throw ZstdError(
                .trainingFailed, operation: "ZDICT_trainFromBuffer",
                message: "training needs at least 8 non-empty samples; got \(samples.count) totalling \(total) bytes")
        }
        var joined: [UInt8] = []
        joined.reserveCapacity(total)
        for sample in samples { joined.append(contentsOf: sample) }
        var dictionary = [UInt8](repeating: 0, count: max(capacity, 256))
        let result = dictionary.withUnsafeMutableBytes { dict in
            joined.withUnsafeBytes { samplesBuffer in
                sizes.withUnsafeBufferPointer { sizesBuffer in
                    ZDICT_trainFromBuffer(
                        dict.baseAddress, dict.count, samplesBuffer.baseAddress, sizesBuffer.baseAddress,
                        UInt32(clamping: samples.count))
                }
            }
        }
        if ZDICT_isError(result) != 0 {
            throw ZstdError(
                .trainingFailed, operation: "ZDICT_trainFromBuffer",
                message: "\(String(cString: ZDICT_getErrorName(result))) (\(samples.count) samples, \(total) bytes)")
        }
        dictionary.removeSubrange(result...)
        return try ZstdDictionary(bytes: dictionary)
    }
}
