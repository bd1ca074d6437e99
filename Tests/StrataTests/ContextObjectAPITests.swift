import Foundation
import Strata
import StrataModel
import StrataTestSupport
import Testing

// Spec 0006 §23: the context, managed-object, fetch request and coordinator API a Core Data
// port still missed, one section per member.

/// A league store (seed 004: `Team.players` cascades, `Player.team` nullifies; the log records
/// `Player.team`, so `Team.players` is derived): the Otters with three players and the Herons
/// with none. Returns the coordinator, the Otters, their players (by first name) and the Herons.
private func leagueWithPlayers(_ dir: TemporaryDirectory, classes: [(ManagedObject.Type, String)] = []) async throws
    -> (PersistentStoreCoordinator, team: ManagedObjectID, players: [String: ManagedObjectID], other: ManagedObjectID)
{
    let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager, classes: classes)
    let (team, players, other) = try await privateContext(coordinator).perform {
        (context: isolated ManagedObjectContext) throws -> (ManagedObjectID, [String: ManagedObjectID], ManagedObjectID) in
        let team = try context.insertNewObject(forEntityName: "Team")
        team.setValue("Otters", forKey: "name")
        team.setValue("blue", forKey: "uniformColor")
        var players: [String: ManagedObject] = [:]
        for name in ["Ada", "Bea", "Cy"] {
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(name, forKey: "firstName")
            player.setValue(team, forKey: "team")
            players[name] = player
        }
        let other = try context.insertNewObject(forEntityName: "Team")
        other.setValue("Herons", forKey: "name")
        try context.save()
        return (team.objectID, players.mapValues(\.objectID), other.objectID)
    }
    return (coordinator, team, players, other)
}

@Suite("Contexts: further context and object API (spec 0006 §23)")
struct ContextObjectAPITests {
    // MARK: retainsRegisteredObjects

    @Test("retainsRegisteredObjects: off, a fetched object the app drops is freed; on, the context keeps it (same instance, loaded) until reset or until it is turned off")
    func retainsRegisteredObjects() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await leagueWithPlayers(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let byName = try FetchRequest(entityName: "Team", format: "name == 'Otters'")
            let retainsByDefault = context.retainsRegisteredObjects
            #expect(!retainsByDefault, "off by default")

            // Off: memory follows what the app holds.
            weak var dropped: ManagedObject?
            do {
                let team = try #require(try context.fetch(byName).first)
                #expect(team.value(forKey: "name") as? String == "Otters")
                dropped = team
            }
            #expect(dropped == nil)
            #expect(context.registeredObject(for: teamID) == nil, "freed when the app let go")

            // On: the same object stays registered, with its values.
            context.retainsRegisteredObjects = true
            weak var kept: ManagedObject?
            do {
                let team = try #require(try context.fetch(byName).first)
                #expect(team.value(forKey: "name") as? String == "Otters")
                kept = team
            }
            let found = context.registeredObject(for: teamID)
            let registered = try #require(found, "kept by the context")
            #expect(registered === kept)
            #expect(!registered.isFault)
            #expect(context.registeredObjects.contains(registered))
        }
    }

    @Test("retainsRegisteredObjects: objects registered before it was turned on are kept too; turning it off and reset() let go of them")
    func retainsRegisteredObjectsRelease() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, players, otherID) = try await leagueWithPlayers(dir)
        let adaID = try #require(players["Ada"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            weak var team: ManagedObject?
            weak var other: ManagedObject?
            do {
                // Registered while off, held by the app when it is turned on.
                let held = try context.existingObject(with: teamID)
                team = held
                context.retainsRegisteredObjects = true
                other = try context.existingObject(with: otherID)
            }
            #expect(team != nil && context.registeredObject(for: teamID) === team, "registered before: kept")
            #expect(other != nil && context.registeredObject(for: otherID) === other)

            // A changed object is held (as always); the unchanged ones go when it is turned off.
            let ada = try context.existingObject(with: adaID)
            ada.setValue("Adah", forKey: "firstName")
            context.retainsRegisteredObjects = false
            #expect(team == nil && other == nil, "unchanged objects freed")
            #expect(context.registeredObject(for: teamID) == nil)
            #expect(context.registeredObject(for: adaID) === ada, "an object with changes stays")

            // reset() lets go of everything, and the setting stays on.
            context.retainsRegisteredObjects = true
            do { other = try context.existingObject(with: otherID) }
            #expect(other != nil)
            context.reset()
            #expect(other == nil, "freed by reset")
            #expect(context.registeredObject(for: otherID) == nil)
            let stillOn = context.retainsRegisteredObjects
            #expect(stillOn)
            do { other = try context.existingObject(with: otherID) }
            #expect(context.registeredObject(for: otherID) === other, "registered after the reset: kept again")
            #expect(other?.value(forKey: "name") as? String == "Herons")
        }
    }

    @Test("retainsRegisteredObjects keeps objects from one perform block to the next; a saved delete leaves the context")
    func retainsAcrossBlocks() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, players, _) = try await leagueWithPlayers(dir)
        let cyID = try #require(players["Cy"])
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            _ = try context.fetch(FetchRequest(entityName: "Player"))
            _ = try context.existingObject(with: teamID)
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let registeredTeam = context.registeredObject(for: teamID)
            let team = try #require(registeredTeam)
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect(context.registeredObjects.count == 4, "the team and its three players")
            let registeredCy = context.registeredObject(for: cyID)
            let cy = try #require(registeredCy)
            context.delete(cy)
            try context.save()
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.registeredObject(for: cyID) == nil, "a saved delete is no longer registered")
            #expect(context.registeredObjects.count == 3)
        }
    }
}
