import Foundation
import StrataLog
import StrataModel
import StrataPredicate
import StrataStorage

/// A registry entry: an unchanged registered object, not retained, so the context doesn't
/// keep objects the app no longer holds. An object removes its own entry when it is
/// deallocated (`ManagedObject.deinit` → ``ObjectRegistry/forget(_:)``), so an entry never
/// outlives its object. (Not a `weak` reference: those put every object's reference
/// counts in a side table, which makes each retain and release of it slower.)
struct WeakObject {
    let reference: Unmanaged<ManagedObject>

    init(object: ManagedObject) { reference = .passUnretained(object) }
    init(reference: Unmanaged<ManagedObject>) { self.reference = reference }

    var object: ManagedObject? { reference.takeUnretainedValue() }
}

/// A context's object registry (``ContextCore/registry``), shared by the context and its
/// objects: an object holds it strongly and takes its own entry out when it is deallocated,
/// without reaching the context. The one weak reference to the context is here, so making
/// and freeing an object touches no weak reference.
///
/// Permanent IDs of the context's store are kept per entity, keyed by primary key alone
/// (``KeyTable``): consecutive keys share a page, so registering the objects of a fetch and
/// forgetting them again as they are freed walk the pages in order instead of one cache
/// miss per object in a table of every ID. Temporary IDs (and IDs of another store) are kept
/// by their whole ID. Reads as a dictionary of `ManagedObjectID` to ``WeakObject``.
final class ObjectRegistry: Sequence {
    /// The context; nil once it is gone (its objects keep their loaded values).
    weak var core: ContextCore?
    /// Above zero while an object's `awakeFromFetch` runs (``ContextCore/awakingFromFetch``):
    /// kept here, where the objects reach it without loading the context's weak reference.
    @exclusivity(unchecked) var awakingFromFetch = 0
    /// The context's `stalenessInterval`, kept here for the objects' fast path: below zero
    /// (the default, -1), a fault fires from the row a fetch left on it, however old; zero
    /// or more, it reads the store (spec 0006 §14.8).
    @exclusivity(unchecked) var stalenessInterval: Double = -1
    /// Entities' names in model order: an entity's table is ``tables``[its index].
    let names: [String]
    private let indexes: [String: Int]
    /// Unchecked exclusivity, as ``ManagedObject``'s state (every fetched object is put in and taken out).
    /// The entries of permanent IDs of ``storeUUID``, per entity, by primary key.
    private let tables: [KeyTable]
    /// ``tables`` unretained, for the fetch's hot path: calling a table through
    /// `_withUnsafeGuaranteedRef` doesn't retain and release it (reached through
    /// ``tables``, each registration and each forgetting did). ``tables`` keeps them alive.
    private let tableReferences: [Unmanaged<KeyTable>]
    /// Every other entry: temporary IDs, and permanent IDs of another store.
    @exclusivity(unchecked) private var others: [ManagedObjectID: WeakObject] = [:]
    /// The store of the permanent IDs in ``tables``: the first one registered.
    @exclusivity(unchecked) private var storeUUID: UUID?
    /// The entity the last ID named (most runs of lookups name one entity).
    @exclusivity(unchecked) private var lastIndex = 0
    /// Whether every registered object is also held strongly (the context's
    /// `retainsRegisteredObjects`): then ``held`` keeps each one until it leaves the registry.
    @exclusivity(unchecked) private(set) var holdsObjects = false
    /// The registered objects held strongly while ``holdsObjects`` is on, by identity.
    @exclusivity(unchecked) private var held: [ObjectIdentifier: ManagedObject] = [:]

    init(names: [String]) {
        self.names = names
        var indexes: [String: Int] = [:]
        for (index, name) in names.enumerated() { indexes[name] = index }
        self.indexes = indexes
        tables = (0..<names.count).map { _ in KeyTable() }
        tableReferences = tables.map { Unmanaged.passUnretained($0) }
    }

    /// The table of `id` and its key there, or nil when the entry is one of ``others``.
    @inline(__always)
    private func slot(_ id: ManagedObjectID) -> (table: Int, key: UInt64)? {
        guard case .permanent(let store, let primaryKey) = id.storage, store == storeUUID,
            let table = table(of: id.entityName)
        else { return nil }
        return (table, primaryKey)
    }

    /// The index in ``tables`` of the entity named `name`, or nil.
    @inline(__always)
    private func table(of name: String) -> Int? {
        if lastIndex < names.count, names[lastIndex] == name { return lastIndex }
        guard let found = indexes[name] else { return nil }
        lastIndex = found
        return found
    }

    /// Registers `object` under its ID (what `self[object.objectID] = WeakObject(object:
    /// object)` does), reading the ID in place: the subscript's setter copied it (a retain
    /// and release of its entity name) for every object a fetch made.
    func register(_ object: ManagedObject) {
        if holdsObjects { held[ObjectIdentifier(object)] = object }
        if case .permanent(let store, let key) = object.objectID.storage {
            if storeUUID == nil, indexes[object.objectID.entityName] != nil { storeUUID = store }
            if store == storeUUID, let table = table(of: object.objectID.entityName) {
                let pointer = Unmanaged.passUnretained(object).toOpaque()
                tableReferences[table]._withUnsafeGuaranteedRef { $0.insert(key, pointer) }
                return
            }
        }
        others[object.objectID] = WeakObject(object: object)
    }

    /// The entry of `id`; setting nil removes it.
    subscript(id: ManagedObjectID) -> WeakObject? {
        get {
            if let (table, key) = slot(id) { return tables[table][key] }
            return others[id]
        }
        set {
            if storeUUID == nil, newValue != nil, case .permanent(let store, _) = id.storage, indexes[id.entityName] != nil {
                storeUUID = store
            }
            // The object leaving the entry, if held: let go only once the entry is gone (its
            // `deinit` takes its entry out, which must find nothing).
            var released: ManagedObject?
            if holdsObjects {
                let incoming = newValue?.object
                if let current = self[id]?.object, current !== incoming {
                    released = held.removeValue(forKey: ObjectIdentifier(current))
                }
                if let incoming { held[ObjectIdentifier(incoming)] = incoming }
            }
            if let (table, key) = slot(id) { tables[table][key] = newValue } else { others[id] = newValue }
            withExtendedLifetime(released) {}
        }
    }

    /// Starts or stops holding every registered object strongly (`retainsRegisteredObjects`).
    /// Starting holds the objects registered now too; stopping lets go of them all, so those
    /// nothing else holds (the context holds changed ones itself) are freed.
    func holdObjects(_ holds: Bool) {
        guard holds != holdsObjects else { return }
        holdsObjects = holds
        if holds {
            for entry in values { if let object = entry.object { held[ObjectIdentifier(object)] = object } }
        } else {
            releaseHeld()
        }
    }

    /// Lets go of every object held strongly; each freed object takes its own entry out.
    private func releaseHeld() {
        guard !held.isEmpty else { return }
        var released: [ObjectIdentifier: ManagedObject] = [:]
        swap(&released, &held)
        // Freed here, after ``held`` is empty again: a `deinit` reaches the registry.
        released.removeAll()
    }

    /// The last stamp handed out (``nextStamp()``).
    @exclusivity(unchecked) private var clock: UInt64 = 0

    /// A stamp no object of this registry has had before: an object takes a new one each
    /// time its values change (``ManagedObject/valuesStamp``).
    func nextStamp() -> UInt64 {
        clock &+= 1
        return clock
    }

    /// Removes the entry of `object`, which is being deallocated, if the entry is its own
    /// (another instance may have been registered under its ID since, after a reset).
    func forget(_ object: ManagedObject) {
        let mine = Unmanaged.passUnretained(object).toOpaque()
        // The ID read in place (``slot(_:)`` took a copy of it).
        if case .permanent(let store, let key) = object.objectID.storage, store == storeUUID,
            let table = table(of: object.objectID.entityName)
        {
            tableReferences[table]._withUnsafeGuaranteedRef { $0.remove(key, ifItHolds: mine) }
        } else {
            guard let index = others.index(forKey: object.objectID), others[index].value.reference.toOpaque() == mine else { return }
            others.remove(at: index)
        }
    }

    var count: Int { tables.reduce(others.count) { $0 + $1.count } }
    var isEmpty: Bool { others.isEmpty && tables.allSatisfy(\.isEmpty) }

    /// How many objects of the entity named `name` are registered under permanent IDs of
    /// the registry's store (its sub-entities not counted).
    func count(ofEntity name: String) -> Int {
        guard let index = indexes[name] else { return 0 }
        return tables[index].count
    }

    /// Calls `body` with the primary key and the object of each entry of the entity named
    /// `name` under a permanent ID of the registry's store (its sub-entities not included).
    func forEachObject(ofEntity name: String, _ body: (UInt64, ManagedObject) -> Void) {
        guard let index = indexes[name] else { return }
        tables[index].forEach { key, entry in
            if let object = entry.object { body(key, object) }
        }
    }

    /// Every entry, as a dictionary's elements (a snapshot).
    var entries: [(key: ManagedObjectID, value: WeakObject)] {
        var result: [(key: ManagedObjectID, value: WeakObject)] = []
        result.reserveCapacity(count)
        if let storeUUID {
            for (index, table) in tables.enumerated() {
                table.forEach { key, entry in
                    result.append((ManagedObjectID(entityName: names[index], storage: .permanent(storeUUID: storeUUID, primaryKey: key)), entry))
                }
            }
        }
        for (id, entry) in others { result.append((id, entry)) }
        return result
    }

    var keys: [ManagedObjectID] { entries.map(\.key) }
    var values: [WeakObject] {
        var result: [WeakObject] = []
        result.reserveCapacity(count)
        for table in tables { table.forEach { result.append($1) } }
        result.append(contentsOf: others.values)
        return result
    }

    func makeIterator() -> IndexingIterator<[(key: ManagedObjectID, value: WeakObject)]> { entries.makeIterator() }

    func removeAll() {
        for index in tables.indices { tables[index].removeAll() }
        others.removeAll()
        // After the entries: the objects freed now find none to take out.
        releaseHeld()
    }
}

/// One entity's registry entries by primary key, in pages of 16 consecutive keys found by
/// page number: registering or forgetting an entry is one lookup in the small table of
/// pages and a write in the page — no probing, however the keys are spread, and objects
/// made and freed in key order touch their pages in order. A page goes when its last entry
/// does, so a table holds at most one page per entry.
///
/// A page is 17 words of memory the table allocates itself: the 16 entries (an object's
/// address, 0 for none), then how many are set. The table remembers the last page it
/// reached, so a run of neighbouring keys (a fetch registering its objects, then freeing
/// them) reads and writes that memory directly: no hashing, no uniqueness check of the
/// page table or of a page array (each page was a `ContiguousArray` in the dictionary, and
/// writing one through `pages.values[index]` cost ≈ 150 instructions an entry). A class,
/// so the pages have one owner, which frees them (``RegistryTests`` checks the table
/// against a dictionary).
final class KeyTable {
    /// A page's entries and their count: ``pageEntries`` words, then the count.
    typealias Page = UnsafeMutablePointer<UInt>
    private static let pageEntries = 16

    /// A page number (a key without its low four bits), hashed by one mixing pass.
    struct PageNumber: Hashable {
        let value: UInt64

        static func == (a: PageNumber, b: PageNumber) -> Bool { a.value == b.value }

        func hash(into hasher: inout Hasher) { hasher.combine(value) }

        func _rawHashValue(seed: Int) -> Int {
            // SplitMix64's finalizer over the number and the seed.
            var bits = value ^ (UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15)
            bits = (bits ^ (bits >> 30)) &* 0xBF58_476D_1CE4_E5B9
            bits = (bits ^ (bits >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int(truncatingIfNeeded: bits ^ (bits >> 31))
        }
    }

    @exclusivity(unchecked) private var pages: [PageNumber: Page] = [:]
    /// The number of entries.
    @exclusivity(unchecked) private(set) var count = 0
    /// The page the last access reached (valid while it is in ``pages``: removing a page
    /// forgets it), and its number.
    @exclusivity(unchecked) private var recentNumber: UInt64 = .max
    @exclusivity(unchecked) private var recentPage: Page?

    init() {}

    deinit {
        for page in pages.values { page.deallocate() }
    }

    /// Page `number`, or nil.
    @inline(__always)
    private func page(_ number: UInt64) -> Page? {
        if let recentPage, recentNumber == number { return recentPage }
        guard let page = pages[PageNumber(value: number)] else { return nil }
        recentNumber = number
        recentPage = page
        return page
    }

    var isEmpty: Bool { count == 0 }

    subscript(key: UInt64) -> WeakObject? {
        get {
            guard let page = page(key >> 4) else { return nil }
            let bits = page[Int(key & 15)]
            guard bits != 0, let pointer = UnsafeMutableRawPointer(bitPattern: bits) else { return nil }
            return WeakObject(reference: .fromOpaque(pointer))
        }
        set {
            let number = key >> 4, slot = Int(key & 15)
            if let newValue {
                insert(key, newValue.reference.toOpaque())
            } else {
                guard let page = page(number), page[slot] != 0 else { return }
                clear(page, number, slot)
            }
        }
    }

    /// Sets the entry of `key` to `pointer` (what setting ``subscript(_:)`` to an entry does).
    func insert(_ key: UInt64, _ pointer: UnsafeMutableRawPointer) {
        let number = key >> 4, slot = Int(key & 15)
        let bits = UInt(bitPattern: pointer)
        if let page = page(number) {
            if page[slot] == 0 {
                page[Self.pageEntries] += 1
                count += 1
            }
            page[slot] = bits
        } else {
            let page = Page.allocate(capacity: Self.pageEntries + 1)
            page.initialize(repeating: 0, count: Self.pageEntries + 1)
            page[slot] = bits
            page[Self.pageEntries] = 1
            pages[PageNumber(value: number)] = page
            recentNumber = number
            recentPage = page
            count += 1
        }
    }

    /// Empties `slot` of `page` (set); frees the page when that was its last entry.
    @inline(__always)
    private func clear(_ page: Page, _ number: UInt64, _ slot: Int) {
        page[slot] = 0
        count -= 1
        page[Self.pageEntries] -= 1
        guard page[Self.pageEntries] == 0 else { return }
        pages[PageNumber(value: number)] = nil
        page.deallocate()
        recentPage = nil
    }

    /// Removes the entry of `key` if it holds `pointer`.
    func remove(_ key: UInt64, ifItHolds pointer: UnsafeMutableRawPointer) {
        let number = key >> 4, slot = Int(key & 15)
        guard let page = page(number), page[slot] == UInt(bitPattern: pointer) else { return }
        clear(page, number, slot)
    }

    /// Calls `body` with every entry.
    func forEach(_ body: (UInt64, WeakObject) -> Void) {
        for (number, page) in pages {
            for slot in 0..<Self.pageEntries {
                if let pointer = UnsafeMutableRawPointer(bitPattern: page[slot]) {
                    body(number.value << 4 | UInt64(slot), WeakObject(reference: .fromOpaque(pointer)))
                }
            }
        }
    }

    func removeAll() {
        for page in pages.values { page.deallocate() }
        pages.removeAll()
        recentPage = nil
        count = 0
    }
}

/// The temporary IDs of a context's unsaved inserts, in the order they were inserted.
/// Taking one out (an insert deleted or undone before the save) only notes it: the array
/// drops such IDs when they are half of it, or when one comes back. Before, each removal
/// scanned the whole array, which made deleting or undoing many new objects quadratic.
struct InsertionOrder: Sequence {
    private var ids: [ManagedObjectID] = []
    private var removed: Set<ManagedObjectID> = []

    /// Adds `id` at the end (a removed `id` leaves its old place).
    mutating func append(_ id: ManagedObjectID) {
        if !removed.isEmpty, removed.contains(id) { compact() }
        ids.append(id)
    }

    /// Takes `id` out.
    mutating func remove(_ id: ManagedObjectID) {
        guard !ids.isEmpty else { return }
        removed.insert(id)
        if removed.count * 2 > ids.count { compact() }
    }

    mutating func removeAll() {
        ids.removeAll()
        removed.removeAll()
    }

    /// Renames IDs (temporary IDs that became permanent).
    mutating func remap(_ map: [ManagedObjectID: ManagedObjectID]) {
        compact()
        ids = ids.map { map[$0] ?? $0 }
    }

    private mutating func compact() {
        guard !removed.isEmpty else { return }
        ids.removeAll { removed.contains($0) }
        removed.removeAll()
    }

    /// The IDs in insertion order.
    func makeIterator() -> IndexingIterator<[ManagedObjectID]> {
        (removed.isEmpty ? ids : ids.filter { !removed.contains($0) }).makeIterator()
    }
}

/// The undo and redo stacks of a context (Core Data's `UndoManager` for a context).
final class UndoJournal {
    var undoStack: [UndoGroup] = []
    var redoStack: [UndoGroup] = []
    /// Transactions this context reverted (``ContextCore/revertTransaction(at:actionName:)``):
    /// their groups, read later from persisted undo's older groups, aren't undone again.
    var reverted: Set<UInt64> = []
    /// Groups this context undid by reverting their redo (spec 0006 §25.5): read later
    /// from persisted undo's older groups, they aren't undone again.
    var undoneByRevert: Set<SavedGroup> = []
    /// The group collecting changes now.
    @exclusivity(unchecked) var open = UndoGroup()
    var levelsOfUndo = 0
    @exclusivity(unchecked) var disabledCount = 0
    var explicitDepth = 0
    @exclusivity(unchecked) var isEnabled = true

    var isRegistering: Bool { isEnabled && disabledCount == 0 }

    func currentEventOldValues(for id: ManagedObjectID) -> [String: PropertyValue] {
        open.changes[id]?.old ?? [:]
    }

    /// Persisted groups below ``undoStack`` not read yet (persisted undo reads the log
    /// backwards, a batch at a time); nil when there are none.
    var older: PersistedUndoReader?
    /// How many of the ``older`` groups are still within ``levelsOfUndo`` (nil: all).
    var olderBudget: Int?

    /// Whether groups were dropped (``trim()``, ``clearStacks()``) since the stacks were last
    /// recorded for persisted undo (``ContextCore/recordUndoCheckpoint()``).
    var dropped = false

    /// Drops the oldest groups beyond ``levelsOfUndo``, those not read yet first. Returns
    /// whether saved work was dropped: a saved group, or groups not read yet — which the log
    /// would give back after a restart unless the stacks are recorded.
    @discardableResult
    func trim() -> Bool {
        guard levelsOfUndo > 0 else { return false }
        var droppedSaved = false
        if undoStack.count > levelsOfUndo {
            let count = undoStack.count - levelsOfUndo
            droppedSaved = undoStack.prefix(count).contains { $0.saved != nil || !$0.parts.isEmpty }
            undoStack.removeFirst(count)
            dropped = true
        }
        if older != nil {
            let room = levelsOfUndo - undoStack.count
            if olderBudget.map({ room < $0 }) ?? true {
                dropped = true
                droppedSaved = true
            }
            olderBudget = min(olderBudget ?? room, room)
            if room <= 0 || (olderBudget ?? 0) <= 0 {
                older = nil
                olderBudget = nil
            }
        }
        return droppedSaved
    }

    /// Whether a group on the stacks is a part of a saved group a refresh split (or its
    /// rest, ``UndoGroup/isSplit``): the log names the whole group, so every save records
    /// the stacks while one is there.
    var holdsSplitGroups: Bool {
        undoStack.contains { $0.isSplit } || redoStack.contains { $0.isSplit }
    }

    /// Whether a group sits on a stack no transaction will move it to — an undo or redo of
    /// saved work a merge left with nothing to write (``ContextCore/removeEmptiedEffects()``)
    /// — since the stacks were last recorded for persisted undo: they are recorded whole,
    /// the groups not read yet included.
    var movedUnlogged = false

    /// Whether the stacks, when recorded, must be read whole first (``holdsSplitGroups``,
    /// ``movedUnlogged``): the record names every group, not only those a drop kept.
    var recordsWhole: Bool { movedUnlogged || holdsSplitGroups }

    /// Empties both stacks, with the persisted groups not read yet.
    func clearStacks() {
        if !undoStack.isEmpty || !redoStack.isEmpty || older != nil { dropped = true }
        undoStack.removeAll()
        redoStack.removeAll()
        older = nil
        olderBudget = nil
    }
}

/// A change waiting to be saved: a user group, or the undo or redo of a saved group.
struct PendingEffect {
    enum Kind: Equatable {
        case user
        case undo(UInt64, Int)
        case redo(UInt64, Int)
    }
    /// The changes, oriented as they are to be applied to the store.
    let changes: UndoGroup
    /// The undo-stack group this effect comes from.
    let source: UndoGroup
    let kind: Kind
    /// Parts a refresh split off ``source`` while this undo or redo of saved work waited to
    /// be saved (``UndoGroup/splitOff(_:)``): until it is saved, the store has them and the
    /// rest as one group.
    var splitParts: [UndoGroup] = []

    /// The same effect writing `changes` (a copy taken to edit).
    func writing(_ changes: UndoGroup) -> PendingEffect {
        PendingEffect(changes: changes, source: source, kind: kind, splitParts: splitParts)
    }
}

/// Everything a context tracks. Owned by the context actor; managed objects reach it
/// directly, which is safe because they live in the actor's isolation region.
final class ContextCore {
    weak var context: ManagedObjectContext?
    let coordinator: PersistentStoreCoordinator
    let model: ManagedObjectModel
    let entities: [String: EntityInfo]

    /// Unchanged registered objects, unretained (see ``ObjectRegistry``).
    var registry: ObjectRegistry { objects }
    let objects: ObjectRegistry
    /// Objects with unsaved changes, held strongly until saved or rolled back.
    @exclusivity(unchecked) var retained: [ManagedObjectID: ManagedObject] = [:]
    /// Whether an object of this context ever kept a fetched property's value
    /// (``ManagedObject/fetchedValues``): only then does a save that deletes objects look
    /// for their IDs there.
    var keepsFetchedValues = false
    @exclusivity(unchecked) var insertionOrder = InsertionOrder()
    /// Objects re-created under their permanent ID by undoing a saved delete.
    @exclusivity(unchecked) var restored: Set<ManagedObjectID> = []
    var problems: [ContextError] = []
    /// Set on the context-less scratch core a batch insert's managed-object handler fills
    /// objects in (``BatchObjectFiller``): it posts no notifications.
    var isBatchScratch = false
    /// Unsaved objects removed by a delete or an undo, kept so that undo or redo brings back
    /// the same instance the app holds (Core Data's identity rule). Cleared with the stacks.
    var removedObjects: [ManagedObjectID: ManagedObject] = [:]
    /// In a child context, the temporary IDs of its inserts deleted before any save (never
    /// pushed): a deny rule tells them from its parent's unsaved inserts, which it doesn't hold
    /// either, even once ``removedObjects`` let the object go. Empty in a context of the
    /// coordinator; cleared at rollback and reset.
    var discardedInserts: Set<ManagedObjectID> = []

    let journal = UndoJournal()
    var pending: [PendingEffect] = []
    @exclusivity(unchecked) var isApplyingUndo = false

    var name: String?
    var transactionAuthor: String?
    /// Whether the undo stacks are read back from the log (persisted undo, spec 0006 §13).
    var persistsUndo = false
    /// Whether the draft made last records the undo checkpoint with its commit.
    var draftRecordsUndoCheckpoint = false
    /// While a save runs: groups `levelsOfUndo` drops when it closes a group are recorded
    /// with its commit (or after it fails), not at once.
    var isSaving = false

    // MARK: Notifications
    /// Async subscribers (shared with the context actor, which subscribes without isolation).
    let hub: NotificationHub
    /// Synchronous observers inside the context.
    var observers: [ContextObserver] = []
    var nextObserverID = 0
    /// What changed since the last objects-did-change notification.
    ///
    /// This and the other state every insert or set touches (``insertionOrder``,
    /// ``isApplyingUndo``, ``changeRecorder``, the undo journal's open group) have unchecked
    /// exclusivity, as ``ManagedObject``'s state: a context is used from one executor, and no
    /// access to them spans a call that could reach them again.
    @exclusivity(unchecked) var notice = ObjectsDidChange()
    /// Objects the next objects-did-change names that the context may no longer hold.
    var noticeObjects: [ManagedObjectID: ManagedObject] = [:]
    /// Nesting depth of `perform`/`performAndWait` blocks; the outermost one's end posts.
    var eventDepth = 0
    /// While a save makes its draft: the store it writes to, and the first ID of another
    /// store the draft named (``draftID(_:)``), which the save refuses.
    var draftStoreUUID: UUID?
    var foreignDraftID: ManagedObjectID?

    // MARK: Merging and conflicts
    /// Merge every transaction committed to the store (`automaticallyMergesChangesFromParent`).
    var automaticallyMerges = false
    /// The context has merged (or was created after) every transaction through this sequence.
    var lastMergedSequence: UInt64 = 0
    /// Whether ``lastMergedSequence`` was read from the store yet (it can't be while the
    /// coordinator has no store).
    var knowsLastMergedSequence = false
    /// Transactions this context committed after ``lastMergedSequence`` (and after
    /// ``foldedThrough``, when other writers' transactions were folded): never merged back.
    var ownSequences: Set<UInt64> = []
    /// Other writers' transactions after ``lastMergedSequence`` through ``foldedThrough``,
    /// read ahead of the merge into the summary the merge starts from — what a merge reads
    /// is the same, read in two parts — so that a context that saves often and merges
    /// seldom (or never: a long-lived importer beside other writers) remembers at most
    /// ``ownSequencesBound`` of its own sequences (before, one per save, for ever).
    /// Nil when nothing was folded.
    var folded: ChangeSummary?
    var foldedThrough: UInt64 = 0
    /// The most own sequences ``ownSequences`` holds before they are folded away.
    static let ownSequencesBound = 64
    /// The log whose sequences ``lastMergedSequence`` counts (weakly: a removed store's log
    /// closes), and its store's UUID.
    weak var mergedLog: EventLog?
    var mergedStoreUUID: UUID?
    /// How conflicts found at save are resolved (`mergePolicy`).
    var mergePolicy: any MergePolicy = StandardMergePolicy.error
    /// Whether a fault the store no longer holds reads as a deleted, empty object (true,
    /// Core Data's default) or records `objectNotFound` for the next save to throw.
    var shouldDeleteInaccessibleFaults = true
    /// The query generation the context reads (nil: the store's current state), spec 0006 §22.
    var generation: GenerationView?
    /// The generation the context last moved on from, kept until the next read in case it is
    /// pinned back first (``setQueryGeneration(_:)``): `strata query` re-pins after each
    /// chunk's reset.
    var retiredGeneration: GenerationView?
    /// Whether delete rules (cascade, nullify) run when an object is deleted (true, the
    /// default) or only at the next save (`propagatesDeletesAtEndOfEvent`, spec 0006 §23.2).
    var propagatesDeletes = true
    /// Deleted objects whose delete rules wait for the save (``propagatesDeletes`` off), in
    /// the order deleted.
    var deferredDeletes: [DeferredDelete] = []
    /// While deferred delete rules run: objects they delete apply their rules at once.
    var isPropagatingDeletes = false
    /// The objects whose `prepareForDeletion` is running: a delete that comes back to one
    /// (its hook deletes an object that cascades to it) is the delete already under way.
    var deletionsInProgress: Set<ObjectIdentifier> = []
    /// While a save that deletes objects validates: a reference to one of them from an object
    /// the save writes dangles (``isDangling(_:)``).
    var savingDeletes = false
    /// While a save passes a relationship's value through a subclass's
    /// `validateValue(_:forKey:)`: the save checks the relationship's rules itself (counts,
    /// kind, dangling references), so the base method, which checks them when an app calls
    /// it, leaves them to it (each failure reported once).
    var validatingRelationshipInSave = false
    /// Above zero while `awakeFromFetch` runs: Core Data's change processing is off around it,
    /// so a public setter caching a value there registers no undo, maintains no inverse and
    /// reports no change (``set(_:_:_:maintainInverse:register:)``).
    var awakingFromFetch: Int { objects.awakingFromFetch }
    /// Notes `object` in ``willSaveWatch`` while `willSave` hooks run: a tracked change (a
    /// set that registers undo, an insert, a delete) has its hook run again.
    @inline(__always) func noteTrackedChange(_ object: ManagedObject) {
        if willSaveWatch != nil { willSaveWatch?.insert(ObjectIdentifier(object)) }
    }
    /// Unchanged objects whose version is checked at the next save (`detectConflicts(for:)`).
    var lockedObjects: [ManagedObjectID: ManagedObject] = [:]
    /// Objects holding no change that a pending group still updates (``pendingUpdates(_:)``):
    /// kept, with their versions, for the save's conflict check; not changes
    /// (`hasChanges` ignores them). Emptied with ``pending``.
    var heldForPending: [ManagedObjectID: ManagedObject] = [:]
    /// The values `overwrite` writes for objects in conflict, while a save resolves them.
    var pendingOverwrites: [ManagedObjectID: [String: PropertyValue]] = [:]

    // MARK: Nested contexts
    /// The parent of a child context: its fetches, faults and saves go there, not to the store.
    var parentContext: ManagedObjectContext?
    /// Temporary IDs this context's saves made permanent, so a child that still uses the
    /// temporary one (until it is told) finds the object.
    var idAliases: [ManagedObjectID: ManagedObjectID] = [:]
    /// The store versions this context's saves moved objects from and to (by object, old to
    /// new), while it has live children: what a child read before such a save is counted as
    /// read at the version the save wrote (``versionForChild(_:read:)``).
    /// Only moves from a version a child may hold are kept — one handed to a child
    /// (``childReadVersions``), or one an earlier move led to, which the new move then
    /// replaces (X → old becomes X → new) — so the table follows what children read, not
    /// every save (before session 29 every save added a move for each object it wrote).
    var versionMoves: [ManagedObjectID: [UInt64: UInt64]] = [:]
    /// While this context has live children: the version of each object last handed to a
    /// child (its values read through this context), until a save of this context moves it.
    var childReadVersions: [ManagedObjectID: UInt64] = [:]
    /// Maps of temporary IDs made permanent not merged into ``idAliases`` yet, oldest first.
    var idAliasBacklog: [[ManagedObjectID: ManagedObjectID]] = []
    /// A child's: the remaps its ancestors post to it (``tellDescendants(remapping:)``).
    var remapInbox: RemapInbox?
    /// While a child's save is applied: every object it touches.
    @exclusivity(unchecked) var changeRecorder: Set<ManagedObjectID>?
    /// While a save runs `willSave` hooks: the objects whose values the hooks changed through
    /// accessors (not primitive values), inserted or deleted — their hooks run again.
    @exclusivity(unchecked) var willSaveWatch: Set<ObjectIdentifier>?
    /// Counts the saves' `willSave` passes: an object whose ``ManagedObject/willSaveStamp``
    /// holds the current one had its call in this save.
    var willSaveSerial: UInt64 = 0
    /// Where inserted objects' temporary IDs come from.
    var temporaryIDs = TemporaryIDSource()
    /// The values properties had at `willChangeValue(forKey:)`, until the matching
    /// `didChangeValue(forKey:)`: by object, then property name.
    var changesInProgress: [ObjectIdentifier: [String: PropertyValue]] = [:]
    /// Fetched results controllers following this context's changes, weakly: each is told
    /// of every notification the context posts (after the synchronous observers) and of
    /// objects whose IDs change (``FetchedResultsController``, spec 0006 §21).
    var changeTrackers: [WeakChangeTracker] = []
    /// The objects whose inserts the next objects-did-change posts (their `insertPending`
    /// is cleared then).
    @exclusivity(unchecked) var noticeInserted: [ManagedObject] = []

    init(coordinator: PersistentStoreCoordinator, hub: NotificationHub) {
        self.hub = hub
        self.coordinator = coordinator
        model = coordinator.managedObjectModel
        var entities: [String: EntityInfo] = [:]
        for entity in model.entities { entities[entity.name] = EntityInfo(entity: entity, model: model) }
        self.entities = entities
        objects = ObjectRegistry(names: model.entities.map(\.name))
        objects.core = self
        noteStoreHead()
    }

    func recordProblem(_ problem: ContextError) { problems.append(problem) }

    // MARK: - Registration

    func registered(_ id: ManagedObjectID) -> ManagedObject? {
        retained[id] ?? objects[id]?.object
    }

    func register(_ object: ManagedObject) {
        objects[object.objectID] = WeakObject(object: object)
    }

    /// A new object of `type` (the class registered for the entity when nil), registered.
    /// `id` is consumed: a plain object takes it without a copy (a retain of the entity name
    /// here and a release when the caller's copy went).
    func makeObject(_ id: consuming ManagedObjectID, info: EntityInfo, type: ManagedObject.Type? = nil) -> ManagedObject {
        let type = type ?? coordinator.objectClass(for: info)
        let object = type == ManagedObject.self
            ? ManagedObject(info: info, objectID: id, registry: objects)
            : type.init(ObjectCreation(entity: info, objectID: id, registry: objects))
        // Under the object's own ID (which its init can't change), read in place.
        objects.register(object)
        return object
    }

    /// The registered object for `id`, or a new fault (no I/O).
    func object(with id: ManagedObjectID) -> ManagedObject? {
        if let object = registered(id) { return object }
        if remapInbox != nil, let held = heldUnderFormerID(id) { return held }
        // A child may name its parent's unsaved objects by their temporary IDs.
        guard let info = entities[id.entityName], !id.isTemporaryID || parentContext != nil, !info.entity.isAbstract else { return nil }
        // An ID of another store names nothing here, never a wrong object.
        if case .permanent(let store, _) = id.storage, store != (try? self.store().identifier) { return nil }
        return makeObject(id, info: info)
    }

    /// The error for an ID ``object(with:)`` gives no object for, saying which case it is
    /// (spec 0006 §3.2). Before, every case said "is a temporary ID of another context or
    /// names an unknown entity" — for another store's ID and an abstract entity too.
    func unresolvableIDError(_ id: ManagedObjectID) -> ContextError {
        guard let info = entities[id.entityName] else {
            return .invalidObject("\(id) names the entity \(id.entityName), which the model doesn't have")
        }
        if info.entity.isAbstract {
            return .invalidObject("\(id) names the abstract entity \(id.entityName), which has no objects of its own")
        }
        if id.isTemporaryID {
            return .invalidObject(
                "\(id) is a temporary ID this context doesn't hold: another context's unsaved object, or one made permanent here since (save it, or obtain its permanent ID, and pass that; an object made permanent has that ID as its objectID now)")
        }
        guard case .permanent(let store, _) = id.storage else { return .invalidObject("\(id) names no object here") }
        guard let own = try? self.store().identifier else {
            return .invalidObject("\(id) belongs to the store \(store.uuidString), and the coordinator has no store")
        }
        return .invalidObject("\(id) belongs to the store \(store.uuidString), not this coordinator's store (\(own.uuidString))")
    }

    /// How many of `ids` ``object(with:)`` gives an object for — registered, or one it can
    /// make — without making any: what a to-many's `@count` counts.
    func countObjects(_ ids: [ManagedObjectID]) -> Int {
        let storeUUID = try? self.store().identifier
        // The entity of the last ID, and whether object(with:) makes its objects (IDs of a
        // to-many mostly name one entity).
        var last: (name: String, concrete: Bool)?
        var count = 0
        for id in ids {
            // The usual case first, without a registry lookup: a permanent ID of this store,
            // of a concrete entity of the model — made if not registered.
            if case .permanent(let store, _) = id.storage, store == storeUUID {
                if last?.name != id.entityName { last = (id.entityName, entities[id.entityName].map { !$0.entity.isAbstract } ?? false) }
                if last?.concrete == true {
                    count += 1
                    continue
                }
            }
            if registered(id) != nil {
                count += 1
                continue
            }
            guard id.isTemporaryID, parentContext != nil, let info = entities[id.entityName], !info.entity.isAbstract else { continue }
            count += 1
        }
        return count
    }

    func markChanged(_ object: ManagedObject) {
        retained[object.objectID] = object
    }

    // MARK: - Faults

    func store() throws -> PersistentStore { try coordinator.requireStore() }

    /// The error for an object of a store the coordinator no longer has (it was removed, and
    /// maybe another added): its ID names nothing in the store there now — the same primary
    /// key there is another object — so it is neither read nor written; nil for an ID of
    /// `storeUUID` or a temporary one. Spec 0006 §1.6.
    func foreignStoreError(_ id: ManagedObjectID, storeUUID: UUID) -> ContextError? {
        guard case .permanent(let store, _) = id.storage, store != storeUUID else { return nil }
        return .invalidObject(
            "\(id) belongs to the store \(store.uuidString), which the coordinator no longer has (it was removed; its store is now \(storeUUID.uuidString)): the object can't be read or saved")
    }

    /// Loads a fault's values. A missing object is marked deleted with empty values
    /// (`shouldDeleteInaccessibleFaults`), or stays a fault and is recorded as a problem.
    func fulfill(_ object: ManagedObject) {
        guard !object.hasCommittedValues, !object.isInsertedFlag else { return }
        do {
            try fulfillThrowing(object)
        } catch ContextError.objectNotFound(let what) {
            guard shouldDeleteInaccessibleFaults else {
                recordProblem(.objectNotFound(what))
                return
            }
            // Core Data's default: the object counts as deleted and reads as empty.
            var empty = PropertyRow(info: object.info)
            for property in object.info.properties.values where !property.isTransient { empty[property] = property.emptyValue }
            object.fastCommitted = empty
            object.version = nil
            object.isInaccessible = true
        } catch {
            recordProblem(.wrapping(error))
        }
    }

    /// Loads a fault's values, throwing what keeps it from loading. `rowsReadNow`: the
    /// object's row was read by the caller just now (`existingObjects(with:)`), so it is
    /// fresh whatever the `stalenessInterval`.
    func fulfillThrowing(_ object: ManagedObject, rowsReadNow: Bool = false) throws {
        guard !object.hasCommittedValues, !object.isInsertedFlag else { return }
        if objects.stalenessInterval < 0 || rowsReadNow {
            if !object.hasRow, let batch = object.fetchBatch { try loadBatch(batch) }
            if object.fireFromRow() { return }
        } else if object.hasRow || object.fetchBatch != nil {
            // A row a fetch read earlier: its age isn't kept, so it can't be shown to be
            // within the interval; the store (or the parent) is read instead.
            object.row = nil
            object.rowVersion = nil
            object.fetchBatch = nil
        }
        if parentContext != nil {
            // A child reads its parent's current (unsaved) state.
            guard let snapshot = try parentValues(for: [object.objectID])[object.objectID] else {
                throw ContextError.objectNotFound(object.objectID.description)
            }
            object.committed = snapshot.values
            object.version = snapshot.version
            object.awakeFromFetchUntracked()
            return
        }
        guard let stored = object.objectID.storedID else { return }
        let log = try store().log
        if let foreign = foreignStoreError(object.objectID, storeUUID: log.storeUUID) { throw foreign }
        // Read by property code and held by slot, as a fetch holds its rows: no dictionary
        // to build, and later reads and saves of the object don't hash names.
        guard let fields = try readPinned(log, { reader in try reader.fields(stored) }) else {
            throw ContextError.objectNotFound(object.objectID.description)
        }
        object.fastCommitted = row(from: fields, info: object.info, storeUUID: log.storeUUID)
        object.version = fields.version
        object.awakeFromFetchUntracked()
    }

    /// A stored object's values as the context holds them, by slot.
    func row(from fields: StoredFields, info: EntityInfo, storeUUID: UUID) -> PropertyRow {
        var row = PropertyRow(info: info)
        for (code, name) in fields.names.enumerated() where code < fields.values.count {
            guard let value = fields.values[code], let property = info.property(named: name) else { continue }
            row[property] = propertyValue(value, property, storeUUID: storeUUID)
        }
        return row
    }

    /// A derived relationship side, read from the store and cached with the committed values.
    func derivedValue(_ object: ManagedObject, _ property: PropertyInfo) -> PropertyValue? {
        if parentContext != nil {
            let value = try? parentValue(of: object.objectID, property.name)
            if let value { object.cacheCommittedValue(value, for: property) }
            return value
        }
        guard let stored = object.objectID.storedID, let log = try? store().log,
            foreignStoreError(object.objectID, storeUUID: log.storeUUID) == nil,
            let related = try? readPinned(log, { reader in try reader.related(stored, property.name) })
        else { return nil }
        let value = PropertyValue.related(related, for: property, store: log.storeUUID)
        object.cacheCommittedValue(value, for: property)
        return value
    }

    /// The number of objects the derived side `property` of saved `object` relates to in
    /// the store (as ``derivedValue(_:_:)`` would read them), counted without reading them;
    /// nil in a child context or when the store can't say.
    func derivedCount(_ object: ManagedObject, _ property: PropertyInfo) -> Int? {
        guard parentContext == nil, let stored = object.objectID.storedID, let log = try? store().log else { return nil }
        return try? readPinned(log, { reader in try reader.countRelated(stored, property.name) })
    }

    func values(from stored: [String: LogValue], info: EntityInfo) -> [String: PropertyValue] {
        let storeUUID = (try? store().identifier) ?? UUID()
        var result: [String: PropertyValue] = [:]
        for (key, value) in stored {
            guard let property = info.properties[key] else { continue }
            result[key] = propertyValue(value, property, storeUUID: storeUUID)
        }
        return result
    }

    ///
    /// An attribute value of another model version's type — a record a later version
    /// converted, read by an earlier model's app, or a before-value such an app logged (spec
    /// 0004 §3.5) — is given in this model's type when it converts without loss (reads
    /// expect it, and a save refuses the other type: undo of such a change failed to save);
    /// otherwise as it is.
    func propertyValue(_ value: LogValue, _ property: PropertyInfo, storeUUID: UUID) -> PropertyValue {
        switch value {
        case .null: return property.emptyValue
        case .attribute(let v):
            guard case .attribute(let type) = property.kind, !v.matches(type) else { return .attribute(v) }
            return .attribute(Self.convertedWithoutLoss(v, to: type) ?? v)
        case .reference(let id): return .toOne(.permanent(id, store: storeUUID))
        case .references(let ids):
            let mapped = ids.map { ManagedObjectID.permanent($0, store: storeUUID) }
            return property.isOrdered ? .toMany(mapped) : .unordered(mapped)
        }
    }

    /// `value` in `type` when it converts there and back unchanged; nil otherwise.
    static func convertedWithoutLoss(_ value: AttributeValue, to type: AttributeType) -> AttributeValue? {
        let types: [AttributeType] = [.int16, .int32, .int64, .decimal, .double, .float, .string, .boolean, .date, .binaryData, .uuid, .uri]
        let converted = value.coerced(to: type)
        guard converted.matches(type), let original = types.first(where: { value.matches($0) }), converted.coerced(to: original) == value
        else { return nil }
        return converted
    }

    // MARK: - Setting values

    /// Sets a property, registering undo and maintaining the inverse as asked.
    func set(_ object: ManagedObject, _ property: PropertyInfo, _ value: PropertyValue, maintainInverse: Bool, register: Bool) {
        guard !object.isInvalidated else {
            recordProblem(.invalidObject("\(object.objectID) was removed from its context; setting \(property.name) has no effect"))
            return
        }
        if let derivation = property.derivation {
            // The store computes a derived attribute at save (spec 0006 §24.1).
            recordProblem(.invalidArgument(
                "\(object.entity.name).\(property.name) is a derived attribute (derivation \(derivation)): the store computes its value at save; setting it has no effect"))
            return
        }
        if object.isInsertedFlag, case .attribute = property.kind, !property.isTransient {
            return setInsertedAttribute(object, property, value, register: register)
        }
        if awakingFromFetch > 0 && (register || maintainInverse) {
            // Change processing is off during `awakeFromFetch` (Core Data's documentation):
            // a setter there works as a primitive set.
            return set(object, property, value, maintainInverse: false, register: false)
        }
        var value = value
        if case .toMany(let ids) = value {
            if !property.isOrdered {
                value = .unordered(ids)
            } else if ids.count > 1 {
                // An ordered to-many is an ordered set: an object is in it once, where it first
                // appears (as `NSOrderedSet` keeps it).
                var seen = Set<ManagedObjectID>(minimumCapacity: ids.count)
                let unique = ids.filter { seen.insert($0).inserted }
                if unique.count != ids.count { value = .toMany(unique) }
            }
        }
        let old = unsavedValue(object, property)
        guard PropertyValue.differ(old, value) else { return }
        if maintainInverse, property.isRelationship, let inverseName = property.inverse {
            updateInverse(of: object, property, from: old, to: value, inverseName: inverseName, register: register)
        }
        setRaw(object, property, old: old, new: value, register: register)
    }

    /// ``set(_:_:_:maintainInverse:register:)`` of a persistent attribute of an inserted
    /// object (an app filling in a new object): what ``setRaw(_:_:old:new:register:)`` does,
    /// with the name hashed once rather than twice — the value is stored first, and the one
    /// it replaced (the pending change, else the committed or empty value, as
    /// ``unsavedValue(_:_:)`` gives) decides whether anything changed. An attribute has no
    /// inverse, and an inserted object nothing to settle (it stays retained until its insert
    /// ends). A set that changes nothing leaves the values as they were (it may take the
    /// object a new ``ManagedObject/valuesStamp``, which only costs a save a comparison).
    private func setInsertedAttribute(_ object: ManagedObject, _ property: PropertyInfo, _ value: PropertyValue, register: Bool) {
        let replaced = object.changes.updateValue(value, forKey: property.name)
        let old = replaced ?? object.committedValue(property) ?? .attribute(nil)
        guard PropertyValue.differ(old, value) else {
            // Nothing was pending: the key goes again.
            if replaced == nil { object.changes[property.name] = nil }
            return
        }
        if register && journal.isRegistering && !isApplyingUndo {
            journal.open.recordSet(object, property.name, old: old, new: value)
        }
        if register { noteTrackedChange(object) }
        if awakingFromFetch == 0 { noteUpdated(object) }
    }

    /// Stores a value and records it for undo, without touching inverses.
    func setRaw(_ object: ManagedObject, _ property: PropertyInfo, old: PropertyValue, new: PropertyValue, register: Bool) {
        if register && journal.isRegistering && !isApplyingUndo {
            journal.open.recordSet(object, property.name, old: old, new: new)
        }
        if register { noteTrackedChange(object) }
        if awakingFromFetch == 0 { noteUpdated(object) }
        if property.isTransient {
            object.transients[property.name] = new
            return
        }
        if register { noteTrackedChange(object) }
        if object.isDeletedFlag, property.isRelationship, Self.adds(old, new) { relinkedDeleted(object) }
        object.changes[property.name] = new
        settle(object, property)
    }

    /// Whether `new` names an object `old` doesn't (one pass over each: a deleted object's
    /// large to-many shrinking costs no more than reading it).
    private static func adds(_ old: PropertyValue, _ new: PropertyValue) -> Bool {
        let added = new.ids
        guard !added.isEmpty else { return false }
        let before = old.ids
        if before.isEmpty { return true }
        if added.count == 1 { return !before.contains(added[0]) }
        let known = Set(before)
        return added.contains { !known.contains($0) }
    }

    /// A deleted object (not an unsaved insert: that left the context) gained a relationship
    /// destination after its delete rules ran — the app related it, or related something to
    /// it. Core Data propagates deletes at the end of the event, from the values then, so such
    /// a destination is nullified (or cascaded to) too; here its rules run again at the save,
    /// as deferred rules do (spec 0006 §6, §23.2). Before, the destination kept naming the
    /// deleted object: after the save a department listed an employee the store no longer had.
    private func relinkedDeleted(_ object: ManagedObject) {
        guard propagatesDeletes, !isPropagatingDeletes, !isApplyingUndo, !object.isInsertedFlag, !object.isInvalidated,
            !deletionsInProgress.contains(ObjectIdentifier(object)), deferredDeletes.last?.object !== object
        else { return }
        deferredDeletes.append(DeferredDelete(object: object, values: [:], wasInserted: false))
    }

    /// `willChangeValue(forKey:)`: notes the property's value before a custom setter changes
    /// it with `setPrimitiveValue` (the outermost call for a key counts).
    func willChange(_ object: ManagedObject, _ property: PropertyInfo) {
        guard !object.isInvalidated, changesInProgress[ObjectIdentifier(object)]?[property.name] == nil else { return }
        changesInProgress[ObjectIdentifier(object), default: [:]][property.name] = unsavedValue(object, property)
    }

    /// `didChangeValue(forKey:)`: what the custom setter changed since ``willChange(_:_:)``
    /// becomes a change like `setValue(_:forKey:)` makes — recorded for undo, inverse
    /// maintained. Without a matching `willChange` it does nothing.
    func didChange(_ object: ManagedObject, _ property: PropertyInfo) {
        let key = ObjectIdentifier(object)
        guard let old = changesInProgress[key]?.removeValue(forKey: property.name) else { return }
        if changesInProgress[key]?.isEmpty == true { changesInProgress[key] = nil }
        guard !object.isInvalidated else { return }
        let new = unsavedValue(object, property)
        guard PropertyValue.differ(old, new) else { return }
        // Untracked during `awakeFromFetch`, as `setValue` is there.
        let tracked = awakingFromFetch == 0
        if tracked, property.isRelationship, let inverseName = property.inverse {
            updateInverse(of: object, property, from: old, to: new, inverseName: inverseName, register: true)
        }
        setRaw(object, property, old: old, new: new, register: tracked)
    }

    /// After `object`'s pending value of `property` changed: a value equal to the committed
    /// one is no longer a change, and an object with changes stays retained.
    private func settle(_ object: ManagedObject, _ property: PropertyInfo) {
        // An inserted object is retained from its insertion until the save, rollback, undo
        // or delete that also clears its inserted flag: nothing to settle.
        if object.isInsertedFlag {
            assert(retained[object.objectID] === object, "an inserted object is retained")
            return
        }
        if let value = object.changes[property.name],
            let committed = object.committedValue(property) ?? (property.isRelationship && !property.isRecorded ? nil : property.emptyValue),
            PropertyValue.same(committed, value)
        {
            object.changes[property.name] = nil
        }
        if object.changes.isEmpty && !object.isDeletedFlag && !restored.contains(object.objectID) {
            retained[object.objectID] = nil
            holdIfPendingUpdates(object)
        } else {
            markChanged(object)
        }
    }

    /// Adds `member` to, or removes it from, `owner`'s to-many `property`: the far side of a
    /// relationship change. When the value is already a pending change that only the object
    /// holds (the undo group, if recording, already kept what it needs), it changes in place
    /// — for an unordered relationship a binary search and one insertion — instead of being
    /// copied whole for every member, which made filling a large to-many quadratic.
    ///
    /// `knownAbsent`: `member` is known not to be in an ordered `property` it is added to
    /// (see ``PropertyValue/changeMembership(_:_:adding:ordered:knownAbsent:)``).
    private func changeMembership(
        of owner: ManagedObject, _ property: PropertyInfo, _ member: ManagedObjectID, adding: Bool, register: Bool, knownAbsent: Bool = false
    ) {
        var absent = false
        updateMembers(of: owner, property, register: register) { ids in
            let changed = PropertyValue.changeMembership(&ids, member, adding: adding, ordered: property.isOrdered, knownAbsent: knownAbsent)
            if !changed && !adding { absent = true }
            return changed
        }
        // A derived side (a team's players) holding no change is the store's as read then: one
        // read before another writer put the member there, whose to-one names the owner as
        // read since, is read again and the member taken out. Before session 34 nothing was
        // taken out and the side held no change, so a merge re-reading it listed the member the
        // context had moved to its own team (seed 309 of `UndoInsertLinkFixTests`).
        if absent, register, !property.isRecorded, !property.isTransient, !owner.isInsertedFlag, owner.changes[property.name] == nil,
            owner.committedValue(property) != nil, let fresh = derivedValue(owner, property), fresh.ids.contains(member)
        {
            absent = false
            updateMembers(of: owner, property, register: register) { ids in
                PropertyValue.changeMembership(&ids, member, adding: false, ordered: property.isOrdered, knownAbsent: false)
            }
        }
        if adding, owner.isDeletedFlag { relinkedDeleted(owner) }
        // A derived side (a team's players) held as read before another writer put the member
        // there doesn't list the member whose to-one names the owner: the group keeps it as a
        // member before the change (spec 0006 §9 item 4), so undoing the change (a saved
        // delete of the member) lists it again where its to-one names the owner. Before, the
        // undo brought the player back on the team while the team didn't list it (seed 142 of
        // `UndoInsertLinkFixTests.randomizedLinksAndUndo`).
        if absent, register, journal.isRegistering, !isApplyingUndo, !property.isRecorded, !property.isTransient, !owner.isInsertedFlag {
            journal.open.recordUnlistedMember(owner, property, member, current: owner.currentValue(property))
        }
    }

    /// Changes `owner`'s to-many `property` by running `body` on its member IDs (`body` says
    /// whether it changed them), registering undo as ``setRaw(_:_:old:new:register:)`` does.
    /// When the value is a pending change only the object holds (the undo group, if
    /// recording, already kept what it needs), `body` changes it in place instead of a copy.
    private func updateMembers(
        of owner: ManagedObject, _ property: PropertyInfo, register: Bool, _ body: (inout [ManagedObjectID]) -> Bool
    ) {
        let recording = register && journal.isRegistering && !isApplyingUndo
        // The pending value found once, and changed and read where it is (no more hashing).
        if !property.isTransient, let index = owner.changes.index(forKey: property.name) {
            let inPlace = recording ? journal.open.detachForInPlaceChange(owner.objectID, property.name) : .unrecorded
            if inPlace != .refused {
                let changed = owner.changes.values[index].updateIDs(body)
                if inPlace == .reattach { journal.open.reattach(owner.objectID, property.name, owner.changes.values[index]) }
                guard changed == true else { return }
                if register { noteTrackedChange(owner) }
                noteUpdated(owner)
                settle(owner, property)
                return
            }
        }
        let current = owner.currentValue(property)
        var ids = current.ids
        guard body(&ids) else { return }
        setRaw(owner, property, old: current, new: .toMany(ids), register: register)
    }

    private func updateInverse(
        of object: ManagedObject, _ property: PropertyInfo, from old: PropertyValue, to new: PropertyValue,
        inverseName: String, register: Bool
    ) {
        // A to-one change (the usual case) names at most one object on each side.
        if case .toOne(let oldID) = old, case .toOne(let newID) = new {
            if let oldID, oldID != newID { dropInverse(of: object, from: oldID, inverseName: inverseName, register: register) }
            if let newID, newID != oldID { addInverse(of: object, property, to: newID, inverseName: inverseName, register: register) }
            return
        }
        let oldIDs = Set(old.ids)
        let newIDs = Set(new.ids)
        for removed in oldIDs.subtracting(newIDs) {
            dropInverse(of: object, from: removed, inverseName: inverseName, register: register)
        }
        for added in newIDs.subtracting(oldIDs) {
            addInverse(of: object, property, to: added, inverseName: inverseName, register: register)
        }
    }

    /// `object` no longer relates to `removed`: `removed`'s inverse drops it.
    private func dropInverse(of object: ManagedObject, from removed: ManagedObjectID, inverseName: String, register: Bool) {
        guard let other = self.object(with: removed), let inverse = other.info.property(named: inverseName) else { return }
        if inverse.isToMany {
            changeMembership(of: other, inverse, object.objectID, adding: false, register: register)
            return
        }
        let current = other.currentValue(inverse)
        if current.ids.first == object.objectID { setRaw(other, inverse, old: current, new: .toOne(nil), register: register) }
    }

    /// `object` now relates to `added` through `property`: `added`'s inverse names it.
    ///
    /// Every caller adds `added` to `object`'s `property` because it wasn't there, so by the
    /// inverse invariant `object` isn't in `added`'s inverse either: an ordered inverse gets
    /// it appended without a look through its list.
    private func addInverse(of object: ManagedObject, _ property: PropertyInfo, to added: ManagedObjectID, inverseName: String, register: Bool) {
        guard let other = self.object(with: added), let inverse = other.info.property(named: inverseName) else { return }
        if inverse.isToMany {
            changeMembership(of: other, inverse, object.objectID, adding: true, register: register, knownAbsent: true)
            return
        }
        let current = other.currentValue(inverse)
        // `other` leaves its previous partner, whose `property` must drop it.
        // The partner may be of another entity (a parent, a sub-entity or a sibling of
        // `object`'s): its own description of the property says where its value is.
        if let previous = current.ids.first, previous != object.objectID, let partner = self.object(with: previous),
            let partnerProperty = partner.info.property(named: property.name)
        {
            if partnerProperty.isToMany {
                changeMembership(of: partner, partnerProperty, other.objectID, adding: false, register: register)
            } else {
                let partnerValue = partner.currentValue(partnerProperty)
                if partnerValue != .toOne(nil) { setRaw(partner, partnerProperty, old: partnerValue, new: .toOne(nil), register: register) }
            }
        }
        setRaw(other, inverse, old: current, new: .toOne(object.objectID), register: register)
    }

    func addMembers(_ owner: ManagedObject, _ key: String, _ objects: [ManagedObject]) {
        guard let property = toManyProperty(owner, key) else { return }
        if let wrong = ManagedObject.misfit(nil, of: objects.map(\.entity), for: property) {
            recordProblem(.invalidArgument("\(owner.entity.name).\(key): \(wrong); nothing was added"))
            return
        }
        if let gone = objects.first(where: \.isRemovedInsert) {
            recordProblem(.invalidArgument("\(owner.entity.name).\(key): \(ManagedObject.danglingReference(to: gone.objectID)); nothing was added"))
            return
        }
        if let foreign = objects.first(where: { $0.registry !== self.objects }) {
            recordProblem(.invalidArgument("\(owner.entity.name).\(key): \(ManagedObject.foreignObject(foreign)); nothing was added"))
            return
        }
        if objects.count == 1 {
            changeMember(owner, property, objects[0].objectID, adding: true)
            return
        }
        let current = owner.currentValue(property).ids
        // Each new member once, whatever `objects` repeats.
        var seen = Set(current)
        let added = objects.map(\.objectID).filter { seen.insert($0).inserted }
        set(owner, property, .toMany(current + added), maintainInverse: true, register: true)
    }

    func removeMembers(_ owner: ManagedObject, _ key: String, _ objects: [ManagedObject]) {
        guard let property = toManyProperty(owner, key) else { return }
        if objects.count == 1 {
            changeMember(owner, property, objects[0].objectID, adding: false)
            return
        }
        let removed = Set(objects.map(\.objectID))
        set(owner, property, .toMany(owner.currentValue(property).ids.filter { !removed.contains($0) }), maintainInverse: true, register: true)
    }

    /// Puts `member` at `index` of `owner`'s ordered to-many `key` (an ordered proxy's
    /// `insert(_:at:)`), moving it there if it is a member already, else adding it with its
    /// inverse maintained; nil when the key isn't a to-many relationship or `member` doesn't
    /// fit it (the problem recorded), else the member count `index` was checked against and
    /// whether it was in range (out of range, nothing changes). Works on the member IDs:
    /// before, each call made every member object and set the whole list, comparing it
    /// with the old one, which made building a list by inserting at the front quadratic
    /// with a large constant (7.9 s for 4,000 members).
    func insertMember(_ owner: ManagedObject, _ key: String, _ member: ManagedObject, at index: Int) -> (count: Int, inRange: Bool)? {
        guard let property = toManyProperty(owner, key) else { return nil }
        if let wrong = ManagedObject.misfit(nil, of: [member.entity], for: property) {
            recordProblem(.invalidArgument("\(owner.entity.name).\(key): \(wrong); nothing was inserted"))
            return nil
        }
        if member.isRemovedInsert {
            recordProblem(.invalidArgument("\(owner.entity.name).\(key): \(ManagedObject.danglingReference(to: member.objectID)); nothing was inserted"))
            return nil
        }
        if member.registry !== objects {
            recordProblem(.invalidArgument("\(owner.entity.name).\(key): \(ManagedObject.foreignObject(member)); nothing was inserted"))
            return nil
        }
        let count = unsavedValue(owner, property).ids.count
        guard (0...count).contains(index) else { return (count, false) }
        guard property.isOrdered, !owner.isInvalidated else {
            // Unordered: a position means nothing; the member is added (as a whole new value
            // set through the proxy did).
            changeMember(owner, property, member.objectID, adding: true)
            return (count, true)
        }
        let id = member.objectID
        let isMember = orderedMembership(owner, property, id) ?? unsavedValue(owner, property).ids.contains(id)
        if !isMember, let inverseName = property.inverse, !Self.isOwnInverse(owner, property, id) {
            // The member's side first (it leaves a previous list), as `add` does.
            addInverse(of: owner, property, to: id, inverseName: inverseName, register: true)
        }
        updateMembers(of: owner, property, register: true) { ids in
            guard isMember, let existing = ids.firstIndex(of: id) else {
                ids.insert(id, at: Swift.min(index, ids.count))
                return true
            }
            // A member's new position counts after its removal; where it is, nothing changes.
            let target = Swift.min(index, ids.count - 1)
            guard target != existing else { return false }
            ids.insert(ids.remove(at: existing), at: target)
            return true
        }
        return (count, true)
    }

    /// Moves the member at `from` to `to` in `owner`'s ordered to-many `key` (an ordered
    /// proxy's `moveObject(at:to:)`): the same members, so no inverse changes. nil when the key
    /// isn't a to-many relationship; else the member count and whether both positions were in
    /// range (out of range, nothing changes).
    func moveMember(_ owner: ManagedObject, _ key: String, from: Int, to: Int) -> (count: Int, inRange: Bool)? {
        guard let property = toManyProperty(owner, key) else { return nil }
        let count = unsavedValue(owner, property).ids.count
        guard (0..<count).contains(from), (0..<count).contains(to) else { return (count, false) }
        guard from != to, property.isOrdered, !owner.isInvalidated else { return (count, true) }
        updateMembers(of: owner, property, register: true) { ids in
            ids.insert(ids.remove(at: from), at: to)
            return true
        }
        return (count, true)
    }

    /// Adds one member to, or removes it from, `owner`'s to-many `property` (a mutable
    /// proxy's `add` or `remove`): what ``set(_:_:_:maintainInverse:register:)`` does with
    /// the whole new value, for the one member — its inverse first, then `owner`'s value in
    /// place. Before, each call copied the value and compared it whole with the old one
    /// (hashing every member twice), which made filling or emptying a large to-many through
    /// a proxy quadratic.
    private func changeMember(_ owner: ManagedObject, _ property: PropertyInfo, _ member: ManagedObjectID, adding: Bool) {
        guard !owner.isInvalidated else {
            recordProblem(.invalidObject("\(owner.objectID) was removed from its context; setting \(property.name) has no effect"))
            return
        }
        let ids = unsavedValue(owner, property).ids
        // An unordered value is sorted: a binary search (removal also looks everywhere, as
        // ``PropertyValue/changeMembership(_:_:adding:ordered:knownAbsent:)`` does). An ordered
        // one with a to-one inverse: the member's side says whether it belongs to `owner`
        // (reading it costs nothing extra: maintaining the inverse reads it next).
        let isMember = property.isOrdered
            ? orderedMembership(owner, property, member) ?? ids.contains(member)
            : PropertyValue.position(of: member, in: ids).found || (!adding && ids.contains(member))
        guard isMember != adding else { return }
        // An object joining (or leaving) its own reflexive relationship (`links`, its own
        // inverse) is its own far side: the change below is the inverse too. Before, both
        // were made and the object was in its ordered list twice.
        if property.isRelationship, let inverseName = property.inverse, !Self.isOwnInverse(owner, property, member) {
            if adding {
                addInverse(of: owner, property, to: member, inverseName: inverseName, register: true)
            } else {
                dropInverse(of: owner, from: member, inverseName: inverseName, register: true)
            }
        }
        changeMembership(of: owner, property, member, adding: adding, register: true, knownAbsent: adding)
    }

    /// Whether `member` is `owner` itself and `property` is its own inverse (a reflexive
    /// to-many such as `friends`): then the member's inverse is the very value being changed.
    private static func isOwnInverse(_ owner: ManagedObject, _ property: PropertyInfo, _ member: ManagedObjectID) -> Bool {
        property.inverse == property.name && member == owner.objectID
    }

    /// Whether `member` is in `owner`'s ordered to-many `property`, read from `member`'s to-one
    /// inverse (which names `owner` exactly when it is); nil when there is no such inverse.
    private func orderedMembership(_ owner: ManagedObject, _ property: PropertyInfo, _ member: ManagedObjectID) -> Bool? {
        guard let inverseName = property.inverse, let other = object(with: member),
            let inverse = other.info.properties[inverseName], !inverse.isToMany
        else { return nil }
        return other.currentValue(inverse).ids.first == owner.objectID
    }

    /// The member IDs of `owner`'s to-many relationship `key` as a mutable proxy reads them
    /// (in order for an ordered one), and whether it is ordered; nil for a key that isn't a
    /// to-many relationship. No member object is made: a proxy's `count`, `contains` and
    /// positions cost what reading the value costs, not a registry lookup per member.
    func memberIDs(_ owner: ManagedObject, _ key: String) -> (ids: [ManagedObjectID], ordered: Bool)? {
        guard let property = owner.info.properties[key], property.isToMany else { return nil }
        return (unsavedValue(owner, property).ids, property.isOrdered)
    }

    /// The to-many relationship `key` of `owner` a mutable proxy changes; nil (with the
    /// problem recorded) for an unknown key or a property that isn't a to-many relationship.
    private func toManyProperty(_ owner: ManagedObject, _ key: String) -> PropertyInfo? {
        guard let property = owner.info.properties[key] else {
            recordProblem(.unknownKey(entity: owner.entity.name, key: key))
            return nil
        }
        guard property.isToMany else {
            recordProblem(.invalidArgument("\(owner.entity.name).\(key) is not a to-many relationship: a mutable set or ordered set of it changes nothing"))
            return nil
        }
        return property
    }

    // MARK: - Inserting and deleting

    func insert(entityName: String, as type: (ManagedObject.Type)?, in context: isolated ManagedObjectContext) throws -> ManagedObject {
        let (info, id) = try newObjectIdentity(entityName)
        let objectType = type ?? coordinator.objectClass(for: info)
        // A plain object without an ``ObjectCreation`` to take apart again, as `makeObject` does.
        let object = objectType == ManagedObject.self
            ? ManagedObject(info: info, objectID: id, registry: objects)
            : objectType.init(ObjectCreation(entity: info, objectID: id, registry: objects))
        completeInsert(object, info: info, in: context)
        return object
    }

    /// What an object made by its class's own initializer (`Run(context:)`) is created
    /// from: `entityName`'s description and a new temporary ID.
    ///
    /// - Throws: ``ContextError/unknownEntity(_:)``; ``ContextError/invalidArgument(_:)`` for
    ///   an abstract entity.
    func creation(forInserting entityName: String) throws -> ObjectCreation {
        let (info, id) = try newObjectIdentity(entityName)
        return ObjectCreation(entity: info, objectID: id, registry: objects)
    }

    private func newObjectIdentity(_ entityName: String) throws -> (EntityInfo, ManagedObjectID) {
        guard let info = entities[entityName] else { throw ContextError.unknownEntity(entityName) }
        guard !info.isAbstract else {
            throw ContextError.invalidArgument("entity \(entityName) is abstract; insert one of its sub-entities")
        }
        return (info, temporaryIDs.next(entityName))
    }

    /// Registers a new `object` as inserted: defaults set, undo registered, `awakeFromInsert`.
    func completeInsert(_ object: ManagedObject, info: EntityInfo, in context: isolated ManagedObjectContext) {
        prepareInsert(object, info: info)
        object.awakeFromInsert(in: context)
    }

    /// A new object of `entityName` for a batch insert's managed-object handler
    /// (``BatchObjectFiller``), in this context-less core: registered as inserted, defaults
    /// set, the plain ``ManagedObject/awakeFromInsert()`` run. It belongs to no context, as
    /// Core Data's handler object doesn't (`managedObjectContext` is nil), so the hook that
    /// takes the context, ``ManagedObject/awakeFromInsert(in:)``, isn't run.
    func insertDetached(entityName: String, as type: ManagedObject.Type) throws -> ManagedObject {
        let (info, id) = try newObjectIdentity(entityName)
        let object = type == ManagedObject.self
            ? ManagedObject(info: info, objectID: id, registry: objects)
            : type.init(ObjectCreation(entity: info, objectID: id, registry: objects))
        prepareInsert(object, info: info)
        object.awakeFromInsert()
        return object
    }

    /// Registers a new `object` as inserted, with its defaults and its insert's undo.
    private func prepareInsert(_ object: ManagedObject, info: EntityInfo) {
        let id = object.objectID
        object.isInsertedFlag = true
        object.committed = [:]
        // Room for every property: setting them one by one doesn't grow the table each time.
        object.changes = info.emptyChanges
        register(object)
        markChanged(object)
        insertionOrder.append(id)
        noteInserted(object)
        noteTrackedChange(object)
        if journal.isRegistering && !isApplyingUndo { journal.open.recordInsert(id, object: object) }
        for property in info.defaultedProperties {
            if let value = property.defaultValue { setRaw(object, property, old: property.emptyValue, new: .attribute(value), register: false) }
        }
    }

    func delete(_ object: ManagedObject, in context: isolated ManagedObjectContext) {
        // An object another context or process deleted, found gone when its fault fired
        // (`shouldDeleteInaccessibleFaults`), already counts as deleted: there is nothing to
        // delete or propagate. Before, its delete went to the save, which failed with a
        // conflict ("changed by another writer") the app couldn't resolve.
        guard !object.isDeletedFlag, !object.isInvalidated, !object.isInaccessible, !deletionsInProgress.contains(ObjectIdentifier(object)) else { return }
        noteDeleted(object)
        noteTrackedChange(object)
        // Once, as in Core Data: a delete that reaches the object again while its hook runs
        // (the hook deletes an object that cascades back) finds it under way. Before, the hook
        // ran twice and the delete was recorded twice.
        deletionsInProgress.insert(ObjectIdentifier(object))
        object.prepareForDeletion(in: context)
        deletionsInProgress.remove(ObjectIdentifier(object))
        let snapshot = currentValues(object)
        // Reading the values fired the fault: gone too.
        guard !object.isInaccessible else { return }
        if journal.isRegistering && !isApplyingUndo { journal.open.recordDelete(object.objectID, snapshot: snapshot) }
        object.isDeletedFlag = true
        markChanged(object)
        let inserted = object.isInsertedFlag
        if propagatesDeletes || isPropagatingDeletes {
            // Delete rules, at delete time (deny is checked at save).
            applyDeleteRules(of: object, targets: snapshot, deferred: false, in: context)
        } else {
            // `propagatesDeletesAtEndOfEvent` off: the rules run at the save.
            deferredDeletes.append(DeferredDelete(object: object, values: snapshot, wasInserted: inserted))
        }
        if inserted {
            // Inserted and deleted before any save: it never reaches the store. Not inserted,
            // not deleted (nothing will be deleted from the store), invalidated.
            object.isInsertedFlag = false
            object.isDeletedFlag = false
            insertionOrder.remove(object.objectID)
            retained[object.objectID] = nil
            registry[object.objectID] = nil
            object.isInvalidated = true
            // Held for undo to bring back — only when an undo can: the open group holds the
            // delete (an insert and delete in one group net out, and with undo off nothing is
            // recorded). Before, every such object was held until rollback, reset or
            // `removeAllUndoActions()`, however long the context lived.
            if journal.isRegistering && !isApplyingUndo && journal.open.changes[object.objectID] != nil {
                removedObjects[object.objectID] = object
            }
            if parentContext != nil { discardedInserts.insert(object.objectID) }
        }
    }

    /// Runs the cascade and nullify rules of `object`'s persistent relationships, whose
    /// destinations `targets` gives (the object's values). `deferred`: the rules run later
    /// than the delete (at the save), so a destination that has left the object since —
    /// its inverse no longer names it — is left alone.
    ///
    /// Transient relationships too, as Core Data's rules cover every relationship: before, a
    /// deleted object stayed in a transient to-many's members, and after the save it read as a
    /// live fault of an object the store no longer had.
    func applyDeleteRules(of object: ManagedObject, targets values: [String: PropertyValue], deferred: Bool, in context: isolated ManagedObjectContext) {
        for property in object.info.properties.values where property.isRelationship {
            let targets = values[property.name]?.ids ?? []
            switch property.deleteRule {
            case .cascade:
                for id in targets {
                    guard let target = self.object(with: id) else { continue }
                    if deferred, let inverseName = property.inverse, let inverse = target.info.properties[inverseName],
                        !target.isDeletedFlag, !unsavedValue(target, inverse).ids.contains(object.objectID)
                    {
                        continue
                    }
                    delete(target, in: context)
                }
            case .nullify:
                guard let inverseName = property.inverse else { continue }
                for id in targets {
                    guard let target = self.object(with: id), !target.isDeletedFlag, let inverse = target.info.properties[inverseName] else { continue }
                    if inverse.isToMany {
                        // One member out, in place: deleting each member of a large
                        // relationship no longer copies (and records) the rest each time.
                        changeMembership(of: target, inverse, object.objectID, adding: false, register: true)
                        continue
                    }
                    let current = target.currentValue(inverse)
                    if deferred && current.ids.first != object.objectID { continue }
                    let updated: PropertyValue = inverse.isToMany ? (inverse.isOrdered ? .toMany(current.ids.filter { $0 != object.objectID }) : .unordered(current.ids.filter { $0 != object.objectID })) : .toOne(nil)
                    if updated != current { setRaw(target, inverse, old: current, new: updated, register: true) }
                }
            case .deny, .noAction:
                continue
            }
        }
    }

    /// Runs the delete rules ``delete(_:in:)`` deferred while `propagatesDeletesAtEndOfEvent`
    /// was off (at the save, or when it is turned on again), for the objects still deleted —
    /// an undo, rollback or refresh may have brought one back. A deleted object's rules see
    /// its values now (an unsaved insert's: at its delete, as it left the context then).
    ///
    /// What they change is recorded for undo with the deletes: in the open group, or, when
    /// that is empty (the deletes' group was closed), in the group on top of the undo stack
    /// if it is the last one waiting to be saved — so undoing the delete restores what it
    /// cascaded to and nullified too.
    func propagateDeferredDeletes(in context: isolated ManagedObjectContext) {
        guard !deferredDeletes.isEmpty else { return }
        let entries = deferredDeletes
        deferredDeletes.removeAll()
        let openWasEmpty = journal.open.isEmpty
        isPropagatingDeletes = true
        defer { isPropagatingDeletes = false }
        var seen: Set<ObjectIdentifier> = []
        for entry in entries where seen.insert(ObjectIdentifier(entry.object)).inserted {
            let object = entry.object
            if entry.wasInserted {
                // Still out of the context (an undo of the delete would have brought it back).
                guard object.isInvalidated, !object.isInsertedFlag else { continue }
                applyDeleteRules(of: object, targets: entry.values, deferred: true, in: context)
            } else {
                guard object.isDeletedFlag, !object.isInvalidated else { continue }
                applyDeleteRules(of: object, targets: currentValues(object), deferred: true, in: context)
            }
        }
        // Recorded with the deletes' group when that was closed already.
        guard openWasEmpty, !journal.open.isEmpty, journal.explicitDepth == 0, journal.isRegistering,
            let previous = journal.undoStack.last, previous.saved == nil, !previous.fromLog, !previous.pushed,
            let last = pending.last, last.kind == .user, last.source === previous
        else { return }
        let propagation = journal.open
        journal.open = UndoGroup()
        propagation.close { id in registered(id).map { (currentValues($0), $0.valuesStamp) } }
        previous.absorb(propagation) { id in registered(id).map { (currentValues($0), $0.valuesStamp) } }
        // A group whose inserts the rules deleted again may be left empty: it goes.
        removeEmptiedEffects()
    }

    /// Every value of the object now (persistent and transient).
    func currentValues(_ object: ManagedObject) -> [String: PropertyValue] {
        // An inserted object with no committed values (the usual case): its changes are its
        // persistent values, shared rather than copied, when none of them is empty.
        if object.isInsertedFlag && object.fastCommitted == nil && object.storedCommitted?.isEmpty ?? true
            && !object.changes.values.contains(where: \.isNil) {
            var values = object.changes
            for (key, value) in object.transients where !value.isNil { values[key] = value }
            return values
        }
        var values = [String: PropertyValue](minimumCapacity: object.info.propertyList.count)
        for property in object.info.propertyList {
            let value = unsavedValue(object, property)
            if !value.isNil { values[property.name] = value }
        }
        return values
    }

    // MARK: - Undo

    func processPendingChanges() {
        guard journal.explicitDepth == 0 else { return }
        closeOpenGroup()
    }

    /// Closes the open group. `continuing`: inside explicit grouping, the changes that follow
    /// (the next group) are still the explicit group's, under its action name — a save, undo
    /// or redo closes the group there (before, the rest of the group lost its name, and
    /// `undoActionName` after `endUndoGrouping()` was nil).
    func closeOpenGroup(continuing: Bool = false) {
        let group = journal.open
        journal.open = UndoGroup(actionName: continuing && journal.explicitDepth > 0 ? group.actionName : nil)
        group.close { id in registered(id).map { (currentValues($0), $0.valuesStamp) } }
        guard !group.isEmpty else { return }
        journal.undoStack.append(group)
        let kept = journal.undoStack.count
        let droppedSaved = journal.trim()
        let dropped = journal.undoStack.count < kept || !journal.redoStack.isEmpty
        journal.redoStack.removeAll()
        // Objects only a redo, or a group `levelsOfUndo` dropped, could have brought back are
        // no longer held.
        if dropped { releaseUnreachableRemovedObjects() }
        pending.append(PendingEffect(changes: group, source: group, kind: .user))
        // Saved groups `levelsOfUndo` dropped are recorded at once for persisted undo, so a
        // quit before this group is saved doesn't bring them back (spec 0006 §13); a save
        // records them with its commit instead.
        if droppedSaved, !isSaving { recordUndoCheckpoint() }
    }

    /// Stops holding the removed objects (``removedObjects``) that no group on the stacks or
    /// the open group names any more: only undo and redo bring an object back (a group
    /// waiting to be saved writes by ID), so nothing can.
    func releaseUnreachableRemovedObjects() {
        guard !removedObjects.isEmpty else { return }
        for id in Array(removedObjects.keys) {
            let named = journal.open.changes[id] != nil
                || journal.undoStack.contains { $0.changes[id] != nil }
                || journal.redoStack.contains { $0.changes[id] != nil }
            if !named { removedObjects[id] = nil }
        }
    }

    func undo() throws {
        // No undo manager (`isUndoEnabled` false, Core Data's `undoManager = nil`): nothing.
        guard journal.isEnabled else { return }
        // The open group closes even inside explicit grouping, as at a save: undo must not
        // apply an older group under changes still being recorded (before, inside
        // `beginUndoGrouping()` it undid the group below the open one, whose recorded old
        // values then no longer matched, and the next save or undo wrote or expected wrong
        // values). Later changes in the explicit group form the next group.
        closeOpenGroup(continuing: true)
        loadOlderUndo()
        guard let group = journal.undoStack.last else { return }
        // Undone by applying the group backwards. Saved work is checked against the store
        // first, and its inverse is saved as an effect of its own: only then is the inverse
        // built (building it for unsaved work cost as much as a third of the undo).
        let saved = group.saved != nil || group.fromLog
        if saved {
            try checkConflicts(applying: group, reversed: true)
        } else if group.pushed, !pending.contains(where: { $0.source === group }) {
            try checkConflictsThroughParent(applying: group, reversed: true)
        }
        if let conflict = cancellingConflict(group, reversed: true) { throw conflict }
        journal.undoStack.removeLast()
        apply(group, reversed: true, events: .undoUpdate, cancellingPending: group.saved != nil && pending.contains(where: { $0.source === group }))
        journal.redoStack.append(group)
        journal.reverted.formUnion(group.revertedSequences)
        journal.undoneByRevert.formUnion(group.undoneRedoneGroups)
        if pending.contains(where: { $0.source === group }) {
            // Its effects (one; a revert's, one per part) are unsaved: they go — and the undo
            // is saved after all where the store no longer holds what the redo set (§16.1).
            pending.removeAll { $0.source === group }
            if group.saved != nil, storeLacks(group, reversed: true) { appendEffects(of: group, undoing: true) }
        } else if group.saved != nil {
            appendEffects(of: group, undoing: true)
        } else if group.pushed {
            // Pushed into the parent by a child's save: the next save pushes the inverse.
            pending.append(PendingEffect(changes: group.inverse, source: group, kind: .user))
        }
    }

    func redo() throws {
        guard journal.isEnabled else { return }
        closeOpenGroup(continuing: true)
        guard let group = journal.redoStack.last else { return }
        if group.saved != nil || group.fromLog {
            try checkConflicts(applying: group)
        } else if group.pushed, !pending.contains(where: { $0.source === group }) {
            try checkConflictsThroughParent(applying: group)
        }
        if let conflict = cancellingConflict(group, reversed: false) { throw conflict }
        journal.redoStack.removeLast()
        apply(group, events: .undoUpdate, cancellingPending: group.saved != nil && pending.contains(where: { $0.source === group }))
        journal.undoStack.append(group)
        // A redo ends a group on the undo stack like any other: past `levelsOfUndo` the
        // oldest go (before, redos could pile the stack up past the limit set since).
        let kept = journal.undoStack.count
        let droppedSaved = journal.trim()
        if journal.undoStack.count < kept { releaseUnreachableRemovedObjects() }
        // A revert redone: the transaction's own groups are its to undo again.
        journal.reverted.subtract(group.revertedSequences)
        journal.undoneByRevert.subtract(group.undoneRedoneGroups)
        if pending.contains(where: { $0.source === group }) {
            pending.removeAll { $0.source === group }
            // A merge since the undo left the store without the group's values (another
            // writer took the song out of the list, or reordered it, after the save; the
            // pending undo, rebased, still put back what the group replaces): dropping the
            // undo doesn't bring them back, so the redo is saved as a redo. Before session 34
            // it wasn't: the context showed the group's values with no effect to write them,
            // and undoing the group again was refused as a conflict with the store's list
            // (`OrderedPendingUndoMergeTests`).
            if group.saved != nil, storeLacks(group, reversed: false) { appendEffects(of: group, undoing: false) }
        } else if group.saved != nil {
            appendEffects(of: group, undoing: false)
        } else {
            pending.append(PendingEffect(changes: group, source: group, kind: .user))
        }
        if droppedSaved { recordUndoCheckpoint() }
    }

    /// Whether the store, as this context last read it, doesn't hold what applying saved
    /// `group` (`reversed`: undoing it) sets, for a recorded property of a loaded object that
    /// no other pending undo or redo of saved work writes: the group's unsaved undo (redo)
    /// just dropped didn't stand between the group's values and the store's, a merge having
    /// changed the store's since.
    ///
    /// A group that inserts or deletes an object (or a revert's, of parts) is never saved
    /// this way: its dropped undo (redo) was never written, so the store still holds what the
    /// group inserted (lacks what it deleted), and saving the redo (undo) would insert (delete)
    /// it again — the store refused the save ("object Team/p3 already exists", seed 47 of
    /// `UndoInsertLinkFixTests` at 150 steps).
    func storeLacks(_ group: UndoGroup, reversed: Bool) -> Bool {
        guard group.parts.isEmpty, group.changes.values.allSatisfy({ $0.kind == .updated }) else { return false }
        return valueStoreLacks(group, reversed: reversed) != nil
    }

    /// The first value (in the group's order) that applying saved `group` (`reversed`:
    /// undoing it) sets for a recorded property of a loaded object it updates, that the store,
    /// as this context last read it, doesn't hold and no pending undo or redo of saved work
    /// other than `group`'s own writes: the object, the property, the group's value and the
    /// store's (``storeLacks(_:reversed:)``).
    func valueStoreLacks(_ group: UndoGroup, reversed: Bool)
        -> (id: ManagedObjectID, key: String, value: PropertyValue, stored: PropertyValue)?
    {
        func writtenByOther(_ id: ManagedObjectID, _ key: String) -> Bool {
            pending.contains { effect in
                guard effect.source !== group, effect.kind != .user || effect.source.pushed, let change = effect.changes.changes[id] else { return false }
                return change.new[key] != nil || change.old[key] != nil || change.values[key] != nil
            }
        }
        for id in group.order {
            guard let change = group.changes[id], change.kind == .updated, let object = registered(id), !object.isInvalidated,
                !object.isInsertedFlag, object.hasCommittedValues
            else { continue }
            for (key, value) in (reversed ? change.old : change.new).sorted(by: { $0.key < $1.key }) {
                guard let property = object.info.properties[key], property.isRecorded, !property.isTransient else { continue }
                let committed = object.committedValue(property) ?? property.emptyValue
                let holds = property.isToMany && !property.isOrdered ? Set(committed.ids) == Set(value.ids) : same(committed, value)
                if holds || writtenByOther(id, key) { continue }
                return (id, key, value, committed)
            }
        }
        return nil
    }

    /// An undo (redo) of saved `group` that cancels the group's pending redo (undo) — the
    /// dropped effect was never written — when the group also inserts or deletes an object and
    /// the store, as merged, lacks a value the group sets for an object it updates (another
    /// writer changed it since): it can't be saved anew, as a group of updates' is (the store
    /// still holds what the group inserted), and dropping the effect alone would show the
    /// group's values with nothing to write them. Refused (spec 0006 §16.1): before session
    /// 35 it went through, a save wrote nothing and a fresh context didn't see the values.
    func cancellingConflict(_ group: UndoGroup, reversed: Bool) -> ContextError? {
        guard group.saved != nil, group.parts.isEmpty, group.changes.values.contains(where: { $0.kind != .updated }),
            pending.contains(where: { $0.source === group }),
            let lack = valueStoreLacks(group, reversed: reversed)
        else { return nil }
        return .undoConflict(object: lack.id.description, property: lack.key, expected: lack.value.text, found: "\(lack.stored.text), changed by another writer")
    }

    /// The pending effects that save the undo (`undoing`) or redo of `group`, saved work:
    /// one for the group; for a reverted transaction's (``UndoGroup/parts``), one per group
    /// of the transaction, each the undo (last first) or redo (first first) of its group.
    func appendEffects(of group: UndoGroup, undoing: Bool) {
        guard let saved = group.saved else { return }
        guard !group.parts.isEmpty else {
            pending.append(
                undoing
                    ? PendingEffect(changes: group.inverse, source: group, kind: .undo(saved.sequence, saved.group))
                    : PendingEffect(changes: group, source: group, kind: .redo(saved.sequence, saved.group)))
            return
        }
        let parts = Array(group.parts.enumerated())
        for (index, part) in undoing ? parts.reversed() : parts {
            // A revert's parts name their own transaction and group (a revert of several
            // transactions holds groups of each) — or, for a part that is itself the undo
            // (redo) of a group, that group: reverting an undo of a group redoes it, and
            // reverting a redo undoes it (spec 0006 §25.5). Persisted undo reads the origin
            // as what happened to the group it names (before, it was written as the undo of
            // the undo transaction, which persisted undo ignores: after a restart the group
            // stood on the wrong stack).
            let (sequence, number) = part.saved ?? (saved.sequence, index)
            let kind: PendingEffect.Kind = switch (part.logOrigin, undoing) {
            case (.undo(let of, let group)?, true), (.redo(let of, let group)?, false): .redo(of, group)
            case (.redo(let of, let group)?, true), (.undo(let of, let group)?, false): .undo(of, group)
            case (nil, true): .undo(sequence, number)
            case (nil, false): .redo(sequence, number)
            }
            pending.append(PendingEffect(changes: undoing ? part.inverse : part, source: group, kind: kind))
        }
    }

    /// Refuses to undo or redo saved work that another writer has changed since: each
    /// property about to be set must still hold, in the store, the value being replaced.
    /// `reversed`: the check for undoing `group` (its inverse), without building the inverse.
    /// `insertValues`: whether undoing an insert (redoing a delete) checks the values it
    /// throws away; a revert checks its inserts against their history instead (§25).
    func checkConflicts(applying group: UndoGroup, reversed: Bool = false, insertValues: Bool = true) throws {
        let log = try store().log
        let storeUUID = log.storeUUID
        // The stored objects the group changes, in the order it applies them (the first
        // conflict in that order is the one reported), kept as positions in its table.
        typealias Position = Dictionary<ManagedObjectID, ObjectChange>.Index
        let changes = group.changes
        var targets: [(position: Position, stored: StoredObjectID)] = []
        targets.reserveCapacity(group.order.count)
        let order = group.order
        for step in order.indices {
            let id = order[reversed ? order.count - 1 - step : step]
            guard let stored = id.storedID, let position = changes.index(forKey: id) else { continue }
            targets.append((position, stored))
        }
        var lastInfo: EntityInfo?
        // The links this context's unsaved work makes, by the object they name: built when
        // the first undone insert needs them.
        var pendingIndex: PendingReferrers?
        /// Checks one change against its object's stored values (nil: no such object now).
        func check(_ position: Position, _ stored: StoredFields?, reader: borrowing LogReader) throws {
            let (id, change) = changes[position]
            guard let info = info(for: id, last: &lastInfo) else { return }
            switch reversed ? change.kind.reversed : change.kind {
            case .updated:
                // An object this context's unsaved undo (or redo) re-creates — gone from the
                // store, back as an insert: nothing stored to overwrite, and its values are
                // this context's own unsaved work (before, undoing the group below the undone
                // delete was refused: "the store holds a deleted object").
                if stored == nil, restored.contains(id), registered(id)?.isInsertedFlag == true { return }
                // "Another writer changed it" means the store no longer holds what this
                // context last knew it to hold: the loaded object's committed value, or,
                // for an object the context hasn't loaded (a restart), the value the
                // group expects to replace. This context's own unsaved work (a pending
                // undo of a later saved group) is not a conflict.
                let known = registered(id).flatMap { $0.hasCommittedValues ? $0 : nil }
                for (key, replaced) in reversed ? change.new : change.old {
                    // A one-to-one's derived side too: the store holds it as the other side of
                    // an object the group may not name (another writer gave the person another
                    // passport; before, undo gave the person back the group's passport while
                    // the other writer's still named the person).
                    guard let property = info.property(named: key), property.isRecorded || isDerivedOneToOne(property) else { continue }
                    var expected = replaced
                    if let known {
                        // A derived side not read since the last merge is known as the group's.
                        let committed = known.committedValue(property) ?? (property.isRecorded ? property.emptyValue : replaced)
                        // A committed value other than the one the group replaces is this
                        // context's own later saved work only while a pending undo or redo
                        // of it changes the property; otherwise it is another writer's
                        // value, merged, refreshed or loaded since, and undoing would
                        // overwrite it: the group's value is then what the store must hold.
                        let pendingChange = pendingUndoOrRedo(changes: id, key)
                        // A pending undo or redo of later saved work must have put back the
                        // value the group replaces: one a merge rebased that work to (§16.1)
                        // is another writer's, saved after the group, and applying the group
                        // would overwrite it (before, it did, and its far sides disagreed; a
                        // to-many's members the other writer added were dropped).
                        if pendingChange { try checkPendingValue(known, property, id, replaced) }
                        if same(committed, replaced) || pendingChange { expected = committed }
                    }
                    guard let stored else {
                        throw ContextError.undoConflict(object: id.description, property: key, expected: expected.text, found: "a deleted object")
                    }
                    let found: PropertyValue
                    if property.isRecorded {
                        let value = stored.names.firstIndex(of: key).flatMap { stored.values[$0] } ?? .null
                        found = propertyValue(value, property, storeUUID: storeUUID)
                    } else {
                        found = PropertyValue.related(try reader.related(stored.id, key), for: property, store: storeUUID)
                    }
                    if !same(found, expected) {
                        throw ContextError.undoConflict(object: id.description, property: key, expected: expected.text, found: found.text)
                    }
                }
                try checkListArrivals(id, change, info, changes: changes, reversed: reversed, reader: reader, storeUUID: storeUUID)
                guard !change.memberships.isEmpty, let storedID = id.storedID else { return }
                for (key, membership) in change.memberships {
                    let (added, removed) = reversed ? (membership.removed, membership.added) : (membership.added, membership.removed)
                    var current = Set(try reader.related(storedID, key))
                    // This context's own pending undos and redos of saved work (unsaved) are
                    // not another writer's change: the group applies over the members they
                    // leave (before, after a restart, undoing a saved addition and redoing it
                    // before a save was refused: the store still held the member).
                    applyPendingMemberships(of: id, key, to: &current)
                    let missing = removed.compactMap(\.storedID).filter { !current.contains($0) }
                    let extra = added.compactMap(\.storedID).filter { current.contains($0) }
                    if let first = missing.first ?? extra.first {
                        throw ContextError.undoConflict(object: id.description, property: key, expected: "membership as saved", found: "\(first) changed by another writer")
                    }
                }
            case .deleted:
                if stored == nil && !id.isTemporaryID && registered(id)?.isInsertedFlag != true && !restored.contains(id) {
                    throw ContextError.undoConflict(object: id.description, property: "(object)", expected: "the object", found: "it was deleted by another writer")
                }
                // Undoing an insert (redoing a delete) throws the object's values away: each
                // recorded attribute and to-one must still hold what the group saved (the
                // values it inserted, or had before it deleted), as for an update — else
                // another writer's later change to the object went with it, unseen (before,
                // undoing a saved insert after another writer renamed the object deleted it).
                // To-many memberships are the other sides' or checked by their own groups.
                guard insertValues, let stored, registered(id)?.isInsertedFlag != true, !restored.contains(id) else { return }
                let known = registered(id).flatMap { $0.hasCommittedValues ? $0 : nil }
                for (key, replaced) in change.values {
                    guard let property = info.property(named: key), property.isWritten else { continue }
                    if case .toMany = property.kind { continue }
                    var expected = replaced
                    if let known {
                        let committed = known.committedValue(property) ?? property.emptyValue
                        // As for an update: a pending undo or redo of later work must have put
                        // back the value the insert saved (before, undoing the insert deleted
                        // the object with the other writer's value a merge had rebased that
                        // work to, unchecked).
                        let pendingChange = pendingUndoOrRedo(changes: id, key)
                        if pendingChange { try checkPendingValue(known, property, id, replaced) }
                        if same(committed, replaced) || pendingChange { expected = committed }
                    }
                    let value = stored.names.firstIndex(of: key).flatMap { stored.values[$0] } ?? .null
                    let found = propertyValue(value, property, storeUUID: storeUUID)
                    if !same(found, expected) {
                        throw ContextError.undoConflict(object: id.description, property: key, expected: expected.text, found: found.text)
                    }
                }
                // A link another writer made to the object since goes with it too: an
                // object of theirs naming it (its inverse side here), which the delete would
                // leave dangling (before, the undo went through and every later save of the
                // context was refused: "… refers to Team/p1, which is not in the store"), or
                // one the object's own side holds. Objects the group itself changes are its
                // business, and the links the group's values hold were checked above.
                // The links are those the store holds as this context's unsaved work leaves
                // them: one it has taken back (the other object deleted, or either side
                // changed to no longer name the other) is no other writer's work standing —
                // the undo of a later saved group, pending, took it back (before, undoing the
                // player's signing and then the team's insert, before a save, was refused) —
                // and one it made (its pending undo put another writer's link back, or a
                // change made with registration disabled) would be left naming a deleted
                // object, failing every later save: a conflict (before, the undo went through).
                // A relationship without an inverse leaves no trace on the object: its
                // referrers are read from the store's index, as a revert reads them (§25).
                try checkLinksMadeSince(to: id, info, change, group: changes, found: ", made later", referrers: &pendingIndex) { key, owner in
                    let linked = if let owner { try reader.referrers(to: stored.id, through: key, of: owner) } else { try reader.related(stored.id, key) }
                    return linked.map { ManagedObjectID.permanent($0, store: storeUUID) }
                }
            case .inserted:
                if stored != nil && registered(id)?.isDeletedFlag != true {
                    throw ContextError.undoConflict(object: id.description, property: "(object)", expected: "no object", found: "it exists again")
                }
            }
        }
        try log.read { reader in
            // Read through one cursor, by property code: no dictionary of values per object.
            // `forEachFields` skips objects that don't exist and keeps the order given, so
            // the targets it passes over have no record.
            var next = 0
            try reader.forEachFields(targets.map(\.stored)) { fields in
                while next < targets.count && targets[next].stored != fields.id {
                    try check(targets[next].position, nil, reader: reader)
                    next += 1
                }
                guard next < targets.count else { return }
                try check(targets[next].position, fields, reader: reader)
                next += 1
            }
            while next < targets.count {
                try check(targets[next].position, nil, reader: reader)
                next += 1
            }
        }
    }

    /// The links this context's unsaved work makes, by the object they name: (the object
    /// naming it, the relationship) pairs.
    typealias PendingReferrers = [ManagedObjectID: [(source: ManagedObjectID, key: String)]]

    /// The links the unsaved values of recorded relationships make, of this context's
    /// changed objects not deleted, by the object they name. (A derived side's value in
    /// memory may be one read before another writer's change: the recorded side tells.)
    func collectPendingReferrers() -> PendingReferrers {
        var found: PendingReferrers = [:]
        for (id, object) in retained where !object.isDeletedFlag {
            guard let info = entities[id.entityName] else { continue }
            for (key, value) in object.changes {
                guard let property = info.properties[key], property.isRelationship, property.isRecorded else { continue }
                for target in value.ids { found[target, default: []].append((id, key)) }
            }
        }
        return found
    }

    /// Whether this context's unsaved work has taken back the link `source`'s relationship
    /// `key` makes to `target` in the store: `source` deleted here (when `deletion` counts),
    /// or its recorded `key` changed to a value not naming `target` — for a to-many, from
    /// one naming it (a list changed from a value read before the link was made takes
    /// nothing back).
    func tookBack(_ source: ManagedObjectID, _ key: String, _ target: ManagedObjectID, deletion: Bool = true) -> Bool {
        guard let object = retained[source] else { return false }
        if object.isDeletedFlag { return deletion }
        guard let value = object.changes[key], !value.ids.contains(target),
            let property = entities[source.entityName]?.properties[key], property.isRecorded
        else { return false }
        return !property.isToMany || object.committedValue(property)?.ids.contains(target) == true
    }

    /// The objects `id`'s relationship `property` (one with an inverse) links it to, from
    /// those the store holds (`stored`) as this context's unsaved work leaves them: less
    /// those it has taken back (on either side), plus those it has made.
    func pendingLinks(
        of id: ManagedObjectID, _ property: PropertyInfo, stored: [ManagedObjectID], referrers: inout PendingReferrers?
    ) -> [ManagedObjectID] {
        guard let inverse = property.inverse else { return stored }
        var seen = Set(stored)
        var links = stored.filter { !tookBack(id, property.name, $0, deletion: false) && !tookBack($0, inverse, id) }
        let index = referrers ?? collectPendingReferrers()
        referrers = index
        var made = (index[id] ?? []).filter { $0.key == inverse }.map(\.source)
        if property.isRecorded, let own = retained[id], !own.isDeletedFlag, let value = own.changes[property.name] { made += value.ids }
        for other in made where seen.insert(other).inserted && retained[other]?.isDeletedFlag != true {
            links.append(other)
        }
        return links
    }

    /// The objects of `owner` (or a sub-entity) whose relationship `key` (one without an
    /// inverse) names `id`, from those the store holds (`stored`) as this context's unsaved
    /// work leaves them: less those it has taken back, plus those it has made.
    func pendingReferrers(
        to id: ManagedObjectID, through key: String, of owner: String, stored: [ManagedObjectID], referrers: inout PendingReferrers?
    ) -> [ManagedObjectID] {
        var seen = Set(stored)
        var links = stored.filter { !tookBack($0, key, id) }
        let index = referrers ?? collectPendingReferrers()
        referrers = index
        for (source, name) in index[id] ?? [] where name == key && seen.insert(source).inserted {
            guard source.entityName == owner || entities[source.entityName]?.entity.superentityNames.contains(owner) == true else { continue }
            links.append(source)
        }
        return links
    }

    /// The relationships without an inverse (and not transient) that can lead to an object of
    /// entity `name` — declared on any entity, to `name` or one of its superentities — as
    /// (owner entity, relationship name) pairs, in entity order.
    func oneWayRelationships(to name: String) -> [(String, String)] {
        guard let entity = model.entity(named: name) else { return [] }
        let targets = Set([name] + entity.superentityNames)
        return model.entities.sorted { $0.name < $1.name }.flatMap { owner in
            owner.relationships.filter { $0.inverseName == nil && !$0.isTransient && targets.contains($0.destinationEntityName) }.map { (owner.name, $0.name) }
        }
    }

    /// ``checkConflicts(applying:reversed:)`` for a group this child context pushed into its
    /// parent (§18: the parent is its store): each property the group is about to set must
    /// still hold, in the parent, the value being replaced — what this context knows, as for
    /// saved work (§12). Before, such a group was applied unchecked: undoing a rename the
    /// parent had saved, after another writer's rename was merged into the parent, silently
    /// put the old name back over it. Objects the parent no longer has are left to the push,
    /// which refuses them (§18.3). A to-many is checked member by member, as membership
    /// changes of saved work are (§12): the push applies only the members (and, ordered, the
    /// moves) the group takes back to the parent's value as it is then, so the parent's own
    /// changes of it are no conflict (before session 29 the whole value was compared, and
    /// undoing a pushed addition was refused once the parent had added a member of its own).
    ///
    /// An object the group deletes — undoing its pushed insert, or redoing its pushed delete —
    /// takes its values and its links with it, as for saved work (§12): each recorded
    /// attribute and to-one the group holds must hold in the parent what this context knows,
    /// and each link the parent holds to it (as this context's unsaved work leaves them) must
    /// be one the group itself makes or changes. Before session 33 neither was checked: the
    /// next push deleted the object in the parent under the parent's (or a sibling's) link —
    /// its delete rule cascaded into the parent's player or nullified its team, or a one-way
    /// reference was left naming nothing and the parent's save was refused.
    func checkConflictsThroughParent(applying group: UndoGroup, reversed: Bool = false) throws {
        guard let parent = parentContext else { return }
        var checks: [ChildExpectation] = []
        var removals: [ManagedObjectID] = []
        var lastInfo: EntityInfo?
        let order = reversed ? Array(group.order.reversed()) : group.order
        for id in order {
            guard let change = group.changes[id], let info = info(for: id, last: &lastInfo) else { continue }
            if (reversed ? change.kind.reversed : change.kind) == .deleted {
                // Not when this context's own unsaved work re-created it (its pending undo or
                // redo): nothing pushed to take away.
                guard registered(id)?.isInsertedFlag != true, !restored.contains(id) else { continue }
                let known = registered(id).flatMap { $0.hasCommittedValues ? $0 : nil }
                for (key, replaced) in change.values.sorted(by: { $0.key < $1.key }) {
                    guard let property = info.property(named: key), property.isWritten, !property.isToMany else { continue }
                    var expected = replaced
                    if let known {
                        let committed = known.committedValue(property) ?? property.emptyValue
                        let pendingChange = pendingUndoOrRedo(changes: id, key)
                        if pendingChange { try checkPendingValue(known, property, id, replaced) }
                        if same(committed, replaced) || pendingChange { expected = committed }
                    }
                    checks.append(ChildExpectation(id: id, key: key, expected: expected))
                }
                removals.append(id)
                continue
            }
            guard change.kind == .updated else { continue }
            let known = registered(id).flatMap { $0.hasCommittedValues && !$0.isInsertedFlag ? $0 : nil }
            for (key, replaced) in (reversed ? change.new : change.old).sorted(by: { $0.key < $1.key }) {
                // A one-to-one's derived side too, as the parent holds it (as for saved work,
                // §12): before, undoing a pushed release of a person's passport gave it back
                // while the passport the parent had given the person since still named it.
                guard let property = info.property(named: key), property.isRecorded || isDerivedOneToOne(property) else { continue }
                var expected = replaced
                if let known {
                    // A derived side not read since is known as the group's.
                    let committed = known.committedValue(property) ?? (property.isRecorded ? property.emptyValue : replaced)
                    // As for saved work (§12): a pending undo or redo of later pushed work must
                    // have put back the value the group replaces, not one a merge from the
                    // parent rebased that work to (before, the sibling's value was overwritten).
                    let pendingChange = pendingUndoOrRedo(changes: id, key)
                    if pendingChange { try checkPendingValue(known, property, id, replaced) }
                    if same(committed, replaced) || pendingChange { expected = committed }
                }
                var check = ChildExpectation(id: id, key: key, expected: expected)
                if property.isToMany, let target = (reversed ? change.old : change.new)[key] {
                    let before = Set(replaced.ids), after = Set(target.ids)
                    check.members = (replaced.ids.filter { !after.contains($0) }, target.ids.filter { !before.contains($0) })
                }
                checks.append(check)
            }
        }
        if !checks.isEmpty {
            let expectations = checks
            let found = parent.performAndWait { (parent: isolated ManagedObjectContext) in parent.core.firstMismatch(ofChild: expectations) }
            if let (index, value) = found {
                let check = checks[index]
                // Found in the parent, which is this context's store: the message names it.
                throw ContextError.undoConflict(
                    object: check.id.description, property: check.key, expected: check.expected.text, found: value.text + ContextError.parentContextHolds)
            }
        }
        guard !removals.isEmpty else { return }
        try checkLinksThroughParent(parent, removing: removals, group: group)
    }

    /// The links the parent holds to the objects `group` deletes (`removals`), as this
    /// context's unsaved work leaves them (one it took back is no conflict, one it made is):
    /// each must be one the group itself makes or changes, else an `undoConflict` naming it,
    /// found "in the parent context" — as for saved work against the store (§12).
    private func checkLinksThroughParent(_ parent: ManagedObjectContext, removing removals: [ManagedObjectID], group: UndoGroup) throws {
        let asked = removals
        let answers = try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in try parent.core.linksForChild(asked) }
        var pendingIndex: PendingReferrers?
        for (id, links) in zip(removals, answers) {
            guard let change = group.changes[id], let info = entities[id.entityName] else { continue }
            try checkLinksMadeSince(to: id, info, change, group: group.changes, found: ContextError.parentContextHolds, referrers: &pendingIndex) { key, owner in
                links.filter { $0.key == key && $0.owner == owner }.map { localID($0.other, alias: $0.alias, groups: [group]) }
            }
        }
    }

    /// Refuses an undo (redo) that deletes `id` under a link made to it since (spec 0006 §12,
    /// §18.6 "links made since"): the links `linked` gives — by relationship of the object
    /// (`owner` nil) or, for a relationship without an inverse, of `owner` naming it: those
    /// the store holds, or a child's parent — as this context's unsaved work leaves them
    /// (``pendingLinks(of:_:stored:referrers:)``), must each be one the group (`changes`)
    /// itself makes or changes, or one the object's values in `change` hold. Another is an
    /// `undoConflict`, its `found` "a link to …" followed by `suffix` (", made later" for the
    /// store; ``ContextError/parentContextHolds`` for the parent).
    func checkLinksMadeSince(
        to id: ManagedObjectID, _ info: EntityInfo, _ change: ObjectChange, group changes: [ManagedObjectID: ObjectChange],
        found suffix: String, referrers pendingIndex: inout PendingReferrers?,
        linked: (_ key: String, _ owner: String?) throws -> [ManagedObjectID]
    ) throws {
        for property in info.propertyList where property.isRelationship && !property.isTransient && property.inverse != nil {
            let held = change.values[property.name]
            let stored = try linked(property.name, nil)
            for otherID in pendingLinks(of: id, property, stored: stored, referrers: &pendingIndex) {
                if changes[otherID] != nil { continue }
                switch held {
                case .toOne(let target?) where target == otherID: continue
                case .toMany(let members) where members.contains(otherID): continue
                default: break
                }
                throw ContextError.undoConflict(
                    object: id.description, property: property.name, expected: "no link but those this undo takes back",
                    found: "a link to \(otherID)" + suffix)
            }
        }
        for (owner, relationship) in oneWayRelationships(to: id.entityName) {
            let stored = try linked(relationship, owner)
            for otherID in pendingReferrers(to: id, through: relationship, of: owner, stored: stored, referrers: &pendingIndex) {
                if changes[otherID] != nil { continue }
                throw ContextError.undoConflict(
                    object: otherID.description, property: relationship, expected: "no link to \(id.description), which the undo deletes",
                    found: "a link to \(id.description)" + suffix)
            }
        }
    }

    /// For a child's ``checkConflictsThroughParent(applying:reversed:)``: the first expectation
    /// this context's current values don't meet (IDs the child names followed to the ones
    /// made permanent since), with the value found; objects it doesn't have are skipped.
    ///
    /// A context that is itself a child passes on to its own parent the expectations its
    /// values meet only as read from there — a recorded property (or a one-to-one's derived
    /// side) of an object it neither inserted nor changed: its next push would put the undo over whatever the parent holds
    /// now (spec 0006 §18.6: parent → grandparent → store, as for links). Before, a
    /// grandchild's undo was checked against the middle context alone, and the pushes put it
    /// over the root's later rename.
    func firstMismatch(ofChild checks: [ChildExpectation]) -> (Int, PropertyValue)? {
        var passedOn: [Int] = []
        var mismatch: (Int, PropertyValue)?
        for (index, check) in checks.enumerated() {
            guard let object = objectForChild(check.id), !object.isInvalidated, !object.isDeletedFlag,
                let property = object.info.properties[check.key], property.isRecorded || isDerivedOneToOne(property)
            else { continue }
            if !object.hasCommittedValues && !object.isInsertedFlag && (try? fulfillThrowing(object)) == nil { continue }
            let found = object.currentValue(property)
            let matches: Bool
            if let members = check.members {
                let has = Set(found.ids)
                matches = members.present.allSatisfy({ has.contains(aliased($0)) }) && !members.absent.contains(where: { has.contains(aliased($0)) })
            } else {
                matches = switch (found, check.expected) {
                case (.toOne(let a), .toOne(let b)): a == b.map(aliased)
                case (.toMany(let a), .toMany(let b)): property.isOrdered ? a == b.map(aliased) : Set(a) == Set(b.map(aliased))
                default: same(found, check.expected)
                }
            }
            if !matches {
                mismatch = (index, found)
                break
            }
            // A one-to-one's derived side too: the middle context's value of it is as read from
            // its parent (or as its push left it), and the push of the undo's recorded side
            // would re-pair the object over whatever the parent holds now (before session 35
            // only recorded properties were passed on: a grandchild's undo of a pushed release
            // gave the passport back over the one the root had given the person since).
            if parentContext != nil, property.isRecorded || isDerivedOneToOne(property), !object.isInsertedFlag, object.changes[check.key] == nil {
                passedOn.append(index)
            }
        }
        guard let parent = parentContext, !passedOn.isEmpty else { return mismatch }
        // Only those before this context's own first mismatch: the first in the group's order is reported.
        let asked = passedOn.map { index in
            ChildExpectation(id: aliased(checks[index].id), key: checks[index].key, expected: checks[index].expected, members: checks[index].members)
        }
        let below = parent.performAndWait { (parent: isolated ManagedObjectContext) in parent.core.firstMismatch(ofChild: asked) }
        if let (index, value) = below { return (passedOn[index], value) }
        return mismatch
    }

    /// Where a pending (unsaved) undo or redo of later saved (pushed) work changes `property`
    /// of `object`, the value it put back must be `replaced`, the one the group being applied
    /// replaces: a merge may have rebased that later work to another writer's value (§16.1),
    /// which then stands between the two groups, and applying the group would overwrite it —
    /// an `undoConflict` naming the value put back (spec 0006 §12). Attributes, to-ones and
    /// to-many members alike (an unordered to-many compares as a set).
    private func checkPendingValue(_ object: ManagedObject, _ property: PropertyInfo, _ id: ManagedObjectID, _ replaced: PropertyValue) throws {
        let current = object.currentValue(property)
        let matches = property.isToMany && !property.isOrdered ? Set(current.ids) == Set(replaced.ids) : same(current, replaced)
        if !matches {
            throw ContextError.undoConflict(object: id.description, property: property.name, expected: replaced.text, found: current.text)
        }
    }

    /// Whether two stored values are the same (nil and an empty value alike), literally as
    /// change detection compares them: strings by their bytes — a value another writer only
    /// re-encoded ("é" decomposed to precomposed) is that writer's change, and an undo over
    /// it a conflict (before, canonical `==` let the undo overwrite it) — and NaN as NaN (an
    /// undo of a change to NaN found the store's NaN "changed by another writer").
    private func same(_ a: PropertyValue, _ b: PropertyValue) -> Bool {
        (a.isNil && b.isNil) || Self.isSameValue(a, b)
    }

    /// Whether `property` is either side of a one-to-one (a to-one whose inverse is a to-one).
    func isOneToOne(_ property: PropertyInfo) -> Bool {
        guard property.isRelationship, !property.isToMany, !property.isTransient, let destination = property.destination,
            let inverse = property.inverse
        else { return false }
        return entities[destination]?.properties[inverse]?.isToMany == false
    }

    /// Whether `property` is the derived side of a one-to-one (a to-one whose inverse is a
    /// to-one, held in the store by the other side).
    /// A recorded ordered to-many whose inverse is a derived to-one (a playlist's songs) that
    /// applying a group puts a member in: the store must not hold the member in another list
    /// the group doesn't take it from — another writer put it there since (spec 0006 §12).
    /// The group read back from the log holds only the lists, so the lists are what is
    /// checked. Before session 32 the undo put the song in the group's list too: live, both
    /// lists listed it and the save wrote it into two; after a restart the other writer's
    /// list lost it, unseen. The context's own pending undos and redos of saved work moving
    /// the member are not another writer's change.
    func checkListArrivals(
        _ id: ManagedObjectID, _ change: ObjectChange, _ info: EntityInfo, changes: [ManagedObjectID: ObjectChange], reversed: Bool,
        reader: borrowing LogReader, storeUUID: UUID
    ) throws {
        for (key, target) in reversed ? change.old : change.new {
            guard let property = info.property(named: key), property.isToMany, property.isOrdered, property.isRecorded, !property.isTransient,
                let destination = property.destination, let inverseName = property.inverse,
                let inverse = entities[destination]?.properties[inverseName], !inverse.isToMany, !inverse.isRecorded
            else { continue }
            let had = Set(((reversed ? change.new : change.old)[key])?.ids ?? [])
            for member in target.ids where !had.contains(member) {
                guard let memberStored = member.storedID, let owner = try reader.related(memberStored, inverseName).first else { continue }
                let holder = ManagedObjectID.permanent(owner, store: storeUUID)
                guard holder != id else { continue }
                // The group takes it from there (a move between two lists).
                if let entry = changes[holder], entry.kind == .updated, let after = (reversed ? entry.old : entry.new)[key],
                    !after.ids.contains(member)
                {
                    continue
                }
                if pendingMove(of: member, inverseName, property) { continue }
                let from = changes.first { other, entry in
                    other != id && entry.kind == .updated && ((reversed ? entry.new : entry.old)[key]?.ids.contains(member) ?? false)
                }?.key
                throw ContextError.undoConflict(
                    object: member.description, property: inverseName, expected: PropertyValue.toOne(from).text,
                    found: PropertyValue.toOne(holder).text)
            }
        }
    }

    func isDerivedOneToOne(_ property: PropertyInfo) -> Bool {
        guard !property.isRecorded, property.isRelationship, !property.isToMany, !property.isTransient,
            let destination = property.destination, let inverse = property.inverse
        else { return false }
        return entities[destination]?.properties[inverse]?.isToMany == false
    }

    /// `members` (a to-many `key` of `id` as the store holds it) as the pending (unsaved)
    /// undos and redos of saved work leave it, in their order: the members each adds and
    /// removes (a group read from the log holds them as such; one recorded in memory, as
    /// the lists before and after). Objects not in the store yet are left out.
    func applyPendingMemberships(of id: ManagedObjectID, _ key: String, to members: inout Set<StoredObjectID>) {
        for effect in pending {
            // A child's undo or redo of a group it pushed is a user effect of that group.
            guard effect.kind != .user || effect.source.pushed, let change = effect.changes.changes[id], change.kind == .updated
            else { continue }
            var (added, removed): ([ManagedObjectID], [ManagedObjectID]) = ([], [])
            if let membership = change.memberships[key] {
                (added, removed) = (membership.added, membership.removed)
            } else if let old = change.old[key], let new = change.new[key] {
                let before = Set(old.ids), after = Set(new.ids)
                (added, removed) = (new.ids.filter { !before.contains($0) }, old.ids.filter { !after.contains($0) })
            }
            for member in removed { if let stored = member.storedID { members.remove(stored) } }
            for member in added { if let stored = member.storedID { members.insert(stored) } }
        }
    }

    /// Whether a pending (unsaved) undo or redo of saved work changes `key` of `id`.
    func pendingUndoOrRedo(changes id: ManagedObjectID, _ key: String) -> Bool {
        pending.contains { effect in
            // A child's undo or redo of a group it pushed is a user effect of that group.
            guard effect.kind != .user || effect.source.pushed, let change = effect.changes.changes[id] else { return false }
            return change.new[key] != nil || change.old[key] != nil || change.values[key] != nil
        }
    }

    /// The tables of `id`'s entity. `last` keeps the last one found: a run of one entity's
    /// objects (most groups) skips the lookup by name.
    func info(for id: ManagedObjectID, last: inout EntityInfo?) -> EntityInfo? {
        if let last, last.entity.name == id.entityName { return last }
        last = entities[id.entityName]
        return last
    }

    /// Brings back an object an undo group inserts (before its values are set): a registered
    /// object deleted in this context is undeleted; one the app holds that the undo journal set
    /// aside comes back as the same instance; otherwise a new object is made. An object that
    /// isn't in the store under a permanent ID (undo of a saved delete) is re-created there at
    /// the next save. A fault registered for it (the app's `object(with:)` of the deleted
    /// object) is the object that comes back.
    private func bringBack(_ id: ManagedObjectID, info: EntityInfo) -> ManagedObject {
        let object: ManagedObject
        if let existing = registered(id) {
            object = existing
            if object.isDeletedFlag {
                object.isDeletedFlag = false
                restored.remove(id)
            } else if !object.isInsertedFlag && !object.hasCommittedValues {
                object.isInsertedFlag = true
                object.committed = [:]
                object.changes.removeAll()
                if id.isTemporaryID { insertionOrder.append(id) } else { restored.insert(id) }
            }
        } else if let removed = removedObjects.removeValue(forKey: id) {
            // The same instance the app holds comes back.
            object = removed
            object.isDeletedFlag = false
            object.isInsertedFlag = true
            object.committed = [:]
            object.changes.removeAll()
            object.transients.removeAll()
            register(object)
            if id.isTemporaryID { insertionOrder.append(id) } else { restored.insert(id) }
        } else {
            object = makeObject(id, info: info)
            object.isInsertedFlag = true
            object.committed = [:]
            // Undo of a saved delete: the object comes back under its own ID.
            if id.isTemporaryID { insertionOrder.append(id) } else { restored.insert(id) }
        }
        object.isInvalidated = false
        markChanged(object)
        noteInserted(object)
        return object
    }

    /// Applies a group's changes to the objects, directly (no custom setters, no undo
    /// registration); `reversed`: its inverse (what undoing it does), without building it.
    func apply(_ group: UndoGroup, reversed: Bool = false, events: SnapshotEvents, cancellingPending: Bool = false) {
        isApplyingUndo = true
        defer { isApplyingUndo = false }
        var touched: [(ManagedObject, SnapshotEvents)] = []
        // Objects the group inserts first: a group read from the log maintains inverses, and
        // an update naming an object it inserts must find that object, not a fault of it.
        // Each change looked up once, in the group's order, inserts first. Kept as positions
        // in the table: copying the changes out would retain each of their dictionaries.
        typealias Position = Dictionary<ManagedObjectID, ObjectChange>.Index
        var ordered: [Position] = []
        ordered.reserveCapacity(group.order.count)
        var others: [Position] = []
        let changes = group.changes
        let order = group.order
        for step in order.indices {
            let id = order[reversed ? order.count - 1 - step : step]
            guard let position = changes.index(forKey: id) else { continue }
            if changes.values[position].kind == (reversed ? .deleted : .inserted) { ordered.append(position) } else { others.append(position) }
        }
        let insertCount = ordered.count
        ordered += others
        var lastInfo: EntityInfo?
        // Every object the group inserts is back before any value is set: a value set with its
        // inverse maintained must find the other objects the group brings back. Otherwise a
        // restored player's team, inserted after it, would first be registered as a fault of
        // the deleted team and never become inserted (undo of a saved cascade after a restart).
        var broughtBack: [ManagedObject?] = []
        broughtBack.reserveCapacity(insertCount)
        for position in ordered[..<insertCount] {
            let id = changes.keys[position]
            broughtBack.append(info(for: id, last: &lastInfo).map { bringBack(id, info: $0) })
        }
        for (step, position) in ordered.enumerated() {
            let (id, change) = changes[position]
            guard let info = info(for: id, last: &lastInfo) else { continue }
            switch reversed ? change.kind.reversed : change.kind {
            case .inserted:
                guard step < insertCount, let object = broughtBack[step] else { continue }
                for (key, value) in change.values {
                    // A delete's snapshot holds the derived values the object had loaded: the
                    // store computes them again at the save (spec 0006 §24.4); setting one
                    // would be refused.
                    guard let property = info.property(named: key), !property.isDerived else { continue }
                    var value = value
                    // An object the store holds (a redo cancelling the pending undo of its
                    // saved insert, an undo of its unsaved delete): a derived to-many side (a
                    // team's players) is the store's members, as read now, with the group's
                    // own. The group's value alone dropped a member another writer put there
                    // since, which still names the object, and held that as a change a merge
                    // then kept (spec 0006 §9 item 6; seed 371 of `UndoInsertLinkFixTests`).
                    if cancellingPending, !object.isInsertedFlag, property.isToMany, !property.isRecorded, !property.isTransient {
                        // Members the store lists that this context has since moved off
                        // the object (an unsaved change of the member's inverse) stay off.
                        let current = object.currentValue(property).ids.filter { member in
                            guard let inverseName = property.inverse, let other = registered(member),
                                let changed = other.changes[inverseName]
                            else { return true }
                            return changed.ids.contains(object.objectID)
                        }
                        let present = Set(current)
                        let ids = current + value.ids.filter { !present.contains($0) }
                        value = property.isOrdered ? .toMany(ids) : .unordered(ids)
                    }
                    set(object, property, value, maintainInverse: group.fromLog, register: false)
                }
                touched.append((object, .undoDeletion))
            case .deleted:
                guard let object = self.object(with: id) else { continue }
                // With `propagatesDeletesAtEndOfEvent` off, a group's delete may be one whose
                // rules never ran (undone before a save that then consumed them): they wait
                // for the save again, as a delete's do (spec 0006 §23.2). A group read from
                // the log holds what the rules did.
                let waits = !propagatesDeletes && !group.fromLog
                if object.isInsertedFlag && (id.isTemporaryID || restored.contains(id)) {
                    if waits { deferredDeletes.append(DeferredDelete(object: object, values: currentValues(object), wasInserted: true)) }
                    object.isInsertedFlag = false
                    restored.remove(id)
                    insertionOrder.remove(id)
                    retained[id] = nil
                    registry[id] = nil
                    object.isInvalidated = true
                    removedObjects[id] = object
                    noteInvalidated(object)
                } else {
                    // A saved object held as a fault is read first: the save checks the version
                    // it deletes against the store's (§17.1). Before, it had none, the check took
                    // the store's as seen, and a redone delete overwrote another writer's change
                    // made after the redo, unseen (`OneToOneUndoFixTests`).
                    if !object.hasCommittedValues && !object.isInsertedFlag { _ = try? fulfillThrowing(object) }
                    noteDeleted(object)
                    if group.fromLog {
                        for property in info.properties.values where property.isRelationship && property.isRecorded {
                            set(object, property, property.emptyValue, maintainInverse: true, register: false)
                        }
                    }
                    object.isDeletedFlag = true
                    markChanged(object)
                    if waits { deferredDeletes.append(DeferredDelete(object: object, values: [:], wasInserted: false)) }
                }
                touched.append((object, .undoInsertion))
            case .updated:
                guard let object = self.object(with: id) else { continue }
                for (key, value) in reversed ? change.old : change.new {
                    guard let property = info.property(named: key) else { continue }
                    var value = value
                    // A derived to-many side (a team's players) whose members another writer
                    // changed since the group was made (a saved group stays as it was saved)
                    // takes back only the group's own additions and removals: its whole value
                    // dropped the member another writer had moved in while that member still
                    // named the team (spec 0006 §9.6). The store doesn't hold the side, nor
                    // does a save check it.
                    if !group.fromLog, property.isToMany, !property.isRecorded, !property.isTransient,
                        let from = (reversed ? change.new : change.old)[key]
                    {
                        let current = object.currentValue(property)
                        let before = Set(from.ids)
                        if Set(current.ids) != before {
                            let after = Set(value.ids)
                            var ids = current.ids.filter { !before.contains($0) || after.contains($0) }
                            let present = Set(ids)
                            ids += value.ids.filter { !before.contains($0) && !present.contains($0) }
                            value = property.isOrdered ? .toMany(ids) : .unordered(ids)
                        }
                    }
                    // A one-to-one keeps its two sides agreeing while it is set (the far side
                    // and the partners it leaves follow): a merge may have paired the object or
                    // its destination with another since the group was made, which the group
                    // doesn't name (before, undo gave a person back its passport while the
                    // passport another writer gave it still named it).
                    set(object, property, value, maintainInverse: group.fromLog || isOneToOne(property), register: false)
                }
                for (key, membership) in change.memberships {
                    guard let property = info.property(named: key) else { continue }
                    let (added, removed) = reversed ? (membership.removed, membership.added) : (membership.added, membership.removed)
                    var ids = object.currentValue(property).ids
                    ids.removeAll { removed.contains($0) }
                    ids.append(contentsOf: added.filter { !ids.contains($0) })
                    set(object, property, .toMany(ids), maintainInverse: true, register: false)
                }
                touched.append((object, .undoUpdate))
            }
        }
        for (object, event) in touched { object.awake(fromSnapshotEvents: event) }
        pruneRetained()
    }

    /// Stops holding objects that no longer differ from the store (as changed: one a pending
    /// group updates moves to ``heldForPending``).
    func pruneRetained() {
        for (id, object) in retained
        where !object.isInsertedFlag && !object.isDeletedFlag && object.changes.isEmpty && !restored.contains(id) {
            retained[id] = nil
            holdIfPendingUpdates(object)
        }
    }

    /// Keeps `object`, which holds no change now, in ``heldForPending`` while a pending group
    /// updates it (``pendingUpdates(_:)``).
    func holdIfPendingUpdates(_ object: ManagedObject) {
        if pendingUpdates(object.objectID) { heldForPending[object.objectID] = object }
    }

    /// Whether a group waiting to be saved updates the object: one whose value was changed
    /// and changed back in separate groups (or a child's pushed change and its undo) holds no
    /// change, but the save still writes those groups, so the object stays held (not as
    /// changed: ``heldForPending``) — with the version its values are based on, which the
    /// save checks (spec 0006 §17.1). Before, it was let go, and the groups overwrote another
    /// writer's change to it unchecked.
    func pendingUpdates(_ id: ManagedObjectID) -> Bool {
        pending.contains { $0.changes.changes[id]?.kind == .updated }
    }

    /// How many groups of the undo stack persisted undo reads at the context's creation;
    /// the rest are read a batch at a time when undo reaches them.
    static let persistedUndoBatch = 32

    /// Rebuilds the undo and redo stacks from the log: this context's saved groups
    /// (matched by transaction author and context name), their undos and redos. The log is
    /// read backwards from its head (``PersistedUndoReader``): the redo stack and the top of
    /// the undo stack now, the groups below when undo reaches them (``loadOlderUndo()``).
    func loadPersistentUndo() throws {
        let log = try store().log
        let storeUUID = log.storeUUID
        let (head, checkpoint) = try log.read { reader in
            (try reader.head, try reader.undoCheckpoint(author: transactionAuthor, contextName: name))
        }
        let reader = PersistedUndoReader(log: log, author: transactionAuthor, name: name, head: head, checkpoint: checkpoint) {
            [unowned self] group, sequence, index in
            undoGroup(from: group, sequence: sequence, index: index, storeUUID: storeUUID)
        }
        let (undo, redo) = try reader.initialStacks(undoGroups: Self.persistedUndoBatch)
        journal.undoStack = undo
        journal.redoStack = redo
        journal.older = reader.isExhausted ? nil : reader
        journal.olderBudget = nil
        journal.trim()
        // Parts of a split group read back: every save records the stacks while one is there.
        if journal.holdsSplitGroups { journal.dropped = true }
    }

    /// Records the stacks for persisted undo (spec 0004 §10, `undoStacks:`) when groups were
    /// dropped since they were last recorded — by `levelsOfUndo`, `rollback()`, `reset()` or
    /// `removeAllUndoActions()` — so that after a restart the context reads back what it
    /// holds now, not the groups it dropped (before, they all came back). While groups of
    /// new work wait to be saved, their saved groups are recorded at once all the same —
    /// the unsaved ones, not in the log, left out — so that a quit that never saves doesn't
    /// bring the dropped ones back (before, nothing was recorded until the next save), and
    /// the next save records the stacks again with its commit. While an undo or redo of saved
    /// work waits to be saved, its group is recorded where the store has it — done, or undone
    /// — as a quit that never saves leaves it (before, nothing was recorded until that save,
    /// and after such a quit every dropped group came back). A store that can't record it
    /// (read-only: a drop there isn't kept, spec 0006 §13) leaves it for the next time.
    func recordUndoCheckpoint() {
        guard persistsUndo, journal.dropped, parentContext == nil, let store = try? store() else { return }
        guard readKeptOlderUndo(all: journal.recordsWhole) else { return }
        let stacks = storedUndoCheckpointStacks()
        do {
            try store.log.setUndoCheckpoint(author: transactionAuthor, contextName: name, undo: stacks.undo, redo: stacks.redo)
            if pending.isEmpty {
                journal.dropped = journal.holdsSplitGroups
                journal.movedUnlogged = false
            }
        } catch {
            return
        }
    }

    /// The stacks as the store has them now (``undoCheckpointStacks(unsaved:)`` without the
    /// unsaved groups), each group an unsaved undo or redo of saved work moved taken back
    /// where the store still has it: an undone group on top of the undo stack, a redone one
    /// on top of the redo stack (the newest effect taken back first). A group no longer on
    /// the stack the effect put it on (dropped since) stays dropped.
    ///
    /// A part of a group a refresh split (``UndoGroup/isSplit``) is taken back alone: the
    /// other part may be where the store has it already (its undo saved; before, every entry
    /// naming the group moved, and after a quit that part was on the wrong stack — undoing it
    /// was refused as a conflict). Taken back onto the parts a refresh split off it while the
    /// effect waited (``PendingEffect/splitParts``), on top of the same stack, they are one
    /// entry again (their objects together): the store has them as one group, as before the
    /// undo (redo) the refresh split, so after a quit that never saves it one undo (redo)
    /// takes the group back, as in memory before that undo (before, two steps). When they
    /// cover every object of the group (``UndoGroup/splitFrom``) the entry is the whole group,
    /// not a part: read back split, it kept every save after a restart rewriting the record.
    func storedUndoCheckpointStacks() -> (undo: [UndoCheckpoint.GroupRef], redo: [UndoCheckpoint.GroupRef]) {
        var (undo, redo) = undoCheckpointStacks { _ in nil }
        func ref(_ part: UndoGroup, _ sequence: UInt64, _ group: Int) -> UndoCheckpoint.GroupRef {
            UndoCheckpoint.GroupRef(sequence: sequence, group: group, objects: part.changes.keys.compactMap(\.storedID))
        }
        func put(_ moved: [UndoCheckpoint.GroupRef], of effect: PendingEffect, on stack: inout [UndoCheckpoint.GroupRef]) {
            for var entry in moved {
                while let objects = entry.objects, let top = stack.last, let below = top.objects,
                    effect.splitParts.contains(where: { ref($0, entry.sequence, entry.group) == top })
                {
                    stack.removeLast()
                    entry = UndoCheckpoint.GroupRef(sequence: entry.sequence, group: entry.group, objects: below + objects)
                }
                // Parts that cover every object of the group are the whole group: recorded as
                // a part, after a restart it was read back split and every save rewrote the record.
                if let objects = entry.objects, let whole = effect.source.splitFrom, whole.isSubset(of: objects) {
                    entry = UndoCheckpoint.GroupRef(sequence: entry.sequence, group: entry.group)
                }
                stack.append(entry)
            }
        }
        func take(_ effect: PendingEffect, _ sequence: UInt64, _ group: Int, from stack: inout [UndoCheckpoint.GroupRef]) -> [UndoCheckpoint.GroupRef] {
            let part = effect.source.isSplit && effect.source.parts.isEmpty ? ref(effect.source, sequence, group) : nil
            func moves(_ entry: UndoCheckpoint.GroupRef) -> Bool { part.map { $0 == entry } ?? entry.names(sequence, group) }
            let moved = stack.filter(moves)
            stack.removeAll(where: moves)
            return moved
        }
        for effect in pending.reversed() {
            switch effect.kind {
            case .user: continue
            case .undo(let sequence, let group): put(take(effect, sequence, group, from: &redo), of: effect, on: &undo)
            case .redo(let sequence, let group): put(take(effect, sequence, group, from: &undo), of: effect, on: &redo)
            }
        }
        return (undo, redo)
    }

    /// Reads the groups not read yet that are kept under `levelsOfUndo` (the undo stack's
    /// bottom) into the stack, so that it can be recorded whole; false if they can't be read
    /// now (the stack is unbounded — never trimmed — or the read failed). `all`: an unbounded
    /// stack is read whole too (a part of a split group must be recorded, and the record
    /// holds the whole stack).
    func readKeptOlderUndo(all: Bool = false) -> Bool {
        while let older = journal.older {
            guard journal.olderBudget != nil || all, let store = try? store(), store.continues(older.log) else { return false }
            older.log = store.log
            let budget = journal.olderBudget ?? Self.persistedUndoBatch
            if budget <= 0 || older.isExhausted {
                journal.older = nil
                journal.olderBudget = nil
                break
            }
            guard let groups = try? older.nextUndoGroups(budget) else { return false }
            let kept = groups.filter { group in
                !(group.saved.map { journal.reverted.contains($0.sequence) } ?? false) && !group.isSaved(as: journal.undoneByRevert)
            }
            journal.undoStack.insert(contentsOf: kept, at: 0)
            if let limit = journal.olderBudget { journal.olderBudget = limit - kept.count }
            if older.isExhausted || (journal.olderBudget.map { $0 <= 0 } ?? false) {
                journal.older = nil
                journal.olderBudget = nil
            }
        }
        return true
    }

    /// The stacks, bottom first, as persisted undo reads them back: each saved group (a
    /// revert's parts one by one — their undos were written last first, their redos first
    /// first; a part that is the undo (redo) of another group names that group, which the
    /// revert redid (undid); a part of a group a refresh split, and its rest, name the
    /// group's objects they hold); an unsaved group the commit being drafted writes as its
    /// event group `unsaved(group)`, named with sequence 0; other unsaved groups are left out.
    func undoCheckpointStacks(unsaved: (UndoGroup) -> Int?) -> (undo: [UndoCheckpoint.GroupRef], redo: [UndoCheckpoint.GroupRef]) {
        var undo: [UndoCheckpoint.GroupRef] = []
        var redo: [UndoCheckpoint.GroupRef] = []
        var listed: Set<UndoCheckpoint.GroupRef> = []
        func list(_ ref: UndoCheckpoint.GroupRef, onRedo: Bool) {
            guard listed.insert(ref).inserted else { return }
            if onRedo { redo.append(ref) } else { undo.append(ref) }
        }
        func add(_ group: UndoGroup, undone: Bool) {
            guard !group.parts.isEmpty else {
                if let saved = group.saved {
                    let objects = group.isSplit ? group.changes.keys.compactMap(\.storedID) : nil
                    list(UndoCheckpoint.GroupRef(sequence: saved.sequence, group: saved.group, objects: objects), onRedo: undone)
                } else if let index = unsaved(group) {
                    list(UndoCheckpoint.GroupRef(sequence: 0, group: index), onRedo: undone)
                }
                return
            }
            for part in undone ? group.parts.reversed() : group.parts {
                switch part.logOrigin {
                case .undo(let sequence, let target)?: list(UndoCheckpoint.GroupRef(sequence: sequence, group: target), onRedo: !undone)
                case .redo(let sequence, let target)?: list(UndoCheckpoint.GroupRef(sequence: sequence, group: target), onRedo: undone)
                case nil:
                    guard let saved = part.saved else { continue }
                    list(UndoCheckpoint.GroupRef(sequence: saved.sequence, group: saved.group), onRedo: undone)
                }
            }
        }
        for group in journal.undoStack { add(group, undone: false) }
        for group in journal.redoStack { add(group, undone: true) }
        return (undo, redo)
    }

    /// Reads the next persisted groups down the undo stack when undo has reached the bottom
    /// of what was read. A failure is recorded as a problem (spec 0006 §8.5) and ends the stack.
    func loadOlderUndo() {
        guard journal.undoStack.isEmpty, let older = journal.older else { return }
        guard let store = try? store(), store.continues(older.log) else {
            // The store was removed: its groups can't be undone through this context.
            journal.older = nil
            return
        }
        // A store moved (`migratePersistentStore`) has the same history: read on from it.
        older.log = store.log
        do {
            var groups: [UndoGroup] = []
            while groups.isEmpty, !older.isExhausted {
                let wanted = min(Self.persistedUndoBatch, journal.olderBudget ?? Self.persistedUndoBatch)
                guard wanted > 0 else { break }
                groups = try older.nextUndoGroups(wanted)
                // Groups of a transaction this context reverted were taken back already.
                if !journal.reverted.isEmpty { groups.removeAll { $0.saved.map { journal.reverted.contains($0.sequence) } ?? false } }
                // …and so were those whose redo it reverted.
                if !journal.undoneByRevert.isEmpty { groups.removeAll { $0.isSaved(as: journal.undoneByRevert) } }
            }
            journal.undoStack = groups
            if let budget = journal.olderBudget { journal.olderBudget = budget - groups.count }
            if groups.contains(where: \.isSplit) { journal.dropped = true }
            if older.isExhausted || (journal.olderBudget ?? 1) <= 0 { journal.older = nil }
        } catch {
            journal.older = nil
            recordProblem(.wrapping(error, "persistent undo could not read older groups: \(error)"))
        }
    }

    func undoGroup(from group: ChangeGroup, sequence: UInt64, index: Int, storeUUID: UUID) -> UndoGroup {
        let result = UndoGroup(actionName: group.actionName)
        result.saved = (sequence, index)
        result.fromLog = true
        result.logOrigin = group.origin
        for change in group.changes {
            let id = ManagedObjectID.permanent(change.objectID, store: storeUUID)
            guard let info = entities[id.entityName] else { continue }
            // Derived attributes are left out (spec 0006 §24): undo never sets them; the save
            // of the undo recomputes them.
            func converted(_ values: [String: LogValue]) -> [String: PropertyValue] {
                var result: [String: PropertyValue] = [:]
                for (key, value) in values {
                    if let property = info.properties[key], !property.isDerived {
                        result[key] = propertyValue(value, property, storeUUID: storeUUID)
                    }
                }
                return result
            }
            if case .update(_, let changes) = change,
                changes.allSatisfy({ info.properties[$0.property]?.isDerived == true })
            {
                continue  // only derived values: nothing to undo
            }
            if result.changes[id] == nil { result.order.append(id) }
            switch change {
            case .insert(_, let values): result.changes[id] = ObjectChange(kind: .inserted, values: converted(values))
            case .delete(_, let before): result.changes[id] = ObjectChange(kind: .deleted, values: converted(before))
            case .update(_, let changes):
                var objectChange = result.changes[id] ?? ObjectChange(kind: .updated)
                for propertyChange in changes {
                    switch propertyChange {
                    case .value(let key, let before, let after):
                        guard let property = info.properties[key], !property.isDerived else { continue }
                        if objectChange.old[key] == nil { objectChange.old[key] = propertyValue(before, property, storeUUID: storeUUID) }
                        objectChange.new[key] = propertyValue(after, property, storeUUID: storeUUID)
                    case .membership(let key, let added, let removed):
                        objectChange.memberships[key] = (
                            added.map { ManagedObjectID.permanent($0, store: storeUUID) },
                            removed.map { ManagedObjectID.permanent($0, store: storeUUID) })
                    }
                }
                result.changes[id] = objectChange
            }
        }
        return result
    }
}

/// A deleted object whose delete rules wait for the save (`propagatesDeletesAtEndOfEvent`
/// off), with its values at its delete (an unsaved insert leaves the context at once; its
/// rules use these).
struct DeferredDelete {
    let object: ManagedObject
    let values: [String: PropertyValue]
    let wasInserted: Bool
}

/// Temporary IDs for one context's inserts: a random (version 4) UUID drawn once, then that
/// UUID with a counter added to its last 64 bits, the variant bits kept. As unique as a
/// fresh random UUID each time (contexts' bases differ in 120 random bits), without reading
/// the system's random source for every insert.
struct TemporaryIDSource {
    private var base: uuid_t?
    private var low: UInt64 = 0
    private var count: UInt64 = 0

    mutating func next(_ entityName: String) -> ManagedObjectID {
        var uuid: uuid_t
        if let base {
            uuid = base
        } else {
            uuid = UUID().uuid
            base = uuid
            low = withUnsafeBytes(of: uuid) { raw in raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self).bigEndian }
        }
        count &+= 1
        // The variant (the top two bits of byte 8) stays 10; the other 62 bits count.
        let bits = (low &+ count) & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000
        withUnsafeMutableBytes(of: &uuid) { raw in raw.storeBytes(of: bits.bigEndian, toByteOffset: 8, as: UInt64.self) }
        return ManagedObjectID(entityName: entityName, storage: .temporary(UUID(uuid: uuid)))
    }
}

/// What a child expects its parent to hold for one property before undoing or redoing a group
/// it pushed there.
struct ChildExpectation: Sendable {
    let id: ManagedObjectID
    let key: String
    let expected: PropertyValue
    /// A to-many: instead of the whole value, the members that must be there (those the
    /// group is about to take out) and those that must not (those it is about to put back).
    var members: (present: [ManagedObjectID], absent: [ManagedObjectID])?
}

/// A link a parent holds to an object a child is about to delete by undoing its pushed insert
/// (redoing its pushed delete): ``ContextCore/linksForChild(_:)``.
struct ChildLink: Sendable {
    /// The object's relationship (one with an inverse) naming `other`; with `owner`, the
    /// relationship without an inverse of `other` (an object of `owner` or a sub-entity)
    /// naming the object.
    let key: String
    let owner: String?
    let other: ManagedObjectID
    /// The temporary ID `other` had, which a child may still name it by.
    var alias: ManagedObjectID? = nil
}
