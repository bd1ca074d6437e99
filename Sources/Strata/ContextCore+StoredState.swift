import Foundation
import StrataLog
import StrataModel

// MARK: - The store's saved state, read through key paths

/// The store's saved state as a fetch with `includesPendingChanges = false` judges it (spec
/// 0008, Pending changes 3): a key path through a relationship of a stored row leads to the
/// related objects' **stored rows**, never to the context's objects, so `team.name ==
/// "Otters"` matches by the team's saved name even while the context holds it renamed, and
/// `members.@count` counts the saved members. Core Data's SQL store answers such a fetch the
/// same way: the whole predicate, joins included, is evaluated against the saved rows.
///
/// One per fetch. Each related row is read once (the team of 12,500 people once), in a read
/// of its own, as of the fetch's snapshot: the context's query generation when it is
/// pinned, otherwise the head the fetch's reader saw (a save committed meanwhile is read
/// around, through a ``GenerationView``). A read that fails is kept
/// and thrown by the fetch (``check()``), not taken as a missing object.
final class StoredState {
    let core: ContextCore
    let storeUUID: UUID
    /// The subjects of the rows read so far (nil: no such stored object).
    private var subjects: [StoredObjectID: StoredRowSubject?] = [:]
    /// The derived sides read so far, by object and relationship.
    private var derived: [StoredObjectID: [String: [ManagedObjectID]]] = [:]
    /// The first read that failed.
    private var failure: (any Error)?
    /// The fetch's own snapshot, for a context reading the current state: related rows are
    /// read as of the head the fetch's reader saw (``pin(to:)``), so a save committed while
    /// the fetch runs isn't half seen (its related rows newer than the fetched ones).
    private var snapshot: GenerationView?

    /// Whether the rows are read as the store is now, not as of the context's query
    /// generation (a batch request's selection, which reads the current state).
    let readsCurrentState: Bool

    init(core: ContextCore, storeUUID: UUID, readsCurrentState: Bool = false) {
        self.core = core
        self.storeUUID = storeUUID
        self.readsCurrentState = readsCurrentState
    }

    /// Reads related rows as of `reader`'s snapshot from now on: its head, when it reads the
    /// current state (a pinned reader is the context's generation, which ``read(_:)`` reads
    /// anyway). The first call decides.
    func pin(to reader: borrowing LogReader) {
        guard snapshot == nil, reader.generation == nil else { return }
        do {
            snapshot = GenerationView(sequence: try reader.head)
        } catch {
            if failure == nil { failure = error }
        }
    }

    /// Throws the first read that failed, if one did.
    func check() throws {
        if let failure { throw failure }
    }

    /// The stored row of `id` as a key-value coding subject reading the saved state; nil for
    /// an object the store doesn't hold (a temporary ID, another store's, an unknown entity).
    func subject(_ id: ManagedObjectID) -> StoredRowSubject? {
        guard case .permanent(let store, _) = id.storage, store == storeUUID, let stored = id.storedID else { return nil }
        if let known = subjects[stored] { return known }
        var made: StoredRowSubject?
        if let info = core.entities[id.entityName],
            let fields = read({ reader in try reader.fields(stored) }) ?? nil
        {
            made = StoredRowSubject(
                id: id, info: info, values: core.row(from: fields, info: info, storeUUID: storeUUID), core: core,
                version: fields.version, storedState: self)
        }
        subjects[stored] = made
        return made
    }

    /// The stored row of `object` as a subject: the row the fetch just gave it when it is a
    /// fault holding one (what the predicate judged, read with the fetch's reader), else
    /// read as ``subject(_:)`` reads it. A dictionary fetch without pending changes reads
    /// each result's row so, not once more from the store.
    func subject(of object: ManagedObject) -> StoredRowSubject? {
        guard !object.hasCommittedValues, let row = object.fastRow, let stored = object.objectID.storedID, subjects[stored] == nil,
            case .permanent(let store, _) = object.objectID.storage, store == storeUUID
        else { return subject(object.objectID) }
        let made = StoredRowSubject(id: object.objectID, info: object.info, values: row, core: core, version: object.rowVersion, storedState: self)
        subjects[stored] = made
        return made
    }

    /// Relationship `property` of `subject` as the store holds it: the related rows' subjects
    /// (a to-one's, or nil; a to-many's in an array, in the store's order). A recorded side
    /// is the row's own value; a derived side is read from the store's references.
    func value(of subject: StoredRowSubject, _ property: PropertyInfo) -> Any? {
        guard let ids = relatedIDs(of: subject, property) else { return nil }
        guard property.isToMany else { return ids.first.flatMap(self.subject) }
        return ids.compactMap(self.subject)
    }

    /// How many objects to-many `property` of `subject` holds in the store, counted without
    /// reading them.
    func count(of subject: StoredRowSubject, _ property: PropertyInfo) -> Int? {
        if !property.isRecorded, let stored = subject.id.storedID {
            if let known = derived[stored]?[property.name] { return known.count }
            return read { reader in try reader.countRelated(stored, property.name) }
        }
        return relatedIDs(of: subject, property)?.count
    }

    /// Relationship `property` of `subject` as the store holds it, as a context value (a
    /// derived side read from the store's references); nil when unreadable.
    func relationshipValue(of subject: StoredRowSubject, _ property: PropertyInfo) -> PropertyValue? {
        guard let ids = relatedIDs(of: subject, property) else { return nil }
        return property.isToMany ? .toMany(ids) : .toOne(ids.first)
    }

    /// The IDs relationship `property` of `subject` holds in the store; nil when unreadable.
    private func relatedIDs(of subject: StoredRowSubject, _ property: PropertyInfo) -> [ManagedObjectID]? {
        if property.isRecorded {
            switch subject.values[property] {
            case .toOne(let target)?: return target.map { [$0] } ?? []
            case .toMany(let targets)?: return targets
            case nil: return []
            case .attribute?, .invalid?: return nil
            }
        }
        guard let stored = subject.id.storedID else { return nil }
        // A derived side read once per object and relationship in a fetch (a predicate
        // naming `members` twice, a sort and a predicate both through it).
        if let known = derived[stored]?[property.name] { return known }
        guard let related = read({ reader in try reader.related(stored, property.name) }) else { return nil }
        let ids = related.map { ManagedObjectID.permanent($0, store: storeUUID) }
        derived[stored, default: [:]][property.name] = ids
        return ids
    }

    /// `body`'s result with a reader of the store as the context reads it; nil (the error
    /// kept for ``check()``) when the read fails.
    private func read<R>(_ body: (borrowing LogReader) throws -> R) -> R? {
        do {
            let log = try core.store().log
            if let snapshot { return try log.read(pinnedTo: snapshot, body) }
            return try readsCurrentState ? log.read(body) : core.readPinned(log, body)
        } catch {
            if failure == nil { failure = error }
            return nil
        }
    }
}
