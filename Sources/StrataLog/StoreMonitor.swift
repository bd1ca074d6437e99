import Foundation
import StrataStorage
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Tells observers when a store's head moves: when a transaction is committed by this
/// process (at once, from the committing thread) or by **another process** (noticed without
/// polling the disk in a loop). Every ``EventLog`` has one, ``EventLog/storeMonitor``.
///
/// On Linux the monitor watches the environment's data file with inotify while anyone
/// observes: LMDB writes a commit's pages and then its meta page with `pwrite`, and each
/// write raises `IN_MODIFY`. LMDB publishes the commit to readers just *after* its last
/// write, so after each burst of file events the monitor re-reads the head at once and again
/// 1, 4, 16, 64 and 256 ms later (the timer restarts with every event, and stops after the
/// last of those re-reads; nothing runs while the store is quiet). The watch is one-shot and
/// re-armed at most once a millisecond, so a stream of commits costs little. Elsewhere there is no file
/// watcher: commits by this process are still announced, and ``checkForChanges()`` reads the
/// head when asked (`Specs/0009-history.md` §5).
///
/// Observers are told the new head, never an older one; a burst of commits may be announced
/// as one move. To miss nothing, register first, then read what you need from the store, and
/// read again from where you stopped after each announcement.
///
/// ```swift
/// let observation = log.storeMonitor.addObserver { head in print("head is now \(head)") }
/// for await head in log.storeMonitor.changes() { … }    // the same, as an AsyncSequence
/// ```
public final class StoreMonitor: Sendable {
    private struct State {
        var knownHead: UInt64 = 0
        var observers: [UInt64: @Sendable (UInt64) -> Void] = [:]
        var nextID: UInt64 = 1
        var watcher: FileWatcher?
        var isShutDown = false
    }

    private let state = Mutex(State())
    private let readHead: @Sendable () throws -> UInt64
    /// The file watched for other processes' commits (the LMDB data file).
    public let watchedFile: String

    init(watchedFile: String, readHead: @escaping @Sendable () throws -> UInt64) {
        self.watchedFile = watchedFile
        self.readHead = readHead
    }

    deinit { shutdown() }

    /// Whether this platform has a file watcher, so other processes' commits are noticed
    /// without being asked (Linux: inotify). Elsewhere call ``checkForChanges()``.
    public static var canWatchOtherProcesses: Bool {
        #if os(Linux)
        true
        #else
        false
        #endif
    }

    /// The newest head this monitor has seen (announced or read).
    public var lastKnownHead: UInt64 { state.withLock { $0.knownHead } }

    /// The number of observers registered now (streams from ``changes()`` included).
    public var observerCount: Int { state.withLock { $0.observers.count } }

    /// Whether a file watcher runs now (it runs while there are observers, on platforms that
    /// have one).
    public var isWatchingFile: Bool { state.withLock { $0.watcher != nil } }

    /// Reads the head from the store and, if it moved past what the monitor knew, tells the
    /// observers: the fallback for platforms without a file watcher, and a cheap check for
    /// code that wants to be sure now. Returns the head read.
    @discardableResult
    public func checkForChanges() throws -> UInt64 {
        let head = try readHead()
        publish(head)
        return head
    }

    /// Records that the head is now `head` and tells every observer if it moved forward.
    func publish(_ head: UInt64) {
        let handlers: [@Sendable (UInt64) -> Void]? = state.withLock { state in
            guard head > state.knownHead else { return nil }
            state.knownHead = head
            return state.observers.isEmpty ? nil : Array(state.observers.values)
        }
        guard let handlers else { return }
        for handler in handlers { handler(head) }
    }

    /// Calls every observer with the head last known, moved or not: wakes those waiting on
    /// this store to look again (the store was moved, and they follow the new one).
    package func wakeObservers() {
        let (head, handlers) = state.withLock { state in (state.knownHead, Array(state.observers.values)) }
        for handler in handlers { handler(head) }
    }

    /// Calls `handler` with the new head each time it moves, until the returned observation
    /// is cancelled or released. `handler` runs on the committing thread (this process's
    /// commits) or the watcher's thread (other processes'): keep it short and don't block.
    public func addObserver(_ handler: @escaping @Sendable (UInt64) -> Void) -> StoreObservation {
        // Learn the current head first, so the new observer hears only later moves.
        _ = try? checkForChanges()
        let (id, start) = state.withLock { state -> (UInt64, Bool) in
            let id = state.nextID
            state.nextID += 1
            state.observers[id] = handler
            return (id, state.watcher == nil && !state.isShutDown)
        }
        if start { startWatcher() }
        return StoreObservation { [weak self] in self?.removeObserver(id) }
    }

    /// The head each time it moves, as an `AsyncStream` that keeps only the newest value (a
    /// slow consumer sees the latest head, never a backlog). The stream ends when its task
    /// is cancelled or the stream is released.
    public func changes() -> AsyncStream<UInt64> {
        let (stream, continuation) = AsyncStream.makeStream(of: UInt64.self, bufferingPolicy: .bufferingNewest(1))
        let observation = addObserver { head in continuation.yield(head) }
        continuation.onTermination = { _ in observation.cancel() }
        return stream
    }

    private func removeObserver(_ id: UInt64) {
        // The handler is released after the lock: it may hold the last reference to what
        // owns this monitor, whose release shuts the monitor down (locking it again).
        let (watcher, handler) = state.withLock { state -> (FileWatcher?, (@Sendable (UInt64) -> Void)?) in
            let handler = state.observers.removeValue(forKey: id)
            guard state.observers.isEmpty, let watcher = state.watcher else { return (nil, handler) }
            state.watcher = nil
            return (watcher, handler)
        }
        watcher?.stop()
        _ = consume handler
    }

    /// Stops the watcher for good (the store is closing); observers hear nothing more.
    func shutdown() {
        // The handlers too are released after the lock (see `removeObserver`).
        let (watcher, handlers) = state.withLock { state -> (FileWatcher?, [UInt64: @Sendable (UInt64) -> Void]) in
            state.isShutDown = true
            let handlers = state.observers
            state.observers.removeAll()
            defer { state.watcher = nil }
            return (state.watcher, handlers)
        }
        watcher?.stop()
        _ = consume handlers
    }

    private func startWatcher() {
        #if os(Linux)
        guard let watcher = FileWatcher(path: watchedFile, onWake: { [weak self] in _ = try? self?.checkForChanges() }) else {
            return
        }
        let keep = state.withLock { state -> Bool in
            guard state.watcher == nil, !state.observers.isEmpty, !state.isShutDown else { return false }
            state.watcher = watcher
            return true
        }
        if keep { watcher.start() } else { watcher.stop() }
        #endif
    }
}

/// An observer's registration with a ``StoreMonitor``: cancel it, or release it, to stop
/// being called.
public final class StoreObservation: Sendable {
    private let action: Mutex<(@Sendable () -> Void)?>

    /// An observation that runs `cancel` when cancelled or released.
    package init(_ cancel: @escaping @Sendable () -> Void) {
        action = Mutex(cancel)
    }

    deinit { cancel() }

    /// Stops the observer; calling it again does nothing.
    public func cancel() {
        let cancel = action.withLock { action -> (@Sendable () -> Void)? in
            defer { action = nil }
            return action
        }
        cancel?()
    }
}

#if os(Linux)
/// A thread blocked in `poll(2)` on an inotify descriptor watching one file for `IN_MODIFY`,
/// and a pipe that stops it. After each burst of events it calls `onWake` at once and again
/// after 1, 4, 16, 64 and 256 ms of quiet (see ``StoreMonitor``). It handles events at most
/// once per millisecond: during a stream of commits (each raises two or more events) the
/// kernel coalesces them meanwhile, so the watcher costs a writer in this process almost
/// nothing, and another process's commit is still noticed within about a millisecond.
final class FileWatcher: Sendable {
    private static let recheckDelays: [Int32] = [0, 1, 4, 16, 64, 256]
    /// The least time between two handlings of file events, in nanoseconds.
    private static let minimumInterval: Int64 = 1_000_000

    private let path: String
    private let inotify: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let onWake: @Sendable () -> Void
    private let finished = DispatchSemaphore(value: 0)
    private let thread = Mutex<pthread_t?>(nil)
    private let started = Mutex(false)
    private let stopped = Mutex(false)

    init?(path: String, onWake: @escaping @Sendable () -> Void) {
        let fd = inotify_init1(Int32(O_NONBLOCK | O_CLOEXEC))
        guard fd >= 0 else { return nil }
        guard inotify_add_watch(fd, path, Self.mask) >= 0 else {
            close(fd)
            return nil
        }
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else {
            close(fd)
            return nil
        }
        for end in pipeFDs { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        self.path = path
        inotify = fd
        wakeRead = pipeFDs[0]
        wakeWrite = pipeFDs[1]
        self.onWake = onWake
    }

    /// Writes to the file (IN_MODIFY), and the file going away (vacuum replaces it); one
    /// event, then the watch is gone until re-armed (IN_ONESHOT), so a stream of writes
    /// costs the kernel nothing between two handlings.
    private static let mask = UInt32(IN_MODIFY) | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF) | UInt32(IN_ONESHOT)

    func start() {
        started.withLock { $0 = true }
        let thread = Thread { [self] in run() }
        thread.name = "strata.store-monitor"
        thread.start()
    }

    /// Stops the thread and waits for it (unless called from the thread itself).
    func stop() {
        let first = stopped.withLock { stopped -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        let isSelf = thread.withLock { thread in thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
        if !started.withLock({ $0 }) {
            closeAll()
        } else if !isSelf {
            finished.wait()
        }
    }

    private static func monotonicNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    private func closeAll() {
        close(inotify)
        close(wakeRead)
        close(wakeWrite)
    }

    private func run() {
        thread.withLock { $0 = pthread_self() }
        defer {
            closeAll()
            finished.signal()
        }
        // Start as if an event had just arrived: a commit whose last write came before the
        // watch was added is still noticed.
        var step = 0
        var buffer = [UInt8](repeating: 0, count: 4096)
        var lastHandled: Int64 = 0
        while true {
            let timeout = step < Self.recheckDelays.count ? Self.recheckDelays[step] : -1
            var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            if fds[1].revents != 0 { return }
            if fds[0].revents != 0 {
                // Rate limit: let a burst's events coalesce in the kernel's queue.
                let since = Self.monotonicNanoseconds() - lastHandled
                if since < Self.minimumInterval {
                    var pause = timespec(tv_sec: 0, tv_nsec: Int(Self.minimumInterval - since))
                    _ = nanosleep(&pause, nil)
                }
                while buffer.withUnsafeMutableBytes({ read(inotify, $0.baseAddress, $0.count) }) > 0 {}
                // Re-arm (the one-shot watch fired), on the file now at the path (vacuum may
                // have replaced it), then read the head: a commit that finished before the
                // re-arm is seen by this read, a later one raises a new event.
                _ = inotify_add_watch(inotify, path, Self.mask)
                onWake()
                lastHandled = Self.monotonicNanoseconds()
                step = 1
                continue
            }
            // A timer expired: re-read the head.
            onWake()
            step += 1
        }
    }
}
#endif
