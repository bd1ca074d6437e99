// MARK: - FetchRequestTemplate

/// A named, stored fetch: an entity and a predicate that may contain `$variables`.
///
/// Corresponds to the fetch request templates of Core Data's `NSManagedObjectModel`
/// (`setFetchRequestTemplate(_:forName:)`). Use
/// ``ManagedObjectModel/fetchRequestTemplate(named:substitutionVariables:)`` to get the entity
/// and the predicate with the variables replaced (Core Data's
/// `fetchRequestFromTemplate(withName:substitutionVariables:)`).
///
/// ```swift
/// FetchRequestTemplate("playersOfTeam", entity: "Player", predicate: "team.name == $TEAM")
/// ```
public struct FetchRequestTemplate: Sendable, Hashable, Codable {
    /// The template's name, unique in the model.
    public var name: String
    /// The name of the entity fetched.
    public var entityName: String
    /// The condition, with `$variables`; nil fetches every object of the entity.
    public var predicate: ModelPredicate?

    /// Creates a template.
    ///
    /// ```swift
    /// FetchRequestTemplate("all", entity: "Run")
    /// ```
    public init(_ name: String, entity: String, predicate: ModelPredicate? = nil) {
        self.name = name
        self.entityName = entity
        self.predicate = predicate
    }
}
