import Foundation
import StrataLog
import StrataTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The `strata` read commands on a store this user may read but not write (a copy owned by
/// another user, a production store inspected as oneself).
@Suite("Environment review: read commands on a store this user can't write")
struct EnvironmentReviewCommandTests {
    /// `setpriv`, when this process is root and has it: the way to run the tool as `nobody`.
    static let setpriv: String? = {
        guard getuid() == 0 else { return nil }
        return ["/usr/bin/setpriv", "/bin/setpriv"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// Runs `strata ARGUMENTS` as user and group 65534 (`nobody`).
    func strataAsNobody(_ arguments: String...) throws -> ProcessResult {
        let setpriv = try #require(Self.setpriv)
        return try runProcess(
            URL(fileURLWithPath: setpriv),
            ["--reuid=65534", "--regid=65534", "--clear-groups", BuildProducts.executable("strata").path] + arguments)
    }

    @Test(
        "info, log, verify and export read a store whose lock file this user can't write",
        .enabled(if: setpriv != nil, "needs root and setpriv to run the tool as another user"))
    func readCommandsWithoutWritableLockFile() throws {
        let store = try makeLeagueStore()
        // Another user may traverse and read, not write: the store's files are root's, 0644.
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: store.directory.path)
        for command in ["info", "log", "verify", "export"] {
            let result = try strataAsNobody(command, store.path)
            // Before: "strata: mdb_env_open: Permission denied (EACCES) — PATH", exit 1.
            #expect(result.status == 0, "\(command): \(result.standardError)")
        }
        // Without a lock file, in a directory this user can't write, the same.
        try FileManager.default.removeItem(atPath: (store.path as NSString).appendingPathComponent("lock.mdb"))
        let result = try strataAsNobody("verify", store.path)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(!FileManager.default.fileExists(atPath: (store.path as NSString).appendingPathComponent("lock.mdb")))
    }

    @Test(
        "while a process has the store open, a read command that can't register a reader says who and why",
        .enabled(if: setpriv != nil, "needs root and setpriv to run the tool as another user"))
    func readCommandRefusedWhileStoreIsOpen() throws {
        let store = try makeLeagueStore()
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: store.directory.path)
        let log = try EventLog(openingExistingAt: store.path, readOnly: false)
        let result = try strataAsNobody("info", store.path)
        #expect(result.status == 1)
        #expect(result.standardError.contains("lock.mdb"), "\(result.standardError)")
        #expect(result.standardError.contains("process \(getpid())"), "\(result.standardError)")
        _ = log
    }

    @Test(
        "a segment this user can't read is reported as unreadable, with the reason, never as missing",
        .enabled(if: setpriv != nil, "needs root and setpriv to run the tool as another user"))
    func unreadableSegments() throws {
        let store = try makeLeagueStore()
        do {
            let log = try EventLog(openingExistingAt: store.path, readOnly: false)
            try log.compact(CompactionRequest())
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: store.directory.path)
        let segments = (store.path as NSString).appendingPathComponent("segments")
        let file = try #require(try FileManager.default.contentsOfDirectory(atPath: segments).first { $0.hasSuffix(".zst") })
        #expect(try strataAsNobody("log", store.path).status == 0)

        // Before: "segment: F-L.zst (events 1…N) is missing from STORE/segments".
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: segments)
        let hidden = try strataAsNobody("log", store.path)
        #expect(hidden.status == 1)
        #expect(!hidden.standardError.contains("missing"), "\(hidden.standardError)")
        #expect(hidden.standardError.contains("isn't searchable by user 65534"), "\(hidden.standardError)")

        // Before: Foundation's "Error Domain=NSCocoaErrorDomain Code=257 …" dump.
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: segments)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: (segments as NSString).appendingPathComponent(file))
        let unreadable = try strataAsNobody("log", store.path)
        #expect(unreadable.status == 1)
        #expect(unreadable.standardError.contains("cannot read \(segments)/\(file): Permission denied (errno 13)"), "\(unreadable.standardError)")
        #expect(!unreadable.standardError.contains("NSCocoaErrorDomain"), "\(unreadable.standardError)")
    }
}
