import Foundation
import StrataLog
import StrataModel
import StrataPredicate
import StrataStorage

// Batch requests (spec 0006 §20): one `import` transaction each, built from the store's
// state inside the commit's write transaction, never from managed objects.

extension ContextCore {
    // MARK: - Insert

    func executeBatchInsert(_ request: BatchInsertRequest) throws -> BatchResult {
        let info = try batchEntity(request.entityName)
        guard !info.isAbstract else {
            throw ContextError.invalidArgument("batch insert into \(info.entity.name): the entity is abstract; insert into one of its sub-entities")
        }
        let store = try self.store()
        var draft = TransactionDraft(author: transactionAuthor, contextName: name, kind: .import)
        var inserted: [DraftObjectID] = []
        // Every stored attribute with a default value gets it unless the object gives one.
        var defaults: [String: DraftValue] = [:]
        for property in info.defaultedProperties where !property.isTransient {
            if case .attribute = property.kind, let value = property.defaultValue { defaults[property.name] = .attribute(value) }
        }
        // With uniqueness constraints and a standard policy other than `error`, a row that
        // clashes becomes an update of the object holding its values (Core Data's upsert).
        let constraints = uniquenessConstraints(of: info)
        if !constraints.isEmpty, let policy = mergePolicy as? StandardMergePolicy, policy.type != .error {
            return try executeBatchUpsert(request, info: info, defaults: defaults, constraints: constraints, policy: policy.type, store: store)
        }
        // Temporary IDs only need to be distinct within the draft: one random UUID with the
        // object's number in its last eight bytes, not a fresh random UUID (a system call) each.
        let base = UUID().uuid
        func temporaryID(_ number: Int) -> UUID {
            var bytes = base
            withUnsafeMutableBytes(of: &bytes) { raw in
                for index in 0..<8 { raw[8 + index] = UInt8(truncatingIfNeeded: UInt64(number) >> (56 - 8 * UInt64(index))) }
            }
            return UUID(uuid: bytes)
        }
        func add(_ object: [String: any Sendable]) throws {
            let number = inserted.count + 1
            var values = defaults
            values.reserveCapacity(defaults.count + object.count)
            for (key, value) in object {
                values[key] = try batchAttributeValue(value, key, of: info, what: "batch insert into \(info.entity.name), object \(number)")
            }
            inserted.append(draft.insert(info.entity.name, id: temporaryID(number), values: values))
        }
        try forEachObject(of: request, add)
        guard !inserted.isEmpty else { return BatchResult(type: request.resultType, ids: [], sequence: nil) }
        // The upsert hint, for a clash on a constraint an upsert can merge on (not one over a
        // derived attribute: the store computes it, so no dictionary holds its value).
        let standard = mergePolicy is StandardMergePolicy
        let hint = { (violated: [String]) -> String in
            guard constraints.contains(where: { Set($0) == Set(violated) }) else { return "" }
            return standard
                ? " (to update the object holding the values instead, an upsert, set the context's mergePolicy to a policy other than .error)"
                : " (a batch insert upserts under the standard merge policies only, not a custom one)"
        }
        let result = try batchCommit("batch insert into \(info.entity.name)", uniquenessHint: hint) { store in try store.log.commit(draft) }
        guard let result else { return BatchResult(type: request.resultType, ids: [], sequence: nil) }
        // The event's inserts are the draft's, in order (spec 0004 §6.3): their IDs are the
        // permanent ones, read without a lookup per object.
        var stored: [StoredObjectID] = []
        stored.reserveCapacity(inserted.count)
        for change in result.event.changes { if case .insert(let id, _) = change { stored.append(id) } }
        if stored.count != inserted.count {
            stored = try inserted.map { object in
                guard let id = result.permanentID(for: object) else {
                    throw ContextError.store("batch insert into \(info.entity.name): the commit gave \(object) no permanent ID")
                }
                return id
            }
        }
        let ids = stored.map { ManagedObjectID.permanent($0, store: store.identifier) }
        return BatchResult(type: request.resultType, ids: ids, sequence: result.sequence)
    }

    /// Calls `body` with each dictionary of `request`: its array's, or the handler's until it
    /// returns true (that call's dictionary is not one).
    private func forEachObject(of request: BatchInsertRequest, _ body: ([String: any Sendable]) throws -> Void) throws {
        if let objects = request.objectsToInsert {
            for object in objects { try body(object) }
        } else if let handler = request.dictionaryHandler {
            while true {
                var object: [String: any Sendable] = [:]
                if try handler(&object) { break }
                try body(object)
            }
        }
    }

    // MARK: - Objects a handler filled

    /// The class of the objects of entity `name` (the one registered for it, else
    /// ``ManagedObject``), or ``ContextError/unknownEntity(_:)``.
    func objectClass(forEntityName name: String) throws -> ManagedObject.Type {
        coordinator.objectClass(for: try batchEntity(name))
    }

    /// The dictionary a batch insert takes for `object`, a new object of this (scratch)
    /// context that a managed-object handler filled: its stored attributes' values, except
    /// those still the model's default (the request applies the defaults anyway). A
    /// relationship set to an object, a value kept as invalid or a problem the setters
    /// recorded (an unknown key, a derived attribute set) refuses the request, naming `what`
    /// (the request and the object's position) — before anything is written.
    func batchInsertValues(of object: ManagedObject, what: String) throws -> [String: any Sendable] {
        var values: [String: any Sendable] = [:]
        values.reserveCapacity(object.changes.count)
        for name in object.changes.keys.sorted() {
            guard let value = object.changes[name], let property = object.info.properties[name], !property.isTransient else { continue }
            switch value {
            case .invalid(let text) where !property.isRelationship:
                throw ContextError.invalidArgument("\(what): \(name): \(text) is not a value of the attribute")
            case .toOne, .toMany, .invalid:
                // An empty relationship is what the store has anyway. One set to an object
                // (of the executing context, another to the scratch one: kept as invalid) is
                // refused as a relationship.
                guard !value.isNil else { continue }
                throw ContextError.invalidArgument(
                    "\(what): \(name) is a relationship; batch requests set attributes only, as Core Data's do (save relationships through a context)")
            case .attribute(let attribute):
                if let preset = property.defaultValue, attribute == preset { continue }
                // nil as a nil optional, which the request reads as nil (assigning the
                // optional itself would leave the key out, and the default in).
                if let attribute { values[name] = attribute } else { values[name] = AttributeValue?.none as any Sendable }
            }
        }
        if let problem = problems.first { throw ContextError.invalidArgument("\(what): \(problem)") }
        return values
    }

    // MARK: - Upsert

    /// The uniqueness constraints that apply to `info`'s objects and that an upsert can merge
    /// on: its own and its superentities', each of stored attributes a batch insert sets —
    /// no relationship (a batch insert sets none, so a constraint naming one never clashes)
    /// and no derived attribute (the store computes it after the rows are merged, so a clash
    /// on one is refused as under `.error`) — in declaration order.
    private func uniquenessConstraints(of info: EntityInfo) -> [[String]] {
        var result: [[String]] = []
        for owner in [info.entity.name] + info.entity.superentityNames {
            guard let declaring = model.entity(named: owner) else { continue }
            for constraint in declaring.uniquenessConstraints where !constraint.isEmpty && !result.contains(constraint) {
                guard constraint.allSatisfy({ declaring.attributesByName[$0].map { !$0.isDerived } ?? false }) else { continue }
                result.append(constraint)
            }
        }
        return result
    }

    /// One uniqueness key in a batch: a constraint (by position) and its values.
    private struct BatchUniqueKey: Hashable {
        let constraint: Int
        let values: [AttributeValue]
    }

    /// A batch insert on an entity with uniqueness constraints, under a standard merge
    /// policy other than `error` (spec 0006 §20.2): rows whose constrained values another
    /// object holds — stored, or made by an earlier row — are merged into that object by the
    /// policy's rule for a constraint clash (§17.3), the stored object's values first, then
    /// the rows in order. Everything is decided inside the commit's write transaction.
    private func executeBatchUpsert(
        _ request: BatchInsertRequest, info: EntityInfo, defaults: [String: DraftValue], constraints: [[String]],
        policy: StandardMergePolicy.PolicyType, store: PersistentStore
    ) throws -> BatchResult {
        let entityName = info.entity.name
        var rows: [[String: DraftValue]] = []
        func add(_ object: [String: any Sendable]) throws {
            var values = defaults
            for (key, value) in object {
                values[key] = try batchAttributeValue(value, key, of: info, what: "batch insert into \(entityName), object \(rows.count + 1)")
            }
            rows.append(values)
        }
        try forEachObject(of: request, add)
        guard !rows.isEmpty else { return BatchResult(type: request.resultType, ids: [], sequence: nil) }
        // Every stored attribute the batch may set, for `overwrite` (the last source's values,
        // nil included): derived ones are the store's to compute (spec 0006 §24.1).
        let attributes = info.entity.allAttributes.filter { !$0.isTransient && !$0.isDerived }.map(\.name)

        /// What a row became: a new object (by its position among the new ones) or a stored one.
        enum Target: Hashable {
            case new(Int)
            case stored(StoredObjectID)
        }
        var newValues: [[String: DraftValue]] = []
        var storedTargets: [StoredObjectID] = []
        var storedValues: [StoredObjectID: (before: [String: LogValue], after: [String: DraftValue])] = [:]
        var outcome: [Target] = []
        let what = "batch insert into \(entityName)"

        func keys(_ values: [String: DraftValue]) -> [BatchUniqueKey] {
            constraints.enumerated().compactMap { index, constraint in
                var held: [AttributeValue] = []
                for property in constraint {
                    guard case .attribute(let value)? = values[property] else { return nil }
                    held.append(value)
                }
                return BatchUniqueKey(constraint: index, values: held)
            }
        }
        /// `row` merged into `current` by the policy (`current` is the older source).
        func merged(_ current: [String: DraftValue], _ row: [String: DraftValue]) -> [String: DraftValue] {
            switch policy {
            case .mergeByPropertyObjectTrump:
                return current.merging(row.filter { $0.value != .null }) { _, later in later }
            case .mergeByPropertyStoreTrump:
                return current.merging(row.filter { $0.value != .null }) { earlier, later in earlier == .null ? later : earlier }
            case .overwrite:
                var result = current
                for name in attributes { result[name] = row[name] ?? .null }
                return result
            case .rollback, .error:
                return current
            }
        }

        let result = try batchCommit(what) { store in
            try store.log.commit(preparedBy: {
                newValues = []
                storedTargets = []
                storedValues = [:]
                outcome = []
                var owners: [BatchUniqueKey: Target] = [:]
                try store.log.read { (reader: borrowing LogReader) throws in
                    for (number, row) in rows.enumerated() {
                        var targets: Set<Target> = []
                        for key in keys(row) {
                            if let owner = owners[key] {
                                targets.insert(owner)
                                continue
                            }
                            let constraint = constraints[key.constraint]
                            let held = Dictionary(uniqueKeysWithValues: zip(constraint, key.values.map { LogValue.attribute($0) }))
                            for id in try reader.objects(holding: held, unique: constraint, of: entityName) {
                                targets.insert(.stored(id))
                            }
                        }
                        guard targets.count <= 1 else {
                            let names = targets.map { target -> String in
                                switch target {
                                case .new(let index): "object \(outcome.firstIndex(of: .new(index)).map { $0 + 1 } ?? 0) of the batch"
                                case .stored(let id): "\(id)"
                                }
                            }.sorted()
                            throw ContextError.storeRefused(
                                "\(what) was refused and nothing was written: object \(number + 1) has the constrained values of \(names.count) different objects (\(names.joined(separator: ", "))), which a merge can't make one")
                        }
                        let target: Target
                        switch targets.first {
                        case nil:
                            target = .new(newValues.count)
                            newValues.append(row)
                        case .new(let index)?:
                            target = .new(index)
                            newValues[index] = merged(newValues[index], row)
                        case .stored(let id)?:
                            target = .stored(id)
                            if storedValues[id] == nil {
                                guard let stored = try reader.object(id) else {
                                    throw ContextError.store("\(what): the uniqueness index names \(id), which the store doesn't hold; run strata verify")
                                }
                                guard let storedEntity = self.entities[id.entity], row.keys.allSatisfy({ storedEntity.properties[$0] != nil }) else {
                                    throw ContextError.storeRefused(
                                        "\(what) was refused and nothing was written: object \(number + 1) has the constrained values of \(id), an object of entity \(id.entity), which lacks some of its attributes")
                                }
                                var current: [String: DraftValue] = [:]
                                for (name, value) in stored.values where storedEntity.properties[name]?.isDerived != true {
                                    if case .attribute(let attribute) = value { current[name] = .attribute(attribute) }
                                }
                                storedValues[id] = (stored.values, current)
                                storedTargets.append(id)
                            }
                            if var entry = storedValues[id] {
                                entry.after = merged(entry.after, row)
                                storedValues[id] = entry
                            }
                        }
                        // Later rows find this object by its values now.
                        switch target {
                        case .new(let index): for key in keys(newValues[index]) { owners[key] = target }
                        case .stored(let id): for key in keys(storedValues[id]?.after ?? [:]) { owners[key] = target }
                        }
                        outcome.append(target)
                    }
                }
                var draft = TransactionDraft(author: self.transactionAuthor, contextName: self.name, kind: .import)
                var changed = false
                for id in storedTargets {
                    guard let entry = storedValues[id] else { continue }
                    var changes: [String: DraftValue] = [:]
                    for (name, value) in entry.after {
                        let before: DraftValue
                        if case .attribute(let attribute)? = entry.before[name] { before = .attribute(attribute) } else { before = .null }
                        if !Self.identical(value, before) { changes[name] = value }
                    }
                    if !changes.isEmpty {
                        draft.update(.stored(id), values: changes)
                        changed = true
                    }
                }
                for values in newValues {
                    draft.insert(entityName, values: values)
                    changed = true
                }
                return changed ? draft : nil
            })
        }
        // The new objects' permanent IDs are the event's inserts, in order.
        var newIDs: [StoredObjectID] = []
        if let result {
            for change in result.event.changes { if case .insert(let id, _) = change { newIDs.append(id) } }
        }
        var seen: Set<StoredObjectID> = []
        var ids: [ManagedObjectID] = []
        for target in outcome {
            let id: StoredObjectID
            switch target {
            case .new(let index):
                guard index < newIDs.count else { continue }
                id = newIDs[index]
            case .stored(let stored):
                id = stored
            }
            if seen.insert(id).inserted { ids.append(ManagedObjectID.permanent(id, store: store.identifier)) }
        }
        return BatchResult(type: request.resultType, ids: ids, sequence: result?.sequence)
    }

    // MARK: - Update

    func executeBatchUpdate(_ request: BatchUpdateRequest) throws -> BatchResult {
        let info = try batchEntity(request.entityName)
        let what = "batch update of \(info.entity.name)"
        guard !request.propertiesToUpdate.isEmpty else {
            throw ContextError.invalidArgument("\(what): propertiesToUpdate is empty; name at least one attribute and its new value")
        }
        var values: [String: DraftValue] = [:]
        // Expressions that read the object (`salary * 1.1`), evaluated per object against its
        // stored values; one that reads nothing of the object (`now()`, `2 + 3`) is a constant.
        var expressions: [(key: String, expression: FormatExpression)] = []
        for (key, value) in request.propertiesToUpdate.sorted(by: { $0.key < $1.key }) {
            if let expression = value as? FormatExpression {
                if try batchExpressionReadsObject(expression, key, of: info, what: what) {
                    _ = try batchAttributeValue(NSNull(), key, of: info, what: what)  // the key's own checks
                    expressions.append((key, expression))
                    continue
                }
                let constant: Any?
                do {
                    constant = try expression.expressionValue(with: nil)
                } catch {
                    throw ContextError.invalidArgument("\(what): \(key) = \(expression): \(error)")
                }
                values[key] = try batchAttributeValue(try Self.batchScalar(constant, "\(what): \(key) = \(expression)"), key, of: info, what: what)
                continue
            }
            values[key] = try batchAttributeValue(value, key, of: info, what: what)
        }
        var fetch = FetchRequest(entityName: request.entityName, predicate: request.predicate)
        fetch.includesSubentities = request.includesSubentities
        let selection = try batchSelection(fetch)
        let store = try self.store()
        var matched: [StoredObjectID] = []
        let result = try batchCommit(what) { store in
            try store.log.commit(preparedBy: {
                matched = try self.batchMatches(selection, store: store)
                guard !matched.isEmpty else { return nil }
                if !expressions.isEmpty {
                    return try self.batchUpdateDraft(matched, constants: values, expressions: expressions, of: info, what: what, store: store)
                }
                // Matched objects that all hold the values already: nothing to write (no
                // empty transaction in the log, its history and the merges).
                guard try self.batchUpdateChangesAny(matched, to: values, store: store) else { return nil }
                var draft = TransactionDraft(author: self.transactionAuthor, contextName: self.name, kind: .import)
                for id in matched { draft.update(.stored(id), values: values) }
                return draft
            })
        }
        let ids = matched.map { ManagedObjectID.permanent($0, store: store.identifier) }
        return BatchResult(type: request.resultType, ids: ids, sequence: result?.sequence)
    }

    /// The update of `ids` when some values are expressions: each object's expressions are
    /// evaluated against its values as stored before the update (so `a = b, b = a` swaps, as
    /// SQL's `UPDATE` does), the results converted as constant values are, the constants
    /// added. Nil when no object's values change (nothing is written). An expression that
    /// fails for an object, or gives a value the attribute can't hold, refuses the request,
    /// naming the object.
    private func batchUpdateDraft(
        _ ids: [StoredObjectID], constants: [String: DraftValue], expressions: [(key: String, expression: FormatExpression)],
        of info: EntityInfo, what: String, store: PersistentStore
    ) throws -> TransactionDraft? {
        let storeUUID = store.identifier
        return try store.log.read { (reader: borrowing LogReader) throws -> TransactionDraft? in
            var draft = TransactionDraft(author: self.transactionAuthor, contextName: self.name, kind: .import)
            var changesAny = false
            for id in ids {
                // Matched just now in this transaction: a missing object isn't possible, but is skipped.
                guard let stored = try reader.object(id) else { continue }
                var subject: [String: Any] = [:]
                for (name, value) in stored.values {
                    if case .attribute(let attribute) = value { subject[name] = StoredRowSubject.evaluationValue(attribute) }
                }
                var values = constants
                for (key, expression) in expressions {
                    let object = ManagedObjectID.permanent(id, store: storeUUID)
                    let result: Any?
                    do {
                        result = try expression.expressionValue(with: subject)
                    } catch {
                        throw ContextError.invalidArgument("\(what): \(key) = \(expression) failed for \(object): \(error)")
                    }
                    let gave = "\(what): \(key) = \(expression) for \(object) gave \(result.map { "\($0)" } ?? "nil")"
                    values[key] = try batchAttributeValue(try Self.batchScalar(result, gave), key, of: info, what: gave)
                }
                if !changesAny {
                    changesAny = values.contains { key, value in Self.batchValue(value, changes: stored[key]) }
                }
                draft.update(.stored(id), values: values)
            }
            return changesAny ? draft : nil
        }
    }

    /// An expression's result as the value an attribute is set to: nil as `NSNull()`; a
    /// collection or an object is no attribute value (`invalidArgument`, after `what`).
    private static func batchScalar(_ value: Any?, _ what: String) throws -> any Sendable {
        switch value {
        case nil: return NSNull()
        case let v as Int: return v
        case let v as Double: return v
        case let v as Decimal: return v
        case let v as String: return v
        case let v as Bool: return v
        case let v as Date: return v
        case let v as Data: return v
        case let v as UUID: return v
        case let v as URL: return v
        case let v?: throw ContextError.invalidArgument("\(what): \(type(of: v)) is not a value an attribute holds")
        }
    }

    /// Whether `expression`, the value of `key` in a batch update, reads the updated object:
    /// its key paths must name stored attributes of the entity (a batch update reads no
    /// relationship, as Core Data's runs as one SQL `UPDATE`); `SELF`, `$variables` and
    /// subqueries are refused, naming the key.
    private func batchExpressionReadsObject(_ expression: FormatExpression, _ key: String, of info: EntityInfo, what: String) throws -> Bool {
        func refuse(_ reason: String) -> ContextError {
            ContextError.invalidArgument("\(what): \(key) = \(expression): \(reason)")
        }
        var reads = false
        var work = [expression]
        while let next = work.popLast() {
            switch next {
            case .constant: break
            case .evaluatedObject:
                throw refuse("SELF has no value in a batch update; name the object's attributes")
            case .variable(let name):
                throw refuse("$\(name): a batch update takes no substitution variables; put the value in the expression")
            case .subquery:
                throw refuse("a batch update's expressions read the object's own attributes; a SUBQUERY reads a relationship")
            case .keyPath(let path):
                guard case .key(let name)? = path.components.first else {
                    throw refuse("\(path.string) reads no attribute of \(info.entity.name)")
                }
                guard let property = info.properties[name] else {
                    throw refuse("entity \(info.entity.name) has no attribute \"\(name)\"")
                }
                guard case .attribute = property.kind else {
                    throw refuse("\(name) is a relationship; a batch update's expressions read the object's own attributes, as Core Data's run as one SQL UPDATE")
                }
                guard !property.isTransient else {
                    throw refuse("\(name) is transient: the store holds no value for it")
                }
                reads = true
            case .aggregate(let elements): work.append(contentsOf: elements)
            case .keyPathOf(let base, _): work.append(base)
            case .index(let base, _): work.append(base)
            case .function(_, let arguments): work.append(contentsOf: arguments)
            case .arithmetic(_, let left, let right): work.append(contentsOf: [left, right])
            }
        }
        return reads
    }

    /// Whether two draft values are the same exactly: strings by their bytes, as every change
    /// test compares them (spec 0006 §4 item 4) — an upsert or batch update re-encoding "é"
    /// writes it (before, Swift's canonical `==` dropped it).
    static func identical(_ a: DraftValue, _ b: DraftValue) -> Bool {
        if case .attribute(let x) = a, case .attribute(let y) = b { return x.isIdentical(to: y) }
        return a == b
    }

    /// Whether setting a batch update's `value` changes the stored `current` one: strings
    /// compared by their bytes (``identical(_:_:)``).
    private static func batchValue(_ value: DraftValue, changes current: LogValue) -> Bool {
        switch value {
        case .null: current != .null
        case .attribute(let attribute): !current.isIdentical(to: .attribute(attribute))
        case .reference, .references: true
        }
    }

    /// Whether setting `values` changes one of `ids` at least, in the store as it stands:
    /// read until the first object that doesn't hold them all (the commit drops the values
    /// the others already hold), so only a request changing nothing reads every object.
    private func batchUpdateChangesAny(_ ids: [StoredObjectID], to values: [String: DraftValue], store: PersistentStore) throws -> Bool {
        try store.log.read { (reader: borrowing LogReader) throws -> Bool in
            for id in ids {
                guard let stored = try reader.object(id) else { continue }
                for (name, value) in values where Self.batchValue(value, changes: stored[name]) { return true }
            }
            return false
        }
    }

    // MARK: - Delete

    func executeBatchDelete(_ request: BatchDeleteRequest) throws -> BatchResult {
        let store = try self.store()
        let what: String
        let selection: FetchRequest<ManagedObject>?
        var given: [StoredObjectID] = []
        switch request.target {
        case .fetchRequest(let fetch):
            let info = try batchEntity(fetch.entityName)
            what = "batch delete of \(info.entity.name)"
            selection = try batchSelection(fetch)
        case .objectIDs(let ids):
            selection = nil
            guard let first = ids.first else { return BatchResult(type: request.resultType, ids: [], sequence: nil) }
            let info = try batchEntity(first.entityName)
            let family = Set(model.selfAndSubentityNames(of: info.entity.name))
            what = "batch delete of \(info.entity.name)"
            var seen: Set<StoredObjectID> = []
            for id in ids {
                guard case .permanent(let storeUUID, _) = id.storage, storeUUID == store.identifier, let stored = id.storedID else {
                    throw ContextError.invalidArgument(
                        "\(what): \(id) is \(id.isTemporaryID ? "a temporary ID (an unsaved object)" : "an object of another store"); batch requests change saved objects of this store")
                }
                guard family.contains(id.entityName) else {
                    throw ContextError.invalidArgument(
                        "\(what): \(id) is of entity \(id.entityName), not \(info.entity.name) or one of its sub-entities; a batch delete by IDs takes one entity, as Core Data's")
                }
                if seen.insert(stored).inserted { given.append(stored) }
            }
        }
        var deleted: [StoredObjectID] = []
        let result = try batchCommit(what) { store in
            try store.log.commit(preparedBy: {
                let roots = try selection.map { try self.batchMatches($0, store: store) } ?? given
                // The selection's matches were just read from the store: they exist.
                let (draft, all) = try self.batchDeletion(of: roots, existing: selection != nil, what: what, store: store)
                deleted = all
                return draft
            })
        }
        let ids = deleted.map { ManagedObjectID.permanent($0, store: store.identifier) }
        return BatchResult(type: request.resultType, ids: ids, sequence: result?.sequence)
    }

    /// The transaction deleting `roots` (those that exist) with the delete rules applied, in
    /// the store as it stands, and every object it deletes (roots first, then cascades, in
    /// the order reached); nil when nothing is deleted. `existing`: the roots were read from
    /// the store in this transaction, so they aren't looked up again.
    ///
    /// Cascade adds the destinations; deny refuses while a destination not deleted too
    /// remains; nullify removes each deleted object from a destination's inverse when the
    /// destination's side is the recorded one (a derived side follows by itself); no action
    /// does nothing, so a reference it leaves makes the log refuse the commit.
    private func batchDeletion(of roots: [StoredObjectID], existing: Bool, what: String, store: PersistentStore) throws
        -> (TransactionDraft?, [StoredObjectID])
    {
        try store.log.read { reader in
            var order: [StoredObjectID] = []
            var deleting: Set<StoredObjectID> = []
            for id in roots {
                guard try existing || reader.contains(id), deleting.insert(id).inserted else { continue }
                order.append(id)
            }
            var denied: [(source: StoredObjectID, property: String, targets: [StoredObjectID])] = []
            /// Per destination and inverse property: the deleted objects to remove from it.
            var nullified: [StoredObjectID: [String: [StoredObjectID]]] = [:]
            var next = 0
            while next < order.count {
                let id = order[next]
                next += 1
                guard let info = entities[id.entity] else { throw ContextError.unknownEntity(id.entity) }
                for property in info.relationshipProperties where !property.isTransient {
                    switch property.deleteRule {
                    case .cascade:
                        for target in try reader.related(id, property.name) where deleting.insert(target).inserted {
                            order.append(target)
                        }
                    case .deny:
                        let targets = try reader.related(id, property.name)
                        if !targets.isEmpty { denied.append((id, property.name, targets)) }
                    case .nullify:
                        // Only a recorded inverse holds a reference to drop (sub-entities
                        // inherit the inverse, recorded alike): a derived one needs no read.
                        guard let inverse = property.inverse, let destination = property.destination,
                            entities[destination]?.properties[inverse]?.isRecorded == true
                        else { continue }
                        for target in try reader.related(id, property.name) {
                            guard let recorded = entities[target.entity]?.properties[inverse], recorded.isRecorded else { continue }
                            nullified[target, default: [:]][inverse, default: []].append(id)
                        }
                    case .noAction:
                        continue
                    }
                }
            }
            for (source, property, targets) in denied {
                let remaining = targets.filter { !deleting.contains($0) }
                guard !remaining.isEmpty else { continue }
                throw ContextError.storeRefused(
                    "\(what): \(source).\(property) still holds \(remaining.count) object(s) (\(remaining.map(\.description).joined(separator: ", "))) that the request doesn't delete, and its delete rule is deny; nothing was deleted")
            }
            guard !order.isEmpty else { return (nil, []) }
            var draft = TransactionDraft(author: transactionAuthor, contextName: name, kind: .import)
            // Inverses first, then the deletes: undoing the event in reverse restores the
            // objects before the references to them.
            for target in nullified.keys.sorted() where !deleting.contains(target) {
                guard let info = entities[target.entity], let byProperty = nullified[target] else { continue }
                for inverse in byProperty.keys.sorted() {
                    guard let property = info.properties[inverse], let removed = byProperty[inverse] else { continue }
                    switch property.kind {
                    case .toOne:
                        draft.update(.stored(target), values: [inverse: .null])
                    case .toMany(ordered: false):
                        draft.changeMembers(of: .stored(target), inverse, removing: removed.map { .stored($0) })
                    case .toMany(ordered: true):
                        let gone = Set(removed)
                        let kept = try reader.related(target, inverse).filter { !gone.contains($0) }
                        draft.update(.stored(target), values: [inverse: .references(kept.map { .stored($0) })])
                    case .attribute:
                        continue
                    }
                }
            }
            for id in order { draft.delete(.stored(id)) }
            return (draft, order)
        }
    }

    // MARK: - Merging another save's IDs

    /// `mergeChanges(fromRemoteContextSave:into:)` for this context: registered objects
    /// deleted leave it, updated ones are re-read keeping unsaved changes. A context pinned
    /// to a query generation moves to the newest one first (spec 0006 §22.3), as a merge
    /// does: the IDs name changes the store has now, which its generation doesn't show (before,
    /// updated objects were re-read as of the old generation, unchanged, and a fetch brought
    /// the deleted ones back).
    func mergeRemoteChanges(inserted: Set<ManagedObjectID>, updated: Set<ManagedObjectID>, deleted: Set<ManagedObjectID>) {
        var summary = ChangeSummary(inserted: inserted, updated: updated, deleted: deleted)
        summary.normalize()
        if !summary.isEmpty { advanceGeneration(to: nil) }
        merge(summary, through: nil)
    }

    // MARK: - Shared steps

    /// The entity `name`'s properties, or ``ContextError/unknownEntity(_:)``.
    private func batchEntity(_ name: String) throws -> EntityInfo {
        guard let info = entities[name] else { throw ContextError.unknownEntity(name) }
        return info
    }

    /// The draft value of `value` for the stored attribute `key` of `info`.
    private func batchAttributeValue(_ value: any Sendable, _ key: String, of info: EntityInfo, what: String) throws -> DraftValue {
        guard let property = info.properties[key] else {
            throw ContextError.invalidArgument("\(what): entity \(info.entity.name) has no property \"\(key)\"")
        }
        guard case .attribute(let type) = property.kind else {
            throw ContextError.invalidArgument(
                "\(what): \(key) is a relationship; batch requests set attributes only, as Core Data's do (save relationships through a context)")
        }
        guard !property.isTransient else {
            throw ContextError.invalidArgument("\(what): \(key) is transient; batch requests write stored attributes only")
        }
        if let derivation = property.derivation {
            throw ContextError.invalidArgument(
                "\(what): \(key) is a derived attribute (derivation \(derivation)); the store computes its value at save, so a batch request can't set it")
        }
        // The attribute's usual Swift type first: one cast that succeeds (the general
        // conversion and the optional check below cost several per value).
        if let common = ManagedObject.commonAttributeValue(value, type) { return .attribute(common) }
        // A filled object's values (``batchInsertValues(of:what:)``) are the attribute's already.
        if let attribute = value as? AttributeValue, attribute.matches(type) { return .attribute(attribute) }
        guard let unwrapped = Self.batchUnwrapped(value) else { return .null }
        do {
            return .attribute(try AttributeValue(any: unwrapped, for: type))
        } catch {
            throw ContextError.invalidArgument("\(what): \(key): \(error.description)")
        }
    }

    /// `value` without optional wrapping; nil for `NSNull` or a nil optional.
    private static func batchUnwrapped(_ value: Any) -> Any? {
        if value is NSNull { return nil }
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .optional else { return value }
        guard let wrapped = mirror.children.first?.value else { return nil }
        return batchUnwrapped(wrapped)
    }

    /// `fetch` prepared and checked as a fetch is, reading the store as saved.
    private func batchSelection(_ fetch: FetchRequest<ManagedObject>) throws -> FetchRequest<ManagedObject> {
        var request = try prepared(fetch)
        request.includesPendingChanges = false
        request.resultType = .managedObjectID
        try validate(request)
        return request
    }

    /// The stored objects `request` selects now, in its order. Without a sort, offset, limit
    /// or filter closure, when every object of the entities matches or an index answers the
    /// whole predicate, only IDs are read (no record decoded); otherwise the fetch runs.
    private func batchMatches(_ request: FetchRequest<ManagedObject>, store: PersistentStore) throws -> [StoredObjectID] {
        // The selection reads the current state; a pinned context reads related objects as
        // of its generation, which a join's targets, found with this reader, wouldn't match.
        let planner = try self.planner(for: request, resolvesJoins: generation == nil)
        return try store.log.read { (reader: borrowing LogReader) throws -> [StoredObjectID] in
            let plan = try planner.plan(reader)
            let execution = FetchExecution(core: self, request: request, plan: plan, storeUUID: store.identifier, readsCurrentState: true)
            let plain = request.memoryFilter == nil && request.sortDescriptors.isEmpty && request.fetchOffset == 0 && request.fetchLimit == 0
            let everything = request.predicate == nil || request.predicate?.node == .constant(true)
            if plain && plan.kind == .fullScan && everything {
                var ids: [StoredObjectID] = []
                for (name, _) in execution.entities {
                    try reader.forEachObjectID(of: name, includingSubentities: false) { id in
                        ids.append(id)
                        return .next
                    }
                }
                return ids
            }
            if plain, case .indexScan(let scan) = plan.kind, plan.countsFromIndex {
                // In store order, as the fetch gives them: by entity (in the fetch's order), then key.
                var position: [String: Int] = [:]
                for (index, entry) in execution.entities.enumerated() { position[entry.name] = index }
                var ids: [StoredObjectID] = []
                try scan.forEachObject(reader, of: plan.entityName) { id in
                    if position[id.entity] != nil { ids.append(id) }
                    return .next
                }
                ids.sort { a, b in
                    let x = position[a.entity] ?? 0, y = position[b.entity] ?? 0
                    return x != y ? x < y : a.primaryKey < b.primaryKey
                }
                return ids
            }
            let (matches, order) = try execution.run(reader)
            return order.compactMap { matches[$0].id.storedID }
        }
    }

    /// Runs `commit`, turning the log's refusals into context errors naming the request, and
    /// tells automatically merging contexts (this one too: its objects didn't change) about
    /// the new transaction.
    private func batchCommit(
        _ what: String, uniquenessHint: ([String]) -> String = { _ in "" }, _ commit: (PersistentStore) throws -> CommitResult?
    ) throws -> CommitResult? {
        let result: CommitResult?
        do {
            // Given the store that took the store's place, when it moved meanwhile.
            result = try coordinator.writingToStore(commit)
        } catch let error as LogError {
            switch error {
            case .uniquenessViolation(_, let properties, _, _):
                throw ContextError.storeRefused("\(what) was refused and nothing was written: \(error.description)\(uniquenessHint(properties))")
            case .missingReference, .objectExists, .objectNotFound, .typeMismatch:
                throw ContextError.storeRefused("\(what) was refused and nothing was written: \(error.description)")
            default:
                throw ContextError.store("\(what) failed and nothing was written: \(error.description)", underlying: .log(error))
            }
        } catch let error as LMDBError {
            // The storage layer's refusal (a data file deleted while open, say), as a save's.
            throw ContextError.store("\(what) failed and nothing was written: \(error.description)", underlying: .lmdb(error))
        }
        if let result { coordinator.mergeHub.didCommit(through: result.sequence, source: nil) }
        return result
    }
}
