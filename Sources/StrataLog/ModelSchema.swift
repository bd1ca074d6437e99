public import StrataModel

/// What the log needs to know about one model version, derived once from the model:
/// each entity's stored properties and their codes, which side of each relationship is
/// recorded, and the indexes to maintain. (`Specs/0004-event-log.md` §4.)
struct ModelSchema: Sendable {
    /// How a relationship is stored.
    enum RelationshipStorage: Sendable, Hashable {
        /// The destination's ID lives in the object's record (to-one, recorded side).
        case toOne
        /// The ordered list of destinations lives in the record (ordered to-many, recorded side).
        case orderedToMany
        /// Membership rows in the `members` table (unordered to-many, recorded side).
        case unorderedToMany
        /// Derived from the inverse, which is recorded: `inverse` names it as "Entity.property".
        case derived(inverseEntity: String, inverse: String)
    }

    /// One stored property of an entity.
    struct Property: Sendable {
        let name: String
        /// The position in the entity's sorted list of stored properties: its code in events and records.
        let code: Int
        /// The entity that declares it (itself or a superentity), which names relationship rows and indexes.
        let declaringEntity: String
        /// The attribute type, for attributes.
        let attributeType: AttributeType?
        /// The relationship's storage, for relationships.
        let relationship: RelationshipStorage?
        /// For relationships: the destination entity.
        let destination: String?
        /// For relationships: whether to-many.
        let isToMany: Bool
        /// For a side of a many-to-many ordered on both sides (both recorded, spec 0004
        /// §4.1): its inverse as "Entity.property"; nil otherwise (a relationship that is its
        /// own inverse included).
        var orderedInverse: String?
        /// Whether this is the **paired side** of a many-to-many ordered on both sides: the
        /// side whose "Entity.property" sorts after its inverse's, which Strata derived before
        /// it recorded both (spec 0004 §4.1). A change to it makes an event format version 3.
        var isPairedSide: Bool { orderedInverse.map { qualifiedName > $0 } ?? false }

        var isAttribute: Bool { attributeType != nil }
        var isRecorded: Bool {
            if case .derived = relationship { return false }
            return true
        }
        /// "Entity.property" for relationships, naming the relationship in the catalog.
        var qualifiedName: String { "\(declaringEntity).\(name)" }
    }

    /// An index on one attribute, a uniqueness constraint, or a named index (a
    /// ``FetchIndexDescription``) over one or more properties.
    struct IndexDefinition: Sendable, Hashable {
        /// "Entity.attribute", "Entity#a,b" or "Entity[name]" (the catalog name).
        let name: String
        /// The declaring entity; its sub-entities' objects are in the index too.
        let entity: String
        let properties: [String]
        let isUnique: Bool
    }

    /// One entity's stored shape.
    /// A class, so the readers that keep one per record read hold a reference, not a copy.
    final class Entity: Sendable {
        let name: String
        let isAbstract: Bool
        /// Stored properties sorted by name; a property's code is its index here.
        let properties: [Property]
        let propertiesByName: [String: Property]
        /// The indexes this entity's objects belong to (declared on it or inherited).
        let indexes: [IndexDefinition]
        /// This entity and every entity below it.
        let selfAndSubentities: [String]
        /// The stored properties' names in code order (shared by every record read).
        let propertyNames: [String]

        /// The unordered to-many relationships among ``properties`` (their members live in
        /// the membership table, read with each record).
        let unorderedToMany: [Property]
        /// What a record may hold for each property, by code (``properties``' order):
        /// ``EventCodec/fits(_:_:)`` checks a decoded value against it without copying the
        /// property (which retained and released its strings for every value read).
        let valueKinds: [EventCodec.ValueKind]

        /// Whether any index the entity's objects are in is unique.
        var hasUniqueIndex: Bool { indexes.contains(where: \.isUnique) }

        init(
            name: String, isAbstract: Bool, properties: [Property], propertiesByName: [String: Property],
            indexes: [IndexDefinition], selfAndSubentities: [String], propertyNames: [String]
        ) {
            self.name = name
            self.isAbstract = isAbstract
            self.properties = properties
            self.propertiesByName = propertiesByName
            self.indexes = indexes
            self.selfAndSubentities = selfAndSubentities
            self.propertyNames = propertyNames
            unorderedToMany = properties.filter { $0.relationship == .unorderedToMany }
            valueKinds = properties.map(EventCodec.ValueKind.init)
        }
    }

    let model: ManagedObjectModel
    let entities: [String: Entity]
    let indexes: [IndexDefinition]
    /// Relationships whose storage is recorded, as "Entity.property" (catalog names).
    let recordedRelationships: [String]
    /// The model's derived attributes; nil when it has none (a commit then computes nothing).
    let derivations: DerivationSchema?
    /// Whether any entity has a paired side (``Property/isPairedSide``).
    let hasPairedSides: Bool
    /// Per entity (each sub-entity too): its recorded to-many relationships whose inverse is
    /// a to-many this version derives, with that side as "Entity.property". A later version
    /// that orders both sides records the side too (spec 0004 §4.1); a commit of this version
    /// that changes such a list marks the side to fill again
    /// (``EventLog/markSidesRecordedElsewhere(_:also:_:)``). Empty for most models: their
    /// commits then look at nothing more.
    let derivedToManyInverses: [String: [String: String]]
    /// The sides ``derivedToManyInverses`` names.
    let derivedToManyInverseSides: Set<String>

    init(model: ManagedObjectModel) {
        self.model = model
        var entities: [String: Entity] = [:]
        var allIndexes: [String: IndexDefinition] = [:]
        var recorded: Set<String> = []

        func declaring(_ property: String, of entity: EntityDescription) -> String {
            if entity.attributes.contains(where: { $0.name == property })
                || entity.relationships.contains(where: { $0.name == property })
            {
                return entity.name
            }
            for ancestor in entity.superentityNames {
                guard let e = model.entity(named: ancestor) else { continue }
                if e.attributes.contains(where: { $0.name == property })
                    || e.relationships.contains(where: { $0.name == property })
                {
                    return e.name
                }
            }
            return entity.name
        }

        for entity in model.entities {
            var stored: [Property] = []
            for attribute in entity.allAttributes where !attribute.isTransient {
                stored.append(
                    Property(
                        name: attribute.name, code: 0, declaringEntity: declaring(attribute.name, of: entity),
                        attributeType: attribute.attributeType, relationship: nil, destination: nil, isToMany: false))
            }
            for relationship in entity.allRelationships where !relationship.isTransient {
                let declarer = declaring(relationship.name, of: entity)
                let storage = Self.storage(of: relationship, declaredBy: declarer, in: model)
                stored.append(
                    Property(
                        name: relationship.name, code: 0, declaringEntity: declarer, attributeType: nil,
                        relationship: storage, destination: relationship.destinationEntityName,
                        isToMany: relationship.isToMany,
                        orderedInverse: Self.orderedInverse(of: relationship, declaredBy: declarer, in: model)))
                if case .derived = storage {} else { recorded.insert("\(declarer).\(relationship.name)") }
            }
            stored.sort { $0.name < $1.name }
            let coded = stored.enumerated().map { index, p in
                Property(
                    name: p.name, code: index, declaringEntity: p.declaringEntity, attributeType: p.attributeType,
                    relationship: p.relationship, destination: p.destination, isToMany: p.isToMany,
                    orderedInverse: p.orderedInverse)
            }

            // Indexes declared on this entity or its ancestors.
            var entityIndexes: [IndexDefinition] = []
            for owner in [entity.name] + entity.superentityNames {
                guard let e = model.entity(named: owner) else { continue }
                for attribute in e.attributes where attribute.isIndexed && !attribute.isTransient {
                    entityIndexes.append(
                        IndexDefinition(
                            name: "\(owner).\(attribute.name)", entity: owner, properties: [attribute.name],
                            isUnique: false))
                }
                for constraint in e.uniquenessConstraints where !constraint.isEmpty {
                    entityIndexes.append(
                        IndexDefinition(
                            name: "\(owner)#\(constraint.joined(separator: ","))", entity: owner,
                            properties: constraint, isUnique: true))
                }
                for index in e.indexes where !index.elements.isEmpty {
                    entityIndexes.append(
                        IndexDefinition(name: "\(owner)[\(index.name)]", entity: owner, properties: index.propertyNames, isUnique: false))
                }
            }
            for index in entityIndexes { allIndexes[index.name] = index }

            entities[entity.name] = Entity(
                name: entity.name, isAbstract: entity.isAbstract, properties: coded,
                propertiesByName: Dictionary(coded.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a }),
                indexes: entityIndexes, selfAndSubentities: model.selfAndSubentityNames(of: entity.name),
                propertyNames: coded.map(\.name))
        }
        self.entities = entities
        self.indexes = allIndexes.values.sorted { $0.name < $1.name }
        self.recordedRelationships = recorded.sorted()
        derivations = DerivationSchema(model: model)
        hasPairedSides = entities.values.contains { $0.properties.contains(where: \.isPairedSide) }
        var inverses: [String: [String: String]] = [:]
        for entity in entities.values {
            for property in entity.properties where property.isToMany && property.declaringEntity == entity.name {
                guard case .derived(let inverseEntity, let inverse)? = property.relationship,
                    let source = entities[inverseEntity], source.propertiesByName[inverse]?.isToMany == true
                else { continue }
                for kind in source.selfAndSubentities { inverses[kind, default: [:]][inverse] = property.qualifiedName }
            }
        }
        derivedToManyInverses = inverses
        derivedToManyInverseSides = Set(inverses.values.flatMap(\.values))
    }

    /// Which side of a relationship the log records (`Specs/0004-event-log.md` §4.1):
    /// both sides of a many-to-many ordered on both sides (each keeps its own order); else
    /// an ordered to-many side; else the to-one side of a one-to-many; else, for one-to-one
    /// and many-to-many, the side whose "Entity.property" sorts first; a relationship
    /// without an inverse records itself.
    static func storage(
        of relationship: RelationshipDescription, declaredBy declarer: String, in model: ManagedObjectModel
    ) -> RelationshipStorage {
        let own: RelationshipStorage =
            relationship.isToMany ? (relationship.isOrdered ? .orderedToMany : .unorderedToMany) : .toOne
        guard let found = storedInverse(of: relationship, in: model) else { return own }
        let (inverse, inverseDeclarer) = found
        let derived = RelationshipStorage.derived(inverseEntity: inverseDeclarer, inverse: inverse.name)
        let selfOrdered = relationship.isToMany && relationship.isOrdered
        let inverseOrdered = inverse.isToMany && inverse.isOrdered
        if selfOrdered && inverseOrdered { return own }
        if selfOrdered != inverseOrdered { return selfOrdered ? own : derived }
        if relationship.isToMany != inverse.isToMany { return relationship.isToMany ? derived : own }
        return "\(declarer).\(relationship.name)" <= "\(inverseDeclarer).\(inverse.name)" ? own : derived
    }

    /// For a side of a many-to-many ordered on both sides (see ``Property/orderedInverse``):
    /// its inverse as "Entity.property"; nil for any other relationship, and for one that is
    /// its own inverse.
    static func orderedInverse(
        of relationship: RelationshipDescription, declaredBy declarer: String, in model: ManagedObjectModel
    ) -> String? {
        guard relationship.isToMany, relationship.isOrdered, !relationship.isTransient,
            let found = storedInverse(of: relationship, in: model), found.0.isToMany, found.0.isOrdered
        else { return nil }
        let inverse = "\(found.1).\(found.0.name)"
        return inverse == "\(declarer).\(relationship.name)" ? nil : inverse
    }

    /// The stored inverse of `relationship` and the entity declaring it (the destination or
    /// one of its ancestors); nil without one, or when it is transient.
    private static func storedInverse(
        of relationship: RelationshipDescription, in model: ManagedObjectModel
    ) -> (RelationshipDescription, String)? {
        guard let inverseName = relationship.inverseName,
            let destination = model.entity(named: relationship.destinationEntityName),
            let inverse = destination.relationshipsByName[inverseName], !inverse.isTransient
        else { return nil }
        var inverseDeclarer = destination.name
        if !destination.relationships.contains(where: { $0.name == inverseName }) {
            for ancestor in destination.superentityNames
            where model.entity(named: ancestor)?.relationships.contains(where: { $0.name == inverseName }) == true {
                inverseDeclarer = ancestor
                break
            }
        }
        return (inverse, inverseDeclarer)
    }

    func entity(_ name: String) throws(LogError) -> Entity {
        guard let entity = entities[name] else { throw .unknownEntity(name) }
        return entity
    }

    /// The two ends of a paired side a fill derives: `side`'s entity (the target), whose
    /// list holds the objects of the source entity whose `orderedInverse` lists hold it.
    struct PairedSide {
        /// The entity whose objects' lists are read.
        let source: Entity
        /// `side`'s entity.
        let target: Entity
        /// The source's property holding the lists.
        let inverseName: String
        /// The source and its sub-entities.
        var sourceKinds: Set<String> { Set(source.selfAndSubentities) }
        /// The target and its sub-entities.
        var targetKinds: Set<String> { Set(target.selfAndSubentities) }
    }

    /// `side`'s ends; nil for a side without an ordered inverse, or whose entities this
    /// version doesn't have.
    func pairedSide(_ side: Property) -> PairedSide? {
        guard let inverse = side.orderedInverse, let dot = inverse.firstIndex(of: "."),
            let target = entities[side.declaringEntity], let source = entities[String(inverse[..<dot])]
        else { return nil }
        return PairedSide(source: source, target: target, inverseName: String(inverse[inverse.index(after: dot)...]))
    }
}

/// Which side of a relationship the log records (spec 0004 §4.1), for layers above the log
/// that must agree with it — the context writes only recorded sides to the store.
public enum RecordedSide {
    /// Whether `relationship`, declared on or inherited by `entity`, is the side the log
    /// records (false for the derived side of an inverse pair and for transient relationships).
    public static func isRecorded(
        _ relationship: RelationshipDescription, of entity: EntityDescription, in model: ManagedObjectModel
    ) -> Bool {
        guard !relationship.isTransient else { return false }
        var declarer = entity.name
        if !entity.relationships.contains(where: { $0.name == relationship.name }) {
            for ancestor in entity.superentityNames
            where model.entity(named: ancestor)?.relationships.contains(where: { $0.name == relationship.name }) == true {
                declarer = ancestor
                break
            }
        }
        if case .derived = ModelSchema.storage(of: relationship, declaredBy: declarer, in: model) { return false }
        return true
    }
}
