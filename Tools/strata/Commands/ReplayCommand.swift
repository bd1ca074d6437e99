import ArgumentParser
import Foundation
import Strata
import StrataStorage

/// `strata replay`: the state as of a point in history, one object's blame, a diff between
/// two points, a step-by-step walk, or a new store.
struct ReplayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Rebuild the state as of a sequence: a summary, one object's blame, a diff, a step-by-step walk, or a new store.",
        discussion: """
            Modes (pick at most one besides the default summary):
              (default)      objects per entity as of --to (default: the head)
              --object URI   the object's full history through --to: after each transaction
                             that touched it, the value of every property (* marks changes)
              --diff A..B    what changed between just after A and just after B, per object
                             and property
              --step         walk forward from --from (default 1; after a purge through P,
                             P+1) through --to, one transaction at a time: print it and its
                             effect, then wait for Enter (q then Enter, or end of input,
                             quits); works from a pipe
              --into DIR     write the state as of --to as a new, independent store at DIR
                             (a fresh UUID; events 1…--to with their own sequence numbers
                             and object IDs)
            The store is opened read-only.

            Examples:
              strata replay League.strata --to 120
              strata replay League.strata --to 120 --object x-strata://6F1C…/Player/p12
              strata replay League.strata --diff 100..120
              strata replay League.strata --step --from 100 --to 110
              printf '\\n\\nq\\n' | strata replay League.strata --step
              strata replay League.strata --to 120 --into /tmp/league-at-120.strata
            """
    )

    @OptionGroup var options: StoreOptions

    @Option(parsing: .unconditional, help: ArgumentHelp("Replay through this sequence (default: the head).", valueName: "seq"))
    var to: UInt64?

    @Option(parsing: .unconditional, help: ArgumentHelp("With --step: the first transaction to show (default 1, or P+1 after a purge through P).", valueName: "seq"))
    var from: UInt64?

    @Option(help: ArgumentHelp("Show one object's history with every property's value after each change.", valueName: "uri"))
    var object: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Show what changed between two points.", valueName: "A..B"))
    var diff: SequenceRange?

    @Flag(help: "Walk forward one transaction at a time (Enter: next, q: quit).")
    var step = false

    @Option(help: ArgumentHelp("Write the replayed state as a new store in this directory.", valueName: "dir"))
    var into: String?

    @Option(help: "For the summary: text or json.")
    var format: TextOrJSON = .text

    func validate() throws {
        let modes = [object != nil, diff != nil, step, into != nil].filter { $0 }.count
        if modes > 1 { throw ValidationError("--object, --diff, --step and --into are separate modes; pick one") }
        try refuseEmpty(object, "--object", "give an object's URI (x-strata://STORE-UUID/Entity/pN)")
        try refuseEmpty(into, "--into", "give the path of a directory")
        if let object, ObjectURI.parse(object) == nil {
            throw ValidationError("--object \(object) is not an object URI (x-strata://STORE-UUID/Entity/pN)\(ObjectURI.whyNot(object))")
        }
        if let diff, diff.lower > diff.upper {
            throw ValidationError("--diff \(diff.lower)..\(diff.upper) is reversed: give the earlier point first (--diff \(diff.upper)..\(diff.lower))")
        }
        if diff != nil && to != nil { throw ValidationError("--diff A..B gives both points; leave out --to") }
        if from != nil && !step { throw ValidationError("--from applies only to --step") }
        if let from, let to, from > to { throw ValidationError("--from \(from) is after --to \(to)") }
        if format == .json && (object != nil || diff != nil || step || into != nil) {
            throw ValidationError("--format json applies only to the summary")
        }
        if let into, FileManager.default.fileExists(atPath: into) {
            let contents = (try? FileManager.default.contentsOfDirectory(atPath: into)) ?? ["?"]
            if !contents.isEmpty { throw ValidationError("--into \(into) already exists and is not an empty directory") }
        }
    }

    func run() throws {
        try runCommand {
            let log = try options.openReadOnly()
            let (head, purged) = try log.read { reader in (try reader.head, try reader.purgedThrough) }
            let target = to ?? head
            try log.checkSequence(target, head: head)
            // Every mode refuses a point inside purged history the same way, before printing.
            if target < purged { throw LogError.historyPurged(requested: target, purgedThrough: purged) }
            if let diff {
                try log.checkSequence(diff.upper, head: head)
                if diff.lower < purged { throw LogError.historyPurged(requested: diff.lower, purgedThrough: purged) }
            }
            // The states a summary and a diff compare are ones the store was in: a migration's
            // take-out (spec 0004 §4.5), written in one transaction with its put-back, is not
            // (before, a diff to it showed the migrated values going to nil).
            try log.read { reader in
                for point in diff.map({ [$0.lower, $0.upper] }) ?? (object == nil && !step ? [target] : []) {
                    try log.refuseMidMigration(reader, point, head: head)
                }
            }
            if step, let from {
                try log.checkSequence(from, head: head)
                // Stepping shows transaction `from` itself: it must be one the log still holds.
                // 0 is the start (as `log --from 0`), unless history was purged.
                if purged > 0 && from <= purged { throw LogError.historyPurged(requested: from, purgedThrough: purged) }
            }
            let out = OutputSink()
            defer { out.close() }
            if let into {
                let report = try log.replay(through: target, into: into)
                out.line("wrote \(report.path): store \(report.storeUUID.uuidString), head \(report.head), \(report.objectCount) objects")
            } else if let object {
                let id = try log.objectID(fromURI: object)
                try blame(id, through: target, log, out)
            } else if let diff {
                try self.diff(diff, log, out)
            } else if step {
                try walk(from: max(from ?? purged + 1, 1), through: target, log, out)
            } else {
                try summary(through: target, log, out)
            }
        }
    }

    // MARK: - Summary

    private func summary(through sequence: UInt64, _ log: EventLog, _ out: OutputSink) throws {
        let counts: [(String, Int)] = try log.read { reader in
            var counts: [(String, Int)] = []
            // In the terms of the model version the data was in then (before a migration: an
            // earlier version's entities).
            let version = try reader.modelVersion(asOf: sequence)
            for entity in version == log.modelVersion ? log.concreteEntityNames : try log.concreteEntityNames(modelVersion: version) {
                var count = 0
                try Snapshot.forEachObject(of: entity, asOf: sequence, reader) { _, _ in count += 1 }
                counts.append((entity, count))
            }
            return counts
        }
        let timestamp = try log.read { reader in sequence <= (try reader.purgedThrough) ? nil : try reader.event(sequence).timestamp }
        switch format {
        case .json:
            var fields = [
                "\"store\":\(ValueRendering.jsonString(log.storeUUID.uuidString))",
                "\"sequence\":\(sequence)",
            ]
            if let timestamp { fields.append("\"timestamp\":\(ValueRendering.jsonString(Timestamps.format(timestamp)))") }
            let entities = counts.map { "\(ValueRendering.jsonString($0.0)):\($0.1)" }.joined(separator: ",")
            fields.append("\"objects\":{\(entities)}")
            out.line("{" + fields.joined(separator: ",") + "}")
        case .text:
            out.line("state as of sequence \(sequence)\(timestamp.map { " (\(Timestamps.format($0)))" } ?? "")")
            let width = counts.map(\.0.count).max() ?? 0
            for (entity, count) in counts {
                out.line("  \(entity.padding(toLength: width, withPad: " ", startingAt: 0))  \(count)")
            }
            out.line("  \("total".padding(toLength: width, withPad: " ", startingAt: 0))  \(counts.reduce(0) { $0 + $1.1 })")
        }
    }

    // MARK: - Blame

    private func blame(_ id: StoredObjectID, through sequence: UInt64, _ log: EventLog, _ out: OutputSink) throws {
        // Each step shows the properties of the model version its transaction was written
        // with: before a migration an earlier version's names (a renamed property's values
        // under its old name, a removed one's still there; before, the newest version's,
        // which showed them nil or not at all).
        var byVersion: [Int: (names: [String], width: Int)] = [:]
        func layout(_ version: Int) throws -> (names: [String], width: Int) {
            if let known = byVersion[version] { return known }
            let names = try log.storedProperties(ofEntity: id.entity, modelVersion: version).filter(\.isRecorded).map(\.name)
            let found = (names, names.map(\.count).max() ?? 0)
            byVersion[version] = found
            return found
        }
        try log.read { reader in
            let touching = try reader.history(of: id).filter { $0 <= sequence }
            out.line("\(log.uri(id)) through sequence \(sequence): \(touching.count) transaction\(touching.count == 1 ? "" : "s")")
            // After a purge, the object's history starts from the base snapshot.
            var image = StateImage()
            let purged = try reader.purgedThrough
            if purged > 0 && sequence >= purged, let base = try reader.object(id, asOf: purged) {
                image.objects[id] = base
                out.line("(history through \(purged) was purged; values as of \(purged) are the starting point)")
                out.line()
                out.line("#\(purged)  base snapshot")
                // The version the base was written with (an entity renamed since has no
                // properties under its old name in the newest).
                let (properties, width) = try layout(try reader.modelVersion(asOf: purged))
                for name in properties {
                    out.line("    \(name.padding(toLength: width, withPad: " ", startingAt: 0))  \(ValueRendering.text(base[name] ?? .null, log))")
                }
            }
            // One pass over the events that touched it: each segment frame holding some of
            // them is decompressed once, not once per event.
            try reader.forEachEvent(among: touching) { event in
                var changed: Set<String> = []
                var operation = "update"
                for change in event.changes where change.objectID == id {
                    image.apply(change)
                    switch change {
                    case .insert(_, let values):
                        operation = "insert"
                        changed.formUnion(values.keys)
                    case .update(_, let changes): changed.formUnion(changes.map(\.property))
                    case .delete:
                        operation = "delete"
                    }
                }
                out.line()
                out.line("\(EventText.header(event))  \(operation)")
                guard let record = image.objects[id] else {
                    out.line("  (deleted)")
                    return .next
                }
                // As `object(_:asOf:)` gives it: before a paired side's fill (an old store,
                // spec 0004 §4.1), the side's list derived from its inverses' lists then
                // (before, the record as stored, the side without its list).
                let values = try reader.withDerivedLists(record, of: id, asOf: event.sequence)
                let (properties, width) = try layout(event.modelVersion)
                for name in properties {
                    let mark = changed.contains(name) ? "*" : " "
                    out.line("  \(mark) \(name.padding(toLength: width, withPad: " ", startingAt: 0))  \(ValueRendering.text(values[name] ?? .null, log))")
                }
                return .next
            }
        }
    }

    // MARK: - Diff

    private func diff(_ range: SequenceRange, _ log: EventLog, _ out: OutputSink) throws {
        try log.read { reader in
            // Only objects some transaction in A+1…B touched can differ — and, in a store
            // written before both sides of a both-ordered relationship were recorded, the
            // objects whose derived lists those transactions changed (spec 0004 §4.1).
            let touched = try reader.objectsChanged(after: range.lower, through: range.upper)
            out.line("changes from sequence \(range.lower) to \(range.upper)")
            var differences = 0
            // In batches: a transaction that touched many of them is read once per batch,
            // not once per object.
            let sorted = touched.sorted()
            var batchStart = 0
            var beforeImage: [StoredObjectID: [String: LogValue]] = [:]
            var afterImage: [StoredObjectID: [String: LogValue]] = [:]
            var keptBefore: [UInt64: TransactionEvent] = [:]
            var keptAfter: [UInt64: TransactionEvent] = [:]
            for (position, id) in sorted.enumerated() {
                if position == batchStart {
                    let batch = sorted[position..<min(position + Int(Snapshot.batchSize), sorted.count)]
                    beforeImage = try reader.objects(batch, asOf: range.lower, keeping: &keptBefore)
                    afterImage = try reader.objects(batch, asOf: range.upper, keeping: &keptAfter)
                    batchStart = batch.endIndex
                }
                let before = beforeImage[id]
                let after = afterImage[id]
                switch (before, after) {
                case (nil, nil): continue
                case (nil, let values?):
                    out.line("+ \(log.uri(id))")
                    for name in values.keys.sorted() { out.line("    \(name): \(ValueRendering.text(values[name] ?? .null, log))") }
                case (let values?, nil):
                    out.line("- \(log.uri(id))")
                    for name in values.keys.sorted() { out.line("    \(name): \(ValueRendering.text(values[name] ?? .null, log))") }
                case (let a?, let b?):
                    let names = Set(a.keys).union(b.keys).sorted().filter { a[$0] != b[$0] }
                    if names.isEmpty { continue }
                    out.line("~ \(log.uri(id))")
                    for name in names {
                        out.line("    \(name): \(ValueRendering.text(a[name] ?? .null, log)) → \(ValueRendering.text(b[name] ?? .null, log))")
                    }
                }
                differences += 1
            }
            out.line("\(differences) object\(differences == 1 ? " differs" : "s differ")")
        }
    }

    // MARK: - Step

    private func walk(from first: UInt64, through last: UInt64, _ log: EventLog, _ out: OutputSink) throws {
        // `first` is at most the head and past any purge (run checked); `last` may be before it.
        guard first <= last, last > 0 else {
            out.line(to == nil ? "nothing to step through (the store has no transactions)" : "nothing to step through (--to \(last) is before \(first))")
            return
        }
        var sequence = max(first, 1)
        var counts: [String: Int] = [:]
        while sequence <= last {
            let event = try log.read { reader in try reader.event(sequence) }
            for line in EventText.lines(event, groups: event.groups, log) { out.line(line) }
            var inserted = 0, updated = 0, deleted = 0
            for change in event.changes {
                switch change {
                case .insert(let id, _):
                    inserted += 1
                    counts[id.entity, default: 0] += 1
                case .update: updated += 1
                case .delete(let id, _):
                    deleted += 1
                    counts[id.entity, default: 0] -= 1
                }
            }
            out.line("  effect: \(inserted) inserted, \(updated) updated, \(deleted) deleted")
            if sequence == last {
                out.line("-- end (sequence \(last)) --")
                break
            }
            out.line("-- \(sequence)/\(last): Enter for the next transaction, q to quit --")
            out.flush()
            guard let answer = readLine(), answer.trimmingCharacters(in: .whitespaces).lowercased() != "q" else {
                out.line("stopped after sequence \(sequence)")
                break
            }
            sequence += 1
        }
    }
}

/// `A..B`: two sequence numbers (`validate()` refuses A > B).
struct SequenceRange: ExpressibleByArgument {
    let lower: UInt64
    let upper: UInt64

    init?(argument: String) {
        let parts = argument.components(separatedBy: "..")
        // A reversed range parses, so validate() can say what is wrong with it (before, it
        // was "the value is invalid", as for text that isn't a range at all).
        guard parts.count == 2, let a = UInt64(parts[0]), let b = UInt64(parts[1]) else { return nil }
        lower = a
        upper = b
    }
}
