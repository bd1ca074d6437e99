import Foundation
@testable import Strata
import StrataLog
import StrataTestSupport
import Testing

/// Reverting a transaction that is itself an undo or a redo (spec 0006 §25.5): written as
/// what it is — the revert of an undo of a group redoes that group, the revert of a redo
/// undoes it — so persisted undo reads the group back where it stands.
@Suite("Contexts: reverting an undo or a redo transaction")
struct RevertOfUndoTests {
    private func token(_ coordinator: PersistentStoreCoordinator, _ sequence: UInt64) throws -> HistoryToken {
        HistoryToken(storeIdentifier: try #require(coordinator.persistentStores.first).identifier, sequence: sequence)
    }

    /// After a restart, the editor's persisted undo holds the rename done (to undo, nothing
    /// to redo); undoing it gives "Otters" back and saves, and verify is clean.
    private func expectRenameToUndoAfterRestart(
        _ dir: TemporaryDirectory, _ teamID: ManagedObjectID, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(undoable && !redoable, "the rename is done again: undo it, nothing to redo", sourceLocation: sourceLocation)
            try context.undo()
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters", sourceLocation: sourceLocation)
            try context.save()
        }
        #expect(try #require(restarted.persistentStores.first).log.verify().isClean, sourceLocation: sourceLocation)
    }

    /// Transaction 1 ("setup"): team Otters; then the editor saves 2 in two groups — 0
    /// renames it "Herons", 1 colors it red — and undoes group 1 (3: undo of (2, 1)).
    private func renamedAndRecoloredThenColorUndone(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, team: ManagedObjectID) {
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (teamID, _) = try await saveOtters(coordinator)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            context.processPendingChanges()
            team.setValue("red", forKey: "uniformColor")
            try context.save()  // 2: groups 0 (name) and 1 (color)
            try context.undo()
            try context.save()  // 3: undo of (2, 1)
        }
        return (coordinator, teamID)
    }

    /// Transaction 1 ("setup"): team Otters; then the editor renames it "Herons" (2) and
    /// undoes that (3: undo of 2).
    private func renamedAndUndone(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, team: ManagedObjectID) {
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (team, _) = try await saveOtters(coordinator)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: team).setValue("Herons", forKey: "name")
            try context.save()  // 2
            try context.undo()
            try context.save()  // 3: undo of 2
        }
        return (coordinator, team)
    }

    @Test("the editor reverts its own undo (3): written as the redo of 2; after a restart its persisted undo has the rename to undo again, nothing to redo")
    func revertOfAnUndoIsARedo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await renamedAndUndone(dir)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(coordinator, 3))
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Herons")
            try context.save()  // 4
        }
        let written = try #require(coordinator.persistentStores.first).log.read { try $0.event(4) }
        #expect(written.kind == .redo(of: 2, group: 0))
        #expect(written.groups.map(\.origin) == [.redo(of: 2, group: 0)])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(throws: ContextError.invalidArgument("transaction 3 (undo of 2 (group 0)) was reverted already, by transaction 4, and not redone since; nothing was changed")) {
                try context.revertTransaction(at: try token(coordinator, 3))
            }
            let changed = context.hasChanges
            #expect(!changed)
        }
        try await expectRenameToUndoAfterRestart(dir, teamID)
    }

    @Test("the editor redoes the rename (4: redo of 2), then reverts that redo: written as the undo of 2; after a restart the rename is on the redo stack again")
    func revertOfARedoIsAnUndo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await renamedAndUndone(dir)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.redo()
            try context.save()  // 4: redo of 2
        }
        try await editor(openCoordinator(dir, model: try SeedModels.leagueManager)).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(coordinator, 4))
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
            try context.save()  // 5
        }
        let written = try #require(coordinator.persistentStores.first).log.read { try $0.event(5) }
        #expect(written.kind == .undo(of: 2, group: 0))
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(!undoable && redoable, "the rename is undone again: redo it, nothing to undo")
            try context.redo()
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Herons")
            try context.save()
        }
        #expect(try #require(restarted.persistentStores.first).log.verify().isClean)
    }

    @Test("the editor reverts its own redo (4) with the rename on its undo stack: the rename leaves its undo stack (undo would apply it backwards a second time), redo applies 4 again")
    func revertOfOwnRedoLeavesUndoStack() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await renamedAndUndone(dir)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.redo()
            try context.save()  // 4: redo of 2
            try context.revertTransaction(at: try token(coordinator, 4))
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(!undoable && redoable, "the rename is undone: nothing to undo, redo applies it again")
            try context.undo()
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
            try context.save()  // 5: undo of 2
            try context.redo()
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Herons")
            try context.save()  // 6: redo of 2
        }
        let written = try #require(coordinator.persistentStores.first).log.read { try $0.head }
        #expect(written == 6)
        #expect(try #require(coordinator.persistentStores.first).log.verify().isClean)
    }

    @Test("a fresh editor reads the rename back on its undo stack below other groups, reverts its redo (4): when undo reaches it, it isn't undone a second time")
    func revertOfOwnRedoLeavesOlderUndo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await renamedAndUndone(dir)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.redo()
            try context.save()  // 4: redo of 2
        }
        // 5: more groups than a context reads back at first (32): the rename is read later.
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            for index in 0..<40 {
                team.setValue("color \(index)", forKey: "uniformColor")
                context.processPendingChanges()
            }
            try context.save()
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(restarted, 4))
            try context.save()  // 6: undo of 2
            while context.canUndo { try context.undo() }
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
        }
    }

    @Test("undo transaction 3 undid group 1 (the color) of 2; 5 redid group 0 (the name): 5 isn't 3's revert, so reverting 3 over a later color is refused as a conflict, not as reverted already by 5")
    func redoOfAnotherGroupIsNoRevert() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await renamedAndRecoloredThenColorUndone(dir)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            try context.save()  // 4: undo of (2, 0)
            try context.redo()
            try context.save()  // 5: redo of (2, 0)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("blue", forKey: "uniformColor")
            try context.save()  // 6
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> Void in
            #expect {
                try context.revertTransaction(at: try token(coordinator, 3))
            } throws: { error in
                guard case .undoConflict(_, let property, _, _) = error as? ContextError else { return false }
                return property == "uniformColor"
            }
        }
    }

    @Test("undo transaction 3 written before groups carried origins (its kind names the group): the editor's revert of it is written as the redo of 2, so after a restart the rename is on its undo stack")
    func revertOfAnOldFormatUndo() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (teamID, _) = try await saveOtters(coordinator)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()  // 2
        }
        let store = try #require(coordinator.persistentStores.first)
        var draft = TransactionDraft(author: "alice", contextName: "editor", kind: .undo(of: 2, group: 0))
        draft.update(.stored(try #require(teamID.storedID)), values: ["name": .attribute(.string("Otters"))])
        try store.log.commit(draft)  // 3: undo of 2, its group without origin
        let reopened = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(reopened).perform { (context: isolated ManagedObjectContext) throws in
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(!undoable && redoable)
            try context.revertTransaction(at: try token(reopened, 3))
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Herons")
            try context.save()  // 4
        }
        let written = try #require(reopened.persistentStores.first).log.read { try $0.event(4) }
        #expect(written.groups.map(\.origin) == [.redo(of: 2, group: 0)])
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws -> Void in
            #expect(throws: ContextError.invalidArgument("transaction 3 (undo of 2 (group 0)) was reverted already, by transaction 4, and not redone since; nothing was changed")) {
                try context.revertTransaction(at: try token(reopened, 3))
            }
        }
        try await expectRenameToUndoAfterRestart(dir, teamID)
    }

    @Test("undo transaction 3's revert written before session 23 (4: the undo of 3 itself): reverting 3 again is refused as reverted already by 4")
    func oldStyleRevertOfAnUndoIsReverted() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await renamedAndUndone(dir)
        let store = try #require(coordinator.persistentStores.first)
        var draft = TransactionDraft(author: "ops", kind: .undo(of: 3, group: 0))
        draft.beginGroup(origin: .undo(of: 3, group: 0))
        draft.update(.stored(try #require(teamID.storedID)), values: ["name": .attribute(.string("Herons"))])
        try store.log.commit(draft)  // 4
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> Void in
            #expect(throws: ContextError.invalidArgument("transaction 3 (undo of 2 (group 0)) was reverted already, by transaction 4, and not redone since; nothing was changed")) {
                try context.revertTransaction(at: try token(coordinator, 3))
            }
        }
    }

    @Test("the editor reverts its save 2 (name, color) with 3, its undo of the color, as one: after a restart both groups are on its redo stack and redo cleanly")
    func revertOfASaveWithItsUndo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await renamedAndRecoloredThenColorUndone(dir)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransactions(at: [try token(coordinator, 2), try token(coordinator, 3)])
            try context.save()  // 4
        }
        let written = try #require(coordinator.persistentStores.first).log.read { try $0.event(4) }
        #expect(written.groups.map(\.origin) == [.redo(of: 2, group: 1), .undo(of: 2, group: 1), .undo(of: 2, group: 0)])
        #expect(try #require(coordinator.persistentStores.first).log.verify().isClean)
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect(team.value(forKey: "uniformColor") as? String == nil)
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(!undoable && redoable)
            while context.canRedo { try context.redo() }
            #expect(team.value(forKey: "name") as? String == "Herons")
            #expect(team.value(forKey: "uniformColor") as? String == "red")
            try context.save()
            while context.canUndo { try context.undo() }
            #expect(team.value(forKey: "name") as? String == "Otters")
            try context.save()
        }
        #expect(try #require(restarted.persistentStores.first).log.verify().isClean)
    }
}
