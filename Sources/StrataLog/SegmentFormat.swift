import Foundation

/// A segment's manifest entry (`Specs/0004-event-log.md` §7.2): where its events are, frame
/// by frame.
struct SegmentDescriptor: Sendable, Hashable {
    struct Frame: Sendable, Hashable {
        let first: UInt64
        let last: UInt64
        let offset: UInt64
        let compressedLength: UInt64
        let rawLength: UInt64
    }

    static let formatVersion: UInt8 = 1

    let fileName: String
    let first: UInt64
    let last: UInt64
    let rawBytes: UInt64
    let compressedBytes: UInt64
    let dictionaryFileName: String?
    let frames: [Frame]

    var info: SegmentInfo {
        SegmentInfo(
            fileName: fileName, sequences: first...last, rawBytes: Int(rawBytes), compressedBytes: Int(compressedBytes),
            frameCount: frames.count, dictionaryFileName: dictionaryFileName)
    }

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 64 + frames.count * 40)
        w.byte(Self.formatVersion)
        w.string(fileName)
        w.uint64(first)
        w.uint64(last)
        w.uint64(rawBytes)
        w.uint64(compressedBytes)
        if let dictionaryFileName {
            w.byte(1)
            w.string(dictionaryFileName)
        } else {
            w.byte(0)
        }
        w.varint(frames.count)
        for frame in frames {
            w.uint64(frame.first)
            w.uint64(frame.last)
            w.uint64(frame.offset)
            w.uint64(frame.compressedLength)
            w.uint64(frame.rawLength)
        }
        let crc = w.bytes.withUnsafeBytes { CRC32C.checksum($0) }
        w.uint32(crc)
        return w.bytes
    }

    static func decode(_ bytes: UnsafeRawBufferPointer, context: String) throws(LogError) -> SegmentDescriptor {
        guard bytes.count > 4 else { throw .malformed("\(context): too short") }
        let body = UnsafeRawBufferPointer(rebasing: bytes[0..<(bytes.count - 4)])
        let stored = readBigEndian(bytes, at: bytes.count - 4, count: 4) ?? 0
        guard UInt64(CRC32C.checksum(body)) == stored else { throw .checksumMismatch("\(context): manifest entry") }
        var r = ByteReader(body, context: context)
        let version = try r.byte()
        guard version <= formatVersion else {
            throw .unsupportedFormatVersion(found: Int(version), supported: Int(formatVersion), context: context)
        }
        guard version >= 1 else { throw .malformed("\(context): version 0, which no Strata writes") }
        let fileName = try r.string()
        let first = try r.uint64()
        let last = try r.uint64()
        let raw = try r.uint64()
        let compressed = try r.uint64()
        let dictionary: String?
        switch try r.byte() {
        case 0: dictionary = nil
        case 1: dictionary = try r.string()
        case let other: throw r.failure("dictionary flag \(other) is neither 0 nor 1")
        }
        let count = try r.count(limit: r.remaining / 40 + 1)
        var frames: [Frame] = []
        frames.reserveCapacity(count)
        for _ in 0..<count {
            frames.append(
                Frame(
                    first: try r.uint64(), last: try r.uint64(), offset: try r.uint64(), compressedLength: try r.uint64(),
                    rawLength: try r.uint64()))
        }
        guard r.isAtEnd else { throw r.failure("trailing bytes") }
        // A checksum only proves the entry is what was written: check it also makes sense,
        // so no reader computes with impossible numbers or opens a path outside the folder.
        guard !fileName.isEmpty, fileName != ".", fileName != "..", !fileName.contains("/"), !fileName.contains("\0") else {
            throw .malformed("\(context): the file name \(fileName.debugDescription) is not a plain file name")
        }
        if let dictionary, dictionary.isEmpty || dictionary == "." || dictionary == ".." || dictionary.contains("/") || dictionary.contains("\0") {
            throw .malformed("\(context): the dictionary name \(dictionary.debugDescription) is not a plain file name")
        }
        guard first >= 1, first <= last, last < UInt64.max else { throw .malformed("\(context): events \(first)…\(last) is not a range") }
        let limit = UInt64(Int.max)
        guard raw <= limit, compressed <= limit else { throw .malformed("\(context): sizes \(raw)/\(compressed) out of range") }
        var next = first
        for (index, frame) in frames.enumerated() {
            guard frame.first == next, frame.first <= frame.last, frame.last <= last else {
                throw .malformed("\(context): frame \(index) holds events \(frame.first)…\(frame.last), expected from \(next) within \(first)…\(last)")
            }
            guard frame.offset <= limit, frame.compressedLength <= limit, frame.rawLength <= limit,
                frame.offset <= limit - frame.compressedLength
            else {
                throw .malformed("\(context): frame \(index)'s offset and lengths are out of range")
            }
            next = frame.last + 1
        }
        guard !frames.isEmpty else { throw .malformed("\(context): no frames, so events \(first)…\(last) are nowhere") }
        guard next == last + 1 else {
            throw .malformed("\(context): the frames end at \(next - 1), the segment at \(last)")
        }
        return SegmentDescriptor(
            fileName: fileName, first: first, last: last, rawBytes: raw, compressedBytes: compressed,
            dictionaryFileName: dictionary, frames: frames)
    }

    /// `00000000000000000001-00000000000000050000.zst`: sorts by sequence.
    static func fileName(first: UInt64, last: UInt64, suffix: String) -> String {
        func padded(_ n: UInt64) -> String {
            let digits = String(n)
            return String(repeating: "0", count: max(0, 20 - digits.count)) + digits
        }
        return "\(padded(first))-\(padded(last)).\(suffix)"
    }
}

/// The decompressed content of a frame: `[u32 BE length][event bytes]`, repeated.
enum FrameContent {
    static func append(_ event: [UInt8], to frame: inout [UInt8]) {
        frame.append(contentsOf: bigEndianBytes(UInt32(event.count)))
        frame.append(contentsOf: event)
    }

    /// Splits a frame into its events' bytes.
    static func split(_ frame: [UInt8], context: String) throws(LogError) -> [[UInt8]] {
        var events: [[UInt8]] = []
        var offset = 0
        while offset < frame.count {
            guard frame.count - offset >= 4 else { throw .malformed("\(context): a cut length at byte \(offset)") }
            let length = Int(UInt32(frame[offset]) << 24 | UInt32(frame[offset + 1]) << 16 | UInt32(frame[offset + 2]) << 8 | UInt32(frame[offset + 3]))
            offset += 4
            guard length <= frame.count - offset else {
                throw .malformed("\(context): an event of \(length) bytes at byte \(offset) runs past the frame's end")
            }
            events.append(Array(frame[offset..<(offset + length)]))
            offset += length
        }
        return events
    }
}
