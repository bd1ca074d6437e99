// MARK: - A predicate tree as a list

/// A predicate tree in pre-order, one token per node or expression holding its own fields
/// and how many children follow it: two trees are equal exactly when their token lists are,
/// and making the list needs no recursion. ``PredicateNode`` and ``FormatExpression`` compare
/// and hash by it, where the synthesized, recursive `==` and `hash(into:)` exhausted the
/// stack on a tree built by hand tens of thousands of levels deep.
enum PredicateTokens {
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

    /// The tokens of a tree one at a time, in pre-order, made on demand: two trees compare
    /// in lockstep and stop at the first difference, and hashing makes no list.
    struct Stream {
        enum Item {
            case node(PredicateNode)
            case expression(FormatExpression)
        }

        /// What is left to visit; children are pushed last first, so they come off in order.
        private var pending: [Item]

        init(_ root: PredicateNode) { pending = [.node(root)] }
        init(_ root: FormatExpression) { pending = [.expression(root)] }

        mutating func next() -> Token? {
            guard let item = pending.popLast() else { return nil }
            switch item {
            case .node(let node):
                switch node {
                case .constant(let value):
                    return .constant(value)
                case .comparison(let comparison):
                    pending.append(.expression(comparison.rightExpression))
                    pending.append(.expression(comparison.leftExpression))
                    return .comparison(comparison.operatorType, comparison.modifier, comparison.options)
                case .and(let children):
                    pending += children.reversed().map { .node($0) }
                    return .and(count: children.count)
                case .or(let children):
                    pending += children.reversed().map { .node($0) }
                    return .or(count: children.count)
                case .not(let child):
                    pending.append(.node(child))
                    return .not
                }
            case .expression(let expression):
                switch expression {
                case .constant(let constant):
                    return .value(constant)
                case .evaluatedObject:
                    return .evaluatedObject
                case .keyPath(let path):
                    return .keyPath(path)
                case .variable(let name):
                    return .variable(name)
                case .aggregate(let elements):
                    pending += elements.reversed().map { .expression($0) }
                    return .aggregate(count: elements.count)
                case .keyPathOf(let base, let path):
                    pending.append(.expression(base))
                    return .keyPathOf(path)
                case .index(let base, let subscriptValue):
                    if case .expression(let index) = subscriptValue {
                        pending.append(.expression(index))
                        pending.append(.expression(base))
                        return .index(nil)
                    }
                    pending.append(.expression(base))
                    return .index(subscriptValue)
                case .function(let function, let arguments):
                    pending += arguments.reversed().map { .expression($0) }
                    return .function(function, count: arguments.count)
                case .arithmetic(let operation, let left, let right):
                    pending.append(.expression(right))
                    pending.append(.expression(left))
                    return .arithmetic(operation)
                case .subquery(let collection, let variable, let predicate):
                    pending.append(.node(predicate))
                    pending.append(.expression(collection))
                    return .subquery(variable: variable)
                }
            }
        }

        /// Whether two streams give the same tokens (each consumed up to the first difference).
        static func same(_ a: Stream, _ b: Stream) -> Bool {
            var (a, b) = (a, b)
            while true {
                let (x, y) = (a.next(), b.next())
                guard x == y else { return false }
                if x == nil { return true }
            }
        }

        /// Feeds every token to `hasher`, and the count of tokens after them.
        static func hash(_ stream: Stream, into hasher: inout Hasher) {
            var stream = stream
            var count = 0
            while let token = stream.next() {
                hasher.combine(token)
                count += 1
            }
            hasher.combine(count)
        }
    }
}

// MARK: - Equality and hashing without recursion

// The synthesized `==` and `hash(into:)` of these indirect enums recurse once per level: a
// tree built by hand tens of thousands of levels deep exhausted the stack comparing or
// hashing it (a crash). Both walk the tree's tokens (``PredicateTokens``) instead.

extension PredicateNode {
    /// Whether the trees are equal: the same nodes and expressions in the same places.
    /// Compared without recursion, however deep the trees are.
    ///
    /// ```swift
    /// try FormatPredicate(format: "a = 1").node == FormatPredicate(format: "a == 1").node  // true
    /// ```
    public static func == (lhs: PredicateNode, rhs: PredicateNode) -> Bool {
        PredicateTokens.Stream.same(PredicateTokens.Stream(lhs), PredicateTokens.Stream(rhs))
    }

    /// Hashes the tree without recursion; consistent with ``==(_:_:)``.
    public func hash(into hasher: inout Hasher) {
        PredicateTokens.Stream.hash(PredicateTokens.Stream(self), into: &hasher)
    }
}

extension FormatExpression {
    /// Whether the expressions are equal: the same parts in the same places. Compared
    /// without recursion, however deep the expressions are.
    ///
    /// ```swift
    /// try FormatExpression(format: "a + 1") == FormatExpression(format: "a+1")  // true
    /// ```
    public static func == (lhs: FormatExpression, rhs: FormatExpression) -> Bool {
        PredicateTokens.Stream.same(PredicateTokens.Stream(lhs), PredicateTokens.Stream(rhs))
    }

    /// Hashes the expression without recursion; consistent with ``==(_:_:)``.
    public func hash(into hasher: inout Hasher) {
        PredicateTokens.Stream.hash(PredicateTokens.Stream(self), into: &hasher)
    }
}
