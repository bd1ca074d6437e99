import Foundation
import GRDB
import Strata

// Model-version migration (spec 0004 §4.4–4.6), `migration` filter; no target in the issues.
//
// V1. A store of `objects` members {name, email (indexed), age int16, rating, team}, written
//     with one model version, opened with the next: email renamed to contact (still
//     indexed), age widened to int64, rating removed, level added (mandatory, default 1). The
//     open — take-out, put-back, fills, conversions, index rebuild, all in one LMDB write
//     transaction — against:
//     - Strata committing the same objects in the first place (what writing them cost);
//     - GRDB making the same change the way SQLite documents for a column type change (and
//       Core Data's SQLite store does for most migrations): a new table filled by
//       `INSERT … SELECT`, the old one dropped, the new one renamed, the index re-created;
//     - GRDB with in-place `ALTER TABLE` (rename, add, drop column), which can't change a
//       type: the cheapest SQLite can do, for reference.

func runMigrationBenchmarks(objects: Int, repetitions: Int) throws {
    heading("V1. Opening a store of \(objects) members with a model version that renames, widens, removes and adds attributes")
    // The new version drops an attribute on purpose: opening with it must say so (spec 0004 §4.7).
    var removingConfiguration = benchConfiguration()
    removingConfiguration.allowsRemovingEntitiesAndProperties = true
    func model(evolved: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("members", to: "Member", inverse: "team", toMany: true)
            }
            Entity("Member") {
                Attribute("name", .string)
                if evolved {
                    Attribute("contact", .string).indexed().renamed(from: "email")
                    Attribute("age", .int64)
                    Attribute("level", .int16, default: 1).required()
                } else {
                    Attribute("email", .string).indexed()
                    Attribute("age", .int16)
                    Attribute("rating", .double)
                }
                Relationship("team", to: "Team", inverse: "members")
            }
        }
    }
    let v1 = try model(evolved: false)
    let v2 = try model(evolved: true)
    let teams = 100
    func draft() -> TransactionDraft {
        var draft = TransactionDraft()
        let teamIDs = (0..<teams).map { draft.insert("Team", values: ["name": .attribute(.string("team \($0)"))]) }
        for n in 0..<objects {
            draft.insert(
                "Member",
                values: [
                    "name": .attribute(.string("member \(n)")), "email": .attribute(.string("m\(n)@example.org")),
                    "age": .attribute(.int16(Int16(n % 90))), "rating": .attribute(.double(Double(n % 1000) / 10)),
                    "team": .reference(teamIDs[n % teams]),
                ])
        }
        return draft
    }
    // The store written with the first version, copied for each round.
    let original = try scratchDirectory("migration-original")
    defer { remove(original) }
    let written = try measure(
        "Strata, committing the \(objects) members (version 1)", repetitions: repetitions,
        setup: { () -> (String, EventLog, TransactionDraft) in
            let directory = try scratchDirectory("migration-commit")
            return (directory, try EventLog(path: directory, model: v1, configuration: benchConfiguration()), draft())
        },
        body: { state in try state.1.commit(state.2) },
        teardown: { state in remove(state.0) })
    do {
        let log = try EventLog(path: original, model: v1, configuration: benchConfiguration())
        try log.commit(draft())
    }
    let migrated = try measure(
        "Strata, opening it with version 2 (the migration)", repetitions: repetitions,
        setup: { () -> String in
            let copy = try scratchDirectory("migration-copy")
            remove(copy)
            try FileManager.default.copyItem(atPath: original, toPath: copy)
            return copy
        },
        body: { copy in _ = try EventLog(path: copy, model: v2, configuration: removingConfiguration) },
        teardown: { copy in remove(copy) })
    // The result is the migrated store.
    do {
        let copy = try scratchDirectory("migration-check")
        remove(copy)
        try FileManager.default.copyItem(atPath: original, toPath: copy)
        defer { remove(copy) }
        let log = try EventLog(path: copy, model: v2, configuration: removingConfiguration)
        let sample = try log.read { try $0.object(StoredObjectID(entity: "Member", primaryKey: 7)) }
        if sample?["contact"] != .attribute(.string("m6@example.org")) || sample?["age"] != .attribute(.int64(6))
            || sample?["level"] != .attribute(.int16(1)) || sample?.values["rating"] != nil
        {
            say("  warning: the migrated member 7 reads \(String(describing: sample))")
        }
    }

    // GRDB: the same rows, then the same change.
    let grdbOriginal = try scratchDirectory("migration-grdb")
    defer { remove(grdbOriginal) }
    let grdbFile = (grdbOriginal as NSString).appendingPathComponent("members.sqlite")
    do {
        let queue = try DatabaseQueue(path: grdbFile)
        try queue.write { db in
            try db.execute(sql: """
                CREATE TABLE team (id INTEGER PRIMARY KEY, name TEXT);
                CREATE TABLE member (id INTEGER PRIMARY KEY, name TEXT, email TEXT, age INTEGER, rating REAL, teamId INTEGER REFERENCES team(id));
                CREATE INDEX member_email ON member(email);
                CREATE INDEX member_team ON member(teamId);
                """)
            for t in 0..<teams { try db.execute(sql: "INSERT INTO team (id, name) VALUES (?, ?)", arguments: [t + 1, "team \(t)"]) }
            let insert = try db.makeStatement(sql: "INSERT INTO member (name, email, age, rating, teamId) VALUES (?, ?, ?, ?, ?)")
            for n in 0..<objects {
                try insert.execute(arguments: ["member \(n)", "m\(n)@example.org", n % 90, Double(n % 1000) / 10, n % teams + 1])
            }
        }
    }
    func grdbCopy() throws -> (String, DatabaseQueue) {
        let copy = try scratchDirectory("migration-grdb-copy")
        let file = (copy as NSString).appendingPathComponent("members.sqlite")
        try FileManager.default.copyItem(atPath: grdbFile, toPath: file)
        return (copy, try DatabaseQueue(path: file))
    }
    let rebuilt = try measure(
        "GRDB, new table by INSERT … SELECT, drop, rename, re-index", repetitions: repetitions, setup: grdbCopy,
        body: { state in
            try state.1.write { db in
                try db.execute(sql: """
                    CREATE TABLE member_new (id INTEGER PRIMARY KEY, name TEXT, contact TEXT, age INTEGER, level INTEGER NOT NULL DEFAULT 1, teamId INTEGER REFERENCES team(id));
                    INSERT INTO member_new (id, name, contact, age, level, teamId) SELECT id, name, email, CAST(age AS INTEGER), 1, teamId FROM member;
                    DROP TABLE member;
                    ALTER TABLE member_new RENAME TO member;
                    CREATE INDEX member_contact ON member(contact);
                    CREATE INDEX member_team ON member(teamId);
                    """)
            }
        },
        teardown: { state in remove(state.0) })
    let altered = try measure(
        "GRDB, ALTER TABLE rename, add and drop column (no type change)", repetitions: repetitions, setup: grdbCopy,
        body: { state in
            try state.1.write { db in
                try db.execute(sql: """
                    ALTER TABLE member RENAME COLUMN email TO contact;
                    ALTER TABLE member ADD COLUMN level INTEGER NOT NULL DEFAULT 1;
                    ALTER TABLE member DROP COLUMN rating;
                    """)
            }
        },
        teardown: { state in remove(state.0) })
    let toWriting = ratio(migrated.medianSeconds, written.medianSeconds)
    let toRebuild = ratio(migrated.medianSeconds, rebuilt.medianSeconds)
    let toAlter = ratio(migrated.medianSeconds, altered.medianSeconds)
    say("  migration ÷ writing the objects \(toWriting); ÷ GRDB table rebuild \(toRebuild); ÷ GRDB ALTER TABLE \(toAlter)")
    let name = "V1. migration of \(objects) members"
    record(name, "open with version 2 ÷ committing the objects", toWriting)
    record(name, "open with version 2 ÷ GRDB table rebuild", toRebuild)
    record(name, "open with version 2 ÷ GRDB ALTER TABLE", toAlter)
}
