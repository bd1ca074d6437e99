import Foundation
import StrataLog
import StrataTestSupport
import Testing

@Suite("strata replay")
struct ReplayCommandTests {
    @Test("summary: objects per entity as of a sequence")
    func summary() throws {
        let store = try makeLeagueStore()
        let json = try strata("replay", store.path, "--to", "1", "--format", "json")
        #expect(json.status == 0, "\(json.standardError)")
        let object = try #require(try parseJSON(json.standardOutput) as? [String: Any])
        #expect(object["sequence"] as? Int == 1)
        #expect(object["objects"] as? [String: Int] == ["Player": 0, "Sponsor": 1, "Team": 2])
        let text = try strata("replay", store.path)
        #expect(text.standardOutput.contains("state as of sequence 7"))
        #expect(text.standardOutput.contains("  Player   2"))
    }

    @Test("--object: every property's value after each change (blame)")
    func blame() throws {
        let store = try makeLeagueStore()
        let result = try strata("replay", store.path, "--object", store.uri("Player", 2))
        #expect(result.status == 0, "\(result.standardError)")
        let out = result.standardOutput
        #expect(out.contains("\(store.uri("Player", 2)) through sequence 7: 2 transactions"))
        #expect(out.contains("  * name    \"O'Toole\""))
        #expect(out.contains("  * age     24"))
        #expect(out.contains("    rating  nil"))
        #expect(out.contains("#7  "))
        #expect(out.contains("  (deleted)"))
        let early = try strata("replay", store.path, "--object", store.firstPlayerURI, "--to", "4")
        #expect(early.standardOutput.contains("through sequence 4: 2 transactions"))
        #expect(early.standardOutput.contains("  * age     32"))
    }

    @Test("--diff A..B: inserted, deleted and changed objects with each property")
    func diff() throws {
        let store = try makeLeagueStore()
        let result = try strata("replay", store.path, "--diff", "3..7")
        #expect(result.status == 0, "\(result.standardError)")
        let out = result.standardOutput
        #expect(out.contains("- \(store.uri("Player", 2))"))
        #expect(out.contains("~ \(store.uri("Player", 3))\n    active: nil → false\n    team: \(store.uri("Team", 2)) → \(store.uri("Team", 1))"))
        #expect(out.contains("~ \(store.uri("Team", 1))\n    lineup: [\(store.uri("Player", 2)), \(store.uri("Player", 1))] → [\(store.uri("Player", 1))]"))
        // Player/p1 changed and changed back: no difference.
        #expect(!out.contains("~ \(store.firstPlayerURI)"))
        #expect(out.contains("3 objects differ"))
    }

    @Test("--step through a pipe: Enter shows the next transaction, q quits, end of input stops")
    func step() throws {
        let store = try makeLeagueStore()
        let result = try strata("replay", store.path, "--step", "--from", "3", input: "\nq\n")
        #expect(result.status == 0, "\(result.standardError)")
        let out = result.standardOutput
        #expect(out.contains("#3  "))
        #expect(out.contains("#4  "))
        #expect(!out.contains("#5  "))
        #expect(out.contains("-- 3/7: Enter for the next transaction, q to quit --"))
        #expect(out.contains("  effect: 0 inserted, 1 updated, 0 deleted"))
        #expect(out.contains("stopped after sequence 4"))

        let eof = try strata("replay", store.path, "--step", input: "")
        #expect(eof.standardOutput.contains("#1  "))
        #expect(!eof.standardOutput.contains("#2  "))
        #expect(eof.standardOutput.contains("stopped after sequence 1"))

        let all = try strata("replay", store.path, "--step", "--from", "6", input: "\n\n\n")
        #expect(all.standardOutput.contains("#7  "))
        #expect(all.standardOutput.contains("-- end (sequence 7) --"))
    }

    @Test("--into: a new, independent store with the same history through the sequence")
    func into() throws {
        let store = try makeLeagueStore()
        let dir = try TemporaryDirectory()
        let copy = dir.file("copy.strata")
        let result = try strata("replay", store.path, "--to", "5", "--into", copy)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("head 5"))
        let original = try EventLog(openingExistingAt: store.path)
        let replayed = try EventLog(openingExistingAt: copy)
        #expect(replayed.storeUUID != original.storeUUID)
        #expect(try replayed.head == 5)
        let originalEvents = try original.read { reader in try (1...5).map { try reader.event($0) } }
        let replayedEvents = try replayed.read { reader in try (1...5).map { try reader.event($0) } }
        #expect(originalEvents == replayedEvents)
        #expect(try replayed.read { try $0.currentState() } == (try original.read { try $0.state(asOf: 5) }))
        #expect(try replayed.verify().isClean)
        // It is writable and continues with the next IDs.
        let writable = try EventLog(openingExistingAt: copy, readOnly: false)
        var draft = TransactionDraft()
        let player = draft.insert("Player", values: ["name": str("New")])
        let commit = try writable.commit(draft)
        #expect(commit.sequence == 6)
        #expect(commit.permanentID(for: player)?.primaryKey == 4)

        let existing = try strata("replay", store.path, "--into", copy)
        #expect(existing.status == 64)
        #expect(existing.standardError.contains(copy))
    }
}

@Suite("strata compact")
struct CompactCommandTests {
    @Test("--dry-run reports and moves nothing")
    func dryRun() throws {
        let store = try makeLeagueStore(extraTransactions: 40)
        let logBefore = try strata("log", store.path, "--format", "json").standardOutput
        let result = try strata("compact", store.path, "--dry-run", "--before", "30")
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("would move events 1…29 (29 events)"))
        #expect(result.standardOutput.contains("horizon 29, limited by the requested horizon"))
        let segments = (store.path as NSString).appendingPathComponent("segments")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: segments)) ?? []).isEmpty)
        let info = try #require(try parseJSON(try strata("info", store.path, "--format", "json").standardOutput) as? [String: Any])
        #expect(info["compactedThrough"] as? Int == 0)
        #expect(try strata("log", store.path, "--format", "json").standardOutput == logBefore)
    }

    @Test("compaction through the CLI leaves log and export output identical; sizes and progress printed")
    func transparent() throws {
        let store = try makeLeagueStore(extraTransactions: 40)
        let logBefore = try strata("log", store.path, "--format", "json").standardOutput
        let textBefore = try strata("log", store.path).standardOutput
        let exportBefore = try strata("export", store.path).standardOutput
        let asOfBefore = try strata("export", store.path, "--at", "20", "--format", "ndjson").standardOutput

        let first = try strata("compact", store.path, "--before", "2026-01-01T00:20:30Z", "--level", "9")
        #expect(first.status == 0, "\(first.standardError)")
        #expect(first.standardOutput.contains("moved events 1…20 (20 events)"))
        #expect(first.standardOutput.contains("before: data.mdb"))
        #expect(first.standardOutput.contains("after:  data.mdb"))
        #expect(first.standardError.contains("compacted 20/20 events (100%)"))

        let second = try strata("compact", store.path, "--dictionary", "--vacuum")
        #expect(second.status == 0, "\(second.standardError)")
        #expect(second.standardOutput.contains("moved events 21…47"))
        #expect(second.standardOutput.contains("vacuum: data.mdb"))

        #expect(try strata("log", store.path, "--format", "json").standardOutput == logBefore)
        #expect(try strata("log", store.path).standardOutput == textBefore)
        #expect(try strata("export", store.path).standardOutput == exportBefore)
        #expect(try strata("export", store.path, "--at", "20", "--format", "ndjson").standardOutput == asOfBefore)
        #expect(try strata("verify", store.path).status == 0)

        let nothing = try strata("compact", store.path)
        #expect(nothing.status == 0)
        #expect(nothing.standardOutput.contains("nothing to move"))

        // info lists each segment with its frame count, "1 frame" in the singular (the
        // segments here are small: one frame each).
        let info = try strata("info", store.path).standardOutput
        #expect(info.contains(", 1 frame") && !info.contains(" 1 frames"), "\(info)")
    }
}
