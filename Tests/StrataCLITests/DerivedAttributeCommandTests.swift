import Foundation
import Strata
import StrataTestSupport
import Testing

/// A store of the derived-attributes seed model written through a context: departments
/// "Small" (one employee) and "Large" (two), then an employee moved from Large to Small.
private struct DerivedStore {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory("strata-derived")
        path = directory.file("Company.strata")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.derivedAttributes)
        try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: path))
        try ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator).performAndWait { context in
            var departments: [String: ManagedObject] = [:]
            for (person, department) in [("Ann", "Small"), ("Bob", "Large"), ("Cat", "Large")] {
                if departments[department] == nil {
                    let made = try context.insertNewObject(forEntityName: "Department")
                    made.setValue(department, forKey: "name")
                    departments[department] = made
                }
                let employee = try context.insertNewObject(forEntityName: "Employee")
                employee.setValue(person, forKey: "name")
                employee.setValue(departments[department], forKey: "department")
            }
            try context.save()
            let cat = try context.fetch(try FetchRequest(entityName: "Employee", format: "name == 'Cat'"))
            cat.first?.setValue(departments["Small"], forKey: "department")
            try context.save()
        }
    }
}

@Suite("strata: stores with derived attributes")
struct DerivedAttributeCommandTests {
    @Test("model shows each derivation, and --json is the format-2 model file, which loads back as the app's model")
    func model() throws {
        let store = try DerivedStore()
        let text = try strata("model", store.path)
        #expect(text.status == 0, "\(text.standardError)")
        #expect(text.standardOutput.contains("  attribute     employeeCount: int64  (optional, indexed, derived from employees.@count)"))
        #expect(text.standardOutput.contains("  attribute     lastSaved: date  (optional, derived from now())"))
        let json = try strata("model", store.path, "--json")
        #expect(json.status == 0)
        #expect(json.standardOutput.hasPrefix("{\n  \"formatVersion\": 2,"))
        let loaded = try ManagedObjectModel(jsonData: Data(json.standardOutput.utf8))
        #expect(loaded == (try SeedModels.derivedAttributes))
    }

    @Test("verify, info, query, log and export read the stored derived values without app code")
    func readingCommands() throws {
        let store = try DerivedStore()
        let verify = try strata("verify", store.path)
        #expect(verify.status == 0, "\(verify.standardOutput)\(verify.standardError)")
        #expect(try strata("info", store.path).status == 0)

        let small = try queryObjects(store.path, "Department", "--where", "employeeCount == 2")
        #expect(names(small) == ["Small"])
        #expect((small.first?["values"] as? [String: Any])?["searchName"] as? String == "small")

        let log = try strata("log", store.path)
        #expect(log.status == 0)
        #expect(log.standardOutput.contains("employeeCount: 2 → 1"), "\(log.standardOutput)")
        #expect(log.standardOutput.contains("employeeCount: 1 → 2"))

        let export = try strata("export", store.path, "--format", "ndjson")
        #expect(export.status == 0)
        #expect(export.standardOutput.contains("\"departmentName\":\"Small\""))
    }
}
