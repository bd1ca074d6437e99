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

@Suite("Event log: commit(preparedBy:)")
struct PreparedCommitTests {
    @Test("the draft is made inside the write transaction: its reads see the head it commits on; nil commits nothing; a throw writes nothing")
    func preparedBy() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var insert = TransactionDraft()
        let club = insert.insert("Club", values: ["name": s("Otters")])
        let id = try #require(try log.commit(insert).permanentID(for: club))

        // The draft's expected version is the one read inside: the commit takes it.
        let result = try log.commit(preparedBy: { () throws -> TransactionDraft? in
            let version = try #require(try log.read { (reader: borrowing LogReader) throws in try reader.version(of: id) })
            var rename = TransactionDraft(author: "locker")
            rename.update(.stored(id), values: ["name": s("Herons")])
            rename.expectedVersions = [id: version]
            return rename
        })
        #expect(result?.sequence == 2)
        #expect(result?.event.author == "locker")
        #expect(try log.read { (reader: borrowing LogReader) throws in try reader.object(id)?.version } == 2)

        // Nil: nothing is committed, nil comes back.
        #expect(try log.commit(preparedBy: { nil }) == nil)
        #expect(try log.head == 2)

        // A throw from the closure, or a draft the commit refuses, writes nothing.
        struct Refused: Error {}
        #expect(throws: Refused.self) { try log.commit(preparedBy: { () throws -> TransactionDraft? in throw Refused() }) }
        #expect(throws: LogError.self) {
            try log.commit(preparedBy: { () throws -> TransactionDraft? in
                var stale = TransactionDraft()
                stale.update(.stored(id), values: ["name": s("Comets")])
                stale.expectedVersions = [id: 1]
                return stale
            })
        }
        #expect(try log.head == 2)

        // Writing from inside is refused as a nested write, and nothing is written.
        #expect(throws: (any Error).self) {
            try log.commit(preparedBy: { () throws -> TransactionDraft? in
                var inner = TransactionDraft()
                inner.insert("Club", values: ["name": s("Kites")])
                try log.commit(inner)
                return nil
            })
        }
        #expect(try log.head == 2)
    }

    @Test("a draft timestamp that can't be stored is refused by both commits, naming it; nothing is written")
    func unstorableTimestamp() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var draft = TransactionDraft()
        draft.insert("Club", values: ["name": s("Otters")])
        draft.timestamp = Date(timeIntervalSince1970: 1e300)
        let plain = #expect(throws: LogError.self) { try log.commit(draft) }
        #expect(plain?.description.contains("can't be stored") == true)
        let prepared = #expect(throws: LogError.self) { try log.commit(preparedBy: { draft }) }
        #expect(prepared?.description.contains("can't be stored") == true)
        #expect(try log.head == 0)
    }
}
