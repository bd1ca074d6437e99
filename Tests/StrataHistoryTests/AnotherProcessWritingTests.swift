import Foundation
import Strata
import StrataTestSupport
import Testing

/// Reading a store while another process writes it: `verify` while it commits (one
/// snapshot, so the other process's commits are never reported as differences), and a
/// snapshot older than its purge (the segment files the purge dropped are set aside, not
/// deleted, while a reader in any process may need them).
@Suite("Event log: reading while another process writes or purges")
struct AnotherProcessWritingTests {
    @Test("verify runs while another process commits (STRATA_FEED_TRANSACTIONS): every report is clean")
    func verifyWhileAnotherProcessWrites() async throws {
        let dir = try TemporaryDirectory()
        let (log, path) = try peopleStore(dir)
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

    /// A people store in `dir` (the probe's model), kept open by its log; and its path.
    func peopleStore(_ dir: TemporaryDirectory) throws -> (log: EventLog, path: String) {
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let log = try #require(coordinator.persistentStores.first).log
        return (log, dir.url.appendingPathComponent("store").path)
    }

    /// Runs the probe's `purge` of `store` through `through`; its output.
    func purgeInAnotherProcess(_ store: String, through: UInt64) throws -> (status: Int32, output: String) {
        let process = ChildProcess()
        process.executableURL = BuildProducts.executable("StrataHistoryProbe")
        process.arguments = ["purge", store, String(through)]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.standardError
        try process.run()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    /// The files a purge set aside in `directory`.
    func setAside(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasPrefix(".purged-") }
    }

    @Test("a snapshot older than another process's purge still reads every event it saw; the set-aside files go once it ends")
    func purgeInAnotherProcessKeepsOlderSnapshotWhole() async throws {
        let dir = try TemporaryDirectory()
        let (log, path) = try peopleStore(dir)
        let (writer, _) = try startWriter(store: path, count: 60, author: "probe")
        writer.waitUntilExit()
        #expect(writer.terminationStatus == 0)
        try log.compact(CompactionRequest(before: 21))  // 1…20
        try log.compact(CompactionRequest(before: 41))  // 21…40
        let expected = try log.read { reader in try (1...60).map { try reader.event(UInt64($0)) } }
        try log.read { (reader: borrowing LogReader) throws in
            let purge = try purgeInAnotherProcess(path, through: 30)
            #expect(purge.status == 0)
            #expect(purge.output.contains("purged 30"))
            // Both segments were dropped (1…20 whole, 21…40 rewritten as 31…40) and set
            // aside, because this process's snapshot is older than the purge.
            #expect(setAside(path + "/segments").count == 2, "\(setAside(path + "/segments"))")
            #expect(try reader.purgedThrough == 0, "the snapshot is from before the purge")
            #expect(try (1...60).map { try reader.event(UInt64($0)) } == expected)
        }
        // A newer snapshot sees the purge; the next sweep (at compaction) deletes the files.
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.purgedThrough == 30)
            #expect(throws: LogError.self) { try reader.event(10) }
            #expect(try (31...60).map { try reader.event(UInt64($0)) } == Array(expected[30...]))
        }
        try log.compact(CompactionRequest(before: 51))
        #expect(setAside(path + "/segments").isEmpty)
        #expect(try log.verify().problems.isEmpty)
    }
}
