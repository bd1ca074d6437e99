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

/// An LMDB environment: one memory-mapped file holding named databases (`MDB_env`).
///
/// Open it once per process and path, with every database it will use; the handles are
/// opened at open and never closed. Transactions are scoped closures: ``read(_:)`` and
/// ``write(_:)``. A write closure that throws aborts; one that returns commits.
///
/// ```swift
/// let env = try LMDBEnvironment(
///     path: directory, databases: [DatabaseDescriptor("events")])
/// let events = try env.database(named: "events")
/// try env.write { txn in try txn.put([1, 2, 3], forKey: [0, 0, 0, 1], in: events, flags: .append) }
/// let bytes = try env.read { txn in try txn.value(forKey: [0, 0, 0, 1], in: events) }
/// ```
///
/// ## Map growth
///
/// LMDB's map has a fixed size; a write that passes it fails with `MDB_MAP_FULL`. Strata
/// catches that, aborts the transaction, multiplies the map size by
/// ``Options/growthFactor`` (up to ``Options/maximumMapSize``) and runs the write closure
/// again, so **a write closure may run more than once** and must not have effects outside
/// its transaction. Another process that grew the map makes LMDB answer
/// `MDB_MAP_RESIZED` at the next transaction begin; Strata adopts the new size and begins
/// again. Both resizes wait until no transaction of this process is running.
///
/// ## Threads
///
/// The environment is opened with `MDB_NOTLS`, so read transactions may be used from any
/// thread (inside their closure). Write transactions are serialised inside the process,
/// and each runs start to finish on the calling thread: the closure is synchronous, so no
/// `await` can happen inside it. Don't start a write inside a read closure on the same
/// thread: a map resize would wait for that read forever.
///
/// Corresponds to LMDB's `mdb_env_create`, `mdb_env_open`, `mdb_dbi_open`.
public final class LMDBEnvironment: @unchecked Sendable {
    // @unchecked: the only state is the MDB_env pointer, which LMDB makes thread-safe for
    // the operations used here, plus immutable values and the two lock objects. Resizes
    // (the one operation LMDB doesn't allow concurrently) are fenced by `resizeGate`.

    /// Settings for opening an environment.
    public struct Options: Sendable {
        /// The initial map size in bytes (default 64 MiB); an existing larger file keeps its size.
        public var mapSize: Int = 64 << 20
        /// The largest size map growth may reach (default 1 TiB).
        public var maximumMapSize: Int = 1 << 40
        /// The factor by which the map grows when full (default 2).
        public var growthFactor: Int = 2
        /// The most named databases (default 32).
        public var maxDatabases: Int = 32
        /// The most concurrent read transactions across all processes (default 126).
        public var maxReaders: Int = 126
        /// How much commits wait for the disk (default ``Durability/durable``).
        public var durability: Durability = .durable
        /// Open read-only: writes fail, named databases must exist, nothing is created.
        public var isReadOnly: Bool = false
        /// The path names a directory holding `data.mdb` and `lock.mdb` (default), or with
        /// false, the data file itself (`MDB_NOSUBDIR`, lock file at `PATH-lock`).
        public var usesSubdirectory: Bool = true
        /// Create the directory if it's missing (writable opens only).
        public var createsDirectory: Bool = true
        /// The permissions of new files.
        public var fileMode: UInt16 = 0o644
        /// Extra LMDB flags for special cases (`MDB_NOTLS` is always added).
        public var additionalFlags: EnvironmentFlags = []

        /// The default options.
        public init() {}
    }

    /// The version of the LMDB library in use, such as `0.9.24` (`mdb_version`).
    public static var libraryVersion: String {
        var major: Int32 = 0
        var minor: Int32 = 0
        var patch: Int32 = 0
        _ = mdb_version(&major, &minor, &patch)
        return "\(major).\(minor).\(patch)"
    }

    /// The path the environment was opened at.
    public let path: String
    /// The options it was opened with.
    public let options: Options
    /// How many stale reader slots (left by dead processes) `mdb_reader_check` cleared at open.
    public let staleReadersCleared: Int

    /// The shared `MDB_env` (one per environment and process, see ``SharedEnvironment``).
    let shared: SharedEnvironment
    var handle: OpaquePointer { shared.handle }
    private let databasesByName: [String: LMDBDatabase]
    /// What writes through this value throw instead of starting (``refuseWrites(throwing:)``).
    private let writeRefusal = Mutex<(any Error & Sendable)?>(nil)
    private let mainDatabase: LMDBDatabase?
    var resizeGate: ResizeGate { shared.resizeGate }
    private var writerGate: WriterGate { shared.writerGate }

    /// Opens (creating if allowed) the environment at `path` and every database in `databases`.
    ///
    /// An environment this process already has open is not opened again (LMDB forbids it:
    /// the second open would reset the reader table under the first one's readers): the new
    /// value shares the open one, opening any database it lacks. A writable open of one open
    /// read-only reopens it writable for all, once no transaction of the process runs on it
    /// (read-only values still refuse to write); a `durable` open makes it durable for all.
    ///
    /// A read-only open whose lock file this user can't write (a copy owned by someone else)
    /// reads without it (`MDB_NOLOCK`, as LMDB itself does on a read-only file system) when
    /// no process holds the environment open; if one does, it fails with `EACCES` naming
    /// that process, since a reader it can't see could have its pages reused.
    ///
    /// - Throws: ``LMDBError`` naming the path (and the database, or the file that can't be
    ///   read or written) when the file can't be opened, isn't an LMDB file, or a named
    ///   database is missing in a read-only open.
    public init(path: String, databases: [DatabaseDescriptor], options: Options = Options()) throws {
        self.path = path
        self.options = options

        if options.usesSubdirectory && !options.isReadOnly && options.createsDirectory {
            do {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                throw LMDBError(
                    .noSuchFile, operation: "open", message: "cannot create the environment's directory",
                    detail: "\(path): \(error.localizedDescription)")
            }
        }

        let registry = EnvironmentRegistry.self
        registry.lock.lock()
        var locked = true
        defer { if locked { registry.lock.unlock() } }
        let shared: SharedEnvironment
        let cleared: Int
        let dataFile = options.usesSubdirectory ? (path as NSString).appendingPathComponent("data.mdb") : path
        // The data file's identity too: a directory deleted and made again can get the inode
        // of one an open environment still holds.
        if let identity = EnvironmentIdentity(path: path), let existing = registry.open[identity],
            existing.dataFileIdentity == EnvironmentIdentity(path: dataFile)
        {
            existing.openCount += 1
            registry.lock.unlock()
            locked = false
            do {
                if existing.isReadOnly && !options.isReadOnly { try existing.upgradeToWritable(path: path, options: options) }
                if options.durability == .durable, !options.isReadOnly {
                    try check(mdb_env_set_flags(existing.handle, UInt32(MDB_NOMETASYNC), 0), "mdb_env_set_flags", detail: path)
                }
                var dead: Int32 = 0
                try check(mdb_reader_check(existing.handle, &dead), "mdb_reader_check", detail: path)
                cleared = Int(dead)
            } catch {
                registry.release(existing)
                throw error
            }
            shared = existing
        } else {
            let (env, opened, dead, isReadOnly) = try Self.openEnvironment(path: path, databases: databases, options: options)
            // Registered under the identity the open made sure exists.
            let identity = EnvironmentIdentity(path: path)
            shared = SharedEnvironment(
                handle: env, isReadOnly: isReadOnly, identity: identity, dataFileIdentity: EnvironmentIdentity(path: dataFile),
                databases: databases, handles: opened, maxDatabases: options.maxDatabases)
            if let identity { registry.open[identity] = shared }
            cleared = dead
        }
        if locked {
            registry.lock.unlock()
            locked = false
        }
        self.shared = shared
        staleReadersCleared = cleared
        do {
            let all = try shared.databases(for: databases, creating: !options.isReadOnly, path: path)
            var byName: [String: LMDBDatabase] = [:]
            var main: LMDBDatabase?
            for descriptor in databases {
                guard let database = all[descriptor.withoutCreate] else { continue }
                if let name = descriptor.name { byName[name] = database } else { main = database }
            }
            databasesByName = byName
            mainDatabase = main
        } catch {
            registry.release(shared)
            throw error
        }
    }

    /// Opens a fresh `MDB_env` at `path` with `databases`: what the first open of an
    /// environment in the process does. Returns the handle, the database handles, the stale
    /// reader slots cleared, and whether it is `MDB_RDONLY`.
    private static func openEnvironment(
        path: String, databases: [DatabaseDescriptor], options: Options
    ) throws -> (OpaquePointer, [DatabaseDescriptor: LMDBDatabase], Int, Bool) {
        let dataFile = options.usesSubdirectory ? (path as NSString).appendingPathComponent("data.mdb") : path
        let lockFile = options.usesSubdirectory ? (path as NSString).appendingPathComponent("lock.mdb") : path + "-lock"

        // Whether the lock file was there before this open: one that LMDB made for a data file
        // that turns out not to be an environment is removed again, so a look at such a
        // directory (`strata info` on the wrong path) leaves nothing behind.
        let lockFileExisted = access(lockFile, F_OK) == 0
        var flags = options.additionalFlags.union(.noThreadLocalStorage)
        if options.isReadOnly { flags.insert(.readOnly) }
        if !options.usesSubdirectory { flags.insert(.noSubdirectory) }
        if options.durability == .fast { flags.insert(.noMetaSync) }

        func create(_ flags: EnvironmentFlags) throws -> (OpaquePointer, Int32) {
            var envPointer: OpaquePointer?
            try check(mdb_env_create(&envPointer), "mdb_env_create")
            guard let env = envPointer else {
                throw LMDBError(lmdbCode: LMDBError.Code.outOfMemory.rawValue, operation: "mdb_env_create")
            }
            do {
                try check(mdb_env_set_maxdbs(env, MDB_dbi(clamping: options.maxDatabases)), "mdb_env_set_maxdbs")
                try check(mdb_env_set_maxreaders(env, UInt32(clamping: options.maxReaders)), "mdb_env_set_maxreaders")
                try check(mdb_env_set_mapsize(env, max(options.mapSize, 1 << 16)), "mdb_env_set_mapsize")
            } catch {
                mdb_env_close(env)
                throw error
            }
            let result = mdb_env_open(env, path, flags.rawValue, mdb_mode_t(options.fileMode))
            // A failed mdb_env_open leaves a handle fit only for mdb_env_close.
            if result != 0 { mdb_env_close(env) }
            return (env, result)
        }

        if options.isReadOnly, let size = fileSize(dataFile), size == 0 {
            // LMDB would take it for a new environment and fail writing its meta pages (EBADF).
            throw LMDBError(
                .invalid, operation: "open", message: "the data file is empty (0 bytes): it holds no LMDB environment",
                detail: dataFile)
        }
        if !flags.contains(.noLock) { try checkRoomForLockFile(lockFile, maxReaders: options.maxReaders) }
        var (env, result) = try create(flags)
        if result == EACCES && options.isReadOnly
            && accessProblem(path: path, dataFile: dataFile, lockFile: nil, readOnly: true) == nil
        {
            // The data file is readable, so the lock file is what this user can't write. With
            // no process holding the environment, nothing writes it: read without the lock.
            if let holder = lockFileHolder(lockFile) {
                throw LMDBError(
                    .permissionDenied, operation: "mdb_env_open",
                    message: String(cString: mdb_strerror(EACCES)),
                    detail: "\(path): the lock file \(lockFile) isn't writable by user \(getuid()), and process \(holder) has the environment open, so a reader can't register there; run as the store's owner or read a copy")
            }
            if access(lockFile, F_OK) != 0 || access(lockFile, R_OK) == 0 {
                (env, result) = try create(flags.union(.noLock))
            }
        }
        // A lock file emptied by a vacuum killed before it rebuilt it (see
        // ``replaceWithCompactedCopy(path:)``): this open waited for the vacuum's lock and got
        // it shared, so LMDB couldn't build the table (EINVAL). Opened again, the first user
        // alone builds it afresh from the file in place.
        var attempts = 0
        while result == EINVAL, options.usesSubdirectory, !options.additionalFlags.contains(.noLock), fileSize(lockFile) == 0, attempts < 200 {
            attempts += 1
            usleep(10_000)
            (env, result) = try create(flags)
        }
        if result != 0 {
            if !lockFileExisted, result == MDB_INVALID || result == MDB_VERSION_MISMATCH { unlink(lockFile) }
            var detail = path
            if result == EACCES,
                let problem = accessProblem(path: path, dataFile: dataFile, lockFile: lockFile, readOnly: options.isReadOnly)
            {
                detail += ": \(problem)"
            }
            throw LMDBError(lmdbCode: result, operation: "mdb_env_open", detail: detail)
        }
        var opened = false
        defer { if !opened { mdb_env_close(env) } }

        try Self.checkFileSize(env, dataFile: dataFile)

        // A read-only open without reader slots (a read-only file system, where LMDB goes
        // lock-less by itself, or the fallback above) is safe only while no process writes:
        // one that does could reuse the pages its reads see.
        if options.isReadOnly, !options.additionalFlags.contains(.noLock), Self.hasNoReaderTable(env),
            let holder = lockFileHolder(lockFile)
        {
            throw LMDBError(
                .incompatibleOpen, operation: "open",
                message: "process \(holder) has the environment open, and this read-only open can't record its readers in the lock file (a read-only file system, or a lock file this user can't write), so that process could reuse the pages it reads",
                detail: "\(path): copy the store, or read it where \(lockFile) is writable")
        }

        var dead: Int32 = 0
        try check(mdb_reader_check(env, &dead), "mdb_reader_check", detail: path)

        // Open every database once, in one transaction, so handles are valid in every
        // later transaction of the process.
        var byDescriptor: [DatabaseDescriptor: LMDBDatabase] = [:]
        var txnPointer: OpaquePointer?
        let txnFlags: UInt32 = options.isReadOnly ? UInt32(MDB_RDONLY) : 0
        // A writable open's first transaction is a write: another process's is waited for as
        // the process's policy says (``setWriterLockWait(_:)``).
        if !options.isReadOnly { try awaitWriterLock(path: path, usesSubdirectory: options.usesSubdirectory) }
        // Another process may grow the map between mdb_env_open and this first transaction:
        // adopt its size (mdb_env_set_mapsize 0) and begin again, as read and write do.
        var began = mdb_txn_begin(env, nil, txnFlags, &txnPointer)
        while began == MDB_MAP_RESIZED {
            try check(mdb_env_set_mapsize(env, 0), "mdb_env_set_mapsize", detail: path)
            began = mdb_txn_begin(env, nil, txnFlags, &txnPointer)
        }
        try check(began, "mdb_txn_begin", detail: path)
        guard let txn = txnPointer else {
            throw LMDBError(lmdbCode: LMDBError.Code.badTransaction.rawValue, operation: "mdb_txn_begin")
        }
        do {
            for descriptor in databases {
                byDescriptor[descriptor.withoutCreate] = try SharedEnvironment.openDatabase(
                    descriptor, in: txn, creating: !options.isReadOnly, path: path)
            }
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
        // A commit frees the transaction whatever it returns: never abort after it.
        try check(mdb_txn_commit(txn), "mdb_txn_commit", detail: path)
        opened = true
        return (env, byDescriptor, Int(dead), options.isReadOnly)
    }

    /// Whether `env` runs without a reader table (`MDB_NOLOCK`, or LMDB's lock-less
    /// read-only open on a read-only file system), which `mdb_reader_list` reports as
    /// `(no reader locks)`.
    private static func hasNoReaderTable(_ env: OpaquePointer) -> Bool {
        final class Answer { var lockless = false }
        let answer = Answer()
        _ = withExtendedLifetime(answer) {
            mdb_reader_list(env, { message, context in
                guard let message, let context else { return 0 }
                let answer = Unmanaged<AnyObject>.fromOpaque(context).takeUnretainedValue() as? Answer
                if String(cString: message).hasPrefix("(no reader locks)") { answer?.lockless = true }
                return 0
            }, Unmanaged.passUnretained(answer as AnyObject).toOpaque())
        }
        return answer.lockless
    }

    /// The size of the file at `path`, or nil if it can't be read.
    /// Refuses, with `ENOSPC` naming the lock file, to make a reader table the file system
    /// has no room for. LMDB sizes a new (or emptied) lock file with `ftruncate` and writes its
    /// header through a shared memory map: on a full file system the page can't be allocated
    /// and the write is a `SIGBUS` inside `mdb_env_open` (before, `strata replay --into` or
    /// `strata verify` with a full temporary directory crashed so). The room asked for is an
    /// upper bound of LMDB 0.9's table (a header of at most 256 bytes and 64 bytes a reader
    /// slot) in whole 4 KiB pages; a lock file that already has a size, or a directory this
    /// user can't write (LMDB then reads without one), isn't checked.
    private static func checkRoomForLockFile(_ lockFile: String, maxReaders: Int) throws {
        if let size = fileSize(lockFile), size > 0 { return }
        let directory = (lockFile as NSString).deletingLastPathComponent
        var status = statvfs()
        guard access(directory.isEmpty ? "." : directory, W_OK) == 0, statvfs(directory.isEmpty ? "." : directory, &status) == 0,
            status.f_flag & 1 == 0  // ST_RDONLY
        else { return }
        let blocks = getuid() == 0 ? UInt64(status.f_bfree) : UInt64(status.f_bavail)
        let free = blocks.multipliedReportingOverflow(by: UInt64(status.f_frsize))
        let needed = (256 + 64 * max(maxReaders, 1) + 4095) / 4096 * 4096
        guard !free.overflow, free.partialValue < UInt64(needed) else { return }
        throw LMDBError(
            .noSpace, operation: "mdb_env_open", message: String(cString: strerror(ENOSPC)),
            detail: "\(lockFile): the reader table needs \(needed) bytes, and the file system has \(free.partialValue) bytes free; nothing was opened")
    }

    private static func fileSize(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int
    }

    deinit {
        EnvironmentRegistry.release(shared)
    }

    /// Refuses a data file that lacks a page the environment uses.
    ///
    /// LMDB maps the file and reads pages through the map, so a page past the end of a
    /// truncated file (a bad copy, a full disk, a damaged backup) is a `SIGBUS` that kills
    /// the process at its first read, not an error. A healthy file may also end before the
    /// newest meta page's last page: a commit doesn't write pages it allocated and freed
    /// again, so the tail can be free pages never written. When the file is shorter than
    /// `(last page + 1) × page size`, ``LMDBFileCheck`` reads the meta pages and the free-page
    /// lists with plain file reads (never the map) and refuses the file only if a page past
    /// its end is not free. The meta page is read before the file's size: a writer in another
    /// process writes a commit's pages (extending the file) before the meta page that points
    /// to them, and LMDB never shrinks the file, so a store being grown passes.
    ///
    /// - Throws: ``LMDBError/Code/corrupted`` naming the file, its size and the size the
    ///   environment needs.
    static func checkFileSize(_ env: OpaquePointer, dataFile: String) throws {
        var info = MDB_envinfo()
        try check(mdb_env_info(env, &info), "mdb_env_info", detail: dataFile)
        var environmentStat = MDB_stat()
        try check(mdb_env_stat(env, &environmentStat), "mdb_env_stat", detail: dataFile)
        func unreadable(_ reason: String) -> LMDBError {
            LMDBError(.ioError, operation: "open", message: "cannot read the data file's size", detail: "\(dataFile): \(reason)")
        }
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: dataFile)
        } catch {
            throw unreadable(error.localizedDescription)
        }
        guard let size = attributes[.size] as? Int else { throw unreadable("no size") }
        let pageSize = Int(environmentStat.ms_psize)
        let needed = (info.me_last_pgno + 1) * pageSize
        guard size < needed, pageSize > 0 else { return }
        guard let file = FileHandle(forReadingAtPath: dataFile) else { throw unreadable("cannot open it for reading") }
        defer { try? file.close() }
        let finding = LMDBFileCheck(file: file, fileSize: size, pageSize: pageSize)
            .check(lastPage: info.me_last_pgno, transactionID: info.me_last_txnid)
        if case .missing(let page) = finding {
            throw LMDBError(
                .corrupted, operation: "open",
                message: "the data file is shorter than the environment it holds (truncated?)",
                detail: "\(dataFile) is \(size) bytes, but the environment uses \(needed) bytes (pages 0…\(info.me_last_pgno) of \(pageSize) bytes; page \(page), in use, is past the end)")
        }
    }

    /// The database opened under `name`.
    ///
    /// - Throws: ``LMDBError/Code/databaseNotFound`` if it wasn't in the open's list.
    public func database(named name: String) throws -> LMDBDatabase {
        guard let database = databasesByName[name] else {
            throw LMDBError(
                .databaseNotFound, operation: "database(named:)",
                message: "no database named \"\(name)\" was opened", detail: path)
        }
        return database
    }

    /// The unnamed main database, if it was in the open's list (`DatabaseDescriptor(nil)`).
    public var unnamedDatabase: LMDBDatabase? { mainDatabase }

    // MARK: - Transactions

    /// Runs `body` in a read-only transaction that sees one consistent snapshot.
    ///
    /// Values read inside are borrowed from the memory map and can't leave the closure;
    /// return owned copies (`value(forKey:in:)`, or `Array` from a span) instead.
    /// Wraps `mdb_txn_begin(MDB_RDONLY)` … `mdb_txn_abort`.
    ///
    /// The snapshot is the newest commit on disk. LMDB shows readers a commit only once its
    /// writer has written the meta page *and* then published the transaction ID in the lock
    /// file; a writer killed between the two (a `SIGKILL` during the meta page's synchronous
    /// write) leaves its commit on disk — durable, the base of every later write — but hidden
    /// from readers until the next write transaction recovers the dead writer's lock. A read
    /// that finds its snapshot older than the newest meta page waits a few milliseconds for
    /// the writer to publish it (a live one is finishing its meta page's sync); if it hasn't,
    /// it takes LMDB's writer lock and lets it go (writing nothing), which publishes the
    /// commit, and begins again. Not in a read nested in another transaction on the same
    /// thread, nor while a thread of this process holds the writer gate (the newer commit is
    /// its own, about to be published, or a write there publishes it: the read takes the
    /// snapshot it has, without waiting), nor on an environment opened `MDB_RDONLY` (it
    /// can't take the lock).
    public func read<R>(_ body: (borrowing LMDBTransaction) throws -> R) throws -> R {
        let nested = resizeGate.isHeldByCurrentThread
        var caughtUp = false
        while true {
            // Only this read's own begin is retried: an MDB_MAP_RESIZED the body lets out (a
            // nested read's) must not run the body again.
            let attempt: ReadAttempt<R> = try resizeGate.withShared {
                let txn: OpaquePointer
                do {
                    txn = try beginTransaction(readOnly: true)
                } catch let error as LMDBError where error.code == .mapResized {
                    return .resized
                }
                // While a thread of this process holds the writer gate, a commit newer than the
                // snapshot is that live writer's (or one its next write publishes): no wait.
                if !nested, !caughtUp, !writerGate.isHeld, isBehindNewestCommit(txn) {
                    mdb_txn_abort(txn)
                    return .behind
                }
                defer { mdb_txn_abort(txn) }
                return .done(try body(LMDBTransaction(handle: txn, isReadOnly: true, state: nil)))
            }
            switch attempt {
            case .done(let result):
                return result
            case .behind:
                caughtUp = true
                try waitForPublication()
            case .resized:
                try refuseResizeInsideTransaction(
                    .mapResized,
                    "another process grew the map past this process's size, and this thread is inside a read transaction of this environment: a nested read can't adopt the new size until the outer one ends")
                try adoptResizedMap()
            }
        }
    }

    /// How one try at a read transaction ended.
    private enum ReadAttempt<R> {
        case done(R)
        case resized
        /// The snapshot is older than the newest meta page: a commit not yet published.
        case behind
    }

    /// Whether the read transaction `txn` sees an older transaction than the newest meta page
    /// of the data file holds (`mdb_txn_id` against `mdb_env_info`'s last transaction ID,
    /// which LMDB takes from the meta pages themselves, not from the lock file).
    private func isBehindNewestCommit(_ txn: OpaquePointer) -> Bool {
        var raw = MDB_envinfo()
        guard mdb_env_info(handle, &raw) == 0 else { return false }
        return mdb_txn_id(txn) < raw.me_last_txnid
    }

    /// Waits until the newest meta page's commit is published to readers: first for its
    /// writer to publish it (checking after 0.05, 0.1, 0.2 … 1.6 ms: a live writer does so as
    /// soon as its meta page is synced, and readers needn't queue for LMDB's writer lock,
    /// behind its next transaction); then, the writer presumably dead, by publishing it.
    ///
    /// - Throws: ``LMDBError/Code/writerLockBusy`` when the process's ``WriterLockWait``
    ///   policy gives up on another process's write transaction (``publishNewestCommit()``).
    private func waitForPublication() throws {
        var pause: UInt32 = 50
        while pause <= 1_600 {
            usleep(pause)
            pause *= 2
            if !isBehindNow() { return }
        }
        try publishNewestCommit()
    }

    /// Whether a read transaction begun now sees an older commit than the newest meta page
    /// (false when one can't be begun: the read's own begin reports that).
    private func isBehindNow() -> Bool {
        (try? resizeGate.withShared {
            let txn = try beginTransaction(readOnly: true)
            defer { mdb_txn_abort(txn) }
            return isBehindNewestCommit(txn)
        }) ?? false
    }

    /// Publishes a commit whose writer died before LMDB showed it to readers: begins a write
    /// transaction — LMDB's recovery of a dead owner's writer lock sets the lock file's
    /// transaction ID from the newest meta page — and aborts it, writing nothing. Waits for a
    /// live writer of another process still publishing its commit; does nothing while a
    /// thread of this process holds the writer gate (a write there publishes it; this thread,
    /// in ``holdingWrites(_:)``, must not wait for itself), or on an `MDB_RDONLY` environment.
    /// Errors of LMDB's are left to the read's own begin.
    ///
    /// Under the process's ``WriterLockWait`` policy (``setWriterLockWait(_:)``: `strata
    /// compact` and `revert`) another process's write transaction is waited for as the policy
    /// says — announced after its `announceAfter`, given up on after its timeout — and not at
    /// all once the commit is published meanwhile (a process taking a dead writer's lock
    /// publishes its commit; a live writer publishes its own as it lets the lock go). Before
    /// session 35 the begin waited in LMDB's lock, silently, for as long as that transaction
    /// ran, whatever the policy.
    ///
    /// - Throws: ``LMDBError/Code/writerLockBusy`` when the policy's timeout passes first.
    private func publishNewestCommit() throws {
        guard !shared.isReadOnly else { return }
        try writerGate.ifFree {
            guard try Self.awaitWriterLock(path: path, usesSubdirectory: options.usesSubdirectory, operation: "read", until: { !self.isBehindNow() })
            else { return }
            resizeGate.withShared {
                var txn: OpaquePointer?
                if mdb_txn_begin(handle, nil, 0, &txn) == 0, let txn { mdb_txn_abort(txn) }
            }
        }
    }

    /// On an environment LMDB opened `MDB_RDONLY`, the commit its reads see and the newest
    /// commit on disk (LMDB transaction IDs) when they differ for good: a writer of another
    /// process died after writing its commit's meta page and before publishing it (see
    /// ``read(_:)``), and a read-only environment can't publish it — its reads show the
    /// store as of the commit before, until another process writes. A difference that goes
    /// within about 3 ms (a live writer publishing) is not reported. Nil when the reads see
    /// the newest commit, and always on a writable environment (its reads publish it).
    public func unpublishedCommit() throws -> (visible: Int, newest: Int)? {
        guard shared.isReadOnly else { return nil }
        func look() throws -> (visible: Int, newest: Int)? {
            try resizeGate.withShared {
                let txn = try beginTransaction(readOnly: true)
                defer { mdb_txn_abort(txn) }
                var raw = MDB_envinfo()
                guard mdb_env_info(handle, &raw) == 0 else { return nil }
                let visible = Int(mdb_txn_id(txn))
                return visible < Int(raw.me_last_txnid) ? (visible, Int(raw.me_last_txnid)) : nil
            }
        }
        var pause: UInt32 = 50
        while pause <= 1_600 {
            guard try look() != nil else { return nil }
            usleep(pause)
            pause *= 2
        }
        return try look()
    }

    /// Throws instead of waiting forever when the calling thread is inside a transaction of
    /// this environment: a resize waits until no transaction of the process runs.
    private func refuseResizeInsideTransaction(_ code: LMDBError.Code, _ reason: String) throws {
        if resizeGate.isHeldByCurrentThread {
            throw LMDBError(code, operation: "resize", message: reason, detail: path)
        }
    }

    /// Runs `body` in a write transaction: it commits if `body` returns, aborts if it throws.
    ///
    /// Writes are serialised inside the process and run on the calling thread. When the
    /// map fills, the transaction is aborted, the map grows, and `body` **runs again**: keep
    /// it free of effects outside the transaction. Wraps `mdb_txn_begin` … `mdb_txn_commit`.
    ///
    /// - Throws: whatever `body` throws (after aborting); ``LMDBError`` from LMDB,
    ///   ``LMDBError/Code/mapAtMaximumSize`` if the map can't grow further,
    ///   ``LMDBError/Code/nestedWriteTransaction`` if this thread is already writing.
    public func write<R>(_ body: (borrowing LMDBTransaction) throws -> R) throws -> R {
        if options.isReadOnly {
            throw LMDBError(
                .readOnlyEnvironment, operation: "write",
                message: "the environment was opened read-only", detail: path)
        }
        return try writerGate.withExclusive {
            if let refusal = writeRefusal.withLock({ $0 }) { throw refusal }
            // Another process's write transaction, waited for as the process's policy says
            // (none: in LMDB's lock below, silently).
            try awaitWriterLock()
            while true {
                let state = WriteState()
                do {
                    return try resizeGate.withShared { try attemptWrite(body, state: state) }
                } catch let error as LMDBError where error.code == .mapResized {
                    try refuseResizeInsideTransaction(
                        .nestedWriteTransaction,
                        "another process grew the map past this process's size, and this write was started inside a read transaction of this environment on the same thread: it can't adopt the new size until the read ends")
                    try adoptResizedMap()
                } catch where state.hitMapFull {
                    try refuseResizeInsideTransaction(
                        .nestedWriteTransaction,
                        "the map is full, and this write was started inside a read transaction of this environment on the same thread: the map can't grow until the read ends")
                    try growMap()
                }
            }
        }
    }

    private func attemptWrite<R>(_ body: (borrowing LMDBTransaction) throws -> R, state: WriteState) throws -> R {
        let txn = try beginTransaction(readOnly: false)
        let result: R
        do {
            result = try body(LMDBTransaction(handle: txn, isReadOnly: false, state: state))
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
        // A commit into a data file deleted while open — its directory removed, or moved to
        // another file system — would "succeed" into the unlinked file and be lost with it.
        if let gone = dataFileGone() {
            mdb_txn_abort(txn)
            throw gone
        }
        // mdb_txn_commit frees the transaction on success and on failure alike.
        let code = mdb_txn_commit(txn)
        if code == MDB_MAP_FULL { state.hitMapFull = true }
        if code == EIO || code == ENOSPC, let free = freeBytesOnFileSystem(), free < 1 << 20 {
            // LMDB reports a short pwrite as EIO: on a full disk that hides the cause.
            throw LMDBError(
                .noSpace, operation: "mdb_txn_commit", message: String(cString: strerror(ENOSPC)),
                detail: "\(path): the commit's write failed (\(LMDBError.Code(rawValue: code))) with \(free) bytes free on the file system; the transaction was not committed")
        }
        try check(code, "mdb_txn_commit", detail: path)
        return result
    }

    /// The error for a data file deleted while open — its directory removed, or moved to
    /// another file system (a copy, then a delete) — or nil while it still has a name: no
    /// link left to the file LMDB has open (`fstat` of its descriptor, one system call, no
    /// I/O). A file renamed within its file system keeps its link: commits land in it at
    /// its new place.
    private func dataFileGone() -> LMDBError? {
        var descriptor: mdb_filehandle_t = -1
        guard mdb_env_get_fd(handle, &descriptor) == 0, descriptor >= 0, openFileIsLinked(descriptor) == false
        else { return nil }
        let file = options.usesSubdirectory ? (path as NSString).appendingPathComponent("data.mdb") : path
        return LMDBError(
            .dataFileGone, operation: "mdb_txn_commit",
            message: "the environment's data file was deleted while open",
            detail: "\(file) is gone (the store's directory was deleted, or moved to another file system, while open): a commit would go into the unlinked file and be lost, so the transaction was not committed; reopen the store where it is now")
    }

    /// The bytes this user may still write on the file system holding the environment
    /// (`statvfs`), or nil if it can't be asked.
    private func freeBytesOnFileSystem() -> Int? {
        var status = statvfs()
        guard statvfs(path, &status) == 0 else { return nil }
        return Int(clamping: UInt64(status.f_bavail).multipliedReportingOverflow(by: UInt64(status.f_frsize)).partialValue)
    }

    private func beginTransaction(readOnly: Bool) throws -> OpaquePointer {
        var txn: OpaquePointer?
        var result = mdb_txn_begin(handle, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn)
        if result == MDB_READERS_FULL {
            // Slots of processes that died since the open still count: clear them and retry.
            var dead: Int32 = 0
            if mdb_reader_check(handle, &dead) == 0, dead > 0 {
                result = mdb_txn_begin(handle, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn)
            }
            if result == MDB_READERS_FULL {
                throw LMDBError(
                    lmdbCode: result, operation: "mdb_txn_begin",
                    detail: "\(path): all \(info.maxReaders) reader slots are in use by open read transactions (raise LMDBEnvironment.Options.maxReaders, EventLog.Configuration.maximumReaders)")
            }
        }
        try check(result, "mdb_txn_begin", detail: path)
        guard let txn else {
            throw LMDBError(lmdbCode: LMDBError.Code.badTransaction.rawValue, operation: "mdb_txn_begin")
        }
        return txn
    }

    // MARK: - Map size

    /// The current map size in bytes.
    public var mapSize: Int { info.mapSize }

    /// Grows the map by `growthFactor`, waiting until no transaction of this process runs.
    private func growMap() throws {
        try resizeGate.withExclusive {
            let current = info.mapSize
            guard current < options.maximumMapSize else {
                throw LMDBError(
                    .mapAtMaximumSize, operation: "write",
                    message: "the map is full at its maximum size",
                    detail: "\(path): \(current) bytes; raise Options.maximumMapSize")
            }
            let (product, overflow) = current.multipliedReportingOverflow(by: max(options.growthFactor, 2))
            let next = overflow ? options.maximumMapSize : min(product, options.maximumMapSize)
            try check(mdb_env_set_mapsize(handle, next), "mdb_env_set_mapsize", detail: "\(path): \(next) bytes")
        }
    }

    /// Takes the size another process grew the map to (`mdb_env_set_mapsize(env, 0)`).
    private func adoptResizedMap() throws {
        try resizeGate.withExclusive {
            try check(mdb_env_set_mapsize(handle, 0), "mdb_env_set_mapsize", detail: path)
        }
    }

    /// Sets the map size now (for example before a large import), never below the data in use.
    public func setMapSize(_ bytes: Int) throws {
        try resizeGate.withExclusive {
            try check(mdb_env_set_mapsize(handle, bytes), "mdb_env_set_mapsize", detail: "\(path): \(bytes) bytes")
        }
    }

    // MARK: - Information and maintenance

    /// Facts about the environment (`mdb_env_info`).
    public struct Info: Sendable, Hashable {
        /// The map size in bytes.
        public let mapSize: Int
        /// The last page number in use.
        public let lastPageNumber: Int
        /// The ID of the last committed transaction.
        public let lastTransactionID: Int
        /// The reader table's size.
        public let maxReaders: Int
        /// Reader slots in use.
        public let readersInUse: Int
    }

    /// Facts about the environment now.
    public var info: Info {
        var raw = MDB_envinfo()
        mdb_env_info(handle, &raw)
        return Info(
            mapSize: raw.me_mapsize, lastPageNumber: raw.me_last_pgno, lastTransactionID: raw.me_last_txnid,
            maxReaders: Int(raw.me_maxreaders), readersInUse: Int(raw.me_numreaders))
    }

    /// The flags the environment is open with (`mdb_env_get_flags`).
    public var flags: EnvironmentFlags {
        var raw: UInt32 = 0
        mdb_env_get_flags(handle, &raw)
        return EnvironmentFlags(rawValue: raw)
    }

    /// Flushes the buffers to disk (`mdb_env_sync`); with `force`, even in `.fast` mode.
    public func sync(force: Bool = true) throws {
        try check(mdb_env_sync(handle, force ? 1 : 0), "mdb_env_sync", detail: path)
    }

    /// Clears reader slots left by dead processes (`mdb_reader_check`); returns how many.
    @discardableResult
    public func clearStaleReaders() throws -> Int {
        var dead: Int32 = 0
        try check(mdb_reader_check(handle, &dead), "mdb_reader_check", detail: path)
        return Int(dead)
    }

    /// The oldest snapshot an open read transaction sees — the smallest transaction ID in
    /// the reader table (`mdb_reader_list`), this process's readers and other processes'
    /// alike — or nil when no read transaction is open. Whatever a write transaction with
    /// a larger ID took away, no reader can still be looking at.
    public func oldestReaderSnapshot() throws -> Int? {
        final class Lowest { var value: Int? }
        let lowest = Lowest()
        let rc = withExtendedLifetime(lowest) {
            mdb_reader_list(handle, { message, context in
                guard let message, let context else { return 0 }
                let lowest = Unmanaged<AnyObject>.fromOpaque(context).takeUnretainedValue() as? Lowest
                // Lines are "pid thread txnid"; txnid is "-" for a slot not in a transaction,
                // and the header and "(no active readers)" lines have no number there.
                for line in String(cString: message).split(separator: "\n") {
                    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                    guard fields.count == 3, let id = Int(fields[2]) else { continue }
                    if let known = lowest?.value { lowest?.value = Swift.min(known, id) } else { lowest?.value = id }
                }
                return 0
            }, Unmanaged.passUnretained(lowest as AnyObject).toOpaque())
        }
        try check(rc, "mdb_reader_list", detail: path)
        return lowest.value
    }

    /// Runs `body` while no write transaction of this process runs on the environment,
    /// through this value or any other sharing it: writes started meanwhile wait until `body`
    /// returns. A copy made inside (``copy(to:compacting:)``) misses no write of this process
    /// that `body`'s caller goes on to refuse (``refuseWrites(throwing:)``).
    ///
    /// `body` must not write to the environment itself (that throws
    /// ``LMDBError/Code/nestedWriteTransaction``); it may read it.
    public func holdingWrites<R>(_ body: () throws -> R) throws -> R {
        try writerGate.withExclusive(body)
    }

    /// Makes every later write through this value throw `error` before it starts a
    /// transaction; other values sharing the environment write on. Used when the store it
    /// holds was moved elsewhere: a write that reached the old files would be lost.
    public func refuseWrites(throwing error: any Error & Sendable) {
        writeRefusal.withLock { $0 = error }
    }

    /// Copies the environment to `destination` (`mdb_env_copy2`), with `compacting`
    /// leaving out free pages so the copy is as small as the live data.
    ///
    /// `destination` is a directory that exists and is empty, or with
    /// ``Options/usesSubdirectory`` false, the path of a file that doesn't exist yet.
    public func copy(to destination: String, compacting: Bool) throws {
        try check(
            mdb_env_copy2(handle, destination, compacting ? UInt32(MDB_CP_COMPACT) : 0), "mdb_env_copy2",
            detail: destination)
    }
}

/// What a write attempt learned, kept outside the transaction so a retry can see it.
final class WriteState {
    /// Whether LMDB answered `MDB_MAP_FULL` anywhere in the attempt (a put or the commit).
    var hitMapFull = false
}
