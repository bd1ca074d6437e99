import Foundation
import Strata
import StrataTestSupport
import Testing

/// Session 22's review of `strata query`'s object references (spec 0007, "Objects in the
/// predicate"), on ``JoinCommandTests``' store: teams Reds (`Team/p1`), Blues (`Team/p2`),
/// Greens (`Team/p3`); player n on team n % 3.
@Suite("Session 22 review: strata query object references")
struct Session22ReviewCommandTests {
    @Test("in a SUBQUERY, a string compared with its variable, or a relationship key path from it, names an object (before: stayed a string, matching nothing)")
    func subqueryVariable() throws {
        let directory = try TemporaryDirectory("strata-s22")
        let path = try JoinCommandTests.store(directory)
        #expect(names(try queryObjects(path, "Team", "--where", "SUBQUERY(players, $p, $p == 'Player/p5').@count > 0")) == ["Greens"])
        #expect(names(try queryObjects(path, "Team", "--where", "SUBQUERY(players, $p, $p IN {'Player/p4', 'Player/p5'}).@count == 1", "--sort", "name")) == ["Blues", "Greens"])
        #expect(names(try queryObjects(path, "Team", "--where", "SUBQUERY(players, $p, $p.team == 'Team/p3').@count > 0")) == ["Greens"])
        // Its attributes' strings stay strings; a string naming no object is an error there too.
        #expect(names(try queryObjects(path, "Team", "--where", "SUBQUERY(players, $p, $p.name == 'p5').@count > 0")) == ["Greens"])
        let nonsense = try strata("query", path, "Team", "--where", "SUBQUERY(players, $p, $p == 'p5').@count > 0")
        #expect(nonsense.status == 1)
        #expect(nonsense.standardError.contains("\"p5\" is compared with objects but names none"), "\(nonsense.standardError)")
    }

    @Test("held: SELF on either side, key paths through a to-many, NOT and OR, collections, --at; nonsense, other stores' URIs and leading spaces are errors")
    func heldForms() throws {
        let directory = try TemporaryDirectory("strata-s22")
        let path = try JoinCommandTests.store(directory)
        for (entity, format, count) in [
            ("Player", "SELF.team == 'Team/p2'", "30"), ("Team", "ANY players.team == 'Team/p2'", "1"), ("Player", "team IN {'Team/p1', 'Team/p2'}", "60"),
            ("Player", "NOT (team == 'Team/p2' OR team == 'Team/p3')", "30"), ("Team", "SELF == 'Team/p2'", "1"), ("Team", "'Team/p2' == SELF", "1"),
            ("Player", "team == 'Team/p9'", "0"), ("Player", "team == 'Player/p1'", "0"),
        ] {
            let result = try strata("query", path, entity, "--where", format, "--count")
            #expect(result.status == 0 && result.standardOutput == count + "\n", "\(format): \(result.standardOutput) \(result.standardError)")
        }
        let at = try strata("query", path, "Player", "--where", "team == 'Team/p2'", "--count", "--at", "1")
        #expect(at.status == 0 && at.standardOutput == "30\n", "\(at.standardError)")
        for format in ["team LIKE 'Team/*'", "team == 'x-strata://00000000-0000-0000-0000-000000000000/Team/p1'", "team == ' Team/p2'", "team == 'team/p2'"] {
            let result = try strata("query", path, "Player", "--where", format, "--count")
            #expect(result.status == 1, "\(format)")
        }
    }
}
