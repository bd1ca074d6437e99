import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// Review of how undo and redo meet the context's other features (session 24): refresh,
/// merges of other contexts' deletes.
@Suite("Undo interplay review (session 24)")
struct UndoInterplayReviewTests {
    /// The store's name of team `id`, read by a new context.
    func storedName(_ coordinator: PersistentStoreCoordinator, _ id: ManagedObjectID) async throws -> String? {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: id).value(forKey: "name") as? String
        }
    }

    @Test("refresh(false) discarding the whole pending undo of a saved group: the group is undoable again, not redoable; undo, save and redo then work")
    func refreshDiscardsPendingUndo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator, name: "editor", author: "alice").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            context.setActionName("Rename")
            try context.save()
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Otters")
            context.refresh(team, mergeChanges: false)  // the unsaved undo is discarded
            #expect(team.value(forKey: "name") as? String == "Herons")
            let (canUndo, canRedo, dirty, name) = (context.canUndo, context.canRedo, context.hasChanges, context.undoActionName)
            // Before, the group stayed on the redo stack: redo was refused for good ("undo
            // expected Otters but the store holds Herons, written by another change") and
            // the rename could no longer be undone.
            #expect(canUndo && !canRedo && !dirty)
            #expect(name == "Rename")
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Otters")
            try context.save()
            try context.redo()
            #expect(team.value(forKey: "name") as? String == "Herons")
            try context.save()
        }
        #expect(try await storedName(coordinator, teamID) == "Herons")
        let log = try #require(coordinator.persistentStores.first).log
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.head == 4)
            #expect(try reader.event(3).kind == .undo(of: 2, group: 0))
            #expect(try reader.event(4).kind == .redo(of: 2, group: 0))
        }
    }

    @Test("refresh(false) discarding the whole pending redo of a saved group: the group is redoable again and still whole")
    func refreshDiscardsPendingRedo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator, name: "editor", author: "alice").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            try context.save()
            try context.undo()
            try context.save()
            try context.redo()
            #expect(team.value(forKey: "name") as? String == "Herons")
            context.refresh(team, mergeChanges: false)  // the unsaved redo is discarded
            #expect(team.value(forKey: "name") as? String == "Otters")
            let (canUndo, canRedo, dirty) = (context.canUndo, context.canRedo, context.hasChanges)
            #expect(!canUndo && canRedo && !dirty)
            // The group still holds the team: redo renames it again, and undo takes it back.
            try context.redo()
            #expect(team.value(forKey: "name") as? String == "Herons")
            try context.save()
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Otters")
            try context.save()
        }
        #expect(try await storedName(coordinator, teamID) == "Otters")
    }

    @Test("a merged delete of an object an unsaved undone group changed: redo leaves it gone, redoes the rest, and the save succeeds")
    func mergedDeleteLeavesUnsavedRedo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let otherID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            try context.save()
            return team.objectID
        }
        let editor = privateContext(coordinator, name: "editor")
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.existingObject(with: otherID).setValue("Hawks", forKey: "name")
            context.processPendingChanges()
            try context.undo()  // unsaved: the group waits on the redo stack
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
        }
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.registeredObject(for: teamID) == nil, "the merge removed the deleted team")
            try context.redo()
            // Before, redo brought the deleted team back as a fault holding "Herons", and the
            // save failed: "the context saw an unknown version; the store has deleted it".
            #expect(context.registeredObject(for: teamID) == nil)
            let updated = context.updatedObjects.map(\.objectID)
            #expect(updated == [otherID])
            try context.save()
        }
        #expect(try await storedName(coordinator, otherID) == "Hawks")
    }

    @Test("a merged delete of the only object an unsaved undone group changed: the group leaves the redo stack")
    func mergedDeleteEmptiesUnsavedRedo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let editor = privateContext(coordinator, name: "editor")
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            context.processPendingChanges()
            try context.undo()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
        }
        let log = try #require(coordinator.persistentStores.first).log
        let head = try log.head
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            let canRedo = context.canRedo
            #expect(!canRedo)
            try context.redo()
            let dirty = context.hasChanges
            #expect(!dirty)
            try context.save()
        }
        #expect(try log.head == head, "nothing to write")
    }
}
