internal import CStrataLMDB
public import Foundation

/// A transaction, lent to the closure of ``LMDBEnvironment/read(_:)`` or
/// ``LMDBEnvironment/write(_:)`` (`MDB_txn`).
///
/// The type is non-copyable and only ever passed `borrowing`, so it can't be stored or
/// returned: a transaction can't outlive its closure by construction. Values read from it
/// are ``RawSpan``s borrowed from the memory map, which likewise can't leave the closure
/// that receives them; copy what you keep (`Array(...)`, or ``value(forKey:in:)``).
///
/// Writes in a read transaction fail with LMDB's `EACCES`
/// (``LMDBError/Code/permissionDenied``).
public struct LMDBTransaction: ~Copyable {
    let handle: OpaquePointer
    /// Whether this is a read-only transaction.
    public let isReadOnly: Bool
    let state: WriteState?

    init(handle: OpaquePointer, isReadOnly: Bool, state: WriteState?) {
        self.handle = handle
        self.isReadOnly = isReadOnly
        self.state = state
    }

    /// LMDB's ID of this transaction (`mdb_txn_id`): for a read, the snapshot it sees.
    public var id: Int { Int(mdb_txn_id(handle)) }

    /// Records a map-full answer so the environment grows the map and retries.
    func noteResult(_ code: Int32) {
        if code == MDB_MAP_FULL { state?.hitMapFull = true }
    }

    // MARK: - Reading

    /// Lends the value stored under `key` to `body`; nil when the key is absent
    /// (`mdb_get`). In a `duplicateSort` database this is the key's first value.
    public func withValue<R>(
        forKey key: some ContiguousBytes, in database: LMDBDatabase, _ body: (RawSpan) throws -> R
    ) throws -> R? {
        try withVal(key) { k in
            var v = MDB_val()
            let result = mdb_get(handle, database.handle, &k, &v)
            if result == MDB_NOTFOUND { return nil }
            try check(result, "mdb_get", detail: "database \(database)")
            return try withSpan(v, body)
        }
    }

    /// An owned copy of the value stored under `key`, or nil (`mdb_get`).
    public func value(forKey key: some ContiguousBytes, in database: LMDBDatabase) throws -> [UInt8]? {
        try withValue(forKey: key, in: database) { span in span.withUnsafeBytes { Array($0) } }
    }

    /// Whether `key` is present.
    public func containsKey(_ key: some ContiguousBytes, in database: LMDBDatabase) throws -> Bool {
        try withValue(forKey: key, in: database) { _ in true } ?? false
    }

    /// Calls `body` with each key and value in `range`, in key order or reversed, until it
    /// answers ``IterationDecision/stop``. In a `duplicateSort` database each duplicate is
    /// visited, in value order (reversed with `reverse`).
    ///
    /// ```swift
    /// try txn.forEach(in: events, range: .from(start)) { key, value in
    ///     count += 1
    ///     return count < limit ? .next : .stop
    /// }
    /// ```
    public func forEach(
        in database: LMDBDatabase, range: KeyRange = .all, reverse: Bool = false,
        _ body: (RawSpan, RawSpan) throws -> IterationDecision
    ) throws {
        try withCursor(on: database) { cursor in
            try cursor.iterate(range: range, reverse: reverse, body)
        }
    }

    /// The number of entries in `range` (each duplicate counts).
    public func count(in database: LMDBDatabase, range: KeyRange = .all) throws -> Int {
        if range == .all { return try statistics(of: database).entries }
        return try withCursor(on: database) { cursor in try cursor.count(range: range) }
    }

    /// Opens a cursor on `database` for the duration of `body`, then closes it
    /// (`mdb_cursor_open` … `mdb_cursor_close`).
    public func withCursor<R>(on database: LMDBDatabase, _ body: (borrowing LMDBCursor) throws -> R) throws -> R {
        var cursorPointer: OpaquePointer?
        try check(mdb_cursor_open(handle, database.handle, &cursorPointer), "mdb_cursor_open", detail: "database \(database)")
        guard let cursor = cursorPointer else {
            throw LMDBError(lmdbCode: LMDBError.Code.badTransaction.rawValue, operation: "mdb_cursor_open")
        }
        defer { mdb_cursor_close(cursor) }
        return try body(LMDBCursor(handle: cursor, transaction: handle, database: database, state: state))
    }

    /// LMDB's counts for `database` as this transaction sees it (`mdb_stat`).
    public func statistics(of database: LMDBDatabase) throws -> DatabaseStatistics {
        var stat = MDB_stat()
        try check(mdb_stat(handle, database.handle, &stat), "mdb_stat", detail: "database \(database)")
        return DatabaseStatistics(
            entries: stat.ms_entries, depth: Int(stat.ms_depth), branchPages: stat.ms_branch_pages,
            leafPages: stat.ms_leaf_pages, overflowPages: stat.ms_overflow_pages, pageSize: Int(stat.ms_psize))
    }

    /// Compares two keys with `database`'s key ordering (`mdb_cmp`): negative, zero or positive.
    public func compareKeys(_ a: some ContiguousBytes, _ b: some ContiguousBytes, in database: LMDBDatabase) -> Int {
        withVals(a, b) { x, y in Int(mdb_cmp(handle, database.handle, &x, &y)) }
    }

    // MARK: - Writing

    /// Stores `value` under `key` (`mdb_put`).
    ///
    /// - Throws: ``LMDBError/Code/keyExists`` with `.noOverwrite` (or `.noDuplicateData`)
    ///   when present; ``LMDBError/Code/badValueSize`` for an empty or too-long key;
    ///   ``LMDBError/Code/permissionDenied`` in a read transaction. A full map is handled
    ///   by the environment (it grows and retries the write closure).
    public func put(
        _ value: some ContiguousBytes, forKey key: some ContiguousBytes, in database: LMDBDatabase,
        flags: PutFlags = []
    ) throws {
        try withVals(key, value) { k, v in
            let result = mdb_put(handle, database.handle, &k, &v, flags.subtracting(.reserve).rawValue)
            noteResult(result)
            try check(result, "mdb_put", detail: "database \(database)")
        }
    }

    /// Stores `value` under `key` (`mdb_put`), both lent as raw bytes: the non-generic form of
    /// ``put(_:forKey:in:flags:)``, for loops that write many rows from reused buffers.
    public func put(
        bytes value: UnsafeRawBufferPointer, forKey key: UnsafeRawBufferPointer, in database: LMDBDatabase,
        flags: PutFlags = []
    ) throws {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        // An empty value may come without an address; LMDB copies zero bytes from any.
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress ?? key.baseAddress))
        let result = mdb_put(handle, database.handle, &k, &v, flags.subtracting(.reserve).rawValue)
        noteResult(result)
        try check(result, "mdb_put", detail: "database \(database)")
    }

    /// Reserves `count` bytes for the value under `key` and lets `fill` write them in place
    /// (`mdb_put` with `MDB_RESERVE`): no intermediate buffer. Not for `duplicateSort`.
    public func put(
        reservingCount count: Int, forKey key: some ContiguousBytes, in database: LMDBDatabase,
        flags: PutFlags = [], fill: (UnsafeMutableRawBufferPointer) throws -> Void
    ) throws {
        try withVal(key) { k in
            var v = MDB_val(mv_size: count, mv_data: nil)
            let result = mdb_put(handle, database.handle, &k, &v, flags.union(.reserve).rawValue)
            noteResult(result)
            try check(result, "mdb_put", detail: "database \(database)")
            try fill(UnsafeMutableRawBufferPointer(start: v.mv_data, count: count))
        }
    }

    /// Deletes `key` and all its values (`mdb_del`); false if it wasn't there.
    @discardableResult
    public func delete(key: some ContiguousBytes, in database: LMDBDatabase) throws -> Bool {
        try withVal(key) { k in
            let result = mdb_del(handle, database.handle, &k, nil)
            if result == MDB_NOTFOUND { return false }
            noteResult(result)
            try check(result, "mdb_del", detail: "database \(database)")
            return true
        }
    }

    /// Deletes one value of `key` in a `duplicateSort` database (`mdb_del` with data);
    /// false if that pair wasn't there.
    @discardableResult
    public func delete(
        key: some ContiguousBytes, value: some ContiguousBytes, in database: LMDBDatabase
    ) throws -> Bool {
        try withVals(key, value) { k, v in
            let result = mdb_del(handle, database.handle, &k, &v)
            if result == MDB_NOTFOUND { return false }
            noteResult(result)
            try check(result, "mdb_del", detail: "database \(database)")
            return true
        }
    }

    /// Empties `database`, keeping its handle (`mdb_drop(txn, dbi, 0)`).
    public func removeAll(in database: LMDBDatabase) throws {
        try check(mdb_drop(handle, database.handle, 0), "mdb_drop", detail: "database \(database)")
    }

    /// Deletes `database` from the environment and closes its handle (`mdb_drop(txn, dbi, 1)`):
    /// for tests that make a store as an older version wrote it. The handle must not be used
    /// again, in any environment value of the process; close them all before reopening.
    package func dropDatabase(_ database: LMDBDatabase) throws {
        try check(mdb_drop(handle, database.handle, 1), "mdb_drop", detail: "database \(database)")
    }
}

/// Lends `bytes` to LMDB as an `MDB_val`. LMDB never writes through the key or data it is
/// given, so pointing it at immutable bytes is safe.
@inline(__always)
func withVal<R>(_ bytes: some ContiguousBytes, _ body: (inout MDB_val) throws -> R) rethrows -> R {
    try bytes.withUnsafeBytes { raw in
        var val = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
        return try body(&val)
    }
}

/// Lends a key and a value to LMDB as two `MDB_val`s (see ``withVal(_:_:)``).
@inline(__always)
func withVals<R>(
    _ key: some ContiguousBytes, _ value: some ContiguousBytes, _ body: (inout MDB_val, inout MDB_val) throws -> R
) rethrows -> R {
    try withVal(key) { k in try withVal(value) { v in try body(&k, &v) } }
}

/// Lends an `MDB_val`'s bytes to `body` as a span. The span can't outlive `body`, which
/// runs inside the transaction, so the map pages it points into stay valid.
@inline(__always)
func withSpan<R>(_ value: MDB_val, _ body: (RawSpan) throws -> R) rethrows -> R {
    let span = unsafe RawSpan(_unsafeBytes: UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size))
    return try body(span)
}

/// Lends a key's and a value's bytes to `body` as spans (see ``withSpan(_:_:)``).
@inline(__always)
func withSpans<R>(_ key: MDB_val, _ value: MDB_val, _ body: (RawSpan, RawSpan) throws -> R) rethrows -> R {
    let keySpan = unsafe RawSpan(_unsafeBytes: UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size))
    let valueSpan = unsafe RawSpan(_unsafeBytes: UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size))
    return try body(keySpan, valueSpan)
}

extension LMDBTransaction {
    /// A second handle on the same transaction, for the package's own wrappers (the event
    /// log's reader) that must hold a transaction inside another non-copyable value.
    ///
    /// Safe only because the wrapper is itself non-copyable and lent `borrowing` within the
    /// transaction's closure, so the alias can't outlive it. The alias neither commits
    /// nor aborts: the environment's closure still ends the transaction.
    package func makeAlias() -> LMDBTransaction {
        LMDBTransaction(handle: handle, isReadOnly: isReadOnly, state: state)
    }
}
