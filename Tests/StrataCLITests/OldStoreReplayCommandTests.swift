import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// Session 33 (helper 5): `strata replay --object` of a store written before both sides of a
/// both-ordered relationship were recorded (spec 0004 §4.1).
@Suite("strata replay --object of an old store")
struct OldStoreReplayCommandTests {
    static func playlistModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Playlist") {
                Attribute("name", .string)
                Relationship("songs", to: "Song", inverse: "playlists", toMany: true, ordered: true)
            }
            Entity("Song") {
                Attribute("name", .string)
                Relationship("playlists", to: "Playlist", inverse: "songs", toMany: true, ordered: true)
            }
        }
    }

    @Test(
        "each step of a Song's blame before the fill shows Song.playlists as object(_:asOf:) gives it, derived from the playlists' lists then (before: nil, the record as stored)"
    )
    func blameBeforeFill() throws {
        let directory = try TemporaryDirectory("strata-cli")
        let path = directory.file("Old.strata")
        // As Strata wrote it before session 30: only Playlist.songs recorded. 1: p1 holds s2,
        // s1, p2 holds s1; 2: p2 lets s1 go; 3: s1 renamed.
        do {
            var configuration = EventLog.Configuration()
            configuration.skipsOrderedPairCheck = true
            let old = try EventLog(path: path, model: try Self.playlistModel(), configuration: configuration)
            var draft = TransactionDraft()
            let p1 = draft.insert("Playlist", values: ["name": str("p1")])
            let p2 = draft.insert("Playlist", values: ["name": str("p2")])
            let s1 = draft.insert("Song", values: ["name": str("s1")])
            let s2 = draft.insert("Song", values: ["name": str("s2")])
            draft.update(p2, values: ["songs": .references([s1])])
            draft.update(p1, values: ["songs": .references([s2, s1])])
            _ = try old.commit(draft)
            var second = TransactionDraft()
            second.update(.stored(StoredObjectID(entity: "Playlist", primaryKey: 2)), values: ["songs": .references([])])
            _ = try old.commit(second)
            var third = TransactionDraft()
            third.update(.stored(StoredObjectID(entity: "Song", primaryKey: 1)), values: ["name": str("s1'")])
            _ = try old.commit(third)
        }
        do {
            var options = LMDBEnvironment.Options()
            options.maxDatabases = 32
            let environment = try LMDBEnvironment(path: path, databases: [DatabaseDescriptor("catalog")], options: options)
            try environment.write { txn in
                let catalog = try environment.database(named: "catalog")
                let name = Array("rSong.playlists".utf8)
                let code = try required(try txn.value(forKey: name, in: catalog))
                _ = try txn.delete(key: name, in: catalog)
                _ = try txn.delete(key: [UInt8(ascii: "R")] + code, in: catalog)
            }
        }
        // The first writable open fills Song.playlists (event 4).
        let uuid: UUID
        do {
            let log = try EventLog(path: path, model: try Self.playlistModel())
            uuid = log.storeUUID
            #expect(try log.head == 4)
        }
        func uri(_ entity: String, _ key: Int) -> String { "x-strata://\(uuid.uuidString)/\(entity)/p\(key)" }
        let result = try strata("replay", path, "--object", uri("Song", 1))
        #expect(result.status == 0, "\(result.standardError)")
        let steps = result.standardOutput.components(separatedBy: "\n\n").dropFirst()
        let lists = steps.map { step in
            step.split(separator: "\n").first { $0.contains("playlists  ") }.map { String($0.split(separator: "  ").last ?? "") }
        }
        // The insert (both playlists hold s1), the rename (p2 let it go in 2), the fill.
        let both = "[\(uri("Playlist", 1)), \(uri("Playlist", 2))]"
        #expect(lists == [both, "[\(uri("Playlist", 1))]", "[\(uri("Playlist", 1))]"], "\(result.standardOutput)")
        // What the library's as-of read gives for each step.
        let log = try EventLog(openingExistingAt: path, readOnly: true)
        let s1 = StoredObjectID(entity: "Song", primaryKey: 1)
        let (atInsert, atRename) = try log.read { reader in
            (try reader.object(s1, asOf: 1)?["playlists"], try reader.object(s1, asOf: 3)?["playlists"])
        }
        let (p1, p2) = (StoredObjectID(entity: "Playlist", primaryKey: 1), StoredObjectID(entity: "Playlist", primaryKey: 2))
        #expect(atInsert == .references([p1, p2]))
        #expect(atRename == .references([p1]))
    }
}
