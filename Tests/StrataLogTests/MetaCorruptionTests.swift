import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// The store's bookkeeping numbers (head, compaction and purge points, purge marker, undo
/// retention) set to values that can't be right — past the log, at the top of UInt64 —
/// give errors or answers from every read, verify and maintenance step, never a trap; the
/// store reopens; restoring the number heals it.
@Suite("Event log: nonsense bookkeeping numbers and damaged catalog rows")
struct MetaCorruptionTests {
    @Test("each meta number at 0, past the log and near UInt64.max: reads, verify, compaction and reopening never trap")
    func nonsenseMetaNumbers() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store")
        _ = try compactedLog(dir, transactions: 80, before: 31, eventsPerFrame: 8)
        let keys = [
            MetaKey.head, MetaKey.compactedThrough, MetaKey.purgedThrough, MetaKey.purgeMarker, MetaKey.undoRetention, MetaKey.contextIndexThrough,
        ]
        let values: [UInt64] = [0, 1, 30, 79, 81, 1 << 40, 1 << 63, .max - 1, .max]
        let member = StoredObjectID(entity: "Member", primaryKey: 2)
        for key in keys {
            for value in values {
                let original: [UInt8]? = try {
                    let log = try EventLog(openingExistingAt: path, readOnly: false)
                    return try log.environment.write { txn in
                        let old = try txn.value(forKey: key, in: log.tables.meta)
                        try txn.put(bigEndianBytes(value), forKey: key, in: log.tables.meta)
                        return old
                    }
                }()
                // Reopen with the number in place, then everything a reader or a
                // maintainer does: errors are fine.
                if let log = try? EventLog(openingExistingAt: path, readOnly: false) {
                    _ = try? log.read { reader in try reader.event(5) }
                    _ = try? log.read { reader in try reader.event(50) }
                    _ = try? log.read { reader in try reader.forEachEvent { _ in .next } }
                    _ = try? log.read { reader in try reader.forEachEvent(among: [3, 40, 79]) { _ in .next } }
                    _ = try? log.read { reader in try reader.state(asOf: 40) }
                    _ = try? log.read { reader in try reader.object(member, asOf: 10) }
                    _ = try? log.read { reader in try reader.forEachVersion(of: member) { _, _ in .next } }
                    _ = try? log.read { reader in try reader.history(ofEntities: ["Member"], after: 0, through: .max, budget: 1000) }
                    _ = try? log.read { reader in try reader.forEachTransaction(author: nil, contextName: nil, reversed: true) { _ in .next } }
                    _ = try? log.verify()
                    var dry = CompactionRequest()
                    dry.dryRun = true
                    _ = try? log.compact(dry)
                    _ = try? log.metadata
                }
                // Writes, on a copy: a commit and a purge.
                let copy = dir.file("copy")
                try? FileManager.default.removeItem(atPath: copy)
                try FileManager.default.copyItem(atPath: path, toPath: copy)
                if let log = try? EventLog(openingExistingAt: copy, readOnly: false) {
                    var draft = TransactionDraft(author: "fuzz")
                    draft.insert("Member", values: ["name": s("late"), "age": i(30), "email": s("late@x.org")])
                    _ = try? log.commit(draft)
                    _ = try? log.purge(through: 10, author: "fuzz")
                    _ = try? log.compact(CompactionRequest())
                    _ = try? log.verify()
                }
                let log = try EventLog(openingExistingAt: path, readOnly: false)
                try log.environment.write { txn in
                    if let original { try txn.put(original, forKey: key, in: log.tables.meta) } else { _ = try txn.delete(key: key, in: log.tables.meta) }
                }
                #expect(try log.verify().problems.isEmpty, "\(String(decoding: key, as: UTF8.self)) = \(value), restored")
            }
        }
    }

    @Test("damaged catalog, model, checkpoint and consumer rows: opening and reading give errors or answers, never a trap (STRATA_CORRUPTION_ROUNDS)")
    func damagedCatalogRows() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store")
        try compactedLog(dir, transactions: 80, before: 31, eventsPerFrame: 8).log.registerConsumer("indexer", processedThrough: 40)
        let member = StoredObjectID(entity: "Member", primaryKey: 2)
        var random = SeededGenerator(seed: 0xCA7A_1065)
        let rounds = Int(ProcessInfo.processInfo.environment["STRATA_CORRUPTION_ROUNDS"] ?? "") ?? 150
        for _ in 0..<rounds {
            // Damage one row of one table, by key or by value.
            let (table, key, value, damagedKey, damagedValue): (String, [UInt8], [UInt8], [UInt8], [UInt8]) = try {
                let log = try RawStore(path)
                let tables = [("catalog", log.tables.catalog), ("models", log.tables.models), ("checkpoints", log.tables.checkpoints),
                              ("consumers", log.tables.consumers)]
                var (name, database) = tables[0]
                var rows: [([UInt8], [UInt8])] = []
                while rows.isEmpty {
                    (name, database) = tables[Int(random.next() % UInt64(tables.count))]
                    rows = try log.environment.read { txn in
                        var rows: [([UInt8], [UInt8])] = []
                        try txn.forEach(in: database) { k, v in
                            rows.append((k.withUnsafeBytes { Array($0) }, v.withUnsafeBytes { Array($0) }))
                            return .next
                        }
                        return rows
                    }
                }
                let (key, value) = rows[Int(random.next() % UInt64(rows.count))]
                var newKey = key
                var newValue = value
                if random.next() % 3 == 0 && key.count > 1 {
                    newKey[Int(random.next() % UInt64(key.count))] ^= UInt8(1 << (random.next() % 8))
                } else if random.next() % 2 == 0, !value.isEmpty {
                    newValue = Array(value.prefix(Int(random.next() % UInt64(value.count))))
                } else if !value.isEmpty {
                    for _ in 0...(random.next() % 3) { newValue[Int(random.next() % UInt64(value.count))] ^= UInt8(1 << (random.next() % 8)) }
                }
                try log.environment.write { txn in
                    if newKey != key { _ = try txn.delete(key: key, in: database) }
                    try txn.put(newValue, forKey: newKey, in: database)
                }
                return (name, key, value, newKey, newValue)
            }()
            if let log = try? EventLog(openingExistingAt: path, readOnly: true) {
                _ = try? log.read { reader in try reader.event(5) }
                _ = try? log.read { reader in try reader.event(50) }
                _ = try? log.read { reader in try reader.forEachEvent { _ in .next } }
                _ = try? log.read { reader in try reader.currentState() }
                _ = try? log.read { reader in try reader.state(asOf: 40) }
                _ = try? log.read { reader in try reader.object(member, asOf: 10) }
                _ = try? log.read { reader in try reader.consumers() }
                _ = try? log.storedModels().map { try log.storedModel(version: $0.version) }
                _ = try? log.verify()
                _ = try? log.metadata
            }
            let log = try RawStore(path)
            let database = try #require(
                [("catalog", log.tables.catalog), ("models", log.tables.models), ("checkpoints", log.tables.checkpoints),
                 ("consumers", log.tables.consumers)].first { $0.0 == table }?.1)
            try log.environment.write { txn in
                if damagedKey != key { _ = try txn.delete(key: damagedKey, in: database) }
                try txn.put(value, forKey: key, in: database)
            }
            _ = damagedValue
        }
        #expect(try EventLog(openingExistingAt: path, readOnly: true).verify().problems.isEmpty)
    }
}

extension MetaCorruptionTests {
    @Test("damaged segment and dictionary files: reads, as-of, history and verify give errors naming the file, never a trap (STRATA_CORRUPTION_ROUNDS)")
    func damagedSegmentFiles() throws {
        let dir = try TemporaryDirectory()
        let (log, report) = try compactedLog(dir, transactions: 700, before: 651, eventsPerFrame: 16, usesDictionary: true)
        let files = [try #require(report.segmentFile), try #require(report.dictionaryFile)]
        let originals = try files.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        let expected = try allEvents(log)
        let member = StoredObjectID(entity: "Member", primaryKey: 2)
        var random = SeededGenerator(seed: 0x5E6_F11E)
        let rounds = Int(ProcessInfo.processInfo.environment["STRATA_CORRUPTION_ROUNDS"] ?? "") ?? 60
        for round in 0..<rounds {
            let which = Int(random.next() % 2)
            var bytes = [UInt8](originals[which])
            switch random.next() % 3 {
            case 0:
                for _ in 0...(random.next() % 4) { bytes[Int(random.next() % UInt64(bytes.count))] ^= UInt8(1 << (random.next() % 8)) }
            case 1: bytes = Array(bytes.prefix(Int(random.next() % UInt64(bytes.count))))
            default: bytes += (0...(random.next() % 64)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            }
            try Data(bytes).write(to: URL(fileURLWithPath: files[which]))
            var failures: [String] = []
            func attempt(_ body: () throws -> Void) {
                do { try body() } catch { failures.append("\(error)") }
            }
            attempt { _ = try allEvents(log) }
            attempt { _ = try log.read { reader in try reader.state(asOf: 100) } }
            attempt { _ = try log.read { reader in try reader.object(member, asOf: 5) } }
            attempt { _ = try log.read { reader in try reader.forEachVersion(of: member) { _, _ in .next } } }
            let verification = try log.verify()
            // Damage verify can't see must be damage nothing reads: a dictionary byte no
            // frame uses still decodes every event to the bytes their checksums cover.
            if verification.problems.isEmpty {
                let events = try allEvents(log)
                #expect(failures.isEmpty && events == expected, "round \(round): undetected damage changed what reads")
            }
            #expect(verification.problems.allSatisfy { $0.kind != .segment || $0.location.contains("segment") })
            for failure in failures where !failure.contains(".zst") && !failure.contains(".dict") {
                Issue.record("round \(round): an error that names no file: \(failure)")
            }
            try originals[which].write(to: URL(fileURLWithPath: files[which]))
        }
        #expect(try allEvents(log) == expected)
        #expect(try log.verify().problems.isEmpty)
    }
}

/// The store's LMDB environment and tables opened directly, without the event log's checks:
/// for damaging and repairing rows in tests.
struct RawStore {
    let environment: LMDBEnvironment
    let tables: StoreTables

    init(_ path: String) throws {
        var options = LMDBEnvironment.Options()
        options.maxDatabases = StoreTables.names.count + 4
        environment = try LMDBEnvironment(path: path, databases: StoreTables.names.map { DatabaseDescriptor($0) }, options: options)
        tables = try StoreTables(environment)
    }
}
