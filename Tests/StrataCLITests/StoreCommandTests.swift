import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

@Suite("strata: store commands — help, errors, read-only")
struct StoreCommandConventionTests {
    static let commands = ["info", "log", "replay", "export", "compact", "verify", "model"]

    @Test("every store command's help has examples", arguments: commands)
    func helpHasExamples(_ command: String) throws {
        let result = try strata("help", command)
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("Examples:"))
    }

    @Test("a missing store: exit 1, `no Strata store at PATH` on stderr", arguments: commands)
    func missingStore(_ command: String) throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("nothing-here")
        let result = try strata(command, path)
        #expect(result.status == 1)
        #expect(result.standardError.contains("no Strata store at \(path)"), "\(result.standardError)")
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("bad arguments are bad usage: exit 64, naming the argument")
    func badUsage() throws {
        let store = try makeLeagueStore()
        let csv = try strata("export", store.path, "--format", "csv")
        #expect(csv.status == 64)
        #expect(csv.standardError.contains("--output"))
        let level = try strata("compact", store.path, "--level", "40")
        #expect(level.status == 64)
        #expect(level.standardError.contains("--level"))
        let diff = try strata("replay", store.path, "--diff", "5..3")
        #expect(diff.status == 64)
        #expect(diff.standardError.contains("5..3"))
        let uri = try strata("log", store.path, "--object", "not-a-uri")
        #expect(uri.status == 64)
        #expect(uri.standardError.contains("not-a-uri"))
        let modes = try strata("replay", store.path, "--step", "--diff", "1..2")
        #expect(modes.status == 64)
        let format = try strata("log", store.path, "--format", "xml")
        #expect(format.status == 64)
        #expect(format.standardError.contains("xml"))
    }

    @Test("a sequence past the head: exit 1, `sequence 900 is past the head (7)`")
    func pastHead() throws {
        let store = try makeLeagueStore()
        for arguments in [["log", store.path, "--to", "900"], ["replay", store.path, "--to", "900"],
                          ["export", store.path, "--at", "900"], ["replay", store.path, "--diff", "1..900"]] {
            let result = try runProcess(BuildProducts.executable("strata"), arguments)
            #expect(result.status == 1, "\(arguments)")
            #expect(result.standardError.contains("sequence 900 is past the head (7)"), "\(arguments): \(result.standardError)")
        }
    }

    @Test("a URI of another store: exit 1, `not a URI of this store`")
    func foreignURI() throws {
        let store = try makeLeagueStore()
        let foreign = "x-strata://\(UUID().uuidString)/Player/p1"
        for command in ["log", "replay"] {
            let result = try strata(command, store.path, "--object", foreign)
            #expect(result.status == 1)
            #expect(result.standardError.contains("not a URI of this store"), "\(result.standardError)")
        }
    }

    @Test("reading commands never write: every file's bytes and mtime are unchanged")
    func readOnly() throws {
        let store = try makeLeagueStore()
        // Compact part of it so segments are read too.
        #expect(try strata("compact", store.path, "--before", "4").status == 0)
        let before = try snapshotFiles(store.path)
        let out = try TemporaryDirectory()
        let runs: [[String]] = [
            ["info", store.path], ["info", store.path, "--format", "json"], ["log", store.path],
            ["log", store.path, "--format", "json"], ["replay", store.path, "--to", "3"],
            ["replay", store.path, "--object", store.firstPlayerURI], ["replay", store.path, "--diff", "1..7"],
            ["export", store.path], ["export", store.path, "--at", "2", "--format", "sql"],
            ["export", store.path, "--format", "csv", "--output", out.file("csv")],
            ["model", store.path], ["model", store.path, "--dot"], ["verify", store.path],
            ["replay", store.path, "--to", "5", "--into", out.file("copy")],
        ]
        for arguments in runs {
            let result = try runProcess(BuildProducts.executable("strata"), arguments)
            #expect(result.status == 0, "\(arguments): \(result.standardError)")
        }
        let after = try snapshotFiles(store.path)
        #expect(Set(before.keys) == Set(after.keys))
        for (name, (bytes, mtime)) in before {
            #expect(after[name]?.0 == bytes, "\(name) changed")
            #expect(after[name]?.1 == mtime, "\(name)'s mtime changed")
        }
    }

    @Test("reads work while another handle holds the store open for writing")
    func readsBesideAWriter() throws {
        let store = try makeLeagueStore()
        let writer = try EventLog(openingExistingAt: store.path, readOnly: false)
        var draft = TransactionDraft(author: "live")
        _ = draft.insert("Sponsor", values: ["name": str("Live Ltd")])
        try writer.commit(draft)
        let info = try strata("info", store.path, "--format", "json")
        #expect(info.status == 0)
        let object = try #require(try parseJSON(info.standardOutput) as? [String: Any])
        #expect(object["head"] as? Int == 8)
    }
}

@Suite("strata info")
struct InfoCommandTests {
    @Test("text and JSON: identity, head, counts, segments, files")
    func info() throws {
        let store = try makeLeagueStore()
        let text = try strata("info", store.path)
        #expect(text.status == 0)
        #expect(text.standardOutput.contains(store.storeUUID.uuidString))
        #expect(text.standardOutput.contains("head         7"))
        #expect(text.standardOutput.contains("segments     none"))

        #expect(try strata("compact", store.path, "--before", "5").status == 0)
        let json = try strata("info", store.path, "--format", "json")
        #expect(json.status == 0)
        let object = try #require(try parseJSON(json.standardOutput) as? [String: Any])
        #expect(object["storeUUID"] as? String == store.storeUUID.uuidString)
        #expect(object["head"] as? Int == 7)
        #expect(object["compactedThrough"] as? Int == 4)
        #expect(object["modelVersions"] as? [Int] == [1])
        #expect(object["objects"] as? [String: Int] == ["Player": 2, "Team": 2, "Sponsor": 1])
        let segments = try #require(object["segments"] as? [[String: Any]])
        #expect(segments.count == 1)
        #expect(segments.first?["first"] as? Int == 1)
        #expect(segments.first?["last"] as? Int == 4)
        #expect((object["files"] as? [String: Int])?["data.mdb"] ?? 0 > 0)
    }
}

@Suite("strata verify")
struct VerifyCommandTests {
    @Test("a sound store: exit 0, no problems")
    func clean() throws {
        let store = try makeLeagueStore(extraTransactions: 20)
        #expect(try strata("compact", store.path, "--before", "10").status == 0)
        let result = try strata("verify", store.path)
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardOutput.contains("checked 27 events"))
        #expect(result.standardOutput.contains("no problems"))
    }

    @Test("a flipped byte in a segment: exit 1, the problem names the segment")
    func corruptSegment() throws {
        let store = try makeLeagueStore(extraTransactions: 20)
        #expect(try strata("compact", store.path, "--before", "20").status == 0)
        let segments = (store.path as NSString).appendingPathComponent("segments")
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: segments).first { $0.hasSuffix(".zst") })
        let file = (segments as NSString).appendingPathComponent(name)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        bytes[bytes.count / 2] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: file))

        let result = try strata("verify", store.path)
        #expect(result.status == 1)
        let problems = result.standardOutput.split(separator: "\n").filter { $0.hasPrefix("segment:") }
        #expect(!problems.isEmpty, "\(result.standardOutput)")
        #expect(problems.allSatisfy { $0.contains(name) })
        #expect(result.standardOutput.contains("problem"))
    }
}

@Suite("strata model")
struct ModelCommandTests {
    @Test("text, JSON and a dot diagram that Graphviz accepts")
    func formats() throws {
        let store = try makeLeagueStore()
        let text = try strata("model", store.path)
        #expect(text.status == 0)
        #expect(text.standardOutput.contains("entity Player"))
        #expect(text.standardOutput.contains("relationship  team → Team  (0..1, to-one, inverse players, delete rule nullify)"))
        #expect(text.standardOutput.contains("relationship  lineup → Player  (0..*, ordered to-many"))

        let json = try strata("model", store.path, "--json")
        #expect(json.status == 0)
        let model = try ManagedObjectModel(jsonData: Data(json.standardOutput.utf8))
        #expect(model == (try leagueModel()))

        let dot = try strata("model", store.path, "--dot", "--version", "1")
        #expect(dot.status == 0)
        #expect(dot.standardOutput.hasPrefix("digraph model {"))
        if toolIsInstalled("dot") {
            let dir = try TemporaryDirectory()
            let file = dir.file("model.dot")
            try dot.standardOutput.write(toFile: file, atomically: true, encoding: .utf8)
            let svg = try runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["dot", "-Tsvg", file])
            #expect(svg.status == 0, "\(svg.standardError)")
            #expect(svg.standardOutput.contains("<svg"))
            #expect(svg.standardOutput.contains("Player"))
        }
    }

    @Test("an unknown model version: exit 1 naming the versions there are")
    func unknownVersion() throws {
        let store = try makeLeagueStore()
        let result = try strata("model", store.path, "--version", "2")
        #expect(result.status == 1)
        #expect(result.standardError.contains("no model version 2 (versions: 1)"))
    }
}
