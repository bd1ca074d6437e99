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
    /// Lets go of the tree in `root` without recursion, at any depth; `root` is left
    /// holding `TRUEPREDICATE`.
    ///
    /// Swift frees an indirect enum recursively — one chain of stack frames per level — and
    /// gives it no `deinit` to do otherwise, so the last copy of a **bare** tree (not held by
    /// a ``FormatPredicate``) deep enough exhausts the thread's stack as it goes and the
    /// process crashes: about 50,000 levels on an 8 MiB stack in a debug build, far fewer on
    /// a thread with a small stack. Trees the parser makes are at most
    /// ``FormatPredicate/maximumNestingDepth`` (500) levels deep and need nothing; a
    /// ``FormatPredicate`` frees a deeper one without recursion itself. A tree built by hand
    /// deeper than that and held on its own — or ``FormatPredicate/node`` read from a deep
    /// predicate and kept after the predicate goes — is let go with this (or by wrapping it in
    /// a ``FormatPredicate``). Each node's children are moved to a worklist before the node
    /// goes, so no release recurses; a part another copy still holds is only released, and
    /// that copy is unchanged (let it go the same way).
    ///
    /// ```swift
    /// var node = PredicateNode.constant(true)
    /// for _ in 0..<200_000 { node = .not(node) }
    /// PredicateNode.dismantle(&node)  // freed here; `node` is TRUEPREDICATE
    /// ```
    public static func dismantle(_ root: inout PredicateNode) {
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

extension FormatExpression {
    /// Lets go of the expression tree in `root` without recursion, at any depth, as
    /// ``PredicateNode/dismantle(_:)`` does a predicate tree (a bare expression is an indirect
    /// enum Swift frees recursively); `root` is left holding `SELF` (``evaluatedObject``).
    ///
    /// ```swift
    /// var sum = FormatExpression.keyPath("a")
    /// for _ in 0..<200_000 { sum = .arithmetic(.add, sum, .constant(.integer(1))) }
    /// FormatExpression.dismantle(&sum)
    /// ```
    public static func dismantle(_ root: inout FormatExpression) {
        var node = PredicateNode.comparison(ComparisonPredicate(root, .equalTo, .evaluatedObject))
        root = .evaluatedObject
        PredicateNode.dismantle(&node)
    }
}
