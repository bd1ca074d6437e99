import Foundation
import StrataPredicate
import StrataTestSupport
import Testing

@testable import StrataModel

/// Session 34 (helper 5): a failure of a rule Core Data keeps as a predicate — a validation
/// predicate, a minimum or maximum, a length, a pattern — names the predicate that failed
/// under `NSValidationPredicateErrorKey` (`"NSValidationErrorPredicate"`), as Core Data's does.
@Suite("Validation failures name their predicate")
struct ValidationPredicateKeyTests {
    @Test("seed 001: processID -1 fails SELF > 0: the failure and its NSError name the predicate (before: no NSValidationErrorPredicate)")
    func validationPredicate() throws {
        let failures = try SeedModels.run.validateValue(.int32(-1), forKey: "processID", in: "Run")
        #expect(failures.count == 1)
        let failure = try #require(failures.first)
        #expect(failure.predicate?.format == "SELF > 0")
        let error = failure as NSError
        #expect(ErrorUserInfoKey.validationPredicate == "NSValidationErrorPredicate")
        let predicate = error.userInfo[ErrorUserInfoKey.validationPredicate] as? FormatPredicate
        #expect(predicate?.description == "SELF > 0")
        // Its other keys are as before.
        #expect(error.userInfo[ErrorUserInfoKey.validationKey] as? String == "processID")
        #expect(error.userInfo[ErrorUserInfoKey.validationValue] as? Int32 == -1)
    }

    @Test(
        "minimum and maximum (1620/1610, dates 1640/1630), lengths (1670/1660), the pattern (1680) name the predicate Core Data keeps for them",
        arguments: [
            (Attribute("n", .int32).range(min: 1, max: 10), AttributeValue.int32(0), 1620, "SELF >= 1"),
            (Attribute("n", .int32).range(min: 1, max: 10), .int32(11), 1610, "SELF <= 10"),
            (Attribute("s", .string).length(min: 2, max: 4), .string("a"), 1670, "length >= 2"),
            (Attribute("s", .string).length(min: 2, max: 4), .string("abcde"), 1660, "length <= 4"),
            (Attribute("s", .string).matching("[a-z]+"), .string("AB"), 1680, "SELF MATCHES \"[a-z]+\""),
        ])
    func ruleAsPredicate(_ attribute: AttributeDescription, _ value: AttributeValue, _ code: Int, _ format: String) throws {
        let failures = attribute.validate(value, entity: "E")
        #expect(failures.map(\.code.rawValue) == [code])
        let failure = try #require(failures.first)
        #expect(failure.predicate?.format == format)
        #expect(failure.predicate?.syntaxError == nil)
        let predicate = (failure as NSError).userInfo[ErrorUserInfoKey.validationPredicate] as? FormatPredicate
        #expect(predicate?.description == format)
    }

    @Test("a date's minimum and maximum are named with the date as CAST(seconds since 2001, \"NSDate\"), and the predicate refuses the value it names")
    func datePredicate() throws {
        let day = Attribute("d", .date).range(min: "2020-01-01T00:00:00Z", max: "2030-01-01T00:00:00Z")
        let early = Date(timeIntervalSince1970: 0)
        let failure = try #require(day.validate(.date(early), entity: "E").first)
        #expect(failure.code.rawValue == 1640)
        let predicate = try #require(failure.predicate?.predicate)
        #expect(failure.predicate?.format.hasPrefix("SELF >= CAST(") == true, "\(String(describing: failure.predicate))")
        #expect(try predicate.evaluate(with: early, substitutionVariables: [:]) == false)
        #expect(try predicate.evaluate(with: Date(timeIntervalSince1970: 1_800_000_000), substitutionVariables: [:]) == true)
    }

    @Test("a missing value (1570) and a value of another type (1550) have no predicate")
    func noPredicate() throws {
        let failures = try SeedModels.run.validateValue(nil, forKey: "date", in: "Run")
        #expect(failures.first?.predicate == nil)
        #expect((try #require(failures.first) as NSError).userInfo[ErrorUserInfoKey.validationPredicate] == nil)
        #expect(Attribute("s", .string).validate(.int32(1), entity: "E").first?.predicate == nil)
    }
}
