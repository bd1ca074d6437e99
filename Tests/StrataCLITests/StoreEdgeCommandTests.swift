import Foundation
import StrataLog
import StrataTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Whether process `pid`'s main thread is blocked in a `write` to its standard error
/// (`/proc/PID/syscall`: the system call number, then its arguments). Nil when that can't be
/// read (no /proc, another architecture).
private func isBlockedWritingStandardError(_ pid: Int32) -> Bool? {
    #if arch(x86_64)
    let writeCall = "1"
    #elseif arch(arm64)
    let writeCall = "64"
    #else
    return nil
    #endif
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/syscall", encoding: .utf8) else { return nil }
    let fields = text.split(separator: " ")
    return fields.count >= 2 && fields[0] == writeCall && fields[1] == "0x2"
}

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

/// What `strata compact STORE` printed when another compaction of the store — this process's,
/// moving events before `otherBefore` (nil: all it may) — committed after the command planned
/// its range and before its first step: the command is held at its first progress line on
/// standard error (a full pipe) while the other compaction runs. Nil when the command can't
/// be held so here.
private func compactRacingAnotherCompaction(_ store: LeagueStore, otherBefore: UInt64?) throws -> (status: Int32, output: String, errors: String, compactedThrough: UInt64)? {
    let log = try EventLog(path: store.path, model: try leagueModel())
    let output = Pipe()
    let errors = Pipe()
    guard fill(errors) else { return nil }
    let process = ChildProcess()
    process.executableURL = BuildProducts.executable("strata")
    process.arguments = ["compact", store.path]
    process.standardOutput = output
    process.standardError = errors
    process.standardInput = FileHandle.nullDevice
    try process.run()
    // Held at its first write to standard error (bounded: a command that never writes there
    // finishes, and is then not held).
    var held = false
    var readable = true
    for _ in 0..<20_000 {
        guard process.isRunning else { break }
        guard let blocked = isBlockedWritingStandardError(process.processIdentifier) else {
            readable = false
            break
        }
        if blocked {
            held = true
            break
        }
        usleep(1_000)
    }
    var request = CompactionRequest()
    request.before = otherBefore
    if held { _ = try log.compact(request) }
    // Reading standard error lets the command go on.
    let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    let outputText = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    if !held && !readable { return nil }
    return (process.terminationStatus, outputText, errorText.trimmingCharacters(in: CharacterSet(charactersIn: ".")), try log.metadata.compactedThrough)
}

@Suite("Store edges: strata compact racing another compaction, read-only opens")
struct StoreEdgeCommandTests {
    @Test("compact racing the app's own compaction of its whole range says 'nothing to move: another compaction or a purge moved events A…B first' (before: 'moved events A…A-1 (0 events)')")
    func compactOvertakenEntirely() throws {
        let store = try makeLeagueStore(extraTransactions: 6)
        guard let run = try compactRacingAnotherCompaction(store, otherBefore: nil) else { return }
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
        guard let run = try compactRacingAnotherCompaction(store, otherBefore: 4) else { return }
        #expect(run.status == 0, "\(run.errors)")
        let lines = run.output.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("moved events 4…\(store.head) (\(store.head - 3) events): ") == true, "\(run.output)")
        #expect(lines.contains("note: another compaction or a purge moved events 1…3 meanwhile"), "\(run.output)")
        #expect(run.compactedThrough == store.head)
    }
}
