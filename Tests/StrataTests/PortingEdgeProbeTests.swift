import Foundation
import Strata
import StrataModel
import StrataTestSupport
import Testing

final class StampedNote: ManagedObject {
    nonisolated(unsafe) static var willSaveCalls = 0
    override func willSave() {
        super.willSave()
        StampedNote.willSaveCalls += 1
        if !isDeleted, changedValues()["modified"] == nil {
            setPrimitiveValue(Date(timeIntervalSince1970: 42), forKey: "modified")
        }
    }
}

enum EdgeModels {
    static var notes: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Note") {
                    Attribute("text", .string)
                    Attribute("modified", .date)
                    Attribute("score", .double)
                    Attribute("ratio", .float)
                    Attribute("big", .int64)
                    Attribute("blob", .binaryData)
                    Attribute("link", .uri)
                    Attribute("flag", .boolean)
                    Attribute("indexedText", .string).indexed()
                    Attribute("indexedScore", .double).indexed()
                    Attribute("indexedDate", .date).indexed()
                    Attribute("amount", .decimal).indexed()
                }
            }
        }
    }
}

@Suite("Porting a Core Data app: edge values")
struct PortingEdgeProbeTests {
    @Test("willSave stamps a modification date with setPrimitiveValue; it is saved")
    func willSaveStamp() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try EdgeModels.notes, classes: [(StampedNote.self, "Note")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let note = try context.insertNewObject(forEntityName: "Note")
            note.setValue("hi", forKey: "text")
            try context.save()
            #expect(note.value(forKey: "modified") as? Date == Date(timeIntervalSince1970: 42))
            #expect(!note.hasChanges)
        }
        let reopened = try openCoordinator(dir, model: try EdgeModels.notes)
        let modified = try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Note")).first?.value(forKey: "modified") as? Date
        }
        #expect(modified == Date(timeIntervalSince1970: 42))
    }

    @Test("odd values from users: NaN, infinities, extreme dates, NUL in strings, large data, relative URLs")
    func oddValues() async throws {
        let dir = try TemporaryDirectory()
        let values: [(String, any Sendable)] = [
            ("score", Double.nan), ("score", Double.infinity), ("score", -Double.infinity), ("ratio", Float.nan),
            ("big", Int64.max), ("big", Int64.min),
            ("modified", Date(timeIntervalSinceReferenceDate: .nan)), ("modified", Date(timeIntervalSinceReferenceDate: .infinity)),
            ("modified", Date.distantFuture), ("modified", Date.distantPast), ("modified", Date(timeIntervalSince1970: 1e300)),
            ("indexedDate", Date(timeIntervalSinceReferenceDate: .nan)), ("indexedDate", Date(timeIntervalSince1970: -1e300)),
            ("indexedScore", Double.nan), ("indexedScore", -0.0), ("indexedScore", Double.infinity),
            ("text", "a\u{0}b"), ("indexedText", "a\u{0}b"), ("indexedText", String(repeating: "x", count: 5000)),
            ("blob", Data(count: 3_000_000)), ("link", URL(string: "relative/path?q=1")!), ("link", URL(fileURLWithPath: "/tmp/a b")),
        ]
        let coordinator = try openCoordinator(dir, model: try EdgeModels.notes)
        for (index, (key, value)) in values.enumerated() {
            let outcome = await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) -> String in
                do {
                    let note = try context.insertNewObject(forEntityName: "Note")
                    note.setValue("\(index)", forKey: "text")
                    note.setValue(value, forKey: key)
                    try context.save()
                    return "saved"
                } catch {
                    return "refused: \(error)"
                }
            }
            #expect(outcome == "saved", "\(key) #\(index): \(outcome.prefix(300))")
        }
        let reopened = try openCoordinator(dir, model: try EdgeModels.notes)
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Note")) == values.count)
            let big = try context.fetch(try FetchRequest(entityName: "Note", format: "big == %@", NSNumber(value: Int64.min))).first
            #expect(big?.value(forKey: "big") as? Int64 == Int64.min)
            let long = try context.fetch(try FetchRequest(entityName: "Note", format: "indexedText == %@", String(repeating: "x", count: 5000))).first
            #expect(long?.value(forKey: "text") as? String == "18")
            let nul = try context.fetch(try FetchRequest(entityName: "Note", format: "indexedText == %@", "a\u{0}b")).first
            #expect(nul?.value(forKey: "text") as? String == "17")
            let blob = try context.fetch(try FetchRequest(entityName: "Note", format: "text == '19'")).first?.value(forKey: "blob") as? Data
            #expect(blob?.count == 3_000_000)
            let link = try context.fetch(try FetchRequest(entityName: "Note", format: "text == '20'")).first?.value(forKey: "link") as? URL
            #expect(link?.relativeString == "relative/path?q=1")
            var sorted = FetchRequest(entityName: "Note", sortDescriptors: [FetchSortDescriptor(key: "indexedScore")])
            sorted.predicate = try FormatPredicate(format: "indexedScore != nil")
            #expect(try context.fetch(sorted).compactMap { $0.value(forKey: "text") as? String } == ["14", "15", "13"], "NaN sorts last")
            // A NaN date, like a NaN number, is unordered: no comparison matches it, indexed or not.
            let now = Date()
            for key in ["modified", "indexedDate", "score", "indexedScore"] {
                let argument: any Sendable = key.lowercased().contains("date") || key == "modified" ? now : 0.5
                let greater = try context.fetch(try FetchRequest(entityName: "Note", format: "%K > %@", key, argument)).compactMap { $0.value(forKey: "text") as? String }
                let less = try context.fetch(try FetchRequest(entityName: "Note", format: "%K < %@", key, argument)).compactMap { $0.value(forKey: "text") as? String }
                let nanText: Set<String> = ["0", "3", "6", "11", "13"]
                #expect(nanText.isDisjoint(with: greater + less), "\(key): > \(greater), < \(less)")
            }
        }
    }

    @Test("a NaN date in Strata's descriptions, explain, JSON and failures doesn't trap (Foundation's Date.description does)", arguments: 0..<8)
    func nanDateText(step: Int) async throws {
        let nan = Date(timeIntervalSinceReferenceDate: .nan)
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try EdgeModels.notes)
        let text = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> String in
            let note = try context.insertNewObject(forEntityName: "Note")
            note.setValue(nan, forKey: "indexedDate")
            switch step {
            case 0: return "\(AttributeValue.date(nan))"
            case 1: return note.description
            case 2: return "\(try FormatPredicate(format: "indexedDate == %@", nan))"
            case 3: return "\(try context.explain(try FetchRequest(entityName: "Note", format: "indexedDate == %@", nan)))"
            case 4: try context.save(); return "\(SnapshotValue.attribute(.date(nan)))"
            case 5: return AttributeValue.date(nan).canonicalJSON
            case 6:
                try context.save()
                return "\(note.committedValues(forKeys: nil).count)"
            default: return "\(ValidationFailure(code: .dateTooLate, entity: "Note", key: "modified", value: .date(nan), message: "m"))"
            }
        }
        #expect(!text.isEmpty || step == 4)
    }
}
