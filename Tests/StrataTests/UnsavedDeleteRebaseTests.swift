import Foundation
import Strata
import StrataTestSupport
import Testing

/// Seeds 280, 316, 448 and 488 of `UndoInsertLinkFixTests.randomizedLinksAndUndo` (150 steps), made
/// deterministic (spec 0006 §16.1): an unsaved delete's before-values follow the store at a
/// merge as an update's old values do, so undoing it brings the object back as the store
/// holds it, not as read before the merge.
@Suite("Unsaved delete rebased at a merge: undo brings the object back as the store holds it")
struct UnsavedDeleteRebaseTests {
    /// Alice saves her player on a team; Bob deletes it (unsaved); Alice takes the player off
    /// the team (`moved`: puts it on a second team) and renames it, saved; Bob merges and
    /// undoes his delete: the player comes back as Alice left it — on her team or none, both
    /// sides agreeing, her name kept — and Bob's save doesn't write his old values over hers.
    @Test("an unsaved delete of an object another writer changed since, merged, then undone: the object comes back with the store's values, both sides agreeing", arguments: [false, true])
    func undoUnsavedDeleteAfterMergedMove(moved: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let alice = editor(coordinator), bob = privateContext(coordinator, name: "sync", author: "bob")
        let (teamID, otherID, playerID) = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team"), other = try context.insertNewObject(forEntityName: "Team")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Sam", forKey: "name")
            player.setValue(team, forKey: "team")
            try context.save()
            return (team.objectID, other.objectID, player.objectID)
        }
        try await bob.perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: playerID))
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.existingObject(with: playerID)
            player.setValue(moved ? try context.existingObject(with: otherID) : nil, forKey: "team")
            player.setValue("Pam", forKey: "name")
            try context.save()
        }
        let expected: ManagedObjectID? = moved ? otherID : nil
        try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID), other = try context.existingObject(with: otherID)
            func members(_ team: ManagedObject) -> Set<ManagedObjectID> { Set(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).map(\.objectID)) }
            _ = try context.mergeStoreChanges()
            try context.undo()
            let player = try context.existingObject(with: playerID)
            #expect(player.isDeleted == false)
            #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == expected)
            #expect(player.value(forKey: "name") as? String == "Pam")
            #expect(members(team).isEmpty, "\(members(team))")
            #expect(members(other) == (moved ? [playerID] : []), "\(members(other))")
            try context.redo()
            #expect(player.isDeleted)
            #expect(members(team).isEmpty && members(other).isEmpty, "\(members(team)) \(members(other))")
            try context.undo()
            #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == expected)
            #expect(members(other) == (moved ? [playerID] : []), "\(members(other))")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.existingObject(with: playerID)
            #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == expected)
            #expect(player.value(forKey: "name") as? String == "Pam")
            #expect(((try context.existingObject(with: teamID).value(forKey: "players") as? Set<ManagedObject>) ?? []).isEmpty)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
    /// Seed 488 (150 steps): Alice saves a player on no team; Bob deletes it (unsaved;
    /// `redone`: undone and redone first); Alice puts it on her new team, saved; Bob merges,
    /// saves his delete and undoes it. The delete's before-values held no team (a nil to-one
    /// isn't among them), so the merge didn't rebase it: the player came back on no team
    /// while the team, as the merge rebased the groups, listed it again.
    @Test("an unsaved delete of an object on no team that another writer then put on one, merged, saved and undone: it comes back on that team, both sides agreeing", arguments: [false, true])
    func undoSavedDeleteOfObjectMovedOntoTeamBeforeSave(redone: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let alice = editor(coordinator), bob = privateContext(coordinator, name: "sync", author: "bob")
        let playerID = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Sam", forKey: "name")
            try context.save()
            return player.objectID
        }
        try await bob.perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: playerID))
            if redone {
                try context.undo()
                try context.redo()
            }
        }
        let teamID = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Tigers", forKey: "name")
            try context.existingObject(with: playerID).setValue(team, forKey: "team")
            try context.save()
            return team.objectID
        }
        try await bob.perform { (context: isolated ManagedObjectContext) throws in
            func members(_ team: ManagedObject) -> Set<ManagedObjectID> { Set(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).map(\.objectID)) }
            _ = try context.mergeStoreChanges()
            try context.save()
            try context.undo()
            let player = try context.existingObject(with: playerID), team = try context.existingObject(with: teamID)
            #expect(player.isDeleted == false)
            #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == teamID)
            #expect(members(team) == [playerID], "\(members(team))")
            try context.save()
            try context.redo()
            #expect(members(team).isEmpty, "\(members(team))")
            try context.undo()
            #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == teamID)
            #expect(members(team) == [playerID], "\(members(team))")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.existingObject(with: playerID)
            #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == teamID)
            #expect(player.value(forKey: "name") as? String == "Sam")
            let members = ((try context.existingObject(with: teamID).value(forKey: "players") as? Set<ManagedObject>) ?? []).map(\.objectID)
            #expect(members == [playerID])
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}
