import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// A new model version is stored marked until its migration has committed (spec 0004 §4.3),
/// so an open stopped in between — a crash — leaves tools and read-only opens reading the
/// store in the terms its data is in.
@Suite("Event log: a new model version is marked until its migration commits")
struct VersionMarkTests {
    @Test("an open stopped between storing a new version and migrating: tools and read-only opens use the earlier version; the next open with the new one migrates and unmarks it; a new store's first version ends unmarked")
    func stoppedBeforeMigrating() throws {
        let v1 = try ManagedObjectModel { Entity("Player") { Attribute("score", .int64) } }
        let v2 = try ManagedObjectModel { Entity("Player") { Attribute("score", .int16); Attribute("level", .int16, default: 1).required() } }
        let dir = try TemporaryDirectory()
        do {
            let log = try openLog(dir, model: v1)
            #expect(try log.metadata.refusedModelVersions == [], "a new store's first version is unmarked once open")
            var draft = TransactionDraft()
            _ = draft.insert("Player", values: ["score": .attribute(.int64(5))])
            _ = try log.commit(draft)
        }
        #expect {
            _ = try openLog(dir, model: v2) { $0.stopsAfterStoringNewVersion = true }
        } throws: { error in
            guard case .invalidOperation(let text) = error as? LogError else { return false }
            return text.contains("stopped after storing model version 2")
        }

        let tool = try EventLog(openingExistingAt: dir.file("store"))
        #expect(tool.modelVersion == 1, "the store's data is in version 1's terms")
        #expect(try tool.metadata.refusedModelVersions == [2])
        #expect(try tool.read { try $0.object(StoredObjectID(entity: "Player", primaryKey: 1)) }?.values["score"] == .attribute(.int64(5)))
        _ = try openLog(dir, model: v1) { $0.isReadOnly = true }
        // With automatic migration off, the still-marked version is refused, naming both
        // reasons a version stays marked (before, only "refused before", though it never was).
        #expect {
            _ = try openLog(dir, model: v2) { $0.migratesAutomatically = false }
        } throws: { error in
            guard case .modelMismatch(let text) = error as? LogError else { return false }
            return text.contains("hasn't been migrated to model version 2 (its migration was refused, or didn't finish, when the version was first opened)")
        }

        let log = try openLog(dir, model: v2)
        #expect(log.modelVersion == 2)
        #expect(try log.metadata.refusedModelVersions == [])
        let player = try log.read { try $0.object(StoredObjectID(entity: "Player", primaryKey: 1)) }
        #expect(player?.values["score"] == .attribute(.int16(5)))
        #expect(player?.values["level"] == .attribute(.int16(1)))
        #expect(try EventLog(openingExistingAt: dir.file("store")).modelVersion == 2)
        #expect(try log.verify().isClean)
    }
}

extension VersionMarkTests {
    @Test("an open stopped right after its migration committed (a crash): the version is unmarked with the migration, so tools and read-only opens read the store as the new version its data is in — and a writable tool open doesn't migrate it back")
    func stoppedAfterMigrating() throws {
        let v1 = try ManagedObjectModel { Entity("Player") { Attribute("score", .int64) } }
        let v2 = try ManagedObjectModel { Entity("Player") { Attribute("score", .int16); Attribute("level", .int16, default: 1).required() } }
        let dir = try TemporaryDirectory()
        do {
            let log = try openLog(dir, model: v1)
            var draft = TransactionDraft()
            _ = draft.insert("Player", values: ["score": .attribute(.int64(5))])
            _ = try log.commit(draft)
        }
        #expect(throws: LogError.self) { _ = try openLog(dir, model: v2) { $0.stopsAfterMigrating = true } }
        let tool = try EventLog(openingExistingAt: dir.file("store"))
        #expect(tool.modelVersion == 2, "the migration committed: the data is in version 2's terms")
        #expect(try tool.metadata.refusedModelVersions == [])
        #expect(try tool.read { try $0.object(StoredObjectID(entity: "Player", primaryKey: 1)) }?.values["level"] == .attribute(.int16(1)))
        let head = try tool.head
        let writable = try EventLog(openingExistingAt: dir.file("store"), readOnly: false)
        #expect(writable.modelVersion == 2)
        #expect(try writable.head == head, "nothing migrated back to version 1")
    }
}
