import Foundation
import Strata
import StrataTestSupport
import Testing

/// `HistoryRequest.transactionPredicate` (spec 0009 §2): Core Data's predicate on
/// `NSPersistentHistoryTransaction`, over each transaction's header.
@Suite("History: transactions selected by a predicate")
struct TransactionPredicateTests {
    @Test("author != 'alice' (others' changes), contextName and transactionNumber, timestamp and storeID select the transactions filtering every one gives, with tokens, limits, objects, and the author-and-context index")
    func selects() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try historyModel())
        let ids = try await makeLeagueHistory(coordinator)
        let all = try coordinator.history(HistoryRequest())
        #expect(all.count == 6)
        func selected(_ format: String, _ arguments: any Sendable..., base: HistoryRequest = HistoryRequest()) throws -> [UInt64] {
            var request = base
            request.transactionPredicate = try FormatPredicate(format: format, argumentArray: arguments)
            return try sequences(coordinator, request)
        }
        #expect(try selected("author != %@", "alice") == all.filter { $0.author != "alice" }.map(\.sequence))
        #expect(try selected("author != %@", "alice") == [2, 4, 5])
        #expect(try selected("contextName == 'editor' AND transactionNumber > 2") == [3, 6])
        #expect(try selected("transactionNumber IN {1, 5}") == [1, 5])
        let third = all[2].timestamp
        #expect(try selected("timestamp >= %@", third) == all.filter { $0.timestamp >= third }.map(\.sequence))
        let store = try #require(coordinator.persistentStores.first).identifier.uuidString
        #expect(try selected("storeID == %@ AND processID == %d", store, Int(ProcessInfo.processInfo.processIdentifier)).count == 6)
        #expect(try selected("author BEGINSWITH 'b'", base: .after(all[2].token)) == [4, 5])
        #expect(try selected("author != 'alice'", base: HistoryRequest().limited(to: 2)) == [2, 4])
        #expect(try selected("author != 'bob'", base: .object(ids.ada)) == all.filter { $0.author != "bob" && $0.changes.contains { $0.changedObjectID == ids.ada } }.map(\.sequence))
        var indexed = HistoryRequest()
        indexed.author = "bob"
        indexed.contextName = "importer"
        #expect(try selected("transactionNumber != 4", base: indexed) == [2, 5])
        // A live feed takes it too.
        var feedRequest = HistoryRequest()
        feedRequest.transactionPredicate = try FormatPredicate(format: "author == 'alice'")
        var iterator = try coordinator.historyFeed(feedRequest.limited(to: 3)).makeAsyncIterator()
        var fed: [UInt64] = []
        while let next = try await iterator.next() { fed.append(next.sequence) }
        #expect(fed == [1, 3, 6])
    }

    @Test("a key a transaction doesn't have, or a predicate that can't be evaluated on one, is an invalidRequest naming it")
    func refusals() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try historyModel())
        _ = try await makeLeagueHistory(coordinator)
        var unknown = HistoryRequest()
        unknown.transactionPredicate = try FormatPredicate(format: "authr == 'alice'")
        #expect {
            try coordinator.history(unknown)
        } throws: { error in
            guard case .invalidRequest(let text) = error as? HistoryError else { return false }
            return text.contains("reads authr") && text.contains("author, contextName, timestamp")
        }
        var wrongType = HistoryRequest()
        wrongType.transactionPredicate = try FormatPredicate(format: "author MATCHES '('")
        #expect {
            try coordinator.history(wrongType)
        } throws: { error in
            guard case .invalidRequest(let text) = error as? HistoryError else { return false }
            return text.contains("can't be evaluated")
        }
        // A key compared with a constant of another type would match nothing, silently.
        var mismatched = HistoryRequest()
        mismatched.transactionPredicate = try FormatPredicate(format: "author == 'bob' OR timestamp > '2026-01-01'")
        #expect {
            try coordinator.history(mismatched)
        } throws: { error in
            guard case .invalidRequest(let text) = error as? HistoryError else { return false }
            return text.contains("can't match any transaction: timestamp (Date) compared with \"2026-01-01\" (string)")
        }
    }
}

/// `purgeHistory(before: Date)` (spec 0009 §7): Core Data's `deleteHistory(before:)`.
@Suite("History: purging before a date")
struct PurgeBeforeDateTests {
    @Test("purges through the last transaction before the first one dated at or after the date — a later transaction with an earlier date isn't purged; nothing before the date: nil, nothing written")
    func purgeBeforeDate() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try historyModel())
        let log = try #require(coordinator.persistentStores.first).log
        for seconds in [100.0, 200, 300, 150, 400] {
            var draft = TransactionDraft(author: "clock")
            draft.timestamp = Date(timeIntervalSince1970: seconds)
            _ = draft.insert("Team", values: ["name": .attribute(.string("t\(Int(seconds))"))])
            _ = try log.commit(draft)
        }
        #expect(try coordinator.purgeHistory(before: Date(timeIntervalSince1970: 50), author: "ops") == nil)
        #expect(try log.head == 5, "nothing written")

        let report = try #require(try coordinator.purgeHistory(before: Date(timeIntervalSince1970: 250), author: "ops"))
        #expect(report.purgedThrough == 2, "300 at sequence 3 stops it; 150 at sequence 4 is kept")
        let kept = try coordinator.history(HistoryRequest())
        #expect(kept.map(\.sequence) == [3, 4, 5, 6])
        #expect(kept.last?.kind == .purge(through: 2))
        #expect(kept.last?.author == "ops")
        #expect(try log.verify().isClean)
        #expect(try coordinator.purgeHistory(before: Date(timeIntervalSince1970: 250), author: "ops") == nil, "nothing before it is left")
    }
}
