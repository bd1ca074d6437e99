// MARK: - Nesting depth

extension PredicateNode {
    /// How many levels the tree nests: each compound, comparison, expression, subquery and
    /// subscript is one level below its parent. Computed without recursion, so any tree can
    /// be measured, however deep.
    ///
    /// ```swift
    /// try FormatPredicate(format: "a > 1 AND NOT b < 2").node.nestingDepth  // 4
    /// ```
    public var nestingDepth: Int {
        enum Item {
            case node(PredicateNode)
            case expression(FormatExpression)
        }
        var deepest = 0
        var pending: [(Item, Int)] = [(.node(self), 1)]
        while let (item, depth) = pending.popLast() {
            deepest = max(deepest, depth)
            switch item {
            case .node(let node):
                switch node {
                case .constant: break
                case .comparison(let comparison):
                    pending.append((.expression(comparison.leftExpression), depth + 1))
                    pending.append((.expression(comparison.rightExpression), depth + 1))
                case .and(let children), .or(let children):
                    for child in children { pending.append((.node(child), depth + 1)) }
                case .not(let child):
                    pending.append((.node(child), depth + 1))
                }
            case .expression(let expression):
                switch expression {
                case .constant, .evaluatedObject, .keyPath, .variable: break
                case .aggregate(let elements):
                    for element in elements { pending.append((.expression(element), depth + 1)) }
                case .keyPathOf(let base, _):
                    pending.append((.expression(base), depth + 1))
                case .index(let base, let subscriptValue):
                    pending.append((.expression(base), depth + 1))
                    if case .expression(let index) = subscriptValue { pending.append((.expression(index), depth + 1)) }
                case .function(_, let arguments):
                    for argument in arguments { pending.append((.expression(argument), depth + 1)) }
                case .arithmetic(_, let left, let right):
                    pending.append((.expression(left), depth + 1))
                    pending.append((.expression(right), depth + 1))
                case .subquery(let collection, _, let predicate):
                    pending.append((.expression(collection), depth + 1))
                    pending.append((.node(predicate), depth + 1))
                }
            }
        }
        return deepest
    }
}

extension FormatPredicate {
    /// The deepest tree a predicate may have to be evaluated or fetched with (see
    /// ``PredicateNode/nestingDepth``). A parsed predicate is always within it (the parser
    /// allows 100 levels of its own nesting); a tree built by hand deeper than this is
    /// refused with ``FormatPredicateError/Kind/nestingTooDeep`` rather than exhausting the
    /// stack of the recursive evaluator and planner.
    public static let maximumNestingDepth = 500

    /// Throws ``FormatPredicateError/Kind/nestingTooDeep`` when the tree is deeper than
    /// ``maximumNestingDepth``.
    ///
    /// ```swift
    /// try predicate.checkNesting()
    /// ```
    public func checkNesting() throws(FormatPredicateError) {
        guard depth > Self.maximumNestingDepth else { return }
        throw FormatPredicateError(
            kind: .nestingTooDeep,
            message: "the predicate nests \(depth) levels deep; at most \(Self.maximumNestingDepth) can be evaluated (a tree built by hand? `and`, `or` and `not` keep folds flat)",
            position: 0)
    }
}
