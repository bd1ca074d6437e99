import Foundation
@testable import StrataLog
import Synchronization
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// Commits transactions `first…last` of a workload that touches every kind of projection:
/// inserts of members (unique email, index) in clubs (to-one), sponsors joining clubs
/// (unordered to-many membership), rating updates, and deletes of earlier members.
/// A store checkpointed every 10 transactions (4 kept) with ``commitWorkload(_:_:)``'s
/// first `transactions` transactions.
func workloadLog(_ dir: TemporaryDirectory, transactions: Int) throws -> EventLog {
    let log = try openLog(dir, model: try libraryModel()) {
        $0.checkpointInterval = 10
        $0.maximumCheckpoints = 4
    }
    try commitWorkload(log, 1...transactions)
    return log
}

func commitWorkload(_ log: EventLog, _ range: ClosedRange<Int>) throws {
    for n in range {
        var draft = TransactionDraft(author: n % 2 == 0 ? "alice" : "bob", contextName: "workload")
        let clubCount = try log.read { reader in try reader.count(of: "Club") }
        if clubCount == 0 || n % 10 == 1 {
            draft.insert("Club", values: ["name": s("club \(n)")])
        } else if n % 7 == 0 {
            let sponsor = draft.insert("Sponsor", values: ["name": s("sponsor \(n)")])
            draft.changeMembers(of: .stored(StoredObjectID(entity: "Club", primaryKey: 1)), "sponsors", adding: [sponsor])
        } else if n % 9 == 0 {
            let members = try log.read { reader in
                var ids: [StoredObjectID] = []
                try reader.forEachObject(of: "Member") { object in
                    ids.append(object.id)
                    return .next
                }
                return ids
            }
            if let victim = members.first { draft.delete(.stored(victim)) } else { draft.insert("Club", values: ["name": s("spare \(n)")]) }
        } else if n % 3 == 0, try log.read({ reader in try reader.count(of: "Member") }) > 0 {
            let members = try log.read { reader in
                var ids: [StoredObjectID] = []
                try reader.forEachObject(of: "Member") { object in
                    ids.append(object.id)
                    return .next
                }
                return ids
            }
            draft.update(.stored(members[n % members.count]), values: ["rating": .attribute(.double(Double(n))), "age": i(Int32(n % 60))])
        } else {
            let club = StoredObjectID(entity: "Club", primaryKey: UInt64(1 + n % max(1, clubCount)))
            draft.insert("Member", values: [
                "name": s("member \(n)"), "email": s("m\(n)@club.test"), "age": i(Int32(n % 50)), "club": .reference(.stored(club)),
            ])
        }
        try log.commit(draft)
    }
}

@Suite("Event log: purge")
struct PurgeTests {
    func purgeStore(_ dir: TemporaryDirectory, transactions: Int = 60) throws -> EventLog {
        try workloadLog(dir, transactions: transactions)
    }

    @Test("purge through a point inside a segment: history before it is gone, the store stays whole")
    func purgeAcrossSegment() throws {
        let dir = try TemporaryDirectory()
        let log = try purgeStore(dir)
        try log.compact(CompactionRequest(before: 35))  // one segment, events 1…34
        let before = try log.read { (reader: borrowing LogReader) throws in
            (at20: try reader.state(asOf: 20), at30: try reader.state(asOf: 30), now: try reader.currentState(),
             events: try (21...60).map { try reader.event(UInt64($0)) })
        }
        let member = StoredObjectID(entity: "Member", primaryKey: 3)
        let memberAt25 = try log.read { reader in try reader.object(member, asOf: 25) }
        let oldSegment = try #require(try log.segments().first)
        let oldCheckpoints = try log.read { reader in try reader.checkpoints() }

        let report = try log.purge(through: 20, author: "retention-job", contextName: "maintenance")
        #expect(report.purgedThrough == 20)
        #expect(report.removedEvents == 1...20)
        #expect(report.markerSequence == 61)
        #expect(report.segmentRewritten == "00000000000000000021-00000000000000000034.zst")
        #expect(report.segmentsRemoved.isEmpty)
        #expect(report.historyEntriesRemoved > 0)
        #expect(report.checkpointsRemoved == oldCheckpoints.filter { $0 < 20 })

        // The old segment file is gone; the rewritten one holds 21…34.
        let segmentDirectory = dir.file("store/segments")
        #expect(!FileManager.default.fileExists(atPath: (segmentDirectory as NSString).appendingPathComponent(oldSegment.fileName)))
        #expect(try log.segments().map(\.sequences) == [21...34])

        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.purgedThrough == 20)
            #expect(try reader.purgeMarker == 61)
            #expect(try reader.head == 61)
            // Purged events are refused with the typed error; kept ones read as before.
            #expect(throws: LogError.historyPurged(requested: 5, purgedThrough: 20)) { try reader.event(5) }
            #expect(throws: LogError.historyPurged(requested: 19, purgedThrough: 20)) { try reader.state(asOf: 19) }
            #expect(try (21...60).map { try reader.event(UInt64($0)) } == before.events)
            // The marker says who purged what, and when.
            let marker = try reader.event(61)
            #expect(marker.kind == .purge(through: 20))
            #expect(marker.author == "retention-job")
            #expect(marker.contextName == "maintenance")
            #expect(marker.changes.isEmpty)
            // The walk from 1 starts at the first kept event.
            var first: UInt64?
            try reader.forEachEvent { event in
                first = event.sequence
                return .stop
            }
            #expect(first == 21)
            // As-of from the base on is unchanged, whichever way it is built.
            #expect(try reader.state(asOf: 20) == before.at20)
            #expect(try reader.plan(asOf: 20) == .forwardFromCheckpoint(checkpoint: 20, events: 0))
            #expect(try reader.state(asOf: 30) == before.at30)
            #expect(try reader.currentState() == before.now)
            #expect(try reader.object(member, asOf: 25) == memberAt25)
            // The per-object history index keeps only entries after the point.
            for id in before.now.objects.keys {
                #expect(try reader.history(of: id).allSatisfy { $0 > 20 })
            }
            #expect(try reader.checkpoints().first == 20)
            #expect(try reader.metadata().purgedThrough == 20)
        }
        let verification = try log.verify()
        #expect(verification.isClean, "\(verification.problems)")
        #expect(verification.eventsChecked == 41)
    }

    @Test("after a purge: replay into a new store, compaction, more commits, thinning and a second purge")
    func storeStaysFunctional() throws {
        let dir = try TemporaryDirectory()
        let log = try purgeStore(dir)
        try log.purge(through: 25, author: "ops")
        let asOf40 = try log.read { reader in try reader.state(asOf: 40) }

        // Replay starts from the base.
        let copy = dir.file("copy")
        let replayed = try log.replay(through: 40, into: copy)
        #expect(replayed.head == 40)
        #expect(throws: LogError.historyPurged(requested: 10, purgedThrough: 25)) { try log.replay(through: 10, into: dir.file("never")) }
        do {
            let copied = try EventLog(openingExistingAt: copy)
            #expect(try copied.read { try $0.currentState() } == asOf40)
            #expect(try copied.read { try $0.purgedThrough } == 25)
            let verification = try copied.verify()
            #expect(verification.isClean, "\(verification.problems)")
        }

        // Compaction continues after the point; a consumer behind it holds nothing back.
        try log.registerConsumer("late", processedThrough: 3)
        let compaction = try log.compact(CompactionRequest(before: 50))
        #expect(compaction.moved == 26...49)
        try log.removeConsumer("late")

        // More commits: checkpoints are thinned, the base is kept.
        try commitWorkload(log, 62...120)
        try log.read { (reader: borrowing LogReader) throws in
            let checkpoints = try reader.checkpoints()
            #expect(checkpoints.first == 25)
            #expect(checkpoints.count == 5)  // the base and maximumCheckpoints (4) others
        }
        #expect(try log.verify().isClean)

        // A second purge starts from a checkpoint, removes whole segments and the old base.
        let now = try log.read { try $0.currentState() }
        let asOf100 = try log.read { reader in try reader.state(asOf: 100) }
        let second = try log.purge(through: 100, author: "ops")
        #expect(second.removedEvents == 26...100)
        #expect(second.segmentsRemoved == ["00000000000000000026-00000000000000000049.zst"])
        #expect(second.checkpointsRemoved.contains(25))
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.currentState() == now)
            #expect(try reader.state(asOf: 100) == asOf100)
            #expect(try reader.segments().isEmpty)
            #expect(try reader.compactedThrough == 100)
        }
        let verification = try log.verify()
        #expect(verification.isClean, "\(verification.problems)")

        // Purging at or below the point again does nothing.
        let again = try log.purge(through: 90, author: "ops")
        #expect(again.removedEvents == nil)
        #expect(again.markerSequence == nil)
        #expect(throws: LogError.sequenceOutOfRange(requested: 1_000, head: try log.head)) {
            try log.purge(through: 1_000, author: "ops")
        }

        // Reopened, the store is still whole.
        let path = log.path
        let reopened = try EventLog(openingExistingAt: path, readOnly: false)
        #expect(try reopened.read { try $0.currentState() } == now)
    }

    @Test("purge keeps a dictionary segment readable when it rewrites it")
    func purgeDictionarySegment() throws {
        let dir = try TemporaryDirectory()
        let log = try purgeStore(dir, transactions: 150)
        var request = CompactionRequest(before: 141)
        request.usesDictionary = true
        request.eventsPerFrame = 16
        let compaction = try log.compact(request)
        let dictionary = try #require(compaction.dictionaryFile)
        let events = try log.read { reader in try (71...150).map { try reader.event(UInt64($0)) } }
        let report = try log.purge(through: 70, author: "ops")
        #expect(report.segmentRewritten == "00000000000000000071-00000000000000000140.zst")
        #expect(FileManager.default.fileExists(atPath: dictionary))
        #expect(try log.segments().first?.dictionaryFileName == (dictionary as NSString).lastPathComponent)
        #expect(try log.read { reader in try (71...150).map { try reader.event(UInt64($0)) } } == events)
        let verification = try log.verify()
        #expect(verification.isClean, "\(verification.problems)")
    }

    @Test("verify reports a missing base snapshot")
    func missingBase() throws {
        let dir = try TemporaryDirectory()
        let log = try purgeStore(dir, transactions: 30)
        try log.purge(through: 12, author: "ops")
        #expect(try log.verify().isClean)
        // Damage: remove the base checkpoint's rows behind the log's back.
        try log.environment.write { txn in
            var keys: [[UInt8]] = []
            try txn.forEach(in: log.tables.checkpoints, range: .prefix([0, 0, 0, 0, 0, 0, 0, 12])) { key, _ in
                keys.append(key.withUnsafeBytes { Array($0) })
                return .next
            }
            for key in keys { try txn.delete(key: key, in: log.tables.checkpoints) }
        }
        let report = try log.verify()
        #expect(report.problems.contains { $0.kind == .base && $0.location == "checkpoint 12" })
    }

    /// The purge's set-aside files in `log`'s segment directory.
    func setAsideFiles(_ log: EventLog) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: log.segmentDirectory)) ?? []).filter { $0.hasPrefix(".purged-") }.sorted()
    }

    @Test("a reader whose snapshot is older than a purge still reads the segment files it dropped; they go once no such reader is left")
    func purgeKeepsDroppedFilesForOlderReaders() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store")
        do {
            let log = try purgeStore(dir)
            try log.compact(CompactionRequest(before: 21))  // segment 1…20
            try log.compact(CompactionRequest(before: 35))  // segment 21…34
            let expected = try log.read { reader in try (1...34).map { try reader.event(UInt64($0)) } }
            let outcome = Mutex<Result<PurgeReport, any Error>?>(nil)
            try log.read { (reader: borrowing LogReader) throws in
                // Another thread purges through 25 while this snapshot is open.
                let done = DispatchSemaphore(value: 0)
                Thread {
                    let result = Result { try log.purge(through: 25, author: "retention", contextName: "maintenance") }
                    outcome.withLock { $0 = result }
                    done.signal()
                }.start()
                done.wait()
                let report = try #require(outcome.withLock { $0 }).get()
                #expect(report.segmentsRemoved == ["00000000000000000001-00000000000000000020.zst"])
                #expect(report.segmentRewritten == "00000000000000000026-00000000000000000034.zst")
                // Both dropped files are set aside, not deleted: this reader may need them.
                let aside = setAsideFiles(log)
                #expect(aside.count == 2, "\(aside)")
                #expect(aside.allSatisfy { $0.hasSuffix("00000000000000000020.zst") || $0.hasSuffix("00000000000000000034.zst") })
                // The old snapshot reads every event it saw, the purged ones included.
                let events = try (1...34).map { try reader.event(UInt64($0)) }
                #expect(events == expected)
            }
            // No reader is that old any more: the next sweep deletes them.
            try log.read { (reader: borrowing LogReader) throws in
                // A reader newer than the purge doesn't hold them back, and sees the purge.
                log.sweepSetAsideSegments()
                #expect(setAsideFiles(log).isEmpty)
                #expect(throws: LogError.self) { try reader.event(10) }
                #expect(try reader.event(30) == expected[29])
            }
            #expect(try log.verify().problems.isEmpty)
        }

        // A set-aside file left behind (a reader still open when the process died) is
        // deleted at the next writable open, and one named by no purge stays a plain orphan.
        do {
            let log = try EventLog(openingExistingAt: path, readOnly: false)
            let live = try #require(try log.segments().first?.fileName)
            let source = (log.segmentDirectory as NSString).appendingPathComponent(live)
            let stray = (log.segmentDirectory as NSString).appendingPathComponent(SegmentReader.setAsideName(live, droppedBy: 1))
            try FileManager.default.copyItem(atPath: source, toPath: stray)
            #expect(setAsideFiles(log).count == 1)
        }
        let reopened = try EventLog(openingExistingAt: path, readOnly: false)
        #expect(setAsideFiles(reopened).isEmpty)
        #expect(try reopened.verify().problems.isEmpty)
    }

    /// The race `SnapshotWhileWritingTests.verifyWhileWriting` once lost: a reader found the
    /// segment under its own name, the purge set it aside, then the reader opened the name it
    /// had found — gone (`cannot read …-00000000000000000076.zst: No such file or directory`),
    /// so `verify` reported false damage. A reader now opens the file once, when it is made,
    /// and reads every frame through that descriptor, whatever becomes of the name. Here the
    /// set-aside file is even moved out of the directory after the purge, so no lookup by name
    /// could find it: only the open file stands between the reader and its events.
    @Test("a segment reader reads every frame of the file it opened, though a purge sets the file aside between its reads")
    func segmentReaderKeepsItsFileAcrossAPurge() throws {
        let dir = try TemporaryDirectory()
        let log = try purgeStore(dir)
        var request = CompactionRequest(before: 55)  // segment 1…54, frames of 8 events
        request.eventsPerFrame = 8
        try log.compact(request)
        let expected = try log.read { reader in try (1...54).map { try reader.event(UInt64($0)) } }
        let outcome = Mutex<Result<PurgeReport, any Error>?>(nil)
        try log.read { (reader: borrowing LogReader) throws in
            let descriptor = try #require(try reader.segmentDescriptors().first)
            #expect(descriptor.fileName == "00000000000000000001-00000000000000000054.zst")
            let segmentReader = try SegmentReader(descriptor, directory: log.segmentDirectory, snapshot: reader.txn.id)
            var events: [TransactionEvent] = []
            func readFrames(_ frames: Range<Int>) throws {
                for index in frames {
                    for bytes in try segmentReader.events(inFrame: index) {
                        events.append(try bytes.withUnsafeBytes { try EventCodec.decode($0, catalog: log.catalog, context: "frame \(index)") })
                    }
                }
            }
            try readFrames(0..<5)  // events 1…40

            // Another thread purges through 40: the segment is rewritten as 41…54 and its
            // old file set aside, while this reader is between two frames.
            let done = DispatchSemaphore(value: 0)
            Thread {
                let result = Result { try log.purge(through: 40, author: "retention") }
                outcome.withLock { $0 = result }
                done.signal()
            }.start()
            done.wait()
            let report = try #require(outcome.withLock { $0 }).get()
            #expect(report.segmentRewritten == "00000000000000000041-00000000000000000054.zst")
            let aside = setAsideFiles(log)
            #expect(aside.count == 1 && aside.allSatisfy { $0.hasSuffix("-" + descriptor.fileName) }, "\(aside)")
            for name in aside {
                try FileManager.default.moveItem(
                    atPath: (log.segmentDirectory as NSString).appendingPathComponent(name), toPath: dir.file("moved-\(name)"))
            }

            try readFrames(5..<descriptor.frames.count)  // events 41…54, from the file opened before the purge
            #expect(events == expected)
        }
    }
}
