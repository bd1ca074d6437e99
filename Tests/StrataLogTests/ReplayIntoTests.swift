import Foundation
import StrataLog
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
