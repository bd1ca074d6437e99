import ArgumentParser
import Foundation
import Strata
import StrataStorage

/// `strata export`: a snapshot of the objects, now or as of a sequence.
struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export the objects, now or as of a sequence, as JSON, NDJSON, CSV or SQL.",
        discussion: """
            Streams: objects are read and written one at a time, never all held in memory.
            Objects are grouped by entity (entities sorted by name), in primary-key order. Each
            object is named by its URI; relationships appear on the side the store records (a
            to-one reference, an ordered or unordered to-many list) as URIs. Derived inverse
            sides are left out. See Specs/0007-cli.md for the exact formats.

            --format csv writes one file per entity, ENTITY.csv, into the --output directory
            (RFC 4180, with a header row); a to-many relationship is one field holding the URIs
            separated by single spaces; no value is an empty field, an empty string "". --format sql writes CREATE TABLE and INSERT statements,
            with a join table ENTITY_RELATIONSHIP (source, target, position) per to-many
            relationship, for `sqlite3` (--dialect sqlite, the default) or `psql`
            (--dialect postgres).

            Examples:
              strata export League.strata > league.json
              strata export League.strata --at 120 --format ndjson --entity Player
              strata export League.strata --format csv --output league-csv
              strata export League.strata --format sql | sqlite3 league.db
              strata export League.strata --format sql --dialect postgres | psql league
            """
    )

    @OptionGroup var options: StoreOptions

    @Option(help: "json, ndjson, csv or sql.")
    var format: ExportFormat = .json

    @Option(parsing: .unconditional, help: ArgumentHelp("Export the state just after this transaction (default: the head).", valueName: "seq"))
    var at: UInt64?

    @Option(help: "Only this entity (and its sub-entities). Repeatable.")
    var entity: [String] = []

    @Option(help: ArgumentHelp("Write here instead of standard output (a directory for csv).", valueName: "path"))
    var output: String?

    @Option(help: "For --format sql: sqlite or postgres.")
    var dialect: SQLDialect?

    func validate() throws {
        for name in entity { try refuseEmpty(name, "--entity", "give the name of an entity") }
        try refuseEmpty(output, "--output", "give the path of a file (of a directory, for csv)")
        if format == .csv && output == nil {
            throw ValidationError("--format csv writes one file per entity: give --output DIRECTORY")
        }
        if dialect != nil && format != .sql { throw ValidationError("--dialect applies only to --format sql") }
        if let output, format != .csv, Self.isStoreFile(output, store: options.store) {
            throw ValidationError(
                "--output \(output) is the store's own file: exporting there would overwrite the store \(options.store); give another path")
        }
        // (A path without a store is left to the open to refuse: "no Strata store at PATH".)
        if let output, FileManager.default.fileExists(atPath: options.store), EventLog.isPath(output, inside: options.store, orItself: true) {
            throw ValidationError(
                "--output \(output) is inside the store at \(options.store): a file there is one Strata doesn't create in a store's directory, and the store then couldn't be destroyed or replaced; give a path outside it")
        }
    }

    /// Whether `path` is one of the store's own files — `data.mdb`, `lock.mdb` or a segment
    /// file — by any name (a symlink, `..`): the export replaces its output file, and
    /// replacing one of those destroys the store it reads. (csv writes `ENTITY.csv` files,
    /// which are never the store's.)
    static func isStoreFile(_ path: String, store: String) -> Bool {
        guard let target = fileIdentity(path) else { return false }
        var own = ["data.mdb", "lock.mdb"].map { (store as NSString).appendingPathComponent($0) }
        let segments = (store as NSString).appendingPathComponent("segments")
        own += ((try? FileManager.default.contentsOfDirectory(atPath: segments)) ?? []).map { (segments as NSString).appendingPathComponent($0) }
        return own.contains { fileIdentity($0) == target }
    }

    /// The device and inode of the file at `path` (following symlinks), nil when there is none.
    private static func fileIdentity(_ path: String) -> [UInt64]? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: (path as NSString).resolvingSymlinksInPath),
            let device = (attributes[.systemNumber] as? NSNumber)?.uint64Value,
            let inode = (attributes[.systemFileNumber] as? NSNumber)?.uint64Value
        else { return nil }
        return [device, inode]
    }

    func run() throws {
        try runCommand {
            let log = try options.openReadOnly()
            try log.read { reader in
                let head = try reader.head
                if let at {
                    try log.checkSequence(at, head: head)
                    // A migration's take-out (spec 0004 §4.5) is no state the store was ever in:
                    // its values are out, the put-back's not in (before, exported as all nil).
                    try log.refuseMidMigration(reader, at, head: head, verb: "Export")
                }
                // A point before a migration is exported in the terms of the model version
                // the store's data was in then: its entities and property names (before, the
                // newest version's: a renamed property showed nil, its old name's values and a
                // removed property's were left out).
                let version = try at.map { try reader.modelVersion(asOf: $0) } ?? log.modelVersion
                let model = version == log.modelVersion ? log.model : try log.storedModel(version: version)
                let concrete = version == log.modelVersion ? log.concreteEntityNames : try log.concreteEntityNames(modelVersion: version)
                // Before, an entity a later version added was refused as one "the store's model"
                // doesn't have, listing the earlier version's entities as the model's.
                if let at, version != log.modelVersion, let missing = entity.first(where: { model.entity(named: $0) == nil }) {
                    throw CommandFailure(
                        "model version \(version), which the store's data was in at sequence \(at), has no entity \(missing) (its entities: \(model.entities.map(\.name).sorted().joined(separator: ", ")))")
                }
                let exported = try Set(entity.isEmpty ? concrete : Array(log.entityNames(including: entity, in: model)))
                let layouts = try concrete.filter { exported.contains($0) }.map { name in
                    EntityLayout(name: name, properties: try log.storedProperties(ofEntity: name, modelVersion: version).filter(\.isRecorded))
                }
                if format == .csv || format == .sql { try Self.checkKeyColumn(layouts) }
                if format == .sql { try Self.checkSQLNames(layouts, dialect: dialect ?? .sqlite) }
                let writer: any SnapshotWriter
                switch format {
                case .json: writer = JSONSnapshotWriter(log: log, out: try sink(), sequence: at ?? head)
                case .ndjson: writer = NDJSONSnapshotWriter(log: log, out: try sink())
                case .csv: writer = try CSVSnapshotWriter(log: log, directory: output ?? ".")
                case .sql: writer = SQLSnapshotWriter(log: log, out: try sink(), dialect: dialect ?? .sqlite, sequence: at ?? head)
                }
                do {
                    try writer.begin(layouts)
                    for layout in layouts {
                        try writer.beginEntity(layout)
                        try Snapshot.forEachObject(of: layout.name, asOf: at, reader) { id, values in
                            try writer.object(id, values, layout)
                        }
                        try writer.endEntity(layout)
                    }
                    try writer.end()
                } catch {
                    // Stopped partway (postgres meeting a NUL, a csv file that can't be made, a
                    // store that can't be read): what --output holds so far is taken back.
                    throw writer.abandon(error)
                }
            }
        }
    }

    /// CSV and SQL name the key column `uri`, beside a column per property: a property
    /// called `uri` (in any case, as sqlite compares column names) would make a second
    /// `uri` column, which sqlite refuses and CSV readers can't tell apart. Refused before
    /// anything is written; JSON keeps the URI outside `values` and has no clash.
    static func checkKeyColumn(_ layouts: [EntityLayout]) throws {
        for layout in layouts {
            if let property = layout.properties.first(where: { $0.name.lowercased() == "uri" }) {
                throw CommandFailure(
                    "entity \(layout.name) has a property named \"\(property.name)\", which clashes with the key column \"uri\" of csv and sql exports; export it with --format json or ndjson, which keep the URI apart from the values")
            }
        }
    }

    /// Table and column names the SQL database would take as one — sqlite compares them
    /// without ASCII case (`name` and `Name`, entities `Team` and `team`), postgres cuts them
    /// to 63 bytes — and an entity named as another's join table (`Team_players`): refused
    /// before anything is written, naming both (before, the script stopped halfway in the
    /// database with `duplicate column name` or `table … already exists`).
    static func checkSQLNames(_ layouts: [EntityLayout], dialect: SQLDialect) throws {
        func key(_ name: String) -> String {
            switch dialect {
            case .sqlite:
                return String(String.UnicodeScalarView(name.unicodeScalars.map { (65...90).contains($0.value) ? Unicode.Scalar(UInt8($0.value + 32)) : $0 }))
            case .postgres:
                return String(decoding: Array(name.utf8.prefix(63)), as: UTF8.self)
            }
        }
        let database = dialect == .sqlite ? "sqlite, which compares names without case" : "postgres, which keeps 63 bytes of a name"
        var tables: [String: String] = [:]
        func claim(_ table: String, _ what: String) throws {
            if let other = tables[key(table)] {
                throw CommandFailure(
                    "\(other) and \(what) would be one table in \(database); export with --format json, ndjson or csv")
            }
            tables[key(table)] = what
        }
        for layout in layouts {
            try claim(layout.name, "entity \(layout.name) (table \"\(layout.name)\")")
            var columns: [String: String] = [:]
            for property in layout.properties {
                if case .relationship(_, true, _, _, _) = property.kind {
                    let table = SQLSnapshotWriter.joinTable(layout.name, property.name)
                    try claim(table, "the join table of \(layout.name).\(property.name) (table \"\(table)\")")
                } else if let other = columns[key(property.name)] {
                    throw CommandFailure(
                        "entity \(layout.name)'s properties \"\(other)\" and \"\(property.name)\" would be one column in \(database); export with --format json, ndjson or csv")
                } else {
                    columns[key(property.name)] = property.name
                }
            }
        }
    }

    private func sink() throws -> OutputSink {
        if let output { return try OutputSink(path: output) }
        return OutputSink()
    }
}

/// The export formats.
enum ExportFormat: String, ExpressibleByArgument, CaseIterable {
    case json, ndjson, csv, sql
}

/// The SQL dialects `export --format sql` writes.
enum SQLDialect: String, ExpressibleByArgument, CaseIterable {
    case sqlite, postgres
}

/// An entity's exported columns: its recorded stored properties, sorted by name.
struct EntityLayout {
    let name: String
    let properties: [StoredPropertyDescription]
}

/// Walks the objects of a snapshot one at a time.
enum Snapshot {
    /// Calls `body` with each object of exactly `entity`, in primary-key order: the live ones,
    /// or with `sequence` the ones alive just after it, each rebuilt on its own from the
    /// transactions that touched it (so memory stays flat however many objects there are).
    static func forEachObject(
        of entity: String, asOf sequence: UInt64?, _ reader: borrowing LogReader,
        _ body: (StoredObjectID, [String: LogValue]) throws -> Void
    ) throws {
        guard let sequence else {
            try reader.forEachObject(of: entity, includingSubentities: false) { object in
                try body(object.id, object.values)
                return .next
            }
            return
        }
        let last = try reader.lastPrimaryKey(of: entity)
        guard last > 0 else { return }
        // In batches: a transaction that touched many of a batch's objects is read once for
        // the batch (one at a time, a bulk update of 100k objects was read 100k times), and
        // a large one is kept for the next batches; memory holds one batch.
        var first: UInt64 = 1
        var kept: [UInt64: TransactionEvent] = [:]
        while first <= last {
            let end = first + min(last - first, batchSize - 1)
            let ids = (first...end).map { StoredObjectID(entity: entity, primaryKey: $0) }
            let values = try reader.objects(ids, asOf: sequence, keeping: &kept)
            for id in ids {
                if let object = values[id] { try body(id, object) }
            }
            if end == last { break }
            first = end + 1
        }
    }

    /// How many objects `forEachObject` rebuilds as of a sequence at once (and `replay --diff` compares).
    static let batchSize: UInt64 = 4096
}

/// Writes a snapshot in one format.
protocol SnapshotWriter {
    func begin(_ layouts: [EntityLayout]) throws
    func beginEntity(_ layout: EntityLayout) throws
    func object(_ id: StoredObjectID, _ values: [String: LogValue], _ layout: EntityLayout) throws
    func endEntity(_ layout: EntityLayout) throws
    func end() throws
    /// Takes back what was written when the export stops at `error`; the error to end with.
    func abandon(_ error: any Error) -> any Error
}

extension SnapshotWriter {
    func begin(_ layouts: [EntityLayout]) throws {}
    func beginEntity(_ layout: EntityLayout) throws {}
    func endEntity(_ layout: EntityLayout) throws {}
}

// MARK: - JSON and NDJSON

/// `{"uri":…,"values":{…}}` with every recorded property, sorted, nil as null.
func objectJSON(_ id: StoredObjectID, _ values: [String: LogValue], _ layout: EntityLayout, _ log: EventLog) -> String {
    let fields = layout.properties.map { property in
        ValueRendering.jsonString(property.name) + ":" + ValueRendering.plainJSON(values[property.name] ?? .null, log)
    }
    return "{\"uri\":\(ValueRendering.jsonString(log.uri(id))),\"values\":{\(fields.joined(separator: ","))}}"
}

final class JSONSnapshotWriter: SnapshotWriter {
    let log: EventLog
    let out: OutputSink
    let sequence: UInt64
    private var firstEntity = true
    private var firstObject = true
    /// Whether the document has begun, and an entity's array is open.
    private var begun = false
    private var inEntity = false

    init(log: EventLog, out: OutputSink, sequence: UInt64) {
        self.log = log
        self.out = out
        self.sequence = sequence
    }

    func begin(_ layouts: [EntityLayout]) throws {
        out.line("{\"store\":\(ValueRendering.jsonString(log.storeUUID.uuidString)),\"sequence\":\(sequence),\"entities\":{")
        begun = true
    }

    func beginEntity(_ layout: EntityLayout) throws {
        out.line((firstEntity ? "" : ",") + ValueRendering.jsonString(layout.name) + ":[")
        firstEntity = false
        firstObject = true
        inEntity = true
    }

    func object(_ id: StoredObjectID, _ values: [String: LogValue], _ layout: EntityLayout) throws {
        out.line((firstObject ? "" : ",") + objectJSON(id, values, layout, log))
        firstObject = false
    }

    func endEntity(_ layout: EntityLayout) throws {
        out.line("]")
        inEntity = false
    }

    func end() throws {
        out.line("}}")
        out.close()
    }

    /// A regular `--output` file is taken back (`OutputSink.abandon`). Output that can't be
    /// — standard output, a pipe — gets the document closed, the objects written so far in
    /// it and `"error"` its last member, so it stays well-formed JSON that says it is
    /// incomplete (before, it was left unfinished, or, when the error came before the first
    /// 64 KiB were written, nothing at all was).
    func abandon(_ error: any Error) -> any Error {
        guard begun, out.fileIdentity == nil, !(error is ExitCode) else { return out.abandon(error) }
        if inEntity { out.line("]") }
        out.endDocument("},", error: "\(error)")
        out.close()
        return error
    }
}

final class NDJSONSnapshotWriter: SnapshotWriter {
    let log: EventLog
    let out: OutputSink

    init(log: EventLog, out: OutputSink) {
        self.log = log
        self.out = out
    }

    func object(_ id: StoredObjectID, _ values: [String: LogValue], _ layout: EntityLayout) throws {
        out.line("{\"entity\":\(ValueRendering.jsonString(layout.name)),\(objectJSON(id, values, layout, log).dropFirst())")
    }

    func end() throws { out.close() }

    func abandon(_ error: any Error) -> any Error { out.abandon(error) }
}

// MARK: - CSV

/// RFC 4180: fields with a comma, a double quote, CR or LF are quoted, quotes doubled;
/// records end with CRLF.
final class CSVSnapshotWriter: SnapshotWriter {
    let log: EventLog
    let directory: String
    private var out: OutputSink?
    /// The entity files written, which a failure later takes back.
    private let finished: FinishedFiles

    init(log: EventLog, directory: String) throws {
        self.log = log
        self.directory = directory
        var isDirectory: ObjCBool = false
        let made = EventLog.firstMissingAncestor(of: directory)
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw CommandFailure("--output \(directory) is a file; csv needs a directory") }
        } else {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                // Before, Foundation's error dump (`Error Domain=NSCocoaErrorDomain Code=4 …`).
                throw CommandFailure("cannot create the directory \(directory) for the csv files: \(OutputSink.reason(error))")
            }
        }
        finished = FinishedFiles(directory: directory, madeDirectory: made)
    }

    static func field(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    func beginEntity(_ layout: EntityLayout) throws {
        let sink = try OutputSink(path: (directory as NSString).appendingPathComponent("\(layout.name).csv"))
        sink.finishedBefore = finished
        sink.write((["uri"] + layout.properties.map(\.name)).map(Self.field).joined(separator: ",") + "\r\n")
        out = sink
    }

    /// A value's field: no value is an empty field, a value whose text is empty (an empty
    /// string, empty data, a to-many without members) the quoted empty field `""` — the
    /// convention of PostgreSQL's COPY and most CSV readers that tell them apart (before,
    /// both were an empty field).
    func field(_ value: LogValue) -> String {
        if case .null = value { return "" }
        let text = ValueRendering.csvText(value, log)
        return text.isEmpty ? "\"\"" : Self.field(text)
    }

    func object(_ id: StoredObjectID, _ values: [String: LogValue], _ layout: EntityLayout) throws {
        let fields = [Self.field(log.uri(id))] + layout.properties.map { field(values[$0.name] ?? .null) }
        out?.write(fields.joined(separator: ",") + "\r\n")
    }

    func endEntity(_ layout: EntityLayout) throws {
        out?.close()
        if let out { finished.add((directory as NSString).appendingPathComponent("\(layout.name).csv"), out) }
        out = nil
    }

    func end() throws {}

    func abandon(_ error: any Error) -> any Error {
        if let out { return out.abandon(error) }
        let note = finished.takeBack()
        return note.isEmpty ? error : CommandFailure("\(error)\(note)")
    }
}

// MARK: - SQL

/// CREATE TABLE and INSERT statements for sqlite3 or psql, in one transaction.
final class SQLSnapshotWriter: SnapshotWriter {
    let log: EventLog
    let out: OutputSink
    let dialect: SQLDialect
    let sequence: UInt64

    init(log: EventLog, out: OutputSink, dialect: SQLDialect, sequence: UInt64) {
        self.log = log
        self.out = out
        self.dialect = dialect
        self.sequence = sequence
    }

    static func identifier(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
    static func string(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }
    static func joinTable(_ entity: String, _ property: String) -> String { "\(entity)_\(property)" }

    func columnType(_ property: StoredPropertyDescription) -> String {
        guard case .attribute(let type) = property.kind else { return "TEXT" }
        switch type {
        case .int16: return "SMALLINT"
        case .int32: return "INTEGER"
        case .int64: return "BIGINT"
        // sqlite's NUMERIC keeps 15 digits (12345678901234567890.5 became 1.23456789012346e+19):
        // the exact text, as for dates.
        case .decimal: return dialect == .sqlite ? "TEXT" : "NUMERIC"
        case .double: return "DOUBLE PRECISION"
        case .float: return "REAL"
        case .string, .uri: return "TEXT"
        case .boolean: return "BOOLEAN"
        case .date: return dialect == .sqlite ? "TEXT" : "TIMESTAMP WITH TIME ZONE"
        case .binaryData, .transformable: return dialect == .sqlite ? "BLOB" : "BYTEA"
        case .uuid: return dialect == .sqlite ? "TEXT" : "UUID"
        }
    }

    /// A string value's literal. SQL string literals can't hold U+0000, and `sqlite3` reads
    /// its input by lines, dropping the CR of every CRLF, inside a literal too: sqlite gets
    /// each NUL and CR as `char(0)`, `char(13)` joined in (`'a' || char(0) || 'b'`; before, a
    /// string's CRLF came back as LF); postgres text can't hold NUL at all, so the export
    /// fails naming the object and property.
    func text(_ text: String, _ id: StoredObjectID, _ property: String) throws -> String {
        guard text.unicodeScalars.contains(where: { $0 == "\u{0}" || ($0 == "\r" && dialect == .sqlite) }) else { return Self.string(text) }
        switch dialect {
        case .sqlite:
            var pieces: [String] = []
            var piece = String.UnicodeScalarView()
            for scalar in text.unicodeScalars {
                if scalar == "\u{0}" || scalar == "\r" {
                    pieces.append(Self.string(String(piece)) + " || char(\(scalar.value)) || ")
                    piece = String.UnicodeScalarView()
                } else {
                    piece.append(scalar)
                }
            }
            return pieces.joined() + Self.string(String(piece))
        case .postgres:
            throw CommandFailure(
                "\(log.uri(id)) property \(property) holds a string with a NUL character (U+0000), which postgres text can't hold; export with --dialect sqlite or --format json")
        }
    }

    func literal(_ value: LogValue, _ id: StoredObjectID, _ property: String) throws -> String {
        if case .attribute(.string(let v)) = value { return try text(v, id, property) }
        if case .attribute(.date(let v)) = value, dialect == .postgres { return try postgresDate(v, id, property) }
        if dialect == .sqlite {
            switch value {
            case .attribute(.double(let v)): noteSQLiteLoss(v, id, property)
            case .attribute(.float(let v)): noteSQLiteLoss(Double(v), id, property)
            default: break
            }
        }
        return literal(value)
    }

    /// What sqlite can't hold, noted to be said on stderr (`warnings`), per property: a NaN
    /// (sqlite has none: written, and read back, as NULL) and -0.0 (written `-0.0`, but a
    /// REAL column stores an integral value as an integer, so it reads back 0.0). Before, both
    /// changed without a word.
    private func noteSQLiteLoss(_ v: Double, _ id: StoredObjectID, _ property: String) {
        let what: String
        if v.isNaN {
            what = "holds NaN, which sqlite can't hold: written as NULL"
        } else if v == 0 && v.sign == .minus {
            what = "holds -0.0, which a sqlite REAL column keeps as 0.0"
        } else {
            return
        }
        let key = "\(id.entity).\(property): \(what)"
        if let index = losses.firstIndex(where: { $0.key == key }) {
            losses[index].more += 1
        } else {
            losses.append((key, "\(id.entity).\(property): \(log.uri(id)) \(what)", 0))
        }
    }

    /// Values sqlite can't hold, by entity, property and kind: the first object's line, and how many more.
    private var losses: [(key: String, line: String, more: Int)] = []

    /// A date's literal for postgres, which reads the ISO text only from year 1 on (it
    /// refused `0000-12-31T23:59:59.000000Z` and `-1200-…` as out of range, and the number
    /// text of a date with no ISO form): earlier and later ones as `to_timestamp(SECONDS)`,
    /// infinities as `'infinity'`, `'-infinity'`; NaN and a date outside postgres's range
    /// (4714 BC to 294276 AD) stop the export naming the object and property.
    func postgresDate(_ date: Date, _ id: StoredObjectID, _ property: String) throws -> String {
        let seconds = date.timeIntervalSince1970
        if seconds.isInfinite { return seconds < 0 ? "'-infinity'" : "'infinity'" }
        guard !seconds.isNaN else {
            throw CommandFailure(
                "\(log.uri(id)) property \(property) holds a NaN date, which postgres timestamps can't hold; export with --dialect sqlite or --format json")
        }
        guard seconds >= -210_866_803_200, seconds < 9_224_318_016_000 else {
            throw CommandFailure(
                "\(log.uri(id)) property \(property) holds the date \(Timestamps.format(date)), outside postgres's timestamp range (4714 BC to 294276 AD); export with --dialect sqlite or --format json")
        }
        if seconds >= -62_135_596_800 && seconds < 9e12 { return Self.string(Timestamps.format(date)) }
        return "to_timestamp(\(String(format: "%.6f", seconds)))"
    }

    func literal(_ value: LogValue) -> String {
        switch value {
        case .null, .references: return "NULL"
        case .reference(let id): return Self.string(log.uri(id))
        case .attribute(let attribute):
            switch attribute {
            case .int16(let v): return String(v)
            case .int32(let v): return String(v)
            case .int64(let v): return String(v)
            case .decimal(let v): return dialect == .sqlite ? Self.string(v.description) : v.description
            case .double(let v): return float(v)
            case .float(let v): return v.isFinite && !(v == 0 && v.sign == .minus) ? v.description : float(Double(v))
            case .string(let v): return Self.string(v)
            case .boolean(let v): return v ? "TRUE" : "FALSE"
            case .date(let v): return Self.string(Timestamps.format(v))
            case .binaryData(let v), .transformable(let v):
                let hex = v.map { String(format: "%02x", $0) }.joined()
                return dialect == .sqlite ? "X'\(hex)'" : "'\\x\(hex)'::bytea"
            case .uuid(let v): return Self.string(v.uuidString)
            case .uri(let v): return Self.string(v.absoluteString)
            }
        }
    }

    func float(_ v: Double) -> String {
        // A bare -0.0 is a numeric constant to postgres, which has no negative zero: as text,
        // it is read as the column's type and keeps its sign.
        if v == 0 && v.sign == .minus && dialect == .postgres { return "'-0'" }
        if v.isFinite, v != 0, dialect == .sqlite, v.magnitude < Self.sqliteExactBelow { return Self.exactSQLite(v) }
        if v.isFinite { return v.description }
        switch dialect {
        case .sqlite: return v.isNaN ? "NULL" : (v < 0 ? "-9e999" : "9e999")
        case .postgres: return v.isNaN ? "'NaN'" : (v < 0 ? "'-Infinity'" : "'Infinity'")
        }
    }

    /// Below this magnitude (2^-900, about 1.2e-271: the smallest normal doubles and the
    /// subnormals), `sqlite3` reads many doubles' shortest decimal text one unit in the last
    /// place off (3.40: 8% of random subnormals, 0.3% of random doubles near 1e-300; above
    /// it, about one in 6,000), so such values are written exactly, by `exactSQLite`.
    static let sqliteExactBelow = 0x1p-900

    /// `v` as an expression sqlite evaluates to exactly `v`: its significand M (an integer
    /// below 2^53, exact as a REAL) divided by 2^E, in steps of at most 2^62 (integer
    /// literals, exact as REALs), `(CAST(M AS REAL) / 4611686018427387904 / … / 2^r)`. Each
    /// step divides by a power of two, and every quotient is a multiple of v's last bit that
    /// is at least v, so none rounds.
    static func exactSQLite(_ v: Double) -> String {
        var significand = v.exponentBitPattern == 0 ? v.significandBitPattern : v.significandBitPattern | (1 << 52)
        var exponent = (v.exponentBitPattern == 0 ? 1 : Int(v.exponentBitPattern)) - 1075
        while significand > 0 && significand & 1 == 0 && exponent < 0 {
            significand >>= 1
            exponent += 1
        }
        var text = "(CAST(\(v.sign == .minus ? "-" : "")\(significand) AS REAL)"
        var remaining = -exponent
        while remaining >= 62 {
            text += " / 4611686018427387904"
            remaining -= 62
        }
        if remaining > 0 { text += " / \(UInt64(1) << UInt64(remaining))" }
        return text + ")"
    }

    func isToMany(_ property: StoredPropertyDescription) -> Bool {
        if case .relationship(_, true, _, _, _) = property.kind { return true }
        return false
    }

    func begin(_ layouts: [EntityLayout]) throws {
        out.line("-- strata export of store \(log.storeUUID.uuidString) as of sequence \(sequence) (\(dialect.rawValue))")
        out.line("BEGIN;")
        for layout in layouts {
            let columns = ["\(Self.identifier("uri")) TEXT PRIMARY KEY"]
                + layout.properties.filter { !isToMany($0) }.map { "\(Self.identifier($0.name)) \(columnType($0))" }
            out.line("CREATE TABLE \(Self.identifier(layout.name)) (\(columns.joined(separator: ", ")));")
            for property in layout.properties where isToMany(property) {
                out.line("CREATE TABLE \(Self.identifier(Self.joinTable(layout.name, property.name))) (\"source\" TEXT NOT NULL, \"target\" TEXT NOT NULL, \"position\" INTEGER NOT NULL);")
            }
        }
    }

    func object(_ id: StoredObjectID, _ values: [String: LogValue], _ layout: EntityLayout) throws {
        let scalar = layout.properties.filter { !isToMany($0) }
        let names = ([Self.identifier("uri")] + scalar.map { Self.identifier($0.name) }).joined(separator: ", ")
        let literals = ([Self.string(log.uri(id))] + (try scalar.map { try literal(values[$0.name] ?? .null, id, $0.name) })).joined(separator: ", ")
        out.line("INSERT INTO \(Self.identifier(layout.name)) (\(names)) VALUES (\(literals));")
        for property in layout.properties where isToMany(property) {
            guard case .references(let targets) = values[property.name] ?? .null else { continue }
            let table = Self.identifier(Self.joinTable(layout.name, property.name))
            for (position, target) in targets.enumerated() {
                out.line("INSERT INTO \(table) (\"source\", \"target\", \"position\") VALUES (\(Self.string(log.uri(id))), \(Self.string(log.uri(target))), \(position));")
            }
        }
    }

    func abandon(_ error: any Error) -> any Error { out.abandon(error) }

    func end() throws {
        out.line("COMMIT;")
        out.close()
        for loss in losses {
            printError("strata: warning: \(loss.line)\(loss.more == 0 ? "" : " (and \(loss.more) more object\(loss.more == 1 ? "" : "s"))")")
        }
    }
}
