import Foundation
@testable import Strata
import StrataTestSupport
import Testing

// `FetchRequest<Result>`, as Core Data's `NSFetchRequest<ResultType>`: a ported app writes
// `let employees: [Employee] = try context.fetch(Employee.fetchRequest())`.

/// Named after its entity, never registered explicitly (Core Data's generated class).
class TFEmployee: ManagedObject {
    var name: String? {
        get { get("name") }
        set { setValue(newValue, forKey: "name") }
    }
    var salary: Int64 {
        get { get("salary") ?? 0 }
        set { setValue(newValue, forKey: "salary") }
    }
}

/// The class of the sub-entity `TFManager`.
final class TFManager: TFEmployee {}

/// A class unrelated to `TFEmployee`.
final class TFBadge: ManagedObject {}

/// A class whose entity has another name: it declares its own `fetchRequest()`, as Core
/// Data's generated code does.
final class TFStaffer: ManagedObject {
    class func fetchRequest() -> FetchRequest<TFStaffer> { FetchRequest<TFStaffer>(entityName: "TFVisitor") }
}

private func typedFetchModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("TFEmployee") {
            Attribute("name", .string)
            Attribute("salary", .int64, default: 0).required()
        }
        Entity("TFManager", parent: "TFEmployee") {}
        Entity("TFVisitor") { Attribute("name", .string) }
        FetchRequestTemplate("richerThan", entity: "TFEmployee", predicate: "salary > $MIN")
    }
}

/// Saves employees Ann (10), Bob (20) and manager Cat (30) — inserted by entity name, so no
/// class is registered for any entity — and visitor Dee, in a store in `dir`.
private func seedStore(_ dir: TemporaryDirectory) async throws {
    let coordinator = try openCoordinator(dir, model: try typedFetchModel())
    try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        for (entity, name, salary) in [("TFEmployee", "Ann", 10), ("TFEmployee", "Bob", 20), ("TFManager", "Cat", 30)] {
            let object = try context.insertNewObject(forEntityName: entity)
            object.setValue(name, forKey: "name")
            object.setValue(Int64(salary), forKey: "salary")
        }
        try context.insertNewObject(forEntityName: "TFVisitor").setValue("Dee", forKey: "name")
        try context.save()
    }
}

private let byName = [FetchSortDescriptor(key: "name")]

@Suite("Typed fetch requests (FetchRequest<Result>)")
struct TypedFetchRequestTests {
    @Test("Employee.fetchRequest() is a FetchRequest<Employee> and fetch returns [Employee], in a coordinator where the class was never used")
    func typedFetchRequestOfClass() async throws {
        let dir = try TemporaryDirectory()
        try await seedStore(dir)
        let coordinator = try openCoordinator(dir, model: try typedFetchModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request: FetchRequest<TFEmployee> = TFEmployee.fetchRequest()
            #expect(request.entityName == "TFEmployee")
            request.predicate = try FormatPredicate(format: "salary >= %@", 20)
            request.sortDescriptors = byName
            let employees: [TFEmployee] = try context.fetch(request)
            #expect(employees.map(\.name) == ["Bob", "Cat"], "the sub-entity's object is an employee too")
            #expect(employees.map(\.salary) == [20, 30])
        }
    }

    @Test("FetchRequest<Employee>(entityName:) (and with a format) fetches [Employee]; the class is registered for its entity at fetch time")
    func explicitTypedInit() async throws {
        let dir = try TemporaryDirectory()
        try await seedStore(dir)
        let coordinator = try openCoordinator(dir, model: try typedFetchModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let request = FetchRequest<TFEmployee>(entityName: "TFEmployee", sortDescriptors: byName)
            let employees: [TFEmployee] = try context.fetch(request)
            #expect(employees.map(\.name) == ["Ann", "Bob", "Cat"])
            let formatted = try FetchRequest<TFEmployee>(entityName: "TFEmployee", format: "name BEGINSWITH %@", "A")
            #expect(try context.fetch(formatted).map(\.salary) == [10])
            // Registered now: an untyped fetch makes employees too.
            #expect(try context.fetch(FetchRequest(entityName: "TFEmployee")).allSatisfy { $0 is TFEmployee })
        }
    }

    @Test("a typed request for the parent class returns the sub-entity's objects: as the parent class until the sub-class is registered, then as it")
    func subEntityResults() async throws {
        let dir = try TemporaryDirectory()
        try await seedStore(dir)
        let coordinator = try openCoordinator(dir, model: try typedFetchModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let before = try context.fetch(FetchRequest<TFEmployee>(entityName: "TFEmployee", sortDescriptors: byName))
            #expect(before.map(\.name) == ["Ann", "Bob", "Cat"])
            #expect(before.map { $0 is TFManager } == [false, false, false], "TFManager inherits TFEmployee's class")
        }
        // A new coordinator, with the sub-entity's class registered as well.
        let again = try openCoordinator(dir, model: try typedFetchModel(), classes: [(TFManager.self, "TFManager")])
        try await privateContext(again).perform { (context: isolated ManagedObjectContext) throws in
            let all = try context.fetch(FetchRequest<TFEmployee>(entityName: "TFEmployee", sortDescriptors: byName))
            #expect(all.map(\.name) == ["Ann", "Bob", "Cat"])
            #expect(all.map { $0 is TFManager } == [false, false, true])
            let managers: [TFManager] = try context.fetch(TFManager.fetchRequest())
            #expect(managers.map(\.name) == ["Cat"])
            var own = TFEmployee.fetchRequest()
            own.includesSubentities = false
            #expect(try context.fetch(own).compactMap(\.name).sorted() == ["Ann", "Bob"])
        }
    }

    @Test("a typed request whose objects are of another class throws invalidFetchRequest naming the object, its class and the fix; nothing crashes or is dropped")
    func mismatchThrows() async throws {
        let dir = try TemporaryDirectory()
        try await seedStore(dir)
        // TFVisitor has no class: its objects are plain ManagedObjects.
        let coordinator = try openCoordinator(dir, model: try typedFetchModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            do {
                _ = try context.fetch(FetchRequest<TFEmployee>(entityName: "TFVisitor"))
                Issue.record("fetched TFVisitor objects as TFEmployee")
            } catch ContextError.invalidFetchRequest(let part, let reason) {
                #expect(part == "entityName")
                #expect(reason.contains("FetchRequest<TFEmployee>"), "\(reason)")
                #expect(reason.contains("TFVisitor"), "\(reason)")
                #expect(reason.contains("instance of ManagedObject"), "\(reason)")
                #expect(reason.contains("register"), "\(reason)")
            }
            // The same objects untyped: fine.
            #expect(try context.fetch(FetchRequest(entityName: "TFVisitor")).count == 1)
        }
        // The sub-entity's class registered as an unrelated class: the typed parent fetch throws.
        let again = try openCoordinator(dir, model: try typedFetchModel(), classes: [(TFBadge.self, "TFManager")])
        try await privateContext(again).perform { (context: isolated ManagedObjectContext) throws in
            #expect {
                _ = try context.fetch(TFEmployee.fetchRequest())
            } throws: { error in
                guard case ContextError.invalidFetchRequest("entityName", let reason) = error else { return false }
                return reason.contains("TFBadge") && reason.contains("TFManager")
            }
            // Without the sub-entity there is no stray object.
            var own = TFEmployee.fetchRequest()
            own.includesSubentities = false
            #expect(try context.fetch(own).count == 2)
            // fetch(_:as:) keeps its documented behaviour: objects of another class left out.
            #expect(try context.fetch(FetchRequest(entityName: "TFEmployee"), as: TFEmployee.self).count == 2)
        }
    }

    @Test("count, object IDs, dictionaries, execute, explain, batch delete and a results controller take typed requests")
    func otherResultsWithTypedRequests() async throws {
        let dir = try TemporaryDirectory()
        try await seedStore(dir)
        let coordinator = try openCoordinator(dir, model: try typedFetchModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = TFEmployee.fetchRequest()
            request.sortDescriptors = byName
            #expect(try context.count(for: request) == 3)
            let ids = try context.fetchObjectIDs(request)
            #expect(ids == (try context.fetch(request)).map(\.objectID))
            var dictionaries = request
            dictionaries.resultType = .dictionary
            dictionaries.propertiesToFetch = ["name"]
            #expect(try context.fetchDictionaries(dictionaries).compactMap { $0["name"] as? String } == ["Ann", "Bob", "Cat"])
            guard case .dictionaries(let rows) = try context.execute(dictionaries) else {
                Issue.record("execute of a dictionary request")
                return
            }
            #expect(rows.count == 3)
            #expect("\(try context.explain(request))".contains("TFEmployee"))

            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            try controller.performFetch()
            let shown: [TFEmployee]? = controller.fetchedObjects
            #expect(shown?.map(\.name) == ["Ann", "Bob", "Cat"])
            #expect(controller.object(at: IndexPath(row: 2, section: 0)).salary == 30)

            let delete = BatchDeleteRequest(fetchRequest: try FetchRequest<TFEmployee>(entityName: "TFEmployee", format: "salary < 15"))
            _ = try context.execute(delete)
            #expect(try context.count(for: FetchRequest<TFEmployee>(entityName: "TFEmployee")) == 2)
        }
    }

    @Test("the untyped forms still infer FetchRequest<ManagedObject> and fetch [ManagedObject]; #Predicate<T> infers FetchRequest<T>; templates are untyped")
    func untypedFormsInferManagedObject() async throws {
        let dir = try TemporaryDirectory()
        try await seedStore(dir)
        let coordinator = try openCoordinator(dir, model: try typedFetchModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let plain = FetchRequest(entityName: "TFVisitor")
            #expect(type(of: plain) == FetchRequest<ManagedObject>.self)
            let formatted = try FetchRequest(entityName: "TFVisitor", format: "name == %@", "Dee")
            #expect(type(of: formatted) == FetchRequest<ManagedObject>.self)
            let predicated = FetchRequest(entityName: "TFVisitor", predicate: try FormatPredicate(format: "name != nil"), sortDescriptors: byName)
            #expect(type(of: predicated) == FetchRequest<ManagedObject>.self)
            let explicit = FetchRequest<ManagedObject>(entityName: "TFVisitor")
            #expect(explicit.resultClass == nil, "no class to register for a ManagedObject request")
            let objects = try context.fetch(formatted)
            #expect(type(of: objects) == [ManagedObject].self)
            #expect(objects.map { $0.value(forKey: "name") as? String } == ["Dee"])
            // A #Predicate over a class makes a request of that class.
            let swift = FetchRequest(entityName: "TFEmployee", predicate: #Predicate<TFEmployee> { $0.salary > 15 }, sortDescriptors: byName)
            #expect(type(of: swift) == FetchRequest<TFEmployee>.self)
            #expect(try context.fetch(swift).map(\.name) == ["Bob", "Cat"])
            // Templates are untyped, and still fetch.
            let model = try typedFetchModel()
            var template = try #require(try model.fetchRequestTemplate(forName: "richerThan"))
            #expect(type(of: template) == FetchRequest<ManagedObject>.self)
            template.substitutionVariables = ["MIN": .int64(15)]
            #expect(try context.count(for: template) == 2)
            let filled = try #require(try model.fetchRequestFromTemplate(withName: "richerThan", substitutionVariables: ["MIN": 25]))
            #expect(type(of: filled) == FetchRequest<ManagedObject>.self)
            #expect(try context.fetch(filled).count == 1)
            // A class's own fetchRequest() is the one used.
            #expect(type(of: TFStaffer.fetchRequest()) == FetchRequest<TFStaffer>.self)
            #expect(TFStaffer.fetchRequest().entityName == "TFVisitor")
            // Through a metatype the request is untyped, of the dynamic class's entity.
            let metatype: ManagedObject.Type = TFEmployee.self
            #expect(metatype.fetchRequest().entityName == "TFEmployee")
        }
    }

    @Test("a class whose entity is named otherwise: its own fetchRequest() fetches typed once the class is registered for the entity")
    func ownFetchRequestForOtherEntityName() async throws {
        let dir = try TemporaryDirectory()
        try await seedStore(dir)
        let coordinator = try openCoordinator(dir, model: try typedFetchModel(), classes: [(TFStaffer.self, "TFVisitor")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let staff: [TFStaffer] = try context.fetch(TFStaffer.fetchRequest())
            #expect(staff.map { $0.value(forKey: "name") as? String } == ["Dee"])
        }
    }

    @Test("a typed request converted for the context keeps every part: the retyped copy reads the same, field by field")
    func retypingKeepsEveryPart() throws {
        var request = try FetchRequest<TFEmployee>(entityName: "TFEmployee", format: "salary > $MIN")
        request.includesSubentities = false
        request.substitutionVariables = ["MIN": .int64(3)]
        request.sortDescriptors = byName
        request.fetchLimit = 4
        request.fetchOffset = 1
        request.includesPendingChanges = false
        request.filter { _ in true }
        request.resultType = .dictionary
        request.fetchBatchSize = 7
        request.returnsObjectsAsFaults = false
        request.includesPropertyValues = false
        request.shouldRefreshRefetchedObjects = true
        request.relationshipKeyPathsForPrefetching = ["x"]
        request.propertiesToFetch = ["name"]
        request.propertiesToGroupBy = ["name"]
        request.havingPredicate = try FormatPredicate(format: "name != nil")
        request.returnsDistinctResults = true
        request.affectedStores = []
        let erased = request.erased
        let original = Mirror(reflecting: request).children.map { "\($0.label ?? "?")=\(String(describing: $0.value))" }
        let copied = Mirror(reflecting: erased).children.map { "\($0.label ?? "?")=\(String(describing: $0.value))" }
        #expect(original == copied)
        #expect(erased.resultClass == TFEmployee.self, "the class to register goes with the request")
    }
}
