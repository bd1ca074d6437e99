import Foundation
import StrataLog

/// Reads a context's persisted undo and redo stacks back from the log, newest first
/// (spec 0006 §13), so that creating a context with persisted undo costs what its most
/// recent groups cost, not what the whole log does.
///
/// The log holds, for each of the context's transactions (matched by author and context
/// name), a list of operations on its groups: a non-empty group without an origin is
/// *pushed*, unless it is marked not recorded for undo (``ChangeGroup/isRecordedForUndo``:
/// changes the context's journal never held, which are no operation); a group whose origin is `undo(of: s, group: g)` moves group (s, g) to the redo
/// stack; `redo(of:…)` moves it back. Read forward, that is a stack machine. Read backward,
/// each group's place is decided by its **last** operation:
/// - last pushed or redone: it is on the undo stack, above every group whose last operation
///   is older;
/// - last undone: it is on the redo stack if no group was pushed after that undo (a push
///   clears the redo stack), else it is gone.
///
/// So the redo stack is complete once a push has been read, and the undo stack comes out
/// top first: the reader stops as soon as it has what was asked for, and reads further back
/// (``nextUndoGroups(_:)``) only when undo reaches the bottom of what was read. A group's
/// values are read from the transaction that first saved it (which need not have been read
/// yet: a recent undo can name an old group); a group that transaction doesn't hold as one of
/// its pushed groups, or that was purged, is left out, as reading forward leaves out an
/// operation on a group that isn't on the stack it names. A group of another writer's
/// transaction (a batch request's too) is read when the context's undo or redo names it:
/// the context reverted that transaction (spec 0006 §25).
final class PersistedUndoReader {
    private struct Ref: Hashable {
        let sequence: UInt64
        let group: Int
    }

    /// The log read; reading stops if the context's store is no longer this one (or a store
    /// moved from it, whose log it reads on from).
    var log: EventLog
    private let author: String?
    private let name: String?
    private let makeGroup: (ChangeGroup, UInt64, Int) -> UndoGroup
    /// The newest sequence not read yet; 0 once the log's start (or its purge point) was reached.
    private var through: UInt64
    /// Groups whose last operation has been read.
    private var seen: Set<Ref> = []
    /// Whether a push has been read: every undone group read after that is gone.
    private var pushRead = false
    /// Undo-stack entries read and not handed out yet, top first, with the group when the
    /// operation read was its push, and the objects of a part (a group a refresh split,
    /// which only the checkpoint names: nil for a whole group).
    private var undoEntries: [(Ref, ChangeGroup?, Set<StoredObjectID>?)] = []
    private var redoEntries: [(Ref, Set<StoredObjectID>?)] = []
    /// The stacks as the context last recorded them when it dropped groups (spec 0004 §10):
    /// its transactions through `checkpoint.through` are not read; these stacks stand below
    /// the later ones' operations. Nil once taken (or when there is none).
    private var checkpoint: UndoCheckpoint?

    /// A reader of the context (`author`, `name`)'s groups in the log up to `head`, over
    /// its `checkpoint` if it has one; `makeGroup` turns a logged group (its sequence and
    /// index) into an undo group.
    init(
        log: EventLog, author: String?, name: String?, head: UInt64, checkpoint: UndoCheckpoint? = nil,
        makeGroup: @escaping (ChangeGroup, UInt64, Int) -> UndoGroup
    ) {
        self.log = log
        self.author = author
        self.name = name
        self.through = head
        self.checkpoint = checkpoint.flatMap { $0.through <= head ? $0 : nil }
        self.makeGroup = makeGroup
    }

    /// Whether every group has been handed out.
    var isExhausted: Bool { through == 0 && undoEntries.isEmpty }

    /// The redo stack (bottom first) and the top `count` groups of the undo stack (bottom
    /// first), reading back as far as both need.
    func initialStacks(undoGroups count: Int) throws -> (undo: [UndoGroup], redo: [UndoGroup]) {
        try log.read { reader in
            try readBack(reader, until: { $0.pushRead && $0.undoEntries.count >= count })
            let redo = try resolve(redoEntries.map { ($0.0, nil, $0.1) }, reader)
            redoEntries.removeAll()
            return (try takeUndo(count, reader), redo.reversed())
        }
    }

    /// The next `count` groups down the undo stack (bottom first), or fewer at the bottom.
    func nextUndoGroups(_ count: Int) throws -> [UndoGroup] {
        try log.read { reader in
            try readBack(reader, until: { $0.undoEntries.count >= count })
            return try takeUndo(count, reader)
        }
    }

    private func takeUndo(_ count: Int, _ reader: borrowing LogReader) throws -> [UndoGroup] {
        let taken = Array(undoEntries.prefix(count))
        undoEntries.removeFirst(taken.count)
        return try resolve(taken, reader).reversed()
    }

    /// Reads the context's older transactions, newest first, until `enough` or the log's
    /// start: through the log's per-context transaction index, which lists them without
    /// reading anyone else's (spec 0004 §6.4), and by scanning event headers in growing
    /// windows where the index doesn't reach (``LogReader/forEachTransaction(author:contextName:from:through:reversed:_:)``).
    private func readBack(_ reader: borrowing LogReader, until enough: (PersistedUndoReader) -> Bool) throws {
        let floor = max(try reader.purgedThrough, checkpoint?.through ?? 0)
        guard !enough(self) else { return }
        guard through > floor else {
            through = 0
            readCheckpoint()
            return
        }
        var stopped = false
        try reader.forEachTransaction(author: author, contextName: name, from: floor + 1, through: through, reversed: true) { event in
            read(event)
            through = event.sequence - 1
            guard enough(self) else { return .next }
            stopped = true
            return .stop
        }
        if !stopped || through <= floor {
            through = 0
            readCheckpoint()
        }
    }

    /// Below the operations read, the checkpoint's stacks: as if each of its groups' last
    /// operation were read there, top first — a group a later operation moved stays where
    /// that put it (whole, its parts too), and its redo stack is gone if a group was pushed
    /// since. A group a refresh split (spec 0006 §13) is named once per part, each part on
    /// its own stack.
    ///
    /// A part's objects are named as the model version that wrote the record names them: they
    /// are taken under the current model's names, as the group's changes are (spec 0006 §13,
    /// "Across model versions"; before, a part of an entity a later version renamed matched
    /// none of the group's changes, and was left out).
    private func readCheckpoint() {
        guard let checkpoint else { return }
        self.checkpoint = nil
        let moved = seen
        func objects(_ entry: UndoCheckpoint.GroupRef) -> Set<StoredObjectID>? {
            guard let objects = entry.objects else { return nil }
            guard let version = checkpoint.modelVersion else { return Set(objects) }
            return Set(objects.compactMap { log.translating($0, fromModelVersion: version) })
        }
        for entry in checkpoint.undo.reversed() {
            let ref = Ref(sequence: entry.sequence, group: entry.group)
            guard !moved.contains(ref), entry.objects != nil || seen.insert(ref).inserted else { continue }
            seen.insert(ref)
            undoEntries.append((ref, nil, objects(entry)))
        }
        for entry in checkpoint.redo.reversed() {
            let ref = Ref(sequence: entry.sequence, group: entry.group)
            guard !moved.contains(ref), entry.objects != nil || seen.insert(ref).inserted, !pushRead else { continue }
            seen.insert(ref)
            redoEntries.append((ref, objects(entry)))
        }
    }

    /// Reads one transaction's operations, last first.
    private func read(_ event: TransactionEvent) {
        // Reservations change no objects; imports (batch requests) are never undoable; nor are
        // migrations and purges, which no context saved.
        if !event.kind.isUndoable { return }
        // A transaction whose groups carry no origin (written before origins existed) and
        // whose kind is undo or redo is one operation on the group its kind names.
        let hasOrigins = event.groups.contains { $0.origin != nil }
        if !hasOrigins, case .undo(let sequence, let group) = event.kind {
            undone(Ref(sequence: sequence, group: group))
            return
        }
        if !hasOrigins, case .redo(let sequence, let group) = event.kind {
            onUndoStack(Ref(sequence: sequence, group: group), nil)
            return
        }
        for (index, group) in event.groups.enumerated().reversed() {
            switch group.origin {
            case .undo(let sequence, let target)?: undone(Ref(sequence: sequence, group: target))
            case .redo(let sequence, let target)?: onUndoStack(Ref(sequence: sequence, group: target), nil)
            case nil:
                // Changes the context didn't record for undo (registration disabled, primitive
                // sets) were never on its stack: not pushed, and the redo stack stays.
                guard !group.changes.isEmpty, group.isRecordedForUndo else { continue }
                // Under the current model's names: a later model version may have renamed
                // or removed its properties (spec 0006 §13, "Across model versions").
                onUndoStack(Ref(sequence: event.sequence, group: index), log.translating(group, fromModelVersion: event.modelVersion))
                pushRead = true
            }
        }
    }

    private func undone(_ ref: Ref) {
        guard seen.insert(ref).inserted, !pushRead else { return }
        redoEntries.append((ref, nil))
    }

    private func onUndoStack(_ ref: Ref, _ group: ChangeGroup?) {
        guard seen.insert(ref).inserted else { return }
        undoEntries.append((ref, group, nil))
    }

    /// The entries' undo groups, in the entries' order: a group not read with its push is
    /// read from the transaction that saved it — the context's, or another writer's that the
    /// context reverted — and left out unless that transaction holds it as a pushed group. A
    /// part holds the group's changes of its objects only (left out when none is left), and
    /// is marked split, so that the stacks recorded again name it as a part.
    private func resolve(_ entries: [(Ref, ChangeGroup?, Set<StoredObjectID>?)], _ reader: borrowing LogReader) throws -> [UndoGroup] {
        let floor = try reader.purgedThrough
        let missing = Set(entries.compactMap { $0.1 == nil && $0.0.sequence > floor ? $0.0.sequence : nil }).sorted()
        var saved: [UInt64: TransactionEvent] = [:]
        if !missing.isEmpty {
            try reader.forEachEvent(among: missing) { event in
                saved[event.sequence] = event
                return .next
            }
        }
        return entries.compactMap { ref, group, objects in
            if let group { return makeGroup(group, ref.sequence, ref.group) }
            guard let event = saved[ref.sequence], event.groups.indices.contains(ref.group) else { return nil }
            // The context's own group; or another writer's, batch requests included, that the
            // context's undo or redo names: it reverted that transaction (spec 0006 §25), and
            // the revert is redone (undone again) group by group, as a revert of its own save
            // is (before, such a group was left out: after a restart a revert of a batch
            // import or of another author's save had no redo).
            // (A batch request's own groups are never pushed: only a revert names them.)
            if !event.kind.isRevertible { return nil }
            var group = log.translating(event.groups[ref.group], fromModelVersion: event.modelVersion)
            let hasOrigins = event.groups.contains { $0.origin != nil }
            if !hasOrigins, event.kind.isUndoOrRedo { return nil }
            // A part that holds every change of the group is the whole group (a record made
            // before such parts were recorded whole): read back as a part, every save after a
            // restart rewrote the record while it was on the stacks.
            let whole = Set(group.changes.map(\.objectID))
            if let objects { group.changes.removeAll { !objects.contains($0.objectID) } }
            guard group.origin == nil, !group.changes.isEmpty else { return nil }
            let result = makeGroup(group, ref.sequence, ref.group)
            if objects != nil, Set(group.changes.map(\.objectID)).count < whole.count {
                result.isSplit = true
                result.splitFrom = whole
            }
            return result
        }
    }
}

extension TransactionKind {
    /// Whether a context's undo stack can hold this transaction's groups: not a reservation
    /// (no groups) nor an import (a batch request, which Core Data never registers for undo),
    /// nor a model-version migration or a purge marker, which no context saved — their
    /// author and context name are absent, which a context without a name or author matches
    /// (before, such a context found a migration's fills, conversions and take-outs on its
    /// undo stack, and undo put the store's values back in an earlier model's terms).
    fileprivate var isUndoable: Bool {
        switch self {
        case .reservation, .import, .migration, .purge: false
        default: true
        }
    }

    /// Whether a context can revert this transaction (spec 0006 §25): any that changed
    /// objects but a model-version migration.
    fileprivate var isRevertible: Bool {
        switch self {
        case .reservation, .migration, .purge: false
        default: true
        }
    }

    /// Whether this is an `undo(of:)` or `redo(of:)` transaction.
    fileprivate var isUndoOrRedo: Bool {
        switch self {
        case .undo, .redo: true
        default: false
        }
    }
}
