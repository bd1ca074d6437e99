import Foundation
import Strata
import StrataTestSupport
import Testing

/// Runs of `UndoRelationshipRebaseTests.randomizedMovesKeepSidesAgreeing` that ended with
/// the two sides of `Player.team` ↔ `Team.players` disagreeing (seeds 3, 4, 11, 12 and 28 at
/// 300 steps), shrunk to the few steps that still do (spec 0006 §16.1).
@Suite("Undo after a merge: shrunk randomized runs", .serialized)
struct UndoRebaseRandomFixTests {
    /// One step of the randomized test: `op` 0 moves `player` here to `team` (3: no team),
    /// 2 moves it there in another context and merges its save, 3 undoes, 4 redoes, 5 saves.
    struct Step: Sendable {
        let op: Int
        let player: Int
        let team: Int
    }

    /// Parses "op:player:team,…".
    static func steps(_ text: String) -> [Step] {
        text.split(separator: ",").compactMap { item in
            let parts = item.split(separator: ":").compactMap { Int($0) }
            return parts.count == 3 ? Step(op: parts[0], player: parts[1], team: parts[2]) : nil
        }
    }

    /// Plays `steps` as the randomized test does, checking after each that both sides agree,
    /// then saves, and checks a reopened store too.
    static func play(_ steps: [Step]) async throws {
        let dir = try TemporaryDirectory()
        let league = try await UndoRelationshipRebaseTests.league(dir)
        let players = try await privateContext(league.coordinator).perform { (context: isolated ManagedObjectContext) throws -> [ManagedObjectID] in
            var added: [ManagedObject] = []
            for name in ["Quinn", "Rae"] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(name, forKey: "lastName")
                player.setValue(try context.existingObject(with: league.herons), forKey: "team")
                added.append(player)
            }
            try context.save()
            return [league.pat] + added.map(\.objectID)
        }
        let other = privateContext(league.coordinator, name: "other")
        let teams = league.teams
        try await privateContext(league.coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            for (index, step) in steps.enumerated() {
                let player = players[step.player]
                let team = step.team
                switch step.op {
                case 0, 1:
                    try context.existingObject(with: player).setValue(team < teams.count ? try context.existingObject(with: teams[team]) : nil, forKey: "team")
                    context.processPendingChanges()
                case 2:
                    let save = try other.performAndWait { (other: isolated ManagedObjectContext) throws -> ContextDidSave? in
                        try other.existingObject(with: player).setValue(
                            team < teams.count ? try other.existingObject(with: teams[team]) : nil, forKey: "team")
                        var captured: ContextDidSave?
                        let token = other.addObserver { note in
                            if case .didSave(let save) = note.notification { captured = save }
                        }
                        try other.save()
                        other.removeObserver(token)
                        return captured
                    }
                    if let save { context.mergeChanges(fromContextDidSave: save) }
                case 3:
                    do { try context.undo() } catch ContextError.undoConflict {}
                case 4:
                    do { try context.redo() } catch ContextError.undoConflict {}
                default:
                    try context.save()
                }
                if ProcessInfo.processInfo.environment["STRATA_REBASE_SHOW"] != nil {
                    func name(_ object: ManagedObject?) -> String { (object?.value(forKey: "name") ?? object?.value(forKey: "lastName")) as? String ?? "-" }
                    var line = "SHOW \(index) \(step.op):\(step.player):\(step.team)"
                    for id in players { line += " \(name(try context.existingObject(with: id)))=\(name(try context.existingObject(with: id).value(forKey: "team") as? ManagedObject))" }
                    for id in teams {
                        let team = try context.existingObject(with: id)
                        line += " \(name(team))[\(((team.value(forKey: "players") as? Set<ManagedObject>) ?? []).map { name($0) }.sorted().joined(separator: ","))]"
                    }
                    print(line)
                }
                try UndoRelationshipRebaseTests.agree(context, players, teams, "step \(index) (\(step.op):\(step.player):\(step.team))")
            }
            try context.save()
            try UndoRelationshipRebaseTests.agree(context, players, teams, "saved")
        }
        try await privateContext(try openCoordinator(dir, model: try SeedModels.leagueManager)).perform {
            (context: isolated ManagedObjectContext) throws in
            try UndoRelationshipRebaseTests.agree(context, players, teams, "reopened")
        }
    }

    @Test(
        "replay of STRATA_REBASE_REPLAY (op:player:team,…), for shrinking a randomized run",
        .enabled(if: ProcessInfo.processInfo.environment["STRATA_REBASE_REPLAY"] != nil, "set STRATA_REBASE_REPLAY to the steps to replay"))
    func replay() async throws {
        try await Self.play(Self.steps(ProcessInfo.processInfo.environment["STRATA_REBASE_REPLAY"] ?? ""))
    }

    @Test("seed 145: two saved moves both undone net to the store's team, another writer's move is merged: the save doesn't write the pending undos' team over it; a redo then leaves both sides agreeing")
    func pendingUndosNettingToStoreOverMergedMove() async throws {
        try await Self.play(Self.steps("0:2:0,1:2:1,5:2:3,3:2:1,3:2:3,2:2:2,0:2:3,3:2:0,5:0:0,4:1:0"))
    }
    @Test("seed 12: a redone move over a pending undo of saved work, after a merge, starts from the pending team (not the store's); both sides agree")
    func redoOverPendingUndoOfSavedMove() async throws {
        // Pat to Herons, to Comets, saved; undo (pending: back to Herons); Pat to no team, undone;
        // another writer moves Pat to Otters, merged; redo.
        try await Self.play(Self.steps("1:0:1,1:0:2,5:2:0,3:2:2,1:0:3,3:0:1,2:0:0,4:1:2"))
    }

    @Test("seed 3: two merges of another writer's moves of a player moved here twice, then undo; both sides agree")
    func undoAfterTwoMergedMoves() async throws {
        try await Self.play(Self.steps("0:2:0,0:0:3,2:2:3,0:2:1,2:2:0,3:2:2"))
    }

    @Test("seed 11: undo after a merged move of another player of the same team; both sides agree")
    func undoAfterMergedMoveOfTeammate() async throws {
        try await Self.play(Self.steps("1:0:2,1:1:2,0:1:0,2:1:2,3:0:0"))
    }

    @Test("seed 28: undo after merges of moves of two players; both sides agree")
    func undoAfterMergedMovesOfTwoPlayers() async throws {
        try await Self.play(Self.steps("1:1:2,1:1:1,3:1:2,2:0:3,0:0:0,0:0:2,2:1:0,2:0:0,3:0:2"))
    }
    @Test("seed 11 (after the first fix): undoing a saved move under a pending undo that a merge rebased to another writer's team is a conflict; both sides agree")
    func undoSavedMoveUnderRebasedPendingUndo() async throws {
        // Quinn to no team, to Otters; Rae to Comets; saved. Rae's move undone (pending); Quinn
        // to Comets; another writer moves Quinn to Herons, merged; saved. Undo Quinn's move
        // (back to Herons, the other writer's), then undo the saved move to Otters: Quinn is
        // not on Otters but on the other writer's Herons — before, the undo set no team and
        // left Herons listing Quinn.
        try await Self.play(Self.steps("1:1:3,0:1:0,0:2:2,5:0:0,3:1:1,1:1:2,2:1:1,5:1:1,3:1:1,3:0:1"))
    }
    @Test("seed 28 (after the first fix): merges, saves, undo and redo of Pat's moves; both sides agree")
    func seed28AfterFirstFix() async throws {
        try await Self.play(Self.steps("2:0:3,0:0:0,0:0:2,2:0:0,3:0:2,5:1:2,3:2:3,4:2:3,2:0:3,1:0:0,5:1:0,3:0:2,3:2:3"))
    }
    @Test("seed 24 (after the second fix): a merge moving a player that holds no change follows the store though a pending undo of saved work moved it before; redo of the undone group; both sides agree")
    func mergeOverSupersededPendingUndo() async throws {
        // Pat to Otters, saved, undone (pending: no team); Pat to Herons; another writer saves
        // Herons too (Pat holds no change now); Pat to no team, undone; another writer moves
        // Pat to Otters, merged; redo.
        try await Self.play(Self.steps("2:0:3,0:0:0,5:1:2,3:0:3,1:0:1,2:0:1,1:0:3,3:2:3,2:0:0,4:2:0"))
    }
    @Test("seed 37: a move undone, then two merges of another writer's moves of the player; redo lists it in its team")
    func redoAfterTwoMergesOfUndoneMove() async throws {
        // Pat to Herons, undone; another writer moves Pat to Herons (the undone group's move
        // then changes nothing: its team entries went), then to Comets; redo.
        try await Self.play(Self.steps("0:0:1,3:2:0,2:0:1,2:0:2,4:2:1"))
    }
    @Test("seed 75: a pending undo of a saved move that a later move superseded, which another writer saved too, is not saved over the store's team")
    func pendingUndoSupersededThenSaved() async throws {
        // Pat to Comets (rebased over another writer's Herons), saved, undone (pending: Herons);
        // Pat to Otters, to no team, both undone, Otters redone; another writer saves Otters
        // too, merged; save; redo.
        try await Self.play(Self.steps("1:0:2,2:0:1,5:1:1,3:0:1,1:0:0,0:0:3,3:2:2,3:1:1,4:1:3,2:0:0,5:0:0,4:1:3"))
    }
    @Test("seed 124: an undone group under a saved group on the redo stack starts from that group's team, not the merged one; redo both; both sides agree")
    func redoneGroupUnderSavedRedo() async throws {
        // Rae to Comets, to Otters; the second undone; saved; the first (saved) undone; another
        // writer moves Rae to Herons, merged; redo the saved move, then Rae's move to Otters.
        try await Self.play(Self.steps("1:2:2,1:2:0,3:2:1,5:1:0,3:0:1,2:2:1,4:2:1,4:0:3"))
    }
    @Test("seed 52: an undone group under a saved group on the redo stack that moves another player is rebased; redo both; both sides agree")
    func redoneGroupUnderSavedRedoOfOtherPlayer() async throws {
        try await Self.play(Self.steps("1:2:2,2:0:3,1:0:0,5:2:2,3:1:3,0:0:2,3:2:2,3:1:0,5:2:0,2:0:0,4:1:3,4:2:3"))
    }
}
