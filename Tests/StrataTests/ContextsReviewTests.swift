import Foundation
import Strata
import StrataTestSupport
import Synchronization
import Testing

/// Review of contexts talking to each other: nested contexts, merging, merge policies,
/// several writers on one store, persistent undo across writers, notifications.
@Suite("Contexts review: nesting, merging, conflicts, undo across writers", .serialized)
struct ContextsReviewTests {
    func undoConflict(_ body: () throws -> Void) -> (object: String, property: String, expected: String, found: String)? {
        expectUndoConflict(body)
    }

    // MARK: - Undo of saved work after another writer's change was merged or loaded

    @Test("undo of a saved rename after another writer's rename was merged in: a conflict naming the property, nothing overwritten")
    func undoAfterMergedChange() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let editor = privateContext(coordinator, name: "editor", author: "alice")
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        try await privateContext(coordinator, name: "other", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Comets", forKey: "name")
            try context.save()
        }
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Comets", "merged")
            let found = undoConflict { try context.undo() }
            #expect(found?.object == teamID.description)
            #expect(found?.property == "name")
            #expect(found?.found.contains("Comets") == true)
            #expect(found?.expected.contains("Herons") == true)
            #expect(team.value(forKey: "name") as? String == "Comets")
            #expect(context.hasChanges == false)
            if context.hasChanges { try context.save() }
        }
        #expect(try await storedTeamName(coordinator, teamID) == "Comets")
    }

    @Test("undo of a saved rename after mergeChanges(fromContextDidSave:) of another context's rename: a conflict")
    func undoAfterDidSaveMerge() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let editor = privateContext(coordinator, name: "editor", author: "alice")
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        let other = privateContext(coordinator, name: "other", author: "bob")
        let saves = other.notifications(.didSave)
        try await other.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Comets", forKey: "name")
            try context.save()
        }
        var iterator = saves.makeAsyncIterator()
        let save = try #require(await iterator.next())
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            context.mergeChanges(fromContextDidSave: save)
            let found = undoConflict { try context.undo() }
            #expect(found?.property == "name")
            if context.hasChanges { try context.save() }
        }
        #expect(try await storedTeamName(coordinator, teamID) == "Comets")
    }

    @Test("undo of a saved rename after refresh(mergeChanges: false) re-read another writer's value: a conflict")
    func undoAfterRefresh() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let editor = privateContext(coordinator, name: "editor", author: "alice")
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Comets", forKey: "name")
            try context.save()
        }
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            context.refresh(team, mergeChanges: false)
            #expect(team.value(forKey: "name") as? String == "Comets")
            let found = undoConflict { try context.undo() }
            #expect(found?.property == "name")
            if context.hasChanges { try context.save() }
        }
        #expect(try await storedTeamName(coordinator, teamID) == "Comets")
    }

    @Test("persistent undo after a restart, another process (the probe) renamed the team and the editor loaded it: a conflict")
    func persistentUndoAfterProbeRename() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        let probe = try ContextProbeProcess(["save", dir.url.appendingPathComponent("store").path, teamID.description, "Comets"])
        let line = probe.nextLine()
        #expect(line?.hasPrefix("saved ") == true)
        let (status, errors) = try probe.finish()
        #expect(status == 0, "\(errors)")

        // A restart: a new coordinator, the editor's stack rebuilt from the log.
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(restarted, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            // The app shows the team first: it is loaded with the probe's name.
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Comets")
            let canUndo = context.canUndo
            #expect(canUndo)
            let found = undoConflict { try context.undo() }
            #expect(found?.object == teamID.description)
            #expect(found?.property == "name")
            #expect(found?.found.contains("Comets") == true)
            if context.hasChanges { try context.save() }
        }
        #expect(try await storedTeamName(restarted, teamID) == "Comets")
    }

    @Test("persistent undo after a restart, another process changed other things (a player added): the undo works")
    func persistentUndoAfterProbeOtherChange() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("teal", forKey: "uniformColor")
            try context.save()
        }
        // The probe renames (to the same name) and adds a player.
        let probe = try ContextProbeProcess(["save", dir.url.appendingPathComponent("store").path, teamID.description, "Otters"])
        #expect(probe.nextLine()?.hasPrefix("saved ") == true)
        let (status, errors) = try probe.finish()
        #expect(status == 0, "\(errors)")
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(restarted, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 1)
            try context.undo()
            try context.save()
            #expect(team.value(forKey: "uniformColor") == nil)
        }
        try await privateContext(restarted).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "uniformColor") == nil)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 1, "the probe's player stays")
        }
    }

    @Test("undo of a later saved group then of an earlier one on the same property: no false conflict (own work)")
    func undoTwoOwnSavedGroups() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator, name: "editor").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            try context.save()
            team.setValue("Comets", forKey: "name")
            try context.save()
            try context.undo()
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Otters")
            try context.save()
            try context.redo()
            try context.save()
            try context.redo()
            try context.save()
        }
        #expect(try await storedTeamName(coordinator, teamID) == "Comets")
    }

    // MARK: - Nested contexts

    @Test("a parent's rollback while a child holds work on the parent's unsaved object: the child's save is refused, naming it")
    func parentRollbackUnderChild() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let kitesID = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let kites = try context.insertNewObject(forEntityName: "Team")
            kites.setValue("Kites", forKey: "name")
            return kites.objectID
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let kites = try context.existingObject(with: kitesID)
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ng", forKey: "lastName")
            player.setValue(kites, forKey: "team")
        }
        await parent.perform { (context: isolated ManagedObjectContext) in context.rollback() }
        let refused = await child.perform { (context: isolated ManagedObjectContext) -> ContextError? in
            do {
                try context.save()
                return nil
            } catch let error as ContextError {
                return error
            } catch {
                return .store("\(error)")
            }
        }
        #expect(refused?.code == 133021, "\(String(describing: refused))")
        #expect(refused?.description.contains(kitesID.description) == true, "\(String(describing: refused))")
        // The parent holds nothing of it, and its save writes nothing wrong.
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.hasChanges == false)
            try context.save()
        }
        #expect(try head(coordinator) == 1)
    }

    @Test("a child deletes a stored object and saves: the parent has it deleted (unsaved); the parent's save deletes it in the store")
    func childDelete() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
            #expect(context.registeredObject(for: teamID) == nil || context.registeredObject(for: teamID)?.managedObjectContext == nil)
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.deletedObjects.map(\.objectID) == [teamID])
            try context.save()
        }
        let gone = await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) -> Bool in
            (try? context.existingObject(with: teamID)) == nil
        }
        #expect(gone)
    }

    @Test("a child inserts a player on the parent's unsaved team; the parent saves; both contexts hold permanent IDs and the store the relationship")
    func childOnParentsInsert() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let kitesID = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let kites = try context.insertNewObject(forEntityName: "Team")
            kites.setValue("Kites", forKey: "name")
            return kites.objectID
        }
        let playerID = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let kites = try context.existingObject(with: kitesID)
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ng", forKey: "lastName")
            player.setValue(kites, forKey: "team")
            try context.save()
            return player.objectID
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        let (permanentKites, permanentPlayer) = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let found = try context.fetch(FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "lastName == %@", "Ng")))
            let player = try #require(found.first)
            let team = try #require(player.value(forKey: "team") as? ManagedObject)
            #expect(!player.objectID.isTemporaryID && !team.objectID.isTemporaryID)
            #expect(player.objectID != playerID)
            // Edits after the parent's save still reach it and the store.
            player.setValue("Ngata", forKey: "lastName")
            try context.save()
            return (team.objectID, player.objectID)
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.existingObject(with: permanentPlayer)
            #expect(player.value(forKey: "lastName") as? String == "Ngata")
            #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == permanentKites)
        }
    }

    @Test("a parent's reset while a child has pending changes to a stored object: the child's save still reaches the parent")
    func parentResetUnderChild() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
        }
        await parent.perform { (context: isolated ManagedObjectContext) in context.reset() }
        try await child.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        #expect(try await storedTeamName(coordinator, teamID) == "Herons")
    }

    @Test("a child's save then the parent's undo reverts the push; the child keeps its values until it merges")
    func parentUndoOfPush() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            #expect(context.hasChanges == false)
            try context.save()
        }
        #expect(try await storedTeamName(coordinator, teamID) == "Otters")
    }

    @Test("a child with automaticallyMergesChangesFromParent sees another coordinator's save the parent merged")
    func childMergesParentsStoreMerge() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            _ = try context.existingObject(with: teamID).value(forKey: "name")
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
        }
        let other = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(other).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Comets", forKey: "name")
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Comets")
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Comets")
        }
    }

    // MARK: - Deleted elsewhere

    @Test("an object deleted by another context: a registered fault and an object with pending changes both leave the context on merge")
    func deletedElsewhereMerged() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, doomedID) = try await leagueStoreWithDoomed(dir)
        let mine = privateContext(coordinator, name: "mine")
        let other = privateContext(coordinator, name: "other")
        let merges = mine.notifications(.didMerge)
        let changes = mine.notifications(.objectsDidChange)
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            let fault = try context.object(with: teamID)
            let doomed = try context.existingObject(with: doomedID)
            doomed.setValue("Saved?", forKey: "name")
            context.processPendingChanges()
            let save = try other.performAndWait { (other: isolated ManagedObjectContext) throws -> ContextDidSave? in
                var seen: ContextDidSave?
                _ = other.addObserver { change in
                    if case .didSave(let save) = change.notification { seen = save }
                }
                other.delete(try other.existingObject(with: teamID))
                other.delete(try other.existingObject(with: doomedID))
                try other.save()
                return seen
            }
            let didSave = try #require(save)
            #expect(didSave.deleted == [teamID, doomedID])
            context.mergeChanges(fromContextDidSave: didSave)
            #expect(fault.managedObjectContext == nil && doomed.managedObjectContext == nil)
            #expect(context.registeredObject(for: teamID) == nil)
            #expect(context.registeredObject(for: doomedID) == nil)
            #expect(context.hasChanges == false)
            try context.save()
        }
        var mergeIterator = merges.makeAsyncIterator()
        let merged = try #require(await mergeIterator.next())
        #expect(merged.deleted == [teamID, doomedID])
        #expect(merged.invalidated == [teamID, doomedID])
        var changeIterator = changes.makeAsyncIterator()
        let first = try #require(await changeIterator.next())
        #expect(first.updated == [doomedID], "the rename, posted before the merge")
        let second = try #require(await changeIterator.next())
        #expect(second.deleted == [teamID, doomedID])
    }

    @Test("an object with pending changes another writer deleted (not merged): error names it deleted in store; store-trump drops it")
    func deletedElsewhereNotMerged() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let mine = privateContext(coordinator, name: "mine")
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
        }
        let deletedAt = try head(coordinator)
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            do {
                try context.save()
                Issue.record("saved over a deleted object")
            } catch ContextError.mergeConflicts(let conflicts) {
                #expect(conflicts.count == 1)
                #expect(conflicts.first?.objectID == teamID)
                #expect(conflicts.first?.isDeletedInStore == true)
                #expect(conflicts.first?.newVersion == deletedAt)
                #expect(conflicts.first?.oldVersion == 1)
                #expect(conflicts.first?.properties.map(\.name) == ["name"])
            }
            context.mergePolicy = .mergeByPropertyStoreTrump
            try context.save()
            #expect(context.registeredObject(for: teamID) == nil)
        }
        #expect(try head(coordinator) == deletedAt)
    }

    // MARK: - Merge policies

    @Test("the error policy's message names the object, both versions and each property's base, ours and theirs")
    func errorPolicyMessage() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let mine = privateContext(coordinator, name: "mine")
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Comets", forKey: "name")
            try context.save()
        }
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            do {
                try context.save()
                Issue.record("no conflict")
            } catch let error as ContextError {
                #expect(error.code == 133020)
                let text = error.description
                #expect(text.contains(teamID.description), "\(text)")
                #expect(text.contains("Herons") && text.contains("Comets") && text.contains("Otters"), "\(text)")
                #expect(text.contains("version 1") && text.contains("version 2"), "\(text)")
            }
        }
    }

    @Test("rollback policy on an object the context deleted and another writer changed: the deletion is dropped, the store's values kept")
    func rollbackPolicyOnDeletion() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let mine = privateContext(coordinator, name: "mine")
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Comets", forKey: "name")
            try context.save()
        }
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .rollback
            try context.save()
            let team = try context.existingObject(with: teamID)
            #expect(team.isDeleted == false)
            #expect(team.value(forKey: "name") as? String == "Comets")
        }
        #expect(try await storedTeamName(coordinator, teamID) == "Comets")
    }

    @Test("overwrite policy on an object the context changed and another writer deleted: re-created with the context's values")
    func overwriteRecreates() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let mine = privateContext(coordinator, name: "mine")
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            team.setValue("teal", forKey: "uniformColor")
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
        }
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .overwrite
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Herons")
            #expect(team.value(forKey: "uniformColor") as? String == "teal")
        }
    }

    // MARK: - Concurrency

    @Test("two contexts saving the same object through perform from many tasks: every save lands or reports a conflict; the store is consistent")
    func concurrentSavesSameObject() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let rounds = Int(ProcessInfo.processInfo.environment["STRATA_REVIEW_ROUNDS"] ?? "") ?? 20
        let a = privateContext(coordinator, name: "a")
        let b = privateContext(coordinator, name: "b")
        await a.perform { (context: isolated ManagedObjectContext) in context.mergePolicy = .mergeByPropertyObjectTrump }
        await b.perform { (context: isolated ManagedObjectContext) in context.mergePolicy = .mergeByPropertyStoreTrump }
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for round in 0..<rounds {
                for (index, context) in [a, b].enumerated() {
                    group.addTask {
                        try await context.perform { (context: isolated ManagedObjectContext) throws -> Bool in
                            let team = try context.existingObject(with: teamID)
                            team.setValue("\(index)-\(round)", forKey: index == 0 ? "name" : "uniformColor")
                            let player = try context.insertNewObject(forEntityName: "Player")
                            player.setValue("\(index)-\(round)", forKey: "lastName")
                            player.setValue(team, forKey: "team")
                            try context.save()
                            return true
                        }
                    }
                }
            }
            var all: [Bool] = []
            for try await result in group { all.append(result) }
            return all
        }
        #expect(results.count == rounds * 2)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == rounds * 2)
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == rounds * 2)
        }
    }

    // MARK: - Notifications

    @Test("a child's did-save and objects-did-change userInfo list what changed; the parent's did-save lists permanent IDs")
    func childNotifications() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let childSaves = child.notifications(.didSave)
        let parentChanges = parent.notifications(.objectsDidChange)
        let parentSaves = parent.notifications(.didSave)
        let playerID = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(team, forKey: "team")
            try context.save()
            return player.objectID
        }
        var childIterator = childSaves.makeAsyncIterator()
        let childSave = try #require(await childIterator.next())
        #expect(childSave.inserted == [playerID])
        #expect(childSave.updated == [teamID])
        #expect(childSave.deleted.isEmpty)
        #expect(childSave.sequence == nil)
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        var changes = parentChanges.makeAsyncIterator()
        let change = try #require(await changes.next())
        #expect(change.inserted == [playerID])
        #expect(change.updated == [teamID])
        var saves = parentSaves.makeAsyncIterator()
        let parentSave = try #require(await saves.next())
        #expect(parentSave.inserted.count == 1 && parentSave.inserted.allSatisfy { !$0.isTemporaryID })
        #expect(parentSave.updated == [teamID])
        #expect(parentSave.sequence == 2)
    }

    // MARK: - Main-queue parents

    @Test("performAndWait on a private child of the main-queue view context, from the main thread: the save reaches the parent (no deadlock or trap)")
    func childOfViewContextFromMainThread() async throws {
        let dir = try TemporaryDirectory()
        let container = PersistentContainer(
            name: "League", managedObjectModel: try SeedModels.leagueManager, storeURL: dir.url.appendingPathComponent("store"))
        try container.loadPersistentStores()
        let view = container.viewContext
        let child = childContext(view, name: "editor")
        let id = try await MainActor.run {
            try child.performAndWait { (context: isolated ManagedObjectContext) throws in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Kites", forKey: "name")
                try context.save()
                let count = try context.count(for: FetchRequest(entityName: "Team"))
                #expect(count == 1)
                return team.objectID
            }
        }
        try await MainActor.run {
            try view.performAndWait { (context: isolated ManagedObjectContext) throws in
                #expect(try context.existingObject(with: id).value(forKey: "name") as? String == "Kites")
                try context.save()
            }
        }
        let names = try await privateContext(container.persistentStoreCoordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Team")).compactMap { $0.value(forKey: "name") as? String }
        }
        #expect(names == ["Kites"])
    }

    // MARK: - Second batch

    @Test("undo in a child of a pushed save, then save again: the parent gets the revert; redo pushes it back")
    func childUndoAfterPush() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            try context.save()
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Otters")
            let dirty = context.hasChanges
            #expect(dirty)
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
            #expect(context.hasChanges == false)
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try context.redo()
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        #expect(try await storedTeamName(coordinator, teamID) == "Herons")
    }

    @Test("persistent undo after a restart of a rename, the team deleted since by another coordinator: a conflict, nothing re-created")
    func persistentUndoAfterDelete() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        let other = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(other, name: "cleaner", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(restarted, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            let found = undoConflict { try context.undo() }
            #expect(found?.object == teamID.description)
            #expect(found?.property == "name")
            #expect(found?.found.contains("deleted") == true)
            #expect(context.hasChanges == false)
        }
    }

    @Test("object-trump after another writer moved a player to another team: the cached players of both teams follow")
    func policyAdoptionUpdatesInverseCaches() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (t1, t2, p) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let t1 = try context.insertNewObject(forEntityName: "Team")
            t1.setValue("One", forKey: "name")
            let t2 = try context.insertNewObject(forEntityName: "Team")
            t2.setValue("Two", forKey: "name")
            let p = try context.insertNewObject(forEntityName: "Player")
            p.setValue("Ng", forKey: "lastName")
            p.setValue(t1, forKey: "team")
            try context.save()
            return (t1.objectID, t2.objectID, p.objectID)
        }
        let mine = privateContext(coordinator, name: "mine")
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .mergeByPropertyObjectTrump
            let one = try context.existingObject(with: t1)
            let two = try context.existingObject(with: t2)
            let player = try context.existingObject(with: p)
            #expect((one.value(forKey: "players") as? Set<ManagedObject>)?.count == 1)
            #expect((two.value(forKey: "players") as? Set<ManagedObject>)?.count == 0)
            player.setValue("Ann", forKey: "firstName")
            try privateContext(coordinator).performAndWait { (other: isolated ManagedObjectContext) throws in
                try other.existingObject(with: p).setValue(try other.existingObject(with: t2), forKey: "team")
                try other.save()
            }
            try context.save()
            #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == t2)
            #expect((one.value(forKey: "players") as? Set<ManagedObject>)?.count == 0, "the old team's cached players")
            #expect((two.value(forKey: "players") as? Set<ManagedObject>)?.map(\.objectID) == [p], "the new team's cached players")
        }
    }

    @Test("two coordinators in one process saving the same property concurrently with the error policy: every save lands or reports a conflict; none is lost")
    func twoCoordinatorsNoLostUpdate() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let second = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let rounds = Int(ProcessInfo.processInfo.environment["STRATA_REVIEW_ROUNDS"] ?? "") ?? 20
        let contexts = [privateContext(coordinator, name: "a"), privateContext(second, name: "b")]
        // Each save appends its mark to the name it read: a lost update would drop a mark.
        let landed = try await withThrowingTaskGroup(of: Int.self) { group in
            for (index, context) in contexts.enumerated() {
                group.addTask {
                    var landed = 0
                    for round in 0..<rounds {
                        landed += try await context.perform { (context: isolated ManagedObjectContext) throws -> Int in
                            let team = try context.existingObject(with: teamID)
                            context.refresh(team, mergeChanges: false)
                            let name = team.value(forKey: "name") as? String ?? ""
                            team.setValue(name + " \(index).\(round)", forKey: "name")
                            do {
                                try context.save()
                                return 1
                            } catch ContextError.mergeConflicts {
                                context.rollback()
                                return 0
                            }
                        }
                    }
                    return landed
                }
            }
            var total = 0
            for try await count in group { total += count }
            return total
        }
        let name = try #require(try await storedTeamName(coordinator, teamID))
        #expect(name.split(separator: " ").count - 1 == landed, "\(name)")
    }

    @Test("store-trump after another writer deleted a player this context changed: the player leaves the team's cached players too")
    func policyRemovalUpdatesInverseCaches() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (t1, p) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let t1 = try context.insertNewObject(forEntityName: "Team")
            let p = try context.insertNewObject(forEntityName: "Player")
            p.setValue(t1, forKey: "team")
            try context.save()
            return (t1.objectID, p.objectID)
        }
        try await privateContext(coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .mergeByPropertyStoreTrump
            let team = try context.existingObject(with: t1)
            let player = try context.existingObject(with: p)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 1)
            player.setValue("Ann", forKey: "firstName")
            try privateContext(coordinator).performAndWait { (other: isolated ManagedObjectContext) throws in
                other.delete(try other.existingObject(with: p))
                try other.save()
            }
            try context.save()
            #expect(player.managedObjectContext == nil)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 0)
        }
    }

    @Test("a child's insert upserted by the parent's save (uniqueness, object-trump): the child's object takes the stored ID and later edits reach the store")
    func childInsertUpsertedByParent() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, adaID) = try await peopleStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        await parent.perform { (context: isolated ManagedObjectContext) in context.mergePolicy = .mergeByPropertyObjectTrump }
        let temporary = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("ada@example.com", forKey: "email")
            person.setValue("Ann", forKey: "firstName")
            try context.save()
            person.setValue("Anna", forKey: "firstName")  // unsaved: the child holds it under the temporary ID
            return person.objectID
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        #expect(try await storedPerson(coordinator, adaID)?.firstName == "Ann")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let registered = context.registeredObject(for: adaID)
            let person = try #require(registered, "the child's object took the stored ID")
            // The old temporary ID names that same object, not a second one (spec 0006 §3.1;
            // before session 35 nil here).
            #expect(context.registeredObject(for: temporary) === person, "the temporary ID follows to the stored object")
            #expect(person.objectID == adaID)
            #expect(person.value(forKey: "firstName") as? String == "Anna")
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        #expect(try await storedPerson(coordinator, adaID)?.firstName == "Anna")
        let count = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.count(for: FetchRequest(entityName: "Person"))
        }
        #expect(count == 1)
    }

    @Test("a private parent's block waiting in its child's performAndWait: the child's save reaches the parent at once (no deadlock)")
    func parentWaitsOnChild() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try child.performAndWait { (child: isolated ManagedObjectContext) throws in
                try child.existingObject(with: teamID).setValue("Herons", forKey: "name")
                try child.save()
            }
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Herons")
            try context.save()
        }
        #expect(try await storedTeamName(coordinator, teamID) == "Herons")
    }

    @Test("merging store changes in which another writer inserted, then deleted, an object this context had fetched in between: it leaves the context")
    func insertedThenDeletedElsewhere() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let other = privateContext(coordinator, name: "other")
        for update in [false, true] {
            try await privateContext(coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
                let id = try other.performAndWait { (other: isolated ManagedObjectContext) throws in
                    let team = try other.insertNewObject(forEntityName: "Team")
                    team.setValue("Brief", forKey: "name")
                    try other.save()
                    return team.objectID
                }
                let found = try context.fetch(FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "name == %@", "Brief")))
                let team = try #require(found.first)
                #expect(team.value(forKey: "name") as? String == "Brief")
                try other.performAndWait { (other: isolated ManagedObjectContext) throws in
                    let team = try other.existingObject(with: id)
                    if update {
                        team.setValue("Briefer", forKey: "name")
                        try other.save()
                    }
                    other.delete(team)
                    try other.save()
                }
                _ = try context.mergeStoreChanges()
                #expect(team.managedObjectContext == nil, "update: \(update)")
                #expect(context.registeredObject(for: id) == nil, "update: \(update)")
                _ = team.value(forKey: "name")
                try context.save()
            }
        }
    }

    @Test("rollback policy undoing this context's delete of a player another writer changed: the team lists the player again")
    func rollbackPolicyRestoresInverse() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (t1, p) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let t1 = try context.insertNewObject(forEntityName: "Team")
            let p = try context.insertNewObject(forEntityName: "Player")
            p.setValue(t1, forKey: "team")
            try context.save()
            return (t1.objectID, p.objectID)
        }
        try await privateContext(coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .rollback
            let team = try context.existingObject(with: t1)
            let player = try context.existingObject(with: p)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 1)
            context.delete(player)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 0)
            try privateContext(coordinator).performAndWait { (other: isolated ManagedObjectContext) throws in
                try other.existingObject(with: p).setValue("Ann", forKey: "firstName")
                try other.save()
            }
            try context.save()
            #expect(player.isDeleted == false && player.managedObjectContext != nil)
            #expect(player.value(forKey: "firstName") as? String == "Ann")
            #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == t1)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.map(\.objectID) == [p])
            #expect(team.hasChanges == false)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: t1)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 1)
        }
    }

    @Test("a child deletes a stored team, saves, undoes the delete and saves again: the parent has the team back, not deleted")
    func childUndoesPushedDelete() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        for parentSavesBetween in [false, true] {
            try await child.perform { (context: isolated ManagedObjectContext) throws in
                context.delete(try context.existingObject(with: teamID))
                try context.save()
            }
            if parentSavesBetween {
                try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
            }
            try await child.perform { (context: isolated ManagedObjectContext) throws in
                try context.undo()
                try context.save()
            }
            try await parent.perform { (context: isolated ManagedObjectContext) throws in
                #expect(context.deletedObjects.isEmpty, "parent saved between: \(parentSavesBetween)")
                #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
                try context.save()
            }
            #expect(try await storedTeamName(coordinator, teamID) == "Otters", "parent saved between: \(parentSavesBetween)")
        }
    }

    @Test("a child deletes a team with a player (cascade), saves, undoes and saves: the parent has both back, related, and the store keeps them")
    func childUndoesPushedCascade() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (teamID, playerID) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(team, forKey: "team")
            try context.save()
            return (team.objectID, player.objectID)
        }
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
            try context.undo()
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.deletedObjects.isEmpty)
            let team = try context.existingObject(with: teamID)
            let player = try context.existingObject(with: playerID)
            #expect((player.value(forKey: "team") as? ManagedObject) === team)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>) == [player])
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.map(\.objectID) == [playerID])
        }
    }

    @Test("a child inserts a team, saves, undoes the insert and saves: the parent no longer has it")
    func childUndoesPushedInsert() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let kitesID = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let kites = try context.insertNewObject(forEntityName: "Team")
            kites.setValue("Kites", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
            try context.undo()
            let dirty = context.hasChanges
            #expect(dirty, "undoing a pushed insert is a change to push")
            try context.save()
            return kites.objectID
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.insertedObjects.isEmpty)
            #expect(context.registeredObject(for: kitesID).map { $0.managedObjectContext == nil || $0.isDeleted } ?? true)
            let team = try context.existingObject(with: teamID)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true)
            try context.save()
        }
        let teams = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            (try context.count(for: FetchRequest(entityName: "Team")), try context.count(for: FetchRequest(entityName: "Player")))
        }
        #expect(teams == (1, 0))
        // Redo pushes the insert again.
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try context.redo()
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.insertedObjects.count == 2)
            try context.save()
        }
        let after = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            (try context.count(for: FetchRequest(entityName: "Team")), try context.count(for: FetchRequest(entityName: "Player")))
        }
        #expect(after == (2, 1))
    }

    @Test("NotificationCenter userInfo of an automatic merge: did-merge and objects-did-change carry the deleted, refreshed and invalidated IDs and the sequence")
    func mergeUserInfo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, doomedID) = try await leagueStoreWithDoomed(dir)
        let mine = privateContext(coordinator, name: "mine")
        struct Info: Sendable {
            var name: String
            var sets: [String: Set<ManagedObjectID>] = [:]
            var sequence: UInt64?
        }
        let infos = Mutex<[Info]>([])
        let center = NotificationCenter.default
        var tokens: [any NSObjectProtocol] = []
        for name in [ManagedObjectContext.didMergeChangesObjectIDsNotification, ManagedObjectContext.didChangeObjectsNotification] {
            tokens.append(center.addObserver(forName: name, object: mine, queue: nil) { note in
                var info = Info(name: note.name.rawValue)
                for (key, value) in note.userInfo ?? [:] {
                    guard let key = key as? String else { continue }
                    if let ids = value as? Set<ManagedObjectID> { info.sets[key] = ids }
                    if key == "sequence" { info.sequence = value as? UInt64 }
                }
                infos.withLock { $0.append(info) }
            })
        }
        defer { for token in tokens { center.removeObserver(token) } }
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            let doomed = try context.existingObject(with: doomedID)
            _ = (team.value(forKey: "name"), doomed.value(forKey: "name"))
            try privateContext(coordinator).performAndWait { (other: isolated ManagedObjectContext) throws in
                try other.existingObject(with: teamID).setValue("Comets", forKey: "name")
                other.delete(try other.existingObject(with: doomedID))
                try other.save()
            }
            let through = try context.mergeStoreChanges()
            #expect(through == 3)
        }
        let seen = infos.withLock { $0 }
        let merge = try #require(seen.first { $0.name == ManagedObjectContext.didMergeChangesObjectIDsNotification.rawValue })
        #expect(merge.sets["updated"] == [teamID])
        #expect(merge.sets["deleted"] == [doomedID])
        #expect(merge.sets["refreshed"] == [teamID])
        #expect(merge.sets["invalidated"] == [doomedID])
        #expect(merge.sequence == 3)
        let change = try #require(seen.last { $0.name == ManagedObjectContext.didChangeObjectsNotification.rawValue })
        #expect(change.sets["refreshed"] == [teamID])
        #expect(change.sets["deleted"] == [doomedID])
        #expect(change.sets["inserted"] == nil)
    }

    @Test("store-trump when both moved the same player to different teams: the store's team wins and every team's players agree")
    func storeTrumpMovedPlayer() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (ids, p) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var ids: [ManagedObjectID] = []
            var teams: [ManagedObject] = []
            for name in ["One", "Two", "Three"] {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue(name, forKey: "name")
                teams.append(team)
            }
            let p = try context.insertNewObject(forEntityName: "Player")
            p.setValue(teams[0], forKey: "team")
            try context.save()
            ids = teams.map(\.objectID)
            return (ids, p.objectID)
        }
        try await privateContext(coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .mergeByPropertyStoreTrump
            let teams = try ids.map { try context.existingObject(with: $0) }
            for team in teams { _ = team.value(forKey: "players") }
            let player = try context.existingObject(with: p)
            player.setValue(teams[2], forKey: "team")
            try privateContext(coordinator).performAndWait { (other: isolated ManagedObjectContext) throws in
                try other.existingObject(with: p).setValue(try other.existingObject(with: ids[1]), forKey: "team")
                try other.save()
            }
            try context.save()
            #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == ids[1])
            let counts = teams.map { ($0.value(forKey: "players") as? Set<ManagedObject>)?.count ?? -1 }
            #expect(counts == [0, 1, 0])
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let counts = try ids.map { (try context.existingObject(with: $0).value(forKey: "players") as? Set<ManagedObject>)?.count ?? -1 }
            #expect(counts == [0, 1, 0])
        }
    }

    @Test("obtainPermanentIDs in a child for an object it had already pushed: later edits reach the parent's object and the store under that ID")
    func permanentIDAfterPush() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let permanent = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let kites = try context.insertNewObject(forEntityName: "Team")
            kites.setValue("Kites", forKey: "name")
            try context.save()
            try context.obtainPermanentIDs(for: [kites])
            kites.setValue("Herons", forKey: "name")
            try context.save()
            return kites.objectID
        }
        #expect(!permanent.isTemporaryID)
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.insertedObjects.count == 1)
            #expect(context.insertedObjects.first?.value(forKey: "name") as? String == "Herons")
            try context.save()
        }
        let names = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Team")).compactMap { $0.value(forKey: "name") as? String }.sorted()
        }
        #expect(names == ["Herons", "Otters"])
        #expect(try await storedTeamName(coordinator, permanent) == "Herons")
    }

    @Test("obtainPermanentIDs in a parent for an object its child holds by the temporary ID: the child's later edit reaches it")
    func parentPermanentIDUnderChild() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let kitesID = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let kites = try context.insertNewObject(forEntityName: "Team")
            kites.setValue("Kites", forKey: "name")
            return kites.objectID
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: kitesID).setValue("Herons", forKey: "name")  // unsaved, under the temporary ID
        }
        let permanent = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let kites = try context.existingObject(with: kitesID)
            try context.obtainPermanentIDs(for: [kites])
            return kites.objectID
        }
        #expect(!permanent.isTemporaryID)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.registeredObject(for: permanent)?.value(forKey: "name") as? String == "Herons")
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        #expect(try await storedTeamName(coordinator, permanent) == "Herons")
    }

    @Test("many children saving into one parent from many tasks while the parent saves: every insert lands once, no deadlock")
    func manyChildrenConcurrently() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let rounds = Int(ProcessInfo.processInfo.environment["STRATA_REVIEW_ROUNDS"] ?? "") ?? 20
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<4 {
                group.addTask {
                    let child = childContext(parent, name: "child\(index)")
                    for round in 0..<rounds {
                        try child.performAndWait { (context: isolated ManagedObjectContext) throws in
                            let player = try context.insertNewObject(forEntityName: "Player")
                            player.setValue("\(index).\(round)", forKey: "lastName")
                            player.setValue(try context.existingObject(with: teamID), forKey: "team")
                            try context.save()
                        }
                    }
                }
            }
            group.addTask {
                for _ in 0..<rounds {
                    try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
                }
            }
            try await group.waitForAll()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 4 * rounds)
            let team = try context.existingObject(with: teamID)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 4 * rounds)
        }
    }

    @Test("a grandchild relates a new player to the root's unsaved team, which the middle context doesn't hold: the saves go through")
    func grandchildRefersToRootsInsert() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let root = privateContext(coordinator, name: "root")
        let middle = childContext(root, name: "middle")
        let grandchild = childContext(middle, name: "grandchild")
        let kitesID = try await root.perform { (context: isolated ManagedObjectContext) throws in
            let kites = try context.insertNewObject(forEntityName: "Team")
            kites.setValue("Kites", forKey: "name")
            return kites.objectID
        }
        try await grandchild.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ng", forKey: "lastName")
            player.setValue(try context.existingObject(with: kitesID), forKey: "team")
            try context.save()
        }
        try await middle.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await root.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let found = try context.fetch(FetchRequest(entityName: "Player"))
            #expect(found.count == 1)
            #expect((found.first?.value(forKey: "team") as? ManagedObject)?.value(forKey: "name") as? String == "Kites")
        }
    }

    @Test("rollback policy for a player this context deleted by cascade (its team deleted) and another writer changed: the save keeps both consistent or fails naming the reference")
    func rollbackPolicyCascade() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (t1, p) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let t1 = try context.insertNewObject(forEntityName: "Team")
            let p = try context.insertNewObject(forEntityName: "Player")
            p.setValue(t1, forKey: "team")
            try context.save()
            return (t1.objectID, p.objectID)
        }
        let outcome = await privateContext(coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) -> String in
            do {
                context.mergePolicy = .rollback
                context.delete(try context.existingObject(with: t1))
                try privateContext(coordinator).performAndWait { (other: isolated ManagedObjectContext) throws in
                    try other.existingObject(with: p).setValue("Ann", forKey: "firstName")
                    try other.save()
                }
                try context.save()
                return "saved"
            } catch {
                return "\(error)"
            }
        }
        let state = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try? context.existingObject(with: t1)
            let player = try? context.existingObject(with: p)
            return (team != nil, player != nil, (player?.value(forKey: "team") as? ManagedObject)?.objectID)
        }
        // The policy keeps the player; the team's deletion would leave it naming a deleted
        // team, so that deletion is a conflict too (spec 0006 §17.1: a deleted object the
        // store still relates to objects the save leaves naming it), and rollback drops it:
        // the save goes through with both kept. Before session 32 the team's deletion wasn't
        // a conflict, and the store refused the save ("Player/p1.team refers to Team/p1").
        #expect(outcome == "saved", "\(outcome)")
        #expect(state.0 && state.1 && state.2 == t1)
    }
}
