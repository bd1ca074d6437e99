// MARK: - FormatPredicate

/// A logical condition parsed from an `NSPredicate`-style format string (Core Data's
/// `NSPredicate`, which Foundation on Linux lacks).
///
/// A predicate is parsed once into a ``PredicateNode`` tree and evaluated many times.
/// Arguments are converted to constants at parse time, so the predicate is `Sendable`,
/// `Hashable`, and free of references to the caller's objects. The ``description`` is a
/// canonical format string that parses back to an equal predicate. The grammar and the
/// evaluation semantics are specified in `Specs/0003-predicate-grammar.md`.
///
/// ## Topics
///
/// ### Creating predicates
/// - ``init(format:_:)``
/// - ``init(format:argumentArray:)``
/// - ``init(value:)``
/// - ``init(_:)``
/// - ``truePredicate``
/// - ``falsePredicate``
/// - ``and(_:)``
/// - ``or(_:)``
/// - ``not(_:)``
///
/// ### Evaluating
/// - ``evaluate(with:substitutionVariables:)``
/// - ``withSubstitutionVariables(_:)``
///
/// ### Inspecting
/// - ``node``
/// - ``description``
///
/// ```swift
/// let adults = try FormatPredicate(format: "age >= %d AND name BEGINSWITH[c] %@", 18, "a")
/// try adults.evaluate(with: ["age": 30, "name": "Ada"] as [String: Any])  // true
/// print(adults)  // age >= 18 AND name BEGINSWITH[c] "a"
/// ```
public struct FormatPredicate: Sendable, Hashable, CustomStringConvertible {
    /// The syntax tree, for query planners and other tools that inspect predicates.
    ///
    /// Equal predicates have equal trees.
    ///
    /// ```swift
    /// if case .comparison(let c) = try FormatPredicate(format: "age > 3").node { print(c.operatorType) }
    /// ```
    public var node: PredicateNode {
        switch tree {
        case .held(let node): node
        case .deep(let owner): owner.node
        }
    }
    /// ``PredicateNode/nestingDepth`` of ``node``, measured once when the predicate is made.
    let depth: Int
    /// The tree: held as is, or, deeper than ``maximumNestingDepth`` (built by hand), by an
    /// owner that takes it apart without recursion when the last copy of the predicate goes.
    private let tree: PredicateTree

    // MARK: - Creating

    /// Parses `format`, substituting `arguments` for `%@`, `%K`, `%d`, `%i`, `%f` and the
    /// other specifiers (Core Data's `NSPredicate(format:_:)`).
    ///
    /// Throws ``FormatPredicateError`` with the position of the problem when the string
    /// does not parse, an argument is missing, or an argument's type is unsupported.
    /// Swift passes a lone `[Any]` given to a variadic `Any...` as the argument list itself;
    /// to pass one `[Any]` for one `%@`, use ``init(format:argumentArray:)``.
    ///
    /// ```swift
    /// let p = try FormatPredicate(format: "%K > %@", "creationDate", Date())
    /// ```
    public init(format: String, _ arguments: Any...) throws {
        try self.init(format: format, argumentArray: arguments)
    }

    /// Parses `format` with an array of arguments (Core Data's
    /// `NSPredicate(format:argumentArray:)`).
    ///
    /// Every argument must be used: extra arguments are an error, since they usually mean
    /// a mistyped format string.
    ///
    /// ```swift
    /// let p = try FormatPredicate(format: "age BETWEEN %@", argumentArray: [[100, 200]])
    /// ```
    public init(format: String, argumentArray: [Any]) throws {
        var parser = Parser(format: format, arguments: argumentArray)
        let node = try parser.parsePredicate()
        self.init(node, depth: node.nestingDepth)
    }

    /// Wraps a syntax tree built by hand (Core Data's `NSComparisonPredicate` and
    /// `NSCompoundPredicate` initializers).
    ///
    /// The tree is used as given. One deeper than ``maximumNestingDepth`` is freed without
    /// recursion when the last copy of the predicate goes (before, one ~50,000 levels deep
    /// exhausted the stack as Swift freed it level by level); a bare ``PredicateNode`` or
    /// ``FormatExpression`` is an indirect enum Swift frees recursively, so keep a very deep
    /// one in a predicate rather than on its own, or let it go with
    /// ``PredicateNode/dismantle(_:)`` (``FormatExpression/dismantle(_:)``).
    ///
    /// ```swift
    /// let p = FormatPredicate(.comparison(ComparisonPredicate(.keyPath("age"), .lessThan, .constant(.integer(5)))))
    /// ```
    public init(_ node: PredicateNode) {
        self.init(node, depth: node.nestingDepth)
    }

    /// A predicate whose tree's depth is known already.
    private init(_ node: PredicateNode, depth: Int) {
        self.depth = depth
        tree = depth > Self.maximumNestingDepth ? .deep(DeepPredicateTree(node)) : .held(node)
    }

    /// A predicate that always evaluates to `value` (Core Data's `NSPredicate(value:)`).
    ///
    /// Prints as `TRUEPREDICATE` or `FALSEPREDICATE`.
    ///
    /// ```swift
    /// FormatPredicate(value: false).description  // "FALSEPREDICATE"
    /// ```
    public init(value: Bool) {
        self.init(.constant(value), depth: 1)
    }

    /// The predicate that is always true, `TRUEPREDICATE`.
    ///
    /// Same as `FormatPredicate(value: true)`.
    ///
    /// ```swift
    /// try FormatPredicate.truePredicate.evaluate(with: nil)  // true
    /// ```
    public static let truePredicate = FormatPredicate(value: true)

    /// The predicate that is always false, `FALSEPREDICATE`.
    ///
    /// Same as `FormatPredicate(value: false)`.
    ///
    /// ```swift
    /// try FormatPredicate.falsePredicate.evaluate(with: nil)  // false
    /// ```
    public static let falsePredicate = FormatPredicate(value: false)

    // MARK: - Compound predicates

    /// All of `predicates` (Core Data's `NSCompoundPredicate(andPredicateWithSubpredicates:)`).
    ///
    /// An empty list is `TRUEPREDICATE`; a single predicate is returned unchanged; an AND
    /// among `predicates` contributes its children.
    ///
    /// ```swift
    /// let p = FormatPredicate.and([try FormatPredicate(format: "a > 1"), try FormatPredicate(format: "b < 2")])
    /// p.description  // "a > 1 AND b < 2"
    /// ```
    public static func and(_ predicates: [FormatPredicate]) -> FormatPredicate {
        switch predicates.count {
        case 0: truePredicate
        case 1: predicates[0]
        // An AND inside an AND is spliced in (`(a AND b) AND c` is `a AND b AND c`): a
        // predicate folded term by term stays two levels deep, not one level per term.
        default: compound(predicates, PredicateNode.and) { if case .and(let children) = $0 { children } else { nil } }
        }
    }

    /// Any of `predicates` (Core Data's `NSCompoundPredicate(orPredicateWithSubpredicates:)`).
    ///
    /// An empty list is `FALSEPREDICATE`; a single predicate is returned unchanged; an OR
    /// among `predicates` contributes its children.
    ///
    /// ```swift
    /// let p = FormatPredicate.or([try FormatPredicate(format: "a > 1"), try FormatPredicate(format: "b < 2")])
    /// ```
    public static func or(_ predicates: [FormatPredicate]) -> FormatPredicate {
        switch predicates.count {
        case 0: falsePredicate
        case 1: predicates[0]
        // An OR inside an OR is spliced in, as in ``and(_:)``.
        default: compound(predicates, PredicateNode.or) { if case .or(let children) = $0 { children } else { nil } }
        }
    }

    /// The negation of `predicate` (Core Data's `NSCompoundPredicate(notPredicateWithSubpredicate:)`).
    ///
    /// Prints as `NOT …`; the negation of a negation is the predicate inside it.
    ///
    /// ```swift
    /// FormatPredicate.not(try FormatPredicate(format: "a > 1")).description  // "NOT a > 1"
    /// ```
    public static func not(_ predicate: FormatPredicate) -> FormatPredicate {
        // NOT NOT p is p (a predicate is true or false): negating again and again stays shallow.
        if case .not(let inner) = predicate.node { return FormatPredicate(inner, depth: predicate.depth - 1) }
        return FormatPredicate(.not(predicate.node), depth: predicate.depth + 1)
    }

    /// `make` of `predicates`' nodes, each compound of the same kind (`spliced` gives its
    /// children) spliced in; the depth from the parts' depths, without walking the tree.
    private static func compound(
        _ predicates: [FormatPredicate], _ make: ([PredicateNode]) -> PredicateNode, spliced: (PredicateNode) -> [PredicateNode]?
    ) -> FormatPredicate {
        var nodes: [PredicateNode] = []
        var depth = 1
        for predicate in predicates {
            if let children = spliced(predicate.node) {
                nodes += children
                depth = max(depth, predicate.depth)
            } else {
                nodes.append(predicate.node)
                depth = max(depth, predicate.depth + 1)
            }
        }
        return FormatPredicate(make(nodes), depth: depth)
    }

    // MARK: - Evaluating

    /// Whether `object` satisfies the predicate (Core Data's
    /// `evaluate(with:substitutionVariables:)`).
    ///
    /// `object` may be anything `KeyValueCoding`, a dictionary, or a plain value for
    /// `SELF`. `$variables` are looked up in `substitutionVariables`; a missing one, an
    /// operand of the wrong type for arithmetic, `BETWEEN` or a function, or an invalid
    /// `MATCHES` pattern throws ``PredicateEvaluationError``.
    ///
    /// ```swift
    /// let p = try FormatPredicate(format: "SELF > 0")
    /// try p.evaluate(with: -1)  // false
    /// try p.evaluate(with: 5)   // true
    /// ```
    public func evaluate(with object: Any?, substitutionVariables: [String: Any] = [:]) throws -> Bool {
        try checkNesting()
        var evaluator = Evaluator(variables: substitutionVariables)
        return try evaluator.evaluate(node, object: object)
    }

    /// A copy with every `$variable` replaced by its value in `variables` (Core Data's
    /// `withSubstitutionVariables(_:)`).
    ///
    /// Variables bound by a `SUBQUERY` are left alone. Throws ``FormatPredicateError`` of
    /// kind ``FormatPredicateError/Kind/missingVariable`` when a free variable has no value,
    /// or ``FormatPredicateError/Kind/unsupportedVariable`` when a value's type cannot be
    /// used in a predicate.
    ///
    /// ```swift
    /// let template = try FormatPredicate(format: "age > $minimum")
    /// let p = try template.withSubstitutionVariables(["minimum": 21])  // age > 21
    /// ```
    public func withSubstitutionVariables(_ variables: [String: Any]) throws -> FormatPredicate {
        var substituter = VariableSubstituter(variables: variables)
        return FormatPredicate(try substituter.substitute(node))
    }

    // MARK: - Description

    /// The canonical format string, which parses back to an equal predicate.
    ///
    /// Strings are double-quoted with escapes, compound children are parenthesized when
    /// needed, dates print as `CAST(<seconds since 2001>, "NSDate")`. Object identities
    /// print as `<object: …>`, which does not parse. A tree built by hand deeper than
    /// ``maximumNestingDepth`` prints as `<predicate nests N levels deep, more than 500: not
    /// printed>`, which does not parse either (printing it would exhaust the stack; before,
    /// it crashed).
    ///
    /// ```swift
    /// try FormatPredicate(format: "name = 'x' && !(age < 5)").description  // name == "x" AND NOT age < 5
    /// ```
    public var description: String {
        guard depth <= Self.maximumNestingDepth else {
            return "<predicate nests \(depth) levels deep, more than \(Self.maximumNestingDepth): not printed>"
        }
        return PredicatePrinter.print(node)
    }

    // MARK: - Equality

    /// Whether the trees are equal, compared without recursion however deep they are
    /// (before, comparing or hashing one built by hand far deeper than
    /// ``maximumNestingDepth`` could exhaust the stack).
    public static func == (lhs: FormatPredicate, rhs: FormatPredicate) -> Bool {
        lhs.depth == rhs.depth && lhs.node == rhs.node
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(node)
    }
}
