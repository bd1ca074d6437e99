import Foundation
import StrataStorage
import StrataTestSupport
import Testing

@Suite("LMDB: a data file shorter than the environment it holds")
struct LMDBTruncatedFileTests {
    /// An environment in `dir/env` of well over 40,000 bytes, closed.
    func makeFilledEnvironment(_ dir: TemporaryDirectory) throws -> String {
        let env = try makeEnvironment(dir) { $0.mapSize = 1 << 20 }
        let db = try env.database(named: "main")
        try env.write { (txn: borrowing LMDBTransaction) throws in
            for i in 0..<32 { try txn.put([UInt8](repeating: 7, count: 2000), forKey: bytes("key-\(i)"), in: db) }
        }
        return (dir.file("env") as NSString).appendingPathComponent("data.mdb")
    }

    @Test("is refused at open, naming data.mdb, its size and the size the environment uses", arguments: [false, true])
    func truncatedIsRefused(readOnly: Bool) throws {
        let dir = try TemporaryDirectory()
        let dataFile = try makeFilledEnvironment(dir)
        let fullSize = try #require(try FileManager.default.attributesOfItem(atPath: dataFile)[.size] as? Int)
        #expect(fullSize > 65_536)
        let handle = try #require(FileHandle(forUpdatingAtPath: dataFile))
        try handle.truncate(atOffset: 40_000)
        try handle.close()

        // In another process first: before the check, the open died there of SIGBUS.
        let probe = try runProcess(BuildProducts.executable("StrataStorageProbe"), [dir.file("env")], input: "count\nquit\n")
        try #require(probe.status == 1, "the probe should fail to open: status \(probe.status), \(probe.standardOutput)")
        #expect(probe.standardError.contains("\(dataFile) is 40000 bytes, but the environment uses \(fullSize) bytes"), "\(probe.standardError)")

        #expect {
            try makeEnvironment(dir) { $0.isReadOnly = readOnly }
        } throws: { error in
            guard let error = error as? LMDBError, error.code == .corrupted else { return false }
            return error.description.contains("shorter than the environment")
                && error.description.contains("\(dataFile) is 40000 bytes, but the environment uses \(fullSize) bytes")
        }
    }

    @Test("a healthy environment another process is growing opens every time")
    func growingEnvironmentOpens() async throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir) { $0.mapSize = 1 << 20 }
        let db = try env.database(named: "main")
        let writer = Task.detached {
            for round in 0..<60 {
                try env.write { (txn: borrowing LMDBTransaction) throws in
                    for i in 0..<16 { try txn.put([UInt8](repeating: 1, count: 4096), forKey: bytes("r\(round)-\(i)"), in: db) }
                }
            }
        }
        for _ in 0..<12 {
            let probe = try runProcess(BuildProducts.executable("StrataStorageProbe"), [dir.file("env"), String(1 << 20)], input: "count\nquit\n")
            #expect(probe.status == 0, "\(probe.standardError)")
            #expect(probe.standardOutput.hasPrefix("ready\n"))
        }
        try await writer.value
        #expect(try env.read { try $0.count(in: db) } == 60 * 16)
    }
}
