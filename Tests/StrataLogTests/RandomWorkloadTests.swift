import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

// The randomized workload of issue 4: thousands of random transactions against
// `libraryModel()`, checked against the test's own model of what the store must hold (plain
// dictionaries, not `StateImage`), against a replay of the log, as of sampled sequences,
// through the indexes, and before and after compaction.
//
// Knobs (environment variables):
//   STRATA_WORKLOAD_TRANSACTIONS  transactions in the main run (default 10,000)
//   STRATA_WORKLOAD_SEED          the seed (default fixed; a failure message names it)

// MARK: - Seeded randomness and knobs

extension SeededGenerator {
    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &self) < probability }
    mutating func int(_ range: Range<Int>) -> Int { Int.random(in: range, using: &self) }
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
    mutating func pick<T>(_ items: [T]) -> T? { items.isEmpty ? nil : items[int(0..<items.count)] }
    mutating func subset<T>(_ items: [T], upTo count: Int) -> [T] {
        Array(items.shuffled(using: &self).prefix(int(0...count)))
    }
}

/// A number from the environment, or `value`.
func environmentNumber(_ name: String, default value: Int) -> Int {
    ProcessInfo.processInfo.environment[name].flatMap { Int($0) } ?? value
}

/// Up to `limit` objects on which two states differ, for failure messages.
func stateDifferences(
    _ actual: [StoredObjectID: [String: LogValue]], _ expected: [StoredObjectID: [String: LogValue]], limit: Int = 5
) -> String {
    var lines: [String] = []
    for id in Set(actual.keys).union(expected.keys).sorted() where actual[id] != expected[id] {
        lines.append("\(id): got \(actual[id].map { "\($0)" } ?? "nothing"), expected \(expected[id].map { "\($0)" } ?? "nothing")")
        if lines.count == limit { break }
    }
    return lines.isEmpty ? "no differences" : lines.joined(separator: "\n")
}

// MARK: - The test's own model of the store

/// A property value in the test's model: typed by how `libraryModel()` stores it.
enum ModelValue: Hashable {
    case attribute(AttributeValue)
    case reference(StoredObjectID)
    /// An ordered to-many relationship (never empty, no duplicates).
    case list([StoredObjectID])
    /// An unordered to-many relationship (never empty).
    case set(Set<StoredObjectID>)

    /// How `LogReader.object` reports it: unordered members in ID order.
    var logValue: LogValue {
        switch self {
        case .attribute(let value): .attribute(value)
        case .reference(let id): .reference(id)
        case .list(let ids): .references(ids)
        case .set(let ids): .references(ids.sorted())
        }
    }

    var targets: [StoredObjectID] {
        switch self {
        case .attribute: []
        case .reference(let id): [id]
        case .list(let ids): ids
        case .set(let ids): Array(ids)
        }
    }

    /// nil for a value the store doesn't keep (an empty list or set).
    var normalized: ModelValue? {
        switch self {
        case .list(let ids) where ids.isEmpty: nil
        case .set(let ids) where ids.isEmpty: nil
        default: self
        }
    }
}

/// What `libraryModel()` records and derives, written out by hand (DESIGN.md "The event";
/// the log's rule: an ordered side is recorded, else the to-one side of a one-to-many, else
/// the side whose "Entity.property" sorts first).
enum LibraryShape {
    static let memberEntities = ["Member", "Captain"]
    static let concreteEntities = ["Badge", "Captain", "Club", "Member", "Sponsor"]

    enum Side {
        case recorded
        /// The objects of `sources` whose recorded `property` holds the object.
        case derived(sources: [String], property: String)
    }

    static func relationships(of entity: String) -> [(name: String, side: Side)] {
        switch entity {
        case "Club":
            [("lineup", .recorded), ("sponsors", .recorded),
             ("members", .derived(sources: memberEntities, property: "club")),
             ("badge", .derived(sources: ["Badge"], property: "club"))]
        case "Member", "Captain":
            [("club", .recorded), ("favourites", .recorded), ("lineupClub", .derived(sources: ["Club"], property: "lineup"))]
        case "Sponsor":
            [("clubs", .derived(sources: ["Club"], property: "sponsors"))]
        case "Badge":
            [("club", .recorded)]
        default: []
        }
    }
}

/// The test's account of the store: every live object's recorded values, the last primary
/// key per entity, and every object's history.
struct ExpectedStore {
    private(set) var objects: [StoredObjectID: [String: ModelValue]] = [:]
    private(set) var lastPrimaryKey: [String: UInt64] = [:]
    var history: [StoredObjectID: [UInt64]] = [:]
    private(set) var live: [String: [StoredObjectID]] = [:]
    private var slot: [StoredObjectID: Int] = [:]

    /// Inserts an object; it gets the next primary key of its entity, as the log assigns.
    mutating func insert(_ entity: String, values: [String: ModelValue]) -> StoredObjectID {
        let key = (lastPrimaryKey[entity] ?? 0) + 1
        lastPrimaryKey[entity] = key
        let id = StoredObjectID(entity: entity, primaryKey: key)
        objects[id] = values.compactMapValues(\.normalized)
        slot[id] = live[entity, default: []].count
        live[entity, default: []].append(id)
        return id
    }

    /// Sets one property; returns whether the stored value changed.
    mutating func set(_ id: StoredObjectID, _ property: String, _ value: ModelValue?) -> Bool {
        let new = value?.normalized
        guard objects[id] != nil, objects[id]?[property] != new else { return false }
        objects[id]?[property] = new
        return true
    }

    mutating func delete(_ id: StoredObjectID) {
        guard objects.removeValue(forKey: id) != nil, let index = slot.removeValue(forKey: id) else { return }
        var ids = live[id.entity, default: []]
        let last = ids.removeLast()
        if last != id {
            ids[index] = last
            slot[last] = index
        }
        live[id.entity] = ids
    }

    func values(_ id: StoredObjectID) -> [String: ModelValue]? { objects[id] }

    func liveObjects(_ entities: [String]) -> [StoredObjectID] { entities.flatMap { live[$0] ?? [] } }

    var liveCount: Int { objects.count }

    /// What `reader.object(id)?.values` must be.
    func logValues(_ id: StoredObjectID) -> [String: LogValue]? { objects[id]?.mapValues(\.logValue) }

    /// The whole state as the log reports it.
    var image: [StoredObjectID: [String: LogValue]] { objects.mapValues { $0.mapValues(\.logValue) } }

    /// Every recorded reference to `target`: (source, property).
    func referrers(of target: StoredObjectID) -> [(source: StoredObjectID, property: String)] {
        var result: [(StoredObjectID, String)] = []
        for (source, values) in objects {
            for (property, value) in values where value.targets.contains(target) { result.append((source, property)) }
        }
        return result.sorted { $0.0 == $1.0 ? $0.1 < $1.1 : $0.0 < $1.0 }
    }

    /// For derived sides: "Entity.property" of the recorded side → target → sources.
    func reverseReferences() -> [String: [StoredObjectID: [StoredObjectID]]] {
        var result: [String: [StoredObjectID: [StoredObjectID]]] = [:]
        for (source, values) in objects {
            for (property, value) in values {
                for target in value.targets { result["\(source.entity).\(property)", default: [:]][target, default: []].append(source) }
            }
        }
        return result
    }

    /// What `reader.related(id, property)` must answer.
    func related(_ id: StoredObjectID, _ property: String, side: LibraryShape.Side, reverse: [String: [StoredObjectID: [StoredObjectID]]]) -> [StoredObjectID] {
        switch side {
        case .recorded:
            switch objects[id]?[property] {
            case .reference(let target): return [target]
            case .list(let ids): return ids
            case .set(let ids): return ids.sorted()
            default: return []
            }
        case .derived(let sources, let recorded):
            return sources.flatMap { reverse["\($0).\(recorded)"]?[id] ?? [] }.sorted()
        }
    }

    /// The members and captains in a lineup; the badges' clubs (inverses are to-one there).
    func membersInLineups() -> Set<StoredObjectID> {
        Set(liveObjects(["Club"]).flatMap { objects[$0]?["lineup"]?.targets ?? [] })
    }

    func clubsWithBadges() -> Set<StoredObjectID> {
        Set(liveObjects(["Badge"]).compactMap { objects[$0]?["club"]?.targets.first })
    }
}

// MARK: - The workload

/// Builds random transactions against `libraryModel()`, keeps the expected model in step,
/// and checks the store against it.
final class LibraryWorkload {
    /// The open store; nil only while reopening (one handle per store per process: LMDB's rule).
    private var handle: EventLog?
    let seed: UInt64
    var rng: SeededGenerator
    var model = ExpectedStore()
    /// The model's whole state just after each sampled sequence.
    var snapshots: [UInt64: [StoredObjectID: [String: LogValue]]] = [:]
    var snapshotAt: Set<UInt64> = []
    /// Objects whose reads may have changed since the last check.
    var dirty: Set<StoredObjectID> = []
    /// Every object that ever existed.
    var everInserted: [StoredObjectID] = []
    var deletedObjects: [StoredObjectID] = []
    var committed = 0
    var refusedByKind: [String: Int] = [:]
    var operationCounts: [String: Int] = [:]
    var fullChecks = 0
    /// Time spent inside `commit` of good transactions.
    var commitSeconds = 0.0
    var targetPopulation = 600
    private var emailCounter = 0

    // The transaction being built.
    private var draft = TransactionDraft()
    private var handles: [StoredObjectID: DraftObjectID] = [:]
    private var predicted: [DraftObjectID: StoredObjectID] = [:]
    private var touched: Set<StoredObjectID> = []

    init(log: EventLog, seed: UInt64) {
        handle = log
        self.seed = seed
        rng = SeededGenerator(seed: seed)
    }

    var log: EventLog {
        get throws {
            guard let handle else { throw WorkloadFailure("the store is closed") }
            return handle
        }
    }

    /// Closes the store and opens it again from disk.
    func reopen() throws {
        let (path, model, configuration) = try { () throws -> (String, ManagedObjectModel, EventLog.Configuration) in
            let old = try log
            return (old.path, old.model, old.configuration)
        }()
        handle = nil
        handle = try EventLog(path: path, model: model, configuration: configuration)
    }

    var head: UInt64 { UInt64(committed) }

    // MARK: Building a draft and the model together

    private func handle(_ id: StoredObjectID) -> DraftObjectID { handles[id] ?? .stored(id) }

    /// The to-many properties of `libraryModel()`'s recorded sides.
    static let toManyProperties: Set<String> = ["lineup", "sponsors", "favourites"]

    private func draftValue(_ value: ModelValue?, property: String) -> DraftValue {
        switch value {
        case nil:
            return Self.toManyProperties.contains(property) && rng.chance(0.3) ? .references([]) : .null
        case .attribute(let v):
            return .attribute(v)
        case .reference(let id):
            return .reference(handle(id))
        case .list(let ids):
            return .references(ids.map(handle))
        case .set(let ids):
            // Any order, sometimes with a repeat: the log keeps a set.
            var members = ids.sorted().shuffled(using: &rng).map(handle)
            if let again = members.first, rng.chance(0.1) { members.append(again) }
            return .references(members)
        }
    }

    private func markDirty(_ id: StoredObjectID) {
        dirty.insert(id)
        for value in (model.values(id) ?? [:]).values { dirty.formUnion(value.targets) }
    }

    private func insert(_ entity: String, _ values: [String: ModelValue?]) -> StoredObjectID {
        var draftValues: [String: DraftValue] = [:]
        // Sorted: the workload must consume random numbers in the same order on every run.
        for name in values.keys.sorted() {
            let value = values[name] ?? nil
            // A null or empty value in an insert is dropped by the log.
            if value == nil && !rng.chance(0.3) { continue }
            draftValues[name] = draftValue(value, property: name)
        }
        let temporary = draft.insert(entity, values: draftValues)
        let id = model.insert(entity, values: values.compactMapValues { $0 })
        handles[id] = temporary
        predicted[temporary] = id
        touched.insert(id)
        everInserted.append(id)
        markDirty(id)
        operationCounts["insert \(entity)", default: 0] += 1
        return id
    }

    private func update(_ id: StoredObjectID, _ values: [String: ModelValue?]) {
        markDirty(id)
        var draftValues: [String: DraftValue] = [:]
        for name in values.keys.sorted() { draftValues[name] = draftValue(values[name] ?? nil, property: name) }
        draft.update(handle(id), values: draftValues)
        var changed = false
        for (name, value) in values where model.set(id, name, value) { changed = true }
        if changed { touched.insert(id) }
        markDirty(id)
        operationCounts["update \(id.entity)", default: 0] += 1
    }

    private func changeMembers(_ id: StoredObjectID, _ property: String, adding: [StoredObjectID], removing: [StoredObjectID]) {
        markDirty(id)
        draft.changeMembers(of: handle(id), property, adding: adding.map(handle), removing: removing.map(handle))
        var members: Set<StoredObjectID> = []
        if case .set(let current) = model.values(id)?[property] { members = current }
        let new = members.union(adding).subtracting(removing)
        if model.set(id, property, .set(new)) { touched.insert(id) }
        markDirty(id)
        operationCounts["members \(id.entity).\(property)", default: 0] += 1
    }

    /// Deletes `id`, first clearing every reference to it in the same draft.
    private func deleteClearingReferences(_ id: StoredObjectID) {
        for (source, property) in model.referrers(of: id) {
            guard let current = model.values(source)?[property] else { continue }
            switch current {
            case .reference:
                update(source, [property: nil])
            case .list(let ids):
                update(source, [property: .list(ids.filter { $0 != id })])
            case .set(let ids):
                if rng.chance(0.5) {
                    changeMembers(source, property, adding: [], removing: [id])
                } else {
                    update(source, [property: .set(ids.subtracting([id]))])
                }
            case .attribute:
                break
            }
        }
        markDirty(id)
        draft.delete(handle(id))
        model.delete(id)
        touched.insert(id)
        deletedObjects.append(id)
        operationCounts["delete \(id.entity)", default: 0] += 1
    }

    // MARK: Random values

    private func randomName() -> String {
        switch rng.int(0..<10) {
        case 0: return ""
        case 1: return "Zoë \(rng.int(0..<1000)) 李"
        case 2: return "nul\u{0}in the middle \(rng.int(0..<100))"
        case 3: return String(repeating: "long name ", count: rng.int(10...30))
        default: return "name \(rng.int(0..<100_000))"
        }
    }

    /// A fresh email (unique by construction). Some are prefixes of others, some contain
    /// NUL, some are longer than the index keeps (so the index holds a cut prefix).
    private func freshEmail() -> String {
        emailCounter += 1
        switch rng.int(0..<10) {
        case 0: return String(repeating: "x", count: 125) + "@\(emailCounter)"
        case 1: return "n\u{0}\(emailCounter)"
        case 2: return "u\(emailCounter)"
        default: return "member\(emailCounter)@strata.test"
        }
    }

    private func randomAge() -> Int32 {
        switch rng.int(0..<20) {
        case 0: return Int32.min
        case 1: return Int32.max
        case 2: return Int32(rng.int(-1000 ..< 0))
        default: return Int32(rng.int(0..<100))
        }
    }

    private func randomRating() -> Double {
        rng.chance(0.1) ? Double(rng.int(0..<5)) : Double.random(in: -1e6...1e6, using: &rng)
    }

    private func randomDate() -> Date {
        Date(timeIntervalSinceReferenceDate: Double.random(in: -2e9...2e9, using: &rng))
    }

    private func maybe(_ probability: Double, _ value: @autoclosure () -> ModelValue) -> ModelValue? {
        rng.chance(probability) ? value() : nil
    }

    private func freeMembers() -> [StoredObjectID] {
        let taken = model.membersInLineups()
        return model.liveObjects(LibraryShape.memberEntities).filter { !taken.contains($0) }
    }

    private func clubsWithoutBadge() -> [StoredObjectID] {
        let taken = model.clubsWithBadges()
        return model.liveObjects(["Club"]).filter { !taken.contains($0) }
    }

    private func memberValues(captain: Bool) -> [String: ModelValue?] {
        var values: [String: ModelValue?] = [
            "name": maybe(0.9, .attribute(.string(randomName()))),
            "email": maybe(0.8, .attribute(.string(freshEmail()))),
            "age": maybe(0.8, .attribute(.int32(randomAge()))),
            "rating": maybe(0.5, .attribute(.double(randomRating()))),
        ]
        if let club = rng.pick(model.liveObjects(["Club"])), rng.chance(0.6) { values["club"] = .reference(club) }
        let favourites = rng.subset(model.liveObjects(["Sponsor"]), upTo: 3)
        if !favourites.isEmpty { values["favourites"] = .set(Set(favourites)) }
        if captain { values["since"] = maybe(0.8, .attribute(.date(randomDate()))) }
        return values
    }

    // MARK: Random operations

    private func randomOperation() {
        let population = model.liveCount
        // Grow to about `targetPopulation` live objects, then hover there.
        let insertWeight = population < targetPopulation ? 6 : 1
        let deleteWeight = population < targetPopulation / 2 ? 1 : (population < targetPopulation ? 3 : 16)
        let weights: [(String, Int)] = [
            ("insertMember", insertWeight * 2), ("insertClub", insertWeight), ("insertSponsor", insertWeight),
            ("insertBadge", insertWeight), ("updateMember", 8), ("updateClub", 4), ("updateOther", 2),
            ("members", 4), ("swapEmails", 1), ("delete", deleteWeight), ("insertThenDelete", 1),
            ("insertLinked", 1),
        ]
        var roll = rng.int(0..<weights.reduce(0) { $0 + $1.1 })
        var chosen = weights[0].0
        for (name, weight) in weights {
            if roll < weight {
                chosen = name
                break
            }
            roll -= weight
        }
        switch chosen {
        case "insertMember":
            let captain = rng.chance(0.25)
            _ = insert(captain ? "Captain" : "Member", memberValues(captain: captain))
        case "insertClub":
            let sponsors = rng.subset(model.liveObjects(["Sponsor"]), upTo: 3)
            let lineup = rng.subset(freeMembers(), upTo: 3)
            _ = insert("Club", [
                "name": maybe(0.9, .attribute(.string(randomName()))),
                "founded": maybe(0.5, .attribute(.date(randomDate()))),
                "sponsors": sponsors.isEmpty ? nil : .set(Set(sponsors)),
                "lineup": lineup.isEmpty ? nil : .list(lineup),
            ])
        case "insertSponsor":
            _ = insert("Sponsor", ["name": maybe(0.9, .attribute(.string(randomName())))])
        case "insertBadge":
            let club = rng.chance(0.6) ? rng.pick(clubsWithoutBadge()) : nil
            _ = insert("Badge", ["colour": .attribute(.string(rng.pick(["red", "green", "blue", ""]) ?? "red")), "club": club.map { .reference($0) }])
        case "updateMember":
            guard let id = rng.pick(model.liveObjects(LibraryShape.memberEntities)) else { return }
            var candidates: [String: ModelValue?] = [
                "name": maybe(0.8, .attribute(.string(randomName()))),
                "email": maybe(0.7, .attribute(.string(freshEmail()))),
                "age": maybe(0.8, .attribute(.int32(randomAge()))),
                "rating": maybe(0.7, .attribute(.double(randomRating()))),
                "club": rng.pick(model.liveObjects(["Club"])).flatMap { rng.chance(0.7) ? ModelValue.reference($0) : nil },
                "favourites": .set(Set(rng.subset(model.liveObjects(["Sponsor"]), upTo: 3))),
            ]
            if id.entity == "Captain" { candidates["since"] = maybe(0.7, .attribute(.date(randomDate()))) }
            // Sometimes "change" a property to the value it already has: no change is recorded.
            if rng.chance(0.1), let name = model.values(id)?.keys.sorted().first { candidates = [name: model.values(id)?[name]] }
            let names = rng.subset(candidates.keys.sorted(), upTo: 3)
            update(id, candidates.filter { names.contains($0.key) })
        case "updateClub":
            guard let id = rng.pick(model.liveObjects(["Club"])) else { return }
            var values: [String: ModelValue?] = [:]
            if rng.chance(0.4) { values["name"] = maybe(0.9, .attribute(.string(randomName()))) }
            if rng.chance(0.3) { values["founded"] = maybe(0.7, .attribute(.date(randomDate()))) }
            if rng.chance(0.5) {
                var lineup: [StoredObjectID] = []
                if case .list(let current) = model.values(id)?["lineup"] { lineup = current }
                lineup = Array(lineup.shuffled(using: &rng).prefix(rng.int(0...lineup.count)))
                lineup += rng.subset(freeMembers(), upTo: 2)
                values["lineup"] = .list(lineup)
            }
            if rng.chance(0.4) { values["sponsors"] = .set(Set(rng.subset(model.liveObjects(["Sponsor"]), upTo: 4))) }
            if values.isEmpty { values["name"] = .attribute(.string(randomName())) }
            update(id, values)
        case "updateOther":
            if rng.chance(0.5), let badge = rng.pick(model.liveObjects(["Badge"])) {
                let club = rng.chance(0.5) ? rng.pick(clubsWithoutBadge()) : nil
                update(badge, ["club": club.map { .reference($0) }, "colour": maybe(0.8, .attribute(.string(randomName())))])
            } else if let sponsor = rng.pick(model.liveObjects(["Sponsor"])) {
                update(sponsor, ["name": maybe(0.8, .attribute(.string(randomName())))])
            }
        case "members":
            let clubSide = rng.chance(0.5)
            guard let id = rng.pick(model.liveObjects(clubSide ? ["Club"] : LibraryShape.memberEntities)) else { return }
            let property = clubSide ? "sponsors" : "favourites"
            var current: Set<StoredObjectID> = []
            if case .set(let ids) = model.values(id)?[property] { current = ids }
            let all = model.liveObjects(["Sponsor"])
            var adding = rng.subset(all.filter { !current.contains($0) }, upTo: 2)
            var removing = rng.subset(current.sorted(), upTo: 2)
            // No-op parts: adding a member already there, removing one that isn't.
            if rng.chance(0.2), let already = current.sorted().first, !removing.contains(already) { adding.append(already) }
            if rng.chance(0.2), let absent = all.first(where: { !current.contains($0) && !adding.contains($0) }) { removing.append(absent) }
            changeMembers(id, property, adding: adding, removing: removing)
        case "swapEmails":
            let withEmail = model.liveObjects(LibraryShape.memberEntities).filter { model.values($0)?["email"] != nil }
            guard withEmail.count >= 2, let a = rng.pick(withEmail), let b = rng.pick(withEmail.filter { $0 != a }),
                let emailA = model.values(a)?["email"], let emailB = model.values(b)?["email"]
            else { return }
            update(a, ["email": emailB])
            update(b, ["email": emailA])
        case "delete":
            let entity = rng.pick(["Member", "Captain", "Club", "Sponsor", "Badge", "Member"]) ?? "Member"
            guard let id = rng.pick(model.liveObjects([entity])) else { return }
            deleteClearingReferences(id)
        case "insertThenDelete":
            let sponsor = insert("Sponsor", ["name": .attribute(.string("short-lived"))])
            if rng.chance(0.5), let member = rng.pick(model.liveObjects(LibraryShape.memberEntities)) {
                changeMembers(member, "favourites", adding: [sponsor], removing: [])
            }
            deleteClearingReferences(sponsor)
        case "insertLinked":
            // New objects referring to each other inside one draft (temporary IDs).
            let club = insert("Club", ["name": .attribute(.string("linked \(rng.int(0..<1000))"))])
            let sponsor = insert("Sponsor", ["name": .attribute(.string("linked sponsor"))])
            let member = insert(rng.chance(0.3) ? "Captain" : "Member", ["club": .reference(club), "favourites": .set([sponsor])])
            _ = insert("Badge", ["club": .reference(club)])
            update(club, ["lineup": .list([member]), "sponsors": .set([sponsor])])
        default:
            break
        }
    }

    /// Builds and commits one random good transaction; the model follows it.
    func commitRandomTransaction() throws {
        draft = TransactionDraft(author: rng.pick([nil, "alice", "bob"]) ?? nil, contextName: rng.chance(0.5) ? "editor" : nil)
        handles = [:]
        predicted = [:]
        touched = []
        let operations = rng.int(1...4)
        for n in 0..<operations {
            if n > 0 && rng.chance(0.15) { draft.beginGroup(actionName: rng.chance(0.5) ? "Group \(n)" : nil) }
            randomOperation()
        }
        let result: CommitResult
        let commitStarted = Date()
        defer { commitSeconds += Date().timeIntervalSince(commitStarted) }
        do {
            result = try log.commit(draft)
        } catch {
            throw WorkloadFailure("transaction \(committed + 1) (seed \(seed)) was refused: \(error)\ndraft: \(draft.groups.flatMap(\.operations))")
        }
        committed += 1
        #expect(result.sequence == head, "seed \(seed)")
        for (temporary, id) in predicted where result.permanentIDs[temporary] != id {
            Issue.record("seed \(seed), transaction \(head): \(temporary) became \(String(describing: result.permanentIDs[temporary])), expected \(id)")
        }
        for id in touched { model.history[id, default: []].append(head) }
        if snapshotAt.contains(head) { snapshots[head] = model.image }
    }

    // MARK: Deliberately bad commits

    enum BadKind: String, CaseIterable {
        case danglingDelete, uniqueness, missingReference, typeMismatch, missingObject, derivedSide
    }

    /// Commits a draft that must be refused, after some valid operations in the same draft,
    /// and checks that nothing at all was written.
    func commitBadTransaction(_ kind: BadKind, compareWholeState: Bool) throws {
        var bad = TransactionDraft(author: "mallory")
        let sponsorsBefore = model.lastPrimaryKey["Sponsor"] ?? 0
        let clubsBefore = model.lastPrimaryKey["Club"] ?? 0
        let newSponsor = bad.insert("Sponsor", values: ["name": .attribute(.string("must not persist"))])
        let victim = rng.pick(model.liveObjects(LibraryShape.memberEntities))
        if let victim { bad.update(.stored(victim), values: ["name": .attribute(.string("must not persist"))]) }
        let members = model.liveObjects(LibraryShape.memberEntities)
        let clubs = model.liveObjects(["Club"])
        var kind = kind

        if kind == .danglingDelete {
            // Something referenced, deleted without clearing the reference.
            let reverse = model.reverseReferences()
            let referenced = reverse.values.flatMap(\.keys).filter { model.values($0) != nil }
            if let target = rng.pick(referenced.sorted()) {
                bad.delete(.stored(target))
            } else {
                kind = .missingReference
            }
        }
        if kind == .uniqueness {
            let withEmail = members.filter { model.values($0)?["email"] != nil }
            if let owner = rng.pick(withEmail), case .attribute(let email)? = model.values(owner)?["email"] {
                if rng.chance(0.5), let other = rng.pick(members.filter { $0 != owner }) {
                    bad.update(.stored(other), values: ["email": .attribute(email)])
                } else {
                    bad.insert(rng.chance(0.5) ? "Captain" : "Member", values: ["email": .attribute(email)])
                }
            } else {
                let email = freshEmail()
                bad.insert("Member", values: ["email": .attribute(.string(email))])
                bad.insert("Captain", values: ["email": .attribute(.string(email))])
            }
        }
        if kind == .missingReference {
            switch rng.int(0..<3) {
            case 0:
                bad.insert("Member", values: ["club": .reference(.stored(StoredObjectID(entity: "Club", primaryKey: clubsBefore + 1000)))])
            case 1:
                // A reference to an object deleted earlier (or one that never existed).
                let gone = rng.pick(deletedObjects.filter { $0.entity == "Club" }) ?? StoredObjectID(entity: "Club", primaryKey: clubsBefore + 7)
                if let member = rng.pick(members) {
                    bad.update(.stored(member), values: ["club": .reference(.stored(gone))])
                } else {
                    bad.insert("Badge", values: ["club": .reference(.stored(gone))])
                }
            default:
                // Inserted and deleted in this draft, then referred to.
                let club = bad.insert("Club", values: ["name": .attribute(.string("gone"))])
                bad.delete(club)
                bad.insert("Badge", values: ["club": .reference(club)])
            }
        }
        if kind == .typeMismatch {
            switch rng.int(0..<4) {
            case 0:
                bad.insert("Member", values: ["age": .attribute(.string("forty"))])
            case 1:
                if let member = rng.pick(members) {
                    bad.update(.stored(member), values: ["club": .reference(newSponsor)])
                } else {
                    bad.insert("Member", values: ["club": .reference(newSponsor)])
                }
            case 2:
                if let club = rng.pick(clubs), let member = rng.pick(members) {
                    bad.update(.stored(club), values: ["lineup": .reference(.stored(member))])
                } else {
                    bad.insert("Club", values: ["lineup": .reference(newSponsor)])
                }
            default:
                let member = rng.pick(members).map { DraftObjectID.stored($0) } ?? bad.insert("Member", values: [:])
                bad.insert("Club", values: ["sponsors": .references([newSponsor, member])])
            }
        }
        if kind == .derivedSide {
            if let club = rng.pick(clubs) {
                bad.changeMembers(of: newSponsor, "clubs", adding: [.stored(club)])
            } else {
                bad.update(newSponsor, values: ["clubs": .references([])])
            }
        }
        if kind == .missingObject {
            bad.update(.stored(StoredObjectID(entity: "Member", primaryKey: (model.lastPrimaryKey["Member"] ?? 0) + 500)),
                       values: ["age": .attribute(.int32(1))])
        }

        var stateBefore: StateImage?
        if compareWholeState { stateBefore = try log.read { try $0.currentState() } }
        do {
            let result = try log.commit(bad)
            Issue.record("seed \(seed): a \(kind) commit was accepted as \(result.sequence): \(result.event.changes)")
            throw WorkloadFailure("the model no longer matches the store")
        } catch let error as LogError {
            let fits: Bool
            switch (kind, error) {
            case (.danglingDelete, .missingReference), (.missingReference, .missingReference),
                (.uniqueness, .uniquenessViolation), (.typeMismatch, .typeMismatch), (.missingObject, .objectNotFound),
                (.derivedSide, .derivedRelationshipSide):
                fits = true
            default:
                fits = false
            }
            #expect(fits, "seed \(seed): a \(kind) commit was refused with \(error)")
        }
        refusedByKind[kind.rawValue, default: 0] += 1

        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.head == head, "seed \(seed): a refused \(kind) commit moved the head")
            #expect(try reader.lastPrimaryKey(of: "Sponsor") == sponsorsBefore)
            #expect(try reader.lastPrimaryKey(of: "Club") == clubsBefore)
            #expect(try reader.count(of: "Sponsor") == model.liveObjects(["Sponsor"]).count)
            if let victim { #expect(try reader.object(victim)?.values == model.logValues(victim)) }
            if let stateBefore {
                let after = try reader.currentState()
                #expect(after == stateBefore, "seed \(seed): a refused \(kind) commit changed the state: \(stateDifferences(after.objects, stateBefore.objects))")
            }
        }
    }

    // MARK: Checking

    /// Checks `ids` (and everything's counts) against the model.
    func check(_ ids: some Sequence<StoredObjectID>, _ reader: borrowing LogReader, context: String) throws {
        let reverse = model.reverseReferences()
        #expect(try reader.head == head, "\(context)")
        for entity in LibraryShape.concreteEntities {
            #expect(try reader.count(of: entity, includingSubentities: false) == model.liveObjects([entity]).count, "\(context): count of \(entity)")
            #expect(try reader.lastPrimaryKey(of: entity) == model.lastPrimaryKey[entity] ?? 0, "\(context): last key of \(entity)")
        }
        #expect(try reader.count(of: "Member") == model.liveObjects(LibraryShape.memberEntities).count, "\(context): members with captains")
        for id in ids {
            let stored = try reader.object(id)
            let expected = model.logValues(id)
            guard stored?.values == expected else {
                Issue.record("\(context): \(id) is \(stored.map { "\($0.values)" } ?? "missing"), expected \(expected.map { "\($0)" } ?? "missing")")
                continue
            }
            #expect(try reader.contains(id) == (expected != nil), "\(context): contains \(id)")
            #expect(try reader.history(of: id) == model.history[id] ?? [], "\(context): history of \(id)")
            guard let stored else { continue }
            #expect(stored.version == model.history[id]?.last, "\(context): version of \(id)")
            for (property, side) in LibraryShape.relationships(of: id.entity) {
                let related = try reader.related(id, property)
                let wanted = model.related(id, property, side: side, reverse: reverse)
                #expect(related == wanted, "\(context): \(id).\(property)")
            }
        }
    }

    /// Checks the objects changed since the last check.
    func checkDirty(context: String) throws {
        let ids = dirty
        dirty = []
        try log.read { (reader: borrowing LogReader) throws in try check(ids, reader, context: context) }
    }

    /// Checks every object that ever existed, and the whole state.
    func checkEverything(context: String) throws {
        fullChecks += 1
        dirty = []
        try log.read { (reader: borrowing LogReader) throws in
            try check(everInserted, reader, context: context)
            let state = try reader.currentState()
            let expected = model.image
            #expect(state.objects == expected, "\(context): \(stateDifferences(state.objects, expected))")
        }
    }

    /// Runs `count` transactions, with a refused one every so often, checking as it goes.
    func run(transactions count: Int, checkEvery: Int = 25, fullCheckEvery: Int = 1000) throws {
        let kinds = BadKind.allCases
        var badCommits = 0
        for n in 1...max(count, 1) {
            try commitRandomTransaction()
            if n % 37 == 0 {
                try commitBadTransaction(kinds[badCommits % kinds.count], compareWholeState: badCommits % 5 == 0)
                badCommits += 1
            }
            if n % fullCheckEvery == 0 {
                try checkEverything(context: "seed \(seed), after \(head)")
            } else if n % checkEvery == 0 {
                try checkDirty(context: "seed \(seed), after \(head)")
            }
        }
        try checkDirty(context: "seed \(seed), after \(head)")
    }

    // MARK: Whole-log checks

    /// Every event, in order, from the log.
    func allEvents() throws -> [TransactionEvent] {
        try log.read { (reader: borrowing LogReader) throws in
            var events: [TransactionEvent] = []
            try reader.forEachEvent { event in
                events.append(event)
                return .next
            }
            return events
        }
    }

    /// Replays `events` from nothing, keeping the image just after each of `marks`.
    static func replay(_ events: [TransactionEvent], keeping marks: Set<UInt64>) -> (final: StateImage, at: [UInt64: StateImage]) {
        var image = StateImage()
        var kept: [UInt64: StateImage] = [:]
        if marks.contains(0) { kept[0] = image }
        for event in events {
            image.apply(event)
            if marks.contains(event.sequence) { kept[event.sequence] = image }
        }
        return (image, kept)
    }

    enum PlanKind: String { case backward, checkpoint, start }

    /// The current state == the replayed log == the model; as-of == replay up to N == the
    /// model's snapshot; object as-of; histories. Returns the plans `state(asOf:)` chose.
    @discardableResult
    func checkLogAgainstModel(context: String, objectSamples: Int = 40) throws -> Set<PlanKind> {
        let events = try allEvents()
        #expect(events.map(\.sequence) == Array(1...head), "\(context): the log's sequences are not dense from 1")
        let marks = Set(snapshots.keys)
        let (replayed, replayedAt) = Self.replay(events, keeping: marks)
        let expected = model.image
        var plans: Set<PlanKind> = []
        let sampleObjects = Array(everInserted.shuffled(using: &rng).prefix(objectSamples))
        try log.read { (reader: borrowing LogReader) throws in
            let state = try reader.currentState()
            #expect(state.objects == expected, "\(context): state vs model: \(stateDifferences(state.objects, expected))")
            #expect(replayed == state, "\(context): replay vs state: \(stateDifferences(replayed.objects, state.objects))")
            for n in marks.sorted() {
                guard let snapshot = snapshots[n], let replayedImage = replayedAt[n] else {
                    Issue.record("\(context): no snapshot or replay at \(n)")
                    continue
                }
                let plan = try reader.plan(asOf: n)
                switch plan {
                case .backwardFromHead: plans.insert(.backward)
                case .forwardFromCheckpoint: plans.insert(.checkpoint)
                case .forwardFromStart: plans.insert(.start)
                }
                let asOf = try reader.state(asOf: n)
                #expect(replayedImage.objects == snapshot, "\(context): replay up to \(n) vs model: \(stateDifferences(replayedImage.objects, snapshot))")
                #expect(asOf == replayedImage, "\(context): state(asOf: \(n)) by \(plan) vs replay: \(stateDifferences(asOf.objects, replayedImage.objects))")
                for id in sampleObjects {
                    #expect(try reader.object(id, asOf: n) == snapshot[id], "\(context): \(id) as of \(n)")
                }
            }
            for id in everInserted {
                #expect(try reader.history(of: id) == model.history[id] ?? [], "\(context): history of \(id)")
            }
        }
        return plans
    }

    /// Index scans agree with a filter over the state.
    func checkIndexes(context: String, scans: Int = 60) throws {
        let people = model.liveObjects(LibraryShape.memberEntities)
        func age(_ id: StoredObjectID) -> Int32? {
            if case .attribute(.int32(let a))? = model.values(id)?["age"] { return a }
            return nil
        }
        func email(_ id: StoredObjectID) -> String? {
            if case .attribute(.string(let e))? = model.values(id)?["email"] { return e }
            return nil
        }
        let knownAges = people.compactMap(age)
        try log.read { (reader: borrowing LogReader) throws in
            func scan(_ entity: String, _ attribute: String, _ range: IndexRange, reverse: Bool = false, limit: Int = .max) throws -> [StoredObjectID] {
                var found: [StoredObjectID] = []
                try reader.scanIndex(entity: entity, attribute: attribute, range: range, reverse: reverse) { id in
                    found.append(id)
                    return found.count >= limit ? .stop : .next
                }
                return found
            }
            for n in 0..<scans {
                var range = IndexRange()
                func bound() -> Int32 { rng.chance(0.6) ? (rng.pick(knownAges) ?? 0) : randomAge() }
                if rng.chance(0.8) { range.lower = .int32(bound()) }
                if rng.chance(0.8) { range.upper = .int32(bound()) }
                range.includesLower = rng.chance(0.5)
                range.includesUpper = rng.chance(0.5)
                if n == 0 { range = .all }
                if n == 1 { range = .isNil }
                let entity = n % 4 == 3 ? "Captain" : "Member"
                let pool = entity == "Captain" ? model.liveObjects(["Captain"]) : people
                let wanted = pool.filter { id in
                    guard let a = age(id) else { return range.matchesNil }
                    if range.matchesNil { return false }
                    if case .int32(let lower)? = range.lower, a < lower || (a == lower && !range.includesLower) { return false }
                    if case .int32(let upper)? = range.upper, a > upper || (a == upper && !range.includesUpper) { return false }
                    return true
                }
                let ascending = try scan(entity, "age", range)
                let descending = try scan(entity, "age", range, reverse: true)
                let label = "\(context): \(entity).age in \(range)"
                #expect(Set(ascending) == Set(wanted) && ascending.count == wanted.count, "\(label): got \(ascending.count), expected \(wanted.count)")
                let ages = ascending.map { age($0) ?? Int32.min }
                #expect(ages == ages.sorted(), "\(label): not in value order")
                #expect(descending == ascending.reversed(), "\(label): descending is not ascending reversed")
                let firstThree = try scan(entity, "age", range, limit: 3)
                #expect(firstThree == Array(ascending.prefix(3)), "\(label): stopping early")
            }
            // Email equality: every held email, and some that nobody holds.
            var emails = people.compactMap(email).shuffled(using: &rng).prefix(scans).map { $0 }
            emails += ["nobody@strata.test", "u", "member1@strata.test\u{0}", String(repeating: "x", count: 125)]
            for value in emails {
                let wanted = people.filter { email($0) == value }.sorted()
                let candidates = try scan("Member", "email", .equal(.string(value)))
                // Values longer than the index keeps are candidates: re-check the record.
                let confirmed = try candidates.filter { try reader.object($0)?["email"] == .attribute(.string(value)) }
                #expect(confirmed.sorted() == wanted, "\(context): email == \(value.debugDescription)")
                if value.utf8.count <= IndexKeyEncoding.maximumComponentLength {
                    #expect(candidates.count == confirmed.count, "\(context): email == \(value.debugDescription) gave extra candidates")
                }
                #expect(wanted.count <= 1, "\(context): \(value.debugDescription) is held by \(wanted)")
            }
        }
    }
}

struct WorkloadFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Tests

@Suite("Event log: randomized workload")
struct RandomWorkloadTests {
    static let seed = UInt64(environmentNumber("STRATA_WORKLOAD_SEED", default: 0x5742_4154))
    static let transactions = max(environmentNumber("STRATA_WORKLOAD_TRANSACTIONS", default: 10_000), 20)

    /// The sequences whose state the workload keeps: both ends, around checkpoints, random.
    static func samples(transactions: Int, checkpointInterval: Int, rng: inout SeededGenerator) -> Set<UInt64> {
        var marks: Set<UInt64> = [0, 1, 2, UInt64(transactions / 2), UInt64(transactions - 1), UInt64(transactions)]
        for c in stride(from: checkpointInterval, through: transactions, by: checkpointInterval).prefix(3) {
            marks.formUnion([UInt64(c - 1), UInt64(c), UInt64(c + 3)])
        }
        for _ in 0..<16 { marks.insert(UInt64(rng.int(0...transactions))) }
        return marks.filter { $0 <= UInt64(transactions) }
    }

    @Test("random transactions: state == replay == the test's model, as-of == replay up to N, indexes, refusals write nothing; then compaction changes nothing")
    func randomWorkload() throws {
        let started = Date()
        let dir = try TemporaryDirectory("strata-workload")
        let model = try libraryModel()
        let count = Self.transactions
        let interval = min(500, max(25, count / 20))
        let workload = LibraryWorkload(log: try openLog(dir, model: model) { $0.checkpointInterval = UInt64(interval) }, seed: Self.seed)
        workload.snapshotAt = Self.samples(transactions: count, checkpointInterval: interval, rng: &workload.rng)
        workload.snapshots[0] = [:]

        try workload.run(transactions: count)
        let ran = Date()
        try workload.checkEverything(context: "seed \(Self.seed), at the end")
        let plans = try workload.checkLogAgainstModel(context: "seed \(Self.seed)")
        if count >= 3 * interval {
            #expect(plans == [.backward, .checkpoint, .start], "as-of plans used: \(plans)")
        }
        try workload.checkIndexes(context: "seed \(Self.seed)")
        #expect(Set(workload.refusedByKind.keys) == Set(LibraryWorkload.BadKind.allCases.map(\.rawValue)) || count < 200,
                "refusals tried: \(workload.refusedByKind)")
        let checked = Date()
        print("""
            random workload (seed \(Self.seed)): \(count) transactions in \(String(format: "%.1f", ran.timeIntervalSince(started))) s, \
            checks \(String(format: "%.1f", checked.timeIntervalSince(ran))) s; \(workload.model.liveCount) live objects, \
            \(workload.everInserted.count) inserted, \(String(format: "%.1f", workload.commitSeconds)) s in commit, refused \(workload.refusedByKind), as-of plans \(plans.map(\.rawValue).sorted())
            """)

        // The store reopened from disk says the same.
        try workload.reopen()
        let reopenedState = try workload.log.read { try $0.currentState() }
        #expect(reopenedState.objects == workload.model.image, "after reopening: \(stateDifferences(reopenedState.objects, workload.model.image))")
        try workload.checkDirty(context: "after reopening")

        // Verify finds nothing wrong.
        let verification = try workload.log.verify()
        #expect(verification.isClean, "verify: \(verification.problems.prefix(10))")
        #expect(verification.eventsChecked == count)

        try compactAndCompare(workload, context: "seed \(Self.seed)")
        print("random workload with compaction: \(String(format: "%.1f", Date().timeIntervalSince(started))) s in all")
    }

    /// What the log said before compaction.
    struct Baseline {
        var events: [TransactionEvent]
        var state: StateImage
        var asOf: [UInt64: StateImage]
        var objectsAsOf: [UInt64: [StoredObjectID: [String: LogValue]]]
        var histories: [StoredObjectID: [UInt64]]
        var plans: [UInt64: LogReader.AsOfPlan]
    }

    static func baseline(_ workload: LibraryWorkload, marks: [UInt64], objects: [StoredObjectID]) throws -> Baseline {
        let events = try workload.allEvents()
        return try workload.log.read { (reader: borrowing LogReader) throws in
            var asOf: [UInt64: StateImage] = [:]
            var objectsAsOf: [UInt64: [StoredObjectID: [String: LogValue]]] = [:]
            var plans: [UInt64: LogReader.AsOfPlan] = [:]
            for n in marks {
                asOf[n] = try reader.state(asOf: n)
                plans[n] = try reader.plan(asOf: n)
                for id in objects { objectsAsOf[n, default: [:]][id] = try reader.object(id, asOf: n) }
            }
            var histories: [StoredObjectID: [UInt64]] = [:]
            for id in objects { histories[id] = try reader.history(of: id) }
            return Baseline(events: events, state: try reader.currentState(), asOf: asOf, objectsAsOf: objectsAsOf, histories: histories, plans: plans)
        }
    }

    static func compare(_ workload: LibraryWorkload, with before: Baseline, context: String) throws {
        let events = try workload.allEvents()
        #expect(events.count == before.events.count, "\(context): event count")
        for (a, b) in zip(events, before.events) where a != b {
            Issue.record("\(context): event \(b.sequence) differs after compaction: \(a) vs \(b)")
            break
        }
        let (replayed, _) = LibraryWorkload.replay(events, keeping: [])
        #expect(replayed == before.state, "\(context): replay after compaction: \(stateDifferences(replayed.objects, before.state.objects))")
        try workload.log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.currentState() == before.state, "\(context): current state")
            for (n, image) in before.asOf.sorted(by: { $0.key < $1.key }) {
                let now = try reader.state(asOf: n)
                let plan = try reader.plan(asOf: n)
                #expect(now == image, "\(context): state(asOf: \(n)) by \(plan): \(stateDifferences(now.objects, image.objects))")
                for (id, values) in before.objectsAsOf[n] ?? [:] {
                    #expect(try reader.object(id, asOf: n) == values, "\(context): \(id) as of \(n)")
                }
            }
            for (id, history) in before.histories {
                #expect(try reader.history(of: id) == history, "\(context): history of \(id)")
            }
            // Single events, from segments and from the raw log.
            for sequence in Set([1, before.events.count / 3, before.events.count / 2, before.events.count].map(UInt64.init)) where sequence >= 1 {
                #expect(try reader.event(sequence) == before.events[Int(sequence) - 1], "\(context): event(\(sequence))")
            }
        }
    }

    /// Compacts the first half, checks nothing changed; runs more transactions, compacts
    /// again with a dictionary and small frames; reopens; verifies.
    func compactAndCompare(_ workload: LibraryWorkload, context: String) throws {
        let head = workload.head
        let marks = workload.snapshots.keys.sorted()
        let objects = Array(workload.everInserted.shuffled(using: &workload.rng).prefix(20))
        let before = try Self.baseline(workload, marks: marks, objects: objects)

        let report = try workload.log.compact(CompactionRequest(before: head / 2))
        #expect(report.moved == 1...(head / 2 - 1), "\(context): moved \(String(describing: report.moved)), limited by \(report.limitedBy)")
        #expect(try workload.log.read { try $0.compactedThrough } == head / 2 - 1)
        let segments = try workload.log.segments()
        #expect(segments.count == 1)
        #expect(segments.first?.sequences == 1...(head / 2 - 1))
        try Self.compare(workload, with: before, context: "\(context), after compacting below \(head / 2)")
        let verification = try workload.log.verify()
        #expect(verification.isClean, "\(context): verify after compaction: \(verification.problems.prefix(10))")
        #expect(verification.segmentsChecked == 1)

        // More work on top, then a second segment with a dictionary and small frames.
        try workload.run(transactions: max(workload.committed / 20, 50))
        try workload.checkEverything(context: "\(context), more work after compaction")
        let secondHead = workload.head
        let moreObjects = Array(workload.everInserted.shuffled(using: &workload.rng).prefix(12))
        let beforeSecond = try Self.baseline(workload, marks: marks + [secondHead - 1, secondHead], objects: moreObjects)
        var request = CompactionRequest(before: secondHead - 10)
        request.usesDictionary = true
        request.eventsPerFrame = 16
        let second = try workload.log.compact(request)
        #expect(second.moved == (head / 2)...(secondHead - 11), "\(context): second compaction moved \(String(describing: second.moved))")
        #expect(second.dictionaryFile != nil)
        try Self.compare(workload, with: beforeSecond, context: "\(context), after the second compaction")
        _ = try workload.checkLogAgainstModel(context: "\(context), after the second compaction", objectSamples: 8)
        try workload.checkIndexes(context: "\(context), after the second compaction", scans: 20)

        // Every segment is a standard zstd file.
        if toolIsInstalled("zstd") {
            let path = try workload.log.path
            for segment in try workload.log.segments() {
                let file = (path as NSString).appendingPathComponent("segments/\(segment.fileName)")
                var arguments = ["-q", "-t", file]
                if let dictionary = segment.dictionaryFileName {
                    arguments += ["-D", (path as NSString).appendingPathComponent("segments/\(dictionary)")]
                }
                let check = try runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["zstd"] + arguments)
                #expect(check.status == 0, "zstd -t \(segment.fileName): \(check.standardError)")
            }
        }

        // Reopened, the compacted store reads the same and verifies clean.
        try workload.reopen()
        try Self.compare(workload, with: beforeSecond, context: "\(context), reopened after compaction")
        let final = try workload.log.verify()
        #expect(final.isClean, "\(context): verify after reopening: \(final.problems.prefix(10))")
        #expect(final.segmentsChecked == 2)
    }
}

// MARK: - Found by the workload

/// A draft may drop a reference and then delete its target (DESIGN.md: a delete is refused
/// only if it would leave a reference dangling). The commit must judge the references the
/// transaction *leaves*, not every object the draft ever named as a reference target.
@Suite("Event log: references dropped earlier in the same draft")
struct DroppedReferenceTests {
    @Test("removing a many-to-many member, then deleting it, in one draft")
    func removeMemberThenDelete() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var setup = TransactionDraft()
        let club = setup.insert("Club", values: ["name": s("Otters")])
        let sponsor = setup.insert("Sponsor", values: ["name": s("Acme")])
        setup.update(club, values: ["sponsors": .references([sponsor])])
        let first = try log.commit(setup)
        let clubID = try #require(first.permanentID(for: club))
        let sponsorID = try #require(first.permanentID(for: sponsor))

        var draft = TransactionDraft()
        draft.changeMembers(of: .stored(clubID), "sponsors", removing: [.stored(sponsorID)])
        draft.delete(.stored(sponsorID))
        #expect(throws: Never.self) { try log.commit(draft) }
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.object(sponsorID) == nil)
            #expect(try reader.related(clubID, "sponsors") == [])
        }
    }

    @Test("pointing a to-one at an object, pointing it away, then deleting the object, in one draft")
    func retargetThenDelete() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var setup = TransactionDraft()
        let club = setup.insert("Club", values: ["name": s("Otters")])
        let member = setup.insert("Member", values: ["name": s("Ada")])
        let first = try log.commit(setup)
        let clubID = try #require(first.permanentID(for: club))
        let memberID = try #require(first.permanentID(for: member))

        var draft = TransactionDraft()
        draft.update(.stored(memberID), values: ["club": .reference(.stored(clubID))])
        draft.update(.stored(memberID), values: ["club": .null])
        draft.delete(.stored(clubID))
        #expect(throws: Never.self) { try log.commit(draft) }
        #expect(try log.read { try $0.object(clubID) } == nil)
    }

    @Test("adding a new object to a to-many, replacing the set without it, then deleting it, in one draft")
    func addReplaceDelete() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var setup = TransactionDraft()
        let member = setup.insert("Member", values: ["name": s("Ada")])
        let memberID = try #require(try log.commit(setup).permanentID(for: member))

        var draft = TransactionDraft()
        let sponsor = draft.insert("Sponsor", values: ["name": s("short-lived")])
        draft.changeMembers(of: .stored(memberID), "favourites", adding: [sponsor])
        draft.update(.stored(memberID), values: ["favourites": .references([])])
        draft.delete(sponsor)
        #expect(throws: Never.self) { try log.commit(draft) }
        #expect(try log.read { try $0.related(memberID, "favourites") } == [])
    }
}
