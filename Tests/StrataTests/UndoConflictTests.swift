import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// Undo of saved work is checked against the store: each kind of change another writer can
/// make in between (a property, a delete, a re-insert, a to-many's members) is refused with
/// an error naming it, and nothing is overwritten.
@Suite("Contexts: undo conflicts with another writer")
struct UndoConflictTests {
    func conflict(_ body: () throws -> Void) -> (object: String, property: String, expected: String, found: String)? {
        expectUndoConflict(body)
    }

    /// The team's stored name and colour, read by a new context.
    func storedTeam(_ coordinator: PersistentStoreCoordinator, _ teamID: ManagedObjectID) async throws -> (String?, String?) {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            return (team.value(forKey: "name") as? String, team.value(forKey: "uniformColor") as? String)
        }
    }

    @Test("undo of a saved update another writer changed since: refused, naming object, property and both values")
    func updateChangedSince() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let editor = privateContext(coordinator)
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            team.setValue("teal", forKey: "uniformColor")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Comets", forKey: "name")
            try context.save()
        }
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            // The editor still holds "Herons" as committed: the store's "Comets" is news.
            let found = conflict { try context.undo() }
            #expect(found?.object == teamID.description)
            #expect(found?.property == "name")
            #expect(found?.expected.contains("Herons") == true)
            #expect(found?.found.contains("Comets") == true)
            // Nothing applied, not even the unconflicted colour; the group is still undoable.
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "uniformColor") as? String == "teal")
            #expect(context.hasChanges == false)
            let (canUndo, canRedo) = (context.canUndo, context.canRedo)
            #expect(canUndo && !canRedo)
        }
        let stored = try await storedTeam(coordinator, teamID)
        #expect(stored.0 == "Comets" && stored.1 == "teal")
    }

    @Test("undo of a saved update whose other properties changed since: allowed, and the other writer's change stays")
    func otherPropertyChangedSince() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let editor = privateContext(coordinator)
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("gold", forKey: "uniformColor")
            try context.save()
        }
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            let canRedo = context.canRedo
            #expect(canRedo)
            try context.save()
        }
        let stored = try await storedTeam(coordinator, teamID)
        #expect(stored.0 == "Otters" && stored.1 == "gold")
    }

    @Test("undo of a saved insert another writer deleted since: refused as 'deleted by another writer'")
    func insertDeletedSince() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let editor = privateContext(coordinator)
        let newID = try await editor.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Herons", forKey: "name")
            try context.save()
            return team.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: newID))
            try context.save()
        }
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            let found = conflict { try context.undo() }
            #expect(found?.object == newID.description)
            #expect(found?.property == "(object)")
            #expect(found?.found.contains("deleted by another writer") == true)
            let canUndo = context.canUndo
            #expect(context.hasChanges == false)
            #expect(canUndo)
        }
    }

    @Test("undo of a saved delete whose object another writer brought back: refused as 'exists again'")
    func deleteRestoredSince() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let editor = privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true)
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
        }
        // A second context of the same author and name rebuilds the stack from the log and
        // undoes the delete: the team exists again, under its own ID.
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            try context.undo()
            try context.save()
        }
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            let found = conflict { try context.undo() }
            #expect(found?.object == teamID.description)
            #expect(found?.property == "(object)")
            #expect(found?.found.contains("exists again") == true)
            #expect(context.hasChanges == false)
        }
        let name = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).value(forKey: "name") as? String
        }
        #expect(name == "Otters")
    }

    @Test("undo after a restart of a saved to-one change another writer changed since: refused, naming the reference")
    func referenceChangedSince() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        let (teamID, playerID, otherTeamID) = try await {
            let coordinator = try openCoordinator(dir, model: model)
            return try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
                (context: isolated ManagedObjectContext) throws in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Otters", forKey: "name")
                let other = try context.insertNewObject(forEntityName: "Team")
                other.setValue("Herons", forKey: "name")
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("Ada", forKey: "firstName")
                try context.save()
                player.setValue(team, forKey: "team")
                try context.save()
                return (team.objectID, player.objectID, other.objectID)
            }
        }()
        let coordinator = try openCoordinator(dir, model: model)
        // Another writer moves the player to the other team.
        try await privateContext(coordinator, name: "other", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: playerID).setValue(try context.existingObject(with: otherTeamID), forKey: "team")
            try context.save()
        }
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            let canUndo = context.canUndo
            #expect(canUndo)
            let found = conflict { try context.undo() }
            // Undoing "player joins team" finds the player on another team. The log records
            // the to-one side (`Team.players` is derived from it), so that is what's named.
            #expect(found?.object == playerID.description)
            #expect(found?.property == "team")
            #expect(found?.expected.contains(teamID.description) == true)
            #expect(found?.found.contains(otherTeamID.description) == true)
            #expect(context.hasChanges == false)
        }
        let team = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            (try context.existingObject(with: playerID).value(forKey: "team") as? ManagedObject)?.objectID
        }
        #expect(team == otherTeamID)
    }

    /// Playlists with a one-way to-many `songs` (the log records its changes as members added
    /// and removed) and a one-way to-one `featured`.
    static var playlists: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Song") { Attribute("title", .string) }
                Entity("Playlist") {
                    Attribute("name", .string)
                    Relationship("songs", to: "Song", toMany: true)
                    Relationship("featured", to: "Song")
                }
            }
        }
    }

    @Test("undo after a restart of saved to-many members another writer changed since: refused, naming the relationship")
    func membershipChangedSince() async throws {
        let dir = try TemporaryDirectory()
        let model = try Self.playlists
        let (playlistID, addedID) = try await {
            let coordinator = try openCoordinator(dir, model: model)
            return try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
                (context: isolated ManagedObjectContext) throws in
                let playlist = try context.insertNewObject(forEntityName: "Playlist")
                let first = try context.insertNewObject(forEntityName: "Song")
                let second = try context.insertNewObject(forEntityName: "Song")
                playlist.mutableSetValue(forKey: "songs").add(first)
                try context.save()
                playlist.mutableSetValue(forKey: "songs").add(second)
                try context.save()
                return (playlist.objectID, second.objectID)
            }
        }()
        let coordinator = try openCoordinator(dir, model: model)
        // Another writer takes the added song out again.
        try await privateContext(coordinator, name: "other", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: playlistID).mutableSetValue(forKey: "songs").remove(try context.existingObject(with: addedID))
            try context.save()
        }
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            let found = conflict { try context.undo() }
            #expect(found?.object == playlistID.description)
            #expect(found?.property == "songs")
            #expect(found?.found.contains("changed by another writer") == true)
            #expect(context.hasChanges == false)
        }
        let count = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            (try context.existingObject(with: playlistID).value(forKey: "songs") as? Set<ManagedObject>)?.count
        }
        #expect(count == 1)
    }

    @Test("an object read by ID and saved twice: each undo after save expects what the save before wrote (attribute, nil, to-one, to-many), no false conflict")
    func readByIDSavedTwice() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.playlists)
        let (playlistID, firstID, secondID) = try await privateContext(coordinator).perform {
            (context: isolated ManagedObjectContext) throws in
            let playlist = try context.insertNewObject(forEntityName: "Playlist")
            playlist.setValue("Mix", forKey: "name")
            let first = try context.insertNewObject(forEntityName: "Song")
            let second = try context.insertNewObject(forEntityName: "Song")
            playlist.mutableSetValue(forKey: "songs").add(first)
            try context.save()
            return (playlist.objectID, first.objectID, second.objectID)
        }
        // The editor fires the fault by ID (no fetch), changes it and saves, then clears the
        // name and saves again. Nothing asks for its committed values by name in between, so
        // they stay as the store read gave them, updated by each save.
        let editor = privateContext(coordinator)
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            let playlist = try context.existingObject(with: playlistID)
            playlist.setValue("Road", forKey: "name")
            playlist.setValue(try context.existingObject(with: firstID), forKey: "featured")
            playlist.mutableSetValue(forKey: "songs").add(try context.existingObject(with: secondID))
            try context.save()
            playlist.setValue(nil, forKey: "name")
            try context.save()
            // Undoing the second save expects the name nil, as the second save wrote it.
            try context.undo()
            #expect(playlist.value(forKey: "name") as? String == "Road")
            try context.save()
            // Undoing the first expects "Road", the first save's song and its featured song.
            try context.undo()
            #expect(playlist.value(forKey: "name") as? String == "Mix")
            #expect(playlist.value(forKey: "featured") == nil)
            try context.save()
            let committed = playlist.committedValues(forKeys: ["name", "featured", "songs"])
            #expect(committed["name"] as? String == "Mix")
            #expect(committed["featured"] is NSNull)
            #expect((committed["songs"] as? Set<ManagedObject>)?.map(\.objectID) == [firstID])
        }
        let stored = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let playlist = try context.existingObject(with: playlistID)
            return (
                playlist.value(forKey: "name") as? String, (playlist.value(forKey: "featured") as? ManagedObject)?.objectID,
                (playlist.value(forKey: "songs") as? Set<ManagedObject>)?.map(\.objectID)
            )
        }
        #expect(stored.0 == "Mix" && stored.1 == nil && stored.2 == [firstID])
    }
}
