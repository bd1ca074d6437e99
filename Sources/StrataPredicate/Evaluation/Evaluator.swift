internal import Foundation

// MARK: - Evaluator

/// Evaluates a syntax tree against an object, with substitution variables and the
/// variables bound by enclosing `SUBQUERY`s.
struct Evaluator {
    private let variables: [String: Any]
    /// Variables bound by enclosing subqueries, innermost last.
    private var bindings: [(name: String, value: Value)] = []

    init(variables: [String: Any]) {
        self.variables = variables
    }

    // MARK: - Predicates

    mutating func evaluate(_ node: PredicateNode, object: Any?) throws -> Bool {
        switch node {
        case .constant(let value):
            return value
        case .comparison(let comparison):
            return try evaluate(comparison, object: object)
        case .and(let children):
            for child in children where try !evaluate(child, object: object) { return false }
            return true
        case .or(let children):
            for child in children where try evaluate(child, object: object) { return true }
            return false
        case .not(let child):
            return try !evaluate(child, object: object)
        }
    }

    private mutating func evaluate(_ comparison: ComparisonPredicate, object: Any?) throws -> Bool {
        let lhs = try value(of: comparison.leftExpression, object: object)
        let rhs = try comparison.rightAggregate?.value ?? value(of: comparison.rightExpression, object: object)
        switch comparison.modifier {
        case .direct:
            return try Comparison.evaluate(lhs, comparison, rhs)
        case .any:
            for element in lhs.elements where try Comparison.evaluate(element, comparison, rhs) { return true }
            return false
        case .all:
            for element in lhs.elements where try !Comparison.evaluate(element, comparison, rhs) { return false }
            return true
        case .notAny:
            for element in lhs.elements where try Comparison.evaluate(element, comparison, rhs) { return false }
            return true
        }
    }

    // MARK: - Expressions

    mutating func value(of expression: FormatExpression, object: Any?) throws -> Value {
        switch expression {
        case .constant(let constant):
            return Value(constant)
        case .evaluatedObject:
            return Value(any: object)
        case .keyPath(let path):
            return Value(any: KeyPathWalker.value(of: object, path: path))
        case .variable(let name):
            return try variable(name)
        case .aggregate(let elements):
            var values: [Value] = []
            values.reserveCapacity(elements.count)
            for element in elements { values.append(try value(of: element, object: object)) }
            return .collection(values)
        case .keyPathOf(let base, let path):
            let baseValue = try value(of: base, object: object)
            return Value(any: KeyPathWalker.value(of: baseValue.any, path: path))
        case .index(let base, let subscriptValue):
            return try index(try value(of: base, object: object), subscriptValue, object: object)
        case .function(let function, let arguments):
            var values: [Value] = []
            for argument in arguments { values.append(try value(of: argument, object: object)) }
            return try call(function, values)
        case .arithmetic(let op, let left, let right):
            return try arithmetic(op, try value(of: left, object: object), try value(of: right, object: object))
        case .subquery(let collection, let variable, let predicate):
            let elements = try value(of: collection, object: object).elements
            var matching: [Value] = []
            for element in elements {
                let elementObject = element.any
                bindings.append((variable, element))
                defer { bindings.removeLast() }
                if try evaluate(predicate, object: elementObject) { matching.append(element) }
            }
            return .collection(matching)
        }
    }

    private func variable(_ name: String) throws -> Value {
        if let bound = bindings.last(where: { $0.name == name }) { return bound.value }
        guard let value = variables[name] else {
            throw PredicateEvaluationError(kind: .missingVariable, message: "no value for substitution variable $\(name)")
        }
        return Value(any: value)
    }

    private mutating func index(_ base: Value, _ subscriptValue: FormatSubscript, object: Any?) throws -> Value {
        switch subscriptValue {
        case .first:
            if case .collection(let elements) = base { return elements.first ?? .null }
            return base.isNull ? .null : base
        case .last:
            if case .collection(let elements) = base { return elements.last ?? .null }
            return base.isNull ? .null : base
        case .size:
            switch base {
            case .collection(let elements): return .int(elements.count)
            case .string(let string): return .int(string.count)
            case .null: return .int(0)
            default: return .int(1)
            }
        case .expression(let expression):
            let key = try value(of: expression, object: object)
            switch (base, key) {
            case (.collection(let elements), _):
                guard let number = Number(key), case .int(let position) = number else {
                    throw PredicateEvaluationError(kind: .typeMismatch,
                                                   message: "an array index must be an integer, not \(key.kindName)")
                }
                return elements.indices.contains(position) ? elements[position] : .null
            case (.object(let object), .string(let name)):
                return Value(any: KeyPathWalker.readKey(name, of: object))
            case (.null, _):
                return .null
            default:
                throw PredicateEvaluationError(kind: .typeMismatch,
                                               message: "cannot subscript \(base.kindName) with \(key.kindName)")
            }
        }
    }

    // MARK: - Arithmetic and functions

    private func arithmetic(_ op: ArithmeticOperator, _ lhs: Value, _ rhs: Value) throws -> Value {
        if lhs.isNull || rhs.isNull { return .null }
        switch (lhs, rhs) {
        case (.date(let date), _) where op == .add || op == .subtract:
            guard let seconds = Number(rhs) else { break }
            return .date(date.addingTimeInterval(op == .add ? seconds.double : -seconds.double))
        case (_, .date(let date)) where op == .add:
            guard let seconds = Number(lhs) else { break }
            return .date(date.addingTimeInterval(seconds.double))
        default:
            if let a = Number(lhs), let b = Number(rhs) { return try Number.apply(op, a, b).value }
        }
        throw PredicateEvaluationError(kind: .typeMismatch,
                                       message: "cannot apply \(op.rawValue) to \(lhs.kindName) and \(rhs.kindName)")
    }

    private func call(_ function: FormatFunction, _ arguments: [Value]) throws -> Value {
        let argument = arguments.first ?? .null
        func mismatch() -> PredicateEvaluationError {
            PredicateEvaluationError(kind: .typeMismatch, message: "\(function.rawValue)() cannot take \(argument.kindName)")
        }
        switch function {
        case .now:
            return .date(Date())
        case .lowercase, .uppercase:
            if argument.isNull { return .null }
            guard case .string(let string) = argument else { throw mismatch() }
            return .string(function == .lowercase ? string.lowercased() : string.uppercased())
        case .canonical:
            if argument.isNull { return .null }
            guard case .string(let string) = argument else { throw mismatch() }
            return .string(FormatFunction.canonical(string))
        case .length:
            if argument.isNull { return .null }
            guard case .string(let string) = argument else { throw mismatch() }
            return .int(string.count)
        case .abs, .sqrt, .floor, .ceiling:
            if argument.isNull { return .null }
            guard let number = Number(argument) else { throw mismatch() }
            switch (function, number) {
            case (.abs, .int(let v)) where v != Int.min: return .int(Swift.abs(v))
            case (.abs, .decimal(let v)): return .decimal(v < 0 ? -v : v)
            case (.abs, _): return .double(Swift.abs(number.double))
            case (.floor, .int), (.ceiling, .int): return number.value
            case (.floor, _): return .double(Foundation.floor(number.double))
            case (.ceiling, _): return .double(Foundation.ceil(number.double))
            default: return .double(Foundation.sqrt(number.double))
            }
        case .count:
            return .int(argument.elements.count)
        case .sum:
            guard let sum = Aggregates.sum(argument.elements) else { throw mismatch() }
            return sum
        case .average:
            if argument.elements.allSatisfy(\.isNull) { return .null }
            guard let average = Aggregates.average(argument.elements) else { throw mismatch() }
            return average
        case .min:
            return Aggregates.extreme(argument.elements, want: .orderedAscending) ?? .null
        case .max:
            return Aggregates.extreme(argument.elements, want: .orderedDescending) ?? .null
        }
    }
}
