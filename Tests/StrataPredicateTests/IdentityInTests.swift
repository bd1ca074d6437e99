import Foundation
import StrataPredicate
import Testing

/// `IN` a constant collection of objects (`SELF IN %@`, Core Data's fetch by object IDs)
/// looks the identity up instead of comparing with each element; the answers are those of
/// comparing with each.
@Suite("IN a collection of objects")
struct IdentityInTests {
    static var objects: [IdentifiedObject] { (0..<500).map { IdentifiedObject(identity: "o\($0)", properties: ["n": $0]) } }

    @Test("SELF IN objects: members and non-members, nil, a number, and another type's identity")
    func lookup() throws {
        let objects = Self.objects
        let chosen = Array(objects.filter { $0.properties["n"] as? Int ?? 0 > 0 && ($0.properties["n"] as? Int ?? 0) % 7 == 0 })
        let predicate = try FormatPredicate(format: "SELF IN %@", chosen)
        for object in objects {
            let n = object.properties["n"] as? Int ?? 0
            #expect(try predicate.evaluate(with: object) == (n > 0 && n % 7 == 0), "o\(n)")
        }
        // The same identity value of another type is another identity.
        let other = IdentifiedObjectInt(identity: 7)
        #expect(try !predicate.evaluate(with: other))
        // A key path that is nil, a number: in no collection of objects.
        #expect(try !FormatPredicate(format: "missing IN %@", chosen).evaluate(with: objects[7]))
        #expect(try !FormatPredicate(format: "n IN %@", chosen).evaluate(with: objects[7]))
        // An element of another kind leaves the comparison with each element: still an answer.
        let mixed = try FormatPredicate(format: "SELF IN %@", argumentArray: [[objects[3], 7] as [Any]])
        #expect(try mixed.evaluate(with: objects[3]))
        #expect(try !mixed.evaluate(with: objects[4]))
        #expect(try FormatPredicate(format: "n IN %@", argumentArray: [[objects[3], 7] as [Any]]).evaluate(with: objects[7]))
    }

    @Test("name IN strings: a lookup that keeps canonical equivalence; [c] and [d] still fold; other kinds aren't strings")
    func strings() throws {
        let names = (0..<300).map { "n\($0)" } + ["é", "Straße"]
        let predicate = try FormatPredicate(format: "name IN %@", names)
        #expect(try predicate.evaluate(with: ["name": "n42"]))
        #expect(try !predicate.evaluate(with: ["name": "n300"]))
        #expect(try predicate.evaluate(with: ["name": "e\u{301}"]), "canonically equivalent to é")
        #expect(try !predicate.evaluate(with: ["name": "N42"]))
        #expect(try !predicate.evaluate(with: ["name": 42]))
        #expect(try !predicate.evaluate(with: [String: Any]()))
        let folded = try FormatPredicate(format: "name IN[c] %@", names)
        #expect(try folded.evaluate(with: ["name": "N42"]))
        let diacritics = try FormatPredicate(format: "name IN[d] %@", names)
        #expect(try diacritics.evaluate(with: ["name": "e"]))
        let mixed = try FormatPredicate(format: "n IN %@", argumentArray: [["a", 7] as [Any]])
        #expect(try mixed.evaluate(with: ["n": 7]))
        #expect(try mixed.evaluate(with: ["n": "a"]))
    }
}

extension IdentityInTests {
    @Test("n IN integers: a lookup for integers and Booleans that answers as comparing with each element; doubles, decimals, strings and nil too")
    func integers() throws {
        let members = [0, 1, 7, -3, 9_007_199_254_740_993, Int.max, Int.min]
        let lookup = try FormatPredicate(format: "n IN %@", members)
        // The same collection with a string element: no lookup, every element compared.
        let linear = try FormatPredicate(format: "n IN %@", argumentArray: [members.map { $0 as Any } + ["x"]])
        let probes: [Any?] = [
            0, 1, 2, 7, -3, 9_007_199_254_740_993, 9_007_199_254_740_992, Int.max, Int.min, true, false, 7.0, 7.5, -3.0,
            9_007_199_254_740_992.0, Double.nan, Decimal(7), Decimal(string: "7.0000001"), "7", nil,
        ]
        for probe in probes {
            let subject: [String: Any] = probe.map { ["n": $0] } ?? [:]
            #expect(try lookup.evaluate(with: subject) == linear.evaluate(with: subject), "\(String(describing: probe))")
        }
        #expect(try lookup.evaluate(with: ["n": 7]))
        #expect(try lookup.evaluate(with: ["n": true]))
        #expect(try !lookup.evaluate(with: ["n": 2]))
        #expect(try lookup.evaluate(with: ["n": 7.0]), "a double compares by value")
    }
}

/// An object whose identity is an `Int` (never equal to a `String` identity).
struct IdentifiedObjectInt: KeyValueCoding, PredicateObjectIdentity {
    let identity: Int
    func value(forKey key: String) -> Any? { nil }
    var predicateIdentity: any Hashable & Sendable { identity }
}
