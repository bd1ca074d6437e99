// MARK: - ComparisonModifier

/// How a comparison treats a to-many left side (Core Data's
/// `NSComparisonPredicate.Modifier`, plus `NONE`).
///
/// `SOME` parses as ``any``; `NONE` is ``notAny``.
///
/// ```swift
/// try FormatPredicate(format: "NONE employees.salary < 0")
/// ```
public enum ComparisonModifier: String, Sendable, Hashable, CaseIterable {
    /// No modifier: the left value is compared as a whole.
    case direct = ""
    /// `ANY` / `SOME`: true when some element satisfies the comparison.
    case any = "ANY"
    /// `ALL`: true when every element satisfies it (true for an empty collection).
    case all = "ALL"
    /// `NONE`: true when no element satisfies it (NSPredicate's `NOT ANY`; named `notAny`
    /// so it never reads as `Optional.none`).
    case notAny = "NONE"
}
