import Foundation
import Strata
import StrataPredicate
import StrataTestSupport
import Testing

/// Predicate arguments through real fetches (review, session 26): an `NSDecimalNumber` or
/// `NSNumber` argument must select what the same value written as a literal selects, with an
/// index (planned) and without one (judged by the predicate evaluator).
/// The sorted labels of the prices `format` selects.
private func labels(_ context: isolated ManagedObjectContext, _ format: String, _ arguments: [Any]) throws -> [String] {
    try context.fetch(FetchRequest(entityName: "Price", predicate: try FormatPredicate(format: format, argumentArray: arguments)))
        .compactMap { $0.value(forKey: "label") as? String }.sorted()
}

@Suite("Predicate arguments in fetches")
struct PredicateContextReviewTests {
    private static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Price") {
                Attribute("label", .string)
                Attribute("amount", .decimal).indexed()
                Attribute("amountPlain", .decimal)
                Attribute("count", .int64).indexed()
            }
        }
    }

    @Test("an NSDecimalNumber argument selects the decimal it holds, indexed or not")
    func decimalNumberArgument() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (label, text, count) in [("a", "19.98", 0), ("b", "19.99", 1), ("c", "20.00", 2)] {
                let price = try context.insertNewObject(forEntityName: "Price")
                price.setValue(label, forKey: "label")
                price.setValue(Decimal(string: text)!, forKey: "amount")
                price.setValue(Decimal(string: text)!, forKey: "amountPlain")
                price.setValue(count, forKey: "count")
            }
            try context.save()
            // Before, NSDecimalNumber(string: "19.99") became the double 19.990000000000002:
            // `==` missed the 19.99 price, `>=` too, and `<` found it.
            let amount = NSDecimalNumber(string: "19.99")
            for key in ["amount", "amountPlain"] {
                #expect(try labels(context, "\(key) == %@", [amount]) == ["b"], "\(key)")
                #expect(try labels(context, "\(key) >= %@", [amount]) == ["b", "c"], "\(key)")
                #expect(try labels(context, "\(key) < %@", [amount]) == ["a"], "\(key)")
                #expect(try labels(context, "\(key) IN %@", [[amount, NSDecimalNumber(string: "20")]]) == ["b", "c"], "\(key)")
            }
            // An NSNumber holding 1 is the integer 1 (it used to be TRUE in the predicate).
            let one = try FormatPredicate(format: "count == %@", NSNumber(value: 1))
            #expect(one.description == "count == 1")
            #expect(try labels(context, "count == %@", [NSNumber(value: 1)]) == ["b"])
        }
    }
}
