import Foundation
import StrataPredicate
import Testing

@Suite("Expressions on their own and canonical()")
struct ExpressionTests {
    @Test("FormatExpression(format:) parses one expression and prints it canonically", arguments: [
        ("employees.@count", "employees.@count"), ("  department . name ", "department.name"), ("NOW()", "now()"),
        ("LOWERCASE( name )", "lowercase(name)"), ("canonical(department.name)", "canonical(department.name)"),
        ("employees.@sum.salary", "employees.@sum.salary"), ("(a + 1) * 2", "(a + 1) * 2"), ("#in", "#in"),
    ])
    func parses(format: String, canonical: String) throws {
        let expression = try FormatExpression(format: format)
        #expect(expression.description == canonical)
        #expect(try FormatExpression(format: expression.description) == expression)
    }

    @Test("Arguments are substituted as in predicates")
    func arguments() throws {
        #expect(try FormatExpression(format: "%K.@count", "employees") == .keyPath("employees.@count"))
        #expect(try FormatExpression(format: "%@", 3) == .constant(.integer(3)))
        let extra = try #require(throws: FormatPredicateError.self) { try FormatExpression(format: "name", 1) }
        #expect(extra.kind == .extraArguments)
    }

    @Test("A string that is not exactly one expression is a syntax error with its position", arguments: [
        ("name == 'x'", 5), ("a b", 2), ("", 0), ("employees.@", 10), ("lowercase(name", 14),
    ])
    func refused(format: String, position: Int) throws {
        let error = try #require(throws: FormatPredicateError.self) { try FormatExpression(format: format) }
        #expect(error.position == position, "\(format): \(error)")
    }

    @Test("canonical() folds case and diacritics, as ==[cd] compares, and keeps nil")
    func canonicalFunction() throws {
        #expect(FormatFunction.canonical("Émile ZOLA") == "emile zola")
        let predicate = try FormatPredicate(format: "canonical(name) == 'creme brulee'")
        #expect(try predicate.evaluate(with: ["name": "Crème Brûlée"] as [String: Any]))
        #expect(try !predicate.evaluate(with: ["name": "Crème"] as [String: Any]))
        #expect(try FormatPredicate(format: "canonical(name) == nil").evaluate(with: [:] as [String: Any]))
        let mismatch = try #require(throws: PredicateEvaluationError.self) {
            try predicate.evaluate(with: ["name": 3] as [String: Any])
        }
        #expect(mismatch.kind == .typeMismatch)
        #expect(try FormatPredicate(format: "CANONICAL(name) == 'x'").description == #"canonical(name) == "x""#)
    }
}
