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
    /// the object it names, for a fetch of `entity`.
    ///
    /// - Throws: ``Problem`` for a string that is no object reference of this store (the
    ///   forms `Entity/pN` and `x-strata://<store UUID>/Entity/pN`), or that names an entity
    ///   the model lacks.
    static func resolve(_ node: PredicateNode, entity: EntityDescription, model: ManagedObjectModel, coordinator: PersistentStoreCoordinator)
        throws -> PredicateNode
    {
        switch node {
        case .comparison(let comparison):
            let left = comparison.leftExpression, right = comparison.rightExpression
            var newLeft = left, newRight = right
            if endsAtObject(left, entity, model) { newRight = try objects(in: right, coordinator) }
            if endsAtObject(right, entity, model) { newLeft = try objects(in: left, coordinator) }
            guard newLeft != left || newRight != right else { return node }
            return .comparison(
                ComparisonPredicate(newLeft, comparison.operatorType, newRight, modifier: comparison.modifier, options: comparison.options))
        case .and(let children):
            return .and(try children.map { try resolve($0, entity: entity, model: model, coordinator: coordinator) })
        case .or(let children):
            return .or(try children.map { try resolve($0, entity: entity, model: model, coordinator: coordinator) })
        case .not(let child):
            return .not(try resolve(child, entity: entity, model: model, coordinator: coordinator))
        default:
            return node
        }
    }

    /// Whether `expression` reads objects: `SELF`, or a key path whose last key is a
    /// relationship (reached through relationships from `entity`).
    static func endsAtObject(_ expression: FormatExpression, _ entity: EntityDescription, _ model: ManagedObjectModel) -> Bool {
        switch expression {
        case .evaluatedObject:
            return true
        case .keyPath(let path):
            var current: EntityDescription? = entity
            var isRelationship = false
            for component in path.components {
                guard case .key(let key) = component, let here = current, let relationship = here.relationshipsByName[key] else {
                    return false
                }
                current = model.entity(named: relationship.destinationEntityName)
                isRelationship = true
            }
            return isRelationship
        default:
            return false
        }
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
    static func objectID(_ text: String, _ coordinator: PersistentStoreCoordinator) throws -> ManagedObjectID {
        let usage = "write Entity/pN, as --explain and the printed URIs name objects, or the object's x-strata:// URI"
        guard let store = coordinator.persistentStores.first else { throw Problem(description: "no store is open") }
        let uri: String
        if text.hasPrefix("x-strata:") {
            uri = text
        } else {
            let parts = text.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, parts[1].hasPrefix("p"), UInt64(parts[1].dropFirst()) != nil else {
                throw Problem(description: "\"\(text)\" is compared with objects but names none: \(usage)")
            }
            let entity = String(parts[0]).addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? String(parts[0])
            uri = "x-strata://\(store.identifier.uuidString)/\(entity)/\(parts[1])"
        }
        guard let url = URL(string: uri), let id = coordinator.managedObjectID(forURIRepresentation: url) else {
            throw Problem(
                description: "\"\(text)\" names no object of this store (its entities: "
                    + coordinator.managedObjectModel.entities.filter { !$0.isAbstract }.map(\.name).sorted().joined(separator: ", ")
                    + "; its UUID: \(store.identifier.uuidString)): \(usage)")
        }
        return id
    }
}
