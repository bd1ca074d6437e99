import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// `strata migrate STORE MODEL_FILE` (spec 0007): a model file's migration tried on a copy —
/// what it changes, or why it is refused — with the store itself untouched.
@Suite("strata migrate")
struct MigrateCommandTests {
    static func model(_ version: Int) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Player") {
                switch version {
                case 1:
                    Attribute("email", .string)
                    Attribute("score", .int64)
                case 2:
                    Attribute("mail", .string).renamed(from: "email")
                    Attribute("score", .int64)
                    Attribute("level", .int16, default: 1).required()
                default:
                    Attribute("email", .string)
                    Attribute("score", .int16)
                }
            }
        }
    }

    /// A store of model 1 with players scoring 5 and 70,000, and model files 1–3 beside it.
    static func fixture() throws -> (TemporaryDirectory, store: String, files: [String]) {
        let dir = try TemporaryDirectory()
        let store = dir.file("store")
        let log = try EventLog(path: store, model: try model(1))
        var draft = TransactionDraft()
        _ = draft.insert("Player", values: ["email": .attribute(.string("a@x")), "score": .attribute(.int64(5))])
        _ = draft.insert("Player", values: ["email": .attribute(.string("b@x")), "score": .attribute(.int64(70_000))])
        _ = try log.commit(draft)
        var files: [String] = []
        for version in 1...3 {
            let file = dir.file("v\(version).json")
            try model(version).jsonData(prettyPrinted: true).write(to: URL(fileURLWithPath: file))
            files.append(file)
        }
        return (dir, store, files)
    }

    @Test("a rename and an added mandatory attribute: the new version, the take-out and the migration per entity, verify clean; the store is unchanged; --into keeps the migrated copy")
    func migrates() throws {
        let (dir, store, files) = try Self.fixture()
        let result = try strata("migrate", store, files[1])
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardOutput == """
            model        \(files[1]) is model version 2 (new; the store has 1)
            migration    #2 in model version 1 (taking out values model version 2 stores under other names, or not at all): 2 updated Player
            migration    #3 in model version 2: 2 updated Player
            verify       no problems in the migrated copy

            """)
        let after = try EventLog(openingExistingAt: store)
        #expect(try after.head == 1 && after.storedModels().count == 1, "the store itself is untouched")

        let kept = dir.file("kept")
        let keeping = try strata("migrate", store, files[1], "--into", kept)
        #expect(keeping.status == 0)
        #expect(keeping.standardOutput.hasSuffix("kept         the migrated copy is at \(kept) (with the store's UUID)\n"))
        let copy = try EventLog(path: kept, model: try Self.model(2))
        #expect(copy.modelVersion == 2 && copy.storeUUID == after.storeUUID)
        #expect(try copy.read { try $0.object(StoredObjectID(entity: "Player", primaryKey: 1)) }?.values["mail"] == .attribute(.string("a@x")))

        // Relative paths, from the store's directory (the copy's parent was "" before).
        let relative = try runProcess(
            BuildProducts.executable("strata"), ["migrate", "store", "v2.json", "--into", "relative-copy"], currentDirectory: dir.url)
        #expect(relative.status == 0, "\(relative.standardOutput)\(relative.standardError)")
        #expect(FileManager.default.fileExists(atPath: dir.file("relative-copy/data.mdb")))

        let occupied = try strata("migrate", store, files[1], "--into", kept)
        #expect(occupied.status == 64 && occupied.standardError.contains("already exists and is not an empty directory"))
    }

    @Test("the store's own model: nothing to migrate; a narrowing that loses a value: refused naming the object and value, exit 1, nothing written; a malformed model file: exit 1 naming it")
    func refusalsAndNothing() throws {
        let (dir, store, files) = try Self.fixture()
        let same = try strata("migrate", store, files[0])
        #expect(same.status == 0)
        #expect(same.standardOutput.contains("is model version 1 (stored already)\nmigration    nothing to migrate"), "\(same.standardOutput)")

        // Refused with --into: nothing is kept there — a new DIR (and the directory above it
        // the command made) goes, one given empty stays empty.
        let intoNew = dir.file("made/kept")
        let refusedInto = try strata("migrate", store, files[2], "--into", intoNew)
        #expect(refusedInto.status == 1)
        #expect(refusedInto.standardOutput.hasSuffix("(nothing was written to \(store); nothing was kept at \(intoNew))\n"), "\(refusedInto.standardOutput)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("made")), "the directories the command made are gone")
        let intoEmpty = dir.file("empty")
        try FileManager.default.createDirectory(atPath: intoEmpty, withIntermediateDirectories: false)
        #expect(try strata("migrate", store, files[2], "--into", intoEmpty).status == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: intoEmpty).isEmpty, "a directory given empty is left empty")

        let narrowing = try strata("migrate", store, files[2])
        #expect(narrowing.status == 1)
        #expect(narrowing.standardOutput.hasPrefix("refused: the store can't be migrated to \(files[2]): "), "\(narrowing.standardOutput)")
        #expect(narrowing.standardOutput.contains("Player/p2 has Player.score = 70000 (int64), which doesn't convert to int16 without loss"))
        #expect(try EventLog(openingExistingAt: store).storedModels().count == 1)

        let broken = dir.file("broken.json")
        try Data("{\"entities\": [".utf8).write(to: URL(fileURLWithPath: broken))
        let malformed = try strata("migrate", store, broken)
        #expect(malformed.status == 1)
        #expect(malformed.standardError.hasPrefix("strata: \(broken): "), "\(malformed.standardError)")
        #expect(malformed.standardError.contains("JSON syntax error"))
    }
}

extension MigrateCommandTests {
    @Test("a uniqueness constraint the store's objects break is a refused migration: the 'refused' line naming the objects and value, '(nothing was written …)', exit 1; --into inside the store is refused, changing nothing")
    func uniquenessRefusedAndIntoInsideStore() throws {
        let (dir, store, _) = try Self.fixture()
        var draft = TransactionDraft()
        _ = draft.insert("Player", values: ["email": .attribute(.string("a@x")), "score": .attribute(.int64(9))])
        _ = try EventLog(path: store, model: try Self.model(1)).commit(draft)
        let unique = try ManagedObjectModel {
            Entity("Player") {
                Attribute("email", .string)
                Attribute("score", .int64)
                Unique("email")
            }
        }
        let file = dir.file("unique.json")
        try unique.jsonData(prettyPrinted: true).write(to: URL(fileURLWithPath: file))
        let refused = try strata("migrate", store, file)
        #expect(refused.status == 1)
        #expect(refused.standardOutput.hasPrefix("refused: the store can't be migrated to \(file): "), "\(refused.standardOutput)\(refused.standardError)")
        #expect(refused.standardOutput.contains("a@x"), "\(refused.standardOutput)")
        #expect(refused.standardOutput.hasSuffix("(nothing was written to \(store))\n"), "\(refused.standardOutput)")
        #expect(try EventLog(openingExistingAt: store).storedModels().count == 1)

        let before = try FileManager.default.contentsOfDirectory(atPath: store).sorted()
        let inside = try strata("migrate", store, dir.file("v2.json"), "--into", store + "/copy")
        #expect(inside.status == 1)
        #expect(inside.standardError.contains("is inside the store at"), "\(inside.standardError)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: store).sorted() == before)
    }
}
