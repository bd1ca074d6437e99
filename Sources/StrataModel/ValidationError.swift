// MARK: - ValidationError

/// All the validation failures of one check, thrown together.
///
/// Corresponds to Core Data's `NSValidationMultipleErrorsError` (1560), whose
/// `NSDetailedErrorsKey` lists the individual errors; a single failure is still wrapped, so
/// callers handle one error type.
///
/// ```swift
/// do { try entity.validateValues(values, localization: model.localization) }
/// catch let error as ValidationError { error.failures.map(\.code) }
/// ```
public struct ValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The failures, in property order.
    public var failures: [ValidationFailure]

    /// Creates an error.
    ///
    /// ```swift
    /// ValidationError(failures: failures)
    /// ```
    public init(failures: [ValidationFailure]) { self.failures = failures }

    /// The failure's own code when there is one failure, else `1560` (multiple errors), as
    /// Core Data reports.
    ///
    /// ```swift
    /// error.code.rawValue  // 1560
    /// ```
    public var code: ValidationFailure.Code { failures.count == 1 ? failures[0].code : .multipleErrors }

    /// One line per failure.
    ///
    /// ```swift
    /// print(error)
    /// ```
    public var description: String { failures.map(\.description).joined(separator: "\n") }
}
