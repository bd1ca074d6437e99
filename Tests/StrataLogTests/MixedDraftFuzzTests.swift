import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

// Random drafts mixing runs of deletes with inserts, restores, updates and membership changes
// across groups, checked against the test's own model of the store: whether the commit is
// refused (and why), the state, the history, the before-images of deletes, the event read
// back, and `verify`.
//
// Knobs: STRATA_MIXED_DRAFTS (drafts, default 400), STRATA_MIXED_SEED.

@Suite("Event log: random drafts mixing deletes, inserts, restores, updates and memberships")
struct MixedDraftFuzzTests {
    static let long = String(repeating: "l", count: 700)
    /// Team's derived attributes, which the log computes.
    static let derived: Set<String> = ["count", "key"]

    /// Version 2 adds `aardvark` to Thing, which sorts first: every other property's code
    /// moves up, so records version 1 wrote have another layout than the events of version 2.
    static func model(version: Int = 1) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Attribute("code", .string)
                // Kept by the log (verify checks them): not in the test's model.
                Attribute("count", .int64).derived(from: "things.@count")
                Attribute("key", .string).derived(from: "lowercase(code)")
                Relationship("things", to: "Thing", inverse: "team", toMany: true)
                Relationship("likes", to: "Thing", toMany: true)
                Unique("code")
                Unique("key")
            }
            Entity("Thing") {
                if version > 1 { Attribute("aardvark", .string) }
                Attribute("name", .string).indexed()
                Attribute("email", .string)
                Attribute("a", .int32)
                Attribute("b", .int32)
                Relationship("team", to: "Team", inverse: "things")
                Relationship("picks", to: "Team", toMany: true, ordered: true)
                Relationship("friend", to: "Thing")
                Unique("email")
                Unique("a", "b")
                // A reference in a uniqueness constraint: its key holds the target's key.
                Unique("friend", "a")
                FetchIndex("byTeamName", "team", "name")
            }
            Entity("Gadget", parent: "Thing") {
                Attribute("size", .int32)
            }
        }
    }

    enum Expected: Equatable, CustomStringConvertible {
        case accepted
        case notFound, exists, missingReference, uniqueness
        /// A membership change adding and removing the same object.
        case ambiguous

        var description: String {
            switch self {
            case .accepted: "accepted"
            case .notFound: "objectNotFound"
            case .exists: "objectExists"
            case .missingReference: "missingReference"
            case .uniqueness: "uniquenessViolation"
            case .ambiguous: "invalidOperation"
            }
        }

        init(_ error: any Error) {
            switch error as? LogError {
            case .objectNotFound?: self = .notFound
            case .objectExists?: self = .exists
            case .missingReference?: self = .missingReference
            case .uniquenessViolation?: self = .uniqueness
            case .invalidOperation(let message)? where message.contains("both adds and removes"): self = .ambiguous
            default: self = .accepted
            }
        }
    }

    typealias Values = [String: LogValue]

    /// The test's model: live objects' recorded values, counters, history.
    struct Model {
        var objects: [StoredObjectID: Values] = [:]
        var last: [String: UInt64] = [:]
        var history: [StoredObjectID: [UInt64]] = [:]
        var gone: Set<StoredObjectID> = []

        func referrers(of target: StoredObjectID) -> [StoredObjectID] {
            objects.compactMap { source, values in
                values.values.contains { value in
                    switch value {
                    case .reference(let id): id == target
                    case .references(let ids): ids.contains(target)
                    default: false
                    }
                } ? source : nil
            }.sorted()
        }

        var dangling: Bool {
            objects.values.contains { values in
                values.values.contains { value in
                    switch value {
                    case .reference(let id): objects[id] == nil
                    case .references(let ids): ids.contains { objects[$0] == nil }
                    default: false
                    }
                }
            }
        }

        var clash: Bool {
            var seen: Set<[LogValue]> = []
            for (id, values) in objects {
                let keys: [[LogValue]] =
                    id.entity == "Team"
                    ? [[.attribute(.string("code")), values["code"] ?? .null]]
                    : [
                        [.attribute(.string("email")), values["email"] ?? .null],
                        [.attribute(.string("ab")), values["a"] ?? .null, values["b"] ?? .null],
                        [.attribute(.string("fa")), values["friend"] ?? .null, values["a"] ?? .null],
                    ]
                for key in keys where !key.contains(.null) {
                    if !seen.insert(key).inserted { return true }
                }
            }
            return false
        }
    }

    @Test("random mixed drafts: refusals, state, history, delete before-images and verify as the model says")
    func randomMixedDrafts() throws {
        let drafts = environmentNumber("STRATA_MIXED_DRAFTS", default: 400)
        let seed = UInt64(environmentNumber("STRATA_MIXED_SEED", default: 24))
        var random = SeededGenerator(seed: seed)
        let dir = try TemporaryDirectory()
        var model = Model()
        var outcomes: [Expected: Int] = [:]

        // The second half with the store reopened under version 2: its objects were written by
        // version 1 until a draft changes them.
        for version in 1...2 {
            let log = try openLog(dir, model: try Self.model(version: version))
            for round in (version == 1 ? 0..<(drafts / 2) : (drafts / 2)..<drafts) {
                var next = model
                var draft = TransactionDraft()
                /// How the draft names each object it may mention.
                var names: [StoredObjectID: DraftObjectID] = [:]
                for id in model.objects.keys { names[id] = .stored(id) }
                func name(_ id: StoredObjectID) -> DraftObjectID { names[id] ?? .stored(id) }
                var expected: Expected = .accepted
                func fail(_ e: Expected) { if expected == .accepted { expected = e } }
                var touched: Set<StoredObjectID> = []
                var deleteBefores: [StoredObjectID: [Values]] = [:]

                func live(_ entities: [String]) -> [StoredObjectID] {
                    next.objects.keys.filter { entities.contains($0.entity) }.sorted()
                }
                func pickTarget(_ entities: [String]) -> StoredObjectID? {
                    // Now and then one that doesn't exist (deleted), to be refused.
                    if random.chance(0.04), let dead = random.pick(next.gone.filter { entities.contains($0.entity) }.sorted()) { return dead }
                    return random.pick(live(entities))
                }
                func email() -> LogValue {
                    random.pick([.null, .attribute(.string("e1")), .attribute(.string("e2")), .attribute(.string("e3")),
                        .attribute(.string(Self.long + "a")), .attribute(.string(Self.long + "b"))]) ?? .null
                }
                func small() -> LogValue { random.pick([.null, .attribute(.int32(1)), .attribute(.int32(2))]) ?? .null }
                func thingValues(_ entity: String, partial: Bool) -> [String: LogValue] {
                    var values: [String: LogValue] = [:]
                    let teams = live(["Team"])
                    let things = live(["Thing", "Gadget"])
                    var properties = ["name", "email", "a", "b", "team", "picks", "friend"]
                    if entity == "Gadget" { properties.append("size") }
                    if partial { properties = random.subset(properties, upTo: 3) }
                    for property in properties {
                        switch property {
                        case "name": values[property] = random.pick([.null, .attribute(.string("n")), .attribute(.string(Self.long + "n"))]) ?? .null
                        case "email": values[property] = email()
                        case "a", "b", "size": values[property] = small()
                        case "team": values[property] = random.chance(0.5) ? random.pick(teams).map { .reference($0) } ?? .null : .null
                        case "picks": values[property] = .references(random.subset(teams, upTo: 3))
                        case "friend": values[property] = random.chance(0.4) ? random.pick(things).map { .reference($0) } ?? .null : .null
                        default: break
                        }
                    }
                    return values
                }
                func teamValues(partial: Bool) -> [String: LogValue] {
                    var values: [String: LogValue] = [:]
                    var properties = ["name", "code", "likes"]
                    if partial { properties = random.subset(properties, upTo: 2) }
                    for property in properties {
                        switch property {
                        case "name": values[property] = random.pick([.null, .attribute(.string("t"))]) ?? .null
                        case "code": values[property] = random.pick([.null, .attribute(.string("c1")), .attribute(.string("c2")), .attribute(.string(Self.long))]) ?? .null
                        case "likes": values[property] = .references(random.subset(live(["Thing", "Gadget"]), upTo: 3))
                        default: break
                        }
                    }
                    return values
                }
                func draftValues(_ values: [String: LogValue]) -> [String: DraftValue] {
                    values.mapValues { value in
                        switch value {
                        case .null: .null
                        case .attribute(let a): .attribute(a)
                        case .reference(let id): .reference(name(id))
                        case .references(let ids): .references(ids.map(name))
                        }
                    }
                }
                /// Stored form: nils and empty lists dropped, an unordered to-many sorted.
                func stored(_ values: [String: LogValue]) -> Values {
                    var result: Values = [:]
                    for (property, value) in values {
                        switch value {
                        case .null: continue
                        case .references(let ids) where ids.isEmpty: continue
                        case .references(let ids) where property == "likes": result[property] = .references(Array(Set(ids)).sorted())
                        case .references(let ids):
                            var seen: Set<StoredObjectID> = []
                            result[property] = .references(ids.filter { seen.insert($0).inserted })
                        default: result[property] = value
                        }
                    }
                    return result
                }

                let operations = random.int(1...14)
                for _ in 0..<operations {
                    if random.chance(0.15) { draft.beginGroup(actionName: "g") }
                    let roll = random.int(0..<100)
                    let crowded = next.objects.count > 40
                    if roll < (crowded ? 55 : 35) {
                        // Delete, mostly of an object nothing references (or after nullifying).
                        guard let target = pickTarget(["Team", "Thing", "Gadget"]) else { continue }
                        if next.objects[target] != nil, random.chance(0.5) {
                            for source in next.referrers(of: target) where source != target && random.chance(0.8) {
                                guard var values = next.objects[source] else { continue }
                                var change: [String: LogValue] = [:]
                                for (property, value) in values {
                                    switch value {
                                    case .reference(let id) where id == target: change[property] = .null
                                    case .references(let ids) where ids.contains(target): change[property] = .references(ids.filter { $0 != target })
                                    default: break
                                    }
                                }
                                draft.update(name(source), values: draftValues(change))
                                for (property, value) in change { values[property] = stored([property: value])[property] }
                                next.objects[source] = values
                                touched.insert(source)
                            }
                        }
                        draft.delete(name(target))
                        guard let before = next.objects.removeValue(forKey: target) else {
                            fail(.notFound)
                            continue
                        }
                        deleteBefores[target, default: []].append(before)
                        next.gone.insert(target)
                        touched.insert(target)
                    } else if roll < (crowded ? 65 : 55) {
                        // Insert.
                        let entity = random.pick(["Team", "Thing", "Gadget"]) ?? "Thing"
                        let values = entity == "Team" ? teamValues(partial: false) : thingValues(entity, partial: false)
                        let object = draft.insert(entity, values: draftValues(values))
                        let key = (next.last[entity] ?? 0) + 1
                        next.last[entity] = key
                        let id = StoredObjectID(entity: entity, primaryKey: key)
                        names[id] = object
                        next.objects[id] = stored(values)
                        touched.insert(id)
                    } else if roll < (crowded ? 72 : 67) {
                        // Restore a deleted object (now and then a live one, to be refused).
                        let candidates = random.chance(0.1) ? live(["Team", "Thing", "Gadget"]) : next.gone.sorted()
                        guard let id = random.pick(candidates) else { continue }
                        let values = id.entity == "Team" ? teamValues(partial: false) : thingValues(id.entity, partial: false)
                        draft.restore(id, values: draftValues(values))
                        names[id] = .stored(id)
                        guard next.objects[id] == nil else {
                            fail(.exists)
                            continue
                        }
                        next.gone.remove(id)
                        next.objects[id] = stored(values)
                        touched.insert(id)
                    } else if roll < 90 {
                        // Update.
                        guard let id = pickTarget(["Team", "Thing", "Gadget"]) else { continue }
                        let values = id.entity == "Team" ? teamValues(partial: true) : thingValues(id.entity, partial: true)
                        draft.update(name(id), values: draftValues(values))
                        guard var current = next.objects[id] else {
                            fail(.notFound)
                            continue
                        }
                        let old = current
                        for (property, value) in values {
                            current[property] = stored([property: value])[property]
                        }
                        next.objects[id] = current
                        if current != old { touched.insert(id) }
                    } else {
                        // Membership of a team's likes.
                        guard let id = pickTarget(["Team"]) else { continue }
                        let things = live(["Thing", "Gadget"]) + next.gone.filter { $0.entity != "Team" && random.chance(0.1) }
                        let added = random.subset(things, upTo: 2)
                        // Now and then an object in both lists, which the log refuses.
                        let removed = random.chance(0.05)
                            ? random.subset(things, upTo: 2) : random.subset(things.filter { !added.contains($0) }, upTo: 2)
                        draft.changeMembers(of: name(id), "likes", adding: added.map(name), removing: removed.map(name))
                        guard var current = next.objects[id] else {
                            fail(.notFound)
                            continue
                        }
                        if !Set(added).isDisjoint(with: removed) {
                            fail(.ambiguous)
                            continue
                        }
                        var members: Set<StoredObjectID> = []
                        if case .references(let ids)? = current["likes"] { members = Set(ids) }
                        let old = members
                        // As the log filters them: what is added isn't a member yet; what is
                        // removed is one (no object is in both lists: refused above).
                        let adding = Set(added).subtracting(old)
                        members.formUnion(adding)
                        members.subtract(Set(removed).intersection(old))
                        current["likes"] = members.isEmpty ? nil : .references(members.sorted())
                        next.objects[id] = current
                        if members != old { touched.insert(id) }
                    }
                }
                if expected == .accepted, next.dangling { expected = .missingReference }
                if expected == .accepted, next.clash { expected = .uniqueness }

                let context = "seed \(seed), draft \(round): " + String(describing: draft.groups.map(\.operations))
                    .replacingOccurrences(of: Self.long, with: "L").replacingOccurrences(of: "StrataLog.", with: "")
                    .replacingOccurrences(of: "TransactionDraft.Operation.", with: "").replacingOccurrences(of: "DraftValue.", with: "")
                let outcome: Expected
                var result: CommitResult?
                do {
                    result = try log.commit(draft)
                    outcome = .accepted
                } catch {
                    outcome = Expected(error)
                    #expect(outcome != .accepted, "\(error) — \(context)")
                }
                outcomes[outcome, default: 0] += 1
                #expect(outcome == expected, "\(context)")
                guard outcome == expected else { return }
                if let result {
                    for id in touched { next.history[id, default: []].append(result.sequence) }
                    // Walking back through the event (its before-images) gives the state before it.
                    let ids = touched.sorted()
                    let before = try log.read { try $0.objects(ids, asOf: result.sequence - 1) }.mapValues { $0.filter { !Self.derived.contains($0.key) } }
                    #expect(before == model.objects.filter { touched.contains($0.key) }, "\(context)")
                    model = next
                    let readBack = try log.read { try $0.event(result.sequence) }
                    #expect(readBack == result.event, "\(context)")
                    // The bytes the commit wrote (before-images copied from records included)
                    // are the event's own encoding.
                    let stored = try log.environment.read { txn in
                        var bytes: [UInt8] = []
                        try txn.forEach(in: log.tables.events, range: .prefix(bigEndianBytes(result.sequence))) { _, value in
                            value.withUnsafeBytes { bytes.append(contentsOf: $0) }
                            return .next
                        }
                        return bytes
                    }
                    #expect(stored == (try EventCodec.encode(result.event, catalog: log.catalog)), "\(context)")
                    // Each delete's before-image: the values the object had at that point.
                    var befores: [StoredObjectID: [Values]] = [:]
                    for case .delete(let id, let before) in result.event.changes {
                        befores[id, default: []].append(before.filter { !Self.derived.contains($0.key) })
                    }
                    #expect(befores == deleteBefores, "\(context)")
                }
                try log.read { (reader: borrowing LogReader) throws in
                    var ids: [StoredObjectID] = []
                    for entity in ["Team", "Thing", "Gadget"] {
                        try reader.forEachObjectID(of: entity, includingSubentities: false) { id in
                            ids.append(id)
                            return .next
                        }
                    }
                    var state: [StoredObjectID: Values] = [:]
                    for id in ids { state[id] = try reader.object(id)?.values.filter { !Self.derived.contains($0.key) } }
                    #expect(state == model.objects, "\(stateDifferences(state, model.objects)) — \(context)")
                    for (id, sequences) in model.history.sorted(by: { $0.key < $1.key }) {
                        let history = try reader.history(of: id)
                        if id.entity == "Team" {
                            // A derived count changed by others' changes adds its own entries.
                            #expect(Set(sequences).isSubset(of: history), "\(id): \(history), expected \(sequences) — \(context)")
                        } else {
                            #expect(history == sequences, "\(id): \(history), expected \(sequences) — \(context)")
                        }
                    }
                }
                if round % 25 == 24 {
                    let report = try log.verify()
                    #expect(report.isClean, "\(report.problems) — \(context)")
                }
            }
            let report = try log.verify()
            #expect(report.isClean, "\(report.problems)")
        }
        #expect((outcomes[.accepted] ?? 0) > drafts / 5, "\(outcomes)")
        if ProcessInfo.processInfo.environment["STRATA_MIXED_PRINT"] != nil { print("outcomes: \(outcomes)") }
    }
}
