// MARK: - FormatFunction

/// A built-in function callable in a format string as `name(arguments)`, matching
/// `NSExpression(forFunction:arguments:)`'s names without the colons.
///
/// Names are case-insensitive in the format string; the description prints the raw value.
///
/// ```swift
/// try FormatPredicate(format: "lowercase(name) == 'ada' AND creationDate < now()")
/// ```
public enum FormatFunction: String, Sendable, Hashable, CaseIterable {
    /// `now()`: the current date.
    case now
    /// `lowercase(string)`.
    case lowercase
    /// `uppercase(string)`.
    case uppercase
    /// `abs(number)`.
    case abs
    /// `sqrt(number)`, a `Double`.
    case sqrt
    /// `floor(number)`.
    case floor
    /// `ceiling(number)`.
    case ceiling
    /// `sum(collection)` (0 when empty).
    case sum
    /// `count(collection)`.
    case count
    /// `min(collection)` (nil when empty).
    case min
    /// `max(collection)` (nil when empty).
    case max
    /// `average(collection)` (nil when empty).
    case average
    /// `length(string)`: the number of characters.
    case length

    /// The number of arguments the function takes.
    var arity: Int { self == .now ? 0 : 1 }
}
