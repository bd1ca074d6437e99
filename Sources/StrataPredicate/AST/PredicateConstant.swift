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

// MARK: - Equality

extension PredicateConstant {
    /// Whether two constants are the same value: as synthesized equality would say, except
    /// that every NaN (a double, or a date's interval) is the same constant.
    ///
    /// Before, `Double`'s `==` made `.double(.nan)` differ from itself, so a predicate holding
    /// one wasn't equal to itself, a set couldn't find it, and its description didn't parse
    /// back to an equal predicate. Evaluation is not affected: it compares numbers with its
    /// own rules, where NaN equals nothing.
    ///
    /// ```swift
    /// PredicateConstant.double(.nan) == .double(.nan)  // true
    /// ```
    public static func == (lhs: PredicateConstant, rhs: PredicateConstant) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.integer(let a), .integer(let b)): a == b
        case (.double(let a), .double(let b)): sameNumber(a, b)
        case (.decimal(let a), .decimal(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.date(let a), .date(let b)): sameNumber(a.timeIntervalSinceReferenceDate, b.timeIntervalSinceReferenceDate)
        case (.data(let a), .data(let b)): a == b
        case (.uuid(let a), .uuid(let b)): a == b
        case (.url(let a), .url(let b)): a == b
        case (.aggregate(let a), .aggregate(let b)): a == b
        case (.object(let a), .object(let b)): a == b
        default: false
        }
    }

    /// Hashes the constant, consistently with ``==(_:_:)`` (every NaN hashes alike).
    ///
    /// ```swift
    /// Set([PredicateConstant.double(.nan)]).contains(.double(.nan))  // true
    /// ```
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let v): hasher.combine(1); hasher.combine(v)
        case .integer(let v): hasher.combine(2); hasher.combine(v)
        case .double(let v): hasher.combine(3); Self.hashNumber(v, into: &hasher)
        case .decimal(let v): hasher.combine(4); hasher.combine(v)
        case .string(let v): hasher.combine(5); hasher.combine(v)
        case .date(let v): hasher.combine(6); Self.hashNumber(v.timeIntervalSinceReferenceDate, into: &hasher)
        case .data(let v): hasher.combine(7); hasher.combine(v)
        case .uuid(let v): hasher.combine(8); hasher.combine(v)
        case .url(let v): hasher.combine(9); hasher.combine(v)
        case .aggregate(let v): hasher.combine(10); hasher.combine(v)
        case .object(let v): hasher.combine(11); hasher.combine(v)
        }
    }

    private static func sameNumber(_ a: Double, _ b: Double) -> Bool {
        a == b || (a.isNaN && b.isNaN)
    }

    /// `Double`'s hash (0.0 and -0.0 alike), with one hash for every NaN payload.
    private static func hashNumber(_ value: Double, into hasher: inout Hasher) {
        if value.isNaN {
            hasher.combine(UInt64.max)
        } else {
            hasher.combine(value)
        }
    }
}
