import Foundation
import Strata
import StrataTestSupport
import Testing

/// A one-to-one relationship names each destination from one object at most, even when two
/// writers each give the same partner-less object a partner: the log's commit refuses the
/// second (spec 0004 §4.1), where before both saves landed and two passports named one person.
@Suite("One-to-one relationships keep one partner across writers")
struct OneToOneIntegrityTests {
    @Test("two contexts give person C a passport each: the second save is refused, nothing written; merged, it saves")
    func secondPartnerRefused() async throws {
        let dir = try TemporaryDirectory()
        let store = try await UndoRebaseCoverageTests.passports(dir)
        let c = try await privateContext(store.coordinator).perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("C", forKey: "name")
            try context.save()
            return person.objectID
        }
        let other = privateContext(store.coordinator, name: "other")
        try await privateContext(store.coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            // Mine: P3 (no one's) goes to C. Other, meanwhile: P1 (A's) goes to C. No object
            // both writers change in the store: C's side is derived from the passports'.
            try store.object("P3", context).setValue(try context.existingObject(with: c), forKey: "person")
            let save = try UndoRelationshipRebaseTests.save(other) { other in
                try other.existingObject(with: try #require(store.ids["P1"])).setValue(try other.existingObject(with: c), forKey: "person")
            }
            do {
                try context.save()
                Issue.record("the save gave C a second passport")
            } catch {
                #expect("\(error)".contains("one-to-one relationship Passport.person would name"), "\(error)")
            }
            let kept = context.hasChanges
            #expect(kept, "the refused save keeps the context's changes")
            // Taking the other writer's save in, the context's own change wins and P1 is
            // released in memory: the save then writes both.
            context.mergeChanges(fromContextDidSave: save)
            try context.save()
        }
        try await privateContext(try openCoordinator(dir, model: try UndoRebaseCoverageTests.passportModel())).perform {
            (context: isolated ManagedObjectContext) throws in
            let request = FetchRequest(entityName: "Passport", predicate: try FormatPredicate(format: "person == %@", c))
            let named = try context.fetch(request).compactMap { $0.value(forKey: "number") as? String }
            #expect(named == ["P3"], "C's passports in the store")
            let p1 = try store.object("P1", context)
            #expect(p1.value(forKey: "person") == nil, "P1, released by the later save")
        }
    }

    @Test("a partner change that releases the old partner in the same save is no violation")
    func changeOfPartnerSaves() async throws {
        let dir = try TemporaryDirectory()
        let store = try await UndoRebaseCoverageTests.passports(dir)
        try await privateContext(store.coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // A: P1 → P3, then B: P2 → P1, in one save.
            try store.object("A", context).setValue(try store.object("P3", context), forKey: "passport")
            try store.object("B", context).setValue(try store.object("P1", context), forKey: "passport")
            try context.save()
        }
        #expect(try await UndoRebaseCoverageTests.reopenedPairs(dir, store) == "A:P3 B:P1")
    }
}
