import Foundation
import StrataLog
import StrataModel
import StrataPredicate

/// The faults of one batch of a batched fetch: the first fault fired reads them all.
final class FetchBatch {
    let ids: [ManagedObjectID]
    init(ids: [ManagedObjectID]) { self.ids = ids }
}

extension ContextCore {
    // MARK: - Preparing a request

    /// `request` with Swift key paths and `#Predicate`s resolved against the model,
    /// and the parts this layer owns checked. Errors name
    /// the part of the request at fault.
    func prepared(_ request: FetchRequest<ManagedObject>) throws -> FetchRequest<ManagedObject> {
        guard entities[request.entityName] != nil else { throw ContextError.unknownEntity(request.entityName) }
        var request = request
        if let resultClass = request.resultClass { coordinator.registerByName(resultClass) }
        let resolver = KeyPathResolver(core: self)
        for index in request.sortDescriptors.indices {
            guard let swiftKeyPath = request.sortDescriptors[index].swiftKeyPath else { continue }
            do {
                request.sortDescriptors[index].key = try resolver.resolve(swiftKeyPath.keyPath, from: request.entityName).path
            } catch let error as ContextError {
                throw ContextError.invalidFetchRequest(part: "sort descriptor \(index + 1)", reason: "\(error.description)")
            }
        }
        if let swiftPredicate = request.swiftPredicate {
            let translation = swiftPredicate.translate(resolver, request.entityName)
            if let translated = translation.predicate {
                request.predicate = request.predicate.map { .and([$0, translated]) } ?? translated
            }
            if !translation.isExact { request.filter(swiftPredicate.evaluate) }
            request.swiftPredicate = nil
        }
        if let stores = request.affectedStores {
            let own = try store()
            for store in stores where store !== own {
                throw ContextError.invalidFetchRequest(part: "affectedStores", reason: "\(store) is not a store of this context's coordinator")
            }
        }
        for (index, path) in request.relationshipKeyPathsForPrefetching.enumerated() {
            try checkRelationshipPath(path, from: request.entityName, part: "relationshipKeyPathsForPrefetching[\(index)]")
        }
        guard request.fetchLimit >= 0, request.fetchOffset >= 0, request.fetchBatchSize >= 0 else {
            throw ContextError.invalidArgument(
                "fetch request: fetchLimit (\(request.fetchLimit)), fetchOffset (\(request.fetchOffset)) and fetchBatchSize (\(request.fetchBatchSize)) can't be negative")
        }
        return request
    }

    /// Refuses grouping in a fetch of objects or IDs: `propertiesToGroupBy` and
    /// `havingPredicate` make dictionary rows, and Core Data requires the dictionary result
    /// type for them. (Before, such a fetch returned every matching object, the grouping
    /// and the having predicate silently ignored.)
    func refuseGrouping(_ request: FetchRequest<ManagedObject>, returning what: String) throws {
        let part: String
        if !(request.propertiesToGroupBy ?? []).isEmpty {
            part = "propertiesToGroupBy"
        } else if request.havingPredicate != nil {
            part = "havingPredicate"
        } else {
            return
        }
        throw ContextError.invalidFetchRequest(
            part: part, reason: "grouping makes dictionary rows, not \(what): set resultType to .dictionary and use fetchDictionaries(_:) or execute(_:)")
    }

    /// Whether the request searches no store (an empty `affectedStores`).
    func searchesNoStore(_ request: FetchRequest<ManagedObject>) -> Bool { request.affectedStores?.isEmpty ?? false }

    /// Checks that every component of `path` is a relationship, starting at `entity`.
    func checkRelationshipPath(_ path: String, from entity: String, part: String) throws {
        try walkKeyPath(path, from: entity, part: part) { current, component, property, _ in
            guard property.isRelationship else {
                throw ContextError.invalidFetchRequest(part: part, reason: "\"\(path)\": \(current).\(component) is not a relationship")
            }
        }
    }

    /// Walks the components of `path` from `entity`, calling `step` with each one's entity,
    /// name, property and whether it is the last; an unknown property or an empty path is an
    /// error naming `part`. A step that goes on must end on a relationship.
    func walkKeyPath(
        _ path: String, from entity: String, part: String,
        _ step: (_ entity: String, _ component: String, _ property: PropertyInfo, _ isLast: Bool) throws -> Void
    ) throws {
        let components = path.split(separator: ".").map(String.init)
        guard !components.isEmpty else { throw ContextError.invalidFetchRequest(part: part, reason: "empty key path") }
        var current = entity
        for (index, component) in components.enumerated() {
            guard let property = entities[current]?.properties[component] else {
                throw ContextError.invalidFetchRequest(part: part, reason: "\"\(path)\": entity \(current) has no property \"\(component)\"")
            }
            try step(current, component, property, index == components.count - 1)
            if let destination = property.destination { current = destination }
        }
    }

    // MARK: - Executing

    func execute(_ request: FetchRequest<ManagedObject>) throws -> FetchResult {
        switch request.resultType {
        case .managedObject: .objects(try fetchManagedObjects(request))
        case .managedObjectID: .objectIDs(try fetchObjectIDs(request))
        case .dictionary: .dictionaries(try fetchDictionaries(request))
        case .count: .count(try count(request))
        }
    }

    /// The number of objects `request` matches (its offset and limit applied, as Core Data
    /// does) — or, for a dictionary request whose rows aren't one per object (grouped, with
    /// aggregate expressions, distinct, or with a having predicate), the number of rows
    /// ``fetchDictionaries(_:)`` returns. Before, those counted the matching objects.
    func count(_ request: FetchRequest<ManagedObject>) throws -> Int {
        let request = try prepared(request)
        if searchesNoStore(request) { return 0 }
        if request.resultType == .dictionary, Self.makesRows(request) { return try fetchDictionaries(request).count }
        var plain = request
        plain.resultType = .managedObject
        return try countObjects(plain)
    }

    /// Whether a dictionary fetch of `request` makes rows other than one per matching object.
    static func makesRows(_ request: FetchRequest<ManagedObject>) -> Bool {
        request.returnsDistinctResults || request.havingPredicate != nil || !(request.propertiesToGroupBy ?? []).isEmpty
            || (request.propertiesToFetch ?? []).contains { if case .expression = $0 { true } else { false } }
    }

    func fetchObjectIDs(_ request: FetchRequest<ManagedObject>) throws -> [ManagedObjectID] {
        let request = try prepared(request)
        try refuseGrouping(request, returning: "object IDs")
        if searchesNoStore(request) { return [] }
        return try fetchIDs(request)
    }

    /// Managed objects, with the request's faulting, batching and prefetching applied.
    func fetchManagedObjects(_ request: FetchRequest<ManagedObject>, judgedRows: JudgedRows? = nil) throws -> [ManagedObject] {
        let request = try prepared(request)
        try refuseGrouping(request, returning: "managed objects")
        if searchesNoStore(request) { return [] }
        let objects = try fetchObjects(request, judgedRows: judgedRows)
        if request.shouldRefreshRefetchedObjects && request.includesPropertyValues {
            // Objects loaded before the fetch (it gave its rows to faults only) get the
            // store's values now, keeping their unsaved changes (`refresh(_:mergeChanges: true)`).
            let loaded = objects.filter { $0.hasCommittedValues && !$0.isInsertedFlag && !$0.isInvalidated }
            for object in loaded { noteRefreshed(object.objectID) }
            reloadKeepingChanges(loaded, events: .refresh)
        }
        // Faults the fetch can leave alone: registered by it, unchanged, not yet fired
        // (found only when something is done to them: a plain fetch copies no array).
        func isFault(_ object: ManagedObject) -> Bool { !object.hasCommittedValues && !object.isInsertedFlag && object.changes.isEmpty }
        if !request.includesPropertyValues {
            for object in objects where isFault(object) { object.row = nil }
        } else if !request.returnsObjectsAsFaults {
            let faults = objects.filter(isFault)
            for object in faults { try fulfillThrowing(object) }
        } else if request.fetchBatchSize > 0 {
            // Past the first batch, faults hold no values: the first one fired reads its batch.
            let pastFirst = objects.dropFirst(request.fetchBatchSize)
            var batch: [ManagedObject] = []
            func close() {
                let shared = FetchBatch(ids: batch.map(\.objectID))
                for object in batch { object.fetchBatch = shared }
                batch.removeAll()
            }
            for object in pastFirst where !object.hasCommittedValues && !object.isInsertedFlag && object.changes.isEmpty {
                object.row = nil
                batch.append(object)
                if batch.count == request.fetchBatchSize { close() }
            }
            if !batch.isEmpty { close() }
        }
        for path in request.relationshipKeyPathsForPrefetching {
            try prefetch(path, of: objects)
        }
        return objects
    }

    /// Reads the values of every unfired fault of `batch` in one store snapshot — a child's
    /// in one request to its parent, its store, whose unsaved changes count. (Before, a
    /// child's batch was read from the store, so a fault past the first batch showed the
    /// saved values, not the parent's.)
    func loadBatch(_ batch: FetchBatch) throws {
        let waiting = batch.ids.compactMap { registered($0) }.filter { !$0.hasCommittedValues && !$0.hasRow && !$0.isInsertedFlag }
        for object in waiting { object.fetchBatch = nil }
        if parentContext != nil {
            let values = try parentValues(for: waiting.map(\.objectID))
            for object in waiting {
                if let snapshot = values[object.objectID] {
                    object.row = snapshot.values
                    object.rowVersion = snapshot.version
                }
            }
            return
        }
        try loadRows(of: waiting)
    }

    /// The objects for `ids`, in order, their values loaded now: the faults' rows read in one
    /// store snapshot (a child's: in one request to its parent). Nil where the object isn't
    /// in the store (or the parent); an ID the context can't resolve throws.
    func existingObjects(with ids: [ManagedObjectID]) throws -> [ManagedObject?] {
        catchUpOnRemaps()
        let ids = try resolvingTemporaryIDs(ids)
        var objects: [ManagedObject] = []
        objects.reserveCapacity(ids.count)
        for id in ids {
            guard let object = object(with: id) else { throw unresolvableIDError(id) }
            objects.append(object)
        }
        let faults = objects.filter { !$0.hasCommittedValues && !$0.isInsertedFlag && !$0.hasRow }
        if parentContext != nil {
            let values = try parentValues(for: faults.map(\.objectID))
            for fault in faults {
                guard let snapshot = values[fault.objectID], !fault.hasCommittedValues else { continue }
                fault.committed = snapshot.values
                fault.version = snapshot.version
                fault.awakeFromFetchUntracked()
            }
        } else {
            try loadRows(of: faults)
        }
        return try objects.map { object in
            do {
                try fulfillThrowing(object, rowsReadNow: true)
            } catch ContextError.objectNotFound {
                return nil
            }
            return object.isInvalidated || object.isInaccessible ? nil : object
        }
    }

    /// Gives each fault of `objects` its stored row (a fault whose object is gone keeps no
    /// row, and firing it reports the object missing).
    func loadRows(of objects: [ManagedObject]) throws {
        let wanted = objects.compactMap { object in object.objectID.storedID.map { (object, $0) } }
        guard !wanted.isEmpty else { return }
        let log = try store().log
        if let foreign = wanted.lazy.compactMap({ self.foreignStoreError($0.0.objectID, storeUUID: log.storeUUID) }).first { throw foreign }
        // Read in key order through one cursor, by property code, and held by slot, as a
        // fetch holds its rows.
        let order = wanted.indices.sorted { wanted[$0].1 < wanted[$1].1 }
        var rows = [StoredFields?](repeating: nil, count: wanted.count)
        try readPinned(log) { reader in
            var next = 0
            try reader.forEachFields(order.map { wanted[$0].1 }) { fields in
                // Each found ID is at or after the next position in order (missing ones skipped).
                while next < order.count && wanted[order[next]].1 != fields.id { next += 1 }
                guard next < order.count else { return }
                rows[order[next]] = fields
                next += 1
            }
        }
        for ((object, _), fields) in zip(wanted, rows) {
            guard let fields, !object.hasCommittedValues else { continue }
            object.keepRow(row(from: fields, info: object.info, storeUUID: log.storeUUID))
            object.rowVersion = fields.version
        }
    }

    /// Reads the destinations of relationship key path `path` from `objects` with their
    /// rows, one store read per level — in a child context, one request to its parent per
    /// level, whose current state is the child's store (before, a child's prefetch read the
    /// store: destinations showed saved values and derived sides lacked the parent's unsaved
    /// members, cached so for later reads).
    func prefetch(_ path: String, of objects: [ManagedObject]) throws {
        var level = objects
        for component in path.split(separator: ".").map(String.init) {
            var next: [ManagedObject] = []
            var seen: Set<ManagedObjectID> = []
            // Stored values where the row has them; derived sides read from the store.
            var derived: [(ManagedObject, PropertyInfo)] = []
            for object in level {
                guard let property = object.info.properties[component] else { continue }
                let known = object.changes[component] ?? object.committed?[component] ?? object.row?[component]
                if let known {
                    for id in known.ids {
                        guard let related = self.object(with: id) else { continue }
                        object.prefetchedObjects.append(related)
                        if seen.insert(id).inserted { next.append(related) }
                    }
                } else if property.isRelationship, object.objectID.storedID != nil {
                    derived.append((object, property))
                }
            }
            if !derived.isEmpty, parentContext != nil {
                // A child's store is its parent: the sides as the parent holds them now.
                for (object, property) in derived {
                    guard let value = try parentValue(of: object.objectID, property.name) else { continue }
                    if object.hasCommittedValues { object.cacheCommittedValue(value, for: property) } else { object.cacheRowValue(value, for: property) }
                    for id in value.ids {
                        guard let found = self.object(with: id) else { continue }
                        object.prefetchedObjects.append(found)
                        if seen.insert(id).inserted { next.append(found) }
                    }
                }
            } else if !derived.isEmpty {
                let log = try store().log
                let store = log.storeUUID
                let related = try readPinned(log) { reader in
                    try derived.map { object, property in try object.objectID.storedID.map { try reader.related($0, property.name) } ?? [] }
                }
                for ((object, property), ids) in zip(derived, related) {
                    let value = PropertyValue.related(ids, for: property, store: store)
                    let mapped = value.ids
                    if object.hasCommittedValues { object.cacheCommittedValue(value, for: property) } else { object.cacheRowValue(value, for: property) }
                    for id in mapped {
                        guard let found = self.object(with: id) else { continue }
                        object.prefetchedObjects.append(found)
                        if seen.insert(id).inserted { next.append(found) }
                    }
                }
            }
            let faults = next.filter { !$0.hasCommittedValues && !$0.hasRow && !$0.isInsertedFlag }
            if parentContext != nil {
                let values = try parentValues(for: faults.map(\.objectID))
                for object in faults {
                    if let snapshot = values[object.objectID] {
                        object.row = snapshot.values
                        object.rowVersion = snapshot.version
                    }
                }
            } else {
                try loadRows(of: faults)
            }
            level = next
        }
    }

    // MARK: - Fetched properties

    /// The objects fetched property `key` of `object` names, or nil if `key` is no fetched
    /// property. `$FETCH_SOURCE` in its predicate is the object itself, `$FETCHED_PROPERTY`
    /// the property's description (`$FETCHED_PROPERTY.userInfo.key`, as in Core Data); the
    /// objects are in the order of its sort descriptors.
    ///
    /// As in Core Data, the fetch runs at the first read only: the result is kept on the
    /// object (``ManagedObject/fetchedValues``) until the object is refreshed, turned into a
    /// fault or the context reset. (Before session 28 it ran at every read.) A fetch that
    /// fails is recorded as a problem and kept for nothing: the next read runs it again.
    func fetchedPropertyValue(_ object: ManagedObject, _ key: String) -> Any? {
        guard let fetched = object.entity.fetchedPropertiesByName[key] else { return nil }
        // Reading it fires the source's fault, as in Core Data: the predicate may read
        // $FETCH_SOURCE's values, and the object is then loaded like any read of it makes it.
        if !object.hasCommittedValues, !object.isInsertedFlag { fulfill(object) }
        if let ids = object.fetchedValues[key] { return ids.compactMap { self.object(with: $0) } }
        guard let predicate = fetched.predicate.predicate else {
            recordProblem(.invalidArgument("fetched property \(object.entity.name).\(key): its predicate does not parse: \(fetched.predicate.format)"))
            return nil
        }
        var request = FetchRequest(entityName: fetched.entityName)
        let sourceID = object.objectID
        let description = FetchedPropertyVariable(description: fetched)
        if predicate.description.contains("$"), let bound = Self.boundFetchedPropertyPredicate(predicate, source: object, description: description) {
            request.predicate = bound
        } else if predicate.description.contains("$") {
            request.filter { candidate in
                // The source in the candidate's context: a child's fetch judges the stored
                // objects in its parent, where the source needn't be registered (before, it
                // was then NSNull and a child's fetched property was always empty).
                // Both read as a fetch reads them (spec 0008, Evaluation), as the bound
                // predicate's fetch judges the candidates and reads the source.
                let source: Any = candidate.core?.object(with: sourceID).map(JudgedObjectView.init) ?? NSNull()
                return try predicate.evaluate(
                    with: JudgedObjectView(candidate), substitutionVariables: ["FETCH_SOURCE": source, "FETCHED_PROPERTY": description])
            }
        } else {
            request.predicate = predicate
        }
        request.sortDescriptors = fetched.sortDescriptors.map {
            FetchSortDescriptor(
                key: $0.key, ascending: $0.ascending, caseInsensitive: $0.caseInsensitive,
                diacriticInsensitive: $0.diacriticInsensitive, numeric: $0.numeric)
        }
        do {
            let objects = try fetchManagedObjects(request)
            object.fetchedValues[key] = objects.map(\.objectID)
            keepsFetchedValues = true
            return objects
        } catch {
            recordProblem(.wrapping(error))
            return nil
        }
    }

    /// `predicate` with a fetched property's variables replaced by what they are now, as
    /// Core Data substitutes them: `$FETCH_SOURCE` by the object (compared by identity), a
    /// key path from `$FETCH_SOURCE` or `$FETCHED_PROPERTY` (`$FETCH_SOURCE.name`,
    /// `$FETCHED_PROPERTY.userInfo.position`) by its value read now in the reading context
    /// (a child's unsaved change included) — so the fetch is an ordinary one, which the
    /// planner answers from indexes instead of judging every object of the entity. Nil when
    /// that can't be done (`$FETCHED_PROPERTY` alone, another variable, a value no predicate
    /// constant holds): the caller then evaluates the predicate for each candidate.
    static func boundFetchedPropertyPredicate(
        _ predicate: FormatPredicate, source: ManagedObject, description: FetchedPropertyVariable
    ) -> FormatPredicate? {
        var values: [String: Any] = ["FETCH_SOURCE": source]
        var unbindable = false
        func rewrite(_ expression: FormatExpression) -> FormatExpression {
            switch expression {
            case .constant, .evaluatedObject, .keyPath:
                return expression
            case .variable(let name):
                if name == "FETCHED_PROPERTY" { unbindable = true }
                return expression
            case .keyPathOf(.variable(let name), let path) where name == "FETCH_SOURCE" || name == "FETCHED_PROPERTY":
                // The source read as a fetch reads it (spec 0008, Evaluation): without pending
                // changes by its stored values, not through its class's `value(forKey:)`.
                let value = name == "FETCH_SOURCE"
                    ? JudgedObjectView(source).value(forKeyPath: path.string)
                    : description.value(forKeyPath: path.string)
                let variable = "FETCHED_PROPERTY_VALUE_\(values.count)"
                values[variable] = value ?? NSNull()
                return .variable(variable)
            case .aggregate(let elements):
                return .aggregate(elements.map(rewrite))
            case .keyPathOf(let base, let path):
                return .keyPathOf(rewrite(base), path)
            case .index(let base, .expression(let index)):
                return .index(rewrite(base), .expression(rewrite(index)))
            case .index(let base, let subscriptValue):
                return .index(rewrite(base), subscriptValue)
            case .function(let function, let arguments):
                return .function(function, arguments.map(rewrite))
            case .arithmetic(let op, let left, let right):
                return .arithmetic(op, rewrite(left), rewrite(right))
            case .subquery(let collection, let variable, let inner):
                return .subquery(collection: rewrite(collection), variable: variable, predicate: rewriteNode(inner))
            }
        }
        func rewriteNode(_ node: PredicateNode) -> PredicateNode {
            switch node {
            case .constant: return node
            case .comparison(let c):
                return .comparison(ComparisonPredicate(
                    rewrite(c.leftExpression), c.operatorType, rewrite(c.rightExpression), modifier: c.modifier, options: c.options))
            case .and(let children): return .and(children.map(rewriteNode))
            case .or(let children): return .or(children.map(rewriteNode))
            case .not(let child): return .not(rewriteNode(child))
            }
        }
        let rewritten = FormatPredicate(rewriteNode(predicate.node))
        guard !unbindable else { return nil }
        return try? rewritten.withSubstitutionVariables(values)
    }

    /// `$FETCHED_PROPERTY` in a fetched property's predicate: its description, read by key
    /// path as Core Data's `NSFetchedPropertyDescription` is — `name`, `userInfo` (and a key
    /// of it: `$FETCHED_PROPERTY.userInfo.minimumAge`), `renamingIdentifier`.
    struct FetchedPropertyVariable: KeyValueCoding, Sendable {
        let description: FetchedPropertyDescription

        func value(forKey key: String) -> Any? {
            switch key {
            case "name": description.name
            case "userInfo": description.userInfo as [String: Any]
            case "renamingIdentifier": description.renamingIdentifier
            default: nil
            }
        }
    }

    // MARK: - Dictionaries

    /// One cell of a dictionary row, hashable so rows can be grouped and compared. Any NaN
    /// is any NaN of its type (a date at NaN too), as `NSNumber`'s `isEqual:` finds it and
    /// change detection does (spec 0008): distinct rows keep one, and grouping puts every
    /// NaN in one group (before, each NaN row was a group of its own, whose aggregates ran
    /// over no members, and distinct rows kept every NaN).
    enum Cell: Hashable {
        case null
        case attribute(AttributeValue)
        case object(ManagedObjectID)
        case objects([ManagedObjectID])

        static func == (lhs: Cell, rhs: Cell) -> Bool {
            switch (lhs, rhs) {
            case (.null, .null): true
            case (.attribute(let a), .attribute(let b)): a == b || (nanKind(a) != nil && nanKind(a) == nanKind(b))
            case (.object(let a), .object(let b)): a == b
            case (.objects(let a), .objects(let b)): a == b
            default: false
            }
        }

        func hash(into hasher: inout Hasher) {
            switch self {
            case .null:
                hasher.combine(0)
            case .attribute(let value):
                hasher.combine(1)
                if let kind = Self.nanKind(value) { hasher.combine(kind) } else { hasher.combine(value) }
            case .object(let id):
                hasher.combine(2)
                hasher.combine(id)
            case .objects(let ids):
                hasher.combine(3)
                hasher.combine(ids)
            }
        }

        /// The type of a NaN value (nil for any other value).
        static func nanKind(_ value: AttributeValue) -> Int? {
            switch value {
            case .double(let v) where v.isNaN: 1
            case .float(let v) where v.isNaN: 2
            case .decimal(let v) where v.isNaN: 3
            case .date(let v) where v.timeIntervalSinceReferenceDate.isNaN: 4
            default: nil
            }
        }

        var sendable: (any Sendable)? {
            switch self {
            case .null: nil
            case .attribute(let value): value.anyValue
            case .object(let id): id
            case .objects(let ids): ids
            }
        }
    }

    func fetchDictionaries(_ request: FetchRequest<ManagedObject>) throws -> [[String: any Sendable]] {
        let request = try prepared(request)
        guard let info = entities[request.entityName] else { throw ContextError.unknownEntity(request.entityName) }
        let fetched: [PropertyToFetch] =
            request.propertiesToFetch
            ?? info.entity.allAttributes.filter { !$0.isTransient }.map { .property($0.name) }
        let groupBy = request.propertiesToGroupBy ?? []
        try checkDictionaryParts(request, fetched: fetched, groupBy: groupBy, entity: request.entityName)
        let hasAggregates = fetched.contains { if case .expression = $0 { true } else { false } }
        let grouped = !groupBy.isEmpty || hasAggregates
        // The keys of a grouped row: its group-by key paths and its expressions' names.
        let rowKeys = groupBy + fetched.compactMap { if case .expression(let name, _, _) = $0 { name } else { nil } }
        if grouped { try checkGroupedSorts(request, rowKeys: rowKeys, groupBy: groupBy) }
        if let having = request.havingPredicate { _ = try Self.rowKeyPredicate(having, rowKeys: rowKeys) }
        if searchesNoStore(request) { return [] }
        // A child's store is its parent: without the child's pending changes, the rows are the
        // parent's, as the parent holds them now (spec 0008, Dictionary results). Before, the
        // parent chose the objects but the rows were read from the child's objects, its
        // unsaved values included.
        if let parent = parentContext, !request.includesPendingChanges {
            let forParent = {
                var copy = request
                copy.includesPendingChanges = true
                return copy
            }()
            return try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in try parent.fetchDictionaries(forParent) }
        }
        // Grouping and distinct work on every matching object; offset and limit apply to the
        // rows that come out.
        var base = request
        if grouped || request.returnsDistinctResults {
            base.fetchOffset = 0
            base.fetchLimit = 0
        }
        // Grouped rows are sorted by their own keys (which may name expressions) afterwards.
        if grouped { base.sortDescriptors = [] }
        var fetchState: StoredState?
        let objects = try fetchObjects(base, savedState: &fetchState)
        // Without pending changes, the rows hold the values the store holds, as the objects
        // were chosen and ordered by (Core Data's dictionaries always do): read through the
        // fetch's own saved state, as of its snapshot, with the related rows it read already.
        // A child context's store is its parent: its rows hold the parent's current values.
        let saved = request.includesPendingChanges || parentContext != nil ? nil : try fetchState ?? StoredState(core: self, storeUUID: store().identifier)
        var rows: [[String: Cell]] = []
        if grouped {
            var order: [[Cell]] = []
            var members: [[Cell]: [ManagedObject]] = [:]
            for object in objects {
                let key = try groupBy.map { try cell(of: object, path: $0, saved: saved) }
                if members[key] == nil { order.append(key) }
                members[key, default: []].append(object)
            }
            if groupBy.isEmpty && order.isEmpty {
                order = [[]]
                members[[]] = []
            }
            for key in order {
                var row: [String: Cell] = [:]
                for (path, value) in zip(groupBy, key) { row[path] = value }
                for entry in fetched {
                    guard case .expression(let name, let function, let keyPath) = entry else { continue }
                    let values = try (members[key] ?? []).map { try cell(of: $0, path: keyPath, saved: saved) }
                    let type = try attributeType(at: keyPath, from: request.entityName, part: name)
                    row[name] = try aggregate(function, values, type: type, keyPath: keyPath, entity: request.entityName)
                }
                rows.append(row)
            }
            if let having = try request.havingPredicate.map({ try Self.rowKeyPredicate($0, rowKeys: rowKeys) }) {
                // Its `$variables` take the request's values, as the predicate's do (before,
                // any variable failed the fetch as having no value).
                let variables = request.substitutionVariables.mapValues { $0.anyValue as Any }
                rows = try rows.filter { row in
                    let subject: [String: Any] = row.mapValues { $0.sendable ?? NSNull() }
                    do {
                        return try having.evaluate(with: subject, substitutionVariables: variables)
                    } catch {
                        throw ContextError.invalidFetchRequest(part: "havingPredicate", reason: "\(error)")
                    }
                }
            }
            if !request.sortDescriptors.isEmpty { rows = sortRows(rows, by: request.sortDescriptors) }
        } else {
            for object in objects {
                var row: [String: Cell] = [:]
                for entry in fetched { row[entry.name] = try cell(of: object, path: entry.name, saved: saved) }
                rows.append(row)
            }
        }
        if request.returnsDistinctResults {
            var seen: Set<[String: Cell]> = []
            rows = rows.filter { seen.insert($0).inserted }
        }
        if grouped || request.returnsDistinctResults {
            if request.fetchOffset > 0 { rows = Array(rows.dropFirst(request.fetchOffset)) }
            if request.fetchLimit > 0 { rows = Array(rows.prefix(request.fetchLimit)) }
        }
        return rows.map { row in row.compactMapValues { $0.sendable } }
    }

    /// Checks the sort descriptors of grouped rows, which sort by the rows' own keys (spec
    /// 0008, Dictionary results): each names a group-by key path or an expression. With no
    /// group-by key path (aggregates over every match, one row) a key of the entity is also
    /// accepted (one row needs no order); any other key is refused, naming the keys there
    /// are. (Before, a key no row holds — a misspelt one too — sorted every row as nil:
    /// the order was silently ignored.)
    func checkGroupedSorts(_ request: FetchRequest<ManagedObject>, rowKeys: [String], groupBy: [String]) throws {
        for (index, descriptor) in request.sortDescriptors.enumerated() where !rowKeys.contains(descriptor.key) {
            let part = "sort descriptor \(index + 1) (\(descriptor.key))"
            if groupBy.isEmpty {
                var single = FetchRequest(entityName: request.entityName)
                single.sortDescriptors = [descriptor]
                do { try validate(single) } catch ContextError.invalidFetchRequest(_, let reason) {
                    throw ContextError.invalidFetchRequest(part: part, reason: reason)
                }
                continue
            }
            throw ContextError.invalidFetchRequest(
                part: part,
                reason: "grouped dictionary rows are sorted by their own keys, the propertiesToGroupBy key paths and the expressions' names (\(rowKeys.joined(separator: ", ")))")
        }
    }

    /// `having` with each key path read from a grouped row: a key path whose leading keys
    /// join to one of `rowKeys` (`shop.name`, a group-by key path through a to-one) reads
    /// that key of the row, and the rest of the path from its value. A key path that starts
    /// with no row key is refused, naming the keys there are. (Before, a dotted group-by key
    /// path was walked through the row — `shop`, then `name` — and read nil, so a
    /// `havingPredicate` on it matched no group; a misspelt key read nil silently.)
    static func rowKeyPredicate(_ having: FormatPredicate, rowKeys: [String]) throws -> FormatPredicate {
        let keys = Set(rowKeys)
        var problem: String?
        func mapped(_ path: FormatKeyPath) -> FormatKeyPath {
            var leading: [String] = []
            for component in path.components {
                guard case .key(let key) = component else { break }
                leading.append(key)
            }
            for count in stride(from: leading.count, through: 1, by: -1) {
                let joined = leading.prefix(count).joined(separator: ".")
                if keys.contains(joined) { return FormatKeyPath(components: [.key(joined)] + path.components.dropFirst(count)) }
            }
            if problem == nil {
                problem = "\"\(path)\" names no key of the grouped rows (\(rowKeys.joined(separator: ", ")))"
            }
            return path
        }
        func rewrite(_ expression: FormatExpression) -> FormatExpression {
            switch expression {
            case .constant, .evaluatedObject, .variable: expression
            case .keyPath(let path): .keyPath(mapped(path))
            case .keyPathOf(.evaluatedObject, let path): .keyPathOf(.evaluatedObject, mapped(path))
            case .keyPathOf(let base, let path): .keyPathOf(rewrite(base), path)
            case .aggregate(let elements): .aggregate(elements.map(rewrite))
            case .index(let base, .expression(let index)): .index(rewrite(base), .expression(rewrite(index)))
            case .index(let base, let subscriptValue): .index(rewrite(base), subscriptValue)
            case .function(let function, let arguments): .function(function, arguments.map(rewrite))
            case .arithmetic(let op, let left, let right): .arithmetic(op, rewrite(left), rewrite(right))
            // The inner predicate reads the subquery's variable, not the row.
            case .subquery(let collection, let variable, let inner): .subquery(collection: rewrite(collection), variable: variable, predicate: inner)
            }
        }
        func rewriteNode(_ node: PredicateNode) -> PredicateNode {
            switch node {
            case .constant: node
            case .comparison(let c):
                .comparison(ComparisonPredicate(rewrite(c.leftExpression), c.operatorType, rewrite(c.rightExpression), modifier: c.modifier, options: c.options))
            case .and(let children): .and(children.map(rewriteNode))
            case .or(let children): .or(children.map(rewriteNode))
            case .not(let child): .not(rewriteNode(child))
            }
        }
        let rewritten = FormatPredicate(rewriteNode(having.node))
        if let problem { throw ContextError.invalidFetchRequest(part: "havingPredicate", reason: problem) }
        return rewritten
    }

    func checkDictionaryParts(_ request: FetchRequest<ManagedObject>, fetched: [PropertyToFetch], groupBy: [String], entity: String) throws {
        var names: [String: PropertyToFetch] = [:]
        for (index, entry) in fetched.enumerated() {
            let part = "propertiesToFetch[\(index)]"
            // One key per entry: a name two different entries use would have one value
            // replace the other in the row (before, silently). The same entry twice is harmless.
            if let earlier = names.updateValue(entry, forKey: entry.name), earlier != entry {
                throw ContextError.invalidFetchRequest(part: part, reason: "\"\(entry.name)\" names an earlier entry too; each entry needs its own name")
            }
            switch entry {
            case .property(let path):
                _ = try attributeType(at: path, from: entity, part: part)
                if !groupBy.isEmpty && !groupBy.contains(path) {
                    throw ContextError.invalidFetchRequest(
                        part: "\(part)", reason: "\"\(path)\" must be in propertiesToGroupBy (\(groupBy.joined(separator: ", "))) or be an aggregate expression")
                }
            case .expression(let name, let function, let keyPath):
                guard !name.isEmpty else { throw ContextError.invalidFetchRequest(part: "\(part)", reason: "an expression needs a name") }
                let type = try attributeType(at: keyPath, from: entity, part: part)
                if function == .min || function == .max, type == nil {
                    // An object has no order to pick the least or greatest by (before, it read nil).
                    throw ContextError.invalidFetchRequest(
                        part: "\(part)", reason: "\(function.rawValue) of \"\(keyPath)\" needs an attribute, not a relationship")
                }
                if function == .sum || function == .average {
                    guard let type, type.isNumeric else {
                        throw ContextError.invalidFetchRequest(
                            part: "\(part)", reason: "\(function.rawValue) of \"\(keyPath)\" needs a numeric attribute, not \(type.map { "\($0)" } ?? "a relationship")")
                    }
                }
            }
        }
        if groupBy.isEmpty, fetched.contains(where: { if case .property = $0 { true } else { false } }),
            fetched.contains(where: { if case .expression = $0 { true } else { false } })
        {
            throw ContextError.invalidFetchRequest(
                part: "propertiesToFetch", reason: "mixing properties and aggregate expressions needs propertiesToGroupBy")
        }
        for (index, path) in groupBy.enumerated() {
            _ = try attributeType(at: path, from: entity, part: "propertiesToGroupBy[\(index)]")
        }
        if request.havingPredicate != nil && groupBy.isEmpty {
            throw ContextError.invalidFetchRequest(part: "havingPredicate", reason: "needs propertiesToGroupBy")
        }
    }

    /// The attribute type at the end of `path` (nil for a relationship), checking each step.
    func attributeType(at path: String, from entity: String, part: String) throws -> AttributeType? {
        var type: AttributeType?
        try walkKeyPath(path, from: entity, part: part) { current, component, property, isLast in
            if isLast {
                if case .attribute(let attributeType) = property.kind { type = attributeType }
                return
            }
            guard case .toOne = property.kind else {
                throw ContextError.invalidFetchRequest(
                    part: part, reason: "\"\(path)\": \(current).\(component) is not a to-one relationship, so the path can't continue")
            }
        }
        return type
    }

    /// The value at `path` of `object`, read without firing the fault of an unchanged
    /// object that has a fetched row.
    func cell(of object: ManagedObject, path: String, saved: StoredState? = nil) throws -> Cell {
        if let saved { return try savedCell(of: object, path: path, saved) }
        var current = object
        let components = path.split(separator: ".").map(String.init)
        for (index, component) in components.enumerated() {
            guard let property = current.info.properties[component] else { return .null }
            let value = current.changes[component] ?? current.committed?[component] ?? current.row?[component] ?? current.currentValue(property)
            if index == components.count - 1 {
                switch value {
                case .attribute(let v?): return .attribute(v)
                case .toOne(let id?): return .object(id)
                case .toMany(let ids): return .objects(ids)
                default: return .null
                }
            }
            guard case .toOne(let id?) = value, let next = self.object(with: id) else { return .null }
            current = next
        }
        return .null
    }

    /// The cell of `path` as the store holds it, from the object's stored row (a fetch
    /// without pending changes: spec 0008, Dictionary results).
    private func savedCell(of root: ManagedObject, path: String, _ saved: StoredState) throws -> Cell {
        var current = saved.subject(of: root)
        let components = path.split(separator: ".").map(String.init)
        for (index, component) in components.enumerated() {
            guard let subject = current, let property = subject.info.properties[component] else { break }
            // A transient property has no saved value: it is read from the object, as the
            // predicate reads it (before, a transient attribute read as nil and a transient
            // relationship was asked of the store, which failed the fetch).
            if property.isTransient {
                guard let object = object(with: subject.id) else { break }
                return try cell(of: object, path: components[index...].joined(separator: "."))
            }
            let value = property.isRelationship ? saved.relationshipValue(of: subject, property) : subject.values[property]
            try saved.check()
            if index == components.count - 1 {
                switch value {
                case .attribute(let v?)?: return .attribute(v)
                case .toOne(let id?)?: return .object(id)
                case .toMany(let ids)?: return .objects(ids)
                default: return .null
                }
            }
            guard case .toOne(let id?)? = value else { break }
            current = saved.subject(id)
        }
        try saved.check()
        return .null
    }

    /// The aggregate `function` of `cells`, the values at `keyPath` (of attribute `type`,
    /// nil for a relationship) of a group's members. `sum` and `average` are typed by the
    /// attribute, not by the values found: a sum over no values (an empty group, or only
    /// nils) is 0 of the attribute's sum type — `Double` for floating point, `Decimal` for
    /// decimals — as it is over values (before, it was an `Int64` 0 whatever the type).
    func aggregate(_ function: ExpressionFunction, _ cells: [Cell], type: AttributeType?, keyPath: String, entity: String) throws -> Cell {
        let values = cells.compactMap { cell -> AttributeValue? in if case .attribute(let v) = cell { v } else { nil } }
        switch function {
        case .count:
            return .attribute(.int64(Int64(cells.filter { $0 != .null }.count)))
        case .min, .max:
            let ordered = values.sorted { FetchSortDescriptor.compareValues($0.anyValue, $1.anyValue, caseInsensitive: false) == .orderedAscending }
            guard let pick = function == .min ? ordered.first : ordered.last else { return .null }
            return .attribute(pick)
        case .sum, .average:
            if type == .decimal || values.contains(where: { if case .decimal = $0 { true } else { false } }) {
                var total = Decimal(0)
                for case .decimal(let v) in values { total += v }
                // Decimal addition out of range gives NaN (NSDecimalNumber raises): say so, as
                // for an integer sum (before, the row held a NaN decimal).
                guard !total.isNaN else { throw ContextError.invalidArgument("fetch request: \(function == .sum ? "sum" : "average") of \(entity).\(keyPath) overflows Decimal") }
                if function == .sum { return .attribute(.decimal(total)) }
                return values.isEmpty ? .null : .attribute(.decimal(total / Decimal(values.count)))
            }
            let integral: Bool
            switch type {
            case .int16?, .int32?, .int64?: integral = true
            case .some: integral = false
            case nil:
                integral = values.allSatisfy {
                    switch $0 {
                    case .int16, .int32, .int64: true
                    default: false
                    }
                }
            }
            if function == .sum && integral {
                var total: Int64 = 0
                for value in values {
                    let (sum, overflow) = total.addingReportingOverflow(Int64(value.anyValue as? Int16 ?? 0) + Int64(value.anyValue as? Int32 ?? 0) + (value.anyValue as? Int64 ?? 0))
                    guard !overflow else { throw ContextError.invalidArgument("fetch request: sum of \(entity).\(keyPath) overflows Int64") }
                    total = sum
                }
                return .attribute(.int64(total))
            }
            let doubles = values.compactMap { FetchSortDescriptor.number($0.anyValue) }
            let total = doubles.reduce(0, +)
            if function == .sum { return .attribute(.double(total)) }
            return doubles.isEmpty ? .null : .attribute(.double(total / Double(doubles.count)))
        }
    }

    func sortRows(_ rows: [[String: Cell]], by descriptors: [FetchSortDescriptor]) -> [[String: Cell]] {
        // Each row's keys read (and folded) once, not at every comparison.
        let keys = SortKeyTable(rows.map { row in descriptors.map { row[$0.key]?.sendable as Any? } }, descriptors: descriptors)
        return keys.stableOrder().map { rows[$0] }
    }
}
