// MARK: - AttributeValueError

/// A value that cannot be stored in an attribute of the expected type.
///
/// Thrown by ``AttributeValue/init(any:for:)`` and the canonical JSON parser instead of
/// crashing on a wrong type or an out-of-range number. Core Data reports the same mistake as
/// an exception from `setValue(_:forKey:)`.
///
/// ```swift
/// do { _ = try AttributeValue(any: "abc", for: .int32) }
/// catch let error as AttributeValueError { print(error) }
/// // expected a value of type int32 but got String: not convertible
/// ```
public struct AttributeValueError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The attribute type the value was converted for.
    public var expected: AttributeType
    /// The Swift type (or JSON kind) of the value given.
    public var actual: String
    /// Why the conversion failed.
    public var reason: String

    /// Creates an error.
    ///
    /// ```swift
    /// AttributeValueError(expected: .int16, actual: "Int", reason: "70000 is out of range")
    /// ```
    public init(expected: AttributeType, actual: String, reason: String) {
        self.expected = expected
        self.actual = actual
        self.reason = reason
    }

    /// A readable explanation naming both types.
    ///
    /// ```swift
    /// error.description  // "expected a value of type int16 but got Int: 70000 is out of range for int16"
    /// ```
    public var description: String { "expected a value of type \(expected) but got \(actual): \(reason)" }
}
