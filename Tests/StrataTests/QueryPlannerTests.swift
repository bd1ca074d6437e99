import Foundation
import Strata
import StrataTestSupport
import Testing

/// A store of the catalog model: 40 items (Item, Gadget, Gizmo) with known values, saved.
/// Item n (n = 1…40): rank n % 10 (nil for n % 7 == 0), name "n\(n % 5)", code "c\(n)",
/// score Double(n) / 2, flag n even, note "note\(n % 3)"; every third is a Gadget (volts n % 4),
/// every ninth a Gizmo instead.
private func catalogStore(_ dir: TemporaryDirectory) async throws -> PersistentStoreCoordinator {
    let coordinator = try openCoordinator(dir, model: try SeedModels.catalog)
    try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        let group = try context.insertNewObject(forEntityName: "Group")
        group.setValue("G", forKey: "title")
        for n in 1...40 {
            let entity = n % 9 == 0 ? "Gizmo" : (n % 3 == 0 ? "Gadget" : "Item")
            let item = try context.insertNewObject(forEntityName: entity)
            item.setValue(n % 7 == 0 ? nil : Int16(n % 10), forKey: "rank")
            item.setValue("n\(n % 5)", forKey: "name")
            item.setValue("c\(n)", forKey: "code")
            item.setValue(Double(n) / 2, forKey: "score")
            item.setValue(n % 2 == 0, forKey: "flag")
            item.setValue("note\(n % 3)", forKey: "note")
            item.setValue(Int64(n) * 1000, forKey: "count")
            if entity != "Item" { item.setValue(Int32(n % 4), forKey: "volts") }
            if n % 4 == 0 { item.setValue(group, forKey: "group") }
        }
        try context.save()
    }
    return coordinator
}

private func request(
    _ entity: String = "Item", _ format: String? = nil, _ arguments: [Any] = [], sort: [FetchSortDescriptor] = [], limit: Int = 0,
    offset: Int = 0
) throws -> FetchRequest<ManagedObject> {
    var request = FetchRequest(entityName: entity, predicate: try format.map { try FormatPredicate(format: $0, argumentArray: arguments) })
    request.sortDescriptors = sort
    request.fetchLimit = limit
    request.fetchOffset = offset
    return request
}

/// The plan of `format` on Item without its sub-entities.
private func itemPlan(_ context: isolated ManagedObjectContext, _ format: String, _ arguments: Any...) throws -> String {
    var r = try request("Item", format, arguments)
    r.includesSubentities = false
    return try context.explain(r).description
}

/// The plan of `format` on Item.
private func plan(_ context: isolated ManagedObjectContext, _ format: String) throws -> String {
    try context.explain(try request("Item", format)).description
}

/// The error fetching `request` throws (after checking `count(for:)` and `explain` throw too).
private func failure(_ context: isolated ManagedObjectContext, _ request: FetchRequest<ManagedObject>) -> ContextError? {
    do {
        _ = try context.fetch(request)
        return nil
    } catch {
        #expect((try? context.count(for: request)) == nil, "count(for:) throws too")
        #expect((try? context.explain(request)) == nil, "explain throws too")
        return error as? ContextError
    }
}

/// The `code`s of the objects `request` fetches, in order.
private func codes(_ context: isolated ManagedObjectContext, _ request: FetchRequest<ManagedObject>) throws -> [String] {
    try context.fetch(request).map { $0.value(forKey: "code") as? String ?? "?" }
}

@Suite("Query planner: explain")
struct QueryPlannerExplainTests {
    @Test("each comparison form on an indexed attribute is an index scan over the matching range, in the attribute's own type")
    func comparisonForms() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await catalogStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try itemPlan(context, "rank == 5") == "index scan Item.rank = 5 (sub-entities excluded)")
            #expect(try itemPlan(context, "rank IN {3, 1, 2}") == "index scan Item.rank IN {1, 2, 3} (sub-entities excluded)")
            #expect(try itemPlan(context, "rank < 5") == "index scan Item.rank (-∞, 4] (sub-entities excluded)")
            #expect(try itemPlan(context, "rank <= 5") == "index scan Item.rank (-∞, 5] (sub-entities excluded)")
            #expect(try itemPlan(context, "rank > 5") == "index scan Item.rank [6, +∞) (sub-entities excluded)")
            #expect(try itemPlan(context, "rank >= 5") == "index scan Item.rank [5, +∞) (sub-entities excluded)")
            #expect(try itemPlan(context, "rank BETWEEN {3, 6}") == "index scan Item.rank [3, 6] (sub-entities excluded)")
            #expect(try itemPlan(context, "5 < rank") == "index scan Item.rank [6, +∞) (sub-entities excluded)", "a constant on the left")
            #expect(try itemPlan(context, "rank == nil") == "index scan Item.rank = nil (sub-entities excluded)")
            // A real attribute's open end stops at the infinity, which it includes: NaN is in no range.
            #expect(try itemPlan(context, "score < 1.5") == "index scan Item.score [-∞, 1.5) (sub-entities excluded)")
            #expect(try itemPlan(context, "score >= 1.5") == "index scan Item.score [1.5, +∞] (sub-entities excluded)")
            #expect(try itemPlan(context, "score < %@", -Double.infinity) == "no scan of Item (the predicate matches nothing stored) (sub-entities excluded)")
            #expect(try itemPlan(context, "name >= 'n3'") == "index scan Item.name [\"n3\", +∞) (sub-entities excluded)")
            #expect(try itemPlan(context, "day < %@", Date(timeIntervalSinceReferenceDate: 0)) == "index scan Item.day [-∞, 2001-01-01T00:00:00.000Z) (sub-entities excluded)")
            // Numeric conversions: rounded to the integer attribute, clamped to its range.
            #expect(try itemPlan(context, "rank > 2.5") == "index scan Item.rank [3, +∞) (sub-entities excluded)")
            #expect(try itemPlan(context, "rank <= -0.5") == "index scan Item.rank (-∞, -1] (sub-entities excluded)")
            #expect(try itemPlan(context, "rank < 100000") == "index scan Item.rank (not nil) (sub-entities excluded)")
            #expect(try itemPlan(context, "rank > 100000") == "no scan of Item (the predicate matches nothing stored) (sub-entities excluded)")
            #expect(try itemPlan(context, "rank == 2.5") == "no scan of Item (the predicate matches nothing stored) (sub-entities excluded)")
            // The structured form holds the attribute's own value type (rank is Integer 16).
            let between = try context.explain(try request("Item", "rank BETWEEN {30, 40}"))
            #expect(between.kind == .indexScan(QueryPlan.IndexScan(
                attribute: "rank", indexEntity: "Item",
                ranges: [IndexRange(lower: .int16(30), includesLower: true, upper: .int16(40), includesUpper: true)])))
            #expect(between.filter == nil)
            #expect(between.subentityNames == ["Gadget", "Gizmo"])
        }
    }

    @Test("substitution variables are planned with their values")
    func variables() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await catalogStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var r = try request("Item", "rank >= $MIN AND rank <= $MAX")
            r.substitutionVariables = ["MIN": .int32(3), "MAX": .int32(6)]
            #expect(try context.explain(r).description == "index scan Item.rank [3, 6] (+2 sub-entities)")
            #expect(try codes(context, r).count == 14)
        }
    }

    @Test("AND picks the most selective index and filters the rest; ranges on one attribute intersect")
    func conjunctions() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await catalogStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.explain(try request("Item", "rank > 2 AND code == 'c5'")).description
                == "index scan Item.code = \"c5\" (+2 sub-entities) then filter (rank > 2)", "equality beats a range")
            #expect(try context.explain(try request("Item", "rank >= 2 AND rank < 5 AND note == 'note1'")).description
                == "index scan Item.rank [2, 4] (+2 sub-entities) then filter (note == \"note1\")")
            #expect(try context.explain(try request("Item", "rank > 5 AND rank < 3")).description
                == "no scan of Item (the predicate matches nothing stored) (+2 sub-entities)")
            // Two ranges: the one holding fewer objects wins (score > 19 holds 2, rank > 0 holds 31).
            #expect(try context.explain(try request("Item", "rank > 0 AND score > 19")).description
                == "index scan Item.score (19.0, +∞] (+2 sub-entities) then filter (rank > 0)")
            #expect(try codes(context, try request("Item", "rank > 0 AND score > 19")) == ["c39"])
        }
    }

    @Test("OR of indexable branches unions index scans; OR, NOT, !=, unindexed and [c] comparisons scan the entity")
    func scans() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await catalogStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try plan(context, "code == 'c1' OR rank == 9") == "index union Item.code = \"c1\" | Item.rank = 9 (+2 sub-entities)")
            #expect(try plan(context, "rank == 1 OR rank == 3") == "index scan Item.rank IN {1, 3} (+2 sub-entities)")
            #expect(try plan(context, "rank == 1 OR note == 'note1'") == "full scan Item (+2 sub-entities) then filter (rank == 1 OR note == \"note1\")")
            #expect(try plan(context, "NOT rank == 1") == "full scan Item (+2 sub-entities) then filter (NOT rank == 1)")
            #expect(try plan(context, "rank != 1") == "full scan Item (+2 sub-entities) then filter (rank != 1)")
            #expect(try plan(context, "note == 'note1'") == "full scan Item (+2 sub-entities) then filter (note == \"note1\")")
            #expect(try plan(context, "name ==[c] 'N1'") == "full scan Item (+2 sub-entities) then filter (name ==[c] \"N1\")")
            #expect(try plan(context, "FALSEPREDICATE") == "no scan of Item (the predicate matches nothing stored) (+2 sub-entities)")
            #expect(try context.explain(FetchRequest(entityName: "Item")).description == "full scan Item (+2 sub-entities)")
            #expect(try codes(context, try request("Item", "code == 'c1' OR rank == 9")).sorted() == ["c1", "c19", "c29", "c39", "c9"])
        }
    }

    @Test("a sort on an indexed attribute with a limit walks the index and stops; without a limit, or case-insensitive, it sorts in memory")
    func indexOrder() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await catalogStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let byScore = [FetchSortDescriptor(key: "score", ascending: false)]
            #expect(try context.explain(try request("Item", sort: byScore, limit: 3)).description
                == "index order Item.score descending, stops after 3 (+2 sub-entities)")
            #expect(try codes(context, try request("Item", sort: byScore, limit: 3)) == ["c40", "c39", "c38"])
            #expect(try context.explain(try request("Item", sort: byScore, limit: 3, offset: 2)).description
                == "index order Item.score descending, stops after 5 (+2 sub-entities)")
            #expect(try codes(context, try request("Item", sort: byScore, limit: 3, offset: 2)) == ["c38", "c37", "c36"])
            // The predicate on the same attribute bounds the walk; another attribute filters.
            let byRank = [FetchSortDescriptor(key: "rank"), FetchSortDescriptor(key: "code")]
            #expect(try context.explain(try request("Item", "rank > 6 AND note == 'note0'", sort: byRank, limit: 2)).description
                == "index order Item.rank ascending over [7, +∞), stops after 2 (+2 sub-entities) then filter (note == \"note0\"); sorted by code")
            #expect(try codes(context, try request("Item", "rank > 6 AND note == 'note0'", sort: byRank, limit: 2)) == ["c27", "c18"])
            // No limit: sorted in memory.
            #expect(try context.explain(try request("Item", sort: byScore)).description == "full scan Item (+2 sub-entities); sorted by score descending")
            // Case-insensitive: the index order isn't the sort's order.
            let folded = [FetchSortDescriptor(key: "name", caseInsensitive: true)]
            #expect(try context.explain(try request("Item", sort: folded, limit: 3)).description
                == "full scan Item (+2 sub-entities); sorted by name (case-insensitive); limit 3")
            // An equality on another index is more selective than a limited walk.
            #expect(try context.explain(try request("Item", "code == 'c4'", sort: byScore, limit: 3)).description
                == "index scan Item.code = \"c4\" (+2 sub-entities); sorted by score descending; limit 3")
        }
    }

    @Test("sub-entities share an inherited index; includesSubentities = false keeps to the entity; a sub-entity's own index")
    func subentities() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await catalogStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let gadgets = try request("Gadget", "rank == 3")
            #expect(try context.explain(gadgets).description == "index scan Item.rank = 3 for Gadget (+1 sub-entity)")
            #expect(try codes(context, gadgets) == ["c3", "c33"])
            #expect(try codes(context, try request("Item", "rank == 3")) == ["c13", "c23", "c3", "c33"], "store order: Items, then Gadgets")
            var only = try request("Gadget", "rank == 3 OR rank == 6")
            only.includesSubentities = false
            #expect(try context.explain(only).description == "index scan Item.rank IN {3, 6} for Gadget (sub-entities excluded)")
            #expect(try codes(context, only) == ["c3", "c6", "c33"])
            let volts = try request("Gadget", "volts == 2")
            #expect(try context.explain(volts).description == "index scan Gadget.volts = 2 (+1 sub-entity)")
            #expect(try codes(context, volts) == ["c6", "c30", "c18"])
        }
    }

    @Test("a limited walk falls back to the predicate's index when it reads too many objects without finishing")
    func fallback() async throws {
        let dir = try TemporaryDirectory()
        // 8,500 items (written with the log, then opened by a coordinator): score = count = n.
        let path = dir.url.appendingPathComponent("store").path
        do {
            let log = try EventLog(path: path, model: try SeedModels.catalog)
            var draft = TransactionDraft(author: "test")
            for n in 0..<8500 {
                draft.insert("Item", values: ["score": .attribute(.double(Double(n))), "count": .attribute(.int64(Int64(n))), "code": .attribute(.string("c\(n)"))])
            }
            try log.commit(draft)
        }
        let coordinator = try openCoordinator(dir, model: try SeedModels.catalog)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let r = try request("Item", "score >= 4300", sort: [FetchSortDescriptor(key: "count")], limit: 3)
            let plan = try context.explain(r)
            #expect(plan.description == "index order Item.count ascending, stops after 3 (falls back to index scan Item.score [4300.0, +∞] after 4096 objects) (+2 sub-entities) then filter (score >= 4300)")
            #expect(try codes(context, r) == ["c4300", "c4301", "c4302"])
            #expect(try context.count(for: r) == 3)
            // Correlated the other way, the walk finishes early.
            let r2 = try request("Item", "score >= 4300", sort: [FetchSortDescriptor(key: "count", ascending: false)], limit: 3)
            #expect(try codes(context, r2) == ["c8499", "c8498", "c8497"])
        }
    }
}

@Suite("Query planner: results")
struct QueryPlannerResultTests {
    @Test("offset and limit with sorting: ties are sorted by the next descriptor, then in store order")
    func offsetLimit() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await catalogStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let byRank = [FetchSortDescriptor(key: "rank", ascending: false)]
            let all = try codes(context, try request("Item", sort: byRank))
            for offset in [0, 1, 3, 5] {
                for limit in [1, 2, 4, 7] {
                    #expect(try codes(context, try request("Item", sort: byRank, limit: limit, offset: offset)) == Array(all.dropFirst(offset).prefix(limit)))
                }
            }
            // Nil sorts first ascending, last descending.
            // (Ties in store order: Items, then Gadgets; c21 is a Gadget.)
            #expect(try codes(context, try request("Item", sort: [FetchSortDescriptor(key: "rank")], limit: 5)) == ["c7", "c14", "c28", "c35", "c21"])
            #expect(try codes(context, try request("Item", sort: [FetchSortDescriptor(key: "rank"), FetchSortDescriptor(key: "score", ascending: false)], limit: 3, offset: 4)) == ["c7", "c40", "c30"])
        }
    }

    @Test("includesPendingChanges: unsaved inserts, updates and deletes count by default; with false, the store's state decides")
    func pendingChanges() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await catalogStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let c2 = try #require(try context.fetch(try request("Item", "code == 'c2'")).first)
            let c12 = try #require(try context.fetch(try request("Item", "code == 'c12'")).first)
            let fresh = try context.insertNewObject(forEntityName: "Item")
            fresh.setValue("new", forKey: "code")
            fresh.setValue(Int16(2), forKey: "rank")
            c2.setValue(Int16(8), forKey: "rank")     // rank 2 → 8
            context.delete(c12)                      // rank 2, deleted
            let rank2 = try request("Item", "rank == 2")
            #expect(try context.explain(rank2).description == "index scan Item.rank = 2 (+2 sub-entities)")
            #expect(try codes(context, rank2) == ["c22", "c32", "new"])
            #expect(try context.count(for: rank2) == 3)
            var stored = rank2
            stored.includesPendingChanges = false
            let fromStore = try context.fetch(stored)
            #expect(fromStore.map { $0.value(forKey: "code") as? String } == ["c2", "c22", "c32", "c12"])
            #expect(fromStore.first === c2, "registered objects come back as the same instances")
            #expect(try context.count(for: stored) == 4)
            let rank8 = try request("Item", "rank == 8", sort: [FetchSortDescriptor(key: "code")], limit: 10)
            #expect(try codes(context, rank8) == ["c18", "c2", "c38", "c8"])
            // A limited index walk merges the changed objects: the updated c2 sorts by its new rank.
            let walk = try request("Item", sort: [FetchSortDescriptor(key: "rank", ascending: false), FetchSortDescriptor(key: "code")], limit: 5)
            #expect(try context.explain(walk).description.hasPrefix("index order Item.rank descending, stops after 5"))
            #expect(try codes(context, walk) == ["c19", "c29", "c39", "c9", "c18"])
            #expect(try codes(context, try request("Item", "rank == 8 OR rank == 9", sort: [FetchSortDescriptor(key: "rank", ascending: false), FetchSortDescriptor(key: "code")], limit: 6)) == ["c19", "c29", "c39", "c9", "c18", "c2"])
        }
    }

    @Test("count(for:) counts from the store, an exact index, or judged rows, minus unsaved deletes, plus unsaved inserts")
    func counting() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await catalogStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Item")) == 40)
            var itemsOnly = FetchRequest(entityName: "Item")
            itemsOnly.includesSubentities = false
            #expect(try context.count(for: itemsOnly) == 27)
            #expect(try context.count(for: FetchRequest(entityName: "Gizmo")) == 4)
            #expect(try context.count(for: try request("Item", "rank BETWEEN {3, 5}")) == 10)
            #expect(try context.count(for: try request("Item", "rank BETWEEN {3, 5} AND flag == YES")) == 3)
            #expect(try context.count(for: try request("Item", "group.title == 'G'")) == 10)
            #expect(try context.count(for: try request("Item", "rank BETWEEN {3, 5}", limit: 4)) == 4)
            #expect(try context.count(for: try request("Item", "rank BETWEEN {3, 5}", offset: 9)) == 1)
            // Unsaved changes.
            let c3 = try #require(try context.fetch(try request("Item", "code == 'c3'")).first)
            context.delete(c3)
            try context.insertNewObject(forEntityName: "Gizmo").setValue(Int16(4), forKey: "rank")
            #expect(try context.count(for: FetchRequest(entityName: "Item")) == 40)
            #expect(try context.count(for: try request("Item", "rank BETWEEN {3, 5}")) == 10)
            #expect(try context.count(for: FetchRequest(entityName: "Gizmo")) == 5)
            var stored = try request("Item", "rank BETWEEN {3, 5}")
            stored.includesPendingChanges = false
            #expect(try context.count(for: stored) == 10)
            #expect(try context.count(for: try request("Item", "rank == 3")) == 3)
        }
    }

    @Test("long strings past the index's prefix, canonically equivalent strings and extreme numbers are found as a scan finds them")
    func edgeValues() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.catalog)
        let base = String(repeating: "k", count: 130)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let values: [(String, String?, Int64?)] = [
                ("a", base + "b", 9_007_199_254_740_993), ("b", base + "a", 9_007_199_254_740_992), ("c", base, .max),
                ("d", "e\u{301}", .min), ("e", "\u{e9}", -1), ("f", base + "c", nil), ("g", "\u{212A}", 0), ("h", "K", 1),
            ]
            for (code, name, count) in values {
                let item = try context.insertNewObject(forEntityName: "Item")
                item.setValue(code, forKey: "code")
                item.setValue(name, forKey: "name")
                item.setValue(count, forKey: "count")
            }
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try codes(context, try request("Item", "name == %@", [base + "a"])) == ["b"])
            #expect(try codes(context, try request("Item", "name > %@", [base + "a"], sort: [FetchSortDescriptor(key: "name")])) == ["a", "f", "d", "e"], "é sorts after k")
            #expect(try codes(context, try request("Item", "name < %@", [base + "b"], sort: [FetchSortDescriptor(key: "name")])) == ["g", "h", "c", "b"], "K sorts before the k…s")
            #expect(try codes(context, try request("Item", sort: [FetchSortDescriptor(key: "name", ascending: false)], limit: 3)) == ["d", "e", "f"], "é sorts after k")
            #expect(try codes(context, try request("Item", "name == %@", ["\u{e9}"])) == ["d", "e"], "é precomposed and decomposed are one string")
            #expect(try codes(context, try request("Item", "name == 'K'")) == ["g", "h"], "K and KELVIN SIGN are one string")
            #expect(try codes(context, try request("Item", "count > 9007199254740992.0", sort: [FetchSortDescriptor(key: "code")])) == ["c"])
            #expect(try codes(context, try request("Item", "count >= 9007199254740992", sort: [FetchSortDescriptor(key: "code")])) == ["a", "b", "c"])
            #expect(try codes(context, try request("Item", "count < -1e300")) == [])
            #expect(try codes(context, try request("Item", "count > -1e300", sort: [FetchSortDescriptor(key: "count")], limit: 2)) == ["d", "e"])
        }
    }
}

@Suite("Query planner: hostile input")
struct QueryPlannerHostileInputTests {
    @Test("infinite, NaN and out-of-range constants, huge offsets and limits neither crash nor change results; negative ones are refused")
    func hostileNumbers() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await catalogStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let prices = try context.fetch(FetchRequest(entityName: "Item"))
            for (index, item) in prices.enumerated() { item.setValue(Decimal(index) - 5, forKey: "price") }
            try context.save()
            let all = try context.count(for: FetchRequest(entityName: "Item"))
            for (format, argument, expected) in [
                ("price < %@", Double.infinity, all), ("price > %@", Double.infinity, 0), ("price > %@", -Double.infinity, all),
                ("price < %@", 1e300, all), ("price == %@", Double.nan, 0), ("score < %@", Double.nan, 0),
                ("rank < %@", Double.infinity, 35), ("count > %@", 1e300, 0), ("count < %@", -1e300, 0),
                ("weight < %@", 1e300, 0), ("price >= %@", 1e-300, 34),
            ] as [(String, Double, Int)] {
                let r = try request("Item", format, [argument])
                #expect(try context.fetch(r).count == expected, "\(format) \(argument)")
                #expect(try context.count(for: r) == expected, "\(format) \(argument)")
            }
            let byRank = [FetchSortDescriptor(key: "rank")]
            #expect(try codes(context, try request("Item", sort: byRank, limit: .max, offset: .max)).isEmpty)
            #expect(try context.count(for: try request("Item", sort: byRank, limit: .max, offset: .max)) == 0)
            // Negative offsets and limits are refused with an error naming them, not guessed at.
            let negativeOffset = #expect(throws: ContextError.self) { try codes(context, try request("Item", sort: byRank, limit: 2, offset: -3)) }
            #expect(negativeOffset?.description.contains("fetchOffset (-3)") == true)
            let negativeLimit = #expect(throws: ContextError.self) { try context.count(for: try request("Item", limit: -1, offset: 0)) }
            #expect(negativeLimit?.description.contains("fetchLimit (-1)") == true)
        }
    }
}

@Suite("Query planner: errors")
struct QueryPlannerErrorTests {
    @Test("unknown entities and key paths, type mismatches and missing variables are errors naming the request part")
    func errors() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await catalogStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(failure(context, FetchRequest(entityName: "Nope")) == .unknownEntity("Nope"))
            #expect(failure(context, try request("Item", "rnak == 1")) == .invalidFetchRequest(part: "predicate", reason: "entity Item has no property \"rnak\""))
            #expect(failure(context, try request("Item", "group.titel == 'G'"))
                == .invalidFetchRequest(part: "predicate", reason: "entity Group has no property \"titel\" (key path \"group.titel\")"))
            #expect(failure(context, try request("Item", "volts == 1")) == .invalidFetchRequest(part: "predicate", reason: "entity Item has no property \"volts\""), "a sub-entity's attribute")
            #expect(failure(context, try request("Item", sort: [FetchSortDescriptor(key: "code"), FetchSortDescriptor(key: "nmae")]))
                == .invalidFetchRequest(part: "sort descriptor 2 (nmae)", reason: "entity Item has no property \"nmae\""))
            let mismatch = failure(context, try request("Item", "rank == 'abc'"))
            #expect(mismatch == .invalidFetchRequest(part: "predicate", reason: "rank (Integer 16) compared with \"abc\" (string)"))
            #expect(mismatch?.code == 134060)
            #expect(mismatch?.description == "predicate: rank (Integer 16) compared with \"abc\" (string)")
            #expect(failure(context, try request("Item", "name > 3")) == .invalidFetchRequest(part: "predicate", reason: "name (String) compared with 3 (number)"))
            #expect(failure(context, try request("Item", "day > 5")) == .invalidFetchRequest(part: "predicate", reason: "day (Date) compared with 5 (number)"))
            #expect(failure(context, try request("Item", "score BETWEEN {1, 'x'}"))
                == .invalidFetchRequest(part: "predicate", reason: "score (Double) compared with \"x\" (string) in {1, \"x\"}"))
            #expect(failure(context, try request("Item", "rank BEGINSWITH '1'"))
                == .invalidFetchRequest(part: "predicate", reason: "rank (Integer 16) used with BEGINSWITH, which needs a string attribute"))
            #expect(failure(context, try request("Item", "rank > $MIN")) == .invalidFetchRequest(part: "predicate", reason: "no value for substitution variable $MIN"))
            // What is fine: nil, booleans and numbers across types, key paths through relationships.
            #expect(failure(context, try request("Item", "rank == nil OR flag == 1 OR score > 2 OR group.title == 'G' OR group.items.@count > 2")) == nil)
        }
    }
}

@Suite("Query planner: decimals sharing a double")
struct DecimalIndexTests {
    @Test("an index range on a decimal takes in every decimal sharing the bound's double, and the predicate decides: > 0.1 finds 0.10000000000000000001")
    func decimalsSharingADouble() async throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Price") {
                Attribute("amount", .decimal).indexed()
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        let texts = ["0.1", "0.10000000000000000001", "0.09999999999999999999", "0.2"]
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for text in texts {
                try context.insertNewObject(forEntityName: "Price").setValue(NSDecimalNumber(string: text).decimalValue, forKey: "amount")
            }
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let amounts = { (format: String) throws -> [String] in
                let request = FetchRequest(
                    entityName: "Price", predicate: try FormatPredicate(format: format, argumentArray: [try #require(Decimal(string: "0.1"))]),
                    sortDescriptors: [FetchSortDescriptor(key: "amount")])
                let plan = try context.explain(request).description
                #expect(plan.hasPrefix("index scan"), "\(format)")
                return try context.fetch(request).compactMap { ($0.value(forKey: "amount") as? Decimal)?.description }
            }
            #expect(try amounts("amount > %@") == ["0.10000000000000000001", "0.2"])
            #expect(try amounts("amount >= %@") == ["0.1", "0.10000000000000000001", "0.2"])
            #expect(try amounts("amount < %@") == ["0.09999999999999999999"])
            #expect(try amounts("amount == %@") == ["0.1"])
        }
    }
}
