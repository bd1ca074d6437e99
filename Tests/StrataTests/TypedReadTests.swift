import Foundation
import Strata
import StrataModel
import StrataTestSupport
import Testing

/// ``ManagedObject/get(_:as:)`` reads a fetched attribute straight from the object's row;
/// everything else goes through `value(forKey:)`. Either way it must give exactly what
/// `value(forKey:) as? T` gives.
@Suite("Contexts: typed reads")
struct TypedReadTests {
    /// One attribute of every type, a transient, and a to-one.
    func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Sample") {
                Attribute("i16", .int16)
                Attribute("i32", .int32)
                Attribute("i64", .int64)
                Attribute("dec", .decimal)
                Attribute("dbl", .double)
                Attribute("flt", .float)
                Attribute("str", .string)
                Attribute("flag", .boolean)
                Attribute("day", .date)
                Attribute("blob", .binaryData)
                Attribute("uuid", .uuid)
                Attribute("link", .uri)
                Attribute("empty", .string)
                Attribute("note", .string).transient()
                Relationship("owner", to: "Owner", inverse: "samples")
            }
            Entity("Owner") {
                Attribute("name", .string)
                Relationship("samples", to: "Sample", inverse: "owner", toMany: true)
            }
        }
    }

    static let values: [String: any Sendable] = [
        "i16": Int16(-7), "i32": Int32(42), "i64": Int64(1) << 40, "dec": Decimal(string: "12.5") ?? 0,
        "dbl": 2.25, "flt": Float(0.5), "str": String(repeating: "long string ", count: 4), "flag": true,
        "day": Date(timeIntervalSince1970: 1_700_000_000), "blob": Data([1, 2, 3]),
        "uuid": UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)),
        "link": URL(string: "https://example.com/a") ?? URL(fileURLWithPath: "/"),
    ]

    /// A store holding one saved sample with every attribute set (but `empty`) and an owner.
    func savedStore(_ directory: TemporaryDirectory) throws -> PersistentStoreCoordinator {
        let coordinator = try openCoordinator(directory, model: try model())
        try privateContext(coordinator).performAndWait { context in
            let sample = try context.insertNewObject(forEntityName: "Sample")
            for (key, value) in Self.values { sample.setValue(value, forKey: key) }
            let owner = try context.insertNewObject(forEntityName: "Owner")
            owner.setValue("Ann", forKey: "name")
            sample.setValue(owner, forKey: "owner")
            try context.save()
        }
        return coordinator
    }

    /// `get` as each concrete type, compared with `value(forKey:) as?` on a fresh fetch.
    func expectSameAsKeyValueCoding(_ sample: ManagedObject, _ key: String) {
        #expect(sample.get(key, as: Int16.self) == (sample.value(forKey: key) as? Int16), "\(key) as Int16")
        #expect(sample.get(key, as: Int32.self) == (sample.value(forKey: key) as? Int32), "\(key) as Int32")
        #expect(sample.get(key, as: Int64.self) == (sample.value(forKey: key) as? Int64), "\(key) as Int64")
        #expect(sample.get(key, as: Int.self) == (sample.value(forKey: key) as? Int), "\(key) as Int")
        #expect(sample.get(key, as: Decimal.self) == (sample.value(forKey: key) as? Decimal), "\(key) as Decimal")
        #expect(sample.get(key, as: Double.self) == (sample.value(forKey: key) as? Double), "\(key) as Double")
        #expect(sample.get(key, as: Float.self) == (sample.value(forKey: key) as? Float), "\(key) as Float")
        #expect(sample.get(key, as: String.self) == (sample.value(forKey: key) as? String), "\(key) as String")
        #expect(sample.get(key, as: Bool.self) == (sample.value(forKey: key) as? Bool), "\(key) as Bool")
        #expect(sample.get(key, as: Date.self) == (sample.value(forKey: key) as? Date), "\(key) as Date")
        #expect(sample.get(key, as: Data.self) == (sample.value(forKey: key) as? Data), "\(key) as Data")
        #expect(sample.get(key, as: UUID.self) == (sample.value(forKey: key) as? UUID), "\(key) as UUID")
        #expect(sample.get(key, as: URL.self) == (sample.value(forKey: key) as? URL), "\(key) as URL")
        #expect(sample.get(key, as: AnyHashable.self) == (sample.value(forKey: key) as? AnyHashable), "\(key) as AnyHashable")
    }

    @Test("a fetched attribute of every type reads as its own type, and as nothing else, exactly as value(forKey:) as? T")
    func everyTypeMatchesKeyValueCoding() throws {
        let directory = try TemporaryDirectory()
        let coordinator = try savedStore(directory)
        try privateContext(coordinator).performAndWait { context in
            for key in Self.values.keys.sorted() + ["empty"] {
                // A fresh fault for each key: the first read fires it from its fetched row.
                context.reset()
                let sample = try #require(try context.fetch(FetchRequest(entityName: "Sample")).first)
                #expect(sample.isFault)
                expectSameAsKeyValueCoding(sample, key)
                #expect(!sample.isFault)
            }
            context.reset()
            let sample = try #require(try context.fetch(FetchRequest(entityName: "Sample")).first)
            #expect(sample.get("i32", as: Int32.self) == 42)
            #expect(sample.get("i32", as: Int.self) == nil)  // an Int32 is not an Int (no NSNumber bridging)
            #expect(sample.get("str", as: String.self) == String(repeating: "long string ", count: 4))
            #expect(sample.get("link", as: URL.self)?.absoluteString == "https://example.com/a")
            #expect(sample.get("empty", as: String.self) == nil)
            #expect(sample.get("noSuchKey", as: String.self) == nil)
            let any = sample.get("dbl", as: Any.self)
            #expect(any as? Double == 2.25)
        }
    }

    @Test("a changed, transient or relationship value comes through value(forKey:): the current one, not the row's")
    func otherValuesGoThroughKeyValueCoding() throws {
        let directory = try TemporaryDirectory()
        let coordinator = try savedStore(directory)
        try privateContext(coordinator).performAndWait { context in
            let sample = try #require(try context.fetch(FetchRequest(entityName: "Sample")).first)
            #expect(sample.get("i32", as: Int32.self) == 42)
            sample.setValue(Int32(43), forKey: "i32")
            #expect(sample.get("i32", as: Int32.self) == 43)
            #expect(sample.get("str", as: String.self) == String(repeating: "long string ", count: 4))  // unchanged, with another change pending
            sample.setValue("a note", forKey: "note")
            #expect(sample.get("note", as: String.self) == "a note")
            let owner = try #require(sample.get("owner", as: ManagedObject.self))
            #expect(owner.get("name", as: String.self) == "Ann")
            try context.undo()
            #expect(sample.get("i32", as: Int32.self) == 42)
            context.rollback()
            #expect(sample.get("note", as: String.self) == nil)
        }
    }

    @Test("a fault fired by get runs awakeFromFetch first; a value it sets is what get then reads")
    func firingRunsAwakeFromFetch() throws {
        let directory = try TemporaryDirectory()
        let model = try SeedModels.employeeDepartment
        let setup = try openCoordinator(directory, model: model)
        try privateContext(setup).performAndWait { context in
            let employee = try context.insertNewObject(forEntityName: "Employee")
            employee.setValue("Ada", forKey: "firstName")
            employee.setValue("Lovelace", forKey: "lastName")
            employee.setValue(try context.insertNewObject(forEntityName: "Department"), forKey: "department")
            try context.save()
        }
        let coordinator = try openCoordinator(directory, model: model, classes: [(Employee.self, "Employee")])
        try privateContext(coordinator).performAndWait { context in
            let employee = try #require(try context.fetch(FetchRequest(entityName: "Employee")).first)
            #expect(employee.isFault)
            #expect(employee.get("firstName", as: String.self) == "Ada")
            #expect(employee.get("fullName", as: String.self) == "Ada Lovelace")
        }
    }

    @Test("an object whose store row is gone reads nil through get, as through value(forKey:)")
    func goneObjectReadsNil() throws {
        let directory = try TemporaryDirectory()
        let coordinator = try savedStore(directory)
        let id = try privateContext(coordinator).performAndWait { context in
            try #require(try context.fetch(FetchRequest(entityName: "Sample")).first).objectID
        }
        try privateContext(coordinator).performAndWait { context in
            context.delete(try context.existingObject(with: id))
            try context.save()
        }
        try privateContext(coordinator).performAndWait { context in
            let fault = try context.object(with: id)
            #expect(fault.get("i32", as: Int32.self) == nil)
            #expect(fault.value(forKey: "i32") == nil)
        }
    }
}
