import Foundation
import Strata

// Reverting a saved transaction (spec 0006 §25), `revert` filter; no target in the issues.
//
// RV1. In a store of `objects` members {name, email (indexed), score, team}, a context's save
//      that changes `changes` members' score, then a fresh context's revertTransaction(at:)
//      of it and its save — against making and saving the change (the ratio C4 quotes for
//      undo). Each round's revert brings the store back, so the rounds repeat on one store.
// RV2. The same with a save inserting `changes` members: the revert deletes them, after
//      checking each one's later history and links.

func runRevertBenchmarks(objects: Int, changes: Int, repetitions: Int) throws {
    heading("RV1–RV2. Reverting a saved transaction of \(changes) changes in a store of \(objects) members")
    let model = try ManagedObjectModel {
        Entity("Team") {
            Attribute("name", .string)
            Relationship("members", to: "Member", inverse: "team", toMany: true)
        }
        Entity("Member") {
            Attribute("name", .string)
            Attribute("email", .string).indexed()
            Attribute("score", .int64)
            Relationship("team", to: "Team", inverse: "members")
        }
    }
    let directory = try scratchDirectory("revert")
    defer { remove(directory) }
    let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
    let store = try coordinator.addPersistentStore(
        type: .eventLog, at: URL(fileURLWithPath: directory).appendingPathComponent("store"), configuration: benchConfiguration())
    var draft = TransactionDraft()
    let teams = (0..<100).map { draft.insert("Team", values: ["name": .attribute(.string("team \($0)"))]) }
    for n in 0..<objects {
        draft.insert(
            "Member",
            values: [
                "name": .attribute(.string("member \(n)")), "email": .attribute(.string("m\(n)@example.org")),
                "score": .attribute(.int64(Int64(n % 1000))), "team": .reference(teams[n % teams.count]),
            ])
    }
    _ = try store.log.commit(draft)
    func context() -> ManagedObjectContext {
        ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "bench", transactionAuthor: "bench")
    }
    // `changes` members spread over the store.
    let all = try context().performAndWait { context in try context.fetchObjectIDs(FetchRequest(entityName: "Member")) }
    let step = max(1, all.count / max(1, changes))
    let ids = Array(stride(from: 0, to: all.count, by: step).prefix(changes).map { all[$0] })
    /// The token of the store's newest transaction.
    func head() throws -> HistoryToken { HistoryToken(storeIdentifier: store.identifier, sequence: try store.log.head) }

    /// Times reverting a save that `change` makes (and saving the revert) against making
    /// that save, each round on the store the last revert brought back; records the ratio.
    func measureRevert(
        _ benchmark: String, _ what: String, _ change: @escaping @Sendable (isolated ManagedObjectContext) throws -> Void
    ) throws {
        var made: [Duration] = []
        let reverts = try measure(
            "Strata revert of a save of \(what) + save", repetitions: repetitions,
            setup: { () throws -> HistoryToken in
                let started = ContinuousClock.now
                try context().performAndWait { context in
                    try change(context)
                    try context.save()
                }
                made.append(ContinuousClock.now - started)
                return try head()
            },
            body: { token in
                let reverted = token
                try context().performAndWait { context in
                    try context.revertTransaction(at: reverted)
                    try context.save()
                }
            })
        // Without the warm-up round's save.
        let making = Stats(samples: Array(made.dropFirst()))
        report("Strata making and saving the \(what)", making)
        let value = ratio(reverts.medianSeconds, making.medianSeconds)
        say("  revert ÷ making the \(what) = \(value)")
        record(benchmark, "revert + save ÷ making + saving them", value)
    }
    try measureRevert("RV1. revert of \(changes / 1000)k updates", "\(changes) score changes") { context in
        for case let member? in try context.existingObjects(with: ids) {
            member.setValue(((member.value(forKey: "score") as? Int64) ?? 0) + 1, forKey: "score")
        }
    }
    try measureRevert("RV2. revert of \(changes / 1000)k inserts", "\(changes) inserts") { context in
        for n in 0..<changes {
            let member = try context.insertNewObject(forEntityName: "Member")
            member.setValue("new \(n)", forKey: "name")
            member.setValue("new\(n)@example.org", forKey: "email")
            member.setValue(Int64(n), forKey: "score")
        }
    }
    let clean = try store.log.verify().isClean
    if !clean { say("  warning: verify found problems after the reverts") }
}
