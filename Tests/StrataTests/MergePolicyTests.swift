import Foundation
@testable import Strata
import StrataTestSupport
import Synchronization
import Testing

/// A person's stored values, read through a fresh context.
struct PersonState: Sendable, Equatable {
    var firstName: String?
    var lastName: String?
    var age: Int32?
    var score: Double?
}

/// `SeedModels.people` with one person: Ada Lovelace, ada@example.com, 36, score 1.
func peopleStore(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, ManagedObjectID) {
    let coordinator = try openCoordinator(dir, model: try SeedModels.people)
    let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        let person = try context.insertNewObject(forEntityName: "Person")
        person.setValue("Ada", forKey: "firstName")
        person.setValue("Lovelace", forKey: "lastName")
        person.setValue("ada@example.com", forKey: "email")
        person.setValue(Int32(36), forKey: "age")
        person.setValue(1.0, forKey: "score")
        try context.save()
        return person.objectID
    }
    return (coordinator, id)
}

func storedPerson(_ coordinator: PersistentStoreCoordinator, _ id: ManagedObjectID) async throws -> PersonState? {
    try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> PersonState? in
        guard let person = try? context.existingObject(with: id) else { return nil }
        return PersonState(
            firstName: person.value(forKey: "firstName") as? String, lastName: person.value(forKey: "lastName") as? String,
            age: person.value(forKey: "age") as? Int32, score: person.value(forKey: "score") as? Double)
    }
}

func head(_ coordinator: PersistentStoreCoordinator) throws -> UInt64 {
    try coordinator.persistentStores[0].log.head
}

/// The conflict every policy test resolves: context A read Ada (version 1); another writer
/// set firstName "Augusta" and age 37 (version 2); A set firstName "Ann" and score 2.
/// Returns A's save error (if any) and A's view of the person afterwards.
func versionConflict(_ coordinator: PersistentStoreCoordinator, _ id: ManagedObjectID, policy: any MergePolicy)
    async throws -> (error: ContextError?, ours: PersonState?)
{
    let other = privateContext(coordinator, name: "b")
    return try await privateContext(coordinator, name: "a").perform { (context: isolated ManagedObjectContext) throws -> (ContextError?, PersonState?) in
        context.mergePolicy = policy
        let person = try context.existingObject(with: id)  // A reads version 1 and holds it
        try other.performAndWait { (context: isolated ManagedObjectContext) throws in
            let person = try context.existingObject(with: id)
            person.setValue("Augusta", forKey: "firstName")
            person.setValue(Int32(37), forKey: "age")
            try context.save()
        }
        person.setValue("Ann", forKey: "firstName")
        person.setValue(2.0, forKey: "score")
        var failure: ContextError?
        do { try context.save() } catch let error as ContextError { failure = error }
        let state = person.managedObjectContext == nil ? nil : PersonState(
            firstName: person.value(forKey: "firstName") as? String, lastName: person.value(forKey: "lastName") as? String,
            age: person.value(forKey: "age") as? Int32, score: person.value(forKey: "score") as? Double)
        return (failure, state)
    }
}

/// A custom policy: the standard object-trump merge, then a note in `lastName`; records what it was given.
final class NotingPolicy: MergePolicy {
    let seen = Mutex<[MergeConflict]>([])

    func resolve(optimisticLockingConflicts conflicts: [MergeConflict], in context: isolated ManagedObjectContext) throws {
        seen.withLock { $0 += conflicts }
        try StandardMergePolicy.mergeByPropertyObjectTrump.resolve(optimisticLockingConflicts: conflicts, in: context)
        for conflict in conflicts { context.registeredObject(for: conflict.objectID)?.setValue("Resolved", forKey: "lastName") }
    }
}

@Suite("Contexts: conflicts and merge policies", .serialized)
struct MergePolicyTests {
    // MARK: - Optimistic locking

    @Test("error (the default): the save throws every conflict with object, versions and base/ours/theirs; nothing is written")
    func errorPolicy() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await peopleStore(dir)
        let (error, ours) = try await versionConflict(coordinator, id, policy: .error)
        guard case .mergeConflicts(let conflicts)? = error else {
            Issue.record("expected mergeConflicts, got \(String(describing: error))")
            return
        }
        #expect(error?.code == 133020)
        #expect(conflicts.count == 1)
        let conflict = try #require(conflicts.first)
        #expect(conflict.objectID == id)
        #expect(conflict.oldVersion == 1)
        #expect(conflict.newVersion == 2)
        #expect(conflict.isDeletedInStore == false && conflict.isDeletedInContext == false)
        let properties = Dictionary(uniqueKeysWithValues: conflict.properties.map { ($0.name, $0) })
        #expect(properties.keys.sorted() == ["age", "firstName", "score"])
        #expect(properties["firstName"]?.base == .attribute(.string("Ada")))
        #expect(properties["firstName"]?.ours == .attribute(.string("Ann")))
        #expect(properties["firstName"]?.theirs == .attribute(.string("Augusta")))
        #expect(properties["age"]?.base == .attribute(.int32(36)) && properties["age"]?.ours == .attribute(.int32(36)))
        #expect(properties["age"]?.theirs == .attribute(.int32(37)))
        #expect(properties["score"]?.ours == .attribute(.double(2)) && properties["score"]?.theirs == .attribute(.double(1)))
        #expect(error?.description.contains("firstName: base \"Ada\", ours \"Ann\", theirs \"Augusta\"") == true, "\(error?.description ?? "")")
        #expect(try head(coordinator) == 2, "nothing written")
        #expect(try await storedPerson(coordinator, id) == PersonState(firstName: "Augusta", lastName: "Lovelace", age: 37, score: 1))
        #expect(ours == PersonState(firstName: "Ann", lastName: "Lovelace", age: 36, score: 2), "the context keeps its changes")
    }

    @Test("mergeByPropertyStoreTrump: the store's changes win property by property; the context's others are saved")
    func storeTrump() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await peopleStore(dir)
        let (error, ours) = try await versionConflict(coordinator, id, policy: .mergeByPropertyStoreTrump)
        #expect(error == nil)
        let expected = PersonState(firstName: "Augusta", lastName: "Lovelace", age: 37, score: 2)
        #expect(try await storedPerson(coordinator, id) == expected)
        #expect(ours == expected)
        #expect(try head(coordinator) == 3, "one transaction")
    }

    @Test("mergeByPropertyObjectTrump: the context's changes win property by property; the store's others are kept")
    func objectTrump() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await peopleStore(dir)
        let (error, ours) = try await versionConflict(coordinator, id, policy: .mergeByPropertyObjectTrump)
        #expect(error == nil)
        let expected = PersonState(firstName: "Ann", lastName: "Lovelace", age: 37, score: 2)
        #expect(try await storedPerson(coordinator, id) == expected)
        #expect(ours == expected)
        #expect(try head(coordinator) == 3)
    }

    @Test("overwrite: the context's whole object replaces the stored one, unchanged properties included")
    func overwrite() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await peopleStore(dir)
        let (error, ours) = try await versionConflict(coordinator, id, policy: .overwrite)
        #expect(error == nil)
        let expected = PersonState(firstName: "Ann", lastName: "Lovelace", age: 36, score: 2)
        #expect(try await storedPerson(coordinator, id) == expected)
        #expect(ours == expected)
        #expect(try head(coordinator) == 3)
    }

    @Test("rollback: the context's changes to the object are dropped; the store's version stays")
    func rollback() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await peopleStore(dir)
        let (error, ours) = try await versionConflict(coordinator, id, policy: .rollback)
        #expect(error == nil)
        let expected = PersonState(firstName: "Augusta", lastName: "Lovelace", age: 37, score: 1)
        #expect(try await storedPerson(coordinator, id) == expected)
        #expect(ours == expected)
        #expect(try head(coordinator) == 2, "nothing left to write")
    }

    @Test("a custom policy gets the conflicts, can call a standard one and adjust; the save is still one transaction")
    func customPolicy() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await peopleStore(dir)
        let policy = NotingPolicy()
        let (error, _) = try await versionConflict(coordinator, id, policy: policy)
        #expect(error == nil)
        #expect(policy.seen.withLock { $0.map(\.objectID) } == [id])
        #expect(try await storedPerson(coordinator, id) == PersonState(firstName: "Ann", lastName: "Resolved", age: 37, score: 2))
        #expect(try head(coordinator) == 3)
        let event = try coordinator.persistentStores[0].log.read { (reader: borrowing LogReader) throws in try reader.event(3) }
        // The context's group, then the group of the policy's own change.
        #expect(event.groups.count == 2)
        var properties: [String] = []
        for case .update(let object, let changes) in event.changes where object == id.storedID {
            properties += changes.map(\.property)
        }
        #expect(properties.sorted() == ["firstName", "lastName", "score"])
    }

    @Test("an object another writer deleted: error reports it; object-trump drops it from the context; overwrite re-creates it")
    func deletedElsewhere() async throws {
        for policy in [StandardMergePolicy.error, .mergeByPropertyObjectTrump, .overwrite] {
            let dir = try TemporaryDirectory()
            let (coordinator, id) = try await peopleStore(dir)
            let other = privateContext(coordinator, name: "b")
            let error = try await privateContext(coordinator, name: "a").perform { (context: isolated ManagedObjectContext) throws -> ContextError? in
                context.mergePolicy = policy
                let person = try context.existingObject(with: id)
                try other.performAndWait { (context: isolated ManagedObjectContext) throws in
                    context.delete(try context.existingObject(with: id))
                    try context.save()
                }
                person.setValue("Ann", forKey: "firstName")
                do { try context.save() } catch let error as ContextError { return error }
                #expect(context.hasChanges == false)
                return nil
            }
            switch policy.type {
            case .error:
                guard case .mergeConflicts(let conflicts)? = error else {
                    Issue.record("expected mergeConflicts, got \(String(describing: error))")
                    continue
                }
                #expect(conflicts.first?.isDeletedInStore == true)
                #expect(conflicts.first?.newVersion == 2, "the sequence that deleted it")
            case .overwrite:
                #expect(error == nil)
                #expect(try await storedPerson(coordinator, id)?.firstName == "Ann", "re-created under its own ID")
            default:
                #expect(error == nil)
                #expect(try await storedPerson(coordinator, id) == nil)
            }
        }
    }

    @Test("detectConflicts(for:) checks an unchanged object at save")
    func detectConflictsForUnchanged() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await peopleStore(dir)
        let a = privateContext(coordinator, name: "a")
        try await a.perform { (context: isolated ManagedObjectContext) throws in
            try context.detectConflicts(for: try context.object(with: id))
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: id).setValue("Augusta", forKey: "firstName")
            try context.save()
        }
        let error = try await a.perform { (context: isolated ManagedObjectContext) throws -> ContextError? in
            try context.insertNewObject(forEntityName: "Team").setValue("Otters", forKey: "name")
            do { try context.save() } catch let error as ContextError { return error }
            return nil
        }
        guard case .mergeConflicts(let conflicts)? = error else {
            Issue.record("expected mergeConflicts, got \(String(describing: error))")
            return
        }
        #expect(conflicts.map(\.objectID) == [id])
        #expect(conflicts.first?.properties.map(\.name) == ["firstName"])
        #expect(conflicts.first?.properties.first?.changedByContext == false)
        #expect(try head(coordinator) == 2)
    }

    @Test("an object fired from a fetched row: the version it saw is found in its history")
    func rowCacheVersion() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await peopleStore(dir)
        let other = privateContext(coordinator, name: "b")
        let error = try await privateContext(coordinator, name: "a").perform { (context: isolated ManagedObjectContext) throws -> ContextError? in
            let fetched = try context.fetch(FetchRequest(entityName: "Person"))  // rows, not fired
            #expect(fetched.count == 1 && fetched[0].isFault)
            try other.performAndWait { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: id).setValue(Int32(37), forKey: "age")
                try context.save()
            }
            let person = fetched[0]
            #expect(person.value(forKey: "age") as? Int32 == 36, "the row the fetch left")
            person.setValue(2.0, forKey: "score")
            do { try context.save() } catch let error as ContextError { return error }
            return nil
        }
        guard case .mergeConflicts(let conflicts)? = error else {
            Issue.record("expected mergeConflicts, got \(String(describing: error))")
            return
        }
        #expect(conflicts.first?.oldVersion == 1)
        #expect(conflicts.first?.newVersion == 2)
        #expect(conflicts.first?.properties.map(\.name) == ["age", "score"])
    }

    @Test("after a merge the context has seen the other writer's version: no conflict")
    func mergedIsNotAConflict() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await peopleStore(dir)
        let a = privateContext(coordinator, name: "a")
        try await a.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            try context.existingObject(with: id).setValue(2.0, forKey: "score")
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: id).setValue(Int32(37), forKey: "age")
            try context.save()
        }
        try await a.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            try context.save()
        }
        #expect(try await storedPerson(coordinator, id) == PersonState(firstName: "Ada", lastName: "Lovelace", age: 37, score: 2))
    }

    // MARK: - Uniqueness constraints

    /// The store holds Old (old@… is not used) with email a@example.com and age 50; a context
    /// inserts New Newman with the same email and saves under `policy`.
    func uniquenessClash(_ dir: TemporaryDirectory, policy: any MergePolicy) async throws
        -> (coordinator: PersistentStoreCoordinator, storedID: ManagedObjectID, error: ContextError?, insertedIDAfter: ManagedObjectID)
    {
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let storedID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("Old", forKey: "firstName")
            person.setValue("a@example.com", forKey: "email")
            person.setValue(Int32(50), forKey: "age")
            try context.save()
            return person.objectID
        }
        let (error, after) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> (ContextError?, ManagedObjectID) in
            context.mergePolicy = policy
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("New", forKey: "firstName")
            person.setValue("Newman", forKey: "lastName")
            person.setValue("a@example.com", forKey: "email")
            do { try context.save() } catch let error as ContextError { return (error, person.objectID) }
            #expect(person.isInserted == false)
            return (nil, person.objectID)
        }
        return (coordinator, storedID, error, after)
    }

    func people(_ coordinator: PersistentStoreCoordinator) async throws -> [PersonState] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Person")).map { person in
                PersonState(
                    firstName: person.value(forKey: "firstName") as? String, lastName: person.value(forKey: "lastName") as? String,
                    age: person.value(forKey: "age") as? Int32, score: person.value(forKey: "score") as? Double)
            }
        }
    }

    @Test("uniqueness, error: the save throws the constraint conflict with the stored object; nothing is written")
    func uniquenessError() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, storedID, error, insertedID) = try await uniquenessClash(dir, policy: .error)
        guard case .constraintConflicts(let conflicts)? = error else {
            Issue.record("expected constraintConflicts, got \(String(describing: error))")
            return
        }
        #expect(error?.code == 133021)
        let conflict = try #require(conflicts.first)
        #expect(conflict.entityName == "Person" && conflict.constraint == ["email"])
        #expect(conflict.values == [.attribute(.string("a@example.com"))])
        #expect(conflict.conflictingObjects == [insertedID])
        #expect(conflict.databaseObject == storedID)
        #expect(conflict.databaseSnapshot?["firstName"] == .attribute(.string("Old")))
        #expect(try head(coordinator) == 1)
    }

    @Test("uniqueness, object-trump: upsert — the inserted object becomes the stored one; its values win where set")
    func uniquenessObjectTrump() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, storedID, error, insertedID) = try await uniquenessClash(dir, policy: .mergeByPropertyObjectTrump)
        #expect(error == nil)
        #expect(insertedID == storedID, "the inserted object took over the stored object's ID")
        #expect(try await people(coordinator) == [PersonState(firstName: "New", lastName: "Newman", age: 50)])
        #expect(try head(coordinator) == 2)
    }

    @Test("uniqueness, store-trump: upsert — the stored values win where set; the inserted object fills the rest")
    func uniquenessStoreTrump() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, storedID, error, insertedID) = try await uniquenessClash(dir, policy: .mergeByPropertyStoreTrump)
        #expect(error == nil)
        #expect(insertedID == storedID)
        #expect(try await people(coordinator) == [PersonState(firstName: "Old", lastName: "Newman", age: 50)])
    }

    @Test("uniqueness, overwrite: upsert — the inserted object's values, all of them")
    func uniquenessOverwrite() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, storedID, error, insertedID) = try await uniquenessClash(dir, policy: .overwrite)
        #expect(error == nil)
        #expect(insertedID == storedID)
        #expect(try await people(coordinator) == [PersonState(firstName: "New", lastName: "Newman", age: nil)])
    }

    @Test("uniqueness, rollback: the stored object stays as it is; the inserted object's values are dropped")
    func uniquenessRollback() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, storedID, error, insertedID) = try await uniquenessClash(dir, policy: .rollback)
        #expect(error == nil)
        #expect(insertedID == storedID)
        #expect(try await people(coordinator) == [PersonState(firstName: "Old", age: 50)])
        #expect(try head(coordinator) == 1, "nothing left to write")
    }

    @Test("uniqueness among the context's own inserts: object-trump merges them into the first, later values winning")
    func uniquenessAmongInserts() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let (firstID, secondAlive) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = StandardMergePolicy.mergeByPropertyObjectTrump
            let first = try context.insertNewObject(forEntityName: "Person")
            first.setValue("First", forKey: "firstName")
            first.setValue("b@example.com", forKey: "email")
            first.setValue(Int32(1), forKey: "age")
            let second = try context.insertNewObject(forEntityName: "Person")
            second.setValue("Second", forKey: "firstName")
            second.setValue("Later", forKey: "lastName")
            second.setValue("b@example.com", forKey: "email")
            try context.save()
            return (first.objectID, second.managedObjectContext != nil)
        }
        #expect(firstID.isTemporaryID == false)
        #expect(secondAlive == false, "the second object left the context")
        #expect(try await people(coordinator) == [PersonState(firstName: "Second", lastName: "Later", age: 1)])
    }
}
