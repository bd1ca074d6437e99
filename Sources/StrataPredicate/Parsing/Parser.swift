internal import Foundation

// MARK: - Parser

/// A hand-written recursive-descent parser from tokens to a ``PredicateNode``.
///
/// Parenthesized groups are ambiguous between a predicate, `(a = 1)`, and an expression,
/// `(a + 1) * 2 > 3`; the parser reads the group's contents as either (``Parsed``) and
/// decides from what follows, so it never backtracks.
struct Parser {
    /// The deepest nesting of parentheses, operators, aggregates and calls accepted; keeps
    /// recursion (here, in evaluation and in printing) far from the stack limit.
    static let maximumDepth = 100

    private let format: String
    private let arguments: [Any]
    private var tokens: [Token] = []
    private var index = 0
    private var depth = 0

    init(format: String, arguments: [Any]) {
        self.format = format
        self.arguments = arguments
    }

    /// What a parenthesized group or a comparison position held.
    private enum Parsed {
        case predicate(PredicateNode)
        /// An expression not (yet) part of a comparison; `end` is where an operator was
        /// expected.
        case expression(FormatExpression, end: Int)
    }

    // MARK: - Entry point

    mutating func parsePredicate() throws -> PredicateNode {
        var lexer = Lexer(format: format, arguments: arguments)
        tokens = try lexer.tokenize()
        index = 0
        let parsed = try parseOr()
        let predicate = try requirePredicate(parsed)
        guard current.kind == .end else {
            throw error("unexpected \(current.display)", expected: "AND, OR or the end of the format string")
        }
        try requireEveryArgumentUsed(lexer)
        return predicate
    }

    /// Refuses arguments the format string didn't use (`%@` fewer than the arguments given).
    private func requireEveryArgumentUsed(_ lexer: Lexer) throws {
        if lexer.argumentsUsed < arguments.count {
            throw FormatPredicateError(
                kind: .extraArguments,
                message: "\(arguments.count) arguments given but the format string uses \(lexer.argumentsUsed)",
                position: current.position, expected: nil)
        }
    }

    /// Parses the whole format string as one expression (`NSExpression(format:)`): a key
    /// path, a function call, arithmetic, an aggregate, a constant. A trailing comparison or
    /// anything else after the expression is an error.
    mutating func parseStandaloneExpression() throws -> FormatExpression {
        var lexer = Lexer(format: format, arguments: arguments)
        tokens = try lexer.tokenize()
        index = 0
        let expression = try parseExpression()
        guard current.kind == .end else {
            throw error("unexpected \(current.display)", expected: "an operator or the end of the expression")
        }
        try requireEveryArgumentUsed(lexer)
        return expression
    }

    // MARK: - Tokens

    private var current: Token {
        index < tokens.count ? tokens[index] : Token(kind: .end, position: format.unicodeScalars.count)
    }

    private func peekToken(_ offset: Int) -> Token {
        index + offset < tokens.count ? tokens[index + offset] : Token(kind: .end, position: format.unicodeScalars.count)
    }

    private mutating func advance() {
        if index < tokens.count { index += 1 }
    }

    private mutating func consumeSymbol(_ symbol: String) -> Bool {
        guard current.isSymbol(symbol) else { return false }
        advance()
        return true
    }

    private mutating func expectSymbol(_ symbol: String, _ what: String? = nil) throws {
        guard consumeSymbol(symbol) else {
            throw error("unexpected \(current.display)", expected: what ?? "'\(symbol)'")
        }
    }

    private func error(_ message: String, expected: String? = nil, at position: Int? = nil) -> FormatPredicateError {
        FormatPredicateError(kind: .syntax, message: message, position: position ?? current.position, expected: expected)
    }

    private mutating func enter() throws {
        depth += 1
        if depth > Parser.maximumDepth {
            throw FormatPredicateError(kind: .nestingTooDeep,
                                       message: "nesting deeper than \(Parser.maximumDepth) levels",
                                       position: current.position, expected: nil)
        }
    }

    private mutating func leave() {
        depth -= 1
    }

    private func requirePredicate(_ parsed: Parsed) throws -> PredicateNode {
        switch parsed {
        case .predicate(let node): return node
        case .expression(_, let end):
            throw error("an expression is not a predicate", expected: "a comparison operator", at: end)
        }
    }

    // MARK: - Predicates

    /// `and { ("OR" | "||") and }`
    private mutating func parseOr() throws -> Parsed {
        let first = try parseAnd()
        guard current.isKeyword("OR") || current.isSymbol("||") else { return first }
        var children = [try requirePredicate(first)]
        while current.isKeyword("OR") || current.isSymbol("||") {
            advance()
            children.append(try requirePredicate(try parseAnd()))
        }
        return .predicate(.or(children))
    }

    /// `not { ("AND" | "&&") not }`
    private mutating func parseAnd() throws -> Parsed {
        let first = try parseNot()
        guard current.isKeyword("AND") || current.isSymbol("&&") else { return first }
        var children = [try requirePredicate(first)]
        while current.isKeyword("AND") || current.isSymbol("&&") {
            advance()
            children.append(try requirePredicate(try parseNot()))
        }
        return .predicate(.and(children))
    }

    /// `("NOT" | "!") not | primary`
    private mutating func parseNot() throws -> Parsed {
        try enter()
        defer { leave() }
        if current.isKeyword("NOT") || current.isSymbol("!") {
            advance()
            return .predicate(.not(try requirePredicate(try parseNot())))
        }
        return try parsePrimaryPredicate()
    }

    /// `TRUEPREDICATE | FALSEPREDICATE | "(" group ")" | comparison`
    private mutating func parsePrimaryPredicate() throws -> Parsed {
        if current.isKeyword("TRUEPREDICATE") {
            advance()
            return .predicate(.constant(true))
        }
        if current.isKeyword("FALSEPREDICATE") {
            advance()
            return .predicate(.constant(false))
        }
        if let modifier = modifierKeyword(current) {
            advance()
            let left = try parseExpression()
            guard let comparison = try parseComparisonTail(left: left, modifier: modifier) else {
                throw error("unexpected \(current.display) after \(modifier.rawValue) expression",
                            expected: "a comparison operator")
            }
            return .predicate(comparison)
        }
        let left: FormatExpression
        if current.isSymbol("(") {
            advance()
            let inner = try parseOr()
            try expectSymbol(")", "')'")
            switch inner {
            case .predicate(let node):
                return .predicate(node)
            case .expression(let expression, _):
                left = try parseExpression(seed: expression)
            }
        } else {
            left = try parseExpression()
        }
        if let comparison = try parseComparisonTail(left: left, modifier: .direct) {
            return .predicate(comparison)
        }
        return .expression(left, end: current.position)
    }

    private func modifierKeyword(_ token: Token) -> ComparisonModifier? {
        switch token.keyword {
        case "ANY", "SOME": .any
        case "ALL": .all
        case "NONE": .notAny
        default: nil
        }
    }

    // MARK: - Comparisons

    /// `operator [options] expression`, or nil when no operator follows.
    private mutating func parseComparisonTail(left: FormatExpression, modifier: ComparisonModifier) throws -> PredicateNode? {
        let operatorToken = current
        guard let operatorType = comparisonOperator(operatorToken) else { return nil }
        advance()
        let options = try parseOptions()
        let right = try parseExpression()
        if operatorType == .between {
            try checkBetween(right, at: operatorToken.position)
        }
        return .comparison(ComparisonPredicate(left, operatorType, right, modifier: modifier, options: options))
    }

    private func comparisonOperator(_ token: Token) -> ComparisonOperator? {
        switch token.kind {
        case .symbol(let symbol):
            switch symbol {
            case "=", "==": return .equalTo
            case "!=", "<>": return .notEqualTo
            case "<": return .lessThan
            case "<=", "=<": return .lessThanOrEqualTo
            case ">": return .greaterThan
            case ">=", "=>": return .greaterThanOrEqualTo
            default: return nil
            }
        case .identifier(let word):
            switch Lexer.keyword(word) ?? "" {
            case "BETWEEN": return .between
            case "IN": return .in
            case "CONTAINS": return .contains
            case "BEGINSWITH": return .beginsWith
            case "ENDSWITH": return .endsWith
            case "LIKE": return .like
            case "MATCHES": return .matches
            default: return nil
            }
        default:
            return nil
        }
    }

    /// `[ "[" letters "]" ]` where letters are drawn from `c`, `d`, `n`.
    private mutating func parseOptions() throws -> ComparisonOptions {
        guard current.isSymbol("[") else { return [] }
        advance()
        guard case .identifier(let letters) = current.kind else {
            throw error("unexpected \(current.display) in comparison options", expected: "option letters c, d or n")
        }
        var options: ComparisonOptions = []
        for letter in letters {
            switch letter {
            case "c", "C": options.insert(.caseInsensitive)
            case "d", "D": options.insert(.diacriticInsensitive)
            case "n", "N": options.insert(.normalized)
            case "l", "L":
                throw error("locale-sensitive comparison [l] is not supported", expected: "option letters c, d or n")
            default:
                throw error("unknown comparison option '\(letter)'", expected: "option letters c, d or n")
            }
        }
        advance()
        try expectSymbol("]", "']' after comparison options")
        return options
    }

    private func checkBetween(_ right: FormatExpression, at position: Int) throws {
        switch right {
        case .constant(.aggregate(let elements)) where elements.count != 2:
            throw error("BETWEEN needs exactly two bounds, got \(elements.count)", expected: "{lower, upper}", at: position)
        case .aggregate(let elements) where elements.count != 2:
            throw error("BETWEEN needs exactly two bounds, got \(elements.count)", expected: "{lower, upper}", at: position)
        case .constant(.aggregate), .aggregate, .keyPath, .keyPathOf, .variable, .function, .index, .evaluatedObject,
             .subquery:
            return
        case .constant, .arithmetic:
            throw error("BETWEEN needs an aggregate of two bounds", expected: "{lower, upper}", at: position)
        }
    }

    // MARK: - Expressions

    private static func binaryOperator(_ token: Token) -> (ArithmeticOperator, precedence: Int)? {
        guard case .symbol(let symbol) = token.kind else { return nil }
        switch symbol {
        case "+": return (.add, 1)
        case "-": return (.subtract, 1)
        case "*": return (.multiply, 2)
        case "/": return (.divide, 2)
        case "**": return (.power, 3)
        default: return nil
        }
    }

    /// An arithmetic expression; `seed`, when given, is an already-parsed first operand
    /// (the contents of a parenthesized group).
    private mutating func parseExpression(seed: FormatExpression? = nil) throws -> FormatExpression {
        try parseBinary(minimumPrecedence: 1, seed: seed)
    }

    /// Precedence climbing: `+ -` < `* /` < `**` (right-associative).
    private mutating func parseBinary(minimumPrecedence: Int, seed: FormatExpression?) throws -> FormatExpression {
        var left = try parseUnary(seed: seed)
        var chained = 0
        defer { depth -= chained }
        while let (op, precedence) = Parser.binaryOperator(current), precedence >= minimumPrecedence {
            advance()
            // Each operator adds a level to the tree, so a long chain counts as deep nesting.
            try enter()
            chained += 1
            let nextMinimum = op == .power ? precedence : precedence + 1
            let right = try parseBinary(minimumPrecedence: nextMinimum, seed: nil)
            left = .arithmetic(op, left, right)
        }
        return left
    }

    /// `"-" unary | postfix`; a minus before a number literal makes a negative constant.
    private mutating func parseUnary(seed: FormatExpression?) throws -> FormatExpression {
        if let seed { return try parsePostfix(seed) }
        try enter()
        defer { leave() }
        if current.isSymbol("-") {
            advance()
            switch current.kind {
            case .integer(let value):
                advance()
                return try parsePostfix(.constant(.integer(-value)))
            case .double(let value):
                // -9223372036854775808 is Int.min, exactly (before, the double -2^63, which
                // which Int.min + 1 and hundreds of integers above it also equal).
                let isIntMin = current.isIntMinMagnitude
                advance()
                return try parsePostfix(.constant(isIntMin ? .integer(.min) : .double(-value)))
            default:
                let operand = try parseUnary(seed: nil)
                switch operand {
                case .constant(.integer(let value)) where value != Int.min:
                    return .constant(.integer(-value))
                case .constant(.double(let value)):
                    return .constant(.double(-value))
                case .constant(.decimal(let value)):
                    return .constant(.decimal(-value))
                default:
                    return .arithmetic(.subtract, .constant(.integer(0)), operand)
                }
            }
        }
        return try parsePostfix(try parsePrimary())
    }

    /// `primary { "." keyPath | "[" subscript "]" }`
    private mutating func parsePostfix(_ base: FormatExpression) throws -> FormatExpression {
        var expression = base
        var nested = 0
        defer { depth -= nested }
        while true {
            if current.isSymbol(".") {
                advance()
                let tail = try parseKeyPathComponents()
                switch expression {
                case .keyPath(let path):
                    expression = .keyPath(FormatKeyPath(components: path.components + tail.components))
                case .evaluatedObject:
                    expression = .keyPath(tail)
                case .keyPathOf(let inner, let path):
                    expression = .keyPathOf(inner, FormatKeyPath(components: path.components + tail.components))
                default:
                    try enter()
                    nested += 1
                    expression = .keyPathOf(expression, tail)
                }
            } else if current.isSymbol("[") {
                advance()
                let subscriptValue: FormatSubscript
                switch current.keyword {
                case "FIRST": advance(); subscriptValue = .first
                case "LAST": advance(); subscriptValue = .last
                case "SIZE": advance(); subscriptValue = .size
                default: subscriptValue = .expression(try parseExpression())
                }
                try expectSymbol("]", "']'")
                try enter()
                nested += 1
                expression = .index(expression, subscriptValue)
            } else {
                return expression
            }
        }
    }

    /// One or more dot-separated key path components, starting at the current token.
    private mutating func parseKeyPathComponents() throws -> FormatKeyPath {
        var components = try parseKeyPathComponent()
        while current.isSymbol("."), isKeyPathComponent(peekToken(1)) {
            advance()
            components += try parseKeyPathComponent()
        }
        return FormatKeyPath(components: components)
    }

    private func isKeyPathComponent(_ token: Token) -> Bool {
        switch token.kind {
        case .identifier, .escapedIdentifier, .atIdentifier, .keyPathArgument: true
        default: false
        }
    }

    /// One component, or the components of a `%K` argument: a dotted key path is spliced in
    /// wherever it appears (`address.%K` with "city.name" is `address.city.name`; before, only
    /// a one-component `%K` was accepted after a dot).
    private mutating func parseKeyPathComponent() throws -> [FormatKeyPath.Component] {
        switch current.kind {
        case .identifier(let name), .escapedIdentifier(let name):
            advance()
            return [.key(name)]
        case .atIdentifier(let name):
            guard let op = FormatKeyPath.CollectionOperator.named(name) else {
                throw error("unknown collection operator '@\(name)'",
                            expected: "@count, @sum, @avg, @min, @max, @distinctUnionOfObjects, @unionOfObjects")
            }
            advance()
            return [.collectionOperator(op)]
        case .keyPathArgument(let path) where !path.components.isEmpty:
            advance()
            return path.components
        default:
            throw error("unexpected \(current.display) in key path", expected: "a key or a collection operator")
        }
    }

    // MARK: - Primary expressions

    private mutating func parsePrimary() throws -> FormatExpression {
        let token = current
        switch token.kind {
        case .integer(let value):
            advance()
            return .constant(.integer(value))
        case .double(let value):
            advance()
            return .constant(.double(value))
        case .string(let value):
            advance()
            return .constant(.string(value))
        case .argument(let constant):
            advance()
            return .constant(constant)
        case .keyPathArgument(let path):
            advance()
            return .keyPath(path)
        case .variable(let name):
            advance()
            return .variable(name)
        case .escapedIdentifier, .atIdentifier:
            return .keyPath(try parseKeyPathComponents())
        case .identifier(let name):
            if peekToken(1).isSymbol("(") {
                return try parseCall(name)
            }
            // Core Data's spelling of a built-in function, its NSExpression selector name:
            // `canonical:(title)`, `lowercase:(name)` (what Xcode's derived attributes show)
            // is `canonical(title)`.
            if peekToken(1).isSymbol(":"), peekToken(2).isSymbol("("), FormatFunction.named(name) != nil {
                return try parseCall(name, colon: true)
            }
            let keyword = Lexer.keyword(name) ?? ""
            switch keyword {
            case "TRUE", "YES":
                advance()
                return .constant(.bool(true))
            case "FALSE", "NO":
                advance()
                return .constant(.bool(false))
            case "NIL", "NULL":
                advance()
                return .constant(.null)
            case "SELF":
                advance()
                return .evaluatedObject
            default:
                if Lexer.reservedWords.contains(keyword) && !["FIRST", "LAST", "SIZE"].contains(keyword) {
                    throw error("unexpected keyword \(keyword)",
                                expected: "an expression (escape a key named \(name) as #\(name))")
                }
                return .keyPath(try parseKeyPathComponents())
            }
        case .symbol("{"):
            return try parseAggregate()
        case .symbol("("):
            advance()
            let inner = try parseExpression()
            try expectSymbol(")", "')'")
            return inner
        case .end:
            throw error("unexpected end of format string", expected: "an expression")
        default:
            throw error("unexpected \(token.display)", expected: "an expression")
        }
    }

    /// `"{" [ expression { "," expression } ] "}"`; all-constant aggregates become constants.
    private mutating func parseAggregate() throws -> FormatExpression {
        advance()
        var elements: [FormatExpression] = []
        if !consumeSymbol("}") {
            repeat {
                elements.append(try parseExpression())
            } while consumeSymbol(",")
            try expectSymbol("}", "',' or '}'")
        }
        return Parser.canonicalAggregate(elements)
    }

    /// An aggregate of constants is a constant aggregate; anything else stays an aggregate
    /// expression.
    static func canonicalAggregate(_ elements: [FormatExpression]) -> FormatExpression {
        var constants: [PredicateConstant] = []
        constants.reserveCapacity(elements.count)
        for element in elements {
            guard case .constant(let constant) = element else { return .aggregate(elements) }
            constants.append(constant)
        }
        return .constant(.aggregate(constants))
    }

    // MARK: - Calls

    private mutating func parseCall(_ name: String, colon: Bool = false) throws -> FormatExpression {
        let nameToken = current
        advance()  // name
        if colon { advance() }  // :
        advance()  // (
        switch Lexer.keyword(name) ?? "" {
        case "SUBQUERY":
            let collection = try parseExpression()
            try expectSymbol(",", "',' after the SUBQUERY collection")
            guard case .variable(let variable) = current.kind else {
                throw error("unexpected \(current.display) in SUBQUERY", expected: "a $variable")
            }
            advance()
            try expectSymbol(",", "',' after the SUBQUERY variable")
            let predicate = try requirePredicate(try parseOr())
            try expectSymbol(")", "')' closing SUBQUERY")
            return .subquery(collection: collection, variable: variable, predicate: predicate)
        case "CAST":
            let value = try parseExpression()
            try expectSymbol(",", "',' after the CAST value")
            guard case .string(let typeName) = current.kind else {
                throw error("unexpected \(current.display) in CAST", expected: "a class name string such as \"NSDate\"")
            }
            let typePosition = current.position
            advance()
            try expectSymbol(")", "')' closing CAST")
            guard case .constant(let constant) = value else {
                throw error("CAST supports only constant values", expected: "a constant", at: nameToken.position)
            }
            return .constant(try cast(constant, to: typeName, at: typePosition))
        case "FUNCTION":
            throw error("FUNCTION() (arbitrary method calls) is not supported", expected: "a built-in function",
                        at: nameToken.position)
        default:
            guard let function = FormatFunction.named(name) else {
                throw error("unknown function '\(name)'",
                            expected: "one of " + FormatFunction.allCases.map { "\($0.rawValue)()" }.joined(separator: ", "),
                            at: nameToken.position)
            }
            var arguments: [FormatExpression] = []
            if !consumeSymbol(")") {
                repeat {
                    arguments.append(try parseExpression())
                } while consumeSymbol(",")
                try expectSymbol(")", "',' or ')'")
            }
            guard arguments.count == function.arity else {
                throw error("\(function.rawValue)() takes \(function.arity) argument\(function.arity == 1 ? "" : "s"), got \(arguments.count)",
                            expected: "\(function.arity) argument\(function.arity == 1 ? "" : "s")", at: nameToken.position)
            }
            return .function(function, arguments)
        }
    }

    /// Applies `CAST(constant, "Class")` at parse time.
    private func cast(_ constant: PredicateConstant, to typeName: String, at position: Int) throws -> PredicateConstant {
        func fail(_ what: String) -> FormatPredicateError {
            error("cannot CAST \(what) to \(typeName)", expected: nil, at: position)
        }
        switch (typeName, constant) {
        case ("NSDate", .integer(let seconds)): return .date(Date(timeIntervalSinceReferenceDate: TimeInterval(seconds)))
        case ("NSDate", .double(let seconds)): return .date(Date(timeIntervalSinceReferenceDate: seconds))
        case ("NSDate", .decimal(let seconds)):
            return .date(Date(timeIntervalSinceReferenceDate: NSDecimalNumber(decimal: seconds).doubleValue))
        case ("NSDate", .date): return constant
        case ("NSNumber", .integer), ("NSNumber", .double), ("NSNumber", .decimal), ("NSNumber", .bool):
            return constant
        case ("NSNumber", .string(let text)):
            if let value = Int(text) { return .integer(value) }
            if let value = Double(text) { return .double(value) }
            throw fail("\(text.debugDescription)")
        case ("NSDecimalNumber", .string(let text)):
            guard let value = Parser.decimal(text) else { throw fail("\(text.debugDescription)") }
            return .decimal(value)
        case ("NSDecimalNumber", .integer(let value)): return .decimal(Decimal(value))
        case ("NSDecimalNumber", .double(let value)) where value.isFinite:
            // The decimal the number prints as (19.99, not Decimal(Double)'s binary expansion
            // 19.98999999999999488), as the numeric promotion makes it (spec 0003). Beyond
            // Decimal's range (about 3.4 × 10^165) the conversion gives NaN.
            guard let decimal = Decimal(printedAs: value) else { throw fail("\(value), out of Decimal's range,") }
            return .decimal(decimal)
        case ("NSDecimalNumber", .decimal): return constant
        case ("NSString", .string): return constant
        case ("NSString", .integer(let value)): return .string(String(value))
        case ("NSString", .double(let value)): return .string(String(value))
        case ("NSData", .string(let text)):
            guard let data = Data(base64Encoded: text) else { throw fail("non-base64 \(text.debugDescription)") }
            return .data(data)
        case ("NSData", .data): return constant
        case ("NSUUID", .string(let text)):
            guard let uuid = UUID(uuidString: text) else { throw fail("\(text.debugDescription)") }
            return .uuid(uuid)
        case ("NSUUID", .uuid): return constant
        case ("NSURL", .string(let text)):
            guard let url = URL(string: text) else { throw fail("\(text.debugDescription)") }
            return .url(url)
        case ("NSURL", .url): return constant
        case ("NSDate", _), ("NSNumber", _), ("NSDecimalNumber", _), ("NSString", _), ("NSData", _), ("NSUUID", _),
             ("NSURL", _):
            throw fail("this value")
        default:
            throw error("unsupported CAST type \(typeName.debugDescription)",
                        expected: "NSDate, NSNumber, NSDecimalNumber, NSString, NSData, NSUUID or NSURL", at: position)
        }
    }

    /// A decimal from its whole text: `[+-]digits[.digits][e[+-]digits]` (Foundation's
    /// parser accepts trailing garbage and bare signs).
    static func decimal(_ text: String) -> Decimal? {
        var scalars = Substring(text).unicodeScalars[...]
        func digits() -> Int {
            var count = 0
            while let first = scalars.first, ("0"..."9").contains(first) {
                scalars.removeFirst()
                count += 1
            }
            return count
        }
        if let sign = scalars.first, sign == "+" || sign == "-" { scalars.removeFirst() }
        var mantissa = digits()
        if scalars.first == "." {
            scalars.removeFirst()
            mantissa += digits()
        }
        guard mantissa > 0 else { return nil }
        if let e = scalars.first, e == "e" || e == "E" {
            scalars.removeFirst()
            if let sign = scalars.first, sign == "+" || sign == "-" { scalars.removeFirst() }
            guard digits() > 0 else { return nil }
        }
        guard scalars.isEmpty, let value = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")), !value.isNaN
        else { return nil }
        return value
    }
}
