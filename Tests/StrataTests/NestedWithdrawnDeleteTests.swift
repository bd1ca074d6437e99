import Foundation
import Strata
import StrataTestSupport
import Testing

/// A child's undo of a delete it pushed, after the parent dropped that deletion itself (a
/// rollback or an undo there): the push finds the stored object live in the parent, and sets
/// the child's values on it (spec 0006 §18.3). Before, the push was refused ("the parent
/// context already has …") when the parent held the object, and otherwise inserted it again,
/// so the parent's save was refused ("object … already exists").
@Suite("Nested: a child's undone delete over the parent's withdrawn one", .serialized)
struct NestedWithdrawnDeleteTests {
    /// Seeds 73 and 51 of `NestedContextProbeTests` at 100 steps, shrunk: a stored team T; C
    /// deletes T and pushes (R has T deleted, unsaved); C undoes the delete (a pending insert
    /// of T under its permanent ID); R rolls back, or undoes the push (T live in R again); C
    /// pushes, R saves.
    @Test(
        "C deletes a stored team and pushes, then undoes the delete; R rolls back or undoes the push, holding the team or not; C's push and R's save go through, and the team keeps C's values",
        arguments: [(rollback: true, held: false), (rollback: true, held: true), (rollback: false, held: false), (rollback: false, held: true)])
    func undoneDeleteOverWithdrawnDeletion(rollback: Bool, held: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try NestedContextProbeTests.probeModel)
        let root = privateContext(coordinator, name: "R")
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: root, name: "C")
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("T", forKey: "name")
            try context.save()
            context.removeAllUndoActions()
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(try context.fetch(FetchRequest(entityName: "Team")).first)
            team.setValue("Tc", forKey: "name")
            context.processPendingChanges()
            context.delete(team)
            try context.save()
            try context.undo()
            #expect(context.hasChanges == true, "C's undo of its pushed delete is pending")
        }
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(context.deletedObjects.first)
            if held { context.userInfo["team"] = team }
            if rollback {
                context.rollback()
            } else {
                try context.undo()
            }
            #expect(context.hasChanges == false)
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(try context.fetch(FetchRequest(entityName: "Team")).first)
            #expect(team.value(forKey: "name") as? String == "Tc")
            try context.save()
        }
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            let teams = try context.fetch(FetchRequest(entityName: "Team"))
            #expect(teams.count == 1 && teams.first?.value(forKey: "name") as? String == "Tc", "R: \(teams.map { $0.value(forKey: "name") ?? "-" })")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let teams = try context.fetch(FetchRequest(entityName: "Team"))
            #expect(teams.map { $0.value(forKey: "name") as? String } == ["Tc"])
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// Seed 97 of `NestedContextProbeTests` at 100 steps, shrunk: C deletes a stored player P,
    /// unsaved; R makes P team T's captain (`Player.captainOf` recorded, `Team.captain`
    /// derived), unsaved; C pushes the delete (R's delete rule takes T's captain away); C
    /// undoes the delete and pushes. Before, R's P was no longer deleted but still captained
    /// T, whose captain was none, and R's save wrote P's captaincy.
    @Test("C deletes a stored player; R pairs it with a team, unsaved; C pushes the delete, undoes it and pushes again: in R the player captains nothing and the team has no captain, and R's save and a fresh context agree")
    func withdrawnDeletionTakesTheChildsValues() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try NestedContextProbeTests.probeModel)
        let root = privateContext(coordinator, name: "R")
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: root, name: "C")
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("T", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("P", forKey: "name")
            try context.save()
            context.removeAllUndoActions()
            context.userInfo["team"] = team
            context.userInfo["player"] = player
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let player = try #require(try context.fetch(FetchRequest(entityName: "Player")).first)
            context.delete(player)
        }
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            let player = try #require(context.userInfo["player"] as? ManagedObject)
            let team = try #require(context.userInfo["team"] as? ManagedObject)
            player.setValue(team, forKey: "captainOf")
            #expect(team.value(forKey: "captain") as? ManagedObject === player)
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try context.save()
            try context.undo()
            try context.save()
        }
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            let player = try #require(context.userInfo["player"] as? ManagedObject)
            let team = try #require(context.userInfo["team"] as? ManagedObject)
            #expect(player.isDeleted == false)
            let captainOf = player.value(forKey: "captainOf") as? ManagedObject
            let captain = team.value(forKey: "captain") as? ManagedObject
            #expect(captainOf == nil, "R: P captains \(String(describing: captainOf?.value(forKey: "name"))), T's captain is \(String(describing: captain?.value(forKey: "name")))")
            #expect(captain == nil)
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let teams = try context.fetch(FetchRequest(entityName: "Team"))
            let players = try context.fetch(FetchRequest(entityName: "Player"))
            #expect(teams.count == 1 && teams.first?.value(forKey: "captain") == nil)
            #expect(players.count == 1 && players.first?.value(forKey: "captainOf") == nil)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}
