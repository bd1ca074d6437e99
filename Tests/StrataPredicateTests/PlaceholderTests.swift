import Testing
@testable import StrataPredicate
@Test func placeholder() throws { #expect(try FormatPredicate(format: "TRUEPREDICATE").evaluate(with: nil)) }
