// MARK: - FormatSubscript

/// What goes between the brackets of a subscript expression.
///
/// `FIRST`, `LAST` and `SIZE` are NSPredicate's reserved subscripts; any other expression
/// is an array index (integer) or a dictionary key (string).
///
/// ```swift
/// try FormatPredicate(format: "employees[SIZE] > 2")
/// ```
public indirect enum FormatSubscript: Sendable, Hashable {
    /// `[FIRST]`: the first element, or nil when empty.
    case first
    /// `[LAST]`: the last element, or nil when empty.
    case last
    /// `[SIZE]`: the number of elements.
    case size
    /// `[expression]`: an index into an array, or a key into a dictionary or object.
    case expression(FormatExpression)
}
