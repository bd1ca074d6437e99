import Foundation
import StrataModel

/// A model that uses every feature of the builder and the file format, so the round-trip
/// and file tests cover every member the format has.
enum KitchenSink {
    static var model: ManagedObjectModel {
        get throws {
            try ManagedObjectModel(versionIdentifiers: ["2.1", "2.0"]) {
                Entity("Person", abstract: true) {
                    Attribute("firstName", .string).required().providedAtInsert().length(min: 1, max: 40)
                    Attribute("lastName", .string, default: "").required()
                    Attribute("email", .string).indexed().matching(#"[^@\s]+@[^@\s]+\.[a-z]+"#)
                        .renamed(from: "mail").userInfo(["doc": "work address"])
                    Attribute("fullName", .string).transient()
                    Unique("email")
                }
                .userInfo(["table": "people"])
                Entity("Employee", className: "EmployeeObject", parent: "Person") {
                    Attribute("salary", .decimal, default: AttributeValue.decimal(Decimal(string: "1000.50") ?? 0))
                        .required().range(min: 0, max: 1_000_000)
                    Attribute("hired", .date, default: "2024-05-01T12:00:00Z").range(min: "2000-01-01T00:00:00Z")
                    Attribute("level", .int16, default: 1).range(min: 1, max: 9).versionHashModifier("levels-v2")
                    Attribute("badge", .int64, default: 9_007_199_254_740_993)
                    Attribute("ratio", .double, default: 0.1)
                    Attribute("weight", .float, default: 1.5)
                    Attribute("active", .boolean, default: true)
                    Attribute("photo", .binaryData, default: .binaryData(Data([0, 1, 2, 255]))).length(max: 1_000_000)
                    Attribute("token", .uuid, default: .uuid(UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16))))
                    Attribute("homepage", .uri, default: "https://example.com/a?b=c")
                    Attribute("code", .string, default: "AB").required().validated(by: #"SELF MATCHES "[A-Z]{2}""#, warning: "Code must have two letters")
                    Relationship("department", to: "Department", inverse: "employees").required()
                    Relationship("manager", to: "Manager", inverse: "reports")
                    Relationship("mentees", to: "Employee", toMany: true, ordered: true).count(min: 0, max: 5)
                        .renamed(from: "apprentices").userInfo(["note": "one-way"])
                    FetchedProperty("colleagues", entity: "Employee", predicate: "department == $FETCH_SOURCE.department")
                }
                .renamed(from: "Staff")
                Entity("Manager", parent: "Employee") {
                    Attribute("tags", .transformable(valueTypeName: "[String]"), default: (try? AttributeValue.transformable(encoding: ["new"])) ?? nil)
                    Relationship("reports", to: "Employee", inverse: "manager", toMany: true, deleteRule: .noAction)
                }
                .versionHashModifier("m2")
                Entity("Department") {
                    Attribute("name", .string, default: "Unnamed \"quoted\" \u{1F600}").required()
                    Relationship("employees", to: "Employee", inverse: "department", toMany: true, deleteRule: .deny)
                    Unique("name")
                }
                FetchRequestTemplate("employeesEarningMoreThan", entity: "Employee", predicate: "salary > $AMOUNT")
                FetchRequestTemplate("allDepartments", entity: "Department")
                Localization(["Entity/Employee": "Staff member", "Property/salary/Entity/Employee": "Salary"])
                Localization(["Property/code": "Code", "ErrorString/Code must have two letters": "A code has exactly two letters"])
            }
        }
    }
}
