import Foundation
import StrataLog
import StrataModel
import StrataPredicate
import StrataStorage

extension ContextCore {
    var hasChanges: Bool {
        !retained.isEmpty || !journal.open.isEmpty
    }

    var insertedObjects: [ManagedObject] { retained.values.filter { $0.isInsertedFlag && !$0.isDeletedFlag } }
    var updatedObjects: [ManagedObject] { retained.values.filter { $0.isUpdated } }
    var deletedObjects: [ManagedObject] { retained.values.filter { $0.isDeletedFlag } }

    // MARK: - Validation

    /// Every model rule for one object, plus the object's own `validateValue(_:forKey:)`.
    func validateRules(_ object: ManagedObject) throws {
        var failures: [ValidationFailure] = []
        let entity = object.entity
        // A plain ManagedObject validates with the base `validateValue`: check the stored
        // value itself rather than boxing it as `Any` and converting it back.
        let baseValidation = type(of: object) == ManagedObject.self
        for attribute in entity.allAttributes {
            guard let property = object.info.properties[attribute.name] else { continue }
            let current = object.currentValue(property)
            if case .invalid(let what) = current {
                failures.append(ValidationFailure(
                    code: .managedObjectValidation, entity: entity.name, key: attribute.name, value: nil,
                    message: "\(entity.name).\(attribute.name) holds \(attribute.attributeType.name) values, not \(what)"))
                continue
            }
            if baseValidation, case .attribute(let typed) = current {
                failures += attribute.validate(typed, entity: entity.name, localization: model.localization)
                continue
            }
            var value: Any? = object.externalValue(current)
            do {
                try object.validateValue(&value, forKey: attribute.name)
            } catch ContextError.validation(let found) {
                failures += found
            } catch {
                failures.append(ValidationFailure(
                    code: .managedObjectValidation, entity: entity.name, key: attribute.name,
                    value: { if case .attribute(let v) = current { return v } else { return nil } }(), message: "\(error)"))
            }
        }
        for relationship in entity.allRelationships {
            guard let property = object.info.properties[relationship.name] else { continue }
            let current = object.currentValue(property)
            if case .invalid(let what) = current {
                failures.append(ValidationFailure(
                    code: .managedObjectValidation, entity: entity.name, key: relationship.name, value: nil,
                    message: "\(entity.name).\(relationship.name) holds \(relationship.destinationEntityName) objects, not \(what)"))
                continue
            }
            failures += relationship.validate(count: current.ids.count, entity: entity.name, localization: model.localization)
        }
        if !failures.isEmpty { throw ContextError.validation(failures) }
    }

    /// Deny rules: a deleted object whose deny relationship still has destinations (1600).
    func validateDeletion(_ object: ManagedObject) throws {
        var failures: [ValidationFailure] = []
        for property in object.info.properties.values where property.isRelationship && property.deleteRule == .deny {
            let targets = (object.changes[property.name] ?? object.currentValue(property)).ids.filter { registered($0)?.isDeletedFlag != true }
            if !targets.isEmpty {
                failures.append(ValidationFailure(
                    code: ValidationFailure.Code(rawValue: 1600), entity: object.entity.name, key: property.name, value: nil,
                    message: "\(object.entity.name).\(property.name) still holds \(targets.count) object(s) (\(targets.map(\.description).joined(separator: ", "))); its delete rule denies deleting \(object.objectID)"))
            }
        }
        if !failures.isEmpty { throw ContextError.validation(failures) }
    }

    // MARK: - Saving

    func save(in context: isolated ManagedObjectContext) throws {
        // A save closes the current undo group even inside explicit grouping: what it writes
        // is one group; later changes in the explicit group form the next one.
        closeOpenGroup()
        if !problems.isEmpty {
            let found = problems
            problems.removeAll()
            throw found.count == 1 ? found[0] : ContextError.invalidArgument(found.map(\.description).joined(separator: "\n"))
        }
        guard !retained.isEmpty || !pending.isEmpty else { return }
        postPendingChanges()
        post(.willSave(ContextWillSave(contextName: name)))
        for object in Array(retained.values) { object.willSave() }
        closeOpenGroup()
        postPendingChanges()

        // Validate everything; report every failure at once; write nothing if any.
        var failures: [ValidationFailure] = []
        for object in retained.values.sorted(by: { $0.objectID < $1.objectID }) {
            do {
                if object.isDeletedFlag { try object.validateForDelete() }
                else if object.isInsertedFlag { try object.validateForInsert() }
                else if object.isUpdated { try object.validateForUpdate() }
            } catch ContextError.validation(let found) {
                failures += found
            } catch {
                failures.append(ValidationFailure(code: .managedObjectValidation, entity: object.entity.name, key: "", value: nil, message: "\(error)"))
            }
        }
        if !failures.isEmpty { throw ContextError.validation(failures) }

        // A child's save goes to its parent, not to the store.
        if let parent = parentContext {
            try pushToParent(parent)
            return
        }
        let store = try self.store()
        for attempt in 1...Self.maximumSaveAttempts {
            // Optimistic locking: conflicts found now go to the merge policy; the versions
            // seen are checked again inside the commit, so no writer can slip in between.
            let expected = try resolveVersionConflicts(in: context)
            let (draft, groupIndex) = makeDraft(expectedVersions: expected)
            guard !draft.isEmpty else {
                finishSave(sequence: nil, idMap: [:], groupIndex: [:], result: nil)
                return
            }
            let result: CommitResult
            do {
                result = try store.log.commit(draft)
            } catch let error as LogError {
                switch error {
                case .versionMismatch where attempt < Self.maximumSaveAttempts:
                    continue  // another writer slipped in: check again
                case .uniquenessViolation where attempt < Self.maximumSaveAttempts:
                    let conflicts = try detectConstraintConflicts()
                    guard !conflicts.isEmpty else { throw ContextError.storeRefused(error.description) }
                    try mergePolicy.resolve(constraintConflicts: conflicts, in: context)
                    closeOpenGroup()
                    continue
                case .uniquenessViolation, .missingReference, .objectExists, .objectNotFound:
                    throw ContextError.storeRefused(error.description)
                default:
                    throw ContextError.store(error.description)
                }
            }
            var idMap: [ManagedObjectID: ManagedObjectID] = [:]
            for (draftID, storedID) in result.permanentIDs {
                guard case .temporary(let entity, let uuid) = draftID else { continue }
                idMap[ManagedObjectID(entityName: entity, storage: .temporary(uuid))] = .permanent(storedID, store: store.identifier)
            }
            finishSave(sequence: result.sequence, idMap: idMap, groupIndex: groupIndex, result: result)
            return
        }
    }

    /// The transaction for everything pending: one event group per pending effect, then the
    /// reconciliation group; and which pending effect became which event group.
    func makeDraft(expectedVersions: [StoredObjectID: UInt64]) -> (TransactionDraft, [Int: Int]) {
        var draft = TransactionDraft(author: transactionAuthor, contextName: name)
        draft.expectedVersions = expectedVersions
        // The transaction is an undo (or redo) when every group it saves is one, named by its
        // first; each group also carries its own origin, which persisted undo relies on.
        if let first = pending.first {
            switch first.kind {
            case .undo(let sequence, let group) where pending.allSatisfy({ if case .undo = $0.kind { true } else { false } }):
                draft.kind = .undo(of: sequence, group: group)
            case .redo(let sequence, let group) where pending.allSatisfy({ if case .redo = $0.kind { true } else { false } }):
                draft.kind = .redo(of: sequence, group: group)
            default: break
            }
        }
        var groupIndex: [Int: Int] = [:]  // pending index → event group index
        var eventGroups = 0
        var covered: [ManagedObjectID: [String: PropertyValue]] = [:]
        var coveredInserts: Set<ManagedObjectID> = []
        var coveredDeletes: Set<ManagedObjectID> = []
        for (index, effect) in pending.enumerated() {
            let operations = self.operations(for: effect.changes, covered: &covered, inserts: &coveredInserts, deletes: &coveredDeletes)
            guard !operations.isEmpty else { continue }
            let origin: GroupOrigin? = switch effect.kind {
            case .user: nil
            case .undo(let sequence, let group): .undo(of: sequence, group: group)
            case .redo(let sequence, let group): .redo(of: sequence, group: group)
            }
            draft.beginGroup(actionName: effect.changes.actionName, origin: origin)
            for operation in operations { draft.append(operation) }
            groupIndex[index] = eventGroups
            eventGroups += 1
        }
        // Changes the journal didn't see (registration disabled, primitive sets) go last.
        let reconciliation = self.reconciliation(covered: covered, inserts: coveredInserts, deletes: coveredDeletes)
        if !reconciliation.isEmpty {
            draft.beginGroup(actionName: nil)
            for operation in reconciliation { draft.append(operation) }
        }
        return (draft, groupIndex)
    }

    func draftID(_ id: ManagedObjectID) -> DraftObjectID {
        switch id.storage {
        case .temporary(let uuid): .temporary(entity: id.entityName, id: uuid)
        case .permanent(_, let pk): .stored(StoredObjectID(entity: id.entityName, primaryKey: pk))
        }
    }

    func draftValue(_ value: PropertyValue, _ property: PropertyInfo) -> DraftValue {
        switch value {
        case .attribute(let v): v.map { .attribute($0) } ?? .null
        case .toOne(let id): id.map { .reference(draftID($0)) } ?? .null
        case .toMany(let ids): .references(ids.map(draftID))
        case .invalid: .null
        }
    }

    /// A group's changes as draft operations, recorded sides only.
    func operations(
        for group: UndoGroup, covered: inout [ManagedObjectID: [String: PropertyValue]], inserts: inout Set<ManagedObjectID>,
        deletes: inout Set<ManagedObjectID>
    ) -> [TransactionDraft.Operation] {
        var operations: [TransactionDraft.Operation] = []
        for id in group.order {
            guard let change = group.changes[id], let info = entities[id.entityName] else { continue }
            switch change.kind {
            case .inserted:
                var values: [String: DraftValue] = [:]
                for (key, value) in change.values {
                    guard let property = info.properties[key], property.isRecorded else { continue }
                    values[key] = draftValue(value, property)
                    covered[id, default: [:]][key] = value
                }
                for (key, property) in info.properties where property.isRecorded && values[key] == nil {
                    covered[id, default: [:]][key] = property.emptyValue
                }
                operations.append(.insert(draftID(id), values: values))
                inserts.insert(id)
                deletes.remove(id)
            case .updated:
                var values: [String: DraftValue] = [:]
                for (key, value) in change.new {
                    guard let property = info.properties[key], property.isRecorded else { continue }
                    values[key] = draftValue(value, property)
                    covered[id, default: [:]][key] = value
                }
                if !values.isEmpty { operations.append(.update(draftID(id), values: values)) }
                for (key, membership) in change.memberships {
                    guard let property = info.properties[key], property.isRecorded else { continue }
                    operations.append(.membership(draftID(id), property: key, added: membership.added.map(draftID), removed: membership.removed.map(draftID)))
                    covered[id, default: [:]][key] = nil
                }
            case .deleted:
                operations.append(.delete(draftID(id)))
                deletes.insert(id)
                inserts.remove(id)
                covered[id] = nil
            }
        }
        return operations
    }

    /// Operations for changes no journal group describes.
    func reconciliation(covered: [ManagedObjectID: [String: PropertyValue]], inserts: Set<ManagedObjectID>, deletes: Set<ManagedObjectID>)
        -> [TransactionDraft.Operation]
    {
        var operations: [TransactionDraft.Operation] = []
        for object in retained.values.sorted(by: { $0.objectID < $1.objectID }) {
            let id = object.objectID
            if object.isDeletedFlag {
                if !deletes.contains(id) && !(id.isTemporaryID) { operations.append(.delete(draftID(id))) }
                continue
            }
            var values: [String: DraftValue] = [:]
            let needsInsert = object.isInsertedFlag && !inserts.contains(id)
            for (key, property) in object.info.properties where property.isRecorded {
                let current = object.currentValue(property)
                if needsInsert {
                    if !current.isNil { values[key] = draftValue(current, property) }
                } else if object.changes[key] != nil || (object.isInsertedFlag && covered[id]?[key] != nil) {
                    let expected = covered[id]?[key] ?? (object.isInsertedFlag ? property.emptyValue : object.committed?[key] ?? property.emptyValue)
                    if expected != current { values[key] = draftValue(current, property) }
                }
            }
            if needsInsert {
                operations.append(.insert(draftID(id), values: values))
            } else if !values.isEmpty {
                operations.append(.update(draftID(id), values: values))
            }
        }
        return operations
    }

    /// After a successful commit (or a save with nothing to write): permanent IDs, committed
    /// values and versions, undo groups marked saved, `didSave`, the did-save notification,
    /// and the in-process broadcast to automatically merging contexts.
    func finishSave(sequence: UInt64?, idMap: [ManagedObjectID: ManagedObjectID], groupIndex: [Int: Int], result: CommitResult?) {
        let saved = Array(retained.values)
        let insertedObjects = saved.filter { $0.isInsertedFlag && !$0.isDeletedFlag }
        let updatedObjects = saved.filter { !$0.isInsertedFlag && !$0.isDeletedFlag && !$0.changes.isEmpty }
        let deletedObjects = saved.filter(\.isDeletedFlag)
        if let sequence {
            for (index, effect) in pending.enumerated() where effect.kind == .user {
                if let group = groupIndex[index] { effect.source.saved = (sequence, group) }
            }
        }
        remapIDs(idMap)
        // The objects whose stored record this transaction changed now have its version.
        var written: Set<StoredObjectID> = []
        if let result {
            for change in result.event.changes {
                if case .delete = change { continue }
                written.insert(change.objectID)
            }
        }
        for object in saved {
            if object.isDeletedFlag {
                object.isDeletedFlag = false
                object.isInvalidated = true
                registry[object.objectID] = nil
                continue
            }
            var committed = object.committed ?? [:]
            for (key, value) in object.changes { committed[key] = value }
            object.committed = committed
            object.changes.removeAll()
            object.isInsertedFlag = false
            if let sequence, let stored = object.objectID.storedID, written.contains(stored) { object.version = sequence }
            register(object)
        }
        retained.removeAll()
        insertionOrder.removeAll()
        restored.removeAll()
        pending.removeAll()
        lockedObjects.removeAll()
        if let sequence { noteOwnCommit(sequence) }
        for object in saved where !object.isInvalidated { object.didSave() }

        let storeIdentifier = parentContext == nil ? try? store().identifier : nil
        let didSave = ContextDidSave(
            inserted: Set(insertedObjects.map(\.objectID)), updated: Set(updatedObjects.map(\.objectID)),
            deleted: Set(deletedObjects.map(\.objectID)), sequence: sequence, storeIdentifier: storeIdentifier,
            contextName: name, transactionAuthor: transactionAuthor, source: ObjectIdentifier(self))
        post(.didSave(didSave), objects: Dictionary(saved.map { ($0.objectID, $0) }, uniquingKeysWith: { first, _ in first }))
        if let sequence { coordinator.mergeHub.didCommit(through: sequence, source: ObjectIdentifier(self)) }
        // Children: temporary IDs made permanent first, then the saved changes to merge.
        if !idMap.isEmpty {
            for (old, new) in idMap { idAliases[old] = new }
            tellChildren(.remap(idMap))
        }
        tellChildren(.merge(ChangeSummary(inserted: didSave.inserted, updated: didSave.updated, deleted: didSave.deleted)))
    }

    /// Replaces temporary IDs with permanent ones everywhere: objects, registries, values,
    /// undo groups, pending effects.
    func remapIDs(_ idMap: [ManagedObjectID: ManagedObjectID]) {
        guard !idMap.isEmpty else { return }
        // Unordered to-many values are kept sorted so they compare as sets; new IDs sort
        // differently, so sort them again.
        func normalize(_ owner: ManagedObjectID, _ key: String, _ value: PropertyValue) -> PropertyValue {
            guard case .toMany(let ids) = value, let property = entities[owner.entityName]?.properties[key], !property.isOrdered else {
                return value
            }
            return .unordered(ids)
        }
        for group in journal.undoStack + journal.redoStack { group.remap(idMap, normalize: normalize) }
        journal.open.remap(idMap, normalize: normalize)
        for effect in pending { effect.changes.remap(idMap, normalize: normalize) }
        let objects = Set(registry.values.compactMap(\.object)).union(retained.values)
        for object in objects {
            if let permanent = idMap[object.objectID] { object.objectID = permanent }
            let owner = object.objectID
            func fix(_ values: [String: PropertyValue]) -> [String: PropertyValue] {
                values.remappingIDs({ remapped($0, idMap) }, normalize: { normalize(owner, $0, $1) })
            }
            object.changes = fix(object.changes)
            // Values held by slot came from the store: permanent IDs only, nothing to remap.
            if object.fastCommitted == nil { object.committed = object.committed.map(fix) }
            object.transients = fix(object.transients)
            if object.fastRow == nil { object.row = object.row.map(fix) }
        }
        var newRegistry: [ManagedObjectID: WeakObject] = [:]
        for (_, entry) in registry { if let object = entry.object { newRegistry[object.objectID] = entry } }
        registry = newRegistry
        var newRetained: [ManagedObjectID: ManagedObject] = [:]
        for object in retained.values { newRetained[object.objectID] = object }
        retained = newRetained
        insertionOrder = insertionOrder.map { idMap[$0] ?? $0 }
        restored = Set(restored.map { idMap[$0] ?? $0 })
    }

    /// Gives inserted objects permanent IDs now, reserving the primary keys in the log
    /// (`obtainPermanentIDs(for:)`); their URIs then stay the same through the save.
    func obtainPermanentIDs(for objects: [ManagedObject]) throws {
        let store = try self.store()
        var byEntity: [String: [ManagedObject]] = [:]
        for object in objects where object.objectID.isTemporaryID && object.isInsertedFlag && !object.isInvalidated {
            byEntity[object.entity.name, default: []].append(object)
        }
        var idMap: [ManagedObjectID: ManagedObjectID] = [:]
        for entity in byEntity.keys.sorted() {
            guard let group = byEntity[entity] else { continue }
            let range = try store.log.reservePrimaryKeys(of: entity, count: group.count, author: transactionAuthor, contextName: name)
            for (offset, object) in group.enumerated() {
                let permanent = ManagedObjectID.permanent(StoredObjectID(entity: entity, primaryKey: range.lowerBound + UInt64(offset)), store: store.identifier)
                idMap[object.objectID] = permanent
            }
        }
        remapIDs(idMap)
        // Inserted under a permanent ID: saved with the log's restore-by-ID insert.
        for permanent in idMap.values { restored.insert(permanent) }
    }

    func remapped(_ value: PropertyValue, _ map: [ManagedObjectID: ManagedObjectID]) -> PropertyValue {
        guard !map.isEmpty else { return value }
        switch value {
        case .toOne(let id?): return .toOne(map[id] ?? id)
        case .toMany(let ids): return .toMany(ids.map { map[$0] ?? $0 })
        default: return value
        }
    }

    // MARK: - Rollback, reset, refresh

    /// Discards unsaved changes without reading the store; clears the undo stacks.
    func rollback() {
        journal.open = UndoGroup()
        journal.explicitDepth = 0
        // What the next objects-did-change says: discarded inserts are invalidated, the
        // others refreshed (back to their committed values).
        notice.inserted.removeAll()
        notice.updated.removeAll()
        notice.deleted.removeAll()
        for object in Array(retained.values) {
            if object.isInsertedFlag && (object.objectID.isTemporaryID || restored.contains(object.objectID)) {
                object.isInsertedFlag = false
                object.isInvalidated = true
                registry[object.objectID] = nil
                noteInvalidated(object)
                continue
            }
            object.changes.removeAll()
            object.isDeletedFlag = false
            noteRefreshed(object.objectID)
            object.awake(fromSnapshotEvents: .rollback)
        }
        lockedObjects.removeAll()
        retained.removeAll()
        insertionOrder.removeAll()
        restored.removeAll()
        pending.removeAll()
        problems.removeAll()
        removedObjects.removeAll()
        journal.undoStack.removeAll()
        journal.redoStack.removeAll()
    }

    /// Forgets every object; clears the undo stacks.
    func reset() {
        rollback()
        for object in registry.values.compactMap(\.object) {
            object.isInvalidated = true
            object.committed = nil
            object.version = nil
        }
        registry.removeAll()
        // reset posts invalidated-all at once, replacing whatever was pending.
        notice = ObjectsDidChange()
        noticeObjects.removeAll()
        post(.objectsDidChange(ObjectsDidChange(invalidatedAll: true)))
    }

    func refresh(_ object: ManagedObject, mergeChanges: Bool) {
        guard !object.isInvalidated, !object.isInsertedFlag else { return }
        object.row = nil  // a fetch-time row is as stale as the committed values
        object.rowVersion = nil
        noteRefreshed(object.objectID)
        if mergeChanges {
            let transients = object.transients
            object.committed = nil
            object.version = nil
            fulfill(object)
            object.transients = transients
            object.awake(fromSnapshotEvents: .refresh)
        } else {
            object.willTurnIntoFault()
            object.prefetchedObjects.removeAll()
            discardUnsavedJournal(for: object.objectID)
            object.changes.removeAll()
            object.transients.removeAll()
            object.isDeletedFlag = false
            object.committed = nil
            object.version = nil
            retained[object.objectID] = nil
            lockedObjects[object.objectID] = nil
            object.didTurnIntoFault()
        }
    }

    /// Forgets an object's unsaved changes in the journal (refresh without merge discards
    /// them), so a later save can't write them; groups left empty go too.
    func discardUnsavedJournal(for id: ManagedObjectID) {
        func drop(_ group: UndoGroup) {
            group.changes[id] = nil
            group.order.removeAll { $0 == id }
        }
        drop(journal.open)
        for effect in pending where effect.kind == .user && effect.source.saved == nil {
            drop(effect.source)
        }
        let emptied = pending.filter { $0.kind == .user && $0.source.isEmpty }.map(\.source)
        pending.removeAll { $0.kind == .user && $0.source.isEmpty }
        journal.undoStack.removeAll { group in emptied.contains { $0 === group } }
    }
}

extension ManagedObject {
    /// Whether the object was re-created by undoing a saved delete and not yet saved.
    var restored: Bool { core?.restored.contains(objectID) ?? false }
}
