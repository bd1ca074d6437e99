import Foundation
@testable import Strata
import StrataTestSupport
import Testing

/// Session 30 (helper 8): a loaded team whose `players` (the derived side of each player's
/// recorded `team`) holds no change — the context's move undone, or set back — while its
/// unsaved undo groups change it, when another writer moves players into or out of the team
/// and the context merges (spec 0006 §16.1, the counterpart of the recorded list's rebase).
@Suite("Session 30: a loaded unchanged derived to-many's undo groups at a merge", .serialized)
struct DerivedListRebaseTests {
    /// Teams A and B; a1 in A, b1 in B; P1 and P2 in no team.
    static func setUp(_ coordinator: PersistentStoreCoordinator) async throws -> [String: ManagedObjectID] {
        try await privateContext(coordinator, name: "setup").perform { (context: isolated ManagedObjectContext) throws -> [String: ManagedObjectID] in
            var objects: [String: ManagedObject] = [:]
            for name in ["A", "B"] {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue(name, forKey: "name")
                objects[name] = team
            }
            for (name, team) in [("a1", "A"), ("b1", "B"), ("P1", nil), ("P2", nil)] as [(String, String?)] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(name, forKey: "firstName")
                if let team { player.setValue(objects[team], forKey: "team") }
                objects[name] = player
            }
            try context.save()
            return objects.mapValues(\.objectID)
        }
    }

    static func names(_ team: ManagedObject) -> Set<String> {
        Set(team.mutableSetValue(forKey: "players").objects.map { $0.value(forKey: "firstName") as? String ?? "?" })
    }

    /// The store's view through a fresh coordinator: each team's members, and each player's team.
    static func reopened(_ dir: TemporaryDirectory, _ ids: [String: ManagedObjectID]) async throws -> (teams: [String: Set<String>], teamOf: [String: String]) {
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        return try await privateContext(coordinator, name: "reopened").perform { (context: isolated ManagedObjectContext) throws in
            var teams: [String: Set<String>] = [:]
            var teamOf: [String: String] = [:]
            for name in ["A", "B"] { teams[name] = Self.names(try context.existingObject(with: try #require(ids[name]))) }
            for name in ["a1", "b1", "P1", "P2"] {
                let player = try context.existingObject(with: try #require(ids[name]))
                teamOf[name] = (player.value(forKey: "team") as? ManagedObject)?.value(forKey: "name") as? String ?? "-"
            }
            return (teams, teamOf)
        }
    }

    /// Whether the in-memory members of `team` agree with each registered player's `team`.
    static func agree(_ context: isolated ManagedObjectContext, _ team: ManagedObject, _ ids: [String: ManagedObjectID]) throws -> Bool {
        let members = Set(team.mutableSetValue(forKey: "players").objects.map(\.objectID))
        for name in ["a1", "b1", "P1", "P2"] {
            let player = try context.existingObject(with: try #require(ids[name]))
            let named = (player.value(forKey: "team") as? ManagedObject)?.objectID == team.objectID
            if named != members.contains(player.objectID) { return false }
        }
        return true
    }

    @Test("saved move undone (unsaved), another writer moves P2 in and a1 out, merge: redo and undo keep P2 listed and a1 out, the save and the reopened store agree")
    func undoneSavedMoveKeepsOtherWritersMembers() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let ids = try await Self.setUp(coordinator)
        let mine = privateContext(coordinator, name: "mine")
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            let a = try context.existingObject(with: try #require(ids["A"]))
            #expect(Self.names(a) == ["a1"])
            try context.existingObject(with: try #require(ids["P1"])).setValue(a, forKey: "team")
            context.processPendingChanges()
            #expect(Self.names(a) == ["a1", "P1"])
            try context.save()
            try context.undo()
            #expect(Self.names(a) == ["a1"])
            context.userInfo["A"] = a
        }
        let other = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(other, name: "other").perform { (context: isolated ManagedObjectContext) throws in
            let a = try context.existingObject(with: try #require(ids["A"]))
            try context.existingObject(with: try #require(ids["P2"])).setValue(a, forKey: "team")
            try context.existingObject(with: try #require(ids["a1"])).setValue(nil, forKey: "team")
            try context.save()
        }
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            let a = try #require(context.userInfo["A"] as? ManagedObject)
            #expect(Self.names(a) == ["P2"], "merged: the undo pending, the other writer's members")
            try context.redo()
            #expect(Self.names(a) == ["P1", "P2"], "redo moves P1 back in, P2 stays, a1 stays out")
            #expect(try Self.agree(context, a, ids))
            try context.undo()
            #expect(Self.names(a) == ["P2"], "undo takes P1 out only")
            #expect(try Self.agree(context, a, ids))
            try context.redo()
            try context.save()
            #expect(Self.names(a) == ["P1", "P2"])
            #expect(try Self.agree(context, a, ids))
        }
        let stored = try await Self.reopened(dir, ids)
        #expect(stored.teams["A"] == ["P1", "P2"])
        #expect(stored.teamOf == ["a1": "-", "b1": "B", "P1": "A", "P2": "A"])
    }

    @Test("move set back by a second group (no change held), another writer moves P2 in and a1 out, merge: undoing each group keeps P2 listed and a1 out, the save and the reopened store agree")
    func setBackMoveKeepsOtherWritersMembers() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let ids = try await Self.setUp(coordinator)
        let mine = privateContext(coordinator, name: "mine")
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            let a = try context.existingObject(with: try #require(ids["A"]))
            let p1 = try context.existingObject(with: try #require(ids["P1"]))
            #expect(Self.names(a) == ["a1"])
            p1.setValue(a, forKey: "team")
            context.processPendingChanges()
            p1.setValue(nil, forKey: "team")
            context.processPendingChanges()
            #expect(Self.names(a) == ["a1"])
            context.userInfo["A"] = a
        }
        let other = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(other, name: "other").perform { (context: isolated ManagedObjectContext) throws in
            let a = try context.existingObject(with: try #require(ids["A"]))
            try context.existingObject(with: try #require(ids["P2"])).setValue(a, forKey: "team")
            try context.existingObject(with: try #require(ids["a1"])).setValue(nil, forKey: "team")
            try context.save()
        }
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            let a = try #require(context.userInfo["A"] as? ManagedObject)
            #expect(Self.names(a) == ["P2"])
            try context.undo()
            #expect(Self.names(a) == ["P1", "P2"], "undoing the move out puts P1 back, P2 stays, a1 stays out")
            #expect(try Self.agree(context, a, ids))
            try context.undo()
            #expect(Self.names(a) == ["P2"], "undoing the move in takes P1 out only")
            #expect(try Self.agree(context, a, ids))
            try context.redo()
            #expect(Self.names(a) == ["P1", "P2"])
            try context.save()
            #expect(try Self.agree(context, a, ids))
        }
        let stored = try await Self.reopened(dir, ids)
        #expect(stored.teams["A"] == ["P1", "P2"])
        #expect(stored.teamOf == ["a1": "-", "b1": "B", "P1": "A", "P2": "A"])
    }
    @Test("unsaved move of b1 from B to A undone; another writer swaps P2 into A and a1 into B, merge: redo and undo of the move keep both teams agreeing with every player's team, in memory and in the reopened store")
    func undoneMoveBetweenTwoLoadedTeams() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let ids = try await Self.setUp(coordinator)
        let mine = privateContext(coordinator, name: "mine")
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            let a = try context.existingObject(with: try #require(ids["A"]))
            let b = try context.existingObject(with: try #require(ids["B"]))
            #expect(Self.names(a) == ["a1"] && Self.names(b) == ["b1"])
            try context.existingObject(with: try #require(ids["b1"])).setValue(a, forKey: "team")
            context.processPendingChanges()
            #expect(Self.names(a) == ["a1", "b1"] && Self.names(b) == [])
            try context.undo()
            #expect(Self.names(a) == ["a1"] && Self.names(b) == ["b1"])
            context.userInfo["A"] = a
            context.userInfo["B"] = b
        }
        let other = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(other, name: "other").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: try #require(ids["P2"])).setValue(try context.existingObject(with: try #require(ids["A"])), forKey: "team")
            try context.existingObject(with: try #require(ids["a1"])).setValue(try context.existingObject(with: try #require(ids["B"])), forKey: "team")
            try context.save()
        }
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            let a = try #require(context.userInfo["A"] as? ManagedObject), b = try #require(context.userInfo["B"] as? ManagedObject)
            #expect(Self.names(a) == ["P2"] && Self.names(b) == ["a1", "b1"])
            try context.redo()
            #expect(Self.names(a) == ["P2", "b1"], "redo moves b1 in, P2 stays, a1 stays out")
            #expect(Self.names(b) == ["a1"], "b1 leaves B, a1 stays in it")
            #expect(try Self.agree(context, a, ids) && Self.agree(context, b, ids))
            try context.undo()
            #expect(Self.names(a) == ["P2"] && Self.names(b) == ["a1", "b1"])
            #expect(try Self.agree(context, a, ids) && Self.agree(context, b, ids))
            try context.redo()
            try context.save()
        }
        let stored = try await Self.reopened(dir, ids)
        #expect(stored.teams == ["A": ["P2", "b1"], "B": ["a1"]])
        #expect(stored.teamOf == ["a1": "B", "b1": "A", "P1": "-", "P2": "A"])
    }
    static func courseModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Student") {
                Attribute("name", .string)
                Relationship("courses", to: "Course", inverse: "students", toMany: true)
            }
            Entity("Course") {
                Attribute("name", .string)
                Relationship("students", to: "Student", inverse: "courses", toMany: true)
            }
        }
    }

    static func members(_ object: ManagedObject, _ key: String) -> Set<String> {
        Set(object.mutableSetValue(forKey: key).objects.map { $0.value(forKey: "name") as? String ?? "?" })
    }

    @Test("many-to-many: s1 joins c1 and the join is undone (unsaved); another writer enrols s1 in c2 and s2 in c1, merge: redo and undo keep the other writer's enrolments on both sides, and the reopened store agrees")
    func manyToManyUndoneJoinKeepsOtherWritersEnrolments() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.courseModel())
        let ids = try await privateContext(coordinator, name: "setup").perform { (context: isolated ManagedObjectContext) throws -> [String: ManagedObjectID] in
            var objects: [String: ManagedObject] = [:]
            for (name, entity) in [("s1", "Student"), ("s2", "Student"), ("c1", "Course"), ("c2", "Course")] {
                let object = try context.insertNewObject(forEntityName: entity)
                object.setValue(name, forKey: "name")
                objects[name] = object
            }
            try context.save()
            return objects.mapValues(\.objectID)
        }
        let mine = privateContext(coordinator, name: "mine")
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            let s1 = try context.existingObject(with: try #require(ids["s1"])), c1 = try context.existingObject(with: try #require(ids["c1"]))
            let c2 = try context.existingObject(with: try #require(ids["c2"]))
            #expect(Self.members(s1, "courses") == [] && Self.members(c1, "students") == [] && Self.members(c2, "students") == [])
            s1.mutableSetValue(forKey: "courses").add(c1)
            context.processPendingChanges()
            try context.undo()
            #expect(Self.members(s1, "courses") == [] && Self.members(c1, "students") == [])
            for (key, object) in [("s1", s1), ("c1", c1), ("c2", c2)] { context.userInfo[key] = object }
        }
        let other = try openCoordinator(dir, model: try Self.courseModel())
        try await privateContext(other, name: "other").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: try #require(ids["s1"])).mutableSetValue(forKey: "courses").add(try context.existingObject(with: try #require(ids["c2"])))
            try context.existingObject(with: try #require(ids["s2"])).mutableSetValue(forKey: "courses").add(try context.existingObject(with: try #require(ids["c1"])))
            try context.save()
        }
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            let s1 = try #require(context.userInfo["s1"] as? ManagedObject), c1 = try #require(context.userInfo["c1"] as? ManagedObject)
            let c2 = try #require(context.userInfo["c2"] as? ManagedObject)
            #expect(Self.members(s1, "courses") == ["c2"] && Self.members(c1, "students") == ["s2"] && Self.members(c2, "students") == ["s1"])
            try context.redo()
            #expect(Self.members(s1, "courses") == ["c1", "c2"], "redo joins c1, c2 stays")
            #expect(Self.members(c1, "students") == ["s1", "s2"], "s2 stays in c1")
            #expect(Self.members(c2, "students") == ["s1"])
            try context.undo()
            #expect(Self.members(s1, "courses") == ["c2"] && Self.members(c1, "students") == ["s2"] && Self.members(c2, "students") == ["s1"])
            try context.redo()
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: try Self.courseModel())
        let stored = try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws -> [String: Set<String>] in
            var result: [String: Set<String>] = [:]
            for name in ["s1", "s2"] { result[name] = Self.members(try context.existingObject(with: try #require(ids[name])), "courses") }
            for name in ["c1", "c2"] { result[name] = Self.members(try context.existingObject(with: try #require(ids[name])), "students") }
            return result
        }
        #expect(stored == ["s1": ["c1", "c2"], "s2": ["c1"], "c1": ["s1", "s2"], "c2": ["s1"]])
    }
    /// Another writer (its own coordinator) moves P2 into A and a1 out of it.
    static func otherWriterSwaps(_ dir: TemporaryDirectory, _ ids: [String: ManagedObjectID]) async throws {
        let other = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(other, name: "other").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: try #require(ids["P2"])).setValue(try context.existingObject(with: try #require(ids["A"])), forKey: "team")
            try context.existingObject(with: try #require(ids["a1"])).setValue(nil, forKey: "team")
            try context.save()
        }
    }

    /// In `context`, after the merge: A lists P2 only; redo (P1 in), undo, redo, save.
    static func redoUndoRedoSave(_ context: isolated ManagedObjectContext, _ ids: [String: ManagedObjectID]) throws {
        let a = try #require(context.userInfo["A"] as? ManagedObject)
        #expect(Self.names(a) == ["P2"], "merged")
        try context.redo()
        #expect(Self.names(a) == ["P1", "P2"], "redo moves P1 back in, P2 stays, a1 stays out")
        #expect(try Self.agree(context, a, ids))
        try context.undo()
        #expect(Self.names(a) == ["P2"])
        #expect(try Self.agree(context, a, ids))
        try context.redo()
        try context.save()
    }

    @Test("automatic merge (automaticallyMergesChangesFromParent, another context of the coordinator saving): the undone move's redo and undo keep the other writer's members")
    func automaticMergeKeepsOtherWritersMembers() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let ids = try await Self.setUp(coordinator)
        let mine = privateContext(coordinator, name: "mine")
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let a = try context.existingObject(with: try #require(ids["A"]))
            #expect(Self.names(a) == ["a1"])
            try context.existingObject(with: try #require(ids["P1"])).setValue(a, forKey: "team")
            context.processPendingChanges()
            try context.undo()
            context.userInfo["A"] = a
        }
        try await privateContext(coordinator, name: "other").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: try #require(ids["P2"])).setValue(try context.existingObject(with: try #require(ids["A"])), forKey: "team")
            try context.existingObject(with: try #require(ids["a1"])).setValue(nil, forKey: "team")
            try context.save()
        }
        try await mine.perform { (context: isolated ManagedObjectContext) throws in try Self.redoUndoRedoSave(context, ids) }
        let stored = try await Self.reopened(dir, ids)
        #expect(stored.teams["A"] == ["P1", "P2"])
        #expect(stored.teamOf == ["a1": "-", "b1": "B", "P1": "A", "P2": "A"])
    }

    @Test("a child context merging its parent's merge (automaticallyMergesChangesFromParent): the child's undone move's redo and undo keep the other writer's members, and the parent's save writes them")
    func childMergeKeepsOtherWritersMembers() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let ids = try await Self.setUp(coordinator)
        let parent = privateContext(coordinator, name: "parent")
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let a = try context.existingObject(with: try #require(ids["A"]))
            #expect(Self.names(a) == ["a1"])
            try context.existingObject(with: try #require(ids["P1"])).setValue(a, forKey: "team")
            context.processPendingChanges()
            try context.undo()
            context.userInfo["A"] = a
        }
        try await Self.otherWriterSwaps(dir, ids)
        try await parent.perform { (context: isolated ManagedObjectContext) throws in _ = try context.mergeStoreChanges() }
        try await child.perform { (context: isolated ManagedObjectContext) throws in try Self.redoUndoRedoSave(context, ids) }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        let stored = try await Self.reopened(dir, ids)
        #expect(stored.teams["A"] == ["P1", "P2"])
        #expect(stored.teamOf == ["a1": "-", "b1": "B", "P1": "A", "P2": "A"])
    }
}
