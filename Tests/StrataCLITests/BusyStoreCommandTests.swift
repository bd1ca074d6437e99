import Foundation
import StrataLog
import StrataStorage
import StrataTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A write transaction of this process (another process than the `strata` command) on the
/// store at `path`, held open until `release()`: LMDB's writer lock, which every writer of
/// every process takes, held as an app's long save or another `strata compact` holds it.
private final class HeldWriteTransaction: @unchecked Sendable {
    private let held = DispatchSemaphore(value: 0)
    private let released = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let environment: LMDBEnvironment

    init(_ path: String) throws {
        var options = LMDBEnvironment.Options()
        options.createsDirectory = false
        environment = try LMDBEnvironment(path: path, databases: [], options: options)
        Thread.detachNewThread { [environment, held, released, finished] in
            // Writes nothing: the commit of an empty transaction leaves data.mdb as it was.
            try? environment.write { _ in
                held.signal()
                _ = released.wait(timeout: .now() + 300)
            }
            finished.signal()
        }
        guard held.wait(timeout: .now() + 60) == .success else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "the write transaction never began"])
        }
    }

    private let lock = NSLock()
    private var isReleased = false

    /// Ends the transaction and waits for its thread to let the lock go; later calls do nothing.
    func release() {
        let first = lock.withLock {
            defer { isReleased = true }
            return !isReleased
        }
        guard first else { return }
        released.signal()
        _ = finished.wait(timeout: .now() + 60)
    }
}

/// Session 34 (helper 5): `compact` and `revert` when another process is writing to the store.
@Suite("strata compact and revert on a busy store", .serialized)
struct BusyStoreCommandTests {
    @Test(
        "compact and revert --wait 0 while another process holds a write transaction: exit 1, naming the process and its write lock, nothing written (before: they waited in LMDB's lock, silently, for as long as it was held)",
        arguments: [["compact"], ["compact", "--dry-run"], ["revert", "1"]])
    func busyGivesUpAtOnce(_ command: [String]) throws {
        let store = try makeLeagueStore()
        let before = try snapshotFiles(store.path)
        let holder = try HeldWriteTransaction(store.path)
        defer { holder.release() }
        let arguments = [command[0], store.path] + command.dropFirst() + ["--wait", "0"]
        let result = try runProcess(BuildProducts.executable("strata"), arguments)
        #expect(result.status == 1, "\(result.standardOutput)\(result.standardError)")
        #expect(
            result.standardError.contains("the store is busy: process \(getpid()) ("),
            "\(result.standardError)")
        #expect(result.standardError.contains("holds its write lock"), "\(result.standardError)")
        #expect(result.standardError.contains("(a timeout of 0)"), "\(result.standardError)")
        holder.release()
        let after = try snapshotFiles(store.path)
        #expect(Set(after.keys) == Set(before.keys))
        for (name, (bytes, _)) in before { #expect(after[name]?.0 == bytes, "\(name) changed") }
    }

    @Test("compact --wait 600 on a busy store says on stderr who holds the lock and that it waits; once the lock is let go it compacts, exit 0")
    func busyWaitsThenCompacts() throws {
        let store = try makeLeagueStore()
        let holder = try HeldWriteTransaction(store.path)
        defer { holder.release() }
        let errors = Pipe()
        let output = Pipe()
        let process = ChildProcess()
        process.executableURL = BuildProducts.executable("strata")
        process.arguments = ["compact", store.path, "--wait", "600"]
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Standard error up to the announcement: the command is waiting for the lock.
        var errorText = ""
        let reader = errors.fileHandleForReading
        while !errorText.contains("\n") {
            let data = reader.availableData
            if data.isEmpty { break }
            errorText += String(decoding: data, as: UTF8.self)
        }
        #expect(
            errorText.hasPrefix("strata: the store \(store.path) is busy: process \(getpid()) ("),
            "\(errorText)")
        #expect(errorText.contains("holds its write lock (a write transaction is open there); waiting for it; giving up after 600 s (--wait)"), "\(errorText)")
        holder.release()
        errorText += String(decoding: reader.readDataToEndOfFile(), as: UTF8.self)
        let outputText = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(outputText)\(errorText)")
        #expect(outputText.hasPrefix("moved events 1…"), "\(outputText)")
    }

    @Test(
        "another process's save holding the writer lock (StrataContextProbe, stopped between its commit's meta page write and the commit's publication): compact --wait 0 exits 1 naming that process, nothing written; compact --wait 600 says it waits for that process and, once it goes on and its save is done, compacts (exit 0) with the save in the log"
    )
    func busyFromAnotherProcess() throws {
        // The writer lock's holder is read from LMDB's lock file on Linux only.
        guard FileManager.default.fileExists(atPath: "/proc/self/stat") else { return }
        let directory = try TemporaryDirectory("strata-cli")
        let path = directory.file("store")
        let team: String
        let head: UInt64
        do {
            // The probe's model (it opens the store through a coordinator of it).
            let log = try EventLog(path: path, model: try SeedModels.leagueManager)
            var draft = TransactionDraft(author: "alice")
            let otters = draft.insert("Team", values: ["name": str("Otters")])
            let result = try log.commit(draft)
            let id = try required(result.permanentID(for: otters))
            for name in ["Ng", "Kim"] {
                var players = TransactionDraft(author: "alice")
                players.insert("Player", values: ["lastName": str(name), "team": .reference(.stored(id))])
                try log.commit(players)
            }
            team = "x-strata://\(log.storeUUID.uuidString)/Team/p\(id.primaryKey)"
            head = try log.head
        }

        let writer = try ContextProbeProcess(["stall", path, team, "Stalled"])
        let pid = writer.process.processIdentifier
        try #require(writer.nextLine() == "stalling")
        try #require(writer.waitUntilStopped(), "the probe didn't stop at its meta page write")
        // Whatever happens below, the writer goes on within 120 s.
        let resume = DispatchWorkItem { kill(pid, SIGCONT) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 120, execute: resume)
        defer { resume.cancel() }

        // --wait 0: gives up at once, naming the probe; writes nothing.
        let before = try snapshotFiles(path)
        let busy = try runProcess(BuildProducts.executable("strata"), ["compact", path, "--wait", "0"])
        #expect(busy.status == 1, "\(busy.standardOutput)\(busy.standardError)")
        #expect(busy.standardError.contains("the store is busy: process \(pid) ("), "\(busy.standardError)")
        #expect(busy.standardError.contains("holds its write lock"), "\(busy.standardError)")
        let after = try snapshotFiles(path)
        #expect(Set(after.keys) == Set(before.keys))
        for (name, (bytes, _)) in before { #expect(after[name]?.0 == bytes, "\(name) changed") }

        // --wait 600: waits for the probe, and compacts once it is done.
        let errors = Pipe()
        let output = Pipe()
        let process = ChildProcess()
        process.executableURL = BuildProducts.executable("strata")
        process.arguments = ["compact", path, "--wait", "600"]
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        var errorText = ""
        let reader = errors.fileHandleForReading
        while !errorText.contains("\n") {
            let data = reader.availableData
            if data.isEmpty { break }
            errorText += String(decoding: data, as: UTF8.self)
        }
        #expect(errorText.hasPrefix("strata: the store \(path) is busy: process \(pid) ("), "\(errorText)")
        #expect(errorText.contains("waiting for it; giving up after 600 s (--wait)"), "\(errorText)")
        kill(pid, SIGCONT)
        #expect(writer.nextLine() == "saved \(head + 1)")
        let (writerStatus, writerErrors) = try writer.finish()
        #expect(writerStatus == 0, "\(writerErrors)")
        errorText += String(decoding: reader.readDataToEndOfFile(), as: UTF8.self)
        let outputText = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(outputText)\(errorText)")
        #expect(outputText.hasPrefix("moved events 1…"), "\(outputText)")
        let log = try EventLog(openingExistingAt: path)
        #expect(try log.head == head + 1, "the probe's save is in the log")
        #expect(try log.verify().isClean)
    }

    @Test("--wait takes seconds or forever: anything else is exit 64 naming it")
    func waitValues() throws {
        let store = try makeLeagueStore()
        for bad in ["-1", "soon", "", "nan", "inf"] {
            let result = try strata("compact", store.path, "--wait", bad, "--dry-run")
            #expect(result.status == 64, "\(bad): \(result.standardError)")
            #expect(result.standardError.contains("--wait"), "\(bad): \(result.standardError)")
        }
        let forever = try strata("compact", store.path, "--wait", "forever", "--dry-run")
        #expect(forever.status == 0, "\(forever.standardError)")
        let revert = try strata("revert", store.path, "1", "--wait", "2.5", "--dry-run")
        #expect(revert.status != 64, "\(revert.standardError)")
    }
}
