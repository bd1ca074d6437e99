import Foundation
import StrataModel
import StrataStorage

// MARK: - Index and derived-attribute migration (spec 0004 §6.4, spec 0006 §24.6)

extension EventLog {
    /// At a writable open: when the opening model version defines an index (or a uniqueness
    /// constraint) the head transaction's version doesn't, every index of the opening
    /// version is rebuilt from the state table and a `migration` transaction records it.
    /// Objects written before an index existed have no entries in it otherwise, and a fetch
    /// planned on the index would miss them.
    ///
    /// Likewise, when it adds a derived attribute or changes a derivation, the attribute is
    /// computed for every stored object of its entity (and the derived attributes that read
    /// it follow), and the new values are the `migration` transaction's changes — as Core
    /// Data's migration computes a new derived attribute for the rows it moves.
    ///
    /// - Throws: ``LogError/uniquenessViolation(entity:properties:value:objects:)`` when a
    ///   uniqueness constraint the version adds is already broken by stored objects (or by
    ///   the derived values computed); ``LogError/derivation(_:)`` when a derived value
    ///   doesn't fit its type. Nothing is written then, and the open fails.
    func migrateIfNeeded() throws {
        guard !schema.indexes.isEmpty || schema.derivations != nil || catalog.modelVersions.count > 1 else { return }
        let writer = TableWriter(tables: tables, catalog: catalog, schema: schema, modelVersion: modelVersion, shapes: entityShapes)
        // The head transaction's model version is read first (it may be in a segment); the
        // write then goes ahead only if the head is still that transaction.
        for _ in 0..<8 {
            // Bookkeeping or a head event that can't be read is damage for verify to report,
            // not a reason to refuse the open: the migration waits until they read.
            let found = try? read { reader -> (head: UInt64, compacted: UInt64)? in
                let head = try reader.head
                guard head > 0, head > (try reader.purgedThrough) else { return nil }
                return (head, try reader.compactedThrough)
            }
            guard let (head, compacted) = found ?? nil else { return }
            // The model version is read from the raw event's bytes, without decoding it (that
            // would load its model); a compacted head is decoded.
            var previous: Int?
            if head > compacted {
                try? forEachRawEvent(from: head, through: head) { _, bytes in
                    previous = bytes.withUnsafeBytes { EventCodec.modelVersion($0) }
                }
            }
            if previous == nil { previous = try? read { try $0.event(head).modelVersion } }
            guard let previous, previous != modelVersion else { return }
            let previousSchema = try catalog.schema(forModelVersion: previous)
            let added = Set(schema.indexes).subtracting(Set(previousSchema.indexes))
            // Derived attributes the version adds, or whose derivation (or type) it changes.
            let known = Set(previousSchema.derivations?.plans ?? [])
            let recomputing = Set((schema.derivations?.plans ?? []).filter { !known.contains($0) }.map(\.qualifiedName))
            // Attributes whose stored values the version fills or converts (§4.4).
            let values = try valueMigrationCandidates()
            guard !added.isEmpty || !recomputing.isEmpty || !values.isEmpty else { return }
            let timestamp = EventCodec.date(microseconds: EventCodec.microsecondsNow())
            // nil: another writer moved the head first; look again.
            let sequence = try environment.write { txn -> UInt64? in
                guard try nextSequence(txn) - 1 == head else { return nil }
                var groups: [ChangeGroup] = []
                if !values.isEmpty {
                    let changes = try writer.migrateStoredValues(values, txn, sequence: head + 1)
                    if !changes.isEmpty { groups.append(ChangeGroup(changes: changes)) }
                }
                // Nothing to write (0): the next open looks again, as the head's version still differs.
                if groups.isEmpty, added.isEmpty, recomputing.isEmpty { return 0 }
                if let derivations = schema.derivations, !recomputing.isEmpty {
                    // Unique indexes are checked by the rebuild below, over every object.
                    let changes = try writer.applyDerivations(
                        derivations, after: [], txn, sequence: head + 1, timestamp: timestamp, recomputing: recomputing,
                        recordUniqueKeys: { _, _, _ in })
                    if !changes.isEmpty { groups.append(ChangeGroup(changes: changes)) }
                }
                try writer.rebuildIndexes(txn)
                let event = TransactionEvent(
                    sequence: head + 1, timestamp: timestamp, author: nil, contextName: nil,
                    processID: ProcessInfo.processInfo.processIdentifier, kind: .migration, modelVersion: modelVersion, groups: groups)
                try writeEventChunks(
                    txn, sequence: head + 1, bytes: try EventCodec.encode(event, catalog: writer), author: event.author,
                    contextName: event.contextName)
                try txn.put(bigEndianBytes(head + 1), forKey: MetaKey.head, in: tables.meta)
                return head + 1
            }
            if let sequence {
                if sequence > 0 { storeMonitor.publish(sequence) }
                return
            }
        }
        throw LogError.invalidOperation("the store at \(path) kept changing while it was being migrated to its new model version; open it again")
    }
}

extension TableWriter {
    /// Rebuilds every index of the schema from the state table (a `migration` transaction,
    /// at commit and in replay): each index's entries are cleared, then every live object of
    /// its entity and sub-entities gets its key. Two objects with equal values in a unique
    /// index (none of them nil) refuse it with ``LogError/uniquenessViolation(entity:properties:value:objects:)``.
    func rebuildIndexes(_ txn: borrowing LMDBTransaction) throws {
        for index in schema.indexes {
            var prefix: [UInt8] = []
            Self.appendIndexCode(try indexCode(index.name), to: &prefix)
            var stale: [[UInt8]] = []
            try txn.forEach(in: tables.index, range: .prefix(prefix)) { key, _ in
                stale.append(key.withUnsafeBytes { Array($0) })
                return .next
            }
            for key in stale { try txn.delete(key: key, in: tables.index) }

            // Each live object's key, and whether it may clash (no nil value in it).
            var entries: [(key: [UInt8], complete: Bool, checked: Bool)] = []
            for name in schema.entities[index.entity]?.selfAndSubentities ?? [] {
                guard let entity = schema.entities[name] else { continue }
                let code = try entityCode(name)
                var records: [(ObjectKey, [UInt8])] = []
                try txn.forEach(in: tables.state, range: .prefix([UInt8(code >> 8), UInt8(truncatingIfNeeded: code)])) { key, value in
                    guard let objectKey = key.withUnsafeBytes({ ObjectKey($0) }) else { return .next }
                    records.append((objectKey, value.withUnsafeBytes { Array($0) }))
                    return .next
                }
                for (objectKey, bytes) in records {
                    let record = try bytes.withUnsafeBytes { raw throws(LogError) in
                        try decodeRecord(raw, entityName: name, context: "state \(name)/p\(objectKey.primaryKey)")
                    }
                    let hasNil = index.properties.contains { (record.values[$0] ?? .null) == .null }
                    for (definition, key, complete) in try indexKeys(objectKey, values: record.values, entity: entity) where definition.name == index.name {
                        entries.append((key, complete, index.isUnique && !hasNil))
                    }
                }
            }
            entries.sort { $0.key.lexicographicallyPrecedes($1.key) }
            if index.isUnique { try checkRebuiltUniqueness(txn, index, entries) }
            for entry in entries { try txn.put(Self.empty, forKey: entry.key, in: tables.index) }
        }
    }

    /// Refuses sorted entries of a unique index in which two objects hold equal values.
    private func checkRebuiltUniqueness(
        _ txn: borrowing LMDBTransaction, _ index: ModelSchema.IndexDefinition, _ entries: [(key: [UInt8], complete: Bool, checked: Bool)]
    ) throws {
        var start = 0
        while start < entries.count {
            // A run of keys with the same values (the key without its object key).
            let values = entries[start].key.dropLast(ObjectKey.byteCount)
            var end = start + 1
            while end < entries.count, entries[end].key.dropLast(ObjectKey.byteCount) == values { end += 1 }
            let run = entries[start..<end].filter(\.checked)
            if run.count > 1 {
                var objects: [(StoredObjectID, Record)] = []
                for entry in run {
                    guard let key = entry.key.withUnsafeBytes({ ObjectKey($0, at: $0.count - ObjectKey.byteCount) }) else { continue }
                    let id = try self.id(key)
                    guard let record = try readRecord(txn, key, entityName: id.entity) else { continue }
                    objects.append((id, record))
                }
                // Cut keys can be equal for different values: compare the values in full.
                for (position, (id, record)) in objects.enumerated() {
                    let same = objects[(position + 1)...].filter { other in
                        index.properties.allSatisfy { record.values[$0] == other.1.values[$0] }
                    }
                    guard !same.isEmpty else { continue }
                    let value = index.properties.map { (record.values[$0] ?? .null).description }.joined(separator: ", ")
                    throw LogError.uniquenessViolation(
                        entity: index.entity, properties: index.properties, value: value, objects: ([id] + same.map(\.0)).map(\.description))
                }
            }
            start = end
        }
    }
}

// MARK: - Stored values a later model version fills or converts (spec 0004 §4.4)

extension EventLog {
    /// The attributes of the opening model whose stored values a migration may fill or
    /// convert, by entity: an ordinary stored attribute that a stored model version lacks
    /// (when it has a default value or is mandatory), has with a value of another kind, or has
    /// optional where it is mandatory now. Empty when no other version is stored.
    func valueMigrationCandidates() throws -> [String: [AttributeDescription]] {
        let others = try catalog.modelVersions.filter { $0 != modelVersion }.map { try catalog.schema(forModelVersion: $0).model }
        guard !others.isEmpty else { return [:] }
        var candidates: [String: [AttributeDescription]] = [:]
        for entity in model.entities {
            let attributes = entity.allAttributes.filter { attribute in
                guard attribute.isPersisted, !attribute.isDerived else { return false }
                return others.contains { other in
                    guard let before = other.entity(named: entity.name) else { return false }
                    guard let was = before.attributesByName[attribute.name], was.isPersisted else {
                        return attribute.defaultValue != nil || !attribute.isOptional
                    }
                    return EventCodec.ValueKind(was.attributeType) != EventCodec.ValueKind(attribute.attributeType)
                        || (was.isOptional && !attribute.isOptional)
                }
            }
            if !attributes.isEmpty { candidates[entity.name] = attributes }
        }
        return candidates
    }
}

extension TableWriter {
    /// Fills and converts the stored values of `candidates` (``EventLog/valueMigrationCandidates()``)
    /// for every live object of their entities, inside a `migration` transaction at `sequence`;
    /// returns the changes it made, one update per object changed.
    ///
    /// For each object and attribute: a nil value of a mandatory attribute takes its default
    /// value, as does a nil value of an attribute the object's record version didn't have; a
    /// value of another kind is converted to the attribute's type when that loses nothing
    /// (``AttributeValue/coerced(to:)``).
    ///
    /// - Throws: ``LogError/migration(_:)`` naming the objects whose values can't be taken
    ///   over: a mandatory attribute without a default value, or a value that doesn't convert.
    func migrateStoredValues(
        _ candidates: [String: [AttributeDescription]], _ txn: borrowing LMDBTransaction, sequence: UInt64
    ) throws -> [Change] {
        var changes: [Change] = []
        var problems: [String] = []
        var problemCount = 0
        func problem(_ text: @autoclosure () -> String) {
            problemCount += 1
            if problems.count < 5 { problems.append(text()) }
        }
        for (entityName, attributes) in candidates.sorted(by: { $0.key < $1.key }) {
            guard let entity = schema.entities[entityName], let code = try? entityCode(entityName) else { continue }
            var records: [(ObjectKey, [UInt8])] = []
            try txn.forEach(in: tables.state, range: .prefix([UInt8(code >> 8), UInt8(truncatingIfNeeded: code)])) { key, value in
                guard let objectKey = key.withUnsafeBytes({ ObjectKey($0) }) else { return .next }
                records.append((objectKey, value.withUnsafeBytes { Array($0) }))
                return .next
            }
            for (key, bytes) in records {
                let id = StoredObjectID(entity: entityName, primaryKey: key.primaryKey)
                let record = try bytes.withUnsafeBytes { raw throws(LogError) in
                    try decodeRecord(raw, entityName: entityName, context: "state \(id)")
                }
                let recorded = try? schema(forModelVersion: record.modelVersion).model.entity(named: entityName)
                var propertyChanges: [PropertyChange] = []
                for attribute in attributes {
                    guard let property = entity.propertiesByName[attribute.name] else { continue }
                    let kind = entity.valueKinds[property.code]
                    let described = "\(entityName).\(attribute.name)"
                    let stored = record.values[attribute.name] ?? .null
                    switch stored {
                    case .null:
                        let had = recorded?.attributesByName[attribute.name]?.isPersisted == true
                        guard !attribute.isOptional || !had else { continue }
                        guard let fallback = attribute.defaultValue.map({ LogValue.attribute($0.coerced(to: attribute.attributeType)) }) else {
                            if !attribute.isOptional {
                                problem("\(described) is mandatory and has no default value, but \(id) has no value for it")
                            }
                            continue
                        }
                        guard EventCodec.fits(fallback, kind) else {
                            problem("\(described)'s default value doesn't fit its type \(attribute.attributeType.name)")
                            continue
                        }
                        propertyChanges.append(.value(property: attribute.name, before: .null, after: fallback))
                    case .attribute(let value):
                        guard !EventCodec.fits(stored, kind) else { continue }
                        let converted = LogValue.attribute(value.coerced(to: attribute.attributeType))
                        guard EventCodec.fits(converted, kind) else {
                            problem("\(id) has \(described) = \(value.canonicalJSON) (\(value.typeName)), which doesn't convert to \(attribute.attributeType.name) without loss")
                            continue
                        }
                        propertyChanges.append(.value(property: attribute.name, before: stored, after: converted))
                    case .reference, .references:
                        problem("\(id) has a relationship's value under \(described), which the model version makes an attribute")
                    }
                }
                guard !propertyChanges.isEmpty, problemCount == 0 else { continue }
                propertyChanges.sort { $0.property < $1.property }
                _ = try applyUpdate(txn, key, changes: propertyChanges, sequence: sequence, entity: entity, current: record)
                changes.append(.update(id, changes: propertyChanges))
            }
        }
        guard problemCount == 0 else {
            let more = problemCount > problems.count ? "; and \(problemCount - problems.count) more" : ""
            throw LogError.migration(
                "the stored values can't be taken over by model version \(modelVersion): \(problems.joined(separator: "; "))\(more). Nothing was written; give the attribute a default value, keep it optional, or keep its type")
        }
        return changes
    }
}
