import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// A model version that renames properties (`renamingIdentifier`), removes them, or records a
/// relationship on its other side: the values stored under the old names are taken out in the
/// earlier version's terms and put back under the new ones, as Core Data's lightweight
/// migration carries them (spec 0004 §4.5).
@Suite("Event log: renamed, removed and re-sided properties")
struct RenameMigrationTests {
    /// The first model: Player.team (recorded to-one), Team.lineup (recorded ordered to-many),
    /// Sponsor.clubs ↔ Team.sponsors (many-to-many; Sponsor.clubs recorded),
    /// Player.favourites (no inverse), Player.x.
    static func v1() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true)
                Relationship("lineup", to: "Player", inverse: "lineupTeam", toMany: true, ordered: true)
                Relationship("sponsors", to: "Sponsor", inverse: "clubs", toMany: true)
            }
            Entity("Player") {
                Attribute("email", .string).indexed()
                Attribute("name", .string)
                Attribute("x", .int32)
                Relationship("team", to: "Team", inverse: "players")
                Relationship("lineupTeam", to: "Team", inverse: "lineup")
                Relationship("favourites", to: "Sponsor", toMany: true)
            }
            Entity("Sponsor") {
                Attribute("name", .string)
                Relationship("clubs", to: "Team", inverse: "sponsors", toMany: true)
            }
        }
    }

    /// The next: email → emailAddress (with a default, which a rename doesn't apply),
    /// team → club and players → roster, clubs → teams (still the recorded side), lineup
    /// unordered (so Player.lineupTeam becomes the recorded side), x and favourites removed.
    static func v2(_ email: AttributeDescription = Attribute("emailAddress", .string, default: "none").indexed().renamed(from: "email"))
        throws -> ManagedObjectModel
    {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("roster", to: "Player", inverse: "club", toMany: true).renamed(from: "players")
                Relationship("lineup", to: "Player", inverse: "lineupTeam", toMany: true)
                Relationship("sponsors", to: "Sponsor", inverse: "teams", toMany: true)
            }
            Entity("Player") {
                email
                Attribute("name", .string)
                Relationship("club", to: "Team", inverse: "roster").renamed(from: "team")
                Relationship("lineupTeam", to: "Team", inverse: "lineup")
            }
            Entity("Sponsor") {
                Attribute("name", .string)
                Relationship("teams", to: "Team", inverse: "sponsors", toMany: true).renamed(from: "clubs")
            }
        }
    }

    struct Stored {
        var teams: [StoredObjectID] = []
        var players: [StoredObjectID] = []
        var sponsors: [StoredObjectID] = []
    }

    /// Two teams, three players (the third without email), two sponsors, written with `v1()`.
    static func store(_ dir: TemporaryDirectory) throws -> Stored {
        let log = try openLog(dir, model: try v1())
        var draft = TransactionDraft()
        let t1 = draft.insert("Team", values: ["name": s("Otters")])
        let t2 = draft.insert("Team", values: ["name": s("Herons")])
        let s1 = draft.insert("Sponsor", values: ["name": s("Acme"), "clubs": .references([t1, t2])])
        let s2 = draft.insert("Sponsor", values: ["name": s("Bolt"), "clubs": .references([t2])])
        let p1 = draft.insert(
            "Player", values: ["email": s("a@x"), "name": s("Ann"), "x": i(5), "team": .reference(t1), "favourites": .references([s1])])
        let p2 = draft.insert("Player", values: ["email": s("b@x"), "name": s("Ben"), "team": .reference(t1)])
        let p3 = draft.insert("Player", values: ["name": s("Cy"), "team": .reference(t2)])
        draft.update(t1, values: ["lineup": .references([p2, p1])])
        let result = try log.commit(draft)
        func id(_ object: DraftObjectID) throws -> StoredObjectID { try #require(result.permanentID(for: object)) }
        return Stored(teams: [try id(t1), try id(t2)], players: [try id(p1), try id(p2), try id(p3)], sponsors: [try id(s1), try id(s2)])
    }

    @Test("renamed attributes and relationships keep their values, a relationship recorded on its other side moves there, removed properties go: two migration transactions, in each version's terms; indexes, verify, replay, as-of and compaction agree")
    func renamesAndMoves() throws {
        let dir = try TemporaryDirectory("strata-renames")
        let stored = try Self.store(dir)
        let (t1, t2) = (stored.teams[0], stored.teams[1])
        let (p1, p2, p3) = (stored.players[0], stored.players[1], stored.players[2])
        let (s1, s2) = (stored.sponsors[0], stored.sponsors[1])
        let before = try openLog(dir, model: try Self.v1()).read { try $0.currentState() }

        let log = try openLog(dir, model: try Self.v2())
        #expect(try log.head == 3)
        let takeOut = try log.read { try $0.event(2) }
        #expect(takeOut.kind == .migration)
        #expect(takeOut.modelVersion == 1, "the values are taken out in the version that stored them")
        let putBack = try log.read { try $0.event(3) }
        #expect(putBack.kind == .migration)
        #expect(putBack.modelVersion == 2)

        try log.read { reader in
            let first = try #require(try reader.object(p1))
            #expect(first["emailAddress"] == .attribute(.string("a@x")))
            #expect(first.values["email"] == nil && first.values["x"] == nil)
            #expect(try reader.object(p3)?.values["emailAddress"] == nil, "a rename keeps a nil: the new default isn't applied")
            #expect(try reader.related(p1, "club") == [t1])
            #expect(try reader.related(p3, "club") == [t2])
            #expect(Set(try reader.related(t1, "roster")) == [p1, p2])
            #expect(try reader.related(p1, "lineupTeam") == [t1], "the lineup is recorded on the players now")
            #expect(try reader.related(p2, "lineupTeam") == [t1])
            #expect(try reader.related(p3, "lineupTeam") == [])
            #expect(Set(try reader.related(t1, "lineup")) == [p1, p2])
            #expect(Set(try reader.related(s1, "teams")) == [t1, t2])
            #expect(Set(try reader.related(t2, "sponsors")) == [s1, s2])
            var indexed: [StoredObjectID] = []
            try reader.scanIndex(entity: "Player", attribute: "emailAddress", range: .all) { id in
                indexed.append(id)
                return .next
            }
            #expect(indexed.filter { $0 != p3 } == [p1, p2], "the renamed attribute's index holds the values")
        }

        // Objects that had the removed properties save and delete again.
        var draft = TransactionDraft()
        draft.update(.stored(p2), values: ["name": s("Benedict")])
        draft.delete(.stored(p1))
        try log.commit(draft)
        #expect(try log.read { try $0.related(t1, "lineup") } == [p2])
        #expect(try log.read { try $0.related(s1, "teams") }.count == 2)
        try ValueMigrationTests.expectConsistent(log, dir, before: before, migration: 2)
        #expect(try log.read { try $0.state(asOf: 2) }.objects[p1]?["email"] == nil, "as of the take-out: the values are out")

        // Reopening writes nothing; a further rename whose identifier is the first name
        // (Core Data's advice for chains) carries the values again.
        #expect(try openLog(dir, model: try Self.v2()).head == 4)
        let v3 = try Self.v2(Attribute("contact", .string).renamed(from: "email"))
        let third = try openLog(dir, model: v3)
        #expect(try third.read { try $0.object(p2)?["contact"] } == .attribute(.string("b@x")))
        #expect(try third.verify().isClean)
    }

    @Test("a renamingIdentifier naming the previous name, or shared with it, both carry the values; one naming a property the earlier version still had doesn't take that property's values")
    func identifiers() throws {
        let dir = try TemporaryDirectory("strata-renames")
        let player: StoredObjectID
        do {
            let log = try openLog(dir, model: try ManagedObjectModel { Entity("P") { Attribute("a", .string); Attribute("b", .string) } })
            var draft = TransactionDraft()
            let p = draft.insert("P", values: ["a": s("one"), "b": s("two")])
            player = try #require(try log.commit(draft).permanentID(for: p))
        }
        // a → a2 by its name; b kept, and c claims "a" too but a2 is the match found first.
        let v2 = try ManagedObjectModel {
            Entity("P") {
                Attribute("a2", .string).renamed(from: "a")
                Attribute("b", .string)
                Attribute("b2", .string).renamed(from: "b")
            }
        }
        var log = try openLog(dir, model: v2)
        #expect(try log.read { try $0.object(player)?.values } == ["a2": .attribute(.string("one")), "b": .attribute(.string("two"))])
        // a2 → a3, its renamingIdentifier the shared identifier "a".
        let v3 = try ManagedObjectModel {
            Entity("P") {
                Attribute("a3", .string).renamed(from: "a")
                Attribute("b", .string)
            }
        }
        log = try openLog(dir, model: v3)
        #expect(try log.read { try $0.object(player)?.values } == ["a3": .attribute(.string("one")), "b": .attribute(.string("two"))])
        #expect(try log.verify().isClean)
    }

    @Test("a value that can't be put back refuses the open, naming it, and writes nothing")
    func refusals() throws {
        let dir = try TemporaryDirectory("strata-renames")
        do {
            let log = try openLog(dir, model: try ManagedObjectModel { Entity("P") { Attribute("code", .string) } })
            var draft = TransactionDraft()
            draft.insert("P", values: ["code": s("x1")])
            try log.commit(draft)
        }
        let v2 = try ManagedObjectModel { Entity("P") { Attribute("number", .int32).renamed(from: "code") } }
        do {
            _ = try openLog(dir, model: v2)
            Issue.record("the open succeeded")
        } catch let error as LogError {
            #expect("\(error)".contains("P/p1 has P.code (now number) = \"x1\" (string), which doesn't convert to int32 without loss"), "\(error)")
        }
        let log = try openLog(dir, model: try ManagedObjectModel { Entity("P") { Attribute("code", .string) } })
        #expect(try log.head == 1)
        #expect(try log.read { try $0.object(StoredObjectID(entity: "P", primaryKey: 1))?["code"] } == .attribute(.string("x1")))
    }

    @Test("an earlier model opening the store after a later one migrated it takes nothing out and converts nothing: the later model finds its values")
    func earlierModelAfterwards() throws {
        let dir = try TemporaryDirectory("strata-renames")
        let stored = try Self.store(dir)
        let v2 = try Self.v2()
        let migrated = try openLog(dir, model: v2).head
        let newcomer: StoredObjectID
        do {
            let old = try openLog(dir, model: try Self.v1())
            let head = try old.head
            let written = try old.read { reader in try (migrated...head).map { try reader.event($0) } }
            let changed = written.dropFirst().filter { !$0.groups.isEmpty }.map(\.sequence)
            #expect(changed.isEmpty, "the earlier model changes no value")
            // It can't change an object the later model wrote with properties it lacks …
            var draft = TransactionDraft()
            draft.update(.stored(stored.players[0]), values: ["name": s("Anna")])
            #expect {
                _ = try old.commit(draft)
            } throws: { error in
                "\(error)".contains("Player/p1 was written with model version 2, which has Player.")
                    && "\(error)".contains("this store's model (version 1) can't store it")
            }
            // … and what it writes is migrated again when the later model opens.
            draft = TransactionDraft()
            let inserted = draft.insert("Player", values: ["email": s("d@x"), "name": s("Dee"), "team": .reference(.stored(stored.teams[1]))])
            newcomer = try #require(try old.commit(draft).permanentID(for: inserted))
        }
        let log = try openLog(dir, model: v2)
        try log.read { reader throws in
            #expect(try reader.object(stored.players[0])?["emailAddress"] == .attribute(.string("a@x")))
            #expect(try reader.object(stored.players[0])?["name"] == .attribute(.string("Ann")))
            #expect(try reader.related(stored.players[0], "club") == [stored.teams[0]])
            #expect(try reader.object(newcomer)?["emailAddress"] == .attribute(.string("d@x")), "what the earlier model wrote is migrated again")
            #expect(try reader.related(newcomer, "club") == [stored.teams[1]])
        }
        #expect(try log.verify().isClean)
    }

    @Test("a renamingIdentifier that names a property still there, or one the store never had, isn't a rename: the values stay where they are")
    func notRenames() throws {
        let dir = try TemporaryDirectory("strata-rename")
        let player: StoredObjectID
        do {
            let log = try openLog(dir, model: try ManagedObjectModel { Entity("Player") { Attribute("email", .string); Attribute("name", .string) } })
            var draft = TransactionDraft()
            let p = draft.insert("Player", values: ["email": s("ann@example.com"), "name": s("Ann")])
            player = try #require(try log.commit(draft).permanentID(for: p))
        }
        let model = try ManagedObjectModel {
            Entity("Player") {
                Attribute("email", .string)
                Attribute("contact", .string).renamed(from: "email")
                Attribute("name", .string).renamed(from: "fullName")
            }
        }
        let log = try openLog(dir, model: model)
        #expect(try log.read { try $0.object(player)?.values } == ["email": .attribute(.string("ann@example.com")), "name": .attribute(.string("Ann"))])
        #expect(try log.head == 1, "nothing to migrate")
    }

    /// Player with references into it from every side: Badge.holder (a to-one on another
    /// entity), Award.winners (an unordered to-many without inverse), Player.mentor (itself),
    /// and its own Player.team and Player.sponsors (recorded on it).
    static func playerModel(renamed: Bool) throws -> ManagedObjectModel {
        let player = renamed ? "Athlete" : "Player"
        return try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: player, inverse: "team", toMany: true)
            }
            if renamed {
                Entity("Athlete") {
                    Attribute("contact", .string).indexed().renamed(from: "email")
                    Attribute("name", .string)
                    Attribute("level", .int16, default: 1).required()
                    Attribute("nickname", .string, default: "none")
                    Relationship("team", to: "Team", inverse: "players")
                    Relationship("mentor", to: "Athlete")
                    Relationship("sponsors", to: "Sponsor", inverse: "players", toMany: true)
                    Unique("contact")
                }.renamed(from: "Player")
            } else {
                Entity("Player") {
                    Attribute("email", .string).indexed()
                    Attribute("name", .string)
                    Relationship("team", to: "Team", inverse: "players")
                    Relationship("mentor", to: "Player")
                    Relationship("sponsors", to: "Sponsor", inverse: "players", toMany: true)
                    Unique("email")
                }
            }
            Entity("Sponsor") {
                Attribute("name", .string)
                Relationship("players", to: player, inverse: "sponsors", toMany: true)
            }
            Entity("Badge") {
                Attribute("colour", .string)
                Relationship("holder", to: player)
            }
            Entity("Award") {
                Attribute("title", .string)
                Relationship("winners", to: player, toMany: true)
            }
        }
    }

    @Test("renaming an entity: its objects move to the new name under the same primary keys, with every reference to them, their renamed properties and the new attributes' defaults; the counter, indexes, verify, replay and as-of agree")
    func entityRenamed() throws {
        let dir = try TemporaryDirectory("strata-rename")
        var ids: [String: StoredObjectID] = [:]
        do {
            let log = try openLog(dir, model: try Self.playerModel(renamed: false))
            var draft = TransactionDraft()
            let team = draft.insert("Team", values: ["name": s("Otters")])
            let sponsor = draft.insert("Sponsor", values: ["name": s("Acme")])
            let p2 = draft.insert("Player", values: ["email": s("b@x"), "name": s("Ben"), "team": .reference(team)])
            let p1 = draft.insert(
                "Player",
                values: ["email": s("a@x"), "name": s("Ann"), "team": .reference(team), "mentor": .reference(p2), "sponsors": .references([sponsor])])
            let badge = draft.insert("Badge", values: ["colour": s("gold"), "holder": .reference(p1)])
            let award = draft.insert("Award", values: ["title": s("MVP"), "winners": .references([p1, p2])])
            let result = try log.commit(draft)
            for (name, object) in [("team", team), ("sponsor", sponsor), ("p1", p1), ("p2", p2), ("badge", badge), ("award", award)] {
                ids[name] = result.permanentID(for: object)
            }
        }
        let before = try openLog(dir, model: try Self.playerModel(renamed: false)).read { try $0.currentState() }
        let (team, sponsor, badge, award) = (try #require(ids["team"]), try #require(ids["sponsor"]), try #require(ids["badge"]), try #require(ids["award"]))
        let (oldP1, oldP2) = (try #require(ids["p1"]), try #require(ids["p2"]))
        #expect(oldP2.primaryKey == 1 && oldP1.primaryKey == 2)
        let a1 = StoredObjectID(entity: "Athlete", primaryKey: oldP1.primaryKey)
        let a2 = StoredObjectID(entity: "Athlete", primaryKey: oldP2.primaryKey)

        let log = try openLog(dir, model: try Self.playerModel(renamed: true))
        let state = try log.read { try $0.currentState() }
        #expect(state.objects[oldP1] == nil && state.objects[oldP2] == nil)
        #expect(state.objects[a1]?["contact"] == .attribute(.string("a@x")))
        #expect(state.objects[a1]?["name"] == .attribute(.string("Ann")))
        #expect(state.objects[a1]?["level"] == .attribute(.int16(1)), "a mandatory attribute new to the entity: its default")
        #expect(state.objects[a2]?["nickname"] == .attribute(.string("none")), "an optional attribute new to the entity: its default")
        #expect(state.objects[a1]?["email"] == nil)
        try log.read { reader throws in
            #expect(try reader.related(a1, "team") == [team])
            #expect(Set(try reader.related(team, "players")) == [a1, a2])
            #expect(try reader.related(a1, "mentor") == [a2], "a reference to its own entity")
            #expect(try reader.related(a1, "sponsors") == [sponsor])
            #expect(try reader.related(sponsor, "players") == [a1])
            #expect(try reader.related(badge, "holder") == [a1], "a reference from another entity")
            #expect(Set(try reader.related(award, "winners")) == [a1, a2], "members of another entity's to-many")
            #expect(try reader.lastPrimaryKey(of: "Athlete") == 2)
        }
        var draft = TransactionDraft()
        let newcomer = draft.insert("Athlete", values: ["contact": s("c@x"), "name": s("Cy")])
        #expect(try log.commit(draft).permanentID(for: newcomer) == StoredObjectID(entity: "Athlete", primaryKey: 3))
        draft = TransactionDraft()
        draft.insert("Athlete", values: ["contact": s("a@x"), "name": s("Copy")])
        #expect(throws: LogError.self, "the uniqueness constraint covers the moved objects") { try log.commit(draft) }
        draft = TransactionDraft()
        draft.delete(.stored(a2))
        draft.update(.stored(a1), values: ["mentor": .null])
        draft.changeMembers(of: .stored(award), "winners", removing: [.stored(a2)])
        try log.commit(draft)
        #expect(try log.read { try $0.related(award, "winners") } == [a1])
        let takeOut = try log.read { reader in try (2...4).map { try reader.event($0) } }
        #expect(takeOut.map(\.modelVersion) == [1, 1, 2], "references out, objects out (version 1), then the put-back (version 2)")
        #expect(takeOut[1].groups.first?.changes.map(\.objectID) == [oldP2, oldP1])
        try ValueMigrationTests.expectConsistent(log, dir, before: before, migration: 2)
    }

    @Test("an entity a version removes (a sub-entity here, and one referring to it): its objects are deleted, and references to them from kept objects go; the rest of an ordered list keeps its order")
    func entityRemoved() throws {
        let dir = try TemporaryDirectory("strata-rename")
        func model(removing: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                Entity("Club") {
                    Attribute("name", .string)
                    Relationship("roster", to: "Member", toMany: true, ordered: true)
                }
                Entity("Member") { Attribute("name", .string) }
                if !removing {
                    Entity("Captain", parent: "Member") { Attribute("since", .int32) }
                    Entity("Badge") {
                        Attribute("colour", .string)
                        Relationship("holder", to: "Member")
                    }
                }
            }
        }
        var ids: [StoredObjectID] = []
        do {
            let log = try openLog(dir, model: try model(removing: false))
            var draft = TransactionDraft()
            let m1 = draft.insert("Member", values: ["name": s("Ann")])
            let c1 = draft.insert("Captain", values: ["name": s("Cy"), "since": i(2001)])
            let m2 = draft.insert("Member", values: ["name": s("Bo")])
            let club = draft.insert("Club", values: ["name": s("Otters"), "roster": .references([m2, c1, m1])])
            let badge = draft.insert("Badge", values: ["colour": s("gold"), "holder": .reference(c1)])
            let result = try log.commit(draft)
            ids = [m1, c1, m2, club, badge].compactMap { result.permanentID(for: $0) }
        }
        #expect(ids.count == 5)
        let before = try openLog(dir, model: try model(removing: false)).read { try $0.currentState() }
        let log = try openLog(dir, model: try model(removing: true))
        #expect(try log.read { try $0.related(ids[3], "roster") } == [ids[2], ids[0]], "the captain left the roster, which kept its order")
        #expect(try log.verify().isClean)
        #expect(try log.read { try $0.state(asOf: 1) } == before, "the removed objects are history")
        let head = try log.head
        let earlier = try openLog(dir, model: try model(removing: false))
        #expect(try earlier.head == head, "an earlier model migrates nothing back")
        try earlier.read { reader throws in
            #expect(try reader.count(of: "Captain") == 0, "the sub-entity's objects were deleted")
            #expect(try reader.count(of: "Badge") == 0)
            #expect(try reader.count(of: "Member") == 2)
        }
    }
}
