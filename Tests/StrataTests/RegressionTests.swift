import Foundation
@testable import Strata
import StrataTestSupport
import Testing

@Suite("Contexts: regressions from review and benchmarking")
struct RegressionTests {
    @Test("refresh drops a fetched-but-unread row, so the object shows the store's newer value")
    func refreshDropsStaleRow() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let reader = privateContext(coordinator)
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.fetch(FetchRequest(entityName: "Team")).count == 1)  // row cached, not read
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Newer", forKey: "name")
            try context.save()
        }
        for merge in [false, true] {
            let name = try await reader.perform { (context: isolated ManagedObjectContext) throws in
                let team = try context.object(with: teamID)
                context.refresh(team, mergeChanges: merge)
                return team.value(forKey: "name") as? String
            }
            #expect(name == "Newer", "mergeChanges: \(merge)")
        }
    }

    @Test("the registry forgets released objects, so iterating many IDs doesn't grow it without bound")
    func registryPrunes() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let size = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let store = try #require(coordinator.persistentStores.first).identifier
            for pk in 1...20_000 as ClosedRange<UInt64> {
                _ = try context.object(with: .permanent(StoredObjectID(entity: "Team", primaryKey: pk), store: store))
            }
            return context.core.registry.count
        }
        // Each object takes its entry out as it is deallocated: nothing is left.
        #expect(size == 0, "registry holds \(size) entries for released objects")
    }

    @Test("registry entries follow their objects: fetched objects held are found again, released ones leave, a reset's survivors don't evict new instances")
    func registryEntriesFollowObjects() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var held: ManagedObject? = try context.fetch(FetchRequest(entityName: "Team")).first
            #expect(held != nil)
            #expect(context.core.registry.count == 1)
            // The same instance while the app holds it (one object per ID per context).
            #expect(try context.existingObject(with: teamID) === held)
            // After a reset the old instance lives on, removed from the context; a new one
            // is registered under the same ID, and the old one's release leaves it in place.
            context.reset()
            let fresh = try context.existingObject(with: teamID)
            #expect(fresh !== held)
            #expect(held?.managedObjectContext == nil)
            held = nil
            #expect(context.core.registry.count == 1)
            #expect(context.registeredObject(for: teamID) === fresh)
            #expect(fresh.value(forKey: "name") as? String != nil)
        }
    }

    @Test("unordered to-many values stay canonical when members are added one by one")
    func canonicalMembership() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            var players: [ManagedObject] = []
            for index in 0..<50 {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("P\(index)", forKey: "lastName")
                player.setValue(team, forKey: "team")
                players.append(player)
            }
            #expect((team.value(forKey: "players") as? Set<ManagedObject>) == Set(players))
            try context.save()
            let members = team.mutableSetValue(forKey: "players")
            members.remove(players[7])
            members.add(players[7])
            context.processPendingChanges()
            #expect(team.hasChanges == false)
        }
    }
}
