import Foundation
import StrataLog
import Synchronization
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// `verify` on a store another thread is writing to — committing, compacting, purging —
/// checks one consistent snapshot: what it reports are the store's problems, never the
/// writer's progress between its steps.
@Suite("Event log: verify while another thread writes")
struct VerifyWhileWritingTests {
    @Test("verify runs while commits, compactions and a purge go on: every report is clean")
    func verifyWhileWriting() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel()) {
            $0.checkpointInterval = 10
            $0.maximumCheckpoints = 4
        }
        try commitWorkload(log, 1...60)
        let rounds = max(100, Int(ProcessInfo.processInfo.environment["STRATA_VERIFY_WRITER_ROUNDS"] ?? "") ?? 150)
        let failure = Mutex<String?>(nil)
        let done = Mutex(false)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            defer {
                done.withLock { $0 = true }
                finished.signal()
            }
            do {
                for round in 0..<rounds {
                    try commitWorkload(log, (61 + round * 2)...(62 + round * 2))
                    if round % 25 == 10 {
                        var request = CompactionRequest(before: try log.head - 5)
                        request.eventsPerFrame = 8
                        try log.compact(request)
                    }
                    if round == 80 { try log.purge(through: 40, author: "retention") }
                }
            } catch {
                failure.withLock { $0 = "the writer failed: \(error)" }
            }
        }.start()
        var reports = 0
        var overlapped = 0
        while !done.withLock({ $0 }) || reports < 2 {
            let startHead = try log.head
            let report = try log.verify()
            reports += 1
            // The writer committed while this verify ran.
            if try log.head != startHead { overlapped += 1 }
            #expect(report.problems.isEmpty, "verify \(reports): \(report.problems.prefix(5))")
            if !report.problems.isEmpty { break }
        }
        finished.wait()
        #expect(failure.withLock { $0 } == nil, "\(failure.withLock { $0 } ?? "")")
        #expect(reports >= 2)
        #expect(overlapped >= 1, "some verify ran while the writer committed")
        let final = try log.verify()
        #expect(final.problems.isEmpty, "\(final.problems.prefix(5))")
        #expect(try log.read { try $0.purgedThrough } == 40)
    }
}
