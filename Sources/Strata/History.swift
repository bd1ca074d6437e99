public import Foundation
public import StrataLog
public import StrataModel
import StrataStorage

// The history API's values (`Specs/0009-history.md`): tokens, transactions, changes, values
// and errors — Core Data's persistent history (`NSPersistentHistoryToken`,
// `NSPersistentHistoryTransaction`, `NSPersistentHistoryChange`), but every change keeps
// each property's value before and after.

// MARK: - Tokens

/// A point in a store's history: just after transaction ``sequence`` (0: before the first),
/// in the store ``storeIdentifier`` (Core Data's `NSPersistentHistoryToken`).
///
/// Tokens are values: `Codable` (persist the last one a consumer processed), `Sendable`,
/// and ordered by sequence. A token of another store is refused with
/// ``HistoryError/foreignToken(_:storeIdentifier:)``, never read as a point of this one.
///
/// ```swift
/// let token = try coordinator.currentHistoryToken()
/// let data = try JSONEncoder().encode(token)            // {"sequence":812,"store":"6F1C…"}
/// let later = try coordinator.history(.after(token))
/// ```
public struct HistoryToken: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// The store the token belongs to (its UUID, part of every object URI).
    public let storeIdentifier: UUID
    /// The last transaction before the point (0: the start of the store's history).
    public let sequence: UInt64

    /// The point just after transaction `sequence` of the store `storeIdentifier`.
    public init(storeIdentifier: UUID, sequence: UInt64) {
        self.storeIdentifier = storeIdentifier
        self.sequence = sequence
    }

    /// By sequence; tokens of different stores (which shouldn't be compared) by store after that.
    public static func < (lhs: HistoryToken, rhs: HistoryToken) -> Bool {
        if lhs.sequence != rhs.sequence { return lhs.sequence < rhs.sequence }
        return lhs.storeIdentifier.uuidString < rhs.storeIdentifier.uuidString
    }

    /// `812@6F1C…`.
    public var description: String { "\(sequence)@\(storeIdentifier.uuidString)" }

    private enum CodingKeys: String, CodingKey {
        case store, sequence
    }

    /// Decodes `{"store": "<UUID>", "sequence": N}`.
    ///
    /// - Throws: `DecodingError` for a missing field or a store that isn't a UUID.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let text = try container.decode(String.self, forKey: .store)
        guard let uuid = UUID(uuidString: text) else {
            throw DecodingError.dataCorruptedError(forKey: .store, in: container, debugDescription: "not a store UUID: \(text)")
        }
        storeIdentifier = uuid
        sequence = try container.decode(UInt64.self, forKey: .sequence)
    }

    /// Encodes `{"store": "<UUID>", "sequence": N}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(storeIdentifier.uuidString, forKey: .store)
        try container.encode(sequence, forKey: .sequence)
    }
}

// MARK: - Values

/// A property's value in history, as contexts see it: an attribute value, a to-one
/// destination, or to-many destinations (in list order for an ordered relationship, sorted
/// for an unordered one). Relationships name objects by their permanent ``ManagedObjectID``.
public enum HistoryValue: Sendable, Hashable, CustomStringConvertible {
    /// An attribute's value (nil: no value).
    case attribute(AttributeValue?)
    /// A to-one relationship's destination (nil: none).
    case toOne(ManagedObjectID?)
    /// A to-many relationship's destinations.
    case toMany([ManagedObjectID])

    /// Whether the value is empty: nil, no destination, or no destinations.
    public var isNil: Bool {
        switch self {
        case .attribute(let value): value == nil
        case .toOne(let id): id == nil
        case .toMany(let ids): ids.isEmpty
        }
    }

    /// The attribute value, if this is one.
    public var attributeValue: AttributeValue? {
        if case .attribute(let value) = self { return value }
        return nil
    }

    /// The destinations, for either kind of relationship (empty for an attribute).
    public var objectIDs: [ManagedObjectID] {
        switch self {
        case .attribute: []
        case .toOne(let id): id.map { [$0] } ?? []
        case .toMany(let ids): ids
        }
    }

    /// `nil`, `"Ada"`, `x-strata://…/Team/p1`, `[…]`.
    public var description: String {
        switch self {
        case .attribute(nil), .toOne(nil): "nil"
        case .attribute(let value?): LogValue.attribute(value).description
        case .toOne(let id?): id.description
        case .toMany(let ids): "[" + ids.map(\.description).joined(separator: ", ") + "]"
        }
    }
}

/// One property's change inside a ``HistoryChange``.
public enum HistoryPropertyChange: Sendable, Hashable {
    /// The property went from `before` to `after` (for an insert, `before` is empty; for a
    /// delete, `after` is).
    case value(property: String, before: HistoryValue, after: HistoryValue)
    /// An unordered to-many relationship gained `added` and lost `removed` (the log records
    /// membership changes, not whole sets).
    case membership(property: String, added: [ManagedObjectID], removed: [ManagedObjectID])

    /// The property's name.
    public var property: String {
        switch self {
        case .value(let property, _, _), .membership(let property, _, _): property
        }
    }
}

// MARK: - Changes and transactions

/// One object's change in a ``HistoryTransaction`` (Core Data's `NSPersistentHistoryChange`,
/// plus every changed property's value before and after).
///
/// Relationship changes appear on the side the log records (`Specs/0004-event-log.md`
/// §4.1: the to-one side of a one-to-many, …); the inverse side's change is implied.
public struct HistoryChange: Sendable, Hashable {
    /// Insert, update or delete (Core Data's `NSPersistentHistoryChangeType`).
    public enum ChangeType: String, Sendable, Hashable, CustomStringConvertible {
        /// The object was inserted.
        case insert
        /// Some of its properties changed.
        case update
        /// The object was deleted.
        case delete

        /// `insert`, `update`, `delete`.
        public var description: String { rawValue }
    }

    /// The object changed (`changedObjectID`): a permanent ID of the store.
    public let changedObjectID: ManagedObjectID
    /// Insert, update or delete (`changeType`).
    public let changeType: ChangeType
    /// Every property the change touched, sorted by name: an insert lists the values it set,
    /// a delete the values the object had (its before-image), an update what changed.
    public let propertyChanges: [HistoryPropertyChange]
    /// The position of the change's undo group in its transaction (0 for the first).
    public let groupIndex: Int
    /// The undo group's action name ("Add Player"), if the app gave one.
    public let actionName: String?
    /// Set when the group undoes or redoes a saved group.
    public let groupOrigin: GroupOrigin?
    /// For a delete, the deleted object's values of the attributes its entity marks
    /// ``AttributeDescription/preservesValueInHistoryOnDeletion`` (inherited ones included),
    /// by name (Core Data's `tombstone`); nil for an insert or update, or an entity that
    /// marks none. The whole before-image is in ``propertyChanges`` either way.
    public let tombstone: [String: HistoryValue]?

    /// The entity of the changed object.
    public var entityName: String { changedObjectID.entityName }

    /// The names of the properties the change touched (Core Data's `updatedProperties`, for
    /// every change type).
    public var changedProperties: Set<String> { Set(propertyChanges.map(\.property)) }

    /// The change to `property`, if the change touched it.
    public func change(of property: String) -> HistoryPropertyChange? {
        propertyChanges.first { $0.property == property }
    }
}

/// One committed transaction as history (Core Data's `NSPersistentHistoryTransaction`).
public struct HistoryTransaction: Sendable, Hashable, Identifiable {
    /// The point just after this transaction: pass it to `.after(_:)` to continue.
    public let token: HistoryToken
    /// When it was committed (microsecond precision).
    public let timestamp: Date
    /// Who committed it (the context's `transactionAuthor`).
    public let author: String?
    /// The committing context's name.
    public let contextName: String?
    /// The committing process's ID.
    public let processID: Int32
    /// Save, undo or redo (with the sequence and group they undo or redo), migration,
    /// import, key reservation, or purge.
    public let kind: TransactionKind
    /// The store's number for the model the transaction was written with.
    public let modelVersion: Int
    /// The changes, in the order they were applied (only those a request's object or entity
    /// filter selects).
    public let changes: [HistoryChange]

    /// The transaction's sequence number: dense from 1, in commit order.
    public var sequence: UInt64 { token.sequence }

    /// Identity: the token.
    public var id: HistoryToken { token }
}

/// The state of the whole store at a point of its history: what a consumer behind a purge
/// restarts from (``PersistentStoreCoordinator/historySnapshot(at:)``).
public struct HistorySnapshot: Sendable, Hashable {
    /// The point.
    public let token: HistoryToken
    /// Every object that existed then, with its recorded values (attributes, recorded
    /// relationship sides).
    public let objects: [ManagedObjectID: [String: HistoryValue]]
}

// MARK: - Errors

/// What a purge removed, given to whoever asks for history below it
/// (``HistoryError/historyPurged(_:)``).
public struct PurgedHistory: Sendable, Hashable {
    /// The point the request asked to read from.
    public let requested: HistoryToken
    /// Where to restart: history after this token is whole, and the state at it is
    /// ``PersistentStoreCoordinator/historySnapshot(at:)`` (the purge's base snapshot).
    public let restartToken: HistoryToken
    /// The purge marker transaction (the newest purge).
    public let markerToken: HistoryToken?
    /// Who purged (the marker's author).
    public let purgedBy: String?
    /// When.
    public let purgedAt: Date?
}

/// Why a history request failed.
public enum HistoryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A token of another store (its identifier differs from the store's).
    case foreignToken(HistoryToken, storeIdentifier: UUID)
    /// A token past the store's head: not a point this store has reached (a store restored
    /// from an older copy, or a token of a copy of the store).
    case tokenAheadOfStore(HistoryToken, head: UInt64)
    /// The history asked for was purged (Core Data's `NSPersistentHistoryTokenExpiredError`):
    /// restart from the snapshot at ``PurgedHistory/restartToken``.
    case historyPurged(PurgedHistory)
    /// A request that can't be run: a temporary or foreign object ID, an unknown entity, a
    /// negative limit, an empty consumer name.
    case invalidRequest(String)
    /// No consumer of that name is registered.
    case unknownConsumer(String)
    /// The store couldn't be read or written: a compacted segment file damaged or missing,
    /// a damaged event or record (the event log's ``LogError``), LMDB's error (an I/O
    /// error, a data file deleted while open) or zstd's. `failure` says what failed (the
    /// request, the consumer); the description goes on with the layer's own text, which
    /// names the file and the frame or the event. `underlying` keeps the layer's error
    /// (also `NSUnderlyingErrorKey` as `NSError`). Code 256, as
    /// ``ContextError/store(_:underlying:)``, which keeps the layer's error alike (spec
    /// 0009 §2). Before session 32 the layer's error escaped the history API as itself.
    case store(String, underlying: StoreFailure)

    /// The error of a layer under the history API that a ``HistoryError/store(_:underlying:)``
    /// carries: ``Strata/StoreFailure``, shared with ``ContextError/store(_:underlying:)``
    /// since session 32.
    public typealias StoreFailure = Strata.StoreFailure

    /// `body`'s result; a failure of the layers under the history API (``LogError``,
    /// ``LMDBError``, ``ZstdError``) thrown as ``store(_:underlying:)`` with `failure`
    /// (made only when something failed). Other errors pass as they are.
    static func wrappingStoreFailures<T>(_ failure: @autoclosure () -> String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as LogError {
            throw HistoryError.store(failure(), underlying: .log(error))
        } catch let error as LMDBError {
            throw HistoryError.store(failure(), underlying: .lmdb(error))
        } catch let error as ZstdError {
            throw HistoryError.store(failure(), underlying: .zstd(error))
        }
    }

    /// Core Data's error code: 134301 for purged history, 134060 for a foreign token, 256
    /// (`NSFileReadUnknownError`, as ``ContextError/store(_:underlying:)``) for a store failure,
    /// 134091 otherwise.
    public var code: Int {
        switch self {
        case .historyPurged: 134301
        case .foreignToken: 134060
        case .store: 256
        default: 134091
        }
    }

    /// What went wrong, naming tokens, stores and points.
    public var description: String {
        switch self {
        case .foreignToken(let token, let store):
            "history token \(token) belongs to store \(token.storeIdentifier.uuidString), not this store (\(store.uuidString))"
        case .tokenAheadOfStore(let token, let head):
            "history token \(token) is past the store's head (\(head)): the store never reached that point"
        case .historyPurged(let purged):
            "the history after \(purged.requested.sequence) is no longer whole: it was purged through \(purged.restartToken.sequence)"
                + (purged.purgedBy.map { " by \($0)" } ?? "")
                + (purged.markerToken.map { " (transaction \($0.sequence))" } ?? "")
                + "; restart from the snapshot at \(purged.restartToken.sequence) (134301)"
        case .invalidRequest(let detail): "invalid history request: \(detail)"
        case .unknownConsumer(let name): "no history consumer named \"\(name)\" is registered"
        case .store(let failure, let underlying): "\(failure): \(underlying.description)"
        }
    }
}

// MARK: - Converting events

/// Turns log events into history transactions: log values into context-level values and
/// stored IDs into permanent ``ManagedObjectID``s. Events never hold a change whose both
/// sides are nil, and inserts and deletes omit nil values, so a nil side takes its kind
/// (attribute, to-one, to-many) from the other side: no model lookup is needed.
struct HistoryConverter {
    let store: UUID
    /// The attributes whose values deletes keep in their tombstone, by entity name.
    let preserved: [String: Set<String>]

    init(store: UUID, model: ManagedObjectModel? = nil) {
        self.store = store
        var preserved: [String: Set<String>] = [:]
        for entity in model?.entities ?? [] {
            let names = Set(entity.allAttributes.filter { $0.preservesValueInHistoryOnDeletion && !$0.isTransient }.map(\.name))
            if !names.isEmpty { preserved[entity.name] = names }
        }
        self.preserved = preserved
    }

    func objectID(_ id: StoredObjectID) -> ManagedObjectID { .permanent(id, store: store) }

    func token(_ sequence: UInt64) -> HistoryToken { HistoryToken(storeIdentifier: store, sequence: sequence) }

    func value(_ value: LogValue) -> HistoryValue {
        switch value {
        case .attribute(let attribute): .attribute(attribute)
        case .reference(let id): .toOne(objectID(id))
        case .references(let ids): .toMany(ids.map(objectID))
        case .null: .attribute(nil)
        }
    }

    private static func empty(like value: HistoryValue) -> HistoryValue {
        switch value {
        case .attribute: .attribute(nil)
        case .toOne: .toOne(nil)
        case .toMany: .toMany([])
        }
    }

    /// The event as a transaction, with only the changes `keep` selects (all without it);
    /// nil when `keep` selects none.
    func transaction(_ event: TransactionEvent, keep: ((StoredObjectID) -> Bool)? = nil) -> HistoryTransaction? {
        var changes: [HistoryChange] = []
        for (index, group) in event.groups.enumerated() {
            for change in group.changes {
                let id = change.objectID
                if let keep, !keep(id) { continue }
                let type: HistoryChange.ChangeType
                var properties: [HistoryPropertyChange] = []
                var tombstone: [String: HistoryValue]?
                switch change {
                case .insert(_, let values):
                    type = .insert
                    for name in values.keys.sorted() {
                        let after = value(values[name] ?? .null)
                        properties.append(.value(property: name, before: Self.empty(like: after), after: after))
                    }
                case .delete(_, let before):
                    type = .delete
                    for name in before.keys.sorted() {
                        let old = value(before[name] ?? .null)
                        properties.append(.value(property: name, before: old, after: Self.empty(like: old)))
                    }
                    if let kept = preserved[id.entity] {
                        var values: [String: HistoryValue] = [:]
                        for name in kept { if let value = before[name], value != .null { values[name] = self.value(value) } }
                        tombstone = values
                    }
                case .update(_, let updates):
                    type = .update
                    for update in updates.sorted(by: { $0.property < $1.property }) {
                        switch update {
                        case .value(let name, let before, let after):
                            var old = value(before)
                            var new = value(after)
                            // A nil side takes the kind of the other side.
                            if before == .null { old = Self.empty(like: new) }
                            if after == .null { new = Self.empty(like: old) }
                            properties.append(.value(property: name, before: old, after: new))
                        case .membership(let name, let added, let removed):
                            properties.append(.membership(property: name, added: added.map(objectID), removed: removed.map(objectID)))
                        }
                    }
                }
                changes.append(
                    HistoryChange(
                        changedObjectID: objectID(id), changeType: type, propertyChanges: properties, groupIndex: index,
                        actionName: group.actionName, groupOrigin: group.origin, tombstone: tombstone))
            }
        }
        if keep != nil && changes.isEmpty { return nil }
        return HistoryTransaction(
            token: token(event.sequence), timestamp: event.timestamp, author: event.author, contextName: event.contextName,
            processID: event.processID, kind: event.kind, modelVersion: event.modelVersion, changes: changes)
    }
}

// MARK: - Merging a transaction

/// The source of a ``ContextDidSave`` made from history: no context, so every context merges it.
private final class HistoryMergeSource: Sendable {
    static let shared = HistoryMergeSource()
}

extension HistoryTransaction {
    /// The transaction as a save to merge (Core Data's `objectIDNotification()`'s contents):
    /// the objects its changes inserted, updated and deleted — an object a relationship change
    /// names as a destination counts as updated (its inverse side changed), unless the
    /// transaction inserted or deleted it. Give it to
    /// ``ManagedObjectContext/mergeChanges(fromContextDidSave:)``: registered
    /// objects it updated are refreshed, those it deleted leave the context, those it inserted
    /// are found by the next fetch. Only the changes the transaction holds count (a request's
    /// object or entity filter leaves some out).
    public var contextDidSave: ContextDidSave {
        var inserted: Set<ManagedObjectID> = []
        var updated: Set<ManagedObjectID> = []
        var deleted: Set<ManagedObjectID> = []
        var destinations: Set<ManagedObjectID> = []
        for change in changes {
            switch change.changeType {
            case .insert: inserted.insert(change.changedObjectID)
            case .update: updated.insert(change.changedObjectID)
            case .delete: deleted.insert(change.changedObjectID)
            }
            for property in change.propertyChanges {
                switch property {
                case .value(_, let before, let after):
                    destinations.formUnion(before.objectIDs)
                    destinations.formUnion(after.objectIDs)
                case .membership(_, let added, let removed):
                    destinations.formUnion(added)
                    destinations.formUnion(removed)
                }
            }
        }
        // An object inserted and deleted in one transaction (by two groups) is gone.
        inserted.subtract(deleted)
        updated.subtract(deleted)
        updated.subtract(inserted)
        updated.formUnion(destinations.subtracting(inserted).subtracting(deleted))
        return ContextDidSave(
            inserted: inserted, updated: updated, deleted: deleted, sequence: sequence, storeIdentifier: token.storeIdentifier,
            contextName: contextName, transactionAuthor: author, source: ObjectIdentifier(HistoryMergeSource.shared))
    }

    /// The transaction as a ``ManagedObjectContext/didSaveObjectsNotification`` (Core Data's
    /// `objectIDNotification()`), for
    /// ``ManagedObjectContext/mergeChanges(fromContextDidSave:)``: `userInfo`
    /// holds the inserted, updated and deleted IDs, the sequence and ``contextDidSave``.
    public func objectIDNotification() -> Notification {
        let save = contextDidSave
        typealias Key = ManagedObjectContext.NotificationKey
        let info: [AnyHashable: Any] = [
            Key.insertedObjects.rawValue: save.inserted, Key.updatedObjects.rawValue: save.updated,
            Key.deletedObjects.rawValue: save.deleted, Key.sequence.rawValue: sequence, Key.contextDidSave.rawValue: save,
        ]
        return Notification(name: ManagedObjectContext.didSaveObjectsNotification, object: nil, userInfo: info)
    }
}
