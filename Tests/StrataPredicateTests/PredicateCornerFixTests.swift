import Foundation
import StrataPredicate
import Testing

// MARK: - Review (session 28): keyword matching, [c] folding, surrogate escapes, deep trees

@Suite("Predicate corner fixes: ASCII keywords, one [c] folding rule, surrogate pairs, deep trees")
struct PredicateCornerFixTests {
    // MARK: Keywords are ASCII words

    @Test("a key spelled with non-ASCII letters is never a keyword, whatever it upper-cases or normalizes to")
    func nonASCIIKeysAreKeys() throws {
        // Before, keywords were matched with `uppercased()` (and Swift's canonical `==`):
        // `ın` (dotless i) upper-cases to `IN`, `ſelf` (long s) to `SELF`, and `LI\u{212A}E`
        // (KELVIN SIGN, canonically equal to K) compared equal to `LIKE`.
        let object: [String: Any] = ["ın": 1, "ſelf": 2, "nıl": 3, "ſum": 4]
        #expect(try FormatPredicate(format: "ın == 1").evaluate(with: object))
        #expect(try FormatPredicate(format: "ſelf == 2").evaluate(with: object))
        #expect(try FormatPredicate(format: "nıl == 3").evaluate(with: object))
        #expect(try FormatPredicate(format: "ſum == 4").evaluate(with: object))
        // Not operators either: `a ın {1}` has no operator.
        for format in ["a ın {1}", "a LI\u{212A}E 'x'", "a \u{212A}ONTAINS 'x'", "ſum({1, 2}) == 3"] {
            #expect(throws: FormatPredicateError.self, "\(format) should not parse") { try FormatPredicate(format: format) }
        }
        // ASCII keywords stay case-insensitive.
        #expect(try FormatPredicate(format: "a iN {1} aNd b LiKe 'x*'").evaluate(with: ["a": 1, "b": "xy"] as [String: Any]))
    }

    @Test("the printer escapes only ASCII reserved words: a non-ASCII key prints bare and parses back")
    func nonASCIIKeysPrintBare() throws {
        let predicate = try FormatPredicate(format: "#ın == 1 AND #ſelf == 2")
        #expect(predicate.description == "ın == 1 AND ſelf == 2")
        #expect(try FormatPredicate(format: predicate.description) == predicate)
        #expect(try FormatPredicate(format: "#in == 1").description == "#in == 1")
    }

    // MARK: [c] folds the strings first, for every operator

    /// `'ß'` folds to `"ss"` under `[c]`: every string operator then sees the folded strings.
    @Test("[c] folds both sides first, so every operator agrees with ==[c] on 'ß' and 'SS'", arguments: [
        ("'ß' ==[c] 'SS'", true),
        ("'ß' LIKE[c] 'SS'", true),
        ("'ß' LIKE[c] '??'", true),
        ("'ß' LIKE[c] '?'", false),
        ("'ß' CONTAINS[c] 's'", true),
        ("'Straße' CONTAINS[c] 'SSE'", true),
        ("'s' IN[c] 'ß'", true),
        ("'ß' BEGINSWITH[c] 'S'", true),
        ("'ß' ENDSWITH[c] 's'", true),
        ("'ß' <=[c] 'SS'", true),
        ("'ß' >=[c] 'SS'", true),
        ("'ß' BETWEEN[c] {'ss', 'SS'}", true),
        ("'ß' IN[c] {'x', 'SS'}", true),
        ("'Émile' ==[cd] 'emile'", true),
        ("'Émile' CONTAINS[cd] 'MIL'", true),
        ("'Émile' <[cd] 'emilf'", true),
    ])
    func caseFoldingIsOneRule(_ format: String, _ expected: Bool) throws {
        #expect(try FormatPredicate(format: format).evaluate(with: nil) == expected, "\(format)")
    }

    @Test("an operator with [c] agrees with == [c] on folded strings: x ==[c] y exactly when x LIKE[c] y (no wildcards)")
    func likeWithoutWildcardsIsEquality() throws {
        let samples = ["ß", "SS", "ss", "ẞ", "ﬁ", "FI", "İ", "i̇", "Σ", "ς", "σ", "Å", "å", "K", "\u{212A}", "ǅ", "ǆ"]
        for a in samples {
            for b in samples {
                let equal = try FormatPredicate(format: "%@ ==[c] %@", a, b).evaluate(with: nil)
                let like = try FormatPredicate(format: "%@ LIKE[c] %@", a, b).evaluate(with: nil)
                let contains = try FormatPredicate(format: "%@ CONTAINS[c] %@", a, b).evaluate(with: nil)
                let begins = try FormatPredicate(format: "%@ BEGINSWITH[c] %@", a, b).evaluate(with: nil)
                let lessOrEqual = try FormatPredicate(format: "%@ <=[c] %@", a, b).evaluate(with: nil)
                let greaterOrEqual = try FormatPredicate(format: "%@ >=[c] %@", a, b).evaluate(with: nil)
                #expect(equal == like, "\(a) ==[c] \(b) is \(equal), LIKE[c] \(like)")
                if equal {
                    #expect(contains && begins, "\(a) ==[c] \(b), yet CONTAINS[c] \(contains), BEGINSWITH[c] \(begins)")
                }
                #expect(equal == (lessOrEqual && greaterOrEqual), "\(a) ==[c] \(b) is \(equal), <=[c] \(lessOrEqual), >=[c] \(greaterOrEqual)")
            }
        }
    }

    // MARK: Surrogate pairs in \u escapes

    @Test("a high surrogate escape followed by a low one is one scalar, as JSON and NSPredicate read it")
    func surrogatePairIsOneScalar() throws {
        let predicate = try FormatPredicate(format: #"SELF == "\uD83D\uDE00""#)
        #expect(try predicate.evaluate(with: "😀"))
        #expect(try FormatPredicate(format: #"SELF == '\ud83d\ude00!'"#).evaluate(with: "😀!"))
        #expect(try FormatPredicate(format: predicate.description) == predicate)
    }

    @Test("a lone surrogate is an error naming its position", arguments: [
        (#"a == "\uD83D""#, 6),
        (#"a == "x\uD83Dy""#, 7),
        (#"a == "\uDE00""#, 6),
        (#"a == "\uDE00\uD83D""#, 6),
        (#"a == "\uD83D\u0041""#, 6),
        (#"a == "\uD83D\uD83D""#, 6),
        (#"a == "\u{D83D}""#, 6),
    ])
    func loneSurrogateIsAnError(_ format: String, _ position: Int) throws {
        do {
            _ = try FormatPredicate(format: format)
            Issue.record("\(format) should not parse")
        } catch let error as FormatPredicateError {
            #expect(error.kind == .syntax)
            #expect(error.position == position, "\(format): \(error)")
            #expect(error.message.contains("surrogate"), "\(error.message)")
        }
    }

    // MARK: Deep hand-built trees

    /// A tree of `levels` alternating ANDs and ORs (which `and`/`or` can't splice) built
    /// with the enum cases directly.
    static func deepTree(_ levels: Int) throws -> PredicateNode {
        let leaf = try FormatPredicate(format: "SELF > 0").node
        var node = leaf
        for level in 0..<levels { node = level % 2 == 0 ? .and([node, leaf]) : .or([node, .not(leaf)]) }
        return node
    }

    static var deepLevels: Int {
        ProcessInfo.processInfo.environment["STRATA_DEEP_TREE_LEVELS"].flatMap(Int.init) ?? 30_000
    }

    @Test("printing, hashing and comparing a hand-built tree far deeper than the limit doesn't exhaust the stack")
    func deepTreePrintsAndHashes() throws {
        let levels = Self.deepLevels
        let deep = FormatPredicate(try Self.deepTree(levels))
        let same = FormatPredicate(try Self.deepTree(levels))
        let other = FormatPredicate(try Self.deepTree(levels - 1))
        let text = deep.description
        #expect(text.count < 200 && text.contains("nests \(deep.node.nestingDepth) levels"), "a clear result, not a crash: \(text.prefix(200))")
        #expect(throws: FormatPredicateError.self, "the placeholder doesn't parse") { try FormatPredicate(format: text) }
        #expect(deep.hashValue == same.hashValue)
        #expect(deep == same)
        #expect(deep != other)
        #expect(Set([deep, same, other]).count == 2)
        // One at the limit still prints in full and parses back.
        let fits = FormatPredicate(try Self.deepTree(40))
        #expect(!fits.description.contains("nests"))
        #expect(try FormatPredicate(format: fits.description) == fits)
    }

    @Test("printing a hand-built expression far deeper than the limit gives a clear result, not a crash")
    func deepExpressionPrints() throws {
        var expression = FormatExpression.keyPath("a")
        for level in 0..<Self.deepLevels { expression = .arithmetic(level % 2 == 0 ? .add : .multiply, expression, .constant(.integer(1))) }
        let text = expression.description
        let clear = text.count < 200 && text.contains("nests") && text.contains("not printed")
        #expect(clear, "a clear result: \(text.prefix(200))")
        // Let go of through a predicate, which frees it without recursion (a bare indirect
        // enum this deep would exhaust the stack as Swift frees it, at a larger size).
        _ = FormatPredicate(.comparison(ComparisonPredicate(consume expression, .equalTo, .evaluatedObject)))
        // A shallow one prints in full and parses back.
        let shallow = FormatExpression.arithmetic(.add, .keyPath("a"), .constant(.integer(1)))
        #expect(shallow.description == "a + 1")
        #expect(try FormatExpression(format: shallow.description) == shallow)
    }
}
