import Foundation
@testable import Strata
import StrataTestSupport
import Testing

@Suite("Review 26: nested contexts, merging, notifications, fetched results controllers", .serialized)
struct NestedMergeReviewTests {
    @Test("a sibling's insert pushed into the parent reaches an automatically merging child's controller and observers")
    func siblingInsertReachesChildController() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let viewer = childContext(parent, name: "viewer")
        let editor = childContext(parent, name: "editor")
        final class Heard { var inserted: [String] = [] }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let (teams, delegate) = try followedTeams(context)
            context.userInfo["teams"] = teams
            context.userInfo["delegate"] = delegate
            let heard = Heard()
            context.userInfo["heard"] = heard
            _ = context.addObserver { change in
                guard case .didMerge = change.notification else { return }
                heard.inserted += change.insertedObjects.map { $0.value(forKey: "name") as? String ?? "nil" }
            }
            #expect(names(teams.fetchedObjects) == ["Otters"])
        }
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            try team(context, "Kites")
            try context.save()
        }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            let teams = try #require(context.userInfo["teams"] as? FetchedResultsController<ManagedObject>)
            let delegate = try #require(context.userInfo["delegate"] as? RecordingDelegate)
            let heard = try #require(context.userInfo["heard"] as? Heard)
            #expect(heard.inserted == ["Kites"], "the observer gets the parent's unsaved insert as a fault")
            #expect(names(teams.fetchedObjects) == ["Kites", "Otters"])
            #expect(delegate.last?.lines() == ["insert ->0.0 Kites"])
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
        // The parent's save makes the ID permanent: the controller keeps the same object.
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            let teams = try #require(context.userInfo["teams"] as? FetchedResultsController<ManagedObject>)
            let delegate = try #require(context.userInfo["delegate"] as? RecordingDelegate)
            #expect(names(teams.fetchedObjects) == ["Kites", "Otters"])
            #expect(teams.fetchedObjects?.allSatisfy { !$0.objectID.isTemporaryID } == true)
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }

    @Test("a merge keeps a team's unsaved new member and adds the member another context saved")
    func mergeToManyWithLocalAddition() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let other = privateContext(coordinator, name: "other")
        try await privateContext(coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            let otters = try context.existingObject(with: teamID)
            try player(context, "Mine", of: otters)
            #expect((otters.value(forKey: "players") as? Set<ManagedObject>)?.count == 1)
            let save = try other.performAndWait { (other: isolated ManagedObjectContext) throws -> ContextDidSave in
                try player(other, "Theirs", of: try other.existingObject(with: teamID))
                var captured: ContextDidSave?
                let token = other.addObserver { change in
                    if case .didSave(let save) = change.notification { captured = save }
                }
                try other.save()
                other.removeObserver(token)
                return try #require(captured)
            }
            context.mergeChanges(fromContextDidSave: save)
            func members() -> [String] {
                ((otters.value(forKey: "players") as? Set<ManagedObject>) ?? []).compactMap { $0.value(forKey: "lastName") as? String }.sorted()
            }
            #expect(members() == ["Mine", "Theirs"])
            try context.undo()
            #expect(members() == ["Theirs"], "undo takes back the context's own addition only")
            try context.redo()
            #expect(members() == ["Mine", "Theirs"])
            try context.save()
            #expect(members() == ["Mine", "Theirs"])
        }
    }

    static func tagNames(_ object: ManagedObject) -> [String] {
        ((object.value(forKey: "tags") as? Set<ManagedObject>) ?? []).compactMap { $0.value(forKey: "name") as? String }.sorted()
    }

    @Test("refresh keeping changes re-applies a many-to-many's unsaved additions to the stored members; the save keeps both")
    func refreshManyToManyKeepsBothAdditions() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.postsModel())
        let (postID, tagIDs) = try await Self.postWithTags(coordinator)
        let other = privateContext(coordinator, name: "other")
        try await privateContext(coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            let tagB = try context.existingObject(with: tagIDs[1])
            post.mutableSetValue(forKey: "tags").add(tagB)
            #expect(Self.tagNames(post) == ["a", "b"])
            try other.performAndWait { (other: isolated ManagedObjectContext) throws in
                let post = try other.existingObject(with: postID)
                post.mutableSetValue(forKey: "tags").add(try other.existingObject(with: tagIDs[2]))
                try other.save()
            }
            context.refresh(post, mergeChanges: true)
            #expect(Self.tagNames(post) == ["a", "b", "c"])
            try context.save()
            #expect(Self.tagNames(post) == ["a", "b", "c"])
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            #expect(Self.tagNames(post) == ["a", "b", "c"], "the store keeps both additions")
            #expect(((try context.existingObject(with: tagIDs[2]).value(forKey: "posts") as? Set<ManagedObject>) ?? []).count == 1)
        }
    }

    @Test("a child's controller keeps its pushed objects in place, in fetch order, across the child's and the parent's saves")
    func childControllerTiesAcrossPush() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let request = FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "uniformColor")])
            let teams = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            try teams.performFetch()
            let delegate = RecordingDelegate(mirroring: teams)
            teams.delegate = delegate
            try team(context, "Apes")
            try team(context, "Bats")
            context.processPendingChanges()
            #expect(names(teams.fetchedObjects) == names(try context.fetch(request)))
            try context.save()
            #expect(names(teams.fetchedObjects) == names(try context.fetch(request)))
            #expect(names(teams.fetchedObjects) == ["Otters", "Apes", "Bats"])
            #expect(delegate.batches.map { $0.lines() } == [["insert ->0.1 Apes", "insert ->0.2 Bats"]], "the save moves nothing")
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
            context.userInfo["teams"] = teams
            context.userInfo["delegate"] = delegate
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let teams = try #require(context.userInfo["teams"] as? FetchedResultsController<ManagedObject>)
            let delegate = try #require(context.userInfo["delegate"] as? RecordingDelegate)
            try context.existingObject(with: try #require(teams.fetchedObjects?.last?.objectID)).setValue("Bees", forKey: "name")
            context.processPendingChanges()
            #expect(names(teams.fetchedObjects) == names(try context.fetch(teams.fetchRequest)))
            #expect(names(teams.fetchedObjects) == ["Otters", "Apes", "Bees"])
            #expect(delegate.last?.lines() == ["update 0.2>0.2 Bees"])
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }

    @Test("a child's fetch orders ties as a root's does: a changed stored object keeps its place, the child's inserts come last")
    func childFetchTieOrder() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try team(context, "Bats")
            try context.save()
        }
        let parent = privateContext(coordinator, name: "parent")
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try team(context, "P1")
            try team(context, "P2")
        }
        let child = childContext(parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let request = FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "uniformColor")])
            let otters = try #require(try context.fetch(request).first)
            #expect(otters.value(forKey: "name") as? String == "Otters")
            otters.setValue("Otters2", forKey: "name")
            let inserted = ["C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8"]
            for name in inserted { try team(context, name) }
            #expect(try names(context.fetch(request)) == ["Otters2", "Bats", "P1", "P2"] + inserted)
            #expect(try names(context.fetch(FetchRequest(entityName: "Team"))) == ["Otters2", "Bats", "P1", "P2"] + inserted)
            // A stored object only the child's change makes a match goes in its stored place.
            try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in
                let bats = try #require(try parent.fetch(FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "name == 'Bats'"))).first)
                bats.setValue("x", forKey: "uniformColor")
            }
            otters.setValue("x", forKey: "uniformColor")
            var striped = request
            striped.predicate = try FormatPredicate(format: "uniformColor == 'x'")
            #expect(try names(context.fetch(striped)) == ["Otters2", "Bats"])
        }
    }

    @Test("the parent's controller follows a child's pushes: insert, rename, delete, and the child's undo")
    func parentControllerFollowsPushes() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let (teams, delegate) = try followedTeams(context)
            context.userInfo["teams"] = teams
            context.userInfo["delegate"] = delegate
        }
        let child = childContext(parent)
        func lines() async throws -> [String] {
            try await parent.perform { (context: isolated ManagedObjectContext) throws -> [String] in
                let delegate = try #require(context.userInfo["delegate"] as? RecordingDelegate)
                #expect(delegate.problems.isEmpty, "\(delegate.problems)")
                return delegate.last?.lines() ?? []
            }
        }
        let kitesID = try await child.perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            let kites = try team(context, "Kites")
            try context.save()
            return kites.objectID
        }
        #expect(try await lines() == ["insert ->0.0 Kites"])
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: kitesID).setValue("Zebras", forKey: "name")
            try context.save()
        }
        #expect(try await lines() == ["move 0.0>0.1 Zebras"])
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            try context.save()
        }
        #expect(try await lines() == ["move 0.1>0.0 Kites"])
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            #expect(context.hasChanges == true)
            try context.save()
        }
        #expect(try await lines() == ["delete 0.0>- ?"])
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.hasChanges == false)
            let teams = try #require(context.userInfo["teams"] as? FetchedResultsController<ManagedObject>)
            #expect(names(teams.fetchedObjects) == ["Otters"])
        }
    }

    @Test("a did-save names both teams of a moved player; a context merging it updates both teams' players")
    func didSaveNamesBothSides() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (a, b, p) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let a = try team(context, "A"), b = try team(context, "B")
            let p = try player(context, "Ng", of: a)
            try context.save()
            return (a.objectID, b.objectID, p.objectID)
        }
        let mover = privateContext(coordinator, name: "mover")
        try await privateContext(coordinator, name: "viewer").perform { (context: isolated ManagedObjectContext) throws in
            let teamA = try context.existingObject(with: a), teamB = try context.existingObject(with: b)
            #expect((teamA.value(forKey: "players") as? Set<ManagedObject>)?.count == 1)
            #expect((teamB.value(forKey: "players") as? Set<ManagedObject>)?.count == 0)
            let save = try mover.performAndWait { (mover: isolated ManagedObjectContext) throws -> ContextDidSave in
                var captured: ContextDidSave?
                let token = mover.addObserver { change in
                    if case .didSave(let save) = change.notification { captured = save }
                }
                let player = try mover.existingObject(with: p)
                player.setValue(try mover.object(with: b), forKey: "team")
                try mover.save()
                mover.removeObserver(token)
                return try #require(captured)
            }
            #expect(save.updated == [a, b, p])
            context.mergeChanges(fromContextDidSave: save)
            #expect((teamA.value(forKey: "players") as? Set<ManagedObject>)?.count == 0)
            #expect((teamB.value(forKey: "players") as? Set<ManagedObject>)?.count == 1)
        }
    }

    @Test("a child's cascading delete pushed, then undone and pushed: the parent's save keeps the team and its players")
    func childUndoesPushedCascade() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let otters = try context.existingObject(with: teamID)
            try player(context, "Ng", of: otters)
            try player(context, "Oh", of: otters)
            try context.save()
        }
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
            try context.undo()
            try context.save()
            let otters = try context.existingObject(with: teamID)
            #expect((otters.value(forKey: "players") as? Set<ManagedObject>)?.count == 2)
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let otters = try context.existingObject(with: teamID)
            #expect(otters.isDeleted == false)
            #expect((otters.value(forKey: "players") as? Set<ManagedObject>)?.count == 2)
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let otters = try context.existingObject(with: teamID)
            #expect(otters.value(forKey: "name") as? String == "Otters")
            #expect((otters.value(forKey: "players") as? Set<ManagedObject>)?.count == 2)
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 2)
        }
    }

    @Test("the merge-by-property policies merge a many-to-many both contexts added to; overwrite writes the context's, rollback the store's")
    func manyToManyUnderPolicies() async throws {
        let expected: [(StandardMergePolicy, [String])] = [
            (.mergeByPropertyObjectTrump, ["a", "b", "c"]), (.mergeByPropertyStoreTrump, ["a", "b", "c"]),
            (.overwrite, ["a", "b"]), (.rollback, ["a", "c"]),
        ]
        for (policy, tags) in expected {
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: try Self.postsModel())
            let (postID, tagIDs) = try await Self.postWithTags(coordinator)
            let other = privateContext(coordinator, name: "other")
            try await privateContext(coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
                context.mergePolicy = policy
                let post = try context.existingObject(with: postID)
                post.mutableSetValue(forKey: "tags").add(try context.existingObject(with: tagIDs[1]))
                post.setValue("Mine", forKey: "title")
                try other.performAndWait { (other: isolated ManagedObjectContext) throws in
                    let post = try other.existingObject(with: postID)
                    post.mutableSetValue(forKey: "tags").add(try other.existingObject(with: tagIDs[2]))
                    post.setValue("Theirs", forKey: "title")
                    try other.save()
                }
                try context.save()
                #expect(Self.tagNames(post) == tags, "\(policy.type)")
            }
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let post = try context.existingObject(with: postID)
                #expect(Self.tagNames(post) == tags, "\(policy.type): stored")
                let title = post.value(forKey: "title") as? String
                #expect(title == ([.mergeByPropertyObjectTrump, .overwrite].contains(policy) ? "Mine" : "Theirs"), "\(policy.type)")
            }
        }
    }

    static func postsModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Post") {
                Attribute("title", .string)
                Relationship("tags", to: "Tag", inverse: "posts", toMany: true)
            }
            Entity("Tag") {
                Attribute("name", .string)
                Relationship("posts", to: "Post", inverse: "tags", toMany: true)
            }
        }
    }

    /// A post "Hello" tagged "a", and the tags "a", "b", "c".
    static func postWithTags(_ coordinator: PersistentStoreCoordinator) async throws -> (ManagedObjectID, [ManagedObjectID]) {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.insertNewObject(forEntityName: "Post")
            post.setValue("Hello", forKey: "title")
            var tags: [ManagedObject] = []
            for name in ["a", "b", "c"] {
                let tag = try context.insertNewObject(forEntityName: "Tag")
                tag.setValue(name, forKey: "name")
                tags.append(tag)
            }
            post.setValue(Set([tags[0]]), forKey: "tags")
            try context.save()
            return (post.objectID, tags.map(\.objectID))
        }
    }

    @Test("undo after a merge re-applied a many-to-many change takes back only the context's addition; the save keeps the other writer's")
    func undoAfterRebase() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.postsModel())
        let (postID, tagIDs) = try await Self.postWithTags(coordinator)
        let other = privateContext(coordinator, name: "other")
        try await privateContext(coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            post.mutableSetValue(forKey: "tags").add(try context.existingObject(with: tagIDs[1]))
            context.processPendingChanges()
            try other.performAndWait { (other: isolated ManagedObjectContext) throws in
                let post = try other.existingObject(with: postID)
                post.mutableSetValue(forKey: "tags").add(try other.existingObject(with: tagIDs[2]))
                try other.save()
            }
            context.refresh(post, mergeChanges: true)
            #expect(Self.tagNames(post) == ["a", "b", "c"])
            try context.undo()
            #expect(Self.tagNames(post) == ["a", "c"])
            try context.redo()
            #expect(Self.tagNames(post) == ["a", "b", "c"])
            try context.undo()
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(Self.tagNames(try context.existingObject(with: postID)) == ["a", "c"], "stored")
        }
    }

    @Test("a child's sectioned controller follows a sibling's team rename merged from the parent")
    func childSectionsFollowSiblingRename() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (a, _) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let a = try team(context, "A"), b = try team(context, "B")
            try player(context, "Ng", of: a)
            try player(context, "Oh", of: b)
            try context.save()
            return (a.objectID, b.objectID)
        }
        let parent = privateContext(coordinator, name: "parent")
        let viewer = childContext(parent, name: "viewer")
        let editor = childContext(parent, name: "editor")
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let request = FetchRequest(
                entityName: "Player", sortDescriptors: [FetchSortDescriptor(key: "team.name"), FetchSortDescriptor(key: "lastName")])
            let players = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "team.name")
            try players.performFetch()
            let delegate = RecordingDelegate(mirroring: players, label: "lastName")
            players.delegate = delegate
            context.userInfo["players"] = players
            context.userInfo["delegate"] = delegate
            #expect(players.sections?.map(\.name) == ["A", "B"])
        }
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: a).setValue("C", forKey: "name")
            try context.save()
        }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            let players = try #require(context.userInfo["players"] as? FetchedResultsController<ManagedObject>)
            let delegate = try #require(context.userInfo["delegate"] as? RecordingDelegate)
            #expect(players.sections?.map(\.name) == ["B", "C"])
            #expect(names(players.fetchedObjects, "lastName") == ["Oh", "Ng"])
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
            #expect(delegate.batches.count == 1)
        }
    }

    @Test("child refresh without merging reads the parent's current values")
    func childRefreshReadsParent() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Otters")
            try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in
                try parent.existingObject(with: teamID).setValue("Herons", forKey: "name")
            }
            team.setValue("Kites", forKey: "uniformColor")
            context.refresh(team, mergeChanges: false)
            #expect(team.value(forKey: "name") as? String == "Herons")
            #expect(team.value(forKey: "uniformColor") == nil)
            #expect(context.hasChanges == false)
        }
    }

    @Test("child count, object IDs and limits honour its pending changes")
    func childCounts() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try team(context, "Apes")
            try team(context, "Bats")
        }
        let child = childContext(parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try team(context, "Cats")
            context.delete(try context.existingObject(with: teamID))
            var request = teamRequest()
            #expect(try context.count(for: request) == 3)
            #expect(try context.fetchObjectIDs(request).count == 3)
            request.fetchLimit = 2
            #expect(try names(context.fetch(request)) == ["Apes", "Bats"])
            #expect(try context.count(for: request) == 2)
            request.fetchLimit = 0
            request.fetchOffset = 1
            #expect(try context.count(for: request) == 2)
            request.fetchOffset = 0
            request.includesPendingChanges = false
            #expect(try names(context.fetch(request)) == ["Apes", "Bats", "Otters"])
        }
    }

    @Test("an object inserted by one child save and deleted by the next leaves the parent clean")
    func insertThenDeleteAcrossPushes() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let kites = try team(context, "Kites")
            try player(context, "Ng", of: kites)
            try context.save()
            context.delete(kites)
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.insertedObjects.isEmpty)
            #expect(context.deletedObjects.isEmpty)
            #expect(context.hasChanges == false)
            #expect(context.updatedObjects.isEmpty)
            try context.save()
        }
    }

    @Test("store-trump on a to-one both sides changed keeps the inverse sides in step")
    func storeTrumpRelationship() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (a, b, c, p) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let a = try team(context, "A"), b = try team(context, "B"), c = try team(context, "C")
            let p = try player(context, "Ng", of: a)
            try context.save()
            return (a.objectID, b.objectID, c.objectID, p.objectID)
        }
        let other = privateContext(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .mergeByPropertyStoreTrump
            let player = try context.existingObject(with: p)
            let teamB = try context.existingObject(with: b), teamC = try context.existingObject(with: c)
            let teamA = try context.existingObject(with: a)
            _ = teamA.value(forKey: "players")
            _ = teamB.value(forKey: "players")
            _ = teamC.value(forKey: "players")
            try other.performAndWait { (other: isolated ManagedObjectContext) throws in
                try other.existingObject(with: p).setValue(try other.existingObject(with: b), forKey: "team")
                try other.save()
            }
            player.setValue(teamC, forKey: "team")
            try context.save()
            #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == b)
            #expect((teamB.value(forKey: "players") as? Set<ManagedObject>)?.map(\.objectID) == [p])
            #expect((teamC.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true)
            #expect((teamA.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true)
        }
    }

    @Test("a child's save validates (nothing reaches the parent)")
    func childSaveValidates() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.run, classes: [(Run.self, "Run")])
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let run = try context.insertNewObject(forEntityName: "Run")
            run.setValue(Int32(-3), forKey: "processID")
            #expect(throws: ContextError.self) { try context.save() }
            #expect(context.hasChanges == true)
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.hasChanges == false)
        }
    }

    @Test("both contexts delete a player; each non-error policy saves and leaves the team's players without it")
    func bothDeleteUnderPolicies() async throws {
        for policy in [StandardMergePolicy.rollback, .mergeByPropertyStoreTrump, .mergeByPropertyObjectTrump, .overwrite] {
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
            let (t, p) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let t = try team(context, "A")
                let p = try player(context, "Ng", of: t)
                try player(context, "Oh", of: t)
                try context.save()
                return (t.objectID, p.objectID)
            }
            let other = privateContext(coordinator)
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                context.mergePolicy = policy
                let teamA = try context.existingObject(with: t)
                let doomed = try context.existingObject(with: p)
                _ = teamA.value(forKey: "players")
                try other.performAndWait { (other: isolated ManagedObjectContext) throws in
                    other.delete(try other.existingObject(with: p))
                    try other.save()
                }
                context.delete(doomed)
                do { try context.save() } catch { Issue.record("\(policy.type): \(error)") }
                let members = (teamA.value(forKey: "players") as? Set<ManagedObject>) ?? []
                #expect(members.count == 1, "\(policy.type)")
                #expect(!members.contains { $0.objectID == p }, "\(policy.type)")
                #expect(context.hasChanges == false, "\(policy.type)")
            }
        }
    }

    @Test("a child's pushed insert under an obtained permanent ID, deleted, the delete undone: the parent saves it once")
    func permanentInsertDeleteUndoAcrossPushes() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent)
        let id = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let kites = try team(context, "Kites")
            try context.obtainPermanentIDs(for: [kites])
            try context.save()
            context.delete(kites)
            try context.save()
            try context.undo()
            #expect(context.hasChanges == true)
            try context.save()
            return kites.objectID
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try context.save()
        }
        #expect(try await storedTeamName(coordinator, id) == "Kites")
    }

    @Test("a child's insert upserted by the parent's save: the child's object takes the stored ID and its next push updates it")
    func childInsertUpserted() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, adaID) = try await peopleStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        await parent.perform { (context: isolated ManagedObjectContext) in context.mergePolicy = .mergeByPropertyObjectTrump }
        let child = childContext(parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("ada@example.com", forKey: "email")
            person.setValue("Augusta", forKey: "firstName")
            try context.save()
            context.userInfo["person"] = person
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let person = try #require(context.userInfo["person"] as? ManagedObject)
            #expect(person.objectID == adaID)
            person.setValue("Countess", forKey: "lastName")
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        let stored = try await storedPerson(coordinator, adaID)
        #expect(stored?.firstName == "Augusta")
        #expect(stored?.lastName == "Countess")
        #expect(try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.count(for: FetchRequest(entityName: "Person"))
        } == 1)
    }

    @Test("a child's delete of a department is denied by an employee the parent added, unsaved")
    func childDeleteDeniedByParentMember() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.employeeDepartment)
        let departmentID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.insertNewObject(forEntityName: "Department")
            department.setValue("Sales", forKey: "name")
            try context.save()
            return department.objectID
        }
        let parent = privateContext(coordinator, name: "parent")
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let employee = try context.insertNewObject(forEntityName: "Employee")
            employee.setValue("Ng", forKey: "lastName")
            employee.setValue(try context.existingObject(with: departmentID), forKey: "department")
        }
        let child = childContext(parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.existingObject(with: departmentID)
            #expect((department.value(forKey: "employees") as? Set<ManagedObject>)?.count == 1)
            context.delete(department)
            #expect(throws: ContextError.self) { try context.save() }
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: departmentID).isDeleted == false)
        }
    }

    @Test("a child's difference-form controller hears the IDs its parent's save made permanent")
    func childDifferenceAcrossParentSave() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let teams = FetchedResultsController(fetchRequest: teamRequest(), managedObjectContext: context)
            try teams.performFetch()
            let delegate = DifferenceDelegate(mirroring: teams)
            teams.delegate = delegate
            context.userInfo["teams"] = teams
            context.userInfo["delegate"] = delegate
            try team(context, "Apes")
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let teams = try #require(context.userInfo["teams"] as? FetchedResultsController<ManagedObject>)
            let delegate = try #require(context.userInfo["delegate"] as? DifferenceDelegate)
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
            #expect(delegate.ids == teams.fetchedObjects?.map(\.objectID))
            #expect(delegate.ids.allSatisfy { !$0.isTemporaryID })
        }
    }

    @Test("a child's dictionary fetch without pending changes shows the parent's values, not the child's unsaved ones")
    func childDictionariesWithoutPending() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.existingObject(with: teamID).value(forKey: "name")
            try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in
                try parent.existingObject(with: teamID).setValue("Zebras", forKey: "uniformColor")
            }
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            var request = FetchRequest(entityName: "Team")
            request.propertiesToFetch = ["name", "uniformColor"]
            request.includesPendingChanges = false
            let rows = try context.fetchDictionaries(request)
            #expect(rows.count == 1)
            #expect(rows.first?["name"] as? String == "Otters", "the parent's value, not the child's unsaved one")
            #expect(rows.first?["uniformColor"] as? String == "Zebras", "the parent's current value")
            request.includesPendingChanges = true
            let pending = try context.fetchDictionaries(request)
            #expect(pending.first?["name"] as? String == "Herons")
            // Through a relationship, and grouped.
            let player = try player(context, "Ng", of: try context.existingObject(with: teamID))
            try context.save()
            player.setValue("Oh", forKey: "lastName")
            var players = FetchRequest(entityName: "Player")
            players.propertiesToFetch = ["lastName", "team.name"]
            players.includesPendingChanges = false
            let playerRows = try context.fetchDictionaries(players)
            #expect(playerRows.first?["lastName"] as? String == "Ng")
            #expect(playerRows.first?["team.name"] as? String == "Herons", "the parent has the pushed rename")
            try context.existingObject(with: teamID).setValue("Kites", forKey: "name")
            players.propertiesToFetch = ["team.name", .expression(name: "count", .count, keyPath: "lastName")]
            players.propertiesToGroupBy = ["team.name"]
            let grouped = try context.fetchDictionaries(players)
            #expect(grouped.first?["team.name"] as? String == "Herons")
        }
    }

    @Test("a sibling merges another child's did-save by hand: renames and inserts show, its controller follows")
    func siblingMergesByHand() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let viewer = childContext(parent, name: "viewer")
        let editor = childContext(parent, name: "editor")
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            let (teams, delegate) = try followedTeams(context)
            context.userInfo["teams"] = teams
            context.userInfo["delegate"] = delegate
        }
        let save = try await editor.perform { (context: isolated ManagedObjectContext) throws -> ContextDidSave in
            var captured: ContextDidSave?
            let token = context.addObserver { change in
                if case .didSave(let save) = change.notification { captured = save }
            }
            try context.existingObject(with: teamID).setValue("Zebras", forKey: "name")
            try team(context, "Apes")
            try context.save()
            context.removeObserver(token)
            return try #require(captured)
        }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            context.mergeChanges(fromContextDidSave: save)
            let teams = try #require(context.userInfo["teams"] as? FetchedResultsController<ManagedObject>)
            let delegate = try #require(context.userInfo["delegate"] as? RecordingDelegate)
            #expect(names(teams.fetchedObjects) == ["Apes", "Zebras"])
            #expect(delegate.last?.lines().sorted() == ["insert ->0.0 Apes", "update 0.0>0.1 Zebras"].sorted())
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }
}
