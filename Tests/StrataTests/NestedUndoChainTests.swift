import Foundation
import Strata
import StrataTestSupport
import Testing

/// Undo of pushed work in nested contexts, past the plain parent/child case
/// (spec 0006 §18.3, §18.6): the push order of a child's undo against its unrecorded
/// changes; a grandchild, whose undo checks go parent → grandparent → store; a child not yet
/// told of the permanent IDs its parent's save gave; `object(with:)` of a temporary ID no
/// context of the chain holds.
@Suite("Nested undo: push order, grandchildren, IDs made permanent since, foreign temporary IDs", .serialized)
struct NestedUndoChainTests {
    /// Teams and players, the team's side of the pair with `rule`.
    static func leagueModel(_ rule: DeleteRule) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true, deleteRule: rule)
            }
            Entity("Player") {
                Attribute("firstName", .string)
                Relationship("team", to: "Team", inverse: "players")
            }
        }
    }

    /// A team inserted in `context` (its action "create team") and saved: pushed into its parent.
    static func pushTeam(_ context: ManagedObjectContext, name: String = "Tigers") async throws -> ManagedObjectID {
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue(name, forKey: "name")
            context.setActionName("create team")
            try context.save()
            return team.objectID
        }
    }

    /// A player named Pat put on the team `teamID` names in `context` (unsaved); its ID.
    static func addPlayer(to teamID: ManagedObjectID, in context: isolated ManagedObjectContext) throws -> ManagedObjectID {
        let player = try context.insertNewObject(forEntityName: "Player")
        player.setValue("Pat", forKey: "firstName")
        player.setValue(try context.existingObject(with: teamID), forKey: "team")
        return player.objectID
    }

    /// The teams' names and each player's (first name, team name) in `context`, after its save.
    static func saveAndRead(_ context: ManagedObjectContext) async throws -> (teams: [String], players: [String: String], error: String?) {
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            var error: String?
            do { try context.save() } catch let failure { error = "\(failure)" }
            let teams = try context.fetch(FetchRequest(entityName: "Team")).compactMap { $0.value(forKey: "name") as? String }
            var players: [String: String] = [:]
            for player in try context.fetch(FetchRequest(entityName: "Player")) {
                let team = (player.value(forKey: "team") as? ManagedObject)?.value(forKey: "name") as? String
                players[player.value(forKey: "firstName") as? String ?? "?"] = team ?? "-"
            }
            return (teams.sorted(), players, error)
        }
    }

    // MARK: - Push order

    /// The child takes the parent's player off the pushed team with undo registration
    /// disabled, then undoes the team's insert: its push deletes the team and takes the player
    /// off it. Before, the push applied the delete (its rule run over the parent's objects,
    /// where the player was still on the team) before the unlink: cascade deleted the parent's
    /// player. Core Data's parent takes the child's values before deletes propagate.
    @Test("a child's unrecorded unlink of the parent's player, then its undo of the pushed team's insert: the parent keeps the player (cascade, nullify, deny)", arguments: [DeleteRule.cascade, .nullify, .deny], [false, true])
    func unlinkThenUndoInsertKeepsParentsPlayer(rule: DeleteRule, parentSaves: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.leagueModel(rule))
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let teamID = try await Self.pushTeam(child)
        let playerID = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.existingObject(with: try Self.addPlayer(to: teamID, in: context))
            if parentSaves { try context.save() }
            return player.objectID  // permanent once saved
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.disableUndoRegistration()
            try context.existingObject(with: playerID).setValue(nil, forKey: "team")
            context.enableUndoRegistration()
            try context.undo()
            try context.save()
        }
        let parentState = try await Self.saveAndRead(parent)
        #expect(parentState.error == nil)
        #expect(parentState.teams.isEmpty)
        #expect(parentState.players == ["Pat": "-"], "the parent keeps its player, off the deleted team")
        let stored = try await Self.saveAndRead(privateContext(coordinator))
        #expect(stored.teams.isEmpty && stored.players == ["Pat": "-"])
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// The control: the unrecorded unlink saved (pushed) on its own before the undo, so the
    /// parent has it before the delete comes.
    @Test("an unrecorded unlink saved on its own before the undo: the parent keeps its player (cascade)")
    func recordedUnlinkPushedFirst() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.leagueModel(.cascade))
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let teamID = try await Self.pushTeam(child)
        let playerID = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try Self.addPlayer(to: teamID, in: context)
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.disableUndoRegistration()
            try context.existingObject(with: playerID).setValue(nil, forKey: "team")
            context.enableUndoRegistration()
            try context.save()
            try context.undo()
            try context.save()
        }
        let parentState = try await Self.saveAndRead(parent)
        #expect(parentState.error == nil)
        #expect(parentState.teams.isEmpty && parentState.players == ["Pat": "-"])
    }
}
