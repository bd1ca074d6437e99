import Foundation
import StrataModel
import StrataStorage

// MARK: - Values earlier versions stored under names the opening version doesn't (spec 0004 §4.5)

/// A value an earlier model version stored that the opening version doesn't store under
/// that name: a property it removes, renames (`renamingIdentifier`), or a relationship side
/// it no longer records. Taken out in the earlier version's terms, then put back (or
/// dropped) in the opening version's.
struct RetiredValue {
    /// The object.
    var object: StoredObjectID
    /// The model version its record was written with.
    let version: Int
    /// The object's entity in that version (another when the opening version renames it).
    var earlierEntity: String
    /// The property as the earlier version defines it.
    let property: ModelSchema.Property
    /// Its name's renaming identifier in the earlier version (chains of renames).
    let renamingIdentifier: String?
    /// The value taken out (for an unordered to-many: its members as `.references`).
    var value: LogValue

    /// This value with the object and the objects it names moved to their new IDs, when
    /// their entity is a renamed one (`moves`: old ID → new ID, ``EventLog/movedObjectIDs(_:_:)``),
    /// and without the objects of the entities `removed`.
    func movingObjects(_ moves: [StoredObjectID: StoredObjectID], removing removed: Set<String> = []) -> RetiredValue {
        guard !moves.isEmpty || !removed.isEmpty else { return self }
        func moved(_ id: StoredObjectID) -> StoredObjectID? {
            if removed.contains(id.entity) { return nil }
            return moves[id] ?? id
        }
        var copy = self
        copy.object = moved(object) ?? object
        switch value {
        case .reference(let id): copy.value = moved(id).map(LogValue.reference) ?? .null
        case .references(let ids): copy.value = .references(ids.compactMap(moved))
        default: break
        }
        return copy
    }
}

extension EventLog {
    /// The stored properties of earlier stored model versions that the opening version doesn't
    /// store the same way, by entity of the opening model: a name it doesn't have, an
    /// attribute it makes a relationship (or the reverse), or a recorded relationship side
    /// it records differently, derives, or declares on another entity (a renamed parent), or
    /// makes lead to another entity whose objects the stored references may not name
    /// (``keepsReferences(from:in:to:in:renamed:)``; `renamed`: the entities the version
    /// renames, old name → new name).
    func retiredPropertyNames(renamed: [String: String] = [:]) throws -> [String: Set<String>] {
        var retired: [String: Set<String>] = [:]
        for version in catalog.modelVersions where version < modelVersion {
            let other = try catalog.schema(forModelVersion: version)
            for (name, entity) in schema.entities {
                guard let before = other.entities[name] else { continue }
                // Properties that swap names (spec 0004 §4.5): each value goes to another name.
                let swapped = swappedPropertyNames(earlier: other.model.entity(named: name), later: model.entity(named: name))
                for property in before.properties where property.isAttribute || property.isRecorded {
                    if swapped[property.name] != nil {
                        retired[name, default: []].insert(property.name)
                        continue
                    }
                    let now = entity.propertiesByName[property.name]
                    // A relationship's references are filed under its code, which names the
                    // entity declaring it: one a parent's rename or a move up or down the
                    // hierarchy re-declares moves to the new code.
                    let same = now.map { now in
                        property.isAttribute
                            ? now.isAttribute
                            : now.relationship == property.relationship && now.isRecorded && now.qualifiedName == property.qualifiedName
                                && keepsReferences(
                                    from: property.destination ?? "", in: other.model, to: now.destination ?? "", in: model, renamed: renamed)
                                // An inverse made a to-one: the put-back checks each destination
                                // is held once (before, two holders stayed, and verify said so).
                                && (!hasToOneInverse(model, entity: name, relationship: property.name)
                                    || hasToOneInverse(other.model, entity: name, relationship: property.name))
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
        var byVersion: [Int: [TakeOut]] = [:]
        let reader = TableWriter(tables: tables, catalog: catalog, schema: schema, modelVersion: modelVersion, shapes: entityShapes)
        for (entityName, names) in retired.sorted(by: { $0.key < $1.key }) {
            guard (try? reader.entityCode(entityName)) != nil else { continue }
            for (key, id, record) in try reader.records(of: entityName, txn) {
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
                        taken.append(RetiredValue(object: id, version: record.modelVersion, earlierEntity: entityName, property: property, renamingIdentifier: renamingIdentifier, value: .references(members)))
                    } else if let value = record.values[name], value != .null {
                        changes.append(.value(property: name, before: value, after: .null))
                        taken.append(RetiredValue(object: id, version: record.modelVersion, earlierEntity: entityName, property: property, renamingIdentifier: renamingIdentifier, value: value))
                    }
                }
                if !changes.isEmpty {
                    byVersion[record.modelVersion, default: []].append(TakeOut(key: key, id: id, entity: entity, record: record, changes: changes))
                }
            }
        }
        try writeTakeOut(byVersion, txn, sequence: &sequence, timestamp: timestamp)
        return taken
    }

    /// Writes one `migration` transaction per model version of `byVersion` (oldest first,
    /// from `sequence` on, which it advances), in that version's terms: each object's
    /// updates or its delete applied, then the version's indexes rebuilt, as replay does.
    func writeTakeOut(_ byVersion: [Int: [TakeOut]], _ txn: borrowing LMDBTransaction, sequence: inout UInt64, timestamp: Date) throws {
        for (version, objects) in byVersion.sorted(by: { $0.key < $1.key }) {
            let writer = TableWriter(tables: tables, catalog: catalog, schema: try catalog.schema(forModelVersion: version), modelVersion: version)
            var changes: [Change] = []
            for object in objects {
                if let before = object.deleted {
                    try writer.applyDelete(txn, object.key, sequence: sequence, entity: object.entity)
                    changes.append(.delete(object.id, before: before))
                } else {
                    _ = try writer.applyUpdate(txn, object.key, changes: object.changes, sequence: sequence, entity: object.entity, current: object.record)
                    changes.append(.update(object.id, changes: object.changes))
                }
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
    }
}

/// One object's part of a take-out transaction (``EventLog/writeTakeOut(_:_:sequence:timestamp:)``).
struct TakeOut {
    let key: ObjectKey
    let id: StoredObjectID
    /// Its entity in the take-out's model version.
    let entity: ModelSchema.Entity
    /// Its record as read (updates), so it isn't decoded again.
    var record: Record?
    /// The properties set to nil or emptied (an update).
    var changes: [PropertyChange] = []
    /// Its full before-image, when it is deleted instead.
    var deleted: [String: LogValue]?
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
    ///
    /// Objects of `inserting` (a renamed entity's, under their new IDs) get their values at
    /// their insert instead.
    ///
    /// A relationship the opening version makes lead to another entity, whose objects the
    /// values may not name (``keepsReferences(from:in:to:in:renamed:)``), gets nothing back:
    /// its values are dropped, and ``PutBack/drops`` counts the objects that lost them (the
    /// open is refused before, unless it allows removing, spec 0004 §4.7).
    ///
    /// A relationship whose inverse the opening version changes (`Player.team`'s inverse
    /// `Team.players` becoming `Team.roster`) carries the old inverse's values, when the
    /// version takes them out (it removes the old inverse, makes it lead elsewhere, or records
    /// another side), onto the new inverse of the same objects (``carriedInverse(of:earlier:renamed:)``),
    /// in their order — as Core Data's inferred mapping of the kept relationship would.
    ///
    /// `refusingDrops`: a relationship narrowed to a sub-entity of its destination (the open
    /// isn't refused for it beforehand, spec 0004 §4.7) whose stored references don't all name
    /// objects of the new destination refuses the plan, naming them, instead of dropping them
    /// (the open doesn't allow removing).
    func planPutBack(
        _ taken: [RetiredValue], inserting: [StoredObjectID: MovedFrom] = [:], renamed: [String: String] = [:], refusingDrops: Bool = false
    ) throws -> PutBack {
        var problems: [String] = []
        /// Per object and property: the value to set (attributes, to-ones), the destinations
        /// to add (to-many).
        var values: [StoredObjectID: [String: LogValue]] = [:]
        var additions: [StoredObjectID: [String: [StoredObjectID]]] = [:]
        /// Where each (earlier version, earlier entity, property, entity) goes: found once,
        /// not for every object.
        struct Origin: Hashable {
            let version: Int
            let earlierEntity: String
            let property: String
            let entity: String
        }
        var targets: [Origin: ModelSchema.Property?] = [:]
        /// Relationships whose destination changed (their values dropped): the objects that
        /// lost a value, by entity, relationship and both destinations.
        struct Retargeted: Hashable {
            let entity: String
            let relationship: String
            let oldDestination: String
            let newDestination: String
        }
        var retargeted: [Origin: Retargeted] = [:]
        /// Per retargeted origin: the entities whose objects the relationship may name now.
        var fitting: [Origin: Set<String>] = [:]
        /// Per origin: the new inverse of the old inverse, which takes the values over too.
        var carried: [Origin: ModelSchema.Property?] = [:]
        /// Whether a refusal names a narrowed relationship's reference (advice to add).
        var misfits = false
        /// Per recorded relationship ("Entity.property") whose inverse is a to-one: the object
        /// holding each destination put back, which no other may hold.
        var holders: [String: [StoredObjectID: StoredObjectID]] = [:]
        var dropped: [Retargeted: Set<StoredObjectID>] = [:]
        func target(of retired: RetiredValue) throws -> ModelSchema.Property? {
            let origin = Origin(version: retired.version, earlierEntity: retired.earlierEntity, property: retired.property.name, entity: retired.object.entity)
            if let known = targets[origin] { return known }
            let entityName = retired.object.entity
            var found: ModelSchema.Property?
            // The same name, or a rename of it.
            let earlierSchema = try schema(forModelVersion: retired.version)
            if let entity = schema.entities[entityName], let described = schema.model.entity(named: entityName) {
                if let swapped = swappedPropertyNames(earlier: earlierSchema.model.entity(named: retired.earlierEntity), later: described)[
                    origin.property]
                {
                    // Names swapped: the value goes to the property that claims it.
                    found = entity.propertiesByName[swapped]
                } else if let same = entity.propertiesByName[origin.property] {
                    found = same
                } else if let earlier = earlierSchema.entities[retired.earlierEntity],
                    let renamedTo = renameTarget(of: origin.property, identifier: retired.renamingIdentifier, earlier: earlier, later: described),
                    let property = entity.propertiesByName[renamedTo]
                {
                    found = property
                }
            }
            // A relationship made to lead to another entity: what it named can't be carried over.
            if let property = found, let oldDestination = retired.property.destination, let newDestination = property.destination,
                !keepsReferences(from: oldDestination, in: earlierSchema.model, to: newDestination, in: schema.model, renamed: renamed)
            {
                // Only the references to objects it may name now are put back (a sub-entity of
                // the old destination keeps those to its objects); the others are dropped.
                retargeted[origin] = Retargeted(
                    entity: entityName, relationship: property.name, oldDestination: oldDestination, newDestination: newDestination)
                fitting[origin] = Set(schema.model.selfAndSubentityNames(of: newDestination))
            }
            targets[origin] = found
            return found
        }
        func carry(of retired: RetiredValue) throws -> ModelSchema.Property? {
            let origin = Origin(version: retired.version, earlierEntity: retired.earlierEntity, property: retired.property.name, entity: retired.object.entity)
            if let known = carried[origin] { return known }
            let found = carriedInverse(of: retired, earlier: try schema(forModelVersion: retired.version), renamed: renamed)
            carried[origin] = found
            return found
        }
        func put(_ retired: RetiredValue, _ given: LogValue, to target: ModelSchema.Property) {
            let entityName = retired.object.entity
            let old = retired.property
            let described2 = "\(entityName).\(old.name)" + (target.name == old.name ? "" : " (now \(target.name))")
            if old.isAttribute {
                guard let type = target.attributeType, case .attribute(let value) = given else {
                    problems.append("\(described2) was an attribute and the version makes it a relationship")
                    return
                }
                let converted = LogValue.attribute(value.coerced(to: type))
                guard EventCodec.fits(converted, EventCodec.ValueKind(type)) else {
                    problems.append("\(retired.object) has \(described2) = \(value.canonicalJSON) (\(value.typeName)), which doesn't convert to \(type.name) without loss")
                    return
                }
                values[retired.object, default: [:]][target.name] = converted
                return
            }
            guard let storage = target.relationship else {
                problems.append("\(described2) was a relationship and the version makes it an attribute")
                return
            }
            let destinations: [StoredObjectID] =
                switch given {
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
            // A to-one inverse: each destination is held by one object at most.
            if target.isRecorded, hasToOneInverse(schema.model, entity: entityName, relationship: target.name) {
                let inverse = schema.model.entity(named: entityName)?.relationshipsByName[target.name]?.inverseName ?? "?"
                for destination in destinations {
                    if let holder = holders[target.qualifiedName]?[destination], holder != retired.object {
                        problems.append(
                            "\(destination) would be held through \(entityName).\(target.name) by both \(holder) and \(retired.object), but its inverse \(destination.entity).\(inverse) is a to-one")
                    } else {
                        holders[target.qualifiedName, default: [:]][destination] = retired.object
                    }
                }
            }
            switch storage {
            case .toOne:
                guard destinations.count <= 1 else {
                    problems.append("\(retired.object) has \(destinations.count) destinations in \(described2), which the version makes to-one")
                    return
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
        for retired in taken {
            let entityName = retired.object.entity
            let old = retired.property
            let origin = Origin(version: retired.version, earlierEntity: retired.earlierEntity, property: old.name, entity: entityName)
            let primary = try target(of: retired)
            // The old inverse's values go to the kept relationship's new inverse too.
            var puts: [(ModelSchema.Property, LogValue)] = []
            if primary == nil || retargeted[origin] != nil, let carriedTo = try carry(of: retired) {
                puts.append((carriedTo, retired.value))
            }
            if let primary {
                var value = retired.value
                if let change = retargeted[origin], let allowed = fitting[origin] {
                    let named: [StoredObjectID] =
                        switch value {
                        case .reference(let id): [id]
                        case .references(let ids): ids
                        default: []
                        }
                    let misfit = named.filter { !allowed.contains($0.entity) }
                    if !misfit.isEmpty {
                        if refusingDrops {
                            misfits = true
                            for destination in misfit {
                                problems.append(
                                    "\(retired.object).\(primary.name) names \(destination), an object of \(destination.entity), but model version \(modelVersion)'s \(entityName).\(primary.name) leads to \(change.newDestination) (and its sub-entities)")
                            }
                        } else {
                            dropped[change, default: []].insert(retired.object)
                        }
                        let kept = named.filter { allowed.contains($0.entity) }
                        value = if case .reference = value { kept.first.map(LogValue.reference) ?? .null } else { .references(kept) }
                    }
                }
                puts.append((primary, value))
            }
            for (target, value) in puts {
                put(retired, value, to: target)
            }
        }
        guard problems.isEmpty else {
            // A problem of the property itself (an attribute made a relationship) is met once
            // per object: said once, with the count (before, the same sentence five times).
            var counts: [String: Int] = [:]
            var distinct: [String] = []
            for problem in problems {
                if counts[problem] == nil { distinct.append(problem) }
                counts[problem, default: 0] += 1
            }
            let described = distinct.map { problem in
                let count = counts[problem, default: 1]
                return count > 1 ? "\(problem) (\(count) objects)" : problem
            }
            let shown = described.prefix(5).joined(separator: "; ")
            let more = described.count > 5 ? "; and \(described.count - 5) more" : ""
            let advice =
                misfits
                ? "; make those references name objects the relationship leads to first, or open with allowsRemovingEntitiesAndProperties (strata migrate --allow-removing) to drop them"
                : ""
            throw LogError.migration(
                "the stored values can't be taken over by model version \(modelVersion): \(shown)\(more). Nothing was written\(advice)")
        }
        let drops = dropped.map { change, objects in
            EventLog.MigrationDrop(
                entity: change.entity, relationship: change.relationship, oldDestination: change.oldDestination,
                newDestination: change.newDestination, objects: objects.count)
        }.sorted { ($0.entity, $0.relationship, $0.oldDestination) < ($1.entity, $1.relationship, $1.oldDestination) }
        return PutBack(values: values, additions: additions, inserts: inserting, drops: drops)
    }

    /// The relationship of the opening version that takes over `retired`'s values as the new
    /// inverse of its old inverse (spec 0004 §4.5): `retired` is a relationship of the earlier
    /// version whose inverse the opening version keeps (under its name or a rename, on the
    /// destination's entity or its rename) but pairs with another relationship of the
    /// object's entity — one the earlier entity doesn't have and that renames none of its
    /// properties (so it has no values of its own), and whose destination takes every object
    /// the values may name. The pairs the old inverse held are the kept relationship's
    /// membership, which Core Data's inferred mapping carries over by the kept relationship's
    /// name; the new inverse holds the same pairs. Nil otherwise.
    func carriedInverse(of retired: RetiredValue, earlier: ModelSchema, renamed: [String: String]) -> ModelSchema.Property? {
        guard retired.property.destination != nil,
            let earlierEntity = earlier.model.entity(named: retired.earlierEntity),
            let old = earlierEntity.relationshipsByName[retired.property.name],
            let inverseName = old.inverseName,
            let earlierDestination = earlier.entities[old.destinationEntityName],
            let oldInverse = earlier.model.entity(named: old.destinationEntityName)?.relationshipsByName[inverseName],
            let destination = schema.model.entity(named: renamed[old.destinationEntityName] ?? old.destinationEntityName)
        else { return nil }
        // The old inverse as the opening version has it: the same name, or a rename of it.
        let keptName =
            destination.relationshipsByName[inverseName] != nil
            ? inverseName
            : renameTarget(of: inverseName, identifier: oldInverse.renamingIdentifier, earlier: earlierDestination, later: destination)
        guard let keptName, let kept = destination.relationshipsByName[keptName], let newInverseName = kept.inverseName,
            earlierEntity.propertiesByName[newInverseName] == nil,
            let entity = schema.model.entity(named: retired.object.entity),
            let newInverse = entity.relationshipsByName[newInverseName], newInverse.inverseName == kept.name,
            newInverse.renamingIdentifier.map({ identifier in
                earlierEntity.properties.contains { $0.name == identifier || $0.renamingIdentifier == identifier }
            }) != true,
            keepsReferences(
                from: old.destinationEntityName, in: earlier.model, to: newInverse.destinationEntityName, in: schema.model, renamed: renamed)
        else { return nil }
        return schema.entities[entity.name]?.propertiesByName[newInverseName]
    }

    /// Puts the values of `plan` back, at `sequence`, with the fills and conversions
    /// `planned` (§4.4): the objects to insert first, then one update per object, in ID
    /// order. Returns the changes.
    func applyPutBack(
        _ plan: PutBack, planned: [StoredObjectID: PlannedUpdate] = [:], _ txn: borrowing LMDBTransaction, sequence: UInt64
    ) throws -> [Change] {
        let (values, additions) = (plan.values, plan.additions)
        var changes: [Change] = []
        for (id, earlier) in plan.inserts.sorted(by: { $0.key < $1.key }) {
            changes.append(try insertMoved(id, from: earlier, values: values[id] ?? [:], additions: additions[id] ?? [:], txn, sequence: sequence))
        }
        for id in Set(values.keys).union(additions.keys).union(planned.keys).subtracting(plan.inserts.keys).sorted() {
            guard let entity = schema.entities[id.entity] else { continue }
            let key = try key(id)
            let read = try planned[id].map(\.record) ?? readRecord(txn, key, entityName: id.entity)
            guard let record = read else { continue }
            var propertyChanges: [PropertyChange] = planned[id]?.changes ?? []
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
    /// Objects inserted with their values (a renamed entity's), before the updates, and
    /// where they came from.
    var inserts: [StoredObjectID: MovedFrom] = [:]
    /// Relationships made to lead to another entity, whose values were dropped (spec 0004 §4.5).
    var drops: [EventLog.MigrationDrop] = []
}

/// Whether relationship `name` of `entity` has an inverse that is a to-one in `model` (a
/// one-to-one, or an ordered or unordered to-many whose destinations each belong to one
/// object).
func hasToOneInverse(_ model: ManagedObjectModel, entity: String, relationship name: String) -> Bool {
    guard let relationship = model.entity(named: entity)?.relationshipsByName[name], let inverse = relationship.inverseName,
        let back = model.entity(named: relationship.destinationEntityName)?.relationshipsByName[inverse]
    else { return false }
    return !back.isToMany
}

/// Whether a relationship that led to `oldDestination` in `earlier` keeps its stored
/// references valid when it leads to `newDestination` in `later` (spec 0004 §4.5): every
/// object it may have named — of `oldDestination` or a sub-entity of it, abstract ones aside,
/// which have no objects — is, in `later` (under its new name, when `renamed`, old name → new
/// name, gives one), an object of `newDestination` or of a sub-entity of it, or of an entity
/// `later` removes (whose objects, and the references to them, go). The same destination, a
/// renamed one, or a new parent of it keeps them; another entity, or a sub-entity of the old
/// destination that leaves out objects it may have named, doesn't — Core Data infers no
/// mapping for a relationship whose destination changes.
func keepsReferences(
    from oldDestination: String, in earlier: ManagedObjectModel, to newDestination: String, in later: ManagedObjectModel,
    renamed: [String: String]
) -> Bool {
    let allowed = Set(later.selfAndSubentityNames(of: newDestination))
    return earlier.selfAndSubentityNames(of: oldDestination).allSatisfy { name in
        guard let entity = earlier.entity(named: name), !entity.isAbstract else { return true }
        let now = renamed[name] ?? name
        return later.entity(named: now) == nil || allowed.contains(now)
    }
}

/// The property of `later` (a later model version's entity) that renames property `name` of
/// `earlier` (whose `renamingIdentifier` in the earlier version is `identifier`): one whose
/// `renamingIdentifier` is that name or shares that identifier (Core Data matches renaming
/// identifiers), and whose own name the earlier version doesn't have (such a property keeps
/// its own values). Its identifier may be its own name: a property renamed back to its first
/// name, kept as the identifier of every rename since (Core Data's canonical name; before,
/// such a property was no rename, and the values were dropped as a removed property's).
/// Nil when none does.
func renameTarget(of name: String, identifier: String?, earlier: ModelSchema.Entity, later: EntityDescription) -> String? {
    later.properties.first { property in
        guard let renaming = property.renamingIdentifier, earlier.propertiesByName[property.name] == nil
        else { return false }
        return renaming == name || renaming == identifier
    }?.name
}

/// What a later model version's items (entities, or one entity's properties) claim by their
/// renaming identifiers while keeping a name the earlier version has (spec 0004 §4.5–4.6):
/// `(new, old)` for each later item whose identifier — one the earlier item of its name
/// doesn't have — names another earlier item (by its name, or its own identifier).
func nameClaims(
    earlier: [(name: String, renamingIdentifier: String?)], later: [(name: String, renamingIdentifier: String?)]
) -> [(new: String, old: String)] {
    later.sorted { $0.name < $1.name }.compactMap { item -> (new: String, old: String)? in
        guard let identifier = item.renamingIdentifier, identifier != item.name,
            let before = earlier.first(where: { $0.name == item.name }), before.renamingIdentifier != identifier,
            let old = earlier.first(where: { $0.name == identifier }) ?? earlier.first(where: { $0.renamingIdentifier == identifier }),
            old.name != item.name
        else { return nil }
        return (item.name, old.name)
    }
}

/// The claims (``nameClaims(earlier:later:)``) as a swap, old name → new name, when they
/// exchange names among themselves — each old name claimed once, and the names claimed are
/// the names claiming (A ↔ B, or a longer round): every value then has one place to go and
/// every place one value. Nil otherwise (one item claiming a name whose item stays put).
func completeSwap(_ claims: [(new: String, old: String)]) -> [String: String]? {
    let olds = claims.map(\.old)
    guard Set(olds).count == claims.count, Set(olds) == Set(claims.map(\.new)) else { return nil }
    return Dictionary(uniqueKeysWithValues: claims.map { ($0.old, $0.new) })
}

/// The properties of `later` (a later version's entity) that swap names with `earlier`'s
/// (the same entity, or the one it renames, in an earlier version): old name → new name
/// (spec 0004 §4.5). Empty when none do, or their claims aren't a complete swap (which the
/// open refuses, ``EventLog/refuseAmbiguousRenames()``).
func swappedPropertyNames(earlier: EntityDescription?, later: EntityDescription?) -> [String: String] {
    guard let earlier, let later, later.properties.contains(where: { $0.renamingIdentifier != nil }) else { return [:] }
    let claims = nameClaims(
        earlier: earlier.properties.map { ($0.name, $0.renamingIdentifier) }, later: later.properties.map { ($0.name, $0.renamingIdentifier) })
    return claims.isEmpty ? [:] : completeSwap(claims) ?? [:]
}
