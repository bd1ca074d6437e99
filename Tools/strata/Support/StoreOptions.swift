import ArgumentParser
import Foundation
import Strata

/// The store every store command works on: the first positional argument.
struct StoreOptions: ParsableArguments {
    @Argument(help: "The store directory.")
    var store: String

    /// Opens the store read-only: nothing is written, and an app may hold it open and write.
    func openReadOnly() throws -> EventLog {
        try CommandFailure.wrap { try EventLog(openingExistingAt: store, readOnly: true) }
    }

    /// Opens the store writable (compaction).
    func openWritable() throws -> EventLog {
        try CommandFailure.wrap { try EventLog(openingExistingAt: store, readOnly: false) }
    }
}

/// A domain error: printed to standard error as `strata: MESSAGE`, exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }

    /// Runs `body`, turning any error into a message on standard error and exit status 1.
    static func wrap<R>(_ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch let error as ExitCode {
            throw error
        } catch let error as CleanExit {
            throw error
        } catch {
            printError("strata: \(error)")
            throw ExitStatus.failure
        }
    }
}

/// Runs a command body: domain errors go to standard error and exit 1.
func runCommand(_ body: () throws -> Void) throws {
    try CommandFailure.wrap(body)
}

extension EventLog {
    /// The permanent URI of `id` in this store.
    func uri(_ id: StoredObjectID) -> String {
        ObjectURI.permanent(id, storeUUID: storeUUID).absoluteString
    }

    /// The object `text` names in this store.
    ///
    /// - Throws: `CommandFailure` naming the URI when it is malformed, temporary, or another
    ///   store's, or names an entity the store's model doesn't have.
    func objectID(fromURI text: String) throws -> StoredObjectID {
        guard let parsed = ObjectURI.parse(text) else { throw CommandFailure("not an object URI: \(text)") }
        guard case .permanent(let store, let id) = parsed else {
            throw CommandFailure("\(text) is a temporary object URI; only saved objects have history")
        }
        guard store == storeUUID else {
            throw CommandFailure("not a URI of this store: \(text) (this store is \(storeUUID.uuidString))")
        }
        guard model.entity(named: id.entity) != nil else {
            throw CommandFailure("the store's model has no entity \(id.entity) (in \(text))")
        }
        return id
    }

    /// `names` and every sub-entity of them.
    func entityNames(including names: [String]) throws -> Set<String> {
        var result: Set<String> = []
        for name in names {
            guard model.entity(named: name) != nil else {
                throw CommandFailure("the store's model has no entity \(name) (entities: \(model.entities.map(\.name).sorted().joined(separator: ", ")))")
            }
            result.formUnion(model.selfAndSubentityNames(of: name))
        }
        return result
    }

    /// Checks that `sequence` is in the log.
    func checkSequence(_ sequence: UInt64, head: UInt64) throws {
        if sequence > head { throw CommandFailure("sequence \(sequence) is past the head (\(head))") }
    }
}

/// A point in the log given on the command line: a sequence number or an ISO 8601 date.
enum LogPoint: ExpressibleByArgument, Sendable, Hashable {
    case sequence(UInt64)
    case date(Date)

    init?(argument: String) {
        if let n = UInt64(argument) {
            self = .sequence(n)
        } else if let date = Timestamps.parse(argument) {
            self = .date(date)
        } else {
            return nil
        }
    }

    static var defaultCompletionKind: CompletionKind { .default }
}

/// Parses and formats the ISO 8601 times the tool reads and prints.
enum Timestamps {
    /// `2026-01-01T00:00:00.000000Z`: UTC with microseconds, as events store them.
    ///
    /// A date value with no microseconds since 1970 (NaN, infinite, or more than 9 × 10¹²
    /// seconds out) is printed as its seconds since 1970 in number text (`100000000000000.0`,
    /// `1e+20`, `nan`), the rule spec 0004 §9 gives its event JSON.
    static func format(_ date: Date) -> String {
        ISO8601.format(date, fixedMicroseconds: true)
    }

    /// Accepts `2026-01-01`, `2026-01-01T10:00:00Z`, with fractional seconds, or with an offset.
    static func parse(_ text: String) -> Date? {
        let full = ISO8601DateFormatter()
        full.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = full.date(from: text) { return date }
        full.formatOptions = [.withInternetDateTime]
        if let date = full.date(from: text) { return date }
        full.formatOptions = [.withFullDate]
        full.timeZone = TimeZone(secondsFromGMT: 0)
        if text.count == 10, let date = full.date(from: text) { return date }
        return nil
    }
}
