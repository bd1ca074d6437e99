import Foundation
import StrataLog
import StrataTestSupport
import Testing

@testable import Strata

/// Persisted undo of a group a refresh split whose parts are taken back together (spec 0006
/// §13, spec 0004 §10's `parts`): parts that cover every object of the group are the whole
/// group, recorded and read back as such — not as a part that keeps the stacks' record
/// rewritten by every save.
@Suite("Contexts: persisted undo of rejoined split groups")
struct PersistedUndoSplitMarkFixTests {
    private static func name(_ context: isolated ManagedObjectContext, _ id: ManagedObjectID) throws -> String? {
        try context.existingObject(with: id).value(forKey: "name") as? String
    }

    /// The league store with Otters (the fixture's) and Kites saved by another context.
    private static func twoTeams(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, ManagedObjectID, ManagedObjectID) {
        let (coordinator, otters) = try await leagueStore(dir)
        let kites = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            try context.save()
            return team.objectID
        }
        return (coordinator, otters, kites)
    }

    /// The context's record of its stacks and the log's head now.
    private static func record(_ context: isolated ManagedObjectContext) throws -> (head: UInt64, checkpoint: UndoCheckpoint?) {
        let log = try context.core.store().log
        return try log.read { reader in
            (try reader.head, try reader.undoCheckpoint(author: context.transactionAuthor, contextName: context.name))
        }
    }

    /// After a restart: undo and redo stacks are as one whole group renaming Otters to Herons
    /// and Kites to Swans; a save of other work doesn't rewrite the record; the group takes
    /// one undo step, and comes back after another restart.
    private static func checkWholeAfterRestart(_ dir: TemporaryDirectory, _ otters: ManagedObjectID, _ kites: ManagedObjectID) async throws {
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.name(context, otters) == "Herons")
            #expect(try Self.name(context, kites) == "Swans")
            let holdsSplit = context.core.journal.holdsSplitGroups
            #expect(!holdsSplit, "the part covering every object of the group is the whole group")
            let before = try Self.record(context)
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Gulls", forKey: "name")
            try context.save()
            let after = try Self.record(context)
            #expect(after.head > before.head)
            #expect(after.checkpoint?.through == before.checkpoint?.through, "a save of other work leaves the record as it was")
            try context.save()
            try context.undo()  // Gulls
            try context.undo()  // the group, one step
            #expect(try Self.name(context, otters) == "Otters")
            #expect(try Self.name(context, kites) == "Kites")
            let undoable = context.canUndo
            #expect(!undoable)
            try context.save()
        }
        let again = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(again).perform { (context: isolated ManagedObjectContext) throws in
            try context.redo()
            #expect(try Self.name(context, otters) == "Herons")
            #expect(try Self.name(context, kites) == "Swans")
            try context.redo()
            let gulls = try context.fetch(FetchRequest(entityName: "Team", format: "name == %@", "Gulls"))
            #expect(gulls.count == 1)
            let redoable = context.canRedo
            #expect(!redoable)
            try context.save()
        }
        #expect(try #require(again.persistentStores.first).log.verify().isClean)
    }

    @Test("a group split with its rest's undo pending, recorded at once, then a quit: the record names the whole group, not a part covering all its objects, and after a restart saves leave the record alone")
    func rejoinedPartsAreRecordedWhole() async throws {
        let dir = try TemporaryDirectory()
        let (first, otters, kites) = try await Self.twoTeams(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: otters).setValue("Herons", forKey: "name")
            try context.existingObject(with: kites).setValue("Swans", forKey: "name")
            try context.save()
            try context.undo()
            context.refresh(try context.existingObject(with: otters), mergeChanges: false)
            context.levelsOfUndo = 10  // records the stacks at once
            let recorded = try #require(try Self.record(context).checkpoint)
            #expect(recorded.redo.isEmpty)
            #expect(recorded.undo.count == 1)
            #expect(recorded.undo.first?.objects == nil, "the parts taken back together cover the group: it is recorded whole")
        }  // quit: the undo of the rest is never saved
        try await Self.checkWholeAfterRestart(dir, otters, kites)
    }

    @Test("a record naming a part that covers every object of its group (as written before): read back as the whole group, and saves leave the record alone")
    func wholePartInRecordReadsBackWhole() async throws {
        let dir = try TemporaryDirectory()
        let (first, otters, kites) = try await Self.twoTeams(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: otters).setValue("Herons", forKey: "name")
            try context.existingObject(with: kites).setValue("Swans", forKey: "name")
            try context.save()
            let head = try Self.record(context).head
            let objects = try [otters, kites].map { try #require($0.storedID) }
            try context.core.store().log.setUndoCheckpoint(
                author: context.transactionAuthor, contextName: context.name,
                undo: [UndoCheckpoint.GroupRef(sequence: head, group: 0, objects: objects)], redo: [])
        }
        try await Self.checkWholeAfterRestart(dir, otters, kites)
    }
}
