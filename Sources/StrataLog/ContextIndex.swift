import Foundation
public import StrataStorage

/// The per-context transaction index (`Specs/0004-event-log.md` §6.4): the `contexts` table
/// lists, for each (author, context name) pair, the sequences of the transactions it
/// committed, so a context's own transactions are found newest first without reading the
/// other events.
///
/// A row's key is the pair's hash (u64) · the sequence (u64); its value is empty. The hash is
/// FNV-1a (64-bit) of the pair as an event header encodes it: `u8` flags (bit 0: author
/// present, bit 1: context name present) · the author `string` if present · the context name
/// `string` if present. Names of any length make 16-byte keys. Two pairs can share a hash, so
/// readers compare each event's author and context name, as they compared headers before.
enum ContextIndex {
    /// The length of a row's key.
    static let keyLength = 16

    /// The hash rows of (`author`, `contextName`)'s transactions are filed under.
    static func pairHash(author: String?, contextName: String?) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        @inline(__always) func add(_ byte: UInt8) {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        func addString(_ string: String) {
            var length = UInt64(string.utf8.count)
            repeat {
                let low = UInt8(length & 0x7F)
                length >>= 7
                add(length == 0 ? low : low | 0x80)
            } while length != 0
            for byte in string.utf8 { add(byte) }
        }
        add((author == nil ? 0 : 1) | (contextName == nil ? 0 : 2))
        if let author { addString(author) }
        if let contextName { addString(contextName) }
        return hash
    }

    /// The key of the row for transaction `sequence` of the pair hashed `pair`.
    static func key(_ pair: UInt64, _ sequence: UInt64) -> [UInt8] {
        bigEndianBytes(pair) + bigEndianBytes(sequence)
    }

    /// A row key's pair hash and sequence; nil for a key that isn't 16 bytes (damage).
    static func decode(_ key: UnsafeRawBufferPointer) -> (pair: UInt64, sequence: UInt64)? {
        guard key.count == keyLength, let pair = readBigEndian(key), let sequence = readBigEndian(key, at: 8) else { return nil }
        return (pair, sequence)
    }

    /// How a pair is named in messages: `author "alice", context "editor"`.
    static func describe(author: String?, contextName: String?) -> String {
        "author \(author.map { $0.debugDescription } ?? "none"), context \(contextName.map { $0.debugDescription } ?? "none")"
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// Files event `sequence` by (`author`, `contextName`) in `table`, and moves
    /// `contextIndexThrough` to it when the index covered every event before it — not when a
    /// writer that doesn't know the table (an older Strata) appended events in between: a
    /// writable open indexes those, and readers scan their headers meanwhile.
    static func record(
        _ txn: borrowing LMDBTransaction, meta: LMDBDatabase, table: LMDBDatabase, sequence: UInt64, author: String?,
        contextName: String?
    ) throws {
        try txn.put(TableWriter.empty, forKey: key(pairHash(author: author, contextName: contextName), sequence), in: table)
        let through = try MetaKey.number(try txn.value(forKey: MetaKey.contextIndexThrough, in: meta), key: MetaKey.contextIndexThrough)
        if through == sequence &- 1 {
            try txn.put(bigEndianBytes(sequence), forKey: MetaKey.contextIndexThrough, in: meta)
        }
    }
}

// MARK: - Writing

extension EventLog {
    /// At a writable open, when `contextIndexThrough` isn't the head: files every event after
    /// it (and after the purge point) — raw and compacted, read by their headers only — and
    /// moves it to the head. A store written before the table existed is indexed whole, once;
    /// after an older Strata appended events, only those are.
    ///
    /// Each write transaction files up to ``buildBatch`` events and moves the point past
    /// them, so a crash keeps the batches committed, point and rows together, and the next
    /// writable open goes on from there; a batch bounds the transaction's dirty pages, which
    /// LMDB limits. A log that can't be read (damage, for `verify` to report) leaves the index
    /// as it was and the store opens: readers scan the headers past `contextIndexThrough`.
    func buildContextIndex(batch: UInt64 = buildBatch) throws {
        guard let table = tables.contexts else { return }
        do {
            while try buildContextIndexBatch(table, batch: batch) {}
        } catch is LogError {
            // Damage: the index waits for an open that can read the log.
        }
    }

    /// The most events one write transaction of ``buildContextIndex()`` files.
    static let buildBatch: UInt64 = 1 << 20

    /// Files the next `batch` events (at least 1); false once the point is at the head.
    func buildContextIndexBatch(_ table: LMDBDatabase, batch: UInt64 = buildBatch) throws -> Bool {
        let batch = max(batch, 1)
        return try environment.write { txn in
            let reader = LogReader(transaction: txn.makeAlias(), log: self)
            let head = try reader.head
            let purged = try reader.purgedThrough
            let through = try MetaKey.number(
                try txn.value(forKey: MetaKey.contextIndexThrough, in: tables.meta), key: MetaKey.contextIndexThrough)
            // A point past the head is damaged bookkeeping, for verify to report.
            guard through < head else { return false }
            let start = max(through, purged) + 1
            let end = start > head || head - start < batch ? head : start + batch - 1
            var rows: [(pair: UInt64, sequence: UInt64)] = []
            if start <= end {
                var unread: UInt64?
                try reader.forEachEvent(from: start, through: end, where: { header in
                    rows.append((ContextIndex.pairHash(author: header.author, contextName: header.contextName), header.sequence))
                    return false
                }) { event in
                    // Only an event whose header doesn't read is decoded (and this one did).
                    unread = unread ?? event.sequence
                    return .stop
                }
                if let unread { throw LogError.malformed("event \(unread): its header does not read") }
                guard UInt64(rows.count) == end - start + 1 else {
                    throw LogError.malformed("events \(start)…\(end) are not all in the log")
                }
                rows.sort { $0.pair != $1.pair ? $0.pair < $1.pair : $0.sequence < $1.sequence }
                try txn.withCursor(on: table) { cursor in
                    for row in rows { try cursor.put(TableWriter.empty, forKey: ContextIndex.key(row.pair, row.sequence)) }
                }
            }
            let reached = max(end, purged)
            try txn.put(bigEndianBytes(reached), forKey: MetaKey.contextIndexThrough, in: tables.meta)
            return reached < head
        }
    }
}

// MARK: - Reading

extension LogReader {
    /// The sequence through which every transaction after the purge point is in the
    /// per-context transaction index (0: none — a store written before the index existed,
    /// opened read-only; readers then scan event headers).
    ///
    /// - Throws: ``LogError/malformed(_:)`` when the stored point is past the head (damaged
    ///   bookkeeping).
    public var contextIndexThrough: UInt64 {
        get throws {
            guard tables.contexts != nil else { return 0 }
            let value = try metaNumber(MetaKey.contextIndexThrough)
            guard value > 0 else { return 0 }
            let head = try head
            guard value <= head else {
                throw LogError.malformed("the store's context index point is \(value), past its head \(head): its bookkeeping is damaged")
            }
            return value
        }
    }

    /// Calls `body` with each transaction committed by exactly `author` and `contextName`
    /// (nil: the header has none) from `from` through `through` (default: the head), oldest
    /// first or, with `reversed`, newest first, until it answers `.stop`.
    ///
    /// Through ``contextIndexThrough`` the pair's sequences are read from the per-context
    /// transaction index in batches, and only their events are decoded (a segment frame
    /// holding several of them once); after it (events appended by a writer that doesn't
    /// maintain the index, or a store without one) the event headers are scanned, as
    /// ``forEachEvent(from:through:where:_:)`` does. Purged events are gone: the walk starts
    /// after ``purgedThrough``.
    ///
    /// - Throws: ``LogError/malformed(_:)`` for an index row that isn't a 16-byte key with an
    ///   empty value, or that names a sequence past the head, naming the row; errors of the
    ///   events read.
    public func forEachTransaction(
        author: String?, contextName: String?, from: UInt64 = 1, through: UInt64? = nil, reversed: Bool = false,
        _ body: (TransactionEvent) throws -> IterationDecision
    ) throws {
        let head = try head
        let last = min(through ?? head, head)
        let first = max(from, try purgedThrough + 1, 1)
        guard first <= last else { return }
        let indexed = try contextIndexThrough
        let pair = ContextIndex.pairHash(author: author, contextName: contextName)
        func matches(_ event: TransactionEvent) -> Bool { event.author == author && event.contextName == contextName }
        var stopped = false
        func deliver(_ event: TransactionEvent) throws -> IterationDecision {
            guard matches(event) else { return .next }
            if try body(event) == .stop {
                stopped = true
                return .stop
            }
            return .next
        }

        /// The scanned part, by headers: forward in one walk, backward in growing windows.
        func scan(_ low: UInt64, _ high: UInt64) throws {
            guard low <= high else { return }
            let filter: (EventHeader) -> Bool = { $0.author == author && $0.contextName == contextName }
            if !reversed {
                try forEachEvent(from: low, through: high, where: filter, deliver)
                return
            }
            var top = high
            var window: UInt64 = 64
            while !stopped {
                let bottom = top - low + 1 > window ? top - window + 1 : low
                var events: [TransactionEvent] = []
                try forEachEvent(from: bottom, through: top, where: filter) { event in
                    if matches(event) { events.append(event) }
                    return .next
                }
                for event in events.reversed() where try deliver(event) == .stop { return }
                guard bottom > low else { return }
                top = bottom - 1
                window = min(window * 2, 1 << 16)
            }
        }

        /// The indexed part: the pair's sequences a batch at a time, then their events.
        func fromIndex(_ low: UInt64, _ high: UInt64) throws {
            guard low <= high, let table = tables.contexts else { return }
            var (low, high) = (low, high)
            var batch = 64
            while !stopped && low <= high {
                var sequences: [UInt64] = []
                let range = KeyRange(
                    lowerBound: ContextIndex.key(pair, low), includesLowerBound: true,
                    upperBound: ContextIndex.key(pair, high + 1), includesUpperBound: false)
                var exhausted = true
                try txn.forEach(in: table, range: range, reverse: reversed) { key, value in
                    guard let row = key.withUnsafeBytes({ ContextIndex.decode($0) }), row.pair == pair else {
                        let bytes = key.withUnsafeBytes { Array($0) }
                        throw LogError.malformed(
                            "the contexts table is damaged: it holds a key of \(bytes.count) bytes (\(ContextIndex.hex(bytes))), not 16 (pair · sequence)")
                    }
                    guard value.byteCount == 0 else {
                        throw LogError.malformed(
                            "the contexts table is damaged: its row for sequence \(row.sequence) of \(ContextIndex.describe(author: author, contextName: contextName)) holds \(value.byteCount) bytes, not none")
                    }
                    guard row.sequence >= 1, row.sequence <= head else {
                        throw LogError.malformed(
                            "the contexts table is damaged: it files sequence \(row.sequence), outside the log (1…\(head)), under \(ContextIndex.describe(author: author, contextName: contextName))")
                    }
                    sequences.append(row.sequence)
                    if sequences.count >= batch {
                        exhausted = false
                        return .stop
                    }
                    return .next
                }
                var done = exhausted
                if !exhausted, let reached = sequences.last {
                    if reversed { high = reached - 1 } else { low = reached + 1 }
                } else {
                    done = true
                }
                try forEachEvent(among: reversed ? sequences.reversed() : sequences, reversed: reversed, deliver)
                if done { return }
                batch = min(batch * 2, 4096)
            }
        }

        let coveredHigh = min(last, indexed)
        if reversed {
            try scan(max(first, indexed &+ 1), last)
            if !stopped { try fromIndex(first, coveredHigh) }
        } else {
            try fromIndex(first, coveredHigh)
            if !stopped { try scan(max(first, indexed &+ 1), last) }
        }
    }
}
