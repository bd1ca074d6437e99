import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// How a commit deletes. A delete's before-image is written into the event from the object's
/// state record when the record has the event's model version and the entity keeps no members
/// outside it (the same layout), and encoded from its values otherwise; either way the event
/// read back holds the object's values by name. A run of deletes removes its rows in key order
/// at the run's end, so what follows a delete in the same draft must see it gone.
@Suite("Event log: deletes in a commit")
struct DeleteCommitTests {
    static func model(extra: Bool = false, unordered: Bool = false) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("things", to: "Thing", inverse: "team", toMany: true)
            }
            Entity("Thing") {
                if extra { Attribute("aardvark", .string) }
                Attribute("name", .string).indexed()
                Attribute("small", .int16)
                Attribute("count", .int32).indexed()
                Attribute("big", .int64)
                Attribute("price", .decimal)
                Attribute("ratio", .double)
                Attribute("weight", .float)
                Attribute("flag", .boolean)
                Attribute("when", .date)
                Attribute("blob", .binaryData)
                Attribute("uuid", .uuid)
                Attribute("link", .uri)
                Attribute("tags", .transformable(valueTypeName: "[String]"))
                Attribute("email", .string)
                Relationship("team", to: "Team", inverse: "things")
                Relationship("picks", to: "Team", toMany: true, ordered: true)
                if unordered { Relationship("likes", to: "Team", toMany: true) }
                Unique("email")
            }
        }
    }

    static let values: [String: DraftValue] = [
        "name": s("wren"), "small": .attribute(.int16(-7)), "count": i(42), "big": .attribute(.int64(.max)),
        "price": .attribute(.decimal(Decimal(string: "12.345") ?? 0)), "ratio": .attribute(.double(-0.25)),
        "weight": .attribute(.float(1.5)), "flag": .attribute(.boolean(true)),
        "when": .attribute(.date(Date(timeIntervalSince1970: 1_790_000_000.125))),
        "blob": .attribute(.binaryData(Data([0, 1, 2, 0xFF]))), "uuid": .attribute(.uuid(UUID())),
        "link": .attribute(.uri(URL(string: "https://example.com/a?b=c") ?? URL(fileURLWithPath: "/"))),
        "tags": .attribute(.transformable(Data("[\"a\"]".utf8))), "email": s("wren@example.com"),
    ]

    @Test(
        "every attribute type, a to-one and an ordered to-many (and an unordered to-many, kept outside the record): the event read back holds the values the object had, and the rows are gone",
        arguments: [false, true])
    func everyValueKind(unordered: Bool) throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try Self.model(unordered: unordered))
        var first = TransactionDraft()
        let a = first.insert("Team", values: ["name": s("A")])
        let b = first.insert("Team", values: ["name": s("B")])
        var full = Self.values
        full["team"] = .reference(a)
        full["picks"] = .references([b, a])
        if unordered { full["likes"] = .references([a, b]) }
        let rich = first.insert("Thing", values: full)
        let bare = first.insert("Thing", values: ["name": s("bare")])
        let inserted = try log.commit(first)
        let ids = try [rich, bare].map { try #require(inserted.permanentID(for: $0)) }
        let stored = try ids.map { id in try #require(try log.read { try $0.object(id) }).values }

        var second = TransactionDraft(author: "cleaner")
        for id in ids { second.delete(.stored(id)) }
        let deleted = try log.commit(second)
        let readBack = try log.read { try $0.event(deleted.sequence) }
        #expect(readBack == deleted.event)
        #expect(readBack.changes == [.delete(ids[0], before: stored[0]), .delete(ids[1], before: stored[1])])
        #expect(stored[0]["picks"] != nil && stored[0]["team"] != nil && stored[0]["tags"] != nil, "\(stored[0])")
        #expect((stored[0]["likes"] != nil) == unordered, "\(stored[0])")

        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.count(of: "Thing") == 0)
            let teamID = try #require(inserted.permanentID(for: a))
            #expect(try reader.related(teamID, "things").isEmpty)
        }
        // The same email can be given again: the unique index row went with the object.
        var third = TransactionDraft()
        third.insert("Thing", values: ["name": s("again"), "email": s("wren@example.com")])
        _ = try log.commit(third)
        #expect(try log.verify().isClean)
    }

    @Test("a record of an earlier model version (other property codes) is encoded by name, not copied")
    func earlierModelVersion() throws {
        let dir = try TemporaryDirectory()
        var id: StoredObjectID?
        var stored: [String: LogValue] = [:]
        do {
            let log = try openLog(dir, model: try Self.model())
            var first = TransactionDraft()
            let thing = first.insert("Thing", values: Self.values)
            let given = try #require(try log.commit(first).permanentID(for: thing))
            id = given
            stored = try #require(try log.read { try $0.object(given) }).values
        }
        // Version 2 adds `aardvark`, which sorts first: every other property's code moves up.
        let log = try openLog(dir, model: try Self.model(extra: true))
        let thing = try #require(id)
        var second = TransactionDraft()
        second.delete(.stored(thing))
        let deleted = try log.commit(second)
        let readBack = try log.read { try $0.event(deleted.sequence) }
        #expect(readBack == deleted.event)
        #expect(readBack.changes == [.delete(thing, before: stored)])
        #expect(try log.verify().isClean)
    }

    /// Two things (one with a team and a unique email) and their team, committed.
    static func seeded(_ log: EventLog) throws -> (things: [StoredObjectID], team: StoredObjectID) {
        var draft = TransactionDraft()
        let team = draft.insert("Team", values: ["name": s("T")])
        let one = draft.insert("Thing", values: ["name": s("one"), "email": s("x@example.com"), "count": i(1), "team": .reference(team)])
        let two = draft.insert("Thing", values: ["name": s("two"), "email": s("y@example.com"), "count": i(2), "team": .reference(team)])
        let result = try log.commit(draft)
        return (try [one, two].map { try #require(result.permanentID(for: $0)) }, try #require(result.permanentID(for: team)))
    }

    @Test("the same object deleted twice in one draft is refused, and nothing is written")
    func deletedTwice() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try Self.model())
        let (things, _) = try Self.seeded(log)
        var draft = TransactionDraft()
        draft.delete(.stored(things[0]))
        draft.delete(.stored(things[1]))
        draft.delete(.stored(things[0]))
        #expect(throws: LogError.objectNotFound(things[0].description)) { try log.commit(draft) }
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.head == 1)
            #expect(try reader.count(of: "Thing") == 2)
        }
        #expect(try log.verify().isClean)
    }

    @Test("operations after a run of deletes in the same draft see the objects gone: a restore, an update, an insert taking a deleted email")
    func afterARunOfDeletes() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try Self.model())
        let (things, team) = try Self.seeded(log)
        var draft = TransactionDraft()
        draft.delete(.stored(things[0]))
        draft.delete(.stored(things[1]))
        // Brought back under its ID (as undo of a delete does), with other values.
        draft.restore(things[0], values: ["name": s("back"), "count": i(9)])
        // Taking the email the deleted `two` had.
        let three = draft.insert("Thing", values: ["name": s("three"), "email": s("y@example.com"), "team": .reference(.stored(team))])
        draft.update(.stored(team), values: ["name": s("U")])
        draft.delete(.stored(things[0]))
        let result = try log.commit(draft)
        let threeID = try #require(result.permanentID(for: three))
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.object(things[0]) == nil)
            #expect(try reader.object(things[1]) == nil)
            #expect(try reader.object(threeID)?["email"] == .attribute(.string("y@example.com")))
            #expect(try reader.related(team, "things") == [threeID])
            #expect(try reader.history(of: things[0]) == [1, 2])
        }
        #expect(try log.verify().isClean)
        // The email `one` had is free; the one `three` took is not.
        var fourth = TransactionDraft()
        fourth.insert("Thing", values: ["name": s("four"), "email": s("x@example.com")])
        _ = try log.commit(fourth)
        var fifth = TransactionDraft()
        fifth.insert("Thing", values: ["name": s("five"), "email": s("y@example.com")])
        #expect(throws: LogError.self) { try log.commit(fifth) }
    }

    @Test("an insert taking a unique email, then the delete of the object that had it, in one draft")
    func insertThenDeleteTheHolder() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try Self.model())
        let (things, _) = try Self.seeded(log)
        var draft = TransactionDraft()
        let newcomer = draft.insert("Thing", values: ["name": s("new"), "email": s("x@example.com")])
        draft.delete(.stored(things[0]))
        let result = try log.commit(draft)
        let id = try #require(result.permanentID(for: newcomer))
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.object(id)?["email"] == .attribute(.string("x@example.com")))
            #expect(try reader.object(things[0]) == nil)
        }
        #expect(try log.verify().isClean)
    }
}
