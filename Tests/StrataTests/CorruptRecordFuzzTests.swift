import Foundation
import Strata
@testable import StrataLog
import StrataStorage
import StrataTestSupport
import Testing

/// A damaged record in the store's state table — bits flipped, cut short, grown — is never
/// a crash: reading it through the log, a fetch, a fault fired by ID or key-value coding
/// gives an error or a value, `verify` names the damaged entry, and the other records read
/// as before. Size: STRATA_CORRUPTION_ROUNDS (default 150).
@Suite("Corrupt state records are errors, not crashes")
struct CorruptRecordFuzzTests {
    static var model: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Box") {
                    Attribute("i16", .int16)
                    Attribute("i32", .int32).indexed()
                    Attribute("i64", .int64)
                    Attribute("dec", .decimal)
                    Attribute("dbl", .double)
                    Attribute("flt", .float)
                    Attribute("str", .string).indexed()
                    Attribute("flag", .boolean)
                    Attribute("when", .date)
                    Attribute("blob", .binaryData)
                    Attribute("tag", .uuid)
                    Attribute("link", .uri)
                    Relationship("shelf", to: "Shelf", inverse: "boxes")
                    Relationship("friends", to: "Box", inverse: "friends", toMany: true)
                }
                Entity("Shelf") {
                    Attribute("name", .string)
                    Relationship("boxes", to: "Box", inverse: "shelf", toMany: true)
                }
            }
        }
    }

    /// Reads everything a context can read of `ids`: a fetch of every entity with every
    /// property through key-value coding, and each object by ID. Errors are fine; the
    /// number of values read is returned.
    func readEverything(_ coordinator: PersistentStoreCoordinator, _ ids: [ManagedObjectID]) -> Int {
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        return context.performAndWait { (context: isolated ManagedObjectContext) -> Int in
            var read = 0
            for entity in ["Box", "Shelf"] {
                if let objects = try? context.fetch(FetchRequest(entityName: entity)) {
                    for object in objects {
                        for key in object.entity.propertiesByName.keys.sorted() where object.value(forKey: key) != nil { read += 1 }
                    }
                }
            }
            for id in ids {
                guard let object = try? context.existingObject(with: id) else { continue }
                for key in object.entity.propertiesByName.keys.sorted() where object.value(forKey: key) != nil { read += 1 }
                _ = object.committedValues(forKeys: nil)
            }
            return read
        }
    }

    /// A shelf and six boxes with every attribute type, a to-one and a to-many set.
    func boxes(_ coordinator: PersistentStoreCoordinator) async throws -> [ManagedObjectID] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var objects: [ManagedObject] = []
            let shelf = try context.insertNewObject(forEntityName: "Shelf")
            shelf.setValue("top", forKey: "name")
            objects.append(shelf)
            for n in 0..<6 {
                let box = try context.insertNewObject(forEntityName: "Box")
                box.setValue(Int16(n), forKey: "i16")
                box.setValue(Int32(n * 1000), forKey: "i32")
                box.setValue(Int64(n) << 40, forKey: "i64")
                box.setValue(Decimal(string: "\(n).25"), forKey: "dec")
                box.setValue(Double(n) / 3, forKey: "dbl")
                box.setValue(Float(n) / 7, forKey: "flt")
                box.setValue("box number \(n) with a longer name", forKey: "str")
                box.setValue(n % 2 == 0, forKey: "flag")
                box.setValue(Date(timeIntervalSince1970: 1_700_000_000 + Double(n)), forKey: "when")
                box.setValue(Data((0..<(n * 5)).map { UInt8($0) }), forKey: "blob")
                box.setValue(UUID(), forKey: "tag")
                box.setValue(URL(string: "https://example.org/\(n)"), forKey: "link")
                box.setValue(shelf, forKey: "shelf")
                if let previous = objects.last, n > 0 { box.mutableSetValue(forKey: "friends").add(previous) }
                objects.append(box)
            }
            try context.save()
            return objects.map(\.objectID)
        }
    }

    /// The rows of `table`.
    func rows(_ log: EventLog, _ table: LMDBDatabase) throws -> [([UInt8], [UInt8])] {
        try log.environment.read { txn in
            var rows: [([UInt8], [UInt8])] = []
            try txn.forEach(in: table) { key, value in
                rows.append((key.withUnsafeBytes { Array($0) }, value.withUnsafeBytes { Array($0) }))
                return .next
            }
            return rows
        }
    }

    /// `bytes` damaged at random: bits flipped, cut short, grown, or a byte replaced.
    func damage(_ bytes: [UInt8], _ random: inout SeededGenerator) -> [UInt8] {
        var damaged = bytes
        switch random.next() % 4 {
        case 0 where !damaged.isEmpty:
            for _ in 0...(random.next() % 3) {
                let bit = Int(random.next() % UInt64(damaged.count * 8))
                damaged[bit / 8] ^= UInt8(1 << (bit % 8))
            }
        case 1 where !damaged.isEmpty: damaged = Array(damaged.prefix(Int(random.next() % UInt64(damaged.count))))
        case 3 where !damaged.isEmpty: damaged[Int(random.next() % UInt64(damaged.count))] = UInt8(truncatingIfNeeded: random.next())
        default: damaged += (0...(random.next() % 8)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        }
        return damaged
    }

    static var rounds: Int { Int(ProcessInfo.processInfo.environment["STRATA_CORRUPTION_ROUNDS"] ?? "") ?? 150 }

    @Test("flipped, cut and grown state records: errors or values, never a crash; verify names the entry; the rest reads unchanged")
    func fuzzStateRecords() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model)
        let ids = try await boxes(coordinator)
        let log = try #require(coordinator.persistentStores.first).log
        let rows = try rows(log, log.tables.state)
        #expect(rows.count == 7)
        let intact = readEverything(coordinator, ids)
        #expect(intact > 60)
        var random = SeededGenerator(seed: 0xC0FF_EE00)
        for round in 0..<Self.rounds {
            let (key, original) = rows[Int(random.next() % UInt64(rows.count))]
            let damaged = damage(original, &random)
            if damaged == original { continue }
            try log.environment.write { txn in try txn.put(damaged, forKey: key, in: log.tables.state) }
            // Through the log: each read is an answer or an error.
            _ = try? log.read { reader in try reader.currentState() }
            _ = readEverything(coordinator, ids)
            let report = try log.verify()
            #expect(report.problems.contains { $0.location.hasPrefix("state ") }, "round \(round): verify missed the damaged record")
            try log.environment.write { txn in try txn.put(original, forKey: key, in: log.tables.state) }
        }
        #expect(readEverything(coordinator, ids) == intact, "restored, everything reads as before")
        #expect(try log.verify().problems.isEmpty)
    }

    @Test("damaged keys in the index, references, membership, history and counter tables: errors or values, never a crash; verify names the table")
    func fuzzDerivedKeys() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model)
        let ids = try await boxes(coordinator)
        let log = try #require(coordinator.persistentStores.first).log
        let tables = log.tables.projections.filter { $0.0 != "state" }
        let intact = readEverything(coordinator, ids)
        var random = SeededGenerator(seed: 0xBAD_C0DE)
        for round in 0..<Self.rounds {
            let (name, table) = tables[Int(random.next() % UInt64(tables.count))]
            let rows = try rows(log, table)
            guard !rows.isEmpty else { continue }
            let (key, value) = rows[Int(random.next() % UInt64(rows.count))]
            // A damaged key (the row moves, or a stray one appears) or, for counters, value.
            let damagedKey = name == "counters" ? key : damage(key, &random)
            let damagedValue = name == "counters" ? damage(value, &random) : value
            if damagedKey == key && damagedValue == value || damagedKey.isEmpty || damagedKey.count > 500 { continue }
            let replaced = try log.environment.write { txn in
                let existing = try txn.value(forKey: damagedKey, in: table)
                if damagedKey != key { _ = try txn.delete(key: key, in: table) }
                try txn.put(damagedValue, forKey: damagedKey, in: table)
                return existing
            }
            // Queries through the indexes, relationships both ways, faults by ID.
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            context.performAndWait { (context: isolated ManagedObjectContext) in
                for format in ["i32 > 1000", "str BEGINSWITH 'box number 3'", "shelf.name == 'top'", "friends.@count > 0"] {
                    guard let predicate = try? FormatPredicate(format: format) else {
                        Issue.record("\(format) doesn't parse")
                        continue
                    }
                    let request = FetchRequest(
                        entityName: "Box", predicate: predicate, sortDescriptors: [FetchSortDescriptor(key: "i32", ascending: false)])
                    if let found = try? context.fetch(request) {
                        for box in found { _ = box.value(forKey: "friends") }
                    }
                }
            }
            _ = readEverything(coordinator, ids)
            let report = try log.verify()
            #expect(report.problems.contains { $0.kind == .projection }, "round \(round): verify missed a damaged \(name) row")
            try log.environment.write { txn in
                if damagedKey != key { _ = try txn.delete(key: damagedKey, in: table) }
                if let replaced { try txn.put(replaced, forKey: damagedKey, in: table) }
                try txn.put(value, forKey: key, in: table)
            }
        }
        #expect(readEverything(coordinator, ids) == intact, "restored, everything reads as before")
        #expect(try log.verify().problems.isEmpty)
    }
}
