import Foundation

// MARK: - Writing

/// Appends the primitive encodings of `Specs/0004-event-log.md` §2 to a byte buffer.
struct ByteWriter {
    var bytes: [UInt8] = []

    init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    /// Unsigned LEB128.
    mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    mutating func varint(_ value: Int) { varint(UInt64(clamping: value)) }

    mutating func uint16(_ value: UInt16) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func uint32(_ value: UInt32) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func uint64(_ value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// A length-prefixed UTF-8 string.
    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            varint(utf8.count)
            bytes.append(contentsOf: utf8)
        }
    }

    /// Length-prefixed raw bytes.
    mutating func data(_ value: some Collection<UInt8>) {
        varint(value.count)
        bytes.append(contentsOf: value)
    }

    mutating func raw(_ value: some Sequence<UInt8>) { bytes.append(contentsOf: value) }
}

// MARK: - Reading

/// Reads what ``ByteWriter`` wrote, failing with a ``LogError/malformed(_:)`` naming the
/// offset instead of trapping on short or hostile input.
struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    private(set) var offset = 0
    /// What is being decoded, for error messages (such as `event 12`).
    let context: String

    init(_ bytes: UnsafeRawBufferPointer, context: String) {
        self.bytes = bytes
        self.context = context
    }

    var isAtEnd: Bool { offset >= bytes.count }
    var remaining: Int { bytes.count - offset }

    func failure(_ what: String) -> LogError {
        .malformed("\(context): \(what) at byte \(offset) of \(bytes.count)")
    }

    // The small readers are inlined (every value of every record goes through them); what
    // builds an error message stays out of line.

    @inline(__always)
    mutating func byte() throws(LogError) -> UInt8 {
        guard offset < bytes.count else { throw endOfData() }
        defer { offset += 1 }
        return bytes[offset]
    }

    @inline(never)
    func endOfData() -> LogError { failure("unexpected end of data") }

    /// Unsigned LEB128; a one-byte value (most tags, codes and lengths) without a loop.
    @inline(__always)
    mutating func varint() throws(LogError) -> UInt64 {
        if offset < bytes.count {
            let first = bytes[offset]
            if first < 0x80 {
                offset += 1
                return UInt64(first)
            }
        }
        return try longVarint()
    }

    @inline(never)
    mutating func longVarint() throws(LogError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            if shift == 63 && b > 1 { throw failure("varint overflows 64 bits") }
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 {
                // A last group of 0 makes the varint longer than the value needs: not what a
                // writer wrote (each value has one encoding), so damage.
                if b == 0 && shift > 0 { throw failure("overlong varint") }
                return result
            }
            shift += 7
            if shift > 63 { throw failure("varint longer than 10 bytes") }
        }
    }

    /// A varint that must fit an `Int` and be at most `limit` (a count or a length).
    @inline(__always)
    mutating func count(limit: Int) throws(LogError) -> Int {
        let value = try varint()
        guard value <= UInt64(limit) else { throw countFailure(value, limit) }
        return Int(value)
    }

    @inline(never)
    func countFailure(_ value: UInt64, _ limit: Int) -> LogError { failure("count \(value) exceeds \(limit)") }

    mutating func uint16() throws(LogError) -> UInt16 {
        let hi = try byte()
        let lo = try byte()
        return UInt16(hi) << 8 | UInt16(lo)
    }

    /// A big-endian 32-bit integer, loaded in one piece.
    @inline(__always)
    mutating func uint32() throws(LogError) -> UInt32 {
        let raw = try rawBytes(4)
        return UInt32(bigEndian: raw.loadUnaligned(as: UInt32.self))
    }

    /// A big-endian 64-bit integer, loaded in one piece.
    @inline(__always)
    mutating func uint64() throws(LogError) -> UInt64 {
        let raw = try rawBytes(8)
        return UInt64(bigEndian: raw.loadUnaligned(as: UInt64.self))
    }

    @inline(__always)
    mutating func rawBytes(_ n: Int) throws(LogError) -> UnsafeRawBufferPointer {
        guard n >= 0, n <= remaining else { throw shortFailure(n) }
        defer { offset += n }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + n)])
    }

    @inline(never)
    func shortFailure(_ n: Int) -> LogError { failure("\(n) bytes wanted, \(remaining) left") }

    mutating func data() throws(LogError) -> [UInt8] {
        let n = try count(limit: remaining)
        return Array(try rawBytes(n))
    }

    mutating func string() throws(LogError) -> String {
        let n = try count(limit: remaining)
        let raw = try rawBytes(n)
        // ASCII is valid UTF-8: decode it directly (the validating initializer is generic
        // and unspecialized here, several times slower per string).
        if Self.isASCII(raw) {
            // Up to 15 bytes the string is held inline: the uninitialized-capacity initializer
            // (inlined) copies the bytes in and checks them for ASCII with a mask, where
            // `String(decoding:as:)` calls into the runtime to scan them again.
            if n <= 15 {
                return String(unsafeUninitializedCapacity: n) { buffer in
                    UnsafeMutableRawBufferPointer(buffer).copyMemory(from: raw)
                    return n
                }
            }
            return String(decoding: raw, as: UTF8.self)
        }
        guard let s = String(validating: raw, as: UTF8.self) else { throw failure("invalid UTF-8 in a string") }
        return s
    }

    /// Whether every byte is below 0x80: eight bytes at a time, then the rest one by one.
    @inline(__always)
    static func isASCII(_ raw: UnsafeRawBufferPointer) -> Bool {
        guard let base = raw.baseAddress else { return true }
        let count = raw.count
        var index = 0
        var high: UInt64 = 0
        while index + 8 <= count {
            high |= base.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < count {
            high |= UInt64(base.load(fromByteOffset: index, as: UInt8.self))
            index += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }
}
