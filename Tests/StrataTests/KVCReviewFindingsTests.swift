import Foundation
import Strata
import StrataTestSupport
import Testing

// Findings of a review of key-value coding and object URIs (session 12): each test failed on
// the code before its fix.

/// Emp ↔ Dept (to-one / to-many) and Emp ↔ Tag (to-many both ways): `emps` names the inverse
/// in both Dept and Tag.
private func staffModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Emp") {
            Attribute("name", .string)
            Relationship("dept", to: "Dept", inverse: "emps")
            Relationship("tags", to: "Tag", inverse: "emps", toMany: true)
        }
        Entity("Dept") {
            Attribute("name", .string)
            Relationship("emps", to: "Emp", inverse: "dept", toMany: true)
        }
        Entity("Tag") {
            Attribute("name", .string)
            Relationship("emps", to: "Emp", inverse: "tags", toMany: true)
        }
        Entity("Café") {
            Attribute("name", .string)
        }
    }
}

@Suite("KVC and URI review findings")
struct KVCReviewFindingsTests {
    @Test("an object ID of an entity with a non-ASCII name round-trips through its URI and Codable, saved and temporary")
    func nonASCIIEntityURIs() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try staffModel())
        let (temporary, permanent) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let cafe = try context.insertNewObject(forEntityName: "Café")
            let temporary = cafe.objectID
            try context.save()
            return (temporary, cafe.objectID)
        }
        #expect(permanent.uriRepresentation().absoluteString.hasSuffix("/Caf%C3%A9/p1"))
        #expect(coordinator.managedObjectID(forURIRepresentation: permanent.uriRepresentation()) == permanent)
        let decoded = try JSONDecoder().decode(ManagedObjectID.self, from: JSONEncoder().encode(permanent))
        #expect(decoded == permanent)
        let temporaryBack = try JSONDecoder().decode(ManagedObjectID.self, from: JSONEncoder().encode(temporary))
        #expect(temporaryBack == temporary)
    }

    @Test("setting a to-one to an object of the wrong entity keeps it as invalid for the save to refuse, and touches no same-named inverse")
    func wrongEntityToOne() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try staffModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let emp = try context.insertNewObject(forEntityName: "Emp")
            let tag = try context.insertNewObject(forEntityName: "Tag")
            emp.setValue(tag, forKey: "dept")
            #expect((tag.value(forKey: "emps") as? Set<ManagedObject>)?.isEmpty == true)
            #expect((emp.value(forKey: "tags") as? Set<ManagedObject>)?.isEmpty == true)
            do {
                try context.save()
                Issue.record("the save should refuse a Tag as Emp.dept")
            } catch ContextError.validation(let failures) {
                #expect(failures.contains { $0.key == "dept" && $0.code.rawValue == 1550 })
            }
            // Fixed, it saves.
            let dept = try context.insertNewObject(forEntityName: "Dept")
            emp.setValue(dept, forKey: "dept")
            try context.save()
            #expect((dept.value(forKey: "emps") as? Set<ManagedObject>)?.count == 1)
        }
    }

    @Test("a mutable set proxy refuses an object of the wrong entity, and one of a property that isn't to-many names the property's kind")
    func proxyMisuse() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try staffModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let dept = try context.insertNewObject(forEntityName: "Dept")
            let tag = try context.insertNewObject(forEntityName: "Tag")
            dept.mutableSetValue(forKey: "emps").add(tag)
            #expect((dept.value(forKey: "emps") as? Set<ManagedObject>)?.isEmpty == true)
            #expect((tag.value(forKey: "emps") as? Set<ManagedObject>)?.isEmpty == true)
            do {
                try context.save()
                Issue.record("the save should report the refused addition")
            } catch {
                #expect("\(error)".contains("Dept.emps"))
            }
            dept.mutableSetValue(forKey: "name").add(tag)
            do {
                try context.save()
                Issue.record("the save should report the misuse")
            } catch {
                #expect("\(error)".contains("not a to-many relationship"))
            }
        }
    }
}
