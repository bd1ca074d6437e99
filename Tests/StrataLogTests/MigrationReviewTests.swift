import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// Review probes of model-version migration (spec 0004 §4.3–4.6).
@Suite("Event log: migration review")
struct MigrationReviewTests {
    /// A renamed attribute with a default keeps a nil the object had (spec 0004 §4.4–4.5):
    /// also when no object had a value under the old name (so nothing was taken out).
    @Test("a renamed optional attribute with a default keeps nils, whether or not some object had a value")
    func renamedDefaultKeepsNil() throws {
        let dir = try TemporaryDirectory("strata-review")
        let v1 = try ManagedObjectModel { Entity("P") { Attribute("name", .string); Attribute("email", .string) } }
        let p: StoredObjectID
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            let object = draft.insert("P", values: ["name": s("Ann")])
            p = try #require(try log.commit(draft).permanentID(for: object))
        }
        let v2 = try ManagedObjectModel {
            Entity("P") { Attribute("name", .string); Attribute("emailAddress", .string, default: "none").renamed(from: "email") }
        }
        let log = try openLog(dir, model: v2)
        #expect(try log.read { try $0.object(p)?.values["emailAddress"] } == nil, "a rename keeps a nil: the new default isn't applied")
        #expect(try log.verify().isClean)
    }

    /// Chained renames (first name kept as the identifier): a record still of the first
    /// version, with nil under the first name, keeps its nil at the third.
    @Test("three versions with chained renames: a first-version record's nil isn't filled by the third version's default")
    func chainedRenameKeepsNil() throws {
        let dir = try TemporaryDirectory("strata-review")
        let v1 = try ManagedObjectModel { Entity("P") { Attribute("name", .string); Attribute("email", .string) } }
        var ids: [StoredObjectID] = []
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            let a = draft.insert("P", values: ["name": s("Ann")])
            let b = draft.insert("P", values: ["name": s("Ben"), "email": s("b@x")])
            let result = try log.commit(draft)
            ids = [try #require(result.permanentID(for: a)), try #require(result.permanentID(for: b))]
        }
        let v2 = try ManagedObjectModel {
            Entity("P") { Attribute("name", .string); Attribute("emailAddress", .string).renamed(from: "email") }
        }
        _ = try openLog(dir, model: v2)
        let v3 = try ManagedObjectModel {
            Entity("P") { Attribute("name", .string); Attribute("contact", .string, default: "none").renamed(from: "email") }
        }
        let log = try openLog(dir, model: v3)
        #expect(try log.read { try $0.object(ids[1])?.values["contact"] } == .attribute(.string("b@x")))
        #expect(try log.read { try $0.object(ids[0])?.values["contact"] } == nil, "a rename keeps a nil")
        #expect(try log.verify().isClean)
    }
}

extension MigrationReviewTests {
    /// Person (abstract) ← Player ← Captain, Coach ← Person; Team.lineup an ordered to-many
    /// to Person (mixed destinations); Player.follows ↔ Player.followers (self, many-to-many);
    /// Player.queue (ordered, self, no inverse). `renamed`: Player → Athlete, Captain → Skipper
    /// (beneath Athlete), Person → Human (abstract).
    static func hierarchy(renamed: Bool) throws -> ManagedObjectModel {
        let (person, player, captain) = renamed ? ("Human", "Athlete", "Skipper") : ("Person", "Player", "Captain")
        return try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("lineup", to: person, inverse: "lineupTeam", toMany: true, ordered: true)
                Relationship("members", to: person, inverse: "team", toMany: true)
            }
            Entity(person, abstract: true) {
                Attribute("name", .string)
                Relationship("team", to: "Team", inverse: "members")
                Relationship("lineupTeam", to: "Team", inverse: "lineup")
            }.renamed(from: "Person")
            Entity(player, parent: person) {
                Attribute("email", .string)
                Relationship("follows", to: player, inverse: "followers", toMany: true)
                Relationship("followers", to: player, inverse: "follows", toMany: true)
                Relationship("queue", to: player, toMany: true, ordered: true)
            }.renamed(from: "Player")
            Entity(captain, parent: player) {
                Attribute("since", .int32)
            }.renamed(from: "Captain")
            Entity("Coach", parent: person) {
                Attribute("level", .int32)
            }
        }
    }

    @Test("renaming an abstract parent, a sub-entity and its sub-entity: objects move with self-references, ordered mixed lists and memberships; verify, replay, as-of agree")
    func renamedHierarchy() throws {
        let dir = try TemporaryDirectory("strata-review")
        var ids: [String: StoredObjectID] = [:]
        do {
            let log = try openLog(dir, model: try Self.hierarchy(renamed: false))
            var draft = TransactionDraft()
            let team = draft.insert("Team", values: ["name": s("Otters")])
            let coach = draft.insert("Coach", values: ["name": s("Kim"), "level": i(3), "team": .reference(team)])
            let p1 = draft.insert("Player", values: ["name": s("Ann"), "email": s("a@x"), "team": .reference(team)])
            let p2 = draft.insert("Player", values: ["name": s("Ben"), "queue": .references([p1])])
            let c1 = draft.insert("Captain", values: ["name": s("Cy"), "since": i(2001), "queue": .references([p2, p1]), "team": .reference(team)])
            draft.update(p1, values: ["queue": .references([c1, p2]), "followers": .references([p2, c1])])
            draft.update(p2, values: ["followers": .references([c1])])
            draft.update(team, values: ["lineup": .references([p2, coach, c1, p1])])
            let result = try log.commit(draft)
            for (name, object) in [("team", team), ("coach", coach), ("p1", p1), ("p2", p2), ("c1", c1)] {
                ids[name] = result.permanentID(for: object)
            }
        }
        let before = try openLog(dir, model: try Self.hierarchy(renamed: false)).read { try $0.currentState() }
        let log = try openLog(dir, model: try Self.hierarchy(renamed: true))
        let team = try #require(ids["team"]), coach = try #require(ids["coach"])
        func athlete(_ name: String) throws -> StoredObjectID { StoredObjectID(entity: "Athlete", primaryKey: try #require(ids[name]).primaryKey) }
        let a1 = try athlete("p1"), a2 = try athlete("p2")
        let k1 = StoredObjectID(entity: "Skipper", primaryKey: try #require(ids["c1"]).primaryKey)
        try log.read { reader throws in
            #expect(try reader.related(team, "lineup") == [a2, coach, k1, a1], "the ordered list keeps its order")
            let members = try reader.related(team, "members"), t1 = try reader.related(a1, "team"), t2 = try reader.related(k1, "team")
            #expect(Set(members) == [coach, a1, k1], "\(members) \(t1) \(t2)")
            #expect(Set(try reader.related(k1, "follows")) == [a1, a2])
            #expect(Set(try reader.related(a1, "followers")) == [a2, k1])
            #expect(try reader.related(a1, "queue") == [k1, a2])
            #expect(try reader.related(k1, "queue") == [a2, a1])
            #expect(try reader.related(a2, "queue") == [a1])
            #expect(try reader.object(k1)?["since"] == .attribute(.int32(2001)))
            #expect(try reader.object(a1)?["email"] == .attribute(.string("a@x")))
            #expect(try reader.related(a1, "team") == [team])
        }
        try ValueMigrationTests.expectConsistent(log, dir, before: before, migration: 2)
    }
}

extension MigrationReviewTests {
    @Test("a relationship whose declaration moves up to the parent entity (no rename): its inverse still finds the sub-entity's objects")
    func relationshipMovedUp() throws {
        let dir = try TemporaryDirectory("strata-review")
        func model(onParent: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Relationship("members", to: onParent ? "Person" : "Player", inverse: "team", toMany: true)
                }
                Entity("Person") {
                    Attribute("name", .string)
                    if onParent { Relationship("team", to: "Team", inverse: "members") }
                }
                Entity("Player", parent: "Person") {
                    if !onParent { Relationship("team", to: "Team", inverse: "members") }
                }
            }
        }
        let (team, player): (StoredObjectID, StoredObjectID)
        do {
            let log = try openLog(dir, model: try model(onParent: false))
            var draft = TransactionDraft()
            let t = draft.insert("Team", values: ["name": s("Otters")])
            let p = draft.insert("Player", values: ["name": s("Ann"), "team": .reference(t)])
            let result = try log.commit(draft)
            team = try #require(result.permanentID(for: t))
            player = try #require(result.permanentID(for: p))
        }
        let before = try openLog(dir, model: try model(onParent: false)).read { try $0.currentState() }
        let log = try openLog(dir, model: try model(onParent: true))
        #expect(try log.read { try $0.related(player, "team") } == [team])
        #expect(try log.read { try $0.related(team, "members") } == [player])
        try ValueMigrationTests.expectConsistent(log, dir, before: before, migration: 2)
    }
}

extension MigrationReviewTests {
    /// A derived attribute whose derivation doesn't change, reading an attribute the
    /// migration fills with its default: it follows, as a save would compute it.
    @Test("a derived attribute reading an attribute the migration fills follows the filled value")
    func derivedFollowsFill() throws {
        let dir = try TemporaryDirectory("strata-review")
        let v1 = try ManagedObjectModel {
            Entity("P") {
                Attribute("name", .string)
                Attribute("level", .int16)
                Attribute("shown", .int16).derived(from: "level")
                Relationship("t", to: "T", inverse: "members")
            }
            Entity("T") {
                Attribute("total", .int64).derived(from: "members.@sum.level")
                Relationship("members", to: "P", inverse: "t", toMany: true)
            }
        }
        let (p, t): (StoredObjectID, StoredObjectID)
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            let team = draft.insert("T", values: [:])
            let object = draft.insert("P", values: ["name": s("Ann"), "t": .reference(team)])
            let result = try log.commit(draft)
            p = try #require(result.permanentID(for: object))
            t = try #require(result.permanentID(for: team))
        }
        let before = try openLog(dir, model: v1).read { try $0.currentState() }
        let v2 = try ManagedObjectModel {
            Entity("P") {
                Attribute("name", .string)
                Attribute("level", .int16, default: 5).required()
                Attribute("shown", .int16).derived(from: "level")
                Relationship("t", to: "T", inverse: "members")
            }
            Entity("T") {
                Attribute("total", .int64).derived(from: "members.@sum.level")
                Relationship("members", to: "P", inverse: "t", toMany: true)
            }
        }
        let log = try openLog(dir, model: v2)
        #expect(try log.read { try $0.object(p)?["level"] } == .attribute(.int16(5)))
        #expect(try log.read { try $0.object(p)?["shown"] } == .attribute(.int16(5)), "the derived value follows its input")
        #expect(try log.read { try $0.object(t)?["total"] } == .attribute(.int64(5)), "the aggregate follows its input")
        try ValueMigrationTests.expectConsistent(log, dir, before: before, migration: 2)
    }

    /// Two strings that convert to the same UUID under a uniqueness constraint: refused,
    /// nothing written, the earlier model still reads the strings.
    @Test("a conversion that makes two values equal under a uniqueness constraint refuses the open and writes nothing")
    func conversionClash() throws {
        let dir = try TemporaryDirectory("strata-review")
        let v1 = try ManagedObjectModel { Entity("P") { Attribute("code", .string); Unique("code") } }
        let upper = "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            draft.insert("P", values: ["code": s(upper)])
            draft.insert("P", values: ["code": s(upper.lowercased())])
            try log.commit(draft)
        }
        let v2 = try ManagedObjectModel { Entity("P") { Attribute("code", .uuid); Unique("code") } }
        #expect(throws: LogError.self) { _ = try openLog(dir, model: v2) }
        let log = try openLog(dir, model: v1)
        #expect(try log.head == 1)
        #expect(try log.verify().isClean)
        // Renaming it as well: the same refusal.
        let v3 = try ManagedObjectModel { Entity("P") { Attribute("key", .uuid).renamed(from: "code"); Unique("key") } }
        #expect(throws: LogError.self) { _ = try openLog(dir, model: v3) }
        #expect(try openLog(dir, model: v1).head == 1)
    }
}

extension MigrationReviewTests {
    static func entityModel(renamed: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            if renamed {
                Entity("Athlete") { Attribute("name", .string) }.renamed(from: "Player")
            } else {
                Entity("Player") { Attribute("name", .string) }
            }
        }
    }

    /// The earlier model inserts under the old entity name after the later one moved its
    /// objects and inserted its own: the later model's next open moves the newcomer too.
    @Test("an entity rename, then the earlier model inserting under the old name while the later one inserted too: the later model still opens, nothing lost")
    func renamedEntityKeyClash() throws {
        let dir = try TemporaryDirectory("strata-review")
        do {
            let log = try openLog(dir, model: try Self.entityModel(renamed: false))
            var draft = TransactionDraft()
            draft.insert("Player", values: ["name": s("Ann")])
            try log.commit(draft)
        }
        do {
            let log = try openLog(dir, model: try Self.entityModel(renamed: true))
            var draft = TransactionDraft()
            let ben = draft.insert("Athlete", values: ["name": s("Ben")])
            #expect(try log.commit(draft).permanentID(for: ben) == StoredObjectID(entity: "Athlete", primaryKey: 2))
        }
        do {
            let log = try openLog(dir, model: try Self.entityModel(renamed: false))
            var draft = TransactionDraft()
            let cy = draft.insert("Player", values: ["name": s("Cy")])
            #expect(try log.commit(draft).permanentID(for: cy) == StoredObjectID(entity: "Player", primaryKey: 3), "above the keys the later version gave out under the new name")
            #expect(try log.reservePrimaryKeys(of: "Player", count: 2) == 4...5)
        }
        let log = try openLog(dir, model: try Self.entityModel(renamed: true))
        let names = try log.read { reader in
            try reader.currentState().objects.values.compactMap { $0["name"] }
        }
        #expect(Set(names) == [.attribute(.string("Ann")), .attribute(.string("Ben")), .attribute(.string("Cy"))])
        let cy = StoredObjectID(entity: "Athlete", primaryKey: 3)
        #expect(try log.read { try $0.object(cy)?["name"] } == .attribute(.string("Cy")), "the newcomer keeps its key")
        #expect(try log.read { try $0.lastPrimaryKey(of: "Athlete") } == 3)
        var draft = TransactionDraft()
        let dee = draft.insert("Athlete", values: ["name": s("Dee")])
        #expect(try log.commit(draft).permanentID(for: dee) == StoredObjectID(entity: "Athlete", primaryKey: 4))
        #expect(try log.verify().isClean)
        let copy = dir.file("replayed")
        _ = try log.replay(through: try log.head, into: copy)
        #expect(try EventLog(openingExistingAt: copy).read { try $0.currentState() } == (try log.read { try $0.currentState() }))
    }
}

extension MigrationReviewTests {
    /// An earlier model open while the later one migrates doesn't learn of the rename: it
    /// may give out a key the new entity has. The later model's next open moves that object
    /// to the new entity's next key.
    @Test("an earlier model open during the later one's entity rename inserts a key the new entity has: the later model's next open moves it to the next key")
    func renamedEntityKeyClashWhileOpen() throws {
        let dir = try TemporaryDirectory("strata-review")
        let old = try openLog(dir, model: try Self.entityModel(renamed: false))
        var draft = TransactionDraft()
        draft.insert("Player", values: ["name": s("Ann")])
        try old.commit(draft)
        do {
            let log = try openLog(dir, model: try Self.entityModel(renamed: true))
            draft = TransactionDraft()
            draft.insert("Athlete", values: ["name": s("Ben")])
            try log.commit(draft)
        }
        draft = TransactionDraft()
        let cy = draft.insert("Player", values: ["name": s("Cy")])
        let given = try old.commit(draft).permanentID(for: cy)
        let log = try openLog(dir, model: try Self.entityModel(renamed: true))
        let state = try log.read { try $0.currentState() }
        let names = Set(state.objects.values.compactMap { $0["name"] })
        #expect(names == [.attribute(.string("Ann")), .attribute(.string("Ben")), .attribute(.string("Cy"))])
        #expect(given == StoredObjectID(entity: "Player", primaryKey: 2), "the earlier model, open since before the rename, gives out p2")
        if given == StoredObjectID(entity: "Player", primaryKey: 2) {
            #expect(state.objects[StoredObjectID(entity: "Athlete", primaryKey: 3)]?["name"] == .attribute(.string("Cy")))
        }
        #expect(try log.verify().isClean)
    }
}

extension MigrationReviewTests {
    static func chain(_ version: Int) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Attribute("size", .int64).derived(from: version == 1 ? "players.@count" : "roster.@count")
                if version == 1 {
                    Relationship("players", to: "Player", inverse: "team", toMany: true)
                } else {
                    Relationship("roster", to: version == 2 ? "Athlete" : "Member", inverse: "club", toMany: true).renamed(from: "players")
                }
            }
            switch version {
            case 1:
                Entity("Player") {
                    Attribute("email", .string).indexed()
                    Relationship("team", to: "Team", inverse: "players")
                }
                Entity("Captain", parent: "Player") { Attribute("since", .int16) }
            case 2:
                Entity("Athlete") {
                    Attribute("mail", .string).indexed().renamed(from: "email")
                    Relationship("club", to: "Team", inverse: "roster").renamed(from: "team")
                }.renamed(from: "Player")
                Entity("Captain", parent: "Athlete") { Attribute("since", .int32) }
            default:
                Entity("Member") {
                    Attribute("contact", .string).indexed().renamed(from: "email")
                    Relationship("club", to: "Team", inverse: "roster").renamed(from: "team")
                    Unique("contact")
                }.renamed(from: "Player")
                Entity("Captain", parent: "Member") { Attribute("since", .int64) }
            }
        }
    }

    static func chainStore(_ dir: TemporaryDirectory) throws -> [StoredObjectID] {
        let log = try openLog(dir, model: try chain(1))
        var draft = TransactionDraft()
        let team = draft.insert("Team", values: ["name": s("Otters")])
        let p = draft.insert("Player", values: ["email": s("a@x"), "team": .reference(team)])
        let c = draft.insert("Captain", values: ["email": s("c@x"), "since": .attribute(.int16(7)), "team": .reference(team)])
        let result = try log.commit(draft)
        return try [team, p, c].map { try #require(result.permanentID(for: $0)) }
    }

    static func expectChained(_ log: EventLog, _ ids: [StoredObjectID], entity: String, attribute: String) throws {
        let (team, p, c) = (ids[0], StoredObjectID(entity: entity, primaryKey: ids[1].primaryKey), ids[2])
        try log.read { reader throws in
            #expect(try reader.object(p)?[attribute] == .attribute(.string("a@x")))
            #expect(try reader.object(c)?[attribute] == .attribute(.string("c@x")), "a sub-entity's inherited renamed attribute")
            #expect(Set(try reader.related(team, "roster")) == [p, c])
            #expect(try reader.object(team)?["size"] == .attribute(.int64(2)))
            var indexed: [StoredObjectID] = []
            try reader.scanIndex(entity: entity, attribute: attribute, range: .all) { id in
                indexed.append(id)
                return .next
            }
            #expect(Set(indexed) == [p, c], "the index over the renamed attribute holds the entity and its sub-entity")
        }
        #expect(try log.verify().isClean)
    }

    @Test("three versions with chained entity and property renames under a parent with a sub-entity: opened in sequence, and a store jumping from the first straight to the third")
    func chainedVersions() throws {
        let dir = try TemporaryDirectory("strata-review")
        let ids = try Self.chainStore(dir)
        let before = try openLog(dir, model: try Self.chain(1)).read { try $0.currentState() }
        try Self.expectChained(try openLog(dir, model: try Self.chain(2)), ids, entity: "Athlete", attribute: "mail")
        let third = try openLog(dir, model: try Self.chain(3))
        try Self.expectChained(third, ids, entity: "Member", attribute: "contact")
        try ValueMigrationTests.expectConsistent(third, dir, before: before, migration: 2)

        let jump = try TemporaryDirectory("strata-review")
        let jumped = try Self.chainStore(jump)
        let log = try openLog(jump, model: try Self.chain(3))
        try Self.expectChained(log, jumped, entity: "Member", attribute: "contact")
        try ValueMigrationTests.expectConsistent(log, jump, before: before, migration: 2)
    }

    @Test("purging through the take-out is refused (the store was never as of it), before the migration and then through the put-back is not: the store stays whole and reopens with nothing to migrate")
    func purgeAfterMigration() throws {
        let dir = try TemporaryDirectory("strata-review")
        let ids = try Self.chainStore(dir)
        let log = try openLog(dir, model: try Self.chain(2))
        let head = try log.head
        #expect(head > 2)
        let state = try log.read { try $0.currentState() }
        #expect(throws: LogError.self, "a base as of the take-out would be a state the store never had (spec 0004 §7.6)") {
            try log.purge(through: 2, author: "review")
        }
        #expect(try log.read { try $0.purgedThrough } == 0)
        try log.purge(through: 1, author: "review")
        let report = try log.verify()
        #expect(report.isClean, "\(report)")
        #expect(try log.read { try $0.currentState() } == state)
        try log.purge(through: head, author: "review")
        let second = try log.verify()
        #expect(second.isClean, "\(second)")
        let reopened = try openLog(dir, model: try Self.chain(2))
        #expect(try reopened.head == head + 2, "the two purge markers; nothing migrated again")
        try Self.expectChained(reopened, ids, entity: "Athlete", attribute: "mail")
        let copy = dir.file("replayed")
        _ = try reopened.replay(through: try reopened.head, into: copy)
        #expect(try EventLog(openingExistingAt: copy).read { try $0.currentState() } == state)
    }
}

extension MigrationReviewTests {
    /// A purge's base snapshot rebuilds only the purging version's indexes, while the live
    /// table keeps the rows of an index an earlier version defined (its writers keep it): verify
    /// doesn't compare those after a purge. A rename of an indexed attribute (§4.5) leads here.
    @Test("a version that drops an index, then a purge through the head: verify is clean; the earlier model reopening rebuilds its index")
    func purgeAfterDroppedIndex() throws {
        let dir = try TemporaryDirectory("strata-review")
        let v1 = try ManagedObjectModel { Entity("P") { Attribute("email", .string).indexed(); Attribute("name", .string) } }
        let p: StoredObjectID
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            let object = draft.insert("P", values: ["email": s("a@x"), "name": s("Ann")])
            p = try #require(try log.commit(draft).permanentID(for: object))
        }
        do {
            let log = try openLog(dir, model: try ManagedObjectModel { Entity("P") { Attribute("email", .string); Attribute("name", .string).indexed() } })
            try log.purge(through: try log.head, author: "review")
            let report = try log.verify()
            #expect(report.isClean, "\(report)")
        }
        let log = try openLog(dir, model: v1)
        var found: [StoredObjectID] = []
        try log.read { reader in
            try reader.scanIndex(entity: "P", attribute: "email", range: .all) { id in
                found.append(id)
                return .next
            }
        }
        #expect(found == [p])
        #expect(try log.verify().isClean)
    }
}

extension MigrationReviewTests {
    /// Files under the store directory, with their sizes (data.mdb aside: the catalog records
    /// the refused model there, by design).
    static func files(_ dir: TemporaryDirectory) throws -> [String: Int] {
        let root = dir.file("store")
        var found: [String: Int] = [:]
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let name = enumerator?.nextObject() as? String {
            guard name != "data.mdb", name != "lock.mdb" else { continue }
            let attributes = try FileManager.default.attributesOfItem(atPath: (root as NSString).appendingPathComponent(name))
            found[name] = (attributes[.size] as? NSNumber)?.intValue ?? -1
        }
        return found
    }

    @Test("a refused migration (a to-many put into a to-one) writes no file and no event; a compacted store too")
    func refusalWritesNothing() throws {
        let dir = try TemporaryDirectory("strata-review")
        let v1 = try ManagedObjectModel {
            Entity("T") { Attribute("name", .string); Relationship("items", to: "I", toMany: true, ordered: true) }
            Entity("I") { Attribute("name", .string) }
        }
        do {
            let log = try openLog(dir, model: v1)
            for n in 0..<3 {
                var draft = TransactionDraft()
                let a = draft.insert("I", values: ["name": s("a\(n)")])
                let b = draft.insert("I", values: ["name": s("b\(n)")])
                draft.insert("T", values: ["name": s("t\(n)"), "items": .references([a, b])])
                try log.commit(draft)
            }
            try log.compact(CompactionRequest())
        }
        let before = try Self.files(dir)
        let state = try openLog(dir, model: v1).read { try $0.currentState() }
        let v2 = try ManagedObjectModel {
            Entity("T") { Attribute("name", .string); Relationship("item", to: "I").renamed(from: "items") }
            Entity("I") { Attribute("name", .string) }
        }
        #expect {
            _ = try openLog(dir, model: v2)
        } throws: { error in
            "\(error)".contains("which the version makes to-one") && "\(error)".contains("Nothing was written")
        }
        #expect(try Self.files(dir) == before)
        let log = try openLog(dir, model: v1)
        #expect(try log.head == 3)
        #expect(try log.read { try $0.currentState() } == state)
        #expect(try log.verify().isClean)
    }

    @Test("an ordered to-many renamed and made unordered, to a parent with mixed sub-entity destinations: every member is carried over")
    func orderedRenamedUnordered() throws {
        let dir = try TemporaryDirectory("strata-review")
        func model(_ v2: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                Entity("T") {
                    if v2 {
                        Relationship("members", to: "Person", inverse: "team", toMany: true).renamed(from: "lineup")
                    } else {
                        Relationship("lineup", to: "Person", inverse: "team", toMany: true, ordered: true)
                    }
                }
                Entity("Person", abstract: true) {
                    Attribute("name", .string)
                    Relationship("team", to: "T", inverse: v2 ? "members" : "lineup")
                }
                Entity("Player", parent: "Person") { Attribute("number", .int16) }
                Entity("Coach", parent: "Person") { Attribute("level", .int16) }
            }
        }
        var people: [StoredObjectID] = []
        let team: StoredObjectID
        do {
            let log = try openLog(dir, model: try model(false))
            var draft = TransactionDraft()
            let objects = [
                draft.insert("Player", values: ["name": s("a")]), draft.insert("Coach", values: ["name": s("b")]),
                draft.insert("Player", values: ["name": s("c")]),
            ]
            let t = draft.insert("T", values: ["lineup": .references([objects[2], objects[1], objects[0]])])
            let result = try log.commit(draft)
            people = try objects.map { try #require(result.permanentID(for: $0)) }
            team = try #require(result.permanentID(for: t))
        }
        let before = try openLog(dir, model: try model(false)).read { try $0.currentState() }
        let log = try openLog(dir, model: try model(true))
        try log.read { reader throws in
            #expect(Set(try reader.related(team, "members")) == Set(people))
            for person in people { #expect(try reader.related(person, "team") == [team]) }
        }
        try ValueMigrationTests.expectConsistent(log, dir, before: before, migration: 2)
    }

    @Test("replay through a migration's take-out is refused (the store was never as of it); through the events around it, the copies open to the states before and after")
    func replayMidMigration() throws {
        let dir = try TemporaryDirectory("strata-review")
        _ = try Self.chainStore(dir)
        let before = try openLog(dir, model: try Self.chain(1)).read { try $0.currentState() }
        let log = try openLog(dir, model: try Self.chain(2))
        let state = try log.read { try $0.currentState() }
        #expect(try log.head == 4)
        for through in [UInt64(2), 3] {
            #expect {
                _ = try log.replay(through: through, into: dir.file("copy-\(through)"))
            } throws: { error in
                "\(error)".contains("event \(through) takes values out for the migration to model version 2, which events 2…4 make in one transaction")
                    && "\(error)".contains("Replay through 1 or 4")
            }
        }
        _ = try log.replay(through: 1, into: dir.file("copy-1"))
        let first = try EventLog(path: dir.file("copy-1"), model: try Self.chain(1))
        #expect(try first.read { try $0.currentState() } == before)
        #expect(try first.verify().isClean)
        _ = try log.replay(through: 4, into: dir.file("copy-4"))
        let last = try EventLog(openingExistingAt: dir.file("copy-4"))
        #expect(try last.read { try $0.currentState() } == state)
        #expect(try last.verify().isClean)
    }
}

extension MigrationReviewTests {
    @Test("an entity renamed and renamed back (Player → Athlete → Player) with a property renamed and back: the objects return under their first IDs, with every reference")
    func renamedBack() throws {
        let dir = try TemporaryDirectory("strata-review")
        func model(_ version: Int) throws -> ManagedObjectModel {
            let player = version == 2 ? "Athlete" : "Player"
            return try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Relationship("players", to: player, inverse: "team", toMany: true)
                }
                switch version {
                case 1:
                    Entity("Player") { Attribute("email", .string).indexed(); Relationship("team", to: "Team", inverse: "players") }
                case 2:
                    Entity("Athlete") {
                        Attribute("mail", .string).indexed().renamed(from: "email")
                        Relationship("team", to: "Team", inverse: "players")
                    }.renamed(from: "Player")
                default:
                    // The first model's version hash (renaming identifiers aren't hashed), but
                    // its renaming identifiers make it a later version, which migrates.
                    Entity("Player") {
                        Attribute("email", .string).indexed().renamed(from: "mail")
                        Relationship("team", to: "Team", inverse: "players")
                    }.renamed(from: "Athlete")
                }
            }
        }
        let (team, player): (StoredObjectID, StoredObjectID)
        do {
            let log = try openLog(dir, model: try model(1))
            var draft = TransactionDraft()
            let t = draft.insert("Team", values: ["name": s("Otters")])
            let p = draft.insert("Player", values: ["email": s("a@x"), "team": .reference(t)])
            let result = try log.commit(draft)
            team = try #require(result.permanentID(for: t))
            player = try #require(result.permanentID(for: p))
        }
        let before = try openLog(dir, model: try model(1)).read { try $0.currentState() }
        _ = try openLog(dir, model: try model(2))
        let log = try openLog(dir, model: try model(3))
        #expect(try model(3).versionHash == model(1).versionHash)
        #expect(log.modelVersion == 3, "a stored version's hash with other renaming identifiers is a new version")
        let now = try log.read { try $0.currentState() }
        #expect(now == before, "the same objects, IDs and values as before both renames: \(now) vs \(before)")
        #expect(try log.read { try $0.state(asOf: 1) } == before)
        #expect(try log.read { try $0.related(team, "players") } == [player])
        #expect(try log.verify().isClean)
        var draft = TransactionDraft()
        let newcomer = draft.insert("Player", values: ["email": s("b@x")])
        #expect(try log.commit(draft).permanentID(for: newcomer) == StoredObjectID(entity: "Player", primaryKey: 2))
    }
}

extension MigrationReviewTests {
    @Test("a now() derived attribute of a renamed entity keeps its value through the move (a migration isn't a save of the object)")
    func nowThroughEntityRename() throws {
        let dir = try TemporaryDirectory("strata-review")
        func model(_ renamed: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                if renamed {
                    Entity("Athlete") { Attribute("name", .string); Attribute("touched", .date).derived(from: "now()") }.renamed(from: "Player")
                } else {
                    Entity("Player") { Attribute("name", .string); Attribute("touched", .date).derived(from: "now()") }
                }
            }
        }
        let player: StoredObjectID
        do {
            let log = try openLog(dir, model: try model(false))
            var draft = TransactionDraft()
            let p = draft.insert("Player", values: ["name": s("Ann")])
            player = try #require(try log.commit(draft).permanentID(for: p))
        }
        let touched = try #require(try openLog(dir, model: try model(false)).read { try $0.object(player)?["touched"] })
        Thread.sleep(forTimeInterval: 0.01)
        let log = try openLog(dir, model: try model(true))
        #expect(try log.read { try $0.object(StoredObjectID(entity: "Athlete", primaryKey: player.primaryKey))?["touched"] } == touched)
    }
}

extension MigrationReviewTests {
    @Test("two entities renamed at once, referring to each other (a to-one, its inverse to-many, an ordered list and a many-to-many): every reference moves")
    func twoEntitiesRenamed() throws {
        let dir = try TemporaryDirectory("strata-review")
        func model(_ renamed: Bool) throws -> ManagedObjectModel {
            let (team, player) = renamed ? ("Club", "Athlete") : ("Team", "Player")
            return try ManagedObjectModel {
                Entity(team) {
                    Attribute("name", .string)
                    Relationship("players", to: player, inverse: "team", toMany: true)
                    Relationship("order", to: player, inverse: "orderTeam", toMany: true, ordered: true)
                    Relationship("fans", to: player, inverse: "favourites", toMany: true)
                }.renamed(from: "Team")
                Entity(player) {
                    Attribute("name", .string)
                    Relationship("team", to: team, inverse: "players")
                    Relationship("orderTeam", to: team, inverse: "order")
                    Relationship("favourites", to: team, inverse: "fans", toMany: true)
                }.renamed(from: "Player")
            }
        }
        do {
            let log = try openLog(dir, model: try model(false))
            var draft = TransactionDraft()
            let t1 = draft.insert("Team", values: ["name": s("t1")])
            let t2 = draft.insert("Team", values: ["name": s("t2")])
            let p1 = draft.insert("Player", values: ["name": s("p1"), "team": .reference(t1), "favourites": .references([t1, t2])])
            let p2 = draft.insert("Player", values: ["name": s("p2"), "team": .reference(t1), "favourites": .references([t2])])
            draft.update(t1, values: ["order": .references([p2, p1])])
            try log.commit(draft)
        }
        let before = try openLog(dir, model: try model(false)).read { try $0.currentState() }
        let log = try openLog(dir, model: try model(true))
        let c1 = StoredObjectID(entity: "Club", primaryKey: 1), c2 = StoredObjectID(entity: "Club", primaryKey: 2)
        let a1 = StoredObjectID(entity: "Athlete", primaryKey: 1), a2 = StoredObjectID(entity: "Athlete", primaryKey: 2)
        try log.read { reader throws in
            #expect(Set(try reader.related(c1, "players")) == [a1, a2])
            #expect(try reader.related(c1, "order") == [a2, a1])
            #expect(Set(try reader.related(c2, "fans")) == [a1, a2])
            #expect(Set(try reader.related(a1, "favourites")) == [c1, c2])
            #expect(try reader.related(a2, "orderTeam") == [c1])
        }
        try ValueMigrationTests.expectConsistent(log, dir, before: before, migration: 2)
    }
}

extension MigrationReviewTests {
    @Test("after a refused version that renames an entity, a read-only open without a model (the CLI's) takes the newest version that wasn't refused and reads the entity's objects; once the version opens, it is the newest")
    func readOnlyAfterRefusedRename() throws {
        let dir = try TemporaryDirectory("strata-review")
        let v1 = try ManagedObjectModel { Entity("Player") { Attribute("name", .string); Attribute("score", .int64) } }
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            draft.insert("Player", values: ["name": s("Ann"), "score": .attribute(.int64(70_000))])
            try log.commit(draft)
        }
        let v2 = try ManagedObjectModel { Entity("Athlete") { Attribute("name", .string); Attribute("score", .int16) }.renamed(from: "Player") }
        #expect(throws: LogError.self) { _ = try openLog(dir, model: v2) }
        do {
            let readOnly = try EventLog(openingExistingAt: dir.file("store"))
            #expect(readOnly.modelVersion == 1)
            #expect(try readOnly.read { try $0.currentState() }.objects.count == 1)
        }
        let v1ReadOnly = try EventLog(path: dir.file("store"), model: v1, configuration: { var c = EventLog.Configuration(); c.isReadOnly = true; return c }())
        #expect(try v1ReadOnly.read { try $0.currentState() }.objects.count == 1, "the app's own model opens read-only")
        // Fixed (score widened back to int64), the rename goes through and is the newest.
        let fixed = try ManagedObjectModel { Entity("Athlete") { Attribute("name", .string); Attribute("score", .int64) }.renamed(from: "Player") }
        _ = try openLog(dir, model: fixed)
        let readOnly = try EventLog(openingExistingAt: dir.file("store"))
        #expect(readOnly.modelVersion == 2, "the refused version was taken back (spec 0004 §4.3)")
        #expect(try readOnly.read { try $0.currentState() }.objects.keys.map(\.entity) == ["Athlete"])
    }
}
