import CBenchLMDB
import Foundation
import GRDB
import Strata

// Issue 5's benchmarks: the context layer (`ManagedObjectContext`) against GRDB's Record API
// and the raw-LMDB floor, in this one process. Every Strata figure goes through the public
// context API only: `PersistentStoreCoordinator`, a private-queue context, `performAndWait`,
// `insertNewObject`, `setValue`, `save`, `fetch`, `object(with:)`, `undo`/`redo`.
//
// C1. insert `objects` people (five attributes each) and save — vs GRDB Record inserts of
//     the rows in one transaction, and vs the raw-LMDB floor (the state records Strata wrote,
//     MDB_APPEND); and `teamObjects` people (+ 8 teams, each person's `team` set, so the
//     context maintains the inverse `members`) vs GRDB with the same rows.
// C2. fetch every person and read every attribute — vs GRDB `fetchAll` reading every column.
// C3. fire `objects` faults by ID in random order (`object(with:)`, then read `firstName`) —
//     vs GRDB `fetchOne(db, key:)` per primary key, same order.
// C4. one undo group of `undoChanges` changes (`score` set on that many fetched people):
//     making the changes, `undo()`, `redo()` — unsaved; and undo/redo of the saved group.
// C5. peak RSS (VmHWM) iterating `iterateObjects` people without keeping them, reported at
//     100,000 and at the end; the peak is reset (`/proc/self/clear_refs` ← 5) first.
// C6. `smallSaves` saves of one change each, what an app does most: a person (a different
//     one each time, a fault until then) gets a new `score` and the context saves — vs GRDB
//     fetching the row by key and updating it in one write transaction. Both durable.

func runContextBenchmarks(objects: Int, teamObjects: Int, undoChanges: Int, iterateObjects: Int, repetitions: Int) throws {
    let model = try peopleModel()
    let people = makePeople(objects)
    // STRATA_BENCH_C1_PROFILE=N: only C1's Strata side (insert + save, split printed), N
    // times, for a profiler; STRATA_BENCH_C1_TEAMS=1 also sets every person's team.
    let profileRuns = environmentInt("STRATA_BENCH_C1_PROFILE", 0)
    if profileRuns > 0 {
        try profileContextInsert(model: model, people: people, runs: profileRuns, teams: environmentInt("STRATA_BENCH_C1_TEAMS", 0) == 1)
        return
    }
    // STRATA_BENCH_C2_ONLY=1: only C2 (fetch all + read), on the store C2–C4 share;
    // STRATA_BENCH_C2_ONLY=2: only C2's typed-reads line (no peers), for a profiler.
    let c2Only = environmentInt("STRATA_BENCH_C2_ONLY", 0)
    if c2Only == 1 || c2Only == 2 {
        let store = try buildContextStore(model: model, people: people)
        defer { remove(store.directory) }
        try runContextFetch(model: model, store: store, repetitions: repetitions, typedOnly: c2Only == 2)
        return
    }
    // STRATA_BENCH_C3_ONLY=1: only C3 (faults fired by ID), on the store C2–C4 share.
    if environmentInt("STRATA_BENCH_C3_ONLY", 0) == 1 {
        let store = try buildContextStore(model: model, people: people)
        defer { remove(store.directory) }
        try runContextFaults(model: model, store: store, repetitions: repetitions)
        return
    }
    // STRATA_BENCH_C6_ONLY=1: only C6 (small saves), on the store C2–C4 share.
    if environmentInt("STRATA_BENCH_C6_ONLY", 0) == 1 {
        let store = try buildContextStore(model: model, people: people)
        defer { remove(store.directory) }
        try runContextSmallSaves(model: model, store: store, saves: smallSaves, repetitions: repetitions)
        return
    }
    // STRATA_BENCH_C4_ONLY=1: only C4 (undo and redo of one group), on the store C2–C4 share.
    // STRATA_BENCH_C5_ONLY=1: only C5 (memory while iterating; builds its own store).
    if environmentInt("STRATA_BENCH_C5_ONLY", 0) == 1 {
        try runContextMemory(model: model, objects: iterateObjects)
        return
    }
    if environmentInt("STRATA_BENCH_C4_ONLY", 0) == 1 {
        let store = try buildContextStore(model: model, people: people)
        defer { remove(store.directory) }
        try runContextUndo(model: model, store: store, changes: min(undoChanges, people.count), repetitions: repetitions)
        return
    }
    try runContextInsert(model: model, people: people, teamObjects: min(teamObjects, objects), repetitions: repetitions)
    // STRATA_BENCH_C1_ONLY=1: only C1 (insert + save, against GRDB and the floor).
    if environmentInt("STRATA_BENCH_C1_ONLY", 0) == 1 { return }
    let store = try buildContextStore(model: model, people: people)
    defer { remove(store.directory) }
    try runContextFetch(model: model, store: store, repetitions: repetitions)
    try runContextFaults(model: model, store: store, repetitions: repetitions)
    try runContextUndo(model: model, store: store, changes: min(undoChanges, people.count), repetitions: repetitions)
    try runContextSmallSaves(model: model, store: store, saves: smallSaves, repetitions: repetitions)
    try runContextMemory(model: model, objects: iterateObjects)
}

/// How many saves C6 makes (`STRATA_BENCH_SMALL_SAVES`).
private let smallSaves = environmentInt("STRATA_BENCH_SMALL_SAVES", 1_000)

// MARK: - C6. Small saves

private func runContextSmallSaves(model: ManagedObjectModel, store: ContextStore, saves: Int, repetitions: Int) throws {
    let count = min(saves, store.ids.count)
    heading("C6. Context: \(count) saves of one change each (a person's score)")
    // Each run changes people it hasn't touched: run r sets score r + 0.25 on `count` people
    // starting at r × count (wrapping), so every save writes a real change.
    var round = 0
    let strata = try measure(
        "Strata: object(with:), set score, save() × \(count)", repetitions: repetitions,
        setup: { () throws -> ReadRun in
            round += 1
            return try ReadRun(store.directory, model: model)
        },
        body: { run in
            let ids = store.ids, first = round * count, score = Double(round) + 0.25
            try run.context.performAndWait { context in
                for n in 0..<count {
                    let person = try context.object(with: ids[(first + n) % ids.count])
                    person.setValue(score, forKey: "score")
                    try context.save()
                }
            }
        })
    var grdbRound = 0
    let grdb = try measure(
        "GRDB: write { fetchOne(key:), update } × \(count)", repetitions: repetitions,
        setup: { grdbRound += 1 },
        body: { _ in
            let first = grdbRound * count, score = Double(grdbRound) + 0.25, total = store.ids.count
            for n in 0..<count {
                try store.grdb.write { db in
                    guard var person = try GRDBPerson.fetchOne(db, key: Int64((first + n) % total + 1)) else { return }
                    person.score = score
                    try person.update(db)
                }
            }
        })
    let perStrata = strata.medianSeconds / Double(count), perGRDB = grdb.medianSeconds / Double(count)
    say("  per save: Strata \(format(seconds: perStrata)), GRDB \(format(seconds: perGRDB))")
    let toGRDB = ratio(perStrata, perGRDB)
    say("  Strata ÷ GRDB = \(toGRDB)   (context; by min \(ratio(strata.minSeconds, grdb.minSeconds)))")
    let name = "C6. \(count) small saves"
    record(name, "Strata ÷ GRDB per save", toGRDB, target: "(context)")
    record(name, "per save Strata / GRDB", "\(format(seconds: perStrata)) / \(format(seconds: perGRDB))")
}

// MARK: - Helpers

/// A coordinator with an event-log store at `directory/store`, Strata's defaults (durable
/// commits), the map pre-sized as benchmark 1's.
private func openCoordinator(_ directory: String, model: ManagedObjectModel) throws -> PersistentStoreCoordinator {
    let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
    try coordinator.addPersistentStore(
        type: .eventLog, at: URL(fileURLWithPath: directory).appendingPathComponent("store"), configuration: benchConfiguration())
    return coordinator
}

private func newContext(_ coordinator: PersistentStoreCoordinator) -> ManagedObjectContext {
    ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "bench", transactionAuthor: "bench")
}

/// Inserts `people` through `context` (not saved); with `teams`, also the 8 teams, and sets
/// each person's `team` (the context then maintains the inverse `members`).
private func insertPeople(_ people: [PersonRow], into context: isolated ManagedObjectContext, teams withTeams: Bool) throws {
    let teams = try withTeams ? teamNames.map { name in
        let team = try context.insertNewObject(forEntityName: "Team")
        team.setValue(name, forKey: "name")
        return team
    } : []
    for row in people {
        let person = try context.insertNewObject(forEntityName: "Person")
        person.setValue(row.firstName, forKey: "firstName")
        person.setValue(row.lastName, forKey: "lastName")
        person.setValue(row.email, forKey: "email")
        person.setValue(row.age, forKey: "age")
        person.setValue(row.score, forKey: "score")
        if withTeams { person.setValue(teams[row.team], forKey: "team") }
    }
}

/// A process-wide figure from `/proc/self/status` (`VmHWM`, `VmRSS`), in bytes.
private func procStatus(_ field: String) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        let number = line.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? ""
        return (Int(number) ?? 0) * 1024
    }
    return 0
}

/// Resets the process's peak RSS to its current RSS (Linux: `5` → `/proc/self/clear_refs`).
private func resetPeakRSS() -> Bool {
    guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return false }
    defer { try? handle.close() }
    do { try handle.write(contentsOf: Data("5".utf8)) } catch { return false }
    return true
}

private func mebibytes(_ bytes: Int) -> String { String(format: "%.0f MiB", Double(bytes) / 1_048_576) }

// MARK: - C1. Insert and save

/// Inserts `people` through `context` and saves: the seconds inserting and saving took.
private func timedInsertAndSave(_ people: [PersonRow], into context: ManagedObjectContext, teams: Bool) throws -> (Double, Double) {
    try context.performAndWait { context -> (Double, Double) in
        let clock = ContinuousClock()
        let start = clock.now
        try insertPeople(people, into: context, teams: teams)
        let middle = clock.now
        try context.save()
        return ((middle - start).seconds, (clock.now - middle).seconds)
    }
}

/// C1's Strata side only, `runs` times: a fresh store per run, the split printed.
private func profileContextInsert(model: ManagedObjectModel, people: [PersonRow], runs: Int, teams: Bool) throws {
    heading("C1 profile: insert \(people.count) Person objects\(teams ? " with team" : "") and save, \(runs) runs")
    for _ in 0..<runs {
        let directory = try scratchDirectory("context-insert-profile")
        defer { remove(directory) }
        let coordinator = try openCoordinator(directory, model: model)
        let (inserting, saving) = try timedInsertAndSave(people, into: newContext(coordinator), teams: teams)
        say("  inserting \(format(seconds: inserting)), save \(format(seconds: saving))")
    }
}

private func runContextInsert(model: ManagedObjectModel, people allPeople: [PersonRow], teamObjects: Int, repetitions: Int) throws {
    let objects = allPeople.count
    heading("C1. Context: insert \(objects) Person objects and save")
    final class Run {
        let directory: String
        var coordinator: PersistentStoreCoordinator?
        var context: ManagedObjectContext?
        init(directory: String, model: ManagedObjectModel) throws {
            self.directory = directory
            let coordinator = try openCoordinator(directory, model: model)
            self.coordinator = coordinator
            context = newContext(coordinator)
        }
    }
    var directories: [String] = []
    func strata(_ label: String, _ people: [PersonRow], undo: Bool, teams: Bool) throws -> Stats {
        try measure(
            label, repetitions: repetitions,
            setup: { try Run(directory: try scratchDirectory("context-insert"), model: model) },
            body: { run in
                try run.context!.performAndWait { context in
                    context.isUndoEnabled = undo
                    try insertPeople(people, into: context, teams: teams)
                    try context.save()
                }
            },
            teardown: { run in
                run.context = nil
                run.coordinator = nil
                directories.append(run.directory)
            })
    }
    func grdb(_ label: String, _ people: [PersonRow]) throws -> Stats {
        let grdbPeople = people.map(GRDBPerson.init)
        let grdbTeams = teamNames.enumerated().map { GRDBTeam(id: Int64($0.offset + 1), name: $0.element) }
        return try measure(
            label, repetitions: repetitions,
            setup: { () throws -> (String, DatabaseQueue) in
                let directory = try scratchDirectory("context-grdb")
                return (directory, try makeGRDBDatabase(in: directory))
            },
            body: { run in
                try run.1.write { db in
                    for team in grdbTeams { try team.insert(db) }
                    for person in grdbPeople { try person.insert(db) }
                }
            },
            teardown: { run in remove(run.0) })
    }
    /// Inserting (setValue, inverses, undo journal) vs save, for one untimed-harness run.
    func split(_ people: [PersonRow], teams: Bool) throws -> (Double, Double) {
        let run = try Run(directory: try scratchDirectory("context-insert-split"), model: model)
        defer {
            run.context = nil
            run.coordinator = nil
            remove(run.directory)
        }
        return try timedInsertAndSave(people, into: run.context!, teams: teams)
    }

    // Attributes only (the figure earlier sessions quoted), then with `team` set — the same
    // rows as GRDB's, the context maintaining the inverse `members` — at
    // STRATA_BENCH_CONTEXT_TEAM_OBJECTS people (all of them by default; filling the inverse
    // is linear since session 5).
    let (insertOnly, saveOnly) = try split(allPeople, teams: false)
    say("  one run, attributes only: inserting \(format(seconds: insertOnly)), save \(format(seconds: saveOnly))")
    let attributes = try strata("Strata context insert + save, 5 attributes", allPeople, undo: true, teams: false)
    let noUndo = try strata("  same, undo registration off", allPeople, undo: false, teams: false)

    // The floor: the state records the (attributes-only) save wrote, put with MDB_APPEND.
    let tables = try snapshotStore((directories.last! as NSString).appendingPathComponent("store"))
    for directory in directories { remove(directory) }
    directories.removeAll()
    guard let state = tables.first(where: { $0.name == "state" }) else { throw RawLMDBError(code: -1, call: "no state table") }
    final class RawRun {
        let directory: String
        let lmdb: RawLMDB
        let dbi: MDB_dbi
        init(directory: String) throws {
            self.directory = directory
            lmdb = try RawLMDB(path: directory)
            dbi = try lmdb.database("state")
        }
    }
    let floor = try measure(
        "raw LMDB floor (those state records, MDB_APPEND)", repetitions: repetitions,
        setup: { try RawRun(directory: try scratchDirectory("context-floor")) },
        body: { run in try run.lmdb.write { txn in try RawLMDB.put(state.batch, range: 0..<state.batch.count, into: run.dbi, txn: txn) } },
        teardown: { run in remove(run.directory) })
    let grdbAll = try grdb("GRDB Record insert, one transaction (with teamId)", allPeople)

    // With the team set: the same rows as GRDB's.
    let small = Array(allPeople.prefix(teamObjects))
    let (teamInsert, teamSave) = try split(small, teams: true)
    let withTeam = try strata("Strata, \(small.count) people with team set", small, undo: true, teams: true)
    for directory in directories { remove(directory) }
    let grdbSmall = small.count == allPeople.count ? grdbAll : try grdb("GRDB Record insert, \(small.count) people", small)

    let toGRDB = ratio(attributes.medianSeconds, grdbAll.medianSeconds)
    let toFloor = ratio(attributes.medianSeconds, floor.medianSeconds)
    let teamToGRDB = ratio(withTeam.medianSeconds, grdbSmall.medianSeconds)
    say("  Strata ÷ GRDB  = \(toGRDB)   (target ≤ 0.25×; by min \(ratio(attributes.minSeconds, grdbAll.minSeconds))) — Strata without the team reference")
    say("  Strata ÷ floor = \(toFloor)   (target ≤ 3.00×; by min \(ratio(attributes.minSeconds, floor.minSeconds)))")
    say("  undo off: Strata ÷ GRDB = \(ratio(noUndo.medianSeconds, grdbAll.medianSeconds)), ÷ floor = \(ratio(noUndo.medianSeconds, floor.medianSeconds))")
    say("  with team, \(small.count) people: Strata ÷ GRDB = \(teamToGRDB) (inserting \(format(seconds: teamInsert)), save \(format(seconds: teamSave)))")
    let name = "C1. context insert \(objects / 1000)k + save"
    record(name, "Strata (5 attributes) ÷ GRDB Record insert", toGRDB, target: "≤ 0.25×")
    record(name, "Strata (5 attributes) ÷ raw-LMDB floor", toFloor, target: "≤ 3×")
    record(name, "undo off: ÷ GRDB / ÷ floor",
        "\(ratio(noUndo.medianSeconds, grdbAll.medianSeconds)) / \(ratio(noUndo.medianSeconds, floor.medianSeconds))")
    record(name, "Strata / undo off / floor / GRDB",
        "\(format(attributes.median)) / \(format(noUndo.median)) / \(format(floor.median)) / \(format(grdbAll.median))")
    record(name, "split of one run: inserting / save", "\(format(seconds: insertOnly)) / \(format(seconds: saveOnly))")
    record(name, "with team set, \(small.count) people: Strata ÷ GRDB", teamToGRDB, target: "≤ 0.25×")
    record(name, "with team set, \(small.count) people: Strata / GRDB; split inserting / save",
        "\(format(withTeam.median)) / \(format(grdbSmall.median)); \(format(seconds: teamInsert)) / \(format(seconds: teamSave))")
}

// MARK: - The shared read store

/// A saved store of the people (through a context), and the GRDB database with the same rows.
struct ContextStore {
    let directory: String
    let grdb: DatabaseQueue
    /// The people's IDs, in insertion order (`ManagedObjectID` is `Sendable`).
    let ids: [ManagedObjectID]
}

private func buildContextStore(model: ManagedObjectModel, people: [PersonRow]) throws -> ContextStore {
    let directory = try scratchDirectory("context-read")
    // Written with the log directly (the context's insert path is C1's subject, and setting
    // 100k teams through a context is quadratic today); the IDs come from a context fetch.
    let (ids, elapsed) = try timeOnce { () throws -> [ManagedObjectID] in
        try writePeople(people, toStoreIn: directory, model: model)
        let coordinator = try openCoordinator(directory, model: model)
        return try newContext(coordinator).performAndWait { context in
            try context.fetch(FetchRequest(entityName: "Person")).map(\.objectID)
        }
    }
    let grdb = try makeGRDBDatabase(in: directory)
    let grdbPeople = people.map(GRDBPerson.init)
    try grdb.write { db in
        for (index, name) in teamNames.enumerated() { try GRDBTeam(id: Int64(index + 1), name: name).insert(db) }
        for person in grdbPeople { try person.insert(db) }
    }
    say("\n  (read store: \(ids.count) people with their teams, built in \(format(elapsed)); GRDB database with the same rows)")
    return ContextStore(directory: directory, grdb: grdb, ids: ids)
}

/// Writes the teams and `people` (each referencing its team) with `EventLog.commit`, in
/// transactions of 100,000 people, to `directory/store`.
private func writePeople(_ people: [PersonRow], toStoreIn directory: String, model: ManagedObjectModel) throws {
    let log = try EventLog(path: (directory as NSString).appendingPathComponent("store"), model: model, configuration: benchConfiguration())
    var teamDraft = TransactionDraft(author: "seed")
    let temporary = teamNames.map { teamDraft.insert("Team", values: ["name": .attribute(.string($0))]) }
    let result = try log.commit(teamDraft)
    let teams = temporary.map { DraftObjectID.stored(result.permanentID(for: $0)!) }
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

// MARK: - C2. Fetch all and read every attribute

/// One C2 or C3 run's coordinator and context (opened untimed), and what it read.
private final class ReadRun {
    let coordinator: PersistentStoreCoordinator
    let context: ManagedObjectContext
    var checksum = 0
    init(_ directory: String, model: ManagedObjectModel) throws {
        coordinator = try openCoordinator(directory, model: model)
        context = newContext(coordinator)
    }
}

/// C2's reads the way a custom class's typed properties make them (`get(_:as:)`, Core
/// Data's generated accessors' counterpart): no `Any` in between. The timing and the checksum.
private func measureTypedFetch(model: ManagedObjectModel, store: ContextStore, repetitions: Int) throws -> (Stats, checksum: Int) {
    var checksum = 0
    let typed = try measure(
        "Strata context fetch + 5 typed reads (get)", repetitions: repetitions,
        setup: { try ReadRun(store.directory, model: model) },
        body: { run in
            run.checksum = try run.context.performAndWait { context in
                var sum = 0
                for person in try context.fetch(FetchRequest(entityName: "Person")) {
                    sum &+= person.get("firstName", as: String.self)?.utf8.count ?? 0
                    sum &+= person.get("lastName", as: String.self)?.utf8.count ?? 0
                    sum &+= person.get("email", as: String.self)?.utf8.count ?? 0
                    sum &+= Int(person.get("age", as: Int32.self) ?? 0)
                    sum &+= Int(person.get("score", as: Double.self) ?? 0)
                }
                return sum
            }
        },
        teardown: { run in checksum = run.checksum })
    return (typed, checksum)
}

private func runContextFetch(model: ManagedObjectModel, store: ContextStore, repetitions: Int, typedOnly: Bool = false) throws {
    let objects = store.ids.count
    heading("C2. Context: fetch all \(objects) people and read every attribute")
    if typedOnly {
        let typed = try measureTypedFetch(model: model, store: store, repetitions: repetitions)
        say("  (typed reads only: checksum \(typed.checksum))")
        return
    }
    var strataSum = 0
    let strata = try measure(
        "Strata context fetch + read 5 attributes", repetitions: repetitions,
        setup: { try ReadRun(store.directory, model: model) },
        body: { run in
            run.checksum = try run.context.performAndWait { context in
                var sum = 0
                for person in try context.fetch(FetchRequest(entityName: "Person")) {
                    sum &+= (person.value(forKey: "firstName") as? String)?.utf8.count ?? 0
                    sum &+= (person.value(forKey: "lastName") as? String)?.utf8.count ?? 0
                    sum &+= (person.value(forKey: "email") as? String)?.utf8.count ?? 0
                    sum &+= Int(person.value(forKey: "age") as? Int32 ?? 0)
                    sum &+= Int(person.value(forKey: "score") as? Double ?? 0)
                }
                return sum
            }
        },
        teardown: { run in strataSum = run.checksum })
    let (typed, typedSum) = try measureTypedFetch(model: model, store: store, repetitions: repetitions)
    var grdbSum = 0
    let grdb = try measure(
        "GRDB Record fetchAll + read 5 attributes", repetitions: repetitions,
        setup: { () },
        body: { _ in
            grdbSum = try store.grdb.read { db in
                var sum = 0
                for person in try GRDBPerson.fetchAll(db) {
                    sum &+= person.firstName.utf8.count &+ person.lastName.utf8.count &+ person.email.utf8.count
                    sum &+= Int(person.age) &+ Int(person.score)
                }
                return sum
            }
        })
    if strataSum != grdbSum || typedSum != grdbSum {
        say("  warning: checksums differ (Strata \(strataSum), typed \(typedSum), GRDB \(grdbSum))")
    }
    let toGRDB = ratio(strata.medianSeconds, grdb.medianSeconds)
    let typedToGRDB = ratio(typed.medianSeconds, grdb.medianSeconds)
    say("  Strata ÷ GRDB = \(toGRDB)   (target ≤ 0.50×; by min \(ratio(strata.minSeconds, grdb.minSeconds)))")
    say("  typed reads ÷ GRDB = \(typedToGRDB)   (target ≤ 0.50×; by min \(ratio(typed.minSeconds, grdb.minSeconds)))")
    let name = "C2. context fetch \(objects / 1000)k + read"
    record(name, "Strata (value(forKey:) as?) ÷ GRDB Record fetchAll", toGRDB, target: "≤ 0.5×")
    record(name, "Strata (typed get) ÷ GRDB Record fetchAll", typedToGRDB, target: "≤ 0.5×")
    record(name, "Strata / typed / GRDB", "\(format(strata.median)) / \(format(typed.median)) / \(format(grdb.median))")
}

// MARK: - C3. Faults by ID, random order

private func runContextFaults(model: ManagedObjectModel, store: ContextStore, repetitions: Int) throws {
    let objects = store.ids.count
    heading("C3. Context: fire \(objects) faults by ID in random order (object(with:), read firstName)")
    var random = SplitMix64(seed: 7)
    let order = Array(0..<objects).shuffled(using: &random)
    let ids = order.map { store.ids[$0] }
    let keys = order.map { Int64($0 + 1) }  // GRDB rows were inserted in the same order: rowid = index + 1
    var strataSum = 0
    let strata = try measure(
        "Strata object(with:) + read, random order", repetitions: repetitions,
        setup: { try ReadRun(store.directory, model: model) },
        body: { run in
            run.checksum = try run.context.performAndWait { context in
                var sum = 0
                for id in ids {
                    let person = try context.object(with: id)
                    sum &+= (person.value(forKey: "firstName") as? String)?.utf8.count ?? 0
                }
                return sum
            }
        },
        teardown: { run in strataSum = run.checksum })
    var grdbSum = 0
    let grdb = try measure(
        "GRDB Record fetchOne(key:), same order", repetitions: repetitions,
        setup: { () },
        body: { _ in
            grdbSum = try store.grdb.read { db in
                var sum = 0
                for key in keys { sum &+= try GRDBPerson.fetchOne(db, key: key)?.firstName.utf8.count ?? 0 }
                return sum
            }
        })
    if strataSum != grdbSum { say("  warning: checksums differ (Strata \(strataSum), GRDB \(grdbSum))") }
    let toGRDB = ratio(strata.medianSeconds, grdb.medianSeconds)
    say("  Strata ÷ GRDB = \(toGRDB)   (target ≤ 0.20×; by min \(ratio(strata.minSeconds, grdb.minSeconds)))")
    let name = "C3. context faults \(objects / 1000)k by ID"
    record(name, "Strata ÷ GRDB fetchOne(key:)", toGRDB, target: "≤ 0.2×")
    record(name, "Strata / GRDB (per object)",
        "\(format(strata.median)) / \(format(grdb.median)) (\(format(seconds: strata.medianSeconds / Double(objects))) / \(format(seconds: grdb.medianSeconds / Double(objects))))")
}

// MARK: - C4. Undo and redo of one large group

private func runContextUndo(model: ManagedObjectModel, store: ContextStore, changes: Int, repetitions: Int) throws {
    heading("C4. Context: one undo group of \(changes) changes (score set on \(changes) loaded people)")
    let ids = Array(store.ids.prefix(changes))
    /// One round, all inside one `performAndWait` so the loaded objects stay held (the context
    /// itself doesn't retain unchanged objects): load `changes` people (faults fired, untimed),
    /// then time making the changes + `processPendingChanges`, `undo()`, `redo()`; with
    /// `saved`, the group is saved between making it and undoing it (undo then checks the
    /// store for conflicts and re-dirties the context). Saving works on a copy of the store.
    func round(saved: Bool) throws -> (make: Duration, undo: Duration, redo: Duration) {
        var path = store.directory
        if saved {
            path = try scratchDirectory("context-undo")
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.copyItem(atPath: store.directory, toPath: path)
        }
        defer { if saved { remove(path) } }
        let coordinator = try openCoordinator(path, model: model)
        return try newContext(coordinator).performAndWait { context in
            context.levelsOfUndo = 0
            var held: [ManagedObject] = []
            held.reserveCapacity(ids.count)
            for id in ids {
                let person = try context.object(with: id)
                _ = person.value(forKey: "score")
                held.append(person)
            }
            let clock = ContinuousClock()
            let start = clock.now
            for (index, person) in held.enumerated() { person.setValue(Double(index) + 0.5, forKey: "score") }
            context.processPendingChanges()
            let made = clock.now
            if saved { try context.save() }
            let undoStart = clock.now
            try context.undo()
            let undone = clock.now
            try context.redo()
            let redone = clock.now
            guard context.canUndo, !context.canRedo, held.first?.value(forKey: "score") as? Double == 0.5 else {
                throw RawLMDBError(code: -1, call: "undo/redo didn't restore the group")
            }
            return (made - start, undone - undoStart, redone - undone)
        }
    }
    for saved in [false, true] {
        var samples: [(make: Duration, undo: Duration, redo: Duration)] = []
        for index in 0..<(1 + repetitions) {
            let sample = try round(saved: saved)
            if index > 0 { samples.append(sample) }
        }
        let suffix = saved ? " (group saved first)" : ""
        let make = Stats(samples: samples.map(\.make))
        let undo = Stats(samples: samples.map(\.undo))
        let redo = Stats(samples: samples.map(\.redo))
        report("make \(changes) changes + processPendingChanges" + suffix, make)
        report("undo() of that group" + suffix, undo)
        report("redo() of that group" + suffix, redo)
        let undoRatio = ratio(undo.medianSeconds, make.medianSeconds)
        let redoRatio = ratio(redo.medianSeconds, make.medianSeconds)
        say("  undo ÷ make = \(undoRatio), redo ÷ make = \(redoRatio)\(suffix)   (target ≤ 1.00× each)")
        let name = "C4. undo/redo of a \(changes / 1000)k-change group"
        if saved {
            record(name, "after save: undo ÷ make / redo ÷ make", "\(undoRatio) / \(redoRatio)")
            record(name, "after save: make / undo / redo", "\(format(make.median)) / \(format(undo.median)) / \(format(redo.median))")
        } else {
            record(name, "undo ÷ making the changes", undoRatio, target: "≤ 1×")
            record(name, "redo ÷ making the changes", redoRatio, target: "≤ 1×")
            record(name, "make / undo / redo", "\(format(make.median)) / \(format(undo.median)) / \(format(redo.median))")
        }
    }
}

// MARK: - C5. Memory while iterating

private func runContextMemory(model: ManagedObjectModel, objects: Int) throws {
    heading("C5. Context: iterate \(objects) people without keeping them — peak RSS (VmHWM)")
    let directory = try scratchDirectory("context-iterate")
    defer { remove(directory) }
    // Built with the log directly (faster than a context for 1M rows), in 100k transactions.
    let (_, built) = try timeOnce { () throws in
        var random = SplitMix64(seed: 5)
        try writePeople((0..<objects).map { makePerson($0, &random) }, toStoreIn: directory, model: model)
    }
    say("  store of \(objects) people built in \(format(built))")
    let coordinator = try openCoordinator(directory, model: model)
    let storeUUID = coordinator.persistentStores[0].identifier
    let checkpoints = Set([100_000, objects].filter { $0 <= objects })
    let canReset = resetPeakRSS()
    if !canReset { say("  (can't reset the peak: /proc/self/clear_refs not writable; figures include earlier benchmarks)") }

    // (a) By ID: object(with:) for each primary key in turn, read every attribute, drop it.
    let baseline = procStatus("VmRSS")
    let baselineAnon = procStatus("RssAnon")
    var byID: [(count: Int, peak: Int, anon: Int, file: Int)] = []
    let (_, idTime) = try timeOnce { () throws in
        byID = try newContext(coordinator).performAndWait { context in
            var peaks: [(count: Int, peak: Int, anon: Int, file: Int)] = []
            var sum = 0
            for pk in 1...objects {
                guard let uri = URL(string: "x-strata://\(storeUUID.uuidString)/Person/p\(pk)"),
                    let id = coordinator.managedObjectID(forURIRepresentation: uri)
                else { throw RawLMDBError(code: -1, call: "no ID for p\(pk)") }
                let person = try context.object(with: id)
                for key in ["firstName", "lastName", "email", "age", "score"] where person.value(forKey: key) != nil { sum &+= 1 }
                if checkpoints.contains(pk) { peaks.append((pk, procStatus("VmHWM"), procStatus("RssAnon"), procStatus("RssFile"))) }
            }
            if sum != objects * 5 { throw RawLMDBError(code: -1, call: "read \(sum) values, expected \(objects * 5)") }
            return peaks
        }
    }
    for (count, peak, anon, file) in byID {
        say("  by ID (object(with:) + read, dropped): after \(count): peak RSS \(mebibytes(peak)) (+\(mebibytes(peak - baseline)) over the start);"
            + " now anonymous \(mebibytes(anon)) (+\(mebibytes(anon - baselineAnon))), file-backed (LMDB map) \(mebibytes(file))")
    }
    say("  by ID: \(format(idTime)) for \(objects) (\(rate(Double(objects), perSeconds: idTime.seconds)))")

    // (a2) The library's way through a large result: fetchObjectIDs (IDs only, no objects or
    // rows kept), then existingObjects(with:) a chunk of 1,000 at a time (one read each),
    // every attribute read, the context reset after each chunk.
    _ = resetPeakRSS()
    let chunkedStart = procStatus("VmRSS")
    let chunkedStartAnon = procStatus("RssAnon")
    var chunked: [(count: Int, peak: Int, anon: Int)] = []
    let (_, chunkedTime) = try timeOnce { () throws in
        chunked = try newContext(coordinator).performAndWait { context in
            var peaks: [(count: Int, peak: Int, anon: Int)] = []
            var sum = 0
            let ids = try context.fetchObjectIDs(FetchRequest(entityName: "Person"))
            var done = 0
            for start in stride(from: 0, to: ids.count, by: 1_000) {
                for case let person? in try context.existingObjects(with: Array(ids[start..<min(start + 1_000, ids.count)])) {
                    for key in ["firstName", "lastName", "email", "age", "score"] where person.value(forKey: key) != nil { sum &+= 1 }
                    done += 1
                    if checkpoints.contains(done) { peaks.append((done, procStatus("VmHWM"), procStatus("RssAnon"))) }
                }
                context.reset()
            }
            if sum != objects * 5 { throw RawLMDBError(code: -1, call: "read \(sum) values, expected \(objects * 5)") }
            return peaks
        }
    }
    for (count, peak, anon) in chunked {
        say("  IDs, then existingObjects by 1,000 + read, reset: after \(count): peak RSS \(mebibytes(peak)) (+\(mebibytes(peak - chunkedStart)) over the start);"
            + " now anonymous \(mebibytes(anon)) (+\(mebibytes(anon - chunkedStartAnon)))")
    }
    say("  IDs + chunks: \(format(chunkedTime)) for \(objects) (\(rate(Double(objects), perSeconds: chunkedTime.seconds)))")

    // (b) fetch(): the basic fetch materialises every object of the entity (a limit applies
    // after the scan), so the result holds them all until it is dropped; for comparison.
    _ = resetPeakRSS()
    let fetchStart = procStatus("VmRSS")
    let fetchStartAnon = procStatus("RssAnon")
    let ((fetchPeak, fetchAnon), fetchTime) = try timeOnce { () throws -> (Int, Int) in
        try newContext(coordinator).performAndWait { context in
            var sum = 0
            let result = try context.fetch(FetchRequest(entityName: "Person"))
            for person in result where person.value(forKey: "email") != nil { sum &+= 1 }
            if sum != objects { throw RawLMDBError(code: -1, call: "fetched \(sum) people, expected \(objects)") }
            let anon = withExtendedLifetime(result) { procStatus("RssAnon") }
            return (procStatus("VmHWM"), anon)
        }
    }
    say("  fetch() all + read: peak RSS \(mebibytes(fetchPeak)) (+\(mebibytes(fetchPeak - fetchStart)) over the start),"
        + " anonymous with the result held \(mebibytes(fetchAnon)) (+\(mebibytes(fetchAnon - fetchStartAnon))), \(format(fetchTime))")
    let name = "C5. memory iterating \(objects / 1000)k"
    for (count, peak, anon, file) in byID {
        record(name, "after \(count / 1000)k by ID: peak RSS; anonymous; file-backed",
            "\(mebibytes(peak)) (+\(mebibytes(peak - baseline))); \(mebibytes(anon)) (+\(mebibytes(anon - baselineAnon))); \(mebibytes(file))", target: "flat")
    }
    for (count, peak, anon) in chunked {
        record(name, "after \(count / 1000)k by fetchObjectIDs + existingObjects chunks: peak RSS; anonymous",
            "\(mebibytes(peak)) (+\(mebibytes(peak - chunkedStart))); \(mebibytes(anon)) (+\(mebibytes(anon - chunkedStartAnon)))", target: "flat")
    }
    record(name, "fetch() of all \(objects / 1000)k: peak RSS; anonymous with the result held",
        "\(mebibytes(fetchPeak)) (+\(mebibytes(fetchPeak - fetchStart))); +\(mebibytes(fetchAnon - fetchStartAnon))")
}
