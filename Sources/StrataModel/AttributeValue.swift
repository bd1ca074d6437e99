public import Foundation

// MARK: - AttributeValue

/// A typed attribute value: one case per ``AttributeType``.
///
/// Core Data passes attribute values around as `id` (`NSNumber`, `NSString`, `NSDate`…);
/// Strata keeps them in this enum so the model, the managed objects and the event log agree
/// on exact types without boxing: every payload is stored inline (`transformable` carries
/// the value's encoded bytes). Use ``init(any:for:)`` to convert a key-value-coding value,
/// ``anyValue`` to go back, and ``canonicalJSON`` for the text form model files use.
///
/// ```swift
/// let pid = try AttributeValue(any: -1, for: .int32)   // .int32(-1)
/// pid.anyValue as? Int32                               // -1
/// pid.type                                             // .int32
/// ```
public enum AttributeValue: Sendable, Hashable {
    /// A 16-bit integer.
    case int16(Int16)
    /// A 32-bit integer.
    case int32(Int32)
    /// A 64-bit integer.
    case int64(Int64)
    /// A decimal number.
    case decimal(Decimal)
    /// A double-precision floating-point number.
    case double(Double)
    /// A single-precision floating-point number.
    case float(Float)
    /// A string.
    case string(String)
    /// A Boolean.
    case boolean(Bool)
    /// A date.
    case date(Date)
    /// Binary data.
    case binaryData(Data)
    /// A UUID.
    case uuid(UUID)
    /// A URL.
    case uri(URL)
    /// The encoded bytes of a transformable (`Codable`) value; see ``transformable(encoding:)``.
    case transformable(Data)

    // MARK: - Type

    /// Whether this value can be stored in an attribute of `type`.
    ///
    /// Transformable values match any transformable type: the bytes do not record their
    /// Swift type.
    ///
    /// ```swift
    /// AttributeValue.int32(1).matches(.int32)  // true
    /// AttributeValue.int32(1).matches(.int64)  // false
    /// ```
    public func matches(_ type: AttributeType) -> Bool {
        switch (self, type) {
        case (.int16, .int16), (.int32, .int32), (.int64, .int64), (.decimal, .decimal),
            (.double, .double), (.float, .float), (.string, .string), (.boolean, .boolean),
            (.date, .date), (.binaryData, .binaryData), (.uuid, .uuid), (.uri, .uri),
            (.transformable, .transformable):
            true
        default:
            false
        }
    }

    /// The name of this value's type (``AttributeType/name``), for messages.
    ///
    /// ```swift
    /// AttributeValue.string("a").typeName  // "string"
    /// ```
    public var typeName: String {
        switch self {
        case .int16: "int16"
        case .int32: "int32"
        case .int64: "int64"
        case .decimal: "decimal"
        case .double: "double"
        case .float: "float"
        case .string: "string"
        case .boolean: "boolean"
        case .date: "date"
        case .binaryData: "binaryData"
        case .uuid: "uuid"
        case .uri: "uri"
        case .transformable: "transformable"
        }
    }

    // MARK: - Transformable values

    /// Encodes a `Codable` value as a transformable attribute value.
    ///
    /// The encoding is JSON with sorted keys, so equal values give equal bytes and compare
    /// equal — which undo coalescing and change detection rely on. Corresponds to Core
    /// Data's `NSSecureUnarchiveFromDataTransformer`, with `Codable` in place of
    /// `NSSecureCoding`.
    ///
    /// ```swift
    /// let tags = try AttributeValue.transformable(encoding: ["red", "blue"])
    /// try tags.decodeTransformable(as: [String].self)  // ["red", "blue"]
    /// ```
    public static func transformable(encoding value: some Encodable) throws -> AttributeValue {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return .transformable(try encoder.encode(value))
    }

    /// Decodes a transformable value's bytes as `type`.
    ///
    /// Throws ``AttributeValueError`` if this is not a transformable value, or the decoder's
    /// error if the bytes are not a `type`.
    ///
    /// ```swift
    /// try value.decodeTransformable(as: [String].self)
    /// ```
    public func decodeTransformable<T: Decodable>(as type: T.Type) throws -> T {
        guard case .transformable(let bytes) = self else {
            throw AttributeValueError(
                expected: .transformable(valueTypeName: String(describing: type)), actual: typeName,
                reason: "the value is not transformable")
        }
        return try JSONDecoder().decode(type, from: bytes)
    }
}
