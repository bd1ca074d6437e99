import Dispatch
import Foundation
import Strata
import StrataTestSupport
import Synchronization
import Testing

/// Session 26 review of concurrency and sharing: re-entrant `performAndWait`, contexts of one
/// store saving at once, stores removed or replaced under a context, two coordinators on one
/// store. Every wait that could deadlock has a deadline, so a deadlock fails the test rather
/// than hanging the run.
@Suite("Concurrency review (session 26)")
struct ConcurrencyReviewTests {
    /// A model with one counter, for lost-update checks.
    static var counterModel: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Counter") {
                    Attribute("name", .string)
                    Attribute("value", .int64, default: 0)
                }
            }
        }
    }

    // MARK: - Re-entrancy

    @Test("performAndWait re-entered from inside perform and performAndWait on the same context runs at once, as one event")
    func reentrantPerformAndWait() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let context = privateContext(coordinator)
        let finished = try await context.perform { (context: isolated ManagedObjectContext) throws -> Int in
            #expect(context.isOnContextQueue)
            let inner = try context.performAndWait { (context: isolated ManagedObjectContext) throws -> Int in
                #expect(context.isOnContextQueue)
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Inner", forKey: "name")
                return try context.performAndWait { (context: isolated ManagedObjectContext) throws -> Int in
                    try context.save()
                    return try context.count(for: FetchRequest(entityName: "Team"))
                }
            }
            return inner
        }
        #expect(finished == 1)
        // The nested blocks are one event: objects-did-change is posted once, at the end of
        // the outermost block, not when an inner one returns.
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let posted = PostCounter()
            context.userInfo["posted"] = posted
            _ = context.addObserver { change in
                if case .objectsDidChange = change.notification { posted.value += 1 }
            }
            try context.performAndWait { (context: isolated ManagedObjectContext) throws in
                try context.insertNewObject(forEntityName: "Team").setValue("Nested", forKey: "name")
            }
            #expect(posted.value == 0)
        }
        let posted = await context.perform { (context: isolated ManagedObjectContext) in (context.userInfo["posted"] as? PostCounter)?.value }
        #expect(posted == 1)
        // And from a plain thread: performAndWait inside performAndWait.
        let result = try runWithDeadline {
            try context.performAndWait { (context: isolated ManagedObjectContext) throws -> Int in
                try context.performAndWait { (context: isolated ManagedObjectContext) throws -> Int in
                    try context.count(for: FetchRequest(entityName: "Team"))
                }
            }
        }
        #expect(result == 2, "the saved team and the nested block's unsaved one")
    }

    @Test("a child's block calling its private parent's performAndWait, and the parent's calling the child's: no deadlock")
    func childCallsParentPerformAndWait() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let parent = privateContext(coordinator, name: "parent")
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent, name: "child")
        let count = try runWithDeadline {
            try child.performAndWait { (child: isolated ManagedObjectContext) throws -> Int in
                let team = try child.insertNewObject(forEntityName: "Team")
                team.setValue("Child's", forKey: "name")
                try child.save()
                return try parent.performAndWait { (parent: isolated ManagedObjectContext) throws -> Int in
                    try parent.save()
                    // The parent's block calling back into the child, which this thread holds.
                    return try child.performAndWait { (child: isolated ManagedObjectContext) throws -> Int in
                        try child.count(for: FetchRequest(entityName: "Team"))
                    }
                }
            }
        }
        #expect(count == 1)
    }

    // MARK: - Many writers

    @Test("many background contexts incrementing one counter from concurrent tasks with the error policy: conflicts reported, no update lost")
    func concurrentIncrementsLoseNothing() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.counterModel)
        let counterID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let counter = try context.insertNewObject(forEntityName: "Counter")
            counter.setValue("c", forKey: "name")
            try context.save()
            return counter.objectID
        }
        let writers = Int(ProcessInfo.processInfo.environment["STRATA_CONCURRENCY_WRITERS"] ?? "") ?? 6
        let increments = Int(ProcessInfo.processInfo.environment["STRATA_CONCURRENCY_INCREMENTS"] ?? "") ?? 15
        // A deadlock never finishes; the deadline is generous because the writers' tasks run on
        // the cooperative pool (a thread per core), which other tests can hold for a minute on a
        // loaded 2-core machine while they wait for child processes (seen: 60 s ran out).
        let totals = try await withDeadline(seconds: 240) {
            try await withThrowingTaskGroup(of: (Int, Int).self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        let context = ManagedObjectContext(
                            concurrencyType: .privateQueue, coordinator: coordinator, name: "w\(writer)", transactionAuthor: "w\(writer)")
                        var conflicts = 0
                        for _ in 0..<increments {
                            while true {
                                let saved = try await context.perform { (context: isolated ManagedObjectContext) throws -> Bool in
                                    let counter = try context.existingObject(with: counterID)
                                    let value = counter.value(forKey: "value") as? Int64 ?? -1
                                    counter.setValue(value + 1, forKey: "value")
                                    do {
                                        try context.save()
                                        return true
                                    } catch let error as ContextError {
                                        guard case .mergeConflicts = error else { throw error }
                                        context.rollback()
                                        context.refresh(counter, mergeChanges: false)
                                        return false
                                    }
                                }
                                if saved { break }
                                conflicts += 1
                            }
                        }
                        return (increments, conflicts)
                    }
                }
                var all: [(Int, Int)] = []
                for try await result in group { all.append(result) }
                return all
            }
        }
        let made = totals.map(\.0).reduce(0, +)
        #expect(made == writers * increments)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let counter = try context.existingObject(with: counterID)
            #expect(counter.value(forKey: "value") as? Int64 == Int64(made))
        }
        let log = try #require(coordinator.persistentStores.first).log
        #expect(try log.head == UInt64(1 + made))
        #expect(try log.verify().isClean)
    }

    // MARK: - Stores going away

    @Test("a store removed while a context holds its objects: reads and saves fail with a clear error, no crash")
    func storeRemovedUnderContext() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            context.retainsRegisteredObjects = true
            _ = team.value(forKey: "name")
            // A fault too.
            for player in try context.fetch(FetchRequest(entityName: "Player")) { context.refresh(player, mergeChanges: false) }
        }
        let store = try #require(coordinator.persistentStores.first)
        try coordinator.remove(store)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            guard let team = context.registeredObject(for: teamID) else {
                Issue.record("the team left the context")
                return
            }
            team.setValue("After removal", forKey: "name")
            #expect(throws: ContextError.self) { try context.save() }
            #expect(throws: ContextError.self) { try context.fetch(FetchRequest(entityName: "Team")) }
        }
    }

    @Test("a store removed and another added: the old store's objects never read or write the new store's objects of the same key")
    func storeReplacedUnderContext() async throws {
        let dirA = try TemporaryDirectory()
        let dirB = try TemporaryDirectory()
        let coordinator = try openCoordinator(dirA, model: try SeedModels.leagueManager)
        let context = privateContext(coordinator)
        let (teamID, loadedID) = try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("A's team", forKey: "name")
            let loaded = try context.insertNewObject(forEntityName: "Team")
            loaded.setValue("A's loaded team", forKey: "name")
            try context.save()
            context.refresh(team, mergeChanges: false)  // a fault again
            return (team.objectID, loaded.objectID)
        }
        // Store B, with its own teams at the same primary keys.
        do {
            let other = try openCoordinator(dirB, model: try SeedModels.leagueManager)
            try await privateContext(other).perform { (context: isolated ManagedObjectContext) throws in
                for name in ["B's team", "B's other team"] { try context.insertNewObject(forEntityName: "Team").setValue(name, forKey: "name") }
                try context.save()
            }
        }
        try coordinator.remove(try #require(coordinator.persistentStores.first))
        try coordinator.addPersistentStore(type: .eventLog, at: dirB.url.appendingPathComponent("store"))
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            guard let team = context.registeredObject(for: teamID), let loaded = context.registeredObject(for: loadedID) else {
                Issue.record("the teams left the context")
                return
            }
            // A loaded object of A changed: the save is refused (before: it wrote B's team).
            loaded.setValue("written through A's loaded object", forKey: "name")
            let changed = #expect(throws: ContextError.self) { try context.save() }
            #expect(changed.map { "\($0)" }?.contains("\(loadedID.uriRepresentation().absoluteString) belongs to the store") == true, "\(String(describing: changed))")
            context.rollback()
            // The fault must not fire from B's team.
            #expect(team.value(forKey: "name") == nil)
            team.setValue("written through A's object", forKey: "name")
            // Before: the save wrote A's change over B's team of the same key.
            let error = #expect(throws: ContextError.self) { try context.save() }
            #expect(error.map { "\($0)" }?.contains("no longer has") == true, "\(String(describing: error))")
            context.rollback()
            // A new object of B referring to A's team: refused too (it would name B's team).
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Dangling", forKey: "lastName")
            player.setValue(team, forKey: "team")
            let reference = #expect(throws: ContextError.self) { try context.save() }
            #expect(reference.map { "\($0)" }?.contains(teamID.uriRepresentation().absoluteString) == true, "\(String(describing: reference))")
            // existingObject(with:) of A's ID: refused, not B's team.
            #expect(throws: ContextError.self) { try context.existingObject(with: teamID) }
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let names = try context.fetch(FetchRequest(entityName: "Team")).map { $0.value(forKey: "name") as? String }
            #expect(Set(names) == ["B's team", "B's other team"])
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 0)
        }
    }

    @Test("contexts outlive the container that made them: they keep the coordinator and store")
    func contextsOutliveContainer() async throws {
        let dir = try TemporaryDirectory()
        func make() throws -> ManagedObjectContext {
            let container = PersistentContainer(
                name: "Outlive", managedObjectModel: try SeedModels.leagueManager, storeURL: dir.url.appendingPathComponent("store"))
            try container.loadPersistentStores()
            return container.newBackgroundContext()
        }
        let context = try make()
        let count = try await context.perform { (context: isolated ManagedObjectContext) throws -> Int in
            try context.insertNewObject(forEntityName: "Team").setValue("kept", forKey: "name")
            try context.save()
            return try context.count(for: FetchRequest(entityName: "Team"))
        }
        #expect(count == 1)
    }

    // MARK: - Two coordinators

    @Test("two coordinators on one store in one process: one's commit is seen by the other's next fetch and refresh")
    func twoCoordinatorsSeeEachOther() async throws {
        let dir = try TemporaryDirectory()
        let (first, teamID) = try await leagueStore(dir)
        let second = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let reader = privateContext(second)
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            _ = try context.existingObject(with: teamID).value(forKey: "name")
        }
        try await privateContext(first).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Renamed by first", forKey: "name")
            try context.save()
        }
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            let fetched = try context.fetch(FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "name == %@", "Renamed by first")))
            #expect(fetched.count == 1)
            let team = try context.existingObject(with: teamID)
            context.refresh(team, mergeChanges: false)
            #expect(team.value(forKey: "name") as? String == "Renamed by first")
        }
    }

    @Test("an automatically merging context after its coordinator's store was removed and another added: it merges the new store's saves")
    func mergingFollowsReplacedStore() async throws {
        let dirA = try TemporaryDirectory()
        let dirB = try TemporaryDirectory()
        let coordinator = try openCoordinator(dirA, model: try SeedModels.leagueManager)
        let merging = privateContext(coordinator, name: "merging")
        await merging.perform { (context: isolated ManagedObjectContext) in context.automaticallyMergesChangesFromParent = true }
        // Store A gets ahead of what B will have: five saves.
        let writer = privateContext(coordinator, name: "writer")
        for n in 0..<5 {
            try await writer.perform { (context: isolated ManagedObjectContext) throws in
                try context.insertNewObject(forEntityName: "Team").setValue("A\(n)", forKey: "name")
                try context.save()
            }
        }
        _ = try await merging.perform { (context: isolated ManagedObjectContext) throws in try context.mergeStoreChanges() }
        // Store B: one team, made elsewhere.
        do {
            let other = try openCoordinator(dirB, model: try SeedModels.leagueManager)
            try await privateContext(other).perform { (context: isolated ManagedObjectContext) throws in
                try context.insertNewObject(forEntityName: "Team").setValue("Old", forKey: "name")
                try context.save()
            }
        }
        try coordinator.remove(try #require(coordinator.persistentStores.first))
        try coordinator.addPersistentStore(type: .eventLog, at: dirB.url.appendingPathComponent("store"))
        let teamID = try await merging.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            let team = try #require(try context.fetch(FetchRequest(entityName: "Team")).first)
            #expect(team.value(forKey: "name") as? String == "Old")
            return team.objectID
        }
        // A context of the coordinator renames it in B and saves; the merging context is told.
        let renamer = privateContext(coordinator, name: "renamer")
        for name in ["New", "Newer"] {
            try await renamer.perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: teamID).setValue(name, forKey: "name")
                try context.save()
            }
            let seen = try await merging.perform { (context: isolated ManagedObjectContext) throws -> String? in
                _ = try context.mergeStoreChanges()
                return context.registeredObject(for: teamID)?.value(forKey: "name") as? String
            }
            // Before: it stayed in step with A's sequence 5 and skipped B's saves 2 and 3.
            #expect(seen == name)
        }
        // Its own saves to B, then another's, are merged as usual.
        try await merging.perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Team").setValue("Mine", forKey: "name")
            try context.save()
        }
        try await renamer.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Newest", forKey: "name")
            try context.save()
        }
        let last = try await merging.perform { (context: isolated ManagedObjectContext) throws -> (String?, UInt64) in
            let through = try context.mergeStoreChanges()
            return (context.registeredObject(for: teamID)?.value(forKey: "name") as? String, through)
        }
        #expect(last.0 == "Newest")
        #expect(last.1 == 5)
    }

    @Test("an automatically merging context after its store was restored from an older copy: it merges the saves made after the restore")
    func mergingFollowsRestoredStore() async throws {
        let dir = try TemporaryDirectory()
        let storeURL = dir.url.appendingPathComponent("store")
        let backupURL = dir.url.appendingPathComponent("backup")
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let merging = privateContext(coordinator, name: "merging")
        await merging.perform { (context: isolated ManagedObjectContext) in context.automaticallyMergesChangesFromParent = true }
        let writer = privateContext(coordinator, name: "writer")
        let teamID = try await writer.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Backed up", forKey: "name")
            try context.save()
            return team.objectID
        }
        try coordinator.replacePersistentStore(at: backupURL, withPersistentStoreFrom: storeURL, type: .eventLog)
        for n in 0..<4 {
            try await writer.perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: teamID).setValue("Later \(n)", forKey: "name")
                try context.save()
            }
        }
        #expect(try await merging.perform { (context: isolated ManagedObjectContext) throws in try context.mergeStoreChanges() } == 5)
        // Restore the copy (head 1) in the store's place, and add it again.
        try coordinator.remove(try #require(coordinator.persistentStores.first))
        try coordinator.replacePersistentStore(at: storeURL, withPersistentStoreFrom: backupURL, type: .eventLog)
        try coordinator.addPersistentStore(type: .eventLog, at: storeURL)
        try await merging.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Backed up")
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("After the restore", forKey: "name")
            try context.save()
        }
        let seen = try await merging.perform { (context: isolated ManagedObjectContext) throws -> String? in
            _ = try context.mergeStoreChanges()
            return context.registeredObject(for: teamID)?.value(forKey: "name") as? String
        }
        // Before: it stayed in step with sequence 5 of the store before the restore.
        #expect(seen == "After the restore")
    }

    @Test("an automatically merging context run while its coordinator has no store: once a store is added again, its save goes through")
    func mergingWithoutStoreDoesNotPoisonSave() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let merging = privateContext(coordinator, name: "merging")
        await merging.perform { (context: isolated ManagedObjectContext) in context.automaticallyMergesChangesFromParent = true }
        try coordinator.remove(try #require(coordinator.persistentStores.first))
        // Blocks run while there is no store: each one's merge finds nothing to merge from.
        for _ in 0..<2 { await merging.perform { (_: isolated ManagedObjectContext) in } }
        try coordinator.addPersistentStore(type: .eventLog, at: dir.url.appendingPathComponent("store"))
        try await merging.perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Team").setValue("After", forKey: "name")
            // Before: "the coordinator has no persistent store", twice, from the merges.
            try context.save()
        }
    }

    @Test("a main-queue context in a program that runs dispatchMain(): perform, the non-async perform and performAndWait (from another thread, nested) all run")
    func mainQueueUnderDispatchMain() throws {
        let dir = try TemporaryDirectory()
        let result = try runProcess(BuildProducts.executable("StrataContextProbe"), ["mainqueue", dir.file("store")])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.split(separator: "\n") == ["main thread 0", "perform 1", "scheduled on-queue", "waited 1", "nested 1"], "\(result.standardOutput)")
    }

    @Test("coordinators opening one new store from several threads at once: every open succeeds, one store UUID, saves from all land")
    func concurrentOpensOfNewStore() async throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("store")
        let model = try SeedModels.leagueManager
        let count = 6
        // Plain threads, not tasks: under a loaded test run, other suites' blocking waits can
        // hold every thread of the cooperative pool, and tasks here then never start (a soak
        // run once timed out that way with nothing deadlocked).
        let opened = Mutex<[Result<PersistentStoreCoordinator, any Error>]>([])
        let group = DispatchGroup()
        for _ in 0..<count {
            group.enter()
            Thread.detachNewThread {
                let result = Result { () throws -> PersistentStoreCoordinator in
                    let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
                    try coordinator.addPersistentStore(type: .eventLog, at: url)
                    return coordinator
                }
                opened.withLock { $0.append(result) }
                group.leave()
            }
        }
        guard group.wait(timeout: .now() + 60) == .success else { throw DeadlineExceeded(seconds: 60) }
        // Before, an open now and then found the directory holding the lock file another
        // thread's open had just made, and refused it: "the directory holds other files".
        let coordinators = try opened.withLock { $0 }.map { try $0.get() }
        #expect(coordinators.count == count)
        let identifiers = Set(coordinators.compactMap { $0.persistentStores.first?.identifier })
        #expect(identifiers.count == 1)
        for (index, coordinator) in coordinators.enumerated() {
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                try context.insertNewObject(forEntityName: "Team").setValue("T\(index)", forKey: "name")
                try context.save()
            }
        }
        try await privateContext(coordinators[0]).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == count)
        }
        #expect(try coordinators[0].persistentStores[0].log.verify().isClean)
    }

    @Test("another process saves the object this context changed: the error policy reports the conflict with their value; object-trump keeps ours and their insert")
    func conflictWithAnotherProcess() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let context = privateContext(coordinator, name: "main")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Ours", forKey: "name")
        }
        let saved = try runProcess(
            BuildProducts.executable("StrataContextProbe"), ["save", dir.url.appendingPathComponent("store").path, teamID.description, "Theirs"])
        #expect(saved.status == 0, "\(saved.standardError)")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            do {
                try context.save()
                Issue.record("the save went through over another process's change")
            } catch ContextError.mergeConflicts(let conflicts) {
                #expect(conflicts.map(\.objectID) == [teamID])
                let name = conflicts.first?.properties.first { $0.name == "name" }
                #expect(name?.theirs == .attribute(.string("Theirs")) && name?.ours == .attribute(.string("Ours")), "\(String(describing: name))")
            }
            context.mergePolicy = StandardMergePolicy.mergeByPropertyObjectTrump
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Ours")
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.compactMap { $0.value(forKey: "lastName") as? String } == ["Probe"])
        }
    }
}

/// Counts the notifications a synchronous observer saw (kept in a context's `userInfo`).
private final class PostCounter {
    var value = 0
}

/// Runs `body` on a thread of its own and waits at most `seconds` for it; a deadlock fails
/// (the thread is left behind) instead of hanging the run.
func runWithDeadline<T: Sendable>(seconds: Double = 20, _ body: @escaping @Sendable () throws -> T) throws -> T {
    let result = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        let outcome = Result { try body() }
        result.withLock { $0 = outcome }
        done.signal()
    }
    guard done.wait(timeout: .now() + seconds) == .success, let outcome = result.withLock({ $0 }) else {
        throw DeadlineExceeded(seconds: seconds)
    }
    return try outcome.get()
}

/// Awaits `body`, failing with ``DeadlineExceeded`` after `seconds`. The body runs in a task
/// of its own that isn't awaited once the deadline passes, so a deadlock fails the test
/// instead of hanging the run.
func withDeadline<T: Sendable>(seconds: Double, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let once = ResumeOnce<T>()
    return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        once.set(continuation)
        Task {
            let result = await outcome(of: body)
            once.resume(with: result)
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
            once.resume(with: .failure(DeadlineExceeded(seconds: seconds)))
        }
    }
}

/// A continuation resumed by whichever comes first.
private final class ResumeOnce<T: Sendable>: Sendable {
    private let continuation = Mutex<CheckedContinuation<T, any Error>?>(nil)
    func set(_ continuation: CheckedContinuation<T, any Error>) { self.continuation.withLock { $0 = continuation } }
    func resume(with result: Result<T, any Error>) { continuation.withLock { $0.take() }?.resume(with: result) }
}

/// What `body` returned or threw.
private func outcome<T>(of body: () async throws -> T) async -> Result<T, any Error> {
    do { return .success(try await body()) } catch { return .failure(error) }
}

/// A wait that ran past its deadline: a deadlock, most likely.
struct DeadlineExceeded: Error, CustomStringConvertible {
    let seconds: Double
    var description: String { "no result within \(seconds) s (deadlock?)" }
}

extension ConcurrencyReviewTests {
    @Test("stalenessInterval 0: a fault a fetch left its row on reads the store when it fires; the default -1 fires from the row")
    func stalenessIntervalHonoured() async throws {
        let dir = try TemporaryDirectory()
        let (writer, teamID) = try await leagueStore(dir)
        let second = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let fresh = privateContext(second, name: "fresh")
        let cached = privateContext(second, name: "cached")
        let batched = privateContext(second, name: "batched")
        for context in [fresh, cached, batched] {
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                if context.name != "cached" { context.stalenessInterval = 0 }
                context.retainsRegisteredObjects = true
                var request = FetchRequest(entityName: "Team")
                if context.name == "batched" { request.fetchBatchSize = 1 }
                let teams = try context.fetch(request)
                #expect(teams.count == 1 && teams[0].isFault)
            }
        }
        // Another coordinator (as another process would) renames the team.
        try await privateContext(writer).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Renamed", forKey: "name")
            try context.save()
        }
        let names = try await [fresh, cached, batched].asyncMap { context in
            try await context.perform { (context: isolated ManagedObjectContext) throws -> String? in
                let team = context.registeredObject(for: teamID)
                #expect(team?.isFault == true)
                return team?.value(forKey: "name") as? String
            }
        }
        // Before: the fault fired from the row the fetch left, whatever the interval.
        #expect(names[0] == "Renamed", "stalenessInterval 0 read the fetched row")
        #expect(names[1] != "Renamed", "the default (-1) fires from the fetched row, as Core Data's does")
        #expect(names[2] == "Renamed", "stalenessInterval 0, batched fetch")
        // With 0, the save of a change to it doesn't conflict: the values read are the store's.
        try await fresh.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Again", forKey: "uniformColor")
            try context.save()
        }
    }
}

extension Array where Element: Sendable {
    /// `transform` applied to each element in order.
    func asyncMap<T: Sendable>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
