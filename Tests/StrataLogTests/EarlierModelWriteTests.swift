import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// An earlier model version writing to objects a later one migrated (spec 0004 §3.5): the
/// before-values it records are what the records held, in the later version's types, and
/// every reader takes them.
@Suite("Event log: an earlier model version changing what a later one converted")
struct EarlierModelWriteTests {
    @Test("an earlier model updates and deletes objects whose values a later version converted: the events read back, verify is clean, and the later version converts again at its next open")
    func updateAndDeleteAfterConversion() throws {
        let v1 = try ManagedObjectModel { Entity("P") { Attribute("score", .int16); Attribute("name", .string) } }
        let v2 = try ManagedObjectModel { Entity("P") { Attribute("score", .int64); Attribute("name", .string) } }
        let dir = try TemporaryDirectory()
        let (a, b) = (StoredObjectID(entity: "P", primaryKey: 1), StoredObjectID(entity: "P", primaryKey: 2))
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            _ = draft.insert("P", values: ["score": .attribute(.int16(5)), "name": s("a")])
            _ = draft.insert("P", values: ["score": .attribute(.int16(6)), "name": s("b")])
            _ = try log.commit(draft)
        }
        _ = try openLog(dir, model: v2)
        let earlier = try openLog(dir, model: v1)
        var update = TransactionDraft()
        update.update(.stored(a), values: ["score": .attribute(.int16(7))])
        let updated = try earlier.commit(update)
        var delete = TransactionDraft()
        delete.delete(.stored(b))
        let deleted = try earlier.commit(delete)

        let events = try earlier.read { reader in (try reader.event(updated.event.sequence), try reader.event(deleted.event.sequence)) }
        #expect(events.0.groups.first?.changes == [.update(a, changes: [.value(property: "score", before: .attribute(.int64(5)), after: .attribute(.int16(7)))])],
                "the before-value is what the record held, in version 2's type")
        guard case .delete(_, let before)? = events.1.groups.first?.changes.first else {
            Issue.record("not a delete: \(events.1)")
            return
        }
        #expect(before["score"] == .attribute(.int64(6)))
        let report = try earlier.verify()
        #expect(report.isClean, "\(report.problems)")

        let later = try openLog(dir, model: v2)
        #expect(try later.read { try $0.object(a) }?.values["score"] == .attribute(.int64(7)), "converted again")
        #expect(try later.read { try $0.state(asOf: updated.event.sequence) }.objects(ofEntity: "P")[a]?["score"] == .attribute(.int16(7)))
        let after = try later.verify()
        #expect(after.isClean, "\(after.problems)")
    }
}
