import Foundation
import Strata
import StrataTestSupport
import Testing

/// A book whose title must be unique regardless of case, and that an author can't lose as
/// their last book: rules the model can't state, checked by fetching through the context
/// the validation hooks get. `didSave(in:)` looks itself up by its permanent ID.
final class CatalogBook: ManagedObject {
    var savedAs: [URL] = []
    var plainCalls: [String] = []

    private func checkTitle(in context: isolated ManagedObjectContext) throws {
        let title = value(forKey: "title") as? String ?? ""
        let sameTitle = FetchRequest(entityName: "Book", predicate: try FormatPredicate(format: "title ==[c] %@", title))
        let count = try context.count(for: sameTitle)
        if count > 1 {
            throw ContextError.validation([ValidationFailure(
                code: .managedObjectValidation, entity: "Book", key: "title", value: .string(title),
                message: "\(count) books are titled \(title), regardless of case")])
        }
    }

    override func validateForInsert(in context: isolated ManagedObjectContext) throws {
        try super.validateForInsert(in: context)
        try checkTitle(in: context)
    }

    override func validateForUpdate(in context: isolated ManagedObjectContext) throws {
        try super.validateForUpdate(in: context)
        try checkTitle(in: context)
    }

    override func validateForDelete(in context: isolated ManagedObjectContext) throws {
        try super.validateForDelete(in: context)
        guard let author = committedValues(forKeys: ["author"])["author"] as? ManagedObject else { return }
        // Pending deletes take part in the count: the books the author keeps after the save.
        let kept = try context.count(for: FetchRequest(entityName: "Book", predicate: try FormatPredicate(format: "author == %@", author)))
        if kept == 0 {
            throw ContextError.validation([ValidationFailure(
                code: .managedObjectValidation, entity: "Book", key: "author", value: nil,
                message: "an author keeps at least one book")])
        }
    }

    override func didSave(in context: isolated ManagedObjectContext) {
        super.didSave(in: context)
        if let same = try? context.existingObject(with: objectID), same === self { savedAs.append(objectID.uriRepresentation()) }
    }

    // The plain methods still run: the variants call them through super.
    override func validateForInsert() throws {
        plainCalls.append("insert")
        try super.validateForInsert()
    }
    override func didSave() { plainCalls.append("didSave") }
}

@Suite("Validation hooks and didSave that use their context (validateForInsert/Update/Delete(in:), didSave(in:))")
struct ValidationHookContextTests {
    private func coordinator(_ dir: TemporaryDirectory) throws -> PersistentStoreCoordinator {
        try openCoordinator(dir, model: try PortModels.library, classes: [(CatalogBook.self, "Book")])
    }

    @Test("validateForInsert(in:) and validateForUpdate(in:) fetch to refuse a duplicate title regardless of case; the save writes nothing")
    func insertAndUpdateFetch() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try coordinator(dir)
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let author = try context.insertNewObject(forEntityName: "Author")
            author.setValue("A", forKey: "name")
            let first = try context.insertNewObject(forEntityName: "Book")
            first.setValue("Dune", forKey: "title")
            first.setValue(author, forKey: "author")
            try context.save()
            #expect((first as? CatalogBook)?.plainCalls == ["insert", "didSave"])

            let second = try context.insertNewObject(forEntityName: "Book")
            second.setValue("DUNE", forKey: "title")
            second.setValue(author, forKey: "author")
            var message = ""
            do { try context.save() } catch { message = "\(error)" }
            #expect(message.contains("2 books are titled DUNE, regardless of case"))
            second.setValue("Emma", forKey: "title")
            try context.save()

            // An update to a taken title is refused the same way, then put right.
            second.setValue("dune", forKey: "title")
            message = ""
            do { try context.save() } catch { message = "\(error)" }
            #expect(message.contains("2 books are titled dune"))
            context.rollback()
            let titles = try context.fetch(FetchRequest(entityName: "Book", sortDescriptors: [FetchSortDescriptor(key: "title")]))
                .map { $0.value(forKey: "title") as? String ?? "" }
            #expect(titles == ["Dune", "Emma"])
        }
        // Nothing refused reached the store.
        try privateContext(try self.coordinator(dir)).performAndWait { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: try FetchRequest(entityName: "Book", format: "title ==[c] 'dune'")) == 1)
        }
    }

    @Test("validateForDelete(in:) counts what the save keeps: an author's last book can't go; didSave(in:) sees the permanent ID, through a child context too")
    func deleteAndDidSave() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try coordinator(dir)
        let parent = privateContext(coordinator)
        let authorID = try parent.performAndWait { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            let author = try context.insertNewObject(forEntityName: "Author")
            author.setValue("A", forKey: "name")
            var books: [CatalogBook] = []
            for title in ["One", "Two"] {
                let book = try context.insertNewObject(forEntityName: "Book")
                book.setValue(title, forKey: "title")
                book.setValue(author, forKey: "author")
                if let book = book as? CatalogBook { books.append(book) }
            }
            try context.save()
            #expect(books.count == 2)
            for book in books {
                #expect(book.savedAs == [book.objectID.uriRepresentation()])
                #expect(!book.objectID.isTemporaryID)
            }
            context.delete(books[0])
            try context.save()
            context.delete(books[1])
            var message = ""
            do { try context.save() } catch { message = "\(error)" }
            #expect(message.contains("an author keeps at least one book"))
            context.rollback()
            #expect(try context.count(for: FetchRequest(entityName: "Book")) == 1)
            return author.objectID
        }

        // A child's save runs the hooks with the child context.
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        let childSaved = try child.performAndWait { (child: isolated ManagedObjectContext) throws -> [URL] in
            let book = try child.insertNewObject(forEntityName: "Book")
            book.setValue("Three", forKey: "title")
            book.setValue(try child.existingObject(with: authorID), forKey: "author")
            try child.save()
            return (book as? CatalogBook)?.savedAs ?? []
        }
        #expect(childSaved.count == 1)
        try parent.performAndWait { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Book")) == 2)
        }
    }
}
