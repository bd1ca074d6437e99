// A second process for the event-log crash tests: writes to a store until the test kills it
// with SIGKILL, announcing on standard output (unbuffered) every step that has returned.
//
//   StrataLogProbe commit  STORE [MAX]   commit transactions; "ack SEQ" after each commit returns
//   StrataLogProbe compact STORE [BATCH] loop: commit BATCH transactions (acked as above), then
//                                        compact all but the newest two events;
//                                        "compacted THROUGH" after each compaction returns
//   StrataLogProbe compact-dict STORE [BATCH] as compact, BATCH (at least 66) transactions a
//                                        round, compacted with a trained dictionary; "compacting"
//                                        before each compaction starts
//   StrataLogProbe vacuum  STORE [BATCH] loop: open, commit BATCH transactions (acked as above),
//                                        close, vacuum; "vacuumed" after each vacuum returns
//   StrataLogProbe vacuum-hang STORE     vacuum once, stopping right after the rename of the
//                                        copy over data.mdb ("renamed") until killed
//   StrataLogProbe purge   STORE [BATCH] loop: commit BATCH inserts of one member each (its
//                                        email `purge-SEQ@probe.test`, "ack SEQ"), compact all
//                                        but the newest two, purge through half of that;
//                                        "purged THROUGH" after each purge returns; a checkpoint
//                                        every 3 transactions, at most 3 kept
//
// Transaction SEQ is a pure function of SEQ (`ProbeWorkload`), so the test can rebuild the
// exact state the store must hold for any head from the sequence numbers alone:
//
//   - inserts Club/pSEQ   {name: "club SEQ", sponsors: the sponsors below when SEQ % 5 == 0}
//   - inserts Member/pSEQ {name: "member SEQ", email: "member-SEQ@probe.test", age: SEQ % 97,
//                          club: Club/pSEQ}
//   - when SEQ % 5 == 0, inserts 40 Sponsors with long names (the event spans several chunks)
//   - when SEQ > 1, sets Member/p(SEQ-1).rating = SEQ
//
// The test target keeps its own copy of this contract (CrashSafetyTests.swift) and opens the
// store with the model stored in it, so this file is the only place the model is built.
import Foundation
import StrataLog
import StrataModel
import StrataStorage

func say(_ text: String) {
    // Unbuffered: the test reads each line as soon as the step it reports has returned.
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("StrataLogProbe: \(text)\n".utf8))
    exit(1)
}

func probeModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Club") {
            Attribute("name", .string)
            Relationship("members", to: "Member", inverse: "club", toMany: true)
            Relationship("sponsors", to: "Sponsor", inverse: "clubs", toMany: true)
        }
        Entity("Member") {
            Attribute("name", .string)
            Attribute("email", .string).indexed()
            Attribute("age", .int32).indexed()
            Attribute("rating", .double)
            Relationship("club", to: "Club", inverse: "members")
            Unique("email")
        }
        Entity("Sponsor") {
            Attribute("name", .string)
            Relationship("clubs", to: "Club", inverse: "sponsors", toMany: true)
        }
    }
}

/// The draft of transaction `sequence` (see the header).
func draft(forSequence sequence: UInt64) -> (TransactionDraft, member: DraftObjectID) {
    var draft = TransactionDraft(author: "probe", contextName: "crash")
    var sponsors: [DraftObjectID] = []
    if sequence % 5 == 0 {
        for k in 0..<40 {
            let padding = String(repeating: "s", count: 80)
            sponsors.append(draft.insert("Sponsor", values: ["name": .attribute(.string("sponsor \(sequence).\(k) \(padding)"))]))
        }
    }
    var clubValues: [String: DraftValue] = ["name": .attribute(.string("club \(sequence)"))]
    if !sponsors.isEmpty { clubValues["sponsors"] = .references(sponsors) }
    let club = draft.insert("Club", values: clubValues)
    let member = draft.insert("Member", values: [
        "name": .attribute(.string("member \(sequence)")),
        "email": .attribute(.string("member-\(sequence)@probe.test")),
        "age": .attribute(.int32(Int32(sequence % 97))),
        "club": .reference(club),
    ])
    if sequence > 1 {
        draft.update(
            .stored(StoredObjectID(entity: "Member", primaryKey: sequence - 1)),
            values: ["rating": .attribute(.double(Double(sequence)))])
    }
    return (draft, member)
}

/// Commits the next transaction and acknowledges it.
func commitNext(_ log: EventLog) throws {
    let sequence = try log.head + 1
    let (next, member) = draft(forSequence: sequence)
    let result = try log.commit(next)
    guard result.sequence == sequence, result.permanentID(for: member) == StoredObjectID(entity: "Member", primaryKey: sequence) else {
        fail("transaction \(sequence) committed as \(result.sequence) with member \(String(describing: result.permanentID(for: member)))")
    }
    say("ack \(sequence)")
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    fail("usage: StrataLogProbe commit|compact|vacuum|vacuum-hang|purge STORE [N]")
}
let mode = arguments[1]
let path = arguments[2]
let number = arguments.count >= 4 ? Int(arguments[3]) : nil

/// One round of the vacuum mode: open, commit `batch` transactions, close.
func commitAndClose(_ batch: Int) throws {
    let log = try EventLog(path: path, model: try probeModel())
    for _ in 0..<batch { try commitNext(log) }
}

do {
    if mode == "vacuum-hang" {
        // One vacuum that stops right after putting the copy in place, until killed.
        LMDBEnvironment.setVacuumAfterRenameHook {
            say("renamed")
            while true { sleep(60) }
        }
        _ = try EventLog.vacuum(path: path)
        fail("the vacuum returned")
    }
    if mode == "vacuum" {
        // The store must be closed everywhere to be vacuumed.
        let batch = max(number ?? 4, 1)
        say("ready")
        while true {
            try commitAndClose(batch)
            _ = try EventLog.vacuum(path: path)
            say("vacuumed")
        }
    }
    // The purge mode writes checkpoints often, so kills land in their writing and thinning too.
    var configuration = EventLog.Configuration()
    if mode == "purge" {
        configuration.checkpointInterval = 3
        configuration.maximumCheckpoints = 3
    }
    let log = try EventLog(path: path, model: try probeModel(), configuration: configuration)
    say("ready \(try log.head)")
    switch mode {
    case "commit":
        let limit = number ?? Int.max
        var done = 0
        while done < limit {
            try commitNext(log)
            done += 1
        }
        say("done")
    case "purge":
        let batch = max(number ?? 4, 1)
        while true {
            for _ in 0..<batch {
                let sequence = try log.head + 1
                var draft = TransactionDraft(author: "probe", contextName: "purge")
                _ = draft.insert("Member", values: [
                    "name": .attribute(.string("purge \(sequence)")),
                    "email": .attribute(.string("purge-\(sequence)@probe.test")),
                    "age": .attribute(.int32(Int32(sequence % 97))),
                ])
                let result = try log.commit(draft)
                guard result.sequence == sequence else { fail("transaction \(sequence) committed as \(result.sequence)") }
                say("ack \(sequence)")
            }
            var request = CompactionRequest(before: try log.head - 1)
            request.eventsPerFrame = 3
            try log.compact(request)
            let compacted = try log.read { try $0.compactedThrough }
            let purged = try log.read { try $0.purgedThrough }
            let point = purged + max((compacted - purged) / 2, 1)
            if point < compacted {
                try log.purge(through: point, author: "probe")
                say("purged \(point)")
            }
        }
    case "compact":
        let batch = max(number ?? 4, 1)
        while true {
            for _ in 0..<batch { try commitNext(log) }
            var request = CompactionRequest(before: try log.head - 1)
            request.eventsPerFrame = 3
            let report = try log.compact(request)
            say("compacted \(try log.read { try $0.compactedThrough }) \(report.eventCount)")
        }
    case "compact-dict":
        // Each compaction moves enough events for zstd to train a dictionary (64 or more).
        let batch = max(number ?? 72, 66)
        while true {
            for _ in 0..<batch { try commitNext(log) }
            var request = CompactionRequest(before: try log.head - 1)
            request.eventsPerFrame = 8
            request.usesDictionary = true
            say("compacting")
            let report = try log.compact(request)
            say("compacted \(try log.read { try $0.compactedThrough }) \(report.dictionaryFile == nil ? "plain" : "dictionary")")
        }
    default:
        fail("unknown mode \(mode)")
    }
} catch {
    fail("\(error)")
}
