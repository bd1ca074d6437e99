import Foundation
import StrataLog
import StrataStorage
import StrataTestSupport
import Testing

/// How a test damages a league store whose events 1…10 were compacted into one segment.
private enum JSONDamage: String, CaseIterable, Sendable {
    /// The segment file holding events 1…10 is gone.
    case missingSegment = "missing segment"
    /// The segment file is cut to half its size.
    case truncatedSegment = "truncated segment"
    /// One bit of raw event 15's stored bytes is flipped (its checksum no longer matches).
    case flippedRawEvent = "bit-flipped raw event 15"

    /// The transactions a read from the start gets before the damage.
    var readable: [Int] {
        switch self {
        case .missingSegment, .truncatedSegment: []
        case .flippedRawEvent: Array(1...14)
        }
    }

    func apply(_ store: LeagueStore, segment: String) throws {
        switch self {
        case .missingSegment:
            try FileManager.default.removeItem(atPath: segment)
        case .truncatedSegment:
            let bytes = try Data(contentsOf: URL(fileURLWithPath: segment))
            try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: segment))
        case .flippedRawEvent:
            var options = LMDBEnvironment.Options()
            options.maxDatabases = 32
            let environment = try LMDBEnvironment(path: store.path, databases: [DatabaseDescriptor("events")], options: options)
            try environment.write { txn in
                let events = try environment.database(named: "events")
                // The event's only chunk: sequence (u64 BE) · chunk 0 (spec 0004 §3.4).
                let key: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 15, 0, 0, 0, 0]
                var value = try required(try txn.value(forKey: key, in: events))
                // In the changes, before the checksum (the last 4 bytes).
                value[value.count - 6] ^= 0x10
                try txn.put(value, forKey: key, in: events)
            }
        }
    }
}

/// A league store of 27 transactions, events 1…10 compacted into one segment, then damaged.
private func damagedLeagueStore(_ damage: JSONDamage) throws -> (LeagueStore, segmentFile: String) {
    let store = try makeLeagueStore(extraTransactions: 20)
    let compacted = try strata("compact", store.path, "--before", "11")
    #expect(compacted.status == 0, "\(compacted.standardError)")
    let segments = (store.path as NSString).appendingPathComponent("segments")
    let name = try required(try FileManager.default.contentsOfDirectory(atPath: segments).first { $0.hasSuffix(".zst") })
    try damage.apply(store, segment: (segments as NSString).appendingPathComponent(name))
    return (store, name)
}

/// Session 33 (helper 5): JSON output over a damaged store stays well-formed.
@Suite("strata's JSON output over a damaged store")
struct DamagedStoreJSONCommandTests {
    @Test(
        "log --format json over a missing or truncated segment or a bit-flipped raw event: exit 1, and stdout is one well-formed document holding the transactions read before the damage, with the error as its last member (before: an unfinished document); ndjson's lines are whole"
    )
    func logJSONStaysWellFormed() throws {
        for damage in JSONDamage.allCases {
            let (store, segment) = try damagedLeagueStore(damage)
            let named = damage == .flippedRawEvent ? "event 15" : segment
            let result = try strata("log", store.path, "--format", "json")
            #expect(result.status == 1, "\(damage.rawValue): \(result.standardError)")
            let message = result.standardError.split(separator: "\n").last.map(String.init) ?? ""
            #expect(message.hasPrefix("strata: ") && message.contains(named), "\(damage.rawValue): \(result.standardError)")
            let document = try #require(
                try? parseJSON(result.standardOutput) as? [String: Any], "\(damage.rawValue): not a JSON document:\n\(result.standardOutput)")
            #expect(document["store"] as? String == store.storeUUID.uuidString)
            let transactions = try #require(document["transactions"] as? [[String: Any]], "\(damage.rawValue)")
            #expect(transactions.compactMap { $0["sequence"] as? Int } == damage.readable, "\(damage.rawValue)")
            #expect(document["error"] as? String == String(message.dropFirst("strata: ".count)), "\(damage.rawValue): \(document)")

            let lines = try strata("log", store.path, "--format", "ndjson")
            #expect(lines.status == 1)
            let records = lines.standardOutput.split(separator: "\n").map { try? parseJSON(String($0)) as? [String: Any] }
            #expect(records.allSatisfy { $0 != nil }, "\(damage.rawValue): \(lines.standardOutput)")
            #expect(records.compactMap { $0?["sequence"] as? Int } == damage.readable, "\(damage.rawValue)")
        }
    }

    @Test(
        "export --at over a damaged store to standard output, the error after more than 64 KiB were written: exit 1, and stdout is one well-formed document holding the objects exported before the error, with the error as its last member (before: an unfinished document)"
    )
    func exportJSONStaysWellFormed() throws {
        // 1: a team; 2: 500 players of it; 3, 4: the team renamed. Event 3 is damaged: the
        // players as of 2 read no event after 2, the team as of 2 reads 4 and 3 back.
        let directory = try TemporaryDirectory("strata-cli")
        let path = directory.file("League.strata")
        do {
            let log = try EventLog(path: path, model: try leagueModel())
            var draft = TransactionDraft(author: "alice")
            let team = draft.insert("Team", values: ["name": str("Otters")])
            let teamID = try required(try log.commit(draft).permanentID(for: team))
            draft = TransactionDraft(author: "alice")
            for n in 0..<500 {
                _ = draft.insert("Player", values: ["name": str("player \(n) " + String(repeating: "x", count: 100)), "team": .reference(.stored(teamID))])
            }
            try log.commit(draft)
            for name in ["Grey Otters", "Blue Otters"] {
                draft = TransactionDraft(author: "alice")
                draft.update(.stored(teamID), values: ["name": str(name)])
                try log.commit(draft)
            }
        }
        do {
            var options = LMDBEnvironment.Options()
            options.maxDatabases = 32
            let environment = try LMDBEnvironment(path: path, databases: [DatabaseDescriptor("events")], options: options)
            try environment.write { txn in
                let events = try environment.database(named: "events")
                let key: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0]
                var value = try required(try txn.value(forKey: key, in: events))
                value[value.count - 6] ^= 0x10
                try txn.put(value, forKey: key, in: events)
            }
        }
        let result = try strata("export", path, "--at", "2")
        #expect(result.status == 1, "\(result.standardError)")
        let message = result.standardError.split(separator: "\n").last.map(String.init) ?? ""
        #expect(message.hasPrefix("strata: ") && message.contains("event 3"), "\(result.standardError)")
        #expect(result.standardOutput.utf8.count > 1 << 16, "the error comes after the first 64 KiB were written")
        let document = try #require(try? parseJSON(result.standardOutput) as? [String: Any], "not a JSON document:\n\(result.standardOutput.suffix(500))")
        let entities = try #require(document["entities"] as? [String: [Any]])
        #expect(entities["Player"]?.count == 500)
        #expect(document["error"] as? String == String(message.dropFirst("strata: ".count)), "\(document["error"] ?? "no error member")")

        // A regular --output file is still taken back.
        let file = directory.file("export.json")
        let toFile = try strata("export", path, "--at", "2", "--output", file)
        #expect(toFile.status == 1)
        #expect(!FileManager.default.fileExists(atPath: file), "\(toFile.standardError)")
    }

    @Test(
        "query --at over a damaged store: exit 1 naming the damage, and stdout is empty or one well-formed document whose last member is the error"
    )
    func queryJSONStaysWellFormed() throws {
        for damage in JSONDamage.allCases {
            let (store, segment) = try damagedLeagueStore(damage)
            let named = damage == .flippedRawEvent ? "event 15" : segment
            let result = try strata("query", store.path, "Player", "--at", damage == .flippedRawEvent ? "12" : "2")
            #expect(result.status == 1, "\(damage.rawValue): \(result.standardError)")
            #expect(result.standardError.contains(named), "\(damage.rawValue): \(result.standardError)")
            guard !result.standardOutput.isEmpty else { continue }
            let document = try? parseJSON(result.standardOutput) as? [String: Any]
            #expect(document?["error"] is String, "\(damage.rawValue): \(result.standardOutput)")
        }
    }
}
