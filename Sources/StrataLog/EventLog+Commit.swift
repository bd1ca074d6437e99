import Foundation
import StrataModel
import StrataStorage

extension EventLog {
    /// Appends `draft` as one transaction: the event, the state, the indexes and the history
    /// change together in one LMDB write transaction, or not at all.
    ///
    /// Temporary objects get permanent IDs here, in the order the draft inserts them. The
    /// log computes every before-image from the state at commit time.
    ///
    /// - Throws: ``LogError`` — an unknown entity or property, a wrong value type, a change
    ///   to a missing object, a reference to a missing object (including one left dangling
    ///   by a delete), a uniqueness violation — and then nothing is written.
    @discardableResult
    public func commit(_ draft: TransactionDraft) throws -> CommitResult {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only") }
        let writer = TableWriter(tables: tables, catalog: catalog, schema: schema, modelVersion: modelVersion, shapes: entityShapes)
        let timestamp = try Self.timestamp(of: draft)
        let result = try environment.write { txn in
            try commit(draft, timestamp: timestamp, writer: writer, txn)
        }
        storeMonitor.publish(result.event.sequence)
        return result
    }

    /// Both sides of a many-to-many ordered on both sides are recorded (spec 0004 §4.1): a
    /// commit that adds a destination to one side's list must add the object to the
    /// destination's list of the other side, and one that removes it must remove it there —
    /// a context does (it maintains inverses); a draft written to the log directly that
    /// changes one side only is refused here, nothing written, rather than leave the two
    /// sides disagreeing for good. Checked on the state as the transaction leaves it, with
    /// the `referrers` rows of the other side. A deleted object's references are the
    /// dangling-reference check's.
    private func checkOrderedPairs(_ groups: [ChangeGroup], _ txn: borrowing LMDBTransaction, writer: TableWriter) throws {
        /// Per object and paired property: the list before the transaction and after it.
        var net: [StoredObjectID: [String: (before: [StoredObjectID], after: [StoredObjectID])]] = [:]
        func ids(_ value: LogValue?) -> [StoredObjectID] {
            if case .references(let list)? = value { return list }
            return []
        }
        func note(_ id: StoredObjectID, _ name: String, _ before: LogValue?, _ after: LogValue?) {
            guard schema.entities[id.entity]?.propertiesByName[name]?.orderedInverse != nil else { return }
            let first = net[id]?[name]?.before ?? ids(before)
            net[id, default: [:]][name] = (first, ids(after))
        }
        for group in groups {
            for change in group.changes {
                switch change {
                case .insert(let id, let values): for (name, value) in values { note(id, name, nil, value) }
                case .update(let id, let changes):
                    for case .value(let name, let before, let after) in changes { note(id, name, before, after) }
                case .delete: continue
                }
            }
        }
        for (id, properties) in net.sorted(by: { $0.key < $1.key }) {
            let source = try writer.key(id)
            guard try txn.containsKey(source.bytes, in: tables.state) else { continue }
            for (name, lists) in properties.sorted(by: { $0.key < $1.key }) {
                guard let inverse = schema.entities[id.entity]?.propertiesByName[name]?.orderedInverse,
                    let dot = inverse.lastIndex(of: ".")
                else { continue }
                let inverseName = String(inverse[inverse.index(after: dot)...])
                let code = try writer.relationshipCode(inverse)
                func holds(_ target: StoredObjectID) throws -> Bool {
                    var key = source.bytes
                    key += [UInt8(code >> 8), UInt8(truncatingIfNeeded: code)]
                    key += try writer.key(target).bytes
                    return try txn.containsKey(key, in: tables.referrers)
                }
                let before = Set(lists.before), after = Set(lists.after)
                for target in lists.after where !before.contains(target) {
                    if try holds(target) { continue }
                    throw LogError.invalidOperation(
                        "\(id).\(name) now holds \(target), but \(target).\(inverseName) doesn't hold \(id): both sides of a many-to-many ordered on both sides are recorded (spec 0004 §4.1), so a transaction that changes one must change the other")
                }
                for target in lists.before where !after.contains(target) {
                    guard try txn.containsKey(try writer.key(target).bytes, in: tables.state), try holds(target) else { continue }
                    throw LogError.invalidOperation(
                        "\(id).\(name) no longer holds \(target), but \(target).\(inverseName) still holds \(id): both sides of a many-to-many ordered on both sides are recorded (spec 0004 §4.1), so a transaction that changes one must change the other")
                }
            }
        }
    }

    /// Commits the draft `prepare` returns, calling `prepare` inside the LMDB write
    /// transaction: no writer, in this process or another, can commit between what `prepare`
    /// reads and this commit. A context that lost an optimistic-locking race checks its
    /// versions and resolves its conflicts this way, so it can't lose the race again (Core
    /// Data, too, checks versions with the store locked).
    ///
    /// `prepare` may read the store (its reads see the state this commit starts from) but must
    /// not write to it: a write from the same thread is refused as a nested write. It may run
    /// more than once (LMDB retries a write after growing the map). Returning nil commits
    /// nothing and returns nil.
    ///
    /// - Throws: what ``commit(_:)`` throws, and what `prepare` throws (nothing is written).
    @discardableResult
    public func commit(preparedBy prepare: () throws -> TransactionDraft?) throws -> CommitResult? {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only") }
        let writer = TableWriter(tables: tables, catalog: catalog, schema: schema, modelVersion: modelVersion, shapes: entityShapes)
        let result: CommitResult? = try environment.write { txn in
            guard let draft = try prepare() else { return nil }
            return try commit(draft, timestamp: try Self.timestamp(of: draft), writer: writer, txn)
        }
        if let result { storeMonitor.publish(result.event.sequence) }
        return result
    }

    /// The draft's time (now if it gives none), rounded to the microsecond it is stored with,
    /// so the returned event equals the stored one.
    static func timestamp(of draft: TransactionDraft) throws -> Date {
        let given = draft.timestamp ?? Date()
        guard let micros = EventCodec.microseconds(given) else {
            throw LogError.invalidOperation(
                "the draft's timestamp (\(given.timeIntervalSince1970) seconds since 1970) can't be stored: a transaction's time must be finite and within about 285,000 years of 1970")
        }
        return EventCodec.date(microseconds: micros)
    }

    /// Commits `draft` in `txn`, a write transaction of this store (the caller publishes
    /// the result once it has committed).
    func commit(
        _ draft: TransactionDraft, timestamp: Date, writer: TableWriter, _ txn: borrowing LMDBTransaction
    ) throws -> CommitResult {
        // A reservation and a purge marker have no groups (spec 0004 §3.1): only
        // `reservePrimaryKeys` and `purge` write them, doing what their headers say.
        switch draft.kind {
        case .reservation:
            throw LogError.invalidOperation("a draft can't be of kind \(draft.kind): reserve primary keys with reservePrimaryKeys(of:count:)")
        case .purge:
            throw LogError.invalidOperation("a draft can't be of kind \(draft.kind): purge history with purge(through:)")
        default: break
        }
        let sequence = try nextSequence(txn)

        // Optimistic locking, inside this write transaction: no other writer can slip in.
        for (id, expected) in draft.expectedVersions.sorted(by: { $0.key < $1.key }) {
            let found = try writer.readVersion(txn, try writer.key(id), entityName: id.entity)
            if found != expected { throw LogError.versionMismatch(object: id.description, expected: expected, found: found) }
        }

        // Pass 1: permanent IDs for every inserted object, in draft order.
        var codings = EntityCodings(writer: writer)
        let operationCount = draft.groups.reduce(0) { $0 + $1.operations.count }
        var permanent: [DraftObjectID: StoredObjectID] = [:]
        permanent.reserveCapacity(operationCount)
        /// The permanent IDs of the temporary objects, in the order pass 2 meets their inserts.
        var insertedIDs: [StoredObjectID] = []
        insertedIDs.reserveCapacity(operationCount)
        /// The draft's deletes, to make room for them at the first.
        var deleteCount = 0
        // An entity a later stored model version renames gives out keys above the new name's
        // too (spec 0004 §4.6).
        let partners = counterPartners()
        func lastPrimaryKey(_ code: UInt16) throws -> UInt64 {
            var last = try writer.lastPrimaryKey(txn, entity: code)
            for partner in partners[code] ?? [] { last = max(last, try writer.lastPrimaryKey(txn, entity: partner)) }
            return last
        }
        for group in draft.groups {
            // By position, reading only the object: binding the operation would retain its
            // values, which pass 2 reads anyway.
            for position in group.operations.indices {
                guard let object = group.operations[position].insertedObject else {
                    if group.operations[position].isDelete { deleteCount += 1 }
                    continue
                }
                if case .stored(let id) = object {
                    // Restoring a deleted object under its own ID (undo of a delete): the ID
                    // must have been given out before, and the object must not exist now.
                    let code = try writer.entityCode(id.entity)
                    let given = codings.all.first { $0.code == code }?.lastPrimaryKey
                    let last = try given ?? (try lastPrimaryKey(code))
                    guard id.primaryKey >= 1, id.primaryKey <= last else {
                        throw LogError.invalidOperation("insert of \(id): that ID was never given out, so it can't be restored")
                    }
                    continue
                }
                let coding = try codings.coding(object.entity)
                if coding.entity.isAbstract {
                    throw LogError.invalidOperation("entity \(coding.entity.name) is abstract; insert one of its sub-entities")
                }
                let last = try coding.lastPrimaryKey ?? (try lastPrimaryKey(try coding.entityCode(writer)))
                guard last < UInt64.max else {
                    throw LogError.invalidOperation("entity \(coding.entity.name) has given out every primary key (the last is \(last)); no object can be inserted")
                }
                coding.lastPrimaryKey = last + 1
                let id = StoredObjectID(entity: coding.entity.name, primaryKey: last + 1)
                guard permanent.updateValue(id, forKey: object) == nil else { throw LogError.objectExists(object.description) }
                insertedIDs.append(id)
            }
        }

        func resolve(_ object: DraftObjectID) throws -> StoredObjectID {
            switch object {
            case .stored(let id): return id
            case .temporary:
                guard let id = permanent[object] else {
                    throw LogError.objectNotFound("\(object) (a temporary object this transaction doesn't insert)")
                }
                return id
            }
        }

        /// The stored objects this transaction's values reference, checked for existence at the end.
        var referenced: [ObjectKey: StoredObjectID] = [:]
        /// The destinations of one-to-one references this transaction sets, by relationship
        /// code: each may be named by one object at the end (checked with the referrers).
        var oneToOneTargets: Set<OneToOneTarget> = []
        /// The objects this transaction puts in an ordered to-many whose inverse is a to-one,
        /// by relationship code: each may be in one list at the end (checked with the
        /// referrers, as a one-to-one's destination), and the inverses' names for the error.
        var listedOnceTargets: Set<OneToOneTarget> = []
        var toOneInverses: [UInt16: String] = [:]
        func noteListed(_ ids: [StoredObjectID], _ code: Int, of coding: EntityCoding) throws {
            guard let inverse = coding.properties[code].toOneInverse else { return }
            let relationship = try coding.relationshipCode(code, writer)
            toOneInverses[relationship] = inverse
            for id in ids { listedOnceTargets.insert(OneToOneTarget(destination: id, relationship: relationship)) }
        }
        var deleted: [ObjectKey: StoredObjectID] = [:]
        /// The unique index keys each touched object with a unique index has now, kept so the
        /// uniqueness check needn't read the records back.
        var uniqueness = PendingUniqueness(expectedObjects: operationCount)

        /// The last reference `convert` resolved, which the insert's value map resolves again.
        var lastTarget: (object: DraftObjectID, id: StoredObjectID)?
        func resolveAgain(_ object: DraftObjectID) throws -> StoredObjectID {
            if let lastTarget, lastTarget.object == object { return lastTarget.id }
            return try resolve(object)
        }

        /// Checks a draft value against property `code` of `coding` and converts it to a log value.
        func convert(_ value: DraftValue, _ code: Int, of coding: EntityCoding, from source: StoredObjectID) throws -> LogValue {
            func mismatch(_ got: String) -> LogError {
                let property = coding.entity.properties[code]
                let expected = property.attributeType.map(\.name)
                    ?? (property.isToMany ? "a to-many relationship to \(property.destination ?? "?")" : "a reference to \(property.destination ?? "?")")
                return .typeMismatch(entity: coding.entity.name, property: property.name, expected: expected, got: got)
            }
            func target(_ object: DraftObjectID) throws -> StoredObjectID {
                let id = try resolve(object)
                if let destinations = coding.properties[code].destinations, !destinations.contains(id.entity), !configuration.skipsDestinationCheck {
                    throw mismatch("a reference to \(id.entity)")
                }
                // A stored object may be missing; one this commit inserts exists unless the
                // commit deletes it, and then the check of deleted objects finds the reference.
                if case .stored = object { referenced[try codings.key(id)] = id }
                lastTarget = (object, id)
                return id
            }
            switch value {
            case .null: return .null
            case .attribute(let attribute):
                guard let type = coding.properties[code].attributeType else { throw mismatch(attribute.typeName) }
                guard attribute.matches(type) else { throw mismatch(attribute.typeName) }
                // The event encoding has no NaN decimal: stored, it would make the event unreadable.
                if case .decimal(let decimal) = attribute, decimal.isNaN { throw mismatch("NaN (a decimal must be a number)") }
                return .attribute(attribute)
            case .reference(let object):
                guard coding.properties[code].isRelationship, !coding.properties[code].isToMany else {
                    throw mismatch("a single reference")
                }
                let destination = try target(object)
                if coding.properties[code].isOneToOne, let relationship = coding.properties[code].relationshipCode {
                    oneToOneTargets.insert(OneToOneTarget(destination: destination, relationship: relationship))
                }
                return .reference(destination)
            case .references(let objects):
                guard coding.properties[code].isRelationship, coding.properties[code].isToMany else {
                    throw mismatch("a list of references")
                }
                var ids = try objects.map(target)
                if coding.properties[code].kind == .unorderedToMany {
                    ids = Array(Set(ids)).sorted()
                } else if ids.count > 1 {
                    // An ordered to-many holds an object once, where it first appears.
                    var seen = Set<StoredObjectID>(minimumCapacity: ids.count)
                    ids = ids.filter { seen.insert($0).inserted }
                }
                return .references(ids)
            }
        }

        /// The code of stored property `name` of `coding`'s entity.
        func storedProperty(_ name: String, of coding: EntityCoding) throws -> Int {
            guard let code = coding.code(of: name) else {
                throw LogError.unknownProperty(entity: coding.entity.name, property: name)
            }
            if coding.properties[code].kind == .derived,
                case .derived(let inverseEntity, let inverse) = coding.entity.properties[code].relationship
            {
                throw LogError.derivedRelationshipSide(
                    entity: coding.entity.name, property: name, recordedSide: "\(inverseEntity).\(inverse)")
            }
            // The log computes derived attributes itself, after the draft's changes.
            if let derivations = schema.derivations, let derivation = derivations.derivedByEntity[coding.entity.name]?[name] {
                throw LogError.derivedAttribute(entity: coding.entity.name, property: name, derivation: derivation)
            }
            return code
        }

        /// Records the unique index keys `values` give the object at `key` (after an update).
        func recordUniqueKeys(_ key: ObjectKey, values: [String: LogValue], coding: EntityCoding) throws {
            let start = uniqueness.keys.count
            for (position, (index, indexKey, complete)) in try writer.indexKeys(key, values: values, entity: coding.entity).enumerated()
            where index.isUnique {
                let hasNil = index.properties.contains { (values[$0] ?? .null).leavesUniquenessUnchecked }
                uniqueness.addKey(index: position, indexKey, complete: complete, hasNil: hasNil)
            }
            uniqueness.finishObject(key, coding: coding, values: values, keys: start..<uniqueness.keys.count, isFresh: false)
        }

        // Pass 2: apply each operation, recording the change with its before-image. Each
        // group's changes are encoded for the event as they are applied.
        let eventSchema = try writer.schema(forModelVersion: modelVersion)
        var groups: [ChangeGroup] = []
        var groupBytes: [[UInt8]] = []
        var buffers = WriteBuffers()
        var coded: [(code: Int, value: LogValue)] = []
        /// An insert's values by property code, to put them in code order: empty between inserts.
        var byCode: [LogValue?] = []
        var nextInserted = 0
        var writes = DeferredWrites(expectedObjects: operationCount)
        var deletes = DeferredDeletes()
        /// The history rows of updated objects, put in key order at the end (or when a million wait).
        var updateHistory = DeferredRows(expectedObjects: 0)
        func deferHistory(_ key: ObjectKey) throws {
            TableWriter.withHistoryKey(key, sequence) { updateHistory.add($0, value: TableWriter.emptyBytes) }
            if updateHistory.rows.count >= 1 << 20 { try writer.putRows(txn, &updateHistory, in: tables.history) }
        }
        for group in draft.groups where !group.operations.isEmpty {
            var changes: [Change] = []
            changes.reserveCapacity(group.operations.count)
            var w = ByteWriter(capacity: 64 + group.operations.count * 96)
            for operation in group.operations {
                if !deletes.isEmpty, !operation.isDelete || deletes.bufferedBytes >= DeferredWrites.flushThreshold {
                    // A run of deletes ends (or has buffered enough): the operations below read
                    // the rows the deletes remove.
                    try writer.applyDeferredDeletes(txn, &deletes)
                }
                if case .insert(.temporary, _) = operation, writes.bufferedBytes < DeferredWrites.flushThreshold {} else {
                    // The operations below read what inserts write (a restore looks for its
                    // object): put the inserts' rows first. So do inserts past the threshold.
                    try writer.putDeferred(txn, &writes, uniqueness: &uniqueness)
                }
                switch operation {
                case .insert(let object, let values):
                    let id: StoredObjectID
                    let isFresh: Bool
                    if case .temporary = object {
                        id = insertedIDs[nextInserted]
                        nextInserted += 1
                        isFresh = true
                    } else {
                        id = try resolve(object)
                        isFresh = false
                    }
                    let coding = try codings.coding(id.entity)
                    coded.removeAll(keepingCapacity: true)
                    if byCode.count < coding.properties.count {
                        byCode.append(contentsOf: repeatElement(nil, count: coding.properties.count - byCode.count))
                    }
                    var lowest = Int.max
                    var highest = -1
                    // Whether the stored values differ from the draft's beyond the conversion
                    // (nil or empty values dropped, an unordered relationship's members sorted).
                    var reshaped = false
                    for (name, value) in values {
                        let code = try storedProperty(name, of: coding)
                        let logValue = try convert(value, code, of: coding, from: id)
                        switch logValue {
                        case .null:
                            reshaped = true
                            continue
                        case .references(let ids):
                            if ids.isEmpty {
                                reshaped = true
                                continue
                            }
                            if coding.properties[code].kind == .unorderedToMany {
                                reshaped = true
                            } else if coding.properties[code].toOneInverse != nil {
                                try noteListed(ids, code, of: coding)
                            }
                        default: break
                        }
                        byCode[code] = logValue
                        lowest = min(lowest, code)
                        highest = max(highest, code)
                    }
                    // In code order; the slots are left empty for the next object.
                    if highest >= lowest {
                        for code in lowest...highest {
                            if let value = byCode[code].take() { coded.append((code, value)) }
                        }
                    }
                    let converted: [String: LogValue]
                    if reshaped {
                        var values: [String: LogValue] = Dictionary(minimumCapacity: coded.count)
                        for (code, value) in coded { values[coding.names[code]] = value }
                        converted = values
                    } else {
                        // The same keys: map the draft's dictionary without hashing them again.
                        converted = try values.mapValues { value throws -> LogValue in
                            switch value {
                            case .null: .null
                            case .attribute(let attribute): .attribute(attribute)
                            case .reference(let object): .reference(try resolveAgain(object))
                            case .references(let objects): .references(try objects.map(resolveAgain))
                            }
                        }
                    }
                    let key = ObjectKey(entity: try coding.entityCode(writer), primaryKey: id.primaryKey)
                    // The event's change, whose values section is also the record's.
                    EventCodec.writeImageStart(insert: true, entityCode: key.entity, primaryKey: key.primaryKey, &w)
                    let valuesStart = w.bytes.count
                    try EventCodec.writeCodedValues(coded, &w, writer)
                    let uniqueStart = uniqueness.keys.count
                    try writer.applyInsert(
                        txn, key, coded: coded, encodedValues: w.bytes[valuesStart...], sequence: sequence, coding: coding,
                        isFresh: isFresh, codings: &codings, buffers: &buffers, uniqueness: &uniqueness,
                        writes: &writes)
                    if coding.hasUniqueIndex {
                        uniqueness.finishObject(
                            key, coding: coding, values: converted, keys: uniqueStart..<uniqueness.keys.count, isFresh: isFresh)
                    }
                    if !deleted.isEmpty { deleted[key] = nil }
                    changes.append(.insert(id, values: converted))

                case .update(let object, let values):
                    let id = try resolve(object)
                    let coding = try codings.coding(id.entity)
                    let key = try writer.key(id)
                    guard let record = try writer.readRecord(txn, key, entityName: id.entity) else {
                        throw LogError.objectNotFound(id.description)
                    }
                    var propertyChanges: [PropertyChange] = []
                    for name in values.keys.sorted() {
                        guard let value = values[name] else { continue }
                        let code = try storedProperty(name, of: coding)
                        let after = try convert(value, code, of: coding, from: id)
                        if coding.properties[code].kind == .unorderedToMany {
                            let relationship = try coding.relationshipCode(code, writer)
                            let current = Set(try writer.members(txn, of: key, relationship: relationship))
                            var wanted: Set<ObjectKey> = []
                            if case .references(let ids) = after { wanted = Set(try ids.map { try writer.key($0) }) }
                            let added = try wanted.subtracting(current).sorted().map { try writer.id($0) }
                            let removed = try current.subtracting(wanted).sorted().map { try writer.id($0) }
                            if !added.isEmpty || !removed.isEmpty {
                                propertyChanges.append(.membership(property: name, added: added, removed: removed))
                            }
                        } else {
                            var normalized = after
                            if case .references(let ids) = after, ids.isEmpty { normalized = .null }
                            let before = record.values[name] ?? .null
                            // Literally: re-encoding a string ("é" decomposed to
                            // precomposed) is a change (`==` is canonical equivalence).
                            if !before.isIdentical(to: normalized) {
                                propertyChanges.append(.value(property: name, before: before, after: normalized))
                                // Only the objects the list gains: one it held already was checked when it came.
                                if coding.properties[code].toOneInverse != nil, case .references(let ids) = normalized {
                                    let held: Set<StoredObjectID> = if case .references(let old) = before { Set(old) } else { [] }
                                    try noteListed(ids.filter { !held.contains($0) }, code, of: coding)
                                }
                            }
                        }
                    }
                    guard !propertyChanges.isEmpty else { continue }
                    let updated = try writer.applyUpdateRows(
                        txn, key, changes: propertyChanges, sequence: sequence, entity: coding.entity, current: record)
                    try deferHistory(key)
                    // An update that leaves every uniqueness constraint's values as they were
                    // can't make a clash of its own: a clash with it is another object's,
                    // whose change is checked (and finds this one's index rows).
                    if coding.hasUniqueIndex, propertyChanges.contains(where: { coding.uniqueProperties.contains($0.property) }) {
                        try recordUniqueKeys(key, values: updated, coding: coding)
                    }
                    let change = Change.update(id, changes: propertyChanges)
                    try EventCodec.writeChange(change, &w, schema: eventSchema, catalog: writer)
                    changes.append(change)

                case .membership(let object, let name, let addedObjects, let removedObjects):
                    let id = try resolve(object)
                    let coding = try codings.coding(id.entity)
                    let code = try storedProperty(name, of: coding)
                    guard coding.properties[code].kind == .unorderedToMany else {
                        throw LogError.typeMismatch(
                            entity: coding.entity.name, property: name, expected: "an unordered to-many relationship",
                            got: "a membership change")
                    }
                    let key = try writer.key(id)
                    guard try key.withBytes({ try txn.containsKey($0, in: tables.state) }) else {
                        throw LogError.objectNotFound(id.description)
                    }
                    let relationship = try coding.relationshipCode(code, writer)
                    let current = Set(try writer.members(txn, of: key, relationship: relationship))
                    var added: [StoredObjectID] = []
                    var removed: [StoredObjectID] = []
                    var given: Set<StoredObjectID> = []
                    if case .references(let ids) = try convert(.references(addedObjects), code, of: coding, from: id) {
                        given = Set(ids)
                        added = try ids.filter { !current.contains(try writer.key($0)) }
                    }
                    if case .references(let ids) = try convert(.references(removedObjects), code, of: coding, from: id) {
                        // An object both added and removed: which is meant? (Before, the
                        // answer depended on the state — a member was removed, another added.)
                        if let both = ids.first(where: { given.contains($0) }) {
                            throw LogError.invalidOperation(
                                "a membership change of \(id).\(name) both adds and removes \(both); give each object in one list")
                        }
                        removed = try ids.filter { current.contains(try writer.key($0)) }
                    }
                    guard !added.isEmpty || !removed.isEmpty else { continue }
                    let propertyChange = PropertyChange.membership(property: name, added: added, removed: removed)
                    let updated = try writer.applyUpdateRows(txn, key, changes: [propertyChange], sequence: sequence, entity: coding.entity)
                    try deferHistory(key)
                    if coding.hasUniqueIndex { try recordUniqueKeys(key, values: updated, coding: coding) }
                    let change = Change.update(id, changes: [propertyChange])
                    try EventCodec.writeChange(change, &w, schema: eventSchema, catalog: writer)
                    changes.append(change)

                case .delete(let object):
                    let id = try resolve(object)
                    let coding = try codings.coding(id.entity)
                    let key = try writer.key(id)
                    // Deleted earlier in this run of deletes, its rows not removed yet: gone.
                    guard deleted[key] == nil,
                        let (record, stored) = try writer.readRecordAndValues(txn, key, entityName: id.entity, valuesOf: modelVersion)
                    else {
                        throw LogError.objectNotFound(id.description)
                    }
                    let before = try writer.beforeImage(txn, key, record: record, entity: coding.entity)
                    try writer.deferDelete(txn, key, values: record.values, coding: coding, sequence: sequence, into: &deletes)
                    if deleted.isEmpty { deleted.reserveCapacity(deleteCount) }
                    deleted[key] = id
                    if coding.hasUniqueIndex { uniqueness.remove(key) }
                    let change = Change.delete(id, before: before)
                    if let stored, !coding.hasUnorderedToMany {
                        // The record's values section is the before-image's, byte for byte
                        // (the same layout, the event's model version): copied, not encoded again.
                        EventCodec.writeImageStart(insert: false, entityCode: key.entity, primaryKey: key.primaryKey, &w)
                        w.raw(stored)
                    } else {
                        try EventCodec.writeChange(change, &w, schema: eventSchema, catalog: writer)
                    }
                    changes.append(change)
                }
            }
            // Kept even when every change was a no-op, so a draft's groups (those with
            // operations) map one-to-one onto the event's: contexts rely on it for undo.
            groups.append(
                ChangeGroup(actionName: group.actionName, changes: changes, origin: group.origin, recordedForUndo: group.isRecordedForUndo))
            groupBytes.append(w.bytes)
        }
        try writer.applyDeferredDeletes(txn, &deletes)
        try writer.putDeferred(txn, &writes, uniqueness: &uniqueness)
        try writer.putRows(txn, &updateHistory, in: tables.history)

        // Derived attributes (spec 0006 §24): computed from the state the changes left, and
        // written as updates at the end of the last group, in this same transaction.
        if let derivations = schema.derivations, !groups.isEmpty, !configuration.skipsDerivations {
            let derived = try writer.applyDerivations(
                derivations, after: groups, txn, sequence: sequence, timestamp: timestamp,
                recordUniqueKeys: { key, values, entity in try recordUniqueKeys(key, values: values, coding: try codings.coding(entity.name)) })
            if !derived.isEmpty {
                var w = ByteWriter(capacity: derived.count * 48)
                for change in derived { try EventCodec.writeChange(change, &w, schema: eventSchema, catalog: writer) }
                let last = groups.count - 1
                groups[last].changes += derived
                groupBytes[last] += w.bytes
            }
        }

        // Deferred checks, on the state as the transaction leaves it: an object that doesn't
        // exist must have no references left pointing at it — whether they were written by
        // this draft (a reference to a missing object) or left by a delete (dangling).
        var candidates: [ObjectKey: StoredObjectID] = deleted
        for (key, id) in referenced where candidates[key] == nil { candidates[key] = id }
        // A side a later model version records and this one derives (spec 0004 §4.1): its
        // lists are left stale by this version's commits, marked to fill again — a reference
        // they keep to a deleted object is the fill's to drop (before session 37 such a
        // delete was refused: the earlier app couldn't delete a playlist a song's list held).
        var staleSideCodes: [UInt16: String] = [:]
        if !candidates.isEmpty, !schema.derivedToManyInverseSides.isEmpty {
            for (side, code) in try recordedCodes(of: schema.derivedToManyInverseSides, txn) { staleSideCodes[code] = side }
        }
        var staleSides: Set<String> = []
        for (key, id) in candidates.sorted(by: { $0.key < $1.key }) where !(try key.withBytes({ try txn.containsKey($0, in: tables.state) })) {
            try txn.forEach(in: tables.referrers, range: .prefix(key.bytes)) { entry, _ in
                let (relationship, source) = entry.withUnsafeBytes { raw in
                    (readBigEndian(raw, at: 10, count: 2).map { UInt16($0) }, ObjectKey(raw, at: 12))
                }
                if let relationship, let side = staleSideCodes[relationship] {
                    staleSides.insert(side)
                    return .next
                }
                let name = relationship.flatMap { catalog.relationshipName($0) } ?? "?"
                let sourceName = source.flatMap { try? writer.id($0).description } ?? "?"
                throw LogError.missingReference(from: sourceName, property: String(name.split(separator: ".").last ?? ""), to: id.description)
            }
        }
        try checkUniqueness(txn, uniqueness, writer: writer)
        // One-to-ones (spec 0004 §4.1): a destination named by two objects' recorded side —
        // a writer set it not knowing another had (its own old partner is released in the
        // same transaction, so it is gone by now).
        for target in oneToOneTargets.sorted(by: { ($0.destination, $0.relationship) < ($1.destination, $1.relationship) }) {
            let key = try writer.key(target.destination)
            let sources = try writer.referrers(txn, of: key, relationship: target.relationship)
            guard sources.count > 1 else { continue }
            throw LogError.oneToOneViolation(
                relationship: catalog.relationshipName(target.relationship) ?? "?", destination: target.destination.description,
                objects: sources.map { (try? writer.id($0).description) ?? "?" })
        }

        // An ordered to-many whose inverse is a to-one (spec 0004 §4.1): an object put in one
        // object's list must be in no other's — the same check with the same index, as its
        // to-one can name one (before session 33 both lists were written, and only verify saw it).
        // Unsorted (a list of 100,000 new members isn't sorted for a check that finds nothing);
        // the first violation in ID order is the one reported.
        if !configuration.skipsListedOnceCheck {
            var violation: (target: OneToOneTarget, sources: [ObjectKey])?
            for target in listedOnceTargets {
                let sources = try writer.referrers(txn, of: try writer.key(target.destination), relationship: target.relationship)
                guard sources.count > 1 else { continue }
                if let found = violation, (found.target.destination, found.target.relationship) < (target.destination, target.relationship) { continue }
                violation = (target, sources)
            }
            if let (target, sources) = violation {
                throw LogError.toOneInverseViolation(
                    relationship: catalog.relationshipName(target.relationship) ?? "?", object: target.destination.description,
                    holders: sources.map { (try? writer.id($0).description) ?? "?" }, inverse: toOneInverses[target.relationship] ?? "?")
            }
        }

        if schema.hasPairedSides && !configuration.skipsOrderedPairCheck {
            try checkOrderedPairs(groups, txn, writer: writer)
        }

        // Sides a later model version records that this one derives (spec 0004 §4.1): a
        // change to their inverses' lists leaves theirs stale, so they are marked to fill again.
        if !schema.derivedToManyInverses.isEmpty { try markSidesRecordedElsewhere(groups, also: staleSides, txn) }

        // The event itself, in chunks small enough to stay in B-tree pages.
        let event = TransactionEvent(
            sequence: sequence, timestamp: timestamp, author: draft.author, contextName: draft.contextName,
            processID: draft.processID, kind: draft.kind, modelVersion: modelVersion, groups: groups)
        let capacity = groupBytes.reduce(256) { $0 + $1.count + 16 }
        let bytes = try EventCodec.encode(event, catalog: writer, capacity: capacity) { (group: Int, w: inout ByteWriter) in
            w.raw(groupBytes[group])
        }
        try writeEventChunks(txn, sequence: sequence, bytes: bytes, author: event.author, contextName: event.contextName)
        for coding in codings.all {
            guard let last = coding.lastPrimaryKey else { continue }
            try txn.put(bigEndianBytes(last), forKey: TableWriter.counterKey(try coding.entityCode(writer)), in: tables.counters)
        }
        // An earlier model writing after a later one was stored: the later one's next open
        // migrates it even if its own writers moved the head meanwhile (spec 0004 §4.5).
        if try newestStoredModelVersion(txn) > modelVersion { try txn.put([1], forKey: MetaKey.earlierModelWrote, in: tables.meta) }
        try txn.put(bigEndianBytes(sequence), forKey: MetaKey.head, in: tables.meta)
        if let stacks = draft.undoCheckpoint {
            func named(_ refs: [UndoCheckpoint.GroupRef]) -> [UndoCheckpoint.GroupRef] {
                refs.map { $0.sequence == 0 ? $0.with(sequence: sequence) : $0 }
            }
            try writeUndoCheckpoint(
                author: draft.author, contextName: draft.contextName, through: sequence, undo: named(stacks.undo), redo: named(stacks.redo), txn)
        }
        try checkpointIfDue(txn, appended: sequence, through: sequence)
        return CommitResult(event: event, permanentIDs: permanent)
    }

    /// Gives out the next `count` primary keys of `entity` ahead of their objects' insert,
    /// recorded as a transaction of kind ``TransactionKind/reservation(entity:range:)`` so replay
    /// and `verify` reproduce the counter (Core Data's `obtainPermanentIDs(for:)`). Insert the
    /// objects later with ``TransactionDraft/restore(_:values:)``-style stored IDs.
    public func reservePrimaryKeys(of entity: String, count: Int, author: String? = nil, contextName: String? = nil)
        throws -> ClosedRange<UInt64>
    {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only") }
        guard count >= 1 else { throw LogError.invalidOperation("reserve at least one primary key, not \(count)") }
        let described = try schema.entity(entity)
        guard !described.isAbstract else { throw LogError.invalidOperation("entity \(entity) is abstract; it has no objects of its own") }
        let writer = TableWriter(tables: tables, catalog: catalog, schema: schema, modelVersion: modelVersion, shapes: entityShapes)
        let timestamp = EventCodec.date(microseconds: EventCodec.microsecondsNow())
        let (range, sequence) = try environment.write { txn in
            let head = try nextSequence(txn) - 1
            let code = try writer.entityCode(entity)
            var last = try writer.lastPrimaryKey(txn, entity: code)
            for partner in counterPartners()[code] ?? [] { last = max(last, try writer.lastPrimaryKey(txn, entity: partner)) }
            guard UInt64.max - last >= UInt64(count) else {
                throw LogError.invalidOperation(
                    "entity \(entity) has \(UInt64.max - last) primary key(s) left to give out (the last given is \(last)); \(count) can't be reserved")
            }
            let range = (last + 1)...(last + UInt64(count))
            let event = TransactionEvent(
                sequence: head + 1, timestamp: timestamp, author: author, contextName: contextName,
                processID: ProcessInfo.processInfo.processIdentifier, kind: .reservation(entity: entity, range: range),
                modelVersion: modelVersion, groups: [])
            try writeEventChunks(
                txn, sequence: head + 1, bytes: try EventCodec.encode(event, catalog: writer), author: event.author,
                contextName: event.contextName)
            try txn.put(bigEndianBytes(range.upperBound), forKey: TableWriter.counterKey(code), in: tables.counters)
            try txn.put(bigEndianBytes(head + 1), forKey: MetaKey.head, in: tables.meta)
            try checkpointIfDue(txn, appended: head + 1, through: head + 1)
            return (range, head + 1)
        }
        storeMonitor.publish(sequence)
        return range
    }

    /// The largest value a leaf page of `pageSize` bytes holds under an `events` key (12
    /// bytes): LMDB's largest node (`me_nodemax`: half the page past its 16-byte header, even,
    /// less a 2-byte slot) less the 8-byte node header and the key — 2,018 bytes with 4 KiB
    /// pages. A larger value goes to overflow pages.
    static func largestInlineChunk(pageSize: Int) -> Int {
        ((pageSize - 16) / 2 & ~1) - 2 - 8 - 12
    }

    /// The chunk size events are written with: the configured one, at least 64 bytes and at
    /// most what a leaf page holds (spec 0004 §3.4).
    static func chunkSize(_ configured: Int, pageSize: Int) -> Int {
        min(max(configured, 64), max(largestInlineChunk(pageSize: pageSize), 64))
    }

    /// Appends event `sequence`'s bytes in chunks, and files it under (`author`,
    /// `contextName`) — the event's own — in the per-context transaction index.
    func writeEventChunks(
        _ txn: borrowing LMDBTransaction, sequence: UInt64, bytes: [UInt8], author: String?, contextName: String?
    ) throws {
        let size = Self.chunkSize(configuration.chunkSize, pageSize: try txn.statistics(of: tables.events).pageSize)
        var chunk: UInt32 = 0
        var offset = 0
        repeat {
            let end = min(offset + size, bytes.count)
            var key = bigEndianBytes(sequence)
            key.append(contentsOf: bigEndianBytes(chunk))
            try txn.put(bytes[offset..<end], forKey: key, in: tables.events, flags: .append)
            offset = end
            chunk += 1
        } while offset < bytes.count
        // Every event is filed under its (author, context name) in the same transaction.
        if let contexts = tables.contexts {
            try ContextIndex.record(txn, meta: tables.meta, table: contexts, sequence: sequence, author: author, contextName: contextName)
        }
    }

    /// Refuses the commit if any touched object now shares a unique index value with another.
    private func checkUniqueness(_ txn: borrowing LMDBTransaction, _ pending: PendingUniqueness, writer: TableWriter) throws {
        guard !pending.objects.isEmpty else { return }
        // The other objects holding each live key's values, found with one cursor.
        var clashes: [(object: Int, key: Int, others: [ObjectKey])] = []
        try pending.bytes.withUnsafeBytes { all in
            try txn.withCursor(on: tables.index) { cursor in
                for position in pending.objects.indices where pending.isLatest(position) {
                    let object = pending.objects[position].key
                    for keyPosition in pending.objects[position].keys
                    where pending.keys[keyPosition].needsCheck && !pending.keys[keyPosition].hasNil {
                        let range = pending.keys[keyPosition].bytes
                        let prefix = UnsafeRawBufferPointer(rebasing: all[range.lowerBound..<(range.upperBound - ObjectKey.byteCount)])
                        var others: [ObjectKey] = []
                        var found = try cursor.seek(atLeast: prefix)
                        while found {
                            let inRange = try cursor.withCurrent { key, _ in
                                key.withUnsafeBytes { raw -> Bool in
                                    guard TableWriter.hasPrefix(raw, prefix) else { return false }
                                    if let other = ObjectKey(raw, at: raw.count - ObjectKey.byteCount), other != object {
                                        others.append(other)
                                    }
                                    return true
                                }
                            }
                            guard inRange == true else { break }
                            found = try cursor.move(.next)
                        }
                        if !others.isEmpty { clashes.append((position, keyPosition, others)) }
                    }
                }
            }
        }
        for (position, keyPosition, others) in clashes {
            let object = pending.objects[position]
            let key = pending.keys[keyPosition]
            let index = object.coding.entity.indexes[key.index]
            var clashing: [StoredObjectID] = []
            for other in others {
                let otherID = try writer.id(other)
                if !key.complete {
                    // The key was cut: compare the full values.
                    guard let otherRecord = try writer.readRecord(txn, other, entityName: otherID.entity),
                        index.properties.allSatisfy({ otherRecord.values[$0] == object.values[$0] })
                    else { continue }
                }
                clashing.append(otherID)
            }
            if !clashing.isEmpty {
                let value = index.properties.map { (object.values[$0] ?? .null).description }.joined(separator: ", ")
                throw LogError.uniquenessViolation(
                    entity: index.entity, properties: index.properties, value: value,
                    objects: ([try writer.id(object.key)] + clashing).map(\.description))
            }
        }
    }
}

extension TransactionDraft.Operation {
    /// The object an insert inserts; nil for other operations.
    fileprivate var insertedObject: DraftObjectID? {
        if case .insert(let object, _) = self { return object }
        return nil
    }

    /// Whether this is a delete.
    var isDelete: Bool {
        if case .delete = self { return true }
        return false
    }
}

/// A destination of a one-to-one reference a commit sets (``EventLog/commit(_:)``'s check).
struct OneToOneTarget: Hashable {
    let destination: StoredObjectID
    let relationship: UInt16
}
