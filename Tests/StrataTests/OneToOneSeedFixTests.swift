import Foundation
import Strata
import StrataTestSupport
import Testing

/// Randomized one-to-one seeds 1030, 1073 and 1235 at 150 steps: an undo of saved work sets a
/// one-to-one whose group a merge rebased, releasing in memory a partner an earlier pending undo
/// had paired; the save writes the release too (spec 0004 §4.1; spec 0006 §16.1, §17.1).
@Suite("One-to-one seeds 1030, 1073, 1235: the save writes the partner an undo released", .serialized)
struct OneToOneSeedFixTests {
    /// The steps the randomized run plays for `seed` (``UndoRebaseCoverageTests/randomizedOneToOne()``).
    static func steps(seed: UInt64, count: Int) -> [UndoRebaseCoverageTests.PairStep] {
        var random = UndoRelationshipRebaseTests.SeededGenerator(state: seed)
        return (0..<count).map { _ in
            UndoRebaseCoverageTests.PairStep(
                op: Int.random(in: 0..<6, using: &random), person: Int.random(in: 0...2, using: &random), passport: Int.random(in: 0...3, using: &random))
        }
    }

    @Test("seed 1030 (shrunk): P2 goes to A here, another writer gives A P2 too (the group's pairing rebased away); saved; undoing back past it gives A P1 and releases P2, which an earlier pending undo paired with A: the save writes P2's release and isn't refused")
    func undoReleasesPartnerEarlierPendingUndoPaired() async throws {
        // A gives up P1, takes it back, undone; A takes P3 elsewhere; redo; P2 takes A here;
        // A takes P2 elsewhere; A takes P1, P1 takes B; save; undo twice (pending: P2 → A);
        // P3 takes A, undone; undo (A gets P1 back, P2 released in memory only). Before, the
        // save wrote P1 → A after the pending P2 → A: refused (oneToOneViolation).
        try await UndoRebaseCoverageTests.replayPairs(
            "0:0:3,0:0:0,3:1:1,2:0:2,4:2:2,1:0:1,2:0:1,0:0:0,1:1:0,5:0:3,3:1:2,3:0:0,1:0:2,3:2:0,3:1:2", "seed 1030")
    }

    @Test("seed 1073 at 150 steps: every step keeps both sides agreeing and the saves aren't refused")
    func seed1073() async throws {
        try await UndoRebaseCoverageTests.playPairs(Self.steps(seed: 1073, count: 150), "seed 1073")
    }

    @Test("seed 1235 at 150 steps: every step keeps both sides agreeing and the saves aren't refused")
    func seed1235() async throws {
        try await UndoRebaseCoverageTests.playPairs(Self.steps(seed: 1235, count: 150), "seed 1235")
    }
}
