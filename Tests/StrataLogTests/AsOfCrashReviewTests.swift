import Foundation
@testable import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Synchronization
import Testing

// Review of as-of reads, checkpoints and crash safety (spec 0004 §6.3, §7, §8).
//
// Knobs (environment variables):
//   STRATA_ASOF_REVIEW_TRANSACTIONS  transactions of the as-of workload (default 60)
//   STRATA_ASOF_REVIEW_SEED          its seed
//   STRATA_CRASH_ITERATIONS          kills per crash test (default 8, shared with CrashSafetyTests)

@Suite("As-of reads, checkpoints and crash safety: review")
struct AsOfCrashReviewTests {
    static let transactions = max(environmentNumber("STRATA_ASOF_REVIEW_TRANSACTIONS", default: 60), 24)
    static let seed = UInt64(environmentNumber("STRATA_ASOF_REVIEW_SEED", default: 0xA50F_2025))

    /// A random workload over the library model: inserts (members, captains, sponsors, clubs),
    /// updates, ordered and unordered to-many changes, deletes and restores under the same ID.
    /// Returns every committed event, by sequence.
    struct Workload {
        var rng: SeededGenerator
        var members: [StoredObjectID] = []
        var clubs: [StoredObjectID] = []
        var sponsors: [StoredObjectID] = []
        var deleted: [StoredObjectID: [String: DraftValue]] = [:]
        var events: [UInt64: TransactionEvent] = [:]

        init(seed: UInt64) { rng = SeededGenerator(seed: seed) }

        /// The members in no lineup, or in `club`'s (which its update may keep).
        static func free(_ members: [StoredObjectID], _ log: EventLog, keeping club: StoredObjectID?) throws -> [StoredObjectID] {
            try log.read { reader in
                try members.filter { member in
                    let holders = try reader.related(member, "lineupClub")
                    return holders.isEmpty || holders == club.map { [$0] }
                }
            }
        }

        mutating func step(_ log: EventLog, _ n: Int) throws {
            var draft = TransactionDraft(author: "review")
            switch rng.int(0..<9) {
            case 0, 1:
                let entity = rng.int(0..<3) == 0 ? "Captain" : "Member"
                var values: [String: DraftValue] = ["name": s("m\(n)"), "email": s("m\(n)@x"), "age": i(Int32(n % 50))]
                if entity == "Captain" { values["since"] = .attribute(.date(Date(timeIntervalSinceReferenceDate: Double(n)))) }
                if let sponsor = sponsors.randomElement(using: &rng) { values["favourites"] = .references([.stored(sponsor)]) }
                _ = draft.insert(entity, values: values)
            case 2:
                _ = draft.insert("Sponsor", values: ["name": s("s\(n)")])
            case 3:
                // A club with an ordered lineup (maybe empty) and unordered sponsors. A lineup
                // takes members no other lineup holds: Member.lineupClub is a to-one, and
                // verify reports a member two lineups hold.
                let lineup = try Self.free(members, log, keeping: nil).shuffled(using: &rng).prefix(rng.int(0...3)).map { DraftObjectID.stored($0) }
                let chosen = sponsors.shuffled(using: &rng).prefix(rng.int(0...2)).map { DraftObjectID.stored($0) }
                var values: [String: DraftValue] = ["name": s("c\(n)"), "lineup": .references(lineup)]
                if !chosen.isEmpty || rng.int(0..<2) == 0 { values["sponsors"] = .references(chosen) }
                _ = draft.insert("Club", values: values)
            case 4:
                guard let member = members.randomElement(using: &rng) else { return }
                draft.update(.stored(member), values: ["age": i(Int32(rng.int(0..<90))), "rating": rng.int(0..<3) == 0 ? .null : .attribute(.double(Double(n)))])
            case 5:
                guard let club = clubs.randomElement(using: &rng), let sponsor = sponsors.randomElement(using: &rng) else { return }
                if rng.int(0..<2) == 0 {
                    draft.changeMembers(of: .stored(club), "sponsors", adding: [.stored(sponsor)])
                } else {
                    draft.changeMembers(of: .stored(club), "sponsors", removing: [.stored(sponsor)])
                }
            case 6:
                guard let club = clubs.randomElement(using: &rng) else { return }
                let lineup = try Self.free(members, log, keeping: club).shuffled(using: &rng).prefix(rng.int(0...3)).map { DraftObjectID.stored($0) }
                draft.update(.stored(club), values: ["lineup": .references(lineup), "name": s("c\(n)'")])
            case 7:
                // Delete a member nothing refers to (no lineup holds it), remembering its values.
                guard let member = members.randomElement(using: &rng) else { return }
                let values = try log.read { reader -> [String: LogValue]? in
                    guard try reader.related(member, "lineupClub").isEmpty else { return nil }
                    return try reader.object(member)?.values
                }
                guard let values else { return }
                draft.delete(.stored(member))
                deleted[member] = values.mapValues(Self.draftValue)
            default:
                // Restore a deleted member under its own ID.
                guard let (member, values) = deleted.first else { return }
                draft.restore(member, values: values)
            }
            let result: CommitResult
            do {
                result = try log.commit(draft)
            } catch is LogError {
                return  // refused (a uniqueness clash, a reference gone): nothing written
            }
            events[result.sequence] = result.event
            for change in result.event.changes {
                switch change {
                case .insert(let id, _):
                    deleted[id] = nil
                    switch id.entity {
                    case "Club": clubs.append(id)
                    case "Sponsor": sponsors.append(id)
                    default: members.append(id)
                    }
                case .delete(let id, _):
                    members.removeAll { $0 == id }
                default: break
                }
            }
        }

        static func draftValue(_ value: LogValue) -> DraftValue {
            switch value {
            case .null: .null
            case .attribute(let attribute): .attribute(attribute)
            case .reference(let id): .reference(.stored(id))
            case .references(let ids): .references(ids.map { .stored($0) })
            }
        }
    }

    /// Every sequence's state, replaying `events` (keyed by sequence, 1…head; gaps are events
    /// with no changes) forward from nothing.
    static func replayed(_ events: [UInt64: TransactionEvent], head: UInt64) -> [StateImage] {
        var states = [StateImage()]
        var image = StateImage()
        if head > 0 {
            for sequence in 1...head {
                if let event = events[sequence] { image.apply(event) }
                states.append(image)
            }
        }
        return states
    }

    /// Checks `state(asOf:)` and `objects(_:asOf:)` against `expected` for every N in `range`;
    /// returns the plans used.
    static func check(_ log: EventLog, _ expected: [StateImage], _ range: ClosedRange<UInt64>, _ what: String) throws -> Set<String> {
        var plans: Set<String> = []
        let ids = Set(expected.flatMap { $0.objects.keys })
        try log.read { reader throws in
            for n in range {
                let plan = try reader.plan(asOf: n)
                switch plan {
                case .backwardFromHead: plans.insert("backward")
                case .forwardFromCheckpoint: plans.insert("checkpoint")
                case .forwardFromStart: plans.insert("start")
                }
                let state = try reader.state(asOf: n)
                #expect(state == expected[Int(n)], "\(what): state(asOf: \(n)) by \(plan): \(stateDifferences(state.objects, expected[Int(n)].objects))")
                let objects = try reader.objects(ids, asOf: n)
                #expect(objects == expected[Int(n)].objects, "\(what): objects(asOf: \(n)): \(stateDifferences(objects, expected[Int(n)].objects))")
            }
        }
        return plans
    }

    @Test("as-of equals the replay for every N, by every plan: around checkpoints, segment boundaries, the compaction horizon and a purge point, with deletes, restores, ordered and unordered to-many (STRATA_ASOF_REVIEW_TRANSACTIONS)")
    func asOfAgainstReplay() throws {
        let dir = try TemporaryDirectory("strata-asof-review")
        let log = try openLog(dir, model: try libraryModel()) {
            $0.checkpointInterval = 9
            $0.maximumCheckpoints = 3
        }
        var workload = Workload(seed: Self.seed)
        let total = Self.transactions
        var n = 0
        func run(until count: Int) throws {
            while n < count {
                try workload.step(log, n)
                n += 1
            }
        }
        try run(until: total / 3)
        var request = CompactionRequest(before: try log.head / 2)
        request.eventsPerFrame = 4
        try log.compact(request)
        try log.checkpoint()
        try run(until: total / 2)
        var head = try log.head
        var expected = Self.replayed(workload.events, head: head)
        var plans = try Self.check(log, expected, 0...head, "before the purge")
        #expect(plans == ["backward", "checkpoint", "start"], "every plan ran: \(plans)")

        // Purge inside the segment (it straddles), then a checkpoint at once and more commits.
        let compacted = try log.read { try $0.compactedThrough }
        let point = max(compacted / 2, 1)
        try log.purge(through: point, author: "review")
        try log.checkpoint()
        try run(until: total * 3 / 4)
        request.before = try log.head - 2
        try log.compact(request)
        try run(until: total)
        head = try log.head
        expected = Self.replayed(workload.events, head: head)
        plans = try Self.check(log, expected, point...head, "after the purge")
        #expect(plans.isSuperset(of: ["backward", "checkpoint"]), "\(plans)")
        #expect(try log.verify().isClean)

        // The same store replayed into one without the checkpoints: the walk back instead.
        let copy = dir.file("replayed")
        _ = try log.replay(through: head, into: copy)
        let replayedLog = try EventLog(openingExistingAt: copy)
        plans = try Self.check(replayedLog, expected, point...head, "the replayed copy")
        #expect(plans.contains("backward"))

        // Out of range: a clear error, never a state.
        try log.read { reader throws in
            #expect(throws: LogError.sequenceOutOfRange(requested: head + 1, head: head)) { try reader.state(asOf: head + 1) }
            #expect(throws: LogError.sequenceOutOfRange(requested: head + 1, head: head)) { try reader.objects([], asOf: head + 1) }
            #expect(throws: LogError.historyPurged(requested: point - 1, purgedThrough: point)) { try reader.state(asOf: point - 1) }
        }
    }

    @Test("a checkpoint that lost a membership row is an error for as-of reads naming it, not a club without that sponsor")
    func checkpointLostMembershipRow() throws {
        let dir = try TemporaryDirectory("strata-asof-review")
        let log = try openLog(dir, model: try libraryModel()) { $0.checkpointInterval = 0 }
        var draft = TransactionDraft()
        let sponsors = (0..<3).map { draft.insert("Sponsor", values: ["name": s("s\($0)")]) }
        let club = draft.insert("Club", values: ["name": s("Otters"), "sponsors": .references(sponsors)])
        let clubID = try #require(try log.commit(draft).permanentID(for: club))
        try log.checkpoint()
        for k in 0..<5 {
            var draft = TransactionDraft()
            draft.update(.stored(clubID), values: ["name": s("Otters \(k)")])
            try log.commit(draft)
        }
        let head = try log.head
        let intact = try log.read { try $0.state(asOf: 2) }
        #expect(try log.read { try $0.plan(asOf: 2) } == .forwardFromCheckpoint(checkpoint: 1, events: 1))
        let memberRows: [[UInt8]] = try log.environment.read { txn in
            var keys: [[UInt8]] = []
            try txn.forEach(in: log.tables.checkpoints, range: .prefix(bigEndianBytes(UInt64(1)) + [CheckpointTag.member])) { key, _ in
                keys.append(key.withUnsafeBytes { Array($0) })
                return .next
            }
            return keys
        }
        #expect(memberRows.count == 3)
        try log.environment.write { txn in _ = try txn.delete(key: memberRows[1], in: log.tables.checkpoints) }
        do {
            let state = try log.read { try $0.state(asOf: 2) }
            Issue.record("as of 2 read from the damaged checkpoint without an error: \(stateDifferences(state.objects, intact.objects))")
        } catch {
            #expect("\(error)".contains("checkpoint 1"), "\(error)")
        }
        #expect(try log.read { try $0.state(asOf: head) } == log.read { try $0.currentState() })
        #expect(try log.verify().problems.contains { $0.location.hasPrefix("checkpoint 1") })

        // The tally row lost too: the header's flag says there was one.
        let tally = bigEndianBytes(UInt64(1)) + [CheckpointTag.tally]
        try log.environment.write { txn in _ = try txn.delete(key: tally, in: log.tables.checkpoints) }
        do {
            let state = try log.read { try $0.state(asOf: 2) }
            Issue.record("as of 2 read from a checkpoint without its tally: \(stateDifferences(state.objects, intact.objects))")
        } catch {
            #expect("\(error)".contains("checkpoint 1") && "\(error)".contains("tally"), "\(error)")
        }
        #expect(try log.verify().problems.contains { $0.location == "checkpoint 1" && $0.message.contains("tally") })
    }
}

// MARK: - Crash safety beyond commits and compaction

extension AsOfCrashReviewTests {
    /// Entries of the store directory a vacuum leaves (`.vacuum-…`).
    static func vacuumLeftovers(_ store: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: store)) ?? []).filter { $0.hasPrefix(".vacuum-") }.sorted()
    }

    @Test("SIGKILL during vacuum (commits, close, mdb_env_copy2, rename): every acknowledged commit survives, verify clean, and the next writable open removes the scratch copy")
    func killDuringVacuum() throws {
        let dir = try TemporaryDirectory("strata-crash-vacuum")
        let store = dir.file("store")
        var rng = SeededGenerator(seed: CrashSafetyTests.seed ^ 0xFAC)
        var lastAck: UInt64 = 0
        var leftoversSeen = 0
        for round in 1...CrashSafetyTests.iterations {
            let context = "seed \(CrashSafetyTests.seed), vacuum round \(round)"
            let probe = try LogProbeProcess(["vacuum", store, String(rng.int(1...6))])
            let wanted = rng.int(1...3)
            var vacuums = 0
            while vacuums < wanted, let line = probe.nextLine() {
                if line.hasPrefix("vacuumed") { vacuums += 1 }
            }
            usleep(UInt32(rng.int(0..<6000)))
            probe.kill()
            guard probe.wasKilled else {
                Issue.record("\(context): the probe exited by itself (\(probe.process.terminationStatus)): \(probe.standardError)")
                return
            }
            lastAck = max(lastAck, probe.numbers(after: "ack").max() ?? 0)
            if !Self.vacuumLeftovers(store).isEmpty { leftoversSeen += 1 }
            let head = try CrashSafetyTests.checkAfterCrash(store, lastAck: lastAck, lastCompacted: 0, context: context)
            #expect(Self.vacuumLeftovers(store).isEmpty, "\(context): a vacuum's scratch copy outlived a writable open: \(Self.vacuumLeftovers(store))")
            lastAck = head
        }
        print("crash during vacuum: \(CrashSafetyTests.iterations) kills, head \(lastAck), scratch copies left in \(leftoversSeen) rounds")
    }

    @Test("a vacuum's scratch copy left by a kill (a partial data.mdb in .vacuum-UUID/) is removed by the next writable open and by the next vacuum; a read-only open leaves it")
    func vacuumScratchRemoved() throws {
        let dir = try TemporaryDirectory("strata-vacuum-leftover")
        let store = dir.file("store")
        do {
            let log = try openLog(dir, model: try libraryModel())
            var draft = TransactionDraft()
            _ = draft.insert("Sponsor", values: ["name": s("Acme")])
            try log.commit(draft)
        }
        func plant() throws -> String {
            let scratch = (store as NSString).appendingPathComponent(".vacuum-\(UUID().uuidString)")
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: false)
            #expect(FileManager.default.createFile(atPath: (scratch as NSString).appendingPathComponent("data.mdb"), contents: Data(repeating: 7, count: 1 << 16)))
            return scratch
        }
        let first = try plant()
        do {
            let log = try EventLog(openingExistingAt: store, readOnly: true)
            #expect(try log.head == 1)
        }
        #expect(FileManager.default.fileExists(atPath: first), "a read-only open writes nothing")
        do {
            let log = try EventLog(openingExistingAt: store, readOnly: false)
            #expect(try log.head == 1)
        }
        #expect(Self.vacuumLeftovers(store).isEmpty, "\(Self.vacuumLeftovers(store))")
        _ = try plant()
        _ = try EventLog.vacuum(path: store)
        #expect(Self.vacuumLeftovers(store).isEmpty, "\(Self.vacuumLeftovers(store))")
        #expect(try EventLog(openingExistingAt: store).verify().isClean)
    }

    @Test("SIGKILL during commits, compaction and purge: every acknowledged commit survives (or was purged), the purge point never goes back, no orphan segment file, state == replay from the base, verify clean")
    func killDuringPurge() throws {
        let dir = try TemporaryDirectory("strata-crash-purge")
        let store = dir.file("store")
        var rng = SeededGenerator(seed: CrashSafetyTests.seed ^ 0x9E6)
        var lastAck: UInt64 = 0
        var lastPurged: UInt64 = 0
        var purges = 0
        for round in 1...CrashSafetyTests.iterations {
            let context = "seed \(CrashSafetyTests.seed), purge round \(round)"
            let probe = try LogProbeProcess(["purge", store, String(rng.int(2...5))])
            let wanted = rng.int(1...3)
            var seen = 0
            while seen < wanted, let line = probe.nextLine() {
                if line.hasPrefix("purged ") { seen += 1 }
            }
            usleep(UInt32(rng.int(0..<8000)))
            probe.kill()
            guard probe.wasKilled else {
                Issue.record("\(context): the probe exited by itself (\(probe.process.terminationStatus)): \(probe.standardError)")
                return
            }
            let acks = probe.numbers(after: "ack")
            lastAck = max(lastAck, acks.max() ?? 0)
            lastPurged = max(lastPurged, probe.numbers(after: "purged").max() ?? 0)
            purges += probe.numbers(after: "purged").count

            let log = try EventLog(openingExistingAt: store, readOnly: false)
            let (head, purged, state, replayed, members) = try log.read { reader throws in
                let purged = try reader.purgedThrough
                var image = try reader.state(asOf: purged)
                try reader.forEachEvent(from: purged + 1) { event in
                    image.apply(event)
                    return .next
                }
                var members: Set<String> = []
                try reader.forEachObject(of: "Member") { object in
                    if case .attribute(.string(let email)) = object.values["email"] { members.insert(email) }
                    return .next
                }
                return (try reader.head, purged, try reader.currentState(), image, members)
            }
            #expect(head >= lastAck, "\(context): acknowledged commit \(lastAck) is lost (head \(head))")
            #expect(purged >= lastPurged, "\(context): acknowledged purge through \(lastPurged) is lost (now \(purged))")
            #expect(replayed == state, "\(context): the base and the events after it vs the state: \(stateDifferences(replayed.objects, state.objects))")
            for ack in acks where !members.contains("purge-\(ack)@probe.test") {
                Issue.record("\(context): the member acknowledged at \(ack) is missing")
                break
            }
            let segments = try log.segments()
            let named = Set(segments.map(\.fileName) + segments.compactMap(\.dictionaryFileName))
            let files = CrashSafetyTests.segmentFiles(store).filter { !$0.hasPrefix(".purged-") }
            #expect(files == named, "\(context): segments/ holds \(files.sorted()), the manifest names \(named.sorted())")
            let report = try log.verify()
            #expect(report.isClean, "\(context): verify after a crash: \(report.problems.prefix(10))")
            lastAck = head
            lastPurged = purged
        }
        print("crash during purge: \(CrashSafetyTests.iterations) kills, head \(lastAck), purged through \(lastPurged), \(purges) purges acknowledged")
    }
}

// MARK: - As-of through pinned readers and earlier models

extension AsOfCrashReviewTests {
    /// Every event of `log`, by sequence.
    static func eventsBySequence(_ log: EventLog) throws -> [UInt64: TransactionEvent] {
        try log.read { reader throws in
            var events: [UInt64: TransactionEvent] = [:]
            try reader.forEachEvent { event in
                events[event.sequence] = event
                return .next
            }
            return events
        }
    }

    @Test("as-of reads through a reader pinned to a query generation read the log as it is: the same states as an unpinned reader, not the generation's objects reverted again")
    func asOfThroughPinnedReader() throws {
        let dir = try TemporaryDirectory("strata-asof-review")
        let log = try openLog(dir, model: try libraryModel()) { $0.checkpointInterval = 0 }
        var workload = Workload(seed: Self.seed ^ 0x91)
        for n in 0..<12 { try workload.step(log, n) }
        let view = GenerationView(sequence: try log.head)
        _ = try log.read(pinnedTo: view) { try $0.head }
        for n in 12..<30 { try workload.step(log, n) }
        let head = try log.head
        let expected = Self.replayed(try Self.eventsBySequence(log), head: head)
        let ids = Set(expected.flatMap { $0.objects.keys })
        try log.read(pinnedTo: view) { reader throws in
            for n in 0...head {
                let state = try reader.state(asOf: n)
                let plan = try reader.plan(asOf: n)
                #expect(state == expected[Int(n)], "pinned: state(asOf: \(n)) by \(plan): \(stateDifferences(state.objects, expected[Int(n)].objects))")
                let objects = try reader.objects(ids, asOf: n)
                #expect(objects == expected[Int(n)].objects, "pinned: objects(asOf: \(n)): \(stateDifferences(objects, expected[Int(n)].objects))")
            }
        }
        for id in ids.sorted().prefix(8) {
            func versions(_ pinned: Bool) throws -> [(UInt64, [String: LogValue]?)] {
                try log.read(pinnedTo: pinned ? view : nil) { reader throws in
                    var result: [(UInt64, [String: LogValue]?)] = []
                    try reader.forEachVersion(of: id) { sequence, values in
                        result.append((sequence, values))
                        return .next
                    }
                    return result
                }
            }
            let (pinned, current) = (try versions(true), try versions(false))
            #expect(pinned.map(\.0) == current.map(\.0) && zip(pinned, current).allSatisfy { $0.1 == $1.1 }, "forEachVersion(of: \(id)) pinned vs not")
            for (sequence, values) in current { #expect(values == expected[Int(sequence)].objects[id], "\(id) after \(sequence)") }
        }
    }

    static func renameModel(renamed: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                if renamed {
                    Relationship("players", to: "Athlete", inverse: "team", toMany: true)
                } else {
                    Relationship("players", to: "Player", inverse: "team", toMany: true)
                }
            }
            if renamed {
                Entity("Athlete") {
                    Attribute("name", .string)
                    Attribute("score", .int32)
                    Relationship("team", to: "Team", inverse: "players")
                }
                .renamed(from: "Player")
            } else {
                Entity("Player") {
                    Attribute("name", .string)
                    Attribute("score", .int32)
                    Relationship("team", to: "Team", inverse: "players")
                }
            }
        }
    }

    @Test("as-of reads by a handle of an earlier model version, after a later one renamed an entity and wrote its objects: every N equals the replay, whichever way it is read")
    func asOfByEarlierModelAfterRename() throws {
        let dir = try TemporaryDirectory("strata-asof-review")
        var team: StoredObjectID?
        do {
            let log = try openLog(dir, model: try Self.renameModel(renamed: false)) { $0.checkpointInterval = 0 }
            var draft = TransactionDraft()
            let t = draft.insert("Team", values: ["name": s("Otters")])
            for k in 0..<3 { _ = draft.insert("Player", values: ["name": s("p\(k)"), "score": i(Int32(k)), "team": .reference(t)]) }
            team = try log.commit(draft).permanentID(for: t)
            try log.checkpoint()
        }
        let teamID = try #require(team)
        do {
            let log = try openLog(dir, model: try Self.renameModel(renamed: true)) { $0.checkpointInterval = 0 }
            for k in 0..<6 {
                var draft = TransactionDraft()
                draft.update(.stored(StoredObjectID(entity: "Athlete", primaryKey: UInt64(k % 3 + 1))), values: ["score": i(Int32(100 + k))])
                if k == 2 { _ = draft.insert("Athlete", values: ["name": s("new"), "team": .reference(.stored(teamID))]) }
                try log.commit(draft)
            }
        }
        let earlier = try openLog(dir, model: try Self.renameModel(renamed: false)) { $0.checkpointInterval = 0 }
        var draft = TransactionDraft()
        draft.update(.stored(teamID), values: ["name": s("Otters II")])
        try earlier.commit(draft)
        let head = try earlier.head
        let expected = Self.replayed(try Self.eventsBySequence(earlier), head: head)
        #expect(try earlier.read { try $0.currentState() } == expected[Int(head)], "the current state: every object stored, whatever the handle's model")
        _ = try Self.check(earlier, expected, 0...head, "earlier model")
        let later = try openLog(dir, model: try Self.renameModel(renamed: true)) { $0.checkpointInterval = 0 }
        _ = try Self.check(later, expected, 0...head, "later model")
    }

    @Test("entity scans pinned to generations (sub-entities included, deletes and restores under the same ID, ordered and unordered to-many, counts) give the replay's objects as of each generation")
    func pinnedEntityScans() throws {
        let dir = try TemporaryDirectory("strata-asof-review")
        let log = try openLog(dir, model: try libraryModel()) { $0.checkpointInterval = 7 }
        var workload = Workload(seed: Self.seed ^ 0x5CA)
        var views: [GenerationView] = []
        for n in 0..<Self.transactions {
            try workload.step(log, n)
            if n % 6 == 0 {
                let view = GenerationView(sequence: try log.head)
                views.append(view)
                _ = try log.read(pinnedTo: view) { try $0.head }
            }
        }
        let head = try log.head
        let expected = Self.replayed(try Self.eventsBySequence(log), head: head)
        for view in views {
            let generation = try #require(view.sequence)
            let state = expected[Int(generation)]
            try log.read(pinnedTo: view) { reader throws in
                for (entity, kinds) in [("Member", ["Member", "Captain"]), ("Captain", ["Captain"]), ("Club", ["Club"]), ("Sponsor", ["Sponsor"])] {
                    var scanned: [StoredObjectID: [String: LogValue]] = [:]
                    try reader.forEachObject(of: entity) { object in
                        scanned[object.id] = object.values.filter { $0.value != .null }
                        return .next
                    }
                    let wanted = state.objects.filter { kinds.contains($0.key.entity) }
                    #expect(scanned == wanted, "\(entity) as of \(generation): \(stateDifferences(scanned, wanted))")
                    #expect(try reader.count(of: entity) == wanted.count, "count of \(entity) as of \(generation)")
                }
                for (id, values) in state.objects where id.entity == "Club" {
                    #expect(try reader.related(id, "lineup") == (values["lineup"].flatMap { if case .references(let ids) = $0 { ids } else { nil } } ?? []), "\(id).lineup as of \(generation)")
                    #expect(Set(try reader.related(id, "sponsors")) == Set(values["sponsors"].flatMap { if case .references(let ids) = $0 { ids } else { nil } } ?? []), "\(id).sponsors as of \(generation)")
                }
            }
        }
    }

    @Test("a purge whose write transaction LMDB runs again after growing the map puts the rewritten segment in place (before: it deleted it the second time round and failed, \"The file doesn't exist\")")
    func purgeRetriedAfterMapGrowth() throws {
        // A small map the purge's transaction outgrows: these sizes did, with a segment
        // straddling the purge point.
        for count in [20, 240] {
            let dir = try TemporaryDirectory("strata-purge-grow")
            let log = try openLog(dir, model: try libraryModel()) {
                $0.initialMapSize = 128 << 10
                $0.checkpointInterval = 0
            }
            let padding = String(repeating: "x", count: 1500)
            var events: [UInt64: TransactionEvent] = [:]
            for k in 0..<count {
                var draft = TransactionDraft()
                _ = draft.insert("Sponsor", values: ["name": s("sponsor \(k) \(padding)")])
                let result = try log.commit(draft)
                events[result.sequence] = result.event
            }
            var request = CompactionRequest(before: UInt64(count))
            request.eventsPerFrame = 8
            try log.compact(request)
            let point = UInt64(count / 2)
            let report = try log.purge(through: point, author: "review")
            #expect(report.segmentRewritten != nil, "\(count): the segment straddled the purge point")
            let head = try log.head
            let expected = Self.replayed(events, head: head)
            try log.read { reader throws in
                #expect(try reader.state(asOf: point) == expected[Int(point)], "\(count): the base")
                #expect(try reader.state(asOf: head) == expected[Int(head)], "\(count): the head")
            }
            let segments = try log.segments()
            let named = Set(segments.map(\.fileName) + segments.compactMap(\.dictionaryFileName))
            #expect(CrashSafetyTests.segmentFiles(dir.file("store")).filter { !$0.hasPrefix(".") } == named, "\(count)")
            #expect(try log.verify().isClean, "\(count)")
        }
    }

    @Test("temporary segment files a killed process left under this process's own ID (a container's app is PID 1 at every start) are removed at the next writable open; this process's own files of the moment are kept")
    func temporaryFilesOfEarlierProcessWithSameID() throws {
        let dir = try TemporaryDirectory("strata-tmp-pid")
        let store = dir.file("store")
        let pid = ProcessInfo.processInfo.processIdentifier
        do {
            let log = try openLog(dir, model: try libraryModel())
            for k in 0..<6 {
                var draft = TransactionDraft()
                _ = draft.insert("Sponsor", values: ["name": s("s\(k)")])
                try log.commit(draft)
            }
            try log.compact(CompactionRequest(before: 4))
        }
        let segments = (store as NSString).appendingPathComponent("segments")
        func plant(_ name: String) throws -> String {
            let path = (segments as NSString).appendingPathComponent(name)
            #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x28, count: 4096)))
            return path
        }
        // What a compaction and a purge killed in an earlier process with this ID left: the
        // names before the process token, and with another process's token.
        let stale = [
            try plant(".tmp-\(pid)-\(UUID().uuidString).zst"),
            try plant(".tmp-\(pid)-\(UUID().uuidString).dict"),
            try plant(".tmp-\(pid)-00000000deadbeef-\(UUID().uuidString).zst"),
        ]
        // This process's own, as a compaction running now names them.
        let own = try plant(EventLog.temporarySegmentName(suffix: "zst"))
        let log = try EventLog(openingExistingAt: store, readOnly: false)
        for path in stale { #expect(!FileManager.default.fileExists(atPath: path), "\((path as NSString).lastPathComponent) outlived the open") }
        #expect(FileManager.default.fileExists(atPath: own), "a temporary file of this process, which may be writing it, was removed")
        try FileManager.default.removeItem(atPath: own)
        #expect(try log.verify().isClean)
    }

    @Test("scratch environments a killed verify or purge left in the temporary directory (a Ctrl-C of `strata verify`: the size of the replayed state) are removed by the next verify or purge; those of live processes are kept")
    func scratchOfKilledVerifyRemoved() throws {
        let dir = try TemporaryDirectory("strata-scratch-review")
        // The scratch directory is this test's own (session 35): planted in the system's
        // temporary directory, another test process's verify could remove a planted
        // directory between its creation and its data.mdb's, or this one's remove another's.
        let scratch = try TemporaryDirectory("strata-scratch-place")
        let log = try openLog(dir, model: try libraryModel()) { $0.scratchDirectory = scratch.path }
        var draft = TransactionDraft()
        _ = draft.insert("Sponsor", values: ["name": s("Acme")])
        try log.commit(draft)
        let temporary = scratch.path
        func plant(_ name: String) throws -> String {
            let path = (temporary as NSString).appendingPathComponent(name)
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: (path as NSString).appendingPathComponent("data.mdb"), contents: Data(repeating: 1, count: 1 << 16)))
            return path
        }
        let pid = ProcessInfo.processInfo.processIdentifier
        // A process that is gone, and an earlier process with this one's ID.
        let stale = [
            try plant("strata-scratch-\(Int32.max)-00000000deadbeef-\(UUID().uuidString)"),
            try plant("strata-scratch-\(pid)-00000000deadbeef-\(UUID().uuidString)"),
        ]
        // This process's own (another verify may be running in it) and a live process's (pid 1).
        let live = [
            try plant("strata-scratch-\(pid)-\(EventLog.processToken)-\(UUID().uuidString)"),
            try plant("strata-scratch-1-00000000deadbeef-\(UUID().uuidString)"),
        ]
        defer { for path in stale + live { try? FileManager.default.removeItem(atPath: path) } }
        #expect(try log.verify().isClean)
        for path in stale { #expect(!FileManager.default.fileExists(atPath: path), "\((path as NSString).lastPathComponent) outlived the verify") }
        for path in live { #expect(FileManager.default.fileExists(atPath: path), "\((path as NSString).lastPathComponent) was removed while its process may use it") }
        // The verify's own scratch environment was made there, and went at its end.
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: temporary)) == Set(live.map { ($0 as NSString).lastPathComponent }))
    }

    @Test("a scratch directory that doesn't exist: verify and purge fail naming it, and don't make it")
    func missingScratchDirectory() throws {
        let dir = try TemporaryDirectory("strata-scratch-review")
        let missing = dir.file("no-such/scratch")
        let log = try openLog(dir, model: try libraryModel()) { $0.scratchDirectory = missing }
        var draft = TransactionDraft()
        _ = draft.insert("Sponsor", values: ["name": s("Acme")])
        try log.commit(draft)
        let message = "the scratch directory \(missing) (EventLog.Configuration.scratchDirectory) doesn't exist or isn't a directory"
        do {
            _ = try log.verify()
            Issue.record("the verify went through")
        } catch {
            #expect("\(error)".contains(message), "\(error)")
        }
        do {
            _ = try log.purge(through: 1, author: nil)
            Issue.record("the purge went through")
        } catch {
            #expect("\(error)".contains(message), "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("no-such")))
    }

    @Test("a vacuum killed right after putting its copy in place, while another process waits to open the store: the waiting open never reads the copy through the old file's lock table (the copy's transaction IDs start again at 1), and every commit is kept")
    func vacuumKilledAfterRenameWithWaitingOpener() throws {
        // Two stores whose last transaction IDs differ by one: the stale lock table picks the
        // meta page by the ID's parity, and one of the two is the copy's empty one.
        for commits in [6, 7] {
            let dir = try TemporaryDirectory("strata-vacuum-waiter")
            let store = dir.file("store")
            let seed = try LogProbeProcess(["commit", store, String(commits)])
            while seed.nextLine() != nil {}
            seed.process.waitUntilExit()
            #expect(seed.process.terminationStatus == 0, "\(seed.standardError)")

            let vacuum = try LogProbeProcess(["vacuum-hang", store])
            while let line = vacuum.nextLine(), line != "renamed" {}
            #expect(vacuum.lines.last == "renamed", "the vacuum didn't reach the rename: \(vacuum.standardError)")
            // An app opening the store meanwhile waits for the vacuum's lock.
            let waiter = try LogProbeProcess(["commit", store, "2"])
            usleep(300_000)
            #expect(waiter.process.isRunning, "the open didn't wait for the vacuum")
            vacuum.kill()
            while waiter.nextLine() != nil {}
            waiter.process.waitUntilExit()
            let acked = waiter.numbers(after: "ack")
            #expect(acked == [UInt64(commits) + 1, UInt64(commits) + 2], "\(commits): the waiting open goes on after the store's commits: \(waiter.lines) \(waiter.standardError)")

            // The store holds the seed's commits and the waiter's, and verifies clean.
            let log = try EventLog(openingExistingAt: store, readOnly: false)
            let head = try log.head
            #expect(head >= UInt64(commits) + UInt64(acked.count), "\(commits): head \(head) after \(commits) commits and the waiter's \(acked) (it said: \(waiter.lines) \(waiter.standardError))")
            let state = try log.read { try $0.currentState() }
            #expect(state.objects == ProbeContract.state(head: head), "\(commits): \(stateDifferences(state.objects, ProbeContract.state(head: head)))")
            #expect(try log.verify().isClean, "\(commits)")
        }
    }

    @Test("the model version as of a purge point is the one its data was in: after a later version renamed the entity, not the handle's (before: the export of that point used the new names and left every object out)")
    func modelVersionAtPurgePointAfterRename() throws {
        let dir = try TemporaryDirectory("strata-asof-review")
        do {
            let log = try openLog(dir, model: try Self.renameModel(renamed: false)) { $0.checkpointInterval = 0 }
            var draft = TransactionDraft()
            let team = draft.insert("Team", values: ["name": s("Otters")])
            for k in 0..<3 { _ = draft.insert("Player", values: ["name": s("p\(k)"), "team": .reference(team)]) }
            try log.commit(draft)
            draft = TransactionDraft()
            draft.update(.stored(StoredObjectID(entity: "Player", primaryKey: 1)), values: ["score": i(7)])
            try log.commit(draft)
            try log.purge(through: 2, author: "review")
        }
        let log = try openLog(dir, model: try Self.renameModel(renamed: true)) { $0.checkpointInterval = 0 }
        #expect(log.modelVersion == 2)
        try log.read { reader throws in
            let state = try reader.state(asOf: 2)
            #expect(Set(state.objects.keys.map(\.entity)) == ["Team", "Player"], "as of the purge point, before the rename")
            let version = try reader.modelVersion(asOf: 2)
            #expect(version == 1, "the data as of 2 is in version 1's terms")
            let entities = try log.storedModel(version: version).entities.map(\.name)
            #expect(state.objects.keys.allSatisfy { entities.contains($0.entity) }, "\(entities)")
            #expect(try reader.modelVersion(asOf: try reader.head) == 2)
        }
        // A copy through the purge point, and a later purge, say the same.
        _ = try log.replay(through: 3, into: dir.file("copy"))
        #expect(try EventLog(openingExistingAt: dir.file("copy")).read { try $0.modelVersion(asOf: 2) } == 1)
        try log.purge(through: try log.head, author: "review")
        #expect(try log.read { try $0.modelVersion(asOf: try $0.purgedThrough) } == 2)
    }

    @Test("a checkpoint falls due on every multiple of the interval, whatever event lands there — a reservation of primary keys, a purge marker, a migration — so as-of reads near it stay cheap (before: only saves wrote one, and the gap doubled)")
    func checkpointsDueOnEveryKindOfEvent() throws {
        let dir = try TemporaryDirectory("strata-asof-review")
        var events: [UInt64: TransactionEvent] = [:]
        do {
            let log = try openLog(dir, model: try Self.renameModel(renamed: false)) { $0.checkpointInterval = 4 }
            func save(_ k: Int) throws {
                var draft = TransactionDraft()
                _ = draft.insert("Player", values: ["name": s("p\(k)"), "score": i(Int32(k))])
                let result = try log.commit(draft)
                events[result.sequence] = result.event
            }
            for k in 0..<3 { try save(k) }
            _ = try log.reservePrimaryKeys(of: "Player", count: 2)  // event 4
            for k in 3..<6 { try save(k) }  // 5, 6, 7
            try log.purge(through: 2, author: "review")  // the marker is event 8
            for k in 6..<9 { try save(k) }  // 9, 10, 11
            #expect(try log.read { try $0.checkpoints() }.filter { $0 > 2 } == [4, 8])
        }
        // The migration to the rename: a take-out at 12, the put-back at 13 — due at 12, written
        // at 13 (the store was never as of the take-out alone).
        let log = try openLog(dir, model: try Self.renameModel(renamed: true)) { $0.checkpointInterval = 4 }
        let head = try log.head
        #expect(head >= 12)
        try log.read { reader throws in
            #expect(try reader.checkpoints().filter { $0 > 2 } == [4, 8, head])
            #expect(try reader.plan(asOf: 9) == .forwardFromCheckpoint(checkpoint: 8, events: 1))
            #expect(try reader.state(asOf: head) == reader.currentState())
        }
        for event in try Self.eventsBySequence(log).values { events[event.sequence] = event }
        let expected = Self.replayed(events, head: head)
        _ = try Self.check(log, expected, 2...head, "checkpoints of every kind of event")
        #expect(try log.verify().isClean)
    }

    @Test("a purge through a migration's take-out is refused, as a replay through one is: its base would be a state the store never had — the renamed entity's objects under neither name — kept for good as the earliest state")
    func purgeThroughTakeOutRefused() throws {
        let dir = try TemporaryDirectory("strata-asof-review")
        do {
            let log = try openLog(dir, model: try Self.renameModel(renamed: false))
            var draft = TransactionDraft()
            let team = draft.insert("Team", values: ["name": s("Otters")])
            for k in 0..<3 { _ = draft.insert("Player", values: ["name": s("p\(k)"), "team": .reference(team)]) }
            try log.commit(draft)
        }
        let log = try openLog(dir, model: try Self.renameModel(renamed: true))
        let head = try log.head
        let migration = try log.read { reader throws in try (2...head).map { try reader.event($0) } }
        #expect(migration.allSatisfy { if case .migration = $0.kind { true } else { false } } && migration.count >= 2, "take-outs, then the put-back")
        for takeOut in 2..<head {
            do {
                try log.purge(through: takeOut, author: "review")
                Issue.record("purged through the take-out \(takeOut)")
            } catch let error as LogError {
                #expect("\(error)".contains("the store was never as of event \(takeOut)"), "\(error)")
            }
            #expect(try log.read { try $0.purgedThrough } == 0, "nothing was purged")
        }
        try log.purge(through: head, author: "review")
        #expect(try log.read { try $0.state(asOf: head) } == log.read { try $0.currentState() })
        #expect(try log.verify().isClean)
    }

    @Test("a purge killed after its commit but before setting its dropped files aside: the next writable open sets them aside rather than deleting them, so a reader whose snapshot is older than the purge still reads every event it saw")
    func purgeKilledBeforeSetAsideKeepsOlderReaders() throws {
        let dir = try TemporaryDirectory("strata-purge-aside")
        let path = dir.file("store")
        let log = try openLog(dir, model: try libraryModel())
        for k in 0..<30 {
            var draft = TransactionDraft()
            _ = draft.insert("Sponsor", values: ["name": s("s\(k)")])
            try log.commit(draft)
        }
        var request = CompactionRequest(before: 11)
        request.eventsPerFrame = 4
        try log.compact(request)  // 1…10
        request.before = 21
        try log.compact(request)  // 11…20
        let expected = try log.read { reader in try (1...20).map { try reader.event(UInt64($0)) } }
        let segments = log.segmentDirectory
        func onAnotherThread(_ body: @escaping @Sendable () throws -> Void) throws {
            let outcome = Mutex<(any Error)?>(nil)
            let done = DispatchSemaphore(value: 0)
            Thread {
                do { try body() } catch { outcome.withLock { $0 = error } }
                done.signal()
            }.start()
            done.wait()
            if let error = outcome.withLock({ $0 }) { throw error }
        }
        try log.read { (reader: borrowing LogReader) throws in
            try onAnotherThread { _ = try log.purge(through: 15, author: "review") }
            // What a kill right after the purge's commit leaves: its dropped files under their
            // own names, which no manifest entry names any more.
            for name in try FileManager.default.contentsOfDirectory(atPath: segments) where name.hasPrefix(".purged-") {
                let original = String(name.split(separator: "-", maxSplits: 2)[2])
                try FileManager.default.moveItem(
                    atPath: (segments as NSString).appendingPathComponent(name), toPath: (segments as NSString).appendingPathComponent(original))
            }
            // Another handle opens the store writable, and repairs it.
            try onAnotherThread { _ = try EventLog(openingExistingAt: path, readOnly: false) }
            let events = try (1...20).map { try reader.event(UInt64($0)) }
            #expect(events == expected, "the old snapshot reads every event it saw")
        }
        log.sweepSetAsideSegments()
        let files = CrashSafetyTests.segmentFiles(path)
        let named = Set(try log.segments().map(\.fileName))
        #expect(files == named, "no reader is that old any more: \(files.sorted())")
        #expect(try log.verify().isClean)
    }
}
