import Foundation
import GRDB
import Strata
import CBenchLMDB

/// Benchmark 2: `commits` small durable commits, one small insert each (one person
/// referencing a stored team).
///
/// - Strata: `EventLog.commit` per draft (drafts prebuilt), default durable configuration.
/// - Floor: `commits` durable LMDB write transactions, each one `mdb_put` (`MDB_APPEND`) of
///   the state record Strata wrote for that person (same bytes, read back from a Strata store).
/// - GRDB, for context: one `write { person.insert(db) }` per person.
func runSmallCommitsBenchmark(commits: Int, repetitions: Int) throws {
    heading("2. \(commits) small durable commits (one Person insert each)")
    let model = try peopleModel()
    let people = makePeople(commits, seed: 7)

    final class StrataRun {
        var log: EventLog?
        let directory: String
        var drafts: [TransactionDraft] = []
        init(directory: String, log: EventLog) {
            self.directory = directory
            self.log = log
        }
    }
    var strataDirectories: [String] = []
    let strata = try measure(
        "Strata, \(commits) commits", repetitions: repetitions,
        setup: { () throws -> StrataRun in
            let directory = try scratchDirectory("small")
            let log = try EventLog(path: directory, model: model, configuration: benchConfiguration())
            var teamDraft = TransactionDraft(author: "bench")
            let temporary = teamNames.map { teamDraft.insert("Team", values: ["name": .attribute(.string($0))]) }
            let result = try log.commit(teamDraft)
            let teams = temporary.map { DraftObjectID.stored(result.permanentID(for: $0)!) }
            let run = StrataRun(directory: directory, log: log)
            run.drafts = people.map { person in
                var draft = TransactionDraft(author: "bench")
                draft.insert("Person", values: person.draftValues(team: teams[person.team]))
                return draft
            }
            return run
        },
        body: { run in
            let log = run.log!
            for draft in run.drafts { try log.commit(draft) }
        },
        teardown: { run in
            run.log = nil
            strataDirectories.append(run.directory)
        })

    let tables = try snapshotStore(strataDirectories.last!)
    for directory in strataDirectories { remove(directory) }
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
        "raw LMDB, \(state.batch.count) single-put commits", repetitions: repetitions,
        setup: { try RawRun(directory: try scratchDirectory("small-floor")) },
        body: { run in
            for i in 0..<state.batch.count {
                try run.lmdb.write { txn in try RawLMDB.put(state.batch, range: i..<(i + 1), into: run.dbi, txn: txn) }
            }
        },
        teardown: { run in remove(run.directory) })

    // The second floor: the records Strata's commits wrote, put raw, in its tables and in one tree.
    var setupDraft = TransactionDraft(author: "bench")
    let setupTeams = teamNames.map { setupDraft.insert("Team", values: ["name": .attribute(.string($0))]) }
    let writeSet = try smallCommitWriteSet(model: model, setup: setupDraft) { result in
        let teams = setupTeams.map { result.permanentID(for: $0).map(DraftObjectID.stored) }
        return people.map { person in
            var draft = TransactionDraft(author: "bench")
            if let team = teams[person.team] { draft.insert("Person", values: person.draftValues(team: team)) }
            return draft
        }
    }
    let byTable = writeSet.recordsPerCommitByTable.map { String(format: "%@ %.1f", $0.table, $0.records) }.joined(separator: ", ")
    say(String(format: "  Strata's write set: %.1f records, %.0f bytes per commit (%@); %d records not attributed to a commit",
        writeSet.recordsPerCommit, writeSet.bytesPerCommit, byTable, writeSet.unattributed))
    let writeSetFloor = try measure(
        "raw LMDB, Strata's write set per commit, its tables", repetitions: repetitions,
        setup: { try WriteSetFloorRun(writeSet, oneTree: false) }, body: { run in try run.run(writeSet) })
    let oneTree = try measure(
        "raw LMDB, Strata's write set per commit, one tree", repetitions: repetitions,
        setup: { try WriteSetFloorRun(writeSet, oneTree: true) }, body: { run in try run.run(writeSet) })

    let grdbPeople = people.map(GRDBPerson.init)
    let grdbTeams = teamNames.enumerated().map { GRDBTeam(id: Int64($0.offset + 1), name: $0.element) }
    let grdb = try measure(
        "GRDB, \(commits) write transactions", repetitions: repetitions,
        setup: { () throws -> (String, DatabaseQueue) in
            let directory = try scratchDirectory("small-grdb")
            let queue = try makeGRDBDatabase(in: directory)
            try queue.write { db in for team in grdbTeams { try team.insert(db) } }
            return (directory, queue)
        },
        body: { run in
            for person in grdbPeople { try run.1.write { db in try person.insert(db) } }
        },
        teardown: { run in remove(run.0) })

    let n = Double(commits)
    let perStrata = strata.medianSeconds / n, perFloor = floor.medianSeconds / Double(state.batch.count), perGRDB = grdb.medianSeconds / n
    say("  per commit: Strata \(format(seconds: perStrata)), raw LMDB \(format(seconds: perFloor)), GRDB \(format(seconds: perGRDB))")
    let toFloor = ratio(perStrata, perFloor)
    say("  Strata ÷ floor = \(toFloor)   (target ≤ 1.20×; by min \(ratio(strata.minSeconds / n, floor.minSeconds / Double(state.batch.count))))")
    say("  Strata ÷ GRDB  = \(ratio(perStrata, perGRDB))   (context)")
    let perWriteSet = writeSetFloor.medianSeconds / n, perOneTree = oneTree.medianSeconds / n
    say("  Strata's write set, raw: in its tables \(format(seconds: perWriteSet)) (\(ratio(perWriteSet, perFloor)) the floor; Strata ÷ it = \(ratio(perStrata, perWriteSet))), in one tree \(format(seconds: perOneTree)) (\(ratio(perOneTree, perFloor)) the floor)")
    let name = "2. \(commits) small durable commits"
    record(name, "Strata ÷ raw LMDB per commit", toFloor, target: "≤ 1.2×")
    record(name, "Strata ÷ GRDB per commit", ratio(perStrata, perGRDB), target: "(context)")
    record(name, "Strata's write set, raw, its tables ÷ floor", ratio(perWriteSet, perFloor), target: "(context)")
    record(name, "Strata ÷ its write set, raw", ratio(perStrata, perWriteSet), target: "(context)")
    record(name, "Strata's write set, raw, one tree ÷ floor", ratio(perOneTree, perFloor), target: "(context)")
    record(name, "per commit Strata / floor / GRDB",
        "\(format(seconds: perStrata)) / \(format(seconds: perFloor)) / \(format(seconds: perGRDB))")
}
