import Foundation
import Strata
import StrataTestSupport
import Testing

func childContext(_ parent: ManagedObjectContext, name: String? = nil) -> ManagedObjectContext {
    ManagedObjectContext(concurrencyType: .privateQueue, parent: parent, name: name)
}

/// The team's name as a fresh root context reads it from the store.
func storedTeamName(_ coordinator: PersistentStoreCoordinator, _ id: ManagedObjectID) async throws -> String? {
    try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        try context.existingObject(with: id).value(forKey: "name") as? String
    }
}

@Suite("Contexts: nested (child) contexts", .serialized)
struct NestedContextTests {
    @Test("a child's save reaches the parent, not the store; the parent's save writes it; IDs stay consistent")
    func childSaveGoesThroughParent() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let grandchild = childContext(child, name: "grandchild")
        #expect(child.parent === parent && grandchild.parent === child && parent.parent == nil)

        let kitesID = try await grandchild.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            let kites = try context.insertNewObject(forEntityName: "Team")
            kites.setValue("Kites", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ng", forKey: "lastName")
            player.setValue(kites, forKey: "team")
            try context.save()
            kites.setValue("silver", forKey: "uniformColor")  // unsaved: the grandchild holds it
            return kites.objectID
        }
        #expect(kitesID.isTemporaryID)
        // The middle context has the changes, unsaved; the parent and the store don't.
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.hasChanges == true)
            let kites = try context.existingObject(with: kitesID)
            #expect(kites.isInserted == true)
            #expect((kites.value(forKey: "players") as? Set<ManagedObject>)?.count == 1, "inverse maintained in the parent")
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Herons")
            try context.save()
            kites.setValue("gold", forKey: "uniformColor")  // unsaved: the middle context holds it
        }
        #expect(try await storedTeamName(coordinator, teamID) == "Otters")
        #expect(try head(coordinator) == 1)
        let permanentKites = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.insertedObjects.count == 2)
            #expect(context.updatedObjects.map(\.objectID) == [teamID])
            let kites = try context.existingObject(with: kitesID)
            try context.save()
            return kites.objectID
        }
        #expect(permanentKites.isTemporaryID == false)
        #expect(try head(coordinator) == 2, "one transaction")
        #expect(try await storedTeamName(coordinator, teamID) == "Herons")
        #expect(try await storedTeamName(coordinator, permanentKites) == "Kites")
        // The children learn the permanent ID (on their queues, before their next block): the
        // objects they hold take it.
        for (context, colour) in [(child, "gold"), (grandchild, "silver")] {
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                let registered = context.registeredObject(for: permanentKites)
                let kites = try #require(registered)
                // The old temporary ID names the same object, not a second one (spec 0006 §3.1;
                // before session 35 nil here, and object(with:) made a second object).
                #expect(context.registeredObject(for: kitesID) === kites)
                #expect(try context.object(with: kitesID) === kites)
                #expect(kites.value(forKey: "uniformColor") as? String == colour)
                #expect(kites.value(forKey: "name") as? String == "Kites")
            }
        }
    }

    @Test("a child's fetches and faults see the parent's unsaved state, then its own pending changes")
    func childSeesParentState() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let newID = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Zebras", forKey: "name")
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Apes", forKey: "name")
            return team.objectID
        }
        let child = childContext(parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "name")])
            let teams = try context.fetch(request)
            #expect(teams.map { $0.value(forKey: "name") as? String } == ["Apes", "Zebras"])
            #expect(teams.first?.objectID == newID, "the parent's unsaved insert, by its temporary ID")
            #expect(try context.object(with: newID).value(forKey: "name") as? String == "Apes")
            // The child's own changes count too.
            let mine = try context.insertNewObject(forEntityName: "Team")
            mine.setValue("Moles", forKey: "name")
            context.delete(try context.existingObject(with: newID))
            try context.existingObject(with: teamID).setValue("Bats", forKey: "name")
            #expect(try context.fetch(request).map { $0.value(forKey: "name") as? String } == ["Bats", "Moles"])
            request.predicate = try FormatPredicate(format: "name BEGINSWITH %@", "Z")
            #expect(try context.fetch(request).isEmpty, "judged by the child's value, not the parent's")
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 2)
        }
    }

    @Test("undo: the child undoes its own groups; each child save is one undo group in the parent")
    func undoInChildAndParent() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("A", forKey: "name")
            context.processPendingChanges()
            team.setValue("B", forKey: "name")
            team.setValue("red", forKey: "uniformColor")
            context.processPendingChanges()
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "A")
            #expect(team.value(forKey: "uniformColor") == nil)
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "A")
            #expect(context.canUndo == true)
            try context.undo()  // the whole child save
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect(context.hasChanges == false)
            try context.redo()
            #expect(team.value(forKey: "name") as? String == "A")
        }
        // Undo in the child after its save makes it dirty again; saving pushes the undo.
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
            #expect(context.hasChanges == true)
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
            #expect(context.hasChanges == false, "the pushed undo netted out the parent's change")
        }
        #expect(try head(coordinator) == 1)
    }

    @Test("obtainPermanentIDs in a child reserves keys in the store; the object keeps that ID through both saves")
    func permanentIDsInChild() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent)
        let id = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Early", forKey: "name")
            try context.obtainPermanentIDs(for: [team])
            try context.save()
            return team.objectID
        }
        #expect(id.isTemporaryID == false)
        #expect(try head(coordinator) == 2, "the reservation")
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: id)
            #expect(team.isInserted == true)
            try context.save()
        }
        #expect(try await storedTeamName(coordinator, id) == "Early")
    }

    @Test("a child with automaticallyMergesChangesFromParent merges a sibling's save into the parent and the parent's save")
    func childMergesFromParent() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let watcher = childContext(parent, name: "watcher")
        let editor = childContext(parent, name: "editor")
        try await watcher.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
        }
        var merges = watcher.notifications(.didMerge).makeAsyncIterator()
        // The watcher holds the team with a change of its own.
        try await watcher.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("teal", forKey: "uniformColor")
        }
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        let first = try #require(await merges.next())
        #expect(first.updated.contains(teamID))
        #expect(first.refreshed == [teamID])
        try await watcher.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Herons")
            #expect(team.value(forKey: "uniformColor") as? String == "teal")
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Comets", forKey: "name")
            try context.save()
        }
        let second = try #require(await merges.next())
        #expect(second.updated.contains(teamID))
        try await watcher.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Comets")
        }
    }
}
