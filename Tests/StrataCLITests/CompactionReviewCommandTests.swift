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
