import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// How a commit updates. An updated object's history row is put with the others in key order
/// at the commit's end; an update that changes none of a uniqueness constraint's properties
/// isn't checked for clashes itself (another object's change that clashes with it is).
@Suite("Event log: updates in a commit")
struct UpdateCommitTests {
    /// Two members with emails, a club and a sponsor (`libraryModel`: `email` unique).
    static func seeded(_ log: EventLog) throws -> (ada: StoredObjectID, bob: StoredObjectID, club: StoredObjectID, sponsor: StoredObjectID) {
        var draft = TransactionDraft()
        let club = draft.insert("Club", values: ["name": s("Otters")])
        let sponsor = draft.insert("Sponsor", values: ["name": s("Acme")])
        let ada = draft.insert("Member", values: ["name": s("Ada"), "email": s("ada@x"), "age": i(36)])
        let bob = draft.insert("Member", values: ["name": s("Bob"), "email": s("bob@x"), "age": i(40)])
        let result = try log.commit(draft)
        return (
            try #require(result.permanentID(for: ada)), try #require(result.permanentID(for: bob)),
            try #require(result.permanentID(for: club)), try #require(result.permanentID(for: sponsor))
        )
    }

    @Test("every updated object's history holds the commit, for values and memberships, in drafts of many updates; as-of and verify agree")
    func historyOfUpdates() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        let seed = try Self.seeded(log)
        var draft = TransactionDraft()
        // Out of key order, one object twice, a membership change, and a change of nothing.
        draft.update(.stored(seed.club), values: ["name": s("Herons")])
        draft.update(.stored(seed.bob), values: ["age": i(41)])
        draft.update(.stored(seed.ada), values: ["age": i(37), "club": .reference(.stored(seed.club))])
        draft.update(.stored(seed.bob), values: ["name": s("Robert")])
        draft.changeMembers(of: .stored(seed.club), "sponsors", adding: [.stored(seed.sponsor)])
        draft.update(.stored(seed.ada), values: ["age": i(37)])
        let second = try log.commit(draft).sequence
        try log.read { (reader: borrowing LogReader) throws in
            for id in [seed.ada, seed.bob, seed.club] {
                #expect(try reader.history(of: id) == [1, second], "\(id)")
            }
            // The membership is recorded on the club's side (`Club.sponsors`).
            #expect(try reader.history(of: seed.sponsor) == [1])
            #expect(try reader.object(seed.bob, asOf: 1)?["name"] == .attribute(.string("Bob")))
            #expect(try reader.object(seed.bob)?["name"] == .attribute(.string("Robert")))
        }
        #expect(try log.verify().isClean)
    }

    @Test("an update that leaves the unique email alone, beside an object that takes that email, is refused whichever comes first; nothing is written")
    func uniquenessBesideUpdates() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        let seed = try Self.seeded(log)
        // Bob takes Ada's email while Ada's age changes, in either order; a newcomer takes it.
        var first = TransactionDraft()
        first.update(.stored(seed.ada), values: ["age": i(50)])
        first.update(.stored(seed.bob), values: ["email": s("ada@x")])
        var second = TransactionDraft()
        second.update(.stored(seed.bob), values: ["email": s("ada@x")])
        second.update(.stored(seed.ada), values: ["age": i(50)])
        var third = TransactionDraft()
        third.update(.stored(seed.ada), values: ["name": s("Ada L")])
        third.insert("Member", values: ["name": s("Eve"), "email": s("ada@x")])
        for draft in [first, second, third] {
            let error = #expect(throws: LogError.self) { try log.commit(draft) }
            #expect(error.map { "\($0)".contains("ada@x") } == true, "\(String(describing: error))")
        }
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.head == 1)
            #expect(try reader.object(seed.ada)?["age"] == .attribute(.int32(36)))
        }
        // Ada giving up the email and Bob taking it in one draft is fine.
        var swap = TransactionDraft()
        swap.update(.stored(seed.ada), values: ["email": s("ada@y"), "age": i(51)])
        swap.update(.stored(seed.bob), values: ["email": s("ada@x")])
        _ = try log.commit(swap)
        #expect(try log.verify().isClean)
    }

    @Test("a membership change naming an object in both its lists is refused, naming it, whether or not it is a member; nothing is written")
    func membershipBothAddedAndRemoved() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        let seed = try Self.seeded(log)
        var link = TransactionDraft()
        link.changeMembers(of: .stored(seed.club), "sponsors", adding: [.stored(seed.sponsor)])
        _ = try log.commit(link)
        var second = TransactionDraft()
        second.insert("Sponsor", values: ["name": s("Other")])
        let other = try #require(try log.commit(second).event.changes.first?.objectID)
        for target in [seed.sponsor, other] {
            var draft = TransactionDraft()
            draft.update(.stored(seed.ada), values: ["age": i(99)])
            draft.changeMembers(of: .stored(seed.club), "sponsors", adding: [.stored(target)], removing: [.stored(target)])
            #expect(throws: LogError.invalidOperation("a membership change of \(seed.club).sponsors both adds and removes \(target); give each object in one list")) {
                try log.commit(draft)
            }
        }
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.head == 3)
            #expect(try reader.related(seed.club, "sponsors") == [seed.sponsor])
            #expect(try reader.object(seed.ada)?["age"] == .attribute(.int32(36)))
        }
    }
}
