import Foundation
import StrataModel
import StrataStorage

// MARK: - Names across versions, for persisted undo (spec 0006 §13)

extension EventLog {
    /// The name the opening model gives the entity that model version `version` called
    /// `name`: the same name, or the one its renames lead to through the stored versions
    /// after it (§4.6); nil when one of them removed it.
    func currentEntityName(_ name: String, modelVersion version: Int) -> String? {
        currentNames(entity: name, property: nil, modelVersion: version)?.entity
    }

    /// The name the opening model gives the stored property that model version `version`
    /// called `name` in `entity`: the same name, or the one its renames lead to through the
    /// stored versions after it (spec 0004 §4.5); nil when one of them removed it (or its
    /// entity). Versions after the opening one aren't followed.
    func currentPropertyName(_ name: String, entity: String, modelVersion version: Int) -> String? {
        currentNames(entity: entity, property: name, modelVersion: version)?.property
    }

    /// The entity and property names: matched from `version` straight to the opening version
    /// first, as a migration carries a record's values (spec 0004 §4.5–4.6) — stored versions
    /// in between may never have migrated anything (one whose open was refused) —, else
    /// followed version by version (renames whose identifiers name the previous name).
    private func currentNames(entity: String, property: String?, modelVersion version: Int) -> (entity: String, property: String?)? {
        guard version < modelVersion else { return (entity, property) }
        if let direct = directNames(entity: entity, property: property, modelVersion: version) { return direct }
        var (entityName, propertyName) = (entity, property)
        var earlierVersion = version
        for later in catalog.modelVersions where later > version && later <= modelVersion {
            guard let earlierSchema = try? catalog.schema(forModelVersion: earlierVersion),
                let laterSchema = try? catalog.schema(forModelVersion: later)
            else { return nil }
            let earlierDescribed = earlierSchema.model.entity(named: entityName)
            var laterName = entityName
            if laterSchema.model.entity(named: entityName) == nil {
                let identifier = earlierDescribed?.renamingIdentifier
                guard let renamed = laterSchema.model.entities.first(where: { candidate in
                    guard let renaming = candidate.renamingIdentifier,
                        earlierSchema.model.entity(named: candidate.name) == nil
                    else { return false }
                    return renaming == entityName || renaming == identifier
                }) else { return nil }
                laterName = renamed.name
            }
            if let current = propertyName {
                guard let earlier = earlierSchema.entities[entityName], let laterEntity = laterSchema.entities[laterName],
                    let described = laterSchema.model.entity(named: laterName)
                else { return nil }
                if let swapped = swappedPropertyNames(earlier: earlierDescribed, later: described)[current] {
                    propertyName = swapped
                } else if laterEntity.propertiesByName[current] == nil {
                    let identifier = earlierDescribed?.propertiesByName[current]?.renamingIdentifier
                    guard let renamed = renameTarget(of: current, identifier: identifier, earlier: earlier, later: described) else { return nil }
                    propertyName = renamed
                }
            }
            entityName = laterName
            earlierVersion = later
        }
        return (entityName, propertyName)
    }

    /// The names the opening model gives `entity` and `property` of model version `version`
    /// by the migration's rules applied to those two versions alone: the same name, or the
    /// one whose renaming identifier matches it; nil when they don't match.
    private func directNames(entity: String, property: String?, modelVersion version: Int) -> (entity: String, property: String?)? {
        guard let earlierSchema = try? catalog.schema(forModelVersion: version) else { return nil }
        let described = earlierSchema.model.entity(named: entity)
        let entityName: String
        if model.entity(named: entity) != nil {
            entityName = entity
        } else if let renamed = model.entities.first(where: { candidate in
            guard let renaming = candidate.renamingIdentifier,
                earlierSchema.model.entity(named: candidate.name) == nil
            else { return false }
            return renaming == entity || renaming == described?.renamingIdentifier
        }) {
            entityName = renamed.name
        } else {
            return nil
        }
        guard let property else { return (entityName, nil) }
        guard let earlier = earlierSchema.entities[entity], let later = schema.entities[entityName],
            let laterDescribed = model.entity(named: entityName)
        else { return nil }
        if let swapped = swappedPropertyNames(earlier: described, later: laterDescribed)[property] { return (entityName, swapped) }
        if later.propertiesByName[property] != nil { return (entityName, property) }
        let identifier = described?.propertiesByName[property]?.renamingIdentifier
        return renameTarget(of: property, identifier: identifier, earlier: earlier, later: laterDescribed).map { (entityName, $0) }
    }

    /// The values of an object of `entity` (the opening model's name) that model version
    /// `version` wrote and no migration carried over — one deleted before it, read back as it
    /// was then — with what a migration fills in for the objects it carries (§4.4): each
    /// attribute with a default value that `version` didn't have (under its name or one
    /// renamed to it), or had with no value where it is mandatory now, takes the default.
    /// `values` are under the opening model's names already (``translating(_:fromModelVersion:)``).
    package func filledAsMigrated(_ values: [String: LogValue], entity: String, fromModelVersion version: Int) -> [String: LogValue] {
        guard version < modelVersion, let described = model.entity(named: entity), let current = schema.entities[entity],
            let earlier = try? catalog.schema(forModelVersion: version)
        else { return values }
        // The opening model's names of the attributes `version` had.
        var had: Set<String> = []
        for old in earlier.model.entities where currentEntityName(old.name, modelVersion: version) == entity {
            for attribute in old.allAttributes where attribute.isPersisted {
                if let name = currentPropertyName(attribute.name, entity: old.name, modelVersion: version) { had.insert(name) }
            }
        }
        var filled = values
        for attribute in described.allAttributes where attribute.isPersisted && !attribute.isDerived {
            guard (values[attribute.name] ?? .null) == .null, let fallback = attribute.defaultValue,
                !had.contains(attribute.name) || !attribute.isOptional,
                let property = current.propertiesByName[attribute.name]
            else { continue }
            let value = LogValue.attribute(fallback.coerced(to: attribute.attributeType))
            if EventCodec.fits(value, current.valueKinds[property.code]) { filled[attribute.name] = value }
        }
        return filled
    }

    /// `changes` (one transaction's, translated to the opening model's names) on the
    /// relationship sides the opening model records (spec 0004 §4.1): a change an earlier
    /// version recorded on a side a later one moved to the other end is rewritten there —
    /// each object that gained or lost an owner through it gets the update of its own side
    /// (a to-one set from or to that owner, or a membership change of an unordered to-many),
    /// after the transaction's own changes. An ordered to-many recorded now in place of
    /// the side the transaction recorded can't be rebuilt from it (the positions are
    /// unknown): that change is left out, as are values of sides not recorded now.
    package func onRecordedSides(_ changes: [Change]) -> [Change] {
        var result: [Change] = []
        result.reserveCapacity(changes.count)
        // Per object that gained or lost an owner, per now-recorded property: to-one before
        // and after (null unless an owner was lost or gained), or members added and removed.
        var toOne: [StoredObjectID: [String: (before: LogValue, after: LogValue)]] = [:]
        var members: [StoredObjectID: [String: (added: [StoredObjectID], removed: [StoredObjectID])]] = [:]
        var touchedOrder: [StoredObjectID] = []
        func ids(_ value: LogValue?) -> [StoredObjectID] {
            switch value {
            case .reference(let id)?: [id]
            case .references(let ids)?: ids
            default: []
            }
        }
        func note(owner: StoredObjectID, property name: String, lost: [StoredObjectID], gained: [StoredObjectID]) {
            guard let property = schema.entities[owner.entity]?.propertiesByName[name],
                case .derived(_, let inverse)? = property.relationship
            else { return }
            for (targets, gaining) in [(lost, false), (gained, true)] {
                for target in targets {
                    guard let side = schema.entities[target.entity]?.propertiesByName[inverse] else { continue }
                    if toOne[target] == nil && members[target] == nil { touchedOrder.append(target) }
                    switch side.relationship {
                    case .toOne?:
                        var entry = toOne[target, default: [:]][inverse] ?? (.null, .null)
                        if gaining { entry.after = .reference(owner) } else { entry.before = .reference(owner) }
                        toOne[target, default: [:]][inverse] = entry
                    case .unorderedToMany?:
                        var entry = members[target, default: [:]][inverse] ?? ([], [])
                        if gaining { entry.added.append(owner) } else { entry.removed.append(owner) }
                        members[target, default: [:]][inverse] = entry
                    default: continue
                    }
                }
            }
        }
        for change in changes {
            guard let entity = schema.entities[change.objectID.entity] else {
                result.append(change)
                continue
            }
            func isDerivedSide(_ name: String) -> Bool { entity.propertiesByName[name].map { !$0.isRecorded } ?? false }
            let owner = change.objectID
            switch change {
            case .insert(_, let values):
                for (name, value) in values where isDerivedSide(name) { note(owner: owner, property: name, lost: [], gained: ids(value)) }
            case .delete(_, let before):
                for (name, value) in before where isDerivedSide(name) { note(owner: owner, property: name, lost: ids(value), gained: []) }
            case .update(_, let propertyChanges):
                for propertyChange in propertyChanges where isDerivedSide(propertyChange.property) {
                    switch propertyChange {
                    case .value(let name, let before, let after):
                        let (old, new) = (ids(before), ids(after))
                        let (oldSet, newSet) = (Set(old), Set(new))
                        note(owner: owner, property: name, lost: old.filter { !newSet.contains($0) }, gained: new.filter { !oldSet.contains($0) })
                    case .membership(let name, let added, let removed):
                        note(owner: owner, property: name, lost: removed, gained: added)
                    }
                }
            }
            result.append(recordedSidesOnly(change))
        }
        for target in touchedOrder {
            var propertyChanges: [PropertyChange] = []
            for (name, values) in (toOne[target] ?? [:]).sorted(by: { $0.key < $1.key }) where values.before != values.after {
                propertyChanges.append(.value(property: name, before: values.before, after: values.after))
            }
            for (name, delta) in (members[target] ?? [:]).sorted(by: { $0.key < $1.key }) {
                propertyChanges.append(.membership(property: name, added: delta.added, removed: delta.removed))
            }
            if !propertyChanges.isEmpty { result.append(.update(target, changes: propertyChanges)) }
        }
        return result
    }

    /// `change` (translated to the opening model's names) without the relationship sides the
    /// opening model doesn't record (spec 0004 §4.1): a side an earlier version recorded that
    /// a later one moved to the other end. Records never hold such a side's values.
    private func recordedSidesOnly(_ change: Change) -> Change {
        guard let entity = schema.entities[change.objectID.entity] else { return change }
        func recorded(_ name: String) -> Bool { entity.propertiesByName[name]?.isRecorded ?? false }
        switch change {
        case .insert(let id, let values): return .insert(id, values: values.filter { recorded($0.key) })
        case .delete(let id, let before): return .delete(id, before: before.filter { recorded($0.key) })
        case .update(let id, let changes): return .update(id, changes: changes.filter { recorded($0.property) })
        }
    }

    /// The object model version `version` named `id` under the opening model's name for its
    /// entity (the same primary key: a rename moves objects with their keys, §4.6); nil when
    /// a later version removed the entity. As ``translating(_:fromModelVersion:)`` moves a
    /// group's objects.
    package func translating(_ id: StoredObjectID, fromModelVersion version: Int) -> StoredObjectID? {
        guard version < modelVersion else { return id }
        return currentEntityName(id.entity, modelVersion: version).map { StoredObjectID(entity: $0, primaryKey: id.primaryKey) }
    }

    /// `group`, written with model version `version`, with its properties under the opening
    /// model's names (``currentPropertyName(_:entity:modelVersion:)``) and its attribute
    /// values converted to their types there when that loses nothing, as a migration
    /// converts them (§4.4); properties a later version removed are left out. A group of the
    /// opening version comes back as it is.
    package func translating(_ group: ChangeGroup, fromModelVersion version: Int) -> ChangeGroup {
        guard version < modelVersion else { return group }
        // Names are followed through the versions once per entity and property, not per change.
        var entityNames: [String: String?] = [:]
        var propertyNames: [String: [String: String?]] = [:]
        func currentEntity(_ name: String) -> String? {
            if let known = entityNames[name] { return known }
            let found = currentEntityName(name, modelVersion: version)
            entityNames[name] = found
            return found
        }
        func currentProperty(_ name: String, _ entity: String) -> String? {
            if let known = propertyNames[entity]?[name] { return known }
            let found = currentPropertyName(name, entity: entity, modelVersion: version)
            propertyNames[entity, default: [:]][name] = found
            return found
        }
        /// The object's ID under its entity's current name (the same primary key).
        func moved(_ id: StoredObjectID) -> StoredObjectID? {
            currentEntity(id.entity).map { StoredObjectID(entity: $0, primaryKey: id.primaryKey) }
        }
        func converted(_ value: LogValue, _ name: String, _ entity: String) -> LogValue {
            switch value {
            case .reference(let id): return moved(id).map(LogValue.reference) ?? .null
            case .references(let ids): return .references(ids.compactMap(moved))
            case .null: return value
            case .attribute(let attribute):
                guard let type = schema.entities[entity]?.propertiesByName[name]?.attributeType else { return value }
                let coerced = LogValue.attribute(attribute.coerced(to: type))
                return EventCodec.fits(coerced, EventCodec.ValueKind(type)) ? coerced : value
            }
        }
        func values(_ values: [String: LogValue], _ earlier: StoredObjectID, _ current: StoredObjectID) -> [String: LogValue] {
            var result: [String: LogValue] = [:]
            for (name, value) in values {
                if let now = currentProperty(name, earlier.entity) {
                    result[now] = converted(value, now, current.entity)
                }
            }
            return result
        }
        var translated = group
        translated.changes = group.changes.compactMap { change in
            // An object of an entity a later version removed: nothing of it is left to undo.
            guard let id = moved(change.objectID) else { return nil }
            switch change {
            case .insert(let earlier, let inserted): return .insert(id, values: values(inserted, earlier, id))
            case .delete(let earlier, let before): return .delete(id, before: values(before, earlier, id))
            case .update(let earlier, let changes):
                return .update(
                    id,
                    changes: changes.compactMap { change in
                        guard let current = currentProperty(change.property, earlier.entity) else { return nil }
                        switch change {
                        case .value(_, let before, let after):
                            return .value(property: current, before: converted(before, current, id.entity), after: converted(after, current, id.entity))
                        case .membership(_, let added, let removed):
                            return .membership(property: current, added: added.compactMap(moved), removed: removed.compactMap(moved))
                        }
                    })
            }
        }
        return translated
    }
}

extension EventLog {
    /// The names stored model versions later than the opening one give the opening model's
    /// entity `name`, when they rename it (spec 0004 §4.6), followed version by version.
    func laterEntityNames(_ name: String) -> [String] {
        var names: [String] = []
        var current = name
        var earlierVersion = modelVersion
        for later in catalog.modelVersions where later > modelVersion {
            guard let earlierSchema = try? catalog.schema(forModelVersion: earlierVersion),
                let laterSchema = try? catalog.schema(forModelVersion: later)
            else { break }
            if laterSchema.model.entity(named: current) == nil {
                let identifier = earlierSchema.model.entity(named: current)?.renamingIdentifier
                guard let renamed = laterSchema.model.entities.first(where: { candidate in
                    guard let renaming = candidate.renamingIdentifier,
                        earlierSchema.model.entity(named: candidate.name) == nil
                    else { return false }
                    return renaming == current || renaming == identifier
                }) else { break }
                current = renamed.name
                if !names.contains(current) { names.append(current) }
            }
            earlierVersion = later
        }
        return names
    }

    /// For each entity of the opening model that a later stored model version renames: the
    /// codes of its later names, whose primary-key counters its inserts stay above. The later
    /// version's migration moves this entity's objects under the same primary keys (§4.6), so
    /// an earlier model inserting after it mustn't give out a key the later one gave out
    /// under the new name. Empty when no later version is stored.
    func counterPartners() -> [UInt16: [UInt16]] {
        guard let newest = catalog.newestModelVersion, newest > modelVersion else { return [:] }
        var partners: [UInt16: [UInt16]] = [:]
        for entity in model.entities {
            let codes = laterEntityNames(entity.name).compactMap { try? catalog.entityCode($0) }
            guard !codes.isEmpty, let code = try? catalog.entityCode(entity.name) else { continue }
            partners[code] = codes
        }
        return partners
    }
}
