import Foundation
@testable import Strata
@testable import StrataLog
import StrataStorage
import StrataTestSupport
import Testing

/// Session 32 fixes for stores written by older Strata versions: an object's versions before
/// a paired side's fill (spec 0004 §4.1), as-of reads in batches of such a store (`strata
/// export --at`), persisted-undo records written before they kept their model version (spec
/// 0004 §10, spec 0006 §13), and staged migration plans whose models share a version hash
/// (spec 0006 §19.6).
@Suite("Old stores: versions before a fill, as-of batches, old undo records, same-hash stages", .serialized)
struct OldStoreFixTests {
    // MARK: - An old store whose paired side is filled on its first writable open

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

    static func playlist(_ pk: UInt64) -> StoredObjectID { StoredObjectID(entity: "Playlist", primaryKey: pk) }
    static func song(_ pk: UInt64) -> StoredObjectID { StoredObjectID(entity: "Song", primaryKey: pk) }

    static func list(_ value: LogValue?) -> [StoredObjectID] {
        guard case .references(let ids)? = value else { return [] }
        return ids
    }

    /// Writes at `path` a store as Strata wrote it before session 30: only `Playlist.songs`
    /// recorded, `Song.playlists` with no code and no list. `commits` makes its events.
    static func writeOldStore(at path: String, _ commits: (EventLog) throws -> Void) throws {
        var configuration = EventLog.Configuration()
        configuration.skipsOrderedPairCheck = true
        let old = try EventLog(path: path, model: try playlistModel(), configuration: configuration)
        try commits(old)
        try old.environment.write { txn in
            let name = Array("rSong.playlists".utf8)
            let code = try #require(try txn.value(forKey: name, in: old.tables.catalog))
            _ = try txn.delete(key: name, in: old.tables.catalog)
            _ = try txn.delete(key: [UInt8(ascii: "R")] + code, in: old.tables.catalog)
        }
    }

    // MARK: - forEachVersion before the fill

    /// An old store (Playlist p1 holds s2, s1; p2 holds s1; then p2 lets s1 go; then s1 is
    /// renamed s1'), filled on its first writable open (event 4), then s1 put first on p2
    /// from the filled side (event 5).
    static func filledPlaylistStore(_ dir: TemporaryDirectory) async throws -> PersistentStoreCoordinator {
        let path = dir.url.appendingPathComponent("store").path
        try Self.writeOldStore(at: path) { old in
            var draft = TransactionDraft()
            let p1 = draft.insert("Playlist", values: ["name": .attribute(.string("p1"))])
            let p2 = draft.insert("Playlist", values: ["name": .attribute(.string("p2"))])
            let s1 = draft.insert("Song", values: ["name": .attribute(.string("s1"))])
            let s2 = draft.insert("Song", values: ["name": .attribute(.string("s2"))])
            draft.update(p2, values: ["songs": .references([s1])])
            draft.update(p1, values: ["songs": .references([s2, s1])])
            _ = try old.commit(draft)
            // Event 2: p2 lets s1 go; event 3: s1 renamed (a version of s1's own).
            var second = TransactionDraft()
            second.update(.stored(Self.playlist(2)), values: ["songs": .references([])])
            _ = try old.commit(second)
            var third = TransactionDraft()
            third.update(.stored(Self.song(1)), values: ["name": .attribute(.string("s1'"))])
            _ = try old.commit(third)
        }
        // The fill (event 4), then a move on the filled side (event 5).
        let coordinator = try openCoordinator(dir, model: try Self.playlistModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let p2 = try #require(try context.fetch(FetchRequest(entityName: "Playlist")).first { $0.value(forKey: "name") as? String == "p2" })
            let s1 = try #require(try context.fetch(FetchRequest(entityName: "Song")).first { $0.value(forKey: "name") as? String == "s1'" })
            s1.mutableOrderedSetValue(forKey: "playlists").insert(p2, at: 0)
            try context.save()
        }
        return coordinator
    }

    @Test("forEachVersion(of:) of an object of an old store's paired side gives, for each version before the fill, the values the as-of reads give: the side's list derived from the inverse's lists then")
    func versionsBeforeFill() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await Self.filledPlaylistStore(dir)
        let log = coordinator.persistentStores[0].log
        #expect(try log.head == 5)
        #expect(try log.read { try $0.event(4) }.kind == .migration)
        let (s1, s2, p1, p2) = (Self.song(1), Self.song(2), Self.playlist(1), Self.playlist(2))
        try log.read { reader in
            for id in [s1, s2, p1, p2] {
                var versions: [(UInt64, [String: LogValue]?)] = []
                try reader.forEachVersion(of: id) { sequence, values in
                    versions.append((sequence, values))
                    return .next
                }
                #expect(!versions.isEmpty)
                for (sequence, values) in versions {
                    #expect(values == (try reader.object(id, asOf: sequence)), "\(id) just after \(sequence)")
                }
            }
            // s1's versions, newest first: the move, the fill, the rename, the insert.
            var lists: [UInt64: [StoredObjectID]] = [:]
            try reader.forEachVersion(of: s1) { sequence, values in
                lists[sequence] = Self.list(values?["playlists"])
                return .next
            }
            #expect(lists == [5: [p2, p1], 4: [p1], 3: [p1], 1: [p1, p2]])
            // Limited and stopped walks give the same values.
            var newest: [UInt64] = []
            try reader.forEachVersion(of: s1, limit: 3) { sequence, values in
                newest.append(sequence)
                #expect(Self.list(values?["playlists"]) == lists[sequence])
                return sequence == 3 ? .stop : .next
            }
            #expect(newest == [5, 4, 3])
        }
    }

    @Test("objectsChanged(after:through:) of an old store before its fill names the objects whose derived lists changed though their records didn't (what replay --diff compares): every object whose as-of values differ between the two points")
    func changedBeforeFill() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await Self.filledPlaylistStore(dir)
        let log = coordinator.persistentStores[0].log
        try log.read { reader in
            #expect(try reader.objectsChanged(after: 1, through: 2).contains(Self.song(1)), "p2 let s1 go: s1's playlists changed")
            // What replay --diff compared before: the objects the transactions changed, without s1.
            var touched: Set<StoredObjectID> = []
            try reader.forEachEvent(from: 2, through: 2) { event in
                for change in event.changes { touched.insert(change.objectID) }
                return .next
            }
            #expect(!touched.contains(Self.song(1)))
            #expect(try reader.object(Self.song(1), asOf: 1) != (try reader.object(Self.song(1), asOf: 2)))
            for (lower, upper) in [(UInt64(0), UInt64(1)), (1, 2), (1, 3), (2, 3), (2, 4), (1, 5), (3, 5), (4, 5), (5, 5)] {
                let changed = try reader.objectsChanged(after: lower, through: upper)
                let (before, after) = (try reader.state(asOf: lower).objects, try reader.state(asOf: upper).objects)
                let differing = Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }
                #expect(differing.isSubset(of: changed), "\(lower)..\(upper): \(differing.subtracting(changed)) differ but aren't named")
            }
        }
    }

    // MARK: - As-of reads in batches of an old store

    static let songCount = Int(ProcessInfo.processInfo.environment["STRATA_OLD_STORE_SONGS"] ?? "") ?? 3000

    @Test("as-of reads of an old store's paired side in batches (as strata export --at reads them) derive the side's lists once, not once per batch, and give what state(asOf:) gives")
    func batchedAsOfDerivesOnce() throws {
        let dir = try TemporaryDirectory()
        let path = dir.url.appendingPathComponent("store").path
        let songs = Self.songCount
        let playlists: UInt64 = 12
        try Self.writeOldStore(at: path) { old in
            var draft = TransactionDraft()
            var lists: [UInt64: [DraftObjectID]] = [:]
            let playlistIDs = (1...playlists).map { draft.insert("Playlist", values: ["name": .attribute(.string("p\($0)"))]) }
            for pk in 1...UInt64(songs) {
                let song = draft.insert("Song", values: ["name": .attribute(.string("s\(pk)"))])
                lists[pk % playlists, default: []].append(song)
                if (pk * 7) % playlists != pk % playlists { lists[(pk * 7) % playlists, default: []].insert(song, at: 0) }
            }
            for (index, id) in playlistIDs.enumerated() { draft.update(id, values: ["songs": .references(lists[UInt64(index)] ?? [])]) }
            _ = try old.commit(draft)
            // Event 2: the fourth playlist lets its first ten songs go.
            let fourth = try old.read { try $0.object(Self.playlist(4)) }
            let kept = Self.list(fourth?.values["songs"]).dropFirst(10)
            var second = TransactionDraft()
            second.update(.stored(Self.playlist(4)), values: ["songs": .references(kept.map { .stored($0) })])
            _ = try old.commit(second)
        }
        // The writable open fills Song.playlists (event 3).
        let log = try EventLog(path: path, model: try Self.playlistModel())
        #expect(try log.head == 3)
        let ids = (1...UInt64(songs)).map(Self.song)
        for sequence in [UInt64(1), 2] {
            let start = log.wholeStateReadCount
            var batched: [StoredObjectID: [String: LogValue]] = [:]
            try log.read { reader in
                var kept: [UInt64: TransactionEvent] = [:]
                var first = 0
                while first < ids.count {
                    let batch = ids[first..<min(first + 250, ids.count)]
                    batched.merge(try reader.objects(batch, asOf: sequence, keeping: &kept)) { a, _ in a }
                    first += 250
                }
            }
            let reads = log.wholeStateReadCount - start
            #expect(reads <= 1, "as of \(sequence): \(reads) reads of the whole state for \((songs + 249) / 250) batches")
            let expected = try log.read { try $0.state(asOf: sequence) }.objects(ofEntity: "Song")
            #expect(batched.count == songs)
            #expect(batched == expected, "as of \(sequence)")
            #expect(Self.list(batched[Self.song(1)]?["playlists"]).count == 2)
        }
        // One object, asked alone, the same.
        try log.read { reader in
            let one = try reader.object(Self.song(4), asOf: 2)
            #expect(one == (try reader.state(asOf: 2)).objects[Self.song(4)])
        }
    }

    // MARK: - Undo records written before they kept their model version

    /// The league store with Otters and Kites saved by another context.
    static func twoTeams(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, ManagedObjectID, ManagedObjectID) {
        let (coordinator, otters) = try await leagueStore(dir)
        let kites = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            try context.save()
            return team.objectID
        }
        return (coordinator, otters, kites)
    }

    /// The league model's next version: `Team` renamed `Club` and its `name` renamed `title`.
    static var renamedLeague: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Club") {
                    Attribute("title", .string).renamed(from: "name")
                    Attribute("uniformColor", .string)
                    Relationship("players", to: "Player", inverse: "team", toMany: true, deleteRule: .cascade)
                }.renamed(from: "Team")
                Entity("Player") {
                    Attribute("firstName", .string)
                    Attribute("lastName", .string)
                    Attribute("email", .string)
                    Relationship("team", to: "Club", inverse: "players")
                }
            }
        }
    }

    /// Rewrites every undo record of `log` as a Strata before session 31 wrote it: without
    /// `modelVersion`. Returns how many records held parts.
    static func stripModelVersions(_ log: EventLog) throws -> Int {
        var parted = 0
        try log.environment.write { txn in
            var rows: [([UInt8], [UInt8])] = []
            try txn.forEach(in: log.tables.meta, range: .prefix(Array("undoStacks:".utf8))) { key, value in
                rows.append((key.withUnsafeBytes { Array($0) }, value.withUnsafeBytes { Array($0) }))
                return .next
            }
            for (key, value) in rows {
                var object = try #require(try JSONSerialization.jsonObject(with: Data(value)) as? [String: Any])
                #expect(object["modelVersion"] != nil)
                object.removeValue(forKey: "modelVersion")
                if object["parts"] != nil { parted += 1 }
                let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
                try txn.put(Array(data), forKey: key, in: log.tables.meta)
            }
        }
        return parted
    }

    @Test("a part a refresh split off a group, in an undo record written before records kept their model version, follows a later version's entity rename: the model version is inferred from the record's sequence")
    func oldRecordPartFollowsRename() async throws {
        let dir = try TemporaryDirectory()
        let (first, otters, kites) = try await Self.twoTeams(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: otters).setValue("Herons", forKey: "name")
            try context.existingObject(with: kites).setValue("Swans", forKey: "name")
            try context.save()
            try context.undo()
            context.refresh(try context.existingObject(with: otters), mergeChanges: false)
            try context.save()  // the undo of Swans only: Herons stays done
        }
        let log = first.persistentStores[0].log
        #expect(try Self.stripModelVersions(log) == 1)
        let record = try log.read { try $0.undoCheckpoint(author: "alice", contextName: "editor") }
        #expect(record?.modelVersion == 1, "inferred from the version of transaction \(record?.through ?? 0)")

        let renamed = try openCoordinator(dir, model: try Self.renamedLeague)
        try await editor(renamed).perform { (context: isolated ManagedObjectContext) throws in
            let herons = try #require(try context.fetch(FetchRequest(entityName: "Club", format: "title == %@", "Herons")).first).objectID
            let swansOrKites = try #require(try context.fetch(FetchRequest(entityName: "Club", format: "title == %@", "Kites")).first).objectID
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(undoable, "the Otters part, recorded as Team/p1, is Club/p1 now")
            #expect(redoable, "the rest, recorded as Team/p2, is Club/p2 now")
            guard undoable, redoable else { return }
            try context.undo()
            #expect(try context.existingObject(with: herons).value(forKey: "title") as? String == "Otters")
            try context.redo()
            try context.redo()
            #expect(try context.existingObject(with: swansOrKites).value(forKey: "title") as? String == "Swans")
            try context.save()
        }
        #expect(try #require(renamed.persistentStores.first).log.verify().isClean)
    }

    @Test("an old undo record read with the model version that wrote it reads its part and its rest back as before")
    func oldRecordWithoutKnownVersion() async throws {
        let dir = try TemporaryDirectory()
        let (first, otters, kites) = try await Self.twoTeams(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: otters).setValue("Herons", forKey: "name")
            try context.existingObject(with: kites).setValue("Swans", forKey: "name")
            try context.save()
            try context.undo()
            context.refresh(try context.existingObject(with: otters), mergeChanges: false)
            try context.save()
        }
        let log = first.persistentStores[0].log
        #expect(try Self.stripModelVersions(log) == 1)
        // Same model: read as before, the part and the rest where they were.
        let again = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(again).perform { (context: isolated ManagedObjectContext) throws in
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(undoable && redoable)
        }
    }
}

// MARK: - Staged migration steps whose models share a version hash

extension OldStoreFixTests {
    /// Person with a name and a nickname; `indexed`: the name indexed — the same version hash,
    /// another version to a store (spec 0004 §4).
    static func nicknamed(indexed: Bool) throws -> ManagedObjectModel {
        let name = indexed ? Attribute("name", .string).indexed() : Attribute("name", .string)
        var model = try ManagedObjectModel {
            Entity("Person") {
                name
                Attribute("nickname", .string)
            }
        }
        model.versionIdentifiers = [indexed ? "A indexed" : "A"]
        return model
    }

    @Test("a pending record of a step whose target has the same version hash as the step before's (an index apart), both unlabeled, names its own step: the next add runs it again from its willMigrate, and the step before's didMigrate doesn't run again")
    func sameHashStepsRecord() throws {
        let (v0, vA, vAi) = (StagedMigrationTests.v1People, try Self.nicknamed(indexed: false), try Self.nicknamed(indexed: true))
        #expect(vA.versionHash == vAi.versionHash)
        let calls = StagedMigrationTests.Calls()
        let first = CustomMigrationStage(migratingFrom: v0, to: vA)
        first.didMigrateHandler = { _, _ in calls.record("did 0") }
        let second = CustomMigrationStage(migratingFrom: vA, to: vAi)
        second.willMigrateHandler = { _, _ in calls.record("will 1") }
        second.didMigrateHandler = { _, _ in calls.record("did 1") }
        let stages: [MigrationStage] = [.custom(first), .custom(second)]

        let dir = try TemporaryDirectory()
        try StagedMigrationTests.insert(try StagedMigrationTests.load(dir, v0), "Person", [["name": "Ada"]])
        _ = try StagedMigrationTests.load(dir, vA)  // step 0 done
        // Step 1 recorded, its migration not made (a crash, or a refusal).
        let plan = try MigrationPlan(stages, finalModel: vAi)
        let path = StagedMigrationTests.storeURL(dir).path
        try EventLog(openingExistingAt: path, readOnly: false).setStagedMigrationMarker(StagedMigrationMarker(step: 1, plan: plan).bytes)

        let container = try StagedMigrationTests.load(dir, vAi, StagedMigrationManager(stages))
        #expect(calls.all == ["will 1", "did 1"])
        #expect(try StagedMigrationTests.values(container, "Person", ["name"], sortedBy: "name") == [["Ada"]])
        #expect(try EventLog(openingExistingAt: path).stagedMigrationMarker() == nil)
    }

    @Test("a step's didMigrate that didn't finish runs again after a restart when the next step's target shares its version hash (the record names it by its index too)")
    func sameHashStepsUnfinishedDidMigrate() throws {
        let (v0, vA, vAi) = (StagedMigrationTests.v1People, try Self.nicknamed(indexed: false), try Self.nicknamed(indexed: true))
        let calls = StagedMigrationTests.Calls()
        let failOnce = StagedMigrationTests.Calls()
        let first = CustomMigrationStage(migratingFrom: v0, to: vA)
        first.didMigrateHandler = { _, _ in
            calls.record("did 0")
            if failOnce.all.isEmpty {
                failOnce.record("failed")
                throw CocoaError(.featureUnsupported)
            }
        }
        let second = CustomMigrationStage(migratingFrom: vA, to: vAi)
        second.willMigrateHandler = { _, _ in calls.record("will 1") }
        second.didMigrateHandler = { _, _ in calls.record("did 1") }
        let stages: [MigrationStage] = [.custom(first), .custom(second)]
        let dir = try TemporaryDirectory()
        try StagedMigrationTests.insert(try StagedMigrationTests.load(dir, v0), "Person", [["name": "Ada"]])
        #expect(throws: (any Error).self) { _ = try StagedMigrationTests.load(dir, vAi, StagedMigrationManager(stages)) }
        #expect(calls.all == ["did 0"])
        _ = try StagedMigrationTests.load(dir, vAi, StagedMigrationManager(stages))
        #expect(calls.all == ["did 0", "did 0", "will 1", "did 1"])
    }
}

// MARK: - Model files whose renames are ambiguous

extension OldStoreFixTests {
    /// The league model's next version from a user's model file: `Team` renamed twice over
    /// (`Club` and `Squad` both with renaming identifier `Team`), or Player's `email` renamed
    /// into two attributes.
    static func ambiguousLeague(entities: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            if entities {
                Entity("Club") {
                    Attribute("name", .string)
                    Attribute("uniformColor", .string)
                    Relationship("players", to: "Player", inverse: "team", toMany: true, deleteRule: .cascade)
                }.renamed(from: "Team")
                Entity("Squad") {
                    Attribute("name", .string)
                    Attribute("uniformColor", .string)
                }.renamed(from: "Team")
            } else {
                Entity("Team") {
                    Attribute("name", .string)
                    Attribute("uniformColor", .string)
                    Relationship("players", to: "Player", inverse: "team", toMany: true, deleteRule: .cascade)
                }
            }
            Entity("Player") {
                Attribute("firstName", .string)
                Attribute("lastName", .string)
                if entities {
                    Attribute("email", .string)
                } else {
                    Attribute("mail", .string).renamed(from: "email")
                    Attribute("contact", .string).renamed(from: "email")
                }
                Relationship("team", to: entities ? "Club" : "Team", inverse: "players")
            }
        }
    }

    @Test("a model whose renaming identifiers name one earlier entity from two entities, or one attribute from two, is refused naming them, nothing written (before: the objects moved to one, the references kept the other's destination; the values went to the first)")
    func ambiguousRenamesRefused() async throws {
        for entities in [true, false] {
            let dir = try TemporaryDirectory()
            let (coordinator, _) = try await leagueStore(dir)
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let team = try context.fetch(FetchRequest(entityName: "Team"))[0]
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("Ada", forKey: "firstName")
                player.setValue("ada@example.com", forKey: "email")
                player.setValue(team, forKey: "team")
                try context.save()
            }
            let path = dir.url.appendingPathComponent("store").path
            let head = try coordinator.persistentStores[0].log.head
            var configuration = EventLog.Configuration()
            configuration.allowsRemovingEntitiesAndProperties = true
            let expected = entities
                ? "its entities Club and Squad all rename Team (of model version 1), whose objects can move to one entity only"
                : "Player's properties contact and mail all rename Player.email (of model version 1), whose values can go to one property only"
            #expect {
                _ = try EventLog(path: path, model: try Self.ambiguousLeague(entities: entities), configuration: configuration)
            } throws: { error in
                guard case .migration(let message) = error as? LogError else { return false }
                return message.contains(expected) && message.contains("Nothing was written")
            }
            let log = try EventLog(path: path, model: try SeedModels.leagueManager)
            #expect(try log.head == head, "nothing written")
            let player = try log.read { try $0.object(StoredObjectID(entity: "Player", primaryKey: 1)) }
            #expect(player?.values["email"] == .attribute(.string("ada@example.com")))
            #expect(player?.values["team"] == .reference(StoredObjectID(entity: "Team", primaryKey: 1)))
        }
    }
}

extension OldStoreFixTests {
    @Test("a model file that makes a relationship an attribute (renaming identifier) is refused saying so once, with the number of objects, not once per object")
    func kindChangeSaidOnce() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.fetch(FetchRequest(entityName: "Team"))[0]
            for name in ["Ada", "Ben", "Cleo"] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(name, forKey: "firstName")
                player.setValue(team, forKey: "team")
            }
            try context.save()
        }
        let model = try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Attribute("uniformColor", .string)
            }
            Entity("Player") {
                Attribute("firstName", .string)
                Attribute("lastName", .string)
                Attribute("email", .string)
                Attribute("teamName", .string).renamed(from: "team")
            }
        }
        var configuration = EventLog.Configuration()
        configuration.allowsRemovingEntitiesAndProperties = true
        let path = dir.url.appendingPathComponent("store").path
        #expect {
            _ = try EventLog(path: path, model: model, configuration: configuration)
        } throws: { error in
            guard case .migration(let message) = error as? LogError else { return false }
            let sentence = "Player.team (now teamName) was a relationship and the version makes it an attribute"
            return message.contains(sentence + " (3 objects). Nothing was written") && message.components(separatedBy: sentence).count == 2
        }
    }
}
