import Foundation
import StrataTestSupport
import Testing

@testable import StrataModel

@Suite("Derived attributes in the model")
struct DerivedAttributeModelTests {
    /// Each `invalid/derivation-*.json` file with the issues it must be refused with:
    /// kind, entity, property, location, and a phrase of the message.
    static let invalidFiles: [(file: String, issues: [(ModelError.Kind, String, String, String, String)])] = [
        ("derivation-syntax.json", [
            (.invalidDerivation, "Department", "employeeCount", "entities[0].attributes[1].derivation", "does not parse"),
        ]),
        ("derivation-unsupported.json", [
            (.invalidDerivation, "Department", "doubledName", "entities[0].attributes[1].derivation", "is not a supported derivation"),
        ]),
        ("derivation-unknown-key.json", [
            (.invalidDerivation, "Department", "employeeCount", "entities[0].attributes[1].derivation",
             "unknown key 'staff' in \"staff.@count\": 'Department' has no property named 'staff'"),
        ]),
        ("derivation-to-many-without-aggregate.json", [
            (.invalidDerivation, "Department", "salaries", "entities[0].attributes[1].derivation",
             "to-many relationship 'employees' in \"employees.salary\" is not followed by an aggregate"),
        ]),
        ("derivation-ends-at-relationship.json", [
            (.invalidDerivation, "Employee", "boss", "entities[1].attributes[2].derivation", "ends at relationship 'department'"),
        ]),
        ("derivation-type-mismatch.json", [
            (.invalidDerivation, "Department", "employeeCount", "entities[0].attributes[1].derivation",
             "type mismatch: employees.@count gives an integer count, but attribute 'employeeCount' is string"),
        ]),
        ("derivation-cycle.json", [
            (.invalidDerivation, "Department", "label", "entities[0].attributes[1].derivation", "in a cycle"),
            (.invalidDerivation, "Employee", "departmentLabel", "entities[1].attributes[2].derivation", "in a cycle"),
        ]),
        ("derivation-flags.json", [
            (.invalidDerivation, "Department", "employeeCount", "entities[0].attributes[1].transient", "can't be transient"),
            (.invalidDerivation, "Department", "employeeCount", "entities[0].attributes[1].optional", "must be optional"),
            (.invalidDerivation, "Department", "employeeCount", "entities[0].attributes[1].defaultValue", "can't have a default value"),
            (.invalidDerivation, "Department", "employeeCount", "entities[0].attributes[1].minimumValue", "can't have validation rules"),
        ]),
        ("derivation-format-version-1.json", [
            (.malformedFile, "Department", "employeeCount", "entities[0].attributes[1].derivation", "needs formatVersion 2"),
        ]),
    ]

    @Test("Each invalid derivation file is refused with entity, attribute, location and what is wrong", arguments: invalidFiles.indices)
    func invalidFile(index: Int) throws {
        let (file, expected) = Self.invalidFiles[index]
        let url = SpecFiles.url("0002-model-file/invalid/\(file)")
        let error = try #require(throws: ModelError.self) { try ManagedObjectModel(contentsOf: url) }
        #expect(error.issues.count == expected.count, "\(file): \(error)")
        for (kind, entity, property, location, phrase) in expected {
            let issue = error.issues.first { $0.location == location }
            #expect(issue?.kind == kind, "\(file) \(location)")
            #expect(issue?.entity == entity)
            #expect(issue?.property == property)
            #expect(issue?.message.contains(phrase) == true, "\(file): \(issue?.message ?? "no issue at \(location)")")
        }
        #expect(error.description.contains(file))
    }

    @Test("A model built in Swift is refused for a bad derivation the same way")
    func builderRefusal() throws {
        let error = try #require(throws: ModelError.self) {
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Attribute("playerCount", .int32).derived(from: "players")
                    Attribute("loud", .string).derived(from: "uppercase(players.@count)")
                    Attribute("oldest", .boolean).derived(from: "players.@max.retired")
                    Relationship("players", to: "Player", inverse: "team", toMany: true)
                }
                Entity("Player") {
                    Attribute("retired", .boolean)
                    Relationship("team", to: "Team", inverse: "players")
                }
            }
        }
        #expect(error.kinds == [.invalidDerivation, .invalidDerivation, .invalidDerivation])
        #expect(error.issues.map(\.property) == ["playerCount", "loud", "oldest"])
        #expect(error.issues[0].message.contains("is not followed by an aggregate"))
        #expect(error.issues[1].message.contains("a string function takes a key path through to-one relationships to one string"))
        #expect(error.issues[2].message.contains("@max in players.@max.retired needs a numeric, date or string attribute"))
        #expect(error.issues[0].description.hasPrefix("Entity 'Team', property 'playerCount' (entities[0].attributes[1].derivation)"))
    }

    @Test("Supported shapes resolve, with the result types they allow; others are refused", arguments: [
        ("Employee", "name", AttributeType.string, true), ("Employee", "department.name", .string, true),
        ("Department", "employees.@count", .int16, true), ("Department", "employees.@sum.salary", .decimal, true),
        ("Department", "employees.@sum.age", .int64, true), ("Department", "employees.@sum.age", .int16, false),
        ("Department", "employees.@avg.age", .double, true), ("Department", "employees.@avg.age", .int32, false),
        ("Department", "employees.@min.hired", .date, true), ("Department", "employees.@max.name", .string, true),
        ("Employee", "now()", .date, true), ("Employee", "now()", .string, false), ("Employee", "lowercase(name)", .string, true),
        ("Employee", "canonical(department.name)", .string, true), ("Employee", "uppercase(age)", .string, false),
        ("Department", "employees.department.name", .string, false), ("Department", "employees.@count.name", .int64, false),
        ("Employee", "name.length", .string, false), ("Department", "employees.@distinctUnionOfObjects.name", .string, false),
        ("Employee", "age", .int64, true), ("Employee", "age", .int16, false),
        ("Department", "employees.@sum.department.budget", .double, true), ("Employee", "$x", .string, false),
        ("Employee", "abs(age)", .int32, false), ("Employee", "fullName", .string, false),
    ])
    func shapes(entity: String, derivation: String, type: AttributeType, valid: Bool) throws {
        var department = Entity("Department") {
            Attribute("name", .string)
            Attribute("budget", .double)
            Relationship("employees", to: "Employee", inverse: "department", toMany: true)
        }
        var employee = Entity("Employee") {
            Attribute("name", .string)
            Attribute("fullName", .string).transient()
            Attribute("age", .int32)
            Attribute("salary", .decimal)
            Attribute("hired", .date)
            Relationship("department", to: "Department", inverse: "employees")
        }
        let attribute = Attribute("derived", type).derived(from: ModelExpression(derivation))
        if entity == "Department" { department.attributes.append(attribute) } else { employee.attributes.append(attribute) }
        var model = ManagedObjectModel()
        model.entities = [department, employee]
        let issues = model.checkingIssues()
        #expect(issues.isEmpty == valid, "\(derivation) as \(type): \(issues.map(\.message))")
        #expect(issues.allSatisfy { $0.kind == .invalidDerivation && $0.property == "derived" })
    }

    @Test("A model without derived attributes is written as format 1, one with them as format 2; both round-trip")
    func formatVersions() throws {
        #expect(try SeedModels.employeeDepartment.formatVersion == 1)
        let derived = try SeedModels.derivedAttributes
        #expect(derived.formatVersion == 2)
        let text = String(decoding: derived.jsonData(), as: UTF8.self)
        #expect(text.hasPrefix("{\n  \"formatVersion\": 2,"))
        #expect(text.contains("\"name\": \"employeeCount\",\n          \"type\": \"int64\",\n          \"derivation\": \"employees.@count\","))
        let reloaded = try ManagedObjectModel(jsonData: derived.jsonData(prettyPrinted: false))
        #expect(reloaded == derived)
        #expect(reloaded.versionHash == derived.versionHash)
        #expect(reloaded.entity(named: "Department")?.attributesByName["searchName"]?.derivationExpression == "canonical(name)")
        let decoded = try JSONDecoder().decode(ManagedObjectModel.self, from: JSONEncoder().encode(derived))
        #expect(decoded == derived)
    }

    @Test("The version hash covers the derivation in its canonical form, and only for derived attributes")
    func versionHash() throws {
        func model(_ derivation: ModelExpression?) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                Entity("Person") {
                    Attribute("name", .string)
                    Attribute("key", .string, derivation: derivation)
                }
            }
        }
        let plain = try model(nil)
        let lower = try model("lowercase(name)")
        let spaced = try model("LOWERCASE( name )")
        let upper = try model("uppercase(name)")
        #expect(lower.versionHash != plain.versionHash)
        #expect(lower.versionHash != upper.versionHash)
        #expect(spaced.versionHash == lower.versionHash)
        #expect(spaced == lower)
        // The documented encoding: the type string names the derivation.
        var e = VersionHashEncoder()
        e.string("Strata.EntityVersionHash.1")
        e.string("Person")
        e.bool(false)
        e.optional(nil)
        e.optional(nil)
        e.count(2)
        for (name, type) in [("key", "derived(string, lowercase(name))"), ("name", "string")] {
            e.string(name)
            e.string(type)
            e.bool(true)
            e.optional(nil)
        }
        e.count(0)
        #expect(try #require(lower.entity(named: "Person")).versionHash == Data(SHA256.hash(e.bytes)))
    }
}
