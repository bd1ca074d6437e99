public import StrataModel
import Foundation

/// A property's value as the log stores it: nothing, an attribute value, a to-one
/// reference, or the members of an ordered to-many relationship.
///
/// ```swift
/// let values: [String: LogValue] = [
///     "lastName": .attribute(.string("Ng")),
///     "team": .reference(StoredObjectID(entity: "Team", primaryKey: 3)),
/// ]
/// ```
public enum LogValue: Sendable, Hashable, CustomStringConvertible {
    /// No value (`nil`).
    case null
    /// An attribute's value.
    case attribute(AttributeValue)
    /// A to-one relationship's destination.
    case reference(StoredObjectID)
    /// An ordered to-many relationship's destinations, in order; or an unordered one's
    /// members in key order (as insert and delete images record them).
    case references([StoredObjectID])

    /// A compact, readable rendering for audit output and error messages.
    public var description: String {
        switch self {
        case .null: "nil"
        case .attribute(let value): Self.describe(value)
        case .reference(let id): id.description
        case .references(let ids): "[" + ids.map(\.description).joined(separator: ", ") + "]"
        }
    }

    static func describe(_ value: AttributeValue) -> String {
        switch value {
        case .int16(let v): String(v)
        case .int32(let v): String(v)
        case .int64(let v): String(v)
        case .decimal(let v): "\(v)"
        case .double(let v): String(v)
        case .float(let v): String(v)
        case .string(let v): "\"\(v)\""
        case .boolean(let v): v ? "true" : "false"
        // Not finite: "nan", "inf", "-inf" (the formatter gives "" for NaN and a year past
        // 5 million for the infinities).
        case .date(let v) where !v.timeIntervalSinceReferenceDate.isFinite: "\(v.timeIntervalSinceReferenceDate)"
        case .date(let v): ISO8601DateFormatter.string(from: v, timeZone: TimeZone(secondsFromGMT: 0) ?? .current, formatOptions: [.withInternetDateTime, .withFractionalSeconds])
        case .binaryData(let v): "<\(v.count) bytes>"
        case .uuid(let v): v.uuidString
        case .uri(let v): v.absoluteString
        case .transformable(let v): "<transformable \(v.count) bytes>"
        }
    }
}

// MARK: - Uniqueness

extension LogValue {
    /// Whether this value leaves a uniqueness constraint it is a component of unchecked:
    /// nil, a floating-point NaN, or a date at NaN (before session 31 two NaN dates clashed).
    /// NaN equals nothing (a predicate's `==` finds it equal to
    /// no value, itself included), and Core Data's SQLite store holds it as NULL, which no
    /// `UNIQUE` index compares: two objects holding NaN don't clash, as two holding nil don't
    /// (spec 0004 §5). Before, a NaN clashed with a NaN of the same bits only, by its index
    /// key, and only in the store.
    ///
    /// ```swift
    /// LogValue.attribute(.double(.nan)).leavesUniquenessUnchecked  // true
    /// ```
    public var leavesUniquenessUnchecked: Bool {
        switch self {
        case .null: true
        case .attribute(.double(let v)): v.isNaN
        case .attribute(.float(let v)): v.isNaN
        case .attribute(.date(let v)): v.timeIntervalSinceReferenceDate.isNaN
        default: false
        }
    }
}

// MARK: - Literal equality

extension LogValue {
    /// `==`, but attribute strings compared by their bytes (``AttributeValue/isIdentical(to:)``):
    /// what a commit compares an update's value with the stored one by, so re-encoding a
    /// string ("é" decomposed to precomposed) is a change it records.
    ///
    /// ```swift
    /// LogValue.attribute(.string("\u{E9}")).isIdentical(to: .attribute(.string("e\u{301}")))  // false
    /// ```
    public func isIdentical(to other: LogValue) -> Bool {
        if case .attribute(let a) = self, case .attribute(let b) = other { return a.isIdentical(to: b) }
        return self == other
    }
}
