import Foundation
import Strata
import StrataPredicate
import StrataTestSupport
import Testing

/// `members.@count` counts a to-many's object IDs without making an object for each member
/// (`count(forKey:)`), in key paths and in predicates, and answers as counting the
/// collection does: recorded and derived sides, ordered ones, unsaved changes, faults.
@Suite("To-many counts")
struct ToManyCountTests {
    @Test("@count of recorded, derived and ordered to-manys equals the collection's count, saved and unsaved, and makes no member")
    func counts() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try RelationshipPlanTests.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try RelationshipPlanTests.populate(context)
            context.reset()
            // Every object made stays registered: counting must make no tag and no chapter.
            context.retainsRegisteredObjects = true
            let counts = try context.fetch(FetchRequest(entityName: "Post")).map {
                ($0.value(forKeyPath: "tags.@count") as? Int, $0.value(forKeyPath: "chapters.@count") as? Int)
            }
            #expect(context.registeredObjects.allSatisfy { $0.entity.name == "Post" }, "no member made")
            #expect(counts.contains { ($0.0 ?? 0) > 0 } && counts.contains { ($0.1 ?? 0) > 0 })
            // A derived side (Tag.posts) is counted in the store, making no post either.
            context.reset()
            let counted = try context.fetch(FetchRequest(entityName: "Tag")).map { $0.value(forKeyPath: "posts.@count") as? Int }
            #expect(context.registeredObjects.allSatisfy { $0.entity.name == "Tag" }, "no post made")
            #expect(counted.contains { ($0 ?? 0) > 1 })
            let posts = try context.fetch(FetchRequest(entityName: "Post"))
            let tags = try context.fetch(FetchRequest(entityName: "Tag"))
            for object in posts + tags {
                for key in object.entity.name == "Post" ? ["tags", "chapters"] : ["posts"] {
                    let counted = object.value(forKeyPath: "\(key).@count") as? Int
                    let collection = object.value(forKey: key)
                    let members = (collection as? Set<ManagedObject>)?.count ?? (collection as? [ManagedObject])?.count
                    #expect(counted == members, "\(object.objectID) \(key)")
                }
            }
            // Predicates: a full scan of posts and of tags, through stored rows, agree with the collections.
            for (entity, key) in [("Post", "tags"), ("Post", "chapters"), ("Tag", "posts")] {
                for n in 0...4 {
                    let checked = try PlanAgreement.check(context, entity, "\(key).@count >= %d", [n])
                    #expect(checked.agrees)
                    let want = try context.fetch(FetchRequest(entityName: entity)).filter { object in
                        let value = object.value(forKey: key)
                        return ((value as? Set<ManagedObject>)?.count ?? (value as? [ManagedObject])?.count ?? 0) >= n
                    }
                    #expect(Set(checked.results) == Set(want.map(\.objectID)), "\(entity) \(key).@count >= \(n)")
                }
            }
            // Unsaved: a tag added to a post, a new post with two tags (its derived side on the tags).
            let post = try #require(posts.first)
            let before = post.value(forKeyPath: "tags.@count") as? Int ?? -1
            let spare = try #require(tags.first { !((post.value(forKey: "tags") as? Set<ManagedObject>) ?? []).contains($0) })
            post.mutableSetValue(forKey: "tags").add(spare)
            #expect(post.value(forKeyPath: "tags.@count") as? Int == before + 1)
            let fresh = try context.insertNewObject(forEntityName: "Post")
            fresh.setValue(Set(tags.prefix(2)), forKey: "tags")
            #expect(fresh.value(forKeyPath: "tags.@count") as? Int == 2)
            let taggedBefore = tags[0].value(forKey: "posts") as? Set<ManagedObject>
            #expect(tags[0].value(forKeyPath: "posts.@count") as? Int == taggedBefore?.count)
            let pending = try PlanAgreement.check(context, "Tag", "posts.@count >= 3")
            #expect(pending.agrees)
        }
    }

    @Test("a context pinned to a query generation counts a derived side as of it; after another context's save, as the store holds it once unpinned")
    func pinnedCounts() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try RelationshipPlanTests.model())
        let reader = privateContext(coordinator)
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            try RelationshipPlanTests.populate(context)
            context.reset()
            try context.setQueryGenerationFrom(.current)
            _ = try context.count(for: FetchRequest(entityName: "Tag"))
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let tag = try RelationshipPlanTests.object(context, "Tag", "name", "t0")
            for post in try context.fetch(FetchRequest(entityName: "Post")) { post.mutableSetValue(forKey: "tags").add(tag) }
            try context.save()
        }
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            let tag = try RelationshipPlanTests.object(context, "Tag", "name", "t0")
            let pinned = tag.value(forKeyPath: "posts.@count") as? Int
            #expect(pinned == (tag.value(forKey: "posts") as? Set<ManagedObject>)?.count)
            #expect(pinned != 12, "the pinned generation's posts, not the store's 12")
            try context.setQueryGenerationFrom(nil)
            context.reset()
            let now = try RelationshipPlanTests.object(context, "Tag", "name", "t0")
            #expect(now.value(forKeyPath: "posts.@count") as? Int == 12)
        }
    }
}
