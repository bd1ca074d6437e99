#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A reader-writer lock over `pthread_rwlock_t`, used to keep LMDB's map resize
/// (`mdb_env_set_mapsize`) away from every transaction in the process.
///
/// Transactions take it shared; a resize takes it exclusively, which LMDB requires
/// ("no transactions active in this process").
final class ResizeGate: Sendable {
    // The lock needs a stable address, so it lives in its own allocation; access goes
    // only through pthread calls, which are thread-safe.
    nonisolated(unsafe) private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(lock, nil)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    func withShared<R>(_ body: () throws -> R) rethrows -> R {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    func withExclusive<R>(_ body: () throws -> R) rethrows -> R {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}

/// The in-process writer lock: one write transaction at a time, and a clear error
/// (instead of LMDB's self-deadlock) when a thread already inside a write starts another.
final class WriterGate: Sendable {
    nonisolated(unsafe) private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// The thread holding the gate, or 0.
    private let owner = Atomic<UInt>(0)

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withExclusive<R>(_ body: () throws -> R) throws -> R {
        let me = currentThreadID()
        if owner.load(ordering: .acquiring) == me {
            throw LMDBError(
                .nestedWriteTransaction, operation: "write",
                message: "a write transaction was started inside another on the same thread")
        }
        pthread_mutex_lock(mutex)
        owner.store(me, ordering: .releasing)
        defer {
            owner.store(0, ordering: .releasing)
            pthread_mutex_unlock(mutex)
        }
        return try body()
    }
}

/// A number identifying the calling thread (never 0).
func currentThreadID() -> UInt {
    #if canImport(Darwin)
    return UInt(bitPattern: pthread_self())
    #else
    return UInt(pthread_self())
    #endif
}
