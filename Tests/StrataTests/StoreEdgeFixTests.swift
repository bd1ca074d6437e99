import Foundation
import Strata
import StrataLog
import StrataStorage
import StrataTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Store, controller and fetched-property edges (session 29): saves into a store whose
/// directory went away while open, a results controller's sections firing every fault,
/// fetched properties and the source's fault, rollback and kept fetched values, and a dead
/// writer's commit a read-only open can't see.
@Suite("Store edges: deleted stores, controller faults, fetched properties, unpublished commits", .serialized)
struct StoreEdgeFixTests {
    // MARK: - A store deleted or moved away while open

    /// Inserts a team named `name` in a new context of `coordinator` and saves; returns the
    /// error the save threw (nil if it went through) and whether the context kept its changes.
    private func saveTeam(_ name: String, in coordinator: PersistentStoreCoordinator) async throws -> (error: (any Error)?, stillChanged: Bool) {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue(name, forKey: "name")
            do {
                try context.save()
                return (nil, context.hasChanges)
            } catch {
                return (error, context.hasChanges)
            }
        }
    }

    @Test("a save into a store whose directory was deleted while open is refused with an error naming the path, and the context keeps its changes (before: it 'succeeded' into the unlinked file and was lost)")
    func saveIntoDeletedStore() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let path = dir.url.appendingPathComponent("store").path
        try FileManager.default.removeItem(atPath: path)
        let (error, stillChanged) = try await saveTeam("Lost", in: coordinator)
        let thrown = try #require(error, "the save went through into a deleted store")
        let text = "\(thrown)"
        #expect(text.contains("\(path)/data.mdb is gone"), "\(text)")
        #expect(text.contains("the transaction was not committed"), "\(text)")
        #expect(text.contains("STRATA_DATA_FILE_GONE"), "\(text)")
        #expect(stillChanged, "the unsaved changes stay in the context")
        // A write through the log itself is refused the same way.
        var draft = TransactionDraft(author: "direct")
        draft.insert("Team", values: ["name": .attribute(.string("Direct"))])
        #expect(throws: LMDBError.self) { try coordinator.persistentStores[0].log.commit(draft) }
        do {
            try coordinator.persistentStores[0].log.commit(draft)
        } catch let error as LMDBError {
            #expect(error.code == .dataFileGone)
        }
    }

    @Test("a store deleted and made anew at its path while open: the old handle's saves are refused and the new store is left alone; a store renamed while open takes its saves at the new place")
    func saveIntoReplacedOrRenamedStore() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let path = dir.url.appendingPathComponent("store").path
        try FileManager.default.removeItem(atPath: path)
        let fresh = try EventLog(path: path, model: try SeedModels.leagueManager)
        let freshHead = try fresh.head
        let (error, stillChanged) = try await saveTeam("Lost", in: coordinator)
        let thrown = try #require(error, "the save went through into the deleted store")
        #expect("\(thrown)".contains("\(path)/data.mdb is gone"), "\(thrown)")
        #expect(stillChanged)
        #expect(try fresh.head == freshHead, "the new store at the path is not written by the old handle")
        #expect(try fresh.verify().isClean)

        // Renamed within its file system: the file keeps its link, and the save lands there.
        let renamedDirectory = try TemporaryDirectory()
        let (renamed, _) = try await leagueStore(renamedDirectory)
        let log = renamed.persistentStores[0].log
        let head = try log.head
        try FileManager.default.moveItem(atPath: renamedDirectory.file("store"), toPath: renamedDirectory.file("moved"))
        let (renamedError, _) = try await saveTeam("Kept", in: renamed)
        #expect(renamedError == nil, "\(String(describing: renamedError))")
        #expect(try log.head == head + 1)
        #expect(try log.verify().isClean)
    }

    // MARK: - A results controller's sections and the results' faults

    @Test("performFetch with a sectionNameKeyPath leaves the results faults (before: every result's fault fired), and the sections hold the right objects")
    func sectionsLeaveFaults() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (name, color) in [("Cats", "Red"), ("Ants", "Blue"), ("Dogs", nil), ("Bees", "Blue")] {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue(name, forKey: "name")
                team.setValue(color, forKey: "uniformColor")
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("\(name) player", forKey: "lastName")
                player.setValue(team, forKey: "team")
            }
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let request = FetchRequest(
                entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "uniformColor"), FetchSortDescriptor(key: "name")])
            let teams = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "uniformColor")
            try teams.performFetch()
            let objects = try #require(teams.fetchedObjects)
            #expect(objects.count == 4)
            let faults = objects.map(\.isFault)
            #expect(!faults.contains(false), "\(faults)")
            let sections = try #require(teams.sections)
            #expect(sections.map(\.name) == ["", "Blue", "Red"])
            #expect(sections.map { $0.objects.map { $0.value(forKey: "name") as? String ?? "?" } } == [["Dogs"], ["Ants", "Bees"], ["Cats"]])
        }
        // Through a to-one: the players stay faults (the teams are read to name the sections).
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let request = FetchRequest(
                entityName: "Player", sortDescriptors: [FetchSortDescriptor(key: "team.name"), FetchSortDescriptor(key: "lastName")])
            let players = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "team.name")
            try players.performFetch()
            let objects = try #require(players.fetchedObjects)
            #expect(objects.count == 4)
            let faults = objects.map(\.isFault)
            #expect(!faults.contains(false), "\(faults)")
            #expect(players.sections?.map(\.name) == ["Ants", "Bees", "Cats", "Dogs"])
            #expect(players.sections?.map { $0.objects.map { $0.value(forKey: "lastName") as? String ?? "?" } }
                == [["Ants player"], ["Bees player"], ["Cats player"], ["Dogs player"]])
        }
    }

    // MARK: - Fetched properties

    @Test("reading a fetched property fires the source object's fault, as Core Data does (before: the object stayed a fault)")
    func fetchedPropertyFiresSource() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try FetchedPropertyCacheTests.league)
        let teamID = try await FetchedPropertyCacheTests.seed(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.object(with: teamID)
            #expect(team.isFault)
            #expect(FetchedPropertyCacheTests.names(team.value(forKey: "veterans")) == ["Bob", "Cid"])
            #expect(!team.isFault, "reading the fetched property fired the source's fault")
        }
    }

    @Test("rollback() drops the kept fetched-property values of the objects it restores (Core Data's rollback refreshes them); an object it doesn't touch, and undo, keep them")
    func rollbackDropsKeptFetchedValues() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try FetchedPropertyCacheTests.league)
        let teamID = try await FetchedPropertyCacheTests.seed(coordinator)
        let context = privateContext(coordinator)
        func addVeteran(_ name: String, age: Int) async throws {
            try await privateContext(coordinator).perform { (other: isolated ManagedObjectContext) throws in
                try FetchedPropertyCacheTests.addPlayer(name, age: age, to: try other.existingObject(with: teamID), in: other)
                try other.save()
            }
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            let team = try context.existingObject(with: teamID)
            #expect(FetchedPropertyCacheTests.names(team.value(forKey: "veterans")) == ["Bob", "Cid"])
        }
        try await addVeteran("Dee", age: 50)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            // Untouched by the rollback: kept.
            context.rollback()
            #expect(FetchedPropertyCacheTests.names(team.value(forKey: "veterans")) == ["Bob", "Cid"])
            // Undo keeps them too: it changes values as setters do.
            team.setValue("Blues", forKey: "name")
            context.processPendingChanges()
            try context.undo()
            #expect(!team.hasChanges)
            #expect(FetchedPropertyCacheTests.names(team.value(forKey: "veterans")) == ["Bob", "Cid"])
            // Restored by the rollback: dropped, and fetched again at the next read.
            team.setValue("Greens", forKey: "name")
            context.rollback()
            #expect(team.value(forKey: "name") as? String == "Reds")
            #expect(FetchedPropertyCacheTests.names(team.value(forKey: "veterans")) == ["Bob", "Cid", "Dee"])
        }
        // A deletion rolled back: dropped too.
        try await addVeteran("Eve", age: 60)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            context.delete(team)
            context.rollback()
            #expect(!team.isDeleted)
            #expect(FetchedPropertyCacheTests.names(team.value(forKey: "veterans")) == ["Bob", "Cid", "Dee", "Eve"])
        }
    }

    // MARK: - A dead writer's commit and read-only opens

    @Test("a read-only open tells a dead writer's unpublished commit (unpublishedCommit(), and the CLI's warning); a writable open elsewhere publishes it")
    func readOnlyOpenSeesUnpublishedCommit() throws {
        let dir = try TemporaryDirectory()
        let path = dir.url.appendingPathComponent("store").path
        let teamURI: String
        do {
            let log = try EventLog(path: path, model: try SeedModels.leagueManager)
            var draft = TransactionDraft(author: "seed")
            let team = draft.insert("Team", values: ["name": .attribute(.string("Otters"))])
            let result = try log.commit(draft)
            teamURI = ObjectURI.permanent(try #require(result.permanentID(for: team)), storeUUID: log.storeUUID).absoluteString
        }
        // Held open read-only here (MDB_RDONLY), so no open below is the environment's first.
        let reader = try EventLog(openingExistingAt: path, readOnly: true)
        #expect(try reader.unpublishedCommit() == nil)
        let writer = try ContextProbeProcess(["die", path, teamURI, "Theirs"])
        let (status, errors) = try writer.finish()
        try #require(
            writer.process.terminationReason == .uncaughtSignal && status == SIGKILL,
            "the probe wasn't killed at its meta page write (status \(status)): \(errors)")
        let unpublished = try #require(try reader.unpublishedCommit(), "the dead writer's commit isn't reported")
        #expect(unpublished.visible < unpublished.newest)
        #expect(try reader.head == 1, "a read-only open still sees the commit before")

        let strata = BuildProducts.executable("strata")
        let info = try runProcess(strata, ["info", path])
        #expect(info.status == 0, "\(info.standardError)")
        #expect(
            info.standardError.contains(
                "strata: warning: the store's newest commit (LMDB transaction \(unpublished.newest)) isn't visible to read-only opens: its writer died before publishing it, so this shows the store as of transaction \(unpublished.visible)."),
            "\(info.standardError)")

        // A writable open in another process publishes it: the warning's advice.
        let publish = try runProcess(strata, ["compact", path, "--dry-run"])
        #expect(publish.status == 0, "\(publish.standardError)")
        #expect(try reader.unpublishedCommit() == nil)
        #expect(try reader.head == 2)
        let again = try runProcess(strata, ["info", path])
        #expect(!again.standardError.contains("warning"), "\(again.standardError)")
    }
}
