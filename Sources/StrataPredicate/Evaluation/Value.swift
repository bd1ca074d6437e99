internal import Foundation

// MARK: - Value

/// A runtime value during evaluation: scalars classified once, so comparisons switch on
/// an enum instead of casting `Any` repeatedly.
enum Value {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case decimal(Decimal)
    case string(String)
    case date(Date)
    case data(Data)
    case uuid(UUID)
    case url(URL)
    /// An identity stored in the predicate from an object argument.
    case identity(PredicateIdentity)
    case collection([Value])
    /// Anything else: a key-value coding object, a dictionary, an unknown value.
    case object(Any)

    // MARK: - Classification

    /// Classifies a value read from an object (nested optionals and `NSNull` are nil).
    ///
    /// This runs for every key path read in a full-scan fetch, so the common Swift types
    /// are tried first, and Foundation classes are only tried for class instances: casting
    /// a Swift value to an `NS` class would bridge it (copying a whole dictionary).
    init(any: Any?) {
        guard let value = any else {
            self = .null
            return
        }
        // Casts to concrete types also unwrap optionals hidden in the `Any`.
        switch value {
        // An NSNumber is classified by its objCType (`init(instance:)`), not by the Swift
        // types it bridges to: as a Double an NSDecimalNumber would lose the decimal it holds.
        case _ where type(of: value) is AnyClass && value is NSNumber: self = Value(uncommon: value)
        case let v as Int: self = .int(v)
        case let v as String: self = .string(v)
        case let v as Double: self = .double(v)
        case let v as Bool: self = .bool(v)
        case let v as Date: self = .date(v)
        case let v as Decimal: self = .decimal(v)
        case is [String: Any]: self = .object(value)
        default: self = Value(uncommon: value)
        }
    }

    private init(uncommon value: Any) {
        if type(of: value) is AnyClass {
            self = Value(instance: value)
            return
        }
        switch value {
        case let v as [Any]: self = .collection(v.map { Value(any: $0) })
        case let v as Int64: self = .int(Int(v))
        case let v as Int32: self = .int(Int(v))
        case let v as Int16: self = .int(Int(v))
        case let v as Float: self = .double(Double(v))
        case let v as UUID: self = .uuid(v)
        case let v as URL: self = .url(v)
        case let v as Data: self = .data(v)
        case let v as Int8: self = .int(Int(v))
        case let v as UInt8: self = .int(Int(v))
        case let v as UInt16: self = .int(Int(v))
        case let v as UInt32: self = .int(Int(v))
        case let v as UInt: self = Int(exactly: v).map { .int($0) } ?? .decimal(Decimal(v))
        case let v as UInt64: self = Int(exactly: v).map { .int($0) } ?? .decimal(Decimal(v))
        case let v as Substring: self = .string(String(v))
        case let v as Character: self = .string(String(v))
        case let v as PredicateConstant: self = Value(v)
        case let v as Set<AnyHashable>: self = .collection(v.map { Value(any: $0.base) })
        default:
            if let optional = value as? any OptionalBox {
                self = Value(any: optional.wrappedAny)
            } else {
                // Key-value coding values, identified objects, anything else.
                self = .object(value)
            }
        }
    }

    /// Class instances: Foundation's boxes and collections, or objects.
    private init(instance value: Any) {
        switch value {
        case is any KeyValueCoding, is any PredicateObjectIdentity: self = .object(value)
        case is NSNull: self = .null
        case let v as NSNumber:
            switch (try? ArgumentConverter.constant(v)) ?? .null {
            case .bool(let b): self = .bool(b)
            case .integer(let i): self = .int(i)
            case .double(let d): self = .double(d)
            case .decimal(let d): self = .decimal(d)
            default: self = .object(v)
            }
        case let v as NSString: self = .string(v as String)
        default:
            if let elements = KeyPathWalker.elements(of: value) {
                self = .collection(elements.map { Value(any: $0) })
            } else {
                self = .object(value)
            }
        }
    }

    /// The runtime form of a constant.
    init(_ constant: PredicateConstant) {
        switch constant {
        case .null: self = .null
        case .bool(let v): self = .bool(v)
        case .integer(let v): self = .int(v)
        case .double(let v): self = .double(v)
        case .decimal(let v): self = .decimal(v)
        case .string(let v): self = .string(v)
        case .date(let v): self = .date(v)
        case .data(let v): self = .data(v)
        case .uuid(let v): self = .uuid(v)
        case .url(let v): self = .url(v)
        case .aggregate(let elements): self = .collection(elements.map(Value.init))
        case .object(let identity): self = .identity(identity)
        }
    }

    /// The value as `Any?`, for walking key paths and returning results.
    var any: Any? {
        switch self {
        case .null: nil
        case .bool(let v): v
        case .int(let v): v
        case .double(let v): v
        case .decimal(let v): v
        case .string(let v): v
        case .date(let v): v
        case .data(let v): v
        case .uuid(let v): v
        case .url(let v): v
        case .identity(let v): v
        case .collection(let elements): elements.map { $0.any ?? NSNull() } as [Any]
        case .object(let v): v
        }
    }

    var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// A short name of the value's kind, for error messages.
    var kindName: String {
        switch self {
        case .null: "nil"
        case .bool: "Bool"
        case .int: "Int"
        case .double: "Double"
        case .decimal: "Decimal"
        case .string: "String"
        case .date: "Date"
        case .data: "Data"
        case .uuid: "UUID"
        case .url: "URL"
        case .identity: "object identity"
        case .collection: "collection"
        case .object(let v): String(describing: type(of: v))
        }
    }

    /// The elements when the value is a collection; a scalar is a one-element collection
    /// and nil is empty (used by ANY/ALL/NONE and aggregate functions).
    var elements: [Value] {
        switch self {
        case .collection(let elements): elements
        case .null: []
        default: [self]
        }
    }
}
