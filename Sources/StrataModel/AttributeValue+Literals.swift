// MARK: - Literals

extension AttributeValue: ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByStringLiteral,
    ExpressibleByBooleanLiteral
{
    /// An integer literal is an `int64` value; attribute builders convert it to the
    /// attribute's type.
    ///
    /// ```swift
    /// let v: AttributeValue = 42  // .int64(42)
    /// ```
    public init(integerLiteral value: Int64) { self = .int64(value) }

    /// A floating-point literal is a `double` value; attribute builders convert it.
    ///
    /// ```swift
    /// let v: AttributeValue = 2.5  // .double(2.5)
    /// ```
    public init(floatLiteral value: Double) { self = .double(value) }

    /// A string literal is a `string` value.
    ///
    /// ```swift
    /// let v: AttributeValue = "Ann"  // .string("Ann")
    /// ```
    public init(stringLiteral value: String) { self = .string(value) }

    /// A Boolean literal is a `boolean` value.
    ///
    /// ```swift
    /// let v: AttributeValue = true  // .boolean(true)
    /// ```
    public init(booleanLiteral value: Bool) { self = .boolean(value) }

    /// This value converted to `type` when the conversion loses nothing, else unchanged.
    ///
    /// A string converts to a date (ISO 8601), UUID, URL or decimal when it parses as one.
    ///
    /// ```swift
    /// AttributeValue.int64(-1).coerced(to: .int32)  // .int32(-1)
    /// ```
    public func coerced(to type: AttributeType) -> AttributeValue {
        if matches(type) { return self }
        if case .string(let s) = self, let parsed = try? AttributeValue(json: .string(s), for: type) {
            return parsed
        }
        if case .boolean = self, type != .boolean { return self }
        return (try? AttributeValue(any: anyValue, for: type)) ?? self
    }
}
