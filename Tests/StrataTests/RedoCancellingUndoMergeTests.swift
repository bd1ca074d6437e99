import Foundation
import Strata
import StrataTestSupport
import Testing

/// Seed 371 of `UndoInsertLinkFixTests.randomizedLinksAndUndo` (150 steps), made
/// deterministic (spec 0006 §9 item 6): a redo cancelling the pending undo of a saved insert
/// brings the object back with its derived to-many sides as the store lists them now, the
/// group's members among them, so a later merge takes another writer's work into them.
@Suite("A redo cancelling a pending undo, then a merge: the objects follow the store")
struct RedoCancellingUndoMergeTests {
    private static func members(_ team: ManagedObject) -> Set<ManagedObjectID> {
        Set(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).map(\.objectID))
    }

    /// Bob saves a team and a player on it; Alice puts her new player on the team (unsaved);
    /// Bob undoes his insert (pending); Alice saves; Bob redoes (cancelling the pending undo)
    /// and merges: the team lists Alice's player beside his.
    @Test("a redo cancelling the pending undo of an insert, then a merge of another writer's member: the team lists it")
    func redoCancellingUndoOfInsertThenMergedMember() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let alice = editor(coordinator), bob = privateContext(coordinator, name: "sync", author: "bob")
        let (teamID, bobsID) = try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("T1", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("P1", forKey: "name")
            player.setValue(team, forKey: "team")
            try context.save()
            return (team.objectID, player.objectID)
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("P2", forKey: "name")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
        }
        try await bob.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            #expect(try context.existingObject(with: teamID).isDeleted)
        }
        let saved = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            try context.save()
            return try #require(try context.fetch(FetchRequest(entityName: "Player")).first { $0.value(forKey: "name") as? String == "P2" }).objectID
        }
        try await bob.perform { (context: isolated ManagedObjectContext) throws in
            try context.redo()
            let team = try context.existingObject(with: teamID)
            _ = try context.mergeStoreChanges()
            #expect(team.isDeleted == false)
            #expect(Self.members(team) == [bobsID, saved], "\(Self.members(team))")
            let player = try context.existingObject(with: saved)
            #expect((player.value(forKey: "team") as? ManagedObject) === team)
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(Self.members(try context.existingObject(with: teamID)) == [bobsID, saved])
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}
