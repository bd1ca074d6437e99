import Foundation
@testable import Strata
import StrataTestSupport
import Testing

/// Nested contexts (session 36): a child that meets an object's permanent ID before it has
/// been told of the remap (spec 0006 §3.1, §18.4), and a root context's own values after it
/// makes its inserts' IDs permanent while it has live children.
@Suite("Nested contexts: a permanent ID met before the remap, a root's own values after it", .serialized)
struct NestedPermanentIDTests {
    // MARK: - A permanent ID met before the remap

    /// The child (or grandchild) pushes a team and holds it; then, in the same block — the
    /// remap reaches each context on its queue after the running block —, the root saves or
    /// obtains the team's permanent ID, and the child meets that ID: `object(with:)`,
    /// `existingObject(with:)`, `registeredObject(for:)`, a fetch, a relationship read
    /// through the parent, a URI. Before, each of these made (or found nothing but) a second
    /// object for the team, and once the remap came two objects shared the permanent ID.
    @Test(
        "a child meeting its pushed team's permanent ID before the remap (object(with:), existingObject, registeredObject, fetch, a relationship read through the parent, a URI) gets the one object it holds",
        arguments: ["save", "obtain"], ["object", "existing", "registered", "fetch", "relationship", "fault", "uri"])
    func permanentIDBeforeRemap(how: String, way: String) async throws {
        for grandchild in [false, true] { try await Self.meetPermanentID(how: how, way: way, grandchild: grandchild) }
    }

    static func meetPermanentID(how: String, way: String, grandchild: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try NestedUndoChainTests.leagueModel(.nullify))
        let root = privateContext(coordinator, name: "root")
        let middle = childContext(root, name: "middle")
        let child = grandchild ? childContext(middle, name: "grandchild") : middle
        let label = "\(how) \(way) \(grandchild ? "grandchild" : "child")"
        // A stored player, held by the child as a fault: the root puts it on the team below.
        let pipID = try await root.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Pip", forKey: "firstName")
            try context.save()
            return player.objectID
        }
        let temporaryID = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            try context.save()
            context.userInfo["team"] = team
            context.userInfo["pip"] = try context.object(with: pipID)  // a fault, not fired
            return team.objectID
        }
        if grandchild { try await middle.perform { (context: isolated ManagedObjectContext) throws in try context.save() } }
        let permanentID = try await child.perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            let team = try #require(context.userInfo["team"] as? ManagedObject)
            // The root makes the ID permanent while this block runs: no remap has reached
            // this context (nor, for a grandchild, the middle one) yet.
            let (permanentID, playerID) = try root.performAndWait { (root: isolated ManagedObjectContext) throws in
                let rootTeam = try root.existingObject(with: temporaryID)
                let player = try root.insertNewObject(forEntityName: "Player")
                player.setValue("Pat", forKey: "firstName")
                player.setValue(rootTeam, forKey: "team")
                try root.existingObject(with: pipID).setValue(rootTeam, forKey: "team")
                if how == "save" {
                    try root.save()
                } else {
                    try root.obtainPermanentIDs(for: [rootTeam])
                }
                return (rootTeam.objectID, player.objectID)
            }
            #expect(permanentID.isTemporaryID == false)
            let met: ManagedObject?
            switch way {
            case "object": met = try context.object(with: permanentID)
            case "existing": met = try context.existingObject(with: permanentID)
            case "registered": met = context.registeredObject(for: permanentID)
            case "fetch":
                let teams = try context.fetch(FetchRequest(entityName: "Team"))
                #expect(teams.count == 1, "\(label): \(teams.map(\.objectID))")
                met = teams.first
            case "relationship":
                met = try context.existingObject(with: playerID).value(forKey: "team") as? ManagedObject
            case "fault":
                // No lookup by ID first: the fault fires reading the parent's values, which
                // name the permanent ID.
                let pip = try #require(context.userInfo["pip"] as? ManagedObject)
                met = pip.value(forKey: "team") as? ManagedObject
            default:
                let id = try #require(coordinator.managedObjectID(forURIRepresentation: permanentID.uriRepresentation()))
                met = try context.object(with: id)
            }
            #expect(met === team, "\(label): met \(met.map { "\($0.objectID)" } ?? "nothing"), holds \(team.objectID)")
            #expect(context.registeredObject(for: permanentID) === team, "\(label)")
            #expect(team.objectID == permanentID, "\(label): the object answers to the permanent ID")
            let teams = context.registeredObjects.filter { $0.entity.name == "Team" }
            #expect(teams.count == 1, "\(label): one object for the team, not \(teams.map(\.objectID))")
            // A change made through what it met reaches the store once.
            met?.setValue("Kestrels", forKey: "name")
            return permanentID
        }
        // The remaps arrive; still one object, under the permanent ID.
        for context in (grandchild ? [root, middle] : [root]) { try await context.perform { (_: isolated ManagedObjectContext) throws in } }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(context.userInfo["team"] as? ManagedObject)
            #expect(team.objectID == permanentID, "\(label)")
            #expect(try context.object(with: permanentID) === team, "\(label)")
            #expect(try context.object(with: temporaryID) === team, "\(label)")
            let teams = context.registeredObjects.filter { $0.entity.name == "Team" }
            #expect(teams.count == 1, "\(label): one object for the team after the remap, not \(teams.map(\.objectID))")
            try context.save()
        }
        if grandchild { try await middle.perform { (context: isolated ManagedObjectContext) throws in try context.save() } }
        let stored = try await NestedUndoChainTests.saveAndRead(root)
        let expected = "Kestrels"
        #expect(stored.error == nil && stored.teams == [expected] && stored.players == ["Pat": expected, "Pip": expected], "\(label): \(stored)")
        #expect(try coordinator.persistentStores[0].log.verify().isClean, "\(label)")
    }

    // MARK: - A root's own values after it makes its inserts permanent

    /// Every ID the root context's objects, fetched rows and undo groups still name among `old`.
    static func staleIDs(_ context: isolated ManagedObjectContext, _ old: Set<ManagedObjectID>) -> [String] {
        let core = context.core
        var found: [String] = []
        func look(_ what: String, _ values: [String: PropertyValue]?) {
            for (key, value) in values ?? [:] where value.ids.contains(where: old.contains) { found.append("\(what).\(key) = \(value)") }
        }
        for object in context.registeredObjects {
            if old.contains(object.objectID) { found.append("object \(object.objectID)") }
            look("\(object.objectID) changes", object.changes)
            look("\(object.objectID) committed", object.committed)
            look("\(object.objectID) row", object.row)
            look("\(object.objectID) transients", object.transients)
        }
        let groups = core.journal.undoStack + core.journal.redoStack + [core.journal.open]
        for (index, group) in groups.enumerated() {
            for (id, change) in group.changes {
                if old.contains(id) { found.append("group \(index) names \(id)") }
                look("group \(index) \(id) values", change.values)
                look("group \(index) \(id) old", change.old)
                look("group \(index) \(id) new", change.new)
            }
        }
        return found
    }

    /// The root inserts team A and player B on it (and player C on the stored team S),
    /// with a live child; it then saves, or obtains the new objects' permanent IDs. Its
    /// own values — B's team, A's and S's players, its undo groups — must name the
    /// permanent IDs: read in the root and in the child, undo and redo in the root, a push
    /// from the child changing the link, a fetch by the relationship.
    @Test("a root with a live child that saves or obtains permanent IDs for linked inserts: no value of its own keeps an old temporary ID; reads, undo and redo, a child's push and a fetch by the relationship agree", arguments: ["save", "obtain"])
    func rootKeepsNoOldTemporaryID(how: String) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try NestedUndoChainTests.leagueModel(.nullify))
        let root = privateContext(coordinator, name: "root")
        let storedTeam = try await root.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Swifts", forKey: "name")
            try context.save()
            return team.objectID
        }
        let child = childContext(root, name: "child")
        let (a, b, c) = try await root.perform { (context: isolated ManagedObjectContext) throws in
            let stored = try context.existingObject(with: storedTeam)
            _ = stored.value(forKey: "players")  // the derived side read (and cached) before the insert
            let a = try context.insertNewObject(forEntityName: "Team")
            a.setValue("Owls", forKey: "name")
            let b = try context.insertNewObject(forEntityName: "Player")
            b.setValue("Bo", forKey: "firstName")
            b.setValue(a, forKey: "team")
            let c = try context.insertNewObject(forEntityName: "Player")
            c.setValue("Cy", forKey: "firstName")
            c.setValue(stored, forKey: "team")
            context.setActionName("insert")
            context.userInfo["held"] = [a, b, c]
            return (a.objectID, b.objectID, c.objectID)
        }
        // The child reads them through the root, unsaved.
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.existingObject(with: b)
            #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == a)
            context.userInfo["held"] = [player, try context.existingObject(with: c), try context.existingObject(with: storedTeam)]
        }
        let old: Set<ManagedObjectID> = [a, b, c]
        let (newA, newB, newC) = try await root.perform { (context: isolated ManagedObjectContext) throws in
            let objects = try [a, b, c].map { try context.existingObject(with: $0) }
            if how == "save" { try context.save() } else { try context.obtainPermanentIDs(for: objects) }
            let stale = Self.staleIDs(context, old)
            #expect(stale.isEmpty, "\(how): the root still names old temporary IDs: \(stale)")
            let (team, player, other) = (objects[0], objects[1], objects[2])
            #expect(player.value(forKey: "team") as? ManagedObject === team)
            #expect(team.value(forKey: "players") as? Set<ManagedObject> == [player])
            let stored = try context.existingObject(with: storedTeam)
            #expect(stored.value(forKey: "players") as? Set<ManagedObject> == [other])
            let request = FetchRequest<ManagedObject>(entityName: "Player")
            var byTeam = request
            byTeam.predicate = try FormatPredicate(format: "team == %@", team)
            #expect(try context.fetch(byTeam) == [player], "\(how): fetch by team")
            byTeam.predicate = try FormatPredicate(format: "team == %@", team.objectID)
            #expect(try context.fetch(byTeam) == [player], "\(how): fetch by the team's ID")
            return (team.objectID, player.objectID, other.objectID)
        }
        // The child, told of the remap, reads the link as the root has it.
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.existingObject(with: newB)
            let team = try #require(player.value(forKey: "team") as? ManagedObject)
            #expect(team.objectID == newA, "\(how): child reads B's team as \(team.objectID)")
            #expect(team.value(forKey: "players") as? Set<ManagedObject> == [player], "\(how): child reads A's players")
            let stored = try context.existingObject(with: storedTeam)
            #expect((stored.value(forKey: "players") as? Set<ManagedObject>)?.map(\.objectID) == [newC], "\(how): child reads S's players")
            #expect(Self.staleIDs(context, old).isEmpty, "\(how): the child still names old temporary IDs: \(Self.staleIDs(context, old))")
            // A push touching the link: B moves to the stored team.
            player.setValue(stored, forKey: "team")
            try context.save()
        }
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: newA), player = try context.existingObject(with: newB)
            let stored = try context.existingObject(with: storedTeam)
            #expect(player.value(forKey: "team") as? ManagedObject === stored, "\(how): after the push")
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true, "\(how): A after the push")
            #expect((stored.value(forKey: "players") as? Set<ManagedObject>)?.count == 2, "\(how): S after the push")
            // Undo the push, then redo it.
            try context.undo()
            #expect(player.value(forKey: "team") as? ManagedObject === team, "\(how): after undoing the push")
            #expect(team.value(forKey: "players") as? Set<ManagedObject> == [player], "\(how): A after undoing the push")
            #expect(Self.staleIDs(context, old).isEmpty, "\(how): after undo: \(Self.staleIDs(context, old))")
            try context.redo()
            #expect(player.value(forKey: "team") as? ManagedObject === stored, "\(how): after redoing the push")
            try context.undo()
            if how == "obtain" {
                // The insert group too (unsaved): the objects go, and come back.
                try context.undo()
                #expect(team.isDeleted || team.managedObjectContext == nil || !context.insertedObjects.contains(team))
                try context.redo()
                #expect(player.value(forKey: "team") as? ManagedObject === team, "\(how): after redoing the insert")
            }
            #expect(Self.staleIDs(context, old).isEmpty, "\(how): after undo and redo: \(Self.staleIDs(context, old))")
            var byTeam = FetchRequest<ManagedObject>(entityName: "Player")
            byTeam.predicate = try FormatPredicate(format: "team == %@", team)
            #expect(try context.fetch(byTeam) == [player], "\(how): fetch by team after undo")
            try context.save()
        }
        let stored = try await NestedUndoChainTests.saveAndRead(privateContext(coordinator))
        #expect(stored.error == nil && stored.players == ["Bo": "Owls", "Cy": "Swifts"], "\(how): \(stored)")
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// The child pushes a change naming the root's new objects by the temporary IDs it still
    /// holds them under: the root saved (or obtained their IDs) in the child's own block, so
    /// the remap hasn't reached the child. The root must take the push onto its objects under
    /// the permanent IDs, keeping no old temporary ID in its values or undo groups.
    @Test("a child's push naming the root's new objects by their old temporary IDs, made before the child took in the remap: the root's values and undo groups name only the permanent IDs; reads, undo and redo, a fetch by the relationship and the store agree", arguments: ["save", "obtain"])
    func childPushBeforeRemap(how: String) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try NestedUndoChainTests.leagueModel(.nullify))
        let root = privateContext(coordinator, name: "root")
        let child = childContext(root, name: "child")
        let (a, larks, b) = try await root.perform { (context: isolated ManagedObjectContext) throws in
            let a = try context.insertNewObject(forEntityName: "Team")
            a.setValue("Owls", forKey: "name")
            let larks = try context.insertNewObject(forEntityName: "Team")
            larks.setValue("Larks", forKey: "name")
            let b = try context.insertNewObject(forEntityName: "Player")
            b.setValue("Bo", forKey: "firstName")
            b.setValue(a, forKey: "team")
            context.userInfo["held"] = [a, larks, b]
            return (a.objectID, larks.objectID, b.objectID)
        }
        let old: Set<ManagedObjectID> = [a, larks, b]
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.existingObject(with: b)
            let other = try context.existingObject(with: larks)
            _ = try context.existingObject(with: a).value(forKey: "players")
            try root.performAndWait { (root: isolated ManagedObjectContext) throws in
                let objects = try [a, larks, b].map { try root.existingObject(with: $0) }
                if how == "save" { try root.save() } else { try root.obtainPermanentIDs(for: objects) }
            }
            player.setValue(other, forKey: "team")
            try context.save()
        }
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            let stale = Self.staleIDs(context, old)
            #expect(stale.isEmpty, "\(how): the root still names old temporary IDs: \(stale)")
            let held = try #require(context.userInfo["held"] as? [ManagedObject])
            let (team, other, player) = (held[0], held[1], held[2])
            #expect(player.value(forKey: "team") as? ManagedObject === other, "\(how)")
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true, "\(how)")
            #expect(other.value(forKey: "players") as? Set<ManagedObject> == [player], "\(how)")
            #expect(try context.fetch(FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team == %@", other))) == [player], "\(how)")
            try context.undo()
            #expect(player.value(forKey: "team") as? ManagedObject === team, "\(how): after undoing the push")
            #expect(Self.staleIDs(context, old).isEmpty, "\(how): after undo: \(Self.staleIDs(context, old))")
            try context.redo()
            #expect(player.value(forKey: "team") as? ManagedObject === other, "\(how): after redoing the push")
            #expect(Self.staleIDs(context, old).isEmpty, "\(how): after redo: \(Self.staleIDs(context, old))")
            try context.save()
        }
        let stored = try await NestedUndoChainTests.saveAndRead(privateContext(coordinator))
        #expect(stored.error == nil && stored.teams == ["Larks", "Owls"] && stored.players == ["Bo": "Larks"], "\(how): \(stored)")
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}

/// The uniqueness merge of a root context absorbs a child's pushed insert into the stored
/// object with the same unique value (spec 0006 §3.1, §18.4): the child, which holds the
/// insert under its temporary ID, takes the stored object's ID — one object for the team in
/// the child, whichever way it meets it. Before session 37 only the root's alias table heard
/// of it: the child kept its object under the temporary ID, and met the stored team as a
/// second object.
@Suite("Nested contexts: a child's insert absorbed by its root's uniqueness merge", .serialized)
struct NestedAbsorbedIDTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true)
                Unique("name")
            }
            Entity("Player") {
                Attribute("firstName", .string)
                Relationship("team", to: "Team", inverse: "players")
            }
        }
    }

    @Test(
        "the root keeps its stored team and absorbs the child's pushed one: the child's object for it answers to the stored ID, its player's team is that object, and a change through it is saved once (whether the child held the stored team before or not)",
        arguments: [false, true])
    func childTakesTheStoredID(childHeldStoredTeam: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        let root = privateContext(coordinator, name: "root")
        let label = childHeldStoredTeam ? "child held the stored team" : "child didn't hold it"
        let storedID = try await root.perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .mergeByPropertyObjectTrump
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            try context.save()
            context.userInfo["team"] = team  // registered here: the merge keeps it
            return team.objectID
        }
        let child = childContext(root, name: "child")
        let temporaryID = try await child.perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            if childHeldStoredTeam { context.userInfo["stored"] = try context.existingObject(with: storedID) }
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Pat", forKey: "firstName")
            player.setValue(team, forKey: "team")
            try context.save()
            context.userInfo["team"] = team
            context.userInfo["player"] = player
            return team.objectID
        }
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            try context.save()
            let teams = try context.fetch(FetchRequest(entityName: "Team"))
            #expect(teams.map(\.objectID) == [storedID], "\(label): the root merged the two teams")
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let player = try #require(context.userInfo["player"] as? ManagedObject)
            let team = try context.object(with: storedID)
            #expect(team.objectID == storedID, "\(label)")
            #expect(try context.object(with: temporaryID) === team, "\(label): the old ID names the same object")
            #expect(context.registeredObject(for: storedID) === team, "\(label)")
            #expect(player.value(forKey: "team") as? ManagedObject === team, "\(label): the player's team is the one object")
            let teams = context.registeredObjects.filter { $0.entity.name == "Team" }
            #expect(teams.count == 1, "\(label): one object for the team, not \(teams.map(\.objectID))")
            #expect(Set((team.value(forKey: "players") as? Set<ManagedObject>)?.map(\.objectID) ?? []) == [player.objectID], "\(label)")
            team.setValue("Kestrels", forKey: "name")
            try context.save()
        }
        let stored = try await NestedUndoChainTests.saveAndRead(root)
        #expect(stored.error == nil && stored.teams == ["Kestrels"] && stored.players == ["Pat": "Kestrels"], "\(label): \(stored)")
        #expect(try coordinator.persistentStores[0].log.verify().isClean, "\(label)")
    }
}
