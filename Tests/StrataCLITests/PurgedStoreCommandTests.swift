import Foundation
import StrataLog
import StrataTestSupport
import Testing

/// A league store (7 + 30 transactions, checkpoints every 25) compacted through 15 and then
/// purged through 20 by "ops": the log starts at 21, the marker is transaction 38.
func makePurgedLeagueStore() throws -> LeagueStore {
    let store = try makeLeagueStore(extraTransactions: 30)
    let log = try EventLog(openingExistingAt: store.path, readOnly: false)
    try log.compact(CompactionRequest(before: 16))
    try log.purge(through: 20, author: "ops", contextName: "retention")
    return store
}

@Suite("strata commands on a purged store")
struct PurgedStoreCommandTests {
    @Test("verify and info: the base snapshot and the purge")
    func verifyAndInfo() throws {
        let store = try makePurgedLeagueStore()
        let verify = try strata("verify", store.path)
        #expect(verify.status == 0, "\(verify.standardOutput)\(verify.standardError)")
        #expect(verify.standardOutput.contains("checked 18 events in 0 segments and the raw log"))
        #expect(verify.standardOutput.contains("no problems"))

        let text = try strata("info", store.path)
        #expect(text.status == 0, "\(text.standardError)")
        #expect(text.standardOutput.contains("head         38"))
        #expect(text.standardOutput.contains("events       18 (0 in segments, 18 raw)"))
        #expect(text.standardOutput.contains("purged       1…20 (the state as of 20 is kept as the base snapshot); #38 by ops at "))
        let json = try #require(try parseJSON(try strata("info", store.path, "--format", "json").standardOutput) as? [String: Any])
        #expect(json["purgedThrough"] as? Int == 20)
        #expect(json["compactedThrough"] as? Int == 20)
        #expect((json["checkpoints"] as? [Int])?.first == 20)
    }

    @Test("log starts after the point, says so, and shows the purge marker")
    func log() throws {
        let store = try makePurgedLeagueStore()
        let all = try strata("log", store.path, "--format", "json")
        #expect(all.status == 0, "\(all.standardError)")
        #expect(all.standardError.contains("note: history through 20 was purged; the log starts at 21"))
        #expect(sequences(try logTransactions(all.standardOutput)) == Array(21...38))
        let from = try strata("log", store.path, "--from", "5", "--to", "22", "--format", "json")
        #expect(sequences(try logTransactions(from.standardOutput)) == [21, 22])
        let marker = try strata("log", store.path, "--kind", "purge")
        #expect(marker.status == 0)
        #expect(marker.standardOutput.hasPrefix("#38  "))
        #expect(marker.standardOutput.contains("  purge through 20  author ops  context retention  pid "))
        let object = try strata("log", store.path, "--object", store.uri("Player", 3), "--format", "json")
        #expect(sequences(try logTransactions(object.standardOutput)).allSatisfy { $0 > 20 })
    }

    @Test("replay: summary, the base, blame, diff, step and --into from the base; before it, a clear error")
    func replay() throws {
        let store = try makePurgedLeagueStore()
        let summary = try strata("replay", store.path)
        #expect(summary.status == 0, "\(summary.standardError)")
        #expect(summary.standardOutput.hasPrefix("state as of sequence 38 ("))
        let base = try strata("replay", store.path, "--to", "20")
        #expect(base.status == 0, "\(base.standardError)")
        #expect(base.standardOutput.hasPrefix("state as of sequence 20\n"))
        let before = try strata("replay", store.path, "--to", "10")
        #expect(before.status == 1)
        #expect(before.standardError.contains("sequence 10 was purged: history through 20 was removed"))

        let blame = try strata("replay", store.path, "--object", store.uri("Player", 3))
        #expect(blame.status == 0, "\(blame.standardError)")
        #expect(blame.standardOutput.contains("(history through 20 was purged; values as of 20 are the starting point)"))
        #expect(blame.standardOutput.contains("    name    \"Kim\""), "values as of the base are shown")

        let diff = try strata("replay", store.path, "--diff", "20..30")
        #expect(diff.status == 0, "\(diff.standardError)")
        #expect(diff.standardOutput.hasPrefix("changes from sequence 20 to 30"))
        #expect(try strata("replay", store.path, "--diff", "5..30").status == 1)

        let step = try strata("replay", store.path, "--step", "--to", "22", input: "\n\n")
        #expect(step.status == 0, "\(step.standardError)")
        #expect(step.standardOutput.hasPrefix("#21  "))
        #expect(step.standardOutput.contains("-- end (sequence 22) --"))

        let into = store.directory.file("copy.strata")
        let copy = try strata("replay", store.path, "--to", "30", "--into", into)
        #expect(copy.status == 0, "\(copy.standardError)")
        #expect(copy.standardOutput.contains("head 30"))
        let verifyCopy = try strata("verify", into)
        #expect(verifyCopy.status == 0, "\(verifyCopy.standardOutput)")
    }

    @Test("export as of the base or later; compact after the point")
    func exportAndCompact() throws {
        let store = try makePurgedLeagueStore()
        let atBase = try strata("export", store.path, "--at", "20", "--format", "ndjson")
        #expect(atBase.status == 0, "\(atBase.standardError)")
        #expect(atBase.standardOutput.contains("\"uri\":\"\(store.uri("Player", 3))\""))
        let purged = try strata("export", store.path, "--at", "5")
        #expect(purged.status == 1)
        #expect(purged.standardError.contains("was purged"))
        let compact = try strata("compact", store.path, "--before", "30")
        #expect(compact.status == 0, "\(compact.standardError)")
        #expect(compact.standardOutput.contains("moved events 21…29 (9 events)"))
        #expect(try strata("verify", store.path).status == 0)
    }

    @Test("query --at the base or later, as export; before it, exit 1 naming the purge point")
    func queryAt() throws {
        let store = try makePurgedLeagueStore()
        let atBase = try strata("query", store.path, "Player", "--at", "20", "--format", "ndjson")
        #expect(atBase.status == 0, "\(atBase.standardError)")
        let exported = try strata("export", store.path, "--at", "20", "--format", "ndjson", "--entity", "Player")
        let queried = atBase.standardOutput.split(separator: "\n").count
        #expect(queried > 0 && queried == exported.standardOutput.split(separator: "\n").filter { $0.contains("\"entity\":\"Player\"") }.count)
        let purged = try strata("query", store.path, "Player", "--at", "5")
        #expect(purged.status == 1)
        #expect(purged.standardError == "strata: --at 5: the store's history through 20 was purged; its earliest state is 20\n", "\(purged.standardError)")
    }
}
