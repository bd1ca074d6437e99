internal import Foundation

// MARK: - Canonical JSON form

extension AttributeValue {
    /// The value's canonical JSON text, as model files write default values and validation
    /// bounds.
    ///
    /// Integers, `double` and `float` are JSON numbers (non-finite floating-point values are
    /// the strings `"NaN"`, `"Infinity"`, `"-Infinity"`); `decimal` is a string, so no digit is
    /// lost to binary floating point; `string` is a string; `boolean` is `true`/`false`;
    /// `date` is an ISO 8601 UTC string (`"2024-05-01T12:00:00Z"`, with fractional seconds to
    /// the microsecond when present); `binaryData` and `transformable` are base64 strings;
    /// `uuid` is the upper-case UUID string; `uri` is the absolute URL string.
    ///
    /// ```swift
    /// AttributeValue.int32(-1).canonicalJSON           // "-1"
    /// AttributeValue.decimal(Decimal(string: "1.10")!).canonicalJSON  // "\"1.1\""
    /// ```
    public var canonicalJSON: String { jsonValue.serialized(pretty: false) }

    /// Parses a value of `type` from its canonical JSON text (see ``canonicalJSON``).
    ///
    /// Besides the canonical forms, `decimal` accepts a JSON number, `uuid` a lower-case UUID,
    /// and `date` a number of seconds since 1970. Integer attributes accept only integer
    /// literals in range. Throws ``AttributeValueError`` for text that is not valid JSON or not a
    /// value of `type`.
    ///
    /// ```swift
    /// try AttributeValue(canonicalJSON: "-1", for: .int32)  // .int32(-1)
    /// ```
    public init(canonicalJSON text: String, for type: AttributeType) throws(AttributeValueError) {
        let json: JSONValue
        do {
            json = try JSONValue.parse(Data(text.utf8))
        } catch {
            throw AttributeValueError(expected: type, actual: "invalid JSON", reason: error.description)
        }
        try self.init(json: json, for: type)
    }

    // MARK: - JSONValue bridge

    var jsonValue: JSONValue {
        switch self {
        case .int16(let v): .number(String(v))
        case .int32(let v): .number(String(v))
        case .int64(let v): .number(String(v))
        case .decimal(let v): .string(v.description)
        case .double(let v): AttributeValue.floatingJSON(v.isFinite ? "\(v)" : nil, v)
        case .float(let v): AttributeValue.floatingJSON(v.isFinite ? "\(v)" : nil, Double(v))
        case .string(let v): .string(v)
        case .boolean(let v): .bool(v)
        case .date(let v): .string(ISO8601.format(v))
        case .binaryData(let v): .string(v.base64EncodedString())
        case .uuid(let v): .string(v.uuidString)
        case .uri(let v): .string(v.absoluteString)
        case .transformable(let v): .string(v.base64EncodedString())
        }
    }

    private static func floatingJSON(_ finite: String?, _ value: Double) -> JSONValue {
        if let finite { return .number(finite) }
        if value.isNaN { return .string("NaN") }
        return .string(value < 0 ? "-Infinity" : "Infinity")
    }

    init(json: JSONValue, for type: AttributeType) throws(AttributeValueError) {
        func fail(_ reason: String = "not a value of this type") -> AttributeValueError {
            AttributeValueError(expected: type, actual: json.kindName, reason: reason)
        }
        switch (type, json) {
        case (.int16, .number(let n)):
            guard let v = Int16(n) else { throw fail("\(n) is not an integer in the range of int16") }
            self = .int16(v)
        case (.int32, .number(let n)):
            guard let v = Int32(n) else { throw fail("\(n) is not an integer in the range of int32") }
            self = .int32(v)
        case (.int64, .number(let n)):
            guard let v = Int64(n) else { throw fail("\(n) is not an integer in the range of int64") }
            self = .int64(v)
        case (.decimal, .number(let n)), (.decimal, .string(let n)):
            guard let v = Decimal(string: n, locale: Locale(identifier: "en_US_POSIX")), !v.isNaN,
                AttributeValue.isDecimalText(n)
            else { throw fail("\"\(n)\" is not a decimal number") }
            self = .decimal(v)
        case (.double, .number(let n)):
            guard let v = Double(n) else { throw fail() }
            self = .double(v)
        case (.double, .string(let s)):
            guard let v = AttributeValue.nonFinite(s) else { throw fail("\"\(s)\" is not a number") }
            self = .double(v)
        case (.float, .number(let n)):
            guard let v = Float(n) else { throw fail() }
            self = .float(v)
        case (.float, .string(let s)):
            guard let v = AttributeValue.nonFinite(s) else { throw fail("\"\(s)\" is not a number") }
            self = .float(Float(v))
        case (.string, .string(let s)):
            self = .string(s)
        case (.boolean, .bool(let b)):
            self = .boolean(b)
        case (.date, .string(let s)):
            guard let d = ISO8601.parse(s) else { throw fail("\"\(s)\" is not an ISO 8601 date such as 2024-05-01T12:00:00Z") }
            self = .date(d)
        case (.date, .number(let n)):
            guard let t = Double(n) else { throw fail() }
            // Only a date the file can hold again: it is written back as ISO 8601 text, which
            // has years 0000–9999.
            let date = Date(timeIntervalSince1970: t)
            guard ISO8601.parse(ISO8601.format(date)) != nil else {
                throw fail("\(n) seconds since 1970 is outside the years 0000–9999 an ISO 8601 date in a model file can hold")
            }
            self = .date(date)
        case (.binaryData, .string(let s)):
            guard let d = Data(base64Encoded: s) else { throw fail("not base64") }
            self = .binaryData(d)
        case (.transformable, .string(let s)):
            guard let d = Data(base64Encoded: s) else { throw fail("not base64") }
            self = .transformable(d)
        case (.uuid, .string(let s)):
            guard let u = UUID(uuidString: s) else { throw fail("\"\(s)\" is not a UUID") }
            self = .uuid(u)
        case (.uri, .string(let s)):
            guard let u = URL(string: s) else { throw fail("\"\(s)\" is not a URL") }
            self = .uri(u)
        default:
            throw fail()
        }
    }

    private static func nonFinite(_ s: String) -> Double? {
        switch s {
        case "NaN": .nan
        case "Infinity": .infinity
        case "-Infinity": -.infinity
        default: nil
        }
    }

    /// `Decimal(string:)` stops at the first bad character; insist the whole text is a number.
    /// Whether `s` is a decimal number in full: `-?digits(.digits)?([eE][+-]?digits)?` (a
    /// leading `+` allowed too). `Decimal(string:)` stops at the first character it can't use,
    /// so `"1-2"` would read as 1.
    private static func isDecimalText(_ s: String) -> Bool {
        var rest = Substring(s)
        func digits() -> Bool {
            let count = rest.prefix { $0.isASCII && $0.isNumber }.count
            rest = rest.dropFirst(count)
            return count > 0
        }
        if rest.first == "-" || rest.first == "+" { rest = rest.dropFirst() }
        guard digits() else { return false }
        if rest.first == "." {
            rest = rest.dropFirst()
            guard digits() else { return false }
        }
        if rest.first == "e" || rest.first == "E" {
            rest = rest.dropFirst()
            if rest.first == "-" || rest.first == "+" { rest = rest.dropFirst() }
            guard digits() else { return false }
        }
        return rest.isEmpty
    }
}

// MARK: - Codable

extension AttributeValue: Codable {
    private struct TypeKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Decodes a value from a one-member object whose key is the type name, as written by
    /// ``encode(to:)``.
    ///
    /// ```swift
    /// try JSONDecoder().decode(AttributeValue.self, from: Data(#"{"int32":-1}"#.utf8))
    /// ```
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: TypeKey.self)
        guard container.allKeys.count == 1, let key = container.allKeys.first else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "expected one member naming the attribute type"))
        }
        switch key.stringValue {
        case "int16": self = .int16(try container.decode(Int16.self, forKey: key))
        case "int32": self = .int32(try container.decode(Int32.self, forKey: key))
        case "int64": self = .int64(try container.decode(Int64.self, forKey: key))
        case "decimal":
            let text = try container.decode(String.self, forKey: key)
            guard let d = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else {
                throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "not a decimal")
            }
            self = .decimal(d)
        case "double": self = .double(Double(bitPattern: try container.decode(UInt64.self, forKey: key)))
        case "float": self = .float(Float(bitPattern: try container.decode(UInt32.self, forKey: key)))
        case "string": self = .string(try container.decode(String.self, forKey: key))
        case "boolean": self = .boolean(try container.decode(Bool.self, forKey: key))
        case "date": self = .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try container.decode(UInt64.self, forKey: key))))
        case "binaryData": self = .binaryData(try container.decode(Data.self, forKey: key))
        case "uuid": self = .uuid(try container.decode(UUID.self, forKey: key))
        case "uri": self = .uri(try container.decode(URL.self, forKey: key))
        case "transformable": self = .transformable(try container.decode(Data.self, forKey: key))
        default:
            throw DecodingError.dataCorruptedError(
                forKey: key, in: container, debugDescription: "unknown attribute type '\(key.stringValue)'")
        }
    }

    /// Encodes the value as a one-member object keyed by its type name.
    ///
    /// Floating-point numbers and dates are encoded by bit pattern, so every value —
    /// including NaN payloads and sub-microsecond dates — round-trips exactly.
    ///
    /// ```swift
    /// try JSONEncoder().encode(AttributeValue.int32(-1))  // {"int32":-1}
    /// ```
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: TypeKey.self)
        let key = TypeKey(stringValue: typeName)
        switch self {
        case .int16(let v): try container.encode(v, forKey: key)
        case .int32(let v): try container.encode(v, forKey: key)
        case .int64(let v): try container.encode(v, forKey: key)
        case .decimal(let v): try container.encode(v.description, forKey: key)
        case .double(let v): try container.encode(v.bitPattern, forKey: key)
        case .float(let v): try container.encode(v.bitPattern, forKey: key)
        case .string(let v): try container.encode(v, forKey: key)
        case .boolean(let v): try container.encode(v, forKey: key)
        case .date(let v): try container.encode(v.timeIntervalSinceReferenceDate.bitPattern, forKey: key)
        case .binaryData(let v): try container.encode(v, forKey: key)
        case .uuid(let v): try container.encode(v, forKey: key)
        case .uri(let v): try container.encode(v, forKey: key)
        case .transformable(let v): try container.encode(v, forKey: key)
        }
    }
}

// MARK: - CustomStringConvertible

extension AttributeValue: CustomStringConvertible {
    /// The type name and canonical JSON, for messages: `int32 -1`, `string "Ann"`.
    ///
    /// ```swift
    /// "\(AttributeValue.int32(-1))"  // "int32 -1"
    /// ```
    public var description: String { "\(typeName) \(canonicalJSON)" }
}
