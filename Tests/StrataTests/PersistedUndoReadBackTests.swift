import Foundation
import StrataLog
import StrataTestSupport
import Testing

@testable import Strata

/// Persisted undo reads the log backwards from its head, the top of the undo stack first,
/// and reads older groups only when undo reaches them (spec 0006 §13).
@Suite("Contexts: persisted undo read back from the head")
struct PersistedUndoReadBackTests {
    static let steps = Int(ProcessInfo.processInfo.environment["STRATA_PERSISTED_UNDO_STEPS"] ?? "") ?? 100

    /// The saved groups of a journal's stacks, bottom first.
    static func refs(_ groups: [UndoGroup]) -> [String] {
        groups.map { group in group.saved.map { "\($0.sequence).\($0.group)" } ?? "unsaved" }
    }

    /// The full stacks the reader gives, read with `batch` groups at a time (top first
    /// across batches), as ``refs(_:)``.
    static func readBack(_ context: isolated ManagedObjectContext, batch: Int) throws -> (undo: [String], redo: [String]) {
        let log = try context.core.store().log
        let head = try log.read { try $0.head }
        let reader = PersistedUndoReader(log: log, author: context.transactionAuthor, name: context.name, head: head) { group, sequence, index in
            let result = UndoGroup(actionName: group.actionName)
            result.saved = (sequence, index)
            return result
        }
        let (undo, redo) = try reader.initialStacks(undoGroups: batch)
        var undoStack = refs(undo)
        while !reader.isExhausted {
            let older = try reader.nextUndoGroups(batch)
            undoStack.insert(contentsOf: refs(older), at: 0)
        }
        return (undoStack, refs(redo))
    }

    @Test("random saves, undos, redos, other writers' transactions and restarts: the stacks read back equal the live context's, in batches of 1, 3 and all; undo walks all of them")
    func readBackEqualsLive() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        var random = SeededGenerator(state: 2026)
        var coordinator = try openCoordinator(dir, model: model)
        // Three teams of ours and one of another writer, saved before the workload.
        let (ours, theirs) = try await privateContext(coordinator, name: "setup").perform { (context: isolated ManagedObjectContext) throws in
            let teams = try (0..<4).map { index in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("team \(index)", forKey: "name")
                return team
            }
            try context.save()
            return (teams.prefix(3).map(\.objectID), teams[3].objectID)
        }
        var context = privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true)
        var comparisons = 0
        for step in 0..<Self.steps {
            let roll = Int.random(in: 0..<100, using: &random)
            let target = ours[Int.random(in: 0..<ours.count, using: &random)]
            let fillers = Int.random(in: 1...150, using: &random)
            if roll < 50 {
                try await context.perform { (context: isolated ManagedObjectContext) throws in
                    try context.existingObject(with: target).setValue("step \(step)", forKey: "name")
                    context.setActionName("g\(step)")
                    try context.save()
                }
            } else if roll < 70 {
                try await context.perform { (context: isolated ManagedObjectContext) throws in
                    if context.canUndo { try context.undo() }
                    try context.save()
                }
            } else if roll < 85 {
                try await context.perform { (context: isolated ManagedObjectContext) throws in
                    if context.canRedo { try context.redo() }
                    try context.save()
                }
            } else {
                // Another writer's transactions between ours: the reader skips them by header.
                try await privateContext(coordinator, name: "sync", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
                    let team = try context.existingObject(with: theirs)
                    for index in 0..<fillers {
                        team.setValue("bob \(step).\(index)", forKey: "name")
                        try context.save()
                    }
                }
            }
            guard roll % 7 == 0 || step == Self.steps - 1 else { continue }
            // What the live context holds (every group saved), against a restart.
            let live = try await context.perform { (context: isolated ManagedObjectContext) throws in
                // Groups the live context hasn't read back yet are read first.
                while context.core.journal.older != nil {
                    let top = context.core.journal.undoStack
                    context.core.journal.undoStack = []
                    context.core.loadOlderUndo()
                    context.core.journal.undoStack += top
                }
                return (Self.refs(context.core.journal.undoStack), Self.refs(context.core.journal.redoStack))
            }
            coordinator = try openCoordinator(dir, model: model)
            let restarted = privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true)
            try await restarted.perform { (context: isolated ManagedObjectContext) throws in
                #expect(context.core.problems.isEmpty)
                for batch in [1, 3, 1_000_000] {
                    let read = try Self.readBack(context, batch: batch)
                    #expect(read.undo == live.0, "undo stack read back in batches of \(batch) at step \(step)")
                    #expect(read.redo == live.1, "redo stack read back in batches of \(batch) at step \(step)")
                }
                #expect(Self.refs(context.core.journal.redoStack) == live.1)
                // Undo walks the whole stack, reading older groups as it goes.
                var undone = 0
                while context.canUndo {
                    try context.undo()
                    undone += 1
                }
                #expect(undone == live.0.count, "undos after a restart at step \(step)")
                // Left unsaved, not rolled back: rollback() drops the stacks for good (spec 0006 §13).
            }
            comparisons += 1
            context = privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true)
        }
        #expect(comparisons >= 3)
    }

    @Test("after a restart, undo walks 80 saved groups below the first batch in order, each restoring its value; levelsOfUndo counts the groups not read yet")
    func lazyUndoAndLevels() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        let groups = 80
        var coordinator = try openCoordinator(dir, model: model)
        let teamID = try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("v0", forKey: "name")
            context.setActionName("g0")
            try context.save()
            for index in 1..<groups {
                team.setValue("v\(index)", forKey: "name")
                context.setActionName("g\(index)")
                try context.save()
            }
            return team.objectID
        }
        coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            // Only the top batch is read at creation.
            #expect(context.core.journal.undoStack.count == ContextCore.persistedUndoBatch)
            #expect(context.core.journal.older != nil)
            let team = try context.existingObject(with: teamID)
            for index in stride(from: groups - 1, through: 1, by: -1) {
                #expect(context.undoActionName == "g\(index)")
                try context.undo()
                #expect(team.value(forKey: "name") as? String == "v\(index - 1)")
            }
            // g0 inserted the team: undoing it deletes the team.
            #expect(context.undoActionName == "g0")
            try context.undo()
            #expect(context.canUndo == false)
            #expect(context.core.journal.older == nil)
            // Left unsaved, not rolled back: rollback() drops the stacks for good (spec 0006 §13).
        }
        // Widest first: the groups a limit drops stay dropped after a restart (spec 0006 §13),
        // so each restart sees what the one before kept — after the new group, never saved,
        // the 39 saved groups it left (the one its close dropped is recorded dropped at once).
        for (levels, pushed, expected) in [(200, false, groups), (40, true, 40), (40, false, 39), (5, false, 5)] {
            coordinator = try openCoordinator(dir, model: model)
            try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
                context.levelsOfUndo = levels
                var names: [String] = []
                if pushed {
                    // A new group on top pushes the oldest one out, one not read yet.
                    try context.existingObject(with: teamID).setValue("new", forKey: "name")
                    context.setActionName("new")
                    context.processPendingChanges()
                }
                while context.canUndo {
                    names.append(context.undoActionName ?? "?")
                    try context.undo()
                }
                #expect(names.count == expected, "levelsOfUndo \(levels)\(pushed ? " after a new group" : "")")
                let expectedNames = (pushed ? ["new"] : []) + (0..<groups).reversed().map { "g\($0)" }
                #expect(names == Array(expectedNames.prefix(expected)))
                // Left unsaved, not rolled back: rollback() drops the stacks for good (spec 0006 §13).
            }
        }
    }
}
