import Foundation
import Strata
import StrataTestSupport
import Testing

/// A fault whose object another context deleted (Core Data's `shouldDeleteInaccessibleFaults`).
@Suite("Contexts: faults the store no longer holds")
struct InaccessibleFaultTests {
    /// A league store with a team; `reader` holds the team as a fault, then another context
    /// deletes it and saves.
    static func deletedUnderFault(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, ManagedObjectContext, ManagedObjectID) {
        let (coordinator, teamID) = try await leagueStore(dir)
        let reader = privateContext(coordinator)
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            // A fault of it, made before the delete.
            _ = try context.object(with: teamID)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
        }
        return (coordinator, reader, teamID)
    }

    @Test("on (the default): a read marks it deleted and empty; an unrelated save succeeds; existingObject and fulfillFault still throw 133000; a refresh makes it a fault again; saving a change to it is refused")
    func deletesByDefault() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, reader, teamID) = try await Self.deletedUnderFault(dir)
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            let deletesInaccessible = context.shouldDeleteInaccessibleFaults
            #expect(deletesInaccessible)
            let team = try context.object(with: teamID)
            #expect(team.isFault && !team.isDeleted)
            #expect(team.value(forKey: "name") == nil)
            #expect(team.isDeleted, "marked deleted")
            #expect(!team.isFault)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true)
            #expect(!context.deletedObjects.contains(team), "not a pending delete: nothing to save for it")
            let hasChanges = context.hasChanges
            #expect(!hasChanges)
            // An unrelated save isn't affected.
            let other = try context.insertNewObject(forEntityName: "Team")
            other.setValue("Herons", forKey: "name")
            try context.save()
            #expect(throws: ContextError.objectNotFound(teamID.description)) { try team.fulfillFault() }
            #expect(throws: ContextError.objectNotFound(teamID.description)) { _ = try context.existingObject(with: teamID) }
            #expect(try context.existingObjects(with: [teamID, other.objectID]).map { $0?.objectID } == [nil, other.objectID])
            // A refresh turns it back into a fault (still gone: the next read empties it again).
            context.refresh(team, mergeChanges: false)
            #expect(team.isFault && !team.isDeleted)
            #expect(team.value(forKey: "uniformColor") == nil)
            #expect(team.isDeleted)
            // A change saved to it is refused by the store, naming it; nothing is written.
            team.setValue("Ghosts", forKey: "name")
            let error = #expect(throws: ContextError.self) { try context.save() }
            #expect(error?.description.contains(teamID.uriRepresentation().lastPathComponent) == true, "\(String(describing: error))")
            context.rollback()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let names = try context.fetch(FetchRequest(entityName: "Team")).compactMap { $0.value(forKey: "name") as? String }
            #expect(names == ["Herons"])
        }
    }

    @Test("off: a read gives nil and records objectNotFound (133000), which the next save throws before writing; the save after succeeds")
    func recordsWhenOff() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, reader, teamID) = try await Self.deletedUnderFault(dir)
        let head = try coordinator.persistentStores[0].log.head
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            context.shouldDeleteInaccessibleFaults = false
            let team = try context.object(with: teamID)
            #expect(team.value(forKey: "name") == nil)
            #expect(!team.isDeleted)
            #expect(team.isFault, "stays a fault")
            let other = try context.insertNewObject(forEntityName: "Team")
            other.setValue("Herons", forKey: "name")
            let error = #expect(throws: ContextError.self) { try context.save() }
            #expect(error == .objectNotFound(teamID.description))
            #expect(error?.code == 133000)
            #expect(try coordinator.persistentStores[0].log.head == head, "nothing written")
            try context.save()
            #expect(try coordinator.persistentStores[0].log.head == head + 1)
        }
    }
}
