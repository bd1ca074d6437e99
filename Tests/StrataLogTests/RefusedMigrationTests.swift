import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// A refused model-version migration writes nothing (spec 0004 §4.3): the store's `meta` and
/// `models` tables are as they were, byte for byte, and the earlier model opens it as before —
/// no refused version stored and marked, no fill of a both-ordered side marked (which refused
/// read-only opens, and which an earlier model's writable open then took as done without
/// filling), no format version raised, no opened-at time moved. Before session 35 the refused
/// version stayed stored, marked, with all of those.
@Suite("Event log: a refused migration writes nothing")
struct RefusedMigrationTests {
    /// `Playlist.songs` ordered, its inverse `Song.playlists` unordered (v1) — or ordered too,
    /// with song names unique (v2: both sides recorded, `Song.playlists` to fill).
    static func playlists(_ v2: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Playlist") {
                Attribute("name", .string)
                Relationship("songs", to: "Song", inverse: "playlists", toMany: true, ordered: true)
            }
            Entity("Song") {
                Attribute("name", .string)
                Relationship("playlists", to: "Playlist", inverse: "songs", toMany: true, ordered: v2)
                if v2 { Unique("name") }
            }
        }
    }

    /// Every row of the store's `meta`, `models` and `catalog` tables, read with LMDB directly
    /// (a read-only open of the store may be what is refused).
    static func rows(_ dir: TemporaryDirectory) throws -> (meta: [[UInt8]: [UInt8]], models: [[UInt8]: [UInt8]], catalog: [[UInt8]: [UInt8]]) {
        var options = LMDBEnvironment.Options()
        options.isReadOnly = true
        options.maxDatabases = 32
        let environment = try LMDBEnvironment(
            path: dir.file("store"), databases: ["meta", "models", "catalog"].map { DatabaseDescriptor($0) }, options: options)
        func dump(_ name: String) throws -> [[UInt8]: [UInt8]] {
            let database = try environment.database(named: name)
            return try environment.read { txn in
                var rows: [[UInt8]: [UInt8]] = [:]
                try txn.forEach(in: database) { key, value in
                    rows[key.withUnsafeBytes { Array($0) }] = value.withUnsafeBytes { Array($0) }
                    return .next
                }
                return rows
            }
        }
        return (try dump("meta"), try dump("models"), try dump("catalog"))
    }

    /// `meta` and `models` as they were; every `catalog` row still there (codes the refused
    /// open gave stay retired, never given again).
    static func expectUnchanged(_ dir: TemporaryDirectory, since before: (meta: [[UInt8]: [UInt8]], models: [[UInt8]: [UInt8]], catalog: [[UInt8]: [UInt8]]), _ what: String) throws {
        let after = try rows(dir)
        for (key, value) in after.meta where before.meta[key] != value {
            Issue.record("\(what): meta \(String(decoding: key, as: UTF8.self)) was written")
        }
        for key in before.meta.keys where after.meta[key] == nil {
            Issue.record("\(what): meta \(String(decoding: key, as: UTF8.self)) was deleted")
        }
        #expect(after.models == before.models, "\(what): no model version stored")
        for (key, value) in before.catalog { #expect(after.catalog[key] == value, "\(what): catalog rows kept") }
    }

    @Test("a uniqueness constraint refused: meta and models unchanged; the earlier model opens read-only and writable as before, migrates nothing, and the version once the data is fixed fills its new ordered side")
    func uniquenessRefusal() throws {
        let dir = try TemporaryDirectory("strata-refused")
        let (playlists, songs): ([StoredObjectID], [StoredObjectID])
        do {
            let log = try openLog(dir, model: try Self.playlists(false))
            var draft = TransactionDraft()
            let a = draft.insert("Song", values: ["name": s("Same")])
            let b = draft.insert("Song", values: ["name": s("Same")])
            let c = draft.insert("Song", values: ["name": s("Other")])
            let p1 = draft.insert("Playlist", values: ["name": s("one"), "songs": .references([c, a])])
            let p2 = draft.insert("Playlist", values: ["name": s("two"), "songs": .references([b, a])])
            let result = try log.commit(draft)
            func id(_ object: DraftObjectID) throws -> StoredObjectID { try #require(result.permanentID(for: object)) }
            (playlists, songs) = ([try id(p1), try id(p2)], [try id(a), try id(b), try id(c)])
        }
        let before = try Self.rows(dir)
        let metadata = try EventLog(openingExistingAt: dir.file("store")).metadata
        #expect(throws: LogError.self) { _ = try openLog(dir, model: try Self.playlists(true)) }
        try Self.expectUnchanged(dir, since: before, "refused")

        do {
            let tool = try EventLog(openingExistingAt: dir.file("store"))
            #expect(tool.modelVersion == 1)
            #expect(try tool.metadata == metadata, "info reads the same")
        } catch {
            Issue.record("a tool's open was refused: \(error)")
        }
        do {
            let readOnly = try openLog(dir, model: try Self.playlists(false)) { $0.isReadOnly = true }
            #expect(try readOnly.read { try $0.related(playlists[0], "songs") } == [songs[2], songs[0]])
        } catch {
            Issue.record("the earlier model's read-only open was refused: \(error)")
        }
        do {
            let log = try openLog(dir, model: try Self.playlists(false))
            #expect(log.modelVersion == 1)
            #expect(try log.head == 1, "nothing migrated")
            var fix = TransactionDraft()
            fix.update(.stored(songs[1]), values: ["name": s("Third")])
            try log.commit(fix)
            #expect(try log.verify().isClean)
        }
        let reopened = try openLog(dir, model: try Self.playlists(false))
        #expect(try reopened.head == 2, "an earlier model's commit isn't taken for one to migrate")
        #expect(try reopened.metadata.modelVersions == [1])

        let log = try openLog(dir, model: try Self.playlists(true))
        #expect(log.modelVersion == 2)
        try log.read { reader throws in
            #expect(try reader.related(playlists[0], "songs") == [songs[2], songs[0]])
            #expect(try reader.related(playlists[1], "songs") == [songs[1], songs[0]])
            #expect(try reader.related(songs[0], "playlists") == [playlists[0], playlists[1]])
            #expect(try reader.related(songs[1], "playlists") == [playlists[1]])
            #expect(try reader.related(songs[2], "playlists") == [playlists[0]])
        }
        let report = try log.verify()
        #expect(report.isClean, "\(report.problems)")
        #expect(try log.metadata.refusedModelVersions == [])
    }

    @Test("a narrowed destination refused: meta and models unchanged; the earlier model reopens, writes and reopens without migrating; as-of reads and verify as before")
    func narrowingRefusal() throws {
        let dir = try TemporaryDirectory("strata-refused")
        let (_, plain, players) = try InverseChangeMigrationTests.league(dir, misfit: true)
        let before = try Self.rows(dir)
        let metadata = try EventLog(openingExistingAt: dir.file("store")).metadata
        #expect(throws: LogError.self) {
            _ = try openLog(dir, model: try InverseChangeMigrationTests.leagues(narrowed: true)) { $0.allowsRemovingEntitiesAndProperties = false }
        }
        try Self.expectUnchanged(dir, since: before, "refused")
        #expect(try EventLog(openingExistingAt: dir.file("store")).metadata == metadata, "info reads the same")

        do {
            let log = try openLog(dir, model: try InverseChangeMigrationTests.leagues(narrowed: false)) { $0.allowsRemovingEntitiesAndProperties = false }
            #expect(log.modelVersion == 1)
            var draft = TransactionDraft()
            draft.update(.stored(players[1]), values: ["name": s("Benno")])
            try log.commit(draft)
        }
        let log = try openLog(dir, model: try InverseChangeMigrationTests.leagues(narrowed: false)) { $0.allowsRemovingEntitiesAndProperties = false }
        #expect(try log.head == 2, "nothing migrated: the earlier model's commit isn't taken for one to migrate")
        #expect(try log.metadata.modelVersions == [1])
        #expect(try log.metadata.refusedModelVersions == [])
        #expect(try log.read { try $0.object(players[1], asOf: 1) }?["team"] == .reference(plain))
        #expect(try log.read { try $0.related(players[1], "team") } == [plain])
        #expect(try log.verify().isClean)
    }

    @Test("a refusal whose take-back fails: the open's error says both — the refusal, and that nothing was taken back, and what stays (before: only the refusal, as if the store were as it was); the version stays marked, as after a crash before its migration: tools, read-only opens and the earlier model open the store as before; once the data is fixed, the version migrates and fills its side")
    func takeBackFails() throws {
        let dir = try TemporaryDirectory("strata-refused")
        let (playlists, songs): ([StoredObjectID], [StoredObjectID])
        do {
            let log = try openLog(dir, model: try Self.playlists(false))
            var draft = TransactionDraft()
            let a = draft.insert("Song", values: ["name": s("Same")])
            let b = draft.insert("Song", values: ["name": s("Same")])
            let c = draft.insert("Song", values: ["name": s("Other")])
            let p1 = draft.insert("Playlist", values: ["name": s("one"), "songs": .references([c, a])])
            let p2 = draft.insert("Playlist", values: ["name": s("two"), "songs": .references([b, a])])
            let result = try log.commit(draft)
            func id(_ object: DraftObjectID) throws -> StoredObjectID { try #require(result.permanentID(for: object)) }
            (playlists, songs) = ([try id(p1), try id(p2)], [try id(a), try id(b), try id(c)])
        }
        do {
            _ = try openLog(dir, model: try Self.playlists(true)) { $0.failsTakingBack = true }
            Issue.record("the open with a broken uniqueness constraint was taken")
        } catch LogError.migration(let message) {
            #expect(message.hasPrefix("the migration to model version 2 was refused (uniqueness constraint (name) of Song violated by value "), "\(message)")
            #expect(
                message.contains(
                    "objects Song/p1, Song/p2), and taking back what the open wrote failed (the take-back failed, as asked (a test of an error there)): nothing was taken back — model version 2 stays stored and marked as refused, as after a crash before its migration"),
                "\(message)")
        } catch {
            Issue.record("the open threw \(error), which doesn't say the take-back failed")
        }
        let tool = try EventLog(openingExistingAt: dir.file("store"))
        #expect(tool.modelVersion == 1)
        #expect(try tool.metadata.refusedModelVersions == [2])
        do {
            let readOnly = try openLog(dir, model: try Self.playlists(false)) { $0.isReadOnly = true }
            #expect(try readOnly.read { try $0.related(songs[0], "playlists") } == [playlists[0], playlists[1]])
        } catch {
            Issue.record("the earlier model's read-only open was refused: \(error)")
        }
        do {
            let log = try openLog(dir, model: try Self.playlists(false))
            #expect(log.modelVersion == 1)
            #expect(try log.head == 1, "nothing migrated")
            var fix = TransactionDraft()
            fix.update(.stored(songs[1]), values: ["name": s("Third")])
            try log.commit(fix)
            #expect(try log.verify().isClean)
        }
        let log = try openLog(dir, model: try Self.playlists(true))
        #expect(log.modelVersion == 2)
        #expect(try log.metadata.refusedModelVersions == [])
        try OrderedFillFailureTests.expectFilled(log, playlists, songs)
    }

    @Test("a refusal whose take-back fails, for a model version stored before the open (marked, as after a crash before its migration): the error names what the open wrote and left — the opened-at time — instead of calling the store as it was (before: \"the store's data is as it was\", while openedAt had moved)")
    func takeBackFailsForStoredVersion() throws {
        let dir = try TemporaryDirectory("strata-refused")
        do {
            let log = try openLog(dir, model: try Self.playlists(false))
            var draft = TransactionDraft()
            _ = draft.insert("Song", values: ["name": s("Same")])
            _ = draft.insert("Song", values: ["name": s("Same")])
            try log.commit(draft)
        }
        #expect(throws: LogError.self) { _ = try openLog(dir, model: try Self.playlists(true)) { $0.stopsAfterStoringNewVersion = true } }
        let before = try Self.rows(dir).meta
        do {
            _ = try openLog(dir, model: try Self.playlists(true)) { $0.failsTakingBack = true }
            Issue.record("the open with a broken uniqueness constraint was taken")
        } catch LogError.migration(let message) {
            #expect(message.hasPrefix("the migration to model version 2 was refused (uniqueness constraint (name) of Song violated by value "), "\(message)")
            #expect(message.contains("nothing was taken back"), "\(message)")
            #expect(message.contains("the store's data is as it was") == false, "\(message)")
            #expect(
                message.hasSuffix(
                    "; model version 2 was stored before this open (and stays marked as refused), so the store's objects and model versions are as they were, but what the open wrote stays: the opened-at time"),
                "\(message)")
        } catch {
            Issue.record("the open threw \(error), which doesn't say the take-back failed")
        }
        let after = try Self.rows(dir).meta
        #expect(after[MetaKey.openedAt] != before[MetaKey.openedAt], "the open moved openedAt, as the error says")
        #expect(after.filter { before[$0.key] != $0.value }.map { String(decoding: $0.key, as: UTF8.self) } == ["openedAt"])
        let tool = try EventLog(openingExistingAt: dir.file("store"))
        #expect(tool.modelVersion == 1)
        #expect(try tool.metadata.refusedModelVersions == [2])
    }
}
