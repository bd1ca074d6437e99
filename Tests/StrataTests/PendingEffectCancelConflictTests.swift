import Foundation
import Strata
import StrataTestSupport
import Testing

/// A redo (undo) that cancels the context's pending undo (redo) of a saved group inserting an
/// object and changing another, when a merge since left the store without the group's values
/// for the changed object (spec 0006 §16.1): the redo (undo) can't be saved anew — the store
/// still holds (lacks) what the group inserted — and dropping the pending effect alone would
/// show the group's values with nothing to write them. It is refused as a conflict.
@Suite("Cancelling a pending undo or redo of a group with inserts, over another writer's merged change")
struct PendingEffectCancelConflictTests {
    /// Alice saves a team ("Tigers"), then a group inserting a player and renaming the team
    /// "Lions"; she undoes it unsaved (`redone`: undoes it, saves, and redoes it unsaved); Bob
    /// renames the team "Owls" and saves; Alice merges and redoes (`redone`: undoes): refused,
    /// naming the team, nothing changed; her save then leaves her view and the store's agreeing.
    @Test("redo cancelling a pending undo (undo cancelling a pending redo) of a group inserting a player and renaming a team another writer renamed since: refused, naming the team", arguments: [false, true])
    func cancelOverMergedRename(redone: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let alice = editor(coordinator), bob = privateContext(coordinator, name: "sync", author: "bob")
        let teamID = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Tigers", forKey: "name")
            try context.save()
            context.removeAllUndoActions()
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Sam", forKey: "name")
            team.setValue("Lions", forKey: "name")
            context.setActionName("sign")
            try context.save()
            try context.undo()
            if redone {
                try context.save()
                try context.redo()
            }
            return team.objectID
        }
        try await bob.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Owls", forKey: "name")
            try context.save()
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            let team = try context.existingObject(with: teamID)
            let name = team.value(forKey: "name") as? String
            let players = try context.count(for: FetchRequest(entityName: "Player"))
            let conflict = expectUndoConflict { if redone { try context.undo() } else { try context.redo() } }
            #expect(conflict?.object == teamID.description && conflict?.property == "name", "\(String(describing: conflict))")
            #expect(conflict?.found.contains("Owls") == true, "\(String(describing: conflict))")
            // Nothing changed: the stacks and the objects are as before.
            #expect(team.value(forKey: "name") as? String == name)
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == players)
            #expect(redone ? context.canUndo : context.canRedo)
            #expect((redone ? context.undoActionName : context.redoActionName) == "sign")
            try context.save()
        }
        let mine = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            (try context.existingObject(with: teamID).value(forKey: "name") as? String, try context.count(for: FetchRequest(entityName: "Player")))
        }
        let stored = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            (try context.existingObject(with: teamID).value(forKey: "name") as? String, try context.count(for: FetchRequest(entityName: "Player")))
        }
        #expect(mine == stored, "\(mine) \(stored)")
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}
