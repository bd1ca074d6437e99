import CBenchLMDB
import Foundation
import Strata

// Benchmarks 3–5 share two stores built once: one with `events` small events and one with
// 1,000. Each event is one committed transaction: the first inserts the teams; then one in
// four inserts a person (all of the first 1,000 do), the others update a random existing
// person's score and age. Building takes one commit per event, so the stores live on a
// tmpfs (`/dev/shm`) by default, where the per-commit fsync costs nothing; set
// STRATA_BENCH_EVENTS_DIR to build them elsewhere.

/// The stores benchmarks 3–5 read.
struct EventStores {
    let base: String
    let large: String
    let small: String
    let largeEvents: Int
    let smallEvents: Int
    let model: ManagedObjectModel
}

func eventsDirectoryBase() -> String {
    if let chosen = environmentString("STRATA_BENCH_EVENTS_DIR") { return chosen }
    var isDirectory: ObjCBool = false
    if FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory), isDirectory.boolValue {
        return "/dev/shm"
    }
    return FileManager.default.temporaryDirectory.path
}

/// The configuration the stores are built with: Strata's defaults, except the checkpoint
/// interval when STRATA_BENCH_CHECKPOINT_INTERVAL sets one.
func eventStoreConfiguration() -> EventLog.Configuration {
    var configuration = EventLog.Configuration()
    if let interval = environmentString("STRATA_BENCH_CHECKPOINT_INTERVAL"), let value = UInt64(interval) {
        configuration.checkpointInterval = value
    }
    return configuration
}

func buildEventStores(events: Int) throws -> EventStores {
    let model = try peopleModel()
    let base = try scratchDirectory("events", base: eventsDirectoryBase())
    let large = (base as NSString).appendingPathComponent("large")
    let small = (base as NSString).appendingPathComponent("small")
    heading("Building the event stores in \(base) (checkpoint interval \(eventStoreConfiguration().checkpointInterval))")
    for (path, count) in [(small, 1_000), (large, events)] {
        let (_, elapsed) = try timeOnce { try buildEventStore(path: path, events: count, model: model) }
        say("  \(count) events: built in \(format(elapsed)) (\(rate(Double(count), perSeconds: elapsed.seconds)) commits), "
            + "store \(megabytes(directorySize(path)))")
        if count == events {
            record("3–5. event store", "build \(count) events (1 commit each)", format(elapsed))
            let sizes = try RawLMDB(path: path, readOnly: true).tableSizes().sorted { $0.bytes > $1.bytes }
            let largest = sizes.prefix(4).map { "\($0.name) \(megabytes($0.bytes)) (\($0.entries) entries)" }
            say("  largest tables: " + largest.joined(separator: ", "))
            record("3–5. event store", "store size; largest tables", "\(megabytes(directorySize(path))); " + largest.joined(separator: ", "))
        }
    }
    return EventStores(base: base, large: large, small: small, largeEvents: events, smallEvents: 1_000, model: model)
}

private func buildEventStore(path: String, events: Int, model: ManagedObjectModel) throws {
    let log = try EventLog(path: path, model: model, configuration: eventStoreConfiguration())
    var random = SplitMix64(seed: 99)
    var teamDraft = TransactionDraft(author: "seed")
    let temporary = teamNames.map { teamDraft.insert("Team", values: ["name": .attribute(.string($0))]) }
    let result = try log.commit(teamDraft)
    let teams = temporary.map { DraftObjectID.stored(result.permanentID(for: $0)!) }
    var people = 0
    let clock = ContinuousClock()
    var lastReport = clock.now
    for sequence in 2...max(events, 2) {
        var draft = TransactionDraft(author: sequence % 3 == 0 ? "sync" : "editor", contextName: "main")
        if people < 1_000 || sequence % 4 == 0 {
            let person = makePerson(people, &random)
            draft.insert("Person", values: person.draftValues(team: teams[person.team]))
            people += 1
        } else {
            let target = StoredObjectID(entity: "Person", primaryKey: 1 + random.next() % UInt64(people))
            draft.update(.stored(target), values: [
                "score": .attribute(.double(Double(random.next() % 100_000) / 100)),
                "age": .attribute(.int32(Int32(18 + random.next() % 63))),
            ])
        }
        try log.commit(draft)
        if sequence % 100_000 == 0 {
            let now = clock.now
            say("    \(sequence) events (last 100k in \(format(now - lastReport)))")
            lastReport = now
        }
    }
}

// MARK: - 3. Scan

/// Scans every event with `LogReader.forEachEvent` (decoding each), `repetitions` times.
@discardableResult
func scanEvents(_ path: String, model: ManagedObjectModel, label: String, repetitions: Int) throws -> (Stats, Int) {
    var count = 0
    let stats = try measure(
        label, repetitions: repetitions,
        setup: { try EventLog(path: path, model: model, configuration: eventStoreConfiguration()) },
        body: { log in
            count = 0
            try log.read { reader in
                try reader.forEachEvent { _ in
                    count += 1
                    return .next
                }
            }
        })
    return (stats, count)
}

func runScanBenchmark(_ stores: EventStores, repetitions: Int) throws {
    heading("3. Scan of \(stores.largeEvents) events")
    let (stats, count) = try scanEvents(stores.large, model: stores.model, label: "Strata forEachEvent (raw log)", repetitions: repetitions)
    let events = Double(count)

    // Context: walking the same chunks with a bare LMDB cursor, no decoding.
    var bytes = 0
    let cursor = try measure(
        "raw LMDB cursor over the event chunks", repetitions: repetitions,
        setup: { try RawLMDB(path: stores.large, readOnly: true) },
        body: { lmdb in
            bytes = 0
            try lmdb.forEach(in: "events") { _, value in bytes &+= value.count }
        })
    say("  \(count) events, \(megabytes(bytes)) of event chunks")
    say("  Strata raw scan: \(rate(events, perSeconds: stats.medianSeconds)) events (median), "
        + "\(rate(events, perSeconds: stats.minSeconds)) (best); raw cursor \(rate(events, perSeconds: cursor.medianSeconds)) events")
    record("3. scan \(count) events", "Strata forEachEvent, raw log", rate(events, perSeconds: stats.medianSeconds) + " events")
    record("3. scan \(count) events", "raw LMDB cursor over the chunks (no decode, context)", rate(events, perSeconds: cursor.medianSeconds) + " events")
}

// MARK: - 4. Compaction

/// The concatenated event chunks of the store at `path`, written to `file`; returns the byte count.
func dumpEventChunks(_ path: String, to file: String) throws -> Int {
    let lmdb = try RawLMDB(path: path, readOnly: true)
    let (batch, _) = try lmdb.records(of: "events")
    var data = Data(capacity: batch.payloadBytes)
    batch.bytes.withUnsafeBytes { raw in
        for (_, _, valueOffset, valueLength) in batch.entries {
            data.append(raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + valueOffset, count: valueLength)
        }
    }
    try data.write(to: URL(fileURLWithPath: file))
    return data.count
}

/// `zstd -3 -c input > output` with the stock CLI; returns the output's size.
func runZstdCLI(_ input: String, output: String) throws -> Int {
    _ = FileManager.default.createFile(atPath: output, contents: nil)
    let sink = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
    defer { try? sink.close() }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["zstd", "-3", "-q", "-c", input]
    process.standardOutput = sink
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw RawLMDBError(code: process.terminationStatus, call: "zstd -3") }
    let attributes = try FileManager.default.attributesOfItem(atPath: output)
    return (attributes[.size] as? NSNumber)?.intValue ?? 0
}

func runCompactionBenchmark(_ stores: EventStores, scanRepetitions: Int) throws {
    heading("4. Compaction of \(stores.largeEvents) events (and 3. scan after compaction)")
    let dump = (stores.base as NSString).appendingPathComponent("events.raw")
    let compressed = dump + ".zst"
    let rawBytes = try dumpEventChunks(stores.large, to: dump)
    var zstdSize = 0
    let zstd = try measure(
        "zstd -3 CLI on the concatenated chunks", repetitions: 3,
        setup: { () },
        body: { _ in zstdSize = try runZstdCLI(dump, output: compressed) })
    remove(compressed)
    remove(dump)
    let zstdRatio = Double(rawBytes) / Double(max(zstdSize, 1))
    let zstdSpeed = Double(rawBytes) / 1e6 / zstd.medianSeconds
    say(String(format: "  zstd -3: %@ → %@, ratio %.2f, %.0f MB/s", megabytes(rawBytes), megabytes(zstdSize), zstdRatio, zstdSpeed))
    let name = "4. compaction \(stores.largeEvents) events"
    record(name, "zstd -3 CLI (same bytes): ratio, speed", String(format: "%.2f, %.0f MB/s", zstdRatio, zstdSpeed))

    for usesDictionary in [false, true] {
        let label = usesDictionary ? "with dictionary" : "no dictionary"
        let copy = (stores.base as NSString).appendingPathComponent(usesDictionary ? "compacted-dict" : "compacted")
        remove(copy)
        try FileManager.default.copyItem(atPath: stores.large, toPath: copy)
        defer { remove(copy) }
        do {
            let log = try EventLog(path: copy, model: stores.model, configuration: eventStoreConfiguration())
            var request = CompactionRequest()
            request.usesDictionary = usesDictionary
            let (result, elapsed) = try timeOnce { try log.compact(request) }
            let speed = Double(result.rawBytes) / 1e6 / elapsed.seconds
            say(String(
                format: "  Strata compact, %@: %d events in %@, %@ → %@, ratio %.2f (zstd -3 CLI: %.2f), %.0f MB/s (zstd CLI: %.0f MB/s)",
                label, result.eventCount, format(elapsed), megabytes(result.rawBytes), megabytes(result.compressedBytes),
                result.ratio, zstdRatio, speed, zstdSpeed))
            record(name, "Strata \(label): ratio, speed",
                String(format: "%.2f (%.2f× zstd's), %.0f MB/s (%.2f× zstd's)", result.ratio, result.ratio / zstdRatio, speed, speed / zstdSpeed))
            // 3, compacted: the same scan, now reading segments.
            let (stats, count) = try scanEvents(copy, model: stores.model, label: "Strata forEachEvent (compacted, \(label))", repetitions: scanRepetitions)
            record("3. scan \(count) events", "Strata forEachEvent, compacted (\(label))", rate(Double(count), perSeconds: stats.medianSeconds) + " events")
        } catch {
            say("  Strata compact, \(label): PENDING — \(error)")
            record(name, "Strata \(label)", "pending: \(error)")
            record("3. scan \(stores.largeEvents) events", "Strata forEachEvent, compacted (\(label))", "pending (compaction not available)")
        }
    }
}

// MARK: - 5. Open time

func runOpenBenchmark(_ stores: EventStores, repetitions: Int) throws {
    heading("5. Open time, \(stores.largeEvents) events vs \(stores.smallEvents) events")
    try measureOpen(large: stores.large, small: stores.small, stores: stores, repetitions: repetitions, place: eventsDirectoryBase())
    try measurePersistedUndoOpen(stores, repetitions: min(repetitions, 5))
    try measureContextIndexUpgrade(stores)
    // The stores were built on a tmpfs: measure again on the disk too, where the open's
    // durable write transaction (opened-at time) pays a real fsync.
    let diskBase = environmentString("STRATA_BENCH_DIR") ?? FileManager.default.temporaryDirectory.path
    if eventsDirectoryBase() != diskBase {
        let copies = try scratchDirectory("open", base: diskBase)
        defer { remove(copies) }
        let large = (copies as NSString).appendingPathComponent("large")
        let small = (copies as NSString).appendingPathComponent("small")
        try FileManager.default.copyItem(atPath: stores.large, toPath: large)
        try FileManager.default.copyItem(atPath: stores.small, toPath: small)
        // Flush the copies first, or the open's fdatasync pays for writing them back.
        sync()
        try measureOpen(large: large, small: small, stores: stores, repetitions: repetitions, place: diskBase)
    }
}

private func measureOpen(large: String, small: String, stores: EventStores, repetitions: Int, place: String) throws {
    func open(_ path: String, _ label: String) throws -> Stats {
        try measure(
            label, warmup: 2, repetitions: repetitions,
            setup: { () },
            body: { _ in
                let log = try EventLog(path: path, model: stores.model, configuration: eventStoreConfiguration())
                withExtendedLifetime(log) {}
            })
    }
    let big = try open(large, "open+close, \(stores.largeEvents) events (\(place))")
    let little = try open(small, "open+close, \(stores.smallEvents) events (\(place))")
    let result = ratio(big.medianSeconds, little.medianSeconds)
    say("  open(\(stores.largeEvents)) ÷ open(\(stores.smallEvents)) = \(result)   (target ≤ 1.50×; by min \(ratio(big.minSeconds, little.minSeconds)))")
    record("5. open time (\(place))", "open(\(stores.largeEvents) events) ÷ open(\(stores.smallEvents))", result, target: "≤ 1.5×")
    record("5. open time (\(place))", "open \(stores.largeEvents) / \(stores.smallEvents) events", "\(format(big.median)) / \(format(little.median))")
}

/// 5b (no target): a context with persisted undo opened on each store, as the stores' main
/// writer ("editor", context "main": two thirds of their transactions), against opening the
/// coordinator alone; and a context with persisted undo under a fresh name, which has no
/// transactions of its own in the store (the first launch of a context on a store others
/// filled). Loading persisted undo reads the context's own transactions, found through the
/// per-context transaction index (spec 0004 §6.4) — without it, every event header back to
/// the log's start for the fresh name.
private func measurePersistedUndoOpen(_ stores: EventStores, repetitions: Int) throws {
    func open(_ path: String, _ label: String, undo: Bool, fresh: Bool = false) throws -> Stats {
        try measure(
            label, warmup: 1, repetitions: repetitions,
            setup: { () },
            body: { _ in
                let coordinator = PersistentStoreCoordinator(managedObjectModel: stores.model)
                try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: path), configuration: eventStoreConfiguration())
                if undo {
                    let context = ManagedObjectContext(
                        concurrencyType: .privateQueue, coordinator: coordinator, name: fresh ? "fresh-\(UUID().uuidString)" : "main",
                        transactionAuthor: "editor", persistentUndo: true)
                    let loaded = context.performAndWait { $0.canUndo }
                    precondition(loaded != fresh, fresh ? "a fresh context found something to undo" : "persisted undo loaded nothing")
                }
                withExtendedLifetime(coordinator) {}
            })
    }
    let plainBig = try open(stores.large, "coordinator open, \(stores.largeEvents) events", undo: false)
    let undoBig = try open(stores.large, "coordinator + persisted-undo context, \(stores.largeEvents) events", undo: true)
    let undoLittle = try open(stores.small, "coordinator + persisted-undo context, \(stores.smallEvents) events", undo: true)
    let freshBig = try open(stores.large, "coordinator + fresh persisted-undo context, \(stores.largeEvents) events", undo: true, fresh: true)
    let freshLittle = try open(stores.small, "coordinator + fresh persisted-undo context, \(stores.smallEvents) events", undo: true, fresh: true)
    say("  persisted undo at \(stores.largeEvents) ÷ at \(stores.smallEvents) = \(ratio(undoBig.medianSeconds, undoLittle.medianSeconds)); "
        + "with ÷ without persisted undo at \(stores.largeEvents) = \(ratio(undoBig.medianSeconds, plainBig.medianSeconds))")
    say("  fresh context at \(stores.largeEvents) ÷ at \(stores.smallEvents) = \(ratio(freshBig.medianSeconds, freshLittle.medianSeconds)); "
        + "fresh context ÷ coordinator alone at \(stores.largeEvents) = \(ratio(freshBig.medianSeconds, plainBig.medianSeconds))")
    record("5b. persisted-undo open", "context with persisted undo: \(stores.largeEvents) / \(stores.smallEvents) events / coordinator alone",
        "\(format(undoBig.median)) / \(format(undoLittle.median)) / \(format(plainBig.median))")
    record("5b. persisted-undo open", "fresh context (no own transactions): \(stores.largeEvents) / \(stores.smallEvents) events",
        "\(format(freshBig.median)) / \(format(freshLittle.median))")
}

/// 5c (no target, session 14): the first writable open of a store written before the
/// per-context transaction index existed builds it from the event headers, once, in one write
/// transaction (spec 0004 §6.4). A copy of the large store has its `contexts` table and
/// `contextIndexThrough` row removed with raw LMDB; its first open is timed once, and the next
/// open (nothing left to build) against it.
private func measureContextIndexUpgrade(_ stores: EventStores) throws {
    let copies = try scratchDirectory("upgrade", base: eventsDirectoryBase())
    defer { remove(copies) }
    let copy = (copies as NSString).appendingPathComponent("old")
    try FileManager.default.copyItem(atPath: stores.large, toPath: copy)
    do {
        let raw = try RawLMDB(path: copy)
        try raw.write { txn in
            var contexts: MDB_dbi = 0
            try lmdbCheck(mdb_dbi_open(txn, "contexts", 0, &contexts), "mdb_dbi_open contexts")
            try lmdbCheck(mdb_drop(txn, contexts, 1), "mdb_drop contexts")
            var meta: MDB_dbi = 0
            try lmdbCheck(mdb_dbi_open(txn, "meta", 0, &meta), "mdb_dbi_open meta")
            var name = Array("contextIndexThrough".utf8)
            try name.withUnsafeMutableBytes { bytes in
                var key = MDB_val(mv_size: bytes.count, mv_data: bytes.baseAddress)
                try lmdbCheck(mdb_del(txn, meta, &key, nil), "mdb_del contextIndexThrough")
            }
        }
    }
    let (_, first) = try timeOnce {
        let log = try EventLog(path: copy, model: stores.model, configuration: eventStoreConfiguration())
        withExtendedLifetime(log) {}
    }
    let (_, second) = try timeOnce {
        let log = try EventLog(path: copy, model: stores.model, configuration: eventStoreConfiguration())
        withExtendedLifetime(log) {}
    }
    say("  first writable open of a \(stores.largeEvents)-event store without the per-context index (builds it): \(format(first)); the next open: \(format(second))")
    record("5c. per-context index upgrade", "first open of a \(stores.largeEvents)-event store without the index / the next open", "\(format(first)) / \(format(second))")
}
