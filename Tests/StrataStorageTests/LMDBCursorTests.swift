import Foundation
import StrataStorage
import StrataTestSupport
import Testing

@Suite("LMDB cursors and ranges")
struct LMDBCursorTests {
    /// Keys "k00" … "k19" with values "v00" … "v19".
    func filled() throws -> (TemporaryDirectory, LMDBEnvironment, LMDBDatabase) {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir, [DatabaseDescriptor("t"), DatabaseDescriptor("dups", flags: .duplicateSort)])
        let db = try env.database(named: "t")
        try env.write { (txn: borrowing LMDBTransaction) throws in
            for i in 0..<20 {
                let n = String(format: "%02d", i)
                try txn.put(bytes("v\(n)"), forKey: bytes("k\(n)"), in: db)
            }
        }
        return (dir, env, db)
    }

    func keys(_ env: LMDBEnvironment, _ db: LMDBDatabase, _ range: KeyRange, reverse: Bool = false) throws -> [String] {
        try env.read { (txn: borrowing LMDBTransaction) throws in
            var out: [String] = []
            try txn.forEach(in: db, range: range, reverse: reverse) { key, _ in
                out.append(string(key))
                return .next
            }
            return out
        }
    }

    @Test("forward ranges honour inclusive and exclusive bounds")
    func forwardRanges() throws {
        let (directory, env, db) = try filled()
        defer { withExtendedLifetime(directory) {} }
        #expect(try keys(env, db, .all).count == 20)
        #expect(try keys(env, db, .halfOpen(bytes("k05"), bytes("k08"))) == ["k05", "k06", "k07"])
        #expect(try keys(env, db, .closed(bytes("k05"), bytes("k08"))) == ["k05", "k06", "k07", "k08"])
        let exclusiveLower = KeyRange(lowerBound: bytes("k05"), includesLowerBound: false, upperBound: bytes("k07"))
        #expect(try keys(env, db, exclusiveLower) == ["k06"])
        #expect(try keys(env, db, .from(bytes("k175"))) == ["k18", "k19"])
        #expect(try keys(env, db, .prefix(bytes("k1"))).count == 10)
        #expect(try keys(env, db, .exactly(bytes("k03"))) == ["k03"])
        #expect(try keys(env, db, .halfOpen(bytes("z"), bytes("zz"))).isEmpty)
    }

    @Test("backward ranges honour the same bounds, from the top")
    func backwardRanges() throws {
        let (directory, env, db) = try filled()
        defer { withExtendedLifetime(directory) {} }
        #expect(try keys(env, db, .all, reverse: true).first == "k19")
        #expect(try keys(env, db, .halfOpen(bytes("k05"), bytes("k08")), reverse: true) == ["k07", "k06", "k05"])
        #expect(try keys(env, db, .closed(bytes("k05"), bytes("k08")), reverse: true) == ["k08", "k07", "k06", "k05"])
        #expect(try keys(env, db, .halfOpen(bytes("k055"), bytes("k075")), reverse: true) == ["k07", "k06"])
        #expect(try keys(env, db, .from(bytes("k18")), reverse: true) == ["k19", "k18"])
        #expect(try keys(env, db, .halfOpen(bytes("a"), bytes("k01")), reverse: true) == ["k00"])
        #expect(try keys(env, db, .closed(bytes("k25"), bytes("k99")), reverse: true).isEmpty)
    }

    @Test("iteration stops when the body says so")
    func earlyStop() throws {
        let (directory, env, db) = try filled()
        defer { withExtendedLifetime(directory) {} }
        let firstThree: [String] = try env.read { (txn: borrowing LMDBTransaction) throws in
            var out: [String] = []
            try txn.forEach(in: db) { key, _ in
                out.append(string(key))
                return out.count == 3 ? .stop : .next
            }
            return out
        }
        #expect(firstThree == ["k00", "k01", "k02"])
    }

    @Test("a cursor seeks exactly and at-least, and moves both ways")
    func seekAndMove() throws {
        let (directory, env, db) = try filled()
        defer { withExtendedLifetime(directory) {} }
        try env.read { (txn: borrowing LMDBTransaction) throws in
            try txn.withCursor(on: db) { (cursor: borrowing LMDBCursor) throws in
                #expect(try cursor.withCurrent { _, _ in true } == nil, "a fresh cursor is on no entry")
                #expect(try cursor.seek(exactly: bytes("k10")))
                #expect(try cursor.currentValue() == bytes("v10"))
                #expect(try !cursor.seek(exactly: bytes("k105")))
                #expect(try cursor.seek(atLeast: bytes("k105")))
                #expect(try cursor.currentKey() == bytes("k11"))
                #expect(try cursor.move(.previous))
                #expect(try cursor.currentKey() == bytes("k10"))
                #expect(try cursor.move(.last))
                #expect(try cursor.currentKey() == bytes("k19"))
                #expect(try !cursor.move(.next))
                #expect(try cursor.move(.first))
                #expect(try cursor.currentKey() == bytes("k00"))
                #expect(try !cursor.seek(atLeast: bytes("z")))
            }
        }
    }

    @Test("duplicates: sorted values per key, counts, dup moves, reverse order, single-pair delete")
    func duplicates() throws {
        let (directory, env, _) = try filled()
        defer { withExtendedLifetime(directory) {} }
        let dups = try env.database(named: "dups")
        try env.write { (txn: borrowing LMDBTransaction) throws in
            for value in ["c", "a", "b"] { try txn.put(bytes(value), forKey: bytes("x"), in: dups) }
            for value in ["2", "1"] { try txn.put(bytes(value), forKey: bytes("y"), in: dups) }
            let exists = #expect(throws: LMDBError.self) {
                try txn.put(bytes("a"), forKey: bytes("x"), in: dups, flags: .noDuplicateData)
            }
            #expect(exists?.code == .keyExists)
        }
        let forward: [String] = try env.read { (txn: borrowing LMDBTransaction) throws in
            var out: [String] = []
            try txn.forEach(in: dups) { key, value in
                out.append(string(key) + string(value))
                return .next
            }
            return out
        }
        #expect(forward == ["xa", "xb", "xc", "y1", "y2"])
        let backward: [String] = try env.read { (txn: borrowing LMDBTransaction) throws in
            var out: [String] = []
            try txn.forEach(in: dups, range: .exactly(bytes("x")), reverse: true) { key, value in
                out.append(string(key) + string(value))
                return .next
            }
            return out
        }
        #expect(backward == ["xc", "xb", "xa"])
        try env.read { (txn: borrowing LMDBTransaction) throws in
            #expect(try txn.count(in: dups, range: .exactly(bytes("x"))) == 3)
            try txn.withCursor(on: dups) { (cursor: borrowing LMDBCursor) throws in
                #expect(try cursor.seek(exactly: bytes("x")))
                #expect(try cursor.duplicateCount() == 3)
                #expect(try cursor.move(.lastDuplicate))
                #expect(try cursor.currentValue() == bytes("c"))
                #expect(try !cursor.move(.nextDuplicate))
                #expect(try cursor.move(.nextKey))
                #expect(try cursor.currentKey() == bytes("y"))
                #expect(try cursor.seek(key: bytes("x"), atLeastValue: bytes("bb")))
                #expect(try cursor.currentValue() == bytes("c"))
                #expect(try cursor.seek(key: bytes("y"), value: bytes("2")))
                #expect(try !cursor.seek(key: bytes("y"), value: bytes("3")))
            }
        }
        #expect(try env.write { try $0.delete(key: bytes("x"), value: bytes("b"), in: dups) })
        #expect(try !env.write { try $0.delete(key: bytes("x"), value: bytes("b"), in: dups) })
        #expect(try env.read { try $0.count(in: dups, range: .exactly(bytes("x"))) } == 2)
    }

    @Test("cursor writes: put, delete the current entry, delete all duplicates")
    func cursorWrites() throws {
        let (directory, env, db) = try filled()
        defer { withExtendedLifetime(directory) {} }
        let dups = try env.database(named: "dups")
        try env.write { (txn: borrowing LMDBTransaction) throws in
            try txn.withCursor(on: db) { (cursor: borrowing LMDBCursor) throws in
                try cursor.put(bytes("new"), forKey: bytes("k99"))
                #expect(try cursor.currentKey() == bytes("k99"))
                #expect(try cursor.seek(exactly: bytes("k00")))
                try cursor.deleteCurrent()
            }
            for value in ["1", "2", "3"] { try txn.put(bytes(value), forKey: bytes("d"), in: dups) }
            try txn.withCursor(on: dups) { (cursor: borrowing LMDBCursor) throws in
                #expect(try cursor.seek(exactly: bytes("d")))
                try cursor.deleteCurrent(allDuplicates: true)
            }
        }
        try env.read { (txn: borrowing LMDBTransaction) throws in
            #expect(try txn.value(forKey: bytes("k99"), in: db) == bytes("new"))
            #expect(try txn.value(forKey: bytes("k00"), in: db) == nil)
            #expect(try txn.count(in: dups) == 0)
        }
    }

    @Test("compareKeys uses the database's order, including reverse-key databases")
    func keyOrder() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir, [DatabaseDescriptor("plain"), DatabaseDescriptor("rev", flags: .reverseKey)])
        let plain = try env.database(named: "plain")
        let rev = try env.database(named: "rev")
        try env.read { (txn: borrowing LMDBTransaction) throws in
            #expect(txn.compareKeys(bytes("ab"), bytes("ba"), in: plain) < 0)
            // Reverse-key compares from the last byte: "b" < "a" is false, so "ab" > "ba".
            #expect(txn.compareKeys(bytes("ab"), bytes("ba"), in: rev) > 0)
        }
    }
}
