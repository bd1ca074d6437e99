import Foundation
import StrataTestSupport
import Testing

/// Session 33 (helper 5): commands given bad input say what was wrong, exit non-zero, and
/// never trap or print an error object's dump.
@Suite("strata with bad input")
struct BadInputCommandTests {
    @Test("log --last with the largest count shows every transaction, exit 0 (before: twice the count overflowed, a trap)")
    func hugeLast() throws {
        let store = try makeLeagueStore()
        let result = try strata("log", store.path, "--last", String(Int.max), "--format", "ndjson")
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.split(separator: "\n").count == Int(store.head), "\(result.standardOutput)")
        let every = try strata("log", store.path, "--format", "ndjson")
        #expect(result.standardOutput == every.standardOutput)
    }

    @Test(
        "export --format csv to a directory that can't be made, and demo into one: exit 1 naming the directory and the system's reason (before: Foundation's error dump, `Error Domain=NSCocoaErrorDomain Code=…`)"
    )
    func directoryThatCantBeMade() throws {
        let store = try makeLeagueStore()
        // Under a regular file: no directory can be made there (whoever runs the tests).
        let file = store.directory.file("plain.txt")
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        let before = try snapshotFiles(store.path)

        let csv = try strata("export", store.path, "--format", "csv", "--output", "\(file)/csv")
        #expect(csv.status == 1)
        #expect(csv.standardError == "strata: cannot create the directory \(file)/csv for the csv files: Not a directory\n", "\(csv.standardError)")
        #expect(!csv.standardError.contains("Domain="))

        let demo = try strata("demo", "\(file)/demo")
        #expect(demo.status == 1)
        #expect(demo.standardError == "strata: cannot create the demo's directory \(file)/demo: Not a directory\n", "\(demo.standardError)")

        // The store is untouched.
        let after = try snapshotFiles(store.path)
        #expect(Set(after.keys) == Set(before.keys))
        for (name, (bytes, _)) in before { #expect(after[name]?.0 == bytes, "\(name) changed") }
    }
}
