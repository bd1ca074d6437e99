import Foundation
public import StrataModel
public import StrataPredicate

/// What a context passes to ``ManagedObject/init(_:)`` when it creates an object; opaque to apps.
public struct ObjectCreation {
    let entity: EntityInfo
    let objectID: ManagedObjectID
    let registry: ObjectRegistry
}

/// Which snapshot events woke an object (`awake(fromSnapshotEvents:)`).
public struct SnapshotEvents: OptionSet, Sendable {
    /// The raw bits.
    public let rawValue: Int
    /// Creates events from raw bits.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// An undo of an insertion (the object was restored as deleted).
    public static let undoInsertion = SnapshotEvents(rawValue: 1 << 1)
    /// An undo of a deletion (the object came back).
    public static let undoDeletion = SnapshotEvents(rawValue: 1 << 2)
    /// An undo or redo of an update.
    public static let undoUpdate = SnapshotEvents(rawValue: 1 << 3)
    /// A rollback.
    public static let rollback = SnapshotEvents(rawValue: 1 << 4)
    /// A refresh.
    public static let refresh = SnapshotEvents(rawValue: 1 << 5)
    /// A merge of another context's changes.
    public static let mergePolicy = SnapshotEvents(rawValue: 1 << 6)
}

/// An object managed by a context (Core Data's `NSManagedObject`).
///
/// Read and write properties with key-value coding (`value(forKey:)`, `setValue(_:forKey:)`,
/// `value(forKeyPath:)` with collection operators), or subclass and register the class with
/// the coordinator for typed properties and lifecycle hooks. An object belongs to one
/// context and is used only inside that context's `perform` closures.
///
/// ```swift
/// final class Run: ManagedObject {
///     var processID: Int32 { get { self.get("processID") ?? 0 } set { setValue(newValue, forKey: "processID") } }
///     override func awakeFromInsert() { setPrimitiveValue(Date(), forKey: "date") }
///     override func setNilValueForKey(_ key: String) { key == "processID" ? setValue(Int32(0), forKey: key) : super.setNilValueForKey(key) }
/// }
/// ```
open class ManagedObject: KeyValueCoding, PredicateObjectIdentity, Hashable, CustomStringConvertible {
    // The state below is marked `@exclusivity(unchecked)`: every value read would otherwise
    // pay several dynamic exclusivity checks (about a tenth of a fetch's instructions). No
    // access to it overlaps another: it is only touched from the context's executor, and
    // never across a call that could reach the same property.
    let info: EntityInfo
    /// The object's entity (`entity`).
    public var entity: EntityDescription { info.entity }
    /// The object's ID (`objectID`); temporary until the first save.
    @exclusivity(unchecked) public internal(set) var objectID: ManagedObjectID
    /// The registry the object is in; it reaches the context.
    let registry: ObjectRegistry
    /// The context's core; nil once the context is gone.
    var core: ContextCore? { registry.core }

    /// Values as last read from or saved to the store; nil while the object is a fault.
    /// Held by slot (``fastCommitted``) when they came from a fetched row, and turned into
    /// a dictionary the first time something asks for them by name.
    var committed: [String: PropertyValue]? {
        get {
            if let fastCommitted {
                let values = fastCommitted.dictionary
                storedCommitted = values
                self.fastCommitted = nil
                return values
            }
            return storedCommitted
        }
        set {
            storedCommitted = newValue
            fastCommitted = nil
        }
    }
    @exclusivity(unchecked) var storedCommitted: [String: PropertyValue]? { didSet { valuesChanged() } }
    @exclusivity(unchecked) var fastCommitted: PropertyRow? { didSet { valuesChanged() } }
    /// Whether the committed values are loaded (the object is not a fault, unless inserted).
    var hasCommittedValues: Bool { storedCommitted != nil || fastCommitted != nil }
    /// The committed value of `property`, if loaded and held.
    func committedValue(_ property: PropertyInfo) -> PropertyValue? {
        // Read in place (binding the row would copy it: a retain and release per read).
        if fastCommitted != nil { return fastCommitted?[property] ?? nil }
        return storedCommitted?[property.name]
    }
    /// Keeps `value` as the committed value of `property` (a derived side read from the
    /// store), when the committed values are loaded.
    func cacheCommittedValue(_ value: PropertyValue, for property: PropertyInfo) {
        if fastCommitted != nil {
            fastCommitted?[property] = value
        } else if storedCommitted != nil {
            storedCommitted?[property.name] = value
        }
    }

    /// Forgets the cached committed value of `property` (a derived side another writer's
    /// change made stale): the next read takes it from the store again.
    func forgetCommittedValue(for property: PropertyInfo) {
        if fastCommitted != nil {
            fastCommitted?[property] = nil
        } else if storedCommitted != nil {
            storedCommitted?[property.name] = nil
        }
    }

    /// A fetched row waiting for the fault to fire (Core Data's row cache): firing uses it
    /// instead of reading the store. Held by slot (``fastRow``) when the fetch read it so.
    var row: [String: PropertyValue]? {
        get { fastRow?.dictionary ?? storedRow }
        set {
            storedRow = newValue
            fastRow = nil
        }
    }
    @exclusivity(unchecked) var storedRow: [String: PropertyValue]?
    @exclusivity(unchecked) var fastRow: PropertyRow?
    var hasRow: Bool { storedRow != nil || fastRow != nil }
    /// Keeps a fetched row, held by slot, for the fault to fire from.
    func keepRow(_ row: PropertyRow) {
        storedRow = nil
        fastRow = row
    }
    /// Loads a fault's values: through the context, or, once the context is gone, from the
    /// fetched row it still holds (if any).
    func fireFault() {
        guard !hasCommittedValues, !isInsertedFlag else { return }
        if let core { core.fulfill(self) } else { _ = fireFromRow() }
    }
    /// Fires the fault from the fetched row it holds, if it holds one (no context needed):
    /// the row becomes the committed values, in the form it is held in. False otherwise.
    func fireFromRow() -> Bool {
        if fastRow != nil {
            // Moved, not copied (no retain and release); one new values stamp, not two.
            if storedCommitted != nil { storedCommitted = nil }
            fastCommitted = fastRow.take()
        } else if let row = storedRow {
            committed = row
            storedRow = nil
        } else {
            return false
        }
        version = rowVersion
        rowVersion = nil
        awakeFromFetchUntracked()
        return true
    }

    /// Runs ``awakeFromFetch()`` with the context's change processing off, as Core Data does
    /// ("so that you can use public setters to establish transient values and other caches
    /// without dirtying the object or its context"): a `setValue(_:forKey:)` there works as
    /// ``setPrimitiveValue(_:forKey:)`` — no undo, no inverse, no objects-did-change.
    ///
    /// The count lives on the registry, which the object holds strongly: reaching the
    /// context through its weak reference on every fault fired cost 9% of a fetch that reads
    /// 100k objects.
    func awakeFromFetchUntracked() {
        registry.awakingFromFetch += 1
        defer { registry.awakingFromFetch -= 1 }
        awakeFromFetch()
    }

    /// Keeps `value` in the waiting row for `property` (a prefetched derived side).
    func cacheRowValue(_ value: PropertyValue, for property: PropertyInfo) {
        if fastRow != nil {
            fastRow?[property] = value
        } else if storedRow != nil {
            storedRow?[property.name] = value
        }
    }
    /// Unsaved values of persistent properties, by name. (`Dictionary()` rather than `[:]`
    /// here and in ``transients``: the literal calls the unspecialized
    /// `init(dictionaryLiteral:)` for every object made.)
    @exclusivity(unchecked) var changes: [String: PropertyValue] = Dictionary() { didSet { valuesChanged() } }
    /// Transient values.
    @exclusivity(unchecked) var transients: [String: PropertyValue] = Dictionary() { didSet { valuesChanged() } }
    /// Changes each time the values change (``changes``, ``transients``, the committed
    /// values), to a stamp unique in the registry: a save compares it with the stamp an undo
    /// group took with its copy of an inserted object's values, to know the copy is current
    /// without comparing them.
    @exclusivity(unchecked) private(set) var valuesStamp: UInt64
    private func valuesChanged() { valuesStamp = registry.nextStamp() }
    /// The context's ``ContextCore/willSaveSerial`` when this object's `willSave` last ran.
    @exclusivity(unchecked) var willSaveStamp: UInt64 = 0
    @exclusivity(unchecked) var isInsertedFlag = false
    @exclusivity(unchecked) var isDeletedFlag = false
    /// Set once the object is removed from its context (after reset, or after a saved delete).
    @exclusivity(unchecked) var isInvalidated = false
    /// Set on the probe instances that map Swift key paths to model keys.
    @exclusivity(unchecked) var keyProbe: KeyProbe?
    /// The batch of a batched fetch this fault belongs to: firing it reads the whole batch.
    @exclusivity(unchecked) var fetchBatch: FetchBatch?
    /// Destinations read by `relationshipKeyPathsForPrefetching`, kept alive (with their
    /// rows) while this object is, so reaching them needs no store read.
    @exclusivity(unchecked) var prefetchedObjects: [ManagedObject] = []
    /// Fetched property values by name, as the IDs of the objects fetched: evaluated at the
    /// first read and kept until the object is refreshed, turned into a fault or its context
    /// reset — Core Data's fetched properties "are not dynamic". IDs, not objects, so an
    /// object among its own fetched values (`colleagues`) isn't kept alive by itself.
    @exclusivity(unchecked) var fetchedValues: [String: [ManagedObjectID]] = Dictionary()
    /// Takes the objects of `ids` (deleted and saved) out of the kept fetched values.
    func forgetFetchedValues(naming ids: Set<ManagedObjectID>) {
        guard !fetchedValues.isEmpty, fetchedValues.values.contains(where: { $0.contains(where: ids.contains) }) else { return }
        fetchedValues = fetchedValues.mapValues { $0.filter { !ids.contains($0) } }
    }
    /// The store version (the sequence of the object's last change) the context last saw:
    /// set when its values are read from the store, at save and at merge; nil while unknown
    /// (an insert, a fault, values taken from a fetched row without its version). Optimistic
    /// locking compares it with the store's at save.
    @exclusivity(unchecked) var version: UInt64?
    /// The version of ``row``, when the fetch that left the row knew it; becomes ``version``
    /// when the fault fires from the row.
    @exclusivity(unchecked) var rowVersion: UInt64?

    /// Created by a context; apps insert objects with `Run(context: context)`,
    /// `context.insertNewObject(forEntityName:)` or `context.insert(Run.self)`.
    public required init(_ creation: ObjectCreation) {
        info = creation.entity
        objectID = creation.objectID
        registry = creation.registry
        valuesStamp = creation.registry.nextStamp()
    }

    /// What ``init(_:)`` does, for the class itself (no subclass): the context makes plain
    /// objects this way, without building an ``ObjectCreation`` to take apart again.
    init(info: EntityInfo, objectID: consuming ManagedObjectID, registry: ObjectRegistry) {
        self.info = info
        self.objectID = objectID
        self.registry = registry
        valuesStamp = registry.nextStamp()
    }

    /// Inserts a new object of this class into `context` (Core Data's `init(context:)`, the
    /// usual idiom in Swift: `let run = Run(context: context)`), of the entity the class is
    /// registered for with ``PersistentStoreCoordinator/register(_:forEntityName:)`` — else
    /// the entity named as the class, as Core Data's generated classes are, for which the
    /// class is then registered (if no other class is), so fetches return it too. The same
    /// as ``ManagedObjectContext/insert(_:)``: defaults set, undo registered,
    /// ``awakeFromInsert(in:)`` run.
    ///
    /// ```swift
    /// final class Run: ManagedObject { ... }
    /// try context.perform { context in
    ///     let run = try Run(context: context)   // entity "Run"
    ///     run.processID = 7
    ///     try context.save()
    /// }
    /// ```
    ///
    /// - Throws: ``ContextError/invalidArgument(_:)`` when the class is registered for
    ///   several entities, or for none and the model has no entity of its name;
    ///   ``ContextError/unknownEntity(_:)``.
    public init(context: isolated ManagedObjectContext) throws {
        let creation = try context.core.creation(forInserting: try context.entityName(inserting: Self.self))
        info = creation.entity
        objectID = creation.objectID
        registry = creation.registry
        valuesStamp = creation.registry.nextStamp()
        context.core.completeInsert(self, info: creation.entity, in: context)
    }

    /// Inserts a new object of this class and entity `entityName` into `context` (Core Data's
    /// `init(entity:insertInto:)`), as ``ManagedObjectContext/insert(_:entityName:)`` does.
    ///
    /// - Throws: ``ContextError/unknownEntity(_:)``; ``ContextError/invalidArgument(_:)`` for
    ///   an abstract entity.
    public init(entityName: String, context: isolated ManagedObjectContext) throws {
        let creation = try context.core.creation(forInserting: entityName)
        info = creation.entity
        objectID = creation.objectID
        registry = creation.registry
        valuesStamp = creation.registry.nextStamp()
        context.core.completeInsert(self, info: creation.entity, in: context)
    }

    /// Inserts a new object of this class and `entity` into `context` — Core Data's
    /// `init(entity:insertInto:)`, seed 001's `[[Run alloc] initWithEntity:runEntity
    /// insertIntoManagedObjectContext:moContext]` — as ``init(entityName:context:)`` does with
    /// the entity's name. Strata has no object outside a context: `context` isn't optional.
    ///
    /// ```swift
    /// let runEntity = try #require(model.entitiesByName["Run"])
    /// let run = try Run(entity: runEntity, insertInto: context)
    /// ```
    ///
    /// - Throws: ``ContextError/unknownEntity(_:)`` when the context's model has no entity of
    ///   that name; ``ContextError/invalidArgument(_:)`` for an abstract entity.
    public init(entity: EntityDescription, insertInto context: isolated ManagedObjectContext) throws {
        let creation = try context.core.creation(forInserting: entity.name)
        info = creation.entity
        objectID = creation.objectID
        registry = creation.registry
        valuesStamp = creation.registry.nextStamp()
        context.core.completeInsert(self, info: creation.entity, in: context)
    }

    deinit {
        // The context's registry doesn't retain the object: take its entry out.
        registry.forget(self)
    }

    // MARK: - State

    /// The context the object belongs to (`managedObjectContext`); nil once removed.
    public var managedObjectContext: ManagedObjectContext? { isInvalidated ? nil : core?.context }
    /// Whether the object's values haven't been loaded yet (`isFault`).
    public var isFault: Bool { !hasCommittedValues && !isInsertedFlag }
    /// The object's faulting state (`faultingState`): 0 when it is fully initialized — its
    /// values loaded, or inserted — and 1 while it is a fault (``isFault``). Core Data
    /// documents only that 0 means "fully initialized and not transitioning"; Strata's
    /// objects have no other transitional state an app can observe.
    ///
    /// ```swift
    /// let team = try context.existingObject(with: id)   // loaded: 0
    /// context.refresh(team, mergeChanges: false)         // a fault again: 1
    /// ```
    public var faultingState: Int { isFault ? 1 : 0 }
    /// Whether the object was inserted and not yet saved (`isInserted`).
    public var isInserted: Bool { isInsertedFlag }
    /// Whether the object has unsaved changes to a persistent property (`isUpdated`).
    public var isUpdated: Bool { !isInsertedFlag && !isDeletedFlag && !changes.isEmpty }
    /// Whether the object is deleted and the deletion not yet saved (`isDeleted`) — or, as
    /// in Core Data, its fault couldn't be fulfilled because the store no longer holds it,
    /// and the context's ``ManagedObjectContext/shouldDeleteInaccessibleFaults`` is on.
    public var isDeleted: Bool { isDeletedFlag || isInaccessible }
    /// The object's fault couldn't be fulfilled (the store no longer holds it) and was
    /// given empty values (``ManagedObjectContext/shouldDeleteInaccessibleFaults``).
    @exclusivity(unchecked) var isInaccessible = false
    /// The insert is noted for the next objects-did-change and not posted yet: until it is,
    /// the object's changes are part of its insert, not updates (spec 0006 §15.3).
    @exclusivity(unchecked) var insertPending = false
    /// Whether the object is inserted, updated or deleted (`hasChanges`).
    public var hasChanges: Bool { isInsertedFlag || isDeletedFlag || !changes.isEmpty }

    /// The persistent properties changed since the last save, with their new values (`changedValues()`).
    public func changedValues() -> [String: Any] {
        var result: [String: Any] = [:]
        for (key, value) in changes { result[key] = externalValue(value, ordered: info.properties[key]?.isOrdered ?? false) ?? NSNull() }
        return result
    }

    /// The values of `keys` (all persistent properties when nil) as last saved or fetched
    /// (`committedValues(forKeys:)`); empty for an unsaved object.
    public func committedValues(forKeys keys: [String]?) -> [String: Any] {
        guard !isInsertedFlag else { return [:] }
        fireFault()
        var result: [String: Any] = [:]
        for key in keys ?? info.orderedNames where !(info.properties[key]?.isTransient ?? true) {
            guard let value = committed?[key] ?? (info.properties[key].flatMap { core?.derivedValue(self, $0) }) else { continue }
            result[key] = externalValue(value, ordered: info.properties[key]?.isOrdered ?? false) ?? NSNull()
        }
        return result
    }

    /// The properties changed since the last `processPendingChanges`, with their values then
    /// (`changedValuesForCurrentEvent()`).
    public func changedValuesForCurrentEvent() -> [String: Any] {
        guard let core else { return [:] }
        var result: [String: Any] = [:]
        for (key, old) in core.journal.currentEventOldValues(for: objectID) {
            result[key] = externalValue(old, ordered: info.properties[key]?.isOrdered ?? false) ?? NSNull()
        }
        return result
    }

    // MARK: - Key-value coding

    /// The value of the property `key`: attribute values as Swift values (`Int16`, `String`,
    /// `Date`, …), a to-one as its `ManagedObject`, a to-many as `Set<ManagedObject>` (or an
    /// array when ordered). Reading a persistent property fires a fault; nil for a fault
    /// whose object is gone (``fulfillFault()`` says why) or an unknown key. As on
    /// `NSManagedObject`, `objectID`, `self`, `entity`, `managedObjectContext`, `isInserted`,
    /// `isUpdated`, `isDeleted`, `isFault` and `hasChanges` read the object's own properties
    /// (`value(forKeyPath: "employees.objectID")`) unless the entity has a property so named.
    open func value(forKey key: String) -> Any? {
        if let keyProbe { return keyProbe.record(key, on: self) }
        guard let slot = info.slot(named: key) else {
            // A fetched property: its fetch runs at the first read, then the result is kept.
            if entity.fetchedPropertiesByName[key] != nil { return core?.fetchedPropertyValue(self, key) }
            return builtInValue(forKey: key)
        }
        if let value = rowAttribute(at: slot) { return value.boxed }
        let property = info.propertyList[slot]
        // Reading a transient fires the fault too, as in Core Data: its `awakeFromFetch` is
        // where a cached transient (seed 000's `fullName`) is computed.
        if property.isTransient, !hasCommittedValues, !isInsertedFlag, !isInvalidated { fireFault() }
        return externalValue(currentValue(property), ordered: property.isOrdered)
    }

    /// The object's own properties that key-value coding reads as `NSManagedObject`'s are
    /// read (`objectID`, `self`, `entity`, `managedObjectContext`, `isInserted`, `isUpdated`,
    /// `isDeleted`, `isFault`, `hasChanges`), so `value(forKeyPath: "employees.objectID")`
    /// gives the members' IDs; nil for any other key.
    private func builtInValue(forKey key: String) -> Any? {
        switch key {
        case "objectID": objectID
        case "self": self
        case "entity": entity
        case "managedObjectContext": managedObjectContext
        case "isInserted": isInserted
        case "isUpdated": isUpdated
        case "isDeleted": isDeleted
        case "isFault": isFault
        case "hasChanges": hasChanges
        default: nil
        }
    }

    /// The number of objects in the to-many relationship `key` — what
    /// `value(forKeyPath: "key.@count")` counts, and `key.@count` in a predicate — counted
    /// from their IDs without making an object for each (a team of 12,500 members made
    /// 12,500 faults to be counted). Nil for any other key, or once the context is gone
    /// (then the relationship is read and counted). A subclass that overrides
    /// ``value(forKey:)`` for a to-many relationship overrides this too.
    open func count(forKey key: String) -> Int? {
        guard keyProbe == nil, let core, let property = info.property(named: key), property.isToMany else { return nil }
        if !property.isRecorded, !property.isTransient, !isInsertedFlag, changes[key] == nil {
            // A derived side not read yet: its rows counted in the store (reading it fires
            // the fault, as reading the relationship does).
            fireFault()
            if hasCommittedValues, committedValue(property) == nil, changes[key] == nil, let counted = core.derivedCount(self, property) {
                return counted
            }
        }
        return core.countObjects(currentValue(property).ids)
    }

    /// Sets the property `key` (`setValue(_:forKey:)`), maintaining inverse relationships and
    /// registering undo. Setting nil on a required numeric or Boolean attribute calls
    /// ``setNilValueForKey(_:)``. A value of the wrong type is kept and refused at save, as
    /// is an object of another context set on a relationship (Core Data raises).
    open func setValue(_ value: Any?, forKey key: String) {
        guard let core, let property = info.property(named: key) else {
            core?.recordProblem(unsettableKeyProblem(key))
            return
        }
        // The usual case first: a value of the attribute's usual Swift type, which is never
        // `NSNull` (one cast that succeeds; the `NSNull` check cost as much again), cast from
        // the optional itself (unwrapping it first copied the value).
        if case .attribute(let type) = property.kind, let common = Self.commonAttributeValue(value, type) {
            core.set(self, property, .attribute(common), maintainInverse: true, register: true)
            return
        }
        // nil, `NSNull` and a nil optional in an `Any` (`maybeName as Any`) are nil, as
        // Core Data bridges them; a non-nil optional is its value.
        guard let value = value.flatMap(Self.unwrapped) else { return setNil(property, forKey: key, core: core) }
        if case .attribute(let type) = property.kind {
            core.set(self, property, uncommonAttributeValue(value, type), maintainInverse: true, register: true)
            return
        }
        core.set(self, property, internalValue(of: value, for: property), maintainInverse: true, register: true)
    }

    /// The problem recorded for setting `key`, which names no settable property: a fetched
    /// property is read-only (its value is fetched; before, the problem said the entity had
    /// no such property), any other key is unknown.
    func unsettableKeyProblem(_ key: String) -> ContextError {
        guard entity.fetchedPropertiesByName[key] != nil else { return .unknownKey(entity: entity.name, key: key) }
        return .invalidArgument(
            "\(entity.name).\(key) is a fetched property, which can't be set: its value is fetched (refresh the object to fetch it again); nothing was changed")
    }

    /// Sets each key of `keyedValues` with ``setValue(_:forKey:)`` (Foundation's
    /// `setValuesForKeys(_:)`): `NSNull` or a nil optional sets nil; an unknown key sets
    /// nothing and is recorded as a problem the next `save()` throws, the other keys are
    /// still set.
    ///
    /// ```swift
    /// person.setValuesForKeys(["name": "Ada", "nickname": NSNull()])
    /// ```
    open func setValuesForKeys(_ keyedValues: [String: Any]) {
        // In key order, so the undo group and any problem recorded are the same each run.
        for key in keyedValues.keys.sorted() { setValue(keyedValues[key], forKey: key) }
    }

    /// `value` as a setter takes it: nil for `NSNull` or a nil optional held in an `Any`
    /// (`Optional<String>.none as Any`, nested ones too), the wrapped value of a non-nil
    /// optional, else `value` itself. Before, a nil optional was kept as an invalid value
    /// and refused only at save ("holds string values, not nil").
    static func unwrapped(_ value: Any) -> Any? {
        OptionalUnwrapper.flatten(value)
    }

    /// Sets the property at the end of a dotted key path (`setValue(_:forKeyPath:)`): each
    /// relationship before the last key is followed with ``value(forKey:)`` and the last key
    /// is set with ``setValue(_:forKey:)`` on the object reached — on every member when a
    /// to-many is followed, as `NSSet`'s `setValue(_:forKey:)` does; `self` on the way is the
    /// object itself (`"self.name"`). An empty to-one on the way sets nothing, as a message
    /// to nil does. A key the entity lacks (anywhere in the path)
    /// or a collection operator sets nothing and is recorded as a problem the next `save()`
    /// throws.
    ///
    /// ```swift
    /// employee.setValue("R&D", forKeyPath: "department.name")
    /// ```
    open func setValue(_ value: Any?, forKeyPath keyPath: String) {
        let keys = keyPath.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard keys.count > 1 else { return setValue(value, forKey: keyPath) }
        var targets: [ManagedObject] = [self]
        for key in keys.dropLast() {
            var next: [ManagedObject] = []
            for target in targets {
                // `self` is the object itself, as `value(forKey: "self")` reads it (before, it
                // was an unknown key: "self.name" set nothing), unless the entity has a
                // property so named.
                if key == "self", target.info.property(named: key) == nil {
                    next.append(target)
                    continue
                }
                guard let property = target.info.property(named: key), property.isRelationship else {
                    let reason = key.hasPrefix("@") ? "a collection operator can't be set"
                        : target.info.property(named: key) != nil ? "\(target.entity.name).\(key) is not a relationship" : nil
                    core?.recordProblem(reason.map {
                        .invalidArgument("setValue(_:forKeyPath: \"\(keyPath)\") on \(entity.name): \($0); nothing was changed")
                    } ?? .unknownKey(entity: target.entity.name, key: key))
                    return
                }
                switch target.value(forKey: key) {
                case let object as ManagedObject: next.append(object)
                case let set as Set<ManagedObject>: next.append(contentsOf: set)
                case let array as [ManagedObject]: next.append(contentsOf: array)
                default: break
                }
            }
            targets = next
        }
        let last = keys[keys.count - 1]
        for target in targets { target.setValue(value, forKey: last) }
    }

    /// What `setValue(nil, forKey: key)` (or `NSNull`) does: ``setNilValueForKey(_:)`` for a
    /// required numeric or Boolean attribute, otherwise the property's empty value.
    private func setNil(_ property: PropertyInfo, forKey key: String, core: ContextCore) {
        if case .attribute(let type) = property.kind, !property.isOptional,
            [.int16, .int32, .int64, .double, .float, .boolean, .decimal].contains(type)
        {
            setNilValueForKey(key)
        } else {
            core.set(self, property, property.emptyValue, maintainInverse: true, register: true)
        }
    }

    /// Called when nil is set on a required scalar attribute; sets nil by default (and the
    /// save then reports the missing value). Override to substitute a value.
    open func setNilValueForKey(_ key: String) {
        guard let core, let property = info.properties[key] else { return }
        core.set(self, property, property.emptyValue, maintainInverse: true, register: true)
    }

    /// The value of `key` without firing change tracking (`primitiveValue(forKey:)`).
    public func primitiveValue(forKey key: String) -> Any? {
        value(forKey: key)
    }

    /// Sets `key` without registering undo or maintaining inverses (`setPrimitiveValue`);
    /// the change is still saved. A key the entity lacks sets nothing and is recorded as a
    /// problem the next `save()` throws (``ContextError/unknownKey(entity:key:)``), as
    /// ``setValue(_:forKey:)`` records it.
    public func setPrimitiveValue(_ value: Any?, forKey key: String) {
        guard let core, let property = info.properties[key] else {
            core?.recordProblem(unsettableKeyProblem(key))
            return
        }
        core.set(self, property, internalValue(value, for: property), maintainInverse: false, register: false)
    }

    /// A mutable view of the to-many relationship `key` (`mutableSetValue(forKey:)`):
    /// adding and removing objects through it maintains inverses and registers undo.
    public func mutableSetValue(forKey key: String) -> MutableRelationship {
        MutableRelationship(owner: self, key: key)
    }

    /// A mutable view of the ordered to-many relationship `key`
    /// (`mutableOrderedSetValue(forKey:)`): besides adding and removing, objects can be
    /// inserted at, removed from and moved to positions; every change maintains inverses
    /// and registers undo.
    ///
    /// ```swift
    /// author.mutableOrderedSetValue(forKey: "books").insert(book, at: 0)
    /// ```
    public func mutableOrderedSetValue(forKey key: String) -> MutableRelationship {
        MutableRelationship(owner: self, key: key)
    }

    // MARK: - Change and access notification (custom accessors)

    /// Call before a custom setter changes `key` with ``setPrimitiveValue(_:forKey:)``
    /// (`willChangeValue(forKey:)`). Paired with ``didChangeValue(forKey:)``, the primitive
    /// change is tracked as `setValue(_:forKey:)` tracks one: recorded for undo, inverse
    /// maintained, reported as an update (seed 001's `setProcessID:`).
    ///
    /// ```swift
    /// set {
    ///     willChangeValue(forKey: "processID")
    ///     setPrimitiveValue(newValue, forKey: "processID")
    ///     didChangeValue(forKey: "processID")
    /// }
    /// ```
    open func willChangeValue(forKey key: String) {
        guard let core, let property = info.properties[key] else { return }
        core.willChange(self, property)
    }

    /// Call after a custom setter changed `key` (`didChangeValue(forKey:)`); see
    /// ``willChangeValue(forKey:)``. Without a matching `willChangeValue` it does nothing.
    open func didChangeValue(forKey key: String) {
        guard let core, let property = info.properties[key] else { return }
        core.didChange(self, property)
    }

    /// Call before a custom getter reads `key` with ``primitiveValue(forKey:)``
    /// (`willAccessValue(forKey:)`): fires the fault, so the read sees the object's values.
    open func willAccessValue(forKey key: String?) {
        guard isFault, let core else { return }
        core.fulfill(self)
    }

    /// Call after a custom getter read a value (`didAccessValue(forKey:)`); nothing to do.
    open func didAccessValue(forKey key: String?) {}

    /// Whether a persistent property has a value different from the one last fetched or
    /// saved (`hasPersistentChangedValues`): true for an inserted object with values, false
    /// when only transient properties changed.
    public var hasPersistentChangedValues: Bool { !changes.isEmpty }

    /// Typed read: the value of `key` as `T`, or nil — what `value(forKey: key) as? T`
    /// gives, the way a custom class's typed properties read their values.
    ///
    /// Like the accessors Core Data generates for `@NSManaged` properties, it reads the
    /// property directly: a fetched, unchanged attribute comes straight from the object's
    /// row as `T`, without boxing it in an `Any` and casting it back. Everything else
    /// (relationships, changed or transient values, a fault without a row, key-path probes)
    /// goes through ``value(forKey:)``. An override of `value(forKey:)` (which Core Data
    /// forbids) is therefore not always consulted.
    ///
    /// ```swift
    /// final class Run: ManagedObject {
    ///     var processID: Int32 { get { self.get("processID") ?? 0 } set { setValue(newValue, forKey: "processID") } }
    /// }
    /// ```
    @inlinable
    public final func get<T>(_ key: String, as type: T.Type = T.self) -> T? {
        if let attribute = rowAttribute(forKey: key) { return attribute.value(as: T.self) }
        return value(forKey: key) as? T
    }

    /// ``rowAttribute(at:)`` for the property named `key`; nil as well for a key-path probe
    /// (which must see the read through ``value(forKey:)``) or a key that isn't a property.
    @usableFromInline
    final func rowAttribute(forKey key: String) -> AttributeValue? {
        guard keyProbe == nil, let slot = info.slot(named: key) else { return nil }
        return rowAttribute(at: slot)
    }

    /// The value of the unchanged, persistent attribute in `slot`, read in place from the
    /// committed values held by slot, without taking the property's description (a fault
    /// fetched with its row fires from it first, and its `awakeFromFetch` may change
    /// values); nil when it isn't one, and the caller takes the general path.
    @inline(__always)
    final func rowAttribute(at slot: Int) -> AttributeValue? {
        guard changes.isEmpty, !info.transientSlots[slot] else { return nil }
        if fastCommitted == nil, storedCommitted == nil, !isInsertedFlag {
            // From its fetched row; with a `stalenessInterval` of zero or more, through the
            // context, which reads the store.
            if registry.stalenessInterval < 0 { _ = fireFromRow() } else { fireFault() }
            // Its `awakeFromFetch` may have changed values.
            guard changes.isEmpty else { return nil }
        }
        return fastCommitted?.attribute(at: slot, of: info)
    }

    /// The value of the persistent attribute or to-one `key` of an object without pending
    /// changes, as a fetch reads it to judge and sort the object: its stored value — a
    /// fault's from the row its fetch read (the fault left unfired), a loaded object's from
    /// its committed values — never through an override of ``value(forKey:)``, which a fetch
    /// doesn't consult for an unchanged object either (it reads the stored row). A results
    /// controller's sort keys and section names: so its order is a fetch's (before session 30
    /// a loaded object's keys went through the override while the fetch's didn't, and the
    /// controller re-sorted the fetch's results by them). `.none` when the object has
    /// pending changes (inserted, changed, deleted, restored by undo), is a fault without a
    /// row, or `key` isn't such a property held in its values: the caller reads it the
    /// ordinary way, as a fetch reads an object with pending changes.
    final func unchangedStoredValue(forKey key: String) -> Any?? {
        guard keyProbe == nil, !isInsertedFlag, !isDeletedFlag, !isInvalidated, changes.isEmpty,
            let slot = info.slot(named: key), !info.transientSlots[slot]
        else { return nil }
        let property = info.propertyList[slot]
        let held: PropertyValue?
        if hasCommittedValues {
            held = committedValue(property)
        } else if hasRow {
            held = fastRow != nil ? (fastRow?[property] ?? nil) : storedRow?[key]
        } else {
            return nil
        }
        if let core, core.restored.contains(objectID) { return nil }
        // A value the record doesn't hold reads as empty once fired (``currentValue(_:)``),
        // but a derived side, which the row never holds, is read from the store.
        let value = held ?? (property.isRelationship && !property.isRecorded ? nil : property.emptyValue)
        switch value {
        case .attribute(let attribute)?: return .some(attribute?.boxed)
        case .toOne(let id)?:
            guard let id else { return .some(nil) }
            guard let related = core?.object(with: id) else { return nil }
            return .some(related)
        default: return nil
        }
    }

    /// Whether a fetch reads this object by its stored values (``JudgedObjectView``): it has
    /// no pending changes — not inserted, deleted, changed or restored by undo — and is
    /// still in its context.
    final var isReadAsStored: Bool {
        keyProbe == nil && !isInsertedFlag && !isDeletedFlag && !isInvalidated && changes.isEmpty && !restored
    }

    /// Loads the object's values now if it is a fault.
    ///
    /// - Throws: ``ContextError/objectNotFound(_:)`` if the object was deleted from the store.
    public func fulfillFault() throws {
        guard let core else { throw ContextError.invalidObject("\(objectID) has no context") }
        if isInaccessible { throw ContextError.objectNotFound(objectID.description) }
        try ContextError.wrappingStoreFailures("loading \(objectID) failed") { try core.fulfillThrowing(self) }
    }

    /// The IDs of the objects relationship `key` relates this object to
    /// (`objectIDs(forRelationshipNamed:)`), without making or loading them: a to-one gives
    /// none or one, a to-many its members — an ordered one in order. Unsaved changes in the
    /// context count. The related objects' faults don't fire, and a to-many not read yet
    /// (its side is derived from the other objects' references) is read as IDs only: no
    /// member object is made. This object's own fault fires if it is one.
    ///
    /// ```swift
    /// let bookIDs = try author.objectIDs(forRelationshipNamed: "books")   // no Book made
    /// ```
    ///
    /// - Throws: ``ContextError/unknownKey(entity:key:)`` when the entity has no property
    ///   `key` (Core Data raises); ``ContextError/invalidArgument(_:)`` when `key` is an
    ///   attribute, or when the relationship holds a value of the wrong type (set through
    ///   `setValue(_:forKey:)`, refused at save).
    public func objectIDs(forRelationshipNamed key: String) throws -> [ManagedObjectID] {
        guard let property = info.properties[key] else { throw ContextError.unknownKey(entity: entity.name, key: key) }
        guard property.isRelationship else {
            throw ContextError.invalidArgument(
                "objectIDs(forRelationshipNamed:): \(entity.name).\(key) is an attribute, not a relationship")
        }
        let value = core?.unsavedValue(self, property) ?? currentValue(property)
        if case .invalid(let what) = value {
            throw ContextError.invalidArgument(
                "objectIDs(forRelationshipNamed:): \(entity.name).\(key) of \(objectID) holds an invalid value (\(what)); the next save refuses it")
        }
        return value.ids
    }

    /// Whether relationship `key`'s value is not loaded yet (`hasFault(forRelationshipNamed:)`):
    /// true for every relationship of an object that is a fault, and for a loaded object's
    /// to-many whose side is derived from the other objects' references until it is first
    /// read; false once the value is loaded, and for a value set in this context. Asking
    /// fires nothing. A to-one's value is the related object's ID, loaded with this object:
    /// the related object may itself still be a fault (its ``isFault``).
    ///
    /// False for a name that isn't a relationship of the entity (Core Data raises): there
    /// is nothing to load.
    public func hasFault(forRelationshipNamed key: String) -> Bool {
        guard let property = info.properties[key], property.isRelationship, !property.isTransient, !isInsertedFlag,
            changes[key] == nil
        else { return false }
        guard hasCommittedValues else { return true }
        if property.isRecorded { return false }
        return committedValue(property) == nil
    }

    // MARK: - Internal value access

    func currentValue(_ property: PropertyInfo) -> PropertyValue {
        if property.isTransient { return transients[property.name] ?? property.emptyValue }
        if let changed = changes[property.name] { return changed }
        // Loaded values need no context (and reading them doesn't touch the weak reference).
        if hasCommittedValues, let committed = committedValue(property) { return committed }
        guard let core else {
            // The context is gone: a fault still holding its fetched row fires from it.
            guard !hasCommittedValues, !isInsertedFlag, fireFromRow() else { return property.emptyValue }
            return changes[property.name] ?? committedValue(property) ?? property.emptyValue
        }
        core.fulfill(self)
        // Firing ran awakeFromFetch, which may have set the property.
        if let changed = changes[property.name] { return changed }
        if let committed = committedValue(property) { return committed }
        if property.isRelationship && !property.isRecorded, !isInsertedFlag {
            return core.derivedValue(self, property) ?? property.emptyValue
        }
        return property.emptyValue
    }

    /// The value as apps see it; to-many relationships as `[ManagedObject]` when `ordered`,
    /// else `Set<ManagedObject>`.
    func externalValue(_ value: PropertyValue, ordered: Bool = false) -> Any? {
        switch value {
        case .attribute(let v): return v?.boxed
        case .toOne(let id): return id.flatMap { core?.object(with: $0) }
        case .toMany(let ids):
            let objects = ids.compactMap { core?.object(with: $0) }
            return ordered ? objects as Any : Set(objects) as Any
        case .invalid(let what): return what
        }
    }


    func internalValue(_ value: Any?, for property: PropertyInfo) -> PropertyValue {
        guard let value = value.flatMap(Self.unwrapped) else { return property.emptyValue }
        return internalValue(of: value, for: property)
    }

    /// ``internalValue(_:for:)`` of a value known to be neither nil nor `NSNull`.
    func internalValue(of value: Any, for property: PropertyInfo) -> PropertyValue {
        switch property.kind {
        case .attribute(let type):
            if let common = Self.commonAttributeValue(value, type) { return .attribute(common) }
            return uncommonAttributeValue(value, type)
        case .toOne:
            if let object = value as? ManagedObject {
                if let wrong = Self.misfit(object.info, for: property) { return .invalid(wrong) }
                if object.isRemovedInsert { return .invalid(Self.danglingReference(to: object.objectID)) }
                if object.registry !== registry { return .invalid(Self.foreignObject(object)) }
                if let unheld = unheldTemporaryFault(object) { return .invalid(unheld) }
                return .toOne(object.objectID)
            }
            if let id = value as? ManagedObjectID {
                if let entity = core?.model.entity(named: id.entityName), let wrong = Self.misfit(id.entityName, of: [entity], for: property) {
                    return .invalid(wrong)
                }
                if core?.isRemovedInsert(id) == true { return .invalid(Self.danglingReference(to: id)) }
                // A temporary ID this context doesn't hold (a child may name its ancestors'):
                // another context's unsaved object, which no save here can write. Before, the
                // ID was kept and the store refused this save and every later one (133021),
                // the undo group that set it still naming it after the app set it right; in a
                // child (before session 33) any temporary ID was taken as the parent's.
                if id.isTemporaryID, let core, core.registered(id)?.isInsertedFlag != true {
                    // In a child, an ID an ancestor has made permanent since names the object
                    // under its permanent ID (before, the old one was kept: a second object).
                    if core.parentContext != nil {
                        guard let resolved = try? core.resolvingTemporaryIDs([id])[0] else {
                            return .invalid(Self.unheldTemporaryID(id, inChild: true))
                        }
                        return .toOne(resolved)
                    }
                    if !core.holdsUnsavedObject(id) { return .invalid(Self.unheldTemporaryID(id, inChild: false)) }
                }
                return .toOne(id)
            }
            return .invalid("\(type(of: value)) where a \(property.destination ?? "?") object was expected")
        case .toMany(let ordered):
            var objects: [ManagedObject] = []
            if let set = value as? Set<ManagedObject> { objects = Array(set) }
            else if let array = value as? [ManagedObject] { objects = array }
            else { return .invalid("\(type(of: value)) where a collection of \(property.destination ?? "?") objects was expected") }
            if let wrong = Self.misfit(nil, of: objects.map(\.entity), for: property) { return .invalid(wrong) }
            if let gone = objects.first(where: \.isRemovedInsert) { return .invalid(Self.danglingReference(to: gone.objectID)) }
            if let foreign = objects.first(where: { $0.registry !== registry }) { return .invalid(Self.foreignObject(foreign)) }
            for object in objects {
                if let unheld = unheldTemporaryFault(object) { return .invalid(unheld) }
            }
            let ids = objects.map(\.objectID)
            return ordered ? .toMany(ids) : .unordered(ids)
        }
    }

    /// The value for an attribute of `type` when ``commonAttributeValue(_:_:)`` found none: an
    /// ``AttributeValue`` itself, or a conversion; a value that fits neither is kept as invalid.
    func uncommonAttributeValue(_ value: Any, _ type: AttributeType) -> PropertyValue {
        if let attribute = value as? AttributeValue { return attribute.matches(type) ? .attribute(attribute) : .invalid("\(attribute)") }
        do {
            return .attribute(try AttributeValue(any: value, for: type))
        } catch {
            return .invalid("\(Self.invalidText(value)) (\(error))")
        }
    }

    /// An invalid value as its text: its description, but a date at NaN — alone or in an
    /// array — as `nan`: Foundation's `Date.description` traps on one (before, setting a NaN
    /// date on an attribute of another type crashed the process).
    static func invalidText(_ value: Any) -> String {
        if let date = value as? Date, date.timeIntervalSinceReferenceDate.isNaN { return "nan" }
        if let array = value as? [Any], array.contains(where: { ($0 as? Date)?.timeIntervalSinceReferenceDate.isNaN == true }) {
            return "[" + array.map(invalidText).joined(separator: ", ") + "]"
        }
        return "\(value)"
    }

    /// Whether the object is an unsaved insert that left its context — deleted, its insert
    /// undone or rolled back, or the context reset — so no save can write it: a relationship
    /// set to it is kept as invalid and refused at save (1550), as Core Data refuses an object
    /// without a context (before, the ID was kept, read back as nil, and the store refused
    /// the save, 133021 — even after a later change cleared it).
    var isRemovedInsert: Bool { isInvalidated && objectID.isTemporaryID }

    /// The invalid value's text for a relationship set to a temporary ID no context of this
    /// one's family holds: another context's unsaved object.
    static func unheldTemporaryID(_ id: ManagedObjectID, inChild: Bool) -> String {
        let holder = inChild ? "neither this context nor its parent holds" : "this context doesn't hold"
        return "\(id), a temporary ID \(holder) (another context's unsaved object: save it there and pass its permanent ID)"
    }

    /// For an object of this context that is a child's fault for a temporary ID with no
    /// values yet (made by `object(with:)`), the invalid value's text when no ancestor holds
    /// the unsaved object it names; nil for any other object (checked without a request).
    func unheldTemporaryFault(_ object: ManagedObject) -> String? {
        guard object.objectID.isTemporaryID, !object.isInsertedFlag, !object.hasCommittedValues, let core, core.parentContext != nil,
            !core.holdsUnsavedObject(object.objectID)
        else { return nil }
        return Self.unheldTemporaryID(object.objectID, inChild: true)
    }

    /// The invalid value's text for a relationship set to an unsaved insert that left its context.
    static func danglingReference(to id: ManagedObjectID) -> String {
        "\(id), an object removed before it was saved (a dangling reference to an invalid object)"
    }

    /// The invalid value's text for a relationship set to an object of another context (Core
    /// Data raises "Illegal attempt to establish a relationship … between objects in different
    /// contexts"): its ID is no reference to follow here — another context's unsaved insert
    /// is no object this one can save, and the other context's object would never see the
    /// inverse. Before, the ID was taken: a reference to another context's insert reached the
    /// store, which refused the save (133021).
    static func foreignObject(_ object: ManagedObject) -> String {
        "\(object.objectID), an object of another context (relate objects of one context: pass this context's object for its ID, `existingObject(with:)`)"
    }

    /// Why objects of `entities` can't be values of relationship `property` (one that isn't
    /// of its destination entity or a sub-entity of it), or nil when they can: such a value
    /// is kept as invalid and refused at save, and maintains no inverse (it would land in an
    /// unrelated relationship of the same name).
    static func misfit(_ name: String?, of entities: [EntityDescription], for property: PropertyInfo) -> String? {
        guard let destination = property.destination,
            let wrong = entities.first(where: { !$0.isKindOf(entityNamed: destination) })
        else { return nil }
        return "a \(name ?? wrong.name) object where a \(destination) object was expected"
    }

    /// ``misfit(_:of:for:)`` for one object of `info`'s entity, asked of the entity's table
    /// (``EntityInfo/isKind(ofEntityNamed:)``): no copy of its description, no array.
    static func misfit(_ info: EntityInfo, for property: PropertyInfo) -> String? {
        guard let destination = property.destination, !info.isKind(ofEntityNamed: destination) else { return nil }
        return "a \(info.entity.name) object where a \(destination) object was expected"
    }

    /// Whether `value` is `NSNull`. Asks the value's type, not `value is NSNull`: that
    /// cast tries to bridge every other value (a `String` to `NSString`) first.
    static func isNull(_ value: Any) -> Bool {
        type(of: value) is NSNull.Type
    }

    /// The value for an attribute of `type` when it is the type's usual Swift type (a
    /// `String` for a string, an `Int32` for an int32, …): one cast that succeeds, instead of
    /// the failing casts to `AttributeValue` first. Nil otherwise (the general path decides).
    static func commonAttributeValue(_ value: Any, _ type: AttributeType) -> AttributeValue? {
        switch type {
        case .string: (value as? String).map(AttributeValue.string)
        case .int16: (value as? Int16).map(AttributeValue.int16)
        case .int32: (value as? Int32).map(AttributeValue.int32)
        case .int64: (value as? Int64).map(AttributeValue.int64)
        case .double: (value as? Double).map(AttributeValue.double)
        case .boolean: (value as? Bool).map(AttributeValue.boolean)
        case .date: (value as? Date).map(AttributeValue.date)
        default: nil
        }
    }

    /// ``commonAttributeValue(_:_:)`` of an optional value (nil for nil). A second copy on
    /// purpose: one generic function for both cost `setValue` ≈ 730 instructions a call more
    /// (callgrind on C1's inserting phase), the casts no longer specialized as these are.
    static func commonAttributeValue(_ value: Any?, _ type: AttributeType) -> AttributeValue? {
        switch type {
        case .string: (value as? String).map(AttributeValue.string)
        case .int16: (value as? Int16).map(AttributeValue.int16)
        case .int32: (value as? Int32).map(AttributeValue.int32)
        case .int64: (value as? Int64).map(AttributeValue.int64)
        case .double: (value as? Double).map(AttributeValue.double)
        case .boolean: (value as? Bool).map(AttributeValue.boolean)
        case .date: (value as? Date).map(AttributeValue.date)
        default: nil
        }
    }

    // MARK: - Lifecycle hooks (override; call super)

    /// Called once when the object is inserted (`awakeFromInsert`): set initial values here.
    open func awakeFromInsert() {}
    /// Called after the object's values are loaded from the store (`awakeFromFetch`): when its
    /// fault fires (reading any property, a transient one included), not at the fetch. Change
    /// processing is off around it, as in Core Data: a public setter caching a transient value
    /// here doesn't dirty the object or its context and records no undo; don't change
    /// relationships here (their inverses aren't maintained).
    open func awakeFromFetch() {}
    /// Called after undo, redo, rollback or refresh changed the object's values (`awake(fromSnapshotEvents:)`).
    open func awake(fromSnapshotEvents events: SnapshotEvents) {}
    /// Called before the object is saved (`willSave`), for inserted, updated and deleted
    /// objects. A change made here with `setValue(_:forKey:)` (or an object inserted here) has
    /// `willSave` called again, as in Core Data, so set a value only when it differs, or with
    /// ``setPrimitiveValue(_:forKey:)``; a save whose hooks still change objects after 100
    /// rounds throws.
    open func willSave() {}
    /// Called after the object was saved (`didSave`) — a deleted object too, with
    /// ``isDeleted`` true during the call (remove the files you kept for it here).
    open func didSave() {}
    /// Called when the object is deleted, before delete rules run (`prepareForDeletion`).
    open func prepareForDeletion() {}

    // MARK: - Lifecycle hooks that use the context

    // A Core Data hook reaches its context through `managedObjectContext` to insert, fetch
    // or delete other objects. A Strata context is an actor, so code outside it can't call
    // its methods synchronously; these variants are called with the context, isolated, so
    // the hook can. Each calls the plain hook by default: override one or the other.

    /// `awakeFromInsert()` with the object's context: insert related objects here (an author
    /// that starts with a draft book). The default calls ``awakeFromInsert()``; an override
    /// calls `super.awakeFromInsert(in: context)`.
    ///
    /// ```swift
    /// override func awakeFromInsert(in context: isolated ManagedObjectContext) {
    ///     super.awakeFromInsert(in: context)
    ///     let draft = try? context.insertNewObject(forEntityName: "Book")
    ///     draft?.setValue(self, forKey: "author")
    /// }
    /// ```
    open func awakeFromInsert(in context: isolated ManagedObjectContext) { awakeFromInsert() }

    /// `prepareForDeletion()` with the object's context: delete or change related objects
    /// here, before the delete rules run (a book that deletes its loans, so a deny rule
    /// doesn't refuse the save). Called for objects a cascade deletes too. The default calls
    /// ``prepareForDeletion()``.
    open func prepareForDeletion(in context: isolated ManagedObjectContext) { prepareForDeletion() }

    /// `willSave()` with the object's context: fetch or count other objects, or change them,
    /// before the save validates. The default calls ``willSave()``.
    open func willSave(in context: isolated ManagedObjectContext) { willSave() }
    /// `didSave()` with the object's context: after the save, with the object's permanent
    /// ID (an object the save inserted can be looked up, or another object changed for the
    /// next save). The default calls ``didSave()``.
    open func didSave(in context: isolated ManagedObjectContext) { didSave() }
    /// Called before the object is turned into a fault (`willTurnIntoFault`).
    open func willTurnIntoFault() {}
    /// Called after the object was turned into a fault (`didTurnIntoFault`).
    open func didTurnIntoFault() {}

    // MARK: - Validation hooks

    /// Validates one value for `key` (`validateValue(_:forKey:)`); the default checks the
    /// model's rules, as `NSManagedObject`'s "consults the object's entity description to
    /// coerce the value and to check for basic errors". Override to add rules or to coerce
    /// the value; throw to refuse it.
    ///
    /// For an attribute: a value that doesn't convert to the attribute's type (a `String`
    /// for an `int16`, an integer out of its range) fails with 1550, as the save refuses
    /// it; one that converts is checked against the model's rules and handed back
    /// converted (`42` as an `Int` comes back as the `Int16` an `int16` attribute holds).
    /// For a relationship: an object of the wrong entity, a collection for a to-one (or
    /// the reverse), an unsaved insert that left the context, another context's object or
    /// unsaved object (1550), nil where a to-one is required (1570), an empty collection
    /// where a to-many is required or a count outside its minimum and maximum (1580/1590).
    /// Each failure names this object. Before, a value of the wrong type passed as if nil,
    /// and a relationship's key passed whatever its value.
    ///
    /// ```swift
    /// var age: Any? = "forty"
    /// try member.validateValue(&age, forKey: "age")   // throws 1550: not an int16
    /// ```
    open func validateValue(_ value: inout Any?, forKey key: String) throws {
        guard let core, let property = info.properties[key] else { return }
        let given = value.flatMap(Self.unwrapped)
        let localization = core.model.localization
        // Each failure names this object (`NSValidationObjectErrorKey`), as Core Data's
        // does; before session 33 only a save's named it.
        func refusal(_ failures: [ValidationFailure]) -> ContextError {
            let uri = objectID.uriRepresentation()
            return .validation(failures.map { failure in
                var failure = failure
                failure.object = failure.object ?? uri
                return failure
            })
        }
        guard case .attribute(let type) = property.kind else {
            // The save checks a relationship's rules itself (and calls this for an override).
            guard !core.validatingRelationshipInSave, let relationship = entity.relationshipsByName[key] else { return }
            let stored = internalValue(given, for: property)
            if case .invalid(let what) = stored {
                throw refusal([ValidationFailure(
                    code: .managedObjectValidation, entity: entity.name, key: key, value: nil,
                    message: "\(entity.name).\(key) holds \(relationship.destinationEntityName) objects, not \(what)")])
            }
            let failures = relationship.validate(count: stored.ids.count, entity: entity.name, localization: localization)
            if !failures.isEmpty {
                let destinations = stored.ids.map { $0.uriRepresentation() }
                throw refusal(failures.map { failure in
                    var failure = failure
                    failure.destinations = destinations
                    return failure
                })
            }
            return
        }
        guard let attribute = entity.attributesByName[key] else { return }
        if let derivation = property.derivation {
            // Read-only, as Core Data's derived attributes are: the store computes the value
            // at save, so no value is valid to set (before, any passed). The save doesn't
            // validate derived attributes (their values come after validation).
            throw refusal([ValidationFailure(
                code: .managedObjectValidation, entity: entity.name, key: key,
                value: given.flatMap { try? AttributeValue(any: $0, for: type) },
                message: "\(entity.name).\(key) is a derived attribute (derivation \(derivation)): the store computes its value at save, so it can't be set")])
        }
        var typed: AttributeValue?
        if let given {
            do {
                typed = try AttributeValue(any: given, for: type)
            } catch {
                throw refusal([ValidationFailure(
                    code: .managedObjectValidation, entity: entity.name, key: key, value: nil,
                    message: "\(entity.name).\(key) holds \(type.name) values, not \(Self.invalidText(given)) (\(error))")])
            }
        }
        let failures = attribute.validate(typed, entity: entity.name, localization: localization)
        if !failures.isEmpty { throw refusal(failures) }
        // Coerced to the attribute's type: a number of another type comes back as the type
        // the attribute holds (Core Data's default coerces too).
        if let typed, [.int16, .int32, .int64, .double, .float, .decimal, .boolean].contains(type) { value = typed.boxed }
    }

    /// Validates the object for insertion (`validateForInsert`): every model rule.
    open func validateForInsert() throws { try core?.validateRules(self) }
    /// Validates the object for update (`validateForUpdate`): every model rule.
    open func validateForUpdate() throws { try core?.validateRules(self) }
    /// Validates the object for deletion (`validateForDelete`): deny rules.
    open func validateForDelete() throws { try core?.validateDeletion(self) }

    // A Core Data validation method reaches its context through `managedObjectContext`, for
    // a rule the model can't state that needs other objects (a title unique regardless of
    // case, a budget no more than its department's). These variants get the context,
    // isolated, as the lifecycle hooks above do; each calls the plain method by default.

    /// `validateForInsert()` with the object's context, which the hook may fetch or count
    /// through. The default calls ``validateForInsert()``; an override calls
    /// `try super.validateForInsert(in: context)` to keep the model's rules.
    ///
    /// ```swift
    /// override func validateForInsert(in context: isolated ManagedObjectContext) throws {
    ///     try super.validateForInsert(in: context)
    ///     let title = value(forKey: "title") as? String ?? ""
    ///     let sameTitle = FetchRequest(entityName: "Book", predicate: try FormatPredicate(format: "title ==[c] %@", title))
    ///     if try context.count(for: sameTitle) > 1 {
    ///         throw ContextError.validation([ValidationFailure(
    ///             code: .managedObjectValidation, entity: "Book", key: "title", value: .string(title),
    ///             message: "another book is titled \(title)")])
    ///     }
    /// }
    /// ```
    open func validateForInsert(in context: isolated ManagedObjectContext) throws { try validateForInsert() }
    /// `validateForUpdate()` with the object's context. The default calls
    /// ``validateForUpdate()``.
    open func validateForUpdate(in context: isolated ManagedObjectContext) throws { try validateForUpdate() }
    /// `validateForDelete()` with the object's context. The default calls
    /// ``validateForDelete()``.
    open func validateForDelete(in context: isolated ManagedObjectContext) throws { try validateForDelete() }

    // MARK: - Identity

    /// Objects are equal only to themselves.
    public static func == (lhs: ManagedObject, rhs: ManagedObject) -> Bool { lhs === rhs }
    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    /// Predicates compare objects by ID.
    public var predicateIdentity: any Hashable & Sendable { objectID }

    /// `<Entity: URI>` plus the values, or `(fault)`.
    public var description: String {
        if isFault { return "<\(entity.name): \(objectID)> (fault)" }
        let values = info.orderedNames.compactMap { name -> String? in
            guard let property = info.properties[name] else { return nil }
            let value = changes[name] ?? committed?[name] ?? (property.isTransient ? transients[name] : nil) ?? property.emptyValue
            return "\(name)=\(value.text)"
        }
        return "<\(entity.name): \(objectID)> {\(values.joined(separator: ", "))}"
    }
}

/// A mutable view of a to-many relationship (Core Data's mutable set proxy).
public struct MutableRelationship {
    let owner: ManagedObject
    let key: String

    /// The current members.
    public var objects: [ManagedObject] {
        switch owner.value(forKey: key) {
        case let set as Set<ManagedObject>: Array(set)
        case let array as [ManagedObject]: array
        default: []
        }
    }

    /// Adds `object`, maintaining its inverse. An object the relationship can't hold (of
    /// another entity, or of another context) changes nothing and is recorded as a problem
    /// the next `save()` throws.
    public func add(_ object: ManagedObject) { owner.core?.addMembers(owner, key, [object]) }
    /// The members' IDs, read without making an object per member; nil without a context
    /// or for a key that isn't a to-many relationship (the proxy then reads ``objects``).
    private var memberIDs: (ids: [ManagedObjectID], ordered: Bool)? { owner.core?.memberIDs(owner, key) }

    /// The member at `index` of an ordered relationship (`object(at:)`); nil when out of range.
    public func object(at index: Int) -> ManagedObject? {
        guard let (ids, _) = memberIDs, let core = owner.core else {
            let members = objects
            return members.indices.contains(index) ? members[index] : nil
        }
        return ids.indices.contains(index) ? core.object(with: ids[index]) : nil
    }
    /// The position of `object` (`index(of:)`); nil when it isn't a member.
    public func index(of object: ManagedObject) -> Int? {
        guard let (ids, _) = memberIDs else { return objects.firstIndex(of: object) }
        return ids.firstIndex(of: object.objectID)
    }
    /// Inserts `object` at `index` of an ordered relationship (`insert(_:at:)`), or moves it
    /// there if it is already a member; maintains inverses and registers undo. An index
    /// outside `0...count` changes nothing and is recorded as a problem the next `save()`
    /// throws (Core Data raises a range exception).
    public func insert(_ object: ManagedObject, at index: Int) {
        if let core = owner.core {
            if let (count, inRange) = core.insertMember(owner, key, object, at: index), !inRange {
                outOfRange(index, count, "insert(_:at:)")
            }
            return
        }
        var members = objects
        guard members.indices.contains(index) || index == members.count else {
            outOfRange(index, members.count, "insert(_:at:)")
            return
        }
        if let existing = members.firstIndex(of: object) {
            members.remove(at: existing)
            members.insert(object, at: Swift.min(index, members.count))
        } else {
            members.insert(object, at: index)
        }
        owner.setValue(members, forKey: key)
    }
    /// Removes the member at `index` of an ordered relationship (`removeObject(at:)`),
    /// maintaining its inverse; an index out of range changes nothing and is recorded as a
    /// problem the next `save()` throws.
    public func removeObject(at index: Int) {
        if let (ids, _) = memberIDs, let core = owner.core {
            guard ids.indices.contains(index) else {
                outOfRange(index, ids.count, "removeObject(at:)")
                return
            }
            if let member = core.object(with: ids[index]) { remove(member) }
            return
        }
        let members = objects
        guard members.indices.contains(index) else {
            outOfRange(index, members.count, "removeObject(at:)")
            return
        }
        remove(members[index])
    }
    /// Moves the member at `from` to position `to` of an ordered relationship
    /// (`moveObjects(at:to:)` for one object); out-of-range positions change nothing and are
    /// recorded as a problem.
    public func moveObject(at from: Int, to: Int) {
        if let core = owner.core {
            if let (count, inRange) = core.moveMember(owner, key, from: from, to: to), !inRange {
                outOfRange((0..<count).contains(from) ? to : from, count, "moveObject(at:to:)")
            }
            return
        }
        var members = objects
        guard members.indices.contains(from), members.indices.contains(to) else {
            outOfRange(members.indices.contains(from) ? to : from, members.count, "moveObject(at:to:)")
            return
        }
        let moved = members.remove(at: from)
        members.insert(moved, at: to)
        owner.setValue(members, forKey: key)
    }

    private func outOfRange(_ index: Int, _ count: Int, _ operation: String) {
        owner.core?.recordProblem(.invalidArgument(
            "\(operation) on \(owner.entity.name).\(key) of \(owner.objectID): index \(index) is out of range (the relationship has \(count) member(s)); nothing was changed"))
    }
    /// Replaces the member at `index` of an ordered relationship with `object`
    /// (`replaceObject(at:with:)`): the old member leaves (its inverse cleared), `object` takes
    /// its place (moved there if it was a member elsewhere); one undo step takes both back.
    /// An index out of range changes nothing and is recorded as a problem the next `save()`
    /// throws (Core Data raises a range exception).
    ///
    /// ```swift
    /// author.mutableOrderedSetValue(forKey: "books").replaceObject(at: 0, with: newEdition)
    /// ```
    public func replaceObject(at index: Int, with object: ManagedObject) {
        let count = self.count
        guard (0..<count).contains(index) else {
            outOfRange(index, count, "replaceObject(at:with:)")
            return
        }
        guard let old = self.object(at: index), old !== object else { return }
        if let property = owner.info.properties[key],
            ManagedObject.misfit(nil, of: [object.entity], for: property) != nil || object.isRemovedInsert
                || object.registry !== owner.registry
        {
            // Refused whole: `insert` records the problem and changes nothing, so the old
            // member isn't removed for a replacement that can't go in.
            insert(object, at: index)
            return
        }
        remove(old)
        insert(object, at: Swift.min(index, self.count))
    }
    /// Adds each of `objects` that isn't a member yet (`addObjects(from:)`, `union(_:)`),
    /// maintaining inverses; an ordered relationship appends them in the order given.
    public func addObjects(from objects: [ManagedObject]) {
        guard !objects.isEmpty else { return }
        owner.core?.addMembers(owner, key, objects)
    }
    /// Removes each of `objects` that is a member (`removeObjects(in:)`, `minus(_:)`),
    /// maintaining inverses.
    public func removeObjects(in objects: [ManagedObject]) {
        guard !objects.isEmpty else { return }
        owner.core?.removeMembers(owner, key, objects)
    }
    /// Removes every member (`removeAllObjects()`), maintaining inverses; one undo step puts
    /// them all back.
    public func removeAllObjects() { removeObjects(in: objects) }
    /// Removes `object`, maintaining its inverse.
    public func remove(_ object: ManagedObject) { owner.core?.removeMembers(owner, key, [object]) }
    /// The number of members.
    public var count: Int { memberIDs?.ids.count ?? objects.count }
    /// Whether `object` is a member.
    public func contains(_ object: ManagedObject) -> Bool {
        guard let (ids, ordered) = memberIDs else { return objects.contains(object) }
        // An unordered value is kept sorted: a binary search finds a member where the order
        // puts it (and a look everywhere makes sure of an answer of no).
        if !ordered, PropertyValue.position(of: object.objectID, in: ids).found { return true }
        return ids.contains(object.objectID)
    }
}
