public import Foundation

// MARK: - PredicateConstant

/// A constant value inside a predicate's syntax tree (the value of Core Data's
/// `NSExpression(forConstantValue:)`).
///
/// Format arguments of type `Any` are converted to a `PredicateConstant` when the format
/// string is parsed, so a parsed ``FormatPredicate`` is `Sendable` and `Hashable` and never
/// holds a reference to the caller's objects. Values that conform to
/// ``PredicateObjectIdentity`` are stored as their identity (``object(_:)``).
///
/// ```swift
/// let p = try FormatPredicate(format: "age IN %@", [30, 40])
/// // p.node == .comparison(... rightExpression: .constant(.aggregate([.integer(30), .integer(40)])))
/// ```
public enum PredicateConstant: Sendable, Hashable {
    /// `nil` / `NULL` (Core Data's `NSNull`).
    case null
    /// `TRUE` / `YES` / `FALSE` / `NO`; compares as the numbers 1 and 0.
    case bool(Bool)
    /// A whole number (any Swift integer type that fits in `Int`).
    case integer(Int)
    /// A floating-point number (`Double` or `Float`).
    case double(Double)
    /// A decimal number (`Decimal`, Core Data's `NSDecimalNumber`).
    case decimal(Decimal)
    /// A string.
    case string(String)
    /// A point in time (`NSDate`); printed as `CAST(<seconds since 2001>, "NSDate")`.
    case date(Date)
    /// Binary data; printed as `CAST("<base64>", "NSData")`.
    case data(Data)
    /// A UUID; printed as `CAST("<uuid>", "NSUUID")`.
    case uuid(UUID)
    /// A URL; printed as `CAST("<url>", "NSURL")`.
    case url(URL)
    /// An aggregate of constants, `{1, 2, 3}` (an `NSArray` constant).
    case aggregate([PredicateConstant])
    /// The identity of an object passed as an argument (see ``PredicateObjectIdentity``).
    case object(PredicateIdentity)
}
