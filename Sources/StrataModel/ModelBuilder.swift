// MARK: - ModelMember

/// One item in a model builder: an entity, a fetch request template or localization entries.
///
/// ```swift
/// let members: [ModelMember] = [.entity(Entity("Run") {})]
/// ```
public enum ModelMember: Sendable, Hashable {
    /// An entity.
    case entity(EntityDescription)
    /// A fetch request template.
    case fetchRequestTemplate(FetchRequestTemplate)
    /// Localization dictionary entries.
    case localization([String: String])
}

// MARK: - Localization

/// Localization dictionary entries in a model builder.
///
/// Corresponds to `NSManagedObjectModel.localizationDictionary`; several `Localization`
/// items merge, later keys winning.
///
/// ```swift
/// Localization([
///     "Property/processID/Entity/Run": "Process ID",
///     "ErrorString/Process ID < 1": "Process ID must not be less than 1",
/// ])
/// ```
public struct Localization: Sendable, Hashable {
    /// The entries.
    public var entries: [String: String]

    /// Creates entries.
    ///
    /// ```swift
    /// Localization(["Entity/Run": "Program run"])
    /// ```
    public init(_ entries: [String: String]) { self.entries = entries }
}

// MARK: - ModelBuilder

/// The result builder for a model's contents: entities, fetch request templates and
/// localization entries, with `if`, `if`/`else` and `for`.
///
/// ```swift
/// try ManagedObjectModel {
///     Entity("Team") { Attribute("name", .string) }
///     FetchRequestTemplate("teamNamed", entity: "Team", predicate: "name == $NAME")
/// }
/// ```
@resultBuilder
public enum ModelBuilder {
    /// Wraps an entity.
    public static func buildExpression(_ entity: EntityDescription) -> [ModelMember] { [.entity(entity)] }
    /// Wraps a fetch request template.
    public static func buildExpression(_ template: FetchRequestTemplate) -> [ModelMember] { [.fetchRequestTemplate(template)] }
    /// Wraps localization entries.
    public static func buildExpression(_ localization: Localization) -> [ModelMember] { [.localization(localization.entries)] }
    /// Passes members through.
    public static func buildExpression(_ members: [ModelMember]) -> [ModelMember] { members }
    /// Joins the statements of a block.
    public static func buildBlock(_ parts: [ModelMember]...) -> [ModelMember] { parts.flatMap { $0 } }
    /// Supports `if` without `else`.
    public static func buildOptional(_ part: [ModelMember]?) -> [ModelMember] { part ?? [] }
    /// Supports the first branch of `if`/`else`.
    public static func buildEither(first part: [ModelMember]) -> [ModelMember] { part }
    /// Supports the second branch of `if`/`else`.
    public static func buildEither(second part: [ModelMember]) -> [ModelMember] { part }
    /// Supports `for` loops.
    public static func buildArray(_ parts: [[ModelMember]]) -> [ModelMember] { parts.flatMap { $0 } }
}
