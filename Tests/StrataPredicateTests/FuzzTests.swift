import Foundation
import StrataPredicate
import StrataTestSupport
import Testing

/// Builds random format strings from the grammar, and mutates them.
private struct FormatFuzzer {
    var random: SeededGenerator

    private static let keys = ["age", "name", "tags", "manager.name", "department.employees.salary", "#in", "scores",
                               "department.employees.@sum.salary", "tags.@count", "SELF", "nickname", "manager"]
    private static let constants = ["1", "-2", "3.5", "0x1f", "0b11", "1e3", "'Ada'", "\"x\\\"y\"", "'Zürich'", "nil",
                                    "TRUE", "NO", "{1, 2}", "{'a', 'b', nil}", "{}", "CAST(100.5, 'NSDate')",
                                    "CAST('1.25', 'NSDecimalNumber')", "$v", "'50%%'", "now()"]
    private static let operators = ["=", "==", "!=", "<>", "<", "<=", "=<", ">", ">=", "=>", "IN", "CONTAINS",
                                     "BEGINSWITH", "ENDSWITH", "LIKE", "MATCHES", "BETWEEN"]
    private static let fragments = ["(", ")", "{", "}", "[", "]", ",", ".", "'", "\"", "\\", "%@", "%K", "%d", "%%", "$",
                                    "#", "@count", "@sum", " AND ", " OR ", " NOT ", "!", "&&", "||", "ANY ", "ALL ",
                                    "SUBQUERY(", "[c]", "[cd]", "**", "-", "+", "*", "/", "0x", "1e", "é", "\u{301}",
                                    "\0", "\n", "TRUEPREDICATE", "FIRST", "SIZE", "CAST(", "=<", "==", "ü", "🇨🇭"]

    mutating func pick<T>(_ array: [T]) -> T {
        array[Int.random(in: 0..<array.count, using: &random)]
    }

    mutating func chance(_ percent: Int) -> Bool {
        Int.random(in: 0..<100, using: &random) < percent
    }

    mutating func expression(depth: Int) -> String {
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<3: return pick(Self.keys)
        case 3..<6: return pick(Self.constants)
        case 6 where depth > 0:
            return expression(depth: depth - 1) + " " + pick(["+", "-", "*", "/", "**"]) + " " + expression(depth: depth - 1)
        case 7 where depth > 0:
            return "(" + expression(depth: depth - 1) + ")"
        case 8 where depth > 0:
            return pick(["lowercase", "abs", "count", "sum", "max"]) + "(" + expression(depth: depth - 1) + ")"
        case 9 where depth > 0:
            return pick(Self.keys) + "[" + pick(["FIRST", "LAST", "SIZE", "0", "1"]) + "]"
        default: return pick(Self.keys)
        }
    }

    mutating func predicate(depth: Int) -> String {
        switch Int.random(in: 0..<10, using: &random) {
        case 0 where depth > 0:
            return predicate(depth: depth - 1) + pick([" AND ", " OR ", " && ", " || "]) + predicate(depth: depth - 1)
        case 1 where depth > 0:
            return pick(["NOT ", "!"]) + predicate(depth: depth - 1)
        case 2 where depth > 0:
            return "(" + predicate(depth: depth - 1) + ")"
        case 3:
            return pick(["TRUEPREDICATE", "FALSEPREDICATE"])
        case 4 where depth > 0:
            return "SUBQUERY(" + pick(Self.keys) + ", $x, " + predicate(depth: depth - 1) + ").@count > 0"
        default:
            let modifier = chance(20) ? pick(["ANY ", "ALL ", "NONE ", "SOME "]) : ""
            let op = pick(Self.operators)
            let options = chance(20) ? pick(["[c]", "[d]", "[cd]", "[n]"]) : ""
            let right = op == "BETWEEN" ? "{" + expression(depth: 0) + ", " + expression(depth: 0) + "}" : expression(depth: depth)
            return modifier + expression(depth: depth) + " " + op + options + " " + right
        }
    }

    mutating func mutate(_ format: String) -> String {
        var scalars = Array(format.unicodeScalars)
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let position = scalars.isEmpty ? 0 : Int.random(in: 0...scalars.count, using: &random)
            switch Int.random(in: 0..<5, using: &random) {
            case 0 where position < scalars.count:
                scalars.remove(at: position)
            case 1:
                scalars.insert(contentsOf: pick(Self.fragments).unicodeScalars, at: position)
            case 2 where position < scalars.count:
                scalars[position] = pick(Array("()[]{}'\"\\%$#@.,=<>!&|*-+ 0aZ".unicodeScalars))
            case 3:
                scalars = Array(scalars.prefix(position))
            default:
                let start = Int.random(in: 0...position, using: &random)
                scalars.insert(contentsOf: scalars[start..<position], at: position)
            }
        }
        var result = String.UnicodeScalarView()
        result.append(contentsOf: scalars)
        return String(result)
    }
}

// MARK: - Fuzz test

@Suite("Randomized parsing never crashes and descriptions round-trip")
struct FuzzTests {
    /// Iterations from `STRATA_FUZZ_ITERATIONS` (default 2000; each iteration tries a
    /// generated string and a mutation of it).
    static var iterations: Int {
        ProcessInfo.processInfo.environment["STRATA_FUZZ_ITERATIONS"].flatMap(Int.init) ?? 2000
    }

    static var object: [String: Any] { [
        "age": 36, "name": "Ada", "tags": ["a", "b"], "scores": [1, 2.5], "nickname": NSNull(),
        "manager": ["name": "Charles"] as [String: Any],
        "department": ["employees": [["salary": 10], ["salary": 20]]] as [String: Any],
    ] }

    @Test("generated and mutated format strings", arguments: [0x5EED_0001, 0x5EED_0002, 0x5EED_0003] as [UInt64])
    func fuzz(seed: UInt64) throws {
        var fuzzer = FormatFuzzer(random: SeededGenerator(state: seed))
        var parsed = 0, rejected = 0
        let object = Self.object
        for _ in 0..<max(1, Self.iterations / 3) {
            let generated = fuzzer.predicate(depth: 3)
            for format in [generated, fuzzer.mutate(generated)] {
                let argumentCount = format.components(separatedBy: "%").count - 1
                let arguments: [Any] = (0..<argumentCount).map { $0.isMultiple(of: 2) ? "age" as Any : 5 as Any }
                let predicate: FormatPredicate
                do {
                    predicate = try FormatPredicate(format: format, argumentArray: arguments)
                } catch is FormatPredicateError {
                    rejected += 1
                    continue
                }
                parsed += 1
                let description = predicate.description
                let reparsed = try #require(try? FormatPredicate(format: description),
                                            "description of \(format.debugDescription) does not parse: \(description)")
                #expect(reparsed == predicate, "\(format.debugDescription) → \(description)")
                #expect(reparsed.description == description)
                do {
                    _ = try predicate.evaluate(with: object, substitutionVariables: ["v": 1, "x": 2])
                } catch is PredicateEvaluationError {
                    // Type errors are allowed; crashes and other errors are not.
                }
            }
        }
        // Both outcomes must actually be exercised for the test to mean anything.
        #expect(parsed > 0)
        #expect(rejected > 0)
    }

    @Test("random token soup never crashes the parser, and what parses round-trips")
    func randomNoise() throws {
        var random = SeededGenerator(state: 42)
        let alphabet = ["a", "b", "1", "2.5", "'s'", "\"", "\\", " ", "=", "<", ">", "!", "(", ")", "{", "}", "[", "]",
                        ",", ".", "AND", "OR", "NOT", "%@", "%K", "$v", "#", "@count", "-", "+", "*", "IN", "ANY", "\u{0}", "é"]
        var parsed = 0
        for _ in 0..<max(1, Self.iterations) {
            var text = ""
            for _ in 0..<Int.random(in: 0..<8, using: &random) {
                text += alphabet[Int.random(in: 0..<alphabet.count, using: &random)]
                if Bool.random(using: &random) { text += " " }
            }
            let arguments: [Any] = Array(repeating: "a", count: text.components(separatedBy: "%").count - 1)
            if let predicate = try? FormatPredicate(format: text, argumentArray: arguments) {
                parsed += 1
                #expect(try FormatPredicate(format: predicate.description) == predicate, "\(text.debugDescription)")
            }
        }
        #expect(parsed > 0 || Self.iterations < 100)
    }
}
