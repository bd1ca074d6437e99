import ArgumentParser
import Foundation
import Strata

/// The store every store command works on: the first positional argument.
struct StoreOptions: ParsableArguments {
    @Argument(help: "The store directory.")
    var store: String

    func validate() throws {
        // Before, `no Strata store at ` named nothing (an empty path names no file).
        try refuseEmpty(store, "the store path", "give the store's directory")
    }

    /// Opens the store read-only: nothing is written, and an app may hold it open and write.
    ///
    /// A writer that died after writing its last commit and before publishing it leaves that
    /// commit unseen by read-only opens until another process writes (spec 0001 §2.4): that
    /// is said on standard error, and the command goes on with what it sees.
    func openReadOnly() throws -> EventLog {
        try CommandFailure.wrap {
            let log = try EventLog(openingExistingAt: store, readOnly: true)
            if let unpublished = try? log.unpublishedCommit() {
                printError(
                    "strata: warning: the store's newest commit (LMDB transaction \(unpublished.newest)) isn't visible to read-only opens: its writer died before publishing it, so this shows the store as of transaction \(unpublished.visible). Any write to the store publishes it (an app's save, or `strata compact --dry-run`, which opens it writable)")
            }
            return log
        }
    }

    /// Opens the store writable (compaction).
    ///
    /// A read-only open checks first that the directory holds a Strata store: a writable open
    /// of another program's LMDB environment (a `data.mdb` without the store's tables)
    /// creates the store's tables in it before finding no store there (before, `strata
    /// compact` on such a directory said "no Strata store" having written to its data.mdb).
    func openWritable() throws -> EventLog {
        try CommandFailure.wrap {
            _ = try EventLog(openingExistingAt: store, readOnly: true)
            return try EventLog(openingExistingAt: store, readOnly: false)
        }
    }
}

/// Exit 64 when `value` is given empty: `WHAT is empty: HINT`. An empty path or name would
/// otherwise reach the store as one naming nothing (`no Strata store at `, `the store's model
/// has no entity  (…)`, `cannot create : …`).
func refuseEmpty(_ value: String?, _ what: String, _ hint: String) throws {
    if let value, value.isEmpty { throw ValidationError("\(what) is empty: \(hint)") }
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
            printError("strata: \(fileSystemMessage(error) ?? "\(error)")")
            throw ExitStatus.failure
        }
    }

    /// `PATH: REASON` for a file system error of Foundation's (a directory that can't be
    /// made, a file that can't be removed), whose own description is a dump of its domain,
    /// code and user info (before, printed as it was: `Error Domain=NSCocoaErrorDomain
    /// Code=4 "The file doesn’t exist." UserInfo={…}`); nil for any other error.
    static func fileSystemMessage(_ error: any Error) -> String? {
        let nsError = error as NSError
        guard nsError.domain == NSCocoaErrorDomain,
            let path = nsError.userInfo[NSFilePathErrorKey] as? String ?? (nsError.userInfo[NSURLErrorKey] as? URL)?.path
        else { return nil }
        let underlying = (nsError.userInfo[NSUnderlyingErrorKey] as? any Error).map { $0 as NSError }
        if let posix = underlying, posix.domain == NSPOSIXErrorDomain {
            return "\(path): \(String(cString: strerror(Int32(posix.code))))"
        }
        return "\(path): \(nsError.localizedDescription)"
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
    /// An entity of any stored model version is accepted: the log holds the changes to an
    /// object of an entity renamed or removed since (before, `Player/p1` of a store whose
    /// newest model renamed Player was refused, its history unreachable).
    ///
    /// - Throws: `CommandFailure` naming the URI when it is malformed, temporary, or another
    ///   store's, or names an entity no stored model version has.
    func objectID(fromURI text: String) throws -> StoredObjectID {
        guard let parsed = ObjectURI.parse(text) else { throw CommandFailure("not an object URI: \(text)") }
        guard case .permanent(let store, let id) = parsed else {
            throw CommandFailure("\(text) is a temporary object URI; only saved objects have history")
        }
        guard store == storeUUID else {
            throw CommandFailure("not a URI of this store: \(text) (this store is \(storeUUID.uuidString))")
        }
        let known = try model.entity(named: id.entity) != nil || storedVersionModels().contains { $0.entity(named: id.entity) != nil }
        guard known else {
            throw CommandFailure("the store's model has no entity \(id.entity) (in \(text))")
        }
        return id
    }

    /// The model of every stored version, oldest first.
    func storedVersionModels() throws -> [ManagedObjectModel] {
        try storedModels().map { $0.version == modelVersion ? model : try storedModel(version: $0.version) }
    }

    /// `names` and every sub-entity of them, in `model`; without one, in any stored model
    /// version (the log's changes to an entity renamed or removed since are under its old
    /// name), the error naming the newest's entities.
    func entityNames(including names: [String], in model: ManagedObjectModel? = nil) throws -> Set<String> {
        let models = try model.map { [$0] } ?? storedVersionModels()
        var result: Set<String> = []
        for name in names {
            let having = models.filter { $0.entity(named: name) != nil }
            guard !having.isEmpty else {
                let listed = model ?? self.model
                throw CommandFailure("the store's model has no entity \(name) (entities: \(listed.entities.map(\.name).sorted().joined(separator: ", ")))")
            }
            for found in having { result.formUnion(found.selfAndSubentityNames(of: name)) }
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

    /// Accepts `2026-01-01` (midnight UTC), `2026-01-01T10:00:00` (UTC), then optionally a
    /// fraction of up to six digits, then optionally `Z` or an offset (`+02:00`, `+0200`,
    /// `-05`).
    ///
    /// The fraction is read to the microsecond and the date made the way the log makes an
    /// event's (`Double(µs) / 1_000_000` seconds since 1970), so a timestamp copied from the
    /// tool's output compares equal to that event's. Foundation's `ISO8601DateFormatter`
    /// would keep only milliseconds.
    static func parse(_ text: String) -> Date? {
        guard let micros = microseconds(text) else { return nil }
        return Date(timeIntervalSince1970: Double(micros) / 1_000_000)
    }

    /// The microseconds since 1970 that `text` names, or nil when it isn't one of the forms
    /// ``parse(_:)`` accepts or names an impossible date.
    static func microseconds(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        var i = 0
        func digits(_ count: Int) -> Int64? {
            guard i + count <= b.count else { return nil }
            var value: Int64 = 0
            for byte in b[i..<(i + count)] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int64(byte - 48)
            }
            i += count
            return value
        }
        func skip(_ byte: UInt8) -> Bool {
            guard i < b.count, b[i] == byte else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), skip(45), let month = digits(2), skip(45), let day = digits(2),
            (1...12).contains(month), (1...daysIn(month, year)).contains(day)
        else { return nil }
        var seconds = ISO8601.daysFromCivil(year, month, day) * 86_400
        var fraction: Int64 = 0
        if i == b.count { return seconds * 1_000_000 }
        guard skip(84) || skip(116), let hour = digits(2), skip(58), let minute = digits(2), skip(58),
            let second = digits(2), hour < 24, minute < 60, second < 60
        else { return nil }
        seconds += hour * 3600 + minute * 60 + second
        if skip(46) {
            let start = i
            while i < b.count, (48...57).contains(b[i]) { i += 1 }
            let count = i - start
            guard (1...6).contains(count) else { return nil }
            i = start
            guard let value = digits(count) else { return nil }
            fraction = value * [1, 100_000, 10_000, 1_000, 100, 10, 1][count]
        }
        if skip(90) || skip(122) {
            // UTC.
        } else if i < b.count, b[i] == 43 || b[i] == 45 {
            let sign: Int64 = b[i] == 43 ? 1 : -1
            i += 1
            guard let hours = digits(2), hours < 24 else { return nil }
            var minutes: Int64 = 0
            if i < b.count {
                _ = skip(58)
                guard let m = digits(2), m < 60 else { return nil }
                minutes = m
            }
            // 10:00+02:00 is 08:00 UTC.
            seconds -= sign * (hours * 3600 + minutes * 60)
        }
        guard i == b.count else { return nil }
        return seconds * 1_000_000 + fraction
    }

    private static func daysIn(_ month: Int64, _ year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}

extension ObjectURI {
    /// Why `text`, which doesn't parse as an object URI, isn't one, when that is more than
    /// its form: the short form `Entity/pN` (`--explain`'s, which `--object` doesn't take), a
    /// key `p0` or with a leading zero. Empty otherwise. (Before, `x-strata://…/Team/p0`
    /// was refused with the form alone, though it has it.)
    static func whyNot(_ text: String) -> String {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard let key = parts.last, key.count > 1, key.hasPrefix("p"), key.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }) else { return "" }
        if key.dropFirst().first == "0" { return ": primary keys start at 1 and have no leading zeros (p1, p2, …)" }
        if parts.count == 2, !text.hasPrefix("x-strata:") { return ": give the object's whole URI, x-strata://STORE-UUID/\(text) (strata info STORE prints the UUID)" }
        return ""
    }
}
