internal import Foundation

// MARK: - Numbers

/// A number with NSNumber-like promotion: Int, then Double, with Decimal winning over both.
enum Number {
    case int(Int)
    case double(Double)
    case decimal(Decimal)

    init?(_ value: Value) {
        switch value {
        case .int(let v): self = .int(v)
        case .double(let v): self = .double(v)
        case .decimal(let v): self = .decimal(v)
        case .bool(let v): self = .int(v ? 1 : 0)
        default: return nil
        }
    }

    var value: Value {
        switch self {
        case .int(let v): .int(v)
        case .double(let v): .double(v)
        case .decimal(let v): .decimal(v)
        }
    }

    var double: Double {
        switch self {
        case .int(let v): Double(v)
        case .double(let v): v
        case .decimal(let v): NSDecimalNumber(decimal: v).doubleValue
        }
    }

    /// The value as a Decimal, or nil when it has none (NaN, or a Double outside Decimal's
    /// range, which Foundation converts to NaN). A Double is the decimal it prints as — 19.99,
    /// not the binary expansion 19.98999999999999488 `Decimal(Double)` gives — as
    /// `NSNumber.decimalValue` makes it when `NSDecimalNumber` compares with a number, so
    /// `price == 19.99` matches a decimal attribute holding 19.99.
    var decimal: Decimal? {
        let result: Decimal
        switch self {
        case .int(let v): result = Decimal(v)
        case .double(let v): return Decimal(printedAs: v)
        case .decimal(let v): result = v
        }
        return result.isNaN ? nil : result
    }

    /// Whether the number is NaN (a double's, or a decimal's).
    var isNaN: Bool {
        switch self {
        case .int: false
        case .double(let v): v.isNaN
        case .decimal(let v): v.isNaN
        }
    }

    static func compare(_ lhs: Number, _ rhs: Number) -> ComparisonResult? {
        switch (lhs, rhs) {
        case (.int(let a), .int(let b)):
            return a < b ? .orderedAscending : a > b ? .orderedDescending : .orderedSame
        case (.decimal, _), (_, .decimal):
            guard let a = lhs.decimal, let b = rhs.decimal else { return compareDoubles(lhs.double, rhs.double) }
            return a < b ? .orderedAscending : a > b ? .orderedDescending : .orderedSame
        default:
            return compareDoubles(lhs.double, rhs.double)
        }
    }

    private static func compareDoubles(_ a: Double, _ b: Double) -> ComparisonResult? {
        if a < b { return .orderedAscending }
        if a > b { return .orderedDescending }
        if a == b { return .orderedSame }
        return nil  // NaN
    }

    /// Arithmetic with promotion; integer overflow falls back to Double.
    static func apply(_ op: ArithmeticOperator, _ lhs: Number, _ rhs: Number) throws -> Number {
        switch (lhs, rhs) {
        case (.int(let a), .int(let b)):
            switch op {
            case .add:
                let (r, o) = a.addingReportingOverflow(b)
                return o ? .double(Double(a) + Double(b)) : .int(r)
            case .subtract:
                let (r, o) = a.subtractingReportingOverflow(b)
                return o ? .double(Double(a) - Double(b)) : .int(r)
            case .multiply:
                let (r, o) = a.multipliedReportingOverflow(by: b)
                return o ? .double(Double(a) * Double(b)) : .int(r)
            case .divide:
                guard b != 0 else {
                    throw PredicateEvaluationError(kind: .typeMismatch, message: "integer division by zero")
                }
                let (q, o) = a.dividedReportingOverflow(by: b)
                if !o, a % b == 0 { return .int(q) }
                return .double(Double(a) / Double(b))
            case .power:
                return .double(Foundation.pow(Double(a), Double(b)))
            }
        case (.decimal, _), (_, .decimal):
            guard op != .power, let a = lhs.decimal, let b = rhs.decimal else {
                return try apply(op, .double(lhs.double), .double(rhs.double))
            }
            let result: Decimal
            switch op {
            case .add: result = a + b
            case .subtract: result = a - b
            case .multiply: result = a * b
            case .divide:
                guard !b.isZero else {
                    throw PredicateEvaluationError(kind: .typeMismatch, message: "decimal division by zero")
                }
                result = a / b
            case .power: return .double(Foundation.pow(lhs.double, rhs.double))
            }
            // Decimal arithmetic gives NaN when the result is out of its range (NSDecimalNumber
            // raises): say so instead of comparing a NaN as false.
            guard !result.isNaN else {
                throw PredicateEvaluationError(
                    kind: .typeMismatch, message: "decimal \(op.rawValue) overflows: \(a) and \(b) give a result out of Decimal's range")
            }
            return .decimal(result)
        default:
            let a = lhs.double, b = rhs.double
            switch op {
            case .add: return .double(a + b)
            case .subtract: return .double(a - b)
            case .multiply: return .double(a * b)
            case .divide: return .double(a / b)
            case .power: return .double(Foundation.pow(a, b))
            }
        }
    }
}

extension Decimal {
    /// The decimal a finite floating-point number means, read from `text`, its shortest
    /// printed form — 19.99, not the binary expansion 19.98999999999999488 `Decimal(Double)`
    /// gives — as `NSNumber.decimalValue` makes it; `Decimal(value)` if the text doesn't
    /// parse; nil for NaN, an infinity, or a value beyond `Decimal`'s range (about
    /// 3.4 × 10^165, where the conversion gives NaN). The one rule for a number becoming a
    /// decimal: numeric promotion, `CAST(…, "NSDecimalNumber")` and values set on decimal
    /// attributes all use it.
    package init?(printed text: String, of value: Double) {
        guard value.isFinite else { return nil }
        if let parsed = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")), !parsed.isNaN {
            self = parsed
            return
        }
        let converted = Decimal(value)
        guard !converted.isNaN else { return nil }
        self = converted
    }

    /// ``init(printed:of:)`` with the Double's own printed form.
    package init?(printedAs value: Double) { self.init(printed: "\(value)", of: value) }
}
