import Testing
@testable import StrataStorage
@Test func placeholder() { #expect(Bool(true)) }
