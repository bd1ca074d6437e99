public import Foundation
import StrataModel

extension ContextError: LocalizedError, CustomNSError {
    /// Core Data's errors are Cocoa errors: `NSCocoaErrorDomain`, so `(error as NSError).domain`
    /// and `.code` are what a Core Data app checks.
    public static var errorDomain: String { NSCocoaErrorDomain }

    /// ``code``: Core Data's number for the error (1570, 1560, 133020, …).
    public var errorCode: Int { code }

    /// The description under `NSLocalizedDescriptionKey`; for a validation error the
    /// failure's key, value and object (one failure) or every failure's `NSError` under
    /// ``ErrorUserInfoKey/detailedErrors`` (several); for conflicts the conflicts under
    /// ``ErrorUserInfoKey/saveConflicts``; for a store error with a layer's error behind it
    /// (``ContextError/store(_:underlying:)``) that error under `NSUnderlyingErrorKey` (its
    /// bridged domain and code, its own text as `localizedDescription`), as Core Data puts a
    /// store's error under a context's.
    ///
    /// ```swift
    /// do { try context.save() } catch let error as NSError {
    ///     error.code                                                   // 1560
    ///     error.userInfo[ErrorUserInfoKey.detailedErrors] as? [NSError] // one per failure
    /// }
    /// ```
    public var errorUserInfo: [String: Any] {
        var info: [String: Any] = [NSLocalizedDescriptionKey: description]
        switch self {
        case .validation(let failures) where failures.count == 1:
            info.merge(failures[0].errorUserInfo) { _, failure in failure }
        case .validation(let failures):
            info[ErrorUserInfoKey.detailedErrors] = failures.map { $0 as NSError }
        case .mergeConflicts(let conflicts):
            info[ErrorUserInfoKey.saveConflicts] = conflicts
        case .constraintConflicts(let conflicts):
            info[ErrorUserInfoKey.saveConflicts] = conflicts
        case .store(_, let underlying?):
            info[NSUnderlyingErrorKey] = underlying.underlyingNSError
        default:
            break
        }
        return info
    }

    /// The description (`localizedDescription`): what was wrong and where.
    public var errorDescription: String? { description }
}
