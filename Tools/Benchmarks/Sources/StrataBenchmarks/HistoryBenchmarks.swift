import Foundation
import GRDB
import Strata
import Synchronization

// Issue 8's history benchmarks (`history`):
//
//   H1. The live feed's throughput while a writer commits — in another process (the feed
//       learns of commits through the store monitor's inotify watch) and in this one — as
//       transactions delivered per second against the writer's commit rate.
//   H2. The cost a registered consumer adds to a commit: small commits with 0, 1 and 10
//       consumers registered, with a live feed following, and with a store observer.
//   H3. History query throughput: every transaction (raw and compacted) against the bare
//       event decode and against a GRDB audit table with JSON payloads; one object through
//       the per-object index against a scan; a date query reading headers only against a
//       decode of everything.

/// The writer the feed benchmark spawns: `StrataBenchmarks history-writer STORE COUNT fast|durable`.
/// Opens the store, prints `ready`, waits for a line on standard input, commits COUNT small
/// transactions (one person insert each), prints `done SECONDS` (the commit loop's time).
func runHistoryWriter(_ arguments: [String]) -> Never {
    guard arguments.count == 3, let count = Int(arguments[1]) else {
        FileHandle.standardError.write(Data("usage: StrataBenchmarks history-writer STORE COUNT fast|durable\n".utf8))
        exit(64)
    }
    do {
        var configuration = benchConfiguration()
        configuration.durability = arguments[2] == "fast" ? .fast : .durable
        let log = try EventLog(path: arguments[0], model: try peopleModel(), configuration: configuration)
        let drafts = historyDrafts(count, seed: 99, offset: 1_000_000)
        say("ready")
        _ = readLine()
        let clock = ContinuousClock()
        let start = clock.now
        for draft in drafts { try log.commit(draft) }
        say("done \((clock.now - start).seconds)")
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("history-writer: \(error)\n".utf8))
        exit(1)
    }
}

/// `count` one-person inserts (no team: the writer needn't know the store's team IDs).
private func historyDrafts(_ count: Int, seed: UInt64, offset: Int = 0) -> [TransactionDraft] {
    makePeople(count, seed: seed, startingAt: offset).map { person in
        var draft = TransactionDraft(author: "writer", contextName: "bench")
        draft.insert("Person", values: person.teamlessValues)
        return draft
    }
}

/// Runs the parts `wanted` selects: `history-feed` (H1), `history-consumers` (H2),
/// `history-queries` (H3); the filter `history` selects all three.
func runHistoryBenchmarks(
    feedTransactions: Int, commits: Int, events: Int, repetitions: Int, wanted: (String) -> Bool
) throws {
    if wanted("history-feed") { try runFeedThroughput(transactions: feedTransactions) }
    if wanted("history-consumers") { try runConsumerCost(commits: commits, repetitions: repetitions) }
    if wanted("history-queries") { try runHistoryQueries(events: events, repetitions: repetitions) }
}

// MARK: - H1. Live feed throughput

private func runFeedThroughput(transactions count: Int) throws {
    heading("H1. Live feed while a writer commits \(count) transactions")
    let name = "H1. live feed, \(count) transactions"
    // On the disk (durable commits, each with its fsync) and on tmpfs (the fsync is free, so
    // the writer is CPU-bound and commits as fast as Strata can).
    for location in ["disk", "tmpfs"] {
        for where_ in ["another process", "this process"] {
            let directory = try scratchDirectory("feed", base: location == "tmpfs" ? eventsDirectoryBase() : nil)
            defer { remove(directory) }
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try peopleModel())
            try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: directory), configuration: benchConfiguration())
            let feed = try coordinator.historyFeed(after: try coordinator.currentHistoryToken())
            let clock = ContinuousClock()
            let delivered = Mutex<(count: Int, last: ContinuousClock.Instant?)>((0, nil))
            let reader = Task {
                var seen = 0
                var expected: UInt64 = 1
                for try await transaction in feed {
                    guard transaction.sequence == expected else { throw BenchmarkFailure("feed skipped or repeated \(expected)") }
                    expected += 1
                    seen += 1
                    if seen == count { break }
                }
                delivered.withLock { $0 = (seen, clock.now) }
            }
            let start: ContinuousClock.Instant
            let writerSeconds: Double
            if where_ == "another process" {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
                process.arguments = ["history-writer", directory, String(count), "durable"]
                let input = Pipe()
                let output = Pipe()
                process.standardInput = input
                process.standardOutput = output
                try process.run()
                guard readLine(output.fileHandleForReading) == "ready" else { throw BenchmarkFailure("the writer did not start") }
                start = clock.now
                input.fileHandleForWriting.write(Data("go\n".utf8))
                let done = readLine(output.fileHandleForReading) ?? ""
                process.waitUntilExit()
                guard done.hasPrefix("done "), let seconds = Double(done.dropFirst(5)) else { throw BenchmarkFailure("writer: \(done)") }
                writerSeconds = seconds
            } else {
                let log = coordinator.persistentStores[0].log
                let drafts = historyDrafts(count, seed: 99, offset: 1_000_000)
                start = clock.now
                for draft in drafts { try log.commit(draft) }
                writerSeconds = (clock.now - start).seconds
            }
            try awaitTask(reader)
            let (seen, last) = delivered.withLock { $0 }
            guard seen == count, let last else { throw BenchmarkFailure("the feed delivered \(seen) of \(count)") }
            let feedSeconds = (last - start).seconds
            let commitRate = Double(count) / writerSeconds
            let feedRate = Double(count) / feedSeconds
            let lag = max(0, feedSeconds - writerSeconds)
            say("  writer on \(location) in \(where_): commits \(rate(Double(count), perSeconds: writerSeconds)), feed delivered \(rate(Double(count), perSeconds: feedSeconds)), last delivered \(format(seconds: lag)) after the last commit")
            record(name, "\(location), writer in \(where_): delivered ÷ commit rate", ratio(feedRate, commitRate), target: "≈ 1×")
            record(name, "\(location), writer in \(where_): commits/s, delivered/s, lag",
                "\(rate(Double(count), perSeconds: writerSeconds)) / \(rate(Double(count), perSeconds: feedSeconds)) / \(format(seconds: lag))")
        }
    }

    // Catch-up: how fast a feed reads transactions already committed (its headroom).
    let directory = try scratchDirectory("feed-catchup", base: eventsDirectoryBase())
    defer { remove(directory) }
    let coordinator = PersistentStoreCoordinator(managedObjectModel: try peopleModel())
    var fast = benchConfiguration()
    fast.durability = .fast
    let log = try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: directory), configuration: fast).log
    for draft in historyDrafts(count, seed: 5) { try log.commit(draft) }
    let feedStats = try measure("feed catching up on \(count) committed", repetitions: 5, setup: {}, body: { _ in
        let feed = try coordinator.historyFeed(.sequences(1...UInt64(count)))
        let task = Task {
            var seen = 0
            for try await _ in feed { seen += 1 }
            return seen
        }
        guard try awaitTask(task) == count else { throw BenchmarkFailure("catch-up incomplete") }
    })
    let queryStats = try measure("history() of the same (one call)", repetitions: 5, setup: {}, body: { _ in
        _ = try coordinator.history(.sequences(1...UInt64(count)))
    })
    let decodeStats = try measure("bare event decode of the same (forEachEvent)", repetitions: 5, setup: {}, body: { _ in
        try log.read { reader in try reader.forEachEvent { _ in .next } }
    })
    record(name, "catch-up: feed ÷ history() ÷ bare event decode (time)",
        "\(ratio(feedStats.medianSeconds, queryStats.medianSeconds)) / \(ratio(feedStats.medianSeconds, decodeStats.medianSeconds))")
    record(name, "catch-up: feed / history() / bare decode",
        "\(rate(Double(count), perSeconds: feedStats.medianSeconds)) / \(rate(Double(count), perSeconds: queryStats.medianSeconds)) / \(rate(Double(count), perSeconds: decodeStats.medianSeconds))")
}

// MARK: - H2. Consumer cost on commit

/// One H2 configuration's store: a coordinator's log with consumers, a feed or an observer.
private final class ConsumerRun {
    var log: EventLog?
    let directory: String
    var feed: Task<Int, any Error>?
    var observation: StoreObservation?

    init(setup: String, location: String, commits: Int, model: ManagedObjectModel) throws {
        directory = try scratchDirectory("consumers", base: location == "tmpfs" ? eventsDirectoryBase() : nil)
        let configuration = benchConfiguration()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let log = try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: directory), configuration: configuration).log
        self.log = log
        let consumers = setup == "1 consumer" ? 1 : setup == "10 consumers" ? 10 : 0
        for n in 0..<consumers { _ = try coordinator.historyConsumer(named: "consumer-\(n)") }
        if setup == "a live feed following" {
            let feed = try coordinator.historyFeed(after: nil)
            self.feed = Task {
                var seen = 0
                for try await _ in feed {
                    seen += 1
                    if seen == commits { break }
                }
                return seen
            }
        }
        if setup == "a store observer" { observation = log.storeMonitor.addObserver { _ in } }
    }

    func finish() throws {
        if let feed { _ = try awaitTask(feed) }
        observation = nil
        log = nil
        remove(directory)
    }
}

private func runConsumerCost(commits: Int, repetitions: Int) throws {
    heading("H2. What a registered consumer adds to a commit (\(commits) small commits)")
    let name = "H2. commit cost of consumers"
    let model = try peopleModel()
    let setups = ["0 consumers", "1 consumer", "10 consumers", "a live feed following", "a store observer"]
    let drafts = historyDrafts(commits, seed: 11)
    let clock = ContinuousClock()
    // Durable commits on the disk, and on tmpfs where the fsync is free (Strata's CPU cost).
    for location in ["disk", "tmpfs"] {
        // Interleaved: each round runs every configuration once, so the machine's noise
        // (a shared disk, other builds) falls on all of them alike. One untimed round first.
        var samples: [String: [Duration]] = [:]
        for round in 0...repetitions {
            for setup in setups {
                let run = try ConsumerRun(setup: setup, location: location, commits: commits, model: model)
                let log = try run.log ?? { throw BenchmarkFailure("no log") }()
                let start = clock.now
                for draft in drafts { try log.commit(draft) }
                let elapsed = clock.now - start
                try run.finish()
                if round > 0 { samples[setup, default: []].append(elapsed) }
            }
        }
        let baseline = Stats(samples: samples["0 consumers"] ?? []).medianSeconds / Double(commits)
        for setup in setups {
            let stats = Stats(samples: samples[setup] ?? [])
            report("\(location): \(setup)", stats)
            let perCommit = stats.medianSeconds / Double(commits)
            if setup == "0 consumers" {
                record(name, "\(location): per commit with no consumer", format(seconds: perCommit))
            } else {
                say("    per commit \(format(seconds: perCommit)), ÷ no consumer \(ratio(perCommit, baseline))")
                record(name, "\(location): \(setup) ÷ none", ratio(perCommit, baseline), target: "≈ 1×")
            }
        }
    }
}

// MARK: - H3. Query throughput

private func runHistoryQueries(events count: Int, repetitions: Int) throws {
    heading("H3. History queries over \(count) transactions")
    let name = "H3. history queries, \(count) transactions"
    let directory = try scratchDirectory("history-queries", base: eventsDirectoryBase())
    defer { remove(directory) }
    let coordinator = PersistentStoreCoordinator(managedObjectModel: try peopleModel())
    var fast = benchConfiguration()
    fast.durability = .fast
    let log = try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: directory), configuration: fast).log

    // The store: 1,000 people inserted, then score and age updates of random people;
    // authors alternate between "editor" and "sync".
    var random = SplitMix64(seed: 8)
    let people = min(1_000, count)
    // Ten teams, inserted with the first person and renamed in every 1,000th update: an
    // entity 0.1% of the transactions touch.
    var ids: [StoredObjectID] = []
    var teams: [StoredObjectID] = []
    for (n, person) in makePeople(people, seed: 3).enumerated() {
        var draft = TransactionDraft(author: n % 2 == 0 ? "editor" : "sync", contextName: "main")
        let temporary = draft.insert("Person", values: person.teamlessValues)
        let newTeams = n == 0 ? (0..<10).map { draft.insert("Team", values: ["name": .attribute(.string("team \($0)"))]) } : []
        let result = try log.commit(draft)
        ids.append(result.permanentID(for: temporary)!)
        teams += newTeams.compactMap { result.permanentID(for: $0) }
    }
    for n in people..<count {
        var draft = TransactionDraft(author: n % 2 == 0 ? "editor" : "sync", contextName: "main")
        draft.update(.stored(ids[Int(random.next() % UInt64(ids.count))]), values: [
            "score": .attribute(.double(Double(random.next() % 10_000) / 100)), "age": .attribute(.int32(Int32(18 + random.next() % 60))),
        ])
        if n % 1_000 == 0, !teams.isEmpty {
            draft.update(.stored(teams[(n / 1_000) % teams.count]), values: ["name": .attribute(.string("renamed \(n)"))])
        }
        try log.commit(draft)
    }
    let all = try coordinator.history(HistoryRequest())
    // Person/p1, inserted by the first transaction.
    guard let target = all.first?.changes.first?.changedObjectID else { throw BenchmarkFailure("no object") }
    let touching = try coordinator.history(.object(target)).count
    let dateCut = all[count - count / 100].timestamp

    let everything = try measure("every transaction (HistoryTransaction values)", repetitions: repetitions, setup: {}, body: { _ in
        _ = try coordinator.history(HistoryRequest())
    })
    let decode = try measure("floor: bare event decode (forEachEvent)", repetitions: repetitions, setup: {}, body: { _ in
        try log.read { reader in try reader.forEachEvent { _ in .next } }
    })
    let object = try measure("one object (\(touching) transactions) via the history index", repetitions: repetitions, setup: {}, body: { _ in
        _ = try coordinator.history(.object(target))
    })
    let objectScan = try measure("the same by scanning every event", repetitions: repetitions, setup: {}, body: { _ in
        let stored = StoredObjectID(entity: "Person", primaryKey: 1)
        var found = 0
        try log.read { reader in
            try reader.forEachEvent { event in
                if event.changes.contains(where: { $0.objectID == stored }) { found += 1 }
                return .next
            }
        }
    })
    let date = try measure("after a date (last 1%), headers only", repetitions: repetitions, setup: {}, body: { _ in
        _ = try coordinator.history(.after(dateCut))
    })
    let dateScan = try measure("the same by decoding every event", repetitions: repetitions, setup: {}, body: { _ in
        var found = 0
        try log.read { reader in
            try reader.forEachEvent { event in
                if event.timestamp > dateCut { found += 1 }
                return .next
            }
        }
    })
    let teamCount = try coordinator.history(.entity("Team")).count
    let entity = try measure("one entity (Team: \(teamCount) transactions) via the history index", repetitions: repetitions, setup: {}, body: { _ in
        _ = try coordinator.history(.entity("Team"))
    })
    let entityScan = try measure("the same by decoding every event", repetitions: repetitions, setup: {}, body: { _ in
        var found = 0
        try log.read { reader in
            try reader.forEachEvent { event in
                if event.changes.contains(where: { $0.objectID.entity == "Team" }) { found += 1 }
                return .next
            }
        }
    })
    let author = try measure("by author (half)", repetitions: repetitions, setup: {}, body: { _ in
        _ = try coordinator.history(.author("sync"))
    })

    // GRDB peer: what an app would keep itself — an audit table with one JSON row per
    // transaction (the event's JSON), read back and parsed.
    let grdbDirectory = try scratchDirectory("history-grdb")
    defer { remove(grdbDirectory) }
    let queue = try DatabaseQueue(path: (grdbDirectory as NSString).appendingPathComponent("audit.sqlite"))
    try queue.write { db in
        try db.create(table: "history") { t in
            t.primaryKey("seq", .integer)
            t.column("timestamp", .double)
            t.column("author", .text)
            t.column("payload", .text)
        }
        try log.read { reader in
            try reader.forEachEvent { event in
                try db.execute(
                    sql: "INSERT INTO history (seq, timestamp, author, payload) VALUES (?, ?, ?, ?)",
                    arguments: [Int64(event.sequence), event.timestamp.timeIntervalSince1970, event.author, event.jsonText])
                return .next
            }
        }
    }
    let grdb = try measure("GRDB: audit table, every row's JSON parsed", repetitions: repetitions, setup: {}, body: { _ in
        try queue.read { db in
            let rows = try Row.fetchCursor(db, sql: "SELECT seq, timestamp, author, payload FROM history WHERE seq > ? ORDER BY seq", arguments: [0])
            while let row = try rows.next() {
                let text: String = row["payload"]
                _ = try JSONSerialization.jsonObject(with: Data(text.utf8))
            }
        }
    })

    try log.compact(CompactionRequest())
    let compacted = try measure("every transaction, compacted", repetitions: repetitions, setup: {}, body: { _ in
        _ = try coordinator.history(HistoryRequest())
    })
    let objectCompacted = try measure("one object (\(touching) transactions) via the history index, compacted", repetitions: repetitions, setup: {}, body: { _ in
        _ = try coordinator.history(.object(target))
    })
    let entityCompacted = try measure("one entity (Team) via the history index, compacted", repetitions: repetitions, setup: {}, body: { _ in
        _ = try coordinator.history(.entity("Team"))
    })
    let asOfCompacted = try measure("that object as of its first transaction, compacted", repetitions: repetitions, setup: {}, body: { _ in
        _ = try log.read { reader in try reader.object(StoredObjectID(entity: "Person", primaryKey: 1), asOf: 1) }
    })

    let n = Double(count)
    record(name, "every transaction: Strata ÷ bare decode (time)", ratio(everything.medianSeconds, decode.medianSeconds))
    record(name, "every transaction: Strata ÷ GRDB JSON audit table (time)", ratio(everything.medianSeconds, grdb.medianSeconds))
    record(name, "every transaction: Strata raw / compacted / bare decode / GRDB",
        "\(rate(n, perSeconds: everything.medianSeconds)) / \(rate(n, perSeconds: compacted.medianSeconds)) / \(rate(n, perSeconds: decode.medianSeconds)) / \(rate(n, perSeconds: grdb.medianSeconds))")
    record(name, "one object via the index ÷ scan (time)", ratio(object.medianSeconds, objectScan.medianSeconds))
    record(name, "one object: index / scan / index after compaction", "\(format(object.median)) / \(format(objectScan.median)) / \(format(objectCompacted.median))")
    record(name, "one object after compaction: history / as of its first transaction", "\(format(objectCompacted.median)) / \(format(asOfCompacted.median))")
    record(name, "one entity (0.1%) via the index ÷ decoding every event (time)", ratio(entity.medianSeconds, entityScan.medianSeconds))
    record(name, "one entity (0.1%): index / decode all / index after compaction", "\(format(entity.median)) / \(format(entityScan.median)) / \(format(entityCompacted.median))")
    record(name, "after a date (1%): headers only ÷ decode all (time)", ratio(date.medianSeconds, dateScan.medianSeconds))
    record(name, "by author (50%)", rate(n, perSeconds: author.medianSeconds) + " transactions examined")
}

// MARK: - Helpers

extension PersonRow {
    /// The draft values without the team.
    var teamlessValues: [String: DraftValue] {
        [
            "firstName": .attribute(.string(firstName)), "lastName": .attribute(.string(lastName)),
            "email": .attribute(.string(email)), "age": .attribute(.int32(age)), "score": .attribute(.double(score)),
        ]
    }
}

struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Waits for `task` from synchronous code (the benchmark driver is synchronous).
@discardableResult
func awaitTask<T: Sendable>(_ task: Task<T, any Error>) throws -> T {
    let result = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await task.value) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    guard let outcome = result.withLock({ $0 }) else { throw BenchmarkFailure("task vanished") }
    return try outcome.get()
}

/// One line from `handle` (without the newline), or nil at the end.
func readLine(_ handle: FileHandle) -> String? {
    var bytes: [UInt8] = []
    while true {
        guard let byte = try? handle.read(upToCount: 1), let first = byte.first else { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
        if first == 0x0A { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(first)
    }
}
