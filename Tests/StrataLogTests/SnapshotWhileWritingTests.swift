import Foundation
import StrataLog
import Synchronization
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// `verify` and `replay(through:into:)` on a store another thread is writing to —
/// committing, compacting, purging — read one consistent snapshot: what they report or
/// write is the store as it was when they began, never the writer's progress between their
/// steps.
@Suite("Event log: verify and replay while another thread writes")
struct SnapshotWhileWritingTests {
    @Test("verify runs while commits, compactions and a purge go on: every report is clean")
    func verifyWhileWriting() throws {
        let dir = try TemporaryDirectory()
        let log = try workloadLog(dir, transactions: 60)
        let rounds = max(100, Int(ProcessInfo.processInfo.environment["STRATA_VERIFY_WRITER_ROUNDS"] ?? "") ?? 150)
        let writer = BackgroundWork("the writer") {
            for round in 0..<rounds {
                try commitWorkload(log, (61 + round * 2)...(62 + round * 2))
                if round % 25 == 10 {
                    var request = CompactionRequest(before: try log.head - 5)
                    request.eventsPerFrame = 8
                    try log.compact(request)
                }
                if round == 80 { try log.purge(through: 40, author: "retention") }
            }
        }
        var reports = 0
        var overlapped = 0
        while !writer.isDone || reports < 2 {
            let startHead = try log.head
            let report = try log.verify()
            reports += 1
            // The writer committed while this verify ran.
            if try log.head != startHead { overlapped += 1 }
            #expect(report.problems.isEmpty, "verify \(reports): \(report.problems.prefix(5))")
            if !report.problems.isEmpty { break }
        }
        #expect(writer.failure() == nil)
        #expect(reports >= 2)
        #expect(overlapped >= 1, "some verify ran while the writer committed")
        let final = try log.verify()
        #expect(final.problems.isEmpty, "\(final.problems.prefix(5))")
        #expect(try log.read { try $0.purgedThrough } == 40)
    }

    @Test("replay(through:into:) while another thread purges further and further: every copy is the store's state")
    func replayWhilePurging() throws {
        let dir = try TemporaryDirectory()
        let log = try workloadLog(dir, transactions: 300)
        let expected = try log.read { try $0.currentState() }
        let head = try log.head
        let purger = BackgroundWork("the purger") {
            for point in stride(from: 5, to: 290, by: 5) { try log.purge(through: UInt64(point), author: "retention") }
        }
        var copies = 0
        while !purger.isDone || copies < 2 {
            let target = dir.file("copy-\(copies)")
            let report = try log.replay(through: head, into: target)
            copies += 1
            #expect(report.head == head)
            let state = try EventLog(openingExistingAt: target).read { try $0.currentState() }
            #expect(state == expected, "copy \(copies) differs from the store")
            if state != expected { break }
        }
        #expect(purger.failure() == nil)
        #expect(try log.read { try $0.purgedThrough } == 285)
    }
}

/// `body` run on a thread of its own, started at once.
final class BackgroundWork: Sendable {
    private let done = Mutex(false)
    private let error = Mutex<String?>(nil)
    private let finished = DispatchSemaphore(value: 0)

    init(_ name: String, _ body: @escaping @Sendable () throws -> Void) {
        Thread { [self] in
            defer {
                done.withLock { $0 = true }
                finished.signal()
            }
            do { try body() } catch { self.error.withLock { $0 = "\(name) failed: \(error)" } }
        }.start()
    }

    /// Whether `body` has returned or thrown.
    var isDone: Bool { done.withLock { $0 } }

    /// Waits for `body` to end; what it threw, named, or nil.
    func failure() -> String? {
        finished.wait()
        finished.signal()
        return error.withLock { $0 }
    }
}
