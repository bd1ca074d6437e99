package import Foundation

// MARK: - ISO 8601

/// A locale-free ISO 8601 formatter and parser for UTC timestamps, with fractional seconds to
/// the microsecond (Foundation's `ISO8601DateFormatter` stops at milliseconds and is not
/// `Sendable`). `package` so the log's event JSON and the `strata` tool print dates by the
/// same rule.
package enum ISO8601 {
    /// The date's microseconds since 1970, or nil when it has none: NaN, infinite, or so far
    /// from 1970 (beyond ±9 × 10¹² seconds, about 285,000 years) that the count wouldn't fit
    /// an `Int64` with room to spare.
    package static func microseconds(_ date: Date) -> Int64? {
        let t = date.timeIntervalSince1970
        guard t.isFinite, abs(t) < 9e12 else { return nil }
        return Int64((t * 1_000_000).rounded())
    }

    /// `2026-01-01T10:00:00.5Z`: the fraction only when non-zero, trailing zeros dropped; with
    /// `fixedMicroseconds`, always six fraction digits (`2026-01-01T10:00:00.500000Z`).
    ///
    /// A date without microseconds (see ``microseconds(_:)``) is written as its seconds since
    /// 1970 in Swift's number text (`1e+20`, `-inf`, `nan`) rather than trapping or inventing
    /// a date.
    package static func format(_ date: Date, fixedMicroseconds: Bool = false) -> String {
        guard var micros = microseconds(date) else { return "\(date.timeIntervalSince1970)" }
        var seconds = micros >= 0 ? micros / 1_000_000 : (micros - 999_999) / 1_000_000
        micros -= seconds * 1_000_000
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        seconds -= days * 86_400
        let (y, m, d) = civil(fromDays: days)
        func pad(_ v: Int64, _ width: Int) -> String {
            let s = String(abs(v))
            return (v < 0 ? "-" : "") + String(repeating: "0", count: max(0, width - s.count)) + s
        }
        var out = "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(seconds / 3600, 2)):\(pad(seconds / 60 % 60, 2)):\(pad(seconds % 60, 2))"
        if fixedMicroseconds {
            out += "." + pad(micros, 6)
        } else if micros != 0 {
            var frac = pad(micros, 6)
            while frac.hasSuffix("0") { frac.removeLast() }
            out += "." + frac
        }
        return out + "Z"
    }

    static func parse(_ text: String) -> Date? {
        let b = Array(text.utf8)
        func num(_ r: Range<Int>) -> Int64? {
            guard r.upperBound <= b.count, r.allSatisfy({ (48...57).contains(b[$0]) }) else { return nil }
            return Int64(String(decoding: b[r], as: UTF8.self))
        }
        guard b.count >= 20, b[4] == 45, b[7] == 45, b[10] == 84 || b[10] == 116, b[13] == 58, b[16] == 58,
            let y = num(0..<4), let mo = num(5..<7), let d = num(8..<10), let h = num(11..<13),
            let mi = num(14..<16), let s = num(17..<19),
            (1...12).contains(mo), (1...daysIn(month: mo, of: y)).contains(d), h < 24, mi < 60, s < 60
        else { return nil }
        var i = 19
        var fraction = 0.0
        if b[i] == 46 {
            let start = i + 1
            i = start
            while i < b.count, (48...57).contains(b[i]) { i += 1 }
            guard i > start, let f = Double("0." + String(decoding: b[start..<i], as: UTF8.self)) else { return nil }
            fraction = f
        }
        guard i == b.count - 1, b[i] == 90 || b[i] == 122 else { return nil }
        let days = daysFromCivil(y, mo, d)
        let whole = days * 86_400 + h * 3600 + mi * 60 + s
        return Date(timeIntervalSince1970: Double(whole) + fraction)
    }

    /// The days of `month` (1…12) in `year` of the proleptic Gregorian calendar: a date such as
    /// February 30 is refused rather than moved into March.
    static func daysIn(month: Int64, of year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Howard Hinnant's `days_from_civil`.
    package static func daysFromCivil(_ y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// Howard Hinnant's `civil_from_days`.
    package static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? yoe + era * 400 + 1 : yoe + era * 400, m, d)
    }
}
