import Foundation
import Strata
import StrataTestSupport
import Testing

/// A context pinned to a query generation before a model-version migration (spec 0006 §22):
/// it reads that point in its own model's terms — a renamed property under its new name, with
/// the value it had then.
@Suite("Query generations before a migration")
struct GenerationMigrationTests {
    static let v1: ManagedObjectModel = {
        do {
            return try ManagedObjectModel {
                Entity("Player") {
                    Attribute("name", .string)
                    Attribute("rating", .int32)
                }
            }
        } catch { preconditionFailure("the test's model: \(error)") }
    }()

    static func v2() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Player") {
                Attribute("nick", .string).renamed(from: "name")
                Attribute("since", .int32, default: 2026)
            }
        }
    }

    /// Version 1: 1 inserts Ada and Bo; 2 renames Ada "Adah"; 3 deletes Bo. Version 2's open
    /// migrates (its transactions follow); then Ada is renamed "Ace" and Cy inserted.
    static func store(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, migration: ClosedRange<UInt64>, head: UInt64) {
        let first = try openCoordinator(dir, model: v1)
        try await privateContext(first).perform { (context: isolated ManagedObjectContext) throws in
            let ada = try context.insertNewObject(forEntityName: "Player")
            ada.setValue("Ada", forKey: "name")
            ada.setValue(7, forKey: "rating")
            let bo = try context.insertNewObject(forEntityName: "Player")
            bo.setValue("Bo", forKey: "name")
            try context.save()
            ada.setValue("Adah", forKey: "name")
            try context.save()
            context.delete(bo)
            try context.save()
        }
        let coordinator = try openCoordinatorRemoving(dir, model: try v2())
        let store = try #require(coordinator.persistentStores.first)
        let migrated = try store.log.read { try $0.head }
        #expect(migrated > 3, "the open migrated the store")
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let ada = try #require(try context.fetch(FetchRequest(entityName: "Player")).first)
            ada.setValue("Ace", forKey: "nick")
            let cy = try context.insertNewObject(forEntityName: "Player")
            cy.setValue("Cy", forKey: "nick")
            try context.save()
        }
        return (coordinator, 4...migrated, try store.log.read { try $0.head })
    }

    /// The players' nicks a context pinned to `sequence` fetches, sorted, and each one's `since`.
    static func nicks(_ coordinator: PersistentStoreCoordinator, at sequence: UInt64) async throws -> [String] {
        let store = try #require(coordinator.persistentStores.first)
        return try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(QueryGenerationToken(storeIdentifier: store.identifier, sequence: sequence))
            let players = try context.fetch(FetchRequest(entityName: "Player", sortDescriptors: [FetchSortDescriptor(key: "nick")]))
            return players.map { "\($0.value(forKey: "nick") as? String ?? "nil") \($0.value(forKey: "since") as? Int32 ?? -1)" }
        }
    }

    @Test("pinned at each point before, inside and after the migration: the nicks as the names then were (before, nil: the values were read under version 1's names), an object deleted before the migration there, one inserted after it not; the attribute version 2 added reads its default")
    func pinnedBeforeTheMigration() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, migration, head) = try await Self.store(dir)
        let one = try await Self.nicks(coordinator, at: 1)
        #expect(one == ["Ada 2026", "Bo 2026"])
        #expect(try await Self.nicks(coordinator, at: 2) == ["Adah 2026", "Bo 2026"])
        #expect(try await Self.nicks(coordinator, at: 3) == ["Adah 2026"])
        for sequence in migration {
            #expect(try await Self.nicks(coordinator, at: sequence) == ["Adah 2026"], "inside the migration, \(sequence)")
        }
        #expect(try await Self.nicks(coordinator, at: head) == ["Ace 2026", "Cy 2026"])
        // A predicate on the renamed property, planned or scanned, judges the values then.
        let store = try #require(coordinator.persistentStores.first)
        let matched = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(QueryGenerationToken(storeIdentifier: store.identifier, sequence: 2))
            return try context.count(for: try FetchRequest(entityName: "Player", format: "nick BEGINSWITH %@", "Ada"))
        }
        #expect(matched == 1)
    }
}
