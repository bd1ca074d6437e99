import Foundation
import StrataLog
import StrataModel
import StrataPredicate

/// What a parent tells its children, on their queues.
enum ParentMessage: Sendable {
    /// An ancestor made temporary IDs permanent (its save, `obtainPermanentIDs`): the map
    /// waits in this context's ``RemapInbox``, where the ancestor posted it.
    case remap
    /// The parent's objects changed (its save, a sibling's save into it, a merge): children
    /// that merge automatically merge this.
    case merge(ChangeSummary)
}

/// A parent's current recorded values of one object, for a child, and the store version
/// they are based on (nil when the parent doesn't know it: an unsaved insert, values from a
/// row read without its version).
struct ParentSnapshot: Sendable {
    let values: [String: PropertyValue]
    let version: UInt64?
}

/// What a context and its ancestors know of temporary IDs a child names
/// (``ContextCore/lookUpTemporaryIDs(_:)``).
struct TemporaryIDLookup: Sendable {
    /// The first that names an unsaved object no context of the chain holds.
    var unheld: ManagedObjectID?
    /// Those an ancestor has made permanent since, old to new.
    var madePermanent: [ManagedObjectID: ManagedObjectID] = [:]
}

/// A parent's values for a fetched object, seen through key-value coding so the child's
/// predicates and sorts can read them without firing the child's fault.
private struct ParentRow: KeyValueCoding, PredicateObjectIdentity {
    let values: [String: PropertyValue]
    let object: ManagedObject

    func value(forKey key: String) -> Any? {
        // A fetched property (no property of the table) runs its fetch through the object.
        guard let property = object.info.properties[key] else { return object.entity.fetchedPropertiesByName[key] != nil ? object.value(forKey: key) : nil }
        // Related objects read as a fetch reads them (spec 0008, Evaluation).
        if let value = values[key], property.isRecorded { return JudgedObjectView.reading(value: object.externalValue(value, ordered: property.isOrdered)) }
        return JudgedObjectView(object).value(forKey: key)
    }

    var predicateIdentity: any Hashable & Sendable { object.objectID }
}

extension ContextCore {
    // MARK: - Child side: reading through the parent

    /// The parent's current recorded values of `ids` (unsaved changes included); objects the
    /// parent doesn't have (deleted there, or never existing) are missing.
    func parentValues(for ids: [ManagedObjectID]) throws -> [ManagedObjectID: ParentSnapshot] {
        guard let parent = parentContext else { return [:] }
        return parent.performAndWait { (parent: isolated ManagedObjectContext) in parent.core.valuesForChild(ids) }
    }

    /// Whether judging `node` may read objects other than the one judged: a key path past its
    /// first key, a subquery, a key path of an expression (conservatively, `tags.@count` too).
    static func readsOtherObjects(_ node: PredicateNode) -> Bool {
        func reads(_ expression: FormatExpression) -> Bool {
            switch expression {
            case .constant, .evaluatedObject, .variable: false
            case .keyPath(let path): path.components.count > 1
            case .aggregate(let elements), .function(_, let elements): elements.contains(where: reads)
            case .arithmetic(_, let a, let b): reads(a) || reads(b)
            case .keyPathOf, .index, .subquery: true
            }
        }
        switch node {
        case .constant: return false
        case .comparison(let comparison): return reads(comparison.leftExpression) || reads(comparison.rightExpression)
        case .and(let children), .or(let children): return children.contains(where: readsOtherObjects)
        case .not(let child): return readsOtherObjects(child)
        }
    }

    /// The entities whose objects judging `node` on objects of `scope` reads besides the one
    /// judged: the destinations (with their subentities) of the relationships its key paths
    /// follow before their last key. Nil when that can't be told: a subquery, a key path of
    /// an expression, an index, a key that isn't a relationship of every entity reached.
    func entitiesRead(by node: PredicateNode, from scope: [String]) -> Set<String>? {
        var reached: Set<String> = []
        func walk(_ path: FormatKeyPath) -> Bool {
            var current = Set(scope)
            for component in path.components.dropLast() {
                // A collection operator applies to the collection read so far; the keys after
                // it are read from its elements, of the entities reached.
                guard case .key(let key) = component else { continue }
                var next: Set<String> = []
                for name in current {
                    guard let property = entities[name]?.properties[key], property.isRelationship, let destination = property.destination
                    else { return false }
                    next.formUnion(model.selfAndSubentityNames(of: destination))
                }
                reached.formUnion(next)
                current = next
            }
            return true
        }
        func known(_ expression: FormatExpression) -> Bool {
            switch expression {
            case .constant, .evaluatedObject, .variable: true
            case .keyPath(let path): walk(path)
            case .aggregate(let elements), .function(_, let elements): elements.allSatisfy(known)
            case .arithmetic(_, let a, let b): known(a) && known(b)
            case .keyPathOf, .index, .subquery: false
            }
        }
        func visit(_ node: PredicateNode) -> Bool {
            switch node {
            case .constant: true
            case .comparison(let comparison): known(comparison.leftExpression) && known(comparison.rightExpression)
            case .and(let children), .or(let children): children.allSatisfy(visit)
            case .not(let child): visit(child)
            }
        }
        return visit(node) ? reached : nil
    }

    /// The parent's current value of one property (a derived relationship side).
    func parentValue(of id: ManagedObjectID, _ key: String) throws -> PropertyValue? {
        guard let parent = parentContext else { return nil }
        return parent.performAndWait { (parent: isolated ManagedObjectContext) in parent.core.valueForChild(id, key) }
    }

    /// A child's fetch: the parent fetches (its pending changes included, no offset, limit or
    /// order) and sends each match's current values; the child's own pending changes are then
    /// applied — its deleted objects drop out, its changed and inserted objects are judged by
    /// their current values — and the child sorts, offsets and limits. Unchanged results stay
    /// faults holding the parent's values as their row.
    func fetchThroughParent(_ request: FetchRequest<ManagedObject>, parent: ManagedObjectContext) throws -> [ManagedObject] {
        catchUpOnRemaps()
        guard let info = entities[request.entityName] else { throw ContextError.unknownEntity(request.entityName) }
        let pendingCounts = request.includesPendingChanges
        // A predicate reading other objects (`team.name`, `ANY tags.label`) judges an object
        // the child hasn't changed by the child's current values of those objects, as a root
        // context's fetch does: the parent, which knows nothing of the child's changes, then
        // sends every object of the entities and the child judges them. Before, the parent's
        // verdict stood, so an object whose related object the child had changed was missed,
        // or kept when it no longer matched.
        // Only when the child has changed, inserted or deleted objects of the entities those
        // key paths reach: otherwise every object they reach is as the parent holds it, and
        // the parent judges (before, any pending change had the parent send every object of
        // the entity for the child to judge).
        let judgesHere: Bool = {
            guard pendingCounts, hasChanges, let predicate = request.predicate, Self.readsOtherObjects(predicate.node) else { return false }
            let scope = request.includesSubentities ? model.selfAndSubentityNames(of: info.entity.name) : [info.entity.name]
            guard let reached = entitiesRead(by: predicate.node, from: scope) else { return true }
            return retained.values.contains { reached.contains($0.entity.name) }
        }()
        let parentRequest = {
            var unordered = request
            if pendingCounts {
                unordered.fetchLimit = 0
                unordered.fetchOffset = 0
                unordered.sortDescriptors = []
            }
            // Without the child's pending changes the parent's answer is the child's, sorted
            // (key paths read as the parent, the child's store, holds them), offset and limited.
            // Before, the child sorted it again reading related objects as the child holds them.
            if judgesHere {
                unordered.predicate = nil
                unordered.memoryFilter = nil
            }
            // The parent sends objects whatever the child's request returns (IDs, say, or the
            // objects a child groups into dictionary rows itself).
            unordered.resultType = .managedObject
            unordered.propertiesToGroupBy = nil
            unordered.havingPredicate = nil
            // The parent is the child's store: its unsaved changes count whatever the child's
            // request says about the child's own.
            unordered.includesPendingChanges = true
            return unordered
        }()
        let (rows, parentRanks) = try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in
            (try parent.fetch(parentRequest).map { ($0.objectID, parent.core.snapshotForChild($0)) }, parent.core.insertRanksForChild())
        }
        let scope = request.includesSubentities ? model.selfAndSubentityNames(of: info.entity.name) : [info.entity.name]
        let entityNames = Set(scope)
        let variables = request.substitutionVariables.mapValues { $0.anyValue as Any }
        var results: [ManagedObject] = []
        var rowsByObject: [ObjectIdentifier: [String: PropertyValue]] = [:]
        for (id, snapshot) in rows {
            let values = snapshot.values
            guard let entity = entities[id.entityName] else { continue }
            let object = registered(id) ?? heldUnderFormerID(id) ?? makeObject(id, info: entity)
            if !object.hasCommittedValues && !object.isInsertedFlag {
                object.row = values
                object.rowVersion = snapshot.version
            }
            if pendingCounts && (object.isDeletedFlag || object.hasChanges) { continue }  // judged below
            if judgesHere {
                if let predicate = request.predicate,
                    try !predicate.evaluate(with: ParentRow(values: values, object: object), substitutionVariables: variables)
                {
                    continue
                }
                if let filter = request.memoryFilter, try !filter(object) { continue }
            }
            rowsByObject[ObjectIdentifier(object)] = values
            results.append(object)
        }
        guard pendingCounts else { return results }
        let changed = retained.values
            .filter { entityNames.contains($0.entity.name) && !$0.isDeletedFlag && $0.hasChanges }
            .sorted { $0.objectID < $1.objectID }
        for object in changed {
            if let predicate = request.predicate, try !predicate.evaluate(with: JudgedObjectView(object), substitutionVariables: variables) { continue }
            if let filter = request.memoryFilter, try !filter(object) { continue }
            results.append(object)
        }
        func subject(_ object: ManagedObject) -> Any {
            rowsByObject[ObjectIdentifier(object)].map { ParentRow(values: $0, object: object) } ?? JudgedObjectView(object)
        }
        // Store order, as a root context's fetch has it (spec 0008, Sort order): stored objects
        // by entity then primary key, then unsaved inserts — the parent's, then the child's
        // own — in insertion order. Before, the objects the child had changed or inserted were
        // put after all the parent's matches, so a fetch without sort descriptors, ties of a
        // sort, and the objects an offset or limit kept differed from the root context's.
        var ranks = parentRanks
        for id in insertionOrder where ranks[id] == nil { ranks[id] = ranks.count }
        let major = Dictionary(scope.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        func position(_ object: ManagedObject) -> FetchExecution.Position {
            let id = object.objectID
            if let rank = ranks[id] { return FetchExecution.Position(group: 1, major: rank, minor: 0) }
            guard let stored = id.storedID else { return FetchExecution.Position(group: 2, major: 0, minor: 0) }
            return FetchExecution.Position(group: 0, major: major[id.entityName] ?? 0, minor: stored.primaryKey)
        }
        results = results.map { ($0, position($0)) }.sorted { $0.1 < $1.1 }.map(\.0)
        if !request.sortDescriptors.isEmpty {
            // Ties keep the store order just made, stated rather than left to the sort.
            // Each result's keys read (and folded) once, not at every comparison.
            let descriptors = request.sortDescriptors
            let keys = SortKeyTable(
                results.map { object in
                    let read = subject(object) as? any KeyValueCoding
                    return descriptors.map { read?.value(forKeyPath: $0.key) }
                }, descriptors: descriptors)
            results = keys.stableOrder().map { results[$0] }
        }
        if request.fetchOffset > 0 { results = Array(results.dropFirst(request.fetchOffset)) }
        if request.fetchLimit > 0 { results = Array(results.prefix(request.fetchLimit)) }
        return results
    }

    /// A child's save: its changes, as the transaction a root context would commit, are applied
    /// to the parent's objects (one undo group there); nothing reaches the store.
    func pushToParent(_ parent: ManagedObjectContext, in context: isolated ManagedObjectContext) throws {
        // The store version each changed or deleted object's values were read at (through the
        // parent): the parent's save checks it where the parent holds no copy of its own.
        var read: [StoredObjectID: UInt64] = [:]
        for (id, object) in retained where !object.isInsertedFlag {
            if let stored = id.storedID, let version = object.version { read[stored] = version }
        }
        let (draft, _, orderedBases) = makeDraft(expectedVersions: read, forParent: true)
        if !draft.isEmpty {
            let key = ObjectIdentifier(self)
            _ = try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in
                try parent.core.applyChildSave(draft, orderedBases: orderedBases, from: key, in: parent)
            }
        }
        finishSave(sequence: nil, idMap: [:], groupIndex: [:], result: nil, in: context)
    }

    /// A message from the parent, on this context's queue.
    func receive(_ message: ParentMessage) {
        switch message {
        case .remap:
            catchUpOnRemaps()
        case .merge(let summary):
            guard automaticallyMerges else { return }
            merge(summary, through: nil)
        }
    }

    /// Sends `message` to every child (except the one keyed `excluded`).
    func tellChildren(_ message: ParentMessage, except excluded: ObjectIdentifier? = nil) {
        guard let context else { return }
        for child in context.children.contexts(except: excluded) { child.receiveFromParent(message) }
    }

    /// Tells every descendant (children, their children, …) that `map`'s temporary IDs are
    /// permanent now: the map goes into each one's ``RemapInbox`` at once, and a message on
    /// its queue takes it in there. A descendant takes it in earlier when, before that
    /// message runs, it looks an object up by ID, fetches, or serves a child of its own
    /// (``catchUpOnRemaps()``); and one that meets a permanent ID of it meanwhile inside an
    /// operation finds the object it holds under the old ID (``heldUnderFormerID(_:)``).
    /// Before session 36 only the children heard, by the message alone, and passed it on when
    /// it ran: a child (or grandchild) meeting the permanent ID first — through its parent's
    /// values, a fetch, a URI — made a second object for it, and once the message came two
    /// objects shared the ID in one context.
    func tellDescendants(remapping map: [ManagedObjectID: ManagedObjectID]) {
        guard let context, !map.isEmpty else { return }
        var waiting = context.children.contextsWithInboxes()
        guard !waiting.isEmpty else { return }
        let remap = RemapInbox.Remap(map)
        while let (child, inbox) = waiting.popLast() {
            inbox.post(remap)
            child.receiveFromParent(.remap)
            waiting += child.children.contextsWithInboxes()
        }
    }

    /// Takes in the remaps ancestors have posted to this context (``tellDescendants(remapping:)``)
    /// and not yet taken in: its objects, values, undo groups and registry move to the
    /// permanent IDs, as when the message comes. Called where the context starts looking up
    /// objects by ID — the app's `object(with:)`, `existingObject(s)(with:)`,
    /// `registeredObject(for:)`, a fetch, a parent serving its child — not while a save, an
    /// undo or a child's push runs here (its objects stay as they are until it ends).
    func catchUpOnRemaps() {
        guard let inbox = remapInbox, !inbox.isEmpty, !isSaving, !isApplyingUndo, changeRecorder == nil else { return }
        for map in inbox.take() {
            leaveObjectsMergedAway(map)
            remapIDs(map)
            addAliases(map)
        }
    }

    /// Of an ancestor's remap, the moves onto an ID under which this context holds another
    /// object: the ancestor's uniqueness merge absorbed the object into one this context has
    /// met too (§18.4). The absorbed one leaves this context, invalidated, as it left the
    /// ancestor, and what names it names the other once the remap is taken in (taking it in
    /// as such would put both objects under one ID).
    func leaveObjectsMergedAway(_ map: [ManagedObjectID: ManagedObjectID]) {
        for (old, new) in map where old != new {
            guard let moving = registered(old), let staying = registered(new), moving !== staying else { continue }
            removeFromContext(moving)
            noteInvalidated(moving)
        }
    }

    /// The object this child holds under the temporary ID a remap waiting in its inbox makes
    /// `id` (a permanent ID met inside an operation, before the remap is taken in): the one
    /// object for it, not a second one.
    func heldUnderFormerID(_ id: ManagedObjectID) -> ManagedObject? {
        guard !id.isTemporaryID, let inbox = remapInbox, !inbox.isEmpty, let former = inbox.formerID(of: id) else { return nil }
        return registered(former)
    }

    // MARK: - Parent side

    /// Notes temporary IDs made permanent, for children that may still use them. Kept as
    /// the maps are and merged into ``idAliases`` only when a child's ID is looked up, so a
    /// save doesn't copy its every new ID. Only children name objects by such IDs: a context
    /// without live children keeps none, and drops what it kept for children now gone
    /// (before, every save added its new IDs for the context's life — an importer saving
    /// batches held a map of every object it had inserted).
    func addAliases(_ map: [ManagedObjectID: ManagedObjectID]) {
        guard let context, !context.children.contexts(except: nil).isEmpty else {
            idAliases = [:]
            idAliasBacklog = []
            return
        }
        idAliasBacklog.append(map)
    }

    /// Notes the store versions this context's save moved objects from and to (`moves`: by
    /// object, old to new), for children that read them through it at the old one — values
    /// the save has now stored: their pushes count the new one as read (§18.3). Kept, like
    /// the ID aliases, only while the context has live children (a child hears of a save
    /// only after its running block, so a note sent to it would come too late for a push
    /// from the block that made the parent save).
    ///
    /// Only what a live child can need is kept: a move from a version handed to a child
    /// (``childReadVersions``), and the moves leading to the old version, which now lead to
    /// the new one (a chain X → old → new is kept as X → new, old → new). A child's version
    /// of an object is one this context handed out, so no other entry is ever looked up;
    /// before session 29 every save added a move for each object it wrote, and the table
    /// grew with every save while children lived.
    func addVersionMoves(_ moves: [ManagedObjectID: (old: UInt64, new: UInt64)]) {
        guard let context, !context.children.contexts(except: nil).isEmpty else {
            versionMoves = [:]
            childReadVersions = [:]
            return
        }
        for (id, move) in moves {
            let handedOut = childReadVersions.removeValue(forKey: id) == move.old
            var entries = versionMoves[id] ?? [:]
            for (from, to) in entries where to == move.old { entries[from] = move.new }
            if handedOut { entries[move.old] = move.new }
            versionMoves[id] = entries.isEmpty ? nil : entries
        }
    }

    /// The version a child that read `id` at `version` has, counting this context's saves
    /// of the values it read.
    func versionForChild(_ id: ManagedObjectID, read version: UInt64) -> UInt64 {
        guard let moves = versionMoves[id] else { return version }
        var version = version
        while let next = moves[version], next > version { version = next }
        return version
    }

    /// Whether the unsaved object a temporary ID names is one this context's objects may
    /// relate to: its own insert, or, in a child, an unsaved object of an ancestor (asked
    /// of the parent, which asks its own: only for an ID this context holds no values for,
    /// one request per such value set). A temporary ID of any other context — an unrelated
    /// context's insert — names nothing a save here can write: before session 33 a child
    /// took it as its parent's, and its save (or the parent's) failed later.
    func holdsUnsavedObject(_ id: ManagedObjectID) -> Bool {
        firstUnheldTemporaryID([id]) == nil
    }

    /// The first of `ids` that names an unsaved object neither this context nor an ancestor
    /// holds (``holdsUnsavedObject(_:)``), or nil: one request to the parent for all of them.
    func firstUnheldTemporaryID(_ ids: [ManagedObjectID]) -> ManagedObjectID? {
        lookUpTemporaryIDs(ids).unheld
    }

    /// What this context and its ancestors know of temporary `ids` (one request to the parent
    /// for all those it can't answer itself): the first that names an unsaved object none of
    /// them holds, and those made permanent since (by a save or `obtainPermanentIDs` of an
    /// ancestor, followed through the alias tables the ancestors keep while they have
    /// children, §18.4), old to new.
    func lookUpTemporaryIDs(_ ids: [ManagedObjectID]) -> TemporaryIDLookup {
        catchUpOnRemaps()
        var lookup = TemporaryIDLookup()
        var asked: [ManagedObjectID] = []
        for id in ids {
            let local = aliased(id)
            // Made permanent since (a save of this context or an ancestor): a stored object.
            guard local.isTemporaryID else {
                if local != id { lookup.madePermanent[id] = local }
                continue
            }
            // A root context's temporary IDs are its inserts.
            guard parentContext != nil else {
                if registered(local) == nil {
                    lookup.unheld = id
                    return lookup
                }
                continue
            }
            // A child's object with values — its insert, or its parent's loaded here — is its
            // family's; a fault without values (made for an ID a value named) is asked about.
            if let object = registered(local), !object.isInvalidated, object.isInsertedFlag || object.hasCommittedValues { continue }
            asked.append(id)
        }
        guard let parent = parentContext, !asked.isEmpty else { return lookup }
        let unknown = asked
        let below = parent.performAndWait { (parent: isolated ManagedObjectContext) in parent.core.lookUpTemporaryIDs(unknown) }
        lookup.unheld = below.unheld
        lookup.madePermanent.merge(below.madePermanent) { own, _ in own }
        return lookup
    }

    /// The IDs under which this child context holds (or makes) the objects `ids` name, for
    /// the app's lookups — `object(with:)`, `existingObject(with:)`, `existingObjects(with:)`,
    /// `registeredObject(for:)`, a relationship set to an ID: a temporary ID an ancestor has
    /// made permanent since is followed to the permanent one, when no object is registered
    /// here under the old ID (this context has been told, and its object moved to the new
    /// one; a context without children keeps no alias table of its own). Before, a second
    /// object was made under the old ID — one object with two identities in the child (spec
    /// 0006 §3.1). Throws `invalidObject` for a temporary ID no context of the chain holds
    /// (§3.2). A root context's IDs are returned as they are (its own temporary IDs are its
    /// inserts; one it made permanent itself names nothing now).
    func resolvingTemporaryIDs(_ ids: [ManagedObjectID]) throws -> [ManagedObjectID] {
        guard parentContext != nil else { return ids }
        let asked = ids.filter { $0.isTemporaryID && registered($0)?.isInsertedFlag != true }
        guard !asked.isEmpty else { return ids }
        let lookup = lookUpTemporaryIDs(asked)
        if let id = lookup.unheld {
            throw ContextError.invalidObject(
                "\(id) is another context's temporary ID: neither this context nor its parent holds the unsaved object it names (save it there, or obtain its permanent ID, and pass that; an ID this context made permanent itself, with obtainPermanentIDs, names nothing now: pass the objectID its object has)")
        }
        guard !lookup.madePermanent.isEmpty else { return ids }
        return ids.map { id in registered(id) == nil ? lookup.madePermanent[id] ?? id : id }
    }

    /// `id`, or the ID it was made since.
    func aliased(_ id: ManagedObjectID) -> ManagedObjectID {
        if !idAliasBacklog.isEmpty {
            for map in idAliasBacklog {
                idAliases.reserveCapacity(idAliases.count + map.count)
                for (old, new) in map { idAliases[old] = new }
            }
            idAliasBacklog.removeAll()
        }
        return idAliases[id] ?? id
    }

    /// Where each unsaved insert this context knows sits in store order, for a child's fetch:
    /// its parent's inserts first (a parent's are the older), then its own, each in insertion
    /// order.
    func insertRanksForChild() -> [ManagedObjectID: Int] {
        var ranks: [ManagedObjectID: Int] = [:]
        if let parent = parentContext {
            ranks = parent.performAndWait { (parent: isolated ManagedObjectContext) in parent.core.insertRanksForChild() }
        }
        for id in insertionOrder where ranks[id] == nil { ranks[id] = ranks.count }
        return ranks
    }

    /// The object a child names, following IDs made permanent since.
    func objectForChild(_ id: ManagedObjectID) -> ManagedObject? {
        object(with: aliased(id))
    }

    /// Current recorded values for a child, keyed by the IDs the child used.
    func valuesForChild(_ ids: [ManagedObjectID]) -> [ManagedObjectID: ParentSnapshot] {
        catchUpOnRemaps()
        var result: [ManagedObjectID: ParentSnapshot] = [:]
        for id in ids {
            guard let object = objectForChild(id), !object.isInvalidated, !object.isDeletedFlag else { continue }
            if !object.hasCommittedValues && !object.isInsertedFlag && (try? fulfillThrowing(object)) == nil { continue }
            result[id] = snapshotForChild(object)
        }
        return result
    }

    /// One object's current recorded values and the store version they are based on (a
    /// fetched row stays unfired).
    func snapshotForChild(_ object: ManagedObject) -> ParentSnapshot {
        if !object.hasCommittedValues && !object.hasRow && !object.isInsertedFlag { try? fulfillThrowing(object) }
        let base = object.committed ?? object.row ?? [:]
        var values: [String: PropertyValue] = [:]
        for (name, property) in object.info.properties where property.isRecorded {
            values[name] = object.changes[name] ?? base[name] ?? property.emptyValue
        }
        let version = object.isInsertedFlag ? nil : object.hasCommittedValues ? object.version : object.rowVersion
        // Handed to a child: a save of this context moving it keeps the move (§18.3).
        if let version { childReadVersions[object.objectID] = version }
        return ParentSnapshot(values: values, version: version)
    }

    /// One property's current value for a child.
    func valueForChild(_ id: ManagedObjectID, _ key: String) -> PropertyValue? {
        catchUpOnRemaps()
        guard let object = objectForChild(id), !object.isInvalidated, let property = object.info.properties[key] else { return nil }
        return object.currentValue(property)
    }

    /// For a child about to delete objects it pushed here — undoing their insert, or redoing
    /// their delete (spec 0006 §18.6, §12 "Links made since"): each object's links as this
    /// context holds them (`ids` are the child's, followed to the IDs made permanent since).
    /// Those below it — the store's, for a root context; its own parent's, for a child — as
    /// this context's unsaved work (its own changes, its children's pushes) leaves them, as
    /// ``pendingLinks(of:_:stored:referrers:)`` and
    /// ``pendingReferrers(to:through:of:stored:referrers:)`` count them for a root context's
    /// own undo. An object this context inserted has no links below it; one it doesn't hold
    /// or has deleted has none at all (the push refuses it). Each other object carries the
    /// temporary ID a child may still name it by.
    func linksForChild(_ ids: [ManagedObjectID]) throws -> [[ChildLink]] {
        catchUpOnRemaps()
        let targets = ids.map(aliased)
        var held: [(index: Int, object: ManagedObject)] = []
        for (index, id) in targets.enumerated() {
            guard let object = object(with: id), !object.isInvalidated, !object.isDeletedFlag else { continue }
            held.append((index, object))
        }
        var below = [[ChildLink]](repeating: [], count: ids.count)
        let stored = held.filter { !$0.object.isInsertedFlag }
        if let parent = parentContext, !stored.isEmpty {
            let asked = stored.map { targets[$0.index] }
            let answers = try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in try parent.core.linksForChild(asked) }
            for (entry, links) in zip(stored, answers) {
                below[entry.index] = links.map { ChildLink(key: $0.key, owner: $0.owner, other: localID($0.other, alias: $0.alias)) }
            }
        } else if !stored.isEmpty {
            let log = try store().log
            let storeUUID = log.storeUUID
            try log.read { reader in
                for (index, object) in stored {
                    guard let storedID = targets[index].storedID else { continue }
                    for property in object.info.propertyList where property.isRelationship && !property.isTransient && property.inverse != nil {
                        for other in try reader.related(storedID, property.name) {
                            below[index].append(ChildLink(key: property.name, owner: nil, other: .permanent(other, store: storeUUID)))
                        }
                    }
                    for (owner, relationship) in oneWayRelationships(to: targets[index].entityName) {
                        for other in try reader.referrers(to: storedID, through: relationship, of: owner) {
                            below[index].append(ChildLink(key: relationship, owner: owner, other: .permanent(other, store: storeUUID)))
                        }
                    }
                }
            }
        }
        var links = [[ChildLink]](repeating: [], count: ids.count)
        var pendingIndex: PendingReferrers?
        for (index, object) in held {
            let id = targets[index]
            for property in object.info.propertyList where property.isRelationship && !property.isTransient && property.inverse != nil {
                let known = below[index].filter { $0.owner == nil && $0.key == property.name }.map(\.other)
                for other in pendingLinks(of: id, property, stored: known, referrers: &pendingIndex) {
                    links[index].append(ChildLink(key: property.name, owner: nil, other: other))
                }
            }
            for (owner, relationship) in oneWayRelationships(to: id.entityName) {
                let known = below[index].filter { $0.owner == owner && $0.key == relationship }.map(\.other)
                for other in pendingReferrers(to: id, through: relationship, of: owner, stored: known, referrers: &pendingIndex) {
                    links[index].append(ChildLink(key: relationship, owner: owner, other: other))
                }
            }
        }
        // The temporary IDs the child may name them by, for IDs made permanent since (only
        // when there are links to report: an undo, not a per-object path).
        if !idAliases.isEmpty, links.contains(where: { !$0.isEmpty }) {
            let wanted = Set(links.joined().map(\.other))
            var former: [ManagedObjectID: ManagedObjectID] = [:]
            for (old, new) in idAliases where wanted.contains(new) { former[new] = old }
            if !former.isEmpty {
                links = links.map { $0.map { ChildLink(key: $0.key, owner: $0.owner, other: $0.other, alias: former[$0.other]) } }
            }
        }
        return links
    }

    /// The ID this context names an object by that its parent reports as `other` (`alias`:
    /// the temporary ID it had): the temporary one while this context hasn't heard yet that
    /// it was made permanent (it holds the object, or a group of its names it, under that).
    func localID(_ other: ManagedObjectID, alias: ManagedObjectID?, groups: [UndoGroup] = []) -> ManagedObjectID {
        guard let alias, registered(other) == nil else { return other }
        if registered(alias) != nil || groups.contains(where: { $0.changes[alias] != nil }) { return alias }
        return other
    }

    /// Applies a child's save to this context's objects, as changes made here (Core Data: the
    /// parent becomes dirty): objects inserted in the child are inserted here under the same
    /// IDs (no default values, no `awakeFromInsert`: the child's values are complete),
    /// updates set values with inverse maintenance, deletes delete (delete rules apply). The
    /// open undo group is closed before and after, so the child's save is one undo group.
    /// Checked first, so a refused save changes nothing.
    ///
    /// An unordered to-many change comes as members added and removed; an ordered one as the
    /// child's list with the list it was made from (`orderedBases`), and what the child did
    /// to that — removals, insertions, moves — is done to this context's list as it is now
    /// (``OrderedRebase``), so an unsaved change of it here stays (before session 29 the
    /// child's list replaced it).
    func applyChildSave(
        _ draft: TransactionDraft, orderedBases: OrderedPushBases = [:], from child: ObjectIdentifier, in context: isolated ManagedObjectContext
    ) throws -> ChangeSummary {
        catchUpOnRemaps()
        let storeUUID = try store().identifier
        func id(_ object: DraftObjectID) -> ManagedObjectID {
            let id: ManagedObjectID = switch object {
            case .temporary(let entity, let uuid): ManagedObjectID(entityName: entity, storage: .temporary(uuid))
            case .stored(let stored): .permanent(stored, store: storeUUID)
            }
            return aliased(id)
        }
        let operations = draft.groups.flatMap(\.operations)
        var insertedHere: Set<ManagedObjectID> = []
        for case .insert(let object, _) in operations { insertedHere.insert(id(object)) }
        /// A reference to an object the parent no longer has (its unsaved insert rolled back,
        /// reset or deleted there since the child read it) would leave the parent holding a
        /// dangling reference its own save can't write: refused here, naming both ends.
        func checkReferences(from object: DraftObjectID, _ key: String, _ targets: [DraftObjectID]) throws {
            for target in targets {
                let targetID = id(target)
                if insertedHere.contains(targetID) { continue }
                if let found = registered(targetID) {
                    if !found.isInvalidated && !found.isDeletedFlag { continue }
                } else if !targetID.isTemporaryID {
                    continue  // a stored object the parent hasn't loaded: the store checks it
                } else if parentContext != nil, try parentValues(for: [targetID])[targetID] != nil {
                    continue  // an unsaved object of an ancestor this context doesn't hold now
                }
                throw ContextError.storeRefused(
                    "\(id(object)).\(key) refers to \(targetID), which the parent context no longer has (deleted, rolled back or reset)")
            }
        }
        for operation in operations {
            switch operation {
            case .insert(let object, _):
                // A stored object held here is the child's undone delete, pushed earlier: its
                // deletion here is withdrawn, or was dropped already (a rollback or undo here).
                if let existing = registered(id(object)), !existing.isInvalidated, existing.isInsertedFlag || existing.objectID.isTemporaryID {
                    throw ContextError.storeRefused("the parent context already has \(id(object))")
                }
            case .update(let object, _), .membership(let object, _, _, _), .delete(let object):
                // An object this push inserts (in an earlier group of the child's save: inserted,
                // then changed or deleted after the group closed) is the push's own (before, the
                // save was refused: "the parent context no longer has" the new object).
                if insertedHere.contains(id(object)) { break }
                guard let found = self.object(with: id(object)), !found.isInvalidated, !found.isDeletedFlag else {
                    throw ContextError.storeRefused("the parent context no longer has \(id(object)) (deleted or unknown)")
                }
            }
            switch operation {
            case .insert(let object, let values), .update(let object, let values):
                for (key, value) in values {
                    switch value {
                    case .reference(let target): try checkReferences(from: object, key, [target])
                    case .references(let targets): try checkReferences(from: object, key, targets)
                    case .null, .attribute: continue
                    }
                }
            case .membership(let object, let key, let added, _):
                try checkReferences(from: object, key, added)
            case .delete:
                continue
            }
        }
        // Held until the push has changed them (the context keeps changed objects only).
        let adopted = try adoptChildReadVersions(draft.expectedVersions, storeUUID: storeUUID)
        defer { withExtendedLifetime(adopted) {} }
        // The parent's explicit group, if one is open, goes on after the push under its name.
        let explicitName = journal.explicitDepth > 0 ? journal.open.actionName : nil
        closeOpenGroup()
        changeRecorder = []
        defer { changeRecorder = nil }
        var summary = ChangeSummary()
        // The child's values of an object it inserts are complete: a recorded property they
        // leave out is empty (set so on a stored object taken over below).
        func emptyingUnset(_ object: ManagedObject, _ values: [String: DraftValue]) {
            for name in object.info.orderedNames where values[name] == nil {
                guard let property = object.info.properties[name], property.isWritten else { continue }
                set(object, property, property.emptyValue, maintainInverse: true, register: true)
            }
        }
        var live: [ManagedObject] = []
        defer { withExtendedLifetime(live) {} }
        // Every inserted object first, so references between them maintain inverses.
        for case .insert(let object, let values) in operations {
            guard let info = entities[object.entity] else { throw ContextError.unknownEntity(object.entity) }
            if let existing = registered(id(object)), !existing.isInvalidated, existing.isDeletedFlag {
                // The child undid a delete of a stored object it had pushed here, unsaved: the
                // deletion is withdrawn (before, the push was refused as "already has"). Its
                // entries leave this context's pending groups, so the save neither deletes it
                // nor inserts it again; the values below (and the reconciliation at save)
                // bring its state back.
                discardPendingJournal(for: existing.objectID)
                existing.isDeletedFlag = false
                restored.remove(existing.objectID)
                markChanged(existing)
                noteUpdated(existing)
                // Values it kept from before the deletion (this context's own change, unsaved,
                // of a one-to-one whose partner the delete rule nullified) go where the child
                // has none (before session 37 the player kept its captaincy of a team whose
                // captain was none).
                emptyingUnset(existing, values)
                continue
            }
            // A stored object this context has, not deleted: the child undid a delete it had
            // pushed, and the deletion was dropped here since (a rollback, or an undo of the
            // push). The child's values are set on it, as on a withdrawn deletion (before
            // session 37 the push was refused when this context held the object — "the parent
            // context already has" it — and otherwise inserted it again, and the save was
            // refused: "object … already exists").
            if !id(object).isTemporaryID, let held = self.object(with: id(object)), !held.isInvalidated, !held.isDeletedFlag,
                (try? fulfillThrowing(held)) != nil, held.hasCommittedValues
            {
                live.append(held)
                emptyingUnset(held, values)
                continue
            }
            // An object of an earlier push that a later one deleted, unsaved (the child undid
            // its delete): the parent's pending groups insert and delete it, and inserting it
            // again in the same transaction was refused at the parent's save ("object … already
            // exists"). The pair nets to nothing: it leaves the pending groups, and the object
            // is inserted once, by this push.
            if id(object).isTemporaryID, registered(id(object)) == nil || registered(id(object))?.isInvalidated == true {
                discardPendingJournal(for: id(object))
            }
            let inserted = insertPushed(id(object), info: info)
            summary.inserted.insert(inserted.objectID)
        }
        func value(_ draftValue: DraftValue, _ property: PropertyInfo) -> PropertyValue {
            switch draftValue {
            case .null: property.emptyValue
            case .attribute(let attribute): .attribute(attribute)
            case .reference(let target): .toOne(id(target))
            case .references(let targets): property.isOrdered ? .toMany(targets.map(id)) : .unordered(targets.map(id))
            }
        }
        // Both sides of a many-to-many ordered on both sides come in the push (both are
        // recorded, spec 0004 §4.1), so setting one side appends to the other's list by inverse
        // maintenance before that list's own change is rebased — which then took the appended
        // member as one this context had added, and left it last. Such a list is rebased onto
        // what it was before the push (then the values the push itself gave it).
        var pairedLists: [ManagedObjectID: [String: [ManagedObjectID]]] = [:]
        for group in draft.groups {
            for case .update(let object, let values) in group.operations {
                guard let target = self.object(with: id(object)) else { continue }
                for key in values.keys where pairedLists[target.objectID]?[key] == nil {
                    guard let property = target.info.properties[key], isOrderedOnBothSides(property) else { continue }
                    pairedLists[target.objectID, default: [:]][key] = target.currentValue(property).ids
                }
            }
        }
        for (groupIndex, group) in draft.groups.enumerated() {
            for operation in group.operations {
                switch operation {
                case .insert(let object, let values), .update(let object, let values):
                    guard let target = self.object(with: id(object)) else { continue }
                    for (key, draftValue) in values.sorted(by: { $0.key < $1.key }) {
                        guard let property = target.info.properties[key] else { continue }
                        var newValue = value(draftValue, property)
                        let paired = pairedLists[target.objectID]?[key]
                        if property.isOrdered, case .update = operation, let base = orderedBases[groupIndex]?[object]?[key] {
                            let onto = paired ?? target.currentValue(property).ids
                            let rebased = OrderedRebase.rebase(base: base.map(id), ours: newValue.ids, onto: onto)
                            newValue = .toMany(rebased)
                        }
                        if paired != nil { pairedLists[target.objectID]?[key] = newValue.ids }
                        set(target, property, newValue, maintainInverse: true, register: true)
                    }
                case .membership(let object, let key, let added, let removed):
                    guard let target = self.object(with: id(object)), let property = target.info.properties[key] else { continue }
                    let removedIDs = Set(removed.map(id))
                    var members = target.currentValue(property).ids.filter { !removedIDs.contains($0) }
                    members += added.map(id).filter { !members.contains($0) }
                    set(target, property, .unordered(members), maintainInverse: true, register: true)
                case .delete:
                    continue
                }
            }
        }
        // Then the deletes, their delete rules run over this context's objects as the push
        // leaves them, as Core Data's parent takes a child's values before its deletes
        // propagate. Before, each group's deletes came in its turn, ahead of the later groups'
        // updates — the reconciliation group's last: a player the child had taken off the team
        // with undo registration disabled, then the undo of the team's pushed insert, and the
        // team's cascade took this context's player with it before the unlink came.
        for case .delete(let object) in operations {
            guard let target = self.object(with: id(object)) else { continue }
            delete(target, in: context)
            summary.deleted.insert(target.objectID)
        }
        closeOpenGroup()
        journal.open.actionName = explicitName
        summary.updated = (changeRecorder ?? []).subtracting(summary.inserted).subtracting(summary.deleted)
        tellChildren(.merge(summary), except: child)
        return summary
    }

    /// Whether `property` is an ordered to-many whose inverse is an ordered to-many too (both
    /// sides recorded, spec 0004 §4.1; or the relationship is its own inverse).
    func isOrderedOnBothSides(_ property: PropertyInfo) -> Bool {
        guard property.isOrdered, let destination = property.destination, let inverse = property.inverse,
            let other = entities[destination]?.properties[inverse]
        else { return false }
        return other.isOrdered
    }

    /// The objects a child's save changes or deletes that this context holds no values of
    /// (it let them go after the child read them through it, or never loaded them) take the
    /// values and version the child read (`versions`), as if this context had kept them
    /// registered since (Core Data's parent registers what its children read): its save then
    /// checks the version the child's change was made to. Before, they were read from the
    /// store as it was now, so another writer's change committed in between passed the
    /// parent's save unchecked and the child's values silently replaced it. An object held
    /// here keeps its own values and version.
    ///
    /// Returns the objects it loaded, for the caller to hold while it applies the push.
    func adoptChildReadVersions(_ versions: [StoredObjectID: UInt64], storeUUID: UUID) throws -> [ManagedObject] {
        var adopted: [ManagedObject] = []
        for (stored, read) in versions.sorted(by: { $0.key < $1.key }) {
            let id = ManagedObjectID.permanent(stored, store: storeUUID)
            let version = versionForChild(id, read: read)
            if let held = registered(id), held.isInvalidated || held.isInsertedFlag || held.hasCommittedValues || held.hasRow { continue }
            guard let object = object(with: id), !object.isDeletedFlag else { continue }
            adopted.append(object)
            if parentContext != nil {
                // A middle context: the values its own parent holds, based on the version read.
                try? fulfillThrowing(object)
                if object.hasCommittedValues { object.version = version }
                continue
            }
            let log = try store().log
            // The state just after `version` (the store's current one when nothing changed
            // the object since: no walk back then).
            let image = try? readPinned(log) { reader in try reader.object(stored, asOf: version) }
            if let image {
                object.committed = values(from: image, info: object.info)
                object.version = version
                object.awakeFromFetchUntracked()
            } else {
                // That state can't be read back (its history purged): the store's values, with
                // the version the child read, which the save finds changed.
                try? fulfillThrowing(object)
                if object.hasCommittedValues { object.version = version }
            }
        }
        return adopted
    }

    /// An object a child inserted, inserted here under the child's ID.
    private func insertPushed(_ id: ManagedObjectID, info: EntityInfo) -> ManagedObject {
        let object = coordinator.objectClass(for: info).init(ObjectCreation(entity: info, objectID: id, registry: objects))
        object.isInsertedFlag = true
        object.committed = [:]
        register(object)
        markChanged(object)
        if id.isTemporaryID { insertionOrder.append(id) } else { restored.insert(id) }
        noteInserted(object)
        if journal.isRegistering && !isApplyingUndo { journal.open.recordInsert(id) }
        return object
    }
}

