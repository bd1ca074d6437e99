import Foundation
import Testing

@testable import StrataModel

@Suite("Model checking")
struct ModelCheckingTests {
    /// The single issue a model reports, or a recorded failure.
    func issue(_ build: () throws -> ManagedObjectModel) throws -> ModelError.Issue {
        let error = try #require(throws: ModelError.self) { _ = try build() }
        try #require(error.issues.count == 1, "\(error)")
        return error.issues[0]
    }

    @Test func unknownDestination() throws {
        let i = try issue { try ManagedObjectModel { Entity("Player") { Relationship("team", to: "Teem") } } }
        #expect(i.kind == .unknownDestination)
        #expect((i.entity, i.property) == ("Player", "team"))
        #expect(i.location == "entities[0].relationships[0].destination")
        #expect(i.description == "Entity 'Player', property 'team' (entities[0].relationships[0].destination): destination entity 'Teem' of relationship 'team' does not exist")
    }

    @Test func inverseNotFound() throws {
        let i = try issue {
            try ManagedObjectModel {
                Entity("Team") {}
                Entity("Player") { Relationship("team", to: "Team", inverse: "players") }
            }
        }
        #expect(i.kind == .inverseNotFound)
        #expect((i.entity, i.property) == ("Player", "team"))
        #expect(i.message == "inverse 'players' of relationship 'team' is not a relationship of 'Team'")
    }

    @Test("An inverse that names a different relationship back")
    func inverseDoesNotPointBack() throws {
        let error = try #require(throws: ModelError.self) {
            try ManagedObjectModel {
                Entity("Team") {
                    Relationship("players", to: "Player", inverse: "team", toMany: true)
                    Relationship("captain", to: "Player", inverse: "team")
                }
                Entity("Player") { Relationship("team", to: "Team", inverse: "players") }
            }
        }
        #expect(error.kinds == [.inverseMismatch])
        #expect(error.issues[0].property == "captain")
        #expect(error.issues[0].message.contains("its inverse is 'players', not 'captain'"))
    }

    @Test("An inverse on an entity that points elsewhere")
    func inversePointsElsewhere() throws {
        let i = try issue {
            try ManagedObjectModel {
                Entity("A") { Relationship("b", to: "B", inverse: "c") }
                Entity("B") { Relationship("c", to: "C", inverse: "b") }
                Entity("C") { Relationship("b", to: "B", inverse: "c") }
            }
        }
        #expect(i.kind == .inverseMismatch)
        #expect((i.entity, i.property) == ("A", "b"))
        #expect(i.message.contains("points to 'C', not back to 'A'"))
    }

    @Test func duplicateEntity() throws {
        let i = try issue { try ManagedObjectModel { Entity("Run") {}; Entity("Run") {} } }
        #expect(i.kind == .duplicateEntity)
        #expect(i.entity == "Run")
        #expect(i.location == "entities[1].name")
    }

    @Test func duplicateProperty() throws {
        let i = try issue {
            try ManagedObjectModel {
                Entity("Team") { Attribute("name", .string); Relationship("name", to: "Team") }
            }
        }
        #expect(i.kind == .duplicateProperty)
        #expect((i.entity, i.property) == ("Team", "name"))
        #expect(i.location == "entities[0].relationships[0].name")
    }

    @Test("A property clashing with an inherited one")
    func inheritedClash() throws {
        let i = try issue {
            try ManagedObjectModel {
                Entity("Base") { Attribute("name", .string) }
                Entity("Derived", parent: "Base") { Attribute("name", .string) }
            }
        }
        #expect(i.kind == .duplicateProperty)
        #expect((i.entity, i.property) == ("Derived", "name"))
        #expect(i.message.contains("inherited from 'Base'"))
    }

    @Test func wrongDefaultType() throws {
        let i = try issue { try ManagedObjectModel { Entity("Run") { Attribute("processID", .int32, default: "minus one") } } }
        #expect(i.kind == .wrongValueType)
        #expect((i.entity, i.property) == ("Run", "processID"))
        #expect(i.location == "entities[0].attributes[0].defaultValue")
        #expect(i.message.contains(#"default value string "minus one" of attribute 'processID' does not match its type int32"#))
    }

    @Test("An integer default out of the attribute's range")
    func outOfRangeDefault() throws {
        let i = try issue { try ManagedObjectModel { Entity("E") { Attribute("small", .int16, default: 70_000) } } }
        #expect(i.kind == .wrongValueType)
        #expect(i.message.contains("range of int16"))
    }

    @Test("A mandatory attribute without a default in a concrete entity")
    func missingDefault() throws {
        let i = try issue { try ManagedObjectModel { Entity("Run") { Attribute("date", .date).required() } } }
        #expect(i.kind == .missingDefaultValue)
        #expect((i.entity, i.property) == ("Run", "date"))
        #expect(i.message.contains("is mandatory but has no default value"))
    }

    @Test("Allowed: abstract entity, transient, optional, provided at insert")
    func missingDefaultExemptions() throws {
        let model = try ManagedObjectModel {
            Entity("Base", abstract: true) { Attribute("a", .string).required() }
            Entity("Run") {
                Attribute("b", .string).required().transient()
                Attribute("c", .string)
                Attribute("d", .date).required().providedAtInsert()
            }
        }
        #expect(model.checkingIssues().isEmpty)
        #expect(model.entity(named: "Run")?.attributesByName.keys.sorted() == ["b", "c", "d"])
    }

    @Test("A concrete sub-entity of an abstract entity inherits the obligation")
    func inheritedMissingDefault() throws {
        let i = try issue {
            try ManagedObjectModel {
                Entity("Base", abstract: true) { Attribute("a", .string).required() }
                Entity("Leaf", parent: "Base") {}
            }
        }
        #expect(i.kind == .missingDefaultValue)
        #expect((i.entity, i.property) == ("Leaf", "a"))
        #expect(i.message.contains("inherited from abstract 'Base'"))
    }

    @Test func badRegularExpression() throws {
        let i = try issue { try ManagedObjectModel { Entity("P") { Attribute("email", .string).matching("[a-z") } } }
        #expect(i.kind == .invalidRegularExpression)
        #expect((i.entity, i.property) == ("P", "email"))
        #expect(i.message.contains(#"regular expression "[a-z" of attribute 'email' does not compile"#))
    }

    @Test("Bad predicates: validation, fetched property and template, with the parser's message")
    func badPredicates() throws {
        let error = try #require(throws: ModelError.self) {
            try ManagedObjectModel {
                Entity("Run") {
                    Attribute("pid", .int32).validated(by: "SELF >", warning: "w")
                    FetchedProperty("others", entity: "Run", predicate: "pid ==")
                }
                FetchRequestTemplate("t", entity: "Run", predicate: "AND AND")
            }
        }
        #expect(error.kinds == [.invalidPredicate, .invalidPredicate, .invalidPredicate])
        #expect(error.issues.map(\.property) == ["pid", "others", nil])
        #expect(error.issues[0].message.hasPrefix(#"validation predicate "SELF >" of attribute 'pid' does not parse: "#))
        // The parser's own message (with its position) is carried through.
        let parserMessage = ModelPredicate("SELF >").syntaxError ?? ""
        #expect(!parserMessage.isEmpty)
        #expect(error.issues[0].message.hasSuffix(parserMessage))
    }

    @Test func unknownSuperentity() throws {
        let i = try issue { try ManagedObjectModel { Entity("Manager", parent: "Employe") {} } }
        #expect(i.kind == .unknownSuperentity)
        #expect(i.entity == "Manager")
        #expect(i.message == "superentity 'Employe' does not exist")
    }

    @Test func inheritanceCycle() throws {
        let error = try #require(throws: ModelError.self) {
            try ManagedObjectModel {
                Entity("A", parent: "C") {}
                Entity("B", parent: "A") {}
                Entity("C", parent: "B") {}
                Entity("Self", parent: "Self") {}
            }
        }
        #expect(error.kinds == [.inheritanceCycle, .inheritanceCycle, .inheritanceCycle, .inheritanceCycle])
        #expect(error.issues[0].message == "entity inherits from itself: A → C → B → A")
        #expect(error.issues[3].message == "entity inherits from itself: Self → Self")
    }

    @Test("Uniqueness constraints on unknown, to-many and transient properties")
    func uniqueness() throws {
        let error = try #require(throws: ModelError.self) {
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("cache", .string).transient()
                    Relationship("players", to: "Team", toMany: true)
                    Unique("mail")
                    Unique("players")
                    Unique("cache")
                }
            }
        }
        #expect(error.kinds == [.invalidUniquenessConstraint, .invalidUniquenessConstraint, .invalidUniquenessConstraint])
        #expect(error.issues.map(\.property) == ["mail", "players", "cache"])
        #expect(error.issues[1].message.contains("to-many relationship 'players'"))
    }

    @Test("Ranges: min > max, negative, and rules on the wrong type", arguments: [
        (Attribute("n", .int32).range(min: 10, max: 1), "minimumValue 10 is greater than maximumValue 1"),
        (Attribute("s", .string).length(min: 5, max: 2), "minimumLength 5 is greater than maximumLength 2"),
        (Attribute("s", .string).length(min: -1), "minimumLength -1 is negative"),
        (Attribute("b", .boolean).range(min: 0), "minimumValue applies only to numeric and date attributes"),
        (Attribute("n", .int32).length(max: 3), "maximumLength applies only to string and binary data attributes"),
        (Attribute("n", .int32).matching("x"), "a regular expression applies only to string attributes"),
        (Attribute("n", .int32).range(max: "high"), "maximumValue string \"high\" of attribute 'n' does not match its type int32"),
    ])
    func ranges(attribute: AttributeDescription, message: String) throws {
        let error = try #require(throws: ModelError.self) { try ManagedObjectModel { Entity("E") { attribute } } }
        #expect(error.issues.count == 1)
        #expect(error.issues.first?.message.contains(message) == true, "\(error)")
    }

    @Test("Relationship counts")
    func relationshipCounts() throws {
        let error = try #require(throws: ModelError.self) {
            try ManagedObjectModel {
                Entity("T") {
                    Relationship("a", to: "T", toMany: true).count(min: 3, max: 1)
                    Relationship("b", to: "T").count(max: 2)
                    Relationship("c", to: "T", ordered: true)
                }
            }
        }
        #expect(error.kinds == [.invalidRange, .invalidRange, .invalidRange])
        #expect(error.issues.map(\.property) == ["a", "b", "c"])
    }

    @Test("Fetched properties and templates naming unknown entities; duplicate templates")
    func unknownEntities() throws {
        let error = try #require(throws: ModelError.self) {
            try ManagedObjectModel {
                Entity("T") { FetchedProperty("f", entity: "Nope", predicate: "TRUEPREDICATE") }
                FetchRequestTemplate("x", entity: "Gone")
                FetchRequestTemplate("x", entity: "T")
            }
        }
        #expect(error.kinds == [.invalidFetchedProperty, .invalidFetchRequestTemplate, .invalidFetchRequestTemplate])
        #expect(error.issues[1].message == "fetch request template 'x' names entity 'Gone', which does not exist")
        #expect(error.issues[2].message == "another fetch request template is already named 'x'")
    }

    @Test("Names must be identifiers", arguments: ["", "first name", "a.b", "1st"])
    func invalidNames(name: String) throws {
        let error = try #require(throws: ModelError.self) { try ManagedObjectModel { Entity("E") { Attribute(name, .string) } } }
        #expect(error.kinds == [.invalidName])
    }

    @Test("Every problem is reported at once, in model order")
    func allAtOnce() throws {
        let error = try #require(throws: ModelError.self) {
            try ManagedObjectModel {
                Entity("Player") {
                    Attribute("age", .int16, default: "old")
                    Attribute("email", .string).matching("(")
                    Relationship("team", to: "Teem")
                }
                Entity("Player") {}
            }
        }
        #expect(error.kinds == [.wrongValueType, .invalidRegularExpression, .unknownDestination, .duplicateEntity])
        #expect(error.issues.last?.location == "entities[1].name")
        #expect(error.description.hasPrefix("The model has 4 problems:\n  - Entity 'Player'"))
    }

    @Test("validate() on a model assembled by hand; checkingIssues() without throwing")
    func manualValidate() {
        var model = ManagedObjectModel()
        model.entities = [Entity("A") { Relationship("b", to: "B") }]
        #expect(model.checkingIssues().map(\.kind) == [.unknownDestination])
        #expect(throws: ModelError.self) { try model.validate() }
    }
}
