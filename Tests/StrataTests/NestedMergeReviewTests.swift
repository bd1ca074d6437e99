import Foundation
@testable import Strata
import StrataTestSupport
import Testing

@Suite("Review 26: nested contexts, merging, notifications, fetched results controllers", .serialized)
struct NestedMergeReviewTests {
    @Test("a sibling's insert pushed into the parent reaches an automatically merging child's controller and observers")
    func siblingInsertReachesChildController() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let viewer = childContext(parent, name: "viewer")
        let editor = childContext(parent, name: "editor")
        final class Heard { var inserted: [String] = [] }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let (teams, delegate) = try followedTeams(context)
            context.userInfo["teams"] = teams
            context.userInfo["delegate"] = delegate
            let heard = Heard()
            context.userInfo["heard"] = heard
            _ = context.addObserver { change in
                guard case .didMerge = change.notification else { return }
                heard.inserted += change.insertedObjects.map { $0.value(forKey: "name") as? String ?? "nil" }
            }
            #expect(names(teams.fetchedObjects) == ["Otters"])
        }
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            try team(context, "Kites")
            try context.save()
        }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            let teams = try #require(context.userInfo["teams"] as? FetchedResultsController<ManagedObject>)
            let delegate = try #require(context.userInfo["delegate"] as? RecordingDelegate)
            let heard = try #require(context.userInfo["heard"] as? Heard)
            #expect(heard.inserted == ["Kites"], "the observer gets the parent's unsaved insert as a fault")
            #expect(names(teams.fetchedObjects) == ["Kites", "Otters"])
            #expect(delegate.last?.lines() == ["insert ->0.0 Kites"])
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
        // The parent's save makes the ID permanent: the controller keeps the same object.
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            let teams = try #require(context.userInfo["teams"] as? FetchedResultsController<ManagedObject>)
            let delegate = try #require(context.userInfo["delegate"] as? RecordingDelegate)
            #expect(names(teams.fetchedObjects) == ["Kites", "Otters"])
            #expect(teams.fetchedObjects?.allSatisfy { !$0.objectID.isTemporaryID } == true)
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }
}
