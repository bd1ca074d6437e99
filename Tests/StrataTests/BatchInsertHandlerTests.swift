import Foundation
import Strata
import StrataTestSupport
import Testing

/// An employee filled through typed properties: `token` set in the plain `awakeFromInsert()`,
/// which a batch insert's handler object gets; and, in `awakeFromInsert(in:)`, which it
/// doesn't (it belongs to no context), a `Badge` inserted beside it.
final class FilledEmployee: ManagedObject {
    var name: String? {
        get { self.get("name") }
        set { setValue(newValue, forKey: "name") }
    }
    var salary: Double {
        get { self.get("salary") ?? 0 }
        set { setValue(newValue, forKey: "salary") }
    }
    var email: String? {
        get { self.get("email") }
        set { setValue(newValue, forKey: "email") }
    }

    override func awakeFromInsert() {
        super.awakeFromInsert()
        setPrimitiveValue(UUID().uuidString, forKey: "token")
    }

    override func awakeFromInsert(in context: isolated ManagedObjectContext) {
        super.awakeFromInsert(in: context)
        _ = try? context.insertNewObject(forEntityName: "Badge")
    }
}

/// `BatchInsertRequest` with a managed-object handler (Core Data's
/// `init(entityName:managedObjectHandler:)`), spec 0006 §20.2.
@Suite("Batch insert through a managed-object handler: objects filled through their properties, inserted as dictionaries are")
struct BatchInsertHandlerTests {
    static var model: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Employee") {
                    Attribute("email", .string)
                    Attribute("name", .string)
                    Attribute("age", .int32, default: 30)
                    Attribute("salary", .double)
                    Attribute("token", .string)
                    Attribute("note", .string).transient()
                    Relationship("department", to: "Department", inverse: "employees")
                    Unique("email")
                }
                Entity("Department") {
                    Attribute("name", .string)
                    Relationship("employees", to: "Employee", inverse: "department", toMany: true)
                }
                Entity("Badge") {
                    Attribute("code", .string)
                }
            }
        }
    }

    static func open(_ dir: TemporaryDirectory) throws -> PersistentStoreCoordinator {
        try openCoordinator(dir, model: try model, classes: [(FilledEmployee.self, "Employee")])
    }

    func head(_ coordinator: PersistentStoreCoordinator) throws -> UInt64 { try coordinator.persistentStores[0].log.read { try $0.head } }

    /// The stored employees' values by email: name, age, salary, token, note.
    func stored(_ coordinator: PersistentStoreCoordinator) async throws -> [String: [String: String]] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var rows: [String: [String: String]] = [:]
            for object in try context.fetch(FetchRequest(entityName: "Employee")) {
                var row: [String: String] = [:]
                for key in ["name", "age", "salary", "token", "note"] {
                    if let value = object.value(forKey: key) { row[key] = "\(value)" }
                }
                rows[object.value(forKey: "email") as? String ?? "?"] = row
            }
            return rows
        }
    }

    @Test("typed fill: the handler gets a new object of the registered class, awakeFromInsert run, defaults set; its attributes are inserted in one import transaction; the executing context is untouched")
    func typedFill() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try Self.open(dir)
        let context = privateContext(coordinator, name: "importer", author: "nightly")
        let (result, sawDefaults) = try await context.perform { (context: isolated ManagedObjectContext) throws in
            var next = 0
            var sawDefaults = true
            var request = BatchInsertRequest(FilledEmployee.self) { employee in
                guard next < 3 else { return true }
                next += 1
                sawDefaults = sawDefaults && employee.value(forKey: "age") as? Int32 == 30 && employee.value(forKey: "token") != nil
                    && employee.managedObjectContext == nil && employee.isInserted
                employee.email = "e\(next)@example.com"
                employee.name = "E\(next)"
                employee.salary = Double(next) * 1000
                employee.setValue("not stored", forKey: "note")
                if next == 2 { employee.setValue(Int32(41), forKey: "age") }
                return false
            }
            #expect(request.entityName == "FilledEmployee", "the class's name until the request runs")
            request.resultType = .objectIDs
            let result = try context.execute(request)
            #expect(context.registeredObjects.isEmpty && !context.hasChanges && !context.canUndo, "no object, change or undo in the executing context")
            return (result, sawDefaults)
        }
        #expect(sawDefaults, "each object came with the model's defaults and its awakeFromInsert()'s token, in no context")
        let ids = try #require(result.objectIDs)
        #expect(ids.count == 3 && ids.allSatisfy { !$0.isTemporaryID && $0.entityName == "Employee" })
        let event = try coordinator.persistentStores[0].log.read { try $0.event(try #require(result.sequence)) }
        #expect(event.kind == .import && event.author == "nightly" && event.contextName == "importer")
        #expect(event.changes.count == 3, "the employees only: awakeFromInsert(in:), which inserts a badge, isn't run for an object in no context")
        let rows = try await stored(coordinator)
        #expect(rows.keys.sorted() == ["e1@example.com", "e2@example.com", "e3@example.com"])
        #expect(rows["e1@example.com"]?["name"] == "E1" && rows["e3@example.com"]?["salary"] == "3000.0")
        #expect(rows["e1@example.com"]?["age"] == "30" && rows["e2@example.com"]?["age"] == "41", "the default, or the value set")
        #expect(Set(rows.values.compactMap { $0["token"] }).count == 3, "awakeFromInsert ran once for each (new) object")
        #expect(rows.values.allSatisfy { $0["note"] == nil }, "the transient value was not stored")
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    @Test("setValue fill through the untyped handler: the object is of the class registered for the entity; count result")
    func setValueFill() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try Self.open(dir)
        let (count, classes) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var next = 0
            var classes: Set<String> = []
            var request = BatchInsertRequest(entityName: "Employee", managedObjectHandler: { object in
                guard next < 4 else { return true }
                next += 1
                classes.insert("\(type(of: object))")
                object.setValue("s\(next)@example.com", forKey: "email")
                object.setValue(next == 4 ? nil : "S\(next)", forKey: "name")
                return false
            })
            request.resultType = .count
            return (try context.execute(request).count, classes)
        }
        #expect(count == 4)
        #expect(classes == ["FilledEmployee"])
        let rows = try await stored(coordinator)
        #expect(rows.count == 4 && rows["s2@example.com"]?["name"] == "S2" && rows["s4@example.com"]?["name"] == nil)
    }

    @Test("a handler typed by its closure, naming the entity, run from a child context: objects of the handler's class, made on the coordinator; the parent is untouched")
    func typedByNameFromChild() async throws {
        let dir = try TemporaryDirectory()
        // No class registered: the handler's class makes the objects.
        let coordinator = try openCoordinator(dir, model: try Self.model)
        let parent = privateContext(coordinator)
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        let (count, classes) = try await child.perform { (context: isolated ManagedObjectContext) throws in
            var next = 0
            var classes: Set<String> = []
            var request = BatchInsertRequest(entityName: "Employee", managedObjectHandler: { (employee: FilledEmployee) in
                guard next < 2 else { return true }
                next += 1
                classes.insert("\(type(of: employee))")
                employee.email = "c\(next)@example.com"
                return false
            })
            request.resultType = .count
            let count = try context.execute(request).count
            #expect(!context.hasChanges && context.registeredObjects.isEmpty)
            return (count, classes)
        }
        #expect(count == 2 && classes == ["FilledEmployee"])
        let parentUntouched = await parent.perform { (context: isolated ManagedObjectContext) in !context.hasChanges && context.registeredObjects.isEmpty }
        #expect(parentUntouched)
        #expect(try await stored(coordinator).keys.sorted() == ["c1@example.com", "c2@example.com"])
    }

    @Test("the handler returning true stops the request: that call's object is not inserted; true at once inserts nothing and writes nothing")
    func stopOnTrue() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try Self.open(dir)
        let (empty, calls) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var calls = 0
            var request = BatchInsertRequest(FilledEmployee.self) { _ in
                calls += 1
                return true
            }
            request.resultType = .objectIDs
            return (try context.execute(request), calls)
        }
        #expect(calls == 1 && empty.objectIDs == [] && empty.sequence == nil)
        #expect(try head(coordinator) == 0, "nothing was written")

        let count = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var next = 0
            var request = BatchInsertRequest(FilledEmployee.self) { employee in
                next += 1
                employee.email = "x\(next)@example.com"
                return next == 3  // filled, then stopped: not inserted
            }
            request.resultType = .count
            return try context.execute(request).count
        }
        #expect(count == 2)
        #expect(try await stored(coordinator).keys.sorted() == ["x1@example.com", "x2@example.com"])
    }

    @Test("a value that doesn't convert or an unknown key refuses the whole request, naming the object's position and key, as does a handler's error; nothing is written")
    func validationNamesIndex() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try Self.open(dir)
        let cases: [(String, @Sendable (ManagedObject) -> Void, String)] = [
            ("age", { $0.setValue("old", forKey: "age") }, "batch insert into Employee, object 3: age:"),
            ("shoeSize", { $0.setValue(42, forKey: "shoeSize") }, "object 3: "),
        ]
        for (key, spoil, expected) in cases {
            await #expect {
                try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                    var next = 0
                    _ = try context.execute(BatchInsertRequest(entityName: "Employee", managedObjectHandler: { object in
                        guard next < 4 else { return true }
                        next += 1
                        object.setValue("v\(next)@example.com", forKey: "email")
                        if next == 3 { spoil(object) }
                        return false
                    }))
                }
            } throws: { error in
                guard case ContextError.invalidArgument(let detail) = error else { return false }
                return detail.contains(expected) && detail.contains(key)
            }
        }
        struct Stop: Error {}
        await #expect(throws: Stop.self) {
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                var next = 0
                _ = try context.execute(BatchInsertRequest(FilledEmployee.self) { employee in
                    next += 1
                    employee.email = "t\(next)@example.com"
                    if next == 2 { throw Stop() }
                    return false
                })
            }
        }
        #expect(try head(coordinator) == 0, "nothing was written")
    }

    @Test("uniqueness per the context's merge policy: .error refuses the request whole; mergeByPropertyObjectTrump upserts into the stored object")
    func uniqueness() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try Self.open(dir)
        let context = privateContext(coordinator)
        let existing = try await context.perform { (context: isolated ManagedObjectContext) throws in
            let employee = try context.insert(FilledEmployee.self)
            employee.email = "ada@example.com"
            employee.name = "Ada"
            employee.salary = 10
            try context.save()
            return employee.objectID
        }
        let before = try head(coordinator)
        let rows: [(String, String)] = [("new@example.com", "New"), ("ada@example.com", "Ada L.")]
        await #expect {
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                var next = 0
                _ = try context.execute(BatchInsertRequest(FilledEmployee.self) { employee in
                    guard next < rows.count else { return true }
                    (employee.email, employee.name) = rows[next]
                    next += 1
                    return false
                })
            }
        } throws: { error in
            guard case ContextError.storeRefused(let detail) = error else { return false }
            return detail.contains("batch insert into Employee") && detail.contains("email") && detail.contains("nothing was written")
        }
        #expect(try head(coordinator) == before, "nothing was written")

        let ids = try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .mergeByPropertyObjectTrump
            var next = 0
            var request = BatchInsertRequest(FilledEmployee.self) { employee in
                guard next < rows.count else { return true }
                (employee.email, employee.name) = rows[next]
                next += 1
                return false
            }
            request.resultType = .objectIDs
            return try context.execute(request).objectIDs ?? []
        }
        #expect(ids.count == 2 && ids.last == existing, "the second object merged into the stored one")
        let stored = try await stored(coordinator)
        #expect(stored.count == 2 && stored["ada@example.com"]?["name"] == "Ada L." && stored["ada@example.com"]?["salary"] == "10.0")
    }

    @Test("a relationship set in the handler refuses the request, naming the object and relationship; the executing context's objects are untouched; nothing is written")
    func relationshipRefused() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try Self.open(dir)
        let context = privateContext(coordinator)
        let department = try await context.perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.insertNewObject(forEntityName: "Department")
            department.setValue("R&D", forKey: "name")
            try context.save()
            return department.objectID
        }
        let before = try head(coordinator)
        for viaObject in [false, true] {
            await #expect {
                try await context.perform { (context: isolated ManagedObjectContext) throws in
                    let held = try context.existingObject(with: department)
                    var next = 0
                    _ = try context.execute(BatchInsertRequest(FilledEmployee.self) { employee in
                        guard next < 3 else { return true }
                        next += 1
                        employee.email = "r\(next)@example.com"
                        if next == 2 { employee.setValue(viaObject ? held : department, forKey: "department") }
                        return false
                    })
                }
            } throws: { error in
                guard case ContextError.invalidArgument(let detail) = error else { return false }
                return detail.contains("object 2") && detail.contains("department is a relationship")
            }
        }
        let untouched = try await context.perform { (context: isolated ManagedObjectContext) throws in
            let held = try context.existingObject(with: department)
            return !context.hasChanges && (held.value(forKey: "employees") as? Set<ManagedObject>)?.isEmpty == true
        }
        #expect(untouched, "the department in the executing context gained no member")
        #expect(try head(coordinator) == before, "nothing was written")
    }

    @Test("the scratch objects are forgotten after each call: the previous one is gone when the next is filled, however many the request inserts")
    func scratchStaysFlat() async throws {
        let total = ProcessInfo.processInfo.environment["STRATA_BATCH_HANDLER_OBJECTS"].flatMap(Int.init) ?? 2_000
        let dir = try TemporaryDirectory()
        let coordinator = try Self.open(dir)
        let (count, kept, executingCount) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var next = 0
            var kept = 0
            weak var previous: FilledEmployee?
            var request = BatchInsertRequest(FilledEmployee.self) { employee in
                if previous != nil { kept += 1 }
                previous = employee
                guard next < total else { return true }
                next += 1
                employee.email = "m\(next)@example.com"
                return false
            }
            request.resultType = .count
            let count = try context.execute(request).count
            return (count, kept, context.registeredObjects.count)
        }
        #expect(count == total)
        #expect(kept == 0, "no handler object outlived its call (\(kept) did)")
        #expect(executingCount == 0)
        let stored = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            (try context.count(for: FetchRequest<ManagedObject>(entityName: "Employee")), try context.count(for: FetchRequest<ManagedObject>(entityName: "Badge")))
        }
        #expect(stored == (total, 0))
    }
}
