public import Foundation

extension HistoryError: LocalizedError, CustomNSError {
    /// Core Data's history errors are Cocoa errors: `NSCocoaErrorDomain`, so
    /// `(error as NSError).domain` and `.code` are what a Core Data app checks (134301,
    /// `NSPersistentHistoryTokenExpiredError`, for purged history). Before session 31 a
    /// `HistoryError` bridged with domain `Strata.HistoryError` and its case's index as the
    /// code (2 for purged history), so such a check never matched.
    public static var errorDomain: String { NSCocoaErrorDomain }

    /// ``code``: Core Data's number for the error.
    public var errorCode: Int { code }

    /// The description under `NSLocalizedDescriptionKey`; for a store failure also the
    /// layer's error under `NSUnderlyingErrorKey` (its bridged domain and code, its own text
    /// as `localizedDescription`).
    public var errorUserInfo: [String: Any] {
        var info: [String: Any] = [NSLocalizedDescriptionKey: description]
        if case .store(_, let underlying) = self { info[NSUnderlyingErrorKey] = underlying.underlyingNSError }
        return info
    }

    /// The description (`localizedDescription`): what went wrong, naming tokens and points.
    public var errorDescription: String? { description }
}
