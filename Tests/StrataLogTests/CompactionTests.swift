import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// A store with `count` transactions: inserts, then updates and a few deletes.
func populatedLog(_ dir: TemporaryDirectory, transactions count: Int = 300) throws -> EventLog {
    let log = try openLog(dir, model: try libraryModel()) { $0.checkpointInterval = 100 }
    var members: [StoredObjectID] = []
    for n in 0..<count {
        var draft = TransactionDraft(author: n % 2 == 0 ? "alice" : "bob")
        if n % 3 == 0 || members.isEmpty {
            let m = draft.insert("Member", values: ["name": s("member \(n)"), "age": i(Int32(n % 90)), "email": s("m\(n)@x.org")])
            let result = try log.commit(draft)
            members.append(try #require(result.permanentID(for: m)))
        } else if n % 17 == 0, let victim = members.popLast() {
            draft.delete(.stored(victim))
            try log.commit(draft)
        } else {
            let target = members[n % members.count]
            draft.update(.stored(target), values: ["age": i(Int32(n % 77)), "rating": .attribute(.double(Double(n) / 7))])
            try log.commit(draft)
        }
    }
    return log
}

/// ``populatedLog(_:transactions:)`` with the events before `before` (all, when nil)
/// compacted into one segment of `eventsPerFrame`-event frames.
func compactedLog(
    _ dir: TemporaryDirectory, transactions: Int, before: UInt64?, eventsPerFrame: Int, usesDictionary: Bool = false
) throws -> (log: EventLog, report: CompactionReport) {
    let log = try populatedLog(dir, transactions: transactions)
    var request = CompactionRequest(before: before)
    request.eventsPerFrame = eventsPerFrame
    request.usesDictionary = usesDictionary
    return (log, try log.compact(request))
}

func allEvents(_ log: EventLog) throws -> [TransactionEvent] {
    try log.read { reader in
        var events: [TransactionEvent] = []
        try reader.forEachEvent { event in
            events.append(event)
            return .next
        }
        return events
    }
}

@Suite("Event log: compaction, segments, verify")
struct CompactionTests {
    @Test("compaction moves old events into a segment; reads, as-of and history are unchanged")
    func compactionIsTransparent() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir)
        let eventsBefore = try allEvents(log)
        let stateBefore = try log.read { try $0.currentState() }
        let asOf150 = try log.read { try $0.state(asOf: 150) }
        let someone = StoredObjectID(entity: "Member", primaryKey: 2)
        let historyBefore = try log.read { try $0.history(of: someone) }

        let report = try log.compact(CompactionRequest(before: 201))
        #expect(report.moved == 1...200)
        #expect(report.limitedBy == .requested)
        #expect(report.ratio > 1.5)
        let segmentFile = try #require(report.segmentFile)
        #expect(FileManager.default.fileExists(atPath: segmentFile))

        #expect(try allEvents(log) == eventsBefore)
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.compactedThrough == 200)
            #expect(try reader.currentState() == stateBefore)
            #expect(try reader.state(asOf: 150) == asOf150)
            #expect(try reader.history(of: someone) == historyBefore)
            #expect(try reader.event(7) == eventsBefore[6])
            #expect(try reader.segments().map(\.sequences) == [1...200])
        }
        let verification = try log.verify()
        #expect(verification.isClean, "\(verification.problems)")
        #expect(verification.eventsChecked == 300)
        #expect(verification.segmentsChecked == 1)

        // A second compaction continues where the first stopped.
        let second = try log.compact(CompactionRequest())
        #expect(second.moved == 201...300)
        #expect(try allEvents(log) == eventsBefore)
        #expect(try log.verify().isClean)
        // Nothing left to move.
        #expect(try log.compact(CompactionRequest()).moved == nil)
    }

    @Test("segments are standard zstd: `zstd -t` passes and `zstd -dc` yields the framed events")
    func segmentsAreStockZstd() throws {
        try #require(toolIsInstalled("zstd"), "the zstd CLI is required (.ci/run installs it)")
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 120)
        let report = try log.compact(CompactionRequest())
        let file = try #require(report.segmentFile)
        let env = URL(fileURLWithPath: "/usr/bin/env")
        let test = try runProcess(env, ["zstd", "-t", file])
        #expect(test.status == 0, "\(test.standardError)")
        let decoded = try runProcess(env, ["sh", "-c", "zstd -dc '\(file)' | wc -c"])
        #expect(Int(decoded.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)) == report.rawBytes + 4 * 120)
    }

    @Test("a trained dictionary is stored beside the segment and used to read it back")
    func dictionaryCompaction() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 600)
        let before = try allEvents(log)
        var request = CompactionRequest()
        request.usesDictionary = true
        request.eventsPerFrame = 16
        let report = try log.compact(request)
        let dictionary = try #require(report.dictionaryFile)
        #expect(FileManager.default.fileExists(atPath: dictionary))
        #expect(try allEvents(log) == before)
        #expect(try log.verify().isClean)
    }

    @Test("consumers, undo retention and a dry run hold compaction back")
    func horizonLimits() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 100)
        try log.registerConsumer("search-indexer", processedThrough: 40)
        let held = try log.compact(CompactionRequest(before: 90))
        #expect(held.moved == 1...40)
        #expect(held.limitedBy == .consumer(name: "search-indexer", processedThrough: 40))

        try log.removeConsumer("search-indexer")
        try log.setUndoRetention(30)
        var dry = CompactionRequest()
        dry.dryRun = true
        let estimate = try log.compact(dry)
        #expect(estimate.isDryRun)
        #expect(estimate.moved == 41...70)
        #expect(estimate.limitedBy == .undoRetention(transactions: 30))
        #expect(estimate.compressedBytes > 0)
        #expect(try log.read { try $0.compactedThrough } == 40, "a dry run moves nothing")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.file("store/segments")).count == 1)
    }

    @Test("compaction by date moves only events committed before it")
    func compactByDate() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        for n in 0..<10 {
            var draft = TransactionDraft()
            draft.timestamp = Date(timeIntervalSince1970: 1_000_000 + Double(n) * 3600)
            draft.insert("Club", values: ["name": s("club \(n)")])
            try log.commit(draft)
        }
        var request = CompactionRequest()
        request.beforeDate = Date(timeIntervalSince1970: 1_000_000 + 4 * 3600)
        #expect(try log.compact(request).moved == 1...4)
    }

    @Test("a damaged segment is detected and named, never silently read")
    func damagedSegmentDetected() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 120)
        let report = try log.compact(CompactionRequest(before: 101))
        let file = try #require(report.segmentFile)
        let name = (file as NSString).lastPathComponent

        // Flip one byte in the middle.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        bytes[bytes.count / 2] ^= 0x40
        try bytes.write(to: URL(fileURLWithPath: file))
        let flipped = try log.verify()
        #expect(!flipped.isClean)
        #expect(flipped.problems.contains { $0.kind == .segment && $0.location.contains(name) })
        let readError = #expect(throws: LogError.self) { _ = try allEvents(log) }
        #expect(readError?.description.contains(name) == true)

        // Truncate it.
        try bytes.prefix(bytes.count / 3).write(to: URL(fileURLWithPath: file))
        let truncated = try log.verify()
        #expect(truncated.problems.contains { $0.kind == .segment && $0.message.contains("bytes") })

        // Remove it.
        try FileManager.default.removeItem(atPath: file)
        let missing = try log.verify()
        #expect(missing.problems.contains { $0.kind == .segment && $0.message.contains("missing") })
        // Raw events after the segment still read.
        #expect(try log.read { try $0.event(110).sequence } == 110)
    }

    @Test("verify names a tampered record's object and property, and a tampered counter")
    func verifyFindsTampering() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 30)
        #expect(try log.verify().isClean)

        // Change a live record behind the log's back, keeping it well-formed: copy
        // another object's record over Member/p2's.
        let env = try LMDBEnvironment(path: dir.file("store"), databases: [DatabaseDescriptor("state"), DatabaseDescriptor("counters")])
        let state = try env.database(named: "state")
        try env.write { txn in
            var rows: [([UInt8], [UInt8])] = []
            try txn.forEach(in: state) { key, value in
                rows.append((key.withUnsafeBytes { Array($0) }, value.withUnsafeBytes { Array($0) }))
                return .next
            }
            // Two records of the same entity (same code in the key's first two bytes).
            let byEntity = Dictionary(grouping: rows.filter { $0.0.count == 10 }) { [$0.0[0], $0.0[1]] }
            guard let records = byEntity.values.first(where: { $0.count >= 2 }) else { return }
            try txn.put(records[1].1, forKey: records[0].0, in: state)
        }
        let report = try log.verify()
        #expect(!report.isClean)
        let stateProblem = try #require(report.problems.first { $0.kind == .projection && $0.location.hasPrefix("state Member/p") })
        #expect(stateProblem.message.contains("live"))
        #expect(stateProblem.message.contains("the log's replay says"))
    }

    @Test("a writable open removes orphan segment files and dead processes' temporary files")
    func repairAtOpen() throws {
        let dir = try TemporaryDirectory()
        let model = try libraryModel()
        do {
            let log = try populatedLog(dir, transactions: 50)
            try log.compact(CompactionRequest(before: 21))
        }
        let segments = dir.file("store/segments")
        let orphan = (segments as NSString).appendingPathComponent(SegmentFileNames.orphan)
        let temporary = (segments as NSString).appendingPathComponent(".tmp-999999-abc.zst")
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: orphan))
        try Data([4, 5, 6]).write(to: URL(fileURLWithPath: temporary))
        let log = try openLog(dir, model: model)
        #expect(!FileManager.default.fileExists(atPath: orphan))
        #expect(!FileManager.default.fileExists(atPath: temporary))
        #expect(try FileManager.default.contentsOfDirectory(atPath: segments).count == 1)
        #expect(try log.verify().isClean)
    }

    @Test("vacuum shrinks the file after compaction and keeps everything")
    func vacuum() throws {
        let dir = try TemporaryDirectory()
        let events: [TransactionEvent]
        do {
            let log = try populatedLog(dir, transactions: 600)
            try log.compact(CompactionRequest())
            events = try allEvents(log)
        }
        let (before, after) = try EventLog.vacuum(path: dir.file("store"))
        #expect(after < before)
        let log = try openLog(dir, model: try libraryModel())
        #expect(try allEvents(log) == events)
        #expect(try log.verify().isClean)
    }

    @Test("checkpoints are written periodically and as-of picks the cheapest plan")
    func checkpointsAndPlans() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 300)
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.checkpoints() == [100, 200, 300])
            #expect(try reader.plan(asOf: 290) == .backwardFromHead(events: 10))
            #expect(try reader.plan(asOf: 210) == .forwardFromCheckpoint(checkpoint: 200, events: 10))
            #expect(try reader.plan(asOf: 20) == .forwardFromStart(events: 20))
            // Every plan gives the state a plain replay gives.
            for n: UInt64 in [20, 150, 210, 290] {
                var replayed = StateImage()
                try reader.forEachEvent(from: 1, through: n) { event in
                    replayed.apply(event)
                    return .next
                }
                #expect(try reader.state(asOf: n) == replayed, "as of \(n)")
            }
        }
    }
}

enum SegmentFileNames {
    static let orphan = "00000000000000000900-00000000000000000950.zst"
}

@Suite("Event log: checkpoint retention")
struct CheckpointRetentionTests {
    @Test("checkpoints stay within the limit; the newest is kept and old history stays covered")
    func retention() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel()) {
            $0.checkpointInterval = 10
            $0.maximumCheckpoints = 4
        }
        for n in 0..<200 {
            var draft = TransactionDraft()
            draft.insert("Club", values: ["name": s("club \(n)")])
            try log.commit(draft)
        }
        try log.read { (reader: borrowing LogReader) throws in
            let kept = try reader.checkpoints()
            #expect(kept.count == 4)
            #expect(kept.last == 200, "the newest is always kept")
            #expect((kept.first ?? .max) <= 100, "old history keeps a checkpoint: \(kept)")
            // Every plan still gives the replayed state.
            for n: UInt64 in [5, 57, 133, 190] {
                var replayed = StateImage()
                try reader.forEachEvent(from: 1, through: n) { event in
                    replayed.apply(event)
                    return .next
                }
                #expect(try reader.state(asOf: n) == replayed, "as of \(n)")
            }
        }
        #expect(try log.verify().isClean)
    }
}
