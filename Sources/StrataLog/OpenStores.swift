import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The stores this process has open (one count per live ``EventLog``), by the store
/// directory's device and inode: what ``EventLog/vacuum(path:)`` checks before it replaces
/// `data.mdb`, since a handle still open would keep writing to the replaced file.
enum OpenStores {
    struct Identity: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64
    }

    /// Keeps its store counted as open while it lives.
    final class Token: Sendable {
        let identity: Identity?
        init(_ identity: Identity?) { self.identity = identity }
        deinit {
            guard let identity else { return }
            OpenStores.counts.withLock { counts in
                let remaining = (counts[identity] ?? 1) - 1
                counts[identity] = remaining > 0 ? remaining : nil
            }
        }
    }

    private static let counts = Mutex<[Identity: Int]>([:])

    static func identity(_ path: String) -> Identity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Counts the store at `path` as open until the token goes.
    static func register(_ path: String) -> Token {
        let identity = identity(path)
        if let identity { counts.withLock { $0[identity, default: 0] += 1 } }
        return Token(identity)
    }

    /// Whether an ``EventLog`` in this process has the store at `path` open.
    static func isOpenHere(_ path: String) -> Bool {
        guard let identity = identity(path) else { return false }
        return counts.withLock { ($0[identity] ?? 0) > 0 }
    }

    /// The ID of another process that has the LMDB environment at `path` open, or nil.
    ///
    /// Every process with an LMDB environment open holds a shared `fcntl` lock on the first
    /// byte of its `lock.mdb`; asking (`F_GETLK`) for an exclusive one there finds it. Call
    /// only when this process has no handle on the store: closing any descriptor of the
    /// lock file drops this process's own locks on it.
    static func otherProcess(holding path: String) -> Int32? {
        let lockPath = (path as NSString).appendingPathComponent("lock.mdb")
        var fd = open(lockPath, O_RDWR)
        if fd < 0 { fd = open(lockPath, O_RDONLY) }
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 0
        lock.l_len = 1
        guard fcntl(fd, F_GETLK, &lock) == 0, lock.l_type != Int16(F_UNLCK) else { return nil }
        return lock.l_pid
    }
}
