import ArgumentParser
import Foundation
import Strata
import StrataLog

/// `strata info`: what a store holds and how it is laid out.
struct InfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show a store's identity, model versions, head, counts, segments, files, consumers, any purge and its user metadata.",
        discussion: """
            Opens the store read-only (nothing is written; an app may hold it open and write).
            Object counts are per concrete entity, live objects at the head.

            Examples:
              strata info League.strata
              strata info League.strata --format json | jq .head
            """
    )

    @OptionGroup var options: StoreOptions

    @Option(help: "text or json.")
    var format: TextOrJSON = .text

    func run() throws {
        try runCommand {
            let log = try options.openReadOnly()
            let out = OutputSink()
            defer { out.close() }
            let info = try StoreInfo(log)
            switch format {
            case .text: info.writeText(to: out)
            case .json: out.line(info.json)
            }
            // What could be read was printed; a damaged part is a problem found.
            if !info.damaged.isEmpty {
                out.flush()
                throw CommandFailure(
                    "the store is damaged: \(info.damaged.map(\.section).joined(separator: ", ")) can't be read; `strata verify \(log.path)` says more")
            }
        }
    }
}

/// `text` or `json`.
enum TextOrJSON: String, ExpressibleByArgument, CaseIterable, Sendable {
    case text, json
}

/// Everything `strata info` reports, gathered from one read snapshot.
struct StoreInfo {
    let path: String
    let metadata: StoreMetadata
    let counts: [(entity: String, count: Int)]
    let segments: [SegmentInfo]
    let consumers: [(name: String, processedThrough: UInt64)]
    let checkpoints: [UInt64]
    let files: [(name: String, bytes: Int)]
    /// The newest purge marker, if the store was purged.
    let purgeMarker: TransactionEvent?
    /// The user's store metadata (`PersistentStoreCoordinator.setMetadata`).
    let userMetadata: [String: MetadataValue]
    /// The step of a staged migration whose didMigrate handler hasn't finished (the
    /// `stagedMigration` meta row, spec 0006 §19.6: `label`, `step`, `target`), nil when none.
    let stagedMigration: [String: Any]?
    /// The store's number for that step's target model version, nil when it isn't stored.
    let stagedTargetVersion: Int?
    /// The parts that couldn't be read (damage), with why; the others are reported as usual.
    let damaged: [(section: String, error: String)]
    /// What is wrong with a segment's files on disk (missing, another size than the
    /// manifest's, a dictionary missing), by segment file name.
    let segmentFileProblems: [String: String]

    init(_ log: EventLog) throws {
        path = log.path
        var damaged: [(section: String, error: String)] = []
        // The metadata is what the command is; each other part is read on its own, so a
        // damaged one (a manifest entry, a consumer row) doesn't hide the rest.
        func part<T>(_ section: String, _ fallback: T, _ body: () throws -> T) -> T {
            do {
                return try body()
            } catch {
                damaged.append((section, "\(error)"))
                return fallback
            }
        }
        (metadata, counts, segments, consumers, checkpoints, purgeMarker, userMetadata) = try log.read { reader in
            let metadata = try reader.metadata()
            let counts = part("objects", []) { try log.concreteEntityNames.map { ($0, try reader.count(of: $0, includingSubentities: false)) } }
            let segments = part("segments", []) { try reader.segments() }
            let consumers = part("consumers", []) { try reader.consumers() }
            let checkpoints = part("checkpoints", []) { try reader.checkpoints() }
            let marker: TransactionEvent? = part("purge marker", nil) {
                let marker = try reader.purgeMarker
                return marker > 0 ? try reader.event(marker) : nil
            }
            let user = part("metadata", [:]) { try reader.userMetadata() }
            return (metadata, counts, segments, consumers, checkpoints, marker, user)
        }
        (stagedMigration, stagedTargetVersion) = part("staged migration", (nil, nil)) { () throws -> ([String: Any]?, Int?) in
            guard let bytes = try log.stagedMigrationMarker() else { return (nil, nil) }
            guard let object = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
                throw CommandFailure("the stagedMigration row isn't a JSON object")
            }
            let target = (object["target"] as? String).flatMap(Self.hexBytes)
            return (object, try target.flatMap { try log.storedVersion(hash: $0) })
        }
        // The manifest read, its files are checked on disk (a stat each, never read): a segment
        // file missing, of another size than the manifest's, or a dictionary missing is
        // damage every read of those events meets (before, info listed such a segment as
        // whole and exited 0).
        let directory = (path as NSString).appendingPathComponent("segments")
        var fileProblems: [String: String] = [:]
        for segment in segments {
            let events = "events \(segment.sequences.lowerBound)…\(segment.sequences.upperBound)"
            let file = (directory as NSString).appendingPathComponent(segment.fileName)
            var problems: [String] = []
            if let size = (try? FileManager.default.attributesOfItem(atPath: file))?[.size] as? Int {
                if size != segment.compressedBytes {
                    problems.append("segment \(segment.fileName) (\(events)) is \(size) bytes, the manifest says \(segment.compressedBytes)")
                }
            } else {
                problems.append("segment \(segment.fileName) (\(events)) is missing from \(directory)")
            }
            if let dictionary = segment.dictionaryFileName,
                !FileManager.default.fileExists(atPath: (directory as NSString).appendingPathComponent(dictionary))
            {
                problems.append("dictionary \(dictionary) of segment \(segment.fileName) (\(events)) is missing from \(directory)")
            }
            if !problems.isEmpty { fileProblems[segment.fileName] = problems.joined(separator: "; ") }
        }
        if !fileProblems.isEmpty {
            damaged.append(("segment files", segments.compactMap { fileProblems[$0.fileName] }.joined(separator: "; ")))
        }
        segmentFileProblems = fileProblems
        self.damaged = damaged
        files = [("data.mdb", diskSize((path as NSString).appendingPathComponent("data.mdb"))),
                 ("lock.mdb", diskSize((path as NSString).appendingPathComponent("lock.mdb"))),
                 ("segments", diskSize((path as NSString).appendingPathComponent("segments")))]
    }

    /// The bytes of lowercase or uppercase hex `text`, nil when it isn't hex.
    static func hexBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count.isMultiple(of: 2) else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }

    /// Events kept in segments (compacted, not purged).
    var compactedEvents: UInt64 { metadata.compactedThrough - metadata.purgedThrough }
    /// Events kept at all.
    var keptEvents: UInt64 { metadata.head - metadata.purgedThrough }

    func writeText(to out: OutputSink) {
        let unreadable = Dictionary(damaged.map { ($0.section, $0.error) }, uniquingKeysWith: { a, _ in a })
        out.line("store        \(path)")
        out.line("uuid         \(metadata.storeUUID.uuidString)")
        out.line("format       \(metadata.formatVersion)")
        var models = "models       \(metadata.modelVersions.map(String.init).joined(separator: ", ")) (newest \(metadata.modelVersions.last ?? 0)"
        if !metadata.refusedModelVersions.isEmpty {
            let refused = metadata.refusedModelVersions.map(String.init).joined(separator: ", ")
            let one = metadata.refusedModelVersions.count == 1
            models += "; in use \(metadata.modelVersionInUse): the migration\(one ? "" : "s") to \(refused) \(one ? "was" : "were") refused or didn't finish"
        }
        out.line(models + ")")
        if let pending = stagedMigration {
            let step = (pending["step"] as? Int).map { "step \($0 + 1)" } ?? "a step"
            let target = stagedTargetVersion.map(String.init) ?? "#" + String((pending["target"] as? String ?? "?").prefix(12))
            let label = (pending["label"] as? String).flatMap { $0.isEmpty ? nil : $0 }.map { "custom stage \"\($0)\"" } ?? "custom stage"
            out.line("staged       \(step) to model version \(target) (\(label)): its didMigrate handler hasn't finished; the next add with the staged migration runs it again")
        }
        if let error = unreadable["staged migration"] { out.line("staged       can't be read: \(error)") }
        out.line("created      \(Timestamps.format(metadata.createdAt))")
        out.line("opened       \(Timestamps.format(metadata.openedAt)) (last writable open)")
        out.line("head         \(metadata.head)")
        out.line("events       \(keptEvents) (\(compactedEvents) in segments, \(metadata.head - metadata.compactedThrough) raw)")
        if metadata.purgedThrough > 0 {
            var line = "purged       1…\(metadata.purgedThrough) (the state as of \(metadata.purgedThrough) is kept as the base snapshot)"
            if let marker = purgeMarker {
                line += "; #\(marker.sequence)\(marker.author.map { " by \(ValueRendering.oneLine($0))" } ?? "") at \(Timestamps.format(marker.timestamp))"
            }
            out.line(line)
        }
        if let error = unreadable["purge marker"] { out.line("purge marker can't be read: \(error)") }
        if let error = unreadable["objects"] {
            out.line("objects      can't be read: \(error)")
        } else {
            out.line("objects      \(counts.reduce(0) { $0 + $1.count })")
            let width = counts.map(\.entity.count).max() ?? 0
            for (entity, count) in counts {
                out.line("  \(entity.padding(toLength: width, withPad: " ", startingAt: 0))  \(count)")
            }
        }
        let raw = segments.reduce(0) { $0 + $1.rawBytes }
        let compressed = segments.reduce(0) { $0 + $1.compressedBytes }
        if let error = unreadable["segments"] {
            out.line("segments     can't be read: \(error)")
        } else if segments.isEmpty {
            out.line("segments     none")
        } else {
            out.line("segments     \(segments.count): raw \(raw) bytes, compressed \(compressed) bytes, ratio \(ratio(raw, compressed))")
            for segment in segments {
                let dictionary = segment.dictionaryFileName.map { ", dictionary \($0)" } ?? ""
                let damage = segmentFileProblems[segment.fileName].map { "  DAMAGED: \($0)" } ?? ""
                out.line("  \(segment.sequences.lowerBound)…\(segment.sequences.upperBound)  \(segment.fileName)  raw \(segment.rawBytes), compressed \(segment.compressedBytes), ratio \(ratio(segment.rawBytes, segment.compressedBytes)), \(segment.frameCount) \(segment.frameCount == 1 ? "frame" : "frames")\(dictionary)\(damage)")
            }
        }
        out.line("files")
        for (name, bytes) in files { out.line("  \(name.padding(toLength: 9, withPad: " ", startingAt: 0))  \(byteCount(bytes))") }
        if let error = unreadable["consumers"] {
            out.line("consumers    can't be read: \(error)")
        } else if consumers.isEmpty {
            out.line("consumers    none")
        } else {
            out.line("consumers")
            // A name's control characters escaped, as a metadata key's: a newline in it can't
            // print a line that reads as another part of the report (before, printed raw).
            for (name, through) in consumers { out.line("  \(ValueRendering.oneLine(name))  processed through \(through)") }
        }
        if let error = unreadable["checkpoints"] {
            out.line("checkpoints  can't be read: \(error)")
        } else {
            out.line("checkpoints  \(checkpoints.isEmpty ? "none" : checkpoints.map(String.init).joined(separator: ", "))")
        }
        if let error = unreadable["metadata"] {
            out.line("metadata     can't be read: \(error)")
        } else if userMetadata.isEmpty {
            out.line("metadata     none")
        } else {
            out.line("metadata     \(userMetadata.count) key\(userMetadata.count == 1 ? "" : "s")")
            let keys = userMetadata.keys.sorted()
            let width = keys.map { ValueRendering.oneLine($0).count }.max() ?? 0
            for key in keys {
                guard let value = userMetadata[key] else { continue }
                let name = ValueRendering.oneLine(key).padding(toLength: width, withPad: " ", startingAt: 0)
                out.line("  \(name)  \(Self.text(value)) (\(value.typeName))")
            }
        }
    }

    /// A metadata value as `MetadataValue.description` writes it — strings quoted, data as
    /// its byte count and hex — but dates as every other date the tool prints: to the
    /// microsecond, and one with no ISO form as its seconds since 1970 (``Timestamps/format(_:)``),
    /// not a made-up date.
    static func text(_ value: MetadataValue) -> String {
        switch value {
        case .date(let date): Timestamps.format(date)
        case .array(let values): "[" + values.map(text).joined(separator: ", ") + "]"
        case .dictionary(let values):
            "[" + values.sorted { $0.key < $1.key }.map { "\(ValueRendering.jsonString($0.key)): \(text($0.value))" }.joined(separator: ", ") + "]"
        default: value.description
        }
    }

    func ratio(_ raw: Int, _ compressed: Int) -> String {
        compressed == 0 ? "0" : String(format: "%.2f", Double(raw) / Double(compressed))
    }

    var json: String {
        var object: [String: Any] = [
            "path": path,
            "storeUUID": metadata.storeUUID.uuidString,
            "formatVersion": metadata.formatVersion,
            "modelVersions": metadata.modelVersions,
            "modelVersionInUse": metadata.modelVersionInUse,
            "refusedModelVersions": metadata.refusedModelVersions,
            "createdAt": Timestamps.format(metadata.createdAt),
            "openedAt": Timestamps.format(metadata.openedAt),
            "head": metadata.head,
            "compactedThrough": metadata.compactedThrough,
            "purgedThrough": metadata.purgedThrough,
            "objects": Dictionary(counts.map { ($0.entity, $0.count) }, uniquingKeysWith: { a, _ in a }),
            "segments": segments.map { segment -> [String: Any] in
                var entry: [String: Any] = [
                    "file": segment.fileName, "first": segment.sequences.lowerBound, "last": segment.sequences.upperBound,
                    "rawBytes": segment.rawBytes, "compressedBytes": segment.compressedBytes, "frames": segment.frameCount,
                ]
                if let dictionary = segment.dictionaryFileName { entry["dictionary"] = dictionary }
                if let damage = segmentFileProblems[segment.fileName] { entry["damage"] = damage }
                return entry
            },
            "files": Dictionary(files.map { ($0.name, $0.bytes) }, uniquingKeysWith: { a, _ in a }),
            "consumers": Dictionary(consumers.map { ($0.name, $0.processedThrough) }, uniquingKeysWith: { a, _ in a }),
            "checkpoints": checkpoints,
            "metadata": userMetadata.mapValues(\.jsonObject),
        ]
        if let stagedMigration { object["stagedMigration"] = stagedMigration }
        // A part that can't be read is left out (not shown empty) and named under "damaged".
        if !damaged.isEmpty {
            let keys = [
                "objects": "objects", "segments": "segments", "consumers": "consumers", "checkpoints": "checkpoints",
                "metadata": "metadata",
            ]
            for (section, _) in damaged { if let key = keys[section] { object[key] = nil } }
            object["damaged"] = Dictionary(damaged.map { ($0.section, $0.error) }, uniquingKeysWith: { a, _ in a })
        }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
