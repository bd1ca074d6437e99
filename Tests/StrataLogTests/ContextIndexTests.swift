import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// The per-context transaction index (spec 0004 §6.4): the `contexts` table files every
/// event under its (author, context name), in the event's own write transaction; a store
/// written before the table existed is indexed at its first writable open and read by
/// header scans until then; verify, purge, compaction and replay keep it.
@Suite("Event log: the per-context transaction index")
struct ContextIndexTests {
    static let transactions = Int(ProcessInfo.processInfo.environment["STRATA_CONTEXT_INDEX_TRANSACTIONS"] ?? "") ?? 120

    /// The pairs the workload commits under: absent and empty names are different pairs, and
    /// names longer than LMDB's largest key still make 16-byte keys.
    static let pairs: [(author: String?, contextName: String?)] = [
        ("alice", "editor"), ("alice", "sync"), ("bob", "editor"), (nil, "editor"), ("alice", nil), (nil, nil), ("", ""),
        (String(repeating: "a", count: 700), String(repeating: "é", count: 400)),
    ]

    /// Commits `count` transactions spread over ``pairs``: inserts, updates, undo- and
    /// redo-kind saves, reservations.
    static func populate(_ log: EventLog, count: Int, seed: UInt64 = 7) throws {
        var random = SeededGenerator(seed: seed)
        var members: [StoredObjectID] = []
        for step in 0..<count {
            let pair = pairs[Int.random(in: 0..<pairs.count, using: &random)]
            let roll = Int.random(in: 0..<10, using: &random)
            if roll == 0 {
                _ = try log.reservePrimaryKeys(of: "Sponsor", count: 2, author: pair.author, contextName: pair.contextName)
                continue
            }
            let kind: TransactionKind =
                roll == 1 && step > 0 ? .undo(of: UInt64(step), group: 0) : roll == 2 && step > 0 ? .redo(of: UInt64(step), group: 0) : .save
            var draft = TransactionDraft(author: pair.author, contextName: pair.contextName, kind: kind)
            if members.isEmpty || roll > 6 {
                draft.insert("Member", values: ["name": s("m\(step)"), "age": i(Int32(step % 90)), "email": s("m\(seed).\(step)@x.org")])
                let result = try log.commit(draft)
                members.append(contentsOf: result.permanentIDs.values)
            } else {
                let target = members[Int.random(in: 0..<members.count, using: &random)]
                draft.update(.stored(target), values: ["age": i(Int32(step % 77))])
                try log.commit(draft)
            }
        }
    }

    /// Every pair of ``pairs``' sequences, by scanning all the events (the oracle).
    static func scanned(_ log: EventLog, after: UInt64 = 0) throws -> [String: [UInt64]] {
        var result: [String: [UInt64]] = [:]
        let known = Set(pairs.map { key($0.author, $0.contextName) })
        try log.read { reader in
            try reader.forEachEvent(from: after + 1) { event in
                let pair = key(event.author, event.contextName)
                if known.contains(pair) { result[pair, default: []].append(event.sequence) }
                return .next
            }
        }
        return result
    }

    static func key(_ author: String?, _ contextName: String?) -> String {
        "\(author.map { "a:" + $0 } ?? "-")|\(contextName.map { "c:" + $0 } ?? "-")"
    }

    /// Every pair's sequences through `forEachTransaction`, forward and backward (checked to
    /// agree), over the whole log and over a middle range.
    static func indexed(_ log: EventLog) throws -> [String: [UInt64]] {
        var result: [String: [UInt64]] = [:]
        try log.read { reader in
            let head = try reader.head
            for pair in pairs {
                var forward: [UInt64] = []
                try reader.forEachTransaction(author: pair.author, contextName: pair.contextName) { event in
                    #expect(event.author == pair.author && event.contextName == pair.contextName)
                    forward.append(event.sequence)
                    return .next
                }
                var backward: [UInt64] = []
                try reader.forEachTransaction(author: pair.author, contextName: pair.contextName, reversed: true) { event in
                    backward.append(event.sequence)
                    return .next
                }
                #expect(backward == forward.reversed())
                // A middle range, and stopping early.
                let (low, high) = (head / 3, 2 * head / 3)
                var middle: [UInt64] = []
                try reader.forEachTransaction(author: pair.author, contextName: pair.contextName, from: low, through: high, reversed: true) {
                    middle.append($0.sequence)
                    return .next
                }
                #expect(middle == forward.filter { $0 >= low && $0 <= high }.reversed())
                var first: [UInt64] = []
                try reader.forEachTransaction(author: pair.author, contextName: pair.contextName, reversed: true) {
                    first.append($0.sequence)
                    return first.count == 2 ? .stop : .next
                }
                #expect(first == Array(forward.reversed().prefix(2)))
                if !forward.isEmpty { result[key(pair.author, pair.contextName)] = forward }
            }
        }
        return result
    }

    static func rows(_ log: EventLog) throws -> [(pair: UInt64, sequence: UInt64)] {
        try log.environment.read { txn in
            var rows: [(pair: UInt64, sequence: UInt64)] = []
            guard let table = log.tables.contexts else { return rows }
            try txn.forEach(in: table) { key, _ in
                if let row = key.withUnsafeBytes({ ContextIndex.decode($0) }) { rows.append(row) }
                return .next
            }
            return rows
        }
    }

    static func through(_ log: EventLog) throws -> UInt64 {
        try log.read { try $0.contextIndexThrough }
    }

    /// Makes the store at `path` as a Strata without the index wrote it: no `contexts` table,
    /// no `contextIndexThrough` row. Every handle on the store must be closed.
    static func makeOldFormat(_ path: String) throws {
        let raw = try RawStore(path)
        let table = try #require(raw.tables.contexts)
        try raw.environment.write { txn in
            try txn.dropDatabase(table)
            _ = try txn.delete(key: MetaKey.contextIndexThrough, in: raw.tables.meta)
        }
    }

    @Test("every commit — saves, undo and redo kinds, reservations, a purge marker, a migration — is filed under its pair, in its own transaction")
    func commitsAreFiled() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        #expect(try Self.through(log) == 0)
        try Self.populate(log, count: Self.transactions)
        let head = try log.head
        #expect(try Self.through(log) == head)
        #expect(try Self.rows(log).count == Int(head))
        #expect(try Self.indexed(log) == Self.scanned(log))
        // Each row's pair is its event's.
        let events = try allEvents(log)
        for row in try Self.rows(log) {
            let event = events[Int(row.sequence) - 1]
            #expect(row.pair == ContextIndex.pairHash(author: event.author, contextName: event.contextName))
        }
        // Absent and empty names are different pairs.
        #expect(ContextIndex.pairHash(author: nil, contextName: nil) != ContextIndex.pairHash(author: "", contextName: ""))
        #expect(ContextIndex.pairHash(author: "ab", contextName: nil) != ContextIndex.pairHash(author: "a", contextName: "b"))
        // A refused commit files nothing.
        var duplicate = TransactionDraft(author: "alice", contextName: "editor")
        duplicate.insert("Member", values: ["name": s("x"), "email": s("twice@x.org")])
        duplicate.insert("Member", values: ["name": s("y"), "email": s("twice@x.org")])
        #expect(throws: LogError.self) { try log.commit(duplicate) }
        #expect(try Self.rows(log).count == Int(head))
        // The purge marker is filed under its purger.
        _ = try log.purge(through: head / 2, author: "janitor", contextName: "nightly")
        var marker: [UInt64] = []
        try log.read { reader in
            try reader.forEachTransaction(author: "janitor", contextName: "nightly") {
                marker.append($0.sequence)
                return .next
            }
        }
        #expect(marker == [head + 1])
        #expect(try log.verify().problems.isEmpty)
    }

    @Test("an old store (no contexts table): read-only it is read by header scans; the first writable open indexes it, raw and compacted, once; verify agrees")
    func oldStoreUpgrade() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store")
        let expected: [String: [UInt64]]
        do {
            let log = try openLog(dir, model: try libraryModel())
            try Self.populate(log, count: Self.transactions)
            var request = CompactionRequest(before: UInt64(Self.transactions / 2))
            request.eventsPerFrame = 8
            _ = try log.compact(request)
            expected = try Self.scanned(log)
        }
        try Self.makeOldFormat(path)

        do {
            let readOnly = try EventLog(openingExistingAt: path)
            #expect(readOnly.tables.contexts == nil)
            #expect(try Self.through(readOnly) == 0)
            #expect(try Self.indexed(readOnly) == expected)
            #expect(try readOnly.verify().problems.isEmpty)
        }
        do {
            let log = try EventLog(openingExistingAt: path, readOnly: false)
            let head = try log.head
            #expect(try Self.through(log) == head)
            #expect(try Self.rows(log).count == Int(head))
            #expect(try Self.indexed(log) == expected)
            #expect(try log.verify().problems.isEmpty)
            // Later commits go on filing.
            try Self.populate(log, count: 10, seed: 99)
            #expect(try Self.through(log) == head + 10)
            #expect(try Self.indexed(log) == Self.scanned(log))
        }
        // A read-only open of the upgraded store uses the table.
        let readOnly = try EventLog(openingExistingAt: path)
        #expect(readOnly.tables.contexts != nil)
        #expect(try Self.through(readOnly) == readOnly.head)
    }

    @Test("events an older Strata appended after the upgrade (no rows, the point behind): readers scan them, verify is clean, the next writable open files them")
    func olderWriterAppends() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store")
        var head: UInt64 = 0
        do {
            let log = try openLog(dir, model: try libraryModel())
            try Self.populate(log, count: Self.transactions)
            head = try log.head
        }
        // As if the last 12 events were committed by a writer that doesn't know the table;
        // a newer writer then committed one more (filed, but the point stays behind).
        let behind = head - 12
        do {
            let raw = try RawStore(path)
            let table = try #require(raw.tables.contexts)
            try raw.environment.write { txn in
                var stale: [[UInt8]] = []
                try txn.forEach(in: table) { key, _ in
                    if let row = key.withUnsafeBytes({ ContextIndex.decode($0) }), row.sequence > behind {
                        stale.append(key.withUnsafeBytes { Array($0) })
                    }
                    return .next
                }
                for key in stale { _ = try txn.delete(key: key, in: table) }
                try txn.put(bigEndianBytes(behind), forKey: MetaKey.contextIndexThrough, in: raw.tables.meta)
            }
        }
        do {
            let readOnly = try EventLog(openingExistingAt: path)
            #expect(try Self.through(readOnly) == behind)
            #expect(try Self.indexed(readOnly) == Self.scanned(readOnly))
            #expect(try readOnly.verify().problems.isEmpty)
        }
        let log = try EventLog(openingExistingAt: path, readOnly: false)
        #expect(try Self.through(log) == head)
        #expect(try Self.rows(log).count == Int(head))
        #expect(try Self.indexed(log) == Self.scanned(log))
        #expect(try log.verify().problems.isEmpty)
    }

    @Test("the upgrade files a batch of events per write transaction, moving the point with them: stopped after any batch (a crash), readers and verify are right and the next open goes on")
    func upgradeInBatches() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        try Self.populate(log, count: 50)
        var request = CompactionRequest(before: 20)
        request.eventsPerFrame = 4
        _ = try log.compact(request)
        let head = try log.head
        let expected = try Self.scanned(log)
        let table = try #require(log.tables.contexts)
        // As a store before the index: no rows, no point.
        try log.environment.write { txn in
            try txn.removeAll(in: table)
            _ = try txn.delete(key: MetaKey.contextIndexThrough, in: log.tables.meta)
        }
        for step in 1...3 {
            #expect(try log.buildContextIndexBatch(table, batch: 7))
            #expect(try Self.through(log) == UInt64(7 * step))
            #expect(try Self.rows(log).map(\.sequence).sorted() == Array(1...UInt64(7 * step)))
            #expect(try Self.indexed(log) == expected)
            #expect(try log.verify().problems.isEmpty)
        }
        try log.buildContextIndex(batch: 7)
        #expect(try Self.through(log) == head)
        #expect(try Self.rows(log).count == Int(head))
        #expect(try Self.indexed(log) == expected)
        #expect(try log.verify().problems.isEmpty)
        #expect(try !log.buildContextIndexBatch(table, batch: 7))
    }

    @Test("an upgrade that can't read the log (a damaged header) writes nothing and the store opens; readers scan; once repaired, the next open indexes it")
    func upgradeIsAtomic() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store")
        do {
            let log = try openLog(dir, model: try libraryModel())
            try Self.populate(log, count: 40)
        }
        try Self.makeOldFormat(path)
        // Event 30's magic damaged: its header doesn't read.
        let key = bigEndianBytes(UInt64(30)) + bigEndianBytes(UInt32(0))
        let original: [UInt8]
        do {
            let raw = try RawStore(path)
            original = try #require(try raw.environment.read { try $0.value(forKey: key, in: raw.tables.events) })
            var damaged = original
            damaged[0] = 0x00
            try raw.environment.write { txn in try txn.put(damaged, forKey: key, in: raw.tables.events) }
            // The table exists again (RawStore creates it), empty: as a crash before the upgrade's commit leaves it.
        }
        do {
            let log = try EventLog(openingExistingAt: path, readOnly: false)
            #expect(try Self.through(log) == 0)
            #expect(try Self.rows(log).isEmpty)
            // alice's transactions after the damage are still found by scanning back.
            var found: [UInt64] = []
            var expected: [UInt64] = []
            try log.read { reader in
                try reader.forEachTransaction(author: "alice", contextName: "editor", from: 31, reversed: true) {
                    found.append($0.sequence)
                    return .next
                }
                try reader.forEachEvent(from: 31) { event in
                    if event.author == "alice" && event.contextName == "editor" { expected.insert(event.sequence, at: 0) }
                    return .next
                }
            }
            #expect(found == expected)
        }
        do {
            let raw = try RawStore(path)
            try raw.environment.write { txn in try txn.put(original, forKey: key, in: raw.tables.events) }
        }
        let log = try EventLog(openingExistingAt: path, readOnly: false)
        #expect(try Self.through(log) == log.head)
        #expect(try Self.indexed(log) == Self.scanned(log))
    }

    @Test("verify names a missing, an extra, a misfiled and a malformed row by pair and sequence; readers refuse malformed rows naming them, never trap")
    func verifyFindsDamage() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        try Self.populate(log, count: 60)
        let events = try allEvents(log)
        let aliceEditor = try #require(events.first { $0.author == "alice" && $0.contextName == "editor" })
        let bobEditor = try #require(events.first { $0.author == "bob" && $0.contextName == "editor" })
        let alice = ContextIndex.pairHash(author: "alice", contextName: "editor")
        let bob = ContextIndex.pairHash(author: "bob", contextName: "editor")
        let table = try #require(log.tables.contexts)
        func damage(_ body: (borrowing LMDBTransaction) throws -> Void) throws {
            try log.environment.write { txn in try body(txn) }
        }
        func problems() throws -> [String] {
            try log.verify().problems.map { "\($0.location): \($0.message)" }
        }

        // Missing.
        try damage { txn in _ = try txn.delete(key: ContextIndex.key(alice, aliceEditor.sequence), in: table) }
        var found = try problems()
        #expect(found == ["contexts author \"alice\", context \"editor\" @ \(aliceEditor.sequence): is missing from the live table (the log's replay has it)"])
        // Misfiled: alice's event filed under bob.
        try damage { txn in try txn.put([], forKey: ContextIndex.key(bob, aliceEditor.sequence), in: table) }
        found = try problems()
        #expect(found.count == 2)
        #expect(found.contains(
            "contexts author \"bob\", context \"editor\" @ \(aliceEditor.sequence): is in the live table but not in the log's replay (event \(aliceEditor.sequence) is by author \"alice\", context \"editor\")"))
        try damage { txn in
            _ = try txn.delete(key: ContextIndex.key(bob, aliceEditor.sequence), in: table)
            try txn.put([], forKey: ContextIndex.key(alice, aliceEditor.sequence), in: table)
        }
        #expect(try problems().isEmpty)
        // Extra: a sequence past the head, and a row with a value.
        let head = try log.head
        try damage { txn in
            try txn.put([], forKey: ContextIndex.key(bob, head + 5), in: table)
            try txn.put([1, 2], forKey: ContextIndex.key(bob, bobEditor.sequence), in: table)
        }
        found = try problems()
        #expect(found.contains(
            "contexts author \"bob\", context \"editor\" @ \(head + 5): is in the live table but not in the log's replay (no event \(head + 5) was read from the log)"))
        #expect(found.contains("contexts author \"bob\", context \"editor\" @ \(bobEditor.sequence): its row holds 2 bytes; rows are empty"))
        // Readers refuse them, naming the row.
        func readBob() throws {
            try log.read { reader in
                try reader.forEachTransaction(author: "bob", contextName: "editor", reversed: true) { _ in .next }
            }
        }
        // (A row past the head is outside every range a reader reads.)
        #expect(throws: LogError.malformed(
            "the contexts table is damaged: its row for sequence \(bobEditor.sequence) of author \"bob\", context \"editor\" holds 2 bytes, not none")
        ) { try readBob() }
        try damage { txn in
            try txn.put([], forKey: ContextIndex.key(bob, bobEditor.sequence), in: table)
            _ = try txn.delete(key: ContextIndex.key(bob, head + 5), in: table)
        }
        // A key of the wrong length.
        let short = bigEndianBytes(bob) + [0, 0, 0, 0, 0, 0, 0, UInt8(bobEditor.sequence), 9]
        try damage { txn in try txn.put([], forKey: short, in: table) }
        #expect(try problems() == ["contexts row \(ContextIndex.hex(short)): its key is 17 bytes, not 16 (pair · sequence)"])
        #expect(throws: LogError.self) { try readBob() }
        try damage { txn in _ = try txn.delete(key: short, in: table) }
        // A point past the head is damaged bookkeeping: verify says so, readers refuse it.
        try damage { txn in try txn.put(bigEndianBytes(head + 3), forKey: MetaKey.contextIndexThrough, in: log.tables.meta) }
        #expect(try problems() == ["meta contextIndexThrough: is \(head + 3), past the head \(head)"])
        #expect(throws: LogError.self) { try readBob() }
        try damage { txn in try txn.put([1, 2, 3], forKey: MetaKey.contextIndexThrough, in: log.tables.meta) }
        #expect(try problems().first?.hasPrefix("meta contextIndexThrough") == true)
        #expect(throws: LogError.self) { try readBob() }
        try damage { txn in try txn.put(bigEndianBytes(head), forKey: MetaKey.contextIndexThrough, in: log.tables.meta) }
        #expect(try problems().isEmpty)
    }

    @Test("purge removes the rows through its point and readers start after it; compaction moves events, not rows; replay --into and vacuum carry the index")
    func purgeCompactionReplay() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        try Self.populate(log, count: Self.transactions)
        var request = CompactionRequest(before: UInt64(Self.transactions) * 3 / 4)
        request.eventsPerFrame = 8
        _ = try log.compact(request)
        #expect(try Self.indexed(log) == Self.scanned(log))
        let point = UInt64(Self.transactions / 3)
        _ = try log.purge(through: point, author: "janitor")
        #expect(try Self.rows(log).allSatisfy { $0.sequence > point })
        #expect(try Self.rows(log).count == Int(try log.head - point))
        #expect(try Self.indexed(log) == Self.scanned(log, after: point))
        #expect(try log.verify().problems.isEmpty)
        // A row left at or before the purge point (an older Strata's purge) is ignored.
        let table = try #require(log.tables.contexts)
        try log.environment.write { txn in
            try txn.put([], forKey: ContextIndex.key(ContextIndex.pairHash(author: "alice", contextName: "editor"), 2), in: table)
        }
        #expect(try Self.indexed(log) == Self.scanned(log, after: point))
        #expect(try log.verify().problems.isEmpty)

        let copy = dir.file("copy")
        _ = try log.replay(through: try log.head - 3, into: copy)
        let expected: [String: [UInt64]]
        do {
            let replayed = try EventLog(openingExistingAt: copy)
            #expect(try Self.through(replayed) == replayed.head)
            expected = try Self.scanned(replayed, after: point)
            #expect(try Self.indexed(replayed) == expected)
            #expect(try replayed.verify().problems.isEmpty)
        }
        _ = try EventLog.vacuum(path: copy)
        let vacuumed = try EventLog(openingExistingAt: copy)
        #expect(try Self.through(vacuumed) == vacuumed.head)
        #expect(try Self.rows(vacuumed).count == Int(try vacuumed.head - point))
        #expect(try Self.indexed(vacuumed) == expected)
    }
}
