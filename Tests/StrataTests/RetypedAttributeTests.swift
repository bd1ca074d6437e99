import Foundation
import Strata
import StrataTestSupport
import Testing

/// An attribute whose type a later model version widens (`age` int32 → int64, `score` int16 →
/// double): work an earlier version saved is reverted, undone after a restart, and read at a
/// query generation in the new type, as the migration converted the stored values (spec 0004
/// §4.4; spec 0006 §13.3, §22.4, §25).
@Suite("A retyped attribute across model versions")
struct RetypedAttributeTests {
    static func model(_ version: Int) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Player") {
                Attribute("name", .string)
                if version == 1 {
                    Attribute("age", .int32)
                    Attribute("score", .int16)
                } else {
                    Attribute("age", .int64)
                    Attribute("score", .double)
                }
            }
        }
    }

    private func token(_ coordinator: PersistentStoreCoordinator, _ sequence: UInt64) throws -> HistoryToken {
        HistoryToken(storeIdentifier: try #require(coordinator.persistentStores.first).identifier, sequence: sequence)
    }

    /// Version 1, context "editor" with persisted undo: 1 inserts Ada (age 30, score 7); 2 sets
    /// age 31 and score 9. Then the store is opened with version 2 (migrated).
    static func store(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, ManagedObjectID) {
        let first = try openCoordinator(dir, model: try model(1))
        let id = try await privateContext(first, name: "editor", author: "alice", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            let ada = try context.insertNewObject(forEntityName: "Player")
            ada.setValue("Ada", forKey: "name")
            ada.setValue(Int32(30), forKey: "age")
            ada.setValue(Int16(7), forKey: "score")
            try context.save()
            ada.setValue(Int32(31), forKey: "age")
            ada.setValue(Int16(9), forKey: "score")
            try context.save()
            return ada.objectID
        }
        try first.remove(try #require(first.persistentStores.first))
        return (try openCoordinator(dir, model: try model(2)), id)
    }

    static func values(_ object: ManagedObject) -> (Int64?, Double?) {
        (object.value(forKey: "age") as? Int64, object.value(forKey: "score") as? Double)
    }

    @Test("reverting version 1's transaction 2 under version 2: age and score set back in the new types, saved; verify clean")
    func revert() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await Self.store(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let ada = try context.existingObject(with: id)
            #expect(Self.values(ada) == (31, 9))
            try context.revertTransaction(at: try token(coordinator, 2))
            #expect(Self.values(ada) == (30, 7))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(Self.values(try context.existingObject(with: id)) == (30, 7))
        }
        #expect(try #require(coordinator.persistentStores.first).log.verify().isClean)
    }

    @Test("persisted undo of version 1's save after the migration: undo sets age and score back in the new types, redo again; saved, verify clean")
    func persistedUndo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await Self.store(dir)
        let context = privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let ada = try context.existingObject(with: id)
            try context.undo()
            #expect(Self.values(ada) == (30, 7))
            try context.redo()
            #expect(Self.values(ada) == (31, 9))
            try context.undo()
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(Self.values(try context.existingObject(with: id)) == (30, 7))
        }
        #expect(try #require(coordinator.persistentStores.first).log.verify().isClean)
    }

    @Test("a context pinned to generation 1 reads age and score as they were then, in the new types")
    func pinnedGeneration() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await Self.store(dir)
        let store = try #require(coordinator.persistentStores.first)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(QueryGenerationToken(storeIdentifier: store.identifier, sequence: 1))
            let ada = try #require(try context.fetch(FetchRequest(entityName: "Player")).first)
            #expect(ada.objectID == id)
            #expect(Self.values(ada) == (30, 7))
        }
    }
}
