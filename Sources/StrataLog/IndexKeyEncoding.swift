import Foundation
public import StrataModel

/// Order-preserving, prefix-free encoding of attribute values for index keys
/// (`Specs/0004-event-log.md` §5): comparing encodings byte by byte gives the values' order
/// (nil first), and no encoding is a prefix of another, so a tuple's encodings can be
/// concatenated and followed by the object's key.
public enum IndexKeyEncoding {
    /// The longest stored slice of a string, data or URI value; longer ones are cut and
    /// marked, so scans over them re-check the full value in the record.
    public static let maximumComponentLength = 120

    /// Type tags; nil sorts before every value.
    enum Tag: UInt8 {
        case null = 0x00
        case integer = 0x10
        case real = 0x11
        case boolean = 0x12
        case date = 0x13
        case string = 0x20
        case data = 0x21
        case uuid = 0x22
        case uri = 0x23
        case transformable = 0x24
    }

    /// Appends the encoding of `value` (nil for no value) to `bytes`. Returns false when the
    /// key doesn't identify the value alone: it was longer than ``maximumComponentLength``
    /// and was cut, or it is a decimal other decimals share the key of.
    @discardableResult
    public static func append(_ value: AttributeValue?, to bytes: inout [UInt8]) -> Bool {
        guard let value else {
            bytes.append(Tag.null.rawValue)
            return true
        }
        switch value {
        case .int16(let v): appendInteger(Int64(v), to: &bytes)
        case .int32(let v): appendInteger(Int64(v), to: &bytes)
        case .int64(let v): appendInteger(v, to: &bytes)
        case .double(let v): appendReal(v, tag: .real, to: &bytes)
        case .float(let v): appendReal(Double(v), tag: .real, to: &bytes)
        case .decimal(let v):
            let double = NSDecimalNumber(decimal: v).doubleValue
            appendReal(double, tag: .real, to: &bytes)
            // Different decimals can share their nearest double: the key stands for all of
            // them, as a cut string's does, unless the decimal is a whole number the double
            // holds exactly.
            guard let whole = Int64(exactly: double) else { return false }
            return Decimal(whole) == v
        case .boolean(let v):
            bytes.append(Tag.boolean.rawValue)
            bytes.append(v ? 1 : 0)
        case .date(let v): appendReal(v.timeIntervalSinceReferenceDate, tag: .date, to: &bytes)
        case .string(let v):
            // ASCII is already NFC: escape the string's own bytes, without a copy.
            if let complete = v.utf8.withContiguousStorageIfAvailable({ raw in
                raw.allSatisfy({ $0 < 0x80 }) ? appendEscaped(raw, tag: .string, to: &bytes) : nil
            }), let complete {
                return complete
            }
            return appendEscaped(canonicalBytes(v), tag: .string, to: &bytes)
        case .binaryData(let v): return appendEscaped(Array(v), tag: .data, to: &bytes)
        case .uuid(let v):
            bytes.append(Tag.uuid.rawValue)
            withUnsafeBytes(of: v.uuid) { bytes.append(contentsOf: $0) }
        case .uri(let v): return appendEscaped(Array(v.absoluteString.utf8), tag: .uri, to: &bytes)
        case .transformable(let v): return appendEscaped(Array(v), tag: .transformable, to: &bytes)
        }
        return true
    }

    /// The encoding of one value.
    public static func encode(_ value: AttributeValue?) -> [UInt8] {
        var bytes: [UInt8] = []
        append(value, to: &bytes)
        return bytes
    }

    /// The UTF-8 bytes of `string` in Unicode Normalization Form C. Swift compares strings
    /// by canonical equivalence, ordering them as their NFC scalars; so comparing these bytes
    /// compares the strings as Swift (and the predicate language) does, and canonically
    /// equivalent strings ("é" precomposed or as "e" + U+0301) share one key.
    static func canonicalBytes(_ string: String) -> [UInt8] {
        let raw = Array(string.utf8)
        if raw.allSatisfy({ $0 < 0x80 }) { return raw }  // ASCII is already NFC
        return Array(string.precomposedStringWithCanonicalMapping.utf8)
    }

    private static func appendInteger(_ v: Int64, to bytes: inout [UInt8]) {
        bytes.append(Tag.integer.rawValue)
        let flipped = UInt64(bitPattern: v) ^ (1 << 63)
        withUnsafeBytes(of: flipped.bigEndian) { bytes.append(contentsOf: $0) }
    }

    private static func appendReal(_ v: Double, tag: Tag, to bytes: inout [UInt8]) {
        bytes.append(tag.rawValue)
        // -0.0 and 0.0 are equal values: give them one key. NaN sorts after everything.
        let value = v == 0 ? 0.0 : v
        let bits = value.bitPattern
        let ordered = (bits & (1 << 63)) != 0 ? ~bits : bits | (1 << 63)
        withUnsafeBytes(of: ordered.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// 0x00 bytes become 0x00 0xFF; the value ends with 0x00 0x00, or 0x00 0x01 if cut.
    private static func appendEscaped(_ raw: [UInt8], tag: Tag, to bytes: inout [UInt8]) -> Bool {
        raw.withUnsafeBufferPointer { appendEscaped($0, tag: tag, to: &bytes) }
    }

    private static func appendEscaped(_ raw: UnsafeBufferPointer<UInt8>, tag: Tag, to bytes: inout [UInt8]) -> Bool {
        bytes.append(tag.rawValue)
        let cut = raw.count > maximumComponentLength
        let kept = UnsafeBufferPointer(rebasing: raw.prefix(maximumComponentLength))
        if kept.contains(0) {
            for b in kept {
                bytes.append(b)
                if b == 0 { bytes.append(0xFF) }
            }
        } else {
            bytes.append(contentsOf: kept)
        }
        bytes.append(0)
        bytes.append(cut ? 1 : 0)
        return !cut
    }
}
