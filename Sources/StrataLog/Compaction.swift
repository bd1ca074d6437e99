public import Foundation

/// What to compact (`EventLog.compact(_:)`).
///
/// ```swift
/// var request = CompactionRequest()
/// request.before = 50_000          // move events 1…49,999 if nothing holds them back
/// request.usesDictionary = true
/// let report = try log.compact(request)
/// ```
public struct CompactionRequest: Sendable, Hashable {
    /// Move events with sequence numbers below this; nil for as far as allowed.
    public var before: UInt64?
    /// Move events committed before this date (combined with `before`: the lower wins).
    public var beforeDate: Date?
    /// The zstd level (default 3).
    public var level: Int = 3
    /// Train a dictionary on the moved events and store it beside the segment.
    public var usesDictionary: Bool = false
    /// Events per zstd frame: the unit a read of one old event decompresses.
    public var eventsPerFrame: Int = 256
    /// Report what would move, without moving anything.
    public var dryRun: Bool = false

    /// The defaults: move everything allowed, level 3, no dictionary.
    public init(before: UInt64? = nil) { self.before = before }
}

/// What held compaction's horizon back.
public enum CompactionLimit: Sendable, Hashable, CustomStringConvertible {
    /// The caller's `before` or `beforeDate`.
    case requested
    /// A registered consumer that hasn't processed further.
    case consumer(name: String, processedThrough: UInt64)
    /// The persisted undo depth: the newest transactions stay raw.
    case undoRetention(transactions: UInt64)
    /// The log's head: everything is already compacted or nothing is old enough.
    case head

    /// A phrase for reports.
    public var description: String {
        switch self {
        case .requested: "the requested horizon"
        case .consumer(let name, let through): "consumer \"\(name)\" (processed through \(through))"
        case .undoRetention(let n): "persisted undo (the last \(n) transactions stay raw)"
        case .head: "the head of the log"
        }
    }
}

/// What a compaction did, or with `dryRun` would do.
public struct CompactionReport: Sendable, Hashable {
    /// The events moved into the new segment; nil when nothing moved.
    public let moved: ClosedRange<UInt64>?
    /// The highest sequence allowed to move.
    public let horizon: UInt64
    /// What set the horizon.
    public let limitedBy: CompactionLimit
    /// The events' encoded size before compression.
    public let rawBytes: Int
    /// The segment file's size (for a dry run, an estimate from compressing a sample).
    public let compressedBytes: Int
    /// The new segment file's path.
    public let segmentFile: String?
    /// The dictionary file's path, if one was trained.
    public let dictionaryFile: String?
    /// Whether this was a dry run.
    public let isDryRun: Bool

    /// The number of events moved.
    public var eventCount: Int { moved.map { Int($0.upperBound - $0.lowerBound + 1) } ?? 0 }
    /// `rawBytes / compressedBytes`.
    public var ratio: Double { compressedBytes == 0 ? 0 : Double(rawBytes) / Double(compressedBytes) }
}

/// What a compaction would move, without reading the events (``EventLog/compactionPlan(_:)``).
public struct CompactionPlan: Sendable, Hashable {
    /// The raw events below the horizon, which a compaction would move; nil when none.
    public let range: ClosedRange<UInt64>?
    /// The highest sequence allowed to move.
    public let horizon: UInt64
    /// What set the horizon.
    public let limitedBy: CompactionLimit
}

/// One segment in the manifest.
public struct SegmentInfo: Sendable, Hashable {
    /// The segment file's name inside the store's `segments` directory.
    public let fileName: String
    /// The first and last sequence it holds.
    public let sequences: ClosedRange<UInt64>
    /// The events' encoded size.
    public let rawBytes: Int
    /// The file's size.
    public let compressedBytes: Int
    /// The number of zstd frames.
    public let frameCount: Int
    /// The dictionary file's name, if the segment uses one.
    public let dictionaryFileName: String?
}

/// A problem `verify()` found: where, and what.
public struct VerificationProblem: Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem.
    public enum Kind: String, Sendable, Hashable {
        /// An event that doesn't decode or whose checksum is wrong.
        case event
        /// A gap or disorder in sequence numbers.
        case sequence
        /// A segment file missing, damaged, or not matching its manifest entry.
        case segment
        /// A derived table (state, index, references, history, counters) that differs from the replayed log.
        case projection
        /// An event whose before-image doesn't match the state it applies to.
        case beforeImage
        /// A relationship or bookkeeping row that can't be right, though the replay agrees
        /// with it (spec 0004 §8): a reference whose source or target doesn't exist; a
        /// reference naming an object outside its relationship's destination (and its
        /// sub-entities) in the model version its source was written with; an object held by
        /// two sources of a relationship whose inverse is a to-one (a one-to-one's recorded
        /// side, an ordered to-many with a to-one inverse); an ordered list naming an object
        /// twice; a list on one side of a many-to-many ordered on both sides that lacks an
        /// object whose list on the other side holds it; a consumer's processed point that
        /// isn't 8 bytes or is past the head; a `contextIndexThrough` row that isn't 8 bytes
        /// or is past the head, or that says the per-context index covers events while the
        /// store has no `contexts` table.
        case integrity
        /// The base snapshot a purge keeps (the state as of the purge point) is missing or
        /// doesn't load.
        case base
        /// A derived attribute's stored value that its derivation, computed afresh over the
        /// replayed state, doesn't give.
        case derived
    }

    /// The kind.
    public let kind: Kind
    /// Where: `event 12`, `segment 000…-000….zst`, `state Member/p3.age`, …
    public let location: String
    /// What is wrong.
    public let message: String

    /// `kind: location: message`.
    public var description: String { "\(kind.rawValue): \(location): \(message)" }
}

/// The result of `EventLog.verify()`.
public struct VerificationReport: Sendable, Hashable {
    /// Every problem found, in the order found.
    public let problems: [VerificationProblem]
    /// How many events were decoded and checked.
    public let eventsChecked: Int
    /// How many segment files were checked.
    public let segmentsChecked: Int
    /// How many objects the replay rebuilt.
    public let objectsRebuilt: Int

    /// Whether nothing is wrong.
    public var isClean: Bool { problems.isEmpty }
}
