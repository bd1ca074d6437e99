import Foundation
import Strata
@testable import StrataLog
import StrataStorage
import StrataTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a test damages a store under a context: the compacted segment of events 1…5 goes, or
/// one bit of raw event 7 flips (its checksum no longer matches).
private enum Damage: String, CaseIterable, Sendable {
    case missingSegment = "missing segment"
    case flippedRawEvent = "bit-flipped raw event"

    /// What the error must name: the segment file's name, or the damaged event.
    func named(segmentFile: String) -> String {
        switch self {
        case .missingSegment: segmentFile
        case .flippedRawEvent: "event 7"
        }
    }

    /// A generation whose state needs the damaged events: 2 (read back from the head through
    /// the compacted 3…5), 6 (read back from the head through raw 8 and 7).
    var pinnedGeneration: UInt64 {
        switch self {
        case .missingSegment: 2
        case .flippedRawEvent: 6
        }
    }

    func apply(segmentPath: String, log: EventLog) throws {
        switch self {
        case .missingSegment:
            try FileManager.default.removeItem(atPath: segmentPath)
        case .flippedRawEvent:
            // The event's only chunk: sequence · chunk 0 (spec 0004 §3.4); a bit in the
            // changes, before the checksum (the last 4 bytes).
            let key = bigEndianBytes(UInt64(7)) + [0, 0, 0, 0]
            try log.environment.write { txn in
                guard var value = try txn.value(forKey: key, in: log.tables.events) else {
                    throw LogError.malformed("test: no raw event 7")
                }
                value[value.count - 6] ^= 0x10
                try txn.put(value, forKey: key, in: log.tables.events)
            }
        }
    }
}

/// Team "v1" (transaction 1) renamed "v2" … "v8" (2…8), one save each, by a context other
/// than `merging`, which saved only the insert and merged nothing since; events 1…5
/// compacted into one segment (its path returned).
private func renamedStore(_ dir: TemporaryDirectory) async throws
    -> (PersistentStoreCoordinator, ManagedObjectContext, ManagedObjectID, String)
{
    let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
    let merging = privateContext(coordinator)
    let id = try await merging.perform { (context: isolated ManagedObjectContext) throws in
        let team = try context.insertNewObject(forEntityName: "Team")
        team.setValue("v1", forKey: "name")
        try context.save()
        return team.objectID
    }
    try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        let team = try context.existingObject(with: id)
        for version in 2...8 {
            team.setValue("v\(version)", forKey: "name")
            try context.save()
        }
    }
    let log = try #require(coordinator.persistentStores.first).log
    let report = try log.compact(CompactionRequest(before: 6))
    #expect(report.moved == 1...5)
    return (coordinator, merging, id, try #require(report.segmentFile))
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

/// Checks that `error` is ``ContextError/store(_:underlying:)`` (Cocoa 256) keeping the
/// layer's error — of type `layer` and naming `name` — as `underlying`, and, as `NSError`,
/// under `NSUnderlyingErrorKey` with the layer's domain, code and text.
private func expectStoreError<Layer: Error>(
    _ error: (any Error)?, layer: Layer.Type, naming name: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
) {
    guard let error else { return }
    guard let contextError = error as? ContextError, case .store(let message, let underlying) = contextError else {
        Issue.record("\(what): not ContextError.store but \(type(of: error)): \(error)", sourceLocation: sourceLocation)
        return
    }
    guard let underlying else {
        Issue.record("\(what): ContextError.store without the layer's error: \(message)", sourceLocation: sourceLocation)
        return
    }
    #expect(underlying.error is Layer, "\(what): underlying \(type(of: underlying.error))", sourceLocation: sourceLocation)
    #expect(underlying.description.contains(name), "\(what): underlying \(underlying)", sourceLocation: sourceLocation)
    // The message is as it was: what failed, then the layer's own text.
    #expect(contextError.description == message && message.hasSuffix(underlying.description), "\(what): \(message)", sourceLocation: sourceLocation)
    let nsError = error as NSError
    #expect(nsError.domain == NSCocoaErrorDomain && nsError.code == 256, "\(what): \(nsError.domain) \(nsError.code)", sourceLocation: sourceLocation)
    #expect(nsError.localizedDescription == message, "\(what)", sourceLocation: sourceLocation)
    guard let inner = nsError.userInfo[NSUnderlyingErrorKey] as? NSError else {
        Issue.record("\(what): no NSUnderlyingErrorKey in \(nsError.userInfo)", sourceLocation: sourceLocation)
        return
    }
    let layerError = underlying.error as NSError
    #expect(inner.domain == layerError.domain && inner.code == layerError.code, "\(what): \(inner.domain) \(inner.code)", sourceLocation: sourceLocation)
    #expect(inner.localizedDescription == underlying.description, "\(what): \(inner.localizedDescription)", sourceLocation: sourceLocation)
    #expect(inner.localizedDescription.contains(name), "\(what): \(inner.localizedDescription)", sourceLocation: sourceLocation)
}

/// Session 32 (helper 7): `ContextError.store` keeps the layer's error as
/// `HistoryError.store` does; `strata compact` says the horizon it reached.
@Suite("Session 32: ContextError.store keeps the layer's error; compact's report when the horizon falls", .serialized)
struct StoreErrorUnderlyingFixTests {
    // MARK: - 1. ContextError.store keeps the layer's error

    @Test(
        "over a missing segment or a bit-flipped raw event, a pinned fetch, count and fetchObjectIDs, a fault fired by fulfillFault() and one fired by KVC (recorded, thrown by the next save) and mergeStoreChanges() throw ContextError.store whose underlying error is the log's LogError, bridged with it under NSUnderlyingErrorKey (its domain, code and text); the message is as before (before: only the text was kept)"
    )
    func damagedLogKeepsTheLayersError() async throws {
        for damage in Damage.allCases {
            let dir = try TemporaryDirectory()
            let (coordinator, merging, teamID, segmentPath) = try await renamedStore(dir)
            let store = try #require(coordinator.persistentStores.first)
            try damage.apply(segmentPath: segmentPath, log: store.log)
            let name = damage.named(segmentFile: (segmentPath as NSString).lastPathComponent)
            let label = damage.rawValue
            let generation = QueryGenerationToken(storeIdentifier: store.identifier, sequence: damage.pinnedGeneration)

            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                try context.setQueryGenerationFrom(generation)
                let request = FetchRequest(entityName: "Team")
                expectStoreError(thrown("fetch (\(label))") { _ = try context.fetch(request) }, layer: LogError.self, naming: name, "fetch (\(label))")
                expectStoreError(thrown("count (\(label))") { _ = try context.count(for: request) }, layer: LogError.self, naming: name, "count (\(label))")
                expectStoreError(
                    thrown("fetchObjectIDs (\(label))") { _ = try context.fetchObjectIDs(request) }, layer: LogError.self, naming: name,
                    "fetchObjectIDs (\(label))")
            }
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                try context.setQueryGenerationFrom(generation)
                let team = try context.object(with: teamID)
                expectStoreError(thrown("fulfillFault (\(label))") { try team.fulfillFault() }, layer: LogError.self, naming: name, "fulfillFault (\(label))")
            }
            // A fault fired by KVC can't throw: the failure is recorded and the next save
            // throws it, the layer's error kept alike.
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                try context.setQueryGenerationFrom(generation)
                let team = try context.object(with: teamID)
                _ = team.value(forKey: "name")
                expectStoreError(thrown("save after a KVC fault (\(label))") { try context.save() }, layer: LogError.self, naming: name, "save after a KVC fault (\(label))")
            }
            try await merging.perform { (context: isolated ManagedObjectContext) throws in
                expectStoreError(thrown("merge (\(label))") { _ = try context.mergeStoreChanges() }, layer: LogError.self, naming: name, "mergeStoreChanges (\(label))")
            }
        }
    }

    @Test(
        "a save into a read-only store throws ContextError.store with the log's LogError underlying, and into a store deleted while open with LMDB's LMDBError (STRATA_DATA_FILE_GONE) underlying, each under NSUnderlyingErrorKey; the messages are as before"
    )
    func saveKeepsTheLayersError() async throws {
        let dir = try TemporaryDirectory()
        do {
            let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                try context.insertNewObject(forEntityName: "Team").setValue("Otters", forKey: "name")
                try context.save()
            }
        }
        let path = dir.file("store")
        do {
            let log = try EventLog(openingExistingAt: path, readOnly: true)
            let coordinator = PersistentStoreCoordinator(managedObjectModel: log.model)
            try coordinator.addPersistentStore(openedLog: log)
            let error = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                try context.insertNewObject(forEntityName: "Team").setValue("Herons", forKey: "name")
                return thrown("save into a read-only store") { try context.save() }
            }
            expectStoreError(error, layer: LogError.self, naming: path, "save into a read-only store")
            #expect("\(error.map { "\($0)" } ?? "")".contains("read-only"))
        }

        let other = try TemporaryDirectory()
        let coordinator = try openCoordinator(other, model: try SeedModels.leagueManager)
        let storePath = other.file("store")
        try FileManager.default.removeItem(atPath: storePath)
        let error = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Team").setValue("Lost", forKey: "name")
            return thrown("save into a deleted store") { try context.save() }
        }
        expectStoreError(error, layer: LMDBError.self, naming: "STRATA_DATA_FILE_GONE", "save into a deleted store")
        #expect("\(error.map { "\($0)" } ?? "")".hasPrefix("the save failed and nothing was written: "))
    }

    @Test(
        "ContextError.store bridges like HistoryError.store: Cocoa 256, the message as localizedDescription, the layer's error under NSUnderlyingErrorKey; a store error with no layer's error behind it has none; both share StoreFailure (HistoryError.StoreFailure still names it)"
    )
    func storeErrorBridges() throws {
        let layer = LogError.segment("cannot read segment file 00000001-00000005.zst: No such file or directory")
        let error = ContextError.store("the fetch of Team failed: \(layer.description)", underlying: .log(layer))
        #expect(error.description == "the fetch of Team failed: segment: cannot read segment file 00000001-00000005.zst: No such file or directory")
        let nsError = error as NSError
        #expect(nsError.domain == NSCocoaErrorDomain && nsError.code == 256)
        #expect(nsError.localizedDescription == error.description)
        let inner = try #require(nsError.userInfo[NSUnderlyingErrorKey] as? NSError)
        #expect(inner.domain == (layer as NSError).domain && inner.code == (layer as NSError).code)
        #expect(inner.localizedDescription == layer.description)
        let history = HistoryError.store("reading the history failed", underlying: .log(layer))
        let historyInner = try #require((history as NSError).userInfo[NSUnderlyingErrorKey] as? NSError)
        #expect(historyInner.domain == inner.domain && historyInner.code == inner.code)
        #expect(historyInner.localizedDescription == inner.localizedDescription)
        let shared: HistoryError.StoreFailure = .log(layer)
        #expect(error == ContextError.store(error.description, underlying: shared))
        #expect(Set([error, ContextError.store(error.description, underlying: shared)]).count == 1)
        #expect(error != ContextError.store(error.description), "the underlying error is part of the value")
        let plain = ContextError.store("batch insert into Team: the commit gave Team/t1 no permanent ID")
        #expect((plain as NSError).userInfo[NSUnderlyingErrorKey] == nil)
        #expect((plain as NSError).code == 256)
        #expect(StoreFailure(layer) == .log(layer))
        #expect(StoreFailure(CocoaError(.fileNoSuchFile)) == nil)
    }

    // MARK: - 2. `strata compact` when the horizon falls between steps

    @Test(
        "strata compact whose horizon falls between steps (a consumer registered at 5 after it planned to move 1…10) stops there and says so: moved events 1…5, 'horizon 5, limited by consumer \"indexer\" (processed through 5): it fell from the planned 10 (limited by the head of the log) while compacting, so events 6…10 were not moved', exit 0 (before: it printed the planned horizon 10, as if everything below it had moved)"
    )
    func compactReportsTheHorizonReached() async throws {
        let dir = try TemporaryDirectory()
        do {
            let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let team = try context.insertNewObject(forEntityName: "Team")
                for version in 1...10 {
                    team.setValue("v\(version)", forKey: "name")
                    try context.save()
                }
            }
        }
        let path = dir.file("store")
        let log = try EventLog(openingExistingAt: path, readOnly: false)
        #expect(try log.head == 10)
        // The command's writable open removes a stranded temporary of `segments/` as its
        // last write: once it is gone, the command plans (reads only), then writes its
        // first progress line to standard error — a full pipe here, so it waits there.
        let segments = (path as NSString).appendingPathComponent("segments")
        try FileManager.default.createDirectory(atPath: segments, withIntermediateDirectories: true)
        let stranded = (segments as NSString).appendingPathComponent(".dat.nosync.stranded-by-a-test")
        try Data("x".utf8).write(to: URL(fileURLWithPath: stranded))
        let output = Pipe()
        let errors = Pipe()
        #expect(fillPipe(errors), "can't fill a pipe")
        let process = ChildProcess()
        process.executableURL = BuildProducts.executable("strata")
        process.arguments = ["compact", path, "--events-per-step", "2"]
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        var opened = false
        for _ in 0..<60_000 {
            if !FileManager.default.fileExists(atPath: stranded) {
                opened = true
                break
            }
            guard process.isRunning else { break }
            usleep(1_000)
        }
        #expect(opened, "the command's open didn't remove the stranded temporary")
        // Another process's consumer, registered at 5 in a write transaction held until the
        // command has planned (its first progress line): its steps, which take the writer
        // lock, see the consumer; its plan (1…10, horizon 10) didn't.
        var errorText = ""
        try log.environment.write { txn in
            try txn.put(bigEndianBytes(UInt64(5)), forKey: try EventLog.consumerKey("indexer"), in: log.tables.consumers)
            let reader = errors.fileHandleForReading
            while !errorText.trimmingCharacters(in: CharacterSet(charactersIn: ".")).contains("\n") {
                let data = reader.availableData
                if data.isEmpty { break }
                errorText += String(decoding: data, as: UTF8.self)
            }
        }
        errorText += String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let err = errorText.trimmingCharacters(in: CharacterSet(charactersIn: "."))
        #expect(process.terminationStatus == 0, "\(out)\n\(err)")
        #expect(err.contains("compacted 0/10 events (0%)"), "the plan was 1…10: \(err)")
        #expect(out.contains("moved events 1…5 (5 events): "), "\(out)")
        #expect(
            out.contains(
                "horizon 5, limited by consumer \"indexer\" (processed through 5): it fell from the planned 10 (limited by the head of the log) while compacting, so events 6…10 were not moved"
            ), "\(out)")
        #expect(!out.contains("horizon 10, limited by the head of the log"), "\(out)")
        #expect(try log.metadata.compactedThrough == 5)
    }
}

/// Fills `pipe` until a write would block: the next write of whoever holds its writing end
/// waits until the reading end is read.
private func fillPipe(_ pipe: Pipe) -> Bool {
    let descriptor = pipe.fileHandleForWriting.fileDescriptor
    let flags = fcntl(descriptor, F_GETFL)
    guard flags >= 0, fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) == 0 else { return false }
    defer { _ = fcntl(descriptor, F_SETFL, flags) }
    let chunk = [UInt8](repeating: UInt8(ascii: "."), count: 4096)
    while true {
        let written = chunk.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written < 0 { return errno == EAGAIN }
    }
}
