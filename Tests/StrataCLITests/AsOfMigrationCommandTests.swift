import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// A point in the log before a migration, shown in the terms of the model version the data
/// was in then (its entities and property names), not the newest version's.
@Suite("strata export --at and replay before a migration")
struct AsOfMigrationCommandTests {
    /// Player "Ng, Ada" (rating 7, then 8) saved with version 1; version 2 renames `name` to
    /// `nick` and removes `rating`, migrating the store (transactions 3…).
    static func migratedStore(_ directory: TemporaryDirectory) throws -> (path: String, uri: String) {
        let path = directory.file("Players.strata")
        let v1 = try ManagedObjectModel {
            Entity("Player") {
                Attribute("name", .string)
                Attribute("rating", .int32)
            }
        }
        let v2 = try ManagedObjectModel {
            Entity("Player") { Attribute("nick", .string).renamed(from: "name") }
        }
        var id: StoredObjectID?
        do {
            let log = try EventLog(path: path, model: v1)
            var draft = TransactionDraft(author: "app")
            let ada = draft.insert("Player", values: ["name": .attribute(.string("Ng, Ada")), "rating": .attribute(.int32(7))])
            id = try log.commit(draft).permanentID(for: ada)
            var update = TransactionDraft(author: "app")
            update.update(.stored(try required(id)), values: ["rating": .attribute(.int32(8))])
            try log.commit(update)
        }
        var removing = EventLog.Configuration()
        removing.allowsRemovingEntitiesAndProperties = true  // v2 drops rating (spec 0004 §4.7)
        let log = try EventLog(path: path, model: v2, configuration: removing)
        #expect(try log.read { try $0.head } > 2, "the open migrated the store")
        let player = try required(id)
        return (path, "x-strata://\(log.storeUUID.uuidString)/\(player.entity)/p\(player.primaryKey)")
    }

    @Test("export --at a point before the migration has version 1's properties with their values; at the head, version 2's")
    func exportBeforeMigration() throws {
        let directory = try TemporaryDirectory()
        let (path, _) = try Self.migratedStore(directory)
        let before = try strata("export", path, "--at", "2", "--format", "ndjson")
        #expect(before.status == 0, "\(before.standardError)")
        #expect(before.standardOutput.contains(#""name":"Ng, Ada""#), "\(before.standardOutput)")
        #expect(before.standardOutput.contains(#""rating":8"#), "\(before.standardOutput)")
        #expect(!before.standardOutput.contains("nick"), "\(before.standardOutput)")
        let csv = try strata("export", path, "--at", "2", "--format", "sql")
        #expect(csv.status == 0, "\(csv.standardError)")
        #expect(csv.standardOutput.contains("Ng, Ada") && csv.standardOutput.contains("rating"), "\(csv.standardOutput)")
        let now = try strata("export", path, "--format", "ndjson")
        #expect(now.status == 0, "\(now.standardError)")
        #expect(now.standardOutput.contains(#""nick":"Ng, Ada""#), "\(now.standardOutput)")
        #expect(!now.standardOutput.contains("rating"), "\(now.standardOutput)")
    }

    @Test("replay --object shows each step in its transaction's version: name and rating before the migration, nick after; the summary as of 2 counts the player")
    func replayObjectAcrossMigration() throws {
        let directory = try TemporaryDirectory()
        let (path, uri) = try Self.migratedStore(directory)
        let result = try strata("replay", path, "--object", uri)
        #expect(result.status == 0, "\(result.standardError)")
        let out = result.standardOutput
        let steps = out.components(separatedBy: "\n#")
        let first = try required(steps.first { $0.hasPrefix("1 ") })
        #expect(first.contains("name    \"Ng, Ada\"") && first.contains("rating  7"), "\(first)")
        let last = try required(steps.last)
        #expect(last.contains("nick  \"Ng, Ada\""), "\(out)")
        let summary = try strata("replay", path, "--to", "2")
        #expect(summary.status == 0, "\(summary.standardError)")
        #expect(summary.standardOutput.contains("Player  1"), "\(summary.standardOutput)")
    }

    @Test("log --property takes a property an earlier version had (renamed or removed since): its changes before the migration; a name no version had is still exit 1")
    func logPropertyOfAnEarlierVersion() throws {
        let directory = try TemporaryDirectory()
        let (path, _) = try Self.migratedStore(directory)
        let rating = try strata("log", path, "--property", "rating")
        #expect(rating.status == 0, "\(rating.standardError)")
        #expect(rating.standardOutput.contains("rating: 7 → 8"), "\(rating.standardOutput)")
        let name = try strata("log", path, "--property", "name")
        #expect(name.status == 0, "\(name.standardError)")
        #expect(name.standardOutput.contains("\"Ng, Ada\""), "\(name.standardOutput)")
        let unknown = try strata("log", path, "--property", "height")
        #expect(unknown.status == 1)
        #expect(unknown.standardError.contains("no entity of the store's models has a property \"height\""), "\(unknown.standardError)")
    }

    @Test("query --at a point before the migration answers in the model the query is written against: nick holds the name then, rating (removed) isn't shown, and a predicate on nick matches it")
    func queryBeforeMigration() throws {
        let directory = try TemporaryDirectory()
        let (path, _) = try Self.migratedStore(directory)
        let before = try strata("query", path, "Player", "--at", "1", "--where", "nick == 'Ng, Ada'", "--format", "ndjson")
        #expect(before.status == 0, "\(before.standardError)")
        // Before, nick read nil at any point before the migration and the predicate matched nothing.
        #expect(before.standardOutput.contains(#""nick":"Ng, Ada""#), "\(before.standardOutput)")
        #expect(!before.standardOutput.contains("rating"), "\(before.standardOutput)")
        let counted = try strata("query", path, "Player", "--at", "2", "--where", "nick BEGINSWITH 'Ng'", "--count")
        #expect(counted.status == 0, "\(counted.standardError)")
        #expect(counted.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "\(counted.standardOutput)")
    }
}
