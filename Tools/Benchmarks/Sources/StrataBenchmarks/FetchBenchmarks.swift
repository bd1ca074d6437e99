import Foundation
import GRDB
import Strata

// Issue 6's benchmarks: fetch requests and the query planner, against GRDB's Record API on
// the same rows with the equivalent SQL indexes (age: index; email: unique index), in this
// one process. Strata goes through the public API only: a coordinator, a private-queue
// context, `fetch`, `count(for:)`, `explain`, `value(forKey:)`.
//
// F1. `age BETWEEN 30 AND 40` sorted by `lastName`, objects materialised (every attribute
//     read), `fetchObjects` people — vs `GRDBPerson.fetchAll` with the same SQL.
// F2. `count(for:)` of the same — vs `fetchCount`.
// F3. equality on the unique, indexed `email`, `lookups` different emails among
//     `largeObjects` people, each fetched and read — vs `fetchOne` with the same filter.
// F4. sorted by `email` (indexed), limit 20, at `fetchObjects` and at `largeObjects`
//     people: the planner walks the index and stops, so the time must stay flat. GRDB's
//     `ORDER BY email LIMIT 20` (its unique index) for context.

func runFetchBenchmarks(objects: Int, largeObjects: Int, lookups: Int, repetitions: Int) throws {
    let model = try peopleModel()
    var random = SplitMix64(seed: 6)
    let people = (0..<max(objects, largeObjects)).map { makePerson($0, &random) }
    let small = try buildFetchStore(model: model, people: Array(people.prefix(objects)), label: "fetch-small")
    defer { remove(small.directory) }
    try runBetweenSorted(model: model, store: small, repetitions: repetitions)
    try runBetweenCount(model: model, store: small, repetitions: repetitions)
    let large = try buildFetchStore(model: model, people: Array(people.prefix(largeObjects)), label: "fetch-large")
    defer { remove(large.directory) }
    try runEmailEquality(model: model, store: large, people: Array(people.prefix(largeObjects)), lookups: lookups, repetitions: repetitions)
    try runLimitFlat(model: model, small: small, large: large, repetitions: repetitions)
}

// MARK: - Stores

/// A Strata store of `people` (written with the log in 100,000-person transactions, each
/// person referencing one of the teams) and a GRDB database with the same rows.
struct FetchStore {
    let directory: String
    let coordinator: PersistentStoreCoordinator
    let grdb: DatabaseQueue
    let count: Int
}

private func buildFetchStore(model: ManagedObjectModel, people: [PersonRow], label: String) throws -> FetchStore {
    let directory = try scratchDirectory(label)
    let (_, strataTime) = try timeOnce { () throws in
        let log = try EventLog(path: (directory as NSString).appendingPathComponent("store"), model: model, configuration: benchConfiguration())
        var teamDraft = TransactionDraft(author: "seed")
        let temporary = teamNames.map { teamDraft.insert("Team", values: ["name": .attribute(.string($0))]) }
        let result = try log.commit(teamDraft)
        let teams = temporary.compactMap { result.permanentID(for: $0).map(DraftObjectID.stored) }
        var next = 0
        while next < people.count {
            var draft = TransactionDraft(author: "seed")
            for person in people[next..<min(people.count, next + 100_000)] {
                draft.insert("Person", values: person.draftValues(team: teams[person.team]))
            }
            next = min(people.count, next + 100_000)
            try log.commit(draft)
        }
    }
    let (grdb, grdbTime) = try timeOnce { () throws -> DatabaseQueue in
        let grdb = try makeGRDBDatabase(in: directory)
        let rows = people.map(GRDBPerson.init)
        try grdb.write { db in
            for (index, name) in teamNames.enumerated() { try GRDBTeam(id: Int64(index + 1), name: name).insert(db) }
            for row in rows { try row.insert(db) }
        }
        return grdb
    }
    say("\n  (store of \(people.count) people: Strata built in \(format(strataTime)), GRDB in \(format(grdbTime)))")
    return FetchStore(directory: directory, coordinator: try openCoordinator(directory, model: model), grdb: grdb, count: people.count)
}

private func openCoordinator(_ directory: String, model: ManagedObjectModel) throws -> PersistentStoreCoordinator {
    let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
    try coordinator.addPersistentStore(
        type: .eventLog, at: URL(fileURLWithPath: directory).appendingPathComponent("store"), configuration: benchConfiguration())
    return coordinator
}

private func newContext(_ coordinator: PersistentStoreCoordinator) -> ManagedObjectContext {
    ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "bench")
}

/// A fresh context per timed run, so no run finds objects registered by the previous one;
/// the coordinator (the open store) is shared by the runs, as GRDB's `DatabaseQueue` is.
private final class FetchRun {
    let context: ManagedObjectContext
    var checksum = 0
    var count = 0
    init(_ store: FetchStore) {
        context = newContext(store.coordinator)
    }
}

/// Reads every attribute of `person` into a checksum.
private func readAll(_ person: ManagedObject) -> Int {
    var sum = (person.value(forKey: "firstName") as? String)?.utf8.count ?? 0
    sum &+= (person.value(forKey: "lastName") as? String)?.utf8.count ?? 0
    sum &+= (person.value(forKey: "email") as? String)?.utf8.count ?? 0
    sum &+= Int(person.value(forKey: "age") as? Int32 ?? 0)
    sum &+= Int(person.value(forKey: "score") as? Double ?? 0)
    return sum
}

private func readAll(_ person: GRDBPerson) -> Int {
    person.firstName.utf8.count &+ person.lastName.utf8.count &+ person.email.utf8.count &+ Int(person.age) &+ Int(person.score)
}

private func between() throws -> Strata.FetchRequest {
    FetchRequest(
        entityName: "Person", predicate: try FormatPredicate(format: "age BETWEEN {30, 40}"),
        sortDescriptors: [FetchSortDescriptor(key: "lastName")])
}

// MARK: - F1. BETWEEN sorted, materialised

private func runBetweenSorted(model: ManagedObjectModel, store: FetchStore, repetitions: Int) throws {
    heading("F1. Fetch: age BETWEEN 30 AND 40 sorted by lastName, \(store.count) people, objects read")
    let request = try between()
    let plan = try newContext(store.coordinator).performAndWait { try $0.explain(request).description }
    say("  Strata plan: \(plan)")
    var strataSum = 0
    var strataLastNames: [String] = []
    // For a profiler: only Strata's F1 body, this many times (untimed, nothing else).
    // STRATA_BENCH_FETCH_ALL_PROFILE: the same for C2's fetch of every person (no predicate, no sort).
    let profileRuns = environmentInt("STRATA_BENCH_F1_PROFILE", 0)
    let fetchAllRuns = environmentInt("STRATA_BENCH_FETCH_ALL_PROFILE", 0)
    if profileRuns > 0 || fetchAllRuns > 0 {
        let profiled = profileRuns > 0 ? request : FetchRequest(entityName: "Person")
        for _ in 0..<max(profileRuns, fetchAllRuns) {
            let run = FetchRun(store)
            run.checksum = try run.context.performAndWait { context in
                try context.fetch(profiled).reduce(0) { $0 &+ readAll($1) }
            }
        }
        exit(0)
    }
    var grdbSum = 0
    var grdbLastNames: [String] = []
    // Strata and GRDB alternate round by round: the figure is the median of the per-round
    // ratios, so a drift in the machine's speed (a shared VM) falls on both peers alike.
    let (strata, grdb, paired) = try measureAlternately(
        "Strata fetch + read 5 attributes", "GRDB Record fetchAll (same SQL) + read", repetitions: max(repetitions, 9),
        {
            try timedRound(
                setup: { FetchRun(store) },
                body: { run in
                    (run.checksum, run.count) = try run.context.performAndWait { context in
                        let people = try context.fetch(request)
                        return (people.reduce(0) { $0 &+ readAll($1) }, people.count)
                    }
                },
                teardown: { run in
                    strataSum = run.checksum
                    strataLastNames = try run.context.performAndWait { context in
                        try context.fetch(request).map { $0.value(forKey: "lastName") as? String ?? "" }
                    }
                })
        },
        {
            try timedRound(
                setup: { () },
                body: { _ in
                    let people = try store.grdb.read { db in
                        try GRDBPerson.fetchAll(db, sql: "SELECT * FROM person WHERE age BETWEEN 30 AND 40 ORDER BY lastName")
                    }
                    grdbSum = people.reduce(0) { $0 &+ readAll($1) }
                    grdbLastNames = people.map(\.lastName)
                })
        })
    // The fetch alone (objects made, nothing read), to split the time.
    let fetchOnly = try measure(
        "Strata fetch only (faults, nothing read)", repetitions: repetitions,
        setup: { FetchRun(store) },
        body: { run in
            run.count = try run.context.performAndWait { context in try context.fetch(request).count }
        })
    if strataSum != grdbSum || strataLastNames != grdbLastNames {
        say("  warning: results differ (Strata \(strataSum), \(strataLastNames.count) rows; GRDB \(grdbSum), \(grdbLastNames.count) rows)")
    }
    let toGRDB = String(format: "%.2f×", paired)
    say("  \(strataLastNames.count) people; Strata ÷ GRDB = \(toGRDB) (median of per-round ratios; of medians \(ratio(strata.medianSeconds, grdb.medianSeconds)), by min \(ratio(strata.minSeconds, grdb.minSeconds)))   (target ≤ 1×)")
    say("  of which the fetch alone: \(ratio(fetchOnly.medianSeconds, strata.medianSeconds)) of Strata's time")
    let name = "F1. BETWEEN + sort, \(store.count / 1000)k, materialised"
    record(name, "Strata ÷ GRDB Record fetchAll", toGRDB, target: "≤ 1×")
    record(name, "Strata / GRDB (\(strataLastNames.count) rows)", "\(format(strata.median)) / \(format(grdb.median))")
}

// MARK: - F2. count(for:)

private func runBetweenCount(model: ManagedObjectModel, store: FetchStore, repetitions: Int) throws {
    heading("F2. count(for:) of age BETWEEN 30 AND 40, \(store.count) people")
    var unsorted = try between()
    unsorted.sortDescriptors = []
    let request = unsorted
    var strataCount = 0
    let strata = try measure(
        "Strata count(for:)", repetitions: max(repetitions, 21),
        setup: { FetchRun(store) },
        body: { run in run.count = try run.context.performAndWait { try $0.count(for: request) } },
        teardown: { run in strataCount = run.count })
    var grdbCount = 0
    let grdb = try measure(
        "GRDB fetchCount", repetitions: max(repetitions, 21),
        setup: { () },
        body: { _ in
            grdbCount = try store.grdb.read { db in
                try GRDBPerson.filter(Column("age") >= 30 && Column("age") <= 40).fetchCount(db)
            }
        })
    if strataCount != grdbCount { say("  warning: counts differ (Strata \(strataCount), GRDB \(grdbCount))") }
    let toGRDB = ratio(strata.medianSeconds, grdb.medianSeconds)
    say("  count \(strataCount); Strata ÷ GRDB = \(toGRDB)   (target ≤ 1×; by min \(ratio(strata.minSeconds, grdb.minSeconds)))")
    let name = "F2. count(for:) BETWEEN, \(store.count / 1000)k"
    record(name, "Strata ÷ GRDB fetchCount", toGRDB, target: "≤ 1×")
    record(name, "Strata / GRDB", "\(format(strata.median)) / \(format(grdb.median))")
}

// MARK: - F3. Equality on a unique email

private func runEmailEquality(model: ManagedObjectModel, store: FetchStore, people: [PersonRow], lookups: Int, repetitions: Int) throws {
    heading("F3. Fetch: email == <one of \(store.count)>, \(lookups) lookups, each object read")
    var random = SplitMix64(seed: 11)
    let emails = (0..<lookups).map { _ in people[Int(random.next() % UInt64(people.count))].email }
    let plan = try newContext(store.coordinator).performAndWait { context in
        try context.explain(FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "email == %@", emails[0]))).description
    }
    say("  Strata plan: \(plan)")
    var strataSum = 0
    let strata = try measure(
        "Strata fetch(email ==) + read, \(lookups)×", repetitions: repetitions,
        setup: { FetchRun(store) },
        body: { run in
            run.checksum = try run.context.performAndWait { context in
                var sum = 0
                for email in emails {
                    let request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "email == %@", email))
                    for person in try context.fetch(request) { sum &+= readAll(person) }
                }
                return sum
            }
        },
        teardown: { run in strataSum = run.checksum })
    var grdbSum = 0
    let grdb = try measure(
        "GRDB fetchOne(email ==) + read, \(lookups)×", repetitions: repetitions,
        setup: { () },
        body: { _ in
            grdbSum = try store.grdb.read { db in
                var sum = 0
                for email in emails {
                    if let person = try GRDBPerson.filter(Column("email") == email).fetchOne(db) { sum &+= readAll(person) }
                }
                return sum
            }
        })
    if strataSum != grdbSum { say("  warning: checksums differ (Strata \(strataSum), GRDB \(grdbSum))") }
    let toGRDB = ratio(strata.medianSeconds, grdb.medianSeconds)
    say("  per lookup: Strata \(format(seconds: strata.medianSeconds / Double(lookups))), GRDB \(format(seconds: grdb.medianSeconds / Double(lookups)))")
    say("  Strata ÷ GRDB = \(toGRDB)   (target ≤ 2×; by min \(ratio(strata.minSeconds, grdb.minSeconds)))")
    let name = "F3. email equality among \(store.count / 1000)k"
    record(name, "Strata ÷ GRDB fetchOne", toGRDB, target: "≤ 2×")
    record(name, "per lookup, Strata / GRDB",
        "\(format(seconds: strata.medianSeconds / Double(lookups))) / \(format(seconds: grdb.medianSeconds / Double(lookups)))")
}

// MARK: - F4. Sorted, limit 20: flat

private func runLimitFlat(model: ManagedObjectModel, small: FetchStore, large: FetchStore, repetitions: Int) throws {
    heading("F4. Fetch sorted by email (indexed), limit 20: \(small.count) vs \(large.count) people")
    var limited = FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(key: "email")])
    limited.fetchLimit = 20
    let request = limited
    let reps = max(repetitions, 21)
    func strata(_ store: FetchStore) throws -> (Stats, [String]) {
        let plan = try newContext(store.coordinator).performAndWait { try $0.explain(request).description }
        say("  Strata plan: \(plan)")
        var emails: [String] = []
        let stats = try measure(
            "Strata limit 20, \(store.count / 1000)k", repetitions: reps,
            setup: { FetchRun(store) },
            body: { run in
                run.checksum = try run.context.performAndWait { context in try context.fetch(request).reduce(0) { $0 &+ readAll($1) } }
            },
            teardown: { run in
                emails = try run.context.performAndWait { context in try context.fetch(request).map { $0.value(forKey: "email") as? String ?? "" } }
            })
        return (stats, emails)
    }
    func grdb(_ store: FetchStore) throws -> (Stats, [String]) {
        var emails: [String] = []
        let stats = try measure(
            "GRDB ORDER BY email LIMIT 20, \(store.count / 1000)k", repetitions: reps,
            setup: { () },
            body: { _ in
                let people = try store.grdb.read { db in try GRDBPerson.order(Column("email")).limit(20).fetchAll(db) }
                emails = people.map(\.email)
            })
        return (stats, emails)
    }
    let (strataSmall, smallEmails) = try strata(small)
    let (strataLarge, largeEmails) = try strata(large)
    let (grdbSmall, grdbSmallEmails) = try grdb(small)
    let (grdbLarge, grdbLargeEmails) = try grdb(large)
    if smallEmails != grdbSmallEmails || largeEmails != grdbLargeEmails { say("  warning: results differ from GRDB's") }
    let flat = ratio(strataLarge.medianSeconds, strataSmall.medianSeconds)
    say("  Strata \(large.count / 1000)k ÷ \(small.count / 1000)k = \(flat)   (target: flat, ≈ 1×); GRDB: \(ratio(grdbLarge.medianSeconds, grdbSmall.medianSeconds))")
    say("  Strata ÷ GRDB: \(ratio(strataSmall.medianSeconds, grdbSmall.medianSeconds)) at \(small.count / 1000)k, \(ratio(strataLarge.medianSeconds, grdbLarge.medianSeconds)) at \(large.count / 1000)k")
    let name = "F4. sorted, limit 20"
    record(name, "Strata \(large.count / 1000)k ÷ \(small.count / 1000)k", flat, target: "flat (≈ 1×)")
    record(name, "Strata \(small.count / 1000)k / \(large.count / 1000)k", "\(format(strataSmall.median)) / \(format(strataLarge.median))")
    record(name, "GRDB \(small.count / 1000)k / \(large.count / 1000)k", "\(format(grdbSmall.median)) / \(format(grdbLarge.median))")
}
