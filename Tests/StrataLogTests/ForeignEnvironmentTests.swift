import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// A store path whose `data.mdb` is another program's LMDB environment: a writable open
/// refuses it and writes nothing to it (spec 0004 §1).
@Suite("Event log: another program's LMDB environment")
struct ForeignEnvironmentTests {
    /// Another program's environment at `directory`: a named database `accounts` with two
    /// keys and, in one variant, a plain key in the main database. Returns data.mdb's bytes.
    func makeForeignEnvironment(_ directory: TemporaryDirectory, plainKey: Bool) throws -> Data {
        var options = LMDBEnvironment.Options()
        options.maxDatabases = 4
        do {
            let environment = try LMDBEnvironment(
                path: directory.path, databases: plainKey ? [DatabaseDescriptor(nil)] : [DatabaseDescriptor("accounts")], options: options)
            let database = try plainKey ? #require(environment.unnamedDatabase) : environment.database(named: "accounts")
            try environment.write { txn in
                try txn.put(Array("42".utf8), forKey: Array("alice".utf8), in: database)
                try txn.put(Array("7".utf8), forKey: Array("bob".utf8), in: database)
            }
        }
        return try Data(contentsOf: URL(fileURLWithPath: directory.file("data.mdb")))
    }

    @Test("a writable open with a model, and one without, refuse another program's environment naming what it holds; data.mdb is unchanged", arguments: [false, true])
    func writableOpensRefuse(plainKey: Bool) throws {
        let directory = try TemporaryDirectory()
        let before = try makeForeignEnvironment(directory, plainKey: plainKey)
        let named = plainKey ? "\"alice\"" : "\"accounts\""
        for open in [{ _ = try EventLog(path: directory.path, model: try libraryModel()) },
                     { _ = try EventLog(openingExistingAt: directory.path, readOnly: false) }] as [() throws -> Void] {
            let error = try #require(throws: LogError.self) { try open() }
            let message = "\(error)"
            #expect(message.contains("no Strata store at \(directory.path)"), "\(message)")
            #expect(message.contains("another program's") && message.contains(named), "\(message)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: directory.file("data.mdb"))) == before)
        }
        // The read-only open refuses it too (it lacks the store's tables).
        #expect(throws: LogError.self) { _ = try EventLog(openingExistingAt: directory.path) }
    }

    @Test("an environment with no keys (a store whose creation stopped before its tables) becomes a store; a store reopens")
    func emptyEnvironmentIsCreated() throws {
        let directory = try TemporaryDirectory()
        do { _ = try LMDBEnvironment(path: directory.path, databases: [], options: LMDBEnvironment.Options()) }
        let log = try EventLog(path: directory.path, model: try libraryModel())
        let uuid = log.storeUUID
        let reopened = try EventLog(openingExistingAt: directory.path, readOnly: false)
        #expect(reopened.storeUUID == uuid)
    }
}
