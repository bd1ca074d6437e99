public import Foundation
internal import StrataPredicate

// MARK: - Bridging to NSError

/// The `userInfo` keys of the `NSError`s Strata's errors bridge to: Core Data's constants,
/// with the same strings, so code written against Core Data's keys reads them unchanged.
///
/// ```swift
/// catch let error as NSError where error.code == 1560 {
///     let details = error.userInfo[ErrorUserInfoKey.detailedErrors] as? [NSError]   // NSDetailedErrorsKey
/// }
/// ```
public enum ErrorUserInfoKey {
    /// The URI of the object that failed validation (Core Data's `NSValidationObjectErrorKey`
    /// holds the object itself; errors are `Sendable`, so Strata's holds its URI as a `URL`).
    public static let validationObject = "NSValidationErrorObject"
    /// The property that failed validation (`NSValidationKeyErrorKey`).
    public static let validationKey = "NSValidationErrorKey"
    /// The value that failed validation, absent when it was nil (`NSValidationValueErrorKey`);
    /// for a relationship's count or deny failure, its objects' URIs as `[URL]`.
    public static let validationValue = "NSValidationErrorValue"
    /// The predicate that failed validation (`NSValidationPredicateErrorKey`), as the
    /// ``FormatPredicate`` it is (Core Data's holds an `NSPredicate`): a validation
    /// predicate's, or the one Core Data keeps for a minimum, maximum, length or pattern
    /// (``ValidationFailure/predicate``). Absent for other failures.
    public static let validationPredicate = "NSValidationErrorPredicate"
    /// The individual errors of a multiple-errors error, as `[NSError]` (`NSDetailedErrorsKey`).
    public static let detailedErrors = "NSDetailedErrors"
    /// The conflicts of a merge-conflict or constraint-conflict error
    /// (`NSPersistentStoreSaveConflictsErrorKey`).
    public static let saveConflicts = "conflictList"
}

extension ValidationFailure: LocalizedError, CustomNSError {
    /// Core Data's errors are Cocoa errors: `NSCocoaErrorDomain`.
    public static var errorDomain: String { NSCocoaErrorDomain }
    /// The validation code (1550–1680), as Core Data's `NSError.code`.
    public var errorCode: Int { code.rawValue }
    /// The description, the key, the value and the object's URI, under Core Data's keys.
    public var errorUserInfo: [String: Any] {
        var info: [String: Any] = [NSLocalizedDescriptionKey: description, ErrorUserInfoKey.validationKey: key]
        if let value { info[ErrorUserInfoKey.validationValue] = value.anyValue }
        else if let destinations { info[ErrorUserInfoKey.validationValue] = destinations }
        if let object { info[ErrorUserInfoKey.validationObject] = object }
        if let predicate = predicate?.predicate { info[ErrorUserInfoKey.validationPredicate] = predicate }
        return info
    }
    /// The description (`localizedDescription`), naming entity, key and object.
    public var errorDescription: String? { description }
}

extension ValidationError: LocalizedError, CustomNSError {
    /// Core Data's errors are Cocoa errors: `NSCocoaErrorDomain`.
    public static var errorDomain: String { NSCocoaErrorDomain }
    /// The single failure's code, or 1560 for several.
    public var errorCode: Int { code.rawValue }
    /// A single failure's entries; for several, their `NSError`s under
    /// ``ErrorUserInfoKey/detailedErrors``.
    public var errorUserInfo: [String: Any] {
        if failures.count == 1 { return failures[0].errorUserInfo }
        return [NSLocalizedDescriptionKey: description, ErrorUserInfoKey.detailedErrors: failures.map { $0 as NSError }]
    }
    /// The failures' descriptions, one a line (`localizedDescription`).
    public var errorDescription: String? { description }
}
