public import Foundation
import StrataModel

/// A value of a store's user metadata: the property-list types Core Data's store metadata
/// holds (`String`, integers, `Double`, `Bool`, `Date`, `Data`, and arrays and dictionaries
/// of those), as one `Sendable` type.
///
/// Literals make one, so metadata reads as Core Data's `[String: Any]` does:
///
/// ```swift
/// var metadata = coordinator.metadata(for: store)
/// metadata["lastSync"] = .date(Date())
/// metadata["schemaRevision"] = 3
/// metadata["tags"] = ["imported", "checked"]
/// try coordinator.setMetadata(metadata, for: store)
/// ```
///
/// The store keeps it exactly (spec 0004 §10): a `Date` and a `Double` round-trip bit for
/// bit, integers are 64-bit.
public enum MetadataValue: Sendable, Hashable, CustomStringConvertible {
    /// A string.
    case string(String)
    /// A signed 64-bit integer.
    case integer(Int64)
    /// A double (NaN and the infinities included).
    case double(Double)
    /// A Boolean.
    case boolean(Bool)
    /// A date.
    case date(Date)
    /// Bytes.
    case data(Data)
    /// An ordered list of values.
    case array([MetadataValue])
    /// Values by string key.
    case dictionary([String: MetadataValue])

    /// The plain Swift value: `String`, `Int64`, `Double`, `Bool`, `Date`, `Data`,
    /// `[any Sendable]` or `[String: any Sendable]` — for code written against Core Data's
    /// `[String: Any]` (`metadata["name"]?.value as? String`).
    public var value: any Sendable {
        switch self {
        case .string(let value): value
        case .integer(let value): value
        case .double(let value): value
        case .boolean(let value): value
        case .date(let value): value
        case .data(let value): value
        case .array(let values): values.map(\.value)
        case .dictionary(let values): values.mapValues(\.value)
        }
    }

    /// The value's type as its stored tag: `string`, `integer`, `double`, `boolean`,
    /// `date`, `data`, `array` or `dictionary`.
    public var typeName: String {
        switch self {
        case .string: "string"
        case .integer: "integer"
        case .double: "double"
        case .boolean: "boolean"
        case .date: "date"
        case .data: "data"
        case .array: "array"
        case .dictionary: "dictionary"
        }
    }

    /// A readable form: strings quoted, dates in ISO 8601 (UTC), data as its byte count and
    /// hex (up to 32 bytes), arrays and dictionaries in brackets.
    public var description: String {
        switch self {
        case .string(let value): JSONText.quoted(value)
        case .integer(let value): String(value)
        case .double(let value): String(value)
        case .boolean(let value): String(value)
        case .date(let value): Self.isoFormatter.string(from: value)
        case .data(let value):
            "\(value.count) bytes" + (value.isEmpty ? "" : " " + value.prefix(32).map { String(format: "%02x", $0) }.joined() + (value.count > 32 ? "…" : ""))
        case .array(let values): "[" + values.map(\.description).joined(separator: ", ") + "]"
        case .dictionary(let values):
            "[" + values.sorted { $0.key < $1.key }.map { "\(JSONText.quoted($0.key)): \($0.value)" }.joined(separator: ", ") + "]"
        }
    }

    private static var isoFormatter: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}

extension MetadataValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    /// A string value.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An integer value.
    public init(integerLiteral value: Int64) { self = .integer(value) }
    /// A double value.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// A Boolean value.
    public init(booleanLiteral value: Bool) { self = .boolean(value) }
    /// An array value.
    public init(arrayLiteral elements: MetadataValue...) { self = .array(elements) }
    /// A dictionary value (a repeated key keeps its last value).
    public init(dictionaryLiteral elements: (String, MetadataValue)...) {
        self = .dictionary(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

// MARK: - The stored form (spec 0004 §10)

extension MetadataValue {
    /// The value's stored form: a JSON object with one member named by the type,
    /// `{"string": "…"}`, `{"integer": "-42"}`, `{"double": "0.1"}`, `{"boolean": true}`,
    /// `{"date": "786245000.25"}` (seconds since 2001-01-01, the number a `Date` holds),
    /// `{"data": "base64"}`, `{"array": [...]}`, `{"dictionary": {...}}`. Numbers are text,
    /// in Swift's shortest round-trip form, so every `Int64` and `Double` (NaN, `inf`,
    /// `-inf`) survives.
    public var jsonObject: [String: Any] {
        switch self {
        case .string(let value): ["string": value]
        case .integer(let value): ["integer": String(value)]
        case .double(let value): ["double": String(value)]
        case .boolean(let value): ["boolean": value]
        case .date(let value): ["date": String(value.timeIntervalSinceReferenceDate)]
        case .data(let value): ["data": value.base64EncodedString()]
        case .array(let values): ["array": values.map(\.jsonObject)]
        case .dictionary(let values): ["dictionary": values.mapValues(\.jsonObject)]
        }
    }

    /// The value a stored form holds; `path` names it in errors (`metadata key "tags"[2]`).
    ///
    /// - Throws: ``LogError/malformed(_:)`` naming `path` and what is wrong.
    public init(jsonObject: Any, path: String) throws {
        guard let object = jsonObject as? [String: Any], object.count == 1, let (tag, body) = object.first else {
            throw LogError.malformed("\(path) is not a one-member object naming its type")
        }
        func text() throws -> String {
            guard let text = body as? String else { throw LogError.malformed("\(path): the \(tag) value is not stored as text") }
            return text
        }
        switch tag {
        case "string":
            self = .string(try text())
        case "integer":
            guard let value = Int64(try text()) else { throw LogError.malformed("\(path): \(JSONText.quoted(try text())) is not a 64-bit integer") }
            self = .integer(value)
        case "double":
            guard let value = Double(try text()) else { throw LogError.malformed("\(path): \(JSONText.quoted(try text())) is not a number") }
            self = .double(value)
        case "boolean":
            // JSONSerialization reads `true` as a Bool (or an NSNumber that bridges to one).
            guard let value = body as? Bool, !(body is String) else { throw LogError.malformed("\(path): a boolean is stored as true or false") }
            self = .boolean(value)
        case "date":
            guard let value = Double(try text()) else { throw LogError.malformed("\(path): \(JSONText.quoted(try text())) is not a date's seconds") }
            self = .date(Date(timeIntervalSinceReferenceDate: value))
        case "data":
            guard let value = Data(base64Encoded: try text()) else { throw LogError.malformed("\(path): the data is not base64") }
            self = .data(value)
        case "array":
            guard let values = body as? [Any] else { throw LogError.malformed("\(path): an array is stored as a JSON array") }
            self = .array(try values.enumerated().map { try MetadataValue(jsonObject: $1, path: "\(path)[\($0)]") })
        case "dictionary":
            guard let values = body as? [String: Any] else { throw LogError.malformed("\(path): a dictionary is stored as a JSON object") }
            var result: [String: MetadataValue] = [:]
            for (key, value) in values { result[key] = try MetadataValue(jsonObject: value, path: "\(path)[\(JSONText.quoted(key))]") }
            self = .dictionary(result)
        default:
            throw LogError.malformed("\(path): unknown type \(JSONText.quoted(tag))")
        }
    }

    /// A user-metadata dictionary's stored bytes: a JSON object of stored forms, keys sorted.
    public static func encode(_ metadata: [String: MetadataValue]) throws -> Data {
        try JSONSerialization.data(withJSONObject: metadata.mapValues(\.jsonObject), options: [.sortedKeys, .withoutEscapingSlashes])
    }

    /// The dictionary stored `bytes` hold.
    ///
    /// - Throws: ``LogError/malformed(_:)`` naming the key whose value is damaged.
    public static func decode(_ bytes: Data) throws -> [String: MetadataValue] {
        guard let object = try? JSONSerialization.jsonObject(with: bytes), let dictionary = object as? [String: Any] else {
            throw LogError.malformed("the store's user metadata (meta userMetadata, \(bytes.count) bytes) is not a JSON object")
        }
        var result: [String: MetadataValue] = [:]
        for (key, value) in dictionary {
            result[key] = try MetadataValue(jsonObject: value, path: "the store's user metadata key \(JSONText.quoted(key))")
        }
        return result
    }
}
