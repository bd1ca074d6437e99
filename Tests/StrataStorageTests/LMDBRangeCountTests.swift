import Foundation
import StrataStorage
import StrataTestSupport
import Testing

@Suite("LMDB range counts")
struct LMDBRangeCountTests {
    @Test("count(in:range:) counts what forEach visits, for every kind of bound, duplicates included")
    func countsMatchIteration() throws {
        let dir = try TemporaryDirectory()
        let env = try makeEnvironment(dir, [DatabaseDescriptor("t"), DatabaseDescriptor("dups", flags: .duplicateSort)])
        let db = try env.database(named: "t")
        let dups = try env.database(named: "dups")
        try env.write { (txn: borrowing LMDBTransaction) throws in
            for i in 0..<20 {
                let n = String(format: "%02d", i)
                try txn.put(bytes("v"), forKey: bytes("k\(n)"), in: db)
                for d in 0..<(i % 3 + 1) { try txn.put(bytes("d\(d)"), forKey: bytes("k\(n)"), in: dups) }
            }
        }
        let ranges: [KeyRange] = [
            .all, .halfOpen(bytes("k05"), bytes("k08")), .closed(bytes("k05"), bytes("k08")),
            KeyRange(lowerBound: bytes("k05"), includesLowerBound: false, upperBound: bytes("k07")),
            KeyRange(lowerBound: bytes("k05"), includesLowerBound: false, upperBound: bytes("k07"), includesUpperBound: true),
            .from(bytes("k175")), .prefix(bytes("k1")), .exactly(bytes("k03")), .halfOpen(bytes("z"), bytes("zz")),
            .closed(bytes("a"), bytes("b")), KeyRange(lowerBound: nil, upperBound: bytes("k02")),
        ]
        for database in [db, dups] {
            for range in ranges {
                let (counted, visited) = try env.read { (txn: borrowing LMDBTransaction) throws -> (Int, Int) in
                    var visited = 0
                    try txn.forEach(in: database, range: range) { _, _ in
                        visited += 1
                        return .next
                    }
                    return (try txn.count(in: database, range: range), visited)
                }
                #expect(counted == visited, "\(database) \(range)")
            }
        }
    }
}
