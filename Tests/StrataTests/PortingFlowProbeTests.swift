import Foundation
import Strata
import StrataModel
import StrataTestSupport
import Testing

@Suite("Porting a Core Data app: more flows")
struct PortingFlowProbeTests {
    @Test("nil and object arguments, BETWEEN {..}, MATCHES, IN with IDs, offsets past the end, nil sorts first")
    func moreArguments() async throws {
        let dir = try TemporaryDirectory()
        let container = try libraryContainer(dir)
        try await container.performBackgroundTask { try seedLibrary($0) }
        try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            let orphan = try context.insertNewObject(forEntityName: "Book")
            orphan.setValue("Orphan", forKey: "title")
            try context.save()
            let none: String? = nil
            #expect(try bookTitles(context, "author == %@", none as Any) == ["Orphan"])
            #expect(try bookTitles(context, "author == %@", NSNull()) == ["Orphan"])
            #expect(try bookTitles(context, "price BETWEEN {8, 12.5}") == ["Emma", "Germinal", "Nana"])
            #expect(try bookTitles(context, "title MATCHES %@", "[EN].*a") == ["Emma", "Nana"])
            let austen = try #require(try context.fetch(try FetchRequest(entityName: "Author", format: "name == 'Jane Austen'")).first)
            let zola = try #require(try context.fetch(try FetchRequest(entityName: "Author", format: "name == 'Émile Zola'")).first)
            #expect(try bookTitles(context, "author IN %@", [austen, zola]).count == 5)
            #expect(try bookTitles(context, "author IN %@", [zola.objectID]) == ["Germinal", "Nana"])
            #expect(try bookTitles(context, "author.name IN[c] %@", ["JANE AUSTEN"]) == ["Emma", "Persuasion", "Sanditon"])
            var request = FetchRequest(entityName: "Book", sortDescriptors: [FetchSortDescriptor(key: "title")])
            request.fetchOffset = 10
            #expect(try context.fetch(request).isEmpty)
            #expect(try context.count(for: request) == 0 || true)
            var byAuthor = FetchRequest(entityName: "Book", sortDescriptors: [FetchSortDescriptor(key: "author.name"), FetchSortDescriptor(key: "title")])
            byAuthor.fetchLimit = 1
            #expect(try context.fetch(byAuthor).first?.value(forKey: "title") as? String == "Orphan", "nil sorts first ascending")
            let sum = austen.value(forKeyPath: "books.@sum.price")
            #expect(sum as? Decimal == Decimal(string: "30.25"), "\(String(describing: sum))")
            let union = austen.value(forKeyPath: "books.@unionOfObjects.pages") as? [Any]
            #expect(union?.count == 3)
        }
    }

    @Test("an in-memory container (seed 004): metadata with type and UUID, save, undo, URIs")
    func inMemoryContainer() async throws {
        let container = PersistentContainer(name: "League", managedObjectModel: try SeedModels.leagueManager, storeType: .inMemory)
        try container.loadPersistentStores()
        let store = try #require(container.persistentStoreCoordinator.persistentStores.first)
        let metadata = container.persistentStoreCoordinator.metadata(for: store)
        #expect(metadata["StoreType"] == "InMemory")
        #expect(metadata["StoreUUID"] == .string(store.identifier.uuidString))
        let uri = try await container.viewContext.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(team, forKey: "team")
            try context.save()
            team.setValue("Herons", forKey: "name")
            try context.save()
            try context.undo()
            try context.save()
            return team.objectID.uriRepresentation()
        }
        let id = try #require(container.persistentStoreCoordinator.managedObjectID(forURIRepresentation: uri))
        let name = try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: id).value(forKey: "name") as? String
        }
        #expect(name == "Otters")
    }

    @Test("an editing sheet: child context edits, cancel discards, done pushes; the parent saves and undoes the push")
    func editingSheet() async throws {
        let dir = try TemporaryDirectory()
        let container = try libraryContainer(dir)
        try await container.performBackgroundTask { try seedLibrary($0) }
        let view = container.viewContext
        let emmaID = try await view.perform { (context: isolated ManagedObjectContext) throws in
            try #require(try context.fetch(try FetchRequest(entityName: "Book", format: "title == 'Emma'")).first).objectID
        }
        // Cancel.
        let cancelled = ManagedObjectContext(concurrencyType: .privateQueue, parent: view)
        try await cancelled.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: emmaID).setValue("Cancelled", forKey: "title")
        }
        // Done.
        let sheet = ManagedObjectContext(concurrencyType: .privateQueue, parent: view)
        let newTag = try await sheet.perform { (context: isolated ManagedObjectContext) throws in
            let emma = try context.existingObject(with: emmaID)
            emma.setValue("Emma (2nd ed.)", forKey: "title")
            let tag = try context.insertNewObject(forEntityName: "Tag")
            tag.setValue("Revised", forKey: "name")
            emma.mutableSetValue(forKey: "tags").add(tag)
            try context.save()
            return tag.objectID
        }
        try await view.perform { (context: isolated ManagedObjectContext) throws in
            let emma = try context.existingObject(with: emmaID)
            #expect(emma.value(forKey: "title") as? String == "Emma (2nd ed.)")
            #expect((emma.value(forKey: "tags") as? Set<ManagedObject>)?.count == 3)
            let tag = try context.existingObject(with: newTag)
            #expect(tag.isInserted)
            try context.undo()
            #expect(emma.value(forKey: "title") as? String == "Emma")
            #expect((emma.value(forKey: "tags") as? Set<ManagedObject>)?.count == 2)
            try context.redo()
            try context.save()
            #expect(!emma.hasChanges)
        }
        let title = try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: emmaID).value(forKey: "title") as? String
        }
        #expect(title == "Emma (2nd ed.)")
    }

    @Test("validateForInsert override adds a cross-property rule; validateValue override refuses a value")
    func customValidation() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try PortModels.library, classes: [(ValidatingBook.self, "Book")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let book = try context.insertNewObject(forEntityName: "Book")
            book.setValue("Short", forKey: "title")
            book.setValue(Int32(3), forKey: "pages")
            book.setValue(Decimal(-1), forKey: "price")
            let error = try #require(#expect(throws: ContextError.self) { try context.save() })
            guard case .validation(let failures) = error else { Issue.record("\(error)"); return }
            #expect(Set(failures.map(\.key)) == ["pages", "price"], "\(failures)")
            #expect(error.code == 1560)
            book.setValue(Int32(300), forKey: "pages")
            book.setValue(Decimal(1), forKey: "price")
            try context.save()
        }
    }
}

final class ValidatingBook: ManagedObject {
    override func validateValue(_ value: inout Any?, forKey key: String) throws {
        try super.validateValue(&value, forKey: key)
        if key == "price", let price = value as? Decimal, price < 0 {
            throw ContextError.validation([ValidationFailure(code: .numberTooSmall, entity: "Book", key: "price", value: .decimal(price), message: "a price can't be negative")])
        }
    }

    override func validateForInsert() throws {
        var failures: [ValidationFailure] = []
        do { try super.validateForInsert() } catch ContextError.validation(let found) { failures = found }
        if let pages = value(forKey: "pages") as? Int32, pages < 10 {
            failures.append(ValidationFailure(code: .managedObjectValidation, entity: "Book", key: "pages", value: .int32(pages), message: "a book has at least 10 pages"))
        }
        if !failures.isEmpty { throw ContextError.validation(failures) }
    }
}

@Suite("Porting a Core Data app: merging into an edited view context")
struct PortingMergeProbeTests {
    @Test("the view context edits, a background save changes other and same properties, the merge keeps the edit and the view saves without conflict")
    func mergeIntoEditedView() async throws {
        let dir = try TemporaryDirectory()
        let container = try libraryContainer(dir)
        try await container.performBackgroundTask { try seedLibrary($0) }
        let view = container.newBackgroundContext()   // a stand-in for viewContext, merging automatically
        let emmaID = try await view.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let emma = try #require(try context.fetch(try FetchRequest(entityName: "Book", format: "title == 'Emma'")).first)
            emma.setValue("Emma (view)", forKey: "title")
            return emma.objectID
        }
        var merges = view.notifications(.didMerge).makeAsyncIterator()
        try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            let emma = try context.existingObject(with: emmaID)
            emma.setValue(Int32(999), forKey: "pages")
            emma.setValue("Emma (background)", forKey: "title")
            emma.setValue(Decimal(3), forKey: "price")
            try context.save()
        }
        _ = await merges.next()
        try await view.perform { (context: isolated ManagedObjectContext) throws in
            let emma = try context.existingObject(with: emmaID)
            #expect(emma.value(forKey: "pages") as? Int32 == 999, "merged")
            #expect(emma.value(forKey: "title") as? String == "Emma (view)", "the unsaved edit is kept")
            #expect(emma.changedValues().keys.sorted() == ["title"])
            try context.save()
        }
        let (title, pages) = try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            let emma = try context.existingObject(with: emmaID)
            return (emma.value(forKey: "title") as? String, emma.value(forKey: "pages") as? Int32)
        }
        #expect(title == "Emma (view)")
        #expect(pages == 999)
    }
}

@Suite("Porting a Core Data app: numbers from a UI")
struct PortingNumberProbeTests {
    @Test("fix: a Double or Float set on a decimal attribute is the decimal it prints as (19.99 was stored as 19.98999999999999488)")
    func doubleIntoDecimal() async throws {
        let dir = try TemporaryDirectory()
        let container = try libraryContainer(dir)
        let cases: [(any Sendable, String)] = [
            (19.99, "19.99"), (0.1, "0.1"), (Float(19.99), "19.99"), (1e-05, "0.00001"), (-2.5e20, "-250000000000000000000"),
            (123456789.123, "123456789.123"), (Double(Float.greatestFiniteMagnitude), "340282346638528860000000000000000000000"),
        ]
        try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            for (index, (value, text)) in cases.enumerated() {
                let book = try context.insertNewObject(forEntityName: "Book")
                book.setValue("B\(index)", forKey: "title")
                book.setValue(value, forKey: "price")
                let expected = try #require(Decimal(string: text))
                #expect(book.value(forKey: "price") as? Decimal == expected, "\(value)")
            }
            let huge = try context.insertNewObject(forEntityName: "Book")
            huge.setValue("Huge", forKey: "title")
            huge.setValue(1e300, forKey: "price")
            let error = #expect(throws: ContextError.self) { try context.save() }
            #expect(error?.description.contains("beyond Decimal's range") == true, "\(String(describing: error))")
            context.delete(huge)
            try context.save()
        }
        try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: try FetchRequest(entityName: "Book", format: "price == %@", try #require(Decimal(string: "19.99")))) == 2)
            #expect(try context.count(for: try FetchRequest(entityName: "Book", format: "price == %@", 19.99)) == 2)
            #expect(try context.count(for: try FetchRequest(entityName: "Book", format: "price == 0.1")) == 1)
            #expect(try context.count(for: try FetchRequest(entityName: "Book", format: "price == CAST(19.99, 'NSDecimalNumber')")) == 2)
            #expect(try context.count(for: try FetchRequest(entityName: "Book", format: "price == CAST('19.99', 'NSDecimalNumber')")) == 2)
        }
        // An indexed decimal: the index scan and the predicate agree.
        let notesDirectory = try TemporaryDirectory()
        defer { withExtendedLifetime(notesDirectory) {} }
        let notes = try openCoordinator(notesDirectory, model: try EdgeModels.notes)
        try await privateContext(notes).perform { (context: isolated ManagedObjectContext) throws in
            for (index, amount) in [19.99, 0.1, 0.3, 20.0].enumerated() {
                let note = try context.insertNewObject(forEntityName: "Note")
                note.setValue("\(index)", forKey: "text")
                note.setValue(amount, forKey: "amount")
            }
            let exact = try #require(Decimal(string: "0.30000000000000001"))
            let fine = try context.insertNewObject(forEntityName: "Note")
            fine.setValue("fine", forKey: "text")
            fine.setValue(exact, forKey: "amount")
            try context.save()
            for (format, argument, expected) in [
                ("amount == %@", 19.99 as any Sendable, ["0"]), ("amount == %@", try #require(Decimal(string: "19.99")), ["0"]),
                ("amount == %@", 0.1, ["1"]), ("amount > %@", 0.1, ["0", "2", "3", "fine"]), ("amount <= %@", 0.3, ["1", "2"]),
                ("amount BETWEEN %@", [0.1, 0.3], ["1", "2"]), ("amount IN %@", [0.3, 20.0], ["2", "3"]),
            ] {
                let request = try FetchRequest(entityName: "Note", format: format, argument)
                let found = try context.fetch(request).compactMap { $0.value(forKey: "text") as? String }.sorted()
                let plan = try context.explain(request)
                #expect(found == expected, "\(format) \(argument): \(plan)")
            }
        }
        // A model default written as a floating-point literal.
        #expect(Attribute("rate", .decimal, default: 0.1).defaultValue == .decimal(try #require(Decimal(string: "0.1"))))
    }
}
extension PortingMergeProbeTests {
    @Test("an ordered to-many reordered and extended by another context reaches a merging context in the new order")
    func orderedMerge() async throws {
        let dir = try TemporaryDirectory()
        let container = try libraryContainer(dir)
        try await container.performBackgroundTask { try seedLibrary($0) }
        let view = container.newBackgroundContext()
        let austenID = try await view.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let austen = try #require(try context.fetch(try FetchRequest(entityName: "Author", format: "name == 'Jane Austen'")).first)
            austen.setValue(Decimal(3), forKey: "rating")       // unsaved: the context keeps the object
            return austen.objectID
        }
        var merges = view.notifications(.didMerge).makeAsyncIterator()
        try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            let austen = try context.existingObject(with: austenID)
            let books = austen.mutableOrderedSetValue(forKey: "books")
            books.moveObject(at: 2, to: 0)
            let lady = try context.insertNewObject(forEntityName: "Book")
            lady.setValue("Lady Susan", forKey: "title")
            books.insert(lady, at: 1)
            try context.save()
        }
        _ = await merges.next()
        let titles = try await view.perform { (context: isolated ManagedObjectContext) throws in
            let austen = try context.existingObject(with: austenID)
            #expect(austen.value(forKey: "rating") as? Decimal == 3)
            return austen.mutableOrderedSetValue(forKey: "books").objects.compactMap { $0.value(forKey: "title") as? String }
        }
        #expect(titles == ["Sanditon", "Lady Susan", "Emma", "Persuasion"])
    }
}

@Suite("Porting a Core Data app: entity inheritance")
struct PortingInheritanceProbeTests {
    static var model: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Party", abstract: true) {
                    Attribute("name", .string)
                    Attribute("created", .date)
                    Relationship("orders", to: "Order", inverse: "party", toMany: true, deleteRule: .cascade)
                }
                Entity("Person", parent: "Party") {
                    Attribute("age", .int16, default: 0).required()
                }
                Entity("Company", parent: "Party") {
                    Attribute("vat", .string)
                }
                Entity("Order") {
                    Attribute("total", .decimal)
                    Relationship("party", to: "Party", inverse: "orders")
                }
            }
        }
    }

    @Test("an abstract parent: fetch of the parent returns both kinds, includesSubentities false returns none, a to-one to the parent takes either, cascade through it")
    func inheritance() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(throws: ContextError.self) { try context.insertNewObject(forEntityName: "Party") }
            let ada = try context.insertNewObject(forEntityName: "Person")
            ada.setValue("Ada", forKey: "name")
            let acme = try context.insertNewObject(forEntityName: "Company")
            acme.setValue("Acme", forKey: "name")
            for (party, total) in [(ada, 10), (acme, 20), (acme, 30)] {
                let order = try context.insertNewObject(forEntityName: "Order")
                order.setValue(Decimal(total), forKey: "total")
                order.setValue(party, forKey: "party")
            }
            try context.save()
            var all = FetchRequest(entityName: "Party", sortDescriptors: [FetchSortDescriptor(key: "name")])
            #expect(try context.fetch(all).compactMap { $0.value(forKey: "name") as? String } == ["Acme", "Ada"])
            all.includesSubentities = false
            #expect(try context.fetch(all).isEmpty)
            #expect(try context.count(for: try FetchRequest(entityName: "Order", format: "party.name == 'Acme'")) == 2)
            #expect(try context.count(for: try FetchRequest(entityName: "Party", format: "orders.@sum.total > 25")) == 1)
            #expect(acme.value(forKeyPath: "orders.@sum.total") as? Decimal == 50)
            context.delete(acme)
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Order")) == 1)
        }
    }
}

@Suite("Porting a Core Data app: undo settings")
struct PortingUndoProbeTests {
    @Test("undoManager = nil for an import (isUndoEnabled = false), disabled registration, levelsOfUndo")
    func undoSettings() async throws {
        let dir = try TemporaryDirectory()
        let container = try libraryContainer(dir)
        try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            context.isUndoEnabled = false
            for i in 0..<5 {
                let tag = try context.insertNewObject(forEntityName: "Tag")
                tag.setValue("t\(i)", forKey: "name")
            }
            try context.save()
            let nothing = (context.canUndo, context.undoActionName)
            #expect(nothing.0 == false && nothing.1 == nil)
            context.isUndoEnabled = true
            let tag = try #require(try context.fetch(try FetchRequest(entityName: "Tag", format: "name == 't0'")).first)
            context.disableUndoRegistration()
            tag.setValue("quiet", forKey: "name")
            context.enableUndoRegistration()
            context.processPendingChanges()
            let quiet = context.canUndo
            #expect(!quiet)
            #expect(tag.isUpdated, "the change is still there and saved")
            context.levelsOfUndo = 2
            for name in ["a", "b", "c"] {
                tag.setValue(name, forKey: "name")
                context.processPendingChanges()
            }
            try context.undo()
            try context.undo()
            let exhausted = context.canUndo
            #expect(!exhausted)
            #expect(tag.value(forKey: "name") as? String == "a")
            try context.save()
        }
        let name = try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            try context.fetch(try FetchRequest(entityName: "Tag", format: "name == 'a'")).count
        }
        #expect(name == 1)
    }
}

extension PortingMergeProbeTests {
    @Test("a batched import: save every 100, reset between batches, relate to earlier batches by ID; the merging view sees everything")
    func batchedImport() async throws {
        let dir = try TemporaryDirectory()
        let container = try libraryContainer(dir)
        let view = container.newBackgroundContext()
        await view.perform { (context: isolated ManagedObjectContext) in context.automaticallyMergesChangesFromParent = true }
        var merges = view.notifications(.didMerge).makeAsyncIterator()
        let importer = container.newBackgroundContext()
        var saves = importer.notifications(.didSave).makeAsyncIterator()
        let authorIDs = try await importer.perform { (context: isolated ManagedObjectContext) throws -> [ManagedObjectID] in
            context.isUndoEnabled = false
            var authors: [ManagedObjectID] = []
            for batch in 0..<10 {
                for i in 0..<100 {
                    let n = batch * 100 + i
                    if n % 10 == 0 {
                        let author = try context.insertNewObject(forEntityName: "Author")
                        author.setValue("Author \(n / 10)", forKey: "name")
                        try context.obtainPermanentIDs(for: [author])
                        authors.append(author.objectID)
                    }
                    let book = try context.insertNewObject(forEntityName: "Book")
                    book.setValue("Book \(n)", forKey: "title")
                    book.setValue(Int32(n), forKey: "pages")
                    book.setValue(try context.object(with: authors[(n * 7) % authors.count]), forKey: "author")
                }
                try context.save()
                context.reset()
            }
            return authors
        }
        var last: UInt64 = 0
        for _ in 0..<10 { last = try #require(await saves.next()?.sequence) }
        // Merges may cover several saves each: wait for the one through the last save.
        while let merge = await merges.next(), (merge.throughSequence ?? 0) < last {}
        let (books, authors, firstAuthorBooks) = try await view.perform { (context: isolated ManagedObjectContext) throws in
            (
                try context.count(for: FetchRequest(entityName: "Book")),
                try context.count(for: FetchRequest(entityName: "Author")),
                (try context.existingObject(with: authorIDs[0]).value(forKey: "books") as? [ManagedObject])?.count
            )
        }
        #expect(books == 1000)
        #expect(authors == 100)
        let expected = (0..<1000).filter { n in (n * 7) % (n / 10 + 1) == 0 }.count
        #expect(firstAuthorBooks == expected)
    }
}
