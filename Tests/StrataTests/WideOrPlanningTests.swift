import Foundation
import Strata
import StrataTestSupport
import Testing

/// The `code`s of the Items `request` fetches, in order.
private func itemCodes(_ context: isolated ManagedObjectContext, _ request: FetchRequest<ManagedObject>) throws -> [String] {
    try context.fetch(request).map { $0.value(forKey: "code") as? String ?? "?" }
}

/// An OR of thousands of equalities on one indexed attribute is planned like `IN`: the
/// branches' ranges are gathered and merged once, and the comparisons they answer are looked
/// up in a set (`Specs/0008-fetch-requests.md`, "Planner" 5). Before, each branch re-sorted
/// the ranges merged so far: 4,000 branches took 35 s, 16,000 never finished.
@Suite("Fetch: very wide ORs")
struct WideOrTests {
    /// `key == v0 OR key == v1 OR …`, built as one flat OR (what the parser makes of the text).
    static func wideOr(_ key: String, _ values: [PredicateConstant]) -> FormatPredicate {
        FormatPredicate(.or(values.map { .comparison(ComparisonPredicate(.keyPath(FormatKeyPath(key)), .equalTo, .constant($0))) }))
    }

    @Test("20,000 equalities on one index OR'ed plan in one index scan and fetch what IN does, in seconds; on two indexes, an index union")
    func twentyThousandBranches() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.catalog)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for n in 0..<50 {
                let item = try context.insertNewObject(forEntityName: "Item")
                item.setValue("c\(n * 7)", forKey: "code")
                item.setValue(Int64(n), forKey: "count")
                item.setValue("note\(n % 3)", forKey: "note")
            }
            try context.save()
            let codes = (0..<20_000).map { PredicateConstant.string("c\($0 * 3)") }

            let or = FetchRequest(entityName: "Item", predicate: Self.wideOr("code", codes))
            let membership = FetchRequest(entityName: "Item", predicate: FormatPredicate(.comparison(ComparisonPredicate(.keyPath("code"), .in, .constant(.aggregate(codes))))))
            let expected = (0..<50).filter { ($0 * 7) % 3 == 0 }.map { "c\($0 * 7)" }
            #expect(try itemCodes(context, membership) == expected)
            #expect(try itemCodes(context, or) == expected)
            #expect(try context.count(for: or) == expected.count)
            guard case .indexScan(let scan) = try context.explain(or).kind else {
                Issue.record("not an index scan")
                return
            }
            #expect(scan.attribute == "code" && scan.ranges.count == 20_000)
            #expect(try context.explain(or).filter == nil, "the index answers every branch")

            // The same OR under an AND with an unindexed part: the filter keeps only that part.
            let narrowed = FetchRequest(entityName: "Item", predicate: FormatPredicate(.and([
                Self.wideOr("code", codes).node, .comparison(ComparisonPredicate(.keyPath("note"), .equalTo, .constant(.string("note0")))),
            ])))
            #expect(try itemCodes(context, narrowed) == expected.filter { code in (Int(code.dropFirst()) ?? 0) / 7 % 3 == 0 })
            #expect(try context.explain(narrowed).filter?.description == "note == \"note0\"")

            // Branches on two indexes: an index union, each index's ranges united once.
            let counts = (0..<20_000).map { PredicateConstant.integer($0 * 5) }
            let union = FetchRequest(entityName: "Item", predicate: FormatPredicate(.or(Self.wideOr("code", codes).node.children + Self.wideOr("count", counts).node.children)))
            let unionExpected = (0..<50).filter { ($0 * 7) % 3 == 0 || $0 % 5 == 0 }.map { "c\($0 * 7)" }
            #expect(try itemCodes(context, union) == unionExpected)
            #expect(try context.count(for: union) == unionExpected.count)
            guard case .indexUnion(let scans) = try context.explain(union).kind else {
                Issue.record("not an index union")
                return
            }
            #expect(scans.map(\.ranges.count) == [20_000, 20_000])
        }
    }
}

extension PredicateNode {
    /// The branches of an OR (the node itself otherwise).
    fileprivate var children: [PredicateNode] {
        if case .or(let children) = self { return children }
        return [self]
    }
}
