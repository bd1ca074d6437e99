import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `strata log --last N` and `--limit N` on a long log whose first half is compacted
/// (`ScaleLogCommandTests.makeLongStore`): `--last` reads windows back from the end of the
/// log, so each case is checked against the tail of the same command without it.
@Suite("strata log --last and --limit")
struct LogWindowCommandTests {
    /// The sequences `strata log STORE --format ndjson` prints with `arguments`.
    static func loggedSequences(_ store: ScaleLogCommandTests.LongStore, _ arguments: [String]) throws -> [Int] {
        let result = try runProcess(BuildProducts.executable("strata"), ["log", store.path, "--format", "ndjson"] + arguments)
        #expect(result.status == 0, "\(arguments): \(result.standardError)")
        return try result.standardOutput.split(separator: "\n").map { line in
            let transaction = try #require(try parseJSON(String(line)) as? [String: Any])
            return try #require(transaction["sequence"] as? Int)
        }
    }

    @Test("--last N is the newest N matches, oldest first, whatever the filters and however far back they are")
    func lastIsTheTail() throws {
        let store = try ScaleLogCommandTests.makeLongStore(count: ScaleLogCommandTests.eventCount)
        let filters: [[String]] = [
            [],
            ["--author", "bob"],
            // Every 50th transaction: the matches are further apart than the first window.
            ["--property", "rating"],
            ["--object", store.uri(1)],
            ["--from", "3", "--to", "\(store.count / 2 + 7)"],
            ["--where", "transactionNumber < 40"],
        ]
        for filter in filters {
            let all = try Self.loggedSequences(store, filter)
            #expect(!all.isEmpty, "\(filter)")
            for n in [1, 3, 70, all.count, all.count + 5] {
                let tail = try Self.loggedSequences(store, filter + ["--last", "\(n)"])
                #expect(tail == Array(all.suffix(n)), "\(filter) --last \(n)")
            }
        }
        #expect(try Self.loggedSequences(store, ["--last", "4"]) == Array((store.count - 3)...store.count))
        #expect(try Self.loggedSequences(store, ["--property", "rating", "--last", "2"]) == store.rareSequences.suffix(2).map { Int($0) })
    }

    @Test("--limit N is the oldest N matches")
    func limitIsTheHead() throws {
        let store = try ScaleLogCommandTests.makeLongStore(count: ScaleLogCommandTests.eventCount)
        for filter in [[], ["--author", "bob"], ["--property", "rating"], ["--object", store.uri(1)], ["--from", "10"]] {
            let all = try Self.loggedSequences(store, filter)
            for n in [1, 2, all.count + 1] {
                #expect(try Self.loggedSequences(store, filter + ["--limit", "\(n)"]) == Array(all.prefix(n)), "\(filter) --limit \(n)")
            }
        }
    }

    @Test("--last with no match prints nothing and says so; text and json agree with ndjson")
    func lastFormats() throws {
        let store = try ScaleLogCommandTests.makeLongStore(count: 120)
        let none = try strata("log", store.path, "--kind", "undo", "--last", "3")
        #expect(none.status == 0)
        #expect(none.standardOutput.isEmpty)
        #expect(none.standardError.contains("no transactions match"))
        let text = try strata("log", store.path, "--last", "2")
        #expect(text.status == 0)
        #expect(text.standardOutput.hasPrefix("#119  "))
        #expect(text.standardOutput.contains("\n\n#120  "))
        let json = try strata("log", store.path, "--format", "json", "--last", "2")
        #expect(sequences(try logTransactions(json.standardOutput)) == [119, 120])
    }

    @Test("--last and --limit refuse a count below 1 and each other (exit 64)")
    func badCounts() throws {
        let store = try ScaleLogCommandTests.makeLongStore(count: 20)
        for (arguments, message) in [
            (["--last", "0"], "--last 0 is not a positive number of transactions"),
            (["--limit", "0"], "--limit 0 is not a positive number of transactions"),
            (["--last", "2", "--limit", "2"], "--last and --limit can't be combined"),
        ] {
            let result = try runProcess(BuildProducts.executable("strata"), ["log", store.path] + arguments)
            #expect(result.status == 64, "\(arguments)")
            #expect(result.standardError.contains(message), "\(arguments): \(result.standardError)")
            #expect(result.standardOutput.isEmpty)
        }
    }
}

/// `strata log --follow`: the real binary left running while this process commits.
@Suite("strata log --follow")
struct LogFollowCommandTests {
    /// Reads a child's standard output line by line, waiting at most a deadline for each
    /// (a guard against a hang, not a measurement).
    final class LineReader {
        let descriptor: Int32
        var pending: [UInt8] = []
        init(_ handle: FileHandle) { descriptor = handle.fileDescriptor }

        func line(within seconds: Double = 60) throws -> String? {
            let deadline = Date().addingTimeInterval(seconds)
            while true {
                if let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[..<newline], as: UTF8.self)
                    pending.removeSubrange(...newline)
                    return line
                }
                let left = deadline.timeIntervalSinceNow
                guard left > 0 else { return nil }
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, Int32(min(left, 1) * 1000)) > 0 else { continue }
                var chunk = [UInt8](repeating: 0, count: 4096)
                let count = read(descriptor, &chunk, chunk.count)
                guard count > 0 else { return nil }  // the child closed its output
                pending.append(contentsOf: chunk[..<count])
            }
        }

        /// The sequences of the next `count` ndjson lines.
        func sequences(_ count: Int) throws -> [Int] {
            try (0..<count).map { _ in
                let line = try #require(try self.line(), "no line from strata log --follow")
                let transaction = try #require(try parseJSON(line) as? [String: Any])
                return try #require(transaction["sequence"] as? Int)
            }
        }
    }

    @Test("--last N --follow: the newest matches, then each new matching transaction as it commits, across a compaction")
    func followsCommits() throws {
        let store = try ScaleLogCommandTests.makeLongStore(count: 30)
        let process = ChildProcess()
        process.executableURL = BuildProducts.executable("strata")
        process.arguments = ["log", store.path, "--format", "ndjson", "--last", "2", "--follow", "--author", "bob"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        let reader = LineReader(output.fileHandleForReading)
        #expect(try reader.sequences(2) == [27, 29])

        let log = try EventLog(openingExistingAt: store.path, readOnly: false)
        func commit(_ author: String) throws {
            var draft = TransactionDraft(author: author, contextName: "editor")
            _ = draft.insert("Player", values: ["name": str("New \(author)")])
            _ = try log.commit(draft)
        }
        try commit("alice")  // 31: not bob's
        try commit("bob")  // 32
        try commit("bob")  // 33
        #expect(try reader.sequences(2) == [32, 33])
        try log.compact(CompactionRequest(before: 34))
        try commit("alice")  // 34
        try commit("bob")  // 35
        #expect(try reader.sequences(1) == [35])
        #expect(process.isRunning)
    }

    @Test("--follow refuses json, --to and --limit (exit 64)")
    func followRefusals() throws {
        let store = try ScaleLogCommandTests.makeLongStore(count: 20)
        for (arguments, message) in [
            (["--format", "json"], "use --format text or ndjson"),
            (["--to", "5"], "can't be combined with --to"),
            (["--limit", "5"], "can't be combined with --limit"),
        ] {
            let result = try runProcess(BuildProducts.executable("strata"), ["log", store.path, "--follow"] + arguments)
            #expect(result.status == 64, "\(arguments)")
            #expect(result.standardError.contains(message), "\(arguments): \(result.standardError)")
        }
    }
}

@Suite("strata log: groups not recorded for undo")
struct LogUnrecordedGroupCommandTests {
    @Test("a group the context's undo journal didn't record is marked in text and json; a recorded one isn't")
    func marked() throws {
        let directory = try TemporaryDirectory("strata-log-unrecorded")
        let path = directory.file("Marked.strata")
        do {
            let log = try EventLog(path: path, model: try leagueModel())
            var draft = TransactionDraft(author: "app", contextName: "editor")
            draft.beginGroup(actionName: "Add Player")
            let player = draft.insert("Player", values: ["name": str("Ada")])
            draft.beginGroup(actionName: nil, recordedForUndo: false)
            draft.update(player, values: ["age": .attribute(.int32(30))])
            _ = try log.commit(draft)
        }
        let text = try strata("log", path)
        #expect(text.status == 0, "\(text.standardError)")
        let lines = text.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.filter { $0 == "  not recorded for undo" }.count == 1, "\(text.standardOutput)")
        let marker = try #require(lines.firstIndex(of: "  not recorded for undo"))
        #expect(lines[marker + 1].hasPrefix("  update "), "the mark heads the unrecorded group: \(text.standardOutput)")
        #expect(lines[marker - 1] != "  action \"Add Player\"")
        let json = try strata("log", path, "--format", "ndjson")
        #expect(json.standardOutput.contains("\"recordedForUndo\":false"))
    }
}
