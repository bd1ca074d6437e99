import Foundation
import Strata
import StrataTestSupport
import Testing

/// Numbers at the edges of fetch planning and sorting: NaN (of either sign), infinities and
/// -0.0 in indexed doubles and floats; 64-bit integers and decimals that doubles can't tell
/// apart (`Specs/0008-fetch-requests.md`, "Planner" and "Sort order"). Every indexed attribute has an unindexed twin holding the same value, so
/// a request on the twin (always a full scan, judged by the predicate evaluator) is the
/// reference a planned request must equal.
private func edgeModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Sample") {
            Attribute("label", .string)
            Attribute("x", .double).indexed()
            Attribute("xPlain", .double)
            Attribute("f", .float).indexed()
            Attribute("fPlain", .float)
            Attribute("n", .int64).indexed()
            Attribute("nPlain", .int64)
            Attribute("d", .decimal).indexed()
            Attribute("dPlain", .decimal)
        }
    }
}

/// NaN with the sign bit set: encoded below -infinity in index keys.
private let negativeNaN = Double(bitPattern: Double.nan.bitPattern | (1 << 63))

/// Saves one Sample per value (labels "s\(first)", "s\(first + 1)", … in store order), each
/// value in `key` and its unindexed twin `key + "Plain"`.
private func insertSamples(_ context: isolated ManagedObjectContext, key: String, _ values: [Any?], first: Int = 0, save: Bool = true) throws {
    for (index, value) in values.enumerated() {
        let sample = try context.insertNewObject(forEntityName: "Sample")
        sample.setValue("s\(first + index)", forKey: "label")
        sample.setValue(value, forKey: key)
        sample.setValue(value, forKey: key + "Plain")
    }
    if save { try context.save() }
}

private func labels(_ context: isolated ManagedObjectContext, _ request: FetchRequest<ManagedObject>) throws -> [String] {
    try context.fetch(request).map { $0.value(forKey: "label") as? String ?? "?" }
}

private func sampleRequest(_ format: String, _ arguments: [Any] = [], sort: [FetchSortDescriptor] = [], limit: Int = 0) throws -> FetchRequest<ManagedObject> {
    var request = FetchRequest(entityName: "Sample", predicate: try FormatPredicate(format: format, argumentArray: arguments))
    request.sortDescriptors = sort
    request.fetchLimit = limit
    return request
}

@Suite("Fetch: numeric edge values")
struct FetchNumericEdgeTests {
    /// Doubles every comparison below meets: both NaNs, both infinities, both zeros.
    static let doubles: [Double?] = [1.0, .nan, 3.0, negativeNaN, .infinity, -.infinity, -0.0, 0.0, -2.5, nil, 2.0, .nan]
    static let constants: [Double] = [-.infinity, -5, -2.5, -0.0, 0, 1, 2, 2.5, .infinity, .nan, negativeNaN]
    /// (`!=` is never served by an index: sorted with a limit, it walks the whole index, NaNs included.)
    static let operators = ["<", "<=", ">", ">=", "==", "!="]

    @Test("NaN (either sign) is in no range of an indexed double or float: fetch, count and index walks equal a full scan for every comparison")
    func nanOutsideRanges() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try edgeModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try insertSamples(context, key: "x", Self.doubles)
            // Floats: the same values as Float.
            for sample in try context.fetch(FetchRequest(entityName: "Sample")) {
                let x = sample.value(forKey: "x") as? Double
                // Float(_:) of a NaN may drop its sign: make -NaN explicitly.
                let f = x.map { $0.isNaN ? ($0.sign == .minus ? -Float.nan : Float.nan) : Float($0) }
                sample.setValue(f, forKey: "f")
                sample.setValue(f, forKey: "fPlain")
            }
            try context.save()
            var failures: [String] = []
            for key in ["x", "f"] {
                for op in Self.operators {
                    for constant in Self.constants {
                        for (format, plainFormat) in [
                            ("\(key) \(op) %@", "\(key)Plain \(op) %@"),
                            ("%@ \(op) \(key)", "%@ \(op) \(key)Plain"),
                        ] {
                            let planned = try sampleRequest(format, [constant])
                            let reference = try sampleRequest(plainFormat, [constant])
                            let expected = try labels(context, reference)
                            let got = try labels(context, planned)
                            let count = try context.count(for: planned)
                            if got != expected || count != expected.count {
                                failures.append("\(format) [\(constant)]: expected \(expected), got \(got), count \(count); plan \(try context.explain(planned))")
                            }
                            // An index walk over the predicate's range (sorted by the attribute, limited).
                            for ascending in [true, false] {
                                for limit in [1, 2, 4] {
                                    let walked = try sampleRequest(format, [constant], sort: [FetchSortDescriptor(key: key, ascending: ascending)], limit: limit)
                                    let scanned = try sampleRequest(plainFormat, [constant], sort: [FetchSortDescriptor(key: key + "Plain", ascending: ascending)], limit: limit)
                                    let want = try labels(context, scanned)
                                    let have = try labels(context, walked)
                                    let walkedCount = try context.count(for: walked)
                                    if have != want || walkedCount != want.count {
                                        failures.append("\(format) [\(constant)] sorted \(ascending ? "ascending" : "descending") limit \(limit): expected \(want), got \(have); plan \(try context.explain(walked))")
                                    }
                                }
                            }
                        }
                    }
                    // BETWEEN with the constants as bounds.
                    for low in Self.constants {
                        for high in [-Double.infinity, 0, 2, .infinity] {
                            let planned = try sampleRequest("\(key) BETWEEN %@", [[low, high]])
                            let expected = try labels(context, try sampleRequest("\(key)Plain BETWEEN %@", [[low, high]]))
                            let got = try labels(context, planned)
                            let count = try context.count(for: planned)
                            if got != expected || count != expected.count {
                                failures.append("\(key) BETWEEN {\(low), \(high)}: expected \(expected), got \(got)")
                            }
                        }
                    }
                }
            }
            #expect(failures.isEmpty, "\(failures.prefix(12).joined(separator: "\n"))")
        }
    }

    @Test("the review's case: with 1.0, NaN, 3.0 saved, score > 2 fetches and counts only 3.0, also sorted with a limit")
    func reviewCase() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try edgeModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try insertSamples(context, key: "x", [1.0, Double.nan, 3.0, negativeNaN])
            #expect(try labels(context, try sampleRequest("x > 2")) == ["s2"])
            #expect(try context.count(for: try sampleRequest("x > 2")) == 1)
            #expect(try labels(context, try sampleRequest("x < 2")) == ["s0"], "-NaN is not below 2")
            #expect(try context.count(for: try sampleRequest("x < 2")) == 1)
            #expect(try labels(context, try sampleRequest("x > -5", sort: [FetchSortDescriptor(key: "x")], limit: 5)) == ["s0", "s2"])
            #expect(try labels(context, try sampleRequest("x < 5", sort: [FetchSortDescriptor(key: "x", ascending: false)], limit: 5)) == ["s2", "s0"])
            #expect(try labels(context, try sampleRequest("x <= %@", [Double.infinity])) == ["s0", "s2"])
            #expect(try labels(context, try sampleRequest("x >= %@", [-Double.infinity])) == ["s0", "s2"])
        }
    }

    /// The labels of every Sample sorted by `key` (no predicate), fetched four ways: the
    /// indexed attribute and its unindexed twin, each unlimited and with a limit (an index
    /// walk on the indexed one); every way must agree with `expected`.
    static func sortedFourWays(
        _ context: isolated ManagedObjectContext, _ key: String, ascending: Bool, expected: [String], _ comment: String
    ) throws {
        for attribute in [key, key + "Plain"] {
            let sort = [FetchSortDescriptor(key: attribute, ascending: ascending)]
            var request = FetchRequest(entityName: "Sample")
            request.sortDescriptors = sort
            #expect(try labels(context, request) == expected, "\(comment): \(attribute) \(ascending ? "ascending" : "descending")")
            for limit in 1...expected.count {
                request.fetchLimit = limit
                let plan = try context.explain(request)
                #expect(
                    try labels(context, request) == Array(expected.prefix(limit)),
                    "\(comment): \(attribute) \(ascending ? "ascending" : "descending") limit \(limit), plan \(plan)")
            }
        }
    }

    @Test("NaN sorts after every number ascending and before every number descending, with or without an index, saved or not")
    func nanSortsLast() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try edgeModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try insertSamples(context, key: "x", [2.5, Double.nan, 0.5, nil, 1.0, negativeNaN, -Double.infinity, Double.infinity])
            // NaNs tie with each other (store order), nil first ascending.
            let ascending = ["s3", "s6", "s2", "s4", "s0", "s7", "s1", "s5"]
            let descending = ["s1", "s5", "s7", "s0", "s4", "s2", "s6", "s3"]
            try Self.sortedFourWays(context, "x", ascending: true, expected: ascending, "saved")
            try Self.sortedFourWays(context, "x", ascending: false, expected: descending, "saved")
            // Unsaved values are sorted by the same rule (keys read from managed objects);
            // inserts follow stored objects among ties.
            try insertSamples(context, key: "x", [Double.nan, 0.75], first: 8, save: false)
            let pendingAscending = ["s3", "s6", "s2", "s9", "s4", "s0", "s7", "s1", "s5", "s8"]
            let pendingDescending = ["s1", "s5", "s8", "s7", "s0", "s4", "s9", "s2", "s6", "s3"]
            try Self.sortedFourWays(context, "x", ascending: true, expected: pendingAscending, "unsaved")
            try Self.sortedFourWays(context, "x", ascending: false, expected: pendingDescending, "unsaved")
            // Dictionary results sort by the same rule.
            var rows = FetchRequest(entityName: "Sample")
            rows.resultType = .dictionary
            rows.propertiesToFetch = [.property("label")]
            for (ascending, expected) in [(true, pendingAscending), (false, pendingDescending)] {
                rows.sortDescriptors = [FetchSortDescriptor(key: "x", ascending: ascending)]
                #expect(try context.fetchDictionaries(rows).map { $0["label"] as? String ?? "?" } == expected, "dictionaries")
            }
            // min and max order values as the sort does: NaN after every number.
            var extremes = FetchRequest(entityName: "Sample")
            extremes.resultType = .dictionary
            extremes.propertiesToFetch = [.expression(name: "low", .min, keyPath: "x"), .expression(name: "high", .max, keyPath: "x")]
            let row = try context.fetchDictionaries(extremes).first
            #expect(row?["low"] as? Double == -.infinity)
            #expect((row?["high"] as? Double)?.isNaN == true)
        }
    }

    @Test("64-bit integers and decimals sort exactly, not as doubles: 2^53 + 1 after 2^53, .max after .max - 1, 0.30000000000000001 after 0.3")
    func exactNumbers() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try edgeModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let big: [Int64] = [9_007_199_254_740_993, 9_007_199_254_740_992, .max, .max - 1, .min + 1, .min]
            try insertSamples(context, key: "n", big)
            try Self.sortedFourWays(context, "n", ascending: true, expected: ["s5", "s4", "s1", "s0", "s3", "s2"], "Int64")
            try Self.sortedFourWays(context, "n", ascending: false, expected: ["s2", "s3", "s0", "s1", "s4", "s5"], "Int64")
        }
        let dir2 = try TemporaryDirectory()
        let coordinator2 = try openCoordinator(dir2, model: try edgeModel())
        try await privateContext(coordinator2).perform { (context: isolated ManagedObjectContext) throws in
            let decimals: [Decimal] = try ["1000000000000000000000.5", "1000000000000000000000.4", "0.30000000000000001", "0.3", "-0.30000000000000001", "-0.3"].map {
                guard let value = Decimal(string: $0, locale: Locale(identifier: "en_US_POSIX")) else { throw CocoaError(.formatting) }
                return value
            }
            try insertSamples(context, key: "d", decimals)
            try Self.sortedFourWays(context, "d", ascending: true, expected: ["s4", "s5", "s3", "s2", "s1", "s0"], "Decimal")
            try Self.sortedFourWays(context, "d", ascending: false, expected: ["s0", "s1", "s2", "s3", "s5", "s4"], "Decimal")
        }
    }
}
