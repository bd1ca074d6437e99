// MARK: - AttributeType

/// The storage type of an attribute.
///
/// Corresponds to Core Data's `NSAttributeType` (`NSAttributeDescription.AttributeType` in
/// Swift). Every case maps to exactly one ``AttributeValue`` case, so a value can be checked
/// against its attribute without knowing any Swift class.
///
/// `transformable` stores a `Codable` value as encoded bytes; `valueTypeName` names the Swift
/// type the bytes decode to (Core Data's `attributeValueClassName`), so a reader without the
/// app's code can still say what the bytes are.
///
/// ```swift
/// let age = AttributeDescription("age", .int16)
/// let tags = AttributeDescription("tags", .transformable(valueTypeName: "[String]"))
/// ```
public enum AttributeType: Sendable, Hashable {
    /// A 16-bit signed integer (`NSInteger16AttributeType`).
    case int16
    /// A 32-bit signed integer (`NSInteger32AttributeType`).
    case int32
    /// A 64-bit signed integer (`NSInteger64AttributeType`).
    case int64
    /// A base-10 decimal number (`NSDecimalAttributeType`).
    case decimal
    /// A 64-bit floating-point number (`NSDoubleAttributeType`).
    case double
    /// A 32-bit floating-point number (`NSFloatAttributeType`).
    case float
    /// A Unicode string (`NSStringAttributeType`).
    case string
    /// A Boolean (`NSBooleanAttributeType`).
    case boolean
    /// A point in time (`NSDateAttributeType`).
    case date
    /// Raw bytes (`NSBinaryDataAttributeType`).
    case binaryData
    /// A UUID (`NSUUIDAttributeType`).
    case uuid
    /// A URL (`NSURIAttributeType`).
    case uri
    /// A `Codable` value stored as encoded bytes (`NSTransformableAttributeType`).
    ///
    /// `valueTypeName` is the Swift type name of the decoded value, for example `"[String]"`.
    case transformable(valueTypeName: String)

    /// Core Data's Swift name for ``int16`` (`NSAttributeDescription.AttributeType.integer16`).
    ///
    /// ```swift
    /// AttributeDescription("age", .integer16).attributeType == .int16  // true
    /// ```
    public static var integer16: AttributeType { .int16 }
    /// Core Data's Swift name for ``int32`` (`NSAttributeDescription.AttributeType.integer32`).
    public static var integer32: AttributeType { .int32 }
    /// Core Data's Swift name for ``int64`` (`NSAttributeDescription.AttributeType.integer64`).
    public static var integer64: AttributeType { .int64 }

    // MARK: - Names

    /// The type's name as written in model files: `int16`, `int32`, `int64`, `decimal`,
    /// `double`, `float`, `string`, `boolean`, `date`, `binaryData`, `uuid`, `uri`,
    /// `transformable`.
    ///
    /// The transformable value type name is not part of this name; model files store it
    /// separately as `valueType`.
    ///
    /// ```swift
    /// AttributeType.int32.name  // "int32"
    /// ```
    public var name: String {
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

    /// Every type name a model file accepts, in declaration order.
    ///
    /// Used in error messages that list the valid choices.
    ///
    /// ```swift
    /// AttributeType.allNames.contains("uuid")  // true
    /// ```
    public static let allNames: [String] = [
        "int16", "int32", "int64", "decimal", "double", "float", "string", "boolean", "date",
        "binaryData", "uuid", "uri", "transformable",
    ]

    /// Creates a type from its model-file name; `valueTypeName` is used only for
    /// `transformable`. Returns nil for an unknown name.
    ///
    /// ```swift
    /// AttributeType(name: "date")  // .date
    /// ```
    public init?(name: String, valueTypeName: String? = nil) {
        switch name {
        case "int16": self = .int16
        case "int32": self = .int32
        case "int64": self = .int64
        case "decimal": self = .decimal
        case "double": self = .double
        case "float": self = .float
        case "string": self = .string
        case "boolean": self = .boolean
        case "date": self = .date
        case "binaryData": self = .binaryData
        case "uuid": self = .uuid
        case "uri": self = .uri
        case "transformable": self = .transformable(valueTypeName: valueTypeName ?? "")
        default: return nil
        }
    }

    // MARK: - Classification

    /// Whether values of this type are integers, floating-point or decimal numbers.
    ///
    /// Minimum and maximum value rules apply to numeric and date attributes.
    ///
    /// ```swift
    /// AttributeType.float.isNumeric  // true
    /// ```
    public var isNumeric: Bool {
        switch self {
        case .int16, .int32, .int64, .decimal, .double, .float: true
        default: false
        }
    }

    /// Whether minimum and maximum length rules apply (strings and binary data).
    ///
    /// ```swift
    /// AttributeType.string.hasLength  // true
    /// ```
    public var hasLength: Bool {
        switch self {
        case .string, .binaryData: true
        default: false
        }
    }
}

// MARK: - Codable

extension AttributeType: Codable {
    /// Decodes a type from one string: its ``name``, or `transformable:<ValueType>`.
    ///
    /// ```swift
    /// try JSONDecoder().decode(AttributeType.self, from: Data(#""int32""#.utf8))
    /// ```
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        let prefix = "transformable:"
        if text.hasPrefix(prefix) {
            self = .transformable(valueTypeName: String(text.dropFirst(prefix.count)))
        } else if let type = AttributeType(name: text) {
            self = type
        } else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "unknown attribute type '\(text)'")
        }
    }

    /// Encodes the type as one string: its ``name``, or `transformable:<ValueType>`.
    ///
    /// ```swift
    /// try JSONEncoder().encode(AttributeType.uuid)  // "uuid"
    /// ```
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if case .transformable(let valueTypeName) = self {
            try container.encode("transformable:" + valueTypeName)
        } else {
            try container.encode(name)
        }
    }
}

// MARK: - CustomStringConvertible

extension AttributeType: CustomStringConvertible {
    /// The type's model-file name; transformable types add the value type in parentheses.
    ///
    /// ```swift
    /// "\(AttributeType.transformable(valueTypeName: "Tags"))"  // "transformable(Tags)"
    /// ```
    public var description: String {
        if case .transformable(let valueTypeName) = self {
            return "transformable(\(valueTypeName))"
        }
        return name
    }
}
