internal import Foundation

// MARK: - Aggregates

/// Sums, averages and extremes over runtime values, shared by collection operators and the
/// aggregate functions `sum()`, `average()`, `min()`, `max()`.
enum Aggregates {
    /// The sum of the numbers (0 when there are none), or nil when a non-nil value is not a
    /// number. Integers whose sum leaves `Int`'s range go on as a `Decimal`, exactly (as
    /// Foundation's `@sum`, an `NSDecimalNumber`, does): before, the sum went on as a
    /// `Double`, so `[Int.max, 1, -1]` summed to 9223372036854775808.0, not `Int.max`.
    static func sum(_ values: [Value]) -> Value? {
        var total = Number.int(0)
        for value in values where !value.isNull {
            guard let number = Number(value) else { return nil }
            if case .int(let a) = total, case .int(let b) = number {
                let (result, overflow) = a.addingReportingOverflow(b)
                total = overflow ? .decimal(Decimal(a) + Decimal(b)) : .int(result)
                continue
            }
            guard let next = try? Number.apply(.add, total, number) else { return nil }
            total = next
        }
        return total.value
    }

    /// The mean of the numbers, nil when there are none or a value is not a number.
    static func average(_ values: [Value]) -> Value? {
        let present = values.filter { !$0.isNull }
        guard !present.isEmpty, let total = sum(present).flatMap(Number.init) else { return nil }
        if case .decimal(let decimal) = total { return .decimal(decimal / Decimal(present.count)) }
        return .double(total.double / Double(present.count))
    }

    /// The smallest (`.orderedAscending`) or largest (`.orderedDescending`) value, skipping
    /// nils; nil when empty or when two values cannot be ordered. Numbers follow the sort
    /// order (spec 0008): every NaN after every number and equal to any other NaN, so the
    /// largest of values holding a NaN is NaN and the smallest the least number (before,
    /// a NaN made the result nil, or not, depending on where it stood).
    static func extreme(_ values: [Value], want: ComparisonResult) -> Value? {
        var best: Value?
        for value in values where !value.isNull {
            guard let current = best else {
                best = value
                continue
            }
            guard let order = sortOrder(value, current) else { return nil }
            if order == want { best = value }
        }
        return best
    }

    /// The order of two values as a sort puts them: a NaN number after every number, a date
    /// at NaN after every date (before, a NaN date made `@min`/`@max` nil).
    static func sortOrder(_ a: Value, _ b: Value) -> ComparisonResult? {
        if let x = Number(a), let y = Number(b) {
            let (nanX, nanY) = (x.isNaN, y.isNaN)
            if nanX || nanY { return nanX == nanY ? .orderedSame : (nanX ? .orderedDescending : .orderedAscending) }
        }
        if case .date(let x) = a, case .date(let y) = b {
            let (nanX, nanY) = (x.timeIntervalSinceReferenceDate.isNaN, y.timeIntervalSinceReferenceDate.isNaN)
            if nanX || nanY { return nanX == nanY ? .orderedSame : (nanX ? .orderedDescending : .orderedAscending) }
        }
        return Comparison.order(a, b, options: [])
    }
}
