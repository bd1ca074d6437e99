import Dispatch

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

    /// Whether the calling code is already running on this executor's queue.
    var isCurrent: Bool {
        isMain ? DispatchQueue.getSpecific(key: Self.mainKey) == true : DispatchQueue.getSpecific(key: Self.key) == ObjectIdentifier(self)
    }
}

import Foundation
