import Foundation
import GRDB
import Strata

// Session 21's benchmarks: fetches by a to-one relationship, Core Data's most common
// predicate (`team == %@`), and a compound index under it. Same people as F1–F4 (benchmark
// 1's, seed 6: 8 teams, so about an eighth of the people each); GRDB's `belongsTo("team")`
// indexes `teamId`, as Core Data's SQLite store indexes a to-one's foreign key.
//
// F5. `team == %@` for each of the 8 teams, every object read: Strata reads the store's
//     referrers of the team (the planner's relationship equality) ÷ GRDB
//     `filter(teamId == id).fetchAll`, timed alternately; and the same fetch written so
//     the planner can't serve it (`NOT (team != %@)`: a full scan, what every such fetch
//     cost before session 21) ÷ the served one.
// F6. `team == %@ AND age >= 60` sorted by age descending then email, limit 10, for each
//     team, objects read: with the named index `byTeamAge` (team, age) the planner walks
//     it under the team ÷ GRDB with an index on (teamId, age); and without it (referrers,
//     then a sort in memory) ÷ with it.
// F7. `SELF IN %@` with 1,000 object IDs drawn at random (Core Data's fetch of objects by
//     ID), objects read: Strata reads those objects ÷ GRDB `filter(keys:)`; and the same
//     fetch unserved (`NOT (NOT (SELF IN %@))`, a full scan) ÷ served.
// F8. Fetches through a relationship key path (joins). F8a: `team.name == %@` for each of
//     the 8 team names, every object read, in a fresh context (no team known beforehand):
//     Strata ÷ GRDB `SELECT person.* … JOIN team … WHERE team.name = ?`, timed alternately;
//     and the same fetch unserved (`NOT (NOT (team.name == %@))`, a full scan) ÷ served.
//     F8b: `ANY members.email == %@` on Team (a person's team found from their email,
//     Core Data's to-many ANY through a key path) for 100 emails drawn at random, each team's
//     name read: Strata ÷ GRDB `SELECT DISTINCT team.* … JOIN person … WHERE person.email = ?`;
//     and unserved (`NOT (NOT (ANY members.email == %@))`, every team's members judged for
//     each email: ≈ 0.7 s an email at 100,000 people) ÷ served, once, over the first 20
//     emails only.
// F9. `members.@count >= %d` on Team (teams by their number of members, 8 thresholds around
//     the teams' sizes), each team's name read: the members' IDs counted (`count(forKey:)`,
//     session 22) ÷ GRDB `SELECT * FROM team WHERE (SELECT COUNT(*) FROM person WHERE
//     teamId = team.id) >= ?`; and the count the way it was before, a collection of the
//     members made and counted (`SUBQUERY(members, $m, TRUEPREDICATE).@count >= %d`) ÷ it.

func runRelatedFetchBenchmarks(objects: Int, repetitions: Int) throws {
    var random = SplitMix64(seed: 6)
    let people = (0..<objects).map { makePerson($0, &random) }
    let plain = try buildFetchStore(model: try peopleModel(), people: people, label: "related-plain")
    defer { remove(plain.directory) }
    // STRATA_BENCH_F6_ONLY=1: only F6; =2: only its walk, 200 rounds (for a profiler).
    if environmentInt("STRATA_BENCH_F6_ONLY", 0) == 0 {
        try runTeamEquality(store: plain, repetitions: repetitions)
        try runObjectsByID(store: plain, repetitions: repetitions)
        try runTeamNameEquality(store: plain, repetitions: repetitions)
        try runMemberEmail(store: plain, people: people, repetitions: repetitions)
        try runMemberCount(store: plain, repetitions: repetitions)
    }
    let compound = try buildFetchStore(model: try peopleModel(teamAgeIndex: true), people: people, label: "related-compound")
    defer { remove(compound.directory) }
    try compound.grdb.write { db in try db.execute(sql: "CREATE INDEX person_team_age ON person(teamId, age)") }
    try runTeamTopAges(plain: plain, compound: compound, repetitions: repetitions)
}

/// The teams of `context`'s store by their GRDB id (the position of their name in
/// `teamNames`, plus one).
private func teamsByID(_ context: ManagedObjectContext) throws -> [(id: Int64, team: ManagedObjectID)] {
    try context.performAndWait { context in
        try context.fetch(Strata.FetchRequest(entityName: "Team")).compactMap { team in
            guard let name = team.value(forKey: "name") as? String, let index = teamNames.firstIndex(of: name) else { return nil }
            return (Int64(index + 1), team.objectID)
        }.sorted { $0.id < $1.id }
    }
}

/// One timed round: a fresh context, `request` of each team fetched and every object read;
/// the time and the checksum.
private func teamRound(
    _ store: FetchStore, _ request: @escaping @Sendable (ManagedObjectID) throws -> Strata.FetchRequest<ManagedObject>
) throws -> (Duration, Int) {
    let context = relatedContext(store.coordinator)
    let teams = try teamsByID(context)
    let clock = ContinuousClock()
    let start = clock.now
    let sum = try context.performAndWait { context in
        var sum = 0
        for (_, team) in teams {
            for person in try context.fetch(try request(team)) { sum &+= readAll(person) }
        }
        return sum
    }
    return (clock.now - start, sum)
}

private func relatedContext(_ coordinator: PersistentStoreCoordinator) -> ManagedObjectContext {
    ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "bench")
}

// MARK: - F5. team == %@

private func runTeamEquality(store: FetchStore, repetitions: Int) throws {
    heading("F5. Fetch: team == %@ for each of \(teamNames.count) teams, \(store.count) people, objects read")
    let probe = relatedContext(store.coordinator)
    let teams = try teamsByID(probe)
    guard let first = teams.first else { throw RelatedFetchBenchmarkError(description: "no teams in the store") }
    let plan = try probe.performAndWait { context in
        try context.explain(Strata.FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "team == %@", first.team))).description
    }
    let unserved = try probe.performAndWait { context in
        try context.explain(Strata.FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "NOT (team != %@)", first.team))).description
    }
    say("  Strata plan: \(plan)")
    say("  unserved form's plan: \(unserved)")

    func strataRound(_ format: String) throws -> (Duration, Int) {
        try teamRound(store) { team in Strata.FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: format, team)) }
    }
    func grdbRound() throws -> (Duration, Int) {
        let clock = ContinuousClock()
        let start = clock.now
        let sum = try store.grdb.read { db in
            var sum = 0
            for (id, _) in teams {
                for person in try GRDBPerson.filter(Column("teamId") == id).fetchAll(db) { sum &+= readAll(person) }
            }
            return sum
        }
        return (clock.now - start, sum)
    }
    try compareServed(
        ServedComparison(
            name: "F5. team == %@, \(store.count / 1000)k people", grdbRow: "Strata ÷ GRDB (teamId index)",
            strata: "Strata fetch(team == %@) + read, 8 teams", grdb: "GRDB fetchAll(teamId ==) + read, 8 teams",
            unserved: "Strata fetch(NOT (team != %@)) + read (full scans)", served: "Strata fetch(team == %@) + read",
            repetitions: repetitions, unservedRepetitions: max(3, repetitions / 2)),
        strata: { try strataRound("team == %@") }, grdb: grdbRound, unserved: { try strataRound("NOT (team != %@)") },
        served: { try strataRound("team == %@") })
}

// MARK: - F7. SELF IN %@

private func runObjectsByID(store: FetchStore, repetitions: Int) throws {
    let wanted = 1000
    heading("F7. Fetch: SELF IN %@ with \(wanted) object IDs among \(store.count) people, objects read")
    // Person primary keys are 1…count, in insertion order, as GRDB's ids are.
    var random = SplitMix64(seed: 21)
    let keys = (0..<wanted).map { _ in Int64(1 + random.next() % UInt64(store.count)) }
    let probe = relatedContext(store.coordinator)
    let ids: [ManagedObjectID] = try probe.performAndWait { context in
        let all = try context.fetchObjectIDs(Strata.FetchRequest(entityName: "Person"))
        let byKey = Dictionary(uniqueKeysWithValues: all.compactMap { id in
            Int64(id.uriRepresentation().lastPathComponent.dropFirst()).map { ($0, id) }
        })
        return keys.compactMap { byKey[$0] }
    }
    let plan = try probe.performAndWait { context in
        try context.explain(Strata.FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "SELF IN %@", ids))).description
    }
    say("  Strata plan: \(plan.prefix(80))…")
    func strataRound(_ format: String) throws -> (Duration, Int) {
        try freshRound(store) { context in
            let request = Strata.FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: format, ids))
            return try context.fetch(request).reduce(0) { $0 &+ readAll($1) }
        }
    }
    try compareServed(
        ServedComparison(
            name: "F7. SELF IN %@, \(wanted) of \(store.count / 1000)k people", grdbRow: "Strata ÷ GRDB fetchAll(keys:)",
            strata: "Strata fetch(SELF IN %@) + read", grdb: "GRDB fetchAll(keys:) + read",
            // One round: the full scan judges SELF IN against the 1,000 IDs for each of the people (≈ 20 s).
            unserved: "Strata fetch(NOT (NOT (SELF IN %@))) (a full scan)", served: "Strata fetch(SELF IN %@) + read",
            repetitions: max(repetitions, 9), unservedWarmup: 0, unservedRepetitions: 1),
        strata: { try strataRound("SELF IN %@") },
        grdb: {
            let clock = ContinuousClock()
            let start = clock.now
            let sum = try store.grdb.read { db in try GRDBPerson.fetchAll(db, keys: Set(keys)).reduce(0) { $0 &+ readAll($1) } }
            return (clock.now - start, sum)
        },
        unserved: { try strataRound("NOT (NOT (SELF IN %@))") }, served: { try strataRound("SELF IN %@") })
}

// MARK: - F8a. team.name == %@

private func runTeamNameEquality(store: FetchStore, repetitions: Int) throws {
    heading("F8a. Fetch: team.name == %@ for each of \(teamNames.count) team names, \(store.count) people, objects read")
    guard let first = teamNames.first else { throw RelatedFetchBenchmarkError(description: "no team names") }
    let probe = relatedContext(store.coordinator)
    for (label, format) in [("Strata plan", "team.name == %@"), ("unserved form's plan", "NOT (NOT (team.name == %@))")] {
        let plan = try probe.performAndWait { context in
            try context.explain(Strata.FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: format, first))).description
        }
        say("  \(label): \(plan)")
    }
    // A fresh context each round, knowing no team: the fetch finds the teams by their name.
    func strataRound(_ format: String) throws -> (Duration, Int) {
        try freshRound(store) { context in
            var sum = 0
            for name in teamNames {
                let request = Strata.FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: format, name))
                for person in try context.fetch(request) { sum &+= readAll(person) }
            }
            return sum
        }
    }
    func grdbRound() throws -> (Duration, Int) {
        let clock = ContinuousClock()
        let start = clock.now
        let sum = try store.grdb.read { db in
            var sum = 0
            for name in teamNames {
                let people = try GRDBPerson.fetchAll(
                    db, sql: "SELECT person.* FROM person JOIN team ON team.id = person.teamId WHERE team.name = ?", arguments: [name])
                for person in people { sum &+= readAll(person) }
            }
            return sum
        }
        return (clock.now - start, sum)
    }
    try compareServed(
        ServedComparison(
            name: "F8a. team.name == %@, \(store.count / 1000)k people", grdbRow: "Strata ÷ GRDB (join)",
            strata: "Strata fetch(team.name == %@) + read, 8 names", grdb: "GRDB person JOIN team WHERE name + read",
            unserved: "Strata fetch(NOT (NOT (team.name == %@))) + read", served: "Strata fetch(team.name == %@) + read",
            repetitions: repetitions, unservedRepetitions: max(3, repetitions / 2)),
        strata: { try strataRound("team.name == %@") }, grdb: grdbRound, unserved: { try strataRound("NOT (NOT (team.name == %@))") },
        served: { try strataRound("team.name == %@") })
}

// MARK: - F8b. ANY members.email == %@

/// A checksum of a team's name that tells the 8 names apart (their lengths alone don't).
private func nameChecksum(_ name: String) -> Int {
    name.utf8.reduce(0) { $0 &* 31 &+ Int($1) }
}

private func runMemberEmail(store: FetchStore, people: [PersonRow], repetitions: Int) throws {
    let wanted = 100
    // The unserved form judges every team's members (all the people) for each email:
    // ≈ 0.7 s an email at 100,000 people (≈ 70 s for the 100), so its one round takes only
    // the first 20 emails (≈ 15 s), served and unserved alike.
    let unservedWanted = 20
    heading("F8b. Fetch Team: ANY members.email == %@ for \(wanted) emails among \(store.count) people, team names read")
    guard !people.isEmpty else { throw RelatedFetchBenchmarkError(description: "no people") }
    var random = SplitMix64(seed: 28)
    let emails = (0..<wanted).map { _ in people[Int(random.next() % UInt64(people.count))].email }
    let few = Array(emails.prefix(unservedWanted))
    let probe = relatedContext(store.coordinator)
    for (label, format) in [("Strata plan", "ANY members.email == %@"), ("unserved form's plan", "NOT (NOT (ANY members.email == %@))")] {
        let plan = try probe.performAndWait { context in
            try context.explain(Strata.FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: format, emails[0]))).description
        }
        say("  \(label): \(plan)")
    }
    func strataRound(_ format: String, _ emails: [String]) throws -> (Duration, Int) { try teamsRound(store, format, emails) }
    try compareServed(
        ServedComparison(
            name: "F8b. ANY members.email == %@, \(wanted) emails, \(store.count / 1000)k people", grdbRow: "Strata ÷ GRDB (join)",
            strata: "Strata fetch(ANY members.email == %@) + name, \(wanted)", grdb: "GRDB team JOIN person WHERE email + name",
            unserved: "Strata fetch(NOT (NOT (ANY …))), \(few.count) emails", served: "Strata fetch(ANY members.email == %@), \(few.count) emails",
            repetitions: max(repetitions, 9), unservedWarmup: 0, unservedRepetitions: 1, unservedNote: "\(few.count) emails"),
        strata: { try strataRound("ANY members.email == %@", emails) },
        grdb: { try grdbTeamsRound(store, "SELECT DISTINCT team.* FROM team JOIN person ON person.teamId = team.id WHERE person.email = ?", emails) },
        unserved: { try strataRound("NOT (NOT (ANY members.email == %@))", few) }, served: { try strataRound("ANY members.email == %@", few) })
}

// MARK: - F9. members.@count >= %d

private func runMemberCount(store: FetchStore, repetitions: Int) throws {
    heading("F9. Fetch Team: members.@count >= %d for 8 thresholds, \(store.count) people, team names read")
    let size = store.count / teamNames.count
    let thresholds = (0..<8).map { max(0, size - size / 20 + $0 * size / 80) }
    func strataRound(_ format: String) throws -> (Duration, Int) { try teamsRound(store, format, thresholds) }
    try compareServed(
        ServedComparison(
            name: "F9. members.@count >= %d, 8 thresholds, \(store.count / 1000)k people", grdbRow: "Strata ÷ GRDB (COUNT subquery)",
            strata: "Strata fetch(members.@count >= %d) + name", grdb: "GRDB team WHERE (SELECT COUNT(*) …) >= ?",
            unserved: "Strata fetch(SUBQUERY(members, …).@count >= %d)", served: "Strata fetch(members.@count >= %d)",
            repetitions: repetitions, unservedRepetitions: max(3, repetitions / 2),
            unservedRow: "members made and counted (SUBQUERY) ÷ IDs counted"),
        strata: { try strataRound("members.@count >= %d") },
        grdb: { try grdbTeamsRound(store, "SELECT * FROM team WHERE (SELECT COUNT(*) FROM person WHERE person.teamId = team.id) >= ?", thresholds) },
        unserved: { try strataRound("SUBQUERY(members, $m, TRUEPREDICATE).@count >= %d") },
        served: { try strataRound("members.@count >= %d") })
}

// MARK: - F6. team == %@ AND age >= 60, top 10 by age

private func topAgesRequest(_ team: ManagedObjectID) throws -> Strata.FetchRequest<ManagedObject> {
    var request = Strata.FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "team == %@ AND age >= 60", team))
    request.sortDescriptors = [FetchSortDescriptor(key: "age", ascending: false), FetchSortDescriptor(key: "email")]
    request.fetchLimit = 10
    return request
}

private func runTeamTopAges(plain: FetchStore, compound: FetchStore, repetitions: Int) throws {
    heading("F6. Fetch: team == %@ AND age >= 60 sorted by age descending, email, limit 10, each team, objects read")
    for (label, store) in [("with byTeamAge", compound), ("without", plain)] {
        let context = relatedContext(store.coordinator)
        guard let first = try teamsByID(context).first else { throw RelatedFetchBenchmarkError(description: "no teams in the store") }
        let plan = try context.performAndWait { try $0.explain(try topAgesRequest(first.team)).description }
        say("  Strata plan \(label): \(plan)")
    }
    func strataRound(_ store: FetchStore) throws -> (Duration, Int) { try teamRound(store, topAgesRequest) }
    if environmentInt("STRATA_BENCH_F6_ONLY", 0) == 2 {
        let walks = try measure("Strata, index byTeamAge walked (alone)", repetitions: 200, setup: {}, body: { _ in _ = try strataRound(compound) })
        say("  per round: \(format(walks.median))")
        return
    }
    var sums: (compound: Int, plain: Int, grdb: Int) = (0, 0, 0)
    let paired = try measureAlternately(
        "Strata, index byTeamAge walked", "GRDB, index (teamId, age)", repetitions: max(repetitions, 9),
        {
            let (time, sum) = try strataRound(compound)
            sums.compound = sum
            return time
        },
        {
            let clock = ContinuousClock()
            let start = clock.now
            sums.grdb = try compound.grdb.read { db in
                var sum = 0
                for id in 1...Int64(teamNames.count) {
                    let people = try GRDBPerson.filter(Column("teamId") == id && Column("age") >= 60)
                        .order(Column("age").desc, Column("email")).limit(10).fetchAll(db)
                    for person in people { sum &+= readAll(person) }
                }
                return sum
            }
            return clock.now - start
        })
    let without = try measureAlternately(
        "Strata without it (referrers, sort in memory)", "Strata, index byTeamAge walked", repetitions: max(repetitions, 9),
        {
            let (time, sum) = try strataRound(plain)
            sums.plain = sum
            return time
        },
        { try strataRound(compound).0 })
    if sums.compound != sums.grdb || sums.plain != sums.compound {
        say("  warning: checksums differ (walked \(sums.compound), GRDB \(sums.grdb), without \(sums.plain))")
    }
    say("  walked ÷ GRDB = \(String(format: "%.2f×", paired.pairedRatio)); without the index ÷ walked = \(String(format: "%.1f×", without.pairedRatio))")
    let name = "F6. team == %@ AND age >= 60, top 10, \(compound.count / 1000)k people"
    record(name, "Strata (compound walk) ÷ GRDB", String(format: "%.2f×", paired.pairedRatio))
    record(name, "without the index ÷ with", String(format: "%.1f×", without.pairedRatio))
}

struct RelatedFetchBenchmarkError: Error, CustomStringConvertible {
    let description: String
}

// MARK: - Rounds fetching teams

/// One Strata round fetching Team with `format` and each of `arguments` in a fresh context,
/// each result's name read (checksummed).
private func teamsRound<Argument: Sendable>(_ store: FetchStore, _ format: String, _ arguments: [Argument]) throws -> (Duration, Int) {
    try freshRound(store) { context in
        var sum = 0
        for argument in arguments {
            let request = Strata.FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: format, argument))
            for team in try context.fetch(request) { sum &+= nameChecksum(team.value(forKey: "name") as? String ?? "") }
        }
        return sum
    }
}

/// The same from GRDB: `GRDBTeam.fetchAll` with `sql` and each of `arguments`.
private func grdbTeamsRound<Argument: DatabaseValueConvertible>(_ store: FetchStore, _ sql: String, _ arguments: [Argument]) throws -> (Duration, Int) {
    let clock = ContinuousClock()
    let start = clock.now
    let sum = try store.grdb.read { db in
        var sum = 0
        for argument in arguments {
            for team in try GRDBTeam.fetchAll(db, sql: sql, arguments: [argument]) { sum &+= nameChecksum(team.name) }
        }
        return sum
    }
    return (clock.now - start, sum)
}

// MARK: - Served against GRDB, and against unserved

/// One timed round in a fresh context (which knows no object yet): the time `body` takes
/// and the checksum it returns.
private func freshRound(_ store: FetchStore, _ body: @Sendable (isolated ManagedObjectContext) throws -> Int) throws -> (Duration, Int) {
    let context = relatedContext(store.coordinator)
    let clock = ContinuousClock()
    let start = clock.now
    let sum = try context.performAndWait(body)
    return (clock.now - start, sum)
}

/// One round of a peer: its time and the checksum of what it read.
private typealias Round = () throws -> (Duration, Int)

/// How a served fetch is compared: Strata ÷ GRDB timed alternately (`repetitions`), then
/// the same fetch written so the planner can't serve it ÷ the served one
/// (`unservedRepetitions`, after `unservedWarmup`). The labels name the four sides.
private struct ServedComparison {
    var name: String
    var grdbRow: String
    var strata: String
    var grdb: String
    var unserved: String
    var served: String
    var repetitions: Int
    var unservedWarmup = 1
    var unservedRepetitions: Int
    /// Said of the unserved comparison when it reads less than the paired one.
    var unservedNote = ""
    /// The row the unserved ratio is recorded under.
    var unservedRow = "unserved (full scan) ÷ served"
}

/// Runs `comparison`: the checksums of Strata and GRDB, and of the unserved and served
/// sides, must agree (a warning is printed otherwise); both ratios are printed and recorded.
private func compareServed(_ comparison: ServedComparison, strata: Round, grdb: Round, unserved: Round, served: Round) throws {
    var sums: (strata: Int, grdb: Int, unserved: Int, served: Int) = (0, 0, 0, 0)
    let paired = try measureAlternately(
        comparison.strata, comparison.grdb, repetitions: comparison.repetitions,
        {
            let (time, sum) = try strata()
            sums.strata = sum
            return time
        },
        {
            let (time, sum) = try grdb()
            sums.grdb = sum
            return time
        })
    let full = try measureAlternately(
        comparison.unserved, comparison.served, warmup: comparison.unservedWarmup, repetitions: comparison.unservedRepetitions,
        {
            let (time, sum) = try unserved()
            sums.unserved = sum
            return time
        },
        {
            let (time, sum) = try served()
            sums.served = sum
            return time
        })
    if sums.strata != sums.grdb || sums.unserved != sums.served {
        say("  warning: checksums differ (Strata \(sums.strata), GRDB \(sums.grdb); unserved \(sums.unserved), served \(sums.served))")
    }
    let note = comparison.unservedNote.isEmpty ? "" : " (\(comparison.unservedNote))"
    say("  Strata ÷ GRDB = \(String(format: "%.2f×", paired.pairedRatio)) (paired rounds)")
    say("  \(comparison.unservedRow) = \(String(format: "%.1f×", full.pairedRatio))\(note)")
    record(comparison.name, comparison.grdbRow, String(format: "%.2f×", paired.pairedRatio))
    record(comparison.name, comparison.unservedRow, String(format: "%.1f×", full.pairedRatio) + note)
}
