import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// A log exercising what as-of and compaction must carry through: inserts, updates, deletes,
/// a delete restored under the same ID and an object re-inserted under a new one, unordered
/// to-many membership (Club.sponsors), an ordered to-many (Club.lineup), a reservation and
/// events long enough to take several chunks. Returns the log and every event committed.
private func richLog(
    _ dir: TemporaryDirectory, transactions: Int = 60, configure: (inout EventLog.Configuration) -> Void = { _ in }
) throws -> EventLog {
    let log = try openLog(dir, model: try libraryModel()) { configuration in
        configuration.checkpointInterval = 7
        configuration.maximumCheckpoints = 100
        configuration.chunkSize = 200
        configure(&configuration)
    }
    var clubs: [StoredObjectID] = []
    var sponsors: [StoredObjectID] = []
    var members: [StoredObjectID] = []
    var deleted: [(StoredObjectID, [String: DraftValue])] = []
    for n in 0..<transactions {
        var draft = TransactionDraft(author: "w\(n % 3)")
        switch n % 10 {
        case 0:
            let club = draft.insert("Club", values: ["name": s("club \(n)")])
            let sponsor = draft.insert("Sponsor", values: ["name": s("sponsor \(n)")])
            let result = try log.commit(draft)
            clubs.append(try #require(result.permanentID(for: club)))
            sponsors.append(try #require(result.permanentID(for: sponsor)))
        case 1, 5:
            let values: [String: DraftValue] = [
                "name": s(String(repeating: "long name \(n) ", count: n % 5 == 0 ? 120 : 1)), "email": s("m\(n)@x.org"),
                "age": i(Int32(n)), "club": .reference(.stored(clubs[n % clubs.count])),
            ]
            let member = draft.insert("Member", values: values)
            let result = try log.commit(draft)
            members.append(try #require(result.permanentID(for: member)))
        case 2:
            draft.changeMembers(of: .stored(clubs[n % clubs.count]), "sponsors", adding: sponsors.map { .stored($0) })
            try log.commit(draft)
        case 3:
            draft.update(.stored(clubs[n % clubs.count]), values: ["lineup": .references(members.reversed().map { .stored($0) })])
            try log.commit(draft)
        case 4:
            draft.changeMembers(of: .stored(clubs[n % clubs.count]), "sponsors", removing: [.stored(sponsors[0])])
            try log.commit(draft)
        case 6:
            // A member with no references to it goes; case 7 brings it back under its ID.
            var lineupCleared = TransactionDraft()
            for club in clubs { lineupCleared.update(.stored(club), values: ["lineup": .references([])]) }
            try log.commit(lineupCleared)
            if let victim = members.popLast() {
                let values = try log.read { reader in try reader.object(victim)?.values ?? [:] }
                draft.delete(.stored(victim))
                try log.commit(draft)
                var kept: [String: DraftValue] = [:]
                for (key, value) in values {
                    switch value {
                    case .reference(let target): kept[key] = .reference(.stored(target))
                    case .attribute(let attribute): kept[key] = .attribute(attribute)
                    case .references, .null: break
                    }
                }
                deleted.append((victim, kept))
            }
        case 7:
            if let (victim, values) = deleted.popLast() {
                if n % 20 == 7 {
                    draft.restore(victim, values: values)  // same primary key
                    try log.commit(draft)
                    members.append(victim)
                } else {
                    let again = draft.insert("Member", values: values)  // a new primary key
                    let result = try log.commit(draft)
                    members.append(try #require(result.permanentID(for: again)))
                }
            } else {
                try log.commit(draft)
            }
        case 8:
            _ = try log.reservePrimaryKeys(of: "Club", count: 2)
        default:
            for member in members.suffix(3) { draft.update(.stored(member), values: ["rating": .attribute(.double(Double(n)))]) }
            try log.commit(draft)
        }
    }
    return log
}

/// Forward images as of every sequence 0…head, from the events alone.
private func forwardImages(_ events: [TransactionEvent]) -> [StateImage] {
    var images = [StateImage()]
    var image = StateImage()
    for event in events {
        image.apply(event)
        images.append(image)
    }
    return images
}

/// Every row of the named tables, in key order, for byte-for-byte comparison.
private func tableRows(_ storePath: String, _ names: [String]) throws -> [String: [[UInt8]]] {
    var options = LMDBEnvironment.Options()
    options.isReadOnly = true
    options.maxDatabases = 32
    let environment = try LMDBEnvironment(path: storePath, databases: names.map { DatabaseDescriptor($0) }, options: options)
    var result: [String: [[UInt8]]] = [:]
    try environment.read { txn in
        for name in names {
            let database = try environment.database(named: name)
            var rows: [[UInt8]] = []
            try txn.forEach(in: database) { key, value in
                rows.append(key.withUnsafeBytes { Array($0) } + [0xFF, 0xEE] + value.withUnsafeBytes { Array($0) })
                return .next
            }
            result[name] = rows
        }
    }
    return result
}

@Suite("Compaction review: horizons, segments, as-of, purge, repair, vacuum")
struct CompactionReviewTests {
    @Test("compaction horizons at 0, 1, head, head + 1 and beyond")
    func horizonEdges() throws {
        let dir = try TemporaryDirectory()
        let log = try richLog(dir, transactions: 20)
        let head = try log.head
        let events = try allEvents(log)
        #expect(try log.compact(CompactionRequest(before: 0)).moved == nil)
        #expect(try log.compact(CompactionRequest(before: 1)).moved == nil)
        #expect(try log.compact(CompactionRequest(before: 1)).limitedBy == .requested)
        #expect(try log.compact(CompactionRequest(before: 2)).moved == 1...1)
        #expect(try log.compact(CompactionRequest(before: head)).moved == 2...(head - 1))
        let last = try log.compact(CompactionRequest(before: head + 1))
        #expect(last.moved == head...head)
        let beyond = try log.compact(CompactionRequest(before: head + 100))
        #expect(beyond.moved == nil)
        #expect(beyond.limitedBy == .head)
        #expect(try allEvents(log) == events)
        #expect(try log.verify().isClean)
    }

    @Test("many small segments: every sequence, range, history and as-of reads as before; replay is byte-identical")
    func manySmallSegments() throws {
        let dir = try TemporaryDirectory()
        let log = try richLog(dir, transactions: 70)
        let head = try log.head
        let events = try allEvents(log)
        #expect(events.count == Int(head))
        let images = forwardImages(events)
        let ids = Set(images.flatMap { $0.objects.keys })
        let tables = ["state", "index", "referrers", "members", "history", "counters", "events"]
        try log.replay(through: head, into: dir.file("before"))
        let replayedBefore = try tableRows(dir.file("before"), tables)

        var next: UInt64 = 1
        var step: UInt64 = 1
        while next <= head {
            var request = CompactionRequest(before: min(head + 1, next + step))
            request.eventsPerFrame = Int(step % 3) + 1
            request.usesDictionary = step % 2 == 0
            let report = try log.compact(request)
            #expect(report.moved?.lowerBound == next)
            next = (report.moved?.upperBound ?? head) + 1
            step = step % 5 + 1
        }
        #expect(try log.segments().count > 10)

        try log.read { (reader: borrowing LogReader) throws in
            for n in 1...head { #expect(try reader.event(n) == events[Int(n - 1)], "event \(n)") }
            for n in 0...head {
                #expect(try reader.state(asOf: n) == images[Int(n)], "as of \(n)")
                for id in ids { #expect(try reader.object(id, asOf: n) == images[Int(n)].objects[id], "\(id) as of \(n)") }
            }
            for id in ids {
                var versions: [(UInt64, [String: LogValue]?)] = []
                try reader.forEachVersion(of: id) { sequence, values in
                    versions.append((sequence, values))
                    return .next
                }
                for (sequence, values) in versions { #expect(values == images[Int(sequence)].objects[id], "\(id) version \(sequence)") }
                let touching = try reader.history(of: id)
                var read: [UInt64] = []
                try reader.forEachEvent(among: touching, reversed: true) { event in
                    read.append(event.sequence)
                    return .next
                }
                #expect(read == touching.reversed())
            }
            #expect(throws: LogError.self) { try reader.state(asOf: head + 1) }
        }
        let verification = try log.verify()
        #expect(verification.isClean, "\(verification.problems)")
        try log.replay(through: head, into: dir.file("after"))
        let replayedAfter = try tableRows(dir.file("after"), tables)
        #expect(replayedAfter == replayedBefore)
    }

    @Test("as-of on each side of every checkpoint with checkpoints at every transaction, and none")
    func checkpointIntervals() throws {
        for interval: UInt64 in [1, .max, 0] {
            let dir = try TemporaryDirectory()
            let log = try richLog(dir, transactions: 40) {
                $0.checkpointInterval = interval
                $0.maximumCheckpoints = interval == 1 ? 5 : 100
            }
            let head = try log.head
            let images = forwardImages(try allEvents(log))
            try log.compact(CompactionRequest(before: head / 2))
            try log.read { (reader: borrowing LogReader) throws in
                let checkpoints = try reader.checkpoints()
                if interval == 1 { #expect(checkpoints.count == 5) } else { #expect(checkpoints.isEmpty) }
                for n in 0...head { #expect(try reader.state(asOf: n) == images[Int(n)], "interval \(interval) as of \(n)") }
            }
            #expect(try log.verify().isClean)
        }
    }

    @Test("purge then compaction and compaction then purge keep every later event and as-of")
    func purgeAndCompaction() throws {
        let dir = try TemporaryDirectory()
        let log = try richLog(dir, transactions: 60)
        let head = try log.head
        let events = try allEvents(log)
        let images = forwardImages(events)
        var request = CompactionRequest(before: 30)
        request.eventsPerFrame = 4
        request.usesDictionary = true
        try log.compact(request)
        try log.purge(through: 17, author: "test")  // inside a frame of the segment
        try log.compact(CompactionRequest(before: 45))
        try log.purge(through: 44, author: "test")  // exactly at a segment's end
        try log.compact(CompactionRequest())
        let newHead = try log.head
        #expect(newHead == head + 2)
        try log.read { (reader: borrowing LogReader) throws in
            #expect(throws: LogError.self) { try reader.state(asOf: 43) }
            #expect(throws: LogError.self) { try reader.event(44) }
            for n in 44...head {
                #expect(try reader.state(asOf: n) == images[Int(n)], "as of \(n)")
                for id in images[Int(n)].objects.keys { #expect(try reader.object(id, asOf: n) == images[Int(n)].objects[id]) }
            }
            for n in 45...head { #expect(try reader.event(n) == events[Int(n - 1)]) }
            #expect(try reader.state(asOf: newHead) == images[Int(head)])
        }
        let verification = try log.verify()
        #expect(verification.isClean, "\(verification.problems)")
    }

    @Test("a segment rewritten by a purge keeps its dictionary across a writable reopen")
    func purgeRewriteSurvivesReopen() throws {
        let dir = try TemporaryDirectory()
        let events: [TransactionEvent]
        do {
            let log = try richLog(dir, transactions: 90)
            events = try allEvents(log)
            var request = CompactionRequest(before: 81)
            request.usesDictionary = true
            request.eventsPerFrame = 8
            #expect(try log.compact(request).dictionaryFile != nil)
            try log.purge(through: 37, author: "test")
        }
        let log = try openLog(dir, model: try libraryModel())
        try log.read { (reader: borrowing LogReader) throws in
            for n in UInt64(38)...80 { #expect(try reader.event(n) == events[Int(n - 1)]) }
        }
        let report = try log.verify()
        #expect(report.isClean, "\(report.problems)")
    }

    @Test("dictionary training on tiny or repetitive events never loses events")
    func dictionaryOnDegenerateInput() throws {
        for (count, varied) in [(64, false), (65, false), (200, false), (70, true), (3, true)] {
            let dir = try TemporaryDirectory()
            let log = try openLog(dir, model: try libraryModel())
            for n in 0..<count {
                var draft = TransactionDraft()
                draft.insert("Badge", values: varied ? ["colour": s("c\(n)")] : [:])
                try log.commit(draft)
            }
            let events = try allEvents(log)
            var request = CompactionRequest()
            request.usesDictionary = true
            request.eventsPerFrame = 1
            let report = try log.compact(request)
            #expect(report.moved == 1...UInt64(count))
            #expect(try allEvents(log) == events)
            #expect(try log.verify().isClean)
        }
    }

    @Test("a dry run writes nothing and estimates the size from a sample")
    func dryRunWritesNothing() throws {
        let dir = try TemporaryDirectory()
        let log = try richLog(dir, transactions: 300)
        var dry = CompactionRequest()
        dry.dryRun = true
        dry.eventsPerFrame = 2
        let estimate = try log.compact(dry)
        #expect(!FileManager.default.fileExists(atPath: dir.file("store/segments")))
        var real = CompactionRequest()
        real.eventsPerFrame = 2
        let report = try log.compact(real)
        #expect(estimate.moved == report.moved)
        #expect(estimate.rawBytes == report.rawBytes)
        #expect(estimate.compressedBytes > report.compressedBytes / 2 && estimate.compressedBytes < report.compressedBytes * 2)
    }

    @Test("consumers and undo retention hold the horizon; the report says which")
    func consumersHoldTheHorizon() throws {
        let dir = try TemporaryDirectory()
        let log = try richLog(dir, transactions: 30)
        let head = try log.head
        try log.registerConsumer("a", processedThrough: 0)
        let none = try log.compact(CompactionRequest())
        #expect(none.moved == nil)
        #expect(none.limitedBy == .consumer(name: "a", processedThrough: 0))
        try log.registerConsumer("a", processedThrough: 10)
        try log.registerConsumer("b", processedThrough: head)
        // A point past the head is refused: read back, it would be damage.
        #expect(throws: LogError.self) { try log.registerConsumer("c", processedThrough: head + 50) }
        #expect(try log.compact(CompactionRequest()).moved == 1...10)
        try log.removeConsumer("a")
        try log.setUndoRetention(5)
        let held = try log.compact(CompactionRequest())
        #expect(held.moved == 11...(head - 5))
        #expect(held.limitedBy == .undoRetention(transactions: 5))
        try log.setUndoRetention(head + 10)
        #expect(try log.compact(CompactionRequest()).moved == nil)
        try log.setUndoRetention(0)
        #expect(try log.compact(CompactionRequest()).moved == (head - 4)...head)
    }

    @Test("repair at open: a temporary file, a renamed file without its entry; an entry whose file is missing is an error")
    func repairStates() throws {
        let dir = try TemporaryDirectory()
        let model = try libraryModel()
        let events: [TransactionEvent]
        do {
            let log = try richLog(dir, transactions: 40)
            events = try allEvents(log)
            var request = CompactionRequest(before: 11)
            request.usesDictionary = false
            try log.compact(request)
        }
        let segments = dir.file("store/segments")
        func path(_ name: String) -> String { (segments as NSString).appendingPathComponent(name) }
        // A compaction of 11…20 that crashed after the rename, before its transaction.
        let renamed = SegmentDescriptorName.name(11, 20)
        try Data([0x28, 0xB5, 0x2F, 0xFD]).write(to: URL(fileURLWithPath: path(renamed)))
        try Data([1]).write(to: URL(fileURLWithPath: path(".tmp-999999-X.zst")))
        try Data([1]).write(to: URL(fileURLWithPath: path(".tmp-999999-X.dict")))
        do {
            let log = try openLog(dir, model: model)
            #expect(!FileManager.default.fileExists(atPath: path(renamed)))
            #expect(!FileManager.default.fileExists(atPath: path(".tmp-999999-X.zst")))
            #expect(!FileManager.default.fileExists(atPath: path(".tmp-999999-X.dict")))
            #expect(try log.compact(CompactionRequest(before: 21)).moved == 11...20)
            #expect(try allEvents(log) == events)
        }
        // The manifest names a file that is gone: reads fail naming it, verify says so,
        // and nothing is silently skipped.
        try FileManager.default.removeItem(atPath: path(SegmentDescriptorName.name(1, 10)))
        let log = try openLog(dir, model: model)
        try log.read { (reader: borrowing LogReader) throws in
            do {
                _ = try reader.event(3)
                Issue.record("read an event whose segment is missing")
            } catch {
                #expect("\(error)".contains(SegmentDescriptorName.name(1, 10)))
            }
            #expect(throws: (any Error).self) { try reader.state(asOf: 2) }
        }
        #expect(throws: (any Error).self) { try allEvents(log) }
        let report = try log.verify()
        #expect(report.problems.contains { $0.kind == .segment && $0.location.contains(SegmentDescriptorName.name(1, 10)) })
    }

    @Test("vacuum refuses while the store is open in this process, keeping later commits")
    func vacuumWhileOpen() throws {
        let dir = try TemporaryDirectory()
        let head: UInt64
        do {
            let log = try richLog(dir, transactions: 30)
            try log.compact(CompactionRequest())
            let reader = try EventLog(openingExistingAt: dir.file("store"))
            let refusal = #expect(throws: LMDBError.self) { try EventLog.vacuum(path: dir.file("store")) }
            #expect(refusal?.code == .incompatibleOpen)
            #expect(refusal.map { "\($0)" }?.contains("open in this process") == true)
            var draft = TransactionDraft()
            draft.insert("Badge", values: ["colour": s("after")])
            try log.commit(draft)
            head = try log.head
            #expect(try reader.head == head)
        }
        // Every handle is gone: now it runs, and keeps the last commit.
        let (before, after) = try EventLog.vacuum(path: dir.file("store"))
        #expect(after <= before)
        let log = try openLog(dir, model: try libraryModel())
        #expect(try log.head == head)
        #expect(try log.verify().isClean)
    }
}

/// Opens the store's environment alone (no EventLog may have it open) and runs `body` in
/// one write transaction, for tests that damage a table on purpose.
private func tamper(_ storePath: String, _ body: (borrowing LMDBTransaction, LMDBEnvironment) throws -> Void) throws {
    var options = LMDBEnvironment.Options()
    options.maxDatabases = 32
    let environment = try LMDBEnvironment(
        path: storePath, databases: ["meta", "events", "segments", "checkpoints"].map { DatabaseDescriptor($0) }, options: options)
    try environment.write { txn in try body(txn, environment) }
}

private func bigEndian(_ n: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: n >> (56 - 8 * $0)) } }

@Suite("Compaction review: damage is found, not read")
struct CompactionReviewDamageTests {
    @Test("verify compares every checkpoint with the log: a damaged one, which as-of would read, is reported")
    func verifyChecksCheckpoints() throws {
        let dir = try TemporaryDirectory()
        let model = try libraryModel()
        let member = StoredObjectID(entity: "Member", primaryKey: 1)
        do {
            let log = try richLog(dir, transactions: 30)
            #expect(try log.verify().isClean)
            #expect(try log.read { try $0.checkpoints() }.contains(14))
        }
        // The checkpoint at 14 loses Member/p1's record.
        let key = bigEndian(14) + [0x01] + (try recordKey(dir: dir, model: model, member))
        try tamper(dir.file("store")) { txn, environment in
            let checkpoints = try environment.database(named: "checkpoints")
            #expect(try txn.delete(key: key, in: checkpoints))
        }
        let log = try openLog(dir, model: model)
        let report = try log.verify()
        #expect(report.problems.contains { $0.location.contains("checkpoint 14") && $0.location.contains("Member/p1") }, "\(report.problems)")
    }

    @Test("a writable open with a damaged manifest entry opens, deletes no segment file, and verify names the entry")
    func damagedManifestEntryAtOpen() throws {
        let dir = try TemporaryDirectory()
        let model = try libraryModel()
        do {
            let log = try richLog(dir, transactions: 30)
            try log.compact(CompactionRequest(before: 11))
            try log.compact(CompactionRequest(before: 21))
        }
        try tamper(dir.file("store")) { txn, environment in
            let segments = try environment.database(named: "segments")
            try txn.put([UInt8](repeating: 7, count: 30), forKey: bigEndian(11), in: segments)
        }
        let segmentFiles = Set(try FileManager.default.contentsOfDirectory(atPath: dir.file("store/segments")))
        #expect(segmentFiles.count == 2)
        let log = try openLog(dir, model: model)
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: dir.file("store/segments"))) == segmentFiles)
        let report = try log.verify()
        #expect(report.problems.contains { $0.kind == .segment && $0.location == "manifest entry 11" }, "\(report.problems)")
        // Events in the intact segment still read.
        #expect(try log.read { try $0.event(5) }.sequence == 5)
    }

    @Test("an emptied dictionary file is an error naming it and its segment")
    func emptiedDictionary() throws {
        let dir = try TemporaryDirectory()
        let log = try richLog(dir, transactions: 90)
        var request = CompactionRequest(before: 81)
        request.usesDictionary = true
        let report = try log.compact(request)
        let dictionary = try #require(report.dictionaryFile)
        try Data().write(to: URL(fileURLWithPath: dictionary))
        let name = (dictionary as NSString).lastPathComponent
        do {
            _ = try log.read { try $0.event(3) }
            Issue.record("read an event whose dictionary is empty")
        } catch {
            #expect("\(error)".contains(name) && "\(error)".contains(SegmentDescriptorName.name(1, 80)), "\(error)")
        }
        let problems = try log.verify().problems
        #expect(problems.contains { $0.kind == .segment && "\($0)".contains(name) }, "\(problems)")
    }

    @Test("compaction refuses a raw log with a missing event, naming it, and moves nothing")
    func compactionRefusesAGap() throws {
        let dir = try TemporaryDirectory()
        let model = try libraryModel()
        do { _ = try richLog(dir, transactions: 20) }
        try tamper(dir.file("store")) { txn, environment in
            let events = try environment.database(named: "events")
            var keys: [[UInt8]] = []
            try txn.forEach(in: events, range: .prefix(bigEndian(5))) { key, _ in
                keys.append(key.withUnsafeBytes { Array($0) })
                return .next
            }
            for key in keys { try txn.delete(key: key, in: events) }
        }
        let log = try openLog(dir, model: model)
        do {
            try log.compact(CompactionRequest(before: 11))
            Issue.record("compacted a log with event 5 missing")
        } catch {
            #expect("\(error)".contains("event 5"), "\(error)")
        }
        #expect(try log.read { try $0.compactedThrough } == 0)
        #expect(try log.segments().isEmpty)
    }
}

/// The 10-byte object key of `id` (entity code · primary key), from the store's catalog.
private func recordKey(dir: TemporaryDirectory, model: ManagedObjectModel, _ id: StoredObjectID) throws -> [UInt8] {
    let code = try entityCode(dir: dir, id.entity)
    return [UInt8(code >> 8), UInt8(code & 0xFF)] + bigEndian(id.primaryKey)
}

private func entityCode(dir: TemporaryDirectory, _ entity: String) throws -> UInt16 {
    var options = LMDBEnvironment.Options()
    options.isReadOnly = true
    options.maxDatabases = 32
    let environment = try LMDBEnvironment(path: dir.file("store"), databases: [DatabaseDescriptor("catalog")], options: options)
    let catalog = try environment.database(named: "catalog")
    let value = try environment.read { txn in try txn.value(forKey: Array(("e" + entity).utf8), in: catalog) }
    let bytes = try #require(value)
    return UInt16(bytes[0]) << 8 | UInt16(bytes[1])
}

enum SegmentDescriptorName {
    static func name(_ first: UInt64, _ last: UInt64, suffix: String = "zst") -> String {
        func padded(_ n: UInt64) -> String {
            let digits = String(n)
            return String(repeating: "0", count: max(0, 20 - digits.count)) + digits
        }
        return "\(padded(first))-\(padded(last)).\(suffix)"
    }
}

@Suite("Compaction review: as-of images agree whichever way they are built")
struct CompactionReviewAsOfOrderTests {
    @Test("an unordered to-many given out of order at insert reads the same forward, backward and from a checkpoint")
    func unorderedMembersInsertedOutOfOrder() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel()) {
            $0.checkpointInterval = 3
        }
        var first = TransactionDraft()
        let a = first.insert("Sponsor", values: ["name": s("a")])
        let b = first.insert("Sponsor", values: ["name": s("b")])
        let c = first.insert("Sponsor", values: ["name": s("c")])
        let sponsors = try log.commit(first)
        let ids = try [a, b, c].map { try #require(sponsors.permanentID(for: $0)) }
        var second = TransactionDraft()
        let club = second.insert("Club", values: ["name": s("club"), "sponsors": .references([.stored(ids[2]), .stored(ids[0]), .stored(ids[1])])])
        let clubID = try #require(try log.commit(second).permanentID(for: club))
        for n in 0..<10 {
            var draft = TransactionDraft()
            draft.insert("Badge", values: ["colour": s("c\(n)")])
            try log.commit(draft)
        }
        var last = TransactionDraft()
        last.delete(.stored(clubID))
        try log.commit(last)
        let head = try log.head
        for n in UInt64(2)...head {
            try log.replay(through: n, into: dir.file("replay-\(n)"))
            let replayed = try EventLog(openingExistingAt: dir.file("replay-\(n)"))
            let expected = try replayed.read { try $0.currentState() }
            try log.read { (reader: borrowing LogReader) throws in
                let plan = try reader.plan(asOf: n)
                #expect(try reader.state(asOf: n) == expected, "as of \(n) by \(plan)")
                #expect(try reader.object(clubID, asOf: n) == expected.objects[clubID], "club as of \(n)")
            }
        }
    }
}

/// Clubs and sponsors; with `angels`, a later version that adds Angel, a sub-entity of
/// Sponsor whose name sorts before it but whose code, given later, is higher.
private func sponsorModel(angels: Bool) throws -> ManagedObjectModel {
    if angels {
        return try ManagedObjectModel {
            Entity("Club") {
                Attribute("name", .string)
                Relationship("sponsors", to: "Sponsor", inverse: "clubs", toMany: true)
            }
            Entity("Sponsor") {
                Attribute("name", .string)
                Relationship("clubs", to: "Club", inverse: "sponsors", toMany: true)
            }
            Entity("Angel", parent: "Sponsor") {
                Attribute("wings", .int32)
            }
        }
    }
    return try ManagedObjectModel {
        Entity("Club") {
            Attribute("name", .string)
            Relationship("sponsors", to: "Sponsor", inverse: "clubs", toMany: true)
        }
        Entity("Sponsor") {
            Attribute("name", .string)
            Relationship("clubs", to: "Club", inverse: "sponsors", toMany: true)
        }
    }
}

extension CompactionReviewAsOfOrderTests {
    @Test("unordered members of entities whose codes don't follow name order read the same every way")
    func unorderedMembersAcrossEntityCodes() throws {
        let dir = try TemporaryDirectory()
        do {
            let v1 = try openLog(dir, model: try sponsorModel(angels: false)) { $0.checkpointInterval = 1 }
            var draft = TransactionDraft()
            draft.insert("Sponsor", values: ["name": s("plain")])
            try v1.commit(draft)
        }
        let log = try openLog(dir, model: try sponsorModel(angels: true)) { $0.checkpointInterval = 4 }
        var angels = TransactionDraft()
        let angel = angels.insert("Angel", values: ["name": s("angel")])
        let angelID = try #require(try log.commit(angels).permanentID(for: angel))
        let plain = StoredObjectID(entity: "Sponsor", primaryKey: 1)
        var clubs = TransactionDraft()
        let club = clubs.insert("Club", values: ["name": s("club"), "sponsors": .references([.stored(plain), .stored(angelID)])])
        let clubID = try #require(try log.commit(clubs).permanentID(for: club))
        for n in 0..<8 {
            var draft = TransactionDraft()
            draft.insert("Sponsor", values: ["name": s("s\(n)")])
            try log.commit(draft)
        }
        var last = TransactionDraft()
        last.delete(.stored(clubID))
        try log.commit(last)
        let head = try log.head
        // Checkpoints written under both model versions compare equal to the replay.
        #expect(try log.read { try $0.checkpoints() }.count >= 2)
        let verification = try log.verify()
        #expect(verification.isClean, "\(verification.problems)")
        for n in UInt64(3)...head {
            try log.replay(through: n, into: dir.file("replay-\(n)"))
            let replayed = try EventLog(openingExistingAt: dir.file("replay-\(n)"))
            let expected = try replayed.read { try $0.currentState() }
            try log.read { (reader: borrowing LogReader) throws in
                let plan = try reader.plan(asOf: n)
                #expect(try reader.state(asOf: n) == expected, "as of \(n) by \(plan)")
                #expect(try reader.object(clubID, asOf: n) == expected.objects[clubID], "club as of \(n)")
            }
        }
    }
}

@Suite("Compaction review: randomized interleaving")
struct CompactionReviewRandomTests {
    /// Commits, compactions (random horizons, frame sizes, dictionaries), purges and
    /// checkpoints interleaved at random; after each step every kept event, as-of state and
    /// object as-of is checked against images built from the events as committed, and the
    /// store verifies clean. Rounds: `STRATA_COMPACTION_REVIEW_ROUNDS` (default 12); seed:
    /// `STRATA_COMPACTION_REVIEW_SEED`.
    @Test("commits, compactions and purges interleaved keep every kept event and as-of exact")
    func interleaved() throws {
        let rounds = Int(ProcessInfo.processInfo.environment["STRATA_COMPACTION_REVIEW_ROUNDS"] ?? "") ?? 12
        let seed = UInt64(ProcessInfo.processInfo.environment["STRATA_COMPACTION_REVIEW_SEED"] ?? "") ?? 0xC0FFEE
        var rng = SeededGenerator(seed: seed)
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel()) {
            $0.checkpointInterval = 5
            $0.maximumCheckpoints = 4
            $0.chunkSize = 120
        }
        var events: [TransactionEvent] = []  // every event ever committed, by sequence - 1
        var live: [StoredObjectID] = []
        var sponsors: [StoredObjectID] = []
        var clubs: [StoredObjectID] = []
        func commitSome(_ count: Int) throws {
            for _ in 0..<count {
                var draft = TransactionDraft(author: "r")
                switch Int.random(in: 0..<6, using: &rng) {
                case 0 where !clubs.isEmpty && !sponsors.isEmpty:
                    let club = clubs.randomElement(using: &rng) ?? clubs[0]
                    draft.changeMembers(of: .stored(club), "sponsors", adding: [.stored(sponsors.randomElement(using: &rng) ?? sponsors[0])])
                case 1 where !live.isEmpty:
                    let victim = live.remove(at: Int.random(in: 0..<live.count, using: &rng))
                    draft.delete(.stored(victim))
                case 2 where !live.isEmpty:
                    draft.update(.stored(live.randomElement(using: &rng) ?? live[0]), values: ["colour": s(String(repeating: "x", count: Int.random(in: 0..<400, using: &rng)))])
                case 3:
                    let club = draft.insert("Club", values: ["name": s("c")])
                    let sponsor = draft.insert("Sponsor", values: ["name": s("s")])
                    let result = try log.commit(draft)
                    clubs.append(try #require(result.permanentID(for: club)))
                    sponsors.append(try #require(result.permanentID(for: sponsor)))
                    continue
                default:
                    let badge = draft.insert("Badge", values: ["colour": s("b\(Int.random(in: 0..<9, using: &rng))")])
                    let result = try log.commit(draft)
                    live.append(try #require(result.permanentID(for: badge)))
                    continue
                }
                try log.commit(draft)
            }
            let head = try log.head
            try log.read { (reader: borrowing LogReader) throws in
                try reader.forEachEvent(from: UInt64(events.count) + 1, through: head) { event in
                    events.append(event)
                    return .next
                }
            }
        }
        try commitSome(20)
        for round in 0..<rounds {
            let head = try log.head
            switch Int.random(in: 0..<4, using: &rng) {
            case 0, 1:
                var request = CompactionRequest(before: UInt64.random(in: 0...(head + 1), using: &rng))
                request.eventsPerFrame = Int.random(in: 1...6, using: &rng)
                request.usesDictionary = Bool.random(using: &rng)
                try log.compact(request)
            case 2:
                let purged = try log.read { try $0.purgedThrough }
                if purged < head, Int.random(in: 0..<3, using: &rng) == 0 {
                    try log.purge(through: UInt64.random(in: (purged + 1)...head, using: &rng), author: "random")
                    let newHead = try log.head
                    try log.read { (reader: borrowing LogReader) throws in events.append(try reader.event(newHead)) }
                }
            default:
                try commitSome(Int.random(in: 1...15, using: &rng))
            }
            let images = forwardImages(events)
            let head2 = try log.head
            let purged = try log.read { try $0.purgedThrough }
            try log.read { (reader: borrowing LogReader) throws in
                for n in (purged + 1)...max(purged + 1, head2) where n <= head2 {
                    #expect(try reader.event(n) == events[Int(n - 1)], "round \(round): event \(n)")
                }
                for n in purged...head2 {
                    let image = images[Int(n)]
                    #expect(try reader.state(asOf: n) == image, "round \(round): as of \(n)")
                    for id in image.objects.keys.sorted().prefix(5) {
                        #expect(try reader.object(id, asOf: n) == image.objects[id], "round \(round): \(id) as of \(n)")
                    }
                }
            }
            let report = try log.verify()
            #expect(report.isClean, "round \(round): \(report.problems)")
            if !report.isClean { return }
        }
    }
}

@Suite("Compaction review: verify and replay across model versions")
struct CompactionReviewModelVersionTests {
    @Test("a store whose model changed verifies clean and replays byte for byte, compacted or not")
    func verifyAcrossModelVersions() throws {
        let dir = try TemporaryDirectory()
        do {
            let v1 = try openLog(dir, model: try sponsorModel(angels: false)) { $0.checkpointInterval = 2 }
            var draft = TransactionDraft()
            let club1 = draft.insert("Club", values: ["name": s("one")])
            let club2 = draft.insert("Club", values: ["name": s("two")])
            draft.insert("Club", values: ["name": s("three")])
            let sponsor = draft.insert("Sponsor", values: ["name": s("s")])
            let result = try v1.commit(draft)
            var link = TransactionDraft()
            link.changeMembers(of: .stored(try #require(result.permanentID(for: club1))), "sponsors", adding: [.stored(try #require(result.permanentID(for: sponsor)))])
            try v1.commit(link)
            #expect(result.permanentID(for: club2) != nil)
        }
        let log = try openLog(dir, model: try sponsorModel(angels: true)) { $0.checkpointInterval = 2 }
        var update = TransactionDraft()
        update.update(.stored(StoredObjectID(entity: "Club", primaryKey: 2)), values: ["name": s("two, renamed")])
        try log.commit(update)
        var members = TransactionDraft()
        members.changeMembers(of: .stored(StoredObjectID(entity: "Club", primaryKey: 1)), "sponsors", removing: [.stored(StoredObjectID(entity: "Sponsor", primaryKey: 1))])
        try log.commit(members)
        var angel = TransactionDraft()
        angel.insert("Angel", values: ["name": s("a"), "wings": i(2)])
        try log.commit(angel)
        let head = try log.head
        let tables = ["state", "index", "referrers", "members", "history", "counters", "events"]
        var verification = try log.verify()
        #expect(verification.isClean, "\(verification.problems)")
        try log.replay(through: head, into: dir.file("before"))
        try log.compact(CompactionRequest())
        verification = try log.verify()
        #expect(verification.isClean, "\(verification.problems)")
        try log.replay(through: head, into: dir.file("after"))
        let original = try tableRows(dir.file("store"), tables.filter { $0 != "events" })
        let before = try tableRows(dir.file("before"), tables)
        let after = try tableRows(dir.file("after"), tables)
        #expect(before == after)
        for table in tables where table != "events" { #expect(before[table] == original[table], "\(table)") }
    }
}
