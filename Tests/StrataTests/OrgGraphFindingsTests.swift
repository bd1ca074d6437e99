import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

// Findings of a review of the context layer's interactions (session 12): each test failed
// on the code before its fix.

/// Org -(ordered, cascade)-> Dept -(cascade)-> Staff -(cascade, one-to-one)-> Badge; Dept <->
/// Tag many-to-many (nullify).
private func orgModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Org") {
            Attribute("name", .string)
            Relationship("depts", to: "Dept", inverse: "org", toMany: true, ordered: true, deleteRule: .cascade)
        }
        Entity("Dept") {
            Attribute("name", .string)
            Relationship("org", to: "Org", inverse: "depts")
            Relationship("staff", to: "Staff", inverse: "dept", toMany: true, deleteRule: .cascade)
            Relationship("tags", to: "Tag", inverse: "depts", toMany: true)
        }
        Entity("Staff") {
            Attribute("name", .string)
            Relationship("dept", to: "Dept", inverse: "staff")
            Relationship("badge", to: "Badge", inverse: "holder", deleteRule: .cascade)
        }
        Entity("Badge") {
            Attribute("name", .string)
            Relationship("holder", to: "Staff", inverse: "badge")
        }
        Entity("Tag") {
            Attribute("name", .string)
            Relationship("depts", to: "Dept", inverse: "tags", toMany: true)
        }
    }
}

/// Saved: org O with depts d1, d2, d3 (in that order); d1's staff s1 (badge b1) and s2 (badge
/// b2); d2's staff s3; d1 tagged t1 and t2, d2 tagged t1. The IDs by name.
private func orgStore(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, [String: ManagedObjectID]) {
    let coordinator = try openCoordinator(dir, model: try orgModel())
    let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [String: ManagedObjectID] in
        var objects: [String: ManagedObject] = [:]
        let make = { (entity: String, name: String) throws -> ManagedObject in
            let object = try context.insertNewObject(forEntityName: entity)
            object.setValue(name, forKey: "name")
            objects[name] = object
            return object
        }
        let org = try make("Org", "O")
        let depts = try ["d1", "d2", "d3"].map { try make("Dept", $0) }
        org.setValue(depts, forKey: "depts")
        for (staff, dept, badge) in [("s1", 0, "b1"), ("s2", 0, "b2"), ("s3", 1, nil)] {
            let member = try make("Staff", staff)
            member.setValue(depts[dept], forKey: "dept")
            if let badge { member.setValue(try make("Badge", badge), forKey: "badge") }
        }
        let t1 = try make("Tag", "t1"), t2 = try make("Tag", "t2")
        depts[0].setValue(Set([t1, t2]), forKey: "tags")
        depts[1].setValue(Set([t1]), forKey: "tags")
        try context.save()
        return objects.mapValues(\.objectID)
    }
    return (coordinator, ids)
}

private func name(_ object: Any?) -> String? { (object as? ManagedObject)?.value(forKey: "name") as? String }
private func names(_ object: ManagedObject, _ key: String) -> [String] {
    if let list = object.value(forKey: key) as? [ManagedObject] { return list.compactMap(name) }
    return ((object.value(forKey: key) as? Set<ManagedObject>) ?? []).compactMap(name).sorted()
}

/// The whole graph as text, one line per object, for comparing states.
private func graph(_ context: isolated ManagedObjectContext, _ ids: [String: ManagedObjectID]) -> [String] {
    ids.keys.sorted().map { key in
        guard let id = ids[key] else { return "\(key): ?" }
        let object: ManagedObject
        do { object = try context.existingObject(with: id) } catch { return "\(key): gone" }
        if object.isDeleted { return "\(key): deleted" }
        switch id.entityName {
        case "Org": return "\(key): depts=\(names(object, "depts"))"
        case "Dept": return "\(key): org=\(name(object.value(forKey: "org")) ?? "-") staff=\(names(object, "staff")) tags=\(names(object, "tags"))"
        case "Staff": return "\(key): dept=\(name(object.value(forKey: "dept")) ?? "-") badge=\(name(object.value(forKey: "badge")) ?? "-")"
        case "Badge": return "\(key): holder=\(name(object.value(forKey: "holder")) ?? "-")"
        default: return "\(key): depts=\(names(object, "depts"))"
        }
    }
}

@Suite("Context review findings: persisted undo, ordered sets, refresh, nested fetch, deleted inserts")
struct OrgGraphFindingsTests {
    @Test("persisted undo after a restart: undo of a saved cascade delete re-creates the team and its player, and the save writes them (was 133000: the team stayed a fault)")
    func persistedUndoOfSavedCascade() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator, name: "ed", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ng", forKey: "lastName")
            player.setValue(team, forKey: "team")
            try context.save()
            context.delete(team)  // its players go too (cascade)
            try context.save()
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(restarted, name: "ed", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            let registered = context.registeredObject(for: teamID)
            let team = try #require(registered)
            #expect(team.isInserted)
            #expect(!team.isFault)
            #expect(context.insertedObjects.count == 2)
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 1)
        }
    }

    @Test("persisted undo after a restart: a three-level cascade and an ordered move, both undone, give back the whole graph, in memory and after reopening")
    func persistedUndoOfDeepCascade() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await orgStore(dir)
        let before = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in graph(context, ids) }
        try await privateContext(coordinator, name: "ed", author: "me", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            let org = try context.existingObject(with: try #require(ids["O"]))
            org.setValue([try context.existingObject(with: try #require(ids["d3"])), try context.existingObject(with: try #require(ids["d2"]))], forKey: "depts")
            try context.save()
            context.delete(try context.existingObject(with: try #require(ids["d1"])))  // and s1, s2, b1, b2
            try context.save()
        }
        let restarted = try openCoordinator(dir, model: try orgModel())
        try await privateContext(restarted, name: "ed", author: "me", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            try context.undo()
            #expect(graph(context, ids) == before)
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: try orgModel())
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            #expect(graph(context, ids) == before)
        }
    }

    @Test("persisted redo after a restart of an insert whose player came before its team brings both back and saves them")
    func persistedRedoOfInsert() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let teamID = try await privateContext(coordinator, name: "ed", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            player.setValue(team, forKey: "team")
            try context.save()
            try context.undo()
            try context.save()
            return team.objectID
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(restarted, name: "ed", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            try context.redo()
            #expect(context.insertedObjects.count == 2)
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Kites")
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 1)
        }
    }

    @Test("a fault the app made of a deleted object before the undo is the object the undo brings back")
    func faultOfDeletedObjectComesBack() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator, name: "ed", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: teamID))
            try context.save()
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(restarted, name: "ed", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            let held = try context.object(with: teamID)  // a fault; the store has no such object
            try context.undo()
            #expect(held.isInserted)
            #expect(held.value(forKey: "name") as? String == "Otters")
            #expect(context.registeredObject(for: teamID) === held)
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
        }
    }

    @Test("an ordered to-many holds an object once, where it first appears: in memory, after saving and reopening, and when the repeated member leaves")
    func orderedToManyIsAnOrderedSet() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await orgStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let org = try context.existingObject(with: try #require(ids["O"]))
            let d1 = try context.existingObject(with: try #require(ids["d1"]))
            let d2 = try context.existingObject(with: try #require(ids["d2"]))
            org.setValue([d2, d1, d2], forKey: "depts")
            #expect(names(org, "depts") == ["d2", "d1"])
            // Adding a member already there changes nothing, as NSMutableOrderedSet does.
            org.setValue([d2, d1, d1], forKey: "depts")
            #expect(names(org, "depts") == ["d2", "d1"])
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: try orgModel())
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            let org = try context.existingObject(with: try #require(ids["O"]))
            #expect(names(org, "depts") == ["d2", "d1"])
            let d2 = try context.existingObject(with: try #require(ids["d2"]))
            d2.setValue(nil, forKey: "org")
            #expect(names(org, "depts") == ["d1"])
            try context.save()
        }
        let again = try openCoordinator(dir, model: try orgModel())
        try await privateContext(again).perform { (context: isolated ManagedObjectContext) throws in
            #expect(names(try context.existingObject(with: try #require(ids["O"])), "depts") == ["d1"])
            #expect(try context.existingObject(with: try #require(ids["d2"])).value(forKey: "org") == nil)
        }
    }

    @Test("the event log keeps an ordered list's object once, where it first appears")
    func logDropsRepeatsInOrderedLists() throws {
        let dir = try TemporaryDirectory()
        let log = try EventLog(path: dir.url.appendingPathComponent("log").path, model: try orgModel())
        var draft = TransactionDraft()
        let org = draft.insert("Org", values: ["name": .attribute(.string("O"))])
        let d1 = draft.insert("Dept", values: ["name": .attribute(.string("d1"))])
        let d2 = draft.insert("Dept", values: ["name": .attribute(.string("d2"))])
        draft.update(org, values: ["depts": .references([d2, d1, d2])])
        let result = try log.commit(draft)
        let orgID = try #require(result.permanentID(for: org))
        let expected = try [d2, d1].map { try #require(result.permanentID(for: $0)) }
        try log.read { (reader: borrowing LogReader) throws in
            #expect(try reader.object(orgID)?["depts"] == .references(expected))
        }
        #expect(try log.verify().isClean)
    }

    @Test("refresh(mergeChanges: false) of an object with an unsaved undo of saved work discards that undo: the save writes nothing for it")
    func refreshDiscardsPendingUndo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await orgStore(dir)
        let s1ID = try #require(ids["s1"])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let s1 = try context.existingObject(with: s1ID)
            s1.setValue("X", forKey: "name")
            try context.save()
            try context.undo()
            #expect(s1.value(forKey: "name") as? String == "s1")
            context.refresh(s1, mergeChanges: false)
            #expect(s1.value(forKey: "name") as? String == "X")
            let hasChanges = context.hasChanges
            #expect(!hasChanges)
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: s1ID).value(forKey: "name") as? String == "X")
        }
    }

    @Test("a child context's fetch with includesPendingChanges = false still sees the parent's unsaved objects: the parent is its store")
    func childFetchWithoutPendingChangesSeesParent() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await orgStore(dir)
        let parent = privateContext(coordinator)
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Tag").setValue("t9", forKey: "name")
        }
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let own = try context.insertNewObject(forEntityName: "Tag")
            own.setValue("t0", forKey: "name")
            var request = FetchRequest(entityName: "Tag", sortDescriptors: [FetchSortDescriptor(key: "name")])
            #expect(try context.fetch(request).compactMap(name) == ["t0", "t1", "t2", "t9"])
            request.includesPendingChanges = false
            // The child's own insert is left out; the parent's is not.
            #expect(try context.fetch(request).compactMap(name) == ["t1", "t2", "t9"])
        }
    }

    @Test("an object inserted and deleted before any save is neither inserted nor deleted, and has no context")
    func insertedThenDeletedIsNotDeleted() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await orgStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let gone = try context.insertNewObject(forEntityName: "Tag")
            context.processPendingChanges()  // the insert and the delete in two undo groups
            context.delete(gone)
            #expect(!gone.isDeleted)
            #expect(!gone.isInserted)
            #expect(gone.managedObjectContext == nil)
            #expect(context.deletedObjects.isEmpty)
            // Undoing the delete brings the same instance back, inserted.
            try context.undo()
            #expect(gone.isInserted)
            #expect(!gone.isDeleted)
            #expect(gone.managedObjectContext === context)
        }
    }
    @Test("validation failures name their objects: two runs of one entity failing the same rule are told apart by URI, saved and unsaved")
    func validationFailuresNameTheirObjects() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.run)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let saved = try context.insertNewObject(forEntityName: "Run")
            saved.setValue(Int32(5), forKey: "processID")
            saved.setValue(Date(), forKey: "date")
            try context.save()
            saved.setValue(Int32(-2), forKey: "processID")
            let unsaved = try context.insertNewObject(forEntityName: "Run")
            unsaved.setValue(Date(), forKey: "date")  // processID keeps its default, -1
            do {
                try context.save()
                Issue.record("the save should have failed validation")
            } catch ContextError.validation(let failures) {
                #expect(failures.count == 2)
                #expect(Set(failures.compactMap(\.object)) == [saved.objectID.uriRepresentation(), unsaved.objectID.uriRepresentation()])
                #expect(failures.allSatisfy { $0.key == "processID" })
                let described = failures.map(\.description)
                #expect(described.contains { $0.hasSuffix(" in \(saved.objectID.uriRepresentation().absoluteString)") })
            }
        }
    }
}
