import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// Session 36 (helper 3): the CLI on a store whose many-to-many ordered on both sides has a
/// second side to fill or filled wrong (spec 0004 §4.1, §8).
@Suite("strata verify and tool opens on a both-ordered many-to-many's second side")
struct PairedSideCommandTests {
    /// `Playlist.songs` ordered; `Song.playlists` ordered too (`both`: both sides recorded).
    static func playlists(both: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Playlist") {
                Attribute("name", .string)
                Relationship("songs", to: "Song", inverse: "playlists", toMany: true, ordered: true)
            }
            Entity("Song") {
                Attribute("name", .string)
                Relationship("playlists", to: "Playlist", inverse: "songs", toMany: true, ordered: both)
            }
        }
    }

    @Test("verify on a store whose songs' playlists lists miss the playlists that list them (written as a skipped fill leaves it): exit 1, an integrity line naming the song, the side and the playlist missing (before: \"no problems\", exit 0)")
    func verifyReportsAPairedSideMissingMembers() throws {
        let directory = try TemporaryDirectory("strata-cli")
        let path = directory.file("store")
        do {
            var configuration = EventLog.Configuration()
            configuration.skipsOrderedPairCheck = true
            let log = try EventLog(path: path, model: try Self.playlists(both: true), configuration: configuration)
            var draft = TransactionDraft()
            let song = draft.insert("Song", values: ["name": str("a")])
            draft.insert("Playlist", values: ["name": str("one"), "songs": .references([song])])
            try log.commit(draft)
        }
        let result = try strata("verify", path)
        #expect(result.status == 1, "\(result.standardOutput)\(result.standardError)")
        #expect(
            result.standardOutput.contains(
                "integrity: Song/p1.playlists: doesn't list Playlist/p1, whose Playlist.songs list holds it: both sides of a many-to-many ordered on both sides are recorded"),
            "\(result.standardOutput)")
    }

    @Test("a later model version that orders the second side stored and its open stopped before its migration (a crash): info and compact — tool opens, in the earlier version's terms — work (before: refused, as if the side were the earlier version's to fill), and the later version's next open fills the side")
    func toolOpensWhileALaterVersionIsUnfilled() throws {
        let directory = try TemporaryDirectory("strata-cli")
        let path = directory.file("store")
        let (playlist, songs): (StoredObjectID, [StoredObjectID])
        do {
            let log = try EventLog(path: path, model: try Self.playlists(both: false))
            var draft = TransactionDraft()
            let a = draft.insert("Song", values: ["name": str("a")])
            let b = draft.insert("Song", values: ["name": str("b")])
            let one = draft.insert("Playlist", values: ["name": str("one"), "songs": .references([b, a])])
            let result = try log.commit(draft)
            playlist = try required(result.permanentID(for: one))
            songs = [try required(result.permanentID(for: a)), try required(result.permanentID(for: b))]
        }
        var crashing = EventLog.Configuration()
        crashing.stopsAfterStoringNewVersion = true
        #expect(throws: LogError.self) { _ = try EventLog(path: path, model: try Self.playlists(both: true), configuration: crashing) }

        let info = try strata("info", path)
        #expect(info.status == 0, "\(info.standardOutput)\(info.standardError)")
        let compact = try strata("compact", path, "--wait", "0")
        #expect(compact.status == 0, "\(compact.standardOutput)\(compact.standardError)")

        let log = try EventLog(path: path, model: try Self.playlists(both: true))
        #expect(log.modelVersion == 2)
        for song in songs { #expect(try log.read { try $0.related(song, "playlists") } == [playlist]) }
        #expect(try log.read { try $0.related(playlist, "songs") } == [songs[1], songs[0]])
        let verify = try strata("verify", path)
        #expect(verify.status == 0, "\(verify.standardOutput)\(verify.standardError)")
    }
}
