import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// `forEachEvent(among:)`: the events of a list of sequences (an object's history), read
/// together so that a segment frame holding several of them is decompressed once.
@Suite("Event log: reading the events of a list of sequences")
struct EventsAmongTests {
    /// The events of `sequences` through `forEachEvent(among:reversed:)`.
    func among(_ log: EventLog, _ sequences: [UInt64], reversed: Bool = false) throws -> [TransactionEvent] {
        try log.read { reader in
            var events: [TransactionEvent] = []
            try reader.forEachEvent(among: sequences, reversed: reversed) { event in
                events.append(event)
                return .next
            }
            return events
        }
    }

    /// The events of `sequences`, one `event(_:)` call each.
    func oneByOne(_ log: EventLog, _ sequences: [UInt64]) throws -> [TransactionEvent] {
        try log.read { reader in try sequences.map { try reader.event($0) } }
    }

    @Test("the same events as event(_:) one by one, in order and reversed: raw, across frames and segments, and across the compaction horizon")
    func sameAsOneByOne() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 300)
        let members = (1...12).map { StoredObjectID(entity: "Member", primaryKey: UInt64($0)) }
        let histories = try log.read { reader in try members.map { try reader.history(of: $0) } }
        #expect(histories.contains { $0.count > 5 }, "some member was touched by several transactions")
        let samples = [UInt64](stride(from: 1, through: 300, by: 7)) + [300]
        let asOf = try log.read { reader in try members.map { try reader.object($0, asOf: 60) } }
        // Raw, then two segments of 16-event frames (1…100, 101…200) with 201…300 raw.
        for step in [nil, 101, 201] as [UInt64?] {
            if let step {
                var request = CompactionRequest(before: step)
                request.eventsPerFrame = 16
                #expect(try log.compact(request).moved != nil)
            }
            for sequences in histories + [samples] {
                let expected = try oneByOne(log, sequences)
                #expect(try among(log, sequences) == expected, "\(sequences) after compaction before \(step ?? 0)")
                #expect(try among(log, sequences, reversed: true) == expected.reversed())
            }
            // As-of walks an object's history back through the same reads.
            #expect(try log.read { reader in try members.map { try reader.object($0, asOf: 60) } } == asOf)
        }
        #expect(try log.read { try $0.segments().count } == 2)
        // `.stop` ends the walk at once, either way.
        for reversed in [false, true] {
            let delivered = try log.read { reader in
                var count = 0
                try reader.forEachEvent(among: samples, reversed: reversed) { _ in
                    count += 1
                    return count == 3 ? .stop : .next
                }
                return count
            }
            #expect(delivered == 3)
        }
        #expect(try among(log, []).isEmpty)
    }

    @Test("a frame holding several of the events is read once: the rest of it arrives after its file is cut short, the next frame's read names the segment")
    func frameReadOnce() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 200)
        var request = CompactionRequest()
        request.eventsPerFrame = 64
        let segment = try #require(try log.compact(request).segmentFile)
        let kept = dir.file("segment-copy")
        try FileManager.default.copyItem(atPath: segment, toPath: kept)
        // 3, 10 and 20 share the first frame (1…64); 70 is in the second. The file is cut
        // short in place (a reader reads the file it opened, whatever becomes of its name).
        var delivered: [UInt64] = []
        let error = #expect(throws: LogError.self) {
            try log.read { (reader: borrowing LogReader) throws in
                try reader.forEachEvent(among: [3, 10, 20, 70]) { event in
                    delivered.append(event.sequence)
                    if delivered.count == 1 {
                        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: segment))
                        try handle.truncate(atOffset: 0)
                        try handle.close()
                    }
                    return .next
                }
            }
        }
        #expect(delivered == [3, 10, 20])
        #expect("\(error.map { "\($0)" } ?? "")".contains((segment as NSString).lastPathComponent))
        #expect("\(error.map { "\($0)" } ?? "")".contains("truncated"))
        // Nothing was lost: with the file back, every event reads.
        try FileManager.default.removeItem(atPath: segment)
        try FileManager.default.moveItem(atPath: kept, toPath: segment)
        #expect(try among(log, [3, 10, 20, 70]).map(\.sequence) == [3, 10, 20, 70])
        #expect(try log.verify().isClean)
    }

    @Test("sequences out of order, past the head or purged are refused before anything is delivered")
    func refusals() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 60)
        func refusal(_ sequences: [UInt64]) -> (error: (any Error)?, delivered: Int) {
            var delivered = 0
            do {
                try log.read { (reader: borrowing LogReader) throws in
                    try reader.forEachEvent(among: sequences) { _ in
                        delivered += 1
                        return .next
                    }
                }
                return (nil, delivered)
            } catch {
                return (error, delivered)
            }
        }
        let unordered = refusal([5, 3])
        #expect("\(unordered.error.map { "\($0)" } ?? "none")".contains("ascending"))
        #expect(unordered.delivered == 0)
        #expect(refusal([4, 4]).error != nil, "repeats are refused")
        let pastHead = refusal([10, 61])
        guard case .sequenceOutOfRange(let requested, let head)? = pastHead.error as? LogError else {
            Issue.record("expected sequenceOutOfRange, got \(String(describing: pastHead.error))")
            return
        }
        #expect(requested == 61 && head == 60)
        #expect(pastHead.delivered == 0)
        try log.purge(through: 20, author: "ops")
        let purged = refusal([15, 30])
        guard case .historyPurged(let asked, let through)? = purged.error as? LogError else {
            Issue.record("expected historyPurged, got \(String(describing: purged.error))")
            return
        }
        #expect(asked == 15 && through == 20)
        #expect(purged.delivered == 0)
        // After the purge, the kept ones still read.
        #expect(try among(log, [30, 45]).map(\.sequence) == [30, 45])
    }

    @Test("forEachVersion walks an object's versions back once: each the same as object(_:asOf:), newest first, limited, raw, compacted and after a purge")
    func versions() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 300)
        let members = (1...100).map { StoredObjectID(entity: "Member", primaryKey: UInt64($0)) }
        func walked(_ id: StoredObjectID, limit: Int = .max) throws -> [Version] {
            try log.read { reader in
                var result: [Version] = []
                try reader.forEachVersion(of: id, limit: limit) { sequence, values in
                    result.append(Version(sequence: sequence, values: values))
                    return .next
                }
                return result
            }
        }
        func asked(_ id: StoredObjectID, limit: Int = .max) throws -> [Version] {
            try log.read { reader in
                let purged = try reader.purgedThrough
                return try reader.history(of: id).filter { $0 > purged }.reversed().prefix(limit).map {
                    Version(sequence: $0, values: try reader.object(id, asOf: $0))
                }
            }
        }
        let deleted = try log.read { reader in try members.filter { try reader.object($0) == nil } }
        #expect(!deleted.isEmpty, "some member was deleted: its newest version is nil")
        for step in ["raw", "compacted", "purged"] {
            if step == "compacted" {
                var request = CompactionRequest(before: 201)
                request.eventsPerFrame = 16
                #expect(try log.compact(request).moved == 1...200)
            } else if step == "purged" {
                try log.purge(through: 100, author: "ops")
            }
            for id in members {
                let versions = try walked(id)
                #expect(versions == (try asked(id)), "\(id), \(step)")
                #expect(try walked(id, limit: 3) == Array(versions.prefix(3)))
                if deleted.contains(id), let newest = versions.first { #expect(newest.values == nil) }
                if step == "purged" { #expect(versions.allSatisfy { $0.sequence > 100 }) }
            }
            #expect(try members.contains { try walked($0).count > 2 }, "some member has several versions (\(step))")
        }
        // `.stop` ends the walk.
        let busy = try #require(try members.first { try walked($0).count > 1 })
        let first = try log.read { reader in
            var seen = 0
            try reader.forEachVersion(of: busy) { _, _ in
                seen += 1
                return .stop
            }
            return seen
        }
        #expect(first == 1)
    }

    struct Version: Equatable {
        let sequence: UInt64
        let values: [String: LogValue]?
    }
}
