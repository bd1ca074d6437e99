import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// Which clashes a commit refuses when only some of its updates change a uniqueness
/// constraint's properties (spec 0004 §6.3): a constraint a sub-entity inherits, one only a
/// sub-entity has, one with a reference, and one over a derived attribute.
@Suite("Event log: uniqueness beside updates that leave the constraint alone")
struct UniquenessReviewTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Attribute("key", .string).derived(from: "lowercase(name)")
                Attribute("note", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true)
                Unique("key")
            }
            Entity("Player") {
                Attribute("email", .string)
                Attribute("number", .int32)
                Attribute("note", .string)
                Relationship("team", to: "Team", inverse: "players")
                Unique("email")
                Unique("team", "number")
            }
            Entity("Keeper", parent: "Player") {
                Attribute("glove", .string)
                Unique("glove")
            }
        }
    }

    @Test("each clash is refused whichever object's unrelated update comes first; the same drafts without the clash are accepted")
    func clashesBesideUnrelatedUpdates() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try Self.model())
        var seed = TransactionDraft()
        let otters = seed.insert("Team", values: ["name": s("Otters")])
        let herons = seed.insert("Team", values: ["name": s("Herons")])
        let ann = seed.insert("Player", values: ["email": s("ann@x"), "number": i(1), "team": .reference(otters)])
        let kim = seed.insert("Keeper", values: ["email": s("kim@x"), "number": i(2), "team": .reference(otters), "glove": s("red")])
        let lou = seed.insert("Keeper", values: ["email": s("lou@x"), "number": i(1), "team": .reference(herons), "glove": s("blue")])
        let result = try log.commit(seed)
        func id(_ object: DraftObjectID) throws -> StoredObjectID { try #require(result.permanentID(for: object)) }
        let (o, h, a, k, l) = (try id(otters), try id(herons), try id(ann), try id(kim), try id(lou))

        // (the object left alone but for a note, the object taking its values)
        let clashes: [(alone: StoredObjectID, taker: StoredObjectID, values: [String: DraftValue])] = [
            (a, k, ["email": s("ann@x")]),  // a keeper takes a player's email (the parent's constraint)
            (k, a, ["email": s("kim@x")]),  // a player takes a keeper's
            (k, l, ["glove": s("red")]),  // the keepers' own constraint
            (a, l, ["team": .reference(.stored(o))]),  // (team, number): the reference changes
            (o, h, ["name": s("OTTERS")]),  // the derived key clashes
        ]
        for (alone, taker, values) in clashes {
            for aloneFirst in [true, false] {
                var draft = TransactionDraft()
                if aloneFirst { draft.update(.stored(alone), values: ["note": s("n")]) }
                draft.update(.stored(taker), values: values)
                if !aloneFirst { draft.update(.stored(alone), values: ["note": s("n")]) }
                let error = #expect(throws: LogError.self, "\(taker) \(values) beside \(alone)") { try log.commit(draft) }
                guard case .uniquenessViolation(_, _, _, let objects)? = error else {
                    Issue.record("\(String(describing: error))")
                    continue
                }
                #expect(Set(objects) == [alone.description, taker.description])
            }
        }
        #expect(try log.head == 1)
        // Without the clash: the taker's values elsewhere.
        var fine = TransactionDraft()
        fine.update(.stored(a), values: ["note": s("n")])
        fine.update(.stored(k), values: ["email": s("k2@x"), "glove": s("green")])
        fine.update(.stored(l), values: ["team": .reference(.stored(o)), "number": i(3)])
        fine.update(.stored(h), values: ["name": s("herons")])
        _ = try log.commit(fine)
        #expect(try log.verify().isClean)
    }
}
