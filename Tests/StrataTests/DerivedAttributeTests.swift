import Foundation
import Strata
import StrataTestSupport
import Testing

/// A department with employees (name, salary) in the derived-attributes seed model, saved;
/// returns the department's ID and the employees' IDs in the order given.
private func saveDepartment(
    _ context: isolated ManagedObjectContext, name: String, employees: [(String, Decimal)]
) throws -> (department: ManagedObjectID, employees: [ManagedObjectID]) {
    let department = try context.insertNewObject(forEntityName: "Department")
    department.setValue(name, forKey: "name")
    var people: [ManagedObject] = []
    for (person, salary) in employees {
        let employee = try context.insertNewObject(forEntityName: "Employee")
        employee.setValue(person, forKey: "name")
        employee.setValue(salary, forKey: "salary")
        employee.setValue(department, forKey: "department")
        people.append(employee)
    }
    try context.save()
    return (department.objectID, people.map(\.objectID))
}

/// A store of the derived-attributes seed model in `dir`, with one department saved by
/// ``saveDepartment(_:name:employees:)``.
private func departmentStore(_ dir: TemporaryDirectory, name: String, employees: [(String, Decimal)]) async throws
    -> (coordinator: PersistentStoreCoordinator, department: ManagedObjectID, employees: [ManagedObjectID])
{
    let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
    let (department, people) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        try saveDepartment(context, name: name, employees: employees)
    }
    return (coordinator, department, people)
}

/// The value of `key` of the object `id`, read in `context`.
private func value(_ key: String, of id: ManagedObjectID, in context: isolated ManagedObjectContext) throws -> Any? {
    try context.existingObject(with: id).value(forKey: key)
}

/// The newest transaction of the store.
private func newestTransaction(_ coordinator: PersistentStoreCoordinator) throws -> HistoryTransaction {
    try #require(try coordinator.history(HistoryRequest()).last)
}

/// The values `DerivedAttributeTests.everyKind` saves.
private func checkEveryKind(
    _ context: isolated ManagedObjectContext, department: ManagedObjectID, employees: [ManagedObjectID], saved: Date
) throws {
    #expect(try value("employeeCount", of: department, in: context) as? Int64 == 3)
    #expect(try value("totalSalary", of: department, in: context) as? Decimal == 600)
    #expect(try value("averageSalary", of: department, in: context) as? Decimal == 200)
    #expect(try value("lowestSalary", of: department, in: context) as? Decimal == 100)
    #expect(try value("highestSalary", of: department, in: context) as? Decimal == 300)
    #expect(try value("searchName", of: department, in: context) as? String == "recherche & developpement")
    #expect(try value("lastSaved", of: department, in: context) as? Date == saved)
    #expect(try value("departmentName", of: employees[1], in: context) as? String == "Recherche & Développement")
    #expect(try value("shoutedName", of: employees[1], in: context) as? String == "ÉMILE")
    #expect(try value("departmentSearchName", of: employees[1], in: context) as? String == "recherche & developpement",
            "a derivation reading another derived attribute sees its new value")
}

@Suite("Derived attributes")
struct DerivedAttributeTests {
    @Test("every kind of derivation is computed at save, shown by the saving context, and read back after a restart")
    func everyKind() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.derivedAttributes
        var coordinator = try openCoordinator(dir, model: model)
        let (department, employees) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try saveDepartment(context, name: "Recherche & Développement", employees: [("Ada", 300), ("Émile", 100), ("Grace", 200)])
        }
        let saved = try newestTransaction(coordinator).timestamp
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try checkEveryKind(context, department: department, employees: employees, saved: saved)
        }
        coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try checkEveryKind(context, department: department, employees: employees, saved: saved)
        }
    }

    @Test("the saving context holds the computed values on the objects it saved")
    func savingContextShowsValues() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.insertNewObject(forEntityName: "Department")
            department.setValue("Sales", forKey: "name")
            let employee = try context.insertNewObject(forEntityName: "Employee")
            employee.setValue("Lin", forKey: "name")
            employee.setValue(Decimal(50), forKey: "salary")
            employee.setValue(department, forKey: "department")
            #expect(department.value(forKey: "employeeCount") == nil, "a new object's derived value is nil until it is saved")
            #expect(employee.value(forKey: "departmentName") == nil)
            try context.save()
            #expect(department.value(forKey: "employeeCount") as? Int64 == 1)
            #expect(employee.value(forKey: "departmentName") as? String == "Sales")

            // Before the next save, a derived value is the last saved one.
            department.setValue("Marketing", forKey: "name")
            let second = try context.insertNewObject(forEntityName: "Employee")
            second.setValue(department, forKey: "department")
            #expect(department.value(forKey: "employeeCount") as? Int64 == 1)
            #expect(department.value(forKey: "searchName") as? String == "sales")
            #expect(employee.value(forKey: "departmentName") as? String == "Sales")
            try context.save()
            #expect(department.value(forKey: "employeeCount") as? Int64 == 2)
            #expect(department.value(forKey: "searchName") as? String == "marketing")
            #expect(employee.value(forKey: "departmentName") as? String == "Marketing",
                    "an unchanged employee gets its department's new name")
        }
    }

    @Test("a department's count follows an employee who is inserted, moves, and is deleted, though the department has no other change")
    func countFollowsMoves() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, first, people) = try await departmentStore(dir, name: "A", employees: [("Ada", 10), ("Bo", 20)])
        let (second, _) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try saveDepartment(context, name: "B", employees: [("Cy", 30)])
        }
        // Another context moves Bo from A to B; neither department changes otherwise.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let bo = try context.existingObject(with: people[1])
            bo.setValue(try context.existingObject(with: second), forKey: "department")
            try context.save()
            #expect(try value("employeeCount", of: first, in: context) as? Int64 == 1)
            #expect(try value("employeeCount", of: second, in: context) as? Int64 == 2)
            #expect(try value("totalSalary", of: second, in: context) as? Decimal == 50)
            #expect(try value("departmentName", of: people[1], in: context) as? String == "B")
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try value("employeeCount", of: first, in: context) as? Int64 == 1)
            #expect(try value("totalSalary", of: first, in: context) as? Decimal == 10)
            #expect(try value("employeeCount", of: second, in: context) as? Int64 == 2)
            // A delete and an insert elsewhere.
            context.delete(try context.existingObject(with: people[0]))
            let newcomer = try context.insertNewObject(forEntityName: "Employee")
            newcomer.setValue(Decimal(5), forKey: "salary")
            newcomer.setValue(try context.existingObject(with: second), forKey: "department")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try value("employeeCount", of: first, in: context) as? Int64 == 0)
            #expect(try value("totalSalary", of: first, in: context) as? Decimal == 0, "@sum of nothing is 0")
            #expect(try value("averageSalary", of: first, in: context) == nil, "@avg of nothing is nil")
            #expect(try value("highestSalary", of: first, in: context) == nil)
            #expect(try value("employeeCount", of: second, in: context) as? Int64 == 3)
            #expect(try value("lowestSalary", of: second, in: context) as? Decimal == 5)
        }
        // Each change is in the event of the save that caused it.
        let moves = try coordinator.history(HistoryRequest())
        let lastChanges = try #require(moves.last).changes
        #expect(lastChanges.contains { $0.changedObjectID == first && $0.change(of: "employeeCount") != nil })
    }

    @Test("now() is the save's timestamp, set when the object itself is inserted or updated")
    func nowIsTheSaveTime() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, department, _) = try await departmentStore(dir, name: "Ops", employees: [])
        let inserted = try newestTransaction(coordinator).timestamp
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try value("lastSaved", of: department, in: context) as? Date == inserted)
            // An employee joining changes the count, not the department's own values.
            let employee = try context.insertNewObject(forEntityName: "Employee")
            employee.setValue(try context.existingObject(with: department), forKey: "department")
            try context.save()
            #expect(try value("employeeCount", of: department, in: context) as? Int64 == 1)
            #expect(try value("lastSaved", of: department, in: context) as? Date == inserted)
            try context.existingObject(with: department).setValue("Operations", forKey: "name")
            try context.save()
        }
        let renamed = try newestTransaction(coordinator)
        #expect(renamed.timestamp != inserted)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try value("lastSaved", of: department, in: context) as? Date == renamed.timestamp)
        }
    }

    @Test("setting a derived attribute — setValue, nil, setPrimitiveValue, a batch update — is refused by name and changes nothing")
    func settingIsRefused() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, department, _) = try await departmentStore(dir, name: "Legal", employees: [("Ann", 1)])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let object = try context.existingObject(with: department)
            for set in [
                { object.setValue(Int64(99), forKey: "employeeCount") },
                { object.setValue(nil, forKey: "employeeCount") },
                { object.setPrimitiveValue("x", forKey: "searchName") },
            ] {
                set()
                #expect(!object.hasChanges)
                #expect(object.value(forKey: "employeeCount") as? Int64 == 1)
                let error = #expect(throws: ContextError.self) { try context.save() }
                guard case .invalidArgument(let message)? = error else {
                    Issue.record("expected invalidArgument, got \(String(describing: error))")
                    continue
                }
                #expect(message.contains("Department.") && message.contains("is a derived attribute"))
            }
            // The problems were thrown and cleared: the next save works.
            object.setValue("Legal & Compliance", forKey: "name")
            try context.save()

            var update = BatchUpdateRequest(entityName: "Department")
            update.propertiesToUpdate = ["employeeCount": Int64(5)]
            let error = #expect(throws: ContextError.self) { try context.execute(update) }
            #expect(error?.description.contains("employeeCount is a derived attribute") == true)
            let insert = BatchInsertRequest(entityName: "Department", objects: [["name": "X", "searchName": "x"]])
            #expect(throws: ContextError.self) { try context.execute(insert) }
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try value("employeeCount", of: department, in: context) as? Int64 == 1)
            #expect(try value("searchName", of: department, in: context) as? String == "legal & compliance")
        }
    }

    @Test("fetches filter and sort by derived attributes, indexed or not")
    func fetchByDerived() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try saveDepartment(context, name: "Small", employees: [("A", 1)])
            _ = try saveDepartment(context, name: "Large", employees: [("B", 1), ("C", 2), ("D", 3)])
            _ = try saveDepartment(context, name: "Médium", employees: [("E", 5), ("F", 5)])
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let sorted = FetchRequest(
                entityName: "Department", predicate: try FormatPredicate(format: "employeeCount >= 2"),
                sortDescriptors: [FetchSortDescriptor(key: "employeeCount", ascending: false)])
            #expect(try context.fetch(sorted).map { $0.value(forKey: "name") as? String } == ["Large", "Médium"])
            let bySearchName = try FetchRequest(entityName: "Department", format: "searchName == %@", "medium")
            #expect(try context.fetch(bySearchName).map { $0.value(forKey: "name") as? String } == ["Médium"])
            let byTotal = FetchRequest(
                entityName: "Department", predicate: try FormatPredicate(format: "totalSalary > 5"),
                sortDescriptors: [FetchSortDescriptor(key: "totalSalary")])
            #expect(try context.fetch(byTotal).map { $0.value(forKey: "name") as? String } == ["Large", "Médium"])
            let employees = try FetchRequest(entityName: "Employee", format: "departmentSearchName BEGINSWITH 'l'")
            #expect(try context.count(for: employees) == 3)
        }
    }

    @Test("undo of saved work and rollback leave derived values to the next save, which recomputes them")
    func undoAndRollback() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, department, _) = try await departmentStore(dir, name: "Lab", employees: [("Ida", 10)])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let lab = try context.existingObject(with: department)
            let employee = try context.insertNewObject(forEntityName: "Employee")
            employee.setValue(Decimal(30), forKey: "salary")
            employee.setValue(lab, forKey: "department")
            try context.save()
            #expect(lab.value(forKey: "employeeCount") as? Int64 == 2)

            try context.undo()  // the insert: the employee goes again
            #expect(lab.value(forKey: "employeeCount") as? Int64 == 2, "until the save, the last saved value")
            try context.save()
            #expect(lab.value(forKey: "employeeCount") as? Int64 == 1)
            #expect(lab.value(forKey: "totalSalary") as? Decimal == 10)
            try context.redo()
            try context.save()
            #expect(lab.value(forKey: "employeeCount") as? Int64 == 2)

            lab.setValue("Workshop", forKey: "name")
            context.rollback()
            #expect(lab.value(forKey: "searchName") as? String == "lab")
        }
    }

    @Test("a persisted-undo context undoes a saved rename whose object's derived values another writer changed since, without a conflict")
    func persistedUndo() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        let department = try await privateContext(coordinator, name: "editor", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            let (department, _) = try saveDepartment(context, name: "Art", employees: [("Jo", 10)])
            try context.existingObject(with: department).setValue("Arts", forKey: "name")
            try context.save()
            return department
        }
        // Another writer changes the department's derived values since.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let other = try context.insertNewObject(forEntityName: "Employee")
            other.setValue(try context.existingObject(with: department), forKey: "department")
            try context.save()
        }
        try await privateContext(coordinator, name: "editor", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            let canUndo = context.canUndo
            #expect(canUndo)
            try context.undo()  // the rename
            try context.save()
            let object = try context.existingObject(with: department)
            #expect(object.value(forKey: "name") as? String == "Art")
            #expect(object.value(forKey: "searchName") as? String == "art")
            #expect(object.value(forKey: "employeeCount") as? Int64 == 2)
        }
    }

    @Test("another writer's change of derived values only is no conflict for a context that changes the object")
    func derivedChangeIsNoConflict() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, department, _) = try await departmentStore(dir, name: "HR", employees: [("Kim", 10)])
        let editor = privateContext(coordinator)
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            // Loaded, and kept by the unsaved change.
            try context.existingObject(with: department).setValue("People", forKey: "name")
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let employee = try context.insertNewObject(forEntityName: "Employee")
            employee.setValue(try context.existingObject(with: department), forKey: "department")
            try context.save()
        }
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            try context.save()  // the default merge policy (error) finds no conflict
            let object = try context.existingObject(with: department)
            #expect(object.value(forKey: "employeeCount") as? Int64 == 2)
            #expect(object.value(forKey: "searchName") as? String == "people")
        }
    }

    @Test("an automatically merging context sees derived values another context's save computed")
    func automaticMerge() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, department, _) = try await departmentStore(dir, name: "IT", employees: [("Lu", 10)])
        let viewer = privateContext(coordinator)
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let object = try context.existingObject(with: department)
            #expect(object.value(forKey: "employeeCount") as? Int64 == 1)
            object.setValue("Information", forKey: "name")  // an unsaved change keeps it in the context
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let employee = try context.insertNewObject(forEntityName: "Employee")
            employee.setValue(Decimal(20), forKey: "salary")
            employee.setValue(try context.existingObject(with: department), forKey: "department")
            try context.save()
        }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            let registered = context.registeredObject(for: department)
            let object = try #require(registered)
            #expect(object.value(forKey: "employeeCount") as? Int64 == 2)
            #expect(object.value(forKey: "totalSalary") as? Decimal == 30)
            #expect(object.value(forKey: "name") as? String == "Information", "the unsaved change was kept")
            #expect(object.value(forKey: "searchName") as? String == "it", "derived values follow the store, not unsaved changes")
        }
    }

    @Test("a child context's save computes nothing; the parent's save to the store does, and a merging child sees it")
    func nestedContexts() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, department, _) = try await departmentStore(dir, name: "Docs", employees: [("Mo", 10)])
        let parent = privateContext(coordinator)
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let docs = try context.existingObject(with: department)
            let employee = try context.insertNewObject(forEntityName: "Employee")
            employee.setValue(docs, forKey: "department")
            try context.save()  // into the parent
            #expect(docs.value(forKey: "employeeCount") as? Int64 == 1)
            docs.setValue("Documentation", forKey: "name")  // keeps the department in the child
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let docs = try context.existingObject(with: department)
            #expect(docs.value(forKey: "employeeCount") as? Int64 == 1, "not saved to the store yet")
            try context.save()
            #expect(docs.value(forKey: "employeeCount") as? Int64 == 2)
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let registered = context.registeredObject(for: department)
            let docs = try #require(registered)
            #expect(docs.value(forKey: "employeeCount") as? Int64 == 2)
            #expect(docs.value(forKey: "name") as? String == "Documentation")
        }
    }

    @Test("a uniqueness constraint on a derived attribute is checked on the computed values")
    func uniqueDerived() async throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Tag") {
                Attribute("name", .string)
                Attribute("key", .string).derived(from: "canonical(name)")
                Unique("key")
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Tag").setValue("Café", forKey: "name")
            try context.save()
            try context.insertNewObject(forEntityName: "Tag").setValue("CAFE", forKey: "name")
            let error = #expect(throws: ContextError.self) { try context.save() }
            guard case .storeRefused(let message)? = error else {
                Issue.record("expected storeRefused, got \(String(describing: error))")
                return
            }
            #expect(message.contains("uniqueness constraint (key) of Tag"))
            #expect(message.contains("cafe"))
        }
    }

    @Test("a model version that adds a derived attribute or changes a derivation computes it for every stored object, once")
    func newModelVersion() async throws {
        let dir = try TemporaryDirectory()
        func model(_ extra: [AttributeDescription]) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                Entity("Department") {
                    Attribute("name", .string)
                    for attribute in extra { attribute }
                    Relationship("employees", to: "Employee", inverse: "department", toMany: true)
                }
                Entity("Employee") {
                    Attribute("name", .string)
                    Attribute("salary", .decimal)
                    Relationship("department", to: "Department", inverse: "employees")
                }
            }
        }
        var coordinator = try openCoordinator(dir, model: try model([]))
        let (department, _) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try saveDepartment(context, name: "Field", employees: [("Ana", 0), ("Ben", 0)])
        }
        let before = try coordinator.history(HistoryRequest()).count

        let counted = try model([Attribute("employeeCount", .int32).derived(from: "employees.@count"), Attribute("key", .string).derived(from: "lowercase(name)")])
        coordinator = try openCoordinator(dir, model: counted)
        let migration = try newestTransaction(coordinator)
        #expect(migration.kind == .migration)
        #expect(migration.changes.count == 1)
        #expect(migration.changes.first?.changedProperties == ["employeeCount", "key"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try value("employeeCount", of: department, in: context) as? Int32 == 2)
            #expect(try value("key", of: department, in: context) as? String == "field")
        }
        coordinator = try openCoordinator(dir, model: counted)
        #expect(try coordinator.history(HistoryRequest()).count == before + 1, "the same model again computes nothing")

        let changed = try model([Attribute("employeeCount", .int32).derived(from: "employees.@count"), Attribute("key", .string).derived(from: "uppercase(name)")])
        coordinator = try openCoordinator(dir, model: changed)
        #expect(try newestTransaction(coordinator).changes.first?.changedProperties == ["key"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try value("key", of: department, in: context) as? String == "FIELD")
        }
    }

    @Test("a fetched results controller in the saving context sorted by a derived attribute follows the values the save computed")
    func fetchedResultsController() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let (small, _) = try saveDepartment(context, name: "Small", employees: [("A", 1)])
            _ = try saveDepartment(context, name: "Large", employees: [("B", 1), ("C", 1)])
            let request = FetchRequest(
                entityName: "Department", sortDescriptors: [FetchSortDescriptor(key: "employeeCount", ascending: false)])
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            try controller.performFetch()
            let delegate = RecordingDelegate(mirroring: controller)
            controller.delegate = delegate
            #expect(names(controller.fetchedObjects) == ["Large", "Small"])
            for name in ["D", "E"] {
                let employee = try context.insertNewObject(forEntityName: "Employee")
                employee.setValue(name, forKey: "name")
                employee.setValue(try context.existingObject(with: small), forKey: "department")
            }
            try context.save()
            context.processPendingChanges()
            #expect(names(controller.fetchedObjects) == ["Small", "Large"])
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
            #expect(delegate.batches.contains { batch in batch.objects.contains { $0.type == .move } })
        }
    }

    @Test("a derived value that doesn't fit its attribute's type fails the save by name, and nothing is written")
    func overflowFailsTheSave() async throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Order") {
                Attribute("total", .int16).derived(from: "lines.@sum.amount")
                Relationship("lines", to: "Line", inverse: "order", toMany: true)
            }
            Entity("Line") {
                Attribute("amount", .int16)
                Relationship("order", to: "Order", inverse: "lines")
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let order = try context.insertNewObject(forEntityName: "Order")
            for amount in [Int16(30_000), 30_000] {
                let line = try context.insertNewObject(forEntityName: "Line")
                line.setValue(amount, forKey: "amount")
                line.setValue(order, forKey: "order")
            }
            let error = #expect(throws: ContextError.self) { try context.save() }
            #expect(error?.description.contains("Order.total") == true)
            #expect(error?.description.contains("60000") == true)
            let hasChanges = context.hasChanges
            #expect(hasChanges, "nothing was written; the changes are kept")
        }
        #expect(try coordinator.history(HistoryRequest()).isEmpty)
    }

    /// Products with a unique code and a derived lower-case name; shelves count their products.
    static var catalogWithDerivations: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Product") {
                    Attribute("code", .string)
                    Attribute("name", .string)
                    Attribute("price", .int64)
                    Attribute("searchName", .string).derived(from: "lowercase(name)")
                    Relationship("shelf", to: "Shelf", inverse: "products")
                    Unique("code")
                }
                Entity("Shelf") {
                    Attribute("label", .string)
                    Attribute("productCount", .int64).derived(from: "products.@count")
                    Relationship("products", to: "Product", inverse: "shelf", toMany: true)
                }
            }
        }
    }

    @Test("a batch insert upserting into stored objects with derived attributes, under every merge policy, writes and recomputes them")
    func batchUpsertWithDerived() async throws {
        for policy in [StandardMergePolicy.overwrite, .mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump, .rollback] {
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: try Self.catalogWithDerivations)
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let product = try context.insertNewObject(forEntityName: "Product")
                product.setValue("P1", forKey: "code")
                product.setValue("Lamp", forKey: "name")
                product.setValue(Int64(10), forKey: "price")
                try context.save()
                #expect(product.value(forKey: "searchName") as? String == "lamp")
            }
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                context.mergePolicy = policy
                let rows: [[String: any Sendable]] = [
                    ["code": "P1", "name": "Desk Lamp", "price": Int64(12)],
                    ["code": "P2", "name": "Chair"],
                    ["code": "P2", "name": "Stool"],
                ]
                _ = try context.execute(BatchInsertRequest(entityName: "Product", objects: rows))
                let request = FetchRequest(entityName: "Product", sortDescriptors: [FetchSortDescriptor(key: "code")])
                let products = try context.fetch(request)
                #expect(products.count == 2, "\(policy)")
                for product in products {
                    let name = product.value(forKey: "name") as? String
                    #expect(product.value(forKey: "searchName") as? String == name?.lowercased(), "\(policy)")
                }
            }
        }
    }

    @Test("undo of a saved delete of a department and an employee re-creates them without their old derived values, computed again at the save; redo deletes them again")
    func undoSavedDeleteWithDerived() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        let departmentID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try saveDepartment(context, name: "A", employees: [("Ada", 10), ("Bo", 20)]).department
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.existingObject(with: departmentID)
            let employees = (department.value(forKey: "employees") as? Set<ManagedObject>) ?? []
            #expect(department.value(forKey: "employeeCount") as? Int64 == 2)
            let ada = try #require(employees.first { $0.value(forKey: "name") as? String == "Ada" })
            #expect(ada.value(forKey: "departmentName") as? String == "A")
            context.delete(ada)
            context.delete(department)
            try context.save()
            try context.undo()
            try context.save()
            let restored = try context.existingObject(with: departmentID)
            #expect(restored.value(forKey: "employeeCount") as? Int64 == 2)
            #expect(restored.value(forKey: "searchName") as? String == "a")
            try context.redo()
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Department")) == 0)
            try context.undo()
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.existingObject(with: departmentID)
            #expect(department.value(forKey: "employeeCount") as? Int64 == 2)
            #expect(department.value(forKey: "totalSalary") as? Decimal == 30)
            let employees = try context.fetch(try FetchRequest(entityName: "Employee", format: "departmentName == 'A'"))
            #expect(employees.count == 2)
        }
    }

    @Test("undo of an unsaved delete of a loaded department brings it back with its derived values as loaded; the next save succeeds")
    func undoUnsavedDeleteWithDerived() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        let departmentID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try saveDepartment(context, name: "A", employees: [("Ada", 10), ("Bo", 20)]).department
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.existingObject(with: departmentID)
            #expect(department.value(forKey: "employeeCount") as? Int64 == 2)
            context.delete(department)
            try context.undo()
            #expect(!department.isDeleted)
            #expect(department.value(forKey: "employeeCount") as? Int64 == 2)
            #expect(department.value(forKey: "searchName") as? String == "a")
            department.setValue("B", forKey: "name")
            try context.save()
            #expect(department.value(forKey: "searchName") as? String == "b")
        }
    }

    @Test("the did-save notification names the objects given new derived values that the saving context doesn't hold, so a context merging it refreshes them")
    func didSaveNamesDerivedUpdates() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, department, people) = try await departmentStore(dir, name: "A", employees: [("Ada", 10), ("Bo", 20)])
        let reader = privateContext(coordinator)
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            #expect(try value("departmentName", of: people[0], in: context) as? String == "A")
        }
        let writer = privateContext(coordinator)
        let save = try await writer.perform { (context: isolated ManagedObjectContext) throws -> ContextDidSave? in
            var seen: ContextDidSave?
            _ = context.addObserver { change in
                if case .didSave(let save) = change.notification { seen = save }
            }
            try context.existingObject(with: department).setValue("Renamed", forKey: "name")
            try context.save()
            return seen
        }
        let didSave = try #require(save)
        #expect(didSave.updated == Set([department] + people))
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            context.mergeChanges(fromContextDidSave: didSave)
            #expect(try value("departmentName", of: people[0], in: context) as? String == "Renamed")
        }
    }

    @Test("validateValue(_:forKey:) of a derived attribute fails (1550) naming it, whatever the value, and changes nothing; the save, which doesn't validate derived attributes, still works (before: any value passed)")
    func validatingDerivedIsRefused() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, department, _) = try await departmentStore(dir, name: "Legal", employees: [("Ann", 1)])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let object = try context.existingObject(with: department)
            let values: [Any?] = [Int64(1), Int64(99), nil, "x"]
            for given in values {
                var value = given
                let error = #expect(throws: ContextError.self) { try object.validateValue(&value, forKey: "employeeCount") }
                guard case .validation(let failures)? = error else {
                    Issue.record("expected a validation error for \(String(describing: given)), got \(String(describing: error))")
                    continue
                }
                #expect(failures.map(\.code.rawValue) == [1550])
                #expect(failures.first?.key == "employeeCount")
                #expect(failures.first?.entity == "Department")
                #expect(failures.first?.object == department.uriRepresentation())
                #expect(
                    failures.first?.message.hasPrefix("Department.employeeCount is a derived attribute (derivation employees.@count): the store computes its value at save, so it can't be set") == true,
                    "\(failures)")
                #expect((error.map { $0 as NSError })?.code == 1550)
            }
            var name: Any? = "Legal & Compliance"
            try object.validateValue(&name, forKey: "name")
            #expect(!object.hasChanges)
            object.setValue("Legal & Compliance", forKey: "name")
            try context.save()
        }
    }
}
