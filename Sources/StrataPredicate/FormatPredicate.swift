// PLACEHOLDER — the predicate helper replaces this file with the real parser and evaluator.
// The public surface below is the contract StrataModel codes against.

/// A value that answers key-value coding questions (Core Data's `NSKeyValueCoding`).
public protocol KeyValueCoding {
    /// The value of the property named `key`, or nil.
    func value(forKey key: String) -> Any?
}

/// A logical condition parsed from an `NSPredicate`-style format string.
public struct FormatPredicate: Sendable, Hashable, CustomStringConvertible {
    /// The canonical format string.
    public var description: String { format }
    let format: String

    /// Parses `format`, substituting `arguments` for `%@`, `%K`, `%d`, `%i`, `%f`.
    public init(format: String, _ arguments: Any...) throws {
        self.format = format
    }

    /// Parses `format` with an array of arguments.
    public init(format: String, argumentArray: [Any]) throws {
        self.format = format
    }

    /// Evaluates the predicate against `object` (anything `KeyValueCoding`, a dictionary, or a
    /// plain value for `SELF`), with values for `$variables`.
    public func evaluate(with object: Any?, substitutionVariables: [String: Any] = [:]) throws -> Bool {
        true
    }
}
