import Foundation
import StrataModel
import Synchronization

/// One entity's stored shape with the store's codes resolved, one per entity per commit (its
/// ``Shape`` kept across commits) so the insert of each object needs no lookup by name beyond
/// its property names.
final class EntityCoding {
    /// How one stored property is written.
    struct PropertyCoding {
        /// What kind of property it is.
        enum Kind {
            case attribute
            /// The destination's ID in the record.
            case toOne
            /// The ordered destinations in the record.
            case orderedToMany
            /// Rows of the `members` table.
            case unorderedToMany
            /// Derived from the recorded inverse: not stored.
            case derived
        }

        let kind: Kind
        /// The attribute type, for attributes.
        let attributeType: AttributeType?
        /// For recorded relationships: the catalog code (nil: not in the catalog, looked up
        /// again on use so the error is the catalog's).
        let relationshipCode: UInt16?
        /// For relationships: the entities a destination may be (the destination and its
        /// sub-entities); nil when the destination isn't in the schema (not checked).
        let destinations: [String]?
        /// For a recorded to-one: whether its inverse is a to-one too (a one-to-one), so an
        /// object may be the destination of one such reference only.
        var isOneToOne = false
        /// For a recorded ordered to-many whose inverse is a derived to-one (a playlist's
        /// songs, `Song.playlist`): that inverse as "Entity.property", so an object may be in
        /// one such list only (spec 0004 §4.1); nil otherwise.
        var toOneInverse: String?

        var isRelationship: Bool { kind != .attribute }
        var isToMany: Bool { kind == .orderedToMany || kind == .unorderedToMany }
    }

    /// One index the entity's objects are in.
    struct IndexCoding {
        /// The position in the entity's ``ModelSchema/Entity/indexes``.
        let position: Int
        /// The catalog code (nil: not in the catalog, looked up again on use).
        let code: UInt16?
        /// The indexed properties' codes, in the index's order; -1 for a name that isn't a
        /// stored property (its value is always nil).
        let propertyCodes: [Int]
        let isUnique: Bool
    }

    let entity: ModelSchema.Entity
    /// The entity's catalog code (nil: not in the catalog, looked up again on use).
    let code: UInt16?
    /// By property code.
    let properties: [PropertyCoding]
    /// The stored properties' names, sorted: a property's code is its position.
    let names: [String]
    let indexes: [IndexCoding]
    let hasUniqueIndex: Bool
    /// The properties of the entity's uniqueness constraints.
    let uniqueProperties: Set<String>
    /// Whether the entity has an unordered to-many (members kept outside its record).
    let hasUnorderedToMany: Bool
    /// The last primary key this commit gave out for the entity (nil: none yet).
    var lastPrimaryKey: UInt64?

    /// The coding's parts that don't change while the store is open (the schema is the log's,
    /// and catalog codes are only ever added): made once and shared by later commits.
    final class Shape: Sendable {
        let entity: ModelSchema.Entity
        let code: UInt16?
        let properties: [PropertyCoding]
        let names: [String]
        let lookup: NameLookup
        let indexes: [IndexCoding]

        init(_ entity: ModelSchema.Entity, schema: ModelSchema, writer: TableWriter) {
            self.entity = entity
            code = try? writer.entityCode(entity.name)
            properties = entity.properties.map { property in
                var relationshipCode: UInt16?
                if property.relationship != nil && property.isRecorded {
                    relationshipCode = try? writer.relationshipCode(property.qualifiedName)
                }
                let kind: PropertyCoding.Kind =
                    switch property.relationship {
                    case nil: .attribute
                    case .toOne?: .toOne
                    case .orderedToMany?: .orderedToMany
                    case .unorderedToMany?: .unorderedToMany
                    case .derived?: .derived
                    }
                var coding = PropertyCoding(
                    kind: kind, attributeType: property.attributeType, relationshipCode: relationshipCode,
                    destinations: property.destination.flatMap { schema.entities[$0]?.selfAndSubentities })
                if kind == .toOne, let destination = property.destination.flatMap({ schema.entities[$0] }) {
                    coding.isOneToOne = destination.properties.contains { inverse in
                        guard case .derived(let inverseEntity, let name)? = inverse.relationship else { return false }
                        return !inverse.isToMany && name == property.name && inverseEntity == property.declaringEntity
                    }
                }
                if kind == .orderedToMany, let destination = property.destination.flatMap({ schema.entities[$0] }) {
                    coding.toOneInverse = destination.properties.first { inverse in
                        guard case .derived(let inverseEntity, let name)? = inverse.relationship else { return false }
                        return !inverse.isToMany && name == property.name && inverseEntity == property.declaringEntity
                    }?.qualifiedName
                }
                return coding
            }
            names = entity.propertyNames
            lookup = NameLookup(names)
            indexes = entity.indexes.enumerated().map { position, index in
                IndexCoding(
                    position: position, code: try? writer.indexCode(index.name),
                    propertyCodes: index.properties.map { entity.propertiesByName[$0]?.code ?? -1 }, isUnique: index.isUnique)
            }
        }

        /// Whether every code was in the catalog: only then may the shape be kept (a missing
        /// code is looked up again on use, so its error is the catalog's).
        var isComplete: Bool {
            code != nil && indexes.allSatisfy { $0.code != nil }
                && zip(properties, entity.properties).allSatisfy { coding, property in
                    coding.relationshipCode != nil || property.relationship == nil || !property.isRecorded
                }
        }
    }

    init(_ shape: Shape) {
        entity = shape.entity
        code = shape.code
        properties = shape.properties
        names = shape.names
        lookup = shape.lookup
        indexes = shape.indexes
        hasUniqueIndex = shape.entity.hasUniqueIndex
        uniqueProperties = Set(shape.entity.indexes.filter(\.isUnique).flatMap(\.properties))
        hasUnorderedToMany = shape.properties.contains { $0.kind == .unorderedToMany }
    }

    /// The code of the stored property `name` (as ``ModelSchema/Entity/propertiesByName``,
    /// without hashing the name).
    @inline(__always)
    func code(of name: String) -> Int? { lookup.position(of: name) }
    private let lookup: NameLookup

    func entityCode(_ writer: TableWriter) throws(LogError) -> UInt16 {
        if let code { return code }
        return try writer.entityCode(entity.name)
    }

    func relationshipCode(_ property: Int, _ writer: TableWriter) throws(LogError) -> UInt16 {
        if let code = properties[property].relationshipCode { return code }
        return try writer.relationshipCode(entity.properties[property].qualifiedName)
    }

    func indexCode(_ index: IndexCoding, _ writer: TableWriter) throws(LogError) -> UInt16 {
        if let code = index.code { return code }
        return try writer.indexCode(entity.indexes[index.position].name)
    }
}

/// The commit's entity codings and a few recently used entity codes, so the hot path
/// compares short names instead of hashing them.
struct EntityCodings {
    let writer: TableWriter
    private var byName: [String: EntityCoding] = [:]
    private var last: EntityCoding?
    /// Entity codes by name, most recently added last (a handful at most).
    private var recentCodes: [(name: String, code: UInt16)] = []

    init(writer: TableWriter) { self.writer = writer }

    /// The coding of `name`.
    ///
    /// - Throws: ``LogError/unknownEntity(_:)`` when the schema has no such entity.
    mutating func coding(_ name: String) throws(LogError) -> EntityCoding {
        if let last, last.entity.name == name { return last }
        if let known = byName[name] {
            last = known
            return known
        }
        let coding = EntityCoding(try writer.shape(of: name))
        byName[name] = coding
        last = coding
        return coding
    }

    /// The codings made so far.
    var all: Dictionary<String, EntityCoding>.Values { byName.values }

    /// The catalog code of entity `name` (as ``TableWriter/entityCode(_:)``).
    mutating func entityCode(_ name: String) throws(LogError) -> UInt16 {
        if let last, last.entity.name == name, let code = last.code { return code }
        for entry in recentCodes where entry.name == name { return entry.code }
        let code = try writer.entityCode(name)
        if recentCodes.count >= 8 { recentCodes.removeFirst() }
        recentCodes.append((name, code))
        return code
    }

    /// The store key of `id` (as ``TableWriter/key(_:)``).
    mutating func key(_ id: StoredObjectID) throws(LogError) -> ObjectKey {
        ObjectKey(entity: try entityCode(id.entity), primaryKey: id.primaryKey)
    }
}

extension ObjectKey {
    /// Writes the key's 10 bytes at `offset` of `raw`.
    func store(into raw: UnsafeMutableRawBufferPointer, at offset: Int) {
        raw.storeBytes(of: entity.bigEndian, toByteOffset: offset, as: UInt16.self)
        raw.storeBytes(of: primaryKey.bigEndian, toByteOffset: offset + 2, as: UInt64.self)
    }

    /// Appends the key's 10 bytes to `bytes`.
    func append(to bytes: inout [UInt8]) {
        withUnsafeBytes(of: entity.bigEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: primaryKey.bigEndian) { bytes.append(contentsOf: $0) }
    }
}

/// Buffers the commit reuses for every object instead of allocating per row.
struct WriteBuffers {
    var record = ByteWriter(capacity: 256)
    var indexKey: [UInt8] = []

    init() { indexKey.reserveCapacity(64) }
}

/// The unique index keys of the objects a commit touched, checked once the commit has
/// applied every operation (a uniqueness constraint holds for the state it leaves).
struct PendingUniqueness {
    /// One unique index key of an object.
    struct Key {
        /// The index's position in the entity's ``ModelSchema/Entity/indexes``.
        let index: Int
        /// The key's bytes in ``PendingUniqueness/bytes``.
        let bytes: Range<Int>
        /// Whether no value was cut (otherwise clashes are confirmed on the full values).
        let complete: Bool
        /// Whether a constrained value is nil or NaN: then the key constrains nothing (as in SQL).
        let hasNil: Bool
        /// Whether the index may hold another object's key with these values: set unless a
        /// fresh insert's key found none when it was put (``TableWriter/putIndexRows(_:_:uniqueness:)``).
        var needsCheck: Bool
    }

    /// An object with unique index keys, as the commit left it at one point.
    struct Object {
        let key: ObjectKey
        let coding: EntityCoding
        /// The object's values (for the error message and for cut keys).
        let values: [String: LogValue]
        /// Its keys in ``PendingUniqueness/keys``.
        let keys: Range<Int>
        /// Inserted under a primary key this commit gave out: no earlier entry of the object.
        let isFresh: Bool
    }

    private(set) var bytes: [UInt8] = []
    private(set) var keys: [Key] = []
    private(set) var objects: [Object] = []
    /// How many objects the commit may touch: room is made for them at the first one.
    let expectedObjects: Int
    /// The latest entry in `objects` of each object recorded other than by a fresh insert
    /// (-1: deleted since). A fresh insert's entry is the latest unless the object is here.
    private var latest: [ObjectKey: Int] = [:]

    init(expectedObjects: Int) { self.expectedObjects = expectedObjects }

    /// Adds a unique index key of the object being recorded; returns its position in `keys`.
    @discardableResult
    mutating func addKey(index: Int, _ key: [UInt8], complete: Bool, hasNil: Bool, needsCheck: Bool = true) -> Int {
        if keys.capacity == 0 {
            keys.reserveCapacity(expectedObjects)
            objects.reserveCapacity(expectedObjects)
            bytes.reserveCapacity(expectedObjects * (key.count + 8))
        }
        let start = bytes.count
        bytes.append(contentsOf: key)
        keys.append(Key(index: index, bytes: start..<bytes.count, complete: complete, hasNil: hasNil, needsCheck: needsCheck))
        return keys.count - 1
    }

    /// Marks key `position` for the check: the index held a key with the same values.
    mutating func markForCheck(_ position: Int) { keys[position].needsCheck = true }

    /// Records `key`'s object with the keys added since its recording began (`keys`),
    /// superseding an earlier entry of the object.
    mutating func finishObject(_ key: ObjectKey, coding: EntityCoding, values: [String: LogValue], keys: Range<Int>, isFresh: Bool) {
        if !isFresh { latest[key] = objects.count }
        objects.append(Object(key: key, coding: coding, values: values, keys: keys, isFresh: isFresh))
    }

    /// Forgets `key`'s object (deleted).
    mutating func remove(_ key: ObjectKey) {
        // Nothing recorded yet (a run of deletes): no entry of the object to supersede.
        guard !objects.isEmpty else { return }
        latest[key] = -1
    }

    /// Whether entry `position` of `objects` is its object's latest.
    func isLatest(_ position: Int) -> Bool {
        if latest.isEmpty { return true }
        let object = objects[position]
        guard let last = latest[object.key] else { return object.isFresh }
        return last == position
    }
}

/// Rows of one table that the commit's inserts write, put in key order when the inserts are
/// done (or an operation that reads the tables comes): sorted puts through one cursor land
/// on the page the last one touched, where LMDB finds the place without searching the tree
/// (a put through `mdb_put` sets up a cursor and searches from the root each time).
struct DeferredRows {
    /// One row: its key's bytes in `bytes`, then its value's; the key's first 24 bytes as
    /// three integers to sort by.
    struct Row {
        let first: UInt64
        let second: UInt64
        let third: UInt64
        let start: Int32
        let count: Int32
        let valueCount: Int32
        /// For an index row, the key's position in ``PendingUniqueness/keys`` when the index
        /// is unique; -1 otherwise.
        let uniqueKey: Int32
    }

    private(set) var bytes: [UInt8] = []
    private(set) var rows: [Row] = []
    /// How many objects the commit may insert: room is made for their rows at the first one.
    let expectedObjects: Int

    init(expectedObjects: Int) { self.expectedObjects = expectedObjects }

    var isEmpty: Bool { rows.isEmpty }

    /// Makes room for the commit's objects once the first has added its rows (`rows` rows of
    /// `bytes` bytes in all), so the buffers needn't grow (each growth copies them).
    mutating func reserve(rowsPerObject rows: Int, bytesPerObject bytes: Int) {
        guard !isReserved else { return }
        isReserved = true
        // No more rows than the bytes reserved below hold at this object's bytes per row:
        // the first object may have a row per member of a large to-many (a new team saved
        // with its 16k new players reserved 32k objects × 32k rows × 40 bytes, 41 GB, and
        // the allocation trapped).
        let bytesPerRow = max(bytes / max(rows, 1), 1)
        self.rows.reserveCapacity(min(expectedObjects * rows, (DeferredWrites.flushThreshold + bytes) / bytesPerRow + rows))
        // No more than the commit buffers before it puts the rows (large values would
        // otherwise reserve their size times the objects).
        self.bytes.reserveCapacity(min(expectedObjects * (bytes + bytes / 4 + 8), DeferredWrites.flushThreshold + bytes))
    }

    private(set) var isReserved = false

    mutating func add(_ key: [UInt8], uniqueKey: Int) {
        key.withUnsafeBytes { add($0, value: UnsafeRawBufferPointer(start: nil, count: 0), uniqueKey: uniqueKey) }
    }

    mutating func add(_ key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, uniqueKey: Int = -1) {
        var prefix: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &prefix) { raw in
            raw.copyMemory(from: UnsafeRawBufferPointer(rebasing: key.prefix(raw.count)))
        }
        rows.append(
            Row(first: UInt64(bigEndian: prefix.0), second: UInt64(bigEndian: prefix.1), third: UInt64(bigEndian: prefix.2),
                start: Int32(truncatingIfNeeded: bytes.count), count: Int32(truncatingIfNeeded: key.count),
                valueCount: Int32(truncatingIfNeeded: value.count), uniqueKey: Int32(truncatingIfNeeded: uniqueKey)))
        bytes.append(contentsOf: key)
        bytes.append(contentsOf: value)
    }

    /// Lends each row's key and value to `body`, in the rows' order.
    func forEach(_ body: (Row, UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) rethrows {
        try bytes.withUnsafeBytes { all in
            for row in rows {
                let keyEnd = Int(row.start + row.count)
                try body(
                    row, UnsafeRawBufferPointer(rebasing: all[Int(row.start)..<keyEnd]),
                    UnsafeRawBufferPointer(rebasing: all[keyEnd..<(keyEnd + Int(row.valueCount))]))
            }
        }
    }

    /// Whether row `a`'s key sorts before row `b`'s in LMDB's order (bytewise, a prefix first);
    /// `base` is the address of ``bytes``.
    @inline(__always)
    static func precedes(_ a: Row, _ b: Row, _ base: UnsafeRawPointer) -> Bool {
        if a.first != b.first { return a.first < b.first }
        if a.second != b.second { return a.second < b.second }
        if a.third != b.third { return a.third < b.third }
        let order = memcmp(base + Int(a.start), base + Int(b.start), Int(min(a.count, b.count)))
        return order != 0 ? order < 0 : a.count < b.count
    }

    /// Puts the rows in key order (LMDB's: bytewise, a prefix first).
    ///
    /// Rows already in order (a run of new objects' state and history rows) are left as they
    /// are, and fewer than ``fewRows`` are compared. Otherwise a radix sort orders them by
    /// their first 16 bytes, a byte at a time (skipping the bytes every row shares), and only
    /// rows that tie on those are compared: a comparison sort of many index rows spent more
    /// than the puts themselves.
    mutating func sort() {
        bytes.withUnsafeBytes { all in
            guard let base = all.baseAddress, rows.count > 1 else { return }
            rows.withUnsafeMutableBufferPointer { rows in
                if zip(rows, rows.dropFirst()).allSatisfy({ !Self.precedes($1, $0, base) }) { return }
                // A few rows (a small commit's) are compared: the radix sort's fixed cost, its
                // 16 × 256 counts cleared and summed, is many times theirs.
                if rows.count < Self.fewRows {
                    rows.sort { Self.precedes($0, $1, base) }
                    return
                }
                Self.radixSort(rows)
                var start = 0
                while start < rows.count {
                    var end = start + 1
                    while end < rows.count && rows[end].first == rows[start].first && rows[end].second == rows[start].second {
                        end += 1
                    }
                    if end - start > 1 {
                        var run = UnsafeMutableBufferPointer(rebasing: rows[start..<end])
                        run.sort { Self.precedes($0, $1, base) }
                    }
                    start = end
                }
            }
        }
    }

    /// Below this many rows, ``sort()`` compares them instead of a radix sort.
    static let fewRows = 64

    /// A stable least-significant-byte-first radix sort of `rows` by ``Row/first`` and then
    /// ``Row/second`` (the key's first 16 bytes, big-endian).
    private static func radixSort(_ rows: UnsafeMutableBufferPointer<Row>) {
        let count = rows.count
        /// Byte `digit` of the 16-byte key: 0 is the last (least significant).
        @inline(__always) func byte(_ row: Row, _ digit: Int) -> Int {
            Int(truncatingIfNeeded: (digit < 8 ? row.second >> UInt64(digit * 8) : row.first >> UInt64((digit - 8) * 8)) & 0xFF)
        }
        var counts = [Int](repeating: 0, count: 16 * 256)
        for row in rows {
            var value = row.second
            for digit in 0..<8 {
                counts[digit &* 256 &+ Int(value & 0xFF)] &+= 1
                value >>= 8
            }
            value = row.first
            for digit in 8..<16 {
                counts[digit &* 256 &+ Int(value & 0xFF)] &+= 1
                value >>= 8
            }
        }
        let scratch = UnsafeMutableBufferPointer<Row>.allocate(capacity: count)
        defer { scratch.deallocate() }
        var source = rows
        var target = scratch
        var offsets = [Int](repeating: 0, count: 256)
        for digit in 0..<16 {
            // Every row has the same byte here: the pass would change nothing.
            if counts[digit * 256 + byte(source[0], digit)] == count { continue }
            var total = 0
            for bucket in 0..<256 {
                offsets[bucket] = total
                total += counts[digit * 256 + bucket]
            }
            for row in source {
                let bucket = byte(row, digit)
                target.initializeElement(at: offsets[bucket], to: row)
                offsets[bucket] += 1
            }
            swap(&source, &target)
        }
        if source.baseAddress != rows.baseAddress {
            _ = rows.update(fromContentsOf: source)
        }
    }

    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        rows.removeAll(keepingCapacity: true)
    }
}

/// What the commit's inserts write to the state, history, link and index tables, put by
/// ``TableWriter/putDeferred(_:_:uniqueness:)``.
struct DeferredWrites {
    var state: DeferredRows
    var history: DeferredRows
    var referrers: DeferredRows
    var members: DeferredRows
    var index: DeferredRows

    init(expectedObjects: Int) {
        state = DeferredRows(expectedObjects: expectedObjects)
        history = DeferredRows(expectedObjects: expectedObjects)
        referrers = DeferredRows(expectedObjects: expectedObjects)
        members = DeferredRows(expectedObjects: expectedObjects)
        index = DeferredRows(expectedObjects: expectedObjects)
    }

    var isEmpty: Bool { state.isEmpty && history.isEmpty && referrers.isEmpty && members.isEmpty && index.isEmpty }

    /// Bytes of keys and values waiting.
    var bufferedBytes: Int { state.bytes.count + history.bytes.count + referrers.bytes.count + members.bytes.count + index.bytes.count }

    /// How many bytes a commit buffers before it puts them (then it buffers again): a commit
    /// of many large values holds them twice only up to this much.
    static let flushThreshold = 64 << 20

    /// Rows and bytes in each buffer, to measure what one object adds.
    struct Sizes {
        let state, history, referrers, members, index: (rows: Int, bytes: Int)
    }
    var sizes: Sizes {
        Sizes(
            state: (state.rows.count, state.bytes.count), history: (history.rows.count, history.bytes.count),
            referrers: (referrers.rows.count, referrers.bytes.count), members: (members.rows.count, members.bytes.count),
            index: (index.rows.count, index.bytes.count))
    }

    /// Makes room in each buffer for the commit's objects, at the first object that added
    /// rows to it (measured from `before`, the ``sizes`` before the object).
    mutating func reserve(after before: Sizes) {
        func reserve(_ rows: inout DeferredRows, _ before: (rows: Int, bytes: Int)) {
            guard !rows.isReserved, rows.rows.count > before.rows else { return }
            rows.reserve(rowsPerObject: rows.rows.count - before.rows, bytesPerObject: rows.bytes.count - before.bytes)
        }
        reserve(&state, before.state)
        reserve(&history, before.history)
        reserve(&referrers, before.referrers)
        reserve(&members, before.members)
        reserve(&index, before.index)
    }
}

/// What a run of a commit's deletes removes from the state, index, referrer and member
/// tables (keys; the values are empty) and the history rows it puts, applied by
/// ``TableWriter/applyDeferredDeletes(_:_:)``.
struct DeferredDeletes {
    var state = DeferredRows(expectedObjects: 0)
    var index = DeferredRows(expectedObjects: 0)
    var referrers = DeferredRows(expectedObjects: 0)
    var members = DeferredRows(expectedObjects: 0)
    var history = DeferredRows(expectedObjects: 0)

    var isEmpty: Bool { state.isEmpty && index.isEmpty && referrers.isEmpty && members.isEmpty && history.isEmpty }

    /// Bytes of keys waiting.
    var bufferedBytes: Int { state.bytes.count + index.bytes.count + referrers.bytes.count + members.bytes.count + history.bytes.count }
}

/// The entity shapes of one log's schema, made at the first commit that needs each and kept
/// while the log is open.
final class EntityShapes: Sendable {
    private let shapes = Mutex<[String: EntityCoding.Shape]>([:])

    init() {}

    /// The shape of `entity`, made by `make` if not kept yet; kept only if complete.
    func shape(of entity: String, make: () throws(LogError) -> EntityCoding.Shape) throws(LogError) -> EntityCoding.Shape {
        if let kept = shapes.withLock({ $0[entity] }) { return kept }
        let shape = try make()
        if shape.isComplete { shapes.withLock { $0[entity] = shape } }
        return shape
    }
}
