import Foundation
import Strata
import StrataTestSupport
import Testing

/// A comparison through a relationship key path through the real `strata` binary: the
/// 3 a.m. query `strata query Player --where "team.name == 'Blues'"` reads the team's
/// players, not every player, and `--explain` says how the team was found.
@Suite("strata query through a relationship key path")
struct JoinCommandTests {
    static func model() throws -> ManagedObjectModel {
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

    /// Three teams; 90 players, player n on team n % 3, named "p<n>".
    static func store(_ directory: TemporaryDirectory) throws -> String {
        let path = directory.file("Teams.strata")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model())
        try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: path))
        try ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator).performAndWait { context in
            let teams = try ["Reds", "Blues", "Greens"].map { name in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue(name, forKey: "name")
                return team
            }
            for n in 1...90 {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("p\(n)", forKey: "name")
                player.setValue(teams[n % 3], forKey: "team")
            }
            try context.save()
        }
        return path
    }

    @Test("--explain names the join and how its targets were found; the objects are the team's players")
    func queryThroughTeam() throws {
        let directory = try TemporaryDirectory("strata-join")
        let path = try Self.store(directory)
        let explained = try strata("query", path, "Player", "--where", "team.name == 'Blues'", "--explain")
        #expect(explained.status == 0, "\(explained.standardError)")
        #expect(
            explained.standardOutput
                == #"index scan Player.team IN (full scan Team then filter (name == "Blues")) [1 object] then filter (team.name == "Blues")"# + "\n")
        let found = try queryObjects(path, "Player", "--where", "team.name == 'Blues'", "--sort", "name")
        let want = (1...90).filter { $0 % 3 == 1 }.map { "p\($0)" }.sorted()
        #expect(names(found) == want)
        let teams = try strata("query", path, "Team", "--where", "ANY players.name == 'p5'", "--explain")
        #expect(teams.standardOutput.hasPrefix("index scan Team.players CONTAINS ANY (full scan Player then filter (name == \"p5\")) [1 object]"), "\(teams.standardOutput)")
        #expect(names(try queryObjects(path, "Team", "--where", "ANY players.name == 'p5'")) == ["Greens"])
    }

    @Test("a string compared with a relationship or SELF names an object: Entity/pN or its URI; one naming no object is an error")
    func objectReferences() throws {
        let directory = try TemporaryDirectory("strata-join")
        let path = try Self.store(directory)
        let blues = (1...90).filter { $0 % 3 == 1 }.map { "p\($0)" }.sorted()
        #expect(names(try queryObjects(path, "Player", "--where", "team == 'Team/p2'", "--sort", "name")) == blues)
        let uri = try #require(try queryObjects(path, "Team", "--where", "name == 'Blues'").first?["uri"] as? String)
        #expect(names(try queryObjects(path, "Player", "--where", "team == '\(uri)'", "--sort", "name")) == blues)
        let explained = try strata("query", path, "Player", "--where", "team == 'Team/p2'", "--explain")
        #expect(explained.standardOutput == "index scan Player.team = Team/p2\n", "\(explained.standardOutput)")
        #expect(names(try queryObjects(path, "Player", "--where", "SELF IN {'Player/p1', 'Player/p4'}")) == ["p1", "p4"])
        #expect(names(try queryObjects(path, "Team", "--where", "ANY players == 'Player/p5'")) == ["Greens"])
        #expect(names(try queryObjects(path, "Team", "--where", "'Player/p5' IN players")) == ["Greens"])
        #expect(names(try queryObjects(path, "Team", "--where", "NOT (players CONTAINS 'Player/p5')", "--sort", "name")) == ["Blues", "Reds"])
        // A string compared with an attribute is a string.
        let plain = try strata("query", path, "Player", "--where", "name == 'Team/p2'", "--count")
        #expect(plain.status == 0 && plain.standardOutput == "0\n")

        let notAnObject = try strata("query", path, "Player", "--where", "team == 'Blues'")
        #expect(notAnObject.status == 1)
        #expect(notAnObject.standardError.contains(#"--where "team == 'Blues'": "Blues" is compared with objects but names none"#), "\(notAnObject.standardError)")
        let unknown = try strata("query", path, "Player", "--where", "team == 'Coach/p1'")
        #expect(unknown.status == 1)
        #expect(unknown.standardError.contains("\"Coach/p1\" names no object of this store (its entities: Player, Team"), "\(unknown.standardError)")
    }
}
