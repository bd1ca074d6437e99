/// Why the event log refused an operation or a piece of data.
///
/// Every case says what was wrong and where: the object, the property, the sequence
/// number, the file. Refused commits write nothing.
public enum LogError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Bytes that don't decode: a damaged event, record, segment or manifest entry.
    case malformed(String)
    /// A checksum didn't match: the bytes changed after they were written.
    case checksumMismatch(String)
    /// Data written by a newer Strata; this build can't read it.
    case unsupportedFormatVersion(found: Int, supported: Int, context: String)
    /// A commit named an entity or property the model doesn't have.
    case unknownEntity(String)
    /// A commit named a property the entity doesn't have (or can't store).
    case unknownProperty(entity: String, property: String)
    /// A value of the wrong type for a property.
    case typeMismatch(entity: String, property: String, expected: String, got: String)
    /// A change named an object that doesn't exist.
    case objectNotFound(String)
    /// An insert named an object that already exists.
    case objectExists(String)
    /// A relationship points at an object that doesn't exist (or is deleted in the same commit).
    case missingReference(from: String, property: String, to: String)
    /// A uniqueness constraint would be violated; nothing was written.
    case uniquenessViolation(entity: String, properties: [String], value: String, objects: [String])
    /// A one-to-one relationship would have two objects naming the same destination (a
    /// writer that didn't know of the other's reference — another process's save); nothing
    /// was written.
    case oneToOneViolation(relationship: String, destination: String, objects: [String])
    /// An ordered to-many whose inverse is a to-one (a playlist's songs, `Song.playlist`)
    /// would hold `object` in two or more objects' lists (`holders`): its to-one can name one.
    /// A writer that didn't know of the other's list (the object's side is derived, so no
    /// version check sees it), or a draft that puts the object in a list without taking it
    /// out of the other. Nothing was written.
    case toOneInverseViolation(relationship: String, object: String, holders: [String], inverse: String)
    /// Optimistic locking: an object's version isn't the one the draft expected
    /// (``TransactionDraft/expectedVersions``); `found` is nil when the object is gone.
    /// Nothing was written.
    case versionMismatch(object: String, expected: UInt64, found: UInt64?)
    /// A change was recorded on the side of a relationship the log derives from its inverse.
    case derivedRelationshipSide(entity: String, property: String, recordedSide: String)
    /// A change set a derived attribute, whose value the log computes from `derivation` at
    /// commit (`Specs/0006-context-undo.md` §24). Nothing was written.
    case derivedAttribute(entity: String, property: String, derivation: String)
    /// A derived attribute's value couldn't be computed (it doesn't fit the attribute's type,
    /// or the model's derivation can't be resolved). Nothing was written.
    case derivation(String)
    /// A sequence number outside the log.
    case sequenceOutOfRange(requested: UInt64, head: UInt64)
    /// A segment file is missing or unreadable.
    case segment(String)
    /// The store directory doesn't hold a Strata store.
    case notAStore(String)
    /// The store's model and the one given don't fit (for example a different store's model).
    case modelMismatch(String)
    /// An operation the store's state forbids (such as writing to a read-only store).
    case invalidOperation(String)
    /// Sequence `requested` lies in history removed by a purge: events 1…`purgedThrough` are
    /// gone, and the earliest state the store can rebuild is its base snapshot as of
    /// `purgedThrough` (`Specs/0004-event-log.md` §7.6).
    case historyPurged(requested: UInt64, purgedThrough: UInt64)
    /// A writable open's model version can't take over the stored values: an attribute it
    /// makes mandatory (or adds) has no default value for objects without one, or a stored
    /// value doesn't convert to the attribute's new type without loss
    /// (`Specs/0004-event-log.md` §4.4). Nothing was written; the store opens as before with
    /// its earlier model.
    case migration(String)
    /// The store was moved to `path` (`PersistentStoreCoordinator.migratePersistentStore`)
    /// and this log of its old place takes no more writes: they would be lost with the old
    /// files. Nothing was written; write to the store at `path`.
    case storeMoved(from: String, to: String)

    /// A sentence naming what was wrong and where.
    public var description: String {
        switch self {
        case .malformed(let detail): "malformed data: \(detail)"
        case .checksumMismatch(let detail): "checksum mismatch: \(detail)"
        case .unsupportedFormatVersion(let found, let supported, let context):
            "\(context) has format version \(found), newer than this Strata reads (\(supported)); upgrade Strata"
        case .unknownEntity(let name): "unknown entity \"\(name)\""
        case .unknownProperty(let entity, let property): "entity \(entity) has no stored property \"\(property)\""
        case .typeMismatch(let entity, let property, let expected, let got):
            "\(entity).\(property) holds \(expected), not \(got)"
        case .objectNotFound(let object): "no object \(object) in the store"
        case .objectExists(let object): "object \(object) already exists"
        case .missingReference(let from, let property, let to):
            "\(from).\(property) refers to \(to), which is not in the store"
        case .uniquenessViolation(let entity, let properties, let value, let objects):
            "uniqueness constraint (\(properties.joined(separator: ", "))) of \(entity) violated by value \(value): objects \(objects.joined(separator: ", "))"
        case .oneToOneViolation(let relationship, let destination, let objects):
            "one-to-one relationship \(relationship) would name \(destination) from \(objects.count) objects (\(objects.joined(separator: ", "))): one may, so another writer's change must be taken in first"
        case .toOneInverseViolation(let relationship, let object, let holders, let inverse):
            "\(relationship) would hold \(object) in \(holders.count) objects' lists (\(holders.joined(separator: ", "))), but its inverse \(inverse) is a to-one: one object may hold it, so a transaction that puts it in one list must take it out of the other (another writer's change must be taken in first)"
        case .versionMismatch(let object, let expected, let found):
            "\(object) changed since version \(expected): it is now " + (found.map { "version \($0)" } ?? "deleted")
        case .derivedRelationshipSide(let entity, let property, let recordedSide):
            "\(entity).\(property) is derived from its inverse \(recordedSide); record the change there"
        case .derivedAttribute(let entity, let property, let derivation):
            "\(entity).\(property) is a derived attribute (derivation \(derivation)): the store computes its value at save; it can't be set"
        case .derivation(let detail): "derived attribute: \(detail)"
        case .sequenceOutOfRange(let requested, let head): "sequence \(requested) is past the head (\(head))"
        case .segment(let detail): "segment: \(detail)"
        case .notAStore(let path): "no Strata store at \(path)"
        case .modelMismatch(let detail): "model mismatch: \(detail)"
        case .invalidOperation(let detail): detail
        case .migration(let detail): "migration: \(detail)"
        case .storeMoved(let from, let to):
            "the store at \(from) was moved to \(to), and its old place takes no more writes; nothing was written (write to the store at \(to))"
        case .historyPurged(let requested, let purgedThrough):
            "sequence \(requested) was purged: history through \(purgedThrough) was removed, and the earliest state kept is as of \(purgedThrough)"
        }
    }
}
