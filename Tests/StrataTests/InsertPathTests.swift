import Foundation
@testable import Strata
import StrataTestSupport
import Testing

/// People on teams (a to-one `team` with the to-many inverse `members`); `League` is a
/// sub-entity of `Team`, `Robot` an unrelated entity.
private func insertPathModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Team") {
            Attribute("name", .string)
            Relationship("members", to: "Person", inverse: "team", toMany: true)
        }
        Entity("League", parent: "Team") {
            Attribute("level", .int16)
        }
        Entity("Person") {
            Attribute("firstName", .string)
            Attribute("lastName", .string)
            Attribute("email", .string)
            Attribute("age", .int32)
            Attribute("score", .double)
            Relationship("team", to: "Team", inverse: "members")
        }
        Entity("Robot") {
            Attribute("name", .string)
        }
    }
}

/// The attribute values of `object` that are set, by name (what a test compares).
private func attributes(_ object: ManagedObject) -> [String: String] {
    var result: [String: String] = [:]
    for key in ["firstName", "lastName", "email", "age", "score", "name"] where object.entity.attributesByName[key] != nil {
        if let value = object.value(forKey: key) { result[key] = "\(value)" }
    }
    return result
}

private func members(_ team: ManagedObject) -> Set<ManagedObject> {
    team.value(forKey: "members") as? Set<ManagedObject> ?? []
}

@Suite("Contexts: the insert path (sets on new objects)")
struct InsertPathTests {
    @Test("sets on a new object coalesce into its insert; sets in later groups, interleaved with another insert, undo and redo exactly")
    func setsOnNewObjectsUndoAndRedo() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try insertPathModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Group 1: an insert and several sets on it, some repeated, one set back to unset.
            let ada = try context.insertNewObject(forEntityName: "Person")
            ada.setValue("Ada", forKey: "firstName")
            ada.setValue("Byron", forKey: "lastName")
            ada.setValue("Lovelace", forKey: "lastName")
            ada.setValue(Int32(36), forKey: "age")
            ada.setValue("ada@example.com", forKey: "email")
            ada.setValue(nil, forKey: "email")
            ada.setValue(1.5, forKey: "score")
            let first = ["firstName": "Ada", "lastName": "Lovelace", "age": "36", "score": "1.5"]
            #expect(attributes(ada) == first)
            #expect(Set(ada.changedValues().keys) == ["firstName", "lastName", "age", "email", "score"])
            #expect(ada.changedValues()["email"] is NSNull, "set, then set back to nil: a change to nil, as before")
            context.processPendingChanges()

            // Group 2: another insert between sets on the first object (which is no longer
            // the group's own insert: its sets are updates), and sets on the new one.
            ada.setValue("Augusta", forKey: "firstName")
            let grace = try context.insertNewObject(forEntityName: "Person")
            ada.setValue(Int32(37), forKey: "age")
            grace.setValue("Grace", forKey: "firstName")
            ada.setValue("ada@analytical.org", forKey: "email")
            grace.setValue("Hopper", forKey: "lastName")
            ada.setValue("Augusta Ada", forKey: "firstName")
            grace.setValue(2.25, forKey: "score")
            let second = ["firstName": "Augusta Ada", "lastName": "Lovelace", "age": "37", "email": "ada@analytical.org", "score": "1.5"]
            let graceValues = ["firstName": "Grace", "lastName": "Hopper", "score": "2.25"]
            #expect(attributes(ada) == second)
            #expect(attributes(grace) == graceValues)
            context.processPendingChanges()

            try context.undo()
            #expect(attributes(ada) == first, "undoing group 2 restores the values group 1 ended with")
            #expect(grace.isDeleted || grace.managedObjectContext == nil, "and takes the second insert out")
            #expect(context.insertedObjects == [ada])
            try context.undo()
            #expect(context.insertedObjects.isEmpty, "undoing group 1 takes the first insert out")
            #expect(context.hasChanges == false)

            try context.redo()
            #expect(context.insertedObjects == [ada])
            #expect(attributes(ada) == first, "redo brings the insert back with the values its group ended with")
            try context.redo()
            #expect(attributes(ada) == second)
            #expect(attributes(grace) == graceValues)
            #expect(context.insertedObjects == [ada, grace])

            try context.save()
        }
        // What was saved is what the context showed.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Person")
            request.sortDescriptors = [FetchSortDescriptor(key: "firstName")]
            let people = try context.fetch(request)
            #expect(people.map(attributes) == [
                ["firstName": "Augusta Ada", "lastName": "Lovelace", "age": "37", "email": "ada@analytical.org", "score": "1.5"],
                ["firstName": "Grace", "lastName": "Hopper", "score": "2.25"],
            ])
        }
    }

    @Test("a set that changes nothing on a new object leaves no change and no undo step; NSNull and nil unset a value")
    func setsThatChangeNothing() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try insertPathModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue(nil, forKey: "email")
            person.setValue(NSNull(), forKey: "lastName")
            #expect(person.changedValues().isEmpty, "unset to unset is no change")
            person.setValue("Mary", forKey: "firstName")
            person.setValue("Mary", forKey: "firstName")
            #expect(person.changedValues().count == 1)
            context.processPendingChanges()

            // The object isn't its group's insert any more: a set to the same value records nothing.
            person.setValue("Mary", forKey: "firstName")
            #expect(person.changedValuesForCurrentEvent().isEmpty)
            context.processPendingChanges()
            person.setValue(NSNull(), forKey: "firstName")
            #expect(person.value(forKey: "firstName") == nil)
            #expect(person.changedValuesForCurrentEvent()["firstName"] as? String == "Mary")
            context.processPendingChanges()
            try context.undo()
            #expect(person.value(forKey: "firstName") as? String == "Mary", "one undo: the no-op set left no group")
            try context.undo()
            #expect(context.insertedObjects.isEmpty)
            #expect(context.canUndo == false)

            // A value of the wrong type is kept and refused at save, as before.
            let other = try context.insertNewObject(forEntityName: "Person")
            other.setValue(42, forKey: "lastName")
            #expect(throws: ContextError.self) { try context.save() }
            other.setValue("Hopper", forKey: "lastName")
            try context.save()
            #expect(other.value(forKey: "lastName") as? String == "Hopper")
        }
    }

    @Test("to-one sets keep the to-many inverse complete whatever order the members are added in, with sub-entity and wrong-entity values")
    func inverseInAnyOrder() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try insertPathModel())
        let count = max(8, Int(ProcessInfo.processInfo.environment["STRATA_INSERT_PATH_PEOPLE"] ?? "") ?? 40)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            let league = try context.insertNewObject(forEntityName: "League")
            let people = try (0..<count).map { n in
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue("p\(n)", forKey: "firstName")
                return person
            }
            // In insert order (each new member after the others), then the rest backwards and
            // shuffled, then some moved to the sub-entity's team and back.
            let half = count / 2
            for person in people[..<half] { person.setValue(team, forKey: "team") }
            var generator = SystemRandomNumberGenerator()
            for person in people[half...].reversed().shuffled(using: &generator) { person.setValue(team, forKey: "team") }
            #expect(members(team) == Set(people))
            for person in people where person.value(forKey: "firstName") as? String == "p3" || person.value(forKey: "firstName") as? String == "p5" {
                person.setValue(league, forKey: "team")
            }
            #expect(members(league) == [people[3], people[5]], "a League is a Team")
            #expect(members(team) == Set(people).subtracting([people[3], people[5]]))
            people[5].setValue(team, forKey: "team")
            #expect(members(league) == [people[3]])
            #expect(members(team).count == count - 1)

            // A Robot is no Team: kept as invalid, no inverse touched.
            let robot = try context.insertNewObject(forEntityName: "Robot")
            people[0].setValue(robot, forKey: "team")
            #expect(members(team).count == count - 2, "p0 left its team")
            #expect(throws: ContextError.self) { try context.save() }
            people[0].setValue(team, forKey: "team")
            context.processPendingChanges()
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let teams = try context.fetch(FetchRequest(entityName: "Team"))
            let byName = Dictionary(grouping: teams) { $0.entity.name }
            let team = try #require(byName["Team"]?.first), league = try #require(byName["League"]?.first)
            #expect(members(team).count == count - 1)
            #expect(members(league).compactMap { $0.value(forKey: "firstName") as? String } == ["p3"])
            // Removing members saved in order, then undo: the relationship is whole again.
            let leaving = Array(members(team)).prefix(3)
            for person in leaving { person.setValue(nil, forKey: "team") }
            #expect(members(team).count == count - 4)
            context.processPendingChanges()
            try context.undo()
            #expect(members(team).count == count - 1)
            #expect(context.hasChanges == false)
        }
    }

    @Test("temporary IDs order as their bytes do")
    func temporaryIDOrder() {
        let rounds = max(1, Int(ProcessInfo.processInfo.environment["STRATA_INSERT_PATH_ID_PAIRS"] ?? "") ?? 2_000)
        var generator = SystemRandomNumberGenerator()
        func id(_ bytes: [UInt8]) -> ManagedObjectID {
            let uuid = bytes.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }
            return ManagedObjectID(entityName: "Person", storage: .temporary(UUID(uuid: uuid)))
        }
        for round in 0..<rounds {
            var a = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
            var b = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
            // Often equal up to some byte, where the comparison must look further.
            if round % 2 == 0 {
                let shared = Int.random(in: 0...16, using: &generator)
                b.replaceSubrange(0..<shared, with: a[0..<shared])
            }
            if round % 7 == 0 { a = b }
            #expect((id(a) < id(b)) == a.lexicographicallyPrecedes(b), "\(a) < \(b)")
            #expect((id(b) < id(a)) == b.lexicographicallyPrecedes(a), "\(b) < \(a)")
        }
    }
}
