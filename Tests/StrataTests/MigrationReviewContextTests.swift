import Foundation
import Strata
import StrataTestSupport
import Testing

/// Review probes of model-version migration through a coordinator (spec 0004 §4.5–4.6,
/// spec 0006 §13).
@Suite("Contexts: migration review")
struct MigrationReviewContextTests {
    static func model(renamed: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            if renamed {
                Entity("Athlete") { Attribute("name", .string) }.renamed(from: "Player")
            } else {
                Entity("Player") { Attribute("name", .string) }
            }
        }
    }

    @Test("a persisted undo group saved by an earlier model on an object that moved to another key undoes that object, never the one now holding its old key")
    func undoFollowsRekeyedObject() async throws {
        let dir = try TemporaryDirectory()
        func names(_ coordinator: PersistentStoreCoordinator) async throws -> Set<String> {
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                Set(try context.fetch(FetchRequest(entityName: "Athlete")).compactMap { $0.value(forKey: "name") as? String })
            }
        }
        var coordinator = try openCoordinator(dir, model: try Self.model(renamed: false))
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Player").setValue("Ann", forKey: "name")
            try context.save()
        }
        coordinator = try openCoordinator(dir, model: try Self.model(renamed: true))
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Athlete").setValue("Ben", forKey: "name")
            try context.save()
        }
        coordinator = try openCoordinator(dir, model: try Self.model(renamed: false))
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Player").setValue("Cy", forKey: "name")
            try context.save()
        }
        coordinator = try openCoordinator(dir, model: try Self.model(renamed: true))
        #expect(try await names(coordinator) == ["Ann", "Ben", "Cy"])
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            if context.canUndo {
                try? context.undo()
                try? context.save()
            }
        }
        let left = try await names(coordinator)
        #expect(left.contains("Ben"), "Ben, who holds Cy's old key, isn't undone: \(left)")
    }
}
