public import Foundation

/// What kind of transaction an event records.
public enum TransactionKind: Sendable, Hashable, CustomStringConvertible {
    /// A context's save.
    case save
    /// The undo of group `group` of transaction `of`, saved.
    case undo(of: UInt64, group: Int)
    /// The redo of group `group` of transaction `of`, saved.
    case redo(of: UInt64, group: Int)
    /// A migration between model versions.
    case migration
    /// A bulk import.
    case `import`
    /// Primary keys `range` of `entity` given out ahead of their objects' insert (Core Data's
    /// `obtainPermanentIDs(for:)`); the event has no changes. Replay advances the counter.
    case reservation(entity: String, range: ClosedRange<UInt64>)
    /// History through sequence `through` was removed for good (``EventLog/purge(through:author:contextName:)``);
    /// the event records who did it (its author and context name) and when (its timestamp).
    /// It has no changes; the state as of `through` is kept as the store's base snapshot.
    case purge(through: UInt64)

    /// `save`, `undo of 12 (group 0)`, …
    public var description: String {
        switch self {
        case .save: "save"
        case .undo(let seq, let group): "undo of \(seq) (group \(group))"
        case .redo(let seq, let group): "redo of \(seq) (group \(group))"
        case .migration: "migration"
        case .import: "import"
        case .reservation(let entity, let range): "reservation of \(entity) p\(range.lowerBound)…p\(range.upperBound)"
        case .purge(let through): "purge through \(through)"
        }
    }
}

/// One property's change inside an update.
public enum PropertyChange: Sendable, Hashable {
    /// The property went from `before` to `after`.
    case value(property: String, before: LogValue, after: LogValue)
    /// An unordered to-many relationship gained `added` and lost `removed`.
    case membership(property: String, added: [StoredObjectID], removed: [StoredObjectID])

    /// The property's name.
    public var property: String {
        switch self {
        case .value(let property, _, _), .membership(let property, _, _): property
        }
    }
}

/// One object's change, with its before-image (DESIGN.md invariant 4).
public enum Change: Sendable, Hashable {
    /// A new object with its initial stored values.
    case insert(StoredObjectID, values: [String: LogValue])
    /// Changed properties, each with its value before and after.
    case update(StoredObjectID, changes: [PropertyChange])
    /// A removed object and every stored value it had (its before-image).
    case delete(StoredObjectID, before: [String: LogValue])

    /// The object changed.
    public var objectID: StoredObjectID {
        switch self {
        case .insert(let id, _), .update(let id, _), .delete(let id, _): id
        }
    }
}

/// Where an event group came from when it isn't new work: the undo or redo of a saved group.
public enum GroupOrigin: Sendable, Hashable, CustomStringConvertible {
    /// The undo of group `group` of transaction `of`.
    case undo(of: UInt64, group: Int)
    /// The redo of group `group` of transaction `of`.
    case redo(of: UInt64, group: Int)

    /// `undo of 12 (group 0)`, …
    public var description: String {
        switch self {
        case .undo(let seq, let group): "undo of \(seq) (group \(group))"
        case .redo(let seq, let group): "redo of \(seq) (group \(group))"
        }
    }
}

/// One coalesced undo group: what one user action did.
public struct ChangeGroup: Sendable, Hashable {
    /// The undo action's name ("Add Player"), if the app gave one.
    public var actionName: String?
    /// The group's changes, in the order they were applied.
    public var changes: [Change]
    /// Set when the group undoes or redoes a saved group (so several undos saved together
    /// stay distinguishable); nil for new work.
    public var origin: GroupOrigin?
    /// False for changes the saving context's undo journal didn't record — made with undo
    /// registration disabled, with `setPrimitiveValue`, or otherwise outside every undo
    /// group (a context's reconciliation group, spec 0006 §10): persisted undo never pushes
    /// such a group on the undo stack (spec 0006 §13). True for every group of an event
    /// written before the flag existed (spec 0004 §3.2, group flag bit 2).
    public var isRecordedForUndo: Bool

    /// Creates a group.
    public init(actionName: String? = nil, changes: [Change], origin: GroupOrigin? = nil, recordedForUndo: Bool = true) {
        self.actionName = actionName
        self.changes = changes
        self.origin = origin
        self.isRecordedForUndo = recordedForUndo
    }
}

/// A committed transaction: the unit the log appends, one per save.
///
/// Corresponds loosely to Core Data's `NSPersistentHistoryTransaction`, but every change
/// carries its values before and after, so any transaction can be inverted on its own.
public struct TransactionEvent: Sendable, Hashable {
    /// The sequence number: dense, from 1, in commit order.
    public var sequence: UInt64
    /// When it was committed (microsecond precision).
    public var timestamp: Date
    /// Who committed it (the context's `transactionAuthor`).
    public var author: String?
    /// The committing context's name.
    public var contextName: String?
    /// The committing process's ID.
    public var processID: Int32
    /// Save, undo, redo, migration, import, reservation or purge.
    public var kind: TransactionKind
    /// The model version (the store's number for it) the event was written with.
    public var modelVersion: Int
    /// The coalesced undo groups.
    public var groups: [ChangeGroup]

    /// Creates an event.
    public init(
        sequence: UInt64, timestamp: Date, author: String? = nil, contextName: String? = nil, processID: Int32,
        kind: TransactionKind, modelVersion: Int, groups: [ChangeGroup]
    ) {
        self.sequence = sequence
        self.timestamp = timestamp
        self.author = author
        self.contextName = contextName
        self.processID = processID
        self.kind = kind
        self.modelVersion = modelVersion
        self.groups = groups
    }

    /// Every change of every group, in order.
    public var changes: [Change] { groups.flatMap(\.changes) }
}

/// The fixed fields at the start of a stored event, read without decoding its changes:
/// what ``LogReader/forEachEvent(from:through:where:_:)`` filters on.
public struct EventHeader: Sendable, Hashable {
    /// The sequence number.
    public let sequence: UInt64
    /// When it was committed.
    public let timestamp: Date
    /// Who committed it.
    public let author: String?
    /// The committing context's name.
    public let contextName: String?
    /// The committing process's ID.
    public let processID: Int32

    /// Creates a header.
    public init(sequence: UInt64, timestamp: Date, author: String?, contextName: String?, processID: Int32) {
        self.sequence = sequence
        self.timestamp = timestamp
        self.author = author
        self.contextName = contextName
        self.processID = processID
    }
}
