import Foundation
import StrataTestSupport
import Testing

/// Shows, with the real compiler, that borrowed LMDB data can't outlive its transaction:
/// code that tries to keep a span, a transaction or a cursor doesn't compile, while the
/// same code keeping an owned copy does.
@Suite("LMDB lifetimes, checked by the compiler")
struct LMDBLifetimeTests {
    /// Type-checks `source` against the built StrataStorage module; returns the status and
    /// the compiler's output.
    func typecheck(_ source: String) throws -> ProcessResult {
        let dir = try TemporaryDirectory("lifetime")
        let file = dir.file("snippet.swift")
        try source.write(toFile: file, atomically: true, encoding: .utf8)
        let sources = SpecFiles.packageRoot.appendingPathComponent("Sources")
        return try runProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "swiftc", "-typecheck", "-swift-version", "6",
                "-I", BuildProducts.directory.appendingPathComponent("Modules").path,
                "-Xcc", "-fmodule-map-file=\(sources.path)/CStrataLMDB/module.modulemap",
                "-Xcc", "-fmodule-map-file=\(sources.path)/CStrataZstd/module.modulemap",
                file,
            ])
    }

    @Test("an owned copy may leave the transaction (the control: this compiles)")
    func copyCompiles() throws {
        let result = try typecheck(
            """
            import StrataStorage
            func keep(_ env: LMDBEnvironment, _ db: LMDBDatabase) throws -> [UInt8]? {
                let viaSpan = try env.read { txn in
                    try txn.withValue(forKey: [1], in: db) { span in span.withUnsafeBytes { Array($0) } }
                }
                let viaCopy = try env.read { txn in try txn.value(forKey: [1], in: db) }
                return viaSpan ?? viaCopy
            }
            """)
        #expect(result.status == 0, "\(result.standardError)")
    }

    @Test("a borrowed span can't be returned out of the transaction")
    func spanCannotEscape() throws {
        let result = try typecheck(
            """
            import StrataStorage
            func leak(_ env: LMDBEnvironment, _ db: LMDBDatabase) throws -> Int {
                let span = try env.read { txn in try txn.withValue(forKey: [1], in: db) { $0 } }
                return span?.byteCount ?? 0
            }
            """)
        #expect(result.status != 0)
        #expect(result.standardError.contains("error"))
    }

    @Test("a transaction can't be stored outside its closure")
    func transactionCannotEscape() throws {
        let result = try typecheck(
            """
            import StrataStorage
            func leak(_ env: LMDBEnvironment) throws {
                var kept: LMDBTransaction? = nil
                try env.read { txn in kept = txn }
                _ = kept
            }
            """)
        #expect(result.status != 0)
        #expect(result.standardError.contains("consuming"))
    }

    @Test("a cursor can't be stored outside its transaction")
    func cursorCannotEscape() throws {
        let result = try typecheck(
            """
            import StrataStorage
            func leak(_ env: LMDBEnvironment, _ db: LMDBDatabase) throws {
                var kept: LMDBCursor? = nil
                try env.read { txn in try txn.withCursor(on: db) { cursor in kept = cursor } }
                _ = kept
            }
            """)
        #expect(result.status != 0)
        #expect(result.standardError.contains("consuming"))
    }
}
