// MARK: - EntityMember

/// One item in an entity builder: a property, a uniqueness constraint or an index.
///
/// You rarely name this type: the ``EntityBuilder`` turns attributes, relationships,
/// fetched properties, ``Unique`` constraints and ``FetchIndex`` indexes into members.
///
/// ```swift
/// let members: [EntityMember] = [.attribute(Attribute("name", .string))]
/// ```
public enum EntityMember: Sendable, Hashable {
    /// An attribute.
    case attribute(AttributeDescription)
    /// A relationship.
    case relationship(RelationshipDescription)
    /// A fetched property.
    case fetchedProperty(FetchedPropertyDescription)
    /// A uniqueness constraint over the named properties.
    case uniquenessConstraint([String])
    /// A named index over one or more properties.
    case fetchIndex(FetchIndexDescription)
}

// MARK: - Unique

/// A uniqueness constraint in an entity builder: the named properties' values must be
/// unique together.
///
/// Corresponds to one entry of Core Data's `uniquenessConstraints`.
///
/// ```swift
/// Entity("Person") {
///     Attribute("email", .string)
///     Unique("email")
/// }
/// ```
public struct Unique: Sendable, Hashable {
    /// The constrained property names.
    public var propertyNames: [String]

    /// Creates a constraint over one or more properties.
    ///
    /// ```swift
    /// Unique("firstName", "lastName")
    /// ```
    public init(_ propertyNames: String...) { self.propertyNames = propertyNames }
}

// MARK: - EntityBuilder

/// The result builder for an entity's contents.
///
/// Accepts attributes, relationships, fetched properties, ``Unique`` constraints and
/// ``FetchIndex`` indexes, with
/// `if`, `if`/`else` and `for` loops.
///
/// ```swift
/// Entity("Sample") {
///     for i in 1...3 { Attribute("value\(i)", .double) }
/// }
/// ```
@resultBuilder
public enum EntityBuilder {
    /// Wraps an attribute.
    public static func buildExpression(_ attribute: AttributeDescription) -> [EntityMember] { [.attribute(attribute)] }
    /// Wraps a relationship.
    public static func buildExpression(_ relationship: RelationshipDescription) -> [EntityMember] { [.relationship(relationship)] }
    /// Wraps a fetched property.
    public static func buildExpression(_ property: FetchedPropertyDescription) -> [EntityMember] { [.fetchedProperty(property)] }
    /// Wraps a uniqueness constraint.
    public static func buildExpression(_ unique: Unique) -> [EntityMember] { [.uniquenessConstraint(unique.propertyNames)] }
    /// Wraps a named index.
    public static func buildExpression(_ index: FetchIndex) -> [EntityMember] { [.fetchIndex(index.description)] }
    /// Passes members through.
    public static func buildExpression(_ members: [EntityMember]) -> [EntityMember] { members }
    /// Joins the statements of a block.
    public static func buildBlock(_ parts: [EntityMember]...) -> [EntityMember] { parts.flatMap { $0 } }
    /// Supports `if` without `else`.
    public static func buildOptional(_ part: [EntityMember]?) -> [EntityMember] { part ?? [] }
    /// Supports the first branch of `if`/`else`.
    public static func buildEither(first part: [EntityMember]) -> [EntityMember] { part }
    /// Supports the second branch of `if`/`else`.
    public static func buildEither(second part: [EntityMember]) -> [EntityMember] { part }
    /// Supports `for` loops.
    public static func buildArray(_ parts: [[EntityMember]]) -> [EntityMember] { parts.flatMap { $0 } }
}
