import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// Session 24's review of the `strata` tool: defects found exercising every command.
@Suite("Session 24 review: strata")
struct Session24ReviewCommandTests {
    /// A store whose one Note's text holds a quote, a newline and what looks like a change
    /// line, saved by an author and under an action name with a newline and quotes; then
    /// the text changed to a plain value.
    static func awkwardTextStore(_ directory: TemporaryDirectory) throws -> (path: String, uuid: UUID) {
        let path = directory.file("Notes.strata")
        let model = try ManagedObjectModel {
            Entity("Note") { Attribute("text", .string) }
        }
        let log = try EventLog(path: path, model: model)
        var draft = TransactionDraft(author: "mallory\n#9  forged header", contextName: "sync\tclient")
        draft.setActionName("Paste \"all\"\n  delete x-strata://forged/Note/p7")
        let note = draft.insert("Note", values: ["text": .attribute(.string("a\" → \"b\n  delete x-strata://forged/Note/p9\\"))])
        let inserted = try log.commit(draft)
        var update = TransactionDraft(author: "alice")
        update.update(.stored(try required(inserted.permanentID(for: note))), values: ["text": .attribute(.string("plain"))])
        try log.commit(update)
        return (path, log.storeUUID)
    }

    @Test("log, replay (--object, --diff, --step) and revert --dry-run print a string value, an action name and a header on their own lines: quotes, backslashes and control characters escaped, so a value can't forge a change or a transaction (before: printed raw, a newline in a value started a line of its own)")
    func textEscaping() throws {
        let directory = try TemporaryDirectory("strata-s24")
        let (path, uuid) = try Self.awkwardTextStore(directory)
        let note = "x-strata://\(uuid.uuidString)/Note/p1"
        let value = #""a\" → \"b\n  delete x-strata://forged/Note/p9\\""#

        let log = try strata("log", path)
        #expect(log.status == 0, "\(log.standardError)")
        let lines = log.standardOutput.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.filter { $0.hasPrefix("#") }.count == 2, "\(log.standardOutput)")
        #expect(!lines.contains { $0.contains("delete") && !$0.contains("\\n  delete") }, "\(log.standardOutput)")
        #expect(lines.contains { $0.hasPrefix("#1  ") && $0.contains("  author mallory\\n#9  forged header  context sync\\tclient  pid ") })
        #expect(lines.contains(#"  action "Paste \"all\"\n  delete x-strata://forged/Note/p7""#), "\(log.standardOutput)")
        #expect(lines.contains("    text: nil → \(value)"), "\(log.standardOutput)")
        #expect(lines.contains("    text: \(value) → \"plain\""), "\(log.standardOutput)")

        let blame = try strata("replay", path, "--object", note, "--to", "1")
        #expect(blame.status == 0, "\(blame.standardError)")
        #expect(blame.standardOutput.contains("  * text  \(value)\n"), "\(blame.standardOutput)")
        #expect(!blame.standardOutput.contains("\n  delete"), "\(blame.standardOutput)")

        let diff = try strata("replay", path, "--diff", "1..2")
        #expect(diff.status == 0, "\(diff.standardError)")
        #expect(diff.standardOutput.contains("    text: \(value) → \"plain\"\n"), "\(diff.standardOutput)")

        let step = try strata("replay", path, "--step", input: "\n")
        #expect(step.status == 0, "\(step.standardError)")
        #expect(step.standardOutput.contains("    text: nil → \(value)\n"), "\(step.standardOutput)")

        let revert = try strata("revert", path, "2", "--dry-run")
        #expect(revert.status == 0, "\(revert.standardError)")
        #expect(revert.standardOutput.contains("    text: \"plain\" → \(value)\n"), "\(revert.standardOutput)")
    }

    @Test("replay --step --from 0 on a store never purged steps from 1, as log --from 0 reads from 1 (before: exit 1, \"sequence 0 was purged: history through 0 was removed\"); after a purge it is still refused as purged history")
    func stepFromZero() throws {
        let store = try makeLeagueStore()
        let step = try strata("replay", store.path, "--step", "--from", "0", "--to", "2", input: "\n")
        #expect(step.status == 0, "\(step.standardError)")
        #expect(step.standardOutput.hasPrefix("#1  "), "\(step.standardOutput)")
        #expect(step.standardOutput.contains("\n#2  "))
        #expect(step.standardOutput.hasSuffix("-- end (sequence 2) --\n"))
        #expect(!step.standardError.contains("purged"))

        let purged = try makePurgedLeagueStore()
        let refused = try strata("replay", purged.path, "--step", "--from", "0")
        #expect(refused.status == 1)
        #expect(refused.standardError == "strata: sequence 0 was purged: history through 20 was removed, and the earliest state kept is as of 20\n", "\(refused.standardError)")
    }

    @Test("log --where and revert --where comparing a header key with a constant of another type (timestamp with a string, processID with a string, author with a number) are exit 64 naming the comparison (before: it matched nothing, silently: 'no transactions match', exit 0); a date constant still selects")
    func whereTypeMismatch() throws {
        let store = try makeLeagueStore()
        for (predicate, problem) in [
            ("timestamp > '2026-01-01T00:03:00Z'", #"timestamp (Date) compared with "2026-01-01T00:03:00Z" (string)"#),
            ("processID == 'x'", #"processID (Integer 64) compared with "x" (string)"#),
            ("author == 5 OR contextName == 'editor'", "author (String) compared with 5 (number)"),
        ] {
            for command in [["log", store.path], ["revert", store.path, "--dry-run"]] {
                let result = try runProcess(BuildProducts.executable("strata"), command + ["--where", predicate])
                #expect(result.status == 64, "\(command[0]) \(predicate): \(result.standardOutput)")
                #expect(result.standardError.hasPrefix("Error: --where: "), "\(result.standardError)")
                #expect(result.standardError.contains(problem), "\(result.standardError)")
            }
        }
        // 2026-01-01T00:03:00Z is 788_918_580 seconds after 2001-01-01.
        let dated = try strata("log", store.path, "--where", "timestamp > CAST(788918580, 'NSDate')", "--format", "json")
        #expect(dated.status == 0, "\(dated.standardError)")
        #expect(sequences(try logTransactions(dated.standardOutput)) == [4, 5, 6, 7])
    }

    @Test("export --output naming one of the store's own files (data.mdb, lock.mdb, a segment; directly or through a symlink) is exit 64 and changes nothing (before: the export replaced data.mdb and the store was gone)")
    func exportOverStoreFile() throws {
        let store = try makeLeagueStore()
        let log = try EventLog(openingExistingAt: store.path, readOnly: false)
        try log.compact(CompactionRequest(before: 4))
        let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: (store.path as NSString).appendingPathComponent("segments")).first { $0.hasSuffix(".zst") })
        let alias = store.directory.file("alias")
        try FileManager.default.createSymbolicLink(atPath: alias, withDestinationPath: store.path)
        let before = try snapshotFiles(store.path)
        for (format, output) in [
            ("json", (store.path as NSString).appendingPathComponent("data.mdb")),
            ("ndjson", (alias as NSString).appendingPathComponent("data.mdb")),
            ("sql", (alias as NSString).appendingPathComponent("lock.mdb")),
            ("json", (store.path as NSString).appendingPathComponent("segments/\(segment)")),
        ] {
            let result = try strata("export", store.path, "--format", format, "--output", output)
            #expect(result.status == 64, "\(output): \(result.standardError)")
            #expect(result.standardError.hasPrefix("Error: --output \(output) is the store's own file"), "\(result.standardError)")
        }
        let after = try snapshotFiles(store.path)
        #expect(Set(after.keys) == Set(before.keys))
        for (name, (data, date)) in before {
            #expect(after[name]?.0 == data && after[name]?.1 == date, "\(name) changed")
        }
        let verify = try strata("verify", store.path)
        #expect(verify.status == 0, "\(verify.standardOutput)\(verify.standardError)")
    }

    @Test("export --output inside the store's directory — a file of its own beside data.mdb, csv into the directory or its segments — is exit 64 and creates nothing, so the store can still be destroyed and replaced (before: the export was written there, and destroyStore then refused the store: 'holds export.json, which Strata doesn't create in a store')")
    func exportIntoStoreDirectory() throws {
        let store = try makeLeagueStore()
        let alias = store.directory.file("alias")
        try FileManager.default.createSymbolicLink(atPath: alias, withDestinationPath: store.path)
        let before = try FileManager.default.subpathsOfDirectory(atPath: store.path).sorted()
        for (format, output) in [
            ("json", (store.path as NSString).appendingPathComponent("export.json")),
            ("sql", (alias as NSString).appendingPathComponent("dump/export.sql")),
            ("csv", store.path),
            ("csv", (store.path as NSString).appendingPathComponent("segments")),
        ] {
            let result = try strata("export", store.path, "--format", format, "--output", output)
            #expect(result.status == 64, "\(format) \(output): \(result.standardError)")
            #expect(result.standardError.hasPrefix("Error: --output \(output) is inside the store at \(store.path)"), "\(result.standardError)")
        }
        #expect(try FileManager.default.subpathsOfDirectory(atPath: store.path).sorted() == before)
        #expect(try EventLog.destroyStore(at: store.path))
        // Beside a store, not in it: written.
        let other = try makeLeagueStore()
        let beside = other.directory.file("export.json")
        #expect(try strata("export", other.path, "--output", beside).status == 0)
        #expect(FileManager.default.fileExists(atPath: beside))
    }

    @Test("replay --into a directory inside the store (beside data.mdb, or in segments) is exit 1 naming it, as migrate --into is, and creates nothing (before: a second store was written inside the first's directory)")
    func replayIntoInsideStore() throws {
        let store = try makeLeagueStore()
        for inside in ["copy", "segments/copy"] {
            let destination = (store.path as NSString).appendingPathComponent(inside)
            let result = try strata("replay", store.path, "--to", "3", "--into", destination)
            #expect(result.status == 1, "\(result.standardOutput)")
            #expect(result.standardError.hasPrefix("strata: \(destination) is inside the store at \(store.path)"), "\(result.standardError)")
            #expect(!FileManager.default.fileExists(atPath: destination))
        }
        #expect(!FileManager.default.fileExists(atPath: (store.path as NSString).appendingPathComponent("segments")))
    }

    @Test("revert refused for its arguments — a sequence past the head, 0, purged, none accepted by --where — exits 1 without opening the store writable: no byte or modification time of its files changes (before: the writable open recorded itself in data.mdb, though the message said nothing was written)")
    func revertRefusalsWriteNothing() throws {
        let store = try makePurgedLeagueStore()
        for arguments in [["99"], ["0"], ["39", "22"], ["3"], ["--where", "author == 'nobody'"]] {
            let before = try snapshotFiles(store.path)
            let result = try runProcess(BuildProducts.executable("strata"), ["revert", store.path] + arguments)
            #expect(result.status == 1, "\(arguments): \(result.standardOutput)")
            #expect(result.standardError.hasPrefix("strata: "), "\(result.standardError)")
            let after = try snapshotFiles(store.path)
            #expect(Set(after.keys) == Set(before.keys))
            for (name, (data, date)) in before {
                #expect(after[name]?.0 == data && after[name]?.1 == date, "revert \(arguments) changed \(name)")
            }
        }
        // Not refused: written as before.
        let revert = try strata("revert", store.path, "37")
        #expect(revert.status == 0, "\(revert.standardError)")
        #expect(revert.standardOutput.contains("wrote        #39  "), "\(revert.standardOutput)")
    }

    @Test("a write to standard output that fails — the reader gone with SIGPIPE ignored, a full disk — is exit 1 with 'strata: can't write to standard output: REASON' (before: a trap, exit 132 and a backtrace)")
    func stdoutWriteError() throws {
        let bash = "/bin/bash"
        guard FileManager.default.isExecutableFile(atPath: bash) else { return }
        // More than the sink's 64 KiB buffer, so a write happens after the reader is gone.
        let store = try makeLeagueStore(extraTransactions: 400)
        let executable = BuildProducts.executable("strata").path
        let bashURL = URL(fileURLWithPath: bash)
        let pipe = try runProcess(bashURL, ["-c", #"trap '' PIPE; "$0" log "$1" --format ndjson 2>"$2" | head -c 10 >/dev/null; echo "${PIPESTATUS[0]}"; cat "$2""#, executable, store.path, store.directory.file("stderr-pipe")])
        #expect(pipe.standardOutput.hasPrefix("1\nstrata: can't write to standard output: "), "\(pipe.standardOutput)")
        #expect(!pipe.standardOutput.contains("Fatal error"), "\(pipe.standardOutput)")
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: "/dev/full", isDirectory: &isDirectory), !isDirectory.boolValue {
            let full = try runProcess(bashURL, ["-c", #""$0" export "$1" >/dev/full"#, executable, store.path])
            #expect(full.status == 1, "\(full.standardError)")
            #expect(full.standardError.hasPrefix("strata: can't write to standard output: "), "\(full.standardError)")
            #expect(!full.standardError.contains("Fatal error"))
        }
    }

    @Test("export --output writes through the path it is given: a symlink keeps pointing at its file, which gets the export; a pipe (/dev/fd/N, as bash's >(…) gives) receives it (before: the output was written to a new file put in the path's place — the symlink replaced, the pipe refused with 'cannot create')")
    func outputWritesThrough() throws {
        let store = try makeLeagueStore()
        let expected = try strata("export", store.path, "--format", "ndjson").standardOutput
        #expect(!expected.isEmpty)
        let target = store.directory.file("exports/latest.ndjson")
        try FileManager.default.createDirectory(atPath: store.directory.file("exports"), withIntermediateDirectories: true)
        try Data("old".utf8).write(to: URL(fileURLWithPath: target))
        let link = store.directory.file("latest.ndjson")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        let viaLink = try strata("export", store.path, "--format", "ndjson", "--output", link)
        #expect(viaLink.status == 0, "\(viaLink.standardError)")
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: link)) == target, "the symlink was replaced")
        #expect(try String(contentsOfFile: target, encoding: .utf8) == expected)

        let bash = "/bin/bash"
        guard FileManager.default.isExecutableFile(atPath: bash) else { return }
        let received = store.directory.file("received.ndjson")
        let piped = try runProcess(URL(fileURLWithPath: bash), [
            "-c", #""$0" export "$1" --format ndjson --output >(cat > "$2"); status=$?; wait; echo "$status""#,
            BuildProducts.executable("strata").path, store.path, received,
        ])
        #expect(piped.standardOutput == "0\n", "\(piped.standardOutput)\(piped.standardError)")
        // The process substitution's cat may finish after bash's wait: give it a moment.
        for _ in 0..<50 where (try? String(contentsOfFile: received, encoding: .utf8)) != expected { Thread.sleep(forTimeInterval: 0.1) }
        #expect(try String(contentsOfFile: received, encoding: .utf8) == expected)
    }

    @Test("doctor --keep names where it kept the scratch environment, which without --directory is a fresh temporary directory (before: kept at a path it never printed)")
    func doctorKeepNamesThePlace() throws {
        let directory = try TemporaryDirectory("strata-s24")
        let result = try runProcess(BuildProducts.executable("strata"), ["doctor", "--keep"], environment: ["TMPDIR": directory.path + "/"])
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        let kept = try #require(lines.first { $0.hasPrefix("kept    ") }, "\(result.standardOutput)")
        let path = String(kept.dropFirst("kept    the scratch environment at ".count))
        #expect(kept.hasPrefix("kept    the scratch environment at \(directory.path)"), "\(kept)")
        #expect(FileManager.default.fileExists(atPath: (path as NSString).appendingPathComponent("data.mdb")), "\(path)")
        #expect(lines.last == "all checks passed")
        // Without --keep, no such line.
        let plain = try runProcess(BuildProducts.executable("strata"), ["doctor"], environment: ["TMPDIR": directory.path + "/"])
        #expect(plain.status == 0)
        #expect(!plain.standardOutput.contains("kept"))
    }

    @Test("info prints the user's metadata dates as everything else prints dates: to the microsecond, and one with no ISO form (NaN, 10^300 s out) as its seconds since 1970, never a made-up date; a key with a newline stays on its line (before: milliseconds, an empty value for NaN, '5838270-09-20T00:00:00.000Z' for -10^300 s)")
    func infoMetadataDates() throws {
        let directory = try TemporaryDirectory("strata-s24")
        let path = directory.file("Meta.strata")
        do {
            let log = try EventLog(path: path, model: try ManagedObjectModel { Entity("Note") { Attribute("text", .string) } })
            try log.setUserMetadata([
                "nan": .date(Date(timeIntervalSince1970: .nan)),
                "past": .array([.date(Date(timeIntervalSince1970: -1e300))]),
                "micro": .date(Date(timeIntervalSince1970: 1.000001)),
                "two\nlines": .string("v"),
            ])
        }
        let info = try strata("info", path)
        #expect(info.status == 0, "\(info.standardError)")
        let lines = info.standardOutput.split(separator: "\n").map(String.init)
        let start = try #require(lines.firstIndex(of: "metadata     4 keys"), "\(info.standardOutput)")
        #expect(Array(lines[(start + 1)...]) == [
            "  micro       1970-01-01T00:00:01.000001Z (date)",
            "  nan         nan (date)",
            "  past        [-1e+300] (array)",
            "  two\\nlines  \"v\" (string)",
        ], "\(info.standardOutput)")
    }

    @Test("demo --force on a store another process has open is exit 1 naming that process, and the store is left as it was (before: it was deleted and rebuilt under the open process, which then read the new store's segments against its old log)")
    func demoForceOnAnOpenStore() throws {
        let directory = try TemporaryDirectory("strata-s24")
        let path = directory.file("demo")
        let built = try strata("demo", path)
        #expect(built.status == 0, "\(built.standardError)")
        let open = try EventLog(openingExistingAt: path)
        let uuid = open.storeUUID
        let forced = try strata("demo", path, "--force")
        #expect(forced.status == 1, "\(forced.standardOutput)")
        #expect(forced.standardError.hasPrefix("strata: "), "\(forced.standardError)")
        #expect(forced.standardError.contains("\(ProcessInfo.processInfo.processIdentifier)"), "\(forced.standardError)")
        #expect(try EventLog(openingExistingAt: path).storeUUID == uuid)
        #expect(try open.head == 10)
        withExtendedLifetime(open) {}  // held open through the --force
    }

    @Test("demo --force with nothing else holding the store replaces it")
    func demoForceReplaces() throws {
        let directory = try TemporaryDirectory("strata-s24")
        let path = directory.file("demo")
        #expect(try strata("demo", path).status == 0)
        let uuid = try EventLog(openingExistingAt: path).storeUUID
        let forced = try strata("demo", path, "--force")
        #expect(forced.status == 0, "\(forced.standardError)")
        #expect(try EventLog(openingExistingAt: path).storeUUID != uuid)
    }
}
