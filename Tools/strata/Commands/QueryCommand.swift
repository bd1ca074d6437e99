import ArgumentParser
import Foundation
import Strata

/// `strata query`: runs a fetch request against a store and prints the objects it matches,
/// their number, or the plan the planner chose.
struct QueryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Run a fetch request: print the matching objects, their count, or the query plan.",
        discussion: """
            Opens the store read-only with the model stored in it and runs the fetch
            through a managed object context, as an app would, so the results are the
            ones an app gets: a predicate in Core Data's format syntax
            (Specs/0003-predicate-grammar.md), sub-entities' objects included unless
            --no-subentities, the sort keys in the order given (nil sorts first
            ascending, last descending; ties keep store order), then --offset and
            --limit (0: no limit). Nothing is written; an app may hold the store open
            and write meanwhile. The fetch chooses and orders the objects, then they are
            read and printed a thousand at a time, so memory stays small for any number
            of results. Everything printed is the store as of one transaction: the
            newest when the query starts (if saves land meanwhile, stderr names the
            transaction printed), or the one --at SEQ names.

            Objects are printed in fetch order, each with its entity, its URI and its
            values: every attribute (transient ones left out) and every relationship,
            both sides, as the object shows them, sorted by name. Values are written as
            `strata export` writes them: to-one relationships as a URI, to-many as an
            array of URIs (list order for ordered, key order otherwise), no value as
            null. --format json (the default) writes one document,
            {"store":…,"entity":…,"objects":[…]}, one object per line; --format ndjson
            writes one object per line, {"entity":…,"uri":…,"values":{…}}.

            A predicate has no literal for an object, so a string compared with a
            relationship or SELF names one: "Team/p3" (as --explain and the printed
            URIs name objects) or its whole x-strata:// URI. A string that names no
            object of the store's entities is exit 1.

            --count prints only the number of matches (offset and limit applied).
            --explain prints only the plan the planner chose, as one line
            (Specs/0008-fetch-requests.md, "Explain"), and fetches nothing.

            A predicate that doesn't parse, a bad --sort, a negative --limit or --offset
            are bad usage (exit 64). An entity, key path or value type the store's model
            refuses is exit 1, naming the option at fault.

            Examples:
              strata query League.strata Player --where 'age >= 30 AND team.name == "Owls"'
              strata query League.strata Player --sort age:desc --sort name --limit 20
              strata query League.strata Player --sort name --offset 20 --limit 20
              strata query League.strata Player --where 'age BETWEEN {30, 40}' --explain
              strata query League.strata Player --where 'name ENDSWITH "son"' --count
              strata query League.strata Person --no-subentities --format ndjson
              strata query League.strata Player --where 'team.name == "Owls"' --at 120
              strata query League.strata Player --where 'team == "Team/p3"'
              strata query League.strata Player --where 'SELF IN {"Player/p1", "Player/p4"}'
            """
    )

    @OptionGroup var options: StoreOptions

    @Argument(help: "The entity to fetch.")
    var entity: String

    @Option(name: .customLong("where"), help: ArgumentHelp("Only objects this predicate matches (Core Data's format syntax).", valueName: "predicate"))
    var predicate: String?

    @Option(help: ArgumentHelp("Sort by this key path, ascending unless :desc. Repeatable: the first sorts first.", valueName: "key[:asc|:desc]"))
    var sort: [String] = []

    @Option(parsing: .unconditional, help: ArgumentHelp("At most this many objects (0: no limit).", valueName: "n"))
    var limit: Int = 0

    @Option(parsing: .unconditional, help: ArgumentHelp("Skip this many matching objects first.", valueName: "n"))
    var offset: Int = 0

    @Flag(help: "Print only the number of matching objects.")
    var count = false

    @Flag(help: "Print only the plan the planner chose; fetch nothing.")
    var explain = false

    @Option(help: "json (one document; the default) or ndjson (one object per line).")
    var format: QueryFormat?

    @Flag(name: .customLong("no-subentities"), help: "Only objects of the entity itself, not of its sub-entities.")
    var noSubentities = false

    @Option(parsing: .unconditional, help: ArgumentHelp("Query the store as it was just after this transaction (default: as it is when the query starts).", valueName: "seq"))
    var at: UInt64?

    /// The output formats of the objects.
    enum QueryFormat: String, ExpressibleByArgument, CaseIterable {
        case json, ndjson
    }

    func validate() throws {
        try refuseEmpty(entity, "ENTITY", "give the name of an entity (strata model STORE lists them)")
        if limit < 0 { throw ValidationError("--limit \(limit) is negative: give 0 (no limit) or more") }
        if offset < 0 { throw ValidationError("--offset \(offset) is negative: give 0 or more") }
        if count && explain { throw ValidationError("--count and --explain are separate modes: give one") }
        if let format, count || explain {
            throw ValidationError("--format \(format.rawValue) applies to the objects printed, not to --\(count ? "count" : "explain")")
        }
        _ = try parsedPredicate()
        _ = try sortDescriptors()
    }

    func run() throws {
        let parsed = try fetchRequest()
        let mode: Mode = explain ? .explain : (count ? .count : .objects(format ?? .json))
        try runCommand {
            let log = try options.openReadOnly()
            guard log.model.entity(named: entity) != nil else {
                throw CommandFailure(
                    "the store's model has no entity \(entity) (entities: \(log.model.entities.map(\.name).sorted().joined(separator: ", ")))")
            }
            if let at {
                let (head, purged) = try log.read { reader in (try reader.head, try reader.purgedThrough) }
                try log.checkSequence(at, head: head)
                if at < purged { throw CommandFailure("--at \(at): the store's history through \(purged) was purged; its earliest state is \(purged)") }
            }
            let coordinator = PersistentStoreCoordinator(managedObjectModel: log.model)
            try coordinator.addPersistentStore(openedLog: log)
            var resolved = parsed
            if let node = parsed.predicate?.node, let described = log.model.entity(named: entity) {
                // Strings compared with a relationship or SELF name objects: `team == "Team/p3"`.
                do {
                    resolved.predicate = FormatPredicate(
                        try QueryObjectReferences.resolve(node, entity: described, model: log.model, coordinator: coordinator))
                } catch let problem as QueryObjectReferences.Problem {
                    throw CommandFailure("--where \(Self.quoted(predicate ?? "")): \(problem)")
                }
            }
            let request = resolved
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "strata query")
            // The whole query reads one generation of the store: the one asked for, or the
            // newest when it starts (spec 0006 §22), whatever saves land meanwhile.
            let generation = at.map { QueryGenerationToken(storeIdentifier: log.storeUUID, sequence: $0) } ?? .current
            let (predicate, sort) = (predicate, sort)
            let failure: @Sendable (any Error) -> String = { error in Self.message(for: error, predicate: predicate, sort: sort) }
            do {
                let matched = try context.performAndWait { context in
                    try context.setQueryGenerationFrom(generation)
                    return try Self.execute(request, mode: mode, in: context, log: log, pinnedByOption: at != nil, failure: failure)
                }
                if matched == 0, case .objects = mode { printError("no objects match") }
            } catch let error as ContextError {
                throw CommandFailure(failure(error))
            } catch let error as PredicateEvaluationError {
                throw CommandFailure(failure(error))
            }
        }
    }

    /// What the command prints.
    enum Mode: Sendable {
        case objects(QueryFormat)
        case count
        case explain
    }

    /// Runs `request` on `context` and writes what `mode` asks for to standard output;
    /// returns the number of objects printed (for objects).
    private static func execute(
        _ request: FetchRequest<ManagedObject>, mode: Mode, in context: isolated ManagedObjectContext, log: EventLog, pinnedByOption: Bool,
        failure: (any Error) -> String
    ) throws -> Int {
        let out = OutputSink()
        defer { out.close() }
        switch mode {
        case .explain:
            out.line(try context.explain(request).description)
            return 0
        case .count:
            out.line(String(try context.count(for: request)))
            return 0
        case .objects(let format):
            // The fetch chooses and orders the objects as IDs (tens of bytes each); the
            // objects are then read a chunk at a time, printed and dropped, so memory doesn't
            // grow with the result. Every read is of the context's query generation, so the
            // objects printed are those the fetch chose, as they were then.
            let ids = try context.fetchObjectIDs(request)
            let generation = context.queryGenerationToken
            if format == .json {
                out.line("{\"store\":\(ValueRendering.jsonString(log.storeUUID.uuidString)),\"entity\":\(ValueRendering.jsonString(request.entityName)),\"objects\":[")
            }
            var printed = 0
            do {
                for start in stride(from: 0, to: ids.count, by: printChunk) {
                    let chunk = Array(ids[start..<min(start + printChunk, ids.count)])
                    for (id, found) in zip(chunk, try context.existingObjects(with: chunk)) {
                        guard let object = found else {
                            throw CommandFailure("\(id.uriRepresentation().absoluteString), which the query matched, can't be read at \(generation?.description ?? "its generation")")
                        }
                        let text = try QueryRendering.objectJSON(object, log)
                        out.line(format == .json && printed > 0 ? "," + text : text)
                        printed += 1
                    }
                    // Forget this chunk's objects and the relationship targets printing made; a
                    // reset moves the context to the newest generation, so pin it back.
                    context.reset()
                    try context.setQueryGenerationFrom(generation)
                }
            } catch {
                // An object that can't be read (a damaged store) stops the printing: the json
                // document is closed with the objects printed so far and the error as its
                // last member, so it stays well-formed (before, it was left unfinished).
                if format == .json { out.endDocument("],", error: failure(error)) }
                throw error
            }
            if format == .json { out.line("]}") }
            if let sequence = generation?.sequence, let head = try? log.head, head != sequence, !pinnedByOption {
                printError("the store changed while the query ran (head \(sequence) -> \(head)): the objects are printed as they were at \(sequence)")
            }
            return printed
        }
    }

    /// How many objects are read and printed between two resets of the context.
    static let printChunk = 1_000

    // MARK: - The request

    /// The fetch request the options describe.
    func fetchRequest() throws -> FetchRequest<ManagedObject> {
        var request = FetchRequest(entityName: entity, predicate: try parsedPredicate(), sortDescriptors: try sortDescriptors())
        request.fetchLimit = limit
        request.fetchOffset = offset
        request.includesSubentities = !noSubentities
        return request
    }

    /// `--where` parsed; a predicate that doesn't parse is bad usage, with the parser's
    /// message and a caret under the position at fault.
    func parsedPredicate() throws -> FormatPredicate? {
        guard let predicate else { return nil }
        do {
            return try FormatPredicate(format: predicate)
        } catch let error as FormatPredicateError {
            var message = "--where \(Self.quoted(predicate)): \(error)"
            if !predicate.contains(where: { $0.isNewline || $0 == "\t" }) {
                let column = min(max(error.position, 0), predicate.unicodeScalars.count)
                message += "\n  \(predicate)\n  " + String(repeating: " ", count: column) + "^"
            }
            throw ValidationError(message)
        } catch {
            throw ValidationError("--where \(Self.quoted(predicate)): \(error)")
        }
    }

    /// `--sort` parsed: `key`, `key:asc` or `key:desc`.
    func sortDescriptors() throws -> [FetchSortDescriptor] {
        try sort.map { text in
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2, let key = parts.first, !key.isEmpty, !key.contains(where: \.isWhitespace) else {
                throw ValidationError("--sort \(text): give a key path, optionally followed by :asc or :desc (e.g. --sort age:desc)")
            }
            switch parts.count == 2 ? parts[1].lowercased() : "asc" {
            case "asc", "ascending": return FetchSortDescriptor(key: String(key), ascending: true)
            case "desc", "descending": return FetchSortDescriptor(key: String(key), ascending: false)
            default:
                throw ValidationError("--sort \(text): the direction \"\(parts[1])\" is neither asc nor desc")
            }
        }
    }

    /// What standard error says after `strata: ` for `error`, which the query ran into: a
    /// context's error with the option at fault named (``describe(_:predicate:sort:)``), a predicate's
    /// evaluation error after `--where '…': `, any other as it describes itself.
    static func message(for error: any Error, predicate: String?, sort: [String]) -> String {
        switch error {
        case let error as ContextError: describe(error, predicate: predicate, sort: sort)
        case let error as PredicateEvaluationError: "--where \(quoted(predicate ?? "")): \(error)"
        default: "\(error)"
        }
    }

    /// The context's error with the option at fault named: `--where '…': reason`,
    /// `--sort KEY: reason`.
    static func describe(_ error: ContextError, predicate: String?, sort: [String]) -> String {
        guard case .invalidFetchRequest(let part, let reason) = error else { return error.description }
        if part == "predicate", let predicate { return "--where \(Self.quoted(predicate)): \(reason)" }
        let prefix = "sort descriptor "
        if part.hasPrefix(prefix), let number = Int(part.dropFirst(prefix.count).prefix(while: \.isNumber)),
            sort.indices.contains(number - 1)
        {
            return "--sort \(sort[number - 1]): \(reason)"
        }
        return error.description
    }

    /// `text` quoted as it would be typed in a shell: in single quotes, or in double quotes
    /// when it holds single quotes but no double quotes.
    static func quoted(_ text: String) -> String {
        text.contains("'") && !text.contains("\"") ? "\"\(text)\"" : "'\(text)'"
    }
}

/// How `strata query` writes one object: the JSON of `strata export --format ndjson`, with
/// every relationship (both sides) read through the managed object.
enum QueryRendering {
    /// `{"entity":"Player","uri":"…","values":{…}}`: every non-transient attribute and
    /// relationship of the object's entity (inherited ones included), sorted by name.
    static func objectJSON(_ object: ManagedObject, _ log: EventLog) throws -> String {
        let entity = object.entity
        var fields: [(name: String, json: String)] = []
        for attribute in entity.allAttributes where !attribute.isTransient {
            fields.append((attribute.name, try attributeJSON(object, attribute, log)))
        }
        for relationship in entity.allRelationships where !relationship.isTransient {
            fields.append((relationship.name, relationshipJSON(object.value(forKey: relationship.name))))
        }
        fields.sort { $0.name < $1.name }
        let values = fields.map { ValueRendering.jsonString($0.name) + ":" + $0.json }.joined(separator: ",")
        return "{\"entity\":\(ValueRendering.jsonString(entity.name)),\"uri\":\(ValueRendering.jsonString(uri(object))),\"values\":{\(values)}}"
    }

    /// The attribute's value as export writes it (ValueRendering.plainJSON).
    static func attributeJSON(_ object: ManagedObject, _ attribute: AttributeDescription, _ log: EventLog) throws -> String {
        guard let value = object.value(forKey: attribute.name) else { return "null" }
        do {
            return ValueRendering.plainJSON(.attribute(try AttributeValue(any: value, for: attribute.attributeType)), log)
        } catch {
            throw CommandFailure("\(uri(object)): the value of \(attribute.name) can't be shown as \(attribute.attributeType.name): \(error)")
        }
    }

    /// A to-one as its URI, a to-many as an array of URIs (in list order when ordered, in
    /// key order otherwise; `[]` when empty), no to-one as null.
    static func relationshipJSON(_ value: Any?) -> String {
        switch value {
        case let object as ManagedObject:
            return ValueRendering.jsonString(uri(object))
        case let objects as [ManagedObject]:
            return "[" + objects.map { ValueRendering.jsonString(uri($0)) }.joined(separator: ",") + "]"
        case let objects as Set<ManagedObject>:
            let sorted = objects.map(\.objectID).sorted()
            return "[" + sorted.map { ValueRendering.jsonString($0.uriRepresentation().absoluteString) }.joined(separator: ",") + "]"
        default:
            return "null"
        }
    }

    static func uri(_ object: ManagedObject) -> String { object.objectID.uriRepresentation().absoluteString }
}
