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

    /// `object.currentValue(property)`, read directly for an inserted object's persistent
    /// property: its change, else its committed value (none unless undo brought it back),
    /// else empty. The fault and derived-side checks of `currentValue` don't apply to it.
    func unsavedValue(_ object: ManagedObject, _ property: PropertyInfo) -> PropertyValue {
        guard object.isInsertedFlag && !property.isTransient else { return object.currentValue(property) }
        return object.changes[property.name] ?? object.committedValue(property) ?? property.emptyValue
    }

    // MARK: - Validation

    /// Every model rule for one object, plus the object's own `validateValue(_:forKey:)`.
    func validateRules(_ object: ManagedObject) throws {
        let info = object.info
        guard object.isInsertedFlag && object.fastCommitted == nil && object.storedCommitted?.isEmpty ?? true else {
            return try validateRules(object) { unsavedValue(object, $0) }
        }
        // A plain object's values that plainly pass (each attribute present, of its type, with
        // no rule; each relationship's count allowed) need no more: checked in one walk over
        // the changes. Anything else takes the full path, which reports the failures.
        if info.checksOnlyPersistent, type(of: object) == ManagedObject.self, passesTrivially(object, info) { return }
        // An inserted object's persistent values are its changes: taken by slot in one walk
        // over them, into a buffer on the stack, rather than hashing each property's name.
        try withUnsafeTemporaryAllocation(of: PropertyValue?.self, capacity: info.orderedNames.count) { slots in
            // Element by element: the buffer-wide forms run the runtime's generic destroy.
            for slot in slots.indices { slots.initializeElement(at: slot, to: nil) }
            defer { for slot in slots.indices { _ = slots.moveElement(from: slot) } }
            for (key, value) in object.changes {
                if let slot = info.slot(named: key) { slots[slot] = value }
            }
            try validateRules(object) { property in
                property.isTransient ? unsavedValue(object, property) : slots[property.slot] ?? property.emptyValue
            }
        }
    }

    /// Whether an inserted object's changes (all its persistent values) pass every model rule
    /// without a rule to evaluate: every checked attribute holds a value of its type and has no
    /// rule besides being required, every relationship's count is allowed. False whenever that
    /// isn't plain (a missing attribute, any rule, an invalid value), not only on a failure.
    func passesTrivially(_ object: ManagedObject, _ info: EntityInfo) -> Bool {
        var attributes = 0
        var required = 0
        for (key, value) in object.changes {
            guard let slot = info.slot(named: key) else { continue }
            let check = info.checkBySlot[slot]
            if check >= 0 {
                guard !info.attributeChecks[check].hasRules, case .attribute(let typed?) = value,
                    typed.matches(info.attributeChecks[check].type)
                else { return false }
                attributes += 1
            } else if check != Int.min {
                let index = -1 - check
                let count: Int
                switch value {
                case .toOne(let id): count = id == nil ? 0 : 1
                case .toMany(let ids): count = ids.count
                case .attribute, .invalid: return false
                }
                let relationship = info.relationshipChecks[index]
                // A reference to an unsaved insert that left the context fails: the full path says so.
                if savingDeletes || !removedObjects.isEmpty, relationship.property.isRecorded, value.ids.contains(where: isDangling) { return false }
                if count == 0 {
                    guard relationship.isOptional else { return false }
                } else {
                    guard count >= (relationship.minimum ?? 0), count <= (relationship.maximum ?? .max) else { return false }
                    if !relationship.isOptional { required += 1 }
                }
            }
        }
        return attributes == info.attributeChecks.count && required == info.requiredRelationshipCount
    }

    /// Whether `id` names an unsaved insert that left this context — deleted, or its insert
    /// undone — and hasn't come back: no save can write it, so a reference to it dangles
    /// (Core Data's "dangling reference to an invalid object", 1550). Known while undo can
    /// bring the object back (``removedObjects``); after that the store refuses the
    /// reference (133021).
    func isRemovedInsert(_ id: ManagedObjectID) -> Bool {
        guard id.isTemporaryID, let object = removedObjects[id] else { return false }
        return object.isInvalidated && registered(id) == nil
    }

    /// Whether a reference to `id`, left on the store's recorded side of a relationship of an
    /// object the save writes, dangles: an unsaved insert that left the context
    /// (``isRemovedInsert(_:)``), or, while a save that deletes objects validates
    /// (``savingDeletes``), an object it deletes. The store would refuse either (133021);
    /// validation names object and key (1550), as Core Data's "dangling reference to an
    /// invalid object" does.
    func isDangling(_ id: ManagedObjectID) -> Bool {
        if isRemovedInsert(id) { return true }
        return savingDeletes && registered(id)?.isDeletedFlag == true
    }

    /// ``validateRules(_:)`` with each property's unsaved value from `current`.
    private func validateRules(_ object: ManagedObject, current: (PropertyInfo) -> PropertyValue) throws {
        var failures: [ValidationFailure] = []
        let entity = object.entity
        let localization = model.localization
        // A plain ManagedObject validates with the base `validateValue`: check the stored
        // value itself rather than boxing it as `Any` and converting it back.
        let baseValidation = type(of: object) == ManagedObject.self
        let info = object.info
        for index in info.attributeChecks.indices {
            let check = info.attributeChecks[index]
            let property = check.property
            let current = current(property)
            if case .invalid(let what) = current {
                let type = info.attributes[index].description.attributeType
                failures.append(ValidationFailure(
                    code: .managedObjectValidation, entity: entity.name, key: property.name, value: nil,
                    message: "\(entity.name).\(property.name) holds \(type.name) values, not \(what)"))
                continue
            }
            if baseValidation, case .attribute(let typed) = current {
                // A present value of the right type with no rule to break passes: the
                // description isn't even reached.
                if !check.hasRules, let typed, typed.matches(check.type) { continue }
                // Called in place: the attribute's description isn't copied out of the table.
                failures += info.attributes[index].description.validate(typed, entity: entity.name, localization: localization)
                continue
            }
            var value: Any? = object.externalValue(current)
            do {
                try object.validateValue(&value, forKey: property.name)
                // A validation method may replace the value (Core Data's `validateValue`
                // returns it by reference, and the save keeps it): the value the rules
                // passed is the one saved, not the one they would have refused.
                let replaced = object.internalValue(value, for: property)
                if case .invalid(let what) = replaced {
                    let type = info.attributes[index].description.attributeType
                    failures.append(ValidationFailure(
                        code: .managedObjectValidation, entity: entity.name, key: property.name, value: nil,
                        message: "validateValue(_:forKey:) replaced \(entity.name).\(property.name), which holds \(type.name) values, with \(what)"))
                } else if !Self.isSameValue(replaced, current) {
                    set(object, property, replaced, maintainInverse: false, register: true)
                }
            } catch ContextError.validation(let found) {
                failures += found
            } catch {
                failures.append(ValidationFailure(
                    code: .managedObjectValidation, entity: entity.name, key: property.name,
                    value: { if case .attribute(let v) = current { return v } else { return nil } }(), message: "\(error)"))
            }
        }
        for index in info.relationshipChecks.indices {
            let check = info.relationshipChecks[index]
            let current = current(check.property)
            if case .invalid(let what) = current {
                let relationship = info.relationships[index].description
                failures.append(ValidationFailure(
                    code: .managedObjectValidation, entity: entity.name, key: relationship.name, value: nil,
                    message: "\(entity.name).\(relationship.name) holds \(relationship.destinationEntityName) objects, not \(what)"))
                continue
            }
            // The description (for the messages) only for a count that breaks a rule.
            let count = current.ids.count
            let passes = count == 0 ? check.isOptional : count >= (check.minimum ?? 0) && count <= (check.maximum ?? .max)
            if !passes {
                // The relationship's objects, under `NSValidationValueErrorKey` (Core Data's value).
                let destinations = current.ids.map { $0.uriRepresentation() }
                for var failure in info.relationships[index].description.validate(count: count, entity: entity.name, localization: localization) {
                    failure.destinations = destinations
                    failures.append(failure)
                }
            }
            if check.property.isRecorded, savingDeletes || !removedObjects.isEmpty, let gone = current.ids.first(where: isDangling) {
                let what = isRemovedInsert(gone) ? "an object deleted (or its insert undone) before it was saved" : "which this save deletes"
                failures.append(ValidationFailure(
                    code: .managedObjectValidation, entity: entity.name, key: check.property.name, value: nil,
                    message: "\(entity.name).\(check.property.name) refers to \(gone), \(what): a dangling reference to an invalid object"))
            }
            // Core Data's `validateForInsert`/`validateForUpdate` run every property through
            // `validateValue(_:forKey:)`, relationships too (a ported `validateEmployees:`):
            // a subclass's override sees every relationship of an inserted object and each
            // changed one of an updated object (an unchanged one isn't loaded for it). Before,
            // it never saw a relationship's key. A replacement it makes is not applied.
            if !baseValidation, object.isInsertedFlag || object.changes[check.property.name] != nil || object.transients[check.property.name] != nil {
                var value: Any? = object.externalValue(current, ordered: check.property.isOrdered)
                validatingRelationshipInSave = true
                defer { validatingRelationshipInSave = false }
                do {
                    try object.validateValue(&value, forKey: check.property.name)
                } catch ContextError.validation(let found) {
                    failures += found
                } catch {
                    failures.append(ValidationFailure(
                        code: .managedObjectValidation, entity: entity.name, key: check.property.name, value: nil, message: "\(error)"))
                }
            }
        }
        if !failures.isEmpty { throw ContextError.validation(named(failures, object)) }
    }

    /// Whether two values are the same: equal, or both the same kind of NaN (which never
    /// equals itself): a value a validation method left unchanged, a value an undo expects.
    static func isSameValue(_ a: PropertyValue, _ b: PropertyValue) -> Bool {
        if !PropertyValue.differ(a, b) { return true }
        switch (a, b) {
        case (.attribute(.some(.double(let x))), .attribute(.some(.double(let y)))): return x.isNaN && y.isNaN
        case (.attribute(.some(.float(let x))), .attribute(.some(.float(let y)))): return x.isNaN && y.isNaN
        default: return false
        }
    }

    /// `failures`, each naming `object` (`NSValidationObjectErrorKey`).
    private func named(_ failures: [ValidationFailure], _ object: ManagedObject) -> [ValidationFailure] {
        let uri = object.objectID.uriRepresentation()
        return failures.map { failure in
            var failure = failure
            failure.object = failure.object ?? uri
            return failure
        }
    }

    /// Deny rules: a deleted object whose deny relationship still has destinations (1600).
    func validateDeletion(_ object: ManagedObject) throws {
        var failures: [ValidationFailure] = []
        for property in object.info.properties.values where property.isRelationship && property.deleteRule == .deny {
            // A destination deleted in the same save doesn't deny, nor does an unsaved insert
            // deleted again: it left the context, and the nullify of its delete skipped this
            // object, already deleted, so its ID stays here (before, it refused the save,
            // naming an object that no longer exists). In a child context an unregistered
            // temporary ID may be the parent's unsaved insert: gone only if this context
            // removed it.
            let targets = (object.changes[property.name] ?? object.currentValue(property)).ids.filter { id in
                if let target = registered(id) { return !target.isDeletedFlag }
                return !(id.isTemporaryID && (parentContext == nil || isRemovedInsert(id) || discardedInserts.contains(id)))
            }
            if !targets.isEmpty {
                failures.append(ValidationFailure(
                    code: .relationshipDeniedDelete, entity: object.entity.name, key: property.name, value: nil,
                    message: "\(object.entity.name).\(property.name) still holds \(targets.count) object(s) (\(targets.map(\.description).joined(separator: ", "))); its delete rule denies deleting \(object.objectID)",
                    object: object.objectID.uriRepresentation(), destinations: targets.map { $0.uriRepresentation() }))
            }
        }
        if !failures.isEmpty { throw ContextError.validation(failures) }
    }

    // MARK: - Saving

    func save(in context: isolated ManagedObjectContext) throws {
        // Groups the save's closes drop are recorded with its commit; a save that fails
        // records them now, as a close outside a save does (spec 0006 §13).
        isSaving = true
        do {
            try saveClosingGroups(in: context)
            isSaving = false
        } catch {
            isSaving = false
            recordUndoCheckpoint()
            throw error
        }
    }

    private func saveClosingGroups(in context: isolated ManagedObjectContext) throws {
        // A save closes the current undo group even inside explicit grouping: what it writes
        // is one group; later changes in the explicit group form the next one.
        closeOpenGroup(continuing: true)
        if !problems.isEmpty {
            let found = problems
            problems.removeAll()
            throw found.count == 1 ? found[0] : ContextError.invalidArgument(found.map(\.description).joined(separator: "\n"))
        }
        // Delete rules deferred by `propagatesDeletesAtEndOfEvent` (off) run now, recorded
        // with the group of the deletes (spec 0006 §23.2).
        propagateDeferredDeletes(in: context)
        guard !retained.isEmpty || !pending.isEmpty else { return }
        postPendingChanges()
        post(.willSave(ContextWillSave(contextName: name)))
        try runWillSaveHooks(in: context)
        closeOpenGroup(continuing: true)
        postPendingChanges()

        // Validate everything; report every failure at once (in object ID order); write
        // nothing if any. Only the objects that fail are sorted.
        var failed: [(id: ManagedObjectID, failures: [ValidationFailure])] = []
        savingDeletes = retained.values.contains { $0.isDeletedFlag }
        defer { savingDeletes = false }
        for object in retained.values {
            do {
                if object.isDeletedFlag { try object.validateForDelete(in: context) }
                else if object.isInsertedFlag { try object.validateForInsert(in: context) }
                else if object.isUpdated { try object.validateForUpdate(in: context) }
            } catch ContextError.validation(let found) {
                // Each failure names its object (a hook's own failures may not).
                if !found.isEmpty { failed.append((object.objectID, named(found, object))) }
            } catch {
                failed.append((object.objectID, [ValidationFailure(
                    code: .managedObjectValidation, entity: object.entity.name, key: "", value: nil, message: "\(error)",
                    object: object.objectID.uriRepresentation())]))
            }
        }
        if !failed.isEmpty {
            throw ContextError.validation(failed.sorted { $0.id < $1.id }.flatMap(\.failures))
        }
        // Values a `validateValue(_:forKey:)` replaced form a group of their own, as the
        // `willSave` hooks' changes do.
        closeOpenGroup(continuing: true)
        postPendingChanges()

        // A child's save goes to its parent, not to the store.
        if let parent = parentContext {
            try pushToParent(parent, in: context)
            return
        }
        var store = try self.store()
        // Objects of a store the coordinator no longer has must not be written to the one it
        // has now, where their keys name other objects (spec 0006 §1.6). References to them
        // are caught as the draft is made.
        for id in retained.keys {
            if let foreign = foreignStoreError(id, storeUUID: store.identifier) { throw foreign }
        }
        // Persisted undo records its stacks with the commit when it dropped groups: those
        // still kept but not read yet are read now, outside the commit's write transaction.
        if persistsUndo, journal.dropped { _ = readKeptOlderUndo(all: journal.recordsWhole) }
        // The first round is optimistic: versions checked, then the commit checks them again.
        // After another writer slipped in between, later rounds check and commit inside one
        // write transaction, so a writer that commits all the time can't starve this save.
        var locked = false
        // A store move (its old log refusing the commit) doesn't use up an attempt.
        var attempt = 0
        while attempt < Self.maximumSaveAttempts {
            attempt += 1
            var groupIndex: [Int: Int] = [:]
            // Optimistic locking: conflicts found now go to the merge policy; the versions
            // seen are the draft's expected versions, checked again by the commit.
            func prepare() throws -> TransactionDraft? {
                let expected = try resolveVersionConflicts(in: context)
                draftStoreUUID = store.identifier
                defer { draftStoreUUID = nil }
                foreignDraftID = nil
                let (draft, index, _) = makeDraft(expectedVersions: expected)
                if let foreign = foreignDraftID, let error = foreignStoreError(foreign, storeUUID: store.identifier) { throw error }
                groupIndex = index
                return draft.isEmpty ? nil : draft
            }
            let committed: CommitResult?
            do {
                committed = locked ? try store.log.commit(preparedBy: prepare) : try prepare().map { try store.log.commit($0) }
            } catch let error as LogError {
                switch error {
                case .storeMoved where store.current !== store:
                    // The store moved after this save took it: the move's copy has everything
                    // before, so the same save goes to the new store (spec 0006 §19.7).
                    store = store.current
                    attempt -= 1
                    continue
                case .versionMismatch where attempt < Self.maximumSaveAttempts:
                    locked = true  // another writer slipped in: check again, holding the lock
                    continue
                case .versionMismatch:
                    throw ContextError.store(
                        "the save gave up after \(Self.maximumSaveAttempts) attempts: other writers kept changing the same objects (the last time, \(error.description))",
                        underlying: .log(error))
                case .uniquenessViolation where attempt < Self.maximumSaveAttempts:
                    let conflicts = try detectConstraintConflicts()
                    guard !conflicts.isEmpty else { throw ContextError.storeRefused(error.description) }
                    try mergePolicy.resolve(constraintConflicts: conflicts, in: context)
                    closeOpenGroup(continuing: true)
                    continue
                case .oneToOneViolation where attempt < Self.maximumSaveAttempts:
                    // Two writers each gave one object a partner: a trumping policy decides.
                    guard try resolveOneToOneClashes(in: context) else { throw ContextError.storeRefused(error.description) }
                    continue
                case .toOneInverseViolation where attempt < Self.maximumSaveAttempts:
                    // Two writers each put one object in a list (its to-one can name one): so too.
                    guard try resolveListedTwiceClashes(in: context) else { throw ContextError.storeRefused(error.description) }
                    continue
                case .uniquenessViolation, .missingReference, .objectExists, .objectNotFound, .oneToOneViolation, .toOneInverseViolation:
                    throw ContextError.storeRefused(error.description)
                default:
                    throw ContextError.store(error.description, underlying: .log(error))
                }
            } catch let error as LMDBError {
                // The storage layer's refusals (a data file deleted while open, a map at its
                // maximum size, an I/O error) reach `save()` as the context's save error, as
                // the log's do, their text (the path, the code) kept: Core Data wraps a store's
                // error in the save's. Before, the storage layer's own error escaped.
                throw ContextError.store("the save failed and nothing was written: \(error.description)", underlying: .lmdb(error))
            }
            guard let result = committed else {
                finishSave(sequence: nil, idMap: [:], groupIndex: [:], result: nil, in: context)
                return
            }
            var idMap: [ManagedObjectID: ManagedObjectID] = [:]
            idMap.reserveCapacity(result.permanentIDs.count)
            for (draftID, storedID) in result.permanentIDs {
                guard case .temporary(let entity, let uuid) = draftID else { continue }
                idMap[ManagedObjectID(entityName: entity, storage: .temporary(uuid))] = .permanent(storedID, store: store.identifier)
            }
            finishSave(sequence: result.sequence, idMap: idMap, groupIndex: groupIndex, result: result, in: context)
            return
        }
    }

    /// The most rounds of `willSave` hooks a save runs (``runWillSaveHooks(in:)``; Core
    /// Data's message at its limit: "The context is still dirty after 100 attempts").
    static let maximumWillSaveRounds = 100

    /// `willSave(in:)` on every object the save writes; then, as in Core Data ("Core Data
    /// will observe the resultant change notification and so invoke `willSave` again"),
    /// again on each object whose values a hook changed through its accessors — KVC, a
    /// relationship's inverse, a delete; not `setPrimitiveValue(_:forKey:)` — and on each
    /// object a hook changed, inserted or deleted that hasn't had its call yet, until a round
    /// changes nothing. Delete rules deferred by `propagatesDeletesAtEndOfEvent` run after
    /// each round, for objects the hooks deleted. A hook that changes a value every time it
    /// runs stops the save after ``maximumWillSaveRounds`` rounds (`invalidArgument`;
    /// Core Data recurses until it crashes); nothing is written, the changes stay.
    func runWillSaveHooks(in context: isolated ManagedObjectContext) throws {
        // Which objects had their call in this save: stamped with the save's serial, not
        // kept in a table (a save of many inserts hashed each one twice).
        willSaveSerial &+= 1
        let serial = willSaveSerial
        var round = Array(retained.values)
        var rounds = 0
        defer { willSaveWatch = nil }
        while !round.isEmpty {
            rounds += 1
            guard rounds <= Self.maximumWillSaveRounds else {
                let names = round.prefix(5).map(\.objectID.description).joined(separator: ", ")
                throw ContextError.invalidArgument(
                    "willSave kept changing objects (\(names)) after \(Self.maximumWillSaveRounds) rounds: a willSave hook must test a value before setting it, or set it with setPrimitiveValue(_:forKey:); nothing was saved")
            }
            willSaveWatch = []
            for object in round {
                object.willSaveStamp = serial
                object.willSave(in: context)
            }
            // …and the delete rules of objects the hooks deleted (what they change counts too).
            propagateDeferredDeletes(in: context)
            let changed = willSaveWatch ?? []
            willSaveWatch = nil
            round =
                changed.isEmpty
                ? retained.values.filter { $0.willSaveStamp != serial }
                : retained.values.filter { $0.willSaveStamp != serial || changed.contains(ObjectIdentifier($0)) }
        }
    }

    /// The transaction for everything pending: one event group per pending effect, then the
    /// reconciliation group; and which pending effect became which event group.
    /// `forParent`: a child's save into its parent — an unordered to-many change goes as the
    /// members it adds and removes, not the whole set, and an ordered one's list goes with the
    /// list it was made from (`orderedBases`: by draft group, object and property), for the
    /// parent to apply the change to its own list (§18.3).
    func makeDraft(
        expectedVersions: [StoredObjectID: UInt64], forParent: Bool = false
    ) -> (draft: TransactionDraft, groupIndex: [Int: Int], orderedBases: OrderedPushBases) {
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
        var covered: [ManagedObjectID: SaveCoverage] = [:]
        var orderedBases: OrderedPushBases = [:]
        for (index, effect) in pending.enumerated() {
            var bases: [DraftObjectID: [String: [DraftObjectID]]] = [:]
            let operations = self.operations(for: effect.changes, covered: &covered, forParent: forParent, orderedBases: &bases)
            guard !operations.isEmpty else { continue }
            let origin: GroupOrigin? = switch effect.kind {
            case .user: nil
            case .undo(let sequence, let group): .undo(of: sequence, group: group)
            case .redo(let sequence, let group): .redo(of: sequence, group: group)
            }
            draft.beginGroup(actionName: effect.changes.actionName, origin: origin)
            draft.append(contentsOf: operations)
            if !bases.isEmpty { orderedBases[draft.groups.count - 1] = bases }
            groupIndex[index] = eventGroups
            eventGroups += 1
        }
        // Changes the journal didn't see (registration disabled, primitive sets) go last,
        // marked as not recorded for undo: persisted undo doesn't push them on the undo
        // stack, which never held them (spec 0006 §13; before, after a restart they were an
        // unnamed group to undo, and their push cleared the redo stack).
        var bases: [DraftObjectID: [String: [DraftObjectID]]] = [:]
        let reconciliation = self.reconciliation(covered: covered, forParent: forParent, orderedBases: &bases)
        if !reconciliation.isEmpty {
            draft.beginGroup(actionName: nil, recordedForUndo: false)
            draft.append(contentsOf: reconciliation)
            if !bases.isEmpty { orderedBases[draft.groups.count - 1] = bases }
        }
        // Groups dropped since the stacks were last recorded for persisted undo: the stacks
        // as this commit leaves them are recorded with it (spec 0006 §13), in its write
        // transaction. Those not read yet were read at the start of the save.
        if persistsUndo, journal.dropped, journal.older == nil {
            var written: [ObjectIdentifier: Int] = [:]
            for (index, effect) in pending.enumerated() where effect.kind == .user {
                if let group = groupIndex[index] { written[ObjectIdentifier(effect.source)] = group }
            }
            draft.undoCheckpoint = undoCheckpointStacks { written[ObjectIdentifier($0)] }
        }
        draftRecordsUndoCheckpoint = draft.undoCheckpoint != nil
        return (draft, groupIndex, orderedBases)
    }

    func draftID(_ id: ManagedObjectID) -> DraftObjectID {
        switch id.storage {
        case .temporary(let uuid): return .temporary(entity: id.entityName, id: uuid)
        case .permanent(let store, let pk):
            // A reference to an object of a store the coordinator no longer has is noted for
            // the save to refuse.
            if let expected = draftStoreUUID, store != expected, foreignDraftID == nil { foreignDraftID = id }
            return .stored(StoredObjectID(entity: id.entityName, primaryKey: pk))
        }
    }

    func draftValue(_ value: PropertyValue) -> DraftValue {
        switch value {
        case .attribute(let v): v.map { .attribute($0) } ?? .null
        case .toOne(let id): id.map { .reference(draftID($0)) } ?? .null
        case .toMany(let ids): .references(ids.map(draftID))
        case .invalid: .null
        }
    }

    /// A group's changes as draft operations, recorded sides only; notes in `covered` what
    /// they write for each object.
    ///
    /// `forParent`: a child's save into its parent, where an unordered to-many's new value
    /// goes as the members the group added and removed, so the parent's own unsaved changes
    /// of the relationship stay (before, the child's whole set replaced them); an ordered
    /// one's list goes with the list the group changed (`orderedBases`), for the parent to
    /// apply the group's removals, insertions and moves to its own (before session 29 the
    /// child's whole list replaced it).
    func operations(
        for group: UndoGroup, covered: inout [ManagedObjectID: SaveCoverage], forParent: Bool = false,
        orderedBases: inout [DraftObjectID: [String: [DraftObjectID]]]
    ) -> [TransactionDraft.Operation] {
        var operations: [TransactionDraft.Operation] = []
        operations.reserveCapacity(group.order.count)
        if covered.isEmpty { covered.reserveCapacity(group.order.count) }
        // Most groups change objects of few entities: the last one's tables are reused.
        var lastInfo: EntityInfo?
        for id in group.order {
            guard let change = group.changes[id], let info = info(for: id, last: &lastInfo) else { continue }
            switch change.kind {
            case .inserted:
                let values: [String: DraftValue]
                if change.values.keys.allSatisfy({ info.property(named: $0)?.isWritten == true }) {
                    // Every value is written: the same keys, mapped without hashing them again.
                    values = change.values.mapValues { draftValue($0) }
                } else {
                    var recorded = [String: DraftValue](minimumCapacity: change.values.count)
                    for (key, value) in change.values where info.property(named: key)?.isWritten == true {
                        recorded[key] = draftValue(value)
                    }
                    values = recorded
                }
                operations.append(.insert(draftID(id), values: values))
                // Every recorded property: its value in the group, else empty.
                covered[id] = SaveCoverage(state: .inserted, inserted: change.values, stamp: change.stamp)
            case .updated:
                var values: [String: DraftValue] = [:]
                var coverage = covered.removeValue(forKey: id) ?? SaveCoverage()
                var changedMembers: [TransactionDraft.Operation] = []
                for (key, value) in change.new {
                    guard let property = info.property(named: key), property.isWritten else { continue }
                    coverage.updates[key] = .some(value)
                    if forParent, property.isToMany, !property.isOrdered, let old = change.old[key] {
                        if let members = membershipOperation(id, key, from: old, to: value) { changedMembers.append(members) }
                        continue
                    }
                    if forParent, property.isToMany, property.isOrdered, let old = change.old[key] {
                        orderedBases[draftID(id), default: [:]][key] = old.ids.map(draftID)
                    }
                    values[key] = draftValue(value)
                }
                if !values.isEmpty { operations.append(.update(draftID(id), values: values)) }
                operations += changedMembers.sorted { $0.membershipKey < $1.membershipKey }
                for (key, membership) in change.memberships {
                    guard let property = info.property(named: key), property.isWritten else { continue }
                    operations.append(.membership(draftID(id), property: key, added: membership.added.map(draftID), removed: membership.removed.map(draftID)))
                    coverage.updates[key] = .some(nil)
                }
                covered[id] = coverage
            case .deleted:
                operations.append(.delete(draftID(id)))
                covered[id] = SaveCoverage(state: .deleted)
            }
        }
        return operations
    }

    /// The members `to` adds to and removes from `from` (an unordered to-many of `id`), as a
    /// membership operation; nil when they hold the same members.
    func membershipOperation(_ id: ManagedObjectID, _ key: String, from: PropertyValue, to: PropertyValue) -> TransactionDraft.Operation? {
        let before = Set(from.ids), after = Set(to.ids)
        let added = to.ids.filter { !before.contains($0) }
        let removed = from.ids.filter { !after.contains($0) }
        guard !added.isEmpty || !removed.isEmpty else { return nil }
        return .membership(draftID(id), property: key, added: added.map(draftID), removed: removed.map(draftID))
    }

    /// Operations for changes no journal group describes, in object ID order. `forParent`: as
    /// for ``operations(for:covered:forParent:orderedBases:)``.
    func reconciliation(
        covered: [ManagedObjectID: SaveCoverage], forParent: Bool = false, orderedBases: inout [DraftObjectID: [String: [DraftObjectID]]]
    ) -> [TransactionDraft.Operation] {
        var found: [(id: ManagedObjectID, operation: TransactionDraft.Operation)] = []
        for (id, object) in retained {
            let coverage = covered[id]
            if object.isDeletedFlag {
                if coverage?.state != .deleted && !(id.isTemporaryID) { found.append((id, .delete(draftID(id)))) }
                continue
            }
            var values: [String: DraftValue] = [:]
            if object.isInsertedFlag {
                func current(_ property: PropertyInfo) -> PropertyValue { unsavedValue(object, property) }
                if let coverage, coverage.state == .inserted {
                    // Unchanged since its group took its values, and no later group writes
                    // any: the insert writes exactly its current values.
                    if coverage.updates.isEmpty && coverage.stamp != 0 && coverage.stamp == object.valuesStamp { continue }
                    // Covered: every recorded property has a covered value; write what differs.
                    for property in object.info.propertyList where property.isWritten {
                        guard let expected = coverage.value(property) else {
                            if let changed = object.changes[property.name], changed != property.emptyValue {
                                values[property.name] = draftValue(changed)
                            }
                            continue
                        }
                        let value = current(property)
                        if PropertyValue.differ(expected, value) { values[property.name] = draftValue(value) }
                    }
                    if !values.isEmpty { found.append((id, .update(draftID(id), values: values))) }
                } else {
                    values.reserveCapacity(object.info.propertyList.count)
                    for property in object.info.propertyList where property.isWritten {
                        let value = current(property)
                        if !value.isNil { values[property.name] = draftValue(value) }
                    }
                    found.append((id, .insert(draftID(id), values: values)))
                }
                continue
            }
            var changedMembers: [TransactionDraft.Operation] = []
            for property in object.info.propertyList where property.isWritten {
                // Also a value a pending group writes that the object no longer shows, holding
                // no change of it (``unwrittenValues(covered:)``).
                guard object.changes[property.name] != nil || (!property.isToMany && coverage?.updates[property.name] != nil) else { continue }
                let current = object.currentValue(property)
                let expected = coverage?.value(property) ?? object.committedValue(property) ?? property.emptyValue
                guard PropertyValue.differ(expected, current) else { continue }
                if forParent, property.isToMany, !property.isOrdered {
                    if let members = membershipOperation(id, property.name, from: expected, to: current) { changedMembers.append(members) }
                } else {
                    if forParent, property.isToMany { orderedBases[draftID(id), default: [:]][property.name] = expected.ids.map(draftID) }
                    values[property.name] = draftValue(current)
                }
            }
            if !values.isEmpty { found.append((id, .update(draftID(id), values: values))) }
            for members in changedMembers { found.append((id, members)) }
        }
        found += unwrittenValues(covered: covered)
        guard found.count > 1 else { return found.map(\.operation) }
        // Sorted by index: comparing never copies an operation.
        let ids = found.map(\.id)
        return ids.indices.sorted { ids[$0] < ids[$1] }.map { found[$0].operation }
    }

    /// The objects a pending group updates that hold no change (``heldForPending``) whose
    /// value of an attribute or to-one now differs from the one the groups write: the object's
    /// own value is written after them. A one-to-one set by an undo or redo releases the
    /// partner the object held in memory (``apply(_:reversed:events:)``), which the group —
    /// rebased at a merge — may not name, while an earlier pending undo wrote that partner's
    /// pairing: before, the save wrote the pairing and not the release, and the store refused
    /// it, one person named by two passports (oneToOneViolation; randomized one-to-one seeds
    /// 1030, 1073, 1235 at 150 steps; spec 0006 §16.1, §17.1).
    func unwrittenValues(covered: [ManagedObjectID: SaveCoverage]) -> [(id: ManagedObjectID, operation: TransactionDraft.Operation)] {
        var found: [(id: ManagedObjectID, operation: TransactionDraft.Operation)] = []
        for (id, object) in heldForPending where retained[id] == nil {
            guard let coverage = covered[id], coverage.state == .none, !coverage.updates.isEmpty, !object.isInvalidated,
                !object.isInsertedFlag, !object.isDeletedFlag, object.hasCommittedValues
            else { continue }
            var values: [String: DraftValue] = [:]
            for property in object.info.propertyList where property.isWritten && !property.isToMany {
                guard let expected = coverage.value(property) else { continue }
                let current = object.currentValue(property)
                if PropertyValue.differ(expected, current) { values[property.name] = draftValue(current) }
            }
            if !values.isEmpty { found.append((id, .update(draftID(id), values: values))) }
        }
        return found
    }

    /// After a successful commit (or a save with nothing to write): permanent IDs, committed
    /// values and versions, undo groups marked saved, `didSave`, the did-save notification,
    /// and the in-process broadcast to automatically merging contexts.
    func finishSave(
        sequence: UInt64?, idMap: [ManagedObjectID: ManagedObjectID], groupIndex: [Int: Int], result: CommitResult?,
        in context: isolated ManagedObjectContext
    ) {
        let saved = Array(retained.values)
        // Which saved objects had a temporary ID: those the remap gives a permanent one were
        // inserted by this transaction.
        let wasTemporary = saved.map(\.objectID.isTemporaryID)
        if let sequence {
            for (index, effect) in pending.enumerated() where effect.kind == .user {
                if let group = groupIndex[index] { effect.source.saved = (sequence, group) }
            }
        } else if parentContext != nil {
            for effect in pending where effect.kind == .user { effect.source.pushed = true }
        }
        remapIDs(idMap, finishingSave: true)
        // A pinned context moves on at a save (§22.3): to the transaction its save appended,
        // or, when the save wrote nothing (its changes netted out, or a merge policy resolved
        // its conflicts to the store's values, which its objects now hold), to the newest.
        if parentContext == nil { advanceGeneration(to: sequence) }
        // The notification names the objects by their IDs after the save.
        var insertedIDs = Set<ManagedObjectID>(minimumCapacity: saved.count)
        var updatedIDs: Set<ManagedObjectID> = []
        var deletedIDs: Set<ManagedObjectID> = []
        for object in saved {
            if object.isDeletedFlag { deletedIDs.insert(object.objectID) }
            else if object.isInsertedFlag { insertedIDs.insert(object.objectID) }
            else if !object.changes.isEmpty { updatedIDs.insert(object.objectID) }
        }
        // The objects whose stored record this transaction changed now have its version:
        // those it inserted under a temporary ID, and those of its other changes.
        var others: Set<StoredObjectID> = []
        if result != nil {
            for (index, object) in saved.enumerated() where !object.isDeletedFlag && !(wasTemporary[index] && !object.objectID.isTemporaryID) {
                if let stored = object.objectID.storedID { others.insert(stored) }
            }
        }
        var written: Set<StoredObjectID> = []
        if let result, !others.isEmpty {
            for change in result.event.changes {
                if case .delete = change { continue }
                if others.contains(change.objectID) { written.insert(change.objectID) }
            }
        }
        // Fetched values kept on objects forget the deleted ones: their IDs name nothing now
        // (a fault made for one couldn't be fulfilled).
        if keepsFetchedValues, !deletedIDs.isEmpty {
            for object in registry.values.compactMap(\.object) { object.forgetFetchedValues(naming: deletedIDs) }
        }
        // Deleted objects leave the context now, but keep `isDeleted` until their `didSave`.
        var deleted: [ManagedObject] = []
        // The versions this save moved, for children that read the objects through this
        // context at the old ones (§18.3).
        let hasChildren = !context.children.contexts(except: nil).isEmpty
        var moves: [ManagedObjectID: (old: UInt64, new: UInt64)] = [:]
        for (index, object) in saved.enumerated() {
            if object.isDeletedFlag {
                object.isInvalidated = true
                registry[object.objectID] = nil
                deleted.append(object)
                continue
            }
            if !object.changes.isEmpty {
                if object.fastCommitted != nil {
                    // Values held by slot (a fetched object) stay so, the changes written into
                    // their slots: making them a dictionary made every later read of the
                    // object, and undoing the save, hash names. The remap above left the
                    // changes naming permanent IDs only, as the row's other values do.
                    for (key, value) in object.changes {
                        if let property = object.info.property(named: key) { object.fastCommitted?[property] = value }
                    }
                } else if let committed = object.committed, !committed.isEmpty {
                    var merged = committed
                    for (key, value) in object.changes { merged[key] = value }
                    object.committed = merged
                } else {
                    // An insert: its changes are all its values (shared, not copied).
                    object.committed = object.changes
                }
                object.changes.removeAll()
            } else if !object.hasCommittedValues {
                object.committed = [:]
            }
            object.isInsertedFlag = false
            if let sequence, result != nil {
                if wasTemporary[index] && !object.objectID.isTemporaryID {
                    object.version = sequence
                } else if let stored = object.objectID.storedID, written.contains(stored) {
                    if let old = object.version, hasChildren { moves[object.objectID] = (old, sequence) }
                    object.version = sequence
                }
            }
            register(object)
        }
        // Objects the transaction wrote that the save doesn't hold as changed — pending groups
        // whose changes net to the committed values (a child's rename and the undo of it,
        // pushed): their stored record has the new version too, so a registered one takes it
        // (before, it kept the old one, and its next saved change was refused as changed by
        // another writer), and children that read them at the old one count the new one.
        if let sequence, let result, let storeUUID = try? store().identifier {
            var unheld: [StoredObjectID] = []
            for change in result.event.changes {
                guard case .update(let stored, _) = change, !others.contains(stored) else { continue }
                let id = ManagedObjectID.permanent(stored, store: storeUUID)
                if let object = registered(id), !object.isInvalidated, object.hasCommittedValues {
                    if let old = object.version, old != sequence, hasChildren { moves[id] = (old, sequence) }
                    object.version = sequence
                } else if hasChildren {
                    unheld.append(stored)
                }
            }
            if !unheld.isEmpty, let log = try? store().log {
                // Their version before this transaction, from their history.
                let previous = try? log.read { reader in
                    try unheld.compactMap { stored in try reader.history(of: stored).last(where: { $0 < sequence }).map { (stored, $0) } }
                }
                for (stored, old) in previous ?? [] { moves[.permanent(stored, store: storeUUID)] = (old, sequence) }
            }
        }
        // The derived values the commit computed (spec 0006 §24): the objects holding them
        // show them now, and those the save didn't otherwise change are reported updated.
        let derived = result.map { adoptDerivedValues(of: $0.event) } ?? []
        for object in derived where !insertedIDs.contains(object.objectID) { updatedIDs.insert(object.objectID) }
        // …and so are those this context doesn't hold (an employee whose department was
        // renamed), so a context merging the notification refreshes them too (§24.3).
        if let result, !derived.isEmpty || entities.values.contains(where: \.hasDerivedAttributes), let storeUUID = try? store().identifier {
            for change in result.event.changes {
                guard case .update(let stored, let changes) = change, let info = entities[stored.entity], info.hasDerivedAttributes,
                    changes.contains(where: { info.property(named: $0.property)?.isDerived == true })
                else { continue }
                let id = ManagedObjectID.permanent(stored, store: storeUUID)
                if !insertedIDs.contains(id) && !deletedIDs.contains(id) { updatedIDs.insert(id) }
            }
        }
        // The next objects-did-change reports them refreshed (their values were re-read from
        // the store), so what follows the context — a fetched results controller sorted by a
        // derived attribute — sees the new values.
        for object in derived { noteRefreshed(object.objectID) }
        retained.removeAll()
        insertionOrder.removeAll()
        restored.removeAll()
        pending.removeAll()
        heldForPending.removeAll()
        lockedObjects.removeAll()
        if let sequence { noteOwnCommit(sequence) }
        // The commit recorded the stacks for persisted undo with it; a save that committed
        // nothing records them now (every group on them is saved).
        if result != nil, draftRecordsUndoCheckpoint {
            // Parts of split groups still on the stacks: the next save records them again.
            journal.dropped = journal.holdsSplitGroups
            journal.movedUnlogged = false
        } else {
            recordUndoCheckpoint()
        }
        draftRecordsUndoCheckpoint = false
        for object in saved where !object.isInvalidated { object.didSave(in: context) }
        // Core Data's `didSave` "applies to deletions as well": a deleted object hears it with
        // `isDeleted` true (where an app removes the files it kept for the object), then
        // is left invalidated, not deleted.
        for object in deleted {
            object.didSave(in: context)
            object.isDeletedFlag = false
        }

        let storeIdentifier = parentContext == nil ? try? store().identifier : nil
        let didSave = ContextDidSave(
            inserted: insertedIDs, updated: updatedIDs, deleted: deletedIDs, sequence: sequence, storeIdentifier: storeIdentifier,
            contextName: name, transactionAuthor: transactionAuthor, source: ObjectIdentifier(self))
        post(.didSave(didSave), objects: Dictionary((saved + derived).map { ($0.objectID, $0) }, uniquingKeysWith: { first, _ in first }))
        if let sequence { coordinator.mergeHub.didCommit(through: sequence, source: ObjectIdentifier(self)) }
        // Children: temporary IDs made permanent first, then the saved changes to merge.
        if !idMap.isEmpty {
            addAliases(idMap)
            tellDescendants(remapping: idMap)
        }
        if sequence != nil { addVersionMoves(moves) }
        tellChildren(.merge(ChangeSummary(inserted: didSave.inserted, updated: didSave.updated, deleted: didSave.deleted)))
    }

    /// Replaces temporary IDs with permanent ones everywhere: objects, registries, values,
    /// undo groups, pending effects. `finishingSave`: the save clears the retained objects,
    /// insertion order, restored IDs and pending effects next, so they are left as they are.
    ///
    /// Undo groups that can't name a temporary ID any more are skipped; objects are found
    /// through the registry and the retained objects, and only their values that name an
    /// object are rebuilt.
    func remapIDs(_ idMap: [ManagedObjectID: ManagedObjectID], finishingSave: Bool = false) {
        guard !idMap.isEmpty else { return }
        // Saves map temporary IDs only; merging constraint conflicts may map permanent ones.
        let onlyTemporary = idMap.keys.allSatisfy(\.isTemporaryID)
        // Unordered to-many values are kept sorted so they compare as sets; new IDs sort
        // differently, so sort them again.
        func normalize(_ owner: ManagedObjectID, _ key: String, _ value: PropertyValue) -> PropertyValue {
            guard case .toMany(let ids) = value, let property = entities[owner.entityName]?.properties[key], !property.isOrdered else {
                return value
            }
            return .unordered(ids)
        }
        var lastInfo: EntityInfo?
        func relationships(_ id: ManagedObjectID) -> [PropertyInfo]? { info(for: id, last: &lastInfo)?.relationshipProperties }
        // Each group once: a user effect's changes are its undo-stack group.
        var remappedGroups: Set<ObjectIdentifier> = []
        func remap(_ group: UndoGroup) {
            guard !onlyTemporary || group.mayHoldTemporaryIDs, remappedGroups.insert(ObjectIdentifier(group)).inserted else { return }
            group.remap(idMap, onlyTemporary: onlyTemporary, relationships: relationships, normalize: normalize)
        }
        for group in journal.undoStack { remap(group) }
        for group in journal.redoStack { remap(group) }
        remap(journal.open)
        if !finishingSave { for effect in pending { remap(effect.changes) } }

        var moved: [(old: ManagedObjectID, object: ManagedObject)] = []
        func fix(_ object: ManagedObject) {
            if !onlyTemporary || object.objectID.isTemporaryID, let permanent = idMap[object.objectID] {
                moved.append((object.objectID, object))
                object.objectID = permanent
            }
            let owner = object.objectID
            let relationships = object.info.relationshipProperties
            func fixed(_ values: [String: PropertyValue]) -> [String: PropertyValue]? {
                // Only relationship values name objects: look at those, not at every value.
                guard !relationships.isEmpty, !values.isEmpty,
                    relationships.contains(where: { relationship in
                        guard let value = values[relationship.name] else { return false }
                        return onlyTemporary ? value.holdsTemporaryIDs : value.holdsIDs
                    })
                else { return nil }
                return values.remappingIDs({ remapped($0, idMap) }, normalize: { normalize(owner, $0, $1) })
            }
            // Stored dictionaries are remapped in place; the computed ones are replaced.
            func fixInPlace(_ values: inout [String: PropertyValue]) {
                guard !values.isEmpty else { return }
                values.remapRelationshipIDs(
                    relationships, onlyTemporary: onlyTemporary, { remapped($0, idMap) }, normalize: { normalize(owner, $0, $1) })
            }
            fixInPlace(&object.changes)
            fixInPlace(&object.transients)
            // Fetched values kept from before the save name its inserted objects.
            if !object.fetchedValues.isEmpty, object.fetchedValues.values.contains(where: { $0.contains { idMap[$0] != nil } }) {
                object.fetchedValues = object.fetchedValues.mapValues { $0.map { idMap[$0] ?? $0 } }
            }
            // Values held by slot came from the store: permanent IDs only, nothing to remap.
            if object.fastCommitted == nil, let committed = object.committed, let values = fixed(committed) { object.committed = values }
            if object.fastRow == nil, let row = object.row, let values = fixed(row) { object.row = values }
        }
        if onlyTemporary && idMap.values.allSatisfy({ !$0.isTemporaryID }) {
            // Temporary to permanent (a save): fixing an object twice changes nothing, so
            // retained objects (inserted ones, which all move) go first, and registry entries
            // whose object moved are known by their key and skipped.
            for object in retained.values { fix(object) }
            for (id, entry) in registry {
                if let object = entry.object, object.objectID == id { fix(object) }
            }
        } else {
            // Each object once: the registered ones, and retained ones not registered.
            for entry in registry.values { if let object = entry.object { fix(object) } }
            for (id, object) in retained where registry[id]?.object !== object { fix(object) }
        }

        // Moved objects' entries follow them: every old key out first (one object may take
        // another's old ID), then the new keys in.
        guard !moved.isEmpty else { return }
        if !changeTrackers.isEmpty { tellTrackers { $0.context(remapped: moved) } }
        var movedRegistered: [ManagedObject] = []
        var movedRetained: [ManagedObject] = []
        movedRegistered.reserveCapacity(moved.count)
        for (old, object) in moved {
            if let entry = registry[old], entry.object === object {
                registry[old] = nil
                movedRegistered.append(object)
            }
            if !finishingSave, let held = retained[old], held === object {
                retained[old] = nil
                movedRetained.append(object)
            }
        }
        for object in movedRegistered { registry[object.objectID] = WeakObject(object: object) }
        for object in movedRetained { retained[object.objectID] = object }
        if !finishingSave {
            insertionOrder.remap(idMap)
            restored = Set(restored.map { idMap[$0] ?? $0 })
        }
    }

    /// Gives inserted objects permanent IDs now, reserving the primary keys in the log
    /// (`obtainPermanentIDs(for:)`); their URIs then stay the same through the save.
    func obtainPermanentIDs(for objects: [ManagedObject]) throws {
        let store = try self.store()
        // A child's objects it pushed into its parent, unsaved there: no longer inserted here,
        // still temporary. The parent (or an ancestor) holds their inserts: it obtains the
        // IDs, and this context takes them (before, such objects were silently skipped and
        // kept their temporary IDs).
        if let parent = parentContext {
            let pushed = objects.filter { $0.objectID.isTemporaryID && !$0.isInsertedFlag && !$0.isInvalidated }.map(\.objectID)
            if !pushed.isEmpty {
                let key = ObjectIdentifier(self)
                let map = try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in
                    try parent.core.permanentIDsForChild(pushed, from: key)
                }
                if !map.isEmpty {
                    // The ancestor that made them permanent posted the map to every
                    // descendant (this context's children included) already.
                    remapIDs(map)
                    addAliases(map)
                }
            }
        }
        var byEntity: [String: [ManagedObject]] = [:]
        for object in objects where object.objectID.isTemporaryID && object.isInsertedFlag && !object.isInvalidated {
            byEntity[object.entity.name, default: []].append(object)
        }
        var idMap: [ManagedObjectID: ManagedObjectID] = [:]
        for entity in byEntity.keys.sorted() {
            guard let group = byEntity[entity] else { continue }
            let range: ClosedRange<UInt64>
            do {
                range = try coordinator.writingToStore { store in
                    try store.log.reservePrimaryKeys(of: entity, count: group.count, author: transactionAuthor, contextName: name)
                }
            } catch let error as LogError {
                // A context error, as a save's (before, the log's own error escaped: a
                // read-only store gave `LogError`, not Core Data's domain and code).
                throw ContextError.store("obtaining permanent IDs failed and no object's ID was changed: \(error.description)", underlying: .log(error))
            } catch let error as LMDBError {
                throw ContextError.store("obtaining permanent IDs failed and no object's ID was changed: \(error.description)", underlying: .lmdb(error))
            }
            for (offset, object) in group.enumerated() {
                let permanent = ManagedObjectID.permanent(StoredObjectID(entity: entity, primaryKey: range.lowerBound + UInt64(offset)), store: store.identifier)
                idMap[object.objectID] = permanent
            }
        }
        remapIDs(idMap)
        // Inserted under a permanent ID: saved with the log's restore-by-ID insert.
        for permanent in idMap.values { restored.insert(permanent) }
        // Children may hold these objects under their temporary IDs (before, a child's later
        // save naming one was refused: the parent no longer had that ID).
        if !idMap.isEmpty {
            addAliases(idMap)
            tellDescendants(remapping: idMap)
        }
    }

    /// `obtainPermanentIDs` for objects a child pushed here (by the IDs the child knows):
    /// returns each one's permanent ID.
    func permanentIDsForChild(_ ids: [ManagedObjectID], from child: ObjectIdentifier) throws -> [ManagedObjectID: ManagedObjectID] {
        var found: [(id: ManagedObjectID, object: ManagedObject)] = []
        for id in ids {
            if let object = registered(aliased(id)), !object.isInvalidated { found.append((id, object)) }
        }
        try obtainPermanentIDs(for: found.map(\.object))
        var map: [ManagedObjectID: ManagedObjectID] = [:]
        for (id, object) in found where !object.objectID.isTemporaryID { map[id] = object.objectID }
        return map
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

    /// Discards unsaved changes without reading the store; clears the undo stacks. The
    /// objects brought back to their committed values then get
    /// `awake(fromSnapshotEvents: .rollback)` (unless `awaking` is false: `reset()` forgets
    /// them anyway), once the rollback is done: what a hook sets is an ordinary change, not
    /// recorded for undo.
    /// Before, the hooks ran mid-rollback, and a persistent value one set was left on an
    /// object the context no longer held (`isUpdated`, but not in `updatedObjects`).
    func rollback(awaking: Bool = true) {
        var reverted: [ManagedObject] = []
        journal.open = UndoGroup()
        journal.explicitDepth = 0
        changesInProgress = [:]
        // What the next objects-did-change says: discarded inserts are invalidated, the
        // others refreshed (back to their committed values).
        notice.inserted.removeAll()
        notice.updated.removeAll()
        notice.deleted.removeAll()
        for object in noticeInserted { object.insertPending = false }
        noticeInserted.removeAll()
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
            // Refreshed, as Core Data's rollback refreshes the objects it restores: the values
            // their fetched properties keep go, and the next read fetches again.
            object.fetchedValues.removeAll()
            noteRefreshed(object.objectID)
            reverted.append(object)
        }
        lockedObjects.removeAll()
        retained.removeAll()
        insertionOrder.removeAll()
        restored.removeAll()
        pending.removeAll()
        heldForPending.removeAll()
        problems.removeAll()
        removedObjects.removeAll()
        discardedInserts.removeAll()
        deferredDeletes.removeAll()
        journal.clearStacks()
        if awaking && !reverted.isEmpty {
            // Not recorded for undo: the stacks stay empty after a rollback.
            journal.disabledCount += 1
            defer { journal.disabledCount -= 1 }
            for object in reverted { object.awake(fromSnapshotEvents: .rollback) }
        }
        // Persisted undo must not read the dropped groups back after a restart.
        recordUndoCheckpoint()
    }

    /// Forgets every object; clears the undo stacks.
    func reset() {
        rollback(awaking: false)
        advanceGeneration(to: nil)
        for object in registry.values.compactMap(\.object) {
            object.isInvalidated = true
            object.fetchedValues.removeAll()
            object.committed = nil
            object.version = nil
            // A fetched row not fired yet is dropped too (it would answer with fetch-time values).
            object.row = nil
            object.rowVersion = nil
        }
        registry.removeAll()
        // reset posts invalidated-all at once, replacing whatever was pending.
        notice = ObjectsDidChange()
        noticeObjects.removeAll()
        noticeInserted.removeAll()
        post(.objectsDidChange(ObjectsDidChange(invalidatedAll: true)))
    }

    func refresh(_ object: ManagedObject, mergeChanges: Bool) {
        guard prepareRefresh(object, mergeChanges: mergeChanges) else { return }
        if mergeChanges {
            reloadKeepingChanges(refreshing: [object])
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

    /// `refreshAllObjects()`: every registered object refreshed keeping its changes, the
    /// loaded ones read again together and rebased as a merge rebases them, in ID order.
    func refreshAllObjects(_ objects: Set<ManagedObject>) {
        var reread: [ManagedObject] = []
        for object in objects.sorted(by: { $0.objectID < $1.objectID }) where prepareRefresh(object, mergeChanges: true) {
            reread.append(object)
        }
        reloadKeepingChanges(refreshing: reread)
    }

    /// What both forms of `refresh(_:mergeChanges:)` do first; true when the object is then
    /// to be read again (`mergeChanges`) or turned into a fault.
    private func prepareRefresh(_ object: ManagedObject, mergeChanges: Bool) -> Bool {
        // Fetched properties are evaluated again at their next read (Core Data: "to
        // re-evaluate a fetched property, refresh the object"), an inserted object's too.
        object.fetchedValues.removeAll()
        guard !object.isInvalidated, !object.isInsertedFlag else { return false }
        object.row = nil  // a fetch-time row is as stale as the committed values
        object.rowVersion = nil
        object.isInaccessible = false  // re-read: found again, or empty again
        noteRefreshed(object.objectID)
        // A fault (nothing loaded, nothing changed) stays one: its next read loads the
        // store's values. Before, it was read now — `refreshAllObjects()` read every
        // registered fault from the store, one store read and `awakeFromFetch` each.
        if mergeChanges, !object.hasCommittedValues, object.changes.isEmpty, !object.isDeletedFlag {
            object.version = nil
            return false
        }
        return true
    }

    /// `refresh(_:mergeChanges: true)` of `objects` (each not invalidated, not inserted, already
    /// prepared by the refresh: loaded, or a fault holding changes or deleted), one, or every
    /// registered one at once (`refreshAllObjects()`). The loaded ones are re-read in one store
    /// read and rebased as a merge rebases what it updated (``reloadKeepingChanges(_:events:rebasingMoves:)``,
    /// spec 0006 §16.1): a member another writer moved into a list the context holds a change of
    /// while the context keeps its own destination for it (a team's players), a derived to-one
    /// another writer moved by changing an ordered list (a song's playlist), the lists' entries
    /// in the unsaved groups, one-to-ones. Before session 34 a refresh rebased the object's own
    /// to-manys and to-ones only: the team listed the player the context had moved to another
    /// team, and undo and redo left the two sides disagreeing; `refreshAllObjects()` refreshed
    /// one object at a time in the set's (unspecified) order, the far sides of a move rebased
    /// before the destination's own to-many.
    /// A fault holding changes, and an object the store no longer has, are read one by one as
    /// before (the missing one found inaccessible, §8.5).
    func reloadKeepingChanges(refreshing objects: [ManagedObject]) {
        let needsBefore = hasUnsavedGroups || !pending.isEmpty
        var loaded: [ManagedObject] = []
        var kept: [ObjectIdentifier: (transients: [String: PropertyValue], before: [String: PropertyValue]?)] = [:]
        var toMany: [ObjectIdentifier: [(property: PropertyInfo, base: PropertyValue, ours: PropertyValue)]] = [:]
        for object in objects {
            let key = ObjectIdentifier(object)
            if !object.changes.isEmpty { toMany[key] = toManyChanges(object) }
            if object.hasCommittedValues {
                loaded.append(object)
                // Kept for an object the read finds gone (rare): what the refresh one by one needs.
                if needsBefore || !object.changes.isEmpty { kept[key] = (object.transients, object.committed) }
            }
        }
        reloadKeepingChanges(loaded, events: .refresh)
        for object in objects where !object.hasCommittedValues {
            let key = ObjectIdentifier(object)
            let transients = kept[key]?.transients ?? object.transients
            let before = kept[key]?.before ?? object.committed
            object.committed = nil
            object.version = nil
            fulfill(object)
            var moves: [ToOneMove] = []
            if object.hasCommittedValues { moves = rebaseToManyChanges(object, toMany[key] ?? []) }
            // The unsaved undo groups start from the store's values now (§16.1).
            if before != nil, object.hasCommittedValues {
                rebaseUnsavedAttributes(object, before: before)
                moves += movedToOnes(object, before: before)
            }
            rebaseMovedToOnes(moves)
            object.transients = transients
            object.awake(fromSnapshotEvents: .refresh)
        }
    }

    /// Forgets an object's unsaved changes in the journal (refresh without merge discards
    /// them), so a later save can't write them: the open group's, unsaved groups', and what a
    /// pending undo or redo of saved work would write; groups and effects left empty go too.
    func discardUnsavedJournal(for id: ManagedObjectID) {
        func drop(_ group: UndoGroup) {
            // Only a group that changed the object scans its order (an object deleted
            // elsewhere is usually unchanged here: merging n deletes scanned every
            // unsaved group's order n times).
            guard group.changes.removeValue(forKey: id) != nil else { return }
            group.order.removeAll { $0 == id }
        }
        drop(journal.open)
        // Groups going back to the stack they came from (below), by their effect's place in
        // `pending`: the whole group, or (`part`) the object's part split off it.
        var restacked: [(index: Int, group: UndoGroup, part: UndoGroup?, undoing: Bool)] = []
        for index in pending.indices {
            let effect = pending[index]
            let group = effect.source
            if effect.kind != .user, effect.changes.changes[id] != nil, effect.changes.changes.count > 1, group.parts.isEmpty,
                group.changes[id] != nil, !pending.indices.contains(where: { $0 != index && pending[$0].source === group })
            {
                // An unsaved undo (redo) of saved work that changes other objects too: the
                // object's part of the group stays done (undone), as the store still has it,
                // in a group of its own saved as the group; the rest stays undone (redone).
                // Before, the whole group counted as undone, and undoing the group below (or
                // redoing this one) was refused as a conflict with the value the store kept.
                let part = group.splitOff(id)
                // The log names the whole group: the save records the stacks, with the part
                // and the rest as parts (before, after a restart the saved undo of the rest
                // counted for the whole group, and the part was neither undoable nor redoable).
                journal.dropped = true
                // Until this effect is saved the store has the part and the rest as one group:
                // a record made before (a quit that never saves it) names them as one.
                pending[index].splitParts.append(part)
                if effect.changes !== group { drop(effect.changes) }
                restacked.append((index, group, part, effect.kind.isUndo))
                continue
            }
            if effect.kind != .user {
                // An unsaved undo or redo of saved work: what it would write for the object. A
                // redo's changes are the saved group itself, which a later undo undoes whole:
                // the object leaves a copy (before, it left the group for good).
                if effect.changes === effect.source && effect.changes.changes[id] != nil {
                    pending[index] = effect.writing(effect.changes.copyOfChanges())
                }
                drop(pending[index].changes)
                // An unsaved undo (redo) of saved work whose every change was discarded:
                // nothing of it remains to save, so the group is done (undone) again, as the
                // store still has it. Before, it stayed on the other stack, and redoing
                // (undoing) it was refused as a conflict with the store's unchanged values.
                if pending[index].changes.isEmpty, group.parts.isEmpty,
                    !pending.indices.contains(where: { $0 != index && pending[$0].source === group })
                {
                    restacked.append((index, group, nil, effect.kind.isUndo))
                }
            } else if effect.source.saved == nil {
                drop(effect.source)
            }
        }
        func isEmptied(_ effect: PendingEffect) -> Bool { effect.kind == .user ? effect.source.isEmpty : effect.changes.isEmpty }
        let emptied = pending.filter { $0.kind == .user && $0.source.isEmpty }.map(\.source)
        pending.removeAll(where: isEmptied)
        journal.undoStack.removeAll { group in emptied.contains { $0 === group } }
        // The latest effect's group first, so each stack keeps its order: undos are made
        // newest group first (the undo stack's top is then the newest group done), redos
        // oldest first (the redo stack's top the oldest undone). Before, several groups went
        // back in the wrong order, and undoing the older one first was refused as a conflict.
        // A group no longer on the redo stack (a new group cleared it) is gone from the
        // journal, and so is its part.
        var droppedSaved = false
        defer { if droppedSaved { recordUndoCheckpoint() } }
        for entry in restacked.sorted(by: { $0.index > $1.index }) {
            let group = entry.group
            if entry.undoing {
                guard let index = journal.redoStack.lastIndex(where: { $0 === group }) else { continue }
                if entry.part == nil { journal.redoStack.remove(at: index) }
                journal.undoStack.append(entry.part ?? group)
                if journal.trim() { droppedSaved = true }
            } else {
                guard let index = journal.undoStack.lastIndex(where: { $0 === group }) else { continue }
                if entry.part == nil { journal.undoStack.remove(at: index) }
                journal.redoStack.append(entry.part ?? group)
            }
        }
    }
}

extension ManagedObject {
    /// Whether the object was re-created by undoing a saved delete and not yet saved.
    var restored: Bool { core?.restored.contains(objectID) ?? false }
}

/// What the journal groups of one save write for an object, so the reconciliation writes
/// only what they miss.
/// For a child's push (spec 0006 §18.3): the list each ordered to-many change of a draft
/// group was made from — by group index, object, then property.
typealias OrderedPushBases = [Int: [DraftObjectID: [String: [DraftObjectID]]]]

struct SaveCoverage {
    enum State { case none, inserted, deleted }
    /// The last insert or delete the groups write for the object.
    var state = State.none
    /// After an insert: its values; every recorded property it lacks is written empty.
    var inserted: [String: PropertyValue]?
    /// Properties later updates write (nil: a membership change, which covers no value).
    var updates: [String: PropertyValue?] = [:]
    /// After an insert: the object's values stamp when the group took ``inserted`` (0: unknown).
    var stamp: UInt64 = 0

    init(state: State = .none, inserted: [String: PropertyValue]? = nil, stamp: UInt64 = 0) {
        self.state = state
        self.inserted = inserted
        self.stamp = stamp
    }

    /// The value the groups write for the recorded `property`, if they write one.
    func value(_ property: PropertyInfo) -> PropertyValue? {
        if let update = updates[property.name] { return update }
        guard let inserted else { return nil }
        return inserted[property.name] ?? property.emptyValue
    }
}

extension PendingEffect.Kind {
    /// Whether the effect is the undo of saved work.
    var isUndo: Bool {
        if case .undo = self { true } else { false }
    }
}

extension TransactionDraft.Operation {
    /// A membership operation's property name ("" for any other), to order them.
    var membershipKey: String {
        if case .membership(_, let key, _, _) = self { key } else { "" }
    }
}

