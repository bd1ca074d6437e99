import Foundation
import StrataLog
import StrataTestSupport
import Testing

@testable import Strata

/// Ordered to-many relationships under merges and undo (spec 0006 §16.1): a member whose
/// derived to-one (Song.playlist, inverse the recorded ordered Playlist.songs) the context
/// changed, unsaved, while another writer moved it too. The context's undo groups follow the
/// store as a recorded to-one's do: undoing the context's move returns the member to the
/// list the store has it in, where the store has it, and after every step — undo, redo, save,
/// a restart, a reopen — both sides agree (``PersistedUndoOrderedFixTests/play(_:restarts:_:)``
/// checks them after each step, verifies the log and compares the reopened store).
@Suite("Contexts: ordered to-manys under merges and undo", .serialized)
struct OrderedMergeUndoFixTests {
    typealias Step = PersistedUndoOrderedFixTests.Step

    static func steps(_ text: String) -> [Step] {
        text.split(separator: ",").compactMap { item in
            let parts = item.split(separator: ":").compactMap { Int($0) }
            return parts.count == 4 ? Step(op: parts[0], a: parts[1], b: parts[2], c: parts[3]) : nil
        }
    }

    /// Plays `text` live and with a restart at every save: both must show `expected` after
    /// each step.
    static func check(_ text: String, _ expected: [String], _ label: String) async throws {
        let steps = Self.steps(text)
        let live = try await PersistedUndoOrderedFixTests.play(steps, restarts: false, "\(label) live")
        #expect(live == expected, "\(label) live")
        let restarted = try await PersistedUndoOrderedFixTests.play(steps, restarts: true, "\(label) restarted")
        #expect(restarted == expected, "\(label) restarted")
    }

    // Saved: P1 [s1, s2], P2 [s3]; s4 loose. Steps: 6 — song b leaves its playlist; 0 — song
    // b inserted into playlist a at c; 2 — the other writer puts song b into playlist a at
    // position b + c (c = 0), saved and merged; 3 undo; 4 redo; 5 save.

    @Test("the context takes s2 out of P1, unsaved; another writer moves s2 from P1 to P2, merged: undo puts s2 back in P2 where the store has it (not in P1, which no longer lists it), redo takes it out again, and a save after either writes that")
    func undoOfRemovalTheOtherWriterMovedElsewhere() async throws {
        let removed = "P1[s1|t1,t2] P2[s3|]"
        let back = "P1[s1|t1,t2] P2[s3,s2|]"
        try await Self.check(
            "6:0:1:0,2:1:1:0,3:0:0:0,4:0:0:0,3:0:0:0,5:0:0:0",
            ["\(removed) undo:true redo:false", "\(removed) undo:true redo:false", "\(back) undo:false redo:true",
             "\(removed) undo:true redo:false", "\(back) undo:false redo:true", "\(back) undo:false redo:false"],
            "removal, undone")
        try await Self.check(
            "6:0:1:0,2:1:1:0,3:0:0:0,4:0:0:0,5:0:0:0,3:0:0:0",
            ["\(removed) undo:true redo:false", "\(removed) undo:true redo:false", "\(back) undo:false redo:true",
             "\(removed) undo:true redo:false", "\(removed) undo:true redo:false", "\(back) undo:false redo:true"],
            "removal, redone, saved, undone")
    }

    @Test("the context puts loose s4 in P1, unsaved; another writer puts s4 in P2, merged: undo returns s4 to P2 (before, it left s4 loose and the save dropped the other writer's placement), redo moves it to P1 again")
    func undoOfPlacementTheOtherWriterPlacedElsewhere() async throws {
        let mine = "P1[s1,s2,s4|t1,t2] P2[s3|]"
        let theirs = "P1[s1,s2|t1,t2] P2[s3,s4|]"
        try await Self.check(
            "0:0:3:2,2:1:3:0,3:0:0:0,4:0:0:0,3:0:0:0,5:0:0:0",
            ["\(mine) undo:true redo:false", "\(mine) undo:true redo:false", "\(theirs) undo:false redo:true",
             "\(mine) undo:true redo:false", "\(theirs) undo:false redo:true", "\(theirs) undo:false redo:false"],
            "placement, undone")
        try await Self.check(
            "0:0:3:2,2:1:3:0,3:0:0:0,4:0:0:0,5:0:0:0,3:0:0:0",
            ["\(mine) undo:true redo:false", "\(mine) undo:true redo:false", "\(theirs) undo:false redo:true",
             "\(mine) undo:true redo:false", "\(mine) undo:true redo:false", "\(theirs) undo:false redo:true"],
            "placement, redone, saved, undone")
    }

    @Test("the context moves s2 from P1 to the head of P2, unsaved; another writer moves s2 from P1 to the end of P2, merged: the member both put in P2 stays where the store has it (spec 0006 §18.3), no change of the context is left to undo (before, the group kept moving s2 from P1, and undoing it named P1, which no longer listed s2), and the save writes nothing over the store")
    func moveTheOtherWriterMadeToo() async throws {
        let mine = "P1[s1|t1,t2] P2[s2,s3|]"
        let theirs = "P1[s1|t1,t2] P2[s3,s2|]"
        try await Self.check(
            "0:1:1:0,2:1:1:0,5:0:0:0",
            ["\(mine) undo:true redo:false", "\(theirs) undo:false redo:false", "\(theirs) undo:false redo:false"],
            "move made by both")
    }
}

extension OrderedMergeUndoFixTests {
    @Test("seed 230 (shrunk): s4 put first in P2 then taken out, saved; the take-out undone, unsaved (s4 first in P2 again); another writer puts s4 last in P2, merged: P2 holds no change, so the pending undo writes it no more; s4 taken out and saved; undoing that puts s4 last, as the store had it, live and after a restart (before, the save wrote the undo's P2 with s4 first, and a restarted context's undo put it there)")
    func pendingUndoOfListTheMergeMadeMoot() async throws {
        let before = "P1[s1,s2|t1,t2] P2[s4,s3|]"
        let theirs = "P1[s1,s2|t1,t2] P2[s3,s4|]"
        let out = "P1[s1,s2|t1,t2] P2[s3|]"
        try await Self.check(
            "0:1:3:2,6:0:3:1,5:1:1:2,3:0:0:0,2:1:3:0,6:0:3:3,5:0:3:3,3:1:2:3",
            ["\(before) undo:true redo:false", "\(out) undo:true redo:false", "\(out) undo:true redo:false",
             "\(before) undo:true redo:true", "\(theirs) undo:true redo:true", "\(out) undo:true redo:false",
             "\(out) undo:true redo:false", "\(theirs) undo:true redo:true"],
            "seed 230")
    }
}

extension OrderedMergeUndoFixTests {
    @Test("seed 110 (shrunk): s3 taken out of P2, saved; another writer puts s3 in P1, merged; undoing the take-out would put s3 in P2 while the store holds it in P1: a conflict, live and after a restart, nothing changed (before, live, both playlists listed s3 and the save wrote it into both; restarted, the undo took s3 out of P1 over the other writer's placement)")
    func undoIntoListWhileAnotherWriterListsTheMember() async throws {
        let out = "P1[s1,s2|t1,t2] P2[|]"
        let theirs = "P1[s1,s2,s3|t1,t2] P2[|]"
        try await Self.check(
            "6:1:2:1,5:0:2:0,2:0:2:0,3:1:0:2",
            ["\(out) undo:true redo:false", "\(out) undo:true redo:false", "\(theirs) undo:true redo:false", "conflict"],
            "seed 110")
    }
}

extension OrderedMergeUndoFixTests {
    @Test("verify reports an object two ordered lists hold while its inverse is a to-one (a song in two playlists), naming the song, the relationship and both playlists; the same store with the song in one list verifies clean")
    func verifyReportsMemberOfTwoOrderedLists() throws {
        let dir = try TemporaryDirectory()
        let log = try EventLog(path: dir.url.appendingPathComponent("log").path, model: try PersistedUndoOrderedFixTests.model())
        var draft = TransactionDraft()
        let p1 = draft.insert("Playlist", values: ["name": .attribute(.string("P1"))])
        let p2 = draft.insert("Playlist", values: ["name": .attribute(.string("P2"))])
        let s1 = draft.insert("Song", values: ["name": .attribute(.string("s1"))])
        let s2 = draft.insert("Song", values: ["name": .attribute(.string("s2"))])
        draft.update(p1, values: ["songs": .references([s1, s2])])
        let result = try log.commit(draft)
        #expect(try log.verify().isClean)
        // The log's commit takes a list that holds a song another list holds (a writer that
        // didn't know: the song's side is derived, so no version check sees it).
        var damage = TransactionDraft()
        damage.update(.stored(try #require(result.permanentID(for: p2))), values: ["songs": .references([.stored(try #require(result.permanentID(for: s2)))])])
        try log.commit(damage)
        let report = try log.verify()
        #expect(report.problems.map(\.description) == [
            "integrity: references Song/p2 Playlist.songs: is held by 2 objects (Playlist/p1, Playlist/p2), but its inverse Song.playlist is a to-one: one object may hold it"
        ], "\(report)")
    }
}
