public import Foundation
public import StrataLog
import StrataStorage
import Synchronization

// Store management: user metadata, destroying and replacing stores, adding one from a
// description (spec 0006 §19).
extension PersistentStoreCoordinator {
    // MARK: - Metadata

    /// Sets the user's metadata of `store` (`setMetadata(_:for:)`): `metadata` replaces the
    /// user's keys — a key left out is removed — and is written to the store at once, in its
    /// own write transaction (Core Data writes it at the next save; here it is durable when
    /// this returns, and a crash never loses it or half-writes it).
    ///
    /// Strata's keys (``metadata(for:)``) may be passed back with the values they have — the
    /// usual pattern reads the metadata, changes a key and sets it all — and are then left
    /// out; a different value, or an `EntityVersionHash.` key the model doesn't have, is
    /// refused.
    ///
    /// ```swift
    /// var metadata = coordinator.metadata(for: store)
    /// metadata["lastImport"] = .date(Date())
    /// try coordinator.setMetadata(metadata, for: store)
    /// ```
    ///
    /// - Throws: ``PersistentStoreError/reservedMetadataKey(key:reason:)`` naming the key;
    ///   ``PersistentStoreError/readOnlyStore(path:)``; ``ContextError/invalidArgument(_:)``
    ///   for a store that isn't this coordinator's. Nothing is written then.
    public func setMetadata(_ metadata: [String: MetadataValue], for store: PersistentStore) throws {
        guard persistentStores.contains(store) else { throw ContextError.invalidArgument("\(store) is not this coordinator's store") }
        guard !store.isReadOnly else { throw PersistentStoreError.readOnlyStore(path: store.url?.path ?? store.log.path) }
        let user = try Self.userKeys(
            of: metadata, strata: Self.strataMetadata(type: store.type, storeUUID: store.identifier, model: managedObjectModel))
        // A move that took the store after the check above: written to the store that took
        // its place (its old log refuses writes), whose copy holds the metadata before.
        try store.writing { live in
            try live.log.setUserMetadata(user)
            live.userMetadata.withLock { $0 = user }
        }
        store.userMetadata.withLock { $0 = user }
    }

    /// Sets the user's metadata of `store` from property-list values, as Core Data's
    /// `[String: Any]` (``MetadataValue/init(propertyListValue:key:)``), then as
    /// ``setMetadata(_:for:)``.
    ///
    /// - Throws: ``PersistentStoreError/unsupportedMetadataValue(key:type:)`` naming the key
    ///   and type of a value that isn't a property-list type; what ``setMetadata(_:for:)``
    ///   throws.
    public func setMetadata(propertyList metadata: [String: any Sendable], for store: PersistentStore) throws {
        try setMetadata(try Self.metadataValues(metadata), for: store)
    }

    /// The metadata of the store at `url` (`metadataForPersistentStore(type:at:)`), read
    /// without adding it to a coordinator and without writing to it (a read-only open, which
    /// creates LMDB's lock file if the store has none): Strata's keys for the store's newest
    /// model and the user's.
    ///
    /// - Throws: ``PersistentStoreError/noStore(path:)`` when nothing is at `url`,
    ///   ``PersistentStoreError/notAStore(path:reason:)`` for a file or a directory that
    ///   isn't a store; `LogError.malformed` naming the key of a damaged metadata row
    ///   (``setMetadata(_:type:at:)`` replaces it); ``ContextError/invalidArgument(_:)`` for
    ///   `.inMemory`, which has no files.
    public static func metadataForPersistentStore(type: PersistentStore.StoreType, at url: URL) throws -> [String: MetadataValue] {
        let log = try openExisting(type: type, at: url, readOnly: true)
        var metadata = try log.userMetadata()
        metadata.merge(strataMetadata(type: .eventLog, storeUUID: log.storeUUID, model: log.model)) { _, strata in strata }
        return metadata
    }

    /// Sets the user's metadata of the store at `url` without adding it
    /// (`setMetadata(_:type:at:)`), with ``setMetadata(_:for:)``'s rules, written at once.
    /// The store is opened writable for the moment with its newest model, as adding it would
    /// (its opened-at time is updated); the stored metadata is replaced without being read,
    /// so this also repairs a damaged row. A coordinator that has the store added keeps the
    /// metadata it read until it adds it again.
    ///
    /// - Throws: what ``metadataForPersistentStore(type:at:)`` and ``setMetadata(_:for:)``
    ///   throw.
    public static func setMetadata(_ metadata: [String: MetadataValue], type: PersistentStore.StoreType, at url: URL) throws {
        let log = try openExisting(type: type, at: url, readOnly: false)
        let user = try userKeys(of: metadata, strata: strataMetadata(type: .eventLog, storeUUID: log.storeUUID, model: log.model))
        try log.setUserMetadata(user)
    }

    /// The user's keys of `metadata`, checking that Strata's keys in it have Strata's values.
    static func userKeys(of metadata: [String: MetadataValue], strata: [String: MetadataValue]) throws -> [String: MetadataValue] {
        var user: [String: MetadataValue] = [:]
        for (key, value) in metadata {
            if let own = strata[key] {
                guard own == value else {
                    throw PersistentStoreError.reservedMetadataKey(
                        key: key, reason: "Strata sets it (the store has \(own)), so it can't be set to \(value)")
                }
            } else if key.hasPrefix("EntityVersionHash.") {
                throw PersistentStoreError.reservedMetadataKey(
                    key: key, reason: "Strata sets the EntityVersionHash. keys, one per entity of the model, which has no entity \(JSONText.quoted(String(key.dropFirst(18))))")
            } else {
                user[key] = value
            }
        }
        return user
    }

    /// `metadata` as metadata values, each converted with its key.
    static func metadataValues(_ metadata: [String: any Sendable]) throws -> [String: MetadataValue] {
        var values: [String: MetadataValue] = [:]
        for (key, value) in metadata { values[key] = try MetadataValue(propertyListValue: value, key: key) }
        return values
    }

    /// Opens the existing store at `url` with its newest model, as Strata's errors say.
    static func openExisting(type: PersistentStore.StoreType, at url: URL, readOnly: Bool) throws -> EventLog {
        guard type == .eventLog else { throw ContextError.invalidArgument("an in-memory store has no files at \(url.path)") }
        let path = try storePath(of: url)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { throw PersistentStoreError.noStore(path: path) }
        guard isDirectory.boolValue else { throw PersistentStoreError.notAStore(path: path, reason: "it is a file, not a store directory") }
        do {
            return try EventLog(openingExistingAt: path, readOnly: readOnly)
        } catch LogError.notAStore(let detail) {
            throw PersistentStoreError.notAStore(path: path, reason: detail)
        }
    }

    // MARK: - Destroying and replacing

    /// Deletes the store at `url` (`destroyPersistentStore(at:type:)`): its LMDB
    /// environment and lock file, its segment and dictionary files, scratch an interrupted
    /// vacuum left, and the directory. A missing store is not an error (nothing is done), as
    /// in Core Data.
    ///
    /// It refuses, deleting nothing, a path that isn't a Strata store — a file, or a
    /// directory holding anything Strata doesn't create in a store (named), so it never
    /// deletes a directory of the user's — and a store that is open: added to this
    /// coordinator (``remove(_:)`` it first), open elsewhere in this process, or in another
    /// process.
    ///
    /// - Throws: ``PersistentStoreError/notAStore(path:reason:)``,
    ///   ``PersistentStoreError/storeInUse(path:detail:)``; ``ContextError/invalidArgument(_:)``
    ///   for `.inMemory`.
    public func destroyPersistentStore(at url: URL, type: PersistentStore.StoreType) throws {
        guard type == .eventLog else { throw ContextError.invalidArgument("an in-memory store has no files at \(url.path) to destroy") }
        let path = (try Self.storePath(of: url) as NSString).standardizingPath
        try refuseOwnStore(at: path)
        try Self.translatingStoreErrors(path: path) { _ = try EventLog.destroyStore(at: path) }
    }

    /// Puts a copy of the store at `sourceURL` at `destinationURL`
    /// (`replacePersistentStore(at:withPersistentStoreFrom:type:)`), replacing the store
    /// there if there is one, or creating it.
    ///
    /// The copy is consistent — the environment as of one read transaction
    /// (`mdb_env_copy2`) and the segment and dictionary files its manifest names — so the
    /// source may be open and written meanwhile, here or in another process. It is made in a
    /// directory beside the destination, fsynced, and renamed into place (spec 0006 §19.4
    /// says what a crash leaves). The copy keeps the source's store UUID, so object URIs
    /// stay valid in it.
    ///
    /// It refuses, changing nothing, a destination that isn't a Strata store (as
    /// ``destroyPersistentStore(at:type:)``) or is open anywhere — added to this
    /// coordinator included —, and a missing source.
    ///
    /// - Throws: ``PersistentStoreError`` naming the path at fault;
    ///   ``ContextError/invalidArgument(_:)`` for `.inMemory` or a destination that is the
    ///   source.
    public func replacePersistentStore(
        at destinationURL: URL, withPersistentStoreFrom sourceURL: URL, type: PersistentStore.StoreType
    ) throws {
        guard type == .eventLog else { throw ContextError.invalidArgument("an in-memory store has no files to replace at \(destinationURL.path)") }
        let destination = (try Self.storePath(of: destinationURL) as NSString).standardizingPath
        let sourcePath = (try Self.storePath(of: sourceURL) as NSString).standardizingPath
        guard destination != sourcePath else {
            throw ContextError.invalidArgument("\(destination) is both the source and the destination; nothing was replaced")
        }
        try refuseOwnStore(at: destination)
        let own = persistentStores.first { store in store.url.map { ($0.path as NSString).standardizingPath } == sourcePath }
        let source = try own?.log ?? Self.openExisting(type: type, at: sourceURL, readOnly: true)
        try Self.translatingStoreErrors(path: destination) { try EventLog.replaceStore(at: destination, withCopyOf: source) }
    }

    // MARK: - Moving the store

    /// Moves the coordinator's `store` to a new event-log store at `url`
    /// (`migratePersistentStore(_:to:options:type:)`, Core Data's "Save As"): a consistent
    /// copy of it is made at `url` (as ``replacePersistentStore(at:withPersistentStoreFrom:type:)``
    /// makes one), opened with `configuration`, and put in `store`'s place; the new store is
    /// returned. An in-memory store becomes an event log on disk this way; with `type`
    /// `.inMemory` a store on disk is loaded into a new in-memory store instead (`url` is then
    /// ignored: the copy goes to a private temporary directory, removed with the store, and
    /// the store on disk takes no more of this coordinator's writes).
    ///
    /// The copy keeps the store's UUID and whole history, so object IDs, URIs, contexts and
    /// their registered objects carry on with the new store — nothing needs resetting. The
    /// old store is no longer the coordinator's (use the returned one); its files stay
    /// where they were (an in-memory store's go when it is released). Unsaved changes stay
    /// in their contexts and save to the new store.
    ///
    /// - Throws: ``ContextError/invalidArgument(_:)`` when `store` isn't this coordinator's,
    ///   or `url` is inside the store's directory;
    ///   ``PersistentStoreError/storeInUse(path:detail:)`` when
    ///   anything is at `url` already (``destroyPersistentStore(at:type:)`` or
    ///   ``replacePersistentStore(at:withPersistentStoreFrom:type:)`` it first). Nothing is
    ///   changed then, and on any failure the coordinator keeps `store`, and neither a copy nor
    ///   a directory the move made is left.
    @discardableResult
    public func migratePersistentStore(
        _ store: PersistentStore, to url: URL, configuration: EventLog.Configuration = EventLog.Configuration(),
        type: PersistentStore.StoreType = .eventLog
    ) throws -> PersistentStore {
        guard persistentStores.first === store else { throw ContextError.invalidArgument("\(store) is not this coordinator's store") }
        let inMemory = type == .inMemory
        let path = inMemory
            ? (NSTemporaryDirectory() as NSString).appendingPathComponent("strata-memory-\(UUID().uuidString)")
            : (try Self.storePath(of: url) as NSString).standardizingPath
        guard !FileManager.default.fileExists(atPath: path) else {
            throw PersistentStoreError.storeInUse(
                path: path, detail: "something is there already; destroy or replace it first (the store isn't moved over it). Nothing was changed")
        }
        do {
            try EventLog.refuseDestination(path, insideStoreAt: store.log.path)
        } catch LogError.invalidOperation(let reason) {
            throw ContextError.invalidArgument(reason)
        }
        // This process's writes to the store wait from the copy until the new store is in
        // place; then the old log refuses them (`LogError.storeMoved`), and the coordinator's
        // writers — saves, batch requests, history consumers — write again to the new store.
        // A save that took the store before the move so can't land in the old place after
        // the copy, and be lost (spec 0006 §19.7).
        let moved = try store.log.holdingWrites { () throws -> PersistentStore in
            // Looked at again: a store may have been put there while the move waited for the
            // writes, and the move never replaces one (before, the copy replaced it).
            guard !FileManager.default.fileExists(atPath: path) else {
                throw PersistentStoreError.storeInUse(
                    path: path, detail: "something is there already; destroy or replace it first (the store isn't moved over it). Nothing was changed")
            }
            // What the move creates — the store, and the directories above it that were
            // missing — goes again if it fails; a directory something else was put in
            // meanwhile stays (before, it was deleted with what was in it).
            let created = EventLog.firstMissingAncestor(of: path) ?? path
            let parent = (path as NSString).deletingLastPathComponent
            var placed = false
            let moved: PersistentStore
            do {
                try Self.translatingStoreErrors(path: path) { try EventLog.replaceStore(at: path, withCopyOf: store.log) }
                placed = true
                var configuration = configuration
                // As `addPersistentStore(type: .inMemory)` opens one: nothing to keep on a crash.
                if inMemory { configuration.durability = .fast }
                let log = try EventLog(path: path, model: managedObjectModel, configuration: configuration)
                moved = PersistentStore(
                    type: type, url: inMemory ? nil : URL(fileURLWithPath: path), log: log, temporaryDirectory: inMemory ? path : nil,
                    userMetadata: try log.userMetadata(), continuedLogs: store.continuedLogs.union([ObjectIdentifier(store.log)]))
                try replaceStore(store, with: moved)
            } catch {
                if placed { try? FileManager.default.removeItem(atPath: path) }
                EventLog.removeEmptyDirectories(from: parent, through: created)
                throw error
            }
            store.movedTo(moved)
            store.log.refuseWrites(movedTo: path)
            return moved
        }
        // History feeds waiting on the old store and store-change observers look again, and
        // follow the new one (once this process's writes go on).
        store.log.storeMonitor.wakeObservers()
        return moved
    }

    /// Throws ``PersistentStoreError/storeInUse(path:detail:)`` if this coordinator's store
    /// is at `path`.
    private func refuseOwnStore(at path: String) throws {
        for store in persistentStores where store.url.map({ ($0.path as NSString).standardizingPath }) == path {
            throw PersistentStoreError.storeInUse(path: path, detail: "this coordinator has it added; remove(_:) it first. Nothing was changed")
        }
    }

    /// Runs `body`, turning the log's "not a store" and the environment's "open elsewhere"
    /// into ``PersistentStoreError``s about `path`.
    private static func translatingStoreErrors(path: String, _ body: () throws -> Void) throws {
        do {
            try body()
        } catch LogError.notAStore(let detail) {
            throw PersistentStoreError.notAStore(path: path, reason: detail)
        } catch let error as LMDBError where error.code == .incompatibleOpen {
            throw PersistentStoreError.storeInUse(path: path, detail: "\(error.message). Nothing was changed")
        }
    }

    // MARK: - Descriptions

    /// Adds the store `description` describes (`addPersistentStore(with:)`, synchronously):
    /// an in-memory store for type `.inMemory` or the URL `/dev/null` (Core Data's idiom for
    /// a throwaway store), else the event-log store at its URL, read-only if it says so,
    /// opened with its ``PersistentStoreDescription/logConfiguration``. A description with a
    /// ``PersistentStoreDescription/stagedMigrationManager`` first runs the stages the store
    /// hasn't been through (spec 0006 §19.6), when it migrates automatically and isn't
    /// read-only.
    ///
    /// - Throws: ``PersistentStoreError/invalidDescription(_:)`` for an event-log
    ///   description without a URL or a read-only in-memory one; what
    ///   ``addPersistentStore(type:at:configuration:)`` throws.
    @discardableResult
    public func addPersistentStore(with description: PersistentStoreDescription) throws -> PersistentStore {
        let (type, url, configuration) = (description.type, description.url, description.logConfiguration)
        if type == .inMemory || url?.path == "/dev/null" {
            guard !configuration.isReadOnly else {
                throw PersistentStoreError.invalidDescription("an in-memory store can't be read-only: it starts empty and nothing could be saved to it")
            }
            return try addPersistentStore(type: .inMemory, configuration: configuration)
        }
        guard let url else { throw PersistentStoreError.invalidDescription("the event-log store description has no URL") }
        if let manager = description.stagedMigrationManager, configuration.migratesAutomatically, !configuration.isReadOnly {
            if let existing = persistentStores.first { throw ContextError.storeAlreadyAdded(existing.description) }
            try runStagedMigration(manager, storeAt: url, configuration: configuration)
        }
        return try addPersistentStore(type: .eventLog, at: url, configuration: configuration)
    }
}

// MARK: - Compatibility

extension ManagedObjectModel {
    /// Whether a store with `metadata` (``PersistentStoreCoordinator/metadataForPersistentStore(type:at:)``)
    /// holds this model's entities as they are — so adding it migrates no data — Core Data's
    /// `isConfiguration(withName:compatibleWithStoreMetadata:)`: every entity's version hash
    /// (`EntityVersionHash.NAME`) is the store's newest model's, and the store has no other
    /// entity. Strata has no model configurations, so `configuration` must be nil (or
    /// `"Default"`, Core Data's name for the whole model); another name is never compatible.
    ///
    /// Like Core Data's, it compares version hashes only: a model that differs in indexes,
    /// uniqueness constraints or renaming identifiers is compatible here, and adding the store
    /// stores it as a new version and rebuilds its indexes (spec 0004 §4.3).
    public func isConfiguration(withName configuration: String?, compatibleWithStoreMetadata metadata: [String: MetadataValue]) -> Bool {
        guard configuration == nil || configuration == "Default" else { return false }
        let prefix = "EntityVersionHash."
        var stored: [String: String] = [:]
        for (key, value) in metadata where key.hasPrefix(prefix) {
            guard case .string(let hash) = value else { return false }
            stored[String(key.dropFirst(prefix.count))] = hash
        }
        guard !stored.isEmpty else { return false }
        let own = entityVersionHashesByName.mapValues { lowercaseHex($0) }
        return own == stored
    }
}
