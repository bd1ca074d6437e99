import Foundation
import Strata
import StrataTestSupport
import Testing

/// Reverting a transaction that inserted an object other objects have been linked to since
/// (spec 0006 §25.3): the links are the store's as the reverting context's unsaved work leaves
/// them, as for an undo of a saved insert (§12, "Links made since"). A later link this
/// context has already taken back, unsaved — the other object's side changed, or the object
/// deleted here — goes with the revert (before session 33 the revert was refused as "a link
/// to … made later" while the context's own unsaved work had taken that link back); one its
/// unsaved work made is refused.
@Suite("Reverting an insert: links made later, as the context's unsaved work leaves them")
struct RevertUnsavedLinkTests {
    static func token(_ coordinator: PersistentStoreCoordinator, _ sequence: UInt64) throws -> HistoryToken {
        HistoryToken(storeIdentifier: try #require(coordinator.persistentStores.first).identifier, sequence: sequence)
    }

    /// Transaction 1: Otters (Ada, Bob). Transaction 2: team Kites. Transaction 3 (another
    /// writer): Bob moves to Kites.
    static func kitesStore(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, otters: ManagedObjectID, kites: ManagedObjectID, bob: ManagedObjectID) {
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (otters, bob) = try await saveOtters(coordinator)
        let kites = try await privateContext(coordinator, name: "import", author: "importer").perform { (context: isolated ManagedObjectContext) throws in
            let kites = try context.insertNewObject(forEntityName: "Team")
            kites.setValue("Kites", forKey: "name")
            try context.save()  // 2
            return kites.objectID
        }
        try await privateContext(coordinator, name: "sync", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: bob).setValue(try context.existingObject(with: kites), forKey: "team")
            try context.save()  // 3
        }
        return (coordinator, otters, kites, bob)
    }

    /// The reverting context takes Bob off Kites (back to the Otters, or deleted) before the
    /// revert, unsaved: the link transaction 3 made is taken back, and the revert goes through.
    @Test("a later link the context has taken back, unsaved (the player moved back, or deleted here): the revert of the team's insert goes through and saves cleanly", arguments: [false, true])
    func laterLinkTakenBack(deleting: Bool) async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ottersID, kitesID, bobID) = try await Self.kitesStore(dir)
        try await privateContext(coordinator, name: "ops").perform { (context: isolated ManagedObjectContext) throws in
            let bob = try context.existingObject(with: bobID)
            // With or without reading the team first: its players, in memory, follow.
            #expect((bob.value(forKey: "team") as? ManagedObject)?.objectID == kitesID)
            if deleting {
                context.delete(bob)
            } else {
                bob.setValue(try context.existingObject(with: ottersID), forKey: "team")
            }
            try context.revertTransaction(at: try Self.token(coordinator, 2))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let teams = try context.fetch(FetchRequest(entityName: "Team")).compactMap { $0.value(forKey: "name") as? String }
            #expect(teams == ["Otters"])
            let bob = try? context.existingObject(with: bobID)
            if deleting {
                #expect(bob == nil)
            } else {
                #expect((bob?.value(forKey: "team") as? ManagedObject)?.objectID == ottersID)
            }
        }
        #expect(try #require(coordinator.persistentStores.first).log.verify().isClean)
    }

    /// The same through a relationship without an inverse (a fan's favorite team).
    @Test("a later one-way link (a fan's favorite) the context has cleared, unsaved: the revert goes through and saves cleanly; without that change it is refused")
    func laterOneWayLinkTakenBack() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkNestedTests.fanModel())
        let teamID = try await privateContext(coordinator, name: "import").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Owls", forKey: "name")
            try context.save()  // 1
            return team.objectID
        }
        let fanID = try await privateContext(coordinator, name: "sync").perform { (context: isolated ManagedObjectContext) throws in
            let fan = try context.insertNewObject(forEntityName: "Fan")
            fan.setValue("Flo", forKey: "name")
            fan.setValue(try context.existingObject(with: teamID), forKey: "favorite")
            try context.save()  // 2
            return fan.objectID
        }
        try await privateContext(coordinator, name: "ops").perform { (context: isolated ManagedObjectContext) throws in
            guard let conflict = expectUndoConflict({ try context.revertTransaction(at: try Self.token(coordinator, 1)) }) else { return }
            #expect(conflict.object == fanID.description && conflict.property == "favorite")
            try context.existingObject(with: fanID).setValue(nil, forKey: "favorite")
            try context.revertTransaction(at: try Self.token(coordinator, 1))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 0)
            #expect(try context.existingObject(with: fanID).value(forKey: "favorite") == nil)
        }
        #expect(try #require(coordinator.persistentStores.first).log.verify().isClean)
    }

    /// Links the reverting context's unsaved work makes to the object are refused: a new
    /// fan naming it one way, a player put on it, or a pending undo putting back a link its
    /// own saved work took away.
    @Test("a link the context's unsaved work makes to the inserted object (a new player on it, a fan naming it, a pending undo putting a saved unlink back) refuses the revert, nothing changed", arguments: [0, 1, 2])
    func unsavedLinkMade(_ how: Int) async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, kitesID, bobID) = try await Self.kitesStore(dir)
        let ops = privateContext(coordinator, name: "ops")
        if how == 2 {
            // Saved by this context (4): Bob off Kites; undone, unsaved: Bob back on Kites.
            try await ops.perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: bobID).setValue(nil, forKey: "team")
                try context.save()
                try context.undo()
            }
        }
        try await ops.perform { (context: isolated ManagedObjectContext) throws in
            let kites = try context.existingObject(with: kitesID)
            switch how {
            case 0:
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("Dee", forKey: "firstName")
                player.setValue(kites, forKey: "team")
            case 1:
                // Transaction 3's link taken back here, so only the new one stands.
                try context.existingObject(with: bobID).setValue(nil, forKey: "team")
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("Dee", forKey: "firstName")
                player.setValue(kites, forKey: "team")
            default:
                break
            }
            let before = context.insertedObjects.count + context.updatedObjects.count + context.deletedObjects.count
            let redoable = context.canRedo
            guard let conflict = expectUndoConflict({ try context.revertTransaction(at: try Self.token(coordinator, 2)) }) else { return }
            #expect(conflict.object.contains("/Player/") || conflict.object == kitesID.description, "\(conflict)")
            #expect(context.insertedObjects.count + context.updatedObjects.count + context.deletedObjects.count == before, "nothing changed")
            #expect(context.canRedo == redoable, "no revert on the redo stack")
        }
    }
}
