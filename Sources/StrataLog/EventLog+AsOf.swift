import Foundation
import Synchronization
public import StrataStorage

extension LogReader {
    /// The current state of every object, in memory: every record of the state table, each
    /// decoded with the model version that wrote it, and the membership rows — whatever this
    /// handle's model (an earlier version's handle sees the objects a later one renamed or
    /// added, under their names, as the log's replay has them) and whatever generation the
    /// reader is pinned to (as-of reads read the log as it is; before, a pinned reader's
    /// walk back started from the generation's objects and reverted their later changes a
    /// second time).
    public func currentState() throws -> StateImage {
        var image = StateImage()
        var ids: [ObjectKey: StoredObjectID] = [:]
        try txn.forEach(in: tables.state) { key, value in
            guard key.byteCount == ObjectKey.byteCount, let objectKey = key.withUnsafeBytes({ ObjectKey($0) }) else {
                throw LogError.malformed("the state table holds a key of \(key.byteCount) bytes, not \(ObjectKey.byteCount)")
            }
            let id = try writer.id(objectKey)
            let record = try value.withUnsafeBytes { raw in try writer.decodeRecord(raw, entityName: id.entity, context: "record \(id)") }
            image.objects[id] = record.values
            ids[objectKey] = id
            return .next
        }
        try addMembers(to: &image, range: .all) { ids[$0] }
        return image
    }

    /// One object's values as the state table holds them now (nil: it doesn't exist), as
    /// ``currentState()`` gives them: not as a pinned generation or this handle's model
    /// would read them.
    func storedValues(_ id: StoredObjectID) throws -> [String: LogValue]? {
        let key = try writer.key(id)
        guard let record = try writer.readRecord(txn, key, entityName: id.entity) else { return nil }
        var image = StateImage(objects: [id: record.values])
        try addMembers(to: &image, range: .prefix(key.bytes)) { $0 == key ? id : nil }
        return image.objects[id]
    }

    /// Adds the `members` rows in `range` to the objects of `image` (`source` names each
    /// row's source object, nil: skip it) as sorted `.references` under the relationship's
    /// name, as a checkpoint's membership rows are read.
    private func addMembers(
        to image: inout StateImage, range: KeyRange, source: (ObjectKey) -> StoredObjectID?
    ) throws {
        var members: [StoredObjectID: [String: [StoredObjectID]]] = [:]
        try txn.forEach(in: tables.members, range: range) { key, _ in
            let parts = key.withUnsafeBytes { raw -> (ObjectKey, UInt16, ObjectKey)? in
                guard raw.count == 22, let from = ObjectKey(raw, at: 0), let code = readBigEndian(raw, at: 10, count: 2),
                    let to = ObjectKey(raw, at: 12)
                else { return nil }
                return (from, UInt16(code), to)
            }
            guard let (from, code, to) = parts else {
                throw LogError.malformed("the members table holds a key of \(key.byteCount) bytes, not 22")
            }
            guard let id = source(from) else { return .next }
            guard let qualified = log.catalog.relationshipName(code) else {
                throw LogError.malformed("a membership row of \(id) names relationship code \(code), which the catalog doesn't have")
            }
            members[id, default: [:]][String(qualified.split(separator: ".").last ?? ""), default: []].append(try writer.id(to))
            return .next
        }
        for (id, properties) in members where image.objects[id] != nil {
            for (property, targets) in properties { image.objects[id]?[property] = .references(targets.sorted()) }
        }
    }

    /// How `state(asOf:)` will build the state as of `sequence`, and what it costs in events.
    public enum AsOfPlan: Sendable, Hashable {
        /// Revert events from the head back to `sequence + 1`.
        case backwardFromHead(events: UInt64)
        /// Load the checkpoint at `checkpoint` and apply events up to `sequence`.
        case forwardFromCheckpoint(checkpoint: UInt64, events: UInt64)
        /// Replay from the first event.
        case forwardFromStart(events: UInt64)
    }

    /// The cheapest way to reach `sequence`: the fewest events to decode.
    ///
    /// - Throws: ``LogError/sequenceOutOfRange(requested:head:)`` past the head;
    ///   ``LogError/historyPurged(requested:purgedThrough:)`` before a purge point (the base
    ///   snapshot, as of the purge point itself, is the earliest state kept).
    public func plan(asOf sequence: UInt64) throws -> AsOfPlan {
        let head = try head
        guard sequence <= head else { throw LogError.sequenceOutOfRange(requested: sequence, head: head) }
        let purged = try purgedThrough
        guard sequence >= purged else { throw LogError.historyPurged(requested: sequence, purgedThrough: purged) }
        var best = AsOfPlan.backwardFromHead(events: head - sequence)
        var bestCost = head - sequence
        if purged == 0 && sequence < bestCost {
            best = .forwardFromStart(events: sequence)
            bestCost = sequence
        }
        if let checkpoint = try checkpoint(atOrBefore: sequence), sequence - checkpoint < bestCost {
            best = .forwardFromCheckpoint(checkpoint: checkpoint, events: sequence - checkpoint)
        }
        return best
    }

    /// The state of the whole store as it was just after transaction `sequence` (0: empty),
    /// from before-images walking back from the head or events walking forward from a
    /// checkpoint, whichever decodes fewer events.
    ///
    /// - Throws: as ``plan(asOf:)``.
    public func state(asOf sequence: UInt64) throws -> StateImage {
        var image = try recordedState(asOf: sequence)
        // A paired side filled after `sequence` had no lists of its own then: derived from
        // its inverse's, as the fill derived them (spec 0004 §4.1).
        let unfilled = try sidesUnfilled(asOf: sequence)
        if !unfilled.isEmpty { deriveUnfilledSides(unfilled, in: &image) }
        return image
    }

    /// The records as they were just after `sequence`, as ``state(asOf:)`` builds them, before
    /// it derives the lists of sides filled later.
    private func recordedState(asOf sequence: UInt64) throws -> StateImage {
        log.wholeStateReads.withLock { $0 += 1 }
        switch try plan(asOf: sequence) {
        case .backwardFromHead:
            var image = try currentState()
            var events: [TransactionEvent] = []
            try forEachEvent(from: sequence + 1) { event in
                events.append(event)
                return .next
            }
            for event in events.reversed() { image.revert(event) }
            return image
        case .forwardFromCheckpoint(let checkpoint, _):
            var image = try checkpointState(checkpoint)
            if sequence > checkpoint {
                try forEachEvent(from: checkpoint + 1, through: sequence) { event in
                    image.apply(event)
                    return .next
                }
            }
            return image
        case .forwardFromStart:
            var image = StateImage()
            if sequence > 0 {
                try forEachEvent(from: 1, through: sequence) { event in
                    image.apply(event)
                    return .next
                }
            }
            return image
        }
    }

    /// The model version the store's data was in just after transaction `sequence`: the
    /// version transaction `sequence` was written with — a point before a migration is in an
    /// earlier version's terms, whose entities and property names ``state(asOf:)`` and
    /// ``objects(_:asOf:)`` give. For 0 (the empty store), the oldest stored version; for the
    /// purge point, whose transaction is gone, the version the purge recorded it was written
    /// with (before, the version in use: after a later version renamed an entity, the
    /// state there named entities that version doesn't have) — or, purged by a Strata that
    /// didn't record it, the version in use.
    ///
    /// - Throws: as ``plan(asOf:)``; ``LogError/malformed(_:)`` for a recorded version that
    ///   isn't 4 bytes.
    public func modelVersion(asOf sequence: UInt64) throws -> Int {
        // The range checks of ``plan(asOf:)``, without planning (which seeks a checkpoint).
        let head = try head
        guard sequence <= head else { throw LogError.sequenceOutOfRange(requested: sequence, head: head) }
        let purged = try purgedThrough
        guard sequence >= purged else { throw LogError.historyPurged(requested: sequence, purgedThrough: purged) }
        if sequence == 0 { return log.catalog.modelVersions.first ?? log.modelVersion }
        guard sequence > purged else { return try purgeModelVersion ?? log.modelVersion }
        // An event still in the events table: its version read from its header, its checksum
        // checked, without decoding its changes (a bulk import's are many). Compacted, damaged
        // or otherwise unreadable that way: decoded, which names what is wrong.
        if sequence > (try compactedThrough) {
            var version: Int?
            try log.forEachRawEvent(in: txn, from: sequence, through: sequence) { found, bytes, damage in
                guard found == sequence, damage == nil else { return }
                version = bytes.withUnsafeBytes { raw in
                    EventCodec.header(raw)?.sequence == sequence ? EventCodec.checkedModelVersion(raw) : nil
                }
            }
            if let version { return version }
        }
        return try event(sequence).modelVersion
    }

    /// The model version the purge recorded for its point (nil: none recorded).
    var purgeModelVersion: Int? {
        get throws {
            guard let row = try txn.value(forKey: MetaKey.purgeModelVersion, in: tables.meta) else { return nil }
            return Int(try MetaKey.number(row, key: MetaKey.purgeModelVersion, byteCount: 4))
        }
    }

    /// One object's values as they were just after transaction `sequence`; nil if it didn't
    /// exist then. Walks back only through the transactions that touched it.
    ///
    /// - Throws: as ``plan(asOf:)``.
    public func object(_ id: StoredObjectID, asOf sequence: UInt64) throws -> [String: LogValue]? {
        try objects([id], asOf: sequence)[id]
    }

    /// The values of each of `ids` as they were just after transaction `sequence`; an object
    /// that didn't exist then has no entry. The same as ``object(_:asOf:)`` for each, but a
    /// transaction that touched several of them is read once, not once per object (asking
    /// for each object of a bulk update's 100k did that transaction's 100k changes 100k
    /// times). Memory: the objects' values and one transaction at a time. Objects of a
    /// paired side filled after `sequence` (spec 0004 §4.1) get their lists derived from
    /// their inverses' lists then (``derivedSideLists(_:asOf:)``, derived once per handle and
    /// point).
    ///
    /// - Throws: as ``plan(asOf:)``.
    public func objects(
        _ ids: some Sequence<StoredObjectID>, asOf sequence: UInt64
    ) throws -> [StoredObjectID: [String: LogValue]] {
        var kept: [UInt64: TransactionEvent] = [:]
        return try objects(ids, asOf: sequence, keeping: &kept)
    }

    /// ``objects(_:asOf:)`` for one of several batches of objects asked for in turn: `kept`
    /// carries the large transactions (those of many changes, up to a bound) read for one
    /// batch to the next, so a bulk transaction that touched the objects of many batches is
    /// decoded once, not once per batch. Start with an empty dictionary and pass the same
    /// one, with the same `sequence`, for every batch.
    ///
    /// - Throws: as ``plan(asOf:)``.
    public func objects(
        _ ids: some Sequence<StoredObjectID>, asOf sequence: UInt64, keeping kept: inout [UInt64: TransactionEvent]
    ) throws -> [StoredObjectID: [String: LogValue]] {
        let head = try head
        guard sequence <= head else { throw LogError.sequenceOutOfRange(requested: sequence, head: head) }
        let purged = try purgedThrough
        guard sequence >= purged else { throw LogError.historyPurged(requested: sequence, purgedThrough: purged) }
        // An object of a paired side filled after `sequence` (spec 0004 §4.1): its list then
        // is derived from the inverse's lists of every object. Before, each call read the
        // whole state for it: once per batch of `strata export --at`, quadratic in the store.
        let unfilled = try sidesUnfilled(asOf: sequence)
        var result = try recordedObjects(ids, asOf: sequence, keeping: &kept)
        if !unfilled.isEmpty { try addDerivedLists(unfilled, asOf: sequence, to: &result) }
        return result
    }

    /// ``objects(_:asOf:keeping:)`` as the records were, walking back through the
    /// transactions that touched the objects.
    func recordedObjects(
        _ ids: some Sequence<StoredObjectID>, asOf sequence: UInt64, keeping kept: inout [UInt64: TransactionEvent]
    ) throws -> [StoredObjectID: [String: LogValue]] {
        var image = StateImage()
        var wanted: Set<StoredObjectID> = []
        var later: Set<UInt64> = []
        for id in ids where wanted.insert(id).inserted {
            if let current = try storedValues(id) { image.objects[id] = current }
            for touching in try history(of: id) where touching > sequence { later.insert(touching) }
        }
        func revert(_ event: TransactionEvent) {
            for change in event.changes.reversed() where wanted.contains(change.objectID) { image.revert(change) }
        }
        // Newest first; the ones not kept are read in runs between kept ones.
        let needed = later.sorted()
        var used: [TransactionEvent] = []
        var end = needed.endIndex
        while end > needed.startIndex {
            if let event = kept[needed[end - 1]] {
                revert(event)
                used.append(event)
                end -= 1
                continue
            }
            var start = end - 1
            while start > needed.startIndex, kept[needed[start - 1]] == nil { start -= 1 }
            try forEachEvent(among: Array(needed[start..<end]), reversed: true) { event in
                revert(event)
                if event.changes.count >= Self.keptEventMinimumChanges { used.append(event) }
                return .next
            }
            end = start
        }
        // Keep the largest of the ones used, within the bound; the others are dropped.
        kept.removeAll(keepingCapacity: true)
        var budget = Self.keptChangesBudget
        for event in used.sorted(by: { $0.changes.count > $1.changes.count }) where event.changes.count <= budget {
            kept[event.sequence] = event
            budget -= event.changes.count
        }
        return image.objects
    }

    /// The fewest changes a transaction must hold to be kept from one batch to the next.
    static let keptEventMinimumChanges = 64
    /// The most changes the kept transactions hold together.
    static let keptChangesBudget = 4 << 20

    /// Calls `body` with `id`'s values just after each transaction that touched it, newest
    /// first (nil just after its delete), for at most the `limit` newest of them still kept
    /// (after a purge), until it answers `.stop`. One walk back: each transaction is read
    /// once, where asking ``object(_:asOf:)`` for each would walk back from the head each
    /// time. Each version is what ``object(_:asOf:)`` gives for its sequence: before a paired
    /// side's fill (spec 0004 §4.1) the side's list derived from its inverse's lists then
    /// (before, the record as stored, without it).
    public func forEachVersion(
        of id: StoredObjectID, limit: Int = .max, _ body: (_ sequence: UInt64, _ values: [String: LogValue]?) throws -> IterationDecision
    ) throws {
        let purged = try purgedThrough
        let touching = try history(of: id).filter { $0 > purged }.suffix(max(limit, 0))
        var image = StateImage()
        if let current = try storedValues(id) { image.objects[id] = current }
        try forEachEvent(among: Array(touching), reversed: true) { event in
            // The events after this one are reverted: the image is the state just after it.
            var version = image.objects[id].map { [id: $0] } ?? [:]
            if !version.isEmpty {
                let unfilled = try sidesUnfilled(asOf: event.sequence)
                if !unfilled.isEmpty { try addDerivedLists(unfilled, asOf: event.sequence, to: &version) }
            }
            if try body(event.sequence, version[id]) == .stop { return .stop }
            for change in event.changes.reversed() where change.objectID == id { image.revert(change) }
            return .next
        }
    }

    /// `values` — `id`'s record just after transaction `sequence`, as a walk that applies the
    /// object's events itself builds it (`strata replay --object`) — with what
    /// ``object(_:asOf:)`` adds to the record: before a paired side's fill (spec 0004 §4.1),
    /// the side's list derived from its inverses' lists then. So such a walk shows each step
    /// as ``forEachVersion(of:limit:_:)`` and the as-of reads give it (before, a step before
    /// the fill showed the side with no list). Two meta reads when no side is unfilled at
    /// `sequence`; otherwise the derivation ``objects(_:asOf:)`` makes for that point.
    ///
    /// - Throws: as ``plan(asOf:)``.
    public func withDerivedLists(_ values: [String: LogValue], of id: StoredObjectID, asOf sequence: UInt64) throws -> [String: LogValue] {
        let unfilled = try sidesUnfilled(asOf: sequence)
        guard !unfilled.isEmpty else { return values }
        var version = [id: values]
        try addDerivedLists(unfilled, asOf: sequence, to: &version)
        return version[id] ?? values
    }

    // MARK: - Checkpoints

    /// The sequences that have a checkpoint, oldest first.
    public func checkpoints() throws -> [UInt64] {
        try checkpointHeaders(txn, tables.checkpoints)
    }

    /// The tally row of the checkpoint at `sequence` (nil: it has none).
    func checkpointTally(_ sequence: UInt64) throws -> [UInt8]? {
        try txn.value(forKey: bigEndianBytes(sequence) + [CheckpointTag.tally], in: tables.checkpoints)
    }

    /// The newest checkpoint at or before `sequence`: found by seeking from checkpoint to
    /// checkpoint, not by walking their rows (before, the walk back passed every row of the
    /// checkpoint it found — the whole state — on every as-of plan).
    func checkpoint(atOrBefore sequence: UInt64) throws -> UInt64? {
        var bound = sequence
        while true {
            // The last key at or before `bound`'s rows: its first 8 bytes name a checkpoint C.
            var prefix: UInt64?
            let upper = bound == .max ? nil : bigEndianBytes(bound + 1)
            try txn.forEach(in: tables.checkpoints, range: KeyRange(lowerBound: nil, upperBound: upper), reverse: true) { key, _ in
                guard key.byteCount >= 8 else { return .next }
                prefix = key.withUnsafeBytes { readBigEndian($0) }
                return .stop
            }
            guard let found = prefix else { return nil }
            // C's header (a damaged checkpoint may have rows without one): else below C.
            if try txn.value(forKey: bigEndianBytes(found), in: tables.checkpoints) != nil { return found }
            guard found > 0 else { return nil }
            bound = found - 1
        }
    }

    /// The state stored in the checkpoint at `sequence`.
    ///
    /// - Throws: ``LogError/malformed(_:)`` naming the checkpoint for a row that doesn't
    ///   decode, or a header whose object count isn't the number of records stored (a row
    ///   lost or added): a state read from it would be wrong without a word.
    func checkpointState(_ sequence: UInt64) throws -> StateImage {
        var image = StateImage()
        var unordered: [(StoredObjectID, String, StoredObjectID)] = []
        var records: UInt64 = 0
        func hex(_ key: RawSpan) -> String { key.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() } }
        try txn.forEach(in: tables.checkpoints, range: .prefix(bigEndianBytes(sequence) + [CheckpointTag.record])) { key, value in
            guard key.byteCount == 9 + ObjectKey.byteCount, let objectKey = key.withUnsafeBytes({ ObjectKey($0, at: 9) }) else {
                throw LogError.malformed("checkpoint \(sequence): a record row's key (\(hex(key))) is \(key.byteCount) bytes, not 19")
            }
            let id = try writer.id(objectKey)
            let record = try value.withUnsafeBytes { raw in
                try writer.decodeRecord(raw, entityName: id.entity, context: "checkpoint \(sequence) record \(id)")
            }
            image.objects[id] = record.values
            records += 1
            return .next
        }
        if let header = try txn.value(forKey: bigEndianBytes(sequence), in: tables.checkpoints) {
            let count = header.count >= 8 ? header.withUnsafeBytes { readBigEndian($0) } : nil
            guard count == records else {
                throw LogError.malformed(
                    "checkpoint \(sequence) holds \(records) records, but its header (\(header.map { String(format: "%02x", $0) }.joined())) says \(count.map { "\($0)" } ?? "nothing readable"): the checkpoint is damaged")
            }
        }
        try txn.forEach(in: tables.checkpoints, range: .prefix(bigEndianBytes(sequence) + [CheckpointTag.member])) { key, _ in
            guard key.byteCount == 9 + 22, let source = key.withUnsafeBytes({ ObjectKey($0, at: 9) }),
                let relationship = key.withUnsafeBytes({ readBigEndian($0, at: 19, count: 2) }),
                let target = key.withUnsafeBytes({ ObjectKey($0, at: 21) })
            else { throw LogError.malformed("checkpoint \(sequence): a membership row's key (\(hex(key))) is \(key.byteCount) bytes, not 31") }
            guard let qualified = log.catalog.relationshipName(UInt16(relationship)) else {
                throw LogError.malformed("checkpoint \(sequence): a membership row names relationship code \(relationship), which the catalog doesn't have")
            }
            let property = String(qualified.split(separator: ".").last ?? "")
            unordered.append((try writer.id(source), property, try writer.id(target)))
            return .next
        }
        // The header counts the records; the tally (checkpoints written since it exists) the
        // membership and counter rows: a lost one would read as a member gone, without a word.
        let header = try txn.value(forKey: bigEndianBytes(sequence), in: tables.checkpoints)
        let tally = try checkpointTally(sequence)
        if tally == nil, let header, header.count >= 9, header[8] & CheckpointTag.hasTally != 0 {
            throw LogError.malformed("checkpoint \(sequence): its tally row is missing, though its header says it has one: the checkpoint is damaged")
        }
        if let tally {
            var counters: UInt64 = 0
            try txn.forEach(in: tables.checkpoints, range: .prefix(bigEndianBytes(sequence) + [CheckpointTag.counter])) { _, _ in
                counters += 1
                return .next
            }
            try CheckpointRows.checkTally(tally, sequence: sequence, members: UInt64(unordered.count), counters: counters)
        }
        for (source, property, target) in unordered {
            var ids: [StoredObjectID] = []
            if case .references(let existing) = image.objects[source]?[property] { ids = existing }
            ids.append(target)
            image.objects[source, default: [:]][property] = .references(ids.sorted())
        }
        return image
    }
}

/// Row kinds inside a checkpoint.
/// The sequences of the checkpoints in `table` (their header rows, keys of 8 bytes), in
/// order: found by seeking from one checkpoint's first key to the next checkpoint's, not by
/// walking every row of each (a checkpoint holds the whole state). Rows without a header
/// (damage) don't count.
func checkpointHeaders(_ txn: borrowing LMDBTransaction, _ table: LMDBDatabase) throws -> [UInt64] {
    var result: [UInt64] = []
    var next: UInt64? = 0
    while let start = next {
        var prefix: UInt64?
        var isHeader = false
        try txn.forEach(in: table, range: KeyRange(lowerBound: bigEndianBytes(start), upperBound: nil)) { key, _ in
            guard key.byteCount >= 8 else { return .next }
            prefix = key.withUnsafeBytes { readBigEndian($0) }
            // A header sorts before the rows it heads (a key sorts before its extensions).
            isHeader = key.byteCount == 8
            return .stop
        }
        guard let found = prefix else { break }
        if isHeader { result.append(found) }
        next = found == .max ? nil : found + 1
    }
    return result
}

enum CheckpointTag {
    static let record: UInt8 = 0x01
    static let member: UInt8 = 0x02
    static let counter: UInt8 = 0x03
    /// The tally row (key: seq · `04`, 9 bytes): the number of membership rows (u64) and of
    /// counter rows (u64) the checkpoint holds, as the header counts its records.
    static let tally: UInt8 = 0x04
    /// Header flag: the checkpoint holds the primary-key counters (`03` rows).
    static let hasCounters: UInt8 = 0x01
    /// Header flag: the checkpoint has a tally row (`04`), so one missing is damage.
    static let hasTally: UInt8 = 0x02
}

/// Every row of one checkpoint: what a base snapshot is made of, and what `restore` loads.
struct CheckpointRows {
    /// Object key → the record, byte for byte as the state table held it.
    var records: [([UInt8], [UInt8])] = []
    /// `members` keys (source · relationship · target).
    var members: [[UInt8]] = []
    /// Entity code → last primary key given (u64).
    var counters: [([UInt8], [UInt8])] = []
    /// Whether the checkpoint recorded the counters (checkpoints written before the counters
    /// were added have none).
    var hasCounters = false
    /// The sequence and the object count its header declares, for a checkpoint read from the
    /// table (nil for rows made from the current state).
    var declared: (sequence: UInt64, count: UInt64?)?
    /// The checkpoint's tally row as stored (nil: none — checkpoints written before it
    /// existed, and rows made from the current state).
    var tally: [UInt8]?
    /// Whether the header says the checkpoint has a tally row.
    var declaresTally = false

    /// Refuses a checkpoint read from the table whose tally row doesn't count its rows, or
    /// is missing though its header says it has one.
    func checkTally() throws {
        guard let (sequence, _) = declared else { return }
        if let tally {
            try Self.checkTally(tally, sequence: sequence, members: UInt64(members.count), counters: UInt64(counters.count))
        } else if declaresTally {
            throw LogError.malformed("checkpoint \(sequence): its tally row is missing, though its header says it has one: the checkpoint is damaged")
        }
    }

    /// The tally row's value for `members` membership rows and `counters` counter rows.
    static func tallyValue(members: Int, counters: Int) -> [UInt8] {
        bigEndianBytes(UInt64(members)) + bigEndianBytes(UInt64(counters))
    }

    /// Refuses a checkpoint whose tally row isn't 16 bytes or doesn't count the membership
    /// and counter rows it holds.
    static func checkTally(_ tally: [UInt8], sequence: UInt64, members: UInt64, counters: UInt64) throws {
        let hex = tally.map { String(format: "%02x", $0) }.joined()
        guard tally.count == 16, let declaredMembers = tally.withUnsafeBytes({ readBigEndian($0) }),
            let declaredCounters = tally.withUnsafeBytes({ readBigEndian($0, at: 8) })
        else {
            throw LogError.malformed("checkpoint \(sequence): its tally row (\(hex)) is \(tally.count) bytes, not 16: the checkpoint is damaged")
        }
        guard declaredMembers == members, declaredCounters == counters else {
            throw LogError.malformed(
                "checkpoint \(sequence) holds \(members) membership rows and \(counters) counter rows, but its tally says \(declaredMembers) and \(declaredCounters): the checkpoint is damaged")
        }
    }
}

extension LogReader {
    /// The rows of the checkpoint at `sequence`, or nil if there is none.
    func checkpointRows(_ sequence: UInt64) throws -> CheckpointRows? {
        let prefix = bigEndianBytes(sequence)
        guard let header = try txn.value(forKey: prefix, in: tables.checkpoints) else { return nil }
        var rows = CheckpointRows()
        rows.hasCounters = header.count >= 9 && header[8] & CheckpointTag.hasCounters != 0
        rows.declaresTally = header.count >= 9 && header[8] & CheckpointTag.hasTally != 0
        rows.declared = (sequence, header.count == 8 || header.count == 9 ? header.withUnsafeBytes { readBigEndian($0) } : nil)
        try txn.forEach(in: tables.checkpoints, range: .prefix(prefix)) { key, value in
            if key.byteCount == 9, key.withUnsafeBytes({ $0[8] }) == CheckpointTag.tally {
                rows.tally = value.withUnsafeBytes { Array($0) }
                return .next
            }
            guard key.byteCount > 9 else { return .next }
            key.withUnsafeBytes { raw in
                let rest = Array(raw[9...])
                switch raw[8] {
                case CheckpointTag.record: rows.records.append((rest, value.withUnsafeBytes { Array($0) }))
                case CheckpointTag.member: rows.members.append(rest)
                case CheckpointTag.counter: rows.counters.append((rest, value.withUnsafeBytes { Array($0) }))
                default: break
                }
            }
            return .next
        }
        return rows
    }
}

extension TableWriter {
    /// Writes `rows` as the checkpoint at `sequence` (replacing one there), header last.
    func writeCheckpoint(_ txn: borrowing LMDBTransaction, at sequence: UInt64, rows: CheckpointRows) throws {
        let prefix = bigEndianBytes(sequence)
        try removeCheckpoint(txn, at: sequence)
        for (key, value) in rows.records { try txn.put(value, forKey: prefix + [CheckpointTag.record] + key, in: tables.checkpoints) }
        for key in rows.members { try txn.put([UInt8](), forKey: prefix + [CheckpointTag.member] + key, in: tables.checkpoints) }
        for (key, value) in rows.counters { try txn.put(value, forKey: prefix + [CheckpointTag.counter] + key, in: tables.checkpoints) }
        try txn.put(
            CheckpointRows.tallyValue(members: rows.members.count, counters: rows.counters.count), forKey: prefix + [CheckpointTag.tally],
            in: tables.checkpoints)
        let flags: UInt8 = (rows.hasCounters ? CheckpointTag.hasCounters : 0) | CheckpointTag.hasTally
        try txn.put(bigEndianBytes(UInt64(rows.records.count)) + [flags], forKey: prefix, in: tables.checkpoints)
    }

    /// Deletes every row of the checkpoint at `sequence`.
    func removeCheckpoint(_ txn: borrowing LMDBTransaction, at sequence: UInt64) throws {
        var keys: [[UInt8]] = []
        try txn.forEach(in: tables.checkpoints, range: .prefix(bigEndianBytes(sequence))) { key, _ in
            keys.append(key.withUnsafeBytes { Array($0) })
            return .next
        }
        for key in keys { try txn.delete(key: key, in: tables.checkpoints) }
    }

    /// The current state's rows, as a checkpoint holds them.
    func currentRows(_ txn: borrowing LMDBTransaction) throws -> CheckpointRows {
        var rows = CheckpointRows()
        rows.hasCounters = true
        try txn.forEach(in: tables.state) { key, value in
            rows.records.append((key.withUnsafeBytes { Array($0) }, value.withUnsafeBytes { Array($0) }))
            return .next
        }
        try txn.forEach(in: tables.members) { key, _ in
            rows.members.append(key.withUnsafeBytes { Array($0) })
            return .next
        }
        try txn.forEach(in: tables.counters) { key, value in
            rows.counters.append((key.withUnsafeBytes { Array($0) }, value.withUnsafeBytes { Array($0) }))
            return .next
        }
        return rows
    }

    /// Loads a checkpoint as the starting state of empty tables: the records byte for byte,
    /// and the references, membership, index entries and counters they imply. No history
    /// rows: the history before a checkpoint is not in it.
    ///
    /// - Throws: ``LogError/malformed(_:)`` for a checkpoint whose header doesn't declare the
    ///   number of records it holds (a row lost or added), or a row that doesn't decode.
    func restore(_ txn: borrowing LMDBTransaction, _ rows: CheckpointRows) throws {
        if let (sequence, count) = rows.declared, count != UInt64(rows.records.count) {
            throw LogError.malformed(
                "checkpoint \(sequence) holds \(rows.records.count) records, but its header says \(count.map { "\($0)" } ?? "nothing readable"): the checkpoint is damaged")
        }
        try rows.checkTally()
        for (keyBytes, value) in rows.records {
            guard let objectKey = keyBytes.withUnsafeBytes({ ObjectKey($0) }), keyBytes.count == ObjectKey.byteCount else {
                throw LogError.malformed("checkpoint record key of \(keyBytes.count) bytes")
            }
            let id = try id(objectKey)
            let record = try value.withUnsafeBytes { raw in
                try decodeRecord(raw, entityName: id.entity, context: "checkpoint record \(id)")
            }
            let entity = try schema.entities[id.entity] ?? (try schema(forModelVersion: record.modelVersion).entity(id.entity))
            try txn.put(value, forKey: keyBytes, in: tables.state)
            for property in entity.properties {
                guard let storage = property.relationship, storage == .toOne || storage == .orderedToMany else { continue }
                let code = try relationshipCode(property.qualifiedName)
                for target in try targets(of: record.values[property.name]) {
                    try link(txn, objectKey, code, target, member: false)
                }
            }
            if !entity.indexes.isEmpty {
                for (_, indexKey, _) in try indexKeys(objectKey, values: record.values, entity: entity) {
                    try txn.put([UInt8](), forKey: indexKey, in: tables.index)
                }
            }
        }
        for key in rows.members {
            guard key.count == 22, let source = key.withUnsafeBytes({ ObjectKey($0) }),
                let target = key.withUnsafeBytes({ ObjectKey($0, at: 12) })
            else { throw LogError.malformed("checkpoint membership key of \(key.count) bytes") }
            try link(txn, source, UInt16(key[10]) << 8 | UInt16(key[11]), target, member: true)
        }
        for (key, value) in rows.counters { try txn.put(value, forKey: key, in: tables.counters) }
    }
}

extension EventLog {
    /// Writes a checkpoint of the state at `sequence` inside the committing transaction:
    /// every record and membership row, so as-of reads near it replay few events.
    func writeCheckpoint(_ txn: borrowing LMDBTransaction, at sequence: UInt64) throws {
        let writer = TableWriter(tables: tables, catalog: catalog, schema: schema, modelVersion: modelVersion)
        try writer.writeCheckpoint(txn, at: sequence, rows: try writer.currentRows(txn))
        try thinCheckpoints(txn)
    }

    /// Writes a checkpoint at `last` when a multiple of ``Configuration/checkpointInterval``
    /// falls among `first…last`, the sequences of the events the transaction appends —
    /// whatever they are: saves, reservations, migrations (a take-out's sequence is due at
    /// the put-back's: the store was never as of a take-out alone), purge markers (before,
    /// only saves wrote one, and an interval's checkpoint that fell on another event was
    /// skipped, doubling the gap).
    func checkpointIfDue(_ txn: borrowing LMDBTransaction, appended first: UInt64, through last: UInt64) throws {
        let interval = configuration.checkpointInterval
        guard interval > 0, first >= 1, last >= first, last / interval > (first - 1) / interval else { return }
        try writeCheckpoint(txn, at: last)
    }

    /// Removes checkpoints beyond ``Configuration/maximumCheckpoints`` (none when it is 0):
    /// each time, the one
    /// (never the newest, never the base snapshot of a purge) whose removal leaves the
    /// smallest gap between its neighbours.
    func thinCheckpoints(_ txn: borrowing LMDBTransaction) throws {
        let purged = try number(MetaKey.purgedThrough, txn)
        var sequences = try checkpointHeaders(txn, tables.checkpoints).filter { $0 > purged || purged == 0 }
        // 0: every checkpoint is kept.
        guard configuration.maximumCheckpoints > 0 else { return }
        let limit = configuration.maximumCheckpoints
        while sequences.count > limit {
            var victim = 0
            var smallest = UInt64.max
            for index in 0..<(sequences.count - 1) {
                let previous = index == 0 ? 0 : sequences[index - 1]
                let gap = sequences[index + 1] - previous
                if gap < smallest {
                    smallest = gap
                    victim = index
                }
            }
            let prefix = bigEndianBytes(sequences[victim])
            var keys: [[UInt8]] = []
            try txn.forEach(in: tables.checkpoints, range: .prefix(prefix)) { key, _ in
                keys.append(key.withUnsafeBytes { Array($0) })
                return .next
            }
            for key in keys { try txn.delete(key: key, in: tables.checkpoints) }
            sequences.remove(at: victim)
        }
    }

    /// Writes a checkpoint of the current state now, in its own transaction.
    public func checkpoint() throws {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only") }
        try environment.write { txn in
            let head = try number(MetaKey.head, txn)
            try writeCheckpoint(txn, at: head)
        }
    }
}
