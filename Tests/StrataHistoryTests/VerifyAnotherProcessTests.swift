import Foundation
import Strata
import StrataTestSupport
import Testing

/// `verify` while another process commits to the store: one snapshot, so the other
/// process's commits are never reported as differences.
@Suite("Event log: verify while another process writes")
struct VerifyAnotherProcessTests {
    @Test("verify runs while another process commits (STRATA_FEED_TRANSACTIONS): every report is clean")
    func verifyWhileAnotherProcessWrites() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let log = try #require(coordinator.persistentStores.first).log
        let path = dir.url.appendingPathComponent("store").path
        let count = max(feedTransactionCount, 300)
        let (writer, output) = try startWriter(store: path, count: count, author: "probe")
        var reports = 0
        var overlapped = 0
        while writer.isRunning || reports < 2 {
            let startHead = try log.head
            let report = try log.verify()
            reports += 1
            if try log.head != startHead { overlapped += 1 }
            #expect(report.problems.isEmpty, "verify \(reports) (head \(startHead)): \(report.problems.prefix(5))")
            if !report.problems.isEmpty { break }
        }
        writer.waitUntilExit()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(writer.terminationStatus == 0)
        #expect(printed.contains("done \(count)"))
        #expect(overlapped >= 1, "some verify ran while the other process committed (\(reports) runs)")
        let final = try log.verify()
        #expect(final.problems.isEmpty)
        #expect(final.eventsChecked == count)
    }
}
