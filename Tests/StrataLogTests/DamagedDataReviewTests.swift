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

extension DamagedDataReviewTests {
    @Test("a damaged catalog row — two entities with one code, a code of 1 byte, a renamed entity — stops the open naming it; nothing is re-coded")
    func damagedCatalog() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store")
        _ = try populatedLog(dir, transactions: 30)
        let member = StoredObjectID(entity: "Member", primaryKey: 1)
        let intact = try EventLog(openingExistingAt: path).read { try $0.object(member) }
        #expect(intact != nil)
        let sponsor = try Self.code(try RawStore(path), "Sponsor")
        let original = try #require(try RawStore(path).environment.read { txn in
            try txn.value(forKey: Array("eMember".utf8), in: try RawStore(path).tables.catalog)
        })
        for (damaged, expected) in [
            ([0, UInt8(sponsor)], "entity code \(sponsor) is given to both Member and Sponsor"),
            ([0], "the entity Member's code is 1 bytes, not 2"),
        ] as [([UInt8], String)] {
            do {
                let store = try RawStore(path)
                try store.environment.write { txn in try txn.put(damaged, forKey: Array("eMember".utf8), in: store.tables.catalog) }
            }
            for open in [
                { _ = try EventLog(openingExistingAt: path, readOnly: true) },
                { _ = try EventLog(path: path, model: try libraryModel()) },
            ] as [() throws -> Void] {
                #expect(failure(open)?.contains("the catalog is damaged: \(expected)") == true, "\(failure(open) ?? "opened")")
            }
        }
        do {
            let store = try RawStore(path)
            try store.environment.write { txn in try txn.put(original, forKey: Array("eMember".utf8), in: store.tables.catalog) }
        }
        let log = try EventLog(path: path, model: try libraryModel())
        #expect(try log.read { try $0.object(member) } == intact, "restored, the store reads as before: nothing was re-coded")
        #expect(try log.verify().problems.isEmpty)
    }

    @Test("a history row naming a sequence past the head: as-of and version walks name the object and the history table")
    func historyPastHead() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 30)
        let member = StoredObjectID(entity: "Member", primaryKey: 2)
        let key = ObjectKey(entity: try log.catalog.entityCode("Member"), primaryKey: 2).bytes
        try log.environment.write { txn in try txn.put([UInt8](), forKey: key + bigEndianBytes(UInt64(1) << 60), in: log.tables.history) }
        let expected = "the history of Member/p2 lists sequence 1152921504606846976, outside the log (1…30): the history table is damaged"
        #expect(failure { _ = try log.read { try $0.object(member, asOf: 5) } }?.contains(expected) == true)
        #expect(failure { try log.read { reader in try reader.forEachVersion(of: member) { _, _ in .next } } }?.contains(expected) == true)
        #expect(failure { _ = try log.read { try $0.history(of: member) } }?.contains(expected) == true)
    }
}

extension DamagedDataReviewTests {
    @Test("a purge refuses to start from a checkpoint that disagrees with the events after it, or lost a record row; nothing is removed")
    func purgeFromDamagedCheckpoint() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 300)
        let prefix = bigEndianBytes(UInt64(200)) + [CheckpointTag.record]
        let records = try rows(log, log.tables.checkpoints, prefix: prefix)
        let writer = TableWriter(tables: log.tables, catalog: log.catalog, schema: log.schema, modelVersion: log.modelVersion)
        let entity = try log.schema.entity("Member")
        // Every member one year older in checkpoint 200.
        try log.environment.write { txn in
            for (key, value) in records {
                var record = try value.withUnsafeBytes { try writer.decodeRecord($0, entityName: "Member", context: "test") }
                if case .attribute(.int32(let age))? = record.values["age"] { record.values["age"] = .attribute(.int32(age + 1)) }
                try txn.put(try writer.encodeRecord(record, entity: entity), forKey: key, in: log.tables.checkpoints)
            }
        }
        var message = failure { _ = try log.purge(through: 250, author: "test") }
        #expect(message?.contains("the before-image of Member/") == true, "\(message ?? "purged")")
        #expect(try log.read { try $0.purgedThrough } == 0)
        #expect(try allEvents(log).count == 300, "nothing was removed")

        // Restored, but one record row lost.
        try log.environment.write { txn in
            for (key, value) in records { try txn.put(value, forKey: key, in: log.tables.checkpoints) }
            _ = try txn.delete(key: records[0].0, in: log.tables.checkpoints)
        }
        message = failure { _ = try log.purge(through: 250, author: "test") }
        #expect(message?.contains("checkpoint 200 holds \(records.count - 1) records, but its header says \(records.count)") == true, "\(message ?? "purged")")
        #expect(try log.read { try $0.purgedThrough } == 0)
        try log.environment.write { txn in try txn.put(records[0].1, forKey: records[0].0, in: log.tables.checkpoints) }
        #expect(try log.purge(through: 250, author: "test").purgedThrough == 250)
        #expect(try log.verify().problems.isEmpty)
    }
}

extension DamagedDataReviewTests {
    @Test("a consumer's row of the wrong length or past the head is an error naming the consumer, not 0; verify reports it")
    func damagedConsumer() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 30)
        try log.registerConsumer("indexer", processedThrough: 20)
        for (value, expected) in [
            ([0, 0, 0, 20] as [UInt8], "consumer \"indexer\": its processed point is 4 bytes (00000014), not 8: the consumers table is damaged"),
            (bigEndianBytes(UInt64(1) << 40), "consumer \"indexer\": its processed point 1099511627776 is past the head (30)"),
        ] {
            try log.environment.write { txn in try txn.put(value, forKey: Array("indexer".utf8), in: log.tables.consumers) }
            #expect(failure { _ = try log.read { try $0.consumers() } }?.contains(expected) == true)
            #expect(failure { _ = try log.compact(CompactionRequest(before: 25)) }?.contains(expected) == true)
            #expect(try log.read { try $0.compactedThrough } == 0)
            #expect(try log.verify().problems.contains { $0.kind == .integrity && $0.location == "consumer \"indexer\"" })
        }
    }
}

extension DamagedDataReviewTests {
    @Test("a bookkeeping number of the wrong length (the head as 4 bytes) is an error naming it, not an empty log")
    func metaNumberOfWrongLength() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 30)
        try log.environment.write { txn in try txn.put([0, 0, 0, 30] as [UInt8], forKey: MetaKey.head, in: log.tables.meta) }
        let expected = "the store's head is 4 bytes (0000001e), not 8: its bookkeeping is damaged"
        #expect(failure { _ = try log.read { try $0.head } }?.contains(expected) == true)
        #expect(failure { _ = try allEvents(log) }?.contains(expected) == true)
        #expect(failure { _ = try log.read { try $0.state(asOf: 0) } }?.contains(expected) == true)
        #expect(failure { _ = try insertMember(log, "late") }?.contains(expected) == true)
        #expect(failure { _ = try log.verify() }?.contains(expected) == true)
        try log.environment.write { txn in try txn.put([0, 0, 0, 0, 0] as [UInt8], forKey: MetaKey.compactedThrough, in: log.tables.meta) }
        try log.environment.write { txn in try txn.put(bigEndianBytes(UInt64(30)), forKey: MetaKey.head, in: log.tables.meta) }
        #expect(failure { _ = try allEvents(log) }?.contains("the store's compactedThrough is 5 bytes (0000000000), not 8") == true)
    }
}

// MARK: - Every read path and the CLI over each kind of damage

/// One kind of damage, done to a copy of the store through its raw tables and files.
struct Damage {
    let name: String
    /// Whether `verify` must report it (damage to what verify doesn't check — a stored model,
    /// the store's format version — stops the store opening instead, which is exit 1 too).
    var verifyFinds = true
    let apply: (RawStore, String) throws -> Void
}

extension DamagedDataReviewTests {
    /// The rows of `table` in `store`.
    static func rows(_ store: RawStore, _ table: LMDBDatabase, prefix: [UInt8] = []) throws -> [([UInt8], [UInt8])] {
        try store.environment.read { txn in
            var rows: [([UInt8], [UInt8])] = []
            try txn.forEach(in: table, range: prefix.isEmpty ? .all : .prefix(prefix)) { key, value in
                rows.append((key.withUnsafeBytes { Array($0) }, value.withUnsafeBytes { Array($0) }))
                return .next
            }
            return rows
        }
    }

    static func segmentFiles(_ path: String, _ suffix: String) throws -> [String] {
        let directory = (path as NSString).appendingPathComponent("segments")
        return try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(suffix) && !$0.hasPrefix(".") }.sorted()
            .map { (directory as NSString).appendingPathComponent($0) }
    }

    static func swapFiles(_ a: String, _ b: String) throws {
        let fileManager = FileManager.default
        try fileManager.moveItem(atPath: a, toPath: a + ".swap")
        try fileManager.moveItem(atPath: b, toPath: a)
        try fileManager.moveItem(atPath: a + ".swap", toPath: b)
    }

    /// Member's entity code in the library model's catalog (entities are coded in name order).
    static func code(_ store: RawStore, _ entity: String) throws -> UInt16 {
        let row = try store.environment.read { txn in try txn.value(forKey: Array("e\(entity)".utf8), in: store.tables.catalog) }
        return try #require(row.flatMap { $0.withUnsafeBytes { readBigEndian($0, count: 2) } }.map { UInt16($0) })
    }

    static var damages: [Damage] {
        func put(_ store: RawStore, _ table: LMDBDatabase, _ key: [UInt8], _ value: [UInt8]) throws {
            try store.environment.write { txn in try txn.put(value, forKey: key, in: table) }
        }
        func delete(_ store: RawStore, _ table: LMDBDatabase, _ key: [UInt8]) throws {
            try store.environment.write { txn in _ = try txn.delete(key: key, in: table) }
        }
        func event(_ store: RawStore, _ sequence: UInt64) throws -> ([UInt8], [UInt8]) {
            try #require(try rows(store, store.tables.events, prefix: bigEndianBytes(sequence)).first)
        }
        func member(_ store: RawStore, _ pk: UInt64) throws -> [UInt8] {
            ObjectKey(entity: try code(store, "Member"), primaryKey: pk).bytes
        }
        return [
            Damage(name: "raw event: a bit flipped") { store, _ in
                var (key, value) = try event(store, 250)
                value[40] ^= 0x04
                try put(store, store.tables.events, key, value)
            },
            Damage(name: "raw event: an inserted name changed, checksum recomputed") { store, _ in
                var (key, value) = try event(store, 250)  // the insert of "member 249", m249@x.org
                let needle = Array("member 249".utf8)
                let at = try #require((0...(value.count - needle.count)).first { Array(value[$0..<($0 + needle.count)]) == needle })
                value[at] = UInt8(ascii: "M")
                value = DecoderMutationFuzzTests.resealed(value)
                try put(store, store.tables.events, key, value)
            },
            Damage(name: "raw event: a change's value retyped, checksum recomputed") { store, _ in
                var (key, value) = try event(store, 252)  // an update of age and rating
                let at = value.count - 4 - 9  // the tag of rating's after-value, the event's last
                try #require(value[at] == EventCodec.ValueTag.double.rawValue)
                value[at] = EventCodec.ValueTag.int64.rawValue
                try put(store, store.tables.events, key, DecoderMutationFuzzTests.resealed(value))
            },
            Damage(name: "raw event: cut short") { store, _ in
                let (key, value) = try event(store, 250)
                try put(store, store.tables.events, key, Array(value.prefix(value.count / 2)))
            },
            Damage(name: "raw event: missing") { store, _ in
                let (key, _) = try event(store, 260)
                try delete(store, store.tables.events, key)
            },
            Damage(name: "state record: cut short") { store, _ in
                let key = try member(store, 2)
                let value = try #require(try rows(store, store.tables.state, prefix: key).first?.1)
                try put(store, store.tables.state, key, Array(value.prefix(value.count - 3)))
            },
            Damage(name: "state record: under another entity's code") { store, _ in
                let key = try member(store, 2)
                let value = try #require(try rows(store, store.tables.state, prefix: key).first?.1)
                try delete(store, store.tables.state, key)
                try put(store, store.tables.state, ObjectKey(entity: try code(store, "Sponsor"), primaryKey: 2).bytes, value)
            },
            Damage(name: "state record: a value's type tag changed") { store, _ in
                let key = try member(store, 2)
                var value = try #require(try rows(store, store.tables.state, prefix: key).first?.1)
                // The tag of the email, "m…@x.org".
                let at = try #require(value.indices.first { $0 + 2 < value.count && value[$0] == EventCodec.ValueTag.string.rawValue && value[$0 + 2] == UInt8(ascii: "m") })
                value[at] = EventCodec.ValueTag.binaryData.rawValue
                try put(store, store.tables.state, key, value)
            },
            Damage(name: "index row: points at an object that doesn't exist") { store, _ in
                var (key, _) = try #require(try rows(store, store.tables.index).last)
                key.replaceSubrange((key.count - 8)..., with: bigEndianBytes(UInt64(9_999)))
                try put(store, store.tables.index, key, [])
            },
            Damage(name: "history row: a sequence past the head") { store, _ in
                try put(store, store.tables.history, try member(store, 2) + bigEndianBytes(UInt64(1) << 60), [])
            },
            Damage(name: "history row: a key of 13 bytes") { store, _ in
                try put(store, store.tables.history, try member(store, 2) + [0, 0, 1], [])
            },
            Damage(name: "segment: file missing") { _, path in
                try FileManager.default.removeItem(atPath: try segmentFiles(path, ".zst")[0])
            },
            Damage(name: "segment: the two files swapped") { _, path in
                let files = try segmentFiles(path, ".zst")
                try swapFiles(files[0], files[1])
            },
            Damage(name: "segment: dictionary missing") { _, path in
                try FileManager.default.removeItem(atPath: try segmentFiles(path, ".dict")[0])
            },
            Damage(name: "segment: the two dictionaries swapped") { _, path in
                let files = try segmentFiles(path, ".dict")
                try swapFiles(files[0], files[1])
            },
            Damage(name: "manifest: an entry naming the other segment's file, checksum recomputed") { store, _ in
                let entries = try rows(store, store.tables.segments)
                let first = try entries[0].1.withUnsafeBytes { try SegmentDescriptor.decode($0, context: "test") }
                let second = try entries[1].1.withUnsafeBytes { try SegmentDescriptor.decode($0, context: "test") }
                let forged = SegmentDescriptor(
                    fileName: second.fileName, first: first.first, last: first.last, rawBytes: first.rawBytes,
                    compressedBytes: first.compressedBytes, dictionaryFileName: first.dictionaryFileName, frames: first.frames)
                try put(store, store.tables.segments, entries[0].0, forged.encoded())
            },
            Damage(name: "manifest: an entry deleted") { store, _ in
                try delete(store, store.tables.segments, try rows(store, store.tables.segments)[1].0)
            },
            Damage(name: "model JSON: cut short", verifyFinds: false) { store, _ in
                let (key, value) = try #require(try rows(store, store.tables.models).first)
                try put(store, store.tables.models, key, Array(value.prefix(value.count / 2)))
            },
            Damage(name: "model JSON: a newer format version", verifyFinds: false) { store, _ in
                let (key, value) = try #require(try rows(store, store.tables.models).first)
                let text = String(decoding: value, as: UTF8.self).replacingOccurrences(of: "\"formatVersion\" : 1", with: "\"formatVersion\" : 99")
                    .replacingOccurrences(of: "\"formatVersion\":1", with: "\"formatVersion\":99")
                #expect(text != String(decoding: value, as: UTF8.self))
                try put(store, store.tables.models, key, Array(text.utf8))
            },
            Damage(name: "catalog: an entity's name row renamed", verifyFinds: false) { store, _ in
                let code = try code(store, "Member")
                try put(store, store.tables.catalog, [UInt8(ascii: "E"), UInt8(code >> 8), UInt8(code & 0xFF)], Array("Membre".utf8))
            },
            Damage(name: "catalog: an entity's code changed to another's") { store, _ in
                try put(store, store.tables.catalog, Array("eMember".utf8), [0, UInt8(try code(store, "Sponsor"))])
            },
            Damage(name: "catalog: an entity's code row cut to 1 byte") { store, _ in
                try put(store, store.tables.catalog, Array("eMember".utf8), [0])
            },
            Damage(name: "meta: a newer store format version", verifyFinds: false) { store, _ in
                try put(store, store.tables.meta, MetaKey.formatVersion, bigEndianBytes(EventLog.formatVersion + 1))
            },
            Damage(name: "checkpoint: a record's value forged") { store, _ in
                let prefix = bigEndianBytes(UInt64(200)) + [CheckpointTag.record]
                var (key, value) = try #require(try rows(store, store.tables.checkpoints, prefix: prefix).first)
                let needle = Array("member ".utf8)
                let at = try #require((0...(value.count - needle.count)).first { Array(value[$0..<($0 + needle.count)]) == needle })
                value[at] = UInt8(ascii: "M")
                try put(store, store.tables.checkpoints, key, value)
            },
            Damage(name: "checkpoint: its header's count wrong") { store, _ in
                try put(store, store.tables.checkpoints, bigEndianBytes(UInt64(200)), bigEndianBytes(UInt64(3)) + [1])
            },
            Damage(name: "counter: a row of 3 bytes") { store, _ in
                try put(store, store.tables.counters, TableWriter.counterKey(try code(store, "Member")), [0, 0, 9])
            },
        ]
    }

    @Test("each kind of damage: every read path and CLI command gives an answer or an error that names something, never a crash; verify finds it")
    func damageSweep() throws {
        let dir = try TemporaryDirectory()
        let base = dir.file("store")
        do {
            let log = try populatedLog(dir, transactions: 300)
            var request = CompactionRequest(before: 151)
            request.eventsPerFrame = 16
            request.usesDictionary = true
            _ = try log.compact(request)
            request = CompactionRequest(before: 231)
            request.usesDictionary = true
            _ = try log.compact(request)
            #expect(try log.verify().problems.isEmpty)
        }
        #expect(try Self.segmentFiles(base, ".zst").count == 2 && Self.segmentFiles(base, ".dict").count == 2)
        let uuid = try EventLog(openingExistingAt: base).storeUUID.uuidString
        let member = StoredObjectID(entity: "Member", primaryKey: 2)
        var table: [String] = []
        for damage in Self.damages {
            let path = dir.file("case-\(table.count)")
            try FileManager.default.copyItem(atPath: base, toPath: path)
            try? FileManager.default.removeItem(atPath: (path as NSString).appendingPathComponent("lock.mdb"))
            do {
                let store = try RawStore(path)
                try damage.apply(store, path)
            }
            var outcomes: [String] = []
            func attempt(_ what: String, _ body: () throws -> Void) {
                do { try body() } catch { outcomes.append("\(what): \(error)") }
            }
            // The library, read-only.
            attempt("open") {
                let log = try EventLog(openingExistingAt: path, readOnly: true)
                attempt("event 250") { _ = try log.read { try $0.event(250) } }
                attempt("events") { _ = try allEvents(log) }
                attempt("current state") { _ = try log.read { try $0.currentState() } }
                attempt("as of 120") { _ = try log.read { try $0.state(asOf: 120) } }
                attempt("as of 210") { _ = try log.read { try $0.state(asOf: 210) } }
                attempt("as of 280") { _ = try log.read { try $0.state(asOf: 280) } }
                attempt("object as of 50") { _ = try log.read { try $0.object(member, asOf: 50) } }
                attempt("versions") { try log.read { reader in try reader.forEachVersion(of: member) { _, _ in .next } } }
                attempt("history") { _ = try log.read { try $0.history(of: member) } }
                attempt("index scan") {
                    try log.read { reader in
                        try reader.scanIndex(entity: "Member", attribute: "age", range: .all) { id in
                            _ = try reader.object(id)
                            return .next
                        }
                    }
                }
                attempt("objects") { try log.read { reader in try reader.forEachObject(of: "Member") { _ in .next } } }
                attempt("verify") {
                    let report = try log.verify()
                    if damage.verifyFinds && report.problems.isEmpty { Issue.record("\(damage.name): verify found no problem") }
                    if let first = report.problems.first { outcomes.append("verify: \(first.kind): \(first.location): \(first.message)") }
                }
            }
            // The CLI, read-only: exit 0 or 1, never a signal; a failure says why.
            for arguments in [
                ["verify", path], ["log", path, "--from", "240"], ["log", path, "--object", "x-strata://\(uuid)/Member/p2"],
                ["replay", path, "--to", "120"], ["export", path, "--at", "210", "--format", "ndjson"], ["export", path, "--format", "ndjson"],
                ["query", path, "Member", "--where", "age > 10", "--count"], ["query", path, "Member", "--sort", "age", "--format", "ndjson"],
                ["info", path],
            ] {
                let result = try runProcess(BuildProducts.executable("strata"), arguments)
                let command = arguments[0] + (arguments.count > 2 ? " " + arguments[2...].joined(separator: " ") : "")
                #expect(result.status == 0 || result.status == 1, "\(damage.name): strata \(command) exited \(result.status): \(result.standardError)")
                if result.status == 1 {
                    if arguments[0] == "verify" {
                        #expect(result.standardOutput.contains("problem") || result.standardError.hasPrefix("strata: "))
                    } else {
                        #expect(result.standardError.contains("strata: "), "\(damage.name): strata \(command): \(result.standardError)")
                        outcomes.append("strata \(command): \(result.standardError.split(separator: "\n").first ?? "")")
                    }
                } else if arguments[0] == "verify" && damage.verifyFinds {
                    Issue.record("\(damage.name): strata verify exited 0")
                }
            }
            // Writes, on the damaged copy: a commit and a compaction refuse or succeed.
            if let log = try? EventLog(openingExistingAt: path, readOnly: false) {
                attempt("commit") {
                    var draft = TransactionDraft(author: "after")
                    draft.insert("Member", values: ["name": s("late"), "age": i(30), "email": s("late@x.org")])
                    try log.commit(draft)
                }
                attempt("compact") { _ = try log.compact(CompactionRequest(before: 271)) }
            }
            table.append("\(damage.name)\n    " + outcomes.map { String($0.prefix(260)) }.joined(separator: "\n    "))
            try? FileManager.default.removeItem(atPath: path)
        }
        if ProcessInfo.processInfo.environment["STRATA_DAMAGE_REPORT"] != nil { print(table.joined(separator: "\n")) }
    }
}
