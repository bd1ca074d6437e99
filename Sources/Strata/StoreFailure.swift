import Foundation
public import StrataLog
public import StrataStorage

/// The error of a layer under the context and history APIs — the event log's, LMDB's or
/// zstd's — that ``ContextError/store(_:underlying:)`` and
/// ``HistoryError/store(_:underlying:)`` keep (specs 0006 §8.3, 0009 §2): the app reads it
/// as the case's `underlying`, or as `NSUnderlyingErrorKey` of the bridged `NSError`, as a
/// Core Data app reads the store's error under a context's. Before session 32 only the
/// history API's store error kept it (as `HistoryError.StoreFailure`, still a name for this
/// type); the context's kept only the layer's text.
public enum StoreFailure: Sendable, Hashable, CustomStringConvertible {
    /// The event log's: a damaged or missing segment file, a damaged event or record,
    /// a read-only store, a concurrent compaction.
    case log(LogError)
    /// LMDB's.
    case lmdb(LMDBError)
    /// zstd's.
    case zstd(ZstdError)

    /// `error` as a store failure, or nil when it is none of the layers' errors.
    public init?(_ error: any Error) {
        switch error {
        case let error as LogError: self = .log(error)
        case let error as LMDBError: self = .lmdb(error)
        case let error as ZstdError: self = .zstd(error)
        default: return nil
        }
    }

    /// The error itself.
    public var error: any Error {
        switch self {
        case .log(let error): error
        case .lmdb(let error): error
        case .zstd(let error): error
        }
    }

    /// The layer's own text, naming the file and the frame or the event.
    public var description: String {
        switch self {
        case .log(let error): error.description
        case .lmdb(let error): error.description
        case .zstd(let error): error.description
        }
    }

    /// What goes under `NSUnderlyingErrorKey`: the error's bridged domain and code, and its
    /// own text as `localizedDescription`.
    var underlyingNSError: NSError {
        let bridged = error as NSError
        return NSError(domain: bridged.domain, code: bridged.code, userInfo: [NSLocalizedDescriptionKey: description])
    }
}
