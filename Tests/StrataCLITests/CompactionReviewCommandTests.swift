import Foundation
import StrataLog
import StrataTestSupport
import Testing

@Suite("Compaction review: strata compact --vacuum")
struct CompactionReviewCommandTests {
    @Test("--vacuum refuses while another process has the store open, and that process's later commits survive")
    func vacuumRefusesAStoreOpenElsewhere() throws {
        let store = try makeLeagueStore(extraTransactions: 10)
        let model = try leagueModel()
        let log = try EventLog(path: store.path, model: model)
        let vacuum = try strata("compact", store.path, "--vacuum")
        #expect(vacuum.status == 1, "\(vacuum.standardOutput)")
        #expect(vacuum.standardError.contains("is open in process \(ProcessInfo.processInfo.processIdentifier)"), "\(vacuum.standardError)")
        // The compaction itself ran (it may run beside other handles); the file was not replaced.
        var draft = TransactionDraft(author: "after")
        draft.insert("Team", values: ["name": str("Late")])
        try log.commit(draft)
        let head = try log.head
        let verify = try strata("verify", store.path)
        #expect(verify.status == 0, "\(verify.standardOutput)")
        #expect(verify.standardOutput.contains("checked \(head) events"), "\(verify.standardOutput)")
    }
}

extension CompactionReviewCommandTests {
    @Test("--vacuum that fails after the steps moved events says, on standard error, what the steps moved (events, segments, bytes) and that data.mdb was not vacuumed; the sizes are printed; exit 1")
    func vacuumFailingAfterStepsSaysWhatWasDone() throws {
        let store = try makeLeagueStore(extraTransactions: 10)
        // This process holding the store open makes the vacuum give up after the compaction.
        let log = try EventLog(path: store.path, model: try leagueModel())
        let result = try strata("compact", store.path, "--vacuum", "--events-per-step", "5")
        #expect(result.status == 1, "\(result.standardOutput)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        let moved = try #require(lines.first { $0.hasPrefix("moved events ") }, "\(result.standardOutput)")
        // "moved events A…B (N events): R bytes raw → C bytes in segments (ratio X)"
        let range = try #require(moved.dropFirst("moved events ".count).split(separator: ":").first.map(String.init))
        let bytes = try #require(moved.split(separator: ": ", maxSplits: 1).last.map { $0.replacingOccurrences(of: " in segments", with: "") })
        let segments = try log.segments()
        #expect(segments.count >= 2, "\(result.standardOutput)")
        #expect(lines.contains { $0.hasPrefix("before: data.mdb ") }, "\(result.standardOutput)")
        #expect(lines.contains { $0.hasPrefix("after:  data.mdb ") }, "\(result.standardOutput)")
        #expect(!lines.contains { $0.hasPrefix("vacuum: ") }, "\(result.standardOutput)")
        let error = result.standardError
        #expect(error.contains("strata: the vacuum failed: "), "\(error)")
        #expect(error.contains("is open in process \(ProcessInfo.processInfo.processIdentifier)"), "\(error)")
        #expect(error.contains("The compaction before it completed and stays done: events \(range) were moved into \(segments.count) segments"), "\(error)")
        #expect(error.contains(bytes.components(separatedBy: " (ratio").first ?? bytes), "\(error)")
        #expect(error.contains("data.mdb was not vacuumed: it keeps its size"), "\(error)")
        // The compaction stays: verify clean, and events read back.
        let verify = try strata("verify", store.path)
        #expect(verify.status == 0, "\(verify.standardOutput)")
    }
}
