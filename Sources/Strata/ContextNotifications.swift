public import Foundation
import Synchronization

// MARK: - Payloads (Sendable: object IDs, never objects)

/// What changed in a context since its last objects-did-change notification (Core Data's
/// `NSManagedObjectContextObjectsDidChange`), as object IDs.
///
/// Posted at the end of each `perform`/`performAndWait` block, by `processPendingChanges()`,
/// at the start of `save()`, by `rollback()`, `reset()` (``invalidatedAll``) and after a merge.
public struct ObjectsDidChange: Sendable, Hashable {
    /// Objects inserted (temporary IDs until saved); after a merge, objects another context saved.
    public var inserted: Set<ManagedObjectID> = []
    /// Objects whose properties changed.
    public var updated: Set<ManagedObjectID> = []
    /// Objects deleted; after a merge, registered objects deleted by another context.
    public var deleted: Set<ManagedObjectID> = []
    /// Objects whose values were re-read from the store (`refresh`, `rollback`, a merge).
    public var refreshed: Set<ManagedObjectID> = []
    /// Objects removed from the context (an insert discarded by `rollback` or undo).
    public var invalidated: Set<ManagedObjectID> = []
    /// Every object was removed from the context (`reset()`).
    public var invalidatedAll = false

    /// An empty change.
    public init(
        inserted: Set<ManagedObjectID> = [], updated: Set<ManagedObjectID> = [], deleted: Set<ManagedObjectID> = [],
        refreshed: Set<ManagedObjectID> = [], invalidated: Set<ManagedObjectID> = [], invalidatedAll: Bool = false
    ) {
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
        self.refreshed = refreshed
        self.invalidated = invalidated
        self.invalidatedAll = invalidatedAll
    }

    /// Whether nothing changed.
    public var isEmpty: Bool {
        inserted.isEmpty && updated.isEmpty && deleted.isEmpty && refreshed.isEmpty && invalidated.isEmpty && !invalidatedAll
    }
}

/// A save is about to begin (Core Data's `NSManagedObjectContextWillSave`).
public struct ContextWillSave: Sendable, Hashable {
    /// The saving context's name.
    public let contextName: String?
}

/// What a save wrote (Core Data's `NSManagedObjectContextDidSave`), as object IDs — so another
/// context (on any queue) can merge it with ``ManagedObjectContext/mergeChanges(fromContextDidSave:)-(ContextDidSave)``.
public struct ContextDidSave: Sendable, Hashable {
    /// Objects the save inserted, by their permanent IDs.
    public let inserted: Set<ManagedObjectID>
    /// Objects the save updated (both sides of a changed relationship count).
    public let updated: Set<ManagedObjectID>
    /// Objects the save deleted.
    public let deleted: Set<ManagedObjectID>
    /// The sequence of the transaction the save committed (its history token); nil when the
    /// save wrote nothing to the store (changes that netted out, or a child context's save,
    /// which goes to its parent).
    public let sequence: UInt64?
    /// The UUID of the store written; nil for a child context's save.
    public let storeIdentifier: UUID?
    /// The saving context's name.
    public let contextName: String?
    /// The saving context's transaction author.
    public let transactionAuthor: String?
    /// The saving context, so a context never merges its own save.
    let source: ObjectIdentifier

    /// The query generation the save made (Core Data's `NSManagedObjectContextQueryGenerationKey`):
    /// give it to ``ManagedObjectContext/setQueryGenerationFrom(_:)`` to read the store as
    /// this save left it (spec 0006 §22). Nil when the save wrote nothing to the store.
    public var queryGenerationToken: QueryGenerationToken? {
        guard let sequence, let storeIdentifier else { return nil }
        return QueryGenerationToken(storeIdentifier: storeIdentifier, sequence: sequence)
    }

    init(
        inserted: Set<ManagedObjectID>, updated: Set<ManagedObjectID>, deleted: Set<ManagedObjectID>, sequence: UInt64?,
        storeIdentifier: UUID?, contextName: String?, transactionAuthor: String?, source: ObjectIdentifier
    ) {
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
        self.sequence = sequence
        self.storeIdentifier = storeIdentifier
        self.contextName = contextName
        self.transactionAuthor = transactionAuthor
        self.source = source
    }
}

/// What a merge did to a context (Core Data's `NSManagedObjectContextDidMergeChangesObjectIDs`).
public struct ContextDidMerge: Sendable, Hashable {
    /// Objects the merged saves inserted.
    public let inserted: Set<ManagedObjectID>
    /// Objects the merged saves updated (registered or not).
    public let updated: Set<ManagedObjectID>
    /// Objects the merged saves deleted (registered or not).
    public let deleted: Set<ManagedObjectID>
    /// Registered objects whose values were re-read (unsaved changes kept).
    public let refreshed: Set<ManagedObjectID>
    /// Registered objects removed from the context because another writer deleted them.
    public let invalidated: Set<ManagedObjectID>
    /// The context is now in step with the store through this sequence (nil for a merge of a
    /// ``ContextDidSave`` that wrote nothing to the store).
    public let throughSequence: UInt64?
}

/// Any context notification.
public enum ContextNotification: Sendable, Hashable {
    /// Objects changed (``ObjectsDidChange``).
    case objectsDidChange(ObjectsDidChange)
    /// A save begins.
    case willSave(ContextWillSave)
    /// A save finished.
    case didSave(ContextDidSave)
    /// Changes from other contexts or processes were merged.
    case didMerge(ContextDidMerge)

    var kind: ContextNotificationKind {
        switch self {
        case .objectsDidChange: .objectsDidChange
        case .willSave: .willSave
        case .didSave: .didSave
        case .didMerge: .didMerge
        }
    }

    var payload: any Sendable {
        switch self {
        case .objectsDidChange(let value): value
        case .willSave(let value): value
        case .didSave(let value): value
        case .didMerge(let value): value
        }
    }
}

enum ContextNotificationKind: Sendable, Hashable {
    case objectsDidChange, willSave, didSave, didMerge, all
}

/// Names one kind of context notification and its payload type, for
/// ``ManagedObjectContext/notifications(_:)``:
///
/// ```swift
/// for await save in context.notifications(.didSave) { … }   // ContextDidSave values
/// ```
public struct ContextNotificationName<Payload: Sendable>: Sendable, Hashable {
    let kind: ContextNotificationKind
}

extension ContextNotificationName where Payload == ObjectsDidChange {
    /// Objects changed.
    public static var objectsDidChange: Self { Self(kind: .objectsDidChange) }
}

extension ContextNotificationName where Payload == ContextWillSave {
    /// A save begins.
    public static var willSave: Self { Self(kind: .willSave) }
}

extension ContextNotificationName where Payload == ContextDidSave {
    /// A save finished.
    public static var didSave: Self { Self(kind: .didSave) }
}

extension ContextNotificationName where Payload == ContextDidMerge {
    /// Changes were merged.
    public static var didMerge: Self { Self(kind: .didMerge) }
}

extension ContextNotificationName where Payload == ContextNotification {
    /// Every notification, in the order posted.
    public static var all: Self { Self(kind: .all) }
}

// MARK: - Observation inside the context (objects allowed)

/// A notification as a synchronous observer inside the context sees it: the IDs, and the
/// objects themselves (usable only on the context's queue, like any managed object).
public struct ObservedContextChange {
    /// The notification.
    public let notification: ContextNotification
    /// The inserted objects (an ID the context doesn't hold is given as a fault).
    public let insertedObjects: Set<ManagedObject>
    /// The updated objects.
    public let updatedObjects: Set<ManagedObject>
    /// The deleted objects (after a save, already removed from the context).
    public let deletedObjects: Set<ManagedObject>
    /// The refreshed objects.
    public let refreshedObjects: Set<ManagedObject>
    /// The invalidated objects.
    public let invalidatedObjects: Set<ManagedObject>
}

/// Identifies a synchronous observer, for ``ManagedObjectContext/removeObserver(_:)``.
public struct ContextObserverToken: Sendable, Hashable {
    let id: Int
}

// MARK: - NotificationCenter names

extension ManagedObjectContext {
    /// Posted with the context as `object` when objects changed (Core Data's
    /// `didChangeObjectsNotification`); `userInfo` keys: ``NotificationKey``, values
    /// `Set<ManagedObjectID>` (and a `Bool` for ``NotificationKey/invalidatedAllObjects``).
    public static let didChangeObjectsNotification = Notification.Name("ManagedObjectContextObjectsDidChange")
    /// Posted when a save begins (Core Data's `willSaveObjectsNotification`); no `userInfo`.
    public static let willSaveObjectsNotification = Notification.Name("ManagedObjectContextWillSave")
    /// Posted when a save finished (Core Data's `didSaveObjectsNotification`); `userInfo`:
    /// the inserted, updated and deleted ID sets, ``NotificationKey/sequence`` (`UInt64`, when
    /// the save committed a transaction) and ``NotificationKey/contextDidSave`` (the
    /// ``ContextDidSave`` value, for ``mergeChanges(fromContextDidSave:)-(Notification)``).
    public static let didSaveObjectsNotification = Notification.Name("ManagedObjectContextDidSave")
    /// Posted after the context merged other saves (Core Data's
    /// `didMergeChangesObjectIDsNotification`); `userInfo`: the ID sets — under Core Data's
    /// keys for this notification (``NotificationKey/insertedObjectIDs`` and its siblings)
    /// and under ``NotificationKey/insertedObjects`` and its siblings — and
    /// ``NotificationKey/sequence`` when the merge brought the context through a sequence.
    public static let didMergeChangesObjectIDsNotification = Notification.Name("ManagedObjectContextDidMergeChangesObjectIDs")
    /// Posted with ``didChangeObjectsNotification``, with the same ID sets under Core Data's
    /// keys for object IDs: ``NotificationKey/insertedObjectIDs``,
    /// ``NotificationKey/updatedObjectIDs``, ``NotificationKey/deletedObjectIDs``,
    /// ``NotificationKey/refreshedObjectIDs``, ``NotificationKey/invalidatedObjectIDs`` (each
    /// omitted when empty) and ``NotificationKey/invalidatedAllObjects`` (Core Data's
    /// `didChangeObjectIDsNotification`).
    ///
    /// ```swift
    /// NotificationCenter.default.addObserver(forName: ManagedObjectContext.didChangeObjectIDsNotification, object: context, queue: nil) { note in
    ///     let updated = note.userInfo?[ManagedObjectContext.NotificationKey.updatedObjectIDs.rawValue] as? Set<ManagedObjectID>
    /// }
    /// ```
    public static let didChangeObjectIDsNotification = Notification.Name("ManagedObjectContextObjectsDidChangeObjectIDs")
    /// Posted with ``didSaveObjectsNotification``, after it, with the saved objects' permanent
    /// IDs under ``NotificationKey/insertedObjectIDs``, ``NotificationKey/updatedObjectIDs`` and
    /// ``NotificationKey/deletedObjectIDs`` (always present), as Core Data's
    /// `didSaveObjectIDsNotification` — the one Core Data recommends over
    /// `didSaveObjectsNotification`, whose sets hold objects in Core Data (Strata's hold IDs).
    ///
    /// ```swift
    /// NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSaveObjectIDsNotification, object: background, queue: nil) { note in
    ///     let inserted = note.userInfo?[ManagedObjectContext.NotificationKey.insertedObjectIDs.rawValue] as? Set<ManagedObjectID>
    /// }
    /// ```
    public static let didSaveObjectIDsNotification = Notification.Name("ManagedObjectContextDidSaveObjectIDs")

    /// The `userInfo` keys of the context's notifications (Core Data's `NotificationKey`,
    /// same raw values).
    public enum NotificationKey: String, Sendable {
        /// `Set<ManagedObjectID>`: inserted objects.
        case insertedObjects = "inserted"
        /// `Set<ManagedObjectID>`: updated objects.
        case updatedObjects = "updated"
        /// `Set<ManagedObjectID>`: deleted objects.
        case deletedObjects = "deleted"
        /// `Set<ManagedObjectID>`: refreshed objects.
        case refreshedObjects = "refreshed"
        /// `Set<ManagedObjectID>`: invalidated objects.
        case invalidatedObjects = "invalidated"
        /// `Bool`: every object was invalidated (`reset()`).
        case invalidatedAllObjects = "invalidatedAll"
        /// `UInt64`: the committed transaction's sequence (did-save), or the sequence a merge
        /// brought the context through (did-merge).
        case sequence = "sequence"
        /// ``ContextDidSave``: the whole did-save value (did-save only).
        case contextDidSave = "contextDidSave"
        /// `Set<ManagedObjectID>`: inserted objects, in the object-ID notifications
        /// (``didSaveObjectIDsNotification``, ``didChangeObjectIDsNotification``,
        /// ``didMergeChangesObjectIDsNotification``), Core Data's `NSInsertedObjectIDsKey`.
        case insertedObjectIDs = "inserted_objectIDs"
        /// `Set<ManagedObjectID>`: updated objects, in the object-ID notifications.
        case updatedObjectIDs = "updated_objectIDs"
        /// `Set<ManagedObjectID>`: deleted objects, in the object-ID notifications.
        case deletedObjectIDs = "deleted_objectIDs"
        /// `Set<ManagedObjectID>`: refreshed objects, in the object-ID notifications.
        case refreshedObjectIDs = "refreshed_objectIDs"
        /// `Set<ManagedObjectID>`: invalidated objects, in the object-ID notifications.
        case invalidatedObjectIDs = "invalidated_objectIDs"
    }
}

// MARK: - Delivery to async subscribers

/// The context's async subscribers. `Sendable`: subscribing and cancelling happen on any
/// thread; the context yields into the streams (never blocking: the buffers are unbounded).
final class NotificationHub: Sendable {
    private struct Subscriber {
        let kind: ContextNotificationKind
        let deliver: @Sendable (ContextNotification) -> Void
    }
    private let subscribers = Mutex<[Int: Subscriber]>([:])
    private let nextID = Atomic<Int>(0)
    /// How many subscribers there are, read without the lock on the hot path.
    private let count = Atomic<Int>(0)

    var isEmpty: Bool { count.load(ordering: .relaxed) == 0 }

    func stream<Payload: Sendable>(_ name: ContextNotificationName<Payload>) -> AsyncStream<Payload> {
        let (stream, continuation) = AsyncStream<Payload>.makeStream(bufferingPolicy: .unbounded)
        let id = nextID.add(1, ordering: .relaxed).newValue
        let kind = name.kind
        subscribers.withLock { list in
            list[id] = Subscriber(kind: kind) { notification in
                if kind == .all, let whole = notification as? Payload {
                    continuation.yield(whole)
                } else if let payload = notification.payload as? Payload {
                    continuation.yield(payload)
                }
            }
            count.store(list.count, ordering: .relaxed)
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.subscribers.withLock { list in
                list[id] = nil
                self.count.store(list.count, ordering: .relaxed)
            }
        }
        return stream
    }

    func deliver(_ notification: ContextNotification) {
        guard !isEmpty else { return }
        let kind = notification.kind
        let targets = subscribers.withLock { list in list.values.filter { $0.kind == kind || $0.kind == .all } }
        for target in targets { target.deliver(notification) }
    }
}

// MARK: - Trackers (fetched results controllers)

/// Something inside a context that follows its changes as they are posted (a fetched
/// results controller). Called on the context's queue.
protocol ContextChangeTracker: AnyObject {
    /// The context posted `notification`; `objects` holds objects it may no longer have.
    func context(posted notification: ContextNotification, objects: [ManagedObjectID: ManagedObject])
    /// These objects' IDs changed (a save, `obtainPermanentIDs`, a parent's save).
    func context(remapped objects: [(old: ManagedObjectID, object: ManagedObject)])
}

/// A tracker held weakly by the context, so a controller never keeps itself alive.
struct WeakChangeTracker {
    weak var tracker: (any ContextChangeTracker)?
}

extension ContextCore {
    /// Calls `body` with every live tracker (a copy of the list: a delegate may add or
    /// remove controllers meanwhile).
    func tellTrackers(_ body: (any ContextChangeTracker) -> Void) {
        for entry in changeTrackers {
            if let tracker = entry.tracker { body(tracker) }
        }
    }
}

// MARK: - Posting (inside the context)

/// A synchronous observer registered inside the context.
struct ContextObserver {
    let id: Int
    let body: (ObservedContextChange) -> Void
}

extension ContextCore {
    /// Posts `notification` to every channel: synchronous observers (with objects), async
    /// subscribers, `NotificationCenter`. `objects` supplies objects the context no longer
    /// holds (deleted or invalidated ones).
    func post(_ notification: ContextNotification, objects: @autoclosure () -> [ManagedObjectID: ManagedObject] = [:]) {
        // A batch insert's scratch context: its objects are the request's business only.
        guard !isBatchScratch else { return }
        let known = observers.isEmpty && changeTrackers.isEmpty ? [:] : objects()
        if !observers.isEmpty {
            func resolve(_ ids: Set<ManagedObjectID>) -> Set<ManagedObject> {
                // A child names its parent's unsaved objects by temporary IDs (a merge's inserts).
                Set(ids.compactMap { id in known[id] ?? registered(id) ?? (id.isTemporaryID && parentContext == nil ? nil : object(with: id)) })
            }
            let sets = notification.idSets
            let change = ObservedContextChange(
                notification: notification, insertedObjects: resolve(sets.inserted), updatedObjects: resolve(sets.updated),
                deletedObjects: resolve(sets.deleted), refreshedObjects: resolve(sets.refreshed),
                invalidatedObjects: resolve(sets.invalidated))
            for observer in observers { observer.body(change) }
        }
        if !changeTrackers.isEmpty { tellTrackers { $0.context(posted: notification, objects: known) } }
        hub.deliver(notification)
        if let context { notification.postToNotificationCenter(from: context) }
    }

    /// Posts the objects-did-change accumulated since the last one, if any.
    func postPendingChanges() {
        // The inserts are posted now: later changes to those objects are updates.
        if !noticeInserted.isEmpty {
            for object in noticeInserted { object.insertPending = false }
            noticeInserted.removeAll(keepingCapacity: true)
        }
        guard !notice.isEmpty else { return }
        let change = notice
        notice = ObjectsDidChange()
        post(.objectsDidChange(change), objects: noticeObjects)
        noticeObjects.removeAll()
    }

    // MARK: Recording for the next objects-did-change

    func noteInserted(_ object: ManagedObject) {
        let id = object.objectID
        notice.inserted.insert(id)
        changeRecorder?.insert(id)
        object.insertPending = true
        noticeInserted.append(object)
    }

    func noteUpdated(_ object: ManagedObject) {
        changeRecorder?.insert(object.objectID)
        // An unsaved insert's changes before its insert is posted are part of it (§15.3).
        guard !object.insertPending else { return }
        notice.updated.insert(object.objectID)
    }

    func noteDeleted(_ object: ManagedObject) {
        let id = object.objectID
        changeRecorder?.insert(id)
        notice.updated.remove(id)
        if notice.inserted.remove(id) != nil { return }  // inserted and deleted in one event: nothing happened
        notice.deleted.insert(id)
        noticeObjects[id] = object
    }

    func noteInvalidated(_ object: ManagedObject) {
        let id = object.objectID
        notice.inserted.remove(id)
        notice.updated.remove(id)
        notice.invalidated.insert(id)
        noticeObjects[id] = object
    }

    func noteRefreshed(_ id: ManagedObjectID) {
        notice.refreshed.insert(id)
    }
}

extension ContextNotification {
    /// The ID sets a notification carries.
    var idSets: ObjectsDidChange {
        switch self {
        case .objectsDidChange(let change): change
        case .willSave: ObjectsDidChange()
        case .didSave(let save): ObjectsDidChange(inserted: save.inserted, updated: save.updated, deleted: save.deleted)
        case .didMerge(let merge):
            ObjectsDidChange(
                inserted: merge.inserted, updated: merge.updated, deleted: merge.deleted, refreshed: merge.refreshed,
                invalidated: merge.invalidated)
        }
    }

    func postToNotificationCenter(from context: ManagedObjectContext) {
        typealias Key = ManagedObjectContext.NotificationKey
        // Room for every key up front: growing the dictionary rehashes its keys each time.
        var info = [AnyHashable: Any](minimumCapacity: 8)
        // The same sets under Core Data's object-ID keys, for the object-ID notification
        // posted after this one (did-change, did-save) or in this one (did-merge).
        var idInfo = [AnyHashable: Any](minimumCapacity: 6)
        let name: Notification.Name
        var idName: Notification.Name?
        func put(_ key: Key, _ idKey: Key, _ ids: Set<ManagedObjectID>) {
            info[key.rawValue] = ids
            idInfo[idKey.rawValue] = ids
        }
        switch self {
        case .objectsDidChange(let change):
            name = ManagedObjectContext.didChangeObjectsNotification
            idName = ManagedObjectContext.didChangeObjectIDsNotification
            if !change.inserted.isEmpty { put(.insertedObjects, .insertedObjectIDs, change.inserted) }
            if !change.updated.isEmpty { put(.updatedObjects, .updatedObjectIDs, change.updated) }
            if !change.deleted.isEmpty { put(.deletedObjects, .deletedObjectIDs, change.deleted) }
            if !change.refreshed.isEmpty { put(.refreshedObjects, .refreshedObjectIDs, change.refreshed) }
            if !change.invalidated.isEmpty { put(.invalidatedObjects, .invalidatedObjectIDs, change.invalidated) }
            if change.invalidatedAll {
                info[Key.invalidatedAllObjects.rawValue] = true
                idInfo[Key.invalidatedAllObjects.rawValue] = true
            }
        case .willSave:
            name = ManagedObjectContext.willSaveObjectsNotification
        case .didSave(let save):
            name = ManagedObjectContext.didSaveObjectsNotification
            idName = ManagedObjectContext.didSaveObjectIDsNotification
            put(.insertedObjects, .insertedObjectIDs, save.inserted)
            put(.updatedObjects, .updatedObjectIDs, save.updated)
            put(.deletedObjects, .deletedObjectIDs, save.deleted)
            if let sequence = save.sequence { info[Key.sequence.rawValue] = sequence }
            info[Key.contextDidSave.rawValue] = save
        case .didMerge(let merge):
            name = ManagedObjectContext.didMergeChangesObjectIDsNotification
            put(.insertedObjects, .insertedObjectIDs, merge.inserted)
            put(.updatedObjects, .updatedObjectIDs, merge.updated)
            put(.deletedObjects, .deletedObjectIDs, merge.deleted)
            put(.refreshedObjects, .refreshedObjectIDs, merge.refreshed)
            put(.invalidatedObjects, .invalidatedObjectIDs, merge.invalidated)
            info.merge(idInfo) { old, _ in old }
            if let sequence = merge.throughSequence { info[Key.sequence.rawValue] = sequence }
        }
        NotificationCenter.default.post(name: name, object: context, userInfo: info.isEmpty ? nil : info)
        if let idName { NotificationCenter.default.post(name: idName, object: context, userInfo: idInfo.isEmpty ? nil : idInfo) }
    }
}
