import Foundation
import GRDB
import Strata
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

// Issue 8's benchmark (`merge`): how soon a context shows a save made elsewhere. Every
// Strata figure goes through the public context API; the writer of M1 is this same binary,
// started as a second process (`StrataBenchmarks merge-writer …`).
//
// M1. Another process saves (one `score` update of one person per save, durable, lockstep:
//     the next save starts after this process has merged the last). The writer prints
//     "saved N T" on its standard output as soon as `save()` returns (T: CLOCK_MONOTONIC, ns,
//     system-wide); that line is the *notification*. Strata: an automatically merging
//     context holding the person runs an empty `performAndWait` — the head check at block
//     entry sees the new head and merges the transaction (refreshing the person) before the
//     block runs; the block checks the new score. Figures: notification → merged, and save
//     returned (in the writer) → merged, median and p99 over `STRATA_BENCH_MERGE_SAVES`
//     saves. The inotify store watcher (issue 8, history work) will replace the pipe line as
//     the notification once it is wired in; the merge after it is what is measured here.
//     Peers: the event-log floor (on notification, one `EventLog.read` of the head and the
//     person's record: the least any reader must do to see the change) and GRDB (a writer
//     process updating the row in SQLite; on notification, `SELECT score` through a
//     `DatabaseQueue`).
// M2. In this process: context A saves, context B (automatically merging, on the same
//     coordinator, holding the person) merges through the coordinator's broadcast; an
//     observer on B timestamps the did-merge. Figure: save returned → merged. Peer: GRDB
//     `ValueObservation` of the row, write returned → observer called.

/// Nanoseconds on the system-wide monotonic clock (the same in both processes).
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// Median and 99th percentile of nanosecond samples, as seconds.
struct Percentiles {
    let median: Double
    let p99: Double
    /// Samples of 0 (the other side finished before this side read the clock).
    let zeros: Int

    init(_ samples: [UInt64]) {
        zeros = samples.filter { $0 == 0 }.count
        let sorted = samples.sorted()
        guard !sorted.isEmpty else {
            median = 0
            p99 = 0
            return
        }
        median = Double(sorted[sorted.count / 2]) / 1e9
        p99 = Double(sorted[min(sorted.count - 1, Int((Double(sorted.count) * 0.99).rounded(.up)) - 1)]) / 1e9
    }

    var text: String { "median \(format(seconds: median)), p99 \(format(seconds: p99))" }
}

/// A child process spoken to line by line.
final class LineProcess {
    let process = Process()
    private let output = Pipe()
    private let input = Pipe()
    private var buffer = Data()

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = arguments
        process.standardOutput = output
        process.standardInput = input
        try process.run()
    }

    func send(_ line: String) { input.fileHandleForWriting.write(Data((line + "\n").utf8)) }

    func nextLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }

    func finish() {
        try? input.fileHandleForWriting.close()
        while nextLine() != nil {}
        process.waitUntilExit()
    }
}

struct MergeBenchmarkError: Error, CustomStringConvertible {
    let description: String
}

/// The person each benchmark context keeps (used only inside that context's blocks).
nonisolated(unsafe) private var heldPerson: [ObjectIdentifier: ManagedObject] = [:]

// MARK: - The writer process

/// `merge-writer strata STORE PERSON_URI` / `merge-writer grdb DATABASE`: for each line
/// "save N", sets the person's score to N, saves durably, prints "saved N T".
func runMergeWriter(_ arguments: [String]) -> Never {
    func fail(_ text: String) -> Never {
        FileHandle.standardError.write(Data("merge-writer: \(text)\n".utf8))
        exit(1)
    }
    do {
        switch arguments.first {
        case "strata" where arguments.count == 3:
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try peopleModel())
            try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: arguments[1]), configuration: benchConfiguration())
            guard let uri = URL(string: arguments[2]), let id = coordinator.managedObjectID(forURIRepresentation: uri) else {
                fail("no person \(arguments[2])")
            }
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "writer")
            say("ready")
            while let line = readLine() {
                guard line.hasPrefix("save "), let n = Int(line.dropFirst(5)) else { continue }
                try context.performAndWait { (context: isolated ManagedObjectContext) throws in
                    try context.existingObject(with: id).setValue(Double(n), forKey: "score")
                    try context.save()
                }
                say("saved \(n) \(monotonicNanoseconds())")
            }
        case "grdb" where arguments.count == 2:
            let queue = try DatabaseQueue(path: arguments[1])
            say("ready")
            while let line = readLine() {
                guard line.hasPrefix("save "), let n = Int(line.dropFirst(5)) else { continue }
                try queue.write { db in try db.execute(sql: "UPDATE person SET score = ? WHERE id = 1", arguments: [Double(n)]) }
                say("saved \(n) \(monotonicNanoseconds())")
            }
        default:
            fail("usage: merge-writer strata STORE PERSON_URI | merge-writer grdb DATABASE")
        }
    } catch {
        fail("\(error)")
    }
    exit(0)
}

// MARK: - The benchmarks

func runMergeBenchmarks(saves: Int) throws {
    heading("Merge (issue 8): save elsewhere → merged, \(saves) saves")
    let directory = try scratchDirectory("merge")
    defer { remove(directory) }
    let model = try peopleModel()
    let storeURL = URL(fileURLWithPath: directory).appendingPathComponent("store")
    let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
    try coordinator.addPersistentStore(type: .eventLog, at: storeURL, configuration: benchConfiguration())
    let row = makePeople(1)[0]
    let personID = try ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator).performAndWait {
        (context: isolated ManagedObjectContext) throws in
        let person = try context.insertNewObject(forEntityName: "Person")
        person.setValue(row.firstName, forKey: "firstName")
        person.setValue(row.lastName, forKey: "lastName")
        person.setValue(row.email, forKey: "email")
        person.setValue(row.age, forKey: "age")
        person.setValue(0.0, forKey: "score")
        try context.save()
        return person.objectID
    }

    // M1, Strata: an automatically merging context, the head check at the next block.
    let watcher = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "watcher")
    try watcher.performAndWait { (context: isolated ManagedObjectContext) throws in
        context.automaticallyMergesChangesFromParent = true
        heldPerson[ObjectIdentifier(context)] = try context.existingObject(with: personID)
    }
    let writer = try LineProcess(["merge-writer", "strata", storeURL.path, personID.description])
    guard writer.nextLine() == "ready" else { throw MergeBenchmarkError(description: "the writer didn't start") }
    func lockstep(_ first: Int, _ count: Int, see: (Double) throws -> Void) throws -> (notified: [UInt64], saved: [UInt64]) {
        var notified: [UInt64] = []
        var saved: [UInt64] = []
        for n in first..<(first + count) {
            writer.send("save \(n)")
            guard let line = writer.nextLine() else { throw MergeBenchmarkError(description: "the writer stopped") }
            let notice = monotonicNanoseconds()
            let words = line.split(separator: " ")
            guard words.count == 3, words[1] == "\(n)", let savedAt = UInt64(words[2]) else {
                throw MergeBenchmarkError(description: "unexpected writer line: \(line)")
            }
            try see(Double(n))
            let merged = monotonicNanoseconds()
            notified.append(merged - notice)
            saved.append(merged &- savedAt)
        }
        return (notified, saved)
    }
    let warmup = max(saves / 10, 10)
    _ = try lockstep(1, warmup) { expected in try watcherSees(watcher, expected) }
    let strata = try lockstep(1 + warmup, saves) { expected in try watcherSees(watcher, expected) }

    // M1, floor: one read of the head and the record through the event log.
    let log = coordinator.persistentStores[0].log
    let stored = StoredObjectID(entity: "Person", primaryKey: 1)
    let floor = try lockstep(1 + warmup + saves, saves) { expected in
        let score = try log.read { (reader: borrowing LogReader) throws -> Double? in
            _ = try reader.head
            guard case .attribute(.double(let value))? = try reader.object(stored)?.values["score"] else { return nil }
            return value
        }
        guard score == expected else { throw MergeBenchmarkError(description: "the floor read \(String(describing: score)), not \(expected)") }
    }
    writer.finish()
    let strataNotified = Percentiles(strata.notified)
    let strataSaved = Percentiles(strata.saved)
    let floorNotified = Percentiles(floor.notified)
    say("  M1 Strata, another process's save: notification → merged \(strataNotified.text); save returned → merged \(strataSaved.text)")
    say("  M1 floor (EventLog.read of head + record):   notification → seen \(floorNotified.text)")

    // M1, GRDB: a writer process updating SQLite; this process reads the row.
    let grdbDirectory = try scratchDirectory("merge-grdb")
    defer { remove(grdbDirectory) }
    let grdb = try makeGRDBDatabase(in: grdbDirectory)
    try grdb.write { db in
        try GRDBTeam(id: 1, name: "Otters").insert(db)
        var person = GRDBPerson(row)
        person.teamId = 1
        person.score = 0
        try person.insert(db)
    }
    let grdbPath = (grdbDirectory as NSString).appendingPathComponent("people.sqlite")
    let grdbWriter = try LineProcess(["merge-writer", "grdb", grdbPath])
    guard grdbWriter.nextLine() == "ready" else { throw MergeBenchmarkError(description: "the GRDB writer didn't start") }
    var grdbNotified: [UInt64] = []
    for n in 1...(warmup + saves) {
        grdbWriter.send("save \(n)")
        guard grdbWriter.nextLine() != nil else { throw MergeBenchmarkError(description: "the GRDB writer stopped") }
        let notice = monotonicNanoseconds()
        let score = try grdb.read { db in try Double.fetchOne(db, sql: "SELECT score FROM person WHERE id = 1") }
        guard score == Double(n) else { throw MergeBenchmarkError(description: "GRDB read \(String(describing: score)), not \(n)") }
        if n > warmup { grdbNotified.append(monotonicNanoseconds() - notice) }
    }
    grdbWriter.finish()
    let grdbFigure = Percentiles(grdbNotified)
    say("  M1 GRDB (SELECT of the row):                 notification → seen \(grdbFigure.text)")
    say("  M1 Strata ÷ floor: median \(ratio(strataNotified.median, floorNotified.median)), p99 \(ratio(strataNotified.p99, floorNotified.p99)); "
        + "Strata ÷ GRDB: median \(ratio(strataNotified.median, grdbFigure.median)), p99 \(ratio(strataNotified.p99, grdbFigure.p99))")
    record("M merge", "M1 other process: notification → merged (median / p99)", "\(format(seconds: strataNotified.median)) / \(format(seconds: strataNotified.p99))")
    record("M merge", "M1 other process: save returned → merged (median / p99)", "\(format(seconds: strataSaved.median)) / \(format(seconds: strataSaved.p99))")
    record("M merge", "M1 ÷ event-log floor (median / p99)", "\(ratio(strataNotified.median, floorNotified.median)) / \(ratio(strataNotified.p99, floorNotified.p99))")
    record("M merge", "M1 ÷ GRDB read of the row (median / p99)", "\(ratio(strataNotified.median, grdbFigure.median)) / \(ratio(strataNotified.p99, grdbFigure.p99))")

    // M2, in this process: the coordinator's broadcast (the M1 watcher stops merging first).
    watcher.performAndWait { (context: isolated ManagedObjectContext) in context.automaticallyMergesChangesFromParent = false }
    let inProcess = try inProcessMerge(coordinator: coordinator, personID: personID, saves: saves, warmup: warmup, start: 1 + warmup + 2 * saves)
    let grdbObserved = try grdbObservation(grdb, saves: saves, warmup: warmup, start: warmup + saves + 1)
    say("  M2 Strata, another context's save: save returned → merged \(inProcess.text) (\(inProcess.zeros) merged before the saver read the clock)")
    say("  M2 GRDB ValueObservation: write returned → observed \(grdbObserved.text) (\(grdbObserved.zeros) observed before the writer read the clock)")
    say("  M2 Strata ÷ GRDB: median \(ratio(inProcess.median, grdbObserved.median)), p99 \(ratio(inProcess.p99, grdbObserved.p99))")
    record("M merge", "M2 same process: save returned → merged (median / p99)", "\(format(seconds: inProcess.median)) / \(format(seconds: inProcess.p99))")
    record("M merge", "M2 ÷ GRDB ValueObservation (median / p99)", "\(ratio(inProcess.median, grdbObserved.median)) / \(ratio(inProcess.p99, grdbObserved.p99))")
}

/// Runs an empty block on the automatically merging context (its head check merges) and
/// checks it shows `expected`.
private func watcherSees(_ watcher: ManagedObjectContext, _ expected: Double) throws {
    let score = watcher.performAndWait { (context: isolated ManagedObjectContext) in
        heldPerson[ObjectIdentifier(context)]?.value(forKey: "score") as? Double
    }
    guard score == expected else { throw MergeBenchmarkError(description: "the watcher shows \(String(describing: score)), not \(expected)") }
}

/// Timestamps of did-merge notifications, handed from the observing context to the benchmark.
private final class MergeSignal: Sendable {
    let semaphore = DispatchSemaphore(value: 0)
    let times = Mutex<[UInt64]>([])
}

private func inProcessMerge(coordinator: PersistentStoreCoordinator, personID: ManagedObjectID, saves: Int, warmup: Int, start: Int) throws -> Percentiles {
    let saver = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "saver")
    let merger = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "merger")
    let signal = MergeSignal()
    try merger.performAndWait { (context: isolated ManagedObjectContext) throws in
        context.automaticallyMergesChangesFromParent = true
        heldPerson[ObjectIdentifier(context)] = try context.existingObject(with: personID)
        _ = context.addObserver { change in
            if case .didMerge = change.notification {
                let now = monotonicNanoseconds()
                signal.times.withLock { $0.append(now) }
                signal.semaphore.signal()
            }
        }
    }
    try saver.performAndWait { (context: isolated ManagedObjectContext) throws in
        heldPerson[ObjectIdentifier(context)] = try context.existingObject(with: personID)
    }
    var samples: [UInt64] = []
    for n in start..<(start + warmup + saves) {
        let saved = try saver.performAndWait { (context: isolated ManagedObjectContext) throws -> UInt64 in
            heldPerson[ObjectIdentifier(context)]?.setValue(Double(n), forKey: "score")
            try context.save()
            return monotonicNanoseconds()
        }
        signal.semaphore.wait()
        let merged = signal.times.withLock { $0.removeLast() }
        // The merge runs on the other context's queue and may finish before this queue reads
        // the clock after `save()`: such a sample counts as 0.
        if n >= start + warmup { samples.append(merged > saved ? merged - saved : 0) }
    }
    let shown = merger.performAndWait { (context: isolated ManagedObjectContext) in
        heldPerson[ObjectIdentifier(context)]?.value(forKey: "score") as? Double
    }
    guard shown == Double(start + warmup + saves - 1) else {
        throw MergeBenchmarkError(description: "the merging context shows \(String(describing: shown))")
    }
    return Percentiles(samples)
}

private func grdbObservation(_ queue: DatabaseQueue, saves: Int, warmup: Int, start: Int) throws -> Percentiles {
    let signal = MergeSignal()
    let observation = ValueObservation.tracking { db in try Double.fetchOne(db, sql: "SELECT score FROM person WHERE id = 1") }
    let cancellable = observation.start(
        in: queue, scheduling: .async(onQueue: DispatchQueue(label: "grdb.observer")), onError: { _ in },
        onChange: { _ in
            let now = monotonicNanoseconds()
            signal.times.withLock { $0.append(now) }
            signal.semaphore.signal()
        })
    defer { cancellable.cancel() }
    signal.semaphore.wait()  // the initial value
    var samples: [UInt64] = []
    for n in start..<(start + warmup + saves) {
        try queue.write { db in try db.execute(sql: "UPDATE person SET score = ? WHERE id = 1", arguments: [Double(n)]) }
        let written = monotonicNanoseconds()
        signal.semaphore.wait()
        let observed = signal.times.withLock { $0.removeLast() }
        if n >= start + warmup { samples.append(observed > written ? observed - written : 0) }
    }
    return Percentiles(samples)
}
