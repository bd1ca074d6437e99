import Foundation
import Strata
import StrataTestSupport
import Testing

/// A Core Data app's usual model changes, through a coordinator: adding a mandatory
/// attribute with a default, widening a type; the objects saved before read the new values
/// and save again (spec 0004 §4.4).
@Suite("Contexts: a later model version's defaults and conversions")
struct ValueMigrationContextTests {
    static func model(priority: AttributeDescription, extra: [AttributeDescription] = []) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Task") {
                Attribute("title", .string, default: "").required()
                priority
                for attribute in extra { attribute }
            }
        }
    }

    @Test("objects saved before a version that adds a mandatory attribute with a default and widens a type: fetched by the new values, read typed, saved again; a version whose conversion loses values is refused and the store opens as before")
    func addAndWiden() async throws {
        let dir = try TemporaryDirectory()
        let v1 = try Self.model(priority: Attribute("priority", .int16))
        var coordinator = try openCoordinator(dir, model: v1)
        let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let first = try context.insertNewObject(forEntityName: "Task")
            first.setValue("Write spec", forKey: "title")
            first.setValue(Int16(5), forKey: "priority")
            let second = try context.insertNewObject(forEntityName: "Task")
            second.setValue("Test", forKey: "title")
            try context.save()
            return [first.objectID, second.objectID]
        }

        let v2 = try Self.model(
            priority: Attribute("priority", .int64, default: 3).required(), extra: [Attribute("done", .boolean, default: false).required()])
        coordinator = try openCoordinator(dir, model: v2)
        let migration = try #require(try coordinator.history(HistoryRequest()).last)
        #expect(migration.kind == .migration)
        #expect(migration.changes.map(\.changedObjectID) == ids)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let first = try context.existingObject(with: ids[0])
            let second = try context.existingObject(with: ids[1])
            #expect(first.value(forKey: "priority") as? Int64 == 5, "int16 5 converted to int64")
            #expect(second.value(forKey: "priority") as? Int64 == 3, "nil in a now-mandatory attribute: its default")
            #expect(first.value(forKey: "done") as? Bool == false, "an added mandatory attribute: its default")
            var request = try FetchRequest(entityName: "Task", format: "done == NO AND priority >= 3")
            request.sortDescriptors = [FetchSortDescriptor(key: "priority")]
            #expect(try context.fetch(request).map(\.objectID) == [ids[1], ids[0]])
            second.setValue("Test more", forKey: "title")
            first.setValue(Int64(70_000), forKey: "priority")
            try context.save()
        }

        let v3 = try Self.model(
            priority: Attribute("priority", .int16, default: 3).required(), extra: [Attribute("done", .boolean, default: false).required()])
        #expect {
            _ = try openCoordinator(dir, model: v3)
        } throws: { error in
            "\(error)".contains("Task/p1 has Task.priority = 70000 (int64), which doesn't convert to int16 without loss")
        }
        coordinator = try openCoordinator(dir, model: v2)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: ids[0]).value(forKey: "priority") as? Int64 == 70_000)
            #expect(try context.existingObject(with: ids[1]).value(forKey: "title") as? String == "Test more")
        }
    }
}

extension ValueMigrationContextTests {
    @Test("persisted undo across model versions: a group saved before a rename, a type change and a removal undoes and redoes under the new names and types, after a restart")
    func persistedUndoAcrossVersions() async throws {
        let dir = try TemporaryDirectory()
        let v1 = try ManagedObjectModel {
            Entity("Task") { Attribute("title", .string); Attribute("priority", .int16); Attribute("scratch", .string) }
        }
        var coordinator = try openCoordinator(dir, model: v1)
        let id = try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let task = try context.insertNewObject(forEntityName: "Task")
            task.setValue("A", forKey: "title")
            task.setValue(Int16(3), forKey: "priority")
            task.setValue("q", forKey: "scratch")
            try context.save()
            task.setValue("B", forKey: "title")
            task.setValue(Int16(5), forKey: "priority")
            task.setValue("r", forKey: "scratch")
            try context.save()
            return task.objectID
        }
        let v2 = try ManagedObjectModel {
            Entity("Task") { Attribute("heading", .string).renamed(from: "title"); Attribute("priority", .int64) }
        }
        coordinator = try openCoordinatorRemoving(dir, model: v2)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let task = try context.existingObject(with: id)
            #expect(task.value(forKey: "heading") as? String == "B")
            let canUndo = context.canUndo
            #expect(canUndo)
            try context.undo()
            #expect(task.value(forKey: "heading") as? String == "A", "the renamed attribute is undone under its new name")
            #expect(task.value(forKey: "priority") as? Int64 == 3, "the old value converted to the new type (no conflict with the converted 5)")
            try context.save()
            try context.redo()
            #expect(task.value(forKey: "heading") as? String == "B")
            #expect(task.value(forKey: "priority") as? Int64 == 5)
            try context.save()
            try context.undo()
            try context.save()
        }
        coordinator = try openCoordinator(dir, model: v2)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let task = try context.existingObject(with: id)
            #expect(task.value(forKey: "heading") as? String == "A")
            #expect(task.value(forKey: "priority") as? Int64 == 3)
            let canRedo = context.canRedo
            #expect(canRedo, "the redo stack is read back under the new names too")
            try context.redo()
            #expect(task.value(forKey: "heading") as? String == "B")
        }
    }
}

extension ValueMigrationContextTests {
    @Test("an entity renamed: its objects are found under the new name with the same primary keys, fetched and edited; a group saved before undoes on them; the old URI no longer resolves")
    func entityRenamed() async throws {
        let dir = try TemporaryDirectory()
        let v1 = try ManagedObjectModel { Entity("Player") { Attribute("name", .string) } }
        var coordinator = try openCoordinator(dir, model: v1)
        let old = try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ann", forKey: "name")
            try context.save()
            player.setValue("Anna", forKey: "name")
            try context.save()
            return player.objectID
        }
        let oldURI = old.uriRepresentation()
        let v2 = try ManagedObjectModel { Entity("Athlete") { Attribute("name", .string) }.renamed(from: "Player") }
        coordinator = try openCoordinator(dir, model: v2)
        #expect(coordinator.managedObjectID(forURIRepresentation: oldURI) == nil, "as in Core Data, the URI names the old entity")
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let athletes = try context.fetch(FetchRequest(entityName: "Athlete"))
            #expect(athletes.map { $0.value(forKey: "name") as? String } == ["Anna"])
            #expect(athletes.first?.objectID.uriRepresentation().absoluteString.hasSuffix("/Athlete/p1") == true)
            try context.undo()
            #expect(athletes.first?.value(forKey: "name") as? String == "Ann", "the group saved on Player/p1 undoes on Athlete/p1")
            try context.save()
        }
        coordinator = try openCoordinator(dir, model: v2)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.fetch(FetchRequest(entityName: "Athlete")).map { $0.value(forKey: "name") as? String } == ["Ann"])
        }
    }
}

extension ValueMigrationContextTests {
    @Test("shouldMigrateStoreAutomatically or shouldInferMappingModelAutomatically off: a store written with another model is refused with 134100 and left as it was; the same model loads; on, it migrates; a migration that can't be done is 134110")
    func migrationOptions() throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("store")
        let v1 = try Self.model(priority: Attribute("priority", .int16))
        let v2 = try Self.model(priority: Attribute("priority", .int64, default: 3).required())
        func container(_ model: ManagedObjectModel, migrate: Bool = true, infer: Bool = true) -> PersistentContainer {
            let container = PersistentContainer(name: "Tasks", managedObjectModel: model)
            let description = PersistentStoreDescription(url: url)
            description.shouldMigrateStoreAutomatically = migrate
            description.shouldInferMappingModelAutomatically = infer
            container.persistentStoreDescriptions = [description]
            return container
        }
        do {
            let first = container(v1)
            try first.loadPersistentStores()
            try first.viewContext.performAndWait { context in
                let task = try context.insertNewObject(forEntityName: "Task")
                task.setValue(Int16(70), forKey: "priority")
                try context.save()
            }
        }
        for (migrate, infer) in [(false, true), (true, false)] {
            #expect {
                try container(v2, migrate: migrate, infer: infer).loadPersistentStores()
            } throws: { error in
                guard case PersistentStoreError.incompatibleModel = error else { return false }
                return (error as NSError).code == 134100 && "\(error)".contains("written with model version 1")
            }
        }
        let same = container(v1, migrate: false, infer: false)
        try same.loadPersistentStores()
        let stored = try same.persistentStoreCoordinator.history(HistoryRequest())
        #expect(stored.count == 1, "nothing was written by the refused loads")

        let migrating = container(v2)
        try migrating.loadPersistentStores()
        #expect(try migrating.persistentStoreCoordinator.history(HistoryRequest()).last?.kind == .migration)

        let v3 = try Self.model(priority: Attribute("priority", .boolean, default: false).required())
        #expect {
            try container(v3).loadPersistentStores()
        } throws: { error in
            guard case PersistentStoreError.migrationFailed = error else { return false }
            return (error as NSError).code == 134110 && "\(error)".contains("Task/p1 has Task.priority = 70 (int64), which doesn't convert to boolean without loss")
        }
    }
}
