import Foundation
import GRDB
import Strata

// Batch requests (spec 0006 §20), against GRDB doing the same in one SQLite transaction:
//
// B1  batch insert of N people (`BatchInsertRequest`, one import transaction) vs GRDB
//     inserting the same rows (`insert(db)` each, one write transaction). No teams: a batch
//     insert can't set relationships (as Core Data's), so the GRDB rows get no team either.
// B2  batch update of every person's score (`BatchUpdateRequest`, no predicate) vs GRDB's
//     `updateAll`.
// B3  batch delete of every person (`BatchDeleteRequest`, no predicate) vs GRDB's `deleteAll`.
//
// Each round starts from a fresh store holding the N people (untimed); rounds alternate
// Strata / GRDB and the figure is the median of the per-round ratios.

func runBatchBenchmarks(objects: Int, repetitions: Int) throws {
    heading("Batch requests: insert, update and delete of \(objects) people, vs GRDB")
    let model = try peopleModel()
    let people = makePeople(objects)
    let rows: [[String: any Sendable]] = people.map { row in
        ["firstName": row.firstName, "lastName": row.lastName, "email": row.email, "age": row.age, "score": row.score]
    }
    var grdbPeople = people.map(GRDBPerson.init)
    for index in grdbPeople.indices { grdbPeople[index].teamId = 0 }
    let base = try scratchDirectory("batch")
    defer { remove(base) }
    var round = 0

    func strataStore(filled: Bool) throws -> (directory: String, context: ManagedObjectContext) {
        round += 1
        let directory = (base as NSString).appendingPathComponent("strata-\(round)")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(
            type: .eventLog, at: URL(fileURLWithPath: directory).appendingPathComponent("store"), configuration: benchConfiguration())
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "bench", transactionAuthor: "bench")
        if filled {
            try context.performAndWait { (context: isolated ManagedObjectContext) throws in
                _ = try context.execute(BatchInsertRequest(entityName: "Person", objects: rows))
            }
        }
        return (directory, context)
    }

    func grdbStore(filled: Bool) throws -> (directory: String, queue: DatabaseQueue) {
        round += 1
        let directory = (base as NSString).appendingPathComponent("grdb-\(round)")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let queue = try makeGRDBDatabase(in: directory)
        // No team rows (Strata's batch-inserted people have no team): foreign keys off, so
        // the rows' teamId 0 references nothing.
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA foreign_keys = OFF") }
        if filled { try queue.write { db in for person in grdbPeople { try person.insert(db) } } }
        return (directory, queue)
    }

    enum Operation { case insert, update, delete }
    func strataRound(_ operation: Operation) throws -> Duration {
        try timedRound(
            setup: { try strataStore(filled: operation != .insert) },
            body: { store in
                let result = try store.context.performAndWait { (context: isolated ManagedObjectContext) throws -> BatchResult in
                    switch operation {
                    case .insert:
                        var request = BatchInsertRequest(entityName: "Person", objects: rows)
                        request.resultType = .count
                        return try context.execute(request)
                    case .update:
                        var request = BatchUpdateRequest(entityName: "Person")
                        request.propertiesToUpdate = ["score": -1.0]
                        request.resultType = .count
                        return try context.execute(request)
                    case .delete:
                        var request = BatchDeleteRequest(fetchRequest: FetchRequest(entityName: "Person"))
                        request.resultType = .count
                        return try context.execute(request)
                    }
                }
                guard result.count == objects else { throw BatchBenchmarkError(description: "Strata changed \(result.count ?? -1) people, not \(objects)") }
            },
            teardown: { store in remove(store.directory) })
    }

    func grdbRound(filled: Bool, _ body: (Database) throws -> Int) throws -> Duration {
        try timedRound(
            setup: { try grdbStore(filled: filled) },
            body: { store in
                let changed = try store.queue.write { db in try body(db) }
                guard changed == objects else { throw BatchBenchmarkError(description: "GRDB changed \(changed) people, not \(objects)") }
            },
            teardown: { store in remove(store.directory) })
    }

    let b1 = try measureAlternately(
        "B1 Strata BatchInsertRequest", "B1 GRDB insert, one transaction", repetitions: repetitions,
        { try strataRound(.insert) },
        {
            try grdbRound(filled: false) { db in
                for person in grdbPeople { try person.insert(db) }
                return grdbPeople.count
            }
        })
    say("  B1 Strata / GRDB (paired median): \(String(format: "%.2f×", b1.pairedRatio))")
    record("B1 batch insert", "Strata / GRDB", String(format: "%.2f×", b1.pairedRatio))
    record("B1 batch insert", "Strata, GRDB median", "\(format(b1.a.median)), \(format(b1.b.median))")

    let b2 = try measureAlternately(
        "B2 Strata BatchUpdateRequest (score)", "B2 GRDB updateAll (score)", repetitions: repetitions,
        { try strataRound(.update) },
        { try grdbRound(filled: true) { db in try GRDBPerson.updateAll(db, Column("score").set(to: -1.0)) } })
    say("  B2 Strata / GRDB (paired median): \(String(format: "%.2f×", b2.pairedRatio))")
    record("B2 batch update", "Strata / GRDB", String(format: "%.2f×", b2.pairedRatio))
    record("B2 batch update", "Strata, GRDB median", "\(format(b2.a.median)), \(format(b2.b.median))")

    let b3 = try measureAlternately(
        "B3 Strata BatchDeleteRequest (all)", "B3 GRDB deleteAll", repetitions: repetitions,
        { try strataRound(.delete) },
        { try grdbRound(filled: true) { db in try GRDBPerson.deleteAll(db) } })
    say("  B3 Strata / GRDB (paired median): \(String(format: "%.2f×", b3.pairedRatio))")
    record("B3 batch delete", "Strata / GRDB", String(format: "%.2f×", b3.pairedRatio))
    record("B3 batch delete", "Strata, GRDB median", "\(format(b3.a.median)), \(format(b3.b.median))")
}

struct BatchBenchmarkError: Error, CustomStringConvertible {
    let description: String
}
