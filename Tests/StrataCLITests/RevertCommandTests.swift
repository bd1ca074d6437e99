import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// `strata revert STORE SEQ` (spec 0007): a saved transaction reverted by a new `undo of SEQ`
/// transaction, checked against what was written since.
@Suite("strata revert")
struct RevertCommandTests {
    static let model: ManagedObjectModel = {
        do {
            return try ManagedObjectModel {
                Entity("Player") {
                    Attribute("email", .string)
                    Attribute("score", .int64)
                }
            }
        } catch {
            preconditionFailure("the test model is valid: \(error)")
        }
    }()

    private static let p1 = StoredObjectID(entity: "Player", primaryKey: 1)

    /// Transaction 1 inserts Player p1 (score 5) and p2; transaction 2, by "importer", sets
    /// p1's score to 9 and inserts p3.
    static func fixture() throws -> (TemporaryDirectory, store: String) {
        let dir = try TemporaryDirectory()
        let store = dir.file("store")
        let log = try EventLog(path: store, model: model)
        var first = TransactionDraft(author: "setup")
        _ = first.insert("Player", values: ["email": .attribute(.string("a@x")), "score": .attribute(.int64(5))])
        _ = first.insert("Player", values: ["email": .attribute(.string("b@x")), "score": .attribute(.int64(6))])
        _ = try log.commit(first)
        var import2 = TransactionDraft(author: "importer")
        import2.update(.stored(p1), values: ["score": .attribute(.int64(9))])
        _ = import2.insert("Player", values: ["email": .attribute(.string("c@x")), "score": .attribute(.int64(7))])
        _ = try log.commit(import2)
        return (dir, store)
    }

    @Test("--dry-run prints the transaction and the inverse of its changes and writes nothing; the revert then writes 'undo of 2' by the author given, printed as strata log prints it, and the store holds the state before 2, verify clean")
    func dryRunThenRevert() throws {
        let (dir, store) = try Self.fixture()
        defer { withExtendedLifetime(dir) {} }
        let dry = try strata("revert", store, "2", "--dry-run")
        #expect(dry.status == 0, "\(dry.standardOutput)\(dry.standardError)")
        let lines = dry.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("revert       #2  ") == true && lines.first?.contains("save  author importer") == true, "\(dry.standardOutput)")
        #expect(lines.contains("would write  the inverse of these changes (dry run: nothing was written)"))
        #expect(lines.contains { $0.hasPrefix("  delete ") && $0.hasSuffix("/Player/p3") }, "\(dry.standardOutput)")
        #expect(lines.contains("    score: 9 → 5"), "\(dry.standardOutput)")
        #expect(try EventLog(openingExistingAt: store).head == 2)

        let done = try strata("revert", store, "2", "--author", "alice (ops)")
        #expect(done.status == 0, "\(done.standardOutput)\(done.standardError)")
        #expect(done.standardOutput.contains("wrote        #3  "), "\(done.standardOutput)")
        #expect(done.standardOutput.contains("undo of 2  author alice (ops)  context strata revert"), "\(done.standardOutput)")
        #expect(done.standardOutput.contains("    score: 9 → 5"))
        let log = try EventLog(openingExistingAt: store)
        #expect(try log.read { try $0.event(3) }.kind == .undo(of: 2, group: 0))
        #expect(try log.read { try $0.object(Self.p1) }?.values["score"] == .attribute(.int64(5)))
        #expect(try log.read { try $0.object(StoredObjectID(entity: "Player", primaryKey: 3)) } == nil)
        #expect(try log.verify().isClean)
    }

    @Test("a later transaction changed what 2 changed: exit 1 naming the object, the property and both values; nothing written, --dry-run included")
    func conflict() throws {
        let (dir, store) = try Self.fixture()
        defer { withExtendedLifetime(dir) {} }
        do {
            let log = try EventLog(path: store, model: Self.model)
            var later = TransactionDraft(author: "app")
            later.update(.stored(Self.p1), values: ["score": .attribute(.int64(11))])
            _ = try log.commit(later)
        }
        for arguments in [["revert", store, "2"], ["revert", store, "2", "--dry-run"]] {
            let result = try runProcess(BuildProducts.executable("strata"), arguments)
            #expect(result.status == 1)
            #expect(result.standardError.contains("strata: transaction 2 can't be reverted, nothing was written: undo conflict on "), "\(result.standardError)")
            #expect(result.standardError.contains("Player/p1.score") && result.standardError.contains("9") && result.standardError.contains("11"), "\(result.standardError)")
        }
        #expect(try EventLog(openingExistingAt: store).head == 3)
    }

    @Test("several sequences, in any order: --dry-run prints each and their inverse, last first; the revert writes one transaction taking them all back, a score two of them changed set to what it was before the first")
    func severalTransactions() throws {
        let (dir, store) = try Self.fixture()
        defer { withExtendedLifetime(dir) {} }
        do {
            let log = try EventLog(path: store, model: Self.model)
            var third = TransactionDraft(author: "importer")
            third.update(.stored(Self.p1), values: ["score": .attribute(.int64(12))])
            _ = try log.commit(third)
        }
        let dry = try strata("revert", store, "3", "2", "--dry-run")
        #expect(dry.status == 0, "\(dry.standardOutput)\(dry.standardError)")
        let lines = dry.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.filter { $0.hasPrefix("revert       #") }.map { $0.prefix(16) } == ["revert       #2 ", "revert       #3 "], "\(dry.standardOutput)")
        #expect(lines.firstIndex(of: "    score: 12 → 9") ?? .max < lines.firstIndex(of: "    score: 9 → 5") ?? -1, "\(dry.standardOutput)")
        #expect(try EventLog(openingExistingAt: store).head == 3)

        let done = try strata("revert", store, "3", "2")
        #expect(done.status == 0, "\(done.standardOutput)\(done.standardError)")
        #expect(done.standardOutput.contains("wrote        #4  "), "\(done.standardOutput)")
        let log = try EventLog(openingExistingAt: store)
        let written = try log.read { try $0.event(4) }
        #expect(written.kind == .undo(of: 3, group: 0))
        #expect(written.groups.map(\.origin) == [.undo(of: 3, group: 0), .undo(of: 2, group: 0)])
        #expect(try log.read { try $0.object(Self.p1) }?.values["score"] == .attribute(.int64(5)))
        #expect(try log.read { try $0.object(StoredObjectID(entity: "Player", primaryKey: 3)) } == nil)
        #expect(try log.verify().isClean)
    }

    @Test("--where selects the transactions to revert by their header (the importer's, not the setup's or the app's); a malformed one is exit 64 naming it, one accepting nothing exit 1; nothing written by either")
    func revertWhere() throws {
        let (dir, store) = try Self.fixture()
        defer { withExtendedLifetime(dir) {} }
        do {
            let log = try EventLog(path: store, model: Self.model)
            var app = TransactionDraft(author: "app")
            _ = app.insert("Player", values: ["email": .attribute(.string("d@x")), "score": .attribute(.int64(1))])
            _ = try log.commit(app)
            var third = TransactionDraft(author: "importer")
            third.update(.stored(Self.p1), values: ["score": .attribute(.int64(12))])
            _ = try log.commit(third)
        }
        let bad = try strata("revert", store, "--where", "author ==")
        #expect(bad.status == 64 && bad.standardError.contains("--where"), "\(bad.standardError)")
        let unknown = try strata("revert", store, "--where", "colour == 'red'")
        #expect(unknown.status == 64 && unknown.standardError.contains("colour"), "\(unknown.standardError)")
        let none = try strata("revert", store, "--where", "author == 'nobody'")
        #expect(none.status == 1 && none.standardError.contains("no save, undo, redo or import is accepted by --where"), "\(none.standardError)")
        let dry = try strata("revert", store, "--where", "author == 'importer'", "--dry-run")
        #expect(dry.status == 0, "\(dry.standardError)")
        let reverted = dry.standardOutput.split(separator: "\n").filter { $0.hasPrefix("revert       #") }.map { String($0.prefix(16)) }
        #expect(reverted == ["revert       #2 ", "revert       #4 "], "\(dry.standardOutput)")
        #expect(try EventLog(openingExistingAt: store).head == 4)
        let done = try strata("revert", store, "--where", "author == 'importer' AND transactionNumber >= 2")
        #expect(done.status == 0, "\(done.standardError)")
        let log = try EventLog(openingExistingAt: store)
        #expect(try log.read { try $0.object(Self.p1) }?.values["score"] == .attribute(.int64(5)))
        #expect(try log.read { try $0.object(StoredObjectID(entity: "Player", primaryKey: 4)) } != nil, "the app's insert is kept")
        #expect(try log.verify().isClean)
    }

    @Test("several sequences with an unlisted transaction between them that changed the same value: exit 1 naming it, nothing written")
    func severalWithATransactionBetween() throws {
        let (dir, store) = try Self.fixture()
        defer { withExtendedLifetime(dir) {} }
        do {
            let log = try EventLog(path: store, model: Self.model)
            for (author, score) in [("app", 11), ("importer", 13)] as [(String, Int64)] {
                var draft = TransactionDraft(author: author)
                draft.update(.stored(Self.p1), values: ["score": .attribute(.int64(score))])
                _ = try log.commit(draft)
            }
        }
        let result = try strata("revert", store, "2", "4")
        #expect(result.status == 1)
        #expect(result.standardError.contains("strata: transactions 2, 4 can't be reverted, nothing was written: undo conflict on "), "\(result.standardError)")
        #expect(result.standardError.contains("from transaction 3, between them"), "\(result.standardError)")
        #expect(try EventLog(openingExistingAt: store).head == 4)
        let all = try strata("revert", store, "2", "3", "4")
        #expect(all.status == 0, "\(all.standardError)")
        #expect(try EventLog(openingExistingAt: store).read { try $0.object(Self.p1) }?.values["score"] == .attribute(.int64(5)))
    }

    @Test("sequence 0, one past the head and a reservation are refused with exit 1, writing nothing")
    func refusals() throws {
        let (dir, store) = try Self.fixture()
        defer { withExtendedLifetime(dir) {} }
        let zero = try strata("revert", store, "0")
        #expect(zero.status == 1 && zero.standardError.contains("nothing to revert"), "\(zero.standardError)")
        let past = try strata("revert", store, "3")
        #expect(past.status == 1 && past.standardError.contains("past the head (2)"), "\(past.standardError)")
        do {
            let log = try EventLog(path: store, model: Self.model)
            _ = try log.reservePrimaryKeys(of: "Player", count: 2, author: "app", contextName: nil)
        }
        let reservation = try strata("revert", store, "3")
        #expect(reservation.status == 1 && reservation.standardError.contains("changes no object"), "\(reservation.standardError)")
        #expect(try EventLog(openingExistingAt: store).head == 3)
    }
}

/// `strata log --where PREDICATE` (spec 0007): transactions a predicate over their header accepts.
@Suite("strata log --where")
struct LogWhereCommandTests {
    @Test("--where selects by author, transactionNumber and processID, alone and with --object; an unknown key or a malformed predicate is exit 64 naming it")
    func logWhere() throws {
        let (dir, store) = try RevertCommandTests.fixture()
        defer { withExtendedLifetime(dir) {} }
        func headers(_ arguments: String...) throws -> [String] {
            let result = try runProcess(BuildProducts.executable("strata"), ["log", store] + arguments)
            #expect(result.status == 0, "\(result.standardError)")
            return result.standardOutput.split(separator: "\n").filter { $0.hasPrefix("#") }.map { String($0.prefix(while: { $0 != " " })) }
        }
        #expect(try headers("--where", "author != 'setup'") == ["#2"])
        #expect(try headers("--where", "transactionNumber <= 1 OR author == 'nobody'") == ["#1"])
        let pid = ProcessInfo.processInfo.processIdentifier
        #expect(try headers("--where", "processID == \(pid)") == ["#1", "#2"])
        let uuid = try EventLog(openingExistingAt: store).storeUUID.uuidString
        #expect(try headers("--object", "x-strata://\(uuid)/Player/p1", "--where", "author == 'importer'") == ["#2"])

        let unknown = try strata("log", store, "--where", "authr == 'x'")
        #expect(unknown.status == 64 && unknown.standardError.contains("reads authr, which a transaction doesn't have"), "\(unknown.standardError)")
        let malformed = try strata("log", store, "--where", "author ==")
        #expect(malformed.status == 64 && malformed.standardError.contains("--where: syntax error"), "\(malformed.standardError)")
    }
}
