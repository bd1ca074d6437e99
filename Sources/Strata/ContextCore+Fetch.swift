import Foundation
import StrataLog
import StrataModel
import StrataPredicate

extension ContextCore {
    /// The managed objects `request` selects: store rows merged with the context's pending
    /// changes, filtered, sorted, offset and limited.
    func fetchObjects(_ request: FetchRequest) throws -> [ManagedObject] {
        guard let info = entities[request.entityName] else { throw ContextError.unknownEntity(request.entityName) }
        // No processPendingChanges here: a fetch must not split the undo group it runs in.
        let store = try self.store()
        let entityNames = request.includesSubentities ? model.selfAndSubentityNames(of: info.entity.name) : [info.entity.name]
        var results: [ManagedObject] = []
        var seen: Set<ManagedObjectID> = []
        var loaded: [(ManagedObjectID, [String: LogValue])] = []
        try store.log.read { reader in
            for name in entityNames where !(entities[name]?.entity.isAbstract ?? true) {
                try reader.forEachObject(of: name, includingSubentities: false) { object in
                    loaded.append((.permanent(object.id, store: store.identifier), object.values))
                    return .next
                }
            }
        }
        // Fetched objects stay faults, holding their row until a property is read.
        var rows: [ObjectIdentifier: [String: PropertyValue]] = [:]
        for (id, values) in loaded {
            guard let entity = entities[id.entityName] else { continue }
            let object = registered(id) ?? makeObject(id, info: entity)
            let row = self.values(from: values, info: entity)
            if object.committed == nil { object.row = row }
            seen.insert(id)
            if object.isDeletedFlag { continue }
            if object.changes.isEmpty && object.transients.isEmpty { rows[ObjectIdentifier(object)] = object.committed ?? row }
            results.append(object)
        }
        // Unsaved inserts of the entity (and sub-entities).
        for id in insertionOrder where !seen.contains(id) && entityNames.contains(id.entityName) {
            if let object = registered(id), !object.isDeletedFlag { results.append(object) }
        }
        for object in retained.values
        where object.restored && !seen.contains(object.objectID) && !insertionOrder.contains(object.objectID)
            && entityNames.contains(object.entity.name)
        {
            results.append(object)
        }
        // Unchanged objects are judged by their row, so matching doesn't fire their faults;
        // objects with unsaved changes are judged by their current values.
        func subject(_ object: ManagedObject) -> Any {
            rows[ObjectIdentifier(object)].map { RowSnapshot(values: $0, object: object) } ?? object
        }
        if let predicate = request.predicate {
            var kept: [ManagedObject] = []
            let variables = request.substitutionVariables.mapValues { $0.anyValue as Any }
            for object in results where try predicate.evaluate(with: subject(object), substitutionVariables: variables) {
                kept.append(object)
            }
            results = kept
        }
        if let filter = request.memoryFilter { results = try results.filter(filter) }
        if !request.sortDescriptors.isEmpty {
            results = try results.sorted { a, b in
                try FetchSortDescriptor.compare(subject(a), subject(b), by: request.sortDescriptors) == .orderedAscending
            }
        }
        if request.fetchOffset > 0 { results = Array(results.dropFirst(request.fetchOffset)) }
        if request.fetchLimit > 0 { results = Array(results.prefix(request.fetchLimit)) }
        return results
    
    }
}
