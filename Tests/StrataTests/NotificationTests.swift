import Foundation
import Strata
import StrataTestSupport
import Synchronization
import Testing

/// Records `NotificationCenter` notifications of one name posted by one context.
final class CenterRecorder {
    private final class Box: Sendable {
        let received = Mutex<[[String: any Sendable]]>([])
    }
    private let box = Box()
    private var token: (any NSObjectProtocol)?

    init(_ name: Notification.Name, from context: ManagedObjectContext) {
        let box = self.box
        token = NotificationCenter.default.addObserver(forName: name, object: context, queue: nil) { note in
            var info: [String: any Sendable] = [:]
            for (key, value) in note.userInfo ?? [:] {
                guard let key = key as? String else { continue }
                switch value {
                case let ids as Set<ManagedObjectID>: info[key] = ids
                case let flag as Bool: info[key] = flag
                case let sequence as UInt64: info[key] = sequence
                case let save as ContextDidSave: info[key] = save
                default: info[key] = "\(value)"
                }
            }
            box.received.withLock { $0.append(info) }
        }
    }

    var count: Int { box.received.withLock { $0.count } }

    /// The ID set under `key` in notification `index`.
    func ids(_ index: Int, _ key: ManagedObjectContext.NotificationKey) -> Set<ManagedObjectID> {
        box.received.withLock { $0[index][key.rawValue] as? Set<ManagedObjectID> ?? [] }
    }

    func value(_ index: Int, _ key: ManagedObjectContext.NotificationKey) -> (any Sendable)? {
        box.received.withLock { $0[index][key.rawValue] }
    }

    deinit {
        if let token { NotificationCenter.default.removeObserver(token) }
    }
}

@Suite("Contexts: notifications", .serialized)
struct NotificationTests {
    @Test("objects-did-change is posted at the end of a perform block with the inserted, updated and deleted IDs")
    func objectsDidChangeAtEndOfBlock() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let context = privateContext(coordinator)
        var changes = context.notifications(.objectsDidChange).makeAsyncIterator()
        let center = CenterRecorder(ManagedObjectContext.didChangeObjectsNotification, from: context)
        let (playerID, otherTeamID) = try await context.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ng", forKey: "lastName")
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            let other = try context.insertNewObject(forEntityName: "Team")
            try context.save()
            return (player.objectID, other.objectID)
        }
        // The save posted the block's changes first (temporary IDs), before will-save.
        let first = try #require(await changes.next())
        #expect(first.inserted.count == 2)
        #expect(first.inserted.allSatisfy { $0.isTemporaryID })
        #expect(first.updated == [teamID])
        #expect(center.count == 1)
        #expect(center.ids(0, .updatedObjects) == [teamID])

        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: otherTeamID))
            try context.existingObject(with: playerID).setValue("Ito", forKey: "lastName")
        }
        let second = try #require(await changes.next())
        #expect(second.deleted == [otherTeamID])
        #expect(second.updated == [playerID])
        #expect(second.inserted.isEmpty)
        #expect(center.count == 2)
        #expect(center.ids(1, .deletedObjects) == [otherTeamID])
    }

    @Test("an object inserted and deleted in one event is not reported; processPendingChanges posts at once")
    func insertThenDeleteIsNothing() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let context = privateContext(coordinator)
        var changes = context.notifications(.objectsDidChange).makeAsyncIterator()
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let ghost = try context.insertNewObject(forEntityName: "Team")
            context.delete(ghost)
            try context.existingObject(with: teamID).setValue("Comets", forKey: "name")
            context.processPendingChanges()
            try context.existingObject(with: teamID).setValue("red", forKey: "uniformColor")
        }
        let first = try #require(await changes.next())
        #expect(first.inserted.isEmpty && first.deleted.isEmpty)
        #expect(first.updated == [teamID])
        let second = try #require(await changes.next())
        #expect(second.updated == [teamID], "the rest of the block is its own notification")
    }

    @Test("will-save and did-save: order, permanent IDs, the committed sequence")
    func saveNotifications() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let context = privateContext(coordinator, name: "editor", author: "alice")
        var all = context.notifications(.all).makeAsyncIterator()
        let saves = CenterRecorder(ManagedObjectContext.didSaveObjectsNotification, from: context)
        let willSaves = CenterRecorder(ManagedObjectContext.willSaveObjectsNotification, from: context)
        let playerID = try await context.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
            return player.objectID
        }
        guard case .objectsDidChange = try #require(await all.next()) else { Issue.record("first: objects-did-change"); return }
        guard case .willSave(let will) = try #require(await all.next()) else { Issue.record("then: will-save"); return }
        #expect(will.contextName == "editor")
        guard case .didSave(let save) = try #require(await all.next()) else { Issue.record("then: did-save"); return }
        #expect(save.inserted == [playerID])
        #expect(playerID.isTemporaryID == false)
        #expect(save.updated == [teamID], "the team's players changed too")
        #expect(save.deleted.isEmpty)
        #expect(save.sequence == 2)
        #expect(save.contextName == "editor" && save.transactionAuthor == "alice")
        #expect(willSaves.count == 1)
        #expect(saves.count == 1)
        #expect(saves.ids(0, .insertedObjects) == [playerID])
        #expect(saves.value(0, .sequence) as? UInt64 == 2)
        #expect(saves.value(0, .contextDidSave) as? ContextDidSave == save)
    }

    @Test("refresh posts refreshed; rollback posts refreshed and invalidated; reset posts invalidated-all")
    func refreshRollbackReset() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let context = privateContext(coordinator)
        var changes = context.notifications(.objectsDidChange).makeAsyncIterator()
        let center = CenterRecorder(ManagedObjectContext.didChangeObjectsNotification, from: context)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.refresh(try context.existingObject(with: teamID), mergeChanges: false)
        }
        #expect(try #require(await changes.next()).refreshed == [teamID])
        let insertedID = try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Comets", forKey: "name")
            let inserted = try context.insertNewObject(forEntityName: "Team")
            context.processPendingChanges()
            context.rollback()
            return inserted.objectID
        }
        let edited = try #require(await changes.next())
        #expect(edited.updated == [teamID] && edited.inserted == [insertedID])
        let rolledBack = try #require(await changes.next())
        #expect(rolledBack.refreshed == [teamID])
        #expect(rolledBack.invalidated == [insertedID])
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.reset()
        }
        let reset = try #require(await changes.next())
        #expect(reset.invalidatedAll)
        #expect(center.count == 4)
        #expect(center.value(3, .invalidatedAllObjects) as? Bool == true)
    }

    @Test("an unsaved insert changed after its insert was posted is updated (as in Core Data); before, its changes are part of the insert; rollback and undo/redo start over")
    func unsavedInsertChangedLater() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let (posted, ids) = try await privateContext(coordinator).perform {
            (context: isolated ManagedObjectContext) throws -> ([ObjectsDidChange], [ManagedObjectID]) in
            var posted: [ObjectsDidChange] = []
            let token = context.addObserver { change in
                if case .objectsDidChange(let value) = change.notification { posted.append(value) }
            }
            defer { context.removeObserver(token) }
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")  // part of the insert
            context.processPendingChanges()  // 0: inserted
            team.setValue("Hawks", forKey: "name")  // the insert was posted: an update
            context.processPendingChanges()  // 1: updated
            let gone = try context.insertNewObject(forEntityName: "Team")
            context.processPendingChanges()  // 2: inserted
            gone.setValue("Owls", forKey: "name")
            context.delete(gone)  // changed and deleted in one event: deleted only
            context.processPendingChanges()  // 3: deleted
            let undone = try context.insertNewObject(forEntityName: "Team")
            context.processPendingChanges()  // 4: inserted
            try context.undo()  // the insert goes: invalidated
            try context.redo()  // and comes back, its insert pending again
            undone.setValue("Terns", forKey: "name")
            context.processPendingChanges()
            context.rollback()  // every unsaved insert is discarded
            let fresh = try context.insertNewObject(forEntityName: "Team")
            fresh.setValue("Rooks", forKey: "name")
            context.processPendingChanges()
            return (posted, [team.objectID, gone.objectID, undone.objectID, fresh.objectID])
        }
        let lines = posted.map { "\($0)" }.joined(separator: "\n")
        try #require(posted.count >= 6, "\(lines)")
        #expect(posted[0].inserted == [ids[0]] && posted[0].updated.isEmpty, "\(lines)")
        #expect(posted[1].updated == [ids[0]] && posted[1].inserted.isEmpty, "\(lines)")
        #expect(posted[2].inserted == [ids[1]], "\(lines)")
        #expect(posted[3].deleted == [ids[1]] && posted[3].updated.isEmpty, "\(lines)")
        #expect(posted[4].inserted == [ids[2]], "\(lines)")
        // After undo and redo, the object is back as an insert and its set is part of it.
        let back = try #require(posted.dropFirst(5).first { $0.inserted.contains(ids[2]) }, "\(lines)")
        #expect(!back.updated.contains(ids[2]), "\(lines)")
        #expect(posted.contains { $0.invalidated.contains(ids[0]) && $0.invalidated.contains(ids[2]) }, "rollback: \(lines)")
        let last = try #require(posted.last)
        #expect(last.inserted == [ids[3]] && last.updated.isEmpty, "after rollback a new insert starts over: \(lines)")
    }

    @Test("a synchronous observer inside the context gets the objects themselves")
    func observerGetsObjects() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let context = privateContext(coordinator)
        let seen = try await context.perform { (context: isolated ManagedObjectContext) throws -> [String] in
            var names: [String] = []
            let token = context.addObserver { change in
                if case .didSave = change.notification {
                    names += change.insertedObjects.compactMap { $0.value(forKey: "name") as? String }
                    names += change.deletedObjects.map { "deleted \($0.isDeleted)" }
                }
            }
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            context.delete(try context.existingObject(with: teamID))
            try context.save()
            context.removeObserver(token)
            let later = try context.insertNewObject(forEntityName: "Team")
            later.setValue("Unseen", forKey: "name")
            try context.save()
            return names
        }
        #expect(seen.sorted() == ["Kites", "deleted false"])
    }
}
