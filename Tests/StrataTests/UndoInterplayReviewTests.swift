import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// Review of how undo and redo meet the context's other features (session 24): refresh
/// without merging, merges of other contexts' deletes, uniqueness upserts, explicit grouping,
/// changes to deleted objects, child contexts' pushed groups; and randomized runs of all of
/// these (`STRATA_UNDO_INTERPLAY_SEEDS`, `STRATA_UNDO_INTERPLAY_STEPS` for longer runs).
@Suite("Undo interplay review (session 24)")
struct UndoInterplayReviewTests {
    /// The store's name of team `id`, read by a new context.
    func storedName(_ coordinator: PersistentStoreCoordinator, _ id: ManagedObjectID) async throws -> String? {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: id).value(forKey: "name") as? String
        }
    }

    @Test("refresh(false) discarding the whole pending undo of a saved group: the group is undoable again, not redoable; undo, save and redo then work")
    func refreshDiscardsPendingUndo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator, name: "editor", author: "alice").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            context.setActionName("Rename")
            try context.save()
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Otters")
            context.refresh(team, mergeChanges: false)  // the unsaved undo is discarded
            #expect(team.value(forKey: "name") as? String == "Herons")
            let (canUndo, canRedo, dirty, name) = (context.canUndo, context.canRedo, context.hasChanges, context.undoActionName)
            // Before, the group stayed on the redo stack: redo was refused for good ("undo
            // expected Otters but the store holds Herons, written by another change") and
            // the rename could no longer be undone.
            #expect(canUndo && !canRedo && !dirty)
            #expect(name == "Rename")
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Otters")
            try context.save()
            try context.redo()
            #expect(team.value(forKey: "name") as? String == "Herons")
            try context.save()
        }
        #expect(try await storedName(coordinator, teamID) == "Herons")
        let log = try #require(coordinator.persistentStores.first).log
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.head == 4)
            #expect(try reader.event(3).kind == .undo(of: 2, group: 0))
            #expect(try reader.event(4).kind == .redo(of: 2, group: 0))
        }
    }

    @Test("refresh(false) discarding the whole pending redo of a saved group: the group is redoable again and still whole")
    func refreshDiscardsPendingRedo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator, name: "editor", author: "alice").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            try context.save()
            try context.undo()
            try context.save()
            try context.redo()
            #expect(team.value(forKey: "name") as? String == "Herons")
            context.refresh(team, mergeChanges: false)  // the unsaved redo is discarded
            #expect(team.value(forKey: "name") as? String == "Otters")
            let (canUndo, canRedo, dirty) = (context.canUndo, context.canRedo, context.hasChanges)
            #expect(!canUndo && canRedo && !dirty)
            // The group still holds the team: redo renames it again, and undo takes it back.
            try context.redo()
            #expect(team.value(forKey: "name") as? String == "Herons")
            try context.save()
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Otters")
            try context.save()
        }
        #expect(try await storedName(coordinator, teamID) == "Otters")
    }

    @Test("refresh(false) discarding one object's part of a pending undo of a saved group: that part stays done, on the undo stack; undo and redo walk both parts without a false conflict")
    func refreshDiscardsPartOfPendingUndo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, firstID) = try await leagueStore(dir)
        let secondID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            try context.save()
            return team.objectID
        }
        try await privateContext(coordinator, name: "editor", author: "alice").perform { (context: isolated ManagedObjectContext) throws in
            let first = try context.existingObject(with: firstID)
            let second = try context.existingObject(with: secondID)
            first.setValue("Herons", forKey: "name")
            context.processPendingChanges()  // group 1: first
            first.setValue("Comets", forKey: "name")
            second.setValue("Hawks", forKey: "name")
            try context.save()  // groups 1 and 2 saved
            try context.undo()  // group 2: first back to Herons, second to Kites, unsaved
            context.refresh(first, mergeChanges: false)  // first's part of the undo is discarded
            #expect(first.value(forKey: "name") as? String == "Comets")
            #expect(second.value(forKey: "name") as? String == "Kites")
            let (canUndo, canRedo) = (context.canUndo, context.canRedo)
            #expect(canUndo && canRedo)
            // Before, this undo was group 1's, refused: "undo expected Herons but the store
            // holds Comets, written by another change".
            try context.undo()  // first's part of group 2
            #expect(first.value(forKey: "name") as? String == "Herons")
            try context.undo()  // group 1
            #expect(first.value(forKey: "name") as? String == "Otters")
            try context.save()
            try context.redo()
            try context.redo()
            try context.redo()
            #expect(first.value(forKey: "name") as? String == "Comets")
            #expect(second.value(forKey: "name") as? String == "Hawks")
            let stillCanRedo = context.canRedo
            #expect(!stillCanRedo)
            try context.save()
        }
        #expect(try await storedName(coordinator, firstID) == "Comets")
        #expect(try await storedName(coordinator, secondID) == "Hawks")
    }

    @Test("refresh(false) discarding one object's part of a pending undo, then redo: the rest is redone, no false conflict")
    func refreshDiscardsPartThenRedo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, firstID) = try await leagueStore(dir)
        let secondID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            try context.save()
            return team.objectID
        }
        try await privateContext(coordinator, name: "editor", author: "alice").perform { (context: isolated ManagedObjectContext) throws in
            let first = try context.existingObject(with: firstID)
            let second = try context.existingObject(with: secondID)
            first.setValue("Comets", forKey: "name")
            second.setValue("Hawks", forKey: "name")
            try context.save()
            try context.undo()
            context.refresh(first, mergeChanges: false)
            try context.save()  // second's undo only
            // Before: "undo expected Otters but the store holds Comets".
            try context.redo()
            #expect(second.value(forKey: "name") as? String == "Hawks")
            try context.save()
            try context.undo()
            try context.undo()
            #expect(first.value(forKey: "name") as? String == "Otters")
            #expect(second.value(forKey: "name") as? String == "Kites")
            try context.save()
        }
        #expect(try await storedName(coordinator, firstID) == "Otters")
        #expect(try await storedName(coordinator, secondID) == "Kites")
    }

    @Test("refresh(false) discarding the pending undos of two saved groups of the object: both go back on the undo stack in their order, whole or as parts")
    func refreshDiscardsTwoPendingUndos() async throws {
        for alone in [true, false] {
            let dir = try TemporaryDirectory()
            let (coordinator, firstID) = try await leagueStore(dir)
            let secondID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Kites", forKey: "name")
                try context.save()
                return team.objectID
            }
            try await privateContext(coordinator, name: "editor", author: "alice").perform { (context: isolated ManagedObjectContext) throws in
                let first = try context.existingObject(with: firstID)
                let second = try context.existingObject(with: secondID)
                first.setValue("Herons", forKey: "name")
                if !alone { second.setValue("Hawks", forKey: "name") }
                context.processPendingChanges()  // group 1
                first.setValue("Comets", forKey: "name")
                if !alone { second.setValue("Falcons", forKey: "name") }
                try context.save()  // groups 1 and 2
                try context.undo()
                try context.undo()
                context.refresh(first, mergeChanges: false)
                #expect(first.value(forKey: "name") as? String == "Comets")
                // Before, group 1 (or its part) went back above group 2: this undo was refused,
                // "undo expected Herons but the store holds Comets".
                try context.undo()
                #expect(first.value(forKey: "name") as? String == "Herons")
                try context.undo()
                #expect(first.value(forKey: "name") as? String == "Otters")
                try context.save()
            }
            #expect(try await storedName(coordinator, firstID) == "Otters")
            #expect(try await storedName(coordinator, secondID) == "Kites")
        }
    }

    @Test("a merged delete of an object an unsaved undone group changed: redo leaves it gone, redoes the rest, and the save succeeds")
    func mergedDeleteLeavesUnsavedRedo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let otherID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            try context.save()
            return team.objectID
        }
        let editor = privateContext(coordinator, name: "editor")
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.existingObject(with: otherID).setValue("Hawks", forKey: "name")
            context.processPendingChanges()
            try context.undo()  // unsaved: the group waits on the redo stack
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
        }
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.registeredObject(for: teamID) == nil, "the merge removed the deleted team")
            try context.redo()
            // Before, redo brought the deleted team back as a fault holding "Herons", and the
            // save failed: "the context saw an unknown version; the store has deleted it".
            #expect(context.registeredObject(for: teamID) == nil)
            let updated = context.updatedObjects.map(\.objectID)
            #expect(updated == [otherID])
            try context.save()
        }
        #expect(try await storedName(coordinator, otherID) == "Hawks")
    }

    @Test("a merged delete of the only object an unsaved undone group changed: the group leaves the redo stack")
    func mergedDeleteEmptiesUnsavedRedo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let editor = privateContext(coordinator, name: "editor")
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            context.processPendingChanges()
            try context.undo()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
        }
        let log = try #require(coordinator.persistentStores.first).log
        let head = try log.head
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            let canRedo = context.canRedo
            #expect(!canRedo)
            try context.redo()
            let dirty = context.hasChanges
            #expect(!dirty)
            try context.save()
        }
        #expect(try log.head == head, "nothing to write")
    }

    /// The stored person's first and last name and age, read by a new context.
    func storedPerson(_ coordinator: PersistentStoreCoordinator, _ id: ManagedObjectID) async throws -> [String?] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.existingObject(with: id)
            return [person.value(forKey: "firstName") as? String, person.value(forKey: "lastName") as? String, (person.value(forKey: "age") as? Int32).map { "\($0)" }]
        }
    }

    /// The store holds Old (a@example.com, age 50); the editor (persisted undo) inserts New
    /// Newman with the same email, names the action and saves under `policy`: an upsert.
    func upsert(_ dir: TemporaryDirectory, policy: any MergePolicy) async throws -> (PersistentStoreCoordinator, ManagedObjectID) {
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let storedID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("Old", forKey: "firstName")
            person.setValue("a@example.com", forKey: "email")
            person.setValue(Int32(50), forKey: "age")
            try context.save()
            return person.objectID
        }
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = policy
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("New", forKey: "firstName")
            person.setValue("Newman", forKey: "lastName")
            person.setValue("a@example.com", forKey: "email")
            context.setActionName("Add Newman")
            try context.save()
        }
        return (coordinator, storedID)
    }

    @Test("an upsert by a uniqueness constraint (object trump) is undoable: undo takes the stored object back, redo after a restart does it again")
    func upsertObjectTrumpUndo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, storedID) = try await upsert(dir, policy: .mergeByPropertyObjectTrump)
        #expect(try await storedPerson(coordinator, storedID) == ["New", "Newman", "50"])
        // A new editor reads the stack back from the log: the upsert is its group.
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let (canUndo, name) = (context.canUndo, context.undoActionName)
            // Before, the upsert's values were saved by the reconciliation group: nothing to undo.
            #expect(canUndo && name == "Add Newman")
            try context.undo()
            let person = try context.existingObject(with: storedID)
            #expect(person.value(forKey: "firstName") as? String == "Old")
            #expect(person.value(forKey: "lastName") == nil)
            try context.save()
        }
        #expect(try await storedPerson(coordinator, storedID) == ["Old", nil, "50"])
        let restarted = try openCoordinator(dir, model: try SeedModels.people)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            let canRedo = context.canRedo
            #expect(canRedo)
            try context.redo()
            try context.save()
        }
        #expect(try await storedPerson(restarted, storedID) == ["New", "Newman", "50"])
    }

    @Test("an upsert by a uniqueness constraint (store trump) is undoable in the saving context: only what it filled in is taken back")
    func upsertStoreTrumpUndo() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let storedID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("Old", forKey: "firstName")
            person.setValue("a@example.com", forKey: "email")
            person.setValue(Int32(50), forKey: "age")
            try context.save()
            return person.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .mergeByPropertyStoreTrump
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("New", forKey: "firstName")
            person.setValue("Newman", forKey: "lastName")
            person.setValue("a@example.com", forKey: "email")
            context.setActionName("Add Newman")
            try context.save()
            let name = context.undoActionName
            #expect(name == "Add Newman")
            try context.undo()
            let stored = try context.existingObject(with: storedID)
            #expect(stored.value(forKey: "firstName") as? String == "Old")
            #expect(stored.value(forKey: "lastName") == nil)
            try context.save()
        }
        #expect(try await storedPerson(coordinator, storedID) == ["Old", nil, "50"])
    }

    @Test("undo inside explicit grouping undoes the changes made in it so far (the open group closes first), not the group below")
    func undoInsideExplicitGrouping() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            context.processPendingChanges()  // group 1
            context.beginUndoGrouping()
            team.setValue("Comets", forKey: "name")
            try context.undo()
            // Before, this undid group 1 ("Otters") under the open group, which still held
            // Herons → Comets and wrote or expected those values later.
            #expect(team.value(forKey: "name") as? String == "Herons")
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Otters")
            team.setValue("Kites", forKey: "name")  // still inside the explicit group
            context.endUndoGrouping()
            let canRedo = context.canRedo
            #expect(!canRedo, "a new change clears the redo stack")
            try context.save()
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Otters")
            try context.save()
        }
        #expect(try await storedName(coordinator, teamID) == "Otters")
    }

    @Test("redo inside explicit grouping closes the open group first: what it recorded stays undoable")
    func redoInsideExplicitGrouping() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            context.processPendingChanges()
            try context.undo()  // Herons on the redo stack
            context.beginUndoGrouping()
            team.setValue("red", forKey: "uniformColor")
            try context.redo()  // closes the colour group: a new group clears the redo stack
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect(team.value(forKey: "uniformColor") as? String == "red")
            context.endUndoGrouping()
            try context.undo()
            #expect(team.value(forKey: "uniformColor") == nil)
            let dirty = context.hasChanges
            #expect(!dirty)
        }
    }

    @Test("an explicit group that a save (or undo) splits keeps its action name for the rest of it")
    func explicitGroupKeepsNameAcrossSave() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            context.beginUndoGrouping()
            context.setActionName("Restyle")
            team.setValue("Herons", forKey: "name")
            try context.save()  // the first part of the group is saved
            team.setValue("red", forKey: "uniformColor")
            context.endUndoGrouping()
            // Before, nil: the part after the save had lost the group's name.
            #expect(context.undoActionName == "Restyle")
            try context.undo()
            #expect(context.undoActionName == "Restyle")
            #expect(context.redoActionName == "Restyle")
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Otters")
        }
    }

    @Test("undo of a saved group below the pending undo of a saved delete of the same object: no conflict with the store's deletion (this context's own unsaved re-creation)")
    func undoBelowPendingUndoOfDelete() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let playerID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ng", forKey: "lastName")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
            return player.objectID
        }
        try await privateContext(coordinator, name: "editor", author: "alice").perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.existingObject(with: playerID)
            player.setValue("Ngata", forKey: "lastName")
            try context.save()  // group 1
            context.delete(player)
            try context.save()  // group 2
            try context.undo()  // the player is back, unsaved
            // Before: "undo conflict on …Player/p1.lastName: undo expected "Ngata" but the
            // store holds a deleted object".
            try context.undo()
            let restored = try context.existingObject(with: playerID)
            #expect(restored.value(forKey: "lastName") as? String == "Ng")
            try context.save()
        }
        let stored = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.existingObject(with: playerID)
            return [player.value(forKey: "lastName") as? String, (player.value(forKey: "team") as? ManagedObject).map { "\($0.objectID)" }]
        }
        #expect(stored == ["Ng", "\(teamID)"])
    }

    @Test("a child's undo of a rename it pushed, after another writer's rename was merged into the parent: refused as a conflict naming both values, nothing overwritten")
    func childUndoConflictsWithMergedChange() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent, name: "child")
        try await parent.perform { (context: isolated ManagedObjectContext) throws in context.automaticallyMergesChangesFromParent = true }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()  // into the parent
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Comets", forKey: "name")
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Comets")
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            // Before, no check: the undo put "Otters" back, and the saves wrote it over Comets.
            let found = expectUndoConflict { try context.undo() }
            #expect(found?.object == teamID.description)
            #expect(found?.property == "name")
            #expect(found?.expected.contains("Herons") == true)
            #expect(found?.found.contains("Comets") == true)
            let (canUndo, dirty) = (context.canUndo, context.hasChanges)
            #expect(canUndo && !dirty)
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        #expect(try await storedName(coordinator, teamID) == "Comets")
    }

    @Test("a child's undo and redo of its own pushed groups, saved into the parent or not in between: never a conflict")
    func childUndoRedoOwnPushedWork() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent, name: "child")
        let playerID = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            try context.save()
            team.setValue("Comets", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(team, forKey: "team")
            try context.save()
            return player.objectID
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            try context.undo()  // the first undo not pushed yet: its own work
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Otters")
            try context.save()
            try context.redo()
            try context.save()
            try context.redo()
            #expect(team.value(forKey: "name") as? String == "Comets")
            try context.undo()
            try context.redo()
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        #expect(try await storedName(coordinator, teamID) == "Comets")
        _ = playerID
    }

    @Test("a child's save of an object inserted in one undo group and deleted in a later one: pushed as nothing, not refused")
    func childInsertThenDeleteAcrossGroups() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            context.processPendingChanges()  // the insert's group closes
            context.delete(player)
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            // Before: "the parent context no longer has x-strata:///Player/t…".
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let inserted = context.insertedObjects.count
            #expect(inserted == 0)
            try context.save()
        }
        #expect(try await storedName(coordinator, teamID) == "Herons")
    }

    @Test("a child's undo of its pushed delete of an object it pushed before, saved into the parent: the parent's save stores the object once")
    func childUndoOfPushedDeleteOfNewObject() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ng", forKey: "lastName")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()  // the insert, into the parent
            context.delete(player)
            try context.save()  // the delete, into the parent
            try context.undo()  // the player is back
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            // Before: "the store refused the save: object Player/t… already exists".
            try context.save()
        }
        let players = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Player")).map { [$0.value(forKey: "lastName") as? String, ($0.value(forKey: "team") as? ManagedObject).map { "\($0.objectID)" }] }
        }
        #expect(players == [["Ng", "\(teamID)"]])
    }

    @Test("a change to an object deleted in an earlier undo group is not recorded: the save deletes it and succeeds, and undo brings it back as it was")
    func changeAfterDeleteInEarlierGroup() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let playerID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ng", forKey: "lastName")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
            return player.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.existingObject(with: playerID)
            let team = try context.existingObject(with: teamID)
            context.delete(player)
            context.processPendingChanges()  // group 1: the delete
            player.setValue("Ngata", forKey: "lastName")
            team.setValue("Herons", forKey: "name")  // group 2
            // Before: "the store refused the save: no object Player/p1 in the store" (the
            // change was written after the delete).
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 0)
            try context.undo()  // group 2: the rename
            try context.undo()  // group 1: the player is back
            let restored = try context.existingObject(with: playerID)
            #expect(restored.value(forKey: "lastName") as? String == "Ng")
            try context.save()
        }
        #expect(try await storedName(coordinator, teamID) == "Otters")
        let lastName = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: playerID).value(forKey: "lastName") as? String
        }
        #expect(lastName == "Ng")
    }

    /// How many random sequences each randomized test runs and how long each is
    /// (`STRATA_UNDO_INTERPLAY_SEEDS`, 25 by default; `STRATA_UNDO_INTERPLAY_STEPS`, 80).
    static let interplaySeeds = Int(ProcessInfo.processInfo.environment["STRATA_UNDO_INTERPLAY_SEEDS"] ?? "") ?? 25
    static let interplaySteps = Int(ProcessInfo.processInfo.environment["STRATA_UNDO_INTERPLAY_STEPS"] ?? "") ?? 80

    /// The steps the randomized runs share, by roll: 0–2 rename `team` (team `index`), 3 close
    /// the group, 4–5 undo, 6 redo. Records the step in `steps`; returns what failed (a
    /// refused undo or redo), nil otherwise.
    static func sharedStep(
        _ roll: Int, team: ManagedObject, index i: Int, step: Int, _ context: isolated ManagedObjectContext, steps: inout [String]
    ) -> String? {
        switch roll {
        case 0, 1, 2:
            steps.append("rename \(i) n\(step)")
            team.setValue("n\(step)", forKey: "name")
        case 3:
            steps.append("close group")
            context.processPendingChanges()
        case 4, 5:
            steps.append("undo")
            do { try context.undo() } catch { return "undo: \(error)" }
        default:
            steps.append("redo")
            do { try context.redo() } catch { return "redo: \(error)" }
        }
        return nil
    }

    /// One random sequence on the editor: renames of three teams, players inserted, moved and
    /// deleted, groups closed, explicit grouping, undo, redo, saves, refresh (without merging
    /// only with `discarding`), rollback, another writer's colour changes and merges of them.
    /// Only the editor writes names and players, so no undo or redo may be refused; after each
    /// save the store's team names must be the editor's. Records an issue and returns false
    /// at the first failure.
    static func interplay(
        _ context: isolated ManagedObjectContext, seed: Int, teams ids: [ManagedObjectID], other: ManagedObjectContext, discarding: Bool
    ) throws -> Bool {
        // Another writer's colour changes are conflicts for optimistic locking only.
        context.mergePolicy = .mergeByPropertyObjectTrump
        var random = SeededGenerator(seed: UInt64(seed))
        var steps: [String] = []
        var depth = 0
        func fail(_ what: String) -> Bool {
            Issue.record("seed \(seed), step \(steps.count): \(what)\n\(steps.joined(separator: "; "))")
            return false
        }
        for step in 0..<interplaySteps {
            let i = Int.random(in: 0..<3, using: &random)
            let team = try context.existingObject(with: ids[i])
            switch Int.random(in: 0..<20, using: &random) {
            case let roll where roll <= 6:
                if let failure = sharedStep(roll, team: team, index: i, step: step, context, steps: &steps) { return fail(failure) }
            case 7, 8:
                steps.append("save")
                do { try context.save() } catch { return fail("save: \(error)") }
                let stored = try other.performAndWait { (other: isolated ManagedObjectContext) throws in
                    other.reset()
                    return try ids.map { try other.existingObject(with: $0).value(forKey: "name") as? String }
                }
                let mine = try ids.map { try context.existingObject(with: $0).value(forKey: "name") as? String }
                if stored != mine { return fail("the store holds \(stored), the editor \(mine)") }
            case 9:
                guard discarding else { continue }
                steps.append("refresh \(i) false")
                context.refresh(team, mergeChanges: false)
            case 10:
                steps.append("refresh \(i) true")
                context.refresh(team, mergeChanges: true)
            case 11:
                steps.append("rollback")
                context.rollback()
                depth = 0
            case 12:
                steps.append("other colours \(i)")
                try other.performAndWait { (other: isolated ManagedObjectContext) throws in
                    try other.existingObject(with: ids[i]).setValue("c\(step)", forKey: "uniformColor")
                    try other.save()
                }
            case 13:
                steps.append("merge")
                _ = try context.mergeStoreChanges()
            case 14, 15:
                steps.append("insert player in \(i)")
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(team, forKey: "team")
                player.setValue("p\(step)", forKey: "lastName")
            case 16, 17:
                let players = (team.value(forKey: "players") as? Set<ManagedObject> ?? []).sorted { $0.objectID < $1.objectID }
                guard let player = players.randomElement(using: &random) else { continue }
                let target = Int.random(in: 0..<3, using: &random)
                if step.isMultiple(of: 2) {
                    steps.append("delete \(player.objectID)")
                    context.delete(player)
                } else {
                    steps.append("move \(player.objectID) to \(target)")
                    player.setValue(try context.existingObject(with: ids[target]), forKey: "team")
                }
            default:
                if depth == 0 || Bool.random(using: &random) {
                    steps.append("begin grouping")
                    context.beginUndoGrouping()
                    depth += 1
                } else {
                    steps.append("end grouping")
                    context.endUndoGrouping()
                    depth -= 1
                }
            }
        }
        return true
    }

    /// Three new teams, saved.
    static func newTeams(_ coordinator: PersistentStoreCoordinator) async throws -> [ManagedObjectID] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let teams = try (0..<3).map { n in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("T\(n)", forKey: "name")
                return team
            }
            try context.save()
            return teams.map(\.objectID)
        }
    }

    @Test("random renames, players inserted, moved and deleted, groups, explicit grouping, undo, redo, saves, refresh (both forms), rollback and merges of another writer's colour changes: no undo or redo is refused, and every save leaves the store's names the editor's")
    func randomInterplay() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let other = privateContext(coordinator, name: "other")
        for seed in 0..<Self.interplaySeeds {
            let ids = try await Self.newTeams(coordinator)
            let editor = privateContext(coordinator, name: "editor \(seed)", author: "alice")
            let passed = try await editor.perform { (context: isolated ManagedObjectContext) throws in
                try Self.interplay(context, seed: seed, teams: ids, other: other, discarding: true)
            }
            // The run records its first failure, naming the seed and the steps; it says so.
            #expect(passed, "seed \(seed)")
            if !passed { return }
        }
    }

    @Test("the same without refresh(false), then a restart: persisted undo undoes every group and redoes them all without a refusal")
    func randomInterplayRestarted() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let other = privateContext(coordinator, name: "other")
        for seed in 0..<Self.interplaySeeds {
            let ids = try await Self.newTeams(coordinator)
            let name = "editor \(seed)"
            let passed = try await privateContext(coordinator, name: name, author: "alice", persistentUndo: true).perform {
                (context: isolated ManagedObjectContext) throws in
                guard try Self.interplay(context, seed: seed + 1000, teams: ids, other: other, discarding: false) else { return false }
                try context.save()
                return true
            }
            // The run records its first failure, naming the seed and the steps; it says so.
            #expect(passed, "seed \(seed)")
            if !passed { return }
            let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
            try await privateContext(restarted, name: name, author: "alice", persistentUndo: true).perform {
                (context: isolated ManagedObjectContext) throws in
                while context.canUndo {
                    try context.undo()
                    try context.save()
                }
                while context.canRedo {
                    try context.redo()
                    try context.save()
                }
            }
        }
    }

    @Test("random child edits (renames, players inserted and deleted), undo, redo, child saves into the parent and parent saves, with and without merging from the parent: nothing refused, and the store ends with the child's names")
    func randomChildParentInterplay() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        for seed in 0..<(Self.interplaySeeds * 2) {
            let ids = try await Self.newTeams(coordinator)
            let parent = privateContext(coordinator, name: "parent \(seed)")
            let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent, name: "child \(seed)")
            let passed = try await child.perform { (context: isolated ManagedObjectContext) throws -> Bool in
                context.automaticallyMergesChangesFromParent = seed.isMultiple(of: 2)
                var random = SeededGenerator(seed: UInt64(seed))
                var steps: [String] = []
                func fail(_ what: String) -> Bool {
                    Issue.record("seed \(seed), step \(steps.count): \(what)\n\(steps.joined(separator: "; "))")
                    return false
                }
                func saveParent() -> Bool {
                    do {
                        try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in try parent.save() }
                        return true
                    } catch {
                        return fail("parent save: \(error)")
                    }
                }
                for step in 0..<Self.interplaySteps {
                    let i = Int.random(in: 0..<3, using: &random)
                    let team = try context.existingObject(with: ids[i])
                    switch Int.random(in: 0..<12, using: &random) {
                    case let roll where roll <= 6:
                        if let failure = Self.sharedStep(roll, team: team, index: i, step: step, context, steps: &steps) {
                            return fail(failure)
                        }
                    case 7, 8:
                        steps.append("child save")
                        do { try context.save() } catch { return fail("child save: \(error)") }
                    case 9:
                        steps.append("parent save")
                        guard saveParent() else { return false }
                    case 10:
                        steps.append("insert player in \(i)")
                        try context.insertNewObject(forEntityName: "Player").setValue(team, forKey: "team")
                    default:
                        let players = (team.value(forKey: "players") as? Set<ManagedObject> ?? []).sorted { $0.objectID < $1.objectID }
                        guard let player = players.first else { continue }
                        steps.append("delete \(player.objectID)")
                        context.delete(player)
                    }
                }
                steps.append("child save, parent save")
                do { try context.save() } catch { return fail("child save: \(error)") }
                guard saveParent() else { return false }
                let mine = try ids.map { try context.existingObject(with: $0).value(forKey: "name") as? String }
                let stored = try privateContext(coordinator).performAndWait { (other: isolated ManagedObjectContext) throws in
                    try ids.map { try other.existingObject(with: $0).value(forKey: "name") as? String }
                }
                return stored == mine || fail("the store holds \(stored), the child \(mine)")
            }
            // The run records its first failure, naming the seed and the steps; it says so.
            #expect(passed, "seed \(seed)")
            if !passed { return }
        }
    }

    @Test("random edits with another writer inserting and deleting players, merged: every save succeeds, and an undo or redo refused as a conflict changes nothing")
    func randomInterplayWithOtherWritersDeletes() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let other = privateContext(coordinator, name: "other")
        for seed in 0..<Self.interplaySeeds {
            let ids = try await Self.newTeams(coordinator)
            let passed = try await privateContext(coordinator, name: "editor \(seed)", author: "alice").perform {
                (context: isolated ManagedObjectContext) throws -> Bool in
                context.mergePolicy = .mergeByPropertyObjectTrump
                var random = SeededGenerator(seed: UInt64(seed))
                var steps: [String] = []
                func fail(_ what: String) -> Bool {
                    Issue.record("seed \(seed), step \(steps.count): \(what)\n\(steps.joined(separator: "; "))")
                    return false
                }
                /// What an undo or redo refused must leave as it was.
                func state(_ context: isolated ManagedObjectContext) throws -> [String] {
                    let teams = try ids.map { try context.existingObject(with: $0) }
                    return teams.map { "\($0.value(forKey: "name") ?? "-") \(($0.value(forKey: "players") as? Set<ManagedObject>)?.count ?? -1)" }
                        + ["\(context.canUndo) \(context.canRedo) \(context.hasChanges) \(context.insertedObjects.count) \(context.updatedObjects.count) \(context.deletedObjects.count)"]
                }
                for step in 0..<Self.interplaySteps {
                    let i = Int.random(in: 0..<3, using: &random)
                    let team = try context.existingObject(with: ids[i])
                    let players = (team.value(forKey: "players") as? Set<ManagedObject> ?? []).sorted { $0.objectID < $1.objectID }
                    switch Int.random(in: 0..<16, using: &random) {
                    case 0, 1:
                        steps.append("rename \(i) n\(step)")
                        team.setValue("n\(step)", forKey: "name")
                    case 2:
                        steps.append("close group")
                        context.processPendingChanges()
                    case 3, 4, 5, 6:
                        let undoing = step.isMultiple(of: 3)
                        steps.append(undoing ? "redo" : "undo")
                        let before = try state(context)
                        do {
                            if undoing { try context.redo() } else { try context.undo() }
                        } catch ContextError.undoConflict {
                            if try state(context) != before { return fail("a refused undo or redo changed \(before) to \(try state(context))") }
                        } catch {
                            return fail("undo or redo: \(error)")
                        }
                    case 7, 8:
                        steps.append("save")
                        do { try context.save() } catch { return fail("save: \(error)") }
                    case 9:
                        steps.append("insert player in \(i)")
                        try context.insertNewObject(forEntityName: "Player").setValue(team, forKey: "team")
                    case 10:
                        guard let player = players.first else { continue }
                        steps.append("delete \(player.objectID)")
                        context.delete(player)
                    case 11:
                        guard let player = players.last else { continue }
                        let target = Int.random(in: 0..<3, using: &random)
                        steps.append("move \(player.objectID) to \(target)")
                        player.setValue(try context.existingObject(with: ids[target]), forKey: "team")
                    case 12, 13:
                        let deleting = step.isMultiple(of: 2)
                        steps.append(deleting ? "other deletes a player of \(i)" : "other inserts a player in \(i)")
                        try other.performAndWait { (other: isolated ManagedObjectContext) throws in
                            other.reset()
                            let team = try other.existingObject(with: ids[i])
                            if deleting {
                                let players = (team.value(forKey: "players") as? Set<ManagedObject> ?? []).sorted { $0.objectID < $1.objectID }
                                guard let player = players.first else { return }
                                other.delete(player)
                            } else {
                                try other.insertNewObject(forEntityName: "Player").setValue(team, forKey: "team")
                            }
                            try other.save()
                        }
                    case 14:
                        steps.append("merge")
                        _ = try context.mergeStoreChanges()
                    default:
                        let merging = step.isMultiple(of: 2)
                        steps.append("refresh \(i) \(merging)")
                        context.refresh(team, mergeChanges: merging)
                    }
                }
                return true
            }
            // The run records its first failure, naming the seed and the steps; it says so.
            #expect(passed, "seed \(seed)")
            if !passed { return }
        }
    }
}
