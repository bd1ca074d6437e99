// MARK: - FetchIndexDescription

/// A named index over one or more properties of an entity, kept by the store so fetches
/// can find and order objects without reading every one.
///
/// Corresponds to Core Data's `NSFetchIndexDescription` (an entity's `indexes`). An index
/// over one attribute does what ``AttributeDescription/isIndexed`` does; an index over
/// several (a *compound* index) serves predicates that fix the leading elements by
/// equality and constrain the next one — `team == %@ AND score > 90` with an index on
/// `team, score` — and a sort on the element after the fixed ones.
///
/// Keys are stored in ascending binary order whatever the elements' ``FetchIndexElementDescription/isAscending``
/// says: the store walks an index in either direction, so the flag is kept for fidelity
/// to Core Data models and changes nothing stored (`Specs/0002-model-file.md` §3.1).
///
/// ```swift
/// Entity("Player") {
///     Attribute("name", .string)
///     Attribute("score", .int32)
///     Relationship("team", to: "Team", inverse: "players")
///     FetchIndex("byTeamAndScore", "team", "score")
/// }
/// ```
public struct FetchIndexDescription: Sendable, Hashable, Codable {
    /// The index's name, unique among the indexes of the entity and its superentities (`name`).
    public var name: String
    /// The indexed properties, most significant first (`elements`).
    public var elements: [FetchIndexElementDescription]

    /// Creates an index from its elements.
    ///
    /// ```swift
    /// FetchIndexDescription(name: "byName", elements: [.init(propertyName: "lastName"), .init(propertyName: "firstName")])
    /// ```
    public init(name: String, elements: [FetchIndexElementDescription]) {
        self.name = name
        self.elements = elements
    }

    /// The indexed properties' names, in element order.
    ///
    /// ```swift
    /// FetchIndex("byName", "lastName", "firstName").propertyNames  // ["lastName", "firstName"]
    /// ```
    public var propertyNames: [String] { elements.map(\.propertyName) }
}

// MARK: - FetchIndexElementDescription

/// One element of a ``FetchIndexDescription``: a property and how its values are ordered.
///
/// Corresponds to Core Data's `NSFetchIndexElementDescription`.
///
/// ```swift
/// FetchIndexElementDescription(propertyName: "score", isAscending: false)
/// ```
public struct FetchIndexElementDescription: Sendable, Hashable, Codable {
    /// How an element's values are compared.
    ///
    /// Corresponds to Core Data's `NSFetchIndexElementType`.
    public enum CollationType: String, Sendable, Hashable, Codable, CaseIterable {
        /// Values in their natural order: numbers by value, strings by their Unicode scalars
        /// (canonically equivalent strings together), dates by time.
        case binary
        /// A spatial (R-tree) index. Core Data builds these for SQLite's R-tree module;
        /// Strata's store has none, so a model using one is refused when checked.
        case rTree
    }

    /// The indexed attribute or to-one relationship (`property`).
    public var propertyName: String
    /// How values are compared (`collationType`); only ``CollationType/binary`` is supported.
    public var collationType: CollationType
    /// Whether the element is declared in ascending order (`isAscending`). Recorded for
    /// fidelity; the store keeps keys ascending and walks them either way.
    public var isAscending: Bool

    /// Creates an element.
    ///
    /// ```swift
    /// FetchIndexElementDescription(propertyName: "lastName")
    /// ```
    public init(propertyName: String, collationType: CollationType = .binary, isAscending: Bool = true) {
        self.propertyName = propertyName
        self.collationType = collationType
        self.isAscending = isAscending
    }
}

// MARK: - Builder spelling

/// The builder spelling of ``FetchIndexDescription``: an index over the named properties, in
/// ascending binary order.
///
/// ```swift
/// Entity("Person") {
///     Attribute("lastName", .string)
///     Attribute("firstName", .string)
///     FetchIndex("byName", "lastName", "firstName")
/// }
/// ```
public struct FetchIndex: Sendable, Hashable {
    /// The description this builder item adds to the entity.
    public var description: FetchIndexDescription

    /// An index over `propertyNames`, each ascending.
    ///
    /// ```swift
    /// FetchIndex("byTeamAndScore", "team", "score")
    /// ```
    public init(_ name: String, _ propertyNames: String...) {
        description = FetchIndexDescription(name: name, elements: propertyNames.map { FetchIndexElementDescription(propertyName: $0) })
    }

    /// An index over the given elements.
    ///
    /// ```swift
    /// FetchIndex("byScore", elements: [.init(propertyName: "score", isAscending: false)])
    /// ```
    public init(_ name: String, elements: [FetchIndexElementDescription]) {
        description = FetchIndexDescription(name: name, elements: elements)
    }
}
