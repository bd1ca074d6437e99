import Foundation
import Strata
import StrataTestSupport
import Testing

/// What is freed when the app lets go: coordinators, contexts, objects. DESIGN.md: "the
/// context does not retain unchanged objects, so memory follows what the app holds".
@Suite("Lifetimes: what the app drops is freed")
struct LifetimeReviewTests {
    /// A league with one team of `players` players, saved.
    private func league(_ coordinator: PersistentStoreCoordinator, players: Int = 3) async throws -> ManagedObjectID {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            for index in 0..<players {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("P\(index)", forKey: "firstName")
                player.setValue(team, forKey: "team")
            }
            try context.save()
            return team.objectID
        }
    }

    @Test("a coordinator, its contexts and their saved objects are freed once the app drops them")
    func coordinatorAndContextsFreed() async throws {
        let dir = try TemporaryDirectory()
        weak var weakCoordinator: PersistentStoreCoordinator?
        weak var weakContext: ManagedObjectContext?
        do {
            let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
            weakCoordinator = coordinator
            _ = try await league(coordinator)
            let context = privateContext(coordinator)
            weakContext = context
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Herons", forKey: "name")
                try context.save()
                team.setValue("Ibis", forKey: "name")
                try context.undo()
            }
        }
        #expect(weakContext == nil, "the context, with an undo stack, isn't kept alive")
        #expect(weakCoordinator == nil, "the coordinator isn't kept alive")
        // The store closed with it: a new coordinator opens it and reads both saves.
        let again = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let count = try await privateContext(again).perform { (context: isolated ManagedObjectContext) throws in
            try context.count(for: FetchRequest(entityName: "Team"))
        }
        #expect(count == 2)
    }

    @Test("a team and its players, with both sides of the relationship read, are freed when the app drops them")
    func relationshipGraphFreed() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let teamID = try await league(coordinator, players: 5)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var boxes: [WeakBox] = []
            do {
                let team = try context.existingObject(with: teamID)
                let players = try #require(team.value(forKey: "players") as? Set<ManagedObject>)
                #expect(players.count == 5)
                for player in players {
                    #expect((player.value(forKey: "team") as? ManagedObject) === team)
                    _ = player.value(forKey: "firstName")
                    boxes.append(WeakBox(player))
                }
                boxes.append(WeakBox(team))
            }
            #expect(boxes.allSatisfy { $0.object == nil }, "no object of the graph is kept: \(boxes.filter { $0.object != nil }.count) alive")
            #expect(context.registeredObjects.isEmpty)
        }
    }

    @Test("inserted objects are held until saved, then freed when the app drops them; the undo stack doesn't hold them")
    func savedInsertsFreed() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var box: WeakBox?
            do {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Herons", forKey: "name")
                box = WeakBox(team)
            }
            #expect(box?.object != nil, "an unsaved insert is held by the context")
            try context.save()
            #expect(box?.object == nil, "saved and unchanged: freed")
            let canUndo = context.canUndo
            #expect(canUndo)
            try context.undo()
            #expect(context.insertedObjects.isEmpty && context.deletedObjects.count == 1, "undo still finds the object by its ID")
        }
    }

    @Test("a child context and an automatically merging context are freed with their last reference")
    func childAndMergingContextsFreed() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let parent = privateContext(coordinator)
        weak var weakChild: ManagedObjectContext?
        weak var weakMerging: ManagedObjectContext?
        do {
            let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
            weakChild = child
            try await child.perform { (child: isolated ManagedObjectContext) throws in
                let team = try child.insertNewObject(forEntityName: "Team")
                team.setValue("Herons", forKey: "name")
                try child.save()
            }
            let merging = privateContext(coordinator)
            weakMerging = merging
            await merging.perform { (merging: isolated ManagedObjectContext) in
                merging.automaticallyMergesChangesFromParent = true
            }
        }
        #expect(weakChild == nil, "the parent doesn't keep its child alive")
        #expect(weakMerging == nil, "merging changes from the coordinator doesn't keep a context alive")
        try await parent.perform { (parent: isolated ManagedObjectContext) throws in
            #expect(parent.insertedObjects.count == 1)
            try parent.save()
        }
    }
}
