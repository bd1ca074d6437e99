import Foundation
import Strata
import StrataTestSupport
import Testing

@Suite("Fetch path: regressions from review")
struct FetchPathRegressionTests {
    /// Three indexed integers.
    static var abcModel: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Thing") {
                    Attribute("a", .int64).indexed()
                    Attribute("b", .int64).indexed()
                    Attribute("c", .int64).indexed()
                }
            }
        }
    }

    @Test("an index union chosen over a narrower union judges its rows by what that union answers")
    func unionResidual() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.abcModel)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for _ in 0..<4100 {
                let thing = try context.insertNewObject(forEntityName: "Thing")
                thing.setValue(Int64(1), forKey: "a")
                thing.setValue(Int64(0), forKey: "b")
                thing.setValue(Int64(0), forKey: "c")
            }
            let odd = try context.insertNewObject(forEntityName: "Thing")
            odd.setValue(Int64(0), forKey: "a")
            odd.setValue(Int64(0), forKey: "b")
            odd.setValue(Int64(3), forKey: "c")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Logically the same as (a == 1 OR b == 2): the object with c == 3 doesn't match.
            let request = FetchRequest(
                entityName: "Thing", predicate: try FormatPredicate(format: "(a == 1 OR b == 2 OR c == 3) AND (a == 1 OR b == 2)"))
            let plan = try context.explain(request)
            #expect(plan.description.hasPrefix("index union"), "\(plan)")
            // The OR every member answers is dropped; the one the c == 3 member doesn't stays.
            #expect(plan.description.hasSuffix("then filter (a == 1 OR b == 2)"), "\(plan)")
            let found = try context.fetch(request)
            #expect(found.count == 4100)
            #expect(found.allSatisfy { $0.value(forKey: "a") as? Int64 == 1 })
            #expect(try context.count(for: request) == 4100)
        }
    }

    /// Person (desk, name) and its sub-entity Employee: `desk` has slot 0 in Person and slot 1
    /// in Employee (a1, desk, name, zz), or slot 2 (a1, a2, desk, name) — past the end of a
    /// Person's row.
    static func deskModel(secondAttribute: String) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Person") {
                Attribute("name", .string)
                Relationship("desk", to: "Desk", inverse: "occupant")
            }
            Entity("Employee", parent: "Person") {
                Attribute("a1", .string)
                Attribute(secondAttribute, .string)
            }
            Entity("Desk") {
                Attribute("label", .string)
                Relationship("occupant", to: "Person", inverse: "desk")
            }
        }
    }

    @Test(
        "giving an employee the desk of a fetched person, then undoing, gives the person the desk back",
        arguments: ["zz", "a2"])
    func inverseAcrossSubentities(secondAttribute: String) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.deskModel(secondAttribute: secondAttribute))
        let (personID, deskID, employeeID) = try await privateContext(coordinator).perform {
            (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("p", forKey: "name")
            let desk = try context.insertNewObject(forEntityName: "Desk")
            desk.setValue("d", forKey: "label")
            person.setValue(desk, forKey: "desk")
            let employee = try context.insertNewObject(forEntityName: "Employee")
            employee.setValue("e", forKey: "name")
            employee.setValue("x", forKey: "a1")
            try context.save()
            return (person.objectID, desk.objectID, employee.objectID)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Person")
            request.includesSubentities = false
            let people = try context.fetch(request)
            let person = try #require(people.first { $0.objectID == personID })
            #expect(person.value(forKey: "name") as? String == "p")  // fires the fault from the fetched row
            let desk = try context.existingObject(with: deskID)
            let employee = try context.existingObject(with: employeeID)
            context.processPendingChanges()
            employee.setValue(desk, forKey: "desk")
            #expect(person.value(forKey: "desk") == nil)
            context.processPendingChanges()
            try context.undo()
            #expect((person.value(forKey: "desk") as? ManagedObject)?.objectID == deskID)
            #expect(employee.value(forKey: "desk") == nil)
        }
    }

    @Test("a sort on one string key orders as Swift orders the strings: shared 8-byte prefixes, NULs, non-ASCII, nil, ties in store order")
    func stringSortMatchesSwiftOrder() async throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Word") {
                Attribute("text", .string)
                Attribute("n", .int64)
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        var random = SystemRandomNumberGenerator()
        let alphabet: [String] = ["a", "b", "A", "\u{0}", "abcdefgh", "abcdefghi", "abcdefgh\u{0}", "zzzzzzzz", "~"]
        var asciiTexts: [String] = []
        for _ in 0..<300 {
            asciiTexts.append((0..<Int.random(in: 0...3, using: &random)).map { _ in alphabet.randomElement(using: &random) ?? "" }.joined())
        }
        // The same words once with a non-ASCII one among them: e + combining acute sorts as é.
        for extra in [[], ["e\u{301}", "\u{e9}", "abcdefghé"]] as [[String]] {
            let texts: [String?] = asciiTexts + extra + [nil, nil]
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                for word in try context.fetch(FetchRequest(entityName: "Word")) { context.delete(word) }
                for (n, text) in texts.enumerated() {
                    let word = try context.insertNewObject(forEntityName: "Word")
                    word.setValue(text, forKey: "text")
                    word.setValue(Int64(n), forKey: "n")
                }
                try context.save()
            }
            for ascending in [true, false] {
                try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                    let found = try context.fetch(
                        FetchRequest(entityName: "Word", sortDescriptors: [FetchSortDescriptor(key: "text", ascending: ascending)]))
                    let got = found.map { ($0.value(forKey: "text") as? String, $0.value(forKey: "n") as? Int64 ?? -1) }
                    // Expected: nil first when ascending (last when descending), strings in
                    // Swift's order, ties in insertion (store) order.
                    let expected = texts.enumerated().map { ($0.element, Int64($0.offset)) }.sorted { x, y in
                        switch (x.0, y.0) {
                        case (nil, nil): return x.1 < y.1
                        case (nil, _): return ascending
                        case (_, nil): return !ascending
                        case (let a?, let b?):
                            if a != b { return ascending ? a < b : b < a }
                            return x.1 < y.1
                        }
                    }
                    #expect(got.map(\.0) == expected.map(\.0))
                    #expect(got.map(\.1) == expected.map(\.1))
                }
            }
        }
    }
}
