import StrataPredicate
import Testing

// MARK: - Parser errors

@Suite("Parser errors name the position and what was expected")
struct ParserErrorTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let format: String
        let position: Int
        let expected: String
        var testDescription: String { format.debugDescription }
    }

    @Test("syntax errors report position and expectation", arguments: [
        Case(format: "age >", position: 5, expected: "an expression"),
        Case(format: "age > 3 AND", position: 11, expected: "an expression"),
        Case(format: "age 3", position: 4, expected: "a comparison operator"),
        Case(format: "age", position: 3, expected: "a comparison operator"),
        Case(format: "(age > 3", position: 8, expected: "')'"),
        Case(format: "age > 3)", position: 7, expected: "AND, OR or the end of the format string"),
        Case(format: "name == 'open", position: 8, expected: "a closing '"),
        Case(format: "ANY tags", position: 8, expected: "a comparison operator"),
        Case(format: "age ==[q] 1", position: 7, expected: "option letters c, d or n"),
        Case(format: "age BETWEEN {1}", position: 4, expected: "{lower, upper}"),
        Case(format: "tags[0 == 1", position: 7, expected: "']'"),
        Case(format: "SUBQUERY(x, y, TRUEPREDICATE)", position: 12, expected: "a $variable"),
        Case(format: "age == 12abc", position: 9, expected: "a digit, an operator or punctuation"),
        Case(format: "in == 1", position: 0, expected: "an expression (escape a key named in as #in)"),
        Case(format: "a.@bogus == 1", position: 2, expected: "@count, @sum, @avg, @min, @max, @distinctUnionOfObjects, @unionOfObjects"),
        Case(format: "age ~ 1", position: 4, expected: "an expression, an operator or punctuation"),
        Case(format: "'x\\q' == 1", position: 2, expected: "one of \\n \\t \\r \\0 \\\\ \\' \\\" \\uXXXX \\u{X…}"),
    ])
    func syntaxError(_ testCase: Case) {
        do {
            let predicate = try FormatPredicate(format: testCase.format)
            Issue.record("parsed as \(predicate)")
        } catch let error as FormatPredicateError {
            #expect(error.kind == .syntax)
            #expect(error.position == testCase.position, "\(error)")
            #expect(error.expected == testCase.expected, "\(error)")
            #expect(error.description.contains("position \(testCase.position)"))
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test("a missing argument names the specifier and its position")
    func missingArgument() {
        #expect(throws: FormatPredicateError(kind: .missingArgument, message: "no argument for %@ (argument 1; 1 given)",
                                              position: 16, expected: "argument 1")) {
            try FormatPredicate(format: "a == %@ && b == %@", 1)
        }
    }

    @Test("an unsupported argument names its index and type")
    func unsupportedArgument() throws {
        struct Opaque {}
        let error = try #require(throws: FormatPredicateError.self) {
            try FormatPredicate(format: "a == %@ AND b == %@", 1, Opaque())
        }
        #expect(error.kind == .unsupportedArgument)
        #expect(error.message.contains("argument 1"))
        #expect(error.message.contains("Opaque"))
        #expect(error.position == 17)
    }

    @Test("an unsupported element inside an array argument names the element")
    func unsupportedElement() throws {
        struct Opaque {}
        let error = try #require(throws: FormatPredicateError.self) {
            try FormatPredicate(format: "a IN %@", argumentArray: [[1, Opaque()] as [Any]])
        }
        #expect(error.message.contains("element 1"))
    }

    @Test("%d rejects a string argument, naming the type")
    func integerSpecifierType() throws {
        let error = try #require(throws: FormatPredicateError.self) { try FormatPredicate(format: "a == %d", "7") }
        #expect(error.kind == .unsupportedArgument)
        #expect(error.message.contains("String"))
        #expect(error.expected == "an integer")
    }

    @Test("extra arguments are an error")
    func extraArguments() throws {
        let error = try #require(throws: FormatPredicateError.self) { try FormatPredicate(format: "a == %@", 1, 2) }
        #expect(error.kind == .extraArguments)
    }

    @Test("deep nesting is a clear error, never a crash", arguments: [
        String(repeating: "(", count: 5000) + "a == 1" + String(repeating: ")", count: 5000),
        String(repeating: "NOT ", count: 5000) + "a == 1",
        String(repeating: "!", count: 5000) + "a == 1",
        "a == " + String(repeating: "-", count: 5000) + "1",
        "a == " + String(repeating: "{", count: 5000),
        "a == " + Array(repeating: "a", count: 5000).joined(separator: " + "),
        "a" + String(repeating: "[0]", count: 5000) + " == 1",
        "a == " + String(repeating: "abs(", count: 5000) + "1" + String(repeating: ")", count: 5000),
        String(repeating: "SUBQUERY(a, $x, ", count: 3000) + "TRUEPREDICATE",
    ])
    func nestingTooDeep(_ format: String) throws {
        let error = try #require(throws: FormatPredicateError.self) { try FormatPredicate(format: format) }
        #expect(error.kind == .nestingTooDeep)
    }

    @Test("nesting just within the limit parses, evaluates, prints and hashes", arguments: [
        String(repeating: "(", count: 95) + "a == 1" + String(repeating: ")", count: 95),
        "a == " + String(repeating: "abs(", count: 95) + "1" + String(repeating: ")", count: 95),
        String(repeating: "NOT ", count: 96) + "a == 1",
        "a == " + Array(repeating: "1", count: 95).joined(separator: " - ") + " + 94",
    ])
    func nestingWithinLimit(_ format: String) throws {
        let predicate = try FormatPredicate(format: format)
        #expect(try predicate.evaluate(with: ["a": 1] as [String: Any]))
        #expect(try FormatPredicate(format: predicate.description) == predicate)
        #expect(Set([predicate, predicate]).count == 1)
    }
}
