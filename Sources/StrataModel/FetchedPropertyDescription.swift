// MARK: - FetchedPropertyDescription

/// A fetched property: a named, lazily evaluated fetch of another entity's objects.
///
/// Corresponds to Core Data's `NSFetchedPropertyDescription`, whose `fetchRequest` names an
/// entity and a predicate. As in Core Data, the predicate may use `$FETCH_SOURCE` (the object
/// the property belongs to) and `$FETCHED_PROPERTY` (this description). Fetched properties are
/// never stored, so they are not part of the version hash.
///
/// ```swift
/// FetchedProperty("seniors", entity: "Employee", predicate: "department == $FETCH_SOURCE AND age > 60")
/// ```
public struct FetchedPropertyDescription: Sendable, Hashable, Codable {
    /// The property's name, unique among its entity's properties.
    public var name: String
    /// The name of the entity fetched.
    public var entityName: String
    /// The condition the fetched objects satisfy.
    public var predicate: ModelPredicate
    /// The property's name in the previous model version.
    public var renamingIdentifier: String?
    /// Free-form annotations.
    public var userInfo: [String: String] = [:]

    /// Creates a fetched property.
    ///
    /// ```swift
    /// FetchedPropertyDescription("adults", entity: "Person", predicate: "age >= 18")
    /// ```
    public init(_ name: String, entity: String, predicate: ModelPredicate) {
        self.name = name
        self.entityName = entity
        self.predicate = predicate
    }
}

// MARK: - Builder spelling

/// The builder spelling of ``FetchedPropertyDescription``.
///
/// ```swift
/// Entity("Team") { FetchedProperty("stars", entity: "Player", predicate: "score > 90") }
/// ```
public typealias FetchedProperty = FetchedPropertyDescription
