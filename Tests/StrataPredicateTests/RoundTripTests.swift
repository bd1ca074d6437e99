import Foundation
import StrataPredicate
import Testing

// MARK: - Description round trip

@Suite("Canonical description parses back to an equal predicate")
struct RoundTripTests {
    @Test("descriptions are canonical", arguments: [
        ("a = 1", "a == 1"),
        ("a <> 1 && b =< 2 || c => 3", "(a != 1 AND b <= 2) OR c >= 3"),
        ("NOT (a = 1 OR b = 2)", "NOT (a == 1 OR b == 2)"),
        ("!a = 1", "NOT a == 1"),
        ("name ==[cd] 'x'", "name ==[cd] \"x\""),
        ("SOME tags == 'x'", "ANY tags == \"x\""),
        ("none tags == 'x'", "NONE tags == \"x\""),
        ("a BETWEEN {1, 2}", "a BETWEEN {1, 2}"),
        ("a IN {1, 'b', nil, yes}", "a IN {1, \"b\", nil, TRUE}"),
        ("SELF.name = 'x'", "name == \"x\""),
        ("#and = 1", "#and == 1"),
        ("a = 0x1F", "a == 31"),
        ("a = 1.5e3", "a == 1500.0"),
        ("a = - 5", "a == -5"),
        ("(a + b) * c > a + b * c", "(a + b) * c > a + b * c"),
        ("a - (b - c) == a - b - c", "a - (b - c) == a - b - c"),
        ("(2 ** 3) ** 2 == 2 ** 3 ** 2", "(2 ** 3) ** 2 == 2 ** 3 ** 2"),
        ("s == \"it's\"", "s == \"it's\""),
        ("s == 'say \"hi\"\\n'", "s == \"say \\\"hi\\\"\\n\""),
        ("s == '50%%'", "s == \"50%%\""),
        ("SUBQUERY(e, $x, $x.a > 1 AND $x.b < 2).@count > 0", "SUBQUERY(e, $x, $x.a > 1 AND $x.b < 2).@count > 0"),
        ("tags[first] == tags[LAST]", "tags[FIRST] == tags[LAST]"),
        ("lowercase(NAME) == 'x'", "lowercase(NAME) == \"x\""),
        ("truepredicate", "TRUEPREDICATE"),
    ] as [(String, String)])
    func canonical(_ input: String, _ expected: String) throws {
        let predicate = try FormatPredicate(format: input)
        #expect(predicate.description == expected)
        #expect(try FormatPredicate(format: predicate.description) == predicate)
    }

    @Test("every kind of constant round-trips", arguments: [
        PredicateConstant.null, .bool(true), .bool(false), .integer(0), .integer(-42), .integer(Int.max), .integer(Int.min),
        .double(0.1), .double(-2.5), .double(1e300), .double(.leastNonzeroMagnitude), .double(.infinity), .double(-.infinity),
        .decimal(Decimal(string: "123.456")!), .decimal(-1), .string(""), .string("quote\" back\\ pct% nl\n ctl\u{1}"),
        .string("Zürich 🇨🇭 e\u{301}"), .date(Date(timeIntervalSinceReferenceDate: 612_705_600.25)),
        .date(Date(timeIntervalSinceReferenceDate: -1e9)), .data(Data([0, 1, 2, 255])), .uuid(UUID()),
        .url(URL(string: "https://example.com/a?b=c")!), .aggregate([]), .aggregate([.integer(1), .aggregate([.string("x")])]),
    ])
    func constantRoundTrip(_ constant: PredicateConstant) throws {
        let predicate = FormatPredicate(.comparison(ComparisonPredicate(.keyPath("value"), .equalTo, .constant(constant))))
        let reparsed = try FormatPredicate(format: predicate.description)
        #expect(reparsed == predicate, "\(predicate.description)")
    }

    @Test("dates print as CAST of seconds since the reference date")
    func datePrintsAsCast() throws {
        let date = Date(timeIntervalSinceReferenceDate: 100.5)
        let predicate = try FormatPredicate(format: "creationDate > %@", date)
        #expect(predicate.description == "creationDate > CAST(100.5, \"NSDate\")")
    }

    @Test("hand-built trees with compound children print with parentheses that preserve grouping")
    func compoundGrouping() throws {
        let a = try FormatPredicate(format: "a == 1"), b = try FormatPredicate(format: "b == 2")
        let c = try FormatPredicate(format: "c == 3")
        let nested = FormatPredicate(.and([a.node, .and([b.node, c.node])]))
        #expect(nested.description == "a == 1 AND (b == 2 AND c == 3)")
        #expect(try FormatPredicate(format: nested.description) == nested)
        // The combinator splices an AND into an AND (the same predicate, one level less).
        let spliced = FormatPredicate.and([a, FormatPredicate.and([b, c])])
        #expect(spliced.description == "a == 1 AND b == 2 AND c == 3")
        #expect(try FormatPredicate(format: spliced.description) == spliced)
        let mixed = FormatPredicate.not(FormatPredicate.or([a, FormatPredicate.and([b, c])]))
        #expect(mixed.description == "NOT (a == 1 OR (b == 2 AND c == 3))")
        #expect(try FormatPredicate(format: mixed.description) == mixed)
    }

    @Test("object identities print in a readable form that is documented not to parse")
    func identityDescription() throws {
        let object = IdentifiedObject(identity: "e1", properties: [:])
        let predicate = try FormatPredicate(format: "manager == %@", object)
        #expect(predicate.description == "manager == <object: e1>")
        #expect(throws: FormatPredicateError.self) { try FormatPredicate(format: predicate.description) }
    }
}
