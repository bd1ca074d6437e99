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
            // Values stored under names the version doesn't store them by (§4.5).
            let retired = try retiredPropertyNames()
            guard !added.isEmpty || !recomputing.isEmpty || !values.isEmpty || !retired.isEmpty else { return }
            let timestamp = EventCodec.date(microseconds: EventCodec.microsecondsNow())
            // nil: another writer moved the head first; look again.
            let sequence = try environment.write { txn -> UInt64? in
                guard try nextSequence(txn) - 1 == head else { return nil }
                var sequence = head + 1
                var groups: [ChangeGroup] = []
                // Values stored under retired names are taken out first (in their versions'
                // terms); the stored values are filled and converted; then the values taken
                // out are put back under the new names — converted as they go, so every
                // record written in this version holds values of its types.
                var putBack = PutBack(values: [:], additions: [:], renamed: [:])
                if !retired.isEmpty {
                    let taken = try takeOutRetiredValues(retired, txn, sequence: &sequence, timestamp: timestamp)
                    putBack = try writer.planPutBack(taken)
                }
                if !values.isEmpty {
                    let changes = try writer.migrateStoredValues(
                        values, txn, sequence: sequence, renamed: putBack.renamed, settled: putBack.values.mapValues { Set($0.keys) })
                    if !changes.isEmpty { groups.append(ChangeGroup(changes: changes)) }
                }
                if !putBack.values.isEmpty || !putBack.additions.isEmpty {
                    let changes = try writer.applyPutBack(putBack, txn, sequence: sequence)
                    if !changes.isEmpty { groups.append(ChangeGroup(changes: changes)) }
                }
                // Nothing to write (0): the next open looks again, as the head's version still differs.
                if sequence == head + 1, groups.isEmpty, added.isEmpty, recomputing.isEmpty { return 0 }
                if let derivations = schema.derivations, !recomputing.isEmpty {
                    // Unique indexes are checked by the rebuild below, over every object.
                    let changes = try writer.applyDerivations(
                        derivations, after: [], txn, sequence: sequence, timestamp: timestamp, recomputing: recomputing,
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
                return sequence
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
    /// convert, by entity: an ordinary stored attribute that an earlier stored model version lacks
    /// (when it has a default value or is mandatory), has with a value of another kind, or has
    /// optional where it is mandatory now. Empty when no earlier version is stored.
    func valueMigrationCandidates() throws -> [String: [AttributeDescription]] {
        // Only earlier versions: an earlier model opening a store a later one wrote leaves the
        // later values alone, for the later model.
        let others = try catalog.modelVersions.filter { $0 < modelVersion }.map { try catalog.schema(forModelVersion: $0).model }
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
        _ candidates: [String: [AttributeDescription]], _ txn: borrowing LMDBTransaction, sequence: UInt64,
        renamed: [String: [String: String]] = [:], settled: [StoredObjectID: Set<String>] = [:]
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
                // A record a later model version wrote is left for it.
                guard record.modelVersion <= modelVersion else { continue }
                let recorded = try? schema(forModelVersion: record.modelVersion).model.entity(named: entityName)
                var propertyChanges: [PropertyChange] = []
                for attribute in attributes {
                    // A value put back under this name after (a renamed attribute's) settles it.
                    guard let property = entity.propertiesByName[attribute.name], settled[id]?.contains(attribute.name) != true else { continue }
                    let kind = entity.valueKinds[property.code]
                    let described = "\(entityName).\(attribute.name)"
                    let stored = record.values[attribute.name] ?? .null
                    switch stored {
                    case .null:
                        // A renamed attribute the record's version had under its old name.
                        let name = renamed[entityName]?[attribute.name] ?? attribute.name
                        let had = recorded?.attributesByName[attribute.name]?.isPersisted == true
                            || recorded?.attributesByName[name]?.isPersisted == true
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

// MARK: - Values earlier versions stored under names the opening version doesn't (spec 0004 §4.5)

/// A value an earlier model version stored that the opening version doesn't store under
/// that name: a property it removes, renames (`renamingIdentifier`), or a relationship side
/// it no longer records. Taken out in the earlier version's terms, then put back (or
/// dropped) in the opening version's.
struct RetiredValue {
    /// The object.
    let object: StoredObjectID
    /// The model version its record was written with.
    let version: Int
    /// The property as the earlier version defines it.
    let property: ModelSchema.Property
    /// Its name's renaming identifier in the earlier version (chains of renames).
    let renamingIdentifier: String?
    /// The value taken out (for an unordered to-many: its members as `.references`).
    let value: LogValue
}

extension EventLog {
    /// The stored properties of earlier stored model versions that the opening version doesn't
    /// store the same way, by entity of the opening model: a name it doesn't have, an
    /// attribute it makes a relationship (or the reverse), or a recorded relationship side
    /// it records differently or derives.
    func retiredPropertyNames() throws -> [String: Set<String>] {
        var retired: [String: Set<String>] = [:]
        for version in catalog.modelVersions where version < modelVersion {
            let other = try catalog.schema(forModelVersion: version)
            for (name, entity) in schema.entities {
                guard let before = other.entities[name] else { continue }
                for property in before.properties where property.isAttribute || property.isRecorded {
                    let now = entity.propertiesByName[property.name]
                    let same = now.map { now in
                        property.isAttribute ? now.isAttribute : now.relationship == property.relationship && now.isRecorded
                    } ?? false
                    if !same { retired[name, default: []].insert(property.name) }
                }
            }
        }
        return retired
    }

    /// Takes the values of `retired` (``retiredPropertyNames()``) out of every live object
    /// of their entities: for each model version the objects' records were written with, one
    /// `migration` transaction in that version's terms (from `sequence` on, which it
    /// advances) sets them to nil — references unlinked, unordered members removed — and
    /// rebuilds that version's indexes. Returns the values taken out.
    func takeOutRetiredValues(
        _ retired: [String: Set<String>], _ txn: borrowing LMDBTransaction, sequence: inout UInt64, timestamp: Date
    ) throws -> [RetiredValue] {
        var taken: [RetiredValue] = []
        /// By model version: each object's changes, with its key, record and entity.
        var byVersion: [Int: [(key: ObjectKey, id: StoredObjectID, entity: ModelSchema.Entity, record: Record, changes: [PropertyChange])]] = [:]
        let reader = TableWriter(tables: tables, catalog: catalog, schema: schema, modelVersion: modelVersion, shapes: entityShapes)
        for (entityName, names) in retired.sorted(by: { $0.key < $1.key }) {
            guard let code = try? reader.entityCode(entityName) else { continue }
            var records: [(ObjectKey, [UInt8])] = []
            try txn.forEach(in: tables.state, range: .prefix([UInt8(code >> 8), UInt8(truncatingIfNeeded: code)])) { key, value in
                guard let objectKey = key.withUnsafeBytes({ ObjectKey($0) }) else { return .next }
                records.append((objectKey, value.withUnsafeBytes { Array($0) }))
                return .next
            }
            for (key, bytes) in records {
                let id = StoredObjectID(entity: entityName, primaryKey: key.primaryKey)
                let record = try bytes.withUnsafeBytes { raw throws(LogError) in
                    try reader.decodeRecord(raw, entityName: entityName, context: "state \(id)")
                }
                // A record a later model version wrote is left for it.
                guard record.modelVersion < modelVersion else { continue }
                let written = try catalog.schema(forModelVersion: record.modelVersion)
                guard let entity = written.entities[entityName] else { continue }
                let described = written.model.entity(named: entityName)
                var changes: [PropertyChange] = []
                for name in names.sorted() {
                    guard let property = entity.propertiesByName[name], property.isAttribute || property.isRecorded else { continue }
                    let renamingIdentifier = described?.propertiesByName[name]?.renamingIdentifier
                    if property.relationship == .unorderedToMany {
                        let members = try reader.members(txn, of: key, relationship: try reader.relationshipCode(property.qualifiedName))
                            .map { (k) throws(LogError) in try reader.id(k) }.sorted()
                        guard !members.isEmpty else { continue }
                        changes.append(.membership(property: name, added: [], removed: members))
                        taken.append(RetiredValue(object: id, version: record.modelVersion, property: property, renamingIdentifier: renamingIdentifier, value: .references(members)))
                    } else if let value = record.values[name], value != .null {
                        changes.append(.value(property: name, before: value, after: .null))
                        taken.append(RetiredValue(object: id, version: record.modelVersion, property: property, renamingIdentifier: renamingIdentifier, value: value))
                    }
                }
                if !changes.isEmpty { byVersion[record.modelVersion, default: []].append((key, id, entity, record, changes)) }
            }
        }
        for (version, objects) in byVersion.sorted(by: { $0.key < $1.key }) {
            let writer = TableWriter(tables: tables, catalog: catalog, schema: try catalog.schema(forModelVersion: version), modelVersion: version)
            var changes: [Change] = []
            for object in objects {
                _ = try writer.applyUpdate(txn, object.key, changes: object.changes, sequence: sequence, entity: object.entity, current: object.record)
                changes.append(.update(object.id, changes: object.changes))
            }
            try writer.rebuildIndexes(txn)
            let event = TransactionEvent(
                sequence: sequence, timestamp: timestamp, author: nil, contextName: nil,
                processID: ProcessInfo.processInfo.processIdentifier, kind: .migration, modelVersion: version,
                groups: [ChangeGroup(changes: changes)])
            try writeEventChunks(
                txn, sequence: sequence, bytes: try EventCodec.encode(event, catalog: writer), author: nil, contextName: nil)
            sequence += 1
        }
        return taken
    }
}

extension TableWriter {
    /// Where the values taken out (``EventLog/takeOutRetiredValues(_:_:sequence:timestamp:)``)
    /// go back under the opening version's names (``applyPutBack(_:_:sequence:)`` puts them
    /// there): a property of the same name, or
    /// the one whose `renamingIdentifier` names it (or shares its identifier); an attribute's
    /// value converted to its type when that loses nothing; a relationship's destinations
    /// set on whichever side the version records. A removed property's values stay out.
    ///
    /// - Throws: ``LogError/migration(_:)`` when a value can't be put back.
    func planPutBack(_ taken: [RetiredValue]) throws -> PutBack {
        var problems: [String] = []
        /// Per object and property: the value to set (attributes, to-ones), the destinations
        /// to add (to-many).
        var values: [StoredObjectID: [String: LogValue]] = [:]
        var additions: [StoredObjectID: [String: [StoredObjectID]]] = [:]
        var renamed: [String: [String: String]] = [:]
        for retired in taken {
            let entityName = retired.object.entity
            guard let entity = schema.entities[entityName], let described = schema.model.entity(named: entityName) else { continue }
            let old = retired.property
            // Where the value goes: the same name, or a rename of it.
            var target: ModelSchema.Property?
            if let same = entity.propertiesByName[old.name] {
                target = same
            } else if let earlier = try schema(forModelVersion: retired.version).entities[entityName],
                let renamedTo = renameTarget(of: old.name, identifier: retired.renamingIdentifier, earlier: earlier, later: described),
                let property = entity.propertiesByName[renamedTo]
            {
                target = property
                renamed[entityName, default: [:]][property.name] = old.name
            }
            guard let target else { continue }  // removed: the value stays out
            let described2 = "\(entityName).\(old.name)" + (target.name == old.name ? "" : " (now \(target.name))")
            if old.isAttribute {
                guard let type = target.attributeType, case .attribute(let value) = retired.value else {
                    problems.append("\(described2) was an attribute and the version makes it a relationship")
                    continue
                }
                let converted = LogValue.attribute(value.coerced(to: type))
                guard EventCodec.fits(converted, EventCodec.ValueKind(type)) else {
                    problems.append("\(retired.object) has \(described2) = \(value.canonicalJSON) (\(value.typeName)), which doesn't convert to \(type.name) without loss")
                    continue
                }
                values[retired.object, default: [:]][target.name] = converted
                continue
            }
            guard let storage = target.relationship else {
                problems.append("\(described2) was a relationship and the version makes it an attribute")
                continue
            }
            let destinations: [StoredObjectID] =
                switch retired.value {
                case .reference(let id): [id]
                case .references(let ids): ids
                default: []
                }
            func setToOne(_ object: StoredObjectID, _ property: String, _ destination: StoredObjectID) {
                if let existing = values[object]?[property], existing != .reference(destination) {
                    problems.append("\(object).\(property) would be both \(existing) and \(destination)")
                }
                values[object, default: [:]][property] = .reference(destination)
            }
            switch storage {
            case .toOne:
                guard destinations.count <= 1 else {
                    problems.append("\(retired.object) has \(destinations.count) destinations in \(described2), which the version makes to-one")
                    continue
                }
                if let destination = destinations.first { setToOne(retired.object, target.name, destination) }
            case .orderedToMany, .unorderedToMany:
                additions[retired.object, default: [:]][target.name, default: []].append(contentsOf: destinations)
            case .derived(_, let inverse):
                for destination in destinations {
                    guard let side = schema.entities[destination.entity]?.propertiesByName[inverse], let sideStorage = side.relationship else {
                        problems.append("\(destination), a destination of \(retired.object)'s \(described2), has no \(inverse)")
                        continue
                    }
                    if sideStorage == .toOne {
                        setToOne(destination, inverse, retired.object)
                    } else {
                        additions[destination, default: [:]][inverse, default: []].append(retired.object)
                    }
                }
            }
        }
        guard problems.isEmpty else {
            let shown = problems.prefix(5).joined(separator: "; ")
            let more = problems.count > 5 ? "; and \(problems.count - 5) more" : ""
            throw LogError.migration(
                "the stored values can't be taken over by model version \(modelVersion): \(shown)\(more). Nothing was written")
        }
        return PutBack(values: values, additions: additions, renamed: renamed)
    }

    /// Puts the values of `plan` back, at `sequence`; returns the changes, one update per
    /// object.
    func applyPutBack(_ plan: PutBack, _ txn: borrowing LMDBTransaction, sequence: UInt64) throws -> [Change] {
        let (values, additions) = (plan.values, plan.additions)
        var changes: [Change] = []
        for id in Set(values.keys).union(additions.keys).sorted() {
            guard let entity = schema.entities[id.entity] else { continue }
            let key = try key(id)
            guard let record = try readRecord(txn, key, entityName: id.entity) else { continue }
            var propertyChanges: [PropertyChange] = []
            for (name, value) in values[id] ?? [:] {
                let before = record.values[name] ?? .null
                if before != value { propertyChanges.append(.value(property: name, before: before, after: value)) }
            }
            for (name, destinations) in additions[id] ?? [:] {
                guard let property = entity.propertiesByName[name] else { continue }
                if property.relationship == .unorderedToMany {
                    let present = Set(try members(txn, of: key, relationship: try relationshipCode(property.qualifiedName)))
                    var added: [StoredObjectID] = []
                    for destination in destinations where !present.contains(try self.key(destination)) && !added.contains(destination) {
                        added.append(destination)
                    }
                    if !added.isEmpty { propertyChanges.append(.membership(property: name, added: added.sorted(), removed: [])) }
                } else {
                    let before = record.values[name] ?? .null
                    var list: [StoredObjectID] = try targets(of: before).map { (k) throws(LogError) in try self.id(k) }
                    for destination in destinations where !list.contains(destination) { list.append(destination) }
                    let after = LogValue.references(list)
                    if before != after { propertyChanges.append(.value(property: name, before: before, after: after)) }
                }
            }
            guard !propertyChanges.isEmpty else { continue }
            propertyChanges.sort { $0.property < $1.property }
            _ = try applyUpdate(txn, key, changes: propertyChanges, sequence: sequence, entity: entity, current: record)
            changes.append(.update(id, changes: propertyChanges))
        }
        return changes
    }
}

/// Where the values taken out go back (``TableWriter/planPutBack(_:)``).
struct PutBack {
    /// Per object and property: the value to set (attributes, to-ones).
    var values: [StoredObjectID: [String: LogValue]]
    /// Per object and to-many relationship: the destinations to add.
    var additions: [StoredObjectID: [String: [StoredObjectID]]]
    /// The renames used: entity → new name → old name.
    var renamed: [String: [String: String]]
}

/// The property of `later` (a later model version's entity) that renames property `name` of
/// `earlier` (whose `renamingIdentifier` in the earlier version is `identifier`): one whose
/// `renamingIdentifier` is that name or shares that identifier (Core Data matches renaming
/// identifiers), and whose own name the earlier version doesn't have (such a property keeps
/// its own values). Nil when none does.
func renameTarget(of name: String, identifier: String?, earlier: ModelSchema.Entity, later: EntityDescription) -> String? {
    later.properties.first { property in
        guard let renaming = property.renamingIdentifier, renaming != property.name, earlier.propertiesByName[property.name] == nil
        else { return false }
        return renaming == name || renaming == identifier
    }?.name
}

// MARK: - Names across versions, for persisted undo (spec 0006 §13)

extension EventLog {
    /// The name the opening model gives the stored property that model version `version`
    /// called `name` in `entity`: the same name, or the one its renames lead to through the
    /// stored versions after it (spec 0004 §4.5); nil when one of them removed it. Versions
    /// after the opening one aren't followed.
    package func currentPropertyName(_ name: String, entity: String, modelVersion version: Int) -> String? {
        guard version < modelVersion else { return name }
        var current = name
        var earlierVersion = version
        for later in catalog.modelVersions where later > version && later <= modelVersion {
            guard let earlierSchema = try? catalog.schema(forModelVersion: earlierVersion),
                let laterSchema = try? catalog.schema(forModelVersion: later),
                let earlier = earlierSchema.entities[entity], let laterEntity = laterSchema.entities[entity],
                let described = laterSchema.model.entity(named: entity)
            else { return nil }
            if laterEntity.propertiesByName[current] == nil {
                let identifier = earlierSchema.model.entity(named: entity)?.propertiesByName[current]?.renamingIdentifier
                guard let renamed = renameTarget(of: current, identifier: identifier, earlier: earlier, later: described) else { return nil }
                current = renamed
            }
            earlierVersion = later
        }
        return current
    }

    /// `group`, written with model version `version`, with its properties under the opening
    /// model's names (``currentPropertyName(_:entity:modelVersion:)``) and its attribute
    /// values converted to their types there when that loses nothing, as a migration
    /// converts them (§4.4); properties a later version removed are left out. A group of the
    /// opening version comes back as it is.
    package func translating(_ group: ChangeGroup, fromModelVersion version: Int) -> ChangeGroup {
        guard version < modelVersion else { return group }
        func converted(_ value: LogValue, _ name: String, _ entity: String) -> LogValue {
            guard case .attribute(let attribute) = value, let property = schema.entities[entity]?.propertiesByName[name],
                let type = property.attributeType
            else { return value }
            let coerced = LogValue.attribute(attribute.coerced(to: type))
            return EventCodec.fits(coerced, EventCodec.ValueKind(type)) ? coerced : value
        }
        func values(_ values: [String: LogValue], _ entity: String) -> [String: LogValue] {
            var result: [String: LogValue] = [:]
            for (name, value) in values {
                if let current = currentPropertyName(name, entity: entity, modelVersion: version) {
                    result[current] = converted(value, current, entity)
                }
            }
            return result
        }
        var translated = group
        translated.changes = group.changes.map { change in
            switch change {
            case .insert(let id, let inserted): return .insert(id, values: values(inserted, id.entity))
            case .delete(let id, let before): return .delete(id, before: values(before, id.entity))
            case .update(let id, let changes):
                return .update(
                    id,
                    changes: changes.compactMap { change in
                        guard let current = currentPropertyName(change.property, entity: id.entity, modelVersion: version) else { return nil }
                        switch change {
                        case .value(_, let before, let after):
                            return .value(
                                property: current, before: converted(before, current, id.entity), after: converted(after, current, id.entity))
                        case .membership(_, let added, let removed): return .membership(property: current, added: added, removed: removed)
                        }
                    })
            }
        }
        return translated
    }
}
