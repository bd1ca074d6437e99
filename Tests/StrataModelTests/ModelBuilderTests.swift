import Foundation
import StrataPredicate
import StrataTestSupport
import Testing

@testable import StrataModel

@Suite("Building models and looking things up")
struct ModelBuilderTests {
    @Test("Seed 001's Run model has the seed's attributes, default, predicate and localization")
    func runModel() throws {
        let model = try SeedModels.run
        let run = try #require(model.entity(named: "Run"))
        #expect(run.managedObjectClassName == "Run")
        let pid = try #require(run.attributesByName["processID"])
        #expect(pid.attributeType == .int32)
        #expect(pid.defaultValue == .int32(-1))
        #expect(!pid.isOptional)
        #expect(pid.validationPredicates.map(\.predicate.format) == [try FormatPredicate(format: "SELF > 0").description])
        #expect(pid.validationWarnings == ["Process ID < 1"])
        #expect(run.attributesByName["date"]?.attributeType == .date)
        #expect(model.localizationDictionary["Property/processID/Entity/Run"] == "Process ID")
    }

    @Test("The builder equals the same model assembled by hand, property by property")
    func builderEqualsProgrammatic() throws {
        var date = AttributeDescription("date", .date)
        date.isOptional = false
        date.isProvidedAtInsert = true
        var pid = AttributeDescription("processID", .int32)
        pid.isOptional = false
        pid.defaultValue = .int32(-1)
        pid.validationPredicates = [ValidationPredicate(ModelPredicate("SELF > 0"), warning: "Process ID < 1")]
        var model = ManagedObjectModel()
        model.entities = [EntityDescription(name: "Run", managedObjectClassName: "Run", attributes: [date, pid])]
        model.localizationDictionary = [
            "Property/date/Entity/Run": "Date", "Property/processID/Entity/Run": "Process ID",
            "ErrorString/Process ID < 1": "Process ID must not be less than 1",
        ]
        try model.validate()
        #expect(model == (try SeedModels.run))
    }

    @Test("Relationships resolve destination and inverse through the model (seed 004)")
    func leagueManager() throws {
        let model = try SeedModels.leagueManager
        let team = try #require(model.entity(named: "Team"))
        let players = try #require(team.relationshipsByName["players"])
        #expect(players.isToMany)
        #expect(players.deleteRule == .cascade)
        #expect(model.destinationEntity(of: players)?.name == "Player")
        #expect(model.inverseRelationship(of: players)?.name == "team")
        #expect(model.inverseRelationship(of: "team", in: "Player")?.name == "players")
        let team2 = try #require(model.entity(named: "Player")?.relationshipsByName["team"])
        #expect(!team2.isToMany)
        #expect(team2.deleteRule == .nullify)
    }

    @Test("Seed 001 Student/Class: a one-way monitor next to an inverse pair")
    func studentClass() throws {
        let model = try SeedModels.studentClass
        let classEntity = try #require(model.entity(named: "ClassEntity"))
        #expect(classEntity.relationshipsByName["monitor"]?.inverseName == nil)
        #expect(model.destinationEntity(of: try #require(classEntity.relationshipsByName["monitor"]))?.name == "StudentEntity")
        #expect(model.inverseRelationship(of: "inClass", in: "StudentEntity")?.name == "students")
        #expect(model.entity(named: "StudentEntity")?.attributesByName["name"]?.defaultValue == .string("学生甲"))
    }

    @Test("Seed 000: transient fullName, mandatory department, manager pair, deny rule")
    func employeeDepartment() throws {
        let model = try SeedModels.employeeDepartment
        let employee = try #require(model.entity(named: "Employee"))
        #expect(employee.propertiesByName["fullName"]?.isTransient == true)
        #expect(employee.relationshipsByName["department"]?.isOptional == false)
        #expect(model.inverseRelationship(of: "manager", in: "Employee")?.name == "directReports")
        #expect(model.entity(named: "Department")?.relationshipsByName["employees"]?.deleteRule == .deny)
        #expect(employee.attributesByName["salary"]?.minimumValue == .decimal(0))
    }

    @Test("The people model: unique indexed email, indexed age, team/members")
    func people() throws {
        let person = try #require(try SeedModels.people.entity(named: "Person"))
        #expect(person.uniquenessConstraints == [["email"]])
        #expect(person.attributesByName["email"]?.isIndexed == true)
        #expect(person.attributesByName["age"]?.isIndexed == true)
        #expect(person.attributes.map(\.name) == ["firstName", "lastName", "email", "age", "score"])
        #expect(try SeedModels.people.inverseRelationship(of: "team", in: "Person")?.name == "members")
    }

    @Test("Sub-entities inherit properties; isKindOf follows the chain")
    func inheritance() throws {
        let model = try KitchenSink.model
        let person = try #require(model.entity(named: "Person"))
        let employee = try #require(model.entity(named: "Employee"))
        let manager = try #require(model.entity(named: "Manager"))
        #expect(person.isAbstract)
        #expect(person.subentityNames == ["Employee"])
        #expect(model.subentities(of: employee).map(\.name) == ["Manager"])
        #expect(model.superentity(of: manager)?.name == "Employee")
        #expect(manager.superentityNames == ["Employee", "Person"])
        #expect(manager.isKindOf(entity: person))
        #expect(manager.isKindOf(entityNamed: "Employee"))
        #expect(!employee.isKindOf(entity: manager))
        #expect(manager.attributes.map(\.name) == ["tags"])
        #expect(manager.attributesByName["email"]?.isIndexed == true)
        #expect(manager.relationshipsByName["department"]?.destinationEntityName == "Department")
        #expect(manager.fetchedPropertiesByName["colleagues"]?.entityName == "Employee")
        #expect(manager.properties.prefix(4).map(\.name) == ["firstName", "lastName", "email", "fullName"])
        #expect(manager.propertiesByName.count == manager.properties.count)
        #expect(employee.managedObjectClassName == "EmployeeObject")
        #expect(employee.renamingIdentifier == "Staff")
        // An inverse may point at a superentity of the relationship's owner.
        #expect(model.inverseRelationship(of: "reports", in: "Manager")?.name == "manager")
    }

    @Test("Changing a model's entities re-resolves inheritance")
    func mutation() throws {
        var model = try KitchenSink.model
        var entities = model.entities
        entities[0].attributes.append(Attribute("nickname", .string))
        model.entities = entities
        #expect(model.entity(named: "Manager")?.attributesByName["nickname"] != nil)
        try model.validate()
    }

    @Test("Builder control flow: if, else and for")
    func controlFlow() throws {
        let withExtra = true
        let model = try ManagedObjectModel {
            Entity("Sample") {
                for i in 1...3 { Attribute("value\(i)", .double) }
                if withExtra { Attribute("extra", .string) } else { Attribute("other", .string) }
            }
            if !withExtra { Entity("Never") {} }
        }
        #expect(model.entities.map(\.name) == ["Sample"])
        #expect(model.entity(named: "Sample")?.attributes.map(\.name) == ["value1", "value2", "value3", "extra"])
    }

    @Test("Literal defaults convert to the attribute's type")
    func literalDefaults() {
        #expect(Attribute("a", .int16, default: 5).defaultValue == .int16(5))
        #expect(Attribute("a", .float, default: 5).defaultValue == .float(5))
        #expect(Attribute("a", .decimal, default: 2.5).defaultValue == .decimal(Decimal(string: "2.5") ?? 0))
        #expect(Attribute("a", .date, default: "1970-01-01T00:00:00Z").defaultValue == .date(Date(timeIntervalSince1970: 0)))
        // Not convertible: kept as written, for the checker to report.
        #expect(Attribute("a", .int16, default: 70_000).defaultValue == .int64(70_000))
        #expect(Attribute("a", .boolean, default: 1).defaultValue == .int64(1))
    }

    @Test("Fetch request templates substitute $variables (seed 003's age range)")
    func fetchTemplate() throws {
        let model = try SeedModels.person
        let request = try #require(
            try model.fetchRequestTemplate(named: "peopleInAgeRange", substitutionVariables: ["MIN": 100, "MAX": 200]))
        #expect(request.entity.name == "Person")
        let predicate = try #require(request.predicate)
        #expect(!predicate.description.contains("$"))
        #expect(try predicate.evaluate(with: ["age": 150]))
        #expect(try !predicate.evaluate(with: ["age": 99]))
        #expect(try model.fetchRequestTemplate(named: "nope") == nil)
        #expect(try model.fetchRequestTemplate(named: "peopleInAgeRange", substitutionVariables: ["MIN": 1, "MAX": 2])?.predicate != predicate)
    }

    @Test("A template without a predicate fetches the whole entity")
    func templateWithoutPredicate() throws {
        let request = try #require(try KitchenSink.model.fetchRequestTemplate(named: "allDepartments"))
        #expect(request.entity.name == "Department")
        #expect(request.predicate == nil)
    }

    @Test("Property access through PropertyDescription")
    func propertyDescription() throws {
        let employee = try #require(try KitchenSink.model.entity(named: "Employee"))
        let mentees = try #require(employee.propertiesByName["mentees"])
        #expect(mentees.kindName == "relationship")
        #expect(mentees.relationship?.isOrdered == true)
        #expect(mentees.relationship?.maxCount == 5)
        #expect(mentees.renamingIdentifier == "apprentices")
        #expect(mentees.userInfo == ["note": "one-way"])
        #expect(mentees.attribute == nil)
        #expect(employee.propertiesByName["colleagues"]?.isTransient == true)
        #expect(employee.propertiesByName["salary"]?.attribute?.attributeType == .decimal)
    }

    @Test("Model predicates keep the parsed predicate, or the syntax error for the checker")
    func modelPredicate() throws {
        let good: ModelPredicate = "SELF > 0"
        #expect(good.syntaxError == nil)
        #expect(try good.predicate?.evaluate(with: 5) == true)
        #expect(good == ModelPredicate(try FormatPredicate(format: "SELF > 0")))
        let bad = ModelPredicate("SELF >")
        #expect(bad.predicate == nil)
        #expect(bad.format == "SELF >")
        #expect(bad != good)
        let decoded = try JSONDecoder().decode(ModelPredicate.self, from: JSONEncoder().encode(good))
        #expect(decoded == good)
    }

    @Test("Entities compare by what they declare and survive Codable")
    func entityEquality() throws {
        let model = try KitchenSink.model
        let manager = try #require(model.entity(named: "Manager"))
        let declared = try #require(model.entities.first { $0.name == "Manager" })
        #expect(manager == declared)
        let decoded = try JSONDecoder().decode(EntityDescription.self, from: JSONEncoder().encode(manager))
        #expect(decoded == manager)
        #expect(decoded.attributesByName["tags"] != nil)
        #expect(decoded.attributesByName["email"] == nil)  // inheritance is the model's to resolve
    }
}
