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

    // MARK: Non-finite constants: printing and equality

    @Test("a date at NaN or an infinity prints as a CAST that parses back", arguments: [Double.nan, .infinity, -.infinity])
    func nonFiniteDateRoundTrip(_ seconds: Double) throws {
        // Before, these printed as `CAST(nan, "NSDate")`, which reads `nan` as a key path and
        // doesn't parse.
        let predicate = try FormatPredicate(format: "d == %@", Date(timeIntervalSinceReferenceDate: seconds))
        #expect(predicate.description == "d == CAST(CAST(\"\(seconds)\", \"NSNumber\"), \"NSDate\")")
        #expect(try FormatPredicate(format: predicate.description) == predicate)
    }

    @Test("a predicate holding NaN equals itself, hashes consistently and round-trips")
    func nanConstantsAreEqual() throws {
        // Before, `.double(.nan) != .double(.nan)`: the predicate wasn't equal to itself, a
        // Set couldn't find it, and its description didn't parse back to an equal predicate.
        let predicates = [
            try FormatPredicate(format: "a == %@", Double.nan),
            try FormatPredicate(format: "d == %@", Date(timeIntervalSinceReferenceDate: .nan)),
            try FormatPredicate(format: "x IN %@", [Double.nan, 1.0]),
            try FormatPredicate(format: "p == %@", Decimal.nan),
        ]
        for predicate in predicates {
            #expect(predicate == predicate, "\(predicate)")
            #expect(Set([predicate]).contains(predicate), "\(predicate)")
        }
        for predicate in predicates.prefix(3) {
            #expect(try FormatPredicate(format: predicate.description) == predicate, "\(predicate)")
        }
        // NaNs with different payloads are the same constant.
        let quiet = PredicateConstant.double(Double(nan: 7, signaling: false))
        #expect(quiet == .double(.nan))
        #expect(quiet.hashValue == PredicateConstant.double(.nan).hashValue)
        // Zero's sign doesn't matter (as before): 0.0 == -0.0.
        #expect(PredicateConstant.double(0.0) == .double(-0.0))
        #expect(PredicateConstant.double(0.0).hashValue == PredicateConstant.double(-0.0).hashValue)
        // Evaluation is unchanged: NaN is unordered and equal to nothing.
        #expect(try !FormatPredicate(format: "SELF == %@", Double.nan).evaluate(with: Double.nan))
    }


    // MARK: String escapes

    @Test("a \\u escape takes hexadecimal digits only, no sign", arguments: ["a == '\\u+041'", "a == '\\u{+41}'", "a == '\\u-041'", "a == '\\u{-1}'"])
    func unicodeEscapeRejectsSigns(_ format: String) throws {
        // Before, `UInt32(_:radix:)` accepted a leading `+`, so '\u+041' was "A".
        let error = try #require(throws: FormatPredicateError.self) { try FormatPredicate(format: format) }
        #expect(error.kind == .syntax)
        #expect(error.position == 6)
        #expect(error.message.contains("unicode escape"))
    }

    @Test("valid \\u escapes still read their scalar")
    func unicodeEscapesStillWork() throws {
        #expect(try FormatPredicate(format: "SELF == '\\u0041\\u{1F600}\\u00e9'").evaluate(with: "A😀é"))
    }


    // MARK: %K after a dot

    @Test("a %K after a dot may hold a dotted key path, as at the start of one")
    func keyPathArgumentAfterDot() throws {
        // Before, `address.%K` with "city.name" was a syntax error ("unexpected a %K argument
        // in key path"), while `%K.name` with "address.city" worked.
        let predicate = try FormatPredicate(format: "address.%K == 'Oslo'", "city.name")
        #expect(predicate == (try FormatPredicate(format: "address.city.name == 'Oslo'")))
        let object: [String: Any] = ["address": ["city": ["name": "Oslo"] as [String: Any]] as [String: Any]]
        #expect(try predicate.evaluate(with: object))
        let both = try FormatPredicate(format: "%K.%K == 'Oslo'", "address", "city.name")
        #expect(both == predicate)
        let operatorTail = try FormatPredicate(format: "tags.%K == 2", "@count")
        #expect(operatorTail == (try FormatPredicate(format: "tags.@count == 2")))
        #expect(try operatorTail.evaluate(with: ["tags": ["a", "b"]] as [String: Any]))
    }

    @Test("a FormatKeyPath given for %K is checked like a string", arguments: [
        FormatKeyPath(components: []), FormatKeyPath("first name"), FormatKeyPath("a..b"), FormatKeyPath("a.1b"),
    ])
    func keyPathArgumentChecked(_ path: FormatKeyPath) throws {
        // Before, it was taken as given: `first name == 1` was its description, which
        // doesn't parse.
        let error = try #require(throws: FormatPredicateError.self) { try FormatPredicate(format: "x == 1 AND %K == 1", path) }
        #expect(error.kind == .unsupportedArgument)
        #expect(error.position == 11)
    }

    @Test("a valid FormatKeyPath for %K still works, reserved words and operators included")
    func validKeyPathArgument() throws {
        let predicate = try FormatPredicate(format: "%K == 2", FormatKeyPath(components: [.key("order"), .key("in"), .collectionOperator(.count)]))
        #expect(predicate.description == "order.#in.@count == 2")
        #expect(try FormatPredicate(format: predicate.description) == predicate)
    }

    // MARK: MATCHES patterns ending in a comment or a quotation

    @Test("a valid pattern ending in a (?x) comment or a \\Q quotation matches the whole string", arguments: [
        ("SELF MATCHES '(?x) a b  # letters'", "ab", true),
        ("SELF MATCHES '(?x) a b  # letters'", "abc", false),
        ("SELF MATCHES '(?x) a b  # letters'", "a b", false),
        ("SELF MATCHES '\\\\Qa.b'", "a.b", true),
        ("SELF MATCHES '\\\\Qa.b'", "axb", false),
        ("SELF MATCHES '\\\\Qa.b'", "a.bc", false),
        ("SELF MATCHES[c] 'x\\\\QA.B'", "xa.b", true),
    ])
    func regexEndingInCommentOrQuotation(_ format: String, _ subject: String, _ expected: Bool) throws {
        // Before, wrapping the pattern as \A(?:…)\z put the closing `)\z` inside the comment
        // or the quotation, and the valid pattern was reported as invalidRegularExpression.
        #expect(try FormatPredicate(format: format).evaluate(with: subject) == expected)
        // The same from a key path (compiled through the pattern cache, not up front).
        let pattern = try #require(format.split(separator: "'").dropFirst().first).replacingOccurrences(of: "\\\\", with: "\\")
        let options = format.contains("[c]") ? "[c]" : ""
        #expect(try FormatPredicate(format: "SELF MATCHES\(options) $p").evaluate(with: subject, substitutionVariables: ["p": pattern]) == expected)
    }

    @Test("an invalid pattern is still invalidRegularExpression", arguments: ["a)(b", "(?x) (", "ab\\"])
    func invalidPatternsStillFail(_ pattern: String) throws {
        let error = try #require(throws: PredicateEvaluationError.self) {
            try FormatPredicate(format: "SELF MATCHES %@", pattern).evaluate(with: "x")
        }
        #expect(error.kind == .invalidRegularExpression)
    }
}
