public import Foundation
public import StrataModel

/// An object named in a draft: one already in the store, or one the draft inserts.
public enum DraftObjectID: Sendable, Hashable, CustomStringConvertible {
    /// An object in the store.
    case stored(StoredObjectID)
    /// An object this draft inserts; its permanent ID is assigned at commit.
    case temporary(entity: String, id: UUID)

    /// `Entity/pN` or `Entity/t<UUID>`.
    public var description: String {
        switch self {
        case .stored(let id): id.description
        case .temporary(let entity, let id): "\(entity)/t\(id.uuidString)"
        }
    }

    /// The entity.
    public var entity: String {
        switch self {
        case .stored(let id): id.entity
        case .temporary(let entity, _): entity
        }
    }
}

/// A property value in a draft: like ``LogValue``, but references may name objects the
/// same draft inserts.
public enum DraftValue: Sendable, Hashable {
    /// No value.
    case null
    /// An attribute value.
    case attribute(AttributeValue)
    /// A to-one destination.
    case reference(DraftObjectID)
    /// A to-many relationship's full set of destinations (in order, if ordered).
    case references([DraftObjectID])
}

/// The changes a commit makes, in the order they are made, grouped into undo groups.
///
/// The log computes every before-image itself, from the state at commit time, so a draft
/// gives only new values. Temporary objects get permanent IDs at commit, in the order the
/// draft inserts them (``CommitResult/permanentIDs``).
///
/// ```swift
/// var draft = TransactionDraft(author: "alice", contextName: "editor")
/// let team = draft.insert("Team", values: ["name": .attribute(.string("Otters"))])
/// draft.update(.stored(existingPlayer), values: ["team": .reference(team)])
/// draft.delete(.stored(oldTeam))
/// ```
public struct TransactionDraft: Sendable {
    /// One operation.
    public enum Operation: Sendable, Hashable {
        /// Insert a new object with its values. With a ``DraftObjectID/stored(_:)`` ID, restore
        /// a deleted object under its own ID (undo of a delete): the object must not exist.
        case insert(DraftObjectID, values: [String: DraftValue])
        /// Set properties of an object.
        case update(DraftObjectID, values: [String: DraftValue])
        /// Add and remove members of an unordered to-many relationship.
        case membership(DraftObjectID, property: String, added: [DraftObjectID], removed: [DraftObjectID])
        /// Delete an object.
        case delete(DraftObjectID)
    }

    /// One undo group of operations.
    public struct Group: Sendable, Hashable {
        /// The undo action's name.
        public var actionName: String?
        /// The saved group this group undoes or redoes, if any.
        public var origin: GroupOrigin?
        /// False for changes the context's undo journal didn't record
        /// (``ChangeGroup/isRecordedForUndo``).
        public var isRecordedForUndo = true
        /// The operations, in order.
        public var operations: [Operation]
    }

    /// The transaction author (the context's `transactionAuthor`).
    public var author: String?
    /// The committing context's name.
    public var contextName: String?
    /// The committing process (default: this one).
    public var processID: Int32 = ProcessInfo.processInfo.processIdentifier
    /// The commit time (default: the moment of commit).
    public var timestamp: Date?
    /// What kind of transaction this is.
    public var kind: TransactionKind = .save
    /// Optimistic locking: the version (``StoredObject/version``) each listed object must
    /// still have when the commit runs. The check is made inside the commit's write
    /// transaction, so no other writer can slip in between; a mismatch (or a missing
    /// object) refuses the whole commit with ``LogError/versionMismatch(object:expected:found:)``.
    public var expectedVersions: [StoredObjectID: UInt64] = [:]
    /// The undo and redo stacks, bottom first, of the persisted-undo context committing the
    /// draft, as they stand once it is committed, to record as its undo checkpoint (spec 0004
    /// §10, `undoStacks:`) in the commit's write transaction, `through` the new sequence; a
    /// group of this very transaction is named with sequence 0. Nil: none is recorded.
    public var undoCheckpoint: (undo: [UndoCheckpoint.GroupRef], redo: [UndoCheckpoint.GroupRef])?
    /// The undo groups, in order; operations go into the last one.
    public private(set) var groups: [Group] = [Group(actionName: nil, origin: nil, operations: [])]

    /// Starts a draft.
    public init(author: String? = nil, contextName: String? = nil, kind: TransactionKind = .save) {
        self.author = author
        self.contextName = contextName
        self.kind = kind
    }

    /// Whether the draft has no operations.
    public var isEmpty: Bool { groups.allSatisfy { $0.operations.isEmpty } }

    /// Closes the current undo group and starts another. Groups without operations are dropped at
    /// commit; every other group becomes one event group, even if its changes turn out to be no-ops.
    /// `recordedForUndo` false marks changes the context's undo journal didn't record
    /// (``ChangeGroup/isRecordedForUndo``).
    public mutating func beginGroup(actionName: String? = nil, origin: GroupOrigin? = nil, recordedForUndo: Bool = true) {
        if groups[groups.count - 1].operations.isEmpty {
            groups[groups.count - 1].actionName = actionName
            groups[groups.count - 1].origin = origin
            groups[groups.count - 1].isRecordedForUndo = recordedForUndo
        } else {
            groups.append(Group(actionName: actionName, origin: origin, isRecordedForUndo: recordedForUndo, operations: []))
        }
    }

    /// Names the current undo group's action.
    public mutating func setActionName(_ name: String?) { groups[groups.count - 1].actionName = name }

    /// Inserts a new object of `entity` and returns its temporary ID.
    @discardableResult
    public mutating func insert(_ entity: String, id: UUID = UUID(), values: [String: DraftValue]) -> DraftObjectID {
        let object = DraftObjectID.temporary(entity: entity, id: id)
        append(.insert(object, values: values))
        return object
    }

    /// Restores a deleted object under its own ID, with `values` (undo of a delete).
    public mutating func restore(_ id: StoredObjectID, values: [String: DraftValue]) {
        append(.insert(.stored(id), values: values))
    }

    /// Sets `values` on `object`.
    public mutating func update(_ object: DraftObjectID, values: [String: DraftValue]) {
        append(.update(object, values: values))
    }

    /// Adds and removes members of the unordered to-many relationship `property`. An object
    /// in both lists makes the commit refuse the draft (``LogError/invalidOperation(_:)``).
    public mutating func changeMembers(
        of object: DraftObjectID, _ property: String, adding added: [DraftObjectID] = [],
        removing removed: [DraftObjectID] = []
    ) {
        append(.membership(object, property: property, added: added, removed: removed))
    }

    /// Deletes `object`.
    public mutating func delete(_ object: DraftObjectID) { append(.delete(object)) }

    /// Appends an operation to the current group.
    public mutating func append(_ operation: Operation) {
        groups[groups.count - 1].operations.append(operation)
    }

    /// Appends `operations` to the current undo group: into an empty group the array itself
    /// goes, no operation copied.
    public mutating func append(contentsOf operations: [Operation]) {
        if groups[groups.count - 1].operations.isEmpty {
            groups[groups.count - 1].operations = operations
        } else {
            groups[groups.count - 1].operations.append(contentsOf: operations)
        }
    }
}

/// What a commit did.
public struct CommitResult: Sendable {
    /// The committed event, with every before-image.
    public let event: TransactionEvent
    /// The permanent ID given to each temporary object.
    public let permanentIDs: [DraftObjectID: StoredObjectID]

    /// The new transaction's sequence number.
    public var sequence: UInt64 { event.sequence }

    /// The permanent ID of `object` (itself if already stored).
    public func permanentID(for object: DraftObjectID) -> StoredObjectID? {
        if case .stored(let id) = object { return id }
        return permanentIDs[object]
    }
}
