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

    init(tables: StoreTables, catalog: Catalog, schema: ModelSchema, modelVersion: Int) {
        self.tables = tables
        self.catalog = catalog
        self.schema = schema
        self.modelVersion = modelVersion
        codes = catalog.snapshot
    }

    // MARK: - Keys

    func entityCode(_ name: String) throws(LogError) -> UInt16 {
        if let code = codes.entityCodes[name] { return code }
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
        var w = ByteWriter(capacity: 22)
        first.append(to: &w)
        w.uint16(relationship)
        second.append(to: &w)
        return w.bytes
    }

    static func historyKey(_ object: ObjectKey, _ sequence: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: 18)
        object.append(to: &w)
        w.uint64(sequence)
        return w.bytes
    }

    // MARK: - Records

    func encodeRecord(_ record: Record, entity: ModelSchema.Entity) throws(LogError) -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        w.varint(record.modelVersion)
        w.varint(record.version)
        var coded: [(Int, LogValue)] = []
        coded.reserveCapacity(record.values.count)
        for (name, value) in record.values {
            if case .null = value { continue }
            guard let property = entity.propertiesByName[name] else {
                throw .unknownProperty(entity: entity.name, property: name)
            }
            coded.append((property.code, value))
        }
        coded.sort { $0.0 < $1.0 }
        w.varint(coded.count)
        for (code, value) in coded {
            w.varint(code)
            try EventCodec.writeValue(value, &w, self)
        }
        return w.bytes
    }

    /// Decodes a state record. `context` (such as `record Person/p12`) names it in an error;
    /// it is only built when decoding fails, so reading a record formats no text.
    func decodeRecord(_ bytes: UnsafeRawBufferPointer, entityName: String, context: @autoclosure () -> String) throws(LogError) -> Record {
        do {
            return try decodeRecord(bytes, entityName: entityName)
        } catch .malformed(let what) where what.hasPrefix(Self.unnamed) {
            throw .malformed(context() + what.dropFirst(Self.unnamed.count))
        }
    }

    /// The context of a reader whose failures ``decodeRecord(_:entityName:context:)`` names.
    private static let unnamed = "\u{1}record"

    private func decodeRecord(_ bytes: UnsafeRawBufferPointer, entityName: String) throws(LogError) -> Record {
        var r = ByteReader(bytes, context: Self.unnamed)
        let version = try r.count(limit: Int(Int32.max))
        let sequence = try r.varint()
        let entity = try schema(forModelVersion: version).entity(entityName)
        let n = try r.count(limit: r.remaining)
        var values: [String: LogValue] = [:]
        values.reserveCapacity(n)
        for _ in 0..<n {
            let code = try r.count(limit: Int(Int32.max))
            guard code < entity.properties.count else { throw r.failure("property code \(code) out of range") }
            values[entity.properties[code].name] = try EventCodec.readValue(&r, self)
        }
        guard r.isAtEnd else { throw r.failure("trailing bytes") }
        return Record(modelVersion: version, version: sequence, values: values)
    }

    func readRecord(_ txn: borrowing LMDBTransaction, _ key: ObjectKey, entityName: String) throws -> Record? {
        try txn.withValue(forKey: key.bytes, in: tables.state) { span in
            try span.withUnsafeBytes { raw in
                try decodeRecord(raw, entityName: entityName, context: "record \(entityName)/p\(key.primaryKey)")
            }
        }
    }

    /// The values of the object under `key` by property code of `entity` (the current
    /// schema's), with its unordered to-many members as ``beforeImage(_:_:record:entity:)``
    /// adds them, and its version; nil if there is no such object.
    func readFields(_ txn: borrowing LMDBTransaction, _ key: ObjectKey, entity: ModelSchema.Entity) throws -> (version: UInt64, values: [LogValue?])? {
        let found = try key.withBytes { keyBytes in
            try txn.withValue(forKey: keyBytes, in: tables.state) { span in
                try span.withUnsafeBytes { raw in
                    try decodeFields(raw, entity: entity, context: "record \(entity.name)/p\(key.primaryKey)")
                }
            }
        }
        guard let found else { return nil }
        return (found.0, try addingMembers(txn, key, to: found.1, entity: entity))
    }

    /// A state record's values by property code of `entity` (the current schema's) and its
    /// version. A record written with another model version is decoded by name and mapped
    /// onto the current codes.
    func decodeFields(
        _ raw: UnsafeRawBufferPointer, entity: ModelSchema.Entity, context: @autoclosure () -> String
    ) throws(LogError) -> (UInt64, [LogValue?]) {
        do throws(LogError) {
            var r = ByteReader(raw, context: Self.unnamed)
            let version = try r.count(limit: Int(Int32.max))
            let sequence = try r.varint()
            var values = [LogValue?](repeating: nil, count: entity.properties.count)
            if version == modelVersion {
                let n = try r.count(limit: r.remaining)
                for _ in 0..<n {
                    let code = try r.count(limit: Int(Int32.max))
                    guard code < values.count else { throw r.failure("property code \(code) out of range") }
                    values[code] = try EventCodec.readValue(&r, self)
                }
                guard r.isAtEnd else { throw r.failure("trailing bytes") }
            } else {
                for (name, value) in try decodeRecord(raw, entityName: entity.name).values {
                    if let code = entity.propertiesByName[name]?.code { values[code] = value }
                }
            }
            return (sequence, values)
        } catch .malformed(let what) where what.hasPrefix(Self.unnamed) {
            throw .malformed(context() + what.dropFirst(Self.unnamed.count))
        }
    }

    /// `values` with the object's unordered to-many members filled in, as
    /// ``beforeImage(_:_:record:entity:)`` adds them.
    func addingMembers(_ txn: borrowing LMDBTransaction, _ key: ObjectKey, to values: [LogValue?], entity: ModelSchema.Entity) throws -> [LogValue?] {
        var values = values
        for index in entity.properties.indices where entity.properties[index].relationship == .unorderedToMany {
            let code = try relationshipCode(entity.properties[index].qualifiedName)
            let ids = try members(txn, of: key, relationship: code).map { (k) throws(LogError) in try id(k) }
            if !ids.isEmpty { values[index] = .references(ids.sorted()) }
        }
        return values
    }

    func writeRecord(_ txn: borrowing LMDBTransaction, _ key: ObjectKey, _ record: Record, entity: ModelSchema.Entity) throws {
        try txn.put(try encodeRecord(record, entity: entity), forKey: key.bytes, in: tables.state)
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
        try txn.put([UInt8](), forKey: Self.linkKey(target, relationship, source), in: tables.referrers)
        if member { try txn.put([UInt8](), forKey: Self.linkKey(source, relationship, target), in: tables.members) }
    }

    func unlink(_ txn: borrowing LMDBTransaction, _ source: ObjectKey, _ relationship: UInt16, _ target: ObjectKey, member: Bool) throws {
        try txn.delete(key: Self.linkKey(target, relationship, source), in: tables.referrers)
        if member { try txn.delete(key: Self.linkKey(source, relationship, target), in: tables.members) }
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
            let code = try indexCode(index.name)
            bytes.append(UInt8(code >> 8))
            bytes.append(UInt8(truncatingIfNeeded: code))
            var complete = true
            for property in index.properties {
                switch values[property] {
                case .attribute(let value):
                    complete = IndexKeyEncoding.append(value, to: &bytes) && complete
                case .reference(let id):
                    bytes.append(0x30)
                    var w = ByteWriter(capacity: 10)
                    try self.key(id).append(to: &w)
                    bytes.append(contentsOf: w.bytes)
                default:
                    IndexKeyEncoding.append(nil, to: &bytes)
                }
            }
            var w = ByteWriter(capacity: 10)
            key.append(to: &w)
            bytes.append(contentsOf: w.bytes)
            result.append((index, bytes, complete))
        }
        return result
    }

    func updateIndexes(
        _ txn: borrowing LMDBTransaction, _ key: ObjectKey, old: [String: LogValue]?, new: [String: LogValue]?,
        entity: ModelSchema.Entity
    ) throws {
        guard !entity.indexes.isEmpty else { return }
        let oldKeys = try old.map { try indexKeys(key, values: $0, entity: entity).map(\.1) } ?? []
        let newKeys = try new.map { try indexKeys(key, values: $0, entity: entity).map(\.1) } ?? []
        for k in oldKeys where !newKeys.contains(k) { try txn.delete(key: k, in: tables.index) }
        for k in newKeys where !oldKeys.contains(k) { try txn.put([UInt8](), forKey: k, in: tables.index) }
    }

    // MARK: - Applying changes

    /// Applies an insert: the record, its references and membership, its index entries.
    @discardableResult
    func applyInsert(
        _ txn: borrowing LMDBTransaction, _ key: ObjectKey, values: [String: LogValue], sequence: UInt64,
        entity: ModelSchema.Entity, isFresh: Bool = false
    ) throws -> [(ModelSchema.IndexDefinition, [UInt8], complete: Bool)] {
        // A primary key given out by this commit can't exist yet; only restores and replays probe.
        if !isFresh, try txn.containsKey(key.bytes, in: tables.state) {
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
        for (_, indexKey, _) in indexKeys { try txn.put([UInt8](), forKey: indexKey, in: tables.index) }
        try txn.put([UInt8](), forKey: Self.historyKey(key, sequence), in: tables.history)
        return indexKeys
    }

    /// Applies an update's property changes to the object's current record; returns its new values.
    @discardableResult
    func applyUpdate(
        _ txn: borrowing LMDBTransaction, _ key: ObjectKey, changes: [PropertyChange], sequence: UInt64,
        entity: ModelSchema.Entity
    ) throws -> [String: LogValue] {
        guard var record = try readRecord(txn, key, entityName: entity.name) else {
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
        record.version = sequence
        record.modelVersion = modelVersion
        try writeRecord(txn, key, record, entity: entity)
        try updateIndexes(txn, key, old: old, new: record.values, entity: entity)
        try txn.put([UInt8](), forKey: Self.historyKey(key, sequence), in: tables.history)
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
        try txn.delete(key: key.bytes, in: tables.state)
        try txn.put([UInt8](), forKey: Self.historyKey(key, sequence), in: tables.history)
    }

    /// The full before-image of a live object: its record values plus unordered members.
    func beforeImage(_ txn: borrowing LMDBTransaction, _ key: ObjectKey, record: Record, entity: ModelSchema.Entity) throws -> [String: LogValue] {
        var values = record.values
        for property in entity.properties where property.relationship == .unorderedToMany {
            let code = try relationshipCode(property.qualifiedName)
            let ids = try members(txn, of: key, relationship: code).map { (k) throws(LogError) in try id(k) }
            if !ids.isEmpty { values[property.name] = .references(ids.sorted()) }
        }
        return values
    }

    /// Applies a decoded event (replay). With `checkBeforeImages`, every before-image in the
    /// event must match the state it is applied to; a mismatch is reported, not applied.
    func apply(_ txn: borrowing LMDBTransaction, _ event: TransactionEvent, checkBeforeImages: Bool) throws {
        if case .reservation(let entity, let range) = event.kind {
            let code = try entityCode(entity)
            let counter = try txn.value(forKey: Self.counterKey(code), in: tables.counters)
                .flatMap { $0.withUnsafeBytes { readBigEndian($0) } } ?? 0
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
                    for case .value(let name, let before, _) in changes where (record.values[name] ?? .null) != before {
                        throw LogError.malformed(
                            "event \(event.sequence): the before-image of \(id).\(name) is \(before), but the replayed state holds \(record.values[name] ?? .null)")
                    }
                }
                try applyUpdate(txn, objectKey, changes: changes, sequence: event.sequence, entity: current)
            case .delete:
                try applyDelete(txn, objectKey, sequence: event.sequence, entity: current)
            }
            let counter = try txn.value(forKey: Self.counterKey(objectKey.entity), in: tables.counters)
                .flatMap { $0.withUnsafeBytes { readBigEndian($0) } } ?? 0
            if objectKey.primaryKey > counter {
                try txn.put(bigEndianBytes(objectKey.primaryKey), forKey: Self.counterKey(objectKey.entity), in: tables.counters)
            }
        }
    }

    static func counterKey(_ entity: UInt16) -> [UInt8] { [UInt8(entity >> 8), UInt8(truncatingIfNeeded: entity)] }
}
