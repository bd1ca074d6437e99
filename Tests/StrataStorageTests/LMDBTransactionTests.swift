import Dispatch
import Foundation
import StrataStorage
import StrataTestSupport
import Testing

/// Opens an environment in a fresh temporary directory with the given databases.
func makeEnvironment(
    _ directory: TemporaryDirectory, _ databases: [DatabaseDescriptor] = [DatabaseDescriptor("main")],
    configure: (inout LMDBEnvironment.Options) -> Void = { _ in }
) throws -> LMDBEnvironment {
    var options = LMDBEnvironment.Options()
    configure(&options)
    return try LMDBEnvironment(path: directory.file("env"), databases: databases, options: options)
}

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
func string(_ span: RawSpan) -> String { span.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }

struct Boom: Error {}

@Suite("LMDB transactions")
struct LMDBTransactionTests {
    @Test("a returning write commits; a throwing write leaves nothing behind")
    func commitAndAbort() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir)
        let db = try env.database(named: "main")

        try env.write { (txn: borrowing LMDBTransaction) throws in try txn.put(bytes("kept"), forKey: bytes("a"), in: db) }
        #expect(throws: Boom.self) {
            try env.write { (txn: borrowing LMDBTransaction) throws in
                try txn.put(bytes("lost"), forKey: bytes("b"), in: db)
                try txn.put(bytes("overwritten"), forKey: bytes("a"), in: db)
                // Visible inside the transaction before it aborts.
                #expect(try txn.value(forKey: bytes("b"), in: db) == bytes("lost"))
                throw Boom()
            }
        }
        try env.read { (txn: borrowing LMDBTransaction) throws in
            #expect(try txn.value(forKey: bytes("a"), in: db) == bytes("kept"))
            #expect(try txn.value(forKey: bytes("b"), in: db) == nil)
            #expect(try txn.count(in: db) == 1)
        }
    }

    @Test("the write closure's return value comes back after commit")
    func writeReturnsValue() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir)
        let db = try env.database(named: "main")
        let n = try env.write { txn -> Int in
            for i in 0..<10 { try txn.put(bytes("v\(i)"), forKey: bytes("k\(i)"), in: db) }
            return try txn.count(in: db)
        }
        #expect(n == 10)
    }

    @Test("a read transaction keeps its snapshot while a writer commits")
    func readSnapshotIsolation() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir)
        let db = try env.database(named: "main")
        try env.write { (txn: borrowing LMDBTransaction) throws in try txn.put(bytes("old"), forKey: bytes("k"), in: db) }

        try env.read { (txn: borrowing LMDBTransaction) throws in
            #expect(try txn.value(forKey: bytes("k"), in: db) == bytes("old"))
            // Commit from another thread while this snapshot is open.
            let done = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var writeError: (any Error)?
            DispatchQueue.global().async {
                do {
                    try env.write { w in
                        try w.put(bytes("new"), forKey: bytes("k"), in: db)
                        try w.put(bytes("x"), forKey: bytes("added"), in: db)
                    }
                } catch { writeError = error }
                done.signal()
            }
            done.wait()
            #expect(writeError == nil)
            #expect(try txn.value(forKey: bytes("k"), in: db) == bytes("old"))
            #expect(try txn.value(forKey: bytes("added"), in: db) == nil)
        }
        try env.read { (txn: borrowing LMDBTransaction) throws in
            #expect(try txn.value(forKey: bytes("k"), in: db) == bytes("new"))
            #expect(try txn.value(forKey: bytes("added"), in: db) == bytes("x"))
        }
    }

    @Test("what escapes a transaction is an owned copy, unaffected by later writes")
    func copiesEscape() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir)
        let db = try env.database(named: "main")
        try env.write { (txn: borrowing LMDBTransaction) throws in try txn.put(bytes("first"), forKey: bytes("k"), in: db) }

        // The borrowed span can only be used inside the closure; what leaves is a copy.
        let copied: [UInt8]? = try env.read { (txn: borrowing LMDBTransaction) throws in
            try txn.withValue(forKey: bytes("k"), in: db) { span in span.withUnsafeBytes { Array($0) } }
        }
        let viaCopyAPI = try env.read { (txn: borrowing LMDBTransaction) throws in try txn.value(forKey: bytes("k"), in: db) }
        // Overwrite and delete the key; reuse its pages with more writes.
        try env.write { (txn: borrowing LMDBTransaction) throws in
            try txn.put(bytes("second-and-longer"), forKey: bytes("k"), in: db)
            for i in 0..<500 { try txn.put([UInt8](repeating: UInt8(i % 256), count: 100), forKey: bytes("f\(i)"), in: db) }
        }
        try env.write { (txn: borrowing LMDBTransaction) throws in _ = try txn.delete(key: bytes("k"), in: db) }
        #expect(copied == bytes("first"))
        #expect(viaCopyAPI == bytes("first"))
    }

    @Test("a write inside a write on the same thread is a clear error, not a deadlock")
    func nestedWriteIsAnError() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir)
        let db = try env.database(named: "main")
        let error = #expect(throws: LMDBError.self) {
            try env.write { _ in try env.write { (txn: borrowing LMDBTransaction) throws in try txn.put(bytes("v"), forKey: bytes("k"), in: db) } }
        }
        #expect(error?.code == .nestedWriteTransaction)
    }

    @Test("writers from many threads are serialised and all land")
    func concurrentWriters() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir)
        let db = try env.database(named: "main")
        let counter = bytes("counter")
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for _ in 0..<25 {
                try? env.write { (txn: borrowing LMDBTransaction) throws in
                    let current = try txn.withValue(forKey: counter, in: db) { span in
                        span.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                    } ?? 0
                    withUnsafeBytes(of: current + 1) { raw in
                        _ = try? txn.put(Array(raw), forKey: counter, in: db)
                    }
                    _ = worker
                }
            }
        }
        let total = try env.read { (txn: borrowing LMDBTransaction) throws in
            try txn.withValue(forKey: counter, in: db) { span in span.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) } }
        }
        #expect(total == 200)
    }

    @Test("put flags: noOverwrite refuses, append requires order, reserve fills in place")
    func putFlags() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir)
        let db = try env.database(named: "main")
        try env.write { (txn: borrowing LMDBTransaction) throws in try txn.put(bytes("1"), forKey: bytes("k"), in: db) }

        let exists = #expect(throws: LMDBError.self) {
            try env.write { (txn: borrowing LMDBTransaction) throws in try txn.put(bytes("2"), forKey: bytes("k"), in: db, flags: .noOverwrite) }
        }
        #expect(exists?.code == .keyExists)
        #expect(exists?.description.contains("MDB_KEYEXIST") == true)

        try env.write { (txn: borrowing LMDBTransaction) throws in
            try txn.put(bytes("a"), forKey: [0x7A, 1], in: db, flags: .append)
            try txn.put(bytes("b"), forKey: [0x7A, 2], in: db, flags: .append)
        }
        let outOfOrder = #expect(throws: LMDBError.self) {
            try env.write { (txn: borrowing LMDBTransaction) throws in try txn.put(bytes("c"), forKey: [0x7A, 0], in: db, flags: .append) }
        }
        #expect(outOfOrder?.code == .keyExists)

        try env.write { (txn: borrowing LMDBTransaction) throws in
            try txn.put(reservingCount: 4, forKey: bytes("reserved"), in: db) { buffer in
                buffer.copyBytes(from: [9, 8, 7, 6])
            }
        }
        #expect(try env.read { try $0.value(forKey: bytes("reserved"), in: db) } == [9, 8, 7, 6])
        #expect(try env.read { try $0.value(forKey: bytes("k"), in: db) } == bytes("1"))
    }

    @Test("delete reports whether the key was there; removeAll empties a database")
    func deletes() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir)
        let db = try env.database(named: "main")
        try env.write { (txn: borrowing LMDBTransaction) throws in
            try txn.put(bytes("v"), forKey: bytes("k"), in: db)
            try txn.put(bytes("w"), forKey: bytes("j"), in: db)
        }
        #expect(try env.write { try $0.delete(key: bytes("k"), in: db) })
        #expect(try !env.write { try $0.delete(key: bytes("k"), in: db) })
        try env.write { try $0.removeAll(in: db) }
        #expect(try env.read { try $0.count(in: db) } == 0)
    }

    @Test("a write in a read transaction fails with LMDB's EACCES")
    func writeInReadTransaction() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir)
        let db = try env.database(named: "main")
        let error = #expect(throws: LMDBError.self) {
            try env.read { (txn: borrowing LMDBTransaction) throws in try txn.put(bytes("v"), forKey: bytes("k"), in: db) }
        }
        #expect(error?.code == .permissionDenied)
        #expect(error?.operation == "mdb_put")
    }

    @Test("an empty key is refused with MDB_BAD_VALSIZE and the message names it")
    func badValueSize() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir)
        let db = try env.database(named: "main")
        let error = #expect(throws: LMDBError.self) {
            try env.write { (txn: borrowing LMDBTransaction) throws in try txn.put(bytes("v"), forKey: [UInt8](), in: db) }
        }
        #expect(error?.code == .badValueSize)
        #expect(error?.message.isEmpty == false)
    }
}
