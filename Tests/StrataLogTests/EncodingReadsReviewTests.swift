import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// Review of the event encoding, the reads and compaction with dictionaries
/// (`Specs/0004-event-log.md` §2–3, §5, §7).
@Suite("Event log: encoding, reads and dictionary compaction review")
struct EncodingReadsReviewTests {
    /// A model with an index on every attribute type.
    static func indexedModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Thing") {
                Attribute("i16", .int16).indexed()
                Attribute("i32", .int32).indexed()
                Attribute("i64", .int64).indexed()
                Attribute("dec", .decimal).indexed()
                Attribute("dbl", .double).indexed()
                Attribute("flt", .float).indexed()
                Attribute("str", .string).indexed()
                Attribute("flag", .boolean).indexed()
                Attribute("when", .date).indexed()
                Attribute("data", .binaryData).indexed()
                Attribute("id", .uuid).indexed()
                Attribute("link", .uri).indexed()
            }
            Entity("Special", parent: "Thing") {
                Attribute("extra", .string)
            }
        }
    }

    static func decimal(_ text: String) throws -> Decimal {
        try #require(Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")))
    }

    /// The values of `attribute` of the objects an index scan over `range` finds, in its order.
    static func scan(
        _ log: EventLog, _ attribute: String, _ range: IndexRange, reverse: Bool = false, entity: String = "Thing"
    ) throws -> [AttributeValue?] {
        try log.read { reader in
            var ids: [StoredObjectID] = []
            try reader.scanIndex(entity: entity, attribute: attribute, range: range, reverse: reverse) { id in
                ids.append(id)
                return .next
            }
            return try ids.map { id -> AttributeValue? in
                guard case .attribute(let value) = try reader.object(id)?[attribute] else { return nil }
                return value
            }
        }
    }

    static func count(_ log: EventLog, _ attribute: String, _ range: IndexRange) throws -> Int {
        try log.read { try $0.countIndex(entity: "Thing", attribute: attribute, range: range) }
    }

    /// Inserts one Thing per value of `attribute` (nil: no value), one transaction.
    static func insert(_ log: EventLog, _ attribute: String, _ values: [AttributeValue?], entity: String = "Thing") throws {
        var draft = TransactionDraft()
        for value in values {
            draft.insert(entity, values: value.map { [attribute: .attribute($0)] } ?? [:])
        }
        _ = try log.commit(draft)
    }

    // MARK: - Index scans with bounds whose key is cut

    /// `LogReader.scanIndex` documents a cut range bound (a long string, data or URI, a
    /// decimal that isn't a whole number) as making entries candidates to re-check; spec 0004
    /// §5: "range bounds take in the whole key". An exclusive bound skipped the whole key
    /// instead, and so every other value sharing it: `dec > 0.1` missed
    /// 0.10000000000000000001 (same nearest double), `str > "x…xa"` (130 x's) missed "x…xb".
    @Test("an exclusive range bound whose key is cut keeps the values sharing its key (decimals, long strings, data), ascending, descending and counted")
    func exclusiveCutBounds() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try Self.indexedModel())
        let low = try Self.decimal("0.1")
        let mid = try Self.decimal("0.10000000000000000001")
        let high = try Self.decimal("0.2")
        #expect(IndexKeyEncoding.encode(.decimal(low)) == IndexKeyEncoding.encode(.decimal(mid)), "the two decimals share a key")
        try Self.insert(log, "dec", [.decimal(low), .decimal(mid), .decimal(high), nil])
        let long = String(repeating: "x", count: 130)
        try Self.insert(log, "str", ["a", "b", "c"].map { .string(long + $0) })
        let blob = [UInt8](repeating: 7, count: 200)
        try Self.insert(log, "data", [1, 2, 3].map { .binaryData(Data(blob + [$0])) })

        func check(_ attribute: String, _ range: IndexRange, mustFind: [AttributeValue], _ what: String) throws {
            for reverse in [false, true] {
                let found = try Self.scan(log, attribute, range, reverse: reverse)
                for value in mustFind {
                    #expect(found.contains(value), "\(what)\(reverse ? " (descending)" : ""): \(value) is in the range but the scan missed it")
                }
            }
            #expect(try Self.count(log, attribute, range) >= mustFind.count, "\(what): counted")
        }
        try check("dec", IndexRange(lower: .decimal(low), includesLower: false), mustFind: [.decimal(mid), .decimal(high)], "dec > 0.1")
        try check("dec", IndexRange(upper: .decimal(mid), includesUpper: false), mustFind: [.decimal(low)], "dec < 0.1…01")
        try check(
            "dec", IndexRange(lower: .decimal(low), includesLower: false, upper: .decimal(high), includesUpper: true),
            mustFind: [.decimal(mid), .decimal(high)], "0.1 < dec <= 0.2")
        try check("str", IndexRange(lower: .string(long + "a"), includesLower: false), mustFind: [.string(long + "b"), .string(long + "c")], "str > x…a")
        try check("str", IndexRange(upper: .string(long + "c"), includesUpper: false), mustFind: [.string(long + "a"), .string(long + "b")], "str < x…c")
        try check(
            "data", IndexRange(lower: .binaryData(Data(blob + [1])), includesLower: false, upper: .binaryData(Data(blob + [3])), includesUpper: false),
            mustFind: [.binaryData(Data(blob + [2]))], "data between")
        // A bound whose key is whole stays exact.
        try Self.insert(log, "dec", [.decimal(1), .decimal(2), .decimal(3)])
        #expect(try Self.scan(log, "dec", IndexRange(lower: .decimal(1), includesLower: false, upper: .decimal(3), includesUpper: false)) == [.decimal(2)])
    }
}

// MARK: - The spec's vectors cover every value kind, change, kind and origin

extension EncodingReadsReviewTests {
    /// The spec's vectors (§11) are how another implementation checks its reader and writer;
    /// they lacked a list of references (tag `11`: an insert's or delete's recorded to-many),
    /// a group whose origin is a redo, and a timestamp before 1970 (negative microseconds).
    @Test("the spec's vectors cover every value tag, change operation, transaction kind, group origin and a timestamp before 1970")
    func vectorsCoverEverything() throws {
        let dir = try TemporaryDirectory()
        let log = try EventLog(path: dir.file("store"), model: try vectorModel())
        let document = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: SpecFiles.url("0004-event-log/vectors.json"))) as? [String: Any])
        let vectors = try #require(document["vectors"] as? [[String: Any]])
        var values: Set<String> = []
        var changes: Set<String> = []
        var kinds: Set<String> = []
        var origins: Set<String> = []
        var flags: Set<String> = []
        var before1970 = false
        func note(_ value: LogValue) {
            switch value {
            case .null: values.insert("nil")
            case .reference: values.insert("reference")
            case .references: values.insert("references")
            case .attribute(let attribute): values.insert("\(EventCodec.ValueKind(attribute))")
            }
        }
        for vector in vectors {
            let bytes = try #require(unhex(vector["hex"] as? String ?? ""))
            let event = try bytes.withUnsafeBytes { try EventCodec.decode($0, catalog: log.catalog, context: "vector") }
            if event.timestamp < Date(timeIntervalSince1970: 0) { before1970 = true }
            flags.insert("\(event.author != nil)/\(event.contextName != nil)")
            let kind: String =
                switch event.kind {
                case .save: "save"
                case .undo: "undo"
                case .redo: "redo"
                case .migration: "migration"
                case .import: "import"
                case .reservation: "reservation"
                case .purge: "purge"
                }
            kinds.insert(kind)
            for group in event.groups {
                switch group.origin {
                case .undo?: origins.insert("undo")
                case .redo?: origins.insert("redo")
                case nil: origins.insert("none")
                }
                for change in group.changes {
                    switch change {
                    case .insert(_, let image), .delete(_, let image):
                        changes.insert(change.isInsert ? "insert" : "delete")
                        image.values.forEach(note)
                    case .update(_, let properties):
                        for property in properties {
                            switch property {
                            case .value(_, let before, let after):
                                changes.insert("update")
                                note(before)
                                note(after)
                            case .membership:
                                changes.insert("membership")
                            }
                        }
                    }
                }
            }
        }
        let attributeKinds: [EventCodec.ValueKind] = [
            .int16, .int32, .int64, .decimal, .double, .float, .string, .boolean, .date, .binaryData, .uuid, .uri, .transformable,
        ]
        let wantedValues = Set(attributeKinds.map { "\($0)" } + ["nil", "reference", "references"])
        #expect(wantedValues.subtracting(values).isEmpty, "value kinds no vector holds: \(wantedValues.subtracting(values).sorted())")
        #expect(changes == ["insert", "update", "membership", "delete"], "\(changes)")
        #expect(kinds == ["save", "undo", "redo", "migration", "import", "reservation", "purge"], "\(kinds)")
        #expect(origins == ["none", "undo", "redo"], "group origins: \(origins)")
        #expect(flags == ["false/false", "true/false", "true/true"] || flags.count == 4, "author/context flags: \(flags)")
        #expect(before1970, "no vector has a timestamp before 1970")
    }
}

// MARK: - Chunks

extension EncodingReadsReviewTests {
    /// The `events` rows of `sequence`: (chunk number, size).
    static func chunks(_ log: EventLog, _ sequence: UInt64) throws -> [(UInt32, Int)] {
        try log.environment.read { txn in
            var rows: [(UInt32, Int)] = []
            try txn.forEach(in: log.tables.events, range: .prefix(bigEndianBytes(sequence))) { key, value in
                let bytes = key.withUnsafeBytes { Array($0) }
                #expect(bytes.count == 12, "a chunk key of \(bytes.count) bytes")
                rows.append((bytes.dropFirst(8).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }, value.withUnsafeBytes { $0.count }))
                return .next
            }
            return rows
        }
    }

    @Test("an event of exactly the chunk size is one chunk, one byte more is two; a reservation is one chunk; chunks rejoin to the event")
    func chunkBoundaries() throws {
        let dir = try TemporaryDirectory()
        let size = 300
        let log = try openLog(dir, model: try libraryModel()) { $0.chunkSize = size }
        func commitName(_ length: Int) throws -> UInt64 {
            var draft = TransactionDraft()
            draft.insert("Sponsor", values: ["name": s(String(repeating: "n", count: length))])
            return try log.commit(draft).sequence
        }
        let first = try commitName(130)
        let measured = try Self.chunks(log, first).reduce(0) { $0 + $1.1 }
        #expect(measured < size)
        let exact = try commitName(130 + size - measured)
        let exactChunks = try Self.chunks(log, exact)
        #expect(exactChunks.map(\.0) == [0] && exactChunks.map(\.1) == [size], "\(exactChunks)")
        let over = try commitName(130 + size - measured + 1)
        let overChunks = try Self.chunks(log, over)
        #expect(overChunks.map(\.0) == [0, 1] && overChunks.map(\.1) == [size, 1], "\(overChunks)")
        let big = try commitName(5 * size)
        let bigChunks = try Self.chunks(log, big)
        #expect(bigChunks.map(\.0) == (0..<UInt32(bigChunks.count)).map { $0 } && bigChunks.dropLast().allSatisfy { $0.1 == size })
        let reserved = try log.reservePrimaryKeys(of: "Member", count: 3)
        let head = try log.read { try $0.head }
        #expect(try Self.chunks(log, head).count == 1, "reservation \(reserved)")
        for sequence in [first, exact, over, big] {
            let event = try log.read { try $0.event(sequence) }
            #expect(event.sequence == sequence)
        }
    }
}

// MARK: - Index scans over every attribute type

extension EncodingReadsReviewTests {
    /// Tricky values of each indexed attribute, in ascending order (values equal for the
    /// index, such as -0.0 and 0.0, next to each other).
    static func orderedValues() throws -> [(attribute: String, values: [AttributeValue])] {
        let day: TimeInterval = 86_400
        let uuids = try [
            "00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000001", "7FFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
            "80000000-0000-0000-0000-000000000000", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
        ].map { try #require(UUID(uuidString: $0)) }
        let urls = try ["a:b", "http://a.example/", "http://a.example/%00", "http://a.example/x", "https://z.example/é"].map {
            try #require(URL(string: $0))
        }
        return [
            ("i16", [Int16.min, -300, -1, 0, 1, 255, 256, Int16.max].map { .int16($0) }),
            ("i32", [Int32.min, -70_000, -1, 0, 1, 70_000, Int32.max].map { .int32($0) }),
            ("i64", [Int64.min, Int64.min + 1, -1 << 40, -1, 0, 1, 1 << 40, Int64.max - 1, Int64.max].map { .int64($0) }),
            ("dbl", [
                -.infinity, -.greatestFiniteMagnitude, -1e10, -1, -.leastNormalMagnitude, -.leastNonzeroMagnitude, -0.0, 0.0,
                .leastNonzeroMagnitude, .leastNormalMagnitude, 0.1, 1, 1e10, .greatestFiniteMagnitude, .infinity,
            ].map { .double($0) }),
            ("flt", [-Float.infinity, -Float.greatestFiniteMagnitude, -1.5, -Float.leastNonzeroMagnitude, -0.0, 0.0, 1.5, .infinity].map {
                .float($0)
            }),
            ("dec", try ["-100000000000000000000", "-1.5", "-0.5", "0", "0.5", "1", "1.5", "12345.678", "100000000000000000000"].map {
                .decimal(try decimal($0))
            }),
            ("when", [
                Date.distantPast, Date(timeIntervalSince1970: -100 * 365 * day), Date(timeIntervalSince1970: -0.5),
                Date(timeIntervalSince1970: 0), Date(timeIntervalSinceReferenceDate: -1), Date(timeIntervalSinceReferenceDate: 0),
                Date(timeIntervalSinceReferenceDate: 0.001), Date(timeIntervalSince1970: 1_767_225_600), Date.distantFuture,
            ].map { .date($0) }),
            ("str", ["", "\0", "\0\0", "\0a", "\u{1}", "A", "a", "a\0", "a\0\0", "a\0b", "a\u{1}", "ab", "z", "ß\0", "é", "日本", "😀"].map {
                .string($0)
            }),
            ("data", [[], [0], [0, 0], [0, 1], [0, 0xFF], [1], [0xFE, 0], [0xFF], [0xFF, 0], [0xFF, 0xFF]].map { .binaryData(Data($0 as [UInt8])) }),
            ("flag", [false, true].map { .boolean($0) }),
            ("id", uuids.map { .uuid($0) }),
            ("link", urls.map { .uri($0) }),
        ]
    }

    @Test("index scans of every attribute type give the values' order ascending and descending (negative numbers, -0.0, infinities, decimals, dates before 1970, NULs, non-ASCII), equality finds each, nil apart, sub-entities")
    func indexOrderEveryType() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try Self.indexedModel())
        let table = try Self.orderedValues()
        // Inserted in a scrambled order, some as the sub-entity, each attribute's values in
        // their own transaction beside one object without a value.
        for (attribute, values) in table {
            var draft = TransactionDraft()
            for (position, value) in values.enumerated().sorted(by: { ($0.offset * 7) % values.count < ($1.offset * 7) % values.count }) {
                draft.insert(position % 3 == 0 ? "Special" : "Thing", values: [attribute: .attribute(value)])
            }
            draft.insert("Thing", values: [:])
            _ = try log.commit(draft)
        }
        let objects = try log.read { try $0.count(of: "Thing") }
        for (attribute, values) in table {
            func same(_ found: [AttributeValue?], _ expected: [AttributeValue], _ what: String) {
                // Equal values (-0.0, 0.0) may come in either order.
                let ok = found.count == expected.count && zip(found, expected).allSatisfy { a, b in
                    guard let a else { return false }
                    return IndexKeyEncoding.encode(a) == IndexKeyEncoding.encode(b)
                }
                #expect(ok, "\(attribute) \(what): \(found.map { $0.map { "\($0)" } ?? "nil" }) != \(expected)")
            }
            same(try Self.scan(log, attribute, .all), values, "ascending")
            same(try Self.scan(log, attribute, .all, reverse: true), values.reversed(), "descending")
            let specials = values.enumerated().filter { $0.offset % 3 == 0 }.map(\.element)
            same(try Self.scan(log, attribute, .all, entity: "Special"), specials, "the sub-entity only")
            #expect(try Self.scan(log, attribute, .isNil).count == objects - values.count, "\(attribute): nil values")
            for value in values {
                let expected = values.filter { IndexKeyEncoding.encode($0) == IndexKeyEncoding.encode(value) }
                same(try Self.scan(log, attribute, .equal(value)), expected, "== \(value)")
            }
            // Strict ranges between neighbours, both ways.
            // (A decimal bound that isn't whole counts as cut: its key's values are candidates.)
            for (low, high) in zip(values, values.dropFirst()) where IndexKeyEncoding.encode(low) != IndexKeyEncoding.encode(high) {
                var lowKey: [UInt8] = []
                var highKey: [UInt8] = []
                let lowWhole = IndexKeyEncoding.append(low, to: &lowKey)
                let highWhole = IndexKeyEncoding.append(high, to: &highKey)
                let lows = values.filter { IndexKeyEncoding.encode($0) == lowKey }
                let highs = values.filter { IndexKeyEncoding.encode($0) == highKey }
                let between = IndexRange(lower: low, includesLower: true, upper: high, includesUpper: false)
                same(try Self.scan(log, attribute, between), lows + (highWhole ? [] : highs), "[\(low), \(high))")
                let above = IndexRange(lower: low, includesLower: false, upper: high, includesUpper: true)
                same(try Self.scan(log, attribute, above, reverse: true), highs + (lowWhole ? [] : lows), "(\(low), \(high)]")
            }
        }
        // NaN: after +∞ in index order; an equality scan for it finds it (one key for every NaN).
        try Self.insert(log, "dbl", [.double(.nan)])
        let doubles = try Self.scan(log, "dbl", .all)
        if case .double(let last)? = doubles.last { #expect(last.isNaN) } else { Issue.record("no double last") }
        #expect(try Self.scan(log, "dbl", .equal(.double(.nan))).count == 1)
    }

    @Test("the events of a sequence range: empty store, reversed bounds, past the head, across the compaction horizon")
    func sequenceRanges() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        func sequences(_ from: UInt64, _ through: UInt64?) throws -> [UInt64] {
            try log.read { reader in
                var found: [UInt64] = []
                try reader.forEachEvent(from: from, through: through) { event in
                    found.append(event.sequence)
                    return .next
                }
                return found
            }
        }
        #expect(try sequences(1, nil).isEmpty && sequences(0, 10).isEmpty)
        #expect(throws: LogError.self) { try log.read { try $0.event(1) } }
        for n in 1...20 {
            var draft = TransactionDraft()
            draft.insert("Sponsor", values: ["name": s("sponsor \(n)")])
            _ = try log.commit(draft)
        }
        var request = CompactionRequest(before: 11)
        request.eventsPerFrame = 3
        #expect(try log.compact(request).moved == 1...10)
        #expect(try sequences(0, nil) == Array(1...20))
        #expect(try sequences(8, 13) == Array(8...13), "across the horizon")
        #expect(try sequences(13, 8).isEmpty, "reversed bounds")
        #expect(try sequences(18, 1000) == [18, 19, 20], "past the head")
        #expect(try sequences(21, nil).isEmpty && sequences(.max, .max).isEmpty)
        #expect(try sequences(10, 10) == [10] && sequences(11, 11) == [11])
        #expect(throws: LogError.self) { try log.read { try $0.event(0) } }
        #expect(throws: LogError.self) { try log.read { try $0.event(21) } }
    }
}

// MARK: - Compaction with a trained dictionary

extension EncodingReadsReviewTests {
    /// Every raw event's bytes, by sequence (the `events` table's chunks joined).
    static func rawEvents(_ log: EventLog) throws -> [UInt64: [UInt8]] {
        try log.environment.read { txn in
            var events: [UInt64: [UInt8]] = [:]
            try txn.forEach(in: log.tables.events, range: .all) { key, value in
                let sequence = key.withUnsafeBytes { raw in raw.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
                value.withUnsafeBytes { events[sequence, default: []].append(contentsOf: $0) }
                return .next
            }
            return events
        }
    }

    /// A store of `count` varied transactions compacted through `count - 10` with a trained
    /// dictionary; the raw events before compaction and every event as read before it.
    static func dictionaryStore(_ dir: TemporaryDirectory, count: Int, salt: String) throws
        -> (log: EventLog, report: CompactionReport, raw: [UInt64: [UInt8]], events: [TransactionEvent])
    {
        let log = try openLog(dir, model: try libraryModel())
        for n in 1...count {
            var draft = TransactionDraft(author: "author \(n % 3)", contextName: "ctx")
            let club = draft.insert("Club", values: ["name": s("club \(salt) \(n)")])
            draft.insert("Member", values: [
                "name": s("member \(salt) \(n)"), "email": s("m\(n)-\(salt)@example.com"), "age": i(Int32(n % 90)),
                "club": .reference(club),
            ])
            _ = try log.commit(draft)
        }
        let raw = try rawEvents(log)
        let events = try allEvents(log)
        var request = CompactionRequest(before: UInt64(count - 9))
        request.usesDictionary = true
        request.eventsPerFrame = 16
        let report = try log.compact(request)
        return (log, report, raw, events)
    }

    @Test("a segment compacted with a dictionary: stock zstd reads it with the dictionary beside it, to the raw events byte for byte; reads identical before and after")
    func dictionaryCompaction() throws {
        let dir = try TemporaryDirectory()
        let count = 150
        let (log, report, raw, events) = try Self.dictionaryStore(dir, count: count, salt: "a")
        let segment = try #require(report.segmentFile)
        let dictionary = try #require(report.dictionaryFile, "a dictionary was trained")
        #expect((dictionary as NSString).lastPathComponent == (segment as NSString).lastPathComponent.replacingOccurrences(of: ".zst", with: ".dict"))
        #expect(try allEvents(log) == events, "reads after compaction")
        for event in events {
            #expect(try EventCodec.encode(event, catalog: log.catalog) == raw[event.sequence], "event \(event.sequence) re-encodes to its raw bytes")
        }
        guard toolIsInstalled("zstd") else { return }
        let env = URL(fileURLWithPath: "/usr/bin/env")
        let out = dir.file("content")
        #expect(try runProcess(env, ["zstd", "-q", "-t", "-D", dictionary, segment]).status == 0)
        #expect(try runProcess(env, ["zstd", "-q", "-t", segment]).status != 0, "the frames need their dictionary")
        let result = try runProcess(env, ["zstd", "-q", "-f", "-D", dictionary, "-d", segment, "-o", out])
        #expect(result.status == 0, "\(result.standardError)")
        let content = [UInt8](try Data(contentsOf: URL(fileURLWithPath: out)))
        var offset = 0
        var sequence: UInt64 = 1
        while offset + 4 <= content.count {
            let length = content[offset..<(offset + 4)].reduce(0) { $0 << 8 | Int($1) }
            offset += 4
            #expect(offset + length <= content.count)
            #expect(Array(content[offset..<min(offset + length, content.count)]) == raw[sequence], "event \(sequence) in the segment")
            offset += length
            sequence += 1
        }
        #expect(offset == content.count && sequence == UInt64(count - 9), "every compacted event, nothing else")
    }

    @Test("a missing, damaged or other segment's dictionary: reads fail naming the dictionary file; restored, reads are as before")
    func dictionaryDamageNamed() throws {
        let dir = try TemporaryDirectory()
        let (log, report, _, events) = try Self.dictionaryStore(dir, count: 120, salt: "a")
        let other = try TemporaryDirectory()
        let (_, otherReport, _, _) = try Self.dictionaryStore(other, count: 120, salt: "zz-other-words")
        let dictionary = try #require(report.dictionaryFile)
        let name = (dictionary as NSString).lastPathComponent
        let original = try Data(contentsOf: URL(fileURLWithPath: dictionary))
        let foreign = try Data(contentsOf: URL(fileURLWithPath: try #require(otherReport.dictionaryFile)))
        #expect(original != foreign)
        var flipped = [UInt8](original)
        flipped[flipped.count - 40] ^= 0x10  // in the content, past the header and tables
        let damages: [(String, Data?)] = [("missing", nil), ("another store's", foreign), ("a flipped content byte", Data(flipped)),
                                           ("cut short", original.prefix(original.count / 2))]
        for (what, bytes) in damages {
            try FileManager.default.removeItem(atPath: dictionary)
            if let bytes { try bytes.write(to: URL(fileURLWithPath: dictionary)) }
            var message = ""
            do {
                _ = try allEvents(log)
            } catch {
                message = "\(error)"
            }
            if message.isEmpty && what == "a flipped content byte" {
                // A dictionary byte no frame uses changes nothing read (the frames' checksums
                // cover what they decode).
                #expect(try allEvents(log) == events, "\(what): read without an error, differently")
            } else {
                #expect(message.contains(name), "\(what) dictionary: \(message.isEmpty ? "read without an error" : message)")
            }
            try original.write(to: URL(fileURLWithPath: dictionary))
        }
        #expect(try allEvents(log) == events)
    }
}

// MARK: - Crash safety of compaction with a dictionary

extension EncodingReadsReviewTests {
    /// `killDuringCompaction` compacts a few events at a time, too few for zstd to train a
    /// dictionary, so no kill ever landed while a dictionary was written and renamed. Here
    /// each compaction moves 64 or more events with `usesDictionary`, and the probe is killed
    /// at a random moment after it announces the compaction (training, frames, the
    /// dictionary's temporary file, the renames, the commit).
    @Test("SIGKILL during compaction with a trained dictionary: no orphan or temporary file, every dictionary named and whole, events read back, verify clean (STRATA_CRASH_ITERATIONS)")
    func killDuringDictionaryCompaction() throws {
        let dir = try TemporaryDirectory("strata-crash-dict")
        let store = dir.file("store")
        var rng = SeededGenerator(seed: CrashSafetyTests.seed ^ 0xD1C7)
        let iterations = max(environmentNumber("STRATA_CRASH_ITERATIONS", default: 4), 1)
        var lastAck: UInt64 = 0
        var lastCompacted: UInt64 = 0
        var leftovers = 0
        for round in 1...iterations {
            let context = "seed \(CrashSafetyTests.seed), dictionary compaction round \(round)"
            let probe = try LogProbeProcess(["compact-dict", store, String(rng.int(66...80))])
            let wanted = rng.int(1...2)
            var started = 0
            while started < wanted, let line = probe.nextLine() {
                if line.hasPrefix("compacting") { started += 1 }
            }
            usleep(UInt32(rng.int(0..<30_000)))
            probe.kill()
            guard probe.wasKilled else {
                Issue.record("\(context): the probe exited by itself (\(probe.process.terminationStatus)): \(probe.standardError)")
                return
            }
            lastAck = max(lastAck, probe.numbers(after: "ack").max() ?? 0)
            lastCompacted = max(lastCompacted, probe.numbers(after: "compacted").max() ?? 0)
            if !CrashSafetyTests.segmentFiles(store).subtracting(try CrashSafetyTests.manifestFilesReadOnly(store)).isEmpty { leftovers += 1 }
            let head = try CrashSafetyTests.checkAfterCrash(store, lastAck: lastAck, lastCompacted: lastCompacted, context: context)
            lastAck = head
            lastCompacted = max(lastCompacted, try EventLog(openingExistingAt: store).read { try $0.compactedThrough })
        }
        let segments = try EventLog(openingExistingAt: store).read { try $0.segments() }
        #expect(segments.contains { $0.dictionaryFileName != nil }, "no compaction with a dictionary ever committed")
        if toolIsInstalled("zstd") {
            let directory = (store as NSString).appendingPathComponent("segments")
            for segment in segments {
                var arguments = ["zstd", "-q", "-t"]
                if let dictionary = segment.dictionaryFileName { arguments += ["-D", (directory as NSString).appendingPathComponent(dictionary)] }
                let check = try runProcess(URL(fileURLWithPath: "/usr/bin/env"), arguments + [(directory as NSString).appendingPathComponent(segment.fileName)])
                #expect(check.status == 0, "zstd -t \(segment.fileName): \(check.standardError)")
            }
        }
        print("crash during dictionary compaction: \(iterations) kills, head \(lastAck), compacted through \(lastCompacted), \(segments.count) segments, leftovers repaired in \(leftovers) rounds")
    }
}

// MARK: - The chunk size bound

extension EncodingReadsReviewTests {
    /// `Configuration.chunkSize` is "the largest LMDB value an event chunk takes, so chunks
    /// stay in B-tree pages" (spec 0004 §3.4), but nothing bounded it from above: a store
    /// configured with 100,000 wrote each event of 10 KB as one value on overflow pages. The
    /// chunk size is now at most what a leaf page holds under a 12-byte key.
    @Test("a chunk size beyond what a leaf page holds is bounded by it: no event chunk goes to overflow pages")
    func chunkSizeBound() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel()) { $0.chunkSize = 100_000 }
        for n in 1...3 {
            var draft = TransactionDraft()
            draft.insert("Sponsor", values: ["name": s(String(repeating: "long name \(n) ", count: 1000))])
            _ = try log.commit(draft)
        }
        let (statistics, largest) = try log.environment.read { txn -> (DatabaseStatistics, Int) in
            var largest = 0
            try txn.forEach(in: log.tables.events, range: .all) { _, value in
                largest = max(largest, value.withUnsafeBytes { $0.count })
                return .next
            }
            return (try txn.statistics(of: log.tables.events), largest)
        }
        #expect(statistics.overflowPages == 0, "event chunks on \(statistics.overflowPages) overflow pages (largest chunk \(largest) bytes)")
        // LMDB's largest leaf node (me_nodemax), less the node header (8) and the key (12).
        let inline = (((statistics.pageSize - 16) / 2) & ~1) - 2 - 8 - 12
        #expect(largest <= inline && largest >= 1900, "largest chunk \(largest), a leaf holds \(inline)")
        #expect(try allEvents(log).count == 3)
    }
}

// MARK: - Damaged compacted events name their sequence

extension EncodingReadsReviewTests {
    /// A raw event damaged past its header is compacted as it is (compaction reads headers
    /// only); reading it back from the segment failed with "segment F-L.zst frame 0: stored
    /// 0x…, computed 0x…", which doesn't say which event. Raw events name it ("event 5: …").
    @Test("a damaged event read from a segment is refused naming its sequence, in range walks and in reads of a list of sequences")
    func damagedCompactedEventNamed() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        for n in 1...12 {
            var draft = TransactionDraft()
            draft.insert("Sponsor", values: ["name": s("sponsor \(n)")])
            _ = try log.commit(draft)
        }
        // Flip a bit in the body of event 5 (its first chunk, past the header).
        let key = bigEndianBytes(UInt64(5)) + bigEndianBytes(UInt32(0))
        try log.environment.write { txn in
            var bytes = try #require(try txn.value(forKey: key, in: log.tables.events))
            bytes[bytes.count - 6] ^= 0x04
            try txn.put(bytes, forKey: key, in: log.tables.events)
        }
        var request = CompactionRequest(before: 11)
        request.eventsPerFrame = 4
        #expect(try log.compact(request).moved == 1...10)
        func message(_ body: () throws -> Void) -> String {
            do { try body() } catch { return "\(error)" }
            return "no error"
        }
        let walk = message { _ = try allEvents(log) }
        #expect(walk.contains("event 5") && walk.contains(".zst"), "\(walk)")
        let among = message { try log.read { reader in try reader.forEachEvent(among: [2, 5, 7]) { _ in .next } } }
        #expect(among.contains("event 5") && among.contains(".zst"), "\(among)")
        let one = message { _ = try log.read { try $0.event(5) } }
        #expect(one.contains("event 5"), "\(one)")
        // verify: the event, named (its objects then differ from the replay without it); the
        // events after it aren't reported out of sequence.
        let problems = try log.verify().problems
        let events = problems.filter { $0.kind == .event }
        #expect(events.count == 1 && events.first?.message.contains("event 5") == true, "\(problems)")
        #expect(!problems.contains { $0.kind == .sequence }, "\(problems)")
    }
}

// MARK: - Reservations and purge markers have no groups

extension EncodingReadsReviewTests {
    /// Spec 0004 §3.1: a reservation (kind 5) and a purge marker (kind 6) have no groups —
    /// `reservePrimaryKeys` and `purge` write them. But `commit` took a draft of either kind
    /// with operations and wrote such an event with groups: a "reservation" that raises no
    /// counter as its range says (or a "purge marker" claiming a purge that didn't happen)
    /// while inserting objects. A draft of either kind is now refused; nothing is written.
    @Test("a draft of kind reservation or purge is refused by commit, nothing written")
    func reservationDraftRefused() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try libraryModel())
        var first = TransactionDraft()
        first.insert("Sponsor", values: ["name": s("one")])
        _ = try log.commit(first)
        for kind in [TransactionKind.reservation(entity: "Sponsor", range: 5...9), .purge(through: 1)] {
            var draft = TransactionDraft(kind: kind)
            draft.insert("Sponsor", values: ["name": s("smuggled")])
            let error = #expect(throws: LogError.self) { _ = try log.commit(draft) }
            #expect(error?.description.contains("reservePrimaryKeys") == true || error?.description.contains("purge") == true, "\(kind): \(String(describing: error))")
            #expect(try log.read { try $0.head } == 1, "\(kind): nothing is written")
        }
        #expect(try log.verify().isClean)
    }
}
