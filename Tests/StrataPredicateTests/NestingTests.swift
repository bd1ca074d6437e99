import Foundation
import StrataPredicate
import Testing

@Suite("Predicates built by hand: folds stay flat; trees too deep are refused, never a crash")
struct NestingTests {
    @Test("folding thousands of terms with and/or keeps the tree two levels deep, and it evaluates")
    func foldsStayFlat() throws {
        var all = try FormatPredicate(format: "SELF >= 0")
        var any = try FormatPredicate(format: "SELF == -1")
        for term in 1..<20_000 {
            all = FormatPredicate.and([all, try FormatPredicate(format: "SELF != %d", -term)])
            any = FormatPredicate.or([any, try FormatPredicate(format: "SELF == %d", term)])
        }
        #expect(all.node.nestingDepth == 3)  // AND → comparison → its operands
        #expect(any.node.nestingDepth == 3)
        #expect(try all.evaluate(with: 5))
        #expect(try any.evaluate(with: 19_999))
        #expect(try !any.evaluate(with: 20_000))
    }

    @Test("negating again and again cancels out: NOT NOT p is p")
    func doubleNegation() throws {
        let p = try FormatPredicate(format: "SELF > 3")
        var negated = p
        for _ in 0..<100_001 { negated = FormatPredicate.not(negated) }
        #expect(negated == FormatPredicate.not(p))
        #expect(try negated.evaluate(with: 1))
        #expect(FormatPredicate.not(FormatPredicate.not(p)) == p)
    }

    @Test("a hand-built tree deeper than the limit is refused with nestingTooDeep by evaluate; one at the limit evaluates")
    func deepTreeRefused() throws {
        let leaf = try FormatPredicate(format: "SELF > 0").node
        // Alternating AND and OR can't be spliced: each level nests.
        func tree(_ levels: Int) -> PredicateNode {
            var node = leaf
            for level in 0..<levels { node = level % 2 == 0 ? .and([node, leaf]) : .or([node, leaf]) }
            return node
        }
        let deep = FormatPredicate(tree(FormatPredicate.maximumNestingDepth))
        #expect(deep.node.nestingDepth > FormatPredicate.maximumNestingDepth)
        do {
            _ = try deep.evaluate(with: 1)
            Issue.record("a tree deeper than the limit should be refused")
        } catch let error as FormatPredicateError {
            #expect(error.kind == .nestingTooDeep)
        }
        // A comparison and its operands are two levels: n compounds over one are n + 2.
        let fits = FormatPredicate(tree(FormatPredicate.maximumNestingDepth - 2))
        #expect(fits.node.nestingDepth == FormatPredicate.maximumNestingDepth)
        #expect(try fits.evaluate(with: 1))
    }

    @Test("every parsed predicate is within the limit: the deepest inputs the parser takes measure below it")
    func parsedWithinLimit() throws {
        let shapes: [(Int) -> String] = [
            { String(repeating: "(", count: $0) + "SELF > 0" + String(repeating: ")", count: $0) },
            { String(repeating: "NOT ", count: $0) + "SELF > 0" },
            { "SELF == " + String(repeating: "1 + ", count: $0) + "1" },
            { "SELF == " + String(repeating: "-", count: $0) + "1" },
            { String(repeating: "SUBQUERY(items, $x, ", count: $0) + "$x > 0" + String(repeating: ").@count > 0", count: $0) },
        ]
        for shape in shapes {
            var deepest: FormatPredicate?
            for n in 1...200 {
                guard let parsed = try? FormatPredicate(format: shape(n)) else { break }
                deepest = parsed
            }
            let found = try #require(deepest)
            #expect(found.node.nestingDepth <= FormatPredicate.maximumNestingDepth, "\(found)")
        }
    }
}

@Suite("Decimals out of range: an error, not a NaN compared as false")
struct DecimalRangeTests {
    @Test("decimal arithmetic that overflows Decimal's range throws; in range it computes exactly")
    func arithmeticOverflow() throws {
        let overflow = try FormatPredicate(format: "CAST('9e127', 'NSDecimalNumber') * CAST('9e127', 'NSDecimalNumber') > 0")
        #expect(throws: PredicateEvaluationError.self) { try overflow.evaluate(with: nil) }
        let inRange = try FormatPredicate(format: "CAST('0.1', 'NSDecimalNumber') + CAST('0.2', 'NSDecimalNumber') == CAST('0.3', 'NSDecimalNumber')")
        #expect(try inRange.evaluate(with: nil))
    }

    @Test("CAST of a number beyond Decimal's range to NSDecimalNumber is a parse error naming the CAST, not a NaN that prints as an unparsable CAST")
    func castOutOfRange() throws {
        do {
            _ = try FormatPredicate(format: "SELF == CAST(1e300, 'NSDecimalNumber')")
            Issue.record("the CAST should have been refused")
        } catch let error as FormatPredicateError {
            #expect(error.message.contains("cannot CAST"))
        }
        let fine = try FormatPredicate(format: "SELF == CAST(1e100, 'NSDecimalNumber')")
        #expect(try FormatPredicate(format: fine.description) == fine)
    }
}
