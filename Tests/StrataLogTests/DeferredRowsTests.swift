import Foundation
@testable import StrataLog
import StrataModel
import StrataTestSupport
import Testing

@Suite("Deferred rows: key order")
struct DeferredRowsTests {
    /// LMDB's default order: bytewise, a proper prefix first.
    static func lmdbOrder(_ a: [UInt8], _ b: [UInt8]) -> Bool { a.lexicographicallyPrecedes(b) }

    static func sortedKeys(_ keys: [[UInt8]]) -> [[UInt8]] {
        var rows = DeferredRows(expectedObjects: keys.count)
        for (position, key) in keys.enumerated() {
            key.withUnsafeBytes { key in
                withUnsafeBytes(of: UInt32(position)) { rows.add(key, value: $0) }
            }
        }
        rows.sort()
        var result: [[UInt8]] = []
        rows.forEach { _, key, value in
            result.append(Array(key))
            // Each row keeps its own value.
            #expect(Int(value.loadUnaligned(as: UInt32.self)) < keys.count)
        }
        return result
    }

    @Test("sorts as LMDB orders keys: shared prefixes, ties on the first eight bytes, every length up to 40, duplicates, sorted and reversed input")
    func sortMatchesLMDBOrder() {
        var generator = SeededGenerator(seed: 0x524F_5753)
        for round in 0..<300 {
            let count = Int.random(in: 0...400, using: &generator)
            // Few distinct bytes and shared prefixes make ties at every position likely.
            let prefix = (0..<Int.random(in: 0...12, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            var keys: [[UInt8]] = (0..<count).map { _ in
                let head = Bool.random(using: &generator) ? prefix : Array(prefix.prefix(Int.random(in: 0...prefix.count, using: &generator)))
                return head + (0..<Int.random(in: 0...28, using: &generator)).map { _ in [0, 1, 0x7F, 0x80, 0xFF].randomElement(using: &generator) ?? 0 }
            }
            if round % 10 == 1 { keys.sort(by: Self.lmdbOrder) }
            if round % 10 == 2 { keys.sort { Self.lmdbOrder($1, $0) } }
            if round % 10 == 3, !keys.isEmpty { keys += keys.prefix(count / 2) }
            #expect(Self.firstDifference(Self.sortedKeys(keys), keys.sorted(by: Self.lmdbOrder)) == nil, "round \(round)")
        }
    }

    @Test("either side of the size where the comparison sort gives way to the radix sort, keys sharing their first 16 bytes or not")
    func aroundTheRadixThreshold() {
        var generator = SeededGenerator(seed: 0x4645_5752)
        for count in [2, 3, DeferredRows.fewRows - 1, DeferredRows.fewRows, DeferredRows.fewRows + 1, 4 * DeferredRows.fewRows] {
            for shared in [0, 16, 20] {
                let prefix = (0..<shared).map { _ in UInt8.random(in: 0...255, using: &generator) }
                let keys: [[UInt8]] = (0..<count).map { _ in prefix + (0..<Int.random(in: 0...12, using: &generator)).map { _ in UInt8.random(in: 0...3, using: &generator) } }
                #expect(Self.firstDifference(Self.sortedKeys(keys), keys.sorted(by: Self.lmdbOrder)) == nil, "\(count) rows, \(shared) shared bytes")
            }
        }
    }

    @Test("object keys (entity code, then primary key) come out in primary key order across the radix passes")
    func objectKeys() {
        var generator = SeededGenerator(seed: 7)
        let keys: [[UInt8]] = (0..<5_000).map { _ in
            var key: [UInt8] = []
            ObjectKey(entity: UInt16.random(in: 1...3, using: &generator), primaryKey: UInt64.random(in: 1...UInt64(1) << 40, using: &generator))
                .append(to: &key)
            return key
        }
        #expect(Self.firstDifference(Self.sortedKeys(keys), keys.sorted(by: Self.lmdbOrder)) == nil)
    }

    /// Where `got` and `expected` first differ (the message stays short), nil if nowhere.
    static func firstDifference(_ got: [[UInt8]], _ expected: [[UInt8]]) -> String? {
        guard got != expected else { return nil }
        let position = zip(got, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(got.count, expected.count)
        let found = position < got.count ? "\(got[position])" : "nothing"
        let wanted = position < expected.count ? "\(expected[position])" : "nothing"
        return "row \(position) of \(expected.count): \(found), expected \(wanted)"
    }
}

@Suite("Deferred rows: a commit larger than the buffer")
struct DeferredFlushTests {
    @Test("a commit whose inserts buffer more than the threshold puts them part way, and reads, indexes and uniqueness are as for a small one")
    func largeCommit() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel()) { $0.initialMapSize = 256 << 20 }
        let big = String(repeating: "x", count: 1 << 20)
        let count = DeferredWrites.flushThreshold / (1 << 20) + 6
        func draft(duplicateLast: Bool) -> TransactionDraft {
            var draft = TransactionDraft()
            for n in 0..<count {
                let email = duplicateLast && n == count - 1 ? "m0@example.com" : "m\(n)@example.com"
                _ = draft.insert("Member", values: ["name": s("\(n)" + big), "email": s(email), "age": i(Int32(n))])
            }
            return draft
        }
        // The last member's email is the first's, which was put before the threshold was passed.
        #expect(throws: LogError.self) { try log.commit(draft(duplicateLast: true)) }
        try log.read { (reader: borrowing LogReader) throws in #expect(try reader.count(of: "Member") == 0) }

        try log.commit(draft(duplicateLast: false))
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.count(of: "Member") == count)
            let last = try #require(try reader.object(StoredObjectID(entity: "Member", primaryKey: UInt64(count))))
            #expect(last["email"] == .attribute(.string("m\(count - 1)@example.com")))
            #expect(last["name"] == .attribute(.string("\(count - 1)" + big)))
        }
        #expect(try log.verify().isClean)
    }
}
