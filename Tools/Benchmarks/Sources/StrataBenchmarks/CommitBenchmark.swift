import Foundation
import GRDB
import Strata
import CBenchLMDB

/// Benchmark 1: one transaction inserting `objects` people (and the teams they reference).
///
/// - Strata: `EventLog.commit` of one prebuilt draft (the draft is built outside the timing).
/// - Floor: the same state records Strata wrote (read back byte for byte from a Strata store),
///   `mdb_put` with `MDB_APPEND` into one database, in one durable write transaction.
/// - Context floor: every record of every table Strata's commit wrote (events, state, indexes,
///   referrers, history, counters), same way: what LMDB alone costs for Strata's write set.
/// - GRDB: `record.insert(db)` for every team and person in one `write` transaction.
func runCommitBenchmark(objects: Int, repetitions: Int) throws {
    heading("1. Commit of one transaction inserting \(objects) Person objects (+ \(teamNames.count) Teams)")
    let model = try peopleModel()
    let people = makePeople(objects)

    // MARK: Strata
    final class StrataRun {
        var log: EventLog?
        let directory: String
        var draft = TransactionDraft(author: "bench")
        init(directory: String, log: EventLog) {
            self.directory = directory
            self.log = log
        }
    }
    var strataDirectories: [String] = []
    let strata = try measure(
        "Strata EventLog.commit", repetitions: repetitions,
        setup: { () throws -> StrataRun in
            let directory = try scratchDirectory("commit")
            let run = StrataRun(directory: directory, log: try EventLog(path: directory, model: model, configuration: benchConfiguration()))
            let teams = teamNames.map { run.draft.insert("Team", values: ["name": .attribute(.string($0))]) }
            for person in people {
                run.draft.insert("Person", values: person.draftValues(team: teams[person.team]))
            }
            return run
        },
        body: { run in try run.log!.commit(run.draft) },
        teardown: { run in
            run.log = nil
            strataDirectories.append(run.directory)
        })

    // The exact bytes Strata wrote, from the last run's store.
    let tables = try snapshotStore(strataDirectories.last!)
    for directory in strataDirectories { remove(directory) }
    guard let state = tables.first(where: { $0.name == "state" }) else { throw RawLMDBError(code: -1, call: "no state table") }
    let written = tables.filter { ["events", "state", "index", "referrers", "members", "history", "counters"].contains($0.name) }
    let writtenRecords = written.reduce(0) { $0 + $1.batch.count }
    let writtenBytes = written.reduce(0) { $0 + $1.batch.payloadBytes }

    // MARK: Raw LMDB floor
    final class RawRun {
        let directory: String
        let lmdb: RawLMDB
        var dbis: [MDB_dbi] = []
        init(directory: String) throws {
            self.directory = directory
            lmdb = try RawLMDB(path: directory)
        }
    }
    let floor = try measure(
        "raw LMDB floor (state records, MDB_APPEND)", repetitions: repetitions,
        setup: { () throws -> RawRun in
            let run = try RawRun(directory: try scratchDirectory("floor"))
            run.dbis = [try run.lmdb.database("state")]
            return run
        },
        body: { run in
            try run.lmdb.write { txn in try RawLMDB.put(state.batch, range: 0..<state.batch.count, into: run.dbis[0], txn: txn) }
        },
        teardown: { run in remove(run.directory) })

    let floorAll = try measure(
        "raw LMDB, all tables Strata wrote", repetitions: repetitions,
        setup: { () throws -> RawRun in
            let run = try RawRun(directory: try scratchDirectory("floor-all"))
            run.dbis = try written.map { try run.lmdb.database($0.name, flags: $0.flags) }
            return run
        },
        body: { (run: inout RawRun) throws in
            try run.lmdb.write { txn in
                for (table, dbi) in zip(written, run.dbis) {
                    let append = table.flags & UInt32(MDB_DUPSORT) != 0 ? UInt32(MDB_APPENDDUP) : UInt32(MDB_APPEND)
                    try RawLMDB.put(table.batch, range: 0..<table.batch.count, into: dbi, txn: txn, flags: append)
                }
            }
        },
        teardown: { run in remove(run.directory) })

    // MARK: GRDB
    let grdbPeople = people.map(GRDBPerson.init)
    let grdbTeams = teamNames.enumerated().map { GRDBTeam(id: Int64($0.offset + 1), name: $0.element) }
    var settings = ""
    let grdb = try measure(
        "GRDB Record insert, one transaction", repetitions: repetitions,
        setup: { () throws -> (String, DatabaseQueue) in
            let directory = try scratchDirectory("grdb")
            let queue = try makeGRDBDatabase(in: directory)
            settings = try grdbSettings(queue)
            return (directory, queue)
        },
        body: { run in
            try run.1.write { db in
                for team in grdbTeams { try team.insert(db) }
                for person in grdbPeople { try person.insert(db) }
            }
        },
        teardown: { run in remove(run.0) })

    say("  state records: \(state.batch.count), \(megabytes(state.batch.payloadBytes)) of keys+values;"
        + " all tables Strata wrote: \(writtenRecords) records, \(megabytes(writtenBytes))")
    say("  GRDB: \(settings)")
    let toFloor = ratio(strata.medianSeconds, floor.medianSeconds)
    let toGRDB = ratio(strata.medianSeconds, grdb.medianSeconds)
    say("  Strata ÷ floor = \(toFloor)   (target ≤ 2.50×; by min \(ratio(strata.minSeconds, floor.minSeconds)))")
    say("  Strata ÷ GRDB  = \(toGRDB)   (target < 1.00×; by min \(ratio(strata.minSeconds, grdb.minSeconds)))")
    say("  Strata ÷ raw LMDB of Strata's whole write set = \(ratio(strata.medianSeconds, floorAll.medianSeconds))")
    let name = "1. commit \(objects / 1000)k objects"
    record(name, "Strata ÷ raw-LMDB floor", toFloor, target: "≤ 2.5×")
    record(name, "Strata ÷ GRDB", toGRDB, target: "< 1×")
    record(name, "Strata ÷ raw LMDB, Strata's whole write set", ratio(strata.medianSeconds, floorAll.medianSeconds))
    record(name, "Strata / floor / floor(all tables) / GRDB",
        "\(format(strata.median)) / \(format(floor.median)) / \(format(floorAll.median)) / \(format(grdb.median))")
}
