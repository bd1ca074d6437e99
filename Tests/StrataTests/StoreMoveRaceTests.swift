import Foundation
import Strata
import Synchronization
import StrataLog
import StrataTestSupport
import Testing

/// Writes racing `migratePersistentStore` (spec 0006 §19.7): the move holds this process's
/// writes to the store from its copy until the new store is in place, and the old log
/// refuses writes after; the coordinator's writers then write again to the new store.
@Suite("Contexts: writes racing a store move", .serialized)
struct StoreMoveRaceTests {
    /// The names of every team in the store at `url`, read by a fresh coordinator.
    private func teamNames(at url: URL) async throws -> Set<String> {
        let reopened = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        try reopened.addPersistentStore(type: .eventLog, at: url)
        return try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            Set(try context.fetch(FetchRequest(entityName: "Team")).compactMap { $0.value(forKey: "name") as? String })
        }
    }

    @Test("saves and batch inserts made while the store moves, three times, are all in the final store: none lands in an old place after its copy (before, every save committed during a copy was lost)")
    func writesDuringMovesAreKept() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let writers = 3
        let savesEach = 30
        let start = try #require(coordinator.persistentStores.first).log.head
        let saving = (0..<writers).map { writer in
            Task { () throws -> Void in
                let context = privateContext(coordinator, name: "writer\(writer)")
                for number in 0..<savesEach {
                    try await context.perform { (context: isolated ManagedObjectContext) throws in
                        if number % 10 == 9 {
                            let request = BatchInsertRequest(entityName: "Team", objects: [["name": "batch\(writer)-\(number)"]])
                            _ = try context.execute(request)
                        } else {
                            let team = try context.insertNewObject(forEntityName: "Team")
                            team.setValue("save\(writer)-\(number)", forKey: "name")
                            try context.save()
                        }
                    }
                }
            }
        }
        var store = try #require(coordinator.persistentStores.first)
        var finalURL = dir.url
        for hop in 0..<3 {
            // Each move while the writers are saving: after a few more of their commits.
            let head = try store.log.head
            while try store.log.head < head + 5, try store.log.head < start + UInt64(writers * savesEach) {
                try await Task.sleep(for: .milliseconds(2))
            }
            finalURL = dir.url.appendingPathComponent("hop\(hop).strata")
            store = try coordinator.migratePersistentStore(store, to: finalURL)
        }
        for task in saving { try await task.value }

        var expected: Set<String> = ["Otters"]
        for writer in 0..<writers {
            for number in 0..<savesEach { expected.insert(number % 10 == 9 ? "batch\(writer)-\(number)" : "save\(writer)-\(number)") }
        }
        let held = try await teamNames(at: finalURL)
        let lost = expected.subtracting(held).sorted()
        #expect(lost.isEmpty, "lost in the moves: \(lost)")
        #expect(held.count == expected.count)
        #expect(try store.log.head == start + UInt64(writers * savesEach), "every write is one transaction of the final store")
    }

    @Test("the moved store's old log refuses writes with an error naming both places, and writes nothing there; another log open on the old place writes on")
    func oldLogRefusesWrites() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let old = try #require(coordinator.persistentStores.first)
        let head = try old.log.head
        let destination = dir.url.appendingPathComponent("moved.strata")
        try coordinator.migratePersistentStore(old, to: destination)

        var draft = TransactionDraft(author: "test")
        _ = draft.insert("Team", values: ["name": .attribute(.string("Late"))])
        #expect {
            try old.log.commit(draft)
        } throws: { error in
            guard case LogError.storeMoved(let from, let to) = error else { return false }
            return from == old.log.path && to == destination.path && "\(error)".contains("nothing was written")
        }
        #expect(try old.log.head == head, "nothing was written to the old place")

        // Another coordinator with the old place open didn't move: its writes go on there.
        let other = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        try other.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: old.log.path))
        try await privateContext(other).perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Team").setValue("Stayed", forKey: "name")
            try context.save()
        }
        #expect(try old.log.head == head + 1)
    }

    @Test("a history consumer made before the move marks, reads and is removed in the new store; the old store's point stays where it was")
    func consumerFollowsTheMove() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let consumer = try coordinator.historyConsumer(named: "indexer")
        let old = try #require(coordinator.persistentStores.first)
        let moved = try coordinator.migratePersistentStore(old, to: dir.url.appendingPathComponent("moved.strata"))
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        let batch = try consumer.nextBatch()
        #expect(batch.last?.token.sequence == (try moved.log.head), "the save after the move is read from the new store")
        try consumer.markProcessed(through: try #require(batch.last).token)
        let points = try moved.log.read { reader in try reader.consumers().map { ($0.name, $0.processedThrough) } }
        let movedHead = try moved.log.head
        #expect(points.map(\.0) == ["indexer"] && points.map(\.1) == [movedHead])
        let oldPoints = try old.log.read { reader in try reader.consumers().map(\.processedThrough) }
        #expect(oldPoints == [0], "the old store's consumer wasn't moved")
        try consumer.remove()
        #expect(try moved.log.read { reader in try reader.consumers() }.isEmpty)
    }

    @Test("a move that fails leaves nothing: not the copy, not the directories made for it (a segment file of the store is missing); the coordinator keeps its store, which writes on")
    func failedMoveLeavesNothing() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let store = try #require(coordinator.persistentStores.first)
        for name in ["Herons", "Kites", "Rooks"] {
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: teamID).setValue(name, forKey: "name")
                try context.save()
            }
        }
        let report = try store.log.compact(CompactionRequest(before: try store.log.head))
        let segment = try #require(report.segmentFile)
        try FileManager.default.removeItem(atPath: segment)

        let destination = dir.url.appendingPathComponent("made/deeper/Moved.strata")
        #expect {
            try coordinator.migratePersistentStore(store, to: destination)
        } throws: { error in
            "\(error)".contains("is missing")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("made").path), "the directories made for the copy are gone")
        #expect(coordinator.persistentStores.first === store)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Swifts", forKey: "name")
            try context.save()
        }
    }

    @Test("store-change observers follow a moved store: observeStoreChanges and storeChanges made before the move hear a save to the new store (before, they watched the old place for ever)")
    func storeChangeObserversFollowTheMove() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let heard = Mutex<[UInt64]>([])
        let observation = try coordinator.observeStoreChanges { token in heard.withLock { $0.append(token.sequence) } }
        let stream = try coordinator.storeChanges()
        let moved = try coordinator.migratePersistentStore(try #require(coordinator.persistentStores.first), to: dir.url.appendingPathComponent("moved.strata"))
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        let head = try moved.log.head
        let streamed = Task { () -> UInt64? in
            for await token in stream where token.sequence == head { return token.sequence }
            return nil
        }
        let timeout = Task {
            try await Task.sleep(for: .seconds(5))
            streamed.cancel()
        }
        #expect(await streamed.value == head, "the stream delivered the new store's head")
        timeout.cancel()
        #expect(heard.withLock { $0.contains(head) }, "the observer heard the save to the new store: \(heard.withLock { $0 })")
        observation.cancel()
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Kites", forKey: "name")
            try context.save()
        }
        #expect(!heard.withLock { $0.contains(head + 1) }, "a cancelled observation hears nothing more")
    }

    @Test("a store on disk moved to an in-memory store (type .inMemory): contexts carry on, saves go to memory, the store on disk stays as it was and takes no more of the coordinator's writes; the memory store's directory goes with it")
    func diskToMemory() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let disk = try #require(coordinator.persistentStores.first)
        let diskHead = try disk.log.head
        let memory = try coordinator.migratePersistentStore(disk, to: URL(fileURLWithPath: "/ignored"), type: .inMemory)
        #expect(memory.type == .inMemory && memory.url == nil)
        #expect(memory.identifier == disk.identifier, "the copy keeps the store's UUID")
        #expect(!FileManager.default.fileExists(atPath: "/ignored"))
        let memoryPath = memory.log.path
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        #expect(try memory.log.head == diskHead + 1)
        #expect(try disk.log.head == diskHead, "the store on disk is as it was")
        #expect(try await teamNames(at: URL(fileURLWithPath: disk.log.path)) == ["Otters"])
        let name = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).value(forKey: "name") as? String
        }
        #expect(name == "Herons")
        try coordinator.remove(memory)
        #expect(FileManager.default.fileExists(atPath: memoryPath))
        // The store it was moved from leads to it (a consumer made on that one follows it).
        _ = consume memory
        _ = consume disk
        #expect(!FileManager.default.fileExists(atPath: memoryPath), "released, the in-memory store's directory is gone")
    }
}
