import Foundation
import Strata
import StrataTestSupport
import Testing

/// The randomized check of the query planner: whatever plan runs, a fetch returns what a
/// full scan filtered and sorted in memory returns — the same objects in the same order —
/// and `count(for:)` agrees. The reference is computed here, from the test's own record of
/// every value saved and every unsaved change, never through the planner.
@Suite("Query planner: randomized against a full scan")
struct QueryPlannerRandomizedTests {
    /// Queries per seed (`STRATA_PLANNER_ITERATIONS`, small by default).
    static let queries = Int(ProcessInfo.processInfo.environment["STRATA_PLANNER_ITERATIONS"] ?? "") ?? 120

    @Test("index plans equal a reference scan: random predicates, sorts, offsets, limits and unsaved changes", arguments: [1, 2, 3] as [UInt64])
    func randomized(seed: UInt64) async throws {
        let (failures, kinds) = try await run(seed: seed, model: try SeedModels.catalog)
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        if Self.queries >= 120 {
            #expect(
                kinds == ["full scan", "index scan", "index union", "index order", "no scan", "referrer scan", "objects by ID", "join scan"],
                "every kind of plan ran: \(kinds)")
        }
    }

    @Test(
        "compound indexes: plans reading named indexes over several properties equal a reference scan",
        arguments: [4, 5, 6] as [UInt64])
    func randomizedCompound(seed: UInt64) async throws {
        let (failures, kinds) = try await run(seed: seed, model: try SeedModels.compoundCatalog)
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        if Self.queries >= 120 {
            #expect(
                kinds.isSuperset(of: ["compound scan", "compound order", "index union", "full scan", "compound scan under a reference"]),
                "compound plans ran: \(kinds)")
        }
    }

    /// Random queries against a random store of `model` (the catalog's shape); the failures
    /// (at most 5) and the kinds of plan that ran.
    func run(seed: UInt64, model: ManagedObjectModel) async throws -> ([String], Set<String>) {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model)
        return try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> ([String], Set<String>) in
            var world = PlannerWorld(seed: seed, model: model)
            var kinds: Set<String> = []
            try world.populate(context, count: 160)
            var failures: [String] = []
            for round in 0..<3 {
                try world.makePendingChanges(context)
                for _ in 0..<max(1, Self.queries / 3) {
                    let request = world.randomRequest()
                    let expected = world.reference(request)
                    let plan = try context.explain(request)
                    kinds.insert(Self.kindName(plan.kind))
                    if case .indexScan(let scan) = plan.kind, scan.properties.count > 1 { kinds.insert("compound scan") }
                    if case .indexScan(let scan) = plan.kind, scan.targets != nil { kinds.insert(scan.attribute == "SELF" ? "objects by ID" : "referrer scan") }
                    if case .indexScan(let scan) = plan.kind, scan.joined != nil { kinds.insert("join scan") }
                    if case .indexScan(let scan) = plan.kind, scan.prefix.contains(where: { if case .reference = $0 { true } else { false } }) {
                        kinds.insert("compound scan under a reference")
                    }
                    if case .indexOrder(let scan, _, _, _, _) = plan.kind, scan.properties.count > 1 { kinds.insert("compound order") }
                    let got = try context.fetch(request).map(\.objectID)
                    let count = try context.count(for: request)
                    if got != expected || count != expected.count {
                        failures.append(
                            "seed \(seed) round \(round): \(world.describe(request))\n  plan: \(plan)\n  expected \(expected.count): \(expected.map(world.label))\n  got      \(got.count): \(got.map(world.label)) count \(count)")
                        if failures.count >= 5 { return (failures, kinds) }
                    }
                }
                if round == 1 {
                    try context.save()
                    world.didSave()
                }
            }
            return (failures, kinds)
        }
    }

    static func kindName(_ kind: QueryPlan.Kind) -> String {
        switch kind {
        case .fullScan: "full scan"
        case .indexScan: "index scan"
        case .indexUnion: "index union"
        case .indexOrder: "index order"
        case .noScan: "no scan"
        }
    }
}

// MARK: - The test's own model of the store and the context

/// What the test knows: every object's saved values, the unsaved changes, and how to
/// judge and order objects without the planner.
struct PlannerWorld {
    struct Row {
        var entity: String
        var values: [String: Any] = [:]
        var group: Int?
    }

    var rng: SeededGenerator
    var groups: [ManagedObject] = []
    /// The groups' titles as the context holds them (renamed unsaved at times): a fetch with
    /// pending changes reads a related object as the context holds it.
    var groupTitles: [String] = []
    /// The groups' titles as saved: a fetch without pending changes reads a related object
    /// as the store holds it (spec 0008, Pending changes 3).
    var savedGroupTitles: [String] = []
    /// Every object the test made, held so IDs stay resolvable.
    var objects: [ManagedObjectID: ManagedObject] = [:]
    var saved: [ManagedObjectID: Row] = [:]
    /// Saved objects as the context sees them now (unsaved updates applied, deletes removed).
    var current: [ManagedObjectID: Row] = [:]
    var deleted: Set<ManagedObjectID> = []
    var inserted: [(ManagedObjectID, Row)] = []
    var nextCode = 0
    let model: ManagedObjectModel

    init(seed: UInt64, model: ManagedObjectModel) {
        rng = SeededGenerator(seed: seed)
        self.model = model
    }

    static let entities = ["Item", "Gadget", "Gizmo"]
    static let attributes = ["name", "rank", "count", "score", "weight", "price", "flag", "day", "note"]

    // MARK: Values

    static let longBase = String(repeating: "m", count: 125)
    static let names: [String] = [
        "", "alpha", "Alpha", "beta", "gamma", "é", "e\u{301}", "\u{212A}elvin", "Kelvin", "zeta", "zz", "m",
        longBase + "a", longBase + "b", longBase + "ab", longBase, String(repeating: "m", count: 120),
        String(repeating: "m", count: 121), String(repeating: "m", count: 119) + "é", String(repeating: "m", count: 119) + "e\u{301}z",
    ]
    static let counts: [Int64] = [
        -3, 0, 1, 2, 7, 9_007_199_254_740_992, 9_007_199_254_740_993, 9_007_199_254_740_995, .max, .min, -9_007_199_254_740_993,
    ]
    static let scores: [Double] = [
        -2.5, -1, -0.0, 0, 0.5, 1, 1.5, 3, 1e300, -1e300, 0.1, .nan, Double(bitPattern: Double.nan.bitPattern | (1 << 63)), .infinity,
        -.infinity,
    ]
    static let weights: [Float] = [-1.5, 0, 0.1, 0.25, 1, 2.5, 3.4e38, .nan, -.nan, .infinity]
    static let prices: [Decimal] = [
        "-3", "0", "0.1", "1.1", "2.5", "1000000000000000000000.5", "1000000000000000000000.4", "0.30000000000000001", "0.3",
    ].compactMap { Decimal(string: $0) }
    static let days: [Date] = (-3...3).map { Date(timeIntervalSinceReferenceDate: 700_000_000 + Double($0) * 3600) }
    static let notes = ["a", "b", "apple", "banana", "Apple"]

    mutating func chance(_ percent: Int) -> Bool { Int(rng.next() % 100) < percent }
    mutating func pick<T>(_ values: [T]) -> T { values[Int(rng.next() % UInt64(values.count))] }
    mutating func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + Int(rng.next() % UInt64(range.count)) }

    mutating func randomValue(_ attribute: String) -> Any? {
        if chance(12) { return nil }
        switch attribute {
        case "name": return pick(Self.names)
        case "rank": return chance(5) ? pick([Int16.min, Int16.max]) : Int16(int(-20...20))
        case "count": return pick(Self.counts)
        case "score": return pick(Self.scores)
        case "weight": return pick(Self.weights)
        case "price": return pick(Self.prices)
        case "flag": return chance(50)
        case "day": return pick(Self.days)
        case "note": return pick(Self.notes)
        case "volts": return Int32(int(-5...5))
        default: return nil
        }
    }

    // MARK: Building the store

    mutating func populate(_ context: isolated ManagedObjectContext, count: Int) throws {
        for index in 0..<3 {
            let group = try context.insertNewObject(forEntityName: "Group")
            group.setValue("G\(index)", forKey: "title")
            groups.append(group)
            groupTitles.append("G\(index)")
            savedGroupTitles.append("G\(index)")
        }
        var made: [(ManagedObject, Row)] = []
        for _ in 0..<count {
            made.append(try insertRandom(context))
        }
        try context.save()
        for (object, row) in made {
            objects[object.objectID] = object
            saved[object.objectID] = row
        }
        // A second save: some updates and deletes, leaving gaps in the keys.
        for (object, _) in made where chance(15) {
            if chance(40) {
                context.delete(object)
                saved[object.objectID] = nil
            } else {
                let attribute = pick(Self.attributes)
                let value = randomValue(attribute)
                object.setValue(value, forKey: attribute)
                saved[object.objectID]?.values[attribute] = value
            }
        }
        try context.save()
        current = saved
    }

    mutating func insertRandom(_ context: isolated ManagedObjectContext) throws -> (ManagedObject, Row) {
        let entity = pick(Self.entities)
        let object = try context.insertNewObject(forEntityName: entity)
        var row = Row(entity: entity)
        for attribute in Self.attributes + (entity == "Item" ? [] : ["volts"]) {
            let value = randomValue(attribute)
            if let value {
                object.setValue(value, forKey: attribute)
                row.values[attribute] = value
            }
        }
        if chance(70) {
            nextCode += 1
            object.setValue("c\(nextCode)", forKey: "code")
            row.values["code"] = "c\(nextCode)"
        }
        if chance(60) {
            let group = int(0...2)
            object.setValue(groups[group], forKey: "group")
            row.group = group
        }
        return (object, row)
    }

    /// Unsaved updates, deletes and inserts; some unchanged objects read (fulfilled faults).
    mutating func makePendingChanges(_ context: isolated ManagedObjectContext) throws {
        let ids = current.keys.sorted()
        for id in ids {
            guard let object = objects[id] else { continue }
            if chance(8) {
                context.delete(object)
                current[id] = nil
                deleted.insert(id)
            } else if chance(15) {
                for _ in 0..<int(1...3) {
                    let entity = current[id]?.entity ?? "Item"
                    let attribute = pick(Self.attributes + (entity == "Item" ? [] : ["volts"]))
                    let value = randomValue(attribute)
                    object.setValue(value, forKey: attribute)
                    current[id]?.values[attribute] = value
                }
                if chance(20) {
                    let group = int(0...2)
                    object.setValue(groups[group], forKey: "group")
                    current[id]?.group = group
                }
            } else if chance(10) {
                _ = object.value(forKey: "name")  // an unchanged, fulfilled object
            }
        }
        if chance(60) {
            // A group renamed (sometimes to another group's title): the join's targets change.
            let group = int(0...2)
            let title = "G\(int(0...3))"
            groups[group].setValue(title, forKey: "title")
            groupTitles[group] = title
        }
        for _ in 0..<int(3...8) {
            let (object, row) = try insertRandom(context)
            objects[object.objectID] = object
            inserted.append((object.objectID, row))
        }
        // Updating an unsaved insert.
        if let last = inserted.indices.last, chance(50) {
            let attribute = pick(Self.attributes)
            let value = randomValue(attribute)
            objects[inserted[last].0]?.setValue(value, forKey: attribute)
            inserted[last].1.values[attribute] = value
        }
    }

    /// After a save, the context's view is the store's.
    mutating func didSave() {
        var now: [ManagedObjectID: Row] = [:]
        var held: [ManagedObjectID: ManagedObject] = [:]
        for (id, row) in current {
            guard let object = objects[id] else { continue }
            now[object.objectID] = row
            held[object.objectID] = object
        }
        for (id, row) in inserted {
            guard let object = objects[id] else { continue }
            now[object.objectID] = row
            held[object.objectID] = object
        }
        saved = now
        current = now
        savedGroupTitles = groupTitles
        objects = held
        deleted = []
        inserted = []
    }

    // MARK: Random requests

    mutating func constant(for attribute: String) -> PredicateConstant {
        switch attribute {
        case "name": return .string(chance(85) ? pick(Self.names) : pick(["a", "m", "z", "é", "E\u{301}", String(repeating: "m", count: 130)]))
        case "note": return .string(pick(Self.notes + ["ap", "c"]))
        case "rank", "volts":
            switch int(0...5) {
            case 0: return .double(Double(int(-20...20)) + 0.5)
            case 1: return .integer(pick([100_000, -100_000, 32767, -32768]))
            case 2: return .decimal(pick([Decimal(string: "2.5"), Decimal(string: "-1"), Decimal(string: "3")].compactMap { $0 }))
            case 3: return .double(pick([1e20, -1e20, 3.0, -0.0]))
            default: return .integer(int(-20...20))
            }
        case "count":
            switch int(0...3) {
            case 0: return .double(pick([9.007199254740992e15, 9.2233720368547758e18, -1e19, 2.5, 1e300]))
            case 1: return .decimal(pick([Decimal(string: "2.5"), Decimal(string: "9007199254740993")].compactMap { $0 }))
            default: return .integer(Int(pick(Self.counts)))
            }
        case "score", "weight", "price":
            switch int(0...3) {
            case 0: return .integer(int(-3...3))
            case 1: return .decimal(pick(Self.prices + [Decimal(string: "0.5") ?? 0]))
            default: return .double(Double(pick(Self.scores)) + (chance(30) ? 0.25 : 0))
            }
        case "flag":
            return pick([.bool(true), .bool(false), .integer(0), .integer(1), .integer(2), .double(0.5)])
        case "day":
            let base = pick(Self.days)
            return .date(chance(30) ? base.addingTimeInterval(1800) : base)
        default:
            return .null
        }
    }

    mutating func comparison(_ attributes: [String]) -> PredicateNode {
        let attribute = pick(attributes)
        let path = FormatExpression.keyPath(FormatKeyPath(attribute))
        if chance(6) {
            return .comparison(ComparisonPredicate(path, pick([.equalTo, .notEqualTo]), .constant(.null)))
        }
        if chance(7) {
            // Through the to-one relationship (a join: the groups found first, then their referrers).
            let title = FormatExpression.keyPath(FormatKeyPath("group.title"))
            func named() -> PredicateConstant { .string("G\(int(0...3))") }
            switch int(0...5) {
            case 0: return .comparison(ComparisonPredicate(title, .beginsWith, .constant(.string(pick(["G", "g", "G1"]))), options: chance(30) ? .caseInsensitive : []))
            case 1: return .comparison(ComparisonPredicate(title, .in, .constant(.aggregate(chance(20) ? [named(), .null] : [named(), named()]))))
            case 2: return .comparison(ComparisonPredicate(title, pick([.notEqualTo, .equalTo]), .constant(chance(50) ? .null : named())))
            case 3: return .comparison(ComparisonPredicate(.constant(named()), pick([.equalTo, .lessThan, .greaterThanOrEqualTo]), title))
            default: return .comparison(ComparisonPredicate(title, .equalTo, .constant(named())))
            }
        }
        if chance(5), !current.isEmpty {
            // Objects by ID: SELF == one, or SELF IN a few (sometimes an unsaved insert's temporary ID).
            let ids = current.keys.sorted()
            var picked = (0..<int(1...3)).map { _ in ids[int(0...(ids.count - 1))] }
            if chance(30), let fresh = inserted.last { picked.append(fresh.0) }
            let constants = picked.map { PredicateConstant.object(PredicateIdentity($0)) }
            if picked.count == 1 { return .comparison(ComparisonPredicate(.evaluatedObject, .equalTo, .constant(constants[0]))) }
            return .comparison(ComparisonPredicate(.evaluatedObject, .in, .constant(.aggregate(constants))))
        }
        if chance(8), !groups.isEmpty {
            // An equality on the to-one relationship: one group, or IN several.
            let group = FormatExpression.keyPath(FormatKeyPath("group"))
            func identity(_ index: Int) -> PredicateConstant { .object(PredicateIdentity(groups[index].objectID)) }
            if chance(70) { return .comparison(ComparisonPredicate(group, .equalTo, .constant(identity(int(0...2))))) }
            return .comparison(ComparisonPredicate(group, .in, .constant(.aggregate((0..<int(1...2)).map { _ in identity(int(0...2)) }))))
        }
        var options: ComparisonOptions = []
        if attribute == "name" || attribute == "note" {
            if chance(15) { options = pick([.caseInsensitive, .diacriticInsensitive, [.caseInsensitive, .diacriticInsensitive], .normalized]) }
            if chance(10) {
                return .comparison(ComparisonPredicate(path, .beginsWith, .constant(.string(pick(["a", "m", "A", "é"]))), options: options))
            }
        }
        switch int(0...9) {
        case 0:
            return .comparison(
                ComparisonPredicate(path, .between, .constant(.aggregate([constant(for: attribute), constant(for: attribute)])), options: options))
        case 1:
            var elements = (0..<int(1...4)).map { _ in constant(for: attribute) }
            if chance(20) { elements.append(.null) }
            return .comparison(ComparisonPredicate(path, .in, .constant(.aggregate(elements)), options: options))
        case 2:
            // Constant on the left.
            let op = pick([ComparisonOperator.lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo, .equalTo])
            return .comparison(ComparisonPredicate(.constant(constant(for: attribute)), op, path, options: options))
        default:
            let op = pick([ComparisonOperator.equalTo, .notEqualTo, .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo])
            return .comparison(ComparisonPredicate(path, op, .constant(constant(for: attribute)), options: options))
        }
    }

    mutating func predicate(_ attributes: [String], depth: Int) -> PredicateNode {
        if depth > 0 && chance(45) {
            switch int(0...5) {
            case 0, 1, 2: return .and((0..<int(2...3)).map { _ in predicate(attributes, depth: depth - 1) })
            case 3, 4: return .or((0..<2).map { _ in predicate(attributes, depth: depth - 1) })
            default: return .not(predicate(attributes, depth: depth - 1))
            }
        }
        if chance(3) { return .constant(chance(50)) }
        return comparison(attributes)
    }

    mutating func randomRequest() -> FetchRequest<ManagedObject> {
        let entity = chance(70) ? "Item" : pick(["Gadget", "Gizmo"])
        let attributes = Self.attributes + (entity == "Item" ? [] : ["volts"])
        var request = FetchRequest(entityName: entity)
        request.includesSubentities = chance(80)
        request.includesPendingChanges = chance(80)
        if chance(85) {
            var node = predicate(attributes, depth: 2)
            if chance(10) {
                // A substitution variable.
                node = .and([node, .comparison(ComparisonPredicate(.keyPath("rank"), .greaterThan, .variable("LOW")))])
                request.substitutionVariables["LOW"] = .int16(Int16(int(-20...10)))
            }
            request.predicate = FormatPredicate(node)
        }
        for _ in 0..<int(0...3) {
            let key = pick(attributes + ["code"])
            request.sortDescriptors.append(
                FetchSortDescriptor(key: key, ascending: chance(60), caseInsensitive: (key == "name" || key == "note") && chance(20)))
        }
        if chance(60) { request.fetchLimit = int(1...15) }
        if chance(40) { request.fetchOffset = int(0...10) }
        return request
    }

    // MARK: The reference

    /// What a full scan filtered and sorted in memory returns.
    func reference(_ request: FetchRequest<ManagedObject>) -> [ManagedObjectID] {
        let scope = request.includesSubentities ? model.selfAndSubentityNames(of: request.entityName) : [request.entityName]
        let position = Dictionary(scope.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        var candidates: [(ManagedObjectID, Row)] = []
        let stored = request.includesPendingChanges ? current : saved
        for (id, row) in stored where position[row.entity] != nil { candidates.append((id, row)) }
        candidates.sort { a, b in
            (position[a.1.entity] ?? 0, Self.primaryKey(a.0)) < (position[b.1.entity] ?? 0, Self.primaryKey(b.0))
        }
        if request.includesPendingChanges {
            candidates += inserted.filter { position[$0.1.entity] != nil }
        }
        let variables = request.substitutionVariables.mapValues { $0.anyValue as Any }
        var kept: [(ManagedObjectID, [String: Any])] = []
        for (id, row) in candidates {
            var values = row.values
            let titles = request.includesPendingChanges ? groupTitles : savedGroupTitles
            if let group = row.group { values["group"] = GroupReference(id: groups[group].objectID, title: titles[group]) }
            if let predicate = request.predicate {
                let subject = RowReference(id: id, values: values)
                guard (try? predicate.evaluate(with: subject, substitutionVariables: variables)) == true else { continue }
            }
            kept.append((id, values))
        }
        // Swift's sort is stable: ties keep store order.
        kept.sort { a, b in
            for descriptor in request.sortDescriptors {
                let order = Self.compare(a.1[descriptor.key], b.1[descriptor.key], caseInsensitive: descriptor.caseInsensitive)
                if order != .orderedSame { return descriptor.ascending ? order == .orderedAscending : order == .orderedDescending }
            }
            return false
        }
        var ids = kept.map(\.0)
        if request.fetchOffset > 0 { ids = Array(ids.dropFirst(request.fetchOffset)) }
        if request.fetchLimit > 0 { ids = Array(ids.prefix(request.fetchLimit)) }
        return ids
    }

    static func primaryKey(_ id: ManagedObjectID) -> Int {
        Int(id.uriRepresentation().lastPathComponent.dropFirst()) ?? 0
    }

    /// The documented sort order: nil first, strings by Swift's order (or case-insensitively),
    /// numbers by value — integers with integers and decimals with decimals exactly — and NaN
    /// after every number.
    static func compare(_ x: Any?, _ y: Any?, caseInsensitive: Bool) -> ComparisonResult {
        func integer(_ value: Any?) -> Int64? {
            switch value {
            case let v as Int16: Int64(v)
            case let v as Int32: Int64(v)
            case let v as Int64: v
            default: nil
            }
        }
        func number(_ value: Any?) -> Double? {
            switch value {
            case let v as Int16: Double(v)
            case let v as Int32: Double(v)
            case let v as Int64: Double(v)
            case let v as Double: v
            case let v as Float: Double(v)
            case let v as Decimal: NSDecimalNumber(decimal: v).doubleValue
            default: nil
            }
        }
        func order<T: Comparable>(_ a: T, _ b: T) -> ComparisonResult { a < b ? .orderedAscending : (a == b ? .orderedSame : .orderedDescending) }
        switch (x, y) {
        case (nil, nil): return .orderedSame
        case (nil, _): return .orderedAscending
        case (_, nil): return .orderedDescending
        case (let a as String, let b as String):
            // Case-insensitive: both folded as a predicate's [c] folds them, then in order (spec 0008).
            guard caseInsensitive else { return order(a, b) }
            return order(a.folding(options: .caseInsensitive, locale: nil), b.folding(options: .caseInsensitive, locale: nil))
        case (let a as Date, let b as Date): return order(a, b)
        case (let a as Bool, let b as Bool): return a == b ? .orderedSame : (a ? .orderedDescending : .orderedAscending)
        case (let a as Decimal, let b as Decimal): return order(a, b)
        default:
            if let a = integer(x), let b = integer(y) { return order(a, b) }
            guard let a = number(x), let b = number(y) else { return .orderedSame }
            if a.isNaN || b.isNaN { return a.isNaN == b.isNaN ? .orderedSame : (a.isNaN ? .orderedDescending : .orderedAscending) }
            return order(a, b)
        }
    }

    func label(_ id: ManagedObjectID) -> String {
        id.isTemporaryID ? "new" : "\(id.entityName)/p\(Self.primaryKey(id))"
    }

    func describe(_ request: FetchRequest<ManagedObject>) -> String {
        let sorts = request.sortDescriptors.map { "\($0.key)\($0.ascending ? "" : "↓")\($0.caseInsensitive ? "[c]" : "")" }
        return "\(request.entityName)\(request.includesSubentities ? "" : " only") pending=\(request.includesPendingChanges) "
            + "where \(request.predicate?.description ?? "-") vars \(request.substitutionVariables) sort \(sorts) "
            + "offset \(request.fetchOffset) limit \(request.fetchLimit)"
    }
}

/// A row as the reference sees it: its values by key-value coding, its object ID as its
/// identity (what `SELF == %@` compares).
struct RowReference: KeyValueCoding, PredicateObjectIdentity {
    let id: ManagedObjectID
    let values: [String: Any]

    func value(forKey key: String) -> Any? { values[key] }
    var predicateIdentity: any Hashable & Sendable { id }
}

/// A group as the reference sees it: its title by key-value coding, its object ID as its
/// identity (what `group == %@` compares).
struct GroupReference: KeyValueCoding, PredicateObjectIdentity {
    let id: ManagedObjectID
    let title: String

    func value(forKey key: String) -> Any? { key == "title" ? title : nil }
    var predicateIdentity: any Hashable & Sendable { id }
}
