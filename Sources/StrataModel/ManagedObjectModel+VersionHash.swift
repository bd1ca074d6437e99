public import Foundation

// MARK: - Version hashes

extension EntityDescription {
    /// The SHA-256 of the entity's persisted shape: 32 bytes that change exactly when stored
    /// data written with one version could not be read as the other.
    ///
    /// Corresponds to Core Data's `versionHash`. Hashed (in this order): the entity name,
    /// `isAbstract`, the superentity name, the entity's `versionHashModifier`; then every
    /// persisted attribute, inherited ones included, sorted by name — name, type (with the
    /// transformable value type, and a derived attribute's derivation), `isOptional`,
    /// `versionHashModifier`; then every persisted
    /// relationship likewise — name, destination entity, `isToMany`, `isOrdered`,
    /// `versionHashModifier`. Not hashed: transient properties, fetched properties, class
    /// name, defaults, validation rules, indexes (`isIndexed` and ``indexes``), uniqueness constraints, delete rules,
    /// inverses, min/max counts, user info, renaming identifiers, property order and the
    /// model's localization. Take the entity from its model so inherited properties count.
    ///
    /// ```swift
    /// model.entity(named: "Run")?.versionHash.count  // 32
    /// ```
    public var versionHash: Data {
        var e = VersionHashEncoder()
        e.string("Strata.EntityVersionHash.1")
        e.string(name)
        e.bool(isAbstract)
        e.optional(superentityName)
        e.optional(versionHashModifier)
        let attributes = allAttributes.filter(\.isPersisted).sorted { $0.name < $1.name }
        e.count(attributes.count)
        for a in attributes {
            e.string(a.name)
            // A derived attribute's type names its derivation (an ordinary one's is unchanged).
            e.string(a.derivationExpression.map { "derived(\(a.attributeType.description), \($0.format))" } ?? a.attributeType.description)
            e.bool(a.isOptional)
            e.optional(a.versionHashModifier)
        }
        let relationships = allRelationships.filter(\.isPersisted).sorted { $0.name < $1.name }
        e.count(relationships.count)
        for r in relationships {
            e.string(r.name)
            e.string(r.destinationEntityName)
            e.bool(r.isToMany)
            e.bool(r.isOrdered)
            e.optional(r.versionHashModifier)
        }
        return Data(SHA256.hash(e.bytes))
    }
}

extension ManagedObjectModel {
    /// Each entity's ``EntityDescription/versionHash`` by entity name
    /// (`entityVersionHashesByName`) — what a store records to recognise its model.
    ///
    /// ```swift
    /// model.entityVersionHashesByName["Run"]
    /// ```
    public var entityVersionHashesByName: [String: Data] {
        if cachedEntityVersionHashes.isEmpty, !entitiesByName.isEmpty {
            return entitiesByName.mapValues(\.versionHash)
        }
        return cachedEntityVersionHashes
    }

    /// The SHA-256 over the entity names and version hashes, sorted by name: one value that
    /// identifies the model's persisted shape.
    ///
    /// Strata-specific (Core Data compares the per-entity dictionary); the event log names
    /// the model version of every transaction with it.
    ///
    /// ```swift
    /// model.versionHash.count  // 32
    /// ```
    public var versionHash: Data {
        cachedVersionHash.isEmpty ? ManagedObjectModel.modelHash(entityVersionHashesByName) : cachedVersionHash
    }

    static func modelHash(_ entityHashes: [String: Data]) -> Data {
        var e = VersionHashEncoder()
        e.string("Strata.ModelVersionHash.1")
        let hashes = entityHashes.sorted { $0.key < $1.key }
        e.count(hashes.count)
        for (name, hash) in hashes {
            e.string(name)
            e.bytes += hash
        }
        return Data(SHA256.hash(e.bytes))
    }

    /// ``versionHash`` as 64 lower-case hexadecimal digits, for logs and tools.
    ///
    /// ```swift
    /// print(model.versionHashString)
    /// ```
    public var versionHashString: String { versionHash.map { String(format: "%02x", $0) }.joined() }

    /// The metadata key under which a store records its entities' version hashes
    /// (Core Data's `NSStoreModelVersionHashesKey`); the value is `[String: Data]`.
    public static let storeModelVersionHashesKey = "StoreModelVersionHashes"

    /// Whether a store whose entities have `hashes` can be opened with this model without
    /// migration: the same entity names with the same version hashes.
    ///
    /// ```swift
    /// model.isCompatible(withEntityVersionHashes: storedHashes)
    /// ```
    public func isCompatible(withEntityVersionHashes hashes: [String: Data]) -> Bool {
        hashes == entityVersionHashesByName
    }

    /// Whether store metadata records this model's version hashes under
    /// ``storeModelVersionHashesKey``.
    ///
    /// Corresponds to Core Data's `isConfiguration(withName:compatibleWithStoreMetadata:)`;
    /// Strata has no configurations, so only the default (nil) configuration is compatible.
    ///
    /// ```swift
    /// model.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata)
    /// ```
    public func isConfiguration(withName configuration: String? = nil, compatibleWithStoreMetadata metadata: [String: Any]) -> Bool {
        guard configuration == nil, let hashes = metadata[ManagedObjectModel.storeModelVersionHashesKey] as? [String: Data] else {
            return false
        }
        return isCompatible(withEntityVersionHashes: hashes)
    }
}
