import Foundation
import StrataModel
import StrataStorage
import Synchronization

// MARK: - Migration to the opening model version (spec 0004 §4.3–4.6, spec 0006 §24.6)

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
    /// And as Core Data's lightweight migration carries rows over, the stored values are
    /// taken over by the opening version, in the same LMDB write transaction: values stored
    /// under names it doesn't store them by (removed, renamed or re-sided properties, renamed
    /// entities' objects) are taken out in their versions' terms (§4.5–4.6), attributes it
    /// adds or makes mandatory are filled with their defaults and retyped values converted
    /// (§4.4), and what was taken out is put back under the new names.
    ///
    /// - Throws: ``LogError/uniquenessViolation(entity:properties:value:objects:)`` when a
    ///   uniqueness constraint the version adds is already broken by stored objects (or by
    ///   the derived values computed); ``LogError/derivation(_:)`` when a derived value
    ///   doesn't fit its type; ``LogError/migration(_:)`` when a stored value can't be taken
    ///   over. Nothing is written then, and the open fails.
    ///
    /// `refusing`: a migration that would write anything is refused with
    /// ``LogError/modelMismatch(_:)`` instead (automatic migration off, and the version is
    /// still marked: its own migration was refused, or a crash came before it committed).
    ///
    /// `unmarking`: a `meta` key (the version's refused-migration mark) deleted in the
    /// migration's own transaction, so no moment has the migration committed and the version
    /// still marked (spec 0004 §4.3).
    func migrateIfNeeded(refusing: Bool = false, unmarking: [UInt8]? = nil) throws {
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
            // An earlier model that wrote since this version's last migration (and a writer of
            // this version after it, whose event is the head now) left records to migrate too
            // (before, they stayed in the earlier version's terms until another version's open).
            let earlierWrote = ((try? environment.read { txn in try txn.value(forKey: MetaKey.earlierModelWrote, in: tables.meta) }) ?? nil) != nil
            guard let previous, previous != modelVersion || earlierWrote else { return }
            let previousSchema = try catalog.schema(forModelVersion: previous)
            try refuseObjectsOfAbstractEntities(writer)
            // Indexes the head's version lacks — or has over other entities: an entity of both
            // versions that this one moves into or out of the index's entity's hierarchy has
            // its objects added to it or taken out of it (before, they stayed out of the
            // parent's index, or in it, and fetches of the parent through it missed them or
            // found them). A sub-entity new to the version has no objects to add.
            let added = Set(schema.indexes.filter { index in
                guard previousSchema.indexes.contains(index) else { return true }
                let before = Set(previousSchema.entities[index.entity]?.selfAndSubentities ?? [])
                let now = Set(schema.entities[index.entity]?.selfAndSubentities ?? [])
                return before.symmetricDifference(now).contains { previousSchema.entities[$0] != nil && schema.entities[$0] != nil }
            })
            // Entities it renames (§4.6) — one each: a version new or refused until now that
            // names an earlier entity or property from two of its own is refused.
            if unmarking != nil { try refuseAmbiguousRenames() }
            let renamedEntities = try renamedEntities()
            // Derived attributes the version adds, or whose derivation (or type) it changes —
            // but a now() attribute the head's version had (under its entity's or its own
            // earlier name) keeps its values: a migration moves objects, it doesn't save them.
            let known = Set(previousSchema.derivations?.plans ?? [])
            let previousNow = known.filter(\.isNow)
            let recomputing = Set(
                (schema.derivations?.plans ?? []).filter { plan in
                    guard !known.contains(plan) else { return false }
                    guard plan.isNow else { return true }
                    let identifier = model.entity(named: plan.entity)?.attributesByName[plan.attribute]?.renamingIdentifier
                    return !previousNow.contains { old in
                        (old.entity == plan.entity || renamedEntities[old.entity] == plan.entity)
                            && (old.attribute == plan.attribute || old.attribute == identifier)
                    }
                }.map(\.qualifiedName))
            // Attributes whose stored values the version fills or converts (§4.4).
            let values = try valueMigrationCandidates()
            // Values stored under names the version doesn't store them by (§4.5).
            let retired = try retiredPropertyNames(renamed: renamedEntities)
            let removedEntities = try removedEntities(renamed: renamedEntities)
            guard !added.isEmpty || !recomputing.isEmpty || !values.isEmpty || !retired.isEmpty || !renamedEntities.isEmpty || !removedEntities.isEmpty
            else { return }
            if refusing {
                throw LogError.modelMismatch(
                    "the store at \(path) hasn't been migrated to model version \(modelVersion) (its migration was refused, or didn't finish, when the version was first opened); migrating the store automatically is turned off, so it isn't opened (nothing was written)")
            }
            let timestamp = EventCodec.date(microseconds: EventCodec.microsecondsNow())
            /// Relationships made to lead to another entity, whose values the put-back dropped.
            var drops: [MigrationDrop] = []
            // nil: another writer moved the head first; look again.
            let sequence = try environment.write { txn -> UInt64? in
                guard try nextSequence(txn) - 1 == head else { return nil }
                // A version still marked may have been taken back by another open of it whose
                // migration was refused meanwhile (§4.3): nothing is written in its terms then.
                if unmarking != nil { try requireStoredVersion(txn) }
                // This migration takes over every earlier version's records; one by a version
                // that isn't the newest leaves them for the newest's next open.
                if try newestStoredModelVersion(txn) > modelVersion {
                    try txn.put([1], forKey: MetaKey.earlierModelWrote, in: tables.meta)
                } else {
                    _ = try txn.delete(key: MetaKey.earlierModelWrote, in: tables.meta)
                }
                var sequence = head + 1
                var groups: [ChangeGroup] = []
                // Values stored under retired names are taken out first (in their versions'
                // terms); then each object is written once in this version: its fills and
                // conversions with the values put back under the new names (converted as
                // they go), so every record written holds values of this version's types.
                var putBack = PutBack(values: [:], additions: [:])
                if !retired.isEmpty || !renamedEntities.isEmpty || !removedEntities.isEmpty {
                    // References to a renamed entity's objects name them by their new IDs;
                    // those to a removed entity's objects go.
                    let moves = try movedObjectIDs(renamedEntities, txn)
                    let taken = try takeOutRetiredValues(retired, txn, sequence: &sequence, timestamp: timestamp)
                        .map { $0.movingObjects(moves, removing: removedEntities) }
                    let entities = try takeOutRenamedEntities(
                        renamedEntities, moves: moves, removing: removedEntities, txn, sequence: &sequence, timestamp: timestamp)
                    // A relationship narrowed to a sub-entity of its destination keeps the
                    // references that fit; one that doesn't refuses a new version's open
                    // unless removing is allowed (spec 0004 §4.5).
                    putBack = try writer.planPutBack(
                        taken + entities.taken, inserting: entities.inserting, renamed: renamedEntities,
                        refusingDrops: unmarking != nil && !configuration.allowsRemovingEntitiesAndProperties)
                    drops = putBack.drops
                }
                let planned = values.isEmpty ? [:] : try writer.planStoredValues(values, txn, settled: putBack.values.mapValues { Set($0.keys) })
                if !planned.isEmpty || !putBack.values.isEmpty || !putBack.additions.isEmpty || !putBack.inserts.isEmpty {
                    let changes = try writer.applyPutBack(putBack, planned: planned, txn, sequence: sequence)
                    if !changes.isEmpty { groups.append(ChangeGroup(changes: changes)) }
                }
                // Nothing to write (0): the next open looks again, as the head's version still differs.
                if sequence == head + 1, groups.isEmpty, added.isEmpty, recomputing.isEmpty { return 0 }
                // Values filled, converted, taken out or put back: the derived attributes that
                // read them follow, computed afresh for every object (a kept aggregate's stored
                // value predates the take-out — which may put nothing back: a removed entity's
                // objects are only deleted); `now()` ones keep theirs, as a save that doesn't
                // touch the object does.
                var computing = recomputing
                if !groups.isEmpty || sequence > head + 1, let derivations = schema.derivations {
                    computing.formUnion(derivations.plans.filter { !$0.isNow }.map(\.qualifiedName))
                }
                if let derivations = schema.derivations, !computing.isEmpty {
                    // Unique indexes are checked by the rebuild below, over every object.
                    let changes = try writer.applyDerivations(
                        derivations, after: [], txn, sequence: sequence, timestamp: timestamp, recomputing: computing,
                        recordUniqueKeys: { _, _, _ in })
                    if !changes.isEmpty { groups.append(ChangeGroup(changes: changes)) }
                }
                try writer.rebuildIndexes(txn)
                let event = TransactionEvent(
                    sequence: sequence, timestamp: timestamp, author: nil, contextName: nil,
                    processID: ProcessInfo.processInfo.processIdentifier, kind: .migration, modelVersion: modelVersion, groups: groups)
                try writeEventChunks(
                    txn, sequence: sequence, bytes: try EventCodec.encode(event, catalog: writer), author: event.author,
                    contextName: event.contextName)
                try txn.put(bigEndianBytes(sequence), forKey: MetaKey.head, in: tables.meta)
                try checkpointIfDue(txn, appended: head + 1, through: sequence)
                if let unmarking { _ = try txn.delete(key: unmarking, in: tables.meta) }
                return sequence
            }
            if let sequence {
                if sequence > 0 {
                    migrationDrops.withLock { $0 = drops }
                    storeMonitor.publish(sequence)
                }
                return
            }
        }
        throw LogError.invalidOperation("the store at \(path) kept changing while it was being migrated to its new model version; open it again")
    }
}

extension EventLog {
    /// Refuses a model version that makes an entity abstract while the store holds objects
    /// of that entity itself (not of its sub-entities): an abstract entity has no objects of
    /// its own, and a context would never find them — fetches, faults and relationships to
    /// them would act as if they were gone (before, the open went ahead and hid them).
    ///
    /// - Throws: ``LogError/migration(_:)`` naming the entity and up to five of its objects;
    ///   nothing is written.
    func refuseObjectsOfAbstractEntities(_ writer: TableWriter) throws {
        var problems: [String] = []
        for entity in schema.entities.values.filter(\.isAbstract).sorted(by: { $0.name < $1.name }) {
            guard let code = try? writer.entityCode(entity.name) else { continue }
            var keys: [UInt64] = []
            var count = 0
            try environment.read { txn in
                try txn.forEach(in: tables.state, range: .prefix([UInt8(code >> 8), UInt8(truncatingIfNeeded: code)])) { key, _ in
                    count += 1
                    if keys.count < 5, let objectKey = key.withUnsafeBytes({ ObjectKey($0) }) { keys.append(objectKey.primaryKey) }
                    return .next
                }
            }
            guard count > 0 else { continue }
            let named = keys.map { StoredObjectID(entity: entity.name, primaryKey: $0).description }.joined(separator: ", ")
            let more = count > keys.count ? " and \(count - keys.count) more" : ""
            problems.append(
                "\(entity.name) is abstract in it, but the store has \(count) object\(count == 1 ? "" : "s") of \(entity.name) itself (\(named)\(more)), which no context would find")
        }
        guard !problems.isEmpty else { return }
        throw LogError.migration(
            "the stored objects can't be taken over by model version \(modelVersion): \(problems.joined(separator: "; ")). Nothing was written; keep the entity concrete, or make its objects objects of a sub-entity first (a staged migration's willMigrate handler)")
    }
}

extension TableWriter {
    /// Every live object of entity `name` (its own objects, not its sub-entities'), with
    /// its record decoded, in key order. The records are copied out of the cursor first, so
    /// the caller may write the state table while it goes through them.
    func records(of name: String, _ txn: borrowing LMDBTransaction) throws -> [(key: ObjectKey, id: StoredObjectID, record: Record)] {
        let code = try entityCode(name)
        var raw: [(ObjectKey, [UInt8])] = []
        try txn.forEach(in: tables.state, range: .prefix([UInt8(code >> 8), UInt8(truncatingIfNeeded: code)])) { key, value in
            guard let objectKey = key.withUnsafeBytes({ ObjectKey($0) }) else { return .next }
            raw.append((objectKey, value.withUnsafeBytes { Array($0) }))
            return .next
        }
        return try raw.map { (key, bytes) in
            let id = StoredObjectID(entity: name, primaryKey: key.primaryKey)
            let record = try bytes.withUnsafeBytes { raw throws(LogError) in try decodeRecord(raw, entityName: name, context: "state \(id)") }
            return (key, id, record)
        }
    }

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

            // Each live object's key, and whether it may clash (no nil or NaN value in it).
            var entries: [(key: [UInt8], complete: Bool, checked: Bool)] = []
            for name in schema.entities[index.entity]?.selfAndSubentities ?? [] {
                guard let entity = schema.entities[name] else { continue }
                for (objectKey, _, record) in try records(of: name, txn) {
                    let hasNil = index.properties.contains { (record.values[$0] ?? .null).leavesUniquenessUnchecked }
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
