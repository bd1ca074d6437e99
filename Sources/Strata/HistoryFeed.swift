public import StrataLog
import Synchronization

/// A live change feed: the transactions a ``HistoryRequest`` selects, oldest first — those
/// already committed, then each new one as it is committed, by this process or another —
/// as an `AsyncSequence` (`Specs/0009-history.md` §4).
///
/// ```swift
/// for try await transaction in try coordinator.historyFeed(after: savedToken) {
///     try apply(transaction)
///     savedToken = transaction.token
/// }
/// ```
///
/// - **Exactly once, in order**: the iterator keeps a cursor (the last sequence it read) and
///   reads the log after it; nothing is delivered twice or skipped, whatever the commit rate.
/// - **Pull-based**: transactions are read from the log in batches of at most
///   ``batchSize`` as the consumer asks; a slow consumer holds at most one batch in memory,
///   never a backlog.
/// - **Live**: when caught up, the iterator waits for the store's head to move
///   (``StoreMonitor``: this process's commits at once; other processes' through a file
///   watcher on Linux). It doesn't poll.
/// - **Cancellation**: when the consuming task is cancelled, the iterator ends (returns nil);
///   start a new feed after the last token processed to resume.
/// - The feed ends after the request's sequence range or limit; otherwise it never ends.
/// - It throws ``HistoryError/historyPurged(_:)`` if a purge removes history it hasn't read
///   yet, the request's errors (``HistoryError``) on the first `next()`, and
///   ``HistoryError/store(_:underlying:)`` when the log is damaged (a compacted segment
///   file damaged or missing, a damaged event), naming the file and the frame or the event.
public struct HistoryFeed: AsyncSequence, Sendable {
    /// The transactions.
    public typealias Element = HistoryTransaction
    /// Any error: ``HistoryError`` (a damaged log's as ``HistoryError/store(_:underlying:)``).
    public typealias Failure = any Error

    let store: PersistentStore
    /// The transactions to deliver.
    public let request: HistoryRequest
    /// The most transactions read from the log at a time (default 64).
    public let batchSize: Int

    /// `store`: where the feed starts reading; it follows the store when it is moved
    /// (``PersistentStoreCoordinator/migratePersistentStore(_:to:configuration:type:)``).
    init(store: PersistentStore, request: HistoryRequest, batchSize: Int) {
        self.store = store
        self.request = request
        self.batchSize = Swift.max(1, batchSize)
    }

    /// A new iterator, starting at the request's point.
    public func makeAsyncIterator() -> Iterator {
        Iterator(store: store, request: request, batchSize: batchSize)
    }

    /// Reads the feed; not `Sendable` (use it from one task).
    public struct Iterator: AsyncIteratorProtocol {
        var store: PersistentStore
        let request: HistoryRequest
        let batchSize: Int
        private var resolved: ResolvedHistoryRequest?
        private var buffer: [HistoryTransaction] = []
        private var position = 0
        private var delivered = 0
        private var finished = false
        private var changes: AsyncStream<UInt64>.Iterator?

        init(store: PersistentStore, request: HistoryRequest, batchSize: Int) {
            self.store = store
            self.request = request
            self.batchSize = batchSize
        }

        /// The next transaction: at once if one is committed after the last delivered, else
        /// when the next is committed; nil once the feed has ended or its task is cancelled.
        public mutating func next() async throws -> HistoryTransaction? {
            while !finished {
                if Task.isCancelled {
                    finish()
                    break
                }
                if position < buffer.count {
                    let transaction = buffer[position]
                    position += 1
                    delivered += 1
                    if let limit = resolved?.limit, limit > 0, delivered >= limit { finish() }
                    return transaction
                }
                // The store moved (same UUID and history): read on from the new one. The
                // store's own successor says so — a consumer's feed has no coordinator.
                let successor = store.current
                if successor !== store {
                    store = successor
                    changes = nil
                }
                // Listen before reading, so a commit right after the read still wakes us.
                if changes == nil {
                    changes = store.log.storeMonitor.changes().makeAsyncIterator()
                    // A move that finished before we listened woke the old store's listeners
                    // without us: look again.
                    if store.current !== store { continue }
                }
                let store = self.store
                let request = self.request
                let current = resolved
                let batchSize = self.batchSize
                let delivered = self.delivered
                let (state, batch, examined, head) = try HistoryError.wrappingStoreFailures(
                    "reading the history feed after \(current?.after ?? request.afterToken?.sequence ?? 0) failed"
                ) {
                    try store.log.read { reader in
                        let state = try current ?? store.resolve(request, reader)
                        let maximum = state.limit > 0 ? Swift.min(batchSize, state.limit - delivered) : batchSize
                        let upTo = state.after + UInt64(batchSize)
                        let (batch, examined) = try store.transactions(state, upTo: upTo, maximum: maximum, reader)
                        return (state, batch, examined, try reader.head)
                    }
                }
                resolved = state
                resolved?.after = examined
                buffer = batch
                position = 0
                if !batch.isEmpty { continue }
                if let through = state.through, examined >= through {
                    finish()
                    break
                }
                if examined < head { continue }
                // Caught up: wait for the head to move (nil: the task was cancelled).
                guard var waiting = changes else { break }
                let moved = await waiting.next()
                changes = waiting
                if moved == nil { finish() }
            }
            return nil
        }

        private mutating func finish() {
            finished = true
            buffer = []
            changes = nil
        }
    }
}

extension PersistentStoreCoordinator {
    /// A live feed of the transactions `request` selects: those already committed, then new
    /// ones as they are committed (see ``HistoryFeed``). Without a token or range it starts
    /// at the beginning of the history the store keeps.
    ///
    /// - Throws: ``ContextError/noPersistentStore`` without a store. The request's own
    ///   errors come from the feed's first `next()`.
    public func historyFeed(_ request: HistoryRequest = HistoryRequest(), batchSize: Int = 64) throws -> HistoryFeed {
        HistoryFeed(store: try requireStore(), request: request, batchSize: batchSize)
    }

    /// A live feed of every transaction after `token` (nil: from the beginning of the
    /// history the store keeps). To follow only new transactions, pass
    /// ``currentHistoryToken()``.
    public func historyFeed(after token: HistoryToken?) throws -> HistoryFeed {
        try historyFeed(.after(token))
    }

    /// The store's head — as a token — each time it moves, by this process's commits or
    /// another's (the ``StoreMonitor`` of the store's log). Keeps only the newest value for a
    /// slow consumer; ends when the consuming task is cancelled or the stream is released.
    /// Read the history after your last token on each value, so nothing is missed.
    ///
    /// - Throws: ``ContextError/noPersistentStore`` without a store.
    public func storeChanges() throws -> AsyncStream<HistoryToken> {
        let (stream, continuation) = AsyncStream.makeStream(of: HistoryToken.self, bufferingPolicy: .bufferingNewest(1))
        let observation = try observeStoreChanges { token in continuation.yield(token) }
        continuation.onTermination = { _ in observation.cancel() }
        return stream
    }

    /// Calls `handler` with the new head each time the store's head moves ("call me when
    /// the store changes"), until the observation is cancelled or released. `handler` runs
    /// on the committing thread or the store monitor's thread: keep it short.
    ///
    /// - Throws: ``ContextError/noPersistentStore`` without a store.
    public func observeStoreChanges(_ handler: @escaping @Sendable (HistoryToken) -> Void) throws -> StoreObservation {
        let observer = StoreChangeObserver(handler)
        observer.observe(try requireStore())
        return StoreObservation { observer.cancel() }
    }

    /// The token of the newest transaction in the store (Core Data's
    /// `currentPersistentHistoryToken(fromStores:)`): fetch history after it later to see
    /// only what changed since now. Nil without a store, when `stores` doesn't include the
    /// coordinator's, or when its head can't be read. An empty store's token is sequence 0,
    /// before every transaction.
    public func currentPersistentHistoryToken(fromStores stores: [PersistentStore]? = nil) -> HistoryToken? {
        guard let store = persistentStores.first, stores?.contains(where: { $0 === store }) ?? true,
            let head = try? store.log.head
        else { return nil }
        return HistoryToken(storeIdentifier: store.identifier, sequence: head)
    }

    /// Reads the store's head now and tells observers if it moved (the fallback where no
    /// file watcher runs, and a cheap check when a context next runs). Returns the current
    /// token.
    ///
    /// - Throws: ``ContextError/noPersistentStore`` without a store;
    ///   ``HistoryError/store(_:underlying:)`` when the head can't be read.
    @discardableResult
    public func checkForStoreChanges() throws -> HistoryToken {
        let store = try requireStore()
        let head = try HistoryError.wrappingStoreFailures("reading the store's head failed") { try store.log.storeMonitor.checkForChanges() }
        return HistoryToken(storeIdentifier: store.identifier, sequence: head)
    }
}

/// Observes the head of a store, and of the store it is moved to when it moves
/// (``PersistentStoreCoordinator/migratePersistentStore(_:to:configuration:type:)`` wakes the
/// old store's observers once the new one is in place): the observation the coordinator's
/// ``PersistentStoreCoordinator/observeStoreChanges(_:)`` and
/// ``PersistentStoreCoordinator/storeChanges()`` return.
///
/// It holds the stores it observes weakly, as their monitors' observers did before moves were
/// followed: an observation doesn't keep a store open that its coordinator no longer has (it
/// can then be destroyed or replaced); a store released is observed no more.
private final class StoreChangeObserver: Sendable {
    private let handler: @Sendable (HistoryToken) -> Void
    /// The store observed (its identity: while it is observed it lives) and its monitor's
    /// observation; nil once cancelled.
    private let observed = Mutex<(store: ObjectIdentifier, observation: StoreObservation)?>(nil)
    private let isCancelled = Atomic<Bool>(false)

    init(_ handler: @escaping @Sendable (HistoryToken) -> Void) {
        self.handler = handler
    }

    /// Observes `store`'s head from now on (and no longer the store observed before).
    func observe(_ store: PersistentStore) {
        let observation = store.log.storeMonitor.addObserver { [weak self, weak store] head in
            guard let self, let store else { return }
            self.headMoved(head, in: store)
        }
        let previous = observed.withLock { observed -> StoreObservation? in
            defer { observed = isCancelled.load(ordering: .acquiring) ? nil : (ObjectIdentifier(store), observation) }
            return observed?.observation
        }
        previous?.cancel()
        if isCancelled.load(ordering: .acquiring) {
            observation.cancel()
            return
        }
        // A move that finished before the observer was added woke the store's observers
        // without it: follow now.
        if store.current !== store { follow(from: store) }
    }

    private func headMoved(_ head: UInt64, in store: PersistentStore) {
        guard store.current === store else {
            follow(from: store)
            return
        }
        handler(HistoryToken(storeIdentifier: store.identifier, sequence: head))
    }

    /// `store` moved: observe the store now in its place, and report its head.
    private func follow(from store: PersistentStore) {
        guard observed.withLock({ $0?.store == ObjectIdentifier(store) }) else { return }
        let current = store.current
        observe(current)
        // Moved again meanwhile: observing that one reported its head.
        guard current.current === current else { return }
        if let moved = try? current.log.head { handler(HistoryToken(storeIdentifier: current.identifier, sequence: moved)) }
    }

    func cancel() {
        isCancelled.store(true, ordering: .releasing)
        let observation = observed.withLock { observed -> StoreObservation? in
            defer { observed = nil }
            return observed?.observation
        }
        observation?.cancel()
    }
}
