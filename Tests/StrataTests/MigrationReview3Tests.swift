import Foundation
import Strata
import StrataTestSupport
import Testing

/// Review 27 (helper 1): model-version migration seen through contexts, history and undo.
@Suite("Migration review 3")
struct MigrationReview3Tests {
    static func tasks(_ priority: AttributeDescription, _ extra: [AttributeDescription] = []) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Task") {
                Attribute("title", .string)
                priority
                for attribute in extra { attribute }
            }
        }
    }

    @Test("a context with persisted undo and no name or author (nil matches nil) doesn't find the migration's transactions on its undo stack: undo undoes its own last save, not the migration's fills and conversions")
    func persistedUndoSkipsMigrations() async throws {
        let dir = try TemporaryDirectory()
        var coordinator = try openCoordinator(dir, model: try Self.tasks(Attribute("priority", .int16)))
        let id = try await privateContext(coordinator, persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            let task = try context.insertNewObject(forEntityName: "Task")
            task.setValue("A", forKey: "title")
            task.setValue(Int16(5), forKey: "priority")
            try context.save()
            task.setValue("B", forKey: "title")
            try context.save()
            return task.objectID
        }
        let v2 = try Self.tasks(Attribute("priority", .int64), [Attribute("done", .boolean, default: false).required()])
        coordinator = try openCoordinator(dir, model: v2)
        #expect(try coordinator.history(HistoryRequest()).last?.kind == .migration)
        try await privateContext(coordinator, persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            let task = try context.existingObject(with: id)
            #expect(task.value(forKey: "done") as? Bool == false)
            try context.undo()
            #expect(task.value(forKey: "title") as? String == "A", "the context's own last save is undone")
            #expect(task.value(forKey: "done") as? Bool == false, "the migration's fill isn't undone")
            #expect(task.value(forKey: "priority") as? Int64 == 5)
            try context.save()
            try context.undo()
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let count = try context.count(for: FetchRequest(entityName: "Task"))
            #expect(count == 0, "the second undo undoes the insert")
        }
    }

    @Test("an attribute a version removed, added again by a later one with a default: every object gets the default, those saved before the removal too (before, their nil — the removal's, not the app's — was kept)")
    func removedThenAddedAgainWithDefault() async throws {
        let dir = try TemporaryDirectory()
        let v1 = try ManagedObjectModel { Entity("Task") { Attribute("title", .string); Attribute("note", .string) } }
        var coordinator = try openCoordinator(dir, model: v1)
        let early = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let noted = try context.insertNewObject(forEntityName: "Task")
            noted.setValue("noted", forKey: "title")
            noted.setValue("n", forKey: "note")
            let plain = try context.insertNewObject(forEntityName: "Task")
            plain.setValue("plain", forKey: "title")
            try context.save()
            return [noted.objectID, plain.objectID]
        }
        coordinator = try openCoordinatorRemoving(dir, model: try ManagedObjectModel { Entity("Task") { Attribute("title", .string) } })
        let later = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let task = try context.insertNewObject(forEntityName: "Task")
            task.setValue("later", forKey: "title")
            try context.save()
            return task.objectID
        }
        // (Another attribute too: with only the default added, version 3 would have version
        // 1's hash and shape, and open as version 1 — spec 0004 §4.)
        let v3 = try ManagedObjectModel {
            Entity("Task") { Attribute("title", .string); Attribute("note", .string, default: "none"); Attribute("done", .boolean) }
        }
        coordinator = try openCoordinator(dir, model: v3)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for id in early + [later] {
                let task = try context.existingObject(with: id)
                #expect(task.value(forKey: "note") as? String == "none", "\(id): the attribute is new to the version before, so it takes its default")
            }
            let count = try context.count(for: FetchRequest(entityName: "Task", format: "note == 'none'"))
            #expect(count == 3)
        }
    }

    @Test("renamed back to the first name with the first name as renaming identifier (Core Data's recipe: the identifier of a property renamed before is its canonical name): the values and objects come back, not dropped as removed")
    func renamedBackByCanonicalName() async throws {
        let dir = try TemporaryDirectory()
        let v1 = try ManagedObjectModel {
            Entity("Player") { Attribute("email", .string).indexed(); Attribute("name", .string) }
        }
        var coordinator = try openCoordinator(dir, model: v1)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (email, name) in [("a@x", "Ann"), ("b@x", "Bo")] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(email, forKey: "email")
                player.setValue(name, forKey: "name")
            }
            try context.save()
        }
        // Version 2 renames the entity and the attribute, naming the first names.
        let v2 = try ManagedObjectModel {
            Entity("Athlete") { Attribute("mail", .string).indexed().renamed(from: "email"); Attribute("name", .string) }.renamed(from: "Player")
        }
        coordinator = try openCoordinator(dir, model: v2)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let found = try context.fetch(FetchRequest(entityName: "Athlete", format: "mail == 'b@x'"))
            #expect(found.map { $0.value(forKey: "name") as? String } == ["Bo"])
        }
        // Version 3 goes back to the first names; their renaming identifiers are the
        // canonical names version 2's carry ("Player", "email").
        let v3 = try ManagedObjectModel {
            Entity("Player") { Attribute("email", .string).indexed().renamed(from: "email"); Attribute("name", .string) }.renamed(from: "Player")
        }
        coordinator = try openCoordinator(dir, model: v3)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Player")
            request.sortDescriptors = [FetchSortDescriptor(key: "name")]
            let players = try context.fetch(request)
            #expect(players.map { $0.value(forKey: "name") as? String } == ["Ann", "Bo"], "Athlete's objects move back to Player")
            #expect(players.map { $0.value(forKey: "email") as? String } == ["a@x", "b@x"], "mail's values go back to email")
            let found = try context.fetch(FetchRequest(entityName: "Player", format: "email == 'a@x'"))
            #expect(found.map { $0.value(forKey: "name") as? String } == ["Ann"], "found through the rebuilt index")
        }
    }

    @Test("an attribute renamed back to its first name with that name as renaming identifier (the entity kept): the values come back")
    func attributeRenamedBackByCanonicalName() async throws {
        let dir = try TemporaryDirectory()
        var coordinator = try openCoordinator(dir, model: try ManagedObjectModel { Entity("Player") { Attribute("email", .string) } })
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("a@x", forKey: "email")
            try context.save()
            return player.objectID
        }
        coordinator = try openCoordinator(dir, model: try ManagedObjectModel { Entity("Player") { Attribute("mail", .string).renamed(from: "email") } })
        coordinator = try openCoordinator(dir, model: try ManagedObjectModel { Entity("Player") { Attribute("email", .string).renamed(from: "email") } })
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: id).value(forKey: "email") as? String == "a@x")
        }
    }

    @Test("an entity moved out of a hierarchy whose parent has an index and a uniqueness constraint: the parent's fetches through the index no longer find its objects, and a new parent object may take a name one of them has")
    func movedOutOfHierarchy() async throws {
        let dir = try TemporaryDirectory()
        let v1 = try ManagedObjectModel {
            Entity("Animal") { Attribute("name", .string).indexed(); Unique("name") }
            Entity("Dog", parent: "Animal") { Attribute("breed", .string) }
        }
        var coordinator = try openCoordinator(dir, model: v1)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let dog = try context.insertNewObject(forEntityName: "Dog")
            dog.setValue("Rex", forKey: "name")
            let animal = try context.insertNewObject(forEntityName: "Animal")
            animal.setValue("Generic", forKey: "name")
            try context.save()
        }
        let v2 = try ManagedObjectModel {
            Entity("Animal") { Attribute("name", .string).indexed(); Unique("name") }
            Entity("Dog") { Attribute("name", .string); Attribute("breed", .string) }
        }
        coordinator = try openCoordinator(dir, model: v2)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let rex = try context.fetch(FetchRequest(entityName: "Animal", format: "name == 'Rex'"))
            #expect(rex.isEmpty, "a Dog is no Animal now: \(rex.map(\.objectID))")
            let named = try context.fetch(FetchRequest(entityName: "Animal", format: "name BEGINSWITH 'R' OR name BEGINSWITH 'G'"))
            #expect(named.map { $0.value(forKey: "name") as? String } == ["Generic"])
            #expect(try context.count(for: FetchRequest(entityName: "Dog", format: "name == 'Rex'")) == 1)
            let animal = try context.insertNewObject(forEntityName: "Animal")
            animal.setValue("Rex", forKey: "name")
            try context.save()
        }
    }

    @Test("an entity moved into a hierarchy whose parent has an index and a uniqueness constraint: fetches of the parent through the index find its objects, and the constraint covers them")
    func movedIntoHierarchy() async throws {
        let dir = try TemporaryDirectory()
        let v1 = try ManagedObjectModel {
            Entity("Animal") { Attribute("name", .string).indexed(); Unique("name") }
            Entity("Cat") { Attribute("name", .string); Attribute("lives", .int16) }
        }
        var coordinator = try openCoordinator(dir, model: v1)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let cat = try context.insertNewObject(forEntityName: "Cat")
            cat.setValue("Tom", forKey: "name")
            let animal = try context.insertNewObject(forEntityName: "Animal")
            animal.setValue("Generic", forKey: "name")
            try context.save()
        }
        let v2 = try ManagedObjectModel {
            Entity("Animal") { Attribute("name", .string).indexed(); Unique("name") }
            Entity("Cat", parent: "Animal") { Attribute("lives", .int16) }
        }
        coordinator = try openCoordinator(dir, model: v2)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let tom = try context.fetch(FetchRequest(entityName: "Animal", format: "name == 'Tom'"))
            #expect(tom.map { $0.objectID.entityName } == ["Cat"], "the Cat is an Animal now")
            let animal = try context.insertNewObject(forEntityName: "Animal")
            animal.setValue("Tom", forKey: "name")
            #expect(throws: (any Error).self, "the uniqueness constraint covers the Cat") { try context.save() }
        }
        // A sub-entity new to a version has no objects to add: nothing is rebuilt, nothing written.
        let written = try coordinator.history(HistoryRequest()).count
        let v3 = try ManagedObjectModel {
            Entity("Animal") { Attribute("name", .string).indexed(); Unique("name") }
            Entity("Cat", parent: "Animal") { Attribute("lives", .int16) }
            Entity("Bird", parent: "Animal") { Attribute("wingspan", .double) }
        }
        coordinator = try openCoordinator(dir, model: v3)
        #expect(try coordinator.history(HistoryRequest()).count == written)
    }

    @Test("a version that makes an entity abstract while the store holds objects of that entity itself is refused, naming the entity and the objects; nothing is written and the earlier model still finds them (before, the open went ahead and no context found them)")
    func madeAbstractWithObjects() async throws {
        let dir = try TemporaryDirectory()
        let v1 = try ManagedObjectModel {
            Entity("Animal") { Attribute("name", .string) }
            Entity("Dog", parent: "Animal") { Attribute("breed", .string) }
        }
        var coordinator = try openCoordinator(dir, model: v1)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["Generic", "Other"] {
                let animal = try context.insertNewObject(forEntityName: "Animal")
                animal.setValue(name, forKey: "name")
            }
            let dog = try context.insertNewObject(forEntityName: "Dog")
            dog.setValue("Rex", forKey: "name")
            try context.save()
        }
        let v2 = try ManagedObjectModel {
            Entity("Animal", abstract: true) { Attribute("name", .string) }
            Entity("Dog", parent: "Animal") { Attribute("breed", .string) }
        }
        #expect {
            _ = try openCoordinator(dir, model: v2)
        } throws: { error in
            guard case PersistentStoreError.migrationFailed(_, let reason) = error else { return false }
            return reason.contains("Animal is abstract in it, but the store has 2 objects of Animal itself (Animal/p1, Animal/p2)")
                && reason.contains("Nothing was written")
        }
        coordinator = try openCoordinator(dir, model: v1)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Animal")) == 3)
        }
        // With only sub-entity objects, the entity may become abstract.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for animal in try context.fetch(FetchRequest(entityName: "Animal", format: "name != 'Rex'")) { context.delete(animal) }
            try context.save()
        }
        coordinator = try openCoordinator(dir, model: v2)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let names = try context.fetch(FetchRequest(entityName: "Animal")).map { $0.value(forKey: "name") as? String }
            #expect(names == ["Rex"])
        }
    }

    @Test("an earlier model's app writes after a later one migrated the store, then a writer of the later model commits before its next open: that open still migrates what the earlier one wrote (before, the head was the later version's and the value stayed under the old name, unseen)")
    func earlierWriteBeforeLaterWriterIsMigrated() async throws {
        let dir = try TemporaryDirectory()
        let v2 = try await storeWithEarlierWriteAfterMigration(dir)
        let reopened = try openCoordinator(dir, model: v2)
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Player")
            request.sortDescriptors = [FetchSortDescriptor(key: "contact")]
            let values = try context.fetch(request).map { $0.value(forKey: "contact") as? String }
            #expect(values == ["a", "b", "c"])
        }
        let count = try reopened.history(HistoryRequest()).count
        _ = try openCoordinator(dir, model: v2)
        #expect(try reopened.history(HistoryRequest()).count == count, "migrated once: the next open writes nothing")
    }
}

@Suite("Migration: an earlier model's writes in a replayed copy")
struct EarlierWriteReplayTests {
    @Test("replay --into of a store where an earlier model wrote after the migration and a later writer after it: the copy's next open by the later model migrates the earlier writes too (before, the copy lacked earlierModelWrote and kept 'b' under the old name)")
    func replayedCopyMigratesEarlierWrites() async throws {
        let dir = try TemporaryDirectory()
        let v2 = try await storeWithEarlierWriteAfterMigration(dir)
        // The copy, made by the log as `strata replay --into` makes it, opened by the later model.
        let copy = dir.url.appendingPathComponent("copy").path
        let log = try EventLog(openingExistingAt: dir.url.appendingPathComponent("store").path, readOnly: true)
        _ = try log.replay(through: try log.head, into: copy)
        let reopened = PersistentStoreCoordinator(managedObjectModel: v2)
        try reopened.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: copy))
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Player")
            request.sortDescriptors = [FetchSortDescriptor(key: "contact")]
            #expect(try context.fetch(request).map { $0.value(forKey: "contact") as? String } == ["a", "b", "c"])
        }
    }
}

/// A store where an earlier model's app wrote after a later model migrated it, and the later
/// model's app, open all along, saved after that: players "a" (before the migration, v1), "b"
/// (v1, after it) and "c" (v2). Returns v2, whose `contact` is v1's `email` renamed.
func storeWithEarlierWriteAfterMigration(_ dir: TemporaryDirectory) async throws -> ManagedObjectModel {
    let v1 = try ManagedObjectModel { Entity("Player") { Attribute("email", .string) } }
    let v2 = try ManagedObjectModel { Entity("Player") { Attribute("contact", .string).renamed(from: "email") } }
    var earlier = try openCoordinator(dir, model: v1)
    try await privateContext(earlier).perform { (context: isolated ManagedObjectContext) throws in
        try context.insertNewObject(forEntityName: "Player").setValue("a", forKey: "email")
        try context.save()
    }
    let later = try openCoordinator(dir, model: v2)
    // The app's extension, not updated yet, writes with the earlier model…
    earlier = try openCoordinator(dir, model: v1)
    try await privateContext(earlier).perform { (context: isolated ManagedObjectContext) throws in
        try context.insertNewObject(forEntityName: "Player").setValue("b", forKey: "email")
        try context.save()
    }
    // …and the updated app, open all along, saves after it.
    try await privateContext(later).perform { (context: isolated ManagedObjectContext) throws in
        try context.insertNewObject(forEntityName: "Player").setValue("c", forKey: "contact")
        try context.save()
    }
    return v2
}
