import Foundation
import Strata
import StrataTestSupport
import Testing

/// A child context undoing an insert it pushed into its parent (spec 0006 §18.6, §12 "Links
/// made since"): the parent is the child's store, so a link the parent (its own change, or a
/// sibling's push) made to the object since refuses the undo, as another writer's link in the
/// store refuses a root context's undo of a saved insert. Before session 33 the undo went
/// through and the next push deleted the object in the parent under the link: its delete
/// rule cascaded into the parent's player (or nullified its team), or a fan's one-way
/// `favorite` was left naming nothing and the parent's save was refused.
@Suite("Undo of a pushed insert that the parent or a sibling has linked to since", .serialized)
struct UndoInsertLinkNestedTests {
    static func fanModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
            }
            Entity("Fan") {
                Attribute("name", .string)
                Relationship("favorite", to: "Team")
            }
        }
    }

    /// What the child's refused undo must leave: nothing changed, the group still on top.
    static func expectRefused(_ context: isolated ManagedObjectContext, action: String) {
        #expect(context.hasChanges == false, "nothing was changed")
        #expect(context.canUndo && context.undoActionName == action, "the refused undo stays on top")
    }

    /// The child pushes a team; the parent (`sibling` false) or a sibling child (pushing into
    /// the parent) puts a new player on it; the parent saves everything first when
    /// `parentSaves`. The child's undo of the team's insert is refused, naming the link.
    @Test("a player the parent or a sibling put on the pushed team: the child's undo of the team's insert is refused, naming it; the parent keeps its player", arguments: [false, true], [false, true])
    func linkOnDerivedSide(sibling: Bool, parentSaves: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let teamID = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Tigers", forKey: "name")
            context.setActionName("create team")
            try context.save()
            return team.objectID
        }
        let linker = sibling ? childContext(parent, name: "sibling") : parent
        try await linker.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Pat", forKey: "firstName")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
        }
        if parentSaves { try await parent.perform { try $0.save() } }
        let outcome = try await child.perform { (context: isolated ManagedObjectContext) throws -> String? in
            do {
                try context.undo()
                try context.save()
                return "the undo went through"
            } catch ContextError.undoConflict(let object, let property, _, let found) {
                #expect(object.hasPrefix("x-strata://") && object.contains("/Team/"), "\(object)")
                #expect(property == "players")
                #expect(found.contains("/Player/"), "\(found)")
                #expect(found.hasSuffix(ContextError.parentContextHolds), "\(found)")
                Self.expectRefused(context, action: "create team")
                return nil
            }
        }
        // What the parent holds (and saves) after it: the team and the player on it.
        let (teams, players, saveError) = try await parent.perform { (context: isolated ManagedObjectContext) throws -> (Int, [String?], String?) in
            let teams = try context.count(for: FetchRequest(entityName: "Team"))
            let players = try context.fetch(FetchRequest(entityName: "Player")).map { ($0.value(forKey: "team") as? ManagedObject)?.value(forKey: "name") as? String }
            do { try context.save() } catch { return (teams, players, "\(error)") }
            return (teams, players, nil)
        }
        #expect(outcome == nil, "\(outcome ?? ""): the parent then held \(teams) teams and players \(players), its save \(saveError ?? "succeeded")")
        #expect(teams == 1 && players == ["Tigers"], "the parent keeps its player on the team")
        #expect(saveError == nil)
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// The child pushes a player; the parent puts it on a team of its own. Undoing the
    /// player's insert would take the parent's link with it.
    @Test("the parent put the pushed player on its team (the object's own side): the child's undo of the player's insert is refused, naming the team", arguments: [false, true])
    func linkOnOwnSide(parentSaves: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let playerID = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Sam", forKey: "firstName")
            context.setActionName("add player")
            try context.save()
            return player.objectID
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Bears", forKey: "name")
            try context.existingObject(with: playerID).setValue(team, forKey: "team")
            if parentSaves { try context.save() }
        }
        let refused = try await child.perform { (context: isolated ManagedObjectContext) throws -> Bool in
            do {
                try context.undo()
                try context.save()
                return false
            } catch ContextError.undoConflict(let object, let property, _, let found) {
                #expect(object.contains("/Player/"), "\(object)")
                #expect(property == "team")
                #expect(found.contains("/Team/"), "\(found)")
                Self.expectRefused(context, action: "add player")
                return true
            }
        }
        #expect(refused, "the undo deleted the player the parent put on its team")
        let rosters = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Team")).map { ($0.value(forKey: "players") as? Set<ManagedObject>)?.count ?? 0 }
        }
        #expect(rosters == [1], "the parent's team keeps the player")
    }

    /// A relationship without an inverse: the parent's fan names the pushed team.
    @Test("the parent's fan names the pushed team through a relationship without an inverse: the child's undo is refused, naming the fan; the parent's save still goes through", arguments: [false, true])
    func oneWayLink(parentSaves: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.fanModel())
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let teamID = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Owls", forKey: "name")
            context.setActionName("create team")
            try context.save()
            return team.objectID
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let fan = try context.insertNewObject(forEntityName: "Fan")
            fan.setValue("Flo", forKey: "name")
            fan.setValue(try context.existingObject(with: teamID), forKey: "favorite")
            if parentSaves { try context.save() }
        }
        let refused = try await child.perform { (context: isolated ManagedObjectContext) throws -> Bool in
            do {
                try context.undo()
                try context.save()
                return false
            } catch ContextError.undoConflict(let object, let property, _, let found) {
                #expect(object.contains("/Fan/"), "\(object)")
                #expect(property == "favorite")
                #expect(found.contains("/Team/"), "\(found)")
                Self.expectRefused(context, action: "create team")
                return true
            }
        }
        let saveError = await parent.perform { (context: isolated ManagedObjectContext) -> String? in
            do { try context.save() } catch { return "\(error)" }
            return nil
        }
        #expect(refused, "the undo deleted the team the parent's fan names; the parent's save: \(saveError ?? "succeeded")")
        #expect(saveError == nil)
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// The parent renames the pushed team: the undo of the insert would throw that away.
    @Test("the parent renamed the pushed team: the child's undo of the insert is refused, naming the value (in the parent context)")
    func parentsValue() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let teamID = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Tigers", forKey: "name")
            context.setActionName("create team")
            try context.save()
            return team.objectID
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Lions", forKey: "name")
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            guard let conflict = expectUndoConflict({ try context.undo() }) else { return }
            #expect(conflict.property == "name")
            #expect(conflict.expected == "\"Tigers\"")
            #expect(conflict.found == "\"Lions\"" + ContextError.parentContextHolds)
            Self.expectRefused(context, action: "create team")
        }
    }

    /// Links the child's own work accounts for are no conflict: the group's own player; a
    /// parent's player the child took off the team (registration disabled) before undoing.
    @Test("links the child's own work accounts for: the group's own player, or the parent's player taken off the team in the child, go with the undo")
    func ownLinks() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let teamID = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Tigers", forKey: "name")
            let own = try context.insertNewObject(forEntityName: "Player")
            own.setValue("Own", forKey: "firstName")
            own.setValue(team, forKey: "team")
            context.setActionName("create team")
            try context.save()
            return team.objectID
        }
        let parentsPlayer = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Pat", forKey: "firstName")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
            return player.objectID
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            // Refused while the parent's player is on the team…
            #expect(expectUndoConflict({ try context.undo() })?.property == "players")
            // …and goes through once the child has taken it off, unsaved.
            context.disableUndoRegistration()
            try context.existingObject(with: parentsPlayer).setValue(nil, forKey: "team")
            context.enableUndoRegistration()
            try context.undo()
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 0)
            // The parent keeps its player, off the deleted team: the push takes it off (the
            // child's unrecorded unlink) before the team's delete runs its cascade (before
            // session 34 the cascade came first and Pat went with the team).
            let players = try context.fetch(FetchRequest(entityName: "Player"))
            #expect(players.map(\.objectID) == [parentsPlayer])
            #expect(players.allSatisfy { $0.value(forKey: "team") == nil })
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}
