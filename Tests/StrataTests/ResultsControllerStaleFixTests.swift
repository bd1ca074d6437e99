import Foundation
import Strata
import StrataPredicate
import StrataTestSupport
import Testing

/// A fetch and a results controller with the same request read a stale object alike
/// (`Specs/0008-fetch-requests.md`, Evaluation; `Specs/0006-context-undo.md` §21.1.3, §21.2.3):
/// an object loaded here that another context's save changed in the store, not merged or
/// refreshed here. Also: a full scan's related fault whose `awakeFromFetch` sets a
/// persistent value, and a randomized differential of a fetch and a controller.
@Suite("Results controllers and stale objects (session 32)")
struct ResultsControllerStaleFixTests {
    typealias Base = JoinPlanTests

    /// A store populated by ``JoinPlanTests/populate(_:)`` and a viewer context holding every
    /// team loaded (committed values), after another context renamed T3 "A3", moved T7 to
    /// rank 1 and T2 to rank 9, and saved: the viewer's teams T2, T3 and T7 are stale.
    static func staleTeams() async throws -> (TemporaryDirectory, ManagedObjectContext) {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Base.model())
        let viewer = privateContext(coordinator)
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            try Base.populate(context)
            context.reset()
            context.retainsRegisteredObjects = true
            for n in 0..<9 { _ = try Base.object(context, "Team", "T\(n)").value(forKey: "rank") }
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Base.object(context, "Team", "T3").setValue("A3", forKey: "name")
            try Base.object(context, "Team", "T7").setValue(Int32(1), forKey: "rank")
            try Base.object(context, "Team", "T2").setValue(Int32(9), forKey: "rank")
            try context.save()
        }
        return (dir, viewer)
    }

    /// The fetch's IDs, and the controller's IDs and section names, for `request`.
    static func both(
        _ context: isolated ManagedObjectContext, _ request: FetchRequest<ManagedObject>, section: String?
    ) throws -> (fetched: [ManagedObjectID], shown: [ManagedObjectID], sections: [String]) {
        let fetched = try context.fetch(request).map(\.objectID)
        let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: section)
        try controller.performFetch()
        return (fetched, try #require(controller.fetchedObjects).map(\.objectID), (controller.sections ?? []).map(\.name))
    }

    static func teams(_ context: isolated ManagedObjectContext, _ names: [String]) throws -> [ManagedObjectID] {
        try names.map { name in
            // Found by the store's name (the fetch's predicate reads the store's row).
            try #require(try context.fetch(FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "name == %@", name))).first).objectID
        }
    }

    @Test("a stale object is sorted, sectioned and matched by the store's row in a fetch and a results controller alike")
    func staleAgree() async throws {
        let (dir, viewer) = try await Self.staleTeams()
        _ = dir
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            let t3 = try #require(try Self.teams(context, ["A3"]).first)
            #expect(try context.object(with: t3).value(forKey: "name") as? String == "T3", "the viewer holds T3 as it loaded it")
            // By name, sectioned by name: the store's "A3" first, in section "A3".
            let byName = FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "name")])
            let named = try Self.both(context, byName, section: "name")
            let expectedNames = ["A3", "T0", "T1", "T2", "T4", "T5", "T6", "T7", "T8"]
            #expect(named.fetched == (try Self.teams(context, expectedNames)))
            #expect(named.shown == named.fetched, "before, the controller sorted T3 by its held name")
            #expect(named.sections == expectedNames, "before, T3's section was \"T3\"")
            // By rank under 5, sectioned by rank: T7 is in (store rank 1), T2 out (store rank 9).
            var byRank = FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "rank < 5"))
            byRank.sortDescriptors = [FetchSortDescriptor(key: "rank"), FetchSortDescriptor(key: "name")]
            let ranked = try Self.both(context, byRank, section: "rank")
            #expect(ranked.fetched == (try Self.teams(context, ["T0", "T1", "T7", "A3", "T4"])))
            #expect(ranked.shown == ranked.fetched, "before, the controller sorted T7 last by its held rank 7")
            #expect(ranked.sections == ["0", "1", "3", "4"], "before, T7 made a section \"7\"")
            // Descending, without sections, with pending changes elsewhere in the context.
            try Base.object(context, "Person", "p0").setValue(Int32(77), forKey: "age")
            byRank.sortDescriptors = [FetchSortDescriptor(key: "rank", ascending: false)]
            let descending = try Self.both(context, byRank, section: nil)
            #expect(descending.shown == descending.fetched)
            #expect(descending.fetched == (try Self.teams(context, ["T4", "A3", "T1", "T7", "T0"])))
            // People by their team's name: a related stale team is read by its held name in both.
            var people = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "age < 30"))
            people.sortDescriptors = [FetchSortDescriptor(key: "team.name"), FetchSortDescriptor(key: "name")]
            let related = try Self.both(context, people, section: "team.name")
            #expect(related.shown == related.fetched)
        }
    }

    @Test("a controller fetched over stale objects follows a refresh and a merge, in step with the fetch and its delegate")
    func staleThenRefreshed() async throws {
        let (dir, viewer) = try await Self.staleTeams()
        _ = dir
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "rank < 5"))
            request.sortDescriptors = [FetchSortDescriptor(key: "rank"), FetchSortDescriptor(key: "name")]
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "rank")
            try controller.performFetch()
            let delegate = RecordingDelegate(mirroring: controller)
            controller.delegate = delegate
            func agree(_ step: String, _ context: isolated ManagedObjectContext) throws {
                let shown = try #require(controller.fetchedObjects).map(\.objectID)
                let fetched = try context.fetch(request).map(\.objectID)
                #expect(shown == fetched, "\(step)")
                #expect(delegate.problems.isEmpty, "\(step): \(delegate.problems)")
            }
            try agree("fetched", context)
            let t7 = try #require(try Self.teams(context, ["T7"]).first)
            context.refresh(try context.object(with: t7), mergeChanges: true)
            context.processPendingChanges()
            try agree("T7 refreshed", context)
            context.refreshAllObjects()
            context.processPendingChanges()
            try agree("all refreshed", context)
            #expect(controller.sections?.map(\.name) == ["0", "1", "3", "4"])
        }
    }

    /// A team whose `awakeFromFetch` adds 100 to its persistent `rank` with the public setter
    /// (Core Data asks for primitive setters there).
    final class RaisingTeam: ManagedObject {
        override func awakeFromFetch() {
            super.awakeFromFetch()
            if let rank = value(forKey: "rank") as? Int32, rank < 100 { setValue(rank + 100, forKey: "rank") }
        }
    }

    @Test("a full scan reads a related fault's stored row without firing it: its awakeFromFetch setting a persistent value runs when the app fires it, as a change that is saved")
    func awakeFromFetchInAFullScan() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Base.model(), classes: [(RaisingTeam.self, "Team")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Base.populate(context)
            context.reset()
            let members = try StoredValueReadFixTests.members(context, of: 3)
            context.reset()
            // The full scan first (it meets every team as a fault without a row), then the join plan.
            let predicate = try FormatPredicate(format: "team.rank == 3")
            let scanned = try context.fetch(FetchRequest(entityName: "Person", predicate: FormatPredicate(.not(.not(predicate.node)))))
            #expect(Set(scanned.map(\.objectID)) == members, "before, the scan fired T3, whose awakeFromFetch made its rank 103: no match")
            let t3 = try #require(scanned.first?.value(forKey: "team") as? ManagedObject)
            #expect(t3.isFault, "the scan read T3's row; its fault is left to fire when the app reads it")
            let changedByTheScan = context.hasChanges
            #expect(!changedByTheScan)
            let planned = try context.fetch(FetchRequest(entityName: "Person", predicate: predicate))
            #expect(planned.map(\.objectID) == scanned.map(\.objectID))
            // Fired by the app: awakeFromFetch's set is a change (no undo, nothing reported), saved.
            #expect(t3.value(forKey: "rank") as? Int32 == 103)
            let changedByTheFire = context.hasChanges
            #expect(t3.isUpdated && changedByTheFire)
            #expect(try context.count(for: FetchRequest(entityName: "Person", predicate: predicate)) == 0, "a changed team is read by its current values")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let request = FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "name == 'T3'"))
            #expect(try context.fetchDictionaries(request).first?["rank"] as? Int32 == 103)
        }
    }

    /// SplitMix64, for the randomized differential.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test("randomized: a tracked results controller, a new one and a fetch agree over inserts, updates, deletes, moves, saves, other contexts' saves, merges of them and refreshes (steps: STRATA_FRC_STALE_STEPS, default 40)")
    func randomizedDifferential() async throws {
        let steps = ProcessInfo.processInfo.environment["STRATA_FRC_STALE_STEPS"].flatMap(Int.init) ?? 40
        var random = SeededGenerator(state: ProcessInfo.processInfo.environment["STRATA_FRC_STALE_SEED"].flatMap(UInt64.init) ?? 32)
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Base.model())
        let viewer = privateContext(coordinator, name: "viewer")
        let writer = privateContext(coordinator, name: "writer")
        var teamsRequest = FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "rank < 40"))
        teamsRequest.sortDescriptors = [FetchSortDescriptor(key: "rank"), FetchSortDescriptor(key: "name", ascending: false)]
        var peopleRequest = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "age < 50"))
        peopleRequest.sortDescriptors = [FetchSortDescriptor(key: "team.name"), FetchSortDescriptor(key: "name")]
        let requests: [(request: FetchRequest<ManagedObject>, section: String)] = [(teamsRequest, "rank"), (peopleRequest, "team.name")]
        // The controllers and their delegates live in the viewer's userInfo between blocks.
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            try Base.populate(context)
            context.reset()
            context.mergePolicy = .mergeByPropertyObjectTrump
            for (index, entry) in requests.enumerated() {
                let controller = FetchedResultsController(fetchRequest: entry.request, managedObjectContext: context, sectionNameKeyPath: entry.section)
                try controller.performFetch()
                let delegate = RecordingDelegate(mirroring: controller)
                controller.delegate = delegate
                context.userInfo["controller\(index)"] = controller
                context.userInfo["delegate\(index)"] = delegate
            }
        }
        // The writer's saves not merged into the viewer yet, and whether the viewer may hold
        // objects another context's save changed since its last refresh or merge.
        var saves = writer.notifications(.didSave).makeAsyncIterator()
        var unmerged: [ContextDidSave] = []
        var stale = false
        for step in 0..<steps {
            let action = Int.random(in: 0..<11, using: &random)
            let pick = Int.random(in: 0..<1_000, using: &random)
            let value = Int32.random(in: 0..<60, using: &random)
            if action == 6 {
                let saved = try await writer.perform { (context: isolated ManagedObjectContext) throws -> Bool in
                    context.reset()
                    let teams = try context.fetch(FetchRequest(entityName: "Team"))
                    guard !teams.isEmpty else { return false }
                    let team = teams[pick % teams.count]
                    switch pick % 4 {
                    case 0: team.setValue(value, forKey: "rank")
                    case 1: team.setValue("W\(value)", forKey: "name")
                    default:
                        // A person taken off its team, or given another age: stale in the viewer.
                        // (Not moved to a team: the viewer may delete that team holding its
                        // members without the person, a save the store refuses.)
                        let people = try context.fetch(FetchRequest(entityName: "Person"))
                        guard !people.isEmpty else { return false }
                        let person = people[Int(value) % people.count]
                        if pick % 4 == 2 { person.setValue(nil, forKey: "team") } else { person.setValue(value, forKey: "age") }
                    }
                    // Setting the value it has is no change: nothing is saved, nothing posted.
                    guard context.hasChanges else { return false }
                    try context.save()
                    return true
                }
                if saved {
                    unmerged.append(try #require(await saves.next()))
                    stale = true
                }
            }
            let merging = action == 10 ? unmerged : []
            if action == 10 { unmerged = [] }
            let held = stale
            stale = try await viewer.perform { (context: isolated ManagedObjectContext) throws -> Bool in
                var stale = held
                let teams = try context.fetch(FetchRequest(entityName: "Team"))
                let people = try context.fetch(FetchRequest(entityName: "Person"))
                switch action {
                case 0:
                    let team = try context.insertNewObject(forEntityName: "Team")
                    team.setValue("N\(step)", forKey: "name")
                    team.setValue(value, forKey: "rank")
                case 1 where !teams.isEmpty: teams[pick % teams.count].setValue(value, forKey: "rank")
                case 2 where !teams.isEmpty: teams[pick % teams.count].setValue("V\(value)", forKey: "name")
                case 3 where teams.count > 3: context.delete(teams[pick % teams.count])
                case 4 where !people.isEmpty:
                    let team = teams.isEmpty || pick % 5 == 0 ? nil : teams[pick % teams.count]
                    people[pick % people.count].setValue(team, forKey: "team")
                case 5: try context.save()
                case 7:
                    context.refreshAllObjects()
                    stale = false
                case 8 where !teams.isEmpty:
                    // Without merging only an unchanged team: dropping a team's changes drops the
                    // inverse of a person's move to it (Core Data's save then refuses the
                    // dangling reference too).
                    let team = teams[pick % teams.count]
                    context.refresh(team, mergeChanges: pick % 2 == 0 || team.hasChanges)
                case 9 where !people.isEmpty: people[pick % people.count].setValue(value, forKey: "age")
                case 10:
                    for save in merging { context.mergeChanges(fromContextDidSave: save) }
                    stale = false
                default: break
                }
                context.processPendingChanges()
                for (index, entry) in requests.enumerated() {
                    let fetched = try context.fetch(entry.request).map(\.objectID)
                    let fresh = FetchedResultsController(fetchRequest: entry.request, managedObjectContext: context, sectionNameKeyPath: entry.section)
                    try fresh.performFetch()
                    #expect(try #require(fresh.fetchedObjects).map(\.objectID) == fetched, "step \(step) (action \(action)), request \(index): a new controller")
                    let controller = try #require(context.userInfo["controller\(index)"] as? FetchedResultsController<ManagedObject>)
                    let delegate = try #require(context.userInfo["delegate\(index)"] as? RecordingDelegate)
                    #expect(delegate.problems.isEmpty, "step \(step) (action \(action)), request \(index): \(delegate.problems)")
                    if !stale {
                        let shown = try #require(controller.fetchedObjects).map(\.objectID)
                        #expect(shown == fetched, "step \(step) (action \(action)), request \(index): the tracked controller")
                        #expect(controller.sections?.map(\.name) == fresh.sections?.map(\.name), "step \(step) (action \(action)), request \(index): sections")
                    }
                }
                return stale
            }
        }
    }
}
