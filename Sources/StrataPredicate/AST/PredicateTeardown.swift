// MARK: - Freeing deep trees without recursion

/// How a ``FormatPredicate`` holds its tree.
enum PredicateTree: Sendable {
    /// A tree no deeper than ``FormatPredicate/maximumNestingDepth``, held as is.
    case held(PredicateNode)
    /// A deeper one (built by hand), held by an owner that frees it without recursion.
    case deep(DeepPredicateTree)
}

/// The owner of a predicate tree deeper than ``FormatPredicate/maximumNestingDepth``.
///
/// Swift frees an indirect enum by releasing its payload, which frees the payload's own
/// children first: one stack frame per level, so a tree built by hand ~50,000 levels deep
/// crashed when its last copy went. When the owner goes, it takes the tree apart with a
/// worklist instead (``PredicateNode/dismantle(_:)``). `@unchecked Sendable`: `node` is
/// written only by `deinit`, when no one else can read it.
final class DeepPredicateTree: @unchecked Sendable {
    private(set) var node: PredicateNode

    init(_ node: PredicateNode) { self.node = node }

    deinit { PredicateNode.dismantle(&node) }
}

extension PredicateNode {
    /// Frees the tree in `root` (left holding `TRUEPREDICATE`) level by level: each node's
    /// children are moved to a worklist before the node goes, so freeing a node never frees
    /// its children with it (they are still on the list) and no release recurses. A part
    /// shared with another tree is only released.
    static func dismantle(_ root: inout PredicateNode) {
        var nodes: [PredicateNode] = [root]
        root = .constant(true)
        var expressions: [FormatExpression] = []
        while true {
            if let node = nodes.popLast() {
                switch node {
                case .constant: break
                case .comparison(let comparison):
                    expressions.append(comparison.leftExpression)
                    expressions.append(comparison.rightExpression)
                case .and(let children), .or(let children):
                    nodes.append(contentsOf: children)
                case .not(let child):
                    nodes.append(child)
                }
            } else if let expression = expressions.popLast() {
                switch expression {
                case .constant, .evaluatedObject, .keyPath, .variable: break
                case .aggregate(let elements), .function(_, let elements):
                    expressions.append(contentsOf: elements)
                case .keyPathOf(let base, _):
                    expressions.append(base)
                case .index(let base, let subscriptValue):
                    expressions.append(base)
                    if case .expression(let index) = subscriptValue { expressions.append(index) }
                case .arithmetic(_, let left, let right):
                    expressions.append(left)
                    expressions.append(right)
                case .subquery(let collection, _, let predicate):
                    expressions.append(collection)
                    nodes.append(predicate)
                }
            } else {
                return
            }
        }
    }
}
