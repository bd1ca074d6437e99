import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// Deletes of objects a migration moved (renamed properties and entities, a relationship
/// recorded on its other side) and of objects an earlier model wrote after it: the event's
/// bytes are its own encoding (a before-image copied from a record has the event's layout),
/// the event read back is the commit's, and `verify` is clean.
@Suite("Event log: deletes after a migration")
struct DeleteAfterMigrationTests {
    /// Deletes every object in one draft (derived sides first, so nothing dangles at the end)
    /// and checks the event and the store.
    static func deleteEverything(_ log: EventLog, entities: [String]) throws {
        let ids = try log.read { (reader: borrowing LogReader) throws -> [StoredObjectID] in
            var ids: [StoredObjectID] = []
            for entity in entities {
                try reader.forEachObjectID(of: entity, includingSubentities: false) { id in
                    ids.append(id)
                    return .next
                }
            }
            return ids
        }
        #expect(!ids.isEmpty)
        let befores = try log.read { reader in try ids.map { try #require(try reader.object($0)).values } }
        var draft = TransactionDraft()
        for id in ids { draft.delete(.stored(id)) }
        let result = try log.commit(draft)
        #expect(result.event.changes == zip(ids, befores).map { Change.delete($0, before: $1) })
        #expect(try log.read { try $0.event(result.sequence) } == result.event)
        let stored = try log.environment.read { txn in
            var bytes: [UInt8] = []
            try txn.forEach(in: log.tables.events, range: .prefix(bigEndianBytes(result.sequence))) { _, value in
                value.withUnsafeBytes { bytes.append(contentsOf: $0) }
                return .next
            }
            return bytes
        }
        #expect(stored == (try EventCodec.encode(result.event, catalog: log.catalog)))
        let report = try log.verify()
        #expect(report.isClean, "\(report.problems)")
    }

    @Test("renamed and re-sided properties (RenameMigrationTests' store), some objects changed since: every object deleted in one draft")
    func renamedProperties() throws {
        let dir = try TemporaryDirectory("strata-delete-renames")
        let stored = try RenameMigrationTests.store(dir)
        let log = try openLog(dir, model: try RenameMigrationTests.v2())
        var draft = TransactionDraft()
        draft.update(.stored(stored.players[0]), values: ["name": s("Anna")])
        _ = try log.commit(draft)
        try Self.deleteEverything(log, entities: ["Player", "Sponsor", "Team"])
        try log.read { (reader: borrowing LogReader) throws in
            for entity in ["Player", "Sponsor", "Team"] { #expect(try reader.count(of: entity) == 0, "\(entity)") }
        }
    }

    static func entityModel(renamed: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: renamed ? "Athlete" : "Player", inverse: "team", toMany: true)
            }
            if renamed {
                Entity("Athlete") {
                    Attribute("name", .string)
                    Relationship("team", to: "Team", inverse: "players")
                    Relationship("mate", to: "Athlete")
                }.renamed(from: "Player")
            } else {
                Entity("Player") {
                    Attribute("name", .string)
                    Relationship("team", to: "Team", inverse: "players")
                    Relationship("mate", to: "Player")
                }
            }
        }
    }

    @Test("a renamed entity whose objects reference each other, and one the earlier model inserted under the old name since: every object deleted in one draft")
    func renamedEntity() throws {
        let dir = try TemporaryDirectory("strata-delete-entity-rename")
        do {
            let log = try openLog(dir, model: try Self.entityModel(renamed: false))
            var draft = TransactionDraft()
            let team = draft.insert("Team", values: ["name": s("T")])
            let ann = draft.insert("Player", values: ["name": s("Ann"), "team": .reference(team)])
            draft.insert("Player", values: ["name": s("Ben"), "team": .reference(team), "mate": .reference(ann)])
            _ = try log.commit(draft)
        }
        do {
            let log = try openLog(dir, model: try Self.entityModel(renamed: true))
            var draft = TransactionDraft()
            draft.insert("Athlete", values: ["name": s("Cy"), "mate": .reference(.stored(StoredObjectID(entity: "Athlete", primaryKey: 1)))])
            _ = try log.commit(draft)
        }
        do {
            let log = try openLog(dir, model: try Self.entityModel(renamed: false))
            var draft = TransactionDraft()
            draft.insert("Player", values: ["name": s("Dee")])
            _ = try log.commit(draft)
        }
        let log = try openLog(dir, model: try Self.entityModel(renamed: true))
        try Self.deleteEverything(log, entities: ["Athlete", "Team"])
        try log.read { (reader: borrowing LogReader) throws in
            for entity in ["Athlete", "Team"] { #expect(try reader.count(of: entity) == 0, "\(entity)") }
        }
    }
}
