import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// A merge policy of the app's own, for the refusal test.
struct KeepEverythingPolicy: MergePolicy {
    func resolve(optimisticLockingConflicts conflicts: [MergeConflict], in context: isolated ManagedObjectContext) throws {}
    func resolve(constraintConflicts conflicts: [ConstraintConflict], in context: isolated ManagedObjectContext) throws {}
}

/// Batch insert on a constrained entity under the standard merge policies: Core Data's upsert
/// (spec 0006 §20.2).
@Suite("Batch insert: upsert on uniqueness constraints")
struct BatchUpsertTests {
    /// A store holding c1 (name C1, age 21, no score) and c2 (C2, 22), each with a team.
    static func store(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, [String: ManagedObjectID]) {
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            var ids: [String: ManagedObjectID] = [:]
            for number in 1...2 {
                let customer = try context.insertNewObject(forEntityName: "Customer")
                customer.setValue("c\(number)@example.com", forKey: "email")
                customer.setValue("C\(number)", forKey: "name")
                customer.setValue(Int32(20 + number), forKey: "age")
                customer.setValue(team, forKey: "team")
                try context.obtainPermanentIDs(for: [customer])
                ids["c\(number)"] = customer.objectID
            }
            try context.save()
            return ids
        }
        return (coordinator, ids)
    }

    /// Every stored customer: email → (name, age, score, team name).
    static func customers(_ coordinator: PersistentStoreCoordinator) async throws -> [String: Row] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var rows: [String: Row] = [:]
            for customer in try context.fetch(FetchRequest(entityName: "Customer")) {
                rows[customer.value(forKey: "email") as? String ?? "?"] = Row(
                    name: customer.value(forKey: "name") as? String, age: customer.value(forKey: "age") as? Int32,
                    score: customer.value(forKey: "score") as? Double,
                    team: (customer.value(forKey: "team") as? ManagedObject)?.value(forKey: "name") as? String)
            }
            return rows
        }
    }

    struct Row: Equatable, CustomStringConvertible {
        var name: String?
        var age: Int32?
        var score: Double?
        var team: String?
        var description: String { "(\(name ?? "nil"), \(age.map(String.init) ?? "nil"), \(score.map { "\($0)" } ?? "nil"), \(team ?? "nil"))" }
    }

    /// The rows every policy case inserts: c1 again (a new name and a score, no age: the
    /// default 18 applies), a new customer twice (the second adds a score), and a new one.
    static let rows: [[String: any Sendable]] = [
        ["email": "c1@example.com", "name": "New1", "score": 5.0],
        ["email": "x@example.com", "name": "X-first"],
        ["email": "x@example.com", "name": "X-second", "score": 1.5],
        ["email": "y@example.com", "name": "Y"],
    ]

    @Test(
        "each standard policy merges clashing rows into the object holding the values by its constraint rule; one import transaction; each object named once",
        arguments: [
            (StandardMergePolicy.PolicyType.mergeByPropertyObjectTrump, Row(name: "New1", age: 18, score: 5.0, team: "Otters"),
             Row(name: "X-second", age: 18, score: 1.5)),
            (.mergeByPropertyStoreTrump, Row(name: "C1", age: 21, score: 5.0, team: "Otters"), Row(name: "X-first", age: 18, score: 1.5)),
            (.overwrite, Row(name: "New1", age: 18, score: 5.0, team: "Otters"), Row(name: "X-second", age: 18, score: 1.5)),
            (.rollback, Row(name: "C1", age: 21, score: nil, team: "Otters"), Row(name: "X-first", age: 18, score: nil)),
        ])
    func policies(policy: StandardMergePolicy.PolicyType, c1: Row, x: Row) async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await Self.store(dir)
        let log = coordinator.persistentStores[0].log
        let headBefore = try log.head
        let result = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = StandardMergePolicy(policy)
            var request = BatchInsertRequest(entityName: "Customer", objects: Self.rows)
            request.resultType = .objectIDs
            return try context.execute(request)
        }
        let stored = try await Self.customers(coordinator)
        #expect(stored.count == 4, "c1, c2, x, y: \(stored)")
        #expect(stored["c1@example.com"] == c1, "c1 under \(policy)")
        #expect(stored["x@example.com"] == x, "x under \(policy)")
        #expect(stored["y@example.com"] == Row(name: "Y", age: 18))
        #expect(stored["c2@example.com"] == Row(name: "C2", age: 22, team: "Otters"), "untouched")
        // The result names c1, x and y once each, in the order the rows first reached them.
        let named = try #require(result.objectIDs)
        #expect(named.count == 3)
        #expect(named.first == ids["c1"])
        #expect(Set(named).count == 3 && !named.contains(ids["c2"] ?? named[0]))
        // One transaction of kind import: c1's update (when it changed) and two inserts.
        #expect(try log.head == headBefore + 1)
        let event = try log.read { try $0.event(headBefore + 1) }
        #expect(event.kind == .import)
        let updates = event.changes.filter { if case .update = $0 { true } else { false } }
        let inserts = event.changes.filter { if case .insert = $0 { true } else { false } }
        #expect(inserts.count == 2)
        #expect(updates.count == (policy == .rollback ? 0 : 1))
        #expect(try log.verify().isClean)
    }

    @Test("an update keeps before-images: as-of the previous sequence the stored object has its old values; the result's count counts objects")
    func beforeImagesAndCount() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await Self.store(dir)
        let log = coordinator.persistentStores[0].log
        let headBefore = try log.head
        let result = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .mergeByPropertyObjectTrump
            var request = BatchInsertRequest(entityName: "Customer", objects: [
                ["email": "c2@example.com", "name": "Renamed", "age": Int32(40)], ["email": "c2@example.com", "score": 9.0],
            ])
            request.resultType = .count
            return try context.execute(request)
        }
        #expect(result.count == 1)
        let c2 = try #require(ids["c2"]?.uriRepresentation().lastPathComponent)
        let key = try #require(UInt64(c2.dropFirst()))
        let then = try #require(try log.read { try $0.object(StoredObjectID(entity: "Customer", primaryKey: key), asOf: headBefore) })
        #expect(then["name"] == .attribute(.string("C2")))
        let now = try await Self.customers(coordinator)
        // The second row's default age (18) wins under object-trump, as the inserted object's
        // default would in a context's upsert.
        #expect(now["c2@example.com"] == Row(name: "Renamed", age: 18, score: 9.0, team: "Otters"))
    }

    @Test("rows that change nothing write nothing; the result still names the objects")
    func nothingChanged() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await Self.store(dir)
        let headBefore = try coordinator.persistentStores[0].log.head
        let result = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .rollback
            var request = BatchInsertRequest(entityName: "Customer", objects: [["email": "c2@example.com", "name": "Other"], ["email": "c1@example.com"]])
            request.resultType = .objectIDs
            return try context.execute(request)
        }
        #expect(result.sequence == nil)
        #expect(result.objectIDs == [ids["c2"], ids["c1"]].compactMap { $0 })
        #expect(try coordinator.persistentStores[0].log.head == headBefore)
    }

    @Test("refused, nothing written: the error policy and a custom policy (each with a hint), and a row holding the values of two different objects")
    func refusals() async throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Product") {
                Attribute("serial", .string)
                Attribute("sku", .string)
                Attribute("name", .string)
                Unique("serial")
                Unique("sku")
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchInsertRequest(entityName: "Product", objects: [["serial": "S1", "sku": "K1"], ["serial": "S2", "sku": "K2"]]))
        }
        let log = coordinator.persistentStores[0].log
        let headBefore = try log.head
        let cases: [(any MergePolicy, [[String: any Sendable]], String)] = [
            (StandardMergePolicy.error, [["serial": "S1", "name": "again"]], "set the context's mergePolicy to a policy other than .error"),
            (KeepEverythingPolicy(), [["serial": "S1", "name": "again"]], "under the standard merge policies only"),
            (StandardMergePolicy.mergeByPropertyObjectTrump, [["serial": "S3"], ["serial": "S1", "sku": "K2"]],
             "object 2 has the constrained values of 2 different objects"),
        ]
        for (policy, rows, expected) in cases {
            await #expect {
                try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                    context.mergePolicy = policy
                    _ = try context.execute(BatchInsertRequest(entityName: "Product", objects: rows))
                }
            } throws: { error in
                guard case ContextError.storeRefused(let detail) = error else { return false }
                return detail.contains(expected) && detail.contains("nothing was written")
            }
        }
        #expect(try log.head == headBefore)
        // Upserting by the second constraint works too.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .mergeByPropertyObjectTrump
            _ = try context.execute(BatchInsertRequest(entityName: "Product", objects: [["sku": "K2", "name": "two"], ["serial": "S9", "sku": "K9"]]))
            let products = try context.fetch(FetchRequest(entityName: "Product", sortDescriptors: [FetchSortDescriptor(key: "sku")]))
            #expect(products.map { $0.value(forKey: "sku") as? String } == ["K1", "K2", "K9"])
            #expect(products[1].value(forKey: "serial") as? String == "S2")
            #expect(products[1].value(forKey: "name") as? String == "two")
        }
        #expect(try log.verify().isClean)
    }

    @Test("a constraint declared on a superentity matches objects of a sibling sub-entity only when they have the row's attributes")
    func inheritedConstraint() async throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Account", abstract: true) {
                Attribute("handle", .string)
                Attribute("name", .string)
                Unique("handle")
            }
            Entity("Person", parent: "Account") {
                Attribute("age", .int64)
            }
            Entity("Company", parent: "Account") {
                Attribute("vat", .string)
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchInsertRequest(entityName: "Company", objects: [["handle": "acme", "vat": "V1"]]))
            context.mergePolicy = .mergeByPropertyObjectTrump
            // The company holds "acme": a person row with only shared attributes updates it.
            var request = BatchInsertRequest(entityName: "Person", objects: [["handle": "acme", "name": "Acme Ltd"]])
            request.resultType = .objectIDs
            let named = try #require(try context.execute(request).objectIDs)
            #expect(named.map(\.entityName) == ["Company"])
            // A person row with an attribute companies lack is refused, naming the object.
            #expect {
                try context.execute(BatchInsertRequest(entityName: "Person", objects: [["handle": "acme", "age": Int64(3)]]))
            } throws: { error in
                guard case ContextError.storeRefused(let detail) = error else { return false }
                return detail.contains("entity Company, which lacks some of its attributes")
            }
            let accounts = try context.fetch(FetchRequest(entityName: "Account"))
            #expect(accounts.count == 1)
            #expect(accounts.first?.value(forKey: "name") as? String == "Acme Ltd")
        }
    }
}
