import Foundation
public import StrataModel
public import StrataStorage

/// An object as the store holds it.
public struct StoredObject: Sendable, Hashable {
    /// Its identity.
    public let id: StoredObjectID
    /// The sequence of its last change: its version for optimistic locking.
    public let version: UInt64
    /// Its stored values: attributes, to-one references, and recorded to-many relationships
    /// (`.references`). Derived relationship sides are read with ``LogReader/related(_:_:)``.
    public let values: [String: LogValue]

    /// The value of `property`, or ``LogValue/null``.
    public subscript(property: String) -> LogValue { values[property] ?? .null }
}

/// A stored object's values by property code (``LogReader/fields(_:)``): the values of
/// ``StoredObject`` for the current model's properties, in an array parallel to ``names``
/// instead of a dictionary.
public struct StoredFields: Sendable {
    /// Its identity.
    public let id: StoredObjectID
    /// The sequence of its last change: its version for optimistic locking.
    public let version: UInt64
    /// The entity's stored property names in code order; the same array for every object
    /// of the entity read through one log, so callers can recognise it (see ``layout``).
    public let names: [String]
    /// The value of each property in ``names``; nil where the store holds none.
    public let values: [LogValue?]

    /// An identity of ``names``' storage: equal for objects whose values are laid out alike.
    public var layout: UnsafeRawPointer? { names.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) } }

    /// The values by name, as ``StoredObject`` holds them — for a record written with an
    /// older model version, only the properties the current model still has.
    public var object: StoredObject {
        var values: [String: LogValue] = [:]
        for (name, value) in zip(names, self.values) { if let value { values[name] = value } }
        return StoredObject(id: id, version: version, values: values)
    }
}

/// A range of attribute values for an index scan; nil bounds are open.
///
/// ```swift
/// IndexRange.equal(.string("ada@example.com"))
/// IndexRange(lower: .int16(30), upper: .int16(40), includesUpper: true)   // BETWEEN 30 AND 40
/// ```
public struct IndexRange: Sendable, Hashable {
    /// The lowest value, or nil for no lower bound (nil values are never in an open range).
    public var lower: AttributeValue?
    /// Whether `lower` itself is in the range.
    public var includesLower: Bool
    /// The highest value, or nil for no upper bound.
    public var upper: AttributeValue?
    /// Whether `upper` itself is in the range.
    public var includesUpper: Bool
    /// Only objects whose value is nil.
    public var matchesNil: Bool = false

    /// A range between two bounds.
    public init(lower: AttributeValue? = nil, includesLower: Bool = true, upper: AttributeValue? = nil, includesUpper: Bool = false) {
        self.lower = lower
        self.includesLower = includesLower
        self.upper = upper
        self.includesUpper = includesUpper
    }

    /// Exactly `value`.
    public static func equal(_ value: AttributeValue) -> IndexRange {
        IndexRange(lower: value, includesLower: true, upper: value, includesUpper: true)
    }

    /// Objects with no value.
    public static var isNil: IndexRange {
        var range = IndexRange()
        range.matchesNil = true
        return range
    }

    /// Every non-nil value.
    public static let all = IndexRange()
}

/// Reads one consistent snapshot of a store; lent to the closure of ``EventLog/read(_:)``.
///
/// Non-copyable and lent `borrowing`, like the LMDB transaction under it, so it can't
/// outlive the closure.
public struct LogReader: ~Copyable {
    let txn: LMDBTransaction
    let log: EventLog
    let writer: TableWriter
    /// The objects changed since the generation this reader is pinned to, with their values
    /// as of it (``EventLog/read(pinnedTo:_:)``); nil for a reader of the current state, and
    /// when nothing changed since (the current reads are the generation's then).
    let view: GenerationView?
    /// The generation this reader is pinned to (nil: it reads the current state).
    public let generation: UInt64?

    init(transaction: consuming LMDBTransaction, log: EventLog, view: GenerationView? = nil, generation: UInt64? = nil) {
        txn = transaction
        self.log = log
        writer = TableWriter(tables: log.tables, catalog: log.catalog, schema: log.schema, modelVersion: log.modelVersion)
        self.view = view
        self.generation = generation
    }

    var tables: StoreTables { log.tables }

    // MARK: - Metadata

    /// The newest sequence number in this snapshot (0 when empty).
    ///
    /// - Throws: ``LogError/malformed(_:)`` if the stored number is UInt64's largest, which
    ///   no log reaches (damaged bookkeeping); likewise below for a point past the head.
    public var head: UInt64 {
        get throws {
            let head = try metaNumber(MetaKey.head)
            guard head < .max else { throw LogError.malformed("the store's head is \(head): its bookkeeping is damaged") }
            return head
        }
    }

    /// The highest sequence moved into segments (0: none).
    public var compactedThrough: UInt64 {
        get throws { try point(MetaKey.compactedThrough, "compaction point") }
    }

    /// The last sequence removed by a purge (0: nothing purged). Events after it are kept;
    /// the state as of it is the store's base snapshot.
    public var purgedThrough: UInt64 {
        get throws { try point(MetaKey.purgedThrough, "purge point") }
    }

    /// The sequence of the newest purge marker event (0: the store was never purged).
    public var purgeMarker: UInt64 {
        get throws { try point(MetaKey.purgeMarker, "purge marker") }
    }

    /// A sequence the store keeps under `key`, checked to be at most the head.
    private func point(_ key: [UInt8], _ name: String) throws -> UInt64 {
        let value = try metaNumber(key)
        guard value > 0 else { return 0 }
        let head = try head
        guard value <= head else {
            throw LogError.malformed("the store's \(name) is \(value), past its head \(head): its bookkeeping is damaged")
        }
        return value
    }

    func metaNumber(_ key: [UInt8]) throws -> UInt64 {
        try number(forKey: key, in: tables.meta)
    }

    /// A big-endian number stored under `key` (0 when absent).
    ///
    /// - Throws: ``LogError/malformed(_:)`` for a row that isn't `byteCount` bytes.
    func number(forKey key: [UInt8], in database: LMDBDatabase, byteCount: Int = 8) throws -> UInt64 {
        if let found = try txn.withValue(forKey: key, in: database, { span in
            span.withUnsafeBytes { $0.count == byteCount ? readBigEndian($0, count: byteCount) : nil }
        }), let found {
            return found
        }
        return try MetaKey.number(try txn.value(forKey: key, in: database), key: key, byteCount: byteCount)
    }

    /// The store's metadata as of this snapshot.
    public func metadata() throws -> StoreMetadata {
        func date(_ key: [UInt8]) throws -> Date {
            EventCodec.date(microseconds: Int64(bitPattern: try metaNumber(key)))
        }
        let format = try number(forKey: MetaKey.formatVersion, in: tables.meta, byteCount: 4)
        return StoreMetadata(
            storeUUID: log.storeUUID, formatVersion: Int(format), createdAt: try date(MetaKey.createdAt),
            openedAt: try date(MetaKey.openedAt), head: try head, compactedThrough: try compactedThrough,
            purgedThrough: try purgedThrough, modelVersions: log.catalog.modelVersions,
            refusedModelVersions: try log.catalog.modelVersions.filter { try txn.value(forKey: MetaKey.refusedModel($0), in: tables.meta) != nil })
    }

    /// The last primary key given to an object of `entity` (0 if none).
    public func lastPrimaryKey(of entity: String) throws -> UInt64 {
        try writer.lastPrimaryKey(txn, entity: try log.catalog.entityCode(entity))
    }

    // MARK: - Objects

    /// The object with `id`, or nil if it doesn't exist (now, in this snapshot).
    public func object(_ id: StoredObjectID) throws -> StoredObject? {
        if let entry = view?.entries[id] {
            return entry.values.map { StoredObject(id: id, version: entry.version, values: $0) }
        }
        let key = try writer.key(id)
        guard let record = try writer.readRecord(txn, key, entityName: id.entity) else { return nil }
        return try storedObject(id, key: key, record: record)
    }

    /// The version of the object with `id` (the sequence of its last change), or nil if it
    /// doesn't exist: ``object(_:)``'s `version` without decoding the values.
    public func version(of id: StoredObjectID) throws -> UInt64? {
        if let entry = view?.entries[id] { return entry.values == nil ? nil : entry.version }
        return try writer.readVersion(txn, try writer.key(id), entityName: id.entity)
    }

    /// The object with `id` as values by property code, or nil if it doesn't exist: what
    /// ``object(_:)`` reads, without building a dictionary (for readers of many objects).
    public func fields(_ id: StoredObjectID) throws -> StoredFields? {
        var found: StoredFields?
        try forEachFields([id]) { found = $0 }
        return found
    }

    /// Calls `body` with the values by property code of each object of `ids` that exists,
    /// in the order given (``fields(_:)`` for many objects: each entity is looked up once
    /// per run of its objects, not per object).
    ///
    /// The records are looked up through one cursor, so ids in key order (entity, then
    /// primary key) find their neighbours' leaf pages without searching from the root.
    public func forEachFields(_ ids: [StoredObjectID], _ body: (StoredFields) throws -> Void) throws {
        var current: (name: String, entity: ModelSchema.Entity, code: UInt16)?
        let changed = try view.map { view in try view.changedKeys { try log.catalog.entityCode($0) } }
        // One buffer for every record's values: unique again once `body` lets go of them.
        var buffer: [LogValue?] = []
        try txn.withCursor(on: tables.state) { cursor in
            for id in ids {
                if current?.name != id.entity {
                    current = (id.entity, try log.schema.entity(id.entity), try writer.entityCode(id.entity))
                }
                guard let (_, entity, code) = current else { continue }
                let key = ObjectKey(entity: code, primaryKey: id.primaryKey)
                if let changed, changed.contains(key), let entry = view?.entries[id] {
                    if let values = entry.values { try body(pinnedFields(id, values, entry.version, entity)) }
                    continue
                }
                guard try key.withBytes({ try cursor.seek(exactly: $0) }) else { continue }
                guard let fields = try cursor.withCurrent({ _, value in try value.withUnsafeBytes { try self.fields(id, key, $0, entity, &buffer) } })
                else { continue }
                try body(fields)
            }
        }
    }

    /// Whether an object with `id` exists.
    public func contains(_ id: StoredObjectID) throws -> Bool {
        if let entry = view?.entries[id] { return entry.values != nil }
        return try txn.containsKey(try writer.key(id).bytes, in: tables.state)
    }

    /// An object's values as of the pinned generation, by property code.
    func pinnedFields(_ id: StoredObjectID, _ values: [String: LogValue], _ version: UInt64, _ entity: ModelSchema.Entity) -> StoredFields {
        StoredFields(id: id, version: version, names: entity.propertyNames, values: entity.propertyNames.map { values[$0] })
    }

    func storedObject(_ id: StoredObjectID, key: ObjectKey, record: Record) throws -> StoredObject {
        let entity = try log.schema.entity(id.entity)
        return StoredObject(id: id, version: record.version, values: try writer.beforeImage(txn, key, record: record, entity: entity))
    }

    /// The values by property code of the object `id` (under `key`), decoded from its
    /// record `raw`, with its unordered to-many members.
    /// `buffer` holds the values (see ``TableWriter/decodeFields(_:entity:context:into:)``).
    func fields(
        _ id: StoredObjectID, _ key: ObjectKey, _ raw: UnsafeRawBufferPointer, _ entity: ModelSchema.Entity, _ buffer: inout [LogValue?]
    ) throws -> StoredFields {
        let version = try writer.decodeFields(raw, entity: entity, context: "record \(entity.name)/p\(key.primaryKey)", into: &buffer)
        try writer.addMembers(txn, key, to: &buffer, entity: entity)
        return StoredFields(id: id, version: version, names: entity.propertyNames, values: buffer)
    }

    /// Calls `body` with each object of `entity` (and its sub-entities unless told not
    /// to), in primary-key order per entity, until it answers `.stop`.
    public func forEachObject(
        of entity: String, includingSubentities: Bool = true, _ body: (StoredObject) throws -> IterationDecision
    ) throws {
        try forEachRecord(of: entity, includingSubentities: includingSubentities) { _, id, key, raw in
            let record = try writer.decodeRecord(raw, entityName: id.entity, context: "record \(id)")
            return try body(try storedObject(id, key: key, record: record))
        } pinned: { _, id, values, version in
            try body(StoredObject(id: id, version: version, values: values))
        }
    }

    /// Calls `body` with the ID of each object of `entity` (and its sub-entities unless told
    /// not to), in primary-key order per entity, until it answers `.stop`, without decoding
    /// the objects' values.
    public func forEachObjectID(
        of entity: String, includingSubentities: Bool = true, _ body: (StoredObjectID) throws -> IterationDecision
    ) throws {
        try forEachRecord(of: entity, includingSubentities: includingSubentities) { _, id, _, _ in try body(id) } pinned: { _, id, _, _ in try body(id) }
    }

    /// Calls `body` with the values by property code of each object of `entity` (and its
    /// sub-entities unless told not to), in primary-key order per entity, until it answers
    /// `.stop`: ``forEachObject(of:includingSubentities:_:)`` without a dictionary per object.
    public func forEachFields(
        of entity: String, includingSubentities: Bool = true, _ body: (StoredFields) throws -> IterationDecision
    ) throws {
        var buffer: [LogValue?] = []
        try forEachRecord(of: entity, includingSubentities: includingSubentities) { described, id, key, raw in
            try body(try fields(id, key, raw, described, &buffer))
        } pinned: { described, id, values, version in
            try body(pinnedFields(id, values, version, described))
        }
    }

    /// ``forEachFields(of:includingSubentities:_:)`` handing `body` each object's values in
    /// place, by property code (``StoredFields/names``' order, `names` being the entity's
    /// property names — the same array for every object of the entity, so its storage
    /// identifies the layout): `body` may take values out (leaving nil), so they move into
    /// what it builds instead of being copied and released again.
    public func forEachFieldsInPlace(
        of entity: String, includingSubentities: Bool = true,
        _ body: (_ id: StoredObjectID, _ version: UInt64, _ names: [String], _ values: inout [LogValue?]) throws -> IterationDecision
    ) throws {
        var buffer: [LogValue?] = []
        // Bound once: reaching `writer` through `self` in the loop copied it (≈ 500 bytes) per record.
        let writer = self.writer
        try forEachRecord(of: entity, includingSubentities: includingSubentities) { described, id, key, raw in
            let version = try writer.decodeFields(raw, entity: described, context: "record \(described.name)/p\(key.primaryKey)", into: &buffer)
            // Only an entity with unordered to-many relationships has members to add.
            if !described.unorderedToMany.isEmpty { try writer.addMembers(txn, key, to: &buffer, entity: described) }
            return try body(id, version, described.propertyNames, &buffer)
        } pinned: { described, id, values, version in
            var pinned = described.propertyNames.map { values[$0] }
            return try body(id, version, described.propertyNames, &pinned)
        }
    }

    /// Calls `body` with the entity, ID, key and record of each object of `entity` (and its
    /// sub-entities unless told not to), in primary-key order per entity, until it answers
    /// `.stop`. Streams: one record at a time, nothing kept (LMDB allows the body's own reads
    /// while the cursor is open).
    ///
    /// A reader pinned to a generation calls `pinned` instead for the objects changed since
    /// (their values as of it), in their place in key order, and skips those that didn't
    /// exist then.
    func forEachRecord(
        of entity: String, includingSubentities: Bool,
        _ body: (ModelSchema.Entity, StoredObjectID, ObjectKey, UnsafeRawBufferPointer) throws -> IterationDecision,
        pinned: (ModelSchema.Entity, StoredObjectID, [String: LogValue], UInt64) throws -> IterationDecision
    ) throws {
        let described = try log.schema.entity(entity)
        let changed = try view.map { view in try view.changedKeys { try log.catalog.entityCode($0) } } ?? []
        for name in includingSubentities ? described.selfAndSubentities : [entity] {
            let schemaEntity = try log.schema.entity(name)
            let code = try log.catalog.entityCode(name)
            var stopped = false
            // The changed objects of this entity as of the generation, merged in by primary key.
            let old = view?.existing(of: name) ?? []
            var next = old.startIndex
            try txn.forEach(in: tables.state, range: .prefix([UInt8(code >> 8), UInt8(truncatingIfNeeded: code)])) { key, value in
                guard let objectKey = key.withUnsafeBytes({ ObjectKey($0) }) else { return .next }
                let id = StoredObjectID(entity: name, primaryKey: objectKey.primaryKey)
                if view != nil {
                    while next < old.endIndex && old[next].primaryKey < objectKey.primaryKey {
                        let entry = old[next]
                        next += 1
                        if try pinned(schemaEntity, StoredObjectID(entity: name, primaryKey: entry.primaryKey), entry.values, entry.version) == .stop {
                            stopped = true
                            return .stop
                        }
                    }
                    if changed.contains(objectKey) { return .next }
                }
                guard try value.withUnsafeBytes({ raw in try body(schemaEntity, id, objectKey, raw) }) == .stop else { return .next }
                stopped = true
                return .stop
            }
            if stopped { return }
            while next < old.endIndex {
                let entry = old[next]
                next += 1
                if try pinned(schemaEntity, StoredObjectID(entity: name, primaryKey: entry.primaryKey), entry.values, entry.version) == .stop { return }
            }
        }
    }

    /// The number of live objects of `entity` (and its sub-entities unless told not to).
    public func count(of entity: String, includingSubentities: Bool = true) throws -> Int {
        let described = try log.schema.entity(entity)
        var total = 0
        for name in includingSubentities ? described.selfAndSubentities : [entity] {
            let code = try log.catalog.entityCode(name)
            total += try txn.count(in: tables.state, range: .prefix([UInt8(code >> 8), UInt8(truncatingIfNeeded: code)]))
        }
        if let view { total += view.countAdjustment(for: includingSubentities ? described.selfAndSubentities : [entity]) }
        return total
    }

    /// The objects `property` of `id` relates to — either side of any relationship, to-one
    /// or to-many — in key order (list order for an ordered recorded side).
    public func related(_ id: StoredObjectID, _ property: String) throws -> [StoredObjectID] {
        let entity = try log.schema.entity(id.entity)
        guard let described = entity.propertiesByName[property], let storage = described.relationship else {
            throw LogError.unknownProperty(entity: id.entity, property: property)
        }
        if let view { return try pinnedRelated(id, property, described, storage, view) }
        return try currentRelated(id, property, described, storage)
    }

    /// How many objects ``related(_:_:)`` returns, counted without making their IDs: a
    /// derived or unordered to-many side's rows counted in place (`members.@count` of a
    /// team of 12,500). As of the pinned generation for a pinned reader.
    public func countRelated(_ id: StoredObjectID, _ property: String) throws -> Int {
        let entity = try log.schema.entity(id.entity)
        guard let described = entity.propertiesByName[property], let storage = described.relationship else {
            throw LogError.unknownProperty(entity: id.entity, property: property)
        }
        if view != nil { return try related(id, property).count }
        let table: LMDBDatabase
        let code: UInt16
        switch storage {
        case .toOne, .orderedToMany:
            return try currentRelated(id, property, described, storage).count
        case .unorderedToMany:
            table = tables.members
            code = try log.catalog.relationshipCode(described.qualifiedName)
        case .derived(let inverseEntity, let inverse):
            table = tables.referrers
            code = try log.catalog.relationshipCode("\(inverseEntity).\(inverse)")
        }
        var prefix = ByteWriter(capacity: 12)
        try writer.key(id).append(to: &prefix)
        prefix.uint16(code)
        return try txn.count(in: table, range: .prefix(prefix.bytes))
    }

    /// ``related(_:_:)`` of the current state.
    private func currentRelated(
        _ id: StoredObjectID, _ property: String, _ described: ModelSchema.Property, _ storage: ModelSchema.RelationshipStorage
    ) throws -> [StoredObjectID] {
        let key = try writer.key(id)
        switch storage {
        case .toOne, .orderedToMany:
            guard let record = try writer.readRecord(txn, key, entityName: id.entity) else { return [] }
            switch record.values[property] {
            case .reference(let target): return [target]
            case .references(let targets): return targets
            default: return []
            }
        case .unorderedToMany:
            let code = try log.catalog.relationshipCode(described.qualifiedName)
            return try writer.members(txn, of: key, relationship: code).map { try writer.id($0) }.sorted()
        case .derived(let inverseEntity, let inverse):
            let code = try log.catalog.relationshipCode("\(inverseEntity).\(inverse)")
            return try writer.referrers(txn, of: key, relationship: code).map { try writer.id($0) }.sorted()
        }
    }

    /// The objects of `entity` (and its sub-entities) whose relationship `property` refers
    /// to `target` — a to-one pointing at it, a to-many holding it — in key order, read
    /// without scanning the entity: for a side the store records, its `referrers` rows
    /// (spec 0004 §6.2, an index of every recorded reference); for a derived side,
    /// `target`'s own recorded inverse. Empty when `target`'s entity isn't in the store's
    /// model or isn't the relationship's destination (the inverse's entity or one of its
    /// sub-entities). As of the pinned generation for a pinned reader.
    ///
    /// ```swift
    /// try reader.referrers(to: StoredObjectID(entity: "Team", primaryKey: 3), through: "team", of: "Player")
    /// ```
    ///
    /// - Throws: ``LogError/invalidOperation(_:)`` unless `property` is a relationship of
    ///   `entity`.
    public func referrers(to target: StoredObjectID, through property: String, of entity: String) throws -> [StoredObjectID] {
        var found: [StoredObjectID] = []
        try forEachReferrer(to: target, through: property, of: entity) { id in
            found.append(id)
            return .next
        }
        return found
    }

    /// Calls `body` with each object ``referrers(to:through:of:)`` returns, in key order,
    /// until it answers `.stop` — without reading the rest (a count up to a cap reads no
    /// more than the cap).
    ///
    /// - Throws: as ``referrers(to:through:of:)``.
    public func forEachReferrer(
        to target: StoredObjectID, through property: String, of entity: String, _ body: (StoredObjectID) throws -> IterationDecision
    ) throws {
        let described = try log.schema.entity(entity)
        guard let relationship = described.propertiesByName[property], let storage = relationship.relationship else {
            throw LogError.invalidOperation("\(entity).\(property) is not a relationship")
        }
        guard let targetEntity = log.schema.entities[target.entity], let key = try? writer.key(target) else { return }
        if case .derived(let inverseEntity, let inverse) = storage {
            // The target's own side lists them — when the target is of the inverse's entity
            // (or a sub-entity): another entity's relationship of the same name is no inverse.
            guard try log.schema.entity(inverseEntity).selfAndSubentities.contains(target.entity),
                targetEntity.propertiesByName[inverse]?.relationship != nil
            else { return }
            let wanted = Set(described.selfAndSubentities)
            for id in try related(target, inverse) where wanted.contains(id.entity) {
                if try body(id) == .stop { return }
            }
            return
        }
        let code = try log.catalog.relationshipCode(relationship.qualifiedName)
        let wanted = Set(try described.selfAndSubentities.map { try log.catalog.entityCode($0) })
        if let view {
            // As of the generation: unchanged objects' rows, and changed objects that referred then.
            var found: [StoredObjectID] = []
            for source in try writer.referrers(txn, of: key, relationship: code) where wanted.contains(source.entity) {
                let id = try writer.id(source)
                if view.entries[id] == nil { found.append(id) }
            }
            found += view.referrers(to: target, through: property, among: Set(described.selfAndSubentities))
            for id in found.sorted() where try body(id) == .stop { return }
            return
        }
        var prefix = ByteWriter(capacity: 12)
        key.append(to: &prefix)
        prefix.uint16(code)
        try txn.forEach(in: tables.referrers, range: .prefix(prefix.bytes)) { row, _ in
            guard let source = row.withUnsafeBytes({ ObjectKey($0, at: 12) }), wanted.contains(source.entity) else { return .next }
            return try body(try writer.id(source))
        }
    }

    /// ``related(_:_:)`` as of the pinned generation: a changed object's recorded sides as
    /// they were then; a derived side's referrers without the changed objects, plus the
    /// changed objects that referred to `id` then.
    private func pinnedRelated(
        _ id: StoredObjectID, _ property: String, _ described: ModelSchema.Property, _ storage: ModelSchema.RelationshipStorage,
        _ view: GenerationView
    ) throws -> [StoredObjectID] {
        let entry = view.entries[id]
        if let entry, entry.values == nil { return [] }
        switch storage {
        case .toOne, .orderedToMany, .unorderedToMany:
            guard let entry else { return try currentRelated(id, property, described, storage) }
            switch entry.values?[property] {
            case .reference(let target)?: return [target]
            case .references(let targets)?: return storage == .unorderedToMany ? targets.sorted() : targets
            default: return []
            }
        case .derived(let inverseEntity, let inverse):
            let entities = Set(try log.schema.entity(inverseEntity).selfAndSubentities)
            let unchanged = try currentRelated(id, property, described, storage).filter { view.entries[$0] == nil }
            return (unchanged + view.referrers(to: id, through: inverse, among: entities)).sorted()
        }
    }

    // MARK: - Indexes

    /// The index that serves `attributes` of `entity`, if any (declared on it or inherited).
    func index(for entity: String, attributes: [String]) throws -> ModelSchema.IndexDefinition? {
        try log.schema.entity(entity).indexes.first { $0.properties == attributes }
    }

    /// Whether `attribute` of `entity` has an index (an indexed attribute, a one-attribute
    /// uniqueness constraint, or a named index over it alone).
    public func hasIndex(entity: String, attribute: String) throws -> Bool {
        try index(for: entity, attributes: [attribute]) != nil
    }

    /// Whether `entity` has an index over exactly `properties`, in that order (a named
    /// index, or a uniqueness constraint), declared on it or inherited.
    public func hasIndex(entity: String, properties: [String]) throws -> Bool {
        try index(for: entity, attributes: properties) != nil
    }

    /// Walks the index on `attribute` of `entity` over `range`, in value order (reversed with
    /// `reverse`), calling `body` with each object until it answers `.stop`.
    ///
    /// Objects of other entities sharing an inherited index are skipped. For string, data
    /// and URI values longer than ``IndexKeyEncoding/maximumComponentLength`` the key holds a
    /// prefix, so such values are candidates: re-check them against the record.
    ///
    /// - Throws: ``LogError/invalidOperation(_:)`` if the attribute has no index.
    public func scanIndex(
        entity: String, attribute: String, range: IndexRange, reverse: Bool = false,
        _ body: (StoredObjectID) throws -> IterationDecision
    ) throws {
        try scanIndex(entity: entity, properties: [attribute], prefix: [], range: range, reverse: reverse, body)
    }

    /// Walks the index over `properties` of `entity` (a compound index: a named index or a
    /// uniqueness constraint over exactly those properties, in that order), reading the
    /// entries whose leading properties equal `prefix` and whose next property,
    /// `properties[prefix.count]`, is in `range` — in that property's order (reversed with
    /// `reverse`), calling `body` with each object until it answers `.stop`.
    ///
    /// A prefix value is an attribute value, a `.reference` for a to-one element, or
    /// `.null`.
    ///
    /// ```swift
    /// // players of one team scoring over 90, by score
    /// try reader.scanIndex(entity: "Player", properties: ["team", "score"], prefix: [.reference(team)],
    ///                      range: IndexRange(lower: .int32(90), includesLower: false)) { id in … }
    /// ```
    ///
    /// As with one attribute, long values are cut in keys: a cut prefix value or range bound
    /// makes the entries candidates, to re-check against the record.
    ///
    /// - Throws: ``LogError/invalidOperation(_:)`` if there is no such index, or `prefix`
    ///   leaves no property for `range`.
    public func scanIndex(
        entity: String, properties: [String], prefix: [LogValue], range: IndexRange, reverse: Bool = false,
        _ body: (StoredObjectID) throws -> IterationDecision
    ) throws {
        let keyRange = try indexKeyRange(entity: entity, properties: properties, prefix: prefix, range: range)
        let wanted = Set(try log.schema.entity(entity).selfAndSubentities.map { try log.catalog.entityCode($0) })
        if let view {
            try pinnedScan(entity: entity, properties: properties, keyRange: keyRange, wanted: wanted, reverse: reverse, view: view, body)
            return
        }
        try txn.forEach(in: tables.index, range: keyRange, reverse: reverse) { key, _ in
            guard let objectKey = key.withUnsafeBytes({ ObjectKey($0, at: $0.count - ObjectKey.byteCount) }),
                wanted.contains(objectKey.entity)
            else { return .next }
            return try body(try writer.id(objectKey))
        }
    }

    /// ``scanIndex(entity:properties:prefix:range:reverse:_:)`` as of the pinned generation:
    /// the index without the changed objects, and the changed objects' keys as of the
    /// generation merged in, in key order.
    private func pinnedScan(
        entity: String, properties: [String], keyRange: KeyRange, wanted: Set<UInt16>, reverse: Bool, view: GenerationView,
        _ body: (StoredObjectID) throws -> IterationDecision
    ) throws {
        guard let definition = try index(for: entity, attributes: properties) else {
            throw LogError.invalidOperation("\(entity) has no index on \(properties.joined(separator: ", "))")
        }
        // Every changed object's key in this index as of the generation (whatever entity
        // the index is scanned for: those of other entities are skipped below), once per
        // catching up; then those in the range, in the scan's order.
        let all = try view.indexKeys(definition.name) {
            var made: [(key: [UInt8], id: StoredObjectID)] = []
            for name in log.schema.entities.keys {
                let described = try log.schema.entity(name)
                guard described.indexes.contains(where: { $0.name == definition.name }) else { continue }
                let code = try log.catalog.entityCode(name)
                for entry in view.existing(of: name) {
                    let objectKey = ObjectKey(entity: code, primaryKey: entry.primaryKey)
                    for (index, bytes, _) in try writer.indexKeys(objectKey, values: entry.values, entity: described) where index.name == definition.name {
                        made.append((bytes, StoredObjectID(entity: name, primaryKey: entry.primaryKey)))
                    }
                }
            }
            return made
        }
        let wantedNames = Set(try log.schema.entity(entity).selfAndSubentities)
        var old = all.filter { wantedNames.contains($0.id.entity) && keyRange.contains($0.key) }
        if reverse { old.reverse() }
        let changed = try view.changedKeys { try log.catalog.entityCode($0) }
        /// Whether the key `a` comes before the index key under the cursor, in the scan's order.
        func before(_ a: [UInt8], _ b: UnsafeRawBufferPointer) -> Bool {
            a.withUnsafeBytes { a in
                let common = min(a.count, b.count)
                var order: Int32 = 0
                if common > 0, let pa = a.baseAddress, let pb = b.baseAddress { order = memcmp(pa, pb, common) }
                let less = order != 0 ? order < 0 : a.count < b.count
                let equal = order == 0 && a.count == b.count
                return reverse ? !less && !equal : less
            }
        }
        var next = old.startIndex
        var stopped = false
        try txn.forEach(in: tables.index, range: keyRange, reverse: reverse) { key, _ in
            guard let objectKey = key.withUnsafeBytes({ ObjectKey($0, at: $0.count - ObjectKey.byteCount) }),
                wanted.contains(objectKey.entity)
            else { return .next }
            if next < old.endIndex {
                while next < old.endIndex && key.withUnsafeBytes({ before(old[next].key, $0) }) {
                    let id = old[next].id
                    next += 1
                    if try body(id) == .stop {
                        stopped = true
                        return .stop
                    }
                }
            }
            if changed.contains(objectKey) { return .next }
            let id = try writer.id(objectKey)
            if try body(id) == .stop {
                stopped = true
                return .stop
            }
            return .next
        }
        while !stopped && next < old.endIndex {
            let id = old[next].id
            next += 1
            if try body(id) == .stop { return }
        }
    }

    /// The objects holding `values` for the uniqueness constraint `constraint` of `entity`
    /// (declared on it or inherited; the objects may be of any entity the constraint
    /// applies to), in key order: at most one in a consistent store. Empty when a value is
    /// nil, missing or NaN (neither ever clashes). Long values cut in the index key are checked
    /// against each candidate's record.
    ///
    /// - Throws: ``LogError/invalidOperation(_:)`` if `entity` has no such constraint.
    public func objects(holding values: [String: LogValue], unique constraint: [String], of entity: String) throws -> [StoredObjectID] {
        let definition = try log.schema.entity(entity).indexes.first { $0.isUnique && $0.properties == constraint }
        guard let definition else {
            throw LogError.invalidOperation("\(entity) has no uniqueness constraint on \(constraint.joined(separator: ", "))")
        }
        var prefix: [UInt8] = []
        TableWriter.appendIndexCode(try log.catalog.indexCode(definition.name), to: &prefix)
        var complete = true
        for property in constraint {
            guard let value = values[property], !value.leavesUniquenessUnchecked else { return [] }
            var target: ObjectKey?
            if case .reference(let id) = value { target = try writer.key(id) }
            complete = TableWriter.appendIndexValue(value, target: target, to: &prefix) && complete
        }
        var found: [StoredObjectID] = []
        try txn.forEach(in: tables.index, range: .prefix(prefix)) { key, _ in
            guard let objectKey = key.withUnsafeBytes({ ObjectKey($0, at: $0.count - ObjectKey.byteCount) }) else { return .next }
            found.append(try writer.id(objectKey))
            return .next
        }
        guard !complete else { return found }
        return try found.filter { id in
            guard let stored = try object(id) else { return false }
            return constraint.allSatisfy { stored.values[$0] == values[$0] }
        }
    }

    /// The number of objects of `entity` (and its sub-entities) whose `attribute` is in
    /// `range`: index entries counted without reading records or making IDs. For cut long
    /// values (see ``scanIndex(entity:attribute:range:reverse:_:)``) an entry sharing a
    /// bound's prefix counts whether or not its full value is in the range.
    ///
    /// - Throws: ``LogError/invalidOperation(_:)`` if the attribute has no index.
    public func countIndex(entity: String, attribute: String, range: IndexRange) throws -> Int {
        try countIndex(entity: entity, properties: [attribute], prefix: [], range: range)
    }

    /// The number of objects of `entity` (and its sub-entities) in the entries of the index
    /// over `properties` that ``scanIndex(entity:properties:prefix:range:reverse:_:)`` reads,
    /// counted without reading records or making IDs.
    ///
    /// - Throws: ``LogError/invalidOperation(_:)`` if there is no such index.
    public func countIndex(entity: String, properties: [String], prefix: [LogValue], range: IndexRange) throws -> Int {
        if view != nil {
            var count = 0
            try scanIndex(entity: entity, properties: properties, prefix: prefix, range: range) { _ in
                count += 1
                return .next
            }
            return count
        }
        let keyRange = try indexKeyRange(entity: entity, properties: properties, prefix: prefix, range: range)
        // The index of an entity holds only its own and its sub-entities' objects unless it
        // is inherited: then others' entries are skipped.
        if try index(for: entity, attributes: properties)?.entity == entity {
            return try txn.count(in: tables.index, range: keyRange)
        }
        let wanted = Set(try log.schema.entity(entity).selfAndSubentities.map { try log.catalog.entityCode($0) })
        var count = 0
        try txn.forEach(in: tables.index, range: keyRange) { key, _ in
            if let objectKey = key.withUnsafeBytes({ ObjectKey($0, at: $0.count - ObjectKey.byteCount) }), wanted.contains(objectKey.entity) {
                count += 1
            }
            return .next
        }
        return count
    }

    /// The keys of the index over `properties` of `entity` whose leading values are `prefix`
    /// and whose next value is in `range`.
    func indexKeyRange(entity: String, properties: [String], prefix: [LogValue], range: IndexRange) throws -> KeyRange {
        guard let index = try index(for: entity, attributes: properties) else {
            if properties.count == 1 { throw LogError.invalidOperation("\(entity).\(properties[0]) has no index") }
            throw LogError.invalidOperation("\(entity) has no index on \(properties.joined(separator: ", "))")
        }
        guard prefix.count < properties.count else {
            throw LogError.invalidOperation(
                "an index scan of \(entity) (\(properties.joined(separator: ", "))) fixes \(prefix.count) values, leaving no property for its range")
        }
        let code = try log.catalog.indexCode(index.name)
        var base: [UInt8] = [UInt8(code >> 8), UInt8(truncatingIfNeeded: code)]
        for value in prefix {
            var target: ObjectKey?
            if case .reference(let id) = value {
                // A reference to an object of an entity the store doesn't have matches nothing.
                guard log.schema.entities[id.entity] != nil else { return KeyRange(lowerBound: base, includesLowerBound: true, upperBound: base, includesUpperBound: false) }
                target = try writer.key(id)
            }
            if case .references = value { throw LogError.invalidOperation("an index prefix value can't be a to-many value") }
            _ = TableWriter.appendIndexValue(value, target: target, to: &base)
        }

        if range.matchesNil { return .prefix(base + IndexKeyEncoding.encode(nil)) }
        // A bound whose key is cut (a long string, data or URI; a decimal other decimals
        // share the key of) stands for every value with that key: the range takes in the
        // whole key even when the bound itself is excluded, and readers re-check (§5).
        let lower: [UInt8]
        if let value = range.lower {
            var encoded = base
            let whole = IndexKeyEncoding.append(value, to: &encoded)
            lower = range.includesLower || !whole ? encoded : (KeyRange.prefix(encoded).upperBound ?? encoded)
        } else {
            lower = base + [0x01]  // past the nils
        }
        let upper: [UInt8]?
        if let value = range.upper {
            var encoded = base
            let whole = IndexKeyEncoding.append(value, to: &encoded)
            upper = range.includesUpper || !whole ? KeyRange.prefix(encoded).upperBound : encoded
        } else {
            upper = KeyRange.prefix(base).upperBound
        }
        return KeyRange(lowerBound: lower, includesLowerBound: true, upperBound: upper, includesUpperBound: false)
    }

    // MARK: - Events and history

    /// The event with sequence `sequence`, from the raw log or a segment.
    ///
    /// - Throws: ``LogError/sequenceOutOfRange(requested:head:)`` past the head;
    ///   ``LogError/historyPurged(requested:purgedThrough:)`` for a purged sequence.
    public func event(_ sequence: UInt64) throws -> TransactionEvent {
        let head = try head
        guard sequence >= 1, sequence <= head else { throw LogError.sequenceOutOfRange(requested: sequence, head: head) }
        let purged = try purgedThrough
        guard sequence > purged else { throw LogError.historyPurged(requested: sequence, purgedThrough: purged) }
        var found: TransactionEvent?
        try forEachEvent(from: sequence, through: sequence) { event in
            found = event
            return .stop
        }
        guard let found else { throw LogError.malformed("event \(sequence) is missing from the log") }
        return found
    }

    /// Calls `body` with the event of each sequence in `sequences` (ascending, as
    /// ``history(of:)`` gives them), oldest first or, with `reversed`, newest first, until it
    /// answers `.stop`.
    ///
    /// Reading them one by one with ``event(_:)`` decompresses a segment frame for every
    /// compacted event; this decompresses each frame that holds some of them once, and keeps
    /// only that frame in memory.
    ///
    /// - Throws: as ``event(_:)``, for the first sequence that is out of range or purged
    ///   (before any event is delivered).
    public func forEachEvent(
        among sequences: [UInt64], reversed: Bool = false, _ body: (TransactionEvent) throws -> IterationDecision
    ) throws {
        guard let lowest = sequences.first, let highest = sequences.last else { return }
        guard zip(sequences, sequences.dropFirst()).allSatisfy({ $0 < $1 }) else {
            throw LogError.malformed("forEachEvent(among:) needs ascending sequences without repeats")
        }
        let head = try head
        guard lowest >= 1, highest <= head else {
            throw LogError.sequenceOutOfRange(requested: lowest < 1 ? lowest : highest, head: head)
        }
        let purged = try purgedThrough
        guard lowest > purged else { throw LogError.historyPurged(requested: lowest, purgedThrough: purged) }
        let compacted = try compactedThrough
        let split = sequences[...].partitioningIndex { $0 > compacted }
        let old = sequences[..<split]
        let recent = sequences[split...]
        func fromRaw(_ sequence: UInt64) throws -> IterationDecision {
            var decision = IterationDecision.next
            var found = false
            try forEachEvent(from: sequence, through: sequence) { event in
                found = true
                decision = try body(event)
                return .stop
            }
            guard found else { throw LogError.malformed("event \(sequence) is missing from the log") }
            return decision
        }
        if reversed {
            for sequence in recent.reversed() where try fromRaw(sequence) == .stop { return }
            try forEachSegmentEvent(among: old, reversed: true, body)
        } else {
            var stopped = false
            try forEachSegmentEvent(among: old, reversed: false) { event in
                if try body(event) == .stop {
                    stopped = true
                    return .stop
                }
                return .next
            }
            if stopped { return }
            for sequence in recent where try fromRaw(sequence) == .stop { return }
        }
    }

    /// Calls `body` with each event from `from` through `through` (default: the head), in
    /// order — reading compacted ones from their segments — until it answers `.stop`.
    ///
    /// Purged events (through ``purgedThrough``) are gone: the walk starts at the first
    /// event kept. Callers that must not miss events check ``purgedThrough`` first.
    public func forEachEvent(
        from: UInt64 = 1, through: UInt64? = nil, _ body: (TransactionEvent) throws -> IterationDecision
    ) throws {
        try forEachEvent(from: from, through: through, where: nil, body)
    }

    /// Like ``forEachEvent(from:through:_:)``, but decodes only the events whose header
    /// `filter` accepts: the header (sequence, timestamp, author, context name, process ID)
    /// is read straight from the stored bytes, so skipped events cost no decoding. The
    /// checksum is checked only for the events decoded; an event whose header can't be read
    /// is decoded (and its error thrown).
    public func forEachEvent(
        from: UInt64 = 1, through: UInt64? = nil, where filter: ((EventHeader) -> Bool)?,
        _ body: (TransactionEvent) throws -> IterationDecision
    ) throws {
        let last = try through ?? head
        var next = max(from, try purgedThrough + 1, 1)
        guard next <= last else { return }
        func wanted(_ raw: UnsafeRawBufferPointer) -> Bool {
            guard let filter, let header = EventCodec.header(raw) else { return true }
            return filter(header)
        }
        let compacted = try compactedThrough
        if next <= compacted {
            var stopped = false
            try forEachSegmentEvent(from: next, through: min(last, compacted), where: filter == nil ? nil : wanted) { event in
                if try body(event) == .stop {
                    stopped = true
                    return .stop
                }
                return .next
            }
            if stopped { return }
            next = compacted + 1
        }
        guard next <= last else { return }
        // Events are dense: a sequence missing from the raw log is an error, not skipped
        // (a walk that skipped it would build a state, a replay or a log without it).
        let end = min(last, try head)
        var chunks = EventChunks()
        var expected = next
        var stopped = false
        func deliver() throws -> IterationDecision {
            let (sequence, bytes, damage) = chunks.take()
            guard sequence == expected else {
                throw EventChunks.densityError(expected: expected, found: sequence)
            }
            expected = sequence &+ 1
            if let damage { throw EventChunks.error(sequence, damage) }
            if filter != nil, !bytes.withUnsafeBytes({ wanted($0) }) { return .next }
            return try body(try decode(bytes, sequence: sequence))
        }
        let range = KeyRange(lowerBound: bigEndianBytes(next), upperBound: last == .max ? nil : bigEndianBytes(last + 1))
        try txn.forEach(in: tables.events, range: range) { key, value in
            let another = key.withUnsafeBytes { chunks.startsAnotherEvent($0) }
            if another, try deliver() == .stop {
                stopped = true
                return .stop
            }
            key.withUnsafeBytes { key in value.withUnsafeBytes { chunks.add(key: key, value: $0) } }
            return .next
        }
        if stopped { return }
        if !chunks.isEmpty, try deliver() == .stop { return }
        if expected <= end {
            throw LogError.malformed(
                expected == end ? "event \(end) is missing from the log" : "events \(expected)…\(end) are missing from the log")
        }
    }

    func decode(_ bytes: [UInt8], sequence: UInt64) throws -> TransactionEvent {
        let event = try bytes.withUnsafeBytes { raw in
            try EventCodec.decode(raw, catalog: log.catalog) { "event \(sequence)" }
        }
        guard event.sequence == sequence else {
            throw LogError.malformed("event stored under sequence \(sequence) says it is \(event.sequence)")
        }
        return event
    }

    /// The sequences after `after` through `through` of every transaction that changed an
    /// object of one of `entities`, ascending and without repeats, from the per-object
    /// history index; nil when that would read more than `budget` of the index's rows (the
    /// entities' objects changed so often that reading the events is the cheaper way).
    /// Entities the store never held have no rows.
    public func history(
        ofEntities entities: some Sequence<String>, after: UInt64, through: UInt64, budget: Int
    ) throws -> [UInt64]? {
        var result: [UInt64] = []
        var rows = 0
        for name in entities {
            guard let code = try? log.catalog.entityCode(name) else { continue }
            var over = false
            try txn.forEach(in: tables.history, range: .prefix([UInt8(code >> 8), UInt8(code & 0xFF)])) { entry, _ in
                rows += 1
                if rows > budget {
                    over = true
                    return .stop
                }
                if let sequence = entry.withUnsafeBytes({ readBigEndian($0, at: 10) }), sequence > after, sequence <= through {
                    result.append(sequence)
                }
                return .next
            }
            if over { return nil }
        }
        result.sort()
        var unique: [UInt64] = []
        unique.reserveCapacity(result.count)
        for sequence in result where sequence != unique.last { unique.append(sequence) }
        return unique
    }

    /// The sequences of every transaction that changed `id`, oldest first (including its
    /// insert and delete; history survives the object).
    ///
    /// - Throws: ``LogError/malformed(_:)`` for a row naming sequence 0 or one past the head
    ///   (a damaged history table), naming the object and the sequence, rather than an
    ///   error about the sequence that doesn't say where it came from.
    public func history(of id: StoredObjectID) throws -> [UInt64] {
        let key = try writer.key(id)
        let head = try head
        var result: [UInt64] = []
        try txn.forEach(in: tables.history, range: .prefix(key.bytes)) { entry, _ in
            if let sequence = entry.withUnsafeBytes({ readBigEndian($0, at: 10) }) {
                guard sequence >= 1, sequence <= head else {
                    throw LogError.malformed("the history of \(id) lists sequence \(sequence), outside the log (1…\(head)): the history table is damaged")
                }
                result.append(sequence)
            }
            return .next
        }
        return result
    }
}
