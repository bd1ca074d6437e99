import StrataStorage

/// The LMDB databases of a store (`Specs/0004-event-log.md` §1).
struct StoreTables: Sendable {
    /// Store metadata: UUID, format version, timestamps, head, model-version hashes.
    let meta: LMDBDatabase
    /// Entity, relationship and index codes.
    let catalog: LMDBDatabase
    /// Every model version seen: version number (u32 BE) → model file JSON.
    let models: LMDBDatabase
    /// Event chunks: seq (u64 BE) · chunk (u32 BE) → bytes.
    let events: LMDBDatabase
    /// One record per live object: object key → record.
    let state: LMDBDatabase
    /// Index entries: index code · encoded values · object key → empty.
    let index: LMDBDatabase
    /// Reverse references: target · relationship code · source → empty.
    let referrers: LMDBDatabase
    /// Unordered to-many membership: source · relationship code · target → empty.
    let members: LMDBDatabase
    /// Per-object history: object key · seq → empty.
    let history: LMDBDatabase
    /// Per-entity primary-key counters: entity code → last pk (u64 BE).
    let counters: LMDBDatabase
    /// Checkpoints: seq · object key → record, plus seq · "" → checkpoint header.
    let checkpoints: LMDBDatabase
    /// The segment manifest: first seq → segment descriptor.
    let segments: LMDBDatabase
    /// Named consumers: name → last processed seq.
    let consumers: LMDBDatabase
    /// The per-context transaction index: pair hash (u64 BE) · seq (u64 BE) → empty
    /// (spec 0004 §6.4). Nil only in a read-only open of a store written before the table
    /// existed: readers then scan event headers instead.
    let contexts: LMDBDatabase?

    /// The tables every store has (a read-only open refuses a store without one of them).
    static let requiredNames = [
        "meta", "catalog", "models", "events", "state", "index", "referrers", "members", "history", "counters",
        "checkpoints", "segments", "consumers",
    ]
    /// Every table: the required ones and `contexts`, which stores written before it existed
    /// lack until a writable open builds it.
    static let names = requiredNames + [contextsName]
    static let contextsName = "contexts"

    /// The projections `verify` rebuilds from the log and compares.
    var projections: [(String, LMDBDatabase)] {
        [("state", state), ("index", index), ("referrers", referrers), ("members", members), ("history", history),
         ("counters", counters)]
    }

    /// The tables of `environment`; `contexts` when the environment was opened without that
    /// table (a read-only open opens it apart, as it may be missing).
    init(_ environment: LMDBEnvironment, contexts: LMDBDatabase? = nil) throws {
        meta = try environment.database(named: "meta")
        catalog = try environment.database(named: "catalog")
        models = try environment.database(named: "models")
        events = try environment.database(named: "events")
        state = try environment.database(named: "state")
        index = try environment.database(named: "index")
        referrers = try environment.database(named: "referrers")
        members = try environment.database(named: "members")
        history = try environment.database(named: "history")
        counters = try environment.database(named: "counters")
        checkpoints = try environment.database(named: "checkpoints")
        segments = try environment.database(named: "segments")
        consumers = try environment.database(named: "consumers")
        self.contexts = contexts ?? (try? environment.database(named: Self.contextsName))
    }
}

/// Metadata keys (`meta` table).
enum MetaKey {
    static let storeUUID = Array("storeUUID".utf8)
    static let formatVersion = Array("formatVersion".utf8)
    static let createdAt = Array("createdAt".utf8)
    static let openedAt = Array("openedAt".utf8)
    static let head = Array("head".utf8)
    /// The highest sequence moved into segments (0: none).
    static let compactedThrough = Array("compactedThrough".utf8)
    /// How many recent transactions persisted undo needs kept raw (0: none).
    static let undoRetention = Array("undoRetention".utf8)
    /// The last purged sequence (0: nothing purged); the base snapshot is the checkpoint there.
    static let purgedThrough = Array("purgedThrough".utf8)
    /// The sequence of the newest purge marker event (0: none).
    static let purgeMarker = Array("purgeMarker".utf8)
    /// The sequence through which every event (after the purge point) has its row in the
    /// `contexts` table (0 or absent: none — a store written before the table existed).
    static let contextIndexThrough = Array("contextIndexThrough".utf8)
    /// The model version (u32) the store's data was in at the purge point — that of the
    /// purged event there: the base snapshot is in its terms (absent: a purge before it was
    /// recorded, read as the version in use).
    static let purgeModelVersion = Array("purgeModelVersion".utf8)
    static func modelHash(_ hash: [UInt8]) -> [UInt8] { Array("modelHash:".utf8) + hash }
    /// Present while model version `version`'s migration was refused (spec 0004 §4.3): the
    /// version is stored, but the store's data isn't in its terms.
    static func refusedModel(_ version: Int) -> [UInt8] { Array("refusedModel:".utf8) + bigEndianBytes(UInt32(clamping: version)) }
    /// Present (`01`) once a model version earlier than the newest stored one committed: the
    /// newest version's next open migrates what it wrote even when the head event is by then
    /// the newest version's own (spec 0004 §4.5); that version's migration removes it.
    static let earlierModelWrote = Array("earlierModelWrote".utf8)
}

extension EventLog {
    /// The newest model version stored, as `txn` sees it (another process may have stored
    /// one since this log read its catalog).
    func newestStoredModelVersion(_ txn: borrowing LMDBTransaction) throws -> Int {
        var newest = 0
        try txn.forEach(in: tables.models, reverse: true) { key, _ in
            newest = key.withUnsafeBytes { readBigEndian($0, count: 4) }.map { Int($0) } ?? 0
            return .stop
        }
        return newest
    }
}

extension MetaKey {
    /// The number a `meta` row holds: 0 when there is no row.
    ///
    /// - Throws: ``LogError/malformed(_:)`` naming the key for a row that isn't `byteCount`
    ///   bytes: read as 0 (or as its first bytes), a head would make the log look empty.
    static func number(_ row: [UInt8]?, key: [UInt8], byteCount: Int = 8) throws(LogError) -> UInt64 {
        guard let row else { return 0 }
        guard row.count == byteCount, let value = row.withUnsafeBytes({ readBigEndian($0, count: byteCount) }) else {
            throw .malformed(
                "the store's \(String(decoding: key, as: UTF8.self)) is \(row.count) bytes (\(row.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined())), not \(byteCount): its bookkeeping is damaged")
        }
        return value
    }
}

// MARK: - Big-endian helpers

func bigEndianBytes(_ value: UInt64) -> [UInt8] {
    (0..<8).map { UInt8(truncatingIfNeeded: value >> UInt64(56 - 8 * $0)) }
}

func bigEndianBytes(_ value: UInt32) -> [UInt8] {
    (0..<4).map { UInt8(truncatingIfNeeded: value >> UInt32(24 - 8 * $0)) }
}

func readBigEndian(_ raw: UnsafeRawBufferPointer, at offset: Int = 0, count: Int = 8) -> UInt64? {
    guard offset >= 0, count >= 0, raw.count - offset >= count else { return nil }
    var v: UInt64 = 0
    for i in 0..<count { v = v << 8 | UInt64(raw[offset + i]) }
    return v
}
