import Foundation
import Strata
import StrataModel
import StrataTestSupport
import Testing

// Spec 0006 §23: the context, managed-object, fetch request and coordinator API a Core Data
// port still missed, one section per member.

/// A league store (seed 004: `Team.players` cascades, `Player.team` nullifies; the log records
/// `Player.team`, so `Team.players` is derived): the Otters with three players and the Herons
/// with none. Returns the coordinator, the Otters, their players (by first name) and the Herons.
private func leagueWithPlayers(_ dir: TemporaryDirectory, classes: [(ManagedObject.Type, String)] = []) async throws
    -> (PersistentStoreCoordinator, team: ManagedObjectID, players: [String: ManagedObjectID], other: ManagedObjectID)
{
    let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager, classes: classes)
    let (team, players, other) = try await privateContext(coordinator).perform {
        (context: isolated ManagedObjectContext) throws -> (ManagedObjectID, [String: ManagedObjectID], ManagedObjectID) in
        let team = try context.insertNewObject(forEntityName: "Team")
        team.setValue("Otters", forKey: "name")
        team.setValue("blue", forKey: "uniformColor")
        var players: [String: ManagedObject] = [:]
        for name in ["Ada", "Bea", "Cy"] {
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(name, forKey: "firstName")
            player.setValue(team, forKey: "team")
            players[name] = player
        }
        let other = try context.insertNewObject(forEntityName: "Team")
        other.setValue("Herons", forKey: "name")
        try context.save()
        return (team.objectID, players.mapValues(\.objectID), other.objectID)
    }
    return (coordinator, team, players, other)
}

/// What the store holds, read by a fresh context: team names, and each player's first name
/// with its team's name (nil for none).
private func storedLeague(_ coordinator: PersistentStoreCoordinator) async throws -> (teams: [String], players: [String: String?]) {
    try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> ([String], [String: String?]) in
        let teams = try context.fetch(FetchRequest(entityName: "Team")).compactMap { $0.value(forKey: "name") as? String }.sorted()
        var players: [String: String?] = [:]
        for player in try context.fetch(FetchRequest(entityName: "Player")) {
            guard let name = player.value(forKey: "firstName") as? String else { continue }
            players[name] = (player.value(forKey: "team") as? ManagedObject)?.value(forKey: "name") as? String
        }
        return (teams, players)
    }
}

/// A team that records the snapshot events it is woken with.
final class RecordingTeam: ManagedObject {
    var events: [SnapshotEvents] = []
    var fetches = 0

    override func awake(fromSnapshotEvents events: SnapshotEvents) {
        super.awake(fromSnapshotEvents: events)
        self.events.append(events)
    }

    override func awakeFromFetch() {
        super.awakeFromFetch()
        fetches += 1
    }
}

@Suite("Contexts: further context and object API (spec 0006 §23)")
struct ContextObjectAPITests {
    // MARK: retainsRegisteredObjects

    @Test("retainsRegisteredObjects: off, a fetched object the app drops is freed; on, the context keeps it (same instance, loaded) until reset or until it is turned off")
    func retainsRegisteredObjects() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await leagueWithPlayers(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let byName = try FetchRequest(entityName: "Team", format: "name == 'Otters'")
            let retainsByDefault = context.retainsRegisteredObjects
            #expect(!retainsByDefault, "off by default")

            // Off: memory follows what the app holds.
            weak var dropped: ManagedObject?
            do {
                let team = try #require(try context.fetch(byName).first)
                #expect(team.value(forKey: "name") as? String == "Otters")
                dropped = team
            }
            #expect(dropped == nil)
            #expect(context.registeredObject(for: teamID) == nil, "freed when the app let go")

            // On: the same object stays registered, with its values.
            context.retainsRegisteredObjects = true
            weak var kept: ManagedObject?
            do {
                let team = try #require(try context.fetch(byName).first)
                #expect(team.value(forKey: "name") as? String == "Otters")
                kept = team
            }
            let found = context.registeredObject(for: teamID)
            let registered = try #require(found, "kept by the context")
            #expect(registered === kept)
            #expect(!registered.isFault)
            #expect(context.registeredObjects.contains(registered))
        }
    }

    @Test("retainsRegisteredObjects: objects registered before it was turned on are kept too; turning it off and reset() let go of them")
    func retainsRegisteredObjectsRelease() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, players, otherID) = try await leagueWithPlayers(dir)
        let adaID = try #require(players["Ada"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            weak var team: ManagedObject?
            weak var other: ManagedObject?
            do {
                // Registered while off, held by the app when it is turned on.
                let held = try context.existingObject(with: teamID)
                team = held
                context.retainsRegisteredObjects = true
                other = try context.existingObject(with: otherID)
            }
            #expect(team != nil && context.registeredObject(for: teamID) === team, "registered before: kept")
            #expect(other != nil && context.registeredObject(for: otherID) === other)

            // A changed object is held (as always); the unchanged ones go when it is turned off.
            let ada = try context.existingObject(with: adaID)
            ada.setValue("Adah", forKey: "firstName")
            context.retainsRegisteredObjects = false
            #expect(team == nil && other == nil, "unchanged objects freed")
            #expect(context.registeredObject(for: teamID) == nil)
            #expect(context.registeredObject(for: adaID) === ada, "an object with changes stays")

            // reset() lets go of everything, and the setting stays on.
            context.retainsRegisteredObjects = true
            do { other = try context.existingObject(with: otherID) }
            #expect(other != nil)
            context.reset()
            #expect(other == nil, "freed by reset")
            #expect(context.registeredObject(for: otherID) == nil)
            let stillOn = context.retainsRegisteredObjects
            #expect(stillOn)
            do { other = try context.existingObject(with: otherID) }
            #expect(context.registeredObject(for: otherID) === other, "registered after the reset: kept again")
            #expect(other?.value(forKey: "name") as? String == "Herons")
        }
    }

    @Test("retainsRegisteredObjects keeps objects from one perform block to the next; a saved delete leaves the context")
    func retainsAcrossBlocks() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, players, _) = try await leagueWithPlayers(dir)
        let cyID = try #require(players["Cy"])
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            _ = try context.fetch(FetchRequest(entityName: "Player"))
            _ = try context.existingObject(with: teamID)
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let registeredTeam = context.registeredObject(for: teamID)
            let team = try #require(registeredTeam)
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect(context.registeredObjects.count == 4, "the team and its three players")
            let registeredCy = context.registeredObject(for: cyID)
            let cy = try #require(registeredCy)
            context.delete(cy)
            try context.save()
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.registeredObject(for: cyID) == nil, "a saved delete is no longer registered")
            #expect(context.registeredObjects.count == 3)
        }
    }

    // MARK: propagatesDeletesAtEndOfEvent

    @Test("propagatesDeletesAtEndOfEvent on (default): cascade and nullify are visible as soon as delete returns")
    func propagatesAtDelete() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, players, otherID) = try await leagueWithPlayers(dir)
        let adaID = try #require(players["Ada"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let propagatesByDefault = context.propagatesDeletesAtEndOfEvent
            #expect(propagatesByDefault, "on by default")
            // Nullify: a player's team drops it at once.
            let other = try context.existingObject(with: otherID)
            let ada = try context.existingObject(with: adaID)
            ada.setValue(other, forKey: "team")
            context.delete(ada)
            #expect((other.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true)
            // Cascade: the team's players are deleted at once.
            let team = try context.existingObject(with: teamID)
            let members = try #require(team.value(forKey: "players") as? Set<ManagedObject>)
            #expect(members.count == 2)
            context.delete(team)
            #expect(members.allSatisfy { $0.isDeleted })
            #expect(context.deletedObjects.count == 4)
            try context.save()
        }
        let stored = try await storedLeague(coordinator)
        #expect(stored.teams == ["Herons"])
        #expect(stored.players.isEmpty)
    }

    @Test("propagatesDeletesAtEndOfEvent off: only the object is deleted until save; the save cascades and nullifies, storing what the default stores")
    func propagatesAtSave() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, players, otherID) = try await leagueWithPlayers(dir)
        let adaID = try #require(players["Ada"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.propagatesDeletesAtEndOfEvent = false
            let other = try context.existingObject(with: otherID)
            let ada = try context.existingObject(with: adaID)
            ada.setValue(other, forKey: "team")
            context.processPendingChanges()
            context.delete(ada)
            #expect((other.value(forKey: "players") as? Set<ManagedObject>) == [ada], "nullify waits for the save")
            let team = try context.existingObject(with: teamID)
            let members = try #require(team.value(forKey: "players") as? Set<ManagedObject>)
            context.delete(team)
            context.processPendingChanges()
            #expect(team.isDeleted)
            #expect(members.count == 2 && members.allSatisfy { !$0.isDeleted }, "cascade waits for the save")
            #expect(members.allSatisfy { $0.value(forKey: "team") as? ManagedObject == team })
            #expect(context.deletedObjects == [ada, team])
            let stillThere = try context.count(for: FetchRequest(entityName: "Player"))
            #expect(stillThere == 2, "the cascaded players still match a fetch")

            try context.save()
            #expect(members.allSatisfy { $0.managedObjectContext == nil }, "the save deleted them")
            #expect((other.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true)
        }
        let stored = try await storedLeague(coordinator)
        #expect(stored.teams == ["Herons"])
        #expect(stored.players.isEmpty, "the same stored result as deleting with the default")
    }

    @Test("propagatesDeletesAtEndOfEvent, both modes: undo of a saved delete restores the cascaded players; undo before the save restores the team alone")
    func propagationUndo() async throws {
        for propagates in [true, false] {
            let dir = try TemporaryDirectory()
            let (coordinator, teamID, _, _) = try await leagueWithPlayers(dir)
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                context.propagatesDeletesAtEndOfEvent = propagates
                let team = try context.existingObject(with: teamID)
                // Undone before any save: nothing was cascaded that needs restoring.
                context.delete(team)
                context.processPendingChanges()
                try context.undo()
                #expect(!team.isDeleted)
                let hasChanges = context.hasChanges
                #expect(!hasChanges)
                try context.save()

                // Deleted in a group closed before the save, saved, undone in one step.
                context.delete(team)
                context.processPendingChanges()
                try context.save()
                #expect(team.managedObjectContext == nil)
                try context.undo()
                let canUndo = context.canUndo
                #expect(!canUndo, "one group: the delete and what it cascaded to")
                try context.save()
            }
            let stored = try await storedLeague(coordinator)
            #expect(stored.teams == ["Herons", "Otters"], "propagates: \(propagates)")
            #expect(stored.players == ["Ada": "Otters", "Bea": "Otters", "Cy": "Otters"], "propagates: \(propagates)")
        }
    }

    @Test("propagatesDeletesAtEndOfEvent off: a delete undone before a save and redone after it cascades at the next save; undoing that brings all back")
    func propagationRedoAfterSave() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await leagueWithPlayers(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.propagatesDeletesAtEndOfEvent = false
            context.delete(try context.existingObject(with: teamID))
            context.processPendingChanges()
            try context.undo()
            try context.save()  // nothing to write; the waiting rules go with the undone delete
            try context.redo()
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 0, "the redone delete cascaded at the save")
            try context.undo()
            try context.save()
        }
        let stored = try await storedLeague(coordinator)
        #expect(stored.teams == ["Herons", "Otters"])
        #expect(stored.players == ["Ada": "Otters", "Bea": "Otters", "Cy": "Otters"])
    }

    @Test("propagatesDeletesAtEndOfEvent off: the save's rules see the values then (a player moved away isn't cascaded); turning it on runs the waiting rules")
    func deferredRulesSeeCurrentValues() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, players, otherID) = try await leagueWithPlayers(dir)
        let beaID = try #require(players["Bea"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.propagatesDeletesAtEndOfEvent = false
            let team = try context.existingObject(with: teamID)
            let bea = try context.existingObject(with: beaID)
            context.delete(team)
            bea.setValue(try context.existingObject(with: otherID), forKey: "team")
            try context.save()
            #expect(!bea.isDeleted && bea.managedObjectContext != nil, "moved to the Herons before the save: not cascaded")
        }
        var stored = try await storedLeague(coordinator)
        #expect(stored.teams == ["Herons"])
        #expect(stored.players == ["Bea": "Herons"])

        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.propagatesDeletesAtEndOfEvent = false
            let herons = try context.existingObject(with: otherID)
            let bea = try context.existingObject(with: beaID)
            // Player.team nullifies: the Herons keep listing Bea until the rules run…
            context.delete(bea)
            #expect((herons.value(forKey: "players") as? Set<ManagedObject>) == [bea])
            context.propagatesDeletesAtEndOfEvent = true
            #expect((herons.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true, "…which turning the setting on runs")
            try context.undo()
            #expect(!bea.isDeleted)
            #expect((herons.value(forKey: "players") as? Set<ManagedObject>) == [bea], "undone with the delete")
            // On again: Team.players cascades at once.
            context.delete(herons)
            #expect(bea.isDeleted)
            try context.save()
        }
        stored = try await storedLeague(coordinator)
        #expect(stored.teams.isEmpty)
        #expect(stored.players.isEmpty)
    }

    @Test("propagatesDeletesAtEndOfEvent off: an unsaved team deleted before the save still cascades to its unsaved players at the save")
    func deferredRulesOfAnUnsavedObject() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, _, _) = try await leagueWithPlayers(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.propagatesDeletesAtEndOfEvent = false
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Gulls", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Dee", forKey: "firstName")
            player.setValue(team, forKey: "team")
            context.delete(team)
            #expect(team.managedObjectContext == nil, "an unsaved insert leaves the context at its delete")
            #expect(player.isInserted && !player.isDeleted)
            try context.save()
            #expect(player.managedObjectContext == nil, "cascaded at the save, never stored")
        }
        let stored = try await storedLeague(coordinator)
        #expect(stored.teams == ["Herons", "Otters"])
        #expect(stored.players.keys.sorted() == ["Ada", "Bea", "Cy"])
    }

    // MARK: objectIDs(forRelationshipNamed:) and hasFault(forRelationshipNamed:)

    @Test("objectIDs(forRelationshipNamed:): a to-many still a fault gives its members' IDs without making a player; a to-one without firing its team")
    func objectIDsWithoutFaults() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, players, _) = try await leagueWithPlayers(dir)
        let adaID = try #require(players["Ada"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.object(with: teamID)
            #expect(team.isFault)
            #expect(team.hasFault(forRelationshipNamed: "players"))
            let ids = try team.objectIDs(forRelationshipNamed: "players")
            #expect(Set(ids) == Set(players.values))
            for id in ids { #expect(context.registeredObject(for: id) == nil, "no player made for \(id)") }
            #expect(!team.hasFault(forRelationshipNamed: "players"), "read now (as IDs)")
            #expect(context.registeredObjects.count == 1)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // A player registered as a fault stays one; the to-one's team isn't made.
            let bea = try context.object(with: try #require(players["Bea"]))
            let ada = try context.existingObject(with: adaID)
            #expect(try ada.objectIDs(forRelationshipNamed: "team") == [teamID])
            #expect(context.registeredObject(for: teamID) == nil, "the team isn't made")
            let team = try context.object(with: teamID)
            _ = try team.objectIDs(forRelationshipNamed: "players")
            #expect(bea.isFault, "a member registered as a fault isn't fired")
        }
    }

    @Test("objectIDs(forRelationshipNamed:) reflects unsaved changes; an ordered to-many is in order; bad names throw naming entity and key")
    func objectIDsChangesOrderErrors() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, players, _) = try await leagueWithPlayers(dir)
        let adaID = try #require(players["Ada"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            let ada = try context.existingObject(with: adaID)
            ada.setValue(nil, forKey: "team")
            let newcomer = try context.insertNewObject(forEntityName: "Player")
            newcomer.setValue(team, forKey: "team")
            let ids = Set(try team.objectIDs(forRelationshipNamed: "players"))
            #expect(ids == Set(players.values).subtracting([adaID]).union([newcomer.objectID]))
            #expect(try ada.objectIDs(forRelationshipNamed: "team").isEmpty)
            #expect(!team.hasFault(forRelationshipNamed: "players"), "a changed value is loaded")
            #expect(!newcomer.hasFault(forRelationshipNamed: "team"), "an inserted object's relationships are loaded")

            let unknown = #expect(throws: ContextError.self) { try team.objectIDs(forRelationshipNamed: "coach") }
            #expect(unknown == .unknownKey(entity: "Team", key: "coach"))
            #expect(unknown?.description.contains("Team") == true && unknown?.description.contains("coach") == true)
            let attribute = #expect(throws: ContextError.self) { try team.objectIDs(forRelationshipNamed: "name") }
            #expect(attribute?.description.contains("Team.name is an attribute") == true)
            #expect(!team.hasFault(forRelationshipNamed: "coach"))
            #expect(!team.hasFault(forRelationshipNamed: "name"))
        }

        // An ordered to-many (the library's Author.books), as a fault, in order.
        let library = try TemporaryDirectory()
        let container = try libraryContainer(library)
        try await container.performBackgroundTask { try seedLibrary($0) }
        let (austenID, titles) = try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws -> (ManagedObjectID, [String]) in
            let austen = try #require(try context.fetch(try FetchRequest(entityName: "Author", format: "name == 'Jane Austen'")).first)
            let books = austen.mutableOrderedSetValue(forKey: "books")
            books.moveObject(at: 2, to: 0)
            try context.save()
            return (austen.objectID, books.objects.compactMap { $0.value(forKey: "title") as? String })
        }
        #expect(titles == ["Sanditon", "Emma", "Persuasion"])
        try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            let austen = try context.object(with: austenID)
            #expect(austen.hasFault(forRelationshipNamed: "books"))
            let ids = try austen.objectIDs(forRelationshipNamed: "books")
            #expect(ids.allSatisfy { context.registeredObject(for: $0) == nil }, "no book made")
            let inOrder = try ids.map { try context.existingObject(with: $0).value(forKey: "title") as? String }
            #expect(inOrder == ["Sanditon", "Emma", "Persuasion"])
        }
    }

    @Test("hasFault(forRelationshipNamed:): true for a fault's relationships and a derived to-many not read yet; false once loaded or set; asking fires nothing")
    func hasFault() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, players, _) = try await leagueWithPlayers(dir)
        let adaID = try #require(players["Ada"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let ada = try context.object(with: adaID)
            #expect(ada.hasFault(forRelationshipNamed: "team"))
            #expect(ada.isFault, "asking fired nothing")
            #expect(ada.value(forKey: "firstName") as? String == "Ada")
            #expect(!ada.hasFault(forRelationshipNamed: "team"), "a to-one is loaded with its object")
            #expect(context.registeredObject(for: teamID) == nil)

            var request = FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "name == 'Otters'"))
            request.returnsObjectsAsFaults = false
            let team = try #require(try context.fetch(request).first)
            #expect(!team.isFault)
            #expect(team.hasFault(forRelationshipNamed: "players"), "a derived to-many isn't read with its object")
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 3)
            #expect(!team.hasFault(forRelationshipNamed: "players"))

            context.refresh(team, mergeChanges: false)
            #expect(team.hasFault(forRelationshipNamed: "players"), "a fault again")
            team.setValue(Set<ManagedObject>(), forKey: "players")
            #expect(!team.hasFault(forRelationshipNamed: "players"), "set in this context")
        }
    }

    // MARK: shouldRefreshRefetchedObjects

    @Test("shouldRefreshRefetchedObjects off (default): a refetch leaves a loaded object's values as this context read them, though another context saved new ones")
    func refetchKeepsSnapshot() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await leagueWithPlayers(dir, classes: [(RecordingTeam.self, "Team")])
        let reader = privateContext(coordinator)
        let request = try FetchRequest(entityName: "Team", format: "uniformColor == 'blue'")
        #expect(!request.shouldRefreshRefetchedObjects)
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            let team = try #require(try context.fetch(request).first)
            #expect(team.value(forKey: "name") as? String == "Otters")
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Lions", forKey: "name")
            try context.save()
        }
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(try context.fetch(request).first as? RecordingTeam)
            #expect(team === context.registeredObject(for: teamID))
            #expect(team.value(forKey: "name") as? String == "Otters", "the context's snapshot, not the store's")
            #expect(team.events.isEmpty && team.fetches == 1)
            context.refresh(team, mergeChanges: true)
            #expect(team.value(forKey: "name") as? String == "Lions", "a refresh brings the store's values")
        }
    }

    @Test("shouldRefreshRefetchedObjects on: a refetch gives a loaded object the store's values, keeps its unsaved changes, wakes it with .refresh and reports it refreshed")
    func refetchRefreshes() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await leagueWithPlayers(dir, classes: [(RecordingTeam.self, "Team")])
        let reader = privateContext(coordinator)
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("green", forKey: "uniformColor")  // unsaved: the context holds it
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Lions", forKey: "name")
            try context.save()
        }
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            var refreshed: [Set<ManagedObjectID>] = []
            let token = context.addObserver { change in
                if case .objectsDidChange(let payload) = change.notification, !payload.refreshed.isEmpty { refreshed.append(payload.refreshed) }
            }
            defer { context.removeObserver(token) }
            var request = FetchRequest(entityName: "Team")
            request.shouldRefreshRefetchedObjects = true
            let team = try #require(try context.fetch(request).first { $0.objectID == teamID } as? RecordingTeam)
            #expect(team === context.registeredObject(for: teamID))
            #expect(team.value(forKey: "name") as? String == "Lions", "the store's value")
            #expect(team.value(forKey: "uniformColor") as? String == "green", "the unsaved change stays on top")
            #expect(team.isUpdated)
            #expect(team.events == [.refresh])
            #expect(team.fetches == 2)
            context.processPendingChanges()
            #expect(refreshed == [[teamID]])
            try context.save()  // its version is the store's now: no conflict
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Lions")
            #expect(team.value(forKey: "uniformColor") as? String == "green")
        }
    }

    // MARK: persistentStore(for:)

    @Test("persistentStore(for:) finds the added store by its standardized file URL; another URL, a non-file URL, a removed store and an in-memory store give nil")
    func persistentStoreForURL() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        let url = dir.url.appendingPathComponent("League.strata")
        #expect(coordinator.persistentStore(for: url) == nil, "no store yet")
        let store = try coordinator.addPersistentStore(type: .eventLog, at: url)
        #expect(coordinator.persistentStore(for: url) === store)
        let roundabout = dir.url.appendingPathComponent("sub/../.").appendingPathComponent("League.strata")
        #expect(coordinator.persistentStore(for: roundabout) === store)
        #expect(coordinator.persistentStore(for: URL(fileURLWithPath: url.path + "/")) === store)
        #expect(coordinator.persistentStore(for: dir.url.appendingPathComponent("Other.strata")) == nil)
        #expect(coordinator.persistentStore(for: try #require(URL(string: "https://example.com/League.strata"))) == nil)
        try coordinator.remove(store)
        #expect(coordinator.persistentStore(for: url) == nil, "removed")

        let memory = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        try memory.addPersistentStore(type: .inMemory)
        #expect(memory.persistentStore(for: URL(fileURLWithPath: "/dev/null")) == nil)
    }
}
