public import StrataModel

/// One stored property of an entity as the log holds it: what tools without the app's code
/// (`strata export`, `strata log`) need to lay out objects.
///
/// ```swift
/// for property in try log.storedProperties(ofEntity: "Player") {
///     print(property.name, property.isAttribute ? "attribute" : "relationship")
/// }
/// ```
public struct StoredPropertyDescription: Sendable, Hashable {
    /// How the property is stored.
    public enum Kind: Sendable, Hashable {
        /// An attribute of `type`.
        case attribute(AttributeType)
        /// A relationship to `destination`. `isRecorded` says whether this side is the one the
        /// log records (`Specs/0004-event-log.md` §4.2); a derived side is read with
        /// ``LogReader/related(_:_:)`` and never appears in records or events.
        case relationship(destination: String, isToMany: Bool, isOrdered: Bool, isRecorded: Bool, inverse: String?)
    }

    /// The property's name.
    public let name: String
    /// Attribute or relationship, and how.
    public let kind: Kind

    /// Whether the property is an attribute.
    public var isAttribute: Bool {
        if case .attribute = kind { return true }
        return false
    }

    /// Whether the property's values appear in stored records and events: every attribute,
    /// and the recorded side of each relationship.
    public var isRecorded: Bool {
        switch kind {
        case .attribute: true
        case .relationship(_, _, _, let recorded, _): recorded
        }
    }
}

extension EventLog {
    /// The entities of the store's newest model that can have objects (not abstract), sorted
    /// by name.
    public var concreteEntityNames: [String] {
        schema.entities.values.filter { !$0.isAbstract }.map(\.name).sorted()
    }

    /// The stored (non-transient) properties of `entity` in the store's newest model, sorted
    /// by name: inherited ones included.
    ///
    /// - Throws: ``LogError/unknownEntity(_:)`` for an entity the model doesn't have.
    public func storedProperties(ofEntity entity: String) throws -> [StoredPropertyDescription] {
        try storedProperties(ofEntity: entity, in: schema)
    }

    /// The entities of stored model version `version` that can have objects, sorted by name.
    ///
    /// - Throws: ``LogError/malformed(_:)`` for a version the store doesn't hold.
    public func concreteEntityNames(modelVersion version: Int) throws -> [String] {
        try catalog.schema(forModelVersion: version).entities.values.filter { !$0.isAbstract }.map(\.name).sorted()
    }

    /// ``storedProperties(ofEntity:)`` in stored model version `version`: what a record of
    /// that version holds (a point in the log before a migration is in its terms).
    ///
    /// - Throws: ``LogError/unknownEntity(_:)`` for an entity that version doesn't have;
    ///   ``LogError/malformed(_:)`` for a version the store doesn't hold.
    public func storedProperties(ofEntity entity: String, modelVersion version: Int) throws -> [StoredPropertyDescription] {
        try storedProperties(ofEntity: entity, in: try catalog.schema(forModelVersion: version))
    }

    private func storedProperties(ofEntity entity: String, in schema: ModelSchema) throws -> [StoredPropertyDescription] {
        let described = try schema.entity(entity)
        let relationships = schema.model.entity(named: entity)?.relationshipsByName ?? [:]
        return described.properties.map { property in
            if let type = property.attributeType {
                return StoredPropertyDescription(name: property.name, kind: .attribute(type))
            }
            let relationship = relationships[property.name]
            return StoredPropertyDescription(
                name: property.name,
                kind: .relationship(
                    destination: property.destination ?? relationship?.destinationEntityName ?? "",
                    isToMany: property.isToMany, isOrdered: relationship?.isOrdered ?? false,
                    isRecorded: property.isRecorded, inverse: relationship?.inverseName))
        }
    }
}
