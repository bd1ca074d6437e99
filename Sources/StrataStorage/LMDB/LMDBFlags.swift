/// Flags for opening an environment (`mdb_env_open`).
///
/// Values are LMDB's `MDB_*` constants, written out so a test can check each one against
/// the C header. Most callers use ``LMDBEnvironment/Options`` instead of setting these.
public struct EnvironmentFlags: OptionSet, Sendable, Hashable {
    /// The raw `unsigned int` flag bits.
    public let rawValue: UInt32
    /// Creates flags from raw bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `MDB_FIXEDMAP`: map at a fixed address (experimental in LMDB).
    public static let fixedMap = EnvironmentFlags(rawValue: 0x01)
    /// `MDB_NOSUBDIR`: the path names the data file itself, not a directory.
    public static let noSubdirectory = EnvironmentFlags(rawValue: 0x4000)
    /// `MDB_NOSYNC`: don't fsync at commit (a system crash can lose or corrupt the last commits).
    public static let noSync = EnvironmentFlags(rawValue: 0x10000)
    /// `MDB_RDONLY`: open read-only.
    public static let readOnly = EnvironmentFlags(rawValue: 0x20000)
    /// `MDB_NOMETASYNC`: fsync data but not the meta page at commit (Strata's `.fast`).
    public static let noMetaSync = EnvironmentFlags(rawValue: 0x40000)
    /// `MDB_WRITEMAP`: write through a writable memory map.
    public static let writeMap = EnvironmentFlags(rawValue: 0x80000)
    /// `MDB_MAPASYNC`: with `writeMap`, flush asynchronously.
    public static let mapAsync = EnvironmentFlags(rawValue: 0x100000)
    /// `MDB_NOTLS`: reader slots tied to transactions, not threads (Strata always sets it).
    public static let noThreadLocalStorage = EnvironmentFlags(rawValue: 0x200000)
    /// `MDB_NOLOCK`: no locking at all; the caller serialises everything.
    public static let noLock = EnvironmentFlags(rawValue: 0x400000)
    /// `MDB_NORDAHEAD`: disable OS read-ahead.
    public static let noReadAhead = EnvironmentFlags(rawValue: 0x800000)
    /// `MDB_NOMEMINIT`: don't zero malloc'd pages before writing them.
    public static let noMemoryInit = EnvironmentFlags(rawValue: 0x1000000)
}

/// Flags for a named database (`mdb_dbi_open`).
public struct DatabaseFlags: OptionSet, Sendable, Hashable {
    /// The raw `unsigned int` flag bits.
    public let rawValue: UInt32
    /// Creates flags from raw bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `MDB_REVERSEKEY`: keys compare from their last byte to their first.
    public static let reverseKey = DatabaseFlags(rawValue: 0x02)
    /// `MDB_DUPSORT`: a key may hold several sorted values.
    public static let duplicateSort = DatabaseFlags(rawValue: 0x04)
    /// `MDB_INTEGERKEY`: keys are native `unsigned int` or `size_t` integers.
    public static let integerKey = DatabaseFlags(rawValue: 0x08)
    /// `MDB_DUPFIXED`: with `duplicateSort`, all values have one size.
    public static let duplicateFixed = DatabaseFlags(rawValue: 0x10)
    /// `MDB_INTEGERDUP`: with `duplicateSort`, values are native integers.
    public static let integerDuplicate = DatabaseFlags(rawValue: 0x20)
    /// `MDB_REVERSEDUP`: with `duplicateSort`, values compare from their last byte.
    public static let reverseDuplicate = DatabaseFlags(rawValue: 0x40)
    /// `MDB_CREATE`: create the database if it doesn't exist (Strata sets it when writable).
    public static let create = DatabaseFlags(rawValue: 0x40000)
}

/// Flags for a put (`mdb_put`, `mdb_cursor_put`).
public struct PutFlags: OptionSet, Sendable, Hashable {
    /// The raw `unsigned int` flag bits.
    public let rawValue: UInt32
    /// Creates flags from raw bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `MDB_NOOVERWRITE`: fail with ``LMDBError/Code/keyExists`` if the key is present.
    public static let noOverwrite = PutFlags(rawValue: 0x10)
    /// `MDB_NODUPDATA`: in a `duplicateSort` database, fail if the key/value pair is present.
    public static let noDuplicateData = PutFlags(rawValue: 0x20)
    /// `MDB_CURRENT`: replace the item at the cursor's position (cursor puts only).
    public static let current = PutFlags(rawValue: 0x40)
    /// `MDB_RESERVE`: reserve space for the value and return it for the caller to fill.
    public static let reserve = PutFlags(rawValue: 0x10000)
    /// `MDB_APPEND`: the key sorts after every key present; a fast path for sequential loads.
    public static let append = PutFlags(rawValue: 0x20000)
    /// `MDB_APPENDDUP`: like `append`, for the values of a `duplicateSort` key.
    public static let appendDuplicate = PutFlags(rawValue: 0x40000)
    /// `MDB_MULTIPLE`: store several fixed-size values at once (`duplicateFixed` only).
    public static let multiple = PutFlags(rawValue: 0x80000)
}

/// How much a commit waits for the disk.
///
/// | mode | LMDB flags | an application crash | an OS crash or power loss |
/// | --- | --- | --- | --- |
/// | `.durable` | none: data and meta page fsynced at each commit | loses nothing committed | loses nothing committed |
/// | `.fast` | `MDB_NOMETASYNC` | loses nothing committed | may lose the last committed transaction(s); the file stays consistent |
///
/// Neither mode can corrupt the environment: LMDB's copy-on-write B-tree always leaves a
/// valid meta page to fall back to. `.fast` trades the durability of the most recent
/// commits against the cost of one of the two fsyncs per commit.
public enum Durability: Sendable, Hashable {
    /// Full sync at every commit (the default).
    case durable
    /// `MDB_NOMETASYNC`: the meta page is synced at the next commit or ``LMDBEnvironment/sync(force:)``.
    case fast
}
