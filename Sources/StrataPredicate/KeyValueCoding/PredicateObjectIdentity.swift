// MARK: - PredicateObjectIdentity

/// A value that predicates compare by identity rather than by content.
///
/// Core Data's `NSPredicate` compares managed objects and `NSManagedObjectID`s with
/// `isEqual:`, which for managed objects is object identity. Strata's managed objects and
/// object IDs conform to this protocol: when one is passed as a format argument
/// (`"manager == %@"`), the predicate stores only its `predicateIdentity` (so the predicate
/// stays `Sendable` and `Hashable`), and when a key path evaluates to a conforming value,
/// that value is compared by its identity.
///
/// ```swift
/// struct EmployeeID: PredicateObjectIdentity {
///     let pk: Int
///     var predicateIdentity: any Hashable & Sendable { pk }
/// }
/// let p = try FormatPredicate(format: "manager == %@", EmployeeID(pk: 7))
/// ```
public protocol PredicateObjectIdentity {
    /// The identity this value compares by; two values are the same object when their
    /// identities are equal.
    ///
    /// Identities of different dynamic types are never equal.
    ///
    /// ```swift
    /// var predicateIdentity: any Hashable & Sendable { objectID.uriRepresentation }
    /// ```
    var predicateIdentity: any Hashable & Sendable { get }
}
