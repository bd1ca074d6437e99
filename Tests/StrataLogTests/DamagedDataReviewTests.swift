import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// Damage inside the store's LMDB values — an event's chunks, a counter row, a checkpoint —
/// written through the storage wrapper into a real store, then read through every path: each
/// read is an error naming the table, sequence or object and what is wrong, `verify` reports
/// it, and nothing reads wrong data without a word or writes over an object.
@Suite("Damaged values inside the store")
struct DamagedDataReviewTests {
    /// The rows of `table` whose keys start with `prefix`.
    func rows(_ log: EventLog, _ table: LMDBDatabase, prefix: [UInt8] = []) throws -> [([UInt8], [UInt8])] {
        try log.environment.read { txn in
            var rows: [([UInt8], [UInt8])] = []
            try txn.forEach(in: table, range: prefix.isEmpty ? .all : .prefix(prefix)) { key, value in
                rows.append((key.withUnsafeBytes { Array($0) }, value.withUnsafeBytes { Array($0) }))
                return .next
            }
            return rows
        }
    }

    func failure(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch {
            return "\(error)"
        }
    }

    func insertMember(_ log: EventLog, _ name: String) throws -> StoredObjectID? {
        var draft = TransactionDraft(author: "damage")
        let member = draft.insert("Member", values: ["name": s(name), "age": i(44), "email": s("\(name)@x.org")])
        return try log.commit(draft).permanentID(for: member)
    }

    // MARK: - Counters

    @Test("a counter row of the wrong length is an error naming the entity, not 0: the next insert doesn't overwrite Member/p1")
    func counterOfWrongLength() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 30)
        let code = try log.catalog.entityCode("Member")
        let first = StoredObjectID(entity: "Member", primaryKey: 1)
        let before = try log.read { try $0.object(first) }
        try log.environment.write { txn in try txn.put([0, 0, 0, 11] as [UInt8], forKey: TableWriter.counterKey(code), in: log.tables.counters) }

        let message = failure { _ = try insertMember(log, "intruder") }
        #expect(message?.contains("primary-key counter of Member is 4 bytes (0000000b), not 8") == true, "\(message ?? "no error")")
        #expect(try log.read { try $0.object(first) } == before, "p1 is untouched")
        #expect(failure { _ = try log.reservePrimaryKeys(of: "Member", count: 2) }?.contains("counter of Member") == true)
        #expect(failure { _ = try log.read { try $0.lastPrimaryKey(of: "Member") } }?.contains("counter of Member") == true)
        let report = try log.verify()
        #expect(report.problems.contains { $0.location == "counter Member" && $0.message.contains("4 bytes") }, "\(report.problems)")
    }

    @Test("a counter behind the objects it gave out: the insert is refused naming the object, and the object it would get is untouched")
    func counterBehind() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 30)
        let code = try log.catalog.entityCode("Member")
        let second = StoredObjectID(entity: "Member", primaryKey: 2)
        let before = try #require(try log.read { try $0.object(second) })
        let head = try log.read { try $0.head }
        try log.environment.write { txn in try txn.put(bigEndianBytes(UInt64(1)), forKey: TableWriter.counterKey(code), in: log.tables.counters) }

        let message = failure { _ = try insertMember(log, "intruder") }
        #expect(message?.contains("Member/p2") == true && message?.contains("counter") == true, "\(message ?? "no error")")
        #expect(try log.read { try $0.object(second) } == before, "p2 is untouched")
        #expect(try log.read { try $0.head } == head, "nothing was committed")
        #expect(try log.verify().problems.contains { $0.location == "counter Member" })
    }

    // MARK: - Events

    @Test("an event missing from the raw log: every walk over it fails naming it; as-of, replay and compaction don't skip it")
    func missingRawEvent() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 30)
        try log.environment.write { txn in
            for (key, _) in try rows(log, log.tables.events, prefix: bigEndianBytes(UInt64(3))) { _ = try txn.delete(key: key, in: log.tables.events) }
        }
        #expect(failure { _ = try allEvents(log) }?.contains("event 3 is missing") == true)
        #expect(failure { _ = try log.read { try $0.event(3) } }?.contains("event 3 is missing") == true)
        #expect(failure { _ = try log.read { try $0.state(asOf: 5) } }?.contains("event 3 is missing") == true)
        #expect(failure { _ = try log.read { reader in try reader.forEachEvent(from: 2, through: 3) { _ in .next } } }?.contains("event 3") == true)
        #expect(failure { _ = try log.replay(through: 10, into: dir.file("replayed")) }?.contains("event 3 is missing") == true)
        #expect(failure { _ = try log.compact(CompactionRequest(before: 10)) }?.contains("event 3 is missing") == true)
        #expect(try log.read { try $0.event(4).sequence } == 4, "the events after it still read, and compaction moved nothing")
        // The last event missing: a walk to the head says so.
        try log.environment.write { txn in
            for (key, _) in try rows(log, log.tables.events, prefix: bigEndianBytes(UInt64(30))) { _ = try txn.delete(key: key, in: log.tables.events) }
        }
        #expect(failure { _ = try log.read { reader in try reader.forEachEvent(from: 20) { _ in .next } } }?.contains("event 30 is missing") == true)
        let report = try log.verify()
        #expect(report.problems.contains { $0.kind == .sequence && $0.message.contains("3…3") || $0.message.contains("events 3") }, "\(report.problems)")
    }

    @Test("an event's middle chunk missing, a chunk out of order, a stray key: errors and verify name the chunk, not just a checksum")
    func damagedChunks() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel()) { $0.chunkSize = 64 }
        _ = try insertMember(log, String(repeating: "long name ", count: 40))
        let id = try #require(try insertMember(log, String(repeating: "other name ", count: 40)))
        _ = try insertMember(log, "after")
        let chunks = try rows(log, log.tables.events, prefix: bigEndianBytes(UInt64(2)))
        #expect(chunks.count > 4)

        // Chunk 1 gone.
        try log.environment.write { txn in _ = try txn.delete(key: chunks[1].0, in: log.tables.events) }
        var message = failure { _ = try log.read { try $0.event(2) } }
        #expect(message?.contains("event 2: chunk 1 of its bytes is missing from the events table") == true, "\(message ?? "no error")")
        #expect(failure { _ = try log.read { try $0.forEachVersion(of: id) { _, _ in .next } } }?.contains("chunk 1") == true)
        var report = try log.verify()
        #expect(report.problems.contains { $0.kind == .event && $0.location == "event 2" && $0.message.contains("chunk 1") }, "\(report.problems)")
        #expect(failure { _ = try log.compact(CompactionRequest(before: 4)) }?.contains("chunk 1") == true)

        // Chunk 0 gone instead.
        try log.environment.write { txn in
            try txn.put(chunks[1].1, forKey: chunks[1].0, in: log.tables.events)
            _ = try txn.delete(key: chunks[0].0, in: log.tables.events)
        }
        message = failure { _ = try log.read { try $0.event(2) } }
        #expect(message?.contains("chunk 0 of its bytes is missing") == true, "\(message ?? "no error")")

        // A stray key of 9 bytes among event 2's rows.
        try log.environment.write { txn in
            try txn.put(chunks[0].1, forKey: chunks[0].0, in: log.tables.events)
            try txn.put([1, 2, 3] as [UInt8], forKey: bigEndianBytes(UInt64(2)) + [7], in: log.tables.events)
        }
        message = failure { _ = try log.read { try $0.event(2) } }
        #expect(message?.contains("key of 9 bytes") == true, "\(message ?? "no error")")
        report = try log.verify()
        #expect(report.problems.contains { $0.location == "event 2" && $0.message.contains("key of 9 bytes") }, "\(report.problems)")
        try log.environment.write { txn in _ = try txn.delete(key: bigEndianBytes(UInt64(2)) + [7], in: log.tables.events) }
        #expect(try log.verify().problems.isEmpty)
        #expect(try allEvents(log).count == 3)
    }

    // MARK: - Checkpoints

    @Test("a damaged checkpoint: verify compares it with the replay; a lost record row is an error for as-of reads, not a missing object")
    func damagedCheckpoint() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 300)
        #expect(try log.read { try $0.checkpoints() } == [100, 200, 300])
        #expect(try log.verify().problems.isEmpty)
        let prefix = bigEndianBytes(UInt64(200)) + [CheckpointTag.record]
        let records = try rows(log, log.tables.checkpoints, prefix: prefix)
        let (key, value) = try #require(records.first { $0.0.last == 2 && $0.0.count == 19 })
        let writer = TableWriter(tables: log.tables, catalog: log.catalog, schema: log.schema, modelVersion: log.modelVersion)
        var record = try value.withUnsafeBytes { try writer.decodeRecord($0, entityName: "Member", context: "test") }
        let intact = try log.read { try $0.state(asOf: 210) }

        // A value changed: the checkpoint still decodes, so verify must find it.
        record.values["name"] = .attribute(.string("forged"))
        let forged = try writer.encodeRecord(record, entity: try log.schema.entity("Member"))
        try log.environment.write { txn in try txn.put(forged, forKey: key, in: log.tables.checkpoints) }
        let report = try log.verify()
        #expect(
            report.problems.contains {
                $0.kind == .projection && $0.location == "checkpoint 200 state Member/p2" && $0.message.contains("name: checkpoint \"forged\"")
            }, "\(report.problems)")

        // A record row lost: the count in the header no longer holds.
        try log.environment.write { txn in _ = try txn.delete(key: key, in: log.tables.checkpoints) }
        let message = failure { _ = try log.read { try $0.state(asOf: 210) } }
        #expect(message?.contains("checkpoint 200 holds") == true, "\(message ?? "no error")")
        #expect(try log.verify().problems.contains { $0.location == "checkpoint 200 state Member/p2" && $0.message.contains("missing from the checkpoint") })

        // A member row naming an unknown relationship.
        try log.environment.write { txn in
            try txn.put(value, forKey: key, in: log.tables.checkpoints)
            try txn.put([UInt8](), forKey: bigEndianBytes(UInt64(200)) + [CheckpointTag.member] + [0, 2] + bigEndianBytes(UInt64(1)) + [0x7F, 0x7F] + [0, 2] + bigEndianBytes(UInt64(3)), in: log.tables.checkpoints)
        }
        #expect(failure { _ = try log.read { try $0.state(asOf: 210) } }?.contains("relationship code 32639") == true)
        try log.environment.write { txn in
            _ = try txn.delete(key: bigEndianBytes(UInt64(200)) + [CheckpointTag.member] + [0, 2] + bigEndianBytes(UInt64(1)) + [0x7F, 0x7F] + [0, 2] + bigEndianBytes(UInt64(3)), in: log.tables.checkpoints)
        }
        #expect(try log.read { try $0.state(asOf: 210) } == intact)
        #expect(try log.verify().problems.isEmpty)
    }
}
