import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// A kept relationship given a new inverse when both sides are ordered (spec 0004 §4.1, §4.5):
/// the old inverse's lists are carried onto the new one, whose side the open also marks to
/// fill (its code is new while its inverse's isn't). The fill must keep the carried order,
/// not put the lists back into key order.
@Suite("Event log: a new inverse of a both-ordered relationship keeps the carried order")
struct OrderedInverseChangeTests {
    /// `Team.players` ↔ `Player.teams`, both ordered.
    static func v1() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "teams", toMany: true, ordered: true)
            }
            Entity("Player") {
                Attribute("name", .string)
                Relationship("teams", to: "Team", inverse: "players", toMany: true, ordered: true)
            }
        }
    }

    /// `onTeam`: `Player.teams`' inverse is `Team.roster` now (`Team.players` goes); else
    /// `Team.players`' inverse is `Player.clubs` (`Player.teams` goes). Both sides ordered.
    static func v2(onTeam: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                if onTeam {
                    Relationship("roster", to: "Player", inverse: "teams", toMany: true, ordered: true)
                } else {
                    Relationship("players", to: "Player", inverse: "clubs", toMany: true, ordered: true)
                }
            }
            Entity("Player") {
                Attribute("name", .string)
                if onTeam {
                    Relationship("teams", to: "Team", inverse: "roster", toMany: true, ordered: true)
                } else {
                    Relationship("clubs", to: "Team", inverse: "players", toMany: true, ordered: true)
                }
            }
        }
    }

    @Test("both sides ordered, the new inverse on either side: each list keeps its order through the migration, a reopen and verify")
    func carriedOrderSurvives() throws {
        for onTeam in [true, false] {
            let dir = try TemporaryDirectory("strata-ordered-inverse")
            var teams: [StoredObjectID] = []
            var players: [StoredObjectID] = []
            do {
                let log = try openLog(dir, model: try Self.v1())
                var draft = TransactionDraft()
                let p1 = draft.insert("Player", values: ["name": s("Ann")])
                let p2 = draft.insert("Player", values: ["name": s("Ben")])
                let p3 = draft.insert("Player", values: ["name": s("Cy")])
                let t1 = draft.insert("Team", values: ["name": s("Otters"), "players": .references([p3, p1])])
                let t2 = draft.insert("Team", values: ["name": s("Herons"), "players": .references([p2, p1])])
                // Each side's order its own, neither in key order.
                draft.update(p1, values: ["teams": .references([t2, t1])])
                draft.update(p2, values: ["teams": .references([t2])])
                draft.update(p3, values: ["teams": .references([t1])])
                let result = try log.commit(draft)
                func id(_ object: DraftObjectID) throws -> StoredObjectID { try #require(result.permanentID(for: object)) }
                teams = [try id(t1), try id(t2)]
                players = [try id(p1), try id(p2), try id(p3)]
            }
            let teamSide = onTeam ? "roster" : "players"
            let playerSide = onTeam ? "teams" : "clubs"
            func check(_ log: EventLog, _ when: String) throws {
                try log.read { reader throws in
                    #expect(try reader.related(teams[0], teamSide) == [players[2], players[0]], "\(when), new inverse on Team: \(onTeam)")
                    #expect(try reader.related(teams[1], teamSide) == [players[1], players[0]], "\(when), new inverse on Team: \(onTeam)")
                    #expect(try reader.related(players[0], playerSide) == [teams[1], teams[0]], "\(when), new inverse on Team: \(onTeam)")
                    #expect(try reader.related(players[1], playerSide) == [teams[1]], "\(when), new inverse on Team: \(onTeam)")
                    #expect(try reader.related(players[2], playerSide) == [teams[0]], "\(when), new inverse on Team: \(onTeam)")
                }
                let report = try log.verify()
                #expect(report.isClean, "\(when), new inverse on Team: \(onTeam): \(report.problems)")
            }
            let log = try openLog(dir, model: try Self.v2(onTeam: onTeam)) { $0.allowsRemovingEntitiesAndProperties = false }
            try check(log, "migrated")
            let head = try log.head
            let reopened = try openLog(dir, model: try Self.v2(onTeam: onTeam)) { $0.allowsRemovingEntitiesAndProperties = false }
            #expect(try reopened.head == head, "nothing more to migrate or fill")
            try check(reopened, "reopened")
            try check(try EventLog(openingExistingAt: dir.file("store")), "tool")
        }
    }
}
