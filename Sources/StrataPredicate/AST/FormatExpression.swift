// MARK: - FormatExpression

/// One side of a comparison: a key path, a constant, a variable, `SELF`, a function, an
/// aggregate or a subquery (Core Data's `NSExpression`).
///
/// The parser produces canonical trees: an aggregate whose elements are all constants is a
/// ``constant(_:)`` holding ``PredicateConstant/aggregate(_:)``, `SELF.name` is
/// ``keyPath(_:)``, and `-5` is a negative constant. A query planner can therefore match
/// `key = const` as `.keyPath(path)` against `.constant(value)`.
///
/// ```swift
/// let p = try FormatPredicate(format: "age BETWEEN {18, 65}")
/// if case .comparison(let c) = p.node, case .keyPath(let path) = c.leftExpression {
///     print(path.string)  // "age"
/// }
/// ```
public indirect enum FormatExpression: Sendable, Hashable {
    /// A constant (`NSConstantValueExpressionType`).
    case constant(PredicateConstant)
    /// `SELF`, the object being evaluated (`NSEvaluatedObjectExpressionType`).
    case evaluatedObject
    /// A key path read from the evaluated object (`NSKeyPathExpressionType`).
    case keyPath(FormatKeyPath)
    /// A `$variable`, replaced at evaluation or by
    /// ``FormatPredicate/withSubstitutionVariables(_:)`` (`NSVariableExpressionType`).
    case variable(String)
    /// An aggregate `{a, b, …}` with at least one non-constant element
    /// (`NSAggregateExpressionType`).
    case aggregate([FormatExpression])
    /// A key path read from the value of another expression, such as `$e.salary` or
    /// `SUBQUERY(…).@count`.
    case keyPathOf(FormatExpression, FormatKeyPath)
    /// A subscript: `array[0]`, `array[FIRST]`, `array[LAST]`, `array[SIZE]`,
    /// `dictionary['key']`.
    case index(FormatExpression, FormatSubscript)
    /// A built-in function call such as `now()`, `lowercase(name)` or `sum({1, 2})`
    /// (`NSFunctionExpressionType`); see ``FormatFunction``.
    case function(FormatFunction, [FormatExpression])
    /// Arithmetic: `a + b`, `a - b`, `a * b`, `a / b`, `a ** b` (NSExpression's
    /// `add:to:`, `from:subtract:`, `multiply:by:`, `divide:by:`, `raise:toPower:`).
    case arithmetic(ArithmeticOperator, FormatExpression, FormatExpression)
    /// `SUBQUERY(collection, $variable, predicate)`: the elements of `collection` for which
    /// `predicate` holds, with `$variable` (and `SELF`) bound to each element
    /// (`NSSubqueryExpressionType`).
    case subquery(collection: FormatExpression, variable: String, predicate: PredicateNode)
}

// MARK: - Parsing and printing

extension FormatExpression: CustomStringConvertible {
    /// Parses `format` as a single expression (Core Data's `NSExpression(format:)`), with
    /// `arguments` for `%@`, `%K` and the other specifiers, as ``FormatPredicate`` parses them.
    ///
    /// Throws ``FormatPredicateError`` with the position of the problem when the string is
    /// not one expression: `"employees.@count"`, `"lowercase(name)"` and `"now()"` are;
    /// `"age > 3"` (a predicate) is not.
    ///
    /// ```swift
    /// let count = try FormatExpression(format: "employees.@count")
    /// print(count)  // employees.@count
    /// ```
    public init(format: String, _ arguments: Any...) throws {
        var parser = Parser(format: format, arguments: arguments)
        self = try parser.parseStandaloneExpression()
    }

    /// The value of the expression for `object` (Core Data's
    /// `expressionValue(with:context:)`): key paths are read from `object` (anything
    /// `KeyValueCoding`, a dictionary, or a plain value for `SELF`), `$variables` from
    /// `substitutionVariables`; nil for no value. Numbers come back as `Int`, `Double` or
    /// `Decimal`, as arithmetic gives them.
    ///
    /// Throws ``PredicateEvaluationError`` for a missing variable or an operand of the wrong
    /// type for arithmetic or a function, and ``FormatPredicateError`` of kind
    /// ``FormatPredicateError/Kind/nestingTooDeep`` for a tree built by hand deeper than
    /// ``FormatPredicate/maximumNestingDepth``.
    ///
    /// ```swift
    /// let raise = try FormatExpression(format: "salary * 1.1")
    /// try raise.expressionValue(with: ["salary": 1000])  // 1100.0
    /// ```
    public func expressionValue(with object: Any?, substitutionVariables: [String: Any] = [:]) throws -> Any? {
        // Measured without recursion, as the operand of a comparison (one level above it).
        let depth = PredicateNode.comparison(ComparisonPredicate(self, .equalTo, .evaluatedObject)).nestingDepth - 1
        guard depth <= FormatPredicate.maximumNestingDepth else {
            throw FormatPredicateError(
                kind: .nestingTooDeep,
                message: "the expression nests \(depth) levels deep; at most \(FormatPredicate.maximumNestingDepth) can be evaluated (a tree built by hand?)",
                position: 0)
        }
        var evaluator = Evaluator(variables: substitutionVariables)
        return try evaluator.value(of: self, object: object).any
    }

    /// The expression as a canonical format string that ``init(format:_:)`` parses back to
    /// an equal expression. One built by hand deeper than
    /// ``FormatPredicate/maximumNestingDepth`` prints as `<expression nests N levels deep,
    /// more than 500: not printed>`, which does not parse (printing it would exhaust the
    /// stack; before, it crashed).
    ///
    /// ```swift
    /// try FormatExpression(format: "LOWERCASE( name )").description  // "lowercase(name)"
    /// ```
    public var description: String {
        // Measured without recursion, as the operand of a comparison (one level above it).
        let depth = PredicateNode.comparison(ComparisonPredicate(self, .equalTo, .evaluatedObject)).nestingDepth - 1
        guard depth <= FormatPredicate.maximumNestingDepth else {
            return "<expression nests \(depth) levels deep, more than \(FormatPredicate.maximumNestingDepth): not printed>"
        }
        return PredicatePrinter.print(self)
    }
}
