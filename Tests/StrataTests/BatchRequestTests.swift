import Foundation
import Strata
import StrataTestSupport
import Testing

/// The batch requests' model: `Customer` (unique `email`, a defaulted, indexed `age`, a transient
/// `nickname`) in a `Team` (nullify both ways), with many-to-many `tags`, cascading `orders`
/// whose `refunds` deny; an `Owner` whose `pets` rule is no action; a `Playlist` whose
/// ordered `songs` is the recorded side.
enum BatchModels {
    static var shop: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Customer") {
                    Attribute("email", .string)
                    Attribute("name", .string)
                    Attribute("age", .int32, default: 18).required().indexed()
                    Attribute("score", .double)
                    Attribute("nickname", .string).transient()
                    Relationship("team", to: "Team", inverse: "members")
                    Relationship("tags", to: "Tag", inverse: "customers", toMany: true)
                    Relationship("orders", to: "Order", inverse: "customer", toMany: true, deleteRule: .cascade)
                    Unique("email")
                }
                Entity("Team") {
                    Attribute("name", .string)
                    Relationship("members", to: "Customer", inverse: "team", toMany: true)
                }
                Entity("Tag") {
                    Attribute("name", .string)
                    Relationship("customers", to: "Customer", inverse: "tags", toMany: true)
                }
                Entity("Order") {
                    Attribute("total", .double)
                    Relationship("customer", to: "Customer", inverse: "orders")
                    Relationship("refunds", to: "Refund", inverse: "order", toMany: true, deleteRule: .deny)
                }
                Entity("Refund") {
                    Attribute("amount", .double)
                    Relationship("order", to: "Order", inverse: "refunds")
                }
                Entity("Owner") {
                    Attribute("name", .string)
                    Relationship("pets", to: "Pet", inverse: "owner", toMany: true, deleteRule: .noAction)
                }
                Entity("Pet") {
                    Attribute("name", .string)
                    Relationship("owner", to: "Owner", inverse: "pets")
                }
                Entity("Playlist") {
                    Attribute("name", .string)
                    Relationship("songs", to: "Song", inverse: "playlist", toMany: true, ordered: true)
                }
                Entity("Song") {
                    Attribute("title", .string)
                    Relationship("playlist", to: "Playlist", inverse: "songs")
                }
            }
        }
    }
}

@Suite("Batch insert, update and delete requests: one import transaction each, in the store directly")
struct BatchRequestTests {
    static func customers(_ count: Int) -> [[String: any Sendable]] {
        (1...count).map { ["email": "c\($0)@example.com", "name": "C\($0)", "age": Int32(20 + $0)] }
    }

    func log(_ coordinator: PersistentStoreCoordinator) -> EventLog { coordinator.persistentStores[0].log }

    func head(_ coordinator: PersistentStoreCoordinator) throws -> UInt64 { try log(coordinator).read { try $0.head } }

    /// The names of the stored customers, by email.
    func storedNames(_ coordinator: PersistentStoreCoordinator) async throws -> [String: String] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var names: [String: String] = [:]
            for customer in try context.fetch(FetchRequest(entityName: "Customer")) {
                names[customer.value(forKey: "email") as? String ?? "?"] = customer.value(forKey: "name") as? String ?? "nil"
            }
            return names
        }
    }

    // MARK: - Insert

    @Test("batch insert: one import transaction with the context's author and name; permanent IDs in order; defaults applied; reopened store has them; verify clean")
    func insertReopened() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let context = privateContext(coordinator, name: "importer", author: "nightly")
        let result = try await context.perform { (context: isolated ManagedObjectContext) throws in
            var rows = Self.customers(3)
            rows[2]["age"] = nil
            rows[2]["score"] = NSNull()
            var request = BatchInsertRequest(entityName: "Customer", objects: rows)
            request.resultType = .objectIDs
            let result = try context.execute(request)
            let (registered, changed, undoable) = (context.registeredObjects, context.hasChanges, context.canUndo)
            #expect(registered.isEmpty, "no managed objects were made")
            #expect(!changed && !undoable, "the context didn't change and registered nothing for undo")
            return result
        }
        let ids = try #require(result.objectIDs)
        #expect(ids.count == 3 && ids.allSatisfy { !$0.isTemporaryID })
        #expect(ids.map { $0.uriRepresentation().lastPathComponent } == ["p1", "p2", "p3"])
        let sequence = try #require(result.sequence)
        let event = try log(coordinator).read { try $0.event(sequence) }
        #expect(event.kind == .import && event.author == "nightly" && event.contextName == "importer")
        #expect(event.changes.count == 3 && event.changes.allSatisfy { if case .insert = $0 { true } else { false } })

        let reopened = try openCoordinator(dir, model: try BatchModels.shop)
        let ages = try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            try ids.map { id in
                let object = try context.existingObject(with: id)
                return object.value(forKey: "age") as? Int32
            }
        }
        #expect(ages == [21, 22, 18], "the third object got the model's default age")
        #expect(try log(reopened).verify().isClean)
    }

    @Test("batch insert through a dictionary handler: one object per call until it returns true; count result")
    func insertByHandler() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let count = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var next = 0
            var request = BatchInsertRequest(entityName: "Tag") { values in
                guard next < 5 else { return true }
                next += 1
                values = ["name": "tag \(next)"]
                return false
            }
            request.resultType = .count
            return try context.execute(request).count
        }
        #expect(count == 5)
        let names = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Tag")).compactMap { $0.value(forKey: "name") as? String }
        }
        #expect(names == (1...5).map { "tag \($0)" })
    }

    @Test("batch insert violating a uniqueness constraint (with the store, or within the batch) is refused whole: nothing is written")
    func insertUniquenessViolation() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchInsertRequest(entityName: "Customer", objects: Self.customers(2)))
        }
        let before = try head(coordinator)
        for rows in [
            [["email": "new@example.com"], ["email": "c2@example.com"]],
            [["email": "x@example.com"], ["email": "y@example.com"], ["email": "x@example.com"]],
        ] as [[[String: any Sendable]]] {
            await #expect {
                try await context.perform { (context: isolated ManagedObjectContext) throws in
                    _ = try context.execute(BatchInsertRequest(entityName: "Customer", objects: rows))
                }
            } throws: { error in
                guard case ContextError.storeRefused(let detail) = error else { return false }
                return detail.contains("batch insert into Customer") && detail.contains("email") && detail.contains("nothing was written")
            }
        }
        #expect(try head(coordinator) == before, "no transaction was written")
        #expect(try await storedNames(coordinator).count == 2)
        #expect(try log(coordinator).verify().isClean)
    }

    @Test("batch insert refuses relationships, transient and unknown keys and unconvertible values, naming the object and key; nothing is written")
    func insertRefusesBadInput() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let cases: [([String: any Sendable], String)] = [
            (["team": "x"], "team is a relationship"),
            (["nickname": "x"], "nickname is transient"),
            (["shoeSize": 42], "no property \"shoeSize\""),
            (["age": "old"], "object 2: age:"),
        ]
        for (bad, expected) in cases {
            await #expect {
                try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                    _ = try context.execute(BatchInsertRequest(entityName: "Customer", objects: [["email": "ok@example.com"], bad]))
                }
            } throws: { error in
                guard case ContextError.invalidArgument(let detail) = error else { return false }
                return detail.contains(expected)
            }
        }
        await #expect(throws: ContextError.self) {
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                _ = try context.execute(BatchInsertRequest(entityName: "Nope", objects: [[:]]))
            }
        }
        #expect(try head(coordinator) == 0)
    }

    // MARK: - Update

    @Test("batch update: the predicate's objects, one import event with before- and after-values; as-of before gives the old state; reopened; verify clean")
    func updateRecordsBeforeValues() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let context = privateContext(coordinator, name: "cleaner", author: "ops")
        let result = try await context.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchInsertRequest(entityName: "Customer", objects: Self.customers(5)))
            var request = BatchUpdateRequest(entityName: "Customer")
            request.predicate = try FormatPredicate(format: "age >= %@", Int32(24))
            request.propertiesToUpdate = ["name": "Senior", "score": 2.5]
            request.resultType = .objectIDs
            return try context.execute(request)
        }
        let ids = try #require(result.objectIDs)
        #expect(ids.map { $0.uriRepresentation().lastPathComponent } == ["p4", "p5"])
        let sequence = try #require(result.sequence)
        let event = try log(coordinator).read { try $0.event(sequence) }
        #expect(event.kind == .import && event.author == "ops" && event.contextName == "cleaner")
        #expect(event.changes.count == 2)
        for change in event.changes {
            guard case .update(let id, let changes) = change else {
                Issue.record("expected an update, got \(change)")
                continue
            }
            let byName = Dictionary(uniqueKeysWithValues: changes.map { ($0.property, $0) })
            #expect(byName["name"] == .value(property: "name", before: .attribute(.string("C\(id.primaryKey)")), after: .attribute(.string("Senior"))))
            #expect(byName["score"] == .value(property: "score", before: .null, after: .attribute(.double(2.5))))
        }
        let old = try log(coordinator).read { try $0.object(StoredObjectID(entity: "Customer", primaryKey: 5), asOf: sequence - 1) }
        #expect(old?["name"] == .attribute(.string("C5")))
        let reopened = try openCoordinator(dir, model: try BatchModels.shop)
        #expect(try await storedNames(reopened) == [
            "c1@example.com": "C1", "c2@example.com": "C2", "c3@example.com": "C3", "c4@example.com": "Senior", "c5@example.com": "Senior",
        ])
        #expect(try log(reopened).verify().isClean)
    }

    @Test("batch update matching nothing writes nothing; one without values, or making a unique value clash, is refused whole")
    func updateNothingAndClash() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchInsertRequest(entityName: "Customer", objects: Self.customers(3)))
            var none = BatchUpdateRequest(entityName: "Customer")
            none.predicate = try FormatPredicate(format: "age > 1000")
            none.propertiesToUpdate = ["name": "x"]
            none.resultType = .count
            let result = try context.execute(none)
            #expect(result.count == 0 && result.sequence == nil)
        }
        let before = try head(coordinator)
        await #expect {
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                _ = try context.execute(BatchUpdateRequest(entityName: "Customer"))
            }
        } throws: { error in
            guard case ContextError.invalidArgument(let detail) = error else { return false }
            return detail.contains("propertiesToUpdate is empty")
        }
        await #expect {
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                var clash = BatchUpdateRequest(entityName: "Customer")
                clash.propertiesToUpdate = ["email": "same@example.com"]
                _ = try context.execute(clash)
            }
        } throws: { error in
            guard case ContextError.storeRefused(let detail) = error else { return false }
            return detail.contains("batch update of Customer")
        }
        #expect(try head(coordinator) == before)
    }

    // MARK: - Delete

    @Test("batch delete by predicate: one import event of deletes carrying full before-images; as-of before has the objects; reopened; verify clean")
    func deleteByPredicate() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let result = try await privateContext(coordinator, name: "purger").perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchInsertRequest(entityName: "Customer", objects: Self.customers(4)))
            var request = BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Customer", format: "age < 23"))
            request.resultType = .objectIDs
            return try context.execute(request)
        }
        #expect(result.objectIDs?.map { $0.uriRepresentation().lastPathComponent } == ["p1", "p2"])
        let sequence = try #require(result.sequence)
        let event = try log(coordinator).read { try $0.event(sequence) }
        #expect(event.kind == .import && event.contextName == "purger")
        let first = try #require(event.changes.first)
        guard case .delete(let id, let before) = first else {
            Issue.record("expected a delete, got \(first)")
            return
        }
        #expect(id == StoredObjectID(entity: "Customer", primaryKey: 1))
        #expect(before["email"] == .attribute(.string("c1@example.com")) && before["age"] == .attribute(.int32(21)))
        let asOf = try log(coordinator).read { try $0.state(asOf: sequence - 1) }
        #expect(asOf.objects(ofEntity: "Customer").count == 4)
        let reopened = try openCoordinator(dir, model: try BatchModels.shop)
        #expect(try await storedNames(reopened).keys.sorted() == ["c3@example.com", "c4@example.com"])
        #expect(try log(reopened).verify().isClean)
    }

    @Test("batch delete selects as a fetch does: an index-answered predicate, a filtered one, sort descriptors with a limit, sub-entities")
    func deleteSelectsAsFetch() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchInsertRequest(entityName: "Customer", objects: Self.customers(10)))
            func delete(_ fetch: FetchRequest<ManagedObject>) throws -> BatchDeleteRequest {
                var request = BatchDeleteRequest(fetchRequest: fetch)
                request.resultType = .objectIDs
                return request
            }
            func names(_ result: BatchResult) -> [String] { result.objectIDs?.map { $0.uriRepresentation().lastPathComponent } ?? [] }
            // age is indexed: the index answers this predicate whole.
            let byIndex = try FetchRequest(entityName: "Customer", format: "age >= 29")
            let plan = try context.explain(byIndex).description
            #expect(plan.contains("index scan"))
            let indexed = try context.execute(try delete(byIndex))
            #expect(names(indexed) == ["p9", "p10"])
            // name isn't: each record is judged.
            let judged = try context.execute(try delete(try FetchRequest(entityName: "Customer", format: "name IN {'C2', 'C5'} AND age < 100")))
            #expect(names(judged) == ["p2", "p5"])
            var oldest = FetchRequest(entityName: "Customer", sortDescriptors: [FetchSortDescriptor(key: "age", ascending: false)])
            oldest.fetchLimit = 2
            let sorted = try context.execute(try delete(oldest))
            #expect(names(sorted) == ["p8", "p7"])
            var exact = FetchRequest(entityName: "Customer")
            exact.includesSubentities = false
            let rest = try context.execute(try delete(exact))
            #expect(names(rest) == ["p1", "p3", "p4", "p6"])
        }
        #expect(try log(coordinator).verify().isClean)
    }

    @Test("batch delete by object IDs: missing ones skipped, temporary IDs and other entities refused")
    func deleteByIDs() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var insert = BatchInsertRequest(entityName: "Customer", objects: Self.customers(3))
            insert.resultType = .objectIDs
            let ids = try #require(try context.execute(insert).objectIDs)
            var request = BatchDeleteRequest(objectIDs: [ids[0], ids[2]])
            request.resultType = .count
            #expect(try context.execute(request).count == 2)
            #expect(try context.execute(request).count == 0, "already deleted: skipped")
            let team = try context.insertNewObject(forEntityName: "Team")
            #expect(throws: ContextError.self) { try context.execute(BatchDeleteRequest(objectIDs: [team.objectID])) }
            try context.save()
            #expect(throws: ContextError.self) { try context.execute(BatchDeleteRequest(objectIDs: [ids[1], team.objectID])) }
            #expect(try context.count(for: FetchRequest(entityName: "Customer")) == 1)
        }
    }

    @Test("batch delete nullifies recorded inverses in the same transaction: to-one, many-to-many membership, ordered list")
    func deleteNullifies() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let (team, tag, song) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            let tag = try context.insertNewObject(forEntityName: "Tag")
            let other = try context.insertNewObject(forEntityName: "Tag")
            for index in 1...3 {
                let customer = try context.insertNewObject(forEntityName: "Customer")
                customer.setValue("m\(index)@example.com", forKey: "email")
                customer.setValue(team, forKey: "team")
                customer.mutableSetValue(forKey: "tags").add(tag)
                customer.mutableSetValue(forKey: "tags").add(other)
            }
            let playlist = try context.insertNewObject(forEntityName: "Playlist")
            var songs: [ManagedObject] = []
            for index in 1...3 {
                let song = try context.insertNewObject(forEntityName: "Song")
                song.setValue("s\(index)", forKey: "title")
                songs.append(song)
            }
            playlist.setValue(songs, forKey: "songs")
            try context.save()
            return (team.objectID, tag.objectID, songs[1].objectID)
        }
        let result = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchDeleteRequest(objectIDs: [team]))
            _ = try context.execute(BatchDeleteRequest(objectIDs: [tag]))
            return try context.execute(BatchDeleteRequest(objectIDs: [song]))
        }
        let sequence = try #require(result.sequence)
        let event = try log(coordinator).read { try $0.event(sequence) }
        #expect(event.changes.count == 2, "the playlist's list lost the song, then the song was deleted")
        guard case .update(_, let changes) = event.changes[0] else {
            Issue.record("expected the playlist's update first, got \(event.changes[0])")
            return
        }
        #expect(changes.first?.property == "songs")
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for customer in try context.fetch(FetchRequest(entityName: "Customer")) {
                #expect(customer.value(forKey: "team") == nil)
                #expect((customer.value(forKey: "tags") as? Set<ManagedObject>)?.count == 1)
            }
            let playlist = try #require(try context.fetch(FetchRequest(entityName: "Playlist")).first)
            #expect((playlist.value(forKey: "songs") as? [ManagedObject])?.compactMap { $0.value(forKey: "title") as? String } == ["s1", "s3"])
        }
        #expect(try log(coordinator).verify().isClean)
    }

    @Test("batch delete cascades (its count and IDs include the cascade); a deny rule holding an object not deleted refuses it whole")
    func deleteCascadeAndDeny() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            for (email, orders, refunded) in [("a@example.com", 2, false), ("b@example.com", 1, true)] {
                let customer = try context.insertNewObject(forEntityName: "Customer")
                customer.setValue(email, forKey: "email")
                for _ in 0..<orders {
                    let order = try context.insertNewObject(forEntityName: "Order")
                    order.setValue(customer, forKey: "customer")
                    if refunded {
                        let refund = try context.insertNewObject(forEntityName: "Refund")
                        refund.setValue(order, forKey: "order")
                    }
                }
            }
            try context.save()
        }
        let before = try head(coordinator)
        await #expect {
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest(entityName: "Customer")))
            }
        } throws: { error in
            guard case ContextError.storeRefused(let detail) = error else { return false }
            return detail.contains("Order/p3.refunds") && detail.contains("deny") && detail.contains("nothing was deleted")
        }
        #expect(try head(coordinator) == before)
        let result = try await context.perform { (context: isolated ManagedObjectContext) throws in
            var request = BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Customer", format: "email == 'a@example.com'"))
            request.resultType = .objectIDs
            return try context.execute(request)
        }
        #expect(result.objectIDs?.map { "\($0.entityName)/\($0.uriRepresentation().lastPathComponent)" } == ["Customer/p1", "Order/p1", "Order/p2"])
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Order")) == 1)
            // Deleting the refunds too (they are what the deny rule guards) lets the rest go.
            _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest(entityName: "Refund")))
            _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest(entityName: "Customer")))
            #expect(try context.count(for: FetchRequest(entityName: "Order")) == 0)
        }
        #expect(try log(coordinator).verify().isClean)
    }

    @Test("batch delete that would leave a reference dangling (a no-action rule) is refused with the log's error; nothing is written")
    func deleteNoActionRefused() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let owner = try context.insertNewObject(forEntityName: "Owner")
            let pet = try context.insertNewObject(forEntityName: "Pet")
            pet.setValue(owner, forKey: "owner")
            try context.save()
        }
        let before = try head(coordinator)
        await #expect {
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest(entityName: "Owner")))
            }
        } throws: { error in
            guard case ContextError.storeRefused(let detail) = error else { return false }
            return detail.contains("batch delete of Owner") && detail.contains("Pet/p1") && detail.contains("Owner/p1")
        }
        #expect(try head(coordinator) == before)
        #expect(try log(coordinator).verify().isClean)
    }

    // MARK: - Contexts

    @Test("a context holding a batch-deleted object: firing its fault throws objectNotFound; after mergeChanges(fromRemoteContextSave:into:) the object has left it")
    func staleContextThenMerge() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let holder = privateContext(coordinator)
        let worker = privateContext(coordinator)
        let ids = try await worker.perform { (context: isolated ManagedObjectContext) throws in
            var request = BatchInsertRequest(entityName: "Customer", objects: Self.customers(2))
            request.resultType = .objectIDs
            return try #require(try context.execute(request).objectIDs)
        }
        let gone = ids[0]
        // One block, so the holder keeps its (unchanged) objects: a context doesn't retain them.
        try await holder.perform { (context: isolated ManagedObjectContext) throws in
            let kept = try context.existingObject(with: ids[1])
            #expect(kept.value(forKey: "name") as? String == "C2")
            let fault = try context.object(with: gone)  // a fault, not fired yet
            let deleted = try worker.performAndWait { (worker: isolated ManagedObjectContext) throws in
                var request = BatchDeleteRequest(objectIDs: [gone])
                request.resultType = .objectIDs
                return try #require(try worker.execute(request).objectIDs)
            }
            #expect(throws: ContextError.objectNotFound(gone.description)) { try fault.fulfillFault() }
            ManagedObjectContext.mergeChanges(
                fromRemoteContextSave: [ManagedObjectContext.NotificationKey.deletedObjects.rawValue: deleted.map { $0.uriRepresentation() }],
                into: [context])
            let goneObject = context.registeredObject(for: gone), keptObject = context.registeredObject(for: ids[1])
            #expect(goneObject == nil && fault.managedObjectContext == nil, "the deleted object left the context")
            #expect(keptObject === kept)
            #expect(throws: ContextError.self) { _ = try context.existingObject(with: gone) }
        }
    }

    @Test("mergeChanges(fromRemoteContextSave:into:) with updated IDs re-reads a registered object, keeping the context's unsaved change")
    func remoteMergeRefreshes() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let holder = privateContext(coordinator)
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = BatchInsertRequest(entityName: "Customer", objects: Self.customers(1))
            request.resultType = .objectIDs
            return try #require(try context.execute(request).objectIDs?.first)
        }
        try await holder.perform { (context: isolated ManagedObjectContext) throws in
            let customer = try context.existingObject(with: id)
            customer.setValue(Int32(99), forKey: "age")
        }
        let updated = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = BatchUpdateRequest(entityName: "Customer")
            request.propertiesToUpdate = ["name": "Renamed"]
            request.resultType = .objectIDs
            return try #require(try context.execute(request).objectIDs)
        }
        ManagedObjectContext.mergeChanges(fromRemoteContextSave: ["updated": updated], into: [holder])
        try await holder.perform { (context: isolated ManagedObjectContext) throws in
            let customer = try context.existingObject(with: id)
            #expect(customer.value(forKey: "name") as? String == "Renamed")
            #expect(customer.value(forKey: "age") as? Int32 == 99, "the unsaved change survives the merge")
        }
    }

    @Test("an automatically merging context sees a batch update and a batch delete like any other transaction")
    func automaticMerge() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = BatchInsertRequest(entityName: "Customer", objects: Self.customers(2))
            request.resultType = .objectIDs
            return try #require(try context.execute(request).objectIDs)
        }
        let viewer = privateContext(coordinator)
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            // Unsaved changes keep the objects in the context between blocks.
            for id in ids { try context.existingObject(with: id).setValue(Int32(77), forKey: "age") }
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var update = BatchUpdateRequest(entityName: "Customer")
            update.propertiesToUpdate = ["name": "Merged"]
            _ = try context.execute(update)
            _ = try context.execute(BatchDeleteRequest(objectIDs: [ids[0]]))
        }
        // A perform block starts by merging what the store gained since the context last looked.
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            let deleted = context.registeredObject(for: ids[0])
            #expect(deleted == nil, "the deleted object left the context")
            let registered = context.registeredObject(for: ids[1])
            let kept = try #require(registered)
            #expect(kept.value(forKey: "name") as? String == "Merged")
            #expect(kept.value(forKey: "age") as? Int32 == 77, "the unsaved change was kept")
        }
    }

    @Test("batch requests aren't registered for undo: not in the executing context, nor in a persisted-undo context read back from the log")
    func notRegisteredForUndo() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        try await privateContext(coordinator, name: "app", author: "me", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Saved", forKey: "name")
            try context.save()
            _ = try context.execute(BatchInsertRequest(entityName: "Customer", objects: Self.customers(2)))
            var update = BatchUpdateRequest(entityName: "Customer")
            update.propertiesToUpdate = ["name": "Batch"]
            _ = try context.execute(update)
            // The only group on the stack is the team's insert.
            let undoable = context.canUndo
            #expect(undoable)
            try context.undo()
            let stillUndoable = context.canUndo
            #expect(!stillUndoable)
            // Left unsaved, not rolled back: rollback() drops the stacks for good (spec 0006 §13).
        }
        let reopened = try openCoordinator(dir, model: try BatchModels.shop)
        try await privateContext(reopened, name: "app", author: "me", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            let undoable = context.canUndo
            #expect(undoable, "the team's save is on the stack")
            try context.undo()
            try context.save()
            let stillUndoable = context.canUndo
            #expect(!stillUndoable, "nothing else: the batch transactions were not stacked")
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 0)
            #expect(try context.count(for: try FetchRequest(entityName: "Customer", format: "name == 'Batch'")) == 2)
        }
    }

    @Test("a big batch insert, update and delete (size from STRATA_BATCH_TEST_SIZE, default 20,000): one event each, read back whole; verify clean")
    func bigBatch() async throws {
        let size = ProcessInfo.processInfo.environment["STRATA_BATCH_TEST_SIZE"].flatMap(Int.init) ?? 20_000
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let results = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var insert = BatchInsertRequest(entityName: "Customer", objects: Self.customers(size))
            insert.resultType = .count
            var update = BatchUpdateRequest(entityName: "Customer")
            update.predicate = try FormatPredicate(format: "age >= %@", Int32(20 + size / 2))
            update.propertiesToUpdate = ["score": 1.0]
            update.resultType = .count
            var delete = BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Customer", format: "score == nil"))
            delete.resultType = .count
            return [try context.execute(insert), try context.execute(update), try context.execute(delete)]
        }
        let updated = size - size / 2 + 1
        #expect(results.map(\.count) == [size, updated, size - updated])
        for result in results {
            let sequence = try #require(result.sequence)
            let event = try log(coordinator).read { try $0.event(sequence) }
            #expect(event.changes.count == result.count)
        }
        #expect(try log(coordinator).verify().isClean)
    }
}
