// MARK: - Token

/// One lexical token of a format string, with the offset (in Unicode scalars) where it
/// starts.
struct Token {
    /// The kinds of token.
    enum Kind: Equatable {
        /// A bare word: a key, a keyword, or a function name.
        case identifier(String)
        /// A `#`-escaped word: always a key, never a keyword.
        case escapedIdentifier(String)
        /// `@name`, a collection operator inside a key path.
        case atIdentifier(String)
        /// `$name`.
        case variable(String)
        /// A number literal without sign: an integer, or a double when it has a fraction
        /// or exponent.
        case integer(Int)
        case double(Double)
        /// A quoted string, escapes resolved.
        case string(String)
        /// A `%@`, `%d`, `%f`, … argument, already converted.
        case argument(PredicateConstant)
        /// A `%K` argument, already checked.
        case keyPathArgument(FormatKeyPath)
        /// Punctuation and operators, spelled as in the source (`==`, `(`, `&&`, `**`, …).
        case symbol(String)
        /// The end of the format string.
        case end
    }

    let kind: Kind
    let position: Int
    /// An integer literal one past `Int.max` (9223372036854775808, a `.double`): negated, it
    /// is `Int.min` exactly, as SQL reads `-9223372036854775808`.
    var isIntMinMagnitude = false

    /// The token's keyword in upper case, when it is a bare ASCII word (``Lexer/keyword(_:)``).
    var keyword: String? {
        if case .identifier(let name) = kind { return Lexer.keyword(name) }
        return nil
    }

    /// Whether the token is the symbol `text`.
    func isSymbol(_ text: String) -> Bool {
        if case .symbol(let symbol) = kind { return symbol == text }
        return false
    }

    /// Whether the token is the bare keyword `word` (any case).
    func isKeyword(_ word: String) -> Bool {
        keyword == word
    }

    /// How the token reads in an error message.
    var display: String {
        switch kind {
        case .identifier(let name): "'\(name)'"
        case .escapedIdentifier(let name): "'#\(name)'"
        case .atIdentifier(let name): "'@\(name)'"
        case .variable(let name): "'$\(name)'"
        case .integer(let value): "'\(value)'"
        case .double(let value): "'\(value)'"
        case .string: "a string"
        case .argument: "an argument"
        case .keyPathArgument: "a %K argument"
        case .symbol(let symbol): "'\(symbol)'"
        case .end: "end of format string"
        }
    }
}
