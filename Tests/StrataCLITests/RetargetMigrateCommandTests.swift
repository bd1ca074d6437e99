import Foundation
@testable import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// `strata migrate` and `strata verify` (spec 0007) with a model file that makes a relationship
/// lead to another entity, or swaps entity names (spec 0004 §4.5–4.6). Before session 33 the
/// migration said `nothing to migrate`, the copy's `Player.team` (now to `Player`) still named
/// `Team` objects, and verify found the copy clean.
@Suite("strata migrate: a relationship's destination changed; swapped names")
struct RetargetMigrateCommandTests {
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
            Entity("Cat") { Attribute("name", .string) }
            Entity("Dog") { Attribute("name", .string) }
        }
    }

    /// `retarget`: Player.team leads to Player (Team keeps its players through a new
    /// Player.club); else Cat and Dog swap names.
    static func v2(retarget: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: retarget ? "club" : "team", toMany: true)
            }
            Entity("Player") {
                Attribute("name", .string)
                if retarget {
                    Relationship("club", to: "Team", inverse: "players")
                    Relationship("team", to: "Player")
                } else {
                    Relationship("team", to: "Team", inverse: "players")
                }
            }
            if retarget {
                Entity("Cat") { Attribute("name", .string) }
                Entity("Dog") { Attribute("name", .string) }
            } else {
                Entity("Cat") { Attribute("name", .string) }.renamed(from: "Dog")
                Entity("Dog") { Attribute("name", .string) }.renamed(from: "Cat")
            }
        }
    }

    /// A store of v1: a team with two players, a third player without one, a cat; the model
    /// files beside it.
    static func fixture() throws -> (TemporaryDirectory, store: String, retargeted: String, swapped: String) {
        let dir = try TemporaryDirectory()
        let store = dir.file("store")
        let log = try EventLog(path: store, model: try v1())
        var draft = TransactionDraft()
        let team = draft.insert("Team", values: ["name": .attribute(.string("Otters"))])
        _ = draft.insert("Player", values: ["name": .attribute(.string("Ann")), "team": .reference(team)])
        _ = draft.insert("Player", values: ["name": .attribute(.string("Ben")), "team": .reference(team)])
        _ = draft.insert("Player", values: ["name": .attribute(.string("Cy"))])
        _ = draft.insert("Cat", values: ["name": .attribute(.string("Tom"))])
        _ = try log.commit(draft)
        let retargeted = dir.file("retargeted.json")
        try v2(retarget: true).jsonData(prettyPrinted: true).write(to: URL(fileURLWithPath: retargeted))
        let swapped = dir.file("swapped.json")
        try v2(retarget: false).jsonData(prettyPrinted: true).write(to: URL(fileURLWithPath: swapped))
        return (dir, store, retargeted, swapped)
    }

    @Test("a relationship made to lead to another entity: refused without --allow-removing, naming it and both destinations")
    func retargetRefused() throws {
        let (dir, store, retargeted, _) = try Self.fixture()
        let result = try strata("migrate", store, retargeted)
        #expect(result.status == 1, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardOutput.contains("refused: the store can't be migrated to \(retargeted): "))
        #expect(result.standardOutput.contains("Player.team (to Team; this model's Player.team leads to Player)"), "\(result.standardOutput)")
        #expect(result.standardOutput.hasSuffix("(nothing was written to \(store))\n"))
        _ = dir
    }

    @Test("with --allow-removing the values are dropped, the command says how many objects lost them, and the copy verifies clean with no reference to a Team through Player.team")
    func retargetDropped() throws {
        let (dir, store, retargeted, _) = try Self.fixture()
        let into = dir.file("copy")
        let result = try strata("migrate", store, retargeted, "--into", into, "--allow-removing")
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardOutput == """
            model        \(retargeted) is model version 2 (new; the store has 1)
            migration    #2 in model version 1 (taking out values model version 2 stores under other names, or not at all): 2 updated Player
            migration    #3 in model version 2: 2 updated Player
            dropped      Player.team (to Team; now to Player): 2 objects lost their value
            verify       no problems in the migrated copy
            kept         the migrated copy is at \(into) (with the store's UUID)

            """)
        let copy = try EventLog(openingExistingAt: into)
        try copy.read { reader throws in
            for primaryKey: UInt64 in 1...3 {
                #expect(try reader.related(StoredObjectID(entity: "Player", primaryKey: primaryKey), "team") == [])
            }
            // Team.players is kept, its inverse now Player.club: the team keeps its players
            // (spec 0004 §4.5, a relationship whose inverse changes; before session 34 it
            // lost them with Player.team's values).
            let team = StoredObjectID(entity: "Team", primaryKey: 1)
            #expect(try reader.related(team, "players") == [1, 2].map { StoredObjectID(entity: "Player", primaryKey: $0) })
            #expect(try reader.related(StoredObjectID(entity: "Player", primaryKey: 1), "club") == [team])
            #expect(try reader.related(StoredObjectID(entity: "Player", primaryKey: 3), "club") == [])
        }
        let verify = try strata("verify", into)
        #expect(verify.status == 0, "\(verify.standardOutput)")
    }

    @Test("entities that swap names are refused, naming them, not taken as no rename")
    func swapRefused() throws {
        let (dir, store, _, swapped) = try Self.fixture()
        defer { withExtendedLifetime(dir) {} }  // the directory goes with it
        let result = try strata("migrate", store, swapped, "--allow-removing")
        #expect(result.status == 1, "\(result.standardOutput)\(result.standardError)")
        #expect(
            result.standardOutput.contains(
                "refused: the store can't be migrated to \(swapped): the stored objects can't be taken over by model version 2: its entities Cat and Dog swap names: Cat renames Dog and Dog renames Cat (of model version 1)"),
            "\(result.standardOutput)")
    }

    @Test("strata verify reports a reference to an object of an entity its relationship doesn't lead to, exit 1")
    func verifyReportsWrongDestination() throws {
        let dir = try TemporaryDirectory()
        let store = dir.file("store")
        var configuration = EventLog.Configuration()
        configuration.skipsDestinationCheck = true
        let log = try EventLog(path: store, model: try Self.v1(), configuration: configuration)
        var draft = TransactionDraft()
        let cat = draft.insert("Cat", values: ["name": .attribute(.string("Tom"))])
        _ = draft.insert("Player", values: ["name": .attribute(.string("Ann")), "team": .reference(cat)])
        _ = try log.commit(draft)
        let result = try strata("verify", store)
        #expect(result.status == 1, "\(result.standardOutput)\(result.standardError)")
        #expect(
            result.standardOutput.contains(
                "integrity: Player/p1.team: names Cat/p1, an object of Cat, but Player.team leads to Team (and its sub-entities)"),
            "\(result.standardOutput)")
    }
}
