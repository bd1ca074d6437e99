import Foundation
@testable import Strata
import StrataTestSupport
import Testing

/// Lower-cases its `name` when it is fetched (a primitive set in `awakeFromFetch`).
final class LowercasingTag: ManagedObject {
    override func awakeFromFetch() {
        super.awakeFromFetch()
        if let name = value(forKey: "name") as? String, name != name.lowercased() {
            setPrimitiveValue(name.lowercased(), forKey: "name")
        }
    }
}

@Suite("Read path: findings of the review of the fetch and fault fast paths")
struct ReadPathReviewTests {
    static var tagModel: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Tag") {
                    Attribute("name", .string)
                    Attribute("rank", .int64)
                }
            }
        }
    }

    /// A store holding one tag, and its ID.
    static func oneTag(_ coordinator: PersistentStoreCoordinator, name: String) async throws -> ManagedObjectID {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let tag = try context.insertNewObject(forEntityName: "Tag")
            tag.setValue(name, forKey: "name")
            tag.setValue(Int64(7), forKey: "rank")
            try context.save()
            return tag.objectID
        }
    }

    @Test("a value awakeFromFetch sets is what the read that fired the fault returns (fetched row, store read)")
    func awakeFromFetchValueIsReadBack() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.tagModel, classes: [(LowercasingTag.self, "Tag")])
        let id = try await Self.oneTag(coordinator, name: "MiXed")
        // A fault holding its fetched row, fired by the read (the read-in-place path).
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let tag = try #require(try context.fetch(FetchRequest(entityName: "Tag")).first)
            #expect(tag.isFault)
            let first = tag.value(forKey: "name") as? String
            let second = tag.value(forKey: "name") as? String
            #expect(first == "mixed")
            #expect(second == "mixed")
        }
        // A fault without a row, fired from the store.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let tag = try context.object(with: id)
            #expect(tag.isFault)
            let first = tag.value(forKey: "name") as? String
            #expect(first == "mixed")
        }
    }

    @Test("a fetched fault whose context is gone answers committedValues(forKeys:) as value(forKey:) does")
    func contextGoneCommittedValues() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.tagModel)
        _ = try await Self.oneTag(coordinator, name: "kept")
        var core: ContextCore? = ContextCore(coordinator: coordinator, hub: NotificationHub())
        let fetched = try #require(core).fetchManagedObjects(FetchRequest(entityName: "Tag"))
        core = nil
        let tag = try #require(fetched.first)
        #expect(tag.core == nil, "the context is gone")
        // Its fetched row answers, whichever of the two is asked first.
        let committed = tag.committedValues(forKeys: ["name"])["name"] as? String
        #expect(committed == "kept")
        #expect(tag.value(forKey: "name") as? String == "kept")
        #expect(tag.committedValues(forKeys: ["name"])["name"] as? String == "kept")
    }

    @Test("after a reset, an old instance that was still a fault holding its fetched row reads what a fired one reads")
    func resetDropsFetchedRows() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.tagModel)
        let id = try await Self.oneTag(coordinator, name: "before")
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let fired = try #require(try context.fetch(FetchRequest(entityName: "Tag")).first)
            _ = fired.value(forKey: "name")
            // Another context changes the object; this one doesn't merge.
            try privateContext(coordinator).performAndWait { (other: isolated ManagedObjectContext) throws in
                try other.existingObject(with: id).setValue("after", forKey: "name")
                try other.save()
            }
            // A second, unfired instance is only possible after a reset: reset once, fetch
            // again (a fault holding the row it read), change the store, reset again.
            context.reset()
            let unfired = try #require(try context.fetch(FetchRequest(entityName: "Tag")).first)
            #expect(unfired.isFault)
            try privateContext(coordinator).performAndWait { (other: isolated ManagedObjectContext) throws in
                try other.existingObject(with: id).setValue("latest", forKey: "name")
                try other.save()
            }
            context.reset()
            // Both instances are invalidated faults with their values dropped: they read alike.
            let firedName = fired.value(forKey: "name") as? String
            let unfiredName = unfired.value(forKey: "name") as? String
            #expect(firedName == "latest")
            #expect(unfiredName == firedName)
        }
    }
}
