import Foundation
import StrataTestSupport
import Testing

@testable import Strata

/// `refresh(_:mergeChanges: true)`, `refreshAllObjects()` and the merges (a did-save,
/// the store's transactions) bring another writer's move of a member into a context that
/// holds unsaved changes of the lists and the members' to-ones and unsaved undo groups: they
/// must go the same way (spec 0006 §13, §16.1) — after every step (undo, redo, save) both
/// sides of every link agree, in the context and in the store, and the other writer's move
/// is kept where the context made no change of its own.
@Suite("Contexts: refresh keeping changes rebases moved members as a merge does")
struct RefreshMergeMoveTests {
    /// How the context takes in the other writer's save.
    enum Intake: String, CaseIterable, CustomStringConvertible {
        /// `refresh(_:mergeChanges: true)` of the lists first (the team the member moved
        /// to before anything else), then of every other registered object.
        case refreshEach
        case refreshAll
        case didSave
        case storeChanges
        var description: String { rawValue }
    }

    /// Saved: T [p1], U [p2], V [] (Team {name, players <->> Player.team}).
    static func store(_ coordinator: PersistentStoreCoordinator) async throws -> [String: ManagedObjectID] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var objects: [String: ManagedObject] = [:]
            for name in ["T", "U", "V"] {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue(name, forKey: "name")
                objects[name] = team
            }
            for (name, team) in [("p1", "T"), ("p2", "U")] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(name, forKey: "name")
                player.setValue(objects[team], forKey: "team")
                objects[name] = player
            }
            try context.save()
            return objects.mapValues(\.objectID)
        }
    }

    /// "T[p1,rookie] U[] V[p2]" (members by name, sorted) after checking that every team's
    /// players name it and every player's team lists it.
    static func shown(_ context: isolated ManagedObjectContext, _ ids: [String: ManagedObjectID], _ step: String) throws -> String {
        func name(_ object: ManagedObject?) -> String { (object?.value(forKey: "name") as? String) ?? "-" }
        var text: [String] = []
        var players: Set<ManagedObject> = []
        for team in ["T", "U", "V"] {
            let object = try context.existingObject(with: try #require(ids[team]))
            let members = (object.value(forKey: "players") as? Set<ManagedObject>) ?? []
            for member in members {
                #expect((member.value(forKey: "team") as? ManagedObject) === object,
                        "\(step): \(team) lists \(name(member)), whose team is \(name(member.value(forKey: "team") as? ManagedObject))")
                players.insert(member)
            }
            text.append("\(team)[\(members.map { name($0) }.sorted().joined(separator: ","))]")
        }
        for id in ["p1", "p2"].compactMap({ ids[$0] }) { players.insert(try context.existingObject(with: id)) }
        for player in players where !player.isDeleted {
            guard let team = player.value(forKey: "team") as? ManagedObject else { continue }
            let members = (team.value(forKey: "players") as? Set<ManagedObject>) ?? []
            #expect(members.contains(player), "\(step): \(name(player))'s team \(name(team)) doesn't list it")
        }
        return text.joined(separator: " ")
    }

    /// Takes in `save` (the other writer's) as `intake` says; `first`: the list refreshed first
    /// (`alone`: which, holding a change of its members, must agree with them refreshed alone).
    static func takeIn(_ context: isolated ManagedObjectContext, _ intake: Intake, _ save: ContextDidSave?, first: ManagedObjectID, alone: Bool = false) throws {
        switch intake {
        case .refreshEach:
            let list = try context.existingObject(with: first)
            context.refresh(list, mergeChanges: true)
            // Refreshed alone (nothing else re-read yet), the list lists no member whose own
            // to-one names another list.
            for member in alone ? (list.value(forKey: "players") as? Set<ManagedObject>) ?? [] : [] {
                #expect((member.value(forKey: "team") as? ManagedObject) === list,
                        "refreshed alone, \(list.value(forKey: "name") ?? "?") lists \(member.value(forKey: "name") ?? "?"), whose team is another")
            }
            for object in context.registeredObjects.sorted(by: { $0.objectID < $1.objectID }) where object !== list {
                context.refresh(object, mergeChanges: true)
            }
        case .refreshAll:
            context.refreshAllObjects()
        case .didSave:
            if let save { context.mergeChanges(fromContextDidSave: save) }
        case .storeChanges:
            try context.mergeStoreChanges()
        }
    }

    /// The other writer (a context of its own) runs `body` and saves; returns its did-save.
    static func otherWriter(_ coordinator: PersistentStoreCoordinator, _ body: @escaping @Sendable (isolated ManagedObjectContext) throws -> Void)
        async throws -> ContextDidSave?
    {
        try await privateContext(coordinator, name: "other").perform { (other: isolated ManagedObjectContext) throws -> ContextDidSave? in
            try body(other)
            var captured: ContextDidSave?
            let token = other.addObserver { note in
                if case .didSave(let save) = note.notification { captured = save }
            }
            try other.save()
            other.removeObserver(token)
            return captured
        }
    }

    static func storeShows(_ coordinator: PersistentStoreCoordinator, _ ids: [String: ManagedObjectID], _ label: String) async throws -> String {
        #expect(try coordinator.persistentStores[0].log.verify().isClean, "\(label)")
        return try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Self.shown(context, ids, "\(label) store")
        }
    }

    @Test("the context puts a new player on T (T's players held as a change) and moves p2 from U to V, unsaved; another writer moves p2 from U to T, saved; taken in: T doesn't list p2, which stays on V; undo returns p2 to T, where the other writer put it, redo to V, and the store gets what the context shows", arguments: Intake.allCases)
    func memberMovedIntoHeldListWhileContextMovedItElsewhere(intake: Intake) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let ids = try await Self.store(coordinator)
        let context = editor(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let t = try context.existingObject(with: try #require(ids["T"]))
            _ = t.value(forKey: "players")
            let rookie = try context.insertNewObject(forEntityName: "Player")
            rookie.setValue("rookie", forKey: "name")
            rookie.setValue(t, forKey: "team")
            context.processPendingChanges()
            let p2 = try context.existingObject(with: try #require(ids["p2"]))
            p2.setValue(try context.existingObject(with: try #require(ids["V"])), forKey: "team")
            context.processPendingChanges()
        }
        let known = ids
        let save = try await Self.otherWriter(coordinator) { other in
            try other.existingObject(with: try #require(known["p2"])).setValue(try other.existingObject(with: try #require(known["T"])), forKey: "team")
        }
        let mine = "T[p1,rookie] U[] V[p2]"
        let theirs = "T[p1,p2,rookie] U[] V[]"
        let label = "\(intake)"
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            try Self.takeIn(context, intake, save, first: try #require(known["T"]), alone: true)
            #expect(try Self.shown(context, known, "\(label) taken in") == mine)
            try context.undo()  // p2's move
            #expect(try Self.shown(context, known, "\(label) undo") == theirs)
            try context.redo()
            #expect(try Self.shown(context, known, "\(label) redo") == mine)
            try context.undo()
            try context.undo()  // the rookie
            #expect(try Self.shown(context, known, "\(label) undo both") == "T[p1,p2] U[] V[]")
            try context.redo()
            try context.redo()
            #expect(try Self.shown(context, known, "\(label) redo both") == mine)
            try context.save()
            try context.undo()
            #expect(try Self.shown(context, known, "\(label) saved, undone") == theirs)
            try context.save()
        }
        #expect(try await Self.storeShows(coordinator, known, label) == theirs)
    }

    @Test("the context puts a new player on T (T's players held as a change), unsaved; another writer moves p1 from T to U, saved; taken in: T lists the new player only, U lists p1; undo takes the new player off, redo puts it back, the save keeps the other writer's move", arguments: Intake.allCases)
    func memberMovedOutOfHeldList(intake: Intake) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let ids = try await Self.store(coordinator)
        let context = editor(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let t = try context.existingObject(with: try #require(ids["T"]))
            _ = (t.value(forKey: "players") as? Set<ManagedObject>)?.map { $0.value(forKey: "name") }
            let rookie = try context.insertNewObject(forEntityName: "Player")
            rookie.setValue("rookie", forKey: "name")
            rookie.setValue(t, forKey: "team")
            context.processPendingChanges()
        }
        let save = try await Self.otherWriter(coordinator) { other in
            try other.existingObject(with: try #require(ids["p1"])).setValue(try other.existingObject(with: try #require(ids["U"])), forKey: "team")
        }
        let label = "\(intake)"
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            try Self.takeIn(context, intake, save, first: try #require(ids["T"]))
            #expect(try Self.shown(context, ids, "\(label) taken in") == "T[rookie] U[p1,p2] V[]")
            try context.undo()
            #expect(try Self.shown(context, ids, "\(label) undo") == "T[] U[p1,p2] V[]")
            try context.redo()
            #expect(try Self.shown(context, ids, "\(label) redo") == "T[rookie] U[p1,p2] V[]")
            try context.save()
        }
        #expect(try await Self.storeShows(coordinator, ids, label) == "T[rookie] U[p1,p2] V[]")
    }

    @Test("the context moves p1 from T to V, unsaved; another writer moves p1 from T to U, saved; taken in: U doesn't list p1, which stays on V; undo returns p1 to U, redo to V, and the store gets what the context shows", arguments: Intake.allCases)
    func memberTheContextMovedMovedElsewhere(intake: Intake) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let ids = try await Self.store(coordinator)
        let context = editor(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            for name in ["T", "U", "V"] { _ = try context.existingObject(with: try #require(ids[name])).value(forKey: "players") }
            try context.existingObject(with: try #require(ids["p1"])).setValue(try context.existingObject(with: try #require(ids["V"])), forKey: "team")
            context.processPendingChanges()
        }
        let save = try await Self.otherWriter(coordinator) { other in
            try other.existingObject(with: try #require(ids["p1"])).setValue(try other.existingObject(with: try #require(ids["U"])), forKey: "team")
        }
        let label = "\(intake)"
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            try Self.takeIn(context, intake, save, first: try #require(ids["U"]))
            #expect(try Self.shown(context, ids, "\(label) taken in") == "T[] U[p2] V[p1]")
            try context.undo()
            #expect(try Self.shown(context, ids, "\(label) undo") == "T[] U[p1,p2] V[]")
            try context.redo()
            #expect(try Self.shown(context, ids, "\(label) redo") == "T[] U[p2] V[p1]")
            try context.save()
            try context.undo()
            #expect(try Self.shown(context, ids, "\(label) saved, undone") == "T[] U[p1,p2] V[]")
            try context.save()
        }
        #expect(try await Self.storeShows(coordinator, ids, label) == "T[] U[p1,p2] V[]")
    }
}
