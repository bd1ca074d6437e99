import Foundation
import StrataLog

// Reverting a saved transaction, any writer's (spec 0006 §25): undone as `undo()` undoes a
// saved group — its inverse checked against the store's current state — whoever saved it.

extension ContextCore {
    func revertTransaction(at token: HistoryToken, actionName: String?) throws {
        try revertTransactions(at: [token], actionName: actionName)
    }

    /// Reverts the transactions `tokens` name as one (spec 0006 §25.6): their changes taken
    /// together, net, in log order, checked and applied backwards as one revert.
    func revertTransactions(at tokens: [HistoryToken], actionName: String?) throws {
        guard parentContext == nil else {
            throw ContextError.invalidArgument(
                "a child context can't revert a saved transaction (it saves into its parent, not the store); revert in a context of the coordinator")
        }
        guard !tokens.isEmpty else { throw ContextError.invalidArgument("no transaction to revert was given; nothing was changed") }
        // The open group closes first, even inside explicit grouping, as at `undo()`: the
        // revert goes onto the redo stack above it (before, inside `beginUndoGrouping()` the
        // group stayed open, and closing it at `endUndoGrouping()` cleared the redo stack,
        // losing the revert's redo).
        closeOpenGroup(continuing: true)
        let store = try self.store()
        let events = try store.log.read { reader -> [TransactionEvent] in
            let head = try reader.head
            let purged = try reader.purgedThrough
            var sequences: Set<UInt64> = []
            for token in tokens {
                try store.check(token, head: head)
                guard token.sequence > 0 else {
                    throw ContextError.invalidArgument("sequence 0 is the point before the first transaction, not a transaction; nothing to revert")
                }
                if token.sequence <= purged { throw store.purgedError(requested: token.sequence, purgedThrough: purged, reader) }
                sequences.insert(token.sequence)
            }
            return try sequences.sorted().map { try reader.event($0) }
        }
        let sequences = events.map(\.sequence)
        let reverted = Set(sequences)
        let what = events.count == 1 ? "transaction \(sequences[0]) (\(events[0].kind))" : "transactions \(Self.list(sequences))"
        // The transactions' groups, in log order, each as an undo group of its own (its
        // sequence and index, which its saved undo names), under this model's names.
        var parts: [UndoGroup] = []
        for event in events {
            parts += try revertibleGroups(of: event, store: store)
        }
        // Taken as one: what they did to the store, net. An object one of them inserted and
        // a later group changed: the insert's values are those after all of them.
        let combined = UndoGroup(actionName: actionName ?? parts.lazy.compactMap(\.actionName).first)
        combined.fromLog = true
        combined.saved = (sequences[sequences.count - 1], 0)
        var latest: [ManagedObjectID: [String: PropertyValue]] = [:]
        // The value each property was last given by one of them, and by which.
        var given: [ManagedObjectID: [String: (value: PropertyValue, sequence: UInt64)]] = [:]
        // The objects one of them inserted, and by which.
        var insertedBy: [ManagedObjectID: UInt64] = [:]
        // Each to-many member one of them last added (true) or removed, and by which.
        var moved: [ManagedObjectID: [String: [ManagedObjectID: (added: Bool, sequence: UInt64)]]] = [:]
        // The objects one of them deleted, and by which.
        var deletedBy: [ManagedObjectID: UInt64] = [:]
        for part in parts {
            guard let sequence = part.saved?.sequence else { continue }
            if events.count > 1 {
                try checkContiguous(
                    part, sequence: sequence, given: given, insertedBy: insertedBy, moved: moved, deletedBy: deletedBy, reverted: reverted,
                    members: sequences, store: store)
            }
            // An object one of them deleted that a later one brings back (its undo, among
            // them): there before them and after, it is net an update from the values it was
            // deleted with to those it came back with (before, the delete stood, net, and the
            // revert was refused: the object exists).
            let reinserted = part.order.filter { part.changes[$0]?.kind == .inserted && combined.changes[$0]?.kind == .deleted }
            for (id, change) in part.changes {
                switch change.kind {
                case .inserted where reinserted.contains(id):
                    given[id] = change.values.mapValues { ($0, sequence) }
                    deletedBy[id] = nil
                case .inserted:
                    latest[id] = change.values
                    given[id] = change.values.mapValues { ($0, sequence) }
                    insertedBy[id] = sequence
                    deletedBy[id] = nil
                case .updated:
                    if latest[id] != nil { for (key, value) in change.new { latest[id]?[key] = value } }
                    for (key, value) in change.new { given[id, default: [:]][key] = (value, sequence) }
                    for (key, membership) in change.memberships {
                        for member in membership.added { moved[id, default: [:]][key, default: [:]][member] = (true, sequence) }
                        for member in membership.removed { moved[id, default: [:]][key, default: [:]][member] = (false, sequence) }
                    }
                case .deleted:
                    given[id] = nil
                    insertedBy[id] = nil
                    moved[id] = nil
                    deletedBy[id] = sequence
                }
            }
            guard !reinserted.isEmpty else {
                combined.absorb(part) { id in latest[id].map { ($0, 0) } }
                continue
            }
            let bridge = UndoGroup()
            bridge.fromLog = true
            for id in reinserted {
                guard let deleted = combined.changes[id]?.values, let inserted = part.changes[id]?.values else { continue }
                combined.changes[id] = nil
                combined.order.removeAll { $0 == id }
                if let update = reinsertion(of: id, deletedWith: deleted, insertedWith: inserted) {
                    bridge.order.append(id)
                    bridge.changes[id] = update
                }
            }
            let rest = UndoGroup(actionName: part.actionName)
            rest.fromLog = true
            rest.order = part.order.filter { !reinserted.contains($0) }
            rest.changes = part.changes.filter { !reinserted.contains($0.key) }
            combined.absorb(bridge) { _ in nil }
            combined.absorb(rest) { id in latest[id].map { ($0, 0) } }
        }
        guard !combined.isEmpty else {
            throw ContextError.invalidArgument(
                events.count == 1
                    ? "\(what) changes no stored value this context keeps (only derived ones); nothing to revert"
                    : "\(what) change no stored value this context keeps, taken together (what one of them changed another set back, or only derived values); nothing to revert")
        }
        // Then as `undo()` undoes a saved group: refused, changing nothing, if another
        // transaction changed what they changed since; applied backwards; on the redo stack
        // (`redo()` applies them again); saved as their undo, group by group.
        try checkUnsavedWork(combined)
        do {
            // Its inserts are checked against their history, which names the transaction.
            try checkConflicts(applying: combined, reversed: true, insertValues: false)
            try checkInsertsUnchanged(combined, sequences: reverted, store: store)
            try checkReferencesExist(combined, store: store)
            try checkUniqueValuesFree(combined, store: store)
        } catch ContextError.undoConflict(let object, let property, let expected, let found) {
            // Reverted already (and not redone since): say so, rather than what that revert changed.
            for sequence in sequences {
                // An undo among them (one of them undone by another) isn't a revert of it.
                guard let reverter = try? lastRevert(of: sequence, among: combined, store: store), !reverted.contains(reverter) else { continue }
                let name = events.count == 1 ? what : "transaction \(sequence)"
                throw ContextError.invalidArgument(
                    "\(name) was reverted already, by transaction \(reverter), and not redone since; nothing was changed")
            }
            throw ContextError.undoConflict(object: object, property: property, expected: expected, found: found)
        }
        apply(combined, reversed: true, events: .undoUpdate)
        // This context's own groups of the transactions (its saved work still on its
        // stacks, or persisted undo's) are what the revert takes back: left there, undo()
        // would apply them backwards a second time.
        journal.undoStack.removeAll { $0.saved.map { reverted.contains($0.sequence) } ?? false }
        journal.redoStack.removeAll { $0.saved.map { reverted.contains($0.sequence) } ?? false }
        // …and those persisted undo hasn't read yet, when it reads them.
        journal.reverted.formUnion(reverted)
        // A redo among them: the group it redid is undone again (§25.5), so it leaves the
        // undo stack as well (left there, undo() would apply it backwards a second time; its
        // revert's redo applies it again). An undo among them leaves the group it undid on
        // the redo stack, below the revert: redoing the revert undoes it again.
        combined.parts = parts
        let undone = combined.undoneRedoneGroups
        if !undone.isEmpty {
            journal.undoStack.removeAll { $0.isSaved(as: undone) }
            journal.undoneByRevert.formUnion(undone)
        }
        journal.redoStack.append(combined)
        // Saved as one event group per group of the transactions, last first, each the
        // undo of its group (origin `undo(of: sequence, group: i)`): persisted undo reads a
        // group's origin as what happened to that group, so one group marked as the undo of
        // group 0 would leave the others on the undo stack of a context with the
        // transaction's author and name, and its redo would redo group 0 alone.
        appendEffects(of: combined, undoing: true)
    }

    /// The net change of an object deleted with `deleted` and brought back with `inserted`:
    /// an update of each stored value that differs (an unordered to-many's members added and
    /// removed), nil when none does.
    private func reinsertion(
        of id: ManagedObjectID, deletedWith deleted: [String: PropertyValue], insertedWith inserted: [String: PropertyValue]
    ) -> ObjectChange? {
        guard let info = entities[id.entityName] else { return nil }
        var change = ObjectChange(kind: .updated)
        for key in Set(deleted.keys).union(inserted.keys).sorted() {
            guard let property = info.properties[key], !property.isDerived else { continue }
            let empty: PropertyValue = switch property.kind {
            case .attribute: .none
            case .toOne: .noObject
            case .toMany: .toMany([])
            }
            let (old, new) = (deleted[key] ?? empty, inserted[key] ?? empty)
            // Literally: a value brought back re-encoded is a change (and NaN is NaN).
            if !PropertyValue.differ(old, new) || (old.isNil && new.isNil) { continue }
            if case .toMany(ordered: false) = property.kind {
                let (before, after) = (Set(old.ids), Set(new.ids))
                change.memberships[key] = (new.ids.filter { !before.contains($0) }, old.ids.filter { !after.contains($0) })
            } else {
                change.old[key] = old
                change.new[key] = new
            }
        }
        return change.old.isEmpty && change.memberships.isEmpty ? nil : change
    }

    /// `sequences` as a reader writes them: `3, 5, 9`.
    private static func list(_ sequences: [UInt64]) -> String {
        sequences.map(String.init).joined(separator: ", ")
    }

    /// The first of the transactions `among`, migrations left out, that inserted or deleted
    /// `stored` or changed a property of it as `counts` accepts: named as the transaction
    /// wrote it, or `translated` under this model's names (a property a later version
    /// removed is then left out).
    private func firstChange(
        of stored: StoredObjectID, among sequences: [UInt64], store: PersistentStore, _ reader: borrowing LogReader,
        translated: Bool = false, counts: (PropertyChange) -> Bool
    ) throws -> UInt64? {
        guard !sequences.isEmpty else { return nil }
        var found: UInt64?
        try reader.forEachEvent(among: sequences) { event in
            // A migration converts or fills stored values for a later model version (spec
            // 0004 §4.4): no one's work (the revert reads values converted as it converts them).
            if event.kind == .migration { return .next }
            for group in event.groups {
                let group = translated ? store.log.translating(group, fromModelVersion: event.modelVersion) : group
                for change in group.changes where change.objectID == stored {
                    switch change {
                    case .insert, .delete: found = event.sequence
                    case .update(_, let changes):
                        if changes.contains(where: counts) { found = event.sequence }
                    }
                    if found != nil { return .stop }
                }
            }
            return .next
        }
        return found
    }

    /// The groups of `event` as undo groups (their sequence and index kept), under this
    /// model's names; refused, naming it, for a kind that can't be reverted or for an entity
    /// or property this model doesn't have.
    private func revertibleGroups(of event: TransactionEvent, store: PersistentStore) throws -> [UndoGroup] {
        let sequence = event.sequence
        let what = "transaction \(sequence) (\(event.kind))"
        switch event.kind {
        case .save, .undo, .redo, .import: break
        case .migration:
            throw ContextError.invalidArgument(
                "\(what) is a model-version migration: its inverse would put values back in an earlier version's terms; nothing was changed")
        case .reservation, .purge:
            throw ContextError.invalidArgument("\(what) changes no object; nothing to revert")
        }
        // Under this model's names: a transaction an earlier model version wrote, with its
        // entities and properties as later versions renamed them (as persisted undo reads
        // it, §13.3). What a later version removed isn't reverted by half: translating
        // leaves it out, and that refuses it below.
        let groups = event.groups.map { store.log.translating($0, fromModelVersion: event.modelVersion) }
        func names(_ change: Change) -> [String] {
            switch change {
            case .insert(_, let values), .delete(_, let values): Array(values.keys)
            case .update(_, let changes): changes.map(\.property)
            }
        }
        for (original, translated) in zip(event.groups, groups) {
            var kept = translated.changes.makeIterator()
            for change in original.changes {
                // Translation keeps the order, dropping an object of a removed entity and a
                // removed property's values.
                var current = kept.next()
                if let next = current, next.objectID.primaryKey != change.objectID.primaryKey || names(next).count != names(change).count {
                    current = nil
                }
                guard current == nil else { continue }
                let id = change.objectID
                guard let info = entities[id.entity] else {
                    throw ContextError.invalidArgument(
                        "\(what) changes \(id), of entity \(id.entity), which this context's model doesn't have (it was written by model version \(event.modelVersion)); nothing was changed")
                }
                let name = names(change).first { info.properties[$0] == nil } ?? names(change).joined(separator: ", ")
                throw ContextError.invalidArgument(
                    "\(what) changes \(id).\(name), which entity \(id.entity) of this context's model doesn't have (it was written by model version \(event.modelVersion)); nothing was changed")
            }
        }
        // Every entity and property it names must be this model's: a transaction written
        // with other names isn't reverted by half.
        for change in groups.flatMap(\.changes) {
            let id = change.objectID
            guard let info = entities[id.entity] else {
                throw ContextError.invalidArgument(
                    "\(what) changes \(id), of entity \(id.entity), which this context's model doesn't have (it was written by model version \(event.modelVersion)); nothing was changed")
            }
            for name in names(change) where info.properties[name] == nil {
                throw ContextError.invalidArgument(
                    "\(what) changes \(id).\(name), which entity \(id.entity) of this context's model doesn't have (it was written by model version \(event.modelVersion)); nothing was changed")
            }
        }
        let parts = groups.enumerated().map { index, group in undoGroup(from: group, sequence: sequence, index: index, storeUUID: store.identifier) }
        // An undo or redo transaction written before groups carried origins is one undo or
        // redo of the group its kind names (§13): its revert redoes or undoes that group.
        if let origin = Self.kindOrigin(of: event) {
            for part in parts { part.logOrigin = origin }
        }
        return parts
    }

    /// For an `undo` or `redo` transaction none of whose groups carries an origin (written
    /// before groups did), the origin its kind names; nil for any other.
    private static func kindOrigin(of event: TransactionEvent) -> GroupOrigin? {
        guard !event.groups.contains(where: { $0.origin != nil }) else { return nil }
        return switch event.kind {
        case .undo(let of, let group): .undo(of: of, group: group)
        case .redo(let of, let group): .redo(of: of, group: group)
        default: nil
        }
    }

    /// Refuses to take several transactions as one when a transaction between them, not
    /// among them, changed a value one of them set and a later one of them changed again:
    /// `part` (of transaction `sequence`) replaces a value other than the one the earlier
    /// transaction left (`given`), so setting back the earlier one's value would take the
    /// transaction between with it.
    ///
    /// An object one of them inserted (`insertedBy`) that `part` deletes is refused if a
    /// transaction between them changed it at all: taken together they leave no trace of it,
    /// and that transaction's work would go with it without a word (a value the insert
    /// didn't set — a relationship it left empty — isn't in `given`).
    private func checkContiguous(
        _ part: UndoGroup, sequence: UInt64, given: [ManagedObjectID: [String: (value: PropertyValue, sequence: UInt64)]],
        insertedBy: [ManagedObjectID: UInt64], moved: [ManagedObjectID: [String: [ManagedObjectID: (added: Bool, sequence: UInt64)]]],
        deletedBy: [ManagedObjectID: UInt64], reverted: Set<UInt64>, members: [UInt64], store: PersistentStore
    ) throws {
        for id in part.order {
            guard let change = part.changes[id] else { continue }
            // An object one of them deleted that `part` changes or deletes again: a
            // transaction between them brought it back (an undo or a revert of that delete):
            // reverted together, the delete would be taken back twice (before, the store
            // refused the save: the object already exists) or over that transaction's work.
            if change.kind != .inserted, let deleter = deletedBy[id], deleter != sequence {
                let between = try id.storedID.flatMap { stored in
                    try store.log.read { reader -> UInt64? in
                        let window = try reader.history(of: stored).filter { $0 > deleter && $0 < sequence && !reverted.contains($0) }
                        return try firstChange(of: stored, among: window, store: store, reader) { _ in false }
                    }
                }
                throw ContextError.undoConflict(
                    object: id.description, property: "(object)",
                    expected: "the object deleted, as transaction \(deleter) left it (transaction \(sequence) changed it next)",
                    found: "it brought back by \(between.map { "transaction \($0)" } ?? "a transaction"), between them and not reverted with them")
            }
            if change.kind == .deleted, let inserter = insertedBy[id], Self.othersBetween(inserter, sequence, members: members),
                let stored = id.storedID, let info = entities[id.entityName]
            {
                let between = try store.log.read { reader -> UInt64? in
                    let window = try reader.history(of: stored).filter { $0 > inserter && $0 < sequence && !reverted.contains($0) }
                    // A name this model doesn't have (another version's) counts as a change.
                    return try firstChange(of: stored, among: window, store: store, reader) { info.properties[$0.property]?.isDerived != true }
                }
                if let between {
                    throw ContextError.undoConflict(
                        object: id.description, property: "(object)",
                        expected: "the object as transaction \(inserter) inserted it (transaction \(sequence) deleted it)",
                        found: "it as transaction \(between) changed it, between them and not reverted with them")
                }
            }
            // A to-many member one of them added and a later one removed (or the other way
            // round) cancels out, net — unless transactions between them moved it too, which
            // the later one's move undid: taken together, the member would stay where the
            // later one put it, over their work (moved in and out again between them, or the
            // other way round: values of memberships, as a value changed and set back).
            if change.kind == .updated, let earlierMoves = moved[id] {
                for (key, membership) in change.memberships.sorted(by: { $0.key < $1.key }) {
                    guard let earlier = earlierMoves[key] else { continue }
                    let moves = membership.added.map { ($0, true) } + membership.removed.map { ($0, false) }
                    for (member, added) in moves {
                        guard let (wasAdded, by) = earlier[member], by != sequence, wasAdded != added,
                            Self.othersBetween(by, sequence, members: members), let stored = id.storedID, let target = member.storedID
                        else { continue }
                        let between = try store.log.read { reader -> UInt64? in
                            let window = try reader.history(of: stored).filter { $0 > by && $0 < sequence && !reverted.contains($0) }
                            return try firstChange(of: stored, among: window, store: store, reader, translated: true) { change in
                                guard case .membership(key, let added, let removed) = change else { return change.property == key }
                                return added.contains(target) || removed.contains(target)
                            }
                        }
                        guard let between else { continue }
                        throw ContextError.undoConflict(
                            object: id.description, property: key,
                            expected: "\(member.description) \(wasAdded ? "in it" : "not in it"), as transaction \(by) left it, until transaction \(sequence)",
                            found: "it \(added ? "added" : "removed") again after transaction \(between) moved it, between them and not reverted with them")
                    }
                }
            }
            guard let earlier = given[id] else { continue }
            let replaced: [String: PropertyValue] = switch change.kind {
            case .updated: change.old
            case .deleted: change.values
            case .inserted: [:]
            }
            for (key, value) in replaced.sorted(by: { $0.key < $1.key }) {
                guard let (left, by) = earlier[key], by != sequence else { continue }
                // The value the earlier one left: unless a transaction between them changed it
                // and another set it back (setting the earlier one's before-value back would
                // take those with it: they left it as it is now, not as it was).
                let same = !PropertyValue.differ(left, value) || (left.isNil && value.isNil)
                if same && !Self.othersBetween(by, sequence, members: members) { continue }
                // The transaction between them that changed it, from the object's history.
                let between = try id.storedID.flatMap { stored in
                    try store.log.read { reader -> UInt64? in
                        let window = try reader.history(of: stored).filter { $0 > by && $0 < sequence && !reverted.contains($0) }
                        return try firstChange(of: stored, among: window, store: store, reader, translated: true) { $0.property == key }
                    }
                }
                if same {
                    guard let between else { continue }
                    throw ContextError.undoConflict(
                        object: id.description, property: key, expected: "\(left.text), as transaction \(by) left it, unchanged until transaction \(sequence)",
                        found: "it set back to \(value.text) after transaction \(between) changed it, between them and not reverted with them")
                }
                throw ContextError.undoConflict(
                    object: id.description, property: key, expected: "\(left.text), as transaction \(by) left it",
                    found: "\(value.text) from \(between.map { "transaction \($0)" } ?? "a transaction"), between them and not reverted with them (transaction \(sequence) changed it next)")
            }
        }
    }

    /// Whether a transaction not among `members` (ascending) lies strictly between `from` and `to`.
    private static func othersBetween(_ from: UInt64, _ to: UInt64, members: [UInt64]) -> Bool {
        guard to > from + 1 else { return false }
        func firstIndex(above value: UInt64) -> Int {
            var (low, high) = (0, members.count)
            while low < high {
                let middle = (low + high) / 2
                if members[middle] > value { high = middle } else { low = middle + 1 }
            }
            return low
        }
        let inside = firstIndex(above: to - 1) - firstIndex(above: from)
        return UInt64(inside) < to - from - 1
    }

    /// Refuses a revert that would set back this context's own unsaved work: an object the
    /// transaction changed that this context has inserted, deleted (a revert of it already
    /// applied) or changed a value or membership of that the revert sets; an object it
    /// inserted that this context changed at all (deleting it would take the change with
    /// it). Applied on top, the revert would overwrite that work at the save without a word
    /// (a context's undo never meets its unsaved work under a saved group: that work is
    /// undone first); the same transaction reverted twice before a save is refused so too.
    private func checkUnsavedWork(_ combined: UndoGroup) throws {
        for id in combined.order {
            guard let change = combined.changes[id], let info = entities[id.entityName] else { continue }
            let object = registered(id)
            if let object, object.isInsertedFlag || object.isDeletedFlag {
                throw ContextError.undoConflict(
                    object: id.description, property: "(object)", expected: "the object as the store holds it",
                    found: object.isDeletedFlag ? "an unsaved delete of it in this context" : "an unsaved insert of it in this context")
            }
            let keys: [String] = switch change.kind {
            case .updated: Array(change.old.keys)
            // A derived relationship side (a team's players) changes as the other objects'
            // recorded sides do: those are judged as links to it (below, and in
            // checkInsertsUnchanged) — one this context took back is no conflict, one it made
            // is (before session 33, taking another writer's player off the team refused the
            // revert as "an unsaved change to [] in this context").
            case .inserted: object.map { object in object.changes.keys.filter { info.property(named: $0).map { !$0.isRelationship || $0.isRecorded } ?? true } } ?? []
            case .deleted: []
            }
            for key in keys.sorted() {
                guard let property = info.property(named: key), !property.isDerived else { continue }
                if let object, let value = object.changes[key] {
                    let committed = object.committedValue(property)
                    if !(committed.map { $0 == value || ($0.isNil && value.isNil) } ?? false) {
                        throw ContextError.undoConflict(
                            object: id.description, property: key, expected: committed?.text ?? "the stored value",
                            found: "an unsaved change to \(value.text) in this context")
                    }
                }
                if change.kind == .updated, property.isRelationship {
                    // A relationship set back moves objects on their own sides too: the
                    // targets it leaves and returns to, an ordered to-many's members —
                    // whether or not this context holds the object itself.
                    let before = change.old[key]?.ids ?? [], after = change.new[key]?.ids ?? []
                    try checkUnsavedMembers(of: id, object, property, moved: Array(Set(before).symmetricDifference(after)))
                }
            }
            if change.kind == .updated {
                for (key, membership) in change.memberships.sorted(by: { $0.key < $1.key }) {
                    guard let property = info.property(named: key) else { continue }
                    try checkUnsavedMembers(of: id, object, property, moved: membership.added + membership.removed)
                }
            }
            if change.kind == .deleted {
                // An object brought back takes its relationships back: each target gains it
                // on its own side, which this context may have deleted or changed unsaved
                // (before, the revert went ahead and the save failed on a deleted target,
                // or a one-to-one target given to another object here was taken from it).
                for (key, value) in change.values.sorted(by: { $0.key < $1.key }) {
                    guard let property = info.property(named: key), property.isRelationship else { continue }
                    try checkUnsavedMembers(of: id, object, property, moved: value.ids)
                }
            }
        }
        // An object the transaction inserted is deleted by the revert: an unsaved change here
        // that points at it — through a relationship without an inverse, which leaves the
        // object itself unchanged — would be saved pointing at nothing (before, the revert
        // was applied and the save failed). A reference the store holds already is the
        // transaction's, taken back with the object.
        let deleted = Set(combined.order.filter { combined.changes[$0]?.kind == .inserted })
        guard !deleted.isEmpty else { return }
        for (id, object) in retained.sorted(by: { $0.key.description < $1.key.description }) where !object.isDeletedFlag && !deleted.contains(id) {
            for (key, value) in object.changes.sorted(by: { $0.key < $1.key }) {
                guard let property = object.info.properties[key], property.isRelationship else { continue }
                let committed = Set(object.isInsertedFlag ? [] : object.committedValue(property)?.ids ?? [])
                guard let target = value.ids.first(where: { deleted.contains($0) && !committed.contains($0) }) else { continue }
                throw ContextError.undoConflict(
                    object: id.description, property: key, expected: "no reference to \(target.description), which the revert deletes",
                    found: "an unsaved change to \(value.text) in this context")
            }
        }
    }

    /// Refuses a revert that moves members of `owner`'s to-many `key` (`moved`, in or out)
    /// that this context's unsaved work moved too: on the to-many itself, or on a member's
    /// own side (its inverse: a to-one set elsewhere, a to-many gaining or losing `owner`),
    /// or a member deleted here. An unsaved change to other members is kept: the revert
    /// applies its memberships to the to-many as it is now (before, any unsaved change to
    /// the to-many refused the revert, and one made on a member's own side was overwritten
    /// at the save without a word).
    private func checkUnsavedMembers(
        of ownerID: ManagedObjectID, _ owner: ManagedObject?, _ property: PropertyInfo, moved: [ManagedObjectID]
    ) throws {
        let ordered = moved.sorted { $0.description < $1.description }
        func unsavedDelta(_ object: ManagedObject, _ property: PropertyInfo) -> Set<ManagedObjectID>? {
            guard let value = object.changes[property.name] else { return [] }
            // Unknown committed members: every member counts as changed.
            guard let committed = object.committedValue(property) else { return nil }
            return Set(committed.ids).symmetricDifference(value.ids)
        }
        if let owner, let value = owner.changes[property.name] {
            let delta = unsavedDelta(owner, property)
            if let member = ordered.first(where: { delta?.contains($0) ?? true }) {
                throw ContextError.undoConflict(
                    object: ownerID.description, property: property.name, expected: owner.committedValue(property)?.text ?? "the stored value",
                    found: "an unsaved change to \(value.text) in this context, moving \(member.description) too")
            }
        }
        for member in ordered {
            guard let object = registered(member) else { continue }
            // Deleted here: the revert would point at it (with an inverse or without one).
            if object.isDeletedFlag {
                throw ContextError.undoConflict(
                    object: member.description, property: "(object)", expected: "the object as the store holds it",
                    found: "an unsaved delete of it in this context")
            }
            guard let inverse = property.inverse, let inverseProperty = object.info.property(named: inverse), let value = object.changes[inverse]
            else { continue }
            if case .toMany = inverseProperty.kind, let delta = unsavedDelta(object, inverseProperty), !delta.contains(ownerID) { continue }
            throw ContextError.undoConflict(
                object: member.description, property: inverse, expected: object.committedValue(inverseProperty)?.text ?? "the stored value",
                found: "an unsaved change to \(value.text) in this context")
        }
    }

    /// Refuses a revert that would point an object at one that no longer exists: a deleted
    /// object brought back with a relationship to an object a later transaction deleted, a
    /// relationship set back (or a to-many member put back) to such an object. The log
    /// records a relationship on its recorded side only, so the conflict check (which sees
    /// only what the transaction recorded) doesn't find it, and the store would refuse the
    /// save with the revert applied to the context.
    private func checkReferencesExist(_ combined: UndoGroup, store: PersistentStore) throws {
        var references: [(owner: ManagedObjectID, property: String, target: ManagedObjectID)] = []
        for id in combined.order {
            guard let change = combined.changes[id], let info = entities[id.entityName] else { continue }
            func note(_ values: [String: PropertyValue]) {
                for (key, value) in values.sorted(by: { $0.key < $1.key }) {
                    guard info.properties[key]?.isRelationship == true else { continue }
                    for target in value.ids where combined.changes[target]?.kind != .deleted { references.append((id, key, target)) }
                }
            }
            switch change.kind {
            case .deleted: note(change.values)
            case .updated:
                note(change.old)
                for (key, membership) in change.memberships.sorted(by: { $0.key < $1.key }) {
                    for target in membership.removed where combined.changes[target]?.kind != .deleted { references.append((id, key, target)) }
                }
            case .inserted: break
            }
        }
        guard !references.isEmpty else { return }
        var existing: Set<StoredObjectID> = []
        try store.log.read { reader in
            try reader.forEachFields(Array(Set(references.compactMap(\.target.storedID)))) { fields in existing.insert(fields.id) }
        }
        for (owner, property, target) in references {
            guard let stored = target.storedID, !existing.contains(stored) else { continue }
            throw ContextError.undoConflict(
                object: owner.description, property: property, expected: target.description, found: "a deleted object (\(target) was deleted later)")
        }
    }

    /// Refuses a revert that would give an object values of a uniqueness constraint another
    /// stored object holds now (a deleted object brought back, or a value set back, that a
    /// later transaction gave another object): the save would find the clash, and a merge
    /// policy other than `.error` would resolve it by merging the objects — overwriting the
    /// later object's values with the reverted one's.
    private func checkUniqueValuesFree(_ combined: UndoGroup, store: PersistentStore) throws {
        let storeUUID = store.identifier
        // The objects whose constraint values the revert sets: brought back, or set back.
        let candidates = combined.order.filter { id in
            switch combined.changes[id]?.kind {
            case .deleted: true
            case .updated: !(combined.changes[id]?.old.isEmpty ?? true)
            default: false
            }
        }
        guard !candidates.isEmpty else { return }
        try store.log.read { reader in
            for entity in model.entities.sorted(by: { $0.name < $1.name }) {
                let family = Set(model.selfAndSubentityNames(of: entity.name))
                for constraint in entity.uniquenessConstraints where !constraint.isEmpty {
                    /// `id`'s values for the constraint after the revert (nil: one is empty,
                    /// or the revert doesn't set any of them); `stored`: its values now.
                    func afterRevert(_ id: ManagedObjectID, stored: StoredObject?) -> [PropertyValue]? {
                        guard let change = combined.changes[id], let info = entities[id.entityName] else { return nil }
                        let set = change.kind == .deleted ? change.values : change.old
                        if change.kind == .updated && !constraint.contains(where: { set[$0] != nil }) { return nil }
                        var values: [PropertyValue] = []
                        for name in constraint {
                            guard let property = info.properties[name] else { return nil }
                            let value = set[name] ?? (change.kind == .deleted ? .none : stored.map { propertyValue($0[name], property, storeUUID: storeUUID) } ?? .none)
                            if value.leavesUniquenessUnchecked { return nil }
                            values.append(value)
                        }
                        return values
                    }
                    var wanted: [[PropertyValue]: ManagedObjectID] = [:]
                    for id in candidates where family.contains(id.entityName) {
                        let stored = try id.storedID.flatMap { try reader.object($0) }
                        if let values = afterRevert(id, stored: stored), wanted[values] == nil { wanted[values] = id }
                    }
                    // The objects holding each wanted set of values now, found in the
                    // constraint's index (not by reading every object of the entity).
                    for (values, object) in wanted.sorted(by: { $0.value < $1.value }) {
                        var held: [String: LogValue] = [:]
                        for (name, value) in zip(constraint, values) { held[name] = Self.logValue(value) }
                        for holder in try reader.objects(holding: held, unique: constraint, of: entity.name) {
                            let id = ManagedObjectID.permanent(holder, store: storeUUID)
                            guard id != object, let info = entities[holder.entity] else { continue }
                            // Its values after the revert: deleted by it, set back by it, or as stored.
                            switch combined.changes[id]?.kind {
                            case .inserted?: continue
                            case .updated?:
                                let stored = try reader.object(holder)
                                let after = afterRevert(id, stored: stored) ?? constraint.map { name in
                                    info.properties[name].map { propertyValue(stored?[name] ?? .null, $0, storeUUID: storeUUID) } ?? .none
                                }
                                if after != values { continue }
                            default: break
                            }
                            throw ContextError.undoConflict(
                                object: object.description, property: constraint.joined(separator: ", "),
                                expected: "no other object with \(values.map(\.text).joined(separator: ", ")) (uniqueness constraint)",
                                found: "\(id) with them, written later")
                        }
                    }
                }
            }
        }
    }

    /// Refuses to delete an object the transaction inserted if a later transaction changed it
    /// (its version is newer) or linked another object to it: the revert would silently
    /// take that later work with it (undo of a context's own saved insert checks only that
    /// the object still exists).
    private func checkInsertsUnchanged(_ combined: UndoGroup, sequences: Set<UInt64>, store: PersistentStore) throws {
        let inserted = combined.order.filter { combined.changes[$0]?.kind == .inserted }
        guard !inserted.isEmpty, let sequence = sequences.min() else { return }
        let transactions = sequences.count == 1 ? "transaction \(sequence)" : "transactions \(Self.list(sequences.sorted()))"
        let storeUUID = store.identifier
        /// Whether the transaction itself links `other` to `id` through `other`'s `property`.
        func linkedByTransaction(_ other: ManagedObjectID, _ property: String, to id: ManagedObjectID) -> Bool {
            guard let change = combined.changes[other] else { return false }
            func holds(_ value: PropertyValue?) -> Bool {
                switch value {
                case .toOne(let target?): target == id
                case .toMany(let targets): targets.contains(id)
                default: false
                }
            }
            switch change.kind {
            case .inserted: return holds(change.values[property])
            case .updated: return holds(change.new[property]) || change.memberships[property]?.added.contains(id) == true
            case .deleted: return false
            }
        }
        /// The first transaction after `sequence`, not one of those reverted, that changed a
        /// stored value of `stored` (nil: later transactions only recomputed its derived
        /// attributes, which the store does when an object they read changes — no one's
        /// work on it).
        func laterChange(of stored: StoredObjectID, info: EntityInfo, after sequence: UInt64, _ reader: borrowing LogReader) throws -> UInt64? {
            let later = try reader.history(of: stored).filter { $0 > sequence && !sequences.contains($0) }
            // A name this model doesn't have (another version's) counts as a change.
            return try firstChange(of: stored, among: later, store: store, reader) { info.properties[$0.property]?.isDerived != true }
        }
        // A link to an object they inserted that the revert puts back — a value it sets back,
        // a deleted object it brings back, a to-many member it returns — was made by a
        // transaction not among them (their own links to it are net of theirs: a link one
        // of them made and a later one took back is no change). Deleting the object and
        // putting the link back would point at nothing: the store refused the save.
        let deletes = Set(inserted)
        var putBack: (owner: ManagedObjectID, property: String, target: ManagedObjectID)?
        for id in combined.order where putBack == nil {
            guard let change = combined.changes[id], let info = entities[id.entityName] else { continue }
            let values: [String: PropertyValue] = switch change.kind {
            case .updated: change.old
            case .deleted: change.values
            case .inserted: [:]
            }
            for (key, value) in values.sorted(by: { $0.key < $1.key }) where info.properties[key]?.isRelationship == true {
                if let target = value.ids.first(where: deletes.contains) {
                    putBack = (id, key, target)
                    break
                }
            }
            for (key, membership) in change.memberships.sorted(by: { $0.key < $1.key }) where putBack == nil {
                if let target = membership.removed.first(where: deletes.contains) { putBack = (id, key, target) }
            }
        }
        if let (owner, property, target) = putBack {
            // The transaction that made it: the first not among them that set that property.
            let linker = try owner.storedID.flatMap { stored in
                try store.log.read { reader -> UInt64? in
                    let later = try reader.history(of: stored).filter { $0 > sequence && !sequences.contains($0) }
                    return try firstChange(of: stored, among: later, store: store, reader, translated: true) { $0.property == property }
                }
            }
            throw ContextError.undoConflict(
                object: owner.description, property: property, expected: "no link to \(target.description), which the revert deletes",
                found: "a link to it made by \(linker.map { "transaction \($0)" } ?? "a transaction") not reverted with them")
        }
        try store.log.read { reader in
            // The links this context's unsaved work makes, by the object they name: built when
            // the first inserted object has links to judge.
            var pendingIndex: PendingReferrers?
            var versions: [StoredObjectID: UInt64] = [:]
            try reader.forEachFields(inserted.compactMap(\.storedID)) { fields in versions[fields.id] = fields.version }
            for id in inserted {
                guard let stored = id.storedID, let info = entities[id.entityName] else { continue }
                if let version = versions[stored], version > sequence, let later = try laterChange(of: stored, info: info, after: sequence, reader) {
                    let inserted = sequences.count == 1 ? "inserted it" : "left it"
                    throw ContextError.undoConflict(
                        object: id.description, property: "(object)", expected: "the object as \(transactions) \(inserted)",
                        found: "it as transaction \(later) changed it")
                }
                // The links are the store's as this context's unsaved work leaves them, as for
                // an undo of a saved insert (§12): a later link it has taken back — the other
                // object deleted here, or either side changed not to name the other — goes
                // with the revert (before session 33 the revert was refused as "a link … made
                // later" all the same); one it made is refused (most are named first, as an
                // unsaved reference, by checkUnsavedWork).
                for property in info.propertyList where property.isRelationship && !property.isTransient {
                    guard let inverse = property.inverse else { continue }
                    let linked = try reader.related(stored, property.name).map { ManagedObjectID.permanent($0, store: storeUUID) }
                    for otherID in pendingLinks(of: id, property, stored: linked, referrers: &pendingIndex) {
                        if combined.changes[otherID]?.kind == .inserted || linkedByTransaction(otherID, inverse, to: id)
                            || linkedByTransaction(id, property.name, to: otherID)
                        {
                            continue
                        }
                        throw ContextError.undoConflict(
                            object: id.description, property: property.name, expected: "only the links \(transactions) made",
                            found: "a link to \(otherID) made later")
                    }
                }
                // A relationship without an inverse leaves no trace on the object: its
                // referrers are read from the store's index (before, a later link through
                // one was missed, and the save failed on the deleted object).
                for (owner, relationship) in oneWayRelationships(to: id.entityName) {
                    let linked = try reader.referrers(to: stored, through: relationship, of: owner).map { ManagedObjectID.permanent($0, store: storeUUID) }
                    for otherID in pendingReferrers(to: id, through: relationship, of: owner, stored: linked, referrers: &pendingIndex) {
                        if combined.changes[otherID]?.kind == .inserted || linkedByTransaction(otherID, relationship, to: id) { continue }
                        throw ContextError.undoConflict(
                            object: otherID.description, property: relationship, expected: "no link to \(id.description), which the revert deletes",
                            found: "a link to it made later")
                    }
                }
            }
        }
    }

    /// A context value as the log stores it (for an index lookup: stored objects only).
    private static func logValue(_ value: PropertyValue) -> LogValue {
        switch value {
        case .attribute(let attribute?): .attribute(attribute)
        case .toOne(let id?): id.storedID.map(LogValue.reference) ?? .null
        case .toMany(let ids): .references(ids.compactMap(\.storedID))
        case .attribute(nil), .toOne(nil), .invalid: .null
        }
    }

    /// The transaction that last undid `sequence` (its groups' origin `undo(of: sequence, …)`;
    /// for a transaction that is itself the undo or redo of a group, the redo or undo of that
    /// group) when no later one redid it or undid that undo, found among the later
    /// transactions of an object it changed; nil when it stands (never reverted, or redone since).
    private func lastRevert(of sequence: UInt64, among combined: UndoGroup, store: PersistentStore) throws -> UInt64? {
        guard let object = combined.order.lazy.compactMap(\.storedID).first else { return nil }
        return try store.log.read { reader -> UInt64? in
            // What takes the transaction back, and what makes it stand again: for a group of
            // it that is itself the undo (redo) of a group, a redo (undo) of that very group —
            // its revert is written so (§25.5); a redo of another group of the same
            // transaction is no revert of it — and an undo (redo) of the transaction itself
            // (how a revert of any transaction was written before session 23).
            var undoneBy: Set<SavedGroup> = []  // undone: redone again by a redo of these
            var redoneBy: Set<SavedGroup> = []  // redone: undone again by an undo of these
            let event = try reader.event(sequence)
            let kindOrigin = Self.kindOrigin(of: event)
            for group in event.groups {
                switch group.origin ?? kindOrigin {
                case .undo(let of, let index)?: undoneBy.insert(SavedGroup(sequence: of, group: index))
                case .redo(let of, let index)?: redoneBy.insert(SavedGroup(sequence: of, group: index))
                case nil: break
                }
            }
            func taken(_ origin: GroupOrigin) -> Bool {
                switch origin {
                case .redo(let of, let index): undoneBy.contains(SavedGroup(sequence: of, group: index))
                case .undo(let of, let index): of == sequence || redoneBy.contains(SavedGroup(sequence: of, group: index))
                }
            }
            func standing(_ origin: GroupOrigin) -> Bool {
                switch origin {
                case .undo(let of, let index): undoneBy.contains(SavedGroup(sequence: of, group: index))
                case .redo(let of, let index): of == sequence || redoneBy.contains(SavedGroup(sequence: of, group: index))
                }
            }
            let later = try reader.history(of: object).filter { $0 > sequence }
            var reverter: UInt64?
            try reader.forEachEvent(among: later) { event in
                for group in event.groups {
                    guard let origin = group.origin else { continue }
                    if taken(origin) {
                        reverter = event.sequence
                    } else if standing(origin) {
                        // Redone, or taken back again: the transaction stands again.
                        reverter = nil
                    } else if case .undo(let of, _) = origin, of == reverter {
                        // Its revert itself reverted.
                        reverter = nil
                    }
                }
                return .next
            }
            return reverter
        }
    }
}

