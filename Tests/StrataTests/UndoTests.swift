import Foundation
import Strata
import StrataTestSupport
import Testing

/// The League Manager store with one team "Otters" saved; returns its ID.
func leagueStore(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, ManagedObjectID) {
    let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
    let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        let team = try context.insertNewObject(forEntityName: "Team")
        team.setValue("Otters", forKey: "name")
        try context.save()
        return team.objectID
    }
    return (coordinator, id)
}

@Suite("Contexts: undo and redo")
struct UndoTests {
    @Test("each processPendingChanges closes a coalesced group; undo and redo walk them")
    func groups() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            team.setValue("Comets", forKey: "name")
            context.setActionName("Rename")
            context.processPendingChanges()
            team.setValue("red", forKey: "uniformColor")
            context.processPendingChanges()
            #expect(context.undoActionName == nil)

            try context.undo()
            #expect(team.value(forKey: "uniformColor") == nil)
            #expect(team.value(forKey: "name") as? String == "Comets")
            #expect(context.undoActionName == "Rename")
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Otters", "one undo reverts the coalesced sets")
            #expect(!team.hasChanges, "back to the committed values")
            #expect(context.canUndo == false)
            try context.redo()
            #expect(team.value(forKey: "name") as? String == "Comets")
            try context.redo()
            #expect(team.value(forKey: "uniformColor") as? String == "red")
            #expect(context.canRedo == false)
        }
    }

    @Test("undo of an insert removes the object; undo of a delete brings it and its relationships back")
    func insertAndDelete() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ng", forKey: "lastName")
            player.setValue(team, forKey: "team")
            context.processPendingChanges()
            try context.undo()
            #expect(context.insertedObjects.isEmpty)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true)
            try context.redo()
            #expect(context.insertedObjects.count == 1)
            try context.save()

            context.delete(team)  // cascades to the player
            context.processPendingChanges()
            #expect(context.deletedObjects.count == 2)
            try context.undo()
            #expect(context.deletedObjects.isEmpty)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 1)
            #expect(context.hasChanges == false)
        }
    }

    @Test("explicit grouping, action names, disabled registration, bounded levels")
    func controls() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            context.beginUndoGrouping()
            team.setValue("A", forKey: "name")
            context.processPendingChanges()  // inside an explicit group: doesn't close it
            team.setValue("blue", forKey: "uniformColor")
            context.setActionName("Restyle")
            context.endUndoGrouping()
            #expect(context.undoActionName == "Restyle")
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect(team.value(forKey: "uniformColor") == nil)

            context.disableUndoRegistration()
            team.setValue("Unrecorded", forKey: "name")
            context.enableUndoRegistration()
            #expect(context.canUndo == false)
            #expect(team.value(forKey: "name") as? String == "Unrecorded", "the change itself stands")

            context.levelsOfUndo = 2
            for name in ["1", "2", "3"] {
                team.setValue(name, forKey: "name")
                context.processPendingChanges()
            }
            try context.undo()
            try context.undo()
            #expect(context.canUndo == false, "only two levels kept")
            #expect(team.value(forKey: "name") as? String == "1")
        }
    }

    @Test("rollback discards changes without reading the store and clears the stacks; reset forgets objects")
    func rollbackAndReset() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Changed", forKey: "name")
            let inserted = try context.insertNewObject(forEntityName: "Team")
            context.rollback()
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect(inserted.managedObjectContext == nil)
            #expect(context.hasChanges == false)
            #expect(context.canUndo == false)
            context.reset()
            #expect(context.registeredObject(for: teamID) == nil)
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
        }
    }

    @Test("undo after save re-dirties the context; saving writes an undo(of:) transaction; redo writes redo(of:)")
    func undoAcrossSave() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let log = try #require(coordinator.persistentStores.first).log
        try await privateContext(coordinator, name: "editor", author: "alice").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            try context.save()
            try context.undo()
            #expect(context.hasChanges == true)
            #expect(team.value(forKey: "name") as? String == "Otters")
            try context.save()
            try context.redo()
            try context.save()
        }
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.head == 4)
            #expect(try reader.event(2).kind == .save)
            #expect(try reader.event(3).kind == .undo(of: 2, group: 0))
            #expect(try reader.event(4).kind == .redo(of: 2, group: 0))
            #expect(try reader.object(StoredObjectID(entity: "Team", primaryKey: 1))?["name"] == .attribute(.string("Herons")))
        }
    }

    @Test("undo of a saved delete restores the object under its own ID")
    func undoSavedDelete() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
            try context.undo()
            try context.save()
        }
        let name = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).value(forKey: "name") as? String
        }
        #expect(name == "Otters")
    }

    @Test("persisted undo survives a restart; undo conflicts with another writer's change fail and overwrite nothing")
    func persistentUndo() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        let teamID: ManagedObjectID
        do {
            let coordinator = try openCoordinator(dir, model: model)
            teamID = try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Otters", forKey: "name")
                try context.save()
                team.setValue("Herons", forKey: "name")
                context.setActionName("Rename")
                try context.save()
                return team.objectID
            }
        }
        // Restart: a new coordinator and context with the same author and name.
        do {
            let coordinator = try openCoordinator(dir, model: model)
            try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
                #expect(context.canUndo == true)
                #expect(context.undoActionName == "Rename")
                try context.undo()
                let team = try context.existingObject(with: teamID)
                #expect(team.value(forKey: "name") as? String == "Otters")
                try context.save()
            }
            // Another writer renames the team; redoing "Rename" must not overwrite it.
            try await privateContext(coordinator, name: "other", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: teamID).setValue("Comets", forKey: "name")
                try context.save()
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.canRedo == true)
            let error = #expect(throws: ContextError.self) { try context.redo() }
            guard case .undoConflict(let object, let property, _, let found) = error else {
                Issue.record("expected an undo conflict, got \(String(describing: error))")
                return
            }
            #expect(object == teamID.description)
            #expect(property == "name")
            #expect(found.contains("Comets"))
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Comets")
            #expect(context.hasChanges == false)
        }
    }
}
