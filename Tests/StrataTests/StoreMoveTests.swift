import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// Moving a coordinator's store (`migratePersistentStore`, spec 0006 §19.7) and checking a
/// store's metadata against a model (`isConfiguration(withName:compatibleWithStoreMetadata:)`,
/// §19.8).
@Suite("Contexts: moving a store and checking its compatibility", .serialized)
struct StoreMoveTests {
    @Test("a store moved to a new URL: same UUID and history, contexts carry on — an unsaved change saves to the new store, URIs resolve — and the old store is left as it was")
    func moveToNewURL() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let old = try #require(coordinator.persistentStores.first)
        let oldHead = try old.log.head
        let context = privateContext(coordinator, name: "editor")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
        }
        let destination = dir.url.appendingPathComponent("moved/League.strata")
        let moved = try coordinator.migratePersistentStore(old, to: destination)
        #expect(coordinator.persistentStores.map { $0 === moved } == [true])
        #expect(moved.url?.path == destination.path)
        #expect(moved.identifier == old.identifier, "the copy keeps the store's UUID")
        #expect(try moved.log.head == oldHead)
        #expect(coordinator.managedObjectID(forURIRepresentation: teamID.uriRepresentation()) == teamID)

        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let changed = context.hasChanges
            #expect(changed, "the unsaved change is still in the context")
            try context.save()
        }
        #expect(try moved.log.head == oldHead + 1, "the save went to the new store")
        let oldOnDisk = try EventLog(openingExistingAt: dir.url.appendingPathComponent("store").path)
        #expect(try oldOnDisk.head == oldHead, "the old store's files are as they were")

        let reopened = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        try reopened.addPersistentStore(type: .eventLog, at: destination)
        let name = try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).value(forKey: "name") as? String
        }
        #expect(name == "Herons")
        #expect(try reopened.history(HistoryRequest()).count == Int(oldHead) + 1, "the whole history moved")
    }

    @Test("an in-memory store saved to disk (Save As): the objects are in the store at the URL")
    func inMemoryToDisk() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let memory = try coordinator.addPersistentStore(type: .inMemory)
        let teamID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            try context.save()
            return team.objectID
        }
        let url = dir.url.appendingPathComponent("Saved.strata")
        let saved = try coordinator.migratePersistentStore(memory, to: url)
        #expect(saved.type == .eventLog)
        let reopened = PersistentStoreCoordinator(managedObjectModel: model)
        try reopened.addPersistentStore(type: .eventLog, at: url)
        let name = try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).value(forKey: "name") as? String
        }
        #expect(name == "Otters")
    }

    @Test("refusals change nothing: something at the destination, a store not the coordinator's")
    func refusals() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let store = try #require(coordinator.persistentStores.first)
        let occupied = dir.url.appendingPathComponent("occupied")
        try FileManager.default.createDirectory(at: occupied, withIntermediateDirectories: true)
        try Data("mine".utf8).write(to: occupied.appendingPathComponent("notes.txt"))
        #expect {
            try coordinator.migratePersistentStore(store, to: occupied)
        } throws: { error in
            guard case .storeInUse(_, let detail) = error as? PersistentStoreError else { return false }
            return detail.contains("something is there already")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: occupied.path) == ["notes.txt"])
        let other = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        let otherStore = try other.addPersistentStore(type: .inMemory)
        #expect(throws: ContextError.self) { try coordinator.migratePersistentStore(otherStore, to: dir.url.appendingPathComponent("y")) }
        #expect(coordinator.persistentStores.first === store)
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("y").path))
    }

    @Test("an automatically merging context after its store moved: another process's save into the new store is merged by the watcher, without the context being asked to run")
    func watcherFollowsTheMove() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _) = try await leagueStoreWithDoomed(dir)
        let context = privateContext(coordinator, name: "main")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            _ = try context.existingObject(with: teamID).value(forKey: "name")
        }
        let destination = dir.url.appendingPathComponent("moved")
        try coordinator.migratePersistentStore(try #require(coordinator.persistentStores.first), to: destination)
        let merges = context.notifications(.didMerge)
        let saved = try runProcess(BuildProducts.executable("StrataContextProbe"), ["save", destination.path, teamID.description, "Moved"])
        #expect(saved.status == 0, "\(saved.standardError)")
        let sequence = try #require(UInt64(saved.standardOutput.split(separator: " ").dropFirst().first ?? ""))
        #expect(await firstMerge(merges) == sequence, "the new store is watched")
    }

    @Test("isConfiguration(withName:compatibleWithStoreMetadata:): the store's own model is compatible, a changed entity isn't, an index alone is; another configuration name never is")
    func compatibility() async throws {
        let dir = try TemporaryDirectory()
        let v1 = try ManagedObjectModel { Entity("Task") { Attribute("title", .string); Attribute("rank", .int16) } }
        _ = try openCoordinator(dir, model: v1)
        let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: dir.url.appendingPathComponent("store"))
        #expect(v1.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata))
        #expect(v1.isConfiguration(withName: "Default", compatibleWithStoreMetadata: metadata))
        #expect(!v1.isConfiguration(withName: "Cloud", compatibleWithStoreMetadata: metadata))
        let indexed = try ManagedObjectModel { Entity("Task") { Attribute("title", .string).indexed(); Attribute("rank", .int16) } }
        #expect(indexed.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata), "an index changes no entity hash")
        let widened = try ManagedObjectModel { Entity("Task") { Attribute("title", .string); Attribute("rank", .int64) } }
        #expect(!widened.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata))
        let more = try ManagedObjectModel {
            Entity("Task") { Attribute("title", .string); Attribute("rank", .int16) }
            Entity("Tag") { Attribute("name", .string) }
        }
        #expect(!more.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata), "an entity the store doesn't have")
        #expect(!v1.isConfiguration(withName: nil, compatibleWithStoreMetadata: [:]))
    }
}

/// Review probes of moving a store (session 19).
@Suite("Contexts: moving a store — review", .serialized)
struct StoreMoveReviewTests {
    @Test("a persisted-undo context after its store moved undoes every saved group, the older ones read from the log after the move too")
    func persistedUndoAfterMove() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let saves = 40  // more than the 32 groups persisted undo reads at a context's creation
        let writer = privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true)
        try await writer.perform { (context: isolated ManagedObjectContext) throws in
            for step in 0..<saves {
                try context.existingObject(with: teamID).setValue("step \(step)", forKey: "name")
                try context.save()
            }
        }
        // A context of the same author and name after a restart: the top of the stack is read now.
        let context = privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true)
        let loaded = await context.perform { (context: isolated ManagedObjectContext) in context.canUndo }
        #expect(loaded)
        let destination = dir.url.appendingPathComponent("moved")
        try coordinator.migratePersistentStore(try #require(coordinator.persistentStores.first), to: destination)
        let (undone, name) = try await context.perform { (context: isolated ManagedObjectContext) throws -> (Int, String?) in
            var undone = 0
            while undone < saves + 5 {
                let more = context.canUndo
                guard more else { break }
                try context.undo()
                undone += 1
            }
            try context.save()
            return (undone, try context.existingObject(with: teamID).value(forKey: "name") as? String)
        }
        #expect(undone == saves, "every saved group undoes, the older ones read from the moved store")
        #expect(name == "Otters")
    }
}

extension StoreMoveReviewTests {
    @Test("a destination inside the store's own directory (directly, deeper, or through a symbolic link to it) is refused, changing nothing; a sibling named like it isn't")
    func destinationInsideTheStore() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let store = try #require(coordinator.persistentStores.first)
        let storeDirectory = dir.url.appendingPathComponent("store")
        let before = try FileManager.default.contentsOfDirectory(atPath: storeDirectory.path).sorted()
        let link = dir.url.appendingPathComponent("link")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: storeDirectory)
        for destination in [
            storeDirectory.appendingPathComponent("moved"), storeDirectory.appendingPathComponent("deeper/moved"),
            link.appendingPathComponent("moved"), URL(fileURLWithPath: storeDirectory.path + "/./moved/"),
        ] {
            #expect(throws: ContextError.self, "\(destination.path)") { try coordinator.migratePersistentStore(store, to: destination) }
        }
        #expect(coordinator.persistentStores.first === store)
        #expect(try FileManager.default.contentsOfDirectory(atPath: storeDirectory.path).sorted() == before)
        #expect(throws: LogError.self) { try EventLog.replaceStore(at: storeDirectory.appendingPathComponent("copy").path, withCopyOf: store.log) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: storeDirectory.path).sorted() == before)
        // A sibling whose name starts with the store's is not inside it.
        let sibling = dir.url.appendingPathComponent("store-moved")
        let moved = try coordinator.migratePersistentStore(store, to: sibling)
        #expect(moved.url?.path == sibling.path)
        #expect(try EventLog.foreignEntries(inStoreDirectory: storeDirectory.path).isEmpty, "the old store can still be destroyed or replaced")
    }
}

extension StoreMoveReviewTests {
    @Test("a history feed waiting for new transactions when its store is moved follows it: a save to the new store is delivered")
    func historyFeedFollowsTheMove() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let feed = try coordinator.historyFeed(after: coordinator.currentPersistentHistoryToken())
        let waiting = Task { () throws -> UInt64? in
            var iterator = feed.makeAsyncIterator()
            return try await iterator.next()?.token.sequence
        }
        try await Task.sleep(for: .milliseconds(200))
        let moved = try coordinator.migratePersistentStore(try #require(coordinator.persistentStores.first), to: dir.url.appendingPathComponent("moved"))
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        let timeout = Task {
            try await Task.sleep(for: .seconds(5))
            waiting.cancel()
        }
        let delivered = try await waiting.value
        timeout.cancel()
        #expect(delivered == (try moved.log.head), "the feed delivered the save to the moved store")
    }
}
