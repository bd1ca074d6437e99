public import Foundation

// MARK: - ValidationFailure

/// One value that breaks a model rule: the entity, key, value, Core Data error code and a
/// localized message.
///
/// Corresponds to the `NSError` Core Data returns from `validateValue(_:forKey:)` and
/// `validateForInsert()` (domain `NSCocoaErrorDomain`, `userInfo` keys
/// `NSValidationObjectErrorKey`, `NSValidationKeyErrorKey`, `NSValidationValueErrorKey`).
/// The message uses the model's localization dictionary: the property's localized name
/// (`Property/<key>/Entity/<Entity>`), and for predicate failures the localized warning
/// (`ErrorString/<warning>`).
///
/// ```swift
/// let failures = model.validateValue(.int32(-1), forKey: "processID", in: "Run")
/// failures.first?.code     // .managedObjectValidation (1550)
/// failures.first?.message  // "Process ID must not be less than 1"
/// ```
public struct ValidationFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The error code, numerically equal to Core Data's.
    public var code: Code
    /// The entity whose object holds the value.
    public var entity: String
    /// The property's name (`NSValidationKeyErrorKey`).
    public var key: String
    /// The offending value, or nil for a missing one (`NSValidationValueErrorKey`).
    public var value: AttributeValue?
    /// The localized explanation.
    public var message: String
    /// The URI of the object that holds the value (`NSValidationObjectErrorKey`), when the
    /// failure comes from validating an object: a context's save and `validateFor…` name it,
    /// so failures of several objects of one entity can be told apart. Nil for a value
    /// validated on its own against the model.
    public var object: URL?
    /// For a relationship's failure found on an object (a count, a deny rule): the URIs of
    /// the objects the relationship holds, which bridge under `NSValidationValueErrorKey`
    /// as Core Data puts the relationship's value there (its objects). Nil otherwise.
    public var destinations: [URL]?
    /// For a failure of a rule Core Data keeps as a predicate, that predicate
    /// (`NSValidationPredicateErrorKey`): a validation predicate as the model has it, a
    /// minimum or maximum as `SELF >= 1` / `SELF <= 10` (a date's as `SELF >= CAST(…,
    /// "NSDate")`), a length as `length >= 2` / `length <= 4`, a pattern as `SELF MATCHES
    /// "…"`. Nil for a missing value, a value of another type, a relationship's count.
    public var predicate: ModelPredicate?

    /// Creates a failure.
    ///
    /// ```swift
    /// ValidationFailure(code: .missingMandatoryProperty, entity: "Run", key: "date", value: nil, message: "Date is a required value.")
    /// ```
    public init(
        code: Code, entity: String, key: String, value: AttributeValue?, message: String, object: URL? = nil, destinations: [URL]? = nil,
        predicate: ModelPredicate? = nil
    ) {
        self.predicate = predicate
        self.code = code
        self.entity = entity
        self.key = key
        self.value = value
        self.message = message
        self.object = object
        self.destinations = destinations
    }

    /// `Entity.key: message (code N)`, and the object's URI when known.
    ///
    /// ```swift
    /// "\(failure)"  // "Run.processID: Process ID must not be less than 1 (code 1550)"
    /// // with the object: "Run.processID: Process ID must not be less than 1 (code 1550) in x-strata://…/Run/p3"
    /// ```
    public var description: String {
        let base = "\(entity).\(key): \(message) (code \(code.rawValue))"
        guard let object else { return base }
        return base + " in \(object.absoluteString)"
    }

    // MARK: - Code

    /// A validation error code, numerically equal to Core Data's `NSValidation…Error`
    /// constants in `CoreDataErrors.h`.
    ///
    /// ```swift
    /// ValidationFailure.Code.missingMandatoryProperty.rawValue  // 1570
    /// ```
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        /// The numeric code.
        public var rawValue: Int
        /// Creates a code from its number.
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// The number and its Core Data name.
        public var description: String {
            let names: [Int: String] = [
                1550: "NSManagedObjectValidationError", 1560: "NSValidationMultipleErrorsError",
                1570: "NSValidationMissingMandatoryPropertyError", 1580: "NSValidationRelationshipLacksMinimumCountError",
                1590: "NSValidationRelationshipExceedsMaximumCountError", 1600: "NSValidationRelationshipDeniedDeleteError", 1610: "NSValidationNumberTooLargeError",
                1620: "NSValidationNumberTooSmallError", 1630: "NSValidationDateTooLateError",
                1640: "NSValidationDateTooSoonError", 1660: "NSValidationStringTooLongError",
                1670: "NSValidationStringTooShortError", 1680: "NSValidationStringPatternMatchingError",
            ]
            return "\(rawValue) (\(names[rawValue] ?? "unknown"))"
        }

        /// A validation predicate failed, or the value has the wrong type
        /// (`NSManagedObjectValidationError`, 1550).
        public static let managedObjectValidation = Code(rawValue: 1550)
        /// Several failures (`NSValidationMultipleErrorsError`, 1560).
        public static let multipleErrors = Code(rawValue: 1560)
        /// A mandatory property is nil or empty (`NSValidationMissingMandatoryPropertyError`, 1570).
        public static let missingMandatoryProperty = Code(rawValue: 1570)
        /// A to-many relationship has fewer than `minCount` objects, or a mandatory one
        /// none (1580).
        public static let relationshipLacksMinimumCount = Code(rawValue: 1580)
        /// A relationship has more than `maxCount` objects (1590).
        public static let relationshipExceedsMaximumCount = Code(rawValue: 1590)
        /// A deleted object's relationship with the deny rule still has destinations
        /// (`NSValidationRelationshipDeniedDeleteError`, 1600).
        public static let relationshipDeniedDelete = Code(rawValue: 1600)
        /// A number is above `maximumValue` (`NSValidationNumberTooLargeError`, 1610).
        public static let numberTooLarge = Code(rawValue: 1610)
        /// A number is below `minimumValue` (`NSValidationNumberTooSmallError`, 1620).
        public static let numberTooSmall = Code(rawValue: 1620)
        /// A date is after `maximumValue` (`NSValidationDateTooLateError`, 1630).
        public static let dateTooLate = Code(rawValue: 1630)
        /// A date is before `minimumValue` (`NSValidationDateTooSoonError`, 1640).
        public static let dateTooSoon = Code(rawValue: 1640)
        /// A string or data value is longer than `maximumLength` (`NSValidationStringTooLongError`, 1660).
        public static let stringTooLong = Code(rawValue: 1660)
        /// A string or data value is shorter than `minimumLength` (`NSValidationStringTooShortError`, 1670).
        public static let stringTooShort = Code(rawValue: 1670)
        /// A string does not match the regular expression (`NSValidationStringPatternMatchingError`, 1680).
        public static let stringPatternMatching = Code(rawValue: 1680)
    }
}
