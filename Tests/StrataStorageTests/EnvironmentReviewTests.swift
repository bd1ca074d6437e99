import CStrataLMDB
import Foundation
import StrataStorage
import StrataTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The review of the environment around the store: the same environment opened twice in one
/// process, read-only opens of files this user can't write, reader slots of dead processes,
/// replacing the data file while someone has it open, and zstd frames of every shape.
@Suite("Environment review: LMDB and zstd under a misbehaving environment")
struct EnvironmentReviewTests {
    // MARK: - One environment, opened twice in a process

    @Test("a second open in the process keeps the first one's open readers in the reader table")
    func secondOpenKeepsReaders() throws {
        let dir = try TemporaryDirectory()
        let first = try makeEnvironment(dir)
        let db = try first.database(named: "main")
        try first.write { try $0.put(bytes("v1"), forKey: bytes("k"), in: db) }
        try first.read { txn in
            // Before: the second mdb_env_open took the lock file's lock as the first user and
            // reset the reader table, so this open snapshot was no longer protected.
            let second = try makeEnvironment(dir)
            #expect(second.info.readersInUse >= 1)
            #expect(try second.oldestReaderSnapshot() == txn.id)
            #expect(try first.oldestReaderSnapshot() == txn.id)
            // Commits through the second handle can't reuse the pages this snapshot reads.
            let other = try second.database(named: "main")
            for i in 0..<50 {
                try second.write { try $0.put([UInt8](repeating: UInt8(i), count: 3000), forKey: bytes("k"), in: other) }
            }
            #expect(try txn.value(forKey: bytes("k"), in: db) == bytes("v1"))
        }
        #expect(try first.read { try $0.value(forKey: bytes("k"), in: db) }?.count == 3000)
    }

    @Test("two handles on one environment share writes, the writer lock and the close")
    func twoHandlesShare() throws {
        let dir = try TemporaryDirectory()
        let first = try makeEnvironment(dir, [DatabaseDescriptor("a")])
        var second: LMDBEnvironment? = try makeEnvironment(dir, [DatabaseDescriptor("a"), DatabaseDescriptor("b")])
        let a = try first.database(named: "a")
        let b = try #require(try second?.database(named: "b"))
        try second?.write { try $0.put(bytes("x"), forKey: bytes("1"), in: b) }
        try first.write { try $0.put(bytes("y"), forKey: bytes("2"), in: a) }
        #expect(try second?.read { try $0.value(forKey: bytes("2"), in: a) } == bytes("y"))
        // A write through one handle inside a write through the other on the same thread is
        // the nested-write error, not a self-deadlock on LMDB's writer mutex.
        let nested = #expect(throws: LMDBError.self) {
            try first.write { _ in try second?.write { try $0.put(bytes("z"), forKey: bytes("3"), in: b) } }
        }
        #expect(nested?.code == .nestedWriteTransaction)
        // Releasing one handle leaves the other working (and holding the lock file).
        second = nil
        try first.write { try $0.put(bytes("w"), forKey: bytes("4"), in: a) }
        #expect(try first.read { try $0.count(in: a) } == 2)
    }

    @Test("a writable open of an environment open read-only in the process reopens it writable for both")
    func readOnlyThenWritableOpen() throws {
        let dir = try TemporaryDirectory()
        do {
            let env = try makeEnvironment(dir, [DatabaseDescriptor("main"), DatabaseDescriptor("other")])
            try env.write { try $0.put(bytes("v0"), forKey: bytes("k0"), in: try env.database(named: "other")) }
        }
        let reader = try makeEnvironment(dir, [DatabaseDescriptor("other"), DatabaseDescriptor("main")]) { $0.isReadOnly = true }
        let other = try reader.database(named: "other")
        #expect(reader.flags.contains(.readOnly))
        // Another thread's writable open waits for this read to end before it reopens.
        let opened = DispatchSemaphore(value: 0)
        try reader.read { (txn: borrowing LMDBTransaction) throws in
            Thread.detachNewThread {
                _ = try? makeEnvironment(dir, [DatabaseDescriptor("main"), DatabaseDescriptor("fresh")])
                opened.signal()
            }
            #expect(try txn.value(forKey: bytes("k0"), in: other) == bytes("v0"))
        }
        opened.wait()
        let writer = try makeEnvironment(dir, [DatabaseDescriptor("main"), DatabaseDescriptor("fresh")])
        #expect(!reader.flags.contains(.readOnly))
        try writer.write { txn in
            try txn.put(bytes("v"), forKey: bytes("k"), in: try writer.database(named: "main"))
            try txn.put(bytes("f"), forKey: bytes("k"), in: try writer.database(named: "fresh"))
        }
        // The read-only value's handles still name the same databases, and it still can't write.
        let main = try reader.database(named: "main")
        #expect(try reader.read { try $0.value(forKey: bytes("k"), in: main) } == bytes("v"))
        #expect(try reader.read { try $0.value(forKey: bytes("k0"), in: other) } == bytes("v0"))
        let denied = #expect(throws: LMDBError.self) { try reader.write { try $0.put(bytes("v"), forKey: bytes("j"), in: main) } }
        #expect(denied?.code == .readOnlyEnvironment)
        // A read-only share still can't conjure a database the environment lacks.
        let missing = #expect(throws: LMDBError.self) {
            _ = try makeEnvironment(dir, [DatabaseDescriptor("absent")]) { $0.isReadOnly = true }
        }
        #expect(missing?.code == .databaseNotFound)
    }

    @Test("a directory deleted and made again at the path of an open environment is a new environment")
    func recreatedDirectoryIsNotShared() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("env")
        let old = try makeEnvironment(dir)
        try old.write { try $0.put(bytes("old"), forKey: bytes("k"), in: try old.database(named: "main")) }
        try FileManager.default.removeItem(atPath: path)
        // The new directory may well get the old one's inode number.
        let fresh = try makeEnvironment(dir)
        #expect(try fresh.read { try $0.value(forKey: bytes("k"), in: try fresh.database(named: "main")) } == nil)
        try fresh.write { try $0.put(bytes("new"), forKey: bytes("k"), in: try fresh.database(named: "main")) }
        #expect(FileManager.default.fileExists(atPath: (path as NSString).appendingPathComponent("data.mdb")))
        #expect(try old.read { try $0.value(forKey: bytes("k"), in: try old.database(named: "main")) } == bytes("old"))
    }

    @Test("a durable open of an environment open in fast mode makes it durable")
    func durableShareWins() throws {
        let dir = try TemporaryDirectory()
        let fast = try makeEnvironment(dir) { $0.durability = .fast }
        #expect(fast.flags.contains(.noMetaSync))
        let durable = try makeEnvironment(dir)
        #expect(!durable.flags.contains(.noMetaSync))
        #expect(!fast.flags.contains(.noMetaSync))
    }

    // MARK: - Resizes a thread would wait for itself

    @Test("a nested read that meets a map grown by another process is an error, not a self-deadlock; the outer body runs once")
    func nestedReadAfterForeignGrowth() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir) { $0.mapSize = 1 << 20 }
        let db = try env.database(named: "main")
        try env.write { try $0.put(bytes("v"), forKey: bytes("k"), in: db) }
        let probe = try Probe(environmentPath: dir.file("env"), mapSize: 1 << 20)
        var runs = 0
        let error = #expect(throws: LMDBError.self) {
            try env.read { (outer: borrowing LMDBTransaction) throws in
                runs += 1
                #expect(try outer.value(forKey: bytes("k"), in: db) == bytes("v"))
                // The probe grows the map well past this process's 1 MiB and commits.
                #expect(try probe.send("bulk 2048 4096") == "ok")
                // Before: the inner begin met MDB_MAP_RESIZED and waited, forever, for the
                // outer read (this thread's) to end before adopting the new size.
                _ = try env.read { try $0.count(in: db) }
            }
        }
        #expect(error?.code == .mapResized)
        #expect(error?.description.contains("inside a read transaction") == true)
        #expect(runs == 1)
        // Outside any read the new size is adopted and everything is visible.
        #expect(try env.read { try $0.count(in: db) } == 2049)
    }

    @Test("a write inside a read on the same thread that fills the map is an error, not a self-deadlock")
    func writeInsideReadFillingTheMap() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir) { $0.mapSize = 1 << 16 }
        let db = try env.database(named: "main")
        let error = #expect(throws: LMDBError.self) {
            try env.read { _ in
                // Before: the grow waited for this read, on this thread, forever.
                try env.write { txn in
                    for i in 0..<64 { try txn.put([UInt8](repeating: 1, count: 4096), forKey: bytes("k\(i)"), in: db) }
                }
            }
        }
        #expect(error?.code == .nestedWriteTransaction)
        #expect(error?.description.contains("map is full") == true)
        // Outside the read the same write grows the map and commits.
        try env.write { txn in
            for i in 0..<64 { try txn.put([UInt8](repeating: 1, count: 4096), forKey: bytes("k\(i)"), in: db) }
        }
        #expect(try env.read { try $0.count(in: db) } == 64)
    }

    // MARK: - Reader slots

    @Test("reader slots left by a killed process are reclaimed when the table is full")
    func readersOfDeadProcessAreReclaimed() throws {
        let dir = try TemporaryDirectory()
        // This process creates the lock file, so its small reader table is the one in use.
        let env = try makeEnvironment(dir) { $0.maxReaders = 4 }
        let db = try env.database(named: "main")
        try env.write { try $0.put(bytes("v"), forKey: bytes("k"), in: db) }
        let probe = try Probe(environmentPath: dir.file("env"), mapSize: 1 << 20)
        #expect(try probe.send("hold 4") == "holding")
        // Every slot is taken by a live process: a clear error naming the limit.
        let full = #expect(throws: LMDBError.self) { _ = try env.read { try $0.value(forKey: bytes("k"), in: db) } }
        #expect(full?.code == .readersFull)
        #expect(full?.description.contains("maxReaders") == true)
        kill(probe.process.processIdentifier, SIGKILL)
        probe.process.waitUntilExit()
        // Before: MDB_READERS_FULL until something called mdb_reader_check.
        #expect(try env.read { try $0.value(forKey: bytes("k"), in: db) } == bytes("v"))
    }

    // MARK: - Read-only opens of files this user can't write

    @Test("a read-only open of an empty data file says the file is empty")
    func emptyDataFile() throws {
        let dir = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.file("env"), withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: dir.file("env/data.mdb"), contents: Data()))
        // Before: "mdb_env_open: Bad file descriptor (code 9)".
        let error = #expect(throws: LMDBError.self) { _ = try makeEnvironment(dir) { $0.isReadOnly = true } }
        #expect(error?.code == .invalid)
        #expect(error?.description.contains("empty") == true)
        #expect(error?.description.contains("data.mdb") == true)
    }

    @Test("a read-only open without a lock file it can create reads lock-less, as on a read-only mount")
    func readOnlyWithoutLockFile() throws {
        let dir = try TemporaryDirectory()
        do {
            let env = try makeEnvironment(dir)
            try env.write { try $0.put(bytes("v"), forKey: bytes("k"), in: try env.database(named: "main")) }
        }
        try FileManager.default.removeItem(atPath: dir.file("env/lock.mdb"))
        // Root may write anywhere, so make the lock file impossible another way: a directory
        // in its place fails mdb_env_open with EISDIR, not EACCES — so this part checks only
        // that a lock-less read-only open reads; the permission path runs in the CLI tests.
        var options = LMDBEnvironment.Options()
        options.isReadOnly = true
        options.additionalFlags = .noLock
        let env = try LMDBEnvironment(path: dir.file("env"), databases: [DatabaseDescriptor("main")], options: options)
        #expect(try env.read { try $0.value(forKey: bytes("k"), in: try env.database(named: "main")) } == bytes("v"))
        #expect(try env.oldestReaderSnapshot() == nil)
    }

    @Test(
        "a read-only open on a read-only mount reads lock-less, but not while another process has the store open",
        .enabled(if: getuid() == 0, "needs root to bind-mount a directory read-only"))
    func readOnlyMountOfALiveStore() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("env")
        do {
            let env = try makeEnvironment(dir)
            try env.write { try $0.put(bytes("v"), forKey: bytes("k"), in: try env.database(named: "main")) }
        }
        let mountPoint = dir.file("readonly")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        guard mount(path, mountPoint, nil, UInt(MS_BIND), nil) == 0 else { return }  // no mounts here
        defer { umount2(mountPoint, 2) }  // MNT_DETACH
        guard mount(nil, mountPoint, nil, UInt(MS_REMOUNT | MS_BIND | MS_RDONLY), nil) == 0 else { return }
        var options = LMDBEnvironment.Options()
        options.isReadOnly = true
        do {
            // Nobody has it open: LMDB reads it without the lock file.
            let env = try LMDBEnvironment(path: mountPoint, databases: [DatabaseDescriptor("main")], options: options)
            #expect(try env.read { try $0.value(forKey: bytes("k"), in: try env.database(named: "main")) } == bytes("v"))
        }
        // Another process has it open (and may write): before, the open went lock-less all
        // the same, and that process's commits could reuse the pages its reads saw.
        let probe = try Probe(environmentPath: path, mapSize: 1 << 20)
        let refused = #expect(throws: LMDBError.self) {
            _ = try LMDBEnvironment(path: mountPoint, databases: [DatabaseDescriptor("main")], options: options)
        }
        #expect(refused?.code == .incompatibleOpen)
        #expect(refused?.description.contains("process \(probe.process.processIdentifier)") == true)
        #expect(refused?.description.contains("copy the store") == true)
    }

    // MARK: - Replacing the data file

    @Test("compacting in place is refused while this process or another has the environment open")
    func compactInPlaceRefusedWhileOpen() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("env")
        do {
            let env = try makeEnvironment(dir)
            let db = try env.database(named: "main")
            try env.write { txn in
                for i in 0..<500 { try txn.put([UInt8](repeating: 7, count: 2000), forKey: bytes("k\(i)"), in: db) }
            }
            try env.write { txn in for i in 0..<490 { try txn.delete(key: bytes("k\(i)"), in: db) } }
            let here = #expect(throws: LMDBError.self) { _ = try LMDBEnvironment.replaceWithCompactedCopy(path: path) }
            #expect(here?.code == .incompatibleOpen)
            #expect(here?.description.contains("this process") == true)
        }
        let probe = try Probe(environmentPath: path, mapSize: 1 << 20)
        let elsewhere = #expect(throws: LMDBError.self) { _ = try LMDBEnvironment.replaceWithCompactedCopy(path: path) }
        #expect(elsewhere?.code == .incompatibleOpen)
        #expect(elsewhere?.description.contains("process \(probe.process.processIdentifier)") == true)
        #expect(try probe.send("quit") == "bye")
        probe.process.waitUntilExit()

        let (before, after) = try LMDBEnvironment.replaceWithCompactedCopy(path: path)
        #expect(after < before)
        // The lock file was rebuilt for the new file: a later open reads it all, and writes.
        let env = try makeEnvironment(dir)
        let db = try env.database(named: "main")
        #expect(try env.read { try $0.count(in: db) } == 10)
        try env.write { try $0.put(bytes("new"), forKey: bytes("n"), in: db) }
        let again = try Probe(environmentPath: path, mapSize: 1 << 20)
        #expect(try again.send("get n") == "new")
        #expect(try again.send("count") == "11")
    }

    // MARK: - zstd frames of every shape

    @Test("skippable frames are passed over, alone, before, between and after data frames")
    func skippableFrames() throws {
        let skippable: [UInt8] = [0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 2, 3, 4]
        let a = try Zstd.compress(bytes("alpha"))
        let b = try Zstd.compress(bytes("beta"))
        #expect(try Zstd.decompress(skippable, maximumSize: 10) == [])
        #expect(try Zstd.decompress(skippable + a + skippable + b + skippable, maximumSize: 9) == bytes("alphabeta"))
        // A skippable frame whose length runs past the input is a truncation, not a crash.
        let cut: [UInt8] = [0x50, 0x2A, 0x4D, 0x18, 200, 0, 0, 0, 1]
        let error = #expect(throws: ZstdError.self) { _ = try Zstd.decompress(cut, maximumSize: 100) }
        #expect(error?.code == .truncated)
    }

    @Test("concatenated frames with and without content sizes decompress in order, within the bound")
    func concatenatedMixedFrames() throws {
        let sized = try Zstd.compress([UInt8](repeating: 1, count: 1000))
        let stream = try ZstdCompressionStream()
        let unsized = try stream.compress([UInt8](repeating: 2, count: 1000)) + stream.finish()
        #expect(try Zstd.frameContentSize(unsized) == nil)
        let both = try Zstd.decompress(sized + unsized + sized, maximumSize: 3000)
        #expect(both == [UInt8](repeating: 1, count: 1000) + [UInt8](repeating: 2, count: 1000) + [UInt8](repeating: 1, count: 1000))
        let over = #expect(throws: ZstdError.self) { _ = try Zstd.decompress(sized + unsized + sized, maximumSize: 2999) }
        #expect(over?.code == .exceedsBound)
    }

    @Test("a frame demanding a 2 GiB window without a content size is refused, not allocated")
    func hugeWindowFrame() throws {
        // Magic, descriptor (no content size, not single-segment), window descriptor with
        // exponent 21 (2^31 bytes), then one last raw block of 1 byte.
        let frame: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD, 0x00, 21 << 3, 0x09, 0x00, 0x00, 0x41]
        let error = #expect(throws: ZstdError.self) { _ = try Zstd.decompress(frame, maximumSize: 1 << 40) }
        #expect(error?.code == .windowTooLarge)
    }

    @Test("a frame claiming a huge content size is refused before allocation, whatever the bound's sign")
    func hugeClaimedContentSize() throws {
        // Magic, descriptor (single segment, 8-byte content size), that size (2^62), an empty
        // last raw block.
        var frame: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD, 0xE0]
        frame += withUnsafeBytes(of: (UInt64(1) << 62).littleEndian) { Array($0) }
        frame += [0x01, 0x00, 0x00]
        let error = #expect(throws: ZstdError.self) { _ = try Zstd.decompress(frame, maximumSize: 1 << 30) }
        #expect(error?.code == .exceedsBound)
        let negative = #expect(throws: ZstdError.self) { _ = try Zstd.decompress(try Zstd.compress(bytes("x")), maximumSize: -1) }
        #expect(negative?.code == .exceedsBound)
    }

    @Test("a frame read with another dictionary than its own fails with dictionary_wrong")
    func dictionaryMismatch() throws {
        func samples(_ seed: UInt64) -> [[UInt8]] {
            var generator = SeededGenerator(seed: seed)
            return (0..<400).map { i in
                Array("{\"id\":\(i),\"kind\":\"record-\(seed)\",\"name\":\"n\(UInt8.random(in: 0...255, using: &generator))\",\"ok\":true}".utf8)
            }
        }
        let first = try ZstdDictionary.train(samples: samples(1), capacity: 4096)
        let second = try ZstdDictionary.train(samples: samples(2), capacity: 4096)
        #expect(first.id != second.id)
        let frame = try Zstd.compress(samples(1)[0], dictionary: first)
        #expect(Zstd.dictionaryID(ofFrame: frame) == first.id)
        let wrong = #expect(throws: ZstdError.self) { _ = try Zstd.decompress(frame, maximumSize: 1000, dictionary: second) }
        #expect(wrong?.code == .dictionaryWrong)
        let none = #expect(throws: ZstdError.self) { _ = try Zstd.decompress(frame, maximumSize: 1000) }
        #expect(none?.code == .dictionaryWrong)
        #expect(try Zstd.decompress(frame, maximumSize: 1000, dictionary: first) == samples(1)[0])
    }

    @Test("compression levels out of range are clamped, even at Int's extremes")
    func levelsClamp() throws {
        let input = [UInt8](repeating: 9, count: 5000)
        for level in [Int.min, -1_000_000, Zstd.minimumLevel, 0, Zstd.maximumLevel, 1000, Int.max] {
            let frame = try Zstd.compress(input, level: level)
            #expect(try Zstd.decompress(frame, maximumSize: input.count) == input, "level \(level)")
            let stream = try ZstdCompressionStream(level: level, contentSize: input.count)
            let streamed = try stream.compress(input) + stream.finish()
            #expect(try Zstd.decompress(streamed, maximumSize: input.count) == input, "streamed level \(level)")
        }
    }

    @Test("a stream fed more or less than its pledged size fails instead of writing a wrong frame")
    func pledgedSizeMismatch() throws {
        let more = try ZstdCompressionStream(contentSize: 10)
        #expect(throws: ZstdError.self) { _ = try more.compress([UInt8](repeating: 1, count: 11)) + more.finish() }
        let less = try ZstdCompressionStream(contentSize: 10)
        #expect(throws: ZstdError.self) { _ = try less.compress([UInt8](repeating: 1, count: 9)) + less.finish() }
    }
}
