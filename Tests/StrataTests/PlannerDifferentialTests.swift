import Foundation
import Strata
import StrataPredicate
import StrataTestSupport
import Synchronization
import Testing

/// Differential testing of the query planner and the fetch paths: random objects saved to a
/// real store, random fetch requests, and every answer of `fetch`, `fetchObjectIDs`,
/// `count(for:)`, `execute(_:)` and `fetchDictionaries(_:)` compared with a brute-force
/// answer the test computes itself, in plain Swift, from its own record of what it
/// inserted, changed and deleted (spec 0008: whichever plan runs, a fetch returns what a
/// scan of every object, filtered and sorted in memory, returns).
///
/// The model has indexed attributes, a uniqueness constraint, compound fetch indexes (one
/// led by a to-one relationship), optional values, strings with case and diacritic
/// variants, to-one and to-many (many-to-many) relationships and a sub-entity. Requests
/// combine comparisons, BETWEEN, IN, BEGINSWITH, CONTAINS[cd], nil comparisons, AND/OR/NOT,
/// relationship key paths, ANY/ALL/NONE over to-many, @count, SUBQUERY and object
/// equality, with sorts, offsets, limits, batches, sub-entities, every result type and
/// distinct dictionaries; they run with unsaved inserts, updates and deletes
/// (`includesPendingChanges` on and off), and in contexts pinned to an earlier query
/// generation.
///
/// `STRATA_DIFF_SEED` (one seed), `STRATA_DIFF_SIZE` (objects, 50 by default) and
/// `STRATA_DIFF_QUERIES` (requests per phase, 40 by default) scale it; a failure names its
/// seed and the smallest failing request found.
@Suite("Planner differential: random fetches against a brute-force reference")
struct PlannerDifferentialTests {
    static let environment = ProcessInfo.processInfo.environment
    static let size = Int(environment["STRATA_DIFF_SIZE"] ?? "") ?? 50
    static let queries = Int(environment["STRATA_DIFF_QUERIES"] ?? "") ?? 40
    static let seeds: [UInt64] = environment["STRATA_DIFF_SEED"].flatMap { UInt64($0) }.map { [$0] } ?? [1, 2]

    static var model: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Club") {
                    Attribute("name", .string).indexed()
                    Attribute("rating", .int32)
                    Relationship("members", to: "Person", inverse: "club", toMany: true)
                }
                Entity("Tag") {
                    Attribute("label", .string)
                    Relationship("people", to: "Person", inverse: "tags", toMany: true)
                }
                Entity("Person") {
                    Attribute("name", .string).indexed()
                    Attribute("nick", .string)
                    Attribute("age", .int32).indexed()
                    Attribute("score", .double)
                    Attribute("born", .date).indexed()
                    Attribute("active", .boolean)
                    Attribute("code", .string)
                    Attribute("team", .string)
                    Attribute("level", .int16)
                    Relationship("club", to: "Club", inverse: "members")
                    Relationship("tags", to: "Tag", inverse: "people", toMany: true)
                    Unique("code")
                    FetchIndex("byTeamLevel", "team", "level")
                    FetchIndex("byClubAge", "club", "age")
                }
                Entity("Staff", parent: "Person") {
                    Attribute("salary", .int64).indexed()
                }
            }
        }
    }

    @Test("random fetches equal the brute-force answer: saved, with unsaved changes, and pinned to an earlier generation", arguments: seeds)
    func differential(seed: UInt64) async throws {
        Self.compared.withLock { $0[seed] = 0 }
        let failures = try await Self.run(seed: seed, size: Self.size, queries: Self.queries)
        let compared = Self.compared.withLock { $0[seed] ?? 0 }
        // Every phase compared requests with the reference (a run comparing none would pass
        // vacuously), and none disagreed.
        #expect(compared >= Self.queries * 4, "seed \(seed): only \(compared) requests compared")
        #expect(failures.isEmpty, "seed \(seed) (rerun with STRATA_DIFF_SEED=\(seed)):\n\(failures.joined(separator: "\n\n"))")
    }

    /// Requests compared with the reference, by the seed of the run comparing them.
    static let compared = Mutex<[UInt64: Int]>([:])

    // MARK: Minimised findings

    /// A root context with people "a" … "e" saved, the parent of `child`; the parent inserts
    /// "f" unsaved. Returns the people's IDs by name.
    static func childFixture() async throws -> (TemporaryDirectory, ManagedObjectContext, ManagedObjectContext, [String: ManagedObjectID]) {
        let dir = try TemporaryDirectory()
        let parent = privateContext(try openCoordinator(dir, model: try Self.model))
        let ids = try await parent.perform { (context: isolated ManagedObjectContext) throws -> [String: ManagedObjectID] in
            for (index, name) in ["a", "b", "c", "d", "e"].enumerated() {
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue(name, forKey: "name")
                person.setValue(Int32(index), forKey: "age")
                person.setValue("c\(index)", forKey: "code")
            }
            try context.save()
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("f", forKey: "name")
            person.setValue(Int32(1), forKey: "age")
            let all = try context.fetch(FetchRequest(entityName: "Person"))
            return Dictionary(uniqueKeysWithValues: all.map { ($0.value(forKey: "name") as? String ?? "", $0.objectID) })
        }
        return (dir, parent, ManagedObjectContext(concurrencyType: .privateQueue, parent: parent), ids)
    }

    @Test("a child context's fetch keeps store order: objects it changed keep their place, the parent's inserts come before its own, so a limit takes the right objects")
    func childFetchKeepsStoreOrder() async throws {
        let (dir, _, child, ids) = try await Self.childFixture()
        _ = dir
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            func names(_ request: FetchRequest<ManagedObject>, _ context: isolated ManagedObjectContext = #isolation) throws -> [String] {
                try context.fetch(request).map { $0.value(forKey: "name") as? String ?? "?" }
            }
            guard let b = ids["b"], let f = ids["f"] else { Issue.record("fixture"); return }
            try context.object(with: b).setValue(Int32(7), forKey: "age")  // a stored object changed here
            let g = try context.insertNewObject(forEntityName: "Person")  // an insert of the child's own
            g.setValue("g", forKey: "name")
            g.setValue(Int32(9), forKey: "age")
            try context.object(with: f).setValue(Int32(8), forKey: "age")  // the parent's insert changed here
            var request = FetchRequest(entityName: "Person")
            #expect(try names(request) == ["a", "b", "c", "d", "e", "f", "g"])
            #expect(try context.fetchObjectIDs(request).count == 7)
            request.fetchLimit = 2
            #expect(try names(request) == ["a", "b"])
            // Tied on the sort key: store order decides.
            request.fetchLimit = 0
            request.sortDescriptors = [FetchSortDescriptor(key: "code")]
            request.predicate = try FormatPredicate(format: "age > 0")
            #expect(try names(request) == ["f", "g", "b", "c", "d", "e"])
        }
    }

    @Test("a child context's dictionaries without pending changes hold its store's values, the parent's current ones, not the child's unsaved changes")
    func childDictionariesWithoutPendingChangesReadTheParent() async throws {
        let (dir, parent, child, ids) = try await Self.childFixture()
        _ = dir
        guard let b = ids["b"] else { Issue.record("fixture"); return }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try context.object(with: b).setValue("B-parent", forKey: "nick")
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try context.object(with: b).setValue("B-child", forKey: "nick")
            var request = try FetchRequest(entityName: "Person", format: "name == %@", "b")
            request.resultType = .dictionary
            request.propertiesToFetch = ["nick"]
            request.includesPendingChanges = false
            #expect(try context.fetchDictionaries(request).map { $0["nick"] as? String } == ["B-parent"])
            request.includesPendingChanges = true
            #expect(try context.fetchDictionaries(request).map { $0["nick"] as? String } == ["B-child"])
        }
    }

    @Test("a child context judges the objects it hasn't changed by its own changes to the objects they reach (a renamed club, a relabelled tag); without pending changes it sorts by its store's (the parent's) values")
    func childJudgesKeyPathsByItsChanges() async throws {
        let (dir, parent, child, ids) = try await Self.childFixture()
        _ = dir
        let (club, tag) = try await parent.perform { (context: isolated ManagedObjectContext) throws -> (ManagedObjectID, ManagedObjectID) in
            let otters = try context.insertNewObject(forEntityName: "Club")
            otters.setValue("Otters", forKey: "name")
            let bears = try context.insertNewObject(forEntityName: "Club")
            bears.setValue("Bears", forKey: "name")
            let tag = try context.insertNewObject(forEntityName: "Tag")
            tag.setValue("red", forKey: "label")
            for (name, club) in [("a", otters), ("b", bears)] {
                guard let id = ids[name] else { continue }
                let person = try context.object(with: id)
                person.setValue(club, forKey: "club")
                person.mutableSetValue(forKey: "tags").add(tag)
            }
            try context.save()
            return (otters.objectID, tag.objectID)
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            func names(_ format: String, sortedBy key: String? = nil, pending: Bool = true, _ context: isolated ManagedObjectContext = #isolation) throws -> [String] {
                var request = try FetchRequest(entityName: "Person", format: format)
                request.includesPendingChanges = pending
                request.sortDescriptors = key.map { [FetchSortDescriptor(key: $0)] } ?? []
                return try context.fetch(request).map { $0.value(forKey: "name") as? String ?? "?" }
            }
            try context.object(with: club).setValue("Aardvarks", forKey: "name")  // "a" itself unchanged
            try context.object(with: tag).setValue("blue", forKey: "label")
            #expect(try names("club.name == 'Aardvarks'") == ["a"])
            #expect(try names("club.name == 'Otters'") == [])
            #expect(try names("ANY tags.label == 'blue'") == ["a", "b"])
            #expect(try names("ALL tags.label == 'red' AND tags.@count > 0") == [])
            // Without pending changes: the parent's values, for the filter and the sort alike.
            #expect(try names("club.name == 'Otters'", pending: false) == ["a"])
            #expect(try names("club != nil", sortedBy: "club.name", pending: false) == ["b", "a"])
            #expect(try names("club != nil", sortedBy: "club.name") == ["a", "b"])
        }
    }

    @Test("a child context's batched faults read their values from the parent, its unsaved changes included, not from the store")
    func childBatchFaultsReadTheParent() async throws {
        let (dir, parent, child, ids) = try await Self.childFixture()
        _ = dir
        guard let b = ids["b"] else { Issue.record("fixture"); return }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try context.object(with: b).setValue("B-parent", forKey: "nick")
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(key: "name")])
            request.fetchBatchSize = 1
            let people = try context.fetch(request)
            #expect(people.map { $0.value(forKey: "name") as? String } == ["a", "b", "c", "d", "e", "f"])
            #expect(people.dropFirst().first?.value(forKey: "nick") as? String == "B-parent")
        }
    }

    @Test("a child context's prefetching reads the parent's current state: a to-many side with the parent's unsaved members, a to-one destination with its unsaved values")
    func childPrefetchReadsTheParent() async throws {
        let (dir, parent, child, ids) = try await Self.childFixture()
        _ = dir
        guard let a = ids["a"], let b = ids["b"] else { Issue.record("fixture"); return }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let club = try context.insertNewObject(forEntityName: "Club")
            club.setValue("Otters", forKey: "name")
            try context.object(with: a).setValue(club, forKey: "club")
            try context.save()
            // Unsaved in the parent: b joins, the club is renamed.
            try context.object(with: b).setValue(club, forKey: "club")
            club.setValue("Owls", forKey: "name")
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            var clubs = FetchRequest(entityName: "Club")
            clubs.relationshipKeyPathsForPrefetching = ["members"]
            let members = (try context.fetch(clubs).first?.value(forKey: "members") as? Set<ManagedObject>)?
                .map { $0.value(forKey: "name") as? String ?? "?" }.sorted()
            #expect(members == ["a", "b"])
            var people = try FetchRequest(entityName: "Person", format: "name == 'a'")
            people.relationshipKeyPathsForPrefetching = ["club"]
            let club = try context.fetch(people).first?.value(forKey: "club") as? ManagedObject
            #expect(club?.value(forKey: "name") as? String == "Owls")
        }
    }

    /// Runs every phase for `seed`; the failures found (at most a few per phase).
    static func run(seed: UInt64, size: Int, queries: Int) async throws -> [String] {
        let dir = try TemporaryDirectory()
        let model = try Self.model
        let coordinator = try openCoordinator(dir, model: model)
        let main = privateContext(coordinator)
        var failures: [String] = []
        let start = DWorld(seed: seed, model: model)
        var world = try await main.perform { (context: isolated ManagedObjectContext) throws -> DWorld in
            var world = start
            try world.populate(context, count: size)
            return world
        }
        // A context pinned to the generation just populated, and the state it must keep seeing.
        let pinned = privateContext(coordinator)
        let token = try await pinned.perform { (context: isolated ManagedObjectContext) throws -> QueryGenerationToken? in
            try context.setQueryGenerationFrom(.current)
            _ = try context.count(for: FetchRequest(entityName: "Person"))
            return context.queryGenerationToken
        }
        var frozen = world.frozen(seed: seed &+ 1000)
        // Queries with nothing pending, then rounds of unsaved changes (saved after the second).
        for round in 0..<4 {
            let before = world
            let (after, found) = try await main.perform { (context: isolated ManagedObjectContext) throws -> (DWorld, [String]) in
                var world = before
                if round > 0 {
                    try world.makePendingChanges(context)
                    context.processPendingChanges()
                }
                let found = try world.runQueries(context, count: queries, phase: "round \(round)", objectArguments: true)
                if round == 2 { try world.save(context) }
                return (world, found)
            }
            world = after
            failures += found
        }
        // Another context changes and saves objects the main context hasn't changed; the main
        // context merges the save and keeps its own unsaved changes.
        let writer = privateContext(coordinator)
        let writerStart = world.writerWorld()
        let dirty = world.dirtyHandles()
        let written = try await writer.perform { (context: isolated ManagedObjectContext) throws -> DWorld in
            var world = writerStart
            try world.makeExternalChanges(context, avoiding: dirty)
            try world.save(context)
            return world
        }
        let beforeMerge = world.merging(written, dirty: dirty)
        if environment["STRATA_DIFF_VERBOSE"] != nil {
            for (h, now) in written.saved.objects.sorted(by: { $0.key < $1.key }) {
                let was = world.saved.objects[h]
                if was?.values != now.values || was?.club != now.club || was?.tags != now.tags {
                    print("writer changed \(written.label(h)): \(was.map { "\($0.values) \($0.tags.sorted())" } ?? "new") -> \(now.values) club \(now.club.map(written.label) ?? "-") tags \(now.tags.sorted().map(written.label))")
                }
            }
            for h in world.saved.objects.keys where written.saved.objects[h] == nil { print("writer deleted \(world.label(h))") }
            print("dirty here: \(dirty.sorted().map(world.label))")
        }
        let (merged, mergeFound) = try await main.perform { (context: isolated ManagedObjectContext) throws -> (DWorld, [String]) in
            var world = beforeMerge
            try context.mergeStoreChanges()
            let found = try world.runQueries(context, count: queries, phase: "after merging another context's save", objectArguments: true)
            return (world, found)
        }
        world = merged
        failures += mergeFound
        // A child context of the main one (which still has unsaved changes): the parent's
        // current state is the child's store, the child's own changes on top.
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: main)
        let childStart = world.childWorld()
        let (childWorld, childFound) = try await child.perform { (context: isolated ManagedObjectContext) throws -> (DWorld, [String]) in
            var world = childStart
            var found = try world.runQueries(context, count: queries / 2, phase: "child", objectArguments: true)
            try world.makePendingChanges(context)
            context.processPendingChanges()
            found += try world.runQueries(context, count: queries, phase: "child with changes", objectArguments: true)
            return (world, found)
        }
        failures += childFound
        // A grandchild: the child's current state (its parent's changes and its own) is its store.
        let grandchild = ManagedObjectContext(concurrencyType: .privateQueue, parent: child)
        let grandchildStart = childWorld.childWorld()
        failures += try await grandchild.perform { (context: isolated ManagedObjectContext) throws -> [String] in
            var world = grandchildStart
            try world.makePendingChanges(context)
            context.processPendingChanges()
            return try world.runQueries(context, count: queries / 2, phase: "grandchild with changes", objectArguments: false)
        }
        // The pinned context still sees the populated state, also with changes of its own, and
        // so does a fresh context pinned by its token.
        let pinnedStart = frozen
        let (pinnedAfter, pinnedFound) = try await pinned.perform { (context: isolated ManagedObjectContext) throws -> (DWorld, [String]) in
            var world = pinnedStart
            var found = try world.runQueries(context, count: queries, phase: "pinned", objectArguments: true)
            var changed = world
            try changed.makePendingChanges(context)
            context.processPendingChanges()
            found += try changed.runQueries(context, count: queries, phase: "pinned with changes", objectArguments: true)
            context.rollback()
            return (world, found)
        }
        frozen = pinnedAfter
        failures += pinnedFound
        let twin = privateContext(coordinator)
        let twinStart = frozen
        failures += try await twin.perform { (context: isolated ManagedObjectContext) throws -> [String] in
            try context.setQueryGenerationFrom(token)
            var world = twinStart
            return try world.runQueries(context, count: queries, phase: "pinned by token", objectArguments: false)
        }
        return failures
    }
}

// MARK: - Values and their semantics

/// A value the test stores and compares.
enum DV: Hashable, Sendable, CustomStringConvertible {
    case s(String), i(Int64), d(Double), t(Date), b(Bool)

    /// As a `%@` argument.
    var argument: Any {
        switch self {
        case .s(let x): x
        case .i(let x): Int(x)
        case .d(let x): x
        case .t(let x): x
        case .b(let x): x
        }
    }

    var description: String {
        switch self {
        case .s(let x): x.unicodeScalars.count == x.count ? "\"\(x)\"" : "\"\(x.unicodeScalars.map { $0.isASCII ? String($0) : "\\u{\(String($0.value, radix: 16))}" }.joined())\""
        case .i(let x): "\(x)"
        case .d(let x): "\(x)"
        case .t(let x): "t\(Int(x.timeIntervalSinceReferenceDate))"
        case .b(let x): x ? "YES" : "NO"
        }
    }
}

/// String comparison options: none, [c], [d] or [cd].
enum DOpts: Int, Sendable {
    case none, c, d, cd

    var compareOptions: String.CompareOptions {
        switch self {
        case .none: []
        case .c: .caseInsensitive
        case .d: .diacriticInsensitive
        case .cd: [.caseInsensitive, .diacriticInsensitive]
        }
    }
    var format: String { ["", "[c]", "[d]", "[cd]"][rawValue] }
}

enum DOp: String, Sendable, CaseIterable {
    case eq = "==", ne = "!=", lt = "<", le = "<=", gt = ">", ge = ">="
    case begins = "BEGINSWITH", ends = "ENDSWITH", contains = "CONTAINS"

    static let ordered: [DOp] = [.eq, .ne, .lt, .le, .gt, .ge]
}

/// Spec 0003's comparison rules, written out for the test's values.
enum Sem {
    static func ordering<T: Comparable>(_ a: T, _ b: T) -> ComparisonResult {
        a < b ? .orderedAscending : (a == b ? .orderedSame : .orderedDescending)
    }

    /// Strings split into runs of ASCII digits and of other characters, compared run by run:
    /// digits by value (as decimal numbers, leading zeros aside), the rest by Swift's order.
    static func numericOrdering(_ a: String, _ b: String) -> ComparisonResult {
        func runs(_ s: String) -> [String] {
            var result: [String] = []
            for character in s {
                let digit = character.isASCII && character.isWholeNumber
                if let last = result.last?.last, (last.isASCII && last.isWholeNumber) == digit {
                    result[result.count - 1].append(character)
                } else {
                    result.append(String(character))
                }
            }
            return result
        }
        let (x, y) = (runs(a), runs(b))
        for (p, q) in zip(x, y) {
            let (pDigits, qDigits) = (p.first.map { $0.isASCII && $0.isWholeNumber } ?? false, q.first.map { $0.isASCII && $0.isWholeNumber } ?? false)
            if pDigits && qDigits {
                let (m, n) = (String(p.drop { $0 == "0" }), String(q.drop { $0 == "0" }))
                let order = m.count != n.count ? ordering(m.count, n.count) : ordering(m, n)
                if order != .orderedSame { return order }
            } else if p != q {
                return ordering(p, q)
            }
        }
        return ordering(x.count, y.count)
    }

    static func number(_ v: DV) -> (integer: Int64?, double: Double)? {
        switch v {
        case .i(let x): (x, Double(x))
        case .b(let x): (x ? 1 : 0, x ? 1 : 0)
        case .d(let x): (nil, x)
        default: nil
        }
    }

    /// The order of two values for a predicate; nil when unordered (nil, mixed kinds, NaN).
    static func order(_ a: DV?, _ b: DV?, _ options: DOpts) -> ComparisonResult? {
        guard let a, let b else { return nil }
        switch (a, b) {
        case (.s(let x), .s(let y)):
            // Spec 0003: with [c]/[d] both strings are folded first, then ordered as without options.
            return ordering(fold(x, options), fold(y, options))
        case (.t(let x), .t(let y)):
            return ordering(x, y)
        default:
            guard let x = number(a), let y = number(b) else { return nil }
            if let xi = x.integer, let yi = y.integer { return ordering(xi, yi) }
            if x.double.isNaN || y.double.isNaN { return nil }
            return ordering(x.double, y.double)
        }
    }

    static func equal(_ a: DV?, _ b: DV?, _ options: DOpts) -> Bool {
        switch (a, b) {
        case (nil, nil): true
        case (nil, _), (_, nil): false
        default: order(a, b, options) == .orderedSame
        }
    }

    static func fold(_ s: String, _ options: DOpts) -> String {
        options == .none ? s : s.folding(options: options.compareOptions, locale: nil)
    }

    static func compare(_ op: DOp, _ a: DV?, _ b: DV?, _ options: DOpts) -> Bool {
        switch op {
        case .eq: return equal(a, b, options)
        case .ne: return !equal(a, b, options)
        case .lt: return order(a, b, options) == .orderedAscending
        case .le: return [.orderedAscending, .orderedSame].contains(order(a, b, options))
        case .gt: return order(a, b, options) == .orderedDescending
        case .ge: return [.orderedDescending, .orderedSame].contains(order(a, b, options))
        case .begins, .ends, .contains:
            guard case .s(let x)? = a, case .s(let y)? = b, !y.isEmpty else { return false }
            switch op {
            case .begins: return fold(x, options).hasPrefix(fold(y, options))
            case .ends: return fold(x, options).hasSuffix(fold(y, options))
            default:
                let needle = fold(y, options)
                return !needle.isEmpty && fold(x, options).range(of: needle) != nil
            }
        }
    }

    /// The documented sort order: nil first, strings by Swift's order — under `[c]`/`[d]`
    /// folded first, as predicates fold them, and with `numeric` runs of ASCII digits by
    /// value (spec 0008, Sort order) —, numbers by value (integers exactly, NaN after every
    /// number), false before true.
    static func sortOrder(_ a: DV?, _ b: DV?, _ options: String.CompareOptions) -> ComparisonResult {
        switch (a, b) {
        case (nil, nil): return .orderedSame
        case (nil, _): return .orderedAscending
        case (_, nil): return .orderedDescending
        case (.s(let x)?, .s(let y)?):
            let folding = options.intersection([.caseInsensitive, .diacriticInsensitive])
            let (fx, fy) = (x.folding(options: folding, locale: nil), y.folding(options: folding, locale: nil))
            return options.contains(.numeric) ? numericOrdering(fx, fy) : ordering(fx, fy)
        case (.t(let x)?, .t(let y)?): return ordering(x, y)
        default:
            guard let a, let b, let x = number(a), let y = number(b) else { return .orderedSame }
            if let xi = x.integer, let yi = y.integer { return ordering(xi, yi) }
            if x.double.isNaN || y.double.isNaN {
                return x.double.isNaN == y.double.isNaN ? .orderedSame : (x.double.isNaN ? .orderedDescending : .orderedAscending)
            }
            return ordering(x.double, y.double)
        }
    }
}

// MARK: - The test's record of the objects

struct DObj: Sendable {
    var entity: String
    var values: [String: DV] = [:]
    var club: Int?
    var tags: Set<Int> = []
}

/// Every live object, by the test's handle, with its values and relationships (the to-many
/// sides `Club.members` and `Tag.people` are derived from the people's sides).
struct DSnapshot: Sendable {
    var objects: [Int: DObj] = [:]

    func value(_ h: Int, _ key: String) -> DV? { objects[h]?.values[key] }
    func club(_ h: Int) -> Int? {
        guard let club = objects[h]?.club, objects[club] != nil else { return nil }
        return club
    }
    func tags(_ h: Int) -> [Int] { (objects[h]?.tags ?? []).filter { objects[$0] != nil }.sorted() }
    func members(_ club: Int) -> [Int] { objects.keys.filter { objects[$0]?.club == club }.sorted() }
    func people(_ tag: Int) -> [Int] { objects.keys.filter { objects[$0]?.tags.contains(tag) == true }.sorted() }

    mutating func delete(_ h: Int) {
        objects[h] = nil
        for key in objects.keys {
            if objects[key]?.club == h { objects[key]?.club = nil }
            objects[key]?.tags.remove(h)
        }
    }
}

// MARK: - Requests

indirect enum DPred: Sendable {
    case leaf(DLeaf)
    case and([DPred])
    case or([DPred])
    case not(DPred)
    case bool(Bool)

    func evaluate(_ s: DSnapshot, _ h: Int) -> Bool {
        switch self {
        case .leaf(let leaf): leaf.eval(s, h)
        case .and(let parts): parts.allSatisfy { $0.evaluate(s, h) }
        case .or(let parts): parts.contains { $0.evaluate(s, h) }
        case .not(let part): !part.evaluate(s, h)
        case .bool(let value): value
        }
    }

    var rendered: (format: String, arguments: [DArg]) {
        switch self {
        case .leaf(let leaf): return (leaf.format, leaf.arguments)
        case .bool(let value): return (value ? "TRUEPREDICATE" : "FALSEPREDICATE", [])
        case .not(let part):
            let (format, arguments) = part.rendered
            return ("NOT (\(format))", arguments)
        case .and(let parts), .or(let parts):
            let rendered = parts.map(\.rendered)
            let joiner: String
            if case .and = self { joiner = " AND " } else { joiner = " OR " }
            return (rendered.map { "(\($0.format))" }.joined(separator: joiner), rendered.flatMap(\.arguments))
        }
    }

    /// Smaller predicates to try when minimising a failure.
    var reductions: [DPred] {
        switch self {
        case .leaf, .bool: return []
        case .not(let part): return [part] + part.reductions.map { .not($0) }
        case .and(let parts), .or(let parts):
            let isAnd: Bool
            if case .and = self { isAnd = true } else { isAnd = false }
            func make(_ children: [DPred]) -> DPred { children.count == 1 ? children[0] : (isAnd ? .and(children) : .or(children)) }
            var out: [DPred] = parts
            for index in parts.indices where parts.count > 1 {
                var fewer = parts
                fewer.remove(at: index)
                out.append(make(fewer))
            }
            for index in parts.indices {
                for smaller in parts[index].reductions {
                    var changed = parts
                    changed[index] = smaller
                    out.append(make(changed))
                }
            }
            return out
        }
    }
}

struct DLeaf: Sendable {
    var format: String
    var arguments: [DArg]
    var eval: @Sendable (DSnapshot, Int) -> Bool
}

enum DArg: Sendable {
    case key(String)
    case value(DV)
    case object(Int)
    case objects([Int])
}

struct DSort: Sendable {
    var key: String
    var ascending: Bool
    /// 0 plain, 1 case-insensitive, 2 diacritic-insensitive, 3 both, 4 localizedStandard.
    var style: Int

    var descriptor: FetchSortDescriptor {
        switch style {
        case 4: .localizedStandard(key: key, ascending: ascending)
        default: FetchSortDescriptor(key: key, ascending: ascending, caseInsensitive: style == 1 || style == 3, diacriticInsensitive: style >= 2)
        }
    }
    var options: String.CompareOptions {
        switch style {
        case 1: .caseInsensitive
        case 2: .diacriticInsensitive
        case 3: [.caseInsensitive, .diacriticInsensitive]
        case 4: [.caseInsensitive, .numeric]
        default: []
        }
    }
    var label: String { "\(key)\(ascending ? "" : "↓")\(["", "[c]", "[d]", "[cd]", "[std]"][style])" }
}

enum DResult: Sendable { case objects, ids, count, dictionaries }

struct DRequest: Sendable {
    var entity: String
    var subentities = true
    var predicate: DPred?
    var sorts: [DSort] = []
    var limit = 0
    var offset = 0
    var batch = 0
    var pending = true
    var result = DResult.objects
    var properties: [String]?
    var distinct = false
    var faults = true
    var propertyValues = true
    var prefetch: [String] = []

    var reductions: [DRequest] {
        var out: [DRequest] = []
        func with(_ change: (inout DRequest) -> Void) {
            var copy = self
            change(&copy)
            out.append(copy)
        }
        if let predicate {
            with { $0.predicate = nil }
            for smaller in predicate.reductions { with { $0.predicate = smaller } }
        }
        for index in sorts.indices { with { $0.sorts.remove(at: index) } }
        if limit != 0 { with { $0.limit = 0 } }
        if offset != 0 { with { $0.offset = 0 } }
        if batch != 0 { with { $0.batch = 0 } }
        if !faults { with { $0.faults = true } }
        if !propertyValues { with { $0.propertyValues = true } }
        if !prefetch.isEmpty { with { $0.prefetch = [] } }
        if distinct { with { $0.distinct = false } }
        if result == .dictionaries, let properties, properties.count > 1 {
            for index in properties.indices { with { $0.properties?.remove(at: index) } }
        }
        if result != .objects { with { $0.result = .objects; $0.properties = nil; $0.distinct = false } }
        if !subentities { with { $0.subentities = true } }
        return out
    }
}

/// A dictionary cell as the test compares it.
enum DCell: Equatable, CustomStringConvertible {
    case value(DV)
    case object(Int)

    static func == (a: DCell, b: DCell) -> Bool {
        switch (a, b) {
        case (.object(let x), .object(let y)): return x == y
        case (.value(.d(let x)), .value(.d(let y))): return x == y || (x.isNaN && y.isNaN)
        case (.value(let x), .value(let y)): return x == y
        default: return false
        }
    }

    var description: String {
        switch self {
        case .value(let v): v.description
        case .object(let h): "#\(h)"
        }
    }
}

// MARK: - The world

struct DWorld: Sendable {
    var rngState: UInt64
    let scopes: [String: [String]]
    var saved = DSnapshot()
    var current = DSnapshot()
    /// Each handle's object ID now (temporary until saved) and entity, for every object ever made.
    var ids: [Int: ManagedObjectID] = [:]
    var entityOf: [Int: String] = [:]
    /// Saved objects' primary keys.
    var primaryKey: [Int: Int] = [:]
    /// Handles inserted since the last save, in insertion order.
    var inserted: [Int] = []
    /// In a child context: the parent's unsaved inserts, which its store order puts after
    /// the stored objects, in their insertion order.
    var parentInserted: [Int] = []
    var nextHandle = 0
    var nextCode = 0
    let seed: UInt64

    init(seed: UInt64, model: ManagedObjectModel) {
        self.seed = seed
        rngState = seed
        var scopes: [String: [String]] = [:]
        for entity in ["Person", "Staff", "Club", "Tag"] { scopes[entity] = model.selfAndSubentityNames(of: entity) }
        self.scopes = scopes
    }

    /// The objects with unsaved changes here, and the objects whose relationships those
    /// changes touch (inverses): another writer leaves them alone.
    func dirtyHandles() -> Set<Int> {
        var dirty = Set(inserted)
        for h in inserted {
            if let club = current.objects[h]?.club { dirty.insert(club) }
            dirty.formUnion(current.objects[h]?.tags ?? [])
        }
        for (h, was) in saved.objects {
            guard let now = current.objects[h] else {
                dirty.insert(h)
                if let club = was.club { dirty.insert(club) }
                dirty.formUnion(was.tags)
                continue
            }
            if now.values != was.values || now.club != was.club || now.tags != was.tags {
                dirty.insert(h)
                if let club = was.club { dirty.insert(club) }
                if let club = now.club { dirty.insert(club) }
                dirty.formUnion(was.tags.symmetricDifference(now.tags))
            }
        }
        return dirty
    }

    /// The world another root context sees: the saved state, nothing pending.
    func writerWorld() -> DWorld {
        var copy = self
        copy.rngState = rngState &+ 99
        copy.current = saved
        copy.inserted = []
        return copy
    }

    /// Changes to saved objects outside `avoiding`: updates, relationship changes, renames,
    /// deletes and inserts.
    mutating func makeExternalChanges(_ context: isolated ManagedObjectContext, avoiding dirty: Set<Int>) throws {
        let clubs = handles("Club", in: current).filter { !dirty.contains($0) }
        let tags = handles("Tag", in: current).filter { !dirty.contains($0) }
        for h in personHandles(in: current) where !dirty.contains(h) {
            guard let object = current.objects[h] else { continue }
            let reachesDirty = object.club.map { dirty.contains($0) } == true || object.tags.contains { dirty.contains($0) }
            if chance(5) && !reachesDirty {
                try delete(context, h)
            } else if chance(15) {
                let key = pick(Self.personAttributes + (object.entity == "Staff" ? ["salary"] : []))
                try set(context, h, key, randomValue(key))
            } else if chance(8), object.club.map({ !dirty.contains($0) }) ?? true {
                try setClub(context, h, clubs.isEmpty || chance(25) ? nil : pick(clubs), fromClubSide: chance(30))
            } else if chance(8), let tag = tags.isEmpty ? nil : pick(tags) {
                if object.tags.contains(tag) { try removeTag(context, h, tag) } else { try addTag(context, h, tag, fromTagSide: chance(40)) }
            }
        }
        for club in clubs where chance(25) { try set(context, club, "name", .s(pick(Self.clubNames))) }
        for tag in tags where chance(20) { try set(context, tag, "label", randomValue("label")) }
        for _ in 0..<int(1...3) {
            let h = try insertBare(context, chance(30) ? "Staff" : "Person")
            if !clubs.isEmpty && chance(70) { try setClub(context, h, pick(clubs), fromClubSide: false) }
            if !tags.isEmpty && chance(50) { try addTag(context, h, pick(tags), fromTagSide: false) }
        }
    }

    /// Inserts an object with random attributes and no relationships.
    mutating func insertBare(_ context: isolated ManagedObjectContext, _ entity: String) throws -> Int {
        let object = try context.insertNewObject(forEntityName: entity)
        let h = newHandle(entity, object)
        current.objects[h] = DObj(entity: entity)
        inserted.append(h)
        for key in Self.personAttributes + (entity == "Staff" ? ["salary"] : []) {
            if let value = randomValue(key) { try set(context, h, key, value) }
        }
        return h
    }

    /// This world after merging `other`'s save: the saved state is the other's, and this
    /// context's unsaved changes (to the `dirty` objects, which the other left alone) stay.
    func merging(_ other: DWorld, dirty: Set<Int>) -> DWorld {
        var copy = self
        copy.saved = other.saved
        var now = other.saved
        for h in dirty {
            now.objects[h] = current.objects[h]
        }
        copy.current = now
        for (h, id) in other.ids where copy.ids[h] == nil || other.primaryKey[h] != nil {
            copy.ids[h] = id
            copy.entityOf[h] = other.entityOf[h]
        }
        for (h, pk) in other.primaryKey { copy.primaryKey[h] = pk }
        copy.nextHandle = max(nextHandle, other.nextHandle)
        copy.nextCode = max(nextCode, other.nextCode)
        return copy
    }

    /// The world a child context of this one sees: the parent's current state is its store.
    func childWorld() -> DWorld {
        var copy = self
        copy.rngState = rngState &+ 77
        copy.saved = current
        copy.parentInserted = parentInserted + inserted
        copy.inserted = []
        return copy
    }

    /// The saved state as a context pinned to it sees it: nothing pending.
    func frozen(seed: UInt64) -> DWorld {
        var copy = self
        copy.rngState = seed
        copy.current = saved
        copy.inserted = []
        for h in copy.ids.keys where saved.objects[h] == nil && primaryKey[h] == nil {
            copy.ids[h] = nil
            copy.entityOf[h] = nil
        }
        return copy
    }

    mutating func random() -> UInt64 {
        var generator = SeededGenerator(state: rngState)
        defer { rngState = generator.state }
        return generator.next()
    }
    mutating func chance(_ percent: Int) -> Bool { Int(random() % 100) < percent }
    mutating func pick<T>(_ values: [T]) -> T { values[Int(random() % UInt64(values.count))] }
    mutating func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + Int(random() % UInt64(range.count)) }

    // MARK: Value pools

    static let names = ["Émile", "emile", "EMILE", "Emile", "e\u{301}mile", "Zoë", "zoe", "Zoe", "Anna", "anna", "Ånna", "bob", "Bob", "", "ab", "b"]
    static let stringProbes = ["e", "E", "é", "mile", "MILE", "Zo", "zo", "o", "ë", "An", "å", "b", "", "ile", "nna", "x"]
    static let teams = ["red", "Red", "RED", "réd", "blue", "Blue", "gréen"]
    static let clubNames = ["Otters", "otters", "Öwls", "Owls", "Bears", "bears"]
    static let labels = ["red", "Red", "urgent", "Urgent", "ürgent", "x"]
    static let scores: [Double] = [-1.5, 0, -0.0, 0.5, 2, 2.5, 100, .nan, .infinity]
    static let salaries: [Int64] = [0, 1000, 5000, -1, .max, 9_007_199_254_740_993]
    static let days: [Date] = (-3...3).map { Date(timeIntervalSinceReferenceDate: 700_000_000 + Double($0) * 3600) }
    static let personAttributes = ["name", "nick", "age", "score", "born", "active", "code", "team", "level"]
    static let types: [String: String] = [
        "name": "s", "nick": "s", "code": "s", "team": "s", "label": "s", "age": "i32", "level": "i16", "salary": "i64",
        "rating": "i32", "score": "d", "born": "t", "active": "b", "club.name": "s", "club.rating": "i32",
    ]

    mutating func randomValue(_ key: String) -> DV? {
        if chance(12) { return nil }
        switch key {
        case "name", "nick": return .s(pick(Self.names))
        case "team": return .s(pick(Self.teams))
        case "label": return .s(pick(Self.labels))
        case "age": return .i(Int64(int(-3...40)))
        case "level": return .i(Int64(int(-3...3)))
        case "rating": return .i(Int64(int(0...5)))
        case "salary": return .i(pick(Self.salaries))
        case "score": return .d(pick(Self.scores))
        case "born": return .t(pick(Self.days))
        case "active": return .b(chance(50))
        case "code":
            nextCode += 1
            return .s("c\(nextCode)")
        default: return nil
        }
    }

    /// A constant to compare `key` with, of a kind the key accepts.
    mutating func constant(_ key: String) -> DV {
        switch key {
        case "name", "nick": return .s(chance(70) ? pick(Self.names) : pick(Self.stringProbes))
        case "team": return .s(chance(70) ? pick(Self.teams) : pick(["r", "R", "ré", "b", "e", "E"]))
        case "label": return .s(chance(70) ? pick(Self.labels) : pick(["r", "u", "U", "ü", "e"]))
        case "code": return .s(chance(70) ? "c\(int(1...max(1, nextCode)))" : pick(["c", "c1", "C1", "1"]))
        case "age": return chance(15) ? .d(Double(int(-3...40)) + 0.5) : .i(Int64(int(-4...41)))
        case "level": return chance(15) ? .d(pick([-0.5, 1.5, 2.0])) : .i(Int64(int(-4...4)))
        case "rating", "club.rating": return .i(Int64(int(-1...6)))
        case "club.name": return .s(chance(70) ? pick(Self.clubNames) : pick(["O", "o", "ö", "Ö", "ears", "wl"]))
        case "salary": return .i(pick(Self.salaries + [9_007_199_254_740_992, 2000]))
        case "score": return chance(30) ? .i(Int64(int(-2...3))) : .d(pick(Self.scores + [1.0, -0.5]))
        case "born":
            let day = pick(Self.days)
            return .t(chance(25) ? day.addingTimeInterval(1800) : day)
        case "active": return chance(25) ? .i(Int64(int(0...1))) : .b(chance(50))
        default: return .i(Int64(int(0...3)))
        }
    }

    // MARK: Making objects

    mutating func newHandle(_ entity: String, _ object: ManagedObject) -> Int {
        nextHandle += 1
        ids[nextHandle] = object.objectID
        entityOf[nextHandle] = entity
        return nextHandle
    }

    func object(_ context: isolated ManagedObjectContext, _ h: Int) throws -> ManagedObject {
        guard let id = ids[h] else { throw DifferentialError.unknownHandle(h) }
        return try context.registeredObject(for: id) ?? context.object(with: id)
    }

    func handles(_ entity: String, in snapshot: DSnapshot) -> [Int] {
        snapshot.objects.keys.filter { snapshot.objects[$0]?.entity == entity }.sorted()
    }

    func personHandles(in snapshot: DSnapshot) -> [Int] {
        snapshot.objects.keys.filter { ["Person", "Staff"].contains(snapshot.objects[$0]?.entity ?? "") }.sorted()
    }

    mutating func set(_ context: isolated ManagedObjectContext, _ h: Int, _ key: String, _ value: DV?) throws {
        let object = try object(context, h)
        let any: Any?
        switch (Self.types[key], value) {
        case (_, nil): any = nil
        case ("i32", .i(let x)?): any = Int32(x)
        case ("i16", .i(let x)?): any = Int16(x)
        case ("i64", .i(let x)?): any = x
        case (_, let v?): any = v.argument
        }
        object.setValue(any, forKey: key)
        current.objects[h]?.values[key] = value
    }

    mutating func insert(_ context: isolated ManagedObjectContext, _ entity: String) throws -> Int {
        let object = try context.insertNewObject(forEntityName: entity)
        let h = newHandle(entity, object)
        current.objects[h] = DObj(entity: entity)
        inserted.append(h)
        let keys: [String] =
            switch entity {
            case "Club": ["name", "rating"]
            case "Tag": ["label"]
            case "Staff": Self.personAttributes + ["salary"]
            default: Self.personAttributes
            }
        for key in keys {
            var value = key == "name" && entity == "Club" ? DV.s(pick(Self.clubNames)) : randomValue(key)
            if key == "code" && value == nil && chance(50) { value = randomValue(key) }
            if value != nil { try set(context, h, key, value) }
        }
        if entity == "Person" || entity == "Staff" {
            let clubs = handles("Club", in: current)
            if !clubs.isEmpty && chance(75) { try setClub(context, h, pick(clubs), fromClubSide: chance(20)) }
            let tags = handles("Tag", in: current)
            if !tags.isEmpty {
                for _ in 0..<int(0...3) { try addTag(context, h, pick(tags), fromTagSide: chance(30)) }
            }
        }
        return h
    }

    mutating func setClub(_ context: isolated ManagedObjectContext, _ h: Int, _ club: Int?, fromClubSide: Bool) throws {
        let person = try object(context, h)
        if let club, fromClubSide {
            try object(context, club).mutableSetValue(forKey: "members").add(person)
        } else {
            person.setValue(try club.map { try object(context, $0) }, forKey: "club")
        }
        current.objects[h]?.club = club
    }

    mutating func addTag(_ context: isolated ManagedObjectContext, _ h: Int, _ tag: Int, fromTagSide: Bool) throws {
        let person = try object(context, h), label = try object(context, tag)
        if fromTagSide {
            label.mutableSetValue(forKey: "people").add(person)
        } else {
            person.mutableSetValue(forKey: "tags").add(label)
        }
        current.objects[h]?.tags.insert(tag)
    }

    mutating func removeTag(_ context: isolated ManagedObjectContext, _ h: Int, _ tag: Int) throws {
        try object(context, h).mutableSetValue(forKey: "tags").remove(try object(context, tag))
        current.objects[h]?.tags.remove(tag)
    }

    mutating func delete(_ context: isolated ManagedObjectContext, _ h: Int) throws {
        context.delete(try object(context, h))
        current.delete(h)
        inserted.removeAll { $0 == h }
    }

    mutating func populate(_ context: isolated ManagedObjectContext, count: Int) throws {
        for _ in 0..<4 { _ = try insert(context, "Club") }
        for _ in 0..<5 { _ = try insert(context, "Tag") }
        for _ in 0..<count { _ = try insert(context, chance(25) ? "Staff" : "Person") }
        try save(context)
        // A second save: updates and deletes, leaving gaps in the keys.
        try makePendingChanges(context, inserts: false)
        try save(context)
    }

    /// Unsaved updates, deletes, relationship changes and inserts.
    mutating func makePendingChanges(_ context: isolated ManagedObjectContext, inserts: Bool = true) throws {
        for h in personHandles(in: current) {
            guard current.objects[h] != nil else { continue }
            if chance(6) {
                try delete(context, h)
            } else if chance(20) {
                let entity = current.objects[h]?.entity ?? "Person"
                for _ in 0..<int(1...3) {
                    let key = pick(Self.personAttributes + (entity == "Staff" ? ["salary"] : []))
                    try set(context, h, key, randomValue(key))
                }
                if chance(30) {
                    let clubs = handles("Club", in: current)
                    try setClub(context, h, chance(20) || clubs.isEmpty ? nil : pick(clubs), fromClubSide: chance(30))
                }
                if chance(30) {
                    let tags = handles("Tag", in: current)
                    if let tag = tags.isEmpty ? nil : pick(tags) {
                        if current.objects[h]?.tags.contains(tag) == true { try removeTag(context, h, tag) } else { try addTag(context, h, tag, fromTagSide: chance(40)) }
                    }
                }
            } else if chance(8) {
                _ = try object(context, h).value(forKey: "name")  // a fulfilled, unchanged object
            }
        }
        for club in handles("Club", in: current) {
            if chance(25) { try set(context, club, "name", .s(pick(Self.clubNames))) }
            if chance(15) { try set(context, club, "rating", randomValue("rating")) }
            if chance(8) { try delete(context, club) }
        }
        for tag in handles("Tag", in: current) {
            if chance(15) { try set(context, tag, "label", randomValue("label")) }
            if chance(5) { try delete(context, tag) }
        }
        guard inserts else { return }
        if chance(50) { _ = try insert(context, "Club") }
        if chance(40) { _ = try insert(context, "Tag") }
        for _ in 0..<int(2...6) { _ = try insert(context, chance(30) ? "Staff" : "Person") }
        if let last = inserted.last, chance(40), let entity = current.objects[last]?.entity, entity == "Person" || entity == "Staff" {
            try set(context, last, "age", randomValue("age"))
        }
        if let first = inserted.first, chance(25) { try delete(context, first) }
    }

    mutating func save(_ context: isolated ManagedObjectContext) throws {
        let pending = try inserted.map { ($0, try object(context, $0)) }
        try context.save()
        for (h, object) in pending { ids[h] = object.objectID }
        for h in current.objects.keys where primaryKey[h] == nil {
            guard let id = ids[h], let pk = Int(id.uriRepresentation().lastPathComponent.dropFirst()) else { continue }
            primaryKey[h] = pk
        }
        saved = current
        inserted = []
    }

    // MARK: Random predicates

    typealias Getter = @Sendable (DSnapshot, Int) -> DV?
    typealias Many = @Sendable (DSnapshot, Int) -> [DV?]

    static func getter(_ path: String) -> Getter {
        let parts = path.split(separator: ".").map(String.init)
        switch parts.count {
        case 1: return { s, h in s.value(h, parts[0]) }
        default:
            switch path {
            case "club.name", "club.rating": return { s, h in s.club(h).flatMap { s.value($0, parts[1]) } }
            case "tags.@count": return { s, h in .i(Int64(s.tags(h).count)) }
            case "members.@count": return { s, h in .i(Int64(s.members(h).count)) }
            case "people.@count": return { s, h in .i(Int64(s.people(h).count)) }
            case "club.members.@count": return { s, h in s.club(h).map { .i(Int64(s.members($0).count)) } }
            default: return { _, _ in nil }
            }
        }
    }

    static func many(_ path: String) -> Many {
        switch path {
        case "tags.label": { s, h in s.tags(h).map { s.value($0, "label") } }
        case "tags.people.name": { s, h in s.tags(h).flatMap { s.people($0).map { s.value($0, "name") } } }
        case "members.name": { s, h in s.members(h).map { s.value($0, "name") } }
        case "members.age": { s, h in s.members(h).map { s.value($0, "age") } }
        case "members.tags.label": { s, h in s.members(h).flatMap { s.tags($0).map { s.value($0, "label") } } }
        case "people.club.name": { s, h in s.people(h).map { p in s.club(p).flatMap { s.value($0, "name") } } }
        case "people.age": { s, h in s.people(h).map { s.value($0, "age") } }
        default: { _, _ in [] }
        }
    }

    mutating func options(for key: String) -> DOpts {
        guard Self.types[key] == "s", chance(35) else { return .none }
        return pick([.c, .d, .cd])
    }

    /// `path op constant` (or the constant on the left, or nil).
    mutating func comparison(_ path: String, constantKey: String) -> DPred {
        let get = Self.getter(path)
        let isString = Self.types[constantKey] == "s"
        if chance(10) {
            let op: DOp = chance(50) ? .eq : .ne
            let leftNil = chance(20)
            return .leaf(DLeaf(format: leftNil ? "nil \(op.rawValue) \(path)" : "\(path) \(op.rawValue) nil", arguments: []) { s, h in
                Sem.compare(op, get(s, h), nil, .none)
            })
        }
        let opts = options(for: constantKey)
        let op: DOp = isString && chance(30) ? pick([.begins, .contains, .ends]) : pick(DOp.ordered)
        let value = constant(constantKey)
        let usesKeyArgument = !path.contains(".") && chance(40)
        let left = usesKeyArgument ? "%K" : path
        let keyArguments: [DArg] = usesKeyArgument ? [.key(path)] : []
        if op.rawValue.count <= 2 && chance(15) {
            // The constant on the left.
            return .leaf(DLeaf(format: "%@ \(op.rawValue)\(opts.format) \(left)", arguments: [.value(value)] + keyArguments) { s, h in
                Sem.compare(op, value, get(s, h), opts)
            })
        }
        return .leaf(DLeaf(format: "\(left) \(op.rawValue)\(opts.format) %@", arguments: keyArguments + [.value(value)]) { s, h in
            Sem.compare(op, get(s, h), value, opts)
        })
    }

    mutating func between(_ path: String) -> DPred {
        let get = Self.getter(path)
        let low = constant(path), high = chance(30) ? low : constant(path)
        return .leaf(DLeaf(format: "\(path) BETWEEN {%@, %@}", arguments: [.value(low), .value(high)]) { s, h in
            let v = get(s, h)
            guard let a = Sem.order(v, low, .none), let b = Sem.order(v, high, .none) else { return false }
            return a != .orderedAscending && b != .orderedDescending
        })
    }

    mutating func membership(_ path: String) -> DPred {
        let get = Self.getter(path)
        let values = (0..<int(1...4)).map { _ in constant(path) }
        let withNil = chance(15)
        let opts = options(for: path)
        let list = (values.map { _ in "%@" } + (withNil ? ["nil"] : [])).joined(separator: ", ")
        return .leaf(DLeaf(format: "\(path) IN\(opts.format) {\(list)}", arguments: values.map { .value($0) }) { s, h in
            let v = get(s, h)
            return (withNil && v == nil) || values.contains { Sem.equal(v, $0, opts) }
        })
    }

    /// `ANY`/`ALL`/`NONE` over a to-many key path ending in `key`.
    mutating func quantified(_ path: String) -> DPred {
        let get = Self.many(path)
        let key = path == "people.club.name" ? "club.name" : String(path.split(separator: ".").last ?? "")
        let modifier = chance(70) ? "ANY" : pick(["ALL", "NONE"])
        let isString = Self.types[key] == "s"
        let op: DOp = isString && chance(30) ? pick([.begins, .contains]) : (chance(8) ? .eq : pick(DOp.ordered))
        let isNil = op == .eq && chance(15)
        let value: DV? = isNil ? nil : constant(key)
        let opts = isNil ? DOpts.none : options(for: key)
        let format = "\(modifier) \(path) \(op.rawValue)\(opts.format) \(isNil ? "nil" : "%@")"
        return .leaf(DLeaf(format: format, arguments: value.map { [.value($0)] } ?? []) { s, h in
            let values = get(s, h)
            switch modifier {
            case "ANY": return values.contains { Sem.compare(op, $0, value, opts) }
            case "ALL": return values.allSatisfy { Sem.compare(op, $0, value, opts) }
            default: return !values.contains { Sem.compare(op, $0, value, opts) }
            }
        })
    }

    mutating func count(_ path: String) -> DPred {
        let get = Self.getter(path)
        let op = pick(DOp.ordered)
        let value = DV.i(Int64(int(0...3)))
        return .leaf(DLeaf(format: "\(path) \(op.rawValue) %@", arguments: [.value(value)]) { s, h in
            Sem.compare(op, get(s, h), value, .none)
        })
    }

    /// Handles to use as object constants: mostly live ones, sometimes deleted or unsaved.
    mutating func someHandles(_ entities: [String], count: Int) -> [Int] {
        let all = entityOf.keys.filter { entities.contains(entityOf[$0] ?? "") }.sorted()
        guard !all.isEmpty else { return [] }
        return (0..<count).map { _ in pick(all) }
    }

    mutating func objectComparison(_ entity: String) -> DPred? {
        switch entity {
        case "Person", "Staff":
            switch int(0...9) {
            case 0, 1:
                guard let club = someHandles(["Club"], count: 1).first else { return nil }
                let op: DOp = chance(75) ? .eq : .ne
                return .leaf(DLeaf(format: "club \(op.rawValue) %@", arguments: [.object(club)]) { s, h in
                    (s.club(h) == club) == (op == .eq)
                })
            case 2:
                let clubs = someHandles(["Club"], count: int(1...3))
                return .leaf(DLeaf(format: "club IN %@", arguments: [.objects(clubs)]) { s, h in
                    s.club(h).map { clubs.contains($0) } ?? false
                })
            case 3:
                let isNil = chance(50)
                return .leaf(DLeaf(format: isNil ? "club == nil" : "club != nil", arguments: []) { s, h in (s.club(h) == nil) == isNil })
            case 4, 5:
                guard let tag = someHandles(["Tag"], count: 1).first else { return nil }
                let format = pick(["ANY tags == %@", "%@ IN tags", "tags CONTAINS %@"])
                return .leaf(DLeaf(format: format, arguments: [.object(tag)]) { s, h in s.tags(h).contains(tag) })
            case 6:
                let tags = someHandles(["Tag"], count: int(1...2))
                return .leaf(DLeaf(format: "ANY tags IN %@", arguments: [.objects(tags)]) { s, h in s.tags(h).contains { tags.contains($0) } })
            case 7:
                guard let one = someHandles(["Person", "Staff"], count: 1).first else { return nil }
                let op: DOp = chance(75) ? .eq : .ne
                return .leaf(DLeaf(format: "SELF \(op.rawValue) %@", arguments: [.object(one)]) { _, h in (h == one) == (op == .eq) })
            default:
                let some = someHandles(["Person", "Staff"], count: int(1...4))
                return .leaf(DLeaf(format: "SELF IN %@", arguments: [.objects(some)]) { _, h in some.contains(h) })
            }
        case "Club":
            if chance(50), let person = someHandles(["Person", "Staff"], count: 1).first {
                return .leaf(DLeaf(format: pick(["%@ IN members", "ANY members == %@"]), arguments: [.object(person)]) { s, h in
                    s.members(h).contains(person)
                })
            }
            let clubs = someHandles(["Club"], count: int(1...2))
            return .leaf(DLeaf(format: "SELF IN %@", arguments: [.objects(clubs)]) { _, h in clubs.contains(h) })
        default:
            guard let person = someHandles(["Person", "Staff"], count: 1).first else { return nil }
            return .leaf(DLeaf(format: "%@ IN people", arguments: [.object(person)]) { s, h in s.people(h).contains(person) })
        }
    }

    mutating func leaf(_ entity: String) -> DPred {
        if chance(15), let node = objectComparison(entity) { return node }
        switch entity {
        case "Person", "Staff":
            let attributes = Self.personAttributes + (entity == "Staff" ? ["salary"] : [])
            switch int(0...19) {
            case 0: return between(pick(["age", "level", "born", "score", "name"]))
            case 1: return membership(pick(["age", "name", "team", "level", "code"]))
            case 2:
                let path = pick(["club.name", "club.name", "club.rating"])
                return comparison(path, constantKey: path)
            case 3: return quantified(pick(["tags.label", "tags.label", "tags.people.name"]))
            case 4: return count(pick(["tags.@count", "club.members.@count"]))
            case 5:
                let probe = DV.s(pick(["r", "u", "U", "ü", "x"]))
                let threshold = int(0...2)
                return .leaf(DLeaf(format: "SUBQUERY(tags, $t, $t.label BEGINSWITH[cd] %@).@count > \(threshold)", arguments: [.value(probe)]) { s, h in
                    s.tags(h).filter { Sem.compare(.begins, s.value($0, "label"), probe, .cd) }.count > threshold
                })
            case 6, 7: return chance(50) ? comparison("team", constantKey: "team") : comparison("level", constantKey: "level")
            default:
                let key = pick(attributes)
                return comparison(key, constantKey: key)
            }
        case "Club":
            switch int(0...7) {
            case 0: return count("members.@count")
            case 1: return quantified(pick(["members.name", "members.age", "members.tags.label"]))
            case 2: return membership(pick(["name", "rating"]))
            default:
                let key = pick(["name", "rating"])
                return comparison(key, constantKey: key)
            }
        default:
            switch int(0...5) {
            case 0: return count("people.@count")
            case 1: return quantified(pick(["people.club.name", "people.age"]))
            default: return comparison("label", constantKey: "label")
            }
        }
    }

    mutating func predicate(_ entity: String, depth: Int) -> DPred {
        if depth > 0 && chance(40) {
            switch int(0...5) {
            case 0, 1, 2: return .and((0..<int(2...3)).map { _ in predicate(entity, depth: depth - 1) })
            case 3, 4: return .or((0..<2).map { _ in predicate(entity, depth: depth - 1) })
            default: return .not(predicate(entity, depth: depth - 1))
            }
        }
        if chance(3) { return .bool(chance(50)) }
        return leaf(entity)
    }

    static func sortKeys(_ entity: String) -> [String] {
        switch entity {
        case "Person": personAttributes + ["club.name", "club.rating"]
        case "Staff": personAttributes + ["club.name", "salary"]
        case "Club": ["name", "rating", "members.@count"]
        default: ["label", "people.@count"]
        }
    }

    static func dictionaryKeys(_ entity: String) -> [String] {
        switch entity {
        case "Person": ["name", "team", "level", "active", "club.name", "club", "age", "code"]
        case "Staff": ["name", "team", "salary", "club.name", "level"]
        case "Club": ["name", "rating"]
        default: ["label"]
        }
    }

    static func defaultDictionaryKeys(_ entity: String) -> [String] {
        switch entity {
        case "Person": personAttributes
        case "Staff": personAttributes + ["salary"]
        case "Club": ["name", "rating"]
        default: ["label"]
        }
    }

    mutating func randomRequest() -> DRequest {
        let entity = pick(["Person", "Person", "Person", "Person", "Staff", "Club", "Tag"])
        var request = DRequest(entity: entity)
        request.subentities = chance(80)
        if chance(85) { request.predicate = predicate(entity, depth: 2) }
        for _ in 0..<int(0...3) {
            let key = pick(Self.sortKeys(entity))
            let isString = Self.types[key.split(separator: ".").last.map(String.init) ?? key] == "s"
            request.sorts.append(DSort(key: key, ascending: chance(60), style: isString && chance(40) ? int(1...4) : 0))
        }
        if chance(50) { request.limit = int(1...10) }
        if chance(30) { request.offset = int(0...6) }
        if chance(25) { request.batch = int(1...4) }
        request.pending = chance(70)
        request.faults = chance(80)
        request.propertyValues = chance(85)
        if chance(20) {
            switch entity {
            case "Club": request.prefetch = [pick(["members", "members.tags"])]
            case "Tag": request.prefetch = [pick(["people", "people.club"])]
            default: request.prefetch = [pick(["club", "tags", "club.members", "tags.people"])]
            }
        }
        switch int(0...19) {
        case 0, 1, 2: request.result = .ids
        case 3, 4, 5: request.result = .count
        case 6, 7, 8, 9:
            request.result = .dictionaries
            if chance(75) {
                let keys = Self.dictionaryKeys(entity)
                var chosen: [String] = []
                for _ in 0..<int(1...3) {
                    let key = pick(keys)
                    if !chosen.contains(key) { chosen.append(key) }
                }
                request.properties = chosen
                request.distinct = chance(60)
            }
        default: request.result = .objects
        }
        return request
    }

    // MARK: The reference

    func snapshot(_ request: DRequest) -> DSnapshot { request.pending ? current : saved }

    func sortValue(_ key: String, _ s: DSnapshot, _ h: Int) -> DV? { Self.getter(key)(s, h) }

    /// The handles a fetch returns: every object in scope in store order, filtered and
    /// sorted in memory (Swift's sort is stable: ties keep store order); offset and limit
    /// applied unless the request's distinct dictionary rows take them.
    func expected(_ request: DRequest, applyingWindow: Bool = true) -> [Int] {
        let scope = request.subentities ? scopes[request.entity] ?? [request.entity] : [request.entity]
        let position = Dictionary(scope.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        let s = snapshot(request)
        var candidates = s.objects.keys.filter { h in
            primaryKey[h] != nil && position[s.objects[h]?.entity ?? ""] != nil && (request.pending || saved.objects[h] != nil)
        }
        candidates.sort { a, b in
            (position[s.objects[a]?.entity ?? ""] ?? 0, primaryKey[a] ?? 0) < (position[s.objects[b]?.entity ?? ""] ?? 0, primaryKey[b] ?? 0)
        }
        candidates += parentInserted.filter { position[s.objects[$0]?.entity ?? ""] != nil }
        if request.pending {
            candidates += inserted.filter { position[current.objects[$0]?.entity ?? ""] != nil && primaryKey[$0] == nil }
        }
        var kept = candidates.filter { request.predicate?.evaluate(s, $0) ?? true }
        kept = kept.map { h in (h, request.sorts.map { sort in sortValue(sort.key, s, h) }) }
            .sorted { a, b in
                for (index, sort) in request.sorts.enumerated() {
                    let order = Sem.sortOrder(a.1[index], b.1[index], sort.options)
                    if order != .orderedSame { return sort.ascending ? order == .orderedAscending : order == .orderedDescending }
                }
                return false
            }
            .map(\.0)
        if applyingWindow { kept = window(kept, request) }
        return kept
    }

    func window<T>(_ items: [T], _ request: DRequest) -> [T] {
        var items = items
        if request.offset > 0 { items = Array(items.dropFirst(request.offset)) }
        if request.limit > 0 { items = Array(items.prefix(request.limit)) }
        return items
    }

    func expectedRows(_ request: DRequest) -> [[String: DCell]] {
        let s = snapshot(request)
        let keys = request.properties ?? Self.defaultDictionaryKeys(request.entity)
        let objects = expected(request, applyingWindow: !request.distinct)
        var rows: [[String: DCell]] = objects.map { h in
            var row: [String: DCell] = [:]
            for key in keys {
                if key == "club" {
                    if let club = s.club(h) { row[key] = .object(club) }
                } else if let value = sortValue(key, s, h) {
                    row[key] = .value(value)
                }
            }
            return row
        }
        if request.distinct {
            var unique: [[String: DCell]] = []
            for row in rows where !unique.contains(row) { unique.append(row) }
            rows = window(unique, request)
        }
        return rows
    }

    // MARK: Running

    func fetchRequest(_ request: DRequest, _ context: isolated ManagedObjectContext, objectArguments: Bool) throws -> FetchRequest<ManagedObject> {
        var fetch = FetchRequest(entityName: request.entity)
        if let predicate = request.predicate {
            let (format, arguments) = predicate.rendered
            func resolve(_ h: Int) -> Any {
                guard let id = ids[h] else { return "missing handle \(h)" }
                if objectArguments && h % 2 == 0, let object = context.registeredObject(for: id) ?? (id.isTemporaryID ? nil : try? context.object(with: id)) {
                    return object
                }
                return id
            }
            let values: [Any] = arguments.map { argument in
                switch argument {
                case .key(let key): key
                case .value(let value): value.argument
                case .object(let h): resolve(h)
                case .objects(let hs): hs.map(resolve)
                }
            }
            fetch.predicate = try FormatPredicate(format: format, argumentArray: values)
        }
        fetch.includesSubentities = request.subentities
        fetch.sortDescriptors = request.sorts.map(\.descriptor)
        fetch.fetchLimit = request.limit
        fetch.fetchOffset = request.offset
        fetch.fetchBatchSize = request.batch
        fetch.includesPendingChanges = request.pending
        fetch.returnsObjectsAsFaults = request.faults
        fetch.includesPropertyValues = request.propertyValues
        fetch.relationshipKeyPathsForPrefetching = request.prefetch
        switch request.result {
        case .objects: fetch.resultType = .managedObject
        case .ids: fetch.resultType = .managedObjectID
        case .count: fetch.resultType = .count
        case .dictionaries:
            fetch.resultType = .dictionary
            fetch.propertiesToFetch = request.properties.map { $0.map { PropertyToFetch.property($0) } }
            fetch.returnsDistinctResults = request.distinct
        }
        return fetch
    }

    func label(_ h: Int) -> String {
        guard let id = ids[h] else { return "#\(h)" }
        return id.isTemporaryID ? "\(id.entityName)/new#\(h)" : "\(id.entityName)/p\(primaryKey[h] ?? 0)"
    }

    func describe(_ request: DRequest, _ fetch: FetchRequest<ManagedObject>?) -> String {
        var parts = ["\(request.entity)\(request.subentities ? "" : " (no sub-entities)")"]
        if let predicate = fetch?.predicate { parts.append("where \(predicate)") }
        if let (_, arguments) = request.predicate?.rendered, arguments.contains(where: { if case .value = $0 { false } else { true } }) {
            parts.append("objects \(arguments.compactMap { argument -> String? in switch argument { case .object(let h): label(h); case .objects(let hs): "{\(hs.map(label).joined(separator: ", "))}"; default: nil } })")
        }
        if !request.sorts.isEmpty { parts.append("sorted by \(request.sorts.map(\.label).joined(separator: ", "))") }
        if request.offset > 0 { parts.append("offset \(request.offset)") }
        if request.limit > 0 { parts.append("limit \(request.limit)") }
        if request.batch > 0 { parts.append("batch \(request.batch)") }
        if !request.pending { parts.append("without pending changes") }
        if !request.faults { parts.append("not as faults") }
        if !request.propertyValues { parts.append("without property values") }
        if !request.prefetch.isEmpty { parts.append("prefetching \(request.prefetch)") }
        parts.append("result \(request.result)")
        if let properties = request.properties { parts.append("properties \(properties)") }
        if request.distinct { parts.append("distinct") }
        return parts.joined(separator: "; ")
    }

    /// Runs `request`; a description of how it differs from the reference, or nil.
    func mismatch(_ request: DRequest, _ context: isolated ManagedObjectContext, objectArguments: Bool) -> String? {
        let fetch: FetchRequest<ManagedObject>
        do {
            fetch = try fetchRequest(request, context, objectArguments: objectArguments)
        } catch {
            return "the predicate didn't parse: \(error)"
        }
        do {
            let handleOf = Dictionary(ids.map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
            func handles(_ found: [ManagedObjectID]) -> [Int] { found.map { handleOf[$0] ?? -1 } }
            let want = expected(request)
            var problems: [String] = []
            switch request.result {
            case .objects:
                let objects = try context.fetch(fetch)
                let got = handles(objects.map(\.objectID))
                if got != want {
                    problems.append("fetch: expected \(want.map(label)), got \(got.map(label))")
                    let s = snapshot(request)
                    for sort in request.sorts {
                        let shown = zip(objects, got).prefix(12).map { object, h in
                            "\(label(h)) \(String(describing: object.value(forKeyPath: sort.key))) vs \(String(describing: sortValue(sort.key, s, h)))"
                        }
                        problems.append("\(sort.key) (context vs reference): \(shown)")
                    }
                }
                let count = try context.count(for: fetch)
                if count != want.count { problems.append("count(for:) \(count), expected \(want.count)") }
                let idList = handles(try context.fetchObjectIDs(fetch))
                if idList != want { problems.append("fetchObjectIDs: got \(idList.map(label))") }
                // The objects show the context's values (batches and faults fire right).
                let key = request.entity == "Tag" ? "label" : "name"
                for (object, h) in zip(objects, got) where current.objects[h] != nil {
                    let value = object.value(forKey: key)
                    let shown: DV? =
                        switch value {
                        case let string as String: .s(string)
                        default: nil
                        }
                    if shown != current.value(h, key) {
                        problems.append("\(label(h)).\(key) reads \(String(describing: value)), expected \(String(describing: current.value(h, key)))")
                        break
                    }
                    // Relationships read as the context holds them.
                    let related: (String, Int)
                    switch request.entity {
                    case "Club": related = ("members", current.members(h).count)
                    case "Tag": related = ("people", current.people(h).count)
                    default: related = ("tags", current.tags(h).count)
                    }
                    let count = (object.value(forKey: related.0) as? Set<ManagedObject>)?.count ?? -1
                    if count != related.1 {
                        problems.append("\(label(h)).\(related.0) has \(count) objects, expected \(related.1)")
                        break
                    }
                    if request.entity == "Person" || request.entity == "Staff" {
                        let club = object.value(forKey: "club") as? ManagedObject
                        let clubName = club?.value(forKey: "name") as? String
                        let want = current.club(h).flatMap { current.value($0, "name") }
                        if clubName.map(DV.s) != want {
                            problems.append("\(label(h)).club.name reads \(String(describing: clubName)), expected \(String(describing: want))")
                            break
                        }
                    }
                }
            case .ids:
                guard case .objectIDs(let found) = try context.execute(fetch) else { return "execute didn't return object IDs" }
                let got = handles(found)
                if got != want { problems.append("execute IDs: expected \(want.map(label)), got \(got.map(label))") }
            case .count:
                guard case .count(let count) = try context.execute(fetch) else { return "execute didn't return a count" }
                if count != want.count { problems.append("execute count \(count), expected \(want.count)") }
                let direct = try context.count(for: fetch)
                if direct != want.count { problems.append("count(for:) \(direct), expected \(want.count)") }
            case .dictionaries:
                let rows = try context.fetchDictionaries(fetch)
                let got: [[String: DCell]] = rows.map { row in
                    row.mapValues { value -> DCell in
                        switch value {
                        case let x as String: .value(.s(x))
                        case let x as Int16: .value(.i(Int64(x)))
                        case let x as Int32: .value(.i(Int64(x)))
                        case let x as Int64: .value(.i(x))
                        case let x as Int: .value(.i(Int64(x)))
                        case let x as Double: .value(.d(x))
                        case let x as Date: .value(.t(x))
                        case let x as Bool: .value(.b(x))
                        case let x as ManagedObjectID: .object(handleOf[x] ?? -1)
                        default: .value(.s("unexpected \(type(of: value)): \(value)"))
                        }
                    }
                }
                let wantRows = expectedRows(request)
                if got != wantRows {
                    problems.append("dictionaries: expected \(wantRows.map(Self.describeRow)), got \(got.map(Self.describeRow))")
                }
            }
            return problems.isEmpty ? nil : problems.joined(separator: "\n  ")
        } catch {
            return "threw \(error)"
        }
    }

    static func describeRow(_ row: [String: DCell]) -> String {
        "[" + row.keys.sorted().map { "\($0): \(row[$0].map(\.description) ?? "-")" }.joined(separator: ", ") + "]"
    }

    /// The smallest reduction of `request` that still fails.
    func minimized(_ request: DRequest, _ context: isolated ManagedObjectContext, objectArguments: Bool) -> DRequest {
        var smallest = request
        var steps = 0
        while steps < 200 {
            guard let next = smallest.reductions.first(where: { mismatch($0, context, objectArguments: objectArguments) != nil }) else { break }
            smallest = next
            steps += 1
        }
        return smallest
    }

    mutating func runQueries(_ context: isolated ManagedObjectContext, count: Int, phase: String, objectArguments: Bool) throws -> [String] {
        var failures: [String] = []
        var kinds: [String: Int] = [:]
        var sizes = 0
        for index in 0..<count {
            let request = randomRequest()
            if PlannerDifferentialTests.environment["STRATA_DIFF_VERBOSE"] != nil, let fetch = try? fetchRequest(request, context, objectArguments: objectArguments) {
                let plan = (try? context.explain(fetch)).map { "\($0)" } ?? "error"
                let kind = plan.split(separator: " ").prefix(2).joined(separator: " ")
                kinds[kind, default: 0] += 1
                sizes += expected(request).count
                if PlannerDifferentialTests.environment["STRATA_DIFF_VERBOSE"] == "2" { print("\(describe(request, fetch)) -> \(expected(request).count)\n   \(plan)") }
            }
            defer { if index == count - 1, !kinds.isEmpty { print("\(phase): \(kinds.sorted { $0.key < $1.key }) mean result \(sizes / max(1, count))") } }
            PlannerDifferentialTests.compared.withLock { $0[seed, default: 0] += 1 }
            guard mismatch(request, context, objectArguments: objectArguments) != nil else { continue }
            let small = minimized(request, context, objectArguments: objectArguments)
            let fetch = try? fetchRequest(small, context, objectArguments: objectArguments)
            let plan = fetch.flatMap { try? context.explain($0) }.map { "\($0)" } ?? "-"
            failures.append(
                "\(phase), request \(index): \(describe(small, fetch))\n  plan: \(plan)\n  \(mismatch(small, context, objectArguments: objectArguments) ?? "passes when run again")")
            if failures.count >= 3 { break }
        }
        return failures
    }
}

enum DifferentialError: Error {
    case unknownHandle(Int)
}
