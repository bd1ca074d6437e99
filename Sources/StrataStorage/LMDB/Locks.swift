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
    /// A thread-specific count of this gate's shared holds by the thread (nil if the process
    /// ran out of keys: then nothing is known, as before).
    private let depthKey: pthread_key_t?

    init() {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(lock, nil)
        var key = pthread_key_t()
        depthKey = pthread_key_create(&key, nil) == 0 ? key : nil
    }

    deinit {
        if let depthKey { pthread_key_delete(depthKey) }
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    /// How many shared holds the calling thread has on this gate.
    private var depth: Int {
        guard let depthKey else { return 0 }
        return Int(bitPattern: pthread_getspecific(depthKey))
    }

    /// Whether the calling thread holds the gate shared (is inside a transaction): then an
    /// exclusive hold would wait for itself forever.
    var isHeldByCurrentThread: Bool { depth > 0 }

    func withShared<R>(_ body: () throws -> R) rethrows -> R {
        pthread_rwlock_rdlock(lock)
        let outer = depth
        if let depthKey { pthread_setspecific(depthKey, UnsafeRawPointer(bitPattern: outer + 1)) }
        defer {
            if let depthKey { pthread_setspecific(depthKey, UnsafeRawPointer(bitPattern: outer)) }
            pthread_rwlock_unlock(lock)
        }
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

    /// Whether some thread of this process holds the gate (is writing, or holding writes).
    var isHeld: Bool { owner.load(ordering: .acquiring) != 0 }

    /// Runs `body` holding the gate if no thread holds it now (`pthread_mutex_trylock`);
    /// otherwise does nothing.
    func ifFree(_ body: () throws -> Void) rethrows {
        guard pthread_mutex_trylock(mutex) == 0 else { return }
        owner.store(currentThreadID(), ordering: .releasing)
        defer {
            owner.store(0, ordering: .releasing)
            pthread_mutex_unlock(mutex)
        }
        try body()
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
