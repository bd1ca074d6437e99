import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Resource exhaustion, the 3 a.m. cases: a disk that fills during a replay into a new store,
/// a purge, a commit the space comes back for. After each: nothing committed is lost, the
/// error names what ran out and where, and the store is usable afterwards.
@Suite("Exhaustion review: full disks, full maps, missing permissions")
struct ExhaustionReviewTests {
    func noteModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Note") {
                Attribute("title", .string)
                Attribute("body", .string)
            }
        }
    }

    func noteDraft(_ n: Int, bodySize: Int = 900) -> TransactionDraft {
        var draft = TransactionDraft(author: "exhaustion")
        var generator = SeededGenerator(seed: UInt64(n))
        let body = String((0..<bodySize).map { _ in Character(Unicode.Scalar(UInt8(97 + generator.next() % 26))) })
        _ = draft.insert("Note", values: ["title": s("note \(n)"), "body": s(body)])
        return draft
    }

    @Test("a commit that failed on a full disk is followed by one that works once space is back, in the same handle")
    func commitAfterSpaceReturns() throws {
        guard let fs = try SmallFileSystem(kilobytes: 2048) else {
            print("skipped: needs root and permission to mount a tmpfs")
            return
        }
        var configuration = EventLog.Configuration()
        configuration.initialMapSize = 1 << 20
        let path = fs.file("store")
        let log = try EventLog(path: path, model: try noteModel(), configuration: configuration)
        for n in 0..<5 { try log.commit(noteDraft(n)) }
        try fs.fill(leaving: 0)
        var failure: (any Error)?
        for n in 5..<400 {
            do { try log.commit(noteDraft(n, bodySize: 4000)) } catch {
                failure = error
                break
            }
        }
        let error = try #require(failure)
        #expect((error as? LMDBError)?.code == .noSpace, "\(error)")
        #expect("\(error)".contains(path), "\(error)")
        let head = try log.head
        try fs.drain()
        try log.commit(noteDraft(1000))
        #expect(try log.head == head + 1)
        #expect(try log.verify().isClean)
    }

    @Test("a replay into a new store on a disk that fills leaves no store that looks complete")
    func replayIntoFullDisk() throws {
        let source = try TemporaryDirectory()
        let log = try openLog(source, model: try noteModel()) { $0.durability = .fast }
        for n in stride(from: 0, to: 1400, by: 2) {
            var draft = TransactionDraft(author: "bulk")
            for k in n..<(n + 2) {
                _ = draft.insert("Note", values: ["title": s("note \(k)"), "body": s(String(repeating: "x", count: 700) + "\(k)")])
            }
            try log.commit(draft)
        }
        let head = try log.head
        guard let fs = try SmallFileSystem(kilobytes: 1024) else {
            print("skipped: needs root and permission to mount a tmpfs")
            return
        }
        let target = fs.file("copy")
        let error = #expect(throws: (any Error).self) { try log.replay(through: head, into: target) }
        #expect(error.map { "\($0)" }?.contains("No space left") == true, "\(String(describing: error))")
        // Before: a valid store with the first batches' events was left at `target`: the
        // state of some earlier point, under the name of the copy as of `head`.
        let left = (try? FileManager.default.contentsOfDirectory(atPath: target)) ?? []
        #expect(left.isEmpty, "left at \(target): \(left)")
        // The space is back for the next try.
        #expect(fs.freeBytes > 900 << 10)
    }

    @Test("a new store on a file system without room for its lock file is ENOSPC naming the lock file, not a SIGBUS")
    func newStoreOnFullFileSystem() throws {
        guard let fs = try SmallFileSystem(kilobytes: 256) else {
            print("skipped: needs root and permission to mount a tmpfs")
            return
        }
        try fs.fill(leaving: 0)
        let path = fs.file("store")
        // Before: LMDB sized the lock file with ftruncate and wrote it through its map: SIGBUS.
        let error = #expect(throws: LMDBError.self) { _ = try EventLog(path: path, model: try noteModel()) }
        #expect(error?.code == .noSpace, "\(String(describing: error))")
        #expect("\(String(describing: error))".contains(path + "/lock.mdb"), "\(String(describing: error))")
        try fs.drain()
        let log = try EventLog(path: path, model: try noteModel())
        try log.commit(noteDraft(1))
        #expect(try log.verify().isClean)
    }

    @Test("a store moved (renamed) while open keeps its commits at the new place")
    func commitAfterStoreRenamed() throws {
        let dir = try TemporaryDirectory()
        do {
            let log = try openLog(dir, model: try noteModel())
            try log.commit(noteDraft(1))
            try FileManager.default.moveItem(atPath: dir.file("store"), toPath: dir.file("moved"))
            try log.commit(noteDraft(2))
        }
        let reopened = try EventLog(openingExistingAt: dir.file("moved"))
        #expect(try reopened.head == 2)
        #expect(try reopened.verify().isClean)
    }

    @Test("compaction and purge on a full disk fail naming the cause, lose nothing, and work once space is back")
    func maintenanceOnFullDisk() throws {
        guard let fs = try SmallFileSystem(kilobytes: 2048) else {
            print("skipped: needs root and permission to mount a tmpfs")
            return
        }
        var configuration = EventLog.Configuration()
        configuration.initialMapSize = 1 << 20
        configuration.durability = .fast
        let path = fs.file("store")
        do {
            let log = try EventLog(path: path, model: try noteModel(), configuration: configuration)
            for n in 0..<120 { try log.commit(noteDraft(n)) }
            try fs.fill(leaving: 0)
            #expect(throws: (any Error).self) { try log.compact(CompactionRequest()) }
            let purge = #expect(throws: (any Error).self) { try log.purge(through: 60, author: "ops") }
            #expect(purge.map { "\($0)" }?.contains("No space left") == true, "\(String(describing: purge))")
            #expect(try log.head == 120)
            #expect(try log.verify().isClean)
        }
        let wider = try ManagedObjectModel {
            Entity("Note") {
                Attribute("title", .string)
                Attribute("body", .string)
                Attribute("pinned", .boolean)
            }
        }
        // The migration may fit in the pages the failed attempts freed; if it doesn't, ENOSPC.
        do {
            _ = try EventLog(path: path, model: wider, configuration: configuration)
        } catch {
            #expect("\(error)".contains("No space left"), "\(error)")
        }
        try fs.drain()
        let log = try EventLog(path: path, model: wider, configuration: configuration)
        #expect(try log.verify().isClean)
        try log.compact(CompactionRequest())
        try log.purge(through: 60, author: "ops")
        try log.commit(noteDraft(500))
        #expect(try log.verify().isClean)
    }
}
