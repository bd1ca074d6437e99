import Foundation
import StrataModel
import StrataStorage

// MARK: - Derived attributes at commit (spec 0006 §24)

/// A model's derived attributes, as the log computes them: their plans in dependency order
/// and, for each entity, which of its attributes are derived.
struct DerivationSchema: Sendable {
    /// Every derived attribute's plan; one that reads another derived attribute comes after it.
    let plans: [DerivationPlan]
    /// Derivations that can't be resolved (a model that skipped checking), as messages:
    /// a commit is refused while there are any.
    let problems: [String]
    /// For each entity, its derived attributes (declared or inherited) with their derivation.
    let derivedByEntity: [String: [String: String]]
    /// For each entity, itself and its ancestors: the entities an object of it is a kind of.
    let kinds: [String: Set<String>]

    /// The schema of `model`'s derived attributes; nil when it has none.
    init?(model: ManagedObjectModel) {
        guard model.entities.contains(where: { $0.attributes.contains(where: \.isDerived) }) else { return nil }
        let (plans, problems) = model.derivationPlans()
        self.plans = plans
        self.problems = problems.map { "\($0.entity).\($0.attribute): \($0.message)" }
        var derived: [String: [String: String]] = [:]
        var kinds: [String: Set<String>] = [:]
        for entity in model.entities {
            kinds[entity.name] = Set([entity.name] + entity.superentityNames)
            for attribute in entity.allAttributes where attribute.isDerived {
                derived[entity.name, default: [:]][attribute.name] = attribute.derivationExpression?.format ?? ""
            }
        }
        derivedByEntity = derived
        self.kinds = kinds
    }

    /// Whether an object of `entity` is an object of `kind` (the entity or a sub-entity of it).
    func isKind(_ entity: String, of kind: String) -> Bool {
        kinds[entity]?.contains(kind) ?? false
    }
}

extension TableWriter {
    /// Where the members' side of a plan kept incrementally (``DerivationPlan/isKeptIncrementally``)
    /// records the relationship: the to-one inverse's name, when the plan's to-many step is
    /// the side the log derives from it (one-to-many, the usual case); nil otherwise (the
    /// value is computed from every member).
    private func keptInverse(_ plan: DerivationPlan) -> String? {
        guard let step = plan.steps.first,
            case .derived(let inverseEntity, let inverse)? = schema.entities[plan.entity]?.propertiesByName[step.relationship]?.relationship,
            case .toOne? = schema.entities[inverseEntity]?.propertiesByName[inverse]?.relationship
        else { return nil }
        // A sum of a derived attribute of the members: its old values aren't in the changes
        // (this commit computed them), so the sum is computed from every member.
        if let source = plan.source,
            schema.entities[step.destination]?.selfAndSubentities.contains(where: { schema.derivations?.derivedByEntity[$0]?[source] != nil }) ?? true
        {
            return nil
        }
        return inverse
    }

    /// What a commit changed about one object, for deciding which derived values to compute.
    private struct Touch {
        /// The commit inserted the object.
        var inserted = false
        /// The properties the commit's changes set (derived ones apart).
        var properties: Set<String> = []
        /// The derived attributes computed for it so far.
        var derived: Set<String> = []
        /// A relationship change elsewhere named the object (before or after): one of its
        /// relationships, on the side the log derives, may have changed.
        var referenced = false

        /// Whether the change can alter a value computed from property `input` (nil: none).
        func affects(_ input: String?, isRelationship: Bool) -> Bool {
            if inserted { return true }
            guard let input else { return false }
            return properties.contains(input) || derived.contains(input) || (referenced && isRelationship)
        }
    }

    /// Computes the derived attributes the changes of `groups` (already applied in `txn`)
    /// may have changed, writes the new values into the state, indexes and history as the
    /// commit's own updates do, and returns them as update changes for the event.
    ///
    /// The objects computed are those of an entity with derived attributes that the commit
    /// inserted or whose derivation inputs it changed — found by walking each plan's key path
    /// back from every changed object (a department's `employees.@count` when an employee
    /// is inserted, deleted or moves, an employee's `department.name` when the department is
    /// renamed). `now()` is recomputed for the objects the commit itself inserted or updated.
    ///
    /// `recomputing` names plans (`Entity.attribute`) computed for **every** object of their
    /// entity — a model version that adds or changes them (``EventLog/migrateIfNeeded()``);
    /// the derived attributes that read theirs follow.
    ///
    /// - Throws: ``LogError/derivation(_:)`` when a value doesn't fit its attribute's type or
    ///   the model has derivations that can't be resolved; what reading and writing throw.
    func applyDerivations(
        _ derivations: DerivationSchema, after groups: [ChangeGroup], _ txn: borrowing LMDBTransaction, sequence: UInt64,
        timestamp: Date, recomputing: Set<String> = [],
        recordUniqueKeys: (ObjectKey, [String: LogValue], ModelSchema.Entity) throws -> Void
    ) throws -> [Change] {
        if let problem = derivations.problems.first { throw LogError.derivation(problem) }

        // What each change touched: the object itself, and every object a relationship
        // value before or after it names.
        var touched: [StoredObjectID: Touch] = [:]
        var deleted: Set<StoredObjectID> = []
        /// Each changed object's values before the transaction, as far as its changes tell
        /// them (for aggregates kept from their stored value).
        var starts: [StoredObjectID: Start] = [:]
        func reference(_ value: LogValue) {
            switch value {
            case .reference(let id): touched[id, default: Touch()].referenced = true
            case .references(let ids): for id in ids { touched[id, default: Touch()].referenced = true }
            default: break
            }
        }
        for group in groups {
            for change in group.changes {
                starts[change.objectID, default: Start(absent: { if case .insert = change { return true } else { return false } }())].note(change)
                switch change {
                case .insert(let id, let values):
                    touched[id, default: Touch()].inserted = true
                    deleted.remove(id)
                    for value in values.values { reference(value) }
                case .update(let id, let changes):
                    for propertyChange in changes {
                        touched[id, default: Touch()].properties.insert(propertyChange.property)
                        switch propertyChange {
                        case .value(_, let before, let after):
                            reference(before)
                            reference(after)
                        case .membership(_, let added, let removed):
                            for other in added + removed { touched[other, default: Touch()].referenced = true }
                        }
                    }
                case .delete(let id, let before):
                    deleted.insert(id)
                    for value in before.values { reference(value) }
                }
            }
        }

        // Reading the state as it is now, with the changes (and the derived values computed
        // so far) applied.
        func record(_ id: StoredObjectID) throws -> Record? {
            try readRecord(txn, try key(id), entityName: id.entity)
        }
        func attribute(_ name: String, _ id: StoredObjectID) throws -> AttributeValue? {
            if case .attribute(let value)? = try record(id)?.values[name] { return value }
            return nil
        }
        /// The destinations of relationship `name` of the object `id` (its entity's property).
        func related(_ name: String, _ id: StoredObjectID) throws -> [StoredObjectID] {
            guard let property = schema.entities[id.entity]?.propertiesByName[name], let storage = property.relationship else { return [] }
            let keys: [ObjectKey]
            switch storage {
            case .toOne, .orderedToMany:
                return try record(id).map { try targets(of: $0.values[name]).map { (k) throws(LogError) in try self.id(k) } } ?? []
            case .unorderedToMany:
                keys = try members(txn, of: try key(id), relationship: try relationshipCode(property.qualifiedName))
            case .derived(let inverseEntity, let inverse):
                keys = try referrers(txn, of: try key(id), relationship: try relationshipCode("\(inverseEntity).\(inverse)"))
            }
            return try keys.map { (k) throws(LogError) in try self.id(k) }.sorted()
        }
        /// The objects whose relationship `step` leads to `id`.
        func sources(_ step: DerivationPlan.Step, _ id: StoredObjectID) throws -> [StoredObjectID] {
            guard let property = schema.entities[step.source]?.propertiesByName[step.relationship], let storage = property.relationship else {
                return []
            }
            switch storage {
            case .derived(_, let inverse):
                return try related(inverse, id)
            case .toOne, .orderedToMany, .unorderedToMany:
                let keys = try referrers(txn, of: try key(id), relationship: try relationshipCode(property.qualifiedName))
                return try keys.map { (k) throws(LogError) in try self.id(k) }
            }
        }

        var updates: [StoredObjectID: [PropertyChange]] = [:]
        var order: [StoredObjectID] = []
        for plan in derivations.plans {
            let levels = plan.levels
            // The objects of the plan's entity whose value may have changed.
            var candidates: Set<StoredObjectID> = []
            if recomputing.contains(plan.qualifiedName) {
                for name in schema.entities[plan.entity]?.selfAndSubentities ?? [] {
                    let code = try entityCode(name)
                    try txn.forEach(in: tables.state, range: .prefix([UInt8(code >> 8), UInt8(truncatingIfNeeded: code)])) { key, _ in
                        if let objectKey = key.withUnsafeBytes({ ObjectKey($0) }) {
                            candidates.insert(StoredObjectID(entity: name, primaryKey: objectKey.primaryKey))
                        }
                        return .next
                    }
                }
            }
            for (id, touch) in touched where !deleted.contains(id) {
                for level in levels.indices where derivations.isKind(id.entity, of: levels[level]) {
                    if plan.isNow {
                        // The object's own insert or update (a derived value alone is none).
                        if touch.inserted || !touch.properties.isEmpty { candidates.insert(id) }
                        continue
                    }
                    guard touch.affects(plan.input(atLevel: level), isRelationship: level < plan.steps.count) else { continue }
                    var reached = [id]
                    for step in plan.steps[..<level].reversed() {
                        var previous: [StoredObjectID] = []
                        for object in reached { previous += try sources(step, object) }
                        reached = previous
                        if reached.isEmpty { break }
                    }
                    for object in reached where derivations.isKind(object.entity, of: plan.entity) { candidates.insert(object) }
                }
            }
            // A @count or @sum over a one-to-many relationship is kept from its stored value:
            // what the members that joined or left (or changed the value summed) add and take
            // away, instead of every member read again — one small save into a department
            // of 10,000 employees reads the employees it changed, not 10,000.
            var kept: [StoredObjectID: (added: [AttributeValue?], removed: [AttributeValue?])] = [:]
            let inverse = plan.isKeptIncrementally && !recomputing.contains(plan.qualifiedName) ? keptInverse(plan) : nil
            if let inverse {
                let source = plan.source
                for (member, start) in starts where derivations.isKind(member.entity, of: plan.steps[0].destination) {
                    let now = try record(member)?.values
                    func before(_ name: String) -> LogValue? { start.absent ? nil : start.value(name, now: now) }
                    func owner(_ value: LogValue?) -> StoredObjectID? {
                        if case .reference(let id)? = value { return id }
                        return nil
                    }
                    func summed(_ value: LogValue?) -> AttributeValue? {
                        if case .attribute(let v)? = value { return v }
                        return nil
                    }
                    let (ownerBefore, ownerAfter) = (owner(before(inverse)), owner(now?[inverse]))
                    let (valueBefore, valueAfter) = (source.flatMap { summed(before($0)) }, source.flatMap { summed(now?[$0]) })
                    if ownerBefore == ownerAfter && valueBefore == valueAfter { continue }
                    if let ownerBefore, candidates.contains(ownerBefore) { kept[ownerBefore, default: ([], [])].removed.append(valueBefore) }
                    if let ownerAfter, candidates.contains(ownerAfter) { kept[ownerAfter, default: ([], [])].added.append(valueAfter) }
                }
            }
            for id in candidates.sorted() where !deleted.contains(id) {
                guard let current = try record(id), let entity = schema.entities[id.entity] else { continue }
                var computed: AttributeValue?
                do {
                    if inverse != nil, touched[id]?.inserted != true, case .attribute(let stored)? = current.values[plan.attribute],
                        let adjusted = try plan.adjusted(stored, added: kept[id]?.added ?? [], removed: kept[id]?.removed ?? [])
                    {
                        computed = adjusted
                    } else {
                        computed = try plan.value(of: id, now: timestamp, attribute: attribute, related: { step, object in try related(step.relationship, object) })
                    }
                } catch let overflow as DerivationOverflow {
                    throw LogError.derivation("\(overflow.description) (for \(id))")
                }
                let before = current.values[plan.attribute] ?? .null
                let after = computed.map { LogValue.attribute($0) } ?? .null
                guard !before.isIdentical(to: after) else { continue }
                let change = PropertyChange.value(property: plan.attribute, before: before, after: after)
                let values = try applyUpdate(txn, try key(id), changes: [change], sequence: sequence, entity: entity, current: current)
                if entity.hasUniqueIndex { try recordUniqueKeys(try key(id), values, entity) }
                if updates[id] == nil { order.append(id) }
                updates[id, default: []].append(change)
                touched[id, default: Touch()].derived.insert(plan.attribute)
            }
        }
        return order.map { id in
            Change.update(id, changes: (updates[id] ?? []).sorted { $0.property < $1.property })
        }
    }
}
