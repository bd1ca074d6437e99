// MARK: - FormatPredicateError

/// Why a format string could not be turned into a predicate: a syntax error, a missing or
/// unsupported argument, or nesting that is too deep.
///
/// ``position`` is the offset, in Unicode scalars from 0, of the offending token in the
/// format string; ``expected`` says what the parser was looking for. (Core Data raises an
/// `NSInvalidArgumentException` "Unable to parse the format string" instead.)
///
/// ```swift
/// do { _ = try FormatPredicate(format: "age >") } catch let error as FormatPredicateError {
///     print(error.position, error.expected ?? "")  // 5 "an expression"
/// }
/// ```
public struct FormatPredicateError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The category of a ``FormatPredicateError``.
    ///
    /// Lets callers tell a typo in the format string from a bad argument.
    ///
    /// ```swift
    /// if error.kind == .missingArgument { … }
    /// ```
    public enum Kind: String, Sendable, Equatable {
        /// The format string does not follow the grammar.
        case syntax
        /// A `%` specifier has no matching argument.
        case missingArgument
        /// An argument's type cannot be used for its specifier or in a predicate.
        case unsupportedArgument
        /// More arguments were passed than the format string uses.
        case extraArguments
        /// Parentheses, aggregates, functions or operators nest deeper than the limit.
        case nestingTooDeep
        /// A substitution variable's value cannot be used in a predicate.
        case unsupportedVariable
        /// A `$variable` has no value in the substitution dictionary.
        case missingVariable
    }

    /// The category of the error.
    public let kind: Kind
    /// What went wrong, in words.
    public let message: String
    /// The offset in Unicode scalars of the offending token in the format string.
    public let position: Int
    /// What the parser expected at ``position``, when it was looking for something.
    public let expected: String?

    /// Creates an error.
    ///
    /// Mostly for tests comparing against an expected error.
    ///
    /// ```swift
    /// FormatPredicateError(kind: .syntax, message: "unexpected end", position: 5, expected: "an expression")
    /// ```
    public init(kind: Kind, message: String, position: Int, expected: String? = nil) {
        self.kind = kind
        self.message = message
        self.position = position
        self.expected = expected
    }

    /// The message with its position and the expectation.
    ///
    /// Suitable for showing to the person who wrote the format string.
    ///
    /// ```swift
    /// "syntax error at position 5: unexpected end of format string (expected an expression)"
    /// ```
    public var description: String {
        var text = "\(kind == .syntax ? "syntax error" : "predicate error") at position \(position): \(message)"
        if let expected { text += " (expected \(expected))" }
        return text
    }
}
