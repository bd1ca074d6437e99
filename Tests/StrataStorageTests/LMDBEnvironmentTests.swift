import CStrataLMDB
import Foundation
import StrataStorage
import StrataTestSupport
import Testing

@Suite("LMDB environments")
struct LMDBEnvironmentTests {
    // MARK: - Flag table

    @Test("every environment flag equals its MDB_* constant")
    func environmentFlagTable() {
        let table: [(EnvironmentFlags, Int32)] = [
            (.fixedMap, MDB_FIXEDMAP), (.noSubdirectory, MDB_NOSUBDIR), (.noSync, MDB_NOSYNC),
            (.readOnly, MDB_RDONLY), (.noMetaSync, MDB_NOMETASYNC), (.writeMap, MDB_WRITEMAP),
            (.mapAsync, MDB_MAPASYNC), (.noThreadLocalStorage, MDB_NOTLS), (.noLock, MDB_NOLOCK),
            (.noReadAhead, MDB_NORDAHEAD), (.noMemoryInit, MDB_NOMEMINIT),
        ]
        for (flag, constant) in table { #expect(flag.rawValue == UInt32(constant), "\(flag)") }
    }

    @Test("every database flag equals its MDB_* constant")
    func databaseFlagTable() {
        let table: [(DatabaseFlags, Int32)] = [
            (.reverseKey, MDB_REVERSEKEY), (.duplicateSort, MDB_DUPSORT), (.integerKey, MDB_INTEGERKEY),
            (.duplicateFixed, MDB_DUPFIXED), (.integerDuplicate, MDB_INTEGERDUP),
            (.reverseDuplicate, MDB_REVERSEDUP), (.create, MDB_CREATE),
        ]
        for (flag, constant) in table { #expect(flag.rawValue == UInt32(constant), "\(flag)") }
    }

    @Test("every put flag equals its MDB_* constant")
    func putFlagTable() {
        let table: [(PutFlags, Int32)] = [
            (.noOverwrite, MDB_NOOVERWRITE), (.noDuplicateData, MDB_NODUPDATA), (.current, MDB_CURRENT),
            (.reserve, MDB_RESERVE), (.append, MDB_APPEND), (.appendDuplicate, MDB_APPENDDUP),
            (.multiple, MDB_MULTIPLE),
        ]
        for (flag, constant) in table { #expect(flag.rawValue == UInt32(constant), "\(flag)") }
    }

    @Test("every error code equals its MDB_* constant")
    func errorCodeTable() {
        let table: [(LMDBError.Code, Int32)] = [
            (.keyExists, MDB_KEYEXIST), (.notFound, MDB_NOTFOUND), (.pageNotFound, MDB_PAGE_NOTFOUND),
            (.corrupted, MDB_CORRUPTED), (.panic, MDB_PANIC), (.versionMismatch, MDB_VERSION_MISMATCH),
            (.invalid, MDB_INVALID), (.mapFull, MDB_MAP_FULL), (.databasesFull, MDB_DBS_FULL),
            (.readersFull, MDB_READERS_FULL), (.threadLocalStorageFull, MDB_TLS_FULL),
            (.transactionFull, MDB_TXN_FULL), (.cursorFull, MDB_CURSOR_FULL), (.pageFull, MDB_PAGE_FULL),
            (.mapResized, MDB_MAP_RESIZED), (.incompatible, MDB_INCOMPATIBLE), (.badReaderSlot, MDB_BAD_RSLOT),
            (.badTransaction, MDB_BAD_TXN), (.badValueSize, MDB_BAD_VALSIZE), (.badDatabase, MDB_BAD_DBI),
            (.permissionDenied, EACCES), (.noSuchFile, ENOENT), (.invalidArgument, EINVAL), (.noSpace, ENOSPC),
            (.ioError, EIO), (.outOfMemory, ENOMEM),
        ]
        for (code, constant) in table { #expect(code.rawValue == constant, "\(code)") }
    }

    @Test("every cursor move equals its MDB_cursor_op")
    func cursorOperationTable() {
        let table: [(LMDBCursor.Move, MDB_cursor_op)] = [
            (.first, MDB_FIRST), (.last, MDB_LAST), (.next, MDB_NEXT), (.previous, MDB_PREV),
            (.firstDuplicate, MDB_FIRST_DUP), (.lastDuplicate, MDB_LAST_DUP), (.nextDuplicate, MDB_NEXT_DUP),
            (.previousDuplicate, MDB_PREV_DUP), (.nextKey, MDB_NEXT_NODUP), (.previousKey, MDB_PREV_NODUP),
        ]
        #expect(table.count == LMDBCursor.Move.allCases.count)
        for (move, op) in table { #expect(move.lmdbValue == op.rawValue, "\(move)") }
    }

    // MARK: - Map growth

    @Test("a single write transaction larger than the initial map commits after growth")
    func mapGrowth() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir) { $0.mapSize = 1 << 20 }
        let db = try env.database(named: "main")
        let initial = env.mapSize
        let value = [UInt8](repeating: 0xAB, count: 4096)
        var runs = 0
        // 24 MiB in one transaction against a 1 MiB map.
        try env.write { (txn: borrowing LMDBTransaction) throws in
            runs += 1
            for i in 0..<6144 {
                var key = [UInt8](repeating: 0, count: 4)
                withUnsafeBytes(of: UInt32(i).bigEndian) { key = Array($0) }
                try txn.put(value, forKey: key, in: db, flags: .append)
            }
        }
        #expect(runs > 1, "the closure ran again after growth")
        #expect(env.mapSize > initial)
        #expect(env.mapSize >= 24 << 20)
        try env.read { (txn: borrowing LMDBTransaction) throws in
            #expect(try txn.count(in: db) == 6144)
            #expect(try txn.value(forKey: [0, 0, 0x17, 0xFF], in: db) == value)
        }
    }

    @Test("a map that can't grow past maximumMapSize fails clearly and keeps what was committed")
    func mapAtMaximum() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir) {
            $0.mapSize = 1 << 20
            $0.maximumMapSize = 2 << 20
        }
        let db = try env.database(named: "main")
        try env.write { (txn: borrowing LMDBTransaction) throws in try txn.put(bytes("safe"), forKey: bytes("committed"), in: db) }
        let error = #expect(throws: LMDBError.self) {
            try env.write { (txn: borrowing LMDBTransaction) throws in
                for i in 0..<2000 { try txn.put([UInt8](repeating: 1, count: 4096), forKey: bytes("big\(i)"), in: db) }
            }
        }
        #expect(error?.code == .mapAtMaximumSize)
        #expect(error?.description.contains("maximumMapSize") == true)
        #expect(try env.read { try $0.value(forKey: bytes("committed"), in: db) } == bytes("safe"))
        #expect(try env.read { try $0.count(in: db) } == 1)
    }

    // MARK: - Opening

    @Test("durable is the default; fast mode sets MDB_NOMETASYNC; MDB_NOTLS is always on")
    func durabilityModes() throws {
        let dir = try TemporaryDirectory()
        let durable = try LMDBEnvironment(path: dir.file("durable"), databases: [DatabaseDescriptor("t")])
        #expect(durable.flags.contains(.noThreadLocalStorage))
        #expect(!durable.flags.contains(.noMetaSync))
        #expect(!durable.flags.contains(.noSync))

        var options = LMDBEnvironment.Options()
        options.durability = .fast
        let fast = try LMDBEnvironment(path: dir.file("fast"), databases: [DatabaseDescriptor("t")], options: options)
        #expect(fast.flags.contains(.noMetaSync))
        let db = try fast.database(named: "t")
        try fast.write { try $0.put(bytes("v"), forKey: bytes("k"), in: db) }
        try fast.sync(force: true)
        #expect(try fast.read { try $0.value(forKey: bytes("k"), in: db) } == bytes("v"))
    }

    @Test("a read-only open never creates and names a missing database")
    func readOnlyOpen() throws {
        let dir = try TemporaryDirectory()
        do {
            let env = try makeEnvironment(dir, [DatabaseDescriptor("present")])
            try env.write { try $0.put(bytes("v"), forKey: bytes("k"), in: try env.database(named: "present")) }
        }
        var options = LMDBEnvironment.Options()
        options.isReadOnly = true
        let reader = try LMDBEnvironment(path: dir.file("env"), databases: [DatabaseDescriptor("present")], options: options)
        let db = try reader.database(named: "present")
        #expect(try reader.read { try $0.value(forKey: bytes("k"), in: db) } == bytes("v"))
        let writeError = #expect(throws: LMDBError.self) {
            try reader.write { try $0.put(bytes("x"), forKey: bytes("y"), in: db) }
        }
        #expect(writeError?.code == .readOnlyEnvironment)

        let missing = #expect(throws: LMDBError.self) {
            _ = try LMDBEnvironment(path: dir.file("env"), databases: [DatabaseDescriptor("absent")], options: options)
        }
        #expect(missing?.code == .databaseNotFound)
        #expect(missing?.description.contains("absent") == true)

        let nowhere = #expect(throws: LMDBError.self) {
            _ = try LMDBEnvironment(path: dir.file("nowhere"), databases: [], options: options)
        }
        #expect(nowhere?.code == .noSuchFile)
        #expect(!FileManager.default.fileExists(atPath: dir.file("nowhere")))
    }

    @Test("a file that isn't LMDB is refused with MDB_INVALID, naming the path")
    func notAnLMDBFile() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("bogus")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try Data(repeating: 0x5A, count: 64 << 10).write(to: URL(fileURLWithPath: path + "/data.mdb"))
        let error = #expect(throws: LMDBError.self) {
            _ = try LMDBEnvironment(path: path, databases: [DatabaseDescriptor("t")])
        }
        #expect(error?.code == .invalid)
        #expect(error?.description.contains(path) == true)
        // The lock file LMDB made for it is gone again, read-only open or writable: a look at
        // the wrong directory leaves nothing behind. One that was there stays.
        #expect(!FileManager.default.fileExists(atPath: path + "/lock.mdb"))
        var readOnly = LMDBEnvironment.Options()
        readOnly.isReadOnly = true
        #expect(throws: LMDBError.self) { _ = try LMDBEnvironment(path: path, databases: [], options: readOnly) }
        #expect(!FileManager.default.fileExists(atPath: path + "/lock.mdb"))
        try Data("someone's".utf8).write(to: URL(fileURLWithPath: path + "/lock.mdb"))
        #expect(throws: LMDBError.self) { _ = try LMDBEnvironment(path: path, databases: [], options: readOnly) }
        #expect(FileManager.default.fileExists(atPath: path + "/lock.mdb"))
    }

    @Test("asking for a database that wasn't opened is a clear error")
    func unknownDatabase() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir)
        let error = #expect(throws: LMDBError.self) { _ = try env.database(named: "other") }
        #expect(error?.code == .databaseNotFound)
    }

    @Test("the unnamed main database can be opened beside named ones")
    func mainDatabase() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir, [DatabaseDescriptor(nil), DatabaseDescriptor("named")])
        let main = try #require(env.unnamedDatabase)
        try env.write { try $0.put(bytes("v"), forKey: bytes("plain"), in: main) }
        #expect(try env.read { try $0.value(forKey: bytes("plain"), in: main) } == bytes("v"))
    }

    @Test("a compacting copy is smaller than the original after deletes and holds the same data")
    func compactingCopy() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir)
        let db = try env.database(named: "main")
        try env.write { (txn: borrowing LMDBTransaction) throws in
            for i in 0..<5000 { try txn.put([UInt8](repeating: 7, count: 512), forKey: bytes("k\(i)"), in: db) }
        }
        try env.write { (txn: borrowing LMDBTransaction) throws in for i in 0..<4900 { try txn.delete(key: bytes("k\(i)"), in: db) } }
        let copyDir = dir.file("copy")
        try FileManager.default.createDirectory(atPath: copyDir, withIntermediateDirectories: true)
        try env.copy(to: copyDir, compacting: true)
        let original = try FileManager.default.attributesOfItem(atPath: dir.file("env/data.mdb"))[.size] as? Int ?? 0
        let compacted = try FileManager.default.attributesOfItem(atPath: copyDir + "/data.mdb")[.size] as? Int ?? 0
        #expect(compacted > 0)
        #expect(compacted * 4 < original)
        let copy = try LMDBEnvironment(path: copyDir, databases: [DatabaseDescriptor("main")])
        let copied = try copy.database(named: "main")
        #expect(try copy.read { try $0.count(in: copied) } == 100)
        #expect(try copy.read { try $0.value(forKey: bytes("k4999"), in: copied) } == [UInt8](repeating: 7, count: 512))
    }

    @Test("statistics and info report what is stored")
    func statistics() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir)
        let db = try env.database(named: "main")
        try env.write { (txn: borrowing LMDBTransaction) throws in for i in 0..<100 { try txn.put(bytes("v"), forKey: bytes("k\(i)"), in: db) } }
        let stats = try env.read { try $0.statistics(of: db) }
        #expect(stats.entries == 100)
        #expect(stats.depth >= 1)
        #expect(stats.pageSize >= 4096)
        #expect(env.info.lastTransactionID >= 2)
        #expect(try env.clearStaleReaders() == 0)
    }

    @Test("oldestReaderSnapshot: nil with no read open, else the oldest open read's transaction ID")
    func oldestReaderSnapshot() throws {
        let dir = try TemporaryDirectory()
        let env = try LMDBEnvironment(path: dir.file("env"), databases: [DatabaseDescriptor("t")])
        let db = try env.database(named: "t")
        try env.write { try $0.put(bytes("v1"), forKey: bytes("k"), in: db) }
        #expect(try env.oldestReaderSnapshot() == nil)
        try env.read { (old: borrowing LMDBTransaction) throws in
            let oldID = old.id
            #expect(try env.oldestReaderSnapshot() == oldID)
            try env.write { try $0.put(bytes("v2"), forKey: bytes("k"), in: db) }
            try env.read { (new: borrowing LMDBTransaction) throws in
                // Two readers (MDB_NOTLS allows nesting): the older snapshot is the answer.
                #expect(new.id > oldID)
                #expect(try env.oldestReaderSnapshot() == oldID)
            }
        }
        #expect(try env.oldestReaderSnapshot() == nil)
    }
}
