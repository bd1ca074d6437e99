import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// Every attribute type with awkward values, relationships of each kind, inheritance, and
/// entity and property names that are SQL keywords.
func fidelityModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Item") {
            Attribute("i16", .int16)
            Attribute("i32", .int32)
            Attribute("i64", .int64)
            Attribute("dec", .decimal)
            Attribute("dbl", .double)
            Attribute("flt", .float)
            Attribute("text", .string)
            Attribute("flag", .boolean)
            Attribute("when", .date)
            Attribute("blob", .binaryData)
            Attribute("ident", .uuid)
            Attribute("link", .uri)
            Attribute("packed", .transformable(valueTypeName: "Data"))
            Relationship("owner", to: "Group", inverse: "items")
            Relationship("queuedIn", to: "Group", inverse: "queue")
        }
        Entity("Group") {
            Attribute("name", .string)
            Relationship("items", to: "Item", inverse: "owner", toMany: true)
            Relationship("queue", to: "Item", inverse: "queuedIn", toMany: true, ordered: true)
        }
        Entity("Order") {
            Attribute("select", .string)
            Attribute("group", .int64)
        }
        Entity("Rush", parent: "Order") {
            Attribute("from", .string)
        }
        Entity("Empty") {
            Attribute("x", .string)
        }
    }
}

/// Awkward values, one column each; row n has each column's n-th value, nil past its end.
enum FidelityValues {
    static let i16: [AttributeValue] = [.int16(.min), .int16(.max), .int16(0)]
    static let i32: [AttributeValue] = [.int32(.min), .int32(.max)]
    static let i64: [AttributeValue] = [.int64(.min), .int64(.max), .int64(-1)]
    static let decimals = [
        "12345678901234567890.123456789", "-0.000000000000000000000000000001", "0.1000000000000000000001",
        "99999999999999999999999999999999999999", "0", "-42.5",
    ]
    static let dec: [AttributeValue] = decimals.compactMap { Decimal(string: $0).map { .decimal($0) } }
    static let doubles: [Double] = [
        .nan, .infinity, -.infinity, -0.0, 0.1, 1.0 / 3, .greatestFiniteMagnitude, .leastNonzeroMagnitude, 1e300, -2.5e-300, 123456789012345680,
    ]
    static let dbl: [AttributeValue] = doubles.map { .double($0) }
    static let floats: [Float] = [.infinity, -0.0, .nan, 0.1, .greatestFiniteMagnitude, .leastNonzeroMagnitude, -.infinity]
    static let flt: [AttributeValue] = floats.map { .float($0) }
    static let strings = [
        "'); DROP TABLE \"Item\"; --", "comma, \"quote\"\r\nCRLF\nLF\rCR\ttab", "a\u{0}b", "", "日本語 🏳️‍🌈 e\u{301} \u{2028}\u{2029} \\ back",
        " lead and trail ", String(repeating: "long,\"line\"\n", count: 9000), "NULL", "=1+2", "\u{7f}\u{1}\u{1f}",
    ]
    static let text: [AttributeValue] = strings.map { .string($0) }
    static let flag: [AttributeValue] = [.boolean(true), .boolean(false)]
    static let dates: [Date] = [
        Date(timeIntervalSince1970: 1_767_225_600.123456), Date(timeIntervalSince1970: -62_135_596_801),
        Date(timeIntervalSince1970: -1e11), Date(timeIntervalSince1970: 2.5e11), Date(timeIntervalSince1970: 1e13),
        Date(timeIntervalSince1970: 0.5), Date(timeIntervalSince1970: -0.25),
    ]
    static let when: [AttributeValue] = dates.map { .date($0) }
    static let blobs = [Data([0, 0xff, 0x27, 0x22, 0x5c, 0x0a]), Data(), Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })]
    static let blob: [AttributeValue] = blobs.map { .binaryData($0) }
    static let uuids = [UUID(), UUID(uuidString: "00000000-0000-0000-0000-000000000000") ?? UUID()]
    static let ident: [AttributeValue] = uuids.map { .uuid($0) }
    static let links = ["https://example.com/a?b=c,d&e=%22f%22#'x'", "file:///tmp/a%20b", "urn:isbn:0451450523"]
    static let link: [AttributeValue] = links.compactMap { URL(string: $0).map { .uri($0) } }
    static let packed: [AttributeValue] = [.transformable(Data([1, 2, 0, 0x27])), .transformable(Data())]

    static let columns: [(String, [AttributeValue])] = [
        ("i16", i16), ("i32", i32), ("i64", i64), ("dec", dec), ("dbl", dbl), ("flt", flt), ("text", text),
        ("flag", flag), ("when", when), ("blob", blob), ("ident", ident), ("link", link), ("packed", packed),
    ]
    /// One more row than the longest column: the last has no value at all.
    static var rowCount: Int { columns.map(\.1.count).max().map { $0 + 1 } ?? 1 }

    static func value(_ column: String, row: Int) -> AttributeValue? {
        guard let values = columns.first(where: { $0.0 == column })?.1, row < values.count else { return nil }
        return values[row]
    }
}

/// A store holding `FidelityValues` as Item/p1…, a group owning items 1 and 2 with items 3,
/// 1 queued (in that order), orders and a rush (sub-entity), and no Empty.
func makeFidelityStore() throws -> LeagueStore {
    let directory = try TemporaryDirectory("strata-export-review")
    let path = directory.file("Fidelity.strata")
    var configuration = EventLog.Configuration()
    configuration.initialMapSize = 16 << 20
    let log = try EventLog(path: path, model: try fidelityModel(), configuration: configuration)
    var draft = TransactionDraft()
    var items: [DraftObjectID] = []
    for row in 0..<FidelityValues.rowCount {
        var values: [String: DraftValue] = [:]
        for (name, _) in FidelityValues.columns {
            if let value = FidelityValues.value(name, row: row) { values[name] = .attribute(value) }
        }
        items.append(draft.insert("Item", values: values))
    }
    let group = draft.insert("Group", values: ["name": str("g")])
    draft.update(group, values: ["queue": .references([items[2], items[0]])])
    draft.update(items[0], values: ["owner": .reference(group)])
    draft.update(items[1], values: ["owner": .reference(group)])
    _ = draft.insert("Order", values: ["select": str("s'1"), "group": .attribute(.int64(7))])
    _ = draft.insert("Rush", values: ["select": str("s2"), "group": .attribute(.int64(8)), "from": str("f")])
    try log.commit(draft)
    return LeagueStore(
        directory: directory, path: path, storeUUID: log.storeUUID, head: try log.head,
        firstPlayerURI: "x-strata://\(log.storeUUID.uuidString)/Item/p1")
}

func hexText(_ data: Data) -> String { data.map { String(format: "%02X", $0) }.joined() }

/// Runs `tool` (found on PATH) with `arguments`.
func tool(_ name: String, _ arguments: String...) throws -> ProcessResult {
    try runProcess(URL(fileURLWithPath: "/usr/bin/env"), [name] + arguments)
}

@Suite("strata export: data fidelity (review 26-7)")
struct ExportReviewCommandTests {
    /// The Item objects' URIs by row.
    func itemURI(_ store: LeagueStore, _ row: Int) -> String { store.uri("Item", UInt64(row + 1)) }

    @Test("sql: sqlite3 loads the export and holds every value exactly — a decimal's every digit (before: a NUMERIC column, where sqlite keeps 15 digits: 12345678901234567890.123456789 came back 1.23456789012346e+19), strings with quotes, NUL, newlines, emoji, 100 KB; int extremes; doubles; dates; bytes; keyword names; relationships; an empty entity")
    func sqliteLoadsEveryValue() throws {
        guard toolIsInstalled("sqlite3") else { return }
        let store = try makeFidelityStore()
        let script = store.directory.file("export.sql")
        let result = try strata("export", store.path, "--format", "sql", "--output", script)
        #expect(result.status == 0, "\(result.standardError)")
        let database = store.directory.file("export.db")
        let load = try tool("sqlite3", "-bail", database, ".read \(script)")
        #expect(load.status == 0, "\(load.standardError)")
        func rows(_ sql: String) throws -> [String: [String]] {
            let result = try tool("sqlite3", "-separator", "\u{1f}", "-newline", "\u{1e}", database, sql)
            #expect(result.status == 0, "\(result.standardError)")
            var byURI: [String: [String]] = [:]
            for line in result.standardOutput.split(separator: "\u{1e}") {
                let fields = line.split(separator: "\u{1f}", omittingEmptySubsequences: false).map(String.init)
                byURI[fields[0]] = Array(fields.dropFirst())
            }
            return byURI
        }
        let items = try rows(
            #"SELECT uri, i16, i32, i64, CAST(dec AS TEXT), quote(dbl), quote(flt), hex(CAST("text" AS BLOB)), flag, "when", hex(blob), ident, link, hex(packed), typeof("text"), owner FROM "Item""#)
        #expect(items.count == FidelityValues.rowCount, "the injection in a string is data: every row is there")
        for row in 0..<FidelityValues.rowCount {
            let got = try required(items[itemURI(store, row)])
            func expect(_ index: Int, _ column: String, _ text: (AttributeValue) -> String) {
                let expected = FidelityValues.value(column, row: row).map(text) ?? ""
                #expect(got[index] == expected, "row \(row) \(column): \(got[index]) != \(expected)")
            }
            expect(0, "i16") { if case .int16(let v) = $0 { "\(v)" } else { "?" } }
            expect(1, "i32") { if case .int32(let v) = $0 { "\(v)" } else { "?" } }
            expect(2, "i64") { if case .int64(let v) = $0 { "\(v)" } else { "?" } }
            if case .decimal(let v) = FidelityValues.value("dec", row: row) {
                #expect(Decimal(string: got[3]) == v, "row \(row) decimal: sqlite holds \(got[3]) for \(v)")
            } else {
                #expect(got[3] == "")
            }
            if case .double(let v) = FidelityValues.value("dbl", row: row) {
                let back: Double? = v.isNaN ? nil : (got[4] == "Inf" ? .infinity : got[4] == "-Inf" ? -.infinity : Double(got[4]))
                #expect(v.isNaN ? got[4] == "NULL" : back == v, "row \(row) double \(v): \(got[4])")
            }
            if case .float(let v) = FidelityValues.value("flt", row: row) {
                let back: Float? = got[5] == "Inf" ? .infinity : got[5] == "-Inf" ? -.infinity : Double(got[5]).map { Float($0) }
                #expect(v.isNaN ? got[5] == "NULL" : back == v, "row \(row) float \(v): \(got[5])")
            }
            expect(6, "text") { if case .string(let v) = $0 { hexText(Data(v.utf8)) } else { "?" } }
            if FidelityValues.value("text", row: row) != nil { #expect(got[13] == "text") }
            expect(7, "flag") { if case .boolean(let v) = $0 { v ? "1" : "0" } else { "?" } }
            expect(9, "blob") { if case .binaryData(let v) = $0 { hexText(v) } else { "?" } }
            expect(10, "ident") { if case .uuid(let v) = $0 { v.uuidString } else { "?" } }
            expect(11, "link") { if case .uri(let v) = $0 { v.absoluteString } else { "?" } }
            expect(12, "packed") { if case .transformable(let v) = $0 { hexText(v) } else { "?" } }
        }
        #expect(items[itemURI(store, 0)]?[8] == "2026-01-01T00:00:00.123456Z")
        #expect(items[itemURI(store, 1)]?[8] == "0000-12-31T23:59:59.000000Z")
        #expect(items[itemURI(store, 4)]?[8] == "10000000000000.0")
        #expect(items[itemURI(store, 6)]?[8] == "1969-12-31T23:59:59.750000Z")
        #expect(items[itemURI(store, 0)]?[14] == store.uri("Group", 1))
        #expect(items[itemURI(store, 2)]?[14] == "")
        let queue = try tool("sqlite3", database, #"SELECT source, target, position FROM "Group_queue" ORDER BY position"#)
        #expect(queue.standardOutput == "\(store.uri("Group", 1))|\(itemURI(store, 2))|0\n\(store.uri("Group", 1))|\(itemURI(store, 0))|1\n")
        let keywords = try tool("sqlite3", database, #"SELECT "select", "group", "from" FROM "Rush"; SELECT "select", "group" FROM "Order"; SELECT count(*) FROM "Empty";"#)
        #expect(keywords.standardOutput == "s2|8|f\ns'1|7\n0\n", "\(keywords.standardOutput)\(keywords.standardError)")
    }

    @Test("json and ndjson: valid JSON whose every value reads back as the stored one (NaN and infinities as text, a decimal exact as text, bytes as base64, nil as null)")
    func jsonRoundTrip() throws {
        let store = try makeFidelityStore()
        let json = try strata("export", store.path)
        #expect(json.status == 0, "\(json.standardError)")
        let document = try #require(try parseJSON(json.standardOutput) as? [String: Any])
        let entities = try #require(document["entities"] as? [String: [[String: Any]]])
        #expect(entities.keys.sorted() == ["Empty", "Group", "Item", "Order", "Rush"])
        #expect(entities["Empty"]?.isEmpty == true)
        let ndjson = try strata("export", store.path, "--format", "ndjson", "--entity", "Item")
        let lines = ndjson.standardOutput.split(separator: "\n")
        #expect(lines.count == FidelityValues.rowCount)
        for (objects, source) in [(try #require(entities["Item"]), "json"), (try lines.map { try #require(try parseJSON(String($0)) as? [String: Any]) }, "ndjson")] {
            #expect(objects.count == FidelityValues.rowCount)
            for (row, object) in objects.enumerated() {
                #expect(object["uri"] as? String == itemURI(store, row))
                let values = try #require(object["values"] as? [String: Any])
                for (column, _) in FidelityValues.columns {
                    let got = values[column]
                    let context = "\(source) row \(row) \(column): \(String(describing: got))"
                    switch FidelityValues.value(column, row: row) {
                    case nil: #expect(got is NSNull, "\(context)")
                    case .int16(let v)?: #expect((got as? NSNumber)?.int64Value == Int64(v), "\(context)")
                    case .int32(let v)?: #expect((got as? NSNumber)?.int64Value == Int64(v), "\(context)")
                    case .int64(let v)?: #expect((got as? NSNumber)?.int64Value == v, "\(context)")
                    case .decimal(let v)?: #expect((got as? String).flatMap { Decimal(string: $0) } == v, "\(context)")
                    case .double(let v)?:
                        if v.isNaN { #expect(got as? String == "nan", "\(context)") } else if v.isInfinite {
                            #expect(got as? String == (v < 0 ? "-inf" : "inf"), "\(context)")
                        } else { #expect((got as? NSNumber)?.doubleValue == v, "\(context)") }
                    case .float(let v)?:
                        if v.isNaN { #expect(got as? String == "nan", "\(context)") } else if v.isInfinite {
                            #expect(got as? String == (v < 0 ? "-inf" : "inf"), "\(context)")
                        } else { #expect((got as? NSNumber).map { Float($0.doubleValue) } == v, "\(context)") }
                    case .string(let v)?: #expect(got as? String == v, "\(context)")
                    case .boolean(let v)?: #expect(got as? Bool == v, "\(context)")
                    case .binaryData(let v)?, .transformable(let v)?: #expect((got as? String).flatMap { Data(base64Encoded: $0) } == v, "\(context)")
                    case .uuid(let v)?: #expect(got as? String == v.uuidString, "\(context)")
                    case .uri(let v)?: #expect(got as? String == v.absoluteString, "\(context)")
                    case .date?: #expect(got is String, "\(context)")
                    }
                }
            }
        }
    }

    @Test("csv: a strict RFC 4180 reader (python's csv module) reads back every field")
    func csvRoundTrip() throws {
        guard toolIsInstalled("python3") else { return }
        let store = try makeFidelityStore()
        let output = store.directory.file("csv")
        let result = try strata("export", store.path, "--format", "csv", "--output", output)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: output).sorted() == ["Empty.csv", "Group.csv", "Item.csv", "Order.csv", "Rush.csv"])
        let read = try tool(
            "python3", "-c",
            "import csv, json, sys\nwith open(sys.argv[1], newline='', encoding='utf-8') as f: rows = list(csv.reader(f, strict=True))\nprint(json.dumps(rows))",
            output + "/Item.csv")
        #expect(read.status == 0, "\(read.standardError)")
        let rows = try #require(try parseJSON(read.standardOutput) as? [[String]])
        let header = try #require(rows.first)
        #expect(header == ["uri", "blob", "dbl", "dec", "flag", "flt", "i16", "i32", "i64", "ident", "link", "owner", "packed", "text", "when"])
        #expect(rows.count == FidelityValues.rowCount + 1)
        for (row, fields) in rows.dropFirst().enumerated() {
            #expect(fields.count == header.count)
            let field = Dictionary(uniqueKeysWithValues: zip(header, fields))
            #expect(field["uri"] == itemURI(store, row))
            if case .string(let v) = FidelityValues.value("text", row: row) { #expect(field["text"] == v, "row \(row)") } else { #expect(field["text"] == "") }
            if case .decimal(let v) = FidelityValues.value("dec", row: row) { #expect(field["dec"].flatMap { Decimal(string: $0) } == v) }
            if case .int64(let v) = FidelityValues.value("i64", row: row) { #expect(field["i64"] == "\(v)") }
            if case .binaryData(let v) = FidelityValues.value("blob", row: row) { #expect(field["blob"].flatMap { Data(base64Encoded: $0) } == v) }
            if case .double(let v) = FidelityValues.value("dbl", row: row), v.isFinite { #expect(field["dbl"].flatMap(Double.init) == v) }
        }
        let empty = try String(contentsOfFile: output + "/Empty.csv", encoding: .utf8)
        #expect(empty == "uri,x\r\n")
    }

    @Test("sql --dialect postgres: dates before year 1 and past the ISO form as to_timestamp(SECONDS), infinities as 'infinity', NaN refused naming the object (before: ISO text of year 0 and earlier, and number text, which psql refuses as out of range); with STRATA_EXPORT_REVIEW_PG (a libpq connection string) psql loads it")
    func postgresDates() throws {
        let store = try makeFidelityStore()
        // postgres text can't hold the NUL of Item/p3's string (refused, as specified): replaced.
        let log = try EventLog(openingExistingAt: store.path, readOnly: false)
        var draft = TransactionDraft()
        draft.update(.stored(StoredObjectID(entity: "Item", primaryKey: 3)), values: ["text": str("a b")])
        // 1e13 s is past postgres's range (refused, below); 9.1e12 s, in it, has no ISO form.
        draft.update(.stored(StoredObjectID(entity: "Item", primaryKey: 5)), values: ["when": .attribute(.date(Date(timeIntervalSince1970: 9.1e12)))])
        try log.commit(draft)
        let script = store.directory.file("pg.sql")
        let result = try strata("export", store.path, "--format", "sql", "--dialect", "postgres", "--output", script)
        #expect(result.status == 0, "\(result.standardError)")
        let text = try String(contentsOfFile: script, encoding: .utf8)
        #expect(text.contains("'2026-01-01T00:00:00.123456Z'"))
        #expect(text.contains("to_timestamp(-62135596801.000000)"))
        #expect(text.contains("to_timestamp(-100000000000.000000)"))
        #expect(text.contains("to_timestamp(9100000000000.000000)"))
        #expect(text.contains("'1969-12-31T23:59:59.750000Z'"))
        if let connection = ProcessInfo.processInfo.environment["STRATA_EXPORT_REVIEW_PG"], toolIsInstalled("psql") {
            let schema = "review\(UInt32.random(in: 0...UInt32.max))"
            let load = try tool(
                "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", connection, "-c", "CREATE SCHEMA \(schema)", "-c", "SET search_path TO \(schema)", "-f", script,
                "-c", "SELECT count(*) FROM \"Item\" WHERE \"when\" IS NOT NULL",
                "-c", "SELECT uri || '|' || coalesce(dec::text, '') || '|' || coalesce(encode(convert_to(\"text\", 'UTF8'), 'hex'), '') || '|' || coalesce(encode(blob, 'hex'), '') FROM \"Item\"",
                "-c", "DROP SCHEMA \(schema) CASCADE")
            #expect(load.status == 0, "\(load.standardError)")
            #expect(load.standardOutput.contains("\(FidelityValues.dates.count)"), "\(load.standardOutput)")
            for row in 0..<FidelityValues.rowCount where row != 2 {
                var expected = itemURI(store, row) + "|"
                if case .decimal(let v) = FidelityValues.value("dec", row: row) { expected += "\(v)" }
                expected += "|"
                if case .string(let v) = FidelityValues.value("text", row: row) { expected += hexText(Data(v.utf8)).lowercased() }
                expected += "|"
                if case .binaryData(let v) = FidelityValues.value("blob", row: row) { expected += hexText(v).lowercased() }
                #expect(load.standardOutput.contains(" " + expected + "\n"), "row \(row): \(expected.prefix(200))")
            }
        }

        draft = TransactionDraft()
        _ = draft.insert("Item", values: ["when": .attribute(.date(Date(timeIntervalSince1970: -3e11)))])
        try log.commit(draft)
        let out = try strata("export", store.path, "--format", "sql", "--dialect", "postgres", "--entity", "Item")
        #expect(out.status == 1)
        #expect(out.standardError.contains("\(store.uri("Item", UInt64(FidelityValues.rowCount + 1))) property when holds the date"), "\(out.standardError)")
        #expect(out.standardError.contains("outside postgres's timestamp range"))

        draft = TransactionDraft()
        draft.update(.stored(StoredObjectID(entity: "Item", primaryKey: UInt64(FidelityValues.rowCount + 1))), values: ["when": .attribute(.date(Date(timeIntervalSince1970: .nan)))])
        try log.commit(draft)
        let nan = try strata("export", store.path, "--format", "sql", "--dialect", "postgres", "--entity", "Item")
        #expect(nan.status == 1)
        #expect(nan.standardError.contains("property when holds a NaN date, which postgres timestamps can't hold"), "\(nan.standardError)")
    }

    @Test("export --at HEAD (objects rebuilt from their transactions) is byte for byte the head's export, in every format, sub-entities and an empty entity included")
    func atHeadMatchesHead() throws {
        let store = try makeFidelityStore()
        let log = try EventLog(openingExistingAt: store.path, readOnly: false)
        var draft = TransactionDraft()
        draft.update(.stored(StoredObjectID(entity: "Rush", primaryKey: 1)), values: ["from": str("g\r\nh")])
        draft.delete(.stored(StoredObjectID(entity: "Item", primaryKey: 2)))
        draft.update(.stored(StoredObjectID(entity: "Group", primaryKey: 1)), values: ["queue": .references([.stored(StoredObjectID(entity: "Item", primaryKey: 4))])])
        try log.commit(draft)
        let head = String(try log.head)
        for format in ["json", "ndjson", "sql"] {
            let now = try strata("export", store.path, "--format", format)
            let at = try strata("export", store.path, "--format", format, "--at", head)
            #expect(now.status == 0 && at.status == 0, "\(now.standardError)\(at.standardError)")
            #expect(now.standardOutput == at.standardOutput, "\(format)")
        }
        let before = try strata("export", store.path, "--format", "ndjson", "--entity", "Order", "--at", "1")
        #expect(before.standardOutput.split(separator: "\n").count == 2)
        #expect(before.standardOutput.contains(#"{"entity":"Rush","uri":"\#(store.uri("Rush", 1))","values":{"from":"f","group":8,"select":"s2"}}"#), "\(before.standardOutput)")
    }

    @Test("export --at a point before a migration with --entity naming an entity a later version added: exit 1 naming the version and sequence (before: 'the store's model has no entity Coach (entities: Player)', as if the store didn't have it)")
    func entityAddedLater() throws {
        let directory = try TemporaryDirectory("strata-export-later")
        let path = directory.file("Later.strata")
        do {
            let log = try EventLog(path: path, model: try ManagedObjectModel { Entity("Player") { Attribute("name", .string) } })
            var draft = TransactionDraft()
            _ = draft.insert("Player", values: ["name": str("Ng")])
            try log.commit(draft)
        }
        _ = try EventLog(path: path, model: try ManagedObjectModel {
            Entity("Player") { Attribute("name", .string) }
            Entity("Coach") { Attribute("name", .string) }
        })
        let result = try strata("export", path, "--at", "1", "--entity", "Coach")
        #expect(result.status == 1)
        #expect(result.standardError.contains("model version 1, which the store's data was in at sequence 1, has no entity Coach (its entities: Player)"), "\(result.standardError)")
        #expect(try strata("export", path, "--entity", "Coach").status == 0)
    }

    @Test("sql: names sqlite takes as one — properties differing only in case, an entity named as another's join table — are refused before anything is written, naming both (before: the script failed halfway in sqlite3 with 'duplicate column name' or 'table already exists')")
    func sqlNameClashes() throws {
        let directory = try TemporaryDirectory("strata-export-clash")
        for (index, model) in [
            try ManagedObjectModel {
                Entity("Thing") {
                    Attribute("name", .string)
                    Attribute("Name", .string)
                }
            },
            try ManagedObjectModel {
                Entity("Team") { Relationship("players", to: "Player", inverse: "teams", toMany: true) }
                Entity("Player") { Relationship("teams", to: "Team", inverse: "players", toMany: true) }
                Entity("Player_teams") { Attribute("x", .string) }
            },
            try ManagedObjectModel {
                Entity("Team") { Attribute("x", .string) }
                Entity("team") { Attribute("y", .string) }
            },
        ].enumerated() {
            let path = directory.file("clash\(index).strata")
            _ = try EventLog(path: path, model: model)
            let script = directory.file("clash\(index).sql")
            let result = try strata("export", path, "--format", "sql", "--output", script)
            #expect(result.status == 1, "model \(index): \(result.standardError)")
            #expect(result.standardError.contains("sqlite"), "model \(index): \(result.standardError)")
            #expect(!FileManager.default.fileExists(atPath: script), "nothing is written")
            #expect(result.standardError.contains(["properties \"Name\" and \"name\" would be one column", "the join table of Player.teams (table \"Player_teams\") and entity Player_teams", "entity Team (table \"Team\") and entity team"][index]), "\(result.standardError)")
            if index == 2 {
                // postgres keeps quoted names' case: "Team" and "team" are two tables there.
                let postgres = try strata("export", path, "--format", "sql", "--dialect", "postgres")
                #expect(postgres.status == 0, "\(postgres.standardError)")
            }
        }
    }

    @Test("a large store exports streaming (set STRATA_EXPORT_REVIEW_OBJECTS, and STRATA_EXPORT_REVIEW_RSS=1 to print peak RSS through /usr/bin/time -v)")
    func largeExport() throws {
        let count = Int(ProcessInfo.processInfo.environment["STRATA_EXPORT_REVIEW_OBJECTS"] ?? "") ?? 2000
        // Objects per transaction (STRATA_EXPORT_REVIEW_CHUNK): one large one is what --at keeps longest.
        let chunk = max(1, Int(ProcessInfo.processInfo.environment["STRATA_EXPORT_REVIEW_CHUNK"] ?? "") ?? 10_000)
        let directory = try TemporaryDirectory("strata-export-large")
        let path = directory.file("Large.strata")
        var configuration = EventLog.Configuration()
        configuration.initialMapSize = 64 << 20
        do {
            let log = try EventLog(path: path, model: try fidelityModel(), configuration: configuration)
            var inserted = 0
            while inserted < count {
                var draft = TransactionDraft()
                for n in inserted..<min(count, inserted + chunk) {
                    _ = draft.insert("Item", values: ["i64": .attribute(.int64(Int64(n))), "text": str("object \(n), \"quoted\"\nline")])
                }
                inserted = min(count, inserted + chunk)
                try log.commit(draft)
            }
        }
        for arguments in [["--format", "ndjson"], ["--format", "ndjson", "--at", "\((count + chunk - 1) / chunk)"], ["--format", "sql"]] {
            let output = directory.file("out")
            let result = try runProcess(BuildProducts.executable("strata"), ["export", path, "--output", output] + arguments)
            #expect(result.status == 0, "\(result.standardError)")
            if ProcessInfo.processInfo.environment["STRATA_EXPORT_REVIEW_RSS"] != nil, FileManager.default.isExecutableFile(atPath: "/usr/bin/time") {
                let timed = try runProcess(URL(fileURLWithPath: "/usr/bin/time"), ["-v", BuildProducts.executable("strata").path, "export", path, "--output", output] + arguments)
                let peak = timed.standardError.split(separator: "\n").first { $0.contains("Maximum resident") } ?? "?"
                print("export \(arguments.joined(separator: " ")) of \(count) objects: \(peak)")
            }
        }
        let lines = try String(contentsOfFile: directory.file("out"), encoding: .utf8).split(separator: "\n").filter { $0.hasPrefix("INSERT") }
        #expect(lines.count == count)
    }
}
