internal import Foundation
public import StrataPredicate

// MARK: - AttributeDescription

/// An attribute of an entity: a named, typed value with optionality, a default, and
/// validation rules.
///
/// Corresponds to Core Data's `NSAttributeDescription`. As in Core Data, a new attribute is
/// optional; call ``required()`` (or set ``isOptional``) for a mandatory one. With a
/// ``derivationExpression`` it is a derived attribute (Core Data's subclass
/// `NSDerivedAttributeDescription`), whose value the store computes at save; see
/// ``isDerived``. The builder spelling is ``Attribute`` (a type alias):
///
/// ```swift
/// Attribute("processID", .int32, default: -1)
///     .required()
///     .validated(by: "SELF > 0", warning: "Process ID < 1")
/// ```
public struct AttributeDescription: Sendable, Hashable, Codable {
    // MARK: - Identity

    /// The attribute's name, unique among its entity's properties (including inherited ones).
    public var name: String
    /// The storage type (`NSAttributeDescription.attributeType`). Changing it converts
    /// ``defaultValue`` to the new type when that loses nothing, as setting the default does.
    public var attributeType: AttributeType {
        didSet { if let value = defaultValue, !value.matches(attributeType) { defaultValue = value.coerced(to: attributeType) } }
    }

    // MARK: - Flags

    /// Whether the attribute may be nil when the object is saved (`isOptional`). Default true,
    /// as in Core Data.
    public var isOptional: Bool = true
    /// Whether the value lives only in memory and never reaches the store or the log
    /// (`isTransient`). Transient attributes take part in undo.
    public var isTransient: Bool = false
    /// Whether the store keeps an index on the attribute for fetches (`isIndexed`).
    public var isIndexed: Bool = false
    /// Whether the entity's class sets this attribute when an object is inserted (Core Data
    /// apps do it in `awakeFromInsert()`), so a mandatory attribute needs no default.
    ///
    /// Strata-specific: the model checker otherwise reports a mandatory, persisted attribute
    /// without a default in a concrete entity (see ``ModelError/Kind/missingDefaultValue``).
    public var isProvidedAtInsert: Bool = false
    /// Whether a deleted object's value of the attribute is in its history change's
    /// tombstone (`preservesValueInHistoryOnDeletion`): what a sync or search consumer that
    /// only learns of the delete later needs to find the object elsewhere (an identifier).
    /// The log keeps every before-value of a delete anyway; this marks the ones Core Data's
    /// `tombstone` holds. Not part of the version hash.
    public var preservesValueInHistoryOnDeletion: Bool = false

    // MARK: - Values

    /// The value a newly inserted object starts with (`defaultValue`); must match
    /// ``attributeType``. A value set here is converted to the attribute's type when that
    /// loses nothing, as ``init(_:_:optional:transient:indexed:default:derivation:)`` does,
    /// so the Core Data idiom of setting a number works for any integer or floating-point
    /// type (in Core Data the default is an `NSNumber`, whatever the type); a value that
    /// doesn't convert (`70000` for an `int16`) is kept and the model checker reports it.
    ///
    /// ```swift
    /// var processID = AttributeDescription("processID", .int32)
    /// processID.defaultValue = -1        // .int32(-1), not the literal's .int64(-1)
    /// ```
    public var defaultValue: AttributeValue? {
        didSet { if let value = defaultValue, !value.matches(attributeType) { defaultValue = value.coerced(to: attributeType) } }
    }

    // MARK: - Derivation

    /// The expression the store computes the attribute's value from at each save that may
    /// change it (`NSDerivedAttributeDescription.derivationExpression`); nil for an
    /// ordinary attribute.
    ///
    /// Supported, as in Core Data: a key path to an attribute of the object or through
    /// to-one relationships (`department.name`), an aggregate of a to-many relationship
    /// (`employees.@count`, `employees.@sum.salary`, `@avg`, `@min`, `@max`), `now()` (the
    /// save's time), and `lowercase(…)`, `uppercase(…)` or `canonical(…)` of a key path to a
    /// string. The model checker refuses anything else (``ModelError/Kind/invalidDerivation``).
    /// Apps read a derived attribute and never set it (`Specs/0006-context-undo.md` §24).
    public var derivationExpression: ModelExpression?

    // MARK: - Validation rules

    /// The smallest allowed value, for numeric and date attributes (Core Data's "Minimum"
    /// in the model editor; failure code 1610, or 1630 for dates).
    public var minimumValue: AttributeValue?
    /// The largest allowed value, for numeric and date attributes (code 1620, or 1640 for dates).
    public var maximumValue: AttributeValue?
    /// The fewest characters (strings) or bytes (binary data) allowed (code 1660).
    public var minimumLength: Int?
    /// The most characters (strings) or bytes (binary data) allowed (code 1670).
    public var maximumLength: Int?
    /// A regular expression (ICU syntax) a string value must match as a whole (code 1680).
    public var regularExpression: String?
    /// Predicates a value must satisfy, each with the warning reported when it does not
    /// (`validationPredicates` and `validationWarnings`; code 1550).
    public var validationPredicates: [ValidationPredicate] = []

    // MARK: - Metadata

    /// The name this attribute had in an earlier model version, for migration
    /// (`renamingIdentifier`).
    public var renamingIdentifier: String?
    /// Free-form key-value annotations (`userInfo`); not part of the version hash.
    public var userInfo: [String: String] = [:]
    /// Extra text mixed into the version hash to force a new version
    /// (`versionHashModifier`).
    public var versionHashModifier: String?

    /// Compiled form of ``regularExpression``, shared between copies; not part of equality.
    var regexSlot = RegexSlot()

    enum CodingKeys: String, CodingKey {
        case name, attributeType, isOptional, isTransient, isIndexed, isProvidedAtInsert, preservesValueInHistoryOnDeletion, defaultValue
        case minimumValue, maximumValue, minimumLength, maximumLength, regularExpression, validationPredicates
        case renamingIdentifier, userInfo, versionHashModifier, derivationExpression
    }

    // MARK: - Creating

    /// Creates an attribute.
    ///
    /// A `defaultValue` given as a literal is converted to `type` when that loses nothing
    /// (`-1` becomes `.int32(-1)` for an `int32` attribute); a value that does not convert
    /// is kept as given, and the model checker reports it as a default of the wrong type.
    ///
    /// ```swift
    /// AttributeDescription("age", .int16, default: 0)
    /// AttributeDescription("nickname", .string, optional: true)
    /// AttributeDescription("employeeCount", .int64, derivation: "employees.@count")
    /// ```
    ///
    /// A `derivation` makes a derived attribute (Core Data's `NSDerivedAttributeDescription`),
    /// whose value the store computes at save; see ``derivationExpression``.
    public init(
        _ name: String, _ type: AttributeType, optional: Bool = true, transient: Bool = false,
        indexed: Bool = false, default defaultValue: AttributeValue? = nil, derivation: ModelExpression? = nil
    ) {
        self.name = name
        self.attributeType = type
        self.isOptional = optional
        self.isTransient = transient
        self.isIndexed = indexed
        self.defaultValue = defaultValue.map { $0.coerced(to: type) }
        self.derivationExpression = derivation
    }

    // MARK: - Derived

    /// Replaces the validation predicates and their warnings, paired in order (Core Data's
    /// `setValidationPredicates(_:withValidationWarnings:)`); nil clears them. A predicate
    /// without a warning at its position is reported with its own format string as the
    /// warning; warnings beyond the last predicate are ignored.
    ///
    /// ```swift
    /// var processID = AttributeDescription("processID", .int32)
    /// processID.setValidationPredicates([try FormatPredicate(format: "SELF > 0")], withValidationWarnings: ["Process ID < 1"])
    /// ```
    public mutating func setValidationPredicates(_ predicates: [FormatPredicate]?, withValidationWarnings warnings: [String]?) {
        let warnings = warnings ?? []
        validationPredicates = (predicates ?? []).enumerated().map { index, predicate in
            ValidationPredicate(ModelPredicate(predicate), warning: index < warnings.count ? warnings[index] : predicate.description)
        }
    }

    /// The validation warnings, in the order of ``validationPredicates``
    /// (`validationWarnings`).
    ///
    /// ```swift
    /// run.attributesByName["processID"]?.validationWarnings  // ["Process ID < 1"]
    /// ```
    public var validationWarnings: [String] { validationPredicates.map(\.warning) }

    /// Whether the attribute is stored (not transient).
    ///
    /// ```swift
    /// AttributeDescription("fullName", .string, transient: true).isPersisted  // false
    /// ```
    public var isPersisted: Bool { !isTransient }

    /// Whether the store computes the attribute's value from its ``derivationExpression``
    /// (Core Data: the attribute is an `NSDerivedAttributeDescription`).
    ///
    /// ```swift
    /// Attribute("employeeCount", .int64).derived(from: "employees.@count").isDerived  // true
    /// ```
    public var isDerived: Bool { derivationExpression != nil }
}

// MARK: - Builder spelling

/// The builder spelling of ``AttributeDescription``.
///
/// ```swift
/// Entity("Person") { Attribute("name", .string).required() }
/// ```
public typealias Attribute = AttributeDescription

// MARK: - Modifiers

extension AttributeDescription {
    /// Returns a copy with `change` applied; the modifiers below are written with it.
    func with(_ change: (inout AttributeDescription) -> Void) -> AttributeDescription {
        var copy = self
        change(&copy)
        return copy
    }

    /// Makes the attribute mandatory (`isOptional = false`).
    ///
    /// ```swift
    /// Attribute("name", .string, default: "").required()
    /// ```
    public func required() -> AttributeDescription { with { $0.isOptional = false } }

    /// Makes the attribute transient (`isTransient = true`).
    ///
    /// ```swift
    /// Attribute("fullName", .string).transient()
    /// ```
    public func transient() -> AttributeDescription { with { $0.isTransient = true } }

    /// Asks the store to index the attribute (`isIndexed = true`).
    ///
    /// ```swift
    /// Attribute("email", .string).indexed()
    /// ```
    public func indexed() -> AttributeDescription { with { $0.isIndexed = true } }

    /// Puts a deleted object's value of the attribute in its history change's tombstone
    /// (`preservesValueInHistoryOnDeletion = true`).
    ///
    /// ```swift
    /// Attribute("uuid", .uuid).preservedInHistoryOnDeletion()
    /// ```
    public func preservedInHistoryOnDeletion() -> AttributeDescription { with { $0.preservesValueInHistoryOnDeletion = true } }

    /// Declares that the entity's class sets the attribute at insert (in
    /// `awakeFromInsert()`), so a mandatory attribute needs no default.
    ///
    /// ```swift
    /// Attribute("date", .date).required().providedAtInsert()
    /// ```
    public func providedAtInsert() -> AttributeDescription { with { $0.isProvidedAtInsert = true } }

    /// Makes the attribute derived: the store computes its value from `derivation` at each
    /// save that may change it (``derivationExpression``).
    ///
    /// ```swift
    /// Attribute("employeeCount", .int64).derived(from: "employees.@count")
    /// Attribute("searchName", .string).derived(from: "canonical(name)").indexed()
    /// ```
    public func derived(from derivation: ModelExpression) -> AttributeDescription { with { $0.derivationExpression = derivation } }

    /// Adds a validation predicate with its warning
    /// (`setValidationPredicates(_:withValidationWarnings:)`).
    ///
    /// ```swift
    /// Attribute("processID", .int32, default: -1).validated(by: "SELF > 0", warning: "Process ID < 1")
    /// ```
    public func validated(by predicate: ModelPredicate, warning: String) -> AttributeDescription {
        with { $0.validationPredicates.append(ValidationPredicate(predicate, warning: warning)) }
    }

    /// Sets the minimum and/or maximum value; literals are converted to the attribute's type.
    ///
    /// ```swift
    /// Attribute("age", .int16).range(min: 0, max: 150)
    /// ```
    public func range(min: AttributeValue? = nil, max: AttributeValue? = nil) -> AttributeDescription {
        with {
            let type = $0.attributeType
            $0.minimumValue = min.map { v in v.coerced(to: type) }
            $0.maximumValue = max.map { v in v.coerced(to: type) }
        }
    }

    /// Sets the minimum and/or maximum length (characters for strings, bytes for data).
    ///
    /// ```swift
    /// Attribute("code", .string).length(min: 2, max: 8)
    /// ```
    public func length(min: Int? = nil, max: Int? = nil) -> AttributeDescription {
        with {
            $0.minimumLength = min
            $0.maximumLength = max
        }
    }

    /// Requires string values to match `pattern` as a whole.
    ///
    /// ```swift
    /// Attribute("email", .string).matching(#"[^@\s]+@[^@\s]+"#)
    /// ```
    public func matching(_ pattern: String) -> AttributeDescription { with { $0.regularExpression = pattern } }

    /// Records the attribute's name in the previous model version (`renamingIdentifier`).
    ///
    /// ```swift
    /// Attribute("familyName", .string).renamed(from: "lastName")
    /// ```
    public func renamed(from previousName: String) -> AttributeDescription { with { $0.renamingIdentifier = previousName } }

    /// Adds user-info entries.
    ///
    /// ```swift
    /// Attribute("score", .double).userInfo(["unit": "points"])
    /// ```
    public func userInfo(_ entries: [String: String]) -> AttributeDescription {
        with { $0.userInfo.merge(entries) { _, new in new } }
    }

    /// Sets the version hash modifier.
    ///
    /// ```swift
    /// Attribute("score", .double).versionHashModifier("v2")
    /// ```
    public func versionHashModifier(_ modifier: String) -> AttributeDescription { with { $0.versionHashModifier = modifier } }
}
