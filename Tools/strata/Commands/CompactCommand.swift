import ArgumentParser
import Foundation
import Strata
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `strata compact`: move old history into zstd segments.
struct CompactCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Move history below a horizon into zstd segments, optionally shrinking the file after.",
        discussion: """
            Opens the store writable. The horizon is the lowest of --before (a sequence: events
            below it move; or an ISO 8601 date: events committed before it move), every
            registered consumer's checkpoint, and the persisted undo depth. Large compactions
            run in steps of at most 50,000 events, one segment each, with a progress bar on a
            terminal (plain progress lines otherwise, on standard error). Prints the store's
            sizes before and after. Reads of compacted history keep working unchanged.

            --vacuum copies the environment compacted afterwards so data.mdb shrinks; no other
            process may have the store open while it runs.

            Examples:
              strata compact League.strata --dry-run
              strata compact League.strata --before 5000 --level 9
              strata compact League.strata --before 2026-01-01 --dictionary --vacuum
              strata compact League.strata --events-per-step 10000
              strata compact League.strata --wait 600

            Another process's write transaction (an app's save, another compact or revert)
            makes it wait: after a second it says so on standard error, naming the process
            that holds the store's write lock, and after --wait seconds (default 60; 0: don't
            wait; forever) it gives up, exit status 1.

            When a step fails (a damaged raw log, a full disk, another compaction that keeps
            overtaking it), the steps before it stay done: the output says what they moved,
            into which segments, and how far the store is compacted; exit status 1. When the
            horizon falls between steps (another process registers a consumer or raises the
            persisted undo depth), compaction stops there: the output says the horizon
            reached, what limits it, and the events not moved; exit status 0.
            """
    )

    @OptionGroup var options: StoreOptions

    @OptionGroup var writerWait: WriterWaitOptions

    @Option(parsing: .unconditional, help: ArgumentHelp("Move events below this sequence, or committed before this date.", valueName: "seq|date"))
    var before: LogPoint?

    @Option(parsing: .unconditional, help: "The zstd level, 1 to 19.")
    var level: Int = 3

    @Flag(help: "Train a zstd dictionary on the moved events.")
    var dictionary = false

    @Flag(help: "Report what would move and the estimated saving, without changing anything.")
    var dryRun = false

    @Flag(help: "Shrink the environment file afterwards (the store must not be open elsewhere).")
    var vacuum = false

    @Option(parsing: .unconditional, help: ArgumentHelp("The most events one step moves, into one segment.", valueName: "n"))
    var eventsPerStep: Int = Int(Self.step)

    /// The most events one step moves, by default.
    static let step: UInt64 = 50_000

    func validate() throws {
        guard (1...19).contains(level) else { throw ValidationError("--level must be between 1 and 19, not \(level)") }
        guard eventsPerStep >= 1 else { throw ValidationError("--events-per-step must be at least 1, not \(eventsPerStep)") }
        if dryRun && vacuum { throw ValidationError("--dry-run and --vacuum can't be combined") }
    }

    func run() throws {
        writerWait.install(store: options.store)
        try runCommand {
            let dataPath = (options.store as NSString).appendingPathComponent("data.mdb")
            let segmentsPath = (options.store as NSString).appendingPathComponent("segments")
            let sizesBefore = (diskSize(dataPath), diskSize(segmentsPath))
            var movedAny = false
            // What the compaction did, for a vacuum that fails after it: said with the error.
            var compacted = "moved nothing"
            // The log is released at the end of this block: a vacuum needs the store closed.
            moving: do {
                let log = try options.openWritable()
                var request = CompactionRequest()
                request.level = level
                request.usesDictionary = dictionary
                let head = try log.head
                switch before {
                case .sequence(let n):
                    if n > head + 1 { throw CommandFailure("sequence \(n) is past the head (\(head)); --before \(head + 1) moves everything") }
                    request.before = n
                case .date(let date): request.beforeDate = date
                case nil: break
                }
                if dryRun {
                    request.dryRun = true
                    let report = try log.compact(request)
                    if let moved = report.moved {
                        try writeLine("would move events \(moved.lowerBound)…\(moved.upperBound) (\(report.eventCount) events): \(report.rawBytes) bytes raw → about \(report.compressedBytes) bytes compressed (ratio \(String(format: "%.2f", report.ratio))), saving about \(max(0, report.rawBytes - report.compressedBytes)) bytes")
                        try writeLine("horizon \(report.horizon), limited by \(report.limitedBy)")
                    } else {
                        try writeLine("nothing to move: horizon \(report.horizon), limited by \(report.limitedBy)")
                    }
                    return
                }
                // Find the horizon, then move in steps. The plan reads no event (with
                // --before DATE, the timestamps up to the date): before, it was a dry run,
                // which reads every event of the range to estimate its compressed size, so a
                // compaction read its range twice.
                let plan = try log.compactionPlan(request)
                // Nothing to move still falls through: --vacuum shrinks the file all the same.
                guard let range = plan.range else {
                    try writeLine("nothing to move: horizon \(plan.horizon), limited by \(plan.limitedBy)")
                    compacted = "had nothing to move (horizon \(plan.horizon), limited by \(plan.limitedBy))"
                    break moving
                }
                let total = range.upperBound - range.lowerBound + 1
                let progress = Progress(total: total)
                progress.update(done: 0)
                var raw = 0
                var compressed = 0
                var next = range.lowerBound
                // What this run moved (first, last, how many), and what another compaction
                // or a purge — the app's own, another `strata compact` — moved meanwhile:
                // the plan's range is what was there to move, not what this run moved.
                var first: UInt64?
                var last: UInt64 = 0
                var count: UInt64 = 0
                var movedElsewhere: [ClosedRange<UInt64>] = []
                var lastReport: CompactionReport?
                // Segments --dictionary asked a dictionary for and got none (the trainer needs
                // enough events, and may refuse them): said, not passed over in silence.
                var withoutDictionary: [ClosedRange<UInt64>] = []
                // The segment files the steps wrote, and which step this is.
                var segments: [String] = []
                var stepNumber = 0
                // The report of the step that found the horizon below the events left to
                // move: a consumer registered or moved back, or the persisted undo depth
                // raised, by another process meanwhile.
                var fell: CompactionReport?
                let stepSize = UInt64(eventsPerStep)
                while next <= range.upperBound {
                    var stepRequest = request
                    stepRequest.beforeDate = nil
                    let stepLast = min(range.upperBound, next + stepSize - 1)
                    stepRequest.before = stepLast + 1
                    stepNumber += 1
                    let report: CompactionReport
                    do {
                        report = try log.compact(stepRequest)
                    } catch {
                        progress.finish()
                        // The steps before this one stay done: say what they did, so whoever
                        // reads this knows the state the store is in (before, only the
                        // error was printed, as if nothing had moved).
                        guard let first else { throw error }
                        try writeLine(movedLine(first: first, last: last, count: count, raw: raw, compressed: compressed))
                        try writeLine("stopped at step \(stepNumber): compacted through \(last), short of horizon \(plan.horizon) (limited by \(plan.limitedBy)); events \(next)…\(range.upperBound) were not moved")
                        if !movedElsewhere.isEmpty {
                            let elsewhere = movedElsewhere.map { "\($0.lowerBound)…\($0.upperBound)" }.joined(separator: ", ")
                            try writeLine("note: another compaction or a purge moved events \(elsewhere) meanwhile")
                        }
                        throw CommandFailure(
                            "step \(stepNumber) (events \(next)…\(stepLast)) failed: \(error). \(stepNumber == 2 ? "The step before it completed and stays done" : "The \(stepNumber - 1) steps before it completed and stay done"): events \(first)…\(last) (\(count) events) were moved into \(Self.segmentList(segments)), so the store is compacted through \(last); events \(next)…\(range.upperBound) are still in the raw log. The store is whole (strata verify checks it): run compact again to move the rest")
                    }
                    lastReport = report
                    guard let moved = report.moved else {
                        // Nothing moved: another compaction or a purge took these events first
                        // (go on after them), or the horizon fell meanwhile (stop).
                        let metadata = try log.metadata
                        let through = max(metadata.compactedThrough, metadata.purgedThrough)
                        guard through >= next else {
                            fell = report
                            break
                        }
                        movedElsewhere.append(next...min(through, range.upperBound))
                        next = through + 1
                        progress.update(done: min(next, range.upperBound + 1) - range.lowerBound)
                        continue
                    }
                    if moved.lowerBound > next { movedElsewhere.append(next...(moved.lowerBound - 1)) }
                    if dictionary && report.dictionaryFile == nil { withoutDictionary.append(moved) }
                    raw += report.rawBytes
                    compressed += report.compressedBytes
                    if let file = report.segmentFile { segments.append((file as NSString).lastPathComponent) }
                    if first == nil { first = moved.lowerBound }
                    last = moved.upperBound
                    count += moved.upperBound - moved.lowerBound + 1
                    next = moved.upperBound + 1
                    progress.update(done: next - range.lowerBound)
                    movedAny = true
                }
                progress.finish()
                let elsewhere = movedElsewhere.map { "\($0.lowerBound)…\($0.upperBound)" }.joined(separator: ", ")
                // Where the horizon fell to, from the plan's, and what was left unmoved: the
                // report says the horizon reached, not the one planned (before, it said the
                // planned one, as if every event below it had moved).
                let fellLine = fell.map { reached in
                    "horizon \(reached.horizon), limited by \(reached.limitedBy): it fell from the planned \(plan.horizon) (limited by \(plan.limitedBy)) while compacting, so events \(next)…\(range.upperBound) were not moved"
                }
                guard let first else {
                    compacted = "moved nothing"
                    if let fellLine {
                        try writeLine("nothing moved: \(fellLine)")
                    } else if movedElsewhere.isEmpty {
                        let (horizon, limitedBy) = lastReport.map { ($0.horizon, $0.limitedBy) } ?? (plan.horizon, plan.limitedBy)
                        try writeLine("nothing to move: horizon \(horizon), limited by \(limitedBy)")
                    } else {
                        try writeLine("nothing to move: another compaction or a purge moved events \(elsewhere) first")
                    }
                    if !movedElsewhere.isEmpty, fell != nil {
                        try writeLine("note: another compaction or a purge moved events \(elsewhere) meanwhile")
                    }
                    break moving
                }
                try writeLine(movedLine(first: first, last: last, count: count, raw: raw, compressed: compressed))
                try writeLine(fellLine ?? "horizon \(plan.horizon), limited by \(plan.limitedBy)")
                compacted =
                    "completed and stays done: events \(first)…\(last) (\(count) events) were moved into \(Self.segmentList(segments)), \(raw) bytes raw → \(compressed) bytes, so the store is compacted through \(last)"
                if !movedElsewhere.isEmpty {
                    try writeLine("note: another compaction or a purge moved events \(elsewhere) meanwhile")
                }
                if !withoutDictionary.isEmpty {
                    let ranges = withoutDictionary.map { "\($0.lowerBound)…\($0.upperBound)" }.joined(separator: ", ")
                    try writeLine("note: --dictionary: no dictionary was trained for events \(ranges) (too few events to train one on, or zstd's trainer refused them); they were compressed without one")
                }
            }
            if vacuum {
                let (a, b): (Int, Int)
                do {
                    (a, b) = try EventLog.vacuum(path: options.store)
                } catch {
                    // The compaction before it stays done: say what it did and that the file
                    // wasn't shrunk (before, only the vacuum's error was printed, and no sizes).
                    let after = (diskSize(dataPath), diskSize(segmentsPath))
                    try printSizes(before: sizesBefore, after: after)
                    throw CommandFailure(
                        "the vacuum failed: \(error). The compaction before it \(compacted); data.mdb was not vacuumed: it keeps its size, \(after.0) bytes (LMDB reuses the freed pages). The store is whole (strata verify checks it): run compact --vacuum again to shrink it")
                }
                try writeLine("vacuum: data.mdb \(a) → \(b) bytes")
            } else if movedAny {
                try writeLine("note: data.mdb keeps its size (LMDB reuses the freed pages); --vacuum shrinks it")
            }
            try printSizes(before: sizesBefore, after: (diskSize(dataPath), diskSize(segmentsPath)))
        }
    }

    /// `moved events A…B (N events): R bytes raw → C bytes in segments (ratio X)`.
    private func movedLine(first: UInt64, last: UInt64, count: UInt64, raw: Int, compressed: Int) -> String {
        let ratio = compressed == 0 ? 0 : Double(raw) / Double(compressed)
        return "moved events \(first)…\(last) (\(count) events): \(raw) bytes raw → \(compressed) bytes in segments (ratio \(String(format: "%.2f", ratio)))"
    }

    /// `1 segment (NAME)`, `2 segments (A, B)`, `12 segments (FIRST … LAST)`: under
    /// `segments/` in the store.
    static func segmentList(_ names: [String]) -> String {
        let paths = names.map { "segments/\($0)" }
        let noun = paths.count == 1 ? "1 segment" : "\(paths.count) segments"
        guard let firstPath = paths.first, let lastPath = paths.last else { return noun }
        let listed = paths.count <= 3 ? paths.joined(separator: ", ") : "\(firstPath) … \(lastPath)"
        return "\(noun) (\(listed))"
    }

    private func printSizes(before: (Int, Int), after: (Int, Int)) throws {
        try writeLine("before: data.mdb \(byteCount(before.0)), segments \(byteCount(before.1)), total \(byteCount(before.0 + before.1))")
        try writeLine("after:  data.mdb \(byteCount(after.0)), segments \(byteCount(after.1)), total \(byteCount(after.0 + after.1))")
    }
}

/// Compaction progress on standard error: a redrawn bar on a terminal, plain lines otherwise.
final class Progress {
    let total: UInt64
    let isTerminal = isatty(STDERR_FILENO) == 1
    private var lastPercent = -1

    init(total: UInt64) { self.total = total }

    func update(done: UInt64) {
        let percent = total == 0 ? 100 : Int(done * 100 / total)
        guard percent != lastPercent else { return }
        lastPercent = percent
        if isTerminal {
            let width = 30
            let filled = percent * width / 100
            FileHandleOutput.standardError("\r[\(String(repeating: "#", count: filled))\(String(repeating: ".", count: width - filled))] \(percent)% \(done)/\(total) events")
        } else {
            printError("compacted \(done)/\(total) events (\(percent)%)")
        }
    }

    func finish() {
        if isTerminal && lastPercent >= 0 { FileHandleOutput.standardError("\n") }
    }
}
