import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

@Suite("Event log: expected versions (optimistic locking)")
struct ExpectedVersionTests {
    @Test("a draft's expected versions are checked inside the commit; a stale or missing object refuses it whole")
    func expectedVersions() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var insert = TransactionDraft()
        let club = insert.insert("Club", values: ["name": s("Otters")])
        let id = try #require(try log.commit(insert).permanentID(for: club))
        #expect(try log.read { (reader: borrowing LogReader) throws in try reader.object(id)?.version } == 1)

        var rename = TransactionDraft()
        rename.update(.stored(id), values: ["name": s("Herons")])
        rename.expectedVersions = [id: 1]
        #expect(try log.commit(rename).sequence == 2)

        var stale = TransactionDraft()
        stale.insert("Club", values: ["name": s("Kites")])
        stale.update(.stored(id), values: ["name": s("Comets")])
        stale.expectedVersions = [id: 1]
        let error = #expect(throws: LogError.self) { try log.commit(stale) }
        #expect(error == .versionMismatch(object: id.description, expected: 1, found: 2))
        #expect(error?.description == "\(id) changed since version 1: it is now version 2")
        #expect(try log.head == 2, "nothing written")

        var delete = TransactionDraft()
        delete.delete(.stored(id))
        try log.commit(delete)
        var gone = TransactionDraft()
        gone.insert("Club", values: ["name": s("Kites")])
        gone.expectedVersions = [id: 2]
        let missing = #expect(throws: LogError.self) { try log.commit(gone) }
        #expect(missing == .versionMismatch(object: id.description, expected: 2, found: nil))
        #expect(try log.head == 3)
    }
}
