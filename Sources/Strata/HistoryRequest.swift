public import Foundation
public import StrataLog
public import StrataPredicate

/// What history to read (Core Data's `NSPersistentHistoryChangeRequest`): every condition
/// set must hold. Run it with ``PersistentStoreCoordinator/history(_:)`` (or
/// ``ManagedObjectContext/fetchHistory(_:)``), or follow it live with
/// ``PersistentStoreCoordinator/historyFeed(_:)``.
///
/// ```swift
/// try coordinator.history(.after(lastToken))                           // what's new
/// try coordinator.history(.object(player.objectID))                    // one object's audit trail
/// var request = HistoryRequest.entity("Player")
/// request.author = "importer"
/// request.afterDate = yesterday
/// request.fetchLimit = 100
/// try coordinator.history(request)
/// ```
///
/// Object and entity conditions select **changes**: a transaction is returned with only the
/// changes they select, and only if it has one. The other conditions select transactions.
public struct HistoryRequest: Sendable, Hashable {
    /// Only transactions after this point (`fetchHistory(after: token)`). A token below a
    /// purge point throws ``HistoryError/historyPurged(_:)``.
    public var afterToken: HistoryToken?
    /// Only transactions committed after this date (`fetchHistory(after: date)`).
    /// Timestamps come from the committing process's clock and are not guaranteed to grow
    /// with the sequence, so every transaction in range is considered (only its header is
    /// read unless it matches).
    public var afterDate: Date?
    /// Only transactions with these sequence numbers. A range starting at or below a purge
    /// point throws ``HistoryError/historyPurged(_:)``.
    public var sequenceRange: ClosedRange<UInt64>?
    /// Only changes to this object (read through the store's per-object history index, not
    /// by scanning the log).
    public var objectID: ManagedObjectID?
    /// Only changes to objects of this entity (and of its sub-entities when
    /// ``includesSubentities``).
    public var entityName: String?
    /// Whether ``entityName`` includes sub-entities (default true, as in fetch requests).
    public var includesSubentities = true
    /// Only transactions by this author (`transactionAuthor`).
    public var author: String?
    /// Only transactions saved by the context with this name.
    public var contextName: String?
    /// At most this many transactions, oldest first (0: no limit; `fetchLimit`).
    public var fetchLimit = 0
    /// Only transactions this predicate accepts (Core Data's request `fetchRequest`, made from
    /// `NSPersistentHistoryTransaction.fetchRequest` with a predicate), evaluated on each
    /// transaction's header — so transactions it rejects are never decoded. Its keys:
    /// `author` and `contextName` (strings, nil when not set), `timestamp` (a date),
    /// `processID` and `transactionNumber` (the sequence; integers) and `storeID` (the store
    /// UUID's string). Another key is an ``HistoryError/invalidRequest(_:)``.
    ///
    /// ```swift
    /// var request = HistoryRequest.after(lastToken)
    /// request.transactionPredicate = try FormatPredicate(format: "author != %@", "app")   // others' changes
    /// ```
    public var transactionPredicate: FormatPredicate?

    /// Only changes this predicate accepts (Core Data's request `fetchRequest` made from
    /// `NSPersistentHistoryChange.fetchRequest` with a predicate): like the object and entity
    /// conditions it selects **changes** — a transaction is returned with only those it
    /// accepts, and only if it accepts one. Its keys: `changedObjectID` (a
    /// ``ManagedObjectID``), `changeType` (Core Data's `NSPersistentHistoryChangeType` raw
    /// values: 0 insert, 1 update, 2 delete), `changedEntity` (the entity's name),
    /// `updatedProperties` (the names of the properties the change touched,
    /// ``HistoryChange/changedProperties``) and `groupIndex`. Another key is an
    /// ``HistoryError/invalidRequest(_:)``.
    ///
    /// ```swift
    /// request.changePredicate = try FormatPredicate(format: "changeType == 1 AND updatedProperties CONTAINS 'score'")
    /// ```
    public var changePredicate: FormatPredicate?

    /// The keys ``changePredicate`` reads.
    public static let changePredicateKeys = ["changedObjectID", "changeType", "changedEntity", "updatedProperties", "groupIndex"]

    /// A change as ``changePredicate`` sees it: its values by key.
    public static func changePredicateValues(of change: HistoryChange) -> [String: Any] {
        let type = switch change.changeType {
        case .insert: 0
        case .update: 1
        case .delete: 2
        }
        return [
            "changedObjectID": change.changedObjectID, "changeType": type, "changedEntity": change.entityName,
            "updatedProperties": change.propertyChanges.map(\.property), "groupIndex": change.groupIndex,
        ]
    }

    /// Throws ``HistoryError/invalidRequest(_:)`` when `predicate` reads a key a change
    /// doesn't have (``changePredicateKeys``), or throws when evaluated on a sample change.
    static func validateChangePredicate(_ predicate: FormatPredicate, sample id: ManagedObjectID) throws {
        var paths: [FormatKeyPath] = []
        FetchedResultsController.collectKeyPaths(in: predicate.node, into: &paths)
        for path in paths {
            guard case .key(let key)? = path.components.first, changePredicateKeys.contains(key) else {
                throw HistoryError.invalidRequest(
                    "the change predicate (\(predicate)) reads \(path), which a change doesn't have; its keys are \(changePredicateKeys.joined(separator: ", "))")
            }
        }
        let sample = HistoryChange(
            changedObjectID: id, changeType: .update, propertyChanges: [], groupIndex: 0, actionName: nil, groupOrigin: nil, tombstone: nil)
        do {
            _ = try predicate.evaluate(with: changePredicateValues(of: sample))
        } catch {
            throw HistoryError.invalidRequest("the change predicate (\(predicate)) can't be evaluated on a change: \(error)")
        }
    }

    /// The keys ``transactionPredicate`` reads, in the order documented there.
    public static let transactionPredicateKeys = ["author", "contextName", "timestamp", "processID", "transactionNumber", "storeID"]

    /// A transaction's header as ``transactionPredicate`` sees it: its values by key (no key
    /// for a nil author or context name).
    public static func transactionPredicateValues(of header: EventHeader, storeIdentifier: UUID) -> [String: Any] {
        var keys: [String: Any] = [
            "timestamp": header.timestamp, "processID": Int(header.processID), "transactionNumber": Int64(clamping: header.sequence),
            "storeID": storeIdentifier.uuidString,
        ]
        if let author = header.author { keys["author"] = author }
        if let contextName = header.contextName { keys["contextName"] = contextName }
        return keys
    }

    /// Throws ``HistoryError/invalidRequest(_:)`` when `predicate` reads a key a transaction
    /// doesn't have (``transactionPredicateKeys``), or throws when evaluated on a sample
    /// transaction (an invalid `MATCHES` pattern, arithmetic on a string).
    public static func validateTransactionPredicate(_ predicate: FormatPredicate) throws {
        var paths: [FormatKeyPath] = []
        FetchedResultsController.collectKeyPaths(in: predicate.node, into: &paths)
        for path in paths {
            guard case .key(let key)? = path.components.first, transactionPredicateKeys.contains(key) else {
                throw HistoryError.invalidRequest(
                    "the transaction predicate (\(predicate)) reads \(path), which a transaction doesn't have; its keys are \(transactionPredicateKeys.joined(separator: ", "))")
            }
        }
        // A key compared with a constant of another type (`timestamp > "2026-01-01"`, a date
        // with a string) matches no transaction, and would pass the sample below unnoticed:
        // checked as a fetch checks an attribute's comparisons, on an entity of the keys.
        if let header = transactionHeaderEntity,
            let problem = FetchValidator(model: header.model, entity: header.entity, variables: [:]).problem(in: predicate.node)
        {
            throw HistoryError.invalidRequest(
                "the transaction predicate (\(predicate)) can't match any transaction: \(problem)")
        }
        let sample = EventHeader(sequence: 1, timestamp: Date(), author: "", contextName: "", processID: 0)
        do {
            _ = try predicate.evaluate(with: transactionPredicateValues(of: sample, storeIdentifier: UUID()))
        } catch {
            throw HistoryError.invalidRequest("the transaction predicate (\(predicate)) can't be evaluated on a transaction: \(error)")
        }
    }

    /// ``transactionPredicateKeys`` as the attributes of an entity, with the types
    /// ``transactionPredicateValues(of:storeIdentifier:)`` gives them, for checking a
    /// predicate's comparisons (nil only if the model could not be built).
    private static let transactionHeaderEntity: (model: ManagedObjectModel, entity: EntityDescription)? = {
        guard
            let model = try? ManagedObjectModel({
                Entity("Transaction") {
                    Attribute("author", .string)
                    Attribute("contextName", .string)
                    Attribute("timestamp", .date)
                    Attribute("processID", .int64)
                    Attribute("transactionNumber", .int64)
                    Attribute("storeID", .string)
                }
            }), let entity = model.entity(named: "Transaction")
        else { return nil }
        return (model, entity)
    }()

    /// Every transaction the store keeps.
    public init() {}

    /// Transactions after `token` (nil: from the start of the history the store keeps).
    public static func after(_ token: HistoryToken?) -> HistoryRequest {
        var request = HistoryRequest()
        request.afterToken = token
        return request
    }

    /// Transactions committed after `date`.
    public static func after(_ date: Date) -> HistoryRequest {
        var request = HistoryRequest()
        request.afterDate = date
        return request
    }

    /// Transactions `range` (sequence numbers).
    public static func sequences(_ range: ClosedRange<UInt64>) -> HistoryRequest {
        var request = HistoryRequest()
        request.sequenceRange = range
        return request
    }

    /// One object's changes.
    public static func object(_ id: ManagedObjectID) -> HistoryRequest {
        var request = HistoryRequest()
        request.objectID = id
        return request
    }

    /// Changes to objects of `entity` (and its sub-entities unless told not to).
    public static func entity(_ entity: String, includesSubentities: Bool = true) -> HistoryRequest {
        var request = HistoryRequest()
        request.entityName = entity
        request.includesSubentities = includesSubentities
        return request
    }

    /// Transactions by `author`.
    public static func author(_ author: String) -> HistoryRequest {
        var request = HistoryRequest()
        request.author = author
        return request
    }

    /// This request with at most `limit` transactions.
    public func limited(to limit: Int) -> HistoryRequest {
        var request = self
        request.fetchLimit = limit
        return request
    }
}

// MARK: - Running requests

/// A request checked against one store: sequence bounds and the filters as closures.
struct ResolvedHistoryRequest {
    /// The last sequence before the first wanted (the feed's starting cursor).
    var after: UInt64
    /// The last sequence wanted (nil: no end).
    var through: UInt64?
    var objectID: StoredObjectID?
    var entities: Set<String>?
    var afterDate: Date?
    var author: String?
    var contextName: String?
    var limit: Int
    /// ``HistoryRequest/transactionPredicate``, and the store's UUID it reads as `storeID`.
    var predicate: (FormatPredicate, storeID: UUID)?
    /// ``HistoryRequest/changePredicate``.
    var changePredicate: FormatPredicate?

    /// `transaction` with only the changes ``changePredicate`` accepts (all without one); nil
    /// when it accepts none.
    func selecting(_ transaction: HistoryTransaction) -> HistoryTransaction? {
        guard let changePredicate else { return transaction }
        // Checked against a sample change when the request was resolved: a predicate that
        // fails to evaluate here rejects the change.
        let changes = transaction.changes.filter {
            (try? changePredicate.evaluate(with: HistoryRequest.changePredicateValues(of: $0))) ?? false
        }
        if changes.isEmpty { return nil }
        return HistoryTransaction(
            token: transaction.token, timestamp: transaction.timestamp, author: transaction.author,
            contextName: transaction.contextName, processID: transaction.processID, kind: transaction.kind,
            modelVersion: transaction.modelVersion, changes: changes)
    }

    /// Whether a header passes the transaction-level conditions.
    func accepts(_ header: EventHeader) -> Bool {
        if let afterDate, header.timestamp <= afterDate { return false }
        if let author, header.author != author { return false }
        if let contextName, header.contextName != contextName { return false }
        if let (predicate, storeID) = predicate {
            // Checked against a sample header when the request was resolved: a predicate
            // that fails to evaluate here rejects the transaction.
            return (try? predicate.evaluate(with: HistoryRequest.transactionPredicateValues(of: header, storeIdentifier: storeID))) ?? false
        }
        return true
    }

    var hasHeaderFilter: Bool { afterDate != nil || author != nil || contextName != nil || predicate != nil }

    /// The change filter, if any.
    var keep: ((StoredObjectID) -> Bool)? {
        // Every condition that is set must hold: an object and an entity together keep the
        // object's changes only if it is of the entity.
        if let objectID {
            if let entities, !entities.contains(objectID.entity) { return { _ in false } }
            return { $0 == objectID }
        }
        if let entities { return { entities.contains($0.entity) } }
        return nil
    }
}

extension PersistentStore {
    /// Checks `token` belongs to this store and is not past `head`.
    func check(_ token: HistoryToken, head: UInt64) throws {
        guard token.storeIdentifier == identifier else { throw HistoryError.foreignToken(token, storeIdentifier: identifier) }
        guard token.sequence <= head else { throw HistoryError.tokenAheadOfStore(token, head: head) }
    }

    /// The typed error for a read that needed history after `requested`, purged through
    /// `purgedThrough`, with who purged and when from the newest purge marker.
    func purgedError(requested: UInt64, purgedThrough: UInt64, _ reader: borrowing LogReader) -> HistoryError {
        let marker = try? reader.purgeMarker
        let event = marker.flatMap { $0 > 0 ? try? reader.event($0) : nil }
        func token(_ sequence: UInt64) -> HistoryToken { HistoryToken(storeIdentifier: identifier, sequence: sequence) }
        return .historyPurged(
            PurgedHistory(
                requested: token(requested), restartToken: token(purgedThrough), markerToken: event.map { token($0.sequence) },
                purgedBy: event?.author, purgedAt: event?.timestamp))
    }

    /// Resolves `request` against the snapshot `reader` reads.
    func resolve(_ request: HistoryRequest, _ reader: borrowing LogReader) throws -> ResolvedHistoryRequest {
        let head = try reader.head
        let purged = try reader.purgedThrough
        guard request.fetchLimit >= 0 else { throw HistoryError.invalidRequest("fetchLimit is \(request.fetchLimit); use 0 for no limit") }
        var resolved = ResolvedHistoryRequest(
            after: purged, through: nil, objectID: nil, entities: nil, afterDate: request.afterDate, author: request.author,
            contextName: request.contextName, limit: request.fetchLimit)
        if let predicate = request.transactionPredicate {
            try HistoryRequest.validateTransactionPredicate(predicate)
            resolved.predicate = (predicate, identifier)
        }
        if let predicate = request.changePredicate {
            let sample = ManagedObjectID.permanent(StoredObjectID(entity: log.model.entities.first?.name ?? "Entity", primaryKey: 1), store: identifier)
            try HistoryRequest.validateChangePredicate(predicate, sample: sample)
            resolved.changePredicate = predicate
        }
        if let token = request.afterToken {
            try check(token, head: head)
            if token.sequence < purged { throw purgedError(requested: token.sequence, purgedThrough: purged, reader) }
            resolved.after = max(resolved.after, token.sequence)
        }
        if let range = request.sequenceRange {
            let lower = max(range.lowerBound, 1)
            if lower <= purged { throw purgedError(requested: lower - 1, purgedThrough: purged, reader) }
            resolved.after = max(resolved.after, lower - 1)
            resolved.through = range.upperBound
        }
        if let id = request.objectID {
            guard case .permanent(let store, _) = id.storage, let stored = id.storedID else {
                throw HistoryError.invalidRequest("\(id) is a temporary ID; only saved objects have history")
            }
            guard store == identifier else {
                throw HistoryError.invalidRequest("\(id) is an object of store \(store.uuidString), not of this store (\(identifier.uuidString))")
            }
            guard log.model.entity(named: id.entityName) != nil else {
                throw HistoryError.invalidRequest("the store's model has no entity \(id.entityName)")
            }
            resolved.objectID = stored
        }
        if let entity = request.entityName {
            guard log.model.entity(named: entity) != nil else {
                throw HistoryError.invalidRequest(
                    "the store's model has no entity \(entity) (entities: \(log.model.entities.map(\.name).sorted().joined(separator: ", ")))")
            }
            resolved.entities = Set(request.includesSubentities ? log.model.selfAndSubentityNames(of: entity) : [entity])
        }
        return resolved
    }

    /// Reads the transactions `resolved` selects from `reader`'s snapshot, after
    /// `resolved.after`, through `upTo` (or the head), at most `maximum` (0: no limit).
    /// Returns them and the last sequence examined.
    func transactions(
        _ resolved: ResolvedHistoryRequest, upTo: UInt64? = nil, maximum: Int, _ reader: borrowing LogReader
    ) throws -> (transactions: [HistoryTransaction], examinedThrough: UInt64) {
        let head = try reader.head
        let purged = try reader.purgedThrough
        if resolved.after < purged { throw purgedError(requested: resolved.after, purgedThrough: purged, reader) }
        let last = min(upTo ?? head, resolved.through ?? .max, head)
        guard last > resolved.after else { return ([], resolved.after) }
        let converter = HistoryConverter(store: identifier, model: log.model)
        let keep = resolved.keep
        var result: [HistoryTransaction] = []
        var examined = resolved.after
        // The per-object history index gives the transactions that touched the object, or
        // the entities' objects: only those events are read, together, so a segment frame
        // holding several of them is decompressed once. For entities, only while the index
        // has fewer of their rows than there are events in the range (else every event is
        // read, as without the condition); a short range is read directly.
        var touching: [UInt64]?
        if let objectID = resolved.objectID {
            touching = try reader.history(of: objectID).filter { $0 > resolved.after && $0 <= last }
        } else if let entities = resolved.entities, last - resolved.after >= 64 {
            let events = Int(clamping: last - resolved.after)
            touching = try reader.history(ofEntities: entities, after: resolved.after, through: last, budget: events)
        }
        if let touching {
            var full = false
            try reader.forEachEvent(among: touching) { event in
                examined = event.sequence
                let header = EventHeader(
                    sequence: event.sequence, timestamp: event.timestamp, author: event.author, contextName: event.contextName,
                    processID: event.processID)
                guard resolved.accepts(header), let converted = converter.transaction(event, keep: keep),
                    let transaction = resolved.selecting(converted)
                else { return .next }
                result.append(transaction)
                if maximum > 0 && result.count >= maximum {
                    full = true
                    return .stop
                }
                return .next
            }
            return (result, full ? examined : last)
        }
        func take(_ event: TransactionEvent) -> IterationDecision {
            examined = event.sequence
            if let converted = converter.transaction(event, keep: keep), let transaction = resolved.selecting(converted) {
                result.append(transaction)
                if maximum > 0 && result.count >= maximum { return .stop }
            }
            return .next
        }
        if let author = resolved.author, let contextName = resolved.contextName {
            // One context's transactions: listed by the log's per-context index, so the other
            // events aren't read (spec 0004 §6.4).
            try reader.forEachTransaction(author: author, contextName: contextName, from: resolved.after + 1, through: last) { event in
                let header = EventHeader(
                    sequence: event.sequence, timestamp: event.timestamp, author: event.author, contextName: event.contextName,
                    processID: event.processID)
                return resolved.accepts(header) ? take(event) : .next
            }
        } else {
            let filter: ((EventHeader) -> Bool)? = resolved.hasHeaderFilter ? { resolved.accepts($0) } : nil
            try reader.forEachEvent(from: resolved.after + 1, through: last, where: filter, take)
        }
        if maximum > 0 && result.count >= maximum { return (result, examined) }
        return (result, last)
    }

    /// The token just after the newest transaction.
    func currentToken() throws -> HistoryToken {
        HistoryToken(storeIdentifier: identifier, sequence: try log.head)
    }
}

extension PersistentStoreCoordinator {
    /// The point just after the newest transaction (Core Data's
    /// `currentPersistentHistoryToken(fromStores:)`).
    ///
    /// - Throws: ``ContextError/noPersistentStore`` without a store;
    ///   ``HistoryError/store(_:underlying:)`` when the head can't be read.
    public func currentHistoryToken() throws -> HistoryToken {
        let store = try requireStore()
        return try HistoryError.wrappingStoreFailures("reading the store's head failed") { try store.currentToken() }
    }

    /// The transactions `request` selects, oldest first, read from one consistent snapshot
    /// (raw and compacted history alike).
    ///
    /// - Throws: ``HistoryError`` — a foreign token or object, a token past the head, an
    ///   unknown entity, history purged below the requested point;
    ///   ``HistoryError/store(_:underlying:)`` (256) for a damaged log (a compacted segment
    ///   file damaged or missing, a damaged event), naming the file and the frame or the
    ///   event, with the log's error as the underlying one.
    public func history(_ request: HistoryRequest) throws -> [HistoryTransaction] {
        let store = try requireStore()
        return try HistoryError.wrappingStoreFailures("reading the history failed") {
            try store.log.read { reader in
                let resolved = try store.resolve(request, reader)
                return try store.transactions(resolved, maximum: resolved.limit, reader).transactions
            }
        }
    }

    /// The state of the whole store at `token` — the restart point a
    /// ``HistoryError/historyPurged(_:)`` names, or any later point.
    ///
    /// - Throws: ``HistoryError`` for a foreign token, a token past the head, or one below
    ///   the purge point; ``HistoryError/store(_:underlying:)`` for a damaged log.
    public func historySnapshot(at token: HistoryToken) throws -> HistorySnapshot {
        let store = try requireStore()
        return try HistoryError.wrappingStoreFailures("reading the history snapshot at \(token.sequence) failed") {
            try snapshot(at: token, in: store)
        }
    }

    private func snapshot(at token: HistoryToken, in store: PersistentStore) throws -> HistorySnapshot {
        try store.log.read { reader in
            try store.check(token, head: try reader.head)
            let purged = try reader.purgedThrough
            if token.sequence < purged { throw store.purgedError(requested: token.sequence, purgedThrough: purged, reader) }
            let image = try reader.state(asOf: token.sequence)
            let converter = HistoryConverter(store: store.identifier)
            var objects: [ManagedObjectID: [String: HistoryValue]] = [:]
            objects.reserveCapacity(image.objects.count)
            for (id, values) in image.objects {
                objects[converter.objectID(id)] = values.mapValues(converter.value)
            }
            return HistorySnapshot(token: token, objects: objects)
        }
    }

    /// Removes the history before `token` for good — every transaction through
    /// `token.sequence` — keeping the state at `token` as the store's base snapshot, and
    /// appends a purge marker transaction saying who (`author`, `contextName`) purged what
    /// and when (`Specs/0009-history.md` §7; Core Data's `deleteHistory(before:)`).
    /// Consumers behind the point get ``HistoryError/historyPurged(_:)`` with `token` as the
    /// restart point.
    ///
    /// - Throws: ``HistoryError`` for a foreign token or one past the head;
    ///   ``HistoryError/store(_:underlying:)`` for a read-only store, a concurrent compaction
    ///   or a damaged log (the log's error underlying it).
    @discardableResult
    public func purgeHistory(before token: HistoryToken, author: String, contextName: String? = nil) throws -> PurgeReport {
        try HistoryError.wrappingStoreFailures("purging the history through \(token.sequence) failed") {
            try writingToStore { store in
                try store.check(token, head: try store.log.head)
                return try store.log.purge(through: token.sequence, author: author, contextName: contextName)
            }
        }
    }

    /// Removes the history committed before `date` for good (Core Data's
    /// `deleteHistory(before: Date)`), as the purge before a token does, through the last transaction before the first one committed at or after `date`.
    /// Timestamps come from the committing processes' clocks and needn't grow with the
    /// sequence, so nothing committed at or after `date` is removed, even if an earlier-dated
    /// transaction follows it. Only transaction headers are read to find the point.
    ///
    /// - Returns: the purge's report, or nil when no transaction kept is before `date`
    ///   (nothing is written then).
    @discardableResult
    public func purgeHistory(before date: Date, author: String, contextName: String? = nil) throws -> PurgeReport? {
        let store = try requireStore()
        let through = try HistoryError.wrappingStoreFailures("finding the transactions committed before \(date) to purge failed") {
            try purgePoint(before: date, in: store)
        }
        guard let through else { return nil }
        return try purgeHistory(before: HistoryToken(storeIdentifier: store.identifier, sequence: through), author: author, contextName: contextName)
    }

    /// The last transaction before the first one committed at or after `date`, or nil when
    /// no transaction kept is before it.
    private func purgePoint(before date: Date, in store: PersistentStore) throws -> UInt64? {
        try store.log.read { reader -> UInt64? in
            let purged = try reader.purgedThrough
            var through = purged
            var reachedDate = false
            try reader.forEachEvent(from: purged + 1, where: { header in
                if !reachedDate {
                    if header.timestamp < date { through = header.sequence } else { reachedDate = true }
                }
                return false
            }) { _ in .stop }
            return through > purged ? through : nil
        }
    }
}

extension ManagedObjectContext {
    /// The transactions `request` selects (Core Data's `execute(NSPersistentHistoryChangeRequest)`):
    /// the same as the coordinator's ``PersistentStoreCoordinator/history(_:)``, from any
    /// thread.
    public nonisolated func fetchHistory(_ request: HistoryRequest) throws -> [HistoryTransaction] {
        try persistentStoreCoordinator.history(request)
    }
}
