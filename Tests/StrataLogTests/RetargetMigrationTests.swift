import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// A model version that changes a relationship's destination (`Player.team` from `Team` to
/// `Player`), and one whose entities (or attributes) swap names through their renaming
/// identifiers (spec 0004 §4.5–4.6). Before session 33 both migrated nothing: the stored
/// references kept naming `Team` objects through a relationship to `Player`, and verify found
/// the store clean; the swap was taken as no rename at all.
@Suite("Event log: a relationship's destination changed; swapped renames")
struct RetargetMigrationTests {
    static func v1() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true)
            }
            Entity("Player") {
                Attribute("name", .string)
                Relationship("team", to: "Team", inverse: "players")
            }
        }
    }

    /// `Player.team` leads to `Player` now (a mentor), under the same name; `Team.players` goes.
    static func retargeted() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
            }
            Entity("Player") {
                Attribute("name", .string)
                Relationship("team", to: "Player", inverse: "fans")
                Relationship("fans", to: "Player", inverse: "team", toMany: true)
            }
        }
    }

    /// `Player.team` leads to `Group`, `Team`'s new parent: every stored reference stays valid.
    static func widened() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Group") {
                Attribute("name", .string)
                Relationship("members", to: "Player", inverse: "team", toMany: true)
            }
            Entity("Team", parent: "Group") {}
            Entity("Player") {
                Attribute("name", .string)
                Relationship("team", to: "Group", inverse: "members")
            }
        }
    }

    /// Two teams and three players, two of them in a team.
    static func store(_ dir: TemporaryDirectory) throws -> (teams: [StoredObjectID], players: [StoredObjectID]) {
        let log = try openLog(dir, model: try v1())
        var draft = TransactionDraft()
        let t1 = draft.insert("Team", values: ["name": s("Otters")])
        let t2 = draft.insert("Team", values: ["name": s("Herons")])
        let p1 = draft.insert("Player", values: ["name": s("Ann"), "team": .reference(t1)])
        let p2 = draft.insert("Player", values: ["name": s("Ben"), "team": .reference(t2)])
        let p3 = draft.insert("Player", values: ["name": s("Cy")])
        let result = try log.commit(draft)
        func id(_ object: DraftObjectID) throws -> StoredObjectID { try #require(result.permanentID(for: object)) }
        return ([try id(t1), try id(t2)], [try id(p1), try id(p2), try id(p3)])
    }

    @Test("a relationship whose destination changes is refused without the opt-in, naming the entity, the relationship and both destinations; nothing is written")
    func retargetRefused() throws {
        let dir = try TemporaryDirectory("strata-retarget")
        let (teams, players) = try Self.store(dir)
        #expect {
            _ = try openLog(dir, model: try Self.retargeted()) { $0.allowsRemovingEntitiesAndProperties = false }
        } throws: { error in
            guard case .modelMismatch(let message) = error as? LogError else { return false }
            return message.contains("Player.team (to Team; this model's Player.team leads to Player)")
        }
        let log = try openLog(dir, model: try Self.v1())
        #expect(try log.head == 1, "nothing written")
        #expect(try log.read { try $0.related(players[0], "team") } == [teams[0]])
    }

    @Test("with the opt-in, the values of a relationship whose destination changes are taken out and not put back: no reference names an object of the old destination, verify is clean, the relationship takes the new destination's objects")
    func retargetDropsValues() throws {
        let dir = try TemporaryDirectory("strata-retarget")
        let (_, players) = try Self.store(dir)
        let log = try openLog(dir, model: try Self.retargeted())
        #expect(try log.head == 3, "a take-out (model version 1) and the migration (model version 2)")
        let takeOut = try log.read { try $0.event(2) }
        #expect(takeOut.modelVersion == 1)
        let emptied = takeOut.groups.flatMap(\.changes).filter { change in
            guard case .update(let id, let changes) = change else { return false }
            return id.entity == "Player" && changes.contains { $0.property == "team" }
        }
        #expect(emptied.count == 2, "the two players in a team lose the value")
        #expect(log.lastMigrationDrops == [
            EventLog.MigrationDrop(entity: "Player", relationship: "team", oldDestination: "Team", newDestination: "Player", objects: 2)
        ])
        try log.read { reader throws in
            for player in players {
                #expect(try reader.related(player, "team") == [])
                #expect(try reader.object(player)?.values["team"] == nil)
            }
        }
        #expect(try log.verify().isClean)
        var draft = TransactionDraft()
        draft.update(.stored(players[0]), values: ["team": .reference(.stored(players[1]))])
        try log.commit(draft)
        #expect(try log.read { try $0.related(players[1], "fans") } == [players[0]])
        #expect(try log.verify().isClean)
        // Reopened: nothing more to migrate.
        #expect(try openLog(dir, model: try Self.retargeted()).head == 4)
    }

    @Test("a relationship that leads to its destination's new parent keeps its values: every stored reference is still an object it may name")
    func widenedDestinationKept() throws {
        let dir = try TemporaryDirectory("strata-retarget")
        let (teams, players) = try Self.store(dir)
        let log = try openLog(dir, model: try Self.widened())
        try log.read { reader throws in
            #expect(try reader.related(players[0], "team") == [teams[0]])
            #expect(try reader.related(players[1], "team") == [teams[1]])
            #expect(try reader.related(teams[0], "members") == [players[0]])
        }
        #expect(try log.verify().isClean)
        #expect(log.lastMigrationDrops.isEmpty)
    }

    /// `Team.players` becomes `Team.captain`, a to-one: `Player.team` is the recorded side of
    /// a one-to-one now.
    static func oneToOne() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("captain", to: "Player", inverse: "team")
            }
            Entity("Player") {
                Attribute("name", .string)
                Relationship("team", to: "Team", inverse: "captain")
            }
        }
    }

    @Test("an inverse made a to-one: two objects holding one destination refuse the migration, naming them; one each migrates, verify clean")
    func inverseMadeToOne() throws {
        for crowded in [true, false] {
            let dir = try TemporaryDirectory("strata-retarget")
            let (teams, players) = try Self.store(dir)
            if crowded {
                var draft = TransactionDraft()
                draft.update(.stored(players[2]), values: ["team": .reference(.stored(teams[0]))])
                try openLog(dir, model: try Self.v1()).commit(draft)
            }
            if crowded {
                #expect {
                    _ = try openLog(dir, model: try Self.oneToOne())
                } throws: { error in
                    guard case .migration(let message) = error as? LogError else { return false }
                    return message.contains(
                        "\(teams[0]) would be held through Player.team by both \(players[0]) and \(players[2]), but its inverse Team.captain is a to-one")
                        && message.contains("Nothing was written")
                }
                #expect(try openLog(dir, model: try Self.v1()).head == 2, "nothing written")
            } else {
                let log = try openLog(dir, model: try Self.oneToOne())
                #expect(try log.read { try $0.related(teams[0], "captain") } == [players[0]])
                #expect(try log.read { try $0.related(players[1], "team") } == [teams[1]])
                #expect(try log.verify().isClean)
            }
        }
    }

    @Test("verify reports a reference that names an object of an entity other than its relationship's destination: the object, the relationship, the target and its entity")
    func verifyReportsWrongDestination() throws {
        let dir = try TemporaryDirectory("strata-retarget")
        let (teams, players) = try Self.store(dir)
        let log = try openLog(dir, model: try Self.v1()) { $0.skipsDestinationCheck = true }
        var draft = TransactionDraft()
        draft.update(.stored(players[2]), values: ["team": .reference(.stored(players[0]))])
        try log.commit(draft)
        let report = try log.verify()
        #expect(report.problems.count == 1, "\(report.problems)")
        #expect(report.problems.first?.location == "\(players[2]).team")
        #expect(
            report.problems.first?.message
                == "names \(players[0]), an object of Player, but Player.team leads to Team (and its sub-entities)")
        #expect(teams.count == 2)
    }

    /// The first version: Cat, Dog, Person.first and Person.last, no renaming identifiers.
    static func unswapped() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Cat") { Attribute("name", .string) }
            Entity("Dog") { Attribute("name", .string) }
            Entity("Person") {
                Attribute("first", .string)
                Attribute("last", .string)
            }
        }
    }

    /// The next: Cat and Dog swap names (`entities`), or Person's first and last do.
    static func swapped(entities: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            if entities {
                Entity("Cat") { Attribute("name", .string) }.renamed(from: "Dog")
                Entity("Dog") { Attribute("name", .string) }.renamed(from: "Cat")
            } else {
                Entity("Cat") { Attribute("name", .string) }
                Entity("Dog") { Attribute("name", .string) }
            }
            Entity("Person") {
                if entities {
                    Attribute("first", .string)
                    Attribute("last", .string)
                } else {
                    Attribute("first", .string).renamed(from: "last")
                    Attribute("last", .string)
                }
            }
        }
    }

    /// Swapped properties migrate since session 34 (`PropertySwapMigrationTests`); one
    /// property that claims another's name without the other claiming its own stays refused.
    @Test("entities that swap names (an attribute claiming another's name alone) through their renaming identifiers are refused, naming them; nothing is written")
    func swappedRenamesRefused() throws {
        for entities in [true, false] {
            let dir = try TemporaryDirectory("strata-swap")
            let log = try openLog(dir, model: try Self.unswapped())
            var draft = TransactionDraft()
            let cat = draft.insert("Cat", values: ["name": s("Tom")])
            let person = draft.insert("Person", values: ["first": s("Ada"), "last": s("Lovelace")])
            let result = try log.commit(draft)
            let expected = entities
                ? "its entities Cat and Dog swap names: Cat renames Dog and Dog renames Cat (of model version 1)"
                : "Person's property first renames Person.last (of model version 1) and keeps its own name, which that version gives another property"
            #expect {
                _ = try openLog(dir, model: try Self.swapped(entities: entities))
            } throws: { error in
                guard case .migration(let message) = error as? LogError else { return false }
                return message.contains(expected) && message.contains("Nothing was written")
            }
            let reopened = try openLog(dir, model: try Self.unswapped())
            #expect(try reopened.head == 1, "nothing written")
            let catID = try #require(result.permanentID(for: cat))
            let personID = try #require(result.permanentID(for: person))
            #expect(try reopened.read { try $0.object(catID)?.values["name"] } == .attribute(.string("Tom")))
            #expect(try reopened.read { try $0.object(personID)?.values["first"] } == .attribute(.string("Ada")))
        }
    }
}
