import Foundation
import Strata
import StrataTestSupport
import Testing

/// Review of batch requests against the rest: controllers, undo, merges, history, races.
@Suite("Batch requests and their interplay with contexts, controllers, undo and history (review)")
struct BatchInterplayReviewTests {
    static func customers(_ count: Int, from first: Int = 1) -> [[String: any Sendable]] {
        (first..<(first + count)).map { ["email": "c\($0)@example.com", "name": "C\($0)", "age": Int32(20 + $0)] }
    }

    static func insertCustomers(_ coordinator: PersistentStoreCoordinator, _ count: Int, from first: Int = 1) async throws -> [ManagedObjectID] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = BatchInsertRequest(entityName: "Customer", objects: Self.customers(count, from: first))
            request.resultType = .objectIDs
            return try #require(try context.execute(request).objectIDs)
        }
    }

    static func byName() -> FetchRequest<ManagedObject> {
        FetchRequest(entityName: "Customer", sortDescriptors: [FetchSortDescriptor(key: "name", ascending: true)])
    }

    /// Teams cascading to players; a team's name and a player's remoteID are kept in tombstones.
    static var preserving: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string).preservedInHistoryOnDeletion()
                    Relationship("players", to: "Player", inverse: "team", toMany: true, deleteRule: .cascade)
                }
                Entity("Player") {
                    Attribute("name", .string)
                    Attribute("remoteID", .string).preservedInHistoryOnDeletion()
                    Relationship("team", to: "Team", inverse: "players")
                }
            }
        }
    }

    /// Tags with a unique, indexed derived key (canonical(name)) in groups counting them (indexed).
    static var tagged: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Tag") {
                    Attribute("name", .string)
                    Attribute("key", .string).derived(from: "canonical(name)").indexed()
                    Relationship("group", to: "Group", inverse: "tags")
                    Unique("key")
                }
                Entity("Group") {
                    Attribute("name", .string)
                    Attribute("tagCount", .int64).derived(from: "tags.@count").indexed()
                    Relationship("tags", to: "Tag", inverse: "group", toMany: true)
                }
            }
        }
    }

    @Test("a controller with a delegate shows the objects of a batch insert once its IDs are merged (mergeChanges(fromRemoteContextSave:into:))")
    func controllerFollowsMergedInsert() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        _ = try await Self.insertCustomers(coordinator, 2)
        let worker = privateContext(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let controller = FetchedResultsController(fetchRequest: Self.byName(), managedObjectContext: context)
            try controller.performFetch()
            let delegate = RecordingDelegate(mirroring: controller)
            controller.delegate = delegate
            let added = try worker.performAndWait { (worker: isolated ManagedObjectContext) throws in
                var request = BatchInsertRequest(entityName: "Customer", objects: Self.customers(2, from: 3))
                request.resultType = .objectIDs
                return try #require(try worker.execute(request).objectIDs)
            }
            ManagedObjectContext.mergeChanges(fromRemoteContextSave: ["inserted": added], into: [context])
            let got = names(controller.fetchedObjects)
            #expect(delegate.problems.isEmpty)
            #expect(names(delegate.mirror.flatMap { $0.objects }) == got, "\(delegate.mirror)")
            #expect(got == ["C1", "C2", "C3", "C4"])
        }
    }

    @Test("a controller fetching in batches (fetchBatchSize) drops the objects of a batch delete once its IDs are merged")
    func batchedControllerFollowsMergedDelete() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let ids = try await Self.insertCustomers(coordinator, 6)
        let worker = privateContext(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = Self.byName()
            request.fetchBatchSize = 2
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            try controller.performFetch()
            let delegate = RecordingDelegate(mirroring: controller)
            controller.delegate = delegate
            let deleted = try worker.performAndWait { (worker: isolated ManagedObjectContext) throws in
                var request = BatchDeleteRequest(objectIDs: [ids[4], ids[1]])
                request.resultType = .objectIDs
                return try #require(try worker.execute(request).objectIDs)
            }
            ManagedObjectContext.mergeChanges(fromRemoteContextSave: ["deleted": deleted], into: [context])
            let got = names(controller.fetchedObjects)
            #expect(delegate.problems.isEmpty)
            #expect(names(delegate.mirror.flatMap { $0.objects }) == got, "\(delegate.mirror)")
            #expect(got == ["C1", "C3", "C4", "C6"])
        }
    }

    @Test("a controller fetching in batches moves an object a batch update renamed (its sort key) once the IDs are merged")
    func batchedControllerFollowsMergedUpdate() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        _ = try await Self.insertCustomers(coordinator, 3)
        let worker = privateContext(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = Self.byName()
            request.fetchBatchSize = 1
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            try controller.performFetch()
            let delegate = RecordingDelegate(mirroring: controller)
            controller.delegate = delegate
            let updated = try worker.performAndWait { (worker: isolated ManagedObjectContext) throws in
                var request = BatchUpdateRequest(entityName: "Customer")
                request.predicate = try FormatPredicate(format: "name == 'C1'")
                request.propertiesToUpdate = ["name": "Z1"]
                request.resultType = .objectIDs
                return try #require(try worker.execute(request).objectIDs)
            }
            ManagedObjectContext.mergeChanges(fromRemoteContextSave: ["updated": updated], into: [context])
            let got = names(controller.fetchedObjects)
            #expect(delegate.problems.isEmpty)
            #expect(names(delegate.mirror.flatMap { $0.objects }) == got, "\(delegate.mirror)")
            #expect(got == ["C2", "C3", "Z1"])
        }
    }

    @Test("a cascading batch delete writes tombstones for the root and every cascaded object (preservesValueInHistoryOnDeletion)")
    func cascadeTombstones() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.preserving)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            for n in 1...2 {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("P\(n)", forKey: "name")
                player.setValue("r-\(n)", forKey: "remoteID")
                player.setValue(team, forKey: "team")
            }
            try context.save()
            _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest(entityName: "Team")))
        }
        let history = try coordinator.history(HistoryRequest())
        let last = try #require(history.last)
        #expect(last.changes.count == 3 && last.changes.allSatisfy { $0.changeType == .delete })
        #expect(last.changes.first { $0.entityName == "Team" }?.tombstone == ["name": .attribute(.string("Otters"))])
        #expect(Set(last.changes.compactMap { $0.tombstone?["remoteID"] }) == [.attribute(.string("r-1")), .attribute(.string("r-2"))])
    }

    @Test("history of a batch update lists only the objects whose values changed, not one that held the value already")
    func historyLeavesOutUnchanged() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        _ = try await Self.insertCustomers(coordinator, 3)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var update = BatchUpdateRequest(entityName: "Customer")
            update.propertiesToUpdate = ["name": "C2"]
            _ = try context.execute(update)
        }
        let history = try coordinator.history(HistoryRequest())
        let last = try #require(history.last)
        #expect(last.changes.count == 2 && last.changes.allSatisfy { $0.changeType == .update })
        #expect(!last.changes.contains { $0.changedObjectID.uriRepresentation().lastPathComponent == "p2" })
    }

    @Test("a batch update whose recomputed derived key clashes is refused whole; indexed derived values (canonical, @count) follow batch updates and deletes; verify clean")
    func derivedKeyAndIndexes() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.tagged)
        let log = coordinator.persistentStores[0].log
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let group = try context.insertNewObject(forEntityName: "Group")
            group.setValue("G", forKey: "name")
            for name in ["Alpha", "Beta"] {
                let tag = try context.insertNewObject(forEntityName: "Tag")
                tag.setValue(name, forKey: "name")
                tag.setValue(group, forKey: "group")
            }
            try context.save()
        }
        let head = try log.read { try $0.head }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var update = BatchUpdateRequest(entityName: "Tag")
            update.predicate = try FormatPredicate(format: "name == 'Beta'")
            update.propertiesToUpdate = ["name": "ALPHA"]
            #expect(throws: ContextError.self, "the recomputed key clashes") { _ = try context.execute(update) }
        }
        #expect(try log.read { try $0.head } == head)
        #expect(try log.verify().isClean)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var update = BatchUpdateRequest(entityName: "Tag")
            update.predicate = try FormatPredicate(format: "name == 'Beta'")
            update.propertiesToUpdate = ["name": "Zed"]
            _ = try context.execute(update)
            #expect(try context.count(for: try FetchRequest(entityName: "Tag", format: "key == 'zed'")) == 1)
            #expect(try context.count(for: try FetchRequest(entityName: "Tag", format: "key == 'beta'")) == 0)
            _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest(entityName: "Tag")))
            #expect(try context.count(for: try FetchRequest(entityName: "Group", format: "tagCount == 0")) == 1)
            #expect(try context.count(for: try FetchRequest(entityName: "Group", format: "tagCount == 2")) == 0)
        }
        #expect(try log.verify().isClean)
    }

    @Test("reverting batch deletes restores an ordered to-many in its order, a many-to-many membership and a cascaded object with its link; verify clean")
    func revertNullifyingDeletes() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let log = coordinator.persistentStores[0].log
        let storeID = coordinator.persistentStores[0].identifier
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let playlist = try context.insertNewObject(forEntityName: "Playlist")
            playlist.setValue("P", forKey: "name")
            var songs: [ManagedObject] = []
            for title in ["s1", "s2", "s3"] {
                let song = try context.insertNewObject(forEntityName: "Song")
                song.setValue(title, forKey: "title")
                songs.append(song)
            }
            playlist.setValue(songs, forKey: "songs")
            let customer = try context.insertNewObject(forEntityName: "Customer")
            customer.setValue("gone@example.com", forKey: "email")
            customer.setValue("Gone", forKey: "name")
            let keep = try context.insertNewObject(forEntityName: "Customer")
            keep.setValue("keep@example.com", forKey: "email")
            keep.setValue("Keep", forKey: "name")
            let tag = try context.insertNewObject(forEntityName: "Tag")
            tag.setValue("T", forKey: "name")
            tag.mutableSetValue(forKey: "customers").add(customer)
            tag.mutableSetValue(forKey: "customers").add(keep)
            let order = try context.insertNewObject(forEntityName: "Order")
            order.setValue(9.5, forKey: "total")
            order.setValue(customer, forKey: "customer")
            try context.save()
            _ = try context.execute(BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Song", format: "title == 's2'")))
            _ = try context.execute(BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Customer", format: "name == 'Gone'")))
        }
        let head = try log.read { try $0.head }
        #expect(try log.verify().isClean)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: HistoryToken(storeIdentifier: storeID, sequence: head))
            try context.revertTransaction(at: HistoryToken(storeIdentifier: storeID, sequence: head - 1))
            try context.save()
        }
        #expect(try log.verify().isClean)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let playlist = try #require(try context.fetch(FetchRequest(entityName: "Playlist")).first)
            let titles = names(playlist.value(forKey: "songs") as? [ManagedObject], "title")
            #expect(titles == ["s1", "s2", "s3"])
            let tag = try #require(try context.fetch(FetchRequest(entityName: "Tag")).first)
            let members = names(tag.mutableSetValue(forKey: "customers").objects)
            #expect(Set(members) == ["Gone", "Keep"])
            #expect(try context.count(for: try FetchRequest(entityName: "Order", format: "customer.name == 'Gone'")) == 1)
        }
    }

    @Test("a context pinned to a query generation merging a batch's IDs (mergeChanges(fromRemoteContextSave:into:)) moves to the newest generation: updated objects show the new values and a fetch doesn't bring the deleted object back")
    func pinnedContextRemoteMerge() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let ids = try await Self.insertCustomers(coordinator, 3)
        let worker = privateContext(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(.current)
            let objects = try context.fetch(Self.byName())
            #expect(objects.count == 3)
            let (deleted, updated) = try worker.performAndWait { (worker: isolated ManagedObjectContext) throws in
                var delete = BatchDeleteRequest(objectIDs: [ids[0]])
                delete.resultType = .objectIDs
                let deleted = try #require(try worker.execute(delete).objectIDs)
                var update = BatchUpdateRequest(entityName: "Customer")
                update.propertiesToUpdate = ["name": "New"]
                update.resultType = .objectIDs
                return (deleted, try #require(try worker.execute(update).objectIDs))
            }
            ManagedObjectContext.mergeChanges(fromRemoteContextSave: ["deleted": deleted, "updated": updated], into: [context])
            let kept = context.registeredObject(for: ids[1])
            #expect(kept?.value(forKey: "name") as? String == "New", "the updated object is re-read as the store holds it now")
            let again = try context.fetch(Self.byName())
            #expect(!again.contains { $0.objectID == ids[0] }, "a merged deletion doesn't come back live")
            #expect(names(again) == ["New", "New"])
        }
    }
    @Test("a context pinned to a query generation selects its batch update and delete through relationships as the store is now: a team renamed since its generation")
    func pinnedBatchSelectsThroughRenamedTeam() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let worker = privateContext(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("A", forKey: "name")
            for n in 1...2 {
                let customer = try context.insertNewObject(forEntityName: "Customer")
                customer.setValue("c\(n)@x", forKey: "email")
                customer.setValue(team, forKey: "team")
            }
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(.current)
            #expect(try context.count(for: FetchRequest(entityName: "Customer")) == 2)
            try worker.performAndWait { (worker: isolated ManagedObjectContext) throws in
                let team = try #require(try worker.fetch(FetchRequest(entityName: "Team")).first)
                team.setValue("B", forKey: "name")
                try worker.save()
            }
            var update = BatchUpdateRequest(entityName: "Customer")
            update.predicate = try FormatPredicate(format: "team.name == 'B'")
            update.propertiesToUpdate = ["name": "InB"]
            update.resultType = .count
            let countB = try context.execute(update).count
            var old = BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Customer", format: "team.name == 'A'"))
            old.resultType = .count
            let countA = try context.execute(old).count
            #expect(countB == 2)
            #expect(countA == 0)
            var any = BatchUpdateRequest(entityName: "Team")
            any.predicate = try FormatPredicate(format: "ANY members.name == 'InB'")
            any.propertiesToUpdate = ["name": "C"]
            any.resultType = .count
            #expect(try context.execute(any).count == 1)
        }
    }
    @Test("includesSubentities = false: a batch update (every object of the entity) and a batch delete (an index-answered predicate) leave the sub-entity's objects alone")
    func excludingSubentities() async throws {
        let model = try ManagedObjectModel {
            Entity("Person") {
                Attribute("name", .string).indexed()
                Attribute("note", .string)
            }
            Entity("Employee", parent: "Person") {
                Attribute("salary", .double)
            }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for entity in ["Person", "Employee", "Person", "Employee"] {
                let object = try context.insertNewObject(forEntityName: entity)
                object.setValue("X", forKey: "name")
            }
            try context.save()
            var update = BatchUpdateRequest(entityName: "Person")
            update.includesSubentities = false
            update.propertiesToUpdate = ["note": "plain"]
            update.resultType = .count
            #expect(try context.execute(update).count == 2)
            var fetch = try FetchRequest(entityName: "Person", format: "name == 'X'")
            fetch.includesSubentities = false
            var delete = BatchDeleteRequest(fetchRequest: fetch)
            delete.resultType = .count
            #expect(try context.execute(delete).count == 2)
            #expect(try context.count(for: FetchRequest(entityName: "Employee")) == 2)
            #expect(try context.count(for: try FetchRequest(entityName: "Person", format: "note == 'plain'")) == 0)
        }
    }
    @Test("merging a batch delete's IDs drops the deleted objects from registered objects' loaded relationships, both sides recorded or derived, and the object graph saves cleanly")
    func mergedDeleteLeavesNoDanglingMember() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let worker = privateContext(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            let tag = try context.insertNewObject(forEntityName: "Tag")
            for n in 1...3 {
                let customer = try context.insertNewObject(forEntityName: "Customer")
                customer.setValue("c\(n)@x", forKey: "email")
                customer.setValue("C\(n)", forKey: "name")
                customer.setValue(team, forKey: "team")
                customer.mutableSetValue(forKey: "tags").add(tag)
            }
            try context.save()
            #expect(team.mutableSetValue(forKey: "members").count == 3)
            #expect(tag.mutableSetValue(forKey: "customers").count == 3)
            team.setValue("Kept", forKey: "name")
            let deleted = try worker.performAndWait { (worker: isolated ManagedObjectContext) throws in
                var request = BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Customer", format: "name == 'C2'"))
                request.resultType = .objectIDs
                return try #require(try worker.execute(request).objectIDs)
            }
            ManagedObjectContext.mergeChanges(fromRemoteContextSave: ["deleted": deleted], into: [context])
            #expect(names(team.mutableSetValue(forKey: "members").objects).sorted() == ["C1", "C3"])
            #expect(names(tag.mutableSetValue(forKey: "customers").objects).sorted() == ["C1", "C3"])
            try context.save()
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}
