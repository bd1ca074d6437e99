import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// `LogReader.modelVersion(asOf:)`: the version a transaction was written with, read from a
/// raw event's header (its checksum checked) or by decoding a compacted one.
@Suite("Event log: the model version as of a point")
struct ModelVersionAsOfTests {
    @Test("every point of a store with a migration (1: version 1; 2–3: the migration's two transactions; 4: version 2), raw and after compaction, gives the version its event was written with")
    func versionsOfEveryPoint() throws {
        let dir = try TemporaryDirectory("strata-version-asof")
        _ = try RenameMigrationTests.store(dir)
        let log = try openLog(dir, model: try RenameMigrationTests.v2())
        var draft = TransactionDraft()
        _ = draft.insert("Team", values: ["name": s("Kites")])
        _ = try log.commit(draft)
        func versions() throws -> (asOf: [Int], decoded: [Int]) {
            try log.read { reader in
                let head = try reader.head
                return (try (1...head).map { try reader.modelVersion(asOf: $0) }, try (1...head).map { try reader.event($0).modelVersion })
            }
        }
        let raw = try versions()
        #expect(raw.asOf == [1, 1, 2, 2])
        #expect(raw.asOf == raw.decoded)
        #expect(try log.read { try $0.modelVersion(asOf: 0) } == 1, "the empty store: the oldest version")
        _ = try log.compact(CompactionRequest(before: 3))
        #expect(try log.read { try $0.compactedThrough } == 2)
        let compacted = try versions()
        #expect(compacted.asOf == [1, 1, 2, 2])
        #expect(compacted.asOf == compacted.decoded)
    }

    @Test("a raw event whose bytes are damaged (one byte of its changes flipped) is refused with the checksum error naming it, not read for a version")
    func damagedEvent() throws {
        let dir = try TemporaryDirectory("strata-version-asof-damaged")
        _ = try RenameMigrationTests.store(dir)
        let log = try openLog(dir, model: try RenameMigrationTests.v1())
        let key = bigEndianBytes(UInt64(1))
        try log.environment.write { txn in
            var chunks: [([UInt8], [UInt8])] = []
            try txn.forEach(in: log.tables.events, range: .prefix(key)) { key, value in
                chunks.append((key.withUnsafeBytes { Array($0) }, value.withUnsafeBytes { Array($0) }))
                return .next
            }
            let (chunkKey, original) = try #require(chunks.last)
            var bytes = original
            bytes[bytes.count - 10] ^= 0x40
            try txn.put(bytes, forKey: chunkKey, in: log.tables.events)
        }
        #expect {
            try log.read { try $0.modelVersion(asOf: 1) }
        } throws: { error in
            guard case .checksumMismatch(let text) = error as? LogError else { return false }
            return text.contains("1")
        }
    }
}

/// A reader pinned to a generation before a migration reads it in the opening version's terms.
@Suite("Event log: a generation before a migration")
struct GenerationBeforeMigrationTests {
    @Test("RenameMigrationTests' store (renamed attributes and relationships, one recorded on its other side, a removed property), pinned at 1 — before the migration, nothing changed since but by it: every object, each entity's objects and counts read as now")
    func pinnedBeforeRenames() throws {
        let dir = try TemporaryDirectory("strata-generation-renames")
        let stored = try RenameMigrationTests.store(dir)
        let log = try openLog(dir, model: try RenameMigrationTests.v2())
        #expect(try log.read { try $0.head } > 1)
        let ids = stored.teams + stored.players + stored.sponsors
        let now = try log.read { reader in try ids.map { try reader.object($0)?.values } }
        let view = GenerationView(sequence: 1)
        let then = try log.read(pinnedTo: view) { reader in try ids.map { try reader.object($0)?.values } }
        #expect(then == now)
        for entity in ["Team", "Player", "Sponsor"] {
            let counts = try log.read { try $0.count(of: entity) }
            #expect(try log.read(pinnedTo: view) { try $0.count(of: entity) } == counts, "\(entity)")
        }
    }
}

/// Finding checkpoints by seeking from one to the next (`checkpoints()`,
/// `checkpoint(atOrBefore:)`), not by walking their rows.
@Suite("Event log: finding checkpoints")
struct CheckpointSeekTests {
    @Test("checkpoints at 100, 200, 300: listed, and the newest at or before each point found (none before 100); a checkpoint whose header row is gone (its rows left) is skipped both ways, and plans go to the one before it")
    func seekAcrossCheckpoints() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 350)
        let intact = try log.read { (reader: borrowing LogReader) throws -> StateImage in
            #expect(try reader.checkpoints() == [100, 200, 300])
            #expect(try reader.checkpoint(atOrBefore: 99) == nil)
            #expect(try reader.checkpoint(atOrBefore: 100) == 100)
            #expect(try reader.checkpoint(atOrBefore: 299) == 200)
            #expect(try reader.checkpoint(atOrBefore: 350) == 300)
            #expect(try reader.checkpoint(atOrBefore: .max) == 300)
            #expect(try reader.plan(asOf: 210) == .forwardFromCheckpoint(checkpoint: 200, events: 10))
            return try reader.state(asOf: 210)
        }
        try log.environment.write { txn in _ = try txn.delete(key: bigEndianBytes(UInt64(200)), in: log.tables.checkpoints) }
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.checkpoints() == [100, 300])
            #expect(try reader.checkpoint(atOrBefore: 299) == 100)
            #expect(try reader.checkpoint(atOrBefore: 200) == 100)
            #expect(try reader.plan(asOf: 210) == .forwardFromCheckpoint(checkpoint: 100, events: 110))
            #expect(try reader.state(asOf: 210) == intact, "from checkpoint 100, as from 200")
        }
    }
}

/// `maximumCheckpoints = 0`: every checkpoint kept, so as-of reads cost fewer than
/// `checkpointInterval` events at any point, whatever the log's length.
@Suite("Event log: keeping every checkpoint")
struct KeepEveryCheckpointTests {
    @Test("interval 10, 120 transactions: with maximumCheckpoints 0 all twelve checkpoints stay and every point's plan decodes fewer than 10 events, its state the replay's; with 3, three stay")
    func everyCheckpointKept() throws {
        func log(_ dir: TemporaryDirectory, keeping limit: Int) throws -> EventLog {
            let log = try openLog(dir, model: try libraryModel()) {
                $0.checkpointInterval = 10
                $0.maximumCheckpoints = limit
            }
            for n in 0..<120 {
                var draft = TransactionDraft()
                _ = draft.insert("Club", values: ["name": s("club \(n)")])
                try log.commit(draft)
            }
            return log
        }
        let all = try log(try TemporaryDirectory(), keeping: 0)
        try all.read { (reader: borrowing LogReader) throws in
            #expect(try reader.checkpoints() == Array(stride(from: UInt64(10), through: 120, by: 10)))
            var replayed = StateImage()
            var states: [UInt64: StateImage] = [0: replayed]
            try reader.forEachEvent { event in
                replayed.apply(event)
                states[event.sequence] = replayed
                return .next
            }
            for point in UInt64(0)...120 {
                let plan = try reader.plan(asOf: point)
                let events: UInt64 = switch plan {
                case .backwardFromHead(let events), .forwardFromStart(let events), .forwardFromCheckpoint(_, let events): events
                }
                #expect(events < 10, "as of \(point): \(plan)")
                #expect(try reader.state(asOf: point) == states[point], "as of \(point)")
            }
        }
        let few = try log(try TemporaryDirectory(), keeping: 3)
        #expect(try few.read { try $0.checkpoints() }.count == 3)
    }
}
