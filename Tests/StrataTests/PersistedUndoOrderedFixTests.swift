import Foundation
import StrataLog
import StrataTestSupport
import Testing

@testable import Strata

/// Persisted undo (spec 0006 §13, §12, §16.1) for ORDERED to-many relationships, through real
/// restarts (the store removed from its coordinator, a new coordinator opened on the same
/// directory): a context restarted at every save must show, after every step, what a context
/// never restarted shows — order included — with both sides agreeing, every save accepted and
/// the log verifying clean. The unordered and one-to-one cases are probed by
/// ``PersistedUndoReconcileFixTests``, whose `Session` this reuses.
@Suite("Contexts: persisted undo of ordered to-manys across restarts", .serialized)
struct PersistedUndoOrderedFixTests {
    typealias Session = PersistedUndoReconcileFixTests.Session

    /// Playlist {name, songs <->> Song.playlist (ordered), tags <<->> Tag.playlists (ordered on
    /// the playlist's side only)}.
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Playlist") {
                Attribute("name", .string)
                Relationship("songs", to: "Song", inverse: "playlist", toMany: true, ordered: true)
                Relationship("tags", to: "Tag", inverse: "playlists", toMany: true, ordered: true)
            }
            Entity("Song") {
                Attribute("name", .string)
                Relationship("playlist", to: "Playlist", inverse: "songs")
            }
            Entity("Tag") {
                Attribute("name", .string)
                Relationship("playlists", to: "Playlist", inverse: "tags", toMany: true)
            }
        }
    }

    static let playlistNames = ["P1", "P2"]
    static let songNames = ["s1", "s2", "s3", "s4"]
    static let tagNames = ["t1", "t2", "t3"]

    /// Saved: P1 (songs s1, s2; tags t1, t2), P2 (songs s3; no tags); s4 loose; t3 loose.
    static func store(_ dir: TemporaryDirectory) async throws -> (Session, [String: ManagedObjectID]) {
        let model = try model()
        let coordinator = try openCoordinator(dir, model: model)
        let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [String: ManagedObjectID] in
            var objects: [String: ManagedObject] = [:]
            for (entity, names) in [("Playlist", playlistNames), ("Song", songNames), ("Tag", tagNames)] {
                for name in names {
                    let object = try context.insertNewObject(forEntityName: entity)
                    object.setValue(name, forKey: "name")
                    objects[name] = object
                }
            }
            let p1 = try #require(objects["P1"]), p2 = try #require(objects["P2"])
            p1.mutableOrderedSetValue(forKey: "songs").addObjects(from: [try #require(objects["s1"]), try #require(objects["s2"])])
            p2.mutableOrderedSetValue(forKey: "songs").add(try #require(objects["s3"]))
            p1.mutableOrderedSetValue(forKey: "tags").addObjects(from: [try #require(objects["t1"]), try #require(objects["t2"])])
            try context.save()
            return objects.mapValues(\.objectID)
        }
        return (Session(dir, model: model, coordinator: coordinator), ids)
    }

    private static func name(_ object: ManagedObject?) -> String { (object?.value(forKey: "name") as? String) ?? "?" }

    private static func list(_ object: ManagedObject, _ key: String) -> [ManagedObject] {
        (object.value(forKey: key) as? [ManagedObject]) ?? []
    }

    /// "P1[s1,s2|t1,t2] P2[s3|]" (order kept) after checking that both sides of every
    /// relationship agree and no ordered list holds a member twice.
    static func shown(_ context: isolated ManagedObjectContext, _ ids: [String: ManagedObjectID], _ step: String) throws -> String {
        var text: [String] = []
        for playlist in playlistNames {
            let object = try context.existingObject(with: try #require(ids[playlist]))
            let songs = list(object, "songs"), tags = list(object, "tags")
            #expect(Set(songs.map(\.objectID)).count == songs.count, "\(step): \(playlist).songs holds a song twice")
            #expect(Set(tags.map(\.objectID)).count == tags.count, "\(step): \(playlist).tags holds a tag twice")
            for song in songs {
                #expect((song.value(forKey: "playlist") as? ManagedObject)?.objectID == object.objectID,
                        "\(step): \(playlist) lists \(name(song)), whose playlist is \(name(song.value(forKey: "playlist") as? ManagedObject))")
            }
            for tag in tags {
                let back = (tag.value(forKey: "playlists") as? Set<ManagedObject>) ?? []
                #expect(back.contains { $0.objectID == object.objectID }, "\(step): \(playlist) lists \(name(tag)), which doesn't list it")
            }
            text.append("\(playlist)[\(songs.map { name($0) }.joined(separator: ","))|\(tags.map { name($0) }.joined(separator: ","))]")
        }
        for song in songNames {
            let object = try context.existingObject(with: try #require(ids[song]))
            if let playlist = object.value(forKey: "playlist") as? ManagedObject {
                #expect(list(playlist, "songs").contains { $0.objectID == object.objectID }, "\(step): \(song)'s playlist \(name(playlist)) doesn't list it")
            }
        }
        for tag in tagNames {
            let object = try context.existingObject(with: try #require(ids[tag]))
            for playlist in (object.value(forKey: "playlists") as? Set<ManagedObject>) ?? [] {
                #expect(list(playlist, "tags").contains { $0.objectID == object.objectID }, "\(step): \(tag) lists \(name(playlist)), which doesn't list it")
            }
        }
        return text.joined(separator: " ")
    }

    /// One step: `op` with operands `a` (a playlist, 0–1), `b` (a song or tag), `c` (a position).
    struct Step: CustomStringConvertible {
        var op: Int, a: Int, b: Int, c: Int
        var description: String { "\(op):\(a):\(b):\(c)" }
    }

    /// Edits an ordered list of `playlist` in `context` as step `op` says (used by the editor
    /// and by the other writer): 0 — song `b` inserted into the playlist at position `c`
    /// (moved there when a member; taken from another playlist otherwise); 1 — the playlist's
    /// songs reordered, position `b` to `c`; 6 — song `b` leaves its playlist (set from the
    /// song's side); 7 — tag `b` inserted into the playlist's tags at `c` (moved when a
    /// member); 8 — tag `b` drops the playlist (from the tag's unordered side); 9 — tag `b`
    /// goes to the playlist (from the tag's side: appended to the playlist's tags).
    static func edit(_ context: isolated ManagedObjectContext, _ ids: [String: ManagedObjectID], _ step: Step) throws {
        let playlist = try context.existingObject(with: try #require(ids[playlistNames[step.a % 2]]))
        let song = try context.existingObject(with: try #require(ids[songNames[step.b % songNames.count]]))
        let tag = try context.existingObject(with: try #require(ids[tagNames[step.b % tagNames.count]]))
        switch step.op {
        case 0:
            let songs = playlist.mutableOrderedSetValue(forKey: "songs")
            let count = songs.count - (songs.contains(song) ? 1 : 0)
            songs.insert(song, at: step.c % (count + 1))
        case 1:
            let songs = playlist.mutableOrderedSetValue(forKey: "songs")
            guard songs.count > 1 else { break }
            songs.moveObject(at: step.b % songs.count, to: step.c % songs.count)
        case 6:
            song.setValue(nil, forKey: "playlist")
        case 7:
            let tags = playlist.mutableOrderedSetValue(forKey: "tags")
            let count = tags.count - (tags.contains(tag) ? 1 : 0)
            tags.insert(tag, at: step.c % (count + 1))
        case 8:
            tag.mutableSetValue(forKey: "playlists").remove(playlist)
        default:
            tag.mutableSetValue(forKey: "playlists").add(playlist)
        }
        context.processPendingChanges()
    }

    /// Plays `steps`: the edits of ``edit(_:_:_:)``; 2 — another writer makes edit `c`
    /// (0, 1, 7 or 8 by `c % 4`) with the same operands, saved, and merged; 3 undo; 4 redo;
    /// 5 save (and restart when `restarts`). Returns what the context shows after each step
    /// ("conflict" for a refused undo or redo). Every save must succeed, the log verify clean
    /// and the store hold what the context showed.
    /// `intake`: how the context takes in the other writer's save (a did-save by default).
    /// Steps 10, 11 and 16 are the other writer's edits 0, 1 and 6 with the operands as given
    /// (taken in as step 2's).
    static func play(_ steps: [Step], restarts: Bool, _ label: String, intake: RefreshMergeMoveTests.Intake = .didSave) async throws -> [String] {
        let dir = try TemporaryDirectory()
        let (session, ids) = try await Self.store(dir)
        var trace: [String] = []
        for (index, step) in steps.enumerated() {
            let stepLabel = "\(label) step \(index) (\(step))"
            var mergedSave: ContextDidSave?
            if step.op == 2 || step.op >= 10 {
                mergedSave = try session.other.performAndWait { (other: isolated ManagedObjectContext) throws -> ContextDidSave? in
                    other.refreshAllObjects()
                    if step.op >= 10 {
                        try Self.edit(other, ids, Step(op: step.op - 10, a: step.a, b: step.b, c: step.c))
                    } else {
                        try Self.edit(other, ids, Step(op: [0, 1, 7, 8][step.c % 4], a: step.a, b: step.b, c: step.b + step.c))
                    }
                    var captured: ContextDidSave?
                    let token = other.addObserver { note in
                        if case .didSave(let save) = note.notification { captured = save }
                    }
                    try other.save()
                    other.removeObserver(token)
                    return captured
                }
            }
            let merged = mergedSave
            let shown = try await session.context.perform { (context: isolated ManagedObjectContext) throws -> String in
                switch step.op {
                case 2, 10...:
                    switch intake {
                    case .didSave:
                        if let merged { context.mergeChanges(fromContextDidSave: merged) }
                    case .refreshEach:
                        for object in context.registeredObjects.sorted(by: { $0.objectID < $1.objectID }) {
                            context.refresh(object, mergeChanges: true)
                        }
                    case .refreshAll:
                        context.refreshAllObjects()
                    case .storeChanges:
                        try context.mergeStoreChanges()
                    }
                case 3:
                    do { try context.undo() } catch let error as ContextError {
                        guard case .undoConflict = error else { throw error }
                        if ProcessInfo.processInfo.environment["STRATA_ORDERED_RECONCILE_TRACE"] != nil { print("TRACE \(stepLabel): \(error)") }
                        return "conflict"
                    }
                case 4:
                    do { try context.redo() } catch let error as ContextError {
                        guard case .undoConflict = error else { throw error }
                        if ProcessInfo.processInfo.environment["STRATA_ORDERED_RECONCILE_TRACE"] != nil { print("TRACE \(stepLabel): \(error)") }
                        return "conflict"
                    }
                case 5:
                    do { try context.save() } catch {
                        Issue.record("\(stepLabel): the save was refused: \(error)")
                        throw error
                    }
                    PersistedUndoReconcileFixTests.dropUnsavedRedo(context)
                default:
                    try Self.edit(context, ids, step)
                }
                return try Self.shown(context, ids, stepLabel) + " undo:\(context.canUndo) redo:\(context.canRedo)"
            }
            trace.append(shown)
            if step.op == 5 && restarts { try session.restart() }
        }
        let last = try await session.context.perform { (context: isolated ManagedObjectContext) throws -> String in
            do { try context.save() } catch {
                Issue.record("\(label): the last save was refused: \(error)")
                throw error
            }
            return try Self.shown(context, ids, "\(label) saved")
        }
        #expect(try session.verifyClean(), "\(label)")
        try session.restart()
        let reopened = try await privateContext(session.coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Self.shown(context, ids, "\(label) reopened")
        }
        #expect(reopened == last, "\(label): the store holds what the context showed")
        return trace
    }

    static var probeSteps: Int { ProcessInfo.processInfo.environment["STRATA_ORDERED_RECONCILE_STEPS"].flatMap(Int.init) ?? 30 }
    /// STRATA_ORDERED_RECONCILE_SEED: one seed (`7`) or a range (`1-300`); default 1-3.
    static var probeSeeds: [UInt64] {
        guard let text = ProcessInfo.processInfo.environment["STRATA_ORDERED_RECONCILE_SEED"] else { return [1, 2, 3] }
        let bounds = text.split(separator: "-").compactMap { UInt64($0) }
        if bounds.count == 2, bounds[0] <= bounds[1] { return Array(bounds[0]...bounds[1]) }
        return bounds.count == 1 ? bounds : [1, 2, 3]
    }

    static func randomSteps(seed: UInt64, count: Int, merges: Bool) -> [Step] {
        if let replay = ProcessInfo.processInfo.environment["STRATA_ORDERED_RECONCILE_REPLAY"] {
            return replay.split(separator: ",").compactMap { item in
                let parts = item.split(separator: ":").compactMap { Int($0) }
                return parts.count == 4 ? Step(op: parts[0], a: parts[1], b: parts[2], c: parts[3]) : nil
            }
        }
        var random = UndoRelationshipRebaseTests.SeededGenerator(state: seed)
        return (0..<count).map { _ in
            var op = Int.random(in: 0..<10, using: &random)
            if !merges && op == 2 { op = 5 }
            return Step(op: op, a: Int.random(in: 0...1, using: &random), b: Int.random(in: 0...3, using: &random), c: Int.random(in: 0...3, using: &random))
        }
    }

    @Test("randomized ordered to-manys, one writer: a context restarted at every save shows after each step what one never restarted shows, order included (steps: STRATA_ORDERED_RECONCILE_STEPS, default 30; seeds 1-3 or STRATA_ORDERED_RECONCILE_SEED, one or a range 1-300; STRATA_ORDERED_RECONCILE_REPLAY)")
    func orderedRestartsMatchMemory() async throws {
        for seed in Self.probeSeeds {
            let steps = Self.randomSteps(seed: seed, count: Self.probeSteps, merges: false)
            let live = try await Self.play(steps, restarts: false, "seed \(seed) live")
            let restarted = try await Self.play(steps, restarts: true, "seed \(seed) restarted")
            for index in steps.indices where live[index] != restarted[index] {
                Issue.record("seed \(seed) step \(index) (\(steps[index])): live \(live[index]), restarted \(restarted[index]); steps \(steps.map(\.description).joined(separator: ","))")
                break
            }
        }
    }

    @Test("randomized ordered to-manys with another writer merged: a context restarted at every save shows what one never restarted shows, both sides agree, no save is refused, the log verifies and the store holds what the context showed")
    func orderedRestartsWithMerges() async throws {
        for seed in Self.probeSeeds {
            let steps = Self.randomSteps(seed: seed, count: Self.probeSteps, merges: true)
            if ProcessInfo.processInfo.environment["STRATA_ORDERED_RECONCILE_TRACE"] != nil {
                print("TRACE " + steps.map(\.description).joined(separator: ","))
            }
            let live = try await Self.play(steps, restarts: false, "seed \(seed) live")
            let restarted = try await Self.play(steps, restarts: true, "seed \(seed) restarted")
            for index in steps.indices where live[index] != restarted[index] {
                Issue.record("seed \(seed) step \(index) (\(steps[index])): live \(live[index]), restarted \(restarted[index]); steps \(steps.map(\.description).joined(separator: ","))")
                break
            }
        }
    }
}

extension PersistedUndoOrderedFixTests {
    @Test("a song the context moved (out of its ordered playlist, or a loose one into one), unsaved; another writer puts it first in another ordered playlist, merged: that playlist doesn't list it in memory, the song keeps the context's playlist, both sides agree, and the save writes that (seed 18, shrunk)")
    func mergedMoveIntoOrderedListUnderOwnMove() async throws {
        // (song, the context's playlist for it, what the context shows after the merge)
        for (songName, own, expected) in [("s2", nil, "P1[s1|t1,t2] P2[s3|]"), ("s4", "P1", "P1[s1,s2,s4|t1,t2] P2[s3|]")] as [(String, String?, String)] {
            let dir = try TemporaryDirectory()
            let (session, ids) = try await Self.store(dir)
            let song = try #require(ids[songName]), p2 = try #require(ids["P2"])
            let ownID = try own.map { try #require(ids[$0]) }
            try await session.context.perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: song).setValue(try ownID.map { try context.existingObject(with: $0) }, forKey: "playlist")
            }
            let save = try UndoRelationshipRebaseTests.save(session.other) { other in
                try other.existingObject(with: p2).mutableOrderedSetValue(forKey: "songs").insert(try other.existingObject(with: song), at: 0)
            }
            try await session.context.perform { (context: isolated ManagedObjectContext) throws in
                context.mergeChanges(fromContextDidSave: save)
                #expect(try Self.shown(context, ids, "\(songName) merged") == expected)
                try context.save()
                #expect(try Self.shown(context, ids, "\(songName) saved") == expected)
            }
            #expect(try session.verifyClean())
            try session.restart()
            try await privateContext(session.coordinator).perform { (context: isolated ManagedObjectContext) throws in
                #expect(try Self.shown(context, ids, "\(songName) reopened") == expected)
            }
        }
    }
}

extension PersistedUndoOrderedFixTests {
    @Test("seed 14 (shrunk): the context reorders P1 [s1, s2] to [s2, s1], unsaved; another writer moves s1 to P2, merged: the reorder is left changing nothing and leaves the undo stack, so a context restarted after the save has the stacks one never restarted has")
    func reorderMadeMootByMergeLeavesTheStack() async throws {
        // 1:0:3:2 P1 moves s2 first; 2:1:0:0 the other writer puts s1 first in P2; 5 save; 3 undo.
        let steps = [Step(op: 1, a: 0, b: 3, c: 2), Step(op: 2, a: 1, b: 0, c: 0), Step(op: 5, a: 0, b: 3, c: 0), Step(op: 3, a: 1, b: 3, c: 0)]
        let live = try await Self.play(steps, restarts: false, "seed 14 shrunk live")
        let restarted = try await Self.play(steps, restarts: true, "seed 14 shrunk restarted")
        #expect(live == restarted)
        #expect(live[1] == "P1[s2|t1,t2] P2[s1,s3|] undo:false redo:false", "\(live)")
        #expect(live.last == "P1[s2|t1,t2] P2[s1,s3|] undo:false redo:false", "\(live)")
    }
}
