import Foundation
import Strata
import StrataTestSupport
import Testing

/// Batch updates whose values are expressions of the object's own attributes (Core Data's
/// `NSBatchUpdateRequest` with `NSExpression` values; spec 0006 §20.3), and
/// `FormatExpression.expressionValue(with:)` (Core Data's `expressionValue(with:context:)`).
@Suite("Batch update with expression values: evaluated per object against its stored values")
struct BatchUpdateExpressionTests {
    func log(_ coordinator: PersistentStoreCoordinator) -> EventLog { coordinator.persistentStores[0].log }

    func head(_ coordinator: PersistentStoreCoordinator) throws -> UInt64 { try log(coordinator).read { try $0.head } }

    /// Each stored customer's `key` values, by email.
    func stored(_ coordinator: PersistentStoreCoordinator, _ keys: [String]) async throws -> [String: [String]] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var rows: [String: [String]] = [:]
            for customer in try context.fetch(FetchRequest(entityName: "Customer")) {
                rows[customer.value(forKey: "email") as? String ?? "?"] = keys.map { key in customer.value(forKey: key).map { "\($0)" } ?? "nil" }
            }
            return rows
        }
    }

    /// Five customers c1…c5 (age 21…25), scores 1.0, 2.0, nil, 4.0, 5.0.
    func fiveCustomers(_ context: isolated ManagedObjectContext) throws {
        var rows = BatchRequestTests.customers(5)
        for index in rows.indices where index != 2 { rows[index]["score"] = Double(index + 1) }
        _ = try context.execute(BatchInsertRequest(entityName: "Customer", objects: rows))
    }

    @Test("score * 1.5 and age + 10 for the predicate's objects, with a constant beside them: before/after per object in one import event; index follows; reopened; verify clean")
    func arithmeticPerObject() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let result = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try fiveCustomers(context)
            var request = BatchUpdateRequest(entityName: "Customer")
            request.predicate = try FormatPredicate(format: "age >= 22")
            request.propertiesToUpdate = [
                "score": try FormatExpression(format: "score * 1.5"),
                "age": try FormatExpression(format: "age + 10"),
                "name": "Raised",
            ]
            request.resultType = .objectIDs
            return try context.execute(request)
        }
        #expect(result.objectIDs?.map { $0.uriRepresentation().lastPathComponent } == ["p2", "p3", "p4", "p5"])
        let sequence = try #require(result.sequence)
        let event = try log(coordinator).read { try $0.event(sequence) }
        #expect(event.kind == .import && event.changes.count == 4)
        for change in event.changes {
            guard case .update(let id, let changes) = change else {
                Issue.record("expected an update, got \(change)")
                continue
            }
            let byName = Dictionary(uniqueKeysWithValues: changes.map { ($0.property, $0) })
            let pk = Int32(id.primaryKey)
            #expect(byName["age"] == .value(property: "age", before: .attribute(.int32(20 + pk)), after: .attribute(.int32(30 + pk))))
            // A nil score stays nil (nil * 1.5 is nil, as SQL's NULL): not recorded as a change.
            if pk == 3 {
                #expect(byName["score"] == nil)
            } else {
                #expect(byName["score"] == .value(property: "score", before: .attribute(.double(Double(pk))), after: .attribute(.double(Double(pk) * 1.5))))
            }
        }
        let reopened = try openCoordinator(dir, model: try BatchModels.shop)
        #expect(try await stored(reopened, ["age", "score", "name"]) == [
            "c1@example.com": ["21", "1.0", "C1"], "c2@example.com": ["32", "3.0", "Raised"], "c3@example.com": ["33", "nil", "Raised"],
            "c4@example.com": ["34", "6.0", "Raised"], "c5@example.com": ["35", "7.5", "Raised"],
        ])
        // The indexed age moved with the values: the index answers the new ages only.
        let found = try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(try FetchRequest(entityName: "Customer", format: "age == 32 OR age == 22")).compactMap { $0.value(forKey: "email") as? String }
        }
        #expect(found == ["c2@example.com"])
        #expect(try log(reopened).verify().isClean)
    }

    @Test("every expression reads the values as stored before the update: name and email swap")
    func swapReadsBeforeValues() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchInsertRequest(entityName: "Customer", objects: BatchRequestTests.customers(2)))
            var request = BatchUpdateRequest(entityName: "Customer")
            request.propertiesToUpdate = ["name": try FormatExpression(format: "email"), "email": try FormatExpression(format: "name")]
            _ = try context.execute(request)
        }
        #expect(try await stored(coordinator, ["name"]) == ["C1": ["c1@example.com"], "C2": ["c2@example.com"]])
    }

    @Test("an expression reading nothing of the object is one value for all; one giving the stored values writes nothing")
    func constantsAndNoChange() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            try fiveCustomers(context)
            var constant = BatchUpdateRequest(entityName: "Customer")
            constant.propertiesToUpdate = ["score": try FormatExpression(format: "2 + 0.5"), "name": try FormatExpression(format: "uppercase('x')")]
            _ = try context.execute(constant)
        }
        #expect(try await stored(coordinator, ["score", "name"]).values.allSatisfy { $0 == ["2.5", "X"] })
        let before = try head(coordinator)
        let result = try await context.perform { (context: isolated ManagedObjectContext) throws in
            var same = BatchUpdateRequest(entityName: "Customer")
            same.propertiesToUpdate = ["score": try FormatExpression(format: "score * 1"), "age": try FormatExpression(format: "age")]
            same.resultType = .count
            return try context.execute(same)
        }
        #expect(result.count == 5 && result.sequence == nil)
        #expect(try head(coordinator) == before)
    }

    @Test("expressions reading a relationship, a transient or unknown key, SELF, a variable or a subquery are refused before anything is written, naming the key")
    func refusedExpressions() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in try fiveCustomers(context) }
        let before = try head(coordinator)
        let cases: [(format: String, mentions: String)] = [
            ("team.name", "team is a relationship"),
            ("orders.@count", "orders is a relationship"),
            ("nickname", "nickname is transient"),
            ("height * 2", "no attribute \"height\""),
            ("SELF", "SELF has no value"),
            ("$bonus + 1", "$bonus"),
            ("SUBQUERY(orders, $o, $o.total > 1).@count", "SUBQUERY"),
        ]
        for (format, mentions) in cases {
            await #expect {
                try await context.perform { (context: isolated ManagedObjectContext) throws in
                    var request = BatchUpdateRequest(entityName: "Customer")
                    request.propertiesToUpdate = ["name": try FormatExpression(format: format)]
                    _ = try context.execute(request)
                }
            } throws: { error in
                guard case ContextError.invalidArgument(let detail) = error else { return false }
                return detail.contains("batch update of Customer: name = ") && detail.contains(mentions)
            }
        }
        #expect(try head(coordinator) == before)
    }

    @Test("an evaluation failing for one object, or a result the attribute can't hold, refuses the whole request naming the object; nothing is written")
    func failureForOneObjectRefusesAll() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in try fiveCustomers(context) }
        let before = try head(coordinator)
        // c2's age is 22: integer division by zero for that object only.
        await #expect {
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                var request = BatchUpdateRequest(entityName: "Customer")
                request.propertiesToUpdate = ["age": try FormatExpression(format: "age / (age - 22)")]
                _ = try context.execute(request)
            }
        } throws: { error in
            guard case ContextError.invalidArgument(let detail) = error else { return false }
            return detail.contains("/Customer/p2") && detail.contains("division by zero")
        }
        // Past Int32's range (age is Integer 32).
        await #expect {
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                var request = BatchUpdateRequest(entityName: "Customer")
                request.predicate = try FormatPredicate(format: "age >= 24")
                request.propertiesToUpdate = ["age": try FormatExpression(format: "age * 1000000000")]
                _ = try context.execute(request)
            }
        } throws: { error in
            guard case ContextError.invalidArgument(let detail) = error else { return false }
            return detail.contains("/Customer/p4") && detail.contains("gave 24000000000")
        }
        #expect(try head(coordinator) == before)
        #expect(try await stored(coordinator, ["age"])["c4@example.com"] == ["24"])
    }

    @Test("FormatExpression.expressionValue(with:): key paths from a dictionary or an object, variables, nil arithmetic; a hand-built tree too deep is an error")
    func expressionValue() throws {
        #expect(try FormatExpression(format: "salary * 2").expressionValue(with: ["salary": 1000]) as? Int == 2000)
        #expect(try FormatExpression(format: "salary * 1.5").expressionValue(with: ["salary": 1000]) as? Double == 1500)
        #expect(try FormatExpression(format: "salary + $bonus").expressionValue(with: ["salary": 10], substitutionVariables: ["bonus": 5]) as? Int == 15)
        #expect(try FormatExpression(format: "salary + 1").expressionValue(with: [String: Any]()) == nil)
        #expect(try FormatExpression(format: "lowercase(name)").expressionValue(with: ["name": "ÄB"]) as? String == "äb")
        #expect(throws: (any Error).self) { try FormatExpression(format: "salary + $missing").expressionValue(with: ["salary": 1]) }
        var deep = FormatExpression.constant(.integer(1))
        for _ in 0..<(FormatPredicate.maximumNestingDepth + 10) { deep = .arithmetic(.add, deep, .constant(.integer(1))) }
        #expect {
            try deep.expressionValue(with: nil)
        } throws: { error in
            (error as? FormatPredicateError)?.kind == .nestingTooDeep
        }
    }
}
