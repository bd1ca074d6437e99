import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// A model whose `Club.name` is plain, indexed, or unique (with Member ← Captain
/// inheritance for an index a sub-entity's objects are in).
private func clubModel(_ name: String) throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Club") {
            if name == "indexed" { Attribute("name", .string).indexed() } else { Attribute("name", .string) }
            Attribute("city", .string)
            if name == "unique" { Unique("name") }
            if name == "unique-pair" { Unique("name", "city") }
        }
        Entity("Member") {
            if name == "plain" { Attribute("age", .int32) } else { Attribute("age", .int32).indexed() }
        }
        Entity("Captain", parent: "Member") {
            Attribute("since", .int32)
        }
    }
}

private func indexed(_ log: EventLog, _ entity: String, _ attribute: String) throws -> [String] {
    try log.read { reader in
        var found: [String] = []
        try reader.scanIndex(entity: entity, attribute: attribute, range: .all) { id in
            found.append(id.description)
            return .next
        }
        return found
    }
}

@Suite("Event log: an index added by a later model covers the objects written before it")
struct IndexMigrationTests {
    @Test("indexing an attribute later (same version hash): the open rebuilds the index in a migration transaction; old objects are found; verify, replay and compaction agree")
    func indexAddedLater() throws {
        let dir = try TemporaryDirectory()
        do {
            let log = try openLog(dir, model: try clubModel("plain"))
            var draft = TransactionDraft()
            draft.insert("Club", values: ["name": s("old"), "city": s("Oslo")])
            draft.insert("Member", values: ["age": i(30)])
            draft.insert("Captain", values: ["age": i(40), "since": i(2001)])
            try log.commit(draft)
            #expect(try log.head == 1)
        }
        let log = try openLog(dir, model: try clubModel("indexed"))
        #expect(log.modelVersion == 2, "a model whose indexes differ is a new version")
        #expect(try log.head == 2)
        let migration = try log.read { try $0.event(2) }
        #expect(migration.kind == .migration)
        #expect(migration.modelVersion == 2)
        #expect(migration.groups.isEmpty)
        var draft = TransactionDraft()
        draft.insert("Club", values: ["name": s("new"), "city": s("Rome")])
        try log.commit(draft)
        #expect(try indexed(log, "Club", "name") == ["Club/p2", "Club/p1"])  // "new" < "old"
        #expect(try indexed(log, "Member", "age") == ["Member/p1", "Captain/p1"])
        var report = try log.verify()
        #expect(report.isClean, "\(report.problems)")
        try log.compact(CompactionRequest())
        report = try log.verify()
        #expect(report.isClean, "\(report.problems)")
        #expect(try indexed(log, "Club", "name") == ["Club/p2", "Club/p1"])
    }

    @Test("reopening with the same model writes nothing more; going back to the plain model and forth again rebuilds the index, with what the plain model wrote in between")
    func backAndForth() throws {
        let dir = try TemporaryDirectory()
        do {
            let log = try openLog(dir, model: try clubModel("plain"))
            var draft = TransactionDraft()
            draft.insert("Club", values: ["name": s("b"), "city": s("x")])
            try log.commit(draft)
        }
        do {
            let log = try openLog(dir, model: try clubModel("indexed"))
            #expect(try log.head == 2)
        }
        do {
            let log = try openLog(dir, model: try clubModel("indexed"))
            #expect(try log.head == 2, "no migration when the head's model is the one opening")
        }
        do {
            // The plain model defines no index the indexed one lacks: no migration; its
            // commits don't maintain `Club.name`.
            let log = try openLog(dir, model: try clubModel("plain"))
            #expect(try log.head == 2)
            var draft = TransactionDraft()
            draft.insert("Club", values: ["name": s("a"), "city": s("y")])
            try log.commit(draft)
            draft = TransactionDraft()
            draft.update(.stored(StoredObjectID(entity: "Club", primaryKey: 1)), values: ["name": s("c")])
            try log.commit(draft)
        }
        let log = try openLog(dir, model: try clubModel("indexed"))
        #expect(try log.head == 5)
        #expect(try log.read { try $0.event(5) }.kind == .migration)
        #expect(try indexed(log, "Club", "name") == ["Club/p2", "Club/p1"])  // "a", "c"
        let report = try log.verify()
        #expect(report.isClean, "\(report.problems)")
    }

    @Test("a uniqueness constraint added over stored duplicates refuses the open, naming the objects; nothing is written and the earlier model still opens")
    func uniqueAddedOverDuplicates() throws {
        let dir = try TemporaryDirectory()
        do {
            let log = try openLog(dir, model: try clubModel("plain"))
            var draft = TransactionDraft()
            draft.insert("Club", values: ["name": s("same"), "city": s("Oslo")])
            draft.insert("Club", values: ["name": s("other"), "city": s("Oslo")])
            draft.insert("Club", values: ["name": s("same"), "city": s("Rome")])
            draft.insert("Club", values: ["city": s("no name")])
            draft.insert("Club", values: ["city": s("no name either")])
            try log.commit(draft)
        }
        let error = #expect(throws: LogError.self) { _ = try openLog(dir, model: try clubModel("unique")) }
        guard case .uniquenessViolation(let entity, let properties, let value, let objects) = error else {
            Issue.record("expected a uniqueness violation, got \(String(describing: error))")
            return
        }
        #expect(entity == "Club")
        #expect(properties == ["name"])
        #expect(value.contains("same"))
        #expect(objects == ["Club/p1", "Club/p3"])
        // Two nil names don't clash; "same" in different cities doesn't break the pair.
        let pair = try openLog(dir, model: try clubModel("unique-pair"))
        #expect(try pair.head == 2)
        var clash = TransactionDraft()
        clash.insert("Club", values: ["name": s("other"), "city": s("Oslo")])
        #expect(throws: LogError.self) { try pair.commit(clash) }
        #expect(try pair.verify().isClean)
    }
}
