import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// Session 34 (helper 5): empty arguments, a store path that isn't a store's directory, a
/// `data.mdb` that isn't a file: each is named with what is wrong with it.
@Suite("strata with empty or misplaced paths")
struct EmptyArgumentCommandTests {
    @Test(
        "an empty store path is bad usage: exit 64, `the store path is empty` (before: exit 1, `no Strata store at ` naming nothing)",
        arguments: [["info"], ["log"], ["replay"], ["export"], ["verify"], ["model"], ["compact"], ["revert", "1"], ["query", "Team"], ["migrate", "model.json"]])
    func emptyStore(_ command: [String]) throws {
        let arguments = [command[0], ""] + command.dropFirst()
        let result = try runProcess(BuildProducts.executable("strata"), arguments)
        #expect(result.status == 64, "\(arguments): \(result.standardError)")
        #expect(result.standardError.hasPrefix("Error: the store path is empty: give the store's directory"), "\(arguments): \(result.standardError)")
        #expect(!result.standardError.contains("no Strata store at \n"), "\(result.standardError)")
    }

    @Test(
        "an empty value of an argument or option naming a thing is exit 64 naming it (before: `no entity  (…)`, `cannot create : …`, `no Strata store at  holds …`, a FAILED doctor check)"
    )
    func emptyValues() throws {
        let store = try makeLeagueStore()
        let cases: [([String], String)] = [
            (["query", store.path, ""], "Error: ENTITY is empty: give the name of an entity"),
            (["migrate", store.path, ""], "Error: MODEL_FILE is empty: give the path of a model file"),
            (["log", store.path, "--entity", ""], "Error: --entity is empty: give the name of an entity"),
            (["export", store.path, "--entity", ""], "Error: --entity is empty: give the name of an entity"),
            (["log", store.path, "--property", ""], "Error: --property is empty: give the name of a property"),
            (["log", store.path, "--object", ""], "Error: --object is empty: give an object's URI (x-strata://STORE-UUID/Entity/pN)"),
            (["replay", store.path, "--object", ""], "Error: --object is empty: give an object's URI (x-strata://STORE-UUID/Entity/pN)"),
            (["export", store.path, "--output", ""], "Error: --output is empty: give the path of a file (of a directory, for csv)"),
            (["replay", store.path, "--into", ""], "Error: --into is empty: give the path of a directory"),
            (["migrate", store.path, "model.json", "--into", ""], "Error: --into is empty: give the path of a directory"),
            (["doctor", "--directory", ""], "Error: --directory is empty: give the path of a directory"),
            // Session 35 (helper 5): names of an author or a context (before: `log` printed
            // nothing, or the transactions with an empty author, exit 0; `revert` recorded
            // its transaction with an empty author).
            (["log", store.path, "--author", ""], "Error: --author is empty: give an author's name (transactions recorded with an empty author: --where \"author == ''\")"),
            (["log", store.path, "--context", ""], "Error: --context is empty: give a context's name (transactions recorded with an empty context name: --where \"contextName == ''\")"),
            (["revert", store.path, "4", "--author", ""], "Error: --author is empty: give the author to record on the revert transaction"),
            (["revert", store.path, "4", "--author", "", "--dry-run"], "Error: --author is empty: give the author to record on the revert transaction"),
        ]
        for (arguments, message) in cases {
            let result = try runProcess(BuildProducts.executable("strata"), arguments)
            #expect(result.status == 64, "\(arguments): \(result.standardError)")
            #expect(result.standardError.hasPrefix(message), "\(arguments): \(result.standardError)")
            #expect(result.standardOutput.isEmpty, "\(arguments): \(result.standardOutput)")
        }
    }

    @Test(
        "transactions recorded with an empty author or context name are found with --where, as the refusal of --author '' and --context '' says"
    )
    func emptyAuthorThroughWhere() throws {
        let store = try makeLeagueStore()
        do {
            let log = try EventLog(openingExistingAt: store.path, readOnly: false)
            var draft = TransactionDraft(author: "", contextName: "")
            draft.update(.stored(StoredObjectID(entity: "Player", primaryKey: 1)), values: ["age": .attribute(.int32(40))])
            try log.commit(draft)
        }
        let empty = store.head + 1
        for predicate in ["author == ''", "contextName == ''"] {
            let result = try strata("log", store.path, "--where", predicate, "--format", "ndjson")
            #expect(result.status == 0, "\(predicate): \(result.standardError)")
            let lines = result.standardOutput.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].contains("\"sequence\":\(empty),"), "\(predicate): \(result.standardOutput)")
        }
    }

    @Test(
        "a store path that is a file, and a store whose data.mdb is a directory: exit 1 naming the path and what is wrong (before: `no Strata store at PATH` alone, and LMDB's `mdb_env_open: Is a directory (code 21)`)",
        arguments: ["info", "log", "verify", "compact", "model"])
    func notAStoreDirectory(_ command: String) throws {
        let directory = try TemporaryDirectory()
        let file = directory.file("notes.txt")
        try "hello".write(toFile: file, atomically: true, encoding: .utf8)
        let onFile = try strata(command, file)
        #expect(onFile.status == 1)
        #expect(onFile.standardError == "strata: no Strata store at \(file) (it is a file, not a store's directory)\n", "\(onFile.standardError)")

        let store = directory.file("Broken.strata")
        try FileManager.default.createDirectory(atPath: (store as NSString).appendingPathComponent("data.mdb"), withIntermediateDirectories: true)
        let onDirectory = try strata(command, store)
        #expect(onDirectory.status == 1)
        #expect(
            onDirectory.standardError == "strata: no Strata store at \(store) (\(store)/data.mdb is a directory; a store's data.mdb is LMDB's data file)\n",
            "\(onDirectory.standardError)")
        // Nothing was made in it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: store) == ["data.mdb"])
    }

    @Test("a store path with a trailing slash is the store: info, log and compact work (exit 0)")
    func trailingSlash() throws {
        let store = try makeLeagueStore()
        for arguments in [["info", store.path + "/"], ["log", store.path + "/", "--last", "1"], ["compact", store.path + "/", "--dry-run"]] {
            let result = try runProcess(BuildProducts.executable("strata"), arguments)
            #expect(result.status == 0, "\(arguments): \(result.standardError)")
        }
    }
}
