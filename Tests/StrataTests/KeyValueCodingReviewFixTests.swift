import Foundation
import Strata
import StrataTestSupport
import Testing

// Review 32-6: key-value coding and validation as a Core Data user porting an app uses them.

enum KVCFixModels {
    /// `Club` with members (unordered, min 2 max 3), an ordered `roster` and a required
    /// `city`; `Member` with a pattern on its name and a range on its age.
    static var club: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Club") {
                    Attribute("name", .string).length(min: 2, max: 8)
                    Relationship("members", to: "Member", inverse: "club", toMany: true).count(min: 2, max: 3)
                    Relationship("roster", to: "Member", inverse: "rosteredAt", toMany: true, ordered: true)
                    Relationship("city", to: "City", inverse: "clubs").required()
                }
                Entity("Member") {
                    Attribute("name", .string).matching("[A-Z][a-z]+")
                    Attribute("age", .int16).range(min: 0, max: 150)
                    Relationship("club", to: "Club", inverse: "members")
                    Relationship("rosteredAt", to: "Club", inverse: "roster")
                }
                Entity("City") {
                    Attribute("name", .string)
                    Relationship("clubs", to: "Club", inverse: "city", toMany: true)
                }
            }
        }
    }
}

/// A club whose `validateValue(_:forKey:)` is overridden and calls super (a ported
/// `validateMembers:` would be): the save reaches it for the relationships too.
final class CheckedClub: ManagedObject {
    override func validateValue(_ value: inout Any?, forKey key: String) throws {
        try super.validateValue(&value, forKey: key)
    }
}

/// Objects of one context handed to another, as a port that shared them across queues does
/// (Strata's objects aren't `Sendable`: only unchecked code can do it).
private final class ForeignObjects: @unchecked Sendable {
    var unsavedCity: ManagedObject?
    var savedCity: ManagedObject?
    var unsavedMember: ManagedObject?
}

/// The validation failures `body` throws, or nil with a recorded issue.
private func validationFailures(_ body: () throws -> Void) -> [ValidationFailure]? {
    do {
        try body()
        Issue.record("expected a validation error, got none")
    } catch ContextError.validation(let failures) {
        return failures
    } catch {
        Issue.record("expected a validation error, got \(error)")
    }
    return nil
}

@Suite("Review 32-6: key-value coding and validation")
struct KeyValueCodingReviewFixTests {
    @Test("validateValue(_:forKey:) called by the app refuses a value of the wrong type or out of its type's range (1550), checks the rules, hands the value back converted")
    func validateValueAttribute() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCFixModels.club)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) in
            let member = try context.insertNewObject(forEntityName: "Member")
            // Before, both passed: a value that didn't convert was checked as nil, and the
            // attribute is optional.
            var text: Any? = "forty"
            let wrongType = validationFailures { try member.validateValue(&text, forKey: "age") }
            #expect(wrongType?.map(\.code.rawValue) == [1550])
            #expect(wrongType?.first?.key == "age")
            #expect(wrongType?.first?.message.contains("forty") == true)
            var huge: Any? = 70_000
            let outOfRange = validationFailures { try member.validateValue(&huge, forKey: "age") }
            #expect(outOfRange?.map(\.code.rawValue) == [1550])
            #expect(outOfRange?.first?.message.contains("70000") == true)
            // Converted, then checked against the model's range.
            var tooOld: Any? = 200
            #expect(validationFailures { try member.validateValue(&tooOld, forKey: "age") }?.map(\.code.rawValue) == [1610])
            var age: Any? = 42
            try member.validateValue(&age, forKey: "age")
            #expect(age as? Int16 == 42)
            var none: Any? = nil
            try member.validateValue(&none, forKey: "age")
            #expect(none == nil)
            var lower: Any? = "ada"
            #expect(validationFailures { try member.validateValue(&lower, forKey: "name") }?.map(\.code.rawValue) == [1680])
            var name: Any? = "Ada"
            try member.validateValue(&name, forKey: "name")
            #expect(name as? String == "Ada")
            // Nothing was set by validating.
            #expect(member.value(forKey: "age") == nil)
            #expect(member.value(forKey: "name") == nil)
        }
    }

    @Test("validateValue(_:forKey:) for a relationship: nil where required (1570), a count under the minimum or over the maximum (1580/1590), an object of the wrong entity (1550); the save reports each failure once")
    func validateValueRelationship() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCFixModels.club, classes: [(CheckedClub.self, "Club")])
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) in
            let club = try context.insertNewObject(forEntityName: "Club")
            club.setValue("Chess", forKey: "name")
            let city = try context.insertNewObject(forEntityName: "City")
            let members = try (0..<4).map { _ in try context.insertNewObject(forEntityName: "Member") }
            // Before, every one of these passed: the base method checked attributes only.
            var noCity: Any? = nil
            #expect(validationFailures { try club.validateValue(&noCity, forKey: "city") }?.map(\.code.rawValue) == [1570])
            var aMember: Any? = members[0]
            let wrongEntity = validationFailures { try club.validateValue(&aMember, forKey: "city") }
            #expect(wrongEntity?.map(\.code.rawValue) == [1550])
            #expect(wrongEntity?.first?.message.contains("Member") == true)
            var one: Any? = Set([members[0]])
            #expect(validationFailures { try club.validateValue(&one, forKey: "members") }?.map(\.code.rawValue) == [1580])
            var four: Any? = Set(members)
            #expect(validationFailures { try club.validateValue(&four, forKey: "members") }?.map(\.code.rawValue) == [1590])
            var aCity: Any? = city
            try club.validateValue(&aCity, forKey: "city")
            var two: Any? = Set(members[0..<2])
            try club.validateValue(&two, forKey: "members")
            var empty: Any? = Set<ManagedObject>()
            try club.validateValue(&empty, forKey: "members")   // optional: empty passes
            // The save checks the relationships itself and reaches the override: each failure once.
            club.setValue(Set([members[0]]), forKey: "members")
            let saved = validationFailures { try context.save() }
            #expect(saved?.filter { $0.key == "members" }.map(\.code.rawValue) == [1580])
            #expect(saved?.filter { $0.key == "city" }.map(\.code.rawValue) == [1570])
            club.setValue(Set(members[0..<2]), forKey: "members")
            club.setValue(city, forKey: "city")
            try context.save()
        }
    }

    @Test("an object of another context: setValue keeps it as invalid (1550 at save, naming it), a proxy's add and insert(_:at:) refuse it as a clear problem; nothing written; this context's object for its ID is taken")
    func objectOfAnotherContext() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCFixModels.club)
        let a = privateContext(coordinator)
        let b = privateContext(coordinator)
        // Another context's objects, reached the way a port that shared them across queues
        // would (Core Data raises "Illegal attempt to establish a relationship … between
        // objects in different contexts").
        let foreign = ForeignObjects()
        let savedCityID = try await b.perform { (b: isolated ManagedObjectContext) in
            let saved = try b.insertNewObject(forEntityName: "City")
            saved.setValue("Oslo", forKey: "name")
            try b.save()
            foreign.savedCity = saved
            foreign.unsavedCity = try b.insertNewObject(forEntityName: "City")
            foreign.unsavedMember = try b.insertNewObject(forEntityName: "Member")
            return saved.objectID
        }
        try await a.perform { (a: isolated ManagedObjectContext) in
            let unsavedMember = try #require(foreign.unsavedMember)
            let club = try a.insertNewObject(forEntityName: "Club")
            club.setValue("Chess", forKey: "name")
            let members = try (0..<2).map { _ in try a.insertNewObject(forEntityName: "Member") }
            club.setValue(Set(members), forKey: "members")
            // Another context's unsaved insert: before, its temporary ID was kept and the
            // store refused the save (133021) naming an object it never had.
            club.setValue(foreign.unsavedCity, forKey: "city")
            let unsaved = validationFailures { try a.save() }
            #expect(unsaved?.map(\.code.rawValue) == [1550])
            #expect(unsaved?.first?.key == "city")
            #expect(unsaved?.first?.message.contains("another context") == true)
            // Another context's saved object: refused too, as Core Data refuses it.
            club.setValue(foreign.savedCity, forKey: "city")
            #expect(validationFailures { try a.save() }?.first?.message.contains("another context") == true)
            // The proxies refuse another context's object and change nothing.
            club.mutableSetValue(forKey: "members").add(unsavedMember)
            #expect(club.mutableSetValue(forKey: "members").count == 2)
            club.mutableOrderedSetValue(forKey: "roster").insert(unsavedMember, at: 0)
            #expect(club.mutableOrderedSetValue(forKey: "roster").count == 0)
            club.mutableOrderedSetValue(forKey: "roster").addObjects(from: [members[0], unsavedMember])
            #expect(club.mutableOrderedSetValue(forKey: "roster").count == 0)
            club.setValue(try a.existingObject(with: savedCityID), forKey: "city")
            do {
                try a.save()
                Issue.record("the proxies' refusals were not recorded")
            } catch ContextError.invalidArgument(let message) {
                #expect(message.contains("another context"))
                #expect(message.contains("Club.members"))
                #expect(message.contains("Club.roster"))
            }
            // This context's object for the saved city's ID: saved.
            try a.save()
            #expect(a.hasChanges == false)
        }
        // The other context's member was never related.
        await b.perform { (b: isolated ManagedObjectContext) in
            #expect(foreign.unsavedMember?.value(forKey: "club") == nil)
            #expect(foreign.unsavedMember?.value(forKey: "rosteredAt") == nil)
        }
        let check = privateContext(coordinator)
        try await check.perform { (check: isolated ManagedObjectContext) in
            let clubs = try check.fetch(FetchRequest(entityName: "Club"))
            #expect(clubs.count == 1)
            #expect(clubs.first?.value(forKeyPath: "city.name") as? String == "Oslo")
            #expect(clubs.first?.value(forKeyPath: "members.@count") as? Int == 2)
            #expect(clubs.first?.value(forKeyPath: "roster.@count") as? Int == 0)
        }
    }

    @Test("setValue(_:forKeyPath:) follows `self` as value(forKeyPath:) reads it: \"self.name\", \"self.city.name\", \"members.self.age\" set; nothing recorded")
    func setThroughSelf() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCFixModels.club)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) in
            let club = try context.insertNewObject(forEntityName: "Club")
            let city = try context.insertNewObject(forEntityName: "City")
            club.setValue(city, forKey: "city")
            let members = try (0..<2).map { _ in try context.insertNewObject(forEntityName: "Member") }
            club.setValue(Set(members), forKey: "members")
            #expect(club.value(forKeyPath: "self.members.@count") as? Int == 2)
            // Before, `self` was an unknown key: nothing set, and the save threw
            // "entity Club has no property self".
            club.setValue("Chess", forKeyPath: "self.name")
            club.setValue("Oslo", forKeyPath: "self.city.name")
            club.setValue(Int16(7), forKeyPath: "members.self.age")
            #expect(club.value(forKey: "name") as? String == "Chess")
            #expect(city.value(forKey: "name") as? String == "Oslo")
            #expect(club.value(forKeyPath: "members.@sum.age") as? Int == 14)
            try context.save()
            // A key the entity lacks after `self` is still the clear problem it was.
            club.setValue("x", forKeyPath: "self.nickname")
            do {
                try context.save()
                Issue.record("the unknown key was not recorded")
            } catch ContextError.unknownKey(let entity, let key) {
                #expect(entity == "Club" && key == "nickname")
            }
        }
    }

    @Test("a temporary ID another context holds, set as a to-one: 1550 at save naming it, nothing written; set right, the next save goes through (before: the store refused every save after, 133021)")
    func temporaryIDOfAnotherContext() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCFixModels.club)
        let a = privateContext(coordinator)
        let b = privateContext(coordinator)
        let (unsavedID, savedID) = try await b.perform { (b: isolated ManagedObjectContext) in
            let saved = try b.insertNewObject(forEntityName: "City")
            try b.save()
            return (try b.insertNewObject(forEntityName: "City").objectID, saved.objectID)
        }
        try await a.perform { (a: isolated ManagedObjectContext) in
            let club = try a.insertNewObject(forEntityName: "Club")
            club.setValue(Set(try (0..<2).map { _ in try a.insertNewObject(forEntityName: "Member") }), forKey: "members")
            club.setValue(unsavedID, forKey: "city")
            let failures = validationFailures { try a.save() }
            #expect(failures?.map(\.code.rawValue) == [1550])
            #expect(failures?.first?.key == "city")
            #expect(failures?.first?.message.contains(unsavedID.description) == true)
            // The ID of a saved object is a reference any context can follow.
            club.setValue(savedID, forKey: "city")
            try a.save()
            #expect((club.value(forKey: "city") as? ManagedObject)?.objectID == savedID)
        }
    }
}
