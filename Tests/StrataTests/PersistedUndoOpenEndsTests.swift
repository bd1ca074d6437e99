import Foundation
import StrataLog
import StrataTestSupport
import Testing

@testable import Strata

/// Persisted undo's open ends (spec 0006 §13): after a restart the stacks are what the
/// context had at its last save or quit — a group it dropped stays dropped while an undo of
/// saved work waits to be saved, a group `levelsOfUndo` dropped when a group closed stays
/// dropped though that group is never saved, and a part a refresh split off a group comes
/// back as that part.
@Suite("Contexts: persisted undo of drops before a save and of split groups")
struct PersistedUndoOpenEndsTests {
    private static func name(_ context: isolated ManagedObjectContext, _ id: ManagedObjectID) throws -> String? {
        try context.existingObject(with: id).value(forKey: "name") as? String
    }

    /// Saves the editor's renames of the team, one group (and one save) each.
    private static func saveRenames(_ context: isolated ManagedObjectContext, _ teamID: ManagedObjectID, _ names: [String]) throws {
        let team = try context.existingObject(with: teamID)
        for name in names {
            team.setValue(name, forKey: "name")
            try context.save()
        }
    }

    @Test("removeAllUndoActions() while an undo of saved work waits to be saved: after a quit that never saves it, nothing is undoable")
    func removeAllWithPendingUndoStaysCleared() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID) = try await leagueStore(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            try Self.saveRenames(context, teamID, ["One", "Two"])
            try context.undo()  // Two undone, unsaved
            context.removeAllUndoActions()
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(!undoable && !redoable)
        }  // quit: the undo is never saved
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.name(context, teamID) == "Two", "the undo was never saved")
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(!undoable && !redoable, "the groups removeAllUndoActions() dropped stay dropped")
        }
    }

    @Test("levelsOfUndo lowered while an undo of saved work waits to be saved: after a quit that never saves it, the undone group is done again (on the undo stack) and the dropped one stays dropped")
    func levelsLoweredWithPendingUndo() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID) = try await leagueStore(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            try Self.saveRenames(context, teamID, ["One", "Two", "Three"])
            try context.undo()  // Three undone, unsaved
            context.levelsOfUndo = 1  // One dropped; Two kept
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.name(context, teamID) == "Three")
            let redoable = context.canRedo
            #expect(!redoable, "the undo of Three was never saved: Three is done")
            try context.undo()
            #expect(try Self.name(context, teamID) == "Two")
            try context.undo()
            #expect(try Self.name(context, teamID) == "One")
            let undoable = context.canUndo
            #expect(!undoable, "the group levelsOfUndo dropped doesn't come back")
            try context.save()
        }
        #expect(try #require(restarted.persistentStores.first).log.verify().isClean)
    }

    @Test("a group closing past levelsOfUndo drops a saved group: after a quit before that group is saved, the dropped group stays dropped")
    func trimAtCloseRecordedWithoutSave() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID) = try await leagueStore(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            context.levelsOfUndo = 2
            try Self.saveRenames(context, teamID, ["One", "Two"])
            try context.existingObject(with: teamID).setValue("red", forKey: "uniformColor")
            context.processPendingChanges()  // One's group dropped; this one never saved
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.name(context, teamID) == "Two")
            try context.undo()
            #expect(try Self.name(context, teamID) == "One")
            let undoable = context.canUndo
            #expect(!undoable, "the group dropped when the unsaved group closed doesn't come back")
        }
    }

    @Test("a part a refresh split off a group whose undo was saved: after a restart the part is still done (undo undoes it) and the rest is on the redo stack; both redo")
    func splitPartReadsBackAsPart() async throws {
        let dir = try TemporaryDirectory()
        let (first, otters) = try await leagueStore(dir)
        let kites = try await privateContext(first).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            try context.save()
            return team.objectID
        }
        let live = try await editor(first).perform { (context: isolated ManagedObjectContext) throws -> (Bool, Bool) in
            try context.existingObject(with: otters).setValue("Herons", forKey: "name")
            try context.existingObject(with: kites).setValue("Swans", forKey: "name")
            try context.save()  // one group renaming both
            try context.undo()
            context.refresh(try context.existingObject(with: otters), mergeChanges: false)  // Herons stays done
            try context.save()  // the undo of Swans only
            #expect(try Self.name(context, otters) == "Herons")
            #expect(try Self.name(context, kites) == "Kites")
            return (context.canUndo, context.canRedo)
        }
        #expect(live.0 && live.1, "before the restart: the part on the undo stack, the rest on the redo stack")
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(undoable && redoable, "the part is on the undo stack, the rest on the redo stack")
            try context.undo()
            #expect(try Self.name(context, otters) == "Otters")
            #expect(try Self.name(context, kites) == "Kites")
            let more = context.canUndo
            #expect(!more)
            try context.save()
        }
        let again = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(again).perform { (context: isolated ManagedObjectContext) throws in
            try context.redo()  // the part, undone last
            #expect(try Self.name(context, otters) == "Herons")
            #expect(try Self.name(context, kites) == "Kites")
            try context.redo()
            #expect(try Self.name(context, kites) == "Swans")
            try context.save()
        }
        #expect(try #require(again.persistentStores.first).log.verify().isClean)
    }
}

extension PersistedUndoOpenEndsTests {
    @Test("a child's change made with undo registration disabled is part of the one group its save pushes into the parent (Core Data's parent registers what its objects undergo): the parent undoes it, before and after its save and a restart alike")
    func childUnrecordedChangesUndoableInParent() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID) = try await leagueStore(dir)
        let parent = editor(first)
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.disableUndoRegistration()
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            context.enableUndoRegistration()
            let undoable = context.canUndo
            #expect(!undoable, "not undoable in the child")
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let undoable = context.canUndo
            #expect(undoable, "the push is one group of the parent's")
            try context.save()
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.name(context, teamID) == "Herons")
            try context.undo()
            #expect(try Self.name(context, teamID) == "Otters", "the parent's group reads back as the parent had it")
            try context.save()
        }
    }
}
