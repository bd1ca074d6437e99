import Foundation
import StrataLog
import StrataTestSupport
import Testing

@testable import Strata

/// Persisted undo across a restart (spec 0006 §13, §25), undo conflicts that block the stack
/// (§12), and what a context that saves often and never merges remembers (§16.3).
@Suite("Contexts: persisted undo after a restart")
struct PersistedUndoRestartTests {
    static let saves = Int(ProcessInfo.processInfo.environment["STRATA_OWN_SEQUENCE_SAVES"] ?? "") ?? 100

    private func token(_ coordinator: PersistentStoreCoordinator, _ sequence: UInt64) throws -> HistoryToken {
        HistoryToken(storeIdentifier: try #require(coordinator.persistentStores.first).identifier, sequence: sequence)
    }

    private static func teamNames(_ context: isolated ManagedObjectContext) throws -> [String] {
        try context.fetch(FetchRequest(entityName: "Team")).compactMap { $0.value(forKey: "name") as? String }.sorted()
    }

    private static func teamValues(_ context: isolated ManagedObjectContext, _ id: ManagedObjectID) throws -> [String?] {
        let team = try context.existingObject(with: id)
        return [team.value(forKey: "name") as? String, team.value(forKey: "uniformColor") as? String]
    }

    @Test("groups levelsOfUndo dropped stay dropped after a restart (the restarted context sets no limit), and the redo stack kept past the trim comes back with the undo stack")
    func levelsOfUndoHoldAfterRestart() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID) = try await leagueStore(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            context.levelsOfUndo = 3
            let team = try context.existingObject(with: teamID)
            for name in ["One", "Two", "Three", "Four"] {
                team.setValue(name, forKey: "name")
                try context.save()
            }
            // Recorded with the save that dropped One, in its write transaction.
            let log = try context.core.store().log
            let recorded = try log.read { reader in
                (try reader.head, try reader.undoCheckpoint(author: context.transactionAuthor, contextName: context.name))
            }
            #expect(recorded.1?.through == recorded.0)
            #expect(recorded.1?.undo.map(\.sequence) == [recorded.0 - 2, recorded.0 - 1, recorded.0])
            try context.undo()  // Four undone: on the redo stack
            try context.save()
            context.levelsOfUndo = 1  // the undo stack keeps Three; Two is dropped, as One was
            let undoable = context.canUndo
            #expect(undoable)
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Three")
            try context.redo()
            #expect(team.value(forKey: "name") as? String == "Four")
            try context.undo()
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Two")
            let undoable = context.canUndo
            #expect(!undoable, "the groups levelsOfUndo dropped before the restart don't come back")
            try context.save()
        }
        #expect(try #require(restarted.persistentStores.first).log.verify().isClean)
    }

    @Test("removeAllUndoActions() and rollback() drop the stacks for good: after a restart only the groups saved since are undoable (a group pending at removeAllUndoActions() and saved after it included)")
    func clearedStacksStayClearedAfterRestart() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID) = try await leagueStore(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            try context.save()
            team.setValue("Kites", forKey: "name")
            context.processPendingChanges()  // a group waiting to be saved
            context.removeAllUndoActions()
            try context.save()  // writes it, dropped
            team.setValue("red", forKey: "uniformColor")
            try context.save()
        }
        let second = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(second).perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            #expect(try Self.teamValues(context, teamID) == ["Kites", nil])
            let undoable = context.canUndo
            #expect(!undoable, "the groups removeAllUndoActions() dropped don't come back")
            try context.save()
        }
        try await editor(second).perform { (context: isolated ManagedObjectContext) throws in
            let redoable = context.canRedo
            #expect(redoable)
            let team = try context.existingObject(with: teamID)
            team.setValue("Swans", forKey: "name")
            try context.save()
            team.setValue("Rooks", forKey: "name")
            context.rollback()
            let undoable = context.canUndo
            #expect(!undoable)
        }
        let third = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(third).perform { (context: isolated ManagedObjectContext) throws in
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(!undoable && !redoable, "the stacks rollback() cleared stay clear after a restart")
            #expect(try Self.teamValues(context, teamID) == ["Swans", nil])
        }
    }

    @Test("a batch import reverted and saved by a persisted-undo context: after a restart the revert is on its redo stack (redo brings the imported objects back, saved as redo(of:)), and after another restart the redone import can be reverted again by undo")
    func revertedBatchImportRedoableAfterRestart() async throws {
        let dir = try TemporaryDirectory()
        let (first, _) = try await leagueStore(dir)  // 1: Otters
        try await privateContext(first, name: "loader", author: "loader").perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchInsertRequest(entityName: "Team", objects: [["name": "Imported 1"], ["name": "Imported 2"]]))
        }
        let store = try #require(first.persistentStores.first)
        #expect(try store.log.read { try $0.event(2) }.kind == .import)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(first, 2), actionName: "Revert import")
            try context.save()  // 3: undo(of: 2, group: 0)
            #expect(try Self.teamNames(context) == ["Otters"])
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            let redoable = context.canRedo
            #expect(redoable, "the revert of the batch import is on the redo stack after the restart")
            try context.redo()
            try context.save()  // 4: redo(of: 2, group: 0)
            #expect(try Self.teamNames(context) == ["Imported 1", "Imported 2", "Otters"])
        }
        #expect(try store.log.read { try $0.event(4) }.kind == .redo(of: 2, group: 0))
        let again = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(again).perform { (context: isolated ManagedObjectContext) throws in
            let undoable = context.canUndo
            #expect(undoable, "the redone import is on the undo stack after the restart")
            try context.undo()
            try context.save()
            #expect(try Self.teamNames(context) == ["Otters"])
        }
        #expect(try store.log.verify().isClean)
    }

    @Test("another author's save reverted and saved by a persisted-undo context: after a restart redo applies it again")
    func revertedForeignSaveRedoableAfterRestart() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID) = try await leagueStore(dir)  // 1: Otters
        try await privateContext(first, name: "import", author: "importer").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()  // 2
        }
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(first, 2))
            try context.save()  // 3
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let name = try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws -> String? in
            let redoable = context.canRedo
            #expect(redoable)
            try context.redo()
            try context.save()
            return try context.existingObject(with: teamID).value(forKey: "name") as? String
        }
        #expect(name == "Herons")
        #expect(try #require(restarted.persistentStores.first).log.verify().isClean)
    }

    @Test("a top undo group another writer conflicts with: undo is refused each time naming the conflict and the way forward (removeAllUndoActions()), never skipping to the group below; removeAllUndoActions() drops it and undo works again")
    func conflictingTopGroupBlocksUntilRemoved() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let context = privateContext(coordinator, name: "editor", author: "alice")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            context.processPendingChanges()
            team.setValue("red", forKey: "uniformColor")
            try context.save()
        }
        try await privateContext(coordinator, name: "other", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("blue", forKey: "uniformColor")
            try context.save()
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            for _ in 0..<2 {
                do {
                    try context.undo()
                    Issue.record("expected an undo conflict")
                } catch let error as ContextError {
                    guard case .undoConflict(let object, let property, _, let found) = error else {
                        Issue.record("expected an undo conflict, got \(error)")
                        continue
                    }
                    #expect(object.contains("Team/p1") && property == "uniformColor" && found.contains("blue"))
                    #expect(error.description.contains("removeAllUndoActions()"), "the message says how to go on: \(error.description)")
                }
                #expect(team.value(forKey: "name") as? String == "Herons", "the group below is not undone in its place")
            }
            let undoable = context.canUndo
            #expect(undoable)
            context.removeAllUndoActions()
            let stillUndoable = context.canUndo
            #expect(!stillUndoable)
            team.setValue("Kites", forKey: "name")
            try context.save()
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Herons")
            try context.save()
        }
        let stored = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [String?] in
            let team = try context.existingObject(with: teamID)
            return [team.value(forKey: "name") as? String, team.value(forKey: "uniformColor") as? String]
        }
        #expect(stored == ["Herons", "blue"], "the other writer's change was never overwritten")
    }

    @Test("a context that saves often and never merges, while another writer commits between its saves, remembers a bounded number of its own sequences; its merge afterwards sees exactly the other writer's changes")
    func ownSequencesStayBounded() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let importer = privateContext(coordinator, name: "importer", author: "importer")
        let other = privateContext(coordinator, name: "other", author: "bob")
        try await importer.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            _ = try context.existingObject(with: teamID).value(forKey: "name")
        }
        var imported: Set<ManagedObjectID> = []
        for index in 0..<Self.saves {
            imported.insert(
                try await importer.perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
                    let team = try context.insertNewObject(forEntityName: "Team")
                    team.setValue("import \(index)", forKey: "name")
                    try context.save()
                    return team.objectID
                })
            try await other.perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: teamID).setValue("other \(index)", forKey: "name")
                try context.save()
            }
        }
        let head = try #require(coordinator.persistentStores.first).log.head
        let (remembered, merge, name, through) = try await importer.perform {
            (context: isolated ManagedObjectContext) throws -> (Int, ContextDidMerge?, String?, UInt64) in
            let remembered = context.core.ownSequences.count
            var merge: ContextDidMerge?
            let observer = context.addObserver { change in
                if case .didMerge(let value) = change.notification { merge = value }
            }
            let through = try context.mergeStoreChanges()
            context.removeObserver(observer)
            return (remembered, merge, context.registeredObject(for: teamID)?.value(forKey: "name") as? String, through)
        }
        #expect(remembered <= ContextCore.ownSequencesBound, "own sequences remembered: \(remembered) after \(Self.saves) saves")
        #expect(through == head)
        #expect(name == "other \(Self.saves - 1)")
        #expect(merge?.updated == [teamID], "the merge sees the other writer's change and none of the importer's own saves")
        #expect(merge?.inserted.isEmpty == true)
        #expect(merge.map { $0.updated.isDisjoint(with: imported) } == true)
    }
}
