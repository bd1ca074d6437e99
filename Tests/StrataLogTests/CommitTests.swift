import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

@Suite("Event log: commit and read")
struct CommitTests {
    @Test("an insert assigns permanent IDs in draft order and records the values")
    func insertAssignsIDs() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var draft = TransactionDraft(author: "alice", contextName: "editor")
        let club = draft.insert("Club", values: ["name": s("Otters")])
        let ada = draft.insert("Member", values: ["name": s("Ada"), "age": i(36), "club": .reference(club)])
        let bob = draft.insert("Member", values: ["name": s("Bob"), "club": .reference(club)])
        let result = try log.commit(draft)

        #expect(result.sequence == 1)
        #expect(result.permanentID(for: club) == StoredObjectID(entity: "Club", primaryKey: 1))
        #expect(result.permanentID(for: ada) == StoredObjectID(entity: "Member", primaryKey: 1))
        #expect(result.permanentID(for: bob) == StoredObjectID(entity: "Member", primaryKey: 2))
        #expect(result.event.author == "alice")
        #expect(result.event.contextName == "editor")
        #expect(result.event.changes.count == 3)

        let clubID = try #require(result.permanentID(for: club))
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.head == 1)
            let member = try #require(try reader.object(StoredObjectID(entity: "Member", primaryKey: 1)))
            #expect(member["name"] == .attribute(.string("Ada")))
            #expect(member["club"] == .reference(clubID))
            #expect(member.version == 1)
            // The to-many side is derived from the to-one side.
            #expect(try reader.related(clubID, "members").map(\.primaryKey) == [1, 2])
            #expect(try reader.count(of: "Member") == 2)
            #expect(try reader.lastPrimaryKey(of: "Member") == 2)
        }
    }

    @Test("an update records before and after; unchanged values drop out")
    func updateBeforeImages() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var first = TransactionDraft()
        let m = first.insert("Member", values: ["name": s("Ada"), "age": i(36)])
        let id = try #require(try log.commit(first).permanentID(for: m))

        var second = TransactionDraft(author: "bob")
        second.update(.stored(id), values: ["age": i(37), "name": s("Ada"), "rating": .attribute(.double(4.5))])
        let result = try log.commit(second)
        #expect(result.event.changes == [
            .update(id, changes: [
                .value(property: "age", before: .attribute(.int32(36)), after: .attribute(.int32(37))),
                .value(property: "rating", before: .null, after: .attribute(.double(4.5))),
            ])
        ])
        // Re-read from the log, not from the result.
        let stored = try log.read { try $0.event(2) }
        #expect(stored == result.event)
        #expect(try log.read { try $0.history(of: id) } == [1, 2])

        // A draft that changes nothing still commits, with an empty event.
        var third = TransactionDraft()
        third.update(.stored(id), values: ["age": i(37)])
        #expect(try log.commit(third).event.changes.isEmpty)
    }

    @Test("a delete carries the full before-image, including recorded memberships")
    func deleteBeforeImage() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var draft = TransactionDraft()
        let sponsor = draft.insert("Sponsor", values: ["name": s("Acme")])
        let m = draft.insert("Member", values: ["name": s("Ada"), "favourites": .references([sponsor])])
        let first = try log.commit(draft)
        let memberID = try #require(first.permanentID(for: m))
        let sponsorID = try #require(first.permanentID(for: sponsor))

        var delete = TransactionDraft()
        delete.delete(.stored(memberID))
        let result = try log.commit(delete)
        #expect(result.event.changes == [
            .delete(memberID, before: ["name": .attribute(.string("Ada")), "favourites": .references([sponsorID])])
        ])
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.object(memberID) == nil)
            #expect(try reader.history(of: memberID) == [1, 2])
            #expect(try reader.object(memberID, asOf: 1)?["name"] == .attribute(.string("Ada")))
        }
    }

    @Test("deleting an object that is still referenced is refused and writes nothing")
    func danglingReferenceRefused() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var draft = TransactionDraft()
        let club = draft.insert("Club", values: ["name": s("Otters")])
        draft.insert("Member", values: ["name": s("Ada"), "club": .reference(club)])
        let clubID = try #require(try log.commit(draft).permanentID(for: club))

        var delete = TransactionDraft()
        delete.delete(.stored(clubID))
        let error = #expect(throws: LogError.self) { try log.commit(delete) }
        #expect(error?.description.contains("Member/p1.club refers to Club/p1") == true)
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.head == 1)
            #expect(try reader.object(clubID) != nil)
        }

        // Nullify first, then delete, in one transaction: fine.
        var nullifyAndDelete = TransactionDraft()
        nullifyAndDelete.update(.stored(StoredObjectID(entity: "Member", primaryKey: 1)), values: ["club": .null])
        nullifyAndDelete.delete(.stored(clubID))
        try log.commit(nullifyAndDelete)
        #expect(try log.read { try $0.object(clubID) } == nil)
    }

    @Test("a reference to a missing object refuses the whole commit")
    func missingReferenceRefused() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var draft = TransactionDraft()
        draft.insert("Member", values: ["name": s("Ada")])
        draft.insert("Member", values: ["name": s("Bob"), "club": .reference(.stored(StoredObjectID(entity: "Club", primaryKey: 9)))])
        let error = #expect(throws: LogError.self) { try log.commit(draft) }
        #expect(error == .missingReference(from: "Member/p2", property: "club", to: "Club/p9"))
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.head == 0)
            #expect(try reader.count(of: "Member") == 0)
            #expect(try reader.lastPrimaryKey(of: "Member") == 0)
        }
    }

    @Test("a uniqueness violation writes nothing; swapping unique values in one commit is fine")
    func uniqueness() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var draft = TransactionDraft()
        let a = draft.insert("Member", values: ["email": s("a@x.org")])
        let b = draft.insert("Member", values: ["email": s("b@x.org")])
        let result = try log.commit(draft)
        let aID = try #require(result.permanentID(for: a))
        let bID = try #require(result.permanentID(for: b))

        var clash = TransactionDraft()
        clash.insert("Member", values: ["email": s("a@x.org"), "name": s("Impostor")])
        let error = #expect(throws: LogError.self) { try log.commit(clash) }
        guard case .uniquenessViolation(let entity, let properties, let value, let objects) = error else {
            Issue.record("expected a uniqueness violation, got \(String(describing: error))")
            return
        }
        #expect(entity == "Member")
        #expect(properties == ["email"])
        #expect(value == "\"a@x.org\"")
        #expect(objects.contains("Member/p1"))
        #expect(try log.read { try $0.count(of: "Member") } == 2)
        #expect(try log.read { try $0.head } == 1)

        var swap = TransactionDraft()
        swap.update(.stored(aID), values: ["email": s("b@x.org")])
        swap.update(.stored(bID), values: ["email": s("a@x.org")])
        try log.commit(swap)
        #expect(try log.read { try $0.object(aID)?["email"] } == .attribute(.string("b@x.org")))

        // Sub-entity objects share the superentity's constraint.
        var captain = TransactionDraft()
        captain.insert("Captain", values: ["email": s("b@x.org")])
        #expect(throws: LogError.self) { try log.commit(captain) }

        // Nil doesn't constrain.
        var nils = TransactionDraft()
        nils.insert("Member", values: ["name": s("no email 1")])
        nils.insert("Member", values: ["name": s("no email 2")])
        try log.commit(nils)
    }

    @Test("uniqueness holds for the state a commit leaves: clashes between its own inserts, updates and deletes")
    func uniquenessWithinOneCommit() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var seed = TransactionDraft()
        seed.insert("Member", values: ["email": s("a@x.org")])
        seed.insert("Member", values: ["email": s("b@x.org")])
        try log.commit(seed)
        let a = StoredObjectID(entity: "Member", primaryKey: 1)
        func violation(_ build: (inout TransactionDraft) -> Void) -> (value: String, objects: [String])? {
            var draft = TransactionDraft()
            build(&draft)
            let error = #expect(throws: LogError.self) { try log.commit(draft) }
            guard case .uniquenessViolation(_, _, let value, let objects) = error else {
                Issue.record("expected a uniqueness violation, got \(String(describing: error))")
                return nil
            }
            return (value, objects.sorted())
        }

        // Two inserts of the same draft.
        let twins = violation { draft in
            draft.insert("Member", values: ["email": s("c@x.org")])
            draft.insert("Member", values: ["name": s("between")])
            draft.insert("Member", values: ["email": s("c@x.org")])
        }
        #expect(twins?.value == "\"c@x.org\"")
        #expect(twins?.objects == ["Member/p3", "Member/p5"])
        // An insert and a sub-entity's insert share the superentity's constraint.
        #expect(violation { draft in
            draft.insert("Captain", values: ["email": s("d@x.org")])
            draft.insert("Member", values: ["email": s("d@x.org")])
        }?.objects == ["Captain/p1", "Member/p3"])
        // An insert, then an existing object updated to its value.
        #expect(violation { draft in
            draft.insert("Member", values: ["email": s("e@x.org")])
            draft.update(.stored(a), values: ["email": s("e@x.org")])
        }?.objects == ["Member/p1", "Member/p3"])
        // An insert updated to an existing object's value.
        #expect(violation { draft in
            let new = draft.insert("Member", values: ["email": s("f@x.org")])
            draft.update(new, values: ["email": s("b@x.org")])
        }?.objects == ["Member/p2", "Member/p3"])
        // An insert clashing with an existing object in a later group.
        #expect(violation { draft in
            draft.insert("Member", values: ["name": s("first")])
            draft.beginGroup(actionName: "Second")
            draft.insert("Member", values: ["email": s("a@x.org")])
        }?.objects == ["Member/p1", "Member/p4"])
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.head == 1)
            #expect(try reader.count(of: "Member") == 2)
            #expect(try reader.countIndex(entity: "Member", attribute: "email", range: IndexRange()) == 2)
        }

        // Clashes the same commit resolves are fine: the existing holder deleted, or the
        // other insert changed, after the insert.
        var resolved = TransactionDraft()
        resolved.insert("Member", values: ["email": s("a@x.org"), "name": s("successor")])
        resolved.delete(.stored(a))
        resolved.insert("Member", values: ["email": s("g@x.org")])
        let second = resolved.insert("Member", values: ["email": s("g@x.org")])
        resolved.update(second, values: ["email": s("h@x.org")])
        let result = try log.commit(resolved)
        let successor = try #require(result.permanentIDs.values.first { $0.primaryKey == 3 })
        try log.read { (reader: borrowing LogReader) throws in
            var holders: [StoredObjectID] = []
            try reader.scanIndex(entity: "Member", attribute: "email", range: .equal(.string("a@x.org"))) { id in
                holders.append(id)
                return .next
            }
            #expect(holders == [successor])
            #expect(try reader.countIndex(entity: "Member", attribute: "email", range: IndexRange()) == 4)
            #expect(try reader.object(StoredObjectID(entity: "Member", primaryKey: 5))?["email"] == .attribute(.string("h@x.org")))
            // The stored event is the returned one.
            #expect(try reader.event(result.sequence) == result.event)
        }

        // Values longer than an index key holds are compared in full.
        let stem = String(repeating: "x", count: IndexKeyEncoding.maximumComponentLength + 10)
        var long = TransactionDraft()
        long.insert("Member", values: ["email": s(stem + "1@x.org")])
        long.insert("Member", values: ["email": s(stem + "2@x.org")])
        try log.commit(long)
        #expect(violation { draft in draft.insert("Member", values: ["email": s(stem + "1@x.org")]) } != nil)
    }

    @Test("wrong types, unknown names, derived sides and abstract inserts are refused clearly")
    func badDraftsRefused() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        func refusal(_ build: (inout TransactionDraft) -> Void) -> LogError? {
            var draft = TransactionDraft()
            build(&draft)
            return #expect(throws: LogError.self) { try log.commit(draft) }
        }
        #expect(refusal { $0.insert("Member", values: ["age": s("old")]) }
            == .typeMismatch(entity: "Member", property: "age", expected: "int32", got: "string"))
        #expect(refusal { $0.insert("Member", values: ["shoeSize": i(3)]) }
            == .unknownProperty(entity: "Member", property: "shoeSize"))
        #expect(refusal { $0.insert("Member", values: ["notes": s("transient")]) }
            == .unknownProperty(entity: "Member", property: "notes"))
        #expect(refusal { $0.insert("Spaceship", values: [:]) } == .unknownEntity("Spaceship"))
        #expect(refusal { $0.insert("Club", values: ["members": .references([])]) }
            == .derivedRelationshipSide(entity: "Club", property: "members", recordedSide: "Member.club"))
        let badge = refusal { draft in
            let sponsor = draft.insert("Sponsor", values: [:])
            draft.insert("Member", values: ["club": .reference(sponsor)])
        }
        #expect(badge == .typeMismatch(entity: "Member", property: "club", expected: "a reference to Club", got: "a reference to Sponsor"))
        #expect(refusal { $0.update(.stored(StoredObjectID(entity: "Member", primaryKey: 42)), values: ["age": i(1)]) }
            == .objectNotFound("Member/p42"))
        #expect(try log.read { try $0.head } == 0)
    }

    @Test("ordered to-many keeps order; many-to-many and one-to-one read from both sides")
    func relationshipKinds() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var draft = TransactionDraft()
        let club = draft.insert("Club", values: ["name": s("Otters")])
        let m1 = draft.insert("Member", values: ["name": s("One")])
        let m2 = draft.insert("Member", values: ["name": s("Two")])
        let m3 = draft.insert("Member", values: ["name": s("Three")])
        let acme = draft.insert("Sponsor", values: ["name": s("Acme")])
        let globex = draft.insert("Sponsor", values: ["name": s("Globex")])
        // One-to-one: "Badge.club" sorts before "Club.badge", so the badge's side is recorded.
        let badge = draft.insert("Badge", values: ["colour": s("green"), "club": .reference(club)])
        draft.update(club, values: ["lineup": .references([m3, m1, m2]), "sponsors": .references([globex, acme])])
        let result = try log.commit(draft)
        let ids = { (object: DraftObjectID) in result.permanentID(for: object)! }

        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.related(ids(club), "lineup") == [ids(m3), ids(m1), ids(m2)])
            #expect(try reader.related(ids(m1), "lineupClub") == [ids(club)])
            #expect(try reader.related(ids(club), "sponsors") == [ids(acme), ids(globex)])
            #expect(try reader.related(ids(acme), "clubs") == [ids(club)])
            #expect(try reader.related(ids(badge), "club") == [ids(club)])
            #expect(try reader.related(ids(club), "badge") == [ids(badge)])
        }

        var change = TransactionDraft()
        change.changeMembers(of: .stored(ids(club)), "sponsors", removing: [.stored(ids(acme))])
        change.update(.stored(ids(club)), values: ["lineup": .references([.stored(ids(m2))])])
        let changed = try log.commit(change)
        #expect(changed.event.changes.contains(.update(ids(club), changes: [
            .membership(property: "sponsors", added: [], removed: [ids(acme)])
        ])))
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.related(ids(club), "sponsors") == [ids(globex)])
            #expect(try reader.related(ids(acme), "clubs") == [])
            #expect(try reader.related(ids(club), "lineup") == [ids(m2)])
            #expect(try reader.related(ids(m1), "lineupClub") == [])
        }
    }

    @Test("sub-entity objects appear in their superentity's scans and indexes")
    func inheritance() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var draft = TransactionDraft()
        draft.insert("Member", values: ["name": s("Plain"), "age": i(20)])
        draft.insert("Captain", values: ["name": s("Cap"), "age": i(40), "since": .attribute(.date(Date(timeIntervalSince1970: 0)))])
        try log.commit(draft)
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.count(of: "Member") == 2)
            #expect(try reader.count(of: "Member", includingSubentities: false) == 1)
            #expect(try reader.count(of: "Captain") == 1)
            var names: [StoredObjectID] = []
            try reader.scanIndex(entity: "Member", attribute: "age", range: .all) { id in
                names.append(id)
                return .next
            }
            #expect(names == [StoredObjectID(entity: "Member", primaryKey: 1), StoredObjectID(entity: "Captain", primaryKey: 1)])
            var captains: [StoredObjectID] = []
            try reader.scanIndex(entity: "Captain", attribute: "age", range: .all) { id in
                captains.append(id)
                return .next
            }
            #expect(captains == [StoredObjectID(entity: "Captain", primaryKey: 1)])
        }
    }

    @Test("a transaction larger than one chunk is split and reads back whole")
    func chunking() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel()) { $0.chunkSize = 100 }
        var draft = TransactionDraft()
        for n in 0..<500 { draft.insert("Member", values: ["name": s("member \(n)"), "age": i(Int32(n))]) }
        let result = try log.commit(draft)
        let stored = try log.read { try $0.event(1) }
        #expect(stored == result.event)
        #expect(stored.changes.count == 500)
    }

    @Test("a reopened store has its data, UUID and model; read-only opens write nothing")
    func reopen() throws {
        let dir = try TemporaryDirectory()
        let model = try libraryModel()
        let uuid: UUID
        do {
            let log = try openLog(dir, model: model)
            uuid = log.storeUUID
            var draft = TransactionDraft()
            draft.insert("Club", values: ["name": s("Otters")])
            try log.commit(draft)
        }
        let again = try openLog(dir, model: model)
        #expect(again.storeUUID == uuid)
        #expect(again.modelVersion == 1)
        #expect(try again.read { try $0.head } == 1)

        let reader = try EventLog(openingExistingAt: dir.file("store"))
        #expect(reader.storeUUID == uuid)
        #expect(reader.model.versionHash == model.versionHash)
        #expect(try reader.read { try $0.object(StoredObjectID(entity: "Club", primaryKey: 1)) }?["name"] == .attribute(.string("Otters")))
        #expect(throws: LogError.self) { try reader.commit(TransactionDraft()) }

        let missing = #expect(throws: LogError.self) { _ = try EventLog(openingExistingAt: dir.file("nothing-here")) }
        #expect(missing == .notAStore(dir.file("nothing-here")))
    }

    @Test("a new model version is recorded beside the old one; events name their version")
    func modelVersions() throws {
        let dir = try TemporaryDirectory()
        let v1 = try libraryModel()
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            draft.insert("Club", values: ["name": s("Otters")])
            try log.commit(draft)
        }
        var v2 = v1
        var club = try #require(v2.entity(named: "Club"))
        club.attributes.append(AttributeDescription("motto", .string))
        v2.entities = v2.entities.map { $0.name == "Club" ? club : $0 }
        let log = try openLog(dir, model: v2)
        #expect(log.modelVersion == 2)
        var draft = TransactionDraft()
        draft.update(.stored(StoredObjectID(entity: "Club", primaryKey: 1)), values: ["motto": s("Swim")])
        try log.commit(draft)
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.event(1).modelVersion == 1)
            #expect(try reader.event(2).modelVersion == 2)
            #expect(try reader.metadata().modelVersions == [1, 2])
        }
        #expect(log.storedModels().count == 2)
    }
}

@Suite("Event log: restoring deleted objects")
struct RestoreTests {
    @Test("a deleted object can be restored under its own ID; an unknown or live ID cannot")
    func restore() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var draft = TransactionDraft()
        let m = draft.insert("Member", values: ["name": s("Ada")])
        let id = try #require(try log.commit(draft).permanentID(for: m))
        var delete = TransactionDraft()
        delete.delete(.stored(id))
        try log.commit(delete)

        var restore = TransactionDraft(kind: .undo(of: 2, group: 0))
        restore.restore(id, values: ["name": s("Ada")])
        let result = try log.commit(restore)
        #expect(result.event.changes == [.insert(id, values: ["name": .attribute(.string("Ada"))])])
        #expect(try log.read { try $0.object(id)?["name"] } == .attribute(.string("Ada")))
        #expect(try log.read { try $0.lastPrimaryKey(of: "Member") } == 1)

        var again = TransactionDraft()
        again.restore(id, values: [:])
        #expect(throws: LogError.objectExists("Member/p1")) { try log.commit(again) }
        var never = TransactionDraft()
        never.restore(StoredObjectID(entity: "Member", primaryKey: 9), values: [:])
        #expect(throws: LogError.self) { try log.commit(never) }
        #expect(try log.verify().isClean)
    }
}

@Suite("Event log: reserved primary keys")
struct ReservationTests {
    @Test("reserving keys logs a reservation; the reserved IDs insert later; replay and verify agree")
    func reservation() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        let range = try log.reservePrimaryKeys(of: "Member", count: 3, author: "alice")
        #expect(range == 1...3)
        var draft = TransactionDraft()
        draft.insert("Member", values: ["name": s("fresh")])
        let fresh = try log.commit(draft)
        #expect(fresh.event.changes.first?.objectID == StoredObjectID(entity: "Member", primaryKey: 4), "after the reserved keys")
        var reserved = TransactionDraft()
        reserved.restore(StoredObjectID(entity: "Member", primaryKey: 2), values: ["name": s("reserved")])
        try log.commit(reserved)
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.event(1).kind == .reservation(entity: "Member", range: 1...3))
            #expect(try reader.event(1).changes.isEmpty)
            #expect(try reader.lastPrimaryKey(of: "Member") == 4)
            #expect(try reader.object(StoredObjectID(entity: "Member", primaryKey: 2))?["name"] == .attribute(.string("reserved")))
        }
        #expect(try log.verify().isClean)
        #expect(throws: LogError.self) { _ = try log.reservePrimaryKeys(of: "Member", count: 0) }
    }
}

@Suite("Event log: an object's version from its record header; index entries on update")
struct RecordHeaderAndIndexUpdateTests {
    @Test("an object's version read from its record's header is object(_:)'s version: after insert, update and delete, and nil for a missing object")
    func versionFromHeader() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var first = TransactionDraft()
        let m = first.insert("Member", values: ["name": s("Ada"), "age": i(36)])
        let id = try #require(try log.commit(first).permanentID(for: m))
        func versions() throws -> (header: UInt64?, object: UInt64?) {
            try log.read { (reader: borrowing LogReader) throws in (try reader.version(of: id), try reader.object(id)?.version) }
        }
        #expect(try versions() == (1, 1))
        var second = TransactionDraft()
        _ = second.insert("Club", values: ["name": s("Otters")])
        try log.commit(second)
        var third = TransactionDraft()
        third.update(.stored(id), values: ["rating": .attribute(.double(4.5))])
        try log.commit(third)
        #expect(try versions() == (3, 3))
        var fourth = TransactionDraft()
        fourth.delete(.stored(id))
        try log.commit(fourth)
        #expect(try versions() == (nil, nil))
        #expect(try log.read { try $0.version(of: StoredObjectID(entity: "Member", primaryKey: 99)) } == nil)
    }

    @Test("an update of properties no index holds leaves the index entries; one of an indexed property moves its entry")
    func updateKeepsOrMovesIndexEntries() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var first = TransactionDraft()
        let m = first.insert("Member", values: ["name": s("Ada"), "age": i(36), "email": s("ada@example.com")])
        let id = try #require(try log.commit(first).permanentID(for: m))
        func ids(age: Int32) throws -> [StoredObjectID] {
            try log.read { (reader: borrowing LogReader) throws in
                var found: [StoredObjectID] = []
                try reader.scanIndex(entity: "Member", attribute: "age", range: .equal(.int32(age))) { found.append($0); return .next }
                return found
            }
        }
        var rename = TransactionDraft()
        rename.update(.stored(id), values: ["name": s("Ada L."), "rating": .attribute(.double(2))])
        try log.commit(rename)
        #expect(try ids(age: 36) == [id])
        var birthday = TransactionDraft()
        birthday.update(.stored(id), values: ["age": i(37), "name": s("Ada")])
        try log.commit(birthday)
        #expect(try ids(age: 36).isEmpty)
        #expect(try ids(age: 37) == [id])
        // The unique email is still held: another member can't take it.
        var taker = TransactionDraft()
        _ = taker.insert("Member", values: ["name": s("Eve"), "email": s("ada@example.com")])
        #expect(throws: LogError.self) { try log.commit(taker) }
        #expect(try log.verify().isClean)
    }
}
