import Foundation
import StrataTestSupport
import Testing

/// Runs a printed "try next" line as a shell would, with the built `strata` on the PATH.
private func shell(_ line: String, in directory: String) throws -> ProcessResult {
    let path = BuildProducts.directory.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
    return try runProcess(
        URL(fileURLWithPath: "/bin/sh"), ["-c", line], environment: ["PATH": path],
        currentDirectory: URL(fileURLWithPath: directory, isDirectory: true))
}

/// The commands `strata demo` printed under "Try next:".
private func tryNextCommands(_ output: String) -> [String] {
    let lines = output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    guard let start = lines.firstIndex(of: "Try next:") else { return [] }
    return lines[(start + 1)...].filter { $0.hasPrefix("  strata ") }.map { $0.trimmingCharacters(in: .whitespaces) }
}

@Suite("strata demo")
struct DemoCommandTests {
    @Test("builds the League Manager with a real history: two authors, a cascade delete, a saved undo, a segment")
    func buildsTheStore() throws {
        let dir = try TemporaryDirectory("strata-cli")
        let store = dir.file("league-demo")
        let demo = try strata("demo", store)
        #expect(demo.status == 0, "\(demo.standardOutput)\(demo.standardError)")
        #expect(demo.standardOutput.contains("restart"))
        #expect(demo.standardOutput.contains("compacted events 1…"))

        let verify = try strata("verify", store)
        #expect(verify.status == 0, "\(verify.standardOutput)\(verify.standardError)")
        #expect(verify.standardOutput.contains("in 1 segment and the raw log"), "one segment, singular: \(verify.standardOutput)")
        #expect(verify.standardOutput.hasSuffix("no problems\n"))

        let log = try strata("log", store, "--format", "json")
        #expect(log.status == 0, "\(log.standardError)")
        let document = try #require(try parseJSON(log.standardOutput) as? [String: Any])
        let transactions = try #require(document["transactions"] as? [[String: Any]])
        let authors = Set(transactions.compactMap { $0["author"] as? String })
        #expect(authors == ["coach", "assistant"])
        let contexts = Set(transactions.compactMap { $0["contextName"] as? String })
        #expect(contexts.count == 2)
        let kinds = transactions.compactMap { ($0["kind"] as? [String: Any])?["type"] as? String }
        #expect(kinds.filter { $0 == "undo" }.count == 1)
        // The spec fixes the sequence numbers: 7 the cascade delete, 9 the undo of 8, 10 the save after the restart.
        let undo = try #require(transactions.first { ($0["kind"] as? [String: Any])?["type"] as? String == "undo" })
        #expect((undo["sequence"] as? NSNumber)?.intValue == 9)
        #expect(((undo["kind"] as? [String: Any])?["of"] as? NSNumber)?.intValue == 8)
        #expect(transactions.count == 10)
        let changes = transactions.flatMap { transaction in
            ((transaction["groups"] as? [[String: Any]]) ?? []).flatMap { ($0["changes"] as? [[String: Any]]) ?? [] }
        }
        let deletes = changes.filter { $0["op"] as? String == "delete" }.compactMap { $0["object"] as? String }
        #expect(deletes.contains { $0.contains("/Team/") }, "a team is deleted")
        #expect(deletes.filter { $0.contains("/Player/") }.count >= 2, "the cascade deletes its players in the same transaction")
        // Segment and raw events, before and after the restart, read as one dense history.
        let sequences = transactions.compactMap { ($0["sequence"] as? NSNumber)?.intValue }
        #expect(sequences == Array(1...sequences.count))

        let info = try strata("info", store, "--format", "json")
        #expect(info.status == 0, "\(info.standardError)")
        let infoObject = try #require(try parseJSON(info.standardOutput) as? [String: Any])
        let segments = try #require(infoObject["segments"] as? [[String: Any]])
        #expect(segments.count == 1)
        let compacted = try #require((infoObject["compactedThrough"] as? NSNumber)?.intValue)
        let head = try #require((infoObject["head"] as? NSNumber)?.intValue)
        #expect(compacted > 0 && compacted < head, "part of the history is compacted, the rest raw")
        let objects = try #require(infoObject["objects"] as? [String: Any])
        #expect((objects["Team"] as? NSNumber)?.intValue == 2)
        #expect((objects["Player"] as? NSNumber)?.intValue == 7)
    }

    @Test("builds strata-demo in the current directory by default, and every command it prints runs")
    func tryNextCommandsRun() throws {
        let dir = try TemporaryDirectory("strata-cli")
        let demo = try runProcess(BuildProducts.executable("strata"), ["demo"], currentDirectory: dir.url)
        #expect(demo.status == 0, "\(demo.standardOutput)\(demo.standardError)")
        #expect(FileManager.default.fileExists(atPath: dir.file("strata-demo/data.mdb")))
        let commands = tryNextCommands(demo.standardOutput)
        #expect(commands.count >= 7, "\(demo.standardOutput)")
        for required in ["strata info ", "strata log ", "--author assistant", "--last 3", "strata replay ", "--to ", "--object x-strata://",
                         "--format csv --output ", "strata verify ", "strata revert ", "--dot"] {
            #expect(commands.contains { $0.contains(required) }, "no try-next command with \(required)")
        }
        for command in commands {
            let result = try shell(command, in: dir.path)
            #expect(result.status == 0, "\(command): \(result.standardError)")
            #expect(!result.standardOutput.isEmpty || command.contains("--output"), "\(command) printed nothing")
        }
        // The export wrote one CSV file per entity.
        #expect(FileManager.default.fileExists(atPath: dir.file("strata-demo-csv/Player.csv")))
        #expect(FileManager.default.fileExists(atPath: dir.file("strata-demo-csv/Team.csv")))
        // The blame command names a real player with a history of more than its insert.
        let blame = try #require(commands.first { $0.contains("--object") })
        let history = try shell(blame, in: dir.path)
        #expect(history.standardOutput.contains("Player/p"))
        #expect(history.standardOutput.contains("assistant"))
    }

    @Test("refuses a non-empty DIR with exit 64; --force replaces a store, but never a directory that isn't one")
    func existingDirectory() throws {
        let dir = try TemporaryDirectory("strata-cli")
        let store = dir.file("league-demo")
        #expect(try strata("demo", store).status == 0)
        let uuid = try storeUUID(store)

        let again = try strata("demo", store)
        #expect(again.status == 64)
        #expect(again.standardError.contains("\(store) already exists and isn't empty"))
        #expect(again.standardError.contains("--force"))
        #expect(try storeUUID(store) == uuid, "the refused run left the store alone")

        let forced = try strata("demo", store, "--force")
        #expect(forced.status == 0, "\(forced.standardError)")
        #expect(try storeUUID(store) != uuid, "--force built a new store")
        #expect(try strata("verify", store).status == 0)

        // An empty directory is fine; a file, or a non-empty directory that isn't a store, is not.
        let empty = dir.file("empty")
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        #expect(try strata("demo", empty).status == 0)
        let file = dir.file("a-file")
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        let onFile = try strata("demo", file)
        #expect(onFile.status == 64)
        #expect(onFile.standardError.contains("\(file) is a file"))
        let notAStore = dir.file("notes")
        try FileManager.default.createDirectory(atPath: notAStore, withIntermediateDirectories: true)
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: notAStore + "/notes.txt"))
        let refused = try strata("demo", notAStore, "--force")
        #expect(refused.status == 64)
        #expect(refused.standardError.contains("isn't a Strata store"))
        #expect(FileManager.default.fileExists(atPath: notAStore + "/notes.txt"))
    }

    @Test("--help has examples")
    func help() throws {
        let result = try strata("help", "demo")
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("Examples:"))
        #expect(result.standardOutput.contains("--force"))
    }

    private func storeUUID(_ store: String) throws -> String {
        let info = try strata("info", store, "--format", "json")
        let object = try #require(try parseJSON(info.standardOutput) as? [String: Any])
        return try #require(object["storeUUID"] as? String)
    }
}
