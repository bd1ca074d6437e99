import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// The league store plus transaction 8: Team/p3 founded 10¹⁴ seconds after 1970 (about the
/// year 3,170,000), and Team/p4 founded at NaN — date values with no ISO 8601 form.
func makeFarDateStore() throws -> LeagueStore {
    let store = try makeLeagueStore()
    let log = try EventLog(openingExistingAt: store.path, readOnly: false)
    var draft = TransactionDraft(author: "alice")
    draft.insert("Team", values: ["name": str("Far"), "founded": .attribute(.date(Date(timeIntervalSince1970: 1e14)))])
    draft.insert("Team", values: ["name": str("Nowhen"), "founded": .attribute(.date(Date(timeIntervalSince1970: .nan)))])
    try log.commit(draft)
    return store
}

@Suite("strata: dates with no ISO 8601 form are printed as seconds since 1970, not trapped on")
struct FarDateCommandTests {
    @Test("export in every format, query, and log (text and json)", arguments: ["json", "ndjson", "csv", "sql"])
    func export(format: String) throws {
        let store = try makeFarDateStore()
        let output = store.directory.file("out-\(format)")
        let result = try strata("export", store.path, "--format", format, "--entity", "Team", "--output", output)
        #expect(result.status == 0, "\(result.standardError)")
        let text: String
        if format == "csv" {
            text = try String(contentsOfFile: (output as NSString).appendingPathComponent("Team.csv"), encoding: .utf8)
        } else {
            text = try String(contentsOfFile: output, encoding: .utf8)
        }
        #expect(text.contains("100000000000000.0"), "\(text)")
        #expect(text.contains("nan"), "\(text)")
    }

    @Test("query and log print them too")
    func queryAndLog() throws {
        let store = try makeFarDateStore()
        let query = try strata("query", store.path, "Team", "--format", "ndjson")
        #expect(query.status == 0, "\(query.standardError)")
        #expect(query.standardOutput.contains("\"founded\":\"100000000000000.0\""), "\(query.standardOutput)")
        #expect(query.standardOutput.contains("\"founded\":\"nan\""))

        let json = try strata("log", store.path, "--from", "8", "--format", "json")
        #expect(json.status == 0, "\(json.standardError)")
        #expect(json.standardOutput.contains("{\"date\":\"100000000000000.0\"}"), "\(json.standardOutput)")
        #expect(json.standardOutput.contains("{\"date\":\"nan\"}"))
        #expect(!json.standardOutput.contains("1970-01-01"), "no made-up date")

        let text = try strata("log", store.path, "--from", "8")
        #expect(text.status == 0, "\(text.standardError)")
        #expect(text.standardOutput.contains("founded: nil → 100000000000000.0"), "\(text.standardOutput)")

        let blame = try strata("replay", store.path, "--object", store.uri("Team", 3))
        #expect(blame.status == 0, "\(blame.standardError)")
        #expect(blame.standardOutput.contains("100000000000000.0"))
    }
}

@Suite("strata on a truncated data.mdb")
struct TruncatedStoreCommandTests {
    @Test("every command exits 1 naming data.mdb and both sizes, instead of dying of SIGBUS", arguments: [
        ["info"], ["verify"], ["log"], ["export"], ["replay"], ["compact", "--dry-run"], ["query", "Player"],
    ])
    func truncated(command: [String]) throws {
        let store = try makeLeagueStore()
        let dataFile = (store.path as NSString).appendingPathComponent("data.mdb")
        let fullSize = try #require(try FileManager.default.attributesOfItem(atPath: dataFile)[.size] as? Int)
        let handle = try #require(FileHandle(forUpdatingAtPath: dataFile))
        try handle.truncate(atOffset: 40_000)
        try handle.close()
        let result = try runProcess(BuildProducts.executable("strata"), [command[0], store.path] + command.dropFirst())
        #expect(result.status == 1, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardError.hasPrefix("strata: "))
        #expect(result.standardError.contains("\(dataFile) is 40000 bytes, but the environment uses \(fullSize) bytes"), "\(result.standardError)")
    }
}

/// The league store (transactions 1…7 one minute apart from 2026-01-01T00:01:00Z) plus
/// transaction 8, stamped 2026-01-01T00:00:30Z — before transaction 1 — and 9, stamped
/// 2026-01-01T00:01:30.000123Z, between 1 and 2, with microseconds.
func makeOutOfOrderStore() throws -> LeagueStore {
    let store = try makeLeagueStore()
    let log = try EventLog(openingExistingAt: store.path, readOnly: false)
    let base = Date(timeIntervalSince1970: 1_767_225_600)
    for offset in [30.0, 90.000_123] {
        var draft = TransactionDraft(author: "late")
        draft.timestamp = base.addingTimeInterval(offset)
        draft.insert("Sponsor", values: ["name": str("late \(offset)")])
        try log.commit(draft)
    }
    return store
}

func logSequences(_ result: ProcessResult) throws -> [Int] {
    let object = try #require(try parseJSON(result.standardOutput) as? [String: Any])
    let transactions = try #require(object["transactions"] as? [[String: Any]])
    return transactions.compactMap { $0["sequence"] as? Int }
}

@Suite("strata log: date bounds")
struct LogDateBoundTests {
    @Test("--to DATE keeps looking past a later timestamp: timestamps needn't follow the sequence")
    func toDateOutOfOrder() throws {
        let store = try makeOutOfOrderStore()
        let result = try strata("log", store.path, "--to", "2026-01-01T00:02:00Z", "--format", "json")
        #expect(result.status == 0, "\(result.standardError)")
        #expect(try logSequences(result) == [1, 2, 8, 9])
        let from = try strata("log", store.path, "--from", "2026-01-01T00:06:00Z", "--format", "json")
        #expect(try logSequences(from) == [6, 7])
    }

    @Test("a timestamp copied from the output bounds to the microsecond, with Z, an offset or no zone (UTC)")
    func exactTimestamps() throws {
        let store = try makeOutOfOrderStore()
        let text = try strata("log", store.path, "--from", "9")
        let printed = try #require(text.standardOutput.split(separator: " ").dropFirst().first.map(String.init))
        #expect(printed == "2026-01-01T00:01:30.000123Z")
        for to in [printed, "2026-01-01T00:01:30.000123", "2026-01-01T01:01:30.000123+01:00"] {
            let result = try strata("log", store.path, "--to", to, "--format", "json")
            #expect(result.status == 0, "\(result.standardError)")
            #expect(try logSequences(result) == [1, 8, 9], "--to \(to)")
        }
        let after = try strata("log", store.path, "--from", "2026-01-01T00:01:30.000124Z", "--format", "json")
        #expect(try logSequences(after) == [2, 3, 4, 5, 6, 7])
        let at = try strata("log", store.path, "--from", printed, "--to", printed, "--format", "json")
        #expect(try logSequences(at) == [9])
        #expect(try strata("log", store.path, "--to", "2026-01-01T00:01:30.0000001Z").status == 64, "at most six digits")
        #expect(try strata("log", store.path, "--to", "2026-02-30").status == 64, "no such day")
    }

    @Test("compact --before a timestamp moves the events strictly before it, to the microsecond")
    func compactBeforeExact() throws {
        let store = try makeLeagueStore()
        do {
            let log = try EventLog(openingExistingAt: store.path, readOnly: false)
            var draft = TransactionDraft(author: "late")
            draft.timestamp = Date(timeIntervalSince1970: 1_767_225_600 + 480.000_123)
            draft.insert("Sponsor", values: ["name": str("late")])
            try log.commit(draft)
        }
        let exact = try strata("compact", store.path, "--before", "2026-01-01T00:08:00.000123Z", "--dry-run")
        #expect(exact.status == 0, "\(exact.standardError)")
        #expect(exact.standardOutput.hasPrefix("would move events 1…7 (7 events)"), "\(exact.standardOutput)")
        let later = try strata("compact", store.path, "--before", "2026-01-01T00:08:00.000124Z", "--dry-run")
        #expect(later.standardOutput.hasPrefix("would move events 1…8 (8 events)"), "\(later.standardOutput)")
    }
}

@Suite("strata compact --vacuum with nothing to move")
struct VacuumWithNothingToMoveTests {
    @Test("still vacuums: the vacuum line is printed and data.mdb doesn't grow")
    func vacuumAfterCompaction() throws {
        let store = try makeLeagueStore(extraTransactions: 400)
        let compact = try strata("compact", store.path)
        #expect(compact.status == 0, "\(compact.standardError)")
        #expect(compact.standardOutput.contains("moved events 1…"))
        let dataFile = (store.path as NSString).appendingPathComponent("data.mdb")
        let before = try #require(try FileManager.default.attributesOfItem(atPath: dataFile)[.size] as? Int)

        let vacuum = try strata("compact", store.path, "--vacuum")
        #expect(vacuum.status == 0, "\(vacuum.standardError)")
        let lines = vacuum.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("nothing to move: horizon \(store.head), limited by ") == true, "\(vacuum.standardOutput)")
        let line = try #require(lines.first { $0.hasPrefix("vacuum: data.mdb ") }, "\(vacuum.standardOutput)")
        let numbers = line.split(separator: " ").compactMap { Int($0) }
        #expect(numbers.count == 2 && numbers[0] == before && numbers[1] < before, "\(line)")
        let after = try #require(try FileManager.default.attributesOfItem(atPath: dataFile)[.size] as? Int)
        #expect(after < before)
        #expect(try strata("verify", store.path).status == 0)
    }
}

@Suite("strata replay around a purge point")
struct ReplayPurgeBoundaryTests {
    static let purgedMessage = "sequence 10 was purged: history through 20 was removed, and the earliest state kept is as of 20"

    @Test("--object, --step and --diff before the purge point fail as --to does, printing nothing")
    func beforeThePurgePoint() throws {
        let store = try makePurgedLeagueStore()
        for arguments in [
            ["--to", "10"], ["--object", store.uri("Player", 3), "--to", "10"], ["--step", "--to", "10"],
            ["--step", "--from", "10"], ["--diff", "10..30"],
        ] {
            let result = try runProcess(BuildProducts.executable("strata"), ["replay", store.path] + arguments, input: "\n\n")
            #expect(result.status == 1, "\(arguments): \(result.standardOutput)")
            #expect(result.standardError == "strata: \(Self.purgedMessage)\n", "\(arguments)")
            #expect(result.standardOutput.isEmpty, "\(arguments)")
        }
    }

    @Test("--step --from past the head is exit 1 naming the head; --to before the first says so")
    func stepFromPastHead() throws {
        let store = try makeLeagueStore()
        let result = try strata("replay", store.path, "--step", "--from", "9", input: "\n")
        #expect(result.status == 1, "\(result.standardOutput)")
        #expect(result.standardError == "strata: sequence 9 is past the head (7)\n")
        #expect(result.standardOutput.isEmpty)
        let none = try strata("replay", store.path, "--step", "--to", "0", input: "\n")
        #expect(none.status == 0)
        #expect(none.standardOutput == "nothing to step through (--to 0 is before 1)\n")
        let purged = try makePurgedLeagueStore()
        let atBase = try strata("replay", purged.path, "--step", "--to", "20", input: "\n")
        #expect(atBase.status == 0)
        #expect(atBase.standardOutput == "nothing to step through (--to 20 is before 21)\n")
    }

    @Test("--object of an object untouched since the purge shows its values as of the purge point")
    func blameShowsTheBase() throws {
        let store = try makePurgedLeagueStore()
        let result = try strata("replay", store.path, "--object", store.uri("Sponsor", 1))
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput == """
            \(store.uri("Sponsor", 1)) through sequence 38: 0 transactions
            (history through 20 was purged; values as of 20 are the starting point)

            #20  base snapshot
                name   "Acme"
                teams  [\(store.uri("Team", 1)), \(store.uri("Team", 2))]

            """)
    }
}

@Suite("strata export: a property named uri")
struct URIPropertyExportTests {
    /// A store whose Link entity has a property `uri` (the link's target) and a name.
    func makeLinkStore() throws -> (TemporaryDirectory, String) {
        let directory = try TemporaryDirectory("strata-cli")
        let path = directory.file("Links.strata")
        let model = try ManagedObjectModel {
            Entity("Link") {
                Attribute("name", .string)
                Attribute("uri", .uri)
            }
            Entity("Note") { Attribute("text", .string) }
        }
        let log = try EventLog(path: path, model: model)
        var draft = TransactionDraft()
        draft.insert("Link", values: ["name": str("home"), "uri": .attribute(.uri(try #require(URL(string: "https://example.com/"))))])
        draft.insert("Note", values: ["text": str("hi")])
        try log.commit(draft)
        return (directory, path)
    }

    @Test("csv and sql refuse it, exit 1, naming entity and property, writing nothing", arguments: ["csv", "sql"])
    func refused(format: String) throws {
        let (directory, path) = try makeLinkStore()
        let output = directory.file("out")
        let result = try strata("export", path, "--format", format, "--output", output)
        #expect(result.status == 1, "\(result.standardOutput)")
        #expect(result.standardError.hasPrefix("strata: entity Link has a property named \"uri\", which clashes with the key column \"uri\" of csv and sql exports"), "\(result.standardError)")
        #expect(!FileManager.default.fileExists(atPath: output))
        // Without that entity there is no clash.
        let notes = try strata("export", path, "--format", format, "--entity", "Note", "--output", output)
        #expect(notes.status == 0, "\(notes.standardError)")
    }

    @Test("json and ndjson export it: the URI is kept apart from the values")
    func jsonExports() throws {
        let (directory, path) = try makeLinkStore()
        let result = try strata("export", path, "--format", "ndjson", "--entity", "Link")
        withExtendedLifetime(directory) {}
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("\"values\":{\"name\":\"home\",\"uri\":\"https://example.com/\"}"))
    }
}

@Suite("strata export --format sql: a string holding U+0000")
struct NULStringExportTests {
    /// The league store plus Sponsor/p2, named "a\u{0}b'c".
    func makeNULStore() throws -> LeagueStore {
        let store = try makeLeagueStore()
        let log = try EventLog(openingExistingAt: store.path, readOnly: false)
        var draft = TransactionDraft()
        draft.insert("Sponsor", values: ["name": str("a\u{0}b'c\u{0}")])
        try log.commit(draft)
        return store
    }

    @Test("sqlite: written as char(0) joined in, and sqlite3 loads it")
    func sqlite() throws {
        let store = try makeNULStore()
        let script = store.directory.file("nul.sql")
        let result = try strata("export", store.path, "--format", "sql", "--entity", "Sponsor", "--output", script)
        #expect(result.status == 0, "\(result.standardError)")
        let text = try String(contentsOfFile: script, encoding: .utf8)
        #expect(text.contains("'a' || char(0) || 'b''c' || char(0) || ''"), "\(text)")
        #expect(!text.unicodeScalars.contains("\u{0}"))
        guard toolIsInstalled("sqlite3") else { return }
        let database = store.directory.file("nul.db")
        let load = try runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["sqlite3", "-bail", database, ".read \(script)"])
        #expect(load.status == 0, "\(load.standardError)")
        let query = try runProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["sqlite3", database, "SELECT hex(CAST(name AS BLOB)), length(CAST(name AS BLOB)) FROM \"Sponsor\" WHERE uri = '\(store.uri("Sponsor", 2))'"])
        #expect(query.standardOutput == "610062276300|6\n", "all six bytes, NULs included: \(query.standardOutput)")
    }

    @Test("postgres: exit 1 naming the object and property")
    func postgres() throws {
        let store = try makeNULStore()
        let result = try strata("export", store.path, "--format", "sql", "--dialect", "postgres", "--entity", "Sponsor")
        #expect(result.status == 1)
        #expect(result.standardError.contains("strata: \(store.uri("Sponsor", 2)) property name holds a string with a NUL character (U+0000), which postgres text can't hold"), "\(result.standardError)")
    }
}

@Suite("strata: output as spec 0007 gives it")
struct SpecConformanceCommandTests {
    @Test("text log, replay --object and --diff print dates with microseconds")
    func textDatesHaveMicroseconds() throws {
        let store = try makeLeagueStore()
        let log = try strata("log", store.path, "--to", "1")
        #expect(log.standardOutput.contains("    founded: nil → 2026-01-01T00:00:00.000000Z\n"), "\(log.standardOutput)")
        let blame = try strata("replay", store.path, "--object", store.uri("Team", 1), "--to", "1")
        #expect(blame.standardOutput.contains("  * founded  2026-01-01T00:00:00.000000Z\n"), "\(blame.standardOutput)")
        let diff = try strata("replay", store.path, "--diff", "0..1")
        #expect(diff.standardOutput.contains("    founded: 2026-01-01T00:00:00.000000Z\n"), "\(diff.standardOutput)")
    }

    @Test("log says no transactions match in every format", arguments: ["text", "json", "ndjson"])
    func noMatch(format: String) throws {
        let store = try makeLeagueStore()
        let result = try strata("log", store.path, "--author", "nobody", "--format", format)
        #expect(result.status == 0)
        #expect(result.standardError == "no transactions match\n")
        #expect(result.standardOutput == (format == "json" ? "{\"store\":\"\(store.storeUUID.uuidString)\",\"transactions\":[\n]}\n" : ""))
    }

    @Test("log with --from later than --to is exit 64 for dates as for sequences")
    func reversedDates() throws {
        let store = try makeLeagueStore()
        let result = try strata("log", store.path, "--from", "2026-01-02", "--to", "2026-01-01T12:00:00Z")
        #expect(result.status == 64)
        #expect(result.standardError.contains("--from 2026-01-02T00:00:00.000000Z is after --to 2026-01-01T12:00:00.000000Z"), "\(result.standardError)")
    }

    @Test("compact --dry-run with nothing to move prints the one line")
    func dryRunNothingToMove() throws {
        let store = try makeLeagueStore()
        #expect(try strata("compact", store.path).status == 0)
        let result = try strata("compact", store.path, "--dry-run")
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.split(separator: "\n").count == 1, "\(result.standardOutput)")
        #expect(result.standardOutput.hasPrefix("nothing to move: horizon 7, limited by "))
    }
}
