internal import Foundation

// MARK: - PredicatePrinter

/// Prints a syntax tree as a canonical format string that parses back to an equal tree.
enum PredicatePrinter {
    static func print(_ node: PredicateNode) -> String {
        switch node {
        case .constant(let value):
            return value ? "TRUEPREDICATE" : "FALSEPREDICATE"
        case .comparison(let comparison):
            return print(comparison)
        case .and(let children):
            return compound(children, separator: " AND ", empty: "TRUEPREDICATE")
        case .or(let children):
            return compound(children, separator: " OR ", empty: "FALSEPREDICATE")
        case .not(let child):
            return "NOT " + grouped(child)
        }
    }

    private static func compound(_ children: [PredicateNode], separator: String, empty: String) -> String {
        switch children.count {
        case 0: empty
        case 1: print(children[0])
        default: children.map(grouped).joined(separator: separator)
        }
    }

    /// Parenthesizes compound children so the tree's grouping survives a round trip.
    private static func grouped(_ node: PredicateNode) -> String {
        switch node {
        case .and(let children) where children.count > 1, .or(let children) where children.count > 1:
            "(" + print(node) + ")"
        default:
            print(node)
        }
    }

    static func print(_ comparison: ComparisonPredicate) -> String {
        var text = ""
        if comparison.modifier != .direct { text += comparison.modifier.rawValue + " " }
        text += print(comparison.leftExpression)
        text += " " + comparison.operatorType.rawValue
        let letters = comparison.options.letters
        if !letters.isEmpty { text += "[" + letters + "]" }
        text += " " + print(comparison.rightExpression)
        return text
    }

    // MARK: - Expressions

    static func print(_ expression: FormatExpression) -> String {
        switch expression {
        case .constant(let constant):
            return print(constant)
        case .evaluatedObject:
            return "SELF"
        case .keyPath(let path):
            return path.description
        case .variable(let name):
            return "$" + name
        case .aggregate(let elements):
            return "{" + elements.map { print($0) }.joined(separator: ", ") + "}"
        case .keyPathOf(let base, let path):
            return postfixBase(base) + "." + path.description
        case .index(let base, let subscriptValue):
            let inside: String
            switch subscriptValue {
            case .first: inside = "FIRST"
            case .last: inside = "LAST"
            case .size: inside = "SIZE"
            case .expression(let index): inside = print(index)
            }
            return postfixBase(base) + "[" + inside + "]"
        case .function(let function, let arguments):
            return function.rawValue + "(" + arguments.map { print($0) }.joined(separator: ", ") + ")"
        case .arithmetic(let op, let left, let right):
            let precedence = self.precedence(op)
            let leftNeedsParentheses = childPrecedence(left).map { $0 < precedence || (op == .power && $0 == precedence) } ?? false
            let rightNeedsParentheses = childPrecedence(right).map { $0 < precedence || (op != .power && $0 == precedence) } ?? false
            let leftText = leftNeedsParentheses ? "(" + print(left) + ")" : print(left)
            let rightText = rightNeedsParentheses ? "(" + print(right) + ")" : print(right)
            return leftText + " " + op.rawValue + " " + rightText
        case .subquery(let collection, let variable, let predicate):
            return "SUBQUERY(" + print(collection) + ", $" + variable + ", " + print(predicate) + ")"
        }
    }

    private static func precedence(_ op: ArithmeticOperator) -> Int {
        switch op {
        case .add, .subtract: 1
        case .multiply, .divide: 2
        case .power: 3
        }
    }

    private static func childPrecedence(_ expression: FormatExpression) -> Int? {
        if case .arithmetic(let op, _, _) = expression { return precedence(op) }
        return nil
    }

    /// The base of `.key` or `[index]`, parenthesized when it is arithmetic.
    private static func postfixBase(_ base: FormatExpression) -> String {
        if case .arithmetic = base { return "(" + print(base) + ")" }
        return print(base)
    }

    // MARK: - Constants

    static func print(_ constant: PredicateConstant) -> String {
        switch constant {
        case .null:
            return "nil"
        case .bool(let value):
            return value ? "TRUE" : "FALSE"
        case .integer(let value):
            // Int.min has no literal: its magnitude does not fit in Int.
            return value == Int.min ? "CAST(\"\(value)\", \"NSNumber\")" : String(value)
        case .double(let value):
            return value.isFinite ? String(value) : "CAST(\"\(value)\", \"NSNumber\")"
        case .decimal(let value):
            return "CAST(\"\(value)\", \"NSDecimalNumber\")"
        case .string(let value):
            return quoted(value)
        case .date(let date):
            // A non-finite interval has no literal (`nan` would read as a key path): it goes
            // through the number's own CAST.
            return "CAST(\(print(.double(date.timeIntervalSinceReferenceDate))), \"NSDate\")"
        case .data(let data):
            return "CAST(\"\(data.base64EncodedString())\", \"NSData\")"
        case .uuid(let uuid):
            return "CAST(\"\(uuid.uuidString)\", \"NSUUID\")"
        case .url(let url):
            return "CAST(" + quoted(url.absoluteString) + ", \"NSURL\")"
        case .aggregate(let elements):
            return "{" + elements.map { print($0) }.joined(separator: ", ") + "}"
        case .object(let identity):
            return identity.description
        }
    }

    /// A double-quoted string literal with escapes; `%` is doubled because `%%` is one
    /// percent sign inside a quoted string.
    static func quoted(_ string: String) -> String {
        var text = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\\": text += "\\\\"
            case "\"": text += "\\\""
            case "%": text += "%%"
            case "\n": text += "\\n"
            case "\t": text += "\\t"
            case "\r": text += "\\r"
            case "\0": text += "\\0"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    text += "\\u{" + String(scalar.value, radix: 16) + "}"
                } else {
                    text.unicodeScalars.append(scalar)
                }
            }
        }
        return text + "\""
    }
}
