import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// A model version that gives a kept relationship another inverse (`Player.team`'s inverse
/// `Team.players` becomes `Team.roster`), and one that narrows a relationship's destination to
/// a sub-entity (`Player.team` from `Team` to `ProTeam`) — spec 0004 §4.5. Before session 34
/// the old inverse's membership was dropped with it (the new inverse started empty, and the
/// open was refused without the opt-in as if a relationship were lost), and a narrowed
/// destination dropped every stored reference, fitting or not.
@Suite("Event log: a relationship's inverse changed; a destination narrowed to a sub-entity")
struct InverseChangeMigrationTests {
    /// `Team.players`, an ordered to-many (the recorded side), and its inverse `Player.team`.
    static func v1() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true, ordered: true)
            }
            Entity("Player") {
                Attribute("name", .string)
                Relationship("team", to: "Team", inverse: "players")
            }
        }
    }

    /// `Player.team`'s inverse is `Team.roster` now, ordered (the recorded side) or not (then
    /// `Player.team` is recorded); `Team.players` goes.
    static func v2(ordered: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("roster", to: "Player", inverse: "team", toMany: true, ordered: ordered)
            }
            Entity("Player") {
                Attribute("name", .string)
                Relationship("team", to: "Team", inverse: "roster")
            }
        }
    }

    /// Two teams and four players: the first team's list out of key order (Cy, Ann), the
    /// second's Ben, Dee without a team.
    static func store(_ dir: TemporaryDirectory) throws -> (teams: [StoredObjectID], players: [StoredObjectID]) {
        let log = try openLog(dir, model: try v1())
        var draft = TransactionDraft()
        let p1 = draft.insert("Player", values: ["name": s("Ann")])
        let p2 = draft.insert("Player", values: ["name": s("Ben")])
        let p3 = draft.insert("Player", values: ["name": s("Cy")])
        let p4 = draft.insert("Player", values: ["name": s("Dee")])
        let t1 = draft.insert("Team", values: ["name": s("Otters"), "players": .references([p3, p1])])
        let t2 = draft.insert("Team", values: ["name": s("Herons"), "players": .references([p2])])
        let result = try log.commit(draft)
        func id(_ object: DraftObjectID) throws -> StoredObjectID { try #require(result.permanentID(for: object)) }
        return ([try id(t1), try id(t2)], [try id(p1), try id(p2), try id(p3), try id(p4)])
    }

    @Test("a kept relationship's new inverse takes the old inverse's membership (in its order when both are ordered), without the opt-in too; verify clean, reopened the same")
    func inverseChangeCarriesMembership() throws {
        for ordered in [true, false] {
            for allowing in [false, true] {
                let dir = try TemporaryDirectory("strata-inverse")
                let (teams, players) = try Self.store(dir)
                func check(_ log: EventLog) throws {
                    try log.read { reader throws in
                        let first = try reader.related(teams[0], "roster")
                        #expect(
                            first == (ordered ? [players[2], players[0]] : [players[0], players[2]]),
                            "ordered \(ordered), allowing \(allowing)")
                        #expect(try reader.related(teams[1], "roster") == [players[1]])
                        #expect(try reader.related(players[0], "team") == [teams[0]])
                        #expect(try reader.related(players[1], "team") == [teams[1]])
                        #expect(try reader.related(players[2], "team") == [teams[0]])
                        #expect(try reader.related(players[3], "team") == [])
                    }
                    let report = try log.verify()
                    #expect(report.isClean, "\(report.problems)")
                }
                let log = try openLog(dir, model: try Self.v2(ordered: ordered)) { $0.allowsRemovingEntitiesAndProperties = allowing }
                try check(log)
                #expect(log.lastMigrationDrops.isEmpty)
                let head = try log.head
                let reopened = try openLog(dir, model: try Self.v2(ordered: ordered)) { $0.allowsRemovingEntitiesAndProperties = false }
                #expect(try reopened.head == head, "nothing more to migrate")
                try check(reopened)
                // The new inverse is maintained: a player moved reads on both sides.
                var draft = TransactionDraft()
                if ordered {
                    draft.update(.stored(teams[1]), values: ["roster": .references([.stored(players[1]), .stored(players[3])])])
                } else {
                    draft.update(.stored(players[3]), values: ["team": .reference(.stored(teams[1]))])
                }
                try reopened.commit(draft)
                #expect(try reopened.read { try $0.related(players[3], "team") } == [teams[1]])
                #expect(try reopened.verify().isClean)
            }
        }
    }

    /// Team and its sub-entity ProTeam; `Player.team` (to-one) and `Player.rivals` (to-many),
    /// both without an inverse, lead to `Team` — or, `narrowed`, to `ProTeam`.
    static func leagues(narrowed: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") { Attribute("name", .string) }
            Entity("ProTeam", parent: "Team") { Attribute("sponsor", .string) }
            Entity("Player") {
                Attribute("name", .string)
                Relationship("team", to: narrowed ? "ProTeam" : "Team")
                Relationship("rivals", to: narrowed ? "ProTeam" : "Team", toMany: true)
            }
        }
    }

    /// A pro team and a plain team; Ann in the pro team, Ben (`misfit`) in the plain one, Cy
    /// with the pro team as a rival (and, `misfit`, the plain one too).
    static func league(_ dir: TemporaryDirectory, misfit: Bool) throws -> (pro: StoredObjectID, plain: StoredObjectID, players: [StoredObjectID]) {
        let log = try openLog(dir, model: try leagues(narrowed: false))
        var draft = TransactionDraft()
        let pro = draft.insert("ProTeam", values: ["name": s("Otters"), "sponsor": s("Acme")])
        let plain = draft.insert("Team", values: ["name": s("Herons")])
        let p1 = draft.insert("Player", values: ["name": s("Ann"), "team": .reference(pro)])
        let p2 = draft.insert("Player", values: ["name": s("Ben")].merging(misfit ? ["team": .reference(plain)] : [:]) { $1 })
        let p3 = draft.insert("Player", values: ["name": s("Cy"), "rivals": .references(misfit ? [pro, plain] : [pro])])
        let result = try log.commit(draft)
        func id(_ object: DraftObjectID) throws -> StoredObjectID { try #require(result.permanentID(for: object)) }
        return (try id(pro), try id(plain), [try id(p1), try id(p2), try id(p3)])
    }

    @Test("a destination narrowed to a sub-entity keeps the values when every stored reference already names one of its objects, without the opt-in; verify clean")
    func narrowedDestinationKept() throws {
        let dir = try TemporaryDirectory("strata-narrow")
        let (pro, _, players) = try Self.league(dir, misfit: false)
        let log = try openLog(dir, model: try Self.leagues(narrowed: true)) { $0.allowsRemovingEntitiesAndProperties = false }
        try log.read { reader throws in
            #expect(try reader.related(players[0], "team") == [pro])
            #expect(try reader.related(players[2], "rivals") == [pro])
        }
        #expect(log.lastMigrationDrops.isEmpty)
        #expect(try log.verify().isClean)
        let head = try log.head
        #expect(try openLog(dir, model: try Self.leagues(narrowed: true)).head == head, "nothing more to migrate")
    }

    @Test("a destination narrowed to a sub-entity while a stored reference names another object is refused, naming it; with the opt-in only the references that don't fit go")
    func narrowedDestinationMisfit() throws {
        let dir = try TemporaryDirectory("strata-narrow")
        let (pro, plain, players) = try Self.league(dir, misfit: true)
        #expect {
            _ = try openLog(dir, model: try Self.leagues(narrowed: true)) { $0.allowsRemovingEntitiesAndProperties = false }
        } throws: { error in
            let message = "\(error)"
            return message.contains("\(players[1]).team names \(plain)") && message.contains("ProTeam")
                && message.contains("Nothing was written")
        }
        let before = try openLog(dir, model: try Self.leagues(narrowed: false)) { $0.allowsRemovingEntitiesAndProperties = false }
        #expect(try before.head == 1, "nothing written")
        #expect(try before.read { try $0.related(players[1], "team") } == [plain])

        let log = try openLog(dir, model: try Self.leagues(narrowed: true))
        try log.read { reader throws in
            #expect(try reader.related(players[0], "team") == [pro])
            #expect(try reader.related(players[1], "team") == [])
            #expect(try reader.related(players[2], "rivals") == [pro])
        }
        #expect(Set(log.lastMigrationDrops) == [
            EventLog.MigrationDrop(entity: "Player", relationship: "rivals", oldDestination: "Team", newDestination: "ProTeam", objects: 1),
            EventLog.MigrationDrop(entity: "Player", relationship: "team", oldDestination: "Team", newDestination: "ProTeam", objects: 1),
        ])
        #expect(try log.verify().isClean)
    }
}
