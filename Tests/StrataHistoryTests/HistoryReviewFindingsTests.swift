import Foundation
@testable import Strata
import StrataLog
import StrataTestSupport
import Testing

// Findings of a review of the history and event log APIs (session 12): each test failed on
// the code before its fix.

@Suite("History review findings: merge across a purge, object and entity together, consumer names")
struct HistoryReviewFindingsTests {
    @Test("a context merging across purged history compares its objects with the store: one deleted in the purged range leaves it, one changed there is refreshed keeping its unsaved change")
    func mergeAcrossPurge() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try historyModel())
        let ids = try await makeLeagueHistory(coordinator)
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "reader", transactionAuthor: "r")
        let writer = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "writer", transactionAuthor: "w")
        // The reader is in step with the head and holds Ada and Acme (unsaved changes keep them).
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            try context.existingObject(with: ids.ada).setValue(1.0, forKey: "rating")
            try context.existingObject(with: ids.acme).setValue("Acme 2", forKey: "name")
        }
        try await writer.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: ids.ada).setValue("Ada K.", forKey: "name")
            context.delete(try context.existingObject(with: ids.acme))
            try context.save()
        }
        _ = try coordinator.purgeHistory(before: try coordinator.currentHistoryToken(), author: "ops")
        let head = try coordinator.currentHistoryToken().sequence
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            let held = context.registeredObject(for: ids.acme)
            let acme = try #require(held)
            #expect(try context.mergeStoreChanges() == head)
            #expect(acme.managedObjectContext == nil)
            let acmeAfter = context.registeredObject(for: ids.acme)
            #expect(acmeAfter == nil)
            let adaAfter = context.registeredObject(for: ids.ada)
            let ada = try #require(adaAfter)
            #expect(ada.value(forKey: "name") as? String == "Ada K.")
            #expect(ada.value(forKey: "rating") as? Double == 1.0)
            #expect(ada.hasChanges)
        }
    }

    @Test("a history request naming an object and an entity returns the object's changes only if it is of the entity")
    func objectAndEntityTogether() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try historyModel())
        let ids = try await makeLeagueHistory(coordinator)
        var adaAsTeam = HistoryRequest.object(ids.ada)
        adaAsTeam.entityName = "Team"
        #expect(try coordinator.history(adaAsTeam).isEmpty)
        var adaAsPlayer = HistoryRequest.object(ids.ada)
        adaAsPlayer.entityName = "Player"
        #expect(try coordinator.history(adaAsPlayer).map(\.token.sequence) == (try coordinator.history(.object(ids.ada)).map(\.token.sequence)))
        // Cy is a Captain: a Player only with sub-entities.
        var cyAsPlayerOnly = HistoryRequest.object(ids.cy)
        cyAsPlayerOnly.entityName = "Player"
        cyAsPlayerOnly.includesSubentities = false
        #expect(try coordinator.history(cyAsPlayerOnly).isEmpty)
        cyAsPlayerOnly.includesSubentities = true
        #expect(!(try coordinator.history(cyAsPlayerOnly).isEmpty))
    }

    @Test("a consumer name longer than LMDB's largest key is refused by name, not with an LMDB error; 511 bytes is fine")
    func consumerNameLength() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try historyModel())
        _ = try await makeLeagueHistory(coordinator)
        #expect(throws: HistoryError.self) { _ = try coordinator.historyConsumer(named: String(repeating: "c", count: 512)) }
        #expect(throws: HistoryError.self) { _ = try coordinator.historyConsumer(named: String(repeating: "é", count: 256)) }  // 512 bytes
        let longest = try coordinator.historyConsumer(named: String(repeating: "c", count: 511))  // EventLog.maximumConsumerNameLength
        #expect(try coordinator.historyConsumers().map(\.consumer.name) == [longest.name])
        let log = try #require(coordinator.persistentStores.first).log
        #expect(throws: LogError.self) { try log.registerConsumer(String(repeating: "c", count: 600), processedThrough: 0) }
        #expect(throws: LogError.self) { try log.registerConsumer("", processedThrough: 0) }
    }
}
