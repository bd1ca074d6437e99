import Foundation
import Strata
@testable import StrataLog
import StrataStorage
import StrataTestSupport
import Testing

/// How a test damages a store for the history API: a compacted segment file (missing, cut
/// short) or a raw event (one bit flipped).
private enum HistoryDamage: String, CaseIterable, Sendable {
    /// The segment file holding events 1…5 is gone.
    case missingSegment = "missing segment"
    /// The segment file is cut to half its size.
    case truncatedSegment = "truncated segment"
    /// One bit of raw event 7's stored bytes is flipped (its checksum no longer matches).
    /// Transaction 7 is the rename to "v7".
    case flippedRawEvent = "bit-flipped raw event"

    /// What the error must name: the segment file's name, or the damaged event.
    func named(segmentFile: String) -> String {
        switch self {
        case .missingSegment, .truncatedSegment: segmentFile
        case .flippedRawEvent: "event 7"
        }
    }

    /// A point whose state, read forward from the start or back from the head (whichever
    /// the as-of plan picks), needs the damaged events: 2 for the segment of 1…5, 6 for raw
    /// event 7 (back from the head through 8 and 7).
    var asOfPoint: UInt64 {
        switch self {
        case .missingSegment, .truncatedSegment: 2
        case .flippedRawEvent: 6
        }
    }

    func apply(segmentPath: String, log: EventLog) throws {
        switch self {
        case .missingSegment:
            try FileManager.default.removeItem(atPath: segmentPath)
        case .truncatedSegment:
            let bytes = try Data(contentsOf: URL(fileURLWithPath: segmentPath))
            try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: segmentPath))
        case .flippedRawEvent:
            // The event's only chunk: sequence · chunk 0 (spec 0004 §3.4).
            let key = bigEndianBytes(UInt64(7)) + [0, 0, 0, 0]
            try log.environment.write { txn in
                guard var value = try txn.value(forKey: key, in: log.tables.events) else {
                    throw LogError.malformed("test: no raw event 7")
                }
                // In the changes, before the checksum (the last 4 bytes): the header still reads.
                value[value.count - 6] ^= 0x10
                try txn.put(value, forKey: key, in: log.tables.events)
            }
        }
    }
}

/// A store where Team "v1" (transaction 1) was renamed "v2" … "v8" (transactions 2…8), one
/// save each, events 1…5 compacted into one segment (its path returned), and a consumer
/// "indexer" registered at 0 afterwards (so it reads the compacted history).
private func damagedHistoryStore(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, ManagedObjectID, String) {
    let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
    let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        let team = try context.insertNewObject(forEntityName: "Team")
        team.setValue("v1", forKey: "name")
        try context.save()
        for version in 2...8 {
            team.setValue("v\(version)", forKey: "name")
            try context.save()
        }
        return team.objectID
    }
    let log = try #require(coordinator.persistentStores.first).log
    let report = try log.compact(CompactionRequest(before: 6))
    #expect(report.moved == 1...5)
    _ = try coordinator.historyConsumer(named: "indexer")
    return (coordinator, id, try #require(report.segmentFile))
}

/// The error `body` threw, or nil (recorded as an issue) when it threw none.
private func thrown(_ what: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) -> (any Error)? {
    do {
        try body()
        Issue.record("\(what) didn't fail", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

private func thrown(_ what: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async -> (any Error)? {
    do {
        try await body()
        Issue.record("\(what) didn't fail", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

/// Checks that `error` is ``HistoryError/store(_:underlying:)``: a Cocoa error (256) whose
/// text names `name`, keeping the log's own error reachable (as the case's `underlying` and
/// as `NSUnderlyingErrorKey`).
private func expectHistoryStoreError(
    _ error: (any Error)?, naming name: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
) {
    guard let error else { return }
    guard let historyError = error as? HistoryError, case .store(let failure, let underlying) = historyError else {
        Issue.record("\(what): not HistoryError.store but \(type(of: error)): \(error)", sourceLocation: sourceLocation)
        return
    }
    #expect(historyError.code == 256, "\(what)", sourceLocation: sourceLocation)
    let nsError = error as NSError
    #expect(nsError.domain == NSCocoaErrorDomain && nsError.code == 256, "\(what): \(nsError.domain) \(nsError.code)", sourceLocation: sourceLocation)
    #expect(nsError.localizedDescription == historyError.description, "\(what)", sourceLocation: sourceLocation)
    #expect(historyError.description.contains(name), "\(what): the message doesn't name \(name): \(historyError)", sourceLocation: sourceLocation)
    #expect(historyError.description.hasPrefix(failure), "\(what): \(historyError)", sourceLocation: sourceLocation)
    // The log's own error is kept, not only its text.
    #expect(underlying.error is LogError, "\(what): underlying \(type(of: underlying.error))", sourceLocation: sourceLocation)
    #expect("\(underlying.error)".contains(name), "\(what): underlying \(underlying.error)", sourceLocation: sourceLocation)
    #expect(historyError.description.contains("\(underlying.error)"), "\(what): \(historyError)", sourceLocation: sourceLocation)
    #expect(nsError.userInfo[NSUnderlyingErrorKey] != nil, "\(what): no NSUnderlyingErrorKey", sourceLocation: sourceLocation)
}

/// Session 32 (helper 3): a damaged log reaches the history API's callers as the history
/// API's own error, and `strata compact` says what it did before a step gave up.
@Suite("Session 32: history errors over a damaged log; compact's report when a later step gives up", .serialized)
struct HistoryErrorFixTests {
    // MARK: - 1. The history API over a damaged log

    @Test(
        "every history read — coordinator.history, context.fetchHistory, historySnapshot, a feed's next(), a consumer's nextBatch and feed, a purge whose base snapshot needs the damage — over a missing segment, a truncated segment or a bit-flipped raw event throws HistoryError.store (Cocoa 256) naming the file or the event, with the log's LogError kept as the underlying error (before: the raw LogError escaped); reads not needing the damage go on"
    )
    func damagedLogGivesHistoryErrors() async throws {
        for damage in HistoryDamage.allCases {
            let dir = try TemporaryDirectory()
            let (coordinator, teamID, segmentPath) = try await damagedHistoryStore(dir)
            let store = try #require(coordinator.persistentStores.first)
            let name = damage.named(segmentFile: (segmentPath as NSString).lastPathComponent)
            let label = damage.rawValue
            try damage.apply(segmentPath: segmentPath, log: store.log)
            func token(_ sequence: UInt64) -> HistoryToken { HistoryToken(storeIdentifier: store.identifier, sequence: sequence) }

            expectHistoryStoreError(thrown("history (\(label))") { _ = try coordinator.history(HistoryRequest()) }, naming: name, "history (\(label))")
            expectHistoryStoreError(
                thrown("history by object (\(label))") { _ = try coordinator.history(.object(teamID)) }, naming: name,
                "history by object (\(label))")
            var byAuthor = HistoryRequest()
            byAuthor.afterDate = Date(timeIntervalSince1970: 0)
            expectHistoryStoreError(
                thrown("history by date (\(label))") { _ = try coordinator.history(byAuthor) }, naming: name, "history by date (\(label))")
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let error = thrown("fetchHistory (\(label))") { _ = try context.fetchHistory(.entity("Team")) }
                expectHistoryStoreError(error, naming: name, "fetchHistory (\(label))")
            }
            expectHistoryStoreError(
                thrown("historySnapshot (\(label))") { _ = try coordinator.historySnapshot(at: token(damage.asOfPoint)) }, naming: name,
                "historySnapshot (\(label))")
            let feed = try coordinator.historyFeed(after: nil)
            let feedError = await thrown("feed (\(label))") {
                for try await _ in feed {}
            }
            expectHistoryStoreError(feedError, naming: name, "feed's next() (\(label))")

            let consumer = try coordinator.historyConsumer(named: "indexer")
            expectHistoryStoreError(thrown("nextBatch (\(label))") { _ = try consumer.nextBatch(limit: 100) }, naming: name, "nextBatch (\(label))")
            let consumerFeed = try consumer.feed()
            let consumerFeedError = await thrown("consumer feed (\(label))") {
                for try await _ in consumerFeed {}
            }
            expectHistoryStoreError(consumerFeedError, naming: name, "consumer's feed (\(label))")

            // Reads that don't need the damaged events go on.
            #expect(try coordinator.history(.after(token(7))).map(\.sequence) == [8], "\(label)")
            try consumer.markProcessed(through: token(7))
            #expect(try consumer.nextBatch().map(\.sequence) == [8], "\(label)")
            #expect(try coordinator.currentHistoryToken() == token(8))

            // A purge whose base snapshot needs the damaged segment refuses with the history
            // API's error, removing nothing; one through 6 reads events 1…6 only, so raw
            // event 7 stays, damaged, after the point.
            switch damage {
            case .missingSegment, .truncatedSegment:
                expectHistoryStoreError(
                    thrown("purge (\(label))") { _ = try coordinator.purgeHistory(before: token(2), author: "ops") }, naming: name,
                    "purgeHistory (\(label))")
                #expect(try store.log.read { try $0.purgedThrough } == 0)
            case .flippedRawEvent:
                #expect(try coordinator.purgeHistory(before: token(6), author: "ops").purgedThrough == 6)
                expectHistoryStoreError(
                    thrown("history after the purge (\(label))") { _ = try coordinator.history(.after(token(6))) }, naming: name,
                    "history after the purge (\(label))")
            }
        }
    }

    @Test(
        "the history calls that write — registering, marking and removing a consumer, a purge — on a store opened read-only throw HistoryError.store naming the store and saying it is read-only, the log's LogError underlying (before: the LogError itself); nothing is written"
    )
    func readOnlyStoreWritesAreHistoryErrors() async throws {
        let dir = try TemporaryDirectory()
        do {
            let (coordinator, _, _) = try await damagedHistoryStore(dir)
            _ = coordinator
        }
        let path = dir.file("store")
        let log = try EventLog(openingExistingAt: path, readOnly: true)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: log.model)
        let store = try coordinator.addPersistentStore(openedLog: log)
        func token(_ sequence: UInt64) -> HistoryToken { HistoryToken(storeIdentifier: store.identifier, sequence: sequence) }
        let readOnly = "is open read-only"
        func check(_ error: (any Error)?, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
            guard let error else { return }
            guard case .store(_, let underlying) = error as? HistoryError, case .log = underlying else {
                Issue.record("\(what): not HistoryError.store but \(type(of: error)): \(error)", sourceLocation: sourceLocation)
                return
            }
            #expect("\(error)".contains(path) && "\(error)".contains(readOnly), "\(what): \(error)", sourceLocation: sourceLocation)
            #expect((error as NSError).code == 256, sourceLocation: sourceLocation)
        }
        check(thrown("register") { _ = try coordinator.historyConsumer(named: "newcomer") }, "historyConsumer(named:)")
        let indexer = try coordinator.historyConsumer(named: "indexer")  // registered: nothing to write
        check(thrown("mark") { try indexer.markProcessed(through: token(3)) }, "markProcessed(through:)")
        check(thrown("remove") { try indexer.remove() }, "remove()")
        check(thrown("purge") { _ = try coordinator.purgeHistory(before: token(3), author: "ops") }, "purgeHistory(before:)")
        #expect(try coordinator.historyConsumers().map { $0.consumer.name } == ["indexer"])
        #expect(try indexer.processedToken() == token(0))
        #expect(try log.read { try $0.purgedThrough } == 0)
    }

    // MARK: - 2. `strata compact`: a later step that gives up

    /// A store at `path` of `count` transactions, each inserting a Blob of 8 KiB of random
    /// (incompressible) bytes, made and closed.
    static func blobStore(at path: String, count: Int) async throws {
        let model = try ManagedObjectModel {
            Entity("Blob") {
                Attribute("data", .binaryData)
            }
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: path))
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var random = SeededGenerator(seed: 0x5EED_0032)
            for _ in 0..<count {
                let blob = try context.insertNewObject(forEntityName: "Blob")
                blob.setValue(Data((0..<(8 << 10)).map { _ in UInt8(truncatingIfNeeded: random.next()) }), forKey: "data")
                try context.save()
            }
        }
    }

    static func strata(_ arguments: String...) throws -> ProcessResult {
        try strata(arguments)
    }

    static func strata(_ arguments: [String]) throws -> ProcessResult {
        try runProcess(BuildProducts.executable("strata"), arguments)
    }

    @Test(
        "strata compact --events-per-step N moves the range in steps of N events, one segment each, with the same report as one step; --events-per-step 0 is exit 64"
    )
    func compactInSteps() async throws {
        let dir = try TemporaryDirectory()
        let store = dir.file("store")
        try await Self.blobStore(at: store, count: 12)
        let result = try Self.strata("compact", store, "--before", "13", "--events-per-step", "5")
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("moved events 1…12 (12 events): "), "\(result.standardOutput)")
        #expect(result.standardOutput.contains("horizon 12, limited by the head of the log"), "\(result.standardOutput)")
        let segments = try FileManager.default.contentsOfDirectory(atPath: (store as NSString).appendingPathComponent("segments"))
            .filter { $0.hasSuffix(".zst") }.sorted()
        #expect(segments.count == 3, "\(segments)")
        let usage = try Self.strata("compact", store, "--events-per-step", "0")
        #expect(usage.status == 64, "\(usage.standardError)")
        #expect(usage.standardError.contains("--events-per-step must be at least 1, not 0"), "\(usage.standardError)")
    }

    @Test(
        "when a later step of strata compact fails (here: the disk fills while step 2 writes its segment), stdout says what the earlier steps moved and where it stopped, stderr names the failed step, the error, the events moved, the segment written and the point the store is compacted through, exit 1; the store verifies clean and a second run moves the rest (before: only the error, as if nothing had moved)"
    )
    func compactReportsEarlierStepsWhenALaterStepFails() async throws {
        guard let fs = try SmallFileSystem(kilobytes: 2048) else {
            print("skipped: needs root and permission to mount a tmpfs")
            return
        }
        let store = fs.file("store")
        try await Self.blobStore(at: store, count: 30)
        // Room for one step's segment (10 events of 8 KiB), not for two.
        try fs.fill(leaving: 120 << 10)
        let result = try Self.strata("compact", store, "--before", "31", "--events-per-step", "10")
        #expect(result.status == 1, "\(result.standardOutput)\n\(result.standardError)")
        let out = result.standardOutput
        let err = result.standardError
        #expect(out.contains("moved events 1…10 (10 events): "), "\(out)")
        #expect(out.contains("stopped at step 2: compacted through 10, short of horizon 30 (limited by the head of the log); events 11…30 were not moved"), "\(out)")
        let segment = SegmentDescriptor.fileName(first: 1, last: 10, suffix: "zst")
        #expect(err.contains("strata: step 2 (events 11…20) failed: "), "\(err)")
        #expect(err.contains("No space left on device"), "\(err)")
        #expect(
            err.contains(
                "The step before it completed and stays done: events 1…10 (10 events) were moved into 1 segment (segments/\(segment)), so the store is compacted through 10; events 11…30 are still in the raw log."
            ), "\(err)")
        #expect(FileManager.default.fileExists(atPath: (store as NSString).appendingPathComponent("segments/\(segment)")))
        // What it said is what the store holds.
        let verify = try Self.strata("verify", store)
        #expect(verify.status == 0, "\(verify.standardOutput)\n\(verify.standardError)")
        try fs.drain()
        let again = try Self.strata("compact", store, "--before", "31", "--events-per-step", "10")
        #expect(again.status == 0, "\(again.standardError)")
        #expect(again.standardOutput.contains("moved events 11…30 (20 events): "), "\(again.standardOutput)")
    }

    // MARK: - 3. The CLI's read commands over a damaged store

    @Test(
        "strata log (text, JSON, --object), replay (--to, --object, --diff, --step), export --at, query --at, revert --dry-run and verify over a missing segment, a truncated segment or a bit-flipped raw event: exit 1, never a crash, and the message names the segment file or the event"
    )
    func cliCommandsNameTheDamage() async throws {
        for damage in HistoryDamage.allCases {
            let dir = try TemporaryDirectory()
            let storePath = dir.file("store")
            let (segmentPath, uri): (String, String)
            do {
                let (coordinator, teamID, segment) = try await damagedHistoryStore(dir)
                try damage.apply(segmentPath: segment, log: try #require(coordinator.persistentStores.first).log)
                (segmentPath, uri) = (segment, teamID.uriRepresentation().absoluteString)
            }
            let name = damage.named(segmentFile: (segmentPath as NSString).lastPathComponent)
            for arguments in [
                ["log", storePath], ["log", storePath, "--object", uri], ["replay", storePath, "--to", "\(damage.asOfPoint)"],
                ["replay", storePath, "--object", uri], ["replay", storePath, "--diff", "\(damage.asOfPoint)..8"],
                ["export", storePath, "--at", "\(damage.asOfPoint)", "--format", "ndjson"], ["verify", storePath],
                ["query", storePath, "Team", "--at", "\(damage.asOfPoint)"], ["revert", storePath, "\(damage == .flippedRawEvent ? 7 : 3)", "--dry-run"],
                ["log", storePath, "--format", "json"], ["replay", storePath, "--step", "--to", "8"],
            ] {
                // --step reads Enter for each transaction: enough for all of them.
                let result = try runProcess(
                    BuildProducts.executable("strata"), arguments, input: arguments.contains("--step") ? String(repeating: "\n", count: 10) : nil)
                let command = "strata \(arguments[0]) \(arguments.dropFirst(2).joined(separator: " ")) (\(damage.rawValue))"
                #expect(result.status == 1, "\(command): exit \(result.status)\n\(result.standardOutput)\n\(result.standardError)")
                if arguments[0] == "verify" {
                    #expect(result.standardOutput.contains(name), "\(command): \(result.standardOutput)")
                } else {
                    let message = result.standardError.split(separator: "\n").last.map(String.init) ?? ""
                    #expect(message.hasPrefix("strata: ") && message.contains(name), "\(command): \(result.standardError)")
                }
            }
        }
    }

    @Test(
        "strata info over a missing or truncated segment file marks the segment DAMAGED naming the file and what is wrong (text, and JSON under the segment and \"damaged\"), and exits 1 (before: listed as whole, exit 0); an intact store is exit 0"
    )
    func infoNamesDamagedSegmentFiles() async throws {
        for damage in [HistoryDamage.missingSegment, .truncatedSegment] {
            let dir = try TemporaryDirectory()
            let storePath = dir.file("store")
            let segmentPath: String
            do {
                let (coordinator, _, segment) = try await damagedHistoryStore(dir)
                segmentPath = segment
                let intact = try Self.strata("info", storePath)
                #expect(intact.status == 0, "\(intact.standardError)")
                #expect(!intact.standardOutput.contains("DAMAGED"))
                try damage.apply(segmentPath: segment, log: try #require(coordinator.persistentStores.first).log)
            }
            let file = (segmentPath as NSString).lastPathComponent
            let what =
                damage == .missingSegment
                ? "segment \(file) (events 1…5) is missing from \(storePath)/segments"
                : "segment \(file) (events 1…5) is "
            let text = try Self.strata("info", storePath)
            #expect(text.status == 1, "\(damage.rawValue): \(text.standardOutput)")
            #expect(text.standardOutput.contains("\(file)  raw "), "\(damage.rawValue): \(text.standardOutput)")
            #expect(text.standardOutput.contains("DAMAGED: \(what)"), "\(damage.rawValue): \(text.standardOutput)")
            if damage == .truncatedSegment {
                #expect(text.standardOutput.contains(", the manifest says "), "\(text.standardOutput)")
            }
            #expect(text.standardError.contains("strata: the store is damaged: segment files can't be read"), "\(text.standardError)")
            let json = try Self.strata("info", storePath, "--format", "json")
            #expect(json.status == 1)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
            let segments = try #require(object["segments"] as? [[String: Any]])
            #expect((segments.first?["damage"] as? String)?.contains(what) == true, "\(segments)")
            #expect(((object["damaged"] as? [String: String])?["segment files"])?.contains(what) == true, "\(object)")
        }
    }

    @Test(
        "HistoryError.store bridges like the rest: Cocoa domain, code 256, the description as localizedDescription and the log's error under NSUnderlyingErrorKey; equal errors hash alike"
    )
    func storeErrorBridges() throws {
        let underlying = LogError.segment("cannot read segment file 00000001-00000005.zst: No such file or directory")
        let error = HistoryError.store("reading the history after 0 failed", underlying: .log(underlying))
        #expect(error.description == "reading the history after 0 failed: segment: cannot read segment file 00000001-00000005.zst: No such file or directory")
        let nsError = error as NSError
        #expect(nsError.domain == NSCocoaErrorDomain)
        #expect(nsError.code == 256)
        #expect(nsError.localizedDescription == error.description)
        let inner = try #require(nsError.userInfo[NSUnderlyingErrorKey] as? NSError)
        #expect(inner.localizedDescription.contains("00000001-00000005.zst"), "\(inner)")
        #expect(error == HistoryError.store("reading the history after 0 failed", underlying: .log(underlying)))
        #expect(Set([error, HistoryError.store("reading the history after 0 failed", underlying: .log(underlying))]).count == 1)
        guard case .store(_, let kept) = error else { return }
        #expect(kept.error as? LogError == underlying)
    }
}
