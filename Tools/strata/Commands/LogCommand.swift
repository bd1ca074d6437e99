import ArgumentParser
import Foundation
import Strata
import StrataStorage

/// `strata log`: the audit trail.
struct LogCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Show the audit trail: every transaction and, per change, each property's before → after.",
        discussion: """
            Reads raw and compacted history alike, oldest first. Filters combine (all must
            match). --author, --context, --kind and --where (a predicate over author,
            contextName, timestamp, processID, transactionNumber and storeID, as
            HistoryRequest.transactionPredicate) select transactions; --entity, --object and
            --property select changes, and a transaction is shown only with the changes that
            match. --from and --to take a sequence number or an ISO 8601 date/time (UTC unless
            it has an offset; to the microsecond) and are inclusive. --last N shows the newest N
            matching transactions (read from the end of the log), --limit N the oldest N.
            --follow then waits for new transactions and shows the matching ones as they are
            committed, like tail -f, until interrupted.

            Examples:
              strata log League.strata
              strata log League.strata --from 100 --to 120
              strata log League.strata --last 5
              strata log League.strata --last 10 --follow --author importer
              strata log League.strata --from 2026-03-01T09:00:00Z --author importer
              strata log League.strata --object x-strata://6F1C…/Player/p12 --property team
              strata log League.strata --kind undo --format ndjson | jq .sequence
              strata log League.strata --where 'author != "app" AND processID == 4242'
            """
    )

    @OptionGroup var options: StoreOptions

    @Option(parsing: .unconditional, help: ArgumentHelp("The first transaction: a sequence number or an ISO 8601 date/time.", valueName: "seq|date"))
    var from: LogPoint?

    @Option(parsing: .unconditional, help: ArgumentHelp("The last transaction: a sequence number or an ISO 8601 date/time.", valueName: "seq|date"))
    var to: LogPoint?

    @Option(help: "Only transactions by this author.")
    var author: String?

    @Option(help: "Only transactions saved by the context with this name.")
    var context: String?

    @Option(help: "Only transactions of this kind: save, undo, redo, migration, import, reservation, purge.")
    var kind: KindFilter?

    @Option(
        name: .customLong("where"),
        help: ArgumentHelp(
            "Only transactions this predicate accepts, over author, contextName, timestamp, processID, transactionNumber and storeID.",
            valueName: "predicate"))
    var transactionPredicate: String?

    @Option(help: "Only changes to objects of this entity (or its sub-entities). Repeatable.")
    var entity: [String] = []

    @Option(help: ArgumentHelp("Only changes to this object.", valueName: "uri"))
    var object: String?

    @Option(help: "Only changes that touch this property (inserts and deletes touch every property they hold).")
    var property: String?

    @Option(help: ArgumentHelp("Only the newest N matching transactions (still shown oldest first); read from the end of the log.", valueName: "n"))
    var last: Int?

    @Option(help: ArgumentHelp("At most N matching transactions, the oldest first.", valueName: "n"))
    var limit: Int?

    @Flag(help: "After the matches so far, wait and show new matching transactions as they are committed, until interrupted (text or ndjson).")
    var follow = false

    @Option(help: "text, json (one document) or ndjson (one transaction per line).")
    var format: OutputFormat = .text

    enum KindFilter: String, ExpressibleByArgument, CaseIterable {
        case save, undo, redo, migration, `import`, reservation, purge
    }

    enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
        case text, json, ndjson
    }

    func validate() throws {
        for name in entity { try refuseEmpty(name, "--entity", "give the name of an entity") }
        try refuseEmpty(property, "--property", "give the name of a property")
        try refuseEmpty(object, "--object", "give an object's URI (x-strata://STORE-UUID/Entity/pN)")
        // An empty name is more likely a shell variable that wasn't set than a search for the
        // transactions recorded with an empty author or context name: those are matched by
        // `--where` (before, `--author ''` matched them, or printed nothing, exit 0).
        try refuseEmpty(author, "--author", "give an author's name (transactions recorded with an empty author: --where \"author == ''\")")
        try refuseEmpty(context, "--context", "give a context's name (transactions recorded with an empty context name: --where \"contextName == ''\")")
        if let object, ObjectURI.parse(object) == nil {
            throw ValidationError("--object \(object) is not an object URI (x-strata://STORE-UUID/Entity/pN)\(ObjectURI.whyNot(object))")
        }
        if case .sequence(let a) = from, case .sequence(let b) = to, a > b {
            throw ValidationError("--from \(a) is after --to \(b)")
        }
        if case .date(let a) = from, case .date(let b) = to, a > b {
            throw ValidationError("--from \(Timestamps.format(a)) is after --to \(Timestamps.format(b))")
        }
        if let last, last < 1 { throw ValidationError("--last \(last) is not a positive number of transactions") }
        if let limit, limit < 1 { throw ValidationError("--limit \(limit) is not a positive number of transactions") }
        if last != nil && limit != nil {
            throw ValidationError("--last and --limit can't be combined: --last takes the newest matches, --limit the oldest")
        }
        if follow {
            if format == .json { throw ValidationError("--follow writes one transaction at a time: use --format text or ndjson, not json (its document never ends)") }
            if to != nil { throw ValidationError("--follow shows transactions as they are committed: it can't be combined with --to") }
            if limit != nil { throw ValidationError("--follow can't be combined with --limit; use --last N --follow for the newest N, then what follows") }
        }
        _ = try parsedPredicate()
    }

    /// `--where`, parsed and checked against a transaction's keys.
    private func parsedPredicate() throws -> FormatPredicate? {
        try transactionPredicate.map(TransactionWhere.parse)
    }

    func run() throws {
        try runCommand {
            let log = try options.openReadOnly()
            let filter = try ChangeFilter(log: log, entities: entity, object: object, property: property)
            let predicate = try parsedPredicate()
            let storeUUID = log.storeUUID
            /// Whether `--where` accepts the transaction with `header`.
            func accepted(_ header: EventHeader) -> Bool {
                guard let predicate else { return true }
                return TransactionWhere.accepts(predicate, header, storeUUID: storeUUID)
            }
            var fromDate: Date?
            var toDate: Date?
            if case .date(let date) = from { fromDate = date }
            if case .date(let date) = to { toDate = date }
            // The header's fields are read without decoding the event: events the date,
            // author and context filters reject cost no decoding (`matching` checks them again).
            let headerFilter: ((EventHeader) -> Bool)? =
                fromDate == nil && toDate == nil && author == nil && context == nil && predicate == nil
                ? nil
                : { header in
                    if let toDate, header.timestamp > toDate { return false }
                    if let fromDate, header.timestamp < fromDate { return false }
                    if let author, header.author != author { return false }
                    if let context, header.contextName != context { return false }
                    return accepted(header)
                }
            /// The event's groups to show, or nil when the filters reject it.
            func matching(_ event: TransactionEvent) -> [ChangeGroup]? {
                // Not .stop on a date: timestamps needn't rise with the sequence (a draft may
                // carry its own; writers in several processes), so a later event may be earlier.
                if let toDate, event.timestamp > toDate { return nil }
                if let fromDate, event.timestamp < fromDate { return nil }
                if let author, event.author != author { return nil }
                if let context, event.contextName != context { return nil }
                if let kind, !matches(kind, event.kind) { return nil }
                if predicate != nil {
                    let header = EventHeader(
                        sequence: event.sequence, timestamp: event.timestamp, author: event.author, contextName: event.contextName,
                        processID: event.processID)
                    if !accepted(header) { return nil }
                }
                let groups = filter.groups(of: event)
                if filter.isActive && groups.isEmpty { return nil }
                return groups
            }
            let out = OutputSink()
            defer { out.close() }
            var written = 0
            func emit(_ event: TransactionEvent, _ groups: [ChangeGroup]) {
                switch format {
                case .text:
                    if written > 0 { out.line() }
                    for line in EventText.lines(event, groups: groups, log) { out.line(line) }
                case .json:
                    out.line((written > 0 ? "," : "") + ValueRendering.eventJSON(event, groups: groups, log))
                case .ndjson:
                    out.line(ValueRendering.eventJSON(event, groups: groups, log))
                }
                written += 1
            }
            /// The last sequence read (shown or not): --follow goes on after it.
            var readThrough: UInt64 = 0
            /// Whether the json document has begun: an error after that closes it (below).
            var documentBegun = false
            do {
                try log.read { reader in
                    let head = try reader.head
                    readThrough = head
                    var first: UInt64 = 1
                    var last: UInt64 = head
                    if case .sequence(let n) = from {
                        try log.checkSequence(n, head: head)
                        first = max(n, 1)
                    }
                    if case .sequence(let n) = to {
                        try log.checkSequence(n, head: head)
                        last = n
                    }
                    // History through a purge point is gone: say so when the range reaches into it.
                    let purged = try reader.purgedThrough
                    if purged > 0 && first <= purged && fromDate == nil {
                        printError("note: history through \(purged) was purged; the log starts at \(purged + 1)")
                    }
                    first = max(first, purged + 1)
                    // --object reads only the transactions that touched it (from the per-object
                    // history index), not every event in the range.
                    var only: [UInt64]?
                    if let id = filter.objectID, first <= last {
                        only = try reader.history(of: id).filter { $0 >= first && $0 <= last }
                    }

                    if format == .json {
                        out.line("{\"store\":\(ValueRendering.jsonString(log.storeUUID.uuidString)),\"transactions\":[")
                        documentBegun = true
                    }
                    guard first <= last else { return }
                    if let wanted = self.last {
                        // The newest matches: read windows back from the end, each twice the one
                        // before, until enough match or the range is read. Each event is decoded once.
                        var found: [(TransactionEvent, [ChangeGroup])] = []
                        // In UInt64: twice a huge --last (Int.max) overflowed Int and trapped.
                        var window = max(UInt64(wanted) * 2, 64)
                        var high = last
                        var remaining = only.map { $0[...] }
                        while found.count < wanted {
                            var batch: [(TransactionEvent, [ChangeGroup])] = []
                            let collect: (TransactionEvent) throws -> IterationDecision = { event in
                                if let groups = matching(event) { batch.append((event, groups)) }
                                return .next
                            }
                            if let list = remaining {
                                guard !list.isEmpty else { break }
                                let take = list.suffix(Int(min(window, UInt64(list.count))))
                                try reader.forEachEvent(among: Array(take), collect)
                                remaining = list.dropLast(take.count)
                            } else {
                                let low = high - first + 1 > window ? high - window + 1 : first
                                try reader.forEachEvent(from: low, through: high, where: headerFilter, collect)
                                guard low > first else {
                                    found.insert(contentsOf: batch, at: 0)
                                    break
                                }
                                high = low - 1
                            }
                            found.insert(contentsOf: batch, at: 0)
                            window = window > UInt64.max / 2 ? window : window * 2
                        }
                        for (event, groups) in found.suffix(wanted) { emit(event, groups) }
                        return
                    }
                    let body: (TransactionEvent) throws -> IterationDecision = { event in
                        guard let groups = matching(event) else { return .next }
                        emit(event, groups)
                        if let limit, written >= limit { return .stop }
                        return .next
                    }
                    if let only {
                        try reader.forEachEvent(among: only, body)
                    } else {
                        try reader.forEachEvent(from: first, through: last, where: headerFilter, body)
                    }
                }
            } catch {
                // A damaged store (a missing segment, a bit-flipped event) stops the read
                // partway: the json document is closed, its transactions those read before the
                // error and its last member the error, so `jq` still reads it (before, the
                // document was left unfinished: a parse error instead of the good events).
                // Text and ndjson lines are whole; the error goes to stderr, exit 1, as before.
                if documentBegun { out.endDocument("],", error: "\(error)") }
                throw error
            }
            guard follow else { return finish(out, written: written) }
            // --follow: wait for new transactions and show those that match, as they commit,
            // until interrupted. Each poll is one read transaction of the head; the output is
            // flushed after each batch so a pipe's reader sees every transaction at once.
            out.flush()
            while true {
                usleep(Self.followInterval)
                try log.read { reader in
                    let head = try reader.head
                    guard head > readThrough else { return }
                    let purged = try reader.purgedThrough
                    if purged > readThrough {
                        printError("note: history through \(purged) was purged while following; going on from \(purged + 1)")
                        readThrough = purged
                        guard head > readThrough else { return }
                    }
                    let body: (TransactionEvent) throws -> IterationDecision = { event in
                        if let groups = matching(event) { emit(event, groups) }
                        return .next
                    }
                    if let id = filter.objectID {
                        let new = try reader.history(of: id).filter { $0 > readThrough && $0 <= head }
                        try reader.forEachEvent(among: new, body)
                    } else {
                        try reader.forEachEvent(from: readThrough + 1, through: head, where: headerFilter, body)
                    }
                    readThrough = head
                }
                out.flush()
            }
        }
    }

    /// How long `--follow` waits between looks at the head, in microseconds.
    static let followInterval: UInt32 = 100_000

    private func finish(_ out: OutputSink, written: Int) {
        if format == .json { out.line("]}") }
        if written == 0 { printError("no transactions match") }
    }

    private func matches(_ filter: KindFilter, _ kind: TransactionKind) -> Bool {
        switch (filter, kind) {
        case (.save, .save), (.undo, .undo), (.redo, .redo), (.migration, .migration), (.import, .import),
            (.reservation, .reservation), (.purge, .purge): true
        default: false
        }
    }
}

/// Selects changes by entity, object and property.
struct ChangeFilter {
    let entities: Set<String>?
    let objectID: StoredObjectID?
    let property: String?

    init(log: EventLog, entities: [String], object: String?, property: String?) throws {
        self.entities = entities.isEmpty ? nil : try log.entityNames(including: entities)
        objectID = try object.map { try log.objectID(fromURI: $0) }
        self.property = property
        if let property {
            // Any stored model version's property: changes before a migration carry the
            // names of then (a property renamed or removed since). A relationship side the
            // log doesn't record (its inverse holds the references) appears in no change:
            // selecting it would silently select nothing.
            var derived: (entity: String, destination: String, inverse: String)?
            var recorded = false
            for version in log.storedModels().map(\.version) {
                for entity in try log.concreteEntityNames(modelVersion: version) {
                    guard let stored = try log.storedProperties(ofEntity: entity, modelVersion: version).first(where: { $0.name == property })
                    else { continue }
                    if stored.isRecorded {
                        recorded = true
                    } else if derived == nil, case .relationship(let destination, _, _, _, let inverse?) = stored.kind {
                        derived = (entity, destination, inverse)
                    }
                }
            }
            if !recorded && derived == nil { throw CommandFailure("no entity of the store's models has a property \"\(property)\"") }
            if !recorded, let (entity, destination, inverse) = derived {
                throw CommandFailure(
                    "\(entity).\(property) is the inverse of \(destination).\(inverse), which the store records: a change to \(entity).\(property) is written as a change to \(destination).\(inverse); give --property \(inverse)")
            }
        }
    }

    var isActive: Bool { entities != nil || objectID != nil || property != nil }

    func matches(_ change: Change) -> Bool {
        let id = change.objectID
        if let entities, !entities.contains(id.entity) { return false }
        if let objectID, objectID != id { return false }
        if let property {
            switch change {
            case .insert(_, let values): return values[property] != nil
            case .delete(_, let before): return before[property] != nil
            case .update(_, let changes): return changes.contains { $0.property == property }
            }
        }
        return true
    }

    /// The event's groups with only the matching changes (and, with --property, only that
    /// property of each update); groups left empty are dropped.
    func groups(of event: TransactionEvent) -> [ChangeGroup] {
        guard isActive else { return event.groups }
        return event.groups.compactMap { group in
            let changes = group.changes.filter(matches).map { change -> Change in
                guard let property else { return change }
                switch change {
                case .update(let id, let changes): return .update(id, changes: changes.filter { $0.property == property })
                case .insert(let id, let values): return .insert(id, values: values.filter { $0.key == property })
                case .delete(let id, let before): return .delete(id, before: before.filter { $0.key == property })
                }
            }
            var filtered = group
            filtered.changes = changes
            return changes.isEmpty ? nil : filtered
        }
    }
}
