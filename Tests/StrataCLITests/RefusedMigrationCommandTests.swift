import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// An app's refused model-version migration writes nothing (spec 0004 §4.3): `strata info`,
/// `log` and `verify` read the store as before, and `strata migrate` tries the model as a new
/// version. Before session 35 the refused version stayed stored and marked (`models 1, 2
/// (newest 2; in use 1: …)`), with a new opened-at time.
@Suite("strata: a refused migration leaves the store as it was")
struct RefusedMigrationCommandTests {
    @Test("an app's open refused by a uniqueness constraint: info (text and JSON), log and verify print what they printed before; migrate still sees a new version")
    func refusedOpenChangesNothing() throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("store")
        let v1 = try ManagedObjectModel { Entity("Player") { Attribute("name", .string) } }
        let v2 = try ManagedObjectModel {
            Entity("Player") {
                Attribute("name", .string)
                Unique("name")
            }
        }
        func add(_ model: ManagedObjectModel) throws -> PersistentContainer {
            let container = PersistentContainer(name: "Players", managedObjectModel: model, storeURL: url)
            try container.loadPersistentStores()
            return container
        }
        try add(v1).newBackgroundContext().performAndWait { context in
            for _ in 0..<2 { try context.insertNewObject(forEntityName: "Player").setValue("Ann", forKey: "name") }
            try context.save()
        }
        let commands = [["info", url.path], ["info", url.path, "--format", "json"], ["log", url.path], ["verify", url.path]]
        let before = try commands.map { try runProcess(BuildProducts.executable("strata"), $0) }
        #expect(before.allSatisfy { $0.status == 0 }, "\(before.map(\.standardError))")
        #expect(before[0].standardOutput.contains("models       1 (newest 1)\n"), "\(before[0].standardOutput)")

        #expect(throws: PersistentStoreError.self) { _ = try add(v2) }

        let after = try commands.map { try runProcess(BuildProducts.executable("strata"), $0) }
        for (command, (old, new)) in zip(commands, zip(before, after)) {
            #expect(new.status == old.status, "strata \(command[0])")
            #expect(
                try withoutFileSizes(new.standardOutput) == withoutFileSizes(old.standardOutput),
                "strata \(command.joined(separator: " ")) reads the store as before")
        }
        let file = dir.file("v2.json")
        try v2.jsonData(prettyPrinted: true).write(to: URL(fileURLWithPath: file))
        let migrate = try strata("migrate", url.path, file)
        #expect(migrate.status == 1)
        #expect(migrate.standardOutput.contains("refused: the store can't be migrated to \(file)"), "\(migrate.standardOutput)")
        #expect(!migrate.standardOutput.contains("stored already"), "\(migrate.standardOutput)")
        #expect(try withoutFileSizes(strata("info", url.path).standardOutput) == withoutFileSizes(before[0].standardOutput))
    }
}

/// `strata info`'s output without the files' sizes (LMDB's file grows with any write
/// transaction, even one that only takes back what another wrote): its `files` lines, or its
/// JSON's `files` member (the JSON re-serialized with sorted keys).
func withoutFileSizes(_ output: String) throws -> String {
    if output.hasPrefix("{"), var object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any] {
        object["files"] = nil
        return String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }
    var lines: [Substring] = []
    var inFiles = false
    for line in output.split(separator: "\n", omittingEmptySubsequences: false) {
        if line == "files" { inFiles = true; continue }
        if inFiles && line.hasPrefix("  ") { continue }
        inFiles = false
        lines.append(line)
    }
    return lines.joined(separator: "\n")
}
