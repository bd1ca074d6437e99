import Foundation
import Strata
import StrataTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Session 35 (helper 5): a read that finds the newest commit unpublished publishes it by
/// beginning a write transaction (spec 0001 §2.4). Under a process's writer lock wait policy
/// (`strata compact` / `revert --wait`), that begin waits for another process's write
/// transaction as the policy says, not in LMDB's lock, silently.
@Suite("A read publishing a commit while another process holds the writer lock", .serialized)
struct PublishWaitFixTests {
    @Test(
        "a writer stopped between its meta page and its publication holds the lock: a read under a wait policy says who holds it and gives up after the timeout (before: it waited in LMDB's lock, silently, until the writer went on); once it goes on, the read sees its commit"
    )
    func readUnderPolicyWaitsAsItSays() async throws {
        // The writer lock's holder is read from LMDB's lock file on Linux only.
        guard FileManager.default.fileExists(atPath: "/proc/self/stat") else { return }
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let before = try coordinator.persistentStores[0].log.head
        let store = dir.url.appendingPathComponent("store").path

        // The waiter: a process with the store open writable and a policy of 2 s.
        let waiter = try ContextProbeProcess(["publish-wait", store, "2"])
        #expect(waiter.nextLine() == "ready \(before)")

        // The writer: stops holding LMDB's writer lock, its commit's meta page written.
        let writer = try ContextProbeProcess(["stall", store, teamID.description, "Stalled"])
        let pid = writer.process.processIdentifier
        try #require(writer.nextLine() == "stalling")
        try #require(writer.waitUntilStopped(), "the writer didn't stop at its meta page write")
        // Whatever happens below, the writer goes on within 30 s (before the fix, that is what
        // ended the waiter's wait).
        let resume = DispatchWorkItem { kill(pid, SIGCONT) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 30, execute: resume)
        defer { resume.cancel() }

        waiter.send("read")
        let first = waiter.nextLine()
        #expect(first == "waiting \(pid)", "\(first ?? "nil")")
        let second = first == "waiting \(pid)" ? waiter.nextLine() : nil
        #expect(
            second?.hasPrefix("failed ") == true && second?.contains("read: the store is busy: process \(pid) (") == true
                && second?.contains("holds its write lock (a write transaction is open there); gave up after waiting 2 s (STRATA_WRITER_LOCK_BUSY)") == true,
            "\(second ?? "nil")")

        // The writer goes on: it publishes its commit, and the next read sees it.
        kill(pid, SIGCONT)
        #expect(writer.nextLine() == "saved \(before + 1)")
        let (writerStatus, writerErrors) = try writer.finish()
        #expect(writerStatus == 0, "\(writerErrors)")
        waiter.send("read")
        #expect(waiter.nextLine() == "head \(before + 1)")
        let (status, errors) = try waiter.finish()
        #expect(status == 0, "\(errors)")
    }
}
