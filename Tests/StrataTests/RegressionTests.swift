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

    @Test("filling a to-many through its inverse, member by member, keeps it right for a saved owner with undo on, with undo off, and for an owner inserted in the group")
    func inverseFillInPlace() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        // The saved team starts with 10 saved players.
        let original = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> Set<ManagedObjectID> in
            let team = try context.existingObject(with: teamID)
            let players = try (0..<10).map { index in
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("S\(index)", forKey: "lastName")
                player.setValue(team, forKey: "team")
                return player
            }
            try context.save()
            return Set(players.map(\.objectID))
        }
        @Sendable func members(_ team: ManagedObject) -> Set<ManagedObjectID> {
            Set(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).map(\.objectID))
        }
        for undoEnabled in [true, false] {
            let expected = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> Set<ManagedObjectID> in
                context.isUndoEnabled = undoEnabled
                let team = try context.existingObject(with: teamID)
                let rivals = try context.insertNewObject(forEntityName: "Team")
                rivals.setValue("Rivals \(undoEnabled)", forKey: "name")
                // Objects, not IDs: the save turns temporary IDs into permanent ones.
                var expected: [ObjectIdentifier: ManagedObject] = [:]
                for id in members(team) {
                    let member = try context.existingObject(with: id)
                    expected[ObjectIdentifier(member)] = member
                }
                #expect(expected.count >= 10)
                func expectedIDs() -> Set<ManagedObjectID> { Set(expected.values.map(\.objectID)) }
                var added: [ManagedObject] = []
                for index in 0..<300 {
                    let player = try context.insertNewObject(forEntityName: "Player")
                    player.setValue("N\(index)", forKey: "lastName")
                    player.setValue(team, forKey: "team")
                    added.append(player)
                    expected[ObjectIdentifier(player)] = player
                }
                // Some move to the inserted team, some leave, one is set twice.
                var rivalMembers: Set<ManagedObjectID> = []
                for player in added[0..<40] {
                    player.setValue(rivals, forKey: "team")
                    expected[ObjectIdentifier(player)] = nil
                    rivalMembers.insert(player.objectID)
                }
                for player in added[40..<60] {
                    player.setValue(nil, forKey: "team")
                    expected[ObjectIdentifier(player)] = nil
                }
                added[60].setValue(team, forKey: "team")
                for id in original.prefix(3) {
                    let player = try context.existingObject(with: id)
                    player.setValue(rivals, forKey: "team")
                    expected[ObjectIdentifier(player)] = nil
                    rivalMembers.insert(id)
                }
                #expect(members(team) == expectedIDs())
                #expect(members(rivals) == rivalMembers)
                #expect(added[0].value(forKey: "team") as? ManagedObject === rivals)
                if undoEnabled {
                    // Undo takes the team back to its saved members; redo brings the group back.
                    context.processPendingChanges()
                    try context.undo()
                    #expect(members(team) == original)
                    #expect(!team.hasChanges)
                    try context.redo()
                    #expect(members(team) == expectedIDs())
                    #expect(members(rivals) == rivalMembers)
                }
                try context.save()
                return expectedIDs()
            }
            // What was saved, read back in a new context.
            let stored = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> Set<ManagedObjectID> in
                members(try context.existingObject(with: teamID))
            }
            #expect(stored == expected, "undo enabled: \(undoEnabled)")
            // 10 saved players, 3 of them moved away, 240 of the 300 new ones kept; then 240 more
            // (the 3 had already left).
            #expect(stored.count == (undoEnabled ? 247 : 487))
        }
    }

    @Test("temporary IDs are version-4-shaped UUIDs, distinct, and increase in the order objects are inserted")
    func temporaryIDsIncrease() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try (0..<1_000).map { _ in try context.insertNewObject(forEntityName: "Player").objectID }
        }
        #expect(Set(ids).count == ids.count)
        #expect(zip(ids, ids.dropFirst()).allSatisfy { $0 < $1 })
        for id in ids.prefix(3) {
            guard case .temporary(let uuid) = id.storage else {
                Issue.record("\(id) isn't temporary")
                continue
            }
            let text = uuid.uuidString
            #expect(Array(text)[14] == "4", "version nibble of \(text)")
            #expect("89AB".contains(Array(text)[19]), "variant of \(text)")
            // The ID round-trips through its URI string (Codable).
            let decoded = try JSONDecoder().decode(ManagedObjectID.self, from: JSONEncoder().encode(id))
            #expect(decoded == id)
        }
    }
}
