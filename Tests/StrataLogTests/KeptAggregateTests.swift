import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// `@count` and `@sum` over a one-to-many relationship kept from their stored value (spec 0006
/// §24.3): random transactions — inserts, deletes, moves, value changes, several changes of
/// one employee in one transaction over several groups, a sub-entity's members — and after
/// each, every department's derived values equal a fresh computation from its employees.
///
/// `STRATA_KEPT_AGGREGATE_TRANSACTIONS` sets the number of transactions (default 300).
@Suite("Event log: derived aggregates kept from their stored value")
struct KeptAggregateTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Department") {
                Attribute("name", .string)
                Attribute("headcount", .int64).derived(from: "employees.@count")
                Attribute("points", .int64).derived(from: "employees.@sum.points")
                Attribute("payroll", .double).derived(from: "employees.@sum.salary")
                Attribute("bonuses", .decimal).derived(from: "employees.@sum.bonus")
                Attribute("meanSalary", .double).derived(from: "employees.@avg.salary")
                Relationship("employees", to: "Employee", inverse: "department", toMany: true)
            }
            Entity("Employee") {
                Attribute("points", .int32)
                Attribute("salary", .double)
                Attribute("bonus", .decimal)
                Relationship("department", to: "Department", inverse: "employees")
            }
            Entity("Manager", parent: "Employee") {
                Attribute("level", .int16)
            }
        }
    }

    @Test("after every random transaction, each department's kept @count and @sum equal a fresh computation")
    func randomTransactions() throws {
        let dir = try TemporaryDirectory("strata-kept")
        let log = try openLog(dir, model: try Self.model())
        var rng = SeededGenerator(state: 0x5EED_A66)
        var draft = TransactionDraft()
        let made = (0..<4).map { draft.insert("Department", values: ["name": s("d\($0)")]) }
        let first = try log.commit(draft)
        let departments = made.compactMap { first.permanentID(for: $0) }
        var employees: [StoredObjectID] = []
        let count = environmentNumber("STRATA_KEPT_AGGREGATE_TRANSACTIONS", default: 300)
        func values() -> [String: DraftValue] {
            var values: [String: DraftValue] = [:]
            if rng.chance(0.9) { values["points"] = .attribute(.int32(Int32(rng.int(-50...500)))) }
            if rng.chance(0.9) { values["salary"] = .attribute(.double(Double(rng.int(1_000...9_000)) + 0.1 * Double(rng.int(0...9)))) }
            if rng.chance(0.8) { values["bonus"] = .attribute(.decimal(Decimal(rng.int(0...999)) / 100)) }
            if rng.chance(0.95), let department = rng.pick(departments) { values["department"] = .reference(.stored(department)) }
            return values
        }
        for transaction in 0..<count {
            var draft = TransactionDraft()
            var inserted: [DraftObjectID] = []
            var deletedHere: Set<StoredObjectID> = []
            for operation in 0..<rng.int(1...6) {
                if operation > 0 && rng.chance(0.3) { draft.beginGroup() }
                let live = employees.filter { !deletedHere.contains($0) }
                switch rng.int(0..<10) {
                case 0..<4 where true:
                    inserted.append(draft.insert(rng.chance(0.2) ? "Manager" : "Employee", values: values()))
                case 4..<8:
                    if let employee = rng.pick(live) {
                        var changed = values()
                        if rng.chance(0.2) { changed["department"] = .null }
                        draft.update(.stored(employee), values: changed)
                    } else if let fresh = rng.pick(inserted) {
                        draft.update(fresh, values: values())
                    }
                default:
                    if let employee = rng.pick(live) {
                        draft.delete(.stored(employee))
                        deletedHere.insert(employee)
                    } else if let fresh = inserted.popLast() {
                        draft.delete(fresh)
                    }
                }
            }
            let result = try log.commit(draft)
            employees.removeAll { deletedHere.contains($0) }
            employees += inserted.compactMap { result.permanentID(for: $0) }
            try Self.check(log, departments, context: "after transaction \(transaction + 2)")
        }
        #expect(try log.verify().isClean)
    }

    @Test("a sum of the members' own derived attribute follows it (computed from every member)")
    func sumOfDerived() throws {
        let model = try ManagedObjectModel {
            Entity("Department") {
                Attribute("projects", .int64).derived(from: "employees.@sum.projectCount")
                Relationship("employees", to: "Employee", inverse: "department", toMany: true)
            }
            Entity("Employee") {
                Attribute("projectCount", .int64).derived(from: "projects.@count")
                Relationship("department", to: "Department", inverse: "employees")
                Relationship("projects", to: "Project", inverse: "owner", toMany: true)
            }
            Entity("Project") {
                Attribute("name", .string)
                Relationship("owner", to: "Employee", inverse: "projects")
            }
        }
        let dir = try TemporaryDirectory("strata-kept")
        let log = try openLog(dir, model: model)
        var draft = TransactionDraft()
        let department = draft.insert("Department", values: [:])
        let employee = draft.insert("Employee", values: ["department": .reference(department)])
        let first = try log.commit(draft)
        let (departmentID, employeeID) = (try #require(first.permanentID(for: department)), try #require(first.permanentID(for: employee)))
        for n in 1...3 {
            var draft = TransactionDraft()
            _ = draft.insert("Project", values: ["name": s("p\(n)"), "owner": .reference(.stored(employeeID))])
            try log.commit(draft)
            let (projects, count) = try log.read { reader in
                (try reader.object(departmentID)?["projects"], try reader.object(employeeID)?["projectCount"])
            }
            #expect(count == .attribute(.int64(Int64(n))))
            #expect(projects == .attribute(.int64(Int64(n))), "after project \(n)")
        }
    }

    /// Every department's derived values against its employees now.
    static func check(_ log: EventLog, _ departments: [StoredObjectID], context: String) throws {
        try log.read { (reader: borrowing LogReader) throws in
            for department in departments {
                guard let stored = try reader.object(department) else { throw WorkloadFailure("\(context): \(department) is gone") }
                let members = try reader.related(department, "employees").compactMap { try reader.object($0) }
                func number(_ value: LogValue?) -> Double? {
                    switch value {
                    case .attribute(.int64(let n))?: Double(n)
                    case .attribute(.int32(let n))?: Double(n)
                    case .attribute(.double(let d))?: d
                    default: nil
                    }
                }
                let points = members.reduce(Int64(0)) { total, member in
                    if case .attribute(.int32(let n))? = member.values["points"] { return total + Int64(n) }
                    return total
                }
                let salaries = members.compactMap { number($0.values["salary"]) }
                let payroll = salaries.reduce(0, +)
                let bonuses = members.reduce(Decimal(0)) { total, member in
                    if case .attribute(.decimal(let d))? = member.values["bonus"] { return total + d }
                    return total
                }
                #expect(stored["headcount"] == .attribute(.int64(Int64(members.count))), "\(context): \(department) headcount")
                #expect(stored["points"] == .attribute(.int64(points)), "\(context): \(department) points")
                #expect(stored["bonuses"] == .attribute(.decimal(bonuses)), "\(context): \(department) bonuses \(stored["bonuses"]) vs \(bonuses)")
                let kept = number(stored["payroll"]) ?? .nan
                #expect(abs(kept - payroll) <= 1e-9 * max(1, abs(payroll)), "\(context): \(department) payroll \(kept) vs \(payroll)")
                if salaries.isEmpty {
                    #expect(stored["meanSalary"] == .null, "\(context): \(department) mean of none")
                } else {
                    let mean = number(stored["meanSalary"]) ?? .nan
                    #expect(abs(mean - payroll / Double(salaries.count)) <= 1e-9 * max(1, abs(mean)), "\(context): \(department) mean")
                }
            }
        }
    }
}
