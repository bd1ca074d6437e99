import Foundation
import StrataStorage
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Compaction

extension EventLog {
    /// Moves old events into one zstd segment file and removes them from the raw log
    /// (`Specs/0004-event-log.md` §7). Reads of those events, as-of and history keep working,
    /// decompressing transparently; replay gives the same state before and after.
    ///
    /// The horizon is the lowest of what `request` asks, every registered consumer's
    /// checkpoint, and the persisted undo depth. The protocol is crash-safe: the segment is
    /// written to a temporary file and fsynced; then, inside one LMDB write transaction, it
    /// is renamed into place, the manifest entry added and the raw events deleted. A crash
    /// before that transaction commits leaves a file the next writable open removes.
    ///
    /// Another writer may change the horizon while the segment is written: another
    /// compaction or a purge moves events, a consumer registers or moves back, the undo
    /// retention grows. The write transaction checks the horizon still holds; if it doesn't,
    /// nothing is changed and the compaction starts again from the new horizon (at most
    /// ``compactionAttempts`` times, then ``LogError/invalidOperation(_:)``).
    @discardableResult
    public func compact(_ request: CompactionRequest) throws -> CompactionReport {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only") }
        var lastChange = ""
        for _ in 0..<Self.compactionAttempts {
            switch try compactOnce(request) {
            case .done(let report): return report
            case .horizonChanged(let change): lastChange = change
            }
        }
        throw LogError.invalidOperation(
            "the compaction's horizon kept changing while it ran (\(lastChange)); tried \(Self.compactionAttempts) times, nothing was changed")
    }

    /// What ``compact(_:)`` with `request` would move — the raw events from the first
    /// uncompacted one through the horizon — and what limits the horizon, without reading
    /// the events (with `beforeDate`, the events up to the first committed at or after it
    /// are read for their timestamps). What a caller that compacts in steps plans them with:
    /// a dry run reads every event of the range to estimate its compressed size (before,
    /// `strata compact` planned with one, reading its range twice).
    public func compactionPlan(_ request: CompactionRequest) throws -> CompactionPlan {
        let (from, horizon, limit) = try compactionHorizon(request)
        return CompactionPlan(range: horizon >= from ? from...horizon : nil, horizon: horizon, limitedBy: limit)
    }

    /// How many times ``compact(_:)`` starts again when another writer changed its horizon meanwhile.
    static let compactionAttempts = 8

    /// What one attempt of ``compact(_:)`` did.
    private enum CompactionAttempt {
        case done(CompactionReport)
        /// Another writer changed the horizon (said how) before the segment was committed:
        /// nothing was changed.
        case horizonChanged(String)
    }

    /// Thrown inside the write transaction to abandon it (see ``CompactionAttempt``).
    private struct HorizonChanged: Error {
        let change: String
    }

    /// Test hook: called by ``compact(_:)`` with the store's path, and `segmentWritten` false
    /// when the horizon has been read (before the raw events are), true when the segment
    /// file is written, before the write transaction that puts it in place (nil: none).
    package static func setCompactionHook(_ hook: (@Sendable (_ path: String, _ segmentWritten: Bool) -> Void)?) {
        compactionHook.withLock { $0 = hook }
    }
    private static let compactionHook = Mutex<(@Sendable (String, Bool) -> Void)?>(nil)

    /// Test hook: called by ``compact(_:)`` with the store's path inside the write
    /// transaction that puts the segment in place, once the horizon has been checked again
    /// and before anything is changed — holding LMDB's writer lock, so no other writer, in
    /// this process or another, commits until it returns (nil: none). A test holds another
    /// process's compaction between its plan and its first step with it, without reading
    /// `/proc`.
    package static func setCompactionCommitHook(_ hook: (@Sendable (_ path: String) -> Void)?) {
        compactionCommitHook.withLock { $0 = hook }
    }
    private static let compactionCommitHook = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// Why the horizon `horizon`, computed in an earlier snapshot, no longer holds in the write
    /// transaction `txn`, or nil if it does: compaction must not move an event a consumer
    /// registered (or moved back) meanwhile hasn't processed, nor one the undo retention now
    /// keeps raw (spec 0004 §7.1, §7.3).
    private func horizonChange(_ horizon: UInt64, from: UInt64, _ txn: borrowing LMDBTransaction) throws -> String? {
        let compacted = try number(MetaKey.compactedThrough, txn)
        guard compacted == from - 1 else { return Self.overtakenChange(from) }
        let head = try number(MetaKey.head, txn)
        let retention = try number(MetaKey.undoRetention, txn)
        if retention > 0, head > retention ? head - retention < horizon : true {
            return "the undo retention is \(retention) transactions now, which keeps events after \(head > retention ? head - retention : 0) raw"
        }
        let purged = try number(MetaKey.purgedThrough, txn)
        var change: String?
        try txn.forEach(in: tables.consumers) { key, value in
            let name = key.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            guard value.byteCount == 8, let point = value.withUnsafeBytes({ readBigEndian($0) }), point <= head else {
                throw LogError.malformed(
                    "consumer \(name.debugDescription): " + LogReader.consumerDamage(value.withUnsafeBytes { Array($0) }, head: head))
            }
            if point >= purged && point < horizon {
                change = "consumer \(name.debugDescription) has processed through \(point) now"
                return .stop
            }
            return .next
        }
        return change
    }

    /// Whether another compaction or a purge has moved events from `from` on since this
    /// compaction read its horizon: its reads of the raw log then find them missing, which
    /// is no damage.
    private func overtaken(from: UInt64) -> Bool {
        guard let compacted = try? read({ reader in try reader.compactedThrough }) else { return false }
        return compacted != from - 1
    }

    private static func overtakenChange(_ from: UInt64) -> String { "another compaction or a purge moved events \(from)… first" }

    private func compactOnce(_ request: CompactionRequest) throws -> CompactionAttempt {
        // Files an earlier purge set aside go once no reader can need them.
        sweepSetAsideSegments()
        let (from, horizon, limit) = try compactionHorizon(request)
        if !request.dryRun, let hook = Self.compactionHook.withLock({ $0 }) { hook(path, false) }
        guard horizon >= from else {
            return .done(CompactionReport(
                moved: nil, horizon: horizon, limitedBy: limit, rawBytes: 0, compressedBytes: 0, segmentFile: nil,
                dictionaryFile: nil, isDryRun: request.dryRun))
        }

        // Dictionary first: it must exist before any frame is compressed.
        var dictionary: ZstdDictionary?
        if request.usesDictionary {
            var samples: [[UInt8]] = []
            let stride = max(1, Int((horizon - from + 1) / 4000))
            var index = 0
            do {
                try forEachRawEvent(from: from, through: horizon) { _, bytes in
                    if index % stride == 0 { samples.append(bytes) }
                    index += 1
                }
            } catch let error as LogError {
                if overtaken(from: from) { return .horizonChanged(Self.overtakenChange(from)) }
                throw error
            }
            // zstd's trainer wants many samples; fall back to no dictionary when there are too few.
            dictionary = samples.count >= 64 ? try? ZstdDictionary.train(samples: samples, capacity: 64 << 10) : nil
        }

        // A dry run writes nothing: no directory, no temporary file.
        if !request.dryRun && !FileManager.default.fileExists(atPath: segmentDirectory) {
            try FileManager.default.createDirectory(atPath: segmentDirectory, withIntermediateDirectories: true)
            // The new directory's entry on disk, so the segment renamed into it survives a
            // power cut with the manifest that names it.
            syncDirectory(path)
        }
        let id = UUID()
        let temporaryPath = (segmentDirectory as NSString).appendingPathComponent(Self.temporarySegmentName(suffix: "zst", id: id))
        let temporaryDictionaryPath = (segmentDirectory as NSString).appendingPathComponent(Self.temporarySegmentName(suffix: "dict", id: id))
        defer {
            try? FileManager.default.removeItem(atPath: temporaryPath)
            try? FileManager.default.removeItem(atPath: temporaryDictionaryPath)
        }

        // Write the frames.
        let handle: FileHandle? = request.dryRun ? nil : try createExclusively(temporaryPath)
        var frames: [SegmentDescriptor.Frame] = []
        var rawTotal: UInt64 = 0
        var offset: UInt64 = 0
        var frame: [UInt8] = []
        var frameFirst: UInt64 = 0
        var frameLast: UInt64 = 0
        var frameEvents = 0
        let perFrame = max(1, request.eventsPerFrame)
        // A dry run estimates: it compresses a sample of at most 32 frames, evenly spread,
        // and scales their ratio to the whole (as `CompactionReport.compressedBytes` says).
        let sampleEvery = request.dryRun ? max(1, Int(min((horizon - from) / UInt64(perFrame) + 1, UInt64(Int.max)) / 32)) : 1
        var frameIndex = 0
        var frameBytesTotal: UInt64 = 0
        var sampledRaw: UInt64 = 0
        var sampledCompressed: UInt64 = 0
        func flush() throws {
            guard frameEvents > 0 else { return }
            defer { frameIndex += 1 }
            if request.dryRun {
                frameBytesTotal += UInt64(frame.count)
                if frameIndex % sampleEvery == 0 {
                    sampledRaw += UInt64(frame.count)
                    sampledCompressed += UInt64(try Zstd.compress(frame, level: request.level, dictionary: dictionary).count)
                }
                frame.removeAll(keepingCapacity: true)
                frameEvents = 0
                return
            }
            let compressed = try Zstd.compress(frame, level: request.level, dictionary: dictionary)
            try handle?.write(contentsOf: compressed)
            frames.append(
                SegmentDescriptor.Frame(
                    first: frameFirst, last: frameLast, offset: offset, compressedLength: UInt64(compressed.count),
                    rawLength: UInt64(frame.count)))
            offset += UInt64(compressed.count)
            frame.removeAll(keepingCapacity: true)
            frameEvents = 0
        }
        // The raw log must hold every event from…horizon, each under its own sequence: a
        // gap or a misfiled event is damage to report, not to seal into a segment.
        var expected = from
        func checkDensity(_ sequence: UInt64, _ bytes: [UInt8]) throws {
            guard sequence == expected else {
                throw LogError.malformed(
                    "event \(expected) is missing from the raw log (the next one there is \(sequence)); nothing was compacted")
            }
            guard let header = bytes.withUnsafeBytes({ EventCodec.header($0) }), header.sequence == sequence else {
                throw LogError.malformed("the raw event stored under sequence \(sequence) has no readable header for it; nothing was compacted")
            }
            expected = sequence + 1
        }
        do {
            try forEachRawEvent(from: from, through: horizon) { sequence, bytes in
                try checkDensity(sequence, bytes)
                if frameEvents == 0 { frameFirst = sequence }
                frameLast = sequence
                FrameContent.append(bytes, to: &frame)
                rawTotal += UInt64(bytes.count)
                frameEvents += 1
                if frameEvents >= perFrame || frame.count >= 4 << 20 { try flush() }
            }
            try flush()
            if expected <= horizon {
                throw LogError.malformed(
                    "events \(expected)…\(horizon) are missing from the raw log (its head is \(horizon)); nothing was compacted")
            }
            try handle?.synchronize()
            try handle?.close()
        } catch let error as LogError {
            try? handle?.close()
            // Another compaction (or a purge) that committed since the horizon was read took
            // the raw events away: not damage, a horizon to read again.
            if overtaken(from: from) { return .horizonChanged(Self.overtakenChange(from)) }
            throw error
        } catch let error as ZstdError {
            try? handle?.close()
            throw error
        } catch let error as LMDBError {
            try? handle?.close()
            throw error
        } catch {
            // A file system error (a full disk, say): say which file it was.
            try? handle?.close()
            throw LogError.segment("cannot write the new segment \(temporaryPath): \(Self.reason(error))")
        }

        let fileName = SegmentDescriptor.fileName(first: from, last: horizon, suffix: "zst")
        let dictionaryName = dictionary.map { _ in SegmentDescriptor.fileName(first: from, last: horizon, suffix: "dict") }
        let segmentPath = (segmentDirectory as NSString).appendingPathComponent(fileName)
        if request.dryRun {
            let estimate = sampledRaw == 0 ? 0 : Double(frameBytesTotal) * Double(sampledCompressed) / Double(sampledRaw)
            return .done(CompactionReport(
                moved: from...horizon, horizon: horizon, limitedBy: limit, rawBytes: Int(rawTotal),
                compressedBytes: Int(estimate.rounded()), segmentFile: nil, dictionaryFile: nil, isDryRun: true))
        }
        if let dictionary {
            let dictionaryHandle = try createExclusively(temporaryDictionaryPath)
            do {
                try dictionaryHandle.write(contentsOf: dictionary.bytes)
                try dictionaryHandle.synchronize()
                try dictionaryHandle.close()
            } catch {
                try? dictionaryHandle.close()
                throw LogError.segment("cannot write the new dictionary \(temporaryDictionaryPath): \(Self.reason(error))")
            }
        }
        let descriptor = SegmentDescriptor(
            fileName: fileName, first: from, last: horizon, rawBytes: rawTotal, compressedBytes: offset,
            dictionaryFileName: dictionaryName, frames: frames)

        if let hook = Self.compactionHook.withLock({ $0 }) { hook(path, true) }
        // Rename and commit under LMDB's writer lock, so another process's repair can't
        // mistake the new file for an orphan between the two. The horizon is checked again
        // there: another writer may have lowered it meanwhile.
        do {
            try environment.write { txn in
                if let change = try horizonChange(horizon, from: from, txn) { throw HorizonChanged(change: change) }
                if let hook = Self.compactionCommitHook.withLock({ $0 }) { hook(path) }
                try moveIntoPlace(temporaryPath, segmentPath)
                if let dictionaryName {
                    try moveIntoPlace(temporaryDictionaryPath, (segmentDirectory as NSString).appendingPathComponent(dictionaryName))
                }
                syncDirectory(segmentDirectory)
                try txn.put(descriptor.encoded(), forKey: bigEndianBytes(from), in: tables.segments)
                var moved: [[UInt8]] = []
                let range = KeyRange(lowerBound: bigEndianBytes(from), upperBound: bigEndianBytes(horizon + 1))
                try txn.forEach(in: tables.events, range: range) { key, _ in
                    moved.append(key.withUnsafeBytes { Array($0) })
                    return .next
                }
                for key in moved { try txn.delete(key: key, in: tables.events) }
                try txn.put(bigEndianBytes(horizon), forKey: MetaKey.compactedThrough, in: tables.meta)
            }
        } catch let changed as HorizonChanged {
            return .horizonChanged(changed.change)
        }
        return .done(CompactionReport(
            moved: from...horizon, horizon: horizon, limitedBy: limit, rawBytes: Int(rawTotal), compressedBytes: Int(offset),
            segmentFile: segmentPath,
            dictionaryFile: dictionaryName.map { (segmentDirectory as NSString).appendingPathComponent($0) }, isDryRun: false))
    }

    /// A file system error's cause in words: the POSIX error underneath Foundation's
    /// ("No space left on device (errno 28)"), or its own description.
    static func reason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return "\(String(cString: strerror(Int32(underlying.code)))) (errno \(underlying.code))"
        }
        if nsError.domain == NSPOSIXErrorDomain { return "\(String(cString: strerror(Int32(nsError.code)))) (errno \(nsError.code))" }
        return nsError.localizedDescription
    }

    /// The first raw sequence, the highest that may move, and what limits it.
    func compactionHorizon(_ request: CompactionRequest) throws -> (UInt64, UInt64, CompactionLimit) {
        try read { reader in
            let head = try reader.head
            let from = try reader.compactedThrough + 1
            var horizon = head
            var limit = CompactionLimit.head
            func lower(_ candidate: UInt64, _ reason: CompactionLimit) {
                if candidate < horizon {
                    horizon = candidate
                    limit = reason
                }
            }
            if let before = request.before { lower(before == 0 ? 0 : before - 1, .requested) }
            if let date = request.beforeDate {
                var last: UInt64 = from - 1
                try reader.forEachEvent(from: from, through: horizon) { event in
                    guard event.timestamp < date else { return .stop }
                    last = event.sequence
                    return .next
                }
                lower(last, .requested)
            }
            // A consumer behind a purge point holds nothing back: its history is gone.
            let purged = try reader.purgedThrough
            for (name, through) in try reader.consumers() where through >= purged {
                lower(through, .consumer(name: name, processedThrough: through))
            }
            let retention = try reader.metaNumber(MetaKey.undoRetention)
            if retention > 0 { lower(head > retention ? head - retention : 0, .undoRetention(transactions: retention)) }
            return (from, horizon, limit)
        }
    }

    /// Calls `body` with each raw (uncompacted) event's bytes, chunks joined, from `from`
    /// through `through`, which must all be there.
    ///
    /// - Throws: ``LogError/malformed(_:)`` for an event missing from the range, or one whose
    ///   rows in the events table are damaged (a chunk missing, a key of the wrong length).
    func forEachRawEvent(from: UInt64, through: UInt64, _ body: (UInt64, [UInt8]) throws -> Void) throws {
        try environment.read { txn in
            var expected = from
            try forEachRawEvent(in: txn, from: from, through: through) { sequence, bytes, damage in
                guard sequence == expected else {
                    throw EventChunks.densityError(expected: expected, found: sequence)
                }
                expected = sequence &+ 1
                if let damage { throw EventChunks.error(sequence, damage) }
                try body(sequence, bytes)
            }
            compactionEventReads.withLock { $0 += expected - from }
            if expected <= through {
                throw LogError.malformed(
                    expected == through ? "event \(through) is missing from the log" : "events \(expected)…\(through) are missing from the log")
            }
        }
    }

    /// Calls `body` with each raw event's sequence and bytes, chunks joined, and what is
    /// wrong with its rows in the events table (nil: nothing; see ``EventChunks``), in the
    /// snapshot `txn` reads. Sequences missing from the range are not reported.
    func forEachRawEvent(
        in txn: borrowing LMDBTransaction, from: UInt64, through: UInt64, _ body: (UInt64, [UInt8], String?) throws -> Void
    ) throws {
        var chunks = EventChunks()
        let range = KeyRange(lowerBound: bigEndianBytes(from), upperBound: through == .max ? nil : bigEndianBytes(through + 1))
        try txn.forEach(in: tables.events, range: range) { key, value in
            if key.withUnsafeBytes({ chunks.startsAnotherEvent($0) }) {
                let (sequence, bytes, damage) = chunks.take()
                try body(sequence, bytes, damage)
            }
            key.withUnsafeBytes { key in value.withUnsafeBytes { chunks.add(key: key, value: $0) } }
            return .next
        }
        if !chunks.isEmpty {
            let (sequence, bytes, damage) = chunks.take()
            try body(sequence, bytes, damage)
        }
    }

    func number(_ key: [UInt8], _ txn: borrowing LMDBTransaction) throws -> UInt64 {
        try MetaKey.number(try txn.value(forKey: key, in: tables.meta), key: key)
    }

    /// The sequence the next transaction gets: the head + 1, refused (damaged bookkeeping)
    /// when the head is so large that the sequences after it would overflow.
    func nextSequence(_ txn: borrowing LMDBTransaction) throws -> UInt64 {
        let head = try number(MetaKey.head, txn)
        guard head < .max - 1 else { throw LogError.malformed("the store's head is \(head): its bookkeeping is damaged") }
        return head + 1
    }

    /// Renames `temporary` to `final` (replacing a file there), inside a write transaction's
    /// closure: when LMDB runs the closure again (after growing the map), `temporary` is gone
    /// and `final` is the file moved the first time, which is kept.
    func moveIntoPlace(_ temporary: String, _ final: String) throws {
        let fileManager = FileManager.default
        if fileManager.fileExists(atPath: temporary) {
            if fileManager.fileExists(atPath: final) { try fileManager.removeItem(atPath: final) }
            try fileManager.moveItem(atPath: temporary, toPath: final)
        } else if !fileManager.fileExists(atPath: final) {
            throw LogError.segment("the new segment \(temporary) vanished before it was put in place")
        }
    }

    // MARK: - Repair

    /// Removes what an interrupted compaction or purge left in `segments/`: temporary files
    /// of dead processes, and segment or dictionary files no manifest entry names (set aside
    /// first, as a purge sets its dropped files aside, and deleted once no reader older than
    /// this repair is left). Runs at every writable open, under LMDB's writer lock.
    func repairSegments() throws {
        let fileManager = FileManager.default
        guard fileManager.fileExists(atPath: segmentDirectory) else { return }
        try environment.write { txn in
            var referenced: Set<String> = []
            // A damaged entry no longer says which files it names: then no segment or
            // dictionary file is deleted as an orphan (reads and `verify` report the entry).
            var manifestIsWhole = true
            try txn.forEach(in: tables.segments) { key, value in
                do {
                    let descriptor = try value.withUnsafeBytes { raw in
                        try SegmentDescriptor.decode(raw, context: "segment manifest entry")
                    }
                    referenced.insert(descriptor.fileName)
                    if let dictionary = descriptor.dictionaryFileName { referenced.insert(dictionary) }
                } catch {
                    manifestIsWhole = false
                }
                return .next
            }
            for name in (try? fileManager.contentsOfDirectory(atPath: segmentDirectory)) ?? [] {
                let full = (segmentDirectory as NSString).appendingPathComponent(name)
                if name.hasPrefix(SegmentReader.setAsidePrefix) {
                    continue  // deleted by the sweep below, once no reader can need them
                } else if name.hasPrefix(".tmp-") {
                    if !Self.temporaryFileMayBeWritten(name) { try? fileManager.removeItem(atPath: full) }
                } else if name.hasPrefix(".dat.nosync") {
                    // A Foundation atomic-write temporary, stranded by a kill (older builds
                    // created segment files that way; nothing writes them here now).
                    try? fileManager.removeItem(atPath: full)
                } else if manifestIsWhole && (name.hasSuffix(".zst") || name.hasSuffix(".dict")) && !referenced.contains(name) {
                    // Set aside, not deleted: a file a purge dropped but was killed before
                    // setting aside may still be read by a reader older than that purge (in
                    // another process); the sweep below deletes it once none can (before, it
                    // was deleted at once, and such a reader failed naming it missing).
                    let aside = (segmentDirectory as NSString).appendingPathComponent(SegmentReader.setAsideName(name, droppedBy: txn.id))
                    if (try? fileManager.moveItem(atPath: full, toPath: aside)) == nil { try? fileManager.removeItem(atPath: full) }
                }
            }
        }
        sweepSetAsideSegments()
    }

    /// Deletes the segment and dictionary files a purge set aside (`.purged-T-NAME`) that
    /// no open read transaction can still need: those dropped by a write transaction T no
    /// older than the oldest snapshot any reader (in any process) sees. Best effort: a file
    /// that can't be deleted now is tried again at the next sweep.
    func sweepSetAsideSegments() {
        let fileManager = FileManager.default
        guard let names = try? fileManager.contentsOfDirectory(atPath: segmentDirectory) else { return }
        let setAside = names.compactMap { name in SegmentReader.setAsideTransaction(name).map { (name, $0) } }
        guard !setAside.isEmpty, let oldest = try? environment.oldestReaderSnapshot() ?? Int.max else { return }
        for (name, transaction) in setAside where oldest >= transaction {
            try? fileManager.removeItem(atPath: (segmentDirectory as NSString).appendingPathComponent(name))
        }
    }

    /// This process's token in the names of the temporary segment files it writes (16 hex
    /// digits, random per process): a file named with this process's ID but another token —
    /// or none, as names were before — was left by an earlier process that had the same ID
    /// (a container's app is PID 1 at every start), which is gone.
    static let processToken: String = {
        var generator = SystemRandomNumberGenerator()
        let value = UInt64.random(in: 1...UInt64.max, using: &generator)
        return String(value, radix: 16).leftPadded(to: 16)
    }()

    /// The name of a temporary segment (`zst`) or dictionary (`dict`) file this process
    /// writes: `.tmp-PID-TOKEN-UUID.SUFFIX` (spec 0004 §7.3).
    static func temporarySegmentName(suffix: String, id: UUID = UUID()) -> String {
        ".tmp-\(ProcessInfo.processInfo.processIdentifier)-\(processToken)-\(id.uuidString).\(suffix)"
    }

    /// Whether the temporary file `name` (`.tmp-PID-…`) may still be being written: this
    /// process's, named with its token, or another live process's. A file of this process's
    /// ID without its token is an earlier process's (before, it was kept for good, as this
    /// process's own); a PID that doesn't parse or isn't running is a dead process's.
    static func temporaryFileMayBeWritten(_ name: String) -> Bool {
        let parts = name.dropFirst(5).split(separator: "-", omittingEmptySubsequences: false)
        guard let first = parts.first, let pid = Int32(first), pid > 0 else { return false }
        if pid == ProcessInfo.processInfo.processIdentifier {
            return parts.count > 1 && parts[1] == Substring(processToken)
        }
        return processIsAlive(pid)
    }

    /// Removes the scratch copies (`.vacuum-UUID/`) vacuums killed before they finished left
    /// in the store directory — a partial or whole copy of `data.mdb`, as large as the store,
    /// which nothing reads. Runs at every writable open: while this process has the
    /// environment open, no vacuum can run (a vacuum needs the store closed everywhere, and
    /// one running holds the lock an open waits for). Best effort.
    static func removeVacuumScratch(inStoreDirectory path: String) {
        let fileManager = FileManager.default
        for name in (try? fileManager.contentsOfDirectory(atPath: path)) ?? [] where name.hasPrefix(".vacuum-") {
            try? fileManager.removeItem(atPath: (path as NSString).appendingPathComponent(name))
        }
    }

    // MARK: - Consumers and retention

    /// Records that consumer `name` has processed every transaction through `sequence`;
    /// compaction never moves events past the lowest consumer's checkpoint.
    ///
    /// - Throws: ``LogError/invalidOperation(_:)`` for a `sequence` past the head.
    public func registerConsumer(_ name: String, processedThrough sequence: UInt64) throws {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only") }
        let key = try Self.consumerKey(name)
        try environment.write { txn in
            try checkConsumerPoint(name, sequence, txn)
            try txn.put(bigEndianBytes(sequence), forKey: key, in: tables.consumers)
        }
    }

    /// Refuses a processed point past the head: read back, it would be damage (spec 0004 §7.1).
    private func checkConsumerPoint(_ name: String, _ sequence: UInt64, _ txn: borrowing LMDBTransaction) throws {
        let head = try number(MetaKey.head, txn)
        guard sequence <= head else {
            throw LogError.invalidOperation("consumer \"\(name)\" can't have processed through \(sequence): the log's head is \(head)")
        }
    }

    /// The longest consumer name, in UTF-8 bytes: LMDB's largest key.
    public static let maximumConsumerNameLength = 511

    /// Consumer `name`'s key: its UTF-8 bytes.
    ///
    /// - Throws: ``LogError/invalidOperation(_:)`` for an empty name or one longer than
    ///   ``maximumConsumerNameLength`` bytes.
    static func consumerKey(_ name: String) throws(LogError) -> [UInt8] {
        let key = Array(name.utf8)
        guard !key.isEmpty else { throw .invalidOperation("a consumer needs a name") }
        guard key.count <= maximumConsumerNameLength else {
            throw .invalidOperation(
                "a consumer name is at most \(maximumConsumerNameLength) bytes of UTF-8; \"\(name.prefix(40))…\" has \(key.count)")
        }
        return key
    }

    /// Registers consumer `name` at `sequence` unless it is registered already (its point
    /// is then kept), checked and written in one write transaction, so two registrations
    /// racing (in any processes) can't overwrite each other. Whether it registered it.
    ///
    /// - Throws: ``LogError/invalidOperation(_:)`` on a read-only store, unless the consumer
    ///   is registered already (nothing needs writing).
    public func registerConsumerIfAbsent(_ name: String, processedThrough sequence: UInt64) throws -> Bool {
        let key = try Self.consumerKey(name)
        if configuration.isReadOnly {
            guard try read({ reader in try reader.consumers().contains { $0.name == name } }) else {
                throw LogError.invalidOperation("the store at \(path) is open read-only")
            }
            return false
        }
        return try environment.write { txn in
            if try txn.value(forKey: key, in: tables.consumers) != nil { return false }
            try checkConsumerPoint(name, sequence, txn)
            try txn.put(bigEndianBytes(sequence), forKey: key, in: tables.consumers)
            return true
        }
    }

    /// What ``moveConsumer(_:to:)`` did.
    public enum ConsumerMove: Sendable, Hashable {
        /// The point moved.
        case moved
        /// No consumer has that name (it was removed): nothing was written.
        case unknownConsumer
        /// The sequence is below the purge point (given): nothing was written.
        case purged(through: UInt64)
        /// The sequence is past the head (given): nothing was written.
        case pastHead(UInt64)
    }

    /// Moves registered consumer `name`'s point to `sequence`, checking in the same write
    /// transaction that it is still registered and that `sequence` is neither past the head
    /// nor below the purge point — so a consumer removed, or history purged, by another
    /// writer meanwhile is never brought back or pointed into the purged range.
    public func moveConsumer(_ name: String, to sequence: UInt64) throws -> ConsumerMove {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only") }
        return try environment.write { txn in
            let head = try number(MetaKey.head, txn)
            if sequence > head { return .pastHead(head) }
            let purged = try number(MetaKey.purgedThrough, txn)
            if sequence < purged { return .purged(through: purged) }
            let key = try Self.consumerKey(name)
            guard try txn.value(forKey: key, in: tables.consumers) != nil else { return .unknownConsumer }
            try txn.put(bigEndianBytes(sequence), forKey: key, in: tables.consumers)
            return .moved
        }
    }

    /// Forgets consumer `name`; it no longer holds compaction back.
    public func removeConsumer(_ name: String) throws {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only") }
        let key = try Self.consumerKey(name)
        try environment.write { txn in _ = try txn.delete(key: key, in: tables.consumers) }
    }

    /// Keeps the newest `transactions` transactions raw for persisted undo (0: none).
    public func setUndoRetention(_ transactions: UInt64) throws {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only") }
        try environment.write { txn in try txn.put(bigEndianBytes(transactions), forKey: MetaKey.undoRetention, in: tables.meta) }
    }

    /// The segment manifest, oldest first.
    public func segments() throws -> [SegmentInfo] {
        try read { reader in try reader.segmentDescriptors().map(\.info) }
    }

    // MARK: - Vacuum

    /// Copies the store's environment compacted (`mdb_env_copy2` with `MDB_CP_COMPACT`) and
    /// puts the copy in place, so the file shrinks after compaction or deletes. Returns the
    /// data file's size before and after.
    ///
    /// The store must not be open anywhere — in this process or another — while it runs: a
    /// handle open meanwhile would go on writing the old file, and its commits would be lost.
    /// So it is refused while one is (``LMDBEnvironment/replaceWithCompactedCopy(path:)``).
    ///
    /// - Throws: ``LogError/notAStore(_:)`` for a directory without a store; ``LMDBError``
    ///   with ``LMDBError/Code/incompatibleOpen`` naming who has the store open.
    public static func vacuum(path: String) throws -> (before: Int, after: Int) {
        let dataPath = (path as NSString).appendingPathComponent("data.mdb")
        guard FileManager.default.fileExists(atPath: dataPath) else { throw LogError.notAStore(path) }
        return try LMDBEnvironment.replaceWithCompactedCopy(path: path)
    }
}

/// Creates `path` for writing with `open(2)` (`O_CREAT | O_EXCL`): no hidden temporary file
/// (Foundation's atomic writes leave `.dat.nosync*` files behind when a process is killed).
func createExclusively(_ path: String) throws -> FileHandle {
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
    guard fd >= 0 else {
        // The system's words too (before, only the number: "(errno 24)" for too many open files).
        let code = errno
        throw LogError.segment("cannot create \(path): \(String(cString: strerror(code))) (errno \(code))")
    }
    return FileHandle(fileDescriptor: fd, closeOnDealloc: true)
}

/// Opens `path` for reading with `open(2)`; the descriptor, or -1 with `errno` set.
func openForReading(_ path: String) -> Int32 {
    open(path, O_RDONLY | O_CLOEXEC)
}

/// fsyncs a directory so a rename in it is durable.
func syncDirectory(_ path: String) {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return }
    fsync(fd)
    close(fd)
}

/// Whether a process with `pid` exists.
func processIsAlive(_ pid: Int32) -> Bool {
    guard pid > 0 else { return false }
    return kill(pid, 0) == 0 || errno == EPERM
}

// MARK: - Reading segments

extension LogReader {
    /// The named consumers and their checkpoints.
    ///
    /// - Throws: ``LogError/malformed(_:)`` naming the consumer for a row that isn't 8 bytes
    ///   or names a point past the head (a damaged table): read as 0, the consumer would be
    ///   handed every transaction again.
    public func consumers() throws -> [(name: String, processedThrough: UInt64)] {
        var result: [(String, UInt64)] = []
        let head = try head
        try txn.forEach(in: tables.consumers) { key, value in
            let name = key.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            guard value.byteCount == 8, let point = value.withUnsafeBytes({ readBigEndian($0) }), point <= head else {
                throw LogError.malformed("consumer \(name.debugDescription): " + Self.consumerDamage(value.withUnsafeBytes { Array($0) }, head: head))
            }
            result.append((name, point))
            return .next
        }
        return result
    }

    /// What is wrong with a consumer's row `value`, or nil if nothing.
    static func consumerDamage(_ value: [UInt8], head: UInt64) -> String {
        let hex = value.map { String(format: "%02x", $0) }.joined()
        guard value.count == 8, let point = value.withUnsafeBytes({ readBigEndian($0) }) else {
            return "its processed point is \(value.count) bytes (\(hex)), not 8: the consumers table is damaged"
        }
        return "its processed point \(point) is past the head (\(head)): the consumers table is damaged"
    }

    /// The segment manifest, oldest first.
    func segmentDescriptors() throws -> [SegmentDescriptor] {
        var result: [SegmentDescriptor] = []
        try txn.forEach(in: tables.segments) { key, value in
            let first = key.withUnsafeBytes { readBigEndian($0) } ?? 0
            result.append(try value.withUnsafeBytes { raw in
                try SegmentDescriptor.decode(raw, context: "manifest entry for the segment starting at \(first)")
            })
            return .next
        }
        return result
    }

    /// The segments, oldest first.
    public func segments() throws -> [SegmentInfo] { try segmentDescriptors().map(\.info) }

    /// The manifest entries that may hold events `lowest…highest`: each keyed at or below
    /// `highest` whose successor's key is above `lowest`. Only these are decoded, so a
    /// damaged entry fails the reads of its own events (naming it), not every read of the
    /// other segments.
    func segmentDescriptors(overlapping lowest: UInt64, _ highest: UInt64) throws -> [SegmentDescriptor] {
        // Newest first from `highest` down to the first entry keyed at or below `lowest`:
        // reading one event decodes one entry, however long the manifest.
        var result: [SegmentDescriptor] = []
        let range = KeyRange(lowerBound: nil, upperBound: highest == .max ? nil : bigEndianBytes(highest + 1))
        try txn.forEach(in: tables.segments, range: range, reverse: true) { key, value in
            let first = key.withUnsafeBytes { readBigEndian($0) } ?? 0
            result.append(try value.withUnsafeBytes { raw in
                try SegmentDescriptor.decode(raw, context: "manifest entry for the segment starting at \(first)")
            })
            return first <= lowest ? .stop : .next
        }
        return result.reversed()
    }

    /// Calls `body` with each compacted event from `from` through `through`, decompressing
    /// only the frames that hold them. With `wanted`, only events whose bytes it accepts are
    /// decoded (the others are still counted for density).
    func forEachSegmentEvent(
        from: UInt64, through: UInt64, where wanted: ((UnsafeRawBufferPointer) -> Bool)? = nil,
        _ body: (TransactionEvent) throws -> IterationDecision
    ) throws {
        var expected = from
        for segment in try segmentDescriptors(overlapping: from, through) where segment.last >= from && segment.first <= through {
            let reader = try SegmentReader(segment, directory: log.segmentDirectory, snapshot: txn.id)
            for (index, frame) in segment.frames.enumerated() where frame.last >= from && frame.first <= through {
                let frameEvents = try reader.events(inFrame: index)
                // A frame holds its events densely, in order, as the manifest says: a frame that
                // decodes but holds others (a segment file swapped for another whose frames
                // happen to line up) is named, not read past as if its events were missing
                // (before, that read failed with "no segment holds them", naming no file).
                guard frameEvents.count == Int(frame.last - frame.first + 1) else {
                    throw LogError.segment(
                        "segment \(segment.fileName) frame \(index): holds \(frameEvents.count) events, the manifest says \(frame.first)…\(frame.last)")
                }
                for (position, bytes) in frameEvents.enumerated() {
                    let atPosition = frame.first &+ UInt64(position)
                    if let wanted, let header = bytes.withUnsafeBytes({ EventCodec.header($0) }) {
                        guard header.sequence == atPosition else {
                            throw LogError.segment("\(segment.fileName) frame \(index): expected event \(atPosition), found \(header.sequence)")
                        }
                        guard header.sequence >= from, header.sequence <= through else { continue }
                        guard header.sequence == expected else {
                            throw LogError.segment("\(segment.fileName): expected event \(expected), found \(header.sequence)")
                        }
                        if !bytes.withUnsafeBytes({ wanted($0) }) {
                            expected += 1
                            continue
                        }
                    }
                    let event = try bytes.withUnsafeBytes { raw in
                        // Named by the sequence its position in the frame gives, as a raw
                        // event is by its key.
                        try EventCodec.decode(raw, catalog: log.catalog) {
                            "event \(frame.first &+ UInt64(position)) (segment \(segment.fileName) frame \(index))"
                        }
                    }
                    guard event.sequence == atPosition else {
                        throw LogError.segment("\(segment.fileName) frame \(index): expected event \(atPosition), found \(event.sequence)")
                    }
                    guard event.sequence >= from, event.sequence <= through else { continue }
                    guard event.sequence == expected else {
                        throw LogError.segment("\(segment.fileName): expected event \(expected), found \(event.sequence)")
                    }
                    expected += 1
                    if try body(event) == .stop { return }
                }
            }
        }
        if expected <= through {
            throw LogError.segment("events \(expected)…\(through) are compacted but no segment holds them")
        }
    }
}

extension LogReader {
    /// Calls `body` with the compacted events of `sequences` (ascending), in that order or
    /// reversed, decompressing each frame that holds some of them once and decoding only
    /// those events.
    func forEachSegmentEvent(
        among sequences: ArraySlice<UInt64>, reversed: Bool, _ body: (TransactionEvent) throws -> IterationDecision
    ) throws {
        guard let lowest = sequences.first, let highest = sequences.last else { return }
        // The frames holding them, in reading order, each with the sequences it holds.
        var plan: [(segment: SegmentDescriptor, frame: Int, wanted: ArraySlice<UInt64>)] = []
        var rest = sequences
        for segment in try segmentDescriptors(overlapping: lowest, highest) where segment.last >= lowest && segment.first <= highest {
            if rest.isEmpty { break }
            for (index, frame) in segment.frames.enumerated() where frame.last >= lowest {
                if rest.isEmpty { break }
                let start = rest.partitioningIndex { $0 >= frame.first }
                let end = rest[start...].partitioningIndex { $0 > frame.last }
                if start > rest.startIndex {
                    // Sequences below this frame that no earlier frame held.
                    throw LogError.segment("event \(rest[rest.startIndex]) is compacted but no segment holds it")
                }
                if start < end { plan.append((segment, index, rest[start..<end])) }
                rest = rest[end...]
            }
        }
        if let missing = rest.first {
            throw LogError.segment("event \(missing) is compacted but no segment holds it")
        }
        var reader: (first: UInt64, reader: SegmentReader)?
        for step in reversed ? Array(plan.reversed()) : plan {
            if reader?.first != step.segment.first {
                reader = (step.segment.first, try SegmentReader(step.segment, directory: log.segmentDirectory, snapshot: txn.id))
            }
            guard let segmentReader = reader?.reader else { continue }
            let frame = step.segment.frames[step.frame]
            let context = "segment \(step.segment.fileName) frame \(step.frame)"
            let bytes = try segmentReader.events(inFrame: step.frame)
            guard bytes.count == Int(frame.last - frame.first + 1) else {
                throw LogError.segment("\(context): holds \(bytes.count) events, the manifest says \(frame.first)…\(frame.last)")
            }
            // A frame holds its events densely, in order: the wanted ones are found by
            // position, and each is checked to be the event it should be when decoded.
            let order = reversed ? Array(step.wanted.reversed()) : Array(step.wanted)
            for sequence in order {
                let event = try bytes[Int(sequence - frame.first)].withUnsafeBytes { raw in
                    try EventCodec.decode(raw, catalog: log.catalog) { "event \(sequence) (\(context))" }
                }
                guard event.sequence == sequence else {
                    throw LogError.segment("\(step.segment.fileName): expected event \(sequence), found \(event.sequence)")
                }
                if try body(event) == .stop { return }
            }
        }
    }
}

/// Reads frames of one segment file, checking each against its manifest entry.
///
/// A reader whose snapshot is older than a purge finds the files that purge dropped set
/// aside as `.purged-T-NAME` (T: the purge's write transaction), until no reader that old
/// is left (``EventLog/sweepSetAsideSegments()``).
///
/// The file is opened once, when the reader is made, and read through that descriptor: a
/// purge that sets the file aside (renames it) afterwards, even between two frames, doesn't
/// change what this reader reads. Finding the file and opening it is one step
/// (``openFile(_:in:snapshot:context:)``): a name that vanishes between the two is looked for again.
struct SegmentReader {
    let descriptor: SegmentDescriptor
    let directory: String
    /// The snapshot (read transaction ID) the manifest entry was read in; nil: only the
    /// file's own name is looked for.
    let snapshot: Int?
    let dictionary: ZstdDictionary?
    /// The segment file, open for reading.
    let file: OpenFile

    static let setAsidePrefix = ".purged-"

    /// The name a purge by write transaction `transaction` gives the file `name` it drops.
    static func setAsideName(_ name: String, droppedBy transaction: Int) -> String {
        "\(setAsidePrefix)\(transaction)-\(name)"
    }

    /// The write transaction that set `name` aside, or nil if it isn't a set-aside name.
    static func setAsideTransaction(_ name: String) -> Int? {
        guard name.hasPrefix(setAsidePrefix) else { return nil }
        return name.dropFirst(setAsidePrefix.count).split(separator: "-", maxSplits: 1).first.flatMap { Int($0) }
    }

    init(_ descriptor: SegmentDescriptor, directory: String, snapshot: Int? = nil) throws {
        self.descriptor = descriptor
        self.directory = directory
        self.snapshot = snapshot
        let what = "segment \(descriptor.fileName) (events \(descriptor.first)…\(descriptor.last))"
        guard let file = try Self.openFile(descriptor.fileName, in: directory, snapshot: snapshot, context: what) else {
            throw Self.notFound(descriptor, in: directory)
        }
        self.file = file
        if let name = descriptor.dictionaryFileName {
            let context = "the dictionary \(name) of \(descriptor.fileName)"
            guard let dictionaryFile = try Self.openFile(name, in: directory, snapshot: snapshot, context: context) else {
                if let denied = Self.permissionProblem(name, in: directory) {
                    throw LogError.segment("\(context) can't be read: \(denied)")
                }
                throw LogError.segment("\(context) is missing")
            }
            let bytes = try dictionaryFile.readAll(context: context)
            do {
                dictionary = try ZstdDictionary(bytes: bytes)
            } catch {
                throw LogError.segment("\(context) is damaged: \(error)")
            }
        } else {
            dictionary = nil
        }
    }

    /// The error for a segment file that `openFile` didn't find: missing, or in a directory
    /// this user can't search (which looks the same to `fileExists`).
    static func notFound(_ descriptor: SegmentDescriptor, in directory: String) -> LogError {
        let what = "\(descriptor.fileName) (events \(descriptor.first)…\(descriptor.last))"
        if let denied = permissionProblem(descriptor.fileName, in: directory) {
            return .segment("\(what) in \(directory) can't be read: \(denied)")
        }
        return .segment("\(what) is missing from \(directory)")
    }

    /// Why `name` in `directory` can't be reached when the answer is a permission, else nil.
    static func permissionProblem(_ name: String, in directory: String) -> String? {
        let path = (directory as NSString).appendingPathComponent(name)
        guard access(path, F_OK) != 0, errno == EACCES else { return nil }
        return "\(directory) isn't searchable by user \(getuid()) (\(String(cString: strerror(EACCES))))"
    }

    /// Where the file `name` is for a reader of `snapshot`: under its own name, or set aside
    /// by the first purge after the snapshot (a name can come back and be dropped again).
    ///
    /// The answer can be out of date as soon as it is given (a purge may set the file aside
    /// right after): open the file with ``openFile(_:in:snapshot:context:)``, not by this path.
    static func locate(_ name: String, in directory: String, snapshot: Int?) -> String? {
        let path = (directory as NSString).appendingPathComponent(name)
        if FileManager.default.fileExists(atPath: path) { return path }
        guard let snapshot, let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return nil }
        let candidates = names.compactMap { candidate -> (Int, String)? in
            guard let transaction = setAsideTransaction(candidate), transaction > snapshot,
                candidate == setAsideName(name, droppedBy: transaction)
            else { return nil }
            return (transaction, candidate)
        }
        return candidates.min { $0.0 < $1.0 }.map { (directory as NSString).appendingPathComponent($0.1) }
    }

    /// The file `name` for a reader of `snapshot`, opened for reading: where ``locate(_:in:snapshot:)``
    /// finds it, or nil if it is nowhere. A purge renames the files it drops after its
    /// transaction commits, so a file found under its own name can be gone from it by the
    /// time it is opened: it is then looked for again, and found set aside (a rename is
    /// atomic, and a set-aside file outlives every reader older than the purge).
    ///
    /// - Throws: ``LogError/segment(_:)`` naming the path when the file is there but can't be
    ///   opened (a permission, say); `context` says what the file is.
    static func openFile(_ name: String, in directory: String, snapshot: Int?, context: String) throws -> OpenFile? {
        // Each path is tried once: the loop ends when the file is found nowhere new.
        var tried: Set<String> = []
        while let path = locate(name, in: directory, snapshot: snapshot), tried.insert(path).inserted {
            let descriptor = openForReading(path)
            if descriptor >= 0 { return OpenFile(descriptor: descriptor, path: path) }
            let code = errno
            guard code == ENOENT else {
                throw LogError.segment("\(context): cannot read \(path): \(String(cString: strerror(code))) (errno \(code))")
            }
        }
        return nil
    }

    /// The size of the file this reader reads, in bytes.
    func fileSize() throws -> Int { try file.size() }

    /// The events' bytes in frame `index`.
    func events(inFrame index: Int) throws -> [[UInt8]] {
        let frame = descriptor.frames[index]
        let context = "segment \(descriptor.fileName) frame \(index) (events \(frame.first)…\(frame.last), bytes \(frame.offset)…)"
        let compressed = try file.read(count: Int(frame.compressedLength), at: frame.offset, context: context)
        guard compressed.count == Int(frame.compressedLength) else {
            throw LogError.segment("\(context): the file is truncated (\(compressed.count) of \(frame.compressedLength) bytes)")
        }
        let raw: [UInt8]
        do {
            raw = try Zstd.decompress(compressed, maximumSize: Int(frame.rawLength), dictionary: dictionary)
        } catch let error as ZstdError {
            throw LogError.segment("\(context): \(error)\(dictionaryNote(compressed))")
        }
        guard raw.count == Int(frame.rawLength) else {
            throw LogError.segment("\(context): decompressed to \(raw.count) bytes, the manifest says \(frame.rawLength)")
        }
        return try FrameContent.split(raw, context: context)
    }

    /// What a frame that failed to decompress says about the segment's dictionary, which is
    /// as likely the damaged file as the segment: its name, and the ID the frame names beside
    /// the ID of the dictionary file (another segment's dictionary, or one damaged in its
    /// header, has another). Empty for a segment without a dictionary.
    func dictionaryNote(_ compressed: Data) -> String {
        guard let name = descriptor.dictionaryFileName else { return "" }
        let wanted = Zstd.dictionaryID(ofFrame: compressed)
        let held = dictionary?.id ?? 0
        let ids = wanted == held
            ? "ID \(held), as the frame names"
            : "ID \(held), where the frame names ID \(wanted): another dictionary than the frame's"
        return "; decompressed with the dictionary \(name) (\(ids)), which may be the damaged file"
    }

    /// A file open for reading by position (`pread`, so readers on several threads don't
    /// share an offset), closed when the last reader holding it goes. Renaming or deleting
    /// the file's name doesn't change what is read through it.
    final class OpenFile: Sendable {
        let descriptor: Int32
        /// Where the file was when it was opened (for messages).
        let path: String

        init(descriptor: Int32, path: String) {
            self.descriptor = descriptor
            self.path = path
        }

        deinit { close(descriptor) }

        /// Up to `count` bytes from `offset`: fewer only at the end of the file (so a damaged
        /// manifest's length never sizes the buffer beyond the file).
        func read(count: Int, at offset: UInt64, context: String) throws -> Data {
            let size = try size()
            let wanted = offset >= UInt64(size) ? 0 : min(count, size - Int(offset))
            var data = Data(count: wanted)
            var done = 0
            while done < wanted {
                let result = data.withUnsafeMutableBytes { buffer in
                    pread(descriptor, buffer.baseAddress.map { $0 + done }, wanted - done, off_t(offset) + off_t(done))
                }
                if result == 0 { break }
                if result < 0 {
                    let code = errno
                    if code == EINTR { continue }
                    throw LogError.segment("\(context): cannot read \(path): \(String(cString: strerror(code))) (errno \(code))")
                }
                done += result
            }
            return data.prefix(done)
        }

        /// The file's size in bytes (`fstat`).
        func size() throws -> Int {
            var status = stat()
            guard fstat(descriptor, &status) == 0 else {
                let code = errno
                throw LogError.segment("cannot read the size of \(path): \(String(cString: strerror(code))) (errno \(code))")
            }
            return Int(status.st_size)
        }

        /// Writes the whole file to the new file `target` (created exclusively), in pieces.
        func copy(to target: String) throws {
            let handle = try createExclusively(target)
            do {
                var offset: UInt64 = 0
                while true {
                    let piece = try read(count: 1 << 20, at: offset, context: "copying to \(target)")
                    if piece.isEmpty { break }
                    try handle.write(contentsOf: piece)
                    offset += UInt64(piece.count)
                }
                try handle.close()
            } catch let error as LogError {
                try? handle.close()
                throw error
            } catch {
                try? handle.close()
                throw LogError.segment("cannot write \(target): \(EventLog.reason(error))")
            }
        }

        /// The whole file.
        func readAll(context: String) throws -> [UInt8] {
            let total = try size()
            return Array(try read(count: total, at: 0, context: context))
        }
    }
}

extension ArraySlice where Element == UInt64 {
    /// The index of the first element `predicate` accepts, the slice being ascending and
    /// `predicate` false then true along it (binary search); `endIndex` if none.
    func partitioningIndex(where predicate: (UInt64) -> Bool) -> Index {
        var low = startIndex
        var high = endIndex
        while low < high {
            let middle = low + (high - low) / 2
            if predicate(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

extension String {
    /// The string with zeros before it up to `width` characters.
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
