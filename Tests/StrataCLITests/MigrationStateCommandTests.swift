import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// `strata info` says which model version the store is in and what a migration left
/// pending (spec 0007): a refused version is stored but not in use, and a staged migration's
/// unfinished didMigrate handler is named.
@Suite("strata info: model versions in use and pending migrations")
struct MigrationStateCommandTests {
    struct Refusal: Error {}

    @Test("a refused migration leaves info as it was; a model version whose migration didn't finish is shown as not in use, and a staged migration step whose didMigrate handler threw as pending, text and JSON; both go once the migration finishes")
    func refusedAndPending() throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("store")
        let v1 = try ManagedObjectModel { Entity("Player") { Attribute("score", .int64) } }
        let v2 = try ManagedObjectModel { Entity("Player") { Attribute("score", .int16) } }
        func add(_ model: ManagedObjectModel, _ manager: StagedMigrationManager? = nil) throws -> PersistentContainer {
            let container = PersistentContainer(name: "Scores", managedObjectModel: model, storeURL: url)
            container.persistentStoreDescriptions.first?.stagedMigrationManager = manager
            try container.loadPersistentStores()
            return container
        }
        try add(v1).newBackgroundContext().performAndWait { context in
            try context.insertNewObject(forEntityName: "Player").setValue(Int64(70_000), forKey: "score")
            try context.save()
        }
        // A refused migration takes its version back (spec 0004 §4.3): info reads as before.
        let before = try strata("info", url.path)
        #expect(throws: PersistentStoreError.self) { _ = try add(v2) }
        #expect(try withoutFileSizes(strata("info", url.path).standardOutput) == withoutFileSizes(before.standardOutput))
        // An open stopped before its migration (a crash) leaves the version stored, marked.
        #expect(throws: LogError.self) {
            var configuration = EventLog.Configuration()
            configuration.stopsAfterStoringNewVersion = true
            _ = try EventLog(path: url.path, model: v2, configuration: configuration)
        }

        let refused = try strata("info", url.path)
        #expect(refused.status == 0, "\(refused.standardError)")
        #expect(refused.standardOutput.contains("models       1, 2 (newest 2; in use 1: the migration to 2 was refused or didn't finish)\n"), "\(refused.standardOutput)")
        #expect(!refused.standardOutput.contains("staged  "))
        let refusedJSON = try strata("info", url.path, "--format", "json")
        let refusedObject = try #require(try JSONSerialization.jsonObject(with: Data(refusedJSON.standardOutput.utf8)) as? [String: Any])
        #expect(refusedObject["refusedModelVersions"] as? [Int] == [2])
        #expect(refusedObject["modelVersionInUse"] as? Int == 1)
        #expect(refusedObject["stagedMigration"] == nil)

        let stage = CustomMigrationStage(migratingFrom: v1, to: v2, label: "clamp")
        stage.willMigrateHandler = { manager, _ in
            try #require(manager.container).newBackgroundContext().performAndWait { context in
                for player in try context.fetch(FetchRequest(entityName: "Player")) { player.setValue(Int64(Int16.max), forKey: "score") }
                try context.save()
            }
        }
        stage.didMigrateHandler = { _, _ in throw Refusal() }
        let manager = StagedMigrationManager([.custom(stage)])
        #expect(throws: PersistentStoreError.self) { _ = try add(v2, manager) }

        let pending = try strata("info", url.path)
        #expect(pending.status == 0, "\(pending.standardError)")
        #expect(pending.standardOutput.contains("models       1, 2 (newest 2)\n"), "the refused version migrated: \(pending.standardOutput)")
        #expect(pending.standardOutput.contains(
            "staged       step 1 to model version 2 (custom stage \"clamp\"): its didMigrate handler hasn't finished; the next add with the staged migration runs it again\n"), "\(pending.standardOutput)")
        let json = try strata("info", url.path, "--format", "json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
        #expect(object["modelVersionInUse"] as? Int == 2)
        #expect(object["refusedModelVersions"] as? [Int] == [])
        let staged = try #require(object["stagedMigration"] as? [String: Any], "\(json.standardOutput)")
        #expect(staged["label"] as? String == "clamp" && staged["step"] as? Int == 0)

        stage.didMigrateHandler = { _, _ in }
        _ = try add(v2, manager)
        let done = try strata("info", url.path)
        #expect(!done.standardOutput.contains("staged  "), "\(done.standardOutput)")
    }
}

/// `strata verify` reports a derived attribute's stored value its derivation doesn't give
/// (spec 0007, spec 0004 §8).
@Suite("strata verify: derived values")
struct VerifyDerivedCommandTests {
    @Test("a team size a commit left wrong: one `derived:` line naming the object, the derivation and both values; exit 1")
    func wrongDerivedValue() throws {
        let dir = try TemporaryDirectory()
        let path = dir.url.appendingPathComponent("store").path
        let model = try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Attribute("size", .int64).derived(from: "members.@count")
                Relationship("members", to: "Member", inverse: "team", toMany: true)
            }
            Entity("Member") { Relationship("team", to: "Team", inverse: "members") }
        }
        let team: StoredObjectID
        do {
            let log = try EventLog(path: path, model: model)
            var draft = TransactionDraft()
            let made = draft.insert("Team", values: ["name": .attribute(.string("Otters"))])
            team = try #require(try log.commit(draft).permanentID(for: made))
            var member = TransactionDraft()
            _ = member.insert("Member", values: ["team": .reference(.stored(team))])
            _ = try log.commit(member)
        }
        let clean = try strata("verify", path)
        #expect(clean.status == 0, "\(clean.standardOutput)")
        do {
            var configuration = EventLog.Configuration()
            configuration.skipsDerivations = true
            let buggy = try EventLog(path: path, model: model, configuration: configuration)
            var member = TransactionDraft()
            _ = member.insert("Member", values: ["team": .reference(.stored(team))])
            _ = try buggy.commit(member)
        }
        let result = try strata("verify", path)
        #expect(result.status == 1)
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.first == "derived: Team/p1.size: is stored as 1, but its derivation (members.@count) gives 2", "\(result.standardOutput)")
        #expect(lines.last?.hasSuffix(": 1 problem") == true, "\(result.standardOutput)")
    }
}
