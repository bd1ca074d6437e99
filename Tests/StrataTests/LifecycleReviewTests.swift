import Foundation
@testable import Strata
import StrataTestSupport
import Testing

// Faulting, object identity and the managed-object lifecycle, as a Core Data developer
// porting an app writes them by heart, run against real stores (spec 0006 §2, §3, §11, §13).

/// A team that writes down every lifecycle hook it hears, in order.
final class LifecycleTeam: ManagedObject {
    var events: [String] = []
    /// What `willSave` sets (`stamp`), guarded as Apple's documentation asks (set once per save).
    var stampsInWillSave = false
    /// Inserted in `willSave(in:)` once: an audit entry for this team's save.
    var insertsAuditInWillSave = false
    /// The audit entry `willSave(in:)` inserted.
    var audit: LifecycleTeam?

    override func awakeFromInsert() { events.append("awakeFromInsert") }
    override func awakeFromFetch() { events.append("awakeFromFetch") }
    override func awake(fromSnapshotEvents events: SnapshotEvents) { self.events.append("awake(\(events.rawValue))") }
    override func willSave(in context: isolated ManagedObjectContext) {
        events.append("willSave")
        if stampsInWillSave, !isDeleted, changedValues()["stamp"] == nil {
            setValue((value(forKey: "stamp") as? Int64 ?? 0) + 1, forKey: "stamp")
        }
        if insertsAuditInWillSave {
            insertsAuditInWillSave = false
            audit = try? context.insertNewObject(forEntityName: "Team") as? LifecycleTeam
            audit?.setValue("audit", forKey: "name")
        }
    }
    override func didSave() { events.append("didSave") }
    override func prepareForDeletion() { events.append("prepareForDeletion") }
    override func willTurnIntoFault() { events.append("willTurnIntoFault") }
    override func didTurnIntoFault() { events.append("didTurnIntoFault") }
    func count(_ event: String) -> Int { events.filter { $0 == event }.count }
}

/// A player that writes down its hooks too (cascade deletes, relationship faults).
final class LifecyclePlayer: ManagedObject {
    var events: [String] = []
    override func awakeFromInsert() { events.append("awakeFromInsert") }
    override func awakeFromFetch() { events.append("awakeFromFetch") }
    override func prepareForDeletion() { events.append("prepareForDeletion") }
    override func willSave() { events.append("willSave") }
    override func didSave() { events.append("didSave") }
    func count(_ event: String) -> Int { events.filter { $0 == event }.count }
}

enum LifecycleModels {
    static var league: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Attribute("stamp", .int64)
                    Attribute("note", .string).transient()
                    Relationship("players", to: "Player", inverse: "team", toMany: true, deleteRule: .cascade)
                }
                Entity("Player") {
                    Attribute("name", .string)
                    Attribute("score", .int32, default: 0).required()
                    Relationship("team", to: "Team", inverse: "players")
                }
            }
        }
    }
}

func lifecycleCoordinator(_ dir: TemporaryDirectory) throws -> PersistentStoreCoordinator {
    try openCoordinator(dir, model: try LifecycleModels.league, classes: [(LifecycleTeam.self, "Team"), (LifecyclePlayer.self, "Player")])
}

/// Saves teams named `names`, each with two players; returns their IDs.
func seedTeams(_ coordinator: PersistentStoreCoordinator, _ names: [String]) async throws -> [ManagedObjectID] {
    try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        var teams: [ManagedObject] = []
        for name in names {
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue(name, forKey: "name")
            for index in 0..<2 {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("\(name)-\(index)", forKey: "name")
                player.setValue(team, forKey: "team")
            }
            teams.append(team)
        }
        try context.save()
        return teams.map(\.objectID)
    }
}

@Suite("Lifecycle review: faults, identity and hooks against real stores")
struct LifecycleReviewTests {
    @Test("fetched and related objects are faults until read; awakeFromFetch runs when the fault fires, not at the fetch; one instance per ID through fetch, traversal, object(with:) and registeredObject(for:)")
    func faultsAndIdentity() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try lifecycleCoordinator(dir)
        let ids = try await seedTeams(coordinator, ["Otters", "Herons"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let teams = try context.fetch(FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "name")]))
            #expect(teams.count == 2 && teams.allSatisfy(\.isFault))
            let otters = try #require(teams.last as? LifecycleTeam)
            #expect(otters.objectID == ids[0])
            #expect(otters.events.isEmpty)
            #expect(otters.value(forKey: "name") as? String == "Otters")
            #expect(!otters.isFault && otters.events == ["awakeFromFetch"])
            #expect(try context.object(with: ids[0]) === otters)
            #expect(context.registeredObject(for: ids[0]) === otters)
            #expect(try context.fetch(FetchRequest(entityName: "Team")).contains { $0 === otters })
            let players = try #require(otters.value(forKey: "players") as? Set<ManagedObject>)
            #expect(players.count == 2)
            for player in players {
                #expect(player.isFault)
                #expect(player.value(forKey: "team") as? ManagedObject === otters)
                #expect((player as? LifecyclePlayer)?.events == ["awakeFromFetch"])
            }
            // A new object keeps its instance through the save that makes its ID permanent.
            let egrets = try context.insertNewObject(forEntityName: "Team")
            egrets.setValue("Egrets", forKey: "name")
            let temporary = egrets.objectID
            try context.save()
            #expect(!egrets.objectID.isTemporaryID)
            #expect(try context.object(with: egrets.objectID) === egrets)
            #expect(context.registeredObject(for: egrets.objectID) === egrets)
            #expect(context.registeredObject(for: temporary) == nil)
            #expect(egrets.committedValues(forKeys: ["name"])["name"] as? String == "Egrets")
        }
    }

    @Test("object(with:) of a deleted object's ID is a fault without I/O; existingObject(with:) and firing it throw 133000")
    func deletedElsewhere() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try lifecycleCoordinator(dir)
        let ids = try await seedTeams(coordinator, ["Otters"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let fault = try context.object(with: ids[0])
            #expect(fault.isFault)
            try privateContext(coordinator).performAndWait { (other: isolated ManagedObjectContext) throws in
                other.delete(try other.existingObject(with: ids[0]))
                try other.save()
            }
            #expect(fault.isFault)
            do {
                try fault.fulfillFault()
                Issue.record("firing a deleted object's fault must throw")
            } catch ContextError.objectNotFound(let what) {
                #expect(what.contains(ids[0].description))
            }
            do {
                _ = try context.existingObject(with: ids[0])
                Issue.record("existingObject(with:) of a deleted object must throw")
            } catch ContextError.objectNotFound {}
        }
    }

    @Test("hooks: prepareForDeletion once per delete (cascade included), willSave for deleted objects, refresh(false) turns into a fault with both fault hooks, undo/redo/rollback wake with their events")
    func hookOrderAndCounts() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try lifecycleCoordinator(dir)
        let ids = try await seedTeams(coordinator, ["Otters", "Herons"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let otters = try #require(try context.existingObject(with: ids[0]) as? LifecycleTeam)
            let herons = try #require(try context.existingObject(with: ids[1]) as? LifecycleTeam)
            herons.setValue("Grey Herons", forKey: "name")
            herons.setValue("note", forKey: "note")
            context.refresh(herons, mergeChanges: false)
            #expect(herons.isFault && !herons.hasChanges)
            #expect(herons.events == ["awakeFromFetch", "willTurnIntoFault", "didTurnIntoFault"])
            #expect(herons.value(forKey: "name") as? String == "Herons")
            #expect(herons.value(forKey: "note") == nil)
            let players = try #require(otters.value(forKey: "players") as? Set<ManagedObject>).compactMap { $0 as? LifecyclePlayer }
            context.delete(otters)
            context.delete(otters)
            #expect(otters.count("prepareForDeletion") == 1)
            #expect(players.count == 2 && players.allSatisfy { $0.isDeleted && $0.count("prepareForDeletion") == 1 })
            try context.save()
            #expect(otters.count("willSave") == 1 && otters.count("didSave") == 1)
            #expect(players.allSatisfy { $0.count("willSave") == 1 && $0.count("didSave") == 1 })
            herons.events.removeAll()
            herons.setValue("Renamed", forKey: "name")
            context.processPendingChanges()
            try context.undo()
            #expect(herons.events == ["awake(\(SnapshotEvents.undoUpdate.rawValue))"])
            try context.redo()
            herons.events.removeAll()
            context.rollback()
            #expect(herons.events == ["awake(\(SnapshotEvents.rollback.rawValue))"])
            #expect(herons.value(forKey: "name") as? String == "Herons" && !herons.hasChanges)
        }
    }

    @Test("changedValuesForCurrentEvent gives the old values since the last processPendingChanges; changedValues the new ones since the save")
    func currentEventValues() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try lifecycleCoordinator(dir)
        let ids = try await seedTeams(coordinator, ["Otters"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: ids[0])
            team.setValue("A", forKey: "name")
            #expect(team.changedValuesForCurrentEvent()["name"] as? String == "Otters")
            context.processPendingChanges()
            #expect(team.changedValuesForCurrentEvent().isEmpty)
            #expect(team.changedValues()["name"] as? String == "A")
            team.setValue("B", forKey: "name")
            #expect(team.changedValuesForCurrentEvent()["name"] as? String == "A")
            #expect(team.committedValues(forKeys: nil)["name"] as? String == "Otters")
        }
    }

    @Test("after reset() an old object has no context, a set on it is refused at the next save, and object(with:) gives a new instance")
    func useAfterReset() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try lifecycleCoordinator(dir)
        let ids = try await seedTeams(coordinator, ["Otters"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let old = try context.existingObject(with: ids[0])
            context.reset()
            #expect(old.managedObjectContext == nil && old.isFault)
            #expect(context.registeredObject(for: ids[0]) == nil)
            #expect(try context.object(with: ids[0]) !== old)
            old.setValue("Lost", forKey: "name")
            do {
                try context.save()
                Issue.record("a set on an object reset() removed must be reported")
            } catch ContextError.invalidObject(let message) {
                #expect(message.contains("removed from its context"))
            }
        }
    }

    @Test("an object a child inserts hears awakeFromInsert once, in the child; the parent's instance isn't awoken again when the child saves")
    func awakeFromInsertOnceThroughChild() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try lifecycleCoordinator(dir)
        let parent = privateContext(coordinator)
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        let id = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(try context.insertNewObject(forEntityName: "Team") as? LifecycleTeam)
            team.setValue("Otters", forKey: "name")
            try context.save()
            #expect(team.count("awakeFromInsert") == 1)
            return team.objectID
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(context.registeredObject(for: id) as? LifecycleTeam)
            #expect(team.isInserted)
            #expect(team.count("awakeFromInsert") == 0)
            try context.save()
            #expect(team.count("awakeFromInsert") == 0 && team.count("willSave") == 1)
        }
    }

    @Test("willSave runs again for an object its own willSave changed (once more, then the change is saved) and for an object a willSave inserted (Core Data's willSave documentation)")
    func willSaveAgainForChangedAndInserted() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try lifecycleCoordinator(dir)
        let ids = try await seedTeams(coordinator, ["Otters"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(try context.existingObject(with: ids[0]) as? LifecycleTeam)
            team.stampsInWillSave = true
            team.insertsAuditInWillSave = true
            team.setValue("Sea Otters", forKey: "name")
            try context.save()
            // The first willSave set the stamp (a change Core Data observes): willSave runs again,
            // finds the stamp set in this save and changes nothing more.
            #expect(team.count("willSave") == 2)
            #expect(team.value(forKey: "stamp") as? Int64 == 1)
            #expect(!team.hasChanges && !context.hasChanges)
            let audits = try context.fetch(try FetchRequest(entityName: "Team", format: "name == 'audit'"))
            #expect(audits.count == 1)
            // The audit entry a willSave inserted had its own willSave before being saved.
            let audit = try #require(team.audit)
            #expect(audits.first === audit)
            #expect(audit.events == ["awakeFromInsert", "willSave", "didSave"])
            #expect(team.events == ["awakeFromFetch", "willSave", "willSave", "didSave"])
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let stored = try context.existingObject(with: ids[0])
            #expect(stored.value(forKey: "stamp") as? Int64 == 1)
            #expect(stored.value(forKey: "name") as? String == "Sea Otters")
        }
    }

    @Test("willSave that dirties its object on every call: the save gives up with a clear error after 100 rounds, writes nothing and keeps the changes")
    func willSaveThatNeverSettles() async throws {
        final class Restless: ManagedObject {
            override func willSave() { setValue((value(forKey: "stamp") as? Int64 ?? 0) + 1, forKey: "stamp") }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try LifecycleModels.league, classes: [(Restless.self, "Team")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            do {
                try context.save()
                Issue.record("a willSave that always dirties its object must not save")
            } catch ContextError.invalidArgument(let message) {
                #expect(message.contains("willSave"))
                #expect(message.contains("100"))
            }
            #expect(team.isInserted)
            var saved = FetchRequest(entityName: "Team")
            saved.includesPendingChanges = false
            #expect(try context.count(for: saved) == 0)
        }
    }

    @Test("primitive sets in willSave (the documented way to avoid the loop) don't run willSave again, and are saved")
    func primitiveSetInWillSaveRunsOnce() async throws {
        final class Stamping: ManagedObject {
            var willSaves = 0
            override func willSave() {
                willSaves += 1
                setPrimitiveValue(Int64(willSaves), forKey: "stamp")
            }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try LifecycleModels.league, classes: [(Stamping.self, "Team")])
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(try context.insertNewObject(forEntityName: "Team") as? Stamping)
            team.setValue("Otters", forKey: "name")
            try context.save()
            #expect(team.willSaves == 1)
            return team.objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: id).value(forKey: "stamp") as? Int64 == 1)
        }
    }

    @Test("didSave runs once for inserted, updated and deleted objects; a deleted one sees isDeleted true (Core Data's didSave: 'applies to deletions as well')")
    func didSaveForDeletedObjects() async throws {
        final class FileBacked: ManagedObject {
            var deletedInDidSave: [Bool] = []
            override func didSave() { deletedInDidSave.append(isDeleted) }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try LifecycleModels.league, classes: [(FileBacked.self, "Team")])
        let ids = try await seedTeams(coordinator, ["Otters", "Herons"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let otters = try #require(try context.existingObject(with: ids[0]) as? FileBacked)
            let herons = try #require(try context.existingObject(with: ids[1]) as? FileBacked)
            let new = try #require(try context.insertNewObject(forEntityName: "Team") as? FileBacked)
            new.setValue("Egrets", forKey: "name")
            herons.setValue("Grey Herons", forKey: "name")
            context.delete(otters)
            try context.save()
            #expect(otters.deletedInDidSave == [true])
            #expect(herons.deletedInDidSave == [false])
            #expect(new.deletedInDidSave == [false])
            // After the save the deleted object has left the context.
            #expect(otters.managedObjectContext == nil)
            #expect(!otters.isDeleted)
            #expect(context.registeredObject(for: ids[0]) == nil)
        }
    }

    @Test("refreshAllObjects and refresh(mergeChanges: true) leave faults as faults: no store read, no awakeFromFetch; loaded objects show the store's values, changed ones keep their changes")
    func refreshLeavesFaultsAlone() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try lifecycleCoordinator(dir)
        let ids = try await seedTeams(coordinator, ["Otters", "Herons", "Egrets"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let teams = try context.fetch(FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "name")]))
            let byName = Dictionary(uniqueKeysWithValues: try ids.map { ($0, try #require(context.registeredObject(for: $0) as? LifecycleTeam)) })
            let (otters, herons, egrets) = (try #require(byName[ids[0]]), try #require(byName[ids[1]]), try #require(byName[ids[2]]))
            #expect(teams.count == 3)
            _ = herons.value(forKey: "name")  // loaded, unchanged
            egrets.setValue("Great Egrets", forKey: "name")  // changed
            #expect(otters.isFault)
            // Another context renames all three.
            try privateContext(coordinator).performAndWait { (other: isolated ManagedObjectContext) throws in
                for id in ids {
                    let team = try other.existingObject(with: id)
                    team.setValue("\(team.value(forKey: "name") as? String ?? "")!", forKey: "name")
                }
                try other.save()
            }
            context.refreshAllObjects()
            #expect(otters.isFault)
            #expect(otters.events.isEmpty)
            #expect(herons.value(forKey: "name") as? String == "Herons!")
            #expect(egrets.value(forKey: "name") as? String == "Great Egrets")
            #expect(otters.value(forKey: "name") as? String == "Otters!")
            #expect(otters.count("awakeFromFetch") == 1)
        }
    }

    @Test("an object inserted and deleted with nothing able to bring it back is not kept by the context: undo off, or both in one undo group, or its redo cleared by a new change")
    func discardedInsertsAreReleased() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try lifecycleCoordinator(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Undo off: nothing can bring it back.
            context.isUndoEnabled = false
            let undoOff = try lifecycleScratch(context) { context.delete($0) }
            context.processPendingChanges()  // the end of the event: the notification lets go too
            #expect(undoOff.object == nil)
            context.isUndoEnabled = true
            // Inserted and deleted in one group: the group nets out to nothing.
            let oneGroup = try lifecycleScratch(context) { context.delete($0) }
            context.processPendingChanges()
            #expect(oneGroup.object == nil)
            // Inserted, undone, and the redo stack cleared by a new change.
            let undone = try lifecycleScratch(context) { _ in
                context.processPendingChanges()
                try context.undo()
            }
            #expect(undone.object != nil)  // redo can bring it back: the same instance
            let other = try context.insertNewObject(forEntityName: "Team")
            other.setValue("kept", forKey: "name")
            context.processPendingChanges()
            let canRedo = context.canRedo
            #expect(!canRedo)
            #expect(undone.object == nil)
            // Still held where undo can bring it back: inserted in one group, deleted in the next.
            let undoable = try lifecycleScratch(context) { object in
                context.processPendingChanges()
                context.delete(object)
                context.processPendingChanges()
            }
            #expect(undoable.object != nil)
            try context.undo()
            #expect(context.insertedObjects.contains { $0 === undoable.object })
            // Only a group `levelsOfUndo` dropped could bring it back: let go.
            context.rollback()
            context.levelsOfUndo = 1
            let trimmed = try lifecycleScratch(context) { object in
                context.processPendingChanges()
                context.delete(object)
                context.processPendingChanges()
            }
            #expect(trimmed.object != nil)  // the delete's group is the one kept
            let another = try context.insertNewObject(forEntityName: "Team")
            another.setValue("another", forKey: "name")
            context.processPendingChanges()
            #expect(trimmed.object == nil)
        }
    }

    @Test("awakeFromFetch: change processing is off around it (Core Data's documentation) — a public setter caching a transient doesn't dirty the object or the context, records no undo and posts no change; firing a fault posts nothing")
    func awakeFromFetchDoesNotDirty() async throws {
        final class Cached: ManagedObject {
            override func awakeFromFetch() {
                super.awakeFromFetch()
                setValue((value(forKey: "name") as? String)?.uppercased(), forKey: "note")
            }
        }
        final class PrimitiveCached: ManagedObject {
            override func awakeFromFetch() {
                super.awakeFromFetch()
                setPrimitiveValue((value(forKey: "name") as? String)?.lowercased(), forKey: "note")
            }
        }
        final class AccessorCached: ManagedObject {
            override func awakeFromFetch() {
                super.awakeFromFetch()
                willChangeValue(forKey: "note")
                setPrimitiveValue((value(forKey: "name") as? String)?.lowercased(), forKey: "note")
                didChangeValue(forKey: "note")
            }
        }
        for type in [Cached.self, PrimitiveCached.self, AccessorCached.self] as [ManagedObject.Type] {
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: try LifecycleModels.league, classes: [(type, "Team")])
            let ids = try await seedTeams(coordinator, ["Otters"])
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                var heard: [Set<ManagedObjectID>] = []
                let token = context.addObserver { change in
                    if case .objectsDidChange(let objects) = change.notification { heard.append(objects.updated.union(objects.refreshed)) }
                }
                defer { context.removeObserver(token) }
                let team = try #require(try context.fetch(FetchRequest(entityName: "Team")).first)
                #expect(team.objectID == ids[0])
                #expect((team.value(forKey: "note") as? String)?.lowercased() == "otters")
                #expect(!team.hasChanges && !team.isUpdated)
                let (dirty, canUndo) = (context.hasChanges, context.canUndo)
                #expect(!dirty && !canUndo)
                context.processPendingChanges()
                #expect(heard.isEmpty)
                let stillClean = !context.hasChanges && !context.canUndo
                #expect(stillClean)
                // The cached transient stays through a refresh that merges (its awakeFromFetch
                // runs again, and the value before the refresh is put back).
                context.refresh(team, mergeChanges: true)
                #expect((team.value(forKey: "note") as? String)?.lowercased() == "otters")
                let afterRefresh = !context.hasChanges && !context.canUndo
                #expect(afterRefresh)
            }
        }
    }

    @Test("setPrimitiveValue with a key the entity lacks (a typo in awakeFromInsert) is reported at the next save, as setValue's is; nothing is set")
    func primitiveUnknownKey() async throws {
        final class Typo: ManagedObject {
            override func awakeFromInsert() { setPrimitiveValue(Int64(7), forKey: "stmap") }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try LifecycleModels.league, classes: [(Typo.self, "Team")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            #expect(team.value(forKey: "stamp") == nil)
            do {
                try context.save()
                Issue.record("a primitive set of an unknown key must be reported")
            } catch let error as ContextError {
                #expect(error == .unknownKey(entity: "Team", key: "stmap"))
            }
            // Reported once; the save after it succeeds.
            try context.save()
            #expect(!team.objectID.isTemporaryID)
        }
    }

    @Test("deleting an object another context already deleted (a fault, or one read as inaccessible) succeeds: the save writes nothing for it instead of failing with storeRefused")
    func deleteWhatIsAlreadyGone() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try lifecycleCoordinator(dir)
        let ids = try await seedTeams(coordinator, ["Otters", "Herons", "Egrets"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Faults without a fetched row: firing one reads the store.
            let read = try context.object(with: ids[0])
            let fault = try context.object(with: ids[1])
            let kept = try context.existingObject(with: ids[2])
            try privateContext(coordinator).performAndWait { (other: isolated ManagedObjectContext) throws in
                other.delete(try other.existingObject(with: ids[0]))
                other.delete(try other.existingObject(with: ids[1]))
                try other.save()
            }
            #expect(read.value(forKey: "name") == nil && read.isDeleted)  // inaccessible
            context.delete(read)
            context.delete(fault)  // never read: a fault of a deleted object
            kept.setValue("Great Egrets", forKey: "name")
            try context.save()
            #expect(read.isDeleted && fault.isDeleted)
            #expect(kept.value(forKey: "name") as? String == "Great Egrets" && !kept.hasChanges)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 1)
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 2)
        }
    }

    @Test("a context without children keeps no temporary-to-permanent ID map of what it saved (an importer saving batches grew it by every object it ever inserted); with a child, the child can still name a saved object by its temporary ID")
    func noIDAliasesWithoutChildren() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try lifecycleCoordinator(dir)
        let importer = privateContext(coordinator)
        try await importer.perform { (context: isolated ManagedObjectContext) throws in
            for batch in 0..<5 {
                for index in 0..<20 {
                    let team = try context.insertNewObject(forEntityName: "Team")
                    team.setValue("\(batch)-\(index)", forKey: "name")
                }
                try context.save()
            }
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 100)
            let kept = context.core.idAliases.count + context.core.idAliasBacklog.reduce(0) { $0 + $1.count }
            #expect(kept == 0)
        }
        // With a child that holds a parent's unsaved object by its temporary ID: the parent
        // saves, and the child's later change to that object still reaches it.
        let parent = privateContext(coordinator)
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        let temporary = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Parent", forKey: "name")
            context.userInfo["team"] = team
            return team.objectID
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.userInfo["team"] = try context.existingObject(with: temporary)
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(context.userInfo["team"] as? ManagedObject)
            team.setValue("Child", forKey: "name")
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(context.userInfo["team"] as? ManagedObject)
            #expect(team.value(forKey: "name") as? String == "Child")
            try context.save()
        }
    }

    @Test("stalenessInterval: by default (-1) a fault a fetch left its row on fires from that row after another context's save; with 0 it reads the store; refresh drops the row; a fault without a row reads the store")
    func stalenessOfFetchedRows() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try lifecycleCoordinator(dir)
        let ids = try await seedTeams(coordinator, ["Otters", "Herons"])
        for interval in [-1.0, 0] {
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                context.stalenessInterval = interval
                let name = interval < 0 ? "Otters" : "Renamed"
                let fetched = try #require(try context.fetch(try FetchRequest(entityName: "Team", format: "name == %@", name)).first)
                let unread = try context.object(with: ids[1])
                #expect(fetched.isFault && unread.isFault)
                try privateContext(coordinator).performAndWait { (other: isolated ManagedObjectContext) throws in
                    for id in ids { try other.existingObject(with: id).setValue(interval < 0 ? "Renamed" : "Renamed again", forKey: "name") }
                    try other.save()
                }
                // -1: the fetch's row, however old; 0: the store, read now.
                #expect(fetched.value(forKey: "name") as? String == (interval < 0 ? "Otters" : "Renamed again"))
                #expect(unread.value(forKey: "name") as? String == (interval < 0 ? "Renamed" : "Renamed again"))  // read now
                context.refresh(fetched, mergeChanges: false)
                #expect(fetched.value(forKey: "name") as? String == (interval < 0 ? "Renamed" : "Renamed again"))
            }
        }
    }

    @Test("awake(fromSnapshotEvents: .rollback) runs once rollback is done: a persistent value its hook sets is a change the context holds and saves; the undo stack stays empty")
    func rollbackAwakeRunsAfterRollback() async throws {
        final class Recomputing: ManagedObject {
            override func awake(fromSnapshotEvents events: SnapshotEvents) {
                super.awake(fromSnapshotEvents: events)
                guard events.contains(.rollback) else { return }
                setValue((value(forKey: "name") as? String)?.uppercased(), forKey: "note")
                if value(forKey: "stamp") == nil { setValue(Int64(42), forKey: "stamp") }
            }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try LifecycleModels.league, classes: [(Recomputing.self, "Team")])
        let ids = try await seedTeams(coordinator, ["Otters"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: ids[0])
            team.setValue("Sea Otters", forKey: "name")
            context.processPendingChanges()
            context.rollback()
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect(team.value(forKey: "note") as? String == "OTTERS")
            // The hook's persistent change is a change like any other: the object is updated,
            // held and saved; neither it nor the transient is recorded for undo.
            #expect(team.isUpdated && context.updatedObjects.contains(team))
            context.processPendingChanges()
            let canUndo = context.canUndo
            #expect(!canUndo)
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: ids[0]).value(forKey: "stamp") as? Int64 == 42)
        }
    }
}

/// Inserts a scratch team into `context`, runs `body` on it and returns a weak reference to it.
func lifecycleScratch(_ context: isolated ManagedObjectContext, _ body: (ManagedObject) throws -> Void) throws -> WeakBox {
    let object = try context.insertNewObject(forEntityName: "Team")
    object.setValue("scratch", forKey: "name")
    try body(object)
    return WeakBox(object)
}

/// A weak reference to an object, to see whether anything still holds it.
final class WeakBox {
    weak var object: ManagedObject?
    init(_ object: ManagedObject) { self.object = object }
}
