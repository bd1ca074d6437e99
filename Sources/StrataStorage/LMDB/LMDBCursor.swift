internal import CStrataLMDB
public import Foundation

/// A cursor over one database, lent to the closure of
/// ``LMDBTransaction/withCursor(on:_:)`` (`MDB_cursor`).
///
/// Like the transaction, it is non-copyable and passed `borrowing`, so it is closed by the
/// transaction's scope and never outlives it. Moves answer whether the cursor landed on
/// an entry; ``withCurrent(_:)`` lends the entry's key and value.
///
/// ```swift
/// try txn.withCursor(on: db) { cursor in
///     guard try cursor.seek(atLeast: start) else { return }
///     repeat {
///         try cursor.withCurrent { key, value in ... }
///     } while try cursor.move(.next)
/// }
/// ```
public struct LMDBCursor: ~Copyable {
    let handle: OpaquePointer
    let transaction: OpaquePointer
    /// The database the cursor walks.
    public let database: LMDBDatabase
    let state: WriteState?

    /// A relative or absolute cursor move (LMDB's `MDB_cursor_op`).
    public enum Move: Sendable, CaseIterable {
        /// `MDB_FIRST`: the first entry.
        case first
        /// `MDB_LAST`: the last entry.
        case last
        /// `MDB_NEXT`: the next entry (the next duplicate first, in `duplicateSort`).
        case next
        /// `MDB_PREV`: the previous entry.
        case previous
        /// `MDB_FIRST_DUP`: the first value of the current key.
        case firstDuplicate
        /// `MDB_LAST_DUP`: the last value of the current key.
        case lastDuplicate
        /// `MDB_NEXT_DUP`: the next value of the current key, if any.
        case nextDuplicate
        /// `MDB_PREV_DUP`: the previous value of the current key, if any.
        case previousDuplicate
        /// `MDB_NEXT_NODUP`: the first value of the next key.
        case nextKey
        /// `MDB_PREV_NODUP`: the last value of the previous key.
        case previousKey

        var operation: MDB_cursor_op {
            switch self {
            case .first: MDB_FIRST
            case .last: MDB_LAST
            case .next: MDB_NEXT
            case .previous: MDB_PREV
            case .firstDuplicate: MDB_FIRST_DUP
            case .lastDuplicate: MDB_LAST_DUP
            case .nextDuplicate: MDB_NEXT_DUP
            case .previousDuplicate: MDB_PREV_DUP
            case .nextKey: MDB_NEXT_NODUP
            case .previousKey: MDB_PREV_NODUP
            }
        }

        /// LMDB's numeric value of the operation, for the flag table test.
        public var lmdbValue: UInt32 { operation.rawValue }
    }

    // MARK: - Moving

    /// Moves the cursor; false when there is no such entry (the cursor stays valid).
    @discardableResult
    public func move(_ move: Move) throws -> Bool {
        var k = MDB_val()
        var v = MDB_val()
        return try get(&k, &v, move.operation, "mdb_cursor_get")
    }

    /// Positions at `key` exactly (`MDB_SET_KEY`); false if absent.
    @discardableResult
    public func seek(exactly key: some ContiguousBytes) throws -> Bool {
        try withVal(key) { k in
            var v = MDB_val()
            return try get(&k, &v, MDB_SET_KEY, "mdb_cursor_get(MDB_SET_KEY)")
        }
    }

    /// Positions at the first key greater than or equal to `key` (`MDB_SET_RANGE`); false
    /// if every key is smaller.
    @discardableResult
    public func seek(atLeast key: some ContiguousBytes) throws -> Bool {
        try withVal(key) { k in
            var v = MDB_val()
            return try get(&k, &v, MDB_SET_RANGE, "mdb_cursor_get(MDB_SET_RANGE)")
        }
    }

    /// Positions at the pair `key`/`value` in a `duplicateSort` database (`MDB_GET_BOTH`).
    @discardableResult
    public func seek(key: some ContiguousBytes, value: some ContiguousBytes) throws -> Bool {
        try seekBoth(key: key, value: value, operation: MDB_GET_BOTH, name: "mdb_cursor_get(MDB_GET_BOTH)")
    }

    /// Positions at `key`'s first value greater than or equal to `value` in a
    /// `duplicateSort` database (`MDB_GET_BOTH_RANGE`).
    @discardableResult
    public func seek(key: some ContiguousBytes, atLeastValue value: some ContiguousBytes) throws -> Bool {
        try seekBoth(key: key, value: value, operation: MDB_GET_BOTH_RANGE, name: "mdb_cursor_get(MDB_GET_BOTH_RANGE)")
    }

    private func seekBoth(
        key: some ContiguousBytes, value: some ContiguousBytes, operation: MDB_cursor_op, name: String
    ) throws -> Bool {
        try withVals(key, value) { k, v in
            return try get(&k, &v, operation, name)
        }
    }

    private func get(_ k: inout MDB_val, _ v: inout MDB_val, _ op: MDB_cursor_op, _ name: String) throws -> Bool {
        let result = mdb_cursor_get(handle, &k, &v, op)
        if result == MDB_NOTFOUND { return false }
        // EINVAL here means "not positioned" for relative moves on a fresh cursor.
        if result == EINVAL && (op == MDB_NEXT_DUP || op == MDB_PREV_DUP || op == MDB_GET_CURRENT) { return false }
        try check(result, name, detail: "database \(database)")
        return true
    }

    // MARK: - The current entry

    /// Lends the key and value at the cursor to `body`; nil if the cursor isn't on an entry.
    public func withCurrent<R>(_ body: (RawSpan, RawSpan) throws -> R) throws -> R? {
        var k = MDB_val()
        var v = MDB_val()
        guard try get(&k, &v, MDB_GET_CURRENT, "mdb_cursor_get(MDB_GET_CURRENT)") else { return nil }
        return try withSpans(k, v, body)
    }

    /// An owned copy of the current key, or nil.
    public func currentKey() throws -> [UInt8]? {
        try withCurrent { key, _ in key.withUnsafeBytes { Array($0) } }
    }

    /// An owned copy of the current value, or nil.
    public func currentValue() throws -> [UInt8]? {
        try withCurrent { _, value in value.withUnsafeBytes { Array($0) } }
    }

    /// How many values the current key has (`mdb_cursor_count`; `duplicateSort` only).
    public func duplicateCount() throws -> Int {
        var count: Int = 0
        try check(mdb_cursor_count(handle, &count), "mdb_cursor_count", detail: "database \(database)")
        return count
    }

    // MARK: - Writing

    /// Stores `value` under `key` through the cursor, leaving it on the new entry (`mdb_cursor_put`).
    public func put(_ value: some ContiguousBytes, forKey key: some ContiguousBytes, flags: PutFlags = []) throws {
        try withVals(key, value) { k, v in
            let result = mdb_cursor_put(handle, &k, &v, flags.subtracting(.reserve).rawValue)
            if result == MDB_MAP_FULL { state?.hitMapFull = true }
            try check(result, "mdb_cursor_put", detail: "database \(database)")
        }
    }

    /// Stores `value` under `key` through the cursor, both lent as raw bytes: the non-generic
    /// form of ``put(_:forKey:flags:)``, for loops that write many rows from reused buffers.
    public func put(bytes value: UnsafeRawBufferPointer, forKey key: UnsafeRawBufferPointer, flags: PutFlags = []) throws {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        // An empty value may come without an address; LMDB copies zero bytes from any.
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress ?? key.baseAddress))
        let result = mdb_cursor_put(handle, &k, &v, flags.subtracting(.reserve).rawValue)
        if result == MDB_MAP_FULL { state?.hitMapFull = true }
        try check(result, "mdb_cursor_put", detail: "database \(database)")
    }

    /// Deletes the entry at the cursor (`mdb_cursor_del`); with `allDuplicates`, every
    /// value of its key (`MDB_NODUPDATA`).
    public func deleteCurrent(allDuplicates: Bool = false) throws {
        let result = mdb_cursor_del(handle, allDuplicates ? UInt32(MDB_NODUPDATA) : 0)
        if result == MDB_MAP_FULL { state?.hitMapFull = true }
        try check(result, "mdb_cursor_del", detail: "database \(database)")
    }

    // MARK: - Ranges

    /// Walks `range` forward or backward, lending each entry to `body` until it stops.
    func iterate(
        range: KeyRange, reverse: Bool, _ body: (RawSpan, RawSpan) throws -> IterationDecision
    ) throws {
        var k = MDB_val()
        var v = MDB_val()
        let dupsort = database.flags.contains(.duplicateSort)

        // Position at the first entry in iteration order.
        var positioned: Bool
        if !reverse {
            if let lower = range.lowerBound {
                positioned = try withVal(lower) { bound in
                    // MDB_SET_RANGE points k at the key found in the map, valid after the closure.
                    k = bound
                    return try get(&k, &v, MDB_SET_RANGE, "mdb_cursor_get(MDB_SET_RANGE)")
                }
                if positioned && !range.includesLowerBound && compare(k, lower) == 0 {
                    positioned = try get(&k, &v, MDB_NEXT_NODUP, "mdb_cursor_get(MDB_NEXT_NODUP)")
                }
            } else {
                positioned = try get(&k, &v, MDB_FIRST, "mdb_cursor_get(MDB_FIRST)")
            }
        } else {
            if let upper = range.upperBound {
                let found = try withVal(upper) { bound in
                    // MDB_SET_RANGE points k at the key found in the map, valid after the closure.
                    k = bound
                    return try get(&k, &v, MDB_SET_RANGE, "mdb_cursor_get(MDB_SET_RANGE)")
                }
                if !found {
                    positioned = try get(&k, &v, MDB_LAST, "mdb_cursor_get(MDB_LAST)")
                } else if compare(k, upper) == 0 && range.includesUpperBound {
                    positioned = dupsort ? try get(&k, &v, MDB_LAST_DUP, "mdb_cursor_get(MDB_LAST_DUP)") : true
                } else {
                    // On the first key past the bound (or equal and excluded): step back a key.
                    positioned = try get(&k, &v, MDB_PREV_NODUP, "mdb_cursor_get(MDB_PREV_NODUP)")
                }
            } else {
                positioned = try get(&k, &v, MDB_LAST, "mdb_cursor_get(MDB_LAST)")
            }
        }

        let step = reverse ? MDB_PREV : MDB_NEXT
        while positioned {
            // Stop at the far bound.
            if !reverse, let upper = range.upperBound {
                let c = compare(k, upper)
                if c > 0 || (c == 0 && !range.includesUpperBound) { return }
            }
            if reverse, let lower = range.lowerBound {
                let c = compare(k, lower)
                if c < 0 || (c == 0 && !range.includesLowerBound) { return }
            }
            if try withSpans(k, v, body) == .stop { return }
            positioned = try get(&k, &v, step, "mdb_cursor_get")
        }
    }

    /// The number of entries in `range` (each duplicate counts): the walk of
    /// ``iterate(range:reverse:_:)`` without lending entries to a closure.
    func count(range: KeyRange) throws -> Int {
        var k = MDB_val()
        var v = MDB_val()
        var positioned: Bool
        if let lower = range.lowerBound {
            positioned = try withVal(lower) { bound in
                k = bound
                return try get(&k, &v, MDB_SET_RANGE, "mdb_cursor_get(MDB_SET_RANGE)")
            }
            if positioned && !range.includesLowerBound && compare(k, lower) == 0 {
                positioned = try get(&k, &v, MDB_NEXT_NODUP, "mdb_cursor_get(MDB_NEXT_NODUP)")
            }
        } else {
            positioned = try get(&k, &v, MDB_FIRST, "mdb_cursor_get(MDB_FIRST)")
        }
        guard positioned else { return 0 }
        var n = 0
        if let upper = range.upperBound {
            try withVal(upper) { bound in
                var bound = bound
                while positioned {
                    let c = mdb_cmp(transaction, database.handle, &k, &bound)
                    if c > 0 || (c == 0 && !range.includesUpperBound) { return }
                    n += 1
                    positioned = try get(&k, &v, MDB_NEXT, "mdb_cursor_get")
                }
            }
        } else {
            while positioned {
                n += 1
                positioned = try get(&k, &v, MDB_NEXT, "mdb_cursor_get")
            }
        }
        return n
    }

    private func compare(_ key: MDB_val, _ bound: [UInt8]) -> Int {
        var key = key
        return withVal(bound) { b in Int(mdb_cmp(transaction, database.handle, &key, &b)) }
    }
}
