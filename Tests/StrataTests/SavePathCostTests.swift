import Foundation
@testable import Strata
import StrataTestSupport
import Testing

/// `Member.name` required, `nick` with a length rule, `club` a required to-one; `Club.members`
/// required, one or two of them.
private func savePathModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Club") {
            Attribute("title", .string)
            Relationship("members", to: "Member", inverse: "club", toMany: true).required().count(min: 1, max: 2)
        }
        Entity("Member") {
            Attribute("name", .string).required().providedAtInsert()
            Attribute("nick", .string).length(max: 3)
            Attribute("age", .int32)
            Relationship("club", to: "Club", inverse: "members").required()
        }
    }
}

/// The keys the save's validation failures name, sorted; empty when the save succeeds.
private func failedKeys(_ context: isolated ManagedObjectContext) -> [String] {
    do {
        try context.save()
        return []
    } catch ContextError.validation(let failures) {
        return failures.map(\.key).sorted()
    } catch {
        return ["unexpected: \(error)"]
    }
}

/// A new member of `club` (none: nil), named `name` (nil: unset).
private func member(
    _ context: isolated ManagedObjectContext, _ name: String?, nick: String? = nil, club: ManagedObject?
) throws -> ManagedObject {
    let member = try context.insertNewObject(forEntityName: "Member")
    if let name { member.setValue(name, forKey: "name") }
    if let nick { member.setValue(nick, forKey: "nick") }
    if let club { member.setValue(club, forKey: "club") }
    return member
}

@Suite("Contexts: the save path's cost cuts keep its behaviour")
struct SavePathCostTests {
    @Test("new objects whose values plainly pass save; each rule a new object breaks is still reported")
    func insertedObjectsValidation() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try savePathModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Everything present and plain (the age left unset): saved.
            let club = try context.insertNewObject(forEntityName: "Club")
            club.setValue("Chess", forKey: "title")
            let ada = try member(context, "Ada", nick: "Ad", club: club)
            // The club's values take the one-walk check; the member's (a length rule, an unset
            // attribute) the full one.
            #expect(context.core.passesTrivially(club, club.info))
            #expect(!context.core.passesTrivially(ada, ada.info))
            #expect(failedKeys(context) == [])
            #expect(!ada.objectID.isTemporaryID)

            // A required attribute missing.
            let nameless = try member(context, nil, club: club)
            #expect(failedKeys(context) == ["name"])
            context.delete(nameless)
            #expect(failedKeys(context) == [])

            // A present value breaking its attribute's rule.
            let long = try member(context, "Bob", nick: "Bobby", club: club)
            #expect(failedKeys(context) == ["nick"])
            long.setValue("Bo", forKey: "nick")
            #expect(failedKeys(context) == [])

            // A required to-one left empty, and a new club with no member.
            _ = try member(context, "Cy", club: nil)
            _ = try context.insertNewObject(forEntityName: "Club")
            #expect(failedKeys(context) == ["club", "members"])
            context.rollback()

            // A to-many over its maximum: the club's third member (club is saved; the new
            // ones are inserted with the club set, so the club's count breaks its rule).
            let other = try context.insertNewObject(forEntityName: "Club")
            _ = try member(context, "Di", club: other)
            _ = try member(context, "Ed", club: other)
            _ = try member(context, "Flo", club: other)
            #expect(!context.core.passesTrivially(other, other.info))
            #expect(failedKeys(context) == ["members"])
        }
    }
}
