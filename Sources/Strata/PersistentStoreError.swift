public import Foundation

/// Why a store-management call failed (``PersistentStoreCoordinator/metadataForPersistentStore(type:at:)``,
/// ``PersistentStoreCoordinator/setMetadata(_:for:)``,
/// ``PersistentStoreCoordinator/destroyPersistentStore(at:type:)``,
/// ``PersistentStoreCoordinator/replacePersistentStore(at:withPersistentStoreFrom:type:)``,
/// ``PersistentContainer/loadPersistentStores()``). Each case names the path or key at fault.
///
/// Bridged to `NSError` in `NSCocoaErrorDomain` with Core Data's codes (``code``).
public enum PersistentStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No store at the path (Core Data: `NSFileReadNoSuchFileError`, 260).
    case noStore(path: String)
    /// The path holds something that isn't a Strata store, and why (`NSFileReadCorruptFileError`, 259).
    /// Nothing was changed.
    case notAStore(path: String, reason: String)
    /// The store is open — by this coordinator, elsewhere in this process or in another
    /// process — and the operation needs it closed (`NSPersistentStoreOperationError`, 134070).
    case storeInUse(path: String, detail: String)
    /// The store is open read-only (134070).
    case readOnlyStore(path: String)
    /// A metadata key Strata sets, given another value than the store's
    /// (`NSCoreDataError`, 134060).
    case reservedMetadataKey(key: String, reason: String)
    /// A metadata value that isn't a property-list type, with the key that holds it and its
    /// type (134060).
    case unsupportedMetadataValue(key: String, type: String)
    /// The container's store descriptions can't be loaded, and why (134070).
    case invalidDescription(String)
    /// The store was written with another model version, and the store description turns
    /// automatic migration off (`NSPersistentStoreIncompatibleVersionHashError`, 134100).
    /// Nothing was written.
    case incompatibleModel(path: String, reason: String)
    /// The store's data can't be migrated to the model, and why — a value that doesn't
    /// convert, a mandatory attribute without a default (`NSMigrationError`, 134110; spec
    /// 0004 §4.4–4.6). Nothing was written; the store opens as before with its earlier model.
    case migrationFailed(path: String, reason: String)
    /// The store's data can't be migrated to the model because the migrated objects break a
    /// uniqueness constraint — one the model adds, or one their values come under after the
    /// change (`NSMigrationConstraintViolationError`, 134111; spec 0004 §4.3). `reason` names
    /// the constraint, the value and the objects. Nothing was written; the store opens as
    /// before with its earlier model.
    case migrationConstraintViolation(path: String, reason: String)

    /// Core Data's error code for the case.
    public var code: Int {
        switch self {
        case .noStore: 260
        case .notAStore: 259
        case .storeInUse, .readOnlyStore, .invalidDescription: 134070
        case .reservedMetadataKey, .unsupportedMetadataValue: 134060
        case .incompatibleModel: 134100
        case .migrationFailed: 134110
        case .migrationConstraintViolation: 134111
        }
    }

    /// What was wrong and where.
    public var description: String {
        switch self {
        case .noStore(let path): "there is no store at \(path)"
        case .notAStore(let path, let reason): "\(path) is not a Strata store: \(reason)"
        case .storeInUse(let path, let detail): "the store at \(path) is in use: \(detail)"
        case .readOnlyStore(let path): "the store at \(path) is open read-only: its metadata can't be set"
        case .reservedMetadataKey(let key, let reason): "metadata key \(JSONText.quoted(key)) is Strata's: \(reason)"
        case .unsupportedMetadataValue(let key, let type):
            "metadata key \(JSONText.quoted(key)) holds a \(type), which isn't a property-list type (String, an integer, Double, Bool, Date, Data, or an array or dictionary of those)"
        case .invalidDescription(let detail): detail
        case .incompatibleModel(let path, let reason): "the store at \(path) is incompatible with the model: \(reason)"
        case .migrationFailed(let path, let reason): "the store at \(path) can't be migrated to the model: \(reason)"
        case .migrationConstraintViolation(let path, let reason):
            "the store at \(path) can't be migrated to the model: the migrated objects break a uniqueness constraint: \(reason)"
        }
    }
}

extension PersistentStoreError: LocalizedError, CustomNSError {
    /// `NSCocoaErrorDomain`, as Core Data's errors.
    public static var errorDomain: String { NSCocoaErrorDomain }
    /// ``code``.
    public var errorCode: Int { code }
    /// The description under `NSLocalizedDescriptionKey`.
    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: description] }
    /// The description (`localizedDescription`).
    public var errorDescription: String? { description }
}

extension MetadataValue {
    /// `value` as a metadata value: a ``MetadataValue``, `String`, `Bool`, any fixed-width
    /// integer that fits in `Int64`, `Double`, `Float`, `Date`, `Data`, or an array or
    /// `[String: …]` dictionary of those. `key` names the value in errors (`"tags"[2]`).
    ///
    /// - Throws: ``PersistentStoreError/unsupportedMetadataValue(key:type:)`` naming the key
    ///   and the type of anything else (an unsigned integer past `Int64.max` included).
    public init(propertyListValue value: Any, key: String) throws {
        switch value {
        case let value as MetadataValue: self = value
        case let value as String: self = .string(value)
        case let value as Substring: self = .string(String(value))
        case let value as Bool: self = .boolean(value)
        case let value as Int: self = .integer(Int64(value))
        case let value as Int8: self = .integer(Int64(value))
        case let value as Int16: self = .integer(Int64(value))
        case let value as Int32: self = .integer(Int64(value))
        case let value as Int64: self = .integer(value)
        case let value as UInt8: self = .integer(Int64(value))
        case let value as UInt16: self = .integer(Int64(value))
        case let value as UInt32: self = .integer(Int64(value))
        case let value as UInt where value <= UInt(Int64.max): self = .integer(Int64(value))
        case let value as UInt64 where value <= UInt64(Int64.max): self = .integer(Int64(value))
        case let value as Double: self = .double(value)
        case let value as Float: self = .double(Double(value))
        case let value as Date: self = .date(value)
        case let value as Data: self = .data(value)
        case let values as [Any]:
            self = .array(try values.enumerated().map { try MetadataValue(propertyListValue: $1, key: "\(key)[\($0)]") })
        case let values as [String: Any]:
            var result: [String: MetadataValue] = [:]
            for (name, element) in values { result[name] = try MetadataValue(propertyListValue: element, key: "\(key)[\(JSONText.quoted(name))]") }
            self = .dictionary(result)
        default:
            throw PersistentStoreError.unsupportedMetadataValue(key: key, type: String(describing: type(of: value)))
        }
    }
}
