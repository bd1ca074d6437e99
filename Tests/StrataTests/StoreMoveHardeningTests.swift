import Foundation
import Strata
import Synchronization
import StrataLog
import StrataTestSupport
import Testing

/// Findings of the review of store moves racing this process's writers and observers
/// (spec 0006 §19.7, spec 0009 §4).
@Suite("Contexts: store moves, hardening", .serialized)
struct StoreMoveHardeningTests {
    /// The first value `sequence` yields that `matches`, or nil after `seconds` (rather than
    /// hang when none comes).
    private func first<S: AsyncSequence & Sendable>(
        _ sequence: S, within seconds: Int = 5, where matches: @escaping @Sendable (S.Element) -> Bool
    ) async throws -> S.Element? where S.Element: Sendable {
        try await withThrowingTaskGroup(of: S.Element?.self) { group in
            group.addTask {
                for try await element in sequence where matches(element) { return element }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                return nil
            }
            let found = try await group.next() ?? nil
            group.cancelAll()
            return found
        }
    }

    @Test("a history consumer's feed made before the move reads on from the new store: it delivers a save made after the move (before, it waited on the old place for ever)")
    func consumerFeedFollowsTheMove() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let old = try #require(coordinator.persistentStores.first)
        let consumer = try coordinator.historyConsumer(named: "indexer", startingAfter: try coordinator.currentHistoryToken())
        let feed = try consumer.feed()
        let moved = try coordinator.migratePersistentStore(old, to: dir.url.appendingPathComponent("moved.strata"))
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        let head = try moved.log.head
        let delivered = try await first(feed) { $0.token.sequence >= head }
        #expect(delivered?.token.sequence == head, "the consumer's feed delivered the save to the new store")
    }

    @Test("setMetadata racing moves writes to the store that took the old one's place: it never throws LogError.storeMoved (before, a call that took the store before a move threw it and wrote nothing)")
    func setMetadataRacingMoves() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let stop = Atomic<Bool>(false)
        let failures = Mutex<[String]>([])
        let written = Atomic<Int>(0)
        let setter = Thread {
            var number: Int64 = 0
            while !stop.load(ordering: .acquiring) {
                guard let store = coordinator.persistentStores.first else { continue }
                number += 1
                do {
                    try coordinator.setMetadata(["number": .integer(number)], for: store)
                    written.store(Int(number), ordering: .releasing)
                } catch ContextError.invalidArgument {
                    // The move finished before the call: the store isn't the coordinator's any more.
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        setter.start()
        /// Waits (at most 5 s) until two more calls succeeded.
        func twoMoreWritten() async throws {
            let before = written.load(ordering: .acquiring)
            let deadline = ContinuousClock.now + .seconds(5)
            while written.load(ordering: .acquiring) < before + 2, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(1))
            }
        }
        var store = try #require(coordinator.persistentStores.first)
        for hop in 0..<6 {
            try await twoMoreWritten()
            store = try coordinator.migratePersistentStore(store, to: dir.url.appendingPathComponent("hop\(hop).strata"))
        }
        try await twoMoreWritten()
        stop.store(true, ordering: .releasing)
        while !setter.isFinished { try await Task.sleep(for: .milliseconds(1)) }
        #expect(failures.withLock { $0 }.isEmpty, "setMetadata failed: \(failures.withLock { Array($0.prefix(3)) })")
        let stored = try store.log.userMetadata()["number"]
        #expect(stored == coordinator.metadata(for: store)["number"], "the final store's cached metadata is what it holds")
    }

    @Test("store-change observers registered while the store moves all follow it: each hears the next save to the new store (before, one registered on the old store just after the move woke its observers watched the old place for ever)")
    func observersRegisteredDuringMovesFollow() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let context = privateContext(coordinator)
        let heard = Mutex<[Int: UInt64]>([:])
        /// The observations registered while a move ran (their registration began or ended then).
        let observations = Mutex<[Int: StoreObservation]>([:])
        let moving = Atomic<Bool>(false)
        let stop = Atomic<Bool>(false)
        let registered = Atomic<Int>(0)
        /// Whether the registrar saw `moving` off, so it registers nothing now.
        let idle = Atomic<Bool>(true)
        let registrar = Thread {
            var index = 0
            while !stop.load(ordering: .acquiring) {
                guard moving.load(ordering: .acquiring) else {
                    idle.store(true, ordering: .releasing)
                    continue
                }
                idle.store(false, ordering: .releasing)
                index += 1
                let number = index
                guard let observation = try? coordinator.observeStoreChanges({ token in
                    heard.withLock { $0[number] = max($0[number] ?? 0, token.sequence) }
                }) else { continue }
                observations.withLock { $0[number] = observation }
                registered.store(number, ordering: .releasing)
            }
        }
        registrar.start()
        defer { stop.store(true, ordering: .releasing) }
        var store = try #require(coordinator.persistentStores.first)
        var deaf = 0
        var kept = 0
        for hop in 0..<12 {
            moving.store(true, ordering: .releasing)
            // The registrar is registering as the move runs.
            while idle.load(ordering: .acquiring) { await Task.yield() }
            store = try coordinator.migratePersistentStore(store, to: dir.url.appendingPathComponent("hop\(hop).strata"))
            // The registration running as the move ended finishes too.
            let last = registered.load(ordering: .acquiring)
            while registered.load(ordering: .acquiring) < last + 2 { await Task.yield() }
            moving.store(false, ordering: .releasing)
            // No registration runs on during the save: each one heard it, or missed a move.
            while !idle.load(ordering: .acquiring) { await Task.yield() }
            let name = "Team \(hop)"
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: teamID).setValue(name, forKey: "name")
                try context.save()
            }
            let head = try store.log.head
            let these = observations.withLock { observations in
                defer { observations = [:] }
                return observations
            }
            kept += these.count
            func unheard() -> Int { heard.withLock { heard in these.keys.filter { (heard[$0] ?? 0) < head }.count } }
            let deadline = ContinuousClock.now + .seconds(2)
            while unheard() > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            deaf += unheard()
            these.values.forEach { $0.cancel() }
        }
        #expect(kept > 0, "observers were registered while the store moved")
        #expect(deaf == 0, "\(deaf) of \(kept) observers registered during the moves didn't hear the next save")
    }

    @Test("a store-change observation on a store that was removed and released is cancelled without a crash, and the store goes (before, cancelling it released the store inside its monitor's lock: 'Recursive call to lock Mutex')")
    func cancellingAnObservationOfAReleasedStore() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let observation = try coordinator.observeStoreChanges { _ in }
        let stream = try coordinator.storeChanges()
        weak var log: EventLog?
        do {
            let store = try #require(coordinator.persistentStores.first)
            log = store.log
            try coordinator.remove(store)
        }
        observation.cancel()
        _ = consume stream
        #expect(log == nil, "the store removed, its log closed once the observations ended")
    }

    /// Runs `move` on a thread of its own while another thread holds this process's writes to
    /// `store` (as a save committing does), and `meanwhile` once the move waits for them;
    /// then lets the writes go and returns what the move threw, if anything.
    private func moveWhileWritesAreHeld(
        on store: PersistentStore, _ move: @escaping @Sendable () throws -> Void, meanwhile: () async throws -> Void
    ) async throws -> (any Error)? {
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holder = Thread {
            try? store.log.holdingWrites {
                held.signal()
                release.wait()
            }
        }
        holder.start()
        held.wait()
        let outcome = Mutex<(any Error)??>(nil)
        let mover = Thread {
            do {
                try move()
                outcome.withLock { $0 = .some(nil) }
            } catch {
                outcome.withLock { $0 = .some(error) }
            }
        }
        mover.start()
        do {
            // The move gets to wait for the writes.
            try await Task.sleep(for: .milliseconds(200))
            try await meanwhile()
        } catch {
            release.signal()
            throw error
        }
        release.signal()
        while true {
            if let thrown = outcome.withLock({ $0 }) { return thrown }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    @Test("a move that fails removes only the directories it made that are still empty: another coordinator's store moved meanwhile into a directory the failed move made stays (before, the failed move deleted that directory with the other store in it)")
    func failedMoveKeepsWhatOthersPutInItsDirectories() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let store = try #require(coordinator.persistentStores.first)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        // The copy fails: a segment file the store's manifest names is missing.
        let report = try store.log.compact(CompactionRequest(before: try store.log.head))
        try FileManager.default.removeItem(atPath: try #require(report.segmentFile))

        let otherDir = try TemporaryDirectory()
        let (other, _) = try await leagueStore(otherDir)
        let otherDestination = dir.url.appendingPathComponent("made/Other.strata")
        let error = try await moveWhileWritesAreHeld(on: store) {
            try coordinator.migratePersistentStore(store, to: dir.url.appendingPathComponent("made/deeper/Moved.strata"))
        } meanwhile: {
            // The other coordinator's store moves into the directory the move made.
            try other.migratePersistentStore(try #require(other.persistentStores.first), to: otherDestination)
        }
        #expect(error.map { "\($0)" }?.contains("is missing") == true, "the move failed: \(String(describing: error))")
        #expect(FileManager.default.fileExists(atPath: otherDestination.path), "the other coordinator's store is still there")
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("made/deeper").path), "the failed move's own directory is gone")
        try await privateContext(other).perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Team").setValue("Kites", forKey: "name")
            try context.save()
        }
        let reopened = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        try reopened.addPersistentStore(type: .eventLog, at: otherDestination)
        let count = try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            try context.count(for: FetchRequest(entityName: "Team"))
        }
        #expect(count == 2, "the other store kept its saves")
    }

    @Test("a move never replaces a store that appeared at its destination while it waited for this process's writes: it is refused with storeInUse and the store there is kept (before, the move replaced it with its copy)")
    func moveDoesNotReplaceAStoreThatAppearedMeanwhile() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let store = try #require(coordinator.persistentStores.first)
        let destination = dir.url.appendingPathComponent("Moved.strata")
        let otherDir = try TemporaryDirectory()
        let (other, _) = try await leagueStore(otherDir)
        let otherUUID = try #require(other.persistentStores.first).identifier
        let error = try await moveWhileWritesAreHeld(on: store) {
            try coordinator.migratePersistentStore(store, to: destination)
        } meanwhile: {
            // Another coordinator puts its store there, and closes it.
            let placed = try other.migratePersistentStore(try #require(other.persistentStores.first), to: destination)
            try other.remove(placed)
        }
        #expect(error.map { "\($0)" }?.contains("something is there already") == true, "the move was refused: \(String(describing: error))")
        #expect(coordinator.persistentStores.first === store, "the coordinator keeps its store")
        let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: destination)
        #expect(metadata["StoreUUID"] == .string(otherUUID.uuidString), "the store that appeared there is kept")
    }
    @Test("a store-change observation or stream doesn't keep a removed store open: the store is destroyed while they live (before, their observer held the store, and destroying it was refused as open in this process)")
    func observationsDontKeepARemovedStoreOpen() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let observation = try coordinator.observeStoreChanges { _ in }
        let stream = try coordinator.storeChanges()
        let url = try #require(coordinator.persistentStores.first?.url)
        try coordinator.remove(try #require(coordinator.persistentStores.first))
        #expect(throws: Never.self) { try coordinator.destroyPersistentStore(at: url, type: .eventLog) }
        #expect(!FileManager.default.fileExists(atPath: url.path), "the store was destroyed")
        observation.cancel()
        _ = consume stream
    }
    @Test("a history consumer made before a move is the same consumer as the one the moved store lists: equal, with the same hash (before, the two differed by the store they were made with)")
    func consumerIdentityFollowsTheMove() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let before = try coordinator.historyConsumer(named: "indexer")
        try coordinator.migratePersistentStore(try #require(coordinator.persistentStores.first), to: dir.url.appendingPathComponent("moved.strata"))
        let listed = try coordinator.historyConsumers().map(\.consumer)
        #expect(listed == [before], "the moved store's consumer is the one made before the move")
        #expect(Set(listed).contains(before))
        #expect(try coordinator.historyConsumer(named: "indexer") == before)
        #expect(try coordinator.historyConsumer(named: "other") != before, "another name is another consumer")
    }
}
