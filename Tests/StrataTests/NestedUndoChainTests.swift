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

    // MARK: - A grandchild

    /// Root ← middle ← grandchild. The grandchild's team goes up to the root; the root puts a
    /// player on it (saving it to the store when `rootSaves`). The grandchild's undo of the
    /// insert asks the middle context, which asks the root: refused, naming the player.
    @Test("a grandchild's undo of a team's insert pushed up to the root, after the root put a player on it: refused, naming the link", arguments: [false, true])
    func grandchildUndoInsertLinkedInRoot(rootSaves: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.leagueModel(.cascade))
        let root = privateContext(coordinator, name: "root")
        let middle = childContext(root, name: "middle")
        let grandchild = childContext(middle, name: "grandchild")
        let teamID = try await Self.pushTeam(grandchild)
        try await middle.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            _ = try Self.addPlayer(to: teamID, in: context)
            if rootSaves { try context.save() }
        }
        try await grandchild.perform { (context: isolated ManagedObjectContext) throws in
            guard let conflict = expectUndoConflict({ try context.undo() }) else { return }
            #expect(conflict.object.contains("/Team/"), "\(conflict.object)")
            #expect(conflict.property == "players")
            #expect(conflict.found.contains("/Player/") && conflict.found.hasSuffix(ContextError.parentContextHolds), "\(conflict.found)")
            #expect(context.hasChanges == false && context.undoActionName == "create team")
        }
        try await middle.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        let rootState = try await Self.saveAndRead(root)
        #expect(rootState.error == nil)
        #expect(rootState.teams == ["Tigers"] && rootState.players == ["Pat": "Tigers"])
    }

    /// The root renames the team the grandchild pushed up to it (its insert, or a rename of a
    /// stored team): the middle context, which hasn't heard of it, still holds (when
    /// `middleHolds`) the value the grandchild expects, but its push would put the
    /// grandchild's undo over the root's rename. The check goes on to the root: refused,
    /// naming the root's value. Before, only the middle context's value was compared: the
    /// undo went through and the pushes overwrote the root's rename.
    @Test("a grandchild's undo of pushed work the root has renamed since: refused, naming the root's value (insert, rename; the middle context holding the team or not)", arguments: [false, true], [false, true])
    func grandchildUndoOverRootsRename(ofInsert: Bool, middleHolds: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.leagueModel(.cascade))
        let root = privateContext(coordinator, name: "root")
        let middle = childContext(root, name: "middle")
        let grandchild = childContext(middle, name: "grandchild")
        let teamID: ManagedObjectID
        if ofInsert {
            teamID = try await Self.pushTeam(grandchild)
        } else {
            teamID = try await root.perform { (context: isolated ManagedObjectContext) throws in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Comets", forKey: "name")
                try context.save()
                return team.objectID
            }
            try await grandchild.perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: teamID).setValue("Tigers", forKey: "name")
                context.setActionName("rename team")
                try context.save()
            }
        }
        try await middle.perform { (context: isolated ManagedObjectContext) throws in
            try context.save()
            if middleHolds { context.userInfo["team"] = try context.existingObject(with: teamID) }
        }
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Lions", forKey: "name")
        }
        try await grandchild.perform { (context: isolated ManagedObjectContext) throws in
            guard let conflict = expectUndoConflict({ try context.undo() }) else { return }
            #expect(conflict.property == "name")
            #expect(conflict.expected == "\"Tigers\"")
            #expect(conflict.found == "\"Lions\"" + ContextError.parentContextHolds)
            #expect(context.hasChanges == false)
            try context.save()
        }
        try await middle.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        let rootState = try await Self.saveAndRead(root)
        #expect(rootState.error == nil)
        #expect(rootState.teams == ["Lions"], "the root's rename stands")
    }

    /// Nothing changed above: the grandchild's undo of the insert goes through, and the team
    /// leaves the middle context and the root with the pushes.
    @Test("a grandchild's undo of a team's insert pushed up to the root, nothing changed since: goes through, the team leaves every level", arguments: [false, true])
    func grandchildUndoInsertGoesThrough(rootSaves: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.leagueModel(.cascade))
        let root = privateContext(coordinator, name: "root")
        let middle = childContext(root, name: "middle")
        let grandchild = childContext(middle, name: "grandchild")
        let teamID = try await grandchild.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Tigers", forKey: "name")
            let own = try context.insertNewObject(forEntityName: "Player")
            own.setValue("Own", forKey: "firstName")
            own.setValue(team, forKey: "team")
            try context.save()
            return team.objectID
        }
        try await middle.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        if rootSaves { try await root.perform { (context: isolated ManagedObjectContext) throws in try context.save() } }
        _ = teamID
        try await grandchild.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            try context.save()
        }
        try await middle.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        let rootState = try await Self.saveAndRead(root)
        #expect(rootState.error == nil)
        #expect(rootState.teams.isEmpty && rootState.players.isEmpty)
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    // MARK: - A child not yet told of permanent IDs

    /// The parent saves from within the child's block (the child hears of the new IDs only
    /// after it), so the child still names the team and its own player by their temporary
    /// IDs. `change`: what the parent does before saving — nothing, a player put on the team,
    /// a rename of it. The undo asks the parent by the old IDs, which it follows.
    @Test("a child not yet told of the IDs its parent's save made permanent: its undo of the team's insert is checked by the old IDs (nothing, a link, a rename)", arguments: ["nothing", "link", "rename"])
    func childNotYetToldOfPermanentIDs(change: String) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.leagueModel(.cascade))
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let outcome = try await child.perform { (context: isolated ManagedObjectContext) throws -> (String?, String?, Bool) in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Tigers", forKey: "name")
            let own = try context.insertNewObject(forEntityName: "Player")
            own.setValue("Own", forKey: "firstName")
            own.setValue(team, forKey: "team")
            context.setActionName("create team")
            try context.save()
            let teamID = team.objectID
            try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in
                switch change {
                case "link": _ = try Self.addPlayer(to: teamID, in: parent)
                case "rename": try parent.existingObject(with: teamID).setValue("Lions", forKey: "name")
                default: break
                }
                try parent.save()
            }
            let stillTemporary = team.objectID.isTemporaryID
            do {
                try context.undo()
                try context.save()
                return (nil, nil, stillTemporary)
            } catch ContextError.undoConflict(_, let property, _, let found) {
                #expect(found.hasSuffix(ContextError.parentContextHolds), "\(found)")
                #expect(context.hasChanges == false && context.undoActionName == "create team")
                return (property, found, stillTemporary)
            }
        }
        #expect(outcome.2, "the child still named the team by its temporary ID (the test's premise)")
        let parentState = try await Self.saveAndRead(parent)
        #expect(parentState.error == nil)
        switch change {
        case "link":
            #expect(outcome.0 == "players" && outcome.1?.contains("/Player/") == true, "\(String(describing: outcome))")
            #expect(parentState.teams == ["Tigers"] && parentState.players == ["Own": "Tigers", "Pat": "Tigers"])
        case "rename":
            #expect(outcome.0 == "name" && outcome.1 == "\"Lions\"" + ContextError.parentContextHolds, "\(String(describing: outcome))")
            #expect(parentState.teams == ["Lions"] && parentState.players == ["Own": "Lions"])
        default:
            #expect(outcome.0 == nil, "\(String(describing: outcome))")
            #expect(parentState.teams.isEmpty && parentState.players.isEmpty)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// A grandchild not yet told: the root saves from within the grandchild's block (through
    /// the middle context), and the root's player on the team refuses the undo.
    @Test("a grandchild not yet told of the IDs the root's save made permanent: its undo of the team's insert, linked in the root, is refused")
    func grandchildNotYetTold() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.leagueModel(.cascade))
        let root = privateContext(coordinator, name: "root")
        let middle = childContext(root, name: "middle")
        let grandchild = childContext(middle, name: "grandchild")
        let property = try await grandchild.perform { (context: isolated ManagedObjectContext) throws -> String? in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Tigers", forKey: "name")
            context.setActionName("create team")
            try context.save()
            let teamID = team.objectID
            try middle.performAndWait { (middle: isolated ManagedObjectContext) throws in
                try middle.save()
                try root.performAndWait { (root: isolated ManagedObjectContext) throws in
                    _ = try Self.addPlayer(to: teamID, in: root)
                    try root.save()
                }
            }
            #expect(team.objectID.isTemporaryID)
            return expectUndoConflict({ try context.undo() })?.property
        }
        #expect(property == "players")
        try await middle.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        let rootState = try await Self.saveAndRead(root)
        #expect(rootState.error == nil && rootState.teams == ["Tigers"] && rootState.players == ["Pat": "Tigers"])
    }

    // MARK: - object(with:) of another context's temporary ID

    /// A temporary ID of an unrelated context's unsaved insert names nothing a child (or a
    /// grandchild) can read: `object(with:)` and `existingObject(with:)` throw
    /// `invalidObject` saying so, as a root context's do. Before, the child returned a fault
    /// that failed only when fired, as a missing object.
    @Test("a child's or grandchild's object(with:) of another context's temporary ID throws invalidObject naming it; its ancestors' temporary IDs still resolve")
    func foreignTemporaryID() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.leagueModel(.cascade))
        let other = privateContext(coordinator, name: "other")
        let foreignID = try await other.perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Team").objectID
        }
        let parent = privateContext(coordinator, name: "parent")
        let parentsID = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Mine", forKey: "name")
            return team.objectID
        }
        let child = childContext(parent, name: "child")
        let grandchild = childContext(child, name: "grandchild")
        for context in [child, grandchild] {
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                for lookup in ["object", "existingObject", "existingObjects"] {
                    do {
                        switch lookup {
                        case "object": _ = try context.object(with: foreignID)
                        case "existingObject": _ = try context.existingObject(with: foreignID)
                        default: _ = try context.existingObjects(with: [parentsID, foreignID])
                        }
                        Issue.record("\(lookup)(with:) of another context's temporary ID gave an object")
                    } catch ContextError.invalidObject(let detail) {
                        #expect(detail.contains(foreignID.description) && detail.contains("another context's temporary ID"), "\(detail)")
                    }
                }
                #expect(context.registeredObject(for: foreignID) == nil, "no fault left behind")
                #expect(try context.existingObject(with: parentsID).value(forKey: "name") as? String == "Mine")
            }
        }
        // The parent saves from within the child's block: the child, not yet told, still
        // resolves the old temporary ID.
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in try parent.save() }
            #expect(try context.object(with: parentsID).value(forKey: "name") as? String == "Mine")
        }
    }
}
