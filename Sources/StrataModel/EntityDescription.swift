// MARK: - EntityDescription

/// An entity: a named kind of object with attributes, relationships and fetched properties,
/// optionally inheriting from a superentity.
///
/// Corresponds to Core Data's `NSEntityDescription`. ``attributes``, ``relationships`` and
/// ``fetchedProperties`` are the properties this entity *declares*; ``properties`` and the
/// `…ByName` lookups also include the properties inherited from superentities, as Core
/// Data's do. Inheritance (``superentityName``, ``subentityNames``) is resolved when the entity
/// is part of a ``ManagedObjectModel``: take entities from the model
/// (``ManagedObjectModel/entity(named:)``) to see inherited properties.
///
/// The builder spelling is ``Entity``:
///
/// ```swift
/// Entity("Employee") {
///     Attribute("firstName", .string)
///     Attribute("lastName", .string)
///     Relationship("department", to: "Department", inverse: "employees")
/// }
/// ```
public struct EntityDescription: Sendable {
    // MARK: - Identity

    /// The entity's name, unique in the model (`name`).
    public var name: String
    /// The name of the class that represents the entity's objects
    /// (`managedObjectClassName`); defaults to the entity name.
    public var managedObjectClassName: String
    /// Whether the entity has no instances of its own, only of sub-entities (`isAbstract`).
    public var isAbstract: Bool = false
    /// The name of the superentity, or nil (`superentity`).
    public var superentityName: String?

    // MARK: - Declared properties

    /// The attributes this entity declares, in order (inherited ones are in ``properties``).
    public var attributes: [AttributeDescription] = [] { didSet { rebuildIndex() } }
    /// The relationships this entity declares, in order.
    public var relationships: [RelationshipDescription] = [] { didSet { rebuildIndex() } }
    /// The fetched properties this entity declares, in order.
    public var fetchedProperties: [FetchedPropertyDescription] = [] { didSet { rebuildIndex() } }

    // MARK: - Constraints and metadata

    /// Sets of property names whose values must be unique together among the entity's
    /// objects (`uniquenessConstraints`); each inner array is one constraint.
    public var uniquenessConstraints: [[String]] = []
    /// Named indexes over one or more properties (`indexes`), kept by the store for
    /// fetches; not part of the version hash. See ``FetchIndexDescription``.
    public var indexes: [FetchIndexDescription] = []
    /// Free-form annotations (`userInfo`); not part of the version hash.
    public var userInfo: [String: String] = [:]
    /// The entity's name in the previous model version (`renamingIdentifier`).
    public var renamingIdentifier: String?
    /// Extra text mixed into the version hash (`versionHashModifier`).
    public var versionHashModifier: String?

    // MARK: - Resolved by the model

    /// The names of the direct sub-entities (`subentities`), resolved by the model.
    public internal(set) var subentityNames: [String] = []
    /// The superentity chain, nearest first, resolved by the model.
    public internal(set) var superentityNames: [String] = []
    /// Properties inherited from the superentity chain, root first.
    var inheritedAttributes: [AttributeDescription] = []
    var inheritedRelationships: [RelationshipDescription] = []
    var inheritedFetchedProperties: [FetchedPropertyDescription] = []
    var index = Index()

    /// Lookup tables over inherited and declared properties, rebuilt when either changes.
    struct Index: Sendable {
        var attributes: [String: AttributeDescription] = [:]
        var relationships: [String: RelationshipDescription] = [:]
        var fetchedProperties: [String: FetchedPropertyDescription] = [:]
        var properties: [String: PropertyDescription] = [:]
        var allAttributes: [AttributeDescription] = []
        var allRelationships: [RelationshipDescription] = []
        var allFetchedProperties: [FetchedPropertyDescription] = []
    }

    // MARK: - Creating

    /// Creates an entity from its parts.
    ///
    /// ```swift
    /// EntityDescription(name: "Run", attributes: [Attribute("date", .date)])
    /// ```
    public init(
        name: String, managedObjectClassName: String? = nil, isAbstract: Bool = false,
        superentityName: String? = nil, attributes: [AttributeDescription] = [],
        relationships: [RelationshipDescription] = [], fetchedProperties: [FetchedPropertyDescription] = [],
        uniquenessConstraints: [[String]] = [], indexes: [FetchIndexDescription] = []
    ) {
        self.name = name
        self.managedObjectClassName = managedObjectClassName ?? name
        self.isAbstract = isAbstract
        self.superentityName = superentityName
        self.attributes = attributes
        self.relationships = relationships
        self.fetchedProperties = fetchedProperties
        self.uniquenessConstraints = uniquenessConstraints
        self.indexes = indexes
        rebuildIndex()
    }

    mutating func rebuildIndex() {
        var index = Index()
        index.allAttributes = inheritedAttributes + attributes
        index.allRelationships = inheritedRelationships + relationships
        index.allFetchedProperties = inheritedFetchedProperties + fetchedProperties
        for a in index.allAttributes {
            index.attributes[a.name] = a
            index.properties[a.name] = .attribute(a)
        }
        for r in index.allRelationships {
            index.relationships[r.name] = r
            index.properties[r.name] = .relationship(r)
        }
        for f in index.allFetchedProperties {
            index.fetchedProperties[f.name] = f
            index.properties[f.name] = .fetchedProperty(f)
        }
        self.index = index
    }

    // MARK: - Properties including inherited ones

    /// Every property, inherited first (root superentity down), then declared ones:
    /// attributes, relationships, fetched properties (`properties`).
    ///
    /// ```swift
    /// model.entity(named: "Manager")?.properties.map(\.name)
    /// ```
    public var properties: [PropertyDescription] {
        allAttributes.map(PropertyDescription.attribute) + allRelationships.map(PropertyDescription.relationship)
            + allFetchedProperties.map(PropertyDescription.fetchedProperty)
    }

    /// Inherited and declared attributes, in order.
    ///
    /// ```swift
    /// entity.allAttributes.filter(\.isPersisted)
    /// ```
    public var allAttributes: [AttributeDescription] { index.allAttributes }

    /// Inherited and declared relationships, in order.
    ///
    /// ```swift
    /// entity.allRelationships.filter(\.isToMany)
    /// ```
    public var allRelationships: [RelationshipDescription] { index.allRelationships }

    /// Inherited and declared fetched properties, in order.
    ///
    /// ```swift
    /// entity.allFetchedProperties.map(\.name)
    /// ```
    public var allFetchedProperties: [FetchedPropertyDescription] { index.allFetchedProperties }

    /// Every property by name, inherited ones included (`propertiesByName`).
    ///
    /// ```swift
    /// entity.propertiesByName["team"]?.relationship
    /// ```
    public var propertiesByName: [String: PropertyDescription] { index.properties }

    /// Every attribute by name, inherited ones included (`attributesByName`).
    ///
    /// ```swift
    /// entity.attributesByName["processID"]?.defaultValue  // .int32(-1)
    /// ```
    public var attributesByName: [String: AttributeDescription] { index.attributes }

    /// Every relationship by name, inherited ones included (`relationshipsByName`).
    ///
    /// ```swift
    /// entity.relationshipsByName["players"]?.deleteRule  // .cascade
    /// ```
    public var relationshipsByName: [String: RelationshipDescription] { index.relationships }

    /// Every fetched property by name, inherited ones included.
    ///
    /// ```swift
    /// entity.fetchedPropertiesByName["stars"]?.predicate
    /// ```
    public var fetchedPropertiesByName: [String: FetchedPropertyDescription] { index.fetchedProperties }

    // MARK: - Inheritance

    /// Whether this entity is `entity` or one of its sub-entities (`isKindOf(entity:)`).
    ///
    /// Uses the superentity chain the model resolved.
    ///
    /// ```swift
    /// manager.isKindOf(entity: employee)  // true when Manager's superentity is Employee
    /// ```
    public func isKindOf(entity: EntityDescription) -> Bool { isKindOf(entityNamed: entity.name) }

    /// Whether this entity is the entity named `name` or one of its sub-entities.
    ///
    /// ```swift
    /// manager.isKindOf(entityNamed: "Employee")
    /// ```
    public func isKindOf(entityNamed name: String) -> Bool {
        self.name == name || superentityNames.contains(name)
    }
}

// MARK: - Equatable, Hashable

extension EntityDescription: Hashable {
    /// Entities are equal when everything they declare is equal; the inheritance the model
    /// resolved follows from the declarations and is not compared.
    ///
    /// ```swift
    /// Entity("Run") {} == Entity("Run") {}  // true
    /// ```
    public static func == (lhs: EntityDescription, rhs: EntityDescription) -> Bool {
        lhs.name == rhs.name && lhs.managedObjectClassName == rhs.managedObjectClassName
            && lhs.isAbstract == rhs.isAbstract && lhs.superentityName == rhs.superentityName
            && lhs.attributes == rhs.attributes && lhs.relationships == rhs.relationships
            && lhs.fetchedProperties == rhs.fetchedProperties && lhs.uniquenessConstraints == rhs.uniquenessConstraints
            && lhs.indexes == rhs.indexes
            && lhs.userInfo == rhs.userInfo && lhs.renamingIdentifier == rhs.renamingIdentifier
            && lhs.versionHashModifier == rhs.versionHashModifier
    }

    /// Hashes the declared parts.
    ///
    /// ```swift
    /// Set([entity]).contains(entity)
    /// ```
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(managedObjectClassName)
        hasher.combine(isAbstract)
        hasher.combine(superentityName)
        hasher.combine(attributes)
        hasher.combine(relationships)
        hasher.combine(fetchedProperties)
        hasher.combine(uniquenessConstraints)
        hasher.combine(indexes)
        hasher.combine(userInfo)
        hasher.combine(renamingIdentifier)
        hasher.combine(versionHashModifier)
    }
}

// MARK: - Codable

extension EntityDescription: Codable {
    enum CodingKeys: String, CodingKey {
        case name, managedObjectClassName, isAbstract, superentityName, attributes, relationships
        case fetchedProperties, uniquenessConstraints, indexes, userInfo, renamingIdentifier, versionHashModifier
    }

    /// Decodes the declared parts; inheritance is resolved again by the model.
    ///
    /// ```swift
    /// try JSONDecoder().decode(EntityDescription.self, from: data)
    /// ```
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        managedObjectClassName = try c.decodeIfPresent(String.self, forKey: .managedObjectClassName) ?? name
        isAbstract = try c.decodeIfPresent(Bool.self, forKey: .isAbstract) ?? false
        superentityName = try c.decodeIfPresent(String.self, forKey: .superentityName)
        attributes = try c.decodeIfPresent([AttributeDescription].self, forKey: .attributes) ?? []
        relationships = try c.decodeIfPresent([RelationshipDescription].self, forKey: .relationships) ?? []
        fetchedProperties = try c.decodeIfPresent([FetchedPropertyDescription].self, forKey: .fetchedProperties) ?? []
        uniquenessConstraints = try c.decodeIfPresent([[String]].self, forKey: .uniquenessConstraints) ?? []
        indexes = try c.decodeIfPresent([FetchIndexDescription].self, forKey: .indexes) ?? []
        userInfo = try c.decodeIfPresent([String: String].self, forKey: .userInfo) ?? [:]
        renamingIdentifier = try c.decodeIfPresent(String.self, forKey: .renamingIdentifier)
        versionHashModifier = try c.decodeIfPresent(String.self, forKey: .versionHashModifier)
        rebuildIndex()
    }

    /// Encodes the declared parts.
    ///
    /// ```swift
    /// try JSONEncoder().encode(entity)
    /// ```
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(managedObjectClassName, forKey: .managedObjectClassName)
        try c.encode(isAbstract, forKey: .isAbstract)
        try c.encodeIfPresent(superentityName, forKey: .superentityName)
        try c.encode(attributes, forKey: .attributes)
        try c.encode(relationships, forKey: .relationships)
        try c.encode(fetchedProperties, forKey: .fetchedProperties)
        try c.encode(uniquenessConstraints, forKey: .uniquenessConstraints)
        if !indexes.isEmpty { try c.encode(indexes, forKey: .indexes) }
        try c.encode(userInfo, forKey: .userInfo)
        try c.encodeIfPresent(renamingIdentifier, forKey: .renamingIdentifier)
        try c.encodeIfPresent(versionHashModifier, forKey: .versionHashModifier)
    }
}
