import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Runs the probe's `die` mode: another process renames the team `name` in one save and is
/// killed (SIGKILL) right after LMDB writes that commit's meta page, before LMDB publishes the
/// commit to readers. Fails unless it died so.
private func killWriterAfterItsMetaPage(_ dir: TemporaryDirectory, _ teamID: ManagedObjectID, renamingTo name: String) throws {
    let writer = try ContextProbeProcess(["die", dir.url.appendingPathComponent("store").path, teamID.description, name])
    let (status, errors) = try writer.finish()
    try #require(
        writer.process.terminationReason == .uncaughtSignal && status == SIGKILL,
        "the probe wasn't killed at its meta page write (status \(status)): \(errors)")
}

private func storedName(_ id: ManagedObjectID, in coordinator: PersistentStoreCoordinator) async throws -> String? {
    try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        try context.existingObject(with: id).value(forKey: "name") as? String
    }
}

/// A writer killed between LMDB's write of its commit's meta page and LMDB's publication of
/// the commit to readers (`MultiProcessReviewTests.killedWriter`'s intermittent failure,
/// made deterministic): the commit is on disk and every later write builds on it, so this
/// process's reads, merges and saves must see it too.
@Suite("A writer killed after LMDB wrote its commit but before LMDB published it", .serialized)
struct KilledWriterFixTests {
    @Test("a merging context's next block merges the dead writer's commit, and its save after that merge goes through")
    func mergeThenSave() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let log = coordinator.persistentStores[0].log
        let before = try log.head
        let context = privateContext(coordinator, name: "app")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            _ = try context.existingObject(with: teamID).value(forKey: "name")
        }
        try killWriterAfterItsMetaPage(dir, teamID, renamingTo: "Theirs")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            // The block's merge saw the dead writer's commit…
            #expect(team.value(forKey: "name") as? String == "Theirs")
            team.setValue("Ours", forKey: "name")
            // …so the save doesn't conflict with it (before: a conflict on "name", merged
            // through `before`, the store at `before + 1`, and again after each merge).
            try context.save()
        }
        #expect(try await storedName(teamID, in: coordinator) == "Ours")
        #expect(try log.head == before + 2)
        #expect(try log.verify().isClean)
    }

    @Test("the head, a fetch and the store monitor see the dead writer's commit without a write of this process")
    func readsSeeTheCommit() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let log = coordinator.persistentStores[0].log
        let before = try log.head
        try killWriterAfterItsMetaPage(dir, teamID, renamingTo: "Theirs")
        #expect(try log.head == before + 1)
        #expect(try await storedName(teamID, in: coordinator) == "Theirs")
        #expect(try log.storeMonitor.checkForChanges() == before + 1)
    }

    @Test("a merging context that runs no block is told of the dead writer's commit by the store watcher")
    func watcherAnnouncesTheCommit() async throws {
        guard StoreMonitor.canWatchOtherProcesses else { return }
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let before = try coordinator.persistentStores[0].log.head
        let context = privateContext(coordinator, name: "app")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            _ = try context.existingObject(with: teamID).value(forKey: "name")
        }
        let merges = context.notifications(.didMerge)
        try killWriterAfterItsMetaPage(dir, teamID, renamingTo: "Theirs")
        // The watcher's re-reads after the dead writer's last file event (before: each read
        // the commit before it, and nothing announced the dead writer's commit).
        #expect(await firstMerge(merges) == before + 1)
    }
}
