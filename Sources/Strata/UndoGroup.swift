import StrataLog

/// One object's net change within an undo group, coalesced by DESIGN.md's rules: repeated
/// sets keep the first old and the last new value; a value set back to its original drops
/// out; insert then update is an insert with final values; insert then delete is nothing;
/// update then delete is a delete with the values from before the group.
struct ObjectChange {
    enum Kind {
        case inserted, updated, deleted

        /// The kind of the inverse change: undoing an insert deletes, undoing a delete inserts.
        var reversed: Kind {
            switch self {
            case .inserted: .deleted
            case .updated: .updated
            case .deleted: .inserted
            }
        }
    }
    var kind: Kind
    /// inserted: the values at the end of the group; deleted: the values before the group.
    var values: [String: PropertyValue] = [:]
    /// updated: each property's value before the group.
    var old: [String: PropertyValue] = [:]
    /// updated: each property's value at the end of the group.
    var new: [String: PropertyValue] = [:]
    /// Unordered to-many changes known only as added/removed members (groups read from the log).
    var memberships: [String: (added: [ManagedObjectID], removed: [ManagedObjectID])] = [:]
    /// inserted: the object's ``ManagedObject/valuesStamp`` when ``values`` were taken at
    /// the group's close (0: not taken from the object). While the object still has it,
    /// ``values`` are its current values.
    var stamp: UInt64 = 0
}

/// A closed (or open) undo group: the coalesced changes of one user action.
final class UndoGroup {
    var actionName: String?
    // The state below has unchecked exclusivity, as the context's (see `ContextCore.notice`).
    /// Objects in the order they were first changed in the group.
    @exclusivity(unchecked) var order: [ManagedObjectID] = []
    @exclusivity(unchecked) var changes: [ManagedObjectID: ObjectChange] = [:] { didSet { lastInserted = nil } }
    /// The object the last ``recordInsert(_:object:)`` recorded, while nothing else has
    /// changed ``changes`` since: sets on it (an app filling in a new object) need no lookup,
    /// and it is told by identity, not by comparing IDs. Held strongly, so no other object
    /// can take its address while it is named here (the context retains an inserted object
    /// anyway, and a group that closes changes ``changes``, which lets it go).
    @exclusivity(unchecked) private var lastInserted: ManagedObject?
    /// The transaction and event group this group was saved as; nil while unsaved.
    var saved: (sequence: UInt64, group: Int)?
    /// Read back from the log (persisted undo): it holds only recorded sides, so applying
    /// it maintains inverses in memory.
    var fromLog = false
    /// A child context's group its save pushed into the parent (never "saved": no
    /// sequence). Undoing it later must push the inverse too: for an object the group
    /// inserted under a temporary ID nothing else would tell the parent to drop it.
    var pushed = false
    /// A reverted transaction's groups (or several transactions'), read from the log
    /// (spec 0006 §25); this group is their net. Its undo or redo is saved as one event
    /// group per part, each with its own origin, as persisted undo reads them. Empty for
    /// any other group.
    var parts: [UndoGroup] = []
    /// For a group read from the log: the origin its log group carries — an undo or a redo
    /// of another group (a part of a reverted undo or redo transaction) — nil for a group a
    /// save pushed. A revert of such a part redoes (undoes) that other group.
    var logOrigin: GroupOrigin?
    /// Whether this is a part of a saved group (``saved``) that a refresh split in two
    /// (``splitOff(_:)``), or the rest of that group: persisted undo records the stacks with
    /// it as a part, the changes of its objects (spec 0006 §13), as the log alone names the
    /// whole group.
    var isSplit = false
    /// For a part of a split group (``isSplit``) or its rest: the objects of the whole saved
    /// group, so that parts taken back together that cover all of them are recorded as the
    /// whole group again (spec 0006 §13); nil when not known (the part is recorded as a part).
    var splitFrom: Set<StoredObjectID>?
    /// The transactions a revert group takes back (its parts'); empty for any other group.
    var revertedSequences: Set<UInt64> { Set(parts.compactMap { $0.saved?.sequence }) }
    /// The groups a revert undoes by reverting their redo (its parts that are the redo of a
    /// group, spec 0006 §25.5); empty for any other group.
    var undoneRedoneGroups: Set<SavedGroup> {
        Set(parts.compactMap { if case .redo(let sequence, let group)? = $0.logOrigin { SavedGroup(sequence: sequence, group: group) } else { nil } })
    }
    /// Whether this group was saved as one of `groups`.
    func isSaved(as groups: Set<SavedGroup>) -> Bool {
        saved.map { groups.contains(SavedGroup(sequence: $0.sequence, group: $0.group)) } ?? false
    }
    /// Whether the group may name a temporary ID: false once a remap left none, until
    /// something is recorded again. Saves skip remapping groups that can't.
    @exclusivity(unchecked) var mayHoldTemporaryIDs = true
    /// Objects inserted and deleted within the group whose IDs are still in ``order``
    /// (without a change): taking each out at its delete scanned the whole order, which
    /// made deleting many new objects quadratic. ``close(values:)`` and ``remap`` drop them.
    @exclusivity(unchecked) private var staleInOrder: Set<ManagedObjectID> = []

    init(actionName: String? = nil) { self.actionName = actionName }

    var isEmpty: Bool { changes.isEmpty }

    /// Whether closing the group now would leave a change: ``close(values:)`` drops a
    /// property set back to its value from before the group, and an update left with none.
    /// (An open group whose changes net out to nothing is not something to undo.)
    var hasNetChanges: Bool {
        changes.values.contains { change in
            switch change.kind {
            case .inserted, .deleted: true
            case .updated:
                !change.memberships.isEmpty || change.old.contains { key, old in change.new[key].map { PropertyValue.differ(old, $0) } ?? true }
            }
        }
    }

    /// Records the insert of `id`; `object`, when given, is the object inserted (see ``lastInserted``).
    func recordInsert(_ id: ManagedObjectID, object: ManagedObject? = nil) {
        mayHoldTemporaryIDs = true
        if changes.updateValue(ObjectChange(kind: .inserted), forKey: id) == nil { appendToOrder(id) }
        lastInserted = object
    }

    /// Records that `object`'s `key` changed from `old` to `new`.
    func recordSet(_ object: ManagedObject, _ key: String, old: PropertyValue, new: PropertyValue) {
        mayHoldTemporaryIDs = true
        if object === lastInserted { return }  // inserted in the group: its values are captured at close
        // Deleted (in an earlier group; in this one its change is a delete): the save deletes
        // it, so a change has nothing to write — recorded, it was written after the delete and
        // the store refused the save ("no object Player/p1 in the store").
        if object.isDeletedFlag { return }
        let id = object.objectID
        if let index = changes.index(forKey: id) {
            switch changes.values[index].kind {
            case .inserted, .deleted: return  // captured at close / irrelevant after delete
            case .updated:
                // In place: the change isn't copied out of the table.
                if let first = changes.values[index].old[key] {
                    // A derived to-many (a team's players) the object holds no change of
                    // reads the store: another writer's member added or taken out since the
                    // group's last change of it is the store's, before and after the group
                    // (spec 0006 §9 item 4, as a merge's rebase, §16.1). Before, the group kept
                    // the value read first, and undoing a delete of such a member set the
                    // team's players without it while the player named the team.
                    if let last = changes.values[index].new[key], let property = object.info.properties[key], property.isToMany,
                        !property.isRecorded, !property.isOrdered, !property.isTransient, PropertyValue.differ(last, old)
                    {
                        let had = Set(last.ids), has = Set(old.ids)
                        let kept = first.ids.filter { has.contains($0) || !had.contains($0) }
                        changes.values[index].old[key] = .unordered(kept + old.ids.filter { !had.contains($0) })
                    }
                } else {
                    changes.values[index].old[key] = old
                }
                changes.values[index].new[key] = new
            }
        } else {
            appendToOrder(id)
            changes[id] = ObjectChange(kind: .updated, old: [key: old], new: [key: new])
        }
    }

    /// Records that `owner`'s derived to-many `property` (a team's players), `current` now,
    /// didn't list `member`, whose to-one named the owner when the change taking it out came
    /// (the side was read before another writer put the member there): before the group the
    /// member was the owner's, so the group's first old value of the side lists it and its
    /// new value doesn't — undoing the group (a delete of the member) lists it again beside
    /// its to-one, and redoing takes it out (spec 0006 §9 item 4).
    func recordUnlistedMember(_ owner: ManagedObject, _ property: PropertyInfo, _ member: ManagedObjectID, current: PropertyValue) {
        if owner === lastInserted || owner.isDeletedFlag { return }
        func with(_ value: PropertyValue) -> PropertyValue {
            property.isOrdered ? .toMany(value.ids + [member]) : .unordered(value.ids + [member])
        }
        let id = owner.objectID, key = property.name
        mayHoldTemporaryIDs = true
        guard let index = changes.index(forKey: id) else {
            appendToOrder(id)
            changes[id] = ObjectChange(kind: .updated, old: [key: with(current)], new: [key: current])
            return
        }
        guard changes.values[index].kind == .updated else { return }
        guard let old = changes.values[index].old[key] else {
            changes.values[index].old[key] = with(current)
            changes.values[index].new[key] = current
            return
        }
        if !old.ids.contains(member) { changes.values[index].old[key] = with(old) }
        if changes.values[index].new[key] == nil { changes.values[index].new[key] = current }
    }

    /// What the group needs around a change of a value in place
    /// (``detachForInPlaceChange(_:_:)``).
    enum InPlaceChange {
        /// The value from before the group must be recorded first: no change in place.
        case refused
        /// Nothing to record: the object was inserted or deleted in the group.
        case unrecorded
        /// The value from before the group is kept; ``reattach(_:_:_:)`` records the result.
        case reattach
    }

    /// Before `key` of `id`'s value changes in place: whether the group needs nothing more
    /// recorded first — the object was inserted or deleted in the group (``InPlaceChange/unrecorded``),
    /// or the value from before the group is already kept (``InPlaceChange/reattach``: the
    /// group's reference to the current value is dropped, so the change doesn't copy it, and
    /// ``reattach(_:_:_:)`` records the result). One lookup: an inserted object's in-place
    /// changes (filling a new team's members) need no second one to reattach nothing.
    func detachForInPlaceChange(_ id: ManagedObjectID, _ key: String) -> InPlaceChange {
        guard let index = changes.index(forKey: id) else { return .refused }
        switch changes.values[index].kind {
        case .inserted, .deleted:
            mayHoldTemporaryIDs = true  // as the reattach it needs no more did
            return .unrecorded
        case .updated:
            guard changes.values[index].old[key] != nil else { return .refused }
            changes.values[index].new[key] = nil
            return .reattach
        }
    }

    /// Records `value` as `key`'s new value after an in-place change that
    /// ``detachForInPlaceChange(_:_:)`` allowed.
    func reattach(_ id: ManagedObjectID, _ key: String, _ value: PropertyValue) {
        mayHoldTemporaryIDs = true
        guard let index = changes.index(forKey: id), changes.values[index].kind == .updated else { return }
        changes.values[index].new[key] = value
    }

    func recordDelete(_ id: ManagedObjectID, snapshot: [String: PropertyValue]) {
        mayHoldTemporaryIDs = true
        if let change = changes[id] {
            switch change.kind {
            case .inserted:
                changes[id] = nil
                staleInOrder.insert(id)
            case .updated:
                var before = snapshot
                for (key, value) in change.old { before[key] = value }
                changes[id] = ObjectChange(kind: .deleted, values: before)
            case .deleted: return
            }
        } else {
            appendToOrder(id)
            changes[id] = ObjectChange(kind: .deleted, values: snapshot)
        }
    }

    /// Appends an object changed for the first time in the group (again, after an insert
    /// and delete: its old place goes, as it did when the delete took it out).
    private func appendToOrder(_ id: ManagedObjectID) {
        if !staleInOrder.isEmpty, staleInOrder.remove(id) != nil { order.removeAll { $0 == id } }
        order.append(id)
    }

    /// Takes the IDs of objects inserted and deleted within the group out of ``order``.
    private func dropStaleOrder() {
        guard !staleInOrder.isEmpty else { return }
        order.removeAll { staleInOrder.contains($0) && changes[$0] == nil }
        staleInOrder.removeAll()
    }

    /// Closes the group: captures inserted objects' final values, drops no-op sets.
    func close(values: (ManagedObjectID) -> (values: [String: PropertyValue], stamp: UInt64)?) {
        mayHoldTemporaryIDs = true
        dropStaleOrder()
        var dropped = false
        for id in order {
            // Changed in place: the change isn't copied out of the table and back.
            guard let index = changes.index(forKey: id) else {
                dropped = true
                continue
            }
            switch changes.values[index].kind {
            case .inserted:
                let current = values(id)
                changes.values[index].values = current?.values ?? [:]
                changes.values[index].stamp = current?.stamp ?? 0
            case .updated:
                var change = changes.values[index]
                for (key, old) in change.old where change.new[key].map({ PropertyValue.same($0, old) }) == true {
                    change.old[key] = nil
                    change.new[key] = nil
                }
                if change.old.isEmpty && change.memberships.isEmpty {
                    changes.remove(at: index)
                    dropped = true
                } else {
                    changes.values[index] = change
                }
            case .deleted: break
            }
        }
        if dropped { order.removeAll { changes[$0] == nil } }
    }

    /// Takes the changes of `later`, a closed group recorded after this closed one, into
    /// this group, coalesced as if they had been recorded here (the rules of
    /// ``recordDelete(_:snapshot:)`` and ``recordSet(_:_:old:new:)``, then ``close(values:)``'s):
    /// an object new to this group is appended; insert then delete is nothing; insert then
    /// update is the insert with `values`' current values; update then delete is a delete
    /// with the values from before this group; update then update keeps this group's old
    /// values and `later`'s new ones, dropping properties set back, and each to-many's
    /// membership change net of both (an object added then removed is no change). (Delete rules deferred to
    /// the save join the group of the deletes this way.)
    func absorb(_ later: UndoGroup, values: (ManagedObjectID) -> (values: [String: PropertyValue], stamp: UInt64)?) {
        mayHoldTemporaryIDs = true
        dropStaleOrder()
        var dropped = false
        for id in later.order {
            guard let change = later.changes[id] else { continue }
            guard let index = changes.index(forKey: id) else {
                order.append(id)
                changes[id] = change
                continue
            }
            var mine = changes.values[index]
            switch (mine.kind, change.kind) {
            case (.deleted, _):
                continue
            case (.inserted, .deleted):
                changes.remove(at: index)
                dropped = true
                continue
            case (.inserted, _):
                if let current = values(id) {
                    mine.values = current.values
                    mine.stamp = current.stamp
                } else {
                    mine.stamp = 0
                }
            case (.updated, .deleted):
                var before = change.values
                for (key, value) in mine.old { before[key] = value }
                mine = ObjectChange(kind: .deleted, values: before)
            case (.updated, .updated):
                for (key, old) in change.old where mine.old[key] == nil { mine.old[key] = old }
                for (key, new) in change.new { mine.new[key] = new }
                for (key, later) in change.memberships {
                    guard let earlier = mine.memberships[key] else {
                        mine.memberships[key] = later
                        continue
                    }
                    // Net of both: added by one and not removed by the other (an object
                    // added then removed, or removed then added back, is no change).
                    let (addedFirst, removedFirst) = (Set(earlier.added), Set(earlier.removed))
                    let (addedLater, removedLater) = (Set(later.added), Set(later.removed))
                    let added = earlier.added.filter { !removedLater.contains($0) } + later.added.filter { !removedFirst.contains($0) }
                    let removed = earlier.removed.filter { !addedLater.contains($0) } + later.removed.filter { !addedFirst.contains($0) }
                    mine.memberships[key] = added.isEmpty && removed.isEmpty ? nil : (added, removed)
                }
                for (key, old) in mine.old where mine.new[key].map({ PropertyValue.same($0, old) }) == true {
                    mine.old[key] = nil
                    mine.new[key] = nil
                }
                if mine.old.isEmpty && mine.memberships.isEmpty {
                    changes.remove(at: index)
                    dropped = true
                    continue
                }
            case (.updated, .inserted):
                // Not met (an object updated here exists), kept coherent: the later insert wins.
                mine = change
            }
            changes.values[index] = mine
        }
        if dropped { order.removeAll { changes[$0] == nil } }
    }

    /// Replaces temporary IDs after a save, everywhere in the group; `normalize` restores
    /// each value's canonical form (unordered to-many values sorted again). With
    /// `onlyTemporary` (the map's keys are all temporary IDs), permanent IDs aren't looked up.
    /// `relationships` gives an object's relationship properties (the only ones whose values
    /// name objects), when known: the other values aren't looked at.
    func remap(
        _ map: [ManagedObjectID: ManagedObjectID], onlyTemporary: Bool = false,
        relationships: (ManagedObjectID) -> [PropertyInfo]? = { _ in nil },
        normalize: (ManagedObjectID, String, PropertyValue) -> PropertyValue
    ) {
        guard !map.isEmpty else { return }
        dropStaleOrder()
        var remainsTemporary = false
        func fixID(_ id: ManagedObjectID) -> ManagedObjectID {
            if onlyTemporary && !id.isTemporaryID { return id }
            let fixed = map[id] ?? id
            if fixed.isTemporaryID { remainsTemporary = true }
            return fixed
        }
        func fixValue(_ value: PropertyValue) -> PropertyValue {
            switch value {
            case .toOne(let id?): .toOne(fixID(id))
            case .toMany(let ids): .toMany(ids.map(fixID))
            default: value
            }
        }
        order = order.map(fixID)
        // The values first, in place (the table holds the only reference to each), then the
        // table again under the new keys — moving changes, not copying their values.
        var owners: [ManagedObjectID] = []
        owners.reserveCapacity(changes.count)
        // Walked by index, not over `changes.indices` (which holds the table, so the first
        // change in place would copy it).
        var index = changes.startIndex
        while index != changes.endIndex {
            defer { changes.formIndex(after: &index) }
            let owner = fixID(changes.keys[index])
            owners.append(owner)
            let properties = relationships(owner)
            func fixAll(_ values: inout [String: PropertyValue]) {
                guard !values.isEmpty else { return }
                if let properties {
                    values.remapRelationshipIDs(properties, onlyTemporary: false, fixValue, normalize: { normalize(owner, $0, $1) })
                } else {
                    values = values.remappingIDs(fixValue, normalize: { normalize(owner, $0, $1) })
                }
            }
            fixAll(&changes.values[index].values)
            fixAll(&changes.values[index].old)
            fixAll(&changes.values[index].new)
            if !changes.values[index].memberships.isEmpty {
                changes.values[index].memberships = changes.values[index].memberships.mapValues { ($0.added.map(fixID), $0.removed.map(fixID)) }
            }
        }
        var remapped: [ManagedObjectID: ObjectChange] = [:]
        remapped.reserveCapacity(changes.count)
        for (index, owner) in zip(changes.indices, owners) { remapped[owner] = changes.values[index] }
        changes = remapped
        mayHoldTemporaryIDs = remainsTemporary
    }

    /// A copy of the group's changes (not its saved state), to change without changing this group.
    func copyOfChanges() -> UndoGroup {
        let group = UndoGroup(actionName: actionName)
        group.order = order
        group.changes = changes
        group.fromLog = fromLog
        group.staleInOrder = staleInOrder
        return group
    }

    /// Takes `id`'s change out of this group into a group of its own, saved as this one
    /// (the same transaction and event group, origin and action name).
    func splitOff(_ id: ManagedObjectID) -> UndoGroup {
        let part = UndoGroup(actionName: actionName)
        let whole = isSplit ? splitFrom : Set(changes.keys.compactMap(\.storedID))
        part.splitFrom = whole
        splitFrom = whole
        if let change = changes.removeValue(forKey: id) {
            part.changes[id] = change
            part.order = [id]
        }
        order.removeAll { $0 == id }
        part.saved = saved
        part.fromLog = fromLog
        part.logOrigin = logOrigin
        part.pushed = pushed
        part.isSplit = true
        isSplit = true
        return part
    }

    /// The same changes, reversed (what undoing this group does).
    var inverse: UndoGroup {
        let group = UndoGroup(actionName: actionName)
        group.order = order.reversed()
        group.fromLog = fromLog
        for (id, change) in changes {
            switch change.kind {
            case .inserted, .deleted: group.changes[id] = ObjectChange(kind: change.kind.reversed, values: change.values)
            case .updated:
                group.changes[id] = ObjectChange(
                    kind: .updated, old: change.new, new: change.old,
                    memberships: change.memberships.mapValues { ($0.removed, $0.added) })
            }
        }
        return group
    }
}

/// A group of a saved transaction: its sequence and its index among the transaction's groups.
struct SavedGroup: Hashable {
    let sequence: UInt64
    let group: Int
}

extension UndoGroup {
    /// Puts `change` back as `id`'s entry after some of its properties were taken out, or
    /// removes the entry (and `id` from ``order``) when nothing is left in it; true when removed.
    @discardableResult
    func keep(_ change: ObjectChange, for id: ManagedObjectID) -> Bool {
        if change.old.isEmpty && change.new.isEmpty && change.memberships.isEmpty {
            changes[id] = nil
            order.removeAll { $0 == id }
            return true
        }
        changes[id] = change
        return false
    }
}
