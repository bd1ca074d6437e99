import Foundation
import Strata
import StrataTestSupport
import Testing

/// Records lifecycle hooks in order.
final class HookedTeam: ManagedObject {
    nonisolated(unsafe) static var calls: [String] = []
    override func awakeFromInsert() { Self.calls.append("awakeFromInsert") }
    override func awakeFromFetch() { Self.calls.append("awakeFromFetch") }
    override func willSave() { Self.calls.append("willSave") }
    override func didSave() { Self.calls.append("didSave") }
    override func prepareForDeletion() { Self.calls.append("prepareForDeletion") }
    override func willTurnIntoFault() { Self.calls.append("willTurnIntoFault") }
    override func didTurnIntoFault() { Self.calls.append("didTurnIntoFault") }
    override func awake(fromSnapshotEvents events: SnapshotEvents) { Self.calls.append("awake(\(events.rawValue))") }
}

/// Refuses names containing digits, through the validation hook.
final class StrictTeam: ManagedObject {
    override func validateValue(_ value: inout Any?, forKey key: String) throws {
        try super.validateValue(&value, forKey: key)
        if key == "name", let name = value as? String, name.contains(where: \.isNumber) {
            throw ContextError.invalidArgument("team names have no digits: \(name)")
        }
    }
}

@Suite("Contexts: faults, identity, validation, hooks", .serialized)
struct ContextBehaviourTests {
    @Test("object(with:) gives a fault without I/O; reading a property fires it; one object per ID")
    func faults() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.object(with: teamID)
            #expect(team.isFault)
            #expect(try context.object(with: teamID) === team)
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect(team.isFault == false)
            #expect(context.registeredObject(for: teamID) === team)
        }
    }

    @Test("a fault whose object was deleted elsewhere throws a clear error when fired")
    func deletedElsewhere() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let reader = privateContext(coordinator)
        try await reader.perform { (context: isolated ManagedObjectContext) throws in _ = try context.object(with: teamID) }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
        }
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.object(with: teamID)
            let error = #expect(throws: ContextError.self) { try team.fulfillFault() }
            #expect(error == .objectNotFound(teamID.description))
            #expect(error?.code == 133000)
            #expect(throws: ContextError.self) { _ = try context.existingObject(with: teamID) }
        }
    }

    @Test("unchanged objects are not retained by the context; changed ones are")
    func memory() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            do {
                let team = try context.existingObject(with: teamID)
                #expect(team.value(forKey: "name") != nil)
            }
            #expect(context.registeredObject(for: teamID) == nil, "released when the app let go")
            do {
                let team = try context.existingObject(with: teamID)
                team.setValue("Changed", forKey: "name")
            }
            #expect(context.registeredObject(for: teamID)?.value(forKey: "name") as? String == "Changed", "kept while it has changes")
        }
    }

    @Test("URIs round-trip through the coordinator; other stores, unknown entities and garbage give nil")
    func uris() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let uri = teamID.uriRepresentation()
        #expect(uri.absoluteString.hasPrefix("x-strata://"))
        #expect(uri.absoluteString.hasSuffix("/Team/p1"))
        #expect(coordinator.managedObjectID(forURIRepresentation: uri) == teamID)
        let other = try #require(URL(string: "x-strata://\(UUID().uuidString)/Team/p1"))
        #expect(coordinator.managedObjectID(forURIRepresentation: other) == nil)
        let store = try #require(coordinator.persistentStores.first).identifier.uuidString
        for text in ["x-strata://\(store)/Spaceship/p1", "x-strata://\(store)/Team/p0", "http://example.com/Team/p1", "x-strata://\(store)/Team"] {
            let url = try #require(URL(string: text))
            #expect(coordinator.managedObjectID(forURIRepresentation: url) == nil, "\(text)")
        }
        // IDs are Codable as their URI.
        let data = try JSONEncoder().encode([teamID])
        #expect(try JSONDecoder().decode([ManagedObjectID].self, from: data) == [teamID])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([ManagedObjectID].self, from: Data("[\"nonsense\"]".utf8)) }
    }

    @Test("save throws one error listing every failure, with Core Data's codes, and writes nothing")
    func validationCodes() async throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Item") {
                Attribute("title", .string).required().providedAtInsert().length(min: 2, max: 5)
                Attribute("code", .string).matching("[A-Z]+")
                Attribute("quantity", .int32, default: 1).required().range(min: .int32(1), max: .int32(10))
                Relationship("tags", to: "Tag", inverse: "item", toMany: true).count(min: 2, max: 3)
            }
            Entity("Tag") {
                Attribute("label", .string)
                Relationship("item", to: "Item", inverse: "tags")
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let item = try context.insertNewObject(forEntityName: "Item")
            item.setValue("x", forKey: "title")
            item.setValue("abc", forKey: "code")
            item.setValue(Int32(99), forKey: "quantity")
            let firstTag = try context.insertNewObject(forEntityName: "Tag")
            firstTag.setValue(item, forKey: "item")
            let error = #expect(throws: ContextError.self) { try context.save() }
            guard case .validation(let failures) = error else {
                Issue.record("expected validation failures, got \(String(describing: error))")
                return
            }
            #expect(error?.code == 1560)
            let codes = Set(failures.map(\.code.rawValue))
            #expect(codes.isSuperset(of: [1670, 1680, 1610, 1580]), "\(codes)")
            #expect(failures.allSatisfy { $0.entity == "Item" })
            #expect(failures.contains { $0.key == "quantity" && $0.value == .int32(99) })

            item.setValue(nil, forKey: "title")
            let missing = #expect(throws: ContextError.self) { try context.save() }
            #expect(missing?.description.contains("1570") == true || { if case .validation(let f) = missing { return f.contains { $0.code.rawValue == 1570 } } else { return false } }())

            item.setValue("Mug", forKey: "title")
            item.setValue("ABC", forKey: "code")
            item.setValue(Int32(3), forKey: "quantity")
            for label in ["b", "c", "d"] {
                let tag = try context.insertNewObject(forEntityName: "Tag")
                tag.setValue(label, forKey: "label")
                tag.setValue(item, forKey: "item")
            }
            let tooMany = #expect(throws: ContextError.self) { try context.save() }
            #expect(tooMany?.code == 1590)
            item.setValue("not a number", forKey: "quantity")
            let wrongType = #expect(throws: ContextError.self) { try context.save() }
            #expect(wrongType?.description.contains("quantity") == true)
        }
        #expect(try coordinator.persistentStores[0].log.read { try $0.head } == 0, "nothing was written")
    }

    @Test("custom validation hooks run at save")
    func customValidation() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager, classes: [(StrictTeam.self, "Team")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Team 7", forKey: "name")
            let error = #expect(throws: ContextError.self) { try context.save() }
            #expect(error?.description.contains("no digits") == true)
            team.setValue("Seven", forKey: "name")
            try context.save()
        }
    }

    @Test("lifecycle hooks run in Core Data's order")
    func hooks() async throws {
        HookedTeam.calls = []
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager, classes: [(HookedTeam.self, "Team")])
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("A", forKey: "name")
            try context.save()
            return team.objectID
        }
        #expect(HookedTeam.calls == ["awakeFromInsert", "willSave", "didSave"])
        HookedTeam.calls = []
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: id)
            team.setValue("B", forKey: "name")
            context.processPendingChanges()
            try context.undo()
            context.refresh(team, mergeChanges: false)
            context.delete(team)
        }
        #expect(HookedTeam.calls == ["awakeFromFetch", "awake(\(SnapshotEvents.undoUpdate.rawValue))", "willTurnIntoFault", "didTurnIntoFault", "prepareForDeletion", "awakeFromFetch"])
    }

    @Test("changedValues, committedValues and changedValuesForCurrentEvent report what changed")
    func changeTracking() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            #expect(team.changedValues()["name"] as? String == "Herons")
            #expect(team.committedValues(forKeys: ["name"])["name"] as? String == "Otters")
            #expect(team.changedValuesForCurrentEvent()["name"] as? String == "Otters")
            #expect(team.isUpdated)
            context.processPendingChanges()
            #expect(team.changedValuesForCurrentEvent().isEmpty)
            team.setValue("Otters", forKey: "name")
            #expect(team.changedValues().isEmpty, "set back to the committed value")
            #expect(team.isUpdated == false)
        }
    }

    @Test("performAndWait runs on the context's queue and nests; the view context runs on the main queue")
    func concurrency() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let context = privateContext(coordinator)
        let name = try context.performAndWait { context in
            try context.performAndWait { inner in try inner.existingObject(with: teamID).value(forKey: "name") as? String }
        }
        #expect(name == "Otters")
        let container = PersistentContainer(name: "League", managedObjectModel: try SeedModels.leagueManager, storeURL: dir.url.appendingPathComponent("container-store"))
        try container.loadPersistentStores()
        let onMain = await container.viewContext.perform { context in context.isOnContextQueue }
        #expect(onMain)
        let onQueue = await context.perform { context in context.isOnContextQueue }
        #expect(onQueue)
        #expect(context.isOnContextQueue == false)
        let count = try await container.newBackgroundContext().perform { context in try context.count(for: FetchRequest(entityName: "Team")) }
        #expect(count == 0)
    }

    @Test("fetch honours unsaved inserts, updates and deletes")
    func fetchPendingChanges() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let otters = try context.existingObject(with: teamID)
            let comets = try context.insertNewObject(forEntityName: "Team")
            comets.setValue("Comets", forKey: "name")
            otters.setValue("Otters II", forKey: "name")
            let named = try context.fetch(FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "name BEGINSWITH %@", "O")))
            #expect(named == [otters])
            let sorted = try context.fetch(FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "name")]))
            #expect(sorted == [comets, otters])
            context.delete(otters)
            #expect(try context.fetch(FetchRequest(entityName: "Team")) == [comets])
        }
    }
}

@Suite("Contexts: fetched objects are faults")
struct FetchFaultTests {
    @Test("fetched objects stay faults until a property is read; predicates and sorts don't fire them")
    func fetchedFaults() async throws {
        HookedTeam.calls = []
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager, classes: [(HookedTeam.self, "Team")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["Comets", "Otters", "Herons"] { try context.insertNewObject(forEntityName: "Team").setValue(name, forKey: "name") }
            try context.save()
        }
        HookedTeam.calls = []
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let teams = try context.fetch(FetchRequest(
                entityName: "Team", predicate: try FormatPredicate(format: "name != 'Herons'"), sortDescriptors: [FetchSortDescriptor(key: "name")]))
            #expect(teams.count == 2)
            #expect(teams.allSatisfy { $0.isFault })
            #expect(HookedTeam.calls.isEmpty, "no fault fired while matching and sorting")
            #expect(teams.first?.value(forKey: "name") as? String == "Comets")
            #expect(teams.first?.isFault == false)
            #expect(HookedTeam.calls == ["awakeFromFetch"])
        }
    }
}

@Suite("Contexts: permanent IDs before save")
struct PermanentIDTests {
    @Test("obtainPermanentIDs gives inserted objects their final IDs; the save keeps them; undo and rollback behave")
    func obtainPermanentIDs() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (before, after) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(team, forKey: "team")
            context.processPendingChanges()
            try context.obtainPermanentIDs(for: [team, player])
            #expect(team.objectID.isTemporaryID == false)
            #expect((player.value(forKey: "team") as? ManagedObject) === team, "references follow the new IDs")
            let permanent = team.objectID
            #expect(context.registeredObject(for: permanent) === team)
            #expect(try context.fetch(FetchRequest(entityName: "Team")).count == 1, "listed once")
            try context.save()
            return (permanent, team.objectID)
        }
        #expect(before == after)
        let name = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: after).value(forKey: "name") as? String
        }
        #expect(name == "Otters")
        // A reserved object rolled back leaves only a gap in the keys; verify stays clean.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            try context.obtainPermanentIDs(for: [team])
            context.rollback()
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 1)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}
