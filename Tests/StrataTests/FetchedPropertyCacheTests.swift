import Foundation
import Strata
import StrataTestSupport
import Testing

/// Fetched properties evaluated once and cached on the object until it is refreshed (Core
/// Data's "fetched properties are not dynamic"), and key-value coding setters taking a nil
/// optional in an `Any` as nil.
@Suite("Fetched property cache and nil optionals in setters")
struct FetchedPropertyCacheTests {
    static var league: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Relationship("players", to: "Player", inverse: "team", toMany: true)
                    FetchedProperty("veterans", entity: "Player", predicate: "team == $FETCH_SOURCE AND age >= 30")
                }
                Entity("Player") {
                    Attribute("name", .string)
                    Attribute("age", .int16)
                    Attribute("number", .int32, default: 0).required()
                    Relationship("team", to: "Team", inverse: "players")
                }
            }
        }
    }

    /// A saved team with players aged 25, 31 and 45; its ID.
    static func seed(_ coordinator: PersistentStoreCoordinator) async throws -> ManagedObjectID {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Reds", forKey: "name")
            for (name, age) in [("Ann", 25), ("Bob", 31), ("Cid", 45)] {
                try Self.addPlayer(name, age: age, to: team, in: context)
            }
            try context.save()
            return team.objectID
        }
    }

    @discardableResult
    static func addPlayer(_ name: String, age: Int, to team: ManagedObject, in context: isolated ManagedObjectContext) throws -> ManagedObject {
        let player = try context.insertNewObject(forEntityName: "Player")
        player.setValue(name, forKey: "name")
        player.setValue(Int16(age), forKey: "age")
        player.setValue(team, forKey: "team")
        return player
    }

    static func names(_ value: Any?) -> [String]? {
        (value as? [ManagedObject])?.compactMap { $0.value(forKey: "name") as? String }.sorted()
    }

    // MARK: - Cache

    @Test("a fetched property is evaluated once and kept: later changes (here and saved by another context) don't show until the object is refreshed")
    func cachedUntilRefresh() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.league)
        let teamID = try await Self.seed(coordinator)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            let first = try #require(team.value(forKey: "veterans") as? [ManagedObject])
            #expect(Self.names(first) == ["Bob", "Cid"])
            try Self.addPlayer("Dee", age: 50, to: team, in: context)
            let again = try #require(team.value(forKey: "veterans") as? [ManagedObject])
            #expect(Self.names(again) == ["Bob", "Cid"], "not re-evaluated: a pending insert doesn't show")
            #expect(Set(again.map(ObjectIdentifier.init)) == Set(first.map(ObjectIdentifier.init)), "the same objects")
            context.refresh(team, mergeChanges: true)
            #expect(Self.names(team.value(forKey: "veterans")) == ["Bob", "Cid", "Dee"], "re-evaluated after refresh")
            try context.save()
        }
        // Another context saves a new veteran: the cached value stays until a refresh.
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(Self.names(team.value(forKey: "veterans")) == ["Bob", "Cid", "Dee"])
        }
        try await privateContext(coordinator).perform { (other: isolated ManagedObjectContext) throws in
            try Self.addPlayer("Eve", age: 60, to: try other.existingObject(with: teamID), in: other)
            try other.save()
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(Self.names(team.value(forKey: "veterans")) == ["Bob", "Cid", "Dee"], "still the cached value")
            context.refresh(team, mergeChanges: false)
            #expect(Self.names(team.value(forKey: "veterans")) == ["Bob", "Cid", "Dee", "Eve"], "a refresh without merge drops it too")
        }
    }

    @Test("refreshing a fault (one never fired: reading a fetched property doesn't fire it) drops its fetched values too")
    func refreshOfFaultDropsCache() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.league)
        let teamID = try await Self.seed(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.object(with: teamID)
            #expect(Self.names(team.value(forKey: "veterans")) == ["Bob", "Cid"])
            let player = try context.fetch(try FetchRequest(entityName: "Player", format: "name == 'Ann'")).first
            player?.setValue(Int16(35), forKey: "age")
            #expect(Self.names(team.value(forKey: "veterans")) == ["Bob", "Cid"])
            context.refresh(team, mergeChanges: true)
            #expect(Self.names(team.value(forKey: "veterans")) == ["Ann", "Bob", "Cid"])
        }
    }

    @Test("refreshAllObjects() and reset() drop every cached fetched property")
    func refreshAllAndReset() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.league)
        let teamID = try await Self.seed(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(Self.names(team.value(forKey: "veterans")) == ["Bob", "Cid"])
            try Self.addPlayer("Dee", age: 50, to: team, in: context)
            try context.save()
            #expect(Self.names(team.value(forKey: "veterans")) == ["Bob", "Cid"])
            context.refreshAllObjects()
            #expect(Self.names(team.value(forKey: "veterans")) == ["Bob", "Cid", "Dee"])
            try Self.addPlayer("Eve", age: 60, to: team, in: context)
            try context.save()
            #expect(Self.names(team.value(forKey: "veterans")) == ["Bob", "Cid", "Dee"])
            context.reset()
            let reread = try context.existingObject(with: teamID)
            #expect(Self.names(reread.value(forKey: "veterans")) == ["Bob", "Cid", "Dee", "Eve"])
        }
    }

    @Test("a fetched value holding unsaved objects keeps them through the save that gives them permanent IDs")
    func cacheFollowsSave() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.league)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            try Self.addPlayer("Ann", age: 40, to: team, in: context)
            try Self.addPlayer("Bob", age: 20, to: team, in: context)
            let before = try #require(team.value(forKey: "veterans") as? [ManagedObject])
            #expect(Self.names(before) == ["Ann"])
            try context.save()
            let after = try #require(team.value(forKey: "veterans") as? [ManagedObject])
            #expect(Self.names(after) == ["Ann"])
            #expect(after.allSatisfy { !$0.objectID.isTemporaryID })
            #expect(after.first === before.first)
        }
    }

    // MARK: - Nil optionals in setters

    /// A player whose `setNilValueForKey` substitutes -1 for a required number.
    final class PlayerObject: ManagedObject {
        override func setNilValueForKey(_ key: String) {
            key == "number" ? setValue(Int32(-1), forKey: key) : super.setNilValueForKey(key)
        }
    }

    @Test("setValue(maybe as Any, forKey:) with a nil optional sets nil (a relationship and a required number too), a non-nil optional its value; the save succeeds")
    func nilOptionalInAny() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.league, classes: [(PlayerObject.self, "Player")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            let player = try Self.addPlayer("Ann", age: 40, to: team, in: context)
            player.setValue(Int32(7), forKey: "number")
            try context.save()

            let noName: String? = nil
            player.setValue(noName as Any, forKey: "name")
            #expect(player.value(forKey: "name") == nil)
            let noTeam: ManagedObject? = nil
            player.setValue(noTeam as Any, forKey: "team")
            #expect(player.value(forKey: "team") == nil)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true, "the inverse follows")
            let noNumber: Int32? = nil
            player.setValue(noNumber as Any, forKey: "number")
            #expect(player.value(forKey: "number") as? Int32 == -1, "setNilValueForKey, as for nil")
            let nested: String?? = .some(nil)
            player.setValue(nested as Any, forKey: "name")
            #expect(player.value(forKey: "name") == nil)
            try context.save()

            let some: String? = "Bea"
            player.setValue(some as Any, forKey: "name")
            let someTeam: ManagedObject? = team
            player.setValue(someTeam as Any, forKey: "team")
            let someAge: Int16? = 41
            player.setValue(someAge as Any, forKey: "age")
            try context.save()
            #expect(player.value(forKey: "name") as? String == "Bea")
            #expect(player.value(forKey: "team") as? ManagedObject === team)
            #expect(player.value(forKey: "age") as? Int16 == 41)
        }
    }

    @Test("setValue(_:forKeyPath:) and setPrimitiveValue take a nil optional in an Any as nil")
    func nilOptionalThroughKeyPathAndPrimitive() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.league)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Reds", forKey: "name")
            let player = try Self.addPlayer("Ann", age: 40, to: team, in: context)
            try context.save()
            let none: String? = nil
            player.setValue(none as Any, forKeyPath: "team.name")
            #expect(team.value(forKey: "name") == nil)
            player.setPrimitiveValue(none as Any, forKey: "name")
            #expect(player.value(forKey: "name") == nil)
            let noAge: Int16? = nil
            player.setPrimitiveValue(noAge as Any, forKey: "age")
            #expect(player.value(forKey: "age") == nil)
            try context.save()
            context.reset()
            let stored = try #require(try context.fetch(FetchRequest(entityName: "Player")).first)
            #expect(stored.value(forKey: "name") == nil && stored.value(forKey: "age") == nil)
        }
    }

    @Test("setValuesForKeys(_:) sets every key as setValue(_:forKey:) does: NSNull and nil optionals are nil; an unknown key is a problem the save throws, the others are set")
    func setValuesForKeys() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.league)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            let player = try Self.addPlayer("Ann", age: 40, to: team, in: context)
            try context.save()
            let noTeam: ManagedObject? = nil
            player.setValuesForKeys(["name": NSNull(), "age": Int16?.none as Any, "team": noTeam as Any, "number": 9])
            #expect(player.value(forKey: "name") == nil && player.value(forKey: "age") == nil && player.value(forKey: "team") == nil)
            #expect(player.value(forKey: "number") as? Int32 == 9)
            try context.save()
            player.setValuesForKeys(["name": "Bea", "nmae": "typo"])
            #expect(player.value(forKey: "name") as? String == "Bea")
            let error = #expect(throws: ContextError.self) { try context.save() }
            #expect(error?.description.contains("nmae") == true)
        }
    }
}
