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

/// The values of `key` of the `entity` objects `format` selects.
private func names(_ context: isolated ManagedObjectContext, _ entity: String, _ key: String, _ format: String) throws -> Set<String> {
    Set(try context.fetch(FetchRequest(entityName: entity, predicate: try FormatPredicate(format: format)))
        .compactMap { $0.value(forKey: key) as? String })
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

    @Test("ANY, ALL, NONE, @count, [SIZE] and SUBQUERY over saved to-manys, empty ones included, and key paths through a nil to-one")
    func quantifiersOverStoredRelationships() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try RelationshipPlanTests.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Posts p0…p11; each even post has chapters c<n>.0 and c<n>.1, odd posts none.
            // Husbands h0…h4; h4 has no wife.
            try RelationshipPlanTests.populate(context)
            context.reset()
            let even = Set(stride(from: 0, to: 12, by: 2).map { "p\($0)" })
            let odd = Set(stride(from: 1, to: 12, by: 2).map { "p\($0)" })
            let cases: [(String, Set<String>)] = [
                ("NONE chapters.name == 'c2.0'", even.union(odd).subtracting(["p2"])),
                // ALL of an empty collection is true (NSPredicate's rule).
                ("ALL chapters.name BEGINSWITH 'c0'", odd.union(["p0"])),
                ("chapters.@count == 0", odd),
                ("chapters[SIZE] == 2", even),
                ("ANY chapters.name ENDSWITH '.1'", even),
                ("NOT (ANY chapters.name ENDSWITH '.1')", odd),
                ("SUBQUERY(chapters, $c, $c.name ENDSWITH '.1').@count == 1", even),
                ("SUBQUERY(chapters, $c, $c.name ENDSWITH '.1').@count == 0", odd),
            ]
            for (format, expected) in cases {
                #expect(try names(context, "Post", "title", format) == expected, "\(format)")
            }
            // Unsaved: a new post without chapters, and p2's chapters moved to it.
            let fresh = try context.insertNewObject(forEntityName: "Post")
            fresh.setValue("p12", forKey: "title")
            let p2 = try #require(try context.fetch(FetchRequest(entityName: "Post", predicate: try FormatPredicate(format: "title == 'p2'"))).first)
            p2.setValue([ManagedObject](), forKey: "chapters")
            let unsaved: [(String, Set<String>)] = [
                ("NONE chapters.name == 'c2.0'", even.union(odd).union(["p12"])),
                ("ALL chapters.name BEGINSWITH 'c0'", odd.union(["p0", "p2", "p12"])),
                ("chapters.@count == 0", odd.union(["p2", "p12"])),
                ("SUBQUERY(chapters, $c, $c.name ENDSWITH '.1').@count == 1", even.subtracting(["p2"])),
            ]
            for (format, expected) in unsaved {
                #expect(try names(context, "Post", "title", format) == expected, "unsaved: \(format)")
            }
            let husbands: [(String, Set<String>)] = [
                ("wife == nil", ["h4"]),
                // A key path through a nil to-one is nil.
                ("wife.name == nil", ["h4"]),
                ("wife.name != nil", ["h0", "h1", "h2", "h3"]),
                ("NOT wife.name BEGINSWITH 'w'", ["h4"]),
                ("wife.name IN {'w1', 'w3', nil}", ["h1", "h3", "h4"]),
            ]
            for (format, expected) in husbands {
                #expect(try names(context, "Husband", "name", format) == expected, "\(format)")
            }
        }
    }

    @Test("#Predicate's starts(with: \"\") and contains(\"\") are true for every string, as Swift evaluates them")
    func swiftPredicateEmptyAffix() async throws {
        let model = try ManagedObjectModel {
            Entity("Note") {
                Attribute("title", .string).indexed()
                Attribute("rank", .int64)
            }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model, classes: [(ReviewNote.self, "Note")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (rank, title) in [(0, "abc"), (1, ""), (2, nil)] as [(Int, String?)] {
                let note = try context.insertNewObject(forEntityName: "Note")
                note.setValue(title, forKey: "title")
                note.setValue(rank, forKey: "rank")
            }
            try context.save()
            // Before, these were translated (as exact) to BEGINSWITH "" and CONTAINS "", which
            // are false for every string (spec 0003), so they found nothing.
            let empty = ""
            #expect(try ranks(context, #Predicate<ReviewNote> { $0.title.starts(with: "") }) == [0, 1, 2])
            #expect(try ranks(context, #Predicate<ReviewNote> { $0.title.contains("") }) == [0, 1, 2])
            #expect(try ranks(context, #Predicate<ReviewNote> { $0.title.contains(empty) && $0.rank > 0 }) == [1, 2])
            #expect(try ranks(context, #Predicate<ReviewNote> { !$0.title.starts(with: empty) }) == [])
            // Non-empty affixes are unchanged.
            #expect(try ranks(context, #Predicate<ReviewNote> { $0.title.starts(with: "ab") }) == [0])
            #expect(try ranks(context, #Predicate<ReviewNote> { $0.title.contains("c") }) == [0])
        }
    }
}

/// The ranks of the notes `predicate` selects, in order.
private func ranks(_ context: isolated ManagedObjectContext, _ predicate: Predicate<ReviewNote>) throws -> [Int64] {
    try context.fetch(FetchRequest(entityName: "Note", predicate: predicate), as: ReviewNote.self).map(\.rank).sorted()
}

/// A note whose title reads nil as "" (a non-optional String property, as a Swift class
/// over a Core Data model often has).
final class ReviewNote: ManagedObject {
    var title: String { self.get("title") ?? "" }
    var rank: Int64 { self.get("rank") ?? -1 }
}
