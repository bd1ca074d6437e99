import Foundation
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

@testable import Strata
@testable import StrataLog

/// Persisted undo finds the context's own transactions through the log's per-context
/// transaction index (spec 0004 §6.4, spec 0006 §13): a context reads its own transactions,
/// not every other writer's. To show that no other event is read, some tests remove one of
/// another writer's raw events from the log: a header scan over it fails naming the missing
/// event, while the index never reaches it. The stacks are compared with the ones the header
/// scan reads (the same store, its index set aside).
@Suite("Contexts: persisted undo through the per-context transaction index")
struct PersistedUndoIndexTests {
    static let others = Int(ProcessInfo.processInfo.environment["STRATA_PERSISTED_UNDO_OTHERS"] ?? "") ?? 400

    /// The stacks `log`'s reader gives for (`author`, `name`), read `batch` groups at a time,
    /// as `sequence.group` strings (bottom first).
    static func stacks(_ log: EventLog, author: String?, name: String?, batch: Int = 3) throws -> (undo: [String], redo: [String]) {
        let head = try log.head
        let reader = PersistedUndoReader(log: log, author: author, name: name, head: head) { group, sequence, index in
            let result = UndoGroup(actionName: group.actionName)
            result.saved = (sequence, index)
            return result
        }
        let (undo, redo) = try reader.initialStacks(undoGroups: batch)
        var undoStack = PersistedUndoReadBackTests.refs(undo)
        while !reader.isExhausted {
            undoStack.insert(contentsOf: PersistedUndoReadBackTests.refs(try reader.nextUndoGroups(batch)), at: 0)
        }
        return (undoStack, PersistedUndoReadBackTests.refs(redo))
    }

    /// The same stacks read by scanning headers: a copy of the store whose index is set aside
    /// (its point at 0), opened read-only so nothing rebuilds it.
    static func scannedStacks(_ dir: TemporaryDirectory, author: String?, name: String?) throws -> (undo: [String], redo: [String]) {
        let copy = dir.file("scan-\(UUID().uuidString.prefix(6))")
        try FileManager.default.copyItem(atPath: dir.file("store"), toPath: copy)
        // The lock file names this process's readers of the original: the copy starts its own.
        try FileManager.default.removeItem(atPath: (copy as NSString).appendingPathComponent("lock.mdb"))
        defer { try? FileManager.default.removeItem(atPath: copy) }
        do {
            var options = LMDBEnvironment.Options()
            options.maxDatabases = StoreTables.names.count + 4
            let environment = try LMDBEnvironment(path: copy, databases: StoreTables.names.map { DatabaseDescriptor($0) }, options: options)
            let tables = try StoreTables(environment)
            try environment.write { txn in try txn.put(bigEndianBytes(UInt64(0)), forKey: MetaKey.contextIndexThrough, in: tables.meta) }
        }
        let log = try EventLog(openingExistingAt: copy)
        #expect(try log.read { try $0.contextIndexThrough } == 0)
        return try stacks(log, author: author, name: name)
    }

    /// Commits `count` transactions of another writer ("bob", "sync").
    static func otherWriter(_ coordinator: PersistentStoreCoordinator, count: Int) async throws {
        try await privateContext(coordinator, name: "sync", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            for index in 0..<count {
                team.setValue("bob \(index)", forKey: "name")
                try context.save()
            }
        }
    }

    /// Removes raw event `sequence` from the log, so any walk over it fails.
    static func removeEvent(_ log: EventLog, _ sequence: UInt64) throws {
        try log.environment.write { txn in
            var keys: [[UInt8]] = []
            try txn.forEach(in: log.tables.events, range: .prefix(bigEndianBytes(sequence))) { key, _ in
                keys.append(key.withUnsafeBytes { Array($0) })
                return .next
            }
            for key in keys { _ = try txn.delete(key: key, in: log.tables.events) }
        }
    }

    @Test("a context with no transactions of its own, among many of others': empty stacks, and no other event is read")
    func freshContext() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        let coordinator = try openCoordinator(dir, model: model)
        try await Self.otherWriter(coordinator, count: Self.others)
        let log = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in try context.core.store().log }
        #expect(try Self.stacks(log, author: "alice", name: "editor") == Self.scannedStacks(dir, author: "alice", name: "editor"))
        // One of bob's events gone: a header scan fails on it; the index never reaches it.
        try Self.removeEvent(log, UInt64(Self.others / 2))
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.core.problems.isEmpty)
            #expect(!context.canUndo && !context.canRedo)
            #expect(context.core.journal.older == nil)
        }
    }

    @Test("a context whose last transaction is far back: the same stacks as the header scan and as the live context, undo and redo work, no other event is read")
    func lastTransactionFarBack() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        var coordinator = try openCoordinator(dir, model: model)
        let (teamID, live) = try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("v0", forKey: "name")
            context.setActionName("g0")
            try context.save()
            for index in 1..<6 {
                team.setValue("v\(index)", forKey: "name")
                context.setActionName("g\(index)")
                try context.save()
            }
            try context.undo()
            try context.undo()
            try context.save()
            return (
                team.objectID,
                (PersistedUndoReadBackTests.refs(context.core.journal.undoStack), PersistedUndoReadBackTests.refs(context.core.journal.redoStack))
            )
        }
        try await Self.otherWriter(coordinator, count: Self.others)
        let log = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in try context.core.store().log }
        let read = try Self.stacks(log, author: "alice", name: "editor")
        #expect(read.undo == live.0 && read.redo == live.1)
        #expect(try Self.scannedStacks(dir, author: "alice", name: "editor") == read)
        try Self.removeEvent(log, try log.head - UInt64(Self.others / 2))
        coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.core.problems.isEmpty)
            #expect(PersistedUndoReadBackTests.refs(context.core.journal.undoStack) == live.0)
            #expect(PersistedUndoReadBackTests.refs(context.core.journal.redoStack) == live.1)
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "v3")
            try context.redo()
            #expect(team.value(forKey: "name") as? String == "v4")
            try context.undo()
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "v2")
            context.rollback()
        }
    }

    @Test("after compaction and a purge through the middle of a context's groups, the stacks are the header scan's and undo walks the kept groups")
    func purgeAndCompaction() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        var coordinator = try openCoordinator(dir, model: model)
        let context = privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true)
        let teamID = try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("v0", forKey: "name")
            try context.save()
            return team.objectID
        }
        for round in 1...8 {
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: teamID).setValue("v\(round)", forKey: "name")
                context.setActionName("g\(round)")
                try context.save()
                if round == 7 {
                    try context.undo()
                    try context.save()
                }
            }
            try await Self.otherWriter(coordinator, count: 20)
        }
        let log = try await context.perform { (context: isolated ManagedObjectContext) throws in try context.core.store().log }
        let before = try Self.stacks(log, author: "alice", name: "editor")
        _ = try log.compact(CompactionRequest(before: try log.head - 30))
        #expect(try Self.stacks(log, author: "alice", name: "editor") == before)
        // Purge through the middle: groups saved at or before the point are gone.
        let point = try log.head / 2
        _ = try log.purge(through: point, author: "janitor")
        let after = try Self.stacks(log, author: "alice", name: "editor")
        #expect(try Self.scannedStacks(dir, author: "alice", name: "editor") == after)
        #expect(after.undo == before.undo.filter { (UInt64($0.split(separator: ".")[0]) ?? 0) > point })
        #expect(after.redo == before.redo)
        #expect(try log.verify().problems.isEmpty)
        coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.core.problems.isEmpty)
            var undone = 0
            while context.canUndo {
                try context.undo()
                undone += 1
            }
            #expect(undone == after.undo.count)
            context.rollback()
        }
    }
}
