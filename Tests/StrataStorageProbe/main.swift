// A second process for the storage tests: opens an LMDB environment and follows commands
// read line by line from standard input, answering each on standard output.
//
//   put KEY VALUE      commit one key
//   get KEY            print the value or "nil"
//   count              print the number of keys
//   bulk N BYTES       commit N values of BYTES bytes each in one transaction
//   mapsize            print the map size this process uses
//   hold N             open N read transactions (each on its own thread) and keep them
//                      open until the process ends; print "holding" once all are open
//   quit
import Foundation
import StrataStorage

func reply(_ text: String) {
    // Unbuffered: the test waits for each answer line.
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: StrataStorageProbe ENV_PATH [MAP_BYTES]\n".utf8))
    exit(64)
}
var options = LMDBEnvironment.Options()
if arguments.count >= 3, let size = Int(arguments[2]) { options.mapSize = size }

do {
    let env = try LMDBEnvironment(path: arguments[1], databases: [DatabaseDescriptor("main")], options: options)
    let db = try env.database(named: "main")
    reply("ready")
    while let line = readLine() {
        let parts = line.split(separator: " ").map(String.init)
        guard let command = parts.first else { continue }
        do {
            switch command {
            case "put" where parts.count == 3:
                try env.write { try $0.put(Array(parts[2].utf8), forKey: Array(parts[1].utf8), in: db) }
                reply("ok")
            case "get" where parts.count == 2:
                let value = try env.read { try $0.value(forKey: Array(parts[1].utf8), in: db) }
                reply(value.map { String(decoding: $0, as: UTF8.self) } ?? "nil")
            case "count":
                reply(String(try env.read { try $0.count(in: db) }))
            case "bulk" where parts.count == 3:
                let n = Int(parts[1]) ?? 0
                let value = [UInt8](repeating: 0x42, count: Int(parts[2]) ?? 0)
                try env.write { txn in
                    for i in 0..<n { try txn.put(value, forKey: Array("probe-bulk-\(i)".utf8), in: db) }
                }
                reply("ok")
            case "hold" where parts.count == 2:
                for _ in 0..<(Int(parts[1]) ?? 0) {
                    let started = DispatchSemaphore(value: 0)
                    Thread.detachNewThread {
                        try? env.read { _ in
                            started.signal()
                            while true { sleep(1000) }
                        }
                    }
                    started.wait()
                }
                reply("holding")
            case "mapsize":
                reply(String(env.mapSize))
            case "quit":
                reply("bye")
                exit(0)
            default:
                reply("error: unknown command \(line)")
            }
        } catch {
            reply("error: \(error)")
        }
    }
} catch {
    FileHandle.standardError.write(Data("probe: \(error)\n".utf8))
    exit(1)
}
