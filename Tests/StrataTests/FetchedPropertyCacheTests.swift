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
            // The team stays the same object between the perform blocks below (an unchanged
            // object no one holds is let go, and its fetched values with it, as in Core Data).
            context.retainsRegisteredObjects = true
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

    @Test("kept fetched values forget objects whose deletion is saved (here or merged from another context); an unsaved delete stays, as the object does")
    func keptValuesForgetDeletedObjects() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.league)
        let teamID = try await Self.seed(coordinator)
        let context = privateContext(coordinator)
        let cidID = try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            context.shouldDeleteInaccessibleFaults = false
            let team = try context.existingObject(with: teamID)
            let veterans = try #require(team.value(forKey: "veterans") as? [ManagedObject])
            let bob = try #require(veterans.first { $0.value(forKey: "name") as? String == "Bob" })
            context.delete(bob)
            #expect(Self.names(team.value(forKey: "veterans")) == ["Bob", "Cid"], "unsaved: still there")
            try context.save()
            #expect((team.value(forKey: "veterans") as? [ManagedObject])?.count == 1)
            #expect(Self.names(team.value(forKey: "veterans")) == ["Cid"])
            return try #require(veterans.first { $0 !== bob }).objectID
        }
        let other = privateContext(coordinator)
        var saves = other.notifications(.didSave).makeAsyncIterator()
        try await other.perform { (other: isolated ManagedObjectContext) throws in
            other.delete(try other.existingObject(with: cidID))
            try other.save()
        }
        let save = try #require(await saves.next())
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(Self.names(team.value(forKey: "veterans")) == ["Cid"], "kept, not merged yet")
            context.mergeChanges(fromContextDidSave: save)
            #expect(Self.names(team.value(forKey: "veterans")) == [], "the merged deletion reaches the kept value")
            try context.save()
        }
    }

    @Test("setting a fetched property (setValue, setPrimitiveValue) is refused at the save with an error saying it is a fetched property; nothing changes")
    func settingFetchedPropertyIsRefusedClearly() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.league)
        let teamID = try await Self.seed(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            for set in [{ team.setValue([ManagedObject](), forKey: "veterans") }, { team.setPrimitiveValue([ManagedObject](), forKey: "veterans") }] {
                set()
                let error = #expect(throws: ContextError.self) { try context.save() }
                #expect(error?.description.contains("Team.veterans is a fetched property") == true, "\(String(describing: error))")
                #expect(Self.names(team.value(forKey: "veterans")) == ["Bob", "Cid"])
            }
        }
    }

    // MARK: - Sort descriptors

    /// The builder twin of `Specs/0002-model-file/fetched-property-order.json`.
    static var ordered: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Relationship("players", to: "Player", inverse: "team", toMany: true)
                    FetchedProperty(
                        "roster", entity: "Player", predicate: "team == $FETCH_SOURCE",
                        sortDescriptors: [ModelSortDescriptor("age", ascending: false), ModelSortDescriptor("name", caseInsensitive: true)])
                    FetchedProperty("everyone", entity: "Player", predicate: "TRUEPREDICATE")
                }
                Entity("Player") {
                    Attribute("name", .string)
                    Attribute("age", .int16)
                    Relationship("team", to: "Team", inverse: "players")
                }
            }
        }
    }

    @Test("a fetched property with sort descriptors gives its objects in their order (descending age, then name ignoring case)")
    func sortedFetchedProperty() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.ordered)
        let teamID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            for (name, age) in [("bob", 30), ("Cid", 45), ("Ann", 30), ("dee", 20), ("Abe", 30)] {
                try Self.addPlayer(name, age: age, to: team, in: context)
            }
            try context.save()
            return team.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            let roster = try #require(team.value(forKey: "roster") as? [ManagedObject])
            #expect(roster.map { $0.value(forKey: "name") as? String } == ["Cid", "Abe", "Ann", "bob", "dee"])
        }
    }

    @Test("fetched property sort descriptors in the model file: format 3, written byte for byte, read back equal; a format-2 file holding them is refused naming the member")
    func sortDescriptorsInModelFile() throws {
        let model = try Self.ordered
        #expect(model.formatVersion == 3)
        let onDisk = try SpecFiles.data("0002-model-file/fetched-property-order.json")
        #expect(String(decoding: model.jsonData(), as: UTF8.self) == String(decoding: onDisk, as: UTF8.self))
        let loaded = try ManagedObjectModel(contentsOf: SpecFiles.url("0002-model-file/fetched-property-order.json"))
        #expect(loaded == model)
        #expect(loaded.entitiesByName["Team"]?.fetchedPropertiesByName["roster"]?.sortDescriptors.map(\.key) == ["age", "name"])
        #expect(try JSONDecoder().decode(ManagedObjectModel.self, from: JSONEncoder().encode(model)) == model)

        let old = SpecFiles.url("0002-model-file/invalid/fetched-sort-format-version-2.json")
        let error = try #require(throws: ModelError.self) { try ManagedObjectModel(contentsOf: old) }
        #expect(error.kinds == [.malformedFile])
        #expect(error.issues.first?.location == "entities[0].fetchedProperties[0].sortDescriptors")
        #expect(error.description.contains("needs formatVersion 3"))

        // A model without them still writes format 1 (older readers read it) and reads back.
        let plain = try Self.league
        #expect(plain.formatVersion == 1)
        #expect(try ManagedObjectModel(jsonData: plain.jsonData()) == plain)
        // A fetched property encoded before sort descriptors existed decodes with none.
        let legacy = #"{"name": "v", "entityName": "Player", "predicate": "age > 1", "userInfo": {}}"#
        #expect(try JSONDecoder().decode(FetchedPropertyDescription.self, from: Data(legacy.utf8)).sortDescriptors.isEmpty)
    }

    @Test("a sort key naming no property of the fetched entity is refused by the model check, with its location")
    func badSortKey() throws {
        let error = try #require(throws: ModelError.self) {
            try ManagedObjectModel {
                Entity("Team") {
                    Relationship("players", to: "Player", inverse: "team", toMany: true)
                    FetchedProperty("roster", entity: "Player", predicate: "team == $FETCH_SOURCE", sortDescriptors: [ModelSortDescriptor("team.nmae")])
                }
                Entity("Player") {
                    Attribute("age", .int16)
                    Relationship("team", to: "Team", inverse: "players")
                }
            }
        }
        #expect(error.kinds == [.invalidFetchedProperty])
        #expect(error.issues.first?.location == "entities[0].fetchedProperties[0].sortDescriptors[0].key")
        #expect(error.description.contains("entity Team has no property \"nmae\""))
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
