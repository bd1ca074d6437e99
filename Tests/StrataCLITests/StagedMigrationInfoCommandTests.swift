import Foundation
import Strata
import StrataTestSupport
import Testing

/// `strata info` shows a staged migration's step whose didMigrate handler hasn't finished
/// (spec 0006 §19.6, spec 0007): the store is at the step's target model, and the next add
/// with the staged migration runs the handler again.
@Suite("strata info: a pending staged migration")
struct StagedMigrationInfoCommandTests {
    @Test("a didMigrate handler that threw leaves its step recorded: info shows it (text: a `staged` line naming the stage and the step; JSON: `stagedMigration`), and nothing once it finished (before, the record was invisible to every tool)")
    func infoShowsPendingStep() throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("store")
        let v1 = PersistentContainer(name: "People", managedObjectModel: try StagedPeopleModels.version(1), storeURL: url)
        try v1.loadPersistentStores()
        try v1.newBackgroundContext().performAndWait { context in
            try context.insertNewObject(forEntityName: "Person").setValue("Ada Lovelace", forKey: "name")
            try context.save()
        }
        try v1.persistentStoreCoordinator.remove(try #require(v1.persistentStoreCoordinator.persistentStores.first))

        struct Interrupted: Error {}
        let stage = CustomMigrationStage(migratingFrom: try StagedPeopleModels.version(1), to: try StagedPeopleModels.version(2), label: "split names")
        stage.didMigrateHandler = { _, _ in throw Interrupted() }
        let v3 = PersistentContainer(name: "People", managedObjectModel: try StagedPeopleModels.version(3), storeURL: url)
        v3.persistentStoreDescriptions.first?.stagedMigrationManager = StagedMigrationManager([.custom(stage)])
        #expect(throws: PersistentStoreError.self) { try v3.loadPersistentStores() }

        let text = try strata("info", url.path)
        #expect(text.status == 0, "\(text.standardError)")
        let line = text.standardOutput.split(separator: "\n").first { $0.hasPrefix("staged ") }.map(String.init)
        #expect(line == "staged       step 1 to model version 2 (custom stage \"split names\"): its didMigrate handler hasn't finished; the next add with the staged migration runs it again",
                "\(text.standardOutput)")
        let json = try strata("info", url.path, "--format", "json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
        let pending = try #require(object["stagedMigration"] as? [String: Any], "\(json.standardOutput)")
        #expect(pending["label"] as? String == "split names")
        #expect(pending["step"] as? Int == 0)

        stage.didMigrateHandler = { _, _ in }
        let again = PersistentContainer(name: "People", managedObjectModel: try StagedPeopleModels.version(2), storeURL: url)
        again.persistentStoreDescriptions.first?.stagedMigrationManager = StagedMigrationManager([.custom(stage)])
        try again.loadPersistentStores()
        try again.persistentStoreCoordinator.remove(try #require(again.persistentStoreCoordinator.persistentStores.first))
        let after = try strata("info", url.path)
        #expect(!after.standardOutput.contains("staged "), "\(after.standardOutput)")
        let afterJSON = try strata("info", url.path, "--format", "json")
        #expect(!afterJSON.standardOutput.contains("stagedMigration"))
    }
}
