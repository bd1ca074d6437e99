import Foundation
import StrataPredicate
import Testing

// MARK: - Key-value coding

/// A small object graph: a company with departments with employees.
private struct Employee: KeyValueCoding {
    let name: String
    let salary: Int
    var manager: [String: Any]?

    func value(forKey key: String) -> Any? {
        switch key {
        case "name": name
        case "salary": salary
        case "manager": manager
        default: nil
        }
    }
}

private struct Department: KeyValueCoding {
    let name: String
    let employees: [Employee]
    func value(forKey key: String) -> Any? {
        switch key {
        case "name": name
        case "employees": employees
        default: nil
        }
    }
}

@Suite("KeyValueCoding key paths and collection operators")
struct KeyValueCodingTests {
    private let department = Department(name: "R&D", employees: [
        Employee(name: "Ada", salary: 100, manager: ["name": "Charles"]),
        Employee(name: "Grace", salary: 300, manager: nil),
        Employee(name: "Alan", salary: 200, manager: ["name": "Charles"]),
    ])

    private var company: [String: Any] { ["department": department, "departments": [department, department]] }

    @Test("value(forKey:) and single-valued key paths")
    func simplePaths() {
        #expect(department.value(forKeyPath: "name") as? String == "R&D")
        let company = company
        #expect(company.value(forKeyPath: "department.name") as? String == "R&D")
        #expect(company.value(forKeyPath: "department.missing") == nil)
        #expect(company.value(forKeyPath: "nothing.at.all") == nil)
    }

    @Test("to-many key paths map into arrays")
    func toManyPaths() {
        let names = department.value(forKeyPath: "employees.name") as? [Any]
        #expect(names?.compactMap { $0 as? String } == ["Ada", "Grace", "Alan"])
        let managerNames = department.value(forKeyPath: "employees.manager.name") as? [Any]
        #expect(managerNames?.count == 3)
        #expect(managerNames?.compactMap { $0 as? String } == ["Charles", "Charles"])
        let nested = company.value(forKeyPath: "departments.employees.salary") as? [Any]
        #expect(nested?.compactMap { $0 as? Int } == [100, 300, 200, 100, 300, 200])
    }

    @Test("collection operators", arguments: [
        ("department.employees.@count", 3.0),
        ("department.employees.@sum.salary", 600.0),
        ("department.employees.@avg.salary", 200.0),
        ("department.employees.@min.salary", 100.0),
        ("department.employees.@max.salary", 300.0),
        ("departments.@count", 2.0),
        ("departments.employees.@sum.salary", 1200.0),
    ])
    func collectionOperators(_ path: String, _ expected: Double) {
        let result = company.value(forKeyPath: path)
        let number = (result as? Int).map(Double.init) ?? (result as? Double)
        #expect(number == expected, "\(path) gave \(String(describing: result))")
    }

    @Test("@sum is an Int for integers and a Double once a Double appears")
    func sumTypes() {
        let ints: [String: Any] = ["v": [1, 2, 3]]
        #expect(ints.value(forKeyPath: "v.@sum") as? Int == 6)
        let mixed: [String: Any] = ["v": [1, 2.5] as [Any]]
        #expect(mixed.value(forKeyPath: "v.@sum") as? Double == 3.5)
        let decimals: [String: Any] = ["v": [Decimal(string: "0.1")!, Decimal(string: "0.2")!]]
        #expect(decimals.value(forKeyPath: "v.@sum") as? Decimal == Decimal(string: "0.3"))
    }

    @Test("union operators")
    func unions() {
        let names = company.value(forKeyPath: "departments.employees.@distinctUnionOfObjects.name") as? [Any]
        #expect(names?.compactMap { $0 as? String } == ["Ada", "Grace", "Alan"])
        let all = company.value(forKeyPath: "departments.employees.@unionOfObjects.name") as? [Any]
        #expect(all?.count == 6)
    }

    @Test("empty collections: @sum is 0, @avg/@min/@max are nil, @count is 0")
    func emptyCollections() {
        let empty: [String: Any] = ["items": [Any]()]
        #expect(empty.value(forKeyPath: "items.@sum.x") as? Int == 0)
        #expect(empty.value(forKeyPath: "items.@avg.x") == nil)
        #expect(empty.value(forKeyPath: "items.@min.x") == nil)
        #expect(empty.value(forKeyPath: "items.@max.x") == nil)
        #expect(empty.value(forKeyPath: "items.@count") as? Int == 0)
    }

    @Test("sets are collections too")
    func sets() {
        let object: [String: Any] = ["ids": Set([3, 1, 2])]
        #expect(object.value(forKeyPath: "ids.@max") as? Int == 3)
        #expect(object.value(forKeyPath: "ids.@count") as? Int == 3)
    }

    @Test("dictionary entries holding nil or NSNull read as nil")
    func nilEntries() {
        let object: [String: Any] = ["a": NSNull(), "b": Optional<Int>.none as Any]
        #expect(object.value(forKey: "a") == nil)
        #expect(object.value(forKey: "b") == nil)
    }

    @Test("predicates evaluate through custom KeyValueCoding types")
    func predicatesOverCustomTypes() throws {
        let company = company
        #expect(try FormatPredicate(format: "department.employees.@sum.salary > %@", 599).evaluate(with: company))
        #expect(try FormatPredicate(format: "ANY department.employees.name BEGINSWITH 'G'").evaluate(with: company))
        #expect(try FormatPredicate(format: "ALL department.employees.salary >= 100").evaluate(with: company))
        #expect(try !FormatPredicate(format: "NONE department.employees.manager.name == 'Charles'").evaluate(with: company))
        #expect(try FormatPredicate(format: "SUBQUERY(department.employees, $e, $e.manager == nil).@count == 1")
            .evaluate(with: company))
    }
}
