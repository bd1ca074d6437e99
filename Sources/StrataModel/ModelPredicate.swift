public import StrataPredicate

// MARK: - ModelPredicate

/// A predicate stored in a model: a parsed ``FormatPredicate`` together with the format string
/// it came from.
///
/// Models keep predicates (validation predicates, fetched properties, fetch request
/// templates) in this wrapper so a model stays `Codable` — it is encoded as its format
/// string — and so a model with a mistyped predicate can still be built and then reported
/// by the model checker with the parser's message and position, alongside every other
/// mistake, instead of failing at the first one. Core Data stores `NSPredicate` objects and
/// raises an exception for a bad format string.
///
/// ```swift
/// let positive: ModelPredicate = "SELF > 0"
/// positive.predicate        // the parsed FormatPredicate
/// positive.syntaxError      // nil
/// ModelPredicate("SELF >").syntaxError  // the parser's message
/// ```
public struct ModelPredicate: Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The parsed predicate, or nil when ``format`` does not parse.
    public let predicate: FormatPredicate?
    /// The predicate's canonical format string when it parsed, else the text as written.
    public let format: String
    /// The parser's error message (with its position) when ``format`` does not parse.
    public let syntaxError: String?

    /// Parses `format`; a syntax error is kept in ``syntaxError`` rather than thrown.
    ///
    /// ```swift
    /// ModelPredicate("age BETWEEN {100, 200}")
    /// ```
    public init(_ format: String) {
        do {
            let parsed = try FormatPredicate(format: format, argumentArray: [])
            predicate = parsed
            self.format = parsed.description
            syntaxError = nil
        } catch {
            predicate = nil
            self.format = format
            syntaxError = String(describing: error)
        }
    }

    /// Wraps an already parsed predicate.
    ///
    /// ```swift
    /// ModelPredicate(try FormatPredicate(format: "age > %d", 18))
    /// ```
    public init(_ predicate: FormatPredicate) {
        self.predicate = predicate
        format = predicate.description
        syntaxError = nil
    }

    /// Parses a string literal; see ``init(_:)-(String)``.
    ///
    /// ```swift
    /// let p: ModelPredicate = "SELF > 0"
    /// ```
    public init(stringLiteral value: String) {
        self.init(value)
    }

    /// The format string.
    ///
    /// ```swift
    /// "\(ModelPredicate("SELF > 0"))"
    /// ```
    public var description: String { format }

    /// Two model predicates are equal when their canonical format strings are equal.
    ///
    /// ```swift
    /// ModelPredicate("SELF > 0") == ModelPredicate("SELF > 0")  // true
    /// ```
    public static func == (lhs: ModelPredicate, rhs: ModelPredicate) -> Bool {
        lhs.format == rhs.format && (lhs.syntaxError == nil) == (rhs.syntaxError == nil)
    }

    /// Hashes the canonical format string.
    ///
    /// ```swift
    /// Set([ModelPredicate("SELF > 0")])
    /// ```
    public func hash(into hasher: inout Hasher) {
        hasher.combine(format)
    }
}

// MARK: - Codable

extension ModelPredicate: Codable {
    /// Decodes a predicate from its format string (a syntax error is kept, not thrown, so the
    /// model checker can report it).
    ///
    /// ```swift
    /// try JSONDecoder().decode(ModelPredicate.self, from: Data(#""SELF > 0""#.utf8))
    /// ```
    public init(from decoder: any Decoder) throws {
        self.init(try decoder.singleValueContainer().decode(String.self))
    }

    /// Encodes the predicate as its format string.
    ///
    /// ```swift
    /// try JSONEncoder().encode(ModelPredicate("SELF > 0"))  // "SELF > 0"
    /// ```
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(format)
    }
}
