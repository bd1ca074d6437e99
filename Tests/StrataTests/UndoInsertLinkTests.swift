import Foundation
import Strata
import StrataTestSupport
import Testing

/// Undoing a saved insert after another writer linked an object of theirs to the inserted
/// one (spec 0006 §12): the undo is refused as a conflict naming the link, instead of deleting
/// the object under the other writer's reference and leaving every later save refused.
@Suite("Undo of a saved insert that another writer has linked to since")
struct UndoInsertLinkTests {
    /// Alice saves a team; Bob saves a player on it; Alice (after a restart when `restart`)
    /// tries to undo the team's insert.
    @Test("another writer's player on the team: the undo of the team's insert is refused, naming the link; nothing changes; it goes through once the link is gone", arguments: [false, true])
    func otherWritersLink(restart: Bool) async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        var coordinator = try openCoordinator(dir, model: model)
        let alice = editor(coordinator)
        let teamID = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Tigers", forKey: "name")
            context.setActionName("create team")
            try context.save()
            return team.objectID
        }
        let playerID = try await privateContext(coordinator, name: "sync", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Pat", forKey: "firstName")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
            return player.objectID
        }
        var context = alice
        if restart {
            coordinator = try openCoordinator(dir, model: model)
            context = editor(coordinator)
        }
        let head = try coordinator.persistentStores[0].log.read { try $0.head }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.undoActionName == "create team")
            do {
                try context.undo()
                Issue.record("the undo deleted the team Bob's player is on")
            } catch ContextError.undoConflict(let object, let property, _, let found) {
                #expect(object == teamID.description)
                #expect(property == "players")
                #expect(found.contains(playerID.description), "\(found)")
            }
            #expect(context.hasChanges == false, "nothing was changed")
            #expect(context.canUndo && context.undoActionName == "create team", "the refused undo stays on top")
            try context.save()
        }
        #expect(try coordinator.persistentStores[0].log.read { try $0.head } == head, "nothing was written")
        // Bob takes his player off the team: the undo goes through, and its save too.
        try await privateContext(coordinator, name: "sync", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: playerID).setValue(nil, forKey: "team")
            try context.save()
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 0)
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 1)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    @Test("links the group made itself are no conflict: a team inserted with its player in one group is undone whole")
    func groupsOwnLinks() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Lions", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(team, forKey: "team")
            try context.save()
            try context.undo()
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 0)
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 0)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    @Test("another writer's link on the inserted object's own side (a player's team set to another writer's team): refused, naming it")
    func otherWritersLinkOnOwnSide() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let alice = editor(coordinator)
        let playerID = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Sam", forKey: "firstName")
            try context.save()
            return player.objectID
        }
        let teamID = try await privateContext(coordinator, name: "sync", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Bears", forKey: "name")
            try context.existingObject(with: playerID).setValue(team, forKey: "team")
            try context.save()
            return team.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            do {
                try context.undo()
                Issue.record("the undo deleted the player Bob put on his team")
            } catch ContextError.undoConflict(let object, let property, _, let found) {
                #expect(object == playerID.description)
                #expect(property == "team")
                #expect(found.contains(teamID.description), "\(found)")
            }
            #expect(context.hasChanges == false)
        }
    }

    @Test("another writer's link through a relationship without an inverse (a fan's favorite team): the undo of the team's insert is refused, naming the fan")
    func otherWritersOneWayLink() async throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
            }
            Entity("Fan") {
                Attribute("name", .string)
                Relationship("favorite", to: "Team")
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        let alice = editor(coordinator)
        let teamID = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Owls", forKey: "name")
            try context.save()
            return team.objectID
        }
        let fanID = try await privateContext(coordinator, name: "sync", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
            let fan = try context.insertNewObject(forEntityName: "Fan")
            fan.setValue(try context.existingObject(with: teamID), forKey: "favorite")
            try context.save()
            return fan.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            do {
                try context.undo()
                Issue.record("the undo deleted the team Bob's fan names")
            } catch ContextError.undoConflict(let object, let property, _, let found) {
                #expect(object == fanID.description)
                #expect(property == "favorite")
                #expect(found.contains(teamID.description), "\(found)")
            }
            #expect(context.hasChanges == false)
            try context.save()
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}
