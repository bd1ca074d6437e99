import Foundation
import Strata
import StrataTestSupport
import Testing

/// Review of batch requests, derived attributes, fetched properties and fetch request
/// templates (session 26): each test names the behaviour it checks against Core Data's
/// documented semantics or Strata's specs (0006 §20, §24; 0008 "Fetched properties and templates").
@Suite("Batch requests, derived attributes, fetched properties and templates (review)")
struct BatchDerivedReviewTests {
    func log(_ coordinator: PersistentStoreCoordinator) -> EventLog { coordinator.persistentStores[0].log }

    /// A department "Sales" with three employees (salaries 100, 200, 300), saved; the IDs.
    func salesStore(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, ManagedObjectID, [ManagedObjectID]) {
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        let (department, employees) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.insertNewObject(forEntityName: "Department")
            department.setValue("Sales", forKey: "name")
            var people: [ManagedObject] = []
            for (name, salary) in [("Ada", 100), ("Bo", 200), ("Cy", 300)] {
                let employee = try context.insertNewObject(forEntityName: "Employee")
                employee.setValue(name, forKey: "name")
                employee.setValue(Decimal(salary), forKey: "salary")
                employee.setValue(department, forKey: "department")
                people.append(employee)
            }
            try context.save()
            return (department.objectID, people.map(\.objectID))
        }
        return (coordinator, department, employees)
    }

    /// The values of `keys` of object `id`, read by a fresh context.
    func values(_ keys: [String], of id: ManagedObjectID, _ coordinator: PersistentStoreCoordinator) async throws -> [String: String] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let object = try context.existingObject(with: id)
            var result: [String: String] = [:]
            for key in keys { result[key] = object.value(forKey: key).map { "\($0)" } ?? "nil" }
            return result
        }
    }

    // MARK: - Derived attributes after batch requests

    @Test("batch update and batch delete of employees recompute their department's aggregates in the same import transaction; verify clean")
    func batchChangesRecomputeAggregates() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, department, _) = try await salesStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var update = BatchUpdateRequest(entityName: "Employee")
            update.predicate = try FormatPredicate(format: "name == %@", "Ada")
            update.propertiesToUpdate = ["salary": Decimal(400)]
            _ = try context.execute(update)
        }
        #expect(try await values(["employeeCount", "totalSalary", "lowestSalary", "highestSalary"], of: department, coordinator)
            == ["employeeCount": "3", "totalSalary": "900", "lowestSalary": "200", "highestSalary": "400"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Employee", format: "salary > %@", Decimal(250))))
        }
        #expect(try await values(["employeeCount", "totalSalary", "averageSalary"], of: department, coordinator)
            == ["employeeCount": "1", "totalSalary": "200", "averageSalary": "200"])
        #expect(try log(coordinator).verify().isClean)
    }

    @Test("a batch rename of a department recomputes its canonical name and its employees' department names; a batch delete of it (nullify) gives them nil")
    func batchChangesRecomputeKeyPaths() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, department, employees) = try await salesStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var update = BatchUpdateRequest(entityName: "Department")
            update.propertiesToUpdate = ["name": "Ventes Générales"]
            _ = try context.execute(update)
        }
        #expect(try await values(["searchName"], of: department, coordinator) == ["searchName": "ventes generales"])
        #expect(try await values(["departmentName", "departmentSearchName"], of: employees[0], coordinator)
            == ["departmentName": "Ventes Générales", "departmentSearchName": "ventes generales"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchDeleteRequest(objectIDs: [department]))
        }
        #expect(try await values(["departmentName", "departmentSearchName"], of: employees[2], coordinator)
            == ["departmentName": "nil", "departmentSearchName": "nil"])
        #expect(try log(coordinator).verify().isClean)
    }

    @Test("a batch insert computes the new objects' derived values: count 0, sum 0, canonical name, now() the transaction's time")
    func batchInsertComputesDerived() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        let result = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = BatchInsertRequest(entityName: "Department", objects: [["name": "Études"]])
            request.resultType = .objectIDs
            return try context.execute(request)
        }
        let id = try #require(result.objectIDs?.first)
        let sequence = try #require(result.sequence)
        let timestamp = try log(coordinator).read { try $0.event(sequence) }.timestamp
        let read = try await values(["employeeCount", "totalSalary", "searchName", "averageSalary"], of: id, coordinator)
        #expect(read == ["employeeCount": "0", "totalSalary": "0", "searchName": "etudes", "averageSalary": "nil"])
        let saved = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: id).value(forKey: "lastSaved") as? Date
        }
        #expect(saved == timestamp)
    }

    @Test("a batch update whose values equal the stored ones writes no transaction (no empty event), though the result names the objects")
    func batchUpdateChangingNothingWritesNothing() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, employees) = try await salesStore(dir)
        let head = try log(coordinator).read { try $0.head }
        let result = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var update = BatchUpdateRequest(entityName: "Employee")
            update.predicate = try FormatPredicate(format: "name == %@", "Ada")
            update.propertiesToUpdate = ["salary": Decimal(100)]
            update.resultType = .objectIDs
            return try context.execute(update)
        }
        #expect(result.objectIDs == [employees[0]])
        #expect(try log(coordinator).read { try $0.head } == head, "nothing changed, so nothing was written")
        #expect(result.sequence == nil)
    }

    // MARK: - Reverting a batch

    @Test("reverting a batch delete that nullified employees brings the department back, its employees with it, and recomputes the derived values")
    func revertBatchDelete() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, department, employees) = try await salesStore(dir)
        let sequence = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try #require(try context.execute(BatchDeleteRequest(objectIDs: [department])).sequence)
        }
        let store = try #require(coordinator.persistentStores.first)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: HistoryToken(storeIdentifier: store.identifier, sequence: sequence))
            try context.save()
        }
        #expect(try await values(["name", "employeeCount", "totalSalary", "searchName"], of: department, coordinator)
            == ["name": "Sales", "employeeCount": "3", "totalSalary": "600", "searchName": "sales"])
        #expect(try await values(["departmentName"], of: employees[1], coordinator) == ["departmentName": "Sales"])
        #expect(try log(coordinator).verify().isClean)
    }

    // MARK: - Fetched properties and templates

    /// Teams and players, with fetched properties reading `$FETCH_SOURCE` and `$FETCHED_PROPERTY`,
    /// and a template taking a team.
    static var league: ManagedObjectModel {
        get throws {
            var keepers = FetchedProperty("keepers", entity: "Player", predicate: "team == $FETCH_SOURCE AND position == $FETCHED_PROPERTY.userInfo.position")
            keepers.userInfo = ["position": "keeper"]
            return try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Attribute("division", .string)
                    Relationship("players", to: "Player", inverse: "team", toMany: true)
                    keepers
                    FetchedProperty("namesakes", entity: "Player", predicate: "nickname == $FETCH_SOURCE.name")
                    FetchedProperty("byProperty", entity: "Player", predicate: "nickname == $FETCHED_PROPERTY.name")
                }
                Entity("Player") {
                    Attribute("nickname", .string)
                    Attribute("age", .int16)
                    Attribute("position", .string)
                    Relationship("team", to: "Team", inverse: "players")
                }
                FetchRequestTemplate("playersOf", entity: "Player", predicate: "team == $TEAM AND age < $AGE")
                FetchRequestTemplate("youngerThan", entity: "Player", predicate: "age < $AGE")
            }
        }
    }

    @Test("a fetched property's predicate reads $FETCHED_PROPERTY as the description (its name and userInfo), as Core Data's does, and $FETCH_SOURCE's attributes")
    func fetchedPropertyVariables() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.league)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Reds", forKey: "name")
            for (nickname, age) in [("Reds", 25), ("byProperty", 31), ("Cy", 45)] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(nickname, forKey: "nickname")
                player.setValue(age > 30 ? "keeper" : "forward", forKey: "position")
                player.setValue(Int16(age), forKey: "age")
                player.setValue(team, forKey: "team")
            }
            try context.save()
            let namesakes = (team.value(forKey: "namesakes") as? [ManagedObject])?.compactMap { $0.value(forKey: "nickname") as? String }
            #expect(namesakes == ["Reds"])
            let byProperty = (team.value(forKey: "byProperty") as? [ManagedObject])?.compactMap { $0.value(forKey: "nickname") as? String }
            #expect(byProperty == ["byProperty"])
            let keepers = (team.value(forKey: "keepers") as? [ManagedObject])?.compactMap { $0.value(forKey: "age") as? Int16 }
            #expect(keepers?.sorted() == [31, 45], "userInfo.position read through $FETCHED_PROPERTY")
            #expect(context.hasChanges == false)
            try context.save()
        }
    }

    @Test("a template taking a managed object: fetchRequestFromTemplate substitutes it, and a batch delete runs the filled request")
    func templateWithObjectAndBatchDelete() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.league)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let (reds, blues) = (try context.insertNewObject(forEntityName: "Team"), try context.insertNewObject(forEntityName: "Team"))
            for (age, team) in [(20, reds), (30, reds), (20, blues)] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(Int16(age), forKey: "age")
                player.setValue(team, forKey: "team")
            }
            try context.save()
            let model = coordinator.managedObjectModel
            let request = try #require(try model.fetchRequestFromTemplate(withName: "playersOf", substitutionVariables: ["TEAM": reds, "AGE": 25]))
            #expect(try context.count(for: request) == 1)
            var delete = BatchDeleteRequest(fetchRequest: request)
            delete.resultType = .count
            #expect(try context.execute(delete).count == 1)
            var open = try #require(try model.fetchRequestTemplate(forName: "youngerThan"))
            open.substitutionVariables = ["AGE": .int16(25)]
            var byTemplate = BatchDeleteRequest(fetchRequest: open)
            byTemplate.resultType = .count
            #expect(try context.execute(byTemplate).count == 1, "the blue 20-year-old (the red one is gone): the open template's variables apply")
            let missing = #expect(throws: ContextError.self) {
                try model.fetchRequestFromTemplate(withName: "playersOf", substitutionVariables: ["TEAM": reds])
            }
            #expect(missing?.description.contains("$AGE") == true, "\(String(describing: missing))")
        }
        #expect(try log(coordinator).verify().isClean)
    }

    // MARK: - Many-to-many counts

    static var tagged: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Customer") {
                    Attribute("name", .string)
                    Attribute("tagCount", .int64).derived(from: "tags.@count")
                    Relationship("tags", to: "Tag", inverse: "customers", toMany: true)
                }
                Entity("Tag") {
                    Attribute("name", .string)
                    Attribute("customerCount", .int64).derived(from: "customers.@count")
                    Relationship("customers", to: "Customer", inverse: "tags", toMany: true)
                }
            }
        }
    }

    @Test("many-to-many counts on both sides follow a batch delete of either side, and a context's delete")
    func manyToManyCountsAfterDeletes() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.tagged)
        let (customers, tags) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let tags = try (0..<3).map { index -> ManagedObject in
                let tag = try context.insertNewObject(forEntityName: "Tag")
                tag.setValue("t\(index)", forKey: "name")
                return tag
            }
            let customers = try (0..<3).map { index -> ManagedObject in
                let customer = try context.insertNewObject(forEntityName: "Customer")
                customer.setValue("c\(index)", forKey: "name")
                for tag in tags { customer.mutableSetValue(forKey: "tags").add(tag) }
                return customer
            }
            try context.save()
            return (customers.map(\.objectID), tags.map(\.objectID))
        }
        #expect(try await values(["customerCount"], of: tags[0], coordinator) == ["customerCount": "3"])
        #expect(try await values(["tagCount"], of: customers[0], coordinator) == ["tagCount": "3"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchDeleteRequest(objectIDs: [customers[0]]))
        }
        #expect(try await values(["customerCount"], of: tags[1], coordinator) == ["customerCount": "2"], "a batch-deleted customer leaves its tags")
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchDeleteRequest(objectIDs: [tags[0]]))
        }
        #expect(try await values(["tagCount"], of: customers[1], coordinator) == ["tagCount": "2"], "a batch-deleted tag leaves its customers")
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: customers[1]))
            context.delete(try context.existingObject(with: tags[1]))
            try context.save()
        }
        #expect(try await values(["customerCount"], of: tags[2], coordinator) == ["customerCount": "1"])
        #expect(try await values(["tagCount"], of: customers[2], coordinator) == ["tagCount": "1"])
        #expect(try log(coordinator).verify().isClean)
    }

    // MARK: - Merging a batch's IDs

    @Test("mergeChanges(fromRemoteContextSave:into:) takes a set mixing object IDs and URIs (a Set<AnyHashable>, as a notification's userInfo holds)")
    func remoteMergeMixedSet() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, employees) = try await salesStore(dir)
        let holder = privateContext(coordinator)
        let worker = privateContext(coordinator)
        try await holder.perform { (context: isolated ManagedObjectContext) throws in
            let kept = try employees.map { try context.existingObject(with: $0) }
            #expect(kept.count == 3)
            _ = try worker.performAndWait { (worker: isolated ManagedObjectContext) throws in
                try worker.execute(BatchDeleteRequest(objectIDs: [employees[0], employees[1]]))
            }
            let deleted: Set<AnyHashable> = [AnyHashable(employees[0]), AnyHashable(employees[1].uriRepresentation())]
            ManagedObjectContext.mergeChanges(fromRemoteContextSave: [ManagedObjectContext.NotificationKey.deletedObjects.rawValue: deleted], into: [context])
            #expect(context.registeredObject(for: employees[0]) == nil, "an ID in the set")
            #expect(context.registeredObject(for: employees[1]) == nil, "a URI in the set")
            #expect(context.registeredObject(for: employees[2]) === kept[2])
        }
    }

    @Test("fetch predicates and sort descriptors reading a fetched property (keepers.@count) see its objects, in a context and in a child context, whose own reads of it see them too")
    func fetchedPropertyInPredicate() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.league)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (name, keepers) in [("Reds", 2), ("Blues", 1)] {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue(name, forKey: "name")
                for index in 0..<3 {
                    let player = try context.insertNewObject(forEntityName: "Player")
                    player.setValue(index < keepers ? "keeper" : "forward", forKey: "position")
                    player.setValue(team, forKey: "team")
                }
            }
            try context.save()
        }
        let parent = privateContext(coordinator)
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let teams = try context.fetch(try FetchRequest(entityName: "Team", format: "keepers.@count >= 2"))
            #expect(teams.map { $0.value(forKey: "name") as? String } == ["Reds"])
        }
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let teams = try context.fetch(try FetchRequest(entityName: "Team", format: "keepers.@count == 1"))
            #expect(teams.map { $0.value(forKey: "name") as? String } == ["Blues"], "a child context's fetch, through its parent")
            let counts = try context.fetch(FetchRequest(entityName: "Team")).map { ($0.value(forKey: "name") as? String, ($0.value(forKey: "keepers") as? [ManagedObject])?.count) }
            #expect(counts.map(\.0) == ["Reds", "Blues"] && counts.map(\.1) == [2, 1], "a child context reads the fetched property ($FETCH_SOURCE resolved in the parent that judges the stored players)")
            for descending in [false, true] {
                let request = FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "keepers.@count", ascending: !descending)])
                let sorted = try context.fetch(request).map { $0.value(forKey: "name") as? String }
                #expect(sorted == (descending ? ["Reds", "Blues"] : ["Blues", "Reds"]), "a child context sorts by the fetched property")
            }
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let request = FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "keepers.@count", ascending: true)])
            #expect(try context.fetch(request).map { $0.value(forKey: "name") as? String } == ["Blues", "Reds"], "a stored row sorts by the fetched property")
        }
    }

    // MARK: - Aggregates of every type, with nils

    static var scores: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Attribute("total", .int64).derived(from: "players.@sum.score")
                    Attribute("mean", .double).derived(from: "players.@avg.score")
                    Attribute("best", .int32).derived(from: "players.@max.score")
                    Attribute("first", .string).derived(from: "players.@min.name")
                    Attribute("latest", .date).derived(from: "players.@max.joined")
                    Attribute("weight", .double).derived(from: "players.@sum.weight")
                    Relationship("players", to: "Player", inverse: "team", toMany: true)
                }
                Entity("Player") {
                    Attribute("name", .string)
                    Attribute("score", .int32)
                    Attribute("weight", .float)
                    Attribute("joined", .date)
                    Relationship("team", to: "Team", inverse: "players")
                }
            }
        }
    }

    @Test("aggregates of integers, floats, strings and dates leave nils out, and follow batch updates (to nil too) and deletes")
    func aggregatesWithNils() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.scores)
        let day = Date(timeIntervalSinceReferenceDate: 800_000_000)
        let team = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            let players: [(String, Int32?, Float?, Double?)] = [("Mo", 10, 1.5, 0), ("Al", nil, nil, nil), ("Zed", 30, 2.25, 86_400)]
            for (name, score, weight, offset) in players {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(name, forKey: "name")
                if let score { player.setValue(score, forKey: "score") }
                if let weight { player.setValue(weight, forKey: "weight") }
                if let offset { player.setValue(day.addingTimeInterval(offset), forKey: "joined") }
                player.setValue(team, forKey: "team")
            }
            try context.save()
            return team.objectID
        }
        let keys = ["total", "mean", "best", "first", "latest", "weight"]
        #expect(try await values(keys, of: team, coordinator) == [
            "total": "40", "mean": "20.0", "best": "30", "first": "Al", "latest": "\(day.addingTimeInterval(86_400))", "weight": "3.75",
        ])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var update = BatchUpdateRequest(entityName: "Player")
            update.predicate = try FormatPredicate(format: "name == %@", "Zed")
            update.propertiesToUpdate = ["score": NSNull(), "weight": Float(0.5)]
            _ = try context.execute(update)
        }
        #expect(try await values(keys, of: team, coordinator) == [
            "total": "10", "mean": "10.0", "best": "10", "first": "Al", "latest": "\(day.addingTimeInterval(86_400))", "weight": "2.0",
        ])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Player", format: "name != %@", "Al")))
        }
        #expect(try await values(keys, of: team, coordinator) == [
            "total": "0", "mean": "nil", "best": "nil", "first": "Al", "latest": "nil", "weight": "0.0",
        ])
        #expect(try log(coordinator).verify().isClean)
    }

    @Test("a context saving a change to an object a batch deleted meanwhile gets a clear error and writes nothing; the object stays deleted")
    func saveAfterBatchDelete() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, employees) = try await salesStore(dir)
        let holder = privateContext(coordinator)
        let head = try await holder.perform { (context: isolated ManagedObjectContext) throws -> UInt64 in
            let employee = try context.existingObject(with: employees[0])
            employee.setValue("Renamed", forKey: "name")
            _ = try privateContext(coordinator).performAndWait { (worker: isolated ManagedObjectContext) throws in
                try worker.execute(BatchDeleteRequest(objectIDs: [employees[0]]))
            }
            let head = try log(coordinator).read { try $0.head }
            let error = #expect(throws: (any Error).self) { try context.save() }
            #expect(error.map { "\($0)" }?.contains("changed by another writer") == true, "\(String(describing: error))")
            return head
        }
        #expect(try log(coordinator).read { try $0.head } == head)
        #expect(try log(coordinator).read { try $0.object(StoredObjectID(entity: "Employee", primaryKey: 1)) } == nil)
    }

    @Test("history lists a batch delete as an import transaction with the recomputed derived values; the snapshot before it has the old ones")
    func historyOfBatchWithDerived() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, department, employees) = try await salesStore(dir)
        let sequence = try await privateContext(coordinator, name: "cleaner", author: "ops").perform { (context: isolated ManagedObjectContext) throws in
            try #require(try context.execute(BatchDeleteRequest(objectIDs: [employees[2]])).sequence)
        }
        let transaction = try #require(try coordinator.history(HistoryRequest()).last)
        #expect(transaction.sequence == sequence && transaction.kind == .import && transaction.author == "ops")
        let departmentChange = try #require(transaction.changes.first { $0.changedObjectID == department })
        let changed = Set(departmentChange.propertyChanges.map { "\($0)" }.compactMap { text in
            ["employeeCount", "totalSalary", "averageSalary", "highestSalary"].first { text.contains($0) }
        })
        #expect(changed == ["employeeCount", "totalSalary", "averageSalary", "highestSalary"], "\(departmentChange.propertyChanges)")
        #expect(transaction.changes.contains { $0.changedObjectID == employees[2] && $0.changeType == .delete })
        let store = try #require(coordinator.persistentStores.first)
        let before = try coordinator.historySnapshot(at: HistoryToken(storeIdentifier: store.identifier, sequence: sequence - 1))
        #expect(before.objects[employees[2]] != nil)
        #expect(before.objects[department]?["employeeCount"].map { "\($0)" }?.contains("3") == true, "\(String(describing: before.objects[department]))")
        let after = try coordinator.historySnapshot(at: HistoryToken(storeIdentifier: store.identifier, sequence: sequence))
        #expect(after.objects[employees[2]] == nil)
        #expect(after.objects[department]?["employeeCount"].map { "\($0)" }?.contains("2") == true, "\(String(describing: after.objects[department]))")
    }

    @Test("reverting a batch upsert sets the stored object it updated back and deletes the objects it inserted")
    func revertBatchUpsert() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await BatchUpsertTests.store(dir)
        let before = try await BatchUpsertTests.customers(coordinator)
        let sequence = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = StandardMergePolicy.mergeByPropertyObjectTrump
            return try #require(try context.execute(BatchInsertRequest(entityName: "Customer", objects: BatchUpsertTests.rows)).sequence)
        }
        #expect(try await BatchUpsertTests.customers(coordinator).count == 4)
        let store = try #require(coordinator.persistentStores.first)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: HistoryToken(storeIdentifier: store.identifier, sequence: sequence))
            try context.save()
        }
        #expect(try await BatchUpsertTests.customers(coordinator) == before)
        #expect(try log(coordinator).verify().isClean)
    }

    @Test("Core Data's spelling of derivation functions, canonical:(name) and lowercase:(name), is accepted and computed as canonical(name)")
    func coreDataFunctionSpelling() async throws {
        let model = try ManagedObjectModel {
            Entity("Book") {
                Attribute("title", .string)
                Attribute("searchTitle", .string).derived(from: "canonical:(title)")
                Attribute("lowerTitle", .string).derived(from: "lowercase:(title)")
                Attribute("upperTitle", .string).derived(from: "uppercase:(title)")
            }
        }
        let expression = try #require(model.entity(named: "Book")?.attributesByName["searchTitle"]?.derivationExpression)
        #expect(expression.format == "canonical(title)", "stored in its canonical form")
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model)
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let book = try context.insertNewObject(forEntityName: "Book")
            book.setValue("Élan Vital", forKey: "title")
            try context.save()
            return book.objectID
        }
        #expect(try await values(["searchTitle", "lowerTitle", "upperTitle"], of: id, coordinator)
            == ["searchTitle": "elan vital", "lowerTitle": "élan vital", "upperTitle": "ÉLAN VITAL"])
        #expect(try FormatPredicate(format: "lowercase:(title) == 'x'").description == "lowercase(title) == \"x\"")
        #expect(throws: FormatPredicateError.self) { try FormatPredicate(format: "title: == 'x'") }
    }

    @Test("a count through a to-one (department.employees.@count) and a self-referential count (children.@count) follow inserts, moves and batch deletes")
    func countsThroughToOneAndSelf() async throws {
        let model = try ManagedObjectModel {
            Entity("Office") {
                Attribute("name", .string)
                Relationship("staff", to: "Person", inverse: "office", toMany: true)
            }
            Entity("Person") {
                Attribute("name", .string)
                Attribute("officeSize", .int32).derived(from: "office.staff.@count")
                Attribute("childCount", .int16).derived(from: "children.@count")
                Relationship("office", to: "Office", inverse: "staff")
                Relationship("parent", to: "Person", inverse: "children")
                Relationship("children", to: "Person", inverse: "parent", toMany: true)
            }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model)
        let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let (north, south) = (try context.insertNewObject(forEntityName: "Office"), try context.insertNewObject(forEntityName: "Office"))
            var people: [ManagedObject] = []
            for index in 0..<4 {
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue("p\(index)", forKey: "name")
                person.setValue(index < 3 ? north : south, forKey: "office")
                if index > 0 { person.setValue(people[0], forKey: "parent") }
                people.append(person)
            }
            try context.save()
            return people.map(\.objectID)
        }
        #expect(try await values(["officeSize", "childCount"], of: ids[0], coordinator) == ["officeSize": "3", "childCount": "3"])
        #expect(try await values(["officeSize", "childCount"], of: ids[3], coordinator) == ["officeSize": "1", "childCount": "0"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let mover = try context.existingObject(with: ids[1])
            mover.setValue(try context.existingObject(with: ids[3]).value(forKey: "office"), forKey: "office")
            mover.setValue(try context.existingObject(with: ids[3]), forKey: "parent")
            try context.save()
        }
        #expect(try await values(["officeSize", "childCount"], of: ids[0], coordinator) == ["officeSize": "2", "childCount": "2"])
        #expect(try await values(["officeSize", "childCount"], of: ids[3], coordinator) == ["officeSize": "2", "childCount": "1"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchDeleteRequest(objectIDs: [ids[2], ids[1]]))
        }
        #expect(try await values(["officeSize", "childCount"], of: ids[0], coordinator) == ["officeSize": "1", "childCount": "1"], "p3 is still p0's child")
        #expect(try await values(["officeSize", "childCount"], of: ids[3], coordinator) == ["officeSize": "1", "childCount": "0"])
        #expect(try log(coordinator).verify().isClean)
    }

    // MARK: - Randomized: batch requests and saves against a fresh computation

    @Test("random batch updates, batch deletes and context saves keep every department's aggregates equal to a fresh computation (steps from STRATA_REVIEW_BATCH_STEPS, default 24)")
    func randomBatchesKeepAggregates() async throws {
        let steps = ProcessInfo.processInfo.environment["STRATA_REVIEW_BATCH_STEPS"].flatMap(Int.init) ?? 24
        var generator = SeededGenerator(seed: 0x5EED_2026)
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let departments = try (0..<3).map { index -> ManagedObject in
                let department = try context.insertNewObject(forEntityName: "Department")
                department.setValue("D\(index)", forKey: "name")
                return department
            }
            for index in 0..<12 {
                let employee = try context.insertNewObject(forEntityName: "Employee")
                employee.setValue("E\(index)", forKey: "name")
                employee.setValue(Decimal(10 * (index + 1)), forKey: "salary")
                employee.setValue(departments[index % 3], forKey: "department")
            }
            try context.save()
        }
        for step in 0..<steps {
            let choice = Int.random(in: 0..<4, using: &generator)
            let threshold = Decimal(Int.random(in: 0...150, using: &generator))
            let newSalary: any Sendable = Bool.random(using: &generator) ? NSNull() : Decimal(Int.random(in: 1...90, using: &generator))
            let pick = Int.random(in: 0..<1000, using: &generator)
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                switch choice {
                case 0:
                    var update = BatchUpdateRequest(entityName: "Employee")
                    update.predicate = try FormatPredicate(format: "salary < %@", threshold)
                    update.propertiesToUpdate = ["salary": newSalary]
                    _ = try context.execute(update)
                case 1:
                    var request = try FetchRequest(entityName: "Employee", format: "salary > %@", threshold)
                    request.fetchLimit = 2
                    _ = try context.execute(BatchDeleteRequest(fetchRequest: request))
                case 2:
                    // A save: a new employee and a move, into departments picked by `pick`.
                    let departments = try context.fetch(FetchRequest(entityName: "Department"))
                    guard !departments.isEmpty else { return }
                    let employee = try context.insertNewObject(forEntityName: "Employee")
                    employee.setValue("N\(step)", forKey: "name")
                    employee.setValue(Decimal(pick % 97), forKey: "salary")
                    employee.setValue(departments[pick % departments.count], forKey: "department")
                    let others = try context.fetch(FetchRequest(entityName: "Employee"))
                    if let mover = others.first(where: { $0 !== employee }) {
                        mover.setValue(departments[(pick / 7) % departments.count], forKey: "department")
                    }
                    try context.save()
                default:
                    // Now and then a department goes (nullify), replaced by a new one.
                    if pick % 3 == 0, let department = try context.fetch(FetchRequest(entityName: "Department")).first {
                        _ = try context.execute(BatchDeleteRequest(objectIDs: [department.objectID]))
                    }
                    var insert = BatchInsertRequest(entityName: "Department", objects: [["name": "B\(step)"]])
                    insert.resultType = .count
                    _ = try context.execute(insert)
                }
            }
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                for department in try context.fetch(FetchRequest(entityName: "Department")) {
                    let members = try context.fetch(FetchRequest(entityName: "Employee", predicate: try FormatPredicate(format: "department == %@", department)))
                    let salaries = members.compactMap { $0.value(forKey: "salary") as? Decimal }
                    let name = department.value(forKey: "name") as? String ?? "?"
                    #expect(department.value(forKey: "employeeCount") as? Int64 == Int64(members.count), "step \(step), \(name): count")
                    #expect(department.value(forKey: "totalSalary") as? Decimal == salaries.reduce(0, +), "step \(step), \(name): sum")
                    #expect(department.value(forKey: "lowestSalary") as? Decimal == salaries.min(), "step \(step), \(name): min")
                    #expect(department.value(forKey: "highestSalary") as? Decimal == salaries.max(), "step \(step), \(name): max")
                }
            }
        }
        #expect(try log(coordinator).verify().isClean)
    }

    @Test("a batch update or delete whose predicate has a variable with no value is refused naming it; nothing is written")
    func batchPredicateWithOpenVariable() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, _) = try await salesStore(dir)
        let head = try log(coordinator).read { try $0.head }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var update = BatchUpdateRequest(entityName: "Employee")
            update.predicate = try FormatPredicate(format: "salary < $LIMIT")
            update.propertiesToUpdate = ["name": "x"]
            let updateError = #expect(throws: ContextError.self) { try context.execute(update) }
            #expect(updateError.map { "\($0)" }?.contains("LIMIT") == true, "\(String(describing: updateError))")
            let deleteError = #expect(throws: ContextError.self) {
                try context.execute(BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Employee", format: "salary < $LIMIT")))
            }
            #expect(deleteError.map { "\($0)" }?.contains("LIMIT") == true, "\(String(describing: deleteError))")
        }
        #expect(try log(coordinator).read { try $0.head } == head)
    }

    @Test("a batch request executed in a child context goes to the store, as Core Data's does, under the child's author and name")
    func batchInChildContext() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, department, _) = try await salesStore(dir)
        let parent = privateContext(coordinator)
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent, name: "child", transactionAuthor: "kid")
        let result = try await child.perform { (context: isolated ManagedObjectContext) throws in
            var request = BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Employee", format: "salary >= %@", Decimal(200)))
            request.resultType = .count
            return try context.execute(request)
        }
        #expect(result.count == 2)
        let sequence = try #require(result.sequence)
        let event = try log(coordinator).read { try $0.event(sequence) }
        #expect(event.kind == .import && event.author == "kid" && event.contextName == "child")
        #expect(try await values(["employeeCount"], of: department, coordinator) == ["employeeCount": "1"])
    }

    @Test("$FETCH_SOURCE.name reads the source as the reading context holds it: a child's unsaved rename counts for the stored players its parent judges")
    func fetchedPropertySourceValuesInChild() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.league)
        let teamID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Reds", forKey: "name")
            for nickname in ["Reds", "Blues", "Blues"] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(nickname, forKey: "nickname")
            }
            try context.save()
            return team.objectID
        }
        let parent = privateContext(coordinator)
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect((team.value(forKey: "namesakes") as? [ManagedObject])?.count == 1)
            team.setValue("Blues", forKey: "name")
            // Kept until the object is refreshed (Core Data's fetched properties are not dynamic).
            #expect((team.value(forKey: "namesakes") as? [ManagedObject])?.count == 1)
            context.refresh(team, mergeChanges: true)
            #expect((team.value(forKey: "namesakes") as? [ManagedObject])?.count == 2, "the child's unsaved name, as Core Data substitutes the source")
        }
    }

    @Test("a fetched property of an unsaved source finds the unsaved objects naming it, and after the save the saved ones")
    func fetchedPropertyOfUnsavedSource() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.league)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Reds", forKey: "name")
            for (nickname, position) in [("A", "keeper"), ("Reds", "keeper"), ("C", "forward")] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(nickname, forKey: "nickname")
                player.setValue(position, forKey: "position")
                player.setValue(team, forKey: "team")
            }
            #expect((team.value(forKey: "keepers") as? [ManagedObject])?.count == 2, "unsaved players of an unsaved team")
            #expect((team.value(forKey: "namesakes") as? [ManagedObject])?.count == 1)
            try context.save()
            #expect((team.value(forKey: "keepers") as? [ManagedObject])?.count == 2, "saved")
            context.reset()
            let reread = try #require(try context.fetch(FetchRequest(entityName: "Team")).first)
            #expect((reread.value(forKey: "keepers") as? [ManagedObject])?.count == 2, "from the store")
        }
    }

    @Test("a batch insert clashing on a uniqueness constraint over a derived attribute is refused, under any policy, with a message naming it; nothing is written")
    func batchInsertClashOnDerivedConstraint() async throws {
        let model = try ManagedObjectModel {
            Entity("Tag") {
                Attribute("name", .string)
                Attribute("key", .string).derived(from: "canonical(name)")
                Unique("key")
            }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model)
        for policy in [StandardMergePolicy.error, .mergeByPropertyObjectTrump] {
            let message = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> String in
                context.mergePolicy = policy
                let error = #expect(throws: ContextError.self) {
                    try context.execute(BatchInsertRequest(entityName: "Tag", objects: [["name": "Café"], ["name": "cafe"]]))
                }
                return error.map { "\($0)" } ?? ""
            }
            #expect(message.contains("key"), "\(policy): \(message)")
            #expect(!message.contains("set the context's mergePolicy"), "an upsert can't merge on a derived attribute, so the hint doesn't offer it: \(message)")
        }
        #expect(try log(coordinator).read { try $0.head } == 0)
    }
}
