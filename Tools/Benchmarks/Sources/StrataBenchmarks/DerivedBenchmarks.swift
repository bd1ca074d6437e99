import Foundation
import GRDB
import Strata

// Derived attributes (spec 0006 §24), `derived` filter; no target in the issues.
//
// D1. Departments whose `employeeCount` (`employees.@count`) and `payroll`
//     (`employees.@sum.salary`) the store derives, `departments` × `perDepartment` employees;
//     then `saves` small saves through a context, each inserting one employee into a
//     department (in turn) — per save, against the same saves in the same model without
//     the derived attributes (what the derivation costs), and against GRDB inserting the
//     employee with SQLite triggers that keep the two columns (`count + 1`, `payroll + salary`),
//     what a GRDB user would write.

func runDerivedBenchmarks(departments: Int, perDepartment: Int, saves: Int, repetitions: Int) throws {
    heading("D1. Small saves into departments with derived employees.@count and employees.@sum.salary, \(departments) × \(perDepartment) employees")
    func model(derived: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Department") {
                Attribute("name", .string)
                if derived {
                    Attribute("employeeCount", .int64).derived(from: "employees.@count")
                    Attribute("payroll", .double).derived(from: "employees.@sum.salary")
                }
                Relationship("employees", to: "Employee", inverse: "department", toMany: true)
            }
            Entity("Employee") {
                Attribute("name", .string)
                Attribute("salary", .double)
                Relationship("department", to: "Department", inverse: "employees")
            }
        }
    }
    /// A store of the departments and their employees; the departments' IDs.
    func build(derived: Bool) throws -> (String, ManagedObjectContext, [ManagedObjectID]) {
        let directory = try scratchDirectory(derived ? "derived" : "derived-plain")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model(derived: derived))
        try coordinator.addPersistentStore(
            type: .eventLog, at: URL(fileURLWithPath: directory).appendingPathComponent("store"), configuration: benchConfiguration())
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "bench")
        let ids = try context.performAndWait { context -> [ManagedObjectID] in
            var made: [ManagedObject] = []
            for d in 0..<departments {
                let department = try context.insertNewObject(forEntityName: "Department")
                department.setValue("d\(d)", forKey: "name")
                for e in 0..<perDepartment {
                    let employee = try context.insertNewObject(forEntityName: "Employee")
                    employee.setValue("e\(d)-\(e)", forKey: "name")
                    employee.setValue(Double(1_000 + e % 500), forKey: "salary")
                    employee.setValue(department, forKey: "department")
                }
                made.append(department)
            }
            try context.save()
            let ids = made.map(\.objectID)
            context.reset()
            return ids
        }
        return (directory, context, ids)
    }
    func saveOne(_ context: ManagedObjectContext, _ department: ManagedObjectID, _ n: Int) throws {
        try context.performAndWait { context in
            let employee = try context.insertNewObject(forEntityName: "Employee")
            employee.setValue("new\(n)", forKey: "name")
            employee.setValue(Double(2_000 + n % 100), forKey: "salary")
            employee.setValue(try context.object(with: department), forKey: "department")
            try context.save()
            context.reset()
        }
    }
    let (derivedDirectory, derivedContext, derivedIDs) = try build(derived: true)
    defer { remove(derivedDirectory) }
    let (plainDirectory, plainContext, plainIDs) = try build(derived: false)
    defer { remove(plainDirectory) }

    let grdbDirectory = try scratchDirectory("derived-grdb")
    defer { remove(grdbDirectory) }
    let grdb = try DatabaseQueue(path: (grdbDirectory as NSString).appendingPathComponent("departments.sqlite"))
    try grdb.write { db in
        try db.execute(sql: """
            CREATE TABLE department (id INTEGER PRIMARY KEY, name TEXT, employeeCount INTEGER NOT NULL DEFAULT 0, payroll REAL NOT NULL DEFAULT 0);
            CREATE TABLE employee (id INTEGER PRIMARY KEY, name TEXT, salary REAL, departmentId INTEGER REFERENCES department(id));
            CREATE INDEX employee_department ON employee(departmentId);
            CREATE TRIGGER employee_inserted AFTER INSERT ON employee BEGIN
                UPDATE department SET employeeCount = employeeCount + 1, payroll = payroll + NEW.salary WHERE id = NEW.departmentId;
            END;
            """)
        for d in 0..<departments {
            try db.execute(sql: "INSERT INTO department (id, name) VALUES (?, ?)", arguments: [d + 1, "d\(d)"])
            for e in 0..<perDepartment {
                try db.execute(sql: "INSERT INTO employee (name, salary, departmentId) VALUES (?, ?, ?)", arguments: ["e\(d)-\(e)", Double(1_000 + e % 500), d + 1])
            }
        }
    }
    var next = 0
    let strataDerived = try measure(
        "Strata, derived count and payroll: \(saves) saves", repetitions: repetitions, setup: { () },
        body: { _ in
            for _ in 0..<saves {
                try saveOne(derivedContext, derivedIDs[next % derivedIDs.count], next)
                next += 1
            }
        })
    let strataPlain = try measure(
        "Strata, no derived attributes: \(saves) saves", repetitions: repetitions, setup: { () },
        body: { _ in
            for _ in 0..<saves {
                try saveOne(plainContext, plainIDs[next % plainIDs.count], next)
                next += 1
            }
        })
    let grdbTriggers = try measure(
        "GRDB insert + triggers: \(saves) transactions", repetitions: repetitions, setup: { () },
        body: { _ in
            for _ in 0..<saves {
                let department = next % departments + 1
                try grdb.write { db in
                    try db.execute(sql: "INSERT INTO employee (name, salary, departmentId) VALUES (?, ?, ?)", arguments: ["new\(next)", Double(2_000 + next % 100), department])
                }
                next += 1
            }
        })
    // The derived values agree with the employees.
    let (count, payroll, department) = try derivedContext.performAndWait { context -> (Int64, Double, String) in
        let department = try context.existingObject(with: derivedIDs[0])
        let employees = (department.value(forKey: "employees") as? Set<ManagedObject>) ?? []
        let payroll = employees.reduce(0.0) { $0 + ($1.value(forKey: "salary") as? Double ?? 0) }
        let count = department.value(forKey: "employeeCount") as? Int64 ?? -1
        let stored = department.value(forKey: "payroll") as? Double ?? -1
        return (count - Int64(employees.count), stored - payroll, department.value(forKey: "name") as? String ?? "?")
    }
    if count != 0 || abs(payroll) > 1e-6 { say("  warning: \(department)'s derived values differ from its employees (count by \(count), payroll by \(payroll))") }
    let toPlain = ratio(strataDerived.medianSeconds, strataPlain.medianSeconds)
    let toGRDB = ratio(strataDerived.medianSeconds, grdbTriggers.medianSeconds)
    say("  per save: derived ÷ plain \(toPlain); derived ÷ GRDB with triggers \(toGRDB); plain ÷ GRDB \(ratio(strataPlain.medianSeconds, grdbTriggers.medianSeconds))")
    let name = "D1. derived @count/@sum, \(departments) × \(perDepartment)"
    record(name, "small save: derived ÷ plain model", toPlain)
    record(name, "small save: derived ÷ GRDB insert with triggers", toGRDB)
}
