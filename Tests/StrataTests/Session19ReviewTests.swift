import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// Review probe (session 19): verify's derived-value check on a store written through
/// contexts — batch updates and deletes, a rename reaching the employees, a move, an undone
/// saved delete, compaction — finds nothing (spec 0004 §8, 0006 §24).
@Suite("Review: verify's derived check after contexts' work")
struct VerifyDerivedContextReviewTests {
    @Test("batch update and delete, a department renamed, an employee moved, a saved delete undone and saved, compaction: verify is clean and derived values are the fresh ones")
    func contextsWork() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.derivedAttributes)
        let context = privateContext(coordinator, name: "hr")
        let (sales, support, doomed) = try await context.perform { (context: isolated ManagedObjectContext) throws in
            let sales = try context.insertNewObject(forEntityName: "Department")
            sales.setValue("Sales", forKey: "name")
            let support = try context.insertNewObject(forEntityName: "Department")
            support.setValue("Support", forKey: "name")
            var last: ManagedObject?
            for index in 0..<6 {
                let employee = try context.insertNewObject(forEntityName: "Employee")
                employee.setValue("e\(index)", forKey: "name")
                employee.setValue(Decimal(1000 + index * 250) / 3, forKey: "salary")
                employee.setValue(index < 3 ? sales : support, forKey: "department")
                last = employee
            }
            try context.save()
            return (sales.objectID, support.objectID, try #require(last).objectID)
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            var update = BatchUpdateRequest(entityName: "Employee")
            update.predicate = try FormatPredicate(format: "name == %@", "e1")
            update.propertiesToUpdate = ["salary": Decimal(string: "12345.67") ?? 0]
            _ = try context.execute(update)
            _ = try context.execute(BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Employee", format: "name == %@", "e2")))
            try context.existingObject(with: sales).setValue("Field Sales", forKey: "name")
            let e0 = try context.fetch(try FetchRequest(entityName: "Employee", format: "name == %@", "e0")).first
            e0?.setValue(try context.existingObject(with: support), forKey: "department")
            try context.save()
            context.delete(try context.existingObject(with: doomed))
            try context.save()
            try context.undo()
            try context.save()
        }
        let log = try #require(coordinator.persistentStores.first).log
        let report = try log.verify()
        #expect(report.isClean, "\(report.problems)")
        _ = try log.compact(CompactionRequest(before: try log.head))
        let compacted = try log.verify()
        #expect(compacted.isClean, "\(compacted.problems)")
        let counts = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try [sales, support].map { id in try context.existingObject(with: id).value(forKey: "employeeCount") as? Int64 }
        }
        #expect(counts == [1, 4], "e0 moved, e2 batch-deleted, e5's delete undone")
    }
}

/// Review probe (session 19, spec 0004 §3.5): undo in an earlier model's app of a saved change
/// whose before-value a later version stored in its own type.
@Suite("Review: undoing an earlier model's change to a value a later version converted")
struct EarlierModelUndoReviewTests {
    /// A store of `P` whose `score` 5 was saved as `int16`, then converted to `int64` by a
    /// later version; the object's ID and a coordinator with the first version.
    static func convertedStore(_ dir: TemporaryDirectory) async throws -> (ManagedObjectID, PersistentStoreCoordinator) {
        let v1 = try ManagedObjectModel { Entity("P") { Attribute("score", .int16); Attribute("name", .string) } }
        let v2 = try ManagedObjectModel { Entity("P") { Attribute("score", .int64); Attribute("name", .string) } }
        let id = try await privateContext(try openCoordinator(dir, model: v1)).perform { (context: isolated ManagedObjectContext) throws in
            let object = try context.insertNewObject(forEntityName: "P")
            object.setValue(Int16(5), forKey: "score")
            try context.save()
            return object.objectID
        }
        _ = try openCoordinator(dir, model: v2)
        return (id, try openCoordinator(dir, model: v1))
    }

    @Test("an earlier app's persisted undo of its change to a converted value: the value comes back, the save works, verify is clean")
    func persistedUndoOfConvertedValue() async throws {
        let dir = try TemporaryDirectory()
        let (id, earlier) = try await Self.convertedStore(dir)
        try await privateContext(earlier, name: "editor", author: "alice", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: id).setValue(Int16(7), forKey: "score")
            try context.save()
        }
        let (score, problems) = try await privateContext(earlier, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws -> (Int16?, String) in
            try context.undo()
            try context.save()
            let report = try context.persistentStoreCoordinator.persistentStores.first?.log.verify()
            return (try context.existingObject(with: id).value(forKey: "score") as? Int16, "\(report?.problems ?? [])")
        }
        #expect(score == 5)
        #expect(problems == "[]")
    }

    @Test("an earlier app reads a value a later version converted in its own type, and its in-memory undo of a saved change to it saves")
    func inMemoryUndoOfConvertedValue() async throws {
        let dir = try TemporaryDirectory()
        let (id, earlier) = try await Self.convertedStore(dir)
        let score = try await privateContext(earlier).perform { (context: isolated ManagedObjectContext) throws -> Int16? in
            let read = try context.existingObject(with: id).value(forKey: "score") as? Int16
            #expect(read == 5, "read in this model's type")
            try context.existingObject(with: id).setValue(Int16(7), forKey: "score")
            try context.save()
            try context.undo()
            try context.save()
            return try context.existingObject(with: id).value(forKey: "score") as? Int16
        }
        #expect(score == 5)
    }
}
