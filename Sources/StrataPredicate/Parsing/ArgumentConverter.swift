internal import Foundation

// MARK: - ArgumentConverter

/// Converts `Any` arguments and substitution values into ``PredicateConstant``s.
enum ArgumentConverter {
    /// What a printf-style specifier asks for.
    enum Conversion {
        case integer, double, string, character
    }

    /// Why a value could not be converted, before it is turned into a public error.
    struct Unsupported: Error {
        let message: String
    }

    // MARK: - Format arguments

    /// Converts a `%@` argument.
    static func constant(_ value: Any?, index: Int, position: Int) throws -> PredicateConstant {
        do {
            return try constant(value)
        } catch let error as Unsupported {
            throw FormatPredicateError(kind: .unsupportedArgument, message: "argument \(index) for %@: \(error.message)",
                                       position: position, expected: "a supported argument type")
        }
    }

    /// Converts a `%K` argument, which must be a string spelling a key path.
    static func keyPath(_ value: Any?, index: Int, position: Int) throws -> FormatKeyPath {
        let text: String
        switch value {
        case let string as String: text = string
        case let string as Substring: text = String(string)
        case let string as NSString: text = string as String
        case let path as FormatKeyPath:
            // Checked like a string (before, any FormatKeyPath was taken: an empty one, or
            // `FormatKeyPath("first name")`, made a description that doesn't parse).
            guard !path.components.isEmpty, path.components.allSatisfy(isNameOrOperator) else {
                throw FormatPredicateError(
                    kind: .unsupportedArgument,
                    message: "argument \(index) for %K, the key path \(path.string.debugDescription), is not a valid key path",
                    position: position, expected: "dot-separated names and collection operators")
            }
            return path
        default:
            throw FormatPredicateError(
                kind: .unsupportedArgument,
                message: "argument \(index) for %K must be a key path string, not \(typeName(value))",
                position: position, expected: "a String")
        }
        guard let path = parseKeyPath(text) else {
            throw FormatPredicateError(
                kind: .unsupportedArgument,
                message: "argument \(index) for %K, \(text.debugDescription), is not a valid key path",
                position: position, expected: "dot-separated names and collection operators")
        }
        return path
    }

    private static func isNameOrOperator(_ component: FormatKeyPath.Component) -> Bool {
        if case .key(let name) = component { return Lexer.isPlainIdentifier(name) }
        return true
    }

    /// Splits a `%K` string into components, or nil when a component is not a name or a
    /// known collection operator.
    static func parseKeyPath(_ text: String) -> FormatKeyPath? {
        var components: [FormatKeyPath.Component] = []
        for part in text.split(separator: ".", omittingEmptySubsequences: false) {
            var name = String(part)
            if name.hasPrefix("@") {
                guard let op = FormatKeyPath.CollectionOperator.named(name) else { return nil }
                components.append(.collectionOperator(op))
                continue
            }
            if name.hasPrefix("#") { name.removeFirst() }
            guard Lexer.isPlainIdentifier(name) else { return nil }
            components.append(.key(name))
        }
        return components.isEmpty ? nil : FormatKeyPath(components: components)
    }

    /// Converts a printf-style argument (`%d`, `%f`, `%s`, `%c`).
    static func convert(_ value: Any?, as conversion: Conversion, specifier: String, index: Int, position: Int) throws
        -> PredicateConstant
    {
        func failure() -> FormatPredicateError {
            FormatPredicateError(
                kind: .unsupportedArgument,
                message: "argument \(index) for \(specifier) has type \(typeName(value))",
                position: position,
                expected: conversion == .integer ? "an integer" : conversion == .double ? "a number" : "a string")
        }
        guard let value else { throw failure() }
        let constant = try? self.constant(value)
        switch (conversion, constant) {
        case (.integer, .integer?), (.integer, .bool?), (.double, .double?):
            return constant ?? .null
        case (.integer, .decimal(let decimal)?):
            // Unsigned values above Int.max arrive as Decimal.
            return .decimal(decimal)
        case (.double, .integer(let integer)?):
            return .double(Double(integer))
        case (.double, .decimal(let decimal)?):
            return .double(NSDecimalNumber(decimal: decimal).doubleValue)
        case (.string, .string?), (.character, .string?):
            return constant ?? .null
        default:
            throw failure()
        }
    }

    // MARK: - Any to constant

    /// Converts any supported value; throws ``Unsupported`` naming the type otherwise.
    static func constant(_ value: Any?) throws -> PredicateConstant {
        guard let value = OptionalUnwrapper.flatten(value) else { return .null }
        if let object = value as? any PredicateObjectIdentity {
            return .object(PredicateIdentity(object.predicateIdentity))
        }
        // Foundation's number boxes before the Swift casts below, which would bridge them:
        // NSNumber(value: 1) to `true`, an NSDecimalNumber to an inexact Double.
        if type(of: value) is AnyClass, let boxed = value as? NSNumber { return number(boxed) }
        switch value {
        case let v as PredicateConstant: return v
        case let v as Bool: return .bool(v)
        case let v as Int: return .integer(v)
        case let v as Double: return .double(v)
        case let v as String: return .string(v)
        case let v as Decimal: return .decimal(v)
        case let v as Date: return .date(v)
        case let v as Data: return .data(v)
        case let v as UUID: return .uuid(v)
        case let v as URL: return .url(v)
        case let v as Int8: return .integer(Int(v))
        case let v as Int16: return .integer(Int(v))
        case let v as Int32: return .integer(Int(v))
        case let v as Int64: return .integer(Int(v))
        case let v as UInt8: return .integer(Int(v))
        case let v as UInt16: return .integer(Int(v))
        case let v as UInt32: return .integer(Int(v))
        case let v as UInt: return Int(exactly: v).map { .integer($0) } ?? .decimal(Decimal(v))
        case let v as UInt64: return Int(exactly: v).map { .integer($0) } ?? .decimal(Decimal(v))
        case let v as Float: return .double(Double(v))
        case let v as Substring: return .string(String(v))
        case let v as Character: return .string(String(v))
        case let v as NSString: return .string(v as String)
        case let v as [Any]: return .aggregate(try elements(v))
        case let v as Set<AnyHashable>: return .aggregate(try elements(v.map(\.base)))
        case let v as NSOrderedSet: return .aggregate(try elements(v.array))
        default:
            throw Unsupported(message: "unsupported type \(typeName(value))")
        }
    }

    private static func elements(_ values: [Any]) throws -> [PredicateConstant] {
        var result: [PredicateConstant] = []
        result.reserveCapacity(values.count)
        for (offset, element) in values.enumerated() {
            do {
                result.append(try constant(element))
            } catch let error as Unsupported {
                throw Unsupported(message: "element \(offset): \(error.message)")
            }
        }
        return result
    }

    /// An `NSNumber` by its `objCType`; an `NSDecimalNumber` is the decimal it holds.
    private static func number(_ number: NSNumber) -> PredicateConstant {
        if let decimal = number as? NSDecimalNumber { return .decimal(decimal.decimalValue) }
        return switch String(cString: number.objCType) {
        case "d", "f": .double(number.doubleValue)
        case "B": .bool(number.boolValue)
        case "c" where number.intValue == 0 || number.intValue == 1: .bool(number.boolValue)
        case "Q", "L": Int(exactly: number.uint64Value).map { .integer($0) } ?? .decimal(Decimal(number.uint64Value))
        default: .integer(number.intValue)
        }
    }

    /// The dynamic type of `value`, for error messages.
    static func typeName(_ value: Any?) -> String {
        guard let value else { return "nil" }
        return String(describing: type(of: value))
    }
}
