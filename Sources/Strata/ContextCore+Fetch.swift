import Foundation
import StrataLog
import StrataModel
import StrataPredicate

// Fetching: validation, planning, and running a plan against one snapshot of the store,
// merged with the context's unsaved changes (`Specs/0008-fetch-requests.md`).

extension ContextCore: JoinResolving {
    // MARK: - Validation

    /// Checks `request` against the model before anything is read: the entity exists, every
    /// key path of the predicate and the sort descriptors names properties (through
    /// relationships where it continues), each comparison of an attribute with a constant
    /// compares like types, and every `$variable` has a value.
    ///
    /// - Throws: ``ContextError/unknownEntity(_:)``, or
    ///   ``ContextError/invalidFetchRequest(part:reason:)`` naming the part at fault.
    func validate(_ request: FetchRequest<ManagedObject>) throws {
        guard let info = entities[request.entityName] else { throw ContextError.unknownEntity(request.entityName) }
        let validator = FetchValidator(model: model, entity: info.entity, variables: request.substitutionVariables)
        if let predicate = request.predicate {
            // First: the checks below, the planner and the evaluator walk the tree recursively.
            do { try predicate.checkNesting() } catch {
                throw ContextError.invalidFetchRequest(part: "predicate", reason: error.message)
            }
            if let problem = validator.problem(in: predicate.node) {
                throw ContextError.invalidFetchRequest(part: "predicate", reason: problem)
            }
        }
        for (index, descriptor) in request.sortDescriptors.enumerated() {
            if case .failure(let problem) = validator.resolve(FormatKeyPath(descriptor.key)) {
                throw ContextError.invalidFetchRequest(part: "sort descriptor \(index + 1) (\(descriptor.key))", reason: problem.text)
            }
            if let toMany = validator.toManyKey(in: FormatKeyPath(descriptor.key)) {
                // Core Data: "to-many key not allowed here".
                throw ContextError.invalidFetchRequest(
                    part: "sort descriptor \(index + 1) (\(descriptor.key))",
                    reason: "\(toMany) is a to-many relationship; a sort key must give one value per object")
            }
        }
    }

    // MARK: - Planning

    /// The plan `request` runs with (validated first).
    func explain(_ request: FetchRequest<ManagedObject>) throws -> QueryPlan {
        try validate(request)
        let planner = try self.planner(for: request)
        return try readPinned(try store().log) { (reader: borrowing LogReader) throws in try planner.plan(reader) }
    }

    /// The planner for `request`, over the store's own model: the indexes it plans are the
    /// ones the store keeps. A store opened read-only by a model that adds indexes (indexes
    /// aren't in the version hash, and only a writable open builds them) keeps the stored
    /// model's; planned from the context's model, fetches failed with "has no index".
    ///
    /// With `resolvesJoins` false, no comparison through a relationship key path is planned
    /// (3c) and every derived side is taken as the store's: for a plan run with a reader
    /// other than the one the context reads its objects with (a batch request's, of the
    /// current state, in a context pinned to a query generation).
    func planner(for request: FetchRequest<ManagedObject>, resolvesJoins: Bool = true) throws -> QueryPlanner {
        guard let info = entities[request.entityName] else { throw ContextError.unknownEntity(request.entityName) }
        let store = try? store()
        let resolver = resolvesJoins ? self : nil
        guard let stored = store?.log.model, let entity = stored.entity(named: request.entityName) else {
            return QueryPlanner(model: model, entity: info.entity, request: request, storeUUID: store?.identifier, resolver: resolver)
        }
        return QueryPlanner(model: stored, entity: entity, request: request, storeUUID: store?.identifier, resolver: resolver)
    }

    // MARK: - Joins

    func storedObjects(matching request: FetchRequest<ManagedObject>, _ reader: borrowing LogReader, cap: Int, scanLimit: Int) throws -> (objects: [StoredObjectID], plan: QueryPlan)? {
        let planner = try self.planner(for: request)
        let plan = try planner.plan(reader)
        switch plan.kind {
        case .fullScan:
            if try reader.count(of: request.entityName) > scanLimit { return nil }
        case .indexScan(let scan):
            // More entries than `cap` read only to give up: counted first, up to the cap.
            if try Self.entries(of: [scan], reader, entity: request.entityName, moreThan: cap) { return nil }
        case .indexUnion(let scans):
            if try Self.entries(of: scans, reader, entity: request.entityName, moreThan: cap) { return nil }
        case .indexOrder, .noScan:
            break
        }
        let store = try self.store()
        let execution = FetchExecution(core: self, request: request, plan: plan, storeUUID: store.identifier)
        execution.keepsRows = false
        var objects: [StoredObjectID] = []
        for match in try execution.storedMatches(reader) {
            guard objects.count < cap else { return nil }
            if let stored = match.id.storedID { objects.append(stored) }
        }
        return (objects, plan)
    }

    /// Whether `scans` hold more than `cap` entries (counting no further).
    private static func entries(of scans: [QueryPlan.IndexScan], _ reader: borrowing LogReader, entity: String, moreThan cap: Int) throws -> Bool {
        var count = 0
        for scan in scans where count <= cap {
            try scan.forEachObject(reader, of: entity) { _ in
                count += 1
                return count > cap ? .stop : .next
            }
        }
        return count > cap
    }

    func divergentObjects(of entities: [String], _ reader: borrowing LogReader, cap: Int) throws -> [StoredObjectID]? {
        var found: Set<StoredObjectID> = []
        let names = Set(entities)
        for (id, _) in retained where names.contains(id.entityName) {
            if let stored = id.storedID { found.insert(stored) }
        }
        // Unchanged registered objects: a fault without a row reads the store when it fires;
        // one holding values, or a fetched row, holds them as of a version.
        guard entities.reduce(0, { $0 + objects.count(ofEntity: $1) }) <= cap else { return nil }
        var held: [(StoredObjectID, UInt64?, ManagedObject)] = []
        for name in entities {
            objects.forEachObject(ofEntity: name) { key, object in
                guard retained[object.objectID] == nil else { return }
                if object.hasCommittedValues {
                    held.append((StoredObjectID(entity: name, primaryKey: key), object.version, object))
                } else if object.hasRow {
                    held.append((StoredObjectID(entity: name, primaryKey: key), object.rowVersion, object))
                }
            }
        }
        let storeUUID = try store().identifier
        for (id, version, object) in held {
            // Its own record as of the store's version, and no derived side it holds that
            // another writer's change of a referrer made stale (which leaves the version).
            if let version, try reader.version(of: id) == version, try !holdsStaleDerivedSide(object, id, reader, storeUUID: storeUUID) {
                continue
            }
            found.insert(id)
        }
        return found.count <= cap ? found.sorted() : nil
    }

    func staleDerivedSides(_ relationships: Set<String>, of entities: [String], _ reader: borrowing LogReader, cap: Int) throws -> Set<String> {
        // The objects holding one of the sides (values, or a fetched row, with it).
        var held: [(StoredObjectID, ManagedObject)] = []
        for name in entities {
            objects.forEachObject(ofEntity: name) { key, object in
                guard object.hasCommittedValues || object.hasRow else { return }
                let holds = relationships.contains { relationship in
                    guard let property = object.info.properties[relationship] else { return false }
                    if object.hasCommittedValues { return object.committedValue(property) != nil }
                    return object.fastRow?[property] != nil || object.storedRow?[relationship] != nil
                }
                if holds { held.append((StoredObjectID(entity: name, primaryKey: key), object)) }
            }
        }
        // Too many to check: each may be stale.
        guard held.count <= cap else { return relationships }
        let storeUUID = try store().identifier
        var stale: Set<String> = []
        for (id, object) in held {
            for name in relationships.subtracting(stale) {
                guard let property = object.info.properties[name] else { continue }
                if try holdsStaleDerivedSide(object, id, reader, storeUUID: storeUUID, only: property) { stale.insert(name) }
            }
            if stale == relationships { break }
        }
        return stale
    }

    /// Whether `object` (the stored object `id`) holds a derived relationship side — read
    /// from the store's references and kept with its committed values or its fetched row —
    /// other than the store's, as `reader` reads it: another writer changed a referrer,
    /// which leaves the object's own record and version as they were. Only `property`
    /// when given; a side not held reads the store when used.
    func holdsStaleDerivedSide(
        _ object: ManagedObject, _ id: StoredObjectID, _ reader: borrowing LogReader, storeUUID: UUID, only property: PropertyInfo? = nil
    ) throws -> Bool {
        for property in property.map({ [$0] }) ?? object.info.propertyList where property.isRelationship && !property.isRecorded && !property.isTransient {
            let held: PropertyValue?
            if object.hasCommittedValues {
                held = object.committedValue(property)
            } else if let row = object.fastRow {
                held = row[property]
            } else {
                held = object.storedRow?[property.name]
            }
            guard let held else { continue }
            // A side the store can't read (another model version's) is taken as stale.
            guard let related = try? reader.related(id, property.name) else { return true }
            let stored = PropertyValue.related(related, for: property, store: storeUUID)
            // An unordered side's members in any order (the store's are sorted).
            if !property.isOrdered, case .toMany(let a) = stored, case .toMany(let b) = held {
                if a.count != b.count || Set(a) != Set(b) { return true }
            } else if stored != held {
                return true
            }
        }
        return false
    }

    // MARK: - Fetching

    /// The managed objects `request` selects: store rows found by the plan, merged with the
    /// context's pending changes (when `includesPendingChanges`), filtered by the predicate
    /// and the in-memory filter, sorted, offset and limited.
    func fetchObjects(_ request: FetchRequest<ManagedObject>, judgedRows: JudgedRows? = nil) throws -> [ManagedObject] {
        var savedState: StoredState?
        return try fetchObjects(request, savedState: &savedState, judgedRows: judgedRows)
    }

    /// ``fetchObjects(_:)``, giving the saved state the fetch read related rows through
    /// (without pending changes, from the store), pinned to the fetch's snapshot: a
    /// dictionary fetch reads its rows' values through it, as the predicate read them.
    /// `judgedRows`, when given, gets the stored row each loaded result holding values of
    /// another version (stale) was judged and sorted by (``JudgedRows``).
    func fetchObjects(
        _ request: FetchRequest<ManagedObject>, savedState: inout StoredState?, judgedRows: JudgedRows? = nil
    ) throws -> [ManagedObject] {
        // No processPendingChanges here: a fetch must not split the undo group it runs in.
        try validate(request)
        // A child context sees its parent's current state, not the store's.
        if let parent = context?.parent { return try fetchThroughParent(request, parent: parent) }
        let planner = try self.planner(for: request)
        let store = try self.store()
        // A context holding no objects has none to find: each result is made, unlooked-up
        // (one fetch never names an object twice).
        let knewNone = objects.isEmpty && retained.isEmpty
        var plain: [ManagedObject]?
        let (matches, order) = try readPinned(store.log) { (reader: borrowing LogReader) throws -> ([FetchExecution.Match], [Int]) in
            let plan = try planner.plan(reader)
            let execution = FetchExecution(core: self, request: request, plan: plan, storeUUID: store.identifier)
            execution.storedState?.pin(to: reader)
            savedState = execution.storedState
            if execution.isPlain, try execution.pendingMatches(reader).isEmpty {
                plain = try execution.plainObjects(reader, lookUp: !knewNone)
                return ([], [])
            }
            return try execution.run(reader)
        }
        if let plain { return plain }
        // The class of each entity's objects, looked up once per fetch, not per object.
        var classes: [(info: EntityInfo, type: ManagedObject.Type)] = []
        return order.map { index in
            let object = FetchExecution.Match.materialize(matches, index, self, lookUp: !knewNone) { info in
                if let known = classes.first(where: { $0.info === info }) { return known.type }
                let type = self.coordinator.objectClass(for: info)
                classes.append((info, type))
                return type
            }
            if let judgedRows, let row = matches[index].row { judgedRows.note(object, row: row, version: matches[index].rowVersion) }
            return object
        }
    }

    /// The IDs of the objects `request` selects, in fetch order — what ``fetchObjects(_:)``
    /// gives, mapped to IDs — without making a managed object or keeping a row for a stored
    /// object (only a relationship key path or an in-memory filter makes one, as a fetch
    /// does): each match holds its ID and sort keys, so a large fetch costs tens of bytes a
    /// result, not a row and an object. A whole entity in store order reads only the keys.
    func fetchIDs(_ request: FetchRequest<ManagedObject>) throws -> [ManagedObjectID] {
        try validate(request)
        if let parent = context?.parent { return try fetchThroughParent(request, parent: parent).map(\.objectID) }
        let planner = try self.planner(for: request)
        let store = try self.store()
        return try readPinned(store.log) { (reader: borrowing LogReader) throws -> [ManagedObjectID] in
            let plan = try planner.plan(reader)
            let execution = FetchExecution(core: self, request: request, plan: plan, storeUUID: store.identifier)
            execution.keepsRows = false
            if execution.isPlain, try execution.pendingMatches(reader).isEmpty { return try execution.plainIDs(reader) }
            let (matches, order) = try execution.run(reader)
            return order.map { matches[$0].id }
        }
    }

    /// The number of objects `request` selects (offset and limit applied), counted without
    /// creating managed objects: the store's own count for a whole entity, index entries
    /// when the index answers the predicate exactly, otherwise rows judged one by one —
    /// corrected for the context's pending changes.
    func countObjects(_ request: FetchRequest<ManagedObject>) throws -> Int {
        try validate(request)
        if request.memoryFilter != nil || context?.parent != nil { return try fetchObjects(request).count }
        var unsorted = request
        unsorted.sortDescriptors = []
        let planner = try self.planner(for: unsorted)
        let store = try self.store()
        let total = try readPinned(store.log) { (reader: borrowing LogReader) throws -> Int in
            let plan = try planner.plan(reader)
            let execution = FetchExecution(core: self, request: unsorted, plan: plan, storeUUID: store.identifier)
            return try execution.count(reader)
        }
        let afterOffset = max(0, total - max(0, request.fetchOffset))
        return request.fetchLimit > 0 ? min(afterOffset, request.fetchLimit) : afterOffset
    }
}

/// The stored rows a fetch judged and sorted its stale results by: loaded objects (holding
/// committed values) without pending changes whose values are of another version than the
/// row the fetch read — another context saved, nothing merged or refreshed here. The fetch
/// returns them with the values they hold (unless `shouldRefreshRefetchedObjects`); a results
/// controller's `performFetch()` keys and sections them by these rows, so its order and
/// sections are the fetch's (spec 0006 §21.1.3). Faults take the fetched row themselves.
final class JudgedRows {
    private(set) var rows: [ObjectIdentifier: (row: PropertyRow, version: UInt64?)] = [:]

    func note(_ object: ManagedObject, row: PropertyRow, version: UInt64?) {
        guard object.hasCommittedValues, version == nil || object.version != version else { return }
        rows[ObjectIdentifier(object)] = (row, version)
    }

    /// `object` read as the fetch judged it: by the row, while it still holds the values it
    /// held then (no pending changes, not refreshed since: a `shouldRefreshRefetchedObjects`
    /// fetch refreshed it, and it is read by its new values); nil otherwise.
    func view(of object: ManagedObject) -> FetchedRowView? {
        guard !rows.isEmpty, let (row, version) = rows[ObjectIdentifier(object)], object.isReadAsStored, object.hasCommittedValues,
            version == nil || object.version != version
        else { return nil }
        return FetchedRowView(object: object, row: row)
    }
}

private extension PropertyValue {
    /// A to-one or to-many value (not an attribute, not an invalid value).
    var isRelated: Bool {
        switch self {
        case .toOne, .toMany: true
        case .attribute, .invalid: false
        }
    }
}

/// A stale object read by the stored row its fetch judged it by (``JudgedRows``), as
/// ``StoredRowSubject`` reads that row: its persistent attributes, to-ones and recorded
/// to-manys from the row — one the row doesn't hold is nil (a to-many empty), as the record
/// holds no value for it; related objects read as ``JudgedObjectView`` reads them — anything
/// else (a transient, a derived side, a built-in key) as ``JudgedObjectView`` reads the object.
struct FetchedRowView: KeyValueCoding {
    let object: ManagedObject
    let row: PropertyRow

    func value(forKey key: String) -> Any? {
        guard let property = object.info.properties[key], !property.isTransient, property.isRecorded || !property.isRelationship else {
            return JudgedObjectView(object).value(forKey: key)
        }
        switch row[property] {
        case .attribute(let value)?: return value?.boxed
        case let value? where value.isRelated: return JudgedObjectView.reading(value: object.externalValue(value, ordered: property.isOrdered))
        case _?: return JudgedObjectView(object).value(forKey: key)
        // Not held: the record has no value for it (before, the held value was read: a
        // person another context took off its team sorted by the team it held).
        case nil: return property.isToMany ? JudgedObjectView.reading([], ordered: property.isOrdered) : nil
        }
    }
}

// MARK: - Running a plan

/// One fetch against one snapshot: which objects match, in which order. Managed objects are
/// created only for the results (or when a relationship or the in-memory filter needs one).
final class FetchExecution {
    let core: ContextCore
    let request: FetchRequest<ManagedObject>
    let plan: QueryPlan
    let storeUUID: UUID
    /// The concrete entities fetched, in store order (their position decides ties), with
    /// their property tables.
    let entities: [(name: String, info: EntityInfo)]
    let variables: [String: Any]
    let pending: Bool
    /// Objects with unsaved changes (or deleted) whose stored rows the plan skips; they are
    /// judged by their current values instead. Empty without pending changes.
    let dirty: [StoredObjectID: ManagedObject]
    /// Without pending changes, the store's saved state that key paths through
    /// relationships read (spec 0008, Pending changes 3); nil with them.
    let storedState: StoredState?
    /// The sort descriptors' values of every match, `request.sortDescriptors.count` per
    /// match, read once (a sort compares them many times).
    @exclusivity(unchecked) var sortKeys: [SortKey] = []
    /// The properties of each record layout read so far (``StoredFields/layout``), by code.
    @exclusivity(unchecked) var layouts: [RowLayout] = []
    /// Whether a match keeps the stored row it was judged by, for the object made from it
    /// (false for a fetch of IDs: the row is dropped once judged and its sort keys read).
    var keepsRows = true

    /// The properties of one record layout (``StoredFields/layout``) of an entity, by code,
    /// and their slots in the entity's rows (-1: none).
    final class RowLayout {
        let layout: UnsafeRawPointer?
        let info: EntityInfo
        let properties: [PropertyInfo?]
        let slots: [Int]

        init(layout: UnsafeRawPointer?, info: EntityInfo, properties: [PropertyInfo?]) {
            self.layout = layout
            self.info = info
            self.properties = properties
            slots = properties.map { $0?.slot ?? -1 }
        }
    }
    /// Whether each sort descriptor's key is a single key (no dots, no collection operator).
    let simpleSortKeys: [Bool]

    /// Where a result sits in store order, which decides ties of the sort: stored objects by
    /// entity then primary key, then unsaved inserts in insertion order, then objects
    /// restored by undo.
    struct Position: Comparable {
        var group: Int
        var major: Int
        var minor: UInt64

        static func < (a: Position, b: Position) -> Bool { (a.group, a.major, a.minor) < (b.group, b.major, b.minor) }
    }

    /// An object that matched (sorts reorder indexes, so a value moves only at the end).
    struct Match {
        let position: Position
        let id: ManagedObjectID
        let info: EntityInfo
        /// The stored row it was judged by (nil for an object judged by its current values).
        let row: PropertyRow?
        let object: ManagedObject?
        /// Where its sort keys start in `sortKeys`.
        let keys: Int
        /// The store version of `row` (the sequence of the object's last change), for
        /// optimistic locking once the fault fires from it.
        let rowVersion: UInt64?

        init(
            position: Position, id: ManagedObjectID, info: EntityInfo, row: PropertyRow?, object: ManagedObject?, keys: Int,
            rowVersion: UInt64? = nil
        ) {
            self.position = position
            self.id = id
            self.info = info
            self.row = row
            self.object = object
            self.keys = keys
            self.rowVersion = rowVersion
        }

        /// The managed object of `matches[index]`: registered, or a fault holding the fetched
        /// row. (Static, reading the match's fields in place: a method would copy the match.)
        static func materialize(
            _ matches: [Match], _ index: Int, _ core: ContextCore, lookUp: Bool, objectClass: (EntityInfo) -> ManagedObject.Type
        ) -> ManagedObject {
            if let object = matches[index].object { return object }
            let id = matches[index].id, info = matches[index].info
            let made = (lookUp ? core.registered(id) : nil) ?? core.makeObject(id, info: info, type: objectClass(info))
            if !made.hasCommittedValues, let row = matches[index].row {
                made.keepRow(row)
                made.rowVersion = matches[index].rowVersion
            }
            return made
        }
    }

    /// `readsCurrentState`: related rows without pending changes are read as the store is
    /// now, whatever the context's query generation (a batch request's selection).
    init(core: ContextCore, request: FetchRequest<ManagedObject>, plan: QueryPlan, storeUUID: UUID, readsCurrentState: Bool = false) {
        self.core = core
        self.request = request
        self.plan = plan
        self.storeUUID = storeUUID
        let names = request.includesSubentities ? core.model.selfAndSubentityNames(of: request.entityName) : [request.entityName]
        entities = names.compactMap { name in
            guard let info = core.entities[name], !info.entity.isAbstract else { return nil }
            return (name, info)
        }
        variables = request.substitutionVariables.mapValues { $0.anyValue as Any }
        simpleSortKeys = request.sortDescriptors.map { !$0.key.contains(".") && !$0.key.hasPrefix("@") }
        pending = request.includesPendingChanges
        var dirty: [StoredObjectID: ManagedObject] = [:]
        if pending {
            let names = Set(entities.map(\.name))
            for (id, object) in core.retained where names.contains(id.entityName) {
                guard let stored = id.storedID else { continue }
                if object.isInsertedFlag || object.isDeletedFlag || !object.changes.isEmpty || core.restored.contains(id) {
                    dirty[stored] = object
                }
            }
        }
        self.dirty = dirty
        storedState = pending ? nil : StoredState(core: core, storeUUID: storeUUID, readsCurrentState: readsCurrentState)
    }

    /// The entity's position in store order and its property table, if it is fetched.
    func entity(_ name: String) -> (position: Int, info: EntityInfo)? {
        for (index, entry) in entities.enumerated() where entry.name == name { return (index, entry.info) }
        return nil
    }

    /// Whether the stored row of `id` is skipped: its object has pending changes.
    func isDirty(_ id: StoredObjectID) -> Bool { !dirty.isEmpty && dirty[id] != nil }

    // MARK: Judging

    func matches(_ subject: Any) throws -> Bool {
        guard let predicate = request.predicate else { return true }
        return try predicate.evaluate(with: subject, substitutionVariables: variables)
    }

    /// The row as the context holds values.
    func row(_ stored: StoredObject, _ info: EntityInfo) -> PropertyRow {
        var row = PropertyRow(info: info)
        for (key, value) in stored.values {
            guard let property = info.properties[key] else { continue }
            row[property] = core.propertyValue(value, property, storeUUID: storeUUID)
        }
        return row
    }

    /// The row as the context holds values, from values by property code: each code's
    /// property (and slot) is looked up once per layout, not per object.
    func row(_ fields: StoredFields, _ info: EntityInfo) -> PropertyRow {
        let layout = rowLayout(fields.layout, info) { fields.names }
        var row = PropertyRow(info: info)
        let count = min(layout.slots.count, fields.values.count)
        row.values.withUnsafeMutableBufferPointer { slots in
            fields.values.withUnsafeBufferPointer { values in
                for code in 0..<count { fill(&slots, layout, code, values[code]) }
            }
        }
        return row
    }

    /// The row of values by property code (`names`' order), taken out of `values` (left nil):
    /// what ``row(_:_:)`` makes of stored fields, without copying each value and releasing it again.
    func row(taking values: inout [LogValue?], _ names: [String], _ info: EntityInfo) -> PropertyRow {
        let identity = names.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
        return row(taking: &values, rowLayout(identity, info) { names })
    }

    /// ``row(taking:_:_:)`` with the records' layout found already (a plain fetch finds it
    /// once per entity: every record of an entity shares its names).
    func row(taking values: inout [LogValue?], _ layout: RowLayout) -> PropertyRow {
        var row = PropertyRow(info: layout.info)
        let count = min(layout.slots.count, values.count)
        row.values.withUnsafeMutableBufferPointer { slots in
            values.withUnsafeMutableBufferPointer { values in
                for code in 0..<count { fill(&slots, layout, code, values[code].take()) }
            }
        }
        return row
    }

    /// The layout of records whose property names are `identity` (made from `names` the
    /// first time it is seen).
    func rowLayout(_ identity: UnsafeRawPointer?, _ info: EntityInfo, _ names: () -> [String]) -> RowLayout {
        if let known = layouts.first(where: { $0.layout == identity && $0.info === info }) { return known }
        let layout = RowLayout(layout: identity, info: info, properties: names().map { info.properties[$0] })
        layouts.append(layout)
        return layout
    }

    /// Puts the value of property code `code` in its slot of a new row (`properties` are
    /// `info`'s own: their slots are the row's). The slot is initialized, not assigned: a new
    /// row's slots are nil, which holds nothing to release, and each property has its own
    /// slot, so none is filled twice (assigning called the optional value's outlined destroy
    /// on the nil first).
    @inline(__always)
    private func fill(_ slots: inout UnsafeMutableBufferPointer<PropertyValue?>, _ layout: RowLayout, _ code: Int, _ value: LogValue?) {
        let slot = layout.slots[code]
        guard slot >= 0 else { return }
        switch value {
        case nil: return
        case .attribute(let value)?: slots.initializeElement(at: slot, to: .attribute(value))
        case .reference(let id)?: slots.initializeElement(at: slot, to: toOne(id))
        case let value?:
            if let property = layout.properties[code] { slots[slot] = core.propertyValue(value, property, storeUUID: storeUUID) }
        }
    }

    /// Recent to-one values by the low bits of their key: rows naming the same object (every
    /// member of a team names the team) share one value instead of boxing one each.
    @exclusivity(unchecked) var recentToOnes = [(id: StoredObjectID, value: PropertyValue)?](repeating: nil, count: 64)

    /// The to-one value naming stored object `id` (``ContextCore/propertyValue(_:_:storeUUID:)``'s).
    func toOne(_ id: StoredObjectID) -> PropertyValue {
        let index = Int(truncatingIfNeeded: id.primaryKey & 63)
        if let known = recentToOnes[index], known.id == id { return known.value }
        let value = PropertyValue.toOne(.permanent(id, store: storeUUID))
        recentToOnes[index] = (id, value)
        return value
    }

    /// Records the sort keys of a match; returns where they start.
    func recordSortKeys(_ subject: any KeyValueCoding) -> Int {
        let start = sortKeys.count
        for (descriptor, simple) in zip(request.sortDescriptors, simpleSortKeys) {
            // A one-component key path reads the key itself (what walking the path does).
            sortKeys.append(SortKey(simple ? subject.value(forKey: descriptor.key) : subject.value(forKeyPath: descriptor.key)))
        }
        return start
    }

    /// Records the sort keys of a stored row; returns where they start. A stored attribute
    /// named by a one-component key is read from the row as it is (no key-value coding);
    /// anything else goes through the row's subject, made when first needed.
    func recordSortKeys(
        _ values: PropertyRow, _ info: EntityInfo, _ subject: inout StoredRowSubject?, _ id: ManagedObjectID, version: UInt64
    ) -> Int {
        let start = sortKeys.count
        for (descriptor, simple) in zip(request.sortDescriptors, simpleSortKeys) {
            if simple, let property = info.property(named: descriptor.key), case .attribute = property.kind, !property.isTransient {
                switch values[property] {
                case .attribute(let value)?:
                    sortKeys.append(value.map(SortKey.init(attribute:)) ?? .null)
                    continue
                case nil:
                    sortKeys.append(.null)
                    continue
                default: break
                }
            }
            let made = subject ?? StoredRowSubject(id: id, info: info, values: values, core: core, version: version, storedState: storedState)
            subject = made
            sortKeys.append(SortKey(simple ? made.value(forKey: descriptor.key) : made.value(forKeyPath: descriptor.key)))
        }
        return start
    }

    /// A stored object judged by its stored row; nil unless it matches. Rows of objects
    /// with pending changes are skipped (they are judged by `pendingMatches`). Only
    /// `rowPredicate` is evaluated: what the plan's index scan didn't already answer.
    func judge(_ stored: StoredObject, by rowPredicate: FormatPredicate?) throws -> Match? {
        guard let (major, info) = entity(stored.id.entity), !(pending && isDirty(stored.id)) else { return nil }
        return try judge(stored.id, version: stored.version, row(stored, info), info, major: major, by: rowPredicate)
    }

    /// A stored object read by property code, judged as ``judge(_:by:)`` judges it.
    func judge(_ fields: StoredFields, by rowPredicate: FormatPredicate?) throws -> Match? {
        guard let (major, info) = entity(fields.id.entity), !(pending && isDirty(fields.id)) else { return nil }
        return try judge(fields.id, version: fields.version, row(fields, info), info, major: major, by: rowPredicate)
    }

    func judge(
        _ storedID: StoredObjectID, version: UInt64, _ values: PropertyRow, _ info: EntityInfo, major: Int, by rowPredicate: FormatPredicate?
    ) throws -> Match? {
        let id = ManagedObjectID.permanent(storedID, store: storeUUID)
        var subject: StoredRowSubject?
        if let rowPredicate {
            let made = StoredRowSubject(id: id, info: info, values: values, core: core, version: version, storedState: storedState)
            subject = made
            let matched = try rowPredicate.evaluate(with: made, substitutionVariables: variables)
            try storedState?.check()
            guard matched else { return nil }
        }
        var object = subject?.object
        if let filter = request.memoryFilter {
            let made = subject ?? StoredRowSubject(id: id, info: info, values: values, core: core, version: version, storedState: storedState)
            subject = made
            let materialized = made.materialize()
            guard try filter(materialized) else { return nil }
            object = materialized
        }
        let keys = recordSortKeys(values, info, &subject, id, version: version)
        try storedState?.check()
        if object == nil { object = subject?.object }
        return Match(
            position: Position(group: 0, major: major, minor: storedID.primaryKey), id: id, info: info, row: keepsRows ? values : nil,
            object: object,
            keys: keys, rowVersion: version)
    }


    /// Judges an object with pending changes by its current values.
    func judgePending(_ object: ManagedObject, _ position: Position) throws -> Match? {
        // Read in memory, its related objects each by its own state (spec 0008, Evaluation).
        let view = JudgedObjectView(object)
        guard try matches(view) else { return nil }
        if let filter = request.memoryFilter, try !filter(object) { return nil }
        return Match(position: position, id: object.objectID, info: object.info, row: nil, object: object, keys: recordSortKeys(view))
    }

    /// The context's unsaved objects that match: changed objects the store still holds,
    /// unsaved inserts, and objects restored by undo. Deleted objects never match.
    func pendingMatches(_ reader: borrowing LogReader) throws -> [Match] {
        guard pending else { return [] }
        var result: [Match] = []
        for (stored, object) in dirty where !object.isDeletedFlag {
            guard let (major, _) = entity(stored.entity), try reader.contains(stored) else { continue }
            if let match = try judgePending(object, Position(group: 0, major: major, minor: stored.primaryKey)) { result.append(match) }
        }
        var inserted: Set<ManagedObjectID> = []
        for (index, id) in core.insertionOrder.enumerated() where entity(id.entityName) != nil {
            inserted.insert(id)
            if let stored = id.storedID, try reader.contains(stored) { continue }
            guard let object = core.registered(id), !object.isDeletedFlag else { continue }
            if let match = try judgePending(object, Position(group: 1, major: index, minor: 0)) { result.append(match) }
        }
        var restoredIndex = 0
        for (id, object) in core.retained where core.restored.contains(id) && !inserted.contains(id) && entity(id.entityName) != nil {
            if let stored = id.storedID, try reader.contains(stored) { continue }
            guard !object.isDeletedFlag else { continue }
            restoredIndex += 1
            if let match = try judgePending(object, Position(group: 2, major: restoredIndex, minor: 0)) { result.append(match) }
        }
        return result
    }

    // MARK: Reading the store

    /// Whether an object found in the index of the fetched entity is fetched: the index
    /// holds the entity's sub-entities, left out with `includesSubentities = false`.
    func inScope(_ id: StoredObjectID) -> Bool {
        request.includesSubentities || id.entity == request.entityName
    }

    /// The stored objects the plan reads, judged (rows of changed objects skipped).
    func storedMatches(_ reader: borrowing LogReader) throws -> [Match] {
        storedState?.pin(to: reader)
        switch plan.kind {
        case .noScan:
            return []
        case .fullScan:
            var result: [Match] = []
            for (name, _) in entities {
                try reader.forEachFields(of: name, includingSubentities: false) { fields in
                    if let match = try judge(fields, by: request.predicate) { result.append(match) }
                    return .next
                }
            }
            return result
        case .indexScan(let scan) where scan.joined != nil:
            return try joinMatches(reader, scan)
        case .indexScan(let scan):
            return try scanMatches(reader, [scan], by: plan.filter)
        case .indexUnion(let scans):
            // The planner's filter for a union keeps what not every member answers.
            return try scanMatches(reader, scans, by: plan.filter)
        case .indexOrder(let scan, let descending, let stopsAfter, let fallback, let fallbackAfter):
            if let walked = try walk(reader, scan, descending: descending, stopsAfter: stopsAfter, budget: fallback == nil ? 0 : fallbackAfter) {
                return walked
            }
            // The fallback scan doesn't answer what the walked index did: the whole predicate.
            return try scanMatches(reader, fallback.map { [$0] } ?? [], by: request.predicate)
        }
    }

    /// The stored objects in the scans' ranges (each once), judged by `rowPredicate`: the
    /// plan's residual filter when the scans are the plan's, which answer the rest exactly.
    func scanMatches(_ reader: borrowing LogReader, _ scans: [QueryPlan.IndexScan], by rowPredicate: FormatPredicate?) throws -> [Match] {
        var ids: [StoredObjectID] = []
        var seen: Set<StoredObjectID> = []
        // One index's ranges are disjoint; only a union of indexes can find an object twice.
        let unique = scans.count > 1
        for scan in scans {
            // Records that aren't there are skipped by the read below.
            try scan.forEachObject(reader, of: plan.entityName, existing: false) { id in
                guard inScope(id), !(pending && isDirty(id)) else { return .next }
                if unique { guard seen.insert(id).inserted else { return .next } }
                ids.append(id)
                return .next
            }
        }
        var result: [Match] = []
        result.reserveCapacity(ids.count)
        // In key order, records sharing leaf pages are read together (the matches are put in
        // store or sort order afterwards either way).
        if ids.count > 1, let entity = ids.first?.entity, ids.allSatisfy({ $0.entity == entity }) {
            ids.sort { $0.primaryKey < $1.primaryKey }
        } else {
            ids.sort()
        }
        try reader.forEachFields(ids) { fields in
            if let match = try judge(fields, by: rowPredicate) { result.append(match) }
        }
        return result
    }

    /// The stored objects referring to a join's targets (spec 0008 Planner 3c), judged: one
    /// referring to a target the context holds as the store does satisfies the join's
    /// comparison — its related object (unchanged here, as the referrer is) is that
    /// target, which satisfies the rest of the path — so only the rest of the filter is
    /// tested on it; one reached only from a changed target is judged by the whole filter.
    /// (Before, every referrer was judged by the whole filter: `ANY members.email == %@`
    /// read every member of the team found.)
    func joinMatches(_ reader: borrowing LogReader, _ scan: QueryPlan.IndexScan) throws -> [Match] {
        guard let targets = scan.targets, let join = scan.joined else { return [] }
        let rest = plan.filter.flatMap { QueryPlanner.residual($0.node, answered: [join.comparison]).map(FormatPredicate.init) }
        let changed = Set(join.changedTargets)
        // No target changed here (the usual case): every referrer satisfies the comparison.
        if changed.isEmpty || !targets.contains(where: changed.contains) { return try scanMatches(reader, [scan], by: rest) }
        var proven: [StoredObjectID: Bool] = [:]
        for target in targets {
            let clean = !changed.contains(target)
            try reader.forEachReferrer(to: target, through: scan.attribute, of: plan.entityName) { id in
                guard inScope(id), !(pending && isDirty(id)) else { return .next }
                if clean { proven[id] = true } else if proven[id] == nil { proven[id] = false }
                return .next
            }
        }
        var ids = Array(proven.keys)
        if ids.count > 1, let entity = ids.first?.entity, ids.allSatisfy({ $0.entity == entity }) {
            ids.sort { $0.primaryKey < $1.primaryKey }
        } else {
            ids.sort()
        }
        var result: [Match] = []
        result.reserveCapacity(ids.count)
        try reader.forEachFields(ids) { fields in
            if let match = try judge(fields, by: proven[fields.id] == true ? rest : plan.filter) { result.append(match) }
        }
        return result
    }

    /// Walks the sort attribute's index in sort order, stopping once `stopsAfter` objects
    /// matched and the walk has passed the last of them (ties included). Nil when the walk
    /// read more than `budget` objects (0: no budget).
    func walk(
        _ reader: borrowing LogReader, _ scan: QueryPlan.IndexScan, descending: Bool, stopsAfter: Int, budget: Int
    ) throws -> [Match]? {
        let attribute = scan.attribute
        var result: [Match] = []
        // The extreme key and value of the matches so far, in walk order.
        var extremeKey: [UInt8] = []
        var extremeValue: Any?
        var reads = 0
        var finished = false
        var exceeded = false
        let ranges = Self.sortOrderRanges(scan.ranges, type: core.entities[plan.entityName]?.entity.attributesByName[attribute]?.attributeType)
        for range in descending ? ranges.reversed() : ranges {
            try reader.scanIndex(
                entity: plan.entityName, properties: scan.properties, prefix: scan.prefix, range: range, reverse: descending
            ) { id in
                guard inScope(id), !(pending && isDirty(id)) else { return .next }
                // By property code (no dictionary of the record's values).
                guard let stored = try reader.fields(id) else { return .next }
                reads += 1
                if budget > 0 && reads > budget {
                    exceeded = true
                    return .stop
                }
                var attributeValue: AttributeValue?
                if let slot = stored.names.firstIndex(of: attribute), case .attribute(let value)? = stored.values[slot] { attributeValue = value }
                let key = Self.sortOrderKey(attributeValue)
                let value = attributeValue?.anyValue
                if result.count >= stopsAfter && !result.isEmpty {
                    // Every later entry is at least this far along, both by key (so cut
                    // long values sharing a prefix can't come back) and by value.
                    let pastKey = descending ? key.lexicographicallyPrecedes(extremeKey) : extremeKey.lexicographicallyPrecedes(key)
                    let order = FetchSortDescriptor.compareValues(value, extremeValue, caseInsensitive: false)
                    if pastKey && order == (descending ? .orderedAscending : .orderedDescending)
                        && Self.keyClears(attributeValue, extremeValue, descending: descending)
                    {
                        finished = true
                        return .stop
                    }
                }
                // The walked ranges answer what the plan left out of its filter.
                guard let match = try judge(stored, by: plan.filter) else { return .next }
                if result.isEmpty {
                    extremeKey = key
                    extremeValue = value
                } else {
                    if descending ? key.lexicographicallyPrecedes(extremeKey) : extremeKey.lexicographicallyPrecedes(key) { extremeKey = key }
                    if FetchSortDescriptor.compareValues(value, extremeValue, caseInsensitive: false) == (descending ? .orderedAscending : .orderedDescending) {
                        extremeValue = value
                    }
                }
                result.append(match)
                return .next
            }
            if finished || exceeded { break }
        }
        return exceeded ? nil : result
    }

    /// Whether every index entry from `value`'s key on (in walk order) holds a value past
    /// `extreme`. For a decimal the key is its double, which Foundation's conversion rounds
    /// once per power of ten and so doesn't always keep the decimals' order (0.9999999999999999e-100
    /// gets a higher key than 0.99999999999999995e-100): a later entry's decimal can be a few
    /// units in the last place of its key before `extreme`, so the key must be clear of
    /// `extreme`'s by a margin (the planner's, spec 0008). Before, a limited sort stopped at
    /// the first larger decimal and missed a smaller one keyed after it.
    static func keyClears(_ value: AttributeValue?, _ extreme: Any?, descending: Bool) -> Bool {
        guard case .decimal(let decimal)? = value, let extreme = extreme as? Decimal else { return true }
        let key = NSDecimalNumber(decimal: decimal).doubleValue
        let bound = NSDecimalNumber(decimal: extreme).doubleValue
        let margin = Swift.max(abs(bound) * 1e-9, Double.leastNormalMagnitude)
        return descending ? key < bound - margin : key > bound + margin
    }

    /// The index ranges of a walk in sort order. Keys of real values (doubles, floats,
    /// decimals, and dates by their interval) hold -NaN below -∞ and NaN above +∞ (spec 0004 §5), but a sort puts every
    /// NaN after every number: a real range open at an end is walked as its numbers (up to
    /// the infinities), then its NaNs above +∞, then its NaNs below -∞.
    static func sortOrderRanges(_ ranges: [IndexRange], type: AttributeType?) -> [IndexRange] {
        guard let type, [.double, .float, .decimal, .date].contains(type) else { return ranges }
        // Dates are keyed as reals are, under their own tag: their infinities are dates.
        func infinity(_ sign: Double) -> AttributeValue {
            type == .date ? .date(Date(timeIntervalSinceReferenceDate: sign * .infinity)) : .double(sign * .infinity)
        }
        var numbers: [IndexRange] = []
        var nans: [IndexRange] = []
        for range in ranges {
            guard !range.matchesNil, range.lower == nil || range.upper == nil else {
                numbers.append(range)
                continue
            }
            numbers.append(
                IndexRange(
                    lower: range.lower ?? infinity(-1), includesLower: range.lower == nil || range.includesLower,
                    upper: range.upper ?? infinity(1), includesUpper: range.upper == nil || range.includesUpper))
            if range.upper == nil { nans.append(IndexRange(lower: infinity(1), includesLower: false)) }
            if range.lower == nil { nans.append(IndexRange(upper: infinity(-1), includesUpper: false)) }
        }
        return numbers + nans
    }

    /// The index key of `value` as the walk compares keys: NaNs of any sign share the
    /// highest real key, so keys never decrease along a walk in sort order (the order of
    /// ``sortOrderRanges(_:type:)``).
    static func sortOrderKey(_ value: AttributeValue?) -> [UInt8] {
        let key = IndexKeyEncoding.encode(value)
        let isNaN: Bool
        switch value {
        case .double(let v)?: isNaN = v.isNaN
        case .float(let v)?: isNaN = v.isNaN
        case .decimal(let v)?: isNaN = v.isNaN || NSDecimalNumber(decimal: v).doubleValue.isNaN
        case .date(let v)?: isNaN = v.timeIntervalSinceReferenceDate.isNaN
        default: isNaN = false
        }
        guard isNaN, let tag = key.first else { return key }
        return [tag] + [UInt8](repeating: 0xFF, count: 8)
    }

    // MARK: Plain fetches

    /// Whether the fetch reads every stored object of its entities as it is, in store order:
    /// a full scan with no predicate, in-memory filter, sort, offset or limit, and no object
    /// with pending changes among them (unsaved inserts are checked separately:
    /// ``pendingMatches(_:)``).
    var isPlain: Bool {
        plan.kind == .fullScan && request.predicate == nil && request.memoryFilter == nil && request.sortDescriptors.isEmpty
            && request.fetchOffset == 0 && request.fetchLimit == 0 && dirty.isEmpty
    }

    /// The objects of a plain fetch (``isPlain``), in store order, made (or found, with
    /// `lookUp`) as their records are read: no matches, no order, no row kept twice. What
    /// ``run(_:)`` and ``ContextCore/fetchObjects(_:)`` give for such a fetch.
    func plainObjects(_ reader: borrowing LogReader, lookUp: Bool) throws -> [ManagedObject] {
        var result: [ManagedObject] = []
        for (name, info) in entities {
            let type = core.coordinator.objectClass(for: info)
            // Every record of the entity has its names (the same array): the layout is found
            // for the first and kept.
            var layout: (identity: UnsafeRawPointer?, layout: RowLayout)?
            try reader.forEachFieldsInPlace(of: name, includingSubentities: false) { stored, version, names, values in
                let id = ManagedObjectID.permanent(stored, store: storeUUID)
                // `id` moves into a new object (its last use), not copied.
                let object: ManagedObject
                if lookUp, let known = core.registered(id) { object = known } else { object = core.makeObject(id, info: info, type: type) }
                if !object.hasCommittedValues {
                    let identity = names.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
                    if layout?.identity != identity { layout = (identity, rowLayout(identity, info) { names }) }
                    if let layout { object.keepRow(row(taking: &values, layout.layout)) }
                    object.rowVersion = version
                }
                result.append(object)
                return .next
            }
        }
        return result
    }

    /// The IDs of a plain fetch (``isPlain``), in store order, read from the records' keys
    /// alone: no values decoded, no objects made.
    func plainIDs(_ reader: borrowing LogReader) throws -> [ManagedObjectID] {
        var result: [ManagedObjectID] = []
        for (name, _) in entities {
            try reader.forEachObjectID(of: name, includingSubentities: false) { stored in
                result.append(ManagedObjectID.permanent(stored, store: storeUUID))
                return .next
            }
        }
        return result
    }

    // MARK: Results

    /// Every match, filtered, and the order of the results: indexes into the matches, sorted
    /// (ties in store order), offset and limited.
    func run(_ reader: borrowing LogReader) throws -> ([Match], [Int]) {
        var matches = try storedMatches(reader)
        let unsaved = try pendingMatches(reader)
        if !unsaved.isEmpty { matches += unsaved }
        let descriptors = request.sortDescriptors
        var order = Array(matches.indices)
        if let strings = singleStringSortKeys(matches) {
            // One case-sensitive string sort: plain string comparisons, no key enum copied.
            // When every string is ASCII (ordered as its bytes are), the first eight bytes
            // decide most comparisons as one integer comparison.
            let (texts, isNull) = strings
            // Fields read in place: iterating the matches would copy each one.
            let positions = matches.indices.map { matches[$0].position }
            let ascending = descriptors[0].ascending
            let prefixes = Self.asciiPrefixes(texts)
            order.sort { i, j in
                let nullI = isNull[i], nullJ = isNull[j]
                if nullI != nullJ { return ascending ? nullI : nullJ }
                if !nullI {
                    if let prefixes, prefixes[i] != prefixes[j] { return (prefixes[i] < prefixes[j]) == ascending }
                    let a = texts[i], b = texts[j]
                    if a != b { return (a < b) == ascending }
                }
                return positions[i] < positions[j]
            }
        } else if !descriptors.isEmpty {
            let count = descriptors.count
            let keys = sortKeys
            // String keys of descriptors that fold, folded once each (nil: not one), beside
            // `keys`: compared folded, in the order folding both at every comparison gives
            // (before session 30 each comparison folded both strings again).
            let folded = Self.foldedKeys(keys, matches, descriptors)
            order.sort { i, j in
                let a = matches[i].keys, b = matches[j].keys
                for index in 0..<count {
                    let result: ComparisonResult
                    if !folded.isEmpty, let x = folded[a + index], let y = folded[b + index] {
                        result = FetchSortDescriptor.compareFolded(x, y, numeric: descriptors[index].numeric)
                    } else {
                        result = SortKey.compare(
                            keys[a + index], keys[b + index], caseInsensitive: descriptors[index].caseInsensitive,
                            diacriticInsensitive: descriptors[index].diacriticInsensitive, numeric: descriptors[index].numeric)
                    }
                    if result != .orderedSame {
                        return descriptors[index].ascending ? result == .orderedAscending : result == .orderedDescending
                    }
                }
                return matches[i].position < matches[j].position
            }
        } else if plan.kind != .fullScan || unsaved.contains(where: { $0.position.group == 0 }) {
            order.sort { matches[$0].position < matches[$1].position }
        }
        if request.fetchOffset > 0 { order = Array(order.dropFirst(request.fetchOffset)) }
        if request.fetchLimit > 0 && order.count > request.fetchLimit { order = Array(order.prefix(request.fetchLimit)) }
        return (matches, order)
    }

    /// The string sort keys of the descriptors that fold strings, each folded once, at the
    /// keys' own indexes (nil for other keys); empty when no descriptor folds.
    static func foldedKeys(_ keys: [SortKey], _ matches: [Match], _ descriptors: [FetchSortDescriptor]) -> [String?] {
        let folds = descriptors.map(\.foldingOptions)
        guard folds.contains(where: { !$0.isEmpty }) else { return [] }
        var folded = [String?](repeating: nil, count: keys.count)
        for match in matches.indices {
            let start = matches[match].keys
            for (index, folding) in folds.enumerated() where !folding.isEmpty {
                if case .string(let text) = keys[start + index] { folded[start + index] = FetchSortDescriptor.fold(text, folding) }
            }
        }
        return folded
    }

    /// The first eight UTF-8 bytes of each string as a big-endian integer (zero-padded), or
    /// nil when a string isn't ASCII. Between ASCII strings, unequal prefixes order as the
    /// strings do; equal ones leave the comparison to the strings.
    static func asciiPrefixes(_ texts: [String]) -> [UInt64]? {
        var result: [UInt64] = []
        result.reserveCapacity(texts.count)
        for text in texts {
            var prefix: UInt64 = 0
            var shift: UInt64 = 56
            var bytes = 0
            for byte in text.utf8 {
                guard byte < 0x80 else { return nil }
                if bytes < 8 {
                    prefix |= UInt64(byte) << shift
                    shift &-= 8
                    bytes += 1
                }
            }
            result.append(prefix)
        }
        return result
    }

    /// The keys of a sort by one string attribute, compared as Swift compares strings (no
    /// case or diacritic folding): each match's string (empty for nil) and whether it is
    /// nil, in the order of `matches`. Nil when
    /// the sort is anything else or a key isn't a string.
    func singleStringSortKeys(_ matches: [Match]) -> ([String], [Bool])? {
        guard request.sortDescriptors.count == 1, let descriptor = request.sortDescriptors.first,
            descriptor.usesPlainOrder
        else { return nil }
        var texts: [String] = []
        var isNull: [Bool] = []
        texts.reserveCapacity(matches.count)
        isNull.reserveCapacity(matches.count)
        for index in matches.indices {
            switch sortKeys[matches[index].keys] {
            case .string(let text):
                texts.append(text)
                isNull.append(false)
            case .null:
                texts.append("")
                isNull.append(true)
            default: return nil
            }
        }
        return (texts, isNull)
    }

    /// How many objects match (offset and limit not applied).
    func count(_ reader: borrowing LogReader) throws -> Int {
        storedState?.pin(to: reader)
        let pendingCount = try pendingMatches(reader).count
        let trivial = request.predicate == nil || request.predicate?.node == .constant(true)
        var stored: Int
        switch plan.kind {
        case .fullScan where trivial:
            stored = try entities.reduce(0) { try $0 + reader.count(of: $1.name, includingSubentities: false) }
        case .indexScan(let scan) where plan.countsFromIndex && scan.targets != nil:
            // The objects found that aren't changed here match as stored; changed ones are
            // among the pending matches (judging a changed object's stored row through the
            // context, as below, can see its relationships as they are now).
            var unchanged = 0
            try scan.forEachObject(reader, of: plan.entityName) { id in
                if inScope(id), !(pending && isDirty(id)) { unchanged += 1 }
                return .next
            }
            return unchanged + pendingCount
        case .indexScan(let scan) where plan.countsFromIndex:
            stored = 0
            for range in scan.ranges {
                if request.includesSubentities {
                    stored += try reader.countIndex(entity: plan.entityName, properties: scan.properties, prefix: scan.prefix, range: range)
                } else {
                    try reader.scanIndex(entity: plan.entityName, properties: scan.properties, prefix: scan.prefix, range: range) { id in
                        if inScope(id) { stored += 1 }
                        return .next
                    }
                }
            }
        default:
            return try storedMatches(reader).count + pendingCount
        }
        // The counts above include the stored rows of changed objects, which are judged by
        // their current values instead: take out those that matched as stored.
        for (id, _) in dirty {
            guard let row = try reader.object(id), let (_, info) = entity(id.entity) else { continue }
            let subject = StoredRowSubject(
                id: .permanent(id, store: storeUUID), info: info, values: self.row(row, info), core: core, version: row.version)
            if try matches(subject) { stored -= 1 }
        }
        return stored + pendingCount
    }
}

/// A sort key read once: typed for the common kinds, so comparing needs no casts. Compares
/// as ``FetchSortDescriptor``'s `compareValues` does (nil first; strings by Swift's order or
/// case-insensitively; dates; booleans; numbers by value, integers and decimals exactly, NaN
/// after every number); mixed kinds defer to it.
enum SortKey {
    case null
    case string(String)
    /// Integers of every width, compared exactly.
    case integer(Int64)
    /// Doubles and floats.
    case number(Double)
    case decimal(Decimal)
    case date(Date)
    case bool(Bool)
    case other(Any)

    /// The key of a stored attribute value, as ``init(_:)`` makes it of the value's
    /// evaluation form, without boxing the common kinds.
    init(attribute value: AttributeValue) {
        switch value {
        case .string(let v): self = .string(v)
        case .int16(let v): self = .integer(Int64(v))
        case .int32(let v): self = .integer(Int64(v))
        case .int64(let v): self = .integer(v)
        case .double(let v): self = .number(v)
        case .float(let v): self = .number(Double(v))
        case .decimal(let v): self = .decimal(v)
        case .date(let v): self = .date(v)
        case .boolean(let v): self = .bool(v)
        default: self = SortKey(StoredRowSubject.evaluationValue(value))
        }
    }

    init(_ value: Any?) {
        switch value {
        case nil: self = .null
        case let v as String: self = .string(v)
        case let v as Date: self = .date(v)
        case let v as Bool: self = .bool(v)
        default:
            switch SortNumber(value) {
            case .int(let v): self = .integer(v)
            case .double(let v): self = .number(v)
            case .decimal(let v): self = .decimal(v)
            case nil: self = .other(value as Any)
            }
        }
    }

    var value: Any? {
        switch self {
        case .null: nil
        case .string(let v): v
        case .integer(let v): v
        case .number(let v): v
        case .decimal(let v): v
        case .date(let v): v
        case .bool(let v): v
        case .other(let v): v
        }
    }

    static func compare(
        _ a: SortKey, _ b: SortKey, caseInsensitive: Bool, diacriticInsensitive: Bool = false, numeric: Bool = false
    ) -> ComparisonResult {
        switch (a, b) {
        case (.null, .null): return .orderedSame
        case (.null, _): return .orderedAscending
        case (_, .null): return .orderedDescending
        case (.string(let x), .string(let y)):
            if caseInsensitive || diacriticInsensitive || numeric {
                return FetchSortDescriptor.compareValues(
                    x, y, caseInsensitive: caseInsensitive, diacriticInsensitive: diacriticInsensitive, numeric: numeric)
            }
            return x < y ? .orderedAscending : (x == y ? .orderedSame : .orderedDescending)
        case (.integer(let x), .integer(let y)): return x < y ? .orderedAscending : (x == y ? .orderedSame : .orderedDescending)
        case (.number(let x), .number(let y)): return FetchSortDescriptor.compareNumbers(x, y)
        case (.decimal(let x), .decimal(let y)): return SortNumber.compare(.decimal(x), .decimal(y))
        case (.date(let x), .date(let y)):
            // A date at NaN after every date, as ``FetchSortDescriptor/compareValues``.
            return FetchSortDescriptor.compareNumbers(x.timeIntervalSinceReferenceDate, y.timeIntervalSinceReferenceDate)
        case (.bool(let x), .bool(let y)): return x == y ? .orderedSame : (!x ? .orderedAscending : .orderedDescending)
        default:
            return FetchSortDescriptor.compareValues(
                a.value, b.value, caseInsensitive: caseInsensitive, diacriticInsensitive: diacriticInsensitive, numeric: numeric)
        }
    }
}

// MARK: - Stored rows as key-value coding subjects

/// A stored row read through key-value coding, so the predicate and the sort judge an
/// unchanged object by what the store holds without creating or firing a managed object.
/// Relationships resolve through the context; transient properties and derived
/// relationship sides are read from the object, created on demand.
final class StoredRowSubject: KeyValueCoding, PredicateObjectIdentity, Hashable, CustomStringConvertible {
    let id: ManagedObjectID
    let info: EntityInfo
    let values: PropertyRow
    let core: ContextCore
    /// The store version of the row (nil: not known), kept with it by a fault made from it:
    /// the object then holds the store's values as of that version, not values that may
    /// differ (``JoinResolving/divergentObjects(of:_:cap:)``), and its save checks it.
    let version: UInt64?
    /// The managed object, once something needed it.
    private(set) var object: ManagedObject?

    /// The store's saved state, for a fetch without pending changes: a relationship then
    /// leads to the related objects' stored rows, not to the context's objects (nil: it
    /// leads to the context's objects, with their current values).
    weak var storedState: StoredState?
    /// Whether the subject reads the saved state (``storedState`` was given): checked before
    /// the weak reference is loaded, so a fetch with pending changes (the default), and
    /// every attribute read, never touches it.
    let readsSavedState: Bool

    init(
        id: ManagedObjectID, info: EntityInfo, values: PropertyRow, core: ContextCore, version: UInt64? = nil, storedState: StoredState? = nil
    ) {
        self.id = id
        self.info = info
        self.values = values
        self.core = core
        self.version = version
        self.storedState = storedState
        readsSavedState = storedState != nil
    }

    /// The managed object for the row: registered, or a new fault holding the row.
    func materialize() -> ManagedObject {
        if let object { return object }
        let made = core.registered(id) ?? core.makeObject(id, info: info)
        if !made.hasCommittedValues {
            made.keepRow(values)
            made.rowVersion = version
        }
        object = made
        return made
    }

    func value(forKey key: String) -> Any? {
        guard let property = info.properties[key] else {
            // A fetched property runs its fetch through the object (spec 0008), as a read of
            // it does: before, a predicate reading one (`keepers.@count > 1`) saw nil.
            return info.entity.fetchedPropertiesByName[key] != nil ? JudgedObjectView.reading(value: materialize().value(forKey: key)) : nil
        }
        if property.isTransient { return materialize().value(forKey: key) }
        if readsSavedState, property.isRelationship, let storedState { return storedState.value(of: self, property) }
        if let value = values[property] {
            switch value {
            case .attribute(let attribute): return attribute.map(Self.evaluationValue)
            // The related objects as a fetch reads them (``JudgedObjectView``): one without
            // pending changes by its stored values, not through its class's `value(forKey:)`.
            case .toOne(let target): return target.flatMap { core.object(with: $0) }.map(JudgedObjectView.init)
            case .toMany(let targets):
                let objects = targets.compactMap { core.object(with: $0) }
                return JudgedObjectView.reading(objects, ordered: property.isOrdered)
            case .invalid(let what): return what
            }
        }
        if property.isRelationship && !property.isRecorded { return JudgedObjectView(materialize()).value(forKey: key) }
        // A recorded to-many with no members has no stored value: it is empty, not nil
        // (before, `books.@count == 0` matched no object, as the count read as nil).
        if case .toMany(let ordered) = property.kind { return ordered ? [ManagedObject]() as Any : Set<ManagedObject>() as Any }
        return nil
    }

    /// A to-many's count (`members.@count`): a recorded side's stored IDs, counted as the
    /// object counts them; a derived side through the object (its IDs, no member made).
    func count(forKey key: String) -> Int? {
        guard let property = info.properties[key], property.isToMany, !property.isTransient else { return nil }
        if readsSavedState, let storedState { return storedState.count(of: self, property) }
        switch values[property] {
        case .toMany(let targets)?: return core.countObjects(targets)
        case nil: return property.isRecorded ? 0 : materialize().count(forKey: key)
        default: return nil  // read as value(forKey:) reads it
        }
    }

    var predicateIdentity: any Hashable & Sendable { id }

    /// Subjects naming one object are equal: a distinct union of related objects read as
    /// saved (`count(members.@distinctUnionOfObjects.team)`) keeps one of each, as it keeps
    /// one of each managed object (one registered instance per ID). Before, a subject wasn't
    /// hashable and the union kept every one.
    static func == (a: StoredRowSubject, b: StoredRowSubject) -> Bool { a.id == b.id }

    func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// A fault's description (``ManagedObject/description``): a sort by a to-one object
    /// (`team`) compares the objects' descriptions, so one read as saved sorts where its
    /// managed object does. Before, every subject described itself alike, and a sort by a
    /// to-one without pending changes left the objects in store order.
    var description: String { "<\(info.entity.name): \(id)> (fault)" }

    /// An attribute value for the predicate and the sort: integers as `Int` and floats as
    /// `Double`, which is how the predicate language and the sort classify them anyway
    /// (numbers compare by value), so they are recognised without a chain of casts.
    static func evaluationValue(_ value: AttributeValue) -> Any {
        switch value {
        case .int16(let v): Int(v)
        case .int32(let v): Int(v)
        case .int64(let v): Int(exactly: v).map { $0 as Any } ?? v
        case .float(let v): Double(v)
        default: value.boxed
        }
    }
}

// MARK: - Objects read as a fetch judges them

/// A managed object read as a fetch judges it (spec 0008, **Evaluation**). Without pending
/// changes, by its **stored values** — the row its fetch read (a fault stays unfired) or the
/// committed values it holds — never through an override of `value(forKey:)` in its class,
/// as Core Data's SQL store reads such an object's columns. With pending changes (inserted,
/// changed, deleted, restored by undo), in memory, through `value(forKey:)`. Either way the
/// related objects a relationship leads to are read the same way, each by its own state, so
/// within a fetch an object has one set of values whoever reads it.
///
/// So a key path through a relationship (`team.name`) reads an unchanged team's stored name
/// in a full scan, as a join plan's targets — the destination's stored rows — do (before
/// session 31 the full scan read it through the class, and a class overriding
/// `value(forKey:)` for `name` made the two plans disagree).
///
/// A value type holding one reference: boxed as `Any` (a related object's value, a key
/// path's step) it fits the existential's inline buffer, so reading a related object
/// allocates nothing (before session 32 it was a class, one allocation per related read in
/// a full scan, which the join plan's stored rows don't make).
struct JudgedObjectView: KeyValueCoding, PredicateObjectIdentity, Hashable, CustomStringConvertible {
    let object: ManagedObject

    init(_ object: ManagedObject) { self.object = object }

    /// `object` as a fetch reads it.
    static func reading(_ object: ManagedObject) -> JudgedObjectView { JudgedObjectView(object) }

    /// ``reading(_:)`` of each of `objects`: an array when `ordered`, else a set.
    static func reading(_ objects: [ManagedObject], ordered: Bool) -> Any {
        ordered ? objects.map(JudgedObjectView.init) as Any : Set(objects.map(JudgedObjectView.init)) as Any
    }

    /// A value `value(forKey:)` gave, its managed objects read as ``reading(_:)`` reads them.
    static func reading(value: Any?) -> Any? {
        switch value {
        case let object as ManagedObject: JudgedObjectView(object)
        case let objects as [ManagedObject]: reading(objects, ordered: true)
        case let objects as Set<ManagedObject>: reading(Array(objects), ordered: false)
        default: value
        }
    }

    func value(forKey key: String) -> Any? {
        guard object.isReadAsStored, let property = object.info.properties[key], !property.isTransient else {
            // Pending changes, a transient, a fetched property, `objectID` and the like: the object's own.
            return Self.reading(value: object.value(forKey: key))
        }
        // An attribute or a to-one held in the row or the committed values.
        if let stored = object.unchangedStoredValue(forKey: key) { return Self.reading(value: stored) }
        // A fault without a row (a related object not fetched yet): its stored row is read
        // and kept, the fault left unfired, as a fetch leaves its results — firing it here
        // would run `awakeFromFetch` in the middle of the fetch, and a persistent value set
        // there (Core Data asks for primitive setters) made the object one with pending
        // changes that a join plan's targets didn't include: the full scan read the value
        // set, the join plan the stored one (before session 32). Core Data's SQL reads the
        // related row's column without firing the fault either. Not in a child context (its
        // faults read the parent) nor for a fault of a batch (it fires with its batch).
        if !object.hasCommittedValues, !object.hasRow, object.fetchBatch == nil, !property.isToMany, let core = object.core,
            core.parentContext == nil
        {
            try? core.loadRows(of: [object])
            if let stored = object.unchangedStoredValue(forKey: key) { return Self.reading(value: stored) }
        }
        // A to-many, a derived side, a fault the store lost: its value once loaded (firing
        // the fault runs `awakeFromFetch`, which may change values: then it is read in memory).
        object.fireFault()
        guard object.isReadAsStored else { return Self.reading(value: object.value(forKey: key)) }
        return Self.reading(value: object.externalValue(object.currentValue(property), ordered: property.isOrdered))
    }

    func count(forKey key: String) -> Int? { object.count(forKey: key) }

    var predicateIdentity: any Hashable & Sendable { object.predicateIdentity }

    static func == (a: JudgedObjectView, b: JudgedObjectView) -> Bool { a.object === b.object }

    func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(object)) }

    /// The object's description: a sort by a to-one object orders it where the object sorts.
    var description: String { object.description }
}

// MARK: - Validation of key paths and comparisons

/// Checks a request's key paths and comparisons against the model.
struct FetchValidator {
    let model: ManagedObjectModel
    let entity: EntityDescription
    let variables: [String: AttributeValue]

    /// What a key path reads.
    enum Target {
        /// An attribute's value (possibly through relationships; a to-many path gives a
        /// collection of them).
        case attribute(String, AttributeType)
        /// A number (`@count`).
        case number
        /// Objects, or something not checked further.
        case other
    }

    struct Problem: Error {
        let text: String
    }

    /// The first to-many relationship `path` goes through (`Entity.key`), or nil: a path
    /// through one reads a collection. A collection operator (`@count`) makes one value again.
    func toManyKey(in path: FormatKeyPath) -> String? {
        var current: EntityDescription? = entity
        let components = path.components
        for (position, component) in components.enumerated() {
            guard case .key(let key) = component, let here = current else { return nil }
            guard let relationship = here.relationshipsByName[key] else { return nil }
            if relationship.isToMany {
                if position + 1 < components.count, case .collectionOperator = components[position + 1] { return nil }
                return "\(here.name).\(key)"
            }
            current = model.entity(named: relationship.destinationEntityName)
        }
        return nil
    }

    /// What `path` reads from the fetched entity, or why it names nothing.
    func resolve(_ path: FormatKeyPath) -> Result<Target, Problem> {
        var current: EntityDescription? = entity
        var target = Target.other
        for component in path.components {
            switch component {
            case .collectionOperator(let op):
                if op == .count { return .success(.number) }
                // The next key is read from each element, of the current (destination) entity.
                continue
            case .key(let key):
                guard let here = current else { return .success(.other) }  // past an attribute: not checked
                let whole = path.components.count > 1 ? " (key path \"\(path)\")" : ""
                if let attribute = here.attributesByName[key] {
                    target = .attribute(path.description, attribute.attributeType)
                    current = nil
                } else if let relationship = here.relationshipsByName[key] {
                    current = model.entity(named: relationship.destinationEntityName)
                    target = .other
                    if current == nil { return .success(.other) }
                } else if here.fetchedPropertiesByName[key] != nil {
                    return .success(.other)
                } else {
                    return .failure(Problem(text: "entity \(here.name) has no property \"\(key)\"\(whole)"))
                }
            }
        }
        return .success(target)
    }

    /// The first problem in `node`, or nil.
    func problem(in node: PredicateNode) -> String? {
        switch node {
        case .constant: return nil
        case .not(let child): return problem(in: child)
        case .and(let children), .or(let children):
            for child in children { if let found = problem(in: child) { return found } }
            return nil
        case .comparison(let comparison):
            if let found = problem(in: comparison.leftExpression) ?? problem(in: comparison.rightExpression) { return found }
            return mismatch(comparison)
        }
    }

    /// The first unknown key path or missing variable in `expression`.
    func problem(in expression: FormatExpression) -> String? {
        switch expression {
        case .constant, .evaluatedObject: return nil
        case .keyPath(let path):
            if case .failure(let problem) = resolve(path) { return problem.text }
            return nil
        case .variable(let name):
            return variables[name] == nil ? "no value for substitution variable $\(name)" : nil
        case .aggregate(let elements):
            for element in elements { if let found = problem(in: element) { return found } }
            return nil
        case .keyPathOf(let base, _), .index(let base, _):
            return problem(in: base)
        case .function(_, let arguments):
            for argument in arguments { if let found = problem(in: argument) { return found } }
            return nil
        case .arithmetic(_, let left, let right):
            return problem(in: left) ?? problem(in: right)
        case .subquery(let collection, _, _):
            // The subquery's own predicate reads the collection's elements through its variable.
            return problem(in: collection)
        }
    }

    /// A constant, a `$variable` with a value, or an aggregate of those.
    func constant(_ expression: FormatExpression) -> PredicateConstant? {
        switch expression {
        case .constant(let constant): return constant
        case .variable(let name): return variables[name].map(QueryPlanner.constant)
        case .aggregate(let elements):
            var constants: [PredicateConstant] = []
            for element in elements {
                guard let constant = constant(element) else { return nil }
                constants.append(constant)
            }
            return .aggregate(constants)
        default: return nil
        }
    }

    /// Why an attribute compared with a constant of another type can never match, or nil.
    func mismatch(_ comparison: ComparisonPredicate) -> String? {
        let target: Target
        let other: PredicateConstant
        if case .keyPath(let path) = comparison.leftExpression, case .success(let found) = resolve(path),
            let constant = constant(comparison.rightExpression)
        {
            target = found
            other = constant
        } else if case .keyPath(let path) = comparison.rightExpression, case .success(let found) = resolve(path),
            let constant = constant(comparison.leftExpression)
        {
            target = found
            other = constant
        } else {
            return nil
        }
        let name: String
        let type: AttributeType
        switch target {
        case .attribute(let path, let attributeType):
            name = path
            type = attributeType
        case .number:
            name = "count"
            type = .int64
        case .other:
            return nil
        }
        let described = "\(name) (\(Self.typeName(type)))"
        switch comparison.operatorType {
        case .equalTo, .notEqualTo, .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo:
            if case .aggregate = other { return nil }
            return compatible(type, other) ? nil : "\(described) compared with \(Self.describe(other))"
        case .between, .in:
            if case .aggregate(let elements) = other {
                for element in elements where !compatible(type, element) {
                    return "\(described) compared with \(Self.describe(element)) in \(Self.describe(other))"
                }
                return nil
            }
            if comparison.operatorType == .in, case .string = other, type != .string {
                return "\(described) can't be IN a string; only strings can"
            }
            return nil
        case .contains, .beginsWith, .endsWith, .like, .matches:
            // `{1, 2} CONTAINS rank`: a collection holding the attribute's value, as `IN`.
            if comparison.operatorType == .contains, case .aggregate(let elements) = other,
                case .keyPath = comparison.rightExpression
            {
                for element in elements where !compatible(type, element) {
                    return "\(described) compared with \(Self.describe(element)) in \(Self.describe(other))"
                }
                return nil
            }
            if type != .string {
                return "\(described) used with \(comparison.operatorType.rawValue), which needs a string attribute"
            }
            if case .string = other { return nil }
            if case .null = other { return nil }
            return "\(described) \(comparison.operatorType.rawValue) \(Self.describe(other)), which needs a string"
        }
    }

    /// Whether `constant` can compare with values of `type`.
    func compatible(_ type: AttributeType, _ constant: PredicateConstant) -> Bool {
        switch constant {
        case .null: return true
        case .aggregate: return true
        case .bool, .integer, .double, .decimal: return type.isNumeric || type == .boolean
        case .string: return type == .string
        case .date: return type == .date
        case .data:
            if case .transformable = type { return true }
            return type == .binaryData
        case .uuid: return type == .uuid
        case .url: return type == .uri
        case .object: return false
        }
    }

    /// Core Data's name of an attribute type.
    static func typeName(_ type: AttributeType) -> String {
        switch type {
        case .int16: "Integer 16"
        case .int32: "Integer 32"
        case .int64: "Integer 64"
        case .decimal: "Decimal"
        case .double: "Double"
        case .float: "Float"
        case .string: "String"
        case .boolean: "Boolean"
        case .date: "Date"
        case .binaryData: "Binary Data"
        case .uuid: "UUID"
        case .uri: "URI"
        case .transformable: "Transformable"
        }
    }

    /// A constant and its kind, as in `"abc" (string)`.
    static func describe(_ constant: PredicateConstant) -> String {
        let comparison = ComparisonPredicate(.constant(constant), .equalTo, .constant(.null))
        let text = FormatPredicate(.comparison(comparison)).description
        let literal = text.hasSuffix(" == nil") ? String(text.dropLast(7)) : text
        let kind: String
        switch constant {
        case .null: kind = "nil"
        case .bool: kind = "boolean"
        case .integer, .double, .decimal: kind = "number"
        case .string: kind = "string"
        case .date: kind = "date"
        case .data: kind = "data"
        case .uuid: kind = "UUID"
        case .url: kind = "URL"
        case .aggregate: return literal
        case .object: kind = "object"
        }
        return "\(literal) (\(kind))"
    }
}

extension QueryPlan.IndexScan {
    /// Calls `body` with each stored object the scan reads for a fetch of `entity`: the
    /// entries of every range, in index order, the referrers of each target, or the
    /// targets themselves that the store holds.
    ///
    /// With `existing` false, the targets of a read of objects by ID are given whether or not
    /// the store holds them (for a caller that reads their records anyway, skipping those
    /// it doesn't find).
    func forEachObject(
        _ reader: borrowing LogReader, of entity: String, existing: Bool = true, _ body: (StoredObjectID) throws -> IterationDecision
    ) throws {
        if let targets, properties.isEmpty {
            // The objects themselves (SELF == obj, SELF IN …): those the store holds.
            for target in targets where try !existing || reader.contains(target) {
                if try body(target) == .stop { return }
            }
            return
        }
        if let targets {
            var stopped = false
            // Objects holding several of the targets are found once per target: read once.
            var seen: Set<StoredObjectID>? = isMembership && targets.count > 1 ? [] : nil
            for target in targets where !stopped {
                try reader.forEachReferrer(to: target, through: attribute, of: entity) { id in
                    if seen != nil, seen?.insert(id).inserted == false { return .next }
                    let decision = try body(id)
                    if decision == .stop { stopped = true }
                    return decision
                }
            }
            return
        }
        var stopped = false
        for range in ranges where !stopped {
            try reader.scanIndex(entity: entity, properties: properties, prefix: prefix, range: range) { id in
                let decision = try body(id)
                if decision == .stop { stopped = true }
                return decision
            }
        }
    }
}
