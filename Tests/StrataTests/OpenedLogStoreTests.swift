import Foundation
import Strata
import StrataTestSupport
import Testing

/// `PersistentStoreCoordinator.addPersistentStore(openedLog:)`: a coordinator on a store the
/// caller opened already, read-only with its stored model (what `strata query` does).
@Suite("A coordinator on an opened read-only log")
struct OpenedLogStoreTests {
    /// A store with three teams saved through a context; returns the store's path.
    func makeStore(_ directory: TemporaryDirectory) throws -> String {
        let coordinator = try openCoordinator(directory, model: try SeedModels.leagueManager)
        let context = privateContext(coordinator, author: "coach")
        try context.performAndWait { context in
            for name in ["Otters", "Herons", "Comets"] {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue(name, forKey: "name")
            }
            try context.save()
        }
        return directory.file("store")
    }

    @Test("fetches what the writer saved, with the model stored in the store")
    func fetches() throws {
        let directory = try TemporaryDirectory()
        let path = try makeStore(directory)
        let log = try EventLog(openingExistingAt: path, readOnly: true)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: log.model)
        let store = try coordinator.addPersistentStore(openedLog: log)
        #expect(store.log === log)
        #expect(store.url?.path == path)
        #expect(coordinator.persistentStores == [store])
        let names = try privateContext(coordinator).performAndWait { context in
            try context.fetch(FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "name")]))
                .map { $0.value(forKey: "name") as? String ?? "?" }
        }
        #expect(names == ["Comets", "Herons", "Otters"])
    }

    @Test("a save to the read-only store fails with ContextError.store naming it; nothing is written")
    func saveFails() throws {
        let directory = try TemporaryDirectory()
        let path = try makeStore(directory)
        let log = try EventLog(openingExistingAt: path, readOnly: true)
        let headBefore = try log.head
        let coordinator = PersistentStoreCoordinator(managedObjectModel: log.model)
        try coordinator.addPersistentStore(openedLog: log)
        let thrown = privateContext(coordinator).performAndWait { context -> ContextError? in
            do {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Swifts", forKey: "name")
                try context.save()
                return nil
            } catch let error as ContextError {
                return error
            } catch {
                return .invalidArgument("unexpected \(error)")
            }
        }
        let error = try #require(thrown)
        guard case .store(let message, _) = error else {
            Issue.record("expected ContextError.store, got \(error)")
            return
        }
        #expect(message.contains("read-only"), "\(message)")
        #expect(message.contains(path), "\(message)")
        #expect(try log.head == headBefore)
        #expect(try EventLog(openingExistingAt: path, readOnly: true).head == headBefore)
    }

    @Test("refused: a log opened with another model, and a second store")
    func refusals() throws {
        let directory = try TemporaryDirectory()
        let path = try makeStore(directory)
        let log = try EventLog(openingExistingAt: path, readOnly: true)

        let other = PersistentStoreCoordinator(managedObjectModel: try SeedModels.run)
        #expect(throws: ContextError.self) { try other.addPersistentStore(openedLog: log) }
        #expect(other.persistentStores.isEmpty)

        let coordinator = PersistentStoreCoordinator(managedObjectModel: log.model)
        try coordinator.addPersistentStore(openedLog: log)
        #expect {
            try coordinator.addPersistentStore(openedLog: log)
        } throws: { error in
            if case ContextError.storeAlreadyAdded = error { true } else { false }
        }
    }
}
