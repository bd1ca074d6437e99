import Foundation
import Strata
import StrataTestSupport
import Synchronization
import Testing

/// Consumer points are checked where they are written: a consumer removed while another
/// thread marks it processed stays removed, and registrations that race keep the first
/// one's point.
@Suite("History: consumers under concurrent writers")
struct ConsumerRaceTests {
    @Test("the event log's consumer primitives: register only if absent; move only a registered consumer, within head and purge point")
    func primitives() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        try await writePeople(coordinator, count: 12, author: "a")
        let log = try #require(coordinator.persistentStores.first).log
        func points() throws -> [String: UInt64] {
            try log.read { reader in Dictionary(uniqueKeysWithValues: try reader.consumers().map { ($0.name, $0.processedThrough) }) }
        }
        #expect(try log.registerConsumerIfAbsent("indexer", processedThrough: 4))
        #expect(try !log.registerConsumerIfAbsent("indexer", processedThrough: 9), "already registered")
        #expect(try points() == ["indexer": 4], "the first registration's point is kept")

        #expect(try log.moveConsumer("indexer", to: 8) == .moved)
        #expect(try log.moveConsumer("indexer", to: 13) == .pastHead(12))
        #expect(try log.moveConsumer("ghost", to: 3) == .unknownConsumer)
        #expect(try points() == ["indexer": 8], "refusals write nothing; no consumer is created")
        try log.purge(through: 6, author: "ops")
        #expect(try log.moveConsumer("indexer", to: 5) == .purged(through: 6))
        #expect(try log.moveConsumer("indexer", to: 6) == .moved)
        #expect(try points() == ["indexer": 6])

        // Read-only: an existing consumer is found (nothing to write); a new one is refused.
        let readOnly = try EventLog(openingExistingAt: dir.url.appendingPathComponent("store").path, readOnly: true)
        #expect(try !readOnly.registerConsumerIfAbsent("indexer", processedThrough: 0))
        #expect(throws: LogError.self) { try readOnly.registerConsumerIfAbsent("newcomer", processedThrough: 0) }
    }

    @Test("a consumer removed while another thread keeps marking it processed stays removed (STRATA_CONSUMER_RACE_ROUNDS)")
    func removedWhileMarking() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        try await writePeople(coordinator, count: 3, author: "a")
        let token = try coordinator.currentHistoryToken()
        let rounds = Int(ProcessInfo.processInfo.environment["STRATA_CONSUMER_RACE_ROUNDS"] ?? "") ?? 40
        for round in 0..<rounds {
            let marker = try coordinator.historyConsumer(named: "racer")
            let remover = try coordinator.historyConsumer(named: "racer")
            let outcome = Mutex<String?>(nil)
            let started = DispatchSemaphore(value: 0)
            let finished = DispatchSemaphore(value: 0)
            Thread {
                defer { finished.signal() }
                started.signal()
                for _ in 0..<100_000 {
                    do {
                        try marker.markProcessed(through: token)
                    } catch HistoryError.unknownConsumer {
                        outcome.withLock { $0 = "removed" }
                        return
                    } catch {
                        outcome.withLock { $0 = "unexpected: \(error)" }
                        return
                    }
                }
                outcome.withLock { $0 = "never saw the removal" }
            }.start()
            started.wait()
            try remover.remove()
            finished.wait()
            #expect(outcome.withLock { $0 } == "removed", "round \(round)")
            let left = try coordinator.historyConsumers().map(\.consumer.name)
            #expect(left.isEmpty, "round \(round): the removed consumer came back")
            if !left.isEmpty { break }
        }
    }
}
