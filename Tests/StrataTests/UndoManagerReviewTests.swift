import Foundation
import Strata
import StrataTestSupport
import Testing

// Review of the undo journal against Foundation's `UndoManager` as Core Data uses it
// (session 26): grouping, levels, action names, `canUndo`/`canRedo`, registration counts, and
// undo of relationship graphs. Each `defect` test failed on the code before its fix; the
// others pin behaviour found to match.

/// Shelf -(ordered, cascade)-> Book; Book <-> Tag many-to-many (nullify); Reader -> Book
/// (favourite, nullify both ways); Book has a transient note.
private func shelfModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Shelf") {
            Attribute("name", .string)
            Relationship("books", to: "Book", inverse: "shelf", toMany: true, ordered: true, deleteRule: .cascade)
        }
        Entity("Book") {
            Attribute("title", .string)
            Attribute("note", .string).transient()
            Relationship("shelf", to: "Shelf", inverse: "books")
            Relationship("tags", to: "Tag", inverse: "books", toMany: true)
            Relationship("fans", to: "Reader", inverse: "favourite", toMany: true)
        }
        Entity("Tag") {
            Attribute("name", .string)
            Relationship("books", to: "Book", inverse: "tags", toMany: true)
        }
        Entity("Reader") {
            Attribute("name", .string)
            Relationship("favourite", to: "Book", inverse: "fans")
        }
    }
}

private func named(_ context: isolated ManagedObjectContext, _ entity: String, _ key: String, _ value: String) throws -> ManagedObject {
    try #require(try context.fetch(FetchRequest(entityName: entity, predicate: try FormatPredicate(format: "\(key) == %@", value))).first)
}

private func titles(_ shelf: ManagedObject) -> [String] {
    (shelf.value(forKey: "books") as? [ManagedObject] ?? []).map { $0.value(forKey: "title") as? String ?? "?" }
}

private func names(_ objects: Any?, _ key: String = "name") -> [String] {
    ((objects as? Set<ManagedObject>) ?? []).map { $0.value(forKey: key) as? String ?? "?" }.sorted()
}

/// A saved shelf "S" with books b1, b2, b3 (in that order); b2 tagged "t1" and "t2"; reader
/// "r" whose favourite is b2.
private func shelfStore(_ dir: TemporaryDirectory) async throws -> PersistentStoreCoordinator {
    let coordinator = try openCoordinator(dir, model: try shelfModel())
    try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        let shelf = try context.insertNewObject(forEntityName: "Shelf")
        shelf.setValue("S", forKey: "name")
        var books: [ManagedObject] = []
        for title in ["b1", "b2", "b3"] {
            let book = try context.insertNewObject(forEntityName: "Book")
            book.setValue(title, forKey: "title")
            book.setValue(shelf, forKey: "shelf")
            books.append(book)
        }
        for name in ["t1", "t2"] {
            let tag = try context.insertNewObject(forEntityName: "Tag")
            tag.setValue(name, forKey: "name")
            books[1].mutableSetValue(forKey: "tags").add(tag)
        }
        let reader = try context.insertNewObject(forEntityName: "Reader")
        reader.setValue("r", forKey: "name")
        reader.setValue(books[1], forKey: "favourite")
        try context.save()
    }
    return coordinator
}

@Suite("Contexts: the undo journal as UndoManager", .serialized)
struct UndoManagerReviewTests {
    // MARK: - levelsOfUndo

    /// `UndoManager.levelsOfUndo`: "When ending an undo group results in the number of groups
    /// exceeding this limit, the manager drops the oldest groups from the stack" — a redo ends
    /// a group on the undo stack like any other.
    @Test("defect: a redo that pushes the undo stack past levelsOfUndo drops the oldest group, as closing a group does")
    func redoRespectsLevelsOfUndo() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            for name in ["A", "B", "C"] {
                shelf.setValue(name, forKey: "name")
                context.processPendingChanges()
            }
            for _ in 0..<3 { try context.undo() }
            #expect(shelf.value(forKey: "name") as? String == "S")
            context.levelsOfUndo = 1
            for _ in 0..<3 { try context.redo() }
            #expect(shelf.value(forKey: "name") as? String == "C")
            try context.undo()
            #expect(shelf.value(forKey: "name") as? String == "B")
            #expect(context.canUndo == false, "one level kept: the groups setting A and B were dropped")
            try context.undo()  // nothing left: changes nothing
            #expect(shelf.value(forKey: "name") as? String == "B")
        }
    }

    @Test("levelsOfUndo: oldest dropped, lowered while full trims at once, 0 is unbounded, negative is 0")
    func levelsOfUndoTrimming() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            context.levelsOfUndo = 3
            for name in ["A", "B", "C", "D", "E"] {
                context.setActionName("to \(name)")
                shelf.setValue(name, forKey: "name")
                context.processPendingChanges()
            }
            #expect(context.undoActionName == "to E")
            context.levelsOfUndo = 2  // trimmed at once: "to D", "to E" remain
            try context.undo()
            try context.undo()
            #expect(shelf.value(forKey: "name") as? String == "C")
            #expect(context.canUndo == false)
            #expect(context.redoActionName == "to D")
            context.levelsOfUndo = -4
            #expect(context.levelsOfUndo == 0)
            try context.redo()
            try context.redo()
            for name in ["F", "G", "H", "I"] {
                shelf.setValue(name, forKey: "name")
                context.processPendingChanges()
            }
            var undone = 0
            while context.canUndo {
                try context.undo()
                undone += 1
            }
            #expect(undone == 6, "unbounded: every group since the trim")
            #expect(shelf.value(forKey: "name") as? String == "C")
        }
    }

    // MARK: - canUndo and undoActionName against what undo() does

    @Test("defect: an open group whose changes net out to nothing is not something to undo: canUndo and undoActionName describe what undo() will undo")
    func netNothingOpenGroup() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            shelf.setValue("X", forKey: "name")
            shelf.setValue("S", forKey: "name")  // back: the open group nets out
            #expect(context.canUndo == false, "undo() would do nothing")
            try context.undo()
            #expect(context.canUndo == false)

            context.setActionName("Rename")
            shelf.setValue("A", forKey: "name")
            context.processPendingChanges()
            context.setActionName("Flip")
            shelf.setValue("B", forKey: "name")
            shelf.setValue("A", forKey: "name")
            #expect(context.canUndo == true)
            #expect(context.undoActionName == "Rename", "undo() undoes the rename: the open group vanishes")
            try context.undo()
            #expect(shelf.value(forKey: "name") as? String == "S")
            #expect(context.redoActionName == "Rename")
            // An open group with a real change is the one undo() undoes, under its name.
            context.setActionName("Retitle")
            shelf.setValue("Z", forKey: "name")
            #expect(context.undoActionName == "Retitle")
            #expect(context.canUndo == true)
        }
    }

    @Test("canUndo/canRedo after each operation: change, close, undo, redo, save, rollback, reset, refresh, merge, removeAllUndoActions")
    func canUndoAfterEachOperation() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        let other = privateContext(coordinator)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.canUndo == false && context.canRedo == false)
            let shelf = try named(context, "Shelf", "name", "S")
            shelf.setValue("A", forKey: "name")
            #expect(context.canUndo == true && context.canRedo == false, "the open group")
            context.processPendingChanges()
            #expect(context.canUndo == true && context.canRedo == false)
            try context.undo()
            #expect(context.canUndo == false && context.canRedo == true)
            try context.redo()
            #expect(context.canUndo == true && context.canRedo == false)
            try context.save()
            #expect(context.canUndo == true && context.canRedo == false, "a save keeps the stacks")
            try context.undo()
            #expect(context.canUndo == false && context.canRedo == true)
            try context.save()
            #expect(context.canUndo == false && context.canRedo == true, "saving an undo keeps the redo")
            try context.redo()
            #expect(shelf.value(forKey: "name") as? String == "A")
            shelf.setValue("B", forKey: "name")
            context.processPendingChanges()
            context.rollback()
            #expect(context.canUndo == false && context.canRedo == false, "rollback clears the stacks")
            #expect(shelf.value(forKey: "name") as? String == "S")
            shelf.setValue("C", forKey: "name")
            context.reset()
            #expect(context.canUndo == false && context.canRedo == false, "reset clears the stacks")
            let again = try named(context, "Shelf", "name", "S")
            again.setValue("D", forKey: "name")
            context.processPendingChanges()
            context.refresh(again, mergeChanges: true)
            #expect(context.canUndo == true, "refresh keeping the changes keeps their group")
            context.refresh(again, mergeChanges: false)
            #expect(context.canUndo == false, "refresh dropping the object's only changes drops their group")
            #expect(context.hasChanges == false)
            let book = try named(context, "Book", "title", "b1")
            book.setValue("b1!", forKey: "title")
            context.processPendingChanges()
        }
        let otherSave = try await other.perform { (context: isolated ManagedObjectContext) throws -> ContextDidSave? in
            let tag = try named(context, "Tag", "name", "t1")
            tag.setValue("t1!", forKey: "name")
            var captured: ContextDidSave?
            let token = context.addObserver { change in
                if case .didSave(let save) = change.notification { captured = save }
            }
            try context.save()
            context.removeObserver(token)
            return captured
        }
        let save = try #require(otherSave)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.mergeChanges(fromContextDidSave: save)
            #expect(context.canUndo == true && context.canRedo == false, "a merge neither records nor clears")
            #expect(try named(context, "Tag", "name", "t1!").value(forKey: "name") as? String == "t1!")
            try context.undo()
            #expect(try named(context, "Book", "title", "b1").value(forKey: "title") as? String == "b1")
            #expect(context.canRedo == true)
            context.removeAllUndoActions()
            #expect(context.canUndo == false && context.canRedo == false)
        }
    }

    // MARK: - Redo cleared by a new change, not by a fetch

    @Test("undo, then a different change: the redo is gone; a fetch keeps it; a transient change (undoable, as in Core Data) clears it")
    func redoClearedByNewChange() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let book = try named(context, "Book", "title", "b1")
            book.setValue("one", forKey: "title")
            context.processPendingChanges()
            try context.undo()
            _ = try context.fetch(FetchRequest(entityName: "Book"))
            context.processPendingChanges()
            #expect(context.canRedo == true, "a fetch records nothing")
            book.setValue("same", forKey: "note")
            context.processPendingChanges()
            #expect(context.canRedo == false, "the transient change is a group of its own")
            try context.undo()
            #expect(book.value(forKey: "note") == nil)
            try context.redo()
            #expect(book.value(forKey: "note") as? String == "same")
            try context.undo()
            book.setValue("two", forKey: "title")
            context.processPendingChanges()
            #expect(context.canRedo == false)
            try context.redo()  // nothing to redo: changes nothing
            #expect(book.value(forKey: "title") as? String == "two")
            #expect(book.value(forKey: "note") == nil)
        }
    }

    // MARK: - Registration counts

    @Test("defect: an unbalanced enableUndoRegistration() changes nothing and the next save says so (UndoManager raises)")
    func unbalancedEnable() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            context.disableUndoRegistration()
            context.disableUndoRegistration()
            context.enableUndoRegistration()
            shelf.setValue("quiet", forKey: "name")
            context.processPendingChanges()
            #expect(context.canUndo == false, "still disabled: two disables, one enable")
            context.enableUndoRegistration()
            context.enableUndoRegistration()  // unbalanced
            context.disableUndoRegistration()
            shelf.setValue("unheard", forKey: "name")
            context.processPendingChanges()
            #expect(context.canUndo == false, "the extra enable didn't count ahead: one disable disables")
            context.enableUndoRegistration()
            shelf.setValue("heard", forKey: "name")
            context.processPendingChanges()
            #expect(context.canUndo == true)
            do {
                try context.save()
                Issue.record("expected the unbalanced enable to be reported")
            } catch ContextError.invalidArgument(let message) {
                #expect(message.contains("enableUndoRegistration()"), "\(message)")
            }
            #expect(context.hasChanges == true, "nothing written")
            try context.save()  // reported once
            // removeAllUndoActions() re-enables registration: an enable after it is unbalanced.
            context.disableUndoRegistration()
            context.removeAllUndoActions()
            context.enableUndoRegistration()
            shelf.setValue("after", forKey: "name")
            #expect(throws: ContextError.self) { try context.save() }
            // An unbalanced endUndoGrouping() is still ignored: rollback() ends open groups, and an
            // app's end after one is not an error here.
            context.endUndoGrouping()
            try context.save()
            #expect(shelf.value(forKey: "name") as? String == "after")
        }
    }

    @Test("nested grouping: one group for the outermost pair, its name; processPendingChanges inside does nothing; undo inside closes what was recorded")
    func nestedGrouping() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            let book = try named(context, "Book", "title", "b1")
            context.beginUndoGrouping()
            context.setActionName("Outer")
            shelf.setValue("A", forKey: "name")
            context.beginUndoGrouping()
            book.setValue("x", forKey: "title")
            context.processPendingChanges()
            context.endUndoGrouping()
            #expect(context.undoActionName == "Outer")
            book.setValue("y", forKey: "title")
            context.endUndoGrouping()
            #expect(context.undoActionName == "Outer")
            try context.undo()
            #expect(shelf.value(forKey: "name") as? String == "S")
            #expect(book.value(forKey: "title") as? String == "b1")
            #expect(context.canUndo == false)
            #expect(context.redoActionName == "Outer")
            try context.redo()
            #expect(book.value(forKey: "title") as? String == "y")
            // Undo with a group open: what it recorded so far is undone, the rest is a new
            // group under the same name.
            context.beginUndoGrouping()
            context.setActionName("Edit")
            book.setValue("z", forKey: "title")
            try context.undo()
            #expect(book.value(forKey: "title") as? String == "y")
            shelf.setValue("B", forKey: "name")
            context.endUndoGrouping()
            #expect(context.undoActionName == "Edit")
            #expect(context.canRedo == false, "the new change cleared the redo")
            try context.undo()
            #expect(shelf.value(forKey: "name") as? String == "A")
            #expect(context.undoActionName == "Outer")
        }
    }

    // MARK: - isUndoEnabled is `undoManager != nil`

    /// `context.undoManager = nil`: `context.undo()` and `redo()` are messages to nil, and
    /// there is nothing to undo or redo. Reattaching the manager (`isUndoEnabled = true`)
    /// brings its stacks back.
    @Test("defect: while isUndoEnabled is false (undoManager = nil) there is nothing to undo or redo and undo() does nothing; turned on again, the stacks are back")
    func disabledUndoDoesNothing() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            context.setActionName("Rename")
            shelf.setValue("A", forKey: "name")
            context.processPendingChanges()
            context.setActionName("Again")
            shelf.setValue("B", forKey: "name")
            context.processPendingChanges()
            try context.undo()
            context.isUndoEnabled = false
            #expect(context.canUndo == false && context.canRedo == false)
            #expect(context.undoActionName == nil && context.redoActionName == nil)
            shelf.setValue("C", forKey: "name")
            try context.undo()
            #expect(shelf.value(forKey: "name") as? String == "C", "no undo manager: undo does nothing")
            try context.redo()
            #expect(shelf.value(forKey: "name") as? String == "C", "nor redo")
            context.isUndoEnabled = true
            #expect(context.canUndo == true && context.canRedo == true)
            #expect(context.undoActionName == "Rename" && context.redoActionName == "Again")
            try context.undo()
            #expect(shelf.value(forKey: "name") as? String == "S")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Shelf", predicate: try FormatPredicate(format: "name == 'S'"))) == 1)
        }
    }

    // MARK: - Action names through cycles

    @Test("action names through undo, redo and saves of each")
    func actionNamesThroughCycles() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            context.setActionName("First")
            shelf.setValue("A", forKey: "name")
            context.processPendingChanges()
            context.setActionName("Second")
            shelf.setValue("B", forKey: "name")
            try context.save()
            #expect(context.undoActionName == "Second")
            try context.undo()
            #expect(context.undoActionName == "First" && context.redoActionName == "Second")
            try context.save()
            #expect(context.undoActionName == "First" && context.redoActionName == "Second")
            try context.undo()
            #expect(context.undoActionName == nil && context.redoActionName == "First")
            try context.redo()
            try context.save()
            #expect(context.undoActionName == "First" && context.redoActionName == "Second")
            try context.redo()
            #expect(context.undoActionName == "Second" && context.redoActionName == nil)
            #expect(shelf.value(forKey: "name") as? String == "B")
        }
    }

    // MARK: - Graphs

    @Test("undo of a cascade delete restores the shelf, its books in order, both sides of every relationship, and the nullified reader; redo deletes them again")
    func cascadeDeleteUndo() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            let reader = try named(context, "Reader", "name", "r")
            let t1 = try named(context, "Tag", "name", "t1")
            context.setActionName("Delete Shelf")
            context.delete(shelf)
            context.processPendingChanges()
            #expect(reader.value(forKey: "favourite") == nil)
            #expect(names(t1.value(forKey: "books"), "title") == [])
            try context.undo()
            #expect(shelf.isDeleted == false)
            #expect(titles(shelf) == ["b1", "b2", "b3"])
            let b2 = try #require(reader.value(forKey: "favourite") as? ManagedObject)
            #expect(b2.value(forKey: "title") as? String == "b2")
            #expect((b2.value(forKey: "shelf") as? ManagedObject) === shelf)
            #expect(names(b2.value(forKey: "tags")) == ["t1", "t2"])
            #expect(names(t1.value(forKey: "books"), "title") == ["b2"])
            #expect(names(b2.value(forKey: "fans")) == ["r"])
            #expect(context.hasChanges == false, "back to the saved state")
            try context.redo()
            #expect(shelf.isDeleted && context.deletedObjects.count == 4)
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Book")) == 0)
            #expect(try named(context, "Reader", "name", "r").value(forKey: "favourite") == nil)
            try context.undo()  // a new context: nothing to undo
        }
    }

    @Test("undo of a saved cascade delete re-creates the graph in the store, ordered positions and inverses included")
    func savedCascadeDeleteUndo() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            context.delete(shelf)
            try context.save()
            try context.undo()
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            #expect(titles(shelf) == ["b1", "b2", "b3"])
            let b2 = try named(context, "Book", "title", "b2")
            #expect(names(b2.value(forKey: "tags")) == ["t1", "t2"])
            #expect(names(b2.value(forKey: "fans")) == ["r"])
            #expect(names(try named(context, "Tag", "name", "t2").value(forKey: "books"), "title") == ["b2"])
        }
    }

    @Test("undo of a middle book's removal puts it back at its position; relationship changes across several objects in one group undo together")
    func orderedAndSeveralObjects() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            let b2 = try named(context, "Book", "title", "b2")
            let b3 = try named(context, "Book", "title", "b3")
            let reader = try named(context, "Reader", "name", "r")
            let t1 = try named(context, "Tag", "name", "t1")
            let other = try context.insertNewObject(forEntityName: "Shelf")
            other.setValue("O", forKey: "name")
            context.processPendingChanges()
            // One group: b2 moves shelves, b3 loses t1 (gains it), the reader changes favourite.
            b2.setValue(other, forKey: "shelf")
            b3.mutableSetValue(forKey: "tags").add(t1)
            b2.mutableSetValue(forKey: "tags").remove(t1)
            reader.setValue(b3, forKey: "favourite")
            context.processPendingChanges()
            #expect(titles(shelf) == ["b1", "b3"] && titles(other) == ["b2"])
            try context.undo()
            #expect(titles(shelf) == ["b1", "b2", "b3"] && titles(other) == [])
            #expect(names(t1.value(forKey: "books"), "title") == ["b2"])
            #expect(names(b3.value(forKey: "tags")) == [] && names(b2.value(forKey: "tags")) == ["t1", "t2"])
            #expect((reader.value(forKey: "favourite") as? ManagedObject) === b2)
            #expect(names(b3.value(forKey: "fans")) == [] && names(b2.value(forKey: "fans")) == ["r"])
            try context.redo()
            #expect(titles(shelf) == ["b1", "b3"] && titles(other) == ["b2"])
            #expect(names(t1.value(forKey: "books"), "title") == ["b3"])
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(titles(try named(context, "Shelf", "name", "S")) == ["b1", "b3"])
            #expect(names(try named(context, "Book", "title", "b3").value(forKey: "fans")) == ["r"])
        }
    }

    @Test("undo of a nullify (a deleted book's reader and tags) restores both sides")
    func nullifyUndo() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            let b2 = try named(context, "Book", "title", "b2")
            let reader = try named(context, "Reader", "name", "r")
            let t2 = try named(context, "Tag", "name", "t2")
            context.delete(b2)
            try context.save()
            #expect(titles(shelf) == ["b1", "b3"] && reader.value(forKey: "favourite") == nil)
            try context.undo()
            #expect(titles(shelf) == ["b1", "b2", "b3"])
            let back = try #require(reader.value(forKey: "favourite") as? ManagedObject)
            #expect(back.objectID == b2.objectID && names(back.value(forKey: "tags")) == ["t1", "t2"])
            #expect(names(t2.value(forKey: "books"), "title") == ["b2"])
            try context.save()
        }
    }

    // MARK: - Child contexts and perform blocks

    @Test("undo in a child context, before and after its save pushed into the parent; the parent saves what the child ends with")
    func childContextUndo() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        let parent = privateContext(coordinator)
        let child = childContext(parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            let b1 = try named(context, "Book", "title", "b1")
            context.setActionName("Rename")
            shelf.setValue("A", forKey: "name")
            context.processPendingChanges()
            context.delete(b1)
            context.processPendingChanges()
            try context.undo()  // the delete, unsaved
            #expect(titles(shelf) == ["b1", "b2", "b3"])
            try context.save()  // pushes the rename
            #expect(context.undoActionName == "Rename" && context.canRedo == true)
            try context.undo()  // the pushed rename: the next save pushes its inverse
            #expect(shelf.value(forKey: "name") as? String == "S")
            #expect(context.hasChanges == true)
            try context.redo()
            try context.undo()
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            #expect(titles(shelf) == ["b1", "b2", "b3"])
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Shelf", predicate: try FormatPredicate(format: "name == 'S'"))) == 1)
            #expect(try context.count(for: FetchRequest(entityName: "Book")) == 3)
        }
    }

    @Test("undo() inside a perform block with pending changes undoes them (the open group), not the group below")
    func undoInsidePerform() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await shelfStore(dir)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "S")
            shelf.setValue("A", forKey: "name")
            // The end of a block doesn't close the group (spec 0006 §9.3, §14.1).
            context.processPendingChanges()
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try named(context, "Shelf", "name", "A")
            let book = try context.insertNewObject(forEntityName: "Book")
            book.setValue("new", forKey: "title")
            book.setValue(shelf, forKey: "shelf")
            try context.undo()
            #expect(book.isInserted == false && titles(shelf) == ["b1", "b2", "b3"])
            #expect(shelf.value(forKey: "name") as? String == "A")
            try context.undo()
            #expect(shelf.value(forKey: "name") as? String == "S")
            #expect(context.hasChanges == false)
        }
    }
}
