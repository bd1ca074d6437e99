import Foundation
@testable import Strata
@testable import StrataLog
import StrataStorage
import StrataTestSupport
import Testing

/// Playlists and songs, ordered on both sides of one many-to-many (Core Data allows it).
private func playlistModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Playlist") {
            Attribute("name", .string)
            Relationship("songs", to: "Song", inverse: "playlists", toMany: true, ordered: true)
        }
        Entity("Song") {
            Attribute("name", .string)
            Relationship("playlists", to: "Playlist", inverse: "songs", toMany: true, ordered: true)
        }
    }
}

private func name(_ object: ManagedObject?) -> String? { object?.value(forKey: "name") as? String }

private func ordered(_ object: ManagedObject?, _ key: String) -> [String] {
    ((object?.value(forKey: key) as? [ManagedObject]) ?? []).compactMap(name)
}

private func make(_ context: isolated ManagedObjectContext, _ entity: String, _ label: String) throws -> ManagedObject {
    let object = try context.insertNewObject(forEntityName: entity)
    object.setValue(label, forKey: "name")
    return object
}

private func fetch(_ context: isolated ManagedObjectContext, _ entity: String, _ label: String) throws -> ManagedObject? {
    try context.fetch(FetchRequest(entityName: entity)).first { name($0) == label }
}

private func log(_ coordinator: PersistentStoreCoordinator) -> EventLog { coordinator.persistentStores[0].log }

/// Names of the objects a stored list value holds, by primary key (`names` maps pk → name).
private func storedNames(_ value: LogValue?, _ names: [UInt64: String]) -> [String] {
    guard case .references(let ids)? = value else { return [] }
    return ids.map { names[$0.primaryKey] ?? "?" }
}

/// The four objects p1, p2 (playlists) and s1, s2 (songs) saved with p1.songs = [s2, s1],
/// s1.playlists = [p2, p1] (so p2.songs = [s1], s2.playlists = [p1]).
private func seed(_ coordinator: PersistentStoreCoordinator) async throws {
    try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        let p1 = try make(context, "Playlist", "p1")
        let p2 = try make(context, "Playlist", "p2")
        let s1 = try make(context, "Song", "s1")
        let s2 = try make(context, "Song", "s2")
        p1.setValue([s2, s1], forKey: "songs")
        s1.setValue([p2, p1], forKey: "playlists")
        try context.save()
    }
}

private func expectSeeded(_ coordinator: PersistentStoreCoordinator, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        #expect(ordered(try fetch(context, "Playlist", "p1"), "songs") == ["s2", "s1"], sourceLocation: sourceLocation)
        #expect(ordered(try fetch(context, "Playlist", "p2"), "songs") == ["s1"], sourceLocation: sourceLocation)
        #expect(ordered(try fetch(context, "Song", "s1"), "playlists") == ["p2", "p1"], sourceLocation: sourceLocation)
        #expect(ordered(try fetch(context, "Song", "s2"), "playlists") == ["p1"], sourceLocation: sourceLocation)
    }
}

@Suite("Ordered on both sides: a many-to-many whose two sides are ordered keeps each side's order", .serialized)
struct BothSidesOrderedTests {
    @Test("each side's order survives a save and a reopen; adding on one side appends on the other, as Core Data does")
    func saveAndReopen() async throws {
        let dir = try TemporaryDirectory()
        let model = try playlistModel()
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let p1 = try make(context, "Playlist", "p1")
            let p2 = try make(context, "Playlist", "p2")
            let s1 = try make(context, "Song", "s1")
            let s2 = try make(context, "Song", "s2")
            p1.setValue([s2, s1], forKey: "songs")
            s1.setValue([p2, p1], forKey: "playlists")
            #expect(ordered(p1, "songs") == ["s2", "s1"])
            #expect(ordered(p2, "songs") == ["s1"])
            #expect(ordered(s2, "playlists") == ["p1"])
            try context.save()
            // Adding p2 to s2's playlists puts s2 at the end of p2's songs.
            s2.mutableOrderedSetValue(forKey: "playlists").insert(p2, at: 0)
            #expect(ordered(s2, "playlists") == ["p2", "p1"])
            #expect(ordered(p2, "songs") == ["s1", "s2"])
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: model)
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            #expect(ordered(try fetch(context, "Playlist", "p1"), "songs") == ["s2", "s1"])
            #expect(ordered(try fetch(context, "Playlist", "p2"), "songs") == ["s1", "s2"])
            #expect(ordered(try fetch(context, "Song", "s1"), "playlists") == ["p2", "p1"])
            #expect(ordered(try fetch(context, "Song", "s2"), "playlists") == ["p2", "p1"])
            // Removing on one side removes on the other, and both are saved.
            let p1 = try #require(try fetch(context, "Playlist", "p1"))
            let s1 = try #require(try fetch(context, "Song", "s1"))
            p1.mutableOrderedSetValue(forKey: "songs").remove(s1)
            #expect(ordered(s1, "playlists") == ["p2"])
            try context.save()
        }
        try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            #expect(ordered(try fetch(context, "Playlist", "p1"), "songs") == ["s2"])
            #expect(ordered(try fetch(context, "Song", "s1"), "playlists") == ["p2"])
        }
        #expect(try log(reopened).verify().isClean)
    }

    @Test("a move on either side undoes and redoes, and the saved order is the one left")
    func undoRedoMoves() async throws {
        let dir = try TemporaryDirectory()
        let model = try playlistModel()
        let coordinator = try openCoordinator(dir, model: model)
        try await seed(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let s1 = try #require(try fetch(context, "Song", "s1"))
            let p1 = try #require(try fetch(context, "Playlist", "p1"))
            s1.mutableOrderedSetValue(forKey: "playlists").moveObject(at: 1, to: 0)
            context.processPendingChanges()
            #expect(ordered(s1, "playlists") == ["p1", "p2"])
            try context.undo()
            #expect(ordered(s1, "playlists") == ["p2", "p1"])
            try context.redo()
            #expect(ordered(s1, "playlists") == ["p1", "p2"])
            p1.mutableOrderedSetValue(forKey: "songs").moveObject(at: 1, to: 0)
            context.processPendingChanges()
            #expect(ordered(p1, "songs") == ["s1", "s2"])
            try context.undo()
            #expect(ordered(p1, "songs") == ["s2", "s1"])
            try context.redo()
            #expect(ordered(p1, "songs") == ["s1", "s2"])
            try context.save()
        }
        try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            #expect(ordered(try fetch(context, "Song", "s1"), "playlists") == ["p1", "p2"])
            #expect(ordered(try fetch(context, "Playlist", "p1"), "songs") == ["s1", "s2"])
            #expect(ordered(try fetch(context, "Song", "s2"), "playlists") == ["p1"])
        }
    }

    @Test("as-of reads and a replayed copy give each side's order at each point")
    func asOfAndReplay() async throws {
        let dir = try TemporaryDirectory()
        let model = try playlistModel()
        let coordinator = try openCoordinator(dir, model: model)
        try await seed(coordinator)
        let seeded = try log(coordinator).head
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let s1 = try #require(try fetch(context, "Song", "s1"))
            s1.mutableOrderedSetValue(forKey: "playlists").moveObject(at: 1, to: 0)
            try context.save()
        }
        let names: [UInt64: String] = [1: "p1", 2: "p2"]
        let s1 = StoredObjectID(entity: "Song", primaryKey: 1)
        let then = try log(coordinator).read { try $0.object(s1, asOf: seeded) }
        let now = try log(coordinator).read { try $0.object(s1, asOf: seeded + 1) }
        #expect(storedNames(then?["playlists"], names) == ["p2", "p1"])
        #expect(storedNames(now?["playlists"], names) == ["p1", "p2"])
        let copy = try TemporaryDirectory()
        let copyPath = copy.url.appendingPathComponent("store").path
        _ = try log(coordinator).replay(through: seeded, into: copyPath)
        let replayed = try EventLog(openingExistingAt: copyPath)
        let record = try replayed.read { try $0.object(s1) }
        #expect(storedNames(record?.values["playlists"], names) == ["p2", "p1"])
        #expect(try replayed.verify().isClean)
    }

    @Test("compaction keeps both sides' order, and verify is clean before and after")
    func compactionAndVerify() async throws {
        let dir = try TemporaryDirectory()
        let model = try playlistModel()
        let coordinator = try openCoordinator(dir, model: model)
        try await seed(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let s2 = try #require(try fetch(context, "Song", "s2"))
            let p2 = try #require(try fetch(context, "Playlist", "p2"))
            s2.mutableOrderedSetValue(forKey: "playlists").add(p2)
            try context.save()
        }
        #expect(try log(coordinator).verify().isClean)
        _ = try log(coordinator).compact(CompactionRequest(before: try log(coordinator).head))
        #expect(try log(coordinator).verify().isClean)
        let reopened = try openCoordinator(dir, model: model)
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            #expect(ordered(try fetch(context, "Song", "s1"), "playlists") == ["p2", "p1"])
            #expect(ordered(try fetch(context, "Song", "s2"), "playlists") == ["p1", "p2"])
            #expect(ordered(try fetch(context, "Playlist", "p2"), "songs") == ["s1", "s2"])
        }
        #expect(try log(reopened).verify().isClean)
    }

    @Test("a change to the second side is written as a format version 3 event; one to the first side alone stays version 1")
    func eventFormatVersion() async throws {
        let dir = try TemporaryDirectory()
        let model = try playlistModel()
        let coordinator = try openCoordinator(dir, model: model)
        try await seed(coordinator)
        func version(_ sequence: UInt64) throws -> UInt8 {
            try log(coordinator).environment.read { txn in
                var key = bigEndianBytes(sequence)
                key += bigEndianBytes(UInt32(0))
                return try txn.value(forKey: key, in: log(coordinator).tables.events)?[4] ?? 0
            }
        }
        #expect(try version(1) == 3)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let p1 = try #require(try fetch(context, "Playlist", "p1"))
            p1.setValue("first", forKey: "name")
            try context.save()
        }
        #expect(try version(2) == 1)
        // The store's format is 2 (a Strata deriving the second side refuses it by version);
        // one without such a relationship stays 1.
        #expect(try log(coordinator).read { try $0.metadata() }.formatVersion == 2)
        let plainDir = try TemporaryDirectory()
        let plain = try openCoordinator(plainDir, model: try ManagedObjectModel { Entity("Note") { Attribute("text", .string) } })
        #expect(try log(plain).read { try $0.metadata() }.formatVersion == 1)
    }

    @Test("a store written when only the first side was recorded gets the second side's lists from its references, once, at its first writable open")
    func oldStoreFilledAtOpen() async throws {
        let dir = try TemporaryDirectory()
        let model = try playlistModel()
        let path = dir.url.appendingPathComponent("store").path
        // The old way: only Playlist.songs in the events and records, no code for Song.playlists.
        do {
            var configuration = EventLog.Configuration()
            configuration.skipsOrderedPairCheck = true
            let old = try EventLog(path: path, model: model, configuration: configuration)
            var draft = TransactionDraft()
            let p1 = draft.insert("Playlist", values: ["name": .attribute(.string("p1"))])
            let p2 = draft.insert("Playlist", values: ["name": .attribute(.string("p2"))])
            let s1 = draft.insert("Song", values: ["name": .attribute(.string("s1"))])
            let s2 = draft.insert("Song", values: ["name": .attribute(.string("s2"))])
            draft.update(p2, values: ["songs": .references([s1])])
            draft.update(p1, values: ["songs": .references([s2, s1])])
            _ = try old.commit(draft)
            try old.environment.write { txn in
                let name = Array("rSong.playlists".utf8)
                let code = try #require(try txn.value(forKey: name, in: old.tables.catalog))
                _ = try txn.delete(key: name, in: old.tables.catalog)
                _ = try txn.delete(key: [UInt8(ascii: "R")] + code, in: old.tables.catalog)
            }
        }
        let readOnly = #expect(throws: LogError.self) { try EventLog(openingExistingAt: path) }
        #expect(readOnly?.description.contains("open it writable") == true)
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // The references' order (by primary key): p1 before p2.
            #expect(ordered(try fetch(context, "Song", "s1"), "playlists") == ["p1", "p2"])
            #expect(ordered(try fetch(context, "Song", "s2"), "playlists") == ["p1"])
            #expect(ordered(try fetch(context, "Playlist", "p1"), "songs") == ["s2", "s1"])
            let s1 = try #require(try fetch(context, "Song", "s1"))
            s1.mutableOrderedSetValue(forKey: "playlists").moveObject(at: 1, to: 0)
            try context.save()
        }
        let head = try log(coordinator).head
        #expect(head == 3)
        #expect(try log(coordinator).read { try $0.event(2) }.kind == .migration)
        #expect(try log(coordinator).verify().isClean)
        let reopened = try openCoordinator(dir, model: model)
        #expect(try log(reopened).head == 3)
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            #expect(ordered(try fetch(context, "Song", "s1"), "playlists") == ["p2", "p1"])
        }
        // A copy as of before the fill is marked: refused read-only, filled at its first writable open.
        let copy = try TemporaryDirectory()
        let copyPath = copy.url.appendingPathComponent("store").path
        _ = try log(reopened).replay(through: 1, into: copyPath)
        #expect(throws: LogError.self) { try EventLog(openingExistingAt: copyPath) }
        let copied = try openCoordinator(copy, model: model)
        try await privateContext(copied).perform { (context: isolated ManagedObjectContext) throws in
            #expect(ordered(try fetch(context, "Song", "s1"), "playlists") == ["p1", "p2"])
        }
        #expect(try log(copied).head == 2)
        // A copy through the fill is not marked: it opens read-only as it is.
        let later = try TemporaryDirectory()
        let laterPath = later.url.appendingPathComponent("store").path
        _ = try log(reopened).replay(through: 2, into: laterPath)
        let readable = try EventLog(openingExistingAt: laterPath)
        #expect(try readable.read { try $0.related(StoredObjectID(entity: "Song", primaryKey: 1), "playlists") }.map(\.primaryKey) == [1, 2])
    }

    @Test("rollback puts both sides back in their saved order")
    func rollback() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try playlistModel())
        try await seed(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let s1 = try #require(try fetch(context, "Song", "s1"))
            let p1 = try #require(try fetch(context, "Playlist", "p1"))
            let s2 = try #require(try fetch(context, "Song", "s2"))
            s1.mutableOrderedSetValue(forKey: "playlists").moveObject(at: 1, to: 0)
            p1.mutableOrderedSetValue(forKey: "songs").remove(s2)
            #expect(ordered(s2, "playlists") == [])
            context.rollback()
            #expect(ordered(s1, "playlists") == ["p2", "p1"])
            #expect(ordered(p1, "songs") == ["s2", "s1"])
            #expect(ordered(s2, "playlists") == ["p1"])
            let dirty = context.hasChanges
            #expect(!dirty)
        }
    }

    @Test("a child context's moves and inserts on either side reach the store through its parent")
    func childContext() async throws {
        let dir = try TemporaryDirectory()
        let model = try playlistModel()
        let coordinator = try openCoordinator(dir, model: model)
        try await seed(coordinator)
        let parent = privateContext(coordinator)
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let s1 = try #require(try fetch(context, "Song", "s1"))
            let p1 = try #require(try fetch(context, "Playlist", "p1"))
            let s3 = try make(context, "Song", "s3")
            s1.mutableOrderedSetValue(forKey: "playlists").moveObject(at: 1, to: 0)
            p1.mutableOrderedSetValue(forKey: "songs").insert(s3, at: 0)
            #expect(ordered(s3, "playlists") == ["p1"])
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(ordered(try fetch(context, "Song", "s1"), "playlists") == ["p1", "p2"])
            #expect(ordered(try fetch(context, "Playlist", "p1"), "songs") == ["s3", "s2", "s1"])
            try context.save()
        }
        try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            #expect(ordered(try fetch(context, "Song", "s1"), "playlists") == ["p1", "p2"])
            #expect(ordered(try fetch(context, "Playlist", "p1"), "songs") == ["s3", "s2", "s1"])
            #expect(ordered(try fetch(context, "Song", "s3"), "playlists") == ["p1"])
        }
    }

    @Test("another context's saved move merges into a context holding the objects, on both sides")
    func mergeFromAnotherContext() async throws {
        let dir = try TemporaryDirectory()
        let model = try playlistModel()
        let coordinator = try openCoordinator(dir, model: model)
        try await seed(coordinator)
        let viewer = privateContext(coordinator, name: "viewer")
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            // Unsaved changes keep the objects registered between blocks.
            try #require(try fetch(context, "Song", "s1")).setValue("s1", forKey: "name")
            try #require(try fetch(context, "Playlist", "p1")).setValue("p1", forKey: "name")
            try #require(try fetch(context, "Playlist", "p2")).setValue("p2!", forKey: "name")
        }
        try await privateContext(coordinator, name: "writer").perform { (context: isolated ManagedObjectContext) throws in
            let s1 = try #require(try fetch(context, "Song", "s1"))
            let p1 = try #require(try fetch(context, "Playlist", "p1"))
            s1.mutableOrderedSetValue(forKey: "playlists").moveObject(at: 1, to: 0)
            p1.mutableOrderedSetValue(forKey: "songs").moveObject(at: 1, to: 0)
            try context.save()
        }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            #expect(ordered(try fetch(context, "Song", "s1"), "playlists") == ["p1", "p2!"])
            #expect(ordered(try fetch(context, "Playlist", "p1"), "songs") == ["s1", "s2"])
            try context.save()
        }
        try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            #expect(ordered(try fetch(context, "Song", "s1"), "playlists") == ["p1", "p2!"])
            #expect(ordered(try fetch(context, "Playlist", "p1"), "songs") == ["s1", "s2"])
            #expect(ordered(try fetch(context, "Playlist", "p2!"), "songs") == ["s1"])
        }
    }

    @Test("persisted undo of a saved move on each side, after a restart")
    func persistedUndoAfterRestart() async throws {
        let dir = try TemporaryDirectory()
        let model = try playlistModel()
        try await seed(try openCoordinator(dir, model: model))
        try await editor(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            try #require(try fetch(context, "Song", "s1")).mutableOrderedSetValue(forKey: "playlists").moveObject(at: 1, to: 0)
            try context.save()
            try #require(try fetch(context, "Playlist", "p1")).mutableOrderedSetValue(forKey: "songs").moveObject(at: 1, to: 0)
            try context.save()
        }
        try await editor(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            #expect(ordered(try fetch(context, "Playlist", "p1"), "songs") == ["s2", "s1"])
            #expect(ordered(try fetch(context, "Song", "s1"), "playlists") == ["p1", "p2"])
            try context.undo()
            #expect(ordered(try fetch(context, "Song", "s1"), "playlists") == ["p2", "p1"])
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: model)
        try await expectSeeded(reopened)
        #expect(try log(reopened).verify().isClean)
    }

    @Test("a draft that changes one side only is refused, nothing written; one that changes both commits")
    func oneSidedDraftRefused() throws {
        let dir = try TemporaryDirectory()
        let log = try EventLog(path: dir.url.appendingPathComponent("store").path, model: try playlistModel())
        var seed = TransactionDraft()
        let p1 = seed.insert("Playlist", values: ["name": .attribute(.string("p1"))])
        let s1 = seed.insert("Song", values: ["name": .attribute(.string("s1"))])
        _ = seed.insert("Song", values: ["name": .attribute(.string("s2"))])
        seed.update(p1, values: ["songs": .references([s1])])
        seed.update(s1, values: ["playlists": .references([p1])])
        _ = try log.commit(seed)
        let playlist = StoredObjectID(entity: "Playlist", primaryKey: 1)
        let song1 = StoredObjectID(entity: "Song", primaryKey: 1)
        let song2 = StoredObjectID(entity: "Song", primaryKey: 2)
        var added = TransactionDraft()
        added.update(.stored(playlist), values: ["songs": .references([.stored(song2), .stored(song1)])])
        let error = #expect(throws: LogError.self) { try log.commit(added) }
        #expect(error?.description.contains("Playlist/p1.songs now holds Song/p2, but Song/p2.playlists doesn't hold Playlist/p1") == true)
        var removed = TransactionDraft()
        removed.update(.stored(song1), values: ["playlists": .references([])])
        let removal = #expect(throws: LogError.self) { try log.commit(removed) }
        #expect(removal?.description.contains("Song/p1.playlists no longer holds Playlist/p1") == true)
        #expect(try log.head == 1)
        var both = TransactionDraft()
        both.update(.stored(playlist), values: ["songs": .references([.stored(song2), .stored(song1)])])
        both.update(.stored(song2), values: ["playlists": .references([.stored(playlist)])])
        _ = try log.commit(both)
        #expect(try log.read { try $0.related(song2, "playlists") } == [playlist])
        #expect(try log.verify().isClean)
    }
}
