internal import Foundation
internal import StrataPredicate

// MARK: - Conversion from and to Any

extension AttributeValue {
    /// Converts a key-value-coding value to an attribute value of `type`.
    ///
    /// Accepts the Swift types a Core Data user passes to `setValue(_:forKey:)`: any integer
    /// type for integer attributes (range-checked), any integer, floating-point number or
    /// `Decimal` for `double`, `float` and `decimal` (an integer attribute also accepts an
    /// integral floating-point number, as `NSNumber` does), `String`/`Substring`, `Bool`,
    /// `Date`, `Data` or `[UInt8]`, `UUID`, `URL`, and for `transformable` either encoded
    /// `Data` or any `Encodable` value. An ``AttributeValue`` of the right type passes
    /// through. Anything else throws ``AttributeValueError`` — never a crash.
    ///
    /// ```swift
    /// try AttributeValue(any: 42, for: .int16)        // .int16(42)
    /// try AttributeValue(any: 70_000, for: .int16)    // throws: out of range
    /// try AttributeValue(any: "x", for: .date)        // throws: wrong type
    /// ```
    public init(any value: Any, for type: AttributeType) throws(AttributeValueError) {
        if let v = value as? AttributeValue {
            guard v.matches(type) else {
                throw AttributeValueError(expected: type, actual: "AttributeValue.\(v.typeName)", reason: "not convertible")
            }
            self = v
            return
        }
        func fail(_ reason: String = "not convertible") -> AttributeValueError {
            AttributeValueError(expected: type, actual: "\(Swift.type(of: value))", reason: reason)
        }
        switch type {
        case .int16:
            guard let n = AttributeValue.integer(value, as: Int16.self) else { throw fail(AttributeValue.integerFailure(value, "int16")) }
            self = .int16(n)
        case .int32:
            guard let n = AttributeValue.integer(value, as: Int32.self) else { throw fail(AttributeValue.integerFailure(value, "int32")) }
            self = .int32(n)
        case .int64:
            guard let n = AttributeValue.integer(value, as: Int64.self) else { throw fail(AttributeValue.integerFailure(value, "int64")) }
            self = .int64(n)
        case .double:
            guard let d = AttributeValue.floating(value) else { throw fail() }
            self = .double(d)
        case .float:
            if let f = value as? Float { self = .float(f); return }
            guard let d = AttributeValue.floating(value) else { throw fail() }
            self = .float(Float(d))
        case .decimal:
            if let d = value as? Decimal { self = .decimal(d); return }
            if let i = value as? any BinaryInteger, let n = Int64(exactly: i) { self = .decimal(Decimal(n)); return }
            // An infinite or NaN number has no Decimal (converting one traps), nor does one
            // beyond Decimal's range (it converts to NaN).
            // A floating-point number becomes the decimal it prints as (19.99, not the binary
            // expansion 19.98999999999999488 that `Decimal(Double)` gives), as
            // `NSNumber.decimalValue` does; a Float likewise by its own digits.
            if let d = value as? Double {
                guard d.isFinite else { throw fail("\(d) is not a finite number") }
                guard let decimal = Decimal(printedAs: d) else { throw fail("\(d) is beyond Decimal's range") }
                self = .decimal(decimal)
                return
            }
            if let f = value as? Float {
                guard f.isFinite else { throw fail("\(f) is not a finite number") }
                guard let decimal = Decimal(printed: "\(f)", of: Double(f)) else { throw fail("\(f) is beyond Decimal's range") }
                self = .decimal(decimal)
                return
            }
            throw fail()
        case .string:
            if let s = value as? String { self = .string(s) } else if let s = value as? Substring { self = .string(String(s)) } else { throw fail() }
        case .boolean:
            guard let b = value as? Bool else { throw fail() }
            self = .boolean(b)
        case .date:
            guard let d = value as? Date else { throw fail() }
            self = .date(d)
        case .binaryData:
            if let d = value as? Data { self = .binaryData(d) } else if let b = value as? [UInt8] { self = .binaryData(Data(b)) } else { throw fail() }
        case .uuid:
            guard let u = value as? UUID else { throw fail() }
            self = .uuid(u)
        case .uri:
            guard let u = value as? URL else { throw fail() }
            // Stored as its absolute string: a URL relative to a base is kept as the absolute
            // URL it stands for, so the value read back equals the value set.
            self = .uri(u.baseURL == nil ? u : u.absoluteURL)
        case .transformable:
            if let d = value as? Data { self = .transformable(d); return }
            guard let e = value as? any Encodable else { throw fail("not Encodable") }
            do {
                self = try AttributeValue.transformable(encoding: e)
            } catch {
                throw fail("encoding failed: \(error)")
            }
        }
    }

    /// The value as the plain Swift value key-value coding hands out.
    ///
    /// Each case gives its exact Swift type (`Int16`, `Int32`, `Int64`, `Decimal`, `Double`,
    /// `Float`, `String`, `Bool`, `Date`, `Data`, `UUID`, `URL`; transformable values give
    /// their encoded `Data`). Core Data hands out `NSNumber`, which bridges to any numeric
    /// type; on Linux an `Int32` in an `Any` does not cast to `Int`, so use ``intValue`` or
    /// ``doubleValue`` for a type-agnostic number.
    ///
    /// ```swift
    /// AttributeValue.int32(-1).anyValue as? Int32  // -1
    /// ```
    public var anyValue: any Sendable {
        switch self {
        case .int16(let v): v
        case .int32(let v): v
        case .int64(let v): v
        case .decimal(let v): v
        case .double(let v): v
        case .float(let v): v
        case .string(let v): v
        case .boolean(let v): v
        case .date(let v): v
        case .binaryData(let v): v
        case .uuid(let v): v
        case .uri(let v): v
        case .transformable(let v): v
        }
    }

    // MARK: - Typed access

    /// The value as `T`, when it is one: what `anyValue as? T` gives, without putting the
    /// value in an existential first (inlined, the cast to a concrete `T` is resolved at
    /// compile time).
    ///
    /// ```swift
    /// AttributeValue.string("Ann").value(as: String.self)  // "Ann"
    /// AttributeValue.int32(7).value(as: Int.self)          // nil: an Int32 is not an Int
    /// ```
    @inlinable
    public func value<T>(as type: T.Type = T.self) -> T? {
        switch self {
        case .int16(let v): v as? T
        case .int32(let v): v as? T
        case .int64(let v): v as? T
        case .decimal(let v): v as? T
        case .double(let v): v as? T
        case .float(let v): v as? T
        case .string(let v): v as? T
        case .boolean(let v): v as? T
        case .date(let v): v as? T
        case .binaryData(let v): v as? T
        case .uuid(let v): v as? T
        case .uri(let v): v as? T
        case .transformable(let v): v as? T
        }
    }

    /// The value as an `Int` for integer cases (and booleans, as `NSNumber` does); nil
    /// otherwise.
    ///
    /// ```swift
    /// AttributeValue.int16(7).intValue  // 7
    /// ```
    public var intValue: Int? {
        switch self {
        case .int16(let v): Int(v)
        case .int32(let v): Int(v)
        case .int64(let v): Int(exactly: v)
        case .boolean(let v): v ? 1 : 0
        default: nil
        }
    }

    /// The value as a `Double` for every numeric case; nil otherwise.
    ///
    /// Used for minimum/maximum value checks, which compare across numeric types.
    ///
    /// ```swift
    /// AttributeValue.decimal(2.5).doubleValue  // 2.5
    /// ```
    public var doubleValue: Double? {
        switch self {
        case .int16(let v): Double(v)
        case .int32(let v): Double(v)
        case .int64(let v): Double(v)
        case .decimal(let v): NSDecimalNumber(decimal: v).doubleValue
        case .double(let v): v
        case .float(let v): Double(v)
        default: nil
        }
    }

    /// The string of a `string` value; nil otherwise.
    ///
    /// ```swift
    /// AttributeValue.string("Ann").stringValue  // "Ann"
    /// ```
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    // MARK: - Helpers

    static func integer<T: FixedWidthInteger>(_ value: Any, as: T.Type) -> T? {
        if let v = value as? T { return v }
        if let i = value as? any BinaryInteger { return T(exactly: i) }
        if let d = value as? Double, d.isFinite { return T(exactly: d) }
        if let f = value as? Float, f.isFinite { return T(exactly: f) }
        if let d = value as? Decimal {
            let number = NSDecimalNumber(decimal: d)
            guard number.decimalValue == Decimal(number.int64Value) else { return nil }
            return T(exactly: number.int64Value)
        }
        return nil
    }

    static func integerFailure(_ value: Any, _ typeName: String) -> String {
        if value is any BinaryInteger || value is Double || value is Float || value is Decimal {
            return "\(value) is not an integer in the range of \(typeName)"
        }
        return "not convertible"
    }

    static func floating(_ value: Any) -> Double? {
        if let d = value as? Double { return d }
        if let f = value as? Float { return Double(f) }
        if let i = value as? any BinaryInteger { return Double(i) }
        if let d = value as? Decimal { return NSDecimalNumber(decimal: d).doubleValue }
        return nil
    }
}
