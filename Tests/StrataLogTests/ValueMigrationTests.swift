import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// A writable open with a later model version fills and converts the stored values it
/// needs, as Core Data's lightweight migration does: defaults for attributes it adds or makes
/// mandatory, lossless conversions for attributes whose type it changes; and refuses,
/// writing nothing, when a value can't be taken over (spec 0004 §4.4).
@Suite("Event log: stored values a later model version fills or converts")
struct ValueMigrationTests {
    /// Player (Captain beneath it) with the given attributes besides `name`.
    static func model(_ attributes: [AttributeDescription], captain: [AttributeDescription] = [Attribute("since", .int32)]) throws
        -> ManagedObjectModel
    {
        try ManagedObjectModel {
            Entity("Player") {
                Attribute("name", .string)
                for attribute in attributes { attribute }
            }
            Entity("Captain", parent: "Player") {
                for attribute in captain { attribute }
            }
        }
    }

    static func int16(_ n: Int16) -> DraftValue { .attribute(.int16(n)) }

    /// Every event of the log, oldest first.
    static func events(_ log: EventLog) throws -> [TransactionEvent] {
        try log.read { reader in try (1...(try reader.head)).map { try reader.event($0) } }
    }

    /// The state, verify, replay, as-of and compaction agree after a migration at `migration`.
    static func expectConsistent(_ log: EventLog, _ dir: TemporaryDirectory, before: StateImage, migration: UInt64) throws {
        #expect(try log.read { try $0.state(asOf: migration - 1) } == before, "as of the transaction before the migration: the old values")
        let current = try log.read { try $0.currentState() }
        #expect(try log.read { try $0.state(asOf: try $0.head) } == current)
        var replayed = StateImage()
        for event in try events(log) { replayed.apply(event) }
        #expect(replayed == current, "the events replayed give the state")
        #expect(try log.verify().isClean)
        let copy = dir.file("replayed-\(migration)")
        _ = try log.replay(through: try log.head, into: copy)
        #expect(try EventLog(openingExistingAt: copy).read { try $0.currentState() } == current)
        try log.compact(CompactionRequest())
        #expect(try log.read { try $0.state(asOf: migration - 1) } == before, "the same after compaction")
        #expect(try log.verify().isClean)
    }

    @Test("an attribute added with a default value, or made mandatory with one, gets it in every stored object without a value (sub-entities too) in one migration transaction")
    func defaults() throws {
        let dir = try TemporaryDirectory("strata-values")
        let v1 = try Self.model([Attribute("age", .int16)])
        var ids: [StoredObjectID] = []
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            let objects = [
                draft.insert("Player", values: ["name": s("Ann")]),
                draft.insert("Player", values: ["name": s("Ben"), "age": Self.int16(30)]),
                draft.insert("Captain", values: ["name": s("Cy"), "since": i(2001)]),
            ]
            let result = try log.commit(draft)
            ids = try objects.map { try #require(result.permanentID(for: $0)) }
        }
        let before = try openLog(dir, model: v1).read { try $0.currentState() }
        let v2 = try Self.model([
            Attribute("age", .int16, default: 18).required(),
            Attribute("rank", .int32, default: 7),
            Attribute("level", .int64, default: 1).required(),
            Attribute("nickname", .string),
        ])
        let log = try openLog(dir, model: v2)
        #expect(try log.head == 2)
        let migration = try log.read { try $0.event(2) }
        #expect(migration.kind == .migration)
        #expect(migration.modelVersion == 2)
        #expect(migration.groups.count == 1)
        let changed = migration.groups.first?.changes.map(\.objectID)
        #expect(changed == [ids[2], ids[0], ids[1]], "one update per object: entities by name, objects in key order")
        let state = try log.read { try $0.currentState() }
        #expect(state.objects[ids[0]]?["age"] == .attribute(.int16(18)), "nil in a now-mandatory attribute: its default")
        #expect(state.objects[ids[1]]?["age"] == .attribute(.int16(30)), "a value is kept")
        #expect(state.objects[ids[2]]?["age"] == .attribute(.int16(18)))
        for id in ids {
            #expect(state.objects[id]?["rank"] == .attribute(.int32(7)), "an optional attribute added with a default: \(id)")
            #expect(state.objects[id]?["level"] == .attribute(.int64(1)))
            #expect(state.objects[id]?["nickname"] == nil, "an optional attribute without a default stays nil")
        }
        #expect(state.objects[ids[2]]?["since"] == .attribute(.int32(2001)))
        #expect(try log.read { try $0.history(of: ids[0]) } == [1, 2])

        // An object saved with the version's rank set to nil keeps it: it had the attribute.
        var draft = TransactionDraft()
        draft.update(.stored(ids[1]), values: ["rank": .null])
        try log.commit(draft)
        let reopened = try openLog(dir, model: v2)
        #expect(try reopened.head == 3, "the same version again migrates nothing")
        #expect(try reopened.read { try $0.object(ids[1])?.values["rank"] } == nil)
        try Self.expectConsistent(reopened, dir, before: before, migration: 2)
    }

    @Test("an attribute whose type changes: each stored value converted when that loses nothing; an index on it is rebuilt in the new order; the old values are history")
    func conversions() throws {
        let dir = try TemporaryDirectory("strata-values")
        let v1 = try Self.model([
            Attribute("score", .int16), Attribute("ratio", .float), Attribute("tag", .string), Attribute("weight", .int32),
        ])
        var ids: [StoredObjectID] = []
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            let objects = [
                draft.insert(
                    "Player",
                    values: [
                        "name": s("Ann"), "score": Self.int16(300), "ratio": .attribute(.float(0.5)),
                        "tag": s("6ba7b810-9dad-11d1-80b4-00c04fd430c8"), "weight": i(70),
                    ]),
                draft.insert("Captain", values: ["name": s("Ben"), "score": Self.int16(-2), "weight": i(-1)]),
            ]
            let result = try log.commit(draft)
            ids = try objects.map { try #require(result.permanentID(for: $0)) }
        }
        let before = try openLog(dir, model: v1).read { try $0.currentState() }
        let v2 = try Self.model([
            Attribute("score", .int64).indexed(), Attribute("ratio", .double), Attribute("tag", .uuid), Attribute("weight", .decimal),
        ])
        let log = try openLog(dir, model: v2)
        #expect(try log.head == 2)
        let state = try log.read { try $0.currentState() }
        #expect(state.objects[ids[0]]?["score"] == .attribute(.int64(300)))
        #expect(state.objects[ids[0]]?["ratio"] == .attribute(.double(0.5)))
        #expect(state.objects[ids[0]]?["tag"] == .attribute(.uuid(try #require(UUID(uuidString: "6ba7b810-9dad-11d1-80b4-00c04fd430c8")))))
        #expect(state.objects[ids[0]]?["weight"] == .attribute(.decimal(70)))
        #expect(state.objects[ids[1]]?["score"] == .attribute(.int64(-2)))
        #expect(state.objects[ids[1]]?["tag"] == nil)
        let migration = try log.read { try $0.event(2) }
        let scoreChange = migration.groups.first?.changes.lazy.compactMap { change -> PropertyChange? in
            guard case .update(ids[0], let changes) = change else { return nil }
            return changes.first { $0.property == "score" }
        }.first
        #expect(scoreChange == .value(property: "score", before: .attribute(.int16(300)), after: .attribute(.int64(300))), "the before-value is the stored one")
        var found: [StoredObjectID] = []
        try log.read { reader in
            try reader.scanIndex(entity: "Player", attribute: "score", range: .all) { id in
                found.append(id)
                return .next
            }
        }
        #expect(found == [ids[1], ids[0]], "the index holds the converted values")
        var draft = TransactionDraft()
        draft.update(.stored(ids[0]), values: ["score": .attribute(.int64(5_000_000_000))])
        try log.commit(draft)
        try Self.expectConsistent(log, dir, before: before, migration: 2)
    }

    @Test("values that can't be taken over refuse the open, naming object, attribute and value, and write nothing; the store opens as before")
    func refusals() throws {
        let dir = try TemporaryDirectory("strata-values")
        let v1 = try Self.model([Attribute("score", .int64), Attribute("tag", .string)])
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            draft.insert("Player", values: ["name": s("Ann"), "score": .attribute(.int64(70_000)), "tag": s("x")])
            for n in 0..<7 { draft.insert("Player", values: ["name": s("P\(n)"), "score": .attribute(.int64(Int64(n)))]) }
            try log.commit(draft)
        }
        let before = try openLog(dir, model: v1).read { try $0.currentState() }
        let cases: [(ManagedObjectModel, [String])] = [
            (
                try Self.model([Attribute("score", .int64), Attribute("tag", .string), Attribute("level", .int32).required().providedAtInsert()]),
                ["Player.level is mandatory and has no default value, but Player/p1 has no value for it", "and 3 more", "model version"]
            ),
            (
                try Self.model([Attribute("score", .int16), Attribute("tag", .string)]),
                ["Player/p1 has Player.score = 70000 (int64), which doesn't convert to int16 without loss"]
            ),
            (
                try Self.model([Attribute("score", .int64), Attribute("tag", .uuid)]),
                ["Player/p1 has Player.tag = \"x\" (string), which doesn't convert to uuid without loss"]
            ),
            (
                try Self.model([Attribute("score", .int64), Attribute("tag", .string, default: "t").required()]),
                []  // fills the seven missing tags: no refusal
            ),
        ]
        for (index, (model, phrases)) in cases.enumerated() where !phrases.isEmpty {
            do {
                _ = try openLog(dir, model: model)
                Issue.record("case \(index): the open succeeded")
            } catch let error as LogError {
                guard case .migration = error else {
                    Issue.record("case \(index): \(error)")
                    continue
                }
                for phrase in phrases { #expect("\(error)".contains(phrase), "case \(index): \(error)") }
            }
            let log = try openLog(dir, model: v1)
            #expect(try log.head == 1, "case \(index): nothing written")
            #expect(try log.read { try $0.currentState() } == before)
            #expect(try log.verify().isClean)
        }
        let log = try openLog(dir, model: cases[3].0)
        #expect(try log.head == 2)
        #expect(try log.read { try $0.currentState() }.objects.values.allSatisfy { $0["tag"] != nil })
    }

    @Test("a mandatory attribute without a default is no problem while its entity has no objects: the open writes nothing")
    func noObjects() throws {
        let dir = try TemporaryDirectory("strata-values")
        do {
            let log = try openLog(dir, model: try Self.model([]))
            var draft = TransactionDraft()
            draft.insert("Player", values: ["name": s("Ann")])
            try log.commit(draft)
        }
        let v2 = try Self.model([], captain: [Attribute("since", .int32), Attribute("rank", .int32).required().providedAtInsert()])
        #expect(try openLog(dir, model: v2).head == 1, "no Captain to give a rank")
        #expect(try openLog(dir, model: v2).head == 1)
    }
}
