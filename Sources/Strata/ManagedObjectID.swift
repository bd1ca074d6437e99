public import Foundation
import StrataLog
public import StrataPredicate

/// The identity of a managed object: its entity and either a temporary ID (not yet saved)
/// or a permanent one in a store (Core Data's `NSManagedObjectID`).
///
/// IDs are values: `Sendable`, `Hashable`, `Codable` (as their URI), so they are what passes
/// between contexts and threads. Permanent IDs are assigned at save, in log order.
///
/// ```swift
/// let id = player.objectID
/// id.uriRepresentation()   // x-strata://6F1C…/Player/p12
/// ```
public struct ManagedObjectID: Sendable, Hashable, Comparable, Codable, CustomStringConvertible, PredicateObjectIdentity {
    enum Storage: Sendable, Hashable {
        case temporary(UUID)
        case permanent(storeUUID: UUID, primaryKey: UInt64)
    }

    /// The name of the object's entity.
    public let entityName: String
    let storage: Storage

    init(entityName: String, storage: Storage) {
        self.entityName = entityName
        self.storage = storage
    }

    static func temporary(_ entity: String) -> ManagedObjectID {
        ManagedObjectID(entityName: entity, storage: .temporary(UUID()))
    }

    static func permanent(_ id: StoredObjectID, store: UUID) -> ManagedObjectID {
        ManagedObjectID(entityName: id.entity, storage: .permanent(storeUUID: store, primaryKey: id.primaryKey))
    }

    /// Whether the object hasn't been saved yet (`isTemporaryID`).
    public var isTemporaryID: Bool {
        if case .temporary = storage { return true }
        return false
    }

    /// The URI that names this object: `x-strata://<store>/<Entity>/p<pk>`, or
    /// `x-strata:///<Entity>/t<UUID>` for a temporary ID (`uriRepresentation()`, spec 0005).
    public func uriRepresentation() -> URL {
        switch storage {
        case .temporary(let id): ObjectURI.temporary(entity: entityName, id: id)
        case .permanent(let store, let pk): ObjectURI.permanent(StoredObjectID(entity: entityName, primaryKey: pk), storeUUID: store)
        }
    }

    /// The ID in the store, for a permanent ID.
    var storedID: StoredObjectID? {
        if case .permanent(_, let pk) = storage { return StoredObjectID(entity: entityName, primaryKey: pk) }
        return nil
    }

    /// A cheap total order (entity, then permanent before temporary, then key or UUID),
    /// used to keep unordered to-many values canonical.
    public static func < (lhs: ManagedObjectID, rhs: ManagedObjectID) -> Bool {
        if lhs.entityName != rhs.entityName { return lhs.entityName < rhs.entityName }
        switch (lhs.storage, rhs.storage) {
        case (.permanent(let a, let x), .permanent(let b, let y)):
            return x != y ? x < y : a.uuidString < b.uuidString
        case (.permanent, .temporary): return true
        case (.temporary, .permanent): return false
        case (.temporary(let a), .temporary(let b)):
            // The bytes in order, as two big-endian words: what comparing them one by one gives.
            let (x, y) = (Self.words(a), Self.words(b))
            return x.high != y.high ? x.high < y.high : x.low < y.low
        }
    }

    /// A UUID's 16 bytes as two big-endian words (the first eight bytes, then the last).
    @inline(__always)
    private static func words(_ id: UUID) -> (high: UInt64, low: UInt64) {
        withUnsafeBytes(of: id.uuid) { raw in
            (raw.loadUnaligned(as: UInt64.self).bigEndian, raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self).bigEndian)
        }
    }

    /// Hashes the primary key or the temporary UUID only: they tell IDs apart almost
    /// always (equality still compares everything), and hashing them costs less than the
    /// entity name and the store's UUID, which every lookup in a context would hash again.
    public func hash(into hasher: inout Hasher) {
        switch storage {
        case .temporary(let id): hasher.combine(id)
        case .permanent(_, let primaryKey): hasher.combine(primaryKey)
        }
    }

    /// The hash dictionaries and sets use: the key (or all of a temporary ID's bits) mixed
    /// with the table's seed by one multiply–xorshift pass, not a whole `Hasher` run — a
    /// context puts every object it makes in its registry and takes it out again. Equal IDs
    /// hash alike, as ``hash(into:)`` promises; keys come from the store's counters.
    public func _rawHashValue(seed: Int) -> Int {
        var bits: UInt64
        switch storage {
        case .temporary(let id):
            bits = withUnsafeBytes(of: id.uuid) { raw in
                raw.loadUnaligned(as: UInt64.self) ^ raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self).byteSwapped
            }
        case .permanent(_, let primaryKey):
            bits = primaryKey
        }
        // SplitMix64's finalizer over the bits and the seed.
        bits ^= UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15
        bits = (bits ^ (bits >> 30)) &* 0xBF58_476D_1CE4_E5B9
        bits = (bits ^ (bits >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int(truncatingIfNeeded: bits ^ (bits >> 31))
    }

    /// Whether two IDs name the same object: same entity, same store and key (or the same
    /// temporary ID).
    public static func == (lhs: ManagedObjectID, rhs: ManagedObjectID) -> Bool {
        lhs.storage == rhs.storage && lhs.entityName == rhs.entityName
    }

    /// The URI, as a string.
    public var description: String { uriRepresentation().absoluteString }

    /// Predicates compare objects by their IDs.
    public var predicateIdentity: any Hashable & Sendable { self }

    // MARK: - Codable

    /// Decodes an ID from its URI string.
    ///
    /// - Throws: `DecodingError.dataCorrupted` for a string that isn't an object URI.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        switch ObjectURI.parse(text) {
        case .permanent(let store, let id)?:
            self.init(entityName: id.entity, storage: .permanent(storeUUID: store, primaryKey: id.primaryKey))
        case .temporary(let entity, let id)?:
            self.init(entityName: entity, storage: .temporary(id))
        case nil:
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an object URI: \(text)"))
        }
    }

    /// Encodes the ID as its URI string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
