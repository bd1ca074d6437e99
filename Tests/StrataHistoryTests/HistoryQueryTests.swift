import Foundation
import Strata
import StrataTestSupport
import Testing

/// The sequences of the transactions `request` selects.
func sequences(_ coordinator: PersistentStoreCoordinator, _ request: HistoryRequest) throws -> [UInt64] {
    try coordinator.history(request).map(\.sequence)
}

@Suite("History: transactions, changes and queries")
struct HistoryQueryTests {
    func league() async throws -> (TemporaryDirectory, PersistentStoreCoordinator, LeagueIDs) {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try historyModel())
        let ids = try await makeLeagueHistory(coordinator)
        return (dir, coordinator, ids)
    }

    @Test("each transaction has its token, author, context, process, kind, and every property's value before and after")
    func transactionsAndChanges() async throws {
        let (directory, coordinator, ids) = try await league()
        defer { withExtendedLifetime(directory) {} }
        let store = try #require(coordinator.persistentStores.first).identifier
        let all = try coordinator.history(HistoryRequest())
        #expect(all.map(\.sequence) == [1, 2, 3, 4, 5, 6])
        #expect(all.map(\.token) == (1...6).map { HistoryToken(storeIdentifier: store, sequence: $0) })
        #expect(all.map(\.author) == ["alice", "bob", "alice", "bob", "bob", "alice"])
        #expect(all.map(\.contextName) == ["editor", "importer", "editor", "importer", "importer", "editor"])
        #expect(all.allSatisfy { $0.processID == ProcessInfo.processInfo.processIdentifier })
        #expect(all.map(\.kind) == [.save, .save, .save, .save, .save, .undo(of: 3, group: 1)])
        #expect(zip(all, all.dropFirst()).allSatisfy { $0.timestamp <= $1.timestamp })

        // Inserts: every value set, before empty; relationships as object IDs.
        let adaInsert = try #require(all[0].changes.first { $0.changedObjectID == ids.ada })
        #expect(adaInsert.changeType == .insert)
        #expect(adaInsert.actionName == "Add Ada")
        #expect(adaInsert.propertyChanges == [
            .value(property: "name", before: .attribute(nil), after: .attribute(.string("Ada"))),
            .value(property: "team", before: .toOne(nil), after: .toOne(ids.otters)),
        ])
        let acmeInsert = try #require(all[1].changes.first { $0.changedObjectID == ids.acme })
        #expect(acmeInsert.change(of: "teams") == .value(property: "teams", before: .toMany([]), after: .toMany([ids.otters])))
        let cyInsert = try #require(all[1].changes.first { $0.changedObjectID == ids.cy })
        #expect(cyInsert.entityName == "Captain")
        #expect(cyInsert.change(of: "since") == .value(
            property: "since", before: .attribute(nil), after: .attribute(.date(Date(timeIntervalSince1970: 1_767_225_600)))))

        // An update in two groups, each with its index and action name.
        #expect(all[2].changes.count == 2)
        let rename = all[2].changes[0]
        #expect(rename.changeType == .update)
        #expect(rename.groupIndex == 0)
        #expect(rename.actionName == "Rename")
        #expect(rename.propertyChanges == [.value(property: "name", before: .attribute(.string("Ada")), after: .attribute(.string("Ada L.")))])
        let rating = all[2].changes[1]
        #expect(rating.groupIndex == 1)
        #expect(rating.propertyChanges == [.value(property: "rating", before: .attribute(nil), after: .attribute(.double(4.5)))])
        #expect(rating.changedProperties == ["rating"])

        // A to-many membership change: added and removed IDs.
        let leave = try #require(all[3].changes.first)
        #expect(all[3].changes.count == 1)
        #expect(leave.changedObjectID == ids.acme)
        #expect(leave.propertyChanges == [.membership(property: "teams", added: [], removed: [ids.otters])])

        // A delete: the whole before-image, after empty.
        let delete = try #require(all[4].changes.first)
        #expect(delete.changeType == .delete)
        #expect(delete.changedObjectID == ids.cy)
        #expect(delete.changedProperties == ["name", "since", "team"])
        #expect(delete.change(of: "name") == .value(property: "name", before: .attribute(.string("Cy")), after: .attribute(nil)))
        #expect(delete.change(of: "team") == .value(property: "team", before: .toOne(ids.otters), after: .toOne(nil)))

        // The undo: its origin names the group it undoes.
        let undo = try #require(all[5].changes.first)
        #expect(undo.groupOrigin == .undo(of: 3, group: 1))
        #expect(undo.propertyChanges == [.value(property: "rating", before: .attribute(.double(4.5)), after: .attribute(nil))])
    }

    @Test("after a token, after a date, a sequence range, by author and context, with a limit, combined")
    func transactionFilters() async throws {
        let (directory, coordinator, _) = try await league()
        defer { withExtendedLifetime(directory) {} }
        let all = try coordinator.history(HistoryRequest())

        #expect(try sequences(coordinator, .after(all[2].token)) == [4, 5, 6])
        #expect(try sequences(coordinator, .after(nil)) == [1, 2, 3, 4, 5, 6])
        #expect(try sequences(coordinator, .after(try coordinator.currentHistoryToken())) == [])
        #expect(try sequences(coordinator, .sequences(2...4)) == [2, 3, 4])
        #expect(try sequences(coordinator, .sequences(5...100)) == [5, 6])
        #expect(try sequences(coordinator, .after(all[2].timestamp)) == [4, 5, 6], "strictly after the date")
        #expect(try sequences(coordinator, .after(all[0].timestamp.addingTimeInterval(-1))) == [1, 2, 3, 4, 5, 6])
        #expect(try sequences(coordinator, .author("bob")) == [2, 4, 5])
        var byContext = HistoryRequest()
        byContext.contextName = "editor"
        #expect(try sequences(coordinator, byContext) == [1, 3, 6])
        #expect(try sequences(coordinator, .after(all[0].token).limited(to: 2)) == [2, 3])
        var combined = HistoryRequest.author("bob")
        combined.afterToken = all[1].token
        combined.sequenceRange = 1...4
        #expect(try sequences(coordinator, combined) == [4])
        // The context runs the same requests.
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        #expect(try context.fetchHistory(.author("bob")) == (try coordinator.history(.author("bob"))))
    }

    @Test("one object's history (through the per-object index), one entity's with or without sub-entities")
    func objectAndEntity() async throws {
        let (directory, coordinator, ids) = try await league()
        defer { withExtendedLifetime(directory) {} }

        let ada = try coordinator.history(.object(ids.ada))
        #expect(ada.map(\.sequence) == [1, 3, 6])
        #expect(ada.allSatisfy { transaction in transaction.changes.allSatisfy { $0.changedObjectID == ids.ada } })
        #expect(ada[0].changes.count == 1, "only the object's change, not the team's insert")
        #expect(try sequences(coordinator, .object(ids.cy)) == [2, 5])
        #expect(try sequences(coordinator, .object(ids.otters)) == [1], "relationship changes are recorded on the owning side")

        var adaInRange = HistoryRequest.object(ids.ada)
        adaInRange.sequenceRange = 2...5
        #expect(try sequences(coordinator, adaInRange) == [3])
        var adaByBob = HistoryRequest.object(ids.ada)
        adaByBob.author = "bob"
        #expect(try sequences(coordinator, adaByBob) == [])
        #expect(try sequences(coordinator, HistoryRequest.object(ids.ada).limited(to: 2)) == [1, 3])

        let players = try coordinator.history(.entity("Player"))
        #expect(players.map(\.sequence) == [1, 2, 3, 5, 6])
        #expect(players.allSatisfy { transaction in transaction.changes.allSatisfy { ["Player", "Captain"].contains($0.entityName) } })
        #expect(players[1].changes.map(\.changedObjectID) == [ids.cy], "the sponsor's insert is left out")
        #expect(try sequences(coordinator, .entity("Player", includesSubentities: false)) == [1, 3, 6])
        #expect(try sequences(coordinator, .entity("Sponsor")) == [2, 4])
        #expect(try sequences(coordinator, .entity("Captain")) == [2, 5])
    }

    @Test("compacted history is read transparently, the same as raw")
    func compacted() async throws {
        let (directory, coordinator, ids) = try await league()
        defer { withExtendedLifetime(directory) {} }
        let all = try coordinator.history(HistoryRequest())
        let ada = try coordinator.history(.object(ids.ada))
        let bob = try coordinator.history(.author("bob"))
        let log = try #require(coordinator.persistentStores.first).log
        let report = try log.compact(CompactionRequest())
        #expect(report.moved == 1...6)
        #expect(try coordinator.history(HistoryRequest()) == all)
        #expect(try coordinator.history(.object(ids.ada)) == ada)
        #expect(try coordinator.history(.author("bob")) == bob)
        #expect(try coordinator.history(.sequences(3...4)) == Array(all[2...3]))
    }

    @Test("tokens: Codable round trip and order; another store's token, a token past the head and bad requests are refused")
    func tokensAndErrors() async throws {
        let (dir, coordinator, _) = try await league()
        let token = try coordinator.currentHistoryToken()
        #expect(token.sequence == 6)
        let data = try JSONEncoder().encode(token)
        #expect(try JSONDecoder().decode(HistoryToken.self, from: data) == token)
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(json["store"] as? String == token.storeIdentifier.uuidString)
        #expect((json["sequence"] as? NSNumber)?.uint64Value == 6)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(HistoryToken.self, from: Data(#"{"store":"not-a-uuid","sequence":1}"#.utf8))
        }
        let earlier = HistoryToken(storeIdentifier: token.storeIdentifier, sequence: 2)
        #expect(earlier < token)
        #expect([token, earlier].sorted() == [earlier, token])

        // Another store's token.
        let other = try openCoordinator(dir, model: try historyModel(), name: "other")
        let foreign = try other.currentHistoryToken()
        let store = token.storeIdentifier
        #expect(throws: HistoryError.foreignToken(foreign, storeIdentifier: store)) { try coordinator.history(.after(foreign)) }
        #expect(throws: HistoryError.foreignToken(foreign, storeIdentifier: store)) {
            try coordinator.historyConsumer(named: "x", startingAfter: foreign)
        }
        let error = #expect(throws: HistoryError.self) { try coordinator.history(.after(foreign)) }
        #expect(error?.description.contains("belongs to store \(foreign.storeIdentifier.uuidString)") == true)
        // A token past the head.
        let ahead = HistoryToken(storeIdentifier: store, sequence: 99)
        #expect(throws: HistoryError.tokenAheadOfStore(ahead, head: 6)) { try coordinator.history(.after(ahead)) }

        // Bad requests.
        let temporary = try await ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator).perform {
            (context: isolated ManagedObjectContext) throws in try context.insertNewObject(forEntityName: "Team").objectID
        }
        #expect(throws: HistoryError.self) { try coordinator.history(.object(temporary)) }
        #expect(throws: HistoryError.self) { try coordinator.history(.entity("Nope")) }
        #expect(throws: HistoryError.self) { try coordinator.history(HistoryRequest().limited(to: -1)) }
        let otherObject = try await ManagedObjectContext(concurrencyType: .privateQueue, coordinator: other).perform {
            (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            try context.save()
            return team.objectID
        }
        #expect(throws: HistoryError.self) { try coordinator.history(.object(otherObject)) }
    }

    @Test("a snapshot at a token is the whole state at that point")
    func snapshot() async throws {
        let (directory, coordinator, ids) = try await league()
        defer { withExtendedLifetime(directory) {} }
        let store = try #require(coordinator.persistentStores.first).identifier
        let at3 = try coordinator.historySnapshot(at: HistoryToken(storeIdentifier: store, sequence: 3))
        #expect(at3.objects.count == 4)
        #expect(at3.objects[ids.ada]?["name"] == .attribute(.string("Ada L.")))
        #expect(at3.objects[ids.ada]?["rating"] == .attribute(.double(4.5)))
        #expect(at3.objects[ids.ada]?["team"] == .toOne(ids.otters))
        #expect(at3.objects[ids.acme]?["teams"] == .toMany([ids.otters]))
        let now = try coordinator.historySnapshot(at: try coordinator.currentHistoryToken())
        #expect(now.objects[ids.cy] == nil)
        #expect(now.objects[ids.ada]?["rating"] == nil)
        #expect(now.objects[ids.acme]?["teams"] == nil)
        let start = try coordinator.historySnapshot(at: HistoryToken(storeIdentifier: store, sequence: 0))
        #expect(start.objects.isEmpty)
    }
}

extension HistoryQueryTests {
    @Test("currentPersistentHistoryToken(fromStores:) is the head's token: history after it is what is saved later; nil for another coordinator's store or none")
    func currentToken() async throws {
        let (directory, coordinator, _) = try await league()
        defer { withExtendedLifetime(directory) {} }
        let store = try #require(coordinator.persistentStores.first)
        let token = try #require(coordinator.currentPersistentHistoryToken())
        #expect(token == HistoryToken(storeIdentifier: store.identifier, sequence: 6))
        #expect(coordinator.currentPersistentHistoryToken(fromStores: [store]) == token)
        let other = PersistentStoreCoordinator(managedObjectModel: try historyModel())
        #expect(other.currentPersistentHistoryToken() == nil, "no store")
        let otherStore = try other.addPersistentStore(type: .inMemory)
        #expect(other.currentPersistentHistoryToken() == HistoryToken(storeIdentifier: otherStore.identifier, sequence: 0))
        #expect(coordinator.currentPersistentHistoryToken(fromStores: [otherStore]) == nil)
        try await ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Team").setValue("Later", forKey: "name")
            try context.save()
        }
        #expect(try sequences(coordinator, .after(token)) == [7])
    }
}
