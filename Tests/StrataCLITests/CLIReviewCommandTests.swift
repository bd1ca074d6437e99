import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// Session 26's review of the `strata` tool: defects found running every command against
/// real stores.
@Suite("Session 26 review: strata")
struct CLIReviewCommandTests {
    @Test("input for a command that exits without reading it (a missing store) is dropped: the test process isn't killed by SIGPIPE (the whole suite once died of signal 13 this way)")
    func inputToAnExitedCommand() throws {
        let directory = try TemporaryDirectory()
        // More than a pipe holds, so the write meets the closed pipe whatever the timing.
        let input = String(repeating: "\n", count: 1 << 20)
        let result = try strata("replay", directory.file("missing"), "--step", input: input)
        #expect(result.status == 1)
        #expect(result.standardError.contains("missing"), "\(result.standardError)")
    }

    /// Runs `strata ARGUMENTS… >/dev/full` through bash; nil where there is no bash or /dev/full.
    static func toFullDisk(_ arguments: [String], in directory: String? = nil) throws -> ProcessResult? {
        let bash = "/bin/bash"
        var isDirectory: ObjCBool = false
        guard FileManager.default.isExecutableFile(atPath: bash),
            FileManager.default.fileExists(atPath: "/dev/full", isDirectory: &isDirectory), !isDirectory.boolValue
        else { return nil }
        return try runProcess(
            URL(fileURLWithPath: bash), ["-c", #""$@" >/dev/full"#, "bash", BuildProducts.executable("strata").path] + arguments,
            currentDirectory: directory.map { URL(fileURLWithPath: $0) })
    }

    @Test("compact, doctor and demo whose standard output can't be written (a full disk) end with exit 1 and 'strata: can't write to standard output: REASON', as every other command does (before: print's failures were dropped, the output lost and the exit status 0)")
    func writeErrorsOfPrintingCommands() throws {
        let store = try makeLeagueStore(extraTransactions: 3)
        let directory = try TemporaryDirectory("strata-s26")
        let runs: [(String, [String])] = [
            ("compact", ["compact", store.path, "--before", "3"]),
            ("compact --dry-run", ["compact", store.path, "--dry-run"]),
            ("doctor", ["doctor", "--directory", directory.file("doctor-scratch")]),
            ("demo", ["demo", directory.file("demo")]),
        ]
        for (name, arguments) in runs {
            guard let result = try Self.toFullDisk(arguments) else { return }
            #expect(result.status == 1, "\(name): \(result.status) \(result.standardError)")
            #expect(result.standardError.contains("strata: can't write to standard output: No space left on device"), "\(name): \(result.standardError)")
            #expect(!result.standardError.contains("Fatal error"), "\(name)")
        }
        // The doctor's scratch environment still goes afterwards.
        #expect(!FileManager.default.fileExists(atPath: directory.file("doctor-scratch")))
        // Written normally, the output is all there.
        let doctor = try strata("doctor")
        #expect(doctor.status == 0, "\(doctor.standardError)")
        #expect(doctor.standardOutput.hasPrefix("strata "), "\(doctor.standardOutput)")
        #expect(doctor.standardOutput.hasSuffix("all checks passed\n"), "\(doctor.standardOutput)")
        #expect(doctor.standardOutput.components(separatedBy: "\nok      ").count == 4, "\(doctor.standardOutput)")
    }

    @Test("migrate with a model file that can't be read names it and the system's reason (before: Foundation's error dump, 'Error Domain=NSCocoaErrorDomain Code=260 …')")
    func migrateUnreadableModelFile() throws {
        let store = try makeLeagueStore()
        let missing = store.directory.file("no-such-model.json")
        let absent = try strata("migrate", store.path, missing)
        #expect(absent.status == 1)
        #expect(absent.standardError == "strata: \(missing): can't read the model file: No such file or directory\n", "\(absent.standardError)")
        let folder = try strata("migrate", store.path, store.directory.path)
        #expect(folder.status == 1)
        #expect(folder.standardError == "strata: \(store.directory.path): can't read the model file: Is a directory\n", "\(folder.standardError)")
        #expect(absent.standardOutput.isEmpty && folder.standardOutput.isEmpty)
    }

    @Test("replay --diff B..A (reversed) is exit 64 saying so and giving the range the right way round (before: 'The value '5..3' is invalid', as for text that isn't a range)")
    func diffReversed() throws {
        let store = try makeLeagueStore()
        let reversed = try strata("replay", store.path, "--diff", "5..3")
        #expect(reversed.status == 64)
        #expect(reversed.standardError.hasPrefix("Error: --diff 5..3 is reversed: give the earlier point first (--diff 3..5)\n"), "\(reversed.standardError)")
        let malformed = try strata("replay", store.path, "--diff", "5")
        #expect(malformed.status == 64)
        let same = try strata("replay", store.path, "--diff", "3..3")
        #expect(same.status == 0, "\(same.standardError)")
        #expect(same.standardOutput == "changes from sequence 3 to 3\n0 objects differ\n", "\(same.standardOutput)")
    }

    @Test("export --at, replay's summary --to and either end of replay --diff at a migration's take-out — a state the store was never in — are exit 1 naming the points to use instead, as replay --into is (before: exported with every taken-out value null, and a diff to it showed them going to nil)")
    func takeOutPointRefused() throws {
        let directory = try TemporaryDirectory("strata-s26")
        let (path, uri) = try AsOfMigrationCommandTests.migratedStore(directory)
        // Transactions 1–2 in version 1; 3 takes name and rating out, 4 puts nick back in.
        let message = "the store was never as of event 3."
        for arguments in [["export", path, "--at", "3"], ["export", path, "--at", "3", "--format", "csv", "--output", directory.file("csv")],
                          ["replay", path, "--to", "3"], ["replay", path, "--to", "3", "--format", "json"],
                          ["replay", path, "--diff", "1..3"], ["replay", path, "--diff", "3..4"]] {
            let result = try runProcess(BuildProducts.executable("strata"), arguments)
            #expect(result.status == 1, "\(arguments): \(result.standardOutput)")
            #expect(result.standardError.hasPrefix("strata: event 3 takes values out for the migration to model version 2, which events 3…4 make in one transaction: \(message)"), "\(arguments): \(result.standardError)")
            #expect(result.standardError.hasSuffix(" through 2 or 4\n"), "\(arguments): \(result.standardError)")
            #expect(result.standardOutput.isEmpty, "\(arguments): \(result.standardOutput)")
        }
        #expect(!FileManager.default.fileExists(atPath: directory.file("csv")))
        // The points around it work, and a diff across it shows the rename.
        let before = try strata("export", path, "--at", "2", "--format", "ndjson")
        #expect(before.standardOutput.contains(#""values":{"name":"Ng, Ada","rating":8}"#), "\(before.standardOutput)")
        let across = try strata("replay", path, "--diff", "2..4")
        #expect(across.status == 0, "\(across.standardError)")
        #expect(across.standardOutput.contains("    nick: nil → \"Ng, Ada\"\n"), "\(across.standardOutput)")
        // The history views still show the take-out as the log holds it.
        let blame = try strata("replay", path, "--object", uri, "--to", "3")
        #expect(blame.status == 0, "\(blame.standardError)")
        #expect(blame.standardOutput.contains("migration"), "\(blame.standardOutput)")
    }

    /// Team "Otters" and Player "Ada" on it saved with version 1 (transaction 1); version 2
    /// renames Player to Athlete, migrating the store (2 deletes Player/p1, 3 inserts
    /// Athlete/p1); then Athlete "Ben" (4).
    static func renamedEntityStore(_ directory: TemporaryDirectory) throws -> (path: String, uuid: UUID) {
        let path = directory.file("Renamed.strata")
        let v1 = try ManagedObjectModel {
            Entity("Player") { Attribute("name", .string); Relationship("team", to: "Team", inverse: "players") }
            Entity("Team") { Attribute("name", .string); Relationship("players", to: "Player", inverse: "team", toMany: true) }
        }
        let v2 = try ManagedObjectModel {
            Entity("Athlete") { Attribute("name", .string); Relationship("team", to: "Team", inverse: "players") }.renamed(from: "Player")
            Entity("Team") { Attribute("name", .string); Relationship("players", to: "Athlete", inverse: "team", toMany: true) }
        }
        do {
            let log = try EventLog(path: path, model: v1)
            var draft = TransactionDraft(author: "app")
            let team = draft.insert("Team", values: ["name": str("Otters")])
            draft.insert("Player", values: ["name": str("Ada"), "team": .reference(team)])
            try log.commit(draft)
        }
        let log = try EventLog(path: path, model: v2)
        var draft = TransactionDraft(author: "app")
        draft.insert("Athlete", values: ["name": str("Ben")])
        try log.commit(draft)
        return (path, log.storeUUID)
    }

    @Test("log --entity and --object, and replay --object, take an entity of an older stored model version (renamed since) and show its changes, as --property takes an older version's property (before: 'the store's model has no entity Player', the history unreachable)")
    func entityOfAnOlderModelVersion() throws {
        let directory = try TemporaryDirectory("strata-s26")
        let (path, uuid) = try Self.renamedEntityStore(directory)
        let player = "x-strata://\(uuid.uuidString)/Player/p1"
        let byEntity = try strata("log", path, "--entity", "Player", "--format", "json")
        #expect(byEntity.status == 0, "\(byEntity.standardError)")
        #expect(sequences(try logTransactions(byEntity.standardOutput)) == [1, 2], "\(byEntity.standardOutput)")
        let byObject = try strata("log", path, "--object", player)
        #expect(byObject.status == 0, "\(byObject.standardError)")
        #expect(byObject.standardOutput.contains("  insert \(player)\n    name: nil → \"Ada\"\n"), "\(byObject.standardOutput)")
        #expect(byObject.standardOutput.contains("  delete \(player)\n"), "\(byObject.standardOutput)")
        let blame = try strata("replay", path, "--object", player)
        #expect(blame.status == 0, "\(blame.standardError)")
        #expect(blame.standardOutput.hasPrefix("\(player) through sequence 4: 2 transactions\n"), "\(blame.standardOutput)")
        #expect(blame.standardOutput.contains("  * name  \"Ada\"\n"), "\(blame.standardOutput)")
        #expect(blame.standardOutput.hasSuffix("migration  pid \(ProcessInfo.processInfo.processIdentifier)  model 1  delete\n  (deleted)\n"), "\(blame.standardOutput)")
        // The newest name works as before; a name no version has is still refused.
        let athletes = try strata("log", path, "--entity", "Athlete", "--format", "ndjson")
        #expect(athletes.standardOutput.split(separator: "\n").count == 2, "\(athletes.standardOutput)")
        let unknown = try strata("log", path, "--entity", "Referee")
        #expect(unknown.status == 1)
        #expect(unknown.standardError == "strata: the store's model has no entity Referee (entities: Athlete, Team)\n", "\(unknown.standardError)")
        let unknownObject = try strata("replay", path, "--object", "x-strata://\(uuid.uuidString)/Referee/p1")
        #expect(unknownObject.status == 1)
        #expect(unknownObject.standardError.hasPrefix("strata: the store's model has no entity Referee"), "\(unknownObject.standardError)")
    }

    @Test("replay --help gives --step's starting point as the spec does: 1, or P+1 after a purge through P (before: 'default 1' only, though a purged store starts at P+1)")
    func replayHelpStartingPoint() throws {
        let help = try strata("replay", "--help")
        #expect(help.status == 0)
        let text = help.standardOutput.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(text.contains("the first transaction to show (default 1, or P+1 after a purge through P)"), "\(help.standardOutput)")
        #expect(text.contains("walk forward from --from (default 1; after a purge through P, P+1) through --to"), "\(help.standardOutput)")
    }

    @Test("compact on another program's LMDB environment (a data.mdb without a store's tables: doctor's kept scratch environment) is exit 1, 'no Strata store', and leaves data.mdb byte for byte as it was (before: the writable open created the store's tables in it first, a page more)")
    func compactOnAForeignEnvironment() throws {
        let directory = try TemporaryDirectory("strata-s26")
        let foreign = directory.file("other-app")
        let doctor = try strata("doctor", "--directory", foreign, "--keep")
        #expect(doctor.status == 0, "\(doctor.standardError)")
        let dataFile = (foreign as NSString).appendingPathComponent("data.mdb")
        let before = try Data(contentsOf: URL(fileURLWithPath: dataFile))
        for arguments in [["compact", foreign], ["compact", foreign, "--dry-run"], ["revert", foreign, "1"]] {
            let result = try runProcess(BuildProducts.executable("strata"), arguments)
            #expect(result.status == 1, "\(arguments): \(result.standardOutput)")
            #expect(result.standardError.hasPrefix("strata: no Strata store at \(foreign)"), "\(arguments): \(result.standardError)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: dataFile)) == before, "\(arguments) changed data.mdb")
        }
        // A store is compacted as before.
        let store = try makeLeagueStore()
        let compact = try strata("compact", store.path, "--before", "3")
        #expect(compact.status == 0, "\(compact.standardError)")
        #expect(compact.standardOutput.hasPrefix("moved events 1…2 (2 events): "), "\(compact.standardOutput)")
    }

    @Test("compact's stdout is the spec's lines in order, the note on data.mdb's size included (the spec left it out), and with nothing to move the one line then the sizes")
    func compactOutputLines() throws {
        let store = try makeLeagueStore()
        let moved = try strata("compact", store.path, "--before", "3")
        #expect(moved.status == 0, "\(moved.standardError)")
        let lines = moved.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.count == 5, "\(moved.standardOutput)")
        let prefixes = ["moved events 1…2 (2 events): ", "horizon 2, limited by the requested horizon",
                        "note: data.mdb keeps its size (LMDB reuses the freed pages); --vacuum shrinks it", "before: data.mdb ", "after:  data.mdb "]
        for (line, prefix) in zip(lines, prefixes) { #expect(line.hasPrefix(prefix), "\(line)") }
        // Progress from 0 before the first step (spec 0007, since session 29), then each step.
        #expect(moved.standardError == "compacted 0/2 events (0%)\ncompacted 2/2 events (100%)\n", "\(moved.standardError)")
        let nothing = try strata("compact", store.path, "--before", "2")
        #expect(nothing.status == 0, "\(nothing.standardError)")
        let nothingLines = nothing.standardOutput.split(separator: "\n").map(String.init)
        #expect(nothingLines.count == 3, "\(nothing.standardOutput)")
        #expect(nothingLines.first == "nothing to move: horizon 1, limited by the requested horizon", "\(nothing.standardOutput)")
        #expect(nothingLines.dropFirst().first?.hasPrefix("before: data.mdb ") == true, "\(nothing.standardOutput)")
    }

    @Test("a negative number given to a sequence, date, level or version option is exit 64 naming the value and the option (before: \"Missing value for '--to <seq>'\", the -1 read as an option)", arguments: [
        (["replay", "--to", "-1"], "Error: The value '-1' is invalid for '--to <seq>'"),
        (["replay", "--step", "--from", "-2"], "Error: The value '-2' is invalid for '--from <seq>'"),
        (["replay", "--diff", "-1..3"], "Error: The value '-1..3' is invalid for '--diff <A..B>'"),
        (["export", "--at", "-1"], "Error: The value '-1' is invalid for '--at <seq>'"),
        (["log", "--from", "-1"], "Error: The value '-1' is invalid for '--from <seq|date>'"),
        (["log", "--to", "-3"], "Error: The value '-3' is invalid for '--to <seq|date>'"),
        (["compact", "--before", "-1"], "Error: The value '-1' is invalid for '--before <seq|date>'"),
        (["compact", "--level", "-1"], "Error: --level must be between 1 and 19, not -1"),
        (["model", "--version", "-1"], "Error: --version must be 1 or more, not -1"),
    ])
    func negativeOptionValues(_ arguments: [String], _ message: String) throws {
        let store = try makeLeagueStore()
        let dataFile = (store.path as NSString).appendingPathComponent("data.mdb")
        let before = try Data(contentsOf: URL(fileURLWithPath: dataFile))
        let result = try runProcess(BuildProducts.executable("strata"), [arguments[0], store.path] + arguments.dropFirst())
        #expect(result.status == 64, "\(arguments): \(result.standardError)")
        #expect(result.standardError.hasPrefix(message + "\n"), "\(arguments): \(result.standardError)")
        #expect(result.standardOutput.isEmpty)
        #expect(try Data(contentsOf: URL(fileURLWithPath: dataFile)) == before)
    }

    @Test("query --at -1 names the value and the option too")
    func negativeQueryAt() throws {
        let store = try makeLeagueStore()
        let result = try strata("query", store.path, "Player", "--at", "-1")
        #expect(result.status == 64)
        #expect(result.standardError.hasPrefix("Error: The value '-1' is invalid for '--at <seq>'\n"), "\(result.standardError)")
    }

    @Test("demo into a directory inside a store's directory (directly, deeper, through a symlink) is exit 64 naming the store, and writes nothing there (before: the demo's store was made inside the other, which then held a directory Strata doesn't create)")
    func demoInsideAStore() throws {
        let store = try makeLeagueStore()
        let link = store.directory.file("league-link")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: store.path)
        let resolved = URL(fileURLWithPath: store.path).resolvingSymlinksInPath().path
        for target in [store.path + "/demo", store.path + "/a/b", link + "/demo"] {
            let result = try strata("demo", target)
            #expect(result.status == 64, "\(target): \(result.standardOutput)")
            #expect(result.standardError.hasPrefix("Error: \(target) is inside the store at \(resolved): "), "\(result.standardError)")
            #expect(result.standardOutput.isEmpty)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.path).sorted() == ["data.mdb", "lock.mdb"])
        let verify = try strata("verify", store.path)
        #expect(verify.status == 0, "\(verify.standardOutput)")
        // Beside the store, and replacing a store with --force, work as before.
        let beside = store.directory.file("demo")
        #expect(try strata("demo", beside).status == 0)
        let again = try strata("demo", beside, "--force")
        #expect(again.status == 0, "\(again.standardError)")
    }

    @Test("info prints a consumer's name with its control characters escaped, as a metadata key's, so a newline in it can't print a line that reads as another part of the report (before: printed raw)")
    func consumerNameEscaped() throws {
        let store = try makeLeagueStore()
        do {
            let log = try EventLog(openingExistingAt: store.path, readOnly: false)
            try log.registerConsumer("sync\nmetadata     1 key", processedThrough: 3)
            try log.registerConsumer("indexer", processedThrough: 5)
        }
        let info = try strata("info", store.path)
        #expect(info.status == 0, "\(info.standardError)")
        let lines = info.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.contains("  sync\\nmetadata     1 key  processed through 3"), "\(info.standardOutput)")
        #expect(lines.contains("  indexer  processed through 5"), "\(info.standardOutput)")
        #expect(lines.filter { $0.hasPrefix("metadata") } == ["metadata     none"], "\(info.standardOutput)")
        let json = try #require(try parseJSON(try strata("info", store.path, "--format", "json").standardOutput) as? [String: Any])
        #expect((json["consumers"] as? [String: Int])?["sync\nmetadata     1 key"] == 3)
    }

    @Test("compact --dictionary says so when a segment got no dictionary (too few events to train one on), and says nothing when one was trained (before: the request was passed over in silence)")
    func dictionaryNotTrainedIsSaid() throws {
        let small = try makeLeagueStore()
        let few = try strata("compact", small.path, "--dictionary")
        #expect(few.status == 0, "\(few.standardError)")
        #expect(few.standardOutput.contains("\nnote: --dictionary: no dictionary was trained for events 1…7 (too few events to train one on, or zstd's trainer refused them); they were compressed without one\n"), "\(few.standardOutput)")
        let info = try #require(try parseJSON(try strata("info", small.path, "--format", "json").standardOutput) as? [String: Any])
        let segments = try #require(info["segments"] as? [[String: Any]])
        #expect(segments.count == 1 && segments[0]["dictionary"] == nil, "\(segments)")

        let large = try makeLeagueStore(extraTransactions: 120)
        let many = try strata("compact", large.path, "--dictionary")
        #expect(many.status == 0, "\(many.standardError)")
        let largeInfo = try #require(try parseJSON(try strata("info", large.path, "--format", "json").standardOutput) as? [String: Any])
        let trained = try #require(largeInfo["segments"] as? [[String: Any]])
        #expect(trained.count == 1 && trained[0]["dictionary"] != nil, "\(trained)")
        #expect(!many.standardOutput.contains("no dictionary was trained"), "\(many.standardOutput)")
        // Without --dictionary, no note.
        let plain = try makeLeagueStore()
        #expect(!(try strata("compact", plain.path).standardOutput.contains("--dictionary")))
    }
}
