import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// A run of deletes long enough (with STRATA_LONG_DELETE_RUN=250000) that its buffered rows
/// pass the commit's flush threshold and are removed partway through the run: a second
/// delete of an object removed before that point is still refused, and the whole run, once
/// accepted, leaves nothing of the objects but their history.
@Suite("Event log: a long run of deletes")
struct LongDeleteRunTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Row") {
                Attribute("a", .string).indexed()
                Attribute("b", .string).indexed()
                Relationship("next", to: "Row")
            }
        }
    }

    @Test("every object deleted in one run, then one of them again: refused; then the run alone: accepted, verify clean")
    func longRun() throws {
        let count = environmentNumber("STRATA_LONG_DELETE_RUN", default: 3000)
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try Self.model()) { $0.initialMapSize = 64 << 20 }
        let tail = String(repeating: "x", count: 150)
        var insert = TransactionDraft()
        var previous: DraftObjectID?
        for n in 0..<count {
            var values: [String: DraftValue] = ["a": s("\(n) \(tail)"), "b": s("\(count - n) \(tail)")]
            if let previous { values["next"] = .reference(previous) }
            previous = insert.insert("Row", values: values)
        }
        let inserted = try log.commit(insert)
        let ids = inserted.event.changes.map(\.objectID)
        #expect(ids.count == count)

        // Referrers first is key order here: each object refers to the one inserted before it.
        var again = TransactionDraft()
        for id in ids { again.delete(.stored(id)) }
        again.delete(.stored(ids[0]))
        #expect(throws: LogError.objectNotFound(ids[0].description)) { try log.commit(again) }
        #expect(try log.read { try $0.count(of: "Row") } == count)

        var all = TransactionDraft()
        for id in ids.reversed() { all.delete(.stored(id)) }
        let deleted = try log.commit(all)
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.count(of: "Row") == 0)
            for id in [ids[0], ids[count / 2], ids[count - 1]] {
                #expect(try reader.history(of: id) == [inserted.sequence, deleted.sequence])
            }
        }
        let report = try log.verify()
        #expect(report.isClean, "\(report.problems)")
    }
}
