import Foundation
import StrataModel
import StrataStorage

/// One live object's stored record: the values in its row of the `state` table.
struct Record: Sendable, Hashable {
    /// The model version the record was written with.
    var modelVersion: Int
    /// The sequence of the object's last change (its optimistic-locking version).
    var version: UInt64
    /// Attributes, to-one references and ordered to-many lists. Unordered to-many
    /// members live in the `members` table; derived sides aren't stored.
    var values: [String: LogValue]
}

/// Maintains the projections — state, indexes, references, membership, history — for
/// commit and for replay (`verify`, `replay --into`). Every function works inside the
/// caller's write transaction.
struct TableWriter: CodecCatalog {
    let tables: StoreTables
    let catalog: Catalog
    /// The schema and version new records are written with.
    let schema: ModelSchema
    let modelVersion: Int
    /// The catalog's codes when the writer was made: lookups without the catalog's lock on
    /// the hot path (codes are never changed, only added; misses fall back to the catalog).
    let codes: Catalog.State

    /// The log's kept entity shapes (nil: each writer makes its own).
    let shapes: EntityShapes?

    init(tables: StoreTables, catalog: Catalog, schema: ModelSchema, modelVersion: Int, shapes: EntityShapes? = nil) {
        self.tables = tables
        self.catalog = catalog
        self.schema = schema
        self.modelVersion = modelVersion
        self.shapes = shapes
        codes = catalog.snapshot
    }

    // MARK: - Keys

    /// The coding shape of entity `name` of ``schema``: the log's kept one, or a new one.
    ///
    /// - Throws: ``LogError/unknownEntity(_:)`` when the schema has no such entity.
    func shape(of name: String) throws(LogError) -> EntityCoding.Shape {
        func make() throws(LogError) -> EntityCoding.Shape { EntityCoding.Shape(try schema.entity(name), schema: schema, writer: self) }
        guard let shapes else { return try make() }
        return try shapes.shape(of: name, make: make)
    }

    func entityCode(_ name: String) throws(LogError) -> UInt16 {
        if let code = codes.entityCode(name) { return code }
        return try catalog.entityCode(name)
    }

    func relationshipCode(_ qualifiedName: String) throws(LogError) -> UInt16 {
        if let code = codes.relationshipCodes[qualifiedName] { return code }
        return try catalog.relationshipCode(qualifiedName)
    }

    func indexCode(_ name: String) throws(LogError) -> UInt16 {
        if let code = codes.indexCodes[name] { return code }
        return try catalog.indexCode(name)
    }

    func entityName(_ code: UInt16) throws(LogError) -> String {
        if let name = codes.entityName(code) { return name }
        if let name = codes.entityNames[code] { return name }
        return try catalog.entityName(code)
    }

    func schema(forModelVersion version: Int) throws(LogError) -> ModelSchema {
        version == modelVersion ? schema : try catalog.schema(forModelVersion: version)
    }

    func key(_ id: StoredObjectID) throws(LogError) -> ObjectKey {
        ObjectKey(entity: try entityCode(id.entity), primaryKey: id.primaryKey)
    }

    func id(_ key: ObjectKey) throws(LogError) -> StoredObjectID {
        if let name = codes.entityNames[key.entity] { return StoredObjectID(entity: name, primaryKey: key.primaryKey) }
        return StoredObjectID(entity: try catalog.entityName(key.entity), primaryKey: key.primaryKey)
    }

    /// target · relationship · source (or source · relationship · target for `members`).
    static func linkKey(_ first: ObjectKey, _ relationship: UInt16, _ second: ObjectKey) -> [UInt8] {
        withLinkKey(first, relationship, second) { Array($0) }
    }

    /// Lends the 22-byte key of ``linkKey(_:_:_:)`` to `body`, from the stack.
    @discardableResult
    static func withLinkKey<R>(
        _ first: ObjectKey, _ relationship: UInt16, _ second: ObjectKey, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        var storage: (UInt64, UInt64, UInt64) = (0, 0, 0)
        return try withUnsafeMutableBytes(of: &storage) { raw in
            first.store(into: raw, at: 0)
            raw.storeBytes(of: relationship.bigEndian, toByteOffset: 10, as: UInt16.self)
            second.store(into: raw, at: 12)
            return try body(UnsafeRawBufferPointer(rebasing: raw[0..<22]))
        }
    }

    static func historyKey(_ object: ObjectKey, _ sequence: UInt64) -> [UInt8] {
        withHistoryKey(object, sequence) { Array($0) }
    }

    /// Lends the 18-byte key of ``historyKey(_:_:)`` to `body`, from the stack.
    static func withHistoryKey<R>(_ object: ObjectKey, _ sequence: UInt64, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var storage: (UInt64, UInt64, UInt64) = (0, 0, 0)
        return try withUnsafeMutableBytes(of: &storage) { raw in
            object.store(into: raw, at: 0)
            raw.storeBytes(of: sequence.bigEndian, toByteOffset: 10, as: UInt64.self)
            return try body(UnsafeRawBufferPointer(rebasing: raw[0..<18]))
        }
    }

    /// Adds the history row of `object`'s change in transaction `sequence`.
    func putHistory(_ txn: borrowing LMDBTransaction, _ object: ObjectKey, _ sequence: UInt64) throws {
        try Self.withHistoryKey(object, sequence) { key in try txn.put(bytes: Self.emptyBytes, forKey: key, in: tables.history) }
    }

    /// The value of the tables whose rows are all key (index, referrers, members, history).
    static let empty: [UInt8] = []
    /// ``empty`` as raw bytes.
    static var emptyBytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: nil, count: 0) }

    // MARK: - Records

    func encodeRecord(_ record: Record, entity: ModelSchema.Entity) throws(LogError) -> [UInt8] {
        var coded: [(code: Int, value: LogValue)] = []
        coded.reserveCapacity(record.values.count)
        for (name, value) in record.values {
            if case .null = value { continue }
            guard let property = entity.propertiesByName[name] else {
                throw .unknownProperty(entity: entity.name, property: name)
            }
            coded.append((property.code, value))
        }
        coded.sort { $0.code < $1.code }
        var w = ByteWriter(capacity: 64)
        w.varint(record.modelVersion)
        w.varint(record.version)
        try EventCodec.writeCodedValues(coded, &w, self)
        return w.bytes
    }

    /// Decodes a state record. `context` (such as `record Person/p12`) names it in an error;
    /// it is only built when decoding fails, so reading a record formats no text.
    func decodeRecord(_ bytes: UnsafeRawBufferPointer, entityName: String, context: @autoclosure () -> String) throws(LogError) -> Record {
        try naming(context) { () throws(LogError) in try decodeRecord(bytes, entityName: entityName) }
    }

    /// The context of a reader whose failures ``naming(_:_:)`` names.
    private static let unnamed = "\u{1}record"

    /// `body`, whose readers use the context ``unnamed``, with `context()` put in its place in
    /// a failure's message: the text is only built when decoding fails.
    private func naming<T>(_ context: () -> String, _ body: () throws(LogError) -> T) throws(LogError) -> T {
        do {
            return try body()
        } catch .malformed(let what) where what.hasPrefix(Self.unnamed) {
            throw .malformed(context() + what.dropFirst(Self.unnamed.count))
        }
    }

    private func decodeRecord(_ bytes: UnsafeRawBufferPointer, entityName: String) throws(LogError) -> Record {
        var r = ByteReader(bytes, context: Self.unnamed)
        let version = try r.count(limit: Int(Int32.max))
        let sequence = try r.varint()
        let entity = try schema(forModelVersion: version).entity(entityName)
        let n = try r.count(limit: r.remaining)
        var values: [String: LogValue] = [:]
        values.reserveCapacity(n)
        var previous = -1
        for _ in 0..<n {
            let code = try r.count(limit: Int(Int32.max))
            guard code < entity.properties.count else { throw r.failure("property code \(code) out of range") }
            guard code > previous else { throw r.failure("property code \(code) after \(previous): codes must ascend") }
            previous = code
            let value = try EventCodec.readValue(&r, self)
            guard EventCodec.fits(value, entity.valueKinds[code]) else {
                throw EventCodec.misfit(value, entity.properties[code], entity: entityName, r)
            }
            values[entity.properties[code].name] = value
        }
        guard r.isAtEnd else { throw r.failure("trailing bytes") }
        return Record(modelVersion: version, version: sequence, values: values)
    }

    /// The version (last change's sequence) in the state record `bytes`, read from its header.
    func recordVersion(_ bytes: UnsafeRawBufferPointer, context: @autoclosure () -> String) throws(LogError) -> UInt64 {
        try naming(context) { () throws(LogError) -> UInt64 in
            var r = ByteReader(bytes, context: Self.unnamed)
            _ = try r.count(limit: Int(Int32.max))
            return try r.varint()
        }
    }

    /// The version of the record under `key`, read from its header; nil if there is none.
    func readVersion(_ txn: borrowing LMDBTransaction, _ key: ObjectKey, entityName: String) throws -> UInt64? {
        try txn.withValue(forKey: key.bytes, in: tables.state) { span in
            try span.withUnsafeBytes { raw in try recordVersion(raw, context: "record \(entityName)/p\(key.primaryKey)") }
        }
    }

    func readRecord(_ txn: borrowing LMDBTransaction, _ key: ObjectKey, entityName: String) throws -> Record? {
        try txn.withValue(forKey: key.bytes, in: tables.state) { span in
            try span.withUnsafeBytes { raw in
                try decodeRecord(raw, entityName: entityName, context: "record \(entityName)/p\(key.primaryKey)")
            }
        }
    }

    /// Decodes a state record into `values` by property code of `entity` (the current
    /// schema's); returns its sequence. Every slot is reset first, so one buffer serves a
    /// whole scan without an allocation per record. A record written with another model
    /// version is decoded by name and mapped onto the current codes.
    func decodeFields(
        _ raw: UnsafeRawBufferPointer, entity: ModelSchema.Entity, context: @autoclosure () -> String, into values: inout [LogValue?]
    ) throws(LogError) -> UInt64 {
        let count = entity.properties.count
        if values.count == count {
            values.withUnsafeMutableBufferPointer { slots in
                for code in 0..<count { slots[code] = nil }
            }
        } else {
            values = [LogValue?](repeating: nil, count: count)
        }
        return try naming(context) { () throws(LogError) -> UInt64 in
            var r = ByteReader(raw, context: Self.unnamed)
            let version = try r.count(limit: Int(Int32.max))
            let sequence = try r.varint()
            if version == modelVersion {
                let n = try r.count(limit: r.remaining)
                // Written through the buffer: one uniqueness check per record, not per value.
                let kinds = entity.valueKinds
                try values.withUnsafeMutableBufferPointer { (slots) throws(LogError) in
                    var previous = -1
                    for _ in 0..<n {
                        let code = try r.count(limit: Int(Int32.max))
                        guard code < count else { throw r.failure("property code \(code) out of range") }
                        guard code > previous else { throw r.failure("property code \(code) after \(previous): codes must ascend") }
                        previous = code
                        let value = try EventCodec.readValue(&r, self)
                        guard EventCodec.fits(value, kinds[code]) else {
                            throw EventCodec.misfit(value, entity.properties[code], entity: entity.name, r)
                        }
                        // Initialized, not assigned: every slot is nil here (emptied above,
                        // and codes ascend), which holds nothing to destroy.
                        slots.initializeElement(at: code, to: value)
                    }
                }
                guard r.isAtEnd else { throw r.failure("trailing bytes") }
            } else {
                for (name, value) in try decodeRecord(raw, entityName: entity.name).values {
                    if let code = entity.propertiesByName[name]?.code { values[code] = value }
                }
            }
            return sequence
        }
    }

    /// Fills the object's unordered to-many members into `values`, as
    /// ``beforeImage(_:_:record:entity:)`` adds them.
    func addMembers(_ txn: borrowing LMDBTransaction, _ key: ObjectKey, to values: inout [LogValue?], entity: ModelSchema.Entity) throws {
        try forEachUnorderedMembership(txn, key, entity: entity) { property, ids in values[property.code] = .references(ids) }
    }

    /// Calls `body` with each unordered to-many relationship of the object under `key` that
    /// has members, and its members in ID order.
    func forEachUnorderedMembership(
        _ txn: borrowing LMDBTransaction, _ key: ObjectKey, entity: ModelSchema.Entity,
        _ body: (ModelSchema.Property, [StoredObjectID]) throws -> Void
    ) throws {
        for property in entity.unorderedToMany {
            let code = try relationshipCode(property.qualifiedName)
            let ids = try members(txn, of: key, relationship: code).map { (k) throws(LogError) in try id(k) }
            if !ids.isEmpty { try body(property, ids.sorted()) }
        }
    }

    func writeRecord(_ txn: borrowing LMDBTransaction, _ key: ObjectKey, _ record: Record, entity: ModelSchema.Entity) throws {
        let bytes = try encodeRecord(record, entity: entity)
        try key.withBytes { key in try txn.put(bytes, forKey: key, in: tables.state) }
    }

    // MARK: - Membership and references

    /// The members of an unordered to-many relationship, in key order.
    func members(_ txn: borrowing LMDBTransaction, of source: ObjectKey, relationship: UInt16) throws -> [ObjectKey] {
        var prefix = ByteWriter(capacity: 12)
        source.append(to: &prefix)
        prefix.uint16(relationship)
        var result: [ObjectKey] = []
        try txn.forEach(in: tables.members, range: .prefix(prefix.bytes)) { key, _ in
            if let target = key.withUnsafeBytes({ ObjectKey($0, at: 12) }) { result.append(target) }
            return .next
        }
        return result
    }

    /// The objects whose recorded relationship `relationship` points at `target`.
    func referrers(_ txn: borrowing LMDBTransaction, of target: ObjectKey, relationship: UInt16) throws -> [ObjectKey] {
        var prefix = ByteWriter(capacity: 12)
        target.append(to: &prefix)
        prefix.uint16(relationship)
        var result: [ObjectKey] = []
        try txn.forEach(in: tables.referrers, range: .prefix(prefix.bytes)) { key, _ in
            if let source = key.withUnsafeBytes({ ObjectKey($0, at: 12) }) { result.append(source) }
            return .next
        }
        return result
    }

    func link(_ txn: borrowing LMDBTransaction, _ source: ObjectKey, _ relationship: UInt16, _ target: ObjectKey, member: Bool) throws {
        try Self.withLinkKey(target, relationship, source) { key in
            try txn.put(bytes: Self.emptyBytes, forKey: key, in: tables.referrers)
        }
        if member {
            try Self.withLinkKey(source, relationship, target) { key in
                try txn.put(bytes: Self.emptyBytes, forKey: key, in: tables.members)
            }
        }
    }

    func unlink(_ txn: borrowing LMDBTransaction, _ source: ObjectKey, _ relationship: UInt16, _ target: ObjectKey, member: Bool) throws {
        try Self.withLinkKey(target, relationship, source) { key in try txn.delete(key: key, in: tables.referrers) }
        if member { try Self.withLinkKey(source, relationship, target) { key in try txn.delete(key: key, in: tables.members) } }
    }

    /// The reference targets a value holds.
    func targets(of value: LogValue?) throws(LogError) -> [ObjectKey] {
        switch value {
        case .reference(let id): [try key(id)]
        case .references(let ids): try ids.map { (id) throws(LogError) in try key(id) }
        default: []
        }
    }

    // MARK: - Indexes

    /// The index keys an object with `values` has in each of its entity's indexes.
    func indexKeys(_ key: ObjectKey, values: [String: LogValue], entity: ModelSchema.Entity) throws(LogError) -> [(ModelSchema.IndexDefinition, [UInt8], complete: Bool)] {
        var result: [(ModelSchema.IndexDefinition, [UInt8], complete: Bool)] = []
        for index in entity.indexes {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(32)
            Self.appendIndexCode(try indexCode(index.name), to: &bytes)
            var complete = true
            for property in index.properties {
                let value = values[property]
                var target: ObjectKey?
                if case .reference(let id)? = value { target = try self.key(id) }
                complete = Self.appendIndexValue(value, target: target, to: &bytes) && complete
            }
            key.append(to: &bytes)
            result.append((index, bytes, complete))
        }
        return result
    }

    /// Starts an index key: the index's code.
    static func appendIndexCode(_ code: UInt16, to bytes: inout [UInt8]) {
        bytes.append(UInt8(code >> 8))
        bytes.append(UInt8(truncatingIfNeeded: code))
    }

    /// Appends one indexed property's value to an index key (`target`: the key of a
    /// reference's destination); false when the value was cut.
    static func appendIndexValue(_ value: LogValue?, target: ObjectKey?, to bytes: inout [UInt8]) -> Bool {
        switch value {
        case .attribute(let value)?:
            return IndexKeyEncoding.append(value, to: &bytes)
        case .reference?:
            bytes.append(0x30)
            target?.append(to: &bytes)
            return true
        default:
            IndexKeyEncoding.append(nil, to: &bytes)
            return true
        }
    }

    func updateIndexes(
        _ txn: borrowing LMDBTransaction, _ key: ObjectKey, old: [String: LogValue]?, new: [String: LogValue]?,
        entity: ModelSchema.Entity
    ) throws {
        guard !entity.indexes.isEmpty else { return }
        // An update that changes no indexed property leaves every index key as it was.
        if let old, let new, !entity.indexes.contains(where: { $0.properties.contains { old[$0] != new[$0] } }) { return }
        let oldKeys = try old.map { try indexKeys(key, values: $0, entity: entity).map(\.1) } ?? []
        let newKeys = try new.map { try indexKeys(key, values: $0, entity: entity).map(\.1) } ?? []
        for k in oldKeys where !newKeys.contains(k) { try txn.delete(key: k, in: tables.index) }
        for k in newKeys where !oldKeys.contains(k) { try txn.put(Self.empty, forKey: k, in: tables.index) }
    }

    // MARK: - Applying changes

    /// Applies an insert: the record, its references and membership, its index entries.
    @discardableResult
    func applyInsert(
        _ txn: borrowing LMDBTransaction, _ key: ObjectKey, values: [String: LogValue], sequence: UInt64,
        entity: ModelSchema.Entity, isFresh: Bool = false
    ) throws -> [(ModelSchema.IndexDefinition, [UInt8], complete: Bool)] {
        // A primary key given out by this commit can't exist yet; only restores and replays probe.
        if !isFresh, try key.withBytes({ try txn.containsKey($0, in: tables.state) }) {
            throw LogError.objectExists("\(entity.name)/p\(key.primaryKey)")
        }
        var recordValues: [String: LogValue] = [:]
        for (name, value) in values {
            if case .null = value { continue }
            guard let property = entity.propertiesByName[name] else {
                throw LogError.unknownProperty(entity: entity.name, property: name)
            }
            if let storage = property.relationship {
                let code = try relationshipCode(property.qualifiedName)
                let member = storage == .unorderedToMany
                for target in try targets(of: value) { try link(txn, key, code, target, member: member) }
                if member { continue }
            }
            recordValues[name] = value
        }
        try writeRecord(txn, key, Record(modelVersion: modelVersion, version: sequence, values: recordValues), entity: entity)
        let indexKeys = entity.indexes.isEmpty ? [] : try indexKeys(key, values: recordValues, entity: entity)
        for (_, indexKey, _) in indexKeys { try txn.put(Self.empty, forKey: indexKey, in: tables.index) }
        try putHistory(txn, key, sequence)
        return indexKeys
    }

    /// The commit's insert: the same rows as ``applyInsert(_:_:values:sequence:entity:isFresh:)``
    /// — the record, its references and membership rows, its index entries, its history row —
    /// from the object's values by property code (sorted by code, no nil values), without a
    /// lookup by name. Unique index keys are added to `uniqueness` (the caller finishes the
    /// object there) for the check at the end of the commit; the index rows go to `indexRows`,
    /// for ``putIndexRows(_:_:uniqueness:)``.
    ///
    /// - Parameter encodedValues: the record's values section (count, then codes and values)
    ///   when the caller has encoded it already — the event's insert has the same bytes when
    ///   the object has no unordered to-many values; nil to encode it here.
    func applyInsert(
        _ txn: borrowing LMDBTransaction, _ key: ObjectKey, coded: [(code: Int, value: LogValue)],
        encodedValues: ArraySlice<UInt8>?, sequence: UInt64, coding: EntityCoding, isFresh: Bool,
        codings: inout EntityCodings, buffers: inout WriteBuffers, uniqueness: inout PendingUniqueness,
        writes: inout DeferredWrites
    ) throws {
        // A primary key given out by this commit can't exist yet; only restores and replays probe.
        if !isFresh, try key.withBytes({ try txn.containsKey($0, in: tables.state) }) {
            throw LogError.objectExists("\(coding.entity.name)/p\(key.primaryKey)")
        }
        let before = writes.sizes
        var recordCount = coded.count
        for (code, value) in coded where coding.properties[code].isRelationship {
            let relationship = try coding.relationshipCode(code, self)
            let member = coding.properties[code].kind == .unorderedToMany
            func link(_ target: ObjectKey) {
                Self.withLinkKey(target, relationship, key) { writes.referrers.add($0, value: Self.emptyBytes) }
                if member { Self.withLinkKey(key, relationship, target) { writes.members.add($0, value: Self.emptyBytes) } }
            }
            switch value {
            case .reference(let id):
                link(try codings.key(id))
            case .references(let ids):
                for id in ids { link(try codings.key(id)) }
            default: break
            }
            if member { recordCount -= 1 }
        }

        // The record.
        buffers.record.bytes.removeAll(keepingCapacity: true)
        buffers.record.varint(modelVersion)
        buffers.record.varint(sequence)
        if let encodedValues, recordCount == coded.count {
            buffers.record.bytes.append(contentsOf: encodedValues)
        } else {
            buffers.record.varint(recordCount)
            for (code, value) in coded where coding.properties[code].kind != .unorderedToMany {
                buffers.record.varint(code)
                try EventCodec.writeValue(value, &buffers.record, self)
            }
        }
        key.withBytes { keyBytes in
            buffers.record.bytes.withUnsafeBytes { writes.state.add(keyBytes, value: $0) }
        }

        // The index entries.
        for index in coding.indexes {
            buffers.indexKey.removeAll(keepingCapacity: true)
            Self.appendIndexCode(try coding.indexCode(index, self), to: &buffers.indexKey)
            var complete = true
            var hasNil = false
            for property in index.propertyCodes {
                var value: LogValue?
                for entry in coded where entry.code == property {
                    value = entry.value
                    break
                }
                if value?.leavesUniquenessUnchecked ?? true { hasNil = true }
                var target: ObjectKey?
                if case .reference(let id)? = value { target = try codings.key(id) }
                complete = Self.appendIndexValue(value, target: target, to: &buffers.indexKey) && complete
            }
            key.append(to: &buffers.indexKey)
            var uniqueKey = -1
            if index.isUnique {
                uniqueKey = uniqueness.addKey(
                    index: index.position, buffers.indexKey, complete: complete, hasNil: hasNil, needsCheck: !isFresh)
            }
            writes.index.add(buffers.indexKey, uniqueKey: uniqueKey)
        }
        Self.withHistoryKey(key, sequence) { writes.history.add($0, value: Self.emptyBytes) }
        writes.reserve(after: before)
    }

    /// Puts the rows the commit's inserts deferred (``applyInsert(_:_:coded:encodedValues:sequence:coding:isFresh:codings:buffers:uniqueness:writes:)``),
    /// each table's in key order through one cursor, and empties them.
    func putDeferred(_ txn: borrowing LMDBTransaction, _ writes: inout DeferredWrites, uniqueness: inout PendingUniqueness) throws {
        guard !writes.isEmpty else { return }
        try putRows(txn, &writes.state, in: tables.state, noOverwrite: true)
        try putRows(txn, &writes.history, in: tables.history)
        try putRows(txn, &writes.referrers, in: tables.referrers)
        try putRows(txn, &writes.members, in: tables.members)
        try putIndexRows(txn, &writes.index, uniqueness: &uniqueness)
    }

    /// Puts deferred rows in key order through one cursor, and empties them. With
    /// `noOverwrite` (the state rows of inserted objects), a row whose key is taken is refused:
    /// an inserted object's primary key was given out before, so the entity's counter is
    /// behind its objects (damaged), and putting the row would overwrite another object.
    func putRows(_ txn: borrowing LMDBTransaction, _ rows: inout DeferredRows, in table: LMDBDatabase, noOverwrite: Bool = false) throws {
        guard !rows.isEmpty else { return }
        rows.sort()
        try txn.withCursor(on: table) { cursor in
            try rows.forEach { _, key, value in
                do {
                    try cursor.put(bytes: value, forKey: key, flags: noOverwrite ? .noOverwrite : [])
                } catch let error as LMDBError where error.code == .keyExists {
                    guard let objectKey = ObjectKey(key) else { throw error }
                    let name = (try? entityName(objectKey.entity)) ?? "entity \(objectKey.entity)"
                    let counter = (try? txn.value(forKey: Self.counterKey(objectKey.entity), in: tables.counters))
                        .flatMap { $0.map { $0.map { String(format: "%02x", $0) }.joined() } } ?? "none"
                    throw LogError.malformed(
                        "an insert was given \(name)/p\(objectKey.primaryKey), which an object in the store already has: the primary-key counter of \(name) (row \(counter)) is behind the objects it gave out, so the counters are damaged (strata verify reports them); nothing was written")
                }
            }
        }
        rows.removeAll()
    }

    /// The last primary key given to an object of the entity `code`, from its `counters` row
    /// (0 when there is none).
    ///
    /// - Throws: ``LogError/malformed(_:)`` for a row that isn't 8 bytes: read as 0 (or as its
    ///   first bytes), the next insert would be given a key an object already has.
    func lastPrimaryKey(_ txn: borrowing LMDBTransaction, entity code: UInt16) throws -> UInt64 {
        guard let row = try txn.value(forKey: Self.counterKey(code), in: tables.counters) else { return 0 }
        guard row.count == 8, let last = row.withUnsafeBytes({ readBigEndian($0) }) else {
            let name = (try? entityName(code)) ?? "entity \(code)"
            throw LogError.malformed(
                "the primary-key counter of \(name) is \(row.count) bytes (\(row.map { String(format: "%02x", $0) }.joined())), not 8: the counters table is damaged")
        }
        return last
    }

    /// Puts the deferred index rows in key order through one cursor, and empties them. A
    /// unique key first looks for a key with the same values: if there is none, no other
    /// object has them now, and an object given them later in the commit is checked itself,
    /// so the key needn't be checked at the end of the commit.
    func putIndexRows(_ txn: borrowing LMDBTransaction, _ rows: inout DeferredRows, uniqueness: inout PendingUniqueness) throws {
        guard !rows.isEmpty else { return }
        rows.sort()
        try rows.bytes.withUnsafeBytes { all in
            try txn.withCursor(on: tables.index) { cursor in
                for row in rows.rows {
                    let key = UnsafeRawBufferPointer(rebasing: all[Int(row.start)..<Int(row.start + row.count)])
                    if row.uniqueKey >= 0 && !uniqueness.keys[Int(row.uniqueKey)].hasNil {
                        let prefix = UnsafeRawBufferPointer(rebasing: key[0..<(key.count - ObjectKey.byteCount)])
                        let taken = try cursor.seek(atLeast: prefix) && (try cursor.withCurrent { found, _ in
                            found.withUnsafeBytes { raw in Self.hasPrefix(raw, prefix) }
                        } == true)
                        if taken { uniqueness.markForCheck(Int(row.uniqueKey)) }
                    }
                    try cursor.put(bytes: Self.emptyBytes, forKey: key)
                }
            }
        }
        rows.removeAll()
    }

    /// Whether `bytes` starts with `prefix`.
    static func hasPrefix(_ bytes: UnsafeRawBufferPointer, _ prefix: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count >= prefix.count else { return false }
        guard let a = bytes.baseAddress, let b = prefix.baseAddress else { return prefix.isEmpty }
        return memcmp(a, b, prefix.count) == 0
    }

    /// Applies an update's property changes to the object's current record; returns its new values.
    @discardableResult
    func applyUpdate(
        _ txn: borrowing LMDBTransaction, _ key: ObjectKey, changes: [PropertyChange], sequence: UInt64,
        entity: ModelSchema.Entity, current: Record? = nil
    ) throws -> [String: LogValue] {
        let values = try applyUpdateRows(txn, key, changes: changes, sequence: sequence, entity: entity, current: current)
        try putHistory(txn, key, sequence)
        return values
    }

    /// ``applyUpdate(_:_:changes:sequence:entity:current:)`` but for the history row, which a
    /// commit puts with the others in key order at its end (nothing in a commit reads the
    /// history table).
    func applyUpdateRows(
        _ txn: borrowing LMDBTransaction, _ key: ObjectKey, changes: [PropertyChange], sequence: UInt64,
        entity: ModelSchema.Entity, current: Record? = nil
    ) throws -> [String: LogValue] {
        // `current`: the record the caller read in this transaction (a commit reads it for the
        // before-values), so it isn't read and decoded twice.
        guard var record = try current ?? readRecord(txn, key, entityName: entity.name) else {
            throw LogError.objectNotFound("\(entity.name)/p\(key.primaryKey)")
        }
        let old = record.values
        for change in changes {
            guard let property = entity.propertiesByName[change.property] else {
                throw LogError.unknownProperty(entity: entity.name, property: change.property)
            }
            switch change {
            case .value(let name, _, let after):
                if property.relationship != nil {
                    let code = try relationshipCode(property.qualifiedName)
                    let before = try targets(of: record.values[name])
                    let now = try targets(of: after)
                    for target in before where !now.contains(target) { try unlink(txn, key, code, target, member: false) }
                    for target in now where !before.contains(target) { try link(txn, key, code, target, member: false) }
                }
                if case .null = after { record.values[name] = nil } else { record.values[name] = after }
            case .membership(_, let added, let removed):
                let code = try relationshipCode(property.qualifiedName)
                for id in removed { try unlink(txn, key, code, try self.key(id), member: true) }
                for id in added { try link(txn, key, code, try self.key(id), member: true) }
            }
        }
        let writtenWith = record.modelVersion
        record.version = sequence
        record.modelVersion = modelVersion
        do {
            try writeRecord(txn, key, record, entity: entity)
        } catch LogError.unknownProperty(let entityName, let property) where writtenWith > modelVersion {
            // A later model version wrote the object with a property this one doesn't have.
            throw LogError.invalidOperation(
                "\(entityName)/p\(key.primaryKey) was written with model version \(writtenWith), which has \(entityName).\(property); this store's model (version \(modelVersion)) can't store it, so the object can't be changed with it: open the store with the later model")
        }
        // Only an index with a changed property can have a changed key (comparing the
        // property names costs less than comparing the indexed values of old and new).
        if entity.indexes.contains(where: { index in changes.contains { index.properties.contains($0.property) } }) {
            try updateIndexes(txn, key, old: old, new: record.values, entity: entity)
        }
        return record.values
    }

    /// Applies a delete: removes the record, its outgoing references and membership, its index entries.
    func applyDelete(_ txn: borrowing LMDBTransaction, _ key: ObjectKey, sequence: UInt64, entity: ModelSchema.Entity) throws {
        guard let record = try readRecord(txn, key, entityName: entity.name) else {
            throw LogError.objectNotFound("\(entity.name)/p\(key.primaryKey)")
        }
        for property in entity.properties {
            guard let storage = property.relationship else { continue }
            switch storage {
            case .derived: continue
            case .toOne, .orderedToMany:
                let code = try relationshipCode(property.qualifiedName)
                for target in try targets(of: record.values[property.name]) { try unlink(txn, key, code, target, member: false) }
            case .unorderedToMany:
                let code = try relationshipCode(property.qualifiedName)
                for target in try members(txn, of: key, relationship: code) { try unlink(txn, key, code, target, member: true) }
            }
        }
        try updateIndexes(txn, key, old: record.values, new: nil, entity: entity)
        _ = try key.withBytes { key in try txn.delete(key: key, in: tables.state) }
        try putHistory(txn, key, sequence)
    }

    /// Defers a commit's delete of `key`, whose record holds `values`: the rows
    /// ``applyDelete(_:_:sequence:entity:)`` (replay's) removes — its outgoing references,
    /// membership rows, index rows and record — and the history row it adds go into `deletes`,
    /// found through `coding`'s resolved codes, for ``applyDeferredDeletes(_:_:)`` to remove
    /// (and put) in key order. Until then the object's rows are still in the tables: the
    /// commit applies them before any operation other than a delete.
    func deferDelete(
        _ txn: borrowing LMDBTransaction, _ key: ObjectKey, values: [String: LogValue], coding: EntityCoding, sequence: UInt64,
        into deletes: inout DeferredDeletes
    ) throws {
        for (code, property) in coding.properties.enumerated() {
            switch property.kind {
            case .attribute, .derived: continue
            case .toOne, .orderedToMany:
                let relationship = try coding.relationshipCode(code, self)
                for target in try targets(of: values[coding.names[code]]) {
                    Self.withLinkKey(target, relationship, key) { deletes.referrers.add($0, value: Self.emptyBytes) }
                }
            case .unorderedToMany:
                let relationship = try coding.relationshipCode(code, self)
                for target in try members(txn, of: key, relationship: relationship) {
                    Self.withLinkKey(target, relationship, key) { deletes.referrers.add($0, value: Self.emptyBytes) }
                    Self.withLinkKey(key, relationship, target) { deletes.members.add($0, value: Self.emptyBytes) }
                }
            }
        }
        if !coding.indexes.isEmpty {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(64)
            for index in coding.indexes {
                bytes.removeAll(keepingCapacity: true)
                Self.appendIndexCode(try coding.indexCode(index, self), to: &bytes)
                for property in index.propertyCodes {
                    let value = property >= 0 ? values[coding.names[property]] : nil
                    var target: ObjectKey?
                    if case .reference(let id)? = value { target = try self.key(id) }
                    _ = Self.appendIndexValue(value, target: target, to: &bytes)
                }
                key.append(to: &bytes)
                deletes.index.add(bytes, uniqueKey: -1)
            }
        }
        key.withBytes { deletes.state.add($0, value: Self.emptyBytes) }
        Self.withHistoryKey(key, sequence) { deletes.history.add($0, value: Self.emptyBytes) }
    }

    /// Removes the rows ``deferDelete(_:_:values:coding:sequence:into:)`` deferred, each
    /// table's in key order through one cursor, puts the deletes' history rows, and empties
    /// `deletes`. A delete through `mdb_del` searches the tree from its root each time; one
    /// through a cursor already on the key's page finds it there.
    func applyDeferredDeletes(_ txn: borrowing LMDBTransaction, _ deletes: inout DeferredDeletes) throws {
        guard !deletes.isEmpty else { return }
        func remove(_ rows: inout DeferredRows, in table: LMDBDatabase) throws {
            guard !rows.isEmpty else { return }
            rows.sort()
            try txn.withCursor(on: table) { cursor in
                try rows.forEach { _, key, _ in
                    if try cursor.seek(exactly: key) { try cursor.deleteCurrent() }
                }
            }
            rows.removeAll()
        }
        try remove(&deletes.referrers, in: tables.referrers)
        try remove(&deletes.members, in: tables.members)
        try remove(&deletes.index, in: tables.index)
        try remove(&deletes.state, in: tables.state)
        try putRows(txn, &deletes.history, in: tables.history)
    }

    /// The state record of `key` and, when it was written with model version `version`, its
    /// values section (the property count, then each code and value, by code): the bytes a
    /// delete's before-image has in an event of that version when the entity has no
    /// unordered to-many (whose members aren't in the record). Nil when there is no record.
    func readRecordAndValues(
        _ txn: borrowing LMDBTransaction, _ key: ObjectKey, entityName: String, valuesOf version: Int
    ) throws -> (record: Record, values: [UInt8]?)? {
        try key.withBytes { keyBytes in
            try txn.withValue(forKey: keyBytes, in: tables.state) { span in
                try span.withUnsafeBytes { raw -> (record: Record, values: [UInt8]?) in
                    let record = try decodeRecord(raw, entityName: entityName, context: "record \(entityName)/p\(key.primaryKey)")
                    guard record.modelVersion == version else { return (record, nil) }
                    // The header decoded above: the model version, then the sequence.
                    var r = ByteReader(raw, context: "record header")
                    _ = try r.count(limit: Int(Int32.max))
                    _ = try r.varint()
                    return (record, Array(UnsafeRawBufferPointer(rebasing: raw[r.offset...])))
                }
            }
        }
    }

    /// The full before-image of a live object: its record values plus unordered members.
    func beforeImage(_ txn: borrowing LMDBTransaction, _ key: ObjectKey, record: Record, entity: ModelSchema.Entity) throws -> [String: LogValue] {
        var values = record.values
        try forEachUnorderedMembership(txn, key, entity: entity) { property, ids in values[property.name] = .references(ids) }
        return values
    }

    /// Applies a decoded event (replay). With `checkBeforeImages`, every before-image in the
    /// event must match the state it is applied to; a mismatch is reported, not applied.
    func apply(_ txn: borrowing LMDBTransaction, _ event: TransactionEvent, checkBeforeImages: Bool) throws {
        // The commit wrote its records with the model version it ran with (the event's):
        // replay does the same, so a store whose model changed rebuilds byte for byte.
        if event.modelVersion != modelVersion {
            let writer = TableWriter(
                tables: tables, catalog: catalog, schema: try catalog.schema(forModelVersion: event.modelVersion),
                modelVersion: event.modelVersion)
            return try writer.apply(txn, event, checkBeforeImages: checkBeforeImages)
        }
        // A migration rebuilds the indexes of its model version, as it did at its commit.
        if case .migration = event.kind { try rebuildIndexes(txn) }
        if case .reservation(let entity, let range) = event.kind {
            let code = try entityCode(entity)
            let counter = try lastPrimaryKey(txn, entity: code)
            if range.upperBound > counter {
                try txn.put(bigEndianBytes(range.upperBound), forKey: Self.counterKey(code), in: tables.counters)
            }
        }
        for change in event.changes {
            let id = change.objectID
            let entity = try catalog.schema(forModelVersion: event.modelVersion).entity(id.entity)
            let current = self.schema.entities[id.entity] ?? entity
            let objectKey = try key(id)
            switch change {
            case .insert(_, let values):
                try applyInsert(txn, objectKey, values: values, sequence: event.sequence, entity: current)
            case .update(_, let changes):
                if checkBeforeImages, let record = try readRecord(txn, objectKey, entityName: id.entity) {
                    // Literally, as the commit decided the change (a NaN before-image is the
                    // NaN the state holds; before, verify reported it as damage).
                    for case .value(let name, let before, _) in changes where !(record.values[name] ?? .null).isIdentical(to: before) {
                        throw LogError.malformed(
                            "event \(event.sequence): the before-image of \(id).\(name) is \(before), but the replayed state holds \(record.values[name] ?? .null)")
                    }
                }
                try applyUpdate(txn, objectKey, changes: changes, sequence: event.sequence, entity: current)
            case .delete:
                try applyDelete(txn, objectKey, sequence: event.sequence, entity: current)
            }
            let counter = try lastPrimaryKey(txn, entity: objectKey.entity)
            if objectKey.primaryKey > counter {
                try txn.put(bigEndianBytes(objectKey.primaryKey), forKey: Self.counterKey(objectKey.entity), in: tables.counters)
            }
        }
    }

    static func counterKey(_ entity: UInt16) -> [UInt8] { [UInt8(entity >> 8), UInt8(truncatingIfNeeded: entity)] }
}
