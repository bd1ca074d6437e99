import Foundation
import StrataPredicate

// MARK: - JSONValue

/// A JSON value as written in `Specs/0003-predicate-vectors.json`, kept exactly (integers
/// stay integers) so the typed convention of the spec can be applied.
enum JSONValue: Sendable, Equatable, Decodable {
    case null
    case bool(Bool)
    case integer(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// Converts to the Swift value the vectors mean, following the spec's typed
    /// convention: `{"$date": ISO-8601 or seconds since 2001}`, `{"$decimal": "…"}`,
    /// `{"$uuid": "…"}`, `{"$url": "…"}`, `{"$data": "<base64>"}`, `{"$double": n}`,
    /// `{"$identity": "id", …keys}` (an object compared by identity), and
    /// `{"$unsupported": true}` (a value of a type predicates do not accept).
    func toAny() throws -> Any? {
        switch self {
        case .null: return nil
        case .bool(let value): return value
        case .integer(let value): return value
        case .double(let value): return value
        case .string(let value): return value
        case .array(let values): return try values.map { try $0.toAny() ?? NSNull() } as [Any]
        case .object(let members):
            if let typed = try typedValue(members) { return typed }
            var dictionary: [String: Any] = [:]
            for (key, value) in members { dictionary[key] = try value.toAny() ?? NSNull() }
            return dictionary
        }
    }

    struct ConventionError: Error, CustomStringConvertible {
        let description: String
    }

    private func typedValue(_ members: [String: JSONValue]) throws -> Any? {
        if case .string(let identity)? = members["$identity"] {
            var properties: [String: Any] = [:]
            for (key, value) in members where key != "$identity" { properties[key] = try value.toAny() ?? NSNull() }
            return IdentifiedObject(identity: identity, properties: properties)
        }
        guard members.count == 1, let (key, value) = members.first else { return nil }
        switch (key, value) {
        case ("$date", .string(let text)):
            guard let date = ISO8601DateFormatter().date(from: text) else { throw ConventionError(description: "bad $date \(text)") }
            return date
        case ("$date", .integer(let seconds)): return Date(timeIntervalSinceReferenceDate: TimeInterval(seconds))
        case ("$date", .double(let seconds)): return Date(timeIntervalSinceReferenceDate: seconds)
        case ("$decimal", .string(let text)):
            guard let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else {
                throw ConventionError(description: "bad $decimal \(text)")
            }
            return decimal
        case ("$uuid", .string(let text)):
            guard let uuid = UUID(uuidString: text) else { throw ConventionError(description: "bad $uuid \(text)") }
            return uuid
        case ("$url", .string(let text)):
            guard let url = URL(string: text) else { throw ConventionError(description: "bad $url \(text)") }
            return url
        case ("$data", .string(let text)):
            guard let data = Data(base64Encoded: text) else { throw ConventionError(description: "bad $data \(text)") }
            return data
        case ("$double", .integer(let value)): return Double(value)
        case ("$double", .double(let value)): return value
        case ("$unsupported", _): return UnsupportedArgument()
        default: return nil
        }
    }
}

// MARK: - Test objects

/// A key-value coding object with an identity, standing in for the managed objects of
/// later issues.
struct IdentifiedObject: KeyValueCoding, PredicateObjectIdentity {
    let identity: String
    let properties: [String: Any]

    func value(forKey key: String) -> Any? { properties[key] }

    var predicateIdentity: any Hashable & Sendable { identity }
}

/// A value of a type that predicates cannot hold.
struct UnsupportedArgument {}
