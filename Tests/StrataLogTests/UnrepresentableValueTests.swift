import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

@Suite("Event log: values and timestamps with no stored or printed form")
struct UnrepresentableValueTests {
    @Test("a date value far out of range or NaN has event JSON, not a made-up 1970 date")
    func farDateJSON() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var draft = TransactionDraft()
        draft.insert("Club", values: ["name": s("Far"), "founded": .attribute(.date(Date(timeIntervalSince1970: 1e14)))])
        draft.insert("Club", values: ["name": s("Never"), "founded": .attribute(.date(Date(timeIntervalSince1970: -.infinity)))])
        draft.insert("Club", values: ["name": s("Edge"), "founded": .attribute(.date(Date(timeIntervalSince1970: 9.5e12)))])
        let text = try log.commit(draft).event.jsonText
        #expect(text.contains("{\"date\":\"100000000000000.0\"}"), "\(text)")
        #expect(text.contains("{\"date\":\"-inf\"}"))
        #expect(text.contains("{\"date\":\"9500000000000.0\"}"))
        #expect(!text.contains("1970-01-01"))
    }

    @Test("a draft timestamp with no microseconds since 1970 is refused, and nothing is written")
    func farDraftTimestamp() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        for seconds in [1e14, -1e14, .nan] {
            var draft = TransactionDraft()
            draft.timestamp = Date(timeIntervalSince1970: seconds)
            draft.insert("Club", values: ["name": s("Far")])
            #expect {
                try log.commit(draft)
            } throws: { error in
                guard case .invalidOperation(let message) = error as? LogError else { return false }
                return message.contains("the draft's timestamp") && message.contains("can't be stored")
            }
        }
        #expect(try log.head == 0)
    }
}
