// MARK: - ArithmeticOperator

/// A binary arithmetic operator in an expression.
///
/// Operands are promoted like `NSNumber`s: integers stay integers while the result fits
/// (division of integers is exact only when it divides evenly, otherwise `Double`), any
/// `Decimal` makes the result `Decimal`, any `Double` makes it `Double`. A `Date` plus or
/// minus a number of seconds is a `Date`.
///
/// ```swift
/// try FormatPredicate(format: "salary * 12 > 100000")
/// ```
public enum ArithmeticOperator: String, Sendable, Hashable, CaseIterable {
    /// `+` (`add:to:`).
    case add = "+"
    /// `-` (`from:subtract:`).
    case subtract = "-"
    /// `*` (`multiply:by:`).
    case multiply = "*"
    /// `/` (`divide:by:`).
    case divide = "/"
    /// `**` (`raise:toPower:`).
    case power = "**"
}
