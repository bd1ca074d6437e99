internal import Foundation

// MARK: - Parsing

/// A JSON syntax error with its line and column (both from 1).
struct JSONSyntaxError: Error, Sendable, CustomStringConvertible {
    var message: String
    var line: Int
    var column: Int
    var description: String { "JSON syntax error at line \(line), column \(column): \(message)" }
}

extension JSONValue {
    /// Parses one JSON document (RFC 8259) from UTF-8 bytes.
    static func parse(_ data: Data) throws(JSONSyntaxError) -> JSONValue {
        var parser = JSONParser(bytes: Array(data))
        // The file must be UTF-8 (spec 0002 §1): a byte sequence that isn't is an error at its
        // place, not a U+FFFD in a name or a value.
        if let bad = Self.firstInvalidUTF8(parser.bytes) {
            parser.index = bad
            throw parser.error("the file is not UTF-8 here (byte 0x\(String(parser.bytes[bad], radix: 16, uppercase: true)))")
        }
        return try parser.parseDocument()
    }

    /// The offset of the first byte that doesn't begin a well-formed UTF-8 sequence, or nil.
    static func firstInvalidUTF8(_ bytes: [UInt8]) -> Int? {
        var offset = 0
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): offset += UTF8.width(scalar)
            case .emptyInput: return nil
            case .error: return offset
            }
        }
    }
}

/// A recursive-descent JSON parser over bytes; depth is bounded so hostile input cannot
/// overflow the stack.
private struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    var depth = 0
    static let maximumDepth = 512

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseDocument() throws(JSONSyntaxError) -> JSONValue {
        // A UTF-8 byte order mark is tolerated, as editors sometimes write one.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        if index < bytes.count { throw error("unexpected text after the end of the document") }
        return value
    }

    func error(_ message: String) -> JSONSyntaxError {
        var line = 1
        var column = 1
        for b in bytes[..<min(index, bytes.count)] {
            if b == UInt8(ascii: "\n") { line += 1; column = 1 } else if b & 0xC0 != 0x80 { column += 1 }
        }
        return JSONSyntaxError(message: message, line: line, column: column)
    }

    mutating func skipWhitespace() {
        while index < bytes.count,
            bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09
        {
            index += 1
        }
    }

    mutating func parseValue() throws(JSONSyntaxError) -> JSONValue {
        guard index < bytes.count else { throw error("expected a value but the document ended") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectWord("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("expected a value")
        }
    }

    mutating func expectWord(_ word: String) throws(JSONSyntaxError) {
        let w = Array(word.utf8)
        guard index + w.count <= bytes.count, Array(bytes[index..<index + w.count]) == w else {
            throw error("expected '\(word)'")
        }
        index += w.count
    }

    mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        if depth > JSONParser.maximumDepth { throw error("nesting deeper than \(JSONParser.maximumDepth) levels") }
    }

    mutating func parseObject() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var members: [(key: String, value: JSONValue)] = []
        // The names seen, for the duplicate check: searching `members` each time made a large
        // object quadratic to parse.
        var names: Set<String> = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw error("expected a member name in double quotes")
            }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':' after member name") }
            index += 1
            skipWhitespace()
            let value = try parseValue()
            guard names.insert(key).inserted else { throw error("duplicate member name \"\(key)\"") }
            members.append((key, value))
            skipWhitespace()
            guard index < bytes.count else { throw error("expected ',' or '}' but the document ended") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
            throw error("expected ',' or '}'")
        }
    }

    mutating func parseArray() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
        while true {
            skipWhitespace()
            items.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw error("expected ',' or ']' but the document ended") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
            throw error("expected ',' or ']'")
        }
    }

    mutating func parseNumber() throws(JSONSyntaxError) -> JSONValue {
        let start = index
        func digits(_ p: inout JSONParser) -> Int {
            var n = 0
            while p.index < p.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(p.bytes[p.index]) {
                p.index += 1
                n += 1
            }
            return n
        }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        let integerStart = index
        let integerDigits = digits(&self)
        guard integerDigits > 0 else { throw error("expected digits in number") }
        // RFC 8259: no leading zeros (`01` is not a JSON number).
        if integerDigits > 1, bytes[integerStart] == UInt8(ascii: "0") {
            index = integerStart
            throw error("a number can't start with 0 followed by more digits")
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits(&self) > 0 else { throw error("expected digits after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits(&self) > 0 else { throw error("expected digits in exponent") }
        }
        return .number(String(decoding: bytes[start..<index], as: UTF8.self))
    }

    mutating func parseString() throws(JSONSyntaxError) -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var run: [UInt8] = []
        func flush(_ run: inout [UInt8], _ scalars: inout String.UnicodeScalarView) {
            if !run.isEmpty {
                scalars.append(contentsOf: String(decoding: run, as: UTF8.self).unicodeScalars)
                run.removeAll(keepingCapacity: true)
            }
        }
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                index += 1
                flush(&run, &scalars)
                return String(scalars)
            }
            if b < 0x20 { throw error("control character in string") }
            if b != UInt8(ascii: "\\") {
                run.append(b)
                index += 1
                continue
            }
            flush(&run, &scalars)
            index += 1
            guard index < bytes.count else { throw error("unterminated escape") }
            let e = bytes[index]
            index += 1
            switch e {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                var code = try hex4()
                if (0xD800..<0xDC00).contains(code) {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                    else { throw error("unpaired surrogate in \\u escape") }
                    index += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw error("invalid low surrogate in \\u escape") }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let scalar = Unicode.Scalar(code) else { throw error("invalid \\u escape") }
                scalars.append(scalar)
            default:
                index -= 1
                throw error("invalid escape character")
            }
        }
    }

    mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count,
            let v = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16)
        else { throw error("expected four hexadecimal digits") }
        index += 4
        return v
    }
}
