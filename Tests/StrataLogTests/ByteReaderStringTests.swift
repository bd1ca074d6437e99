import Foundation
import Testing

@testable import StrataLog

@Suite("Decoding strings")
struct ByteReaderStringTests {
    /// `text`'s bytes as the log writes a string (length, then UTF-8), read back.
    private func decode(_ bytes: [UInt8]) throws -> String {
        var writer = ByteWriter()
        writer.varint(bytes.count)
        let framed = writer.bytes + bytes
        return try framed.withUnsafeBytes { raw in
            var reader = ByteReader(raw, context: "test")
            return try reader.string()
        }
    }

    @Test("a non-ASCII or invalid byte is seen at every position of every length up to 40")
    func everyPosition() throws {
        for length in 0...40 {
            let ascii = (0..<length).map { UInt8(0x61 + $0 % 26) }
            #expect(try decode(ascii) == String(decoding: ascii, as: UTF8.self))
            for position in 0..<length {
                // "é" (two bytes) in place of one ASCII byte: decoded, not mangled.
                var accented = ascii
                accented.replaceSubrange(position...position, with: [0xC3, 0xA9])
                #expect(try decode(accented) == String(decoding: accented, as: UTF8.self))
                #expect(try decode(accented).unicodeScalars.contains("é"))
                // A byte that is never valid UTF-8: refused, not repaired.
                var invalid = ascii
                invalid[position] = 0xFF
                #expect(throws: LogError.self) { try decode(invalid) }
            }
        }
    }

    @Test("the ASCII check agrees with a byte-by-byte one at every alignment")
    func asciiCheckAgrees() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let count = Int.random(in: 0...48, using: &generator)
            var bytes = (0..<(count + 7)).map { _ in UInt8.random(in: 0...0x7F, using: &generator) }
            if Bool.random(using: &generator), !bytes.isEmpty { bytes[Int.random(in: 0..<bytes.count, using: &generator)] |= 0x80 }
            let start = Int.random(in: 0...7, using: &generator)
            bytes.withUnsafeBytes { raw in
                let slice = UnsafeRawBufferPointer(rebasing: raw[start..<(start + count)])
                #expect(ByteReader.isASCII(slice) == slice.allSatisfy { $0 < 0x80 }, "\(Array(slice))")
            }
        }
    }
}
