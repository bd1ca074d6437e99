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
}
