import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// Reads pinned to a generation (``EventLog/read(pinnedTo:_:)``, spec 0006 §22) against
/// `state(asOf:)` — itself checked against the random workload's own model — over the random
/// workload's store: every read a pinned reader answers, at sampled generations, as more
/// transactions land after each view was made.
///
/// `STRATA_GENERATION_TRANSACTIONS` sets the transactions per round (default 120, three rounds).
@Suite("Event log: reads pinned to a generation")
struct GenerationViewTests {
    static let entities = ["Club", "Member", "Sponsor", "Badge"]

    /// Checks every read through `view` against the state as of its generation.
    static func check(_ log: EventLog, _ view: GenerationView, everInserted: [StoredObjectID], rng: inout SeededGenerator, context: String) throws {
        guard let sequence = view.sequence else { throw WorkloadFailure("\(context): the view isn't pinned") }
        let expected = try log.read { try $0.state(asOf: sequence) }.objects
        try log.read(pinnedTo: view) { (reader: borrowing LogReader) throws in
            #expect(reader.generation == sequence, "\(context)")
            for entity in Self.entities {
                let members = entity == "Member" ? LibraryShape.memberEntities : [entity]
                let wanted = expected.filter { members.contains($0.key.entity) }
                // Entity scans: the same objects and values, in key order (entity, then primary key).
                var scanned: [StoredObjectID] = []
                var values: [StoredObjectID: [String: LogValue]] = [:]
                try reader.forEachObject(of: entity) { object in
                    scanned.append(object.id)
                    values[object.id] = object.values
                    return .next
                }
                #expect(values == wanted, "\(context): \(entity) scan: \(stateDifferences(values, wanted))")
                let keyOrder = wanted.keys.sorted { a, b in
                    let (ea, eb) = (members.firstIndex(of: a.entity) ?? 0, members.firstIndex(of: b.entity) ?? 0)
                    return ea != eb ? ea < eb : a.primaryKey < b.primaryKey
                }
                #expect(scanned == keyOrder, "\(context): \(entity) scan order")
                var ids: [StoredObjectID] = []
                try reader.forEachObjectID(of: entity) { ids.append($0); return .next }
                #expect(ids == keyOrder, "\(context): \(entity) IDs")
                var fields: [StoredObjectID: [String: LogValue]] = [:]
                try reader.forEachFields(of: entity) { found in
                    fields[found.id] = found.object.values
                    return .next
                }
                #expect(fields == wanted, "\(context): \(entity) fields: \(stateDifferences(fields, wanted))")
                var inPlace: [StoredObjectID: [String: LogValue]] = [:]
                try reader.forEachFieldsInPlace(of: entity) { id, _, names, buffer in
                    var object: [String: LogValue] = [:]
                    for (name, value) in zip(names, buffer) { if let value { object[name] = value } }
                    inPlace[id] = object
                    return .next
                }
                #expect(inPlace == wanted, "\(context): \(entity) fields in place")
                #expect(try reader.count(of: entity) == wanted.count, "\(context): \(entity) count")
                // A scan stopped early stops.
                if keyOrder.count > 2 {
                    var firstTwo: [StoredObjectID] = []
                    try reader.forEachObjectID(of: entity) { id in
                        firstTwo.append(id)
                        return firstTwo.count == 2 ? .stop : .next
                    }
                    #expect(firstTwo == Array(keyOrder.prefix(2)), "\(context): \(entity) stopped scan")
                }
            }
            // Objects by ID: those gone since, those made since, and the rest; with versions.
            let ids = everInserted
            var byFields: [StoredObjectID: [String: LogValue]] = [:]
            try reader.forEachFields(ids) { byFields[$0.id] = $0.object.values }
            #expect(byFields == expected.filter { ids.contains($0.key) }, "\(context): fields by ID")
            for id in ids {
                let object = try reader.object(id)
                #expect(object?.values == expected[id], "\(context): \(id)")
                #expect(try reader.contains(id) == (expected[id] != nil), "\(context): contains \(id)")
                if expected[id] != nil {
                    let version = try reader.history(of: id).last { $0 <= sequence }
                    let stored = try reader.version(of: id)
                    #expect(object?.version == version && stored == version, "\(context): version of \(id)")
                } else {
                    #expect(try reader.version(of: id) == nil)
                }
            }
            // Relationships, both sides.
            for (id, objectValues) in expected {
                for (name, side) in LibraryShape.relationships(of: id.entity) {
                    let found = try reader.related(id, name)
                    switch side {
                    case .recorded:
                        switch objectValues[name] {
                        case .reference(let target)?: #expect(found == [target], "\(context): \(id).\(name)")
                        case .references(let targets)?: #expect(found == targets, "\(context): \(id).\(name)")
                        default: #expect(found.isEmpty, "\(context): \(id).\(name) is \(found)")
                        }
                    case .derived(let sources, let property):
                        let referrers = expected.filter { source, values in
                            guard sources.contains(source.entity) else { return false }
                            switch values[property] {
                            case .reference(let target)?: return target == id
                            case .references(let targets)?: return targets.contains(id)
                            default: return false
                            }
                        }.keys.sorted()
                        #expect(found == referrers, "\(context): \(id).\(name) (derived)")
                    }
                }
            }
            // Index scans: the members whose value was in range then, in value order.
            let members = expected.filter { LibraryShape.memberEntities.contains($0.key.entity) }
            func age(_ values: [String: LogValue]) -> Int32? {
                if case .attribute(.int32(let n))? = values["age"] { return n }
                return nil
            }
            let ages = members.values.compactMap(age)
            for round in 0..<12 {
                var range: IndexRange
                switch round {
                case 0: range = .all
                case 1: range = .isNil
                case 2: range = .equal(.int32(rng.pick(ages) ?? 30))
                default:
                    let a = rng.pick(ages) ?? 20, b = rng.pick(ages) ?? 60
                    range = IndexRange(
                        lower: rng.chance(0.8) ? .int32(min(a, b)) : nil, includesLower: rng.chance(0.5),
                        upper: rng.chance(0.8) ? .int32(max(a, b)) : nil, includesUpper: rng.chance(0.5))
                }
                func contains(_ value: Int32?) -> Bool {
                    if range.matchesNil { return value == nil }
                    guard let value else { return false }
                    if case .int32(let low)? = range.lower, range.includesLower ? value < low : value <= low { return false }
                    if case .int32(let high)? = range.upper, range.includesUpper ? value > high : value >= high { return false }
                    return true
                }
                let inRange = Set(members.filter { contains(age($0.value)) }.keys)
                for reverse in [false, true] {
                    var scanned: [StoredObjectID] = []
                    try reader.scanIndex(entity: "Member", attribute: "age", range: range, reverse: reverse) { scanned.append($0); return .next }
                    #expect(Set(scanned) == inRange && scanned.count == inRange.count, "\(context): age scan \(range) reverse \(reverse)")
                    let scannedAges = scanned.map { members[$0].flatMap(age) ?? .min }
                    #expect(scannedAges == (reverse ? scannedAges.sorted(by: >) : scannedAges.sorted()), "\(context): age order")
                    if scanned.count > 3 {
                        var first: [StoredObjectID] = []
                        try reader.scanIndex(entity: "Member", attribute: "age", range: range, reverse: reverse) { id in
                            first.append(id)
                            return first.count == 3 ? .stop : .next
                        }
                        #expect(first == Array(scanned.prefix(3)), "\(context): stopped age scan")
                    }
                }
                #expect(try reader.countIndex(entity: "Member", attribute: "age", range: range) == inRange.count, "\(context): age count \(range)")
                // Captains alone: the sub-entity's share of the inherited index.
                var captains: [StoredObjectID] = []
                try reader.scanIndex(entity: "Captain", attribute: "age", range: range) { captains.append($0); return .next }
                #expect(Set(captains) == inRange.filter { $0.entity == "Captain" }, "\(context): captains' age scan")
            }
            var emails: Set<StoredObjectID> = []
            try reader.scanIndex(entity: "Member", attribute: "email", range: .all) { emails.insert($0); return .next }
            #expect(emails == Set(members.filter { $0.value["email"].map { $0 != .null } ?? false }.keys), "\(context): email scan")
        }
    }

    @Test("every read pinned to a sampled generation equals the state as of it, as later transactions land (the view catching up)")
    func pinnedReadsMatchAsOf() throws {
        let dir = try TemporaryDirectory("strata-generations")
        let perRound = environmentNumber("STRATA_GENERATION_TRANSACTIONS", default: 120)
        let workload = LibraryWorkload(log: try openLog(dir, model: try libraryModel()) { $0.checkpointInterval = 50 }, seed: 0x6E_0E_0A)
        workload.targetPopulation = 150
        var views: [GenerationView] = []
        var rng = SeededGenerator(state: 7)
        for round in 0..<3 {
            try workload.run(transactions: perRound, checkEvery: 1_000, fullCheckEvery: 100_000)
            let head = try workload.log.head
            // New views now: at the head (nothing changed since: current reads), at 0, and in between.
            views.append(GenerationView(sequence: head))
            views.append(GenerationView(sequence: UInt64(rng.int(0...Int(head)))))
            if round == 0 { views.append(GenerationView(sequence: 0)) }
            for view in views {
                try Self.check(workload.log, view, everInserted: workload.everInserted, rng: &rng, context: "round \(round), generation \(view.sequence ?? 0) of head \(head)")
            }
        }
        #expect(views.contains { $0.changedObjectCount > 50 }, "the views held changed objects: \(views.map(\.changedObjectCount))")
    }

    @Test("a view made without a sequence pins to the head at its first read; a generation past the head or before a purge point is refused")
    func pinningAndRefusals() throws {
        let dir = try TemporaryDirectory("strata-generations")
        let log = try openLog(dir, model: try libraryModel())
        func club(_ name: String) throws {
            var draft = TransactionDraft()
            _ = draft.insert("Club", values: ["name": s(name)])
            _ = try log.commit(draft)
        }
        try club("Otters")
        let lazy = GenerationView(sequence: nil)
        #expect(lazy.sequence == nil)
        try log.read(pinnedTo: lazy) { (reader: borrowing LogReader) throws in #expect(try reader.count(of: "Club") == 1) }
        #expect(lazy.sequence == 1)
        try club("Herons")
        try log.read(pinnedTo: lazy) { (reader: borrowing LogReader) throws in
            #expect(try reader.count(of: "Club") == 1)
            #expect(try reader.head == 2, "the log itself reads as it is")
        }
        #expect(lazy.changedObjectCount == 1)
        try log.read { (reader: borrowing LogReader) throws in #expect(try reader.count(of: "Club") == 2) }

        let future = GenerationView(sequence: 5)
        #expect(throws: LogError.sequenceOutOfRange(requested: 5, head: 2)) { try log.read(pinnedTo: future) { _ in () } }
        for name in ["Grebes", "Coots"] { try club(name) }
        let early = GenerationView(sequence: 1)
        try log.read(pinnedTo: early) { (reader: borrowing LogReader) throws in #expect(try reader.count(of: "Club") == 1) }
        _ = try log.purge(through: 3, author: "test")
        try club("Rails")
        #expect(throws: LogError.historyPurged(requested: 1, purgedThrough: 3)) { try log.read(pinnedTo: early) { _ in () } }
    }
}
