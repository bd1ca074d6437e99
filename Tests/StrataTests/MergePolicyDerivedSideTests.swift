import Foundation
import Strata
import StrataTestSupport
import Testing

/// A merge policy's adoption of the store's state (spec 0006 §17.1 step 4) and a derived
/// to-many (a team's players) held as a change: the store's members it takes in follow the
/// members' own to-ones, as at a merge (§16.1).
@Suite("Merge policy adoption: a derived to-many held as a change agrees with its members' to-ones")
struct MergePolicyDerivedSideTests {
    /// Alice renames her team and puts a new player on it (the team's players read then, held
    /// as her change); Bob renames the team and puts his saved player on it; Alice reads that
    /// player (Bob's version: no conflict of its own) and moves it to her other team — her
    /// team, read before, doesn't list it: nothing to take out. Her save conflicts on the
    /// team; the policy adopts the store's state, whose players list Bob's: the team must not
    /// list the player Alice moved away. Undo and redo keep both sides agreeing, and the
    /// store has what Alice saved.
    @Test("the policy's adoption of a team held as a change doesn't list the member the context moved elsewhere", arguments: [false, true])
    func adoptionSkipsMemberMovedElsewhere(storeTrump: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let alice = editor(coordinator), bob = privateContext(coordinator, name: "sync", author: "bob")
        let (teamID, otherID, playerID) = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team"), other = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Tigers", forKey: "name")
            other.setValue("Owls", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Pat", forKey: "name")
            try context.save()
            context.removeAllUndoActions()
            return (team.objectID, other.objectID, player.objectID)
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            context.refreshAllObjects()
            let team = try context.existingObject(with: teamID)
            _ = team.value(forKey: "players")
            team.setValue("Tigers 2", forKey: "name")
            let rookie = try context.insertNewObject(forEntityName: "Player")
            rookie.setValue("Rae", forKey: "name")
            rookie.setValue(team, forKey: "team")
        }
        try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Tigers B", forKey: "name")
            try context.existingObject(with: playerID).setValue(team, forKey: "team")
            try context.save()
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = storeTrump ? .mergeByPropertyStoreTrump : .mergeByPropertyObjectTrump
            let team = try context.existingObject(with: teamID), other = try context.existingObject(with: otherID)
            let player = try context.existingObject(with: playerID)
            context.processPendingChanges()
            player.setValue(other, forKey: "team")
            func members(_ object: ManagedObject) -> Set<ManagedObjectID> {
                Set(((object.value(forKey: "players") as? Set<ManagedObject>) ?? []).map(\.objectID))
            }
            func agree() -> Bool {
                (player.value(forKey: "team") as? ManagedObject) === other && !members(team).contains(playerID) && members(other).contains(playerID)
            }
            try context.save()
            #expect(agree(), "team \(members(team)), other \(members(other))")
            #expect(members(team).count == 1)
            try context.undo()  // the move
            #expect((player.value(forKey: "team") as? ManagedObject) === team)
            #expect(members(team).contains(playerID) && !members(other).contains(playerID), "team \(members(team)), other \(members(other))")
            try context.redo()
            #expect(agree(), "team \(members(team)), other \(members(other))")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.existingObject(with: playerID)
            #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == otherID)
            #expect(((try context.existingObject(with: teamID).value(forKey: "players") as? Set<ManagedObject>) ?? []).count == 1)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}
