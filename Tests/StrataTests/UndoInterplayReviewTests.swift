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
}
