import Foundation
import Strata
import StrataTestSupport
import Synchronization
import Testing

/// Inserts `count` people, one save each, through a context of `coordinator`.
func writePeople(_ coordinator: PersistentStoreCoordinator, count: Int, author: String) async throws {
    let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "writer", transactionAuthor: author)
    for k in 1...count {
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("\(author)-\(k)@feed.test", forKey: "email")
            try context.save()
        }
    }
}

/// Waits (up to 5 s) until `condition` holds; fails the test if it never does.
func eventually(_ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    for _ in 0..<1_000 where !condition() { try await Task.sleep(for: .milliseconds(5)) }
    #expect(condition(), sourceLocation: sourceLocation)
}

/// The email each transaction of `transactions` inserted.
func insertedEmails(_ transactions: [HistoryTransaction]) -> [String] {
    transactions.map { transaction in
        guard case .value(_, _, .attribute(.string(let email)?))? = transaction.changes.first?.change(of: "email") else { return "?" }
        return email
    }
}

@Suite("History: the live feed and store changes")
struct HistoryFeedTests {
    @Test("the feed delivers the existing transactions, then this process's new ones, each once, in order")
    func inProcess() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        try await writePeople(coordinator, count: 5, author: "early")
        let feed = try coordinator.historyFeed(after: nil)
        let total = 5 + 40
        let reader = Task {
            var received: [HistoryTransaction] = []
            for try await transaction in feed {
                received.append(transaction)
                if received.count == total { break }
            }
            return received
        }
        try await writePeople(coordinator, count: 40, author: "late")
        let received = try await reader.value
        #expect(received.map(\.sequence) == Array(1...UInt64(total)))
        #expect(insertedEmails(received) == (1...5).map { "early-\($0)@feed.test" } + (1...40).map { "late-\($0)@feed.test" })
        let log = try #require(coordinator.persistentStores.first).log
        #expect(log.storeMonitor.observerCount == 0, "the finished feed no longer listens")
    }

    @Test("the feed delivers every transaction another process writes, exactly once and in order (STRATA_FEED_TRANSACTIONS)")
    func anotherProcess() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let path = dir.url.appendingPathComponent("store").path
        let count = feedTransactionCount
        let start = try coordinator.currentHistoryToken()
        let feed = try coordinator.historyFeed(after: start)
        let reader = Task {
            var sequences: [UInt64] = []
            var emails: [String] = []
            var authors: Set<String?> = []
            var processes: Set<Int32> = []
            for try await transaction in feed {
                sequences.append(transaction.sequence)
                emails.append(contentsOf: insertedEmails([transaction]))
                authors.insert(transaction.author)
                processes.insert(transaction.processID)
                if sequences.count == count { break }
            }
            return (sequences, emails, authors, processes)
        }
        let (writer, output) = try startWriter(store: path, count: count, author: "probe")
        let (sequences, emails, authors, processes) = try await reader.value
        writer.waitUntilExit()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(writer.terminationStatus == 0)
        #expect(printed.contains("done \(count)"))
        #expect(sequences == Array(1...UInt64(count)))
        #expect(emails == (1...count).map { "probe-\($0)@probe.test" })
        #expect(authors == ["probe"])
        #expect(processes == [writer.processIdentifier])
        #expect(try coordinator.currentHistoryToken().sequence == UInt64(count))
    }

    @Test("storeChanges and observers hear another process's commits without polling")
    func storeChangesFromAnotherProcess() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let path = dir.url.appendingPathComponent("store").path
        let log = try #require(coordinator.persistentStores.first).log
        let heard: Task<HistoryToken?, Never>
        do {
            let changes = try coordinator.storeChanges()
            heard = Task {
                var last: HistoryToken?
                for await token in changes {
                    last = token
                    if token.sequence >= 3 { break }
                }
                return last
            }
        }
        #expect(log.storeMonitor.isWatchingFile == StoreMonitor.canWatchOtherProcesses)
        let (writer, _) = try startWriter(store: path, count: 3, author: "other")
        let token = await heard.value
        writer.waitUntilExit()
        #expect(token?.sequence == 3)
        #expect(token?.storeIdentifier == (try coordinator.currentHistoryToken()).storeIdentifier)
        // A released stream stops listening, and the watcher stops with the last observer.
        try await eventually { log.storeMonitor.observerCount == 0 }
        #expect(log.storeMonitor.isWatchingFile == false)
    }

    @Test("an observer is called on this process's commits; a cancelled observation isn't")
    func observers() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let seen = Mutex<[UInt64]>([])
        let observation = try coordinator.observeStoreChanges { token in seen.withLock { $0.append(token.sequence) } }
        try await writePeople(coordinator, count: 3, author: "a")
        #expect(seen.withLock { $0 } == [1, 2, 3], "commits in this process are announced at once, in order")
        observation.cancel()
        try await writePeople(coordinator, count: 1, author: "b")
        #expect(seen.withLock { $0 } == [1, 2, 3])
        #expect(try coordinator.checkForStoreChanges().sequence == 4)
    }

    @Test("cancelling the consuming task ends the feed; a new feed resumes after the last token")
    func cancellation() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        try await writePeople(coordinator, count: 3, author: "a")
        let log = try #require(coordinator.persistentStores.first).log
        let feed = try coordinator.historyFeed(after: nil)
        let progress = Mutex(0)
        let consumer = Task {
            var received: [UInt64] = []
            for try await transaction in feed {
                received.append(transaction.sequence)
                progress.withLock { $0 = received.count }
            }
            return received
        }
        // Wait until the feed has delivered everything and waits for more, then cancel it.
        try await eventually { progress.withLock { $0 } == 3 && log.storeMonitor.observerCount == 1 }
        consumer.cancel()
        let received = try await consumer.value
        #expect(received == [1, 2, 3])
        #expect(log.storeMonitor.observerCount == 0)

        try await writePeople(coordinator, count: 2, author: "b")
        let token = HistoryToken(storeIdentifier: log.storeUUID, sequence: try #require(received.last))
        var resumed: [UInt64] = []
        for try await transaction in try coordinator.historyFeed(.after(token).limited(to: 2)) { resumed.append(transaction.sequence) }
        #expect(resumed == [4, 5])
    }

    @Test("a feed ends with its range or limit, filters like a query, and reads in bounded batches")
    func boundedFeeds() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        try await writePeople(coordinator, count: 10, author: "a")
        try await writePeople(coordinator, count: 10, author: "b")
        var ranged: [UInt64] = []
        for try await transaction in try coordinator.historyFeed(.sequences(4...8), batchSize: 2) { ranged.append(transaction.sequence) }
        #expect(ranged == [4, 5, 6, 7, 8])
        var byB: [UInt64] = []
        for try await transaction in try coordinator.historyFeed(HistoryRequest.author("b").limited(to: 3), batchSize: 4) {
            byB.append(transaction.sequence)
        }
        #expect(byB == [11, 12, 13])
        // Errors of the request come from the first next().
        let foreign = HistoryToken(storeIdentifier: UUID(), sequence: 1)
        await #expect(throws: HistoryError.self) {
            for try await _ in try coordinator.historyFeed(after: foreign) {}
        }
    }
}
