import Foundation
@testable import Strata
import StrataPredicate
import StrataTestSupport
import Testing

/// A team whose `value(forKey: "name")` gives the name backwards — an override Core Data
/// forbids ("You must not override this method"), which a fetch consults for changed objects
/// only (spec 0008, Sort order).
final class BackwardsTeam: ManagedObject {
    override func value(forKey key: String) -> Any? {
        let value = super.value(forKey: key)
        guard key == "name", let name = value as? String else { return value }
        return String(name.reversed())
    }
}

/// Session 30 (helper 5): the storage layer's save error as the context's, a results
/// controller's order with a class overriding `value(forKey:)`, sorts folding each key once,
/// bare deep predicate trees let go without recursion, a child's undo conflict naming the
/// parent, and a to-one rebased at a merge keeping its place in an ordered list.
@Suite("Session 30: save errors, controller order, folded sorts, deep trees, child conflicts, ordered rebase", .serialized)
struct EdgeFix30Tests {
    // MARK: - 1. A save into a store whose data file was deleted while open

    @Test("a save into a store deleted while open throws the context's save error (ContextError.store, 256) naming the path and STRATA_DATA_FILE_GONE (before: the storage layer's LMDBError escaped save())")
    func deletedStoreSaveIsContextError() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let path = dir.url.appendingPathComponent("store").path
        try FileManager.default.removeItem(atPath: path)
        let (error, stillChanged) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Team").setValue("Lost", forKey: "name")
            do {
                try context.save()
                return (nil as (any Error)?, context.hasChanges)
            } catch {
                return (error as (any Error)?, context.hasChanges)
            }
        }
        let thrown = try #require(error, "the save went through into a deleted store")
        let contextError = try #require(thrown as? ContextError, "not the context's error: \(type(of: thrown)) \(thrown)")
        guard case .store(let text) = contextError else {
            Issue.record("not ContextError.store: \(contextError)")
            return
        }
        #expect(contextError.code == 256)
        #expect(text.contains("\(path)/data.mdb is gone"), "\(text)")
        #expect(text.contains("STRATA_DATA_FILE_GONE"), "\(text)")
        #expect(text.contains("nothing was written"), "\(text)")
        #expect(stillChanged, "the context keeps its changes")
    }

    // MARK: - 2. A results controller's order with a class overriding value(forKey:)

    @Test("a results controller sorted by a key a registered class's value(forKey:) overrides orders its results as a plain fetch does, loaded, faults and changed alike (before: loaded results were keyed through the override and re-sorted)")
    func controllerOrderMatchesFetchWithOverride() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager, classes: [(BackwardsTeam.self, "Team")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Stored order by name: Ab, Ba, Cd, Dc; backwards: bA, aB, dC, cD (aB, bA, cD, dC).
            for name in ["Dc", "Ab", "Cd", "Ba"] {
                try context.insertNewObject(forEntityName: "Team").setValue(name, forKey: "name")
            }
            try context.save()
        }
        var storedOrder: [ManagedObjectID]?
        for loaded in [false, true] {
            for changed in [false, true] {
                let (shown, fetched) = try await privateContext(coordinator).perform {
                    (context: isolated ManagedObjectContext) throws -> ([ManagedObjectID], [ManagedObjectID]) in
                    let request = FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "name")])
                    let all = try context.fetch(request)
                    if loaded { for team in all { _ = team.value(forKey: "uniformColor") } }
                    if changed, let first = all.first { first.setValue("Red", forKey: "uniformColor") }
                    let fetched = try context.fetch(request).map(\.objectID)
                    let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil)
                    try controller.performFetch()
                    let shown = try #require(controller.fetchedObjects).map(\.objectID)
                    withExtendedLifetime(all) {}
                    return (shown, fetched)
                }
                #expect(shown == fetched, "loaded \(loaded), changed \(changed): controller \(shown), fetch \(fetched)")
                #expect(fetched.count == 4)
                // Without changes, the stored values' order (Ab, Ba, Cd, Dc), which faults have.
                if !changed {
                    if let storedOrder { #expect(shown == storedOrder, "the stored values' order, loaded \(loaded)") } else { storedOrder = shown }
                }
            }
        }
    }
}
