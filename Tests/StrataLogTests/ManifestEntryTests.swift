import Foundation
@testable import StrataLog
import StrataStorage
import StrataTestSupport
import Testing

/// A segment manifest entry whose checksum holds but whose numbers or names can't be right
/// (written by a bug, or by hand) is refused with an error naming what is wrong: no read
/// computes with it, opens a path outside the segment folder, or traps; `verify` reports it
/// and checks the rest.
@Suite("Event log: manifest entries that make no sense")
struct ManifestEntryTests {
    @Test("bad names, ranges, frames and sizes: reads fail naming the entry, verify reports it, restoring it heals the store")
    func nonsenseEntries() throws {
        let dir = try TemporaryDirectory()
        let (log, _) = try compactedLog(dir, transactions: 80, before: 61, eventsPerFrame: 16)
        let key = bigEndianBytes(UInt64(1))
        let original = try #require(try log.environment.read { txn in try txn.value(forKey: key, in: log.tables.segments) })
        let good = try original.withUnsafeBytes { try SegmentDescriptor.decode($0, context: "test") }
        let expected = try log.read { reader in try reader.event(20) }
        typealias Frame = SegmentDescriptor.Frame
        func entry(name: String? = nil, first: UInt64? = nil, last: UInt64? = nil, dictionary: String? = nil, frames: [Frame]? = nil)
            -> SegmentDescriptor
        {
            SegmentDescriptor(
                fileName: name ?? good.fileName, first: first ?? good.first, last: last ?? good.last, rawBytes: good.rawBytes,
                compressedBytes: good.compressedBytes, dictionaryFileName: dictionary, frames: frames ?? good.frames)
        }
        var frames = good.frames
        frames[1] = Frame(first: frames[1].last, last: frames[1].first, offset: frames[1].offset, compressedLength: frames[1].compressedLength, rawLength: frames[1].rawLength)
        var gap = good.frames
        gap.remove(at: 2)
        var huge = good.frames
        huge[0] = Frame(first: huge[0].first, last: huge[0].last, offset: huge[0].offset, compressedLength: huge[0].compressedLength, rawLength: .max)
        var wrapping = good.frames
        wrapping[0] = Frame(first: wrapping[0].first, last: wrapping[0].last, offset: UInt64(Int.max), compressedLength: 10, rawLength: wrapping[0].rawLength)
        let cases: [(String, SegmentDescriptor)] = [
            ("not a plain file name", entry(name: "../../outside.zst")),
            ("not a plain file name", entry(name: "")),
            ("dictionary name", entry(dictionary: "../secret.dict")),
            ("is not a range", entry(first: 60, last: 1)),
            ("is not a range", entry(first: 0)),
            ("frame 1 holds events", entry(frames: frames)),
            ("frame 2 holds events", entry(frames: gap)),
            ("out of range", entry(frames: huge)),
            ("out of range", entry(frames: wrapping)),
            ("the frames end at", entry(last: 70)),
        ]
        for (message, bad) in cases {
            try log.environment.write { txn in try txn.put(bad.encoded(), forKey: key, in: log.tables.segments) }
            do {
                _ = try log.read { reader in try reader.event(20) }
                Issue.record("reading through \(message) succeeded")
            } catch {
                #expect("\(error)".contains(message), "\(error)")
                #expect("\(error)".contains("segment starting at 1"), "\(error)")
            }
            let report = try log.verify()
            #expect(report.problems.contains { $0.kind == .segment && $0.location == "manifest entry 1" && $0.message.contains(message) },
                "\(report.problems.prefix(3))")
            // The raw events after the segments still read.
            #expect(try log.read { reader in try reader.event(70) }.sequence == 70)
        }
        try log.environment.write { txn in try txn.put(original, forKey: key, in: log.tables.segments) }
        #expect(try log.read { reader in try reader.event(20) } == expected)
        #expect(try log.verify().problems.isEmpty)
    }
}
