import Foundation
@testable import Strata
import StrataTestSupport
import Testing

/// Session 28: a child's save and what its parent's save then checks and keeps (spec 0006 §18).
@Suite("Session 28: nested contexts — versions through a child, to-many pushes", .serialized)
struct NestedContextFixTests {
    /// A post "Hello" (tags [a]) and tags a, b, c, in a store in `dir`; a second coordinator on
    /// the same store path plays the other writer.
    static func store(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, PersistentStoreCoordinator, ManagedObjectID, [ManagedObjectID]) {
        let model = try NestedMergeReviewTests.postsModel()
        let coordinator = try openCoordinator(dir, model: model)
        let (postID, tagIDs) = try await NestedMergeReviewTests.postWithTags(coordinator)
        let other = try openCoordinator(dir, model: model)
        return (coordinator, other, postID, tagIDs)
    }

    /// The other writer sets the post's title and saves.
    static func otherWriterRetitles(_ coordinator: PersistentStoreCoordinator, _ postID: ManagedObjectID, _ title: String) async throws {
        try await privateContext(coordinator, name: "other").perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            post.setValue(title, forKey: "title")
            try context.save()
        }
    }

    static func storedTitle(_ coordinator: PersistentStoreCoordinator, _ postID: ManagedObjectID) async throws -> String? {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: postID).value(forKey: "title") as? String
        }
    }

    /// Saves `context` after the other writer retitled the post "Theirs": a merge conflict
    /// unless `trumps` (a trumping policy: the save goes through); either way the store
    /// keeps "Theirs".
    static func saveOverOtherWriter(
        _ context: ManagedObjectContext, trumps: Bool, _ otherCoordinator: PersistentStoreCoordinator, _ postID: ManagedObjectID
    ) async throws {
        let error = await context.perform { (context: isolated ManagedObjectContext) -> (any Error)? in
            do {
                try context.save()
                return nil
            } catch {
                return error
            }
        }
        if trumps {
            #expect(error == nil, "\(String(describing: error))")
        } else if let error = error as? ContextError, case .mergeConflicts = error {
        } else {
            Issue.record("expected a merge conflict, got \(String(describing: error))")
        }
        let stored = try await storedTitle(otherCoordinator, postID)
        #expect(stored == "Theirs", "trumping policy: \(trumps)")
    }

    @Test("the parent's save reports a conflict for an object a child read before another writer changed it, though the parent released its copy")
    func lostUpdateThroughChildIsAConflict() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, otherCoordinator, postID, _) = try await Self.store(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            #expect(post.value(forKey: "title") as? String == "Hello")
            context.userInfo["post"] = post
        }
        // The parent holds no copy of the post now (it keeps unchanged objects only while used).
        await parent.perform { (context: isolated ManagedObjectContext) in
            #expect(context.registeredObject(for: postID) == nil)
        }
        try await Self.otherWriterRetitles(otherCoordinator, postID, "Theirs")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let post = try #require(context.userInfo["post"] as? ManagedObject)
            post.setValue("Mine", forKey: "title")
            try context.save()
        }
        let refused = await parent.perform { (context: isolated ManagedObjectContext) -> Bool in
            do {
                try context.save()
                return false
            } catch let error as ContextError {
                guard case .mergeConflicts(let conflicts) = error else { return false }
                return conflicts.map(\.objectID) == [postID]
            } catch {
                return false
            }
        }
        #expect(refused, "the default error policy refuses the save: the child's change was made to the values before the other writer's")
        #expect(try await Self.storedTitle(otherCoordinator, postID) == "Theirs", "the other writer's change is not silently overwritten")
    }

    @Test("with a merge policy, the conflict through a child is resolved as at a root context: the store's change to another property stays")
    func conflictThroughChildResolvedByPolicy() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, otherCoordinator, postID, tagIDs) = try await Self.store(dir)
        let parent = privateContext(coordinator, name: "parent")
        await parent.perform { (context: isolated ManagedObjectContext) in context.mergePolicy = StandardMergePolicy.mergeByPropertyObjectTrump }
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.userInfo["post"] = try context.existingObject(with: postID)
        }
        try await Self.otherWriterRetitles(otherCoordinator, postID, "Theirs")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let post = try #require(context.userInfo["post"] as? ManagedObject)
            post.mutableSetValue(forKey: "tags").add(try context.existingObject(with: tagIDs[1]))
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await privateContext(otherCoordinator).perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            #expect(post.value(forKey: "title") as? String == "Theirs", "the title the child didn't change is the other writer's")
            #expect(NestedMergeReviewTests.tagNames(post) == ["a", "b"])
        }
    }

    @Test("the parent's own save of an object between a child's read and its push is no conflict")
    func parentsOwnSaveIsNoConflict() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, otherCoordinator, postID, tagIDs) = try await Self.store(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.userInfo["post"] = try context.existingObject(with: postID)
            #expect((context.userInfo["post"] as? ManagedObject)?.value(forKey: "title") as? String == "Hello")
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            post.mutableSetValue(forKey: "tags").add(try context.existingObject(with: tagIDs[2]))
            try context.save()
        }
        await parent.perform { (context: isolated ManagedObjectContext) in
            #expect(context.registeredObject(for: postID) == nil)
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let post = try #require(context.userInfo["post"] as? ManagedObject)
            post.setValue("Mine", forKey: "title")
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await privateContext(otherCoordinator).perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            #expect(post.value(forKey: "title") as? String == "Mine")
            #expect(NestedMergeReviewTests.tagNames(post) == ["a", "c"])
        }
    }

    @Test("a parent's save of a child's change and its undo (pushed, netting to nothing) moves the version the child read: the next push is no conflict")
    func pushedChangeAndUndoThenChangeAgain() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, otherCoordinator, postID, _) = try await Self.store(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            context.userInfo["post"] = post
            post.setValue("Renamed", forKey: "title")
            try context.save()
            try context.undo()
            #expect(post.value(forKey: "title") as? String == "Hello")
            try context.save()
            try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in try parent.save() }
            post.setValue("Mine", forKey: "title")
            try context.save()
            try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in try parent.save() }
        }
        #expect(try await Self.storedTitle(otherCoordinator, postID) == "Mine")
    }

    @Test("a parent holding an object its save wrote only through pushed groups that net to nothing takes the new version: its own next change saves")
    func parentHoldingNetUnchangedObjectTakesNewVersion() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, otherCoordinator, postID, _) = try await Self.store(dir)
        let parent = privateContext(coordinator, name: "parent")
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            #expect(post.value(forKey: "title") as? String == "Hello")
            context.userInfo["post"] = post
        }
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            post.setValue("Renamed", forKey: "title")
            try context.save()
            try context.undo()
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try context.save()
            let post = try #require(context.userInfo["post"] as? ManagedObject)
            post.setValue("Parent's", forKey: "title")
            try context.save()
        }
        #expect(try await Self.storedTitle(otherCoordinator, postID) == "Parent's")
    }

    @Test("a child's delete of an object it fetched, after another writer changed it and the parent let it go, is a conflict at the parent's save")
    func deleteThroughChildAfterOtherWriterIsAConflict() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, otherCoordinator, postID, _) = try await Self.store(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let posts = try context.fetch(FetchRequest(entityName: "Post"))
            #expect(posts.map(\.objectID) == [postID])
            #expect(posts.first?.value(forKey: "title") as? String == "Hello")
            context.userInfo["post"] = posts.first
        }
        try await Self.otherWriterRetitles(otherCoordinator, postID, "Theirs")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try #require(context.userInfo["post"] as? ManagedObject))
            try context.save()
        }
        let conflicts = await parent.perform { (context: isolated ManagedObjectContext) -> [MergeConflict] in
            do {
                try context.save()
                return []
            } catch ContextError.mergeConflicts(let conflicts) {
                return conflicts
            } catch {
                return []
            }
        }
        #expect(conflicts.map(\.objectID) == [postID])
        #expect(conflicts.first?.isDeletedInContext == true)
        #expect(try await Self.storedTitle(otherCoordinator, postID) == "Theirs", "the post the other writer changed is not deleted unseen")
    }

    @Test("a grandchild's read version reaches the root: another writer's change in between is a conflict at the root's save")
    func lostUpdateThroughGrandchild() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, otherCoordinator, postID, _) = try await Self.store(dir)
        let root = privateContext(coordinator, name: "root")
        let middle = childContext(root, name: "middle")
        let leaf = childContext(middle, name: "leaf")
        try await leaf.perform { (context: isolated ManagedObjectContext) throws in
            context.userInfo["post"] = try context.existingObject(with: postID)
            #expect((context.userInfo["post"] as? ManagedObject)?.value(forKey: "title") as? String == "Hello")
        }
        try await Self.otherWriterRetitles(otherCoordinator, postID, "Theirs")
        try await leaf.perform { (context: isolated ManagedObjectContext) throws in
            try #require(context.userInfo["post"] as? ManagedObject).setValue("Mine", forKey: "title")
            try context.save()
        }
        try await middle.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        let failed = await root.perform { (context: isolated ManagedObjectContext) -> Bool in (try? context.save()) == nil }
        #expect(failed)
        #expect(try await Self.storedTitle(otherCoordinator, postID) == "Theirs")
    }

    @Test("a child's push of a to-many addition keeps the parent's unsaved addition to the same relationship")
    func childToManyPushKeepsParentsAddition() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, otherCoordinator, postID, tagIDs) = try await Self.store(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            #expect(NestedMergeReviewTests.tagNames(post) == ["a"])
            context.userInfo["post"] = post
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            post.mutableSetValue(forKey: "tags").add(try context.existingObject(with: tagIDs[2]))
            context.userInfo["post"] = post
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let post = try #require(context.userInfo["post"] as? ManagedObject)
            post.mutableSetValue(forKey: "tags").add(try context.existingObject(with: tagIDs[1]))
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let post = try #require(context.userInfo["post"] as? ManagedObject)
            #expect(NestedMergeReviewTests.tagNames(post) == ["a", "b", "c"], "the parent's unsaved addition of c stays")
            try context.undo()
            #expect(NestedMergeReviewTests.tagNames(post) == ["a", "c"], "undo of the push takes back b only")
            try context.redo()
            try context.save()
        }
        try await privateContext(otherCoordinator).perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            #expect(NestedMergeReviewTests.tagNames(post) == ["a", "b", "c"])
            let tagC = try context.existingObject(with: tagIDs[2])
            #expect(((tagC.value(forKey: "posts") as? Set<ManagedObject>) ?? []).count == 1)
        }
    }

    @Test("a child's push of a to-many removal keeps the parent's unsaved addition, and the parent's unsaved removal stays removed")
    func childToManyRemovalKeepsParentsChanges() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, otherCoordinator, postID, tagIDs) = try await Self.store(dir)
        // The post has tags a and b.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: postID).mutableSetValue(forKey: "tags").add(try context.existingObject(with: tagIDs[1]))
            try context.save()
        }
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            #expect(NestedMergeReviewTests.tagNames(post) == ["a", "b"])
            context.userInfo["post"] = post
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            post.mutableSetValue(forKey: "tags").add(try context.existingObject(with: tagIDs[2]))
            post.mutableSetValue(forKey: "tags").remove(try context.existingObject(with: tagIDs[1]))
            context.userInfo["post"] = post
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let post = try #require(context.userInfo["post"] as? ManagedObject)
            post.mutableSetValue(forKey: "tags").remove(try context.existingObject(with: tagIDs[0]))
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let post = try #require(context.userInfo["post"] as? ManagedObject)
            #expect(NestedMergeReviewTests.tagNames(post) == ["c"])
            try context.save()
        }
        try await privateContext(otherCoordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(NestedMergeReviewTests.tagNames(try context.existingObject(with: postID)) == ["c"])
        }
    }

    @Test("a child's fetch by a related object's value: the parent's verdict where the child changed none of the related entity's objects, the child's where it did")
    func childFetchThroughRelatedObjects() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, postID, tagIDs) = try await Self.store(dir)
        let secondID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.insertNewObject(forEntityName: "Post")
            post.setValue("Second", forKey: "title")
            try context.save()
            return post.objectID
        }
        let parent = privateContext(coordinator, name: "parent")
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: tagIDs[0]).setValue("b", forKey: "name")  // unsaved
        }
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            func matches(_ context: isolated ManagedObjectContext = #isolation) throws -> [ManagedObjectID] {
                var request = FetchRequest(entityName: "Post")
                request.predicate = try FormatPredicate(format: "ANY tags.name == 'b'")
                return try context.fetch(request).map(\.objectID)
            }
            // A change to a post only: the tags are as the parent holds them (a renamed to b).
            try context.existingObject(with: secondID).setValue("Changed", forKey: "title")
            #expect(try matches() == [postID])
            // The child renames the tag: judged by the child's name now.
            try context.existingObject(with: tagIDs[0]).setValue("z", forKey: "name")
            #expect(try matches() == [])
            try context.existingObject(with: tagIDs[1]).setValue("b", forKey: "name")
            try context.existingObject(with: secondID).mutableSetValue(forKey: "tags").add(try context.existingObject(with: tagIDs[1]))
            #expect(try matches() == [secondID])
        }
    }

    @Test("a parent's save of pushed groups netting to nothing (a child's rename and its undo) over another writer's rename of the object: a conflict (error policy), or the other writer's rename kept (a trumping policy); before, it was overwritten unchecked")
    func netNothingPushOverOtherWriter() async throws {
        for trumps in [false, true] {
            let dir = try TemporaryDirectory()
            let (coordinator, otherCoordinator, postID, _) = try await Self.store(dir)
            let parent = privateContext(coordinator, name: "parent")
            if trumps { await parent.perform { (context: isolated ManagedObjectContext) in context.mergePolicy = .mergeByPropertyObjectTrump } }
            let child = childContext(parent, name: "child")
            try await child.perform { (context: isolated ManagedObjectContext) throws in
                let post = try context.existingObject(with: postID)
                post.setValue("Renamed", forKey: "title")
                try context.save()
                try context.undo()
                try context.save()
            }
            try await Self.otherWriterRetitles(otherCoordinator, postID, "Theirs")
            try await Self.saveOverOtherWriter(parent, trumps: trumps, otherCoordinator, postID)
        }
    }

    @Test("a root context's value changed and changed back in two groups, over another writer's change saved in between: a conflict (error policy), or the other writer's value kept (a trumping policy); before, the context let the object go and its groups overwrote the other writer's value unchecked")
    func changedBackInSeparateGroupsOverOtherWriter() async throws {
        for trumps in [false, true] {
            let dir = try TemporaryDirectory()
            let (coordinator, otherCoordinator, postID, _) = try await Self.store(dir)
            let context = privateContext(coordinator, name: "editor")
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                if trumps { context.mergePolicy = .mergeByPropertyObjectTrump }
                let post = try context.existingObject(with: postID)
                post.setValue("Mine", forKey: "title")
                context.processPendingChanges()
                post.setValue("Hello", forKey: "title")
                context.processPendingChanges()
                #expect(!post.hasChanges)
            }
            try await Self.otherWriterRetitles(otherCoordinator, postID, "Theirs")
            try await Self.saveOverOtherWriter(context, trumps: trumps, otherCoordinator, postID)
        }
    }
}
