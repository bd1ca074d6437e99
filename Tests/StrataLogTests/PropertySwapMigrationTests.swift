import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// A model version whose properties swap names through their renaming identifiers
/// (`Person.first` renamed from `last` and `last` from `first`; two relationships likewise) —
/// spec 0004 §4.5. Core Data's inferred mapping matches each destination property to the
/// source property its renaming identifier names, so the values are exchanged. Before session
/// 34 the version was refused (and before session 33 each name kept its own values).
@Suite("Event log: properties that swap names")
struct PropertySwapMigrationTests {
    static func v1() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Place") { Attribute("name", .string) }
            Entity("Person") {
                Attribute("first", .string).indexed()
                Attribute("last", .string)
                Attribute("nick", .string)
                Attribute("age", .int32)
                Relationship("home", to: "Place")
                Relationship("work", to: "Place")
            }
        }
    }

    /// first ↔ last, home ↔ work; `rotated`: first → last → nick → first instead (three names).
    static func v2(rotated: Bool = false) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Place") { Attribute("name", .string) }
            Entity("Person") {
                if rotated {
                    Attribute("first", .string).renamed(from: "nick").indexed()
                    Attribute("last", .string).renamed(from: "first")
                    Attribute("nick", .string).renamed(from: "last")
                } else {
                    Attribute("first", .string).renamed(from: "last").indexed()
                    Attribute("last", .string).renamed(from: "first")
                    Attribute("nick", .string)
                }
                Attribute("age", .int32)
                Relationship("home", to: "Place").renamed(from: "work")
                Relationship("work", to: "Place").renamed(from: "home")
            }
        }
    }

    @Test("swapped properties exchange their values (attributes and relationships), indexes rebuilt, verify clean; reopened nothing more; undo names follow the swap")
    func swapExchangesValues() throws {
        let dir = try TemporaryDirectory("strata-swap")
        let log = try openLog(dir, model: try Self.v1()) { $0.allowsRemovingEntitiesAndProperties = false }
        var draft = TransactionDraft()
        let house = draft.insert("Place", values: ["name": s("House")])
        let office = draft.insert("Place", values: ["name": s("Office")])
        let ada = draft.insert("Person", values: ["first": s("Ada"), "last": s("Lovelace"), "home": .reference(house), "work": .reference(office)])
        let bob = draft.insert("Person", values: ["last": s("Babbage")])
        let result = try log.commit(draft)
        func id(_ object: DraftObjectID) throws -> StoredObjectID { try #require(result.permanentID(for: object)) }
        let (houseID, officeID, adaID, bobID) = (try id(house), try id(office), try id(ada), try id(bob))

        let migrated = try openLog(dir, model: try Self.v2()) { $0.allowsRemovingEntitiesAndProperties = false }
        func check(_ log: EventLog) throws {
            try log.read { reader throws in
                let first = try reader.object(adaID)?.values
                #expect(first?["first"] == .attribute(.string("Lovelace")))
                #expect(first?["last"] == .attribute(.string("Ada")))
                #expect(try reader.related(adaID, "home") == [officeID])
                #expect(try reader.related(adaID, "work") == [houseID])
                let second = try reader.object(bobID)?.values
                #expect(second?["first"] == .attribute(.string("Babbage")))
                #expect((second?["last"] ?? .null) == .null)
            }
            let report = try log.verify()
            #expect(report.isClean, "\(report.problems)")
        }
        try check(migrated)
        #expect(migrated.currentPropertyName("first", entity: "Person", modelVersion: 1) == "last")
        #expect(migrated.currentPropertyName("home", entity: "Person", modelVersion: 1) == "work")
        #expect(migrated.currentPropertyName("age", entity: "Person", modelVersion: 1) == "age")
        let head = try migrated.head
        let reopened = try openLog(dir, model: try Self.v2()) { $0.allowsRemovingEntitiesAndProperties = false }
        #expect(try reopened.head == head, "nothing more to migrate")
        try check(reopened)
        // The swapped index serves the new name: a unique-free insert and verify.
        var more = TransactionDraft()
        _ = more.insert("Person", values: ["first": s("Hopper"), "last": s("Grace")])
        try reopened.commit(more)
        #expect(try reopened.verify().isClean)
    }

    @Test("three names rotated take their values round")
    func rotation() throws {
        let dir = try TemporaryDirectory("strata-swap")
        let log = try openLog(dir, model: try Self.v1())
        var draft = TransactionDraft()
        let ada = draft.insert("Person", values: ["first": s("Ada"), "last": s("Lovelace"), "nick": s("Enchantress"), "age": i(36)])
        let result = try log.commit(draft)
        let adaID = try #require(result.permanentID(for: ada))
        let migrated = try openLog(dir, model: try Self.v2(rotated: true))
        let values = try migrated.read { try $0.object(adaID)?.values }
        #expect(values?["first"] == .attribute(.string("Enchantress")))
        #expect(values?["last"] == .attribute(.string("Ada")))
        #expect(values?["nick"] == .attribute(.string("Lovelace")))
        #expect(values?["age"] == .attribute(.int32(36)))
        #expect(try migrated.verify().isClean)
    }
}
