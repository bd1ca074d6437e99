import Foundation
import Strata
import StrataTestSupport
import Testing

/// Seeds 19, 29 and 30 of `UndoInsertLinkFixTests.randomizedLinksAndUndo` (150 steps), made
/// deterministic (spec 0006 §16.1): a team's players, a derived side read from the store,
/// agree with the players' teams after a merge, an undo and a redo.
@Suite("Randomized undo-and-link probe seeds: both sides agree")
struct MergeRebaseSeedFixTests {
    /// Alice puts a new player on her team and takes it off again (one group, open); Bob saves
    /// his player on the team; Alice's team, holding no change of its players, reads them from
    /// the store and lists it; she deletes it (same group) and saves; her undo puts Bob's
    /// player back on the team: the team lists it again (before, the group's entry of the
    /// team's players kept the members read first, none, and the undo set that).
    @Test("undoing a saved delete of a member another writer added while the group was open: the team lists it again")
    func undoDeleteOfMemberAddedWhileGroupOpen() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let alice = editor(coordinator), bob = privateContext(coordinator, name: "sync", author: "bob")
        let teamID = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            try context.save()
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(team, forKey: "team")
            player.setValue(nil, forKey: "team")
            return team.objectID
        }
        let playerID = try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
            return player.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            _ = try context.fetch(FetchRequest(entityName: "Player"))
            context.delete(try context.existingObject(with: playerID))
            try context.save()
            try context.undo()
            let player = try context.existingObject(with: playerID)
            #expect((player.value(forKey: "team") as? ManagedObject) === team)
            #expect(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).contains(player))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID), player = try context.existingObject(with: playerID)
            #expect((player.value(forKey: "team") as? ManagedObject) === team)
            #expect(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).contains(player))
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// Alice puts a new player on her team (the team's players read then, held as her
    /// change); Bob saves his player on the team; Alice reads Bob's player, takes it off the
    /// team (her team didn't list it: nothing to take out) and merges: the player keeps her
    /// change, so the team doesn't list it; undoing her changes puts it back on the team, which
    /// lists it (and only it), and redoing takes it off again.
    @Test("a member another writer added to a team held as a change, that the context took off the team before the merge: the team doesn't list it, undo and redo keep both sides agreeing")
    func mergedMemberTheContextTookOff() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let alice = editor(coordinator), bob = privateContext(coordinator, name: "sync", author: "bob")
        let teamID = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            try context.save()
            return team.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Player").setValue(try context.existingObject(with: teamID), forKey: "team")
        }
        let playerID = try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
            return player.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: playerID).setValue(nil, forKey: "team")
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID), player = try context.existingObject(with: playerID)
            func listed() -> Bool { ((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).contains(player) }
            func onTeam() -> Bool { (player.value(forKey: "team") as? ManagedObject) === team }
            _ = try context.mergeStoreChanges()
            #expect(!onTeam() && !listed())
            #expect(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).count == 1)
            // One group: the new player and the move.
            try context.undo()
            #expect(onTeam() && listed())
            #expect(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).count == 1)
            try context.redo()
            #expect(!onTeam() && !listed())
            #expect(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).count == 1)
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID), player = try context.existingObject(with: playerID)
            #expect(player.value(forKey: "team") == nil)
            #expect(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).count == 1)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// Bob saves a team; Alice reads it and puts a new player on it (the team's players read
    /// then, held as her change); Bob saves his player on the team; Alice merges both of Bob's
    /// saves at once: the team — inserted by them, registered here since — lists Bob's player
    /// with hers (before, an object the merged transactions inserted wasn't refreshed).
    @Test("an object another writer inserted, registered here since, is refreshed by the merge: a team held as a change lists the player the other writer put on it")
    func insertedElsewhereRegisteredHereIsRefreshed() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let alice = editor(coordinator), bob = privateContext(coordinator, name: "sync", author: "bob")
        try await alice.perform { (context: isolated ManagedObjectContext) throws in _ = try context.mergeStoreChanges() }
        let teamID = try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            try context.save()
            return team.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Player").setValue(try context.existingObject(with: teamID), forKey: "team")
        }
        let playerID = try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
            return player.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID), player = try context.existingObject(with: playerID)
            _ = try context.mergeStoreChanges()
            let members = (team.value(forKey: "players") as? Set<ManagedObject>) ?? []
            #expect(members.count == 2 && members.contains(player))
            try context.undo()
            #expect(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []) == [player])
            try context.redo()
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(((try context.existingObject(with: teamID).value(forKey: "players") as? Set<ManagedObject>) ?? []).count == 2)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// Seed 142: Alice puts a new player on her team (the team's players read then, held as
    /// her change); Bob saves his player on the team; Alice deletes Bob's player — her team
    /// doesn't list it: nothing to take out — and saves; her undo brings the player back on
    /// the team: the team lists it again (before, the group held no trace of it, and the team
    /// didn't list the player naming it).
    @Test("undoing a saved delete of a member the context's held derived side didn't list: the team lists it again")
    func undoDeleteOfMemberHeldSideDidntList() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let alice = editor(coordinator), bob = privateContext(coordinator, name: "sync", author: "bob")
        let teamID = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            try context.save()
            return team.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Player").setValue(try context.existingObject(with: teamID), forKey: "team")
        }
        let playerID = try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
            return player.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: playerID))
            try context.save()
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            func members() -> Set<ManagedObjectID> { Set(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).map(\.objectID)) }
            try context.undo()
            let player = try context.existingObject(with: playerID)
            #expect((player.value(forKey: "team") as? ManagedObject) === team)
            #expect(members().contains(playerID), "\(members())")
            _ = try context.mergeStoreChanges()
            #expect(members().contains(playerID), "\(members())")
            try context.redo()
            #expect(members().contains(playerID) == false, "\(members())")
            try context.undo()
            #expect(members().contains(playerID), "\(members())")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID), player = try context.existingObject(with: playerID)
            #expect((player.value(forKey: "team") as? ManagedObject) === team)
            #expect(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).contains(player))
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// Seed 142 again, with a merge between the delete and the save: the merge brings Bob's
    /// player into the team's players held as a change; the player is deleted here, so the
    /// team doesn't take it in (before, it did — in the group's value after the delete too —
    /// and undoing the saved delete took the player off the team it named).
    @Test("a member deleted here that a merge finds on a team held as a change: not taken in; undoing the saved delete lists it again")
    func mergedMemberDeletedHereNotTakenIn() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let alice = editor(coordinator), bob = privateContext(coordinator, name: "sync", author: "bob")
        let teamID = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            try context.save()
            return team.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Player").setValue(try context.existingObject(with: teamID), forKey: "team")
        }
        let playerID = try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
            return player.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            func members() -> Set<ManagedObjectID> { Set(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).map(\.objectID)) }
            context.delete(try context.existingObject(with: playerID))
            _ = try context.mergeStoreChanges()
            #expect(members().contains(playerID) == false, "\(members())")
            try context.save()
            try context.undo()
            let player = try context.existingObject(with: playerID)
            #expect((player.value(forKey: "team") as? ManagedObject) === team)
            #expect(members().contains(playerID), "\(members())")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID), player = try context.existingObject(with: playerID)
            #expect((player.value(forKey: "team") as? ManagedObject) === team)
            #expect(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).contains(player))
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// Seed 176: Bob saves a team and puts a new player on it (the team's players read then,
    /// held as his change, open group); Alice saves her player on the team; Bob takes her
    /// player off the team (his team didn't list it: the group's first old value of the side
    /// takes it in); Alice undoes her saved insert and saves; Bob merges the delete and undoes
    /// his group: the team doesn't list the deleted player (before, the group's old value of
    /// the side still named it, and the undo put it back on the team, on no team itself).
    @Test("a member deleted elsewhere, merged, that an unsaved group's derived side names: undoing the group doesn't list it")
    func mergedDeleteOfMemberUnsavedGroupNames() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let alice = editor(coordinator), bob = privateContext(coordinator, name: "sync", author: "bob")
        let teamID = try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            try context.save()
            return team.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Player").setValue(try context.existingObject(with: teamID), forKey: "team")
        }
        try await bob.perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Player").setValue(try context.existingObject(with: teamID), forKey: "team")
        }
        let playerID = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            try context.save()
            return try #require(try context.fetch(FetchRequest(entityName: "Player")).first).objectID
        }
        try await bob.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: playerID).setValue(nil, forKey: "team")
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            try context.save()
        }
        try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            func members() -> Set<ManagedObjectID> { Set(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).map(\.objectID)) }
            _ = try context.mergeStoreChanges()
            try context.undo()
            #expect(members().isEmpty, "\(members())")
            _ = try context.mergeStoreChanges()
            #expect(members().isEmpty, "\(members())")
            try context.redo()
            #expect(members().count == 1 && members().contains(playerID) == false, "\(members())")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let players = try context.fetch(FetchRequest(entityName: "Player"))
            #expect(players.count == 1)
            #expect(((try context.existingObject(with: teamID).value(forKey: "players") as? Set<ManagedObject>) ?? []) == Set(players))
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// Seed 309: Bob saves a player on no team and a team; Alice puts a new player on the
    /// team (the team's players read then: none); Bob puts his player on the team and saves;
    /// Alice undoes her player (unsaved), reads Bob's player and moves it to a new team of
    /// hers, and merges: the team doesn't list the player she moved away.
    @Test("a member moved away here after another writer put it on a team read before: after the merge the team doesn't list it")
    func memberMovedAwayFromTeamReadBefore() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let alice = editor(coordinator), bob = privateContext(coordinator, name: "sync", author: "bob")
        let (playerID, teamID) = try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            let team = try context.insertNewObject(forEntityName: "Team")
            try context.save()
            return (player.objectID, team.objectID)
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Player").setValue(try context.existingObject(with: teamID), forKey: "team")
        }
        try await bob.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: playerID).setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            func members() -> Set<ManagedObjectID> { Set(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).map(\.objectID)) }
            try context.undo()
            let own = try context.insertNewObject(forEntityName: "Team")
            let player = try context.existingObject(with: playerID)
            player.setValue(own, forKey: "team")
            _ = try context.mergeStoreChanges()
            #expect(members().isEmpty, "\(members())")
            #expect(((own.value(forKey: "players") as? Set<ManagedObject>) ?? []) == [player])
            try context.undo()
            #expect((player.value(forKey: "team") as? ManagedObject) === team)
            #expect(members() == [playerID], "\(members())")
            try context.redo()
            #expect(members().isEmpty, "\(members())")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(((try context.existingObject(with: teamID).value(forKey: "players") as? Set<ManagedObject>) ?? []).isEmpty)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
    /// Seed 438 of `UndoInsertLinkFixTests.randomizedLinksAndUndo` (150 steps): Bob saves a
    /// team; Alice saves her player on it and deletes it, saved; Bob puts his new player on
    /// the team (unsaved); Alice undoes the delete (pending: her player is back on the team);
    /// Bob saves; Alice moves both players to her new team and merges. The team must list
    /// neither: both name Alice's new team.
    @Test("a member a pending undo put back and another writer's new member, both moved to a new team here, then merged: the old team lists neither")
    func pendingUndoMemberAndMergedMemberMovedAway() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let alice = editor(coordinator), bob = privateContext(coordinator, name: "sync", author: "bob")
        let teamID = try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("T1", forKey: "name")
            try context.save()
            return team.objectID
        }
        let firstID = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("P1", forKey: "name")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
            context.delete(player)
            try context.save()
            return player.objectID
        }
        try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("P2", forKey: "name")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let fan = try context.insertNewObject(forEntityName: "Fan")
            fan.setValue(try context.existingObject(with: teamID), forKey: "favorite")
            try context.undo()
            try context.undo()
            #expect((try context.existingObject(with: firstID).value(forKey: "team") as? ManagedObject)?.objectID == teamID)
        }
        let secondID = try await bob.perform { (context: isolated ManagedObjectContext) throws in
            try context.save()
            return try #require(try context.fetch(FetchRequest(entityName: "Player")).first).objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            let other = try context.insertNewObject(forEntityName: "Team")
            other.setValue("T2", forKey: "name")
            let players = try context.fetch(FetchRequest(entityName: "Player"))
            #expect(Set(players.map(\.objectID)) == [firstID, secondID])
            try context.existingObject(with: secondID).setValue(other, forKey: "team")
            try context.existingObject(with: firstID).setValue(other, forKey: "team")
            _ = try context.mergeStoreChanges()
            #expect(Self.playerIDs(team).isEmpty, "\(Self.playerIDs(team))")
            #expect(Self.playerIDs(other) == [firstID, secondID], "\(Self.playerIDs(other))")
            try context.save()
            #expect(Self.playerIDs(team).isEmpty, "\(Self.playerIDs(team))")
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(Self.playerIDs(try context.existingObject(with: teamID)).isEmpty)
            for id in [firstID, secondID] {
                #expect((try context.existingObject(with: id).value(forKey: "team") as? ManagedObject).map { Self.playerIDs($0) } == [firstID, secondID])
            }
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    private static func playerIDs(_ team: ManagedObject) -> Set<ManagedObjectID> {
        Set(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).map(\.objectID))
    }
}
