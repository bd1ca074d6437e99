// MARK: - PredicateIdentity

/// The stored identity of an object argument, compared with `==` on the identity value.
///
/// Wraps the `predicateIdentity` of a ``PredicateObjectIdentity`` value so it can live in a
/// `Hashable`, `Sendable` syntax tree (Core Data compares managed objects by identity).
///
/// ```swift
/// let identity = PredicateIdentity(42)
/// identity == PredicateIdentity(42)  // true
/// ```
public struct PredicateIdentity: Sendable, Hashable, CustomStringConvertible {
    /// The identity value.
    ///
    /// Two identities are equal when their values have the same type and are equal.
    ///
    /// ```swift
    /// PredicateIdentity("a").value as? String  // "a"
    /// ```
    public let value: any Hashable & Sendable

    /// Wraps `value` as an identity.
    ///
    /// Usually created for you from a ``PredicateObjectIdentity`` argument.
    ///
    /// ```swift
    /// let identity = PredicateIdentity(UUID())
    /// ```
    public init(_ value: any Hashable & Sendable) {
        self.value = value
    }

    /// Whether two identities hold equal values of the same type.
    ///
    /// Compares through `AnyHashable`, so `1 as Int` and `1 as Int64` are different.
    ///
    /// ```swift
    /// PredicateIdentity(1) == PredicateIdentity(1)  // true
    /// ```
    public static func == (lhs: PredicateIdentity, rhs: PredicateIdentity) -> Bool {
        AnyHashable(lhs.value) == AnyHashable(rhs.value)
    }

    /// Hashes the identity value.
    ///
    /// Consistent with ``==(_:_:)``.
    ///
    /// ```swift
    /// var hasher = Hasher(); PredicateIdentity(1).hash(into: &hasher)
    /// ```
    public func hash(into hasher: inout Hasher) {
        hasher.combine(AnyHashable(value))
    }

    /// A readable form, `<object: …>`, which does not parse back.
    ///
    /// Predicates holding object identities print this form in their descriptions.
    ///
    /// ```swift
    /// PredicateIdentity(7).description  // "<object: 7>"
    /// ```
    public var description: String { "<object: \(value)>" }
}
