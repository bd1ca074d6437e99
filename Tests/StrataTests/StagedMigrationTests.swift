import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Synchronization
import Testing

/// Staged migration (spec 0006 §19.6, Core Data's `NSStagedMigrationManager`): a store
/// moves through model versions in order, with code before and after a step, for the
/// changes inferred migration can't make alone.
@Suite("Contexts: staged migration")
struct StagedMigrationTests {
    /// The handlers that ran, in order.
    final class Calls: Sendable {
        private let calls = Mutex<[String]>([])
        func record(_ call: String) { calls.withLock { $0.append(call) } }
        var all: [String] { calls.withLock { $0 } }
    }

    static func storeURL(_ dir: TemporaryDirectory) -> URL { dir.url.appendingPathComponent("store") }

    /// A container for `model` at `dir`'s store, loaded with `manager`.
    static func load(
        _ dir: TemporaryDirectory, _ model: ManagedObjectModel, _ manager: StagedMigrationManager? = nil, removing: Bool = false
    ) throws -> PersistentContainer {
        let container = PersistentContainer(name: "People", managedObjectModel: model, storeURL: storeURL(dir))
        container.persistentStoreDescriptions.first?.stagedMigrationManager = manager
        // A model that drops properties of the store's migrates only when allowed (spec 0004 §4.7).
        if removing, let description = container.persistentStoreDescriptions.first {
            var configuration = description.logConfiguration
            configuration.allowsRemovingEntitiesAndProperties = true
            description.logConfiguration = configuration
        }
        try container.loadPersistentStores()
        return container
    }

    /// Inserts one `entity` object per value set, saved.
    static func insert(_ container: PersistentContainer, _ entity: String, _ rows: [[String: any Sendable]]) throws {
        try container.newBackgroundContext().performAndWait { context in
            for row in rows {
                let object = try context.insertNewObject(forEntityName: entity)
                for (key, value) in row { object.setValue(value, forKey: key) }
            }
            try context.save()
        }
    }

    /// `key`'s values of every `entity` object, sorted by `sortKey`.
    static func values(_ container: PersistentContainer, _ entity: String, _ keys: [String], sortedBy sortKey: String) throws -> [[String]] {
        try container.newBackgroundContext().performAndWait { context in
            let request = FetchRequest(entityName: entity, sortDescriptors: [FetchSortDescriptor(key: sortKey)])
            return try context.fetch(request).map { object in keys.map { key in object.value(forKey: key).map { "\($0)" } ?? "nil" } }
        }
    }

    // MARK: - Models

    /// A one-entity model with the version identifier `identifier` (an empty model, failing
    /// the tests that use it, if it doesn't build).
    static func version(_ identifier: String, _ entity: EntityDescription) -> ManagedObjectModel {
        (try? ManagedObjectModel(entities: [entity], versionIdentifiers: [identifier])) ?? ManagedObjectModel()
    }

    static let v1People = version("1", Entity("Person") { Attribute("name", .string).required().providedAtInsert() })
    static let v2People = version("2", Entity("Person") { Attribute("name", .string); Attribute("firstName", .string); Attribute("lastName", .string) })
    static let v3People = version("3", Entity("Person") { Attribute("firstName", .string).required().providedAtInsert(); Attribute("lastName", .string).required().providedAtInsert() })

    /// The stage from `v1People` to `v2People` whose didMigrate handler splits each name.
    static func splitStage(_ calls: Calls) -> CustomMigrationStage {
        let stage = CustomMigrationStage(migratingFrom: v1People, to: v2People, label: "split names")
        stage.didMigrateHandler = { manager, stage in
            calls.record("did \(stage.label)")
            let container = try #require(manager.container)
            #expect(container.managedObjectModel.versionIdentifiers == ["2"], "didMigrate runs at the next model")
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: container.persistentStoreCoordinator, transactionAuthor: "split")
            try context.performAndWait { context in
                for person in try context.fetch(FetchRequest(entityName: "Person")) {
                    let parts = (person.value(forKey: "name") as? String ?? "").split(separator: " ", maxSplits: 1).map(String.init)
                    person.setValue(parts.first ?? "", forKey: "firstName")
                    person.setValue(parts.count > 1 ? parts[1] : "", forKey: "lastName")
                }
                try context.save()
            }
        }
        return stage
    }

    @Test("a name split into first and last names between two versions (Core Data's staged migration example): the didMigrate handler fills the new attributes, the next version drops the old one and makes them mandatory; inferred migration alone is refused; the stages don't run again")
    func splitNames() throws {
        let dir = try TemporaryDirectory()
        try Self.insert(try Self.load(dir, Self.v1People), "Person", [["name": "Ada Lovelace"], ["name": "Grace Brewster Hopper"], ["name": "Plato"]])

        // v3 drops name: refused as lacking it (spec 0004 §4.7); allowed, the inferred
        // migration is refused for the mandatory attributes it can't fill.
        #expect {
            _ = try Self.load(dir, Self.v3People)
        } throws: { error in
            (error as? PersistentStoreError)?.code == 134_100 && "\(error)".contains("Person.name")
        }
        #expect {
            _ = try Self.load(dir, Self.v3People, removing: true)
        } throws: { error in
            (error as? PersistentStoreError)?.code == 134_110 && "\(error)".contains("Person.firstName is mandatory and has no default value")
        }

        let calls = Calls()
        let manager = StagedMigrationManager([.custom(Self.splitStage(calls))])
        let container = try Self.load(dir, Self.v3People, manager)
        #expect(calls.all == ["did split names"])
        #expect(manager.container == nil, "the manager's container is there only while a handler runs")
        #expect(try Self.values(container, "Person", ["firstName", "lastName"], sortedBy: "firstName")
            == [["Ada", "Lovelace"], ["Grace", "Brewster Hopper"], ["Plato", ""]])

        let history = try container.persistentStoreCoordinator.history(HistoryRequest())
        #expect(history.map(\.kind) == [.save, .save, .migration, .migration],
                "the names, the handler's save at v2 (v1 → v2 writes nothing), v3's take-out of name and its migration")
        #expect(history[1].author == "split")
        let log = try #require(container.persistentStoreCoordinator.persistentStores.first?.log)
        #expect(log.storedModels().map { (try? ManagedObjectModel(jsonData: $0.json))?.versionIdentifiers ?? [] } == [["1"], ["2"], ["3"]],
                "v3, refused before v2 was stored, was taken back (spec 0004 §4.3), and is stored after it")
        #expect(try EventLog(openingExistingAt: Self.storeURL(dir).path).model.versionIdentifiers == ["3"], "tools open the store at v3")
        let names = try (1...3).map { key in try log.read { try $0.object(StoredObjectID(entity: "Person", primaryKey: UInt64(key)), asOf: 1)?["name"] } }
        #expect(Set(names) == [LogValue.attribute(.string("Ada Lovelace")), LogValue.attribute(.string("Grace Brewster Hopper")), LogValue.attribute(.string("Plato"))],
                "history keeps the names as they were")

        let again = try Self.load(dir, Self.v3People, manager)
        #expect(calls.all == ["did split names"], "a store at the last model runs no stage")
        #expect(try Self.values(again, "Person", ["firstName"], sortedBy: "firstName").count == 3)
    }
}

extension StagedMigrationTests {
    static let v1Scores = version("scores 1", Entity("Player") { Attribute("name", .string); Attribute("score", .int64) })
    static let v2Scores = version("scores 2", Entity("Player") { Attribute("name", .string); Attribute("score", .int16) })

    /// The stage narrowing `score` whose willMigrate handler clamps scores into `int16`.
    static func clampStage(_ calls: Calls) -> CustomMigrationStage {
        let stage = CustomMigrationStage(migratingFrom: v1Scores, to: v2Scores, label: "clamp")
        stage.willMigrateHandler = { manager, stage in
            calls.record("will \(stage.label)")
            let container = try #require(manager.container)
            #expect(container.managedObjectModel.versionIdentifiers == ["scores 1"], "willMigrate runs at the current model")
            try container.newBackgroundContext().performAndWait { context in
                for player in try context.fetch(FetchRequest(entityName: "Player")) {
                    let score = player.value(forKey: "score") as? Int64 ?? 0
                    player.setValue(min(max(score, Int64(Int16.min)), Int64(Int16.max)), forKey: "score")
                }
                try context.save()
            }
        }
        return stage
    }

    @Test("a narrower type: the willMigrate handler clamps the values that wouldn't convert, at the old model, and the migration then takes them over; as-of before keeps the old values")
    func clampBeforeNarrowing() throws {
        let dir = try TemporaryDirectory()
        try Self.insert(try Self.load(dir, Self.v1Scores), "Player", [
            ["name": "a", "score": Int64(5)], ["name": "b", "score": Int64(70_000)], ["name": "c", "score": Int64(-40_000)],
        ])
        #expect(throws: PersistentStoreError.self) { _ = try Self.load(dir, Self.v2Scores) }

        let calls = Calls()
        let container = try Self.load(dir, Self.v2Scores, StagedMigrationManager([.custom(Self.clampStage(calls))]))
        #expect(calls.all == ["will clamp"])
        #expect(try Self.values(container, "Player", ["score"], sortedBy: "name") == [["5"], ["32767"], ["-32768"]])
        let log = try #require(container.persistentStoreCoordinator.persistentStores.first?.log)
        #expect(try log.read { try $0.object(StoredObjectID(entity: "Player", primaryKey: 2), asOf: 1)?["score"] } == LogValue.attribute(.int64(70_000)))
    }

    @Test("a willMigrate handler that throws fails the add with the migration error naming the step and the handler's error; the store opens at its model as before, nothing written; a didMigrate handler that throws runs again at the next add, and only it")
    func throwingHandlers() throws {
        struct Refusal: Error, CustomStringConvertible { var description: String { "not today" } }
        let dir = try TemporaryDirectory()
        try Self.insert(try Self.load(dir, Self.v1Scores), "Player", [["name": "a", "score": Int64(70_000)]])
        let headBefore = try EventLog(openingExistingAt: Self.storeURL(dir).path).head

        let refusing = CustomMigrationStage(migratingFrom: Self.v1Scores, to: Self.v2Scores, label: "refuse")
        refusing.willMigrateHandler = { _, _ in throw Refusal() }
        #expect {
            _ = try Self.load(dir, Self.v2Scores, StagedMigrationManager([.custom(refusing)]))
        } throws: { error in
            let text = "\(error)"
            return (error as? PersistentStoreError)?.code == 134_110 && text.contains("custom stage \"refuse\"")
                && text.contains("its willMigrateHandler threw: not today") && text.contains("from model version scores 1")
        }
        #expect(try EventLog(openingExistingAt: Self.storeURL(dir).path).head == headBefore)
        #expect(try Self.values(try Self.load(dir, Self.v1Scores), "Player", ["score"], sortedBy: "name") == [["70000"]])

        // The clamp runs, the store migrates, then didMigrate throws once.
        let calls = Calls()
        let stage = Self.clampStage(calls)
        let failures = Mutex(1)
        stage.didMigrateHandler = { _, _ in
            calls.record("did")
            if failures.withLock({ failures in defer { failures -= 1 }; return failures > 0 }) { throw Refusal() }
        }
        let manager = StagedMigrationManager([.custom(stage)])
        #expect {
            _ = try Self.load(dir, Self.v2Scores, manager)
        } throws: { error in
            "\(error)".contains("its didMigrateHandler threw: not today; the store is migrated to scores 2, and the next add runs the handler again")
        }
        #expect(calls.all == ["will clamp", "did"])
        #expect(try EventLog(openingExistingAt: Self.storeURL(dir).path).stagedMigrationMarker() != nil)
        let container = try Self.load(dir, Self.v2Scores, manager)
        #expect(calls.all == ["will clamp", "did", "did"], "only the unfinished didMigrate runs again")
        #expect(try Self.values(container, "Player", ["score"], sortedBy: "name") == [["32767"]])
        _ = try Self.load(dir, Self.v2Scores, manager)
        #expect(calls.all == ["will clamp", "did", "did"], "once it finished, nothing runs again")
    }

    @Test("a step whose migration is refused after its willMigrate handler saved: the add fails naming the step; the next add, with a handler that fixes the data, runs the step from its start and its didMigrate once")
    func refusedStepRunsAgain() throws {
        let dir = try TemporaryDirectory()
        try Self.insert(try Self.load(dir, Self.v1Scores), "Player", [["name": "a", "score": Int64(70_000)]])
        let calls = Calls()
        let lax = CustomMigrationStage(migratingFrom: Self.v1Scores, to: Self.v2Scores, label: "lax")
        lax.willMigrateHandler = { manager, _ in
            calls.record("will lax")
            try #require(manager.container).newBackgroundContext().performAndWait { context in
                let player = try #require(try context.fetch(FetchRequest(entityName: "Player")).first)
                player.setValue("renamed", forKey: "name")
                try context.save()
            }
        }
        lax.didMigrateHandler = { _, _ in calls.record("did lax") }
        #expect {
            _ = try Self.load(dir, Self.v2Scores, StagedMigrationManager([.custom(lax)]))
        } throws: { error in
            "\(error)".contains("staged migration, the step from model version scores 1 (1 of 2) to scores 2 (custom stage \"lax\"): ")
                && "\(error)".contains("doesn't convert to int16 without loss")
        }
        #expect(calls.all == ["will lax"])
        #expect(try EventLog(openingExistingAt: Self.storeURL(dir).path).stagedMigrationMarker() != nil, "the step was recorded before its migration")
        #expect(try Self.values(try Self.load(dir, Self.v1Scores), "Player", ["name"], sortedBy: "name") == [["renamed"]],
                "the handler's save stays: each step commits on its own")

        let clamp = Self.clampStage(calls)
        clamp.didMigrateHandler = { _, _ in calls.record("did clamp") }
        let container = try Self.load(dir, Self.v2Scores, StagedMigrationManager([.custom(clamp)]))
        #expect(calls.all == ["will lax", "will clamp", "did clamp"])
        #expect(try Self.values(container, "Player", ["name", "score"], sortedBy: "name") == [["renamed", "32767"]])
        #expect(try EventLog(openingExistingAt: Self.storeURL(dir).path).stagedMigrationMarker() == nil, "the other stage's record is gone")
    }
}

extension StagedMigrationTests {
    @Test("lightweight stages step through every listed version in order, and a custom stage's handlers see the versions around their step; a store at a later stage starts there")
    func stepsThroughVersions() throws {
        let v0 = try ManagedObjectModel {
            Entity("Person") { Attribute("name", .string).required().providedAtInsert(); Attribute("nickname", .string) }
        }
        var v0Indexed = try ManagedObjectModel {
            Entity("Person") { Attribute("name", .string).required().providedAtInsert().indexed(); Attribute("nickname", .string) }
        }
        v0Indexed.versionIdentifiers = ["0 indexed"]
        #expect(v0.versionHash == v0Indexed.versionHash, "an index alone makes another version with the same hash")
        let dir = try TemporaryDirectory()
        try Self.insert(try Self.load(dir, v0), "Person", [["name": "Ada Lovelace"]])

        let calls = Calls()
        let split = Self.splitStage(calls)
        let probe = CustomMigrationStage(migratingFrom: v0Indexed, to: Self.v1People, label: "probe")
        probe.willMigrateHandler = { manager, _ in
            calls.record("will probe at \(try #require(manager.container).managedObjectModel.versionIdentifiers.sorted())")
        }
        let manager = StagedMigrationManager([.lightweight([v0, v0Indexed]), .custom(probe), .custom(split), .lightweight([Self.v3People])])
        let container = try Self.load(dir, Self.v3People, manager)
        #expect(calls.all == ["will probe at [\"0 indexed\"]", "did split names"])
        let log = try #require(container.persistentStoreCoordinator.persistentStores.first?.log)
        #expect(log.storedModels().count == 5, "v0, v0 indexed, v1, v2, v3 — each stored as the store went through it")
        #expect(try Self.values(container, "Person", ["firstName", "lastName"], sortedBy: "firstName") == [["Ada", "Lovelace"]])

        // A store already at v2 (another copy): only the steps after it run.
        let later = try TemporaryDirectory()
        try Self.insert(try Self.load(later, Self.v2People), "Person", [["firstName": "Alan", "lastName": "Turing"]])
        let laterCalls = Calls()
        let laterManager = StagedMigrationManager([
            .lightweight([v0, v0Indexed]), .custom(probe), .custom(Self.splitStage(laterCalls)), .lightweight([Self.v3People]),
        ])
        let laterContainer = try Self.load(later, Self.v3People, laterManager)
        #expect(laterCalls.all.isEmpty)
        #expect(try Self.values(laterContainer, "Person", ["firstName"], sortedBy: "firstName") == [["Alan"]])
    }

    @Test("a store at none of the stages' models is refused, naming the models, with nothing written; a new store and a store at the model run no stage; read-only adds and adds with automatic migration off run none; stages that don't make one path are an invalid description")
    func refusalsAndSkips() throws {
        let calls = Calls()
        let manager = StagedMigrationManager([.custom(Self.splitStage(calls))])

        let fresh = try TemporaryDirectory()
        try Self.insert(try Self.load(fresh, Self.v3People, manager), "Person", [["firstName": "A", "lastName": "B"]])
        #expect(calls.all.isEmpty, "a new store has nothing to migrate")
        var v4 = try ManagedObjectModel {
            Entity("Person") {
                Attribute("firstName", .string).required().providedAtInsert(); Attribute("lastName", .string).required().providedAtInsert()
                Attribute("nickname", .string)
            }
        }
        v4.versionIdentifiers = ["4"]
        try Self.insert(try Self.load(fresh, v4), "Person", [["firstName": "C", "lastName": "D", "nickname": "cd"]])
        let older = try Self.load(fresh, Self.v3People, manager)
        #expect(try Self.values(older, "Person", ["firstName"], sortedBy: "firstName") == [["A"], ["C"]],
                "a store a later model wrote opens with the earlier one as without stages")
        #expect(calls.all.isEmpty)

        let stranger = try TemporaryDirectory()
        var v0 = try ManagedObjectModel { Entity("Human") { Attribute("name", .string) } }
        v0.versionIdentifiers = ["0"]
        try Self.insert(try Self.load(stranger, v0), "Human", [["name": "X"]])
        let head = try EventLog(openingExistingAt: Self.storeURL(stranger).path).head
        #expect {
            _ = try Self.load(stranger, Self.v3People, manager)
        } throws: { error in
            (error as? PersistentStoreError)?.code == 134_110
                && "\(error)".contains("its newest model version, 0, is none of the staged migration's 3 model versions (1, 2, 3, the coordinator's last)")
        }
        let after = try EventLog(openingExistingAt: Self.storeURL(stranger).path)
        #expect(try after.head == head)
        #expect(after.storedModels().count == 1, "no version stored")

        let old = try TemporaryDirectory()
        try Self.insert(try Self.load(old, Self.v1People), "Person", [["name": "Ada Lovelace"]])
        let readOnly = PersistentContainer(name: "People", managedObjectModel: Self.v3People, storeURL: Self.storeURL(old))
        readOnly.persistentStoreDescriptions.first?.stagedMigrationManager = manager
        readOnly.persistentStoreDescriptions.first?.isReadOnly = true
        #expect(throws: (any Error).self) { try readOnly.loadPersistentStores() }
        let manual = PersistentContainer(name: "People", managedObjectModel: Self.v3People, storeURL: Self.storeURL(old))
        manual.persistentStoreDescriptions.first?.stagedMigrationManager = manager
        manual.persistentStoreDescriptions.first?.shouldMigrateStoreAutomatically = false
        #expect {
            try manual.loadPersistentStores()
        } throws: { error in (error as? PersistentStoreError)?.code == 134_100 }
        #expect(calls.all.isEmpty, "neither a read-only add nor one with migration off runs a stage")

        for (stages, message) in [
            ([MigrationStage.lightweight([])], "stage 1 (lightweight) lists no models"),
            ([.custom(CustomMigrationStage(migratingFrom: Self.v1People, to: Self.v1People, label: "same"))], "migrates from a model version to the same version"),
            ([.lightweight([Self.v1People, Self.v2People, Self.v1People])], "meets model version 1 twice (as model 1 and model 3 of 4"),
        ] {
            #expect {
                _ = try Self.load(old, Self.v3People, StagedMigrationManager(stages))
            } throws: { error in
                guard case .invalidDescription(let text) = error as? PersistentStoreError else { return false }
                return text.contains(message)
            }
        }
        #expect(try Self.values(try Self.load(old, Self.v1People), "Person", ["name"], sortedBy: "name") == [["Ada Lovelace"]])
    }
}
