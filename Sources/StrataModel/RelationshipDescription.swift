// MARK: - RelationshipDescription

/// A relationship from one entity to another: destination, inverse, cardinality and delete
/// rule.
///
/// Corresponds to Core Data's `NSRelationshipDescription`. The destination and inverse are
/// named, not referenced, so a model is a plain value; the model resolves them
/// (``ManagedObjectModel/destinationEntity(of:)``,
/// ``ManagedObjectModel/inverseRelationship(of:in:)``) and its checker reports a name that
/// does not resolve. A to-one relationship has `maxCount == 1`; a to-many one has ``isToMany``.
///
/// ```swift
/// Relationship("players", to: "Player", inverse: "team", toMany: true, deleteRule: .cascade)
/// Relationship("team", to: "Team", inverse: "players")
/// ```
public struct RelationshipDescription: Sendable, Hashable, Codable {
    // MARK: - Identity

    /// The relationship's name, unique among its entity's properties.
    public var name: String
    /// The name of the destination entity (`destinationEntity`).
    public var destinationEntityName: String
    /// The name of the inverse relationship on the destination entity
    /// (`inverseRelationship`), or nil for a one-way relationship.
    public var inverseName: String?

    // MARK: - Cardinality

    /// Whether the relationship holds many objects (`isToMany`).
    public var isToMany: Bool = false
    /// Whether a to-many relationship keeps its objects in order (`isOrdered`).
    public var isOrdered: Bool = false
    /// The fewest destination objects allowed when the relationship is not empty, or nil
    /// for no limit (`minCount`; code 1580).
    public var minCount: Int?
    /// The most destination objects allowed, or nil for no limit (`maxCount`; code 1590).
    /// Ignored for to-one relationships, which hold at most one.
    public var maxCount: Int?

    // MARK: - Behaviour

    /// What deleting the source does to the destination objects (`deleteRule`); default
    /// ``DeleteRule/nullify``.
    public var deleteRule: DeleteRule = .nullify
    /// Whether the relationship may be empty at save (`isOptional`); default true.
    public var isOptional: Bool = true
    /// Whether the relationship lives only in memory (`isTransient`).
    public var isTransient: Bool = false

    // MARK: - Metadata

    /// The relationship's name in the previous model version (`renamingIdentifier`).
    public var renamingIdentifier: String?
    /// Free-form annotations (`userInfo`); not part of the version hash.
    public var userInfo: [String: String] = [:]
    /// Extra text mixed into the version hash (`versionHashModifier`).
    public var versionHashModifier: String?

    // MARK: - Creating

    /// Creates a relationship.
    ///
    /// ```swift
    /// RelationshipDescription("monitor", to: "Student")
    /// ```
    public init(
        _ name: String, to destination: String, inverse: String? = nil, toMany: Bool = false,
        ordered: Bool = false, optional: Bool = true, deleteRule: DeleteRule = .nullify
    ) {
        self.name = name
        self.destinationEntityName = destination
        self.inverseName = inverse
        self.isToMany = toMany
        self.isOrdered = ordered
        self.isOptional = optional
        self.deleteRule = deleteRule
    }

    /// Whether the relationship is stored (not transient).
    ///
    /// ```swift
    /// Relationship("team", to: "Team").isPersisted  // true
    /// ```
    public var isPersisted: Bool { !isTransient }
}

// MARK: - Builder spelling

/// The builder spelling of ``RelationshipDescription``.
///
/// ```swift
/// Entity("Player") { Relationship("team", to: "Team", inverse: "players") }
/// ```
public typealias Relationship = RelationshipDescription

// MARK: - Modifiers

extension RelationshipDescription {
    func with(_ change: (inout RelationshipDescription) -> Void) -> RelationshipDescription {
        var copy = self
        change(&copy)
        return copy
    }

    /// Makes the relationship mandatory (`isOptional = false`).
    ///
    /// ```swift
    /// Relationship("department", to: "Department").required()
    /// ```
    public func required() -> RelationshipDescription { with { $0.isOptional = false } }

    /// Makes the relationship transient.
    ///
    /// ```swift
    /// Relationship("cachedBest", to: "Player").transient()
    /// ```
    public func transient() -> RelationshipDescription { with { $0.isTransient = true } }

    /// Sets the minimum and/or maximum count.
    ///
    /// ```swift
    /// Relationship("players", to: "Player", toMany: true).count(min: 1, max: 25)
    /// ```
    public func count(min: Int? = nil, max: Int? = nil) -> RelationshipDescription {
        with {
            $0.minCount = min
            $0.maxCount = max
        }
    }

    /// Records the relationship's name in the previous model version.
    ///
    /// ```swift
    /// Relationship("squad", to: "Player", toMany: true).renamed(from: "players")
    /// ```
    public func renamed(from previousName: String) -> RelationshipDescription { with { $0.renamingIdentifier = previousName } }

    /// Adds user-info entries.
    ///
    /// ```swift
    /// Relationship("team", to: "Team").userInfo(["note": "home team"])
    /// ```
    public func userInfo(_ entries: [String: String]) -> RelationshipDescription {
        with { $0.userInfo.merge(entries) { _, new in new } }
    }

    /// Sets the version hash modifier.
    ///
    /// ```swift
    /// Relationship("team", to: "Team").versionHashModifier("2")
    /// ```
    public func versionHashModifier(_ modifier: String) -> RelationshipDescription { with { $0.versionHashModifier = modifier } }
}
