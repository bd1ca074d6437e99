public import Foundation
public import StrataModel

/// A scratch pad of managed objects (Core Data's `NSManagedObjectContext`): insert, change
/// and delete objects, then save them to the store as one transaction, with undo and redo.
///
/// A context is an actor confined to one serial queue — a private one, or the main queue.
/// Use it through ``perform(_:)`` (async) or ``performAndWait(_:)``; inside, the closure's
/// context parameter gives synchronous access to everything, and managed objects may be
/// used freely. Pass ``ManagedObjectID``s, not objects, between contexts.
///
/// ```swift
/// let context = container.newBackgroundContext()
/// let id = try await context.perform { context in
///     let run = try context.insertNewObject(forEntityName: "Run")
///     run.setValue(Int32(42), forKey: "processID")
///     try context.save()
///     return run.objectID
/// }
/// ```
public actor ManagedObjectContext {
    /// Which queue a context runs on (Core Data's concurrency types).
    public enum ConcurrencyType: Sendable {
        /// The main queue (`mainQueueConcurrencyType`), for UI-facing contexts.
        case mainQueue
        /// A private serial queue (`privateQueueConcurrencyType`).
        case privateQueue

        /// Core Data's Swift name for ``mainQueue`` (`NSManagedObjectContextConcurrencyType`).
        ///
        /// ```swift
        /// let view = ManagedObjectContext(concurrencyType: .mainQueueConcurrencyType, coordinator: coordinator)
        /// ```
        public static var mainQueueConcurrencyType: ConcurrencyType { .mainQueue }
        /// Core Data's Swift name for ``privateQueue``.
        public static var privateQueueConcurrencyType: ConcurrencyType { .privateQueue }
    }

    /// The queue type.
    public nonisolated let concurrencyType: ConcurrencyType
    /// The coordinator the context saves through (a child's: its parent's).
    public nonisolated let persistentStoreCoordinator: PersistentStoreCoordinator
    /// The parent context of a child context (`parent`): the child fetches and faults
    /// through it and saves into it; nil for a context on the coordinator.
    public nonisolated let parent: ManagedObjectContext?
    /// This context's children (weakly), told when its objects change.
    nonisolated let children = ContextRegistry()
    private let executor: ContextExecutor
    let core: ContextCore
    /// The async subscribers, reachable without isolation.
    private nonisolated let hub = NotificationHub()
    /// The core's identity, for the coordinator's broadcast.
    private nonisolated let coreKey: ObjectIdentifier

    /// The actor's executor: the context's queue.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Creates a context on `coordinator`.
    ///
    /// With `persistentUndo`, the undo stack is rebuilt from the log — this context's saved
    /// transactions, matched by `transactionAuthor` and `name` — so undo survives a restart.
    public init(
        concurrencyType: ConcurrencyType, coordinator: PersistentStoreCoordinator, name: String? = nil,
        transactionAuthor: String? = nil, persistentUndo: Bool = false
    ) {
        self.concurrencyType = concurrencyType
        persistentStoreCoordinator = coordinator
        parent = nil
        executor = concurrencyType == .mainQueue ? ContextExecutor(main: ()) : ContextExecutor(label: "strata.context.\(name ?? "private")")
        let core = ContextCore(coordinator: coordinator, hub: hub)
        coreKey = ObjectIdentifier(core)
        core.name = name
        core.transactionAuthor = transactionAuthor
        self.core = core
        core.context = self
        if persistentUndo {
            core.persistsUndo = true
            do { try core.loadPersistentUndo() } catch { core.recordProblem(.wrapping(error, "persistent undo could not be loaded: \(error)")) }
        }
    }

    /// Creates a child of `parent` (Core Data's `parent` context): its fetches and faults see
    /// the parent's current state, unsaved changes included, and `save()` pushes its changes
    /// into the parent — which then has them as unsaved changes of its own, one undo group
    /// per child save — not to the store. Children can have children.
    public init(concurrencyType: ConcurrencyType, parent: ManagedObjectContext, name: String? = nil, transactionAuthor: String? = nil) {
        self.concurrencyType = concurrencyType
        persistentStoreCoordinator = parent.persistentStoreCoordinator
        self.parent = parent
        executor = concurrencyType == .mainQueue ? ContextExecutor(main: ()) : ContextExecutor(label: "strata.context.\(name ?? "child")")
        let core = ContextCore(coordinator: parent.persistentStoreCoordinator, hub: hub)
        coreKey = ObjectIdentifier(core)
        core.name = name
        core.transactionAuthor = transactionAuthor
        core.parentContext = parent
        self.core = core
        core.context = self
        let inbox = RemapInbox()
        core.remapInbox = inbox
        parent.children.add(self, key: coreKey, inbox: inbox)
    }

    // MARK: - Running code on the context

    /// Runs `body` on the context's queue and returns its result (`perform`).
    public nonisolated func perform<T: Sendable>(_ body: @Sendable (isolated ManagedObjectContext) throws -> T) async rethrows -> T {
        if executor.isMain {
            // Hop explicitly: the runtime doesn't always treat an actor sharing the main
            // actor's executor as main-bound.
            return try await withoutActuallyEscaping(body) { body in
                try await MainActor.run { try self.assumeIsolated { try $0.runEvent(body) } }
            }
        }
        return try await runEvent(body)
    }

    /// Schedules `body` on the context's queue and returns at once — Core Data's non-async
    /// `perform(_:)`, for code that can't `await` (a notification observer, a callback).
    /// Blocks run one at a time in the order they were scheduled, after what the queue
    /// already holds; each is an event as in the awaiting `perform` (merging first, posting
    /// objects-did-change at its end). Nothing can be returned and errors can't escape:
    /// handle them inside. In `async` code the awaiting `perform` is chosen.
    ///
    /// ```swift
    /// NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSaveObjectsNotification, object: background, queue: nil) { note in
    ///     guard let save = note.userInfo?["contextDidSave"] as? ContextDidSave else { return }
    ///     viewContext.perform { context in context.mergeChanges(fromContextDidSave: save) }
    /// }
    /// ```
    public nonisolated func perform(_ body: @escaping @Sendable (isolated ManagedObjectContext) -> Void) {
        executor.queue.async { self.assumeIsolated { $0.runEvent(body) } }
    }

    /// When a ``perform(schedule:isolation:_:)`` block runs (Core Data's
    /// `NSManagedObjectContext.ScheduledTaskType`).
    public enum ScheduledTaskType: Sendable, Hashable {
        /// At once when the caller already runs on the context's queue (re-entrant, as
        /// ``performAndWait(_:)`` is: no block scheduled before it runs first); otherwise
        /// scheduled as ``enqueued``.
        case immediate
        /// After every block the context's queue holds, in the order they were scheduled —
        /// also when the caller already runs on the queue.
        case enqueued
    }

    /// Runs `body` on the context's queue as `schedule` says and returns its result (Core
    /// Data's `perform(schedule:_:)`). `perform(_:)` is this with ``ScheduledTaskType/enqueued``
    /// from code off the queue; the two differ only for a caller already on the queue (an
    /// `async` function isolated to the context), where `.immediate` runs the block at once.
    ///
    /// ```swift
    /// let count = try await context.perform(schedule: .enqueued) { context in
    ///     try context.count(for: FetchRequest(entityName: "Player"))
    /// }
    /// ```
    public func perform<T: Sendable>(
        schedule: ScheduledTaskType, isolation: isolated (any Actor)? = #isolation,
        _ body: @Sendable (isolated ManagedObjectContext) throws -> T
    ) async rethrows -> T {
        // On the queue already: `performAndWait` runs the block at once (it is re-entrant).
        if schedule == .immediate, executor.isCurrent { return try performAndWait(body) }
        return try await perform(body)
    }

    /// Runs one block as an event: an automatically merging context first merges what the
    /// store gained since it last looked; the end of the outermost block posts the
    /// objects-did-change notification.
    private func runEvent<T>(_ body: (isolated ManagedObjectContext) throws -> T) rethrows -> T {
        core.beginEvent()
        defer { core.endEvent() }
        return try body(self)
    }

    /// Whether the calling code runs on this context's queue (Core Data's concurrency
    /// debugging, as a check you can assert).
    public nonisolated var isOnContextQueue: Bool { executor.isCurrent }

    /// Runs `body` on the context's queue, blocking until it's done (`performAndWait`).
    /// Re-entrant: from code already on the queue it runs at once.
    public nonisolated func performAndWait<T: Sendable>(_ body: @Sendable (isolated ManagedObjectContext) throws -> T) rethrows -> T {
        if executor.isCurrent { return try assumeIsolated { try $0.runEvent(body) } }
        return try executor.sync { try self.assumeIsolated { try $0.runEvent(body) } }
    }

    // MARK: - Properties

    /// The context's name (`name`); with `transactionAuthor`, it keys persisted undo.
    public var name: String? {
        get { core.name }
        set { core.name = newValue }
    }
    /// The author recorded in the transactions this context saves (`transactionAuthor`).
    public var transactionAuthor: String? {
        get { core.transactionAuthor }
        set { core.transactionAuthor = newValue }
    }
    /// How long fetched values stay fresh (`stalenessInterval`): whether a fault a fetch
    /// left its row on (Core Data's row cache) fires from that row or reads the store.
    ///
    /// Below zero (the default, -1, as in Core Data), it fires from the row however old it
    /// is — values as of the fetch, though another context or process may have saved since;
    /// `refresh(_:mergeChanges:)` drops the row. Zero or more, it reads the store (a child:
    /// its parent) when it fires: Strata keeps no fetch time with a row, so no row can be
    /// shown to be younger than the interval, and fresher values never break it. A fault
    /// without a row always reads the store. Spec 0006 §14.8.
    ///
    /// ```swift
    /// context.stalenessInterval = 0   // faults see what other processes saved since the fetch
    /// ```
    public var stalenessInterval: TimeInterval {
        get { core.objects.stalenessInterval }
        set { core.objects.stalenessInterval = newValue.isNaN ? -1 : newValue }
    }

    /// The app's own values kept with the context (Core Data's `userInfo`), usable only on
    /// the context's queue. This is where something that lives inside the context — a
    /// ``FetchedResultsController`` and its delegate, managed objects — is kept from one
    /// `perform` to the next:
    ///
    /// ```swift
    /// try await viewContext.perform { context in
    ///     let teams = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
    ///     teams.delegate = list
    ///     try teams.performFetch()
    ///     context.userInfo["teams"] = teams
    ///     context.userInfo["teamList"] = list          // the delegate is held weakly
    /// }
    /// // later, after other blocks changed and saved teams:
    /// try await viewContext.perform { context in
    ///     let teams = context.userInfo["teams"] as? FetchedResultsController<ManagedObject>
    /// }
    /// ```
    ///
    /// A controller kept here holds its context weakly, so the context and the controller
    /// are freed together. `reset()` leaves the dictionary alone.
    public var userInfo: [AnyHashable: Any] = [:]

    /// The results of asynchronous fetches scheduled and not yet run, by token
    /// (`execute(_:)` of an asynchronous fetch request): the scheduled block finds its result here, on the
    /// context's queue, so the result (which holds managed objects) never leaves it.
    var asynchronousFetches: [UUID: AnyObject] = [:]

    /// What a fault does when its object is no longer in the store — another context or
    /// process deleted it — and a property read fires it (`shouldDeleteInaccessibleFaults`).
    ///
    /// On (the default, as in Core Data), the object is marked deleted (``ManagedObject/isDeleted``)
    /// and reads as empty: nil attributes and to-one relationships, empty to-many ones; the
    /// next save is not affected. Off, every property reads as nil and `objectNotFound`
    /// (133000) is recorded for the next `save()` to throw. Either way, `existingObject(with:)`
    /// and ``ManagedObject/fulfillFault()`` throw `objectNotFound` for such an object, and a
    /// change saved to it is refused by the store.
    public var shouldDeleteInaccessibleFaults: Bool {
        get { core.shouldDeleteInaccessibleFaults }
        set { core.shouldDeleteInaccessibleFaults = newValue }
    }
    /// The query generation the context reads (`queryGenerationToken`): nil while it reads
    /// the store's current state (the default); otherwise the generation it is pinned to —
    /// pass it to another context's ``setQueryGenerationFrom(_:)`` to read the same state.
    /// A context set to ``QueryGenerationToken/current`` that hasn't read yet is pinned to
    /// the newest generation when this is asked. Spec 0006 §22.
    public var queryGenerationToken: QueryGenerationToken? { core.queryGenerationToken }

    /// Pins the context to a generation of its store (`setQueryGenerationFrom(_:)`), so its
    /// fetches, counts and faults keep seeing that state while others save; nil unpins it.
    ///
    /// - ``QueryGenerationToken/current``: the newest generation at the next read.
    /// - Another context's ``queryGenerationToken``: that context's generation.
    ///
    /// The generation moves to the newest when the context saves (to the state its save
    /// made), merges (`mergeChanges(fromContextDidSave:)` or automatic merging: to the state
    /// merged) or is reset. Unsaved changes are kept and seen on top of it, as always.
    ///
    /// - Throws: ``ContextError/invalidArgument(_:)`` for a token of another store, a
    ///   generation past the store's head or before its purge point, or a child context (it
    ///   sees its parent's generation).
    public func setQueryGenerationFrom(_ token: QueryGenerationToken?) throws {
        try ContextError.wrappingStoreFailures("setting the query generation failed") { try core.setQueryGeneration(token) }
    }
    /// Whether the context keeps every object registered in it alive (`retainsRegisteredObjects`).
    ///
    /// Off (the default), the context holds only objects with unsaved changes; an unchanged
    /// object lives as long as the app holds it, and one the app drops is freed (its next
    /// `object(with:)` is a new fault). On, the context holds every registered object —
    /// those registered before it was turned on too — until ``reset()`` or until it is turned
    /// off again, when unchanged objects nothing else holds are freed. Turn it on to keep a
    /// working set loaded between blocks without holding the objects yourself.
    ///
    /// ```swift
    /// context.retainsRegisteredObjects = true
    /// _ = try context.fetch(FetchRequest(entityName: "Book"))   // dropped at once…
    /// context.registeredObject(for: bookID)                       // …and still here, loaded
    /// ```
    public var retainsRegisteredObjects: Bool {
        get { core.registry.holdsObjects }
        set { core.registry.holdObjects(newValue) }
    }

    /// Whether delete rules run as soon as an object is deleted (`propagatesDeletesAtEndOfEvent`).
    ///
    /// On (the default), ``delete(_:)`` applies the cascade and nullify rules at once: the
    /// objects a cascade reaches are deleted and the inverses of the others drop the object
    /// before `delete` returns (Core Data applies them at the end of the event, in
    /// `processPendingChanges()`; by then the two agree). Off, they wait for ``save()``:
    /// until then only the object itself is deleted, and its destinations still name it. The
    /// save runs them before validating, recorded for undo with the deletes, so undoing the
    /// delete brings the cascaded objects and the nullified references back; what is stored
    /// is the same either way. Turning it on again runs the rules still waiting. Deny rules
    /// are checked at save in both modes.
    public var propagatesDeletesAtEndOfEvent: Bool {
        get { core.propagatesDeletes }
        set {
            core.propagatesDeletes = newValue
            if newValue { core.propagateDeferredDeletes(in: self) }
        }
    }

    /// The model.
    public nonisolated var managedObjectModel: ManagedObjectModel { persistentStoreCoordinator.managedObjectModel }

    // MARK: - Objects

    /// Inserts a new object of `entityName` (`NSEntityDescription.insertNewObject(forEntityName:into:)`).
    public func insertNewObject(forEntityName entityName: String) throws -> ManagedObject {
        try core.insert(entityName: entityName, as: nil, in: self)
    }

    /// Inserts a new object of a registered class (`T(context:)`).
    public func insert<T: ManagedObject>(_ type: T.Type, entityName: String) throws -> T {
        guard let object = try core.insert(entityName: entityName, as: type, in: self) as? T else {
            throw ContextError.invalidArgument("\(type) can't be created for \(entityName)")
        }
        return object
    }

    /// Inserts a new object of the entity `type` is registered for with the coordinator's
    /// ``PersistentStoreCoordinator/register(_:forEntityName:)`` — Core Data's `Book(context:)`.
    ///
    /// ```swift
    /// coordinator.register(Book.self, forEntityName: "Book")
    /// let book = try context.insert(Book.self)
    /// ```
    ///
    /// - Throws: ``ContextError/invalidArgument(_:)`` when `type` is registered for no entity
    ///   or for several (then name one with ``insert(_:entityName:)``).
    public func insert<T: ManagedObject>(_ type: T.Type) throws -> T {
        let names = persistentStoreCoordinator.entityNames(registeredFor: type)
        guard names.count == 1 else {
            throw ContextError.invalidArgument(
                names.isEmpty
                    ? "\(type) is registered for no entity: register it with register(\(type).self, forEntityName:) or name the entity with insert(\(type).self, entityName:)"
                    : "\(type) is registered for several entities (\(names.joined(separator: ", "))): name one with insert(\(type).self, entityName:)")
        }
        return try insert(type, entityName: names[0])
    }

    /// The entity a class inserts objects of (``ManagedObject/init(context:)``): the one it is
    /// registered for, else — as Core Data's generated classes are named after their
    /// entities — the entity of its own name, for which it is then registered (when no other
    /// class is).
    func entityName(inserting type: ManagedObject.Type) throws -> String {
        let coordinator = persistentStoreCoordinator
        let names = coordinator.entityNames(registeredFor: type)
        if names.count == 1 { return names[0] }
        if names.count > 1 {
            throw ContextError.invalidArgument(
                "\(type) is registered for several entities (\(names.joined(separator: ", "))): name one with init(entityName:context:)")
        }
        let own = String(describing: type)
        guard managedObjectModel.entity(named: own) != nil else {
            throw ContextError.invalidArgument(
                "\(type) is registered for no entity and the model has no entity \(own): register it with register(\(type).self, forEntityName:) or name the entity with init(entityName:context:)")
        }
        coordinator.registerByName(type)
        return own
    }

    /// Deletes `object`, applying delete rules now (cascade, nullify) — at the save instead
    /// when ``propagatesDeletesAtEndOfEvent`` is off; deny is checked at save.
    public func delete(_ object: ManagedObject) { core.delete(object, in: self) }

    /// The object for `id`: registered, or a new fault — no I/O (`object(with:)`).
    ///
    /// - Throws: ``ContextError/invalidObject(_:)`` saying which it is for an ID that can name
    ///   no object here: another store's, a temporary ID this context doesn't hold, an entity
    ///   the model lacks or an abstract one (spec 0006 §3.2).
    public func object(with id: ManagedObjectID) throws -> ManagedObject {
        // In a child, a temporary ID an ancestor has made permanent since names the object
        // under its permanent ID (spec 0006 §3.1); a permanent ID an ancestor gave since names
        // the object held under the old one, which takes it first.
        core.catchUpOnRemaps()
        let id = try core.resolvingTemporaryIDs([id])[0]
        guard let object = core.object(with: id) else { throw core.unresolvableIDError(id) }
        return object
    }

    /// The object for `id`, loaded now (`existingObject(with:)`).
    ///
    /// - Throws: ``ContextError/objectNotFound(_:)`` if it isn't in the store.
    public func existingObject(with id: ManagedObjectID) throws -> ManagedObject {
        let object = try self.object(with: id)
        try object.fulfillFault()
        if object.isInvalidated { throw ContextError.objectNotFound(id.description) }
        return object
    }

    /// The objects for `ids`, in the same order, their values loaded now:
    /// ``existingObject(with:)`` for many IDs at once, with the values of those not yet
    /// loaded read in one store snapshot (a child context's: in one request to its parent),
    /// not one read per object. Where an ID's object isn't in the store, the result holds nil.
    ///
    /// Core Data apps load a batch of IDs with a fetch of `SELF IN %@`; this is the direct
    /// way, and the one to pair with ``fetchObjectIDs(_:)`` to go through a large result a
    /// chunk at a time:
    ///
    /// ```swift
    /// let ids = try context.fetchObjectIDs(request)       // tens of bytes per result
    /// for start in stride(from: 0, to: ids.count, by: 1_000) {
    ///     for case let object? in try context.existingObjects(with: Array(ids[start..<min(start + 1_000, ids.count)])) {
    ///         process(object)
    ///     }
    ///     context.reset()                                 // drop this chunk's objects
    /// }
    /// ```
    ///
    /// - Throws: ``ContextError/invalidObject(_:)`` for a temporary ID of another context or
    ///   an ID of an entity the model doesn't have; a store error if the read fails.
    public func existingObjects(with ids: [ManagedObjectID]) throws -> [ManagedObject?] {
        try ContextError.wrappingStoreFailures("loading \(ids.count) object(s) failed") { try core.existingObjects(with: ids) }
    }

    /// The registered object for `id`, or nil (`registeredObject(for:)`). In a child context,
    /// a temporary ID an ancestor has made permanent since names the object registered under
    /// the permanent ID (spec 0006 §3.1).
    public func registeredObject(for id: ManagedObjectID) -> ManagedObject? {
        core.catchUpOnRemaps()
        if let object = core.registered(id) { return object }
        guard id.isTemporaryID, core.parentContext != nil, let resolved = try? core.resolvingTemporaryIDs([id])[0], resolved != id else { return nil }
        return core.registered(resolved)
    }

    /// Gives the inserted objects permanent IDs before they are saved
    /// (`obtainPermanentIDs(for:)`): the primary keys are reserved in the log, so the IDs and
    /// URIs stay the same through the save. Objects already permanent are left alone.
    ///
    /// - Throws: ``ContextError/store(_:underlying:)`` when the store refuses the reservation (it is
    ///   read-only, say); no object's ID is changed then.
    public func obtainPermanentIDs(for objects: [ManagedObject]) throws { try core.obtainPermanentIDs(for: objects) }

    /// Unsaved inserted objects (`insertedObjects`).
    public var insertedObjects: Set<ManagedObject> { Set(core.insertedObjects) }
    /// Objects with unsaved changes (`updatedObjects`).
    public var updatedObjects: Set<ManagedObject> { Set(core.updatedObjects) }
    /// Objects deleted but not yet saved (`deletedObjects`).
    public var deletedObjects: Set<ManagedObject> { Set(core.deletedObjects) }
    /// Every object the context knows and something still holds (`registeredObjects`): the
    /// app, or the context itself (objects with unsaved changes; every registered object
    /// while ``retainsRegisteredObjects`` is on).
    public var registeredObjects: Set<ManagedObject> {
        Set(core.registry.values.compactMap(\.object)).union(core.retained.values)
    }
    /// Whether there are unsaved changes (`hasChanges`).
    public var hasChanges: Bool { core.hasChanges }

    // MARK: - Saving and discarding

    /// Validates every change and saves them as one transaction (`save()`).
    ///
    /// - Throws: ``ContextError/validation(_:)`` listing every failure (Core Data's codes),
    ///   ``ContextError/storeRefused(_:)`` for a uniqueness or reference violation,
    ///   ``ContextError/store(_:underlying:)`` (256) for any other failure of the store — the storage
    ///   layer's too, such as a data file deleted while open (`STRATA_DATA_FILE_GONE`, its
    ///   path in the message); nothing is written then, and the context keeps its changes.
    public func save() throws {
        try ContextError.wrappingStoreFailures("the save failed and nothing was written") { try core.save(in: self) }
    }

    /// Discards unsaved changes and clears the undo stacks (`rollback()`) — with persisted
    /// undo, for good: the groups don't come back after a restart (spec 0006 §13).
    public func rollback() { core.rollback() }

    /// Forgets every object and clears the undo stacks (`reset()`), as ``rollback()`` does.
    public func reset() { core.reset() }

    /// Re-reads `object` from the store (`refresh(_:mergeChanges:)`): with `mergeChanges`,
    /// unsaved changes win over store values and transient values are restored (a fault stays
    /// a fault, read when next used); without, the object becomes a fault and its unsaved
    /// changes are dropped. Either way its fetched properties are fetched again at their next
    /// read (until then they keep the objects their first read fetched).
    public func refresh(_ object: ManagedObject, mergeChanges: Bool) { core.refresh(object, mergeChanges: mergeChanges) }

    /// Refreshes every registered object, keeping unsaved changes (`refreshAllObjects()`):
    /// loaded objects show the store's values (read together, and rebased as a merge rebases
    /// them), faults stay faults (nothing is read for them).
    public func refreshAllObjects() {
        core.refreshAllObjects(registeredObjects)
    }

    /// Closes the current undo group and posts the objects-did-change notification for the
    /// changes since the last one (`processPendingChanges()`).
    public func processPendingChanges() {
        core.processPendingChanges()
        core.postPendingChanges()
    }

    // MARK: - Fetching

    /// The objects `request` matches, unsaved changes included (`fetch(_:)`), with its
    /// faulting, batching and prefetching options applied, as instances of the request's
    /// `Result` class (Core Data's `fetch(_:)` of an `NSFetchRequest<ResultType>`).
    ///
    /// ```swift
    /// let employees = try context.fetch(Employee.fetchRequest())   // [Employee]
    /// let objects = try context.fetch(FetchRequest(entityName: "Employee"))   // [ManagedObject]
    /// ```
    ///
    /// - Throws: ``ContextError/invalidFetchRequest(part:reason:)`` naming the part of the request at fault
    ///   (an unknown entity or key path, a type mismatch, a missing substitution variable),
    ///   when ``FetchRequest/resultType`` isn't `.managedObject` (use ``execute(_:)``,
    ///   ``fetchObjectIDs(_:)``, ``fetchDictionaries(_:)`` or ``count(for:)``), or — part
    ///   `entityName` — when a matching object isn't a `Result`: the class registered for its
    ///   entity (or inherited from a superentity) is another one. Nothing is returned then.
    ///   ``ContextError/store(_:underlying:)`` (256) when the store can't be read — a context pinned to an
    ///   older query generation reads back through compacted events, and their segment file
    ///   is damaged or missing —, naming the file (spec 0006 §8.3); so do the other fetches,
    ///   ``count(for:)``, ``existingObject(with:)`` and every other read of the store.
    public func fetch<Result>(_ request: FetchRequest<Result>) throws -> [Result] {
        guard request.resultType == .managedObject else {
            throw ContextError.invalidFetchRequest(
                part: "resultType", reason: "fetch(_:) returns managed objects, but the request asks for \(request.resultType); use execute(_:)")
        }
        let objects = try ContextError.wrappingStoreFailures("the fetch of \(request.entityName) failed") {
            try core.fetchManagedObjects(request.erased)
        }
        // The untyped request (most of them) returns the array as it is: `objects as?
        // [Result]` would copy and check it element by element even when the types are the
        // same (a tenth of a 100,000-object fetch, measured in C2).
        if Result.self == ManagedObject.self { return unsafeBitCast(objects, to: [Result].self) }
        if let typed = objects as? [Result] { return typed }
        var typed: [Result] = []
        typed.reserveCapacity(objects.count)
        for object in objects {
            guard let instance = object as? Result else {
                throw ContextError.invalidFetchRequest(
                    part: "entityName",
                    reason: "the request is a FetchRequest<\(Result.self)>, but \(object.objectID) (entity \(object.entity.name)) is an instance of "
                        + "\(type(of: object)), not of \(Result.self); register \(Result.self) (or a subclass) for entity \(object.entity.name) "
                        + "with register(_:forEntityName:), or fetch it with a FetchRequest<ManagedObject>")
            }
            typed.append(instance)
        }
        return typed
    }

    /// The objects `request` matches, as instances of the custom class `type` (objects of
    /// another class are left out). A class registered for no entity is first registered
    /// for the entity named as the class, as ``ManagedObject/init(context:)`` registers it
    /// (when that entity isn't abstract and has no class), so `fetch(FetchRequest(entityName:
    /// "Run"), as: Run.self)` finds the runs in a coordinator where no `Run` was inserted yet.
    /// Kept for source compatibility: a typed request (`FetchRequest<Run>`,
    /// `Run.fetchRequest()`) fetched with ``fetch(_:)`` says the same, and throws instead of
    /// leaving out an object of another class.
    ///
    /// ```swift
    /// let runs = try context.fetch(FetchRequest(entityName: "Run"), as: Run.self)
    /// ```
    public func fetch<Result, T: ManagedObject>(_ request: FetchRequest<Result>, as type: T.Type) throws -> [T] {
        var request = request.erased
        if request.resultClass == nil { request.resultClass = type }
        return try fetch(request).compactMap { $0 as? T }
    }

    /// The IDs of the objects `request` matches (the `managedObjectIDResultType` fetch);
    /// `Sendable`, so they can be handed to another context. Any `FetchRequest<Result>` (its
    /// `Result` class makes no difference).
    ///
    /// The same objects in the same order as ``fetch(_:)``, but no managed object is made
    /// and no row kept for a stored object (unless a key path through a relationship or the
    /// in-memory filter needs one): the result costs tens of bytes per object. With
    /// ``existingObjects(with:)`` it is the way through a result too large to hold.
    public func fetchObjectIDs<Result>(_ request: FetchRequest<Result>) throws -> [ManagedObjectID] {
        try ContextError.wrappingStoreFailures("the fetch of \(request.entityName) failed") { try core.fetchObjectIDs(request.erased) }
    }

    /// One dictionary per matching object, or per group with ``FetchRequest/propertiesToGroupBy``
    /// (the `dictionaryResultType` fetch): ``FetchRequest/propertiesToFetch`` by name, to-one
    /// relationships as object IDs, aggregates under their names; nil values are left out.
    /// Any `FetchRequest<Result>` (its `Result` class makes no difference).
    public func fetchDictionaries<Result>(_ request: FetchRequest<Result>) throws -> [[String: any Sendable]] {
        try ContextError.wrappingStoreFailures("the fetch of \(request.entityName) failed") { try core.fetchDictionaries(request.erased) }
    }

    /// Runs `request` and returns what its ``FetchRequest/resultType`` asks for (objects as
    /// ``ManagedObject``s, whatever the request's `Result`).
    public func execute<Result>(_ request: FetchRequest<Result>) throws -> FetchResult {
        try ContextError.wrappingStoreFailures("the fetch of \(request.entityName) failed") { try core.execute(request.erased) }
    }

    /// The number of objects `request` matches (`count(for:)`), unsaved changes included;
    /// counted without creating managed objects where the store or an index can answer.
    /// Any `FetchRequest<Result>` (its `Result` class makes no difference).
    public func count<Result>(for request: FetchRequest<Result>) throws -> Int {
        try ContextError.wrappingStoreFailures("the count of \(request.entityName) failed") { try core.count(request.erased) }
    }

    /// The plan `request` would run with: which index finds its candidates, what is left to
    /// filter, how it is ordered (Strata's counterpart of SQLite's `EXPLAIN QUERY PLAN`).
    ///
    /// ```swift
    /// let request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "age BETWEEN {30, 40}"))
    /// print(try context.explain(request))   // index scan Person.age [30, 40]
    /// ```
    ///
    /// - Throws: the errors ``fetch(_:)`` throws for a request that can't run.
    public func explain<Result>(_ request: FetchRequest<Result>) throws -> QueryPlan { try core.explain(core.prepared(request.erased)) }

    // MARK: - Undo

    /// Undoes the last undo group (`undoManager.undo()`).
    ///
    /// - Throws: ``ContextError/undoConflict(object:property:expected:found:)`` when undoing
    ///   saved work another writer has since changed; nothing is changed then. The group
    ///   stays on top of the undo stack, and every undo is refused the same way — undo never
    ///   skips a group to reach the ones below, which would leave the other writer's change
    ///   mixed with values set back from before it — until the store holds the value the
    ///   group expects again (the other writer's change undone, or set back and saved), or
    ///   ``removeAllUndoActions()`` (or ``rollback()``, ``reset()``) drops the stacks
    ///   (spec 0006 §12).
    public func undo() throws { try ContextError.wrappingStoreFailures("undo failed") { try core.undo() } }
    /// Redoes the last undone group (`undoManager.redo()`).
    ///
    /// - Throws: ``ContextError/undoConflict(object:property:expected:found:)`` as ``undo()``
    ///   does, the group staying on top of the redo stack.
    public func redo() throws { try ContextError.wrappingStoreFailures("redo failed") { try core.redo() } }

    /// Reverts the saved transaction at `token` — any context's, author's or process's, found
    /// through the history (``history(_:)``, `strata log`) — as ``undo()`` undoes this
    /// context's own saved work (spec 0006 §25): its changes, all its groups as one, are
    /// applied backwards to this context's objects (inserted objects deleted, deleted ones
    /// brought back under their IDs, values and memberships set back), and the next
    /// ``save()`` writes them as an `undo(of:)` transaction. Until then ``rollback()``
    /// discards it; ``redo()`` applies the transaction again.
    ///
    /// It is checked against the store's current state first: if a later transaction changed
    /// a value it set, deleted an object it changed, or brought back one it deleted, nothing
    /// is changed and it throws ``ContextError/undoConflict(object:property:expected:found:)``
    /// naming the object, the property and both values — never a silent overwrite.
    ///
    /// ```swift
    /// if let bad = try context.fetchHistory(.author("importer")).last {
    ///     try context.revertTransaction(at: bad.token)
    /// }
    /// try context.save()
    /// ```
    ///
    /// - Parameter actionName: the undo action name (default: the transaction's own).
    /// - Throws: ``HistoryError`` for a token of another store, past the head, or in purged
    ///   history; ``ContextError/invalidArgument(_:)`` for a migration, a transaction without
    ///   object changes, one naming entities or properties this model doesn't have (removed
    ///   by a later model version; renamed ones are read under their new names), or a child context; the conflict above;
    ///   ``ContextError/store(_:underlying:)`` (256) naming the file when the transaction's events can't
    ///   be read (a damaged or missing segment file); nothing is changed then.
    public func revertTransaction(at token: HistoryToken, actionName: String? = nil) throws {
        try ContextError.wrappingStoreFailures("reverting transaction \(token.sequence) failed") {
            try core.revertTransaction(at: token, actionName: actionName)
        }
    }

    /// Reverts several saved transactions as one (spec 0006 §25.6): a bad import of many
    /// saves, or everything a buggy client wrote since a deploy, taken back in one go.
    ///
    /// Their changes are taken together in log order, net — a value two of them changed goes
    /// back to what it was before the first, an object one inserted and a later one changed
    /// is deleted — then checked and applied backwards exactly as
    /// ``revertTransaction(at:actionName:)`` checks and applies one transaction. Transactions
    /// between them that aren't reverted are kept: if one of those changed a value that one
    /// of the reverted transactions set and a later one changed again, setting the value
    /// back would take that work with it, so nothing is changed and it throws
    /// ``ContextError/undoConflict(object:property:expected:found:)`` naming the transaction
    /// between them. The next ``save()`` writes one transaction holding the undo of each of
    /// their groups, last first; ``redo()`` applies them all again, ``rollback()`` discards
    /// the revert.
    ///
    /// ```swift
    /// var request = HistoryRequest.after(deployToken)
    /// request.author = "sync-client"
    /// let bad = try context.fetchHistory(request)
    /// try context.revertTransactions(at: bad.map(\.token))
    /// try context.save()
    /// ```
    ///
    /// - Parameters:
    ///   - tokens: the transactions, in any order (each once).
    ///   - actionName: the undo action name (default: the first transaction's own).
    /// - Throws: what ``revertTransaction(at:actionName:)`` throws, for any of them;
    ///   ``ContextError/invalidArgument(_:)`` for an empty list.
    public func revertTransactions(at tokens: [HistoryToken], actionName: String? = nil) throws {
        try ContextError.wrappingStoreFailures("reverting \(tokens.count) transaction(s) failed") {
            try core.revertTransactions(at: tokens, actionName: actionName)
        }
    }
    /// Whether there is something to undo: a group on the undo stack, or changes in the open
    /// group that don't net out to nothing (a value set and set back is nothing to undo:
    /// ``undo()`` would drop that group and undo the one below). False while
    /// ``isUndoEnabled`` is off.
    public var canUndo: Bool {
        guard core.journal.isEnabled else { return false }
        if core.journal.open.hasNetChanges { return true }
        core.loadOlderUndo()
        return !core.journal.undoStack.isEmpty
    }
    /// Whether there is something to redo (false while ``isUndoEnabled`` is off).
    public var canRedo: Bool { core.journal.isEnabled && !core.journal.redoStack.isEmpty }
    /// The name of the action ``undo()`` would undo: the open group's while it has changes
    /// that don't net out to nothing, else the top of the undo stack's (nil while
    /// ``isUndoEnabled`` is off).
    public var undoActionName: String? {
        guard core.journal.isEnabled else { return nil }
        if core.journal.open.hasNetChanges { return core.journal.open.actionName }
        core.loadOlderUndo()
        return core.journal.undoStack.last?.actionName
    }
    /// The name of the action redo would redo (nil while ``isUndoEnabled`` is off).
    public var redoActionName: String? { core.journal.isEnabled ? core.journal.redoStack.last?.actionName : nil }
    /// Names the current undo group's action (`setActionName`).
    public func setActionName(_ name: String) { core.journal.open.actionName = name }
    /// The most undo groups kept (0: unbounded; `levelsOfUndo`). With persisted undo the
    /// groups it drops stay dropped after a restart (spec 0006 §13).
    public var levelsOfUndo: Int {
        get { core.journal.levelsOfUndo }
        set {
            core.journal.levelsOfUndo = max(0, newValue)
            let kept = core.journal.undoStack.count
            core.journal.trim()
            if core.journal.undoStack.count < kept { core.releaseUnreachableRemovedObjects() }
            core.recordUndoCheckpoint()
        }
    }
    /// Whether the context has an undo manager (`undoManager != nil`): while false nothing is
    /// recorded, there is nothing to undo or redo (``canUndo``, ``canRedo``, the action names)
    /// and ``undo()``/``redo()`` do nothing, as messages to a nil manager; true again, the
    /// stacks are back, as when an app reattaches the manager it took away.
    public var isUndoEnabled: Bool {
        get { core.journal.isEnabled }
        set { core.journal.isEnabled = newValue }
    }
    /// Starts an explicit undo group (`beginUndoGrouping()`).
    public func beginUndoGrouping() {
        if core.journal.explicitDepth == 0 { core.closeOpenGroup() }
        core.journal.explicitDepth += 1
    }
    /// Ends an explicit undo group (`endUndoGrouping()`).
    public func endUndoGrouping() {
        guard core.journal.explicitDepth > 0 else { return }
        core.journal.explicitDepth -= 1
        if core.journal.explicitDepth == 0 { core.closeOpenGroup() }
    }
    /// Stops recording undo (`disableUndoRegistration()`); calls nest.
    public func disableUndoRegistration() {
        core.processPendingChanges()
        core.journal.disabledCount += 1
    }
    /// Resumes recording undo (`enableUndoRegistration()`). Without a matching
    /// ``disableUndoRegistration()`` in effect (``removeAllUndoActions()`` ends them all) it
    /// changes nothing, and the next ``save()`` throws ``ContextError/invalidArgument(_:)``
    /// saying so (`UndoManager` raises).
    public func enableUndoRegistration() {
        core.processPendingChanges()
        guard core.journal.disabledCount > 0 else {
            core.recordProblem(.invalidArgument("enableUndoRegistration() without a matching disableUndoRegistration(): nothing was changed"))
            return
        }
        core.journal.disabledCount -= 1
    }
    /// Clears the undo and redo stacks and re-enables undo registration, as
    /// `UndoManager.removeAllActions()` does ("clears the undo and redo stacks and reenables
    /// the manager"): every `disableUndoRegistration()` still open is ended. With persisted
    /// undo the dropped groups stay dropped after a restart (spec 0006 §13): recorded in the
    /// store at once, and again with the next save when groups wait to be saved.
    public func removeAllUndoActions() {
        core.processPendingChanges()
        core.journal.clearStacks()
        // Groups waiting to be saved are dropped too: persisted undo must not read them back.
        if !core.pending.isEmpty { core.journal.dropped = true }
        core.journal.disabledCount = 0
        core.removedObjects.removeAll()
        core.recordUndoCheckpoint()
    }
}

// MARK: - Notifications

extension ManagedObjectContext {
    /// The context's notifications of one kind, as an async sequence (one new sequence per
    /// call; it ends when the caller stops iterating). Payloads carry object IDs — use them
    /// with `object(with:)` in a context — so they cross queues safely. Delivery never blocks
    /// the context: each sequence buffers what it hasn't consumed yet.
    ///
    /// ```swift
    /// for await save in context.notifications(.didSave) {
    ///     await viewContext.perform { $0.mergeChanges(fromContextDidSave: save) }
    /// }
    /// ```
    public nonisolated func notifications<Payload: Sendable>(_ name: ContextNotificationName<Payload>) -> AsyncStream<Payload> {
        hub.stream(name)
    }

    /// Calls `body` synchronously, on the context's queue, for every notification the context
    /// posts, with the objects themselves; returns a token for ``removeObserver(_:)``.
    public func addObserver(_ body: @escaping (ObservedContextChange) -> Void) -> ContextObserverToken {
        core.nextObserverID += 1
        core.observers.append(ContextObserver(id: core.nextObserverID, body: body))
        return ContextObserverToken(id: core.nextObserverID)
    }

    /// Stops calling an observer.
    public func removeObserver(_ token: ContextObserverToken) {
        core.observers.removeAll { $0.id == token.id }
    }
}

// MARK: - Merging and conflicts

extension ManagedObjectContext {
    /// Whether the context merges, on its own, every transaction committed to its store —
    /// by other contexts of this process (right after their save) or by other processes
    /// (noticed by the store's file watcher as soon as they commit, on Linux; and checked
    /// whenever the context next runs a `perform`/`performAndWait` block, or when
    /// ``PersistentStoreCoordinator/mergeStoreChanges(through:)`` is called) — Core Data's
    /// `automaticallyMergesChangesFromParent` for a context on the coordinator. Off by default.
    public var automaticallyMergesChangesFromParent: Bool {
        get { core.automaticallyMerges }
        set {
            guard newValue != core.automaticallyMerges else { return }
            core.automaticallyMerges = newValue
            if parent != nil { return }  // a child merges what its parent tells it
            if newValue {
                core.noteStoreHead()
                persistentStoreCoordinator.mergeHub.add(self, key: coreKey)
                persistentStoreCoordinator.watchStoreForMerging()
            } else {
                persistentStoreCoordinator.mergeHub.remove(key: coreKey)
            }
        }
    }

    /// How conflicts found at save are resolved (`mergePolicy`); default ``StandardMergePolicy/error``.
    public var mergePolicy: any MergePolicy {
        get { core.mergePolicy }
        set { core.mergePolicy = newValue }
    }

    /// Merges another context's save (`mergeChanges(fromContextDidSave:)`): registered
    /// objects it updated are refreshed keeping this context's unsaved changes, registered
    /// objects it deleted leave the context, objects it inserted are found by the next fetch.
    /// Posts did-merge and objects-did-change. A context's own save is ignored.
    public func mergeChanges(fromContextDidSave save: ContextDidSave) {
        core.mergeChanges(fromContextDidSave: save)
    }

    /// Merges the save a ``didSaveObjectsNotification`` describes; other notifications are ignored.
    public func mergeChanges(fromContextDidSave notification: Notification) {
        guard let save = notification.userInfo?[NotificationKey.contextDidSave.rawValue] as? ContextDidSave else { return }
        core.mergeChanges(fromContextDidSave: save)
    }

    /// Merges every transaction committed to the store since this context last merged (or
    /// was created), except its own saves, and returns the sequence it is now in step with.
    ///
    /// - Throws: ``ContextError/store(_:underlying:)`` (256) naming the file when those transactions
    ///   can't be read (compacted meanwhile into a segment file that is damaged or missing).
    @discardableResult
    public func mergeStoreChanges() throws -> UInt64 {
        if parent != nil { throw ContextError.invalidArgument("a child context merges its parent's changes, not the store's") }
        try ContextError.wrappingStoreFailures("merging the store's changes failed") { try core.mergeStoreChanges(through: nil) }
        return core.lastMergedSequence
    }

    /// Checks `object` for conflicts at the next save even if it is unchanged
    /// (`detectConflicts(for:)`): if another writer changed it since this context read it,
    /// the merge policy decides. Loads the object if it is a fault.
    public func detectConflicts(for object: ManagedObject) throws {
        guard object.core === core, !object.isInvalidated else {
            throw ContextError.invalidObject("\(object.objectID) doesn't belong to this context")
        }
        guard !object.isInsertedFlag else { return }
        try object.fulfillFault()
        core.lockedObjects[object.objectID] = object
    }

    /// A message from the parent, handled on this context's queue, asynchronously.
    nonisolated func receiveFromParent(_ message: ParentMessage) {
        executor.queue.async { [weak self] in
            self?.assumeIsolated { context in context.core.receive(message) }
        }
    }

    /// Merges through `sequence` on the context's own queue, asynchronously (the coordinator's broadcast).
    nonisolated func scheduleMerge(through sequence: UInt64) {
        executor.queue.async { [weak self] in
            self?.assumeIsolated { context in context.core.mergeAutomatically(through: sequence) }
        }
    }
}

// MARK: - Core Data's class methods of NSEntityDescription

extension EntityDescription {
    /// Inserts a new object of the entity named `entityName` into `context` — Core Data's
    /// `NSEntityDescription.insertNewObject(forEntityName:into:)`, the idiom of seed 001's
    /// `[NSEntityDescription insertNewObjectForEntityForName:@"Author" inManagedObjectContext:context]`;
    /// the same as ``ManagedObjectContext/insertNewObject(forEntityName:)``.
    ///
    /// ```swift
    /// let author = try EntityDescription.insertNewObject(forEntityName: "Author", into: context)
    /// ```
    ///
    /// - Throws: ``ContextError/unknownEntity(_:)``; ``ContextError/invalidArgument(_:)`` for an
    ///   abstract entity.
    public static func insertNewObject(forEntityName entityName: String, into context: isolated ManagedObjectContext) throws -> ManagedObject {
        try context.insertNewObject(forEntityName: entityName)
    }

    /// The entity named `entityName` in the model of `context`'s coordinator, or nil — Core
    /// Data's `NSEntityDescription.entity(forEntityName:in:)`. Callable from any thread: the
    /// model doesn't change.
    ///
    /// ```swift
    /// let runEntity = EntityDescription.entity(forEntityName: "Run", in: context)
    /// ```
    public static func entity(forEntityName entityName: String, in context: ManagedObjectContext) -> EntityDescription? {
        context.persistentStoreCoordinator.managedObjectModel.entity(named: entityName)
    }
}
