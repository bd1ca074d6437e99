import Foundation
@testable import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// The model the event-format vectors in `Specs/0004-event-log/` are written against.
func vectorModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Team") {
            Attribute("name", .string)
            Relationship("members", to: "Person", inverse: "team", toMany: true)
        }
        Entity("Person") {
            Attribute("name", .string)
            Attribute("age", .int16)
            Relationship("team", to: "Team", inverse: "members")
            Relationship("friends", to: "Person", toMany: true)
        }
        Entity("Sample") {
            Attribute("i16", .int16)
            Attribute("i32", .int32)
            Attribute("i64", .int64)
            Attribute("dec", .decimal)
            Attribute("dbl", .double)
            Attribute("flt", .float)
            Attribute("str", .string)
            Attribute("flag", .boolean)
            Attribute("when", .date)
            Attribute("data", .binaryData)
            Attribute("id", .uuid)
            Attribute("link", .uri)
            Attribute("tags", .transformable(valueTypeName: "[String]"))
        }
        // A many-to-many ordered on both sides: both recorded, Venue.tours the paired side
        // (format version 3, spec 0004 §4.1).
        Entity("Tour") {
            Attribute("name", .string)
            Relationship("venues", to: "Venue", inverse: "tours", toMany: true, ordered: true)
        }
        Entity("Venue") {
            Attribute("city", .string)
            Relationship("tours", to: "Tour", inverse: "venues", toMany: true, ordered: true)
        }
    }
}

/// The events the vectors encode (regenerate the file with STRATA_REGENERATE_SPECS=1).
func vectorEvents() throws -> [(name: String, event: TransactionEvent)] {
    let team = StoredObjectID(entity: "Team", primaryKey: 1)
    let ada = StoredObjectID(entity: "Person", primaryKey: 1)
    let bob = StoredObjectID(entity: "Person", primaryKey: 2)
    let sample = StoredObjectID(entity: "Sample", primaryKey: 1)
    let summer = StoredObjectID(entity: "Tour", primaryKey: 1)
    let tour = StoredObjectID(entity: "Tour", primaryKey: 2)
    let oslo = StoredObjectID(entity: "Venue", primaryKey: 1)
    let lyon = StoredObjectID(entity: "Venue", primaryKey: 2)
    let t0 = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
    let decimal = try #require(Decimal(string: "12345.678", locale: Locale(identifier: "en_US_POSIX")))
    let uuid = try #require(UUID(uuidString: "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0"))
    let url = try #require(URL(string: "https://example.com/a?b=c"))
    return [
        ("save: two inserts with a reference", TransactionEvent(
            sequence: 1, timestamp: t0, author: "alice", contextName: "editor", processID: 4242, kind: .save,
            modelVersion: 1,
            groups: [ChangeGroup(actionName: "Add Ada", changes: [
                .insert(team, values: ["name": .attribute(.string("Otters"))]),
                .insert(ada, values: ["name": .attribute(.string("Ada")), "age": .attribute(.int16(36)), "team": .reference(team)]),
            ])])),
        ("save: updates in two groups, with nil and membership", TransactionEvent(
            sequence: 2, timestamp: t0.addingTimeInterval(1.5), processID: 7, kind: .save, modelVersion: 1,
            groups: [
                ChangeGroup(actionName: nil, changes: [
                    .insert(bob, values: ["name": .attribute(.string("Bob"))]),
                    .update(ada, changes: [.value(property: "age", before: .attribute(.int16(36)), after: .attribute(.int16(37)))]),
                ]),
                ChangeGroup(actionName: "Rename", changes: [
                    .update(ada, changes: [
                        .value(property: "team", before: .reference(team), after: .null),
                        .membership(property: "friends", added: [bob], removed: []),
                    ]),
                ]),
            ])),
        ("delete with its before-image", TransactionEvent(
            sequence: 3, timestamp: t0.addingTimeInterval(60), author: "bob", processID: -1, kind: .save, modelVersion: 1,
            groups: [ChangeGroup(changes: [
                .delete(bob, before: ["name": .attribute(.string("Bob"))]),
            ])])),
        ("undo of a group", TransactionEvent(
            sequence: 4, timestamp: t0.addingTimeInterval(61), processID: 7, kind: .undo(of: 2, group: 1), modelVersion: 1,
            groups: [ChangeGroup(actionName: "Rename", changes: [
                .update(ada, changes: [.value(property: "team", before: .null, after: .reference(team))]),
            ], origin: .undo(of: 2, group: 1))])),
        ("redo, migration and import kinds", TransactionEvent(
            sequence: 300, timestamp: t0, processID: 1, kind: .redo(of: 299, group: 0), modelVersion: 1, groups: [])),
        ("migration kind", TransactionEvent(sequence: 301, timestamp: t0, processID: 1, kind: .migration, modelVersion: 1, groups: [])),
        ("import kind, unicode author", TransactionEvent(
            sequence: 302, timestamp: t0, author: "Zoë 🚀", processID: 1, kind: .import, modelVersion: 1, groups: [])),
        ("reservation of primary keys", TransactionEvent(
            sequence: 303, timestamp: t0, author: "alice", contextName: "editor", processID: 9,
            kind: .reservation(entity: "Person", range: 3...5), modelVersion: 1, groups: [])),
        ("purge marker", TransactionEvent(
            sequence: 304, timestamp: t0, author: "retention-job", contextName: "maintenance", processID: 9,
            kind: .purge(through: 250), modelVersion: 1, groups: [])),
        ("every attribute type", TransactionEvent(
            sequence: 5, timestamp: t0, processID: 1, kind: .save, modelVersion: 1,
            groups: [ChangeGroup(changes: [
                .insert(sample, values: [
                    "i16": .attribute(.int16(-2)), "i32": .attribute(.int32(-70000)), "i64": .attribute(.int64(Int64.min)),
                    "dec": .attribute(.decimal(decimal)), "dbl": .attribute(.double(-0.5)), "flt": .attribute(.float(1.25)),
                    "str": .attribute(.string("naïve café")), "flag": .attribute(.boolean(true)),
                    "when": .attribute(.date(t0)), "data": .attribute(.binaryData(Data([0, 1, 254, 255]))),
                    "id": .attribute(.uuid(uuid)), "link": .attribute(.uri(url)),
                    "tags": .attribute(.transformable(Data("[\"a\",\"b\"]".utf8))),
                ]),
            ])])),
        // A list of references (tag 11: a recorded to-many in an insert's values and a
        // delete's before-image), a group whose origin is a redo, and a timestamp before 1970
        // (negative microseconds, two's complement).
        ("redo before 1970, with lists of references", TransactionEvent(
            sequence: 6, timestamp: Date(timeIntervalSince1970: -14_182_940.25), author: "eagle", processID: 11,
            kind: .redo(of: 4, group: 0), modelVersion: 1,
            groups: [ChangeGroup(actionName: "Friends", changes: [
                .insert(StoredObjectID(entity: "Person", primaryKey: 3), values: [
                    "name": .attribute(.string("Cy")), "friends": .references([ada, bob]),
                ]),
                .delete(StoredObjectID(entity: "Person", primaryKey: 4), before: [
                    "age": .attribute(.int16(-1)), "friends": .references([ada]), "team": .reference(team),
                ]),
            ], origin: .redo(of: 4, group: 0))])),
        // A group marked not recorded for undo (group flag bit 2: changes made with undo
        // registration disabled or with setPrimitiveValue), after a recorded one: format version 2.
        ("save with a group not recorded for undo (format version 2)", TransactionEvent(
            sequence: 7, timestamp: t0.addingTimeInterval(120), author: "alice", contextName: "editor", processID: 4242,
            kind: .save, modelVersion: 1,
            groups: [
                ChangeGroup(actionName: "Rename", changes: [
                    .update(team, changes: [.value(property: "name", before: .attribute(.string("Otters")), after: .attribute(.string("Herons")))]),
                ]),
                ChangeGroup(changes: [
                    .update(ada, changes: [.value(property: "age", before: .attribute(.int16(37)), after: .attribute(.int16(38)))]),
                ], recordedForUndo: false),
            ])),
        // Both sides of a many-to-many ordered on both sides, each in its own order: a change
        // to the paired side (Venue.tours) makes format version 3.
        ("save setting both sides of a many-to-many ordered on both sides (format version 3)", TransactionEvent(
            sequence: 8, timestamp: t0.addingTimeInterval(180), author: "alice", contextName: "editor", processID: 4242,
            kind: .save, modelVersion: 1,
            groups: [
                ChangeGroup(actionName: "Plan", changes: [
                    .insert(tour, values: ["name": .attribute(.string("Spring")), "venues": .references([lyon, oslo])]),
                    .update(oslo, changes: [.value(property: "tours", before: .references([summer]), after: .references([tour, summer]))]),
                    .insert(lyon, values: ["city": .attribute(.string("Lyon")), "tours": .references([tour])]),
                ]),
            ])),
    ]
}

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

func unhex(_ text: String) -> [UInt8]? {
    var bytes: [UInt8] = []
    var iterator = text.makeIterator()
    while let a = iterator.next() {
        guard let b = iterator.next(), let byte = UInt8(String([a, b]), radix: 16) else { return nil }
        bytes.append(byte)
    }
    return bytes
}

/// Canonical JSON text of a JSON value, for comparing independent of key order.
func canonical(_ value: Any) throws -> String {
    String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
}

@Suite("Event format: the spec's test vectors")
struct EventVectorTests {
    static let directory = "0004-event-log"

    /// A store with the vector model, so entity and property codes are the spec's.
    func vectorStore() throws -> (TemporaryDirectory, EventLog) {
        let dir = try TemporaryDirectory()
        let log = try EventLog(path: dir.file("store"), model: try vectorModel())
        return (dir, log)
    }

    @Test("the spec's model file is the vector model")
    func modelFile() throws {
        let model = try vectorModel()
        let url = SpecFiles.url("\(Self.directory)/vector-model.json")
        if ProcessInfo.processInfo.environment["STRATA_REGENERATE_SPECS"] == "1" {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try model.jsonData().write(to: url)
        }
        #expect(try ManagedObjectModel(contentsOf: url) == model)
    }

    @Test("every vector decodes to its event and re-encodes to the same bytes")
    func vectorsRoundTrip() throws {
        let (directory, log) = try vectorStore()
        defer { withExtendedLifetime(directory) {} }
        let url = SpecFiles.url("\(Self.directory)/vectors.json")
        if ProcessInfo.processInfo.environment["STRATA_REGENERATE_SPECS"] == "1" {
            var vectors: [[String: Any]] = []
            for (name, event) in try vectorEvents() {
                vectors.append(["name": name, "hex": hex(try EventCodec.encode(event, catalog: log.catalog)), "event": event.jsonObject])
            }
            let codes = log.catalog.snapshot
            let document: [String: Any] = [
                "model": "vector-model.json",
                "entityCodes": codes.entityCodes.mapValues { Int($0) },
                "relationshipCodes": codes.relationshipCodes.mapValues { Int($0) },
                "vectors": vectors,
                "invalid": try invalidVectors(log),
            ]
            try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]).write(to: url)
        }
        let document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let codes = try #require(document["entityCodes"] as? [String: Int])
        for (entity, code) in codes { #expect(Int(try log.catalog.entityCode(entity)) == code, "\(entity)") }
        let vectors = try #require(document["vectors"] as? [[String: Any]])
        #expect(vectors.count >= 8)
        for vector in vectors {
            let name = vector["name"] as? String ?? "?"
            let bytes = try #require(unhex(vector["hex"] as? String ?? ""), "\(name): bad hex")
            let event = try bytes.withUnsafeBytes { try EventCodec.decode($0, catalog: log.catalog, context: name) }
            #expect(try canonical(event.jsonObject) == (try canonical(vector["event"] ?? [:])), "\(name)")
            #expect(try EventCodec.encode(event, catalog: log.catalog) == bytes, "\(name): re-encoding differs")
        }
        // The vectors are the events this file builds (catches a stale spec).
        let built = try vectorEvents().map { try canonical($0.event.jsonObject) }
        #expect(try vectors.map { try canonical($0["event"] ?? [:]) } == built)
    }

    func invalidVectors(_ log: EventLog) throws -> [[String: Any]] {
        let events = try vectorEvents()
        let good = try EventCodec.encode(events[0].event, catalog: log.catalog)
        let unrecorded = try EventCodec.encode(try #require(events.last { $0.event.groups.contains { !$0.isRecordedForUndo } }).event, catalog: log.catalog)
        #expect(unrecorded[4] == 2)
        let paired = try EventCodec.encode(try #require(events.last { $0.name.contains("format version 3") }).event, catalog: log.catalog)
        #expect(paired[4] == 3)
        /// `bytes` with format version `version` and the checksum made to match.
        func withVersion(_ bytes: [UInt8], _ version: UInt8) -> [UInt8] {
            var bytes = bytes
            bytes[4] = version
            let crc = CRC32C.checksum(Array(bytes.dropLast(4)))
            bytes.replaceSubrange((bytes.count - 4)..., with: bigEndianBytes(crc))
            return bytes
        }
        var badMagic = good
        badMagic[0] = 0x58
        var flipped = good
        flipped[20] ^= 0x01
        return [
            ["name": "bad magic", "hex": hex(badMagic), "error": "bad magic"],
            ["name": "one flipped bit", "hex": hex(flipped), "error": "checksum mismatch"],
            ["name": "newer format version", "hex": hex(withVersion(good, 4)), "error": "format version 4, newer than this Strata reads (3)"],
            ["name": "truncated", "hex": hex(Array(good.prefix(20))), "error": "too short"],
            // Group flag bit 2 exists from version 2 on; and each event is written in the
            // oldest version that holds it.
            ["name": "a group not recorded for undo in a version 1 event", "hex": hex(withVersion(unrecorded, 1)), "error": "bad group flags 4"],
            ["name": "version 2 with every group recorded for undo", "hex": hex(withVersion(good, 2)), "error": "format version 2 for groups that version 1 holds"],
            // A paired side (spec 0004 §4.1) exists from version 3 on.
            ["name": "a paired side's change in a version 2 event", "hex": hex(withVersion(paired, 2)), "error": "format version 2 for groups that version 3 holds"],
            ["name": "version 3 without a paired side", "hex": hex(withVersion(good, 3)), "error": "format version 3 for groups that version 1 holds"],
        ]
    }

    @Test("invalid vectors are refused with the error they name")
    func invalidVectorsRefused() throws {
        let (directory, log) = try vectorStore()
        defer { withExtendedLifetime(directory) {} }
        let document = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: SpecFiles.url("\(Self.directory)/vectors.json"))) as? [String: Any])
        let invalid = try #require(document["invalid"] as? [[String: Any]])
        #expect(invalid.count >= 4)
        for vector in invalid {
            let bytes = try #require(unhex(vector["hex"] as? String ?? ""))
            let error = #expect(throws: LogError.self) {
                _ = try bytes.withUnsafeBytes { try EventCodec.decode($0, catalog: log.catalog, context: "vector") }
            }
            #expect(error?.description.contains(vector["error"] as? String ?? "") == true, "\(vector["name"] ?? "")")
        }
    }

    @Test("CRC-32C matches its standard check value")
    func crc() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8]()) == 0)
    }
}
