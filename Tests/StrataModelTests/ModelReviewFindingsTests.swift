import Foundation
import Testing

@testable import StrataModel

// Findings of a review of the model file and attribute values (session 12): each test failed
// on the code before its fix (the first crashed the process).

@Suite("Model and attribute value review findings")
struct ModelReviewFindingsTests {
    /// A one-entity model file whose attribute `a` is `json`.
    static func model(attribute json: String, userInfo: String = "{}") throws(ModelError) -> ManagedObjectModel {
        let text = """
            {"formatVersion": 1, "entities": [{"name": "E", "userInfo": \(userInfo), "attributes": [\(json)]}]}
            """
        return try ManagedObjectModel(jsonData: Data(text.utf8))
    }

    @Test("an infinite or out-of-range number for a decimal attribute is a conversion error (an infinity trapped)")
    func nonFiniteToDecimal() {
        for value in [Double.infinity, -Double.infinity, Double.nan, 1e300] {
            #expect(throws: AttributeValueError.self, "\(value)") { _ = try AttributeValue(any: value, for: .decimal) }
        }
        #expect(throws: AttributeValueError.self) { _ = try AttributeValue(any: Float.infinity, for: .decimal) }
        #expect((try? AttributeValue(any: 2.5, for: .decimal)) == .decimal(2.5))
    }

    @Test("a decimal in a model file is a number in full: 1-2, 1.2.3, 1e and . are refused; 1.5e3 and -2 are read")
    func decimalText() throws {
        for text in ["1-2", "1.2.3", "1e", ".", "-", "1.", "e5", "1e+"] {
            #expect(throws: ModelError.self, "\(text)") {
                _ = try Self.model(attribute: #"{"name": "a", "type": "decimal", "defaultValue": "\#(text)"}"#)
            }
        }
        for (text, value) in [("1.5e3", Decimal(1500)), ("-2", Decimal(-2)), ("+0.25", Decimal(string: "0.25") ?? 0)] {
            let model = try Self.model(attribute: #"{"name": "a", "type": "decimal", "defaultValue": "\#(text)"}"#)
            #expect(model.entity(named: "E")?.attributesByName["a"]?.defaultValue == .decimal(value), "\(text)")
        }
    }

    @Test("an impossible calendar date is refused, not moved to the next month; February 29 of a leap year is read")
    func impossibleDates() throws {
        for text in ["2024-02-30T00:00:00Z", "2023-02-29T00:00:00Z", "2024-04-31T00:00:00Z", "2024-01-01T00:00:60Z"] {
            #expect(throws: ModelError.self, "\(text)") {
                _ = try Self.model(attribute: #"{"name": "a", "type": "date", "defaultValue": "\#(text)"}"#)
            }
        }
        let leap = try Self.model(attribute: #"{"name": "a", "type": "date", "defaultValue": "2024-02-29T12:00:00Z"}"#)
        #expect(leap.entity(named: "E")?.attributesByName["a"]?.defaultValue == .date(Date(timeIntervalSince1970: 1_709_208_000)))
    }

    @Test("a date given in seconds that a model file can't write back (outside the years 0000–9999) is refused; one inside round-trips")
    func datesTheFileCanHold() throws {
        for seconds in ["1e300", "-99999999999999", "253402300800"] {
            #expect(throws: ModelError.self, "\(seconds)") {
                _ = try Self.model(attribute: #"{"name": "a", "type": "date", "defaultValue": \#(seconds)}"#)
            }
        }
        let model = try Self.model(attribute: #"{"name": "a", "type": "date", "defaultValue": 1700000000.5}"#)
        #expect(try ManagedObjectModel(jsonData: model.jsonData()) == model)
    }

    @Test("an object of 40,000 members parses in linear time, and a duplicate member is still refused")
    func largeObject() throws {
        let members = (0..<40_000).map { "\"k\($0)\": \"v\"" }.joined(separator: ", ")
        let model = try Self.model(attribute: #"{"name": "a", "type": "string"}"#, userInfo: "{\(members)}")
        #expect(model.entity(named: "E")?.userInfo.count == 40_000)
        #expect(throws: ModelError.self) {
            _ = try Self.model(attribute: #"{"name": "a", "type": "string"}"#, userInfo: #"{"k": "v", "x": "y", "k": "w"}"#)
        }
    }

    @Test("a JSON number with a leading zero is refused (RFC 8259); 0, 0.5 and -0 are read")
    func leadingZeros() throws {
        for text in ["01", "-01", "00"] {
            #expect(throws: ModelError.self, "\(text)") {
                _ = try Self.model(attribute: #"{"name": "a", "type": "int32", "defaultValue": \#(text)}"#)
            }
        }
        for (text, value) in [("0", AttributeValue.double(0)), ("0.5", .double(0.5)), ("-0", .double(-0.0))] {
            let model = try Self.model(attribute: #"{"name": "a", "type": "double", "defaultValue": \#(text)}"#)
            #expect(model.entity(named: "E")?.attributesByName["a"]?.defaultValue == value, "\(text)")
        }
    }

    @Test("bytes that aren't UTF-8 are an error at their place, not a U+FFFD in a value")
    func notUTF8() throws {
        var bytes = Array(#"{"formatVersion": 1, "entities": [{"name": "E", "userInfo": {"k": "a"#.utf8)
        bytes += [0xC3, 0x28]  // a lead byte without its continuation
        bytes += Array(#""}, "attributes": [{"name": "a", "type": "string"}]}]}"#.utf8)
        do {
            _ = try ManagedObjectModel(jsonData: Data(bytes))
            Issue.record("a file that isn't UTF-8 should be refused")
        } catch {
            #expect("\(error)".contains("not UTF-8"))
        }
    }

    @Test("a NaN minimum or maximum, which no value compares with, is refused")
    func nanBounds() throws {
        #expect(throws: ModelError.self) {
            _ = try Self.model(attribute: #"{"name": "a", "type": "double", "minimumValue": "NaN"}"#)
        }
        #expect(throws: ModelError.self) {
            _ = try Self.model(attribute: #"{"name": "a", "type": "float", "maximumValue": "NaN"}"#)
        }
        _ = try Self.model(attribute: #"{"name": "a", "type": "double", "maximumValue": "Infinity"}"#)
    }
}
