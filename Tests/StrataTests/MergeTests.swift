import Foundation
import Strata
import StrataTestSupport
import Testing

/// The league store plus a team named "Doomed" (the probe deletes it).
func leagueStoreWithDoomed(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, ManagedObjectID, ManagedObjectID) {
    let (coordinator, teamID) = try await leagueStore(dir)
    let doomedID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        let doomed = try context.insertNewObject(forEntityName: "Team")
        doomed.setValue("Doomed", forKey: "name")
        try context.save()
        return doomed.objectID
    }
    return (coordinator, teamID, doomedID)
}

/// The sequence the first did-merge of `merges` went through, or nil after 30 s (rather than
/// hang when none comes).
func firstMerge(_ merges: AsyncStream<ContextDidMerge>) async -> UInt64? {
    await withTaskGroup(of: UInt64?.self) { group in
        group.addTask {
            for await merge in merges { return merge.throughSequence }
            return nil
        }
        group.addTask {
            try? await Task.sleep(for: .seconds(30))
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

@Suite("Contexts: merging saves between contexts and processes", .serialized)
struct MergeTests {
    @Test("two contexts in one process: each one's saves merge into the other, with did-merge and objects-did-change")
    func twoContextsMergeBothWays() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let a = privateContext(coordinator, name: "a")
        let b = privateContext(coordinator, name: "b")
        for context in [a, b] {
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                context.automaticallyMergesChangesFromParent = true
            }
        }
        // b holds the team with an unsaved change of its own.
        try await b.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("teal", forKey: "uniformColor")
        }
        var bMerges = b.notifications(.didMerge).makeAsyncIterator()
        var bChanges = b.notifications(.objectsDidChange).makeAsyncIterator()
        let bCenter = CenterRecorder(ManagedObjectContext.didMergeChangesObjectIDsNotification, from: b)

        let playerID = try await a.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ng", forKey: "lastName")
            player.setValue(team, forKey: "team")
            try context.save()
            return player.objectID
        }
        let merge = try #require(await bMerges.next())
        #expect(merge.inserted == [playerID])
        #expect(merge.updated == [teamID])
        #expect(merge.refreshed == [teamID])
        #expect(merge.throughSequence == 2)
        let changes = try #require(await bChanges.next())
        #expect(changes.inserted == [playerID])
        #expect(changes.refreshed == [teamID])
        #expect(bCenter.count == 1)
        #expect(bCenter.ids(0, .refreshedObjects) == [teamID])
        #expect(bCenter.value(0, .sequence) as? UInt64 == 2)
        try await b.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Herons", "the other context's change is merged")
            #expect(team.value(forKey: "uniformColor") as? String == "teal", "the unsaved change is kept")
            #expect(team.hasChanges == true)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.map(\.objectID) == [playerID])
            #expect(try context.fetch(FetchRequest(entityName: "Player")).map(\.objectID) == [playerID])
        }

        // a holds the player with an unsaved change; b deletes it and saves its colour.
        try await a.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: playerID).setValue("Ito", forKey: "lastName")
        }
        var aMerges = a.notifications(.didMerge).makeAsyncIterator()
        try await b.perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: playerID))
            try context.save()
        }
        let back = try #require(await aMerges.next())
        #expect(back.deleted == [playerID])
        #expect(back.invalidated == [playerID], "the registered player left the context")
        #expect(back.updated == [teamID])
        try await a.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.registeredObject(for: playerID) == nil)
            #expect(context.hasChanges == false, "the change to an object deleted elsewhere is dropped")
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "uniformColor") as? String == "teal")
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true)
        }
    }

    @Test("a context never merges its own saves; it merges the others' in log order")
    func ownSavesAreNotMerged() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let a = privateContext(coordinator, name: "a")
        try await a.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
        }
        var merges = a.notifications(.didMerge).makeAsyncIterator()
        for name in ["One", "Two"] {
            try await a.perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: teamID).setValue(name, forKey: "name")
                try context.save()
            }
        }
        let otherID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            try context.save()
            return team.objectID
        }
        let merge = try #require(await merges.next())
        #expect(merge.inserted == [otherID])
        #expect(merge.updated.isEmpty, "a's own renames aren't merged back")
        #expect(merge.throughSequence == 4)
        let through = try await a.perform { (context: isolated ManagedObjectContext) throws in try context.mergeStoreChanges() }
        #expect(through == 4)
    }

    @Test("mergeChanges(fromContextDidSave:) takes the did-save value or its NotificationCenter notification")
    func manualMerge() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let reader = privateContext(coordinator, name: "reader")
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
        }
        let writer = privateContext(coordinator, name: "writer")
        var saves = writer.notifications(.didSave).makeAsyncIterator()
        for name in ["Herons", "Comets"] {
            try await writer.perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: teamID).setValue(name, forKey: "name")
                try context.save()
            }
        }
        let first = try #require(await saves.next())
        let second = try #require(await saves.next())
        var changes = reader.notifications(.objectsDidChange).makeAsyncIterator()
        let name = try await reader.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            context.mergeChanges(fromContextDidSave: first)
            return team.value(forKey: "name") as? String
        }
        #expect(name == "Comets", "refreshed from the store, which has both saves")
        #expect(try #require(await changes.next()).refreshed == [teamID])
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)  // only registered objects are refreshed
            let notification = Notification(
                name: ManagedObjectContext.didSaveObjectsNotification, object: nil,
                userInfo: [ManagedObjectContext.NotificationKey.contextDidSave.rawValue: second])
            context.mergeChanges(fromContextDidSave: notification)
            #expect(team.value(forKey: "name") as? String == "Comets")
        }
        #expect(try #require(await changes.next()).refreshed == [teamID])
        // A context ignores its own save.
        var writerChanges = writer.notifications(.objectsDidChange).makeAsyncIterator()
        try await writer.perform { (context: isolated ManagedObjectContext) throws in
            context.mergeChanges(fromContextDidSave: second)
            context.processPendingChanges()
            try context.existingObject(with: teamID).setValue("Kites", forKey: "name")
        }
        #expect(try #require(await writerChanges.next()).refreshed.isEmpty)
    }

    @Test("the main-queue view context merges a background context's save")
    func viewContextMerges() async throws {
        let dir = try TemporaryDirectory()
        let container = PersistentContainer(
            name: "League", managedObjectModel: try SeedModels.leagueManager, storeURL: dir.url.appendingPathComponent("store"))
        try container.loadPersistentStores()
        let view = container.viewContext
        try await view.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
        }
        var merges = view.notifications(.didMerge).makeAsyncIterator()
        let id = try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            try context.save()
            return team.objectID
        }
        let merge = try #require(await merges.next())
        #expect(merge.inserted == [id])
        let name = try await view.perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Team")).first?.value(forKey: "name") as? String
        }
        #expect(name == "Kites")
    }

    @Test("two processes on one store: another process's save is merged when the context next runs; ours reach it too")
    func twoProcesses() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, doomedID) = try await leagueStoreWithDoomed(dir)
        let storePath = dir.url.appendingPathComponent("store").path
        let context = privateContext(coordinator, name: "main")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            _ = try context.existingObject(with: teamID).value(forKey: "name")
            try context.existingObject(with: doomedID).setValue("orange", forKey: "uniformColor")
        }
        var merges = context.notifications(.didMerge).makeAsyncIterator()

        // The other process saves: rename, insert a player, delete "Doomed".
        let saved = try runProcess(BuildProducts.executable("StrataContextProbe"), ["save", storePath, teamID.description, "From the probe"])
        #expect(saved.status == 0, "\(saved.standardError)")
        let words = saved.standardOutput.split(separator: " ").map(String.init)
        #expect(words.first == "saved")
        let sequence = try #require(words.count == 3 ? UInt64(words[1]) : nil)
        let playerURI = try #require(URL(string: words.count == 3 ? words[2].trimmingCharacters(in: .whitespacesAndNewlines) : ""))
        let playerID = try #require(coordinator.managedObjectID(forURIRepresentation: playerURI))

        // Noticed at the next perform (the head check), merged before the block runs.
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "From the probe")
            #expect(context.registeredObject(for: doomedID) == nil, "deleted by the other process")
            #expect(context.hasChanges == false)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.map(\.objectID) == [playerID])
        }
        let merge = try #require(await merges.next())
        #expect(merge.inserted == [playerID])
        #expect(merge.updated == [teamID])
        #expect(merge.deleted == [doomedID])
        #expect(merge.invalidated == [doomedID])
        #expect(merge.throughSequence == sequence)

        // The other way: a watching process merges this process's save.
        let watcher = try ContextProbeProcess(["watch", storePath, teamID.description])
        #expect(watcher.nextLine() == "ready From the probe")
        let ours = try await context.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("From the test", forKey: "name")
            try context.save()
            return try context.mergeStoreChanges()
        }
        watcher.send("check")
        #expect(watcher.nextLine() == "name From the test \(ours)")
        let (status, errors) = try watcher.finish()
        #expect(status == 0, "\(errors)")
    }

    @Test("two processes: the store's file watcher merges another process's save without the context being asked to run")
    func watcherMergesWithoutPerform() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _) = try await leagueStoreWithDoomed(dir)
        let storePath = dir.url.appendingPathComponent("store").path
        let context = privateContext(coordinator, name: "main")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            _ = try context.existingObject(with: teamID).value(forKey: "name")
        }
        let merges = context.notifications(.didMerge)
        let saved = try runProcess(BuildProducts.executable("StrataContextProbe"), ["save", storePath, teamID.description, "Watched"])
        #expect(saved.status == 0, "\(saved.standardError)")
        let sequence = try #require(UInt64(saved.standardOutput.split(separator: " ").dropFirst().first ?? ""))
        // No perform: only the watcher can bring the merge.
        let merged = await firstMerge(merges)
        #expect(merged == sequence, "the watcher noticed the other process's commit")
    }
}
