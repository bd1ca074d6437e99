internal import CStrataZstd
public import Foundation

/// Compresses a stream of chunks into one zstd frame (`ZSTD_compressStream2`).
///
/// Give `contentSize` when you know the total: the frame then records it (and zstd checks
/// it). Without it the frame has no content size — zstd can't write one it doesn't know —
/// but still carries the content checksum.
///
/// ```swift
/// let stream = try ZstdCompressionStream(level: 3, contentSize: total)
/// var frame: [UInt8] = []
/// for chunk in chunks { frame += try stream.compress(chunk) }
/// frame += try stream.finish()
/// ```
public final class ZstdCompressionStream {
    private let context: CompressionContext
    private var finished = false

    /// Starts a frame.
    public init(level: Int = Zstd.defaultLevel, dictionary: ZstdDictionary? = nil, contentSize: Int? = nil) throws {
        context = try CompressionContext(level: level, dictionary: dictionary)
        if let contentSize {
            _ = try checkZstd(
                ZSTD_CCtx_setPledgedSrcSize(context.handle, UInt64(max(contentSize, 0))), "ZSTD_CCtx_setPledgedSrcSize")
        }
    }

    /// Feeds `chunk`, returning whatever compressed bytes are ready.
    public func compress(_ chunk: some ContiguousBytes) throws -> [UInt8] {
        guard !finished else {
            throw ZstdError(.generic, operation: "compress", message: "the stream is already finished")
        }
        return try chunk.withUnsafeBytes { try run($0, directive: ZSTD_e_continue) }
    }

    /// Ends the frame, returning its last bytes (epilogue and checksum).
    public func finish() throws -> [UInt8] {
        guard !finished else { return [] }
        finished = true
        return try run(UnsafeRawBufferPointer(start: nil, count: 0), directive: ZSTD_e_end)
    }

    private func run(_ source: UnsafeRawBufferPointer, directive: ZSTD_EndDirective) throws -> [UInt8] {
        var input = ZSTD_inBuffer(src: source.baseAddress, size: source.count, pos: 0)
        let chunkSize = ZSTD_CStreamOutSize()
        var output: [UInt8] = []
        var scratch = [UInt8](repeating: 0, count: chunkSize)
        while true {
            let (remaining, produced) = try scratch.withUnsafeMutableBytes { buffer in
                var out = ZSTD_outBuffer(dst: buffer.baseAddress, size: buffer.count, pos: 0)
                let remaining = try checkZstd(
                    ZSTD_compressStream2(context.handle, &out, &input, directive), "ZSTD_compressStream2")
                return (remaining, out.pos)
            }
            output.append(contentsOf: scratch[0..<produced])
            let done = directive == ZSTD_e_end ? remaining == 0 : input.pos == input.size
            if done { return output }
        }
    }
}

/// Decompresses zstd frames fed in chunks, refusing to produce more than a bound
/// (`ZSTD_decompressStream`).
///
/// ```swift
/// let stream = try ZstdDecompressionStream(maximumOutputSize: 16 << 20)
/// for chunk in chunks { output += try stream.decompress(chunk) }
/// try stream.finish()   // throws if the last frame was cut off
/// ```
public final class ZstdDecompressionStream {
    private let context: DecompressionContext
    /// The most bytes this stream will produce in all.
    public let maximumOutputSize: Int
    /// The bytes produced so far.
    public private(set) var producedCount = 0
    /// Whether the input so far ends exactly at a frame boundary.
    public private(set) var isAtFrameBoundary = true

    /// Starts decompressing, with the bound every later call is held to.
    public init(maximumOutputSize: Int, dictionary: ZstdDictionary? = nil) throws {
        context = try DecompressionContext(dictionary: dictionary)
        self.maximumOutputSize = maximumOutputSize
    }

    /// Feeds `chunk`, returning the bytes it decompressed to.
    ///
    /// - Throws: ``ZstdError/Code/exceedsBound`` as soon as the output would pass the
    ///   bound; zstd's codes for corrupt input.
    public func decompress(_ chunk: some ContiguousBytes) throws -> [UInt8] {
        try chunk.withUnsafeBytes { source in
            var input = ZSTD_inBuffer(src: source.baseAddress, size: source.count, pos: 0)
            let chunkSize = ZSTD_DStreamOutSize()
            var output: [UInt8] = []
            var scratch = [UInt8](repeating: 0, count: chunkSize)
            while true {
                let (hint, produced) = try scratch.withUnsafeMutableBytes { buffer in
                    var out = ZSTD_outBuffer(dst: buffer.baseAddress, size: buffer.count, pos: 0)
                    let hint = try checkZstd(
                        ZSTD_decompressStream(context.handle, &out, &input), "ZSTD_decompressStream")
                    return (hint, out.pos)
                }
                if producedCount + produced > maximumOutputSize {
                    throw ZstdError(
                        .exceedsBound, operation: "decompress",
                        message: "the input decompresses to more than the bound of \(maximumOutputSize) bytes")
                }
                producedCount += produced
                output.append(contentsOf: scratch[0..<produced])
                isAtFrameBoundary = hint == 0
                // Done when all input is consumed and zstd isn't holding output back.
                if input.pos == input.size && produced < chunkSize { return output }
            }
        }
    }

    /// Confirms the input ended at the end of a frame.
    ///
    /// - Throws: ``ZstdError/Code/truncated`` if the last frame is incomplete.
    @discardableResult
    public func finish() throws -> [UInt8] {
        if !isAtFrameBoundary {
            throw ZstdError(.truncated, operation: "decompress", message: "the input ends inside a zstd frame")
        }
        return []
    }
}
