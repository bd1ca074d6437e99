import Foundation
import Strata
import StrataTestSupport
import Testing

/// Randomized one-to-one seeds 1030, 1073 and 1235 at 150 steps (shrunk): an undo of saved work sets a
/// one-to-one whose group a merge rebased, releasing in memory a partner an earlier pending undo
/// had paired; the save writes the release too (spec 0004 §4.1; spec 0006 §16.1, §17.1).
@Suite("One-to-one seeds 1030, 1073, 1235: the save writes the partner an undo released", .serialized)
struct OneToOneSeedFixTests {
    @Test("seed 1030 (shrunk): P2 goes to A here, another writer gives A P2 too (the group's pairing rebased away); saved; undoing back past it gives A P1 and releases P2, which an earlier pending undo paired with A: the save writes P2's release and isn't refused")
    func undoReleasesPartnerEarlierPendingUndoPaired() async throws {
        // A gives up P1, takes it back, undone; A takes P3 elsewhere; redo; P2 takes A here;
        // A takes P2 elsewhere; A takes P1, P1 takes B; save; undo twice (pending: P2 → A);
        // P3 takes A, undone; undo (A gets P1 back, P2 released in memory only). Before, the
        // save wrote P1 → A after the pending P2 → A: refused (oneToOneViolation).
        try await UndoRebaseCoverageTests.replayPairs(
            "0:0:3,0:0:0,3:1:1,2:0:2,4:2:2,1:0:1,2:0:1,0:0:0,1:1:0,5:0:3,3:1:2,3:0:0,1:0:2,3:2:0,3:1:2", "seed 1030")
    }

    @Test("seed 1073 at 150 steps (shrunk): undoing a saved pairing back past one a merge rebased releases in memory a passport an earlier pending undo paired; the save writes the release and isn't refused")
    func seed1073() async throws {
        // B takes P1 here; P3 takes B here; A gives up its passport elsewhere, merged; undo;
        // B takes P2 here; save; undo twice.
        try await UndoRebaseCoverageTests.replayPairs("0:1:0,1:1:2,2:0:3,3:0:1,0:1:1,5:2:0,3:0:0,3:1:0", "seed 1073")
    }

    @Test("seed 1235 at 150 steps (shrunk): as seed 1073, with pairs made elsewhere between the saved groups; the save writes the released partner and isn't refused")
    func seed1235() async throws {
        // B takes P3 elsewhere; P3 released here; B takes P1 here; undo; save; undo; A takes
        // P2 elsewhere; A takes P1 here; P3 released here; B takes P1 elsewhere; undo twice.
        try await UndoRebaseCoverageTests.replayPairs("2:1:2,1:2:2,0:1:0,3:2:0,5:2:0,3:1:1,2:0:1,0:0:0,1:2:2,2:1:0,3:0:1,3:0:0", "seed 1235")
    }
}
