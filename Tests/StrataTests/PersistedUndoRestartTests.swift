import Foundation
import StrataLog
import StrataTestSupport
import Testing

@testable import Strata

/// Persisted undo across a restart (spec 0006 §13, §25), undo conflicts that block the stack
/// (§12), and what a context that saves often and never merges remembers (§16.3).
@Suite("Contexts: persisted undo after a restart")
struct PersistedUndoRestartTests {
    static let saves = Int(ProcessInfo.processInfo.environment["STRATA_OWN_SEQUENCE_SAVES"] ?? "") ?? 100

    private func token(_ coordinator: PersistentStoreCoordinator, _ sequence: UInt64) throws -> HistoryToken {
        HistoryToken(storeIdentifier: try #require(coordinator.persistentStores.first).identifier, sequence: sequence)
    }

    private static func teamNames(_ context: isolated ManagedObjectContext) throws -> [String] {
        try context.fetch(FetchRequest(entityName: "Team")).compactMap { $0.value(forKey: "name") as? String }.sorted()
    }

    private static func teamValues(_ context: isolated ManagedObjectContext, _ id: ManagedObjectID) throws -> [String?] {
        let team = try context.existingObject(with: id)
        return [team.value(forKey: "name") as? String, team.value(forKey: "uniformColor") as? String]
    }

    @Test("a context that saves often and never merges, while another writer commits between its saves, remembers a bounded number of its own sequences; its merge afterwards sees exactly the other writer's changes")
    func ownSequencesStayBounded() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let importer = privateContext(coordinator, name: "importer", author: "importer")
        let other = privateContext(coordinator, name: "other", author: "bob")
        try await importer.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            _ = try context.existingObject(with: teamID).value(forKey: "name")
        }
        var imported: Set<ManagedObjectID> = []
        for index in 0..<Self.saves {
            imported.insert(
                try await importer.perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
                    let team = try context.insertNewObject(forEntityName: "Team")
                    team.setValue("import \(index)", forKey: "name")
                    try context.save()
                    return team.objectID
                })
            try await other.perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: teamID).setValue("other \(index)", forKey: "name")
                try context.save()
            }
        }
        let head = try #require(coordinator.persistentStores.first).log.head
        let (remembered, merge, name, through) = try await importer.perform {
            (context: isolated ManagedObjectContext) throws -> (Int, ContextDidMerge?, String?, UInt64) in
            let remembered = context.core.ownSequences.count
            var merge: ContextDidMerge?
            let observer = context.addObserver { change in
                if case .didMerge(let value) = change.notification { merge = value }
            }
            let through = try context.mergeStoreChanges()
            context.removeObserver(observer)
            return (remembered, merge, context.registeredObject(for: teamID)?.value(forKey: "name") as? String, through)
        }
        #expect(remembered <= ContextCore.ownSequencesBound, "own sequences remembered: \(remembered) after \(Self.saves) saves")
        #expect(through == head)
        #expect(name == "other \(Self.saves - 1)")
        #expect(merge?.updated == [teamID], "the merge sees the other writer's change and none of the importer's own saves")
        #expect(merge?.inserted.isEmpty == true)
        #expect(merge.map { $0.updated.isDisjoint(with: imported) } == true)
    }
}
