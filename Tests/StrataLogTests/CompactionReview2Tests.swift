import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Synchronization
import Testing

/// What a hook saw: whether it ran, and the errors its body threw.
private final class HookRun: Sendable {
    let fired = Mutex(false)
    let errors = Mutex<[String]>([])
    var thrown: [String] { errors.withLock { $0 } }
}

/// Runs `body` once, when a compaction of `log`'s store has written its segment and is about
/// to commit it (`EventLog.setCompactionWillCommitHook`): another writer's step that lands in
/// between.
private func onceBeforeCompactionCommits(_ log: EventLog, _ body: @escaping @Sendable () throws -> Void) -> HookRun {
    let path = log.path
    let run = HookRun()
    EventLog.setCompactionWillCommitHook { storePath in
        guard storePath == path, run.fired.withLock({ done in
            defer { done = true }
            return !done
        }) else { return }
        do { try body() } catch { run.errors.withLock { $0.append("\(error)") } }
    }
    return run
}

@Suite("Compaction review 2: horizons held in the commit, purges of dictionary segments, swapped files", .serialized)
struct CompactionReview2Tests {
    @Test("a consumer registered while a compaction writes its segment holds the horizon: nothing it hasn't processed moves")
    func consumerRegisteredMeanwhile() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 60)
        defer { EventLog.setCompactionWillCommitHook(nil) }
        let errors = onceBeforeCompactionCommits(log) { try log.registerConsumer("late-indexer", processedThrough: 10) }
        let report = try log.compact(CompactionRequest())
        #expect(errors.thrown.isEmpty)
        #expect(report.moved == 1...10, "events past the consumer's point moved: \(String(describing: report.moved))")
        #expect(report.limitedBy == .consumer(name: "late-indexer", processedThrough: 10))
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.compactedThrough == 10)
            #expect(try reader.segments().map(\.sequences) == [1...10])
        }
        #expect(try log.verify().isClean)
    }

    @Test("a consumer moved back while a compaction writes its segment holds the horizon")
    func consumerMovedBackMeanwhile() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 60)
        try log.registerConsumer("sync", processedThrough: 50)
        defer { EventLog.setCompactionWillCommitHook(nil) }
        let errors = onceBeforeCompactionCommits(log) { _ = try log.moveConsumer("sync", to: 20) }
        let report = try log.compact(CompactionRequest())
        #expect(errors.thrown.isEmpty)
        #expect(report.moved == 1...20)
        #expect(try log.read { try $0.compactedThrough } == 20)
    }

    @Test("an undo retention raised while a compaction writes its segment keeps the newest transactions raw")
    func retentionRaisedMeanwhile() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 60)
        defer { EventLog.setCompactionWillCommitHook(nil) }
        let errors = onceBeforeCompactionCommits(log) { try log.setUndoRetention(25) }
        let report = try log.compact(CompactionRequest())
        #expect(errors.thrown.isEmpty)
        #expect(report.moved == 1...35)
        #expect(report.limitedBy == .undoRetention(transactions: 25))
        #expect(try log.read { try $0.compactedThrough } == 35)
    }

    @Test("a compaction that another compaction overtook starts again from where that one stopped, instead of failing")
    func overtakenByAnotherCompaction() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 60)
        let before = try allEvents(log)
        defer { EventLog.setCompactionWillCommitHook(nil) }
        let errors = onceBeforeCompactionCommits(log) { try log.compact(CompactionRequest(before: 21)) }
        let report = try log.compact(CompactionRequest())
        #expect(errors.thrown.isEmpty)
        #expect(report.moved == 21...60)
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.segments().map(\.sequences) == [1...20, 21...60])
        }
        #expect(try allEvents(log) == before)
        #expect(try log.verify().isClean)
        // No temporary file is left behind by the attempt that was abandoned.
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.file("store/segments"))
        #expect(names.filter { $0.hasPrefix(".tmp-") }.isEmpty, "\(names)")
    }

    @Test("two processes compacting the same store at once: neither fails, every event stays readable, verify is clean")
    func twoProcessesCompacting() throws {
        let dir = try TemporaryDirectory("strata-compact-race")
        let store = dir.file("store")
        let rounds = Int(ProcessInfo.processInfo.environment["STRATA_COMPACTION_RACE_ROUNDS"] ?? "") ?? 60
        // The probe loops: commit 2 transactions, compact all but the newest two.
        let probe = try LogProbeProcess(["compact", store, "2"])
        guard let ready = probe.nextLine(), ready.hasPrefix("ready") else {
            probe.kill()
            Issue.record("the probe didn't start: \(probe.standardError)")
            return
        }
        var failures: [String] = []
        do {
            let log = try EventLog(openingExistingAt: store, readOnly: false)
            // Each round waits for the probe's next step (a commit or a compaction), so the
            // two processes' compactions interleave.
            for _ in 0..<rounds {
                guard probe.nextLine() != nil else { break }
                do {
                    try log.compact(CompactionRequest())
                } catch {
                    failures.append("\(error)")
                }
            }
        }
        let probeRan = probe.process.isRunning
        probe.kill()
        #expect(probeRan && probe.wasKilled, "the probe's compaction failed: \(probe.standardError)")
        #expect(failures.isEmpty, "\(failures)")
        let log = try EventLog(openingExistingAt: store, readOnly: true)
        let verification = try log.verify()
        #expect(verification.isClean, "\(verification.problems)")
        #expect(verification.eventsChecked == Int(try log.head))
    }
}
