import Foundation
import Strata
import StrataModel
import StrataTestSupport
import Testing

/// Review 27-5: the source documents' code ported the way a Core Data programmer writes it,
/// `NS` prefix dropped.
@Suite("Porting a Core Data app: the seeds' code with the NS prefix dropped", .serialized)
struct SeedPortingReviewTests {
    @Test("fix: seed 001's Run model built in code — integer32, defaultValue = -1, setValidationPredicates(_:withValidationWarnings:) — validates and works (before: the -1 stayed an int64 and the model was refused)")
    func runModelBuiltInCode() async throws {
        var dateAttribute = AttributeDescription("date", .date)
        dateAttribute.isOptional = false
        dateAttribute.isProvidedAtInsert = true
        var idAttribute = AttributeDescription("processID", .integer32)
        idAttribute.isOptional = false
        idAttribute.defaultValue = -1
        idAttribute.setValidationPredicates([try FormatPredicate(format: "SELF > 0")], withValidationWarnings: ["Process ID < 1"])
        #expect(idAttribute.defaultValue == .int32(-1), "converted to the attribute's type")
        #expect(idAttribute.validationWarnings == ["Process ID < 1"])
        var runEntity = EntityDescription(name: "Run")
        runEntity.managedObjectClassName = "Run"
        runEntity.attributes = [dateAttribute, idAttribute]
        var model = ManagedObjectModel()
        model.entities = [runEntity]
        model.localizationDictionary = [
            "Property/date/Entity/Run": "Date", "Property/processID/Entity/Run": "Process ID",
            "ErrorString/Process ID < 1": "Process ID must not be less than 1",
        ]
        try model.validate()
        #expect(model == (try SeedModels.run), "the same model as the builder's")

        // Changing the type afterwards converts the default too; one that can't convert is kept and reported.
        var retyped = idAttribute
        retyped.attributeType = .integer64
        #expect(retyped.defaultValue == .int64(-1))
        var small = AttributeDescription("count", .integer16)
        small.defaultValue = 70000
        #expect(small.defaultValue == .int64(70000))
        var bad = ManagedObjectModel()
        bad.entities = [EntityDescription(name: "Counter", attributes: [small])]
        #expect(throws: ModelError.self) { try bad.validate() }

        let runDirectory = try TemporaryDirectory()
        defer { withExtendedLifetime(runDirectory) {} }
        let context = privateContext(try openCoordinator(runDirectory, model: model, classes: [(Run.self, "Run")]))
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let run = try context.insert(Run.self, entityName: "Run")
            #expect(run.primitiveValue(forKey: "processID") as? Int32 == -1)
            do {
                try context.save()
                Issue.record("saved a processID of -1")
            } catch {
                let error = error as NSError
                #expect(error.code == 1550)
                #expect(error.localizedDescription.contains("Process ID must not be less than 1"), "\(error.localizedDescription)")
            }
            run.processID = 42
            try context.save()
        }
    }

    @Test("fix: the object-ID notifications (didSaveObjectIDsNotification, didChangeObjectIDsNotification) and their inserted_objectIDs… keys, also on did-merge (before: none, and did-merge had only 'inserted'…)")
    func objectIDNotifications() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let context = ManagedObjectContext(concurrencyType: .privateQueueConcurrencyType, coordinator: coordinator)
        let changes = CenterRecorder(ManagedObjectContext.didChangeObjectIDsNotification, from: context)
        let saves = CenterRecorder(ManagedObjectContext.didSaveObjectIDsNotification, from: context)
        let playerID = try await context.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            context.processPendingChanges()
            try context.save()
            return player.objectID
        }
        #expect(changes.count == 1)
        #expect(changes.ids(0, .insertedObjectIDs).count == 1)
        #expect(changes.ids(0, .updatedObjectIDs) == [teamID])
        #expect(changes.value(0, .deletedObjectIDs) == nil, "empty sets are left out, as in did-change")
        #expect(saves.count == 1)
        #expect(saves.ids(0, .insertedObjectIDs) == [playerID])
        #expect(saves.ids(0, .updatedObjectIDs) == [teamID])
        #expect(saves.value(0, .deletedObjectIDs) as? Set<ManagedObjectID> == [])
        #expect(saves.value(0, .insertedObjects) == nil, "only the object-ID keys")

        try await context.perform { (context: isolated ManagedObjectContext) throws in context.reset() }
        #expect(changes.count == 2)
        #expect(changes.value(1, .invalidatedAllObjects) as? Bool == true)

        // Another context's save merged: did-merge carries the object-ID keys too.
        let other = privateContext(coordinator)
        let merges = CenterRecorder(ManagedObjectContext.didMergeChangesObjectIDsNotification, from: context)
        let save = try await other.perform { (other: isolated ManagedObjectContext) throws -> ContextDidSave in
            var saved: ContextDidSave?
            let token = other.addObserver { change in if case .didSave(let value) = change.notification { saved = value } }
            defer { other.removeObserver(token) }
            try other.existingObject(with: playerID).setValue("Ng", forKey: "lastName")
            try other.save()
            return try #require(saved)
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.existingObject(with: playerID)
            context.mergeChanges(fromContextDidSave: save)
        }
        #expect(merges.count == 1)
        #expect(merges.ids(0, .updatedObjectIDs) == [playerID])
        #expect(merges.ids(0, .updatedObjects) == [playerID])
    }

    @Test("gap: faultingState is 0 for a loaded or inserted object, nonzero for a fault (seed 002's firing faults)")
    func faultingState() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.object(with: teamID)
            #expect(team.isFault && team.faultingState != 0)
            #expect(team.value(forKey: "name") as? String == "Otters", "reading fires the fault")
            #expect(!team.isFault && team.faultingState == 0)
            context.refresh(team, mergeChanges: false)
            #expect(team.isFault && team.faultingState != 0, "refresh turns it back into a fault")
            let inserted = try context.insertNewObject(forEntityName: "Team")
            #expect(inserted.faultingState == 0)
        }
    }

    @Test("gap: NSSortDescriptor(key:ascending:selector:) with the selectors Core Data fetches sort by; another selector is refused by name")
    func sortBySelector() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["clark", "Baker", "adams", "Item 10", "item 9"] {
                try context.insertNewObject(forEntityName: "Player").setValue(name, forKey: "lastName")
            }
            try context.save()
            func names(_ selector: String, ascending: Bool = true, in context: isolated ManagedObjectContext) throws -> [String] {
                var request = FetchRequest(entityName: "Player")
                request.sortDescriptors = [try FetchSortDescriptor(key: "lastName", ascending: ascending, selector: selector)]
                return try context.fetch(request).compactMap { $0.value(forKey: "lastName") as? String }
            }
            #expect(try names("compare:", in: context) == ["Baker", "Item 10", "adams", "clark", "item 9"])
            #expect(try names("localizedCaseInsensitiveCompare:", in: context) == ["adams", "Baker", "clark", "Item 10", "item 9"])
            #expect(try names("caseInsensitiveCompare:", ascending: false, in: context) == ["item 9", "Item 10", "clark", "Baker", "adams"])
            #expect(try names("localizedStandardCompare:", in: context) == ["adams", "Baker", "clark", "item 9", "Item 10"])
            let error = #expect(throws: ContextError.self) { try FetchSortDescriptor(key: "lastName", selector: "compareByLength:") }
            #expect(error?.description.contains("compareByLength:") == true, "\(String(describing: error))")
        }
    }

    @Test("seed 003 as written: a .privateQueueConcurrencyType context fetches the IDs of people aged 100...200 (%d arguments, batch size 20) for a .mainQueueConcurrencyType context")
    func seed003ObjectIDs() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.person)
        let background = ManagedObjectContext(concurrencyType: .privateQueueConcurrencyType, coordinator: coordinator)
        let ids = try background.performAndWait { (context: isolated ManagedObjectContext) throws -> [ManagedObjectID] in
            for counter in 0..<300 {
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue("First name \(counter)", forKey: "firstName")
                person.setValue("Last name \(counter)", forKey: "lastName")
                person.setValue(counter, forKey: "age")
            }
            try context.save()
            var request = FetchRequest(entityName: "Person")
            request.fetchBatchSize = 20
            request.predicate = try FormatPredicate(format: "(age >= %d) AND (age <= %d)", 100, 200)
            request.resultType = .managedObjectID
            return try context.fetchObjectIDs(request)
        }
        #expect(ids.count == 101)
        let main = ManagedObjectContext(concurrencyType: .mainQueueConcurrencyType, coordinator: coordinator)
        #expect(main.concurrencyType == .mainQueue)
        let ages = try await main.perform { (context: isolated ManagedObjectContext) throws in
            try ids.map { try context.existingObject(with: $0).value(forKey: "age") as? Int32 ?? -1 }.sorted()
        }
        #expect(ages == Array(100...200))
    }
}

@Suite("Porting a Core Data app: seed 000/002/004 flows as a Core Data programmer writes them", .serialized)
struct SeedPortingFlowTests {
    @Test("seed 000 flows: deny is 1600 keyed by the relationship, a transient-only change isn't a persistent one, refresh without merge discards, BETWEEN/IN with arrays, a saved delete leaves the context, changedValuesForCurrentEvent, typed fetchRequest()")
    func probes() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.employeeDepartment, classes: [(Employee.self, "Employee")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.insertNewObject(forEntityName: "Department")
            department.setValue("Eng", forKey: "name")
            let person = try context.insertNewObject(forEntityName: "Employee")
            person.setValue("Ada", forKey: "firstName")
            person.setValue(department, forKey: "department")
            person.setValue(Decimal(150), forKey: "salary")
            try context.save()
            // deny: 1600 with the relationship as the key
            context.delete(department)
            do { try context.save(); Issue.record("saved") } catch {
                let ns = error as NSError
                #expect(ns.code == 1600, "\(ns.code)")
                #expect(ns.userInfo[ErrorUserInfoKey.validationKey] as? String == "employees", "\(ns.userInfo)")
            }
            context.rollback()
            // transient only
            person.setValue("Ada L", forKey: "fullName")
            #expect(!person.hasPersistentChangedValues)
            #expect(!person.isUpdated)
            #expect(person.changedValues().isEmpty, "\(person.changedValues())")
            // refresh without merge discards
            person.setValue("Grace", forKey: "firstName")
            context.refresh(person, mergeChanges: false)
            #expect(!person.hasChanges)
            #expect(person.value(forKey: "firstName") as? String == "Ada")
            let contextChanged = context.hasChanges
            #expect(!contextChanged)
            // BETWEEN %@ with an array
            let between = try context.count(for: try FetchRequest(entityName: "Employee", format: "salary BETWEEN %@", [100, 200]))
            #expect(between == 1)
            let inList = try context.count(for: try FetchRequest(entityName: "Employee", format: "firstName IN %@", ["Ada", "Bo"]))
            #expect(inList == 1)
            // undo with nothing to undo
            context.removeAllUndoActions()
            try context.undo()
            // a saved delete
            let other = try context.insertNewObject(forEntityName: "Department")
            try context.save()
            context.delete(other)
            #expect(other.isDeleted)
            try context.save()
            #expect(!other.isDeleted, "Core Data: false once the delete is saved")
            #expect(other.managedObjectContext == nil)
            // changedValuesForCurrentEvent: old values, empty after processPendingChanges
            person.setValue("Ann", forKey: "firstName")
            #expect(person.changedValuesForCurrentEvent()["firstName"] as? String == "Ada")
            context.processPendingChanges()
            #expect(person.changedValuesForCurrentEvent().isEmpty)
            // count(for:) with a fetchLimit
            var limited = FetchRequest(entityName: "Employee")
            limited.fetchLimit = 0
            #expect(try context.count(for: limited) == 1)
            // a fetch by the Employee class's fetchRequest()
            let typed = try context.fetch(Employee.fetchRequest(), as: Employee.self)
            #expect(typed.count == 1)
            // existing object with a %@ of a managed object in a predicate and SELF
            let me = try context.fetch(try FetchRequest(entityName: "Employee", format: "SELF == %@", person))
            #expect(me.first === person)
            let byDept = try context.fetch(try FetchRequest(entityName: "Employee", format: "department.name ==[c] %@", "eng"))
            #expect(byDept.count == 1)
        }
    }
}

extension SeedPortingFlowTests {
    @Test("gap: seed 004's metadata keys — StoreTypeKey and StoreUUIDKey (Core Data's NSStoreTypeKey, NSStoreUUIDKey) — on an in-memory store; the UUID is the host of its URIs")
    func storeMetadataKeys() async throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        let store = try coordinator.addPersistentStore(type: .inMemory)
        let metadata = coordinator.metadata(for: store)
        #expect(metadata[StoreTypeKey] == .string(PersistentStore.StoreType.inMemory.rawValue))
        let uuid = try #require(metadata[StoreUUIDKey])
        #expect(uuid == .string(store.identifier.uuidString))
        let uri = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            try context.save()
            return team.objectID.uriRepresentation()
        }
        #expect(uuid == .string(uri.host ?? ""), "\(uri)")

        let dir = try TemporaryDirectory()
        let onDisk = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let url = try #require(onDisk.persistentStores.first?.url)
        let read = try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: url)
        #expect(read[StoreTypeKey] == .string("EventLog"))
        #expect(read[StoreUUIDKey] == .string(try #require(onDisk.persistentStores.first).identifier.uuidString))
    }

    @Test("seed 000/002 key paths and faults: @avg/@max/@min/@distinctUnionOfObjects, a to-many key path gives the set of values, hasFault before a to-many is read")
    func keyPathsAndRelationshipFaults() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.employeeDepartment)
        let departmentID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.insertNewObject(forEntityName: "Department")
            for (name, salary) in [("Ada", 100), ("Bo", 300), ("Ada", 200)] {
                let employee = try context.insertNewObject(forEntityName: "Employee")
                employee.setValue(name, forKey: "firstName")
                employee.setValue(Decimal(salary), forKey: "salary")
                employee.setValue(department, forKey: "department")
            }
            try context.save()
            return department.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.existingObject(with: departmentID)
            #expect(department.hasFault(forRelationshipNamed: "employees"), "not read yet: a relationship fault")
            func number(_ value: Any?) -> Double? {
                switch value {
                case let v as Decimal: NSDecimalNumber(decimal: v).doubleValue
                case let v as Double: v
                case let v as Int: Double(v)
                default: nil
                }
            }
            #expect(number(department.value(forKeyPath: "employees.@avg.salary")) == 200)
            #expect(number(department.value(forKeyPath: "employees.@max.salary")) == 300)
            #expect(number(department.value(forKeyPath: "employees.@min.salary")) == 100)
            let distinct = department.value(forKeyPath: "employees.@distinctUnionOfObjects.firstName")
            #expect(Set((distinct as? [String]) ?? []) == ["Ada", "Bo"], "\(String(describing: distinct))")
            let names = department.value(forKeyPath: "employees.firstName")
            #expect((names as? Set<String>) == ["Ada", "Bo"] || Set((names as? [String]) ?? []) == ["Ada", "Bo"], "\(String(describing: names))")
            #expect(!department.hasFault(forRelationshipNamed: "employees"))
        }
    }
}

extension SeedPortingFlowTests {
    @Test("gap: seed 001's inserts as written — EntityDescription.insertNewObject(forEntityName:into:), entity(forEntityName:in:), Run(entity:insertInto:)")
    func seed001Inserts() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.run, classes: [(Run.self, "Run")])
        let context = privateContext(coordinator)
        let runEntity = try #require(EntityDescription.entity(forEntityName: "Run", in: context))
        #expect(runEntity.managedObjectClassName == "Run")
        #expect(EntityDescription.entity(forEntityName: "Walk", in: context) == nil)
        let pids = try await context.perform { (context: isolated ManagedObjectContext) throws -> [Int32] in
            let run = try Run(entity: runEntity, insertInto: context)
            #expect(run.isInserted && run.date != nil, "awakeFromInsert ran")
            run.processID = 940
            let another = try EntityDescription.insertNewObject(forEntityName: "Run", into: context)
            #expect(another is Run, "the class registered for the entity")
            another.setValue(Int32(955), forKey: "processID")
            #expect(throws: ContextError.self) { try EntityDescription.insertNewObject(forEntityName: "Walk", into: context) }
            try context.save()
            let request = FetchRequest(entityName: "Run", sortDescriptors: [FetchSortDescriptor(key: "processID")])
            return try context.fetch(request).compactMap { ($0 as? Run)?.processID }
        }
        #expect(pids == [940, 955])
    }
}

@Suite("Porting: merging an object-ID notification's userInfo")
struct ObjectIDNotificationMergeTests {
    @Test("mergeChanges(fromRemoteContextSave:into:) takes a didSaveObjectIDsNotification's userInfo as it is (inserted_objectIDs, updated_objectIDs, deleted_objectIDs): before, it merged nothing, silently")
    func mergeObjectIDNotification() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let view = privateContext(coordinator)
        try await view.perform { (view: isolated ManagedObjectContext) throws in
            let team = try view.existingObject(with: teamID)
            view.userInfo["team"] = team
            #expect(!team.isFault)
        }
        let background = privateContext(coordinator)
        let saves = CenterRecorder(ManagedObjectContext.didSaveObjectIDsNotification, from: background)
        try await background.perform { (background: isolated ManagedObjectContext) throws in
            background.delete(try background.existingObject(with: teamID))
            try background.save()
        }
        #expect(saves.count == 1)
        let deleted = saves.ids(0, .deletedObjectIDs)
        #expect(deleted.contains(teamID))
        ManagedObjectContext.mergeChanges(fromRemoteContextSave: [ManagedObjectContext.NotificationKey.deletedObjectIDs.rawValue: deleted], into: [view])
        try await view.perform { (view: isolated ManagedObjectContext) throws in
            #expect(view.registeredObject(for: teamID) == nil, "the deleted team left the context")
            #expect(throws: (any Error).self) { try view.existingObject(with: teamID) }
        }
    }
}
