// MARK: - A predicate tree as a list

/// A predicate tree in pre-order, one token per node or expression holding its own fields
/// and how many children follow it: two trees are equal exactly when their token lists are,
/// and making the list needs no recursion. ``FormatPredicate`` compares and hashes a tree
/// deeper than ``FormatPredicate/maximumNestingDepth`` by it, where the synthesized,
/// recursive `==` and `hash(into:)` could exhaust the stack.
struct PredicateTokens: Hashable {
    enum Token: Hashable {
        case constant(Bool)
        case and(count: Int)
        case or(count: Int)
        case not
        case comparison(ComparisonOperator, ComparisonModifier, ComparisonOptions)
        case value(PredicateConstant)
        case evaluatedObject
        case keyPath(FormatKeyPath)
        case variable(String)
        case aggregate(count: Int)
        case keyPathOf(FormatKeyPath)
        case index(FormatSubscript?)  // nil: an expression subscript, which follows the base
        case function(FormatFunction, count: Int)
        case arithmetic(ArithmeticOperator)
        case subquery(variable: String)
    }

    private(set) var tokens: [Token] = []

    init(_ root: PredicateNode) {
        enum Item {
            case node(PredicateNode)
            case expression(FormatExpression)
        }
        // Children are pushed last first, so they come off the stack in order.
        var pending: [Item] = [.node(root)]
        while let item = pending.popLast() {
            switch item {
            case .node(let node):
                switch node {
                case .constant(let value):
                    tokens.append(.constant(value))
                case .comparison(let comparison):
                    tokens.append(.comparison(comparison.operatorType, comparison.modifier, comparison.options))
                    pending.append(.expression(comparison.rightExpression))
                    pending.append(.expression(comparison.leftExpression))
                case .and(let children):
                    tokens.append(.and(count: children.count))
                    pending += children.reversed().map { .node($0) }
                case .or(let children):
                    tokens.append(.or(count: children.count))
                    pending += children.reversed().map { .node($0) }
                case .not(let child):
                    tokens.append(.not)
                    pending.append(.node(child))
                }
            case .expression(let expression):
                switch expression {
                case .constant(let constant):
                    tokens.append(.value(constant))
                case .evaluatedObject:
                    tokens.append(.evaluatedObject)
                case .keyPath(let path):
                    tokens.append(.keyPath(path))
                case .variable(let name):
                    tokens.append(.variable(name))
                case .aggregate(let elements):
                    tokens.append(.aggregate(count: elements.count))
                    pending += elements.reversed().map { .expression($0) }
                case .keyPathOf(let base, let path):
                    tokens.append(.keyPathOf(path))
                    pending.append(.expression(base))
                case .index(let base, let subscriptValue):
                    if case .expression(let index) = subscriptValue {
                        tokens.append(.index(nil))
                        pending.append(.expression(index))
                    } else {
                        tokens.append(.index(subscriptValue))
                    }
                    pending.append(.expression(base))
                case .function(let function, let arguments):
                    tokens.append(.function(function, count: arguments.count))
                    pending += arguments.reversed().map { .expression($0) }
                case .arithmetic(let operation, let left, let right):
                    tokens.append(.arithmetic(operation))
                    pending.append(.expression(right))
                    pending.append(.expression(left))
                case .subquery(let collection, let variable, let predicate):
                    tokens.append(.subquery(variable: variable))
                    pending.append(.node(predicate))
                    pending.append(.expression(collection))
                }
            }
        }
    }
}
