import Foundation
import Strata
import StrataTestSupport
import Testing

@Suite("History: consumers and purge")
struct HistoryConsumerTests {
    @Test("a consumer reads batches after its point, marks them processed, and keeps its point across a restart")
    func batches() async throws {
        let dir = try TemporaryDirectory()
        var coordinator = try openCoordinator(dir, model: try SeedModels.people)
        try await writePeople(coordinator, count: 7, author: "a")
        let indexer = try coordinator.historyConsumer(named: "search-indexer")
        #expect(try indexer.processedToken().sequence == 0)
        let first = try indexer.nextBatch(limit: 3)
        #expect(first.map(\.sequence) == [1, 2, 3])
        #expect(try indexer.nextBatch(limit: 3).map(\.sequence) == [1, 2, 3], "nothing moves until marked")
        try indexer.markProcessed(through: try #require(first.last).token)
        #expect(try indexer.nextBatch(limit: 10).map(\.sequence) == [4, 5, 6, 7])

        // A restart: the point is in the store; registering again keeps it.
        coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let again = try coordinator.historyConsumer(named: "search-indexer", startingAfter: try coordinator.currentHistoryToken())
        #expect(try again.processedToken().sequence == 3)
        #expect(try coordinator.historyConsumers().map { [$0.consumer.name: $0.processed.sequence] } == [["search-indexer": 3]])

        // Its feed continues after the point.
        var fed: [UInt64] = []
        for try await transaction in try again.feed() {
            fed.append(transaction.sequence)
            if fed.count == 4 { break }
        }
        #expect(fed == [4, 5, 6, 7])

        // Bad arguments and a removed consumer.
        #expect(throws: HistoryError.self) { try again.nextBatch(limit: 0) }
        #expect(throws: HistoryError.self) { try coordinator.historyConsumer(named: "") }
        let ahead = HistoryToken(storeIdentifier: try coordinator.currentHistoryToken().storeIdentifier, sequence: 50)
        #expect(throws: HistoryError.tokenAheadOfStore(ahead, head: 7)) { try again.markProcessed(through: ahead) }
        try again.remove()
        #expect(throws: HistoryError.unknownConsumer("search-indexer")) { try again.processedToken() }
        #expect(throws: HistoryError.unknownConsumer("search-indexer")) { try again.markProcessed(through: first[0].token) }
        #expect(try coordinator.historyConsumers().isEmpty)
    }

    @Test("the lowest consumer's point holds compaction back; a consumer behind compacted history reads it from the segments")
    func compaction() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        try await writePeople(coordinator, count: 30, author: "a")
        let everything = try coordinator.history(HistoryRequest())
        let log = try #require(coordinator.persistentStores.first).log
        let slow = try coordinator.historyConsumer(named: "slow", startingAfter: everything[9].token)
        _ = try coordinator.historyConsumer(named: "fast", startingAfter: everything[24].token)

        let held = try log.compact(CompactionRequest())
        #expect(held.moved == 1...10)
        #expect(held.limitedBy == .consumer(name: "slow", processedThrough: 10))
        try slow.markProcessed(through: everything[19].token)
        let next = try log.compact(CompactionRequest())
        #expect(next.moved == 11...20)
        #expect(next.limitedBy == .consumer(name: "slow", processedThrough: 20))
        try slow.remove()
        #expect(try log.compact(CompactionRequest()).limitedBy == .consumer(name: "fast", processedThrough: 25))

        // A consumer registered late (or rewound) reads compacted history transparently.
        let late = try coordinator.historyConsumer(named: "late")
        #expect(try late.nextBatch(limit: 100) == everything)
        try late.markProcessed(through: everything[4].token)
        #expect(try late.nextBatch(limit: 3) == Array(everything[5...7]))
        #expect(try log.read { try $0.compactedThrough } == 25)
    }

    @Test("purge leaves its marker; a consumer behind it gets the typed error and restarts from the snapshot; the store stays whole")
    func purge() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        try await writePeople(coordinator, count: 20, author: "a")
        let log = try #require(coordinator.persistentStores.first).log
        try log.compact(CompactionRequest(before: 8))
        let everything = try coordinator.history(HistoryRequest())
        let behind = try coordinator.historyConsumer(named: "behind", startingAfter: everything[2].token)
        let ahead = try coordinator.historyConsumer(named: "ahead", startingAfter: everything[14].token)
        let point = everything[11].token  // through 12
        let stateAtPoint = try coordinator.historySnapshot(at: point)

        let report = try coordinator.purgeHistory(before: point, author: "retention-job", contextName: "maintenance")
        #expect(report.removedEvents == 1...12)
        #expect(report.markerSequence == 21)

        // The marker: who purged what, and when.
        let marker = try #require(try coordinator.history(.sequences(21...21)).first)
        #expect(marker.kind == .purge(through: 12))
        #expect(marker.author == "retention-job")
        #expect(marker.contextName == "maintenance")
        #expect(marker.changes.isEmpty)

        // Behind the point: the typed error, with the restart point and who purged.
        func purged(_ body: () throws -> Void) -> PurgedHistory? {
            do {
                try body()
            } catch HistoryError.historyPurged(let info) {
                return info
            } catch {
                Issue.record("expected historyPurged, got \(error)")
            }
            return nil
        }
        let info = try #require(purged { _ = try behind.nextBatch() })
        #expect(info.requested == everything[2].token)
        #expect(info.restartToken == point)
        #expect(info.markerToken == marker.token)
        #expect(info.purgedBy == "retention-job")
        #expect(info.purgedAt == marker.timestamp)
        #expect(purged { _ = try coordinator.history(.after(everything[2].token)) } == info)
        #expect(purged { _ = try coordinator.history(.sequences(5...15)) }?.restartToken == point)
        do {
            for try await _ in try behind.feed() {}
            Issue.record("a feed behind the purge point must throw")
        } catch HistoryError.historyPurged(let feedInfo) {
            #expect(feedInfo == info)
        }
        let error = #expect(throws: HistoryError.self) { try behind.nextBatch() }
        #expect(error?.code == 134301)
        #expect(error?.description.contains("purged through 12 by retention-job") == true)

        // Restart: the snapshot at the restart point, then the history after it.
        #expect(try coordinator.historySnapshot(at: point) == stateAtPoint)
        #expect(throws: HistoryError.self) { try coordinator.historySnapshot(at: everything[3].token) }
        try behind.markProcessed(through: point)
        #expect(try behind.nextBatch(limit: 100).map(\.sequence) == Array(13...21))
        #expect(try ahead.nextBatch(limit: 100).map(\.sequence) == Array(16...21), "a consumer past the point is unaffected")
        #expect(throws: HistoryError.self) { try ahead.markProcessed(through: everything[3].token) }

        // Queries without a point start after the purge; per-object history keeps what's left.
        #expect(try coordinator.history(HistoryRequest()).map(\.sequence) == Array(13...21))
        #expect(try coordinator.history(HistoryRequest()).dropLast() == everything[12...])
        let someone = try #require(everything[4].changes.first).changedObjectID
        #expect(try coordinator.history(.object(someone)).isEmpty)

        // The store stays whole; another store's token can't purge it.
        let verification = try log.verify()
        #expect(verification.isClean, "\(verification.problems)")
        let foreign = HistoryToken(storeIdentifier: UUID(), sequence: 1)
        #expect(throws: HistoryError.foreignToken(foreign, storeIdentifier: point.storeIdentifier)) {
            try coordinator.purgeHistory(before: foreign, author: "x")
        }
        // New saves, and compaction after the point, held by the consumers.
        try await writePeople(coordinator, count: 3, author: "after")
        #expect(try log.compact(CompactionRequest()).limitedBy == .consumer(name: "behind", processedThrough: 12))
        try behind.markProcessed(through: try coordinator.currentHistoryToken())
        #expect(try log.compact(CompactionRequest()).moved == 13...15, "up to the consumer ahead")
        #expect(try log.verify().isClean)
    }
}
