import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// A model version that renames (`renamingIdentifier`) an entity of the store's newest model
/// version is refused at open, writing nothing: objects are filed under their entity's code,
/// and their values would be lost (spec 0002 §2). Property renames are migrated
/// (`RenameMigrationTests`).
@Suite("Event log: entity renames refused")
struct RenameRefusalTests {
    static func v1() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Player") {
                Attribute("email", .string)
                Attribute("name", .string)
            }
        }
    }

    /// A store written with `v1()`: one player.
    static func store(_ dir: TemporaryDirectory) throws -> StoredObjectID {
        let log = try openLog(dir, model: try v1())
        var draft = TransactionDraft()
        let player = draft.insert("Player", values: ["email": s("ann@example.com"), "name": s("Ann")])
        return try #require(try log.commit(draft).permanentID(for: player))
    }

    @Test("renaming an entity: the open throws naming both names, and the store opens as before with its data")
    func entityRenameRefused() throws {
        let dir = try TemporaryDirectory("strata-rename")
        let player = try Self.store(dir)
        let renamedEntity = try ManagedObjectModel {
            Entity("Athlete") {
                Attribute("email", .string)
                Attribute("name", .string)
            }.renamed(from: "Player")
        }
        do {
            _ = try openLog(dir, model: renamedEntity)
            Issue.record("the open succeeded")
        } catch let error as LogError {
            #expect("\(error)".contains("renames entity Player to Athlete"), "\(error)")
            #expect("\(error)".contains("stored model version 1"), "\(error)")
        }
        let log = try openLog(dir, model: try Self.v1())
        #expect(log.storedModels().map(\.version) == [1], "no model version recorded")
        #expect(try log.read { try $0.object(player)?["email"] } == .attribute(.string("ann@example.com")))
        #expect(try log.head == 1)
    }

    @Test("a renamingIdentifier that names a property still there, or one the store never had, isn't a rename: the open succeeds")
    func notRenames() throws {
        let dir = try TemporaryDirectory("strata-rename")
        let player = try Self.store(dir)
        let model = try ManagedObjectModel {
            Entity("Player") {
                Attribute("email", .string)
                Attribute("contact", .string).renamed(from: "email")
                Attribute("name", .string).renamed(from: "fullName")
            }
        }
        let log = try openLog(dir, model: model)
        #expect(try log.read { try $0.object(player)?["email"] } == .attribute(.string("ann@example.com")))
    }
}
