import ArgumentParser
import Foundation
import Strata
import StrataStorage

/// `strata doctor`: checks that this machine can run Strata — the LMDB and zstd libraries
/// load, an environment can be created, written, grown and read, and zstd frames round-trip.
struct DoctorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check that LMDB and zstd work on this machine.",
        discussion: """
            Creates a scratch LMDB environment (in a temporary directory unless --directory
            is given, which must not exist yet), writes more than its initial map holds so
            the map has to grow, reads everything back, and round-trips data through zstd.
            Each check prints one line; any failure makes the exit status 1.

            Examples:
              strata doctor
              strata doctor --directory /var/tmp/strata-check --keep
            """
    )

    @Option(help: "Where to create the scratch environment (must not exist).")
    var directory: String?

    @Flag(help: "Keep the scratch environment instead of removing it.")
    var keep = false

    func validate() throws {
        try refuseEmpty(directory, "--directory", "give the path of a directory that doesn't exist")
        if let directory, FileManager.default.fileExists(atPath: directory) {
            throw ValidationError("--directory \(directory) already exists; give a path that doesn't")
        }
    }

    func run() throws {
        // Without --directory, in the temporary directory, which must exist (it isn't made).
        let root = try directory
            ?? (CommandFailure.wrap { try existingTemporaryDirectory() } as NSString)
            .appendingPathComponent("strata-doctor-\(UUID().uuidString.prefix(8))")
        // Removed with the directories made for it: `--directory a/b/scratch` with no `a`
        // leaves no `a` behind (before, it left `a/b`).
        let created = Self.outermostMissing(root)
        defer { if !keep { try? FileManager.default.removeItem(atPath: created) } }

        try writeLine("strata \(StrataVersion.current)")
        try writeLine("LMDB \(LMDBEnvironment.libraryVersion), zstd \(Zstd.libraryVersion)")
        var failures = 0
        func step(_ name: String, _ body: () throws -> String) throws {
            let line: String
            do {
                let detail = try body()
                line = "ok      \(name)\(detail.isEmpty ? "" : ": \(detail)")"
            } catch {
                failures += 1
                line = "FAILED  \(name): \(error)"
            }
            try writeLine(line)
        }

        var options = LMDBEnvironment.Options()
        options.mapSize = 1 << 20
        let records = 4096
        let value = [UInt8](repeating: 0x5A, count: 1024)
        try step("LMDB write, map growth and read") {
            let env = try LMDBEnvironment(path: root, databases: [DatabaseDescriptor("doctor")], options: options)
            let db = try env.database(named: "doctor")
            let before = env.mapSize
            try env.write { txn in
                for i in 0..<records {
                    var key = UInt32(i).bigEndian
                    try withUnsafeBytes(of: &key) { try txn.put(value, forKey: Array($0), in: db, flags: .append) }
                }
            }
            let count = try env.read { txn in try txn.count(in: db) }
            guard count == records else { throw DoctorError("read back \(count) records, wrote \(records)") }
            return "\(records) records, map \(before >> 20) MiB → \(env.mapSize >> 20) MiB"
        }
        try step("zstd round trip with checksum") {
            let input = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 % 251) }
            let frame = try Zstd.compress(input)
            let output = try Zstd.decompress(frame, maximumSize: input.count)
            guard output == input else { throw DoctorError("decompressed bytes differ") }
            return "\(input.count) → \(frame.count) bytes"
        }
        try step("zstd bound refuses an oversized frame") {
            let frame = try Zstd.compress([UInt8](repeating: 0, count: 1 << 20))
            do {
                _ = try Zstd.decompress(frame, maximumSize: 1024)
                throw DoctorError("a 1 MiB frame was accepted under a 1 KiB bound")
            } catch let error as ZstdError where error.code == .exceedsBound {
                return ""
            }
        }
        // Kept where? Without --directory it is a fresh temporary directory: say which.
        if keep { try writeLine("kept    the scratch environment at \(root)") }
        if failures > 0 { throw ExitStatus.failure }
        try writeLine("all checks passed")
    }
}

extension DoctorCommand {
    /// The outermost directory of `path` that doesn't exist yet (`path` itself when its
    /// parent exists): removing it removes everything the run created.
    static func outermostMissing(_ path: String) -> String {
        var missing = path
        var parent = (path as NSString).deletingLastPathComponent
        while !parent.isEmpty, parent != missing, !FileManager.default.fileExists(atPath: parent) {
            missing = parent
            parent = (parent as NSString).deletingLastPathComponent
        }
        return missing
    }
}

/// A doctor check that found something wrong.
struct DoctorError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
