// MARK: - FetchedPropertyDescription

/// A fetched property: a named, lazily evaluated fetch of another entity's objects.
///
/// Corresponds to Core Data's `NSFetchedPropertyDescription`, whose `fetchRequest` names an
/// entity, a predicate and sort descriptors. As in Core Data, the predicate may use
/// `$FETCH_SOURCE` (the object the property belongs to) and `$FETCHED_PROPERTY` (this
/// description); the value is an array of objects, in the order of ``sortDescriptors``,
/// evaluated at the first read and kept until the object is refreshed. Fetched properties
/// are never stored, so they are not part of the version hash.
///
/// ```swift
/// FetchedProperty("seniors", entity: "Employee", predicate: "department == $FETCH_SOURCE AND age > 60",
///                 sortDescriptors: [ModelSortDescriptor("age", ascending: false)])
/// ```
public struct FetchedPropertyDescription: Sendable, Hashable, Codable {
    /// The property's name, unique among its entity's properties.
    public var name: String
    /// The name of the entity fetched.
    public var entityName: String
    /// The condition the fetched objects satisfy.
    public var predicate: ModelPredicate
    /// The order of the fetched objects (the `sortDescriptors` of Core Data's
    /// `fetchRequest`); empty leaves it unspecified. A model file holding any needs
    /// format version 3.
    public var sortDescriptors: [ModelSortDescriptor] = []
    /// The property's name in the previous model version.
    public var renamingIdentifier: String?
    /// Free-form annotations.
    public var userInfo: [String: String] = [:]

    /// Creates a fetched property.
    ///
    /// ```swift
    /// FetchedPropertyDescription("adults", entity: "Person", predicate: "age >= 18")
    /// ```
    public init(_ name: String, entity: String, predicate: ModelPredicate, sortDescriptors: [ModelSortDescriptor] = []) {
        self.name = name
        self.entityName = entity
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
    }

    private enum CodingKeys: String, CodingKey { case name, entityName, predicate, sortDescriptors, renamingIdentifier, userInfo }

    /// Decodes a fetched property; one encoded before sort descriptors existed has none.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        entityName = try c.decode(String.self, forKey: .entityName)
        predicate = try c.decode(ModelPredicate.self, forKey: .predicate)
        sortDescriptors = try c.decodeIfPresent([ModelSortDescriptor].self, forKey: .sortDescriptors) ?? []
        renamingIdentifier = try c.decodeIfPresent(String.self, forKey: .renamingIdentifier)
        userInfo = try c.decode([String: String].self, forKey: .userInfo)
    }
}

// MARK: - Builder spelling

/// The builder spelling of ``FetchedPropertyDescription``.
///
/// ```swift
/// Entity("Team") { FetchedProperty("stars", entity: "Player", predicate: "score > 90") }
/// ```
public typealias FetchedProperty = FetchedPropertyDescription
