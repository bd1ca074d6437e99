import Foundation
import Strata
import StrataTestSupport
import Testing

/// Review of the fetch request's surface beyond the planner (session 27): result types,
/// dictionaries, aggregates and grouping, counts against fetches, batches and fault options.
/// Each test names the behaviour it checks against spec 0008 or Core Data's documented
/// semantics.

/// Shops and items: `Item` (an indexed `name` and `qty`, a `price`, an `amount`, a `when`, a
/// `flag`, a to-one `shop`) with the sub-entity `Gadget` (`watts`); `Shop.items` its inverse.
private func surfaceModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Shop") {
            Attribute("name", .string)
            Relationship("items", to: "Item", inverse: "shop", toMany: true)
        }
        Entity("Item") {
            Attribute("name", .string).indexed()
            Attribute("qty", .int32).indexed()
            Attribute("price", .double)
            Attribute("amount", .decimal)
            Attribute("when", .date)
            Attribute("flag", .boolean)
            Relationship("shop", to: "Shop", inverse: "items")
        }
        Entity("Gadget", parent: "Item") {
            Attribute("watts", .int16)
        }
    }
}

private let day0 = Date(timeIntervalSince1970: 1_000_000)

/// Shops A, B and C (C has no items); items apple (A), Banana (A), cherry (B), and the
/// gadgets date (B) and Elder (no shop), with some nil values; all saved.
private func surfaceStore(_ dir: TemporaryDirectory) async throws -> PersistentStoreCoordinator {
    let coordinator = try openCoordinator(dir, model: try surfaceModel())
    try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        var shops: [String: ManagedObject] = [:]
        for name in ["A", "B", "C"] {
            let shop = try context.insertNewObject(forEntityName: "Shop")
            shop.setValue(name, forKey: "name")
            shops[name] = shop
        }
        let rows: [(String, String, Int32?, Double?, Decimal?, Date?, Bool?, String?)] = [
            ("Item", "apple", 1, 1.5, Decimal(string: "1.10"), day0, true, "A"),
            ("Item", "Banana", 2, nil, Decimal(string: "2.20"), day0.addingTimeInterval(10), false, "A"),
            ("Item", "cherry", 3, 3.0, nil, nil, nil, "B"),
            ("Gadget", "date", 4, 4.5, Decimal(string: "4.40"), day0.addingTimeInterval(-10), true, "B"),
            ("Gadget", "Elder", nil, nil, nil, nil, nil, nil),
        ]
        for (entity, name, qty, price, amount, when, flag, shop) in rows {
            let item = try context.insertNewObject(forEntityName: entity)
            item.setValue(name, forKey: "name")
            item.setValue(qty, forKey: "qty")
            item.setValue(price, forKey: "price")
            item.setValue(amount, forKey: "amount")
            item.setValue(when, forKey: "when")
            item.setValue(flag, forKey: "flag")
            item.setValue(shop.flatMap { shops[$0] }, forKey: "shop")
        }
        try context.save()
    }
    return coordinator
}

private func dictionaryRequest(_ entity: String = "Item", _ format: String? = nil, _ arguments: Any...) throws -> FetchRequest<ManagedObject> {
    var request = FetchRequest(entityName: entity)
    request.resultType = .dictionary
    if let format { request.predicate = try FormatPredicate(format: format, argumentArray: arguments) }
    return request
}

@Suite("Fetch request surface: dictionaries, aggregates, counts, batches and fault options (review)")
struct FetchSurfaceReviewTests {
    @Test("sum over an empty group or only nils is 0 of the attribute's sum type: Double for a double, Decimal for a decimal, Int64 for an integer (it was an Int64 0 for every type)")
    func sumOfNothingKeepsItsType() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await surfaceStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Nothing matches; then only Elder, whose price, amount and qty are nil.
            for format in ["name == 'nobody'", "name == 'Elder'"] {
                var request = try dictionaryRequest("Item", format)
                request.propertiesToFetch = [
                    .expression(name: "sp", .sum, keyPath: "price"), .expression(name: "sa", .sum, keyPath: "amount"),
                    .expression(name: "sq", .sum, keyPath: "qty"), .expression(name: "ap", .average, keyPath: "price"),
                    .expression(name: "n", .count, keyPath: "price"),
                ]
                let rows = try context.fetchDictionaries(request)
                #expect(rows.count == 1, "\(format)")
                #expect(rows.first?["sp"] as? Double == 0, "\(format): \(String(describing: rows.first))")
                #expect(rows.first?["sa"] as? Decimal == 0, "\(format): \(String(describing: rows.first))")
                #expect(rows.first?["sq"] as? Int64 == 0, "\(format)")
                #expect(rows.first?["ap"] == nil, "\(format): no average of nothing")
                #expect(rows.first?["n"] as? Int64 == 0, "\(format)")
            }
            // Grouped: shop C's group can't exist (no items), but a group whose values are all
            // nil (the item without a shop: Elder) sums to a Double 0 too.
            var grouped = try dictionaryRequest()
            grouped.propertiesToGroupBy = ["shop.name"]
            grouped.propertiesToFetch = ["shop.name", .expression(name: "sp", .sum, keyPath: "price"), .expression(name: "sa", .sum, keyPath: "amount")]
            grouped.sortDescriptors = [FetchSortDescriptor(key: "shop.name")]
            let rows = try context.fetchDictionaries(grouped)
            #expect(rows.map { $0["sp"] as? Double } == [0, 1.5, 7.5])
            #expect(rows.map { $0["sa"] as? Decimal } == [0, Decimal(string: "3.3"), Decimal(string: "4.4")])
        }
    }

    @Test("a havingPredicate on a group-by key path through a to-one (shop.name) reads that key of the row (it matched no group); a key no row holds is refused by name")
    func havingOnKeyPathThroughToOne() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await surfaceStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = try dictionaryRequest()
            request.propertiesToGroupBy = ["shop.name"]
            request.propertiesToFetch = ["shop.name", .expression(name: "n", .count, keyPath: "name"), .expression(name: "avg", .average, keyPath: "price")]
            request.sortDescriptors = [FetchSortDescriptor(key: "shop.name")]
            request.havingPredicate = try FormatPredicate(format: "shop.name == 'A'")
            #expect(try context.fetchDictionaries(request).map { $0["shop.name"] as? String } == ["A"])
            request.havingPredicate = try FormatPredicate(format: "shop.name BEGINSWITH 'B' OR n == 1")
            #expect(try context.fetchDictionaries(request).map { $0["shop.name"] as? String } == [nil, "B"])
            request.havingPredicate = try FormatPredicate(format: "SELF.shop.name == 'B' AND avg > 3")
            #expect(try context.fetchDictionaries(request).map { $0["shop.name"] as? String } == ["B"])
            // A group-by key path holding nil: the group of the item without a shop.
            request.havingPredicate = try FormatPredicate(format: "shop.name == nil")
            #expect(try context.fetchDictionaries(request).map { $0["n"] as? Int64 } == [1])
            // Grouped by the to-one itself, a key path through it reads the object ID's keys:
            // nothing, but it is a row key and not refused.
            var byShop = try dictionaryRequest()
            byShop.propertiesToGroupBy = ["shop"]
            byShop.propertiesToFetch = ["shop", .expression(name: "n", .count, keyPath: "name")]
            byShop.havingPredicate = try FormatPredicate(format: "n == 2")
            #expect(try context.fetchDictionaries(byShop).count == 2)

            request.havingPredicate = try FormatPredicate(format: "nn > 1")
            let error = #expect(throws: ContextError.self) { try context.fetchDictionaries(request) }
            let message = error.map { "\($0)" } ?? ""
            #expect(message.contains("havingPredicate") && message.contains("\"nn\"") && message.contains("shop.name, n, avg"), "\(message)")
        }
    }

    @Test("a sort descriptor of grouped rows that names no row key is refused by name (it sorted every row as nil: the order was ignored); with aggregates alone, a key of the entity is accepted")
    func groupedSortKeysAreRowKeys() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await surfaceStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = try dictionaryRequest()
            request.propertiesToGroupBy = ["shop.name"]
            request.propertiesToFetch = ["shop.name", .expression(name: "n", .count, keyPath: "name"), .expression(name: "top", .max, keyPath: "qty")]
            request.sortDescriptors = [FetchSortDescriptor(key: "top", ascending: false)]
            #expect(try context.fetchDictionaries(request).map { $0["top"] as? Int32 } == [4, 2, nil])
            request.sortDescriptors = [FetchSortDescriptor(key: "shop.name", ascending: false)]
            #expect(try context.fetchDictionaries(request).map { $0["shop.name"] as? String } == ["B", "A", nil])
            for key in ["nmae", "qty", "shop"] {
                request.sortDescriptors = [FetchSortDescriptor(key: "n"), FetchSortDescriptor(key: key)]
                let error = #expect(throws: ContextError.self, "\(key)") { try context.fetchDictionaries(request) }
                let message = error.map { "\($0)" } ?? ""
                #expect(message.contains("sort descriptor 2 (\(key))") && message.contains("shop.name, n, top"), "\(message)")
            }
            // Aggregates over every match make one row: a leftover sort on an attribute is
            // harmless, a misspelt key is refused as an object fetch refuses it.
            var totals = try dictionaryRequest()
            totals.propertiesToFetch = [.expression(name: "n", .count, keyPath: "name")]
            totals.sortDescriptors = [FetchSortDescriptor(key: "name")]
            #expect(try context.fetchDictionaries(totals).first?["n"] as? Int64 == 5)
            totals.sortDescriptors = [FetchSortDescriptor(key: "nmae")]
            let error = #expect(throws: ContextError.self) { try context.fetchDictionaries(totals) }
            #expect(error.map { "\($0)" }?.contains("sort descriptor 1 (nmae)") == true, "\(String(describing: error))")
        }
    }

    @Test("count(for:), execute with .count, object IDs and dictionary rows agree with fetch for every mix of sub-entities, pending changes, offset and limit")
    func countsAgreeWithFetches() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await surfaceStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let all = try context.fetch(FetchRequest(entityName: "Item", sortDescriptors: [FetchSortDescriptor(key: "name")]))
            let byName = Dictionary(uniqueKeysWithValues: all.map { ($0.value(forKey: "name") as! String, $0) })
            byName["date"]?.setValue(Int32(40), forKey: "qty")
            byName["apple"]?.setValue(Int32(50), forKey: "qty")
            context.delete(byName["cherry"]!)
            let gadget = try context.insertNewObject(forEntityName: "Gadget")
            gadget.setValue("new", forKey: "name")
            gadget.setValue(Int32(7), forKey: "qty")
            let item = try context.insertNewObject(forEntityName: "Item")
            item.setValue("new item", forKey: "name")
            item.setValue(Int32(8), forKey: "qty")
            for format in ["qty > 2", "qty >= 0", "TRUEPREDICATE", "name BEGINSWITH 'd'", "qty == 40", "qty == 4", "shop.name == 'B'", "qty == nil"] {
                for subs in [true, false] {
                    for pending in [true, false] {
                        for (offset, limit) in [(0, 0), (1, 2)] {
                            var request = try FetchRequest(entityName: "Item", format: format)
                            request.includesSubentities = subs
                            request.includesPendingChanges = pending
                            request.fetchOffset = offset
                            request.fetchLimit = limit
                            let fetched = try context.fetch(request).count
                            let counted = try context.count(for: request)
                            let ids = try context.fetchObjectIDs(request).count
                            var dict = request
                            dict.resultType = .dictionary
                            dict.propertiesToFetch = ["name"]
                            let rows = try context.fetchDictionaries(dict).count
                            var countType = request
                            countType.resultType = .count
                            guard case .count(let executed) = try context.execute(countType) else { Issue.record("not a count"); continue }
                            #expect(
                                [counted, ids, rows, executed].allSatisfy { $0 == fetched },
                                "\(format) subs \(subs) pending \(pending) \(offset)/\(limit): fetch \(fetched) count \(counted) ids \(ids) rows \(rows) exec \(executed)")
                        }
                    }
                }
            }
        }
    }

    @Test("min, max, sum, average and count over strings, dates, decimals, booleans and to-one key paths, nil values left out")
    func aggregatesOverKinds() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await surfaceStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = try dictionaryRequest()
            request.propertiesToFetch = [
                .expression(name: "minName", .min, keyPath: "name"), .expression(name: "maxName", .max, keyPath: "name"),
                .expression(name: "minWhen", .min, keyPath: "when"), .expression(name: "maxWhen", .max, keyPath: "when"),
                .expression(name: "minAmount", .min, keyPath: "amount"), .expression(name: "avgAmount", .average, keyPath: "amount"),
                .expression(name: "sumAmount", .sum, keyPath: "amount"),
                .expression(name: "minFlag", .min, keyPath: "flag"), .expression(name: "maxFlag", .max, keyPath: "flag"),
                .expression(name: "shops", .count, keyPath: "shop"), .expression(name: "shopNames", .count, keyPath: "shop.name"),
                .expression(name: "maxShop", .max, keyPath: "shop.name"),
            ]
            let row = try #require(try context.fetchDictionaries(request).first)
            // Strings by Unicode scalars: "Banana" < "Elder" < "apple" < "cherry" < "date".
            #expect(row["minName"] as? String == "Banana")
            #expect(row["maxName"] as? String == "date")
            #expect(row["minWhen"] as? Date == day0.addingTimeInterval(-10))
            #expect(row["maxWhen"] as? Date == day0.addingTimeInterval(10))
            #expect(row["minAmount"] as? Decimal == Decimal(string: "1.10"))
            #expect(row["sumAmount"] as? Decimal == Decimal(string: "7.7"))
            #expect(row["avgAmount"] as? Decimal == Decimal(string: "7.7")! / 3)
            #expect(row["minFlag"] as? Bool == false)
            #expect(row["maxFlag"] as? Bool == true)
            #expect(row["shops"] as? Int64 == 4)
            #expect(row["shopNames"] as? Int64 == 4)
            #expect(row["maxShop"] as? String == "B")
        }
    }

    @Test("a havingPredicate's $variables take the request's substitutionVariables, as its predicate's do; one without a value is named")
    func havingUsesSubstitutionVariables() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await surfaceStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = try dictionaryRequest("Item", "qty >= $LOW")
            request.substitutionVariables = ["LOW": 0, "MIN": 2]
            request.propertiesToGroupBy = ["shop.name"]
            request.propertiesToFetch = ["shop.name", .expression(name: "n", .count, keyPath: "name")]
            request.havingPredicate = try FormatPredicate(format: "n >= $MIN")
            request.sortDescriptors = [FetchSortDescriptor(key: "shop.name")]
            #expect(try context.fetchDictionaries(request).map { $0["shop.name"] as? String } == ["A", "B"])
            request.havingPredicate = try FormatPredicate(format: "n >= $MAX")
            let error = #expect(throws: (any Error).self) { try context.fetchDictionaries(request) }
            #expect(error.map { "\($0)" }?.contains("MAX") == true, "\(String(describing: error))")
        }
    }

    @Test("min and max of a relationship, and an entry named twice in propertiesToFetch, are refused by name (they read nil, or one value silently replaced the other)")
    func dictionaryEntriesRefused() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await surfaceStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            func message(_ context: isolated ManagedObjectContext, _ build: (inout FetchRequest<ManagedObject>) -> Void) throws -> String {
                var request = try dictionaryRequest()
                build(&request)
                do {
                    _ = try context.fetchDictionaries(request)
                    return "no error"
                } catch {
                    return "\(error)"
                }
            }
            let minShop = try message(context) { $0.propertiesToFetch = [.expression(name: "m", .min, keyPath: "shop")] }
            #expect(minShop.contains("propertiesToFetch[0]") && minShop.contains("min") && minShop.contains("shop"), "\(minShop)")
            let maxShops = try message(context) { $0.entityName = "Shop"; $0.propertiesToFetch = [.expression(name: "m", .max, keyPath: "items")] }
            #expect(maxShops.contains("propertiesToFetch[0]") && maxShops.contains("max"), "\(maxShops)")
            let twice = try message(context) {
                $0.propertiesToGroupBy = ["name"]
                $0.propertiesToFetch = ["name", .expression(name: "name", .count, keyPath: "qty")]
            }
            #expect(twice.contains("propertiesToFetch[1]") && twice.contains("\"name\""), "\(twice)")
            let twiceExpressions = try message(context) {
                $0.propertiesToFetch = [.expression(name: "x", .count, keyPath: "qty"), .expression(name: "x", .max, keyPath: "qty")]
            }
            #expect(twiceExpressions.contains("propertiesToFetch[1]"), "\(twiceExpressions)")
            // Still fine: the same entry twice; min and max of an attribute through a to-one,
            // count of a to-one.
            #expect(try message(context) { $0.propertiesToFetch = ["name", "name"] } == "no error")
            let fine = try message(context) {
                $0.propertiesToFetch = [.expression(name: "a", .max, keyPath: "shop.name"), .expression(name: "b", .count, keyPath: "shop")]
            }
            #expect(fine == "no error")
        }
    }

    @Test("a fetch of objects or IDs with propertiesToGroupBy or a havingPredicate is refused (it returned every object, the grouping ignored): Core Data requires the dictionary result type; a child context's grouped rows still work")
    func groupingNeedsDictionaries() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await surfaceStore(dir)
        let parent = privateContext(coordinator)
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Item", sortDescriptors: [FetchSortDescriptor(key: "name")])
            request.propertiesToGroupBy = ["shop.name"]
            request.propertiesToFetch = ["shop.name"]
            for resultType in [FetchResultType.managedObject, .managedObjectID] {
                request.resultType = resultType
                let viaExecute = #expect(throws: ContextError.self, "\(resultType)") { try context.execute(request) }
                #expect(viaExecute.map { "\($0)" }?.contains("propertiesToGroupBy") == true, "\(String(describing: viaExecute))")
            }
            request.resultType = .managedObject
            let viaFetch = #expect(throws: ContextError.self) { try context.fetch(request) }
            #expect(viaFetch.map { "\($0)" }?.contains("resultType to .dictionary") == true, "\(String(describing: viaFetch))")
            #expect(throws: ContextError.self) { try context.fetchObjectIDs(request) }
            var having = FetchRequest(entityName: "Item")
            having.havingPredicate = .truePredicate
            let viaHaving = #expect(throws: ContextError.self) { try context.fetch(having) }
            #expect(viaHaving.map { "\($0)" }?.contains("havingPredicate") == true, "\(String(describing: viaHaving))")
            // An empty group-by list groups nothing: an ordinary fetch.
            var empty = FetchRequest(entityName: "Item")
            empty.propertiesToGroupBy = []
            #expect(try context.fetch(empty).count == 5)
            // The dictionary fetch of the same request groups (any resultType, as spec 0008 says).
            request.sortDescriptors = [FetchSortDescriptor(key: "shop.name", ascending: false)]
            let groups = try context.fetchDictionaries(request)
            #expect(groups.map { $0["shop.name"] as? String } == ["B", "A", nil])
        }
        // A child context's grouped rows ask its parent for the objects, not the groups.
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let banana = try context.fetch(try FetchRequest(entityName: "Item", format: "name == 'Banana'"))[0]
            banana.setValue(nil, forKey: "shop")
            var request = try dictionaryRequest()
            request.propertiesToGroupBy = ["shop.name"]
            request.propertiesToFetch = ["shop.name", .expression(name: "n", .count, keyPath: "name")]
            request.havingPredicate = try FormatPredicate(format: "n >= 1")
            request.sortDescriptors = [FetchSortDescriptor(key: "shop.name")]
            #expect(try context.fetchDictionaries(request).map { $0["n"] as? Int64 } == [2, 1, 2])
        }
    }

    @Test("a batched fetch's later faults, fired after another context deleted one of them and changed another, read the saved state: the deleted one reads as deleted, its batch-mates load, counts follow")
    func batchesAfterAnotherContextsSave() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await surfaceStore(dir)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Item", sortDescriptors: [FetchSortDescriptor(key: "name")])
            request.fetchBatchSize = 2
            // Banana, Elder | apple, cherry | date: later batches are faults without values.
            context.userInfo["items"] = try context.fetch(request)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.fetch(try FetchRequest(entityName: "Item", format: "name == 'cherry'"))[0])
            try context.fetch(try FetchRequest(entityName: "Item", format: "name == 'apple'"))[0].setValue(Int32(99), forKey: "qty")
            try context.save()
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let items = try #require(context.userInfo["items"] as? [ManagedObject])
            #expect(items.count == 5)
            #expect(items.map { $0.value(forKey: "qty") as? Int32 } == [2, nil, 99, nil, 4])
            #expect(items.map(\.isDeleted) == [false, false, false, true, false], "the object gone from the store reads as deleted")
            var request = FetchRequest(entityName: "Item", sortDescriptors: [FetchSortDescriptor(key: "name")])
            request.fetchBatchSize = 2
            #expect(try context.fetch(request).map { $0.value(forKey: "name") as? String } == ["Banana", "Elder", "apple", "date"])
            #expect(try context.count(for: request) == 4)
        }
    }
}
