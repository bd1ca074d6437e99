import Foundation
import Strata
import StrataTestSupport
import Testing

/// Tombstones (`preservesValueInHistoryOnDeletion`, spec 0009 §2): a delete's history change
/// names the values a consumer needs to find the object elsewhere.
@Suite("History: tombstones of deletes")
struct TombstoneTests {
    /// Players with a preserved `remoteID` (and an inherited one in `Captain`), teams with none.
    static func model(preserving: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true)
            }
            Entity("Player") {
                Attribute("name", .string)
                preserving ? Attribute("remoteID", .string).preservedInHistoryOnDeletion() : Attribute("remoteID", .string)
                Attribute("nickname", .string).preservedInHistoryOnDeletion()
                Relationship("team", to: "Team", inverse: "players")
            }
            Entity("Captain", parent: "Player") {
                Attribute("since", .date)
            }
        }
    }

    @Test("a delete's tombstone holds the preserved attributes' values (inherited ones too, nil ones left out); inserts, updates and entities marking none have none; the whole before-image is still in propertyChanges")
    func tombstones() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model(preserving: true))
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            let ada = try context.insertNewObject(forEntityName: "Player")
            ada.setValue("Ada", forKey: "name")
            ada.setValue("r-1", forKey: "remoteID")
            ada.setValue(team, forKey: "team")
            let cleo = try context.insertNewObject(forEntityName: "Captain")
            cleo.setValue("Cleo", forKey: "name")
            cleo.setValue("r-2", forKey: "remoteID")
            cleo.setValue("C", forKey: "nickname")
            try context.save()
            ada.setValue("Ada N.", forKey: "name")
            try context.save()
            context.delete(ada)
            context.delete(cleo)
            context.delete(team)
            try context.save()
        }
        let history = try coordinator.history(HistoryRequest())
        #expect(history.count == 3)
        #expect(history[0].changes.allSatisfy { $0.tombstone == nil }, "inserts have none")
        #expect(history[1].changes.allSatisfy { $0.tombstone == nil }, "updates have none")
        let deletes = Dictionary(uniqueKeysWithValues: history[2].changes.map { ($0.entityName, $0) })
        #expect(deletes["Player"]?.tombstone == ["remoteID": .attribute(.string("r-1"))], "nil nickname left out")
        #expect(deletes["Captain"]?.tombstone == ["remoteID": .attribute(.string("r-2")), "nickname": .attribute(.string("C"))], "inherited flags count")
        #expect(deletes["Team"].map { $0.changeType == .delete && $0.tombstone == nil } == true, "an entity marking none has none")
        #expect(deletes["Player"]?.change(of: "name") != nil, "the whole before-image is kept")

        // The flag is the reading model's: a model not marking remoteID leaves it out of the
        // same delete's tombstone (and it isn't a new model version: not in the version hash).
        let other = try Self.model(preserving: false)
        #expect(other.versionHash == (try Self.model(preserving: true)).versionHash)
        try coordinator.remove(try #require(coordinator.persistentStores.first))
        let reader = try openCoordinator(dir, model: other)
        let again = try reader.history(HistoryRequest()).last?.changes.first { $0.entityName == "Player" }
        #expect(again?.tombstone == [:], "the entity marks nickname only, which Ada had no value for")
    }

    @Test("the model file carries the flag (and leaves it out when false); a model file with it reads back equal")
    func modelFile() throws {
        let model = try Self.model(preserving: true)
        let text = String(decoding: model.jsonData(prettyPrinted: false), as: UTF8.self)
        let without = String(decoding: try Self.model(preserving: false).jsonData(prettyPrinted: false), as: UTF8.self)
        #expect(text.components(separatedBy: "\"preservesValueInHistoryOnDeletion\":true").count == 3, "remoteID and nickname")
        #expect(without.components(separatedBy: "preservesValueInHistoryOnDeletion").count == 2, "nickname only: false is left out")
        let reloaded = try ManagedObjectModel(jsonData: model.jsonData())
        #expect(reloaded.entity(named: "Player")?.attributesByName["remoteID"]?.preservesValueInHistoryOnDeletion == true)
        #expect(reloaded.entity(named: "Player")?.attributesByName["name"]?.preservesValueInHistoryOnDeletion == false)
        #expect(reloaded.jsonData() == model.jsonData())
    }
}
