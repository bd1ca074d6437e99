import Foundation
import StrataTestSupport
import Testing

@testable import Strata

/// The registry keeps permanent IDs per entity by primary key (``ObjectRegistry``): these
/// check what that could break — one object per ID, entries leaving with their objects,
/// equal keys of different entities, keys far apart, reset, and IDs made permanent by a save.
@Suite("Contexts: the object registry")
struct RegistryTests {
    /// A league store with `teams` teams and `players` players, every player on the first team.
    func store(_ dir: TemporaryDirectory, teams: Int, players: Int) async throws -> PersistentStoreCoordinator {
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var first: ManagedObject?
            for index in 0..<teams {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("team \(index)", forKey: "name")
                if first == nil { first = team }
            }
            for index in 0..<players {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("player \(index)", forKey: "lastName")
                player.setValue(first, forKey: "team")
            }
            try context.save()
        }
        return coordinator
    }

    @Test("fetch, release and fetch again: held objects come back as the same instances, released ones leave the registry, one object per ID")
    func fetchForgetCycles() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await store(dir, teams: 3, players: 300)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var held: [ManagedObjectID: ManagedObject] = [:]
            for round in 0..<4 {
                let players = try context.fetch(FetchRequest(entityName: "Player"))
                #expect(players.count == 300)
                #expect(Set(players.map(\.objectID)).count == 300)
                for player in players {
                    if let kept = held[player.objectID] { #expect(kept === player, "round \(round): a second instance for \(player.objectID)") }
                    #expect(context.registeredObject(for: player.objectID) === player)
                }
                // Keep every seventh (a different set each round, so some are released).
                held = [:]
                for (index, player) in players.enumerated() where (index + round) % 7 == 0 { held[player.objectID] = player }
            }
            // Only the held players are registered now (teams were never made).
            #expect(context.core.registry.count == held.count)
            for (id, player) in held { #expect(context.registeredObject(for: id) === player) }
            held = [:]
            #expect(context.core.registry.count == 0)
        }
    }

    @Test("a team and a player with the same primary key are two registered objects; keys far apart and strided are found")
    func equalKeysOfDifferentEntities() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await store(dir, teams: 3, players: 3)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let store = try #require(coordinator.persistentStores.first).identifier
            let teams = try context.fetch(FetchRequest(entityName: "Team"))
            let players = try context.fetch(FetchRequest(entityName: "Player"))
            for team in teams {
                let key = team.objectID.uriRepresentation().lastPathComponent.dropFirst().description
                let twin = try #require(players.first { $0.objectID.uriRepresentation().lastPathComponent.dropFirst().description == key })
                #expect(twin !== team)
                #expect(context.registeredObject(for: team.objectID) === team)
                #expect(context.registeredObject(for: twin.objectID) === twin)
            }
            // Faults by ID, keys in runs, strided and far apart (no store read: object(with:)).
            var faults: [ManagedObject] = []
            let keys: [UInt64] = Array(1_000...1_100) + stride(from: 4_096, to: 4_096 * 200, by: 4_096).map { $0 } + [UInt64.max - 1, 1 << 40]
            for key in keys {
                faults.append(try context.object(with: .permanent(StoredObjectID(entity: "Team", primaryKey: key), store: store)))
            }
            for (key, fault) in zip(keys, faults) {
                let id = ManagedObjectID.permanent(StoredObjectID(entity: "Team", primaryKey: key), store: store)
                #expect(context.registeredObject(for: id) === fault)
                #expect(try context.object(with: id) === fault)
            }
            #expect(context.core.registry.count == teams.count + players.count + keys.count)
            faults.removeAll()
            #expect(context.core.registry.count == teams.count + players.count)
            #expect(Set(context.core.registry.keys) == Set((teams + players).map(\.objectID)))
        }
    }

    @Test("after a reset, re-fetched objects are new instances and the old ones' release leaves them registered")
    func resetAndRefetch() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await store(dir, teams: 2, players: 50)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var old: [ManagedObject] = try context.fetch(FetchRequest(entityName: "Player"))
            context.reset()
            #expect(context.core.registry.count == 0)
            let fresh = try context.fetch(FetchRequest(entityName: "Player"))
            #expect(zip(old, fresh).allSatisfy { $0 !== $1 && $0.objectID == $1.objectID })
            old = []
            #expect(context.core.registry.count == 50)
            for player in fresh { #expect(context.registeredObject(for: player.objectID) === player) }
            #expect(fresh.allSatisfy { ($0.value(forKey: "lastName") as? String)?.hasPrefix("player ") == true })
        }
    }

    @Test("objects inserted and saved are found under their permanent IDs, and leave the registry when released")
    func temporaryToPermanent() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await store(dir, teams: 1, players: 10)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var inserted: [ManagedObject] = []
            for index in 0..<40 {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("new \(index)", forKey: "lastName")
                inserted.append(player)
            }
            let temporary = inserted.map(\.objectID)
            #expect(context.core.registry.count == 40)
            try context.save()
            #expect(inserted.allSatisfy { !$0.objectID.isTemporaryID })
            for (object, old) in zip(inserted, temporary) {
                #expect(context.registeredObject(for: object.objectID) === object)
                #expect(context.registeredObject(for: old) == nil)
            }
            #expect(context.core.registry.count == 40)
            // A fetch finds the saved instances, not new ones.
            let fetched = try context.fetch(FetchRequest(entityName: "Player"))
            #expect(fetched.count == 50)
            for object in inserted { #expect(fetched.contains { $0 === object }) }
            let ids = inserted.map(\.objectID)
            inserted = []
            // The fetched array still holds them all.
            #expect(context.core.registry.count == 50)
            for id in ids { #expect(context.registeredObject(for: id) != nil) }
        }
    }

    /// Player `index`'s last name: 0–40 characters, ASCII or not (small and heap strings).
    static func playerName(_ index: Int) -> String {
        let base = String(String(repeating: "abcdefghij", count: 4).prefix(index % 41))
        return index % 3 == 0 ? base + "é" : base
    }

    /// Checks the 200 players `plainFetchRowsRoundTrip` made: each name once, every even
    /// one on the team.
    static func checkPlayers(_ players: [ManagedObject]) {
        #expect(players.count == 200)
        var seen = Set<Int>()
        for player in players {
            let last = player.value(forKey: "lastName") as? String
            #expect(player.get("lastName", as: String.self) == last)
            guard let index = (0..<200).first(where: { playerName($0) == last && !seen.contains($0) }) else {
                Issue.record("an unexpected name \(String(describing: last))")
                continue
            }
            seen.insert(index)
            let team = player.value(forKey: "team") as? ManagedObject
            // Names repeat every 41 players: the team decides by the index's parity only
            // when the name is unique, so check that a set team is the team.
            if let team { #expect(team.value(forKey: "name") as? String == "the team") }
        }
        #expect(seen.count == 200)
        #expect(players.count { $0.value(forKey: "team") != nil } == 100)
    }

    @Test("a plain fetch's rows (strings of every length, a to-one): read after the fault fires, after a refresh and after a re-fetch of freed objects; freed objects leave the registry")
    func plainFetchRowsRoundTrip() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("the team", forKey: "name")
            for index in 0..<200 {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(Self.playerName(index), forKey: "lastName")
                if index % 2 == 0 { player.setValue(team, forKey: "team") }
            }
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var players = try context.fetch(FetchRequest(entityName: "Player"))
            #expect(players.allSatisfy { $0.isFault })
            Self.checkPlayers(players)
            for player in players { context.refresh(player, mergeChanges: false) }
            #expect(players.allSatisfy { $0.isFault })
            Self.checkPlayers(players)
            players = []
            // The freed players left the registry (the team, made by their reads, too).
            #expect(context.core.registry.count == 0)
            Self.checkPlayers(try context.fetch(FetchRequest(entityName: "Player")))
            #expect(context.core.registry.count == 0)
        }
    }

    @Test("the key table agrees with a dictionary through random sets, replacements and removals (pages made, emptied and made again)")
    func keyTableMatchesDictionary() {
        var generator = SeededGenerator(seed: 0x5EED)
        let table = KeyTable()
        var model: [UInt64: UInt] = [:]
        // Fake object addresses: the table stores and compares them, never follows them.
        func entry(_ bits: UInt) -> WeakObject {
            // bits ≥ 1: never a null address.
            WeakObject(reference: Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: bits << 4)!))
        }
        func bits(_ object: WeakObject?) -> UInt? { object.map { UInt(bitPattern: $0.reference.toOpaque()) >> 4 } }
        for step in 0..<20_000 {
            // Runs of neighbouring keys (as a fetch makes), mixed with jumps.
            let key = generator.next() % 4 == 0 ? generator.next() % 400 : UInt64(step / 7 % 400)
            switch generator.next() % 5 {
            case 0, 1, 2:
                let value = UInt(generator.next() % 1_000_000 + 1)
                table[key] = entry(value)
                model[key] = value
            case 3:
                table[key] = nil
                model[key] = nil
            default:
                if let held = model[key], generator.next() % 2 == 0 {
                    table.remove(key, ifItHolds: entry(held).reference.toOpaque())
                    model[key] = nil
                } else {
                    // Holding something else: left alone.
                    table.remove(key, ifItHolds: entry(9_999_999).reference.toOpaque())
                }
            }
            #expect(bits(table[key]) == model[key], "step \(step), key \(key)")
            #expect(table.count == model.count, "step \(step)")
        }
        var seen: [UInt64: UInt] = [:]
        table.forEach { key, object in seen[key] = bits(object) }
        #expect(seen == model)
    }
}
