import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

@Suite("Event log: replay into a new store, stored-property inspection")
struct ReplayIntoTests {
    @Test("replay(through:into:) writes an independent store equal to the state as of the sequence")
    func replayInto() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 150)
        try log.compact(CompactionRequest(before: 61))
        for sequence: UInt64 in [0, 40, 100, 150] {
            let target = dir.file("copy-\(sequence)")
            let report = try log.replay(through: sequence, into: target)
            #expect(report.head == sequence)
            let copy = try EventLog(openingExistingAt: target)
            #expect(copy.storeUUID != log.storeUUID)
            #expect(copy.storeUUID == report.storeUUID)
            #expect(try copy.head == sequence)
            let expected = try log.read { try $0.state(asOf: sequence) }
            #expect(try copy.read { try $0.currentState() } == expected)
            #expect(report.objectCount == expected.objects.count)
            #expect(try allEvents(copy) == Array(try allEvents(log).prefix(Int(sequence))))
            #expect(try copy.verify().isClean)
            #expect(copy.storedModels().map(\.json) == log.storedModels().map(\.json))
        }
        #expect(throws: LogError.sequenceOutOfRange(requested: 151, head: 150)) {
            try log.replay(through: 151, into: dir.file("too-far"))
        }
        #expect(throws: LogError.self) { try log.replay(through: 10, into: dir.file("copy-40")) }
    }

    @Test("a copy as of a point before a migration reads in its data's terms: the later version is stored marked as not migrated to, and a writable open with it migrates the copy")
    func copyBeforeAMigration() throws {
        let v1 = try ManagedObjectModel {
            Entity("Player") {
                Attribute("name", .string)
                Attribute("rating", .int32)
            }
        }
        let v2 = try ManagedObjectModel {
            Entity("Player") { Attribute("nick", .string).renamed(from: "name") }
        }
        let dir = try TemporaryDirectory()
        var player: StoredObjectID?
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            let ada = draft.insert("Player", values: ["name": s("Ng, Ada"), "rating": i(7)])
            player = try log.commit(draft).permanentID(for: ada)
            var second = TransactionDraft()
            second.update(.stored(try #require(player)), values: ["rating": i(8)])
            _ = try log.commit(second)
        }
        let id = try #require(player)
        let log = try openLog(dir, model: v2)
        #expect(try log.read { try $0.object(id)?["nick"] } == .attribute(.string("Ng, Ada")))

        let before = dir.file("before")
        _ = try log.replay(through: 2, into: before)
        do {
            let copy = try EventLog(openingExistingAt: before)
            #expect(copy.modelVersion == 1)
            #expect(try copy.read { try $0.metadata() }.modelVersionInUse == 1)
            let values = try copy.read { try $0.object(id) }
            #expect(values?["name"] == .attribute(.string("Ng, Ada")) && values?["rating"] == .attribute(.int32(8)), "\(String(describing: values))")
            #expect(try copy.storedProperties(ofEntity: "Player").map(\.name) == ["name", "rating"])
            #expect(try copy.verify().isClean)
        }
        // An app with the later model migrates the copy, as it migrated the original.
        do {
            var removing = EventLog.Configuration()
            removing.allowsRemovingEntitiesAndProperties = true  // v2 drops rating (spec 0004 §4.7)
            let migrated = try EventLog(path: before, model: v2, configuration: removing)
            #expect(migrated.modelVersion == 2)
            #expect(try migrated.read { try $0.object(id)?.values } == ["nick": .attribute(.string("Ng, Ada"))])
            #expect(try migrated.read { try $0.metadata() }.modelVersionInUse == 2)
        }
        // A copy through the head is in the later version's terms.
        let after = dir.file("after")
        _ = try log.replay(through: try log.read { try $0.head }, into: after)
        let copy = try EventLog(openingExistingAt: after)
        #expect(copy.modelVersion == 2)
        #expect(try copy.read { try $0.object(id)?.values } == ["nick": .attribute(.string("Ng, Ada"))])
    }

    @Test("storedProperties(ofEntity:) says which relationship side is recorded")
    func storedProperties() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        let club = try log.storedProperties(ofEntity: "Club")
        #expect(club.map(\.name) == ["badge", "founded", "lineup", "members", "name", "sponsors"])
        #expect(club.filter(\.isRecorded).map(\.name) == ["founded", "lineup", "name", "sponsors"])  // Badge.club records the one-to-one
        let captain = try log.storedProperties(ofEntity: "Captain")
        #expect(captain.contains { $0.name == "email" && $0.isAttribute })
        #expect(!captain.contains { $0.name == "notes" })
        #expect(log.concreteEntityNames == ["Badge", "Captain", "Club", "Member", "Sponsor"])
        #expect(throws: LogError.unknownEntity("Nope")) { try log.storedProperties(ofEntity: "Nope") }
    }
}
