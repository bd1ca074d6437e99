import Foundation
import StrataPredicate
import StrataTestSupport
import Testing

// MARK: - Vector

/// One test vector from `Specs/0003-predicate-vectors.json`.
struct PredicateVector: Sendable, Decodable, CustomTestStringConvertible {
    /// The expected outcome: a truth value, or an error kind (and optionally its position).
    enum Expected: Sendable, Decodable, Equatable {
        case value(Bool)
        case error(kind: String, position: Int?)

        private struct ErrorBody: Decodable {
            let error: String
            let position: Int?
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let value = try? container.decode(Bool.self) {
                self = .value(value)
            } else {
                let body = try container.decode(ErrorBody.self)
                self = .error(kind: body.error, position: body.position)
            }
        }
    }

    let format: String
    let arguments: [JSONValue]?
    let variables: [String: JSONValue]?
    let object: JSONValue?
    let expected: Expected
    let note: String?

    var testDescription: String { format + (note.map { "  — " + $0 } ?? "") }

    static func load() throws -> [PredicateVector] {
        try JSONDecoder().decode([PredicateVector].self, from: SpecFiles.data("0003-predicate-vectors.json"))
    }

    /// Parses and evaluates the vector, returning the truth value or the error's kind and
    /// position.
    func run() throws -> Expected {
        let argumentValues = try (arguments ?? []).map { try $0.toAny() as Any }
        var variableValues: [String: Any] = [:]
        for (name, value) in variables ?? [:] { variableValues[name] = try value.toAny() as Any }
        let objectValue = try object?.toAny()
        do {
            let predicate = try FormatPredicate(format: format, argumentArray: argumentValues)
            return .value(try predicate.evaluate(with: objectValue, substitutionVariables: variableValues))
        } catch let error as FormatPredicateError {
            return .error(kind: error.kind.rawValue, position: error.position)
        } catch let error as PredicateEvaluationError {
            return .error(kind: error.kind.rawValue, position: nil)
        }
    }
}

// MARK: - Tests

@Suite("Spec test vectors")
struct VectorTests {
    @Test("the vectors file loads and covers at least 180 cases")
    func vectorsLoad() throws {
        let vectors = try PredicateVector.load()
        #expect(vectors.count >= 180)
        #expect(Set(vectors.map { $0.format + "\($0.arguments ?? [])" + "\($0.object.map { "\($0)" } ?? "")" }).count > 150)
    }

    @Test("every vector evaluates to its expected result", arguments: try PredicateVector.load())
    func vector(_ vector: PredicateVector) throws {
        let outcome = try vector.run()
        switch vector.expected {
        case .value(let expected):
            #expect(outcome == .value(expected))
        case .error(let kind, let position):
            guard case .error(let actualKind, let actualPosition) = outcome else {
                Issue.record("expected a \(kind) error, got \(outcome)")
                return
            }
            #expect(actualKind == kind)
            if let position { #expect(actualPosition == position) }
        }
    }

    @Test("every vector that parses prints a description that parses back to an equal predicate",
          arguments: try PredicateVector.load())
    func vectorRoundTrip(_ vector: PredicateVector) throws {
        let argumentValues = try (vector.arguments ?? []).map { try $0.toAny() as Any }
        guard let predicate = try? FormatPredicate(format: vector.format, argumentArray: argumentValues) else { return }
        if vector.format.contains("$identity") || (vector.arguments ?? []).contains(where: { "\($0)".contains("$identity") }) {
            return  // object identities print as <object: …>, which is documented not to parse
        }
        let reparsed = try FormatPredicate(format: predicate.description)
        #expect(reparsed == predicate, "\(predicate.description)")
        #expect(reparsed.description == predicate.description)
    }
}
