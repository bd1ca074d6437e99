import Foundation
import StrataTestSupport
import Testing

@testable import StrataLog

@Suite("Decoding primitives: varints and strings")
struct ByteReaderStringTests {
    /// `bytes` framed as the log writes a string (length, then UTF-8), read back, with
    /// `trailing` bytes after it (what follows a string in a record).
    private func decode(_ bytes: [UInt8], trailing: [UInt8] = []) throws -> String {
        var writer = ByteWriter()
        writer.varint(bytes.count)
        let framed = writer.bytes + bytes + trailing
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

    @Test("a string followed by more bytes (a record's next values): only its own bytes decide ASCII, at every length and position")
    func trailingBytesIgnored() throws {
        for trailing in [[UInt8](repeating: 0xFF, count: 16), [UInt8](repeating: 0x00, count: 16), [UInt8](repeating: 0x80, count: 3)] {
            for length in 0...20 {
                let ascii = (0..<length).map { UInt8(0x61 + $0 % 26) }
                #expect(try decode(ascii, trailing: trailing) == String(decoding: ascii, as: UTF8.self))
                for position in 0..<length {
                    var accented = ascii
                    accented.replaceSubrange(position...position, with: [0xC3, 0xA9])
                    #expect(try decode(accented, trailing: trailing) == String(decoding: accented, as: UTF8.self))
                    var invalid = ascii
                    invalid[position] = 0xFF
                    #expect(throws: LogError.self) { try decode(invalid, trailing: trailing) }
                }
            }
        }
    }

    @Test("strings of every length up to 40 read back to back: each ends where the next begins")
    func backToBack() throws {
        let ascii = (0...40).map { length in String((0..<length).map { Character(UnicodeScalar(UInt8(0x41 + $0 % 26))) }) }
        let texts = ascii + ["é", "", "naïve café au lait"]
        var writer = ByteWriter()
        for text in texts { writer.string(text) }
        writer.byte(0xAB)
        let (read, last) = try writer.bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw, context: "test")
            var read: [String] = []
            for _ in texts { read.append(try reader.string()) }
            return (read, try reader.byte())
        }
        #expect(read == texts)
        #expect(read.map { Array($0.utf8) } == texts.map { Array($0.utf8) })
        #expect(last == 0xAB)
    }

    @Test("the ASCII check agrees with a byte-by-byte one at every alignment")
    func asciiCheckAgrees() {
        var generator = SeededGenerator(seed: 0xA5C11)
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

    @Test("varints of every length read back; truncated, overlong and overflowing ones are refused by name")
    func varints() throws {
        var values: [UInt64] = [0, 1, 0x7F, 0x80, 300, 0x3FFF, 0x4000, UInt64(UInt32.max), UInt64.max - 1, UInt64.max]
        for shift in 0..<64 { values.append(1 << UInt64(shift)) }
        for value in values {
            var writer = ByteWriter()
            writer.varint(value)
            writer.byte(0xAB)
            let decoded = try writer.bytes.withUnsafeBytes { raw throws(LogError) in
                var reader = ByteReader(raw, context: "test")
                let decoded = try reader.varint()
                #expect(try reader.byte() == 0xAB, "varint \(value) read the wrong number of bytes")
                return decoded
            }
            #expect(decoded == value)
        }
        func failure(_ bytes: [UInt8]) -> String {
            bytes.withUnsafeBytes { raw in
                var reader = ByteReader(raw, context: "test")
                do {
                    _ = try reader.varint()
                    return "no error"
                } catch {
                    return "\(error)"
                }
            }
        }
        #expect(failure([]).contains("unexpected end of data"))
        #expect(failure([0x80, 0x80]).contains("unexpected end of data"))
        let overlong = failure([UInt8](repeating: 0x80, count: 10) + [0x00])
        #expect(overlong.contains("longer than 10 bytes") || overlong.contains("overflows"))
        #expect(failure([UInt8](repeating: 0xFF, count: 9) + [0x02]).contains("overflows 64 bits"))
        // A count over its limit names both.
        let over = [UInt8]([0x05]).withUnsafeBytes { raw in
            var reader = ByteReader(raw, context: "test")
            do {
                _ = try reader.count(limit: 4)
                return "no error"
            } catch {
                return "\(error)"
            }
        }
        #expect(over.contains("count 5 exceeds 4"))
    }
}
