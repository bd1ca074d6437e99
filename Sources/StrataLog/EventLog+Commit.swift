import Foundation
import StrataModel
import StrataStorage

extension EventLog {
    /// Appends `draft` as one transaction: the event, the state, the indexes and the history
    /// change together in one LMDB write transaction, or not at all.
    ///
    /// Temporary objects get permanent IDs here, in the order the draft inserts them. The
    /// log computes every before-image from the state at commit time.
    ///
    /// - Throws: ``LogError`` — an unknown entity or property, a wrong value type, a change
    ///   to a missing object, a reference to a missing object (including one left dangling
    ///   by a delete), a uniqueness violation — and then nothing is written.
    @discardableResult
    public func commit(_ draft: TransactionDraft) throws -> CommitResult {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only") }
        let writer = TableWriter(tables: tables, catalog: catalog, schema: schema, modelVersion: modelVersion)
        // Stored with microsecond precision: round now so the returned event equals the stored one.
        let timestamp = EventCodec.date(microseconds: EventCodec.microseconds(draft.timestamp ?? Date()))
        let result = try environment.write { txn in
            try commit(draft, timestamp: timestamp, writer: writer, txn)
        }
        storeMonitor.publish(result.event.sequence)
        return result
    }

    private func commit(
        _ draft: TransactionDraft, timestamp: Date, writer: TableWriter, _ txn: borrowing LMDBTransaction
    ) throws -> CommitResult {
        let head = try txn.value(forKey: MetaKey.head, in: tables.meta).flatMap { $0.withUnsafeBytes { readBigEndian($0) } } ?? 0
        let sequence = head + 1

        // Optimistic locking, inside this write transaction: no other writer can slip in.
        for (id, expected) in draft.expectedVersions.sorted(by: { $0.key < $1.key }) {
            let found = try writer.readRecord(txn, try writer.key(id), entityName: id.entity)?.version
            if found != expected { throw LogError.versionMismatch(object: id.description, expected: expected, found: found) }
        }

        // Pass 1: permanent IDs for every inserted object, in draft order.
        var counters: [UInt16: UInt64] = [:]
        var permanent: [DraftObjectID: StoredObjectID] = [:]
        for group in draft.groups {
            for case .insert(let object, _) in group.operations {
                if case .stored(let id) = object {
                    // Restoring a deleted object under its own ID (undo of a delete): the ID
                    // must have been given out before, and the object must not exist now.
                    let code = try writer.entityCode(id.entity)
                    let last = try counters[code] ?? (try txn.value(forKey: TableWriter.counterKey(code), in: tables.counters)
                        .flatMap { $0.withUnsafeBytes { readBigEndian($0) } } ?? 0)
                    guard id.primaryKey >= 1, id.primaryKey <= last else {
                        throw LogError.invalidOperation("insert of \(id): that ID was never given out, so it can't be restored")
                    }
                    continue
                }
                guard permanent[object] == nil else { throw LogError.objectExists(object.description) }
                let entity = try schema.entity(object.entity)
                if entity.isAbstract {
                    throw LogError.invalidOperation("entity \(entity.name) is abstract; insert one of its sub-entities")
                }
                let code = try writer.entityCode(entity.name)
                let last: UInt64
                if let known = counters[code] {
                    last = known
                } else {
                    last = try txn.value(forKey: TableWriter.counterKey(code), in: tables.counters)
                        .flatMap { $0.withUnsafeBytes { readBigEndian($0) } } ?? 0
                }
                counters[code] = last + 1
                permanent[object] = StoredObjectID(entity: entity.name, primaryKey: last + 1)
            }
        }

        func resolve(_ object: DraftObjectID) throws -> StoredObjectID {
            switch object {
            case .stored(let id): return id
            case .temporary:
                guard let id = permanent[object] else {
                    throw LogError.objectNotFound("\(object) (a temporary object this transaction doesn't insert)")
                }
                return id
            }
        }

        var referenced: [ObjectKey: (from: StoredObjectID, property: String, to: StoredObjectID)] = [:]
        var deleted: [ObjectKey: StoredObjectID] = [:]
        var touched: [ObjectKey: String] = [:]
        /// The values each object with a unique index has now, kept so the uniqueness check
        /// needn't read the records back.
        var latestValues: [ObjectKey: [String: LogValue]] = [:]

        /// Checks a draft value against the property and converts it to a log value.
        func convert(_ value: DraftValue, _ property: ModelSchema.Property, of entity: ModelSchema.Entity, from source: StoredObjectID) throws -> LogValue {
            func mismatch(_ got: String) -> LogError {
                let expected = property.attributeType.map(\.name)
                    ?? (property.isToMany ? "a to-many relationship to \(property.destination ?? "?")" : "a reference to \(property.destination ?? "?")")
                return .typeMismatch(entity: entity.name, property: property.name, expected: expected, got: got)
            }
            func target(_ object: DraftObjectID) throws -> StoredObjectID {
                let id = try resolve(object)
                if let destination = property.destination, let destinationEntity = schema.entities[destination],
                    !destinationEntity.selfAndSubentities.contains(id.entity)
                {
                    throw mismatch("a reference to \(id.entity)")
                }
                referenced[try writer.key(id)] = (source, property.name, id)
                return id
            }
            switch value {
            case .null: return .null
            case .attribute(let attribute):
                guard let type = property.attributeType else { throw mismatch(attribute.typeName) }
                guard attribute.matches(type) else { throw mismatch(attribute.typeName) }
                return .attribute(attribute)
            case .reference(let object):
                guard property.relationship != nil, !property.isToMany else { throw mismatch("a single reference") }
                return .reference(try target(object))
            case .references(let objects):
                guard property.relationship != nil, property.isToMany else { throw mismatch("a list of references") }
                var ids = try objects.map(target)
                if property.relationship == .unorderedToMany { ids = Array(Set(ids)).sorted() }
                return .references(ids)
            }
        }

        func storedProperty(_ name: String, of entity: ModelSchema.Entity) throws -> ModelSchema.Property {
            guard let property = entity.propertiesByName[name] else {
                throw LogError.unknownProperty(entity: entity.name, property: name)
            }
            if case .derived(let inverseEntity, let inverse) = property.relationship {
                throw LogError.derivedRelationshipSide(
                    entity: entity.name, property: name, recordedSide: "\(inverseEntity).\(inverse)")
            }
            return property
        }

        // Pass 2: apply each operation, recording the change with its before-image.
        var groups: [ChangeGroup] = []
        for group in draft.groups where !group.operations.isEmpty {
            var changes: [Change] = []
            for operation in group.operations {
                switch operation {
                case .insert(let object, let values):
                    let id = try resolve(object)
                    let entity = try schema.entity(id.entity)
                    var converted: [String: LogValue] = [:]
                    for (name, value) in values {
                        let property = try storedProperty(name, of: entity)
                        let logValue = try convert(value, property, of: entity, from: id)
                        if case .null = logValue { continue }
                        if case .references(let ids) = logValue, ids.isEmpty { continue }
                        converted[name] = logValue
                    }
                    let key = try writer.key(id)
                    let isFresh: Bool
                    if case .temporary = object { isFresh = true } else { isFresh = false }
                    try writer.applyInsert(txn, key, values: converted, sequence: sequence, entity: entity, isFresh: isFresh)
                    touched[key] = id.entity
                    if entity.hasUniqueIndex { latestValues[key] = converted }
                    deleted[key] = nil
                    changes.append(.insert(id, values: converted))

                case .update(let object, let values):
                    let id = try resolve(object)
                    let entity = try schema.entity(id.entity)
                    let key = try writer.key(id)
                    guard let record = try writer.readRecord(txn, key, entityName: id.entity) else {
                        throw LogError.objectNotFound(id.description)
                    }
                    var propertyChanges: [PropertyChange] = []
                    for name in values.keys.sorted() {
                        guard let value = values[name] else { continue }
                        let property = try storedProperty(name, of: entity)
                        let after = try convert(value, property, of: entity, from: id)
                        if property.relationship == .unorderedToMany {
                            let code = try writer.relationshipCode(property.qualifiedName)
                            let current = Set(try writer.members(txn, of: key, relationship: code))
                            var wanted: Set<ObjectKey> = []
                            if case .references(let ids) = after { wanted = Set(try ids.map { try writer.key($0) }) }
                            let added = try wanted.subtracting(current).sorted().map { try writer.id($0) }
                            let removed = try current.subtracting(wanted).sorted().map { try writer.id($0) }
                            if !added.isEmpty || !removed.isEmpty {
                                propertyChanges.append(.membership(property: name, added: added, removed: removed))
                            }
                        } else {
                            var normalized = after
                            if case .references(let ids) = after, ids.isEmpty { normalized = .null }
                            let before = record.values[name] ?? .null
                            if before != normalized {
                                propertyChanges.append(.value(property: name, before: before, after: normalized))
                            }
                        }
                    }
                    guard !propertyChanges.isEmpty else { continue }
                    let updated = try writer.applyUpdate(txn, key, changes: propertyChanges, sequence: sequence, entity: entity)
                    touched[key] = id.entity
                    if entity.hasUniqueIndex { latestValues[key] = updated }
                    changes.append(.update(id, changes: propertyChanges))

                case .membership(let object, let name, let addedObjects, let removedObjects):
                    let id = try resolve(object)
                    let entity = try schema.entity(id.entity)
                    let property = try storedProperty(name, of: entity)
                    guard property.relationship == .unorderedToMany else {
                        throw LogError.typeMismatch(
                            entity: entity.name, property: name, expected: "an unordered to-many relationship",
                            got: "a membership change")
                    }
                    let key = try writer.key(id)
                    guard try txn.containsKey(key.bytes, in: tables.state) else { throw LogError.objectNotFound(id.description) }
                    let code = try writer.relationshipCode(property.qualifiedName)
                    let current = Set(try writer.members(txn, of: key, relationship: code))
                    var added: [StoredObjectID] = []
                    var removed: [StoredObjectID] = []
                    if case .references(let ids) = try convert(.references(addedObjects), property, of: entity, from: id) {
                        added = try ids.filter { !current.contains(try writer.key($0)) }
                    }
                    if case .references(let ids) = try convert(.references(removedObjects), property, of: entity, from: id) {
                        removed = try ids.filter { current.contains(try writer.key($0)) && !added.contains($0) }
                    }
                    guard !added.isEmpty || !removed.isEmpty else { continue }
                    let change = PropertyChange.membership(property: name, added: added, removed: removed)
                    let updated = try writer.applyUpdate(txn, key, changes: [change], sequence: sequence, entity: entity)
                    touched[key] = id.entity
                    if entity.hasUniqueIndex { latestValues[key] = updated }
                    changes.append(.update(id, changes: [change]))

                case .delete(let object):
                    let id = try resolve(object)
                    let entity = try schema.entity(id.entity)
                    let key = try writer.key(id)
                    guard let record = try writer.readRecord(txn, key, entityName: id.entity) else {
                        throw LogError.objectNotFound(id.description)
                    }
                    let before = try writer.beforeImage(txn, key, record: record, entity: entity)
                    try writer.applyDelete(txn, key, sequence: sequence, entity: entity)
                    deleted[key] = id
                    touched[key] = nil
                    latestValues[key] = nil
                    changes.append(.delete(id, before: before))
                }
            }
            // Kept even when every change was a no-op, so a draft's groups (those with
            // operations) map one-to-one onto the event's: contexts rely on it for undo.
            groups.append(ChangeGroup(actionName: group.actionName, changes: changes, origin: group.origin))
        }

        // Deferred checks, on the state as the transaction leaves it: an object that doesn't
        // exist must have no references left pointing at it — whether they were written by
        // this draft (a reference to a missing object) or left by a delete (dangling).
        var candidates: [ObjectKey: StoredObjectID] = deleted
        for (key, origin) in referenced where candidates[key] == nil { candidates[key] = origin.to }
        for (key, id) in candidates.sorted(by: { $0.key < $1.key }) where !(try txn.containsKey(key.bytes, in: tables.state)) {
            try txn.forEach(in: tables.referrers, range: .prefix(key.bytes)) { entry, _ in
                let (relationship, source) = entry.withUnsafeBytes { raw in
                    (readBigEndian(raw, at: 10, count: 2).map { UInt16($0) }, ObjectKey(raw, at: 12))
                }
                let name = relationship.flatMap { catalog.relationshipName($0) } ?? "?"
                let sourceName = source.flatMap { try? writer.id($0).description } ?? "?"
                throw LogError.missingReference(from: sourceName, property: String(name.split(separator: ".").last ?? ""), to: id.description)
            }
        }
        try checkUniqueness(txn, latestValues: latestValues, touched: touched, writer: writer)

        // The event itself, in chunks small enough to stay in B-tree pages.
        let event = TransactionEvent(
            sequence: sequence, timestamp: timestamp, author: draft.author, contextName: draft.contextName,
            processID: draft.processID, kind: draft.kind, modelVersion: modelVersion, groups: groups)
        let bytes = try EventCodec.encode(event, catalog: writer)
        try writeEventChunks(txn, sequence: sequence, bytes: bytes)
        for (code, last) in counters {
            try txn.put(bigEndianBytes(last), forKey: TableWriter.counterKey(code), in: tables.counters)
        }
        try txn.put(bigEndianBytes(sequence), forKey: MetaKey.head, in: tables.meta)
        if configuration.checkpointInterval > 0 && sequence % configuration.checkpointInterval == 0 {
            try writeCheckpoint(txn, at: sequence)
        }
        return CommitResult(event: event, permanentIDs: permanent)
    }

    /// Gives out the next `count` primary keys of `entity` ahead of their objects' insert,
    /// recorded as a transaction of kind ``TransactionKind/reservation(entity:range:)`` so replay
    /// and `verify` reproduce the counter (Core Data's `obtainPermanentIDs(for:)`). Insert the
    /// objects later with ``TransactionDraft/restore(_:values:)``-style stored IDs.
    public func reservePrimaryKeys(of entity: String, count: Int, author: String? = nil, contextName: String? = nil)
        throws -> ClosedRange<UInt64>
    {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only") }
        guard count >= 1 else { throw LogError.invalidOperation("reserve at least one primary key, not \(count)") }
        let described = try schema.entity(entity)
        guard !described.isAbstract else { throw LogError.invalidOperation("entity \(entity) is abstract; it has no objects of its own") }
        let writer = TableWriter(tables: tables, catalog: catalog, schema: schema, modelVersion: modelVersion)
        let timestamp = EventCodec.date(microseconds: EventCodec.microseconds(Date()))
        let (range, sequence) = try environment.write { txn in
            let head = try number(MetaKey.head, txn)
            let code = try writer.entityCode(entity)
            let last = try txn.value(forKey: TableWriter.counterKey(code), in: tables.counters)
                .flatMap { $0.withUnsafeBytes { readBigEndian($0) } } ?? 0
            let range = (last + 1)...(last + UInt64(count))
            let event = TransactionEvent(
                sequence: head + 1, timestamp: timestamp, author: author, contextName: contextName,
                processID: ProcessInfo.processInfo.processIdentifier, kind: .reservation(entity: entity, range: range),
                modelVersion: modelVersion, groups: [])
            try writeEventChunks(txn, sequence: head + 1, bytes: try EventCodec.encode(event, catalog: writer))
            try txn.put(bigEndianBytes(range.upperBound), forKey: TableWriter.counterKey(code), in: tables.counters)
            try txn.put(bigEndianBytes(head + 1), forKey: MetaKey.head, in: tables.meta)
            return (range, head + 1)
        }
        storeMonitor.publish(sequence)
        return range
    }

    func writeEventChunks(_ txn: borrowing LMDBTransaction, sequence: UInt64, bytes: [UInt8]) throws {
        let size = max(configuration.chunkSize, 64)
        var chunk: UInt32 = 0
        var offset = 0
        repeat {
            let end = min(offset + size, bytes.count)
            var key = bigEndianBytes(sequence)
            key.append(contentsOf: bigEndianBytes(chunk))
            try txn.put(bytes[offset..<end], forKey: key, in: tables.events, flags: .append)
            offset = end
            chunk += 1
        } while offset < bytes.count
    }

    /// Refuses the commit if any touched object now shares a unique index value with another.
    private func checkUniqueness(
        _ txn: borrowing LMDBTransaction, latestValues: [ObjectKey: [String: LogValue]], touched: [ObjectKey: String],
        writer: TableWriter
    ) throws {
        for (key, values) in latestValues {
            guard let entityName = touched[key], let entity = schema.entities[entityName] else { continue }
            let record = Record(modelVersion: modelVersion, version: 0, values: values)
            for (index, indexKey, complete) in try writer.indexKeys(key, values: record.values, entity: entity) where index.isUnique {
                // A constraint with a missing value doesn't constrain (as in SQL).
                if index.properties.contains(where: { (record.values[$0] ?? .null) == .null }) { continue }
                let prefix = Array(indexKey.dropLast(ObjectKey.byteCount))
                var others: [ObjectKey] = []
                try txn.forEach(in: tables.index, range: .prefix(prefix)) { entry, _ in
                    if let other = entry.withUnsafeBytes({ ObjectKey($0, at: $0.count - ObjectKey.byteCount) }), other != key {
                        others.append(other)
                    }
                    return .next
                }
                var clashing: [StoredObjectID] = []
                for other in others {
                    let otherID = try writer.id(other)
                    if !complete {
                        // The key was cut: compare the full values.
                        guard let otherRecord = try writer.readRecord(txn, other, entityName: otherID.entity),
                            index.properties.allSatisfy({ otherRecord.values[$0] == record.values[$0] })
                        else { continue }
                    }
                    clashing.append(otherID)
                }
                if !clashing.isEmpty {
                    let value = index.properties.map { (record.values[$0] ?? .null).description }.joined(separator: ", ")
                    throw LogError.uniquenessViolation(
                        entity: index.entity, properties: index.properties, value: value,
                        objects: ([try writer.id(key)] + clashing).map(\.description))
                }
            }
        }
    }
}
