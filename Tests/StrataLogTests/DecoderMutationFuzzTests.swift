import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// Seeded mutations of valid encodings — events (with the checksum recomputed half the time,
/// so the decoder past it is reached), state records, segment manifest entries, frame
/// contents and model files — fed to their decoders: each gives an error or a value, never a
/// trap; unchanged bytes decode to the original; what an event or record decodes to
/// re-encodes to the same bytes (nothing is read other than written); a manifest entry that
/// decodes keeps the promises of spec 0004 §7.2; decoded events apply and print.
/// Size: STRATA_DAMAGE_FUZZ_ITERATIONS per decoder (default 400).
@Suite("Decoders under seeded mutation")
struct DecoderMutationFuzzTests {
    static var iterations: Int { Int(ProcessInfo.processInfo.environment["STRATA_DAMAGE_FUZZ_ITERATIONS"] ?? "") ?? 400 }

    struct Rollback: Error {}

    /// `bytes` mutated: bits flipped, cut, grown, a byte replaced, a run repeated or removed,
    /// a byte set to a varint continuation or an extreme.
    static func mutate(_ bytes: [UInt8], _ random: inout SeededGenerator) -> [UInt8] {
        var out = bytes
        func position() -> Int { out.isEmpty ? 0 : Int(random.next() % UInt64(out.count)) }
        for _ in 0...(random.next() % 3) {
            switch random.next() % 8 {
            case 0 where !out.isEmpty:
                let bit = Int(random.next() % UInt64(out.count * 8))
                out[bit / 8] ^= UInt8(1 << (bit % 8))
            case 1 where !out.isEmpty: out = Array(out.prefix(position()))
            case 2: out.insert(UInt8(truncatingIfNeeded: random.next()), at: position())
            case 3 where !out.isEmpty: out[position()] = UInt8(truncatingIfNeeded: random.next())
            case 4 where out.count > 2:
                let start = position()
                let end = min(out.count, start + 1 + Int(random.next() % 16))
                out.insert(contentsOf: out[start..<end], at: end)
            case 5 where out.count > 2:
                let start = position()
                out.removeSubrange(start..<min(out.count, start + 1 + Int(random.next() % 8)))
            case 6 where !out.isEmpty: out[position()] = [0x00, 0x7F, 0x80, 0xFF][Int(random.next() % 4)]
            default:
                if !out.isEmpty { out[position()] ^= 0x80 }
            }
        }
        return out
    }

    /// `bytes` with its trailing CRC-32C recomputed over the rest.
    static func resealed(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.count >= 4 else { return bytes }
        var out = Array(bytes.dropLast(4))
        let crc = out.withUnsafeBytes { CRC32C.checksum($0) }
        out += bigEndianBytes(crc)
        return out
    }

    /// Every event of the vector store, and a few more kinds, encoded.
    func seedEvents(_ log: EventLog) throws -> [[UInt8]] {
        try vectorEvents().map { try EventCodec.encode($0.event, catalog: log.catalog) }
    }

    @Test("events: mutated bytes (checksum kept or recomputed) decode to an error or to what re-encodes to them; decoded ones apply, revert and print")
    func events() throws {
        let dir = try TemporaryDirectory()
        let log = try EventLog(path: dir.file("store"), model: try vectorModel())
        let seeds = try seedEvents(log)
        let writer = TableWriter(tables: log.tables, catalog: log.catalog, schema: log.schema, modelVersion: log.modelVersion)
        var random = SeededGenerator(seed: 0xE7E7_0001)
        var decoded = 0
        var refused = 0
        for round in 0..<Self.iterations {
            let seed = seeds[Int(random.next() % UInt64(seeds.count))]
            var bytes = Self.mutate(seed, &random)
            if random.next() % 2 == 0 { bytes = Self.resealed(bytes) }
            _ = bytes.withUnsafeBytes { EventCodec.header($0) }
            guard let event = try? bytes.withUnsafeBytes({ raw in try EventCodec.decode(raw, catalog: log.catalog, context: "fuzz") }) else {
                refused += 1
                continue
            }
            decoded += 1
            if bytes == seed { #expect(try EventCodec.encode(event, catalog: log.catalog) == seed) }
            let again = try? EventCodec.encode(event, catalog: log.catalog)
            // A timestamp's microseconds beyond 2⁵³ don't survive a Date exactly: the header's
            // timestamp field may differ, nothing else.
            func sameOutsideTimestamp(_ a: [UInt8], _ b: [UInt8]) -> Bool {
                a.count == b.count && a.count > 26 && a[..<14] == b[..<14] && a[22..<(a.count - 4)] == b[22..<(b.count - 4)]
            }
            #expect(
                again == bytes || again.map { sameOutsideTimestamp($0, bytes) } == true,
                "round \(round): \(hex(bytes)) decodes to \(event), which encodes as \(again.map(hex) ?? "an error")")
            // What readers do with a decoded event: print it, apply and revert it in memory,
            // replay it into the tables (rolled back).
            _ = "\(event)"
            _ = try? JSONSerialization.data(withJSONObject: event.jsonObject, options: [.sortedKeys])
            var image = StateImage()
            image.apply(event)
            image.revert(event)
            _ = try? log.environment.write { txn in
                try writer.apply(txn, event, checkBeforeImages: true)
                throw Rollback()
            }
        }
        #expect(decoded + refused == Self.iterations)
        print("event fuzz: \(Self.iterations) mutations, \(decoded) decoded, \(refused) refused")
    }

    @Test("state records: mutated records decode to an error or to what re-encodes to them, by name and by property code")
    func records() throws {
        let dir = try TemporaryDirectory()
        let log = try EventLog(path: dir.file("store"), model: try vectorModel())
        let writer = TableWriter(tables: log.tables, catalog: log.catalog, schema: log.schema, modelVersion: log.modelVersion)
        var seeds: [(String, [UInt8])] = []
        for (_, event) in try vectorEvents() {
            for case .insert(let id, let values) in event.changes {
                let entity = try log.schema.entity(id.entity)
                let stored = values.filter { name, _ in entity.propertiesByName[name].map { $0.relationship != .unorderedToMany } ?? false }
                seeds.append((id.entity, try writer.encodeRecord(Record(modelVersion: 1, version: event.sequence, values: stored), entity: entity)))
            }
        }
        #expect(seeds.count >= 3)
        var random = SeededGenerator(seed: 0x5EC0_0002)
        var decoded = 0
        for round in 0..<Self.iterations {
            let (name, seed) = seeds[Int(random.next() % UInt64(seeds.count))]
            let bytes = Self.mutate(seed, &random)
            let entity = try log.schema.entity(name)
            var buffer: [LogValue?] = []
            _ = try? bytes.withUnsafeBytes { raw in try writer.decodeFields(raw, entity: entity, context: "fuzz", into: &buffer) }
            _ = try? bytes.withUnsafeBytes { raw in try writer.recordVersion(raw, context: "fuzz") }
            guard let record = try? bytes.withUnsafeBytes({ raw in try writer.decodeRecord(raw, entityName: name, context: "fuzz") }) else { continue }
            decoded += 1
            let again = try? writer.encodeRecord(record, entity: try log.schema.entity(name))
            // A nil value written out (records leave nil out) reads as no value: the same record.
            let withoutNil = Record(modelVersion: record.modelVersion, version: record.version, values: record.values.filter { $0.value != .null })
            let reread = try? again?.withUnsafeBytes { raw in try writer.decodeRecord(raw, entityName: name, context: "again") }
            #expect(
                again == bytes || reread == withoutNil,
                "round \(round): record \(hex(bytes)) decodes to \(record), which encodes as \(again.map(hex) ?? "an error")")
        }
        print("record fuzz: \(Self.iterations) mutations, \(decoded) decoded")
    }

    @Test("segment manifest entries and frame contents: mutated ones are refused or keep the format's promises")
    func manifestsAndFrames() throws {
        let frames = [
            SegmentDescriptor.Frame(first: 1, last: 16, offset: 0, compressedLength: 900, rawLength: 4000),
            SegmentDescriptor.Frame(first: 17, last: 40, offset: 900, compressedLength: 1200, rawLength: 6000),
            SegmentDescriptor.Frame(first: 41, last: 41, offset: 2100, compressedLength: 100, rawLength: 300),
        ]
        let seeds = [
            SegmentDescriptor(
                fileName: SegmentDescriptor.fileName(first: 1, last: 41, suffix: "zst"), first: 1, last: 41, rawBytes: 10300,
                compressedBytes: 2200, dictionaryFileName: SegmentDescriptor.fileName(first: 1, last: 41, suffix: "dict"), frames: frames),
            SegmentDescriptor(
                fileName: "a.zst", first: 1, last: 16, rawBytes: 4000, compressedBytes: 900, dictionaryFileName: nil, frames: [frames[0]]),
        ].map { $0.encoded() }
        var random = SeededGenerator(seed: 0x5E6_0003)
        var decoded = 0
        for round in 0..<Self.iterations {
            var bytes = Self.mutate(seeds[Int(random.next() % UInt64(seeds.count))], &random)
            if random.next() % 2 == 0 { bytes = Self.resealed(bytes) }
            guard let entry = try? bytes.withUnsafeBytes({ try SegmentDescriptor.decode($0, context: "fuzz") }) else { continue }
            decoded += 1
            #expect(entry.encoded() == bytes, "round \(round): \(hex(bytes)) decodes to \(entry), which encodes otherwise")
            let plain = { (name: String) in !name.isEmpty && name != "." && name != ".." && !name.contains("/") && !name.contains("\0") }
            #expect(plain(entry.fileName) && (entry.dictionaryFileName.map(plain) ?? true))
            #expect(entry.first >= 1 && entry.first <= entry.last && entry.last < .max)
            var next = entry.first
            for frame in entry.frames {
                #expect(frame.first == next && frame.first <= frame.last, "round \(round): frames don't cover \(entry.first)…\(entry.last)")
                next = frame.last &+ 1
                #expect(frame.offset <= UInt64(Int64.max) && frame.compressedLength <= UInt64(Int64.max) - frame.offset && frame.rawLength <= UInt64(Int64.max))
            }
            #expect(next == entry.last &+ 1)
        }
        print("manifest fuzz: \(Self.iterations) mutations, \(decoded) decoded")

        var frame: [UInt8] = []
        for event in [[UInt8](repeating: 7, count: 40), [1, 2, 3], [], [UInt8](repeating: 9, count: 300)] { FrameContent.append(event, to: &frame) }
        for _ in 0..<Self.iterations {
            let bytes = Self.mutate(frame, &random)
            guard let events = try? FrameContent.split(bytes, context: "fuzz") else { continue }
            #expect(events.reduce(0) { $0 + 4 + $1.count } == bytes.count)
        }
    }

    @Test("model files: mutated JSON is refused with a model error or loads a model the log can make a schema of")
    func modelFiles() throws {
        let seeds = [try vectorModel().jsonData(), try libraryModel().jsonData()].map { [UInt8]($0) }
        var random = SeededGenerator(seed: 0x30DE_0004)
        var loaded = 0
        for _ in 0..<Self.iterations {
            let bytes = Self.mutate(seeds[Int(random.next() % UInt64(seeds.count))], &random)
            guard let model = try? ManagedObjectModel(jsonData: Data(bytes)) else { continue }
            loaded += 1
            _ = ModelSchema(model: model)
            // A model that loads writes a file that loads back as the same model.
            let written = model.jsonData()
            let reread = try ManagedObjectModel(jsonData: written)
            #expect(reread.versionHash == model.versionHash, "a mutated model file's round trip changed the model")
            #expect(reread.jsonData() == written)
        }
        print("model fuzz: \(Self.iterations) mutations, \(loaded) loaded")
    }
}

/// What the fuzzing found: bytes no writer writes that decoded to a value (a different one
/// than was written, or a value of the wrong type) are refused, naming what is wrong.
@Suite("Decoders refuse what no writer writes")
struct StrictDecoderTests {
    /// The bytes of vector 1 (spec 0004 §3.5), changed by `edit`, with the checksum recomputed.
    func vectorOne(_ log: EventLog, _ edit: (inout [UInt8]) -> Void) throws -> [UInt8] {
        var bytes = try EventCodec.encode(try vectorEvents()[0].event, catalog: log.catalog)
        edit(&bytes)
        return DecoderMutationFuzzTests.resealed(bytes)
    }

    func refusal(_ log: EventLog, _ bytes: [UInt8]) -> String {
        do {
            let event = try bytes.withUnsafeBytes { try EventCodec.decode($0, catalog: log.catalog, context: "event 1") }
            return "decoded to \(event)"
        } catch {
            return "\(error)"
        }
    }

    @Test("events: reserved flag bits, version 0, an impossible timestamp, a value of the wrong type, repeated codes, overlong varints, non-canonical decimals and URIs")
    func events() throws {
        let dir = try TemporaryDirectory()
        let log = try EventLog(path: dir.file("store"), model: try vectorModel())
        #expect(refusal(log, try vectorOne(log) { _ in }).hasPrefix("decoded"))
        #expect(refusal(log, try vectorOne(log) { $0[5] = 0x83 }).contains("event flags 0x83"))
        #expect(refusal(log, try vectorOne(log) { $0[4] = 0 }).contains("format version 0"))
        #expect(refusal(log, try vectorOne(log) { $0[14] = 0x7F }).contains("timestamp of"))
        // Person.age (int16 36) with the tag of false and its payload removed.
        let wrongType = refusal(log, try vectorOne(log) {
            $0[70] = 0x08
            $0.removeSubrange(71...72)
        })
        #expect(wrongType.contains("event 1: Person.age holds a value of type boolean, where a value of type int16 belongs"), "\(wrongType)")
        // Person.name's code made 0, age's: age twice.
        #expect(refusal(log, try vectorOne(log) { $0[73] = 0 }).contains("property code 0 after 0: codes must ascend"))
        // The value count 3 written as 83 00.
        #expect(refusal(log, try vectorOne(log) { $0.replaceSubrange(68...68, with: [0x83, 0x00]) }).contains("overlong varint"))

        let sample = try EventCodec.encode(try #require(try vectorEvents().first { $0.name.contains("every attribute type") }?.event), catalog: log.catalog)
        func replacing(_ text: String, _ with: [UInt8]) throws -> [UInt8] {
            let needle = Array(text.utf8)
            let at = try #require((0...(sample.count - needle.count)).first { Array(sample[$0..<($0 + needle.count)]) == needle })
            var bytes = sample
            bytes.replaceSubrange(at..<(at + needle.count), with: with)
            return DecoderMutationFuzzTests.resealed(bytes)
        }
        #expect(refusal(log, sample).hasPrefix("decoded"))
        #expect(refusal(log, try replacing("12345.678", Array("12s45.678".utf8))).contains("invalid decimal \"12s45.678\""))
        #expect(refusal(log, try replacing("https://example.com/a", Array("https://example.com/".utf8) + [0x7F])).contains("invalid URI"))
    }

    @Test("a state record with a value of the wrong type or a repeated code: reads name the record, verify reports it")
    func records() throws {
        let dir = try TemporaryDirectory()
        let log = try EventLog(path: dir.file("store"), model: try vectorModel())
        var draft = TransactionDraft()
        let person = draft.insert("Person", values: ["name": .attribute(.string("Ada")), "age": .attribute(.int16(36))])
        let id = try #require(try log.commit(draft).permanentID(for: person))
        let key = try log.catalog.entityCode("Person")
        let objectKey = ObjectKey(entity: key, primaryKey: id.primaryKey).bytes
        let writer = TableWriter(tables: log.tables, catalog: log.catalog, schema: log.schema, modelVersion: log.modelVersion)
        let forged = try writer.encodeRecord(
            Record(modelVersion: 1, version: 1, values: ["name": .attribute(.string("Ada")), "age": .attribute(.string("old"))]),
            entity: try log.schema.entity("Person"))
        try log.environment.write { txn in try txn.put(forged, forKey: objectKey, in: log.tables.state) }
        for read in [
            { _ = try log.read { try $0.object(id) } },
            { _ = try log.read { try $0.fields(id) } },
            { _ = try log.read { reader in try reader.forEachObject(of: "Person") { _ in .next } } },
        ] as [() throws -> Void] {
            #expect(throws: LogError.self) { try read() }
            do { try read() } catch {
                #expect("\(error)".contains("record Person/p1: Person.age holds a value of type string, where a value of type int16 belongs"), "\(error)")
            }
        }
        #expect(try log.verify().problems.contains { $0.location == "state Person/p1" })

        // The same code twice: age 36, then age 37.
        var repeated: [UInt8] = [1, 1, 2, 0, 0x01, 0, 36, 0, 0x01, 0, 37]
        try log.environment.write { txn in try txn.put(repeated, forKey: objectKey, in: log.tables.state) }
        #expect(throws: LogError.self) { _ = try log.read { try $0.object(id) } }
        repeated = [1, 1, 1, 0, 0x01, 0, 36]
        try log.environment.write { txn in try txn.put(repeated, forKey: objectKey, in: log.tables.state) }
        #expect(try log.read { try $0.object(id) }?["age"] == .attribute(.int16(36)))
    }

    @Test("manifest entries: version 0, a dictionary flag other than 0 or 1, a NUL in the dictionary name, no frames")
    func manifests() throws {
        let frame = SegmentDescriptor.Frame(first: 1, last: 4, offset: 0, compressedLength: 10, rawLength: 20)
        func entry(dictionary: String? = "d.dict", frames: [SegmentDescriptor.Frame] = [frame]) -> SegmentDescriptor {
            SegmentDescriptor(fileName: "s.zst", first: 1, last: 4, rawBytes: 20, compressedBytes: 10, dictionaryFileName: dictionary, frames: frames)
        }
        func refusal(_ bytes: [UInt8]) -> String {
            do {
                return "decoded to \(try bytes.withUnsafeBytes { try SegmentDescriptor.decode($0, context: "manifest entry 1") })"
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal(entry().encoded()).hasPrefix("decoded"))
        var bytes = entry().encoded()
        bytes[0] = 0
        #expect(refusal(DecoderMutationFuzzTests.resealed(bytes)).contains("version 0"))
        bytes = entry(dictionary: nil).encoded()
        bytes[1 + 1 + 5 + 32] = 2
        #expect(refusal(DecoderMutationFuzzTests.resealed(bytes)).contains("dictionary flag 2 is neither 0 nor 1"))
        #expect(refusal(entry(dictionary: "d\0.dict").encoded()).contains("is not a plain file name"))
        #expect(refusal(entry(frames: []).encoded()).contains("no frames"))
    }
}
