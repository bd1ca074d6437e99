public import Foundation
public import StrataLog
public import StrataModel
import Synchronization
import StrataStorage

/// A store the coordinator manages (Core Data's `NSPersistentStore`).
public final class PersistentStore: Sendable, Hashable, CustomStringConvertible {
    /// The kind of store.
    public enum StoreType: String, Sendable, Hashable {
        /// An event-log store at a URL (Core Data: `NSSQLiteStoreType` in spirit).
        case eventLog = "EventLog"
        /// A store that lives only as long as the coordinator holds it (`NSInMemoryStoreType`):
        /// an event log in a private temporary directory, removed with the store.
        case inMemory = "InMemory"
    }

    /// The store's type.
    public let type: StoreType
    /// Where it is; nil for an in-memory store.
    public let url: URL?
    /// The store's UUID (`identifier`), part of every object URI.
    public var identifier: UUID { log.storeUUID }
    /// The event log behind the store.
    public let log: EventLog
    /// Whether the store was added read-only (`isReadOnly`): saves to it fail, writing nothing.
    public var isReadOnly: Bool { log.configuration.isReadOnly }
    let temporaryDirectory: String?
    /// The user's metadata as last read or set through this store (Core Data reads a store's
    /// metadata when it is added, and keeps it with the store).
    let userMetadata: Mutex<[String: MetadataValue]>
    /// The logs of the stores this one was moved from (``PersistentStoreCoordinator/migratePersistentStore(_:to:configuration:type:)``):
    /// their history is this store's, so what a context read from them (persisted undo's
    /// older groups) reads on from this one.
    let continuedLogs: Set<ObjectIdentifier>
    /// The store this one was moved to, once it was (its log then refuses writes).
    private let successor = Mutex<PersistentStore?>(nil)
    /// The log's head when the store was made (added to the coordinator): a context that
    /// was in step with the coordinator's previous store is in step with this one from here
    /// (spec 0006 §16.3).
    let headWhenAdded: UInt64

    init(
        type: StoreType, url: URL?, log: EventLog, temporaryDirectory: String?, userMetadata: [String: MetadataValue] = [:],
        continuedLogs: Set<ObjectIdentifier> = []
    ) {
        self.type = type
        self.url = url
        self.log = log
        self.temporaryDirectory = temporaryDirectory
        self.userMetadata = Mutex(userMetadata)
        self.continuedLogs = continuedLogs
        headWhenAdded = (try? log.head) ?? 0
    }

    /// Whether this store's history continues `log`'s: it is that log's, or a store moved from it.
    func continues(_ log: EventLog) -> Bool {
        self.log === log || continuedLogs.contains(ObjectIdentifier(log))
    }

    /// This store, or the store it was moved to (and on, if that moved too): where what was
    /// this store's is now.
    var current: PersistentStore {
        var store = self
        while let next = store.successor.withLock({ $0 }) { store = next }
        return store
    }

    /// Runs `body` with ``current`` — and, when the store was moved meanwhile (its old log
    /// refuses writes with ``LogError/storeMoved(from:to:)``), again with the store that took
    /// its place, whose copy holds everything written before the move.
    func writing<R>(_ body: (PersistentStore) throws -> R) throws -> R {
        var store = current
        while true {
            do {
                return try body(store)
            } catch LogError.storeMoved(let from, let to) {
                let next = store.current
                guard next !== store else { throw LogError.storeMoved(from: from, to: to) }
                store = next
            }
        }
    }

    /// Records that the store moved to `store`.
    func movedTo(_ store: PersistentStore) { successor.withLock { $0 = store } }

    deinit {
        if let temporaryDirectory { try? FileManager.default.removeItem(atPath: temporaryDirectory) }
    }

    /// Identity.
    public static func == (lhs: PersistentStore, rhs: PersistentStore) -> Bool { lhs === rhs }
    /// Identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    /// `EventLog store at PATH (UUID)`.
    public var description: String { "\(type.rawValue) store \(url?.path ?? "in memory") (\(identifier.uuidString))" }
}

/// Connects contexts to a store (Core Data's `NSPersistentStoreCoordinator`).
///
/// `Sendable`: share one coordinator between contexts on any thread. It holds one store.
///
/// ```swift
/// let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
/// try coordinator.addPersistentStore(type: .eventLog, at: storeURL)
/// let context = ManagedObjectContext(concurrencyType: .privateQueue)
/// context.persistentStoreCoordinator = coordinator   // or ManagedObjectContext(coordinator:)
/// ```
public final class PersistentStoreCoordinator: Sendable {
    /// The model every context of this coordinator uses.
    public let managedObjectModel: ManagedObjectModel

    private struct State {
        var store: PersistentStore?
        var classes: [String: ManagedObject.Type] = [:]
    }
    private let state = Mutex(State())
    /// Tells automatically merging contexts about commits (PersistentStoreCoordinator+Merging.swift).
    let mergeHub = ContextRegistry()
    /// The store monitor's observation that feeds `mergeHub` (started by the first
    /// automatically merging context).
    let storeWatch = Mutex<StoreObservation?>(nil)

    /// Creates a coordinator for `model` (`init(managedObjectModel:)`).
    public init(managedObjectModel model: ManagedObjectModel) {
        managedObjectModel = model
    }

    // MARK: - Stores

    /// Opens (creating if needed) a store and adds it (`addPersistentStore(ofType:…)`).
    ///
    /// - Throws: ``ContextError/storeAlreadyAdded`` if the coordinator holds a store already;
    ///   ``PersistentStoreError/migrationFailed(path:reason:)`` when the store's data can't be
    ///   migrated to the model (``PersistentStoreError/migrationConstraintViolation(path:reason:)``
    ///   when the migrated objects break a uniqueness constraint);
    ///   ``PersistentStoreError/incompatibleModel(path:reason:)`` when
    ///   it would need a migration and `configuration.migratesAutomatically` is off or the
    ///   store is added read-only (a read-only store isn't migrated), and when the model is
    ///   new to the store and lacks entities or stored properties of its newest model version
    ///   (an earlier app's: spec 0004 §4.7) unless
    ///   `configuration.allowsRemovingEntitiesAndProperties`;
    ///   ``PersistentStoreError/notAStore(path:reason:)`` for a file or a directory that
    ///   isn't a store, ``PersistentStoreError/noStore(path:)`` for a read-only add of a
    ///   missing store; ``ContextError/invalidArgument(_:)`` for a URL that isn't a file URL;
    ///   the log's errors for a store that can't be opened otherwise.
    @discardableResult
    public func addPersistentStore(
        type: PersistentStore.StoreType, at url: URL? = nil, configuration: EventLog.Configuration = EventLog.Configuration()
    ) throws -> PersistentStore {
        if let existing = state.withLock({ $0.store }) {
            throw ContextError.storeAlreadyAdded(existing.description)
        }
        let store: PersistentStore
        switch type {
        case .eventLog:
            guard let url else { throw ContextError.invalidArgument("an event-log store needs a URL") }
            let path = try Self.storePath(of: url)
            let log: EventLog
            do {
                log = try EventLog(path: path, model: managedObjectModel, configuration: configuration)
            } catch LogError.modelMismatch(let reason) {
                // A read-only add too (before, its LogError escaped: not Core Data's 134100).
                throw PersistentStoreError.incompatibleModel(path: url.path, reason: reason)
            } catch LogError.migration(let reason) {
                throw PersistentStoreError.migrationFailed(path: url.path, reason: reason)
            } catch LogError.notAStore(let detail) {
                // Store errors, as the other store calls give them (before, the log's own
                // error escaped: "The operation could not be completed. (StrataLog.LogError
                // error 16.)" as a Core Data app prints it).
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                    throw PersistentStoreError.noStore(path: path)
                }
                throw PersistentStoreError.notAStore(path: path, reason: isDirectory.boolValue ? detail : "it is a file, not a store directory")
            } catch let error as LogError {
                // An open writes only a migration: a constraint it breaks, or a derived value
                // that doesn't fit, is the migration's failure (before, they escaped as the
                // log's errors, which an app's handler for Core Data's migration codes missed).
                switch error {
                case .uniquenessViolation: throw PersistentStoreError.migrationConstraintViolation(path: url.path, reason: "\(error)")
                case .derivation: throw PersistentStoreError.migrationFailed(path: url.path, reason: "\(error)")
                default: throw error
                }
            }
            store = PersistentStore(type: .eventLog, url: url, log: log, temporaryDirectory: nil, userMetadata: try log.userMetadata())
        case .inMemory:
            let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("strata-memory-\(UUID().uuidString)")
            var fast = configuration
            fast.durability = .fast
            let log = try EventLog(path: directory, model: managedObjectModel, configuration: fast)
            store = PersistentStore(type: .inMemory, url: nil, log: log, temporaryDirectory: directory)
        }
        try state.withLock { state in
            if let existing = state.store { throw ContextError.storeAlreadyAdded(existing.description) }
            state.store = store
        }
        storeWasAdded()
        return store
    }

    /// The path of the store `url` names: a file URL's path. Any other URL is refused — its
    /// path would name a directory on this machine the URL doesn't mean (before, adding
    /// `https://host/tmp/a` created a store at `/tmp/a`, which ``persistentStore(for:)``
    /// then didn't find, and destroying such a URL deleted the store at that path).
    ///
    /// - Throws: ``ContextError/invalidArgument(_:)`` naming the URL.
    static func storePath(of url: URL) throws -> String {
        guard url.isFileURL else {
            throw ContextError.invalidArgument(
                "\(url.absoluteString) is not a file URL: a store is a directory, named with a file URL (URL(fileURLWithPath:)); nothing was done")
        }
        return url.path
    }

    /// Adds `log`, already open, as the coordinator's event-log store.
    ///
    /// For the `strata` tool, which has no app code: it opens a store read-only with the
    /// newest model stored in it (`EventLog(openingExistingAt:readOnly:)`), makes a
    /// coordinator for `log.model` and adds the log here, so the store's environment is
    /// opened once. Contexts then fetch from it as from any store; a save to a read-only log
    /// fails with ``ContextError/store(_:underlying:)`` saying the store is open read-only, and nothing
    /// is written.
    ///
    /// - Throws: ``ContextError/storeAlreadyAdded(_:)`` if the coordinator holds a store
    ///   already; ``ContextError/invalidArgument(_:)`` if the log's model isn't the
    ///   coordinator's.
    @discardableResult
    package func addPersistentStore(openedLog log: EventLog) throws -> PersistentStore {
        guard log.model.versionHash == managedObjectModel.versionHash else {
            throw ContextError.invalidArgument("the store at \(log.path) was opened with another model than the coordinator's")
        }
        // The tool reads the user's metadata itself and reports damage there (`strata info`).
        let store = PersistentStore(
            type: .eventLog, url: URL(fileURLWithPath: log.path), log: log, temporaryDirectory: nil,
            userMetadata: (try? log.userMetadata()) ?? [:])
        try state.withLock { state in
            if let existing = state.store { throw ContextError.storeAlreadyAdded(existing.description) }
            state.store = store
        }
        storeWasAdded()
        return store
    }

    /// Removes `store` (`remove(_:)`); contexts can't save to it afterwards.
    public func remove(_ store: PersistentStore) throws {
        try state.withLock { state in
            guard state.store === store else { throw ContextError.invalidArgument("\(store) is not this coordinator's store") }
            state.store = nil
        }
        // The watch for automatically merging contexts follows the store: a store added later
        // is watched instead (``storeWasAdded()``).
        stopWatchingStore()
    }

    /// Puts `new` in `old`'s place (``migratePersistentStore(_:to:configuration:type:)``).
    func replaceStore(_ old: PersistentStore, with new: PersistentStore) throws {
        try state.withLock { state in
            guard state.store === old else { throw ContextError.invalidArgument("\(old) is no longer this coordinator's store") }
            state.store = new
        }
        stopWatchingStore()
        storeWasAdded()
    }

    /// Ends the watch of the store that is no longer the coordinator's.
    private func stopWatchingStore() {
        storeWatch.withLock { watch in
            watch?.cancel()
            watch = nil
        }
    }

    /// After a store is added: automatically merging contexts registered before (a store
    /// removed and another added, or moved) have the new store watched for other processes'
    /// commits.
    func storeWasAdded() {
        if !mergeHub.contexts(except: nil).isEmpty { watchStoreForMerging() }
    }

    /// The stores, in the order added (`persistentStores`).
    public var persistentStores: [PersistentStore] { state.withLock { $0.store.map { [$0] } ?? [] } }

    /// The store added at `url` (`persistentStore(for:)`), or nil when the coordinator has
    /// none there. File URLs compare standardized (`/stores/./a/../Library.strata` finds the
    /// store added at `/stores/Library.strata`); an in-memory store has no URL and a URL that
    /// isn't a file URL names no store.
    ///
    /// ```swift
    /// if let store = coordinator.persistentStore(for: storeURL) { try coordinator.remove(store) }
    /// ```
    public func persistentStore(for url: URL) -> PersistentStore? {
        guard url.isFileURL else { return nil }
        let wanted = url.standardizedFileURL.path
        return persistentStores.first { store in
            guard let storeURL = store.url, storeURL.isFileURL else { return false }
            return storeURL.standardizedFileURL.path == wanted
        }
    }

    /// The store, or an error saying there is none.
    func requireStore() throws -> PersistentStore {
        guard let store = state.withLock({ $0.store }) else { throw ContextError.noPersistentStore }
        return store
    }

    /// Runs `body` with the store — and, when the store was moved meanwhile
    /// (``migratePersistentStore(_:to:configuration:type:)``: its old log refuses writes with
    /// ``LogError/storeMoved(from:to:)``), again with the store that took its place. Writes go
    /// through this, so none lands in the old place, where it would be lost.
    func writingToStore<R>(_ body: (PersistentStore) throws -> R) throws -> R {
        try requireStore().writing(body)
    }

    /// The store's metadata (`metadata(for:)`): the user's keys
    /// (``setMetadata(_:for:)``) and Strata's — `StoreType`, `StoreUUID`,
    /// `ModelVersionHash` and `EntityVersionHash.ENTITY` (hex), which win over a user key of
    /// the same name (one can't be set).
    ///
    /// The user's keys are read when the store is added and kept with it, as Core Data does:
    /// a change another process (or ``setMetadata(_:type:at:)``) makes meanwhile is seen
    /// when the store is added again.
    public func metadata(for store: PersistentStore) -> [String: MetadataValue] {
        var metadata = store.userMetadata.withLock { $0 }
        metadata.merge(Self.strataMetadata(type: store.type, storeUUID: store.identifier, model: managedObjectModel)) { _, strata in strata }
        return metadata
    }

    /// Strata's own metadata keys for a store.
    static func strataMetadata(type: PersistentStore.StoreType, storeUUID: UUID, model: ManagedObjectModel) -> [String: MetadataValue] {
        var metadata: [String: MetadataValue] = [
            StoreTypeKey: .string(type.rawValue), StoreUUIDKey: .string(storeUUID.uuidString),
            "ModelVersionHash": .string(lowercaseHex(model.versionHash)),
        ]
        for (entity, hash) in model.entityVersionHashesByName {
            metadata["EntityVersionHash.\(entity)"] = .string(lowercaseHex(hash))
        }
        return metadata
    }

    /// The ID a URI names in this coordinator's store (`managedObjectID(forURIRepresentation:)`);
    /// nil for another store's URI, an unknown entity, a temporary or a malformed URI.
    public func managedObjectID(forURIRepresentation uri: URL) -> ManagedObjectID? {
        guard let store = state.withLock({ $0.store }),
            let id = ObjectURI.storedObjectID(uri, storeUUID: store.identifier),
            let entity = managedObjectModel.entity(named: id.entity), !entity.isAbstract
        else { return nil }
        return .permanent(id, store: store.identifier)
    }

    // MARK: - Custom classes

    /// Makes contexts create instances of `type` for objects of `entityName` (and of its
    /// sub-entities that have no class of their own). Core Data reads the class name from
    /// the model; Swift on Linux can't look classes up by name, so register them.
    public func register(_ type: ManagedObject.Type, forEntityName entityName: String) {
        state.withLock { $0.classes[entityName] = type }
    }

    /// Every registration, for a coordinator that must create the same classes (a staged
    /// migration's handler containers).
    var registeredClasses: [(entity: String, type: ManagedObject.Type)] {
        state.withLock { state in state.classes.map { ($0.key, $0.value) } }
    }

    /// Registers `type` for the entity named as the class (Core Data's generated classes
    /// are named after their entities) when it is registered for no entity, the model has
    /// that entity, not abstract, and no class is registered for it; otherwise nothing.
    /// What ``ManagedObject/init(context:)``, ``FetchRequestResult/fetchRequest()``, a typed ``FetchRequest`` and
    /// ``ManagedObjectContext/fetch(_:as:)`` rely on.
    func registerByName(_ type: ManagedObject.Type) {
        let own = String(describing: type)
        guard let entity = managedObjectModel.entity(named: own), !entity.isAbstract else { return }
        state.withLock { state in
            guard state.classes[own] == nil, !state.classes.values.contains(where: { ObjectIdentifier($0) == ObjectIdentifier(type) })
            else { return }
            state.classes[own] = type
        }
    }

    /// Whether a class is registered for `entityName` itself.
    func hasRegisteredClass(forEntityName entityName: String) -> Bool {
        state.withLock { $0.classes[entityName] != nil }
    }

    /// The entities `type` is registered for (``register(_:forEntityName:)``), sorted.
    func entityNames(registeredFor type: ManagedObject.Type) -> [String] {
        state.withLock { state in
            state.classes.filter { ObjectIdentifier($0.value) == ObjectIdentifier(type) }.map(\.key).sorted()
        }
    }

    /// The class for an entity's objects: the one registered for the entity, else for its
    /// nearest ancestor (``EntityInfo/classLookupNames``), else `ManagedObject`.
    func objectClass(for info: EntityInfo) -> ManagedObject.Type {
        state.withLock { state in
            for name in info.classLookupNames { if let type = state.classes[name] { return type } }
            return ManagedObject.self
        }
    }
}

/// `bytes` as lowercase hex, two digits a byte: how store metadata writes version hashes
/// (`ModelVersionHash`, `EntityVersionHash.NAME`), and how they are compared and named.
func lowercaseHex(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { String(format: "%02x", $0) }.joined()
}

// MARK: - Metadata keys

/// The metadata key of the store's type (Core Data's `NSStoreTypeKey`), whose value is the
/// ``PersistentStore/StoreType`` raw value (`"EventLog"`, `"InMemory"`).
///
/// ```swift
/// coordinator.metadata(for: store)[StoreTypeKey]  // .string("EventLog")
/// ```
public let StoreTypeKey = "StoreType"

/// The metadata key of the store's UUID (Core Data's `NSStoreUUIDKey`), whose value is
/// ``PersistentStore/identifier``'s `uuidString`: the host part of the store's object URIs.
///
/// ```swift
/// coordinator.metadata(for: store)[StoreUUIDKey]  // .string("6F9619FF-…")
/// ```
public let StoreUUIDKey = "StoreUUID"
