public import Foundation

// Core Data's NSFetchedResultsController: a fetch request's results kept as a table of
// sections and rows, updated as the context changes, with a delegate told what moved
// (spec 0006 §21). The public surface is here; the change tracking is in
// `FetchedResultsController+Tracking.swift`.

// MARK: - Change types and sections

/// What happened to an object or a section (Core Data's `NSFetchedResultsChangeType`, same raw values).
public enum FetchedResultsChangeType: Int, Sendable, Hashable, CustomStringConvertible {
    /// The object or section was inserted.
    case insert = 1
    /// The object or section was deleted.
    case delete = 2
    /// The object moved: its section or its place among the other objects changed.
    case move = 3
    /// The object changed but stayed where it was.
    case update = 4

    /// `insert`, `delete`, `move` or `update`.
    public var description: String {
        switch self {
        case .insert: "insert"
        case .delete: "delete"
        case .move: "move"
        case .update: "update"
        }
    }
}

/// One section of a controller's results (Core Data's `NSFetchedResultsSectionInfo`
/// protocol; here a value, a snapshot of the section when it was asked for).
///
/// ```swift
/// let section = controller.sections?[0]
/// print(section?.name, section?.numberOfObjects)
/// ```
///
/// Use it inside the context's `perform`, like the objects it holds.
public struct FetchedResultsSectionInfo {
    /// The section's name: the value at the controller's ``AnyFetchedResultsController/sectionNameKeyPath``
    /// as text (`""` for nil, and for the one section of a controller without a key path).
    public let name: String
    /// The section's entry in a section index: the delegate's
    /// ``FetchedResultsControllerDelegate/controller(_:sectionIndexTitleForSectionName:)``, by
    /// default the capitalized first letter of ``name`` (nil for an empty name).
    public let indexTitle: String?
    /// The section's objects, in the controller's order.
    public let objects: [ManagedObject]
    /// How many objects the section holds.
    public var numberOfObjects: Int { objects.count }
}

// MARK: - The delegate

/// Told when a controller's results change (Core Data's `NSFetchedResultsControllerDelegate`).
///
/// Every method is optional: the protocol's extension gives each a default, so a delegate
/// implements only what it needs. A controller tracks changes only while it has a delegate.
/// The changes of one event — a `perform` block, `processPendingChanges()`, a save, a
/// merge, an undo — arrive as one batch:
///
/// 1. ``controllerWillChangeContent(_:)``;
/// 2. ``controller(_:didChange:atSectionIndex:for:)`` for each section deleted (highest
///    index first), then inserted (lowest first);
/// 3. ``controller(_:didChange:at:for:newIndexPath:)`` for each object deleted (highest old
///    index path first), inserted, moved (lowest new index path first), then updated
///    (lowest old index path first);
/// 4. ``controllerDidChangeContent(_:)``.
///
/// Index paths follow UIKit's batch updates: `indexPath` is where the object was before the
/// batch (delete, move, update), `newIndexPath` where it is after it (insert, move,
/// update). The controller holds the new results by the time the first callback runs.
///
/// A delegate that implements ``controller(_:didChangeContentWith:)`` gets the batch as one
/// collection difference of object IDs instead, and none of the callbacks above — for a controller
/// without ``AnyFetchedResultsController/sectionNameKeyPath`` only, as in Core Data. The
/// controller knows whether the method is implemented because the protocol's default
/// implementation tells it so when it is called; an implementation in a subclass of a
/// class that conforms without it is not seen (Swift dispatches protocol requirements
/// through the conforming class), as for every other method here. Core Data's
/// diffable-snapshot callback (`didChangeContentWith snapshot:`) has no counterpart:
/// `NSDiffableDataSourceSnapshot` is UIKit/AppKit, which Linux doesn't have.
///
/// ```swift
/// final class TeamList: FetchedResultsControllerDelegate {
///     var rows: [String] = []
///     func controller(_ controller: AnyFetchedResultsController, didChange anObject: ManagedObject,
///                     at indexPath: IndexPath?, for type: FetchedResultsChangeType, newIndexPath: IndexPath?) {
///         print(type, indexPath as Any, newIndexPath as Any)
///     }
/// }
/// ```
public protocol FetchedResultsControllerDelegate: AnyObject {
    /// A batch of changes begins (`controllerWillChangeContent(_:)`): begin table updates here.
    func controllerWillChangeContent(_ controller: AnyFetchedResultsController)

    /// An object was inserted, deleted, moved or updated (`controller(_:didChange:at:for:newIndexPath:)`).
    ///
    /// - Parameters:
    ///   - anObject: the object (for a delete, the object that left, possibly deleted or invalidated).
    ///   - indexPath: where the object was before the batch (nil for an insert).
    ///   - type: what happened.
    ///   - newIndexPath: where the object is after the batch (nil for a delete).
    func controller(
        _ controller: AnyFetchedResultsController, didChange anObject: ManagedObject, at indexPath: IndexPath?,
        for type: FetchedResultsChangeType, newIndexPath: IndexPath?)

    /// A section was inserted or deleted (`controller(_:didChange:atSectionIndex:for:)`); the
    /// index is the section's before the batch for a delete, after it for an insert.
    func controller(
        _ controller: AnyFetchedResultsController, didChange sectionInfo: FetchedResultsSectionInfo, atSectionIndex sectionIndex: Int,
        for type: FetchedResultsChangeType)

    /// A batch of changes ended (`controllerDidChangeContent(_:)`): end table updates here.
    func controllerDidChangeContent(_ controller: AnyFetchedResultsController)

    /// The section index title of a section (`controller(_:sectionIndexTitleForSectionName:)`);
    /// the default is the controller's ``AnyFetchedResultsController/sectionIndexTitle(forSectionName:)``.
    /// Implementing it doesn't turn change tracking on.
    func controller(_ controller: AnyFetchedResultsController, sectionIndexTitleForSectionName sectionName: String) -> String?

    /// The batch as one difference from the object IDs shown before to those shown after
    /// (`controller(_:didChangeContentWith:)`, Core Data's `NSOrderedCollectionDifference`
    /// form): removals at offsets in the old list, insertions at offsets in the new one, a
    /// move as a removal and an insertion associated with each other.
    /// `oldIDs.applying(difference)` gives the new IDs. Called only for a controller without
    /// a section key path; when implemented, no other method of the delegate is called for
    /// it. An object whose ID changed (its temporary ID made permanent by a save or
    /// `obtainPermanentIDs(for:)`) appears as its old ID removed and its new ID inserted.
    func controller(_ controller: AnyFetchedResultsController, didChangeContentWith difference: CollectionDifference<ManagedObjectID>)
}

extension FetchedResultsControllerDelegate {
    /// Does nothing.
    public func controllerWillChangeContent(_ controller: AnyFetchedResultsController) {}

    /// Does nothing.
    public func controller(
        _ controller: AnyFetchedResultsController, didChange anObject: ManagedObject, at indexPath: IndexPath?,
        for type: FetchedResultsChangeType, newIndexPath: IndexPath?
    ) {}

    /// Does nothing.
    public func controller(
        _ controller: AnyFetchedResultsController, didChange sectionInfo: FetchedResultsSectionInfo, atSectionIndex sectionIndex: Int,
        for type: FetchedResultsChangeType
    ) {}

    /// Does nothing.
    public func controllerDidChangeContent(_ controller: AnyFetchedResultsController) {}

    /// The controller's default: the capitalized first letter of the name.
    public func controller(_ controller: AnyFetchedResultsController, sectionIndexTitleForSectionName sectionName: String) -> String? {
        controller.sectionIndexTitle(forSectionName: sectionName)
    }

    /// Not implemented: tells the controller to use the per-object callbacks instead.
    public func controller(_ controller: AnyFetchedResultsController, didChangeContentWith difference: CollectionDifference<ManagedObjectID>) {
        controller.differenceCallbackIsDefault = true
    }
}

// MARK: - The controller

/// What every ``FetchedResultsController`` is, whatever its result type — the controller a
/// delegate is handed (Core Data's `NSFetchedResultsController<NSFetchRequestResult>`).
///
/// Compare it with your own controller by identity (`controller === teams`), or cast it
/// (`controller as? FetchedResultsController<Team>`) for the typed API. It can't be created
/// on its own: create a ``FetchedResultsController``.
///
/// ## Topics
///
/// ### Configuration
/// - ``fetchRequest``
/// - ``managedObjectContext``
/// - ``sectionNameKeyPath``
/// - ``cacheName``
/// - ``delegate``
///
/// ### Results
/// - ``performFetch()``
/// - ``sections``
/// - ``sectionIndexTitles``
/// - ``section(forSectionIndexTitle:at:)``
/// - ``sectionIndexTitle(forSectionName:)``
public class AnyFetchedResultsController {
    /// The request whose results the controller shows (`fetchRequest`). It must have sort
    /// descriptors; its entity is `fetchRequest.entityName` (Core Data's `fetchRequest.entity`).
    ///
    /// A change takes effect at the next ``performFetch()`` — Core Data's way to filter a
    /// list as the user types; until then the controller goes on showing and tracking the
    /// results of the request it last fetched.
    ///
    /// ```swift
    /// teams.fetchRequest.predicate = try FormatPredicate(format: "name BEGINSWITH[c] %@", text)
    /// try teams.performFetch()
    /// ```
    ///
    /// Kept untyped (`FetchRequest<ManagedObject>`) whatever the controller's `Result`:
    /// the class of the objects is the controller's.
    public var fetchRequest: FetchRequest<ManagedObject>
    /// The context the controller fetches in and follows (`managedObjectContext`).
    ///
    /// Unlike Core Data's, the controller doesn't keep its context alive: it lives inside
    /// the context (used in its `perform`, or kept from one block to the next in its
    /// ``ManagedObjectContext/userInfo``), and a strong reference would make a controller
    /// kept there hold the context forever.
    public var managedObjectContext: ManagedObjectContext { context }
    /// The context, unowned (see ``managedObjectContext``).
    unowned let context: ManagedObjectContext
    /// The key path whose value names each object's section (`sectionNameKeyPath`), such as
    /// `"group"` or `"team.name"` (through to-one relationships); nil for one section
    /// holding every object. The first sort descriptor must order the sections:
    /// ``performFetch()`` throws when a section name comes back after another one began.
    public let sectionNameKeyPath: String?
    /// The name given for a section cache (`cacheName`). Kept for source compatibility:
    /// Strata keeps no on-disk section cache (see ``deleteCache(withName:)``).
    public let cacheName: String?

    /// Told of every batch of changes (`delegate`), held weakly. The controller tracks the
    /// context's changes only while it has a delegate (Core Data's rule); without one its
    /// results stay as they were fetched. A controller that missed changes that way
    /// catches up in its next batch after a delegate is set, by comparing a new fetch with
    /// what it shows.
    public weak var delegate: (any FetchedResultsControllerDelegate)? {
        didSet { delegateChanged() }
    }

    // MARK: Internal state

    /// The context's core (the controller lives in the context's isolation, as managed objects do).
    let core: ContextCore
    /// Whether an object is of the controller's result type.
    let accepts: (ManagedObject) -> Bool
    /// What ``performFetch()`` worked out from the request; nil until it succeeds.
    var plan: ResultsPlan?
    /// The sections, in order.
    var sectionList: [ResultsSection] = []
    /// The sections by name.
    var sectionsByName: [String: ResultsSection] = [:]
    /// Each section's index by name.
    var sectionIndexes: [String: Int] = [:]
    /// Every object shown, by identity: its sort position, section and the ID last reported.
    var entries: [ObjectIdentifier: ResultsEntry] = [:]
    /// Bumped whenever the results change (for caches of them).
    var contentVersion = 0
    /// Every object in order, made when first asked for after a change.
    var flatCache: (version: Int, objects: [ManagedObject])?
    /// Changes came while there was no delegate: the next batch compares a new fetch.
    var missedChanges = false
    /// Objects shown whose IDs changed since the last batch.
    var pendingIDChanges: [ObjectIdentifier: ManagedObject] = [:]
    /// Where unsaved inserts fall in store order (which breaks ties of the sort), by ID:
    /// group 1 for inserts in insertion order, 2 for objects restored by undo.
    var insertRanks: [ManagedObjectID: (group: Int, rank: Int)] = [:]
    var nextRank = 0
    /// The objects-did-change a merge posts after its did-merge, already handled with it.
    var expectedMergeChange: ObjectsDidChange?
    /// Whether a batch is being delivered (notifications posted meanwhile wait their turn).
    var isDelivering = false
    var queued: [(ContextNotification, [ManagedObjectID: ManagedObject])] = []
    /// Whether the current delegate implements the difference callback, once known.
    var differenceSupport: (delegate: ObjectIdentifier, implements: Bool)?
    /// Set by the protocol's default difference callback.
    var differenceCallbackIsDefault = false
    /// How many times an object was judged (placed by its values): what a batch costs.
    var evaluations = 0

    init(
        fetchRequest: FetchRequest<ManagedObject>, context: isolated ManagedObjectContext, sectionNameKeyPath: String?, cacheName: String?,
        accepts: @escaping (ManagedObject) -> Bool
    ) {
        self.fetchRequest = fetchRequest
        self.context = context
        self.sectionNameKeyPath = sectionNameKeyPath
        self.cacheName = cacheName
        core = context.core
        self.accepts = accepts
        core.changeTrackers.append(WeakChangeTracker(tracker: self))
    }

    deinit {
        // The context stops telling this controller (its weak entry reads nil by now).
        core.changeTrackers.removeAll { $0.tracker == nil }
    }

    // MARK: Fetching

    /// Runs the fetch request and makes its results the controller's (`performFetch()`).
    /// No delegate method is called. Call it again after changing what the request would
    /// select by other means than the context's objects (a batch request, say) or to start
    /// over.
    ///
    /// ```swift
    /// let teams = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
    /// try teams.performFetch()
    /// let first = teams.object(at: IndexPath(row: 0, section: 0))
    /// ```
    ///
    /// - Throws: ``ContextError/invalidFetchRequest(part:reason:)`` when the request has no
    ///   sort descriptors (Core Data requires them), its `resultType` isn't
    ///   `.managedObject`, a key path of the predicate, a sort descriptor or
    ///   ``sectionNameKeyPath`` names no property (or goes through a to-many
    ///   relationship), or the sections come out of the first sort descriptor's order
    ///   (naming the section names); ``ContextError/unknownEntity(_:)`` for an unknown
    ///   entity; the fetch's own errors. The results are left as they were.
    public func performFetch() throws {
        try ContextError.wrappingStoreFailures("the results controller's fetch of \(fetchRequest.entityName) failed") { try fetchAndInstall() }
    }

    // MARK: Sections

    /// The results' sections (`sections`); nil before ``performFetch()``. A controller
    /// without ``sectionNameKeyPath`` has one section, named `""`, even when it is empty.
    public var sections: [FetchedResultsSectionInfo]? {
        guard plan != nil else { return nil }
        return sectionList.map { FetchedResultsSectionInfo(name: $0.name, indexTitle: indexTitle(of: $0), objects: $0.objects) }
    }

    /// The section index titles (`sectionIndexTitles`): each section's index title, in
    /// section order, each title once. Empty before ``performFetch()``.
    public var sectionIndexTitles: [String] {
        var seen: Set<String> = []
        var titles: [String] = []
        for section in sectionList {
            if let title = indexTitle(of: section), seen.insert(title).inserted { titles.append(title) }
        }
        return titles
    }

    /// The section a section index entry goes to (`section(forSectionIndexTitle:at:)`): the
    /// first section whose index title is `title`. When none is (a title of your own), the
    /// section at `sectionIndex`, kept within the sections; 0 when there are none.
    public func section(forSectionIndexTitle title: String, at sectionIndex: Int) -> Int {
        if let found = sectionList.firstIndex(where: { indexTitle(of: $0) == title }) { return found }
        return max(0, min(sectionIndex, sectionList.count - 1))
    }

    /// The default section index title of a section (`sectionIndexTitle(forSectionName:)`):
    /// the capitalized first letter of its name; nil for an empty name. A delegate can give
    /// others with ``FetchedResultsControllerDelegate/controller(_:sectionIndexTitleForSectionName:)``.
    public func sectionIndexTitle(forSectionName sectionName: String) -> String? {
        guard let first = sectionName.first else { return nil }
        return String(first).uppercased()
    }

    /// Deletes a section cache (`deleteCache(withName:)`); nil for every cache. Strata keeps
    /// no on-disk cache of sections, so there is nothing to delete: Core Data's cache saves
    /// recomputing sections at launch from a SQLite fetch, while here ``performFetch()``
    /// computes them in the same pass that reads the objects, and a cache on disk could go
    /// stale behind the log's back. Kept so ported code compiles.
    public static func deleteCache(withName name: String?) {}

    // MARK: Type-erased access

    /// The object at `indexPath`, or nil when there is none there.
    func anyObject(at indexPath: IndexPath) -> ManagedObject? {
        guard indexPath.count == 2 else { return nil }
        let section = indexPath[0], row = indexPath[1]
        guard sectionList.indices.contains(section), sectionList[section].objects.indices.contains(row) else { return nil }
        return sectionList[section].objects[row]
    }

    /// Every object shown, in order.
    var allObjects: [ManagedObject] {
        if sectionList.count == 1 { return sectionList[0].objects }
        if let flatCache, flatCache.version == contentVersion { return flatCache.objects }
        let objects = sectionList.flatMap(\.objects)
        flatCache = (contentVersion, objects)
        return objects
    }

    /// Why `indexPath` names no object, for the trap of `object(at:)`.
    func outOfRange(_ indexPath: IndexPath) -> String {
        guard indexPath.count == 2 else { return "index path \(indexPath) has \(indexPath.count) indexes; a controller's have two (section, row)" }
        guard plan != nil else { return "object(at: \(indexPath)) before performFetch()" }
        let section = indexPath[0]
        guard sectionList.indices.contains(section) else {
            return "index path \(indexPath): section \(section) is out of range (the controller has \(sectionList.count) sections)"
        }
        return "index path \(indexPath): row \(indexPath[1]) is out of range (section \(section) has \(sectionList[section].objects.count) objects)"
    }
}

/// A fetch request's results as sections of objects, kept up to date as the context changes,
/// with a delegate told what changed — Core Data's `NSFetchedResultsController`, for a table
/// or list that shows managed objects.
///
/// Create it inside the context's `perform` (it lives in the context's isolation, like the
/// objects it holds), call ``performFetch()``, then read ``fetchedObjects``, ``sections`` and
/// ``object(at:)``. Set a ``delegate`` to have the results follow the context's inserts,
/// updates, deletes, undo and redo, rollback, `reset()`, merges and saves; each event's
/// changes arrive as one batch (spec 0006 §21).
///
/// ```swift
/// try await context.perform { context in
///     let request = FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "name")])
///     let teams = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
///     teams.delegate = teamList
///     try teams.performFetch()
///     let team = teams.object(at: IndexPath(row: 0, section: 0))
///     let newTeam = try context.insertNewObject(forEntityName: teams.fetchRequest.entityName)
///     newTeam.setValue("Crew", forKey: "name")
///     try context.save()                   // teamList hears of the insert at its index path
/// }
/// ```
///
/// `Result` is the request's class (`FetchRequest<Team>`, `Team.fetchRequest()`; an untyped
/// request gives `ManagedObject`), or a class registered for the entity named otherwise
/// (`FetchedResultsController<Team>(…)`, or `as: Team.self`); objects of other classes are
/// left out, as ``ManagedObjectContext/fetch(_:as:)`` leaves them out.
///
/// ## Topics
///
/// ### Creating a controller
/// - ``init(fetchRequest:managedObjectContext:sectionNameKeyPath:cacheName:)``
/// - ``init(fetchRequest:managedObjectContext:sectionNameKeyPath:cacheName:as:)``
///
/// ### Reading the results
/// - ``fetchedObjects``
/// - ``object(at:)``
/// - ``object(ifValidAt:)``
/// - ``indexPath(forObject:)``
public final class FetchedResultsController<Result: ManagedObject>: AnyFetchedResultsController {
    /// The typed objects, cached until the results change.
    private var typedCache: (version: Int, objects: [Result])?

    /// A controller of `fetchRequest`'s results in `managedObjectContext`
    /// (`init(fetchRequest:managedObjectContext:sectionNameKeyPath:cacheName:)`), with
    /// objects of the request's class, as Core Data's `NSFetchedResultsController<ResultType>`
    /// takes an `NSFetchRequest<ResultType>`. Nothing is fetched until ``performFetch()``;
    /// problems with the request are reported there.
    ///
    /// ```swift
    /// let teams = FetchedResultsController(fetchRequest: request, managedObjectContext: context)   // FetchRequest<ManagedObject>
    /// let players = FetchedResultsController(fetchRequest: Player.fetchRequest(), managedObjectContext: context,
    ///                                        sectionNameKeyPath: "team.name")   // FetchedResultsController<Player>
    /// ```
    public init(
        fetchRequest: FetchRequest<Result>, managedObjectContext: isolated ManagedObjectContext, sectionNameKeyPath: String? = nil,
        cacheName: String? = nil
    ) {
        super.init(
            fetchRequest: fetchRequest.erased, context: managedObjectContext, sectionNameKeyPath: sectionNameKeyPath, cacheName: cacheName,
            accepts: { $0 is Result })
    }

    /// A controller of `fetchRequest`'s results in `managedObjectContext`, with objects of
    /// class `Result` whatever the request's class (an untyped request shown typed).
    /// Nothing is fetched until ``performFetch()``; problems with the request are reported
    /// there.
    ///
    /// ```swift
    /// let players = FetchedResultsController(fetchRequest: request, managedObjectContext: context,
    ///                                        sectionNameKeyPath: "team.name", as: Player.self)
    /// ```
    public init<Fetched>(
        fetchRequest: FetchRequest<Fetched>, managedObjectContext: isolated ManagedObjectContext, sectionNameKeyPath: String? = nil,
        cacheName: String? = nil, as type: Result.Type = Result.self
    ) {
        super.init(
            fetchRequest: fetchRequest.erased, context: managedObjectContext, sectionNameKeyPath: sectionNameKeyPath, cacheName: cacheName,
            accepts: { $0 is Result })
    }

    /// The fetched objects in order, section after section (`fetchedObjects`); nil before
    /// ``performFetch()``.
    public var fetchedObjects: [Result]? {
        guard plan != nil else { return nil }
        if let typedCache, typedCache.version == contentVersion { return typedCache.objects }
        // Every object shown is a `Result` (others are never let in).
        let objects = allObjects.map { $0 as! Result }
        typedCache = (contentVersion, objects)
        return objects
    }

    /// The object at `indexPath` (`object(at:)`): section `indexPath[0]`, row `indexPath[1]`
    /// (`IndexPath(row:section:)`).
    ///
    /// An index path outside the results is a programmer error, as an out-of-range array
    /// subscript is: it stops the program with a message naming the index path and the
    /// sizes. Use ``object(ifValidAt:)`` when the index path may be stale.
    public func object(at indexPath: IndexPath) -> Result {
        guard let object = anyObject(at: indexPath) else { preconditionFailure(outOfRange(indexPath)) }
        return object as! Result
    }

    /// The object at `indexPath`, or nil when the results have no object there (or
    /// ``performFetch()`` hasn't run): ``object(at:)`` without the trap.
    public func object(ifValidAt indexPath: IndexPath) -> Result? {
        anyObject(at: indexPath).map { $0 as! Result }
    }

    /// Where `object` is in the results (`indexPath(forObject:)`), or nil when it isn't one
    /// of them. Found by a binary search of its section.
    public func indexPath(forObject object: Result) -> IndexPath? {
        location(of: object).map { IndexPath(indexes: [$0.section, $0.row]) }
    }
}

// MARK: - Index paths of sections and rows

#if !canImport(UIKit) && !canImport(AppKit)
extension IndexPath {
    /// An index path of a row in a section (UIKit's `IndexPath(row:section:)`, which
    /// Foundation on Linux lacks): `[section, row]`.
    ///
    /// ```swift
    /// let team = controller.object(at: IndexPath(row: 0, section: 0))
    /// ```
    public init(row: Int, section: Int) {
        self.init(indexes: [section, row])
    }

    /// The section of a two-index path (its first index; UIKit's `section`).
    public var section: Int {
        get { self[0] }
        set { self[0] = newValue }
    }

    /// The row of a two-index path (its second index; UIKit's `row`).
    public var row: Int {
        get { self[1] }
        set { self[1] = newValue }
    }
}
#endif
