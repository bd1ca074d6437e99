import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// Review probes of model-version migration (spec 0004 §4.3–4.6).
@Suite("Event log: migration review")
struct MigrationReviewTests {
    /// A renamed attribute with a default keeps a nil the object had (spec 0004 §4.4–4.5):
    /// also when no object had a value under the old name (so nothing was taken out).
    @Test("a renamed optional attribute with a default keeps nils, whether or not some object had a value")
    func renamedDefaultKeepsNil() throws {
        let dir = try TemporaryDirectory("strata-review")
        let v1 = try ManagedObjectModel { Entity("P") { Attribute("name", .string); Attribute("email", .string) } }
        let p: StoredObjectID
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            let object = draft.insert("P", values: ["name": s("Ann")])
            p = try #require(try log.commit(draft).permanentID(for: object))
        }
        let v2 = try ManagedObjectModel {
            Entity("P") { Attribute("name", .string); Attribute("emailAddress", .string, default: "none").renamed(from: "email") }
        }
        let log = try openLog(dir, model: v2)
        #expect(try log.read { try $0.object(p)?.values["emailAddress"] } == nil, "a rename keeps a nil: the new default isn't applied")
        #expect(try log.verify().isClean)
    }

    /// Chained renames (first name kept as the identifier): a record still of the first
    /// version, with nil under the first name, keeps its nil at the third.
    @Test("three versions with chained renames: a first-version record's nil isn't filled by the third version's default")
    func chainedRenameKeepsNil() throws {
        let dir = try TemporaryDirectory("strata-review")
        let v1 = try ManagedObjectModel { Entity("P") { Attribute("name", .string); Attribute("email", .string) } }
        var ids: [StoredObjectID] = []
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            let a = draft.insert("P", values: ["name": s("Ann")])
            let b = draft.insert("P", values: ["name": s("Ben"), "email": s("b@x")])
            let result = try log.commit(draft)
            ids = [try #require(result.permanentID(for: a)), try #require(result.permanentID(for: b))]
        }
        let v2 = try ManagedObjectModel {
            Entity("P") { Attribute("name", .string); Attribute("emailAddress", .string).renamed(from: "email") }
        }
        _ = try openLog(dir, model: v2)
        let v3 = try ManagedObjectModel {
            Entity("P") { Attribute("name", .string); Attribute("contact", .string, default: "none").renamed(from: "email") }
        }
        let log = try openLog(dir, model: v3)
        #expect(try log.read { try $0.object(ids[1])?.values["contact"] } == .attribute(.string("b@x")))
        #expect(try log.read { try $0.object(ids[0])?.values["contact"] } == nil, "a rename keeps a nil")
        #expect(try log.verify().isClean)
    }
}
