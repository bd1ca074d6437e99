import Foundation
import StrataLog
import StrataTestSupport
import Testing

@testable import Strata

/// A team whose `willSave` stamps `uniformColor` with `setPrimitiveValue` (not recorded for
/// undo, spec 0006 §9.2), as an app stamps a modification date.
final class StampedTeam: ManagedObject {
    override func willSave() {
        super.willSave()
        guard !isDeleted else { return }
        let stamp = "stamp of \(value(forKey: "name") as? String ?? "?")"
        if value(forKey: "uniformColor") as? String != stamp { setPrimitiveValue(stamp, forKey: "uniformColor") }
    }
}

/// Persisted undo (spec 0006 §13) of changes the context didn't record for undo — saved with
/// registration disabled, or set with `setPrimitiveValue` — which the log marks (spec 0004
/// §3.2, group flag bit 2); drops of groups recorded while changes wait to be saved; and the
/// undo record carried by `strata replay --into` (spec 0007).
@Suite("Contexts: persisted undo of unrecorded changes, drops and copies")
struct PersistedUndoUnrecordedTests {
    private static func teamValues(_ context: isolated ManagedObjectContext, _ id: ManagedObjectID) throws -> [String?] {
        let team = try context.existingObject(with: id)
        return [team.value(forKey: "name") as? String, team.value(forKey: "uniformColor") as? String]
    }

    private static func stacks(_ context: isolated ManagedObjectContext) -> (Bool, Bool, String?) {
        (context.canUndo, context.canRedo, context.undoActionName)
    }

    @Test("a save made with undo registration disabled isn't undoable after a restart, as it isn't before: undo undoes the group below it")
    func registrationDisabledSaveNotUndoableAfterRestart() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID) = try await leagueStore(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            context.setActionName("Rename")
            try context.save()
            context.disableUndoRegistration()
            team.setValue("red", forKey: "uniformColor")
            try context.save()
            context.enableUndoRegistration()
            #expect(context.undoActionName == "Rename")
        }
        let store = try #require(first.persistentStores.first)
        let event = try store.log.read { try $0.event(try $0.head) }
        #expect(event.groups.map(\.isRecordedForUndo) == [false], "the log says the save's changes weren't recorded for undo")
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.undoActionName == "Rename", "the unrecorded save is not on the undo stack")
            try context.undo()
            #expect(try Self.teamValues(context, teamID) == ["Otters", "red"])
            let undoable = context.canUndo
            #expect(!undoable)
            try context.save()
        }
        #expect(try store.log.verify().isClean)
    }

    @Test("a mixed save — a recorded group and a change made with registration disabled — undoes only the recorded group after a restart, and a redo stack the unrecorded change left alone stays")
    func mixedSaveUndoesOnlyRecordedGroupAfterRestart() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID) = try await leagueStore(dir)
        let live = try await editor(first).perform { (context: isolated ManagedObjectContext) throws -> (Bool, Bool, String?) in
            let team = try context.existingObject(with: teamID)
            team.setValue("Kites", forKey: "name")
            context.setActionName("Kites")
            try context.save()
            try context.undo()
            try context.save()  // Kites on the redo stack
            team.setValue("Herons", forKey: "name")
            context.setActionName("Rename")
            context.processPendingChanges()  // clears the redo stack
            context.disableUndoRegistration()
            team.setValue("red", forKey: "uniformColor")
            context.enableUndoRegistration()
            try context.save()  // one transaction: the recorded group, then the unrecorded one
            try context.undo()
            try context.save()  // Rename on the redo stack, the colour not undone
            context.disableUndoRegistration()
            team.setValue("blue", forKey: "uniformColor")
            context.enableUndoRegistration()
            try context.save()  // unrecorded: the redo stack stays
            return Self.stacks(context)
        }
        #expect(live.0 == false && live.1 == true)
        let store = try #require(first.persistentStores.first)
        let mixed = try store.log.read { try $0.event(try $0.head - 2) }
        #expect(mixed.groups.map(\.isRecordedForUndo) == [true, false])
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            let after = Self.stacks(context)
            #expect(after.0 == live.0 && after.1 == live.1, "the stacks after the restart are the live ones: \(after)")
            #expect(context.redoActionName == "Rename")
            try context.redo()
            #expect(try Self.teamValues(context, teamID) == ["Herons", "blue"])
            let undoable = context.canUndo
            #expect(undoable)
            try context.undo()
            #expect(try Self.teamValues(context, teamID) == ["Otters", "blue"])
            let more = context.canUndo
            #expect(!more, "the colour changes were never undoable")
            try context.save()
        }
        #expect(try store.log.verify().isClean)
    }

    @Test("a willSave stamp set with setPrimitiveValue, saved with an undo: after a restart the undone group is still on the redo stack and the stamp is no undo group")
    func willSaveStampKeepsRedoAfterRestart() async throws {
        let dir = try TemporaryDirectory()
        let (seeded, teamID) = try await leagueStore(dir)
        _ = seeded
        let first = try openCoordinator(dir, model: try SeedModels.leagueManager, classes: [(StampedTeam.self, "Team")])
        let live = try await editor(first).perform { (context: isolated ManagedObjectContext) throws -> (Bool, Bool, String?) in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            context.setActionName("Herons")
            try context.save()
            team.setValue("Kites", forKey: "name")
            context.setActionName("Kites")
            try context.save()
            try context.undo()
            try context.save()  // an undo, and willSave's stamp in the same transaction
            #expect(try Self.teamValues(context, teamID) == ["Herons", "stamp of Herons"])
            return Self.stacks(context)
        }
        #expect(live.0 && live.1 && live.2 == "Herons")
        let store = try #require(first.persistentStores.first)
        let undo = try store.log.read { try $0.event(try $0.head) }
        #expect(undo.groups.map(\.isRecordedForUndo) == [true, false])
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager, classes: [(StampedTeam.self, "Team")])
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            let after = Self.stacks(context)
            #expect(after.0 == live.0 && after.1 == live.1 && after.2 == live.2, "the stacks after the restart are the live ones: \(after)")
            #expect(context.redoActionName == "Kites")
            try context.redo()
            #expect(try Self.teamValues(context, teamID)[0] == "Kites")
            try context.save()
        }
        #expect(try store.log.verify().isClean)
    }

    @Test("a group without the mark (as every event written before it, format version 1) is still pushed after a restart; one committed with the mark through the log is not")
    func unmarkedGroupStillPushedAfterRestart() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID) = try await leagueStore(dir)
        let store = try #require(first.persistentStores.first)
        let stored = try #require(teamID.storedID)
        var unmarked = TransactionDraft(author: "alice", contextName: "editor")
        unmarked.update(.stored(stored), values: ["name": .attribute(.string("Herons"))])
        _ = try store.log.commit(unmarked)
        var marked = TransactionDraft(author: "alice", contextName: "editor")
        marked.beginGroup(recordedForUndo: false)
        marked.update(.stored(stored), values: ["uniformColor": .attribute(.string("red"))])
        _ = try store.log.commit(marked)
        let events = try store.log.read { reader in [try reader.event(2), try reader.event(3)] }
        #expect(events.map { $0.groups.map(\.isRecordedForUndo) } == [[true], [false]])
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            let undoable = context.canUndo
            #expect(undoable)
            try context.undo()
            #expect(try Self.teamValues(context, teamID) == ["Otters", "red"])
            let more = context.canUndo
            #expect(!more)
            try context.save()
        }
        #expect(try store.log.verify().isClean)
    }

    @Test("levelsOfUndo lowered while changes wait to be saved, then a quit that never saves: the saved groups it dropped stay dropped after a restart")
    func levelsOfUndoDropBeforeQuitStaysDropped() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID) = try await leagueStore(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            for name in ["One", "Two", "Three"] {
                team.setValue(name, forKey: "name")
                try context.save()
            }
            team.setValue("red", forKey: "uniformColor")
            context.processPendingChanges()  // a group waiting to be saved
            context.levelsOfUndo = 2  // keeps it and Three; One and Two are dropped
            // …and the app quits without saving.
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            #expect(try Self.teamValues(context, teamID) == ["Two", nil])
            let undoable = context.canUndo
            #expect(!undoable, "the groups levelsOfUndo dropped don't come back")
            try context.save()
        }
    }

    @Test("removeAllUndoActions() while changes wait to be saved, then a quit that never saves: nothing is undoable after a restart; saving instead still drops the pending group")
    func removeAllBeforeQuitStaysRemoved() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID) = try await leagueStore(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            try context.save()
            team.setValue("red", forKey: "uniformColor")
            context.removeAllUndoActions()
        }
        let second = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(second).perform { (context: isolated ManagedObjectContext) throws in
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(!undoable && !redoable, "the stacks removeAllUndoActions() cleared stay clear")
            let team = try context.existingObject(with: teamID)
            team.setValue("Kites", forKey: "name")
            try context.save()
            team.setValue("blue", forKey: "uniformColor")
            context.processPendingChanges()
            context.removeAllUndoActions()
            try context.save()  // writes the dropped group
        }
        let third = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(third).perform { (context: isolated ManagedObjectContext) throws in
            let undoable = context.canUndo
            #expect(!undoable)
            #expect(try Self.teamValues(context, teamID) == ["Kites", "blue"])
        }
    }

    @Test("strata replay --into carries the undo record: persisted undo in the copy is the original's; a copy through a point before the record was written reads the log as it was")
    func replayIntoCarriesUndoRecord() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID) = try await leagueStore(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            for name in ["One", "Two", "Three"] {
                team.setValue(name, forKey: "name")
                try context.save()  // 2, 3, 4
            }
            context.levelsOfUndo = 1  // recorded at once: only Three stays
        }
        let store = try #require(first.persistentStores.first)
        let strata = BuildProducts.executable("strata")
        let copy = try TemporaryDirectory()
        let copied = try runProcess(strata, ["replay", store.log.path, "--into", copy.file("store")])
        #expect(copied.status == 0, "\(copied.standardError)")
        let early = try TemporaryDirectory()
        let earlyCopy = try runProcess(strata, ["replay", store.log.path, "--to", "3", "--into", early.file("store")])
        #expect(earlyCopy.status == 0, "\(earlyCopy.standardError)")

        for (label, directory, expected) in [("original", dir, ["Two"]), ("copy", copy, ["Two"]), ("copy through 3", early, ["One", "Otters"])] {
            let coordinator = try openCoordinator(directory, model: try SeedModels.leagueManager)
            let names = try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [String?] in
                // The copy has a store UUID of its own: the team is found by fetching.
                let team = try #require(try context.fetch(FetchRequest(entityName: "Team")).first)
                var names: [String?] = []
                while context.canUndo {
                    try context.undo()
                    names.append(team.value(forKey: "name") as? String)
                }
                return names
            }
            #expect(names == expected, "\(label)")
        }
    }
}
