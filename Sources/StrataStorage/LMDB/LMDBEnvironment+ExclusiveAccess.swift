import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension LMDBEnvironment {
    /// Who has the environment in the directory `path` open, or nil when nobody does: `"this
    /// process"`, `"process 4242"` (another process holding the lock file's lock), or
    /// `"another process"` when the holder can't be named.
    ///
    /// A snapshot: an open may start right after. To keep opens out while working on the
    /// files, use ``withExclusiveAccess(path:operation:_:)``.
    public static func openedBy(path: String) -> String? {
        let open = EnvironmentRegistry.lock.withLock {
            EnvironmentIdentity(path: path).map { EnvironmentRegistry.open[$0] != nil } ?? false
        }
        if open { return "this process" }
        let lockFile = (path as NSString).appendingPathComponent("lock.mdb")
        return lockFileHolder(lockFile).map { "process \($0)" }
    }

    /// Runs `body` while nobody — in this process or another — has the environment in the
    /// directory `path` open, and keeps opens out until it returns: for work on the
    /// environment's files themselves (deleting them, putting others in their place).
    ///
    /// It refuses, with ``LMDBError/Code/incompatibleOpen`` naming `operation`, the path and
    /// who has it open, when this process has it open or another process holds its lock
    /// file. Meanwhile it holds the registry's lock (an open in this process waits) and an
    /// exclusive `fcntl` lock on the lock file's first byte (an open in another process
    /// waits; `lock.mdb` is created if it is missing). `body` must not open an environment.
    ///
    /// - Throws: ``LMDBError`` as above or for a lock file that can't be opened; what `body`
    ///   throws.
    public static func withExclusiveAccess<R>(path: String, operation: String, _ body: () throws -> R) throws -> R {
        let lockFile = (path as NSString).appendingPathComponent("lock.mdb")
        EnvironmentRegistry.lock.lock()
        defer { EnvironmentRegistry.lock.unlock() }
        if let identity = EnvironmentIdentity(path: path), EnvironmentRegistry.open[identity] != nil {
            throw LMDBError(
                .incompatibleOpen, operation: operation,
                message: "the store is open in this process; close it first", detail: path)
        }
        let lockDescriptor = open(lockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard lockDescriptor >= 0 else {
            let code = errno
            throw LMDBError(lmdbCode: code, operation: operation, detail: "\(lockFile): cannot open the lock file")
        }
        // Closing the descriptor drops the lock.
        defer { close(lockDescriptor) }
        var lock = firstByteWriteLock()
        guard fcntl(lockDescriptor, F_SETLK, &lock) == 0 else {
            let holder = lockFileHolder(lockFile).map { "process \($0)" } ?? "another process"
            throw LMDBError(
                .incompatibleOpen, operation: operation,
                message: "the store is open in \(holder); close it first", detail: path)
        }
        return try body()
    }
}

extension LMDBError {
    /// `OPERATION: the store is open in HOLDER; close it first (…) — PATH`, with
    /// ``Code/incompatibleOpen``: what ``LMDBEnvironment/withExclusiveAccess(path:operation:_:)``
    /// throws, for a caller that checked ``LMDBEnvironment/openedBy(path:)`` first.
    public static func storeOpen(_ path: String, by holder: String, operation: String) -> LMDBError {
        LMDBError(.incompatibleOpen, operation: operation, message: "the store is open in \(holder); close it first", detail: path)
    }
}
