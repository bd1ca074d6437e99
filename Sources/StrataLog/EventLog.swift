public import Foundation
import Synchronization
public import StrataModel
public import StrataStorage

/// An append-only log of transactions in LMDB, with the current state, indexes and history
/// derived from it: Strata's storage engine (`Specs/0004-event-log.md`).
///
/// Every save is one ``TransactionEvent``, appended with the changes it makes to the
/// current-state table, the indexes and the per-object history in **one** LMDB write
/// transaction. The log is the source of truth; everything else can be rebuilt from it
/// (``verify()``). Old events can be moved into zstd segment files (``compact(_:)``) and
/// are still read transparently.
///
/// ```swift
/// let log = try EventLog(path: storeDirectory, model: model)
/// var draft = TransactionDraft(author: "importer")
/// let team = draft.insert("Team", values: ["name": .attribute(.string("Otters"))])
/// _ = draft.insert("Player", values: ["lastName": .attribute(.string("Ng")), "team": .reference(team)])
/// let result = try log.commit(draft)
/// let players = try log.read { reader in try reader.related(result.permanentID(for: team)!, "players") }
/// ```
public final class EventLog: Sendable {
    /// How a store is opened.
    public struct Configuration: Sendable {
        /// Commit durability (default ``Durability/durable``).
        public var durability: Durability = .durable
        /// The initial LMDB map size; it grows as needed.
        public var initialMapSize: Int = 64 << 20
        /// The largest the map may grow.
        public var maximumMapSize: Int = 1 << 40
        /// Open read-only: nothing is written, not even the opened-at time.
        public var isReadOnly: Bool = false
        /// The largest LMDB value an event chunk takes, so chunks stay in B-tree pages: at
        /// least 64, and at most what a leaf page holds (2,018 bytes with 4 KiB pages).
        public var chunkSize: Int = 1900
        /// Write a checkpoint every this many transactions (0: only when asked).
        public var checkpointInterval: UInt64 = 10_000
        /// The most checkpoints kept (each is a copy of the state). When a new one would pass
        /// the limit, the one whose removal leaves the smallest gap goes, so spacing grows
        /// with age: recent points stay cheap to reach, storage stays bounded — but an as-of
        /// read of an old point costs more as the log grows. 0 keeps every checkpoint: an
        /// as-of read then decodes fewer than ``checkpointInterval`` events for any point,
        /// whatever the log's length, for a copy of the state per interval.
        public var maximumCheckpoints: Int = 6
        /// The most read transactions open at once, across every process using the store
        /// (LMDB's reader table; default 126). Each read of a store (a fetch, a `read`
        /// closure) holds a slot while it runs, so a process reading from more threads at
        /// once needs more; past it a read fails with `MDB_READERS_FULL`. The first process
        /// to open the store sizes the table; later ones use it as it is.
        public var maximumReaders: Int = 126
        /// Whether a writable open with a model the store hasn't stored yet (a new version
        /// hash, or a stored one with other indexes or renaming identifiers) migrates the
        /// stored data to it (default true; spec 0004 §4.3–4.6). When false, such an open is
        /// refused with ``LogError/modelMismatch(_:)``, writing nothing, as Core Data refuses
        /// a store whose model differs when `shouldMigrateStoreAutomatically` is off.
        public var migratesAutomatically: Bool = true
        /// Whether a writable open with a model the store hasn't stored may take out entities
        /// or stored properties the store's newest model version has and the model lacks
        /// (default false; spec 0004 §4.7). Off, such a model — an earlier app's, after a
        /// downgrade, or a later one that drops them — is refused with
        /// ``LogError/modelMismatch(_:)`` naming what it lacks, writing nothing, as Core Data
        /// refuses a store whose model it has no mapping from (134100); on, the store migrates
        /// to it, taking their values out of the current state (the history keeps them).
        public var allowsRemovingEntitiesAndProperties: Bool = false
        /// The directory where ``EventLog/verify()`` and ``EventLog/purge(through:author:contextName:)``
        /// make their scratch environment (spec 0004 §8), and where they look for the scratch
        /// environments of killed processes to remove; nil (the default): the temporary
        /// directory (`NSTemporaryDirectory()`, `TMPDIR`). It must exist: Strata doesn't make it.
        public var scratchDirectory: String? = nil
        /// Tests only: stop a writable open that stored a new model version right after
        /// storing it, as a crash there would (the open throws `LogError.invalidOperation`).
        package var stopsAfterStoringNewVersion: Bool = false
        /// Tests only: stop a writable open right after its model-version migration has
        /// committed, as a crash there would (the open throws `LogError.invalidOperation`).
        package var stopsAfterMigrating: Bool = false
        /// Tests only: a writable open's fill of the ordered sides it must fill (spec 0004
        /// §4.1) throws before its transaction commits, as an error there would (the open
        /// throws `LogError.invalidOperation`; the migration before it has committed).
        package var failsFillingOrderedSides: Bool = false
        /// Tests only: a refused migration's take-back (spec 0004 §4.3) throws before it
        /// writes anything, as an error in its write transaction would.
        package var failsTakingBack: Bool = false
        /// Tests only: commits compute no derived attributes, as a bug in their upkeep would
        /// (so verify's check of derived values has something to find).
        package var skipsDerivations: Bool = false
        /// Tests only: commits don't check that both sides of a many-to-many ordered on both
        /// sides agree, so a test can write a store as one written when only one side was
        /// recorded (spec 0004 §4.1).
        package var skipsOrderedPairCheck: Bool = false
        /// Tests only: commits don't check that a reference names an object of its
        /// relationship's destination (or a sub-entity), so a test can write a store as the
        /// migration wrote one before session 33, when a model version changed a
        /// relationship's destination and the stored references stayed (spec 0004 §4.5).
        package var skipsDestinationCheck: Bool = false
        /// Tests only: commits don't check that an object is in one list of an ordered
        /// to-many whose inverse is a to-one, so a test can write a store as one written before
        /// session 33 (for verify's check, spec 0004 §8).
        package var skipsListedOnceCheck: Bool = false

        /// The defaults.
        public init() {}
    }

    /// The newest store format version this build reads (and writes): 2 for a store whose
    /// model has a many-to-many ordered on both sides (both sides recorded, spec 0004 §4.1 —
    /// a Strata that derives the second side would refuse its records as damage), else 1.
    public static let formatVersion: UInt32 = 2

    /// The store directory.
    public let path: String
    /// The store's identity, part of every object URI.
    public let storeUUID: UUID
    /// The model this handle writes with.
    public let model: ManagedObjectModel
    /// The store's number for ``model``.
    public let modelVersion: Int
    /// The configuration the store was opened with.
    public let configuration: Configuration
    /// Announces every move of the head — this process's commits and other processes'
    /// (`Specs/0009-history.md` §5).
    public let storeMonitor: StoreMonitor

    let environment: LMDBEnvironment
    /// The environment value that opened the `contexts` table in a read-only open (kept so
    /// its handle stays the process's as long as this log's).
    private let contextsOpener: LMDBEnvironment?
    let tables: StoreTables
    let catalog: Catalog
    let schema: ModelSchema
    let segmentDirectory: String
    /// The commits' entity codings, made once for the log's schema.
    let entityShapes = EntityShapes()
    /// How many times as-of reads through this handle built the state of the whole store
    /// (``LogReader/state(asOf:)``'s walk): what tests count to check that a read in batches
    /// (`strata export --at`) builds it at most once, not once per batch.
    let wholeStateReads = Mutex<Int>(0)
    /// ``wholeStateReads``' count.
    package var wholeStateReadCount: Int { wholeStateReads.withLock { $0 } }
    /// How many raw events ``forEachRawEvent(from:through:_:)`` read through this handle —
    /// compaction's frames and dictionary samples, a dry run's estimate (and a migration's
    /// look at the head): what tests count to check that a compaction planned with
    /// ``compactionPlan(_:)`` reads its range once (`strata compact`; before, its plan was a
    /// dry run that read the range too).
    let compactionEventReads = Mutex<UInt64>(0)
    /// ``compactionEventReads``' count.
    package var compactionEventReadCount: UInt64 { compactionEventReads.withLock { $0 } }
    /// The last lists derived for paired sides filled after a point (spec 0004 §4.1,
    /// ``LogReader/derivedSideLists(_:asOf:)``): a point's history never changes, so they
    /// hold for as long as the handle.
    let derivedSides = Mutex<DerivedSideLists?>(nil)
    /// What this handle's model-version migration dropped (``lastMigrationDrops``).
    let migrationDrops = Mutex<[MigrationDrop]>([])

    /// The values of one relationship that a model-version migration couldn't carry over and
    /// dropped (spec 0004 §4.5): the version makes the relationship lead to another entity,
    /// whose objects the stored references don't name.
    public struct MigrationDrop: Sendable, Hashable, CustomStringConvertible {
        /// The entity whose objects held the values (in the opening version).
        public let entity: String
        /// The relationship, by its name in the opening version.
        public let relationship: String
        /// Its destination in the version that stored the values.
        public let oldDestination: String
        /// Its destination in the opening version.
        public let newDestination: String
        /// How many objects lost their value.
        public let objects: Int

        public init(entity: String, relationship: String, oldDestination: String, newDestination: String, objects: Int) {
            self.entity = entity
            self.relationship = relationship
            self.oldDestination = oldDestination
            self.newDestination = newDestination
            self.objects = objects
        }

        /// `Player.team (to Team; now to Player): 2 objects lost their value`.
        public var description: String {
            "\(entity).\(relationship) (to \(oldDestination); now to \(newDestination)): \(objects) object\(objects == 1 ? "" : "s") lost \(objects == 1 ? "its" : "their") value"
        }
    }

    /// The relationships whose values the migration this handle's open ran dropped, with how
    /// many objects lost them (empty when it dropped none, or nothing was migrated): a
    /// relationship the opening version makes lead to another entity, opened with
    /// ``Configuration/allowsRemovingEntitiesAndProperties`` (spec 0004 §4.5).
    public var lastMigrationDrops: [MigrationDrop] { migrationDrops.withLock { $0 } }

    // MARK: - Opening

    /// Opens the store at `path`, creating it if it doesn't exist, and records `model` as a
    /// model version if the store hasn't seen it.
    ///
    /// - Throws: ``LogError`` for a directory that holds something else, a store of a newer
    ///   format, or a read-only open of a missing store; ``LogError/modelMismatch(_:)`` for a
    ///   model the store hasn't seen that lacks entities or stored properties of its newest
    ///   version, unless ``Configuration/allowsRemovingEntitiesAndProperties`` (an earlier
    ///   app's model: spec 0004 §4.7); ``LMDBError`` for I/O failures.
    public convenience init(path: String, model: ManagedObjectModel, configuration: Configuration = Configuration()) throws {
        try self.init(path: path, model: Optional(model), configuration: configuration)
    }

    /// Opens an existing store with the newest model it holds: for tools that have no app
    /// code (`strata`). Read-only by default.
    public convenience init(openingExistingAt path: String, readOnly: Bool = true) throws {
        var configuration = Configuration()
        configuration.isReadOnly = readOnly
        try self.init(path: path, model: nil, configuration: configuration)
    }

    private init(path: String, model givenModel: ManagedObjectModel?, configuration: Configuration) throws {
        self.path = path
        self.configuration = configuration
        segmentDirectory = (path as NSString).appendingPathComponent("segments")
        let fileManager = FileManager.default
        // An empty path would name the current directory's files (`data.mdb`): it names no store.
        if path.isEmpty { throw LogError.notAStore("an empty path") }
        var isDirectory: ObjCBool = false
        let exists = fileManager.fileExists(atPath: path, isDirectory: &isDirectory)
        if exists && !isDirectory.boolValue { throw LogError.notAStore("\(path) (it is a file, not a store's directory)") }
        let dataFile = (path as NSString).appendingPathComponent("data.mdb")
        var dataIsDirectory: ObjCBool = false
        let hasData = fileManager.fileExists(atPath: dataFile, isDirectory: &dataIsDirectory)
        // Before, LMDB's `mdb_env_open: Is a directory (code 21)`, naming neither file.
        if hasData && dataIsDirectory.boolValue {
            throw LogError.notAStore("\(path) (\(dataFile) is a directory; a store's data.mdb is LMDB's data file)")
        }
        if !hasData {
            if configuration.isReadOnly || givenModel == nil { throw LogError.notAStore(path) }
            // LMDB's own files don't count: another thread or process creating the store at
            // this moment has made `lock.mdb` and may have made `data.mdb` since the check
            // above (before, a concurrent open of a new store failed here now and then).
            if exists, let contents = try? fileManager.contentsOfDirectory(atPath: path),
                !contents.filter({ !$0.hasPrefix(".") && $0 != "lock.mdb" && $0 != "data.mdb" }).isEmpty
            {
                throw LogError.notAStore("\(path) (the directory holds other files)")
            }
        }

        var options = LMDBEnvironment.Options()
        options.mapSize = configuration.initialMapSize
        options.maximumMapSize = configuration.maximumMapSize
        options.durability = configuration.durability
        options.isReadOnly = configuration.isReadOnly
        options.maxDatabases = StoreTables.names.count + 4
        options.maxReaders = max(1, configuration.maximumReaders)
        let environment: LMDBEnvironment
        // A read-only open can't create the `contexts` table, which stores written before it
        // existed lack: it is opened apart, and its absence means "scan the headers".
        let names = configuration.isReadOnly ? StoreTables.requiredNames : StoreTables.names
        do {
            // A writable open would create the store's tables in another program's LMDB
            // environment before finding no store there: what the environment holds is
            // checked first, and nothing is written to one that isn't a store's.
            let probe = hasData && !configuration.isReadOnly ? try Self.refusingForeignEnvironment(path, options: options) : nil
            environment = try withExtendedLifetime(probe) {
                // Shares the probe's open environment: no second open.
                try LMDBEnvironment(path: path, databases: names.map { DatabaseDescriptor($0) }, options: options)
            }
        } catch let error as LMDBError where error.code == .databaseNotFound || error.code == .invalid {
            throw LogError.notAStore("\(path) (\(error.message))")
        }
        var contexts: LMDBDatabase?
        if configuration.isReadOnly {
            do {
                let opener = try LMDBEnvironment(
                    path: path, databases: [DatabaseDescriptor(StoreTables.contextsName)], options: options)
                contexts = try opener.database(named: StoreTables.contextsName)
                contextsOpener = opener
            } catch let error as LMDBError where error.code == .databaseNotFound {
                contextsOpener = nil
            }
        } else {
            contextsOpener = nil
        }
        let tables = try StoreTables(environment, contexts: contexts)
        let catalog = Catalog(environment: environment, tables: tables)
        storeMonitor = StoreMonitor(watchedFile: (path as NSString).appendingPathComponent("data.mdb")) { [environment, tables] in
            try environment.read { txn in
                try MetaKey.number(try txn.value(forKey: MetaKey.head, in: tables.meta), key: MetaKey.head)
            }
        }
        self.environment = environment
        self.tables = tables
        self.catalog = catalog

        if configuration.isReadOnly {
            let (uuid, format) = try environment.read { txn in
                (try txn.value(forKey: MetaKey.storeUUID, in: tables.meta),
                 try txn.value(forKey: MetaKey.formatVersion, in: tables.meta))
            }
            guard let uuidBytes = uuid, uuidBytes.count == 16 else { throw LogError.notAStore(path) }
            try Self.checkFormat(format, path: path)
            storeUUID = Self.uuid(uuidBytes)
            try catalog.reload()
            guard let newest = try Self.newestUsableVersion(environment, tables, catalog) else {
                throw LogError.notAStore("\(path) (no model stored)")
            }
            let schema = try catalog.schema(forModelVersion: newest)
            // A store written when one side of a many-to-many ordered on both sides was
            // derived has no list for it yet: a writable open fills it (spec 0004 §4.1).
            // Marked sides this version derives (an earlier model's, when a later version
            // marked them and its migration was refused or its fill didn't commit) don't
            // count: this version reads them from their inverses (spec 0004 §4.1).
            let unfilled = Self.orderedSidesToFill(schema, existing: catalog.snapshot)
            let marked = try environment.read { txn in try txn.value(forKey: MetaKey.orderedSidesToFill, in: tables.meta) }
                .map { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) } ?? []
            let markedPaired = Self.fillableSides(marked, in: schema).map(\.side)
            if !unfilled.isEmpty || !markedPaired.isEmpty {
                let names = unfilled.isEmpty ? markedPaired.joined(separator: ", ") : unfilled.joined(separator: ", ")
                throw LogError.invalidOperation(
                    "the store at \(path) was written when only one side of each many-to-many ordered on both sides was recorded, and \(names) has no list of its own yet: open it writable once to record both sides (a read-only open changes nothing)")
            }
            if let givenModel, givenModel.versionHash != schema.model.versionHash {
                throw LogError.modelMismatch(
                    "the store is opened read-only and its newest model isn't the one given: a read-only store takes no new model version and isn't migrated (open it writable to migrate it)")
            }
            self.schema = schema
            model = schema.model
            modelVersion = newest
        } else {
            let model: ManagedObjectModel
            if let givenModel {
                model = givenModel
            } else {
                try catalog.reload()
                guard let newest = try Self.newestUsableVersion(environment, tables, catalog) else { throw LogError.notAStore(path) }
                model = try catalog.schema(forModelVersion: newest).model
            }
            let schema = ModelSchema(model: model)
            let now = bigEndianBytes(UInt64(bitPattern: EventCodec.microsecondsNow()))
            let (uuid, version, isNewVersion, state, head, indexThrough, writes) = try environment.write {
                txn -> (UUID, Int, Bool, Catalog.State, UInt64?, UInt64?, OpenWrites) in
                // What this open writes to an existing store, with what the rows held: a
                // refused migration takes it back (spec 0004 §4.3).
                var writes = OpenWrites()
                var uuidBytes = try txn.value(forKey: MetaKey.storeUUID, in: tables.meta)
                if uuidBytes == nil {
                    let fresh = UUID()
                    let bytes = withUnsafeBytes(of: fresh.uuid) { Array($0) }
                    try txn.put(bytes, forKey: MetaKey.storeUUID, in: tables.meta)
                    try txn.put(bigEndianBytes(UInt32(1)), forKey: MetaKey.formatVersion, in: tables.meta)
                    try txn.put(now, forKey: MetaKey.createdAt, in: tables.meta)
                    try txn.put(bigEndianBytes(UInt64(0)), forKey: MetaKey.head, in: tables.meta)
                    uuidBytes = bytes
                } else {
                    try Self.checkFormat(try txn.value(forKey: MetaKey.formatVersion, in: tables.meta), path: path)
                }
                let existing = try catalog.load(txn)
                let hash = Array(model.versionHash)
                try writes.put(now, forKey: MetaKey.openedAt, in: .meta, txn, tables)
                let registered = try Catalog.register(schema, in: txn, tables: tables, existing: existing)
                writes.codes = Catalog.codesAdded(registered, over: existing)
                // Both sides of a both-ordered many-to-many recorded: format 2, which a Strata
                // deriving the second side refuses by its version (spec 0004 §10).
                if schema.hasPairedSides {
                    try writes.put(bigEndianBytes(UInt32(2)), forKey: MetaKey.formatVersion, in: .meta, txn, tables, ofVersion: true)
                }
                // Sides of many-to-manys ordered on both sides the store didn't record: filled
                // after the open (spec 0004 §4.1), marked in this transaction so a crash before
                // the fill leaves them to the next open.
                let toFill = Self.orderedSidesToFill(schema, existing: existing)
                if !toFill.isEmpty {
                    let marked = try txn.value(forKey: MetaKey.orderedSidesToFill, in: tables.meta)
                        .map { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) } ?? []
                    let all = Set(marked).union(toFill).sorted().joined(separator: "\n")
                    try writes.put(Array(all.utf8), forKey: MetaKey.orderedSidesToFill, in: .meta, txn, tables, ofVersion: true)
                }
                let version: Int
                var isNewVersion = false
                var storedMatch: Int?
                if let stored = try txn.value(forKey: MetaKey.modelHash(hash), in: tables.meta),
                    let number = stored.withUnsafeBytes({ readBigEndian($0, count: 4) })
                {
                    storedMatch = Self.storedVersion(of: schema, newest: Int(number), in: registered.modelJSON)
                }
                // A refused version (never written with) that later versions have passed since
                // is stored again, as the newest: only earlier versions' data migrates, and the
                // store's data may now be in a later one's terms (spec 0004 §4.3).
                if let match = storedMatch, configuration.migratesAutomatically, match < (registered.modelJSON.keys.max() ?? 0),
                    try txn.value(forKey: MetaKey.refusedModel(match), in: tables.meta) != nil
                {
                    storedMatch = nil
                }
                // A stored version older than the newest one the store's data is in, whose
                // model has entities or stored properties that version lacks while lacking none
                // of its own: a later model adding back what a version removed, whose hash is
                // the earlier version's (default values aren't hashed). Stored again as a new
                // version, which migrates — the added attributes take their defaults — rather
                // than opening as the earlier version and filling nothing (spec 0004 §4.7).
                if let match = storedMatch, configuration.migratesAutomatically,
                    try Self.addsBack(model, over: match, in: txn, tables: tables, models: registered.modelJSON)
                {
                    storedMatch = nil
                }
                if let match = storedMatch {
                    version = match
                } else {
                    // A new model, or one whose version hash is stored but whose indexes or
                    // uniqueness constraints differ (the hash leaves them out, as Core Data's
                    // does): a new version, so replay knows which indexes each event maintained.
                    // Likewise renaming identifiers (not hashed either): a model that renames
                    // back to an earlier version's names is a later version, which migrates.
                    // Automatic migration off: a store that has a model refuses another (a
                    // stored hash with other indexes or renaming identifiers too: a new version
                    // migrates); the write is abandoned, so nothing is written.
                    if !configuration.migratesAutomatically, let newest = existing.modelJSON.keys.max() {
                        let known = try txn.value(forKey: MetaKey.modelHash(hash), in: tables.meta) != nil
                        throw LogError.modelMismatch(
                            "the store at \(path) was written with model version \(newest), and "
                                + (known
                                    ? "this model's version hash is stored, but with other indexes, uniqueness constraints or renaming identifiers (a new version, which would migrate the store)"
                                    : "this model's version hash isn't one it has stored")
                                + "; migrating the store automatically is turned off, so it isn't opened (nothing was written)")
                    }
                    // A model that lacks entities or stored properties of the version the
                    // store's data is in: an earlier app's (a downgrade), whose migration would
                    // take their values out, unless the caller says it drops them on purpose.
                    if !configuration.allowsRemovingEntitiesAndProperties {
                        try Self.refuseRemoval(by: model, path: path, in: txn, tables: tables, models: registered.modelJSON)
                    }
                    version = (registered.modelJSON.keys.max() ?? 0) + 1
                    isNewVersion = true
                    try writes.put(Array(model.jsonData(prettyPrinted: false)), forKey: bigEndianBytes(UInt32(version)), in: .models, txn, tables, ofVersion: true)
                    try writes.put(bigEndianBytes(UInt32(version)), forKey: MetaKey.modelHash(hash), in: .meta, txn, tables, ofVersion: true)
                    // Marked until its migration has committed (spec 0004 §4.3): a crash
                    // before, or a tool opening meanwhile, finds the store's data in the
                    // earlier version's terms, as it is.
                    try writes.put([1], forKey: MetaKey.refusedModel(version), in: .meta, txn, tables, ofVersion: true)
                }
                // Whether the per-context transaction index covers the log (spec 0004 §6.4):
                // two meta rows, so an open of a store whose index is complete costs nothing
                // more. Rows that don't read are damage for verify; the build then waits.
                let head = try? MetaKey.number(try txn.value(forKey: MetaKey.head, in: tables.meta), key: MetaKey.head)
                let indexThrough = try? MetaKey.number(
                    try txn.value(forKey: MetaKey.contextIndexThrough, in: tables.meta), key: MetaKey.contextIndexThrough)
                return (Self.uuid(uuidBytes ?? []), version, isNewVersion, registered, head, indexThrough, writes)
            }
            catalog.replace(with: state)
            try catalog.reload()
            storeUUID = uuid
            self.model = model
            self.schema = schema
            modelVersion = version
            if isNewVersion && configuration.stopsAfterStoringNewVersion {
                throw LogError.invalidOperation("stopped after storing model version \(version), as asked (a test of a crash there)")
            }
            try repairSegments()
            Self.removeVacuumScratch(inStoreDirectory: path)
            if indexThrough != head { try buildContextIndex() }
            try migrateRecordingRefusal(isNewVersion: isNewVersion, takingBack: writes)
            try fillOrderedSides()
        }
    }

    /// ``migrateIfNeeded()``; a refused migration takes back what the open wrote (spec 0004
    /// §4.3). A new version is stored marked; the mark goes when the version's migration has
    /// committed (or found nothing to do). When its migration is refused, the open takes the
    /// version back — its model row, its `modelHash:` entry, its mark, the codes it gave, the
    /// format version it raised, the fills it marked — and the opened-at time, so the store
    /// is as it was (before session 35 the version stayed stored and marked: `strata info`
    /// listed it, a both-ordered side it recorded stayed marked to fill, which refused
    /// read-only opens and which an earlier model's writable open took as filled, and every
    /// commit of the earlier model set `earlierModelWrote`). Only a version this open stored
    /// is taken back: one stored before has opened (or is marked already — a crash before its
    /// migration), and the store's data may be in its terms.
    private func migrateRecordingRefusal(isNewVersion: Bool, takingBack writes: OpenWrites) throws {
        let key = MetaKey.refusedModel(modelVersion)
        let marked = try environment.read { txn in try txn.value(forKey: key, in: tables.meta) } != nil
        do {
            // With automatic migration off, a version whose migration was refused isn't
            // migrated now either (it is a store needing a migration).
            // The mark goes in the migration's transaction (and after it, when there was
            // nothing to migrate): a crash right after the migration leaves it unmarked.
            try migrateIfNeeded(refusing: marked && !configuration.migratesAutomatically, unmarking: marked ? key : nil)
        } catch {
            // The take-back is one write transaction: it takes back all of it or nothing.
            // When it fails, the caller hears both (spec 0004 §4.3): the store isn't as it was.
            do {
                try takeBack(writes, isNewVersion: isNewVersion)
            } catch let takeBackError {
                throw LogError.migration(
                    "the migration to model version \(modelVersion) was refused (\(error)), and taking back what the open wrote failed (\(takeBackError)): nothing was taken back"
                        + (isNewVersion
                            ? " — model version \(modelVersion) stays stored and marked as refused, as after a crash before its migration: tools, read-only opens and the earlier model open the store as before (in the earlier version's terms), and the next open of this model migrates again"
                            : "; model version \(modelVersion) was stored before this open (and stays marked as refused), so the store's objects and model versions are as they were, but what the open wrote stays: "
                                + writes.described))
            }
            throw error
        }
        if configuration.stopsAfterMigrating {
            throw LogError.invalidOperation("stopped after migrating to model version \(modelVersion), as asked (a test of a crash there)")
        }
        if marked {
            try environment.write { txn in
                try requireStoredVersion(txn)
                _ = try txn.delete(key: key, in: tables.meta)
            }
        }
    }

    /// Takes back the rows a writable open whose migration was refused wrote (spec 0004
    /// §4.3), each only while it still holds what the open wrote (another open may have
    /// written it since). The version the open stored, and what came with it, go only while
    /// the version is still marked and the newest stored: another open of the same model
    /// that migrated meanwhile unmarked it (its data is in the version's terms now), and a
    /// version stored after it may use its codes — then it stays, marked, as after a crash.
    /// The codes it gave are retired, not given again: a process that loaded the catalog
    /// meanwhile may hold them, and would read another name's objects under them.
    private func takeBack(_ writes: OpenWrites, isNewVersion: Bool) throws {
        try environment.write { txn in
            if configuration.failsTakingBack {
                throw LogError.invalidOperation("the take-back failed, as asked (a test of an error there)")
            }
            var whole = isNewVersion
            if whole { whole = try txn.value(forKey: MetaKey.refusedModel(modelVersion), in: tables.meta) != nil }
            if whole { whole = try newestStoredModelVersion(txn) == modelVersion }
            for row in writes.rows.reversed() where whole || !row.ofVersion {
                let database = row.table.database(tables)
                guard try txn.value(forKey: row.key, in: database) == row.new else { continue }
                if let old = row.old { try txn.put(old, forKey: row.key, in: database) } else { _ = try txn.delete(key: row.key, in: database) }
            }
            guard whole else { return }
            var ceilings: [Catalog.Kind: UInt16] = [:]
            for (kind, name, code) in writes.codes {
                _ = try txn.delete(key: [kind.rawValue] + Array(name.utf8), in: tables.catalog)
                _ = try txn.delete(key: [kind.reverse] + Catalog.codeBytes(code), in: tables.catalog)
                ceilings[kind] = max(ceilings[kind] ?? 0, code)
            }
            for (kind, code) in ceilings { try Catalog.retire(kind, through: code, in: txn, tables: tables) }
        }
    }

    /// Refuses to go on with an open whose model version another open took back meanwhile
    /// (its migration was refused, spec 0004 §4.3): an event of it would name a model the
    /// store doesn't hold.
    func requireStoredVersion(_ txn: borrowing LMDBTransaction) throws {
        guard try txn.value(forKey: bigEndianBytes(UInt32(clamping: modelVersion)), in: tables.models) == nil else { return }
        throw LogError.invalidOperation(
            "model version \(modelVersion) was taken out of the store at \(path) while this open migrated to it (another open of the model had its migration refused, and took the version back); open it again")
    }

    /// Refuses `model`, a model version not stored yet, when it lacks an entity or a stored
    /// property of the store's newest model version whose migration wasn't refused — the
    /// version the store's data is in (spec 0004 §4.7): its migration would take their
    /// values out. Throws ``LogError/modelMismatch(_:)`` naming the store, the version and
    /// what the model lacks; the caller's write is then abandoned.
    static func refuseRemoval(
        by model: ManagedObjectModel, path: String, in txn: borrowing LMDBTransaction, tables: StoreTables, models: [Int: Data]
    ) throws {
        var newest: Int?
        for version in models.keys.sorted(by: >) where try txn.value(forKey: MetaKey.refusedModel(version), in: tables.meta) == nil {
            newest = version
            break
        }
        guard let newest, let json = models[newest], let stored = try? ManagedObjectModel(jsonData: json) else { return }
        let lacking = lacking(in: model, of: stored)
        guard !lacking.isEmpty else { return }
        let shown = lacking.prefix(12).joined(separator: ", ") + (lacking.count > 12 ? " and \(lacking.count - 12) more" : "")
        throw LogError.modelMismatch(
            "the store at \(path) is in model version \(newest)'s terms, which has \(shown) that this model lacks (and doesn't rename, or makes lead to another entity): "
                + "the model used to open the store is incompatible with the one its data is in — an earlier app's model (a downgrade) "
                + "would take their values out of the store — so it isn't opened (nothing was written). A later model that drops "
                + "them on purpose opens with EventLog.Configuration.allowsRemovingEntitiesAndProperties (a store description's "
                + "logConfiguration), which migrates the store to it")
    }

    /// Whether `model`, stored as version `match`, is a later model than the store's newest
    /// version whose migration wasn't refused (newer than `match`): it lacks nothing of that
    /// version and has an entity or a stored property that version neither has nor renames —
    /// one a version after `match` removed, added back (spec 0004 §4.7). An earlier app's
    /// model that lacks what the newest version has is not (it opens as `match`).
    static func addsBack(
        _ model: ManagedObjectModel, over match: Int, in txn: borrowing LMDBTransaction, tables: StoreTables, models: [Int: Data]
    ) throws -> Bool {
        var newest: Int?
        for version in models.keys.sorted(by: >) where try txn.value(forKey: MetaKey.refusedModel(version), in: tables.meta) == nil {
            newest = version
            break
        }
        guard let newest, newest > match, let json = models[newest], let stored = try? ManagedObjectModel(jsonData: json) else { return false }
        return lacking(in: model, of: stored).isEmpty && !lacking(in: stored, of: model).isEmpty
    }

    /// What `model` lacks of `stored`, in name order: `entity E` for an entity it neither has
    /// nor renames (no entity of the name, none whose renaming identifier is the name or the
    /// entity's own renaming identifier), `E.p` for a stored (not transient) attribute or a
    /// relationship of a kept entity that its counterpart neither has stored nor renames, and
    /// `E.r (to D; this model's E.r leads to D2)` for a relationship the counterpart makes lead
    /// to another entity, which the stored references may not name (spec 0004 §4.5).
    static func lacking(in model: ManagedObjectModel, of stored: ManagedObjectModel) -> [String] {
        func renames(_ identifier: String?, _ name: String, _ ownIdentifier: String?) -> Bool {
            guard let identifier else { return false }
            return identifier == name || identifier == ownIdentifier
        }
        var entities: [String] = []
        var properties: [String] = []
        func counterpart(of entity: EntityDescription) -> EntityDescription? {
            model.entity(named: entity.name)
                ?? model.entities.first { renames($0.renamingIdentifier, entity.name, entity.renamingIdentifier) }
        }
        // The entities the model renames (old name → new name), for a relationship's destination.
        var renamed: [String: String] = [:]
        for entity in stored.entities where model.entity(named: entity.name) == nil {
            if let now = counterpart(of: entity) { renamed[entity.name] = now.name }
        }
        /// Whether `model` keeps relationship `old`'s inverse (on its destination's
        /// counterpart, by name or a rename) paired with a relationship of `counterpart` that
        /// `entity` doesn't have: the membership goes to that new inverse.
        func carriesInverse(_ old: RelationshipDescription, of entity: EntityDescription, into counterpart: EntityDescription) -> Bool {
            guard let inverseName = old.inverseName, let storedDestination = stored.entity(named: old.destinationEntityName),
                let oldInverse = storedDestination.relationshipsByName[inverseName],
                let destination = model.entity(named: renamed[old.destinationEntityName] ?? old.destinationEntityName),
                let kept = destination.relationshipsByName[inverseName]
                    ?? destination.allRelationships.first(where: { renames($0.renamingIdentifier, inverseName, oldInverse.renamingIdentifier) }),
                let newInverseName = kept.inverseName, entity.propertiesByName[newInverseName] == nil,
                let newInverse = counterpart.relationshipsByName[newInverseName], newInverse.inverseName == kept.name
            else { return false }
            return keepsReferences(
                from: old.destinationEntityName, in: stored, to: newInverse.destinationEntityName, in: model, renamed: renamed)
        }
        for entity in stored.entities.sorted(by: { $0.name < $1.name }) {
            guard let counterpart = counterpart(of: entity) else {
                entities.append("entity \(entity.name)")
                continue
            }
            let kept = counterpart.properties.filter { $0.fetchedProperty == nil && !$0.isTransient }
            // Properties that swap names: each is the counterpart of the one it claims.
            let swapped = swappedPropertyNames(earlier: entity, later: counterpart)
            for property in entity.properties.sorted(by: { $0.name < $1.name })
            where property.fetchedProperty == nil && !property.isTransient {
                let claimed = swapped[property.name] ?? property.name
                let same = kept.first { $0.name == claimed } ?? kept.first { renames($0.renamingIdentifier, property.name, property.renamingIdentifier) }
                guard let same else {
                    // A relationship whose inverse the model keeps with a new inverse on this
                    // entity: its membership is carried onto the new inverse (spec 0004 §4.5).
                    if let old = property.relationship, carriesInverse(old, of: entity, into: counterpart) { continue }
                    properties.append("\(entity.name).\(property.name)")
                    continue
                }
                // A relationship made to lead to another entity: its values can't be carried
                // over (spec 0004 §4.5), so the model lacks it as much as a removed one. One
                // narrowed to a sub-entity of its destination keeps the references that name
                // the sub-entity's objects: the migration looks at them (and refuses one that
                // doesn't, unless removing is allowed).
                if let old = property.relationship, let now = same.relationship,
                    !keepsReferences(from: old.destinationEntityName, in: stored, to: now.destinationEntityName, in: model, renamed: renamed),
                    !stored.selfAndSubentityNames(of: old.destinationEntityName).contains(
                        renamed.first { $0.value == now.destinationEntityName }?.key ?? now.destinationEntityName)
                {
                    properties.append(
                        "\(entity.name).\(property.name) (to \(old.destinationEntityName); this model's \(counterpart.name).\(now.name) leads to \(now.destinationEntityName))")
                }
            }
        }
        return entities + properties
    }

    /// The newest stored model version whose migration wasn't refused (nil: none stored).
    private static func newestUsableVersion(_ environment: LMDBEnvironment, _ tables: StoreTables, _ catalog: Catalog) throws -> Int? {
        let versions = catalog.modelVersions
        return try environment.read { txn in
            for version in versions.reversed() where try txn.value(forKey: MetaKey.refusedModel(version), in: tables.meta) == nil {
                return version
            }
            return versions.last
        }
    }

    deinit { storeMonitor.shutdown() }

    /// The stored version that is `schema`'s model: the same version hash (`newest` is the
    /// newest version with it, which the `modelHash:` entry names) and shape. An older
    /// version with the hash is looked for too: apps of two models with one hash — one
    /// renaming back to the other's names, or other indexes — take turns opening the store,
    /// and each must open as its own version, not be stored again as a new, later one each
    /// time (which would migrate, or delete as removed, what the other wrote).
    private static func storedVersion(of schema: ModelSchema, newest: Int, in models: [Int: Data]) -> Int? {
        if sameShape(models[newest], schema) { return newest }
        let hash = schema.model.versionHash
        for (version, json) in models.sorted(by: { $0.key > $1.key }) where version < newest {
            guard let facts = storedFacts(json), facts.hash == hash, facts.shape == shape(of: schema) else { continue }
            return version
        }
        return nil
    }

    /// Whether the stored model file `json` defines the indexes, uniqueness constraints and
    /// renaming identifiers `schema` does (false when it doesn't load: it is stored again as a
    /// new version).
    static func sameShape(_ json: Data?, _ schema: ModelSchema) -> Bool {
        guard let json, let stored = storedFacts(json) else { return false }
        return stored.shape == shape(of: schema)
    }

    /// A stored model file's version hash and shape (nil when it doesn't load). Read once per
    /// process: parsing a model costs more than the rest of an open.
    static func storedFacts(_ json: Data) -> StoredFacts? {
        if let known = storedShapes.withLock({ $0[json] }) { return known }
        guard let model = try? ManagedObjectModel(jsonData: json) else { return nil }
        let facts = StoredFacts(hash: model.versionHash, shape: shape(of: ModelSchema(model: model)))
        storedShapes.withLock { $0[json] = facts }
        return facts
    }

    static func shape(of schema: ModelSchema) -> StoredShape {
        StoredShape(indexes: Set(schema.indexes), renamings: renamings(schema.model))
    }

    struct StoredFacts: Sendable {
        let hash: Data
        let shape: StoredShape
    }

    /// What a stored model version must share with an opening model besides its version
    /// hash to be the same version.
    struct StoredShape: Sendable, Hashable {
        let indexes: Set<ModelSchema.IndexDefinition>
        /// `Entity=identifier` and `Entity.property=identifier` for each renaming identifier.
        let renamings: Set<String>
    }

    static func renamings(_ model: ManagedObjectModel) -> Set<String> {
        var result: Set<String> = []
        for entity in model.entities {
            if let identifier = entity.renamingIdentifier { result.insert("\(entity.name)=\(identifier)") }
            for property in entity.properties {
                if let identifier = property.renamingIdentifier { result.insert("\(entity.name).\(property.name)=\(identifier)") }
            }
        }
        return result
    }

    /// The shapes of stored model files already read, by their JSON.
    static let storedShapes = Mutex<[Data: StoredFacts]>([:])

    /// Opens the environment at `path` with its main database only, and refuses it when that
    /// database holds a key that isn't one of the store's table names: another program's
    /// LMDB environment, which a writable open must not create tables in. An environment
    /// with no keys (a store whose creation stopped before its tables) or only the store's
    /// tables passes. Returns the open environment, for the open to share.
    private static func refusingForeignEnvironment(_ path: String, options: LMDBEnvironment.Options) throws -> LMDBEnvironment {
        let probe = try LMDBEnvironment(path: path, databases: [DatabaseDescriptor(nil)], options: options)
        guard let main = probe.unnamedDatabase else { return probe }
        let known = Set(StoreTables.names)
        var foreign: [String] = []
        var total = 0
        try probe.read { txn in
            try txn.forEach(in: main) { key, _ in
                let bytes = key.withUnsafeBytes { Array($0) }
                if let name = String(validating: bytes, as: UTF8.self), known.contains(name) { return .next }
                total += 1
                if foreign.count < 5 {
                    let printable = String(validating: bytes, as: UTF8.self).flatMap { text in
                        text.unicodeScalars.allSatisfy { $0.properties.isWhitespace == false && $0.value >= 0x20 && $0.value != 0x7F } ? text : nil
                    }
                    foreign.append(printable.map { "\"\($0)\"" } ?? "0x" + bytes.prefix(16).map { String(format: "%02x", $0) }.joined())
                }
                return .next
            }
        }
        guard foreign.isEmpty else {
            throw LogError.notAStore(
                "\(path) (its LMDB environment is another program's: its main database holds \(total) key(s) that aren't a Strata table, \(foreign.joined(separator: ", "))\(total > foreign.count ? ", …" : ""); nothing was written)")
        }
        return probe
    }

    private static func checkFormat(_ bytes: [UInt8]?, path: String) throws {
        guard let bytes, bytes.count == 4 else { throw LogError.notAStore("\(path) (no format version)") }
        let version = bytes.withUnsafeBytes { readBigEndian($0, count: 4) } ?? 0
        guard version <= UInt64(formatVersion) else {
            throw LogError.unsupportedFormatVersion(found: Int(version), supported: Int(formatVersion), context: "store \(path)")
        }
    }

    private static func uuid(_ b: [UInt8]) -> UUID {
        guard b.count == 16 else { return UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }

    // MARK: - Reading

    /// Runs `body` with a reader over one consistent snapshot of the store.
    public func read<R>(_ body: (borrowing LogReader) throws -> R) throws -> R {
        try environment.read { txn in
            let reader = LogReader(transaction: txn.makeAlias(), log: self)
            return try body(reader)
        }
    }

    /// Calls `body` with a reader of one consistent snapshot that sees the store as of
    /// `view`'s generation (Core Data's query generations): objects, entity scans, counts,
    /// relationships and index scans answer as they were just after that transaction; the
    /// log itself (events, history, the head) reads as it is. With a nil view, ``read(_:)``.
    ///
    /// The view first catches up with this snapshot's head (see ``GenerationView``).
    ///
    /// - Throws: what the view's catching up throws (a generation past the head, or before a
    ///   purge point), or what `body` throws.
    public func read<R>(pinnedTo view: GenerationView?, _ body: (borrowing LogReader) throws -> R) throws -> R {
        guard let view else { return try read(body) }
        return try environment.read { txn in
            try view.catchUp(LogReader(transaction: txn.makeAlias(), log: self))
            let reader = LogReader(transaction: txn.makeAlias(), log: self, view: view.isCurrent ? nil : view, generation: view.sequence)
            return try body(reader)
        }
    }

    /// The sequence number of the newest transaction (0 for an empty log).
    public var head: UInt64 {
        get throws { try read { reader in try reader.head } }
    }

    /// Store metadata: identity, format, model versions, timestamps, sizes.
    public var metadata: StoreMetadata {
        get throws {
            try read { reader in try reader.metadata() }
        }
    }

    /// Every model version the store has seen, as model file JSON, oldest first.
    public func storedModels() -> [(version: Int, json: Data)] {
        catalog.modelVersions.compactMap { v in catalog.modelJSON(version: v).map { (v, $0) } }
    }

    /// The model of a stored version.
    public func storedModel(version: Int) throws -> ManagedObjectModel {
        try catalog.schema(forModelVersion: version).model
    }
}

/// What `EventLog.metadata` reports about a store.
public struct StoreMetadata: Sendable, Hashable {
    /// The store's UUID.
    public let storeUUID: UUID
    /// The on-disk format version.
    public let formatVersion: Int
    /// When the store was created.
    public let createdAt: Date
    /// When it was last opened writable.
    public let openedAt: Date
    /// The newest sequence number.
    public let head: UInt64
    /// The highest sequence moved into segments (0: none).
    public let compactedThrough: UInt64
    /// The last sequence removed by a purge (0: nothing purged); the log starts after it, from
    /// the base snapshot as of it.
    public let purgedThrough: UInt64
    /// The stored model versions, oldest first.
    public let modelVersions: [Int]
    /// The stored versions whose migration was refused and that haven't opened since (spec
    /// 0004 §4.3): the store's data isn't in their terms.
    public let refusedModelVersions: [Int]
    /// The version opens without a model (tools) and read-only opens use: the newest one not
    /// refused (0: none stored).
    public var modelVersionInUse: Int {
        modelVersions.last { !refusedModelVersions.contains($0) } ?? modelVersions.last ?? 0
    }
}

/// The rows a writable open wrote to an existing store's `meta`, `models` and `catalog`
/// tables, with what they held before: taken back when the open's migration is refused
/// (spec 0004 §4.3).
struct OpenWrites: Sendable {
    enum Table: Sendable {
        case meta, models

        func database(_ tables: StoreTables) -> LMDBDatabase {
            switch self {
            case .meta: tables.meta
            case .models: tables.models
            }
        }
    }

    struct Row: Sendable {
        let table: Table
        let key: [UInt8]
        let old: [UInt8]?
        let new: [UInt8]
        /// Written for the model version the open stored (taken back with it), not for the
        /// open as such (the opened-at time).
        let ofVersion: Bool
    }

    var rows: [Row] = []
    /// The codes the open gave (kind, name, code).
    var codes: [(Catalog.Kind, String, UInt16)] = []

    /// What the open wrote, as a failed take-back names it (spec 0004 §4.3): "the opened-at
    /// time", "the format version", "the sides marked to fill", another `meta` key by name,
    /// a model row, the catalog codes given.
    var described: String {
        var names: [String] = []
        for row in rows {
            let name: String
            switch (row.table, row.key) {
            case (.meta, MetaKey.openedAt): name = "the opened-at time"
            case (.meta, MetaKey.formatVersion): name = "the format version it raised"
            case (.meta, MetaKey.orderedSidesToFill): name = "the sides it marked to fill"
            case (.meta, _): name = "meta \(String(decoding: row.key, as: UTF8.self))"
            case (.models, _): name = "a model row"
            }
            if !names.contains(name) { names.append(name) }
        }
        if !codes.isEmpty { names.append("the catalog codes it gave") }
        return names.isEmpty ? "nothing" : names.joined(separator: ", ")
    }

    /// Puts `value` under `key`, remembering what was there when it differs.
    mutating func put(
        _ value: [UInt8], forKey key: [UInt8], in table: Table, _ txn: borrowing LMDBTransaction, _ tables: StoreTables, ofVersion: Bool = false
    ) throws {
        let database = table.database(tables)
        let old = try txn.value(forKey: key, in: database)
        if old != value { rows.append(Row(table: table, key: key, old: old, new: value, ofVersion: ofVersion)) }
        try txn.put(value, forKey: key, in: database)
    }
}
