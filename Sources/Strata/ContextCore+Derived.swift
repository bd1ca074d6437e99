import Foundation
import StrataLog
import StrataModel

// MARK: - Derived attributes (spec 0006 §24)

extension ContextCore {
    /// After this context's commit: the derived values the log computed in it (the event's
    /// updates of derived attributes) become the committed values of the objects this
    /// context holds — so after a save the saving context shows them, as the store has them.
    /// A fault isn't loaded for it; a fault's fetched row, now stale, is dropped (it fires
    /// from the store). Returns the objects given new values.
    func adoptDerivedValues(of event: TransactionEvent) -> [ManagedObject] {
        // A model without derived attributes has none to adopt: no walk over a large save's changes.
        guard entities.values.contains(where: \.hasDerivedAttributes), let store = try? store() else { return [] }
        var adopted: [ManagedObject] = []
        for change in event.changes {
            guard case .update(let stored, let changes) = change, let info = entities[stored.entity] else { continue }
            let id = ManagedObjectID.permanent(stored, store: store.identifier)
            guard let object = registered(id), !object.isInvalidated else { continue }
            var found = false
            for case .value(let name, _, let after) in changes {
                guard let property = info.property(named: name), property.isDerived else { continue }
                found = true
                let value = propertyValue(after, property, storeUUID: store.identifier)
                if object.hasCommittedValues {
                    object.cacheCommittedValue(value, for: property)
                } else if object.hasRow {
                    object.row = nil
                    object.rowVersion = nil
                }
            }
            if found { adopted.append(object) }
        }
        return adopted
    }

    /// Gives `object` the derived attribute values of `storeValues` (the store's current
    /// values, read by a save's conflict check) as committed values.
    func adoptDerivedValues(_ storeValues: [String: PropertyValue], into object: ManagedObject) {
        guard object.info.hasDerivedAttributes, object.hasCommittedValues else { return }
        for property in object.info.propertyList where property.isDerived {
            object.cacheCommittedValue(storeValues[property.name] ?? property.emptyValue, for: property)
        }
    }
}
