// MARK: - ComparisonPredicate

/// A comparison of two expressions, such as `age >= 18` or `ANY tags.name ==[c] 'swift'`
/// (Core Data's `NSComparisonPredicate`).
///
/// A query planner pattern-matches these: ``leftExpression`` is usually a
/// ``FormatExpression/keyPath(_:)`` and ``rightExpression`` a
/// ``FormatExpression/constant(_:)``; `BETWEEN` has a two-element aggregate on the right
/// and `IN` an aggregate or a key path.
///
/// ```swift
/// let c = ComparisonPredicate(.keyPath("age"), .greaterThanOrEqualTo, .constant(.integer(18)))
/// FormatPredicate(.comparison(c)).description  // "age >= 18"
/// ```
public struct ComparisonPredicate: Sendable, Hashable {
    /// The expression on the left (`leftExpression`).
    public let leftExpression: FormatExpression
    /// The operator (`predicateOperatorType`).
    public let operatorType: ComparisonOperator
    /// The expression on the right (`rightExpression`).
    public let rightExpression: FormatExpression
    /// `ANY`, `ALL`, `NONE` or direct (`comparisonPredicateModifier`).
    public let modifier: ComparisonModifier
    /// `[c]`, `[d]`, `[n]` string options (`options`).
    public let options: ComparisonOptions

    /// The compiled `LIKE`/`MATCHES` pattern when the right side is a constant string, so
    /// evaluation never recompiles it. Not part of equality.
    let matcher: PatternMatcher?

    /// The runtime value of a constant aggregate on the right (`IN {…}`, `BETWEEN {a, b}`),
    /// converted once instead of on every evaluation. Not part of equality.
    let rightAggregate: ConstantValue?

    /// Creates a comparison.
    ///
    /// A constant `LIKE` or `MATCHES` pattern is compiled here once; an invalid regular
    /// expression is reported when the predicate is evaluated.
    ///
    /// ```swift
    /// let c = ComparisonPredicate(.keyPath("name"), .like, .constant(.string("A*")), options: .caseInsensitive)
    /// ```
    public init(
        _ leftExpression: FormatExpression,
        _ operatorType: ComparisonOperator,
        _ rightExpression: FormatExpression,
        modifier: ComparisonModifier = .direct,
        options: ComparisonOptions = []
    ) {
        self.leftExpression = leftExpression
        self.operatorType = operatorType
        self.rightExpression = rightExpression
        self.modifier = modifier
        self.options = options
        if operatorType == .like || operatorType == .matches,
           case .constant(.string(let pattern)) = rightExpression {
            matcher = PatternCache.shared.matcher(
                pattern: pattern, isRegex: operatorType == .matches, options: options)
        } else {
            matcher = nil
        }
        if case .constant(let constant) = rightExpression, case .aggregate = constant {
            rightAggregate = ConstantValue(Value(constant))
        } else {
            rightAggregate = nil
        }
    }

    /// Whether two comparisons have the same expressions, operator, modifier and options.
    ///
    /// The cached pattern is not compared.
    ///
    /// ```swift
    /// try FormatPredicate(format: "a = 1") == FormatPredicate(format: "a == 1")  // true
    /// ```
    public static func == (lhs: ComparisonPredicate, rhs: ComparisonPredicate) -> Bool {
        lhs.leftExpression == rhs.leftExpression && lhs.operatorType == rhs.operatorType
            && lhs.rightExpression == rhs.rightExpression && lhs.modifier == rhs.modifier
            && lhs.options == rhs.options
    }

    /// Hashes the expressions, operator, modifier and options.
    ///
    /// Consistent with ``==(_:_:)``.
    ///
    /// ```swift
    /// Set([try FormatPredicate(format: "a = 1")])
    /// ```
    public func hash(into hasher: inout Hasher) {
        hasher.combine(leftExpression)
        hasher.combine(operatorType)
        hasher.combine(rightExpression)
        hasher.combine(modifier)
        hasher.combine(options)
    }
}
