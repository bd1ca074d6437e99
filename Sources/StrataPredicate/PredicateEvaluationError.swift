// MARK: - PredicateEvaluationError

/// Why a predicate could not be evaluated: a missing `$variable`, an operand of the wrong
/// type, or an invalid regular expression.
///
/// Comparisons of mismatched but harmless types (a string with a number, nil with
/// anything) are simply false and never throw; this error is for questions that have no
/// answer, such as `BETWEEN` a non-pair or arithmetic on a string. (Core Data raises
/// `NSInvalidArgumentException` at evaluation.)
///
/// ```swift
/// do { _ = try FormatPredicate(format: "age > $min").evaluate(with: [:] as [String: Any]) }
/// catch let error as PredicateEvaluationError { print(error.kind) }  // missingVariable
/// ```
public struct PredicateEvaluationError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The category of a ``PredicateEvaluationError``.
    ///
    /// Stable for tests and callers that branch on it.
    ///
    /// ```swift
    /// if error.kind == .missingVariable { … }
    /// ```
    public enum Kind: String, Sendable, Equatable {
        /// A `$variable` has no value.
        case missingVariable
        /// An operand has a type the operation cannot use.
        case typeMismatch
        /// A `MATCHES` pattern is not a valid regular expression.
        case invalidRegularExpression
    }

    /// The category of the error.
    public let kind: Kind
    /// What went wrong, in words.
    public let message: String

    /// Creates an error.
    ///
    /// Mostly for tests comparing against an expected error.
    ///
    /// ```swift
    /// PredicateEvaluationError(kind: .missingVariable, message: "no value for $min")
    /// ```
    public init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }

    /// The message, prefixed with "evaluation error".
    ///
    /// Suitable for logs.
    ///
    /// ```swift
    /// "evaluation error: no value for substitution variable $min"
    /// ```
    public var description: String { "evaluation error: \(message)" }
}
