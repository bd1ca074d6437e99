import Foundation
@testable import Strata
import StrataPredicate
import StrataTestSupport
import Testing

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
}
