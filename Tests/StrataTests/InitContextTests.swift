import Foundation
import Strata
import StrataTestSupport
import Testing

/// `Run(context: context)`, Core Data's usual way to insert (spec 0006 §23.7).
@Suite("Contexts: inserting through a class's init(context:)")
struct InitContextTests {
    @Test("seed 001's Run inserted with Run(context:) — not registered: the entity of its name, then registered, so a fetch in another context returns Run; awakeFromInsert sets the date, the default holds, undo takes the insert back, save and reopen")
    func runByClassName() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.run)
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let undone = try Run(context: context)
            #expect(context.insertedObjects.contains(undone))
            context.processPendingChanges()
            try context.undo()
            #expect(context.insertedObjects.isEmpty, "the insert is in the undo journal")
            let run = try Run(context: context)
            #expect(run.entity.name == "Run")
            #expect(run.date != nil, "awakeFromInsert ran")
            #expect(run.value(forKey: "processID") as? Int32 == -1, "the default is set")
            run.processID = 7
            try context.save()
            return run.objectID
        }
        let fetched = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Run")).map { ($0.objectID, $0 is Run, ($0 as? Run)?.processID) }
        }
        #expect(fetched.count == 1)
        #expect(fetched.first?.0 == id && fetched.first?.1 == true && fetched.first?.2 == 7, "registered by init(context:): fetches make Run")
        let typed = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = Run.fetchRequest()
            request.predicate = try FormatPredicate(format: "processID > %d", 0)
            return try context.fetch(request, as: Run.self).map(\.processID)
        }
        #expect(Run.fetchRequest().entityName == "Run")
        #expect(typed == [7], "Run.fetchRequest() with a predicate, fetched typed")
    }

    @Test("init(entityName:context:) for a class registered for several entities or none; errors name the class and what to do; an abstract entity is refused")
    func namedEntityAndErrors() async throws {
        final class Note: ManagedObject {}
        let model = try ManagedObjectModel {
            Entity("Item", abstract: true) { Attribute("title", .string) }
            Entity("Book", parent: "Item") {}
            Entity("Film", parent: "Item") {}
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect {
                _ = try Note(context: context)
            } throws: { error in
                "\(error)".contains("Note is registered for no entity and the model has no entity Note")
            }
            let film = try Note(entityName: "Film", context: context)
            #expect(film.entity.name == "Film" && context.insertedObjects.contains(film))
            #expect(throws: ContextError.self) { _ = try Note(entityName: "Item", context: context) }
            #expect(throws: ContextError.self) { _ = try Note(entityName: "Song", context: context) }
            coordinator.register(Note.self, forEntityName: "Book")
            coordinator.register(Note.self, forEntityName: "Film")
            #expect {
                _ = try Note(context: context)
            } throws: { error in
                "\(error)".contains("Note is registered for several entities (Book, Film)")
            }
            try context.save()
        }
    }
}
