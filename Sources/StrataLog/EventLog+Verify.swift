import Foundation
import StrataStorage
import StrataModel

extension EventLog {
    /// Checks the store against its log (`Specs/0004-event-log.md` §8): every event and
    /// segment checksum; sequence numbers dense from 1 (after a purge: from the base
    /// snapshot's sequence + 1, the base loaded first) to the head; the derived tables —
    /// state, indexes, references, membership, history, counters — rebuilt by replaying the
    /// log into a scratch environment and compared entry by entry with the live ones. Each
    /// difference is reported precisely; nothing is changed.
    ///
    /// Everything is read in one snapshot (one read transaction, held for the whole check),
    /// so a store that other threads or processes are writing to — committing, compacting,
    /// purging — is checked as it was when `verify` began.
    public func verify() throws -> VerificationReport {
        try read { reader in try verify(reader) }
    }

    /// Whether `error` says a resource ran out rather than that the store is damaged: no
    /// space (`ENOSPC`), no file descriptors (`EMFILE`, `ENFILE`), no memory (`ENOMEM`), a
    /// scratch map at its maximum — from LMDB, or a segment file that couldn't be opened or
    /// read for one of them.
    static func isExhaustion(_ error: any Error) -> Bool {
        let codes: [Int32] = [ENOSPC, EMFILE, ENFILE, ENOMEM]
        if let error = error as? LMDBError {
            return codes.contains(error.code.rawValue) || error.code == .mapAtMaximumSize
        }
        if case .segment(let detail) = error as? LogError {
            return codes.contains { detail.contains("(errno \($0))") }
        }
        return false
    }

    private func verify(_ reader: borrowing LogReader) throws -> VerificationReport {
        var problems: [VerificationProblem] = []
        func problem(_ kind: VerificationProblem.Kind, _ location: String, _ message: String) {
            problems.append(VerificationProblem(kind: kind, location: location, message: message))
        }

        // The scratch store shares the live catalog, so codes and keys are comparable.
        // Its catalog rows read in this reader's snapshot: a nested read fails when another
        // process grew the map meanwhile.
        let (scratch, scratchTables, scratchPath) = try makeScratchEnvironment(catalogRows: try catalogRows(reader.txn))
        defer { try? FileManager.default.removeItem(atPath: scratchPath) }
        let writer = TableWriter(tables: scratchTables, catalog: catalog, schema: schema, modelVersion: modelVersion)

        // 1. Every event, in order: decode, check, replay.
        var eventsChecked = 0
        var segmentsChecked = 0
        var batch: [TransactionEvent] = []
        // A resource that ran out (verify's scratch space, file descriptors, memory) is no
        // problem of the store: verify stops with it (before, a full temporary directory or
        // `ulimit -n` reported every later event and row as damage).
        var exhausted: (any Error)?
        func replay(_ events: [TransactionEvent]) {
            guard !events.isEmpty, exhausted == nil else { return }
            do {
                try scratch.write { txn in
                    for event in events { try writer.apply(txn, event, checkBeforeImages: true) }
                }
            } catch {
                if Self.isExhaustion(error) {
                    exhausted = error
                    return
                }
                // Find the event at fault by replaying the batch one event at a time.
                for event in events {
                    do {
                        try scratch.write { txn in try writer.apply(txn, event, checkBeforeImages: true) }
                    } catch {
                        problem(.beforeImage, "event \(event.sequence)", "does not apply to the replayed state: \(error)")
                    }
                }
            }
        }
        let purged = try reader.purgedThrough
        let (head, compactedThrough) = (try reader.head, try reader.compactedThrough)
        // Each manifest entry on its own: a damaged one is reported, and the others checked.
        var descriptors: [SegmentDescriptor] = []
        try reader.txn.forEach(in: tables.segments) { key, value in
            let first = key.withUnsafeBytes { readBigEndian($0) } ?? 0
            do {
                descriptors.append(try value.withUnsafeBytes { raw in
                    try SegmentDescriptor.decode(raw, context: "manifest entry for the segment starting at \(first)")
                })
            } catch {
                problem(.segment, "manifest entry \(first)", "\(error)")
            }
            return .next
        }
        let base = purged > 0 ? try reader.checkpointRows(purged) : nil
        // Segment files a purge after the snapshot set aside are found under their new names.
        let snapshot = reader.txn.id
        // After a purge, the log starts from the base snapshot as of the purge point.
        if purged > 0 {
            if let base, base.hasCounters {
                do {
                    try scratch.write { txn in try writer.restore(txn, base) }
                } catch {
                    problem(.base, "checkpoint \(purged)", "the base snapshot does not load: \(error)")
                }
            } else {
                problem(
                    .base, "checkpoint \(purged)",
                    "history through \(purged) was purged, but the base snapshot as of \(purged) is \(base == nil ? "missing" : "incomplete (no counters)")")
            }
        }
        var expected: UInt64 = purged + 1

        // Checkpoints (other than the base) are compared with the replayed state as of their
        // sequence: as-of reads start from them, so a damaged one would read wrong silently.
        var checkpoints = try reader.checkpoints().filter { $0 > purged }[...]
        // The per-context index the log implies: every event's row, and the pairs by hash.
        var contextRows: [(pair: UInt64, sequence: UInt64)] = []
        var pairNames: [UInt64: [(author: String?, contextName: String?)]] = [:]
        // Whether the stored derived values must be what the opening version's derivations
        // give (see `checkDerivedValues`): an event of a version that doesn't maintain them
        // all may leave them stale until a migration of one that does recomputes them.
        var derivedValuesKept = purged == 0
        var maintains: [Int: Bool] = [:]
        let checkedPlans = Set((schema.derivations?.plans ?? []).filter { !$0.isNow })
        // The largest magnitude each object's floating-point derived value held in the log:
        // a sum kept from its stored value rounds relative to the totals it went through.
        let checkedNames = Set(checkedPlans.map(\.attribute))
        var floatingScales: [DerivedValueKey: Double] = [:]
        func queue(_ event: TransactionEvent) {
            if !checkedPlans.isEmpty {
                for case .update(let id, let changes) in event.groups.lazy.flatMap(\.changes) {
                    for case .value(let property, let before, let after) in changes where checkedNames.contains(property) {
                        for value in [before, after] {
                            guard case .attribute(let attribute) = value, let magnitude = Self.floatingMagnitude(attribute) else { continue }
                            floatingScales[DerivedValueKey(id: id, property: property), default: 0] =
                                max(floatingScales[DerivedValueKey(id: id, property: property)] ?? 0, magnitude)
                        }
                    }
                }
                let kept = maintains[event.modelVersion] ?? {
                    let plans = (try? catalog.schema(forModelVersion: event.modelVersion).derivations?.plans) ?? nil
                    let kept = checkedPlans.isSubset(of: Set(plans ?? []))
                    maintains[event.modelVersion] = kept
                    return kept
                }()
                if !kept {
                    derivedValuesKept = false
                } else if event.kind == .migration {
                    derivedValuesKept = true
                }
            }
            let pair = ContextIndex.pairHash(author: event.author, contextName: event.contextName)
            contextRows.append((pair, event.sequence))
            if !(pairNames[pair]?.contains { $0.author == event.author && $0.contextName == event.contextName } ?? false) {
                pairNames[pair, default: []].append((event.author, event.contextName))
            }
            batch.append(event)
            while let next = checkpoints.first, next <= event.sequence {
                checkpoints.removeFirst()
                guard next == event.sequence else { continue }
                replay(batch)
                batch.removeAll()
                do {
                    try compareCheckpoint(next, reader, scratch: scratch, tables: scratchTables, writer: writer, report: problem)
                } catch {
                    problem(.projection, "checkpoint \(next)", "can't be read: \(error)")
                }
            }
            if batch.count >= 512 {
                replay(batch)
                batch.removeAll()
            }
        }

        for descriptor in descriptors {
            segmentsChecked += 1
            let location = "segment \(descriptor.fileName)"
            if descriptor.first != expected {
                problem(.sequence, location, "starts at \(descriptor.first), expected \(expected)")
            }
            let segmentReader: SegmentReader
            do {
                segmentReader = try SegmentReader(descriptor, directory: segmentDirectory, snapshot: snapshot)
            } catch {
                if Self.isExhaustion(error) { throw error }
                problem(.segment, location, "\(error)")
                expected = descriptor.last + 1
                continue
            }
            // The size of the file the reader opened, not of whatever has its name by now.
            do {
                let size = try segmentReader.fileSize()
                if size != Int(descriptor.compressedBytes) {
                    problem(.segment, location, "is \(size) bytes, the manifest says \(descriptor.compressedBytes)")
                }
            } catch {
                problem(.segment, location, "\(error)")
            }
            for (index, frame) in descriptor.frames.enumerated() {
                let events: [[UInt8]]
                do {
                    events = try segmentReader.events(inFrame: index)
                } catch {
                    if Self.isExhaustion(error) { throw error }
                    problem(.segment, "\(location) frame \(index) (events \(frame.first)…\(frame.last))", "\(error)")
                    expected = frame.last + 1
                    continue
                }
                for bytes in events {
                    do {
                        let event = try bytes.withUnsafeBytes { raw in
                            try EventCodec.decode(raw, catalog: catalog) { "event \(expected) (\(location) frame \(index))" }
                        }
                        eventsChecked += 1
                        if event.sequence != expected {
                            problem(.sequence, "\(location) frame \(index)", "holds event \(event.sequence) where \(expected) was expected")
                        }
                        expected = event.sequence + 1
                        queue(event)
                    } catch {
                        problem(.event, "\(location) frame \(index)", "\(error)")
                        // The next event is the next sequence: not a second problem.
                        expected += 1
                    }
                }
            }
        }
        if compactedThrough != 0 && expected != compactedThrough + 1 {
            problem(.sequence, "segments", "end at \(expected - 1), the store says events through \(compactedThrough) are compacted")
            expected = compactedThrough + 1
        }

        try forEachRawEvent(in: reader.txn, from: compactedThrough + 1, through: .max) { sequence, bytes, damage in
            if let damage {
                problem(.event, "event \(sequence)", damage)
                if sequence != expected {
                    problem(.sequence, "event \(sequence)", "follows \(expected - 1): events \(expected)…\(sequence &- 1) are missing")
                }
                expected = sequence &+ 1
                return
            }
            do {
                let event = try bytes.withUnsafeBytes { raw in
                    try EventCodec.decode(raw, catalog: catalog) { "event \(sequence)" }
                }
                eventsChecked += 1
                if event.sequence != sequence {
                    problem(.event, "event \(sequence)", "says it is event \(event.sequence)")
                }
                if sequence != expected {
                    problem(.sequence, "event \(sequence)", "follows \(expected - 1): events \(expected)…\(sequence - 1) are missing")
                }
                expected = sequence + 1
                queue(event)
            } catch {
                problem(.event, "event \(sequence)", "\(error)")
                expected = sequence + 1
            }
        }
        replay(batch)
        if expected - 1 != head {
            problem(.sequence, "head", "the store's head is \(head), but the last event is \(expected - 1)")
        }

        // 2. Compare each derived table with its replayed twin.
        let objectsRebuilt = try scratch.read { txn in try txn.count(in: scratchTables.state) }
        // After a purge, an index the opening model version doesn't define (an earlier or
        // later version's, kept by that version's writers) can't be rebuilt: the base snapshot
        // rebuilds only this version's indexes (spec 0004 §8). Its rows aren't compared.
        let own = Set(schema.indexes.compactMap { try? writer.indexCode($0.name) })
        let foreign: (([UInt8]) -> Bool)? =
            purged > 0 ? { key in key.count >= 2 && !own.contains(UInt16(key[0]) << 8 | UInt16(key[1])) } : nil
        for (name, live) in tables.projections {
            guard let rebuilt = scratchTables.projections.first(where: { $0.0 == name })?.1 else { continue }
            let skipping = name == "index" ? foreign : nil
            var liveRows = try rows(reader.txn, live)
            if let skipping { liveRows.removeAll { skipping($0.0) } }
            try compare(name, live: liveRows, rebuilt: rebuilt, scratch: scratch, writer: writer, skipping: skipping) { kind, location, message in
                problem(kind, location, message)
            }
        }

        if derivedValuesKept, let derivations = schema.derivations, !checkedPlans.isEmpty {
            checkDerivedValues(
                derivations, plans: checkedPlans, floatingScales: floatingScales, scratch: scratch, writer: writer, head: head, report: problem)
        }

        try compareContextIndex(reader, expected: contextRows, pairNames: pairNames, purged: purged, head: head, report: problem)

        // Every consumer's processed point is a sequence of the log.
        try reader.txn.forEach(in: tables.consumers) { key, value in
            let bytes = value.withUnsafeBytes { Array($0) }
            if bytes.count != 8 || (bytes.withUnsafeBytes { readBigEndian($0) } ?? 0) > head {
                let name = key.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
                problem(.integrity, "consumer \(name.debugDescription)", LogReader.consumerDamage(bytes, head: head))
            }
            return .next
        }

        // 3. Every reference points at a live object, of its relationship's destination (or a
        // sub-entity) in the model version the source's record was written with — before
        // session 33 a migration to a version that made a relationship lead to another entity
        // kept references to the old one's objects, and this found nothing. One lookup of the
        // source's record per reference (its version is its first bytes); what a relationship
        // may name is worked out once per relationship and version.
        struct Leads: Hashable {
            let code: UInt16
            let version: Int
        }
        /// The entity codes a relationship may name in a model version, with its name there
        /// and its destination; nil: not a relationship of that version (an earlier version's
        /// record names it by a code the catalog gives another name) — not checked here.
        var allowedTargets: [Leads: (codes: Set<UInt16>, property: String, qualified: String, destination: String)?] = [:]
        func allowed(_ leads: Leads) -> (codes: Set<UInt16>, property: String, qualified: String, destination: String)? {
            if let known = allowedTargets[leads] { return known }
            var found: (codes: Set<UInt16>, property: String, qualified: String, destination: String)?
            if let qualified = catalog.relationshipName(leads.code), let dot = qualified.lastIndex(of: "."),
                let versionSchema = try? catalog.schema(forModelVersion: leads.version),
                let property = versionSchema.entities[String(qualified[..<dot])]?.propertiesByName[String(qualified[qualified.index(after: dot)...])],
                let destination = property.destination
            {
                let codes = Set(versionSchema.model.selfAndSubentityNames(of: destination).compactMap { try? catalog.entityCode($0) })
                found = (codes, property.name, qualified, destination)
            }
            allowedTargets[leads] = found
            return found
        }
        try reader.txn.forEach(in: tables.referrers) { key, _ in
            guard let target = key.withUnsafeBytes({ ObjectKey($0) }),
                let source = key.withUnsafeBytes({ ObjectKey($0, at: 12) }),
                let code = key.withUnsafeBytes({ readBigEndian($0, at: 10, count: 2) }).map({ UInt16($0) })
            else { return .next }
            func name(_ objectKey: ObjectKey) -> String {
                (try? writer.id(objectKey).description) ?? "entity \(objectKey.entity) p\(objectKey.primaryKey)"
            }
            let targetLives = try reader.txn.containsKey(target.bytes, in: tables.state)
            if !targetLives { problem(.integrity, "references", "the target \(name(target)) of a reference does not exist") }
            // The source's record: whether it lives, and the model version it was written with.
            let written: Int?? = try reader.txn.withValue(forKey: source.bytes, in: tables.state) { span in
                span.withUnsafeBytes { raw -> Int? in
                    var r = ByteReader(raw, context: "state")
                    return try? r.count(limit: Int(Int32.max))
                }
            }
            guard let written else {
                problem(.integrity, "references", "the source \(name(source)) of a reference does not exist")
                return .next
            }
            guard targetLives, let version = written, let leads = allowed(Leads(code: code, version: version)), !leads.codes.contains(target.entity)
            else { return .next }
            let targetEntity = (try? catalog.entityName(target.entity)) ?? "entity \(target.entity)"
            problem(
                .integrity, "\(name(source)).\(leads.property)",
                "names \(name(target)), an object of \(targetEntity), but \(leads.qualified) leads to \(leads.destination) (and its sub-entities)")
            return .next
        }

        // 4. A relationship whose derived side is a to-one — an ordered to-many with a to-one
        // inverse (a playlist's songs), a one-to-one — holds each object in one source's value
        // at most: the object's to-one can name one. Replay reproduces what the events wrote,
        // so two writers that each put the same object in their list would otherwise pass.
        var singleOwner: [UInt16: String] = [:]
        for entity in schema.entities.values {
            for property in entity.properties where !property.isToMany {
                guard case .derived(let inverseEntity, let inverse)? = property.relationship,
                    let code = try? catalog.relationshipCode("\(inverseEntity).\(inverse)")
                else { continue }
                singleOwner[code] = property.qualifiedName
            }
        }
        if !singleOwner.isEmpty {
            var run: (prefix: [UInt8], sources: [ObjectKey])?
            var held: [(prefix: [UInt8], sources: [ObjectKey])] = []
            func flush() {
                guard let current = run, current.sources.count > 1 else { return }
                held.append(current)
            }
            try reader.txn.forEach(in: tables.referrers) { key, _ in
                let (prefix, code, source): ([UInt8], UInt16?, ObjectKey?) = key.withUnsafeBytes { raw in
                    (Array(raw.prefix(12)), readBigEndian(raw, at: 10, count: 2).map { UInt16($0) }, ObjectKey(raw, at: 12))
                }
                guard let code, singleOwner[code] != nil, let source else { return .next }
                if run?.prefix == prefix {
                    run?.sources.append(source)
                } else {
                    flush()
                    run = (prefix, [source])
                }
                return .next
            }
            flush()
            // Each holder named with the event that last wrote its record (its version) — not
            // necessarily the write that listed the object: the holder's history up to it is
            // where that write is.
            func name(_ key: ObjectKey) -> String { (try? writer.id(key).description) ?? "entity \(key.entity) p\(key.primaryKey)" }
            for (prefix, sources) in held {
                guard let target = prefix.withUnsafeBytes({ ObjectKey($0) }),
                    let code = prefix.withUnsafeBytes({ readBigEndian($0, at: 10, count: 2) }).map({ UInt16($0) }), let derived = singleOwner[code]
                else { continue }
                var holders: [String] = []
                for source in sources {
                    let version = (try? writer.id(source)).flatMap { id in (try? writer.readVersion(reader.txn, source, entityName: id.entity)) ?? nil }
                    holders.append(name(source) + (version.map { ", its record last written by event \($0)" } ?? ""))
                }
                let relationship = catalog.relationshipName(code) ?? "relationship \(code)"
                problem(
                    .integrity, "references \(name(target)) \(relationship)",
                    "is held by \(sources.count) objects (\(holders.joined(separator: "; "))), but its inverse \(derived) is a to-one: one object may hold it (each record's version is the last event that wrote it, not necessarily the one that listed \(name(target)))")
            }
        }

        // 5. An ordered to-many lists an object once, as an `NSOrderedSet` does: the commit
        // keeps an object's first place only, but a record whose list names one twice — an
        // event a writer didn't dedupe, or damage the replay reproduces — reads as a list with a
        // repeated member, and nothing else can tell it (its reference rows are one per pair).
        try checkOrderedListsHoldOnce(reader.txn, writer: writer, report: problem)

        // 6. Both sides of a many-to-many ordered on both sides are recorded, and agree: a
        // commit refuses one that changes one side alone, but a fill of the second side that
        // was skipped left its lists empty while the first side's held members (spec 0004
        // §4.1), and the replay reproduces it.
        try checkPairedSidesAgree(reader.txn, writer: writer, report: problem)

        if let exhausted { throw exhausted }
        return VerificationReport(
            problems: problems, eventsChecked: eventsChecked, segmentsChecked: segmentsChecked,
            objectsRebuilt: objectsRebuilt)
    }

    /// Computes every derived attribute (but `now()` ones, spec 0006 §24) afresh over the
    /// replayed state, in a scratch write transaction that is thrown away, and reports each
    /// stored value that differs (spec 0004 §8): `Team/p1.size`, *"is stored as 3,
    /// but its derivation (@count:(members)) gives 2"*. Floating-point values kept from their
    /// stored value (a `@sum` of doubles) may differ from a fresh sum in their last digits —
    /// digits of the largest totals the sum went through, which may be far larger than the
    /// value now (a balance of charges and their refunds) — so those compare within a relative
    /// 1e-9 of the largest magnitude the value held in the log (`floatingScales`) or now.
    ///
    /// The replayed state's derived values are the log's, so a difference is a derived value
    /// the commit (or a migration) computed wrong, and apps read it. Only checked when they
    /// must agree: no purge (the base snapshot's history is gone), and no event since the
    /// last migration recomputing them written by a model version that doesn't maintain
    /// every one of them (an earlier app leaves them stale until the later one next opens).
    private func checkDerivedValues(
        _ derivations: DerivationSchema, plans: Set<DerivationPlan>, floatingScales: [DerivedValueKey: Double], scratch: LMDBEnvironment,
        writer: TableWriter, head: UInt64,
        report: (VerificationProblem.Kind, String, String) -> Void
    ) {
        struct Computed: Error { let changes: [Change] }
        let changes: [Change]
        do {
            try scratch.write { txn in
                let changes = try writer.applyDerivations(
                    derivations, after: [], txn, sequence: head + 1, timestamp: Date(),
                    recomputing: Set(plans.map(\.qualifiedName)), recordUniqueKeys: { _, _, _ in })
                throw Computed(changes: changes)
            }
            return
        } catch let computed as Computed {
            changes = computed.changes
        } catch {
            report(.derived, "derived attributes", "can't be computed over the replayed state: \(error)")
            return
        }
        for change in changes {
            guard case .update(let id, let propertyChanges) = change else { continue }
            for case .value(let property, let stored, let computed) in propertyChanges {
                if case .attribute(let a) = stored, case .attribute(let b) = computed,
                    Self.closeFloatingPoint(a, b, scale: floatingScales[DerivedValueKey(id: id, property: property)] ?? 0)
                {
                    continue
                }
                let plan = derivations.plans.first { $0.attribute == property && derivations.isKind(id.entity, of: $0.entity) }
                let expression = plan.flatMap { schema.model.entity(named: $0.entity)?.attributesByName[$0.attribute]?.derivationExpression }
                let derivation = expression.map { " (\($0))" } ?? ""
                report(.derived, "\(id).\(property)", "is stored as \(stored), but its derivation\(derivation) gives \(computed)")
            }
        }
    }

    /// Whether `a` and `b` are floating-point values equal within a relative 1e-9 of the
    /// larger of them, 1, and `scale` (the largest magnitude the value held before).
    private static func closeFloatingPoint(_ a: AttributeValue, _ b: AttributeValue, scale: Double) -> Bool {
        switch (a, b) {
        case (.double, .double), (.float, .float): break
        default: return false
        }
        guard let x = double(a), let y = double(b) else { return false }
        return abs(x - y) <= 1e-9 * max(abs(x), abs(y), 1, scale)
    }

    /// The magnitude of a floating-point value (nil for other values, and for NaN and infinities).
    private static func floatingMagnitude(_ value: AttributeValue) -> Double? {
        guard let number = double(value), number.isFinite else { return nil }
        return abs(number)
    }

    private static func double(_ value: AttributeValue) -> Double? {
        switch value {
        case .double(let x): x
        case .float(let x): Double(x)
        default: nil
        }
    }

    /// Compares the `contexts` table with the rows the log implies (`expected`: one per event
    /// read, by pair hash): a row missing through `contextIndexThrough` (after it, rows are
    /// written only by writers that know the table), a row the log doesn't imply, a key that
    /// isn't 16 bytes or a value that isn't empty; rows at or before the purge point are
    /// ignored, as readers ignore them. Locations name the pair and the sequence:
    /// `contexts author "alice", context "editor" @ 57`.
    private func compareContextIndex(
        _ reader: borrowing LogReader, expected: [(pair: UInt64, sequence: UInt64)],
        pairNames: [UInt64: [(author: String?, contextName: String?)]], purged: UInt64, head: UInt64,
        report: (VerificationProblem.Kind, String, String) -> Void
    ) throws {
        let storedThrough = try? MetaKey.number(
            try reader.txn.value(forKey: MetaKey.contextIndexThrough, in: tables.meta), key: MetaKey.contextIndexThrough)
        var through = storedThrough ?? 0
        if storedThrough == nil {
            report(.integrity, "meta contextIndexThrough", "the row is not 8 bytes: the per-context index's extent is unknown")
        } else if through > head {
            report(.integrity, "meta contextIndexThrough", "is \(through), past the head \(head)")
            through = head
        }
        guard let table = tables.contexts else {
            if through > 0 {
                report(.integrity, "contexts", "the store says its per-context index covers events through \(through), but it has no contexts table")
            }
            return
        }
        // The pair a row's event actually has, by sequence, to say where a stray row belongs.
        var pairOf: [UInt64: UInt64] = [:]
        pairOf.reserveCapacity(expected.count)
        for row in expected { pairOf[row.sequence] = row.pair }
        func name(_ pair: UInt64) -> String {
            guard let names = pairNames[pair], !names.isEmpty else { return "pair \(ContextIndex.hex(bigEndianBytes(pair)))" }
            return names.map { ContextIndex.describe(author: $0.author, contextName: $0.contextName) }.joined(separator: " or ")
        }
        var live: [(pair: UInt64, sequence: UInt64)] = []
        try reader.txn.forEach(in: table) { key, value in
            let bytes = key.withUnsafeBytes { Array($0) }
            guard let row = bytes.withUnsafeBytes({ ContextIndex.decode($0) }) else {
                report(.projection, "contexts row \(ContextIndex.hex(bytes))", "its key is \(bytes.count) bytes, not 16 (pair · sequence)")
                return .next
            }
            if value.byteCount != 0 {
                report(.projection, "contexts \(name(row.pair)) @ \(row.sequence)", "its row holds \(value.byteCount) bytes; rows are empty")
            }
            if row.sequence > purged { live.append(row) }
            return .next
        }
        let rebuilt = expected.sorted { $0.pair != $1.pair ? $0.pair < $1.pair : $0.sequence < $1.sequence }
        var i = 0
        var j = 0
        while i < live.count || j < rebuilt.count {
            let order: Int
            if i == live.count { order = 1 } else if j == rebuilt.count { order = -1 } else {
                let (a, b) = (live[i], rebuilt[j])
                order = a.pair == b.pair ? (a.sequence == b.sequence ? 0 : (a.sequence < b.sequence ? -1 : 1)) : (a.pair < b.pair ? -1 : 1)
            }
            switch order {
            case -1:
                let row = live[i]
                let actual = pairOf[row.sequence].map { "event \(row.sequence) is by \(name($0))" } ?? "no event \(row.sequence) was read from the log"
                report(.projection, "contexts \(name(row.pair)) @ \(row.sequence)", "is in the live table but not in the log's replay (\(actual))")
                i += 1
            case 1:
                let row = rebuilt[j]
                if row.sequence <= through {
                    report(.projection, "contexts \(name(row.pair)) @ \(row.sequence)", "is missing from the live table (the log's replay has it)")
                }
                j += 1
            default:
                i += 1
                j += 1
            }
        }
    }

    /// Compares the checkpoint at `sequence` — its records, membership rows and counters —
    /// with the scratch tables, which hold the log's replay through `sequence`; reports each
    /// difference at `checkpoint N …`, a header whose object count is not the records', and a
    /// tally row that doesn't count its membership and counter rows.
    private func compareCheckpoint(
        _ sequence: UInt64, _ reader: borrowing LogReader, scratch: LMDBEnvironment, tables scratchTables: StoreTables,
        writer: TableWriter, report: (VerificationProblem.Kind, String, String) -> Void
    ) throws {
        guard let rows = try reader.checkpointRows(sequence) else { return }
        let location = "checkpoint \(sequence)"
        let header = try reader.txn.value(forKey: bigEndianBytes(sequence), in: tables.checkpoints) ?? []
        let count = header.count >= 8 ? header.withUnsafeBytes { readBigEndian($0) } : nil
        if header.count != 8 && header.count != 9 || count != UInt64(rows.records.count) {
            report(
                .projection, location,
                "its header (\(header.map { String(format: "%02x", $0) }.joined())) doesn't say it holds the \(rows.records.count) records stored")
        }
        do {
            try rows.checkTally()
        } catch {
            report(.projection, location, "its tally row doesn't count the rows stored: \(error)")
        }
        func within(_ kind: VerificationProblem.Kind, _ place: String, _ message: String) { report(kind, "\(location) \(place)", message) }
        try compare("state", live: rows.records, rebuilt: scratchTables.state, scratch: scratch, writer: writer, side: "checkpoint", report: within)
        try compare("members", live: rows.members.map { ($0, []) }, rebuilt: scratchTables.members, scratch: scratch, writer: writer, side: "checkpoint", report: within)
        if rows.hasCounters {
            try compare("counters", live: rows.counters, rebuilt: scratchTables.counters, scratch: scratch, writer: writer, side: "checkpoint", report: within)
        }
    }

    /// Reports every entry that differs between a live table's rows (or a checkpoint's, as
    /// `side` says) and its rebuilt twin.
    private func compare(
        _ name: String, live liveRows: [([UInt8], [UInt8])], rebuilt: LMDBDatabase, scratch: LMDBEnvironment, writer: TableWriter,
        side: String = "live", skipping: (([UInt8]) -> Bool)? = nil, report: (VerificationProblem.Kind, String, String) -> Void
    ) throws {
        var rebuiltRows = try scratch.read { txn in try rows(txn, rebuilt) }
        if let skipping { rebuiltRows.removeAll { skipping($0.0) } }
        var i = 0
        var j = 0
        while i < liveRows.count || j < rebuiltRows.count {
            let order: Int
            if i == liveRows.count { order = 1 } else if j == rebuiltRows.count { order = -1 } else {
                order = liveRows[i].0.lexicographicallyPrecedes(rebuiltRows[j].0) ? -1 : (liveRows[i].0 == rebuiltRows[j].0 ? 0 : 1)
            }
            switch order {
            case -1:
                report(.projection, describe(name, liveRows[i].0, writer), side == "live" ? "is in the live table but not in the log's replay" : "is in the \(side) but not in the log's replay")
                i += 1
            case 1:
                report(.projection, describe(name, rebuiltRows[j].0, writer), side == "live" ? "is missing from the live table (the log's replay has it)" : "is missing from the \(side) (the log's replay has it)")
                j += 1
            default:
                if liveRows[i].1 != rebuiltRows[j].1 {
                    report(.projection, describe(name, liveRows[i].0, writer), valueDifference(name, liveRows[i], rebuiltRows[j], writer, side: side))
                }
                i += 1
                j += 1
            }
        }
    }

    private func rows(_ txn: borrowing LMDBTransaction, _ database: LMDBDatabase) throws -> [([UInt8], [UInt8])] {
        var rows: [([UInt8], [UInt8])] = []
        try txn.forEach(in: database) { key, value in
            rows.append((key.withUnsafeBytes { Array($0) }, value.withUnsafeBytes { Array($0) }))
            return .next
        }
        return rows
    }

    /// Names a table entry: `state Member/p3`, `index Member.age: Member/p3`, …
    private func describe(_ table: String, _ key: [UInt8], _ writer: TableWriter) -> String {
        key.withUnsafeBytes { raw in
            func object(at offset: Int) -> String {
                guard let objectKey = ObjectKey(raw, at: offset) else { return "?" }
                return (try? writer.id(objectKey).description) ?? "entity \(objectKey.entity) p\(objectKey.primaryKey)"
            }
            func relationship(at offset: Int) -> String {
                guard let code = readBigEndian(raw, at: offset, count: 2) else { return "?" }
                return catalog.relationshipName(UInt16(code)) ?? "relationship \(code)"
            }
            switch table {
            case "state": return "state \(object(at: 0))"
            case "index":
                let code = readBigEndian(raw, at: 0, count: 2).map { UInt16($0) }
                let index = code.flatMap { catalog.indexName($0) } ?? "?"
                return "index \(index): \(object(at: raw.count - ObjectKey.byteCount))"
            case "referrers": return "references \(object(at: 12)) \(relationship(at: 10)) → \(object(at: 0))"
            case "members": return "membership \(object(at: 0)) \(relationship(at: 10)) ∋ \(object(at: 12))"
            case "history": return "history \(object(at: 0)) @ \(readBigEndian(raw, at: 10) ?? 0)"
            case "counters":
                let code = readBigEndian(raw, at: 0, count: 2).map { UInt16($0) } ?? 0
                return "counter \((try? catalog.entityName(code)) ?? "entity \(code)")"
            default: return "\(table) \(key)"
            }
        }
    }

    /// Says how a live value differs from the replayed one; for records, property by property.
    private func valueDifference(
        _ table: String, _ live: ([UInt8], [UInt8]), _ rebuilt: ([UInt8], [UInt8]), _ writer: TableWriter, side: String = "live"
    ) -> String {
        if table == "counters" {
            let a = live.1.withUnsafeBytes { readBigEndian($0) } ?? 0
            let b = rebuilt.1.withUnsafeBytes { readBigEndian($0) } ?? 0
            guard live.1.count == 8 else {
                return "\(side) row of \(live.1.count) bytes (\(live.1.map { String(format: "%02x", $0) }.joined())), not 8; the log's replay says \(b)"
            }
            return "\(side) \(a), the log's replay says \(b)"
        }
        guard table == "state", let key = live.0.withUnsafeBytes({ ObjectKey($0) }), let id = try? writer.id(key) else {
            return "the \(side) value differs from the log's replay"
        }
        do {
            let a = try live.1.withUnsafeBytes { try writer.decodeRecord($0, entityName: id.entity, context: "\(side) record \(id)") }
            let b = try rebuilt.1.withUnsafeBytes { try writer.decodeRecord($0, entityName: id.entity, context: "replayed record \(id)") }
            var parts: [String] = []
            for property in Set(a.values.keys).union(b.values.keys).sorted() where a.values[property] != b.values[property] {
                parts.append("\(property): \(side) \(a.values[property] ?? .null), the log's replay says \(b.values[property] ?? .null)")
            }
            if a.version != b.version { parts.append("version: \(side) \(a.version), the log's replay says \(b.version)") }
            return parts.isEmpty ? "the record's encoding differs" : parts.joined(separator: "; ")
        } catch {
            return "the \(side) record does not decode: \(error)"
        }
    }
}

/// One object's derived attribute, for verify's floating-point tolerance.
struct DerivedValueKey: Hashable {
    let id: StoredObjectID
    let property: String
}
