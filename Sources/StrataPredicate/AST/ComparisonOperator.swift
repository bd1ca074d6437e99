// MARK: - ComparisonOperator

/// The operator of a comparison (Core Data's `NSComparisonPredicate.Operator`).
///
/// The raw value is the canonical spelling in a format string.
///
/// ```swift
/// ComparisonOperator.greaterThanOrEqualTo.rawValue  // ">="
/// ```
public enum ComparisonOperator: String, Sendable, Hashable, CaseIterable {
    /// `=`, `==`.
    case equalTo = "=="
    /// `!=`, `<>`.
    case notEqualTo = "!="
    /// `<`.
    case lessThan = "<"
    /// `<=`, `=<`.
    case lessThanOrEqualTo = "<="
    /// `>`.
    case greaterThan = ">"
    /// `>=`, `=>`.
    case greaterThanOrEqualTo = ">="
    /// `BETWEEN {low, high}`, inclusive.
    case between = "BETWEEN"
    /// `IN`: membership in a collection, or substring of a string.
    case `in` = "IN"
    /// `CONTAINS`: substring of a string, or membership when the left side is a collection.
    case contains = "CONTAINS"
    /// `BEGINSWITH`.
    case beginsWith = "BEGINSWITH"
    /// `ENDSWITH`.
    case endsWith = "ENDSWITH"
    /// `LIKE`: whole-string match with `*` (any run) and `?` (one character) wildcards.
    case like = "LIKE"
    /// `MATCHES`: whole-string regular expression match.
    case matches = "MATCHES"
}
