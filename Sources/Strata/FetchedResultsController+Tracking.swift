import Foundation
import StrataModel
import StrataPredicate

// How a fetched results controller builds its table and keeps it in step with the context
// (spec 0006 §21). The table is sections of objects in sort order, each object's sort keys
// and store position kept beside it, so a change is placed by binary search: a batch costs
// work in proportion to the objects it changes (times log n), not a new fetch — except
// `reset()`, changes missed without a delegate, and requests with a limit, an offset or
// `includesPendingChanges = false`, which fetch again and compare.

// MARK: - The table

/// Where an object sorts: its sort descriptors' values, then its place in store order
/// (which breaks ties exactly as a fetch does).
struct ResultsKey {
    var values: [SortKey]
    var position: FetchExecution.Position
    /// The string values of descriptors that fold strings, folded once when the key is made
    /// (nil for other values; empty when no descriptor folds): the table's searches compare
    /// them, not the strings folded again at every comparison.
    var folded: [String?] = []
}

/// An object the controller shows.
struct ResultsEntry {
    var key: ResultsKey
    var section: String
    /// The object's ID as the delegate last heard it (for the difference callback).
    var reportedID: ManagedObjectID
}

/// One section: its objects in order and their keys beside them.
final class ResultsSection {
    let name: String
    var objects: [ManagedObject] = []
    var keys: [ResultsKey] = []
    /// The key of its first object (kept while a batch empties it, so it keeps its place).
    var anchor: ResultsKey
    /// The index title, once asked for.
    var indexTitle: String??

    init(name: String, anchor: ResultsKey) {
        self.name = name
        self.anchor = anchor
    }
}

/// A step of a key path through a relationship, walked backwards through its inverse to
/// find the objects a change to a related object concerns.
struct RelatedStep: Hashable {
    /// The relationship's destination entity and its sub-entities.
    let destinations: Set<String>
    /// The inverse relationship (on the destination); nil when there is none.
    let inverse: String?
}

/// What `performFetch()` worked out from the request.
struct ResultsPlan {
    /// The request with Swift key paths and `#Predicate`s resolved.
    let request: FetchRequest<ManagedObject>
    let descriptors: [FetchSortDescriptor]
    /// Whether each sort key is one key (no dots, no operator).
    let simpleKeys: [Bool]
    let variables: [String: Any]
    /// The entities fetched, by name, with their place in store order.
    let majors: [String: Int]
    /// The relationship paths the predicate, the sort keys and the section key path read.
    let relatedPaths: [[RelatedStep]]
    /// Entities whose objects' changes matter: those fetched and those related.
    let relevantEntities: Set<String>
    let relatedEntities: Set<String>
    /// A limit, an offset or `includesPendingChanges = false`: each batch fetches again.
    let refetchesEachBatch: Bool
    /// An empty `affectedStores`: nothing is ever shown.
    let searchesNoStore: Bool
}

/// Everything a batch tells the delegate.
struct ResultsChanges {
    struct ObjectChange {
        let object: ManagedObject
        let type: FetchedResultsChangeType
        let old: IndexPath?
        let new: IndexPath?
    }
    var deletedSections: [(index: Int, info: FetchedResultsSectionInfo)] = []
    var insertedSections: [(index: Int, info: FetchedResultsSectionInfo)] = []
    var objects: [ObjectChange] = []
    /// The difference form (controllers without sections).
    var removals: [CollectionDifference<ManagedObjectID>.Change] = []
    var insertions: [CollectionDifference<ManagedObjectID>.Change] = []

    var hasObjectChanges: Bool { !deletedSections.isEmpty || !insertedSections.isEmpty || !objects.isEmpty }
    var hasDifference: Bool { !removals.isEmpty || !insertions.isEmpty }
}

extension AnyFetchedResultsController: ContextChangeTracker {
    // MARK: - Planning

    /// Checks the request and the section key path, and works out what tracking needs.
    func makePlan() throws -> ResultsPlan {
        let request = fetchRequest
        guard request.resultType == .managedObject else {
            throw ContextError.invalidFetchRequest(
                part: "resultType", reason: "a fetched results controller shows managed objects, but the request asks for \(request.resultType)")
        }
        guard !request.sortDescriptors.isEmpty else {
            throw ContextError.invalidFetchRequest(
                part: "sortDescriptors",
                reason: "a fetched results controller needs at least one sort descriptor to order its objects (Core Data requires them too)")
        }
        let prepared = try core.prepared(request)
        try core.validate(prepared)
        guard let info = core.entities[prepared.entityName] else { throw ContextError.unknownEntity(prepared.entityName) }
        var paths = prepared.sortDescriptors.map { FormatKeyPath($0.key) }
        if let sectionNameKeyPath {
            let part = "sectionNameKeyPath (\(sectionNameKeyPath))"
            guard !sectionNameKeyPath.isEmpty else { throw ContextError.invalidFetchRequest(part: "sectionNameKeyPath", reason: "empty key path") }
            let path = FormatKeyPath(sectionNameKeyPath)
            let validator = FetchValidator(model: core.model, entity: info.entity, variables: [:])
            if case .failure(let problem) = validator.resolve(path) {
                throw ContextError.invalidFetchRequest(part: part, reason: problem.text)
            }
            if let toMany = validator.toManyKey(in: path) {
                throw ContextError.invalidFetchRequest(
                    part: part, reason: "\(toMany) is a to-many relationship; a section key path must give one value per object")
            }
            paths.append(path)
        }
        if let predicate = prepared.predicate { Self.collectKeyPaths(in: predicate.node, into: &paths) }
        let names = prepared.includesSubentities ? core.model.selfAndSubentityNames(of: prepared.entityName) : [prepared.entityName]
        var majors: [String: Int] = [:]
        for name in names {
            guard let entity = core.entities[name], !entity.entity.isAbstract else { continue }
            majors[name] = majors.count
        }
        var related: [[RelatedStep]] = []
        var relatedEntities: Set<String> = []
        for path in paths {
            let steps = relatedSteps(path, from: prepared.entityName)
            // A path sorted by and sectioned by (`team.name` twice) is walked once.
            guard !steps.isEmpty, !related.contains(steps) else { continue }
            related.append(steps)
            for step in steps { relatedEntities.formUnion(step.destinations) }
        }
        return ResultsPlan(
            request: prepared, descriptors: prepared.sortDescriptors,
            simpleKeys: prepared.sortDescriptors.map { !$0.key.contains(".") && !$0.key.hasPrefix("@") },
            variables: prepared.substitutionVariables.mapValues { $0.anyValue as Any }, majors: majors, relatedPaths: related,
            relevantEntities: relatedEntities.union(majors.keys), relatedEntities: relatedEntities,
            refetchesEachBatch: prepared.fetchLimit > 0 || prepared.fetchOffset > 0 || !prepared.includesPendingChanges,
            searchesNoStore: core.searchesNoStore(prepared))
    }

    /// The relationships `path` goes through from `entity`, in order.
    func relatedSteps(_ path: FormatKeyPath, from entity: String) -> [RelatedStep] {
        var steps: [RelatedStep] = []
        var current = core.model.entity(named: entity)
        for component in path.components {
            // A collection operator reads the next key from the elements: the walk goes on.
            guard case .key(let key) = component else { continue }
            guard let here = current, let relationship = here.relationshipsByName[key] else { break }
            let destination = relationship.destinationEntityName
            steps.append(RelatedStep(destinations: Set(core.model.selfAndSubentityNames(of: destination)), inverse: relationship.inverseName))
            current = core.model.entity(named: destination)
        }
        return steps
    }

    /// The key paths a predicate reads from the evaluated object (a `SUBQUERY`'s collection,
    /// not what its own predicate reads from each element).
    static func collectKeyPaths(in node: PredicateNode, into paths: inout [FormatKeyPath]) {
        switch node {
        case .constant: break
        case .not(let child): collectKeyPaths(in: child, into: &paths)
        case .and(let children), .or(let children):
            for child in children { collectKeyPaths(in: child, into: &paths) }
        case .comparison(let comparison):
            collectKeyPaths(in: comparison.leftExpression, into: &paths)
            collectKeyPaths(in: comparison.rightExpression, into: &paths)
        }
    }

    static func collectKeyPaths(in expression: FormatExpression, into paths: inout [FormatKeyPath]) {
        switch expression {
        case .constant, .evaluatedObject, .variable: break
        case .keyPath(let path): paths.append(path)
        case .keyPathOf(.evaluatedObject, let path): paths.append(path)
        case .keyPathOf(let base, _), .index(let base, _): collectKeyPaths(in: base, into: &paths)
        case .aggregate(let elements), .function(_, let elements):
            for element in elements { collectKeyPaths(in: element, into: &paths) }
        case .arithmetic(_, let left, let right):
            collectKeyPaths(in: left, into: &paths)
            collectKeyPaths(in: right, into: &paths)
        case .subquery(let collection, _, _): collectKeyPaths(in: collection, into: &paths)
        }
    }

    // MARK: - Judging one object

    /// Where `object` belongs now — its key and section — or nil when it isn't one of the
    /// results (deleted, removed from the context, of another entity or class, or not
    /// matching the predicate). A fault is fired first; one whose object is gone is no result.
    func evaluate(_ object: ManagedObject, _ plan: ResultsPlan) -> (key: ResultsKey, section: String)? {
        guard !plan.searchesNoStore, !object.isInvalidated, !object.isDeletedFlag, object.core === core,
            let major = plan.majors[object.entity.name], accepts(object)
        else { return nil }
        if object.isFault {
            // Fired here, not by a read: a read that finds the object gone records a problem
            // the next save would throw.
            do { try core.fulfillThrowing(object) } catch { return nil }
            guard !object.isInvalidated, !object.isDeletedFlag else { return nil }
        }
        do {
            // Judged as a fetch judges it (spec 0008, Evaluation): without pending changes by
            // its stored values, not through its class's `value(forKey:)` (before session 31
            // the controller read every object through the class, so an override decided
            // membership here and not in the fetch).
            if let predicate = plan.request.predicate,
                try !predicate.evaluate(with: JudgedObjectView(object), substitutionVariables: plan.variables)
            {
                return nil
            }
            if let filter = plan.request.memoryFilter, try !filter(object) { return nil }
        } catch {
            // An error evaluating (an invalid MATCHES pattern) is no match; the fetch threw it.
            return nil
        }
        return (key(of: object, major: major, plan), sectionName(of: object))
    }

    /// The sort key of a result, read as a fetch reads it (``resultValue(_:_:simple:reading:)``).
    func key(of object: ManagedObject, major: Int, _ plan: ResultsPlan, reading row: FetchedRowView? = nil) -> ResultsKey {
        evaluations += 1
        var values: [SortKey] = []
        values.reserveCapacity(plan.descriptors.count)
        var folded: [String?] = []
        for (index, (descriptor, simple)) in zip(plan.descriptors, plan.simpleKeys).enumerated() {
            let value = SortKey(resultValue(object, descriptor.key, simple: simple, reading: row))
            values.append(value)
            let folding = descriptor.foldingOptions
            if !folding.isEmpty, case .string(let text) = value {
                if folded.isEmpty { folded = [String?](repeating: nil, count: plan.descriptors.count) }
                folded[index] = FetchSortDescriptor.fold(text, folding)
            }
        }
        return ResultsKey(values: values, position: position(of: object, major: major), folded: folded)
    }

    /// Store order, as a fetch has it (spec 0008, **Sort order**): stored objects by entity
    /// then primary key, then unsaved inserts in insertion order, then objects restored by undo.
    /// In a child, an object its save pushed into the parent (no longer inserted here, still
    /// temporary) keeps its insert's place, as the parent's fetch has it: before, it took
    /// primary key 0 — the child's save moved its new objects before the stored ones,
    /// reversed among themselves, reported as moves.
    func position(of object: ManagedObject, major: Int) -> FetchExecution.Position {
        guard object.isInsertedFlag || object.objectID.isTemporaryID else {
            return FetchExecution.Position(group: 0, major: major, minor: object.objectID.storedID?.primaryKey ?? 0)
        }
        let rank = insertRanks[object.objectID] ?? newRank(for: object)
        return FetchExecution.Position(group: rank.group, major: rank.rank, minor: 0)
    }

    /// The next rank in store order, for an insert seen for the first time.
    func newRank(for object: ManagedObject) -> (group: Int, rank: Int) {
        nextRank += 1
        let rank = (group: object.objectID.isTemporaryID ? 1 : 2, rank: nextRank)
        insertRanks[object.objectID] = rank
        return rank
    }

    /// Ranks every unsaved insert of the context as a fetch orders them (one pass over the
    /// insertion order).
    func rankAllInserts() {
        insertRanks.removeAll()
        nextRank = 0
        for id in core.insertionOrder {
            nextRank += 1
            insertRanks[id] = (1, nextRank)
        }
        for id in core.restored.sorted() where insertRanks[id] == nil {
            nextRank += 1
            insertRanks[id] = (2, nextRank)
        }
    }

    /// Ranks the objects a batch inserted (they go after every earlier insert, in the
    /// context's insertion order when there are several).
    func rankFreshInserts(_ objects: [ManagedObject]) {
        let fresh = objects.filter(\.isInsertedFlag)
        for object in fresh { insertRanks[object.objectID] = nil }
        guard fresh.count > 1 else {
            if let only = fresh.first { _ = newRank(for: only) }
            return
        }
        let wanted = Set(fresh.map(\.objectID))
        for id in core.insertionOrder where wanted.contains(id) {
            nextRank += 1
            insertRanks[id] = (1, nextRank)
        }
        for object in fresh.sorted(by: { $0.objectID < $1.objectID }) where insertRanks[object.objectID] == nil {
            _ = newRank(for: object)
        }
    }

    /// The section name of `object`: the value at the section key path as text.
    func sectionName(of object: ManagedObject, reading row: FetchedRowView? = nil) -> String {
        guard let sectionNameKeyPath else { return "" }
        return Self.sectionName(for: resultValue(object, sectionNameKeyPath, simple: false, reading: row))
    }

    /// The value at `keyPath` (a single key when `simple`) of a result, read as a fetch reads
    /// it (spec 0006 §21.3, spec 0008 Evaluation): a result without pending changes by its
    /// stored values (``JudgedObjectView``: a fault holding its fetched row from the row, so
    /// it stays a fault and sorting and sectioning fire no fault — before session 29 every
    /// result's fault fired at `performFetch()`; a loaded object from its committed values,
    /// not through a class's `value(forKey:)` override, which the fetch doesn't consult for
    /// it either — before session 30 the controller's order then differed from the fetch's);
    /// through a relationship, each related object by its own state, as the fetch reads it
    /// (before session 31, through its class). A result with pending changes is read through
    /// `value(forKey:)`, its related objects each by its own state.
    ///
    /// `row`: a stale result of the fetch `performFetch()` (or a batch fetching again) ran,
    /// read by the stored row the fetch judged and sorted it by (``JudgedRows``), not by the
    /// values it holds — so the controller's order and sections are the fetch's (spec 0006
    /// §21.1.3; before session 32 it was keyed by its held values and re-sorted).
    func resultValue(_ object: ManagedObject, _ keyPath: String, simple: Bool, reading row: FetchedRowView? = nil) -> Any? {
        if let row { return simple ? row.value(forKey: keyPath) : row.value(forKeyPath: keyPath) }
        let view = JudgedObjectView(object)
        return simple ? view.value(forKey: keyPath) : view.value(forKeyPath: keyPath)
    }

    /// A value as a section name: strings as they are; nil as `""`; Booleans `"0"` and
    /// `"1"` (as Core Data's `NSNumber` shows them); numbers, dates and decimals as their
    /// description — a date at NaN as `"nan"`, as a NaN number shows (Foundation's
    /// `Date.description` traps on it: before, a NaN date crashed `performFetch()`); an
    /// object as its ID's URI.
    static func sectionName(for value: Any?) -> String {
        switch value {
        case nil: ""
        case let text as String: text
        case let flag as Bool: flag ? "1" : "0"
        case let object as ManagedObject: object.objectID.description
        case let view as JudgedObjectView: view.object.objectID.description
        case let uuid as UUID: uuid.uuidString
        case let url as URL: url.absoluteString
        case let date as Date: date.timeIntervalSinceReferenceDate.isNaN ? "nan" : date.description
        case is NSNull: ""
        case let value?: String(describing: value)
        }
    }

    // MARK: - Order

    /// Whether `a` sorts before `b`: by the descriptors, then store order.
    func precedes(_ a: ResultsKey, _ b: ResultsKey, _ descriptors: [FetchSortDescriptor]) -> Bool {
        for (index, descriptor) in descriptors.enumerated() {
            let order: ComparisonResult
            if index < a.folded.count, index < b.folded.count, let x = a.folded[index], let y = b.folded[index] {
                order = FetchSortDescriptor.compareFolded(x, y, numeric: descriptor.numeric)
            } else {
                order = SortKey.compare(
                    a.values[index], b.values[index], caseInsensitive: descriptor.caseInsensitive,
                    diacriticInsensitive: descriptor.diacriticInsensitive, numeric: descriptor.numeric)
            }
            if order != .orderedSame { return descriptor.ascending ? order == .orderedAscending : order == .orderedDescending }
        }
        return a.position < b.position
    }

    /// The first row of `section` whose key doesn't sort before `key`.
    func lowerBound(_ section: ResultsSection, _ key: ResultsKey, _ descriptors: [FetchSortDescriptor]) -> Int {
        var low = 0, high = section.keys.count
        while low < high {
            let middle = (low + high) / 2
            if precedes(section.keys[middle], key, descriptors) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The row of `object` in `section`, found by its key.
    func row(of object: ManagedObject, in section: ResultsSection, key: ResultsKey, _ descriptors: [FetchSortDescriptor]) -> Int? {
        let found = lowerBound(section, key, descriptors)
        if found < section.objects.count, section.objects[found] === object { return found }
        // Unreachable while keys only change through the batch code; a scan keeps it honest.
        return section.objects.firstIndex { $0 === object }
    }

    /// Where `object` is shown, or nil.
    func location(of object: ManagedObject) -> (section: Int, row: Int)? {
        guard let plan, let entry = entries[ObjectIdentifier(object)], let section = sectionIndexes[entry.section],
            let row = row(of: object, in: sectionList[section], key: entry.key, plan.descriptors)
        else { return nil }
        return (section, row)
    }

    /// The index title of `section` (the delegate's, else the default), cached.
    func indexTitle(of section: ResultsSection) -> String? {
        if let cached = section.indexTitle { return cached }
        let title = delegate.map { $0.controller(self, sectionIndexTitleForSectionName: section.name) }
            ?? sectionIndexTitle(forSectionName: section.name)
        section.indexTitle = .some(title)
        return title
    }

    func info(of section: ResultsSection) -> FetchedResultsSectionInfo {
        FetchedResultsSectionInfo(name: section.name, indexTitle: indexTitle(of: section), objects: section.objects)
    }

    func delegateChanged() {
        for section in sectionList { section.indexTitle = nil }
        differenceSupport = nil
    }

    // MARK: - Building the table

    /// Fetches and makes the results the controller's (`performFetch()`).
    func fetchAndInstall() throws {
        let plan = try makePlan()
        let judged = JudgedRows()
        let objects = try core.fetchManagedObjects(plan.request, judgedRows: judged)
        let sections = try buildSections(objects, plan, strict: true, judged: judged)
        install(sections, plan)
        missedChanges = false
        pendingIDChanges.removeAll()
        expectedMergeChange = nil
    }

    /// `objects` (a fetch's results, in its order) as sections. `strict`: a section name
    /// that comes back after another section began is an error (`performFetch()`);
    /// otherwise the object joins its section (a controller catching up keeps going).
    /// `judged`: the rows the fetch judged its stale results by, which key them.
    func buildSections(_ objects: [ManagedObject], _ plan: ResultsPlan, strict: Bool, judged: JudgedRows? = nil) throws -> [ResultsSection] {
        rankAllInserts()
        var items: [(object: ManagedObject, key: ResultsKey, section: String)] = []
        items.reserveCapacity(objects.count)
        for object in objects where accepts(object) && !plan.searchesNoStore {
            guard let major = plan.majors[object.entity.name] else { continue }
            let row = judged?.view(of: object)
            items.append((object, key(of: object, major: major, plan, reading: row), sectionName(of: object, reading: row)))
        }
        // The fetch's order is the controller's; only ties it broke another way (objects
        // restored by undo) can differ, and then the table is sorted as its searches expect.
        let descriptors = plan.descriptors
        if zip(items, items.dropFirst()).contains(where: { precedes($1.key, $0.key, descriptors) }) {
            items = items.enumerated().sorted { a, b in
                if precedes(a.element.key, b.element.key, descriptors) { return true }
                if precedes(b.element.key, a.element.key, descriptors) { return false }
                return a.offset < b.offset
            }.map(\.element)
        }
        let empty = ResultsKey(values: [], position: FetchExecution.Position(group: 0, major: 0, minor: 0))
        guard sectionNameKeyPath != nil else {
            let section = ResultsSection(name: "", anchor: items.first?.key ?? empty)
            section.objects = items.map(\.object)
            section.keys = items.map(\.key)
            return [section]
        }
        var sections: [ResultsSection] = []
        var byName: [String: ResultsSection] = [:]
        for (index, item) in items.enumerated() {
            if let current = sections.last, current.name == item.section {
                current.objects.append(item.object)
                current.keys.append(item.key)
            } else if let earlier = byName[item.section] {
                if strict, let current = sections.last {
                    throw ContextError.invalidFetchRequest(
                        part: "sectionNameKeyPath (\(sectionNameKeyPath ?? ""))",
                        reason: "the fetched object at index \(index) has an out-of-order section name \"\(item.section)\": "
                            + "section \"\(item.section)\" began before section \"\(current.name)\". Objects must be sorted by section: "
                            + "make the first sort descriptor order the sections (sort by \(sectionNameKeyPath ?? "") first)")
                }
                earlier.objects.append(item.object)
                earlier.keys.append(item.key)
            } else {
                let section = ResultsSection(name: item.section, anchor: item.key)
                section.objects = [item.object]
                section.keys = [item.key]
                sections.append(section)
                byName[item.section] = section
            }
        }
        return sections
    }

    /// Makes `sections` the results.
    func install(_ sections: [ResultsSection], _ plan: ResultsPlan) {
        self.plan = plan
        sectionList = sections
        sectionsByName = [:]
        entries = [:]
        for section in sections {
            sectionsByName[section.name] = section
            for (object, key) in zip(section.objects, section.keys) {
                entries[ObjectIdentifier(object)] = ResultsEntry(key: key, section: section.name, reportedID: object.objectID)
            }
        }
        reindexSections()
        contentVersion += 1
    }

    func reindexSections() {
        sectionIndexes = [:]
        for (index, section) in sectionList.enumerated() { sectionIndexes[section.name] = index }
    }

    // MARK: - Following the context

    func context(remapped objects: [(old: ManagedObjectID, object: ManagedObject)]) {
        guard plan != nil else { return }
        for (old, object) in objects {
            if let rank = insertRanks.removeValue(forKey: old) { insertRanks[object.objectID] = rank }
            let id = ObjectIdentifier(object)
            if entries[id] != nil { pendingIDChanges[id] = object }
        }
    }

    func context(posted notification: ContextNotification, objects: [ManagedObjectID: ManagedObject]) {
        guard plan != nil else { return }
        // A notification posted by a delegate's own changes waits for the batch being delivered.
        if isDelivering {
            queued.append((notification, objects))
            return
        }
        handle(notification, objects)
        while !queued.isEmpty, !isDelivering {
            let (next, known) = queued.removeFirst()
            handle(next, known)
        }
    }

    /// Turns one notification into a batch and tells the delegate.
    func handle(_ notification: ContextNotification, _ known: [ManagedObjectID: ManagedObject]) {
        guard let plan else { return }
        let expected = expectedMergeChange
        expectedMergeChange = nil
        var changed: [Set<ManagedObjectID>] = []
        /// Objects that left the context: only the instances the notification carries count.
        var gone: Set<ManagedObjectID> = []
        /// Only objects shown can be concerned (a save changes no values).
        var onlyShown = false
        var touchedIDs: [Set<ManagedObjectID>] = []
        var fresh: Set<ManagedObjectID> = []
        var everything = false
        switch notification {
        case .willSave:
            return
        case .objectsDidChange(let change):
            // A merge posts it right after its did-merge, which was handled as the batch.
            if let expected, change == expected { return }
            everything = change.invalidatedAll
            changed = [change.inserted, change.updated, change.deleted, change.refreshed, change.invalidated]
            touchedIDs = [change.updated, change.refreshed]
            fresh = change.inserted
            gone = change.deleted.union(change.invalidated)
            for id in change.invalidated { insertRanks[id] = nil }
            if change.invalidatedAll { insertRanks.removeAll() }
        case .didSave(let save):
            // The saved inserts are stored objects now: they take their primary-key place.
            changed = [save.inserted]
            onlyShown = true
            if plan.refetchesEachBatch {
                // The stored state the request shows changed.
                changed += [save.updated, save.deleted]
                touchedIDs = [save.updated]
            }
            // A child's save leaves its pushed objects temporary: they keep their place.
            insertRanks = core.parentContext == nil ? [:] : insertRanks.filter { $0.key.isTemporaryID }
        case .didMerge(let merge):
            expectedMergeChange = ObjectsDidChange(inserted: merge.inserted, deleted: merge.invalidated, refreshed: merge.refreshed)
            changed = [merge.inserted, merge.updated, merge.deleted, merge.refreshed, merge.invalidated]
            touchedIDs = [merge.updated, merge.refreshed]
            gone = merge.deleted.union(merge.invalidated)
        }
        let nothing = changed.allSatisfy(\.isEmpty) && !everything
        guard delegate != nil else {
            // No delegate, no tracking (Core Data's rule): the results stay as fetched.
            if !nothing || !pendingIDChanges.isEmpty { missedChanges = true }
            return
        }
        if nothing && pendingIDChanges.isEmpty { return }

        // The objects concerned: those named, then those reaching a changed related object.
        var candidates: [ManagedObject] = []
        var seen: Set<ObjectIdentifier> = []
        var touched: Set<ObjectIdentifier> = []
        var freshObjects: [ManagedObject] = []
        func add(_ object: ManagedObject, touching: Bool) {
            let id = ObjectIdentifier(object)
            if touching { touched.insert(id) }
            if seen.insert(id).inserted { candidates.append(object) }
        }
        let touchedSet = touchedIDs.reduce(into: Set<ManagedObjectID>()) { $0.formUnion($1) }
        for ids in changed {
            for id in ids where plan.relevantEntities.contains(id.entityName) {
                guard let object = resolve(id, known, creating: !gone.contains(id) && !onlyShown, plan) else { continue }
                if onlyShown && entries[ObjectIdentifier(object)] == nil { continue }
                let touching = touchedSet.contains(id)
                if plan.majors[id.entityName] != nil {
                    add(object, touching: touching)
                    if fresh.contains(id) { freshObjects.append(object) }
                }
                if plan.relatedEntities.contains(id.entityName) {
                    // Judged again; reported only if its sort values, section or membership change.
                    for reached in relatedObjects(of: object, plan) { add(reached, touching: false) }
                }
            }
        }
        for (_, object) in pendingIDChanges { add(object, touching: false) }
        pendingIDChanges.removeAll()
        rankFreshInserts(freshObjects)

        let changes: ResultsChanges?
        if everything || missedChanges || plan.refetchesEachBatch {
            changes = refetchedChanges(touched: touched, touchingAll: everything || missedChanges, plan)
        } else {
            changes = incrementalChanges(candidates, touched: touched, plan)
        }
        if let changes { deliver(changes) }
    }

    /// The object for `id`: one the notification carries, a registered one, or a new fault —
    /// nothing holds an unchanged object (a related object, a non-member whose change a
    /// rollback undid, a merge's insert), so it may have gone from the registry by the time
    /// the change is posted. Temporary IDs that aren't registered name nothing any more —
    /// except in a child context, where they name the parent's unsaved objects (a sibling's
    /// insert its save pushed into the parent, merged here): before, such an insert never
    /// reached the child's controller.
    func resolve(_ id: ManagedObjectID, _ known: [ManagedObjectID: ManagedObject], creating: Bool, _ plan: ResultsPlan) -> ManagedObject? {
        if let object = known[id] ?? core.registered(id) { return object }
        guard creating, !id.isTemporaryID || core.parentContext != nil else { return nil }
        return core.object(with: id)
    }

    /// The fetched objects whose key paths reach `object` through relationships, found by
    /// walking each path back through its inverses from wherever `object`'s entity stands
    /// on it. A step without an inverse can't be walked back: changes there are seen only
    /// when the fetched object itself changes.
    func relatedObjects(of object: ManagedObject, _ plan: ResultsPlan) -> [ManagedObject] {
        guard !object.isInvalidated, !object.isDeletedFlag else { return [] }
        let name = object.entity.name
        var result: [ManagedObject] = []
        for steps in plan.relatedPaths {
            for depth in stride(from: steps.count, through: 1, by: -1) where steps[depth - 1].destinations.contains(name) {
                var level = [object]
                var walked = true
                for index in stride(from: depth - 1, through: 0, by: -1) {
                    guard let inverse = steps[index].inverse else {
                        walked = false
                        break
                    }
                    var next: [ManagedObject] = []
                    for here in level where !here.isInvalidated {
                        if here.isFault, (try? core.fulfillThrowing(here)) == nil { continue }
                        switch here.value(forKey: inverse) {
                        case let one as ManagedObject: next.append(one)
                        case let set as Set<ManagedObject>: next.append(contentsOf: set)
                        case let list as [ManagedObject]: next.append(contentsOf: list)
                        default: break
                        }
                    }
                    level = next
                }
                if walked { result.append(contentsOf: level) }
            }
        }
        return result
    }

    // MARK: - A batch, incrementally

    /// Applies the changes of `objects` to the table and says what moved. Each object is
    /// judged again; one whose key and section are unchanged stays in place; the others are
    /// taken out and put back by binary search. Work: the objects' count times log n (plus
    /// moving array elements).
    func incrementalChanges(_ objects: [ManagedObject], touched: Set<ObjectIdentifier>, _ plan: ResultsPlan) -> ResultsChanges? {
        guard !objects.isEmpty else { return nil }
        let descriptors = plan.descriptors
        struct Candidate {
            let object: ManagedObject
            let id: ObjectIdentifier
            var old: (section: Int, row: Int, entry: ResultsEntry)?
            var new: (key: ResultsKey, section: String)?
            var newPath: (section: Int, row: Int)?
            /// Same section and values equal under the sort: nothing visible moved it.
            var sameValues = false
            /// Same values and the same place in store order: it stays where it is.
            var stays = false
        }
        var candidates: [Candidate] = []
        candidates.reserveCapacity(objects.count)
        for object in objects {
            let id = ObjectIdentifier(object)
            var candidate = Candidate(object: object, id: id)
            if let entry = entries[id], let section = sectionIndexes[entry.section],
                let row = row(of: object, in: sectionList[section], key: entry.key, descriptors)
            {
                candidate.old = (section, row, entry)
            }
            candidate.new = evaluate(object, plan)
            if let old = candidate.old, let new = candidate.new, old.entry.section == new.section {
                candidate.sameValues = zip(plan.descriptors, zip(old.entry.key.values, new.key.values)).allSatisfy { descriptor, pair in
                    SortKey.compare(
                        pair.0, pair.1, caseInsensitive: descriptor.caseInsensitive, diacriticInsensitive: descriptor.diacriticInsensitive,
                        numeric: descriptor.numeric)
                        == .orderedSame
                }
                candidate.stays = candidate.sameValues && old.entry.key.position == new.key.position
            }
            guard candidate.old != nil || candidate.new != nil else { continue }
            candidates.append(candidate)
        }
        guard !candidates.isEmpty else { return nil }

        var changes = ResultsChanges()
        // What stays keeps its row; its key is refreshed (values equal under the sort may
        // differ in case), before any row moves.
        for candidate in candidates where candidate.stays {
            guard let old = candidate.old, let new = candidate.new else { continue }
            let section = sectionList[old.section]
            section.keys[old.row] = new.key
            if old.row == 0 { section.anchor = new.key }
            entries[candidate.id]?.key = new.key
        }
        // Sections that may empty — every row taken out — with their index and contents
        // before the batch. Only those: an info holds the section's array, and taking rows out
        // of a shared array copies all of it (every object retained and released again).
        var before: [ObjectIdentifier: (index: Int, info: FetchedResultsSectionInfo)] = [:]
        var removedRows: [Int: [Int]] = [:]
        for candidate in candidates where !candidate.stays {
            guard let old = candidate.old else { continue }
            removedRows[old.section, default: []].append(old.row)
        }
        for (index, rows) in removedRows where rows.count >= sectionList[index].objects.count {
            let section = sectionList[index]
            before[ObjectIdentifier(section)] = (index, info(of: section))
        }
        // Take out what moves or leaves, bottom up so rows stay valid.
        for (sectionIndex, rows) in removedRows {
            let section = sectionList[sectionIndex]
            for row in rows.sorted(by: >) {
                section.objects.remove(at: row)
                section.keys.remove(at: row)
            }
            if let first = section.keys.first { section.anchor = first }
        }
        for index in removedRows.keys { removedRows[index]?.sort() }
        for candidate in candidates where !candidate.stays && candidate.old != nil { entries[candidate.id] = nil }

        // Put back what belongs, each in its section (made when new) at its sorted row.
        var created: Set<ObjectIdentifier> = []
        for index in candidates.indices {
            let candidate = candidates[index]
            guard let new = candidate.new, !candidate.stays else { continue }
            let section: ResultsSection
            if let existing = sectionsByName[new.section] {
                section = existing
            } else {
                section = ResultsSection(name: new.section, anchor: new.key)
                var low = 0, high = sectionList.count
                while low < high {
                    let middle = (low + high) / 2
                    if precedes(sectionList[middle].anchor, new.key, descriptors) { low = middle + 1 } else { high = middle }
                }
                sectionList.insert(section, at: low)
                sectionsByName[new.section] = section
                created.insert(ObjectIdentifier(section))
            }
            let row = lowerBound(section, new.key, descriptors)
            section.objects.insert(candidate.object, at: row)
            section.keys.insert(new.key, at: row)
            if row == 0 { section.anchor = new.key }
            entries[candidate.id] = ResultsEntry(
                key: new.key, section: new.section, reportedID: candidate.old?.entry.reportedID ?? candidate.object.objectID)
        }
        // Sections left empty go (a controller without a key path keeps its one section).
        if sectionNameKeyPath != nil, sectionList.contains(where: \.objects.isEmpty) {
            for section in sectionList where section.objects.isEmpty {
                sectionsByName[section.name] = nil
                if let old = before[ObjectIdentifier(section)] { changes.deletedSections.append(old) }
            }
            sectionList.removeAll { $0.objects.isEmpty }
        }
        if !created.isEmpty || !changes.deletedSections.isEmpty { reindexSections() }
        for (index, section) in sectionList.enumerated() where created.contains(ObjectIdentifier(section)) {
            changes.insertedSections.append((index, info(of: section)))
        }

        // Where everything is now.
        var addedRows: [Int: [Int]] = [:]
        for index in candidates.indices {
            let candidate = candidates[index]
            guard let new = candidate.new, let sectionIndex = sectionIndexes[new.section],
                let row = row(of: candidate.object, in: sectionList[sectionIndex], key: new.key, descriptors)
            else { continue }
            candidates[index].newPath = (sectionIndex, row)
            if !candidate.stays { addedRows[sectionIndex, default: []].append(row) }
        }
        for index in addedRows.keys { addedRows[index]?.sort() }

        // An object that was taken out and put back has moved unless it kept its place among
        // the objects that stayed (same section, as many of them before it) and its order
        // among the others that did so too (the longest run in order stays; the rest move).
        func below(_ rows: [Int]?, _ row: Int) -> Int {
            guard let rows else { return 0 }
            var low = 0, high = rows.count
            while low < high {
                let middle = (low + high) / 2
                if rows[middle] < row { low = middle + 1 } else { high = middle }
            }
            return low
        }
        struct Gap: Hashable {
            let section: String
            let stable: Int
        }
        var gaps: [Gap: [Int]] = [:]
        var moved: Set<Int> = []
        for (index, candidate) in candidates.enumerated() where !candidate.stays {
            guard let old = candidate.old, let new = candidate.new, let newPath = candidate.newPath else { continue }
            let oldStable = old.row - below(removedRows[old.section], old.row)
            let newStable = newPath.row - below(addedRows[newPath.section], newPath.row)
            if old.entry.section == new.section && oldStable == newStable {
                gaps[Gap(section: new.section, stable: oldStable), default: []].append(index)
            } else {
                moved.insert(index)
            }
        }
        for (_, members) in gaps where members.count > 1 {
            let inOldOrder = members.sorted { candidates[$0].old!.row < candidates[$1].old!.row }
            let keep = OrderedRebase.longestIncreasing(inOldOrder.map { candidates[$0].newPath!.row })
            for (position, index) in inOldOrder.enumerated() where !keep.contains(position) { moved.insert(index) }
        }

        let sectioned = sectionNameKeyPath != nil
        func path(_ location: (section: Int, row: Int)) -> IndexPath { IndexPath(indexes: [location.section, location.row]) }
        for (index, candidate) in candidates.enumerated() {
            let object = candidate.object
            let currentID = object.objectID
            switch (candidate.old, candidate.newPath) {
            case (let old?, nil):
                changes.objects.append(.init(object: object, type: .delete, old: path((old.section, old.row)), new: nil))
                if !sectioned { changes.removals.append(.remove(offset: old.row, element: old.entry.reportedID, associatedWith: nil)) }
            case (nil, let new?):
                changes.objects.append(.init(object: object, type: .insert, old: nil, new: path(new)))
                if !sectioned { changes.insertions.append(.insert(offset: new.row, element: currentID, associatedWith: nil)) }
            case (let old?, let new?):
                if moved.contains(index) {
                    changes.objects.append(.init(object: object, type: .move, old: path((old.section, old.row)), new: path(new)))
                    if !sectioned {
                        changes.removals.append(.remove(offset: old.row, element: old.entry.reportedID, associatedWith: new.row))
                        changes.insertions.append(.insert(offset: new.row, element: currentID, associatedWith: old.row))
                    }
                } else {
                    // Reported when its values changed, not when only its place in store order did
                    // (a saved insert taking its primary key).
                    if touched.contains(candidate.id) || !candidate.sameValues {
                        changes.objects.append(.init(object: object, type: .update, old: path((old.section, old.row)), new: path(new)))
                    }
                    if !sectioned && old.entry.reportedID != currentID {
                        changes.removals.append(.remove(offset: old.row, element: old.entry.reportedID, associatedWith: nil))
                        changes.insertions.append(.insert(offset: new.row, element: currentID, associatedWith: nil))
                    }
                }
            case (nil, nil):
                break
            }
            if candidate.newPath != nil { entries[candidate.id]?.reportedID = currentID }
        }
        contentVersion += 1
        return changes
    }

    // MARK: - A batch, by fetching again

    /// Fetches again and compares with what the controller shows: after `reset()` (the
    /// objects are new instances, matched by ID), after changes missed without a delegate,
    /// and for requests a batch can't follow object by object (limit, offset, stored state
    /// only). `touchingAll`: every object that stays is reported updated. Nil when the fetch
    /// fails (the results stay; the next batch tries again).
    func refetchedChanges(touched: Set<ObjectIdentifier>, touchingAll: Bool, _ plan: ResultsPlan) -> ResultsChanges? {
        let newSections: [ResultsSection]
        do {
            // The request last fetched (a changed `fetchRequest` waits for performFetch()).
            let judged = JudgedRows()
            newSections = try buildSections(try core.fetchManagedObjects(plan.request, judgedRows: judged), plan, strict: false, judged: judged)
        } catch {
            missedChanges = true
            return nil
        }
        missedChanges = false
        let oldSections = sectionList
        let oldEntries = entries
        var changes = ResultsChanges()
        let sectioned = sectionNameKeyPath != nil

        // Sections: those in both keep their place if their order agrees; the rest come and go.
        var newSectionIndex: [String: Int] = [:]
        for (index, section) in newSections.enumerated() { newSectionIndex[section.name] = index }
        let common = oldSections.enumerated().compactMap { old in newSectionIndex[old.element.name].map { (old.offset, $0) } }
        let keptPositions = OrderedRebase.longestIncreasing(common.map(\.1))
        var keptSections: Set<String> = []
        for (position, pair) in common.enumerated() where keptPositions.contains(position) { keptSections.insert(oldSections[pair.0].name) }
        for (index, section) in oldSections.enumerated() where !keptSections.contains(section.name) {
            changes.deletedSections.append((index, info(of: section)))
        }

        // Objects: matched by identity, or by ID for an instance the context dropped.
        var newByIdentity: [ObjectIdentifier: (section: Int, row: Int)] = [:]
        var newByID: [ManagedObjectID: (section: Int, row: Int)] = [:]
        for (sectionIndex, section) in newSections.enumerated() {
            for (row, object) in section.objects.enumerated() {
                newByIdentity[ObjectIdentifier(object)] = (sectionIndex, row)
                newByID[object.objectID] = (sectionIndex, row)
            }
        }
        var matchedNew: Set<ObjectIdentifier> = []
        struct Pair {
            let old: (section: Int, row: Int)
            let new: (section: Int, row: Int)
            let oldObject: ManagedObject
            let reportedID: ManagedObjectID
        }
        var pairs: [Pair] = []
        func path(_ location: (section: Int, row: Int)) -> IndexPath { IndexPath(indexes: [location.section, location.row]) }
        for (sectionIndex, section) in oldSections.enumerated() {
            for (row, object) in section.objects.enumerated() {
                let reported = oldEntries[ObjectIdentifier(object)]?.reportedID ?? object.objectID
                var found = newByIdentity[ObjectIdentifier(object)]
                if found == nil, object.isInvalidated, !object.objectID.isTemporaryID { found = newByID[object.objectID] }
                if let found, matchedNew.insert(ObjectIdentifier(newSections[found.section].objects[found.row])).inserted {
                    pairs.append(Pair(old: (sectionIndex, row), new: found, oldObject: object, reportedID: reported))
                } else {
                    changes.objects.append(.init(object: object, type: .delete, old: path((sectionIndex, row)), new: nil))
                    if !sectioned { changes.removals.append(.remove(offset: row, element: reported, associatedWith: nil)) }
                }
            }
        }
        for (sectionIndex, section) in newSections.enumerated() {
            if !keptSections.contains(section.name) {
                // The info is made once the sections are the controller's (index titles).
                changes.insertedSections.append((sectionIndex, FetchedResultsSectionInfo(name: section.name, indexTitle: nil, objects: [])))
            }
            for (row, object) in section.objects.enumerated() where !matchedNew.contains(ObjectIdentifier(object)) {
                changes.objects.append(.init(object: object, type: .insert, old: nil, new: path((sectionIndex, row))))
                if !sectioned { changes.insertions.append(.insert(offset: row, element: object.objectID, associatedWith: nil)) }
            }
        }
        // Pairs in a kept section stay unless they left the longest run in order.
        var stays: Set<Int> = []
        var bySection: [Int: [Int]] = [:]
        for (index, pair) in pairs.enumerated()
        where oldSections[pair.old.section].name == newSections[pair.new.section].name && keptSections.contains(newSections[pair.new.section].name) {
            bySection[pair.new.section, default: []].append(index)
        }
        for (_, members) in bySection {
            let inOldOrder = members.sorted { pairs[$0].old.row < pairs[$1].old.row }
            let keep = OrderedRebase.longestIncreasing(inOldOrder.map { pairs[$0].new.row })
            for (position, index) in inOldOrder.enumerated() where keep.contains(position) { stays.insert(index) }
        }
        for (index, pair) in pairs.enumerated() {
            let object = newSections[pair.new.section].objects[pair.new.row]
            if stays.contains(index) {
                if touchingAll || object !== pair.oldObject || touched.contains(ObjectIdentifier(object)) {
                    changes.objects.append(.init(object: object, type: .update, old: path(pair.old), new: path(pair.new)))
                }
                if !sectioned && pair.reportedID != object.objectID {
                    changes.removals.append(.remove(offset: pair.old.row, element: pair.reportedID, associatedWith: nil))
                    changes.insertions.append(.insert(offset: pair.new.row, element: object.objectID, associatedWith: nil))
                }
            } else {
                changes.objects.append(.init(object: object, type: .move, old: path(pair.old), new: path(pair.new)))
                if !sectioned {
                    changes.removals.append(.remove(offset: pair.old.row, element: pair.reportedID, associatedWith: pair.new.row))
                    changes.insertions.append(.insert(offset: pair.new.row, element: object.objectID, associatedWith: pair.old.row))
                }
            }
        }
        install(newSections, plan)
        // Inserted sections' infos with their index titles, now that they are the controller's.
        changes.insertedSections = changes.insertedSections.map { ($0.index, info(of: sectionList[$0.index])) }
        return changes
    }

    // MARK: - Telling the delegate

    /// Delivers a batch: the difference callback when the delegate implements it (and the
    /// controller has no sections), else the per-object callbacks in the documented order.
    func deliver(_ changes: ResultsChanges) {
        guard let delegate else { return }
        isDelivering = true
        defer { isDelivering = false }
        if sectionNameKeyPath == nil {
            let key = ObjectIdentifier(delegate)
            let known = differenceSupport?.delegate == key ? differenceSupport?.implements : nil
            if known != false {
                if known == nil || changes.hasDifference {
                    differenceCallbackIsDefault = false
                    if let difference = CollectionDifference(changes.removals + changes.insertions) {
                        delegate.controller(self, didChangeContentWith: difference)
                    } else {
                        core.recordProblem(.invalidArgument("a fetched results controller made an inconsistent difference; please report it"))
                    }
                    differenceSupport = (key, !differenceCallbackIsDefault)
                }
                if differenceSupport?.implements == true { return }
            }
        }
        guard changes.hasObjectChanges else { return }
        delegate.controllerWillChangeContent(self)
        for (index, info) in changes.deletedSections.sorted(by: { $0.index > $1.index }) {
            delegate.controller(self, didChange: info, atSectionIndex: index, for: .delete)
        }
        for (index, info) in changes.insertedSections.sorted(by: { $0.index < $1.index }) {
            delegate.controller(self, didChange: info, atSectionIndex: index, for: .insert)
        }
        func ordered(_ type: FetchedResultsChangeType, by key: (ResultsChanges.ObjectChange) -> IndexPath?, descending: Bool = false)
            -> [ResultsChanges.ObjectChange]
        {
            changes.objects.filter { $0.type == type }.sorted { a, b in
                let x = key(a) ?? IndexPath(), y = key(b) ?? IndexPath()
                return descending ? y < x : x < y
            }
        }
        let sequence = ordered(.delete, by: \.old, descending: true) + ordered(.insert, by: \.new) + ordered(.move, by: \.new)
            + ordered(.update, by: \.old)
        for change in sequence {
            delegate.controller(self, didChange: change.object, at: change.old, for: change.type, newIndexPath: change.new)
        }
        delegate.controllerDidChangeContent(self)
    }
}
