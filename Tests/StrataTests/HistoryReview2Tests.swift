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

    @Test("feeds across a purge: one caught up at the head reads the marker on; one behind the point gets historyPurged naming it; an object feed with a limit ends")
    func feedsAcrossPurge() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let first = try await Self.saveTeam(coordinator, "A", author: "app", contextName: nil)
        for name in ["B", "C"] { _ = try await Self.saveTeam(coordinator, name, author: "app", contextName: nil) }
        let store = try coordinator.currentHistoryToken().storeIdentifier
        var caughtUp = try coordinator.historyFeed(after: nil).makeAsyncIterator()
        var behind = try coordinator.historyFeed(after: HistoryToken(storeIdentifier: store, sequence: 1)).makeAsyncIterator()
        for expected: UInt64 in [1, 2, 3] { #expect(try await caughtUp.next()?.sequence == expected) }
        try coordinator.purgeHistory(before: HistoryToken(storeIdentifier: store, sequence: 3), author: "admin")
        let marker = try await caughtUp.next()
        #expect(marker?.sequence == 4)
        #expect(marker?.kind == .purge(through: 3))
        #expect(marker?.author == "admin")
        do {
            _ = try await behind.next()
            Issue.record("a feed behind the purge point read on")
        } catch HistoryError.historyPurged(let purged) {
            #expect(purged.requested.sequence == 1)
            #expect(purged.restartToken.sequence == 3)
            #expect(purged.markerToken?.sequence == 4)
        }
        _ = first
        _ = try await Self.saveTeam(coordinator, "D", author: "app", contextName: nil)
        var limited = try coordinator.historyFeed(HistoryRequest.entity("Team").limited(to: 1)).makeAsyncIterator()
        #expect(try await limited.next()?.sequence == 5, "the marker has no Team change; the next Team transaction is 5")
        #expect(try await limited.next() == nil)
    }

    @Test("consumers: a token past the head or of another store refused at registration and marking; a removed consumer's calls name it")
    func consumerRefusals() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        _ = try await Self.saveTeam(coordinator, "A", author: "app", contextName: nil)
        let head = try coordinator.currentHistoryToken()
        let ahead = HistoryToken(storeIdentifier: head.storeIdentifier, sequence: 2)
        let foreign = HistoryToken(storeIdentifier: UUID(), sequence: 1)
        #expect(throws: HistoryError.tokenAheadOfStore(ahead, head: 1)) { _ = try coordinator.historyConsumer(named: "c", startingAfter: ahead) }
        #expect(throws: HistoryError.foreignToken(foreign, storeIdentifier: head.storeIdentifier)) {
            _ = try coordinator.historyConsumer(named: "c", startingAfter: foreign)
        }
        let consumer = try coordinator.historyConsumer(named: "c")
        #expect(try consumer.processedToken().sequence == 0)
        #expect(throws: HistoryError.tokenAheadOfStore(ahead, head: 1)) { try consumer.markProcessed(through: ahead) }
        #expect(throws: HistoryError.foreignToken(foreign, storeIdentifier: head.storeIdentifier)) { try consumer.markProcessed(through: foreign) }
        #expect(try consumer.nextBatch(limit: 5).map(\.sequence) == [1])
        try consumer.markProcessed(through: head)
        #expect(try consumer.nextBatch(limit: 5).isEmpty)
        try consumer.remove()
        #expect(throws: HistoryError.unknownConsumer("c")) { _ = try consumer.nextBatch(limit: 5) }
        #expect(throws: HistoryError.unknownConsumer("c")) { try consumer.markProcessed(through: head) }
        #expect(throws: HistoryError.unknownConsumer("c")) { _ = try consumer.feed() }
        #expect(try coordinator.historyConsumers().isEmpty)
    }

    @Test("a change predicate (NSPersistentHistoryChange.fetchRequest): changeType, changedObjectID, changedEntity, updatedProperties CONTAINS select changes; a key a change doesn't have is refused")
    func changePredicate() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let otters = try await Self.saveTeam(coordinator, "Otters", author: "app", contextName: nil)
        let herons = try await Self.saveTeam(coordinator, "Herons", author: "app", contextName: nil)
        let player = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: otters)
            team.setValue("red", forKey: "uniformColor")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ada", forKey: "firstName")
            player.setValue(team, forKey: "team")
            try context.save()
            context.delete(try context.existingObject(with: herons))
            try context.save()
            return player.objectID
        }
        func selected(_ format: String, _ arguments: any Sendable..., base: HistoryRequest = HistoryRequest()) throws -> [String] {
            var request = base
            request.changePredicate = try FormatPredicate(format: format, argumentArray: arguments)
            return try coordinator.history(request).map { transaction in
                "\(transaction.sequence):" + transaction.changes.map { "\($0.entityName).\($0.changeType)" }.joined(separator: ",")
            }
        }
        #expect(try selected("changeType == 1") == ["3:Team.update"])
        #expect(try selected("changeType == 2") == ["4:Team.delete"])
        #expect(try selected("changedObjectID == %@", player) == ["3:Player.insert"])
        #expect(try selected("changedEntity == 'Team' AND changeType != 0") == ["3:Team.update", "4:Team.delete"])
        #expect(try selected("updatedProperties CONTAINS 'uniformColor'") == ["3:Team.update"])
        #expect(try selected("changeType == 0", base: .after(HistoryToken(storeIdentifier: try coordinator.currentHistoryToken().storeIdentifier, sequence: 1))) == ["2:Team.insert", "3:Player.insert"])
        var iterator = try coordinator.historyFeed({ var r = HistoryRequest().limited(to: 1); r.changePredicate = try FormatPredicate(format: "changeType == 2"); return r }()).makeAsyncIterator()
        #expect(try await iterator.next()?.sequence == 4)
        #expect(try await iterator.next() == nil)
        var bad = HistoryRequest()
        bad.changePredicate = try FormatPredicate(format: "name == 'Otters'")
        #expect(throws: HistoryError.self) { try coordinator.history(bad) }
    }

    @Test("batch requests appear as import transactions with their changes, an undo as an undo transaction naming what it reverses; merging a batch delete's transaction removes the object")
    func importsAndUndo() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(coordinator, author: "importer").perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchInsertRequest(entityName: "Team", objects: [["name": "Otters"], ["name": "Herons"]]))
            var update = BatchUpdateRequest(entityName: "Team")
            update.predicate = try FormatPredicate(format: "name == %@", "Otters")
            update.propertiesToUpdate = ["uniformColor": "red"]
            _ = try context.execute(update)
        }
        let imported = try coordinator.history(HistoryRequest())
        #expect(imported.map(\.kind) == [.import, .import])
        #expect(imported.map { $0.changes.map(\.changeType) } == [[.insert, .insert], [.update]])
        #expect(imported.last?.changes.first?.changedProperties == ["uniformColor"])
        #expect(imported.first?.author == "importer")
        let herons = try #require(imported.first?.changes.first { $0.change(of: "name") == .value(property: "name", before: .attribute(nil), after: .attribute(.string("Herons"))) }?.changedObjectID)
        let viewer = privateContext(coordinator)
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            _ = try context.existingObject(with: herons).value(forKey: "name")
        }
        let before = try coordinator.currentHistoryToken()
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchDeleteRequest(objectIDs: [herons]))
        }
        let deletion = try #require(try coordinator.history(.after(before)).first)
        #expect(deletion.kind == .import)
        #expect(deletion.contextDidSave.deleted == [herons])
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            context.mergeChanges(fromContextDidSave: deletion.contextDidSave)
            #expect(context.registeredObject(for: herons) == nil)
        }
        let editor = editor(coordinator)
        let afterDelete = try coordinator.currentHistoryToken()
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Comets", forKey: "name")
            try context.save()
            try context.undo()
            try context.save()
        }
        let edits = try coordinator.history(.after(afterDelete))
        #expect(edits.count == 2)
        #expect(edits.last?.changes.map(\.changeType) == [.delete])
        if case .undo(let of, _) = edits.last?.kind {
            #expect(of == edits.first?.sequence)
        } else {
            Issue.record("the undo's transaction is \(String(describing: edits.last?.kind))")
        }
        #expect(edits.last?.changes.first?.groupOrigin != nil)
    }

    @Test("a feed part-way through reads on across a compaction that moves what it hasn't read, each transaction once and in order; an object's history after compaction is the same")
    func feedAcrossCompaction() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        var teams: [ManagedObjectID] = []
        for index in 0..<12 { teams.append(try await Self.saveTeam(coordinator, "T\(index)", author: "app", contextName: nil)) }
        let first = teams[0]
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: first).setValue("renamed", forKey: "name")
            try context.save()
        }
        let everything = try coordinator.history(HistoryRequest())
        let objectHistory = try coordinator.history(.object(teams[0]))
        var iterator = try coordinator.historyFeed(HistoryRequest(), batchSize: 4).makeAsyncIterator()
        var fed: [HistoryTransaction] = []
        for _ in 0..<2 { if let next = try await iterator.next() { fed.append(next) } }
        let log = try #require(coordinator.persistentStores.first).log
        let report = try log.compact(CompactionRequest())
        #expect(report.moved != nil)
        while fed.count < everything.count, let next = try await iterator.next() { fed.append(next) }
        #expect(fed == everything)
        #expect(try coordinator.history(.object(teams[0])) == objectHistory)
        #expect(try coordinator.history(.object(teams[0])).map(\.sequence) == [1, 13])
    }
}
