import Foundation
import Strata

/// Objects named in `--where`: a format string has no literal for an object, so `strata
/// query` reads a string compared with a relationship (or `SELF`) as an object reference —
/// `team == "Team/p3"`, `SELF IN {"Player/p1", "Player/p4"}`, `tags CONTAINS "Tag/p2"`,
/// `team == "x-strata://<store UUID>/Team/p3"` — the forms `--explain`, `strata log` and the
/// printed objects use (spec 0007, `query`).
enum QueryObjectReferences {
    /// What went wrong, for the command to name `--where` with.
    struct Problem: Error, CustomStringConvertible {
        let description: String
    }

    /// `node` with every string compared with a relationship key path or `SELF` replaced by
    /// the object it names, for a fetch of `entity`; in a `SUBQUERY` over a relationship,
    /// the same for its variable (`$p == "Player/p5"`, `$p.team == "Team/p1"`), which
    /// stands for the relationship's objects (`variables`: each variable's entity).
    ///
    /// - Throws: ``Problem`` for a string that is no object reference of this store (the
    ///   forms `Entity/pN` and `x-strata://<store UUID>/Entity/pN`), or that names an entity
    ///   the model lacks.
    static func resolve(
        _ node: PredicateNode, entity: EntityDescription, model: ManagedObjectModel, coordinator: PersistentStoreCoordinator,
        variables: [String: EntityDescription] = [:]
    ) throws -> PredicateNode {
        switch node {
        case .comparison(let comparison):
            let left = try subqueries(in: comparison.leftExpression, entity, model, coordinator, variables)
            let right = try subqueries(in: comparison.rightExpression, entity, model, coordinator, variables)
            var newLeft = left, newRight = right
            if endsAtObject(left, entity, model, variables) { newRight = try objects(in: right, coordinator) }
            if endsAtObject(right, entity, model, variables) { newLeft = try objects(in: left, coordinator) }
            guard newLeft != comparison.leftExpression || newRight != comparison.rightExpression else { return node }
            return .comparison(
                ComparisonPredicate(newLeft, comparison.operatorType, newRight, modifier: comparison.modifier, options: comparison.options))
        case .and(let children):
            return .and(try children.map { try resolve($0, entity: entity, model: model, coordinator: coordinator, variables: variables) })
        case .or(let children):
            return .or(try children.map { try resolve($0, entity: entity, model: model, coordinator: coordinator, variables: variables) })
        case .not(let child):
            return .not(try resolve(child, entity: entity, model: model, coordinator: coordinator, variables: variables))
        default:
            return node
        }
    }

    /// `expression` with the predicate of each `SUBQUERY` in it resolved, its variable
    /// standing for the objects of the relationship it ranges over (before, a string
    /// compared with the variable stayed a string, and the subquery matched nothing).
    static func subqueries(
        in expression: FormatExpression, _ entity: EntityDescription, _ model: ManagedObjectModel, _ coordinator: PersistentStoreCoordinator,
        _ variables: [String: EntityDescription]
    ) throws -> FormatExpression {
        switch expression {
        case .subquery(let collection, let variable, let predicate):
            let inner = try subqueries(in: collection, entity, model, coordinator, variables)
            var scope = variables
            // A variable over anything but objects (or shadowing one) stands for no entity.
            scope[variable] = destination(of: inner, entity, model, variables)
            let resolved = try resolve(predicate, entity: entity, model: model, coordinator: coordinator, variables: scope)
            return .subquery(collection: inner, variable: variable, predicate: resolved)
        case .keyPathOf(let inner, let path):
            return .keyPathOf(try subqueries(in: inner, entity, model, coordinator, variables), path)
        default:
            return expression
        }
    }

    /// Whether `expression` reads objects: `SELF`, a subquery's variable over objects, or a
    /// key path whose last key is a relationship (reached through relationships from
    /// `entity`, or from such a variable).
    static func endsAtObject(
        _ expression: FormatExpression, _ entity: EntityDescription, _ model: ManagedObjectModel, _ variables: [String: EntityDescription] = [:]
    ) -> Bool {
        switch expression {
        case .evaluatedObject: true
        case .variable(let name): variables[name] != nil
        default: destination(of: expression, entity, model, variables) != nil
        }
    }

    /// The entity of the objects a key path of relationships reads (from `entity`, or from
    /// a subquery's variable over objects); nil for anything else.
    static func destination(
        of expression: FormatExpression, _ entity: EntityDescription, _ model: ManagedObjectModel, _ variables: [String: EntityDescription]
    ) -> EntityDescription? {
        let start: EntityDescription?
        let path: FormatKeyPath
        switch expression {
        case .keyPath(let keyPath):
            start = entity
            path = keyPath
        case .keyPathOf(.variable(let name), let keyPath):
            start = variables[name]
            path = keyPath
        default:
            return nil
        }
        guard !path.components.isEmpty else { return nil }
        var current = start
        for component in path.components {
            guard case .key(let key) = component, let here = current, let relationship = here.relationshipsByName[key] else { return nil }
            current = model.entity(named: relationship.destinationEntityName)
        }
        return current
    }

    /// `expression` with its strings (alone, or in a collection) replaced by the objects they name.
    static func objects(in expression: FormatExpression, _ coordinator: PersistentStoreCoordinator) throws -> FormatExpression {
        switch expression {
        case .constant(let constant):
            return .constant(try objects(in: constant, coordinator))
        case .aggregate(let elements):
            return .aggregate(try elements.map { try objects(in: $0, coordinator) })
        default:
            return expression
        }
    }

    static func objects(in constant: PredicateConstant, _ coordinator: PersistentStoreCoordinator) throws -> PredicateConstant {
        switch constant {
        case .string(let text): return .object(PredicateIdentity(try objectID(text, coordinator)))
        case .aggregate(let elements): return .aggregate(try elements.map { try objects(in: $0, coordinator) })
        default: return constant
        }
    }

    /// The object `text` names: `Entity/pN`, or an object URI of the store.
    ///
    /// A string that can't name one says why: a key `p0` or with a leading zero (keys start
    /// at 1), an abstract entity (its objects are its sub-entities'), a temporary URI (an
    /// unsaved object's), another store's URI, a malformed URI, or an entity the model lacks
    /// (before, all but the first were "names no object of this store" with the entity list).
    static func objectID(_ text: String, _ coordinator: PersistentStoreCoordinator) throws -> ManagedObjectID {
        let usage = "write Entity/pN, as --explain and the printed URIs name objects, or the object's x-strata:// URI"
        guard let store = coordinator.persistentStores.first else { throw Problem(description: "no store is open") }
        let model = coordinator.managedObjectModel
        let uuid = store.identifier.uuidString
        let noObject = Problem(
            description: "\"\(text)\" names no object of this store (its entities: "
                + model.entities.filter { !$0.isAbstract }.map(\.name).sorted().joined(separator: ", ")
                + "; its UUID: \(uuid)): \(usage)")
        let uri: String
        let parts: [Substring]
        if text.hasPrefix("x-strata:") {
            uri = text
            parts = Array(text.dropFirst("x-strata://".count).split(separator: "/", omittingEmptySubsequences: false).dropFirst())
        } else {
            parts = text.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, parts[1].hasPrefix("p"), parts[1].count > 1, parts[1].dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw Problem(description: "\"\(text)\" is compared with objects but names none: \(usage)")
            }
            let entity = String(parts[0]).addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? String(parts[0])
            uri = "x-strata://\(uuid)/\(entity)/\(parts[1])"
        }
        guard let parsed = ObjectURI.parse(uri) else {
            if parts.count == 2, parts[1].hasPrefix("p"), parts[1].dropFirst().first == "0", parts[1].dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }) {
                let entity = String(parts[0]).removingPercentEncoding ?? String(parts[0])
                throw Problem(
                    description: "\"\(text)\" names no object: primary keys start at 1 and have no leading zeros (\(entity)/p1, \(entity)/p2, …)")
            }
            if text.hasPrefix("x-strata:") {
                throw Problem(description: "\"\(text)\" is not an object URI: write x-strata://STORE-UUID/Entity/pN (spec 0005), or Entity/pN")
            }
            throw Problem(description: "\"\(text)\" is compared with objects but names none: \(usage)")
        }
        switch parsed {
        case .temporary:
            throw Problem(
                description: "\"\(text)\" is a temporary object URI: an unsaved object's, which the store doesn't hold; name a saved object, Entity/pN")
        case .permanent(let storeUUID, let id):
            guard storeUUID == store.identifier else {
                throw Problem(
                    description: "\"\(text)\" names no object of this store: it is a URI of another store (\(storeUUID.uuidString)); this store's UUID is \(uuid)")
            }
            guard let entity = model.entity(named: id.entity) else { throw noObject }
            if entity.isAbstract {
                let concrete = model.entities.filter { !$0.isAbstract && $0.isKindOf(entity: entity) }.map(\.name).sorted()
                throw Problem(
                    description: "\"\(text)\" names no object: \(entity.name) is abstract, so its objects are objects of its sub-entities"
                        + (concrete.isEmpty ? "" : " (\(concrete.joined(separator: ", ")))") + "; name one of those, Entity/pN")
            }
            guard let url = URL(string: uri), let objectID = coordinator.managedObjectID(forURIRepresentation: url) else { throw noObject }
            return objectID
        }
    }
}
