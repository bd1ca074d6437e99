import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// The `strata` commands on a disk that fills: the error names what ran out and where, and
/// no output that stopped halfway is left looking complete.
@Suite("Exhaustion review: commands on a full disk")
struct ExhaustionReviewCommandTests {
    /// A store of 300 notes of about 1 KB each: exports of a few hundred KB, past the
    /// 64 KiB the output is written in.
    func makeNotesStore() throws -> (TemporaryDirectory, String) {
        let directory = try TemporaryDirectory("strata-cli")
        let path = directory.file("Notes.strata")
        let model = try ManagedObjectModel {
            Entity("Note") {
                Attribute("title", .string)
                Attribute("body", .string)
            }
        }
        var configuration = EventLog.Configuration()
        configuration.initialMapSize = 4 << 20
        configuration.durability = .fast
        let log = try EventLog(path: path, model: model, configuration: configuration)
        for batch in 0..<3 {
            var draft = TransactionDraft(author: "notes")
            for n in 0..<100 {
                let body = String(repeating: "note \(batch * 100 + n) ", count: 100)
                _ = draft.insert("Note", values: ["title": .attribute(.string("note \(n)")), "body": .attribute(.string(body))])
            }
            try log.commit(draft)
        }
        return (directory, path)
    }

    @Test("an export to a file on a disk that fills fails naming the file, and leaves no partial file behind",
          arguments: ["ndjson", "json", "sql"])
    func exportToFullDisk(format: String) throws {
        let (directory, store) = try makeNotesStore()
        let whole = try strata("export", store, "--format", format)
        #expect(whole.status == 0, "\(whole.standardError)")
        guard let fs = try SmallFileSystem(kilobytes: 512) else {
            print("skipped: needs root and permission to mount a tmpfs")
            return
        }
        // Room for the first 64 KiB blocks, not for the whole.
        try fs.fill(leaving: 160 << 10)
        #expect(whole.standardOutput.utf8.count > fs.freeBytes + (64 << 10))
        let output = fs.file("export.\(format)")
        let result = try strata("export", store, "--format", format, "--output", output)
        _ = directory
        #expect(result.status == 1)
        #expect(result.standardError.contains("can't write to \(output): No space left on device"), "\(result.standardError)")
        // Before: the first blocks stayed in place — for ndjson whole lines, which read as an
        // export of fewer objects — and kept the disk full.
        #expect(!FileManager.default.fileExists(atPath: output))
        #expect(result.standardError.contains("removed"), "\(result.standardError)")
    }

    @Test("a csv export on a disk that fills fails naming the file, and leaves no partial file behind")
    func csvExportToFullDisk() throws {
        let (directory, store) = try makeNotesStore()
        guard let fs = try SmallFileSystem(kilobytes: 512) else {
            print("skipped: needs root and permission to mount a tmpfs")
            return
        }
        try fs.fill(leaving: 160 << 10)
        let output = fs.file("csv")
        let result = try strata("export", store, "--format", "csv", "--output", output)
        _ = directory
        #expect(result.status == 1)
        #expect(result.standardError.contains("No space left on device"), "\(result.standardError)")
        // The file it was writing is named, and taken back (entities finished before it stay).
        let failed = try #require(result.standardError.firstRange(of: "can't write to ").map { range in
            String(result.standardError[range.upperBound...].prefix { $0 != ":" })
        })
        #expect(failed.hasPrefix(output + "/") && failed.hasSuffix(".csv"), "\(result.standardError)")
        #expect(!FileManager.default.fileExists(atPath: failed))
        #expect(result.standardError.contains("removed"), "\(result.standardError)")
    }

    @Test("a replay --into on a disk that fills fails naming the disk, and leaves no partial store")
    func replayIntoFullDisk() throws {
        let store = try makeLeagueStore(extraTransactions: 40)
        guard let fs = try SmallFileSystem(kilobytes: 512) else {
            print("skipped: needs root and permission to mount a tmpfs")
            return
        }
        try fs.fill(leaving: 64 << 10)
        let into = fs.file("copy.strata")
        let result = try strata("replay", store.path, "--into", into)
        #expect(result.status == 1)
        #expect(result.standardError.contains("No space left on device"), "\(result.standardError)")
        #expect(result.standardError.contains(into), "\(result.standardError)")
        #expect(!FileManager.default.fileExists(atPath: into))
    }

    @Test("verify with a full temporary directory says the scratch space ran out, not that the store is damaged")
    func verifyWithFullTemporaryDirectory() throws {
        let store = try makeLeagueStore(extraTransactions: 40)
        guard let fs = try SmallFileSystem(kilobytes: 256) else {
            print("skipped: needs root and permission to mount a tmpfs")
            return
        }
        try fs.fill(leaving: 16 << 10)
        let result = try runProcess(
            BuildProducts.executable("strata"), ["verify", store.path], environment: ["TMPDIR": fs.path])
        #expect(result.status == 1)
        #expect(result.standardError.contains("No space left on device"), "\(result.standardError)")
        #expect(result.standardError.contains(fs.path), "\(result.standardError)")
        // The store itself is fine.
        try fs.drain()
        let again = try runProcess(
            BuildProducts.executable("strata"), ["verify", store.path], environment: ["TMPDIR": fs.path])
        #expect(again.status == 0, "\(again.standardError)")
    }

    @Test("verify short of file descriptors says so and stops, instead of reporting the store damaged")
    func verifyWithFewFileDescriptors() throws {
        let store = try makeLeagueStore(extraTransactions: 10)
        do {
            let log = try EventLog(openingExistingAt: store.path, readOnly: false)
            try log.compact(CompactionRequest())
        }
        let strataPath = BuildProducts.executable("strata").path
        var outcomes: [String] = []
        // The limit at which the segment (or the scratch environment) is the open that fails
        // depends on what the process holds at start: try a few.
        for limit in 6...14 {
            let result = try runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", "ulimit -n \(limit) && exec \"$0\" verify \"$1\"", strataPath, store.path])
            if result.status == 0 { break }
            // Before: "segment: … Too many open files (errno 24)" followed by dozens of
            // before-image and projection "problems", as if the store were damaged.
            #expect(result.standardError.contains("Too many open files") || result.standardOutput.contains("Too many open files"), "\(limit): \(result.standardError)")
            #expect(!result.standardOutput.contains("problems"), "\(limit): \(result.standardOutput)")
            outcomes.append(result.standardError)
        }
        #expect(!outcomes.isEmpty)
        #expect(try strata("verify", store.path).status == 0)
    }

    @Test("compact short of file descriptors names the cause in words, and the store verifies")
    func compactWithFewFileDescriptors() throws {
        let strataPath = BuildProducts.executable("strata").path
        var failures = 0
        for limit in 5...12 {
            let store = try makeLeagueStore(extraTransactions: 10)
            let result = try runProcess(
                URL(fileURLWithPath: "/bin/sh"), ["-c", "ulimit -n \(limit) && exec \"$0\" compact \"$1\"", strataPath, store.path])
            if result.status != 0 {
                failures += 1
                // Before: "cannot create PATH (errno 24)".
                #expect(result.standardError.contains("Too many open files"), "\(limit): \(result.standardError)")
            }
            #expect(try strata("verify", store.path).status == 0)
            if result.status == 0 { break }
        }
        #expect(failures > 0)
    }
}
