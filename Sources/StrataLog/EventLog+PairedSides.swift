import StrataStorage
import Synchronization

extension MetaKey {
    /// The ordered sides a writable open must fill from their inverses' references, as
    /// "Entity.property" joined by newlines (spec 0004 §4.1): present from the open that
    /// registered them until their fill has committed.
    static let orderedSidesToFill = Array("orderedSidesToFill".utf8)
    /// The fills done: "Entity.property seq" lines, the seq of the `migration` transaction
    /// that filled the side — a replayed copy through an earlier point marks the side to
    /// fill again (``EventLog/replay(through:into:)``).
    static let orderedSidesFilled = Array("orderedSidesFilled".utf8)
}

extension EventLog {
    /// The sides of many-to-manys ordered on both sides that `registered` records and
    /// `existing` (the catalog before this open) didn't, while it recorded their inverse:
    /// a store written when only one side of such a relationship was recorded (before
    /// session 30, or by a model version in which this side wasn't ordered). Their lists are
    /// in no event yet; ``fillOrderedSides()`` gives them their inverses' references.
    static func orderedSidesToFill(_ schema: ModelSchema, existing: Catalog.State) -> [String] {
        var result: Set<String> = []
        for entity in schema.entities.values {
            for property in entity.properties {
                guard let inverse = property.orderedInverse, existing.relationshipCodes[property.qualifiedName] == nil,
                    existing.relationshipCodes[inverse] != nil
                else { continue }
                result.insert(property.qualifiedName)
            }
        }
        return result.sorted()
    }

    /// The sides ``MetaKey/orderedSidesToFill`` names in this store (empty: none).
    func orderedSidesToFill() throws -> [String] {
        guard let bytes = try environment.read({ txn in try txn.value(forKey: MetaKey.orderedSidesToFill, in: tables.meta) })
        else { return [] }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// The sides of `marked` (``MetaKey/orderedSidesToFill``'s names) that `schema`'s model
    /// version orders on both sides, with their inverses: those it can fill, and whose lists
    /// it would read. A side an earlier model version derives from its inverse isn't one
    /// (nor one it lacks).
    static func fillableSides(_ marked: [String], in schema: ModelSchema) -> [(side: String, property: ModelSchema.Property, inverse: String)] {
        marked.compactMap { side in
            guard let dot = side.firstIndex(of: "."),
                let property = schema.entities[String(side[..<dot])]?.propertiesByName[String(side[side.index(after: dot)...])],
                let inverse = property.orderedInverse, inverse.contains(".")
            else { return nil }
            return (side, property, inverse)
        }
    }

    /// Fills the sides ``MetaKey/orderedSidesToFill`` names that this handle's model version
    /// orders on both sides, once: each object's list becomes the objects whose inverse
    /// holds it, in key order (the order the side read in while it was derived), after those
    /// its list already holds that still hold it. One LMDB write transaction: the
    /// `migration` transaction of the open's model version (format version 3, §3.1) — none
    /// when nothing needs to change — with their marks going and ``MetaKey/orderedSidesFilled``
    /// recording the fill, so no moment has the fill committed and the sides still marked.
    /// An error (or a crash) leaves nothing of it: the sides stay marked, and the next
    /// writable open of a version that orders them fills them. A marked side this version
    /// doesn't order on both sides — an earlier app's model, whose version derives it —
    /// stays marked for the version that records it (before session 36 its mark went as if
    /// filled, and that version's next open found nothing to fill: its lists stayed empty,
    /// spec 0004 §4.1).
    func fillOrderedSides() throws {
        let marked = try orderedSidesToFill()
        let fillable = Self.fillableSides(marked, in: schema)
        guard !fillable.isEmpty else { return }
        let sides = fillable.map(\.side)
        let writer = TableWriter(tables: tables, catalog: catalog, schema: schema, modelVersion: modelVersion, shapes: entityShapes)
        let result: CommitResult? = try environment.write { txn in
            if configuration.failsFillingOrderedSides {
                throw LogError.invalidOperation("filling \(sides.joined(separator: ", ")) failed, as asked (a test of an error there)")
            }
            var draft = TransactionDraft(kind: .migration)
            try read { reader in
                for (_, property, inverse) in fillable {
                    guard let inverseDot = inverse.firstIndex(of: ".") else { continue }
                    let inverseEntity = String(inverse[..<inverseDot])
                    let inverseName = String(inverse[inverse.index(after: inverseDot)...])
                    try reader.forEachObjectID(of: property.declaringEntity) { id in
                        let sources = try reader.referrers(to: id, through: inverseName, of: inverseEntity)
                        let current = try reader.related(id, property.name)
                        let holding = Set(sources)
                        let kept = current.filter { holding.contains($0) }
                        let keptSet = Set(kept)
                        let wanted = kept + sources.filter { !keptSet.contains($0) }
                        if wanted != current {
                            draft.update(.stored(id), values: [property.name: .references(wanted.map { .stored($0) })])
                        }
                        return .next
                    }
                }
            }
            // With nothing to change, the fill counts as made after the head: a copy through
            // the head or earlier fills again (an object may have been referenced then).
            let committed = draft.isEmpty ? nil : try commit(draft, timestamp: try Self.timestamp(of: draft), writer: writer, txn)
            let filledAt = try committed?.event.sequence ?? (try nextSequence(txn))
            var lines = try txn.value(forKey: MetaKey.orderedSidesFilled, in: tables.meta).map { String(decoding: $0, as: UTF8.self) } ?? ""
            for side in sides { lines += (lines.isEmpty ? "" : "\n") + "\(side) \(filledAt)" }
            try txn.put(Array(lines.utf8), forKey: MetaKey.orderedSidesFilled, in: tables.meta)
            // The marks as they are now (another open may have marked more since), less the
            // sides filled: a side an earlier version derives stays.
            let filled = Set(sides)
            let left = (try txn.value(forKey: MetaKey.orderedSidesToFill, in: tables.meta)
                .map { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) } ?? [])
                .filter { !filled.contains($0) }
            if left.isEmpty {
                _ = try txn.delete(key: MetaKey.orderedSidesToFill, in: tables.meta)
            } else {
                try txn.put(Array(left.joined(separator: "\n").utf8), forKey: MetaKey.orderedSidesToFill, in: tables.meta)
            }
            return committed
        }
        if let result { storeMonitor.publish(result.event.sequence) }
    }

    /// Marks to fill again (``MetaKey/orderedSidesToFill``, in the commit's transaction `txn`)
    /// each side this model version derives from a to-many it records
    /// (``ModelSchema/derivedToManyInverses``) whose lists `groups` change — an insert or a
    /// delete of an object whose list holds objects, an update of the list — and the sides
    /// of `stale` (whose lists name an object the commit deletes), when the catalog has a code
    /// for the side: a later version ordering both sides records it (spec 0004 §4.1). This
    /// version's events can't set that side, so its recorded lists go stale; the later
    /// version's next writable open fills it again (``fillOrderedSides()``: each list keeps
    /// the objects that still hold it, in its order, then gains the others). Before session
    /// 37 the lists stayed stale for good, and only `verify` saw it. One catalog lookup per
    /// such side the commit touches, and the mark read once; nothing for a commit touching
    /// none.
    func markSidesRecordedElsewhere(_ groups: [ChangeGroup], also stale: Set<String>, _ txn: borrowing LMDBTransaction) throws {
        let inverses = schema.derivedToManyInverses
        var touched = stale
        func holdsObjects(_ value: LogValue?) -> Bool {
            if case .references(let ids)? = value { return !ids.isEmpty }
            return false
        }
        for group in groups {
            for change in group.changes {
                guard let lists = inverses[change.objectID.entity] else { continue }
                switch change {
                case .insert(_, let values), .delete(_, let values):
                    for (name, side) in lists where holdsObjects(values[name]) { touched.insert(side) }
                case .update(_, let changes):
                    for change in changes { if let side = lists[change.property] { touched.insert(side) } }
                }
            }
        }
        guard !touched.isEmpty else { return }
        let marked = try txn.value(forKey: MetaKey.orderedSidesToFill, in: tables.meta)
            .map { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) } ?? []
        let unmarked = touched.subtracting(marked)
        guard !unmarked.isEmpty else { return }
        let adding = try recordedCodes(of: unmarked, txn).keys
        guard !adding.isEmpty else { return }
        let all = Set(marked).union(adding).sorted().joined(separator: "\n")
        try txn.put(Array(all.utf8), forKey: MetaKey.orderedSidesToFill, in: tables.meta)
    }

    /// The relationship codes the catalog gives `sides` (those it has), read in `txn`: an open
    /// of a later version may have registered a side since this handle loaded the catalog.
    func recordedCodes(of sides: Set<String>, _ txn: borrowing LMDBTransaction) throws -> [String: UInt16] {
        var codes: [String: UInt16] = [:]
        for side in sides {
            guard let bytes = try txn.value(forKey: [Catalog.Kind.relationship.rawValue] + Array(side.utf8), in: tables.catalog),
                let code = Catalog.code(bytes)
            else { continue }
            codes[side] = code
        }
        return codes
    }

    /// For a replayed copy through `sequence`: the meta rows that say which sides it must
    /// still fill (those filled after `sequence`, or not yet) and which fills it holds.
    static func orderedSideRows(toFill: [UInt8]?, filled: [UInt8]?, through sequence: UInt64) -> (toFill: [UInt8]?, filled: [UInt8]?) {
        var unfilled = Set(toFill.map { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) } ?? [])
        var kept: [String] = []
        for line in (filled.map { String(decoding: $0, as: UTF8.self) } ?? "").split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let seq = UInt64(parts[1]) else { continue }
            if seq <= sequence { kept.append(String(line)) } else { unfilled.insert(String(parts[0])) }
        }
        return (unfilled.isEmpty ? nil : Array(unfilled.sorted().joined(separator: "\n").utf8),
                kept.isEmpty ? nil : Array(kept.joined(separator: "\n").utf8))
    }
}

extension LogReader {
    /// The paired sides (spec 0004 §4.1) whose lists the store's records didn't hold just after
    /// `sequence`: sides filled by a later event (``MetaKey/orderedSidesFilled``), or not yet
    /// (``MetaKey/orderedSidesToFill``) — with this handle's description of each.
    func sidesUnfilled(asOf sequence: UInt64) throws -> [ModelSchema.Property] {
        var names: Set<String> = []
        if let toFill = try txn.value(forKey: MetaKey.orderedSidesToFill, in: tables.meta) {
            names.formUnion(String(decoding: toFill, as: UTF8.self).split(separator: "\n").map(String.init))
        }
        if let filled = try txn.value(forKey: MetaKey.orderedSidesFilled, in: tables.meta) {
            for line in String(decoding: filled, as: UTF8.self).split(separator: "\n") {
                let parts = line.split(separator: " ")
                guard parts.count == 2, let seq = UInt64(parts[1]), seq > sequence else { continue }
                names.insert(String(parts[0]))
            }
        }
        return names.sorted().compactMap { name in
            guard let dot = name.firstIndex(of: ".") else { return nil }
            let property = log.schema.entities[String(name[..<dot])]?.propertiesByName[String(name[name.index(after: dot)...])]
            return property?.orderedInverse == nil ? nil : property
        }
    }

    /// Gives the objects of `image` (the state just after an event before their side's fill)
    /// the lists of `sides` their records didn't hold then, as the fill derives them: the
    /// objects whose inverse lists hold the object, in key order — the order the side read
    /// in while it was derived. An object whose record holds a list of the side keeps it.
    func deriveUnfilledSides(_ sides: [ModelSchema.Property], in image: inout StateImage) {
        for side in sides {
            guard let paired = log.schema.pairedSide(side) else { continue }
            let (inverseName, sourceKinds, targetKinds) = (paired.inverseName, paired.sourceKinds, paired.targetKinds)
            var derived: [StoredObjectID: [StoredObjectID]] = [:]
            for (id, values) in image.objects where sourceKinds.contains(id.entity) {
                guard case .references(let list)? = values[inverseName] else { continue }
                for target in list where targetKinds.contains(target.entity) { derived[target, default: []].append(id) }
            }
            for (target, sources) in derived where image.objects[target] != nil {
                if case .references(let own)? = image.objects[target]?[side.name], !own.isEmpty { continue }
                image.objects[target]?[side.name] = .references(keyOrdered(sources))
            }
        }
    }

    /// `ids` in key order — the order a derived side read in.
    private func keyOrdered(_ ids: [StoredObjectID]) -> [StoredObjectID] {
        ids.map { (id: $0, key: try? writer.key($0)) }.sorted { a, b in
            switch (a.key, b.key) {
            case (let x?, let y?): x < y
            default: a.id < b.id
            }
        }.map(\.id)
    }

    /// Gives the objects of `objects` (their values just after `sequence`, as their records
    /// had them) the lists of `sides` (sides filled after `sequence`) their records didn't
    /// hold then, as ``deriveUnfilledSides(_:in:)`` gives them in a whole state: an object
    /// whose record holds a list of the side keeps it.
    func addDerivedLists(
        _ sides: [ModelSchema.Property], asOf sequence: UInt64, to objects: inout [StoredObjectID: [String: LogValue]]
    ) throws {
        var lists: [StoredObjectID: [String: [StoredObjectID]]]?
        for side in sides {
            guard let kinds = log.schema.entities[side.declaringEntity].map({ Set($0.selfAndSubentities) }) else { continue }
            for id in Array(objects.keys) where kinds.contains(id.entity) {
                if case .references(let own)? = objects[id]?[side.name], !own.isEmpty { continue }
                if lists == nil { lists = try derivedSideLists(sides, asOf: sequence) }
                if let list = lists?[id]?[side.name] { objects[id]?[side.name] = .references(list) }
            }
        }
    }

    /// How many objects ``derivedSideLists(_:asOf:)`` reads as of a point at once.
    static let derivationBatchSize: UInt64 = 4096

    /// The lists `sides` (sides filled after `sequence`) had just after `sequence`, derived as
    /// ``deriveUnfilledSides(_:in:)`` derives them: object → side name → the objects whose
    /// inverse list held it then, in key order. Reads every object of the inverses' entities
    /// as of `sequence`, in batches (memory: the lists and one batch), without building the
    /// whole state; the handle keeps the last lists derived, so reading a point's objects in
    /// batches (`strata export --at`, `replay --diff`) derives them once, not once per batch.
    func derivedSideLists(_ sides: [ModelSchema.Property], asOf sequence: UInt64) throws -> [StoredObjectID: [String: [StoredObjectID]]] {
        let names = sides.map(\.qualifiedName)
        if let cached = log.derivedSides.withLock({ $0 }), cached.sequence == sequence, cached.sides == names { return cached.lists }
        log.wholeStateReads.withLock { $0 += 1 }
        var lists: [StoredObjectID: [String: [StoredObjectID]]] = [:]
        var kept: [UInt64: TransactionEvent] = [:]
        for side in sides {
            guard let paired = log.schema.pairedSide(side) else { continue }
            let (sourceEntity, inverseName, targetKinds) = (paired.source, paired.inverseName, paired.targetKinds)
            var derived: [StoredObjectID: [StoredObjectID]] = [:]
            for kind in sourceEntity.selfAndSubentities {
                let last: UInt64
                do {
                    last = try lastPrimaryKey(of: kind)
                } catch LogError.unknownEntity(_) {
                    continue
                }
                var first: UInt64 = 1
                while first <= last {
                    let end = first + min(last - first, Self.derivationBatchSize - 1)
                    let batch = (first...end).map { StoredObjectID(entity: kind, primaryKey: $0) }
                    for (source, values) in try recordedObjects(batch, asOf: sequence, keeping: &kept) {
                        guard case .references(let list)? = values[inverseName] else { continue }
                        for target in list where targetKinds.contains(target.entity) { derived[target, default: []].append(source) }
                    }
                    if end == last { break }
                    first = end + 1
                }
            }
            for (target, sources) in derived { lists[target, default: [:]][side.name] = keyOrdered(sources) }
        }
        log.derivedSides.withLock { $0 = DerivedSideLists(sequence: sequence, sides: names, lists: lists) }
        return lists
    }
}

extension LogReader {
    /// The objects whose values just after `upper` may differ from theirs just after `lower`
    /// (`lower` < `upper`; none when they are equal): those transactions `lower + 1 … upper`
    /// changed, and, for a paired side filled after `lower` (spec 0004 §4.1), whose lists
    /// then are derived from the inverse's, the objects the inverse lists those transactions
    /// changed named before or after — their derived lists changed with them though their
    /// records didn't. What `strata replay --diff` compares (before, only the first: a
    /// change an old-format save made to the inverse showed on the inverse alone).
    ///
    /// - Throws: as ``forEachEvent(from:through:_:)``.
    public func objectsChanged(after lower: UInt64, through upper: UInt64) throws -> Set<StoredObjectID> {
        var changed: Set<StoredObjectID> = []
        guard upper > lower else { return changed }
        var inverses: [(sources: Set<String>, name: String, targets: Set<String>)] = []
        for side in try sidesUnfilled(asOf: lower) {
            guard let paired = log.schema.pairedSide(side) else { continue }
            inverses.append((paired.sourceKinds, paired.inverseName, paired.targetKinds))
        }
        try forEachEvent(from: lower + 1, through: upper) { event in
            for change in event.changes {
                changed.insert(change.objectID)
                for inverse in inverses where inverse.sources.contains(change.objectID.entity) {
                    var values: [LogValue] = []
                    switch change {
                    case .insert(_, let all), .delete(_, let all): values = all[inverse.name].map { [$0] } ?? []
                    case .update(_, let changes):
                        for case .value(let property, let before, let after) in changes where property == inverse.name { values += [before, after] }
                    }
                    for case .references(let ids) in values {
                        for id in ids where inverse.targets.contains(id.entity) { changed.insert(id) }
                    }
                }
            }
            return .next
        }
        return changed
    }
}

/// The lists of paired sides filled after a point, derived as of that point
/// (``LogReader/derivedSideLists(_:asOf:)``).
struct DerivedSideLists: Sendable {
    /// The point.
    let sequence: UInt64
    /// The sides, `Entity.property`.
    let sides: [String]
    /// Object → side name → the objects whose inverse lists held it, in key order.
    let lists: [StoredObjectID: [String: [StoredObjectID]]]
}
