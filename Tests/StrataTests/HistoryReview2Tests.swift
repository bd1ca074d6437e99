import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// Review 26-10 of the history API (spec 0009) against Core Data's persistent history.
@Suite("History: review 2 findings")
struct HistoryReview2Tests {
    /// Saves a team named `name` by `author` (nil: no author) in context `contextName`.
    static func saveTeam(_ coordinator: PersistentStoreCoordinator, _ name: String, author: String?, contextName: String?) async throws
        -> ManagedObjectID
    {
        try await privateContext(coordinator, name: contextName, author: author).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue(name, forKey: "name")
            try context.save()
            return team.objectID
        }
    }

    @Test("a transaction predicate over a nil author or context name: author == nil, author != 'alice' include the transactions without one")
    func predicateOverNilHeaderFields() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        _ = try await Self.saveTeam(coordinator, "A", author: "alice", contextName: "editor")
        _ = try await Self.saveTeam(coordinator, "B", author: nil, contextName: nil)
        _ = try await Self.saveTeam(coordinator, "C", author: "bob", contextName: "editor")
        func selected(_ format: String) throws -> [UInt64] {
            var request = HistoryRequest()
            request.transactionPredicate = try FormatPredicate(format: format)
            return try coordinator.history(request).map(\.sequence)
        }
        #expect(try selected("author == nil") == [2])
        #expect(try selected("author != nil") == [1, 3])
        #expect(try selected("author != 'alice'") == [2, 3])
        #expect(try selected("contextName == nil") == [2])
        #expect(try selected("NOT (author == 'alice')") == [2, 3])
    }

    @Test("requests at the edges: after the head is empty, a range past the head empty, a token past the head refused; after a purge the purge point is the lowest readable point")
    func edges() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        for name in ["A", "B", "C", "D"] { _ = try await Self.saveTeam(coordinator, name, author: "app", contextName: nil) }
        let head = try coordinator.currentHistoryToken()
        #expect(head.sequence == 4)
        #expect(try coordinator.history(.after(head)).isEmpty)
        #expect(try coordinator.history(.sequences(5...9)).isEmpty)
        #expect(try coordinator.history(.sequences(0...1)).map(\.sequence) == [1])
        let store = head.storeIdentifier
        #expect(throws: HistoryError.tokenAheadOfStore(HistoryToken(storeIdentifier: store, sequence: 5), head: 4)) {
            try coordinator.history(.after(HistoryToken(storeIdentifier: store, sequence: 5)))
        }
        try coordinator.purgeHistory(before: HistoryToken(storeIdentifier: store, sequence: 2), author: "admin")
        #expect(try coordinator.history(.after(HistoryToken(storeIdentifier: store, sequence: 2))).map(\.sequence) == [3, 4, 5])
        #expect(try coordinator.history(HistoryRequest()).map(\.sequence) == [3, 4, 5])
        #expect(try coordinator.history(.sequences(3...3)).map(\.sequence) == [3])
        do {
            _ = try coordinator.history(.sequences(2...4))
            Issue.record("a range starting in the purged history was read")
        } catch HistoryError.historyPurged(let purged) {
            #expect(purged.restartToken.sequence == 2)
            #expect(purged.markerToken?.sequence == 5)
            #expect(purged.purgedBy == "admin")
        }
        do {
            _ = try coordinator.history(.after(HistoryToken(storeIdentifier: store, sequence: 1)))
            Issue.record("a token below the purge point was read")
        } catch HistoryError.historyPurged(let purged) {
            #expect(purged.requested.sequence == 1)
            #expect(purged.restartToken.sequence == 2)
        }
    }

    @Test("a transaction merged into a context (objectIDNotification, Core Data's merge of history): updated objects refreshed, deleted ones removed, inserted ones fetched, an inverse side refreshed")
    func mergeTransaction() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let otters = try await Self.saveTeam(coordinator, "Otters", author: "app", contextName: nil)
        let herons = try await Self.saveTeam(coordinator, "Herons", author: "app", contextName: nil)
        let start = try coordinator.currentHistoryToken()
        let viewer = privateContext(coordinator, name: "viewer")
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            let team = try context.existingObject(with: otters)
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 0)
            _ = try context.existingObject(with: herons).value(forKey: "name")
        }
        let (player, comets) = try await privateContext(coordinator, name: "writer", author: "sync").perform {
            (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: otters)
            team.setValue("Ravens", forKey: "name")
            context.delete(try context.existingObject(with: herons))
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ada", forKey: "firstName")
            player.setValue(team, forKey: "team")
            let comets = try context.insertNewObject(forEntityName: "Team")
            comets.setValue("Comets", forKey: "name")
            try context.save()
            return (player.objectID, comets.objectID)
        }
        let transactions = try coordinator.history(.after(start))
        #expect(transactions.count == 1)
        let transaction = try #require(transactions.first)
        let save = transaction.contextDidSave
        #expect(save.inserted == [player, comets])
        #expect(save.updated == [otters], "the team whose name changed, and whose players gained the new player")
        #expect(save.deleted == [herons])
        #expect(save.sequence == transaction.sequence)
        #expect(save.transactionAuthor == "sync")
        let note = transaction.objectIDNotification()
        #expect(note.userInfo?[ManagedObjectContext.NotificationKey.sequence.rawValue] as? UInt64 == transaction.sequence)
        #expect(note.name == ManagedObjectContext.didSaveObjectsNotification)
        #expect(note.userInfo?[ManagedObjectContext.NotificationKey.deletedObjects.rawValue] as? Set<ManagedObjectID> == [herons])
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: otters)
            #expect(team.value(forKey: "name") as? String == "Otters", "not merged yet")
            context.mergeChanges(fromContextDidSave: transaction.objectIDNotification())
            #expect(team.value(forKey: "name") as? String == "Ravens")
            let players = team.value(forKey: "players") as? Set<ManagedObject> ?? []
            #expect(players.map(\.objectID) == [player])
            #expect(context.registeredObject(for: herons) == nil, "the deleted team left the context")
            let names = try context.fetch(FetchRequest(entityName: "Team")).compactMap { $0.value(forKey: "name") as? String }.sorted()
            #expect(names == ["Comets", "Ravens"])
        }
    }
}
