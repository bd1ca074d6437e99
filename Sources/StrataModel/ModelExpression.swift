public import StrataPredicate

// MARK: - ModelExpression

/// An expression stored in a model: a parsed ``FormatExpression`` together with the format
/// string it came from — a derived attribute's derivation
/// (``AttributeDescription/derivationExpression``).
///
/// Like ``ModelPredicate``, it keeps a format string that doesn't parse (with the parser's
/// message) instead of throwing, so a model with a mistyped derivation can be built and
/// then reported by the model checker alongside every other mistake. Core Data stores an
/// `NSExpression`.
///
/// ```swift
/// let count: ModelExpression = "employees.@count"
/// count.expression    // the parsed FormatExpression
/// count.syntaxError   // nil
/// ModelExpression("employees.@").syntaxError  // the parser's message
/// ```
public struct ModelExpression: Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The parsed expression, or nil when ``format`` does not parse.
    public let expression: FormatExpression?
    /// The expression's canonical format string when it parsed, else the text as written.
    public let format: String
    /// The parser's error message (with its position) when ``format`` does not parse.
    public let syntaxError: String?

    /// Parses `format`; a syntax error is kept in ``syntaxError`` rather than thrown.
    ///
    /// ```swift
    /// ModelExpression("lowercase(name)")
    /// ```
    public init(_ format: String) {
        do {
            let parsed = try FormatExpression(format: format)
            expression = parsed
            self.format = parsed.description
            syntaxError = nil
        } catch {
            expression = nil
            self.format = format
            syntaxError = String(describing: error)
        }
    }

    /// Wraps an already parsed expression.
    ///
    /// ```swift
    /// ModelExpression(.keyPath("department.name"))
    /// ```
    public init(_ expression: FormatExpression) {
        self.expression = expression
        format = expression.description
        syntaxError = nil
    }

    /// Parses a string literal; see ``init(_:)-(String)``.
    ///
    /// ```swift
    /// let e: ModelExpression = "now()"
    /// ```
    public init(stringLiteral value: String) {
        self.init(value)
    }

    /// The format string.
    ///
    /// ```swift
    /// "\(ModelExpression("employees.@count"))"  // "employees.@count"
    /// ```
    public var description: String { format }

    /// Two model expressions are equal when their canonical format strings are equal.
    ///
    /// ```swift
    /// ModelExpression("lowercase( name )") == ModelExpression("lowercase(name)")  // true
    /// ```
    public static func == (lhs: ModelExpression, rhs: ModelExpression) -> Bool {
        lhs.format == rhs.format && (lhs.syntaxError == nil) == (rhs.syntaxError == nil)
    }

    /// Hashes the canonical format string.
    ///
    /// ```swift
    /// Set([ModelExpression("now()")])
    /// ```
    public func hash(into hasher: inout Hasher) {
        hasher.combine(format)
    }
}

// MARK: - Codable

extension ModelExpression: Codable {
    /// Decodes an expression from its format string (a syntax error is kept, not thrown, so
    /// the model checker can report it).
    ///
    /// ```swift
    /// try JSONDecoder().decode(ModelExpression.self, from: Data(#""now()""#.utf8))
    /// ```
    public init(from decoder: any Decoder) throws {
        self.init(try decoder.singleValueContainer().decode(String.self))
    }

    /// Encodes the expression as its format string.
    ///
    /// ```swift
    /// try JSONEncoder().encode(ModelExpression("now()"))  // "now()"
    /// ```
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(format)
    }
}
