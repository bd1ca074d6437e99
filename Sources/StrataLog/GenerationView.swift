import Foundation
import StrataStorage

/// What a reader pinned to an earlier generation (sequence) of the store sees in place of
/// the current records: the objects transactions after that sequence touched, with their
/// values as of it — Core Data's query generations, from the log's before-images instead of
/// a long-lived read transaction (which would keep LMDB from reusing pages and the map from
/// growing).
///
/// Give one to ``EventLog/read(pinnedTo:_:)`` for each read; the view catches up with the
/// log's head at the start of each (only the transactions since its last read are decoded),
/// and the reader answers every object, entity, count, relationship and index read as of
/// ``sequence``. An object no later transaction touched reads as it is now: the state as of
/// the generation is the current state with the touched objects put back. The cost is
/// memory for the touched objects' old values, and decoding each later transaction once.
///
/// Not thread-safe: one context's reads use it, on that context's executor.
public final class GenerationView {
    /// One object a later transaction touched: its values and version as of ``sequence``
    /// (nil values: it didn't exist then), and whether it exists now.
    struct Entry {
        var values: [String: LogValue]?
        var version: UInt64
        var existsNow: Bool
    }

    /// The generation: reads see the store as it was just after this transaction (0: empty).
    /// Nil until the first read pins it to the head then.
    public private(set) var sequence: UInt64?
    /// The head the entries are complete through.
    public private(set) var caughtUpThrough: UInt64 = 0
    /// The objects touched in `sequence + 1 ... caughtUpThrough`.
    var entries: [StoredObjectID: Entry] = [:]
    /// The entries of each entity that existed at the generation, by primary key (built on demand).
    private var byEntity: [String: [(primaryKey: UInt64, values: [String: LogValue], version: UInt64)]]?
    /// For each object, the entries that referred to it at the generation, by relationship
    /// (built on demand).
    private var referrers: [StoredObjectID: [(property: String, source: StoredObjectID)]]?
    /// Whether the lists of paired sides filled after the generation were derived (the first
    /// catching up that read events does it).
    private var derivedUnfilledSides = false
    /// The entries' keys, to tell a record of a changed object without hashing its entity's name.
    private var keys: Set<ObjectKey>?
    /// Each index's keys of the entries that existed at the generation, ascending (built on demand).
    private var indexKeys: [String: [(key: [UInt8], id: StoredObjectID)]] = [:]

    /// A view pinned to `sequence`, or to the head at its first read when nil.
    public init(sequence: UInt64?) {
        self.sequence = sequence
        if let sequence { caughtUpThrough = sequence }
    }

    /// The number of objects changed since the generation (what the view holds in memory).
    public var changedObjectCount: Int { entries.count }

    /// Whether reads through the view are the current ones: nothing changed since.
    var isCurrent: Bool { entries.isEmpty }

    /// Brings the view up to `reader`'s head: decodes the transactions since the last read
    /// and puts back the values, as of the generation, of the objects they touched first.
    ///
    /// - Throws: ``LogError/sequenceOutOfRange(requested:head:)`` when the generation is past
    ///   the head (the token names a later state than this store has);
    ///   ``LogError/historyPurged(requested:purgedThrough:)`` when a purge removed the
    ///   transactions needed to go back to it; ``LogError/invalidOperation(_:)`` when the
    ///   head went backwards (the store was replaced).
    func catchUp(_ reader: borrowing LogReader) throws {
        let head = try reader.head
        guard let sequence else {
            sequence = head
            caughtUpThrough = head
            return
        }
        guard sequence <= head else { throw LogError.sequenceOutOfRange(requested: sequence, head: head) }
        guard head != caughtUpThrough else { return }
        guard head > caughtUpThrough else {
            throw LogError.invalidOperation(
                "the store's head went back from \(caughtUpThrough) to \(head) while a context was pinned to generation \(sequence): the store was replaced")
        }
        let purged = try reader.purgedThrough
        guard sequence >= purged else { throw LogError.historyPurged(requested: sequence, purgedThrough: purged) }
        // One pass, event by event (none kept): for each object touched for the first time
        // since the generation, what its changes say about its values before them — it
        // didn't exist (its first change is its insert), or each property's before-value in
        // its first change of it, its delete's before-image, and its to-many memberships
        // undone; the rest are its values now.
        var starts: [StoredObjectID: Start] = [:]
        var touched: Set<StoredObjectID> = []
        // The model version of each first delete an earlier version wrote.
        var deletedIn: [StoredObjectID: Int] = [:]
        let log = reader.log
        try reader.forEachEvent(from: caughtUpThrough + 1, through: head) { event in
            // The view reads the generation in the opening model version's terms. A
            // migration's changes move the same data between versions (spec 0004 §4.4): they
            // are not undone, and an earlier version's changes are undone under today's names,
            // their values converted as the migration converted them (before, a point before
            // a migration read a renamed property as nil: its values were put back under the
            // old name).
            if event.kind == .migration { return .next }
            let changes =
                event.modelVersion < log.modelVersion
                ? log.onRecordedSides(event.groups.flatMap { log.translating($0, fromModelVersion: event.modelVersion).changes })
                : event.changes
            for change in changes {
                let id = change.objectID
                if case .delete = change, event.modelVersion < log.modelVersion, entries[id] == nil, starts[id]?.deleteImage == nil {
                    deletedIn[id] = event.modelVersion
                }
                touched.insert(id)
                guard entries[id] == nil else { continue }
                if starts[id] == nil {
                    if case .insert = change { starts[id] = Start(absent: true) } else { starts[id] = Start(absent: false) }
                }
                starts[id]?.note(change)
            }
            return .next
        }
        for (id, start) in starts {
            let now = try reader.object(id)
            var values: [String: LogValue]?
            if !start.absent { values = start.values(now: now?.values) }
            // Deleted before a migration, read back from its delete: what the migration
            // would have filled in (an attribute the version adds, with its default).
            if now == nil, let version = deletedIn[id], let found = values {
                values = log.filledAsMigrated(found, entity: id.entity, fromModelVersion: version)
            }
            var version: UInt64 = 0
            if values != nil { version = try reader.history(of: id).last { $0 <= sequence } ?? 0 }
            entries[id] = Entry(values: values, version: version, existsNow: now != nil)
        }
        for id in touched where starts[id] == nil { entries[id]?.existsNow = try reader.contains(id) }
        // Paired sides filled after the generation had no lists then (spec 0004 §4.1): once,
        // their objects get the lists derived from the inverse's as of the generation (the
        // migrations skipped above include the fill, which set them).
        if !derivedUnfilledSides {
            derivedUnfilledSides = true
            let unfilled = try reader.sidesUnfilled(asOf: sequence)
            if !unfilled.isEmpty { try deriveUnfilledSides(unfilled, at: sequence, reader) }
        }
        caughtUpThrough = head
        byEntity = nil
        referrers = nil
        keys = nil
        indexKeys = [:]
    }

    /// Gives each object of `sides` (paired sides filled after `sequence`) the list
    /// ``LogReader/deriveUnfilledSides(_:in:)`` derives: the objects whose inverse list held it
    /// at the generation, in key order — from the entries' values and, for objects unchanged
    /// since, their records. An unchanged object whose record's list differs becomes an entry.
    private func deriveUnfilledSides(_ sides: [ModelSchema.Property], at sequence: UInt64, _ reader: borrowing LogReader) throws {
        let schema = reader.log.schema
        for side in sides {
            guard let paired = schema.pairedSide(side) else { continue }
            let (sourceEntity, targetEntity, inverseName) = (paired.source, paired.target, paired.inverseName)
            let (sourceKinds, targetKinds) = (paired.sourceKinds, paired.targetKinds)
            var derived: [StoredObjectID: [StoredObjectID]] = [:]
            func note(_ id: StoredObjectID, _ values: [String: LogValue]?) {
                guard case .references(let list)? = values?[inverseName] else { return }
                for target in list where targetKinds.contains(target.entity) { derived[target, default: []].append(id) }
            }
            for (id, entry) in entries where sourceKinds.contains(id.entity) { note(id, entry.values) }
            try reader.forEachObject(of: sourceEntity.name) { object in
                if entries[object.id] == nil { note(object.id, object.values) }
                return .next
            }
            func list(_ id: StoredObjectID) -> LogValue? {
                guard let sources = derived[id] else { return nil }
                let keyed = sources.map { (id: $0, key: try? reader.writer.key($0)) }
                return .references(keyed.sorted { a, b in
                    switch (a.key, b.key) {
                    case (let x?, let y?): x < y
                    default: a.id < b.id
                    }
                }.map(\.id))
            }
            for (id, entry) in entries where targetKinds.contains(id.entity) && entry.values != nil {
                entries[id]?.values?[side.name] = list(id)
            }
            var unchanged: [(id: StoredObjectID, values: [String: LogValue])] = []
            try reader.forEachObject(of: targetEntity.name) { object in
                guard entries[object.id] == nil else { return .next }
                var values = object.values
                values[side.name] = list(object.id)
                if values != object.values { unchanged.append((object.id, values)) }
                return .next
            }
            for (id, values) in unchanged {
                let version = try reader.history(of: id).last { $0 <= sequence } ?? 0
                entries[id] = Entry(values: values, version: version, existsNow: true)
            }
        }
    }

    /// The keys of the objects changed since the generation; `code` gives an entity's code.
    func changedKeys(_ code: (String) throws -> UInt16) rethrows -> Set<ObjectKey> {
        if let keys { return keys }
        var built = Set<ObjectKey>(minimumCapacity: entries.count)
        for id in entries.keys { built.insert(ObjectKey(entity: try code(id.entity), primaryKey: id.primaryKey)) }
        keys = built
        return built
    }

    /// The keys in index `name` of the objects changed since the generation that existed
    /// then, ascending: made by `make` once per catching up.
    func indexKeys(_ name: String, make: () throws -> [(key: [UInt8], id: StoredObjectID)]) rethrows -> [(key: [UInt8], id: StoredObjectID)] {
        if let known = indexKeys[name] { return known }
        let made = try make().sorted { $0.key.lexicographicallyPrecedes($1.key) }
        indexKeys[name] = made
        return made
    }

    /// The entries of `entity` (exactly) that existed at the generation, by primary key.
    func existing(of entity: String) -> [(primaryKey: UInt64, values: [String: LogValue], version: UInt64)] {
        if byEntity == nil {
            var built: [String: [(primaryKey: UInt64, values: [String: LogValue], version: UInt64)]] = [:]
            for (id, entry) in entries {
                guard let values = entry.values else { continue }
                built[id.entity, default: []].append((id.primaryKey, values, entry.version))
            }
            for key in built.keys { built[key]?.sort { $0.primaryKey < $1.primaryKey } }
            byEntity = built
        }
        return byEntity?[entity] ?? []
    }

    /// The entries whose relationship `property` (of `entities`) referred to `target` at the
    /// generation.
    func referrers(to target: StoredObjectID, through property: String, among entities: Set<String>) -> [StoredObjectID] {
        if referrers == nil {
            var built: [StoredObjectID: [(property: String, source: StoredObjectID)]] = [:]
            for (id, entry) in entries {
                for (name, value) in entry.values ?? [:] {
                    switch value {
                    case .reference(let destination): built[destination, default: []].append((name, id))
                    case .references(let destinations): for destination in destinations { built[destination, default: []].append((name, id)) }
                    default: break
                    }
                }
            }
            referrers = built
        }
        return (referrers?[target] ?? []).filter { $0.property == property && entities.contains($0.source.entity) }.map(\.source)
    }

    /// How many of `entities`' objects the entries add to the current count (negative:
    /// remove): those that existed at the generation, less those that exist now.
    func countAdjustment(for entities: some Sequence<String>) -> Int {
        let wanted = Set(entities)
        var adjustment = 0
        for (id, entry) in entries where wanted.contains(id.entity) {
            if entry.values != nil { adjustment += 1 }
            if entry.existsNow { adjustment -= 1 }
        }
        return adjustment
    }
}

/// One object's values before a run of changes, from the changes alone and its values
/// after them (what ``StateImage/revert(_:)`` of each change, newest first, gives).
struct Start {
    /// Its first change is its insert: it didn't exist before.
    var absent: Bool
    /// Each property's value before its first value change.
    var firstBefore: [String: LogValue] = [:]
    /// The before-image of its delete, if it was deleted.
    var deleteImage: [String: LogValue]?
    /// For each unordered to-many property, the members to take out of the later set and
    /// those to put back: the set before is (after − added) ∪ removed.
    var memberships: [String: (added: Set<StoredObjectID>, removed: Set<StoredObjectID>)] = [:]

    init(absent: Bool) { self.absent = absent }

    /// Takes in the object's next change, in log order.
    mutating func note(_ change: Change) {
        switch change {
        case .insert:
            break
        case .update(_, let changes):
            for propertyChange in changes {
                switch propertyChange {
                case .value(let name, let before, _):
                    if firstBefore[name] == nil { firstBefore[name] = before }
                case .membership(let name, let added, let removed):
                    // Undoing this change after the earlier ones' undo: (M − a) ∪ r first, so
                    // the composition takes a into `added` and r, less what `added` held, into `removed`.
                    var net = memberships[name] ?? ([], [])
                    let previouslyAdded = net.added
                    net.added.formUnion(added)
                    net.removed.formUnion(Set(removed).subtracting(previouslyAdded))
                    memberships[name] = net
                }
            }
        case .delete(_, let before):
            if deleteImage == nil { deleteImage = before }
        }
    }

    /// The value of `name` before the changes (nil: none, or it didn't exist), given its
    /// values after them: the before-value of its first change of it, or its delete's
    /// before-image, or — unchanged — its value now. (Unordered memberships aside.)
    func value(_ name: String, now: [String: LogValue]?) -> LogValue? {
        if absent { return nil }
        return firstBefore[name] ?? deleteImage?[name] ?? now?[name]
    }

    /// Its values before the changes, given its values after them (nil: it doesn't exist
    /// now); nil when it didn't exist before.
    func values(now: [String: LogValue]?) -> [String: LogValue]? {
        if absent { return nil }
        var values = (deleteImage ?? now ?? [:]).filter { $0.value != .null }
        for (name, before) in firstBefore { values[name] = before == .null ? nil : before }
        for (name, net) in memberships {
            var members: Set<StoredObjectID> = []
            if case .references(let ids)? = values[name] { members = Set(ids) }
            members.subtract(net.added)
            members.formUnion(net.removed)
            values[name] = members.isEmpty ? nil : .references(members.sorted())
        }
        return values
    }
}

extension KeyRange {
    /// Whether `key` is in the range, by byte order.
    func contains(_ key: [UInt8]) -> Bool {
        if let lower = lowerBound {
            if key.lexicographicallyPrecedes(lower) { return false }
            if !includesLowerBound && key == lower { return false }
        }
        if let upper = upperBound {
            if upper.lexicographicallyPrecedes(key) { return false }
            if !includesUpperBound && key == upper { return false }
        }
        return true
    }
}
