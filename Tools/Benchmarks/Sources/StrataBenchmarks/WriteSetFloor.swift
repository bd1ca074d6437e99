import Foundation
import Strata
import CBenchLMDB

// Benchmark 2's second floor: the records each of Strata's small commits writes, put with
// raw LMDB, one durable transaction per commit. It splits Strata ÷ the single-put floor into
// what the log's tables cost on their own (this floor ÷ the single-put floor) and what
// Strata's code adds on top (Strata ÷ this floor).

/// One record a commit wrote: the table (an index into ``SmallCommitWriteSet/tables``),
/// its key and its value.
struct WrittenRecord {
    let table: Int
    let key: [UInt8]
    let value: [UInt8]
}

/// What Strata's small commits wrote, table by table and commit by commit, recovered from
/// a store that made them: the records present after the setup commit (`base`) and, for
/// each later commit, the records it put.
struct SmallCommitWriteSet {
    var tables: [String] = []
    var base: [WrittenRecord] = []
    var commits: [[WrittenRecord]] = []
    /// Records changed by the commits that no rule attributes to one (reported, not put).
    var unattributed = 0

    /// Records per commit by table, on average, in table order (tables no commit wrote left out).
    var recordsPerCommitByTable: [(table: String, records: Double)] {
        var counts = Array(repeating: 0, count: tables.count)
        for records in commits { for record in records { counts[record.table] += 1 } }
        return tables.indices.filter { counts[$0] > 0 }.map { (tables[$0], Double(counts[$0]) / Double(max(commits.count, 1))) }
    }
    /// Records per commit, on average.
    var recordsPerCommit: Double { commits.isEmpty ? 0 : Double(commits.reduce(0) { $0 + $1.count }) / Double(commits.count) }
    /// Bytes (keys and values) per commit, on average.
    var bytesPerCommit: Double {
        commits.isEmpty ? 0 : Double(commits.reduce(0) { $0 + $1.reduce(0) { $0 + $1.key.count + $1.value.count } }) / Double(commits.count)
    }
}

/// Runs `drafts` (one person insert each, after `setup`) as separate commits in a fresh
/// Strata store, then reads back which records each commit wrote. The store's layouts
/// (spec 0004 §1) attribute every record: `events` by the sequence leading its key,
/// `history` by the sequence ending it; `state`, `index`, `referrers` and `members` by the
/// object key ending theirs (the person the commit inserted: primary key N is commit N);
/// `counters` and the `meta` head are rewritten by every commit, so every commit puts
/// their final record again.
func smallCommitWriteSet(
    model: ManagedObjectModel, setup: TransactionDraft, drafts: (CommitResult) -> [TransactionDraft]
) throws -> SmallCommitWriteSet {
    let directory = try scratchDirectory("small-write-set")
    defer { remove(directory) }
    var log: EventLog? = try EventLog(path: directory, model: model, configuration: benchConfiguration())
    let setupResult = try log!.commit(setup)
    let baseHead = setupResult.sequence
    log = nil
    let before = try snapshotStore(directory)
    log = try EventLog(path: directory, model: model, configuration: benchConfiguration())
    let commits = drafts(setupResult)
    for draft in commits { try log!.commit(draft) }
    log = nil
    let after = try snapshotStore(directory)

    var result = SmallCommitWriteSet()
    result.tables = after.map(\.name)
    result.commits = Array(repeating: [], count: commits.count)
    let personCode: UInt16? = after.first { $0.name == "catalog" }.flatMap { table in
        table.batch.records.first { String(decoding: $0.key, as: UTF8.self) == "ePerson" }.map { bigEndian($0.value) }
    }.map { UInt16(truncatingIfNeeded: $0) }
    func commit(bySequence sequence: UInt64) -> Int? {
        sequence > baseHead && sequence - baseHead <= UInt64(commits.count) ? Int(sequence - baseHead - 1) : nil
    }
    func commit(byObjectKeyEnding key: [UInt8]) -> Int? {
        guard key.count >= 10, let personCode, bigEndian(key[(key.count - 10)..<(key.count - 8)]) == UInt64(personCode) else { return nil }
        let primaryKey = bigEndian(key[(key.count - 8)...])
        return primaryKey >= 1 && primaryKey <= UInt64(commits.count) ? Int(primaryKey - 1) : nil
    }
    for (table, snapshot) in after.enumerated() {
        let old = before.first { $0.name == snapshot.name }?.batch.dictionary ?? [:]
        for (key, value) in snapshot.batch.records {
            let previous = old[key]
            if previous != value, snapshot.name == "counters"
                || (snapshot.name == "meta" && (key == Array("head".utf8) || key == Array("contextIndexThrough".utf8)))
            {
                for index in result.commits.indices { result.commits[index].append(WrittenRecord(table: table, key: key, value: value)) }
                if let previous { result.base.append(WrittenRecord(table: table, key: key, value: previous)) }
                continue
            }
            if let previous {
                result.base.append(WrittenRecord(table: table, key: key, value: previous))
                continue
            }
            let owner: Int?
            switch snapshot.name {
            case "events": owner = key.count >= 8 ? commit(bySequence: bigEndian(key[0..<8])) : nil
            case "history", "contexts": owner = key.count >= 8 ? commit(bySequence: bigEndian(key[(key.count - 8)...])) : nil
            case "state", "index", "referrers", "members": owner = commit(byObjectKeyEnding: key)
            default: owner = nil
            }
            if let owner {
                result.commits[owner].append(WrittenRecord(table: table, key: key, value: value))
            } else {
                result.unattributed += 1
            }
        }
    }
    return result
}

/// The big-endian unsigned integer in `bytes` (at most eight of them).
private func bigEndian<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> UInt64 {
    bytes.reduce(0) { $0 << 8 | UInt64($1) }
}

extension RecordBatch {
    /// The records as (key, value) pairs, in key order.
    var records: [(key: [UInt8], value: [UInt8])] {
        entries.map { ko, kl, vo, vl in (Array(bytes[ko..<(ko + kl)]), Array(bytes[vo..<(vo + vl)])) }
    }
    /// The records by key.
    var dictionary: [[UInt8]: [UInt8]] {
        Dictionary(records.map { ($0.key, $0.value) }, uniquingKeysWith: { _, last in last })
    }
}

/// Raw LMDB writing a ``SmallCommitWriteSet``: the base in one transaction at setup, then
/// each commit's records in one durable transaction of its own, in Strata's tables
/// (`oneTree` false) or all in one database, each key prefixed by its table's index
/// (`oneTree` true: what merging the tables into one B-tree would write).
final class WriteSetFloorRun {
    let directory: String
    let lmdb: RawLMDB
    let dbis: [MDB_dbi]
    let oneTree: Bool

    init(_ writeSet: SmallCommitWriteSet, oneTree: Bool) throws {
        directory = try scratchDirectory(oneTree ? "small-one-tree" : "small-write-set-floor")
        lmdb = try RawLMDB(path: directory)
        self.oneTree = oneTree
        let lmdb = self.lmdb
        dbis = try oneTree ? [lmdb.database("all")] : writeSet.tables.map { try lmdb.database($0) }
        try lmdb.write { txn in for record in writeSet.base { try put(record, txn) } }
    }

    /// Puts each commit's records, one durable transaction per commit.
    func run(_ writeSet: SmallCommitWriteSet) throws {
        for records in writeSet.commits {
            try lmdb.write { txn in for record in records { try put(record, txn) } }
        }
    }

    private func put(_ record: WrittenRecord, _ txn: OpaquePointer) throws {
        var key = oneTree ? [UInt8(truncatingIfNeeded: record.table)] + record.key : record.key
        var value = record.value
        let dbi = oneTree ? dbis[0] : dbis[record.table]
        let code = key.withUnsafeMutableBytes { k in
            value.withUnsafeMutableBytes { v in
                var keyVal = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                var valueVal = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                return mdb_put(txn, dbi, &keyVal, &valueVal, 0)
            }
        }
        if code != 0 { throw RawLMDBError(code: code, call: "mdb_put") }
    }

    deinit { remove(directory) }
}
