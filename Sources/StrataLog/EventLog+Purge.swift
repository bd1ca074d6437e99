import Foundation
import StrataStorage

/// What `EventLog.purge(through:author:contextName:)` removed.
public struct PurgeReport: Sendable, Hashable {
    /// The last sequence purged: the log now starts after it, from the base snapshot as of it.
    public let purgedThrough: UInt64
    /// The events removed by this purge (nil when there was nothing left to purge).
    public let removedEvents: ClosedRange<UInt64>?
    /// The purge marker event appended (nil when nothing was purged).
    public let markerSequence: UInt64?
    /// Segment files deleted whole.
    public let segmentsRemoved: [String]
    /// A segment that held events on both sides of the purge point, rewritten as this file
    /// with only the kept events (nil if none straddled it).
    public let segmentRewritten: String?
    /// Per-object history entries removed.
    public let historyEntriesRemoved: Int
    /// Checkpoints removed (they were older than the purge point).
    public let checkpointsRemoved: [UInt64]

    /// The number of events removed.
    public var eventCount: Int { removedEvents.map { Int($0.upperBound - $0.lowerBound + 1) } ?? 0 }
}

extension EventLog {
    /// Removes history for good: every event through `point` — raw or compacted — with
    /// the per-object history entries, per-context index rows and checkpoints that belong to
    /// it, keeping the state
    /// as of `point` as the store's **base snapshot**, and appends a purge marker event
    /// (kind ``TransactionKind/purge(through:)``) saying who purged (`author`,
    /// `contextName`), what (through which sequence) and when (its timestamp)
    /// (`Specs/0004-event-log.md` §7.6).
    ///
    /// The store stays whole: `verify()`, as-of reads from the base on, `replay`, compaction
    /// and the CLI start from the base snapshot. Reads of purged events throw
    /// ``LogError/historyPurged(requested:purgedThrough:)``. Consumers and undo retention
    /// don't hold a purge back: it is an explicit decision. Purging at or below an earlier
    /// purge point does nothing (and appends no marker).
    ///
    /// The base is rebuilt by replaying from the newest checkpoint (or earlier base) at or
    /// before the point, so the cost is the events since that checkpoint; the removal runs
    /// in one LMDB write transaction. Segment files are deleted after it commits (a crash in
    /// between leaves files the next writable open removes).
    ///
    /// ```swift
    /// let report = try log.purge(through: 50_000, author: "retention-job")   // drop 1…50,000
    /// ```
    ///
    /// - Throws: ``LogError/sequenceOutOfRange(requested:head:)`` past the head;
    ///   ``LogError/invalidOperation(_:)`` on a read-only store, when a compaction or
    ///   another purge changed the log meanwhile, or when `point` is a migration's take-out
    ///   (spec 0004 §4.5: the store was never as of it) — nothing is changed then.
    @discardableResult
    public func purge(through point: UInt64, author: String?, contextName: String? = nil) throws -> PurgeReport {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only") }
        let (head, oldBase, compacted, descriptors, start, pointVersion) = try read { reader in
            let oldBase = try reader.purgedThrough
            // The newest checkpoint with counters between the old base and the point.
            var start: UInt64 = oldBase
            for checkpoint in try reader.checkpoints().reversed() where checkpoint <= point && checkpoint > oldBase {
                if try reader.checkpointRows(checkpoint)?.hasCounters == true {
                    start = checkpoint
                    break
                }
            }
            // The base is in the terms of the version event `point` was written with.
            let head = try reader.head
            // Never through a migration's take-out: the store was never as of it.
            if point > oldBase && point <= head { try refuseMidMigration(reader, point, head: head, verb: "Purge") }
            let pointVersion = point > oldBase && point <= head ? try reader.modelVersion(asOf: point) : nil
            return (head, oldBase, try reader.compactedThrough, try reader.segmentDescriptors(), start, pointVersion)
        }
        guard point <= head else { throw LogError.sequenceOutOfRange(requested: point, head: head) }
        guard point > oldBase else {
            return PurgeReport(
                purgedThrough: oldBase, removedEvents: nil, markerSequence: nil, segmentsRemoved: [], segmentRewritten: nil,
                historyEntriesRemoved: 0, checkpointsRemoved: [])
        }

        // 1. The base: the state, membership and counters as of the point.
        let base = try rows(asOf: point, from: start)

        // 2. A segment holding events on both sides of the point is rewritten without the
        //    purged ones (same dictionary), to a temporary file first.
        var rewrite: (old: SegmentDescriptor, new: SegmentDescriptor, temporary: String)?
        if let straddler = descriptors.first(where: { $0.first <= point && $0.last > point }) {
            rewrite = try rewriteSegment(straddler, keepingAfter: point)
        }
        defer { if let rewrite { try? FileManager.default.removeItem(atPath: rewrite.temporary) } }

        // 3. One write transaction removes the rest and appends the marker.
        let writer = TableWriter(tables: tables, catalog: catalog, schema: schema, modelVersion: modelVersion)
        let timestamp = EventCodec.date(microseconds: EventCodec.microsecondsNow())
        let (marker, removedCheckpoints, historyRemoved, deletedFiles) = try environment.write { txn in
            guard try number(MetaKey.purgedThrough, txn) == oldBase, try number(MetaKey.compactedThrough, txn) == compacted else {
                throw LogError.invalidOperation("another purge or a compaction changed the log meanwhile; nothing was purged")
            }
            // Checkpoints before the point go; the base takes the point's place.
            var removedCheckpoints: [UInt64] = []
            var checkpointSequences: [UInt64] = []
            try txn.forEach(in: tables.checkpoints, range: KeyRange(lowerBound: nil, upperBound: bigEndianBytes(point + 1))) { key, _ in
                if key.byteCount == 8, let found = key.withUnsafeBytes({ readBigEndian($0) }) { checkpointSequences.append(found) }
                return .next
            }
            for found in checkpointSequences {
                try writer.removeCheckpoint(txn, at: found)
                if found != point { removedCheckpoints.append(found) }
            }
            try writer.writeCheckpoint(txn, at: point, rows: base)

            // Raw events through the point.
            var eventKeys: [[UInt8]] = []
            try txn.forEach(in: tables.events, range: KeyRange(lowerBound: nil, upperBound: bigEndianBytes(point + 1))) { key, _ in
                eventKeys.append(key.withUnsafeBytes { Array($0) })
                return .next
            }
            for key in eventKeys { try txn.delete(key: key, in: tables.events) }

            // Segments: whole ones through the point go; the straddler is replaced.
            var deletedFiles: [String] = []
            for descriptor in descriptors where descriptor.last <= point {
                try txn.delete(key: bigEndianBytes(descriptor.first), in: tables.segments)
                deletedFiles.append(descriptor.fileName)
                if let dictionary = descriptor.dictionaryFileName { deletedFiles.append(dictionary) }
            }
            if let rewrite {
                // LMDB may run this closure again after growing the map: the file moved the
                // first time round is kept, not deleted (before, the purge then failed).
                let finalPath = (segmentDirectory as NSString).appendingPathComponent(rewrite.new.fileName)
                try moveIntoPlace(rewrite.temporary, finalPath)
                syncDirectory(segmentDirectory)
                try txn.delete(key: bigEndianBytes(rewrite.old.first), in: tables.segments)
                try txn.put(rewrite.new.encoded(), forKey: bigEndianBytes(rewrite.new.first), in: tables.segments)
                deletedFiles.append(rewrite.old.fileName)
            }

            // Per-object history entries through the point.
            var historyKeys: [[UInt8]] = []
            try txn.forEach(in: tables.history) { key, _ in
                if let entry = key.withUnsafeBytes({ readBigEndian($0, at: ObjectKey.byteCount) }), entry <= point {
                    historyKeys.append(key.withUnsafeBytes { Array($0) })
                }
                return .next
            }
            for key in historyKeys { try txn.delete(key: key, in: tables.history) }

            // The per-context index's rows through the point (readers ignore them anyway).
            if let contexts = tables.contexts {
                var contextKeys: [[UInt8]] = []
                try txn.forEach(in: contexts) { key, _ in
                    if let row = key.withUnsafeBytes({ ContextIndex.decode($0) }), row.sequence <= point {
                        contextKeys.append(key.withUnsafeBytes { Array($0) })
                    }
                    return .next
                }
                for key in contextKeys { try txn.delete(key: key, in: contexts) }
            }

            try txn.put(bigEndianBytes(point), forKey: MetaKey.purgedThrough, in: tables.meta)
            if let pointVersion {
                try txn.put(bigEndianBytes(UInt32(clamping: pointVersion)), forKey: MetaKey.purgeModelVersion, in: tables.meta)
            }
            if compacted < point { try txn.put(bigEndianBytes(point), forKey: MetaKey.compactedThrough, in: tables.meta) }

            // The marker.
            let head = try number(MetaKey.head, txn)
            let event = TransactionEvent(
                sequence: head + 1, timestamp: timestamp, author: author, contextName: contextName,
                processID: ProcessInfo.processInfo.processIdentifier, kind: .purge(through: point), modelVersion: modelVersion,
                groups: [])
            try writeEventChunks(
                txn, sequence: head + 1, bytes: try EventCodec.encode(event, catalog: writer), author: event.author,
                contextName: event.contextName)
            try txn.put(bigEndianBytes(head + 1), forKey: MetaKey.head, in: tables.meta)
            try txn.put(bigEndianBytes(head + 1), forKey: MetaKey.purgeMarker, in: tables.meta)
            try checkpointIfDue(txn, appended: head + 1, through: head + 1)
            return (head + 1, removedCheckpoints, historyKeys.count, (txn.id, deletedFiles))
        }
        // The manifest no longer names these files. A reader whose snapshot is older than
        // this purge may still read them: they are set aside under a name that says which
        // transaction dropped them, and deleted once no reader that old is left (now, if
        // none is, or at a later purge, compaction or writable open).
        let (purgeTransaction, names) = deletedFiles
        // The purge's commit on disk first: with `.fast` durability its meta page isn't synced
        // yet, and a power cut would bring back the manifest naming these files after they
        // were swept.
        if !names.isEmpty { try environment.sync(force: true) }
        for name in names where rewrite?.new.dictionaryFileName != name {
            let file = (segmentDirectory as NSString).appendingPathComponent(name)
            let aside = (segmentDirectory as NSString).appendingPathComponent(SegmentReader.setAsideName(name, droppedBy: purgeTransaction))
            try? FileManager.default.moveItem(atPath: file, toPath: aside)
        }
        sweepSetAsideSegments()
        storeMonitor.publish(marker)
        return PurgeReport(
            purgedThrough: point, removedEvents: (oldBase + 1)...point, markerSequence: marker,
            segmentsRemoved: descriptors.filter { $0.last <= point }.map(\.fileName), segmentRewritten: rewrite?.new.fileName,
            historyEntriesRemoved: historyRemoved, checkpointsRemoved: removedCheckpoints)
    }

    /// The checkpoint rows of the state as of `sequence`, rebuilt in a scratch environment
    /// from the checkpoint at `start` (or from nothing when `start` is 0 and nothing was
    /// purged) by applying events `start + 1 … sequence`.
    func rows(asOf sequence: UInt64, from start: UInt64) throws -> CheckpointRows {
        let (scratch, scratchTables, scratchPath) = try makeScratchEnvironment()
        defer { try? FileManager.default.removeItem(atPath: scratchPath) }
        let writer = TableWriter(tables: scratchTables, catalog: catalog, schema: schema, modelVersion: modelVersion)
        if start > 0 {
            guard let rows = try read({ reader in try reader.checkpointRows(start) }), rows.hasCounters else {
                throw LogError.malformed("the checkpoint at \(start) a purge starts from is missing or has no counters")
            }
            try scratch.write { txn in try writer.restore(txn, rows) }
        }
        if sequence > start {
            var batch: [TransactionEvent] = []
            func flush() throws {
                guard !batch.isEmpty else { return }
                try scratch.write { txn in
                    // Checked: the base replaces the history for good, so a checkpoint that
                    // disagrees with the events after it must stop the purge, not become the base.
                    for event in batch { try writer.apply(txn, event, checkBeforeImages: true) }
                }
                batch.removeAll(keepingCapacity: true)
            }
            try read { reader in
                try reader.forEachEvent(from: start + 1, through: sequence) { event in
                    batch.append(event)
                    if batch.count >= 512 { try flush() }
                    return .next
                }
            }
            try flush()
        }
        return try scratch.read { txn in try writer.currentRows(txn) }
    }

    /// The rows of the `catalog` and `models` tables (whether each is the catalog's, key,
    /// value), as `txn` reads them.
    func catalogRows(_ txn: borrowing LMDBTransaction) throws -> [(Bool, [UInt8], [UInt8])] {
        var rows: [(Bool, [UInt8], [UInt8])] = []
        for database in [tables.catalog, tables.models] {
            try txn.forEach(in: database) { key, value in
                rows.append((database == tables.catalog, key.withUnsafeBytes { Array($0) }, value.withUnsafeBytes { Array($0) }))
                return .next
            }
        }
        return rows
    }

    /// A fresh LMDB environment in the temporary directory (or the configuration's
    /// ``Configuration/scratchDirectory``) with this store's tables, catalog and models (so
    /// codes in keys and records mean the same): for `verify` and `purge`.
    ///
    /// Its directory is `strata-scratch-PID-TOKEN-UUID` (TOKEN: ``processToken``); those a
    /// killed process left there (a Ctrl-C of `strata verify`: as large as the replayed state)
    /// are removed here — a PID that isn't running, or this process's own PID with another token.
    ///
    /// `given`: the catalog rows, read by a caller already inside a read of the store
    /// (``catalogRows(_:)``). A read nested in another can't adopt a map another process
    /// grew meanwhile (`MDB_MAP_RESIZED`): `verify` while another process committed failed so.
    func makeScratchEnvironment(catalogRows given: [(Bool, [UInt8], [UInt8])]? = nil) throws -> (LMDBEnvironment, StoreTables, String) {
        // A temporary directory that doesn't exist is the user's to make: creating the
        // scratch environment would make it with its parents, and leave it behind (before,
        // `strata verify` with TMPDIR naming a missing directory did).
        let temporary = configuration.scratchDirectory ?? NSTemporaryDirectory()
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: temporary, isDirectory: &isDirectory), isDirectory.boolValue else {
            let shown = temporary.count > 1 && temporary.hasSuffix("/") ? String(temporary.dropLast()) : temporary
            if configuration.scratchDirectory != nil {
                throw LogError.invalidOperation(
                    "the scratch directory \(shown) (EventLog.Configuration.scratchDirectory) doesn't exist or isn't a directory: the scratch environment goes there, and Strata doesn't make it; create it, or give a directory that exists")
            }
            throw LogError.invalidOperation(
                "the temporary directory \(shown) (TMPDIR) doesn't exist or isn't a directory: the scratch environment goes there, and Strata doesn't make it; create it, or set TMPDIR to a directory that exists")
        }
        Self.removeStaleScratch(in: temporary)
        let scratchPath = (temporary as NSString).appendingPathComponent(
            "\(Self.scratchPrefix)\(ProcessInfo.processInfo.processIdentifier)-\(Self.processToken)-\(UUID().uuidString)")
        var options = LMDBEnvironment.Options()
        options.durability = .fast
        options.additionalFlags = [.noSync]
        options.maxDatabases = StoreTables.names.count + 4
        options.mapSize = max(environment.mapSize, 16 << 20)
        // One that can't be made (a full temporary directory) is removed at once: the caller
        // removes it only once it has it (before, what was made stayed until the process ended).
        do {
            let scratch = try LMDBEnvironment(path: scratchPath, databases: StoreTables.names.map { DatabaseDescriptor($0) }, options: options)
            let scratchTables = try StoreTables(scratch)
            let rows = try given ?? environment.read { txn in try catalogRows(txn) }
            try scratch.write { txn in
                for (isCatalog, key, value) in rows {
                    try txn.put(value, forKey: key, in: isCatalog ? scratchTables.catalog : scratchTables.models)
                }
            }
            return (scratch, scratchTables, scratchPath)
        } catch {
            try? FileManager.default.removeItem(atPath: scratchPath)
            throw error
        }
    }

    static let scratchPrefix = "strata-scratch-"

    /// Removes the scratch environments of processes that are gone from `temporary`, the
    /// directory scratch environments are made in (best effort; see
    /// ``makeScratchEnvironment(catalogRows:)``).
    static func removeStaleScratch(in temporary: String) {
        let fileManager = FileManager.default
        for name in (try? fileManager.contentsOfDirectory(atPath: temporary)) ?? [] where name.hasPrefix(scratchPrefix) {
            // `strata-scratch-PID-TOKEN-UUID`: names without a PID and token (older ones) are left.
            let rest = name.dropFirst(scratchPrefix.count)
            let parts = rest.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 7, let pid = Int32(parts[0]), pid > 0, parts[1].count == 16 else { continue }
            let mayBeUsed = pid == ProcessInfo.processInfo.processIdentifier ? parts[1] == Substring(processToken) : processIsAlive(pid)
            if !mayBeUsed { try? fileManager.removeItem(atPath: (temporary as NSString).appendingPathComponent(name)) }
        }
    }

    /// Writes the events of `segment` after `point` as a new segment in a temporary file
    /// (same dictionary, level 3, 256 events a frame); returns the old and new descriptors.
    private func rewriteSegment(_ segment: SegmentDescriptor, keepingAfter point: UInt64) throws
        -> (old: SegmentDescriptor, new: SegmentDescriptor, temporary: String)
    {
        let reader = try SegmentReader(segment, directory: segmentDirectory)
        let temporary = (segmentDirectory as NSString).appendingPathComponent(Self.temporarySegmentName(suffix: "zst"))
        let handle = try createExclusively(temporary)
        var frames: [SegmentDescriptor.Frame] = []
        var offset: UInt64 = 0
        var raw: UInt64 = 0
        var frame: [UInt8] = []
        var first: UInt64 = 0
        var last: UInt64 = 0
        var count = 0
        func flush() throws {
            guard count > 0 else { return }
            let compressed = try Zstd.compress(frame, level: 3, dictionary: reader.dictionary)
            try handle.write(contentsOf: compressed)
            frames.append(
                SegmentDescriptor.Frame(
                    first: first, last: last, offset: offset, compressedLength: UInt64(compressed.count),
                    rawLength: UInt64(frame.count)))
            offset += UInt64(compressed.count)
            frame.removeAll(keepingCapacity: true)
            count = 0
        }
        do {
            for (index, described) in segment.frames.enumerated() where described.last > point {
                for bytes in try reader.events(inFrame: index) {
                    guard let header = bytes.withUnsafeBytes({ EventCodec.header($0) }) else {
                        throw LogError.segment("\(segment.fileName) frame \(index): an event without a readable header")
                    }
                    guard header.sequence > point else { continue }
                    if count == 0 { first = header.sequence }
                    last = header.sequence
                    FrameContent.append(bytes, to: &frame)
                    raw += UInt64(bytes.count)
                    count += 1
                    if count >= 256 { try flush() }
                }
            }
            try flush()
            try handle.synchronize()
            try handle.close()
        } catch {
            try? handle.close()
            try? FileManager.default.removeItem(atPath: temporary)
            throw error
        }
        let new = SegmentDescriptor(
            fileName: SegmentDescriptor.fileName(first: point + 1, last: segment.last, suffix: "zst"), first: point + 1,
            last: segment.last, rawBytes: raw, compressedBytes: offset, dictionaryFileName: segment.dictionaryFileName,
            frames: frames)
        return (segment, new, temporary)
    }
}
