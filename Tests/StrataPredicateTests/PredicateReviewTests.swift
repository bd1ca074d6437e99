import Foundation
import StrataPredicate
import Testing

// MARK: - Review (session 26): the predicate language against NSPredicate and spec 0003

@Suite("Predicate language review")
struct PredicateReviewTests {
    // MARK: NSNumber and NSDecimalNumber arguments and values

    @Test("an NSNumber argument is classified by its objCType, not by what it bridges to")
    func nsNumberArgumentsByObjCType() throws {
        // Before, NSNumber(value: 1) bridged to Bool first and printed (and compared in the
        // tree) as TRUE; NSNumber(value: 0.0) as FALSE.
        let one = try FormatPredicate(format: "a == %@", NSNumber(value: 1))
        #expect(one.description == "a == 1")
        #expect(one == (try FormatPredicate(format: "a == 1")))
        let zero = try FormatPredicate(format: "a == %@", NSNumber(value: 0.0))
        #expect(zero.description == "a == 0.0")
        let yes = try FormatPredicate(format: "a == %@", NSNumber(value: true))
        #expect(yes.description == "a == TRUE")
    }

    @Test("an NSDecimalNumber argument is a decimal, not a double that misses the decimal it holds")
    func nsDecimalNumberArgument() throws {
        // Before, NSDecimalNumber(string: "19.99") became the double 19.990000000000002, so
        // `price == %@` didn't match a decimal price of 19.99.
        let price = try FormatPredicate(format: "price == %@", NSDecimalNumber(string: "19.99"))
        #expect(price == (try FormatPredicate(format: "price == CAST('19.99', 'NSDecimalNumber')")))
        #expect(try price.evaluate(with: ["price": Decimal(string: "19.99")!] as [String: Any]))
        let whole = try FormatPredicate(format: "price == %@", NSDecimalNumber(value: 1))
        #expect(whole.description == "price == CAST(\"1\", \"NSDecimalNumber\")")
    }

    @Test("an NSDecimalNumber read from an object compares as the decimal it holds")
    func nsDecimalNumberValue() throws {
        let predicate = try FormatPredicate(format: "price == CAST('19.99', 'NSDecimalNumber')")
        #expect(try predicate.evaluate(with: ["price": NSDecimalNumber(string: "19.99")] as [String: Any]))
        #expect(try FormatPredicate(format: "SELF > CAST('19.98', 'NSDecimalNumber')").evaluate(with: NSDecimalNumber(string: "19.99")))
        #expect(try !FormatPredicate(format: "SELF > CAST('19.99', 'NSDecimalNumber')").evaluate(with: NSDecimalNumber(string: "19.99")))
    }
}
