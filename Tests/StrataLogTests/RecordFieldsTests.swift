import Foundation
import StrataLog
import StrataStorage
import StrataTestSupport
import Testing

@Suite("Reading records by property code")
struct RecordFieldsTests {
    @Test("fields and forEachFields give what object and forEachObject give, for every live object")
    func fieldsEqualObjects() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 60)
        try log.read { (reader: borrowing LogReader) throws in
            var objects: [StoredObject] = []
            try reader.forEachObject(of: "Member") { object in
                objects.append(object)
                return .next
            }
            #expect(objects.count > 5)
            var scanned: [StoredObject] = []
            try reader.forEachFields(of: "Member") { fields in
                scanned.append(fields.object)
                return .next
            }
            #expect(scanned == objects)
            // By ID, in a shuffled order, with an ID that doesn't exist left out.
            var ids = objects.map(\.id).reversed() + [StoredObjectID(entity: "Member", primaryKey: 999_999)]
            ids.swapAt(0, ids.count / 2)
            var read: [StoredObject] = []
            try reader.forEachFields(Array(ids)) { read.append($0.object) }
            #expect(read.sorted { $0.id < $1.id } == objects)
            for object in objects { #expect(try reader.fields(object.id)?.object == object) }
            #expect(try reader.fields(StoredObjectID(entity: "Member", primaryKey: 999_999)) == nil)
        }
    }

    @Test("a damaged record is an error naming the record, whichever way it is read")
    func damagedRecordNamed() throws {
        let dir = try TemporaryDirectory()
        let log = try populatedLog(dir, transactions: 30)
        let victim = try #require(try log.read { (reader: borrowing LogReader) throws -> StoredObjectID? in
            var first: StoredObjectID?
            try reader.forEachObject(of: "Member") { object in
                first = object.id
                return .stop
            }
            return first
        })
        // Cut the last byte off the victim's record behind the log's back.
        let env = try LMDBEnvironment(path: dir.file("store"), databases: [DatabaseDescriptor("state"), DatabaseDescriptor("counters")])
        let state = try env.database(named: "state")
        try env.write { txn in
            var target: ([UInt8], [UInt8])?
            try txn.forEach(in: state) { key, value in
                let k = key.withUnsafeBytes { Array($0) }
                let pk = k.count == 10 ? k[2...].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } : 0
                if pk == victim.primaryKey && target == nil {
                    target = (k, value.withUnsafeBytes { Array($0) })
                    return .stop
                }
                return .next
            }
            let (key, value) = try #require(target)
            try txn.put(Array(value.dropLast()), forKey: key, in: state)
        }
        let name = "record Member/p\(victim.primaryKey)"
        func expectNamed(_ read: () throws -> Void) {
            do {
                try read()
                Issue.record("reading the damaged record succeeded")
            } catch let error as LogError {
                #expect("\(error)".contains(name), "\(error)")
            } catch {
                Issue.record("unexpected error \(error)")
            }
        }
        try log.read { (reader: borrowing LogReader) throws in
            expectNamed { _ = try reader.object(victim) }
            expectNamed { _ = try reader.fields(victim) }
            expectNamed { try reader.forEachFields([victim]) { _ in } }
            expectNamed { try reader.forEachFields(of: "Member") { _ in .next } }
        }
    }
}
