import Foundation
import Strata
import StrataTestSupport
import Testing

// Save validation, delete rules and relationship counts as a Core Data developer porting an
// app writes them by heart, run against real stores (spec 0006 §6, §7).

/// The review's model: departments that deny being deleted while they have employees and
/// cascade to their (ordered) rooms and on to desks; employees with a cascading badge and
/// many-to-many teams of two or three; squads of two or three players (an optional count), a
/// player's required squad; nodes cascading to their children (many-to-many, for cycles and
/// diamonds); folders that take no action on their files; one-to-one customer and order
/// (an order's customer is required); a sub-entity `Manager` of `Employee`.
enum ValidationReviewModels {
    static var org: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Department") {
                    Attribute("name", .string).required().providedAtInsert()
                    Attribute("budget", .int32).range(min: .int32(0), max: .int32(1000))
                    Relationship("employees", to: "Employee", inverse: "department", toMany: true, deleteRule: .deny)
                    Relationship("rooms", to: "Room", inverse: "department", toMany: true, ordered: true, deleteRule: .cascade)
                }
                Entity("Employee") {
                    Attribute("name", .string).required().providedAtInsert().length(min: 1, max: 20)
                    Attribute("mood", .string).transient().length(max: 4)
                    Attribute("stamp", .int32)
                    Relationship("department", to: "Department", inverse: "employees")
                    Relationship("badge", to: "Badge", inverse: "holder", deleteRule: .cascade)
                    Relationship("teams", to: "Team", inverse: "members", toMany: true)
                }
                Entity("Manager", parent: "Employee") {
                    Attribute("level", .int16, default: 1).required().range(min: .int16(1), max: .int16(5))
                }
                Entity("Room") {
                    Attribute("number", .int32, default: 0).required()
                    Relationship("department", to: "Department", inverse: "rooms")
                    Relationship("desks", to: "Desk", inverse: "room", toMany: true, deleteRule: .cascade)
                }
                Entity("Desk") {
                    Attribute("label", .string)
                    Relationship("room", to: "Room", inverse: "desks")
                }
                Entity("Badge") {
                    Attribute("code", .string)
                    Relationship("holder", to: "Employee", inverse: "badge")
                }
                Entity("Team") {
                    Attribute("name", .string)
                    Relationship("members", to: "Employee", inverse: "teams", toMany: true).count(min: 2, max: 3)
                }
                Entity("Squad") {
                    Attribute("name", .string)
                    Relationship("players", to: "Player", inverse: "squad", toMany: true).count(min: 2, max: 3)
                }
                Entity("Player") {
                    Attribute("name", .string)
                    Relationship("squad", to: "Squad", inverse: "players").required()
                }
                Entity("Node") {
                    Attribute("name", .string)
                    Relationship("children", to: "Node", inverse: "parents", toMany: true, deleteRule: .cascade)
                    Relationship("parents", to: "Node", inverse: "children", toMany: true)
                }
                Entity("Folder") {
                    Attribute("name", .string)
                    Relationship("files", to: "File", inverse: "folder", toMany: true, deleteRule: .noAction)
                }
                Entity("File") {
                    Attribute("name", .string)
                    Relationship("folder", to: "Folder", inverse: "files")
                }
                Entity("Customer") {
                    Attribute("name", .string)
                    Relationship("order", to: "Order", inverse: "customer", deleteRule: .deny)
                }
                Entity("Order") {
                    Attribute("number", .int32, default: 0).required()
                    Relationship("customer", to: "Customer", inverse: "order").required()
                }
                Entity("Event") {
                    Attribute("code", .string).matching("[A-Z]{3}")
                    Attribute("when", .date).range(min: .date(Date(timeIntervalSince1970: 0)), max: .date(Date(timeIntervalSince1970: 1_000_000)))
                    Attribute("blob", .binaryData).length(min: 2, max: 4)
                    Attribute("price", .decimal).range(min: .decimal(0), max: .decimal(Decimal(string: "9.99") ?? 9))
                }
                Entity("Specimen") {
                    Attribute("i16", .int16); Attribute("i32", .int32); Attribute("i64", .int64)
                    Attribute("dec", .decimal); Attribute("dbl", .double); Attribute("flt", .float)
                    Attribute("str", .string); Attribute("flag", .boolean); Attribute("when", .date)
                    Attribute("data", .binaryData); Attribute("id", .uuid); Attribute("link", .uri)
                    Attribute("blob", .transformable(valueTypeName: "Data"))
                }
                Entity("Note") {
                    Attribute("title", .string).length(max: 5)
                    Attribute("body", .string)
                }
            }
        }
    }
}

/// A note whose `validateValue(_:forKey:)` shortens a title to the model's five characters
/// before the model's rules see it (a coercing validation method).
final class TrimmingNote: ManagedObject {
    override func validateValue(_ value: inout Any?, forKey key: String) throws {
        if key == "title", let title = value as? String, title.count > 5 {
            value = String(title.prefix(5))
        } else if key == "title", value as? String == "Bad" {
            value = 42  // not a string
        }
        try super.validateValue(&value, forKey: key)
    }
}

/// An employee whose `willSave` stamps itself (once), and, when told to, renames a
/// colleague that has no changes of its own.
final class StampingEmployee: ManagedObject {
    var willSaveCalls = 0
    var renames: ManagedObject?
    var unstamps: ManagedObject?
    /// Sets the stamp to one more each call: through KVC (never settles) or as a primitive value.
    var bumps: (primitive: Bool, on: Bool) = (false, false)
    override func willSave() {
        willSaveCalls += 1
        if bumps.on {
            let next = ((value(forKey: "stamp") as? Int32) ?? 0) + 1
            if bumps.primitive { setPrimitiveValue(next, forKey: "stamp") } else { setValue(next, forKey: "stamp") }
            return
        }
        if !isDeleted, (value(forKey: "stamp") as? Int32) != 7 { setValue(Int32(7), forKey: "stamp") }
        if let colleague = renames {
            renames = nil
            colleague.setValue("", forKey: "name")
        }
        if let colleague = unstamps {
            unstamps = nil
            colleague.setValue(Int32(0), forKey: "stamp")
        }
    }
}

/// A department that hands its employees to the department named "Fallback" when deleted.
final class RelocatingDepartment: ManagedObject {
    override func prepareForDeletion(in context: isolated ManagedObjectContext) {
        super.prepareForDeletion(in: context)
        guard let request = try? FetchRequest(entityName: "Department", format: "name == 'Fallback'"),
            let fallback = (try? context.fetch(request))?.first, fallback !== self
        else { return }
        for employee in mutableSetValue(forKey: "employees").objects { employee.setValue(fallback, forKey: "department") }
    }
}

/// A squad whose ported `validatePlayers:` lives in `validateValue(_:forKey:)`: no two
/// players of one name.
final class UniqueNamesSquad: ManagedObject {
    var keysSeen: [String] = []
    override func validateValue(_ value: inout Any?, forKey key: String) throws {
        keysSeen.append(key)
        try super.validateValue(&value, forKey: key)
        if key == "players", let players = value as? Set<ManagedObject> {
            let names = players.compactMap { $0.value(forKey: "name") as? String }
            if Set(names).count != names.count {
                throw ContextError.validation([ValidationFailure(
                    code: .managedObjectValidation, entity: "Squad", key: "players", value: nil, message: "two players share a name")])
            }
        }
    }
}

/// A node that deletes its children itself in `prepareForDeletion` (a child cascades to
/// its parents, so the delete comes back to the node while its hook runs); counts its calls.
final class PruningNode: ManagedObject {
    var prepareCalls = 0
    override func prepareForDeletion(in context: isolated ManagedObjectContext) {
        super.prepareForDeletion(in: context)
        prepareCalls += 1
        for child in mutableSetValue(forKey: "parents").objects { context.delete(child) }
    }
}

/// A badge whose insert check skips super (so the model's rules don't run, as in Core Data)
/// and throws a plain error for the code "X"; its update check throws a validation failure
/// without naming the object.
final class CheckedBadge: ManagedObject {
    struct Refused: Error, CustomStringConvertible { var description: String { "code X is retired" } }
    override func validateForInsert() throws {
        if value(forKey: "code") as? String == "X" { throw Refused() }
    }
    override func validateForUpdate() throws {
        try super.validateForUpdate()
        if value(forKey: "code") as? String == "Y" {
            throw ContextError.validation([ValidationFailure(code: .managedObjectValidation, entity: "Badge", key: "code", value: .string("Y"), message: "no Y")])
        }
    }
}

/// A subclass with no overrides: its values go through the base `validateValue(_:forKey:)`.
final class Specimen: ManagedObject {}

/// A room that can't be deleted while its number is 101 (a rule added after super's).
final class GuardedRoom: ManagedObject {
    override func validateForDelete() throws {
        try super.validateForDelete()
        if value(forKey: "number") as? Int32 == 101 {
            throw ContextError.validation([ValidationFailure(
                code: .managedObjectValidation, entity: "Room", key: "number", value: .int32(101), message: "room 101 stays")])
        }
    }
}

@Suite("Save validation, delete rules and relationship counts, as a porter writes them (spec 0006 §6, §7)")
struct ValidationReviewTests {
    private func open(_ dir: TemporaryDirectory) throws -> PersistentStoreCoordinator {
        try openCoordinator(dir, model: try ValidationReviewModels.org, classes: [(TrimmingNote.self, "Note"), (StampingEmployee.self, "Employee"), (RelocatingDepartment.self, "Department")])
    }

    /// The failures a throwing save reports, or nil (recorded as an issue) when it doesn't
    /// throw a validation error.
    private func failures(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> [ValidationFailure]? {
        do {
            try body()
            Issue.record("expected a validation error, the save succeeded", sourceLocation: sourceLocation)
        } catch let error as ContextError {
            if case .validation(let failures) = error { return failures }
            Issue.record("expected a validation error, got \(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("expected a validation error, got \(error)", sourceLocation: sourceLocation)
        }
        return nil
    }

    private func count(_ coordinator: PersistentStoreCoordinator, _ entity: String, _ format: String? = nil) throws -> Int {
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws -> Int in
            let request = try format.map { try FetchRequest(entityName: entity, format: $0) } ?? FetchRequest(entityName: entity)
            return try context.count(for: request)
        }
    }

    private func members(_ object: ManagedObject, _ key: String) -> Set<ObjectIdentifier> {
        Set(object.mutableSetValue(forKey: key).objects.map(ObjectIdentifier.init))
    }

    // MARK: - Save validation

    @Test("every failure of every object in one error (1560), each naming object, key and value; nothing written; fixed, the same context saves")
    func everyFailureInOneError() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            sales.setValue(Int32(5000), forKey: "budget")
            let ops = try context.insertNewObject(forEntityName: "Department")
            ops.setValue(Int32(-1), forKey: "budget")
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue(String(repeating: "a", count: 21), forKey: "name")
            guard let found = failures({ try context.save() }) else { return }
            let described = found.map { "\($0.code.rawValue) \($0.entity).\($0.key)=\(String(describing: $0.value)) @\($0.object?.absoluteString ?? "-")" }
            #expect(found.count == 4, "\(described)")
            #expect(found.contains { $0.code.rawValue == 1610 && $0.key == "budget" && $0.value == .int32(5000) && $0.object == sales.objectID.uriRepresentation() })
            #expect(found.contains { $0.code.rawValue == 1620 && $0.key == "budget" && $0.value == .int32(-1) && $0.object == ops.objectID.uriRepresentation() })
            #expect(found.contains { $0.code.rawValue == 1570 && $0.key == "name" && $0.value == nil && $0.object == ops.objectID.uriRepresentation() })
            #expect(found.contains { $0.code.rawValue == 1660 && $0.key == "name" && $0.object == ann.objectID.uriRepresentation() })
            let error = ContextError.validation(found)
            #expect(error.code == 1560)
            #expect((error as NSError).code == 1560 && (error as NSError).domain == NSCocoaErrorDomain)
            let dirty = context.hasChanges, inserted = context.insertedObjects.count
            #expect(dirty && inserted == 3)
            #expect(try count(coordinator, "Department") == 0 && count(coordinator, "Employee") == 0, "nothing written")

            sales.setValue(Int32(500), forKey: "budget")
            ops.setValue(Int32(0), forKey: "budget")
            ops.setValue("Ops", forKey: "name")
            ann.setValue("Ann", forKey: "name")
            try context.save()
            #expect(try count(coordinator, "Department") == 2 && count(coordinator, "Employee") == 1)
        }
    }

    @Test("the failure code names: 1600 is NSValidationRelationshipDeniedDeleteError")
    func codeNames() {
        #expect(ValidationFailure.Code(rawValue: 1600).description == "1600 (NSValidationRelationshipDeniedDeleteError)")
    }

    @Test("a validateValue(_:forKey:) that coerces a value: the coerced value is saved, not the one the model's rules refused")
    func coercingValidateValue() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let note = try context.insertNewObject(forEntityName: "Note")
            note.setValue("Hello world", forKey: "title")
            try context.save()
            #expect(note.value(forKey: "title") as? String == "Hello")
        }
        let stored = try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws -> String? in
            try context.fetch(FetchRequest(entityName: "Note")).first?.value(forKey: "title") as? String
        }
        #expect(stored == "Hello", "the store holds a title the model's maximum length refuses")
    }

    @Test("a transient attribute's rules are checked at save, as Core Data validates every property")
    func transientValidated() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue("Ann", forKey: "name")
            ann.setValue("grumpy", forKey: "mood")
            let found = failures { try context.save() }
            #expect(found?.map(\.code.rawValue) == [1660] && found?.first?.key == "mood")
            ann.setValue("calm", forKey: "mood")
            try context.save()
        }
    }

    @Test("a sub-entity's object: the inherited rules and its own, naming the sub-entity")
    func subEntityRules() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let boss = try context.insertNewObject(forEntityName: "Manager")
            boss.setValue(Int16(9), forKey: "level")
            let found = failures { try context.save() } ?? []
            #expect(Set(found.map { "\($0.entity).\($0.key) \($0.code.rawValue)" }) == ["Manager.name 1570", "Manager.level 1610"])
            boss.setValue("Bo", forKey: "name")
            boss.setValue(Int16(2), forKey: "level")
            try context.save()
        }
    }

    @Test("an optional attribute left nil passes its range; a value a willSave hook sets is validated, and so is a colleague it changes")
    func willSaveChangesValidated() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")  // budget nil: optional, its range not checked
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue("Ann", forKey: "name")
            let bob = try context.insertNewObject(forEntityName: "Employee")
            bob.setValue("Bob", forKey: "name")
            try context.save()
            #expect(bob.value(forKey: "stamp") as? Int32 == 7)

            // Ann changes; her willSave renames Bob, who had no changes, to "" (too short).
            ann.setValue("Annie", forKey: "name")
            (ann as? StampingEmployee)?.renames = bob
            let found = failures { try context.save() }
            #expect(found?.count == 1 && found?.first?.object == bob.objectID.uriRepresentation() && found?.first?.code.rawValue == 1670)
        }
    }

    @Test("willSave runs again on an object that a willSave hook changed, as Core Data does, before the save validates it")
    func willSaveOnObjectsHooksChanged() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue("Ann", forKey: "name")
            let bob = try context.insertNewObject(forEntityName: "Employee")
            bob.setValue("Bob", forKey: "name")
            try context.save()
            #expect(bob.value(forKey: "stamp") as? Int32 == 7)
            // Ann's willSave clears Bob's stamp (Bob had no changes): Bob's willSave stamps him again.
            ann.setValue("Annie", forKey: "name")
            (ann as? StampingEmployee)?.unstamps = bob
            try context.save()
            #expect(bob.value(forKey: "stamp") as? Int32 == 7)
            let dirty = context.hasChanges
            #expect(!dirty)
        }
        #expect(try count(coordinator, "Employee", "stamp == 7") == 2)
    }

    @Test("a willSave hook that sets a primitive value runs once (Core Data doesn't notice it); one that changes a value every time stops the save, which writes nothing")
    func willSavePrimitiveAndRunaway() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue("Ann", forKey: "name")
            try context.save()
            let hooked = try #require(ann as? StampingEmployee)
            hooked.bumps = (primitive: true, on: true)
            ann.setValue("Annie", forKey: "name")
            let before = hooked.willSaveCalls
            try context.save()
            #expect(hooked.willSaveCalls == before + 1)
            #expect(ann.value(forKey: "stamp") as? Int32 == 8)

            hooked.bumps = (primitive: false, on: true)
            ann.setValue("Anne", forKey: "name")
            let error = #expect(throws: ContextError.self) { try context.save() }
            #expect(error?.code == 134030)
            #expect(error?.description.contains("willSave kept changing") == true, "\(String(describing: error))")
            hooked.bumps = (primitive: false, on: false)
            context.rollback()
        }
        #expect(try count(coordinator, "Employee", "name == 'Annie' AND stamp == 8") == 1)
    }

    @Test("a validateValue(_:forKey:) that replaces a value with one of the wrong type fails the save (1550) and writes nothing")
    func coercionToWrongType() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let note = try context.insertNewObject(forEntityName: "Note")
            note.setValue("Bad", forKey: "title")
            let found = failures { try context.save() }
            #expect(found?.count == 1 && found?.first?.code.rawValue == 1550 && found?.first?.key == "title")
            #expect(note.value(forKey: "title") as? String == "Bad")
            note.setValue("Fine", forKey: "title")
            try context.save()
        }
        #expect(try count(coordinator, "Note") == 1)
    }

    @Test("a coerced value is one undo step of its own after the save's: undo takes the title back to what the app set")
    func coercionUndo() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let note = try context.insertNewObject(forEntityName: "Note")
            note.setValue("Hi", forKey: "title")
            try context.save()
            note.setValue("Hello there", forKey: "title")
            try context.save()
            #expect(note.value(forKey: "title") as? String == "Hello")
            try context.undo()
            #expect(note.value(forKey: "title") as? String == "Hello there")
            try context.undo()
            #expect(note.value(forKey: "title") as? String == "Hi")
            try context.save()
            // Undo registration off: the coerced value is saved all the same.
            context.disableUndoRegistration()
            let other = try context.insertNewObject(forEntityName: "Note")
            other.setValue("Goodbye", forKey: "title")
            try context.save()
            note.setValue("Hi again", forKey: "title")
            try context.save()
            context.enableUndoRegistration()
        }
        #expect(try count(coordinator, "Note", "title == 'Hi ag'") == 1)
        #expect(try count(coordinator, "Note", "title == 'Goodb'") == 1)
    }

    @Test("prepareForDeletion moves the employees to another department: the deny rule no longer refuses the save")
    func prepareForDeletionBeforeRules() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            let fallback = try context.insertNewObject(forEntityName: "Department")
            fallback.setValue("Fallback", forKey: "name")
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue("Ann", forKey: "name")
            ann.setValue(sales, forKey: "department")
            try context.save()
            context.delete(sales)
            #expect(ann.value(forKey: "department") as? ManagedObject === fallback)
            try context.save()
        }
        #expect(try count(coordinator, "Employee", "department.name == 'Fallback'") == 1)
        #expect(try count(coordinator, "Department") == 1)
    }

    // MARK: - Delete rules

    @Test("nullify: a deleted employee leaves its department's employees and its teams' members; a deleted room leaves the ordered rooms in order")
    func nullifyBothSides() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            var people: [ManagedObject] = []
            for name in ["Ann", "Bob", "Cy"] {
                let person = try context.insertNewObject(forEntityName: "Employee")
                person.setValue(name, forKey: "name")
                person.setValue(sales, forKey: "department")
                people.append(person)
            }
            let team = try context.insertNewObject(forEntityName: "Team")
            team.mutableSetValue(forKey: "members").add(people[0])
            team.mutableSetValue(forKey: "members").add(people[1])
            team.mutableSetValue(forKey: "members").add(people[2])
            var rooms: [ManagedObject] = []
            for number in 1...3 {
                let room = try context.insertNewObject(forEntityName: "Room")
                room.setValue(Int32(number), forKey: "number")
                sales.mutableOrderedSetValue(forKey: "rooms").add(room)
                rooms.append(room)
            }
            try context.save()
            context.delete(people[0])
            context.delete(rooms[1])
            #expect(members(sales, "employees") == Set([people[1], people[2]].map(ObjectIdentifier.init)))
            #expect(members(team, "members") == Set([people[1], people[2]].map(ObjectIdentifier.init)))
            #expect(sales.mutableOrderedSetValue(forKey: "rooms").objects.map { $0.value(forKey: "number") as? Int32 } == [1, 3])
            try context.save()
        }
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try #require(try context.fetch(FetchRequest(entityName: "Department")).first)
            #expect(sales.mutableSetValue(forKey: "employees").count == 2)
            #expect(sales.mutableOrderedSetValue(forKey: "rooms").objects.map { $0.value(forKey: "number") as? Int32 } == [1, 3])
            let team = try #require(try context.fetch(FetchRequest(entityName: "Team")).first)
            #expect(team.mutableSetValue(forKey: "members").count == 2)
        }
    }

    @Test("cascade: a chain (department → rooms → desks), a cycle, a diamond, into an object already deleted, across a many-to-many")
    func cascadeShapes() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            for number in 1...2 {
                let room = try context.insertNewObject(forEntityName: "Room")
                room.setValue(Int32(number), forKey: "number")
                room.setValue(sales, forKey: "department")
                for _ in 0..<2 {
                    let desk = try context.insertNewObject(forEntityName: "Desk")
                    desk.setValue(room, forKey: "room")
                }
            }
            // Nodes: root → a, b; a → d; b → d (diamond); d → root (cycle); other → d (shared).
            var nodes: [String: ManagedObject] = [:]
            for name in ["root", "a", "b", "d", "other", "e"] {
                let node = try context.insertNewObject(forEntityName: "Node")
                node.setValue(name, forKey: "name")
                nodes[name] = node
            }
            func link(_ parent: String, _ child: String) throws {
                let p = try #require(nodes[parent]), c = try #require(nodes[child])
                p.mutableSetValue(forKey: "children").add(c)
            }
            try link("root", "a"); try link("root", "b"); try link("a", "d"); try link("b", "d")
            try link("d", "root"); try link("other", "d"); try link("root", "e")
            try context.save()

            let e = try #require(nodes["e"])
            context.delete(e)  // already deleted when the cascade reaches it
            context.delete(sales)
            context.delete(try #require(nodes["root"]))
            #expect(context.deletedObjects.count == 1 + 2 + 4 + 5)
            let other = try #require(nodes["other"])
            #expect(!other.isDeleted && other.mutableSetValue(forKey: "children").count == 0, "the shared child left the surviving parent")
            try context.save()
        }
        #expect(try count(coordinator, "Room") == 0 && count(coordinator, "Desk") == 0)
        #expect(try count(coordinator, "Node") == 1)
    }

    @Test("deny: the delete succeeds, the save fails with 1600 naming object and relationship and writes nothing; rollback restores the object and its inverses")
    func denyAndRollback() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            let room = try context.insertNewObject(forEntityName: "Room")
            room.setValue(sales, forKey: "department")
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue("Ann", forKey: "name")
            ann.setValue(sales, forKey: "department")
            let empty = try context.insertNewObject(forEntityName: "Department")
            empty.setValue("Empty", forKey: "name")
            try context.save()

            context.delete(sales)
            #expect(sales.isDeleted && room.isDeleted)
            guard let found = failures({ try context.save() }) else { return }
            #expect(found.count == 1)
            #expect(found.first?.code.rawValue == 1600 && found.first?.key == "employees" && found.first?.entity == "Department")
            #expect(found.first?.object == sales.objectID.uriRepresentation())
            #expect(try count(coordinator, "Room") == 1 && count(coordinator, "Department") == 2)
            context.rollback()
            #expect(!sales.isDeleted && !room.isDeleted)
            #expect(room.value(forKey: "department") as? ManagedObject === sales)
            #expect(ann.value(forKey: "department") as? ManagedObject === sales)
            #expect(members(sales, "employees") == [ObjectIdentifier(ann)])
            #expect(sales.mutableOrderedSetValue(forKey: "rooms").objects.first === room)

            // An empty deny relationship: fine.
            context.delete(empty)
            try context.save()
            // The denying employee deleted in the same save: fine, whichever is deleted first.
            context.delete(sales)
            context.delete(ann)
            try context.save()
        }
        #expect(try count(coordinator, "Department") == 0 && count(coordinator, "Employee") == 0)
    }

    @Test("deny: an employee moved to another department after the delete no longer denies it")
    func denyAfterMovingAway() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            let ops = try context.insertNewObject(forEntityName: "Department")
            ops.setValue("Ops", forKey: "name")
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue("Ann", forKey: "name")
            ann.setValue(sales, forKey: "department")
            try context.save()
            context.delete(sales)
            ann.setValue(ops, forKey: "department")
            try context.save()
        }
        #expect(try count(coordinator, "Employee", "department.name == 'Ops'") == 1)
    }

    @Test("no action: the department's employees keep naming it; the store refuses the dangling reference (133021), writes nothing, and the context can fix it")
    func noActionDangling() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let folder = try context.insertNewObject(forEntityName: "Folder")
            let file = try context.insertNewObject(forEntityName: "File")
            file.setValue(folder, forKey: "folder")
            try context.save()
            context.delete(folder)
            #expect(file.value(forKey: "folder") as? ManagedObject === folder, "no action leaves the reference")
            let error = #expect(throws: ContextError.self) { try context.save() }
            #expect(error?.code == 133021)
            #expect(try count(coordinator, "Folder") == 1)
            file.setValue(nil, forKey: "folder")
            try context.save()
        }
        #expect(try count(coordinator, "Folder") == 0 && count(coordinator, "File") == 1)
    }

    @Test("deleting an unsaved insert: its inverses let go, its cascade goes with it, nothing of it is written")
    func deleteUnsavedInsert() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            try context.save()
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue("Ann", forKey: "name")
            ann.setValue(sales, forKey: "department")
            let badge = try context.insertNewObject(forEntityName: "Badge")
            badge.setValue(ann, forKey: "holder")
            context.delete(ann)
            #expect(sales.mutableSetValue(forKey: "employees").count == 0)
            #expect(context.insertedObjects.isEmpty)
            try context.save()
            // Now the department can go: nothing denies it.
            context.delete(sales)
            try context.save()
        }
        #expect(try count(coordinator, "Employee") == 0 && count(coordinator, "Badge") == 0 && count(coordinator, "Department") == 0)
    }

    @Test("delete, undo, save: nothing is deleted; redo, save: the cascade is deleted")
    func deleteUndoSave() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            let room = try context.insertNewObject(forEntityName: "Room")
            room.setValue(sales, forKey: "department")
            try context.save()
            context.delete(sales)
            context.processPendingChanges()
            try context.undo()
            #expect(!sales.isDeleted && !room.isDeleted)
            #expect(room.value(forKey: "department") as? ManagedObject === sales)
            try context.save()
            #expect(try count(coordinator, "Room") == 1)
            try context.redo()
            try context.save()
        }
        #expect(try count(coordinator, "Room") == 0 && count(coordinator, "Department") == 0)
    }

    // MARK: - Counts

    @Test("min count after a nullify: deleting a player leaves its squad one short (1580, naming the squad)")
    func minCountAfterNullify() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let squad = try context.insertNewObject(forEntityName: "Squad")
            let a = try context.insertNewObject(forEntityName: "Player")
            let b = try context.insertNewObject(forEntityName: "Player")
            a.setValue(squad, forKey: "squad")
            b.setValue(squad, forKey: "squad")
            try context.save()
            context.delete(a)
            let found = failures { try context.save() }
            #expect(found?.count == 1 && found?.first?.code.rawValue == 1580 && found?.first?.object == squad.objectID.uriRepresentation())
            context.delete(b)
            try context.save()  // optional and empty: fine
        }
    }

    @Test("counts of squads the context never loaded, changed only through a player's inverse (1580 and 1590)")
    func countsThroughInverseOfUnloadedOwner() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        let (playerID, fullID, shortID) = try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let short = try context.insertNewObject(forEntityName: "Squad")
            let full = try context.insertNewObject(forEntityName: "Squad")
            var first: ManagedObject?
            for _ in 0..<2 {
                let p = try context.insertNewObject(forEntityName: "Player")
                p.setValue(short, forKey: "squad")
                first = first ?? p
            }
            for _ in 0..<3 {
                let p = try context.insertNewObject(forEntityName: "Player")
                p.setValue(full, forKey: "squad")
            }
            try context.save()
            return (try #require(first).objectID, full.objectID, short.objectID)
        }
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let player = try context.existingObject(with: playerID)
            player.setValue(try context.object(with: fullID), forKey: "squad")
            let found = failures { try context.save() } ?? []
            #expect(Set(found.map { "\($0.code.rawValue) \($0.object?.absoluteString ?? "")" })
                == ["1580 \(shortID.uriRepresentation().absoluteString)", "1590 \(fullID.uriRepresentation().absoluteString)"])
        }
    }

    @Test("a required to-one emptied by a nullify (1570 on each player) and by a one-to-one stolen partner (1570 on the old order)")
    func requiredToOneEmptiedIndirectly() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        let (customerID, oldOrderID) = try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let squad = try context.insertNewObject(forEntityName: "Squad")
            let a = try context.insertNewObject(forEntityName: "Player")
            let b = try context.insertNewObject(forEntityName: "Player")
            a.setValue(squad, forKey: "squad")
            b.setValue(squad, forKey: "squad")
            let customer = try context.insertNewObject(forEntityName: "Customer")
            let order = try context.insertNewObject(forEntityName: "Order")
            order.setValue(customer, forKey: "customer")
            try context.save()
            context.delete(squad)
            let found = failures { try context.save() } ?? []
            #expect(found.count == 2 && found.allSatisfy { $0.code.rawValue == 1570 && $0.key == "squad" && $0.entity == "Player" })
            #expect(Set(found.compactMap(\.object)) == [a.objectID.uriRepresentation(), b.objectID.uriRepresentation()])
            context.rollback()
            return (customer.objectID, order.objectID)
        }
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let customer = try context.existingObject(with: customerID)
            let newer = try context.insertNewObject(forEntityName: "Order")
            customer.setValue(newer, forKey: "order")
            #expect(newer.value(forKey: "customer") as? ManagedObject === customer)
            let found = failures { try context.save() } ?? []
            #expect(found.count == 1 && found.first?.code.rawValue == 1570 && found.first?.object == oldOrderID.uriRepresentation())
        }
    }

    @Test("a team of two that loses a member by a cascade from elsewhere (1580); a team emptied completely passes only while optional")
    func countAfterCascade() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue("Ann", forKey: "name")
            let bob = try context.insertNewObject(forEntityName: "Employee")
            bob.setValue("Bob", forKey: "name")
            let badge = try context.insertNewObject(forEntityName: "Badge")
            badge.setValue(ann, forKey: "holder")
            let team = try context.insertNewObject(forEntityName: "Team")
            team.mutableSetValue(forKey: "members").add(ann)
            team.mutableSetValue(forKey: "members").add(bob)
            try context.save()
            context.delete(ann)
            #expect(badge.isDeleted)
            let found = failures { try context.save() }
            #expect(found?.count == 1 && found?.first?.code.rawValue == 1580 && found?.first?.object == team.objectID.uriRepresentation())
            context.delete(bob)
            try context.save()
        }
    }

    // MARK: - Round two: deny and counts in the corners

    @Test("deny: an employee inserted and deleted again before the save doesn't deny its department's delete")
    func denyIgnoresInsertedThenDeleted() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            try context.save()
            let temp = try context.insertNewObject(forEntityName: "Employee")
            temp.setValue("Temp", forKey: "name")
            temp.setValue(sales, forKey: "department")
            context.delete(sales)
            context.delete(temp)
            try context.save()
        }
        #expect(try count(coordinator, "Department") == 0 && count(coordinator, "Employee") == 0)
    }

    @Test("deny in a child context: its own insert deleted again doesn't deny; the parent's unsaved insert does")
    func denyInChildWithTemporaryIDs() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        let parent = privateContext(coordinator)
        let (salesID, opsID) = try parent.performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            let ops = try context.insertNewObject(forEntityName: "Department")
            ops.setValue("Ops", forKey: "name")
            try context.save()
            // An unsaved employee of Ops, in the parent only.
            let bob = try context.insertNewObject(forEntityName: "Employee")
            bob.setValue("Bob", forKey: "name")
            bob.setValue(ops, forKey: "department")
            return (sales.objectID, ops.objectID)
        }
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try child.performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.existingObject(with: salesID)
            let temp = try context.insertNewObject(forEntityName: "Employee")
            temp.setValue("Temp", forKey: "name")
            temp.setValue(sales, forKey: "department")
            context.delete(sales)
            context.delete(temp)
            try context.save()
            context.delete(try context.existingObject(with: opsID))
            let found = failures { try context.save() }
            #expect(found?.map(\.code) == [.relationshipDeniedDelete])
        }
    }

    @Test("deny on a to-one: a customer with an order can't be deleted (1600 naming customer and order); with its order it can")
    func denyToOne() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let customer = try context.insertNewObject(forEntityName: "Customer")
            let order = try context.insertNewObject(forEntityName: "Order")
            order.setValue(customer, forKey: "customer")
            try context.save()
            context.delete(customer)
            let found = failures { try context.save() }
            #expect(found?.count == 1 && found?.first?.code == .relationshipDeniedDelete && found?.first?.key == "order")
            #expect(found?.first?.object == customer.objectID.uriRepresentation())
            #expect(found?.first?.description.contains(order.objectID.description) == true)
            context.delete(order)
            try context.save()
        }
        #expect(try count(coordinator, "Customer") == 0 && count(coordinator, "Order") == 0)
    }

    @Test("deny checked against a department the context never loaded; undo of the delete instead of rollback, then the save writes nothing")
    func denyUnloadedThenUndo() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        let salesID = try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue("Ann", forKey: "name")
            ann.setValue(sales, forKey: "department")
            try context.save()
            return sales.objectID
        }
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.object(with: salesID)
            context.delete(sales)
            let found = failures { try context.save() }
            #expect(found?.map(\.code) == [.relationshipDeniedDelete])
            try context.undo()
            #expect(!sales.isDeleted)
            try context.save()
            let dirty = context.hasChanges
            #expect(!dirty)
        }
        #expect(try count(coordinator, "Department") == 1 && count(coordinator, "Employee", "department.name == 'Sales'") == 1)
    }

    @Test("propagatesDeletesAtEndOfEvent off: the deferred nullify leaves the squad short at save (1580), deny still refuses (1600), both in one error")
    func deferredRulesThenValidation() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let squad = try context.insertNewObject(forEntityName: "Squad")
            let a = try context.insertNewObject(forEntityName: "Player")
            let b = try context.insertNewObject(forEntityName: "Player")
            a.setValue(squad, forKey: "squad")
            b.setValue(squad, forKey: "squad")
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue("Ann", forKey: "name")
            ann.setValue(sales, forKey: "department")
            try context.save()
            context.propagatesDeletesAtEndOfEvent = false
            context.delete(a)
            context.delete(sales)
            #expect(squad.mutableSetValue(forKey: "players").count == 2, "not propagated yet")
            let found = failures { try context.save() } ?? []
            #expect(Set(found.map(\.code.rawValue)) == [1580, 1600], "\(found)")
            #expect(squad.mutableSetValue(forKey: "players").count == 1)
            context.rollback()
            #expect(squad.mutableSetValue(forKey: "players").count == 2 && !a.isDeleted && !sales.isDeleted)
        }
        #expect(try count(coordinator, "Player") == 2 && count(coordinator, "Department") == 1)
    }

    @Test("a deleted employee's teams the context never loaded lose a member (1580 naming the team)")
    func manyToManyCountUnloaded() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        let (annID, teamID) = try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            var first: ManagedObject?
            for name in ["Ann", "Bob"] {
                let person = try context.insertNewObject(forEntityName: "Employee")
                person.setValue(name, forKey: "name")
                team.mutableSetValue(forKey: "members").add(person)
                first = first ?? person
            }
            try context.save()
            return (try #require(first).objectID, team.objectID)
        }
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: annID))
            let found = failures { try context.save() }
            #expect(found?.count == 1 && found?.first?.code.rawValue == 1580 && found?.first?.object == teamID.uriRepresentation())
        }
    }

    @Test("a child context's save validates (1600 in the child, the parent untouched); fixed in the child, the parent saves it")
    func childContextDeny() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        let parent = privateContext(coordinator)
        let salesID = try parent.performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue("Ann", forKey: "name")
            ann.setValue(sales, forKey: "department")
            try context.save()
            return sales.objectID
        }
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try child.performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.existingObject(with: salesID)
            context.delete(sales)
            let found = failures { try context.save() }
            #expect(found?.map(\.code) == [.relationshipDeniedDelete])
            for employee in sales.mutableSetValue(forKey: "employees").objects { context.delete(employee) }
            try context.save()
        }
        try parent.performAndWait { (context: isolated ManagedObjectContext) throws in
            try context.save()
        }
        #expect(try count(coordinator, "Department") == 0 && count(coordinator, "Employee") == 0)
    }

    @Test("validateForDelete overridden to add a failure after super's: every object's failures together, the deny one too")
    func validateForDeleteOverride() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try ValidationReviewModels.org, classes: [(GuardedRoom.self, "Room")])
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue("Ann", forKey: "name")
            ann.setValue(sales, forKey: "department")
            let room = try context.insertNewObject(forEntityName: "Room")
            room.setValue(Int32(101), forKey: "number")
            room.setValue(sales, forKey: "department")
            try context.save()
            context.delete(sales)  // cascades to the room, whose hook refuses room 101
            let found = failures { try context.save() } ?? []
            #expect(Set(found.map { "\($0.code.rawValue) \($0.entity).\($0.key)" }) == ["1600 Department.employees", "1550 Room.number"])
            #expect(found.first { $0.entity == "Room" }?.object == room.objectID.uriRepresentation())
        }
        #expect(try count(coordinator, "Room") == 1)
    }

    @Test("a one-way relationship (seed 001's monitor) left naming a deleted student: the store refuses it (133021), nothing written; cleared, the save goes through")
    func oneWayNullifyLeavesReference() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.studentClass)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let klass = try context.insertNewObject(forEntityName: "ClassEntity")
            let student = try context.insertNewObject(forEntityName: "StudentEntity")
            klass.setValue(student, forKey: "monitor")
            try context.save()
            context.delete(student)
            #expect(klass.value(forKey: "monitor") as? ManagedObject === student, "nothing reaches the class")
            let error = #expect(throws: ContextError.self) { try context.save() }
            #expect(error?.code == 133021 && error?.description.contains("monitor") == true, "\(String(describing: error))")
            #expect(try count(coordinator, "StudentEntity") == 1)
            klass.setValue(nil, forKey: "monitor")
            try context.save()
        }
        #expect(try count(coordinator, "StudentEntity") == 0)
    }

    @Test("a reference to an unsaved insert deleted again fails validation (1550, naming object and relationship) rather than reaching the store; cleared, the save goes through")
    func danglingReferenceToRemovedInsert() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let ann = try context.insertNewObject(forEntityName: "Employee")
            ann.setValue("Ann", forKey: "name")
            try context.save()
            let gone = try context.insertNewObject(forEntityName: "Department")
            gone.setValue("Gone", forKey: "name")
            context.delete(gone)
            ann.setValue(gone, forKey: "department")
            // A plain new player (whose values pass without a rule to evaluate) naming a squad deleted before its save.
            let squad = try context.insertNewObject(forEntityName: "Squad")
            context.delete(squad)
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Pat", forKey: "name")
            player.setValue(squad, forKey: "squad")
            let found = failures { try context.save() } ?? []
            #expect(Set(found.map { "\($0.code.rawValue) \($0.entity).\($0.key) \($0.object?.absoluteString ?? "")" }) == [
                "1550 Employee.department \(ann.objectID.uriRepresentation().absoluteString)",
                "1550 Player.squad \(player.objectID.uriRepresentation().absoluteString)",
            ], "\(found)")
            #expect(found.allSatisfy { $0.message.contains("dangling reference") })
            #expect(ann.value(forKey: "department") as? ManagedObject == nil)
            // Cleared in a later undo group: the save goes through (before, the store refused
            // the earlier group's reference, 133021, however the app fixed it).
            context.processPendingChanges()
            ann.setValue(nil, forKey: "department")
            context.delete(player)
            try context.save()

            // Through a proxy: refused at once (nothing added), reported by the next save.
            let removed = try context.insertNewObject(forEntityName: "Team")
            context.delete(removed)
            ann.mutableSetValue(forKey: "teams").add(removed)
            #expect(ann.mutableSetValue(forKey: "teams").count == 0)
            let problem = #expect(throws: ContextError.self) { try context.save() }
            #expect(problem?.description.contains("dangling reference") == true, "\(String(describing: problem))")
            try context.save()

            // A reference made before the delete, which the delete (deny on the department's
            // side) leaves: 1550 at save; cleared later, the save goes through.
            let d = try context.insertNewObject(forEntityName: "Department")
            d.setValue("D", forKey: "name")
            ann.setValue(d, forKey: "department")
            context.processPendingChanges()
            context.delete(d)
            let left = failures { try context.save() }
            #expect(left?.count == 1 && left?.first?.code.rawValue == 1550 && left?.first?.key == "department")
            ann.setValue(nil, forKey: "department")
            try context.save()
        }
        #expect(try count(coordinator, "Department") == 0 && count(coordinator, "Player") == 0 && count(coordinator, "Employee") == 1)
        #expect(try count(coordinator, "Team") == 0)
    }

    @Test("validateValue(_:forKey:) sees relationship keys too (a ported validatePlayers:): an inserted squad's, then a changed one's; an unchanged relationship isn't loaded for it")
    func validateValueForRelationships() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try ValidationReviewModels.org, classes: [(UniqueNamesSquad.self, "Squad")])
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let squad = try context.insertNewObject(forEntityName: "Squad")
            for name in ["Pat", "Pat"] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(name, forKey: "name")
                player.setValue(squad, forKey: "squad")
            }
            let found = failures { try context.save() }
            #expect(found?.count == 1 && found?.first?.key == "players" && found?.first?.object == squad.objectID.uriRepresentation())
            let players = squad.mutableSetValue(forKey: "players").objects
            players.first?.setValue("Sam", forKey: "name")
            try context.save()
            // A third Pat joins: the squad's players change through the inverse, and the rule sees it.
            let third = try context.insertNewObject(forEntityName: "Player")
            third.setValue("Pat", forKey: "name")
            third.setValue(squad, forKey: "squad")
            #expect(failures { try context.save() }?.first?.message == "two players share a name")
            third.setValue("Kim", forKey: "name")
            try context.save()
            // Renaming the squad alone: its players (unchanged) aren't validated again.
            let hooked = try #require(squad as? UniqueNamesSquad)
            hooked.keysSeen = []
            squad.setValue("Reds", forKey: "name")
            try context.save()
            #expect(hooked.keysSeen == ["name"])
        }
        #expect(try count(coordinator, "Player") == 3)
    }

    @Test("prepareForDeletion runs once when the objects it deletes cascade back to the object being deleted; undo, redo and the save agree")
    func reentrantDeleteRunsHookOnce() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try ValidationReviewModels.org, classes: [(PruningNode.self, "Node")])
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            // The child cascades to its children (the parent); the parent's hook deletes the
            // nodes naming it as a child (the child), which cascades back to the parent.
            let parent = try context.insertNewObject(forEntityName: "Node")
            parent.setValue("parent", forKey: "name")
            let child = try context.insertNewObject(forEntityName: "Node")
            child.setValue("child", forKey: "name")
            child.mutableSetValue(forKey: "children").add(parent)
            try context.save()
            context.delete(parent)
            #expect((parent as? PruningNode)?.prepareCalls == 1)
            #expect((child as? PruningNode)?.prepareCalls == 1)
            #expect(parent.isDeleted && child.isDeleted)
            context.processPendingChanges()
            try context.undo()
            #expect(!parent.isDeleted && !child.isDeleted)
            #expect(members(child, "children") == [ObjectIdentifier(parent)] && members(parent, "parents") == [ObjectIdentifier(child)])
            try context.redo()
            #expect(parent.isDeleted && child.isDeleted)
            try context.save()
        }
        #expect(try count(coordinator, "Node") == 0)
    }

    @Test("a validation predicate's warning is localized through the model's dictionary, for a plain object and a subclass alike")
    func localizedPredicateWarning() throws {
        for classes in [[], [(Run.self as ManagedObject.Type, "Run")]] {
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: try SeedModels.run, classes: classes)
            try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
                let run = try context.insertNewObject(forEntityName: "Run")
                run.setValue(Date(timeIntervalSince1970: 0), forKey: "date")
                run.setValue(Int32(-1), forKey: "processID")
                let found = failures { try context.save() }
                #expect(found?.count == 1)
                #expect(found?.first?.code.rawValue == 1550 && found?.first?.key == "processID" && found?.first?.value == .int32(-1))
                #expect(found?.first?.message == "Process ID must not be less than 1", "\(String(describing: found))")
                #expect(found?.first?.object == run.objectID.uriRepresentation())
                run.setValue(Int32(3), forKey: "processID")
                try context.save()
            }
        }
    }

    @Test("dates (1630/1640), data lengths in bytes (1660/1670), a pattern matched whole (1680), decimals (1610/1620)")
    func moreCodes() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let late = try context.insertNewObject(forEntityName: "Event")
            late.setValue("ABCD", forKey: "code")  // contains a match, doesn't match whole
            late.setValue(Date(timeIntervalSince1970: 2_000_000), forKey: "when")
            late.setValue(Data([1, 2, 3, 4, 5]), forKey: "blob")
            late.setValue(Decimal(string: "10.00"), forKey: "price")
            let early = try context.insertNewObject(forEntityName: "Event")
            early.setValue("abc", forKey: "code")
            early.setValue(Date(timeIntervalSince1970: -1), forKey: "when")
            early.setValue(Data([1]), forKey: "blob")
            early.setValue(Decimal(string: "-0.01"), forKey: "price")
            let found = failures { try context.save() } ?? []
            func codes(_ object: ManagedObject) -> [String: Int] {
                Dictionary(found.filter { $0.object == object.objectID.uriRepresentation() }.map { ($0.key, $0.code.rawValue) }, uniquingKeysWith: { a, _ in a })
            }
            #expect(codes(late) == ["code": 1680, "when": 1630, "blob": 1660, "price": 1610], "\(found)")
            #expect(codes(early) == ["code": 1680, "when": 1640, "blob": 1670, "price": 1620], "\(found)")
            #expect(found.count == 8)
            late.setValue("ABC", forKey: "code")
            late.setValue(Date(timeIntervalSince1970: 1_000_000), forKey: "when")
            late.setValue(Data([1, 2, 3, 4]), forKey: "blob")
            late.setValue(Decimal(string: "9.99"), forKey: "price")
            context.delete(early)
            try context.save()
        }
        #expect(try count(coordinator, "Event") == 1)
    }

    @Test("validateForInsert without super skips the model's rules; a plain error it throws is 1550 naming the object; a failure validateForUpdate throws without an object gets it")
    func insertAndUpdateOverrides() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try ValidationReviewModels.org, classes: [(CheckedBadge.self, "Badge")])
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let badge = try context.insertNewObject(forEntityName: "Badge")
            badge.setValue("X", forKey: "code")
            let found = failures { try context.save() }
            #expect(found?.count == 1 && found?.first?.code.rawValue == 1550 && found?.first?.object == badge.objectID.uriRepresentation())
            #expect(found?.first?.message.contains("code X is retired") == true)
            badge.setValue("A", forKey: "code")
            try context.save()
            badge.setValue("Y", forKey: "code")
            let updated = failures { try context.save() }
            #expect(updated?.count == 1 && updated?.first?.object == badge.objectID.uriRepresentation() && updated?.first?.message == "no Y")
            context.rollback()
        }
        #expect(try count(coordinator, "Badge", "code == 'A'") == 1)
    }

    @Test("a changed object pointed at an object the same save deletes: the delete's nullify reaches it at the save (Core Data's end-of-event propagation), so its required squad is missing (1570) and nothing reaches the store")
    func danglingReferenceToDeletedObject() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let reds = try context.insertNewObject(forEntityName: "Squad")
            let blues = try context.insertNewObject(forEntityName: "Squad")
            var players: [ManagedObject] = []
            for squad in [reds, reds, blues, blues] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(squad, forKey: "squad")
                players.append(player)
            }
            try context.save()
            context.delete(reds)  // nullifies its players' squad; they move to the blues…
            players[0].setValue(blues, forKey: "squad")
            players[1].setValue(blues, forKey: "squad")
            players[2].setValue(reds, forKey: "squad")  // …and a blue is pointed at the deleted reds
            let found = failures { try context.save() } ?? []
            #expect(found.count == 1, "\(found)")
            // Before, the reference stayed and the save failed on it as dangling (1550); the
            // dangling check itself: RelationshipReviewTests' noAction case.
            #expect(found.first?.code.rawValue == 1570 && found.first?.key == "squad" && found.first?.object == players[2].objectID.uriRepresentation())
            #expect(try count(coordinator, "Squad") == 2)
            context.delete(players[2])
            try context.save()
        }
        #expect(try count(coordinator, "Squad") == 1 && count(coordinator, "Player") == 3)
    }

    @Test("a subclass's values of every type (NaN too) pass through validateValue unchanged: a save adds no change of its own")
    func noSpuriousReplacement() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try ValidationReviewModels.org, classes: [(Specimen.self, "Specimen")])
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let specimen = try context.insertNewObject(forEntityName: "Specimen")
            let values: [String: Any] = [
                "i16": Int16(1), "i32": Int32(2), "i64": Int64(3), "dec": Decimal(string: "1.5") ?? 1, "dbl": Double.nan,
                "flt": Float.nan, "str": "s", "flag": true, "when": Date(timeIntervalSince1970: 5), "data": Data([1]),
                "id": UUID(), "link": URL(string: "https://example.com/a") ?? URL(fileURLWithPath: "/"), "blob": Data([2, 3]),
            ]
            for (key, value) in values { specimen.setValue(value, forKey: key) }
            try context.save()
            context.removeAllUndoActions()
            specimen.setValue("t", forKey: "str")
            try context.save()
            let dirty = context.hasChanges
            #expect(!dirty)
            try context.undo()
            let more = context.canUndo
            #expect(!more, "the save added an undo group of its own")
            #expect(specimen.value(forKey: "str") as? String == "s")
            #expect((specimen.value(forKey: "dbl") as? Double)?.isNaN == true)
        }
    }

    @Test("a saved change to NaN can be undone: the store's NaN is what the undo expects, not another writer's change")
    func undoOfChangeToNaN() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try open(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let specimen = try context.insertNewObject(forEntityName: "Specimen")
            specimen.setValue(1.0, forKey: "dbl")
            try context.save()
            specimen.setValue(Double.nan, forKey: "dbl")
            try context.save()
            try context.undo()
            #expect(specimen.value(forKey: "dbl") as? Double == 1.0)
            try context.save()
            try context.redo()
            #expect((specimen.value(forKey: "dbl") as? Double)?.isNaN == true)
            try context.save()
        }
        #expect(try count(coordinator, "Specimen", "dbl == 1.0") == 0)
    }
}
