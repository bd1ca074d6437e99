import Foundation
import StrataModel
import StrataStorage

// MARK: - Entities a later model version renames (spec 0004 §4.6)

extension EventLog {
    /// The entities of earlier stored model versions that the opening model renames: old
    /// name → new name. An entity of the opening model that no earlier version has renames
    /// one when its `renamingIdentifier` is that entity's name, or equals that entity's own
    /// `renamingIdentifier`, and the opening model no longer has that name.
    func renamedEntities() throws -> [String: String] {
        var renamed: [String: String] = [:]
        for version in catalog.modelVersions where version < modelVersion {
            let earlier = try catalog.schema(forModelVersion: version).model
            for entity in model.entities where earlier.entity(named: entity.name) == nil {
                guard let identifier = entity.renamingIdentifier,
                    let old = earlier.entities.first(where: { $0.name == identifier || $0.renamingIdentifier == identifier }),
                    model.entity(named: old.name) == nil
                else { continue }
                renamed[old.name] = entity.name
            }
        }
        return renamed
    }

    /// Refuses the opening model when its renaming identifiers name one entity of an earlier
    /// stored version from two of its entities, or one property of an earlier version's
    /// entity from two properties of the entity that takes it over (spec 0004 §4.5–4.6): the
    /// objects (values) can go to one only. Before, one was picked without a word — the
    /// objects moved to the last entity found while the references to them kept the other's
    /// destination (`Player.team`, to `Club`, naming `Squad/p1`), and the values went to the
    /// first property, the other left empty.
    ///
    /// - Throws: ``LogError/migration(_:)`` naming the version, the entities or properties
    ///   and what they rename.
    func refuseAmbiguousRenames() throws {
        func names(_ list: [String]) -> String {
            list.count == 2 ? "\(list[0]) and \(list[1])" : list.dropLast().joined(separator: ", ") + " and " + (list.last ?? "")
        }
        for version in catalog.modelVersions where version < modelVersion {
            let earlier = try catalog.schema(forModelVersion: version).model
            var renaming: [String: [String]] = [:]
            for entity in model.entities where earlier.entity(named: entity.name) == nil {
                guard let identifier = entity.renamingIdentifier else { continue }
                for old in earlier.entities where (old.name == identifier || old.renamingIdentifier == identifier) && model.entity(named: old.name) == nil {
                    renaming[old.name, default: []].append(entity.name)
                }
            }
            for (old, new) in renaming.sorted(by: { $0.key < $1.key }) where new.count > 1 {
                throw LogError.migration(
                    "the stored objects can't be taken over by model version \(modelVersion): its entities \(names(new.sorted())) all rename \(old) (of model version \(version)), whose objects can move to one entity only. Nothing was written; give all but one of them renamingIdentifiers of their own")
            }
            // Names swapped (or one reused): an entity that keeps a name the earlier version has
            // while its renaming identifier, new since that version, names another of its
            // entities. Core Data would exchange the objects; a rename here moves objects to a
            // name the earlier version doesn't have, so before, this was no rename at all and
            // each entity kept the other's objects.
            let claims = model.entities.sorted { $0.name < $1.name }.compactMap { entity -> (new: String, old: String)? in
                guard let identifier = entity.renamingIdentifier, identifier != entity.name,
                    let before = earlier.entity(named: entity.name), before.renamingIdentifier != identifier,
                    let old = earlier.entities.first(where: { $0.name == identifier })
                        ?? earlier.entities.first(where: { $0.renamingIdentifier == identifier }),
                    old.name != entity.name
                else { return nil }
                return (entity.name, old.name)
            }
            if !claims.isEmpty {
                throw LogError.migration(
                    "the stored objects can't be taken over by model version \(modelVersion): \(Self.swapDescription(claims, entities: true, of: version)), whose objects Strata can't exchange (a rename moves objects to a name the earlier version doesn't have). Nothing was written; \(Self.swapAdvice(claims))")
            }
            for entity in model.entities.sorted(by: { $0.name < $1.name }) {
                let takenOver = earlier.entity(named: entity.name) != nil ? entity.name : renaming.first { $0.value == [entity.name] }?.key
                guard let takenOver, let earlierEntity = earlier.entity(named: takenOver) else { continue }
                // Property names reused: a property claiming another's name while that one
                // keeps it. A complete swap (names exchanged among the claiming properties)
                // migrates, each value going to the property that claims it (spec 0004 §4.5).
                let named = nameClaims(
                    earlier: earlierEntity.properties.map { ($0.name, $0.renamingIdentifier) },
                    later: entity.properties.map { ($0.name, $0.renamingIdentifier) })
                let claims = named.map { (new: $0.new, old: "\(takenOver).\($0.old)") }
                if !claims.isEmpty, completeSwap(named) == nil {
                    throw LogError.migration(
                        "the stored values can't be taken over by model version \(modelVersion): \(entity.name)'s \(Self.swapDescription(claims, entities: false, of: version)), whose values Strata can't exchange (a rename moves values to a name the earlier version doesn't have). Nothing was written; \(Self.swapAdvice(claims))")
                }
                for property in earlierEntity.properties where entity.propertiesByName[property.name] == nil {
                    let targets = entity.properties.filter { candidate in
                        guard let renamingIdentifier = candidate.renamingIdentifier, earlierEntity.propertiesByName[candidate.name] == nil else { return false }
                        return renamingIdentifier == property.name || renamingIdentifier == property.renamingIdentifier
                    }.map(\.name)
                    guard targets.count > 1 else { continue }
                    throw LogError.migration(
                        "the stored values can't be taken over by model version \(modelVersion): \(entity.name)'s properties \(names(targets.sorted())) all rename \(takenOver).\(property.name) (of model version \(version)), whose values can go to one property only. Nothing was written; give all but one of them renamingIdentifiers of their own")
                }
            }
        }
    }

    /// `its entities Cat and Dog swap names: Cat renames Dog and Dog renames Cat (of model
    /// version 1)`, or for one claim `its entity Cat renames Dog (of model version 1) and keeps
    /// its own name, which that version gives another entity`. `entities`: entities' claims
    /// (else properties', named `Entity.property` on the old side).
    /// How to make the swap of `claims` in steps the migration takes: through names neither
    /// version has.
    static func swapAdvice(_ claims: [(new: String, old: String)]) -> String {
        guard let claim = claims.first else { return "" }
        let old = claim.old.split(separator: ".").last.map(String.init) ?? claim.old
        return "rename through names neither version has, one model version each (a version renaming \(old) to a name of its own, the next renaming that to \(claim.new))"
    }

    static func swapDescription(_ claims: [(new: String, old: String)], entities: Bool, of version: Int) -> String {
        func list(_ items: [String]) -> String {
            items.count <= 2 ? items.joined(separator: " and ") : items.dropLast().joined(separator: ", ") + " and " + (items.last ?? "")
        }
        let (one, many) = entities ? ("its entity", "its entities") : ("property", "properties")
        if claims.count == 1, let claim = claims.first {
            return "\(one) \(claim.new) renames \(claim.old) (of model version \(version)) and keeps its own name, which that version gives another \(entities ? "entity" : "property")"
        }
        return "\(many) \(list(claims.map(\.new))) swap names: \(list(claims.map { "\($0.new) renames \($0.old)" })) (of model version \(version))"
    }

    /// The entities of earlier stored model versions that the opening model neither has nor
    /// renames: their objects are deleted by the migration, as Core Data's migration doesn't
    /// carry a removed entity's rows over (§4.6).
    func removedEntities(renamed: [String: String]) throws -> Set<String> {
        var removed: Set<String> = []
        for version in catalog.modelVersions where version < modelVersion {
            for entity in try catalog.schema(forModelVersion: version).model.entities
            where model.entity(named: entity.name) == nil && renamed[entity.name] == nil {
                removed.insert(entity.name)
            }
        }
        return removed
    }

    /// Where each object of the entities `renamed` (old name → new name) moves: the same
    /// primary key under the new name — or, when an object of the new entity already has
    /// that key, the new entity's next one. (An earlier model version, opened after a later
    /// one moved the entity's objects, inserts under the old name from the old counter,
    /// while the later version inserted under the new name from the new one.)
    func movedObjectIDs(_ renamed: [String: String], _ txn: borrowing LMDBTransaction) throws -> [StoredObjectID: StoredObjectID] {
        let reader = TableWriter(tables: tables, catalog: catalog, schema: schema, modelVersion: modelVersion, shapes: entityShapes)
        var moves: [StoredObjectID: StoredObjectID] = [:]
        var taken: [String: Set<UInt64>] = [:]
        var clashing: [StoredObjectID] = []
        for (old, new) in renamed.sorted(by: { $0.key < $1.key }) {
            guard let code = try? reader.entityCode(old), let newCode = try? reader.entityCode(new) else { continue }
            var keys: [UInt64] = []
            try txn.forEach(in: tables.state, range: .prefix([UInt8(code >> 8), UInt8(truncatingIfNeeded: code)])) { key, _ in
                if let objectKey = key.withUnsafeBytes({ ObjectKey($0) }) { keys.append(objectKey.primaryKey) }
                return .next
            }
            for primaryKey in keys {
                let id = StoredObjectID(entity: old, primaryKey: primaryKey)
                let exists = try ObjectKey(entity: newCode, primaryKey: primaryKey).withBytes { try txn.containsKey($0, in: tables.state) }
                if exists || taken[new]?.contains(primaryKey) == true {
                    clashing.append(id)
                } else {
                    moves[id] = StoredObjectID(entity: new, primaryKey: primaryKey)
                    taken[new, default: []].insert(primaryKey)
                }
            }
        }
        var next: [String: UInt64] = [:]
        for id in clashing {
            guard let new = renamed[id.entity] else { continue }
            if next[new] == nil {
                next[new] = max(try reader.lastPrimaryKey(txn, entity: try reader.entityCode(new)), taken[new]?.max() ?? 0)
            }
            let primaryKey = (next[new] ?? 0) + 1
            next[new] = primaryKey
            moves[id] = StoredObjectID(entity: new, primaryKey: primaryKey)
        }
        return moves
    }

    /// Takes the objects of the entities `renamed` and `removed` out of the store, in their
    /// versions' terms (``writeTakeOut(_:_:sequence:timestamp:)``): first every reference to
    /// them is taken out of the objects holding it (a to-one or ordered list whole, an
    /// unordered to-many's members of those entities), then each object is deleted with its
    /// full before-image. Returns the values taken out — with every renamed entity's object
    /// named by its ID under the new entity name (`moves`, ``movedObjectIDs(_:_:)``), and
    /// references to a removed entity's objects left out — and the new IDs: the objects to
    /// insert.
    func takeOutRenamedEntities(
        _ renamed: [String: String], moves: [StoredObjectID: StoredObjectID], removing removed: Set<String> = [],
        _ txn: borrowing LMDBTransaction, sequence: inout UInt64,
        timestamp: Date
    ) throws -> (taken: [RetiredValue], inserting: [StoredObjectID: MovedFrom]) {
        let reader = TableWriter(tables: tables, catalog: catalog, schema: schema, modelVersion: modelVersion, shapes: entityShapes)
        var objects: [(key: ObjectKey, id: StoredObjectID)] = []
        for old in Set(renamed.keys).union(removed).sorted() {
            guard let code = try? reader.entityCode(old) else { continue }
            try txn.forEach(in: tables.state, range: .prefix([UInt8(code >> 8), UInt8(truncatingIfNeeded: code)])) { key, _ in
                if let objectKey = key.withUnsafeBytes({ ObjectKey($0) }) {
                    objects.append((objectKey, StoredObjectID(entity: old, primaryKey: objectKey.primaryKey)))
                }
                return .next
            }
        }
        guard !objects.isEmpty else { return ([], [:]) }
        var taken: [RetiredValue] = []

        // The references to them: referrers rows are target · relationship · source.
        var incoming: [ObjectKey: [UInt16: [ObjectKey]]] = [:]
        for (key, _) in objects {
            try txn.forEach(in: tables.referrers, range: .prefix(key.bytes)) { row, _ in
                row.withUnsafeBytes { raw in
                    guard raw.count == 22, let source = ObjectKey(raw, at: 12) else { return }
                    incoming[source, default: [:]][UInt16(raw[10]) << 8 | UInt16(raw[11]), default: []].append(key)
                }
                return .next
            }
        }
        var updates: [Int: [TakeOut]] = [:]
        for (source, byRelationship) in incoming.sorted(by: { $0.key.bytes.lexicographicallyPrecedes($1.key.bytes) }) {
            let sourceID = try reader.id(source)
            guard let record = try reader.readRecord(txn, source, entityName: sourceID.entity) else { continue }
            let written = try catalog.schema(forModelVersion: record.modelVersion)
            guard let entity = written.entities[sourceID.entity] else { continue }
            let described = written.model.entity(named: sourceID.entity)
            var changes: [PropertyChange] = []
            for (code, targets) in byRelationship.sorted(by: { $0.key < $1.key }) {
                guard let qualified = catalog.relationshipName(code), let name = qualified.split(separator: ".").last.map(String.init),
                    let property = entity.propertiesByName[name], property.isRecorded
                else {
                    throw LogError.migration(
                        "\(sourceID) refers to an object of a renamed or removed entity through relationship code \(code), which its model version \(record.modelVersion) doesn't record; run strata verify")
                }
                let value: LogValue
                if property.relationship == .unorderedToMany {
                    let ids = try targets.map { (k) throws(LogError) in try reader.id(k) }.sorted()
                    changes.append(.membership(property: name, added: [], removed: ids))
                    value = .references(ids)
                } else {
                    guard let whole = record.values[name], whole != .null else { continue }
                    changes.append(.value(property: name, before: whole, after: .null))
                    value = whole
                }
                // A removed object's own references go with it.
                if !removed.contains(sourceID.entity) {
                    taken.append(
                        RetiredValue(
                            object: sourceID, version: record.modelVersion, earlierEntity: sourceID.entity, property: property,
                            renamingIdentifier: described?.propertiesByName[name]?.renamingIdentifier, value: value
                        ).movingObjects(moves, removing: removed))
                }
            }
            if !changes.isEmpty {
                updates[record.modelVersion, default: []].append(
                    TakeOut(key: source, id: sourceID, entity: entity, record: record, changes: changes.sorted { $0.property < $1.property }))
            }
        }
        try writeTakeOut(updates, txn, sequence: &sequence, timestamp: timestamp)

        // The objects themselves, with what they still hold.
        var deletes: [Int: [TakeOut]] = [:]
        var inserting: [StoredObjectID: MovedFrom] = [:]
        for (key, id) in objects {
            guard let record = try reader.readRecord(txn, key, entityName: id.entity) else { continue }
            let written = try catalog.schema(forModelVersion: record.modelVersion)
            guard let entity = written.entities[id.entity] else { continue }
            let writer = TableWriter(tables: tables, catalog: catalog, schema: written, modelVersion: record.modelVersion)
            let before = try writer.beforeImage(txn, key, record: record, entity: entity)
            deletes[record.modelVersion, default: []].append(TakeOut(key: key, id: id, entity: entity, deleted: before))
            let described = written.model.entity(named: id.entity)
            guard !removed.contains(id.entity) else { continue }
            for (name, value) in before.sorted(by: { $0.key < $1.key }) where value != .null {
                guard let property = entity.propertiesByName[name] else { continue }
                taken.append(
                    RetiredValue(
                        object: id, version: record.modelVersion, earlierEntity: id.entity, property: property,
                        renamingIdentifier: described?.propertiesByName[name]?.renamingIdentifier, value: value
                    ).movingObjects(moves, removing: removed))
            }
            if let new = moves[id] {
                inserting[new] = MovedFrom(version: record.modelVersion, entity: id.entity)
            }
        }
        try writeTakeOut(deletes, txn, sequence: &sequence, timestamp: timestamp)
        return (taken, inserting)
    }
}

extension TableWriter {
    /// Inserts `id`, an object of an entity the opening version renames, under its new ID
    /// with the values put back for it (``planPutBack(_:inserting:)``): to-many destinations
    /// added as lists, and each attribute without a value given its default when it is
    /// mandatory or new to the entity (as §4.4 fills stored objects); the entity's primary-key
    /// counter is raised past it.
    ///
    /// - Throws: ``LogError/migration(_:)`` for a mandatory attribute without a value or a
    ///   default.
    func insertMoved(
        _ id: StoredObjectID, from earlier: MovedFrom, values: [String: LogValue], additions: [String: [StoredObjectID]],
        _ txn: borrowing LMDBTransaction, sequence: UInt64
    ) throws -> Change {
        guard let entity = schema.entities[id.entity], let described = schema.model.entity(named: id.entity) else {
            throw LogError.unknownEntity(id.entity)
        }
        let earlierSchema = try schema(forModelVersion: earlier.version)
        let earlierEntity = earlierSchema.entities[earlier.entity]
        let earlierDescribed = earlierSchema.model.entity(named: earlier.entity)
        /// Whether the object's earlier entity had the attribute (under its name, or one it renames).
        func had(_ attribute: AttributeDescription) -> Bool {
            if earlierEntity?.propertiesByName[attribute.name] != nil { return true }
            guard let identifier = attribute.renamingIdentifier else { return false }
            return earlierDescribed?.properties.contains { $0.name == identifier || $0.renamingIdentifier == identifier } == true
        }
        var inserted = values
        for (name, destinations) in additions {
            guard let property = entity.propertiesByName[name] else { continue }
            var list = destinations.reduce(into: [StoredObjectID]()) { list, id in if !list.contains(id) { list.append(id) } }
            if property.relationship == .unorderedToMany { list.sort() }
            inserted[name] = .references(list)
        }
        for attribute in described.allAttributes where attribute.isPersisted && !attribute.isDerived && inserted[attribute.name] == nil {
            guard let fallback = attribute.defaultValue.map({ LogValue.attribute($0.coerced(to: attribute.attributeType)) }) else {
                if !attribute.isOptional {
                    throw LogError.migration(
                        "the stored values can't be taken over by model version \(modelVersion): \(id.entity).\(attribute.name) is mandatory and has no default value, but \(id) has no value for it. Nothing was written")
                }
                continue
            }
            // An optional attribute keeps a nil its object had; one new to the entity takes
            // the default. Mandatory ones always do.
            if attribute.isOptional && had(attribute) { continue }
            inserted[attribute.name] = fallback
        }
        let key = try key(id)
        try applyInsert(txn, key, values: inserted, sequence: sequence, entity: entity)
        if key.primaryKey > (try lastPrimaryKey(txn, entity: key.entity)) {
            try txn.put(bigEndianBytes(key.primaryKey), forKey: Self.counterKey(key.entity), in: tables.counters)
        }
        return .insert(id, values: inserted.filter { $0.value != .null })
    }
}

/// Where an object of a renamed entity came from: its record's model version and its entity
/// there.
struct MovedFrom: Hashable {
    let version: Int
    let entity: String
}
