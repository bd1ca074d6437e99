/// A named database inside an environment (LMDB's `MDB_dbi`), opened once when the
/// environment opens and valid for the environment's lifetime.
///
/// Handles are plain values: copy them freely, compare them, send them across threads.
/// They are never closed in normal use (`mdb_dbi_close` is unsafe while any transaction
/// might use the handle).
public struct LMDBDatabase: Sendable, Hashable, CustomStringConvertible {
    /// The database's name; nil for the environment's unnamed main database.
    public let name: String?
    /// The flags it was opened with.
    public let flags: DatabaseFlags
    /// LMDB's handle (`MDB_dbi`).
    let handle: UInt32

    /// The name, or `<main>`.
    public var description: String { name ?? "<main>" }
}

/// What to open: a database's name and flags.
///
/// ```swift
/// let events = DatabaseDescriptor("events")
/// let byObject = DatabaseDescriptor("history", flags: [.duplicateSort])
/// ```
public struct DatabaseDescriptor: Sendable, Hashable, CustomStringConvertible {
    /// The name; nil means the unnamed main database.
    public var name: String?
    /// Flags such as ``DatabaseFlags/duplicateSort``; `.create` is added when writable.
    public var flags: DatabaseFlags

    /// The name, or `<main>`.
    public var description: String { name ?? "<main>" }

    /// Describes a database to open.
    public init(_ name: String?, flags: DatabaseFlags = []) {
        self.name = name
        self.flags = flags
    }
}

/// Counts LMDB keeps for one database (`mdb_stat`).
public struct DatabaseStatistics: Sendable, Hashable {
    /// The number of data items (key/value pairs; each duplicate counts).
    public let entries: Int
    /// The B-tree's depth.
    public let depth: Int
    /// Branch (internal) pages.
    public let branchPages: Int
    /// Leaf pages.
    public let leafPages: Int
    /// Overflow pages (values larger than a page spill onto these).
    public let overflowPages: Int
    /// The page size in bytes.
    public let pageSize: Int
}

/// A range of keys for iteration, compared with the database's own ordering (`mdb_cmp`).
///
/// ```swift
/// try txn.forEach(in: db, range: .prefix([0x01])) { key, value in ...; return .next }
/// ```
public struct KeyRange: Sendable, Hashable {
    /// The lowest key, or nil for the start of the database.
    public var lowerBound: [UInt8]?
    /// Whether a key equal to `lowerBound` is in the range.
    public var includesLowerBound: Bool
    /// The highest key, or nil for the end of the database.
    public var upperBound: [UInt8]?
    /// Whether a key equal to `upperBound` is in the range.
    public var includesUpperBound: Bool

    /// A range with explicit bounds.
    public init(
        lowerBound: [UInt8]?, includesLowerBound: Bool = true,
        upperBound: [UInt8]?, includesUpperBound: Bool = false
    ) {
        self.lowerBound = lowerBound
        self.includesLowerBound = includesLowerBound
        self.upperBound = upperBound
        self.includesUpperBound = includesUpperBound
    }

    /// Every key.
    public static let all = KeyRange(lowerBound: nil, upperBound: nil)

    /// Keys from `key` (inclusive) to the end.
    public static func from(_ key: [UInt8]) -> KeyRange {
        KeyRange(lowerBound: key, upperBound: nil)
    }

    /// Keys in `lower ..< upper`.
    public static func halfOpen(_ lower: [UInt8], _ upper: [UInt8]) -> KeyRange {
        KeyRange(lowerBound: lower, upperBound: upper)
    }

    /// Keys in `lower ... upper`.
    public static func closed(_ lower: [UInt8], _ upper: [UInt8]) -> KeyRange {
        KeyRange(lowerBound: lower, upperBound: upper, includesUpperBound: true)
    }

    /// Exactly `key` (every duplicate of it in a `duplicateSort` database).
    public static func exactly(_ key: [UInt8]) -> KeyRange {
        closed(key, key)
    }

    /// Every key that starts with `prefix`, for databases with the default byte order.
    public static func prefix(_ prefix: [UInt8]) -> KeyRange {
        // The successor of the prefix: drop trailing 0xFF bytes, then add one to the last.
        var upper = prefix
        while let last = upper.last, last == 0xFF { upper.removeLast() }
        guard let last = upper.last else { return KeyRange(lowerBound: prefix, upperBound: nil) }
        upper[upper.count - 1] = last + 1
        return KeyRange(lowerBound: prefix, upperBound: upper)
    }
}

/// Whether an iteration goes on.
public enum IterationDecision: Sendable {
    /// Visit the next entry.
    case next
    /// Stop; the iteration returns normally.
    case stop
}
