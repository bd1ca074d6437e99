/// A named reader of the history that records, in the store, the point it has processed
/// through (`Specs/0009-history.md` §6): a search indexer, a sync engine, an export job.
///
/// - **Compaction** never moves events past the lowest consumer's point; a consumer that
///   asks for history that was compacted anyway (it was registered later, or rewound) reads
///   it transparently from the segments.
/// - **Purge** is explicit and ignores consumers: a consumer behind a purge point gets
///   ``HistoryError/historyPurged(_:)`` naming the point to restart from; load
///   ``PersistentStoreCoordinator/historySnapshot(at:)`` there and mark it processed.
/// - Delivery is at least once: process a batch, then mark its last token. A crash in
///   between re-delivers the batch.
///
/// ```swift
/// let indexer = try coordinator.historyConsumer(named: "search-indexer")
/// while true {
///     let batch = try indexer.nextBatch(limit: 500)
///     guard let last = batch.last else { break }
///     try index(batch)
///     try indexer.markProcessed(through: last.token)
/// }
/// ```
public struct HistoryConsumer: Sendable, Hashable {
    /// The consumer's name (unique in the store).
    public let name: String
    /// The store the consumer was made for; it reads and writes ``live``.
    let store: PersistentStore
    /// Where the store is now: the consumer follows a store moved
    /// (`migratePersistentStore`), whose copy holds its point.
    private var live: PersistentStore { store.current }

    /// Identity: the store — where it is now, so a consumer made before a move is the one the
    /// moved store lists — and the name.
    public static func == (lhs: HistoryConsumer, rhs: HistoryConsumer) -> Bool {
        lhs.name == rhs.name && lhs.live === rhs.live
    }

    /// The name: the store a consumer is in changes when it moves, and equal consumers must
    /// hash alike.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
    }

    /// The point the consumer has processed through.
    ///
    /// - Throws: ``HistoryError/unknownConsumer(_:)`` if it was removed;
    ///   ``HistoryError/store(_:underlying:)`` for a damaged store (the consumers table).
    public func processedToken() throws -> HistoryToken {
        let live = self.live
        let sequence = try HistoryError.wrappingStoreFailures("history consumer \(name.debugDescription): reading its processed point failed") {
            try live.log.read { reader in try reader.consumers().first { $0.name == name }?.processedThrough }
        }
        guard let sequence else { throw HistoryError.unknownConsumer(name) }
        return HistoryToken(storeIdentifier: live.identifier, sequence: sequence)
    }

    /// The next transactions after the processed point, at most `limit`, oldest first (empty
    /// when there are none yet). Doesn't move the point: call ``markProcessed(through:)``.
    ///
    /// - Throws: ``HistoryError/historyPurged(_:)`` when a purge removed transactions the
    ///   consumer hasn't processed; ``HistoryError/unknownConsumer(_:)``;
    ///   ``HistoryError/store(_:underlying:)`` (256) for a damaged log (a compacted segment
    ///   file damaged or missing, a damaged event), naming the file and the frame or the
    ///   event, with the log's error as the underlying one.
    public func nextBatch(limit: Int = 256) throws -> [HistoryTransaction] {
        guard limit > 0 else { throw HistoryError.invalidRequest("a batch limit must be at least 1, not \(limit)") }
        let processed = try processedToken()
        let request = HistoryRequest.after(processed).limited(to: limit)
        let live = self.live
        return try HistoryError.wrappingStoreFailures(
            "history consumer \(name.debugDescription): reading its next batch after \(processed.sequence) failed"
        ) {
            try live.log.read { reader in
                let resolved = try live.resolve(request, reader)
                return try live.transactions(resolved, maximum: limit, reader).transactions
            }
        }
    }

    /// Records that the consumer has processed every transaction through `token`; compaction
    /// may then move events up to it. Moving the point back is allowed (to re-read).
    ///
    /// - Throws: ``HistoryError`` for a foreign token, one past the head, one below a purge
    ///   point, or a consumer that was removed; ``HistoryError/store(_:underlying:)`` for a
    ///   read-only or damaged store.
    public func markProcessed(through token: HistoryToken) throws {
        try HistoryError.wrappingStoreFailures("history consumer \(name.debugDescription): marking it processed through \(token.sequence) failed") {
            try moveProcessedPoint(to: token)
        }
    }

    private func moveProcessedPoint(to token: HistoryToken) throws {
        try store.writing { live in
            try live.log.read { reader in try live.check(token, head: try reader.head) }
            // The rest is checked where it is written, so another writer can't remove the
            // consumer, or purge past the token, in between.
            switch try live.log.moveConsumer(name, to: token.sequence) {
            case .moved: return
            case .unknownConsumer: throw HistoryError.unknownConsumer(name)
            case .pastHead(let head): throw HistoryError.tokenAheadOfStore(token, head: head)
            case .purged(let purged):
                throw try live.log.read { reader in live.purgedError(requested: token.sequence, purgedThrough: purged, reader) }
            }
        }
    }

    /// A live feed of the transactions after the processed point (``HistoryFeed``). The feed
    /// doesn't mark anything processed.
    public func feed() throws -> HistoryFeed {
        HistoryFeed(store: live, request: .after(try processedToken()), batchSize: 64)
    }

    /// Unregisters the consumer: it no longer holds compaction back.
    ///
    /// - Throws: ``HistoryError/store(_:underlying:)`` for a read-only or damaged store.
    public func remove() throws {
        try HistoryError.wrappingStoreFailures("history consumer \(name.debugDescription): removing it failed") {
            try store.writing { live in try live.log.removeConsumer(name) }
        }
    }
}

extension PersistentStoreCoordinator {
    /// The consumer named `name`, registered now if it isn't yet: at `token`, or at the start
    /// of history (nothing processed) when `token` is nil. An existing consumer keeps its
    /// point (`token` is ignored).
    ///
    /// - Throws: ``HistoryError/invalidRequest(_:)`` for an empty name or one longer than
    ///   ``EventLog/maximumConsumerNameLength`` bytes; ``HistoryError`` for
    ///   a foreign token or one past the head; ``HistoryError/store(_:underlying:)`` for a
    ///   read-only or damaged store (the log's error underlying it).
    public func historyConsumer(named name: String, startingAfter token: HistoryToken? = nil) throws -> HistoryConsumer {
        guard !name.isEmpty else { throw HistoryError.invalidRequest("a consumer needs a name") }
        guard name.utf8.count <= EventLog.maximumConsumerNameLength else {
            throw HistoryError.invalidRequest(
                "a consumer name is at most \(EventLog.maximumConsumerNameLength) bytes of UTF-8; this one has \(name.utf8.count)")
        }
        return try HistoryError.wrappingStoreFailures("registering history consumer \(name.debugDescription) failed") {
            try writingToStore { store in
                if let token { try store.log.read { reader in try store.check(token, head: try reader.head) } }
                // Registered only if absent, checked where it is written: a registration racing
                // this one (in another process) keeps its point.
                _ = try store.log.registerConsumerIfAbsent(name, processedThrough: token?.sequence ?? 0)
                return HistoryConsumer(name: name, store: store)
            }
        }
    }

    /// Every registered consumer with the point it has processed through, by name.
    ///
    /// - Throws: ``HistoryError/store(_:underlying:)`` for a damaged store.
    public func historyConsumers() throws -> [(consumer: HistoryConsumer, processed: HistoryToken)] {
        let store = try requireStore()
        return try HistoryError.wrappingStoreFailures("listing the history consumers failed") {
            try store.log.read { reader in
                try reader.consumers().sorted { $0.name < $1.name }.map { entry in
                    (HistoryConsumer(name: entry.name, store: store),
                     HistoryToken(storeIdentifier: store.identifier, sequence: entry.processedThrough))
                }
            }
        }
    }
}
