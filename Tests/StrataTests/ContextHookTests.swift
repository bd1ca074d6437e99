import Foundation
import Strata
import StrataTestSupport
import Testing

/// An author that starts with a draft book: `awakeFromInsert(in:)` inserts a related object.
final class DraftingAuthor: ManagedObject {
    override func awakeFromInsert(in context: isolated ManagedObjectContext) {
        super.awakeFromInsert(in: context)
        guard let draft = try? context.insertNewObject(forEntityName: "Book") else { return }
        draft.setValue("Draft", forKey: "title")
        draft.setValue(self, forKey: "author")
    }
}

/// A book that deletes its loans before it goes (its `loans` rule is deny), and that counts
/// its author's books when it is saved (`willSave(in:)` fetching).
final class LendingBook: ManagedObject {
    var countsSeen: [Int] = []
    var plainHooks = 0

    override func prepareForDeletion(in context: isolated ManagedObjectContext) {
        super.prepareForDeletion(in: context)
        for loan in (value(forKey: "loans") as? Set<ManagedObject>) ?? [] { context.delete(loan) }
    }

    override func willSave(in context: isolated ManagedObjectContext) {
        super.willSave(in: context)
        guard !isDeleted, let author = value(forKey: "author") as? ManagedObject else { return }
        if let count = try? context.count(for: FetchRequest(entityName: "Book", predicate: try FormatPredicate(format: "author == %@", author))) {
            countsSeen.append(count)
        }
    }

    // The plain hooks still run: the isolated variants call them through super.
    override func willSave() { plainHooks += 1 }
    override func prepareForDeletion() { plainHooks += 100 }
}

@Suite("Lifecycle hooks that use their context (awakeFromInsert(in:), prepareForDeletion(in:), willSave(in:))")
struct ContextHookTests {
    @Test("awakeFromInsert(in:) inserts a related object; one undo removes both, redo brings both back; the save keeps both")
    func awakeInserts() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try PortModels.library, classes: [(DraftingAuthor.self, "Author")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let author = try context.insertNewObject(forEntityName: "Author")
            author.setValue("New", forKey: "name")
            #expect((author.value(forKey: "books") as? [ManagedObject])?.count == 1)
            #expect(context.insertedObjects.count == 2)
            context.processPendingChanges()
            try context.undo()
            #expect(context.insertedObjects.isEmpty)
            try context.redo()
            #expect(context.insertedObjects.count == 2)
            try context.save()
            #expect(try context.count(for: try FetchRequest(entityName: "Book", format: "author.name == 'New' AND title == 'Draft'")) == 1)
        }
    }

    @Test("prepareForDeletion(in:) deletes the loans a deny rule guards, directly and under a cascade; willSave(in:) fetches; the plain hooks run too")
    func deletionAndSaveHooks() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try PortModels.library, classes: [(LendingBook.self, "Book")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let author = try context.insertNewObject(forEntityName: "Author")
            author.setValue("A", forKey: "name")
            var books: [LendingBook] = []
            var loans: [ManagedObject] = []
            for index in 0..<3 {
                let book = try #require(try context.insertNewObject(forEntityName: "Book") as? LendingBook)
                book.setValue("B\(index)", forKey: "title")
                book.setValue(author, forKey: "author")
                let loan = try context.insertNewObject(forEntityName: "Loan")
                loan.setValue(book, forKey: "book")
                books.append(book)
                loans.append(loan)
            }
            try context.save()
            #expect(books.map(\.countsSeen) == [[3], [3], [3]], "willSave(in:) counted the author's books")
            #expect(books.map(\.plainHooks) == [1, 1, 1])

            // Deleting one book: its hook deletes its loan, so the deny rule passes.
            context.delete(books[0])
            #expect(loans[0].isDeleted)
            #expect(books[0].plainHooks == 101)
            // The hook's delete is in the same undo group as the delete that ran it.
            context.processPendingChanges()
            try context.undo()
            #expect(!books[0].isDeleted && !loans[0].isDeleted)
            try context.redo()
            #expect(books[0].isDeleted && loans[0].isDeleted)
            try context.save()

            // Deleting the author cascades to the other books; each one's hook runs.
            context.delete(author)
            #expect(books[1].isDeleted && books[2].isDeleted)
            #expect(loans[1].isDeleted && loans[2].isDeleted)
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Loan")) == 0)
            #expect(try context.count(for: FetchRequest(entityName: "Book")) == 0)
        }
    }

    @Test("a child context's delete: the hook deletes the loan in the child, the parent applies both, and its save passes the deny rule")
    func childPushRunsParentHook() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try PortModels.library, classes: [(LendingBook.self, "Book")])
        let parent = privateContext(coordinator, name: "parent")
        let bookID = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let book = try context.insertNewObject(forEntityName: "Book")
            book.setValue("B", forKey: "title")
            let loan = try context.insertNewObject(forEntityName: "Loan")
            loan.setValue(book, forKey: "book")
            try context.save()
            return book.objectID
        }
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let book = try context.existingObject(with: bookID)
            let loans = (book.value(forKey: "loans") as? Set<ManagedObject>) ?? []
            context.delete(book)
            #expect(loans.count == 1 && loans.allSatisfy(\.isDeleted))
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Book")) == 0)
            #expect(try context.count(for: FetchRequest(entityName: "Loan")) == 0)
        }
    }
}
