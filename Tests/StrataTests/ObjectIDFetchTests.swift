import Foundation
import Strata
import Synchronization
import StrataTestSupport
import Testing

/// Counts the players made, faults included.
final class CountedPlayer: ManagedObject {
    static let made = Atomic<Int>(0)
    required init(_ creation: ObjectCreation) {
        Self.made.add(1, ordering: .relaxed)
        super.init(creation)
    }
}

/// `fetchObjectIDs` (and `resultType = .managedObjectID`) choose the same objects in the same
/// order as `fetch`, without making managed objects for stored rows.
@Suite("Fetch requests: object IDs without objects", .serialized)
struct ObjectIDFetchTests {
    static var model: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Relationship("players", to: "Player", inverse: "team", toMany: true)
                }
                Entity("Player") {
                    Attribute("name", .string)
                    Attribute("age", .int64).indexed()
                    Relationship("team", to: "Team", inverse: "players")
                }
                Entity("Captain", parent: "Player") {
                    Attribute("armband", .string)
                }
            }
        }
    }

    /// Requests covering each way a fetch runs: plain scans, filters, index scans and walks,
    /// sorts with ties, offsets and limits, key paths through a relationship, sub-entities.
    static func requests() throws -> [FetchRequest<ManagedObject>] {
        var requests: [FetchRequest<ManagedObject>] = [
            FetchRequest(entityName: "Player"),
            FetchRequest(entityName: "Team"),
            FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "age >= 30")),
            FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "age == 31 OR name ENDSWITH '7'")),
            FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team.name == 'T2'")),
            FetchRequest(entityName: "Player", sortDescriptors: [FetchSortDescriptor(key: "name", ascending: false)]),
            FetchRequest(
                entityName: "Player", predicate: try FormatPredicate(format: "age < 40"),
                sortDescriptors: [FetchSortDescriptor(key: "age"), FetchSortDescriptor(key: "team.name", ascending: false)]),
        ]
        var paged = FetchRequest(entityName: "Player", sortDescriptors: [FetchSortDescriptor(key: "age")])
        paged.fetchOffset = 7
        paged.fetchLimit = 11
        requests.append(paged)
        var walked = FetchRequest(entityName: "Player", sortDescriptors: [FetchSortDescriptor(key: "age", ascending: false)])
        walked.fetchLimit = 3
        requests.append(walked)
        var ownOnly = FetchRequest(entityName: "Player")
        ownOnly.includesSubentities = false
        requests.append(ownOnly)
        var filtered = FetchRequest(entityName: "Player")
        filtered.filter { ($0.value(forKey: "age") as? Int64 ?? 0) % 3 == 0 }
        requests.append(filtered)
        return requests
    }

    static func fill(_ context: isolated ManagedObjectContext) throws {
        var teams: [ManagedObject] = []
        for index in 0..<3 {
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("T\(index)", forKey: "name")
            teams.append(team)
        }
        for index in 0..<60 {
            let player = try context.insertNewObject(forEntityName: index % 10 == 0 ? "Captain" : "Player")
            player.setValue("p\(index)", forKey: "name")
            player.setValue(Int64(20 + index % 25), forKey: "age")
            player.setValue(teams[index % 3], forKey: "team")
        }
        try context.save()
    }

    /// `fetchObjectIDs`, then `fetch(_:)`'s objects' IDs, for each request.
    static func bothWays(_ context: isolated ManagedObjectContext) throws -> [(ids: [ManagedObjectID], objects: [ManagedObjectID])] {
        try requests().map { request in
            let ids = try context.fetchObjectIDs(request)
            var asResult = request
            asResult.resultType = .managedObjectID
            guard case .objectIDs(let viaExecute) = try context.execute(asResult) else { throw CocoaError(.coderInvalidValue) }
            #expect(viaExecute == ids, "execute with .managedObjectID gives fetchObjectIDs' IDs")
            return (ids, try context.fetch(request).map(\.objectID))
        }
    }

    @Test("IDs equal fetch's objects' IDs, in order, for every kind of plan; no object is made for a stored row")
    func sameAsFetchWithoutObjects() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model, classes: [(CountedPlayer.self, "Player"), (CountedPlayer.self, "Captain")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in try Self.fill(context) }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // A fresh context: an ID fetch leaves it holding nothing, unless a key path through
            // a relationship or the in-memory filter needed objects (as a fetch makes them).
            for (index, request) in try Self.requests().enumerated() {
                CountedPlayer.made.store(0, ordering: .relaxed)
                let ids = try context.fetchObjectIDs(request)
                #expect(!ids.isEmpty, "request \(index)")
                #expect(ids.allSatisfy { !$0.isTemporaryID })
                if !Self.needObjects.contains(index) {
                    #expect(CountedPlayer.made.load(ordering: .relaxed) == 0, "request \(index) made players")
                    #expect(context.registeredObjects.isEmpty, "request \(index) left \(context.registeredObjects.count) objects")
                }
            }
            // The fetches of objects do make them (the counter sees a fetch).
            CountedPlayer.made.store(0, ordering: .relaxed)
            for (index, pair) in try Self.bothWays(context).enumerated() {
                #expect(pair.ids == pair.objects, "request \(index)")
                #expect(Set(pair.ids).count == pair.ids.count, "request \(index): each object once")
            }
            #expect(CountedPlayer.made.load(ordering: .relaxed) > 0)
            #expect(try context.fetchObjectIDs(FetchRequest(entityName: "Player")).count == 60)
            #expect(try context.fetchObjectIDs(Self.requests()[Self.ownOnlyIndex]).count == 54)
        }
    }

    static let ownOnlyIndex = 9
    /// The requests through a relationship (`team.name`) or with an in-memory filter.
    static let needObjects: Set<Int> = [4, 6, 10]

    @Test("with unsaved changes: inserts, updates that now match or no longer match, deletes — IDs equal fetch's, in a root and in a child context")
    func pendingChanges() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in try Self.fill(context) }
        let root = privateContext(coordinator)
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            let players = try context.fetch(FetchRequest(entityName: "Player", sortDescriptors: [FetchSortDescriptor(key: "name")]))
            players[0].setValue(Int64(99), forKey: "age")  // now matches age >= 30, sorts last by age
            players[1].setValue(Int64(1), forKey: "age")  // no longer matches age >= 30, sorts first
            players[2].setValue("zz", forKey: "name")
            context.delete(players[3])
            let new = try context.insertNewObject(forEntityName: "Player")
            new.setValue("new7", forKey: "name")
            new.setValue(Int64(31), forKey: "age")
            let newCaptain = try context.insertNewObject(forEntityName: "Captain")
            newCaptain.setValue("c", forKey: "name")
            newCaptain.setValue(Int64(50), forKey: "age")
            for (index, pair) in try Self.bothWays(context).enumerated() {
                #expect(pair.ids == pair.objects, "request \(index)")
            }
            let all = try context.fetchObjectIDs(FetchRequest(entityName: "Player"))
            #expect(all.count == 61)
            #expect(all.contains(new.objectID) && new.objectID.isTemporaryID)
            #expect(!all.contains(players[3].objectID))
        }
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: root)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let extra = try context.insertNewObject(forEntityName: "Player")
            extra.setValue("child", forKey: "name")
            extra.setValue(Int64(33), forKey: "age")
            for (index, pair) in try Self.bothWays(context).enumerated() {
                #expect(pair.ids == pair.objects, "child, request \(index)")
            }
            #expect(try context.fetchObjectIDs(FetchRequest(entityName: "Player")).count == 62)
        }
    }

    @Test("existingObjects(with:): the objects of existingObject(with:), in order, with nil for objects not in the store; unsaved, changed and registered objects as the context holds them; a child reads its parent")
    func existingObjectsInBatches() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in try Self.fill(context) }
        let (ids, names) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let players = try context.fetch(FetchRequest(entityName: "Player", sortDescriptors: [FetchSortDescriptor(key: "name", ascending: false)]))
            return (players.map(\.objectID), Dictionary(uniqueKeysWithValues: players.map { ($0.objectID, $0.value(forKey: "name") as? String ?? "") }))
        }
        let elsewhere = try await Self.temporaryIDElsewhere(coordinator)
        // Another context deletes two of them and saves.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: ids[5]))
            context.delete(try context.existingObject(with: ids[40]))
            try context.save()
        }
        let root = privateContext(coordinator)
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            let changed = try context.existingObject(with: ids[7])
            changed.setValue("changed", forKey: "name")
            let inserted = try context.insertNewObject(forEntityName: "Player")
            inserted.setValue("new", forKey: "name")
            // Shuffled, with a repeat, the unsaved insert and a registered changed object.
            var asked = ids.reversed() + [ids[3], inserted.objectID]
            asked.swapAt(0, 30)
            let found = try context.existingObjects(with: asked)
            #expect(found.count == asked.count)
            for (id, object) in zip(asked, found) {
                if id == ids[5] || id == ids[40] {
                    #expect(object == nil, "\(id) was deleted")
                    continue
                }
                let object = try #require(object, "\(id)")
                #expect(object.objectID == id)
                #expect(object === context.registeredObject(for: id))
                #expect(!object.isFault)
                #expect(object.value(forKey: "name") as? String == (id == ids[7] ? "changed" : id == inserted.objectID ? "new" : names[id]))
            }
            #expect(found[asked.count - 2] === found[asked.firstIndex(of: ids[3]) ?? 0])
            // existingObject(with:) agrees, one at a time.
            for (id, object) in zip(asked, found) where object != nil {
                #expect(try context.existingObject(with: id) === object)
            }
            #expect(try context.existingObjects(with: []).isEmpty)
            // An ID of another context's unsaved object is refused, naming it.
            #expect(throws: ContextError.self) { try context.existingObjects(with: [ids[0], elsewhere]) }
        }
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: root)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let found = try context.existingObjects(with: [ids[7], ids[5], ids[8]])
            #expect(found[0]?.value(forKey: "name") as? String == "changed", "the parent's unsaved value")
            #expect(found[1] == nil)
            #expect(found[2]?.value(forKey: "name") as? String == names[ids[8]])
        }
    }

    /// A temporary ID of an object inserted in another context.
    static func temporaryIDElsewhere(_ coordinator: PersistentStoreCoordinator) async throws -> ManagedObjectID {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Player").objectID
        }
    }
}
