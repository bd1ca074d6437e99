import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// Review 28-5: what an export can't carry into its format is said (not changed silently),
/// a failed export leaves no partial output, and small CLI defects (migrate to an older
/// model, an object reference the query can't read, a missing TMPDIR).
@Suite("strata export fidelity and small CLI defects (review 28-5)")
struct ExportFidelityCommandTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Item") {
                Attribute("dbl", .double)
                Attribute("flt", .float)
                Attribute("text", .string)
                Attribute("blob", .binaryData)
            }
            Entity("Note") {
                Attribute("body", .string)
            }
            Entity("Zeta") {
                Attribute("body", .string)
            }
        }
    }

    /// Items: p1 -0.0 (both floats), nil text and blob; p2 NaN, "" and empty data; p3 1.5,
    /// "x"; p4 -0.0 double only. Notes p1 "n", p2 "a\0b" (a NUL, which postgres can't hold).
    /// Zeta p1 "z".
    static func store() throws -> (TemporaryDirectory, String, UUID) {
        let directory = try TemporaryDirectory("strata-export-fidelity")
        let path = directory.file("Store.strata")
        let log = try EventLog(path: path, model: try model())
        var draft = TransactionDraft()
        _ = draft.insert("Item", values: ["dbl": .attribute(.double(-0.0)), "flt": .attribute(.float(-0.0))])
        _ = draft.insert(
            "Item",
            values: [
                "dbl": .attribute(.double(.nan)), "flt": .attribute(.float(.nan)), "text": .attribute(.string("")),
                "blob": .attribute(.binaryData(Data())),
            ])
        _ = draft.insert("Item", values: ["dbl": .attribute(.double(1.5)), "flt": .attribute(.float(1.5)), "text": .attribute(.string("x"))])
        _ = draft.insert("Item", values: ["dbl": .attribute(.double(-0.0))])
        _ = draft.insert("Note", values: ["body": .attribute(.string("n"))])
        _ = draft.insert("Note", values: ["body": .attribute(.string("a\u{0}b"))])
        _ = draft.insert("Zeta", values: ["body": .attribute(.string("z"))])
        try log.commit(draft)
        return (directory, path, log.storeUUID)
    }

    static func uri(_ store: UUID, _ entity: String, _ key: Int) -> String { "x-strata://\(store.uuidString)/\(entity)/p\(key)" }

    @Test("sql (sqlite): -0.0 is written -0.0 and NaN NULL, and stderr warns naming the object and property of each value sqlite can't hold (before: both changed silently); sqlite3 holds what the spec says")
    func sqliteSignedZeroAndNaN() throws {
        let (directory, path, uuid) = try Self.store()
        let script = directory.file("export.sql")
        let result = try strata("export", path, "--format", "sql", "--entity", "Item", "--output", script)
        #expect(result.status == 0, "\(result.standardError)")
        let text = try String(contentsOfFile: script, encoding: .utf8)
        #expect(text.contains("VALUES ('\(Self.uri(uuid, "Item", 1))', NULL, -0.0, -0.0, NULL);"), "\(text)")
        #expect(text.contains("VALUES ('\(Self.uri(uuid, "Item", 2))', X'', NULL, NULL, '');"), "\(text)")
        let warnings = result.standardError
        #expect(warnings.contains("warning: Item.dbl: \(Self.uri(uuid, "Item", 1)) holds -0.0, which a sqlite REAL column keeps as 0.0 (and 1 more object)"), "\(warnings)")
        #expect(warnings.contains("warning: Item.flt: \(Self.uri(uuid, "Item", 1)) holds -0.0, which a sqlite REAL column keeps as 0.0\n"), "\(warnings)")
        #expect(warnings.contains("warning: Item.dbl: \(Self.uri(uuid, "Item", 2)) holds NaN, which sqlite can't hold: written as NULL"), "\(warnings)")
        #expect(warnings.contains("warning: Item.flt: \(Self.uri(uuid, "Item", 2)) holds NaN, which sqlite can't hold: written as NULL"), "\(warnings)")
        #expect(!warnings.contains("Item/p3"), "\(warnings)")

        guard toolIsInstalled("sqlite3") else { return }
        let database = directory.file("export.db")
        let load = try tool("sqlite3", "-bail", database, ".read \(script)")
        #expect(load.status == 0, "\(load.standardError)")
        // What sqlite keeps: the sign of zero goes (a REAL column stores an integral value
        // as an integer), NaN is NULL — as the spec says; 1.5 exactly.
        let held = try tool("sqlite3", database, #"SELECT quote(dbl), quote(flt) FROM "Item" ORDER BY uri"#)
        #expect(held.standardOutput == "0.0|0.0\nNULL|NULL\n1.5|1.5\n0.0|NULL\n", "\(held.standardOutput)\(held.standardError)")
    }

    @Test("sql (sqlite): doubles below 2^-900, whose shortest text sqlite3 reads a unit in the last place off, are written as an exact expression, and sqlite holds each bit for bit (before: 0x0069D402989478F8 came back …F7)")
    func sqliteTinyDoublesExact() throws {
        let bits: [UInt64] = [
            0x0069_D402_9894_78F8, 0x804D_B86B_6201_972E, 0x0067_F760_19CD_CBCE, 0x031F_610E_7151_0AEF, 0x808E_32C1_AFEC_042D,
            0x0000_0000_0000_0001, 0x8000_0000_0000_0001, 0x000F_FFFF_FFFF_FFFF, 0x0010_0000_0000_0000, 0x0000_0000_0001_0000,
        ]
        let values = bits.map(Double.init(bitPattern:)) + [-2.5e-300, 0x1p-900, 0.1, 1e-200]
        let directory = try TemporaryDirectory("strata-export-tiny")
        let path = directory.file("Tiny.strata")
        let log = try EventLog(path: path, model: try Self.model())
        var draft = TransactionDraft()
        for value in values { _ = draft.insert("Item", values: ["dbl": .attribute(.double(value))]) }
        try log.commit(draft)
        let script = directory.file("tiny.sql")
        let result = try strata("export", path, "--format", "sql", "--entity", "Item", "--output", script)
        #expect(result.status == 0 && result.standardError.isEmpty, "\(result.standardError)")
        let text = try String(contentsOfFile: script, encoding: .utf8)
        #expect(text.contains(", NULL, (CAST(1 AS REAL) / 4611686018427387904 / "), "5e-324: \(text.prefix(2000))")
        #expect(text.contains(", NULL, 0.1, NULL, NULL);") && text.contains(", NULL, 1e-200, NULL, NULL);"), "values above 2^-900 as their shortest text")
        guard toolIsInstalled("sqlite3") else { return }
        let database = directory.file("tiny.db")
        let load = try tool("sqlite3", "-bail", database, ".read \(script)")
        #expect(load.status == 0, "\(load.standardError)")
        let held = try tool("sqlite3", database, #"SELECT hex(ieee754_to_blob(dbl)) FROM "Item" ORDER BY CAST(substr(uri, instr(uri, '/p') + 2) AS INTEGER)"#)
        guard held.status == 0 else { return }  // a sqlite3 shell without ieee754_to_blob
        let expected = values.map { String(format: "%016llX", $0.bitPattern) }
        #expect(held.standardOutput.split(separator: "\n").map(String.init) == expected, "\(held.standardOutput)")
    }

    @Test("sql (postgres): -0.0 is written '-0', which postgres keeps (a bare -0.0 is a numeric, which has no negative zero), and a quiet export writes no warning")
    func postgresSignedZero() throws {
        let (directory, path, uuid) = try Self.store()
        defer { withExtendedLifetime(directory) {} }
        let result = try strata("export", path, "--format", "sql", "--dialect", "postgres", "--entity", "Item")
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("VALUES ('\(Self.uri(uuid, "Item", 1))', NULL, '-0', '-0', NULL);"), "\(result.standardOutput)")
        #expect(result.standardOutput.contains("'NaN', 'NaN', ''"), "\(result.standardOutput)")
        #expect(result.standardError.isEmpty, "\(result.standardError)")
    }

    @Test("csv: no value is an empty field, an empty string (or empty data) the quoted field \"\" (before: both an empty field)")
    func csvNilAndEmpty() throws {
        let (directory, path, uuid) = try Self.store()
        let output = directory.file("csv")
        let result = try strata("export", path, "--format", "csv", "--entity", "Item", "--output", output)
        #expect(result.status == 0, "\(result.standardError)")
        let text = try String(contentsOfFile: output + "/Item.csv", encoding: .utf8)
        #expect(text == """
            uri,blob,dbl,flt,text\r
            \(Self.uri(uuid, "Item", 1)),,-0.0,-0.0,\r
            \(Self.uri(uuid, "Item", 2)),"",nan,nan,""\r
            \(Self.uri(uuid, "Item", 3)),,1.5,1.5,x\r
            \(Self.uri(uuid, "Item", 4)),,-0.0,,\r

            """, "\(text)")
    }

    @Test("sql (postgres) refused partway with --output: the partial file is removed and the message says so (before: it stayed, without COMMIT;)")
    func postgresRefusedRemovesOutput() throws {
        let (directory, path, uuid) = try Self.store()
        let script = directory.file("export.sql")
        let result = try strata("export", path, "--format", "sql", "--dialect", "postgres", "--output", script)
        #expect(result.status == 1)
        #expect(result.standardError.contains("strata: \(Self.uri(uuid, "Note", 2)) property body holds a string with a NUL character"), "\(result.standardError)")
        #expect(result.standardError.contains("(the incomplete file \(script) was removed)"), "\(result.standardError)")
        #expect(!FileManager.default.fileExists(atPath: script))
    }

    @Test("csv refused partway: the entity files finished before are removed too, (before: Item.csv stayed, reading as a whole export)")
    func csvFailureRemovesFinishedFiles() throws {
        let (directory, path, _) = try Self.store()
        // Zeta.csv can't be created (a directory is in its place): Item.csv and Note.csv are done by then.
        let given = directory.file("given")
        try FileManager.default.createDirectory(atPath: given + "/Zeta.csv", withIntermediateDirectories: true)
        try Data("mine".utf8).write(to: URL(fileURLWithPath: given + "/notes.txt"))
        let result = try strata("export", path, "--format", "csv", "--output", given)
        #expect(result.status == 1)
        #expect(result.standardError.contains("cannot create \(given)/Zeta.csv"), "\(result.standardError)")
        #expect(result.standardError.contains("; the entity files written before it, Item.csv and Note.csv, were removed"), "\(result.standardError)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: given).sorted() == ["Zeta.csv", "notes.txt"], "only what was there before")
    }

    @Test("migrate with the store's earlier model version: refused, saying the data stays in the later version's terms (before: 'nothing to migrate: the store's data is in this model's terms already')")
    func migrateToEarlierVersion() throws {
        let (dir, store, files) = try MigrateCommandTests.fixture()
        do {
            let log = try EventLog(path: store, model: try MigrateCommandTests.model(2))
            #expect(log.modelVersion == 2)
        }
        let result = try strata("migrate", store, files[0])
        #expect(result.status == 1, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardOutput.contains("model        \(files[0]) is model version 1 (stored already)\n"), "\(result.standardOutput)")
        #expect(!result.standardOutput.contains("nothing to migrate"), "\(result.standardOutput)")
        #expect(
            result.standardOutput.contains(
                "refused: \(files[0]) is model version 1, earlier than model version 2, which the store's data is in: an open with an earlier model migrates nothing back (spec 0004 §4.5)"),
            "\(result.standardOutput)")
        let into = dir.file("kept")
        let keeping = try strata("migrate", store, files[0], "--into", into)
        #expect(keeping.status == 1)
        #expect(!FileManager.default.fileExists(atPath: into), "nothing kept")
        #expect(try EventLog(openingExistingAt: store).modelVersion == 2)
    }

    @Test("query: an object reference that can't name an object says why — p0 or a leading zero, an abstract entity, a temporary URI — (before: 'names no object of this store (its entities: …)' for each)")
    func queryObjectReferenceMessages() throws {
        let directory = try TemporaryDirectory("strata-fidelity-query")
        let path = try JoinCommandTests.store(directory)
        let zero = try strata("query", path, "Player", "--where", #"team == "Team/p0""#)
        #expect(zero.status == 1)
        #expect(zero.standardError.contains(#""Team/p0" names no object: primary keys start at 1 and have no leading zeros (Team/p1, Team/p2, …)"#), "\(zero.standardError)")
        #expect(!zero.standardError.contains("its entities"), "\(zero.standardError)")
        let leading = try strata("query", path, "Player", "--where", #"team == "Team/p07""#)
        #expect(leading.standardError.contains(#""Team/p07" names no object: primary keys start at 1 and have no leading zeros"#), "\(leading.standardError)")
        let temporary = try strata("query", path, "Player", "--where", #"team == "x-strata:///Team/t8C2B8B30-6E2C-4C63-9E2E-4A1B4A8C8E11""#)
        #expect(temporary.status == 1)
        #expect(temporary.standardError.contains("is a temporary object URI: an unsaved object's, which the store doesn't hold"), "\(temporary.standardError)")
        let other = try strata("query", path, "Player", "--where", #"team == "x-strata://00000000-0000-0000-0000-000000000000/Team/p1""#)
        #expect(other.status == 1)
        #expect(other.standardError.contains("is a URI of another store (00000000-0000-0000-0000-000000000000)"), "\(other.standardError)")
        let malformed = try strata("query", path, "Player", "--where", #"team == "x-strata://nonsense""#)
        #expect(malformed.status == 1)
        #expect(malformed.standardError.contains(#""x-strata://nonsense" is not an object URI: write x-strata://STORE-UUID/Entity/pN"#), "\(malformed.standardError)")
        // An entity the model lacks keeps its message (with the entities to choose from).
        let unknown = try strata("query", path, "Player", "--where", #"team == "Coach/p1""#)
        #expect(unknown.standardError.contains(#""Coach/p1" names no object of this store (its entities: Player, Team"#), "\(unknown.standardError)")

        // An abstract entity's objects are its sub-entities'.
        let zoo = directory.file("Zoo.strata")
        let model = try ManagedObjectModel {
            Entity("Animal", abstract: true) {
                Attribute("name", .string)
                Relationship("keeper", to: "Keeper", inverse: "animals")
            }
            Entity("Cat", parent: "Animal") {}
            Entity("Dog", parent: "Animal") {}
            Entity("Keeper") { Relationship("animals", to: "Animal", inverse: "keeper", toMany: true) }
        }
        _ = try EventLog(path: zoo, model: model)
        let abstract = try strata("query", zoo, "Keeper", "--where", #"ANY animals == "Animal/p1""#)
        #expect(abstract.status == 1)
        #expect(
            abstract.standardError.contains(#""Animal/p1" names no object: Animal is abstract, so its objects are objects of its sub-entities (Cat, Dog); name one of those"#),
            "\(abstract.standardError)")
    }

    @Test("log and replay --object: a key p0 or an Entity/pN without the store's URI says so (before: only the URI form, which x-strata://…/Team/p0 has)")
    func objectOptionMessages() throws {
        let store = try makeLeagueStore()
        for command in ["log", "replay"] {
            let zero = try strata(command, store.path, "--object", store.uri("Team", 0))
            #expect(zero.status == 64)
            #expect(zero.standardError.contains("is not an object URI (x-strata://STORE-UUID/Entity/pN): primary keys start at 1 and have no leading zeros"), "\(command): \(zero.standardError)")
            let short = try strata(command, store.path, "--object", "Team/p1")
            #expect(short.status == 64)
            #expect(short.standardError.contains(": give the object's whole URI, x-strata://STORE-UUID/Team/p1"), "\(command): \(short.standardError)")
        }
    }

    @Test("verify, migrate and doctor with TMPDIR naming a missing directory: exit 1 naming it, and it is not created (before: created and left behind)")
    func missingTemporaryDirectory() throws {
        let (dir, store, files) = try MigrateCommandTests.fixture()
        let missing = dir.file("no-such/tmp")
        for arguments in [["verify", store], ["migrate", store, files[1]], ["doctor"]] {
            let result = try runProcess(BuildProducts.executable("strata"), arguments, environment: ["TMPDIR": missing])
            #expect(result.status == 1, "\(arguments[0]): \(result.standardOutput)\(result.standardError)")
            #expect(result.standardError.contains("the temporary directory \(missing) (TMPDIR) doesn't exist"), "\(arguments[0]): \(result.standardError)")
            #expect(!FileManager.default.fileExists(atPath: dir.file("no-such")), "\(arguments[0]) made TMPDIR")
        }
        // With --into, migrate's copy needs no temporary directory, but verify's scratch does.
        let into = dir.file("copy")
        let result = try runProcess(BuildProducts.executable("strata"), ["migrate", store, files[1], "--into", into], environment: ["TMPDIR": missing])
        #expect(result.status == 1)
        #expect(!FileManager.default.fileExists(atPath: into), "refused before copying")
        #expect(!FileManager.default.fileExists(atPath: dir.file("no-such")))
    }
}
