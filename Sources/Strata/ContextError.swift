import Foundation
public import StrataModel
import StrataLog
import StrataStorage

/// Why a context operation failed (Core Data's `NSError`s in the Cocoa domain, with codes).
public enum ContextError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Save validation failed: every failure, each naming object (its URI,
    /// ``ValidationFailure/object``), key and value (codes 1550–1680, 1600 delete denied;
    /// ``code`` is 1560 when there are several).
    case validation([ValidationFailure])
    /// The store refused the save (a uniqueness constraint, a reference to a missing object).
    case storeRefused(String)
    /// A fault couldn't be fulfilled: the object was deleted from the store (Core Data's 133000).
    case objectNotFound(String)
    /// Undo of saved work would overwrite a newer change by another writer. `found` is what
    /// the store holds; in a child context undoing or redoing work it pushed, what its parent
    /// context holds, ending in ``parentContextHolds`` (the message then names the parent).
    case undoConflict(object: String, property: String, expected: String, found: String)
    /// The save found objects another writer changed since the context read them, and the
    /// merge policy (``MergePolicy``, default ``StandardMergePolicy/error``) refused to
    /// resolve them: every conflict, with versions and each property's base, ours and theirs
    /// (Core Data's `NSManagedObjectMergeError`, 133020). Nothing was written.
    case mergeConflicts([MergeConflict])
    /// The save would break uniqueness constraints and the merge policy refused to resolve
    /// them (`NSManagedObjectConstraintMergeError`, 133021). Nothing was written.
    case constraintConflicts([ConstraintConflict])
    /// The coordinator has no store.
    case noPersistentStore
    /// The coordinator has a store already.
    case storeAlreadyAdded(String)
    /// An unknown entity name.
    case unknownEntity(String)
    /// An unknown property name for an entity.
    case unknownKey(entity: String, key: String)
    /// A fetch request that can't run, with the part at fault (`"predicate"`,
    /// `"sort descriptor 2 (lastName)"`) and why: a key path naming no property of its
    /// entity, a comparison of an attribute with a constant of another type, a substitution
    /// variable without a value. Core Data raises `NSInvalidArgumentException` for these;
    /// Strata throws, with code 134060 (`NSCoreDataError`), at fetch time.
    case invalidFetchRequest(part: String, reason: String)
    /// An object used with a context it doesn't belong to, or a deleted object used.
    case invalidObject(String)
    /// A bad argument.
    case invalidArgument(String)
    /// The store couldn't be read or written, or gave up: `message` says what failed and
    /// why. For a failure of a layer under the context — the event log's (``LogError``: a
    /// damaged or missing segment file, a damaged record, a read-only store), LMDB's
    /// (``LMDBError``: a data file deleted while open, an I/O error) or zstd's — the message
    /// ends with the layer's own text, which names the file (and the frame or the event),
    /// and `underlying` keeps the layer's error itself (also `NSUnderlyingErrorKey` as
    /// `NSError`, as ``HistoryError/store(_:underlying:)``'s; spec 0006 §8.3). It is nil
    /// when no layer's error is behind the failure (a batch insert whose commit gave an
    /// object no ID, a uniqueness index naming an object the store doesn't hold). Unlike
    /// ``HistoryError/store(_:underlying:)``'s first value (what failed, the layer's text
    /// added by its description), `message` is the whole text. Code 256. Before session 32
    /// only the layer's text was kept.
    case store(String, underlying: StoreFailure? = nil)

    /// `body`'s result; a failure of the layers under the context — the event log's
    /// (`LogError`: a damaged or missing segment file, a damaged record), LMDB's
    /// (`LMDBError`: a data file deleted while open, an I/O error) or zstd's — thrown as
    /// ``store(_:underlying:)`` (256): `failure`, a colon, and the layer's own text, which
    /// names the file (and the frame or the event), with the layer's error as `underlying`.
    /// Core Data wraps a store's error in the context's; before session 31 only a save's
    /// commit did (spec 0006 §8.3): a fetch, a fault, a revert, an undo or a merge that
    /// needed a damaged segment let `LogError` through. `failure` is made only when
    /// something failed: fetches and faults (100,000 a second) don't pay for the text.
    @inline(__always)
    static func wrappingStoreFailures<T>(_ failure: @autoclosure () -> String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as LogError {
            throw ContextError.store("\(failure()): \(error.description)", underlying: .log(error))
        } catch let error as LMDBError {
            throw ContextError.store("\(failure()): \(error.description)", underlying: .lmdb(error))
        } catch let error as ZstdError {
            throw ContextError.store("\(failure()): \(error.description)", underlying: .zstd(error))
        }
    }

    /// `error` as a context error: itself when it is one, otherwise ``store(_:underlying:)``
    /// with `message` (by default the error's text), keeping a layer's error as `underlying`.
    static func wrapping(_ error: any Error, _ message: @autoclosure () -> String? = nil) -> ContextError {
        if let error = error as? ContextError { return error }
        return .store(message() ?? "\(error)", underlying: StoreFailure(error))
    }

    /// The end of an ``undoConflict(object:property:expected:found:)``'s `found` when the
    /// value was found in a child context's parent, not in the store: `" (in the parent context)"`.
    public static let parentContextHolds = " (in the parent context)"

    /// Core Data's error code for the case.
    public var code: Int {
        switch self {
        case .validation(let failures): failures.count == 1 ? failures[0].code.rawValue : 1560
        case .storeRefused: 133021
        case .objectNotFound: 133000
        case .undoConflict, .mergeConflicts: 133020
        case .constraintConflicts: 133021
        case .noPersistentStore, .invalidFetchRequest: 134060
        case .storeAlreadyAdded, .invalidArgument, .invalidObject, .unknownEntity, .unknownKey: 134030
        case .store: 256
        }
    }

    /// What went wrong, naming the objects and keys.
    public var description: String {
        switch self {
        case .validation(let failures):
            failures.count == 1
                ? failures[0].description
                : "\(failures.count) validation errors (1560):\n" + failures.map { "  \($0)" }.joined(separator: "\n")
        case .storeRefused(let detail): "the store refused the save: \(detail)"
        case .objectNotFound(let object): "the object \(object) could not be found in the store; it was deleted (133000)"
        case .undoConflict(let object, let property, let expected, let found) where found.hasSuffix(Self.parentContextHolds):
            // A child's check found the value in its parent context (its store, spec 0006 §18),
            // not in the store: before session 30 the message said "the store holds".
            "undo conflict on \(object).\(property): undo expected \(expected) but the parent context holds \(found.dropLast(Self.parentContextHolds.count)), set there later by a change not on this undo stack (the parent's own, one merged into it, or another child's push); nothing was overwritten. An undo or redo refused so stays on top of its stack and is refused again, never skipped, until the parent context holds the expected value again; removeAllUndoActions() drops the undo and redo stacks to go on"
        case .undoConflict(let object, let property, let expected, let found):
            "undo conflict on \(object).\(property): undo expected \(expected) but the store holds \(found), written later by a change not on this undo stack (another context's, or one made with undo registration disabled); nothing was overwritten. An undo or redo refused so stays on top of its stack and is refused again, never skipped, until the store holds the expected value again; removeAllUndoActions() drops the undo and redo stacks to go on"
        case .mergeConflicts(let conflicts):
            "the save found \(conflicts.count) object(s) changed by another writer since this context read them (133020); nothing was written:\n"
                + conflicts.map { "  \($0)" }.joined(separator: "\n")
        case .constraintConflicts(let conflicts):
            "the save would break \(conflicts.count) uniqueness constraint(s) (133021); nothing was written:\n"
                + conflicts.map { "  \($0)" }.joined(separator: "\n")
        case .noPersistentStore: "the coordinator has no persistent store"
        case .storeAlreadyAdded(let store): "the coordinator already has a store: \(store)"
        case .unknownEntity(let name): "unknown entity \"\(name)\""
        case .unknownKey(let entity, let key): "entity \(entity) has no property \"\(key)\""
        case .invalidFetchRequest(let part, let reason): "\(part): \(reason)"
        case .invalidObject(let detail): detail
        case .invalidArgument(let detail): detail
        case .store(let message, _): message
        }
    }
}
