// MARK: - VersionHashEncoder

/// The canonical byte encoding hashed for version hashes (see `Specs/0002-model-file.md`,
/// "Version hashes"). Strings are a big-endian `UInt32` byte count and UTF-8; Booleans one
/// byte; an optional string a presence byte then the string; lists a `UInt32` count.
struct VersionHashEncoder {
    var bytes: [UInt8] = []

    mutating func string(_ s: String) {
        let utf8 = Array(s.utf8)
        count(utf8.count)
        bytes += utf8
    }

    mutating func optional(_ s: String?) {
        if let s {
            bytes.append(1)
            string(s)
        } else {
            bytes.append(0)
        }
    }

    mutating func bool(_ b: Bool) { bytes.append(b ? 1 : 0) }

    mutating func count(_ n: Int) {
        let v = UInt32(clamping: n)
        bytes += [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
    }
}
