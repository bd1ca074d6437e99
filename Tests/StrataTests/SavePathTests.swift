import Foundation
@testable import Strata
import StrataTestSupport
import Testing

/// The save path's bookkeeping: temporary IDs made permanent everywhere, values the journal
/// didn't record, validation order, temporary ID uniqueness, nil and `NSNull` through KVC.
@Suite("Contexts: the save path")
struct SavePathTests {
    @Test("new objects that name each other: after the save every reference, registry entry and undo group uses the permanent IDs; undo and redo then work")
    func savedReferencesArePermanent() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Falcons", forKey: "name")
            var players: [ManagedObject] = []
            for name in ["Ann", "Bo", "Cy"] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(name, forKey: "firstName")
                player.setValue(team, forKey: "team")
                players.append(player)
            }
            try context.save()

            let core = context.core
            #expect(team.objectID.isTemporaryID == false)
            #expect(players.allSatisfy { !$0.objectID.isTemporaryID })
            #expect(core.registry.keys.allSatisfy { !$0.isTemporaryID })
            #expect(core.retained.isEmpty)
            let members = (team.value(forKey: "players") as? Set<ManagedObject>) ?? []
            #expect(Set(members.map(\.objectID)) == Set(players.map(\.objectID)))
            #expect(players.allSatisfy { ($0.value(forKey: "team") as? ManagedObject) === team })
            for group in core.journal.undoStack {
                #expect(group.order.allSatisfy { !$0.isTemporaryID })
                for change in group.changes.values {
                    #expect(change.values.values.allSatisfy { $0.ids.allSatisfy { !$0.isTemporaryID } })
                }
            }

            // Undo the saved inserts, save, redo, save: the objects come back under their IDs.
            try context.undo()
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 0)
            try context.redo()
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 3)
        }
        // A fresh context reads the saved references.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let teams = try context.fetch(FetchRequest(entityName: "Team"))
            #expect(teams.count == 1)
            let members = (teams.first?.value(forKey: "players") as? Set<ManagedObject>) ?? []
            #expect(Set(members.compactMap { $0.value(forKey: "firstName") as? String }) == ["Ann", "Bo", "Cy"])
        }
    }

    @Test("values set without undo registration after an insert's group closed are saved with it")
    func unrecordedChangesAfterCloseAreSaved() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Before", forKey: "name")
            team.setValue("Red", forKey: "uniformColor")
            context.processPendingChanges()
            // Not recorded for undo: only the reconciliation can write these.
            team.setPrimitiveValue("After", forKey: "name")
            team.setPrimitiveValue(nil, forKey: "uniformColor")
            let quiet = try context.insertNewObject(forEntityName: "Team")
            context.processPendingChanges()
            context.isUndoEnabled = false
            quiet.setValue("Unrecorded", forKey: "name")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let teams = try context.fetch(FetchRequest(entityName: "Team"))
            let names = Set(teams.compactMap { $0.value(forKey: "name") as? String })
            #expect(names == ["After", "Unrecorded"])
            let after = teams.first { ($0.value(forKey: "name") as? String) == "After" }
            #expect(after?.value(forKey: "uniformColor") == nil)
        }
    }

    @Test("a relationship set without undo registration after an insert's group closed is saved; an untouched insert is saved as its group took it")
    func unrecordedRelationshipAfterCloseIsSaved() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Falcons", forKey: "name")
            let moved = try context.insertNewObject(forEntityName: "Player")
            moved.setValue("Moved", forKey: "firstName")
            let untouched = try context.insertNewObject(forEntityName: "Player")
            untouched.setValue("Untouched", forKey: "firstName")
            untouched.setValue("u@example.com", forKey: "email")
            context.processPendingChanges()
            // The group took all three objects' values at its close; only `moved` (and,
            // through the inverse, `team`) change after it, unrecorded.
            context.disableUndoRegistration()
            moved.setValue(team, forKey: "team")
            moved.setValue("moved@example.com", forKey: "email")
            context.enableUndoRegistration()
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let players = try context.fetch(FetchRequest(entityName: "Player", sortDescriptors: [FetchSortDescriptor(key: "firstName")]))
            #expect(players.compactMap { $0.value(forKey: "firstName") as? String } == ["Moved", "Untouched"])
            let team = players.first?.value(forKey: "team") as? ManagedObject
            #expect(team?.value(forKey: "name") as? String == "Falcons")
            #expect(players.first?.value(forKey: "email") as? String == "moved@example.com")
            #expect(players.last?.value(forKey: "team") == nil)
            #expect(players.last?.value(forKey: "email") as? String == "u@example.com")
            let members = (team?.value(forKey: "players") as? Set<ManagedObject>) ?? []
            #expect(members.compactMap { $0.value(forKey: "firstName") as? String } == ["Moved"])
        }
    }

    @Test("validation failures of several objects are reported together, in object ID order")
    func validationFailuresInIDOrder() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.run, classes: [(Run.self, "Run")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var runs: [ManagedObject] = []
            for processID in [-3, -1, -2] as [Int32] {
                let run = try context.insertNewObject(forEntityName: "Run")
                run.setValue(processID, forKey: "processID")
                runs.append(run)
            }
            let expected = runs.sorted { $0.objectID < $1.objectID }.map { $0.value(forKey: "processID") as? Int32 }
            do {
                try context.save()
                Issue.record("the save should have failed validation")
            } catch ContextError.validation(let failures) {
                #expect(failures.count == 3)
                let reported = failures.map { failure -> Int32? in
                    if case .int32(let value)? = failure.value { return value } else { return nil }
                }
                #expect(reported == expected)
            }
            #expect(context.hasChanges == true)
        }
    }

    @Test("temporary IDs are distinct within a context and across contexts, and round-trip through their URIs")
    func temporaryIDsAreDistinct() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        var all: [ManagedObjectID] = []
        for _ in 0..<2 {
            let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                try (0..<500).map { _ in try context.insertNewObject(forEntityName: "Player").objectID }
            }
            all += ids
        }
        #expect(Set(all).count == 1_000)
        #expect(all.allSatisfy { $0.isTemporaryID })
        let decoded = try all.map { id in try JSONDecoder().decode(ManagedObjectID.self, from: JSONEncoder().encode(id)) }
        #expect(decoded == all)
    }

    @Test("nil and NSNull set through KVC clear an optional attribute or a relationship (its inverse too); on a required scalar they call setNilValueForKey")
    func nilAndNSNull() async throws {
        let dir = try TemporaryDirectory()
        let league = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(league).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ann", forKey: "firstName")
            player.setValue(NSNull(), forKey: "firstName")
            #expect(player.value(forKey: "firstName") == nil)
            player.setValue("Bo", forKey: "firstName")
            player.setValue(nil, forKey: "firstName")
            #expect(player.value(forKey: "firstName") == nil)
            player.setValue("Cy" as Any, forKey: "lastName")
            #expect(player.value(forKey: "lastName") as? String == "Cy")
            // On relationships they clear the value, and the inverse follows.
            let team = try context.insertNewObject(forEntityName: "Team")
            player.setValue(team, forKey: "team")
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 1)
            player.setValue(NSNull(), forKey: "team")
            #expect(player.value(forKey: "team") == nil)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true)
            team.setValue(Set([player]), forKey: "players")
            #expect(player.value(forKey: "team") as? ManagedObject === team)
            team.setValue(nil, forKey: "players")
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true)
            #expect(player.value(forKey: "team") == nil)
        }
        let other = try TemporaryDirectory()
        let runs = try openCoordinator(other, model: try SeedModels.run, classes: [(Run.self, "Run")])
        try await privateContext(runs).perform { (context: isolated ManagedObjectContext) throws in
            let run = try context.insertNewObject(forEntityName: "Run")
            run.setValue(Int32(7), forKey: "processID")
            run.setValue(NSNull(), forKey: "processID")  // Run's setNilValueForKey sets 0
            #expect(run.value(forKey: "processID") as? Int32 == 0)
        }
    }
}
