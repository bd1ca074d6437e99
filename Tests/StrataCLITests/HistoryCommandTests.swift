import Foundation
import StrataLog
import StrataTestSupport
import Testing

/// The transactions of a `log --format json` document.
func logTransactions(_ text: String) throws -> [[String: Any]] {
    let document = try #require(try parseJSON(text) as? [String: Any])
    return try #require(document["transactions"] as? [[String: Any]])
}

func sequences(_ transactions: [[String: Any]]) -> [Int] { transactions.compactMap { $0["sequence"] as? Int } }

@Suite("strata log")
struct LogCommandTests {
    @Test("text: header, kinds, URIs and before → after per property")
    func text() throws {
        let store = try makeLeagueStore()
        let result = try strata("log", store.path)
        #expect(result.status == 0, "\(result.standardError)")
        let out = result.standardOutput
        #expect(out.contains("#1  2026-01-01T00:01:00.000000Z  save  author alice  context editor"))
        #expect(out.contains("  action \"Add Teams\""))
        #expect(out.contains("#5  2026-01-01T00:05:00.000000Z  undo of 4  author bob  context importer"))
        #expect(out.contains("  update \(store.firstPlayerURI)\n    age: 31 → 32\n    rating: 4.5 → 4.75"))
        #expect(out.contains("  delete \(store.uri("Player", 2))"))
        #expect(out.contains("    team: \(store.uri("Team", 2)) → \(store.uri("Team", 1))"))
    }

    @Test("json and ndjson: the stable event JSON with URIs, one per transaction")
    func json() throws {
        let store = try makeLeagueStore()
        let json = try strata("log", store.path, "--format", "json")
        #expect(json.status == 0)
        let document = try #require(try parseJSON(json.standardOutput) as? [String: Any])
        #expect(document["store"] as? String == store.storeUUID.uuidString)
        let transactions = try logTransactions(json.standardOutput)
        #expect(sequences(transactions) == [1, 2, 3, 4, 5, 6, 7])
        let undo = transactions[4]
        let kind = try #require(undo["kind"] as? [String: Any])
        #expect(kind["type"] as? String == "undo")
        #expect(kind["of"] as? Int == 4)
        #expect(kind["group"] as? Int == 0)
        #expect(undo["author"] as? String == "bob")
        let change = try #require(((undo["groups"] as? [[String: Any]])?.first?["changes"] as? [[String: Any]])?.first)
        #expect(change["op"] as? String == "update")
        #expect(change["object"] as? String == store.firstPlayerURI)
        let properties = try #require(change["changes"] as? [[String: Any]])
        #expect(properties.first?["property"] as? String == "age")
        #expect(properties.first?["before"] as? [String: Int] == ["int32": 32])
        #expect(properties.first?["after"] as? [String: Int] == ["int32": 31])
        let insert = try #require(((transactions[1]["groups"] as? [[String: Any]])?.first?["changes"] as? [[String: Any]])?.first)
        #expect((insert["values"] as? [String: Any])?["team"] as? [String: String] == ["reference": store.uri("Team", 1)])

        let ndjson = try strata("log", store.path, "--format", "ndjson")
        let lines = ndjson.standardOutput.split(separator: "\n")
        #expect(lines.count == 7)
        for (line, transaction) in zip(lines, transactions) {
            let parsed = try #require(try parseJSON(String(line)) as? [String: Any])
            #expect(NSDictionary(dictionary: parsed).isEqual(to: transaction))
        }
    }

    @Test("filters: sequence and date ranges, author, context, kind, entity, object, property")
    func filters() throws {
        let store = try makeLeagueStore()
        func run(_ arguments: String...) throws -> [[String: Any]] {
            let result = try runProcess(BuildProducts.executable("strata"), ["log", store.path, "--format", "json"] + arguments)
            #expect(result.status == 0, "\(arguments): \(result.standardError)")
            return try logTransactions(result.standardOutput)
        }
        #expect(sequences(try run("--from", "3", "--to", "4")) == [3, 4])
        #expect(sequences(try run("--from", "2026-01-01T00:03:00Z", "--to", "2026-01-01T00:05:30Z")) == [3, 4, 5])
        #expect(sequences(try run("--author", "bob")) == [3, 4, 5])
        #expect(sequences(try run("--context", "editor")) == [1, 2, 6, 7])
        #expect(sequences(try run("--kind", "undo")) == [5])
        #expect(sequences(try run("--entity", "Sponsor")) == [1, 3])
        let object = try run("--object", store.firstPlayerURI)
        #expect(sequences(object) == [2, 4, 5])
        for transaction in object {
            for group in transaction["groups"] as? [[String: Any]] ?? [] {
                for change in group["changes"] as? [[String: Any]] ?? [] {
                    #expect(change["object"] as? String == store.firstPlayerURI)
                }
            }
        }
        let property = try run("--property", "rating")
        #expect(sequences(property) == [2, 4, 5])
        let updates = property[1]["groups"] as? [[String: Any]]
        let touched = (updates?.first?["changes"] as? [[String: Any]])?.first?["changes"] as? [[String: Any]]
        #expect(touched?.map { $0["property"] as? String } == ["rating"])
    }
}

@Suite("strata export")
struct ExportCommandTests {
    @Test("json: objects grouped by entity, URIs for IDs and relationships, plain values")
    func json() throws {
        let store = try makeLeagueStore()
        let result = try strata("export", store.path)
        #expect(result.status == 0, "\(result.standardError)")
        let document = try #require(try parseJSON(result.standardOutput) as? [String: Any])
        #expect(document["store"] as? String == store.storeUUID.uuidString)
        #expect(document["sequence"] as? Int == 7)
        let entities = try #require(document["entities"] as? [String: [[String: Any]]])
        #expect(entities.keys.sorted() == ["Player", "Sponsor", "Team"])
        let players = try #require(entities["Player"])
        #expect(players.map { $0["uri"] as? String } == [store.uri("Player", 1), store.uri("Player", 3)])
        let ng = try #require(players.first?["values"] as? [String: Any])
        #expect(ng["name"] as? String == "Ng, Ada")
        #expect(ng["age"] as? Int == 31)
        #expect(ng["rating"] as? Double == 4.5)
        #expect(ng["active"] as? Bool == true)
        #expect(ng["photo"] as? String == Data([0, 1, 0xfe, 0xff]).base64EncodedString())
        #expect(ng["team"] as? String == store.uri("Team", 1))
        #expect(ng.keys.sorted() == ["active", "age", "name", "photo", "rating", "team"])
        let otters = try #require(entities["Team"]?.first?["values"] as? [String: Any])
        #expect(otters["lineup"] as? [String] == [store.uri("Player", 1)])
        #expect(otters["founded"] as? String == "2026-01-01T00:00:00.000000Z")
        let sponsor = try #require(entities["Sponsor"]?.first?["values"] as? [String: Any])
        #expect(sponsor["teams"] as? [String] == [store.uri("Team", 1), store.uri("Team", 2)])
        let kim = try #require(players.last?["values"] as? [String: Any])
        #expect(kim["photo"] is NSNull)
    }

    @Test("ndjson: one object per line; --entity and --output")
    func ndjson() throws {
        let store = try makeLeagueStore()
        let all = try strata("export", store.path, "--format", "ndjson")
        let lines = all.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.count == 5)
        let first = try #require(try parseJSON(lines[0]) as? [String: Any])
        #expect(first["entity"] as? String == "Player")
        #expect(first["uri"] as? String == store.uri("Player", 1))

        let dir = try TemporaryDirectory()
        let file = dir.file("teams.ndjson")
        let teams = try strata("export", store.path, "--format", "ndjson", "--entity", "Team", "--output", file)
        #expect(teams.status == 0)
        #expect(teams.standardOutput.isEmpty)
        let written = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
        #expect(written.count == 2)
        #expect(written.allSatisfy { $0.hasPrefix("{\"entity\":\"Team\"") })

        let unknown = try strata("export", store.path, "--entity", "Referee")
        #expect(unknown.status == 1)
        #expect(unknown.standardError.contains("Referee"))
    }

    @Test("csv: one RFC 4180 file per entity with a header row")
    func csv() throws {
        let store = try makeLeagueStore()
        let dir = try TemporaryDirectory()
        let output = dir.file("csv")
        let result = try strata("export", store.path, "--format", "csv", "--output", output)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: output).sorted() == ["Player.csv", "Sponsor.csv", "Team.csv"])
        let teams = parseCSV(try String(contentsOfFile: output + "/Team.csv", encoding: .utf8))
        #expect(teams.first == ["uri", "founded", "lineup", "name"])
        #expect(teams.count == 3)
        #expect(teams[2] == [store.uri("Team", 2), "", "", "Herons, \"the birds\"\nof the lake"])
        #expect(teams[1][2] == store.uri("Player", 1))
        let players = parseCSV(try String(contentsOfFile: output + "/Player.csv", encoding: .utf8))
        #expect(players.first == ["uri", "active", "age", "name", "photo", "rating", "team"])
        #expect(players[1] == [store.uri("Player", 1), "true", "31", "Ng, Ada", "AAH+/w==", "4.5", store.uri("Team", 1)])
        let sponsors = parseCSV(try String(contentsOfFile: output + "/Sponsor.csv", encoding: .utf8))
        #expect(sponsors[1] == [store.uri("Sponsor", 1), "Acme", "\(store.uri("Team", 1)) \(store.uri("Team", 2))"])
    }

    @Test("sql: sqlite3 loads it as it is and answers queries")
    func sql() throws {
        guard toolIsInstalled("sqlite3") else { return }
        let store = try makeLeagueStore()
        let dir = try TemporaryDirectory()
        let script = dir.file("league.sql")
        let result = try strata("export", store.path, "--format", "sql", "--output", script)
        #expect(result.status == 0, "\(result.standardError)")
        let database = dir.file("league.db")
        let load = try runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["sqlite3", "-bail", database, ".read \(script)"])
        #expect(load.status == 0, "\(load.standardError)")
        func query(_ sql: String) throws -> String {
            let result = try runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["sqlite3", database, sql])
            #expect(result.status == 0, "\(result.standardError)")
            return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try query("SELECT name, age, active, hex(photo), rating FROM \"Player\" ORDER BY uri") == "Ng, Ada|31|1|0001FEFF|4.5\nKim|28|0||")
        #expect(try query("SELECT name FROM \"Team\" WHERE uri = '\(store.uri("Team", 2))'") == "Herons, \"the birds\"\nof the lake")
        #expect(try query("SELECT count(*) FROM \"Sponsor_teams\"") == "2")
        #expect(try query("SELECT p.name FROM \"Team_lineup\" l JOIN \"Player\" p ON p.uri = l.target ORDER BY l.position") == "Ng, Ada")
        #expect(try query("SELECT t.name FROM \"Player\" p JOIN \"Team\" t ON t.uri = p.team WHERE p.name = 'Kim'") == "Otters")
        #expect(try query("SELECT founded FROM \"Team\" WHERE name = 'Otters'") == "2026-01-01T00:00:00.000000Z")

        let postgres = try strata("export", store.path, "--format", "sql", "--dialect", "postgres")
        #expect(postgres.standardOutput.contains("'\\x0001feff'::bytea"))
        #expect(postgres.standardOutput.contains("\"photo\" BYTEA"))
        #expect(postgres.standardOutput.contains("'O''Toole'") == false)  // deleted at 7
        let early = try strata("export", store.path, "--format", "sql", "--at", "2")
        #expect(early.standardOutput.contains("'O''Toole'"))
    }

    @Test("export --at N equals replay --to N --into a new store, exported")
    func asOfEqualsReplay() throws {
        let store = try makeLeagueStore(extraTransactions: 12)
        let dir = try TemporaryDirectory()
        for sequence in [0, 2, 4, 6, 12] {
            let asOf = try strata("export", store.path, "--at", String(sequence))
            #expect(asOf.status == 0, "\(asOf.standardError)")
            let copy = dir.file("at-\(sequence)")
            let replay = try strata("replay", store.path, "--to", String(sequence), "--into", copy)
            #expect(replay.status == 0, "\(replay.standardError)")
            let exported = try strata("export", copy)
            let copyUUID = try EventLog(openingExistingAt: copy).storeUUID.uuidString
            #expect(copyUUID != store.storeUUID.uuidString)
            #expect(exported.standardOutput.replacingOccurrences(of: copyUUID, with: store.storeUUID.uuidString) == asOf.standardOutput)
            #expect(try strata("verify", copy).status == 0)
        }
        // And the engine's own as-of state agrees on counts.
        let log = try EventLog(openingExistingAt: store.path)
        let image = try log.read { try $0.state(asOf: 6) }
        let document = try #require(try parseJSON(try strata("export", store.path, "--at", "6").standardOutput) as? [String: Any])
        let entities = try #require(document["entities"] as? [String: [Any]])
        #expect(entities.values.reduce(0) { $0 + $1.count } == image.objects.count)
    }
}
