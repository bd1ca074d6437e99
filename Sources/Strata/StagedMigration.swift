import Foundation
public import StrataModel
#if canImport(Glibc)
import Glibc
#endif
import StrataLog
import Synchronization

/// One stage of a staged migration (Core Data's `NSMigrationStage`): a run of model versions
/// the store moves through by inferred (lightweight) migration, or one step between two
/// versions with code before and after it.
public enum MigrationStage: Sendable {
    /// Each model migrates to the next one listed, and the last to the next stage's first
    /// model (Core Data's `NSLightweightMigrationStage`, which lists version checksums).
    case lightweight([ManagedObjectModel])
    /// A step from one model version to the next with handlers (`NSCustomMigrationStage`).
    case custom(CustomMigrationStage)
}

/// A migration step from one model version to the next, with code that runs before and
/// after the store's data moves (Core Data's `NSCustomMigrationStage`).
///
/// The move itself is the inferred migration of spec 0004 §4.3–4.6. `willMigrateHandler`
/// runs with the store open at ``currentModel``: it can change the data so the inferred
/// migration can take it over (clamp values a narrower type can't hold, fill a value an
/// attribute about to become mandatory needs). `didMigrateHandler` runs with the store open
/// at ``nextModel``: it can fill what the new version added from what it kept (split a name
/// into its parts). Each handler reaches the store through the manager's
/// ``StagedMigrationManager/container``, and saves what it changes:
///
/// ```swift
/// let split = CustomMigrationStage(migratingFrom: v1, to: v2, label: "split names")
/// split.didMigrateHandler = { manager, _ in
///     guard let context = manager.container?.newBackgroundContext() else { return }
///     try context.performAndWait { context in
///         for person in try context.fetch(try FetchRequest(entityName: "Person", format: "firstName == nil")) { ... }
///         try context.save()
///     }
/// }
/// description.stagedMigrationManager = StagedMigrationManager([.lightweight([v0, v1]), .custom(split)])
/// ```
///
/// A handler may run again (spec 0006 §19.6): after it throws, or after a crash, the next add
/// runs the step's handlers again, and after an earlier app wrote to the migrated store the
/// steps run again over objects later versions wrote — so write handlers to do no harm
/// twice, filling only what is missing.
public final class CustomMigrationStage: Sendable, CustomStringConvertible {
    /// A handler: the manager (whose ``StagedMigrationManager/container`` is open at the
    /// stage's model) and the stage.
    public typealias Handler = @Sendable (StagedMigrationManager, CustomMigrationStage) throws -> Void

    /// The model version the step starts from (`currentModel`).
    public let currentModel: ManagedObjectModel
    /// The model version the step migrates to (`nextModel`).
    public let nextModel: ManagedObjectModel
    /// A name for the stage, used in errors (`label`).
    public let label: String

    private struct Handlers {
        var willMigrate: Handler?
        var didMigrate: Handler?
    }
    private let handlers = Mutex(Handlers())

    /// A step from `currentModel` to `nextModel` (`init(migratingFrom:to:)`).
    public init(migratingFrom currentModel: ManagedObjectModel, to nextModel: ManagedObjectModel, label: String = "") {
        self.currentModel = currentModel
        self.nextModel = nextModel
        self.label = label
    }

    /// Runs with the store open at ``currentModel``, before its data migrates to
    /// ``nextModel`` (`willMigrateHandler`). Throwing stops the migration: the store keeps
    /// what the handler saved, and nothing more.
    public var willMigrateHandler: Handler? {
        get { handlers.withLock { $0.willMigrate } }
        set { handlers.withLock { $0.willMigrate = newValue } }
    }

    /// Runs with the store open at ``nextModel``, after its data migrated
    /// (`didMigrateHandler`). Throwing fails the add; the next add runs it again.
    public var didMigrateHandler: Handler? {
        get { handlers.withLock { $0.didMigrate } }
        set { handlers.withLock { $0.didMigrate = newValue } }
    }

    /// `custom stage "LABEL"`, or `custom stage` without a label.
    public var description: String { label.isEmpty ? "custom stage" : "custom stage \(JSONText.quoted(label))" }
}

/// Migrates a store through model versions in order, running code between them (Core Data's
/// `NSStagedMigrationManager`). Set it on the store's ``PersistentStoreDescription``
/// (``PersistentStoreDescription/stagedMigrationManager``); adding the store runs the stages
/// the store hasn't been through (spec 0006 §19.6).
///
/// The stages list the model versions in the order the store moves through them; the
/// coordinator's model comes last (listed or not). Adding a store finds its newest model
/// version among them and migrates from there (from the version that wrote last, when an
/// earlier app wrote what the newest can't take over), one version at a time — a custom stage's
/// handlers around its step, inferred migration alone for the others. A store at none of
/// them is refused (``PersistentStoreError/migrationFailed(path:reason:)``), unless a later
/// model than the coordinator's wrote it (it then opens as without stages).
///
/// One manager migrates one store at a time, and a store migrates through one manager at a
/// time, in any process: a second add waits, and finds the store migrated.
public final class StagedMigrationManager: Sendable {
    /// The stages, in order (`stages`).
    public let stages: [MigrationStage]

    private let current = Mutex<PersistentContainer?>(nil)
    private let running = Mutex(())

    /// A manager for `stages` (`init(_:)`).
    public init(_ stages: [MigrationStage]) {
        self.stages = stages
    }

    /// The container open at the model of the handler running (`container`): its
    /// coordinator's model is the stage's current model in a `willMigrateHandler`, its next
    /// model in a `didMigrateHandler`. Nil outside a handler.
    public var container: PersistentContainer? { current.withLock { $0 } }

    /// Runs `body` as the only migration of this manager, with `container` current while a
    /// handler runs.
    func exclusively<T>(_ body: () throws -> T) throws -> T {
        try running.withLock { _ in try body() }
    }

    func setContainer(_ container: PersistentContainer?) {
        current.withLock { $0 = container }
    }
}

// MARK: - Running the stages

/// The model versions a manager goes through, and the custom stage of each step.
struct MigrationPlan {
    /// In order; the coordinator's model last.
    var models: [ManagedObjectModel] = []
    /// Step `i` (from `models[i]` to `models[i + 1]`) → its custom stage.
    var custom: [Int: CustomMigrationStage] = [:]

    /// The plan of `stages` ending at `finalModel`.
    ///
    /// - Throws: ``PersistentStoreError/invalidDescription(_:)`` for stages that don't make one
    ///   path: an empty lightweight stage, a custom stage from a model to the same version, the
    ///   coordinator's model before other versions, a model version met twice (two custom
    ///   stages for one step among them).
    init(_ stages: [MigrationStage], finalModel: ManagedObjectModel) throws {
        func append(_ model: ManagedObjectModel) {
            if let last = models.last, EventLog.isSameVersion(last, model) { return }
            models.append(model)
        }
        for (position, stage) in stages.enumerated() {
            switch stage {
            case .lightweight(let list):
                guard !list.isEmpty else {
                    throw PersistentStoreError.invalidDescription("the staged migration's stage \(position + 1) (lightweight) lists no models")
                }
                list.forEach(append)
            case .custom(let stage):
                guard !EventLog.isSameVersion(stage.currentModel, stage.nextModel) else {
                    throw PersistentStoreError.invalidDescription(
                        "the staged migration's stage \(position + 1) (\(stage)) migrates from a model version to the same version")
                }
                append(stage.currentModel)
                append(stage.nextModel)
                custom[models.count - 2] = stage
            }
        }
        append(finalModel)
        // The coordinator's own model, when a stage lists one of its version: what the hash
        // leaves out (defaults, validation, delete rules) is the coordinator's to say.
        models[models.count - 1] = finalModel
        // The coordinator's model met before the end: the stages go past it — most likely the
        // app's current model version was left at an older one.
        if let early = models.dropLast().firstIndex(where: { EventLog.isSameVersion($0, finalModel) }) {
            let after = models[(early + 1)..<(models.count - 1)].map(Self.name(of:))
            throw PersistentStoreError.invalidDescription(
                "the staged migration lists the coordinator's model version, \(Self.name(of: finalModel)), as model \(early + 1) of \(models.count), and version\(after.count == 1 ? "" : "s") \(after.joined(separator: ", ")) after it: the stages end at the coordinator's model (is it the newest version?)")
        }
        for i in models.indices {
            for j in models.indices where j > i && EventLog.isSameVersion(models[i], models[j]) {
                throw PersistentStoreError.invalidDescription(
                    "the staged migration meets model version \(Self.name(of: models[i])) twice (as model \(i + 1) and model \(j + 1) of \(models.count), counting the coordinator's last): a store goes through each version once")
            }
        }
    }

    /// How errors name a model: its version identifiers, else its version hash's first bytes.
    static func name(of model: ManagedObjectModel) -> String {
        if !model.versionIdentifiers.isEmpty { return model.versionIdentifiers.sorted().joined(separator: ", ") }
        return "#" + lowercaseHex(model.versionHash.prefix(6))
    }

    /// `from MODEL (model i of n) to MODEL (model i+1 of n)`.
    func describeStep(_ step: Int) -> String {
        let stage = custom[step].map { " (\($0))" } ?? ""
        return "the step from model version \(Self.name(of: models[step])) (\(step + 1) of \(models.count)) to \(Self.name(of: models[step + 1]))\(stage)"
    }
}

/// The marker a step with a `didMigrateHandler` leaves in the store while it runs
/// (spec 0006 §19.6).
struct StagedMigrationMarker: Codable, Equatable {
    /// The step's index in the plan (recorded, not compared: see ``names(step:of:)``).
    var step: Int
    /// The step's target model's version hash, hex.
    var target: String
    /// The custom stage's label.
    var label: String

    init(step: Int, plan: MigrationPlan) {
        self.step = step
        target = Self.hex(plan.models[step + 1].versionHash)
        label = plan.custom[step]?.label ?? ""
    }

    init?(bytes: [UInt8]) {
        guard let marker = try? JSONDecoder().decode(Self.self, from: Data(bytes)) else { return nil }
        self = marker
    }

    var bytes: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return Array((try? encoder.encode(self)) ?? Data())
    }

    /// Whether it names step `step` of `plan`: a step to the same target version hash, of a
    /// stage with the same label. The index is left out (an app update may list versions
    /// before the step, moving it, and its unfinished didMigrate handler must still run) but
    /// where two steps of the plan are alike that way (targets an index apart share a version
    /// hash, spec 0006 §19.6): then it names the one at its index, when that is one of them
    /// (before, a record of the second named the first, whose didMigrate ran again).
    func names(step: Int, of plan: MigrationPlan) -> Bool {
        func alike(_ other: Int) -> Bool {
            let expected = StagedMigrationMarker(step: other, plan: plan)
            return target == expected.target && label == expected.label
        }
        guard alike(step) else { return false }
        let candidates = plan.models.indices.dropLast().filter(alike)
        if candidates.count > 1, candidates.contains(self.step) { return self.step == step }
        return true
    }

    static func hex(_ data: Data) -> String { lowercaseHex(data) }
}

extension PersistentStoreCoordinator {
    /// Runs `manager`'s stages the event-log store at `url` hasn't been through, leaving it
    /// at this coordinator's model (spec 0006 §19.6), for the add that follows to open. The
    /// whole migration holds the manager and the store's staged-migration lock
    /// (``StagedMigrationLocks``), so another add of the store, through any manager and in
    /// any process, finds it migrated. A store that doesn't exist yet has nothing to
    /// migrate (the stages are checked all the same).
    ///
    /// - Throws: ``PersistentStoreError/migrationFailed(path:reason:)`` naming the step for a
    ///   store at none of the stages' models, a handler that threw, a step's migration that
    ///   was refused; ``PersistentStoreError/invalidDescription(_:)`` for stages that don't
    ///   make one path.
    func runStagedMigration(_ manager: StagedMigrationManager, storeAt url: URL, configuration: EventLog.Configuration) throws {
        let path = try Self.storePath(of: url)
        // Checked for every add, a new store's too: a plan that doesn't make one path is a
        // mistake in the app, which a store to migrate mustn't be the first to show.
        let plan = try MigrationPlan(manager.stages, finalModel: managedObjectModel)
        guard FileManager.default.fileExists(atPath: (path as NSString).appendingPathComponent("data.mdb")) else { return }
        // A handler's add of this store, or through this manager, on the handler's thread
        // would wait for the migration it runs in.
        let entered = ["store " + StagedMigrationLocks.key(path), "manager \(ObjectIdentifier(manager).hashValue)"]
        guard StagedMigrationLocks.enter(entered) else {
            throw PersistentStoreError.migrationFailed(
                path: path,
                reason: "a staged migration handler added the store it is migrating, or a store through the same manager: the add would wait for the migration it runs in; reach the store through the manager's container instead; nothing was changed")
        }
        defer { StagedMigrationLocks.leave(entered) }
        try manager.exclusively { try StagedMigrationLocks.withLock(path: path) {
            // The store's newest model version (whose migration wasn't refused), read without
            // writing. A store that doesn't open fails the add here: skipping the stages would
            // let the add's own open migrate past their handlers.
            let probe: (index: Int?, isLater: Bool, marker: StagedMigrationMarker?, headIndex: Int?, newest: String)
            do {
                let log = try EventLog(openingExistingAt: path, readOnly: true)
                let index = plan.models.firstIndex { EventLog.isSameVersion($0, log.model) }
                let finalVersion = try log.storedVersion(matching: managedObjectModel)
                // The plan model the last transaction was written with, when it isn't the newest.
                let head = log.headEventModel().flatMap { model in
                    EventLog.isSameVersion(model, log.model) ? nil : plan.models.firstIndex { EventLog.isSameVersion($0, model) }
                }
                probe = (index, finalVersion.map { $0 < log.modelVersion } ?? false,
                         try log.stagedMigrationMarker().flatMap(StagedMigrationMarker.init(bytes:)), head, MigrationPlan.name(of: log.model))
            } catch LogError.notAStore(let detail) {
                throw PersistentStoreError.notAStore(path: path, reason: detail)
            }
            guard var step = probe.index else {
                if probe.isLater { return }
                throw PersistentStoreError.migrationFailed(
                    path: path,
                    reason: "its newest model version, \(probe.newest), is none of the staged migration's \(plan.models.count) model versions (\(plan.models.map(MigrationPlan.name(of:)).joined(separator: ", ")), the coordinator's last), so the stages can't say how to migrate it; nothing was changed")
            }
            // An earlier app wrote after the store reached its newest version (an earlier model
            // may open a later store, spec 0004 §4.3): the newest version's open migrates what
            // it wrote. When that is refused — what the app wrote needs the handlers — the
            // steps run again from the version that wrote it.
            if let headIndex = probe.headIndex, headIndex < step {
                do {
                    _ = try EventLog(path: path, model: plan.models[step], configuration: configuration)
                } catch LogError.migration(_), LogError.uniquenessViolation(_, _, _, _), LogError.derivation(_) {
                    step = headIndex
                }
            }
            // A step whose didMigrate handler didn't finish: its migration is done when the
            // store is at its target.
            if let marker = probe.marker {
                if step > 0, marker.names(step: step - 1, of: plan) {
                    try runHandler(\.didMigrateHandler, of: step - 1, plan: plan, manager: manager, url: url, configuration: configuration)
                }
                // Done, or naming a step that didn't migrate (or another plan's): it goes.
                try clearMarker(path: path, model: plan.models[step], configuration: configuration)
            }
            while step < plan.models.count - 1 {
                let stage = plan.custom[step]
                if stage?.willMigrateHandler != nil {
                    try runHandler(\.willMigrateHandler, of: step, plan: plan, manager: manager, url: url, configuration: configuration)
                }
                if stage?.didMigrateHandler != nil {
                    let log = try openLog(path: path, model: plan.models[step], configuration: configuration, plan: plan, step: step)
                    try log.setStagedMigrationMarker(StagedMigrationMarker(step: step, plan: plan).bytes)
                }
                // The last step too (the add then opens the store at its model, migrating
                // nothing): under the lock, and refused with the step named.
                _ = try openLog(path: path, model: plan.models[step + 1], configuration: configuration, plan: plan, step: step)
                if stage?.didMigrateHandler != nil {
                    try runHandler(\.didMigrateHandler, of: step, plan: plan, manager: manager, url: url, configuration: configuration)
                    try clearMarker(path: path, model: plan.models[step + 1], configuration: configuration)
                }
                step += 1
            }
        } }
    }

    /// Opens the store at `model` (migrating it there), with errors naming the step: a
    /// migration refused — for values it can't take over, a uniqueness constraint the
    /// store's values break, a derived value that doesn't fit — is `migrationFailed`.
    private func openLog(
        path: String, model: ManagedObjectModel, configuration: EventLog.Configuration, plan: MigrationPlan, step: Int
    ) throws -> EventLog {
        // The plan names the store's model version and the next: a step may drop entities or
        // properties (spec 0004 §4.7), as the app's model versions in a Core Data bundle allow.
        var configuration = configuration
        configuration.allowsRemovingEntitiesAndProperties = true
        do {
            return try EventLog(path: path, model: model, configuration: configuration)
        } catch LogError.migration(let reason) {
            throw PersistentStoreError.migrationFailed(path: path, reason: "staged migration, \(plan.describeStep(step)): \(reason)")
        } catch let error as LogError {
            switch error {
            case .uniquenessViolation, .derivation:
                throw PersistentStoreError.migrationFailed(path: path, reason: "staged migration, \(plan.describeStep(step)): \(error)")
            default:
                throw error
            }
        }
    }

    private func clearMarker(path: String, model: ManagedObjectModel, configuration: EventLog.Configuration) throws {
        try EventLog(path: path, model: model, configuration: configuration).setStagedMigrationMarker(nil)
    }

    /// Runs step `step`'s custom stage's handler at `handler` with a container at the
    /// step's model for it (its current model before the move, its next one after).
    private func runHandler(
        _ handler: KeyPath<CustomMigrationStage, CustomMigrationStage.Handler?>, of step: Int, plan: MigrationPlan,
        manager: StagedMigrationManager, url: URL, configuration: EventLog.Configuration
    ) throws {
        guard let stage = plan.custom[step], let body = stage[keyPath: handler] else { return }
        let isWill = handler == \CustomMigrationStage.willMigrateHandler
        let model = plan.models[isWill ? step : step + 1]
        let container = PersistentContainer(name: "StagedMigration", managedObjectModel: model, storeURL: url)
        container.persistentStoreDescriptions = [PersistentStoreDescription(url: url, type: .eventLog, logConfiguration: configuration)]
        for (entity, type) in registeredClasses { container.persistentStoreCoordinator.register(type, forEntityName: entity) }
        do {
            try container.loadPersistentStores()
        } catch PersistentStoreError.migrationFailed(_, let reason) {
            throw PersistentStoreError.migrationFailed(path: url.path, reason: "staged migration, \(plan.describeStep(step)): \(reason)")
        }
        manager.setContainer(container)
        defer {
            manager.setContainer(nil)
            for store in container.persistentStoreCoordinator.persistentStores { try? container.persistentStoreCoordinator.remove(store) }
        }
        do {
            try body(manager, stage)
        } catch {
            throw PersistentStoreError.migrationFailed(
                path: url.path,
                reason: "staged migration, \(plan.describeStep(step)): its \(isWill ? "willMigrateHandler" : "didMigrateHandler") threw: \(error)"
                    + (isWill ? "; the store keeps what the handler saved and wasn't migrated further" : "; the store is migrated to \(MigrationPlan.name(of: model)), and the next add runs the handler again"))
        }
    }
}

/// The staged migrations of a store, one at a time whichever manager and process runs them
/// (spec 0006 §19.6): two containers of an app, each with its own manager, or an app and its
/// extension, adding one store at once would otherwise both run the handlers, at the same
/// time (their saves then conflict, failing one add).
enum StagedMigrationLocks {
    /// A lock per store directory (standardized, symbolic links resolved); kept for the
    /// process's life, one per store.
    private static let locks = Mutex<[String: NSLock]>([:])
    /// What each thread is migrating (``enter(_:)``): stores and managers, by thread.
    private static let running = Mutex<[ObjectIdentifier: Set<String>]>([:])

    /// The key of the store at `path`: its directory, standardized, symbolic links resolved.
    static func key(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
    }

    /// Records that this thread migrates `items` (a store's key, a manager); false, recording
    /// nothing, when it already migrates one of them — a handler adding it again.
    static func enter(_ items: [String]) -> Bool {
        let thread = ObjectIdentifier(Thread.current)
        return running.withLock { running in
            guard running[thread, default: []].isDisjoint(with: items) else { return false }
            running[thread, default: []].formUnion(items)
            return true
        }
    }

    /// Undoes ``enter(_:)``.
    static func leave(_ items: [String]) {
        let thread = ObjectIdentifier(Thread.current)
        running.withLock { running in
            running[thread]?.subtract(items)
            if running[thread]?.isEmpty == true { running[thread] = nil }
        }
    }

    /// Runs `body` holding the lock of the store at `path`: this process's lock of the
    /// store, then an exclusive `flock` on its `data.mdb` for other processes (a `flock`
    /// lock, apart from LMDB's `fcntl` locks on `lock.mdb`; released when the descriptor
    /// closes, so a crash releases it too). A `data.mdb` that doesn't open is locked in
    /// this process only: the store's open then reports what is wrong.
    static func withLock<T>(path: String, _ body: () throws -> T) throws -> T {
        let key = key(path)
        let lock = locks.withLock { locks in
            if let lock = locks[key] { return lock }
            let lock = NSLock()
            locks[key] = lock
            return lock
        }
        lock.lock()
        defer { lock.unlock() }
        let descriptor = open((key as NSString).appendingPathComponent("data.mdb"), O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return try body() }
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else { return try body() }
        }
        return try body()
    }
}
