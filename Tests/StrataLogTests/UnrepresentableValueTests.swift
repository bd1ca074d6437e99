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

    @Test("a NaN decimal is refused at commit, naming entity and property, and nothing is written")
    func nanDecimal() throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Invoice") {
                Attribute("number", .int32)
                Attribute("total", .decimal)
            }
        }
        let log = try openLog(dir, model: model)
        var good = TransactionDraft()
        let invoice = good.insert("Invoice", values: ["number": i(1), "total": .attribute(.decimal(Decimal(string: "12.50") ?? 0))])
        let id = try #require(try log.commit(good).permanentID(for: invoice))

        var insert = TransactionDraft()
        insert.insert("Invoice", values: ["number": i(2), "total": .attribute(.decimal(.nan))])
        var update = TransactionDraft()
        update.update(.stored(id), values: ["total": .attribute(.decimal(.nan))])
        for draft in [insert, update] {
            #expect {
                try log.commit(draft)
            } throws: { error in
                guard case .typeMismatch(let entity, let property, _, let got) = error as? LogError else { return false }
                return entity == "Invoice" && property == "total" && got.contains("NaN")
            }
        }
        #expect(try log.head == 1)
        // The log stays readable (a stored NaN made every later read of the event throw).
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.event(1).sequence == 1)
            #expect(try reader.object(id)?["total"] == .attribute(.decimal(Decimal(string: "12.50") ?? 0)))
        }
    }
}
