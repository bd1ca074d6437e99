import Foundation
@testable import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// `strata migrate` and `strata verify` (spec 0007) with a model file that gives
/// `Player.team` another inverse (`Team.roster` for `Team.players`), or narrows it to a
/// sub-entity of `Team` (spec 0004 §4.5). Before session 34 the first was refused without
/// `--allow-removing` (as if `Team.players` were lost) and migrated with it to empty rosters;
/// the second dropped every team's players, fitting or not.
@Suite("strata migrate: a relationship's inverse changed; a destination narrowed")
struct InverseChangeMigrateCommandTests {
    static func v1() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true, ordered: true)
            }
            Entity("ProTeam", parent: "Team") {}
            Entity("Player") {
                Attribute("name", .string)
                Relationship("team", to: "Team", inverse: "players")
                Relationship("idol", to: "Team")
            }
        }
    }

    /// `rename`: `Team.players` gives way to `Team.roster` (ordered); else `Player.idol` (no
    /// inverse) leads to `ProTeam`.
    static func v2(rename: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship(rename ? "roster" : "players", to: "Player", inverse: "team", toMany: true, ordered: true)
            }
            Entity("ProTeam", parent: "Team") {}
            Entity("Player") {
                Attribute("name", .string)
                Relationship("team", to: "Team", inverse: rename ? "roster" : "players")
                Relationship("idol", to: rename ? "Team" : "ProTeam")
            }
        }
    }

    /// A store of v1: a team listing Cy then Ann, a pro team; Ann's idol the pro team, Cy's
    /// (`misfit`) the plain team. The model files beside it.
    static func fixture(misfit: Bool) throws -> (TemporaryDirectory, store: String, inverse: String, narrowed: String) {
        let dir = try TemporaryDirectory()
        let store = dir.file("store")
        let log = try EventLog(path: store, model: try v1())
        var draft = TransactionDraft()
        let pro = draft.insert("ProTeam", values: ["name": .attribute(.string("Otters"))])
        let ann = draft.insert("Player", values: ["name": .attribute(.string("Ann")), "idol": .reference(pro)])
        let team = draft.insert("Team", values: ["name": .attribute(.string("Herons"))])
        var cy: [String: DraftValue] = ["name": .attribute(.string("Cy"))]
        if misfit { cy["idol"] = .reference(team) }
        let cyID = draft.insert("Player", values: cy)
        draft.update(team, values: ["players": .references([cyID, ann])])
        _ = try log.commit(draft)
        let inverse = dir.file("inverse.json")
        try v2(rename: true).jsonData(prettyPrinted: true).write(to: URL(fileURLWithPath: inverse))
        let narrowed = dir.file("narrowed.json")
        try v2(rename: false).jsonData(prettyPrinted: true).write(to: URL(fileURLWithPath: narrowed))
        return (dir, store, inverse, narrowed)
    }

    @Test("a new inverse takes the old one's membership in its order, without --allow-removing; the copy verifies clean")
    func inverseCarried() throws {
        let (dir, store, inverse, _) = try Self.fixture(misfit: false)
        let into = dir.file("copy")
        let result = try strata("migrate", store, inverse, "--into", into)
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardOutput.contains("verify       no problems in the migrated copy"), "\(result.standardOutput)")
        #expect(!result.standardOutput.contains("dropped"), "\(result.standardOutput)")
        let copy = try EventLog(openingExistingAt: into)
        let team = StoredObjectID(entity: "Team", primaryKey: 1)
        let ann = StoredObjectID(entity: "Player", primaryKey: 1)
        let cy = StoredObjectID(entity: "Player", primaryKey: 2)
        try copy.read { reader throws in
            #expect(try reader.related(team, "roster") == [cy, ann])
            #expect(try reader.related(ann, "team") == [team])
        }
        let verify = try strata("verify", into)
        #expect(verify.status == 0, "\(verify.standardOutput)")
    }

    @Test("a destination narrowed to a sub-entity: kept when every reference fits; refused naming the object that doesn't; --allow-removing drops only that")
    func narrowed() throws {
        do {
            let (dir, store, _, narrowed) = try Self.fixture(misfit: false)
            let into = dir.file("copy")
            let result = try strata("migrate", store, narrowed, "--into", into)
            #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
            #expect(!result.standardOutput.contains("dropped"), "\(result.standardOutput)")
            let copy = try EventLog(openingExistingAt: into)
            #expect(
                try copy.read { try $0.related(StoredObjectID(entity: "Player", primaryKey: 1), "idol") }
                    == [StoredObjectID(entity: "ProTeam", primaryKey: 1)])
            #expect(try strata("verify", into).status == 0)
        }
        let (dir, store, _, narrowed) = try Self.fixture(misfit: true)
        let refused = try strata("migrate", store, narrowed)
        #expect(refused.status == 1, "\(refused.standardOutput)\(refused.standardError)")
        #expect(refused.standardOutput.contains("refused: the store can't be migrated to \(narrowed): "), "\(refused.standardOutput)")
        #expect(refused.standardOutput.contains("Player/p2.idol names Team/p1"), "\(refused.standardOutput)")
        #expect(refused.standardOutput.hasSuffix("(nothing was written to \(store))\n"), "\(refused.standardOutput)")
        let into = dir.file("copy")
        let allowed = try strata("migrate", store, narrowed, "--into", into, "--allow-removing")
        #expect(allowed.status == 0, "\(allowed.standardOutput)\(allowed.standardError)")
        #expect(
            allowed.standardOutput.contains("dropped      Player.idol (to Team; now to ProTeam): 1 object lost its value"),
            "\(allowed.standardOutput)")
        let copy = try EventLog(openingExistingAt: into)
        try copy.read { reader throws in
            #expect(try reader.related(StoredObjectID(entity: "Player", primaryKey: 1), "idol") == [StoredObjectID(entity: "ProTeam", primaryKey: 1)])
            #expect(try reader.related(StoredObjectID(entity: "Player", primaryKey: 2), "idol") == [])
        }
        #expect(try strata("verify", into).status == 0)
    }
}
