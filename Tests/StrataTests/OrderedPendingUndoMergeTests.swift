import Foundation
import StrataTestSupport
import Testing

@testable import Strata

/// An ordered to-many with a to-one inverse (Playlist.songs ordered, Song.playlist) under a
/// pending (unsaved) undo of a saved move, while another writer moves the song, reorders
/// the list, or inserts another song at a position, and the context takes that in — by a
/// merge of the did-save, of the store's transactions, or by refreshing (spec 0006 §13,
/// §16.1). After every step (redo, undo, save) both sides agree, every save is accepted, the
/// log verifies, and the store holds what the context shows, live and with a restart at each
/// save (``PersistedUndoOrderedFixTests/play(_:restarts:_:intake:)``).
@Suite("Contexts: ordered lists under a pending undo and another writer's save", .serialized)
struct OrderedPendingUndoMergeTests {
    typealias Intake = RefreshMergeMoveTests.Intake

    /// Saved: P1 [s1, s2], P2 [s3]; s4 loose. The context moves s2 to the head of P2 and
    /// saves (P1 [s1], P2 [s2, s3]), then undoes that, unsaved (P1 [s1, s2], P2 [s3]).
    static let pendingUndo = "0:1:1:0,5:0:0:0,3:0:0:0"

    static func run(_ other: String, _ after: String, intake: Intake) async throws -> [String] {
        let steps = OrderedMergeUndoFixTests.steps("\(pendingUndo),\(other),\(after)")
        let label = "\(other) then \(after) (\(intake))"
        let live = try await PersistedUndoOrderedFixTests.play(steps, restarts: false, "\(label) live", intake: intake)
        let restarted = try await PersistedUndoOrderedFixTests.play(steps, restarts: true, "\(label) restarted", intake: intake)
        #expect(live == restarted, "\(label): live \(live), restarted \(restarted)")
        return Array(live.dropFirst(3))
    }

    /// The other writer's save, what the context then shows, and what it shows after each
    /// step of each follow-up (redo 4, undo 3, save 5).
    struct Case: Sendable {
        let other: String
        let merged: String
        let followUps: [(steps: String, shown: [String])]
    }

    static let mine = "P1[s1|t1,t2] P2[s2,s3|]"
    static let undone = "P1[s1,s2|t1,t2] P2[s3|]"

    static func cases() -> [Case] {
        func done(_ text: String) -> String { "\(text) undo:true redo:false" }
        func undone(_ text: String) -> String { "\(text) undo:false redo:true" }
        /// The redo is refused (it would overwrite the other writer's list); the context keeps
        /// showing the merged state through the save.
        func refused(_ merged: String) -> [(steps: String, shown: [String])] {
            [("4:0:0:0,3:0:0:0,5:0:0:0", ["conflict", undone(merged), undone(merged)]),
             ("5:0:0:0,4:0:0:0,5:0:0:0", [undone(merged), "conflict", undone(merged)])]
        }
        /// The redo moves s2 to the head of P2 again; the undo after it takes it back out.
        let redoable: [(steps: String, shown: [String])] = [
            ("4:0:0:0,3:0:0:0,5:0:0:0", [done(mine), undone(Self.undone), undone(Self.undone)]),
            ("4:0:0:0,5:0:0:0,3:0:0:0", [done(mine), done(mine), undone(Self.undone)]),
            ("5:0:0:0,4:0:0:0,5:0:0:0", [undone(Self.undone), done(mine), done(mine)]),
        ]
        return [
            // The other writer moves s2 to the head of P1: its position stays, and the redo,
            // whose list P1 [s1, s2] the store no longer holds, is refused.
            Case(other: "10:0:1:0", merged: undone("P1[s2,s1|t1,t2] P2[s3|]"), followUps: refused("P1[s2,s1|t1,t2] P2[s3|]")),
            // The other writer makes the context's undo itself (s2 last in P1): nothing is left
            // pending, the redo is saved as a redo, and undoing it again is no conflict (before,
            // the pending undo stayed holding the song's derived side only, the redo dropped it,
            // and the undo was refused: the store's P2 [s3] wasn't the group's).
            Case(other: "10:0:1:1", merged: undone(Self.undone), followUps: redoable),
            // The other writer reorders P2 (s2 after s3): the context's pending undo takes s2
            // out of P2 still; redo puts it at the head again, and undo takes it out (before,
            // the undo was refused: the redo had dropped the pending undo as unsaved, leaving
            // nothing to write the group's list over the other writer's).
            Case(other: "11:1:0:1", merged: undone(Self.undone), followUps: redoable),
            // The other writer takes s2 out of P2, as the context's pending undo does: as above.
            Case(other: "16:0:1:0", merged: undone(Self.undone), followUps: redoable),
            // The other writer puts s4 at the head, or the end, of P1, or into P2: the pending
            // undo, rebased, keeps it (s2 back at the end of P1); the redo would take P1 (P2)
            // back to the group's list without s4, and is refused.
            Case(other: "10:0:3:0", merged: undone("P1[s4,s1,s2|t1,t2] P2[s3|]"), followUps: refused("P1[s4,s1,s2|t1,t2] P2[s3|]")),
            Case(other: "10:0:3:1", merged: undone("P1[s1,s4,s2|t1,t2] P2[s3|]"), followUps: refused("P1[s1,s4,s2|t1,t2] P2[s3|]")),
            Case(other: "10:1:3:1", merged: undone("P1[s1,s2|t1,t2] P2[s4,s3|]"), followUps: refused("P1[s1,s2|t1,t2] P2[s4,s3|]")),
        ]
    }

    @Test("a saved move of s2 from P1 to the head of P2, undone unsaved; another writer moves s2 to a position in P1, reorders P2, takes s2 out, or inserts s4 at a position, saved; taken in by a merge of the did-save, of the store's transactions, a refresh of each object or refreshAllObjects: the other writer's positions stay, redo either goes through (and undo after it too) or is refused as a conflict, both sides agree after every step, the store gets what the context shows, live and restarted at each save", arguments: Intake.allCases)
    func pendingUndoUnderAnotherWritersSave(intake: Intake) async throws {
        for entry in Self.cases() {
            for (steps, shown) in entry.followUps {
                let trace = try await Self.run(entry.other, steps, intake: intake)
                #expect(trace == [entry.merged] + shown, "\(entry.other) then \(steps) (\(intake))")
            }
        }
    }
}
