import Dispatch
import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Synchronization
import Testing

/// Review of staged migration (spec 0006 §19.6): plans checked on every add, the whole
/// migration inside the one-at-a-time lock, a pending didMigrate found again after the
/// plan changed.
extension StagedMigrationTests {
    /// Whether `error` is `invalidDescription` whose text contains `text`.
    static func isInvalidDescription(_ error: any Error, containing text: String) -> Bool {
        guard case .invalidDescription(let message) = error as? PersistentStoreError else { return false }
        return message.contains(text)
    }

    @Test("stages that don't make one path are an invalid description for a new store too (before, they were checked only once a store existed: a mistake tested on fresh installs showed first on users' upgrades); nothing is created")
    func invalidPlanOnNewStore() throws {
        let dir = try TemporaryDirectory()
        let manager = StagedMigrationManager([.lightweight([Self.v1People, Self.v2People, Self.v1People])])
        #expect {
            _ = try Self.load(dir, Self.v3People, manager)
        } throws: { error in
            Self.isInvalidDescription(error, containing: "meets model version 1 twice")
        }
        #expect(!FileManager.default.fileExists(atPath: Self.storeURL(dir).appendingPathComponent("data.mdb").path), "no store created")
    }

    @Test("the last step's migration refused is named like any step's (before, the last step without a didMigrate handler was left to the add, whose error didn't say which step of the staged migration failed); the next add runs the step from its willMigrate again")
    func lastStepRefusalNamed() throws {
        let dir = try TemporaryDirectory()
        try Self.insert(try Self.load(dir, Self.v1Scores), "Player", [["name": "a", "score": Int64(70_000)]])
        let calls = Calls()
        let lax = CustomMigrationStage(migratingFrom: Self.v1Scores, to: Self.v2Scores, label: "lax")
        lax.willMigrateHandler = { _, _ in calls.record("will lax") }
        #expect {
            _ = try Self.load(dir, Self.v2Scores, StagedMigrationManager([.custom(lax)]))
        } throws: { error in
            let text = "\(error)"
            return (error as? PersistentStoreError)?.code == 134_110
                && text.contains("staged migration, the step from model version scores 1 (1 of 2) to scores 2 (custom stage \"lax\"): ")
                && text.contains("doesn't convert to int16 without loss")
        }
        let container = try Self.load(dir, Self.v2Scores, StagedMigrationManager([.custom(Self.clampStage(calls))]))
        #expect(calls.all == ["will lax", "will clamp"])
        #expect(try Self.values(container, "Player", ["score"], sortedBy: "name") == [["32767"]])
    }

    @Test("two adds of one store at once, through one manager or two, run each handler once: the second waits until the first has migrated the store to the coordinator's model (before, the last step was left to the add after the lock, and two managers didn't exclude each other: the handlers ran again, at the same time)")
    func concurrentAddsRunHandlersOnce() throws {
        let rounds = max(1, Int(ProcessInfo.processInfo.environment["STRATA_STAGED_RACE_ROUNDS"] ?? "") ?? 3)
        for round in 0..<rounds {
            let dir = try TemporaryDirectory()
            try Self.insert(try Self.load(dir, Self.v1Scores), "Player", [["name": "a", "score": Int64(70_000)], ["name": "b", "score": Int64(3)]])
            let calls = Calls()
            let stage = Self.clampStage(calls)
            let shared = StagedMigrationManager([.custom(stage)])
            // Round 0 and every other: one manager; the others: a manager each.
            let managers = round.isMultiple(of: 2) ? [shared, shared] : [shared, StagedMigrationManager([.custom(stage)])]
            let failures = Mutex<[String]>([])
            let containers = Mutex<[PersistentContainer]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                do {
                    let container = try Self.load(dir, Self.v2Scores, managers[index])
                    containers.withLock { $0.append(container) }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty, "round \(round)")
            #expect(calls.all == ["will clamp"], "round \(round)")
            for container in containers.withLock({ $0 }) {
                #expect(try Self.values(container, "Player", ["score"], sortedBy: "name") == [["32767"], ["3"]])
            }
        }
    }

    @Test("the coordinator's model is the plan's last even when a stage lists a model of its version: what the version hash leaves out (a default filling a new mandatory attribute) is the coordinator's (before, a last step with a didMigrate handler migrated with the listed model, and was refused for the default it lacked)")
    func listedFinalModelIsTheCoordinators() throws {
        let dir = try TemporaryDirectory()
        try Self.insert(try Self.load(dir, Self.v1Scores), "Player", [["name": "a", "score": Int64(5)]])
        var listed = try ManagedObjectModel {
            Entity("Player") { Attribute("name", .string); Attribute("score", .int64); Attribute("level", .int64).required().providedAtInsert() }
        }
        listed.versionIdentifiers = ["scores 3"]
        var own = try ManagedObjectModel {
            Entity("Player") { Attribute("name", .string); Attribute("score", .int64); Attribute("level", .int64, default: 1).required() }
        }
        own.versionIdentifiers = ["scores 3"]
        #expect(listed.versionHash == own.versionHash)
        let calls = Calls()
        let stage = CustomMigrationStage(migratingFrom: Self.v1Scores, to: listed, label: "levels")
        stage.didMigrateHandler = { manager, _ in
            calls.record("did levels")
            let container = try #require(manager.container)
            #expect(container.managedObjectModel.entity(named: "Player")?.attributesByName["level"]?.defaultValue != nil)
        }
        let container = try Self.load(dir, own, StagedMigrationManager([.custom(stage)]))
        #expect(calls.all == ["did levels"])
        #expect(try Self.values(container, "Player", ["level"], sortedBy: "name") == [["1"]])
    }

    @Test("a didMigrate handler that didn't finish runs at the next add after an app update added versions before its step (before, the pending step was recognised by its index in the plan: with the index moved, the record was dropped, the handler never ran, and the next step's migration was refused for the values it should have filled)")
    func pendingDidMigrateAfterPlanGrew() throws {
        var v0 = try ManagedObjectModel { Entity("Person") { Attribute("name", .string).required().providedAtInsert(); Attribute("nickname", .string) } }
        v0.versionIdentifiers = ["0"]
        let dir = try TemporaryDirectory()
        try Self.insert(try Self.load(dir, Self.v1People), "Person", [["name": "Ada Lovelace"]])

        // Release 1: v1 → v2 (split) → v3; the split fails once, on the user's device.
        let calls = Calls()
        let failing = Self.splitStage(calls)
        failing.didMigrateHandler = { _, _ in
            calls.record("did failing")
            struct Interrupted: Error {}
            throw Interrupted()
        }
        #expect(throws: PersistentStoreError.self) {
            _ = try Self.load(dir, Self.v3People, StagedMigrationManager([.custom(failing)]))
        }
        #expect(try EventLog(openingExistingAt: Self.storeURL(dir).path).stagedMigrationMarker() != nil)

        // Release 2 lists an older version first: the split is now the plan's second step.
        let manager = StagedMigrationManager([.lightweight([v0]), .custom(Self.splitStage(calls)), .lightweight([Self.v3People])])
        let container = try Self.load(dir, Self.v3People, manager)
        #expect(calls.all == ["did failing", "did split names"])
        #expect(try Self.values(container, "Person", ["firstName", "lastName"], sortedBy: "firstName") == [["Ada", "Lovelace"]])
        #expect(try EventLog(openingExistingAt: Self.storeURL(dir).path).stagedMigrationMarker() == nil)
    }

    @Test("a step's migration refused for a uniqueness constraint it adds is the migration error naming the step, like a conversion's refusal (before, the raw uniqueness error escaped, naming no step); a willMigrate handler that merges the duplicates lets it through, and a derived attribute the step adds is computed")
    func uniquenessRefusalNamed() throws {
        var u1 = try ManagedObjectModel { Entity("Tag") { Attribute("name", .string); Attribute("uses", .int64) } }
        u1.versionIdentifiers = ["tags 1"]
        var u2 = try ManagedObjectModel {
            Entity("Tag") { Attribute("name", .string); Attribute("uses", .int64); Attribute("key", .string).derived(from: "lowercase(name)"); Unique("name") }
        }
        u2.versionIdentifiers = ["tags 2"]
        let dir = try TemporaryDirectory()
        try Self.insert(try Self.load(dir, u1), "Tag", [["name": "Swift", "uses": Int64(2)], ["name": "Swift", "uses": Int64(3)], ["name": "Rust", "uses": Int64(1)]])
        let calls = Calls()
        let lax = CustomMigrationStage(migratingFrom: u1, to: u2, label: "lax")
        lax.willMigrateHandler = { _, _ in calls.record("will lax") }
        #expect {
            _ = try Self.load(dir, u2, StagedMigrationManager([.custom(lax)]))
        } throws: { error in
            let text = "\(error)"
            return (error as? PersistentStoreError)?.code == 134_110
                && text.contains("staged migration, the step from model version tags 1 (1 of 2) to tags 2 (custom stage \"lax\"): ")
                && text.contains("uniqueness constraint (name) of Tag")
        }
        let merge = CustomMigrationStage(migratingFrom: u1, to: u2, label: "merge")
        merge.willMigrateHandler = { manager, _ in
            calls.record("will merge")
            try #require(manager.container).newBackgroundContext().performAndWait { context in
                var kept: [String: ManagedObject] = [:]
                for tag in try context.fetch(FetchRequest(entityName: "Tag", sortDescriptors: [FetchSortDescriptor(key: "uses")])) {
                    let name = tag.value(forKey: "name") as? String ?? ""
                    if let first = kept[name] {
                        first.setValue((first.value(forKey: "uses") as? Int64 ?? 0) + (tag.value(forKey: "uses") as? Int64 ?? 0), forKey: "uses")
                        context.delete(tag)
                    } else {
                        kept[name] = tag
                    }
                }
                try context.save()
            }
        }
        let container = try Self.load(dir, u2, StagedMigrationManager([.custom(merge)]))
        #expect(calls.all == ["will lax", "will merge"])
        #expect(try Self.values(container, "Tag", ["name", "uses", "key"], sortedBy: "name") == [["Rust", "1", "rust"], ["Swift", "5", "swift"]])
    }

    @Test("an entity renamed by a step: the didMigrate handler fetches it by its new name and fills what the version added; the next version makes that mandatory")
    func entityRenamedByStep() throws {
        var r1 = try ManagedObjectModel { Entity("Person") { Attribute("name", .string) } }
        r1.versionIdentifiers = ["r1"]
        var r2 = try ManagedObjectModel { Entity("Human") { Attribute("name", .string); Attribute("initial", .string) }.renamed(from: "Person") }
        r2.versionIdentifiers = ["r2"]
        var r3 = try ManagedObjectModel {
            Entity("Human") { Attribute("name", .string); Attribute("initial", .string).required().providedAtInsert() }.renamed(from: "Person")
        }
        r3.versionIdentifiers = ["r3"]
        let dir = try TemporaryDirectory()
        try Self.insert(try Self.load(dir, r1), "Person", [["name": "Ada"], ["name": "Grace"]])
        let stage = CustomMigrationStage(migratingFrom: r1, to: r2, label: "initials")
        stage.didMigrateHandler = { manager, _ in
            try #require(manager.container).newBackgroundContext().performAndWait { context in
                for human in try context.fetch(FetchRequest(entityName: "Human")) {
                    human.setValue(String((human.value(forKey: "name") as? String ?? "?").prefix(1)), forKey: "initial")
                }
                try context.save()
            }
        }
        let container = try Self.load(dir, r3, StagedMigrationManager([.custom(stage), .lightweight([r3])]))
        #expect(try Self.values(container, "Human", ["name", "initial"], sortedBy: "name") == [["Ada", "A"], ["Grace", "G"]])
    }

    @Test("a handler that keeps the manager's container: once the handler returned, its store is gone from it — a fetch through it fails (no crash, nothing written) — while the added store works; an in-memory description runs no stage")
    func containerKeptPastHandler() throws {
        let dir = try TemporaryDirectory()
        try Self.insert(try Self.load(dir, Self.v1People), "Person", [["name": "Ada Lovelace"]])
        let kept = Mutex<PersistentContainer?>(nil)
        let calls = Calls()
        let stage = Self.splitStage(calls)
        let split = stage.didMigrateHandler
        stage.didMigrateHandler = { manager, stage in
            try split?(manager, stage)
            kept.withLock { $0 = manager.container }
        }
        let container = try Self.load(dir, Self.v3People, StagedMigrationManager([.custom(stage)]))
        let head = try EventLog(openingExistingAt: Self.storeURL(dir).path).head
        let old = try #require(kept.withLock { $0 })
        #expect(old.persistentStoreCoordinator.persistentStores.isEmpty)
        #expect(throws: (any Error).self) {
            try old.newBackgroundContext().performAndWait { context in
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue("Late", forKey: "name")
                try context.save()
            }
        }
        #expect(try EventLog(openingExistingAt: Self.storeURL(dir).path).head == head)
        #expect(try Self.values(container, "Person", ["firstName"], sortedBy: "firstName") == [["Ada"]])

        let memory = PersistentContainer(name: "People", managedObjectModel: Self.v3People)
        memory.persistentStoreDescriptions = [PersistentStoreDescription(url: URL(fileURLWithPath: "/dev/null"))]
        memory.persistentStoreDescriptions.first?.stagedMigrationManager = StagedMigrationManager([.custom(Self.splitStage(calls))])
        try memory.loadPersistentStores()
        #expect(calls.all == ["did split names"])
    }

    @Test("an older app wrote after the staged migration (an earlier model may open a later store, spec 0004 §4.3): the next add, whose open at the newest version is refused for what that app wrote, runs the steps again from the version that wrote it, and a handler filling only what is missing finishes it (before, no stage ran and the store couldn't be added at all)")
    func olderAppWroteAfterMigration() throws {
        let dir = try TemporaryDirectory()
        try Self.insert(try Self.load(dir, Self.v1People), "Person", [["name": "Ada Lovelace"]])
        let calls = Calls()
        let stage = CustomMigrationStage(migratingFrom: Self.v1People, to: Self.v2People, label: "split missing")
        stage.didMigrateHandler = { manager, _ in
            calls.record("did")
            try #require(manager.container).newBackgroundContext().performAndWait { context in
                for person in try context.fetch(FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "firstName == nil"))) {
                    let (first, last) = StagedPeopleModels.split(person.value(forKey: "name") as? String ?? "")
                    person.setValue(first, forKey: "firstName")
                    person.setValue(last, forKey: "lastName")
                }
                try context.save()
            }
        }
        let manager = StagedMigrationManager([.custom(stage)])
        _ = try Self.load(dir, Self.v3People, manager)
        #expect(calls.all == ["did"])

        try Self.insert(try Self.load(dir, Self.v1People), "Person", [["name": "Grace Hopper"]])
        let container = try Self.load(dir, Self.v3People, manager)
        #expect(calls.all == ["did", "did"])
        #expect(try Self.values(container, "Person", ["firstName", "lastName"], sortedBy: "firstName") == [["Ada", "Lovelace"], ["Grace", "Hopper"]])

        let report = try #require(try container.persistentStoreCoordinator.persistentStores.first?.log.verify())
        #expect(report.isClean, "\(report.problems.prefix(5))")
        _ = try Self.load(dir, Self.v3People, manager)
        #expect(calls.all == ["did", "did"], "once migrated again, nothing runs")
    }

    @Test("an older app wrote a value the newest version can't take over (a score too wide for int16): the steps run again from its version, and a willMigrate handler that clamps only the values out of range (not every object: those the newer version wrote read through the older model) lets it through")
    func olderAppWroteForWillMigrate() throws {
        let dir = try TemporaryDirectory()
        try Self.insert(try Self.load(dir, Self.v1Scores), "Player", [["name": "a", "score": Int64(70_000)]])
        let calls = Calls()
        let stage = CustomMigrationStage(migratingFrom: Self.v1Scores, to: Self.v2Scores, label: "clamp out of range")
        stage.willMigrateHandler = { manager, _ in
            calls.record("will")
            try #require(manager.container).newBackgroundContext().performAndWait { context in
                let wide = try FetchRequest(entityName: "Player", format: "score > %@ OR score < %@", Int64(Int16.max), Int64(Int16.min))
                for player in try context.fetch(wide) {
                    let score = player.value(forKey: "score") as? Int64 ?? 0
                    player.setValue(min(max(score, Int64(Int16.min)), Int64(Int16.max)), forKey: "score")
                }
                try context.save()
            }
        }
        let manager = StagedMigrationManager([.custom(stage)])
        _ = try Self.load(dir, Self.v2Scores, manager)
        try Self.insert(try Self.load(dir, Self.v1Scores), "Player", [["name": "b", "score": Int64(-90_000)]])
        let container = try Self.load(dir, Self.v2Scores, manager)
        #expect(calls.all == ["will", "will"])
        #expect(try Self.values(container, "Player", ["score"], sortedBy: "name") == [["32767"], ["-32768"]])
        let report = try #require(try container.persistentStoreCoordinator.persistentStores.first?.log.verify())
        #expect(report.isClean, "\(report.problems.prefix(5))")
    }

    @Test("a coordinator whose model isn't the stages' last version (the app's current model version left at an older one) is an invalid description saying so, naming the versions after it (before: only that a version was met twice)")
    func coordinatorModelNotLast() throws {
        let dir = try TemporaryDirectory()
        let calls = Calls()
        let manager = StagedMigrationManager([.custom(Self.splitStage(calls)), .lightweight([Self.v3People])])
        #expect {
            _ = try Self.load(dir, Self.v2People, manager)
        } throws: { error in
            Self.isInvalidDescription(
                error,
                containing: "the staged migration lists the coordinator's model version, 2, as model 2 of 4, and version 3 after it: the stages end at the coordinator's model (is it the newest version?)")
        }
    }

    @Test("a handler that adds the store it is migrating through a container with a staged migration of its own (the app's usual container, built in the handler) fails the add with an error saying so; before, it waited for itself forever")
    func handlerAddingItsOwnStore() throws {
        let dir = try TemporaryDirectory()
        try Self.insert(try Self.load(dir, Self.v1People), "Person", [["name": "Ada Lovelace"]])
        let calls = Calls()
        let stage = CustomMigrationStage(migratingFrom: Self.v1People, to: Self.v2People, label: "nested")
        stage.didMigrateHandler = { _, _ in
            calls.record("did")
            _ = try Self.load(dir, Self.v3People, StagedMigrationManager([.custom(Self.splitStage(calls))]))
        }
        let outcome = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            do {
                _ = try Self.load(dir, Self.v3People, StagedMigrationManager([.custom(stage)]))
                outcome.withLock { $0 = "added" }
            } catch {
                outcome.withLock { $0 = "\(error)" }
            }
            done.signal()
        }.start()
        guard done.wait(timeout: .now() + 30) == .success else {
            Issue.record("the add didn't return in 30 s: it waits for itself")
            return
        }
        let text = try #require(outcome.withLock { $0 })
        #expect(text.contains("a staged migration handler added the store it is migrating"), "\(text)")
        #expect(calls.all == ["did"])
    }

    @Test("a to-many made a to-one: refused while an owner has several; a willMigrate handler keeping each owner's first pet (deleting the others) lets the step through, references intact")
    func toManyMadeToOne() throws {
        var p1 = try ManagedObjectModel {
            Entity("Owner") { Attribute("name", .string); Relationship("pets", to: "Pet", inverse: "owner", toMany: true) }
            Entity("Pet") { Attribute("name", .string); Relationship("owner", to: "Owner", inverse: "pets") }
        }
        p1.versionIdentifiers = ["pets 1"]
        var p2 = try ManagedObjectModel {
            Entity("Owner") { Attribute("name", .string); Relationship("pets", to: "Pet", inverse: "owner") }
            Entity("Pet") { Attribute("name", .string); Relationship("owner", to: "Owner", inverse: "pets") }
        }
        p2.versionIdentifiers = ["pets 2"]
        let dir = try TemporaryDirectory()
        let v1 = try Self.load(dir, p1)
        try v1.newBackgroundContext().performAndWait { context in
            let ada = try context.insertNewObject(forEntityName: "Owner")
            ada.setValue("Ada", forKey: "name")
            let alan = try context.insertNewObject(forEntityName: "Owner")
            alan.setValue("Alan", forKey: "name")
            for (name, owner) in [("a1", ada), ("a2", ada), ("t1", alan)] {
                let pet = try context.insertNewObject(forEntityName: "Pet")
                pet.setValue(name, forKey: "name")
                pet.setValue(owner, forKey: "owner")
            }
            try context.save()
        }
        #expect(throws: (any Error).self) { _ = try Self.load(dir, p2) }
        let stage = CustomMigrationStage(migratingFrom: p1, to: p2, label: "one pet")
        stage.willMigrateHandler = { manager, _ in
            try #require(manager.container).newBackgroundContext().performAndWait { context in
                for pet in try context.fetch(FetchRequest(entityName: "Pet", sortDescriptors: [FetchSortDescriptor(key: "name")])) {
                    guard let owner = pet.value(forKey: "owner") as? ManagedObject else { continue }
                    let kept = (owner.value(forKey: "pets") as? Set<ManagedObject> ?? []).compactMap { $0.value(forKey: "name") as? String }.min()
                    if pet.value(forKey: "name") as? String != kept { context.delete(pet) }
                }
                try context.save()
            }
        }
        let container = try Self.load(dir, p2, StagedMigrationManager([.custom(stage)]))
        let pairs = try container.newBackgroundContext().performAndWait { context in
            try context.fetch(FetchRequest(entityName: "Owner", sortDescriptors: [FetchSortDescriptor(key: "name")])).map {
                "\($0.value(forKey: "name") ?? "nil") \((($0.value(forKey: "pets") as? ManagedObject)?.value(forKey: "name")).map { "\($0)" } ?? "nil")"
            }
        }
        #expect(pairs == ["Ada a1", "Alan t1"])
    }
}
