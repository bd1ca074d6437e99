import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The event log when its environment misbehaves: two handles on one store, a vacuum while
/// the store is open, a map that fills, a disk that fills.
@Suite("Environment review: the event log under a misbehaving environment")
struct EnvironmentReviewLogTests {
    func blobModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Blob") {
                Attribute("name", .string)
                Attribute("bytes", .binaryData)
            }
        }
    }

    func blobData(_ size: Int) -> Data {
        var generator = SeededGenerator(seed: UInt64(size))
        let words = (0..<(size + 7) / 8).map { _ in generator.next() }
        return words.withUnsafeBytes { Data($0.prefix(size)) }
    }

    func blobDraft(_ name: String, size: Int) -> (TransactionDraft, DraftObjectID) {
        var draft = TransactionDraft(author: "env-review")
        let id = draft.insert("Blob", values: ["name": s(name), "bytes": .attribute(.binaryData(blobData(size)))])
        return (draft, id)
    }

    @Test("two event logs on one store in one process share it: both commit, neither breaks the other's snapshot")
    func twoLogsOnOneStore() throws {
        let dir = try TemporaryDirectory()
        let first = try openLog(dir, model: try libraryModel())
        var draft = TransactionDraft(author: "first")
        _ = draft.insert("Club", values: ["name": s("Otters")])
        try first.commit(draft)
        try first.read { (reader: borrowing LogReader) throws in
            #expect(try reader.head == 1)
            do {
                let second = try openLog(dir, model: try libraryModel())
                for n in 0..<40 {
                    var more = TransactionDraft(author: "second")
                    _ = more.insert("Club", values: ["name": s("Club \(n)")])
                    try second.commit(more)
                }
                #expect(try second.head == 41)
            }
            // This snapshot is still the one it began with.
            #expect(try reader.head == 1)
        }
        #expect(try first.head == 41)
        #expect(try first.verify().isClean)
    }

    @Test("vacuum is refused while the store is open, so the open handle's commits aren't lost")
    func vacuumWhileOpen() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store")
        var head: UInt64 = 0
        do {
            let log = try openLog(dir, model: try libraryModel())
            for n in 0..<20 {
                var draft = TransactionDraft(author: "t")
                _ = draft.insert("Club", values: ["name": s("Club \(n)")])
                try log.commit(draft)
            }
            let vacuum = Result { try EventLog.vacuum(path: path) }
            // Before: the vacuum put a new file in place under the open handle, which went on
            // writing the old one: this commit vanished at the next open.
            var draft = TransactionDraft(author: "t")
            _ = draft.insert("Club", values: ["name": s("after the vacuum")])
            try log.commit(draft)
            head = try log.head
            guard case .failure(let error) = vacuum else {
                Issue.record("vacuum ran with the store open")
                return
            }
            #expect((error as? LMDBError)?.code == .incompatibleOpen, "\(error)")
            #expect("\(error)".contains("open in this process"), "\(error)")
        }
        _ = try EventLog.vacuum(path: path)
        let reopened = try openLog(dir, model: try libraryModel())
        #expect(try reopened.head == head)
        #expect(try reopened.head == 21)
        #expect(try reopened.verify().isClean)
    }

    @Test("a huge attribute value grows the map and commits; past the maximum it fails cleanly, naming the option")
    func hugeValueAndMapLimit() throws {
        // STRATA_HUGE_VALUE_BYTES=104857600 runs it with 100 MB.
        let size = ProcessInfo.processInfo.environment["STRATA_HUGE_VALUE_BYTES"].flatMap { Int($0) } ?? 6 << 20
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try blobModel()) { $0.initialMapSize = 1 << 20 }
        let (draft, object) = blobDraft("big", size: size)
        let result = try log.commit(draft)
        let id = try #require(result.permanentID(for: object))
        let stored = try log.read { (reader: borrowing LogReader) throws in try reader.object(id) }
        #expect(stored?["bytes"] == .attribute(.binaryData(blobData(size))))

        let limited = try TemporaryDirectory()
        let capped = try openLog(limited, model: try blobModel()) {
            $0.initialMapSize = 1 << 20
            $0.maximumMapSize = 2 << 20
        }
        try capped.commit(blobDraft("fits", size: 1000).0)
        let error = #expect(throws: (any Error).self) { try capped.commit(blobDraft("too big", size: 4 << 20).0) }
        #expect("\(error.map { "\($0)" } ?? "")".contains("maximumMapSize"))
        #expect(try capped.head == 1)
        try capped.commit(blobDraft("fits again", size: 1000).0)
        #expect(try capped.head == 2)
        #expect(try capped.verify().isClean)
    }

    @Test("more concurrent reads than the default reader table: a clear error by default, fine with maximumReaders")
    func manyConcurrentReaders() throws {
        func holdReads(_ count: Int, _ log: EventLog) -> [(any Error)?] {
            let release = DispatchSemaphore(value: 0)
            let started = DispatchSemaphore(value: 0)
            let results = ReadResults(count)
            for index in 0..<count {
                Thread.detachNewThread {
                    do {
                        try log.read { (reader: borrowing LogReader) throws in
                            _ = try reader.head
                            started.signal()
                            release.wait()
                        }
                    } catch {
                        results.set(index, error)
                        started.signal()
                    }
                    results.finish()
                }
            }
            for _ in 0..<count { started.wait() }
            for _ in 0..<count { release.signal() }
            results.waitForAll()
            return results.errors
        }
        let dir = try TemporaryDirectory()
        do {
            let log = try openLog(dir, model: try libraryModel())
            let errors = holdReads(140, log).compactMap { $0 }
            #expect(errors.count == 140 - 126)
            #expect(errors.allSatisfy { "\($0)".contains("MDB_READERS_FULL") && "\($0)".contains("maximumReaders") })
        }
        // Before: no way to size the table through the event log.
        let other = try TemporaryDirectory()
        let log = try openLog(other, model: try libraryModel()) { $0.maximumReaders = 200 }
        #expect(holdReads(140, log).compactMap { $0 }.isEmpty)
    }

    @Test(
        "a full disk fails commits, compaction and vacuum with ENOSPC and loses nothing committed",
        .enabled(if: getuid() == 0, "needs root to mount a small tmpfs"))
    func fullDisk() throws {
        let dir = try TemporaryDirectory()
        let mountPoint = dir.file("small")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        guard mount("tmpfs", mountPoint, "tmpfs", 0, "size=3m") == 0 else {
            // Containers may forbid mounts: nothing to test here then.
            return
        }
        defer { umount2(mountPoint, 2) }  // MNT_DETACH
        let path = (mountPoint as NSString).appendingPathComponent("store")
        var configuration = EventLog.Configuration()
        configuration.initialMapSize = 1 << 20
        var committed: [UInt64] = []
        var failure: (any Error)?
        do {
            let log = try EventLog(path: path, model: try blobModel(), configuration: configuration)
            for n in 0..<100 {
                do {
                    committed.append(try log.commit(blobDraft("blob \(n)", size: 100_000).0).sequence)
                } catch {
                    failure = error
                    break
                }
            }
            let error = try #require(failure)
            // Before: "mdb_txn_commit: Input/output error (EIO)" (LMDB's word for a short write).
            #expect((error as? LMDBError)?.code == .noSpace, "\(error)")
            #expect("\(error)".contains("No space left") && "\(error)".contains(path), "\(error)")
            #expect(try log.head == committed.last)
            // The store still reads, and verifies.
            #expect(try log.verify().isClean)
            // Compaction can't write its segment: an error, and the log is unchanged.
            let compaction = #expect(throws: (any Error).self) { try log.compact(CompactionRequest()) }
            #expect(compaction != nil)
            // Before: "There isn't enough space." naming no file.
            #expect(compaction.map { "\($0)" }?.contains("segments/.tmp-") == true, "\(String(describing: compaction))")
            #expect(compaction.map { "\($0)" }?.contains("No space left on device") == true, "\(String(describing: compaction))")
            #expect(try log.read { (reader: borrowing LogReader) throws in try reader.compactedThrough } == 0)
            #expect(try log.verify().isClean)
        }
        // Vacuum can't write its copy: an error, and data.mdb is the one it was.
        let dataFile = (path as NSString).appendingPathComponent("data.mdb")
        let before = try Data(contentsOf: URL(fileURLWithPath: dataFile))
        let vacuum = #expect(throws: (any Error).self) { _ = try EventLog.vacuum(path: path) }
        #expect(vacuum != nil)
        #expect(vacuum.map { "\($0)" }?.contains("ENOSPC") == true, "\(String(describing: vacuum))")
        #expect(try Data(contentsOf: URL(fileURLWithPath: dataFile)) == before)
        let reopened = try EventLog(path: path, model: try blobModel(), configuration: configuration)
        #expect(try reopened.head == committed.last)
        #expect(try reopened.verify().isClean)
    }
}

/// Errors of concurrent reads, by thread index.
final class ReadResults: @unchecked Sendable {
    // @unchecked: every access holds `lock`.
    private let lock = NSCondition()
    private var stored: [(any Error)?]
    private var finished = 0

    init(_ count: Int) { stored = Array(repeating: nil, count: count) }

    func set(_ index: Int, _ error: any Error) { lock.withLock { stored[index] = error } }

    func finish() {
        lock.withLock {
            finished += 1
            lock.broadcast()
        }
    }

    func waitForAll() {
        lock.lock()
        while finished < stored.count { lock.wait() }
        lock.unlock()
    }

    var errors: [(any Error)?] { lock.withLock { stored } }
}
