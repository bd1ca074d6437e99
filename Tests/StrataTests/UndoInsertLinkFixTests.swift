import Foundation
import Strata
import StrataTestSupport
import Testing

/// Undoing a saved insert (redoing a saved delete) when objects have been linked to it since
/// (spec 0006 §12, "Links made since"): the links this context's own unsaved work has already
/// taken back are no conflict, links its own unsaved work made are, and links through
/// relationships declared on parent entities, or to parent entities, are all seen.
@Suite("Undo of a saved insert: links made since, as the context's pending work leaves them")
struct UndoInsertLinkFixTests {
    /// Alice saves a team, then (a later group, saved) a player on it — a new one
    /// (`deleting`: its undo deletes it) or her saved player put on the team (its undo takes
    /// it off) — and undoes both before a save: the player's undo, pending, took the link back.
    @Test("undoing a later saved link and then the insert before a save is no conflict; redoing both puts them back", arguments: [false, true], [false, true])
    func ownLaterLinkUndoneFirst(deleting: Bool, restart: Bool) async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        var coordinator = try openCoordinator(dir, model: model)
        let alice = editor(coordinator)
        let playerID = try await alice.perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID? in
            guard !deleting else { return nil }
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Sam", forKey: "firstName")
            try context.save()
            context.removeAllUndoActions()
            return player.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Tigers", forKey: "name")
            context.setActionName("create team")
            try context.save()
            let player = try playerID.map { try context.existingObject(with: $0) } ?? context.insertNewObject(forEntityName: "Player")
            player.setValue(team, forKey: "team")
            context.setActionName("sign player")
            try context.save()
        }
        var context = alice
        if restart {
            coordinator = try openCoordinator(dir, model: model)
            context = editor(coordinator)
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.undoActionName == "sign player")
            try context.undo()
            #expect(context.undoActionName == "create team")
            try context.undo()
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 0)
            let players = try context.fetch(FetchRequest(entityName: "Player"))
            #expect(players.count == (deleting ? 0 : 1))
            #expect(players.allSatisfy { $0.value(forKey: "team") == nil })
            try context.redo()
            try context.redo()
            try context.save()
            let teams = try context.fetch(FetchRequest(entityName: "Team"))
            #expect(teams.count == 1)
            let signed = try context.fetch(FetchRequest(entityName: "Player"))
            #expect(signed.count == 1)
            #expect((signed.first?.value(forKey: "team") as? ManagedObject) === teams.first)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// Alice saves a team; Bob saves a player on it; Alice, with undo registration disabled,
    /// takes the player off the team (`deleting`: deletes the player), unsaved, and undoes the
    /// team's insert: the link is one her own unsaved work has taken back.
    @Test("another writer's link this context has taken back, unsaved (registration disabled): the undo goes through and saves; rolled back, the store is as before", arguments: [false, true], [false, true])
    func ownUnsavedUnlinkOfOtherWritersLink(deleting: Bool, rolledBack: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let alice = editor(coordinator)
        let teamID = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Tigers", forKey: "name")
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
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            try Self.takeBack(context, playerID, deleting: deleting)
            try context.undo()
            #expect(try context.existingObject(with: teamID).isDeleted)
            if rolledBack {
                // Both the unlink and the undo go: the store keeps the team and the link.
                context.rollback()
                try context.save()
                let player = try context.existingObject(with: playerID)
                #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == teamID)
                return
            }
            // Saved: the team goes, and the player (off the team, or deleted) as Alice left it.
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 0)
            let players = try context.fetch(FetchRequest(entityName: "Player"))
            #expect(players.count == (deleting ? 0 : 1))
            #expect(players.allSatisfy { $0.value(forKey: "team") == nil })
            // A later change saves as usual.
            if let player = players.first {
                player.setValue("Pam", forKey: "firstName")
                try context.save()
            }
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// Takes the player off its team (`deleting`: deletes it) with undo registration disabled.
    private static func takeBack(_ context: isolated ManagedObjectContext, _ playerID: ManagedObjectID, deleting: Bool) throws {
        let player = try context.existingObject(with: playerID)
        context.disableUndoRegistration()
        if deleting { context.delete(player) } else { player.setValue(nil, forKey: "team") }
        context.enableUndoRegistration()
    }

    /// Alice saves a team; Bob saves a player on it; Alice takes the player off (saved) and
    /// undoes that and the team's insert before a save: her pending undo put Bob's link back,
    /// and deleting the team would leave the player naming it.
    @Test("a link this context's pending undo puts back (another writer's): undoing the insert under it is refused; redo and save go on", arguments: [false, true])
    func pendingUndoRestoresOtherWritersLink(restart: Bool) async throws {
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
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: playerID).setValue(nil, forKey: "team")
            context.setActionName("release player")
            try context.save()
        }
        var context = alice
        if restart {
            coordinator = try openCoordinator(dir, model: model)
            context = editor(coordinator)
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            let conflict = expectUndoConflict { try context.undo() }
            #expect(conflict?.found.contains(playerID.description) == true, "\(String(describing: conflict))")
            #expect(context.undoActionName == "create team", "the refused undo stays on top")
            let team = try context.existingObject(with: teamID)
            #expect(team.isDeleted == false)
            #expect((try context.existingObject(with: playerID).value(forKey: "team") as? ManagedObject) === team)
            try context.save()
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            try context.redo()
            try context.save()
            #expect(try context.existingObject(with: playerID).value(forKey: "team") == nil)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// Alice saves a team, then, with undo registration disabled, links an object to it
    /// (unsaved): through the inverse (her saved player put on it) or a relationship without
    /// one (a fan's favorite). Undoing the insert would leave that object naming a deleted team.
    @Test("a link this context made with registration disabled (unsaved) is a conflict: the undo is refused and the context still saves", arguments: [false, true])
    func ownUnregisteredLink(oneWay: Bool) async throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true)
            }
            Entity("Player") {
                Attribute("name", .string)
                Relationship("team", to: "Team", inverse: "players")
            }
            Entity("Fan") {
                Attribute("name", .string)
                Relationship("favorite", to: "Team")
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let linker = try context.insertNewObject(forEntityName: oneWay ? "Fan" : "Player")
            linker.setValue("Kim", forKey: "name")
            try context.save()
            context.removeAllUndoActions()
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Owls", forKey: "name")
            try context.save()
            context.disableUndoRegistration()
            linker.setValue(team, forKey: oneWay ? "favorite" : "team")
            context.enableUndoRegistration()
            let conflict = expectUndoConflict { try context.undo() }
            #expect(conflict?.found.contains(team.objectID.description) == true || conflict?.found.contains(linker.objectID.description) == true, "\(String(describing: conflict))")
            #expect(team.isDeleted == false)
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 1)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// Another writer's link through a relationship without an inverse declared on an
    /// abstract parent entity, from an instance of its sub-entity.
    @Test("a one-way link declared on an abstract parent, from a sub-entity's instance: the undo is refused, naming it")
    func oneWayLinkFromSubentity() async throws {
        let model = try ManagedObjectModel {
            Entity("Team") { Attribute("name", .string) }
            Entity("Supporter", abstract: true) {
                Attribute("name", .string)
                Relationship("favorite", to: "Team")
            }
            Entity("Fan", parent: "Supporter") { Attribute("seat", .string) }
        }
        try await expectLinkConflict(model: model, insert: "Team", linker: "Fan", key: "favorite")
    }

    /// Another writer's link through a relationship without an inverse whose destination is a
    /// parent entity, to an instance of its sub-entity.
    @Test("a one-way link to a parent entity, naming a sub-entity's instance: the undo is refused, naming it")
    func oneWayLinkToSubentity() async throws {
        let model = try ManagedObjectModel {
            Entity("Club", abstract: true) { Attribute("name", .string) }
            Entity("Team", parent: "Club") { Attribute("league", .string) }
            Entity("Fan") {
                Attribute("name", .string)
                Relationship("favorite", to: "Club")
            }
        }
        try await expectLinkConflict(model: model, insert: "Team", linker: "Fan", key: "favorite")
    }

    /// Both at once, and a second level: declared on an abstract grandparent, from a
    /// grandchild, to a parent of the inserted object's entity.
    @Test("a one-way link declared two levels up, to a parent entity: the undo is refused, naming it")
    func oneWayLinkAcrossLevels() async throws {
        let model = try ManagedObjectModel {
            Entity("Club", abstract: true) { Attribute("name", .string) }
            Entity("Team", parent: "Club") { Attribute("league", .string) }
            Entity("Party", abstract: true) { Relationship("favorite", to: "Club") }
            Entity("Supporter", abstract: true, parent: "Party") { Attribute("name", .string) }
            Entity("Fan", parent: "Supporter") { Attribute("seat", .string) }
        }
        try await expectLinkConflict(model: model, insert: "Team", linker: "Fan", key: "favorite")
    }

    /// Links through a relationship with an inverse, declared on parent entities, both ways:
    /// another writer's member on the inserted club, and another writer's club given to the
    /// inserted member.
    @Test("links through an inverse declared on parent entities, from and to sub-entities' instances: refused, naming them", arguments: [false, true])
    func inverseLinkAcrossSubentities(memberInserted: Bool) async throws {
        let model = try ManagedObjectModel {
            Entity("Club", abstract: true) {
                Attribute("name", .string)
                Relationship("members", to: "Member", inverse: "club", toMany: true)
            }
            Entity("Team", parent: "Club") { Attribute("league", .string) }
            Entity("Member", abstract: true) {
                Attribute("name", .string)
                Relationship("club", to: "Club", inverse: "members")
            }
            Entity("Player", parent: "Member") { Attribute("number", .int64) }
        }
        if memberInserted {
            try await expectLinkConflict(model: model, insert: "Player", linker: "Team", key: "members", toMany: true)
        } else {
            try await expectLinkConflict(model: model, insert: "Team", linker: "Player", key: "club")
        }
    }

    /// Alice saves an object of `insert`; Bob links an object of `linker` to it through `key`
    /// (a to-many: adds it); Alice's undo of the insert is refused naming the link; nothing
    /// changes; once Bob takes the link back the undo goes through.
    private func expectLinkConflict(model: ManagedObjectModel, insert: String, linker: String, key: String, toMany: Bool = false) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model)
        let alice = editor(coordinator)
        let insertedID = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let object = try context.insertNewObject(forEntityName: insert)
            object.setValue("Owls", forKey: "name")
            try context.save()
            return object.objectID
        }
        let bob = privateContext(coordinator, name: "sync", author: "bob")
        let linkerID = try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let object = try context.insertNewObject(forEntityName: linker)
            let target = try context.existingObject(with: insertedID)
            if toMany { object.mutableSetValue(forKey: key).add(target) } else { object.setValue(target, forKey: key) }
            try context.save()
            return object.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let conflict = expectUndoConflict { try context.undo() }
            let named = [conflict?.object, conflict?.found].compactMap { $0 }.joined(separator: " ")
            #expect(named.contains(linkerID.description) && named.contains(insertedID.description), "\(String(describing: conflict))")
            #expect(context.hasChanges == false)
            try context.save()
        }
        try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let object = try context.existingObject(with: linkerID)
            if toMany { object.mutableSetValue(forKey: key).removeAllObjects() } else { object.setValue(nil, forKey: key) }
            try context.save()
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: insert)) == 0)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}
