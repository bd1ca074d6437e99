import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// The store's bookkeeping numbers (head, compaction and purge points, purge marker, undo
/// retention) set to values that can't be right — past the log, at the top of UInt64 —
/// give errors or answers from every read, verify and maintenance step, never a trap; the
/// store reopens; restoring the number heals it.
@Suite("Event log: nonsense bookkeeping numbers")
struct MetaCorruptionTests {
    @Test("each meta number at 0, past the log and near UInt64.max: reads, verify, compaction and reopening never trap")
    func nonsenseMetaNumbers() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store")
        do {
            let log = try populatedLog(dir, transactions: 80)
            var request = CompactionRequest(before: 31)
            request.eventsPerFrame = 8
            try log.compact(request)
        }
        let keys = [MetaKey.head, MetaKey.compactedThrough, MetaKey.purgedThrough, MetaKey.purgeMarker, MetaKey.undoRetention]
        let values: [UInt64] = [0, 1, 30, 79, 81, 1 << 40, 1 << 63, .max - 1, .max]
        let member = StoredObjectID(entity: "Member", primaryKey: 2)
        for key in keys {
            for value in values {
                let original: [UInt8]? = try {
                    let log = try EventLog(openingExistingAt: path, readOnly: false)
                    return try log.environment.write { txn in
                        let old = try txn.value(forKey: key, in: log.tables.meta)
                        try txn.put(bigEndianBytes(value), forKey: key, in: log.tables.meta)
                        return old
                    }
                }()
                // Reopen with the number in place, then everything a reader or a
                // maintainer does: errors are fine.
                if let log = try? EventLog(openingExistingAt: path, readOnly: false) {
                    _ = try? log.read { reader in try reader.event(5) }
                    _ = try? log.read { reader in try reader.event(50) }
                    _ = try? log.read { reader in try reader.forEachEvent { _ in .next } }
                    _ = try? log.read { reader in try reader.forEachEvent(among: [3, 40, 79]) { _ in .next } }
                    _ = try? log.read { reader in try reader.state(asOf: 40) }
                    _ = try? log.read { reader in try reader.object(member, asOf: 10) }
                    _ = try? log.read { reader in try reader.forEachVersion(of: member) { _, _ in .next } }
                    _ = try? log.read { reader in try reader.history(ofEntities: ["Member"], after: 0, through: .max, budget: 1000) }
                    _ = try? log.verify()
                    var dry = CompactionRequest()
                    dry.dryRun = true
                    _ = try? log.compact(dry)
                    _ = try? log.metadata
                }
                // Writes, on a copy: a commit and a purge.
                let copy = dir.file("copy")
                try? FileManager.default.removeItem(atPath: copy)
                try FileManager.default.copyItem(atPath: path, toPath: copy)
                if let log = try? EventLog(openingExistingAt: copy, readOnly: false) {
                    var draft = TransactionDraft(author: "fuzz")
                    draft.insert("Member", values: ["name": s("late"), "age": i(30), "email": s("late@x.org")])
                    _ = try? log.commit(draft)
                    _ = try? log.purge(through: 10, author: "fuzz")
                    _ = try? log.compact(CompactionRequest())
                    _ = try? log.verify()
                }
                let log = try EventLog(openingExistingAt: path, readOnly: false)
                try log.environment.write { txn in
                    if let original { try txn.put(original, forKey: key, in: log.tables.meta) } else { _ = try txn.delete(key: key, in: log.tables.meta) }
                }
                #expect(try log.verify().problems.isEmpty, "\(String(decoding: key, as: UTF8.self)) = \(value), restored")
            }
        }
    }
}
