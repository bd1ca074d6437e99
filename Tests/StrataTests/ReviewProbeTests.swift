import Foundation
import Strata
import StrataTestSupport
import Testing

/// Probes of how today's features meet: query generations, derived attributes and the
/// further context API (spec 0006 §22–24).
@Suite("Review probes: query generations, derived attributes, context API together")
struct ReviewProbeTests {
    /// A department "A" with Ada (10) and Bo (20), saved; returns the department's ID.
    static func departmentA(_ coordinator: PersistentStoreCoordinator) async throws -> ManagedObjectID {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            let department = try context.insertNewObject(forEntityName: "Department")
            department.setValue("A", forKey: "name")
            for (name, salary) in [("Ada", Decimal(10)), ("Bo", Decimal(20))] {
                let employee = try context.insertNewObject(forEntityName: "Employee")
                employee.setValue(name, forKey: "name")
                employee.setValue(salary, forKey: "salary")
                employee.setValue(department, forKey: "department")
            }
            try context.save()
            return department.objectID
        }
    }

    @Test("a pinned context reads derived values as of its generation: by ID, through the derived attribute's index, counted, and the employees behind them")
    func pinnedDerived() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        let departmentID = try await Self.departmentA(coordinator)
        let pinned = privateContext(coordinator)
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(.current)
            _ = try context.count(for: FetchRequest(entityName: "Department"))
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let employee = try context.insertNewObject(forEntityName: "Employee")
            employee.setValue("Cy", forKey: "name")
            employee.setValue(Decimal(30), forKey: "salary")
            employee.setValue(try context.existingObject(with: departmentID), forKey: "department")
            try context.existingObject(with: departmentID).setValue("B", forKey: "name")
            try context.save()
        }
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.existingObject(with: departmentID)
            #expect(department.value(forKey: "employeeCount") as? Int64 == 2)
            #expect(department.value(forKey: "totalSalary") as? Decimal == 30)
            #expect(department.value(forKey: "searchName") as? String == "a")
            #expect(((department.value(forKey: "employees") as? Set<ManagedObject>) ?? []).count == 2)
            let two = try FetchRequest(entityName: "Department", format: "employeeCount == 2")
            #expect(try context.fetch(two).map(\.objectID) == [departmentID])
            #expect(try context.count(for: two) == 1)
            let three = try FetchRequest(entityName: "Department", format: "employeeCount == 3")
            #expect(try context.fetch(three).isEmpty)
            #expect(try context.count(for: three) == 0)
            let named = try FetchRequest(entityName: "Department", format: "searchName == 'b'")
            #expect(try context.count(for: named) == 0)
            let employees = try FetchRequest(entityName: "Employee", format: "departmentName == 'A'")
            #expect(try context.count(for: employees) == 2)
        }
    }

    @Test("a pinned context finds objects by a uniqueness constraint's index as of its generation, sorted both ways, limited and offset")
    func pinnedUniqueScan() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await QueryGenerationTests.shop(dir)
        let pinned = privateContext(coordinator)
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(.current)
            _ = try context.count(for: FetchRequest(entityName: "Customer"))
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: try #require(ids["c3"])).setValue("a3@shop.example", forKey: "email")
            try context.existingObject(with: try #require(ids["c5"])).setValue("c0@shop.example", forKey: "email")
            context.delete(try context.existingObject(with: try #require(ids["c1"])))
            try context.save()
        }
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            let c3 = try FetchRequest(entityName: "Customer", format: "email == 'c3@shop.example'")
            #expect(try context.fetch(c3).map(\.objectID) == [try #require(ids["c3"])])
            #expect(try context.count(for: c3) == 1)
            let moved = try FetchRequest(entityName: "Customer", format: "email == 'a3@shop.example'")
            #expect(try context.fetch(moved).isEmpty)
            #expect(try context.count(for: moved) == 0)
            var all = try FetchRequest(entityName: "Customer", format: "email >= 'c'")
            all.sortDescriptors = [FetchSortDescriptor(key: "email")]
            #expect(QueryGenerationTests.names(try context.fetch(all)) == ["c1", "c2", "c3", "c4", "c5"])
            all.sortDescriptors = [FetchSortDescriptor(key: "email", ascending: false)]
            all.fetchLimit = 2
            #expect(QueryGenerationTests.names(try context.fetch(all)) == ["c5", "c4"])
            all.fetchOffset = 1
            #expect(QueryGenerationTests.names(try context.fetch(all)) == ["c4", "c3"])
            #expect(try context.count(for: all) == 2)
            all.fetchOffset = 4
            #expect(try context.count(for: all) == 1)
        }
    }

    @Test("a persisted-undo context, after a restart, undoes and redoes a saved insert of a department and its employees; the derived values are computed again")
    func persistedUndoInsertRedo() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.derivedAttributes
        var coordinator = try openCoordinator(dir, model: model)
        let departmentID = try await privateContext(coordinator, name: "editor", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            let department = try context.insertNewObject(forEntityName: "Department")
            department.setValue("Lab", forKey: "name")
            let employee = try context.insertNewObject(forEntityName: "Employee")
            employee.setValue("Ida", forKey: "name")
            employee.setValue(Decimal(10), forKey: "salary")
            employee.setValue(department, forKey: "department")
            try context.save()
            return department.objectID
        }
        coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator, name: "editor", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Department")) == 0)
        }
        coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator, name: "editor", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            let canRedo = context.canRedo
            #expect(canRedo)
            try context.redo()
            try context.save()
            let department = try context.existingObject(with: departmentID)
            #expect(department.value(forKey: "employeeCount") as? Int64 == 1)
            #expect(department.value(forKey: "searchName") as? String == "lab")
        }
        coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator, name: "editor", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()  // the redo
            try context.save()
            try context.undo()  // the original insert, again? (already undone: nothing left)
            try context.save()
        }
    }

    @Test("a pinned context over sub-entities sharing inherited indexes: index walks (both ways, limited), counts, entity scans with and without sub-entities, and a to-many side over the sub-entities, as of its generation")
    func pinnedSubentities() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.catalog)
        // rank: i1 1, g2 2, z3 3, i4 4, g5 5, z6 6 (i: Item, g: Gadget, z: Gizmo), all in group G.
        let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [String: ManagedObjectID] in
            let group = try context.insertNewObject(forEntityName: "Group")
            group.setValue("G", forKey: "title")
            var made: [String: ManagedObjectID] = [:]
            var objects: [ManagedObject] = [group]
            for (n, entity) in ["Item", "Gadget", "Gizmo", "Item", "Gadget", "Gizmo"].enumerated() {
                let object = try context.insertNewObject(forEntityName: entity)
                let name = "\(entity.prefix(1).lowercased() == "g" && entity == "Gizmo" ? "z" : entity.prefix(1).lowercased())\(n + 1)"
                object.setValue(name, forKey: "name")
                object.setValue(name, forKey: "code")
                object.setValue(Int16(n + 1), forKey: "rank")
                object.setValue(group, forKey: "group")
                objects.append(object)
            }
            try context.save()
            for object in objects { made[(object.value(forKey: "name") as? String) ?? "G"] = object.objectID }
            return made
        }
        let pinned = privateContext(coordinator)
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(.current)
            _ = try context.count(for: FetchRequest(entityName: "Item"))
        }
        // Later: g2 to rank 60, z3 deleted, a new gizmo z7 at rank 0, i4 to rank 50, z6 leaves the group.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: try #require(ids["g2"])).setValue(Int16(60), forKey: "rank")
            context.delete(try context.existingObject(with: try #require(ids["z3"])))
            let z7 = try context.insertNewObject(forEntityName: "Gizmo")
            z7.setValue("z7", forKey: "name")
            z7.setValue("z7", forKey: "code")
            z7.setValue(Int16(0), forKey: "rank")
            z7.setValue(try context.existingObject(with: try #require(ids["G"])), forKey: "group")
            try context.existingObject(with: try #require(ids["i4"])).setValue(Int16(50), forKey: "rank")
            try context.existingObject(with: try #require(ids["z6"])).setValue(nil, forKey: "group")
            try context.existingObject(with: try #require(ids["g5"])).setValue("a5", forKey: "code")
            try context.save()
        }
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            let names = { (request: FetchRequest<ManagedObject>) throws -> [String] in QueryGenerationTests.names(try context.fetch(request)) }
            var gadgets = try FetchRequest(entityName: "Gadget", format: "rank >= 0")
            gadgets.sortDescriptors = [FetchSortDescriptor(key: "rank")]
            #expect(try names(gadgets) == ["g2", "z3", "g5", "z6"])
            #expect(try context.count(for: gadgets) == 4)
            gadgets.sortDescriptors = [FetchSortDescriptor(key: "rank", ascending: false)]
            gadgets.fetchLimit = 2
            #expect(try names(gadgets) == ["z6", "g5"])
            var items = try FetchRequest(entityName: "Item", format: "rank < 5")
            items.sortDescriptors = [FetchSortDescriptor(key: "rank")]
            #expect(try names(items) == ["i1", "g2", "z3", "i4"])
            items.includesSubentities = false
            #expect(try names(items) == ["i1", "i4"])
            #expect(try context.count(for: items) == 2)
            var gizmos = FetchRequest(entityName: "Gizmo", sortDescriptors: [FetchSortDescriptor(key: "name")])
            #expect(try names(gizmos) == ["z3", "z6"])
            gizmos.predicate = try FormatPredicate(format: "rank > 100")
            #expect(try context.count(for: gizmos) == 0)
            let byCode = try FetchRequest(entityName: "Gadget", format: "code == 'g5'")
            #expect(try names(byCode) == ["g5"])
            let group = try context.existingObject(with: try #require(ids["G"]))
            let members = ((group.value(forKey: "items") as? Set<ManagedObject>) ?? []).compactMap { $0.value(forKey: "name") as? String }.sorted()
            #expect(members == ["g2", "g5", "i1", "i4", "z3", "z6"])
            var sum = FetchRequest(entityName: "Gadget")
            sum.resultType = .dictionary
            sum.propertiesToFetch = [.expression(name: "total", .sum, keyPath: "rank")]
            let dictionaries = try context.fetchDictionaries(sum)
            #expect((dictionaries.first?["total"] as? Int64).map { Int($0) } ?? (dictionaries.first?["total"] as? Int) == 16)
        }
    }

    @Test("a loaded object refetched with shouldRefreshRefetchedObjects in a pinned context keeps the generation's values")
    func pinnedRefreshRefetched() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await QueryGenerationTests.shop(dir)
        let pinned = privateContext(coordinator)
        let c3ID = try #require(ids["c3"])
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(.current)
            context.retainsRegisteredObjects = true
            #expect(try context.existingObject(with: c3ID).value(forKey: "age") as? Int32 == 40)
        }
        _ = try await QueryGenerationTests.changeEverything(coordinator, ids)
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            var request = QueryGenerationTests.byName()
            request.shouldRefreshRefetchedObjects = true
            let fetched = try context.fetch(request)
            #expect(QueryGenerationTests.names(fetched) == ["c1", "c2", "c3", "c4", "c5"])
            let c3 = try context.existingObject(with: c3ID)
            #expect(c3.value(forKey: "age") as? Int32 == 40)
            context.refreshAllObjects()
            #expect(c3.value(forKey: "age") as? Int32 == 40)
            context.refresh(c3, mergeChanges: false)
            #expect(c3.value(forKey: "age") as? Int32 == 40)
        }
    }

    @Test("propagatesDeletesAtEndOfEvent off in a child context: the child's save cascades into its parent, whose save stores it")
    func deferredDeletesInChild() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let teamID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            team.setValue("blue", forKey: "uniformColor")
            for name in ["Ada", "Bea"] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(name, forKey: "firstName")
                player.setValue(team, forKey: "team")
            }
            try context.save()
            return team.objectID
        }
        let parent = privateContext(coordinator)
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.propagatesDeletesAtEndOfEvent = false
            context.delete(try context.existingObject(with: teamID))
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 2)
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 0)
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 0)
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 0)
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 0)
        }
    }

    @Test("propagatesDeletesAtEndOfEvent off: a merge of another context's delete of a cascaded player, arriving before the save, leaves the save to cascade to the rest")
    func deferredDeletesAfterMerge() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (teamID, players) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> (ManagedObjectID, [ManagedObjectID]) in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            team.setValue("blue", forKey: "uniformColor")
            var players: [ManagedObject] = []
            for name in ["Ada", "Bea", "Cy"] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(name, forKey: "firstName")
                player.setValue(team, forKey: "team")
                players.append(player)
            }
            try context.save()
            return (team.objectID, players.map(\.objectID))
        }
        let deleter = privateContext(coordinator)
        try await deleter.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            context.propagatesDeletesAtEndOfEvent = false
            let team = try context.existingObject(with: teamID)
            #expect(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).count == 3)
            context.delete(team)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: players[0]))
            let other = try context.insertNewObject(forEntityName: "Team")
            other.setValue("Herons", forKey: "name")
            other.setValue("red", forKey: "uniformColor")
            try context.existingObject(with: players[1]).setValue(other, forKey: "team")
            try context.save()
        }
        try await deleter.perform { (context: isolated ManagedObjectContext) throws in
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let left = try context.fetch(FetchRequest(entityName: "Player")).compactMap { $0.value(forKey: "firstName") as? String }
            #expect(left == ["Bea"], "Bea moved to the Herons before the save; Ada was deleted elsewhere; Cy cascaded")
        }
    }

    @Test("retainsRegisteredObjects: an inserted object the app drops after the save is still registered under its permanent ID, the same instance")
    func retainsAcrossIDChange() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            var identity: ObjectIdentifier?
            var permanent: ManagedObjectID?
            do {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Otters", forKey: "name")
                team.setValue("blue", forKey: "uniformColor")
                identity = ObjectIdentifier(team)
                try context.save()
                permanent = team.objectID
            }
            let id = try #require(permanent)
            #expect(!id.isTemporaryID)
            let registered = context.registeredObject(for: id)
            let found = try #require(registered)
            #expect(ObjectIdentifier(found) == identity)
            #expect(found.value(forKey: "name") as? String == "Otters")
        }
    }

    @Test("a store with derived attributes verifies clean after its events are compacted into segments, and a context pinned before them reads its generation through the segments")
    func compactedDerivedVerifies() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.derivedAttributes
        var coordinator = try openCoordinator(dir, model: model)
        let departmentID = try await Self.departmentA(coordinator)
        let pinned = privateContext(coordinator)
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(.current)
            _ = try context.count(for: FetchRequest(entityName: "Department"))
        }
        let editor = privateContext(coordinator)
        for round in 0..<6 {
            try await editor.perform { (context: isolated ManagedObjectContext) throws in
                let department = try context.existingObject(with: departmentID)
                let employee = try context.insertNewObject(forEntityName: "Employee")
                employee.setValue("E\(round)", forKey: "name")
                employee.setValue(Decimal(round * 5), forKey: "salary")
                employee.setValue(department, forKey: "department")
                department.setValue("Dept \(round)", forKey: "name")
                try context.save()
                if round == 3 {
                    try context.undo()
                    try context.save()
                }
            }
        }
        let log = coordinator.persistentStores[0].log
        _ = try log.compact(CompactionRequest(before: try log.head + 1))
        #expect(try log.metadata.compactedThrough > 1)
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: departmentID))
            try context.save()
        }
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.existingObject(with: departmentID)
            #expect(department.value(forKey: "employeeCount") as? Int64 == 2)
            #expect(department.value(forKey: "searchName") as? String == "a")
            #expect(try context.count(for: try FetchRequest(entityName: "Department", format: "employeeCount == 2")) == 1)
        }
        #expect(try log.verify().isClean)
        coordinator = try openCoordinator(dir, model: model)
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    @Test("a pinned context reads an ordered to-many in its generation's order, and each member's to-one back, after another context reorders, removes and adds members; a batch delete under it changes nothing it reads")
    func pinnedOrdered() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let (playlistID, songIDs) = try await privateContext(coordinator).perform {
            (context: isolated ManagedObjectContext) throws -> (ManagedObjectID, [ManagedObjectID]) in
            let playlist = try context.insertNewObject(forEntityName: "Playlist")
            playlist.setValue("Mix", forKey: "name")
            var songs: [ManagedObject] = []
            for title in ["s1", "s2", "s3", "s4"] {
                let song = try context.insertNewObject(forEntityName: "Song")
                song.setValue(title, forKey: "title")
                songs.append(song)
            }
            playlist.setValue(songs, forKey: "songs")
            try context.save()
            return (playlist.objectID, songs.map(\.objectID))
        }
        let pinned = privateContext(coordinator)
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(.current)
            _ = try context.count(for: FetchRequest(entityName: "Song"))
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let playlist = try context.existingObject(with: playlistID)
            let songs = try songIDs.map { try context.existingObject(with: $0) }
            let s5 = try context.insertNewObject(forEntityName: "Song")
            s5.setValue("s5", forKey: "title")
            playlist.setValue([songs[3], s5, songs[0], songs[2]], forKey: "songs")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Song", format: "title == 's2'")))
        }
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            let playlist = try context.existingObject(with: playlistID)
            let titles = ((playlist.value(forKey: "songs") as? [ManagedObject]) ?? []).compactMap { $0.value(forKey: "title") as? String }
            #expect(titles == ["s1", "s2", "s3", "s4"])
            #expect(try playlist.objectIDs(forRelationshipNamed: "songs") == songIDs)
            let s2 = try context.existingObject(with: songIDs[1])
            #expect((s2.value(forKey: "playlist") as? ManagedObject)?.objectID == playlistID)
            #expect(try context.count(for: FetchRequest(entityName: "Song")) == 4)
            let inPlaylist = try FetchRequest(entityName: "Song", format: "playlist != nil")
            #expect(try context.count(for: inPlaylist) == 4)
        }
    }

    @Test("a fetched results controller in a pinned, automatically merging context follows the merged saves (the generation moves with them), sorted by a derived attribute")
    func pinnedControllerFollowsMerges() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        let departmentID = try await Self.departmentA(coordinator)
        let viewer = privateContext(coordinator)
        final class Holder: @unchecked Sendable {
            var controller: FetchedResultsController<ManagedObject>?
            var delegate: RecordingDelegate?
        }
        let holder = Holder()
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            try context.setQueryGenerationFrom(.current)
            let request = FetchRequest(entityName: "Department", sortDescriptors: [FetchSortDescriptor(key: "employeeCount", ascending: false)])
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            try controller.performFetch()
            #expect(controller.fetchedObjects?.map(\.objectID) == [departmentID])
            holder.controller = controller
            let delegate = RecordingDelegate(mirroring: controller)
            controller.delegate = delegate
            holder.delegate = delegate
        }
        let otherID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            let other = try context.insertNewObject(forEntityName: "Department")
            other.setValue("Z", forKey: "name")
            for name in ["P", "Q", "R"] {
                let employee = try context.insertNewObject(forEntityName: "Employee")
                employee.setValue(name, forKey: "name")
                employee.setValue(other, forKey: "department")
            }
            try context.save()
            return other.objectID
        }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            context.processPendingChanges()
            let token = context.queryGenerationToken
            #expect(token?.sequence == 2)
            let fetched = holder.controller?.fetchedObjects?.map(\.objectID)
            #expect(fetched == [otherID, departmentID])
            let problems = holder.delegate?.problems ?? []
            #expect(problems.isEmpty, "\(problems)")
            #expect(try context.existingObject(with: otherID).value(forKey: "employeeCount") as? Int64 == 3)
        }
    }

    /// Departments and employees, with managers a sub-entity of employees that inherits the
    /// employees' derived attributes and declares one of its own through an inherited relationship.
    static var inheritedDerivations: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Department") {
                    Attribute("name", .string)
                    Attribute("headcount", .int64).derived(from: "employees.@count").indexed()
                    Attribute("payroll", .int64).derived(from: "employees.@sum.salary")
                    Relationship("employees", to: "Employee", inverse: "department", toMany: true)
                }
                Entity("Employee") {
                    Attribute("name", .string)
                    Attribute("salary", .int64)
                    Attribute("departmentName", .string).derived(from: "department.name").indexed()
                    Relationship("department", to: "Department", inverse: "employees")
                }
                Entity("Manager", parent: "Employee") {
                    Attribute("label", .string).derived(from: "uppercase(department.name)")
                }
            }
        }
    }

    @Test("a sub-entity inherits derived attributes and declares its own through an inherited relationship: computed at insert, when the department is renamed, and in the department's aggregates")
    func inheritedDerived() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.inheritedDerivations)
        let (first, second, managerID) = try await privateContext(coordinator).perform {
            (context: isolated ManagedObjectContext) throws -> (ManagedObjectID, ManagedObjectID, ManagedObjectID) in
            let first = try context.insertNewObject(forEntityName: "Department")
            first.setValue("Ops", forKey: "name")
            let second = try context.insertNewObject(forEntityName: "Department")
            second.setValue("Lab", forKey: "name")
            let employee = try context.insertNewObject(forEntityName: "Employee")
            employee.setValue("Eve", forKey: "name")
            employee.setValue(Int64(10), forKey: "salary")
            employee.setValue(first, forKey: "department")
            let manager = try context.insertNewObject(forEntityName: "Manager")
            manager.setValue("Max", forKey: "name")
            manager.setValue(Int64(100), forKey: "salary")
            manager.setValue(first, forKey: "department")
            try context.save()
            #expect(first.value(forKey: "headcount") as? Int64 == 2)
            #expect(first.value(forKey: "payroll") as? Int64 == 110)
            #expect(manager.value(forKey: "departmentName") as? String == "Ops")
            #expect(manager.value(forKey: "label") as? String == "OPS")
            return (first.objectID, second.objectID, manager.objectID)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: first).setValue("Operations", forKey: "name")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let manager = try context.existingObject(with: managerID)
            #expect(manager.value(forKey: "departmentName") as? String == "Operations")
            #expect(manager.value(forKey: "label") as? String == "OPERATIONS")
            manager.setValue(try context.existingObject(with: second), forKey: "department")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: first).value(forKey: "headcount") as? Int64 == 1)
            #expect(try context.existingObject(with: first).value(forKey: "payroll") as? Int64 == 10)
            #expect(try context.existingObject(with: second).value(forKey: "payroll") as? Int64 == 100)
            let manager = try context.existingObject(with: managerID)
            #expect(manager.value(forKey: "label") as? String == "LAB")
            let inLab = try FetchRequest(entityName: "Employee", format: "departmentName == 'Lab'")
            #expect(try context.fetch(inLab).map(\.objectID) == [managerID])
            let managersInLab = try FetchRequest(entityName: "Manager", format: "departmentName == 'Lab'")
            #expect(try context.count(for: managersInLab) == 1)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    @Test("batch update and batch delete of employees recompute their departments' derived values; a batch insert computes the new objects'")
    func batchRequestsRecompute() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.inheritedDerivations)
        let departmentID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            let department = try context.insertNewObject(forEntityName: "Department")
            department.setValue("Ops", forKey: "name")
            for (name, salary) in [("A", Int64(1)), ("B", Int64(2)), ("C", Int64(4))] {
                let employee = try context.insertNewObject(forEntityName: name == "C" ? "Manager" : "Employee")
                employee.setValue(name, forKey: "name")
                employee.setValue(salary, forKey: "salary")
                employee.setValue(department, forKey: "department")
            }
            try context.save()
            return department.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var update = BatchUpdateRequest(entityName: "Employee")
            update.propertiesToUpdate = ["salary": Int64(10)]
            _ = try context.execute(update)
            #expect(try context.existingObject(with: departmentID).value(forKey: "payroll") as? Int64 == 30)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Employee", format: "name != 'A'")))
            let department = try context.existingObject(with: departmentID)
            #expect(department.value(forKey: "payroll") as? Int64 == 10)
            #expect(department.value(forKey: "headcount") as? Int64 == 1)
            _ = try context.execute(BatchInsertRequest(entityName: "Department", objects: [["name": "New"]]))
            let new = try context.fetch(try FetchRequest(entityName: "Department", format: "name == 'New'"))
            #expect(new.first?.value(forKey: "headcount") as? Int64 == 0)
            #expect(new.first?.value(forKey: "payroll") as? Int64 == 0)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    @Test("derived aggregates over both sides of a many-to-many and over an ordered to-many follow adds, removals, reorders and deletes")
    func manyToManyDerived() async throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Article") {
                Attribute("title", .string)
                Attribute("words", .int64)
                Attribute("tagCount", .int64).derived(from: "tags.@count")
                Relationship("tags", to: "Tag", inverse: "articles", toMany: true)
                Relationship("issue", to: "Issue", inverse: "articles")
            }
            Entity("Tag") {
                Attribute("name", .string)
                Attribute("articleCount", .int64).derived(from: "articles.@count")
                Attribute("totalWords", .int64).derived(from: "articles.@sum.words")
                Relationship("articles", to: "Article", inverse: "tags", toMany: true)
            }
            Entity("Issue") {
                Attribute("longest", .int64).derived(from: "articles.@max.words")
                Relationship("articles", to: "Article", inverse: "issue", toMany: true, ordered: true)
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let swift = try context.insertNewObject(forEntityName: "Tag")
            swift.setValue("swift", forKey: "name")
            let linux = try context.insertNewObject(forEntityName: "Tag")
            linux.setValue("linux", forKey: "name")
            let issue = try context.insertNewObject(forEntityName: "Issue")
            var articles: [ManagedObject] = []
            for (title, words) in [("a", Int64(100)), ("b", Int64(300)), ("c", Int64(200))] {
                let article = try context.insertNewObject(forEntityName: "Article")
                article.setValue(title, forKey: "title")
                article.setValue(words, forKey: "words")
                articles.append(article)
            }
            issue.setValue(articles, forKey: "articles")
            for tag in [swift, linux] { articles[0].mutableSetValue(forKey: "tags").add(tag) }
            articles[1].mutableSetValue(forKey: "tags").add(swift)
            try context.save()
            #expect(swift.value(forKey: "articleCount") as? Int64 == 2)
            #expect(swift.value(forKey: "totalWords") as? Int64 == 400)
            #expect(linux.value(forKey: "articleCount") as? Int64 == 1)
            #expect(articles[0].value(forKey: "tagCount") as? Int64 == 2)
            #expect(issue.value(forKey: "longest") as? Int64 == 300)

            // From the tag's side: the articles' counts follow.
            for article in [articles[1], articles[2]] { linux.mutableSetValue(forKey: "articles").add(article) }
            swift.mutableSetValue(forKey: "articles").remove(articles[0])
            articles[1].setValue(Int64(50), forKey: "words")
            issue.setValue([articles[2], articles[0]], forKey: "articles")
            try context.save()
            #expect(articles[0].value(forKey: "tagCount") as? Int64 == 1)
            #expect(articles[1].value(forKey: "tagCount") as? Int64 == 2)
            #expect(articles[2].value(forKey: "tagCount") as? Int64 == 1)
            #expect(swift.value(forKey: "totalWords") as? Int64 == 50)
            #expect(linux.value(forKey: "totalWords") as? Int64 == 350)
            #expect(issue.value(forKey: "longest") as? Int64 == 200)

            context.delete(articles[2])
            try context.save()
            #expect(linux.value(forKey: "articleCount") as? Int64 == 2)
            #expect(linux.value(forKey: "totalWords") as? Int64 == 150)
            #expect(issue.value(forKey: "longest") as? Int64 == 100)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    @Test("retainsRegisteredObjects in a child context: an object it inserted, pushed to the parent and dropped keeps its instance when the parent's save makes its ID permanent")
    func retainsInChildAcrossParentSave() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let parent = privateContext(coordinator)
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        final class Box: @unchecked Sendable { var identity: ObjectIdentifier? }
        let box = Box()
        let temporary = try await child.perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            context.retainsRegisteredObjects = true
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            team.setValue("blue", forKey: "uniformColor")
            box.identity = ObjectIdentifier(team)
            try context.save()
            return team.objectID
        }
        #expect(temporary.isTemporaryID)
        let permanent = try await parent.perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            try context.save()
            let found = try context.fetch(FetchRequest(entityName: "Team"))
            return try #require(found.first?.objectID)
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let registered = context.registeredObject(for: permanent)
            let team = try #require(registered)
            #expect(ObjectIdentifier(team) == box.identity)
            #expect(team.objectID == permanent)
            #expect(team.value(forKey: "name") as? String == "Otters")
        }
    }

    @Test("a pinned context's index walks for nil and non-nil values, and string ranges, see each object's value as of its generation")
    func pinnedNilIndex() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.catalog)
        let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [ManagedObjectID] in
            var objects: [ManagedObject] = []
            for n in 0..<6 {
                let item = try context.insertNewObject(forEntityName: n % 2 == 0 ? "Item" : "Gizmo")
                item.setValue("n\(n)", forKey: "name")
                if n < 3 { item.setValue(Int16(n), forKey: "rank") }
                objects.append(item)
            }
            try context.save()
            return objects.map(\.objectID)
        }
        let pinned = privateContext(coordinator)
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(.current)
            _ = try context.count(for: FetchRequest(entityName: "Item"))
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: ids[1]).setValue(nil, forKey: "rank")
            try context.existingObject(with: ids[4]).setValue(Int16(9), forKey: "rank")
            try context.existingObject(with: ids[5]).setValue("a5", forKey: "name")
            try context.existingObject(with: ids[0]).setValue("z0", forKey: "name")
            try context.save()
        }
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            let names = { (request: FetchRequest<ManagedObject>) throws -> [String] in QueryGenerationTests.names(try context.fetch(request)) }
            var nilRank = try FetchRequest(entityName: "Item", format: "rank == nil")
            nilRank.sortDescriptors = [FetchSortDescriptor(key: "name")]
            #expect(try names(nilRank) == ["n3", "n4", "n5"])
            #expect(try context.count(for: nilRank) == 3)
            var ranked = try FetchRequest(entityName: "Item", format: "rank != nil")
            ranked.sortDescriptors = [FetchSortDescriptor(key: "rank", ascending: false)]
            #expect(try names(ranked) == ["n2", "n1", "n0"])
            #expect(try context.count(for: ranked) == 3)
            var byName = try FetchRequest(entityName: "Item", format: "name BEGINSWITH 'n'")
            byName.sortDescriptors = [FetchSortDescriptor(key: "name", ascending: false)]
            byName.fetchLimit = 3
            #expect(try names(byName) == ["n5", "n4", "n3"])
            #expect(try context.count(for: try FetchRequest(entityName: "Item", format: "name < 'b'")) == 0)
            #expect(try context.count(for: try FetchRequest(entityName: "Gizmo", format: "name BEGINSWITH 'n'")) == 3)
        }
    }

    /// Each person's kept report count and pay sum against a fresh count of its reports.
    static func checkReports(_ context: isolated ManagedObjectContext) throws {
        for person in try context.fetch(FetchRequest(entityName: "Person")) {
            let reports = (person.value(forKey: "reports") as? Set<ManagedObject>) ?? []
            let name = person.value(forKey: "name") as? String ?? "?"
            #expect(person.value(forKey: "reportCount") as? Int64 == Int64(reports.count), "\(name)")
            #expect(person.value(forKey: "reportPay") as? Int64 == reports.reduce(0) { $0 + (($1.value(forKey: "pay") as? Int64) ?? 0) }, "\(name)")
        }
    }

    @Test("a kept @count and @sum over a self-referential one-to-many (managers and their reports) follow inserts, moves, value changes and deletes, matching a fresh count")
    func selfReferentialKeptAggregates() async throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Person") {
                Attribute("name", .string)
                Attribute("pay", .int64)
                Attribute("reportCount", .int64).derived(from: "reports.@count")
                Attribute("reportPay", .int64).derived(from: "reports.@sum.pay")
                Relationship("manager", to: "Person", inverse: "reports")
                Relationship("reports", to: "Person", inverse: "manager", toMany: true)
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var people: [ManagedObject] = []
            for n in 0..<6 {
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue("p\(n)", forKey: "name")
                person.setValue(Int64(n * 10), forKey: "pay")
                if n > 0 { person.setValue(people[(n - 1) / 2], forKey: "manager") }
                people.append(person)
            }
            try context.save()
        }
        for round in 0..<5 {
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let people = try context.fetch(FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(key: "name")]))
                guard people.count > 2 else { return }
                let mover = people[(round * 3 + 2) % people.count]
                let target = people[(round * 5) % people.count]
                if mover !== target { mover.setValue(target, forKey: "manager") }
                people[round % people.count].setValue(Int64(round * 7 + 1), forKey: "pay")
                if round == 2 { context.delete(people[1]) }
                if round == 3 {
                    let newcomer = try context.insertNewObject(forEntityName: "Person")
                    newcomer.setValue("q\(round)", forKey: "name")
                    newcomer.setValue(Int64(99), forKey: "pay")
                    newcomer.setValue(people[0], forKey: "manager")
                }
                try context.save()
                if round == 4 {
                    try context.undo()
                    try context.save()
                }
            }
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in try Self.checkReports(context) }
        }
    }
}
