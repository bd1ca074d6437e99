import Foundation
import Strata
import StrataPredicate
import StrataTestSupport
import Testing

/// Relationship comparisons the planner answers from the store's references instead of
/// scanning (`Specs/0008-fetch-requests.md`, Planner 3a): to-one equality on either side of
/// an inverse pair, and membership in a to-many (`ANY r == obj`, `r CONTAINS obj`,
/// `obj IN r`, `ANY r IN {…}`) on a recorded side (its `referrers` rows) or a derived one
/// (each object's own recorded inverse). Every result is checked against the same predicate
/// forced through a full scan.
@Suite("Relationship plans")
struct RelationshipPlanTests {
    /// Posts with tags (many-to-many: `Post.tags` recorded, `Tag.posts` derived), ordered
    /// chapters (`Post.chapters` recorded, `Chapter.post` derived), and a one-to-one
    /// (`Husband.wife` recorded, `Wife.husband` derived).
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Post") {
                Attribute("title", .string)
                Relationship("tags", to: "Tag", inverse: "posts", toMany: true)
                Relationship("chapters", to: "Chapter", inverse: "post", toMany: true, ordered: true)
            }
            Entity("Tag") {
                Attribute("name", .string)
                Relationship("posts", to: "Post", inverse: "tags", toMany: true)
            }
            Entity("Chapter") {
                Attribute("name", .string)
                Relationship("post", to: "Post", inverse: "chapters")
            }
            Entity("Husband") {
                Attribute("name", .string)
                Relationship("wife", to: "Wife", inverse: "husband")
            }
            Entity("Wife") {
                Attribute("name", .string)
                Relationship("husband", to: "Husband", inverse: "wife")
                // Over the derived side: its keys hold nil, so it never takes the husband as a prefix.
                FetchIndex("byHusbandName", "husband", "name")
            }
        }
    }

    /// 12 posts, 5 tags (post n has tag t when (n + t) % 3 == 0 or t == n % 5), 2 chapters
    /// per even post, 4 couples and a single husband.
    static func populate(_ context: isolated ManagedObjectContext) throws {
        let tags = try (0..<5).map { t in
            let tag = try context.insertNewObject(forEntityName: "Tag")
            tag.setValue("t\(t)", forKey: "name")
            return tag
        }
        for n in 0..<12 {
            let post = try context.insertNewObject(forEntityName: "Post")
            post.setValue("p\(n)", forKey: "title")
            let held = tags.enumerated().filter { t, _ in (n + t) % 3 == 0 || t == n % 5 }.map(\.element)
            post.setValue(held, forKey: "tags")
            if n % 2 == 0 {
                for c in 0..<2 {
                    let chapter = try context.insertNewObject(forEntityName: "Chapter")
                    chapter.setValue("c\(n).\(c)", forKey: "name")
                    chapter.setValue(post, forKey: "post")
                }
            }
        }
        for n in 0..<5 {
            let husband = try context.insertNewObject(forEntityName: "Husband")
            husband.setValue("h\(n)", forKey: "name")
            if n < 4 {
                let wife = try context.insertNewObject(forEntityName: "Wife")
                wife.setValue("w\(n)", forKey: "name")
                husband.setValue(wife, forKey: "wife")
            }
        }
        try context.save()
    }

    /// One object of `entity` by its name attribute.
    static func object(_ context: isolated ManagedObjectContext, _ entity: String, _ key: String, _ name: String) throws -> ManagedObject {
        let found = try context.fetch(FetchRequest(entityName: entity, predicate: try FormatPredicate(format: "\(key) == %@", name)))
        return try #require(found.first)
    }

    /// The plan of `format` on `entity`, and whether its results (in order) and count equal
    /// the same predicate forced through a full scan (`NOT NOT`).
    static func check(
        _ context: isolated ManagedObjectContext, _ entity: String, _ format: String, _ arguments: [Any]
    ) throws -> (plan: String, results: [ManagedObjectID], agrees: Bool) {
        let checked = try PlanAgreement.check(context, entity, format, arguments)
        return (checked.plan, checked.results, checked.agrees)
    }

    @Test("membership in a recorded to-many (its referrers rows) and a derived one (the object's own side), in every spelling")
    func membership() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Self.populate(context)
            let t1 = try Self.object(context, "Tag", "name", "t1")
            let t2 = try Self.object(context, "Tag", "name", "t2")
            let p4 = try Self.object(context, "Post", "title", "p4")
            let c = try Self.object(context, "Chapter", "name", "c4.1")

            let cases: [(String, String, [Any], String)] = [
                ("Post", "ANY tags == %@", [t1], "index scan Post.tags CONTAINS Tag/p2"),
                ("Post", "tags CONTAINS %@", [t1], "index scan Post.tags CONTAINS Tag/p2"),
                ("Post", "%@ IN tags", [t1], "index scan Post.tags CONTAINS Tag/p2"),
                ("Post", "ANY tags IN %@", [[t1, t2]], "index scan Post.tags CONTAINS ANY {Tag/p2, Tag/p3}"),
                ("Post", "ANY tags == %@ OR ANY tags == %@", [t1, t2], "index scan Post.tags CONTAINS ANY {Tag/p2, Tag/p3}"),
                ("Post", "ANY tags == %@ AND ANY tags == %@", [t1, t2], "index scan Post.tags CONTAINS Tag/p2 then filter (ANY tags == "),
                ("Post", "ANY chapters == %@", [c], "index scan Post.chapters CONTAINS Chapter/p"),
                ("Tag", "ANY posts == %@", [p4], "index scan Tag.posts CONTAINS Post/p"),
                ("Tag", "posts CONTAINS %@ AND name != 't0'", [p4], "index scan Tag.posts CONTAINS Post/p"),
                ("Chapter", "post == %@", [p4], "index scan Chapter.post = Post/p"),
            ]
            for (entity, format, arguments, plan) in cases {
                let (got, results, agrees) = try Self.check(context, entity, format, arguments)
                #expect(got.hasPrefix(plan), "\(entity) \(format): \(got)")
                #expect(agrees, "\(entity) \(format): \(results)")
                #expect(!results.isEmpty || format.contains("AND"), "\(entity) \(format) finds something")
            }
            // The one-to-one: the recorded side and the derived one.
            let h1 = try Self.object(context, "Husband", "name", "h1")
            let w1 = try Self.object(context, "Wife", "name", "w1")
            let wives = try Self.check(context, "Wife", "husband == %@", [h1])
            #expect(wives.plan.hasPrefix("index scan Wife.husband = Husband/p"))
            #expect(wives.results == [w1.objectID] && wives.agrees)
            let husbands = try Self.check(context, "Husband", "wife == %@", [w1])
            #expect(husbands.results == [h1.objectID] && husbands.agrees)
            let named = try Self.check(context, "Wife", "husband == %@ AND name == 'w1'", [h1])
            #expect(!named.plan.contains("byHusbandName"), "\(named.plan)")
            #expect(named.results == [w1.objectID] && named.agrees)
        }
    }

    @Test("unsaved changes to memberships are judged; a pinned generation reads the memberships it had")
    func pendingAndPinned() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        let reader = privateContext(coordinator)
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            try Self.populate(context)
            try context.setQueryGenerationFrom(.current)
            _ = try context.count(for: FetchRequest(entityName: "Post"))  // the first read pins it
        }
        let (t1URI, p4URI) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> (URL, URL) in
            let t1 = try Self.object(context, "Tag", "name", "t1")
            let p4 = try Self.object(context, "Post", "title", "p4")
            let p0 = try Self.object(context, "Post", "title", "p0")
            // Unsaved: p0 gains t1 (and keeps its tags).
            p0.mutableSetValue(forKey: "tags").add(t1)
            for format in ["ANY tags == %@", "%@ IN tags"] {
                let pending = try Self.check(context, "Post", format, [t1])
                #expect(pending.agrees, "\(format) with an unsaved membership")
                #expect(pending.results.contains(p0.objectID))
            }
            let teamless = try Self.check(context, "Tag", "ANY posts == %@", [p0])
            #expect(teamless.agrees)
            try context.save()
            return (t1.objectID.uriRepresentation(), p4.objectID.uriRepresentation())
        }
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            let t1 = try #require(coordinator.managedObjectID(forURIRepresentation: t1URI))
            let p4 = try #require(coordinator.managedObjectID(forURIRepresentation: p4URI))
            let pinned = try context.fetch(FetchRequest(entityName: "Post", predicate: try FormatPredicate(format: "ANY tags == %@", t1)))
            #expect(!pinned.map { $0.value(forKey: "title") as? String }.contains("p0"), "p0 had no t1 at the pinned generation")
            let pinnedTags = try Self.check(context, "Tag", "ANY posts == %@", [p4])
            #expect(pinnedTags.agrees)
            try context.setQueryGenerationFrom(nil)
            let now = try context.fetch(FetchRequest(entityName: "Post", predicate: try FormatPredicate(format: "ANY tags == %@", t1)))
            #expect(now.map { $0.value(forKey: "title") as? String }.contains("p0"))
        }
    }
}
