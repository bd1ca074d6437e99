import Foundation
import StrataTestSupport
import Testing

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
