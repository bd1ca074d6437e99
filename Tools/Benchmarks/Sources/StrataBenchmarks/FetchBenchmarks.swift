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
// R1. A fetched results controller over `fetchObjects` people sorted by `lastName`:
//     `performFetch()` ÷ a plain `fetch` of the same request; then `edits` single edits
//     (a person's lastName set, `processPendingChanges()`, the delegate told of the move),
//     per edit ÷ GRDB re-fetching the sorted rows (what an app following a GRDB query with
//     `ValueObservation` gets after each change).
// G1. F1's request in a context pinned to a query generation (spec 0006 §22) from before
//     `fetchObjects / 10` people were changed by one save, then as many again by 500 small
//     saves: the first pinned fetch in a fresh context (its view of the changed objects
//     built from the log) and a later one (the view kept), each ÷ the same fetch unpinned
//     before the changes (the same rows), and ÷ GRDB's fetch of those rows. Runs last: it
//     changes the small store.

func runFetchBenchmarks(objects: Int, largeObjects: Int, lookups: Int, repetitions: Int) throws {
    let model = try peopleModel()
    var random = SplitMix64(seed: 6)
    let people = (0..<max(objects, largeObjects)).map { makePerson($0, &random) }
    let small = try buildFetchStore(model: model, people: Array(people.prefix(objects)), label: "fetch-small")
    defer { remove(small.directory) }
    // STRATA_BENCH_G1_ONLY=1: only G1, on the small store.
    if environmentInt("STRATA_BENCH_G1_ONLY", 0) != 0 { return try runPinnedFetch(store: small, repetitions: repetitions) }
    try runBetweenSorted(model: model, store: small, repetitions: repetitions)
    try runBetweenCount(model: model, store: small, repetitions: repetitions)
    let large = try buildFetchStore(model: model, people: Array(people.prefix(largeObjects)), label: "fetch-large")
    defer { remove(large.directory) }
    try runEmailEquality(model: model, store: large, people: Array(people.prefix(largeObjects)), lookups: lookups, repetitions: repetitions)
    try runLimitFlat(model: model, small: small, large: large, repetitions: repetitions)
    try runControllerEdits(store: small, edits: environmentInt("STRATA_BENCH_FRC_EDITS", 200), repetitions: repetitions)
    try runPinnedFetch(store: small, repetitions: repetitions)
}

// MARK: - G1. A fetch pinned to a query generation

private func runPinnedFetch(store: FetchStore, repetitions: Int) throws {
    heading("G1. F1's fetch pinned to a query generation from before later saves, \(store.count) people")
    let request = try between()
    func fetchAndRead(_ context: ManagedObjectContext) throws -> Int {
        try context.performAndWait { context in try context.fetch(request).reduce(0) { $0 &+ readAll($1) } }
    }
    let setup = newContext(store.coordinator)
    let before = try fetchAndRead(setup)
    let token = try setup.performAndWait { context -> QueryGenerationToken? in
        try context.setQueryGenerationFrom(.current)
        return context.queryGenerationToken
    }
    // The baselines read the generation's rows too: Strata unpinned before any change, and
    // GRDB (its database isn't changed by the saves below).
    let unpinned = try measure(
        "unpinned fetch + read, before the changes", repetitions: repetitions, setup: { newContext(store.coordinator) },
        body: { context in _ = try fetchAndRead(context) })
    let grdb = try measure(
        "GRDB Record fetchAll + read (the same rows)", repetitions: repetitions, setup: { () },
        body: { _ in
            let people = try store.grdb.read { db in
                try GRDBPerson.fetchAll(db, sql: "SELECT * FROM person WHERE age BETWEEN 30 AND 40 ORDER BY lastName")
            }
            _ = people.reduce(0) { $0 &+ readAll($1) }
        })
    // Every 10th person changed by one save: a new last name and an age in the range.
    let tenth = max(1, store.count / 10)
    let ids = try setup.performAndWait { context in try context.fetchObjectIDs(FetchRequest(entityName: "Person")) }
    try setup.performAndWait { context in
        try context.setQueryGenerationFrom(nil)
        for id in stride(from: 0, to: ids.count, by: 10).map({ ids[$0] }).prefix(tenth) {
            let person = try context.existingObject(with: id)
            person.setValue("Changed", forKey: "lastName")
            person.setValue(Int32(35), forKey: "age")
        }
        try context.save()
        context.reset()
    }
    func stage(_ label: String) throws {
        var firstSum = 0
        let first = try measure(
            "pinned, first fetch in a fresh context (view built)", repetitions: repetitions,
            setup: { () -> ManagedObjectContext in
                let context = newContext(store.coordinator)
                try context.performAndWait { try $0.setQueryGenerationFrom(token) }
                return context
            },
            body: { context in firstSum = try fetchAndRead(context) })
        var laterSum = 0
        let later = try measure(
            "pinned, a later fetch (view kept)", repetitions: repetitions,
            setup: { () -> ManagedObjectContext in
                let context = newContext(store.coordinator)
                try context.performAndWait { try $0.setQueryGenerationFrom(token) }
                _ = try fetchAndRead(context)
                try context.performAndWait { context in
                    context.reset()  // forgets the objects; moves the generation, so pin it back
                    try context.setQueryGenerationFrom(token)
                }
                return context
            },
            body: { context in laterSum = try fetchAndRead(context) })
        if firstSum != before || laterSum != before {
            say("  warning: the pinned fetch differs from the generation's (\(firstSum), \(laterSum) vs \(before))")
        }
        let name = "G1. pinned fetch, \(label)"
        say("  \(label): first pinned ÷ unpinned \(ratio(first.medianSeconds, unpinned.medianSeconds)), later pinned ÷ unpinned \(ratio(later.medianSeconds, unpinned.medianSeconds)); first ÷ GRDB \(ratio(first.medianSeconds, grdb.medianSeconds)), later ÷ GRDB \(ratio(later.medianSeconds, grdb.medianSeconds))")
        record(name, "first pinned / later pinned ÷ unpinned", "\(ratio(first.medianSeconds, unpinned.medianSeconds)) / \(ratio(later.medianSeconds, unpinned.medianSeconds))")
        record(name, "first pinned / later pinned ÷ GRDB fetchAll", "\(ratio(first.medianSeconds, grdb.medianSeconds)) / \(ratio(later.medianSeconds, grdb.medianSeconds))")
    }
    try stage("\(tenth) people changed since by 1 save")
    // As many again, 20 a save.
    try setup.performAndWait { context in
        var changed = 0
        for id in stride(from: 5, to: ids.count, by: 10).map({ ids[$0] }).prefix(tenth) {
            let person = try context.existingObject(with: id)
            person.setValue("Later", forKey: "lastName")
            person.setValue(Int32(36), forKey: "age")
            changed += 1
            if changed % 20 == 0 {
                try context.save()
                context.reset()
            }
        }
        try context.save()
    }
    try stage("\(2 * tenth) people changed since by \(1 + tenth / 20) saves")
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

func buildFetchStore(model: ManagedObjectModel, people: [PersonRow], label: String) throws -> FetchStore {
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
func readAll(_ person: ManagedObject) -> Int {
    var sum = (person.value(forKey: "firstName") as? String)?.utf8.count ?? 0
    sum &+= (person.value(forKey: "lastName") as? String)?.utf8.count ?? 0
    sum &+= (person.value(forKey: "email") as? String)?.utf8.count ?? 0
    sum &+= Int(person.value(forKey: "age") as? Int32 ?? 0)
    sum &+= Int(person.value(forKey: "score") as? Double ?? 0)
    return sum
}

func readAll(_ person: GRDBPerson) -> Int {
    person.firstName.utf8.count &+ person.lastName.utf8.count &+ person.email.utf8.count &+ Int(person.age) &+ Int(person.score)
}

private func between() throws -> Strata.FetchRequest<ManagedObject> {
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

// MARK: - R1. A fetched results controller following single edits

/// Counts the batches and object changes a controller reports.
private final class CountingDelegate: FetchedResultsControllerDelegate {
    var batches = 0
    var changes = 0
    func controllerDidChangeContent(_ controller: AnyFetchedResultsController) { batches += 1 }
    func controller(
        _ controller: AnyFetchedResultsController, didChange anObject: ManagedObject, at indexPath: IndexPath?,
        for type: FetchedResultsChangeType, newIndexPath: IndexPath?
    ) { changes += 1 }
}

private func runControllerEdits(store: FetchStore, edits: Int, repetitions: Int) throws {
    heading("R1. Fetched results controller: \(store.count) people sorted by lastName, then \(edits) single edits followed one by one")
    let request = FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(key: "lastName")])
    let initial = try measureAlternately(
        "controller performFetch()", "plain fetch() of the same request", repetitions: repetitions,
        {
            try timedRound(setup: { FetchRun(store) }, body: { run in
                run.count = try run.context.performAndWait { context in
                    let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
                    try controller.performFetch()
                    return controller.fetchedObjects?.count ?? 0
                }
            })
        },
        {
            try timedRound(setup: { FetchRun(store) }, body: { run in
                run.count = try run.context.performAndWait { context in try context.fetch(request).count }
            })
        })
    let initialRatio = String(format: "%.2f×", initial.pairedRatio)
    say("  performFetch() ÷ fetch() = \(initialRatio)")
    // Edits: random people renamed, each followed by its batch. The picks are drawn once, so
    // every repetition makes the same edits; only the edit loop is timed (the fetch and the
    // rollback after it are not).
    var random = SplitMix64(seed: 16)
    let picks = (0..<edits).map { _ in (Int(random.next() % UInt64(store.count)), "Edited \(random.next() % 1_000_000)") }
    var perEdit: [Duration] = []
    for round in 0..<(repetitions + 1) {
        let run = FetchRun(store)
        let (elapsed, batches, changes) = try run.context.performAndWait { context in
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            try controller.performFetch()
            let delegate = CountingDelegate()
            controller.delegate = delegate
            let people = controller.fetchedObjects ?? []
            let clock = ContinuousClock()
            let start = clock.now
            for (index, name) in picks where index < people.count {
                people[index].setValue(name, forKey: "lastName")
                context.processPendingChanges()
            }
            let elapsed = clock.now - start
            context.rollback()
            return (elapsed, delegate.batches, delegate.changes)
        }
        if batches != edits || changes != edits {
            throw RawLMDBError(code: -1, call: "the controller reported \(batches) batches and \(changes) changes for \(edits) edits")
        }
        if round > 0 { perEdit.append(elapsed / edits) }
    }
    let edit = Stats(samples: perEdit)
    report("one edit + its batch (controller)", edit)
    let refetch = try measure("GRDB re-fetch of the sorted rows (per change)", repetitions: repetitions) { () } body: { _ in
        let rows = try store.grdb.read { db in try GRDBPerson.order(Column("lastName")).fetchAll(db) }
        if rows.count != store.count { throw RawLMDBError(code: -1, call: "GRDB fetched \(rows.count) rows") }
    }
    // Four decimals: the controller's share is far below a hundredth.
    let perChange = String(format: "%.4f×", edit.median.seconds / max(refetch.median.seconds, 1e-12))
    say("  one edit followed by the controller ÷ GRDB re-fetch = \(perChange)")
    let name = "R1. fetched results controller, \(store.count / 1000)k rows"
    record(name, "performFetch() ÷ plain fetch()", initialRatio)
    record(name, "one edit + batch ÷ GRDB re-fetch of the sorted rows", perChange)
    record(name, "one edit + batch / GRDB re-fetch", "\(format(edit.median)) / \(format(refetch.median))")
}
