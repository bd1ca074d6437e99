import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// The scaling review of `strata log` and `strata replay --object`: with a long log and an
/// object touched by few of its transactions, these read only the transactions that touched
/// it. The tests check the answers are the same as a full walk gives; the size comes from
/// STRATA_SCALE_LOG_EVENTS (default 300). With STRATA_SCALE_LOG_TIMING set, the commands'
/// wall-clock times are printed (never asserted).
@Suite("scaling: strata log and replay on a long log")
struct ScaleLogCommandTests {
    static var eventCount: Int {
        ProcessInfo.processInfo.environment["STRATA_SCALE_LOG_EVENTS"].flatMap { Int($0) }.map { max($0, 20) } ?? 300
    }

    /// A store of `count` transactions: 1 inserts Player/p1 (the rare one) and Player/p2 (the
    /// busy one); every later one updates p2's age, and every 50th also p1's rating. Authors
    /// alternate alice/bob; the first half is compacted.
    struct LongStore {
        let directory: TemporaryDirectory
        let path: String
        let storeUUID: UUID
        let rareSequences: [UInt64]
        let count: Int

        func uri(_ key: UInt64) -> String { "x-strata://\(storeUUID.uuidString)/Player/p\(key)" }
    }

    static func makeLongStore(count: Int) throws -> LongStore {
        let directory = try TemporaryDirectory("strata-scale-log")
        let path = directory.file("Long.strata")
        var configuration = EventLog.Configuration()
        configuration.initialMapSize = 64 << 20
        let base = Date(timeIntervalSince1970: 1_767_225_600)
        var rare: [UInt64] = []
        let uuid: UUID
        do {
            let log = try EventLog(path: path, model: try leagueModel(), configuration: configuration)
            uuid = log.storeUUID
            var draft = TransactionDraft(author: "alice", contextName: "editor")
            draft.timestamp = base
            let a = draft.insert("Player", values: ["name": str("Rare"), "rating": .attribute(.double(0))])
            let b = draft.insert("Player", values: ["name": str("Busy"), "age": .attribute(.int32(0))])
            let result = try log.commit(draft)
            let p1 = try required(result.permanentID(for: a))
            let p2 = try required(result.permanentID(for: b))
            rare.append(1)
            for n in 2...count {
                var draft = TransactionDraft(author: n % 2 == 0 ? "alice" : "bob", contextName: "editor")
                draft.timestamp = base.addingTimeInterval(Double(n))
                draft.update(.stored(p2), values: ["age": .attribute(.int32(Int32(n % 1000)))])
                if n % 50 == 0 {
                    draft.update(.stored(p1), values: ["rating": .attribute(.double(Double(n)))])
                    rare.append(UInt64(n))
                }
                _ = try log.commit(draft)
            }
            try log.compact(CompactionRequest(before: UInt64(count / 2)))
        }
        return LongStore(directory: directory, path: path, storeUUID: uuid, rareSequences: rare, count: count)
    }

    static func timed(_ label: String, _ body: () throws -> ProcessResult) rethrows -> ProcessResult {
        let start = Date()
        let result = try body()
        if ProcessInfo.processInfo.environment["STRATA_SCALE_LOG_TIMING"] != nil {
            print("scale-log timing \(label) events=\(eventCount): \(String(format: "%.3f", Date().timeIntervalSince(start))) s")
        }
        return result
    }

    static func sequences(_ ndjson: String) throws -> [UInt64] {
        try ndjson.split(separator: "\n").map { line in
            let object = try required(try parseJSON(String(line)) as? [String: Any])
            return UInt64(try required(object["sequence"] as? Int))
        }
    }

    @Test("log --object lists exactly the transactions that touched it, compacted and raw, within --from/--to")
    func logObject() throws {
        let store = try Self.makeLongStore(count: Self.eventCount)
        let all = try Self.timed("log --object") { try strata("log", store.path, "--object", store.uri(1), "--format", "ndjson") }
        #expect(all.status == 0, "\(all.standardError)")
        #expect(try Self.sequences(all.standardOutput) == store.rareSequences)

        let from = UInt64(store.count / 4), to = UInt64(3 * store.count / 4)
        let some = try strata(
            "log", store.path, "--object", store.uri(1), "--from", "\(from)", "--to", "\(to)", "--format", "ndjson")
        #expect(some.status == 0, "\(some.standardError)")
        #expect(try Self.sequences(some.standardOutput) == store.rareSequences.filter { $0 >= from && $0 <= to })

        // With the author filter too: the rare sequences (multiples of 50, and 1) are alice's.
        let bob = try strata("log", store.path, "--object", store.uri(1), "--author", "bob", "--format", "ndjson")
        #expect(bob.status == 0, "\(bob.standardError)")
        #expect(bob.standardOutput.isEmpty)
        #expect(bob.standardError.contains("no transactions match"))
    }

    @Test("log --author and --from DATE skip events by their header alone and list the same transactions")
    func logHeaderFilters() throws {
        let store = try Self.makeLongStore(count: Self.eventCount)
        let bob = try Self.timed("log --author") { try strata("log", store.path, "--author", "bob", "--format", "ndjson") }
        #expect(bob.status == 0, "\(bob.standardError)")
        #expect(try Self.sequences(bob.standardOutput) == (1...UInt64(store.count)).filter { $0 % 2 == 1 && $0 > 1 })

        // Timestamps are base + n seconds (1 at base): --from a date picks n ≥ that offset.
        let cut = store.count - 10
        let date = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: 1_767_225_600 + Double(cut)))
        let late = try strata("log", store.path, "--from", date, "--author", "alice", "--format", "ndjson")
        #expect(late.status == 0, "\(late.standardError)")
        #expect(try Self.sequences(late.standardOutput) == (UInt64(cut)...UInt64(store.count)).filter { $0 % 2 == 0 })
    }

    @Test("replay --object (blame) shows every transaction that touched it with its values, across segments and raw events")
    func blame() throws {
        let store = try Self.makeLongStore(count: Self.eventCount)
        let result = try Self.timed("replay --object") { try strata("replay", store.path, "--object", store.uri(1)) }
        #expect(result.status == 0, "\(result.standardError)")
        let out = result.standardOutput
        #expect(out.contains("\(store.uri(1)) through sequence \(store.count): \(store.rareSequences.count) transaction"))
        let headers = out.split(separator: "\n").filter { $0.hasPrefix("#") }.map { String($0.prefix { $0 != " " }) }
        #expect(headers == store.rareSequences.map { "#\($0)" })
        let last = try required(store.rareSequences.last)
        #expect(out.contains("  * rating  \(last == 1 ? "0.0" : "\(Double(last))")"))
    }

    static func uri(_ log: EventLog, _ id: StoredObjectID) -> String {
        "x-strata://\(log.storeUUID.uuidString)/\(id.entity)/p\(id.primaryKey)"
    }

    static var bulkObjectCount: Int {
        ProcessInfo.processInfo.environment["STRATA_SCALE_LOG_OBJECTS"].flatMap { Int($0) }.map { max($0, 10) } ?? 4200
    }

    /// 1 inserts `count` players (age 0); 2 sets every one's age to its key; 3 deletes every
    /// tenth and inserts 5 more; 4 sets the first one's name; 5 sets every other one's rating;
    /// 6 sets a few ratings again. More than one batch of
    /// `export --at` by default, so a batch boundary is crossed.
    static func makeBulkStore(count: Int) throws -> (TemporaryDirectory, String) {
        let directory = try TemporaryDirectory("strata-scale-bulk")
        let path = directory.file("Bulk.strata")
        var configuration = EventLog.Configuration()
        configuration.initialMapSize = 256 << 20
        let log = try EventLog(path: path, model: try leagueModel(), configuration: configuration)
        var draft = TransactionDraft(author: "bulk", contextName: "import")
        let drafts = (1...count).map { draft.insert("Player", values: ["name": str("player \($0)"), "age": .attribute(.int32(0))]) }
        let result = try log.commit(draft)
        let ids = try drafts.map { try required(result.permanentID(for: $0)) }
        draft = TransactionDraft(author: "bulk", contextName: "import")
        for id in ids { draft.update(.stored(id), values: ["age": .attribute(.int32(Int32(id.primaryKey % 100_000)))]) }
        _ = try log.commit(draft)
        draft = TransactionDraft(author: "bulk", contextName: "import")
        for id in ids where id.primaryKey % 10 == 0 { draft.delete(.stored(id)) }
        for n in 1...5 { _ = draft.insert("Player", values: ["name": str("late \(n)")]) }
        _ = try log.commit(draft)
        draft = TransactionDraft(author: "bulk", contextName: "import")
        draft.update(.stored(ids[0]), values: ["name": str("renamed")])
        _ = try log.commit(draft)
        // 5: another bulk update, of every other one; 6: a small one of a few.
        draft = TransactionDraft(author: "bulk", contextName: "import")
        for id in ids where id.primaryKey % 10 != 0 && id.primaryKey % 2 == 1 {
            draft.update(.stored(id), values: ["rating": .attribute(.double(Double(id.primaryKey)))])
        }
        _ = try log.commit(draft)
        draft = TransactionDraft(author: "bulk", contextName: "import")
        for id in ids.prefix(300) where id.primaryKey % 10 != 0 && id.primaryKey % 3 == 0 {
            draft.update(.stored(id), values: ["rating": .attribute(.double(-1))])
        }
        _ = try log.commit(draft)
        return (directory, path)
    }

    @Test("export --at, replay --to and --diff after a bulk update agree with the store's own as-of state")
    func bulkAsOf() throws {
        let count = Self.bulkObjectCount
        let (directory, path) = try Self.makeBulkStore(count: count)
        _ = directory
        let log = try EventLog(path: path, model: try leagueModel())
        for at in [UInt64(1), 2, 3, 4, 5] {
            let expected = try log.read { reader in try reader.state(asOf: at) }
            // The library's batch answer, for every key ever used, equals the whole image.
            let ids = (1...UInt64(count + 5)).map { StoredObjectID(entity: "Player", primaryKey: $0) }
            let batch = try log.read { reader in try reader.objects(ids, asOf: at) }
            #expect(batch == expected.objects(ofEntity: "Player"), "objects(_:asOf: \(at))")
            // In small batches, keeping the large transactions from one batch to the next
            // (bulk ones kept, small ones read between them): the same answer.
            var batched: [StoredObjectID: [String: LogValue]] = [:]
            try log.read { reader in
                var kept: [UInt64: TransactionEvent] = [:]
                var start = 0
                while start < ids.count {
                    let batch = ids[start..<min(start + 97, ids.count)]
                    batched.merge(try reader.objects(batch, asOf: at, keeping: &kept)) { a, _ in a }
                    start += 97
                }
            }
            #expect(batched == expected.objects(ofEntity: "Player"), "batched objects(_:asOf: \(at))")
            let one = try log.read { reader in try reader.object(ids[9], asOf: at) }
            #expect(one == expected.objects[ids[9]])

            let export = try Self.timed("export --at \(at) objects=\(count)") {
                try strata("export", path, "--at", "\(at)", "--format", "ndjson", "--entity", "Player")
            }
            #expect(export.status == 0, "\(export.standardError)")
            let lines = export.standardOutput.split(separator: "\n")
            #expect(lines.count == expected.objects(ofEntity: "Player").count)
            var ages: [String: Int] = [:]
            for line in lines {
                let object = try required(try parseJSON(String(line)) as? [String: Any])
                let values = try required(object["values"] as? [String: Any])
                ages[try required(object["uri"] as? String)] = values["age"] as? Int
            }
            for (id, values) in expected.objects where id.entity == "Player" {
                guard case .attribute(.int32(let age))? = values["age"] else { continue }
                #expect(ages[Self.uri(log, id)] == Int(age), "\(id) at \(at)")
            }

            let summary = try strata("replay", path, "--to", "\(at)", "--format", "json")
            let counts = try required(try parseJSON(summary.standardOutput) as? [String: Any])
            #expect((counts["objects"] as? [String: Int])?["Player"] == expected.objects(ofEntity: "Player").count)
        }
        let diff = try Self.timed("replay --diff 1..3 objects=\(count)") { try strata("replay", path, "--diff", "1..3") }
        #expect(diff.status == 0, "\(diff.standardError)")
        // Every player changed (age), a tenth were deleted, five inserted; p1 counts once.
        #expect(diff.standardOutput.contains("\n\(count + 5) objects differ"))
        #expect(diff.standardOutput.contains("- \(Self.uri(log, StoredObjectID(entity: "Player", primaryKey: 10)))"))
        #expect(diff.standardOutput.contains("+ \(Self.uri(log, StoredObjectID(entity: "Player", primaryKey: UInt64(count + 1))))"))
    }
}
