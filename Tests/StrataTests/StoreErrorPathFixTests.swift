import Foundation
import Strata
@testable import StrataLog
import StrataStorage
import StrataTestSupport
import Testing

/// How a test damages a compacted segment file.
private enum SegmentDamage: String, CaseIterable, Sendable {
    /// The file is gone.
    case missing
    /// The file is cut to half its size.
    case truncated
    /// Every byte after zstd's magic number is inverted: its frames don't decode.
    case garbled

    func apply(to path: String) throws {
        switch self {
        case .missing:
            try FileManager.default.removeItem(atPath: path)
        case .truncated:
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: path))
        case .garbled:
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            for index in bytes.indices.dropFirst(4) { bytes[index] ^= 0xFF }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
        }
    }
}

/// A store where Team "v1" (transaction 1) was renamed "v2" … "v6" (transactions 2…6), one
/// save each, and events 1…5 compacted into one segment, whose path is returned.
private func compactedRenames(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, ManagedObjectID, String) {
    let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
    let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        let team = try context.insertNewObject(forEntityName: "Team")
        team.setValue("v1", forKey: "name")
        try context.save()
        for version in 2...6 {
            team.setValue("v\(version)", forKey: "name")
            try context.save()
        }
        return team.objectID
    }
    let log = try #require(coordinator.persistentStores.first).log
    let report = try log.compact(CompactionRequest(before: 6))
    #expect(report.moved == 1...5)
    return (coordinator, id, try #require(report.segmentFile))
}

/// The error `body` threw, or nil (recorded as an issue) when it threw none.
private func thrown(_ what: String, _ body: () throws -> Void) -> (any Error)? {
    do {
        try body()
        Issue.record("\(what) didn't fail")
        return nil
    } catch {
        return error
    }
}

/// Checks that `error` is ``ContextError/store(_:)`` (256, Cocoa domain) and that its text
/// names `file`.
private func expectStoreError(_ error: (any Error)?, naming file: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
    guard let error else { return }
    guard let contextError = error as? ContextError, case .store(let text, _) = contextError else {
        Issue.record("\(what): not ContextError.store but \(type(of: error)): \(error)", sourceLocation: sourceLocation)
        return
    }
    let nsError = error as NSError
    #expect(nsError.domain == NSCocoaErrorDomain && nsError.code == 256, "\(what): \(nsError.domain) \(nsError.code)", sourceLocation: sourceLocation)
    #expect(text.contains(file), "\(what): the message doesn't name \(file): \(text)", sourceLocation: sourceLocation)
}

/// Session 31 (helper 6): store errors on the read paths reach the app as the context's
/// error (`ContextError.store`, 256) naming the file; the segment-swap check of spec 0004
/// §7.4 tested deterministically.
@Suite("Session 31: store errors on the context's read paths, frames that line up in a swapped segment", .serialized)
struct StoreErrorPathFixTests {
    // MARK: - 1. A compacted segment that is damaged or missing, read through a context

    @Test(
        "a context read that needs a damaged or missing compacted segment — revert of a compacted transaction, a fetch, a count, fetchObjectIDs or existingObject pinned to an older query generation — throws ContextError.store (256) naming the segment file (before: the log's LogError escaped); nothing committed is lost: the current state reads, a save goes through, and with the file put back everything reads again"
    )
    func damagedSegmentReadsAreContextErrors() async throws {
        for damage in SegmentDamage.allCases {
            let dir = try TemporaryDirectory()
            let (coordinator, teamID, segmentPath) = try await compactedRenames(dir)
            let store = try #require(coordinator.persistentStores.first)
            let fileName = (segmentPath as NSString).lastPathComponent
            let kept = try Data(contentsOf: URL(fileURLWithPath: segmentPath))
            try damage.apply(to: segmentPath)
            let label = "\(damage.rawValue) segment"

            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let error = thrown("revert of compacted transaction 3 (\(label))") {
                    try context.revertTransaction(at: HistoryToken(storeIdentifier: store.identifier, sequence: 3))
                }
                expectStoreError(error, naming: fileName, "revertTransaction (\(label))")
                let changed = context.hasChanges
                #expect(!changed, "a failed revert changed nothing")
            }
            // Pinned to transaction 2: the state then is read back from the head through
            // the compacted events 3…5.
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                try context.setQueryGenerationFrom(QueryGenerationToken(storeIdentifier: store.identifier, sequence: 2))
                let request = FetchRequest(entityName: "Team")
                expectStoreError(thrown("pinned fetch (\(label))") { _ = try context.fetch(request) }, naming: fileName, "pinned fetch (\(label))")
                expectStoreError(thrown("pinned count (\(label))") { _ = try context.count(for: request) }, naming: fileName, "pinned count (\(label))")
                expectStoreError(
                    thrown("pinned fetchObjectIDs (\(label))") { _ = try context.fetchObjectIDs(request) }, naming: fileName,
                    "pinned fetchObjectIDs (\(label))")
                expectStoreError(
                    thrown("pinned existingObject (\(label))") { _ = try context.existingObject(with: teamID) }, naming: fileName,
                    "pinned existingObject (\(label))")
            }
            // The history API throws its own error for a damaged log, HistoryError.store (spec
            // 0009 §2, since session 32; before, the log's LogError): it names the file too.
            do {
                _ = try coordinator.history(.object(teamID))
                Issue.record("history of a damaged segment (\(label)) didn't fail")
            } catch {
                let isStoreError = if case .store(_, let underlying) = error as? HistoryError { underlying.error is LogError } else { false }
                #expect(isStoreError && "\(error)".contains(fileName), "history (\(label)): \(type(of: error)) \(error)")
            }

            // Nothing committed is lost: the current state reads and a save goes through.
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let team = try context.existingObject(with: teamID)
                #expect(team.value(forKey: "name") as? String == "v6")
                team.setValue("v7", forKey: "name")
                try context.save()
            }
            #expect(try store.log.head == 7)
            #expect(!(try store.log.verify().isClean), "verify reports the \(label)")
            try kept.write(to: URL(fileURLWithPath: segmentPath))
            let history = try coordinator.history(.object(teamID))
            #expect(history.map(\.token.sequence) == Array(1...7), "\(label), put back: \(history.map(\.token.sequence))")
            #expect(try store.log.verify().isClean, "\(label), put back")
        }
    }

    @Test(
        "a merge of other writers' transactions that were compacted into a damaged segment meanwhile throws ContextError.store (256) naming the file (before: the log's LogError escaped mergeStoreChanges())"
    )
    func mergeOfDamagedSegmentIsContextError() async throws {
        for damage in SegmentDamage.allCases {
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
            let store = try #require(coordinator.persistentStores.first)
            let merging = privateContext(coordinator)
            let teamID = try await merging.perform { (context: isolated ManagedObjectContext) throws in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("v1", forKey: "name")
                try context.save()
                return team.objectID
            }
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let team = try context.existingObject(with: teamID)
                for version in 2...6 {
                    team.setValue("v\(version)", forKey: "name")
                    try context.save()
                }
            }
            let report = try store.log.compact(CompactionRequest(before: 6))
            let segmentPath = try #require(report.segmentFile)
            let fileName = (segmentPath as NSString).lastPathComponent
            try damage.apply(to: segmentPath)
            try await merging.perform { (context: isolated ManagedObjectContext) throws in
                let error = thrown("merge (\(damage.rawValue))") { _ = try context.mergeStoreChanges() }
                expectStoreError(error, naming: fileName, "mergeStoreChanges (\(damage.rawValue) segment)")
            }
        }
    }

    // MARK: - 2. Swapped segment files whose frames line up (spec 0004 §7.4)

    @Test(
        "two segment files swapped whose frames line up (made so deterministically: each manifest entry given the other file's frame offsets and lengths, so every frame decodes): one event, a range, events among sequences, a header-filtered scan and a context's revert each refuse naming the file, the frame and the event found, never handing out another transaction as the one asked for; verify names both segments; put back, everything reads as before"
    )
    func swappedSegmentsWithFramesLinedUp() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let store = try #require(coordinator.persistentStores.first)
        let log = store.log
        let teamID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("t00", forKey: "name")
            try context.save()
            // Names of one length: every event of both segments has the same shape.
            for version in 1..<60 {
                team.setValue(String(format: "t%02d", version), forKey: "name")
                try context.save()
            }
            return team.objectID
        }
        var request = CompactionRequest(before: 31)
        request.eventsPerFrame = 8
        let first = try log.compact(request)
        request.before = 61
        let second = try log.compact(request)
        #expect(first.moved == 1...30 && second.moved == 31...60)
        let before = try log.read { reader in
            var events: [TransactionEvent] = []
            try reader.forEachEvent { event in
                events.append(event)
                return .next
            }
            return events
        }
        let (a, b) = try log.read { reader in
            let entries = try reader.segmentDescriptors()
            return (entries[0], entries[1])
        }
        #expect(a.frames.map { $0.last - $0.first } == b.frames.map { $0.last - $0.first }, "both segments' frames hold as many events")
        let pathA = try #require(first.segmentFile)
        let pathB = try #require(second.segmentFile)
        func swapFiles() throws {
            try FileManager.default.moveItem(atPath: pathA, toPath: pathA + ".swap")
            try FileManager.default.moveItem(atPath: pathB, toPath: pathA)
            try FileManager.default.moveItem(atPath: pathA + ".swap", toPath: pathB)
        }
        /// `entry` with `other`'s frame layout: the coincidence of two files whose frames line up.
        func lined(_ entry: SegmentDescriptor, like other: SegmentDescriptor) -> SegmentDescriptor {
            SegmentDescriptor(
                fileName: entry.fileName, first: entry.first, last: entry.last, rawBytes: other.rawBytes,
                compressedBytes: other.compressedBytes, dictionaryFileName: nil,
                frames: zip(entry.frames, other.frames).map { mine, theirs in
                    SegmentDescriptor.Frame(
                        first: mine.first, last: mine.last, offset: theirs.offset, compressedLength: theirs.compressedLength,
                        rawLength: theirs.rawLength)
                })
        }
        func putManifest(_ x: SegmentDescriptor, _ y: SegmentDescriptor) throws {
            try log.environment.write { txn in
                try txn.put(x.encoded(), forKey: bigEndianBytes(x.first), in: log.tables.segments)
                try txn.put(y.encoded(), forKey: bigEndianBytes(y.first), in: log.tables.segments)
            }
        }
        try swapFiles()
        try putManifest(lined(a, like: b), lined(b, like: a))

        /// Checks that `body` fails naming `file` and the event it found there instead.
        func expectRefused(_ what: String, naming file: String, found: UInt64, _ body: (borrowing LogReader) throws -> Void) {
            do {
                try log.read { reader in try body(reader) }
                Issue.record("\(what) read a swapped file without an error")
            } catch {
                let text = "\(error)"
                #expect(error is LogError && text.contains(file) && text.contains("found \(found)"), "\(what): \(text)")
            }
        }
        expectRefused("event 12", naming: a.fileName, found: 39) { reader in _ = try reader.event(12) }
        expectRefused("event 45", naming: b.fileName, found: 9) { reader in _ = try reader.event(45) }
        expectRefused("events 1…60", naming: a.fileName, found: 31) { reader in try reader.forEachEvent { _ in .next } }
        expectRefused("events among 5, 40", naming: a.fileName, found: 35) { reader in
            try reader.forEachEvent(among: [5, 40]) { _ in .next }
        }
        expectRefused("a header-filtered scan", naming: a.fileName, found: 31) { reader in
            try reader.forEachEvent(from: 1, where: { $0.sequence % 2 == 0 }) { _ in .next }
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let error = thrown("revert of transaction 12 read from a swapped file") {
                try context.revertTransaction(at: HistoryToken(storeIdentifier: store.identifier, sequence: 12))
            }
            expectStoreError(error, naming: a.fileName, "revert of transaction 12")
            let changed = context.hasChanges
            #expect(!changed, "a failed revert changed nothing")
        }
        let report = try log.verify()
        #expect(report.problems.contains { $0.location.contains(a.fileName) }, "\(report.problems)")
        #expect(report.problems.contains { $0.location.contains(b.fileName) }, "\(report.problems)")

        // Put back, nothing was lost.
        try swapFiles()
        try putManifest(a, b)
        let after = try log.read { reader in
            var events: [TransactionEvent] = []
            try reader.forEachEvent { event in
                events.append(event)
                return .next
            }
            return events
        }
        #expect(after == before)
        #expect(try log.verify().isClean)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "t59")
        }
    }

    // MARK: - 3. History errors as Core Data's NSErrors

    @Test(
        "a history error as NSError is Core Data's: purged history is NSCocoaErrorDomain 134301 (NSPersistentHistoryTokenExpiredError), another store's token 134060, a token past the head 134091, each with its description (before: domain Strata.HistoryError and the case's index as the code)"
    )
    func historyErrorsBridgeToCocoaErrors() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, _) = try await compactedRenames(dir)
        let store = try #require(coordinator.persistentStores.first)
        try coordinator.purgeHistory(before: HistoryToken(storeIdentifier: store.identifier, sequence: 3), author: "ops")
        let cases: [(String, HistoryToken, Int, String)] = [
            ("purged", HistoryToken(storeIdentifier: store.identifier, sequence: 1), 134301, "purged"),
            ("foreign", HistoryToken(storeIdentifier: UUID(), sequence: 1), 134060, "belongs to store"),
            ("ahead", HistoryToken(storeIdentifier: store.identifier, sequence: 99), 134091, "past the store's head"),
        ]
        for (label, token, code, text) in cases {
            do {
                _ = try coordinator.history(.after(token))
                Issue.record("\(label): no error")
            } catch {
                #expect(error is HistoryError, "\(label): \(type(of: error)) \(error)")
                let nsError = error as NSError
                #expect(nsError.domain == NSCocoaErrorDomain && nsError.code == code, "\(label): \(nsError.domain) \(nsError.code)")
                #expect(nsError.localizedDescription.contains(text), "\(label): \(nsError.localizedDescription)")
            }
        }
    }
}
