import Dispatch
import Foundation

/// The serial executor a context's actor runs on: a private dispatch queue, or the main
/// queue for a main-queue context (Core Data's concurrency types).
final class ContextExecutor: SerialExecutor {
    let queue: DispatchQueue
    let isMain: Bool
    static let key = DispatchSpecificKey<ObjectIdentifier>()

    init(label: String) {
        queue = DispatchQueue(label: label)
        isMain = false
        queue.setSpecific(key: Self.key, value: ObjectIdentifier(self))
    }

    init(main: Void) {
        queue = DispatchQueue.main
        isMain = true
        // Marks the main queue itself: under `dispatchMain()` its blocks may run on a thread
        // that isn't the process's first thread, so `Thread.isMainThread` can't tell.
        DispatchQueue.main.setSpecific(key: Self.mainKey, value: true)
    }

    static let mainKey = DispatchSpecificKey<Bool>()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        isMain ? MainActor.sharedUnownedExecutor : UnownedSerialExecutor(ordinary: self)
    }

    func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }

    /// Whether the calling code is already running on this executor's queue: directly, or
    /// inside a `performAndWait` it made on another context's queue (a `queue.sync`, which
    /// runs the block on the waiting thread while that thread still holds this queue).
    var isCurrent: Bool {
        isOnOwnQueue || Self.holds(identity)
    }

    /// Whether the calling code runs on this executor's queue itself (or one targeting it).
    private var isOnOwnQueue: Bool {
        isMain ? DispatchQueue.getSpecific(key: Self.mainKey) == true : DispatchQueue.getSpecific(key: Self.key) == ObjectIdentifier(self)
    }

    /// Identifies the executor among the held queues: the main queue's executors are all one.
    private var identity: ObjectIdentifier { isMain ? ObjectIdentifier(ContextExecutor.self) : ObjectIdentifier(self) }

    /// The queues the current thread holds while it waits in a `performAndWait` (a
    /// `queue.sync` on another context's queue). A child's save or fault, run that way from
    /// its parent's queue — the main queue, for a child of the view context used with
    /// `performAndWait` from main-thread code — reaches the parent with the parent's
    /// `performAndWait`; that must run at once, as Core Data's does: a `queue.sync` on a queue
    /// the thread already holds traps in libdispatch ("dispatch_sync called on queue already
    /// owned by current thread") or deadlocks. Kept per thread (not as a task-local value,
    /// which a `Task` started inside would inherit on another thread).
    private static func holds(_ identity: ObjectIdentifier) -> Bool {
        guard let box = pthread_getspecific(heldKey) else { return false }
        return Unmanaged<HeldQueues>.fromOpaque(box).takeUnretainedValue().identities.contains(identity)
    }

    private static let heldKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { box in
            guard let box else { return }
            Unmanaged<HeldQueues>.fromOpaque(box).release()
        }
        return key
    }()

    /// Runs `body` on this executor's queue with `queue.sync`, noting the queue the calling
    /// thread holds (if it runs on one) for ``isCurrent`` while it waits.
    func sync<T>(_ body: () throws -> T) rethrows -> T {
        let current: ObjectIdentifier? = DispatchQueue.getSpecific(key: Self.key)
            ?? (DispatchQueue.getSpecific(key: Self.mainKey) == true ? ObjectIdentifier(ContextExecutor.self) : nil)
        guard let current else { return try queue.sync(execute: body) }
        let box: HeldQueues
        if let existing = pthread_getspecific(Self.heldKey) {
            box = Unmanaged<HeldQueues>.fromOpaque(existing).takeUnretainedValue()
        } else {
            box = HeldQueues()
            pthread_setspecific(Self.heldKey, Unmanaged.passRetained(box).toOpaque())
        }
        box.identities.append(current)
        defer { box.identities.removeLast() }
        return try queue.sync(execute: body)
    }
}

/// One thread's held queues (``ContextExecutor/sync(_:)``); only its own thread uses it.
private final class HeldQueues {
    /// A stack: each waiting `performAndWait` pushes the queue its thread holds.
    var identities: [ObjectIdentifier] = []
}
