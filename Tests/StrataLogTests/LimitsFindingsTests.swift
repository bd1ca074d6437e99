import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

// Findings of a review of the event log's limits (session 12): each test failed on the code
// before its fix (the first two trapped).

@Suite("Event log: primary keys run out cleanly; decimals in unique indexes")
struct LimitsFindingsTests {
    @Test("reserving past the last primary key is refused by name and writes nothing (it trapped on overflow)")
    func reservationPastTheLastKey() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        _ = try log.reservePrimaryKeys(of: "Club", count: Int.max)
        _ = try log.reservePrimaryKeys(of: "Club", count: Int.max)  // the last given is 2^64 - 2
        let head = try log.head
        #expect(throws: LogError.self) { _ = try log.reservePrimaryKeys(of: "Club", count: 2) }
        #expect(try log.head == head)
        #expect(try log.reservePrimaryKeys(of: "Club", count: 1) == UInt64.max...UInt64.max)
        #expect(try log.verify().isClean)
    }

    @Test("an insert after every primary key was given out is refused by name and writes nothing (it trapped on overflow)")
    func insertAfterTheLastKey() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        _ = try log.reservePrimaryKeys(of: "Club", count: Int.max)
        _ = try log.reservePrimaryKeys(of: "Club", count: Int.max)
        _ = try log.reservePrimaryKeys(of: "Club", count: 1)
        let head = try log.head
        var draft = TransactionDraft()
        _ = draft.insert("Club", values: ["name": s("Otters")])
        do {
            try log.commit(draft)
            Issue.record("the insert should have been refused")
        } catch LogError.invalidOperation(let message) {
            #expect(message.contains("Club") && message.contains("every primary key"))
        }
        #expect(try log.head == head)
        // Other entities are unaffected.
        var member = TransactionDraft()
        _ = member.insert("Member", values: ["name": s("Ada")])
        try log.commit(member)
    }

    @Test("a unique decimal holds two decimals that share their nearest double; the same decimal twice is refused; whole numbers clash as before")
    func uniqueDecimals() throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Price") {
                Attribute("amount", .decimal)
                Unique("amount")
            }
        }
        let log = try openLog(dir, model: model)
        func insert(_ text: String) throws {
            var draft = TransactionDraft()
            _ = draft.insert("Price", values: ["amount": .attribute(.decimal(try #require(Decimal(string: text))))])
            try log.commit(draft)
        }
        try insert("0.1")
        try insert("0.10000000000000000001")  // the same nearest double, another value
        #expect(throws: LogError.self) { try insert("0.1") }
        #expect(throws: LogError.self) { try insert("0.10000000000000000001") }
        try insert("5")
        #expect(throws: LogError.self) { try insert("5") }
        // Two in one draft that share a double but differ are both kept.
        var draft = TransactionDraft()
        _ = draft.insert("Price", values: ["amount": .attribute(.decimal(try #require(Decimal(string: "0.3"))))])
        _ = draft.insert("Price", values: ["amount": .attribute(.decimal(try #require(Decimal(string: "0.30000000000000000001"))))])
        try log.commit(draft)
        try log.read { (reader: borrowing LogReader) throws in #expect(try reader.count(of: "Price") == 5) }
        #expect(try log.verify().isClean)
    }
}
