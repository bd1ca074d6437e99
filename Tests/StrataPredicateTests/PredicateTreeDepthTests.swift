import Foundation
import StrataPredicate
import Testing

// MARK: - Review (session 29): deep hand-built trees are freed, compared and hashed without recursion

@Suite("Deep hand-built predicate and expression trees: freeing, ==, hashing")
struct PredicateTreeDepthTests {
    /// Levels of the deep trees: deep enough that a recursive release, `==` or hash
    /// exhausted the stack before (it crashed past ~50,000), fast to build.
    static var levels: Int {
        ProcessInfo.processInfo.environment["STRATA_DEEP_TREE_LEVELS"].flatMap(Int.init) ?? 100_000
    }

    /// Alternating ANDs and ORs (which `and`/`or` can't splice), built with the enum cases.
    static func deepNode(_ levels: Int, leafValue: Int = 0) throws -> PredicateNode {
        let leaf = try FormatPredicate(format: "SELF > %d", leafValue).node
        var node = leaf
        for level in 0..<levels { node = level % 2 == 0 ? .and([node, leaf]) : .or([node, .not(leaf)]) }
        return node
    }

    static func deepExpression(_ levels: Int, last: Int = 1) -> FormatExpression {
        var expression = FormatExpression.keyPath("a")
        for level in 0..<levels {
            expression = .arithmetic(level % 2 == 0 ? .add : .multiply, expression, .constant(.integer(level == levels - 1 ? last : 1)))
        }
        return expression
    }

    /// Lets go of a bare tree through a predicate, which frees it without recursion (a bare
    /// indirect enum is freed by Swift's recursive release). Callers `consume` their own
    /// binding, so the predicate holds the last reference.
    static func free(_ node: consuming PredicateNode) { _ = FormatPredicate(node) }

    static func free(_ expression: consuming FormatExpression) {
        _ = FormatPredicate(.comparison(ComparisonPredicate(expression, .equalTo, .evaluatedObject)))
    }

    @Test("a predicate holding a tree far deeper than the limit is freed without exhausting the stack")
    func deepPredicateIsFreed() throws {
        for _ in 0..<2 {
            let predicate = FormatPredicate(try Self.deepNode(Self.levels))
            #expect(predicate.node.nestingDepth > Self.levels)
            // A copy of the tree outlives the predicate, then goes with a second predicate.
            let kept = predicate.node
            _ = consume predicate
            Self.free(consume kept)
        }
        // An expression inside a comparison, and a subquery's predicate, too.
        var node = try FormatPredicate(format: "SELF > 0").node
        for _ in 0..<(Self.levels / 4) {
            node = .comparison(ComparisonPredicate(
                .subquery(collection: .keyPath("items"), variable: "x", predicate: node), .greaterThan, .constant(.integer(0))))
        }
        Self.free(consume node)
        Self.free(Self.deepExpression(Self.levels))
    }

    @Test("== and hash(into:) of bare deep trees (nodes, expressions, comparisons) don't exhaust the stack")
    func bareTreesCompareAndHash() throws {
        let levels = Self.levels
        let a = try Self.deepNode(levels), b = try Self.deepNode(levels), other = try Self.deepNode(levels, leafValue: 1)
        // Compared into Bools first: a failed #expect would describe a deep operand recursively.
        let (nodesEqual, nodesDiffer) = (a == b, a != other)
        #expect(nodesEqual && nodesDiffer)
        #expect(a.hashValue == b.hashValue)
        #expect(Set([a, b, other]).count == 2)
        let x = Self.deepExpression(levels), y = Self.deepExpression(levels), z = Self.deepExpression(levels, last: 2)
        let (expressionsEqual, expressionsDiffer) = (x == y, x != z)
        #expect(expressionsEqual && expressionsDiffer)
        #expect(x.hashValue == y.hashValue)
        let c1 = ComparisonPredicate(x, .equalTo, .constant(.integer(1)))
        let c2 = ComparisonPredicate(y, .equalTo, .constant(.integer(1)))
        let comparisonsEqual = c1 == c2
        #expect(comparisonsEqual)
        #expect(c1.hashValue == c2.hashValue)
        Self.free(consume a)
        Self.free(consume b)
        Self.free(consume other)
        Self.free(consume x)
        Self.free(consume y)
        Self.free(consume z)
        Self.free(.comparison(consume c1))
        Self.free(.comparison(consume c2))
    }

    @Test("shallow trees compare and hash as before: structure, order and values count")
    func shallowEquality() throws {
        let pairs: [(String, String, Bool)] = [
            ("a = 1 AND b = 2", "a == 1 && b == 2", true),
            ("a = 1 AND b = 2", "b = 2 AND a = 1", false),
            ("(a = 1 AND b = 2) AND c = 3", "a = 1 AND (b = 2 AND c = 3)", false),
            ("a[FIRST] = 1", "a[LAST] = 1", false),
            ("a[0] = 1", "a[0] = 1", true),
            ("a[0] = 1", "a[1] = 1", false),
            ("SUBQUERY(items, $x, $x.v > 1).@count > 0", "SUBQUERY(items, $y, $y.v > 1).@count > 0", false),
            ("lowercase(name) = 'a'", "uppercase(name) = 'a'", false),
            ("a + 1 * 2 = 3", "(a + 1) * 2 = 3", false),
            ("{a, 1} CONTAINS 1", "{a, 1} CONTAINS 1", true),
        ]
        for (left, right, equal) in pairs {
            let l = try FormatPredicate(format: left), r = try FormatPredicate(format: right)
            #expect((l == r) == equal, "\(left) vs \(right)")
            #expect((l.node == r.node) == equal, "\(left) vs \(right)")
            if equal { #expect(l.hashValue == r.hashValue && l.node.hashValue == r.node.hashValue) }
        }
        let e1 = try FormatExpression(format: "a.b + 1"), e2 = try FormatExpression(format: "a.b+1")
        #expect(e1 == e2 && e1.hashValue == e2.hashValue)
        #expect(e1 != (try FormatExpression(format: "a.c + 1")))
    }
}
