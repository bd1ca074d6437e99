import Foundation
import StrataModel
import StrataStorage

// MARK: - Stored values a later model version fills or converts (spec 0004 §4.4)

extension EventLog {
    /// The attributes of the opening model whose stored values a migration may fill or
    /// convert, by entity: an ordinary stored attribute that an earlier stored model version lacks
    /// (when it has a default value or is mandatory), has with a value of another kind, or has
    /// optional where it is mandatory now. Empty when no earlier version is stored.
    func valueMigrationCandidates() throws -> [String: [AttributeDescription]] {
        // Only earlier versions: an earlier model opening a store a later one wrote leaves the
        // later values alone, for the later model.
        let others = try catalog.modelVersions.filter { $0 < modelVersion }.map { try catalog.schema(forModelVersion: $0).model }
        guard !others.isEmpty else { return [:] }
        var candidates: [String: [AttributeDescription]] = [:]
        for entity in model.entities {
            let attributes = entity.allAttributes.filter { attribute in
                guard attribute.isPersisted, !attribute.isDerived else { return false }
                return others.contains { other in
                    guard let before = other.entity(named: entity.name) else { return false }
                    guard let was = before.attributesByName[attribute.name], was.isPersisted else {
                        return attribute.defaultValue != nil || !attribute.isOptional
                    }
                    return EventCodec.ValueKind(was.attributeType) != EventCodec.ValueKind(attribute.attributeType)
                        || (was.isOptional && !attribute.isOptional)
                }
            }
            if !attributes.isEmpty { candidates[entity.name] = attributes }
        }
        return candidates
    }
}

extension TableWriter {
    /// The fills and conversions of `candidates` (``EventLog/valueMigrationCandidates()``)
    /// for every live object of their entities, planned, not applied: the changes by object,
    /// each with the record read (``applyPutBack(_:planned:_:sequence:)`` writes them, with
    /// the values put back, one update per object).
    ///
    /// For each object and attribute: a nil value of a mandatory attribute takes its default
    /// value, as does a nil value of an attribute the object's record version didn't have
    /// (under its name, or one it renames, matched as the put-back matches them); a value
    /// of another kind is converted to the attribute's type when that loses nothing
    /// (``AttributeValue/coerced(to:)``). Attributes a value is put back into (`settled`)
    /// are left to that.
    ///
    /// - Throws: ``LogError/migration(_:)`` naming the objects whose values can't be taken
    ///   over: a mandatory attribute without a default value, or a value that doesn't convert.
    func planStoredValues(
        _ candidates: [String: [AttributeDescription]], _ txn: borrowing LMDBTransaction,
        settled: [StoredObjectID: Set<String>] = [:]
    ) throws -> [StoredObjectID: PlannedUpdate] {
        var planned: [StoredObjectID: PlannedUpdate] = [:]
        var problems: [String] = []
        var problemCount = 0
        func problem(_ text: @autoclosure () -> String) {
            problemCount += 1
            if problems.count < 5 { problems.append(text()) }
        }
        // The earlier versions migrated to (stored and not marked refused, spec 0004 §4.3): each
        // took out the values of the attributes it lacks from every record written before it.
        var migrated: [Int] = []
        for version in catalog.modelVersions where version < modelVersion {
            if try txn.value(forKey: MetaKey.refusedModel(version), in: tables.meta) == nil { migrated.append(version) }
        }
        for (entityName, attributes) in candidates.sorted(by: { $0.key < $1.key }) {
            guard let entity = schema.entities[entityName], (try? entityCode(entityName)) != nil else { continue }
            /// Whether model version `version` has the attribute: under its name, or under one
            /// it renames (as the put-back matches them, whether or not a value was taken out).
            func has(_ attribute: AttributeDescription, inVersion version: Int) -> Bool {
                let versionSchema = try? schema(forModelVersion: version)
                let recorded = versionSchema?.model.entity(named: entityName)
                if recorded?.attributesByName[attribute.name]?.isPersisted == true { return true }
                guard let earlier = versionSchema?.entities[entityName], let described = schema.model.entity(named: entityName) else { return false }
                return earlier.properties.contains { old in
                    old.isAttribute && entity.propertiesByName[old.name] == nil
                        && renameTarget(
                            of: old.name, identifier: recorded?.propertiesByName[old.name]?.renamingIdentifier, earlier: earlier, later: described)
                            == attribute.name
                }
            }
            for (key, id, record) in try records(of: entityName, txn) {
                // A record a later model version wrote is left for it.
                guard record.modelVersion <= modelVersion else { continue }
                /// Whether the record's version had the attribute, and every version migrated to
                /// since has it too: one that lacked it took the value out (§4.5), so a nil is
                /// that removal's, not the app's (before, it was kept, where an object written
                /// after the removal got the default).
                func had(_ attribute: AttributeDescription) -> Bool {
                    has(attribute, inVersion: record.modelVersion)
                        && migrated.allSatisfy { $0 <= record.modelVersion || has(attribute, inVersion: $0) }
                }
                var propertyChanges: [PropertyChange] = []
                for attribute in attributes {
                    // A value put back under this name after (a renamed attribute's) settles it.
                    guard let property = entity.propertiesByName[attribute.name], settled[id]?.contains(attribute.name) != true else { continue }
                    let kind = entity.valueKinds[property.code]
                    let described = "\(entityName).\(attribute.name)"
                    let stored = record.values[attribute.name] ?? .null
                    switch stored {
                    case .null:
                        // A nil the app set, or one a renamed attribute had under its old name, is kept.
                        guard !attribute.isOptional || !had(attribute) else { continue }
                        guard let fallback = attribute.defaultValue.map({ LogValue.attribute($0.coerced(to: attribute.attributeType)) }) else {
                            if !attribute.isOptional {
                                problem("\(described) is mandatory and has no default value, but \(id) has no value for it")
                            }
                            continue
                        }
                        guard EventCodec.fits(fallback, kind) else {
                            problem("\(described)'s default value doesn't fit its type \(attribute.attributeType.name)")
                            continue
                        }
                        propertyChanges.append(.value(property: attribute.name, before: .null, after: fallback))
                    case .attribute(let value):
                        guard !EventCodec.fits(stored, kind) else { continue }
                        let converted = LogValue.attribute(value.coerced(to: attribute.attributeType))
                        guard EventCodec.fits(converted, kind) else {
                            problem("\(id) has \(described) = \(value.canonicalJSON) (\(value.typeName)), which doesn't convert to \(attribute.attributeType.name) without loss")
                            continue
                        }
                        propertyChanges.append(.value(property: attribute.name, before: stored, after: converted))
                    case .reference, .references:
                        problem("\(id) has a relationship's value under \(described), which the model version makes an attribute")
                    }
                }
                guard !propertyChanges.isEmpty, problemCount == 0 else { continue }
                planned[id] = PlannedUpdate(key: key, entity: entity, record: record, changes: propertyChanges)
            }
        }
        guard problemCount == 0 else {
            let more = problemCount > problems.count ? "; and \(problemCount - problems.count) more" : ""
            throw LogError.migration(
                "the stored values can't be taken over by model version \(modelVersion): \(problems.joined(separator: "; "))\(more). Nothing was written; give the attribute a default value, keep it optional, or keep its type")
        }
        return planned
    }
}

/// An object's changes planned by ``TableWriter/planStoredValues(_:_:settled:)``.
struct PlannedUpdate {
    let key: ObjectKey
    let entity: ModelSchema.Entity
    /// The record as read when planning (nothing writes it before the put-back).
    let record: Record
    var changes: [PropertyChange]
}
