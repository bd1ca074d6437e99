import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// `verify` and the relationships read from the other side (spec 0004 §8): an ordered
/// to-many lists an object once, an object is in one list of an ordered to-many with a
/// to-one inverse, and a derived side agrees with the recorded one — damage planted in the
/// store's raw LMDB tables.
@Suite("Verify: ordered lists and the sides derived from them, damage planted in the raw tables")
struct VerifyOrderedListTests {
    /// Team.players is an ordered one-to-many (recorded; Player.team derived from it);
    /// Club.members an unordered one (Member.club recorded; Club.members derived).
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true, ordered: true)
            }
            Entity("Player") {
                Attribute("name", .string)
                Relationship("team", to: "Team", inverse: "players")
            }
            Entity("Club") {
                Attribute("name", .string)
                Relationship("members", to: "Member", inverse: "club", toMany: true)
            }
            Entity("Member") {
                Attribute("name", .string)
                Relationship("club", to: "Club", inverse: "members")
            }
        }
    }

    /// A store with Team/p1 (players Player/p1, Player/p2, in event 2), Team/p2 (Player/p3),
    /// and Club/p1 with Member/p1; verified clean. Every handle is closed on return.
    static func store(_ dir: TemporaryDirectory) throws -> String {
        let log = try openLog(dir, model: try model())
        var draft = TransactionDraft()
        let t1 = draft.insert("Team", values: ["name": s("T1")])
        let t2 = draft.insert("Team", values: ["name": s("T2")])
        let a = draft.insert("Player", values: ["name": s("a")])
        let b = draft.insert("Player", values: ["name": s("b")])
        let c = draft.insert("Player", values: ["name": s("c")])
        let club = draft.insert("Club", values: ["name": s("C")])
        draft.insert("Member", values: ["name": s("m"), "club": .reference(club)])
        let first = try log.commit(draft)
        var lists = TransactionDraft()
        lists.update(.stored(try #require(first.permanentID(for: t1))), values: [
            "players": .references([.stored(try #require(first.permanentID(for: a))), .stored(try #require(first.permanentID(for: b)))])
        ])
        lists.update(.stored(try #require(first.permanentID(for: t2))), values: ["players": .references([.stored(try #require(first.permanentID(for: c)))])])
        try log.commit(lists)
        #expect(try log.verify().isClean)
        return dir.file("store")
    }

    /// `id`'s key in the store's tables.
    static func key(_ log: EventLog, _ id: StoredObjectID) throws -> ObjectKey {
        ObjectKey(entity: try log.catalog.entityCode(id.entity), primaryKey: id.primaryKey)
    }

    @Test("an ordered list naming an object twice — in the event and the record alike, as a writer that didn't dedupe would leave it — is an integrity problem naming the list, the object, its places and the event that last wrote the record; before, verify found the store clean")
    func objectListedTwiceInOneList() throws {
        let dir = try TemporaryDirectory()
        let path = try Self.store(dir)
        let a = StoredObjectID(entity: "Player", primaryKey: 1)
        let b = StoredObjectID(entity: "Player", primaryKey: 2)
        let team = StoredObjectID(entity: "Team", primaryKey: 1)
        // Event 2 and Team/p1's record re-encoded with Player/p1 listed again at the end.
        let (eventBytes, recordBytes, teamKey): ([UInt8], [UInt8], ObjectKey)
        do {
            let log = try openLog(dir, model: try Self.model())
            var event = try log.read { try $0.event(2) }
            event.groups = event.groups.map { group in
                var group = group
                group.changes = group.changes.map { change in
                    guard case .update(let id, let changes) = change, id == team else { return change }
                    return .update(id, changes: changes.map { propertyChange in
                        guard case .value("players", let before, .references(let ids)) = propertyChange else { return propertyChange }
                        return .value(property: "players", before: before, after: .references(ids + [a]))
                    })
                }
                return group
            }
            eventBytes = try EventCodec.encode(event, catalog: log.catalog)
            // One chunk: the planted bytes replace the event's only row.
            #expect(eventBytes.count < 1_000)
            teamKey = try Self.key(log, team)
            let writer = TableWriter(tables: log.tables, catalog: log.catalog, schema: log.schema, modelVersion: log.modelVersion)
            let entity = try #require(log.schema.entities["Team"])
            recordBytes = try log.read { reader in
                let record = try #require(try writer.readRecord(reader.txn, teamKey, entityName: "Team"))
                #expect(record.values["players"] == .references([a, b]))
                var values = record.values
                values["players"] = .references([a, b, a])
                return try writer.encodeRecord(Record(modelVersion: record.modelVersion, version: record.version, values: values), entity: entity)
            }
        }
        do {
            let raw = try RawStore(path)
            try raw.environment.write { txn in
                let eventKey = bigEndianBytes(UInt64(2)) + bigEndianBytes(UInt32(0))
                try txn.put(eventBytes, forKey: eventKey, in: raw.tables.events)
                try txn.put(recordBytes, forKey: teamKey.bytes, in: raw.tables.state)
            }
        }
        let log = try openLog(dir, model: try Self.model())
        #expect(try log.read { try $0.event(2) }.changes.contains { change in
            if case .update(team, let changes) = change { return changes.contains { $0.property == "players" } }
            return false
        })
        let report = try log.verify()
        #expect(report.problems.map(\.description) == [
            "integrity: Team/p1.players: lists Player/p1 2 times (at 0 and 2), but an ordered to-many holds an object once; Team/p1's record was last written by event 2 (its version: the last event that wrote it, not necessarily the one that listed Player/p1 again)"
        ])
    }

    @Test("a player two teams' ordered lists hold, planted in the records and the reference rows: the difference from the replay, and the object held twice, naming both holders and the events that last wrote them")
    func objectInTwoOrderedLists() throws {
        let dir = try TemporaryDirectory()
        let path = try Self.store(dir)
        let a = StoredObjectID(entity: "Player", primaryKey: 1)
        let c = StoredObjectID(entity: "Player", primaryKey: 3)
        let team2 = StoredObjectID(entity: "Team", primaryKey: 2)
        let (recordBytes, teamKey, link): ([UInt8], ObjectKey, [UInt8])
        do {
            let log = try openLog(dir, model: try Self.model())
            teamKey = try Self.key(log, team2)
            let writer = TableWriter(tables: log.tables, catalog: log.catalog, schema: log.schema, modelVersion: log.modelVersion)
            let entity = try #require(log.schema.entities["Team"])
            recordBytes = try log.read { reader in
                let record = try #require(try writer.readRecord(reader.txn, teamKey, entityName: "Team"))
                var values = record.values
                values["players"] = .references([c, a])
                return try writer.encodeRecord(Record(modelVersion: record.modelVersion, version: record.version, values: values), entity: entity)
            }
            link = TableWriter.withLinkKey(try Self.key(log, a), try log.catalog.relationshipCode("Team.players"), teamKey) { Array($0) }
        }
        do {
            let raw = try RawStore(path)
            try raw.environment.write { txn in
                try txn.put(recordBytes, forKey: teamKey.bytes, in: raw.tables.state)
                try txn.put([UInt8](), forKey: link, in: raw.tables.referrers)
            }
        }
        let log = try openLog(dir, model: try Self.model())
        let report = try log.verify()
        #expect(report.problems.map(\.description) == [
            "projection: state Team/p2: players: live [Player/p3, Player/p1], the log's replay says [Player/p3]",
            "projection: references Team/p2 Team.players → Player/p1: is in the live table but not in the log's replay",
            "integrity: references Player/p1 Team.players: is held by 2 objects (Team/p1, its record last written by event 2; Team/p2, its record last written by event 2), but its inverse Player.team is a to-one: one object may hold it (each record's version is the last event that wrote it, not necessarily the one that listed Player/p1)",
        ])
    }

    @Test("a reference row gone from under a derived side — an ordered list's member (its to-one reads no team) and an unordered one's (its club lists no member) — is reported naming the objects and the relationship")
    func derivedSideLosesItsRow() throws {
        let dir = try TemporaryDirectory()
        let path = try Self.store(dir)
        let (ordered, unordered): ([UInt8], [UInt8])
        do {
            let log = try openLog(dir, model: try Self.model())
            ordered = TableWriter.withLinkKey(
                try Self.key(log, StoredObjectID(entity: "Player", primaryKey: 2)), try log.catalog.relationshipCode("Team.players"),
                try Self.key(log, StoredObjectID(entity: "Team", primaryKey: 1))) { Array($0) }
            unordered = TableWriter.withLinkKey(
                try Self.key(log, StoredObjectID(entity: "Club", primaryKey: 1)), try log.catalog.relationshipCode("Member.club"),
                try Self.key(log, StoredObjectID(entity: "Member", primaryKey: 1))) { Array($0) }
        }
        do {
            let raw = try RawStore(path)
            let deleted = try raw.environment.write { txn in
                (try txn.delete(key: ordered, in: raw.tables.referrers), try txn.delete(key: unordered, in: raw.tables.referrers))
            }
            #expect(deleted == (true, true))
        }
        let log = try openLog(dir, model: try Self.model())
        let report = try log.verify()
        #expect(report.problems.map(\.description).sorted() == [
            "projection: references Member/p1 Member.club → Club/p1: is missing from the live table (the log's replay has it)",
            "projection: references Team/p1 Team.players → Player/p2: is missing from the live table (the log's replay has it)",
        ])
    }

    /// `Playlist.songs` ↔ `Song.playlists`, both ordered: both sides recorded (spec 0004 §4.1).
    static func playlists() throws -> ManagedObjectModel {
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

    @Test("a many-to-many ordered on both sides whose second side's lists are empty or miss members while the first side's hold them — written as a skipped fill leaves it, the replay agreeing — is an integrity problem naming each holder, the side, the members it lacks and its record's version; before, verify found the store clean")
    func pairedSideMissesMembers() throws {
        let dir = try TemporaryDirectory()
        let playlists: [StoredObjectID]
        let songs: [StoredObjectID]
        do {
            // The commit's check that both sides agree is off: the events write one side, as
            // an open that took a fill as done without filling left the store.
            let log = try openLog(dir, model: try Self.playlists()) { $0.skipsOrderedPairCheck = true }
            var draft = TransactionDraft()
            let a = draft.insert("Song", values: ["name": s("a")])
            let b = draft.insert("Song", values: ["name": s("b")])
            let c = draft.insert("Song", values: ["name": s("c")])
            let result = try log.commit(draft)
            songs = try [a, b, c].map { try #require(result.permanentID(for: $0)) }
            var lists = TransactionDraft()
            let one = lists.insert("Playlist", values: ["name": s("one"), "songs": .references([.stored(songs[2]), .stored(songs[0])])])
            let two = lists.insert("Playlist", values: ["name": s("two"), "songs": .references([.stored(songs[1]), .stored(songs[0])])])
            // Song/p1's list holds one of the two playlists that hold it; the others none.
            let inserted = try log.commit(lists)
            playlists = try [one, two].map { try #require(inserted.permanentID(for: $0)) }
            var partial = TransactionDraft()
            partial.update(.stored(songs[0]), values: ["playlists": .references([.stored(playlists[1])])])
            try log.commit(partial)
        }
        let log = try openLog(dir, model: try Self.playlists())
        #expect(try log.read { try $0.related(songs[0], "playlists") } == [playlists[1]])
        let report = try log.verify()
        let tail = "both sides of a many-to-many ordered on both sides are recorded, and each object's list holds the objects whose lists on the other side hold it (a fill of the side that was skipped, or damage)"
        #expect(report.problems.map(\.description) == [
            "integrity: Song/p1.playlists: doesn't list Playlist/p1, whose Playlist.songs list holds it: \(tail); Song/p1's record was last written by event 3 (its version: the last event that wrote it)",
            "integrity: Song/p2.playlists: doesn't list Playlist/p2, whose Playlist.songs list holds it: \(tail); Song/p2's record was last written by event 1 (its version: the last event that wrote it)",
            "integrity: Song/p3.playlists: doesn't list Playlist/p1, whose Playlist.songs list holds it: \(tail); Song/p3's record was last written by event 1 (its version: the last event that wrote it)",
        ])
    }

    @Test("the other way round: a playlist's list lacking songs whose lists hold it, more than eight of them — named up to eight, and how many more")
    func pairedSideMissesManyMembers() throws {
        let dir = try TemporaryDirectory()
        do {
            let log = try openLog(dir, model: try Self.playlists()) { $0.skipsOrderedPairCheck = true }
            var draft = TransactionDraft()
            let list = draft.insert("Playlist", values: ["name": s("all")])
            for k in 1...10 { draft.insert("Song", values: ["name": s("song \(k)"), "playlists": .references([list])]) }
            try log.commit(draft)
        }
        let log = try openLog(dir, model: try Self.playlists())
        let report = try log.verify()
        let names = (1...8).map { "Song/p\($0)" }.joined(separator: ", ")
        #expect(report.problems.map(\.description) == [
            "integrity: Playlist/p1.songs: doesn't list \(names) and 2 more, whose Song.playlists lists hold it: both sides of a many-to-many ordered on both sides are recorded, and each object's list holds the objects whose lists on the other side hold it (a fill of the side that was skipped, or damage); Playlist/p1's record was last written by event 1 (its version: the last event that wrote it)"
        ])
    }
}
