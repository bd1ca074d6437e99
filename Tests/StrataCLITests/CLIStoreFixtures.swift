import Foundation
import StrataLog
import StrataModel
import StrataTestSupport

/// A league: teams with an ordered line-up and many-to-many sponsors, players with every
/// awkward value type (text with commas, quotes and newlines, binary data, booleans, dates).
func leagueModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Team") {
            Attribute("name", .string)
            Attribute("founded", .date)
            Relationship("players", to: "Player", inverse: "team", toMany: true)
            Relationship("lineup", to: "Player", inverse: "lineupTeam", toMany: true, ordered: true)
            Relationship("sponsors", to: "Sponsor", inverse: "teams", toMany: true)
        }
        Entity("Player") {
            Attribute("name", .string)
            Attribute("age", .int32).indexed()
            Attribute("rating", .double)
            Attribute("active", .boolean)
            Attribute("photo", .binaryData)
            Relationship("team", to: "Team", inverse: "players")
            Relationship("lineupTeam", to: "Team", inverse: "lineup")
        }
        Entity("Sponsor") {
            Attribute("name", .string)
            Relationship("teams", to: "Team", inverse: "sponsors", toMany: true)
        }
    }
}

/// A store made by the tests, with what they need to know about it.
struct LeagueStore {
    let directory: TemporaryDirectory
    let path: String
    let storeUUID: UUID
    let head: UInt64
    /// Player/p1's URI.
    let firstPlayerURI: String

    func uri(_ entity: String, _ key: UInt64) -> String {
        "x-strata://\(storeUUID.uuidString)/\(entity)/p\(key)"
    }
}

func str(_ text: String) -> DraftValue { .attribute(.string(text)) }

/// Builds a league store with a real history: two authors and contexts, updates, membership
/// changes, a delete, an undo, and `extraTransactions` more small saves.
func makeLeagueStore(extraTransactions: Int = 0) throws -> LeagueStore {
    let directory = try TemporaryDirectory("strata-cli")
    let path = directory.file("League.strata")
    var configuration = EventLog.Configuration()
    configuration.initialMapSize = 4 << 20
    configuration.checkpointInterval = 25
    let base = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
    var clock = 0.0
    func stamp(_ draft: inout TransactionDraft) {
        clock += 60
        draft.timestamp = base.addingTimeInterval(clock)
    }
    let uuid: UUID
    let head: UInt64
    do {
        let log = try EventLog(path: path, model: try leagueModel(), configuration: configuration)
        uuid = log.storeUUID

        // 1: two teams and a sponsor.
        var draft = TransactionDraft(author: "alice", contextName: "editor")
        stamp(&draft)
        draft.setActionName("Add Teams")
        let otters = draft.insert("Team", values: ["name": str("Otters"), "founded": .attribute(.date(base))])
        let herons = draft.insert("Team", values: ["name": str("Herons, \"the birds\"\nof the lake")])
        let acme = draft.insert("Sponsor", values: ["name": str("Acme")])
        var result = try log.commit(draft)
        let team1 = try required(result.permanentID(for: otters))
        let team2 = try required(result.permanentID(for: herons))
        let sponsor = try required(result.permanentID(for: acme))

        // 2: players.
        draft = TransactionDraft(author: "alice", contextName: "editor")
        stamp(&draft)
        let ng = draft.insert("Player", values: [
            "name": str("Ng, Ada"), "age": .attribute(.int32(31)), "rating": .attribute(.double(4.5)),
            "active": .attribute(.boolean(true)), "photo": .attribute(.binaryData(Data([0, 1, 0xfe, 0xff]))),
            "team": .reference(.stored(team1)),
        ])
        let ott = draft.insert("Player", values: ["name": str("O'Toole"), "age": .attribute(.int32(24)), "team": .reference(.stored(team1))])
        let kim = draft.insert("Player", values: ["name": str("Kim"), "age": .attribute(.int32(28)), "team": .reference(.stored(team2))])
        result = try log.commit(draft)
        let p1 = try required(result.permanentID(for: ng))
        let p2 = try required(result.permanentID(for: ott))
        let p3 = try required(result.permanentID(for: kim))

        // 3: line-up and sponsors, by bob.
        draft = TransactionDraft(author: "bob", contextName: "importer")
        stamp(&draft)
        draft.update(.stored(team1), values: ["lineup": .references([.stored(p2), .stored(p1)])])
        draft.changeMembers(of: .stored(sponsor), "teams", adding: [.stored(team1), .stored(team2)])
        try log.commit(draft)

        // 4: an update; 5: its undo.
        draft = TransactionDraft(author: "bob", contextName: "importer")
        stamp(&draft)
        draft.update(.stored(p1), values: ["age": .attribute(.int32(32)), "rating": .attribute(.double(4.75))])
        try log.commit(draft)
        draft = TransactionDraft(author: "bob", contextName: "importer", kind: .undo(of: 4, group: 0))
        stamp(&draft)
        draft.update(.stored(p1), values: ["age": .attribute(.int32(31)), "rating": .attribute(.double(4.5))])
        try log.commit(draft)

        // 6: a transfer; 7: a delete.
        draft = TransactionDraft(author: "alice", contextName: "editor")
        stamp(&draft)
        draft.update(.stored(p3), values: ["team": .reference(.stored(team1)), "active": .attribute(.boolean(false))])
        try log.commit(draft)
        draft = TransactionDraft(author: "alice", contextName: "editor")
        stamp(&draft)
        draft.delete(.stored(p2))
        draft.update(.stored(team1), values: ["lineup": .references([.stored(p1)])])
        try log.commit(draft)

        // More small saves.
        for n in 0..<extraTransactions {
            draft = TransactionDraft(author: n % 2 == 0 ? "alice" : "carol")
            stamp(&draft)
            if n % 4 == 0 {
                _ = draft.insert("Player", values: ["name": str("extra \(n)"), "age": .attribute(.int32(Int32(18 + n % 20))), "team": .reference(.stored(team2))])
            } else {
                draft.update(.stored(p3), values: ["age": .attribute(.int32(Int32(20 + n % 30)))])
            }
            try log.commit(draft)
        }
        head = try log.head
    }
    return LeagueStore(
        directory: directory, path: path, storeUUID: uuid, head: head,
        firstPlayerURI: "x-strata://\(uuid.uuidString)/Player/p1")
}

struct MissingValue: Error {}

func required<T>(_ value: T?) throws -> T {
    guard let value else { throw MissingValue() }
    return value
}

/// Parses JSON text.
func parseJSON(_ text: String) throws -> Any {
    try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
}

/// Every file's bytes and modification time under `path` except LMDB's lock file, which
/// readers use by design.
func snapshotFiles(_ path: String) throws -> [String: (Data, Date)] {
    var result: [String: (Data, Date)] = [:]
    for name in try FileManager.default.subpathsOfDirectory(atPath: path) where name != "lock.mdb" {
        let full = (path as NSString).appendingPathComponent(name)
        let attributes = try FileManager.default.attributesOfItem(atPath: full)
        guard attributes[.type] as? FileAttributeType == .typeRegular else { continue }
        result[name] = (try Data(contentsOf: URL(fileURLWithPath: full)), (attributes[.modificationDate] as? Date) ?? .distantPast)
    }
    return result
}

/// Parses RFC 4180 CSV (CRLF records, quoted fields with doubled quotes).
func parseCSV(_ text: String) -> [[String]] {
    var records: [[String]] = []
    var record: [String] = []
    var field = ""
    var quoted = false
    var iterator = Array(text.unicodeScalars).makeIterator()
    var pending: Unicode.Scalar?
    func next() -> Unicode.Scalar? {
        if let p = pending {
            pending = nil
            return p
        }
        return iterator.next()
    }
    while let c = next() {
        if quoted {
            if c == "\"" {
                if let n = next() {
                    if n == "\"" { field.unicodeScalars.append("\"") } else {
                        quoted = false
                        pending = n
                    }
                } else {
                    quoted = false
                }
            } else {
                field.unicodeScalars.append(c)
            }
        } else if c == "\"" {
            quoted = true
        } else if c == "," {
            record.append(field)
            field = ""
        } else if c == "\r" {
            continue
        } else if c == "\n" {
            record.append(field)
            records.append(record)
            record = []
            field = ""
        } else {
            field.unicodeScalars.append(c)
        }
    }
    if !field.isEmpty || !record.isEmpty {
        record.append(field)
        records.append(record)
    }
    return records
}
