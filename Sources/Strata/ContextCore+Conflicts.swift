import Foundation
import StrataLog
import StrataModel

extension ContextCore {
    /// How many times a save re-checks after another writer slipped in before it gives up.
    static let maximumSaveAttempts = 8

    // MARK: - Optimistic locking

    /// The objects whose stored version a save checks: updated ones (with a change to a
    /// recorded property), deleted ones, and those named by `detectConflicts(for:)`.
    func lockCandidates() -> [ManagedObject] {
        var found: [ManagedObjectID: ManagedObject] = [:]
        for (id, object) in retained where !object.isInsertedFlag && !object.isInvalidated && id.storedID != nil {
            if object.isDeletedFlag || object.changes.keys.contains(where: { object.info.properties[$0]?.isRecorded == true }) {
                found[id] = object
            }
        }
        for (id, object) in lockedObjects where found[id] == nil && !object.isInsertedFlag && !object.isInvalidated && id.storedID != nil {
            found[id] = object
        }
        // An object the pending groups update though it holds no change now (a child's pushed
        // rename and its undo): the commit still applies those groups to it, so the version
        // is checked as for a changed one (it is kept: `heldForPending`) — before, another writer's change to it in between
        // was overwritten unchecked. A conflict the policy resolves drops the groups' entries
        // (`fixPendingJournal`).
        for effect in pending {
            for (id, change) in effect.changes.changes where change.kind == .updated && found[id] == nil && id.storedID != nil {
                guard let object = retained[id] ?? heldForPending[id] ?? registered(id), !object.isInsertedFlag, !object.isInvalidated,
                    change.new.keys.contains(where: { object.info.properties[$0]?.isRecorded == true })
                else { continue }
                found[id] = object
            }
        }
        return found.values.sorted { $0.objectID < $1.objectID }
    }

    /// Checks every candidate's version against the store and lets the merge policy resolve
    /// the conflicts; returns the version each written object must still have at commit.
    func resolveVersionConflicts(in context: isolated ManagedObjectContext) throws -> [StoredObjectID: UInt64] {
        for _ in 0..<Self.maximumSaveAttempts {
            let candidates = lockCandidates()
            guard !candidates.isEmpty else { return [:] }
            let (conflicts, expected) = try detectVersionConflicts(candidates)
            if conflicts.isEmpty { return expected }
            pendingOverwrites.removeAll()
            defer { pendingOverwrites.removeAll() }
            let objects = conflicts.compactMap { registered($0.objectID) ?? lockedObjects[$0.objectID] }
            try mergePolicy.resolve(optimisticLockingConflicts: conflicts, in: context)
            // Changes a custom policy made through KVC form their own undo group, saved with the rest.
            closeOpenGroup(continuing: true)
            try adoptStoreState(objects)
            try applyDeleteRulesToStoredReferrers(objects, in: context)
        }
        throw ContextError.store("the save gave up after \(Self.maximumSaveAttempts) attempts: other writers kept changing the same objects")
    }

    /// The candidates the store changed since the context read them, and the versions of the others.
    func detectVersionConflicts(_ candidates: [ManagedObject]) throws -> ([MergeConflict], [StoredObjectID: UInt64]) {
        let log = try store().log
        var conflicts: [MergeConflict] = []
        var expected: [StoredObjectID: UInt64] = [:]
        try log.read { reader in
            // A deleted object whose version still matches may yet be related, through a
            // derived side, to objects another writer moved to it (spec 0006 §17.1).
            func accept(_ object: ManagedObject, _ stored: StoredObjectID, _ version: UInt64, record: StoredObject?, reader: borrowing LogReader) throws {
                if object.isDeletedFlag, let conflict = try derivedSideConflict(for: object, stored: stored, record: record, reader: reader) {
                    conflicts.append(conflict)
                } else {
                    expected[stored] = version
                }
            }
            for object in candidates {
                guard let stored = object.objectID.storedID else { continue }
                // The usual case, the version the context saw still the store's, needs only
                // the record's header.
                if let version = object.version, try reader.version(of: stored) == version {
                    try accept(object, stored, version, record: nil, reader: reader)
                    continue
                }
                let record = try reader.object(stored)
                let storeValues = record.map { values(from: $0.values, info: object.info) }
                if let record, let storeValues {
                    if let version = object.version {
                        if record.version == version {
                            try accept(object, stored, version, record: record, reader: reader)
                            continue
                        }
                        // A newer version that differs from what the context saw only in
                        // derived attributes (the store recomputed them for another writer's
                        // change elsewhere, spec 0006 §24): not a conflict.
                        if object.info.hasDerivedAttributes, let committed = object.committed,
                            sameRecordedValues(committed, storeValues, info: object.info)
                        {
                            adoptDerivedValues(storeValues, into: object)
                            object.version = record.version
                            try accept(object, stored, record.version, record: record, reader: reader)
                            continue
                        }
                    } else if object.committed.map({ sameRecordedValues($0, storeValues, info: object.info) }) ?? true {
                        adoptDerivedValues(storeValues, into: object)
                        // Values taken from a fetched row (or never loaded) and still the
                        // store's: the current version is the one the context saw.
                        object.version = record.version
                        try accept(object, stored, record.version, record: record, reader: reader)
                        continue
                    }
                }
                conflicts.append(try conflict(for: object, stored: stored, record: record, storeValues: storeValues ?? [:], reader: reader))
            }
        }
        return (conflicts, expected)
    }

    /// The derived relationship sides of a deleted object whose delete rule acts on their
    /// destinations (nullify, cascade, deny) — the sides another writer can add to without
    /// changing the object's own record.
    func ruledDerivedSides(_ object: ManagedObject) -> [PropertyInfo] {
        object.info.propertyList.filter {
            $0.isRelationship && !$0.isRecorded && !$0.isTransient && $0.inverse != nil && $0.deleteRule != .noAction
        }
    }

    /// The objects the store relates to deleted `object` through `property`, a derived side,
    /// that this save doesn't take out of it: not deleted by the context, and without a
    /// change of the inverse that no longer names the object — in the usual case none, the
    /// delete rule having run on them. One the context never saw there (another writer moved
    /// it in after the context read the side) would be left naming an object the save
    /// deletes, which the store refuses.
    func unreleasedReferrers(of object: ManagedObject, _ property: PropertyInfo, stored: StoredObjectID, reader: borrowing LogReader) throws
        -> [ManagedObjectID]
    {
        guard let inverse = property.inverse else { return [] }
        let storeUUID = try store().identifier
        return try reader.related(stored, property.name).map { ManagedObjectID.permanent($0, store: storeUUID) }.filter { id in
            guard let other = registered(id), !other.isInvalidated else { return true }
            if other.isDeletedFlag { return false }
            guard let changed = other.changes[inverse] else { return true }
            return changed.ids.contains(object.objectID)
        }
    }

    /// A conflict for a deleted object whose version the store still has, when the store
    /// relates it through a derived side to objects this save leaves naming it (another
    /// writer moved a player to the team this context deletes, unseen): in Core Data that
    /// move changes the team, so its version, and the delete is an optimistic-locking
    /// conflict; here the team's record is unchanged (derived sides are not stored, spec 0004
    /// §6.1), so the side itself is compared. Before, the save went on and the store refused
    /// it ("Person/p2.team refers to Team/p1, which is not in the store") under every policy.
    /// The conflict names the side: `base` and `ours` what the context holds, `theirs` the store's.
    func derivedSideConflict(for object: ManagedObject, stored: StoredObjectID, record: StoredObject?, reader: borrowing LogReader) throws
        -> MergeConflict?
    {
        var properties: [MergeConflict.PropertyConflict] = []
        for property in ruledDerivedSides(object) {
            let unreleased = try unreleasedReferrers(of: object, property, stored: stored, reader: reader)
            guard !unreleased.isEmpty else { continue }
            let storeUUID = try store().identifier
            let theirs = try reader.related(stored, property.name).map { ManagedObjectID.permanent($0, store: storeUUID) }
            let known = Set(unreleased)
            let ours = theirs.filter { !known.contains($0) }
            func snapshot(_ ids: [ManagedObjectID]) -> SnapshotValue {
                property.isToMany ? .objects(ids.sorted()) : .object(ids.first)
            }
            properties.append(MergeConflict.PropertyConflict(name: property.name, base: snapshot(ours), ours: snapshot(ours), theirs: snapshot(theirs)))
        }
        guard !properties.isEmpty else { return nil }
        guard let record = try record ?? reader.object(stored) else { return nil }
        return MergeConflict(
            objectID: object.objectID, oldVersion: record.version, newVersion: record.version, isDeletedInStore: false,
            isDeletedInContext: true, properties: properties, storeValues: values(from: record.values, info: object.info))
    }

    /// After a policy resolved conflicts keeping deletions: each deleted object's rules run on
    /// the destinations the store relates to it that the save doesn't take out yet (another
    /// writer's, ``derivedSideConflict(for:stored:record:reader:)``) — nullified, cascaded
    /// to — and a deny rule with such a destination refuses the save naming it. An unchanged
    /// object of the context among them is refreshed first (the context held it before the
    /// other writer moved it). The changes join the undo group of the deletes (else form
    /// their own), saved with the rest.
    func applyDeleteRulesToStoredReferrers(_ objects: [ManagedObject], in context: isolated ManagedObjectContext) throws {
        let deleted = objects.filter { $0.isDeletedFlag && !$0.isInvalidated && !$0.isInsertedFlag && !ruledDerivedSides($0).isEmpty }
        guard !deleted.isEmpty else { return }
        var found: [(ManagedObject, [ManagedObjectID])] = []
        try store().log.read { reader in
            for object in deleted {
                guard let stored = object.objectID.storedID else { continue }
                var ids: [ManagedObjectID] = []
                for property in ruledDerivedSides(object) {
                    ids += try unreleasedReferrers(of: object, property, stored: stored, reader: reader)
                }
                if !ids.isEmpty { found.append((object, ids)) }
            }
        }
        guard !found.isEmpty else { return }
        var denied: [ValidationFailure] = []
        var sides: [(ManagedObjectID, [String: PropertyValue])] = []
        let openWasEmpty = journal.open.isEmpty
        for (object, ids) in found {
            for id in ids {
                if let other = registered(id), !other.isInvalidated, !other.isDeletedFlag, other.changes.isEmpty {
                    refresh(other, mergeChanges: true)
                }
            }
            let values = currentValues(object)
            sides.append((object.objectID, values.filter { name, _ in object.info.properties[name].map { !$0.isRecorded && $0.isRelationship } ?? false }))
            let wasPropagating = isPropagatingDeletes
            isPropagatingDeletes = true
            applyDeleteRules(of: object, targets: values, deferred: true, in: context)
            isPropagatingDeletes = wasPropagating
            do { try validateDeletion(object) } catch ContextError.validation(let failures) { denied += failures }
        }
        if !denied.isEmpty {
            closeOpenGroup(continuing: true)
            throw ContextError.validation(denied)
        }
        // Recorded with the group that deletes the objects when it is the last one waiting
        // to be saved, its snapshot of each side now the store's: undoing the delete brings
        // the destinations back to it, the other writer's too, both sides agreeing.
        guard openWasEmpty, !journal.open.isEmpty, journal.explicitDepth == 0, journal.isRegistering,
            let previous = journal.undoStack.last, previous.saved == nil, !previous.fromLog, !previous.pushed,
            let last = pending.last, last.kind == .user, last.source === previous,
            sides.allSatisfy({ previous.changes[$0.0]?.kind == .deleted })
        else {
            closeOpenGroup(continuing: true)
            return
        }
        for (id, values) in sides {
            for (name, value) in values { previous.changes[id]?.values[name] = value }
        }
        let propagation = journal.open
        journal.open = UndoGroup()
        propagation.close { id in registered(id).map { (currentValues($0), $0.valuesStamp) } }
        previous.absorb(propagation) { id in registered(id).map { (currentValues($0), $0.valuesStamp) } }
        removeEmptiedEffects()
    }

    /// Whether `a` and `b` hold the same values of the recorded properties a context writes
    /// (derived attributes, which the store computes, aside).
    func sameRecordedValues(_ a: [String: PropertyValue], _ b: [String: PropertyValue], info: EntityInfo) -> Bool {
        for (name, property) in info.properties where property.isWritten {
            if PropertyValue.differ(a[name] ?? property.emptyValue, b[name] ?? property.emptyValue) { return false }
        }
        return true
    }

    /// Describes one conflict: versions from the log, and for every property either side
    /// changed, the value at the version the context saw (base), the context's (ours) and
    /// the store's (theirs).
    private func conflict(
        for object: ManagedObject, stored: StoredObjectID, record: StoredObject?, storeValues: [String: PropertyValue],
        reader: borrowing LogReader
    ) throws -> MergeConflict {
        var oldVersion = object.version
        if oldVersion == nil, let committed = object.committed {
            // Values from a fetched row: find the version whose state they are, walking back
            // through the newest 64.
            try reader.forEachVersion(of: stored, limit: 64) { sequence, image in
                guard let image, sameRecordedValues(committed, values(from: image, info: object.info), info: object.info) else {
                    return .next
                }
                oldVersion = sequence
                return .stop
            }
        }
        var base = object.committed ?? [:]
        if let oldVersion, let image = try reader.object(stored, asOf: oldVersion) { base = values(from: image, info: object.info) }
        let theirs = record == nil ? base : storeValues
        var properties: [MergeConflict.PropertyConflict] = []
        for name in object.info.orderedNames {
            // Derived attributes are the store's to compute, never the context's to merge.
            guard let property = object.info.properties[name], property.isWritten else { continue }
            let baseValue = base[name] ?? property.emptyValue
            let ours = object.changes[name] ?? object.committed?[name] ?? property.emptyValue
            let theirValue = theirs[name] ?? property.emptyValue
            guard ours != baseValue || theirValue != baseValue else { continue }
            properties.append(MergeConflict.PropertyConflict(
                name: name, base: SnapshotValue(baseValue), ours: SnapshotValue(ours), theirs: SnapshotValue(theirValue)))
        }
        // The store's version: the record's; for an object deleted in the store, the last
        // entry of its history (read only then — before, every conflict read the object's
        // whole version history).
        let newVersion = try record?.version ?? reader.history(of: stored).last ?? 0
        return MergeConflict(
            objectID: object.objectID, oldVersion: oldVersion, newVersion: newVersion,
            isDeletedInStore: record == nil, isDeletedInContext: object.isDeletedFlag, properties: properties,
            storeValues: record == nil ? [:] : storeValues)
    }

    /// After the policy ran: each conflicting object adopts the store's current values as its
    /// committed values and version, keeping whatever changes it still has (a change equal
    /// to the stored value is none); the undo journal's pending groups follow. An object the
    /// store deleted leaves the context, unless the policy re-created it.
    func adoptStoreState(_ objects: [ManagedObject]) throws {
        let live = objects.filter { !$0.isInvalidated }
        guard !live.isEmpty else { return }
        var records: [ManagedObjectID: StoredObject] = [:]
        try store().log.read { reader in
            for object in live {
                if let stored = object.objectID.storedID, let record = try reader.object(stored) { records[object.objectID] = record }
            }
        }
        // Derived relationship sides other objects cache (a team's players) that the store's
        // new values of a conflicting object invalidate: another writer moved a player, so the
        // old and new teams' cached members are stale.
        var staleDerived: [ManagedObjectID: Set<String>] = [:]
        var removed: Set<ManagedObjectID> = []
        var moves: [ToOneMove] = []
        var sides: [OneToOneSide] = []
        for object in live {
            let id = object.objectID
            guard let record = records[id] else {
                if object.isInsertedFlag && restored.contains(id) { continue }  // re-created (overwrite)
                removeFromContext(object)
                discardUnsavedRedo(for: id)
                noteInvalidated(object)
                removed.insert(id)
                continue
            }
            let transients = object.transients
            // Unsaved to-many changes are merged with the store's (both sides' additions and
            // removals, as Core Data merges to-many relationships), except where `overwrite`
            // writes the context's whole object.
            let toMany = pendingOverwrites[id] == nil ? toManyChanges(object) : []
            let before = object.committed
            object.row = nil
            object.committed = values(from: record.values, info: object.info)
            object.version = record.version
            // A derived side held as a change (a team's players) that takes in, from the store,
            // a member the context has since given another destination (read at the other
            // writer's version: no conflict of its own) doesn't list it, in memory or in the
            // groups, as at a merge (§16.1). Before, the moves were dropped here: after the
            // save the team listed the player the context had moved to its other team.
            moves += rebaseToManyChanges(object, toMany)
            for property in object.info.propertyList where property.isRecorded && property.isRelationship {
                guard let inverse = property.inverse else { continue }
                let old = before?[property.name] ?? property.emptyValue
                let new = object.committedValue(property) ?? property.emptyValue
                guard old != new else { continue }
                for related in old.ids + new.ids { staleDerived[related, default: []].insert(inverse) }
            }
            if let overwrite = pendingOverwrites[id] {
                for (key, value) in overwrite {
                    guard let property = object.info.properties[key], property.isWritten else { continue }
                    object.changes[key] = PropertyValue.same(object.committed?[key] ?? property.emptyValue, value) ? nil : value
                }
            }
            dropChangesEqualToCommitted(object)
            moves += movedToOnes(object, before: before)
            sides += oneToOneSides(object, before: before)
            object.transients = transients
            object.awake(fromSnapshotEvents: .mergePolicy)
            noteRefreshed(id)
            if !object.hasChanges && !restored.contains(id) { retained[id] = nil } else { markChanged(object) }
        }
        // Objects the store deleted leave the other objects' cached sides too (as a merge does).
        if !removed.isEmpty { dropReferences(to: removed) }
        for (id, keys) in staleDerived {
            guard let related = registered(id), !related.isInvalidated, !related.isInsertedFlag, related.hasCommittedValues else { continue }
            for key in keys {
                guard let property = related.info.properties[key], !property.isRecorded else { continue }
                related.forgetCommittedValue(for: property)  // read from the store when next used
            }
        }
        fixPendingJournal(for: Set(live.map(\.objectID)))
        // The far sides of to-ones the store moved follow, as at a merge (§16.1): the pending
        // groups start from the store's destination, so they must move the object out of it.
        rebaseMovedToOnes(moves)
        rebaseOneToOnes(sides)
    }

    /// Makes the pending groups agree with objects a merge policy changed: a property no
    /// longer changed drops out; the first pending group touching a property gets the new
    /// committed value as its old value (undoing it returns to the store's value); entries for
    /// objects no longer deleted or inserted go.
    ///
    /// A to-many that drops out so (the store holds the context's members: another writer
    /// added or removed the same) takes its far sides in the group along (``dropFarSides``):
    /// before, a member's entry stayed — a song's playlist, set when the context added it —
    /// and undoing the group took the song off the playlist in the song only, the two sides
    /// then disagreeing.
    func fixPendingJournal(for ids: Set<ManagedObjectID>) {
        var touched: Set<String> = []
        for index in pending.indices {
            var group = pending[index].changes
            // A pending redo's changes are the saved group itself, which a later undo undoes
            // whole: a property dropped here leaves a copy only (before, it left the group, and
            // undoing the redone group moved a to-one's far sides without the object). The
            // group still takes the stored value as its old value.
            let redone = pending[index].kind != .user && group === pending[index].source ? group : nil
            var dropped: [(id: ManagedObjectID, property: PropertyInfo)] = []
            // In the effect's changes as they are then (a redo's copy, not the saved group).
            defer { for entry in dropped { dropFarSides(of: entry.id, entry.property, in: group) } }
            /// The effect's own changes to edit: a redo's are the saved group until the first
            /// edit, which takes a copy (every edit below: an object leaving, an insert or
            /// delete entry going, a property dropping out).
            func detach() {
                guard let redone, group === redone else { return }
                group = redone.copyOfChanges()
                pending[index] = pending[index].writing(group)
            }
            for id in ids {
                guard var change = group.changes[id] else { continue }
                guard let object = registered(id), !object.isInvalidated else {
                    detach()
                    group.changes[id] = nil
                    group.order.removeAll { $0 == id }
                    continue
                }
                switch change.kind {
                case .updated:
                    var kept = redone?.changes[id]
                    for key in Array(change.new.keys) {
                        guard let property = object.info.properties[key], property.isRecorded else { continue }
                        if object.changes[key] == nil {
                            // Its far sides in the group go along: a to-many's members, and
                            // a to-one's destinations (their lists, or a one-to-one's derived
                            // side) — before, a pending undo left holding only a team's list
                            // wrote no group but still counted as the undo.
                            if property.isRelationship, property.inverse != nil, change.old[key] != nil || change.new[key] != nil {
                                dropped.append((id, property))
                            }
                            change.old[key] = nil
                            change.new[key] = nil
                            detach()
                        } else if touched.insert("\(id)\u{0}\(key)").inserted {
                            change.old[key] = object.committed?[key] ?? property.emptyValue
                            kept?.old[key] = change.old[key]
                        }
                    }
                    if let redone, let kept, group !== redone { redone.changes[id] = kept }
                    group.keep(change, for: id)
                case .deleted where !object.isDeletedFlag, .inserted where !object.isInsertedFlag:
                    // Before, these two edits were made in a redo's saved group itself: the
                    // group undone later (or rebuilt from the log after a restart) no longer
                    // agreed with what it had saved.
                    detach()
                    group.changes[id] = nil
                    group.order.removeAll { $0 == id }
                case .deleted, .inserted:
                    continue
                }
            }
        }
        removeEmptiedEffects()
    }

    /// The far sides of a to-many entry ``fixPendingJournal(for:)`` dropped from `group`
    /// (`id`'s `property`): each entry of the inverse naming `id` no longer moves the member
    /// in or out of it — a to-many inverse's old value takes `id` as the new one has it; a
    /// to-one inverse's entry goes when no destination it names has an entry of `property`
    /// left in the group. Entries left changing nothing go.
    func dropFarSides(of id: ManagedObjectID, _ property: PropertyInfo, in group: UndoGroup) {
        guard let inverseName = property.inverse else { return }
        for (member, change) in group.changes where change.kind == .updated {
            guard let inverse = entities[member.entityName]?.properties[inverseName], inverse.inverse == property.name,
                let memberOld = change.old[inverseName], let memberNew = change.new[inverseName],
                memberOld.ids.contains(id) || memberNew.ids.contains(id)
            else { continue }
            var change = change
            if inverse.isToMany {
                var ids = memberOld.ids.filter { $0 != id }
                if memberNew.ids.contains(id) { ids.append(id) }
                let fixed: PropertyValue = inverse.isOrdered ? .toMany(ids) : .unordered(ids)
                change.old[inverseName] = fixed
                if inverse.isOrdered ? fixed == memberNew : Set(fixed.ids) == Set(memberNew.ids) {
                    change.old[inverseName] = nil
                    change.new[inverseName] = nil
                }
            } else {
                let ends = (memberOld.ids + memberNew.ids).filter { end in
                    guard let entry = group.changes[end] else { return false }
                    return entry.old[property.name] != nil || entry.new[property.name] != nil
                }
                guard ends.isEmpty else { continue }
                change.old[inverseName] = nil
                change.new[inverseName] = nil
            }
            group.keep(change, for: member)
        }
    }

    /// The object's recorded values now (what `overwrite` writes).
    func recordedValues(_ object: ManagedObject) -> [String: PropertyValue] {
        var values: [String: PropertyValue] = [:]
        for (name, property) in object.info.properties where property.isWritten {
            values[name] = object.changes[name] ?? object.committed?[name] ?? property.emptyValue
        }
        return values
    }

    /// Applies a built-in policy to one optimistic-locking conflict (before adoption).
    func applyStandard(_ type: StandardMergePolicy.PolicyType, to conflict: MergeConflict) {
        guard let object = registered(conflict.objectID) ?? lockedObjects[conflict.objectID], !object.isInvalidated else { return }
        switch type {
        case .error, .mergeByPropertyObjectTrump:
            // Adoption keeps the context's changes over the store's values, property by
            // property; an object the store deleted leaves the context.
            return
        case .mergeByPropertyStoreTrump:
            guard !conflict.isDeletedInStore, !object.isDeletedFlag else { return }
            for change in conflict.properties where change.changedInStore && change.changedByContext {
                // A to-many isn't trumped: adoption merges both sides' additions and removals.
                guard let property = object.info.properties[change.name], !property.isToMany else { continue }
                set(object, property, conflict.storeValues[change.name] ?? property.emptyValue, maintainInverse: true, register: false)
            }
        case .overwrite:
            if conflict.isDeletedInStore {
                if !object.isDeletedFlag { recreate(object) }
                return
            }
            if !object.isDeletedFlag { pendingOverwrites[object.objectID] = recordedValues(object) }
        case .rollback:
            let wasDeleted = object.isDeletedFlag
            object.isDeletedFlag = false
            for key in Array(object.changes.keys) {
                guard let property = object.info.properties[key] else { continue }
                set(object, property, conflict.storeValues[key] ?? object.committed?[key] ?? property.emptyValue, maintainInverse: true, register: false)
            }
            object.changes.removeAll()
            if wasDeleted { restoreNullifiedInverses(of: object) }
        }
    }

    /// Puts an object whose deletion a policy dropped back into the inverses its delete's
    /// nullify rules took it out of (the team lists the player again).
    func restoreNullifiedInverses(of object: ManagedObject) {
        for property in object.info.propertyList where property.isRelationship && !property.isTransient && property.deleteRule == .nullify {
            guard let inverseName = property.inverse else { continue }
            for id in object.currentValue(property).ids {
                guard let target = registered(id), !target.isDeletedFlag, !target.isInvalidated,
                    let inverse = target.info.properties[inverseName]
                else { continue }
                let current = target.currentValue(inverse)
                let updated: PropertyValue
                if inverse.isToMany {
                    guard !current.ids.contains(object.objectID) else { continue }
                    updated = inverse.isOrdered ? .toMany(current.ids + [object.objectID]) : .unordered(current.ids + [object.objectID])
                } else {
                    guard current.isNil else { continue }
                    updated = .toOne(object.objectID)
                }
                setRaw(target, inverse, old: current, new: updated, register: false)
            }
        }
    }

    /// Re-creates an object the store deleted under its own ID with the context's values
    /// (`overwrite`): the save restores it.
    func recreate(_ object: ManagedObject) {
        let values = recordedValues(object)
        discardPendingJournal(for: object.objectID)
        object.committed = [:]
        object.changes = values.filter { !$0.value.isNil }
        object.isInsertedFlag = true
        object.version = nil
        restored.insert(object.objectID)
        markChanged(object)
    }

    // MARK: - One-to-ones

    /// A destination this save pairs through a one-to-one's recorded side (`object`'s
    /// `property`) that the store pairs with other objects (`stored`, not released by this
    /// context): another writer gave the same partner-less object a partner (spec 0004 §4.1).
    struct OneToOneClash {
        let object: ManagedObject
        let property: PropertyInfo
        let destination: ManagedObjectID
        let stored: [ManagedObjectID]
    }

    /// Every one-to-one clash of the context's changes with the store (``OneToOneClash``).
    func detectOneToOneClashes() throws -> [OneToOneClash] {
        let log = try store().log
        let storeUUID = log.storeUUID
        let objects = retained.values.filter { !$0.isDeletedFlag && !$0.isInvalidated }.sorted { $0.objectID < $1.objectID }
        var clashes: [OneToOneClash] = []
        try log.read { reader in
            for object in objects {
                for (key, value) in object.changes {
                    guard let property = object.info.properties[key], property.isRecorded, isOneToOne(property),
                        let inverseName = property.inverse, let destination = value.ids.first, let stored = destination.storedID,
                        !PropertyValue.same(object.committedValue(property) ?? .noObject, value)
                    else { continue }
                    let others = try reader.related(stored, inverseName).map { ManagedObjectID.permanent($0, store: storeUUID) }.filter { id in
                        guard id != object.objectID else { return false }
                        // One this context releases (gives another partner, or deletes) leaves it.
                        guard let other = registered(id), !other.isInvalidated else { return true }
                        return !other.isDeletedFlag && other.currentValue(property).ids.first == destination
                    }
                    if !others.isEmpty { clashes.append(OneToOneClash(object: object, property: property, destination: destination, stored: others)) }
                }
            }
        }
        return clashes
    }

    /// A commit refused for a one-to-one's second partner (spec 0004 §4.1), under a built-in
    /// policy that trumps (spec 0006 §17.2): with `mergeByPropertyObjectTrump` and `overwrite`
    /// the context's pair wins — the objects of the store's pair are merged, which releases
    /// the other partner in memory, the first unsaved group pairing the destination taking
    /// it from there, so the next commit writes both; with `mergeByPropertyStoreTrump` and
    /// `rollback` the store's pair wins — the context's side is set back to its stored
    /// destination (inverses maintained), its entries leave the pending groups, and the same
    /// objects are merged. False (the save throws `storeRefused`) for `error`, a custom
    /// policy, or when no clash is found. Before, every policy refused the save.
    func resolveOneToOneClashes(in context: isolated ManagedObjectContext) throws -> Bool {
        guard let policy = mergePolicy as? StandardMergePolicy, policy.type != .error else { return false }
        let clashes = try detectOneToOneClashes()
        guard !clashes.isEmpty else { return false }
        var updated: Set<ManagedObjectID> = []
        var setBack: Set<ManagedObjectID> = []
        for clash in clashes {
            updated.insert(clash.destination)
            for id in clash.stored {
                updated.insert(id)
                // Its partner as this context last read it: the other writer released it.
                if let other = registered(id), other.hasCommittedValues, let old = other.committedValue(clash.property)?.ids.first {
                    updated.insert(old)
                }
            }
            guard policy.type == .mergeByPropertyStoreTrump || policy.type == .rollback, !clash.object.isInvalidated else { continue }
            let object = clash.object
            let committed = object.committedValue(clash.property) ?? .noObject
            set(object, clash.property, committed, maintainInverse: true, register: false)
            // The destination takes the store's partner (read again by the merge below).
            if let inverse = clash.property.inverse, let destination = registered(clash.destination) {
                destination.changes[inverse] = nil
                setBack.insert(destination.objectID)
            }
            setBack.insert(object.objectID)
            updated.insert(object.objectID)
            if let old = committed.ids.first { updated.insert(old) }
        }
        if !setBack.isEmpty { fixPendingJournal(for: setBack) }
        merge(ChangeSummary(updated: updated), through: nil)
        closeOpenGroup(continuing: true)
        return true
    }

    /// An object the context puts in a recorded ordered to-many whose inverse is a derived
    /// to-one (a song in a playlist's songs) while the store holds it in other objects'
    /// lists (`stored`): another writer put it there, not knowing of this context's list.
    struct ListedTwiceClash {
        let object: ManagedObject
        let property: PropertyInfo
        let member: ManagedObjectID
        let stored: [ManagedObjectID]
    }

    /// Every such clash of the context's changes with the store (``ListedTwiceClash``).
    func detectListedTwiceClashes() throws -> [ListedTwiceClash] {
        let log = try store().log
        let storeUUID = log.storeUUID
        let objects = retained.values.filter { !$0.isDeletedFlag && !$0.isInvalidated }.sorted { $0.objectID < $1.objectID }
        var clashes: [ListedTwiceClash] = []
        try log.read { reader in
            for object in objects {
                for (key, value) in object.changes {
                    guard let property = object.info.properties[key], property.isRecorded, property.isToMany, property.isOrdered,
                        !property.isTransient, let destination = property.destination, let inverseName = property.inverse,
                        let inverse = entities[destination]?.properties[inverseName], !inverse.isToMany
                    else { continue }
                    let held = Set(object.committedValue(property)?.ids ?? [])
                    for member in value.ids where !held.contains(member) {
                        guard let stored = member.storedID else { continue }
                        let others = try reader.related(stored, inverseName).map { ManagedObjectID.permanent($0, store: storeUUID) }.filter { id in
                            guard id != object.objectID else { return false }
                            // One this context takes the member out of (or deletes) leaves it.
                            guard let other = registered(id), !other.isInvalidated else { return true }
                            return !other.isDeletedFlag && other.currentValue(property).ids.contains(member)
                        }
                        if !others.isEmpty { clashes.append(ListedTwiceClash(object: object, property: property, member: member, stored: others)) }
                    }
                }
            }
        }
        return clashes
    }

    /// A commit refused for an object put in a second list of an ordered to-many whose
    /// inverse is a to-one (spec 0004 §4.1), under a built-in policy that trumps (spec 0006
    /// §17.2), as for a one-to-one's second partner: with `mergeByPropertyObjectTrump` and
    /// `overwrite` the context's list wins — the store's lists holding the object and the
    /// object are merged, so the store's list loses it as a change the next commit writes;
    /// with `mergeByPropertyStoreTrump` and `rollback` the store's list wins — the object
    /// leaves the context's list (its to-one maintained), its entries leave the pending
    /// groups, and the same objects are merged. False (the save throws `storeRefused`) for
    /// `error`, a custom policy, or when no clash is found. Before session 33 the commit
    /// wrote the object into both lists.
    func resolveListedTwiceClashes(in context: isolated ManagedObjectContext) throws -> Bool {
        guard let policy = mergePolicy as? StandardMergePolicy, policy.type != .error else { return false }
        let clashes = try detectListedTwiceClashes()
        guard !clashes.isEmpty else { return false }
        var updated: Set<ManagedObjectID> = []
        var setBack: Set<ManagedObjectID> = []
        for clash in clashes {
            updated.insert(clash.member)
            updated.formUnion(clash.stored)
            guard policy.type == .mergeByPropertyStoreTrump || policy.type == .rollback, !clash.object.isInvalidated else { continue }
            let object = clash.object
            let kept = object.currentValue(clash.property).ids.filter { $0 != clash.member }
            set(object, clash.property, .toMany(kept), maintainInverse: true, register: false)
            if let inverse = clash.property.inverse, let member = registered(clash.member) {
                member.changes[inverse] = nil
                setBack.insert(member.objectID)
            }
            setBack.insert(object.objectID)
            updated.insert(object.objectID)
        }
        if !setBack.isEmpty { fixPendingJournal(for: setBack) }
        merge(ChangeSummary(updated: updated), through: nil)
        closeOpenGroup(continuing: true)
        return true
    }

    // MARK: - Uniqueness constraints

    /// Every clash the context's inserted and changed objects make with a uniqueness
    /// constraint: among themselves, or with a stored object.
    func detectConstraintConflicts() throws -> [ConstraintConflict] {
        let store = try self.store()
        let storeUUID = store.identifier
        let live = retained.values.filter { !$0.isDeletedFlag && !$0.isInvalidated }
        guard !live.isEmpty else { return [] }
        var position: [ManagedObjectID: Int] = [:]
        for (index, id) in insertionOrder.enumerated() { position[id] = index }
        func tuple(_ object: ManagedObject, _ constraint: [String]) -> [PropertyValue] {
            constraint.map { name in object.info.properties[name].map { object.currentValue($0) } ?? .none }
        }
        var result: [ConstraintConflict] = []
        try store.log.read { reader in
            for entity in model.entities.sorted(by: { $0.name < $1.name }) {
                for constraint in entity.uniquenessConstraints where !constraint.isEmpty {
                    let family = Set(model.selfAndSubentityNames(of: entity.name))
                    var groups: [[PropertyValue]: [ManagedObject]] = [:]
                    for object in live where family.contains(object.entity.name) {
                        guard object.isInsertedFlag || constraint.contains(where: { object.changes[$0] != nil }) else { continue }
                        let values = tuple(object, constraint)
                        // A nil or NaN component constrains nothing (spec 0004 §5).
                        guard !values.contains(where: \.leavesUniquenessUnchecked) else { continue }
                        groups[values, default: []].append(object)
                    }
                    // A stored object clashes with a group when it has the group's values,
                    // isn't one of its members, and isn't deleted or moving away in this save.
                    func clashes(_ stored: StoredObject, _ values: [PropertyValue], _ members: [ManagedObject]) -> Bool {
                        let id = ManagedObjectID.permanent(stored.id, store: storeUUID)
                        guard !members.contains(where: { $0.objectID == id }) else { return false }
                        if let mine = registered(id) {
                            // Deleted, or moving to other values, in this same save: no clash.
                            if mine.isDeletedFlag || mine.isInvalidated || tuple(mine, constraint) != values { return false }
                        }
                        return true
                    }
                    func storedValues(_ stored: StoredObject) -> [PropertyValue]? {
                        guard let info = entities[stored.id.entity] else { return nil }
                        return constraint.map { name in info.properties[name].map { propertyValue(stored[name], $0, storeUUID: storeUUID) } ?? .none }
                    }
                    // A one-attribute constraint with an index: each group looks its value up.
                    // Any other: one scan of the entity finds, for every group, the first stored
                    // object that clashes (before, each group scanned the entity: an import of
                    // n objects into a store of m made n × m reads when one of them clashed).
                    var indexedLookups: [[PropertyValue]: AttributeValue] = [:]
                    if constraint.count == 1, try reader.hasIndex(entity: entity.name, attribute: constraint[0]) {
                        for values in groups.keys {
                            if case .attribute(let value?) = values[0] { indexedLookups[values] = value }
                        }
                    }
                    var scanned: [[PropertyValue]: StoredObject] = [:]
                    if indexedLookups.count < groups.count {
                        var unresolved = groups.count - indexedLookups.count
                        try reader.forEachObject(of: entity.name) { stored in
                            guard let values = storedValues(stored), indexedLookups[values] == nil, scanned[values] == nil,
                                let members = groups[values], clashes(stored, values, members)
                            else { return .next }
                            scanned[values] = stored
                            unresolved -= 1
                            return unresolved == 0 ? .stop : .next
                        }
                    }
                    for (values, members) in groups {
                        var database = scanned[values]
                        if let value = indexedLookups[values] {
                            try reader.scanIndex(entity: entity.name, attribute: constraint[0], range: .equal(value)) { found in
                                if let stored = try reader.object(found), storedValues(stored) == values, clashes(stored, values, members) {
                                    database = stored
                                    return .stop
                                }
                                return .next
                            }
                        }
                        guard members.count > 1 || database != nil else { continue }
                        let ordered = members.sorted { a, b in
                            let (x, y) = (position[a.objectID] ?? Int.max, position[b.objectID] ?? Int.max)
                            return x != y ? x < y : a.objectID < b.objectID
                        }
                        let storeValues = database.flatMap { stored in entities[stored.id.entity].map { self.values(from: stored.values, info: $0) } }
                        result.append(ConstraintConflict(
                            entityName: entity.name, constraint: constraint, values: values.map(SnapshotValue.init),
                            conflictingObjects: ordered.map(\.objectID),
                            databaseObject: database.map { .permanent($0.id, store: storeUUID) },
                            databaseSnapshot: storeValues?.mapValues(SnapshotValue.init), storeValues: storeValues,
                            storeVersion: database?.version))
                    }
                }
            }
        }
        return result.sorted { a, b in
            a.entityName != b.entityName ? a.entityName < b.entityName : a.conflictingObjects.lexicographicallyPrecedes(b.conflictingObjects)
        }
    }

    /// Applies a built-in policy to one uniqueness clash: the clashing objects become one
    /// (an upsert). The object that stays is the stored one (as the context's registered
    /// instance, or the first inserted object taking over its ID), else a changed existing
    /// object, else the first inserted object; the others' references move to it and they
    /// leave the context. Its values are merged by the policy (MergePolicy.swift's table).
    func applyStandard(_ type: StandardMergePolicy.PolicyType, to conflict: ConstraintConflict) throws {
        let objects = conflict.conflictingObjects.compactMap { registered($0) }.filter { !$0.isInvalidated && !$0.isDeletedFlag }
        var inserted = objects.filter(\.isInsertedFlag)
        var changed = objects.filter { !$0.isInsertedFlag }
        let storeWins = type == .mergeByPropertyStoreTrump || type == .rollback
        // Two stored identities can't become one: a store-trumping policy takes back the
        // changed objects' constrained values; an object-trumping one can't resolve it.
        if changed.count + (conflict.databaseObject == nil ? 0 : 1) > 1 {
            guard storeWins else { throw ContextError.constraintConflicts([conflict]) }
            for object in changed {
                for name in conflict.constraint {
                    guard let property = object.info.properties[name] else { continue }
                    set(object, property, object.committed?[name] ?? property.emptyValue, maintainInverse: true, register: false)
                }
            }
            changed = []
        }
        guard !inserted.isEmpty else { return }
        // The unsaved undo group that inserted the clashing objects records what becomes of
        // the stored object that stays, so undoing it takes the upsert back (before, the
        // inserts left the journal and the stored object's new values were saved by the
        // reconciliation group: the change could not be undone, even with its action name).
        let insertedIDs = Set(inserted.map(\.objectID))
        let resolutionGroup = unsavedGroups().first { group in
            insertedIDs.contains { group.changes[$0]?.kind == .inserted }
        }

        // The keeper and the merge sources, oldest (the established object) first.
        let storeID = conflict.databaseObject
        var keeper: ManagedObject
        var takesOverStoreID = false
        var sources: [[String: PropertyValue]] = []
        if let storeID {
            if let mine = registered(storeID), !mine.isInvalidated {
                keeper = mine
                fulfill(mine)
                sources.append(persistentValues(mine))
            } else {
                keeper = inserted.removeFirst()
                takesOverStoreID = true
                sources.append(conflict.storeValues ?? [:])
                sources.append(persistentValues(keeper))
            }
        } else if let existing = changed.first {
            keeper = existing
            sources.append(persistentValues(existing))
        } else {
            keeper = inserted.removeFirst()
            sources.append(persistentValues(keeper))
        }
        sources += inserted.map(persistentValues)
        let merged = mergedValues(sources, type: type, info: keeper.info)

        // A stored keeper's entry in that group, held before the others leave (so the group
        // isn't emptied meanwhile) and filled in once its values are merged.
        if let resolutionGroup, takesOverStoreID || !keeper.isInsertedFlag {
            let id = keeper.objectID
            if takesOverStoreID || resolutionGroup.changes[id] == nil {
                if resolutionGroup.changes[id] == nil { resolutionGroup.order.append(id) }
                resolutionGroup.changes[id] = ObjectChange(kind: .updated)
            }
        }

        // The others leave; their references move to the keeper.
        let keeperID = storeID ?? keeper.objectID
        var idMap: [ManagedObjectID: ManagedObjectID] = [:]
        for other in inserted {
            for property in other.info.properties.values where property.isRecorded && property.isRelationship {
                set(other, property, property.emptyValue, maintainInverse: true, register: false)
            }
            removeFromContext(other)
            noteInvalidated(other)
            idMap[other.objectID] = keeperID
        }
        // Descendants holding an absorbed object (a child's insert pushed here) take the
        // keeper's ID, as after a save (before session 37 only this context's alias table
        // heard: a child kept its object under the old ID and met the keeper as a second one).
        tellDescendants(remapping: idMap)
        if takesOverStoreID, let storeID {
            // The inserted object becomes the stored one: its insert is no longer pending
            // (the resolution group's entry for it becomes the stored object's update).
            discardPendingJournal(for: keeper.objectID, keeping: resolutionGroup)
            let keeperTemporaryID = keeper.objectID
            idMap[keeperTemporaryID] = storeID
            keeper.isInsertedFlag = false
            insertionOrder.remove(keeperTemporaryID)
            remapIDs(idMap)
            // Children may hold the inserted object under the ID it gave up (a child's insert
            // pushed here): they take the stored ID, as after a save (before, a child's later
            // save naming it was refused: the parent no longer had that ID).
            if keeperTemporaryID.isTemporaryID { tellDescendants(remapping: [keeperTemporaryID: storeID]) }
            let derived = keeper.changes.filter { keeper.info.properties[$0.key].map { !$0.isRecorded && !$0.isTransient } ?? false }
            keeper.changes.removeAll()
            keeper.committed = conflict.storeValues ?? [:]
            keeper.version = conflict.storeVersion
            // Derived sides: the stored members plus the inserted object's.
            for (key, value) in derived {
                guard let property = keeper.info.properties[key] else { continue }
                let storedMembers = derivedValue(keeper, property) ?? property.emptyValue
                if property.isToMany {
                    let union = storedMembers.ids + value.ids.filter { !storedMembers.ids.contains($0) }
                    keeper.changes[key] = property.isOrdered ? .toMany(union) : .unordered(union)
                } else if !value.isNil {
                    keeper.changes[key] = value
                }
            }
            markChanged(keeper)
        } else {
            remapIDs(idMap)
        }
        // A child's reference to an object merged away resolves to the keeper.
        addAliases(idMap)
        let beforeMerge = resolutionGroup != nil && !keeper.isInsertedFlag ? persistentValues(keeper) : [:]
        for (name, value) in merged {
            guard let property = keeper.info.properties[name], property.isWritten else { continue }
            let value = normalized(remapped(value, idMap), property)
            // Literally: a winning value that only re-encodes the keeper's is written (before,
            // canonical `!=` skipped it and the keeper kept its old encoding).
            if PropertyValue.differ(keeper.currentValue(property), value) { set(keeper, property, value, maintainInverse: true, register: false) }
        }
        if let resolutionGroup, !keeper.isInsertedFlag { recordResolution(of: keeper, in: resolutionGroup, before: beforeMerge) }
        noteUpdated(keeper)
    }

    /// The groups whose changes are unsaved: the pending user groups, oldest first, then the
    /// open group.
    func unsavedGroups() -> [UndoGroup] {
        pending.compactMap { $0.kind == .user && $0.source.saved == nil && !$0.source.pushed ? $0.source : nil } + [journal.open]
    }

    /// Records in `group` what a uniqueness resolution did to the stored `object`: each
    /// written property whose value differs from `before` (its values before the merge — for
    /// an inserted object taking over the stored ID, the stored values) changed from that
    /// value, or from the old value the group already has, to its current one; a property back
    /// at its old value drops out, and an entry left with nothing goes (with a group it empties).
    func recordResolution(of object: ManagedObject, in group: UndoGroup, before: [String: PropertyValue]) {
        let id = object.objectID
        guard var change = group.changes[id], change.kind == .updated else { return }
        for property in object.info.propertyList where property.isWritten {
            let current = object.currentValue(property)
            let previous = before[property.name] ?? property.emptyValue
            guard PropertyValue.differ(current, previous) else { continue }
            if change.old[property.name] == nil { change.old[property.name] = previous }
            change.new[property.name] = current
        }
        for (key, old) in change.old where change.new[key].map({ PropertyValue.same(old, $0) }) == true {
            change.old[key] = nil
            change.new[key] = nil
        }
        if change.old.isEmpty && change.memberships.isEmpty {
            group.changes[id] = nil
            group.order.removeAll { $0 == id }
            removeEmptiedEffects()
        } else {
            group.changes[id] = change
        }
    }

    /// An object's persistent values now, recorded sides only (derived attributes aside).
    func persistentValues(_ object: ManagedObject) -> [String: PropertyValue] {
        var values: [String: PropertyValue] = [:]
        for (name, property) in object.info.properties where property.isWritten {
            values[name] = object.currentValue(property)
        }
        return values
    }

    /// Merges the sources (the established object first, then inserted objects in insertion
    /// order) by a policy's rule: object-trump — later sources' values win where set;
    /// store-trump — earlier sources' values win where set; overwrite — the last source;
    /// rollback — the first.
    func mergedValues(_ sources: [[String: PropertyValue]], type: StandardMergePolicy.PolicyType, info: EntityInfo) -> [String: PropertyValue] {
        guard let first = sources.first, let last = sources.last else { return [:] }
        switch type {
        case .overwrite: return last
        case .rollback, .error: return first
        case .mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump:
            let ordered = type == .mergeByPropertyObjectTrump ? sources : sources.reversed()
            var result: [String: PropertyValue] = [:]
            for source in ordered {
                for (name, value) in source where !value.isNil || result[name] == nil { result[name] = value }
            }
            return result
        }
    }
}

extension ContextCore {
    /// A value in canonical form for its property (unordered to-many sorted).
    func normalized(_ value: PropertyValue, _ property: PropertyInfo) -> PropertyValue {
        if case .toMany(let ids) = value, !property.isOrdered { return .unordered(ids) }
        return value
    }
}
