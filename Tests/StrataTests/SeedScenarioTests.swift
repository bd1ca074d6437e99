import Foundation
import Strata
import StrataTestSupport
import Testing

@Suite("Contexts: the source documents' scenarios, on a real store reopened between steps")
struct SeedScenarioTests {
    @Test("seed 001 Run: default -1, SELF > 0 with its localized warning, awakeFromInsert date, setNilValueForKey, sorted fetch")
    func run() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.run
        do {
            let context = privateContext(try openCoordinator(dir, model: model, classes: [(Run.self, "Run")]))
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                let run = try context.insert(Run.self, entityName: "Run")
                #expect(run.processID == -1, "the model's default")
                #expect(run.date != nil, "set in awakeFromInsert")
                let error = #expect(throws: ContextError.self) { try context.save() }
                #expect(error?.code == 1550)
                #expect(error?.description.contains("Process ID must not be less than 1") == true)
                #expect(!context.insertedObjects.isEmpty, "a refused save keeps the changes")
                run.setValue(nil, forKey: "processID")
                #expect(run.processID == 0, "setNilValueForKey substituted 0")
                #expect(throws: ContextError.self) { try context.save() }
                run.processID = 42
                try context.save()
                for pid: Int32 in [7, 3] {
                    let another = try context.insert(Run.self, entityName: "Run")
                    another.processID = pid
                }
                try context.save()
            }
        }
        // Reopen: a new coordinator on the same files.
        let context = privateContext(try openCoordinator(dir, model: model, classes: [(Run.self, "Run")]))
        let pids = try await context.perform { (context: isolated ManagedObjectContext) throws in
            let runs = try context.fetch(FetchRequest(entityName: "Run", sortDescriptors: [FetchSortDescriptor(key: "date")]))
            return runs.compactMap { ($0 as? Run)?.processID }
        }
        #expect(pids == [42, 7, 3])
    }

    @Test("seed 004 League Manager: inverse kept, sorted players, cascade delete removes players")
    func leagueManager() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        let teamID: ManagedObjectID = try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            for (first, last) in [("Zed", "Young"), ("Ann", "Adams"), ("Mo", "Miller")] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(first, forKey: "firstName")
                player.setValue(last, forKey: "lastName")
                player.setValue(team, forKey: "team")
            }
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 3, "inverse maintained before save")
            try context.save()
            #expect(!team.objectID.isTemporaryID)
            return team.objectID
        }
        let context = privateContext(try openCoordinator(dir, model: model))
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            let players = (team.value(forKey: "players") as? Set<ManagedObject>) ?? []
            let sorted = players.sorted { ($0.value(forKey: "lastName") as? String ?? "") < ($1.value(forKey: "lastName") as? String ?? "") }
            #expect(sorted.compactMap { $0.value(forKey: "lastName") as? String } == ["Adams", "Miller", "Young"])
            #expect(sorted.allSatisfy { ($0.value(forKey: "team") as? ManagedObject) == team })
            let viaFetch = try context.fetch(FetchRequest(entityName: "Player", sortDescriptors: [FetchSortDescriptor(key: "lastName")]))
            #expect(viaFetch.compactMap { $0.value(forKey: "lastName") as? String } == ["Adams", "Miller", "Young"])

            context.delete(team)
            #expect(context.deletedObjects.count == 4, "cascade deleted the players too")
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 0)
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 0)
        }
        #expect(try privateContext(try openCoordinator(dir, model: model)).performAndWait { try $0.count(for: FetchRequest(entityName: "Player")) } == 0)
    }

    @Test("seed 001 Student/Class: the monitor is cleared when that student leaves the class")
    func monitorCleared() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.studentClass
        let context = privateContext(try openCoordinator(dir, model: model, classes: [(SchoolClass.self, "ClassEntity")]))
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let schoolClass = try context.insertNewObject(forEntityName: "ClassEntity")
            #expect(schoolClass.value(forKey: "name") as? String == "XX班")
            let ada = try context.insertNewObject(forEntityName: "StudentEntity")
            let bo = try context.insertNewObject(forEntityName: "StudentEntity")
            schoolClass.mutableSetValue(forKey: "students").add(ada)
            schoolClass.mutableSetValue(forKey: "students").add(bo)
            schoolClass.setValue(ada, forKey: "monitor")
            #expect(ada.value(forKey: "inClass") as? ManagedObject == schoolClass)
            try context.save()
            try #require(schoolClass as? SchoolClass).removeStudentsObject(ada)
            #expect(schoolClass.value(forKey: "monitor") == nil)
            #expect(ada.value(forKey: "inClass") == nil, "the inverse follows")
            try context.save()
        }
        let reopened = privateContext(try openCoordinator(dir, model: model))
        let (monitor, students) = try await reopened.perform { (context: isolated ManagedObjectContext) throws in
            let schoolClass = try #require(try context.fetch(FetchRequest(entityName: "ClassEntity")).first)
            return (schoolClass.value(forKey: "monitor") == nil, (schoolClass.value(forKey: "students") as? Set<ManagedObject>)?.count ?? -1)
        }
        #expect(monitor)
        #expect(students == 1)
    }

    @Test("seed 000 Employee/Department: key paths through relationships and @sum")
    func keyPaths() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.employeeDepartment
        try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.insertNewObject(forEntityName: "Department")
            department.setValue("Engineering", forKey: "name")
            var manager: ManagedObject?
            for (name, salary) in [("Grace", 300), ("Ada", 200), ("Alan", 100)] {
                let employee = try context.insertNewObject(forEntityName: "Employee")
                employee.setValue(name, forKey: "firstName")
                employee.setValue(Decimal(salary), forKey: "salary")
                employee.setValue(department, forKey: "department")
                employee.setValue(manager, forKey: "manager")
                if manager == nil { manager = employee }
            }
            try context.save()
        }
        try await privateContext(try openCoordinator(dir, model: model, classes: [(Employee.self, "Employee")])).perform { (context: isolated ManagedObjectContext) throws in
            let department = try #require(try context.fetch(FetchRequest(entityName: "Department")).first)
            let total = department.value(forKeyPath: "employees.@sum.salary")
            #expect((total as? Decimal) == 600 || (total as? Double) == 600 || (total as? Int) == 600, "got \(String(describing: total))")
            #expect(department.value(forKeyPath: "employees.@count") as? Int == 3)
            let ada = try #require(try context.fetch(FetchRequest(entityName: "Employee", predicate: try FormatPredicate(format: "firstName == 'Ada'"))).first)
            #expect(ada.value(forKeyPath: "manager.firstName") as? String == "Grace")
            #expect(ada.value(forKeyPath: "manager.department.name") as? String == "Engineering")
            // Delete denied while the department has employees (1600), and rollback restores.
            context.delete(department)
            let error = #expect(throws: ContextError.self) { try context.save() }
            #expect(error?.code == 1600 || error?.description.contains("1600") == true || error?.description.contains("denies") == true)
            context.rollback()
            #expect(!department.isDeleted)
            #expect(department.value(forKey: "name") as? String == "Engineering")
        }
    }

    @Test("seed 000 Sarit Smith: refresh with mergeChanges keeps local edits, takes store values, restores transients")
    func saritSmith() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.employeeDepartment
        let coordinator = try openCoordinator(dir, model: model, classes: [(Employee.self, "Employee")])
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let department = try context.insertNewObject(forEntityName: "Department")
            let person = try context.insertNewObject(forEntityName: "Employee")
            person.setValue("Sarit", forKey: "firstName")
            person.setValue("Smith", forKey: "lastName")
            person.setValue(department, forKey: "department")
            try context.save()
            return person.objectID
        }
        let one = privateContext(coordinator, name: "one")
        let two = privateContext(coordinator, name: "two")
        try await two.perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.existingObject(with: id)
            #expect(person.value(forKey: "fullName") as? String == "Sarit Smith", "cached in awakeFromFetch")
            person.setValue("Jones", forKey: "lastName")
            person.setValue("Sarit Jones", forKey: "fullName")
        }
        try await one.perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.existingObject(with: id)
            person.setValue("Fiona", forKey: "firstName")
            person.setValue("Fiona Smith", forKey: "fullName")
            try context.save()
        }
        let (first, last, full) = try await two.perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.existingObject(with: id)
            context.refresh(person, mergeChanges: true)
            return (person.value(forKey: "firstName") as? String, person.value(forKey: "lastName") as? String, person.value(forKey: "fullName") as? String)
        }
        #expect(first == "Fiona", "not changed locally: the store's new value")
        #expect(last == "Jones", "changed locally: the local value wins")
        #expect(full == "Sarit Jones", "the transient is restored to its pre-refresh value, as the seed describes")
    }
}
