import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// Transaction 1 of the revert tests' stores, by "setup": team Otters (in `color`, if
/// given) with players Ada and Bob. The IDs of the team and Bob.
func saveOtters(_ coordinator: PersistentStoreCoordinator, color: String? = nil) async throws -> (team: ManagedObjectID, bob: ManagedObjectID) {
    try await privateContext(coordinator, name: "setup", author: "setup").perform { (context: isolated ManagedObjectContext) throws in
        let team = try context.insertNewObject(forEntityName: "Team")
        team.setValue("Otters", forKey: "name")
        if let color { team.setValue(color, forKey: "uniformColor") }
        var bob: ManagedObject?
        for name in ["Ada", "Bob"] {
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(name, forKey: "firstName")
            player.setValue(team, forKey: "team")
            if name == "Bob" { bob = player }
        }
        try context.save()
        return (team.objectID, try #require(bob).objectID)
    }
}

/// Reverting a saved transaction, any writer's (`revertTransaction(at:)`, spec 0006 §25).
@Suite("Contexts: reverting a saved transaction")
struct RevertTransactionTests {
    /// A store with team "Otters" (players Ada, Bob) saved by "setup", then transaction 2 by
    /// "importer": Otters renamed "Herons", Bob's email set, player Cy added to the team.
    private func importedStore(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, team: ManagedObjectID, bob: ManagedObjectID, cy: ManagedObjectID) {
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (team, bob) = try await saveOtters(coordinator)
        let cy = try await privateContext(coordinator, name: "import", author: "importer").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: team)
            team.setValue("Herons", forKey: "name")
            try context.existingObject(with: bob).setValue("bob@example.com", forKey: "email")
            let cy = try context.insertNewObject(forEntityName: "Player")
            cy.setValue("Cy", forKey: "firstName")
            cy.setValue(team, forKey: "team")
            try context.save()
            return cy.objectID
        }
        return (coordinator, team, bob, cy)
    }

    /// The names of `post`'s tags, sorted.
    private static func tagNames(_ post: ManagedObject) -> [String] {
        ((post.value(forKey: "tags") as? Set<ManagedObject>) ?? []).compactMap { $0.value(forKey: "name") as? String }.sorted()
    }

    private func token(_ coordinator: PersistentStoreCoordinator, _ sequence: UInt64) throws -> HistoryToken {
        HistoryToken(storeIdentifier: try #require(coordinator.persistentStores.first).identifier, sequence: sequence)
    }

    @Test("another author's save reverted by a fresh context after a restart: values set back, its insert deleted (and gone from the inverse to-many), saved as undo(of: 2); the store reopened holds the state before it, and verify is clean")
    func revertAnotherAuthorsSave() async throws {
        let dir = try TemporaryDirectory()
        let (_, teamID, bobID, cyID) = try await importedStore(dir)
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let context = privateContext(coordinator, name: "operator", author: "alice")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(coordinator, 2))
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect(try context.existingObject(with: bobID).value(forKey: "email") == nil)
            #expect(context.deletedObjects.map(\.objectID) == [cyID])
            let players = (team.value(forKey: "players") as? Set<ManagedObject>)?.compactMap { $0.value(forKey: "firstName") as? String }.sorted()
            #expect(players == ["Ada", "Bob"], "the deleted insert left the team's players")
            try context.save()
        }
        let store = try #require(coordinator.persistentStores.first)
        let saved = try store.log.read { try $0.event(try $0.head) }
        #expect(saved.kind == .undo(of: 2, group: 0))
        #expect(saved.author == "alice")

        let reopened = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
            #expect(try context.existingObject(with: bobID).value(forKey: "email") == nil)
            #expect(throws: ContextError.self) { try context.existingObject(with: cyID) }
        }
        #expect(try #require(reopened.persistentStores.first).log.verify().isClean)
    }

    @Test("a cascade delete reverted: the team and its players come back under their IDs with their values and their relationship")
    func revertCascadeDelete() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, bobID, _) = try await importedStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.fetch(FetchRequest(entityName: "Player")).isEmpty, "the cascade deleted the players")
            try context.revertTransaction(at: try token(coordinator, 3))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Herons")
            let bob = try context.existingObject(with: bobID)
            #expect(bob.value(forKey: "email") as? String == "bob@example.com")
            #expect((bob.value(forKey: "team") as? ManagedObject)?.objectID == teamID)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 3)
        }
        #expect(try #require(coordinator.persistentStores.first).log.verify().isClean)
    }

    @Test("a later transaction that changed a value the reverted one set: undoConflict naming the object, the property and both values; nothing is changed in the context or the store")
    func conflictRefusesTheRevert() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await importedStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Kites", forKey: "name")
            try context.save()
        }
        let head = try #require(coordinator.persistentStores.first).log.head
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect {
                try context.revertTransaction(at: try token(coordinator, 2))
            } throws: { error in
                guard case .undoConflict(let object, let property, let expected, let found) = error as? ContextError else { return false }
                return object == teamID.description && property == "name" && expected.contains("Herons") && found.contains("Kites")
            }
            let (changed, redoable) = (context.hasChanges, context.canRedo)
            #expect(!changed, "nothing was changed")
            #expect(!redoable)
            try context.save()
        }
        #expect(try #require(coordinator.persistentStores.first).log.head == head)
    }

    @Test("a save of several undo groups setting the same value twice and changing an object it inserted is reverted as one: no false conflict, the state before it")
    func multiGroupTransaction() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await importedStore(dir)
        let daveID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Rooks", forKey: "name")
            let dave = try context.insertNewObject(forEntityName: "Player")
            dave.setValue("Dave", forKey: "firstName")
            context.processPendingChanges()
            team.setValue("Swifts", forKey: "name")
            dave.setValue(team, forKey: "team")
            dave.setValue("dave@example.com", forKey: "email")
            try context.save()
            return dave.objectID
        }
        let store = try #require(coordinator.persistentStores.first)
        #expect(try store.log.read { try $0.event(3) }.groups.count == 2, "the save holds two groups")
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(coordinator, 3))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Herons")
            #expect(throws: ContextError.self) { try context.existingObject(with: daveID) }
        }
        #expect(try store.log.verify().isClean)
    }

    @Test("before the save: rollback discards the revert; redo() applies the transaction again, and the save then writes nothing; after the save, redo() is a redo(of:) transaction")
    func rollbackAndRedo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await importedStore(dir)
        let store = try #require(coordinator.persistentStores.first)
        let head = try store.log.head
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(coordinator, 2), actionName: "Revert import")
            let redoName = context.redoActionName
            #expect(redoName == "Revert import")
            context.rollback()
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Herons")
            let changed = context.hasChanges
            #expect(!changed)

            try context.revertTransaction(at: try token(coordinator, 2))
            let redoable = context.canRedo
            #expect(redoable)
            try context.redo()
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Herons")
            try context.save()
        }
        #expect(try store.log.head == head, "a revert redone before the save writes nothing")
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(coordinator, 2))
            try context.save()
            try context.redo()
            try context.save()
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Herons")
        }
        #expect(try store.log.read { try $0.event(head + 2) }.kind == .redo(of: 2, group: 0))
        #expect(try store.log.verify().isClean)
    }

    @Test("a batch import reverted: its objects are deleted")
    func revertBatchImport() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, _, _) = try await importedStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchInsertRequest(entityName: "Team", objects: [["name": "Imported 1"], ["name": "Imported 2"]]))
        }
        let store = try #require(coordinator.persistentStores.first)
        #expect(try store.log.read { try $0.event(3) }.kind == .import)
        let names = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(coordinator, 3))
            try context.save()
            return try context.fetch(FetchRequest(entityName: "Team")).compactMap { $0.value(forKey: "name") as? String }
        }
        #expect(names == ["Herons"])
    }

    @Test("refusals, nothing changed: sequence 0, past the head, another store's token, purged history, a reservation, a model-version migration, a child context")
    func refusals() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, _, _) = try await importedStore(dir)
        let store = try #require(coordinator.persistentStores.first)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(throws: ContextError.self) { try context.revertTransaction(at: try token(coordinator, 0)) }
            #expect { try context.revertTransaction(at: try token(coordinator, 99)) } throws: { error in
                if case .tokenAheadOfStore = error as? HistoryError { true } else { false }
            }
            #expect { try context.revertTransaction(at: HistoryToken(storeIdentifier: UUID(), sequence: 1)) } throws: { error in
                if case .foreignToken = error as? HistoryError { true } else { false }
            }
            let player = try context.insertNewObject(forEntityName: "Player")
            try context.obtainPermanentIDs(for: [player])
            context.rollback()
            #expect(try store.log.read { try $0.event(3) }.kind.description.hasPrefix("reservation"))
            #expect { try context.revertTransaction(at: try token(coordinator, 3)) } throws: { error in
                "\(error)".contains("changes no object")
            }
            let changed = context.hasChanges
            #expect(!changed)
        }
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: privateContext(coordinator))
        try await child.perform { (context: isolated ManagedObjectContext) throws -> Void in
            #expect { try context.revertTransaction(at: try token(coordinator, 2)) } throws: { error in
                "\(error)".contains("child context")
            }
        }
        _ = try coordinator.purgeHistory(before: try token(coordinator, 2), author: "ops")
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> Void in
            #expect { try context.revertTransaction(at: try token(coordinator, 2)) } throws: { error in
                if case .historyPurged = error as? HistoryError { true } else { false }
            }
        }

        // A model version that fills a new mandatory attribute migrates with a transaction
        // of its own, which can't be reverted.
        var v2 = try SeedModels.leagueManager
        v2.entities = v2.entities.map { entity in
            var entity = entity
            if entity.name == "Team" { entity.attributes.append(Attribute("rank", .int64, default: 1).required()) }
            return entity
        }
        try coordinator.remove(store)
        let migrated = try openCoordinator(dir, model: v2)
        let migration = try #require(migrated.persistentStores.first).log.head
        #expect(try #require(migrated.persistentStores.first).log.read { try $0.event(migration) }.kind == .migration)
        try await privateContext(migrated).perform { (context: isolated ManagedObjectContext) throws -> Void in
            #expect { try context.revertTransaction(at: try token(migrated, migration)) } throws: { error in
                "\(error)".contains("model-version migration")
            }
        }
    }

    @Test("many-to-many memberships a save changed in two groups (tags added, one removed, one added and removed again) are set back, net: the revert removes what it added and puts back what it removed")
    func revertMemberships() async throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Post") {
                Attribute("title", .string)
                Relationship("tags", to: "Tag", inverse: "posts", toMany: true)
            }
            Entity("Tag") {
                Attribute("name", .string)
                Relationship("posts", to: "Post", inverse: "tags", toMany: true)
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        let postID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.insertNewObject(forEntityName: "Post")
            post.setValue("Hello", forKey: "title")
            for name in ["a", "b", "c", "d"] {
                let tag = try context.insertNewObject(forEntityName: "Tag")
                tag.setValue(name, forKey: "name")
                if name == "a" || name == "b" { post.mutableSetValue(forKey: "tags").add(tag) }
            }
            try context.save()
            return post.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            let tags = Dictionary(uniqueKeysWithValues: try context.fetch(FetchRequest(entityName: "Tag")).map { ($0.value(forKey: "name") as? String ?? "", $0) })
            let set = post.mutableSetValue(forKey: "tags")
            set.add(try #require(tags["c"]))
            set.remove(try #require(tags["a"]))
            context.processPendingChanges()
            set.add(try #require(tags["d"]))
            set.remove(try #require(tags["c"]))
            try context.save()
            #expect(Self.tagNames(post) == ["b", "d"])
        }
        let store = try #require(coordinator.persistentStores.first)
        #expect(try store.log.read { try $0.event(2) }.groups.count == 2)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(coordinator, 2))
            #expect(Self.tagNames(try context.existingObject(with: postID)) == ["a", "b"])
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(Self.tagNames(try context.existingObject(with: postID)) == ["a", "b"])
        }
        #expect(try store.log.verify().isClean)
    }

    @Test("an object the transaction inserted that a later transaction changed, or linked another object to, isn't deleted by the revert: undoConflict naming the later transaction or the link, nothing changed")
    func laterWorkOnInsertedObjects() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, bobID, _) = try await importedStore(dir)
        let kitesID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let kites = try context.insertNewObject(forEntityName: "Team")
            kites.setValue("Kites", forKey: "name")
            try context.save()  // 3
            return kites.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: bobID).setValue(try context.existingObject(with: kitesID), forKey: "team")
            try context.save()  // 4: Bob moves to Kites
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> Void in
            #expect {
                try context.revertTransaction(at: try token(coordinator, 3))
            } throws: { error in
                guard case .undoConflict(let object, let property, _, let found) = error as? ContextError else { return false }
                return object == kitesID.description && property == "players" && found.contains(bobID.description)
            }
            let changed = context.hasChanges
            #expect(!changed)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: kitesID).setValue("Kestrels", forKey: "uniformColor")
            try context.save()  // 5: the team itself changed
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> Void in
            #expect {
                try context.revertTransaction(at: try token(coordinator, 3))
            } throws: { error in
                guard case .undoConflict(let object, let property, _, let found) = error as? ContextError else { return false }
                return object == kitesID.description && property == "(object)" && found.contains("transaction 5")
            }
        }
        #expect(try #require(coordinator.persistentStores.first).log.head == 5)
    }

    @Test("the context's own unsaved change to a value the reverted transaction set refuses the revert (undoConflict naming it), instead of the revert silently overwriting it at the save")
    func unsavedChangeRefusesTheRevert() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await importedStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Mine", forKey: "name")
            #expect {
                try context.revertTransaction(at: try token(coordinator, 2))
            } throws: { error in
                guard case .undoConflict(let object, let property, _, let found) = error as? ContextError else { return false }
                return object == teamID.description && property == "name" && found.contains("Mine")
            }
            #expect(team.value(forKey: "name") as? String == "Mine")
            let redoable = context.canRedo
            #expect(!redoable)
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Mine", "the unsaved change was saved")
        }
        #expect(try #require(coordinator.persistentStores.first).log.verify().isClean)
    }

    @Test("the context's unsaved link of another object to an object the transaction inserted refuses the revert, instead of the revert deleting the object and dropping the link")
    func unsavedLinkRefusesTheRevert() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, bobID, cyID) = try await importedStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let kites = try context.insertNewObject(forEntityName: "Team")
            kites.setValue("Kites", forKey: "name")
            try context.save()  // 3
            // Unsaved: Bob moves to Kites.
            try context.existingObject(with: bobID).setValue(kites, forKey: "team")
            #expect(throws: ContextError.self) { try context.revertTransaction(at: try token(coordinator, 3)) }
            #expect((try context.existingObject(with: bobID).value(forKey: "team") as? ManagedObject)?.objectID == kites.objectID)
            _ = cyID
        }
    }

    @Test("a transaction reverted twice before a save: the second is refused (already reverted here), and the save writes one undo(of:) with verify clean")
    func revertTwiceBeforeSave() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, cyID) = try await importedStore(dir)
        let store = try #require(coordinator.persistentStores.first)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(coordinator, 2))
            #expect(throws: (any Error).self) { try context.revertTransaction(at: try token(coordinator, 2)) }
            try context.save()
        }
        #expect(try store.log.head == 3, "one revert transaction")
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
            #expect(throws: ContextError.self) { try context.existingObject(with: cyID) }
        }
        #expect(try store.log.verify().isClean)
    }

    @Test("a context that reverts its own saved transaction still on its undo stack: undo() afterwards doesn't undo that transaction's groups a second time")
    func revertOwnSaveThenUndo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await importedStore(dir)
        let store = try #require(coordinator.persistentStores.first)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Rooks", forKey: "name")
            context.processPendingChanges()
            let dave = try context.insertNewObject(forEntityName: "Player")
            dave.setValue("Dave", forKey: "firstName")
            dave.setValue(team, forKey: "team")
            try context.save()  // 3: two groups
            try context.revertTransaction(at: try token(coordinator, 3))
            #expect(team.value(forKey: "name") as? String == "Herons")
            let undoable = context.canUndo
            #expect(!undoable, "the reverted groups left the undo stack")
            try context.undo()
            try context.undo()
            try context.save()
            #expect(team.value(forKey: "name") as? String == "Herons")
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Herons")
            #expect(try context.fetch(FetchRequest(entityName: "Player")).count == 3)
        }
        #expect(try store.log.verify().isClean)
    }

    @Test("a context with the transaction's author and name reverting its several-group save: after a restart persisted undo holds every group of it undone (none left to undo a second time), and redo brings them all back")
    func persistedUndoAfterRevertOfOwnSave() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID, _, _) = try await importedStore(dir)
        let store = try #require(first.persistentStores.first)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Rooks", forKey: "name")
            context.processPendingChanges()
            team.setValue("Swifts", forKey: "uniformColor")
            try context.save()  // 3: two groups
        }
        let head = try store.log.head
        try await editor(openCoordinator(dir, model: try SeedModels.leagueManager)).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(first, head))
            try context.save()  // 4: undo(of: 3)
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            let undoable = context.canUndo
            #expect(!undoable, "no group of transaction 3 is left to undo: the revert undid them all")
            try context.redo()
            try context.redo()
            #expect(team.value(forKey: "name") as? String == "Rooks")
            #expect(team.value(forKey: "uniformColor") as? String == "Swifts", "redo brings back every group of it, not group 0 alone")
            try context.save()
        }
        #expect(try store.log.verify().isClean)
    }

    @Test("a several-group save that inserts an object and deletes it again in a later group: reverted (one event group per group, each the undo of its own, last first), then redone after the save; the store holds each state and verify is clean")
    func revertInsertDeletedLaterInTheSameSave() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await importedStore(dir)
        let store = try #require(coordinator.persistentStores.first)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            let eve = try context.insertNewObject(forEntityName: "Player")
            eve.setValue("Eve", forKey: "firstName")
            eve.setValue(team, forKey: "team")
            context.processPendingChanges()
            context.delete(eve)
            team.setValue("Rooks", forKey: "name")
            try context.save()  // 3
        }
        #expect(try store.log.read { try $0.event(3) }.groups.count == 2)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(coordinator, 3))
            try context.save()  // 4
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Herons")
            #expect(try context.fetch(FetchRequest(entityName: "Player")).count == 3)
            try context.redo()
            try context.save()  // 5
        }
        let (revert, redo) = try store.log.read { (try $0.event(4), try $0.event(5)) }
        #expect(revert.groups.map(\.origin) == [.undo(of: 3, group: 1), .undo(of: 3, group: 0)])
        #expect(redo.groups.map(\.origin) == [.redo(of: 3, group: 0), .redo(of: 3, group: 1)])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Rooks")
            #expect(try context.fetch(FetchRequest(entityName: "Player")).count == 3)
        }
        #expect(try store.log.verify().isClean)
    }

    @Test("a revert that would point an object at one a later transaction deleted (a deleted player brought back to its deleted team; a moved player set back to its deleted old team) is refused as an undoConflict naming the reference, nothing changed, rather than accepted and then refused by the store at the save")
    func referenceToALaterDeletedObject() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, bobID, _) = try await importedStore(dir)
        let store = try #require(coordinator.persistentStores.first)
        let kitesID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: bobID))
            try context.save()  // 3: Bob deleted
            let kites = try context.insertNewObject(forEntityName: "Team")
            kites.setValue("Kites", forKey: "name")
            try context.save()  // 4
            return kites.objectID
        }
        let adaID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let ada = try #require(try context.fetch(FetchRequest(entityName: "Player")).first { $0.value(forKey: "firstName") as? String == "Ada" })
            ada.setValue(try context.existingObject(with: kitesID), forKey: "team")
            try context.save()  // 5: Ada moves to Kites
            context.delete(try context.existingObject(with: teamID))
            try context.save()  // 6: Otters deleted (cascading to Cy)
            return ada.objectID
        }
        let head = try store.log.head
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (sequence, object) in [(UInt64(3), bobID), (5, adaID)] {
                #expect {
                    try context.revertTransaction(at: try token(coordinator, sequence))
                } throws: { error in
                    guard case .undoConflict(let name, let property, let expected, let found) = error as? ContextError else { return false }
                    return name == object.description && property == "team" && expected.contains(teamID.description) && found.contains("deleted")
                }
                let changed = context.hasChanges
                #expect(!changed, "nothing was changed")
            }
            try context.save()
        }
        #expect(try store.log.head == head)
    }

    @Test("a revert bringing back a deleted object whose unique value a later transaction gave another object is refused as an undoConflict naming both, nothing changed — under any merge policy (before, an object-trump or overwrite policy merged it into the later object at the save, overwriting that object's values)", arguments: [0, 1, 2])
    func uniqueValueTakenLater(_ policy: Int) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let store = try #require(coordinator.persistentStores.first)
        let oldID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("Old", forKey: "firstName")
            person.setValue("a@example.com", forKey: "email")
            try context.save()  // 1
            return person.objectID
        }
        let newID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: oldID))
            try context.save()  // 2: Old deleted
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("New", forKey: "firstName")
            person.setValue("a@example.com", forKey: "email")
            person.setValue(Int32(7), forKey: "age")
            try context.save()  // 3: New takes Old's email
            return person.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = [StandardMergePolicy.error, .mergeByPropertyObjectTrump, .overwrite][policy]
            #expect {
                try context.revertTransaction(at: try token(coordinator, 2))
            } throws: { error in
                guard case .undoConflict(let object, let property, _, let found) = error as? ContextError else { return false }
                return object == oldID.description && property == "email" && found.contains(newID.description)
            }
            let changed = context.hasChanges
            #expect(!changed, "nothing was changed")
            try context.save()
        }
        #expect(try store.log.head == 3)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let new = try context.existingObject(with: newID)
            #expect(new.value(forKey: "firstName") as? String == "New")
            #expect(new.value(forKey: "age") as? Int32 == 7)
        }
    }

    @Test("an object the transaction inserted whose derived attributes alone a later transaction recomputed (its department renamed) is deleted by the revert: no false conflict; the department's derived count drops back, verify clean")
    func derivedRecomputationIsNoLaterWork() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        let store = try #require(coordinator.persistentStores.first)
        let departmentID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.insertNewObject(forEntityName: "Department")
            department.setValue("Sales", forKey: "name")
            try context.save()  // 1
            return department.objectID
        }
        let eveID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let eve = try context.insertNewObject(forEntityName: "Employee")
            eve.setValue("Eve", forKey: "name")
            eve.setValue(Decimal(10), forKey: "salary")
            eve.setValue(try context.existingObject(with: departmentID), forKey: "department")
            try context.save()  // 2
            try context.existingObject(with: departmentID).setValue("Ops", forKey: "name")
            try context.save()  // 3: Eve's departmentName recomputed, nothing else of her
            return eve.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(coordinator, 2))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(throws: ContextError.self) { try context.existingObject(with: eveID) }
            let department = try context.existingObject(with: departmentID)
            #expect(department.value(forKey: "name") as? String == "Ops")
            #expect(department.value(forKey: "employeeCount") as? Int64 == 0)
        }
        #expect(try store.log.verify().isClean)
    }

    @Test("a transaction written by an earlier model version is reverted under the current version's names (a renamed attribute set back under its new name); one changing a property a later version removed is still refused, nothing changed")
    func revertAcrossARename() async throws {
        let dir = try TemporaryDirectory()
        func model(_ version: Int) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                Entity("Player") {
                    Attribute("firstName", .string)
                    if version == 1 { Attribute("email", .string) } else { Attribute("contact", .string).renamed(from: "email") }
                    if version < 3 { Attribute("nickname", .string) }
                }
            }
        }
        let first = try openCoordinator(dir, model: try model(1))
        let bobID = try await privateContext(first).perform { (context: isolated ManagedObjectContext) throws in
            let bob = try context.insertNewObject(forEntityName: "Player")
            bob.setValue("Bob", forKey: "firstName")
            try context.save()  // 1
            bob.setValue("bob@example.com", forKey: "email")
            try context.save()  // 2
            bob.setValue("Bobby", forKey: "nickname")
            try context.save()  // 3
            return bob.objectID
        }
        try first.remove(try #require(first.persistentStores.first))
        let second = try openCoordinator(dir, model: try model(2))
        try await privateContext(second).perform { (context: isolated ManagedObjectContext) throws in
            let bob = try context.existingObject(with: bobID)
            #expect(bob.value(forKey: "contact") as? String == "bob@example.com")
            try context.revertTransaction(at: try token(second, 2))
            #expect(bob.value(forKey: "contact") == nil)
            try context.save()
        }
        try second.remove(try #require(second.persistentStores.first))
        let coordinator = try openCoordinatorRemoving(dir, model: try model(3))
        let store = try #require(coordinator.persistentStores.first)
        let head = try store.log.head
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: bobID).value(forKey: "contact") == nil)
            #expect { try context.revertTransaction(at: try token(coordinator, 3)) } throws: { error in
                "\(error)".contains("nickname")
            }
            let changed = context.hasChanges
            #expect(!changed)
        }
        #expect(try store.log.head == head)
        #expect(try store.log.verify().isClean)
    }

    @Test("after compaction (the transaction and those after it in zstd segments): the revert reads it and the inserted object's later history from the segments; a later change to a stored value still refuses, a derived recomputation doesn't; verify clean")
    func revertAfterCompaction() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        let store = try #require(coordinator.persistentStores.first)
        let departmentID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.insertNewObject(forEntityName: "Department")
            department.setValue("Sales", forKey: "name")
            try context.save()  // 1
            let eve = try context.insertNewObject(forEntityName: "Employee")
            eve.setValue("Eve", forKey: "name")
            eve.setValue(department, forKey: "department")
            try context.save()  // 2
            department.setValue("Ops", forKey: "name")
            try context.save()  // 3
            let other = try context.insertNewObject(forEntityName: "Department")
            other.setValue("Other", forKey: "name")
            try context.save()  // 4
            return department.objectID
        }
        let report = try store.log.compact(CompactionRequest(before: try store.log.head))
        #expect(report.moved == 1...3)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect {
                try context.revertTransaction(at: try token(coordinator, 1))
            } throws: { error in
                guard case .undoConflict(let object, _, _, let found) = error as? ContextError else { return false }
                return object == departmentID.description && found.contains("transaction 3")
            }
            try context.revertTransaction(at: try token(coordinator, 2))
            try context.save()
            #expect(try context.existingObject(with: departmentID).value(forKey: "employeeCount") as? Int64 == 0)
        }
        #expect(try store.log.verify().isClean)
    }

    @Test("a persisted-undo context that reverts its own saved transaction deeper than the groups it read at first doesn't undo that transaction again when undo reaches it")
    func revertedGroupReadLaterIsNotUndone() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let teamID = try await privateContext(coordinator, name: "setup", author: "setup").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Start", forKey: "name")
            try context.save()
            return team.objectID
        }
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Renamed", forKey: "name")
            try context.save()  // 2: deeper than the 32 groups a restarted context reads first
            for number in 0..<40 {
                try context.insertNewObject(forEntityName: "Player").setValue("P\(number)", forKey: "firstName")
                try context.save()
            }
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let undone = try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws -> Int in
            try context.revertTransaction(at: try token(restarted, 2))
            try context.save()
            var count = 0
            while context.canUndo && count < 50 {
                try context.undo()
                try context.save()
                count += 1
            }
            return count
        }
        #expect(undone == 40, "the 40 later groups, not transaction 2's again")
        try await privateContext(restarted).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Start")
        }
        #expect(try #require(restarted.persistentStores.first).log.verify().isClean)
    }

    @Test("reverting a transaction reverted already (and saved) says so, naming the reverting transaction, changing nothing; once that revert is itself reverted the transaction stands again, and isn't called reverted")
    func alreadyReverted() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await importedStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(coordinator, 2))
            try context.save()  // 3: undo of 2
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> Void in
            #expect {
                try context.revertTransaction(at: try token(coordinator, 2))
            } throws: { error in
                guard case .invalidArgument(let text) = error as? ContextError else { return false }
                return text.contains("transaction 2 (save) was reverted already, by transaction 3, and not redone since")
            }
            let changed = context.hasChanges
            #expect(!changed)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try token(coordinator, 3))  // taking the revert back: 4 redoes 2
            try context.save()
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Herons")
        }
        let kinds = try coordinator.history(HistoryRequest()).map(\.kind)
        // 4, the revert of an undo of 2, is written as what it does: the redo of 2 (before
        // session 23, as the undo of 3, which persisted undo ignores).
        #expect(kinds.suffix(2) == [.undo(of: 2, group: 0), .redo(of: 2, group: 0)])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> Void in
            // 2's revert (3) was itself reverted (4): 2 stands again, so it isn't "reverted
            // already". Cy, which 2 inserted, was deleted and brought back since: refused as
            // later work on it.
            #expect {
                try context.revertTransaction(at: try token(coordinator, 2))
            } throws: { error in
                guard case .undoConflict(_, let property, _, let found) = error as? ContextError else { return false }
                return property == "(object)" && found.contains("transaction 3")
            }
        }
    }

    @Test("a revert inside explicit grouping closes the open group first, as undo() does: the revert stays redoable after endUndoGrouping, and the group's own changes stay undoable below it")
    func revertInsideExplicitGrouping() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, bobID, _) = try await importedStore(dir)
        try await privateContext(coordinator, name: "operator", author: "alice").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            let bob = try context.existingObject(with: bobID)
            context.beginUndoGrouping()
            bob.setValue("Robert", forKey: "firstName")
            try context.revertTransaction(at: try token(coordinator, 2))
            #expect(team.value(forKey: "name") as? String == "Otters")
            context.endUndoGrouping()
            // Before, the revert went onto the redo stack under the still-open group, whose
            // closing at endUndoGrouping() cleared the redo stack: the revert was lost.
            let canRedo = context.canRedo
            #expect(canRedo, "the revert is on the redo stack")
            try context.redo()
            #expect(team.value(forKey: "name") as? String == "Herons")
            #expect(bob.value(forKey: "email") as? String == "bob@example.com")
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect(bob.value(forKey: "firstName") as? String == "Robert")
            try context.undo()
            #expect(bob.value(forKey: "firstName") as? String == "Bob")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
            #expect(try context.existingObject(with: bobID).value(forKey: "firstName") as? String == "Bob")
        }
    }
}

