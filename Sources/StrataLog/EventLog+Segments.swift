import Foundation
import StrataStorage

extension EventLog {
    /// Removes what an interrupted compaction left behind (filled in with compaction).
    func repairSegments() throws {}
}

extension LogReader {
    /// Events from segment files (filled in with compaction).
    func forEachSegmentEvent(from: UInt64, through: UInt64, _ body: (TransactionEvent) throws -> IterationDecision) throws {
        throw LogError.segment("events \(from)…\(through) are compacted, and segment reading is not built yet")
    }
}
