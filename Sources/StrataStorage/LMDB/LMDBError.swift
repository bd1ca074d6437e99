internal import CStrataLMDB

/// An error from LMDB, carrying LMDB's code, the C function that returned it and
/// `mdb_strerror`'s text.
///
/// Codes from `MDB_KEYEXIST` (-30799) to `MDB_BAD_DBI` (-30780) are LMDB's own; positive
/// codes are `errno` values (LMDB reports I/O and permission failures that way); codes
/// from -31000 down are Strata's conditions around LMDB (a nested write transaction, a
/// map that may not grow further, a missing named database).
///
/// ```swift
/// do {
///     try environment.write { txn in try txn.put(value, forKey: key, in: db, flags: .noOverwrite) }
/// } catch let error as LMDBError where error.code == .keyExists {
///     // the key was already there; nothing was written
/// }
/// ```
public struct LMDBError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An LMDB or `errno` result code.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        /// The numeric code as LMDB returns it.
        public let rawValue: Int32

        /// Creates a code from LMDB's numeric value.
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// `MDB_KEYEXIST`: a put with `.noOverwrite` or `.noDuplicateData` found the key/value present.
        public static let keyExists = Code(rawValue: -30799)
        /// `MDB_NOTFOUND`: no matching key or data item.
        public static let notFound = Code(rawValue: -30798)
        /// `MDB_PAGE_NOTFOUND`: a requested page was not found (usually corruption).
        public static let pageNotFound = Code(rawValue: -30797)
        /// `MDB_CORRUPTED`: a page has an invalid type.
        public static let corrupted = Code(rawValue: -30796)
        /// `MDB_PANIC`: a fatal error in the environment; it must be reopened.
        public static let panic = Code(rawValue: -30795)
        /// `MDB_VERSION_MISMATCH`: the environment was written by an incompatible LMDB version.
        public static let versionMismatch = Code(rawValue: -30794)
        /// `MDB_INVALID`: the file is not an LMDB data file.
        public static let invalid = Code(rawValue: -30793)
        /// `MDB_MAP_FULL`: the environment's map size is reached.
        public static let mapFull = Code(rawValue: -30792)
        /// `MDB_DBS_FULL`: the environment's `maxDatabases` is reached.
        public static let databasesFull = Code(rawValue: -30791)
        /// `MDB_READERS_FULL`: the environment's `maxReaders` is reached.
        public static let readersFull = Code(rawValue: -30790)
        /// `MDB_TLS_FULL`: too many TLS keys in use.
        public static let threadLocalStorageFull = Code(rawValue: -30789)
        /// `MDB_TXN_FULL`: the transaction has too many dirty pages.
        public static let transactionFull = Code(rawValue: -30788)
        /// `MDB_CURSOR_FULL`: the cursor stack is too deep (internal error).
        public static let cursorFull = Code(rawValue: -30787)
        /// `MDB_PAGE_FULL`: a page has no more space (internal error).
        public static let pageFull = Code(rawValue: -30786)
        /// `MDB_MAP_RESIZED`: another process grew the map beyond this process's size.
        public static let mapResized = Code(rawValue: -30785)
        /// `MDB_INCOMPATIBLE`: the operation conflicts with the database's flags.
        public static let incompatible = Code(rawValue: -30784)
        /// `MDB_BAD_RSLOT`: an invalid reuse of a reader lock-table slot.
        public static let badReaderSlot = Code(rawValue: -30783)
        /// `MDB_BAD_TXN`: the transaction must abort, has a child, or is invalid.
        public static let badTransaction = Code(rawValue: -30782)
        /// `MDB_BAD_VALSIZE`: a key or a `DUPSORT` value is empty or too large.
        public static let badValueSize = Code(rawValue: -30781)
        /// `MDB_BAD_DBI`: the database handle was changed or closed unexpectedly.
        public static let badDatabase = Code(rawValue: -30780)

        /// `EACCES`: permission denied (also: a write in a read-only transaction).
        public static let permissionDenied = Code(rawValue: 13)
        /// `ENOENT`: no such file or directory.
        public static let noSuchFile = Code(rawValue: 2)
        /// `EINVAL`: an invalid parameter.
        public static let invalidArgument = Code(rawValue: 22)
        /// `ENOSPC`: no space left on the device.
        public static let noSpace = Code(rawValue: 28)
        /// `EIO`: an I/O error.
        public static let ioError = Code(rawValue: 5)
        /// `ENOMEM`: out of memory.
        public static let outOfMemory = Code(rawValue: 12)

        /// Strata: a write transaction was started on a thread already inside one.
        public static let nestedWriteTransaction = Code(rawValue: -31000)
        /// Strata: the map is full and already at `maximumMapSize`.
        public static let mapAtMaximumSize = Code(rawValue: -31001)
        /// Strata: a named database is not in the environment (read-only open).
        public static let databaseNotFound = Code(rawValue: -31002)
        /// Strata: a write was attempted on an environment opened read-only.
        public static let readOnlyEnvironment = Code(rawValue: -31003)
        /// Strata: the environment is open in a way that excludes this use: a replacement of
        /// its data file while this process or another has it open, or a writable reopen of
        /// one open read-only here that couldn't keep its database handles.
        public static let incompatibleOpen = Code(rawValue: -31004)
        /// Strata: a write's commit was refused because the environment's data file was
        /// deleted while open (its directory removed, or moved to another file system): it
        /// would have gone into the unlinked file and been lost.
        public static let dataFileGone = Code(rawValue: -31005)
        /// Strata: another process held the environment's writer lock (a write transaction)
        /// longer than this process's ``WriterLockWait`` policy waits
        /// (``LMDBEnvironment/setWriterLockWait(_:)``).
        public static let writerLockBusy = Code(rawValue: -31006)

        /// The constant's name, as LMDB's header spells it where there is one.
        public var description: String {
            switch self {
            case .keyExists: "MDB_KEYEXIST"
            case .notFound: "MDB_NOTFOUND"
            case .pageNotFound: "MDB_PAGE_NOTFOUND"
            case .corrupted: "MDB_CORRUPTED"
            case .panic: "MDB_PANIC"
            case .versionMismatch: "MDB_VERSION_MISMATCH"
            case .invalid: "MDB_INVALID"
            case .mapFull: "MDB_MAP_FULL"
            case .databasesFull: "MDB_DBS_FULL"
            case .readersFull: "MDB_READERS_FULL"
            case .threadLocalStorageFull: "MDB_TLS_FULL"
            case .transactionFull: "MDB_TXN_FULL"
            case .cursorFull: "MDB_CURSOR_FULL"
            case .pageFull: "MDB_PAGE_FULL"
            case .mapResized: "MDB_MAP_RESIZED"
            case .incompatible: "MDB_INCOMPATIBLE"
            case .badReaderSlot: "MDB_BAD_RSLOT"
            case .badTransaction: "MDB_BAD_TXN"
            case .badValueSize: "MDB_BAD_VALSIZE"
            case .badDatabase: "MDB_BAD_DBI"
            case .permissionDenied: "EACCES"
            case .noSuchFile: "ENOENT"
            case .invalidArgument: "EINVAL"
            case .noSpace: "ENOSPC"
            case .ioError: "EIO"
            case .outOfMemory: "ENOMEM"
            case .nestedWriteTransaction: "STRATA_NESTED_WRITE"
            case .mapAtMaximumSize: "STRATA_MAP_AT_MAXIMUM"
            case .databaseNotFound: "STRATA_DATABASE_NOT_FOUND"
            case .readOnlyEnvironment: "STRATA_READ_ONLY_ENVIRONMENT"
            case .incompatibleOpen: "STRATA_INCOMPATIBLE_OPEN"
            case .dataFileGone: "STRATA_DATA_FILE_GONE"
            case .writerLockBusy: "STRATA_WRITER_LOCK_BUSY"
            default: "code \(rawValue)"
            }
        }
    }

    /// What went wrong.
    public let code: Code
    /// The LMDB function (or Strata operation) that failed, such as `mdb_put`.
    public let operation: String
    /// LMDB's text for the code (`mdb_strerror`), or Strata's for its own codes.
    public let message: String
    /// Where it happened: a path, a database name, a size; nil when nothing more is known.
    public let detail: String?

    /// Creates an error for an LMDB result code, reading its text from `mdb_strerror`.
    init(lmdbCode: Int32, operation: String, detail: String? = nil) {
        self.code = Code(rawValue: lmdbCode)
        self.operation = operation
        self.detail = detail
        self.message = String(cString: mdb_strerror(lmdbCode))
    }

    /// Creates one of Strata's own conditions.
    init(_ code: Code, operation: String, message: String, detail: String? = nil) {
        self.code = code
        self.operation = operation
        self.message = message
        self.detail = detail
    }

    /// `operation: message (CODE)`, then the detail.
    public var description: String {
        var text = "\(operation): \(message) (\(code))"
        if let detail { text += " — \(detail)" }
        return text
    }
}

/// Throws an ``LMDBError`` when `result` is not `MDB_SUCCESS`.
@inline(__always)
func check(_ result: Int32, _ operation: @autoclosure () -> String, detail: @autoclosure () -> String? = nil) throws(LMDBError) {
    if result != 0 {
        throw LMDBError(lmdbCode: result, operation: operation(), detail: detail())
    }
}
