import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// An open that stops after its migration committed, before the fill of a both-ordered side
/// (spec 0004 §4.1) did — an error in the fill, a crash — and one whose refused migration
/// can't be taken back (§4.3). The fill is one write transaction, its marks included: it
/// leaves nothing, the side stays marked, and the next writable open of a version that
/// orders the side fills it. An earlier model's open in between leaves the mark (before
/// session 36 it took the side as filled, and the later version's next open filled nothing:
/// the side's lists stayed empty while verify called the store clean).
@Suite("Event log: a fill of ordered sides that didn't happen is done by the next open of the version that orders them")
struct OrderedFillFailureTests {
    /// v1 (`Song.playlists` unordered, derived): songs a, b, c; playlist one [c, a], two [b, a].
    static func store(_ dir: TemporaryDirectory) throws -> (playlists: [StoredObjectID], songs: [StoredObjectID]) {
        let log = try openLog(dir, model: try RefusedMigrationTests.playlists(false))
        var draft = TransactionDraft()
        let a = draft.insert("Song", values: ["name": s("a")])
        let b = draft.insert("Song", values: ["name": s("b")])
        let c = draft.insert("Song", values: ["name": s("c")])
        let one = draft.insert("Playlist", values: ["name": s("one"), "songs": .references([c, a])])
        let two = draft.insert("Playlist", values: ["name": s("two"), "songs": .references([b, a])])
        let result = try log.commit(draft)
        func id(_ object: DraftObjectID) throws -> StoredObjectID { try #require(result.permanentID(for: object)) }
        return ([try id(one), try id(two)], [try id(a), try id(b), try id(c)])
    }

    /// The store's `meta` row `name`, read with LMDB directly.
    static func meta(_ dir: TemporaryDirectory, _ name: String) throws -> String? {
        try RefusedMigrationTests.rows(dir).meta[Array(name.utf8)].map { String(decoding: $0, as: UTF8.self) }
    }

    /// Both sides as v2 reads them once filled, and verify clean.
    static func expectFilled(_ log: EventLog, _ playlists: [StoredObjectID], _ songs: [StoredObjectID]) throws {
        try log.read { reader throws in
            #expect(try reader.related(playlists[0], "songs") == [songs[2], songs[0]])
            #expect(try reader.related(playlists[1], "songs") == [songs[1], songs[0]])
            #expect(try reader.related(songs[0], "playlists") == [playlists[0], playlists[1]])
            #expect(try reader.related(songs[1], "playlists") == [playlists[1]])
            #expect(try reader.related(songs[2], "playlists") == [playlists[0]])
        }
        let report = try log.verify()
        #expect(report.isClean, "\(report.problems)")
    }

    @Test("an error in the fill after the migration committed: the open throws it; the fill leaves nothing (no event, the side still marked, no fill recorded); a read-only open is refused naming the side; the next writable open fills it, without migrating again")
    func fillErrorIsFinishedByTheNextOpen() throws {
        let dir = try TemporaryDirectory("strata-fill-error")
        let (playlists, songs) = try Self.store(dir)
        #expect(throws: LogError.self) {
            _ = try openLog(dir, model: try RefusedMigrationTests.playlists(true)) { $0.failsFillingOrderedSides = true }
        }
        #expect(try EventLog.headWithoutOpening(dir) == 2, "the migration (the unique index) committed, the fill didn't")
        #expect(try Self.meta(dir, "orderedSidesToFill") == "Song.playlists")
        #expect(try Self.meta(dir, "orderedSidesFilled") == nil)
        do {
            _ = try EventLog(openingExistingAt: dir.file("store"))
            Issue.record("a read-only open of a store whose side isn't filled was taken")
        } catch LogError.invalidOperation(let message) {
            #expect(message.contains("Song.playlists has no list of its own yet"), "\(message)")
        }
        let log = try openLog(dir, model: try RefusedMigrationTests.playlists(true))
        #expect(try log.head == 3, "one fill event, no second migration")
        #expect(try log.read { try $0.event(3) }.kind == .migration)
        #expect(try Self.meta(dir, "orderedSidesFilled") == "Song.playlists 3")
        try Self.expectFilled(log, playlists, songs)
    }

    @Test(
        "the fill didn't happen (an error after the migration, or a crash before it), then the earlier model opens writable and commits: the side stays marked, and the later version's next open fills it (before: the earlier model's open took it as filled, and Song.playlists stayed empty for every song)",
        arguments: ["fill error", "crash before the migration"])
    func earlierModelLeavesTheMark(_ how: String) throws {
        let dir = try TemporaryDirectory("strata-fill-error")
        let (playlists, songs) = try Self.store(dir)
        #expect(throws: LogError.self) {
            _ = try openLog(dir, model: try RefusedMigrationTests.playlists(true)) { configuration in
                if how == "fill error" { configuration.failsFillingOrderedSides = true } else { configuration.stopsAfterStoringNewVersion = true }
            }
        }
        do {
            let earlier = try openLog(dir, model: try RefusedMigrationTests.playlists(false))
            #expect(earlier.modelVersion == 1)
            var draft = TransactionDraft()
            draft.update(.stored(songs[1]), values: ["name": s("b2")])
            try earlier.commit(draft)
        }
        #expect(try Self.meta(dir, "orderedSidesToFill") == "Song.playlists", "the earlier model's open left the mark")
        let log = try openLog(dir, model: try RefusedMigrationTests.playlists(true))
        #expect(log.modelVersion == 2)
        #expect(try Self.meta(dir, "orderedSidesToFill") == nil)
        try Self.expectFilled(log, playlists, songs)
    }
}

extension EventLog {
    /// The head of the store in `dir`, read with LMDB directly (an open may be refused).
    static func headWithoutOpening(_ dir: TemporaryDirectory) throws -> UInt64 {
        let bytes = try RefusedMigrationTests.rows(dir).meta[MetaKey.head]
        return try MetaKey.number(bytes, key: MetaKey.head)
    }
}

/// A later model version orders both sides of a many-to-many (`Playlist.songs` and
/// `Song.playlists`), so the log records and fills `Song.playlists` (spec 0004 §4.1); an app
/// still on the earlier version, which derives `Song.playlists`, then changes `Playlist.songs`.
/// Its events can't set the side it doesn't record, so its commit marks the side to fill again,
/// and the later version's next writable open fills it: each song's list keeps the playlists it
/// held that still hold it, in its order, then gains the others (before session 37 the
/// recorded lists stayed stale for good, and only verify saw it).
@Suite("Event log: an earlier model's change to the inverse of a side a later version records is filled again")
struct EarlierModelPairedSideTests {
    /// The v1 store of ``OrderedFillFailureTests/store(_:)`` — songs a, b, c; playlist one
    /// [c, a], two [b, a] — opened with v2 (the fill), which reorders song a's playlists to
    /// [two, one].
    static func filledStore(_ dir: TemporaryDirectory) throws -> (playlists: [StoredObjectID], songs: [StoredObjectID]) {
        let (playlists, songs) = try OrderedFillFailureTests.store(dir)
        let later = try openLog(dir, model: try RefusedMigrationTests.playlists(true))
        try OrderedFillFailureTests.expectFilled(later, playlists, songs)
        var draft = TransactionDraft()
        draft.update(.stored(songs[0]), values: ["playlists": .references([.stored(playlists[1]), .stored(playlists[0])])])
        try later.commit(draft)
        #expect(try OrderedFillFailureTests.meta(dir, "orderedSidesToFill") == nil)
        return (playlists, songs)
    }

    @Test("the earlier model adds and removes songs in playlists and inserts one: its commit marks Song.playlists; tools are refused until the later version opens writable, which fills the side again keeping each song's order; verify is clean (before: the songs' recorded lists stayed stale, and verify reported them)")
    func earlierCommitMarksTheSide() throws {
        let dir = try TemporaryDirectory("strata-earlier-paired")
        let (playlists, songs) = try Self.filledStore(dir)
        let three: StoredObjectID
        do {
            let earlier = try openLog(dir, model: try RefusedMigrationTests.playlists(false))
            #expect(earlier.modelVersion == 1)
            var draft = TransactionDraft()
            draft.update(.stored(playlists[0]), values: ["songs": .references([.stored(songs[2]), .stored(songs[0]), .stored(songs[1])])])
            draft.update(.stored(playlists[1]), values: ["songs": .references([.stored(songs[0])])])
            let inserted = draft.insert("Playlist", values: ["name": s("three"), "songs": .references([.stored(songs[0]), .stored(songs[2])])])
            let result = try earlier.commit(draft)
            three = try #require(result.permanentID(for: inserted))
            #expect(try earlier.read { try $0.related(songs[1], "playlists") } == [playlists[0]], "v1 derives the side")
        }
        #expect(try OrderedFillFailureTests.meta(dir, "orderedSidesToFill") == "Song.playlists")
        do {
            _ = try EventLog(openingExistingAt: dir.file("store"))
            Issue.record("a read-only open of v2 with Song.playlists stale was taken")
        } catch LogError.invalidOperation(let message) {
            #expect(message.contains("Song.playlists"), "\(message)")
        }
        let later = try openLog(dir, model: try RefusedMigrationTests.playlists(true))
        #expect(later.modelVersion == 2)
        #expect(try OrderedFillFailureTests.meta(dir, "orderedSidesToFill") == nil)
        try later.read { reader throws in
            #expect(try reader.related(playlists[0], "songs") == [songs[2], songs[0], songs[1]])
            #expect(try reader.related(playlists[1], "songs") == [songs[0]])
            #expect(try reader.related(three, "songs") == [songs[0], songs[2]])
            #expect(try reader.related(songs[0], "playlists") == [playlists[1], playlists[0], three], "a's order kept, three after")
            #expect(try reader.related(songs[1], "playlists") == [playlists[0]])
            #expect(try reader.related(songs[2], "playlists") == [playlists[0], three])
        }
        let report = try later.verify()
        #expect(report.isClean, "\(report.problems)")
    }

    @Test("the earlier model deletes a playlist the songs' recorded lists hold, then takes a song out of another: both commits are taken, and the later version's next open leaves no list naming them (before: the delete was refused as leaving Song.playlists references)")
    func earlierDeletes() throws {
        let dir = try TemporaryDirectory("strata-earlier-paired")
        let (playlists, songs) = try Self.filledStore(dir)
        do {
            let earlier = try openLog(dir, model: try RefusedMigrationTests.playlists(false))
            var draft = TransactionDraft()
            draft.delete(.stored(playlists[1]))
            try earlier.commit(draft)
            var second = TransactionDraft()
            second.update(.stored(playlists[0]), values: ["songs": .references([.stored(songs[0])])])
            try earlier.commit(second)
        }
        #expect(try OrderedFillFailureTests.meta(dir, "orderedSidesToFill") == "Song.playlists")
        let later = try openLog(dir, model: try RefusedMigrationTests.playlists(true))
        try later.read { reader throws in
            #expect(try reader.related(playlists[0], "songs") == [songs[0]])
            #expect(try reader.related(songs[0], "playlists") == [playlists[0]])
            #expect(try reader.related(songs[1], "playlists") == [])
            #expect(try reader.related(songs[2], "playlists") == [])
        }
        let report = try later.verify()
        #expect(report.isClean, "\(report.problems)")
    }

    @Test("an earlier model's commit that changes no list of Playlist.songs marks nothing: the later version's lists stand")
    func earlierCommitElsewhereMarksNothing() throws {
        let dir = try TemporaryDirectory("strata-earlier-paired")
        let (playlists, songs) = try Self.filledStore(dir)
        do {
            let earlier = try openLog(dir, model: try RefusedMigrationTests.playlists(false))
            var draft = TransactionDraft()
            draft.update(.stored(playlists[0]), values: ["name": s("one2")])
            try earlier.commit(draft)
        }
        #expect(try OrderedFillFailureTests.meta(dir, "orderedSidesToFill") == nil)
        let later = try openLog(dir, model: try RefusedMigrationTests.playlists(true))
        #expect(try later.read { try $0.related(songs[0], "playlists") } == [playlists[1], playlists[0]])
        #expect(try later.verify().isClean)
    }
}
