import Foundation
import Strata
import StrataTestSupport
import Testing

/// Extreme values followed through every layer (review 27): set, save, reopen, read back;
/// derived aggregates; uniqueness; planned and in-memory fetches and sorts.
@Suite("Extreme values end to end")
struct ExtremeValueReviewTests {
    static func decimal(_ text: String) throws -> Decimal {
        try #require(Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")))
    }

    static func orderModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Order") {
                Attribute("total", .int64).derived(from: "lines.@sum.amount")
                Relationship("lines", to: "Line", inverse: "order", toMany: true)
            }
            Entity("Line") {
                Attribute("amount", .int64)
                Relationship("order", to: "Order", inverse: "lines")
            }
        }
    }

    @Test("a kept @sum whose member holding Int64.min leaves (or changes) is recomputed, not a trap: before, -1 * Int64.min overflowed and crashed the process")
    func keptSumOfInt64Min() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.orderModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let order = try context.insertNewObject(forEntityName: "Order")
            let low = try context.insertNewObject(forEntityName: "Line")
            low.setValue(Int64.min, forKey: "amount")
            low.setValue(order, forKey: "order")
            try context.save()
            #expect(order.value(forKey: "total") as? Int64 == .min)
            // The member's value changes: the kept sum takes Int64.min out.
            low.setValue(Int64(5), forKey: "amount")
            try context.save()
            #expect(order.value(forKey: "total") as? Int64 == 5)
            low.setValue(Int64.min, forKey: "amount")
            try context.save()
            #expect(order.value(forKey: "total") as? Int64 == .min)
            // The member leaves.
            context.delete(low)
            try context.save()
            #expect(order.value(forKey: "total") as? Int64 == 0)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let orders = try context.fetch(FetchRequest(entityName: "Order"))
            #expect(orders.first?.value(forKey: "total") as? Int64 == 0)
        }
    }

    static func sampleModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Sample") {
                Attribute("label", .string)
                Attribute("d", .decimal).indexed()
                Attribute("dPlain", .decimal)
            }
        }
    }

    @Test("a limited sort walking a decimal index gives the in-memory order when decimals' doubles (their keys) are out of order: before, 0.9999999999999999e-100 (key 1.0000000000000008e-100) came after 0.99999999999999991e-100 and 0.99999999999999995e-100 (keys below it), and the walk stopped before reaching the smallest")
    func decimalWalkAgainstKeyOrder() async throws {
        // Foundation's Decimal-to-Double divides by ten once per digit of exponent, a
        // rounding each time: fewer digits with one more division can land higher.
        let smallest = Decimal(sign: .plus, exponent: -116, significand: Decimal(9_999_999_999_999_999))
        let middle = Decimal(sign: .plus, exponent: -117, significand: Decimal(99_999_999_999_999_991 as UInt64))
        let largest = Decimal(sign: .plus, exponent: -117, significand: Decimal(99_999_999_999_999_995 as UInt64))
        #expect(smallest < middle && middle < largest)
        #expect(NSDecimalNumber(decimal: smallest).doubleValue >= NSDecimalNumber(decimal: largest).doubleValue, "the keys are out of order")
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.sampleModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (label, value) in [("largest", largest), ("smallest", smallest), ("middle", middle)] {
                let sample = try context.insertNewObject(forEntityName: "Sample")
                sample.setValue(label, forKey: "label")
                sample.setValue(value, forKey: "d")
                sample.setValue(value, forKey: "dPlain")
            }
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (ascending, expected) in [(true, ["smallest", "middle", "largest"]), (false, ["largest", "middle", "smallest"])] {
                for key in ["d", "dPlain"] {
                    for limit in [0, 1, 2, 3] {
                        var request = FetchRequest(entityName: "Sample")
                        request.sortDescriptors = [FetchSortDescriptor(key: key, ascending: ascending)]
                        request.fetchLimit = limit
                        let labels = try context.fetch(request).map { $0.value(forKey: "label") as? String ?? "?" }
                        let plan = try context.explain(request)
                        #expect(labels == Array(expected.prefix(limit == 0 ? 3 : limit)), "\(key) \(ascending ? "ascending" : "descending") limit \(limit): plan \(plan)")
                    }
                }
            }
        }
    }

    @Test("the literal -9223372036854775808 is Int64.min exactly, indexed or not: before, it was the double -2^63, which Int64.min + 1 also equals, so n == -9223372036854775808 found both")
    func int64MinLiteral() async throws {
        let model = try ManagedObjectModel {
            Entity("Sample") {
                Attribute("label", .string)
                Attribute("n", .int64).indexed()
                Attribute("nPlain", .int64)
            }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (label, n) in [("min", Int64.min), ("min+1", Int64.min + 1), ("min+500", Int64.min + 500), ("max", Int64.max)] {
                let sample = try context.insertNewObject(forEntityName: "Sample")
                sample.setValue(label, forKey: "label")
                sample.setValue(n, forKey: "n")
                sample.setValue(n, forKey: "nPlain")
            }
            try context.save()
            let literal = try FormatPredicate(format: "n == -9223372036854775808")
            #expect(try FormatPredicate(format: literal.description) == literal, "\(literal.description) reads back as itself")
            for key in ["n", "nPlain"] {
                for (format, expected) in [
                    ("\(key) == -9223372036854775808", ["min"]), ("\(key) <= -9223372036854775808", ["min"]),
                    ("\(key) > -9223372036854775808", ["min+1", "min+500", "max"]),
                    ("\(key) IN {-9223372036854775808, 9223372036854775807}", ["min", "max"]),
                    ("\(key) BETWEEN {-9223372036854775808, -9223372036854775807}", ["min", "min+1"]),
                ] {
                    var request = FetchRequest(entityName: "Sample", predicate: try FormatPredicate(format: format))
                    request.sortDescriptors = [FetchSortDescriptor(key: "nPlain", ascending: true)]
                    let labels = try context.fetch(request).map { $0.value(forKey: "label") as? String ?? "?" }
                    #expect(labels == expected, "\(format)")
                    #expect(try context.count(for: request) == expected.count, "count \(format)")
                }
            }
        }
    }

    @Test("@sum and @avg of 64-bit integers past Int64's range are exact decimals: before, the sum went on as a Double, so the sum of Int64.max, 1 and -1 was the Double 9223372036854775808.0 and the sum and mean of Int64.max, 1, Int64.max rounded Doubles")
    func kvcSumPastInt64() async throws {
        let model = try ManagedObjectModel {
            Entity("Order") {
                Relationship("lines", to: "Line", inverse: "order", toMany: true, ordered: true)
            }
            Entity("Line") {
                Attribute("amount", .int64)
                Relationship("order", to: "Order", inverse: "lines")
            }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let (order, lines) = try insertOrder(context, amounts: [.max, 1, -1])
            try context.save()
            let sum = order.value(forKeyPath: "lines.@sum.amount")
            #expect(sum as? Decimal == Decimal(Int64.max), "\(String(describing: sum))")
            // Int64.max, 1, Int64.max: the sum and mean past Int64's range, exact.
            lines[2].setValue(Int64.max, forKey: "amount")
            let total = try ExtremeValueReviewTests.decimal("18446744073709551615")
            let summed = order.value(forKeyPath: "lines.@sum.amount")
            #expect(summed as? Decimal == total, "\(String(describing: summed))")
            let average = order.value(forKeyPath: "lines.@avg.amount")
            #expect(average as? Decimal == total / 3, "\(String(describing: average))")
            // Within Int64's range the sum stays an integer.
            lines[2].setValue(Int64(-1), forKey: "amount")
            lines[0].setValue(Int64(2), forKey: "amount")
            #expect(order.value(forKeyPath: "lines.@sum.amount") as? Int == 2)
        }
    }

    @Test("a derived integer @sum whose running total passes Int64's range but whose sum fits is saved, in any member order, fresh or kept: before, Int64.max, 1, -1 failed the save as overflowing")
    func derivedSumPassingInt64Range() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.orderModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let (order, lines) = try insertOrder(context, amounts: [.max, 1, -1])
            try context.save()
            #expect(order.value(forKey: "total") as? Int64 == .max)
            // Kept: Int64.max less 1 plus 2 … a member changes, the total passes the range and comes back.
            lines[1].setValue(Int64(2), forKey: "amount")
            lines[2].setValue(Int64(-2), forKey: "amount")
            try context.save()
            #expect(order.value(forKey: "total") as? Int64 == .max)
            // A sum that doesn't fit still fails the save, by name.
            lines[2].setValue(Int64(0), forKey: "amount")
            let error = #expect(throws: ContextError.self) { try context.save() }
            #expect(error?.description.contains("Order.total") == true)
        }
    }

    @Test("a dictionary fetch's sum or average of decimals past Decimal's range fails naming entity and attribute, as an integer sum past Int64 does: before, the row held a NaN decimal")
    func decimalSumPastRange() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.sampleModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for _ in 0..<2 {
                let sample = try context.insertNewObject(forEntityName: "Sample")
                sample.setValue(Decimal.greatestFiniteMagnitude, forKey: "d")
            }
            try context.save()
            for function in [ExpressionFunction.sum, .average] {
                var request = FetchRequest(entityName: "Sample")
                request.resultType = .dictionary
                request.propertiesToFetch = [.expression(name: "total", function, keyPath: "d")]
                let error = #expect(throws: ContextError.self) { try context.fetchDictionaries(request) }
                #expect(error?.description.contains("Sample.d") == true, "\(String(describing: error))")
            }
        }
    }
}

/// An order with one line per amount (`Line.amount`, `Line.order`), inserted in `context`.
private func insertOrder(_ context: isolated ManagedObjectContext, amounts: [Int64]) throws -> (order: ManagedObject, lines: [ManagedObject]) {
    let order = try context.insertNewObject(forEntityName: "Order")
    var lines: [ManagedObject] = []
    for amount in amounts {
        let line = try context.insertNewObject(forEntityName: "Line")
        line.setValue(amount, forKey: "amount")
        line.setValue(order, forKey: "order")
        lines.append(line)
    }
    return (order, lines)
}
