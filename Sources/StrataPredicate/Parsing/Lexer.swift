internal import Foundation

// MARK: - Lexer

/// Splits a format string into tokens, substituting `%` arguments as it goes (arguments
/// are consumed in textual order, as `NSPredicate` does).
struct Lexer {
    private let scalars: [Unicode.Scalar]
    private var index = 0
    private let arguments: [Any]
    private(set) var argumentsUsed = 0

    init(format: String, arguments: [Any]) {
        scalars = Array(format.unicodeScalars)
        self.arguments = arguments
    }

    // MARK: - Reserved words

    /// Words that are keywords wherever they appear as a bare word; a key with one of these
    /// names must be written with `#`.
    static let reservedWords: Set<String> = [
        "AND", "OR", "NOT", "IN", "BETWEEN", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE",
        "MATCHES", "ANY", "ALL", "NONE", "SOME", "TRUE", "FALSE", "YES", "NO", "NIL", "NULL",
        "SELF", "TRUEPREDICATE", "FALSEPREDICATE",
        // Keywords only inside brackets, escaped when printed so subscripts stay unambiguous.
        "FIRST", "LAST", "SIZE",
    ]

    /// Whether `word` must be escaped with `#` to be read as a key.
    static func isReservedWord(_ word: String) -> Bool {
        keyword(word).map(reservedWords.contains) ?? false
    }

    /// `word` as keywords are matched: upper-cased, ASCII letters only. A word holding any
    /// non-ASCII scalar is never a keyword (nil): before, keywords were matched with
    /// `uppercased()` and Swift's canonical `==`, so `ın` (dotless i) read as `IN`, `ſelf`
    /// (long s) as `SELF` and `LI\u{212A}E` (KELVIN SIGN, canonically `K`) as `LIKE`.
    static func keyword(_ word: String) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(word.utf8.count)
        for byte in word.utf8 {
            guard byte < 0x80 else { return nil }
            bytes.append(byte >= 0x61 && byte <= 0x7A ? byte - 0x20 : byte)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether `word` can be written as a bare key: an identifier that is not reserved.
    static func isPlainIdentifier(_ word: String) -> Bool {
        guard let first = word.unicodeScalars.first, isIdentifierStart(first) else { return false }
        return word.unicodeScalars.allSatisfy(isIdentifierPart)
    }

    static func isIdentifierStart(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "_" || scalar.properties.isAlphabetic
    }

    static func isIdentifierPart(_ scalar: Unicode.Scalar) -> Bool {
        isIdentifierStart(scalar) || ("0"..."9").contains(scalar)
    }

    // MARK: - Tokenizing

    /// All tokens, ending with `.end`.
    mutating func tokenize() throws -> [Token] {
        var tokens: [Token] = []
        while true {
            let token = try next()
            tokens.append(token)
            if token.kind == .end { return tokens }
        }
    }

    private func peek(_ offset: Int = 0) -> Unicode.Scalar? {
        let at = index + offset
        return at < scalars.count ? scalars[at] : nil
    }

    private func syntaxError(_ message: String, at position: Int, expected: String? = nil) -> FormatPredicateError {
        FormatPredicateError(kind: .syntax, message: message, position: position, expected: expected)
    }

    private mutating func next() throws -> Token {
        while let scalar = peek(), scalar.properties.isWhitespace { index += 1 }
        let start = index
        guard let scalar = peek() else { return Token(kind: .end, position: start) }

        if Lexer.isIdentifierStart(scalar) {
            return Token(kind: .identifier(readWord()), position: start)
        }
        if ("0"..."9").contains(scalar) || (scalar == "." && peek(1).map { ("0"..."9").contains($0) } == true) {
            return try readNumber()
        }
        switch scalar {
        case "\"", "'":
            return Token(kind: .string(try readString()), position: start)
        case "#", "$", "@":
            index += 1
            guard let first = peek(), Lexer.isIdentifierStart(first) else {
                throw syntaxError("'\(scalar)' must be followed by a name", at: start, expected: "a name")
            }
            let word = readWord()
            switch scalar {
            case "#": return Token(kind: .escapedIdentifier(word), position: start)
            case "$": return Token(kind: .variable(word), position: start)
            default: return Token(kind: .atIdentifier(word), position: start)
            }
        case "%":
            return try readArgument()
        default:
            return try readSymbol()
        }
    }

    private mutating func readWord() -> String {
        var word = String.UnicodeScalarView()
        while let scalar = peek(), Lexer.isIdentifierPart(scalar) {
            word.append(scalar)
            index += 1
        }
        return String(word)
    }

    // MARK: - Symbols

    private static let symbols: [String] = [
        // Longest first, so `==` wins over `=`.
        "**", "==", "!=", "<>", "<=", "=<", ">=", "=>", "&&", "||",
        "=", "<", ">", "!", "(", ")", "{", "}", "[", "]", ",", ".", "+", "-", "*", "/",
        // Only in Core Data's spelling of a built-in function call, `lowercase:(name)`.
        ":",
    ]

    private mutating func readSymbol() throws -> Token {
        let start = index
        for symbol in Lexer.symbols {
            let symbolScalars = Array(symbol.unicodeScalars)
            if (0..<symbolScalars.count).allSatisfy({ peek($0) == symbolScalars[$0] }) {
                index += symbolScalars.count
                return Token(kind: .symbol(symbol), position: start)
            }
        }
        let scalar = peek().map { String($0) } ?? ""
        throw syntaxError("unexpected character '\(scalar.debugDescription.dropFirst().dropLast())'", at: start,
                          expected: "an expression, an operator or punctuation")
    }

    // MARK: - Numbers

    private mutating func readNumber() throws -> Token {
        let start = index
        if peek() == "0", let radixMark = peek(1), let radix = Lexer.radix(radixMark) {
            index += 2
            var digits = ""
            while let scalar = peek(), Lexer.isIdentifierPart(scalar) {
                digits.unicodeScalars.append(scalar)
                index += 1
            }
            guard !digits.isEmpty else {
                throw syntaxError("number prefix without digits", at: start, expected: "digits")
            }
            guard let value = Int(digits, radix: radix) else {
                let inRange = digits.allSatisfy { $0.isHexDigit && Int(String($0), radix: 16).map { $0 < radix } == true }
                throw syntaxError(inRange ? "integer literal is too large" : "invalid digit in base-\(radix) literal",
                                  at: start, expected: inRange ? nil : "base-\(radix) digits")
            }
            return Token(kind: .integer(value), position: start)
        }
        var text = ""
        var isDouble = false
        func readDigits() {
            while let scalar = peek(), ("0"..."9").contains(scalar) {
                text.unicodeScalars.append(scalar)
                index += 1
            }
        }
        readDigits()
        if peek() == ".", let after = peek(1), ("0"..."9").contains(after) {
            isDouble = true
            text += "."
            index += 1
            readDigits()
        }
        if let e = peek(), e == "e" || e == "E" {
            var offset = 1
            if let sign = peek(1), sign == "+" || sign == "-" { offset = 2 }
            if let digit = peek(offset), ("0"..."9").contains(digit) {
                isDouble = true
                for _ in 0..<offset {
                    if let scalar = peek() { text.unicodeScalars.append(scalar) }
                    index += 1
                }
                readDigits()
            }
        }
        if let scalar = peek(), Lexer.isIdentifierPart(scalar) {
            throw syntaxError("invalid character '\(scalar)' in number", at: index, expected: "a digit, an operator or punctuation")
        }
        if text.hasPrefix(".") { text = "0" + text }
        if !isDouble, let value = Int(text) {
            return Token(kind: .integer(value), position: start)
        }
        // Integers too large for Int become doubles, as NSNumber literals do.
        guard let value = Double(text) else {
            throw syntaxError("invalid number '\(text)'", at: start, expected: "a number")
        }
        var token = Token(kind: .double(value), position: start)
        token.isIntMinMagnitude = !isDouble && text.drop { $0 == "0" } == "9223372036854775808"
        return token
    }

    private static func radix(_ scalar: Unicode.Scalar) -> Int? {
        switch scalar {
        case "x", "X": 16
        case "o", "O": 8
        case "b", "B": 2
        default: nil
        }
    }

    // MARK: - Strings

    private mutating func readString() throws -> String {
        let start = index
        guard let quote = peek() else { throw syntaxError("expected a string", at: start) }
        index += 1
        var result = String.UnicodeScalarView()
        while true {
            guard let scalar = peek() else {
                throw syntaxError("unterminated string", at: start, expected: "a closing \(quote)")
            }
            index += 1
            if scalar == quote { return String(result) }
            if scalar == "%", peek() == "%" {
                // `%%` inside a quoted string is one percent sign, as in printf.
                index += 1
                result.append("%")
                continue
            }
            guard scalar == "\\" else {
                result.append(scalar)
                continue
            }
            let escapeStart = index - 1
            guard let escaped = peek() else {
                throw syntaxError("unterminated string", at: start, expected: "a closing \(quote)")
            }
            index += 1
            switch escaped {
            case "n": result.append("\n")
            case "t": result.append("\t")
            case "r": result.append("\r")
            case "0": result.append("\0")
            case "\\", "'", "\"": result.append(escaped)
            case "u":
                result.append(try readUnicodeEscape(at: escapeStart))
            default:
                throw syntaxError("unknown escape '\\\(escaped)'", at: escapeStart,
                                  expected: "one of \\n \\t \\r \\0 \\\\ \\' \\\" \\uXXXX \\u{X…}")
            }
        }
    }

    private mutating func readUnicodeEscape(at escapeStart: Int) throws -> Unicode.Scalar {
        let braced = peek() == "{"
        let code = try readEscapeCode(at: escapeStart)
        guard (0xD800...0xDFFF).contains(code) else {
            guard let scalar = Unicode.Scalar(code) else {
                throw syntaxError("invalid unicode escape", at: escapeStart, expected: "hexadecimal digits of a Unicode scalar")
            }
            return scalar
        }
        // A UTF-16 surrogate: a high one written as `\uXXXX` and followed by a `\uXXXX` low
        // one is the pair's one scalar, as JSON and NSPredicate read `"\uD83D\uDE00"`
        // (before, both were refused as invalid escapes).
        if !braced, code < 0xDC00, peek() == "\\", peek(1) == "u", peek(2) != "{" {
            let resume = index
            index += 2
            if let low = try? readEscapeCode(at: resume), (0xDC00...0xDFFF).contains(low),
                let scalar = Unicode.Scalar(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
            {
                return scalar
            }
            index = resume
        }
        let hex = String(code, radix: 16, uppercase: true)
        throw syntaxError(
            code < 0xDC00
                ? "lone surrogate \\u\(hex) at position \(escapeStart): a high surrogate must be followed by a \\uDC00–\\uDFFF escape"
                : "lone surrogate \\u\(hex) at position \(escapeStart): a low surrogate must follow a \\uD800–\\uDBFF escape",
            at: escapeStart, expected: "a Unicode scalar, or a high surrogate escape followed by a low one")
    }

    /// The code point of a `\u` escape's `XXXX` or `{X…}` (the `\u` read): a number, not yet
    /// checked to be a scalar.
    private mutating func readEscapeCode(at escapeStart: Int) throws -> UInt32 {
        var hex = ""
        if peek() == "{" {
            index += 1
            while let scalar = peek(), scalar != "}", hex.count <= 8 {
                hex.unicodeScalars.append(scalar)
                index += 1
            }
            guard peek() == "}" else {
                throw syntaxError("unterminated \\u{…} escape", at: escapeStart, expected: "'}'")
            }
            index += 1
        } else {
            for _ in 0..<4 {
                guard let scalar = peek() else { break }
                hex.unicodeScalars.append(scalar)
                index += 1
            }
        }
        // Hexadecimal digits only: `UInt32(_:radix:)` also takes a sign ('\u+041' was "A").
        guard !hex.isEmpty, hex.count <= 8, hex.unicodeScalars.allSatisfy(\.properties.isASCIIHexDigit),
              let code = UInt32(hex, radix: 16)
        else {
            throw syntaxError("invalid unicode escape", at: escapeStart, expected: "hexadecimal digits of a Unicode scalar")
        }
        return code
    }

    // MARK: - Arguments

    private mutating func readArgument() throws -> Token {
        let start = index
        index += 1
        if peek() == "@" || peek() == "K" {
            let isKey = peek() == "K"
            index += 1
            let argument = try takeArgument(at: start, specifier: isKey ? "%K" : "%@")
            if isKey {
                return Token(kind: .keyPathArgument(try ArgumentConverter.keyPath(argument, index: argumentsUsed - 1, position: start)),
                             position: start)
            }
            return Token(kind: .argument(try ArgumentConverter.constant(argument, index: argumentsUsed - 1, position: start)),
                         position: start)
        }
        if peek() == "%" {
            throw syntaxError("'%%' is only meaningful inside a quoted string", at: start,
                              expected: "%@, %K, %d, %i, %f or another format specifier")
        }
        // Length modifiers are accepted and ignored: every integer argument becomes an Int.
        var modifier = ""
        while let scalar = peek(), "hlqLzjt".unicodeScalars.contains(scalar), modifier.count < 2 {
            modifier.unicodeScalars.append(scalar)
            index += 1
        }
        guard let conversion = peek() else {
            throw syntaxError("incomplete format specifier", at: start, expected: "%@, %K, %d, %i, %f, %s")
        }
        index += 1
        let specifier = "%" + modifier + String(conversion)
        let kind: ArgumentConverter.Conversion
        switch conversion {
        case "d", "i", "u", "o", "x", "X", "D", "U", "O": kind = .integer
        case "f", "F", "e", "E", "g", "G", "a", "A": kind = .double
        case "s", "S": kind = .string
        case "c", "C": kind = .character
        default:
            throw syntaxError("unsupported format specifier '\(specifier)'", at: start,
                              expected: "%@, %K, %d, %i, %f, %s")
        }
        let argument = try takeArgument(at: start, specifier: specifier)
        let constant = try ArgumentConverter.convert(argument, as: kind, specifier: specifier,
                                                     index: argumentsUsed - 1, position: start)
        return Token(kind: .argument(constant), position: start)
    }

    private mutating func takeArgument(at position: Int, specifier: String) throws -> Any? {
        guard argumentsUsed < arguments.count else {
            throw FormatPredicateError(
                kind: .missingArgument,
                message: "no argument for \(specifier) (argument \(argumentsUsed); \(arguments.count) given)",
                position: position, expected: "argument \(argumentsUsed)")
        }
        defer { argumentsUsed += 1 }
        return OptionalUnwrapper.flatten(arguments[argumentsUsed])
    }
}
