import Foundation
import Strata
import StrataTestSupport
import Testing

/// Named indexes through the real `strata` binary: the store's model file keeps them (so
/// tools without app code plan with them), `strata model` lists them, and `strata query`
/// reads them — `--explain` names the index and the fixed values.
@Suite("strata with named indexes")
struct CompoundIndexCommandTests {
    /// Players in three clubs with scores; index `byClubScore` over (club, score descending).
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Player") {
                Attribute("name", .string)
                Attribute("club", .string)
                Attribute("score", .int32)
                FetchIndex("byClubScore", elements: [.init(propertyName: "club"), .init(propertyName: "score", isAscending: false)])
            }
        }
    }

    static let clubs = ["Reds", "Blues", "Greens"]

    /// A store of 120 players: player n in club n % 3, score n % 40, name "p<n>".
    static func store(_ directory: TemporaryDirectory) throws -> String {
        let path = directory.file("Clubs.strata")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model())
        try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: path))
        try ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator).performAndWait { context in
            for n in 1...120 {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("p\(n)", forKey: "name")
                player.setValue(clubs[n % 3], forKey: "club")
                player.setValue(Int32(n % 40), forKey: "score")
            }
            try context.save()
        }
        return path
    }

    @Test("strata model lists the index; --json keeps it in the model file")
    func modelListsIndex() throws {
        let directory = try TemporaryDirectory("strata-fetch-index")
        let path = try Self.store(directory)
        let text = try strata("model", path)
        #expect(text.status == 0, "\(text.standardError)")
        #expect(text.standardOutput.contains("  index         byClubScore (club, score descending)\n"), "\(text.standardOutput)")
        let json = try strata("model", path, "--json")
        #expect(json.status == 0)
        let parsed = try ManagedObjectModel(jsonData: Data(json.standardOutput.utf8))
        #expect(parsed.entity(named: "Player")?.indexes == (try Self.model()).entity(named: "Player")?.indexes)
    }

    @Test("strata query reads the compound index: --explain names it and the fixed value; the objects are the filter's, in sort order")
    func queryUsesIndex() throws {
        let directory = try TemporaryDirectory("strata-fetch-index")
        let path = try Self.store(directory)
        let explained = try strata("query", path, "Player", "--where", "club == 'Blues' AND score >= 30", "--explain")
        #expect(explained.status == 0, "\(explained.standardError)")
        #expect(explained.standardOutput == #"index scan Player[byClubScore] club = "Blues", score [30, +∞)"# + "\n")
        let found = try queryObjects(path, "Player", "--where", "club == 'Blues' AND score >= 30", "--sort", "name")
        let want = (1...120).filter { $0 % 3 == 1 && $0 % 40 >= 30 }.map { "p\($0)" }.sorted()
        #expect(names(found) == want)
        #expect(!want.isEmpty)

        let walked = try strata("query", path, "Player", "--where", "club == 'Reds'", "--sort", "score:desc", "--sort", "name", "--limit", "2", "--explain")
        #expect(walked.standardOutput == #"index order Player[byClubScore] club = "Reds" by score descending, stops after 2; sorted by name"# + "\n")
        let top = try queryObjects(path, "Player", "--where", "club == 'Reds'", "--sort", "score:desc", "--sort", "name", "--limit", "2")
        let reds = (1...120).filter { $0 % 3 == 0 }.sorted { ($0 % 40, "p\($1)") > ($1 % 40, "p\($0)") }.prefix(2).map { "p\($0)" }
        #expect(names(top) == Array(reds))
    }
}
