import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Who holds an environment's writer lock (LMDB's `mti_wmutex`, which every write
/// transaction of every process takes): another process's thread inside a write transaction.
///
/// ```swift
/// LMDBEnvironment.writerLockHolder(path: store)?.description   // "process 4242 (myapp --sync)"
/// ```
public struct WriterLockHolder: Sendable, Hashable, CustomStringConvertible {
    /// The process holding the lock.
    public let processID: Int32
    /// Its command line (`/proc/PID/cmdline`, arguments joined by spaces, at most 100
    /// characters), or its command name, or nil when neither can be read.
    public let command: String?

    /// `process PID (COMMAND)`, or `process PID` when its command can't be read.
    public var description: String {
        guard let command, !command.isEmpty else { return "process \(processID)" }
        return "process \(processID) (\(command))"
    }
}

/// How a write of this process waits for another process's write transaction: set by a tool
/// (the `strata` CLI) that would rather say it is waiting, and give up, than wait silently.
public struct WriterLockWait: Sendable {
    /// The longest a write waits for another process's write transaction, in seconds; nil: as
    /// long as it takes. 0 gives up at once when another process holds the lock.
    public var timeout: Double?
    /// How long a write waits before `announce` is called (once per write).
    public var announceAfter: Double
    /// Called (on the waiting thread) once a write has waited `announceAfter` seconds.
    public var announce: @Sendable (WriterLockHolder) -> Void

    /// A policy: give up after `timeout` seconds (nil: never), announce after `announceAfter`.
    public init(timeout: Double?, announceAfter: Double = 1, announce: @escaping @Sendable (WriterLockHolder) -> Void) {
        self.timeout = timeout
        self.announceAfter = announceAfter
        self.announce = announce
    }
}

/// The process's policy (nil: writes wait in `mdb_txn_begin` as LMDB makes them, silently).
private let writerLockWaitPolicy = Mutex<WriterLockWait?>(nil)

extension LMDBEnvironment {
    /// Sets how writes in this process wait for another process's write transaction (nil, the
    /// default: in LMDB's lock, silently, for as long as it takes).
    ///
    /// With a policy, a write first looks at LMDB's writer lock (Linux: the robust mutex in
    /// `lock.mdb` holds its owner's thread ID); while another process holds it, the write
    /// polls every 20 ms instead of queueing in LMDB's lock, calls `announce` once it has
    /// waited `announceAfter` seconds, and throws ``LMDBError/Code/writerLockBusy`` naming
    /// the holder after `timeout`. So does a read's publication of a commit whose writer died
    /// before LMDB showed it to readers (``read(_:)``), which begins a write transaction;
    /// its wait ends as soon as the commit is published. Where the holder can't be told
    /// (another platform, another lock layout), writes wait as without a policy. A writer
    /// that takes the lock between the look and LMDB's own lock is waited for in LMDB's lock,
    /// silently and for as long as it holds it: LMDB has no way to try its writer lock or to
    /// give up on it (`mdb_txn_begin` blocks in `pthread_mutex_lock`), so the policy can't
    /// bound that wait (spec 0007, **A busy store**).
    ///
    /// ```swift
    /// LMDBEnvironment.setWriterLockWait(WriterLockWait(timeout: 30) { holder in print("waiting for \(holder)") })
    /// ```
    public static func setWriterLockWait(_ policy: WriterLockWait?) {
        writerLockWaitPolicy.withLock { $0 = policy }
    }

    /// The process other than this one holding the writer lock of the environment in the
    /// directory `path` (with `lock.mdb` in it), or nil when none does or it can't be told.
    /// A snapshot: the lock may be taken or let go right after.
    public static func writerLockHolder(path: String) -> WriterLockHolder? {
        WriterLockFile(path: (path as NSString).appendingPathComponent("lock.mdb"))?.holder()
    }

    /// Waits, under the process's ``WriterLockWait`` policy, until no other process holds the
    /// writer lock; returns at once without a policy (one lock of a `Mutex`).
    ///
    /// - Throws: ``LMDBError/Code/writerLockBusy`` when the policy's timeout passes first.
    func awaitWriterLock() throws {
        try Self.awaitWriterLock(path: path, usesSubdirectory: options.usesSubdirectory)
    }

    /// ``awaitWriterLock()`` for the environment at `path`: before every write transaction
    /// LMDB begins for this process — a write, a writable open's first transaction (which
    /// opens the databases), a reopen of a read-only environment writable, a read's
    /// publication of a commit whose writer died (`operation` "read", and `until` whether
    /// the commit has been published meanwhile: the wait then ends without the lock).
    ///
    /// - Returns: false when `until` said the wait is over, true otherwise (go on to begin).
    @discardableResult
    static func awaitWriterLock(
        path: String, usesSubdirectory: Bool, operation: String = "write", until: (() -> Bool)? = nil
    ) throws -> Bool {
        guard let policy = writerLockWaitPolicy.withLock({ $0 }) else { return true }
        let lockPath = usesSubdirectory ? (path as NSString).appendingPathComponent("lock.mdb") : path + "-lock"
        guard let file = WriterLockFile(path: lockPath), var holder = file.holder() else { return true }
        let start = DispatchTime.now().uptimeNanoseconds
        var announced = false
        while true {
            if let until, until() { return false }
            let waited = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            if let timeout = policy.timeout, waited >= timeout {
                let how = timeout == 0 ? "didn't wait (a timeout of 0)" : "gave up after waiting \(Self.seconds(timeout))"
                throw LMDBError(
                    .writerLockBusy, operation: operation,
                    message: "the store is busy: \(holder) holds its write lock (a write transaction is open there); \(how)",
                    detail: path)
            }
            if !announced, waited >= policy.announceAfter {
                announced = true
                policy.announce(holder)
            }
            usleep(20_000)
            guard let next = file.holder() else { return true }
            holder = next
        }
    }

    /// `5 s`, `0.5 s`.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() && value < 1e15 ? "\(Int64(value)) s" : "\(value) s"
    }
}

/// LMDB's lock file, read for its writer mutex's owner.
///
/// On Linux LMDB 0.9 keeps its writer lock as a process-shared robust `pthread_mutex_t`
/// (`mti_wmutex`) in `lock.mdb`, at the first 64-byte boundary after the reader mutex's
/// `MDB_txbody` (magic, format, the reader mutex, the last transaction ID, the reader count).
/// The kernel's robust-futex protocol has the mutex's first word hold its owner's thread ID
/// (low 30 bits), 0 when free. The layout is checked before it is trusted: the lock file's
/// magic, and both mutexes' kind words marking them robust and process-shared.
struct WriterLockFile: ~Copyable {
    private let descriptor: Int32
    private let offset: Int

    init?(path: String) {
        #if os(Linux) && canImport(Glibc)
        let mutexSize = MemoryLayout<pthread_mutex_t>.size
        func roundUp(_ n: Int, _ to: Int) -> Int { (n + to - 1) / to * to }
        // mtb_magic, mtb_format, mtb_rmutex, then mtb_txnid (8-aligned) and mtb_numreaders.
        let body = roundUp(roundUp(8 + mutexSize, 8) + 8 + 4, 8)
        let offset = roundUp(body, 64)
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        var header = [UInt32](repeating: 0, count: (offset + mutexSize) / 4)
        let wanted = header.count * 4
        let read = header.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, wanted, 0) }
        // glibc's mutex kind word (after __lock, __count, __owner, __nusers): robust (16)
        // and process-shared (128).
        let kindOffset = 16
        let robustShared: UInt32 = 16 | 128
        guard read == wanted, header[0] == 0xBEEF_C0DE,
            header[(8 + kindOffset) / 4] & robustShared == robustShared,
            header[(offset + kindOffset) / 4] & robustShared == robustShared
        else {
            close(descriptor)
            return nil
        }
        self.descriptor = descriptor
        self.offset = offset
        #else
        return nil
        #endif
    }

    deinit { close(descriptor) }

    /// The other process whose thread holds the writer lock now, or nil (free, held by this
    /// process, or held by a thread that has died: LMDB recovers such a lock at once).
    func holder() -> WriterLockHolder? {
        var word: UInt32 = 0
        guard pread(descriptor, &word, 4, off_t(offset)) == 4 else { return nil }
        let thread = Int32(bitPattern: word & 0x3FFF_FFFF)
        guard thread > 0 else { return nil }
        // The thread's process: `Tgid` in /proc/TID/status (a thread's directory is there,
        // though not listed). Gone: the owner died, and the lock is recovered on taking it.
        guard let status = try? String(contentsOfFile: "/proc/\(thread)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Tgid:") }),
            let process = Int32(line.dropFirst(5).trimmingCharacters(in: .whitespaces))
        else { return nil }
        guard process != getpid() else { return nil }
        return WriterLockHolder(processID: process, command: Self.command(of: process))
    }

    /// `/proc/PID/cmdline`'s arguments joined by spaces (at most 100 characters), else
    /// `/proc/PID/comm`, else nil.
    private static func command(of process: Int32) -> String? {
        if let data = FileManager.default.contents(atPath: "/proc/\(process)/cmdline"), !data.isEmpty {
            let arguments = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            var text = arguments.joined(separator: " ")
            // One line, whatever the arguments hold.
            text = String(text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? " " : Character($0) })
            if text.count > 100 { text = String(text.prefix(99)) + "…" }
            return text
        }
        guard let comm = try? String(contentsOfFile: "/proc/\(process)/comm", encoding: .utf8) else { return nil }
        return comm.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
