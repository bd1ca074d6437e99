import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// A list with an ordered to-many of items.
private func orderedModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("List") {
            Attribute("title", .string)
            Relationship("items", to: "Item", inverse: "list", toMany: true, ordered: true)
        }
        Entity("Item") {
            Attribute("label", .string)
            Relationship("list", to: "List", inverse: "items")
        }
    }
}

/// Students and courses, many-to-many.
private func manyToManyModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Student") {
            Attribute("name", .string)
            Relationship("courses", to: "Course", inverse: "students", toMany: true)
        }
        Entity("Course") {
            Attribute("title", .string)
            Relationship("students", to: "Student", inverse: "courses", toMany: true)
        }
    }
}

@Suite("Review findings", .serialized)
struct ReviewFindingsTests {
    // MARK: - Finding 1: refresh(mergeChanges: false) discards the object's changes, but the journal still saves them

    @Test("refresh(_:mergeChanges: false) discards pending changes; a later save must not write them")
    func refreshWithoutMergeStillSavesDiscardedChanges() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Discarded", forKey: "name")
            context.processPendingChanges()
            context.refresh(team, mergeChanges: false)
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect(team.hasChanges == false)
            try context.save()
        }
        let stored = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).value(forKey: "name") as? String
        }
        do {
            #expect(stored == "Otters")
        }
    }

    @Test("refresh(_:mergeChanges: false) without processPendingChanges: hasChanges must be false afterwards")
    func refreshWithoutMergeLeavesContextDirty() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Discarded", forKey: "name")
            context.refresh(team, mergeChanges: false)
            do {
                #expect(context.hasChanges == false)
            }
        }
    }

    // MARK: - Finding 2: saving inside an explicit undo grouping saves the group twice

    @Test("save inside beginUndoGrouping/endUndoGrouping: closing the group later must not re-save it")
    func saveInsideExplicitGroupResavesGroup() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let log = try #require(coordinator.persistentStores.first).log
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.beginUndoGrouping()
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Herons", forKey: "name")
            try context.save()
            context.endUndoGrouping()
            #expect(context.hasChanges == false)
            do {
                try context.save()
            }
        }
        let head = try log.read { (reader: borrowing LogReader) throws in try reader.head }
        #expect(head == 2)
    }

    // MARK: - Finding 3: several undos of saved work saved at once are logged as a plain save

    @Test("two undos of saved groups, one save: persisted undo must still offer redo after a restart")
    func twoUndosOneSaveLoseRedoAfterRestart() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        let teamID: ManagedObjectID
        do {
            let coordinator = try openCoordinator(dir, model: model)
            teamID = try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
                (context: isolated ManagedObjectContext) throws in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Otters", forKey: "name")
                try context.save()
                team.setValue("A", forKey: "name")
                try context.save()
                team.setValue("B", forKey: "name")
                try context.save()
                try context.undo()
                try context.undo()
                #expect(team.value(forKey: "name") as? String == "Otters")
                try context.save()
                #expect(context.canRedo == true)
                #expect(context.redoActionName == nil)
                return team.objectID
            }
            let kind = try coordinator.persistentStores[0].log.read { (reader: borrowing LogReader) throws in try reader.event(4).kind }
            do {
                #expect(kind != .save)
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            do {
                #expect(context.canRedo == true)
                try context.undo()
                #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String != "A", "undo re-applies the undone rename")
            }
        }
    }

    // MARK: - Finding 4: undo/redo of an insert (or of a delete of an unsaved object) creates a second instance

    @Test("redo of an undone insert brings back the same object instance")
    func redoInsertKeepsIdentity() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ng", forKey: "lastName")
            player.setValue(team, forKey: "team")
            context.processPendingChanges()
            try context.undo()
            try context.redo()
            #expect(context.insertedObjects.count == 1)
            do {
                #expect(player.managedObjectContext != nil)
                #expect(context.insertedObjects.contains(player))
                #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.contains(player) == true)
            }
            // The app's reference silently ignores edits; the save then fails.
            player.setValue("Li", forKey: "firstName")
            do {
                #expect(throws: Never.self) { try context.save() }
            }
        }
    }

    @Test("undo of deleting an unsaved object brings back the same instance")
    func undoDeleteOfInsertedKeepsIdentity() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ng", forKey: "lastName")
            context.processPendingChanges()
            context.delete(player)
            context.processPendingChanges()
            try context.undo()
            #expect(context.insertedObjects.count == 1)
            do {
                #expect(player.isDeleted == false)
                #expect(player.managedObjectContext != nil)
                #expect(context.insertedObjects.first === player)
            }
        }
    }

    // MARK: - Finding 5: an ordered to-many is returned as an unordered Set

    @Test("value(forKey:) of an ordered to-many returns the members in order")
    func orderedToManyReturnsArray() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try orderedModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let list = try context.insertNewObject(forEntityName: "List")
            var items: [ManagedObject] = []
            for label in ["c", "a", "b"] {
                let item = try context.insertNewObject(forEntityName: "Item")
                item.setValue(label, forKey: "label")
                items.append(item)
            }
            list.setValue(items, forKey: "items")
            do {
                let value = list.value(forKey: "items") as? [ManagedObject]
                #expect(value?.compactMap { $0.value(forKey: "label") as? String } == ["c", "a", "b"])
            }
        }
    }

    // MARK: - Finding 6: IDs of another store resolve to this store's object

    @Test("object(with:) / existingObject(with:) refuse a permanent ID of another store")
    func foreignStoreIDResolvesToWrongObject() async throws {
        let dirA = try TemporaryDirectory()
        let dirB = try TemporaryDirectory()
        let (coordinatorA, _) = try await leagueStore(dirA)
        let coordinatorB = try openCoordinator(dirB, model: try SeedModels.leagueManager)
        let foreignID = try await privateContext(coordinatorB).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Foreign", forKey: "name")
            try context.save()
            return team.objectID
        }
        #expect(coordinatorA.managedObjectID(forURIRepresentation: foreignID.uriRepresentation()) == nil)
        try await privateContext(coordinatorA).perform { (context: isolated ManagedObjectContext) throws in
            do {
                #expect(throws: (any Error).self) { _ = try context.existingObject(with: foreignID) }
            }
        }
    }

    // MARK: - Finding 7: unordered to-many values are not re-sorted after temporary→permanent remapping

    @Test("after save, removing and re-adding the same member leaves the object unchanged")
    func remappedUnorderedToManyComparesAsSet() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            var players: [ManagedObject] = []
            for index in 0..<8 {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("P\(index)", forKey: "lastName")
                player.setValue(team, forKey: "team")
                players.append(player)
            }
            try context.save()
            let members = team.mutableSetValue(forKey: "players")
            members.remove(players[0])
            members.add(players[0])
            context.processPendingChanges()
            #expect(players[0].hasChanges == false)
            do {
                #expect(team.hasChanges == false)
                #expect(context.hasChanges == false)
            }
        }
    }

    // MARK: - Exploratory (expected to pass)

    @Test("undo of a saved cascade delete, saved, restores team and players with both sides")
    func undoSavedCascadeDelete() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            for name in ["A", "B"] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(name, forKey: "lastName")
                player.setValue(team, forKey: "team")
            }
            try context.save()
            context.delete(team)
            try context.save()
            try context.undo()
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 2)
            let players = try context.fetch(FetchRequest(entityName: "Player"))
            #expect(players.count == 2)
            #expect(players.allSatisfy { ($0.value(forKey: "team") as? ManagedObject)?.objectID == teamID })
        }
    }

    @Test("many-to-many: add, save, undo, save keeps both sides in sync after reopening")
    func manyToManyUndo() async throws {
        let dir = try TemporaryDirectory()
        let model = try manyToManyModel()
        let coordinator = try openCoordinator(dir, model: model)
        let (studentID, courseID) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let student = try context.insertNewObject(forEntityName: "Student")
            let course = try context.insertNewObject(forEntityName: "Course")
            let other = try context.insertNewObject(forEntityName: "Course")
            try context.save()
            student.mutableSetValue(forKey: "courses").add(course)
            student.mutableSetValue(forKey: "courses").add(other)
            try context.save()
            course.mutableSetValue(forKey: "students").remove(student)
            try context.save()
            try context.undo()
            try context.save()
            #expect((course.value(forKey: "students") as? Set<ManagedObject>)?.contains(student) == true)
            return (student.objectID, course.objectID)
        }
        try await privateContext(openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            let student = try context.existingObject(with: studentID)
            let course = try context.existingObject(with: courseID)
            #expect((student.value(forKey: "courses") as? Set<ManagedObject>)?.count == 2)
            #expect((course.value(forKey: "students") as? Set<ManagedObject>)?.contains(student) == true)
        }
    }
}
