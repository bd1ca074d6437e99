// MARK: - Builder spelling

/// The builder spelling of ``EntityDescription``.
///
/// ```swift
/// Entity("Team") {
///     Attribute("name", .string)
///     Relationship("players", to: "Player", inverse: "team", toMany: true, deleteRule: .cascade)
/// }
/// ```
public typealias Entity = EntityDescription

// MARK: - Building

extension EntityDescription {
    /// Creates an entity from a builder block.
    ///
    /// `className` defaults to the entity name; `parent` names the superentity.
    ///
    /// ```swift
    /// Entity("Manager", parent: "Employee") {
    ///     Relationship("reports", to: "Employee", inverse: "manager", toMany: true)
    /// }
    /// ```
    public init(
        _ name: String, className: String? = nil, abstract: Bool = false, parent: String? = nil,
        @EntityBuilder _ content: () -> [EntityMember] = { [] }
    ) {
        self.init(name: name, managedObjectClassName: className, isAbstract: abstract, superentityName: parent)
        var attributes: [AttributeDescription] = []
        var relationships: [RelationshipDescription] = []
        var fetched: [FetchedPropertyDescription] = []
        for member in content() {
            switch member {
            case .attribute(let a): attributes.append(a)
            case .relationship(let r): relationships.append(r)
            case .fetchedProperty(let f): fetched.append(f)
            case .uniquenessConstraint(let names): uniquenessConstraints.append(names)
            case .fetchIndex(let index): indexes.append(index)
            }
        }
        self.attributes = attributes
        self.relationships = relationships
        self.fetchedProperties = fetched
        rebuildIndex()
    }

    func with(_ change: (inout EntityDescription) -> Void) -> EntityDescription {
        var copy = self
        change(&copy)
        return copy
    }

    /// Records the entity's name in the previous model version.
    ///
    /// ```swift
    /// Entity("Athlete") { … }.renamed(from: "Player")
    /// ```
    public func renamed(from previousName: String) -> EntityDescription { with { $0.renamingIdentifier = previousName } }

    /// Adds user-info entries.
    ///
    /// ```swift
    /// Entity("Run") { … }.userInfo(["doc": "one program run"])
    /// ```
    public func userInfo(_ entries: [String: String]) -> EntityDescription {
        with { $0.userInfo.merge(entries) { _, new in new } }
    }

    /// Sets the version hash modifier.
    ///
    /// ```swift
    /// Entity("Run") { … }.versionHashModifier("2")
    /// ```
    public func versionHashModifier(_ modifier: String) -> EntityDescription { with { $0.versionHashModifier = modifier } }
}
