// MARK: - PropertyDescription

/// Any property of an entity: an attribute, a relationship or a fetched property.
///
/// Corresponds to Core Data's `NSPropertyDescription` class hierarchy, as an enum over the
/// three value types, with the shared properties (`name`, `isOptional`, `isTransient`,
/// `userInfo`, `renamingIdentifier`) available on every case.
///
/// ```swift
/// for property in entity.properties {
///     if case .relationship(let r) = property { print(r.name, "→", r.destinationEntityName) }
/// }
/// entity.propertiesByName["email"]?.isOptional
/// ```
public enum PropertyDescription: Sendable, Hashable, Codable {
    /// An attribute.
    case attribute(AttributeDescription)
    /// A relationship.
    case relationship(RelationshipDescription)
    /// A fetched property.
    case fetchedProperty(FetchedPropertyDescription)

    // MARK: - Shared properties

    /// The property's name.
    ///
    /// ```swift
    /// PropertyDescription.attribute(Attribute("age", .int16)).name  // "age"
    /// ```
    public var name: String {
        switch self {
        case .attribute(let a): a.name
        case .relationship(let r): r.name
        case .fetchedProperty(let f): f.name
        }
    }

    /// Whether the property may be empty at save; fetched properties are always optional.
    ///
    /// ```swift
    /// entity.propertiesByName["date"]?.isOptional
    /// ```
    public var isOptional: Bool {
        switch self {
        case .attribute(let a): a.isOptional
        case .relationship(let r): r.isOptional
        case .fetchedProperty: true
        }
    }

    /// Whether the property never reaches the store; fetched properties are never stored.
    ///
    /// ```swift
    /// entity.propertiesByName["fullName"]?.isTransient  // true
    /// ```
    public var isTransient: Bool {
        switch self {
        case .attribute(let a): a.isTransient
        case .relationship(let r): r.isTransient
        case .fetchedProperty: true
        }
    }

    /// The property's user info.
    ///
    /// ```swift
    /// entity.propertiesByName["score"]?.userInfo["unit"]
    /// ```
    public var userInfo: [String: String] {
        switch self {
        case .attribute(let a): a.userInfo
        case .relationship(let r): r.userInfo
        case .fetchedProperty(let f): f.userInfo
        }
    }

    /// The property's name in the previous model version.
    ///
    /// ```swift
    /// entity.propertiesByName["familyName"]?.renamingIdentifier  // "lastName"
    /// ```
    public var renamingIdentifier: String? {
        switch self {
        case .attribute(let a): a.renamingIdentifier
        case .relationship(let r): r.renamingIdentifier
        case .fetchedProperty(let f): f.renamingIdentifier
        }
    }

    /// The attribute, when this property is one.
    ///
    /// ```swift
    /// entity.propertiesByName["age"]?.attribute?.attributeType  // .int16
    /// ```
    public var attribute: AttributeDescription? {
        if case .attribute(let a) = self { return a }
        return nil
    }

    /// The relationship, when this property is one.
    ///
    /// ```swift
    /// entity.propertiesByName["team"]?.relationship?.destinationEntityName  // "Team"
    /// ```
    public var relationship: RelationshipDescription? {
        if case .relationship(let r) = self { return r }
        return nil
    }

    /// The fetched property, when this property is one.
    ///
    /// ```swift
    /// entity.propertiesByName["stars"]?.fetchedProperty?.entityName
    /// ```
    public var fetchedProperty: FetchedPropertyDescription? {
        if case .fetchedProperty(let f) = self { return f }
        return nil
    }

    /// The kind of property, for messages: `attribute`, `relationship`, `fetched property`.
    ///
    /// ```swift
    /// property.kindName  // "relationship"
    /// ```
    public var kindName: String {
        switch self {
        case .attribute: "attribute"
        case .relationship: "relationship"
        case .fetchedProperty: "fetched property"
        }
    }
}
