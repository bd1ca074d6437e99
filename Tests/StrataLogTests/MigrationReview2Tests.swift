import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// Second review of model-version migration (spec 0004 §4, §4.3–4.6).
@Suite("Event log: migration review 2")
struct MigrationReview2Tests {
    /// Version 1 `Player`, version 2 renames it `Athlete`, version 3 renames it back (the
    /// first version's hash, other renaming identifiers).
    static func renamingModel(_ version: Int) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            switch version {
            case 1:
                Entity("Player") { Attribute("email", .string) }
            case 2:
                Entity("Athlete") { Attribute("mail", .string).renamed(from: "email") }.renamed(from: "Player")
            default:
                Entity("Player") { Attribute("email", .string).renamed(from: "mail") }.renamed(from: "Athlete")
            }
        }
    }

    /// A store written with `renamingModel(1)`: one player.
    static func storeOfFirstVersion() throws -> TemporaryDirectory {
        let dir = try TemporaryDirectory("strata-review2")
        let log = try openLog(dir, model: try renamingModel(1))
        var draft = TransactionDraft()
        _ = draft.insert("Player", values: ["email": s("a@x")])
        _ = try log.commit(draft)
        return dir
    }

    /// Apps of two model versions with one version hash alternate opens: each opens as the
    /// version stored for it, not as a new (later) version each time — which would also
    /// count as later than the version in between and delete its entity's objects as removed.
    @Test("a model stored under an earlier version with its hash opens as that version, not a new later one")
    func alternatingSameHash() throws {
        let dir = try Self.storeOfFirstVersion()
        _ = try openLog(dir, model: try Self.renamingModel(2))
        _ = try openLog(dir, model: try Self.renamingModel(3))
        do {
            // The version-2 app, opened after version 3, keeps inserting under its name.
            let log = try openLog(dir, model: try Self.renamingModel(2))
            #expect(log.modelVersion == 2)
            var draft = TransactionDraft()
            _ = draft.insert("Athlete", values: ["mail": s("b@x")])
            _ = try log.commit(draft)
        }
        do {
            let log = try openLog(dir, model: try Self.renamingModel(1))
            #expect(log.modelVersion == 1, "the first model is stored as version 1")
            #expect(try log.verify().isClean)
        }
        let log = try openLog(dir, model: try Self.renamingModel(3))
        #expect(log.modelVersion == 3)
        #expect(log.storedModels().count == 3)
        let emails = try log.read { reader in
            try reader.currentState().objects(ofEntity: "Player").compactMap { $0.value["email"] }
        }
        #expect(Set(emails) == [.attribute(.string("a@x")), .attribute(.string("b@x"))], "the version-2 app's Athlete moved to Player, not deleted")
        #expect(try log.verify().isClean)
    }

    /// With automatic migration off, a model whose version hash is stored but as another
    /// version (other renaming identifiers or indexes) is refused, writing nothing: opening
    /// it would register a new version and migrate (here: move an entity's objects back).
    @Test("automatic migration off: a stored hash with other renaming identifiers is refused, nothing written")
    func migrationOffSameHash() throws {
        let dir = try Self.storeOfFirstVersion()
        let head = try openLog(dir, model: try Self.renamingModel(2)).head
        #expect(throws: LogError.self) {
            _ = try openLog(dir, model: try Self.renamingModel(3)) { $0.migratesAutomatically = false }
        }
        let log = try openLog(dir, model: try Self.renamingModel(2))
        #expect(try log.head == head, "nothing written")
        #expect(log.storedModels().count == 2, "no version registered")
        #expect(try log.read { try $0.currentState().objects(ofEntity: "Athlete").count } == 1)
    }

    /// A version that has migrated the store and written with it, whose later open is refused
    /// (an earlier model's app wrote a value it can't take over), isn't marked refused: the
    /// store's data is in its terms, so a read-only open with it and an open without a model
    /// still use it.
    @Test("a refused open of a version that migrated before doesn't hide its data from read-only and model-less opens")
    func refusedAfterMigrating() throws {
        let dir = try TemporaryDirectory("strata-review2")
        func model(_ version: Int) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                if version == 1 {
                    Entity("Player") { Attribute("score", .int64) }
                } else {
                    Entity("Athlete") { Attribute("score", .int16) }.renamed(from: "Player")
                }
            }
        }
        do {
            let log = try openLog(dir, model: try model(1))
            var draft = TransactionDraft()
            _ = draft.insert("Player", values: ["score": .attribute(.int64(7))])
            _ = try log.commit(draft)
        }
        do {
            let log = try openLog(dir, model: try model(2))
            var draft = TransactionDraft()
            _ = draft.insert("Athlete", values: ["score": .attribute(.int16(8))])
            _ = try log.commit(draft)
        }
        do {
            let log = try openLog(dir, model: try model(1))
            var draft = TransactionDraft()
            _ = draft.insert("Player", values: ["score": .attribute(.int64(70000))])
            _ = try log.commit(draft)
        }
        #expect(throws: LogError.self) { _ = try openLog(dir, model: try model(2)) }
        let tool = try EventLog(openingExistingAt: dir.file("store"))
        #expect(tool.modelVersion == 2, "the version the store's data is in")
        #expect(try tool.read { try $0.currentState().objects(ofEntity: "Athlete").count } == 2)
        let readOnly = try openLog(dir, model: try model(2)) { $0.isReadOnly = true }
        #expect(readOnly.modelVersion == 2)
    }

    /// A version removing a sub-entity deletes its objects in a take-out, with nothing put
    /// back: the derived attributes counting them follow all the same (before, a kept
    /// `@count` stayed at the old count, and every later save kept it off by one per object).
    @Test("a removed entity's deleted objects leave the aggregates that counted them")
    func removedEntityAggregates() throws {
        let dir = try TemporaryDirectory("strata-review2")
        func model(removing: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Attribute("headcount", .int64).derived(from: "members.@count")
                    Relationship("members", to: "Person", inverse: "team", toMany: true)
                }
                Entity("Person") {
                    Attribute("name", .string)
                    Relationship("team", to: "Team", inverse: "members")
                }
                if !removing {
                    Entity("Employee", parent: "Person") { Attribute("badge", .string) }
                }
            }
        }
        let team: StoredObjectID
        do {
            let log = try openLog(dir, model: try model(removing: false))
            var draft = TransactionDraft()
            let t = draft.insert("Team", values: ["name": s("Otters")])
            _ = draft.insert("Person", values: ["name": s("Ann"), "team": .reference(t)])
            _ = draft.insert("Employee", values: ["name": s("Bo"), "team": .reference(t)])
            team = try #require(try log.commit(draft).permanentID(for: t))
            #expect(try log.read { try $0.object(team)?.values["headcount"] } == .attribute(.int64(2)))
        }
        let log = try openLog(dir, model: try model(removing: true))
        #expect(try log.read { try $0.related(team, "members").count } == 1)
        #expect(try log.read { try $0.object(team)?.values["headcount"] } == .attribute(.int64(1)))
        var draft = TransactionDraft()
        _ = draft.insert("Person", values: ["name": s("Cy"), "team": .reference(.stored(team))])
        _ = try log.commit(draft)
        #expect(try log.read { try $0.object(team)?.values["headcount"] } == .attribute(.int64(2)))
        #expect(try log.verify().isClean)
    }

    /// With automatic migration off, a stored version whose migration was refused (so never
    /// done) is refused again, writing nothing, instead of migrating the store now.
    @Test("automatic migration off: a version whose migration was refused isn't migrated at a later open")
    func migrationOffRefusedVersion() throws {
        let dir = try TemporaryDirectory("strata-review2")
        let v1 = try ManagedObjectModel { Entity("P") { Attribute("level", .int64) } }
        let v2 = try ManagedObjectModel { Entity("P") { Attribute("level", .int16) } }
        let p: StoredObjectID
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            let object = draft.insert("P", values: ["level": .attribute(.int64(70000))])
            p = try #require(try log.commit(draft).permanentID(for: object))
        }
        #expect(throws: LogError.self) { _ = try openLog(dir, model: v2) }
        let head: UInt64
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            draft.update(.stored(p), values: ["level": .attribute(.int64(7))])
            _ = try log.commit(draft)
            head = try log.head
        }
        #expect(throws: LogError.self) { _ = try openLog(dir, model: v2) { $0.migratesAutomatically = false } }
        #expect(try openLog(dir, model: v1).head == head, "nothing written")
        let log = try openLog(dir, model: v2)
        #expect(try log.read { try $0.object(p)?.values["level"] } == .attribute(.int16(7)))
        #expect(try log.verify().isClean)
    }

    /// Probe: one version renaming an entity and an attribute (made mandatory with a default,
    /// retyped), removing another entity the renamed one refers to, and adding a mandatory
    /// attribute — every object written once, verify clean, the old state as of before.
    @Test("rename, retype, fill and removal in one migration: one update per object, the old state as of before")
    func combinedMigration() throws {
        let dir = try TemporaryDirectory("strata-review2")
        let v1 = try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true, ordered: true)
            }
            Entity("Player") {
                Attribute("level", .int16)
                Relationship("team", to: "Team", inverse: "players")
                Relationship("coach", to: "Coach", inverse: "players")
            }
            Entity("Coach") { Relationship("players", to: "Player", inverse: "coach", toMany: true) }
        }
        let v2 = try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Attribute("size", .int64).derived(from: "players.@count")
                Relationship("players", to: "Athlete", inverse: "team", toMany: true, ordered: true)
            }
            Entity("Athlete") {
                Attribute("rank", .int64, default: 1).required().renamed(from: "level")
                Attribute("joined", .string, default: "x").required()
                Relationship("team", to: "Team", inverse: "players")
            }.renamed(from: "Player")
        }
        let before: StateImage
        let head: UInt64
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            let c = draft.insert("Coach", values: [:])
            let p1 = draft.insert("Player", values: ["level": .attribute(.int16(3)), "coach": .reference(c)])
            let p2 = draft.insert("Player", values: [:])
            _ = draft.insert("Player", values: ["coach": .reference(c)])
            _ = draft.insert("Team", values: ["name": s("Otters"), "players": .references([p2, p1])])
            _ = try log.commit(draft)
            before = try log.read { try $0.currentState() }
            head = try log.head
        }
        let log = try openLog(dir, model: v2)
        let now = try log.read { try $0.currentState() }
        #expect(now.objects(ofEntity: "Coach").isEmpty && now.objects(ofEntity: "Player").isEmpty)
        let athletes = now.objects(ofEntity: "Athlete")
        #expect(athletes.count == 3)
        #expect(Set(athletes.values.map { $0["rank"] }) == [.attribute(.int64(3)), .attribute(.int64(1))])
        #expect(athletes.values.allSatisfy { $0["joined"] == .attribute(.string("x")) })
        #expect(now.objects(ofEntity: "Team").values.first?["size"] == .attribute(.int64(2)))
        #expect(try log.read { try $0.state(asOf: head) } == before)
        #expect(try log.verify().isClean)
    }
}

extension MigrationReview2Tests {
    /// A version refused first (store at v1), then a fixed intermediate version (v2) stored
    /// and written with, then the first one again: it was version 2, older than v2's 3, so
    /// it opened as an *earlier* model, migrated nothing and couldn't change the objects v2
    /// wrote. A refused version that later ones passed is stored again, as the newest.
    @Test("a refused version opened again after a later version was stored and written with is stored again as the newest, and migrates")
    func refusedVersionAfterLaterOne() throws {
        let v1 = try ManagedObjectModel { Entity("Person") { Attribute("name", .string).required().providedAtInsert() } }
        let v2 = try ManagedObjectModel {
            Entity("Person") { Attribute("name", .string); Attribute("first", .string) }
        }
        let v3 = try ManagedObjectModel { Entity("Person") { Attribute("first", .string).required().providedAtInsert() } }
        let dir = try TemporaryDirectory("strata-review2")
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            _ = draft.insert("Person", values: ["name": s("Ada Lovelace")])
            _ = try log.commit(draft)
        }
        #expect(throws: LogError.self) { _ = try openLog(dir, model: v3) }
        let ada = StoredObjectID(entity: "Person", primaryKey: 1)
        do {
            let log = try openLog(dir, model: v2)
            #expect(log.modelVersion == 2, "the refused version 2 was taken back (spec 0004 §4.3)")
            var draft = TransactionDraft()
            draft.update(.stored(ada), values: ["first": s("Ada")])
            _ = try log.commit(draft)
        }
        let log = try openLog(dir, model: v3)
        #expect(log.modelVersion == 3, "stored after version 2")
        #expect(try log.read { try $0.object(ada) }?.values == ["first": LogValue.attribute(.string("Ada"))], "v2's name taken out")
        var draft = TransactionDraft()
        draft.update(.stored(ada), values: ["first": s("Augusta Ada")])
        _ = try log.commit(draft)
        #expect(try EventLog(openingExistingAt: dir.file("store")).modelVersion == 3, "tools open the store at it")
        #expect(try log.verify().isClean)
    }
}
