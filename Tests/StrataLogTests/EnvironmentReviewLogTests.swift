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
}
