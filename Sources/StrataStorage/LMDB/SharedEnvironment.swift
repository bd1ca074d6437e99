internal import CStrataLMDB
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The one `MDB_env` behind every ``LMDBEnvironment`` open on the same environment in this
/// process.
///
/// LMDB forbids opening one environment twice in a process: the second `mdb_env_open` takes
/// the lock file's `fcntl` lock as if it were the first user (a process's own locks never
/// conflict) and re-initialises the reader table under the first handle's open read
/// transactions, so writers may reuse the pages they read; and closing either handle drops
/// the process's lock for both. So opens of one environment share this object: it is
/// opened by the first and closed when the last ``LMDBEnvironment`` on it is released.
final class SharedEnvironment: @unchecked Sendable {
    // @unchecked: the handles are LMDB's thread-safe environments; the mutable state is
    // guarded by `stateLock` (and changed only with no transaction running, under the
    // resize gate), `openCount` by the registry's lock; the rest is immutable.

    private let stateLock = NSLock()
    private var currentHandle: OpaquePointer
    private var readOnly: Bool
    /// Handles replaced by a writable one (``upgradeToWritable(path:options:)``), kept open
    /// until the last user goes: closing one would drop the process's lock on the lock file.
    private var retiredHandles: [OpaquePointer] = []
    private var databases: [DatabaseDescriptor: LMDBDatabase]
    /// The databases in the order they were opened (a reopen gives them the same handles).
    private var openOrder: [DatabaseDescriptor]
    /// The most named databases the environment was opened for.
    private let maxDatabases: Int
    /// Its key in the registry; nil when it isn't registered (no identity could be read).
    let identity: EnvironmentIdentity?
    let resizeGate = ResizeGate()
    let writerGate = WriterGate()
    /// How many ``LMDBEnvironment`` values use it; guarded by ``EnvironmentRegistry/lock``.
    var openCount = 1

    /// The data file's identity at open: a later open shares only while the path still
    /// names this file.
    let dataFileIdentity: EnvironmentIdentity?

    init(
        handle: OpaquePointer, isReadOnly: Bool, identity: EnvironmentIdentity?, dataFileIdentity: EnvironmentIdentity?,
        databases: [DatabaseDescriptor], handles: [DatabaseDescriptor: LMDBDatabase], maxDatabases: Int
    ) {
        currentHandle = handle
        readOnly = isReadOnly
        self.identity = identity
        self.dataFileIdentity = dataFileIdentity
        self.databases = handles
        openOrder = []
        for descriptor in databases where !openOrder.contains(descriptor.withoutCreate) { openOrder.append(descriptor.withoutCreate) }
        self.maxDatabases = maxDatabases
    }

    /// The `MDB_env` in use.
    var handle: OpaquePointer { stateLock.withLock { currentHandle } }
    /// Whether LMDB has it open `MDB_RDONLY`.
    var isReadOnly: Bool { stateLock.withLock { readOnly } }

    /// Closes every handle (the last user is gone).
    func close() {
        stateLock.withLock {
            mdb_env_close(currentHandle)
            for retired in retiredHandles { mdb_env_close(retired) }
            retiredHandles = []
        }
    }

    /// Replaces an `MDB_RDONLY` handle by a writable one, for a writable open of an
    /// environment the process has open read-only. Waits until no transaction of the process
    /// runs on it; the databases are reopened in their order, so every ``LMDBDatabase`` handed
    /// out stays valid (checked). The old handle stays open until the last user goes.
    func upgradeToWritable(path: String, options: LMDBEnvironment.Options) throws {
        if resizeGate.isHeldByCurrentThread {
            throw LMDBError(
                .incompatibleOpen, operation: "open",
                message: "the environment is open read-only in this process, and this thread is inside one of its read transactions: it can't be reopened writable until that read ends",
                detail: path)
        }
        try writerGate.withExclusive {
            try resizeGate.withExclusive {
                let (old, order, known) = stateLock.withLock { (currentHandle, openOrder, databases) }
                guard isReadOnly else { return }
                var rawFlags: UInt32 = 0
                try check(mdb_env_get_flags(old, &rawFlags), "mdb_env_get_flags", detail: path)
                var info = MDB_envinfo()
                try check(mdb_env_info(old, &info), "mdb_env_info", detail: path)
                var envPointer: OpaquePointer?
                try check(mdb_env_create(&envPointer), "mdb_env_create")
                guard let env = envPointer else {
                    throw LMDBError(lmdbCode: LMDBError.Code.outOfMemory.rawValue, operation: "mdb_env_create")
                }
                var adopted = false
                defer { if !adopted { mdb_env_close(env) } }
                try check(mdb_env_set_maxdbs(env, MDB_dbi(clamping: max(maxDatabases, options.maxDatabases))), "mdb_env_set_maxdbs")
                try check(mdb_env_set_maxreaders(env, info.me_maxreaders), "mdb_env_set_maxreaders")
                try check(mdb_env_set_mapsize(env, info.me_mapsize), "mdb_env_set_mapsize")
                let flags = EnvironmentFlags(rawValue: rawFlags).subtracting(.readOnly)
                try check(mdb_env_open(env, path, flags.rawValue, mdb_mode_t(options.fileMode)), "mdb_env_open", detail: path)
                try LMDBEnvironment.awaitWriterLock(path: path, usesSubdirectory: options.usesSubdirectory)
                var txnPointer: OpaquePointer?
                try check(mdb_txn_begin(env, nil, 0, &txnPointer), "mdb_txn_begin", detail: path)
                guard let txn = txnPointer else {
                    throw LMDBError(lmdbCode: LMDBError.Code.badTransaction.rawValue, operation: "mdb_txn_begin")
                }
                do {
                    for descriptor in order {
                        let reopened = try Self.openDatabase(descriptor, in: txn, creating: false, path: path)
                        guard reopened.handle == known[descriptor]?.handle else {
                            throw LMDBError(
                                .incompatibleOpen, operation: "open",
                                message: "the environment is open read-only in this process, and reopening it writable gave database \"\(descriptor.description)\" another handle",
                                detail: path)
                        }
                    }
                } catch {
                    mdb_txn_abort(txn)
                    throw error
                }
                try check(mdb_txn_commit(txn), "mdb_txn_commit", detail: path)
                stateLock.withLock {
                    retiredHandles.append(currentHandle)
                    currentHandle = env
                    readOnly = false
                }
                adopted = true
            }
        }
    }

    /// The handles of `descriptors`, opening (and, for a writable open, creating) those no
    /// earlier open of the process asked for, in one transaction committed at once.
    func databases(
        for descriptors: [DatabaseDescriptor], creating: Bool, path: String
    ) throws -> [DatabaseDescriptor: LMDBDatabase] {
        let known = stateLock.withLock { databases }
        let missing = descriptors.filter { known[$0.withoutCreate] == nil }
        if missing.isEmpty { return known }
        // mdb_dbi_open must not run in two transactions of the process at once: the
        // writer gate serialises it with every write (and with other opens).
        return try writerGate.withExclusive {
            try resizeGate.withShared {
                var txnPointer: OpaquePointer?
                let readOnly = isReadOnly || !creating
                let handle = self.handle
                try check(
                    mdb_txn_begin(handle, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txnPointer), "mdb_txn_begin", detail: path)
                guard let txn = txnPointer else {
                    throw LMDBError(lmdbCode: LMDBError.Code.badTransaction.rawValue, operation: "mdb_txn_begin")
                }
                var opened: [DatabaseDescriptor: LMDBDatabase] = [:]
                do {
                    for descriptor in missing {
                        opened[descriptor.withoutCreate] = try Self.openDatabase(
                            descriptor, in: txn, creating: !readOnly, path: path)
                    }
                } catch {
                    mdb_txn_abort(txn)
                    throw error
                }
                // A handle opened in a transaction is the process's only once it commits.
                try check(mdb_txn_commit(txn), "mdb_txn_commit", detail: path)
                return stateLock.withLock {
                    for descriptor in missing where databases[descriptor.withoutCreate] == nil {
                        openOrder.append(descriptor.withoutCreate)
                    }
                    databases.merge(opened) { old, _ in old }
                    return databases
                }
            }
        }
    }

    /// Opens `descriptor` in `txn` (`mdb_dbi_open`), naming it when it's missing.
    static func openDatabase(
        _ descriptor: DatabaseDescriptor, in txn: OpaquePointer, creating: Bool, path: String
    ) throws -> LMDBDatabase {
        var dbFlags = descriptor.flags.subtracting(.create)
        if creating { dbFlags.insert(.create) }
        var dbi: MDB_dbi = 0
        let result: Int32
        if let name = descriptor.name {
            result = mdb_dbi_open(txn, name, dbFlags.rawValue, &dbi)
        } else {
            result = mdb_dbi_open(txn, nil, dbFlags.rawValue, &dbi)
        }
        if result == MDB_NOTFOUND {
            throw LMDBError(
                .databaseNotFound, operation: "mdb_dbi_open",
                message: "no database named \"\(descriptor.description)\" in the environment",
                detail: path)
        }
        try check(result, "mdb_dbi_open", detail: "database \"\(descriptor.description)\" in \(path)")
        return LMDBDatabase(name: descriptor.name, flags: descriptor.flags.subtracting(.create), handle: dbi)
    }
}

extension DatabaseDescriptor {
    /// The descriptor without `.create`, which says how to open, not what is opened.
    var withoutCreate: DatabaseDescriptor { DatabaseDescriptor(name, flags: flags.subtracting(.create)) }
}

/// What makes two opens the same environment: the device and inode of the directory that
/// holds `data.mdb` and `lock.mdb` (or of the data file itself without a subdirectory), in
/// this process (a forked child opens its own: LMDB handles don't survive `fork`).
struct EnvironmentIdentity: Hashable {
    let device: UInt64
    let inode: UInt64
    let process: Int32

    /// The identity of the file or directory at `path`, or nil if it can't be read.
    init?(path: String) {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let device = (attributes[.systemNumber] as? NSNumber)?.uint64Value,
            let inode = (attributes[.systemFileNumber] as? NSNumber)?.uint64Value
        else { return nil }
        self.device = device
        self.inode = inode
        process = getpid()
    }
}

/// The environments this process has open, by identity.
enum EnvironmentRegistry {
    /// Guards `open` and every ``SharedEnvironment/openCount``. Held across a first open and
    /// a last close, so an environment is never opened while another handle on it closes.
    static let lock = NSLock()
    nonisolated(unsafe) static var open: [EnvironmentIdentity: SharedEnvironment] = [:]

    /// Drops one user of `shared`, closing it with its last.
    static func release(_ shared: SharedEnvironment) {
        lock.withLock {
            shared.openCount -= 1
            guard shared.openCount == 0 else { return }
            if let identity = shared.identity, open[identity] === shared { open[identity] = nil }
            shared.close()
        }
    }
}

// MARK: - The lock file

/// The process (other than this one) holding LMDB's lock on the lock file at `path`, or nil
/// when none does (or the file can't be read). LMDB 0.9 holds an `fcntl` lock on byte 0 of
/// `lock.mdb` for as long as a process has the environment open.
func lockFileHolder(_ path: String) -> pid_t? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var lock = firstByteWriteLock()
    guard fcntl(fd, F_GETLK, &lock) == 0, lock.l_type != Int16(F_UNLCK) else { return nil }
    return lock.l_pid
}

/// What in `path`'s files this user may not do, for an `EACCES` from `mdb_env_open`; nil when
/// nothing found explains it.
func accessProblem(path: String, dataFile: String, lockFile: String?, readOnly: Bool) -> String? {
    let directory = (dataFile as NSString).deletingLastPathComponent
    let who = "user \(getuid())"
    if access(dataFile, F_OK) == 0 {
        if access(dataFile, R_OK) != 0 { return "\(dataFile) isn't readable by \(who)" }
        if !readOnly && access(dataFile, W_OK) != 0 { return "\(dataFile) isn't writable by \(who)" }
    } else if !readOnly && access(directory, W_OK) != 0 {
        return "\(directory) isn't writable by \(who), so \((dataFile as NSString).lastPathComponent) can't be created"
    }
    if let lockFile {
        if access(lockFile, F_OK) == 0 {
            if access(lockFile, R_OK | W_OK) != 0 {
                return "the lock file \(lockFile) isn't writable by \(who) (LMDB records its readers there)"
            }
        } else if access((lockFile as NSString).deletingLastPathComponent, W_OK) != 0 {
            return "the lock file \(lockFile) is missing and \((lockFile as NSString).deletingLastPathComponent) isn't writable by \(who), so it can't be created"
        }
    }
    return nil
}

// MARK: - Replacing the data file

extension LMDBEnvironment {
    /// Rewrites the environment in the directory `path` without its free pages
    /// (`mdb_env_copy2` with `MDB_CP_COMPACT` into a scratch directory inside `path`, then a
    /// rename over `data.mdb`), so the file shrinks to its live data. Returns the data file's
    /// size before and after.
    ///
    /// Nobody may have the environment open meanwhile: a process that did would go on using
    /// the old file, and its commits would be lost. So this refuses, with
    /// ``LMDBError/Code/incompatibleOpen``, when this process has it open or another process
    /// holds its lock file (naming that process), and it holds the lock file exclusively
    /// while it works, so an open that starts meanwhile waits, then finds the new file and a
    /// lock file made for it.
    ///
    /// - Throws: ``LMDBError`` naming the path and what failed; on any failure the data file
    ///   is left as it was.
    public static func replaceWithCompactedCopy(path: String) throws -> (before: Int, after: Int) {
        let dataFile = (path as NSString).appendingPathComponent("data.mdb")
        let lockFile = (path as NSString).appendingPathComponent("lock.mdb")
        func size(_ file: String) -> Int { ((try? FileManager.default.attributesOfItem(atPath: file))?[.size] as? Int) ?? 0 }
        guard FileManager.default.fileExists(atPath: dataFile) else {
            throw LMDBError(.noSuchFile, operation: "compact in place", message: "no data file", detail: dataFile)
        }
        // No open of any environment in this process while this runs.
        EnvironmentRegistry.lock.lock()
        defer { EnvironmentRegistry.lock.unlock() }
        if let identity = EnvironmentIdentity(path: path), EnvironmentRegistry.open[identity] != nil {
            throw LMDBError(
                .incompatibleOpen, operation: "compact in place",
                message: "the environment is open in this process; close it first", detail: path)
        }
        let lockDescriptor = open(lockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard lockDescriptor >= 0 else {
            let code = errno
            throw LMDBError(lmdbCode: code, operation: "compact in place", detail: "\(lockFile): cannot open the lock file")
        }
        // Closing the descriptor drops the lock.
        defer { close(lockDescriptor) }
        var lock = firstByteWriteLock()
        guard fcntl(lockDescriptor, F_SETLK, &lock) == 0 else {
            let holder = lockFileHolder(lockFile).map { "process \($0)" } ?? "another process"
            throw LMDBError(
                .incompatibleOpen, operation: "compact in place",
                message: "the environment is open in \(holder); close it first", detail: path)
        }

        let before = size(dataFile)
        // Scratch copies of vacuums killed before they finished: nothing reads them, and no
        // other vacuum can be running (the lock is ours).
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] where name.hasPrefix(".vacuum-") {
            try? FileManager.default.removeItem(atPath: (path as NSString).appendingPathComponent(name))
        }
        let scratch = (path as NSString).appendingPathComponent(".vacuum-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: false)
        } catch {
            throw LMDBError(.ioError, operation: "compact in place", message: "cannot create a scratch directory", detail: "\(scratch): \(error.localizedDescription)")
        }
        defer { try? FileManager.default.removeItem(atPath: scratch) }

        // Copy through a lock-less read-only handle: the lock is ours.
        try withRawEnvironment(path: path, flags: [.readOnly, .noLock, .noThreadLocalStorage]) { env in
            try checkFileSize(env, dataFile: dataFile)
            try check(mdb_env_copy2(env, scratch, UInt32(MDB_CP_COMPACT)), "mdb_env_copy2", detail: scratch)
        }
        let copied = (scratch as NSString).appendingPathComponent("data.mdb")
        // The copy on disk before it replaces the file: `mdb_env_copy2` writes it but doesn't
        // sync it, so a power cut after the rename could leave a data file whose pages never
        // reached the disk in place of the old one.
        let copyDescriptor = open(copied, O_RDONLY | O_CLOEXEC)
        guard copyDescriptor >= 0 else {
            let code = errno
            throw LMDBError(lmdbCode: code, operation: "open", detail: "\(copied): cannot open the compacted copy to sync it")
        }
        let synced = fsync(copyDescriptor) == 0 ? 0 : errno
        close(copyDescriptor)
        guard synced == 0 else {
            throw LMDBError(lmdbCode: synced, operation: "fsync", detail: "\(copied): the compacted copy can't be synced; the data file was left as it was")
        }
        // The lock table describes the old file: its last transaction ID picks the meta page
        // readers and writers use, and the copy's IDs start again at 1. An open waiting for
        // our lock that got it with that table — this process killed between the rename and
        // the rebuild below — read the copy's empty meta page and wrote a new store over it,
        // losing every commit. Emptied first, the table can't be used: such an open fails
        // (and the next one, the first user, builds it afresh from the file in place).
        guard ftruncate(lockDescriptor, 0) == 0 else {
            let code = errno
            throw LMDBError(lmdbCode: code, operation: "ftruncate", detail: "\(lockFile): cannot reset the lock file")
        }
        guard rename(copied, dataFile) == 0 else {
            let code = errno
            // Rebuild the table from the file still in place.
            try? withRawEnvironment(path: path, flags: [.readOnly, .noThreadLocalStorage]) { _ in }
            throw LMDBError(lmdbCode: code, operation: "rename", detail: "\(copied) → \(dataFile): cannot put the compacted copy in place")
        }
        let directory = open(path, O_RDONLY | O_CLOEXEC)
        if directory >= 0 {
            fsync(directory)
            close(directory)
        }
        if let hook = vacuumAfterRenameHook.withLock({ $0 }) { hook() }
        // The lock file still describes the old file (its last transaction ID picks the meta
        // page readers use). An open in this process gets LMDB's exclusive lock (ours, same
        // process) and so rebuilds it from the new file, as the first user of an environment
        // does; openers that waited meanwhile then find it.
        try withRawEnvironment(path: path, flags: [.readOnly, .noThreadLocalStorage]) { _ in }
        return (before, size(dataFile))
    }

    /// Tests only: called by ``replaceWithCompactedCopy(path:)`` right after the compacted
    /// copy is renamed over `data.mdb`, before the lock file is made for it (a crash test
    /// kills the process there).
    package static func setVacuumAfterRenameHook(_ hook: (@Sendable () -> Void)?) { vacuumAfterRenameHook.withLock { $0 = hook } }
    private static let vacuumAfterRenameHook = Mutex<(@Sendable () -> Void)?>(nil)

    /// Opens a bare `MDB_env` at `path` with `flags` for `body`, then closes it.
    private static func withRawEnvironment(path: String, flags: EnvironmentFlags, _ body: (OpaquePointer) throws -> Void) throws {
        var envPointer: OpaquePointer?
        try check(mdb_env_create(&envPointer), "mdb_env_create")
        guard let env = envPointer else {
            throw LMDBError(lmdbCode: LMDBError.Code.outOfMemory.rawValue, operation: "mdb_env_create")
        }
        defer { mdb_env_close(env) }
        try check(mdb_env_open(env, path, flags.rawValue, 0o644), "mdb_env_open", detail: path)
        try body(env)
    }
}

/// An exclusive `fcntl` lock on a lock file's first byte, where every process with the
/// environment open holds a shared one.
func firstByteWriteLock() -> flock {
    var lock = flock()
    lock.l_type = Int16(F_WRLCK)
    lock.l_whence = Int16(SEEK_SET)
    lock.l_start = 0
    lock.l_len = 1
    return lock
}
