import Foundation
public import StrataPredicate

// Batch requests (spec 0006 §20): changes made in the store directly, without managed
// objects — Core Data's `NSBatchInsertRequest`, `NSBatchUpdateRequest` and
// `NSBatchDeleteRequest`, run with `ManagedObjectContext.execute(_:)`.

/// What a batch request returns (Core Data's `NSBatchInsertRequestResultType`,
/// `NSBatchUpdateRequestResultType` and `NSBatchDeleteRequestResultType`).
public enum BatchResultType: Sendable, Hashable {
    /// Whether the request succeeded (`statusOnly`); the default.
    case statusOnly
    /// How many objects the request inserted, updated or deleted (`count`).
    case count
    /// The permanent IDs of the objects the request inserted, updated or deleted (`objectIDs`).
    case objectIDs
}

/// What a batch request did (Core Data's `NSBatchInsertResult`, `NSBatchUpdateResult` and
/// `NSBatchDeleteResult`), typed by the request's ``BatchResultType``.
///
/// The changes are in the store, not in any context: merge them into the contexts that hold
/// affected objects with ``ManagedObjectContext/mergeChanges(fromRemoteContextSave:into:)``,
/// or let automatically merging contexts pick up the transaction (``sequence``).
///
/// ```swift
/// var request = BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Run", format: "date < %@", cutoff))
/// request.resultType = .objectIDs
/// let result = try context.execute(request)
/// ManagedObjectContext.mergeChanges(
///     fromRemoteContextSave: [ManagedObjectContext.NotificationKey.deletedObjects.rawValue: result.objectIDs ?? []],
///     into: [viewContext])
/// ```
public struct BatchResult: Sendable, Hashable {
    /// The value the request's ``BatchResultType`` asked for (Core Data's `result`).
    public enum Value: Sendable, Hashable {
        /// ``BatchResultType/statusOnly``: true, the request succeeded (a failure throws).
        case status(Bool)
        /// ``BatchResultType/count``: how many objects were inserted, updated or deleted.
        case count(Int)
        /// ``BatchResultType/objectIDs``: their permanent IDs, in the order they were written.
        case objectIDs([ManagedObjectID])
    }

    /// What the request's result type asked for.
    public let result: Value
    /// The sequence of the transaction the request committed (kind `import`); nil when it
    /// changed nothing (no objects to insert, none matched, an update whose objects all
    /// held its values already), and then nothing was written.
    public let sequence: UInt64?

    /// The count, for a ``BatchResultType/count`` request; nil otherwise.
    public var count: Int? {
        if case .count(let count) = result { return count }
        return nil
    }

    /// The object IDs, for a ``BatchResultType/objectIDs`` request; nil otherwise.
    public var objectIDs: [ManagedObjectID]? {
        if case .objectIDs(let ids) = result { return ids }
        return nil
    }

    init(type: BatchResultType, ids: [ManagedObjectID], sequence: UInt64?) {
        switch type {
        case .statusOnly: result = .status(true)
        case .count: result = .count(ids.count)
        case .objectIDs: result = .objectIDs(ids)
        }
        self.sequence = sequence
    }
}

/// Inserts objects from dictionaries of attribute values, or from objects a handler fills,
/// straight into the store, in one transaction (Core Data's `NSBatchInsertRequest`).
///
/// Each dictionary maps attribute names to values of the types `setValue(_:forKey:)`
/// accepts (`NSNull` or a nil optional for nil); attributes a dictionary leaves out get the
/// model's default value. Relationships can't be set (as in Core Data) and the model's
/// validation rules are not run; uniqueness constraints are enforced by the store, and a
/// violation refuses the whole request.
///
/// ```swift
/// let rows: [[String: any Sendable]] = [["name": "Ada", "age": 36], ["name": "Grace", "age": 45]]
/// var request = BatchInsertRequest(entityName: "Person", objects: rows)
/// request.resultType = .objectIDs
/// let ids = try context.execute(request).objectIDs
/// ```
///
/// With a ``managedObjectHandler`` (Core Data's `init(entity:managedObjectHandler:)`), the
/// app fills a new object of the entity through its typed properties or
/// `setValue(_:forKey:)` instead; the object's attribute values are then inserted as a
/// dictionary's would be, with the same rules:
///
/// ```swift
/// var next = 0
/// let request = BatchInsertRequest(Employee.self) { employee in
///     guard next < rows.count else { return true }
///     employee.name = rows[next].name
///     next += 1
///     return false
/// }
/// try context.execute(request)
/// ```
public struct BatchInsertRequest {
    /// The entity of the inserted objects (concrete, not abstract).
    public var entityName: String
    /// The objects to insert, as attribute values by name (`objectsToInsert`).
    public var objectsToInsert: [[String: any Sendable]]?
    /// Called for one object after another until it returns true (`dictionaryHandler`):
    /// fill the dictionary and return false to insert it, or return true to stop (the
    /// dictionary of that call is not inserted). Used when ``objectsToInsert`` is nil.
    public var dictionaryHandler: ((inout [String: any Sendable]) throws -> Bool)?
    /// Called for one new object after another until it returns true (Core Data's
    /// `managedObjectHandler`): fill the object's attributes (typed properties,
    /// `setValue(_:forKey:)`) and return false to insert it, or return true to stop (the
    /// object of that call is not inserted). Used when ``objectsToInsert`` and
    /// ``dictionaryHandler`` are nil.
    ///
    /// Each object is new, of the class registered for the entity (the handler's class for
    /// a typed handler), with the model's default values, and its plain
    /// ``ManagedObject/awakeFromInsert()`` has run. As in Core Data, it belongs to no context
    /// (`managedObjectContext` is nil, so ``ManagedObject/awakeFromInsert(in:)`` isn't run);
    /// it is forgotten when the handler returns: don't keep the object or use it after the
    /// call. The handler runs synchronously on the executing context's queue. Its stored attribute values are
    /// inserted as a dictionary's (transient values are not stored, as at a save); setting a
    /// relationship refuses the request, as a value that doesn't convert or an unknown key
    /// does, naming the object's position (from 1).
    public var managedObjectHandler: ((ManagedObject) throws -> Bool)?
    /// What the result holds (default ``BatchResultType/statusOnly``).
    public var resultType: BatchResultType = .statusOnly
    /// The class a typed handler's objects must be of, given the class registered for the
    /// entity: that class when it is a subclass of the handler's, else the handler's.
    var handlerClass: ((ManagedObject.Type) -> ManagedObject.Type)?
    /// The class ``init(_:managedObjectHandler:)`` was given: while ``entityName`` is still
    /// its name, the entity is the one the class is registered for (as `init(context:)` finds it).
    var entityClass: ManagedObject.Type?

    /// A request inserting `objects` into `entityName`.
    public init(entityName: String, objects: [[String: any Sendable]]) {
        self.entityName = entityName
        objectsToInsert = objects
    }

    /// A request inserting the objects `dictionaryHandler` gives, one call per object, until
    /// it returns true.
    ///
    /// ```swift
    /// var next = 0
    /// let request = BatchInsertRequest(entityName: "Reading") { values in
    ///     guard next < samples.count else { return true }
    ///     values = ["value": samples[next]]
    ///     next += 1
    ///     return false
    /// }
    /// ```
    public init(entityName: String, dictionaryHandler: @escaping (inout [String: any Sendable]) throws -> Bool) {
        self.entityName = entityName
        self.dictionaryHandler = dictionaryHandler
    }

    /// A request inserting the objects of `entityName` that `managedObjectHandler` fills, one
    /// call per object, until it returns true (Core Data's
    /// `init(entityName:managedObjectHandler:)`). See ``managedObjectHandler``.
    ///
    /// ```swift
    /// var next = 0
    /// let request = BatchInsertRequest(entityName: "Reading", managedObjectHandler: { reading in
    ///     guard next < samples.count else { return true }
    ///     reading.setValue(samples[next], forKey: "value")
    ///     next += 1
    ///     return false
    /// })
    /// ```
    public init(entityName: String, managedObjectHandler: @escaping (ManagedObject) throws -> Bool) {
        self.entityName = entityName
        self.managedObjectHandler = managedObjectHandler
    }

    /// A request inserting objects of `entityName` that a handler taking the app's class
    /// fills (`{ (employee: Employee) in … }`), one call per object, until it returns true.
    /// Each object is of the class registered for the entity when that is a `T`, else a `T`.
    /// See ``managedObjectHandler``.
    public init<T: ManagedObject>(entityName: String, managedObjectHandler: @escaping (T) throws -> Bool) {
        self.entityName = entityName
        self.managedObjectHandler = Self.typed(managedObjectHandler)
        if T.self != ManagedObject.self { handlerClass = { registered in registered is T.Type ? registered : T.self } }
    }

    /// A request inserting objects of the entity `type` stands for, filled by a handler
    /// taking `type` — the port of Core Data's `NSBatchInsertRequest(entity: Employee.entity(),
    /// managedObjectHandler:)`. The entity is found when the request runs, as
    /// ``ManagedObject/init(context:)`` finds it: the one `type` is registered for with
    /// ``PersistentStoreCoordinator/register(_:forEntityName:)``, else the entity named as
    /// the class. ``entityName`` starts as the class's name; set it to name another entity.
    ///
    /// ```swift
    /// coordinator.register(Employee.self, forEntityName: "Employee")
    /// var next = 0
    /// let request = BatchInsertRequest(Employee.self) { employee in
    ///     guard next < names.count else { return true }
    ///     employee.name = names[next]
    ///     next += 1
    ///     return false
    /// }
    /// ```
    public init<T: ManagedObject>(_ type: T.Type, managedObjectHandler: @escaping (T) throws -> Bool) {
        self.init(entityName: String(describing: type), managedObjectHandler: managedObjectHandler)
        entityClass = type
    }

    /// `handler` taking any object: one of another class (which the request never makes) is refused.
    private static func typed<T: ManagedObject>(_ handler: @escaping (T) throws -> Bool) -> (ManagedObject) throws -> Bool {
        { object in
            guard let typed = object as? T else {
                throw ContextError.invalidArgument("batch insert into \(object.entity.name): the handler takes \(T.self), and the object is a \(type(of: object))")
            }
            return try handler(typed)
        }
    }
}

/// Sets attributes of every object a predicate matches, straight in the store, in one
/// transaction, without managed objects (Core Data's `NSBatchUpdateRequest`).
///
/// The new values are constants or expressions of the object's own attributes
/// (`score * 1.1`), as Core Data's are. The model's validation rules are not run; uniqueness
/// constraints are enforced by the store, and a violation refuses the whole request.
///
/// ```swift
/// var request = BatchUpdateRequest(entityName: "Task")
/// request.predicate = try FormatPredicate(format: "dueDate < %@", Date())
/// request.propertiesToUpdate = ["overdue": true]
/// request.resultType = .count
/// let count = try context.execute(request).count
/// ```
public struct BatchUpdateRequest: Sendable {
    /// The entity whose objects are updated.
    public var entityName: String
    /// Which objects are updated; nil for every object of the entity.
    public var predicate: FormatPredicate?
    /// Include objects of sub-entities (default true).
    public var includesSubentities = true
    /// The new values by attribute name (`propertiesToUpdate`); `NSNull()` sets nil. A value
    /// may be a ``FormatExpression`` (Core Data's `NSExpression`), evaluated for each object
    /// against its attributes as stored before the update: `["score": try
    /// FormatExpression(format: "score * 1.1")]`. Its key paths name the entity's stored
    /// attributes (no relationships, `SELF`, `$variables` or subqueries); one that reads
    /// nothing of the object (`now()`) is evaluated once.
    public var propertiesToUpdate: [String: any Sendable] = [:]
    /// What the result holds (default ``BatchResultType/statusOnly``).
    public var resultType: BatchResultType = .statusOnly

    /// A request updating objects of `entityName`.
    public init(entityName: String) {
        self.entityName = entityName
    }
}

/// Deletes every object a fetch request selects, or the objects given by ID, straight in the
/// store, in one transaction, without managed objects (Core Data's `NSBatchDeleteRequest`).
///
/// The relationships' delete rules are applied in the store: cascade deletes the
/// destinations too (in the same transaction), nullify removes the deleted objects from the
/// destinations' recorded inverse relationships, and deny refuses the request while a
/// destination that isn't deleted with it remains. The store never keeps a reference to a
/// deleted object: a reference left behind (a no-action rule, a relationship without an
/// inverse) refuses the request and nothing is written.
///
/// ```swift
/// let request = BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Session", format: "expires < %@", Date()))
/// try context.execute(request)
/// ```
public struct BatchDeleteRequest: Sendable {
    /// Which objects a request deletes.
    public enum Target: Sendable {
        /// The objects the fetch request selects, in the store as saved (its predicate,
        /// sub-entities, sort descriptors, offset and limit apply); kept untyped.
        case fetchRequest(FetchRequest<ManagedObject>)
        /// These objects (permanent IDs of one store); those already deleted are skipped.
        case objectIDs([ManagedObjectID])
    }

    /// Which objects are deleted.
    public var target: Target
    /// What the result holds (default ``BatchResultType/statusOnly``).
    public var resultType: BatchResultType = .statusOnly

    /// A request deleting what `fetchRequest` selects (`init(fetchRequest:)`); any
    /// `FetchRequest<Result>` (`Player.fetchRequest()` too: its class makes no difference).
    public init<Result>(fetchRequest: FetchRequest<Result>) {
        target = .fetchRequest(fetchRequest.erased)
    }

    /// A request deleting the objects `objectIDs` name (`init(objectIDs:)`); they must be of
    /// one entity (or its sub-entities), as in Core Data.
    public init(objectIDs: [ManagedObjectID]) {
        target = .objectIDs(objectIDs)
    }
}

// MARK: - Running them

extension ManagedObjectContext {
    /// Inserts the request's objects into the store as one transaction of kind `import`
    /// (`execute(_:)` with an `NSBatchInsertRequest`), and returns what its result type asks
    /// for. No managed objects are made, no context (this one included) changes, and nothing
    /// is registered for undo.
    ///
    /// On an entity with uniqueness constraints, the context's ``mergePolicy`` decides what a
    /// dictionary whose constrained values another object already holds (stored, or given
    /// by an earlier dictionary) does, as in Core Data: with `.error` (the default) the
    /// request is refused; with another ``StandardMergePolicy`` it **upserts** — the values
    /// are merged into that object by the policy's rule for a constraint clash
    /// (`mergeByPropertyObjectTrump`: the dictionary's non-nil values win;
    /// `mergeByPropertyStoreTrump`: the stored non-nil values win; `overwrite`: the
    /// dictionary's values replace all; `rollback`: the stored values stay), and the result
    /// names (or counts) each object once, updated or inserted.
    ///
    /// ```swift
    /// context.mergePolicy = .mergeByPropertyObjectTrump
    /// try context.execute(BatchInsertRequest(entityName: "Product", objects: downloaded))  // new serial codes inserted, known ones updated
    /// ```
    ///
    /// A request with a ``BatchInsertRequest/managedObjectHandler`` is run as one with a
    /// dictionary handler: each object the handler fills (in no context, forgotten after
    /// each call) gives the dictionary of its stored
    /// attribute values. This context doesn't change either.
    ///
    /// - Throws: ``ContextError/unknownEntity(_:)``; ``ContextError/invalidArgument(_:)`` for
    ///   an abstract entity, or naming the object and key of a value that isn't an attribute's
    ///   or can't be converted (for a filled object: a relationship set, an unknown key, a
    ///   derived attribute set); ``ContextError/storeRefused(_:)`` when the store refuses the
    ///   transaction (a uniqueness violation under `.error` or a custom policy; a dictionary
    ///   holding the constrained values of two different objects); what a handler throws.
    ///   Nothing is written then.
    public func execute(_ request: BatchInsertRequest) throws -> BatchResult {
        guard let handler = request.managedObjectHandler, request.objectsToInsert == nil, request.dictionaryHandler == nil else {
            return try ContextError.wrappingStoreFailures("the batch insert failed and nothing was written") { try core.executeBatchInsert(request) }
        }
        var plain = request
        if let type = request.entityClass, request.entityName == String(describing: type) {
            plain.entityName = try entityName(inserting: type)
        }
        plain.managedObjectHandler = nil
        let filler = BatchObjectFiller(coordinator: persistentStoreCoordinator, entityName: plain.entityName, handlerClass: request.handlerClass, handler: handler)
        plain.dictionaryHandler = { values in try filler.fill(&values) }
        return try ContextError.wrappingStoreFailures("the batch insert failed and nothing was written") { try core.executeBatchInsert(plain) }
    }

    /// Sets the request's values on every object it matches, in the store, as one
    /// transaction of kind `import` (`execute(_:)` with an `NSBatchUpdateRequest`). The
    /// result counts (or names) every matched object, including one whose values were
    /// already the new ones. Contexts are not changed; nothing is registered for undo.
    ///
    /// - Throws: ``ContextError/unknownEntity(_:)``, ``ContextError/invalidFetchRequest(part:reason:)``
    ///   for a predicate that can't run, ``ContextError/invalidArgument(_:)`` for no values, a
    ///   key that isn't a stored attribute or a value that doesn't convert,
    ///   ``ContextError/storeRefused(_:)`` for a uniqueness violation. Nothing is written then.
    public func execute(_ request: BatchUpdateRequest) throws -> BatchResult {
        try ContextError.wrappingStoreFailures("the batch update failed and nothing was written") { try core.executeBatchUpdate(request) }
    }

    /// Deletes the request's objects from the store as one transaction of kind `import`,
    /// applying delete rules there (`execute(_:)` with an `NSBatchDeleteRequest`). The result
    /// counts (or names) every deleted object, those a cascade deleted included. Contexts are
    /// not changed; nothing is registered for undo.
    ///
    /// - Throws: ``ContextError/unknownEntity(_:)``, ``ContextError/invalidFetchRequest(part:reason:)``,
    ///   ``ContextError/invalidArgument(_:)`` for IDs that are temporary, of another store or
    ///   of another entity; ``ContextError/storeRefused(_:)`` when a deny rule holds or a
    ///   reference to a deleted object would be left. Nothing is written then.
    public func execute(_ request: BatchDeleteRequest) throws -> BatchResult {
        try ContextError.wrappingStoreFailures("the batch delete failed and nothing was written") { try core.executeBatchDelete(request) }
    }

    /// Merges changes made elsewhere — a batch request's results, another coordinator's or
    /// process's save — into `contexts` (Core Data's `mergeChanges(fromRemoteContextSave:into:)`).
    ///
    /// `changes` holds, under the raw values of ``NotificationKey/insertedObjects``,
    /// ``NotificationKey/updatedObjects`` and ``NotificationKey/deletedObjects`` (Core Data's
    /// `NSInsertedObjectsKey`, … have the same), arrays or sets of ``ManagedObjectID``s or
    /// their URIs (`URL`), or both mixed — or under the object-ID notifications' keys
    /// (``NotificationKey/insertedObjectIDs``, …: `NSInsertedObjectIDsKey`, so the userInfo of
    /// ``didSaveObjectIDsNotification`` can be passed as it is); other keys, and URIs that
    /// name nothing in a context's store, are ignored. In each context, as for ``mergeChanges(fromContextDidSave:)-(ContextDidSave)``:
    /// registered objects deleted leave it, registered objects updated are re-read keeping
    /// unsaved changes, and did-merge and objects-did-change are posted.
    ///
    /// Each context merges on its own queue; the call returns when all have (it waits as
    /// ``performAndWait(_:)`` does, so don't call it from a context's queue while that context
    /// waits on another of `contexts`).
    public nonisolated static func mergeChanges(fromRemoteContextSave changes: [AnyHashable: Any], into contexts: [ManagedObjectContext]) {
        typealias Key = NotificationKey
        for context in contexts {
            let coordinator = context.persistentStoreCoordinator
            func ids(_ key: Key) -> Set<ManagedObjectID> {
                var found: Set<ManagedObjectID> = []
                let elements: [Any]
                switch changes[key.rawValue] {
                case let array as [Any]: elements = array
                case let set as Set<ManagedObjectID>: elements = Array(set)
                case let set as Set<URL>: elements = Array(set)
                // A set mixing IDs and URIs, or built as a notification's userInfo builds one.
                case let set as Set<AnyHashable>: elements = set.map(\.base)
                default: elements = []
                }
                for element in elements {
                    if let id = element as? ManagedObjectID {
                        found.insert(id)
                    } else if let uri = element as? URL, let id = coordinator.managedObjectID(forURIRepresentation: uri) {
                        found.insert(id)
                    }
                }
                return found
            }
            // The object-ID notifications' keys too (`inserted_objectIDs`, …): their userInfo
            // passed here merged nothing, silently.
            let inserted = ids(.insertedObjects).union(ids(.insertedObjectIDs))
            let updated = ids(.updatedObjects).union(ids(.updatedObjectIDs))
            let deleted = ids(.deletedObjects).union(ids(.deletedObjectIDs))
            guard !inserted.isEmpty || !updated.isEmpty || !deleted.isEmpty else { continue }
            context.performAndWait { context in
                context.core.mergeRemoteChanges(inserted: inserted, updated: updated, deleted: deleted)
            }
        }
    }
}

/// Makes the objects a batch insert's managed-object handler fills (spec 0006 §20.2), one at
/// a time, in a scratch core of the executing context's coordinator that belongs to no
/// context (the object's `managedObjectContext` is nil, as Core Data's is), and hands each
/// one's stored attribute values on as a dictionary. The handler runs synchronously, on the
/// executing context's queue, as a dictionary handler does; no value crosses an isolation
/// boundary. The scratch core is reset after every call, so its objects don't pile up however
/// many objects the request inserts.
final class BatchObjectFiller {
    private let coordinator: PersistentStoreCoordinator
    private let entityName: String
    private let handlerClass: ((ManagedObject.Type) -> ManagedObject.Type)?
    private let handler: (ManagedObject) throws -> Bool
    /// Made at the first call: a request refused before any object is asked for makes none.
    private var scratch: ContextCore?
    /// The position (from 1) of the object being filled.
    private var number = 0

    init(coordinator: PersistentStoreCoordinator, entityName: String, handlerClass: ((ManagedObject.Type) -> ManagedObject.Type)?, handler: @escaping (ManagedObject) throws -> Bool) {
        self.coordinator = coordinator
        self.entityName = entityName
        self.handlerClass = handlerClass
        self.handler = handler
    }

    /// Fills the next object: true when the handler stopped, else `values` holds the object's.
    func fill(_ values: inout [String: any Sendable]) throws -> Bool {
        number += 1
        let core = scratch ?? makeScratch()
        scratch = core
        defer { core.reset() }
        let registered = try core.objectClass(forEntityName: entityName)
        let object = try core.insertDetached(entityName: entityName, as: handlerClass?(registered) ?? registered)
        guard try !handler(object) else { return true }
        values = try core.batchInsertValues(of: object, what: "batch insert into \(entityName), object \(number)")
        return false
    }

    private func makeScratch() -> ContextCore {
        let core = ContextCore(coordinator: coordinator, hub: NotificationHub())
        core.name = "batch insert scratch"
        core.isBatchScratch = true
        core.journal.isEnabled = false
        return core
    }
}
