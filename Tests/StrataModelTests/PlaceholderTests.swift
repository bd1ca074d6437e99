import Testing
@testable import StrataModel
@Test func placeholder() { #expect(Bool(true)) }
