import Foundation
import StrataStorage
import StrataTestSupport
import Testing

@testable import Strata
@testable import StrataLog

/// A history request by author **and** context name reads that context's transactions
/// through the log's per-context transaction index (spec 0004 §6.4, spec 0009): the same
/// answer as filtering every transaction, without reading the others — shown by removing one
/// of another writer's raw events, which a scan would fail on.
@Suite("History: requests by author and context name use the per-context index")
struct HistoryByContextTests {
    static let rounds = Int(ProcessInfo.processInfo.environment["STRATA_HISTORY_CONTEXT_ROUNDS"] ?? "") ?? 30

    static func write(_ coordinator: PersistentStoreCoordinator, author: String, context name: String, count: Int, tag: String) async throws {
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: name, transactionAuthor: author)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            for k in 0..<count {
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue("\(tag)-\(k)@context.test", forKey: "email")
                try context.save()
            }
        }
    }

    @Test("by author and context: the transactions filtering all of them gives, with limits and tokens; another writer's missing event isn't read")
    func byAuthorAndContext() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        for round in 0..<Self.rounds {
            try await Self.write(coordinator, author: "alice", context: "editor", count: 1, tag: "ae\(round)")
            try await Self.write(coordinator, author: "alice", context: "sync", count: 2, tag: "as\(round)")
            try await Self.write(coordinator, author: "bob", context: "editor", count: 3, tag: "be\(round)")
        }
        let all = try coordinator.history(HistoryRequest())
        var request = HistoryRequest()
        request.author = "alice"
        request.contextName = "editor"
        let expected = all.filter { $0.author == "alice" && $0.contextName == "editor" }.map(\.sequence)
        #expect(expected.count == Self.rounds)
        #expect(try sequences(coordinator, request) == expected)
        // A limit, and a token in the middle.
        #expect(try sequences(coordinator, request.limited(to: 4)) == Array(expected.prefix(4)))
        let store = try #require(coordinator.persistentStores.first).identifier
        request.afterToken = HistoryToken(storeIdentifier: store, sequence: expected[expected.count / 2])
        #expect(try sequences(coordinator, request) == Array(expected[(expected.count / 2 + 1)...]))
        request.afterToken = nil

        // One of bob's events removed: the request by author and context doesn't read it.
        let log = try coordinator.requireStore().log
        let bobs = all.filter { $0.author == "bob" }.map(\.sequence)
        let removed = bobs[bobs.count / 2]
        try log.environment.write { txn in
            var keys: [[UInt8]] = []
            try txn.forEach(in: log.tables.events, range: .prefix(bigEndianBytes(removed))) { key, _ in
                keys.append(key.withUnsafeBytes { Array($0) })
                return .next
            }
            for key in keys { _ = try txn.delete(key: key, in: log.tables.events) }
        }
        #expect(try sequences(coordinator, request) == expected)
        // An author alone still scans the headers, and finds the gap.
        #expect(throws: (any Error).self) { try sequences(coordinator, HistoryRequest.author("alice")) }
    }
}
