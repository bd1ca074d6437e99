import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// A revert meeting the context's unsaved changes to the to-manys it sets back
/// (`revertTransaction(at:)`, spec 0006 §25): judged member by member. An unsaved change to
/// other members of the same to-many is kept and the revert goes ahead; one to a member the
/// revert moves — on the to-many itself, or on the member's own (inverse) side — refuses it,
/// never overwritten at the save.
@Suite("Contexts: reverts and unsaved to-many changes")
struct RevertMembershipTests {
    /// Posts with tags (many-to-many, `Post.tags` recorded) and ordered chapters
    /// (`Post.chapters` recorded, `Chapter.post` derived): the relationship plans' model.
    static func model() throws -> ManagedObjectModel { try RelationshipPlanTests.model() }

    /// Saved by setup (1): posts P and Q, tags a–d, P tagged a; chapters c1, c2 in P.
    /// Transaction 2: P tagged b and c1 taken out of P.
    static func store(_ dir: TemporaryDirectory) async throws -> PersistentStoreCoordinator {
        let coordinator = try openCoordinator(dir, model: try model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let p = try context.insertNewObject(forEntityName: "Post")
            p.setValue("P", forKey: "title")
            let q = try context.insertNewObject(forEntityName: "Post")
            q.setValue("Q", forKey: "title")
            for name in ["a", "b", "c", "d"] {
                let tag = try context.insertNewObject(forEntityName: "Tag")
                tag.setValue(name, forKey: "name")
                if name == "a" { p.mutableSetValue(forKey: "tags").add(tag) }
            }
            for name in ["c1", "c2"] {
                let chapter = try context.insertNewObject(forEntityName: "Chapter")
                chapter.setValue(name, forKey: "name")
                p.mutableOrderedSetValue(forKey: "chapters").add(chapter)
            }
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let p = try object(context, "Post", "title", "P")
            p.mutableSetValue(forKey: "tags").add(try object(context, "Tag", "name", "b"))
            p.mutableOrderedSetValue(forKey: "chapters").remove(try object(context, "Chapter", "name", "c1"))
            try context.save()
        }
        return coordinator
    }

    static func object(_ context: isolated ManagedObjectContext, _ entity: String, _ key: String, _ value: String) throws -> ManagedObject {
        try #require(try context.fetch(FetchRequest(entityName: entity, predicate: try FormatPredicate(format: "\(key) == %@", value))).first)
    }

    static func names(_ value: Any?, _ key: String) -> [String] {
        let objects: [ManagedObject] = (value as? Set<ManagedObject>).map(Array.init) ?? (value as? [ManagedObject]) ?? []
        return objects.compactMap { $0.value(forKey: key) as? String }.sorted()
    }

    static func token(_ coordinator: PersistentStoreCoordinator, _ sequence: UInt64) throws -> HistoryToken {
        HistoryToken(storeIdentifier: try #require(coordinator.persistentStores.first).identifier, sequence: sequence)
    }

    @Test("an unsaved change to other members of an unordered to-many is kept: the revert takes back its own members only, and the save holds both")
    func compatibleChangeIsKept() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await Self.store(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let p = try Self.object(context, "Post", "title", "P")
            // Unsaved: P tagged d (another member than the revert's b), and d tagged on Q too.
            let d = try Self.object(context, "Tag", "name", "d")
            p.mutableSetValue(forKey: "tags").add(d)
            d.mutableSetValue(forKey: "posts").add(try Self.object(context, "Post", "title", "Q"))
            try context.revertTransaction(at: try Self.token(coordinator, 2))
            #expect(Self.names(p.value(forKey: "tags"), "name") == ["a", "d"])
            #expect(Self.names(p.value(forKey: "chapters"), "name") == ["c1", "c2"])
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let p = try Self.object(context, "Post", "title", "P")
            #expect(Self.names(p.value(forKey: "tags"), "name") == ["a", "d"])
            #expect(Self.names(p.value(forKey: "chapters"), "name") == ["c1", "c2"])
            #expect(Self.names(try Self.object(context, "Post", "title", "Q").value(forKey: "tags"), "name") == ["d"])
        }
        #expect(try #require(coordinator.persistentStores.first).log.verify().isClean)
    }

    @Test("an unsaved change to a member the revert moves refuses it, nothing changed: on the to-many (b untagged), on an ordered to-many at all, or on the member's own side (c1 moved to Q)")
    func conflictingChangeRefuses() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await Self.store(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let p = try Self.object(context, "Post", "title", "P")
            // Unsaved: b taken off P (the revert would take it off too: the same member).
            p.mutableSetValue(forKey: "tags").remove(try Self.object(context, "Tag", "name", "b"))
            #expect {
                try context.revertTransaction(at: try Self.token(coordinator, 2))
            } throws: { error in
                guard case .undoConflict(_, let property, _, _) = error as? ContextError else { return false }
                return property == "tags"
            }
            #expect(Self.names(p.value(forKey: "tags"), "name") == ["a"])
            #expect(Self.names(p.value(forKey: "chapters"), "name") == ["c2"])
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // An ordered to-many is set back whole (its order with it): any unsaved change to it refuses.
            let p = try Self.object(context, "Post", "title", "P")
            let c3 = try context.insertNewObject(forEntityName: "Chapter")
            c3.setValue("c3", forKey: "name")
            p.mutableOrderedSetValue(forKey: "chapters").add(c3)
            #expect(throws: ContextError.self) { try context.revertTransaction(at: try Self.token(coordinator, 2)) }
            #expect(Self.names(p.value(forKey: "chapters"), "name") == ["c2", "c3"])
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let q = try Self.object(context, "Post", "title", "Q")
            let c1 = try Self.object(context, "Chapter", "name", "c1")
            // Unsaved: c1 moved to Q, through its own side (the revert would put it back in P).
            c1.setValue(q, forKey: "post")
            #expect {
                try context.revertTransaction(at: try Self.token(coordinator, 2))
            } throws: { error in
                guard case .undoConflict(let object, _, _, let found) = error as? ContextError else { return false }
                return object == c1.objectID.description && found.contains("unsaved")
            }
            #expect((c1.value(forKey: "post") as? ManagedObject)?.objectID == q.objectID, "the unsaved move stands")
            #expect(Self.names(try Self.object(context, "Post", "title", "P").value(forKey: "tags"), "name") == ["a", "b"])
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let q = try Self.object(context, "Post", "title", "Q")
            #expect(Self.names(q.value(forKey: "chapters"), "name") == ["c1"], "the move was saved, not overwritten")
        }
    }
}
