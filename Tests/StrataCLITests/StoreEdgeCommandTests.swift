import Foundation
import StrataLog
import StrataTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Fills `pipe` until a write would block, so the child given its writing end as standard
/// error blocks at its first write there (until the pipe is read). False if it can't.
private func fill(_ pipe: Pipe) -> Bool {
    let descriptor = pipe.fileHandleForWriting.fileDescriptor
    let flags = fcntl(descriptor, F_GETFL)
    guard flags >= 0, fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) == 0 else { return false }
    defer { _ = fcntl(descriptor, F_SETFL, flags) }
    let chunk = [UInt8](repeating: UInt8(ascii: "."), count: 4096)
    while true {
        let written = chunk.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written < 0 { return errno == EAGAIN }
    }
}

/// A flag one thread sets and another waits for, with a bound (a test that goes wrong fails
/// rather than hangs).
private final class Signal: @unchecked Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var storedNote: String?
    func raise() { semaphore.signal() }
    func wait(seconds: Double) -> Bool { semaphore.wait(timeout: .now() + seconds) == .success }
    /// A note for the waiter (an error met), set before `raise()`.
    var note: String? {
        get {
            lock.lock()
            defer { lock.unlock() }
            return storedNote
        }
        set {
            lock.lock()
            storedNote = newValue
            lock.unlock()
        }
    }
}

/// What `strata compact STORE` printed when another compaction of the store — this process's,
/// moving events before `otherBefore` (nil: all it may) — committed after the command planned
/// its range and before its first step, and the problems met arranging that (empty: none).
///
/// Held without reading `/proc` (before session 30 the test read `/proc/PID/syscall` to see
/// the command blocked, and passed silently where it couldn't): the command's standard error
/// is a full pipe, so it stops at its first progress line, which comes after its plan and
/// before its first step. A stranded `.dat.nosync` temporary in `segments/` goes at the
/// command's writable open, under the writer lock, the last write of its open: once it is
/// gone, this process's compaction takes the writer lock and holds it in its commit
/// (`EventLog.setCompactionCommitHook`) while the pipe is read up to the progress line (the
/// command has planned, seeing nothing moved); then it commits, before the command's step can.
private func compactRacingAnotherCompaction(_ store: LeagueStore, otherBefore: UInt64?) throws
    -> (status: Int32, output: String, errors: String, compactedThrough: UInt64, problems: [String])
{
    let log = try EventLog(path: store.path, model: try leagueModel())
    let segments = (store.path as NSString).appendingPathComponent("segments")
    try FileManager.default.createDirectory(atPath: segments, withIntermediateDirectories: true)
    let stranded = (segments as NSString).appendingPathComponent(".dat.nosync.stranded-by-a-test")
    try Data("x".utf8).write(to: URL(fileURLWithPath: stranded))
    var problems: [String] = []
    let output = Pipe()
    let errors = Pipe()
    guard fill(errors) else { throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "can't fill a pipe"]) }
    let holding = Signal(), go = Signal(), finished = Signal()
    let path = store.path
    EventLog.setCompactionCommitHook { hookPath in
        guard hookPath == path else { return }
        holding.raise()
        _ = go.wait(seconds: 60)
    }
    defer { EventLog.setCompactionCommitHook(nil) }
    let process = ChildProcess()
    process.executableURL = BuildProducts.executable("strata")
    process.arguments = ["compact", store.path]
    process.standardOutput = output
    process.standardError = errors
    process.standardInput = FileHandle.nullDevice
    try process.run()
    // The command's open is done with the writer lock once the stranded file is gone.
    var opened = false
    for _ in 0..<60_000 {
        if !FileManager.default.fileExists(atPath: stranded) {
            opened = true
            break
        }
        guard process.isRunning else { break }
        usleep(1_000)
    }
    if !opened { problems.append("the command's open didn't remove the stranded temporary") }
    // The other compaction, held in its commit with the writer lock.
    var request = CompactionRequest()
    request.before = otherBefore
    let otherRequest = request
    Thread.detachNewThread {
        do { _ = try log.compact(otherRequest) } catch { finished.note = "\(error)" }
        finished.raise()
    }
    if !holding.wait(seconds: 60) { problems.append("the other compaction never reached its commit") }
    // Reading standard error up to the first progress line: the command has planned.
    var errorText = ""
    let reader = errors.fileHandleForReading
    while !errorText.trimmingCharacters(in: CharacterSet(charactersIn: ".")).contains("\n") {
        let data = reader.availableData
        if data.isEmpty { break }
        errorText += String(decoding: data, as: UTF8.self)
    }
    go.raise()
    if !finished.wait(seconds: 60) { problems.append("the other compaction didn't finish") }
    if let error = finished.note { problems.append("the other compaction failed: \(error)") }
    errorText += String(decoding: reader.readDataToEndOfFile(), as: UTF8.self)
    let outputText = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, outputText, errorText.trimmingCharacters(in: CharacterSet(charactersIn: ".")),
        try log.metadata.compactedThrough, problems)
}

@Suite("Store edges: strata compact racing another compaction, read-only opens", .serialized)
struct StoreEdgeCommandTests {
    @Test("compact racing the app's own compaction of its whole range says 'nothing to move: another compaction or a purge moved events A…B first' (before: 'moved events A…A-1 (0 events)')")
    func compactOvertakenEntirely() throws {
        let store = try makeLeagueStore(extraTransactions: 6)
        let run = try compactRacingAnotherCompaction(store, otherBefore: nil)
        #expect(run.problems.isEmpty, "\(run.problems)")
        #expect(run.status == 0, "\(run.errors)")
        let lines = run.output.split(separator: "\n").map(String.init)
        #expect(lines.first == "nothing to move: another compaction or a purge moved events 1…\(store.head) first", "\(run.output)")
        #expect(!run.output.contains("moved events 1…0"), "\(run.output)")
        #expect(!run.output.contains("note: data.mdb keeps its size"), "nothing moved: \(run.output)")
        #expect(run.compactedThrough == store.head)
        #expect(run.errors.contains("compacted 0/\(store.head) events (0%)"), "\(run.errors)")
        let verify = try strata("verify", store.path)
        #expect(verify.status == 0, "\(verify.standardOutput)\(verify.standardError)")
    }

    @Test("compact racing a compaction of the start of its range moves the rest and says what it moved itself, and what the other moved")
    func compactOvertakenInPart() throws {
        let store = try makeLeagueStore(extraTransactions: 6)
        let run = try compactRacingAnotherCompaction(store, otherBefore: 4)
        #expect(run.problems.isEmpty, "\(run.problems)")
        #expect(run.status == 0, "\(run.errors)")
        let lines = run.output.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("moved events 4…\(store.head) (\(store.head - 3) events): ") == true, "\(run.output)")
        #expect(lines.contains("note: another compaction or a purge moved events 1…3 meanwhile"), "\(run.output)")
        #expect(run.compactedThrough == store.head)
    }
}
