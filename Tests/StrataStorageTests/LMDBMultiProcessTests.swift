import Foundation
import StrataStorage
import StrataTestSupport
import Testing

/// A running `StrataStorageProbe`, driven line by line.
final class Probe {
    let process = ChildProcess()
    let input = Pipe()
    let output = Pipe()
    private var buffer = Data()

    init(environmentPath: String, mapSize: Int) throws {
        process.executableURL = BuildProducts.executable("StrataStorageProbe")
        process.arguments = [environmentPath, String(mapSize)]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let greeting = try readLine()
        guard greeting == "ready" else { throw ProbeError(message: "probe said \(greeting)") }
    }

    struct ProbeError: Error { let message: String }

    func send(_ command: String) throws -> String {
        writeIgnoringBrokenPipe(Data((command + "\n").utf8), to: input.fileHandleForWriting)
        return try readLine()
    }

    private func readLine() throws -> String {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { throw ProbeError(message: "probe exited: \(String(decoding: buffer, as: UTF8.self))") }
            buffer.append(chunk)
        }
    }

    deinit {
        if process.isRunning {
            writeIgnoringBrokenPipe(Data("quit\n".utf8), to: input.fileHandleForWriting)
            process.waitUntilExit()
        }
    }
}

@Suite("LMDB across processes")
struct LMDBMultiProcessTests {
    @Test("two processes see each other's commits on one environment")
    func commitsCrossProcesses() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir) { $0.mapSize = 1 << 20 }
        let db = try env.database(named: "main")
        let probe = try Probe(environmentPath: dir.file("env"), mapSize: 1 << 20)

        #expect(try probe.send("put from-probe hello") == "ok")
        #expect(try env.read { try $0.value(forKey: bytes("from-probe"), in: db) } == bytes("hello"))

        try env.write { try $0.put(bytes("world"), forKey: bytes("from-test"), in: db) }
        #expect(try probe.send("get from-test") == "world")
        #expect(try probe.send("count") == "2")
    }

    @Test("a map grown by one process is usable by the other, both ways")
    func mapGrowthCrossProcesses() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir) { $0.mapSize = 1 << 20 }
        let db = try env.database(named: "main")
        let probe = try Probe(environmentPath: dir.file("env"), mapSize: 1 << 20)
        let probeInitialMap = Int(try probe.send("mapsize")) ?? 0

        // This process grows the map well past the probe's 1 MiB.
        try env.write { (txn: borrowing LMDBTransaction) throws in
            for i in 0..<2048 { try txn.put([UInt8](repeating: 1, count: 4096), forKey: bytes("test-bulk-\(i)"), in: db) }
        }
        #expect(env.mapSize > 1 << 20)
        // The probe's next transaction meets MDB_MAP_RESIZED, adopts the size, and goes on.
        #expect(try probe.send("put after-growth yes") == "ok")
        #expect(try probe.send("count") == "2049")
        let probeMap = Int(try probe.send("mapsize")) ?? 0
        #expect(probeMap > probeInitialMap)
        #expect(probeMap >= env.mapSize)

        // And the other way round: the probe grows it further; this process keeps working.
        #expect(try probe.send("bulk 4096 4096") == "ok")
        try env.write { try $0.put(bytes("still"), forKey: bytes("after-probe-growth"), in: db) }
        #expect(try env.read { try $0.count(in: db) } == 2049 + 4096 + 1)
        #expect(env.mapSize >= Int(try probe.send("mapsize")) ?? .max)
    }
}
