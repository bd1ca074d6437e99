public import StrataPredicate

// MARK: - TemplateFetchRequest

/// The result of instantiating a fetch request template: the entity to fetch and the
/// predicate with its variables substituted.
///
/// The model-level form of what Core Data's `fetchRequestFromTemplate(withName:substitutionVariables:)`
/// returns; the `Strata` module's `ManagedObjectModel.fetchRequestFromTemplate(withName:substitutionVariables:)`
/// gives it as a ready `FetchRequest`.
///
/// ```swift
/// let request = try model.fetchRequestTemplate(named: "playersOfTeam", substitutionVariables: ["TEAM": "Reds"])
/// request?.entity.name     // "Player"
/// request?.predicate       // team.name == "Reds"
/// ```
public struct TemplateFetchRequest: Sendable, Hashable {
    /// The entity to fetch.
    public var entity: EntityDescription
    /// The predicate with variables replaced, or nil to fetch every object.
    public var predicate: FormatPredicate?

    /// Creates a request.
    ///
    /// ```swift
    /// TemplateFetchRequest(entity: run, predicate: nil)
    /// ```
    public init(entity: EntityDescription, predicate: FormatPredicate?) {
        self.entity = entity
        self.predicate = predicate
    }
}
