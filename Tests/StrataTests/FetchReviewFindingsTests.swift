import Foundation
import Strata
import StrataTestSupport
import Testing

// Findings of a review of fetch requests and predicates (session 12): each test failed on
// the code before its fix (the first crashed the process).

/// Items c1…c12 with rank n % 4, four of them in group G.
private func itemStore(_ dir: TemporaryDirectory) async throws -> PersistentStoreCoordinator {
    let coordinator = try openCoordinator(dir, model: try SeedModels.catalog)
    try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        let group = try context.insertNewObject(forEntityName: "Group")
        group.setValue("G", forKey: "title")
        for n in 1...12 {
            let item = try context.insertNewObject(forEntityName: "Item")
            item.setValue("c\(n)", forKey: "code")
            item.setValue(Int16(n % 4), forKey: "rank")
            if n % 3 == 0 { item.setValue(group, forKey: "group") }
        }
        try context.save()
    }
    return coordinator
}

@Suite("Fetch review findings: deep predicates, to-many sort keys, a collection CONTAINS a key")
struct FetchReviewFindingsTests {
    @Test("a fetch with a predicate folded from 3,000 terms runs (it overflowed the stack), and one built by hand too deep is refused by name")
    func deepPredicates() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await itemStore(dir)
        var folded = try FormatPredicate(format: "rank >= 0")
        for n in 1..<3_000 { folded = FormatPredicate.and([folded, try FormatPredicate(format: "code != %@", "x\(n)")]) }
        let predicate = folded
        var tooDeep = try FormatPredicate(format: "rank >= 0").node
        for level in 0..<3_000 { tooDeep = level % 2 == 0 ? .and([tooDeep, .constant(true)]) : .or([tooDeep, .constant(false)]) }
        let deepPredicate = FormatPredicate(tooDeep)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.fetch(FetchRequest(entityName: "Item", predicate: predicate)).count == 12)
            #expect(try context.count(for: FetchRequest(entityName: "Item", predicate: predicate)) == 12)
            do {
                _ = try context.fetch(FetchRequest(entityName: "Item", predicate: deepPredicate))
                Issue.record("a predicate nesting 3,000 levels should be refused")
            } catch ContextError.invalidFetchRequest(let part, let reason) {
                #expect(part == "predicate")
                #expect(reason.contains("levels deep"))
            }
        }
    }

    @Test("a sort key through a to-many relationship is refused, as Core Data's 'to-many key not allowed here'; @count through it is a number and sorts")
    func toManySortKey() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await itemStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Group")
            request.sortDescriptors = [FetchSortDescriptor(key: "items.code")]
            do {
                _ = try context.fetch(request)
                Issue.record("a to-many sort key should be refused")
            } catch ContextError.invalidFetchRequest(let part, let reason) {
                #expect(part.contains("items.code"))
                #expect(reason.contains("Group.items"))
            }
            request.sortDescriptors = [FetchSortDescriptor(key: "items.@count")]
            #expect(try context.fetch(request).count == 1)
            // A to-one path sorts as before.
            var items = FetchRequest(entityName: "Item", sortDescriptors: [FetchSortDescriptor(key: "group.title"), FetchSortDescriptor(key: "code")])
            items.fetchLimit = 1
            #expect(try context.fetch(items).count == 1)
        }
    }

    @Test("a constant collection CONTAINS a key path is IN turned around: {1, 2} CONTAINS rank")
    func collectionContainsKeyPath() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await itemStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let contains = try context.fetch(FetchRequest(entityName: "Item", predicate: try FormatPredicate(format: "{1, 2} CONTAINS rank")))
            let inList = try context.fetch(FetchRequest(entityName: "Item", predicate: try FormatPredicate(format: "rank IN {1, 2}")))
            #expect(Set(contains.map(\.objectID)) == Set(inList.map(\.objectID)))
            #expect(contains.count == 6)
            // A string constant still needs a string attribute.
            #expect(throws: ContextError.self) {
                _ = try context.fetch(FetchRequest(entityName: "Item", predicate: try FormatPredicate(format: "rank CONTAINS 'x'")))
            }
        }
    }
}
