// MARK: - ValidationPredicate

/// A validation predicate paired with its warning: the text reported (after localization
/// through the model's `ErrorString/<warning>` key) when a value fails the predicate.
///
/// Corresponds to one entry of Core Data's `validationPredicates`/`validationWarnings` pair.
///
/// ```swift
/// ValidationPredicate("SELF > 0", warning: "Process ID < 1")
/// ```
public struct ValidationPredicate: Sendable, Hashable, Codable {
    /// The predicate, evaluated with the value as `SELF`.
    public var predicate: ModelPredicate
    /// The warning reported when the predicate is false.
    public var warning: String

    /// Creates a rule.
    ///
    /// ```swift
    /// ValidationPredicate("length > 1", warning: "Name too short")
    /// ```
    public init(_ predicate: ModelPredicate, warning: String) {
        self.predicate = predicate
        self.warning = warning
    }
}
