/// The whole state of a store at one point of its history, in memory: every live object
/// and its recorded values (attributes, to-one references, recorded to-many members).
///
/// Built by replaying events forward from nothing or a checkpoint, or by reverting them
/// backward from the current state (``LogReader/state(asOf:)``); two images of the same
/// point compare equal whichever way they were built.
public struct StateImage: Sendable, Hashable {
    /// Every live object's values.
    public var objects: [StoredObjectID: [String: LogValue]] = [:]

    /// An empty store.
    public init() {}

    /// Creates an image from objects.
    public init(objects: [StoredObjectID: [String: LogValue]]) { self.objects = objects }

    /// The objects of `entity` (exactly that entity), by primary key.
    public func objects(ofEntity entity: String) -> [StoredObjectID: [String: LogValue]] {
        objects.filter { $0.key.entity == entity }
    }

    /// Applies `event` forward.
    public mutating func apply(_ event: TransactionEvent) {
        for change in event.changes { apply(change) }
    }

    /// Undoes `event`, using its before-images (DESIGN.md invariant 4).
    public mutating func revert(_ event: TransactionEvent) {
        for change in event.changes.reversed() { revert(change) }
    }

    /// Applies one change forward.
    public mutating func apply(_ change: Change) {
        switch change {
        case .insert(let id, let values):
            objects[id] = values.filter { $0.value != .null }
        case .update(let id, let changes):
            var values = objects[id] ?? [:]
            for change in changes { Self.set(change, forward: true, in: &values) }
            objects[id] = values
        case .delete(let id, _):
            objects[id] = nil
        }
    }

    /// Reverts one change.
    public mutating func revert(_ change: Change) {
        switch change {
        case .insert(let id, _):
            objects[id] = nil
        case .update(let id, let changes):
            var values = objects[id] ?? [:]
            for change in changes.reversed() { Self.set(change, forward: false, in: &values) }
            objects[id] = values
        case .delete(let id, let before):
            objects[id] = before.filter { $0.value != .null }
        }
    }

    static func set(_ change: PropertyChange, forward: Bool, in values: inout [String: LogValue]) {
        switch change {
        case .value(let property, let before, let after):
            let value = forward ? after : before
            values[property] = value == .null ? nil : value
        case .membership(let property, let added, let removed):
            var members: Set<StoredObjectID> = []
            if case .references(let ids) = values[property] { members = Set(ids) }
            let (add, remove) = forward ? (added, removed) : (removed, added)
            members.subtract(remove)
            members.formUnion(add)
            values[property] = members.isEmpty ? nil : .references(members.sorted())
        }
    }
}
