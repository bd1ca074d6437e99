import Foundation
import Strata
import StrataTestSupport
import Testing

/// A merged delete of an object the context paired through a one-to-one's derived side
/// (spec 0006 §16.1 step 4): the context's unsaved pairing goes with the object, in the
/// context that merged (a root) and in its child, and in the unsaved undo groups.
@Suite("Merged delete of a one-to-one partner", .serialized)
struct MergedDeleteOneToOneTests {
    /// Seeds 7 and 30 of `NestedContextProbeTests` at 100 steps, shrunk: R makes P team T's
    /// captain (`Player.captainOf` is the recorded side, `Team.captain` derived), unsaved,
    /// then renames P; B deletes P and saves; R merges. Before, T's captain was P invalidated
    /// (an object with no values) in R and in its child C, and redoing R's group set it again.
    @Test("R pairs a stored team with a stored player, unsaved; another context deletes the player and saves; after R merges, the team has no captain in R and in R's child, undo and redo leave it none, and R's save and a fresh context agree")
    func mergedDeleteDropsDerivedOneToOne() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try NestedContextProbeTests.probeModel)
        let root = privateContext(coordinator, name: "R")
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: root, name: "C")
        let other = privateContext(coordinator, name: "B")
        await child.perform { (context: isolated ManagedObjectContext) in context.automaticallyMergesChangesFromParent = true }
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("T", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("P", forKey: "name")
            try context.save()
            context.processPendingChanges()
            context.removeAllUndoActions()
            team.setValue(player, forKey: "captain")
            player.setValue("Pr", forKey: "name")
            context.processPendingChanges()
            context.userInfo["team"] = team
        }
        // The child holds the team, read through R (its captain P, unsaved there).
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(try context.fetch(FetchRequest(entityName: "Team")).first)
            #expect((team.value(forKey: "captain") as? ManagedObject)?.value(forKey: "name") as? String == "Pr")
            context.userInfo["team"] = team
        }
        try await other.perform { (context: isolated ManagedObjectContext) throws in
            let player = try #require(try context.fetch(FetchRequest(entityName: "Player")).first)
            context.delete(player)
            try context.save()
        }
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            let team = try #require(context.userInfo["team"] as? ManagedObject)
            #expect(team.value(forKey: "captain") == nil, "R: the team's captain is the deleted player, no values: \(String(describing: team.value(forKey: "captain")))")
            if context.canUndo {
                try context.undo()
                #expect(team.value(forKey: "captain") == nil, "R after undo")
                try context.redo()
                #expect(team.value(forKey: "captain") == nil, "R after redo")
            }
        }
        await root.perform { (_: isolated ManagedObjectContext) in }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(context.userInfo["team"] as? ManagedObject)
            #expect(team.value(forKey: "captain") == nil, "C: the team's captain is the deleted player")
        }
        try await root.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let teams = try context.fetch(FetchRequest(entityName: "Team"))
            #expect(teams.count == 1 && teams.first?.value(forKey: "captain") == nil)
            #expect(try context.fetch(FetchRequest(entityName: "Player")).isEmpty)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}
