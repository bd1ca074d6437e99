internal import Foundation
internal import StrataPredicate

// MARK: - ManagedObjectModel

/// A schema: the entities, their properties and relationships, fetch request templates and
/// the localization dictionary.
///
/// Corresponds to Core Data's `NSManagedObjectModel`. A model is a value: build it with the
/// result builder or load it from a JSON model file (`Specs/0002-model-file.md`); both give
/// equal models. Both ways check the model (``validate()``) and throw one ``ModelError``
/// listing every mistake. Entities are kept in declaration order and resolved by name:
/// superentities, sub-entities, inherited properties, relationship destinations and inverses.
///
/// ## Topics
///
/// ### Building
/// - ``init(versionIdentifiers:_:)``
/// - ``init(entities:fetchRequestTemplates:localizationDictionary:versionIdentifiers:)``
/// - ``init(contentsOf:)``
/// - ``init(jsonData:)``
///
/// ### Looking up
/// - ``entity(named:)``
/// - ``entitiesByName``
/// - ``destinationEntity(of:)``
/// - ``inverseRelationship(of:in:)``
///
/// ### Versioning
/// - ``versionHash``
/// - ``entityVersionHashesByName``
///
/// ```swift
/// let model = try ManagedObjectModel {
///     Entity("Run") {
///         Attribute("date", .date).required().providedAtInsert()
///         Attribute("processID", .int32, default: -1).required()
///             .validated(by: "SELF > 0", warning: "Process ID < 1")
///     }
///     Localization(["Property/processID/Entity/Run": "Process ID"])
/// }
/// model.entity(named: "Run")?.attributesByName["processID"]?.defaultValue  // .int32(-1)
/// ```
public struct ManagedObjectModel: Sendable {
    // MARK: - Stored

    private var declaredEntities: [EntityDescription] = []

    /// The entities in declaration order (`entities`). Setting them resolves inheritance
    /// again; call ``validate()`` to check the result.
    public var entities: [EntityDescription] {
        get { declaredEntities }
        set {
            declaredEntities = newValue
            resolve()
        }
    }

    /// The entities by name (`entitiesByName`), with inheritance resolved.
    public private(set) var entitiesByName: [String: EntityDescription] = [:]

    /// Version hashes, computed when the entities change (the event log asks for them on
    /// every commit).
    private(set) var cachedEntityVersionHashes: [String: Data] = [:]
    private(set) var cachedVersionHash = Data()

    /// Named fetch requests with `$variable` placeholders.
    public var fetchRequestTemplates: [FetchRequestTemplate] = []

    /// Human-readable names for entities, properties and error strings
    /// (`localizationDictionary`). Keys follow Core Data: `Entity/<Entity>`,
    /// `Property/<property>/Entity/<Entity>`, `Property/<property>`, `ErrorString/<text>`.
    public var localizationDictionary: [String: String] = [:]

    /// Free-form identifiers of this model version (`versionIdentifiers`), for the app's
    /// own bookkeeping; not part of the version hash.
    public var versionIdentifiers: Set<String> = []

    // MARK: - Creating

    /// An empty model (`NSManagedObjectModel()`); add entities by setting ``entities``.
    ///
    /// ```swift
    /// var model = ManagedObjectModel()
    /// model.entities = [Entity("Run") { Attribute("date", .date) }]
    /// try model.validate()
    /// ```
    public init() {}

    /// Creates a model from its parts and checks it.
    ///
    /// Throws ``ModelError`` listing every problem ``validate()`` finds.
    ///
    /// ```swift
    /// let model = try ManagedObjectModel(entities: [Entity("Run") {}])
    /// ```
    public init(
        entities: [EntityDescription], fetchRequestTemplates: [FetchRequestTemplate] = [],
        localizationDictionary: [String: String] = [:], versionIdentifiers: Set<String> = []
    ) throws(ModelError) {
        self.fetchRequestTemplates = fetchRequestTemplates
        self.localizationDictionary = localizationDictionary
        self.versionIdentifiers = versionIdentifiers
        self.entities = entities
        try validate()
    }

    // MARK: - Resolution

    /// Resolves superentity chains, sub-entities and inherited properties. Total for any
    /// input: unknown superentities and cycles stop the chain (the checker reports them);
    /// the first entity with a duplicated name wins the lookup.
    private mutating func resolve() {
        var declared: [String: EntityDescription] = [:]
        for entity in declaredEntities where declared[entity.name] == nil { declared[entity.name] = entity }
        var subentities: [String: [String]] = [:]
        for entity in declaredEntities {
            if let parent = entity.superentityName, parent != entity.name {
                subentities[parent, default: []].append(entity.name)
            }
        }
        var resolved = declaredEntities
        for i in resolved.indices {
            var chain: [String] = []
            var seen: Set<String> = [resolved[i].name]
            var next = resolved[i].superentityName
            while let parentName = next, let parent = declared[parentName], seen.insert(parentName).inserted {
                chain.append(parentName)
                next = parent.superentityName
            }
            let ancestors = chain.reversed().compactMap { declared[$0] }
            resolved[i].superentityNames = chain
            resolved[i].subentityNames = subentities[resolved[i].name] ?? []
            resolved[i].inheritedAttributes = ancestors.flatMap(\.attributes)
            resolved[i].inheritedRelationships = ancestors.flatMap(\.relationships)
            resolved[i].inheritedFetchedProperties = ancestors.flatMap(\.fetchedProperties)
            resolved[i].rebuildIndex()
        }
        declaredEntities = resolved
        var byName: [String: EntityDescription] = [:]
        for entity in resolved where byName[entity.name] == nil { byName[entity.name] = entity }
        entitiesByName = byName
        cachedEntityVersionHashes = byName.mapValues(\.versionHash)
        cachedVersionHash = ManagedObjectModel.modelHash(cachedEntityVersionHashes)
    }

    // MARK: - Lookups

    /// The entity named `name`, with inheritance resolved, or nil.
    ///
    /// Corresponds to `entitiesByName[name]` (and `NSEntityDescription.entity(forEntityName:in:)`).
    ///
    /// ```swift
    /// model.entity(named: "Player")?.relationshipsByName["team"]
    /// ```
    public func entity(named name: String) -> EntityDescription? { entitiesByName[name] }

    /// The superentity of `entity`, or nil (`superentity`).
    ///
    /// ```swift
    /// model.superentity(of: manager)?.name  // "Employee"
    /// ```
    public func superentity(of entity: EntityDescription) -> EntityDescription? {
        entity.superentityName.flatMap { entitiesByName[$0] }
    }

    /// The entity named `name` and every entity below it, at any depth: the entities whose
    /// objects a fetch of `name` includes. Starts with `name`; unknown names give `[name]`.
    ///
    /// ```swift
    /// model.selfAndSubentityNames(of: "Employee")  // ["Employee", "Manager"]
    /// ```
    public func selfAndSubentityNames(of name: String) -> [String] {
        var result = [name]
        var queue = [name]
        while let next = queue.popLast() {
            for sub in entitiesByName[next]?.subentityNames ?? [] where !result.contains(sub) {
                result.append(sub)
                queue.append(sub)
            }
        }
        return result
    }

    /// The direct sub-entities of `entity`, in declaration order (`subentities`).
    ///
    /// ```swift
    /// model.subentities(of: employee).map(\.name)  // ["Manager"]
    /// ```
    public func subentities(of entity: EntityDescription) -> [EntityDescription] {
        (entitiesByName[entity.name]?.subentityNames ?? []).compactMap { entitiesByName[$0] }
    }

    /// The destination entity of `relationship`, or nil when it names no entity
    /// (`destinationEntity`).
    ///
    /// ```swift
    /// model.destinationEntity(of: players)?.name  // "Player"
    /// ```
    public func destinationEntity(of relationship: RelationshipDescription) -> EntityDescription? {
        entitiesByName[relationship.destinationEntityName]
    }

    /// The inverse of `relationship`, or nil (`inverseRelationship`).
    ///
    /// ```swift
    /// model.inverseRelationship(of: players)?.name  // "team"
    /// ```
    public func inverseRelationship(of relationship: RelationshipDescription) -> RelationshipDescription? {
        guard let inverse = relationship.inverseName else { return nil }
        return destinationEntity(of: relationship)?.relationshipsByName[inverse]
    }

    /// The inverse of the relationship named `name` on the entity named `entityName`.
    ///
    /// ```swift
    /// model.inverseRelationship(of: "players", in: "Team")?.name  // "team"
    /// ```
    public func inverseRelationship(of name: String, in entityName: String) -> RelationshipDescription? {
        entitiesByName[entityName]?.relationshipsByName[name].flatMap { inverseRelationship(of: $0) }
    }

    /// The fetch request templates by name (`fetchRequestTemplatesByName`).
    ///
    /// ```swift
    /// model.fetchRequestTemplatesByName["olderThan"]?.entityName
    /// ```
    public var fetchRequestTemplatesByName: [String: FetchRequestTemplate] {
        var byName: [String: FetchRequestTemplate] = [:]
        for template in fetchRequestTemplates where byName[template.name] == nil { byName[template.name] = template }
        return byName
    }

    /// The template named `name` with `$variables` replaced by `substitutionVariables`, or
    /// nil when there is no such template.
    ///
    /// Corresponds to `fetchRequestFromTemplate(withName:substitutionVariables:)`. Throws the
    /// predicate module's error when a variable the predicate uses is missing, and
    /// ``ModelError`` when the template's entity does not exist or its predicate did not
    /// parse.
    ///
    /// ```swift
    /// let request = try model.fetchRequestTemplate(named: "olderThan", substitutionVariables: ["AGE": 30])
    /// try request?.predicate?.evaluate(with: ["age": 40])  // true
    /// ```
    public func fetchRequestTemplate(
        named name: String, substitutionVariables: [String: Any] = [:]
    ) throws -> TemplateFetchRequest? {
        guard let template = fetchRequestTemplatesByName[name] else { return nil }
        guard let entity = entitiesByName[template.entityName] else {
            throw ModelError([
                .init(
                    .invalidFetchRequestTemplate, entity: template.entityName, property: nil,
                    message: "fetch request template '\(name)' names entity '\(template.entityName)', which does not exist")
            ])
        }
        guard let stored = template.predicate else { return TemplateFetchRequest(entity: entity, predicate: nil) }
        guard let predicate = stored.predicate else {
            throw ModelError([
                .init(
                    .invalidPredicate, entity: template.entityName, property: nil,
                    message: "fetch request template '\(name)' has a predicate that does not parse: \(stored.syntaxError ?? stored.format)")
            ])
        }
        return TemplateFetchRequest(entity: entity, predicate: try predicate.withSubstitutionVariables(substitutionVariables))
    }
}

// MARK: - Equatable, Hashable

extension ManagedObjectModel: Hashable {
    /// Models are equal when their entities (in order), templates, localization dictionaries
    /// and version identifiers are equal.
    ///
    /// ```swift
    /// try ManagedObjectModel(contentsOf: url) == SeedModels.run  // true
    /// ```
    public static func == (lhs: ManagedObjectModel, rhs: ManagedObjectModel) -> Bool {
        lhs.declaredEntities == rhs.declaredEntities && lhs.fetchRequestTemplates == rhs.fetchRequestTemplates
            && lhs.localizationDictionary == rhs.localizationDictionary && lhs.versionIdentifiers == rhs.versionIdentifiers
    }

    /// Hashes the same parts `==` compares.
    ///
    /// ```swift
    /// Set([model]).count
    /// ```
    public func hash(into hasher: inout Hasher) {
        hasher.combine(declaredEntities)
        hasher.combine(fetchRequestTemplates)
        hasher.combine(localizationDictionary)
        hasher.combine(versionIdentifiers)
    }
}

// MARK: - Codable

extension ManagedObjectModel: Codable {
    enum CodingKeys: String, CodingKey {
        case entities, fetchRequestTemplates, localizationDictionary, versionIdentifiers
    }

    /// Decodes a model and checks it; a model that fails ``validate()`` throws its
    /// ``ModelError``.
    ///
    /// This is Swift's `Codable` form, for embedding a model in other `Codable` values; the
    /// model file format is read by ``init(jsonData:)``.
    ///
    /// ```swift
    /// let copy = try JSONDecoder().decode(ManagedObjectModel.self, from: JSONEncoder().encode(model))
    /// ```
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        fetchRequestTemplates = try c.decodeIfPresent([FetchRequestTemplate].self, forKey: .fetchRequestTemplates) ?? []
        localizationDictionary = try c.decodeIfPresent([String: String].self, forKey: .localizationDictionary) ?? [:]
        versionIdentifiers = try c.decodeIfPresent(Set<String>.self, forKey: .versionIdentifiers) ?? []
        entities = try c.decode([EntityDescription].self, forKey: .entities)
        try validate()
    }

    /// Encodes the model's declared parts.
    ///
    /// ```swift
    /// let data = try JSONEncoder().encode(model)
    /// ```
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(declaredEntities, forKey: .entities)
        try c.encode(fetchRequestTemplates, forKey: .fetchRequestTemplates)
        try c.encode(localizationDictionary, forKey: .localizationDictionary)
        try c.encode(versionIdentifiers.sorted(), forKey: .versionIdentifiers)
    }
}
