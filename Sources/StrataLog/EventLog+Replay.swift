public import Foundation
import StrataStorage

/// What `EventLog.replay(through:into:)` wrote.
public struct ReplayReport: Sendable, Hashable {
    /// The new store's directory.
    public let path: String
    /// The new store's UUID (a fresh one: the copy is an independent store).
    public let storeUUID: UUID
    /// The last sequence replayed: the new store's head.
    public let head: UInt64
    /// The number of live objects in the new store.
    public let objectCount: Int
}

extension EventLog {
    /// Writes the store as it was just after transaction `sequence` as a new, independent
    /// store at `path`: a fresh store UUID, the same stored model versions and catalog codes,
    /// and events 1…`sequence` re-applied with their own sequence numbers, timestamps and
    /// object IDs (DESIGN.md invariant 6: replay reproduces the same IDs).
    ///
    /// The derived tables (state, indexes, references, membership, history, counters, the
    /// per-context transaction index) are
    /// rebuilt by applying each event as `verify()` does. Segments, checkpoints, consumers and
    /// undo retention are not copied: the new store's log is all raw and has no history past
    /// `sequence`. Persisted undo's records of dropped groups (spec 0004 §10, `undoStacks:`)
    /// as of `sequence` or earlier are copied, so a context's persisted undo in the copy is
    /// what it is here (before, the groups it dropped came back in the copy). After a purge, the new store starts like this one from the base snapshot
    /// (its checkpoint and purge point copied) and holds the events after it. Works on a
    /// store opened read-only; this store is only read.
    ///
    /// ```swift
    /// let source = try EventLog(openingExistingAt: "prod.strata")
    /// let report = try source.replay(through: 812, into: "/tmp/as-of-812.strata")
    /// ```
    ///
    /// - Throws: ``LogError/sequenceOutOfRange(requested:head:)`` past the head;
    ///   ``LogError/historyPurged(requested:purgedThrough:)`` before the purge point;
    ///   ``LogError/invalidOperation(_:)`` if `path` exists and is not an empty directory, is
    ///   inside this store's directory (a store there couldn't be destroyed or replaced on its
    ///   own, as ``replaceStore(at:withCopyOf:)`` refuses), or when `sequence` is a
    ///   migration's take-out (spec 0004 §4.5: the store was never as of it).
    @discardableResult
    public func replay(through sequence: UInt64, into path: String) throws -> ReplayReport {
        try Self.refuseDestination(path, insideStoreAt: self.path)
        // One snapshot throughout: a purge or compaction running meanwhile can't move the
        // base or the events out from under the replay.
        return try read { reader in try replay(reader, through: sequence, into: path) }
    }

    /// Refuses a replay through a take-out of a migration (spec 0004 §4.5–4.6): the take-outs
    /// and the put-back after them are written in one LMDB transaction, so the store was never
    /// as of a take-out — a copy through one would hold neither the old names' values nor the
    /// new ones'. A take-out is a `migration` event followed by another of the same commit
    /// (the same timestamp and process).
    ///
    /// A purge through one is refused the same way (`verb` "Purge"): its base would be that
    /// state, kept for good as the earliest one.
    package func refuseMidMigration(_ reader: borrowing LogReader, _ sequence: UInt64, head: UInt64, verb: String = "Replay") throws {
        let purged = try reader.purgedThrough
        guard head > sequence, sequence > purged else { return }
        func isMigration(_ event: TransactionEvent) -> Bool {
            if case .migration = event.kind { return true }
            return false
        }
        let event = try reader.event(sequence)
        guard isMigration(event) else { return }
        var last = sequence
        var version = event.modelVersion
        while last < head {
            let next = try reader.event(last + 1)
            guard isMigration(next), next.timestamp == event.timestamp, next.processID == event.processID else { break }
            last += 1
            version = next.modelVersion
        }
        guard last > sequence else { return }
        var first = sequence
        while first - 1 > purged {
            let previous = try reader.event(first - 1)
            guard isMigration(previous), previous.timestamp == event.timestamp, previous.processID == event.processID else { break }
            first -= 1
        }
        throw LogError.invalidOperation(
            "event \(sequence) takes values out for the migration to model version \(version), which events \(first)…\(last) make in one transaction: the store was never as of event \(sequence). \(verb) through \(first - 1) or \(last)")
    }

    private func replay(_ reader: borrowing LogReader, through sequence: UInt64, into path: String) throws -> ReplayReport {
        let purged = try reader.purgedThrough
        let (head, marker) = (try reader.head, try reader.purgeMarker)
        let base = purged > 0 ? try reader.checkpointRows(purged) : nil
        let baseVersion = purged > 0 ? try reader.purgeModelVersion : nil
        guard sequence <= head else { throw LogError.sequenceOutOfRange(requested: sequence, head: head) }
        guard sequence >= purged else { throw LogError.historyPurged(requested: sequence, purgedThrough: purged) }
        if purged > 0 && base?.hasCounters != true {
            throw LogError.malformed("history through \(purged) was purged, but the base snapshot as of it is missing")
        }
        try refuseMidMigration(reader, sequence, head: head)
        let fileManager = FileManager.default
        if fileManager.fileExists(atPath: path) {
            let contents = (try? fileManager.contentsOfDirectory(atPath: path)) ?? ["?"]
            guard contents.filter({ !$0.hasPrefix(".") }).isEmpty else {
                throw LogError.invalidOperation("\(path) already exists and is not empty")
            }
        }
        // A copy that stops partway (a full disk, a full map) is removed: what the first
        // batches wrote is a valid store as of some earlier point, which would pass for the
        // copy as of `sequence` (before, it was left). What was made for it goes; a directory
        // given empty stays, emptied.
        let created = Self.firstMissingAncestor(of: path)
        do {
            return try writeReplayCopy(
                reader, through: sequence, into: path, purged: purged, marker: marker, base: base, baseVersion: baseVersion)
        } catch {
            if let created {
                try? fileManager.removeItem(atPath: path)
                Self.removeEmptyDirectories(from: (path as NSString).deletingLastPathComponent, through: created)
            } else {
                for name in ["data.mdb", "lock.mdb"] {
                    try? fileManager.removeItem(atPath: (path as NSString).appendingPathComponent(name))
                }
            }
            throw error
        }
    }

    /// Writes the copy for ``replay(through:into:)`` once the checks passed; the target
    /// environment is closed when this returns or throws.
    private func writeReplayCopy(
        _ reader: borrowing LogReader, through sequence: UInt64, into path: String, purged: UInt64, marker: UInt64,
        base: CheckpointRows?, baseVersion: Int?
    ) throws -> ReplayReport {
        var options = LMDBEnvironment.Options()
        options.mapSize = configuration.initialMapSize
        options.maximumMapSize = configuration.maximumMapSize
        options.maxDatabases = StoreTables.names.count + 4
        let target = try LMDBEnvironment(path: path, databases: StoreTables.names.map { DatabaseDescriptor($0) }, options: options)
        let targetTables = try StoreTables(target)

        // The same catalog and models, so codes in records, keys and events mean the same.
        var copied: [(table: Int, key: [UInt8], value: [UInt8])] = []
        for (number, database) in [tables.catalog, tables.models].enumerated() {
            try reader.txn.forEach(in: database) { key, value in
                copied.append((number, key.withUnsafeBytes { Array($0) }, value.withUnsafeBytes { Array($0) }))
                return .next
            }
        }
        try reader.txn.forEach(in: tables.meta, range: .prefix(MetaKey.modelHash([]))) { key, value in
            copied.append((2, key.withUnsafeBytes { Array($0) }, value.withUnsafeBytes { Array($0) }))
            return .next
        }
        // Sides of many-to-manys ordered on both sides filled after `sequence` (or not yet):
        // the copy's first writable open fills them (spec 0004 §4.1).
        let sideRows = Self.orderedSideRows(
            toFill: try reader.txn.value(forKey: MetaKey.orderedSidesToFill, in: tables.meta),
            filled: try reader.txn.value(forKey: MetaKey.orderedSidesFilled, in: tables.meta), through: sequence)
        if let rows = sideRows.toFill { copied.append((2, MetaKey.orderedSidesToFill, rows)) }
        if let rows = sideRows.filled { copied.append((2, MetaKey.orderedSidesFilled, rows)) }
        let undoCheckpoints = try reader.undoCheckpointRows(through: sequence)
        let sourceFormat = try reader.txn.value(forKey: MetaKey.formatVersion, in: tables.meta).flatMap { $0.count == 4 ? $0 : nil }
        let uuid = UUID()
        let now = bigEndianBytes(UInt64(bitPattern: EventCodec.microsecondsNow()))
        try target.write { txn in
            for row in copied {
                let database = row.table == 0 ? targetTables.catalog : row.table == 1 ? targetTables.models : targetTables.meta
                try txn.put(row.value, forKey: row.key, in: database)
            }
            try txn.put(withUnsafeBytes(of: uuid.uuid) { Array($0) }, forKey: MetaKey.storeUUID, in: targetTables.meta)
            // The source's format version (2 once a model recorded both sides of a both-ordered
            // many-to-many, spec 0004 §10).
            try txn.put(sourceFormat ?? bigEndianBytes(UInt32(1)), forKey: MetaKey.formatVersion, in: targetTables.meta)
            try txn.put(now, forKey: MetaKey.createdAt, in: targetTables.meta)
            try txn.put(now, forKey: MetaKey.openedAt, in: targetTables.meta)
            try txn.put(bigEndianBytes(UInt64(0)), forKey: MetaKey.head, in: targetTables.meta)
        }

        // Events in batches: one write transaction per batch, the head moving with it.
        let writer = TableWriter(tables: targetTables, catalog: catalog, schema: schema, modelVersion: modelVersion)

        // After a purge the new store starts, like this one, from the base snapshot.
        if purged > 0, let base {
            try target.write { txn in
                try writer.restore(txn, base)
                try writer.writeCheckpoint(txn, at: purged, rows: base)
                // The per-context index starts, like the log, after the purge point.
                for key in [MetaKey.head, MetaKey.purgedThrough, MetaKey.compactedThrough, MetaKey.contextIndexThrough] {
                    try txn.put(bigEndianBytes(purged), forKey: key, in: targetTables.meta)
                }
                if let baseVersion {
                    try txn.put(bigEndianBytes(UInt32(clamping: baseVersion)), forKey: MetaKey.purgeModelVersion, in: targetTables.meta)
                }
                if marker > purged && marker <= sequence {
                    try txn.put(bigEndianBytes(marker), forKey: MetaKey.purgeMarker, in: targetTables.meta)
                }
            }
        }
        let pageSize = try target.read { try $0.statistics(of: targetTables.events).pageSize }
        let chunkSize = Self.chunkSize(configuration.chunkSize, pageSize: pageSize)
        /// The newest model version an event replayed was written with: the copy's data is in
        /// its terms (0: no event replayed).
        var inForce = 0
        /// Whether a model version earlier than the newest stored one wrote after the last
        /// migration to the newest (spec 0004 §4.5, `earlierModelWrote`): the copy's newest-
        /// version open must then migrate it, as this store's would. A base snapshot in an
        /// earlier version's terms counts as such a write.
        let newest = catalog.modelVersions.max() ?? 0
        var earlierWrote = purged > 0 && (baseVersion ?? newest) < newest
        func flush(_ batch: [TransactionEvent]) throws {
            guard let last = batch.last else { return }
            try target.write { txn in
                for event in batch {
                    inForce = max(inForce, event.modelVersion)
                    if case .migration = event.kind {
                        earlierWrote = event.modelVersion < newest
                    } else if event.modelVersion < newest {
                        earlierWrote = true
                    }
                    try writer.apply(txn, event, checkBeforeImages: false)
                    let bytes = try EventCodec.encode(event, catalog: catalog)
                    var chunk: UInt32 = 0
                    var offset = 0
                    repeat {
                        let end = min(offset + chunkSize, bytes.count)
                        try txn.put(bytes[offset..<end], forKey: bigEndianBytes(event.sequence) + bigEndianBytes(chunk), in: targetTables.events, flags: .append)
                        offset = end
                        chunk += 1
                    } while offset < bytes.count
                    if let contexts = targetTables.contexts {
                        try ContextIndex.record(
                            txn, meta: targetTables.meta, table: contexts, sequence: event.sequence, author: event.author,
                            contextName: event.contextName)
                    }
                }
                try txn.put(bigEndianBytes(last.sequence), forKey: MetaKey.head, in: targetTables.meta)
            }
        }
        if sequence > purged {
            var batch: [TransactionEvent] = []
            try reader.forEachEvent(from: purged + 1, through: sequence) { event in
                batch.append(event)
                if batch.count >= 512 {
                    try flush(batch)
                    batch.removeAll(keepingCapacity: true)
                }
                return .next
            }
            try flush(batch)
        }
        // The stored versions later than the one the copy's data is in — a migration to them
        // came after `sequence` — are marked as a version whose migration hasn't committed is
        // (spec 0004 §4.3): tools and read-only opens read the copy in its data's terms, and
        // a writable open with a later model migrates it, as it did this store. (Before, the
        // copy of a store as of a point before a migration read as migrated: a renamed
        // property's values hidden under the old name.)
        if inForce > 0 {
            let later = catalog.modelVersions.filter { $0 > inForce }
            if !later.isEmpty {
                try target.write { txn in
                    for version in later { try txn.put([1], forKey: MetaKey.refusedModel(version), in: targetTables.meta) }
                }
            }
        }
        if earlierWrote {
            try target.write { txn in try txn.put([1], forKey: MetaKey.earlierModelWrote, in: targetTables.meta) }
        }
        if !undoCheckpoints.isEmpty {
            try target.write { txn in
                for row in undoCheckpoints { try txn.put(row.value, forKey: row.key, in: targetTables.meta) }
            }
        }
        let objectCount = try target.read { txn in try txn.count(in: targetTables.state) }
        return ReplayReport(path: path, storeUUID: uuid, head: sequence, objectCount: objectCount)
    }
}
