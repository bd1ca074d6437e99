import Foundation
import StrataTestSupport
import Testing

@Suite("strata: version, help, usage errors")
struct BasicCommandTests {
    @Test("--version prints the version and exits 0")
    func version() throws {
        let result = try strata("--version")
        #expect(result.status == 0)
        #expect(result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "0.1.0")
    }

    @Test("--help lists the subcommands and the exit statuses")
    func help() throws {
        let result = try strata("--help")
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("doctor"))
        // Help text wraps to the terminal width; compare with whitespace collapsed.
        let flattened = result.standardOutput.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(flattened.contains("0 success, 1 a problem was found or an operation failed, 64 bad usage"))
    }

    @Test("every subcommand's help has examples")
    func subcommandHelpHasExamples() throws {
        let result = try strata("help", "doctor")
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("Examples:"))
    }

    @Test("an unknown subcommand or option is bad usage: exit 64, named on stderr")
    func badUsage() throws {
        let unknown = try strata("frobnicate")
        #expect(unknown.status == 64)
        #expect(unknown.standardError.contains("frobnicate"))
        let badOption = try strata("doctor", "--no-such-option")
        #expect(badOption.status == 64)
        #expect(badOption.standardError.contains("--no-such-option"))
    }
}

@Suite("strata doctor")
struct DoctorCommandTests {
    @Test("passes every check on this machine, growing a real LMDB map")
    func passes() throws {
        let dir = try TemporaryDirectory()
        let target = dir.file("scratch")
        let result = try strata("doctor", "--directory", target, "--keep")
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardOutput.contains("all checks passed"))
        #expect(!result.standardOutput.contains("FAILED"))
        #expect(result.standardOutput.contains("ok      LMDB write, map growth and read: 4096 records"))
        // --keep left a real LMDB environment behind.
        #expect(FileManager.default.fileExists(atPath: target + "/data.mdb"))
    }

    @Test("removes its scratch environment unless asked to keep it")
    func cleansUp() throws {
        let dir = try TemporaryDirectory()
        let target = dir.file("scratch")
        let result = try strata("doctor", "--directory", target)
        #expect(result.status == 0)
        #expect(!FileManager.default.fileExists(atPath: target))
    }

    @Test("a --directory whose parents don't exist yet: the directories it created for them go too (unless --keep), an existing parent stays")
    func cleansUpCreatedParents() throws {
        let dir = try TemporaryDirectory()
        let target = dir.file("a/b/scratch")
        let result = try strata("doctor", "--directory", target)
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("a")), "before, a/b was left behind")
        #expect(FileManager.default.fileExists(atPath: dir.path))
        let kept = try strata("doctor", "--directory", target, "--keep")
        #expect(kept.status == 0)
        #expect(FileManager.default.fileExists(atPath: target + "/data.mdb"))
    }

    @Test("an existing --directory is refused as bad usage, naming it")
    func refusesExistingDirectory() throws {
        let dir = try TemporaryDirectory()
        let result = try strata("doctor", "--directory", dir.path)
        #expect(result.status == 64)
        #expect(result.standardError.contains(dir.path))
        #expect(result.standardError.contains("already exists"))
    }
}
