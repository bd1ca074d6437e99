import Foundation
import GRDB

/// The GRDB peer's person: a plain Record API type.
struct GRDBPerson: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "person"
    var id: Int64?
    var firstName: String
    var lastName: String
    var email: String
    var age: Int32
    var score: Double
    var teamId: Int64

    init(_ row: PersonRow) {
        firstName = row.firstName
        lastName = row.lastName
        email = row.email
        age = row.age
        score = row.score
        teamId = Int64(row.team + 1)
    }
}

struct GRDBTeam: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "team"
    var id: Int64
    var name: String
}

/// A GRDB `DatabaseQueue` at a file path, GRDB's default configuration, with the same
/// columns and indexes Strata maintains: age (index), email (unique index), and the team
/// reference (foreign key with an index, as Strata's inverse `members` lookup needs no scan).
func makeGRDBDatabase(in directory: String) throws -> DatabaseQueue {
    let queue = try DatabaseQueue(path: (directory as NSString).appendingPathComponent("people.sqlite"))
    try queue.write { db in
        try db.create(table: "team") { t in
            t.primaryKey("id", .integer)
            t.column("name", .text)
        }
        try db.create(table: "person") { t in
            t.primaryKey("id", .integer)
            t.column("firstName", .text)
            t.column("lastName", .text)
            t.column("email", .text).unique()
            t.column("age", .integer).indexed()
            t.column("score", .double)
            t.belongsTo("team")
        }
    }
    return queue
}

/// `journal_mode` and `synchronous` as GRDB left them, for the report.
func grdbSettings(_ queue: DatabaseQueue) throws -> String {
    try queue.read { db in
        let journal = try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "?"
        let synchronous = try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1
        let names = [0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"]
        return "journal_mode=\(journal) (WAL \(journal.lowercased() == "wal" ? "on" : "off")), synchronous=\(names[synchronous] ?? "\(synchronous)")"
    }
}
