import Foundation
import StrataTestSupport
import Testing

@testable import StrataModel

@Suite("Validating values")
struct ValidationTests {
    @Test("Seed 001: processID -1 fails SELF > 0 with the localized warning (1550)")
    func runProcessID() throws {
        let model = try SeedModels.run
        let failures = model.validateValue(.int32(-1), forKey: "processID", in: "Run")
        #expect(failures.map(\.code) == [.managedObjectValidation])
        #expect(failures.first?.message == "Process ID must not be less than 1")
        #expect(failures.first?.entity == "Run")
        #expect(failures.first?.key == "processID")
        #expect(failures.first?.value == .int32(-1))
        #expect(model.validateValue(.int32(42), forKey: "processID", in: "Run").isEmpty)
    }

    @Test("Missing mandatory value: 1570 with the localized property name")
    func missingMandatory() throws {
        let failures = try SeedModels.run.validateValue(nil, forKey: "date", in: "Run")
        #expect(failures.map(\.code.rawValue) == [1570])
        #expect(failures.first?.message == "Date is a required value.")
        #expect(failures.first?.description == "Run.date: Date is a required value. (code 1570)")
    }

    static let rules = Attribute("n", .int32).range(min: 1, max: 10)
    static let text = Attribute("s", .string).length(min: 2, max: 4).matching("[a-z]+|[0-9]+x")
    static let day = Attribute("d", .date).range(min: "2020-01-01T00:00:00Z", max: "2030-01-01T00:00:00Z")

    @Test("Codes match Core Data's constants", arguments: [
        (rules, AttributeValue.int32(0), [1620]),
        (rules, .int32(11), [1610]),
        (rules, .int32(5), []),
        (text, .string("a"), [1670]),
        (text, .string("abcde"), [1660]),
        (text, .string("abc1"), [1680]),
        (text, .string("AB"), [1680]),
        (text, .string("12x"), []),
        (text, .string("ab"), []),
        (day, .date(Date(timeIntervalSince1970: 0)), [1640]),
        (day, .date(Date(timeIntervalSince1970: 4_000_000_000)), [1630]),
        (Attribute("b", .binaryData).length(max: 2), .binaryData(Data([1, 2, 3])), [1660]),
        (Attribute("s", .string), .int32(1), [1550]),
        (Attribute("s", .string), nil, []),
    ])
    func codes(attribute: AttributeDescription, value: AttributeValue?, expected: [Int]) {
        #expect(attribute.validate(value, entity: "E").map(\.code.rawValue) == expected)
    }

    @Test("Messages name the property and the bound")
    func messages() {
        let l = ModelLocalization(["Property/n/Entity/E": "Count"])
        #expect(Self.rules.validate(.int32(0), entity: "E", localization: l).first?.message == "Count is too small (minimum 1).")
        #expect(Self.rules.validate(.int32(99), entity: "E", localization: l).first?.message == "Count is too large (maximum 10).")
        #expect(Self.text.validate(.string("abcdef"), entity: "E").first?.message == "s is too long (maximum length 4).")
    }

    @Test("Regular expressions match the whole string, including alternatives")
    func wholeStringMatch() {
        let a = Attribute("s", .string).matching("a|ab")
        #expect(a.validate(.string("ab"), entity: "E").isEmpty)
        #expect(a.validate(.string("abc"), entity: "E").map(\.code) == [.stringPatternMatching])
    }

    @Test("Relationship counts: a required to-many empty 1580 (its set is counted; before session 33, 1570), 1580, 1590; a required to-one nil 1570; an optional one empty passes whatever its minimum; no count as the value")
    func relationshipCounts() {
        let players = Relationship("players", to: "Player", toMany: true).count(min: 2, max: 3).required()
        #expect(players.validate(count: 0, entity: "Team").map(\.code.rawValue) == [1580])
        #expect(players.validate(count: 0, entity: "Team").first?.message.contains("minimum 2") == true)
        #expect(Relationship("players", to: "Player", toMany: true).required().validate(count: 0, entity: "Team").first?.message.contains("minimum 1") == true)
        #expect(Relationship("players", to: "Player", toMany: true).count(min: 2, max: 3).validate(count: 0, entity: "Team").isEmpty)
        #expect(Relationship("team", to: "Team").required().validate(count: 0, entity: "Player").map(\.code.rawValue) == [1570])
        #expect(players.validate(count: 1, entity: "Team").first?.value == nil)
        #expect(players.validate(count: 1, entity: "Team").map(\.code.rawValue) == [1580])
        #expect(players.validate(count: 4, entity: "Team").map(\.code.rawValue) == [1590])
        #expect(players.validate(count: 2, entity: "Team").isEmpty)
        #expect(Relationship("team", to: "Team").validate(count: 0, entity: "Player").isEmpty)
    }

    @Test("Entity-level validation throws every failure, inherited properties included")
    func entityLevel() throws {
        let model = try SeedModels.employeeDepartment
        let employee = try #require(model.entity(named: "Employee"))
        let error = try #require(throws: ValidationError.self) {
            try employee.validateValues(["salary": .decimal(-1)], localization: model.localization)
        }
        #expect(error.failures.map(\.code.rawValue) == [1620, 1570])
        #expect(error.failures.map(\.key) == ["salary", "department"])
        #expect(error.code == .multipleErrors)
        try employee.validateValues(["salary": .decimal(10)], relationshipCounts: ["department": 1])

        let manager = try #require(try KitchenSink.model.entity(named: "Manager"))
        let inherited = try #require(throws: ValidationError.self) {
            try manager.validateValues(["firstName": .string(""), "lastName": .string("X"), "salary": .decimal(1), "code": .string("AB")],
                                       relationshipCounts: ["department": 1])
        }
        #expect(inherited.failures.map(\.key) == ["firstName"])
        #expect(inherited.code == .stringTooShort)
    }

    @Test("A predicate failure uses the ErrorString localization; without one, the warning itself")
    func predicateWarningLocalization() throws {
        let model = try KitchenSink.model
        let failures = model.validateValue(.string("ABC"), forKey: "code", in: "Manager")
        #expect(failures.map(\.message) == ["A code has exactly two letters"])
        let plain = Attribute("x", .int16).validated(by: "SELF < 5", warning: "Too big")
        #expect(plain.validate(.int16(9), entity: "E").map(\.message) == ["Too big"])
    }
}

@Suite("Localization")
struct LocalizationTests {
    @Test("Seed 001's keys and fallbacks")
    func lookups() throws {
        let l = try SeedModels.run.localization
        #expect(l.propertyName("processID", entity: "Run") == "Process ID")
        #expect(l.propertyName("date", entity: "Run") == "Date")
        #expect(l.propertyName("date", entity: "Other") == "date")
        #expect(l.errorString("Process ID < 1") == "Process ID must not be less than 1")
        #expect(l.errorString("Unknown") == "Unknown")
        #expect(l.entityName("Run") == "Run")
    }

    @Test("Entity names and entity-independent property names")
    func moreKeys() throws {
        let l = try KitchenSink.model.localization
        #expect(l.entityName("Employee") == "Staff member")
        #expect(l.propertyName("code", entity: "Manager") == "Code")
        #expect(l.propertyName("salary", entity: "Employee") == "Salary")
        #expect(l.propertyName("salary", entity: "Manager") == "salary")
    }
}
