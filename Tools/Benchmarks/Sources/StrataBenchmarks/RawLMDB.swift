import CBenchLMDB
import Foundation

/// An error from LMDB's C API, with the call that failed.
struct RawLMDBError: Error, CustomStringConvertible {
    let code: Int32
    let call: String
    var description: String { "\(call): \(String(cString: mdb_strerror(code))) (\(code))" }
}

@inline(__always)
func lmdbCheck(_ code: Int32, _ call: @autoclosure () -> String) throws {
    if code != 0 { throw RawLMDBError(code: code, call: call()) }
}

/// Key/value pairs packed into one buffer, so that writing them is nothing but `mdb_put`:
/// the "no encoding logic" of the raw-LMDB floor.
struct RecordBatch {
    var bytes: [UInt8] = []
    /// (key offset, key length, value offset, value length) per record, in key order.
    var entries: [(Int, Int, Int, Int)] = []

    var count: Int { entries.count }
    var payloadBytes: Int { bytes.count }

    mutating func append(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        let keyOffset = bytes.count
        bytes.append(contentsOf: key)
        let valueOffset = bytes.count
        bytes.append(contentsOf: value)
        entries.append((keyOffset, key.count, valueOffset, value.count))
    }
}

/// A bare LMDB environment, opened the way Strata opens its own (`MDB_NOTLS`, full sync at
/// every commit) so the floor pays the same durability costs.
final class RawLMDB {
    let env: OpaquePointer
    private var databases: [String: MDB_dbi] = [:]

    init(path: String, mapSize: Int = benchMapSize, readOnly: Bool = false) throws {
        var handle: OpaquePointer?
        try lmdbCheck(mdb_env_create(&handle), "mdb_env_create")
        env = handle!
        try lmdbCheck(mdb_env_set_maxdbs(env, 32), "mdb_env_set_maxdbs")
        if !readOnly { try lmdbCheck(mdb_env_set_mapsize(env, mapSize), "mdb_env_set_mapsize") }
        var flags = UInt32(MDB_NOTLS)
        if readOnly { flags |= UInt32(MDB_RDONLY) }
        let code = mdb_env_open(env, path, flags, 0o644)
        if code != 0 {
            mdb_env_close(env)
            throw RawLMDBError(code: code, call: "mdb_env_open \(path)")
        }
    }

    deinit { mdb_env_close(env) }

    // MARK: - Transactions

    /// Runs `body` in one write transaction and commits it (durably).
    func write(_ body: (OpaquePointer) throws -> Void) throws {
        var txn: OpaquePointer?
        try lmdbCheck(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
        do {
            try body(txn!)
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
        try lmdbCheck(mdb_txn_commit(txn), "mdb_txn_commit")
    }

    func read<R>(_ body: (OpaquePointer) throws -> R) throws -> R {
        var txn: OpaquePointer?
        try lmdbCheck(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin(RDONLY)")
        defer { mdb_txn_abort(txn) }
        return try body(txn!)
    }

    /// Opens (creating) the named database once; DBIs stay open for the environment's life.
    func database(_ name: String, flags: UInt32 = 0) throws -> MDB_dbi {
        if let known = databases[name] { return known }
        var dbi: MDB_dbi = 0
        try write { txn in try lmdbCheck(mdb_dbi_open(txn, name, UInt32(MDB_CREATE) | flags, &dbi), "mdb_dbi_open \(name)") }
        databases[name] = dbi
        return dbi
    }

    // MARK: - Writing

    /// Puts `batch[range]` into `dbi` with `MDB_APPEND` (the records are in key order).
    static func put(_ batch: RecordBatch, range: Range<Int>, into dbi: MDB_dbi, txn: OpaquePointer, flags: UInt32 = UInt32(MDB_APPEND)) throws {
        try batch.bytes.withUnsafeBytes { raw in
            let base = UnsafeMutableRawPointer(mutating: raw.baseAddress!)
            for i in range {
                let (ko, kl, vo, vl) = batch.entries[i]
                var key = MDB_val(mv_size: kl, mv_data: base + ko)
                var value = MDB_val(mv_size: vl, mv_data: base + vo)
                let code = mdb_put(txn, dbi, &key, &value, flags)
                if code != 0 { throw RawLMDBError(code: code, call: "mdb_put") }
            }
        }
    }

    // MARK: - Reading

    /// The names of the named databases (the keys of the main database).
    func databaseNames() throws -> [String] {
        try read { txn in
            var main: MDB_dbi = 0
            try lmdbCheck(mdb_dbi_open(txn, nil, 0, &main), "mdb_dbi_open(main)")
            var names: [String] = []
            try Self.forEach(txn, main) { key, _ in
                names.append(String(decoding: key, as: UTF8.self))
            }
            return names
        }
    }

    /// Every record of the named database, in key order, and its flags.
    func records(of name: String) throws -> (RecordBatch, flags: UInt32) {
        try read { txn in
            var dbi: MDB_dbi = 0
            try lmdbCheck(mdb_dbi_open(txn, name, 0, &dbi), "mdb_dbi_open \(name)")
            var flags: UInt32 = 0
            try lmdbCheck(mdb_dbi_flags(txn, dbi, &flags), "mdb_dbi_flags")
            var batch = RecordBatch()
            try Self.forEach(txn, dbi) { key, value in batch.append(key: key, value: value) }
            return (batch, flags)
        }
    }

    /// Bytes of pages (branch, leaf, overflow) and entries per named database (`mdb_stat`).
    func tableSizes() throws -> [(name: String, bytes: Int, entries: Int)] {
        let names = try databaseNames()
        return try read { txn in
            try names.map { name in
                var dbi: MDB_dbi = 0
                try lmdbCheck(mdb_dbi_open(txn, name, 0, &dbi), "mdb_dbi_open \(name)")
                var stat = MDB_stat()
                try lmdbCheck(mdb_stat(txn, dbi, &stat), "mdb_stat \(name)")
                let pages = stat.ms_branch_pages + stat.ms_leaf_pages + stat.ms_overflow_pages
                return (name, pages * Int(stat.ms_psize), stat.ms_entries)
            }
        }
    }

    /// Calls `body` with every key and value of the named database, in one read transaction.
    func forEach(in name: String, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) throws {
        try read { txn in
            var dbi: MDB_dbi = 0
            try lmdbCheck(mdb_dbi_open(txn, name, 0, &dbi), "mdb_dbi_open \(name)")
            try Self.forEach(txn, dbi, body)
        }
    }

    /// Calls `body` with every key and value of `dbi` (borrowed from the map: copy to keep).
    static func forEach(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) throws {
        var cursor: OpaquePointer?
        try lmdbCheck(mdb_cursor_open(txn, dbi, &cursor), "mdb_cursor_open")
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var value = MDB_val()
        var op = MDB_FIRST
        while true {
            let code = mdb_cursor_get(cursor, &key, &value, op)
            if code == MDB_NOTFOUND { return }
            try lmdbCheck(code, "mdb_cursor_get")
            try body(
                UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size),
                UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size))
            op = MDB_NEXT
        }
    }
}

/// Every named database of the store at `path`, read with LMDB's C API (Strata's store
/// must be closed first: LMDB forbids opening one environment twice in a process).
func snapshotStore(_ path: String) throws -> [(name: String, batch: RecordBatch, flags: UInt32)] {
    let raw = try RawLMDB(path: path, readOnly: true)
    return try raw.databaseNames().map { name in
        let (batch, flags) = try raw.records(of: name)
        return (name, batch, flags)
    }
}
