// MARK: - PredicateNode

/// The syntax tree of a predicate: a constant, a comparison, or a compound of predicates
/// (Core Data's `NSPredicate` subclasses: `NSComparisonPredicate`, `NSCompoundPredicate`,
/// and `TRUEPREDICATE`/`FALSEPREDICATE`).
///
/// `a AND b AND c` parses as one ``and(_:)`` with three children; a parenthesized group
/// stays a separate child, so the tree mirrors the text and round-trips through the
/// description.
///
/// ```swift
/// let p = try FormatPredicate(format: "age > 18 AND (name BEGINSWITH 'A' OR name BEGINSWITH 'B')")
/// if case .and(let children) = p.node { print(children.count) }  // 2
/// ```
public indirect enum PredicateNode: Sendable, Hashable {
    /// `TRUEPREDICATE` (true) or `FALSEPREDICATE` (false).
    case constant(Bool)
    /// A comparison (`NSComparisonPredicate`).
    case comparison(ComparisonPredicate)
    /// All children hold; true when empty (`NSCompoundPredicate` `.and`).
    case and([PredicateNode])
    /// Some child holds; false when empty (`NSCompoundPredicate` `.or`).
    case or([PredicateNode])
    /// The child does not hold (`NSCompoundPredicate` `.not`).
    case not(PredicateNode)
}
