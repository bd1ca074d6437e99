/// The permanent identity of an object in the log: its entity and primary key.
///
/// Primary keys are assigned at commit, per entity, densely from 1 in log order, so
/// replaying the log reproduces them. The context's `ManagedObjectID` wraps this with the
/// store's UUID to form URIs (`x-strata://<store>/<Entity>/p<pk>`).
///
/// ```swift
/// let id = StoredObjectID(entity: "Player", primaryKey: 12)
/// id.description   // "Player/p12"
/// ```
public struct StoredObjectID: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// The object's entity (the concrete one, never an abstract superentity).
    public let entity: String
    /// The primary key, unique within the entity.
    public let primaryKey: UInt64

    /// Creates an ID.
    public init(entity: String, primaryKey: UInt64) {
        self.entity = entity
        self.primaryKey = primaryKey
    }

    /// `Entity/pN`, the path part of the object's URI.
    public var description: String { "\(entity)/p\(primaryKey)" }

    /// Orders by entity name, then primary key.
    public static func < (lhs: StoredObjectID, rhs: StoredObjectID) -> Bool {
        lhs.entity == rhs.entity ? lhs.primaryKey < rhs.primaryKey : lhs.entity < rhs.entity
    }
}

/// An object's key inside the store: the entity's code and the primary key, 10 bytes
/// big-endian so that an entity's objects are contiguous and in key order.
struct ObjectKey: Hashable, Comparable {
    let entity: UInt16
    let primaryKey: UInt64

    static let byteCount = 10

    var bytes: [UInt8] {
        var w = ByteWriter(capacity: 10)
        w.uint16(entity)
        w.uint64(primaryKey)
        return w.bytes
    }

    /// Lends the key's 10 bytes without allocating.
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var storage: (UInt64, UInt64) = (0, 0)
        return try withUnsafeMutableBytes(of: &storage) { out in
            out.storeBytes(of: entity.bigEndian, toByteOffset: 0, as: UInt16.self)
            out.storeBytes(of: primaryKey.bigEndian, toByteOffset: 2, as: UInt64.self)
            return try body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(out)[0..<Self.byteCount]))
        }
    }

    func append(to writer: inout ByteWriter) {
        writer.uint16(entity)
        writer.uint64(primaryKey)
    }

    init(entity: UInt16, primaryKey: UInt64) {
        self.entity = entity
        self.primaryKey = primaryKey
    }

    /// Reads 10 bytes at `offset` of a key; nil unless the key holds them there (a damaged
    /// key may be shorter than the offset its table's layout implies).
    init?(_ raw: UnsafeRawBufferPointer, at offset: Int = 0) {
        guard offset >= 0, raw.count - offset >= 10 else { return nil }
        entity = UInt16(raw[offset]) << 8 | UInt16(raw[offset + 1])
        var pk: UInt64 = 0
        for i in 0..<8 { pk = pk << 8 | UInt64(raw[offset + 2 + i]) }
        primaryKey = pk
    }

    static func < (lhs: ObjectKey, rhs: ObjectKey) -> Bool {
        (lhs.entity, lhs.primaryKey) < (rhs.entity, rhs.primaryKey)
    }
}
