import Foundation
import Testing

@testable import StrataModel

@Suite("AttributeValue")
struct AttributeValueTests {
    static let url = URL(string: "https://example.com/x") ?? URL(fileURLWithPath: "/")
    static let uuid = UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16))

    static let samples: [(any Sendable, AttributeType, AttributeValue)] = [
        (Int16(7), .int16, .int16(7)),
        (7, .int16, .int16(7)),
        (Int64(-5), .int32, .int32(-5)),
        (UInt8(200), .int64, .int64(200)),
        (3.0, .int32, .int32(3)),
        (Decimal(string: "12.5") ?? 0, .decimal, .decimal(Decimal(string: "12.5") ?? 0)),
        (4, .decimal, .decimal(4)),
        (2.5, .double, .double(2.5)),
        (Float(1.5), .double, .double(1.5)),
        (Float(1.5), .float, .float(1.5)),
        (3, .float, .float(3)),
        ("Ann", .string, .string("Ann")),
        (Substring("Bo"), .string, .string("Bo")),
        (true, .boolean, .boolean(true)),
        (Date(timeIntervalSince1970: 0), .date, .date(Date(timeIntervalSince1970: 0))),
        (Data([1, 2]), .binaryData, .binaryData(Data([1, 2]))),
        ([UInt8]([3]), .binaryData, .binaryData(Data([3]))),
        (uuid, .uuid, .uuid(uuid)),
        (url, .uri, .uri(url)),
        (Data([9]), .transformable(valueTypeName: "X"), .transformable(Data([9]))),
        (AttributeValue.int32(1), .int32, .int32(1)),
    ]

    @Test("Conversion from Any", arguments: samples.indices)
    func fromAny(index: Int) throws {
        let (input, type, expected) = Self.samples[index]
        #expect(try AttributeValue(any: input, for: type) == expected)
    }

    @Test("Wrong types and out-of-range numbers are errors, not crashes", arguments: [
        ("abc" as any Sendable, AttributeType.int32, "String"),
        (70_000, .int16, "not an integer in the range of int16"),
        (Int64.max, .int32, "range of int32"),
        (2.5, .int64, "not an integer"),
        (Double.nan, .int16, "not an integer"),
        (1, .boolean, "Int"),
        ("2024-01-01", .date, "String"),
        (42, .string, "Int"),
        (AttributeValue.int16(1), .int32, "AttributeValue.int16"),
    ])
    func fromAnyErrors(input: any Sendable, type: AttributeType, fragment: String) {
        let error = #expect(throws: AttributeValueError.self) { try AttributeValue(any: input, for: type) }
        #expect(error?.expected == type)
        #expect(error?.description.contains(fragment) == true)
    }

    @Test("A URL relative to a base becomes the absolute URL it stands for, which is what a store gives back")
    func relativeURL() throws {
        let base = try #require(URL(string: "https://example.com/a/"))
        let relative = try #require(URL(string: "b/c", relativeTo: base))
        let value = try AttributeValue(any: relative, for: .uri)
        #expect(value == .uri(try #require(URL(string: "https://example.com/a/b/c"))))
        // Stored as its absolute string and read back: the same value.
        guard case .uri(let url) = value else {
            Issue.record("not a URI: \(value)")
            return
        }
        #expect(AttributeValue.uri(try #require(URL(string: url.absoluteString))) == value)
    }

    @Test("Transformable values encode Codable values deterministically")
    func transformable() throws {
        struct Point: Codable, Equatable { var y: Int; var x: Int }
        let a = try AttributeValue(any: Point(y: 2, x: 1), for: .transformable(valueTypeName: "Point"))
        #expect(try a.decodeTransformable(as: Point.self) == Point(y: 2, x: 1))
        #expect(a == (try AttributeValue.transformable(encoding: Point(y: 2, x: 1))))
        #expect(a == .transformable(Data(#"{"x":1,"y":2}"#.utf8)))
        #expect(throws: AttributeValueError.self) { try AttributeValue.int16(1).decodeTransformable(as: Point.self) }
    }

    @Test("anyValue gives the exact Swift type and converts back", arguments: samples.indices)
    func anyRoundTrip(index: Int) throws {
        let (_, type, value) = Self.samples[index]
        #expect(try AttributeValue(any: value.anyValue, for: type) == value)
    }

    @Test("Canonical JSON round-trips every type", arguments: samples.indices)
    func canonicalJSON(index: Int) throws {
        let (_, type, value) = Self.samples[index]
        #expect(try AttributeValue(canonicalJSON: value.canonicalJSON, for: type) == value)
    }

    @Test("Canonical JSON forms", arguments: [
        (AttributeValue.int32(-1), "-1"),
        (.decimal(Decimal(string: "1.10") ?? 0), #""1.1""#),
        (.double(.infinity), #""Infinity""#),
        (.double(0.1), "0.1"),
        (.boolean(false), "false"),
        (.date(Date(timeIntervalSince1970: 1_714_564_800)), #""2024-05-01T12:00:00Z""#),
        (.date(Date(timeIntervalSince1970: -0.5)), #""1969-12-31T23:59:59.5Z""#),
        // Too far out for Int64 microseconds (this one trapped): seconds since 1970 as text.
        (.date(Date(timeIntervalSince1970: 9.5e12)), #""9500000000000.0""#),
        (.binaryData(Data([0, 255])), #""AP8=""#),
        (.string("a\"b\n"), #""a\"b\n""#),
    ])
    func canonicalForms(value: AttributeValue, json: String) {
        #expect(value.canonicalJSON == json)
    }

    @Test("Non-finite floats and NaN round-trip through canonical JSON")
    func nonFinite() throws {
        #expect(try AttributeValue(canonicalJSON: #""-Infinity""#, for: .float) == .float(-.infinity))
        let nan = try AttributeValue(canonicalJSON: #""NaN""#, for: .double)
        if case .double(let d) = nan { #expect(d.isNaN) } else { Issue.record("expected a double") }
    }

    @Test("Bad canonical JSON is an error", arguments: [
        ("70000", AttributeType.int16), ("1.5", .int32), (#""x""#, .decimal), (#""2024-13-01T00:00:00Z""#, .date),
        (#""not-a-uuid""#, .uuid), ("true", .string), ("[1", .int64), (#""%%%""#, .binaryData),
    ])
    func badCanonicalJSON(text: String, type: AttributeType) {
        #expect(throws: AttributeValueError.self) { try AttributeValue(canonicalJSON: text, for: type) }
    }

    @Test("Codable form round-trips exactly, including NaN and sub-microsecond dates")
    func codable() throws {
        let values = Self.samples.map(\.2) + [
            .date(Date(timeIntervalSinceReferenceDate: 0.123_456_789_1)), .double(-0.0), .float(.greatestFiniteMagnitude),
        ]
        for value in values {
            let data = try JSONEncoder().encode(value)
            #expect(try JSONDecoder().decode(AttributeValue.self, from: data) == value)
        }
        #expect(String(decoding: try JSONEncoder().encode(AttributeValue.int32(-1)), as: UTF8.self) == #"{"int32":-1}"#)
    }

    @Test("Values are stored inline: the enum is no larger than its largest payload plus a tag")
    func layout() {
        #expect(MemoryLayout<AttributeValue>.size <= MemoryLayout<Decimal>.size + 1)
    }

    @Test("Comparison across numeric types")
    func compare() {
        #expect(AttributeValue.compare(.int16(1), .int64(2)) == .orderedAscending)
        #expect(AttributeValue.compare(.decimal(2), .int32(2)) == .orderedSame)
        #expect(AttributeValue.compare(.double(2.5), .float(1)) == .orderedDescending)
        #expect(AttributeValue.compare(.string("a"), .int16(1)) == nil)
    }
}
