public import Foundation
internal import StrataPredicate

// MARK: - Validating one value

extension AttributeDescription {
    /// Checks `value` against this attribute's rules and returns every failure.
    ///
    /// Corresponds to the model-level part of Core Data's `validateValue(_:forKey:)`. Rules
    /// apply in this order: a nil value fails only when the attribute is mandatory (1570) and
    /// is otherwise valid; a value of the wrong type fails with 1550; then minimum/maximum
    /// value (1620/1610, for dates 1640/1630), minimum/maximum length (1670/1660; characters
    /// for strings, bytes for data), the regular expression (1680, whole-string match), and
    /// each validation predicate with the value as `SELF` (1550, with the localized
    /// warning). Messages use `localization` for the property name and warnings.
    ///
    /// ```swift
    /// let pid = run.attributesByName["processID"]
    /// pid?.validate(.int32(-1), entity: "Run", localization: model.localization)
    /// // [1550 "Process ID must not be less than 1"]
    /// ```
    public func validate(
        _ value: AttributeValue?, entity: String, localization: ModelLocalization = ModelLocalization()
    ) -> [ValidationFailure] {
        // The label is looked up only for a failure: most values pass.
        var label: String { localization.propertyName(name, entity: entity) }
        func failure(_ code: ValidationFailure.Code, _ message: String, _ predicate: ModelPredicate? = nil) -> ValidationFailure {
            ValidationFailure(code: code, entity: entity, key: name, value: value, message: message, predicate: predicate)
        }
        guard let value else {
            return isOptional ? [] : [failure(.missingMandatoryProperty, "\(label) is a required value.")]
        }
        guard value.matches(attributeType) else {
            return [failure(.managedObjectValidation, "\(label) must be a \(attributeType) value, not \(value.typeName).")]
        }
        var failures: [ValidationFailure] = []
        let isDate = attributeType == .date
        if let minimum = minimumValue, let order = AttributeValue.compare(value, minimum), order == .orderedAscending {
            failures.append(
                isDate
                    ? failure(.dateTooSoon, "\(label) is too soon (earliest \(minimum.canonicalJSON)).", Self.rule(">=", minimum))
                    : failure(.numberTooSmall, "\(label) is too small (minimum \(minimum.canonicalJSON)).", Self.rule(">=", minimum)))
        }
        if let maximum = maximumValue, let order = AttributeValue.compare(value, maximum), order == .orderedDescending {
            failures.append(
                isDate
                    ? failure(.dateTooLate, "\(label) is too late (latest \(maximum.canonicalJSON)).", Self.rule("<=", maximum))
                    : failure(.numberTooLarge, "\(label) is too large (maximum \(maximum.canonicalJSON)).", Self.rule("<=", maximum)))
        }
        // Counting a string's characters walks it: only when there is a length rule.
        var length: Int?
        if minimumLength != nil || maximumLength != nil {
            switch value {
            case .string(let s): length = s.count
            case .binaryData(let d): length = d.count
            default: length = nil
            }
        }
        if let length {
            if let minimum = minimumLength, length < minimum {
                failures.append(failure(.stringTooShort, "\(label) is too short (minimum length \(minimum)).", ModelPredicate("length >= \(minimum)")))
            }
            if let maximum = maximumLength, length > maximum {
                failures.append(failure(.stringTooLong, "\(label) is too long (maximum length \(maximum)).", ModelPredicate("length <= \(maximum)")))
            }
        }
        if let pattern = regularExpression, case .string(let s) = value, regexSlot.wholeMatch(s, pattern: pattern) != true {
            failures.append(failure(.stringPatternMatching, "\(label) does not match the required pattern.", Self.rule("MATCHES", .string(pattern))))
        }
        for rule in validationPredicates {
            let passed: Bool
            if let predicate = rule.predicate.predicate {
                passed = (try? predicate.evaluate(with: value.anyValue, substitutionVariables: [:])) ?? false
            } else {
                passed = false
            }
            if !passed {
                failures.append(failure(.managedObjectValidation, localization.errorString(rule.warning), rule.predicate))
            }
        }
        return failures
    }

    /// `SELF OPERATOR bound` as the predicate Core Data keeps for a minimum, a maximum or a
    /// pattern (made only for a failure); nil if it can't be formed.
    private static func rule(_ operation: String, _ bound: AttributeValue) -> ModelPredicate? {
        guard let predicate = try? FormatPredicate(format: "SELF \(operation) %@", argumentArray: [bound.anyValue]) else { return nil }
        return ModelPredicate(predicate)
    }
}

// MARK: - Validating a relationship's contents

extension RelationshipDescription {
    /// Checks the number of destination objects a relationship holds.
    ///
    /// An optional relationship may be empty whatever its `minCount` (Core Data enforces the
    /// counts only on a value that isn't nil). A mandatory to-one must not be nil (1570, a
    /// missing value); a mandatory to-many's value is a set, never nil, so Core Data counts
    /// it: empty, it holds fewer than the one object it must (1580). A non-empty
    /// relationship must hold at least `minCount` (1580) and at most `maxCount` (1590)
    /// objects. The failures carry no ``ValidationFailure/value``: a relationship's value is
    /// its objects (a context fills in ``ValidationFailure/destinations``). Before session
    /// 33 an empty mandatory to-many was 1570, and the value was the count as an `int64`.
    ///
    /// ```swift
    /// players.validate(count: 0, entity: "Team")   // required to-many: [1580]
    /// ```
    public func validate(
        count: Int, entity: String, localization: ModelLocalization = ModelLocalization()
    ) -> [ValidationFailure] {
        var label: String { localization.propertyName(name, entity: entity) }
        func failure(_ code: ValidationFailure.Code, _ message: String) -> ValidationFailure {
            ValidationFailure(code: code, entity: entity, key: name, value: nil, message: message)
        }
        if count == 0 {
            if isOptional { return [] }
            guard isToMany else { return [failure(.missingMandatoryProperty, "\(label) is a required value.")] }
            return [failure(.relationshipLacksMinimumCount, "\(label) has too few items (minimum \(Swift.max(minCount ?? 1, 1))).")]
        }
        var failures: [ValidationFailure] = []
        if let minimum = minCount, count < minimum {
            failures.append(failure(.relationshipLacksMinimumCount, "\(label) has too few items (minimum \(minimum))."))
        }
        let maximum = isToMany ? maxCount : 1
        if let maximum, count > maximum {
            failures.append(failure(.relationshipExceedsMaximumCount, "\(label) has too many items (maximum \(maximum))."))
        }
        return failures
    }
}

// MARK: - Validating an object's values

extension EntityDescription {
    /// Checks an object's attribute values and relationship counts against every rule of
    /// this entity (inherited properties included) and throws all failures at once.
    ///
    /// A missing key counts as nil (or, for relationships, empty). Corresponds to the
    /// model-rule part of Core Data's `validateForInsert()`/`validateForUpdate()`; the
    /// context calls it at save.
    ///
    /// ```swift
    /// try run.validateValues(["date": .date(.now), "processID": .int32(42)], localization: model.localization)
    /// ```
    public func validateValues(
        _ values: [String: AttributeValue], relationshipCounts: [String: Int] = [:],
        localization: ModelLocalization = ModelLocalization()
    ) throws(ValidationError) {
        var failures: [ValidationFailure] = []
        for attribute in allAttributes {
            failures += attribute.validate(values[attribute.name], entity: name, localization: localization)
        }
        for relationship in allRelationships {
            failures += relationship.validate(count: relationshipCounts[relationship.name] ?? 0, entity: name, localization: localization)
        }
        if !failures.isEmpty { throw ValidationError(failures: failures) }
    }
}

extension ManagedObjectModel {
    /// Checks one value for the property `key` of the entity named `entity`, with messages
    /// localized by this model (Core Data's `validateValue(_:forKey:)`).
    ///
    /// Returns no failures for an unknown entity or key (there is no rule to break).
    ///
    /// ```swift
    /// model.validateValue(.int32(-1), forKey: "processID", in: "Run").map(\.code)  // [1550]
    /// ```
    public func validateValue(_ value: AttributeValue?, forKey key: String, in entity: String) -> [ValidationFailure] {
        guard let attribute = entitiesByName[entity]?.attributesByName[key] else { return [] }
        return attribute.validate(value, entity: entity, localization: localization)
    }
}

// MARK: - Ordering values

extension AttributeValue {
    /// Orders two values of comparable kinds: numbers across numeric types (integers
    /// exactly, decimals as decimals), dates, strings; nil for kinds that do not compare.
    ///
    /// ```swift
    /// AttributeValue.compare(.int32(1), .int64(2))  // .orderedAscending
    /// ```
    public static func compare(_ lhs: AttributeValue, _ rhs: AttributeValue) -> ComparisonResult? {
        func order<T: Comparable>(_ a: T, _ b: T) -> ComparisonResult {
            a < b ? .orderedAscending : (a > b ? .orderedDescending : .orderedSame)
        }
        switch (lhs, rhs) {
        case (.date(let a), .date(let b)): return order(a, b)
        case (.string(let a), .string(let b)): return order(a, b)
        default: break
        }
        if let a = lhs.exactInteger, let b = rhs.exactInteger { return order(a, b) }
        if case .decimal(let a) = lhs, let b = rhs.decimalValue { return order(a, b) }
        if case .decimal(let b) = rhs, let a = lhs.decimalValue { return order(a, b) }
        if let a = lhs.doubleValue, let b = rhs.doubleValue, !a.isNaN, !b.isNaN { return order(a, b) }
        return nil
    }

    private var exactInteger: Int64? {
        switch self {
        case .int16(let v): Int64(v)
        case .int32(let v): Int64(v)
        case .int64(let v): v
        default: nil
        }
    }

    private var decimalValue: Decimal? {
        switch self {
        case .decimal(let v): v
        case .int16, .int32, .int64: exactInteger.map { Decimal($0) }
        case .double(let v): v.isFinite ? Decimal(v) : nil
        case .float(let v): v.isFinite ? Decimal(Double(v)) : nil
        default: nil
        }
    }
}
