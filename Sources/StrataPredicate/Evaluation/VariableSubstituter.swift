// MARK: - VariableSubstituter

/// Replaces free `$variables` with constants, leaving variables bound by `SUBQUERY` alone
/// (Core Data's `withSubstitutionVariables(_:)`).
struct VariableSubstituter {
    private let variables: [String: Any]
    private var bound: [String] = []

    init(variables: [String: Any]) {
        self.variables = variables
    }

    mutating func substitute(_ node: PredicateNode) throws -> PredicateNode {
        switch node {
        case .constant:
            return node
        case .comparison(let c):
            return .comparison(ComparisonPredicate(
                try substitute(c.leftExpression), c.operatorType, try substitute(c.rightExpression),
                modifier: c.modifier, options: c.options))
        case .and(let children):
            return .and(try children.map { try substitute($0) })
        case .or(let children):
            return .or(try children.map { try substitute($0) })
        case .not(let child):
            return .not(try substitute(child))
        }
    }

    mutating func substitute(_ expression: FormatExpression) throws -> FormatExpression {
        switch expression {
        case .constant, .evaluatedObject, .keyPath:
            return expression
        case .variable(let name):
            if bound.contains(name) { return expression }
            guard let value = variables[name] else {
                throw FormatPredicateError(kind: .missingVariable, message: "no value for substitution variable $\(name)",
                                           position: 0, expected: "a value for $\(name)")
            }
            do {
                return .constant(try ArgumentConverter.constant(value))
            } catch let error as ArgumentConverter.Unsupported {
                throw FormatPredicateError(kind: .unsupportedVariable, message: "$\(name): \(error.message)",
                                           position: 0, expected: "a supported value type")
            }
        case .aggregate(let elements):
            return Parser.canonicalAggregate(try elements.map { try substitute($0) })
        case .keyPathOf(let base, let path):
            return .keyPathOf(try substitute(base), path)
        case .index(let base, let subscriptValue):
            if case .expression(let index) = subscriptValue {
                return .index(try substitute(base), .expression(try substitute(index)))
            }
            return .index(try substitute(base), subscriptValue)
        case .function(let function, let arguments):
            return .function(function, try arguments.map { try substitute($0) })
        case .arithmetic(let op, let left, let right):
            return .arithmetic(op, try substitute(left), try substitute(right))
        case .subquery(let collection, let variable, let predicate):
            let newCollection = try substitute(collection)
            bound.append(variable)
            defer { bound.removeLast() }
            return .subquery(collection: newCollection, variable: variable, predicate: try substitute(predicate))
        }
    }
}
