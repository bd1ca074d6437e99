public import Foundation
public import StrataLog
import Synchronization

/// How a container adds its store (Core Data's `NSPersistentStoreDescription`): where, of
/// which type, read-only or not, and the event log's configuration.
///
/// A class, as Core Data's, so the porting idioms change the container's description in
/// place; `Sendable`, its properties guarded by a lock:
///
/// ```swift
/// let container = PersistentContainer(name: "League", managedObjectModel: model)
/// container.persistentStoreDescriptions.first?.url = URL(fileURLWithPath: "/dev/null")  // in memory
/// // or: container.persistentStoreDescriptions.first?.type = .inMemory
/// try container.loadPersistentStores()
/// ```
public final class PersistentStoreDescription: Sendable, CustomStringConvertible {
    private struct State {
        var url: URL?
        var type: PersistentStore.StoreType
        var configuration: EventLog.Configuration
        var migratesAutomatically = true
        var infersMappingModel = true
        var stagedMigrationManager: StagedMigrationManager?
    }
    private let state: Mutex<State>

    /// A description of the store at `url` (`init(url:)`), of `type` (default: an event log).
    public init(url: URL? = nil, type: PersistentStore.StoreType = .eventLog, logConfiguration: EventLog.Configuration = EventLog.Configuration()) {
        state = Mutex(State(url: url, type: type, configuration: logConfiguration))
    }

    /// Where the store is. `/dev/null` means an in-memory store, as it does for Core Data's
    /// SQLite stores; nil with ``type`` `.eventLog` can't be loaded.
    public var url: URL? {
        get { state.withLock { $0.url } }
        set { state.withLock { $0.url = newValue } }
    }

    /// The store's type (default ``PersistentStore/StoreType/eventLog``).
    public var type: PersistentStore.StoreType {
        get { state.withLock { $0.type } }
        set { state.withLock { $0.type = newValue } }
    }

    /// Whether the store is added read-only (`isReadOnly`; default false): it must exist,
    /// nothing is written to it — not even its opened-at time — and a save fails with an
    /// error saying the store is open read-only. The same flag as
    /// ``logConfiguration``'s `isReadOnly`.
    public var isReadOnly: Bool {
        get { state.withLock { $0.configuration.isReadOnly } }
        set { state.withLock { $0.configuration.isReadOnly = newValue } }
    }

    /// Whether a model that lacks entities or stored properties of the store's current model
    /// version may migrate the store to it, taking their values out (default false: such a
    /// model is refused with ``PersistentStoreError/incompatibleModel(path:reason:)`` (134100),
    /// as an earlier app's model would be — a downgrade; spec 0004 §4.7). Set it in the app
    /// version whose model drops them on purpose. The same flag as ``logConfiguration``'s
    /// `allowsRemovingEntitiesAndProperties`.
    ///
    /// ```swift
    /// container.persistentStoreDescriptions[0].allowsRemovingEntitiesAndProperties = true
    /// ```
    public var allowsRemovingEntitiesAndProperties: Bool {
        get { state.withLock { $0.configuration.allowsRemovingEntitiesAndProperties } }
        set { state.withLock { $0.configuration.allowsRemovingEntitiesAndProperties = newValue } }
    }

    /// How the event log is opened: durability, map sizes, checkpoints, readers (Strata's
    /// store options, in place of Core Data's `options` dictionary). Its
    /// `migratesAutomatically` is on only while both migration options below are.
    public var logConfiguration: EventLog.Configuration {
        get {
            state.withLock { state in
                var configuration = state.configuration
                configuration.migratesAutomatically = configuration.migratesAutomatically && state.migratesAutomatically && state.infersMappingModel
                return configuration
            }
        }
        set { state.withLock { $0.configuration = newValue } }
    }

    /// Whether a store written with another model version is migrated to the model when it
    /// is added (`shouldMigrateStoreAutomatically`; default true). Off, adding such a store
    /// fails with ``PersistentStoreError/incompatibleModel(path:reason:)`` (134100), writing
    /// nothing (spec 0006 §19.5).
    public var shouldMigrateStoreAutomatically: Bool {
        get { state.withLock { $0.migratesAutomatically } }
        set { state.withLock { $0.migratesAutomatically = newValue } }
    }

    /// Whether the migration is inferred from the two models (`shouldInferMappingModelAutomatically`;
    /// default true) — Strata's only kind: it has no mapping models. Off, a store that needs
    /// a migration fails to be added as with ``shouldMigrateStoreAutomatically`` off.
    public var shouldInferMappingModelAutomatically: Bool {
        get { state.withLock { $0.infersMappingModel } }
        set { state.withLock { $0.infersMappingModel = newValue } }
    }

    /// The stages a store written with earlier model versions goes through as it is added
    /// (Core Data's `NSPersistentStoreStagedMigrationManagerOptionKey` option; default nil:
    /// inferred migration straight to the model). Used only while the store migrates
    /// automatically (both options above on) and isn't read-only (spec 0006 §19.6).
    public var stagedMigrationManager: StagedMigrationManager? {
        get { state.withLock { $0.stagedMigrationManager } }
        set { state.withLock { $0.stagedMigrationManager = newValue } }
    }

    /// `<PersistentStoreDescription: EventLog at PATH, read-only>`.
    public var description: String {
        let (url, type, readOnly) = state.withLock { ($0.url, $0.type, $0.configuration.isReadOnly) }
        return "<PersistentStoreDescription: \(type.rawValue) at \(url?.path ?? "no URL")\(readOnly ? ", read-only" : "")>"
    }
}
