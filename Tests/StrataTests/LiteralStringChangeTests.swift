import Foundation
import Strata
import StrataTestSupport
import Testing

// MARK: - Review (session 28): a string set over a canonically equal one is a change

/// "Émile" precomposed (NFC: U+00C9) and decomposed (NFD: "E" U+0301): equal as Swift
/// `String`s (canonical equivalence), different as `NSString`s (`isEqual:` compares UTF-16).
private let composed = "\u{C9}mile"
private let decomposed = "E\u{301}mile"

/// The string's scalars, to tell the two encodings apart (`==` can't).
private func scalars(_ value: Any?) -> [UInt32]? {
    (value as? String).map { $0.unicodeScalars.map(\.value) }
}

@Suite("Change detection compares strings literally, as Core Data's isEqual: does")
struct LiteralStringChangeTests {
    init() {
        // The premise: Swift finds the two equal, their scalars differ.
        precondition(composed == decomposed && scalars(composed) != scalars(decomposed))
    }

    /// A people store with one person whose first name is `firstName`; returns its ID.
    func store(_ dir: TemporaryDirectory, firstName: String, model: ManagedObjectModel? = nil) async throws
        -> (PersistentStoreCoordinator, ManagedObjectID)
    {
        let coordinator = try openCoordinator(dir, model: try model ?? SeedModels.people)
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue(firstName, forKey: "firstName")
            try context.save()
            return person.objectID
        }
        return (coordinator, id)
    }

    func storedFirstName(_ coordinator: PersistentStoreCoordinator, _ id: ManagedObjectID) async throws -> [UInt32]? {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            scalars(try context.existingObject(with: id).value(forKey: "firstName"))
        }
    }

    @Test("NFC set over a stored NFD string is a change the save writes (a normalization pass saves)")
    func normalizationPassSaves() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await store(dir, firstName: decomposed)
        let before = try head(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.existingObject(with: id)
            person.setValue(composed, forKey: "firstName")
            #expect(person.hasChanges, "before, the set was dropped as no change")
            #expect(scalars(person.changedValues()["firstName"]) == scalars(composed))
            #expect(scalars(person.value(forKey: "firstName")) == scalars(composed))
            try context.save()
        }
        #expect(try head(coordinator) == before + 1)
        #expect(try await storedFirstName(coordinator, id) == scalars(composed))
        // The same string, byte for byte, is still no change.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.existingObject(with: id)
            person.setValue(String(composed.unicodeScalars), forKey: "firstName")
            #expect(!person.hasChanges)
        }
    }

    @Test("setting back the committed encoding is no change again; an inserted object keeps the last encoding set")
    func pendingValueSettles() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await store(dir, firstName: decomposed)
        let inserted = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.existingObject(with: id)
            person.setValue(composed, forKey: "firstName")
            person.setValue(decomposed, forKey: "firstName")
            #expect(!person.hasChanges, "back to the committed bytes")
            let other = try context.insertNewObject(forEntityName: "Person")
            other.setValue(decomposed, forKey: "firstName")
            other.setValue(composed, forKey: "firstName")
            #expect(scalars(other.value(forKey: "firstName")) == scalars(composed))
            try context.save()
            return other.objectID
        }
        #expect(try await storedFirstName(coordinator, inserted) == scalars(composed))
        #expect(try await storedFirstName(coordinator, id) == scalars(decomposed))
    }

    @Test("willChange/setPrimitiveValue/didChange of an equal-looking string is a change too")
    func primitiveSetIsAChange() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await store(dir, firstName: decomposed)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.existingObject(with: id)
            person.willChangeValue(forKey: "firstName")
            person.setPrimitiveValue(composed, forKey: "firstName")
            person.didChangeValue(forKey: "firstName")
            #expect(person.hasChanges)
            try context.save()
        }
        #expect(try await storedFirstName(coordinator, id) == scalars(composed))
    }

    @Test("the undo journal records the re-encoding: undo brings the old bytes back")
    func undoRestoresEncoding() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await store(dir, firstName: decomposed)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.existingObject(with: id)
            person.setValue(composed, forKey: "firstName")
            context.processPendingChanges()
            let canUndo = context.canUndo
            #expect(canUndo, "the set is an undoable change")
            try context.undo()
            #expect(scalars(person.value(forKey: "firstName")) == scalars(decomposed))
            #expect(!person.hasChanges)
            try context.redo()
            #expect(scalars(person.value(forKey: "firstName")) == scalars(composed))
            // In one group, NFD → NFC → "x" → NFC nets to the NFC change, not to nothing.
            person.setValue("x", forKey: "firstName")
            person.setValue(composed, forKey: "firstName")
            context.processPendingChanges()
            try context.undo()
            try context.undo()
            #expect(scalars(person.value(forKey: "firstName")) == scalars(decomposed))
        }
    }

    @Test("the log records an update to an equal-looking string, with both encodings in its images")
    func logRecordsReencoding() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let log = coordinator.persistentStores[0].log
        var draft = TransactionDraft()
        let person = draft.insert("Person", values: ["firstName": .attribute(.string(decomposed))])
        let id = try #require(try log.commit(draft).permanentID(for: person))
        var update = TransactionDraft()
        update.update(.stored(id), values: ["firstName": .attribute(.string(composed))])
        let result = try log.commit(update)
        guard case .update(_, let changes)? = result.event.changes.first, case .value(_, let before, let after)? = changes.first else {
            Issue.record("the update wasn't recorded: \(result.event.changes)")
            return
        }
        guard case .attribute(.string(let old)) = before, case .attribute(.string(let new)) = after else {
            Issue.record("unexpected images \(before) → \(after)")
            return
        }
        #expect(scalars(old) == scalars(decomposed) && scalars(new) == scalars(composed))
        let stored = try log.read { try $0.object(id) }
        guard case .attribute(.string(let value))? = stored?["firstName"] else {
            Issue.record("no stored first name")
            return
        }
        #expect(scalars(value) == scalars(composed))
    }

    @Test("a derived attribute follows the re-encoding of its source")
    func derivedFollowsReencoding() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let employee = try context.insertNewObject(forEntityName: "Employee")
            employee.setValue(decomposed, forKey: "name")
            try context.save()
            return employee.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: id).setValue(composed, forKey: "name")
            try context.save()
        }
        let shouted = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            scalars(try context.existingObject(with: id).value(forKey: "shoutedName"))
        }
        #expect(shouted == scalars(composed.uppercased()))
    }

    @Test("-0.0 over 0.0 stays no change, as NSNumber's isEqual: finds them equal")
    func negativeZeroIsNoChange() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue(0.0, forKey: "score")
            try context.save()
            return person.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.existingObject(with: id)
            person.setValue(-0.0, forKey: "score")
            #expect(!person.hasChanges)
        }
    }

    // MARK: Uniqueness: canonically equal strings are one value

    @Test("a uniqueness constraint treats canonically equal strings as one value, short or long (cut index keys)",
          arguments: [0, 200])
    func uniquenessIsCanonical(_ padding: Int) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let tail = String(repeating: "a", count: padding) + "@example.com"
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue(decomposed + tail, forKey: "email")
            try context.save()
        }
        let before = try head(coordinator)
        let error = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> ContextError? in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue(composed + tail, forKey: "email")
            do { try context.save() } catch let error as ContextError { return error }
            return nil
        }
        guard case .constraintConflicts(let conflicts)? = error else {
            Issue.record("expected a constraint conflict, got \(String(describing: error))")
            return
        }
        #expect(conflicts.count == 1 && conflicts.first?.constraint == ["email"])
        #expect(try head(coordinator) == before)
    }

    @Test("re-encoding an object's own unique value saves: it clashes with no one")
    func reencodingUniqueValueSaves() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue(decomposed + "@example.com", forKey: "email")
            try context.save()
            return person.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.existingObject(with: id)
            person.setValue(composed + "@example.com", forKey: "email")
            try context.save()
        }
        let email = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            scalars(try context.existingObject(with: id).value(forKey: "email"))
        }
        #expect(email == scalars(composed + "@example.com"))
        // Either encoding finds it, through the index.
        let found = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.count(for: FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "email == %@", decomposed + "@example.com")))
        }
        #expect(found == 1)
    }
}

@Suite("Batch requests compare strings literally too")
struct LiteralStringBatchTests {
    @Test("a batch update setting an equal-looking string writes it")
    func batchUpdateWrites() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue(decomposed, forKey: "firstName")
            try context.save()
            return person.objectID
        }
        let result = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = BatchUpdateRequest(entityName: "Person")
            request.propertiesToUpdate = ["firstName": composed]
            return try context.execute(request)
        }
        #expect(result.sequence != nil, "before, the request found nothing to change and committed nothing")
        let stored = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            scalars(try context.existingObject(with: id).value(forKey: "firstName"))
        }
        #expect(stored == scalars(composed))
    }

    @Test("a batch insert upserting over a unique value writes an equal-looking string")
    func upsertWrites() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("a@example.com", forKey: "email")
            person.setValue(decomposed, forKey: "firstName")
            try context.save()
            return person.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .mergeByPropertyObjectTrump
            _ = try context.execute(BatchInsertRequest(entityName: "Person", objects: [["email": "a@example.com", "firstName": composed]]))
        }
        let (stored, count) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            (scalars(try context.existingObject(with: id).value(forKey: "firstName")), try context.count(for: FetchRequest(entityName: "Person")))
        }
        #expect(count == 1)
        #expect(stored == scalars(composed))
    }
}
