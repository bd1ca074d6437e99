import Foundation
import Strata
import StrataTestSupport
import Testing

/// Contexts pinned to a query generation (Core Data's `NSQueryGenerationToken`, spec 0006 §22).
@Suite("Contexts: query generations")
struct QueryGenerationTests {
    /// The shop of the batch tests: teams Reds and Blues, tags "new" and "vip", customers
    /// c1…c5 aged 20…60 in Reds, c1 tagged "new". Returns the IDs by name.
    static func shop(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, [String: ManagedObjectID]) {
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [String: ManagedObjectID] in
            var made: [String: ManagedObject] = [:]
            for name in ["Reds", "Blues"] {
                made[name] = try context.insertNewObject(forEntityName: "Team")
                made[name]?.setValue(name, forKey: "name")
            }
            for name in ["new", "vip"] {
                made[name] = try context.insertNewObject(forEntityName: "Tag")
                made[name]?.setValue(name, forKey: "name")
            }
            for n in 1...5 {
                let customer = try context.insertNewObject(forEntityName: "Customer")
                customer.setValue("c\(n)", forKey: "name")
                customer.setValue("c\(n)@shop.example", forKey: "email")
                customer.setValue(Int32(n * 10 + 10), forKey: "age")
                customer.setValue(made["Reds"], forKey: "team")
                made["c\(n)"] = customer
            }
            if let new = made["new"] { made["c1"]?.mutableSetValue(forKey: "tags").add(new) }
            try context.save()
            return made.mapValues(\.objectID)
        }
        return (coordinator, ids)
    }

    /// Another context's save: c6 (70, Blues) inserted, c2 deleted, c3 renamed and 65, c4
    /// moved to Blues, c1 tagged "vip" too. Returns c6's ID.
    static func changeEverything(_ coordinator: PersistentStoreCoordinator, _ ids: [String: ManagedObjectID]) async throws -> ManagedObjectID {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            let object = { (name: String) throws -> ManagedObject in
                guard let id = ids[name] else { throw ContextError.invalidArgument("no \(name)") }
                return try context.existingObject(with: id)
            }
            let c6 = try context.insertNewObject(forEntityName: "Customer")
            c6.setValue("c6", forKey: "name")
            c6.setValue("c6@shop.example", forKey: "email")
            c6.setValue(Int32(70), forKey: "age")
            c6.setValue(try object("Blues"), forKey: "team")
            context.delete(try object("c2"))
            try object("c3").setValue("c3 renamed", forKey: "name")
            try object("c3").setValue(Int32(65), forKey: "age")
            try object("c4").setValue(try object("Blues"), forKey: "team")
            try object("c1").mutableSetValue(forKey: "tags").add(try object("vip"))
            try context.save()
            return c6.objectID
        }
    }

    static func names(_ objects: [ManagedObject]) -> [String] { objects.compactMap { $0.value(forKey: "name") as? String } }
    static func names(_ value: Any?) -> [String] { ((value as? Set<ManagedObject>) ?? []).compactMap { $0.value(forKey: "name") as? String }.sorted() }

    static func byName() -> FetchRequest<ManagedObject> { FetchRequest(entityName: "Customer", sortDescriptors: [FetchSortDescriptor(key: "name")]) }
    static func older(than age: Int32) throws -> FetchRequest<ManagedObject> {
        try FetchRequest(entityName: "Customer", format: "age > %@", age)
    }

    @Test("a pinned context keeps seeing its generation after another context's save: fetches (scan and index, sorted and limited), counts, objects by ID, faults and both sides of relationships; another context pinned by its token sees the same; an unpinned one sees the new state")
    func pinnedReadsIgnoreLaterSaves() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await Self.shop(dir)
        let pinned = privateContext(coordinator)
        let token = try await pinned.perform { (context: isolated ManagedObjectContext) throws -> QueryGenerationToken? in
            #expect(context.queryGenerationToken == nil, "unpinned by default")
            try context.setQueryGenerationFrom(.current)
            #expect(Self.names(try context.fetch(Self.byName())) == ["c1", "c2", "c3", "c4", "c5"])
            return context.queryGenerationToken
        }
        let head = try coordinator.persistentStores[0].log.head
        #expect(token?.sequence == head && token?.storeIdentifier == coordinator.persistentStores[0].identifier, "\(String(describing: token))")
        let c6 = try await Self.changeEverything(coordinator, ids)

        // A fresh context pinned with the token holds nothing: every answer comes from the store.
        let twin = privateContext(coordinator)
        for context in [pinned, twin] {
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                if context === twin { try context.setQueryGenerationFrom(token) }
                #expect(context.queryGenerationToken == token)
                #expect(Self.names(try context.fetch(Self.byName())) == ["c1", "c2", "c3", "c4", "c5"])
                // The age index: c3's new age and c6 aren't there, c4 and c5 are.
                var oldest = try Self.older(than: 45)
                oldest.sortDescriptors = [FetchSortDescriptor(key: "age", ascending: false)]
                #expect(Self.names(try context.fetch(oldest)) == ["c5", "c4"])
                oldest.fetchLimit = 1
                #expect(Self.names(try context.fetch(oldest)) == ["c5"])
                #expect(try context.count(for: try Self.older(than: 45)) == 2)
                #expect(try context.count(for: FetchRequest(entityName: "Customer")) == 5)
                #expect(try context.fetchObjectIDs(try Self.older(than: 62)).isEmpty)
                // By ID: the object made since isn't there; the one deleted since is.
                #expect(throws: ContextError.objectNotFound(c6.description)) { _ = try context.existingObject(with: c6) }
                let c2 = try context.existingObject(with: try #require(ids["c2"]))
                #expect(c2.value(forKey: "name") as? String == "c2")
                let c3 = try context.existingObject(with: try #require(ids["c3"]))
                #expect(c3.value(forKey: "name") as? String == "c3" && c3.value(forKey: "age") as? Int32 == 40)
                // Relationships: the to-one, its derived to-many side, the many-to-many.
                let c4 = try context.existingObject(with: try #require(ids["c4"]))
                #expect((c4.value(forKey: "team") as? ManagedObject)?.value(forKey: "name") as? String == "Reds")
                let reds = try context.existingObject(with: try #require(ids["Reds"]))
                #expect(Self.names(reds.value(forKey: "members")) == ["c1", "c2", "c3", "c4", "c5"])
                let blues = try context.existingObject(with: try #require(ids["Blues"]))
                #expect(Self.names(blues.value(forKey: "members")).isEmpty)
                let c1 = try context.existingObject(with: try #require(ids["c1"]))
                #expect(Self.names(c1.value(forKey: "tags")) == ["new"])
                let vip = try context.existingObject(with: try #require(ids["vip"]))
                #expect(Self.names(vip.value(forKey: "customers")).isEmpty)
                #expect(try context.existingObjects(with: [c6, c2.objectID]).map { $0?.objectID } == [nil, c2.objectID])
            }
        }
        // The control: an unpinned context sees what the save made.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(Self.names(try context.fetch(Self.byName())) == ["c1", "c3 renamed", "c4", "c5", "c6"])
            #expect(try context.count(for: try Self.older(than: 45)) == 4)
            let reds = try context.existingObject(with: try #require(ids["Reds"]))
            #expect(Self.names(reds.value(forKey: "members")) == ["c1", "c3 renamed", "c5"])
        }
        // Unpinning (nil) reads the current state again.
        try await twin.perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(nil)
            #expect(context.queryGenerationToken == nil)
            #expect(try context.count(for: try Self.older(than: 45)) == 4)
        }
    }

    @Test("the generation moves on when the context saves (to its save), is reset, or merges automatically; not otherwise")
    func advances() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await Self.shop(dir)
        let log = coordinator.persistentStores[0].log
        let pinned = privateContext(coordinator)
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(.current)
            #expect(try context.count(for: Self.byName()) == 5)
        }
        _ = try await Self.changeEverything(coordinator, ids)
        let theirs = try log.head
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: try Self.older(than: 45)) == 2, "still pinned")
            context.refreshAllObjects()
            #expect(try context.count(for: try Self.older(than: 45)) == 2, "a refresh doesn't move it")
            // Its own save moves it to the state the save made, which includes the other save.
            let c7 = try context.insertNewObject(forEntityName: "Customer")
            c7.setValue("c7", forKey: "name")
            c7.setValue("c7@shop.example", forKey: "email")
            c7.setValue(Int32(80), forKey: "age")
            try context.save()
            let token = context.queryGenerationToken
            #expect(token?.sequence == theirs + 1)
            #expect(try context.count(for: try Self.older(than: 45)) == 5)
        }
        // Another save; a reset moves the context to it.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: try #require(ids["c5"])))
            try context.save()
        }
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: try Self.older(than: 45)) == 5)
            context.reset()
            #expect(try context.count(for: try Self.older(than: 45)) == 4)
            #expect(context.queryGenerationToken?.sequence == theirs + 2)
        }
        // Automatic merging moves it at the start of the next block.
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in context.automaticallyMergesChangesFromParent = true }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: try #require(ids["c4"])))
            try context.save()
        }
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: try Self.older(than: 45)) == 3)
            #expect(context.queryGenerationToken?.sequence == theirs + 3)
        }
    }

    @Test("a did-save notification carries the save's generation: another context pinned by it reads that save's state; merging it moves a pinned context there, never back")
    func didSaveToken() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await Self.shop(dir)
        let writer = privateContext(coordinator)
        let save = try await writer.perform { (context: isolated ManagedObjectContext) throws -> ContextDidSave? in
            var seen: ContextDidSave?
            _ = context.addObserver { change in
                if case .didSave(let save) = change.notification { seen = save }
            }
            context.delete(try context.existingObject(with: try #require(ids["c5"])))
            try context.save()
            return seen
        }
        let didSave = try #require(save)
        let token = try #require(didSave.queryGenerationToken)
        #expect(token.sequence == didSave.sequence && token.storeIdentifier == didSave.storeIdentifier)
        // Later saves; a context pinned by the notification's token reads the state after the first.
        _ = try await Self.changeEverything(coordinator, ids)
        let reader = privateContext(coordinator)
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(token)
            #expect(Self.names(try context.fetch(Self.byName())) == ["c1", "c2", "c3", "c4"])
        }
        // A context pinned before the first save moves to it when merging it.
        let pinned = privateContext(coordinator)
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(QueryGenerationToken(storeIdentifier: token.storeIdentifier ?? UUID(), sequence: (token.sequence ?? 1) - 1))
            #expect(try context.count(for: Self.byName()) == 5)
            context.mergeChanges(fromContextDidSave: didSave)
            #expect(context.queryGenerationToken == token)
            #expect(try context.count(for: Self.byName()) == 4)
            // An older save merged later doesn't move it back.
            try context.setQueryGenerationFrom(.current)
            let newest = context.queryGenerationToken
            context.mergeChanges(fromContextDidSave: didSave)
            #expect(context.queryGenerationToken == newest && newest != token)
        }
    }

    @Test("merging a did-save notification of a save that wrote nothing to the store (a child's) leaves a pinned context where it is")
    func mergeChildSaveKeepsGeneration() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await Self.shop(dir)
        let pinned = privateContext(coordinator)
        let token = try await pinned.perform { (context: isolated ManagedObjectContext) throws -> QueryGenerationToken? in
            try context.setQueryGenerationFrom(.current)
            #expect(try context.count(for: Self.byName()) == 5)
            return context.queryGenerationToken
        }
        _ = try await Self.changeEverything(coordinator, ids)
        let parent = privateContext(coordinator)
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        let childSave = try await child.perform { (context: isolated ManagedObjectContext) throws -> ContextDidSave? in
            var seen: ContextDidSave?
            _ = context.addObserver { change in
                if case .didSave(let save) = change.notification { seen = save }
            }
            let customer = try context.insertNewObject(forEntityName: "Customer")
            customer.setValue("c9", forKey: "name")
            try context.save()
            return seen
        }
        let save = try #require(childSave)
        #expect(save.sequence == nil)
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            context.mergeChanges(fromContextDidSave: save)
            #expect(context.queryGenerationToken == token)
            #expect(try context.count(for: Self.byName()) == 5)
        }
    }

    @Test("unsaved changes show on top of the generation; saving a change to an object changed since the generation is a merge conflict, which a merge policy resolves")
    func changesOnTopAndConflicts() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await Self.shop(dir)
        let pinned = privateContext(coordinator)
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(.current)
            _ = try context.count(for: Self.byName())
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: try #require(ids["c2"])).setValue("c2 theirs", forKey: "name")
            try context.save()
        }
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            let extra = try context.insertNewObject(forEntityName: "Customer")
            extra.setValue("c0", forKey: "name")
            extra.setValue("c0@shop.example", forKey: "email")
            let c2 = try context.existingObject(with: try #require(ids["c2"]))
            #expect(c2.value(forKey: "name") as? String == "c2", "the generation's value")
            c2.setValue(Int32(33), forKey: "age")
            let names = Self.names(try context.fetch(Self.byName()))
            #expect(names == ["c0", "c1", "c2", "c3", "c4", "c5"])
            let error = #expect(throws: ContextError.self) { try context.save() }
            guard case .mergeConflicts(let conflicts)? = error else {
                Issue.record("expected merge conflicts, got \(String(describing: error))")
                return
            }
            #expect(conflicts.map(\.objectID) == [c2.objectID])
            context.mergePolicy = StandardMergePolicy.mergeByPropertyObjectTrump
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let c2 = try context.existingObject(with: try #require(ids["c2"]))
            #expect(c2.value(forKey: "name") as? String == "c2 theirs")
            #expect(c2.value(forKey: "age") as? Int32 == 33)
        }
    }

    @Test("a save whose conflicts the rollback policy resolves writes nothing and moves a pinned context to the newest generation, whose values its objects now hold")
    func saveResolvedToNothing() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await Self.shop(dir)
        let pinned = privateContext(coordinator)
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(.current)
            _ = try context.existingObject(with: try #require(ids["c2"])).value(forKey: "name")
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: try #require(ids["c2"])).setValue(Int32(44), forKey: "age")
            context.delete(try context.existingObject(with: try #require(ids["c5"])))
            try context.save()
        }
        let head = try coordinator.persistentStores[0].log.head
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: Self.byName()) == 5, "still pinned")
            let c2 = try context.existingObject(with: try #require(ids["c2"]))
            c2.setValue(Int32(33), forKey: "age")
            context.mergePolicy = StandardMergePolicy.rollback
            try context.save()
            #expect(try coordinator.persistentStores[0].log.head == head, "nothing written")
            #expect(c2.value(forKey: "age") as? Int32 == 44, "the store's value")
            #expect(try context.count(for: Self.byName()) == 4, "the newest generation")
            #expect(context.queryGenerationToken?.sequence == head)
        }
    }

    @Test("tokens: Codable; refused for a child context, another store, a generation past the head or before a purge point; a purge under a pinned context is a clear error")
    func tokensAndRefusals() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await Self.shop(dir)
        let otherDir = try TemporaryDirectory()
        let (otherCoordinator, _) = try await Self.shop(otherDir)
        let pinned = privateContext(coordinator)
        let token = try await pinned.perform { (context: isolated ManagedObjectContext) throws -> QueryGenerationToken in
            try context.setQueryGenerationFrom(.current)
            let token = context.queryGenerationToken
            return try #require(token)
        }
        #expect(QueryGenerationToken.current.description == "current" && QueryGenerationToken.current.sequence == nil)
        #expect(token.description.hasPrefix("generation \(try #require(token.sequence)) of store "))
        let json = try JSONEncoder().encode(token)
        #expect(try JSONDecoder().decode(QueryGenerationToken.self, from: json) == token)
        let store = try #require(token.storeIdentifier)
        #expect(try JSONDecoder().decode(
            QueryGenerationToken.self, from: Data(#"{"store":"\#(store.uuidString)","sequence":3}"#.utf8)) == QueryGenerationToken(storeIdentifier: store, sequence: 3))
        #expect(try JSONDecoder().decode(QueryGenerationToken.self, from: Data(#"{"current":true}"#.utf8)) == .current)
        #expect(try JSONDecoder().decode(QueryGenerationToken.self, from: try JSONEncoder().encode(QueryGenerationToken.current)) == .current)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(QueryGenerationToken.self, from: Data(#"{"sequence":3}"#.utf8)) }
        // A token for a later generation than the store has (made by editing the JSON).
        let text = try #require(String(data: json, encoding: .utf8))
        let future = try JSONDecoder().decode(
            QueryGenerationToken.self, from: Data(text.replacingOccurrences(of: "\"sequence\":\(try #require(token.sequence))", with: "\"sequence\":999").utf8))
        #expect(future.sequence == 999)

        try await privateContext(otherCoordinator).perform { (context: isolated ManagedObjectContext) throws in
            let error = #expect(throws: ContextError.self) { try context.setQueryGenerationFrom(token) }
            #expect(error?.description.contains("is for store") == true, "\(String(describing: error))")
            #expect(context.queryGenerationToken == nil)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let error = #expect(throws: ContextError.self) { try context.setQueryGenerationFrom(future) }
            #expect(error?.description.contains("past the store's newest transaction") == true, "\(String(describing: error))")
        }
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: pinned)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let error = #expect(throws: ContextError.self) { try context.setQueryGenerationFrom(.current) }
            #expect(error?.description.contains("child context") == true, "\(String(describing: error))")
            // It reads through its parent, so it sees the parent's generation.
            #expect(try context.count(for: Self.byName()) == 5)
        }
        _ = try await Self.changeEverything(coordinator, ids)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: try Self.older(than: 45)) == 2, "the parent's generation")
        }
        // A purge past the generation: the pinned context's next read says what happened.
        let log = coordinator.persistentStores[0].log
        _ = try log.purge(through: try log.head, author: "test")
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            let error = #expect(throws: ContextError.self) { _ = try context.count(for: Self.byName()) }
            #expect(error?.description.contains("pinned to query generation") == true, "\(String(describing: error))")
            context.reset()
            #expect(try context.count(for: Self.byName()) == 5, "a reset moves it to the newest generation")
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let error = #expect(throws: ContextError.self) { try context.setQueryGenerationFrom(token) }
            #expect(error?.description.contains("purged") == true, "\(String(describing: error))")
        }
    }
}
