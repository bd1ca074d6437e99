import Foundation
import StrataPredicate
import Testing

// MARK: - Evaluation and API

@Suite("Evaluation, substitution and the inspectable syntax tree")
struct EvaluationTests {
    @Test("seed 001: the processID validation predicate SELF > 0", arguments: [(-1, false), (0, false), (1, true), (5, true)])
    func processIDValidation(_ processID: Int, _ valid: Bool) throws {
        #expect(try FormatPredicate(format: "SELF > 0").evaluate(with: processID) == valid)
    }

    @Test("SELF works for plain values of every numeric type, promoted like NSNumber")
    func numericPromotion() throws {
        let positive = try FormatPredicate(format: "SELF > 0.5")
        let values: [Any] = [Int8(1), Int16(1), Int32(1), Int64(1), UInt8(1), UInt(1), Float(0.75), 1.0, Decimal(1), true]
        for value in values {
            #expect(try positive.evaluate(with: value), "\(type(of: value))")
        }
        #expect(try !positive.evaluate(with: false))
        #expect(try !positive.evaluate(with: nil))
    }

    @Test("withSubstitutionVariables replaces free variables and leaves SUBQUERY variables")
    func substitution() throws {
        let template = try FormatPredicate(format: "age BETWEEN {$low, $high} AND SUBQUERY(kids, $k, $k.age > $low).@count > 0")
        let concrete = try template.withSubstitutionVariables(["low": 10, "high": 20])
        #expect(concrete == (try FormatPredicate(
            format: "age BETWEEN {10, 20} AND SUBQUERY(kids, $k, $k.age > 10).@count > 0")))
        let object: [String: Any] = ["age": 15, "kids": [["age": 11] as [String: Any]]]
        #expect(try concrete.evaluate(with: object))
        #expect(try template.evaluate(with: object, substitutionVariables: ["low": 10, "high": 20]))
    }

    @Test("withSubstitutionVariables reports a missing variable and an unsupported value")
    func substitutionErrors() throws {
        let template = try FormatPredicate(format: "age > $minimum")
        let missing = try #require(throws: FormatPredicateError.self) { try template.withSubstitutionVariables([:]) }
        #expect(missing.kind == .missingVariable)
        #expect(missing.message.contains("$minimum"))
        struct Opaque {}
        let unsupported = try #require(throws: FormatPredicateError.self) {
            try template.withSubstitutionVariables(["minimum": Opaque()])
        }
        #expect(unsupported.kind == .unsupportedVariable)
        #expect(unsupported.message.contains("Opaque"))
    }

    @Test("evaluation without a needed variable throws missingVariable")
    func missingVariableAtEvaluation() throws {
        let error = try #require(throws: PredicateEvaluationError.self) {
            try FormatPredicate(format: "age > $minimum").evaluate(with: ["age": 3] as [String: Any])
        }
        #expect(error.kind == .missingVariable)
        #expect(error.description.contains("$minimum"))
    }

    @Test("the syntax tree exposes comparisons for a query planner")
    func inspectableTree() throws {
        let predicate = try FormatPredicate(format: "age >= 18 AND name IN %@ AND score BETWEEN {1, 5} AND ANY tags ==[c] 'x'",
                                            argumentArray: [["a", "b"]])
        guard case .and(let children) = predicate.node, children.count == 4 else {
            Issue.record("expected a four-way AND, got \(predicate.node)")
            return
        }
        #expect(children[0] == .comparison(ComparisonPredicate(.keyPath("age"), .greaterThanOrEqualTo, .constant(.integer(18)))))
        #expect(children[1] == .comparison(ComparisonPredicate(
            .keyPath("name"), .in, .constant(.aggregate([.string("a"), .string("b")])))))
        #expect(children[2] == .comparison(ComparisonPredicate(
            .keyPath("score"), .between, .constant(.aggregate([.integer(1), .integer(5)])))))
        guard case .comparison(let any) = children[3] else {
            Issue.record("expected a comparison")
            return
        }
        #expect(any.modifier == .any)
        #expect(any.options == .caseInsensitive)
        guard case .keyPath(let path) = any.leftExpression else {
            Issue.record("expected a key path")
            return
        }
        #expect(path.string == "tags")
        #expect(path.components == [.key("tags")])
    }

    @Test("collection operators are parsed into key path components")
    func keyPathComponents() throws {
        let predicate = try FormatPredicate(format: "department.employees.@sum.salary > 1")
        guard case .comparison(let comparison) = predicate.node, case .keyPath(let path) = comparison.leftExpression else {
            Issue.record("expected a key path comparison")
            return
        }
        #expect(path.components == [.key("department"), .key("employees"), .collectionOperator(.sum), .key("salary")])
    }

    @Test("compound constructors follow NSCompoundPredicate: empty AND is true, empty OR is false")
    func compoundConstructors() throws {
        #expect(FormatPredicate.and([]) == .truePredicate)
        #expect(FormatPredicate.or([]) == .falsePredicate)
        let a = try FormatPredicate(format: "a == 1")
        #expect(FormatPredicate.and([a]) == a)
        let both = FormatPredicate.and([a, try FormatPredicate(format: "b == 2")])
        #expect(both == (try FormatPredicate(format: "a == 1 AND b == 2")))
        #expect(try both.evaluate(with: ["a": 1, "b": 2] as [String: Any]))
        #expect(try !FormatPredicate.not(both).evaluate(with: ["a": 1, "b": 2] as [String: Any]))
        #expect(try FormatPredicate.or([a, .falsePredicate]).evaluate(with: ["a": 1] as [String: Any]))
        #expect(FormatPredicate(value: true) == .truePredicate)
        #expect(try !FormatPredicate.falsePredicate.evaluate(with: nil))
    }

    @Test("object arguments are stored by identity and compared by identity")
    func identity() throws {
        let manager = IdentifiedObject(identity: "m1", properties: ["name": "Mia"])
        let predicate = try FormatPredicate(format: "manager == %@", manager)
        #expect(predicate == (try FormatPredicate(format: "manager == %@", IdentifiedObject(identity: "m1", properties: [:]))))
        #expect(try predicate.evaluate(with: ["manager": IdentifiedObject(identity: "m1", properties: [:])] as [String: Any]))
        #expect(try !predicate.evaluate(with: ["manager": IdentifiedObject(identity: "m2", properties: [:])] as [String: Any]))
        guard case .comparison(let comparison) = predicate.node,
              case .constant(.object(let identity)) = comparison.rightExpression else {
            Issue.record("expected an object constant")
            return
        }
        #expect(identity == PredicateIdentity("m1"))
    }

    @Test("equal predicates are equal and hash equally regardless of spelling")
    func hashing() throws {
        let spellings = ["a = 1 && b != 'x'", "a == 1 AND b <> \"x\"", "a==1 and b!='x'"]
        let predicates = try spellings.map { try FormatPredicate(format: $0) }
        #expect(Set(predicates).count == 1)
    }

    @Test("a predicate is Sendable and evaluates concurrently")
    func concurrentEvaluation() async throws {
        let predicate = try FormatPredicate(format: "name LIKE[c] 'a*' AND code MATCHES '[0-9]+'")
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<64 {
                group.addTask {
                    let object: [String: Any] = ["name": index.isMultiple(of: 2) ? "Ada" : "Bob", "code": "\(index)"]
                    return (try? predicate.evaluate(with: object)) ?? false
                }
            }
            var count = 0
            for await matched in group where matched { count += 1 }
            return count
        }
        #expect(results == 32)
    }

    @Test("LIKE and MATCHES patterns that are not constants are compiled and cached")
    func dynamicPatterns() throws {
        let predicate = try FormatPredicate(format: "name LIKE pattern")
        #expect(try predicate.evaluate(with: ["name": "Ada", "pattern": "A*"] as [String: Any]))
        #expect(try !predicate.evaluate(with: ["name": "Ada", "pattern": "B*"] as [String: Any]))
        let regex = try FormatPredicate(format: "name MATCHES pattern")
        #expect(try regex.evaluate(with: ["name": "Ada", "pattern": "A.a"] as [String: Any]))
    }

    @Test("evaluation type errors are reported, never crashes", arguments: [
        "name * 2 == 1", "age BETWEEN name", "lowercase(age) == 'x'", "name MATCHES '['", "tags['x'] == 1", "tags[1.5] == 1",
    ])
    func evaluationErrors(_ format: String) throws {
        let object: [String: Any] = ["name": "Ada", "age": 3, "tags": ["a"]]
        #expect(throws: PredicateEvaluationError.self) { try FormatPredicate(format: format).evaluate(with: object) }
    }
}
