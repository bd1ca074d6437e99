import Foundation
import Strata
import StrataPredicate
import StrataTestSupport
import Testing

/// A fetch reads an object without pending changes by its stored values — never through an
/// override of `value(forKey:)` in its class — and one with pending changes in memory, each
/// related object by its own state (`Specs/0008-fetch-requests.md`, Evaluation): join plans,
/// full scans, counts, ID fetches, sorts through key paths, results controllers and fetched
/// properties all read it so. `ShoutingTeam` (JoinPlanReviewTests) answers `name` with a "!".
@Suite("Stored values read by fetches (session 31)")
struct StoredValueReadFixTests {
    typealias Base = JoinPlanTests

    /// p0–p59; those of team n are p(n), p(n+10), …: 6 each, 0–8.
    static func members(_ context: isolated ManagedObjectContext, of team: Int) throws -> Set<ManagedObjectID> {
        Set(try (0..<6).map { try Base.object(context, "Person", "p\(team + 10 * $0)").objectID })
    }

    @Test("a key path into an unchanged team reads its stored name in the join plan and the full scan alike; a changed team is read through its class")
    func joinAndScanAgree() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Base.model(), classes: [(ShoutingTeam.self, "Team")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Base.populate(context)
            context.reset()
            let t3 = try Self.members(context, of: 3)
            let stored = try JoinPlanReviewTests.agrees(context, "Person", "team.name == 'T3'")
            #expect(stored.plan.hasPrefix("index scan Person.team IN"), "\(stored.plan)")
            #expect(stored.agrees && Set(stored.results) == t3, "\(stored)")
            // Before, the full scan read each team through the class: "T3!" matched there only.
            let shouted = try JoinPlanReviewTests.agrees(context, "Person", "team.name == 'T3!'")
            #expect(shouted.agrees && shouted.results.isEmpty, "\(shouted)")
            // Loaded (fired) teams are read by their committed values, not through the class.
            let teams = try (0..<9).map { n in try Base.object(context, "Team", "T\(n)") }
            for team in teams { _ = team.value(forKey: "rank") }
            let loaded = try JoinPlanReviewTests.agrees(context, "Person", "team.name BEGINSWITH 'T3'")
            #expect(loaded.agrees && Set(loaded.results) == t3, "\(loaded)")
            #expect(teams.allSatisfy { !$0.isFault })
            // A person with pending changes still reads its unchanged team by the stored name.
            let p13 = try Base.object(context, "Person", "p13")
            p13.setValue(Int32(99), forKey: "age")
            let withPending = try JoinPlanReviewTests.agrees(context, "Person", "team.name == 'T3'")
            #expect(withPending.agrees && Set(withPending.results) == t3, "\(withPending)")
            let sorted = try context.fetch(
                FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "team.name == 'T3'"),
                    sortDescriptors: [FetchSortDescriptor(key: "age", ascending: false)]))
            #expect(sorted.first === p13)
            // A team with pending changes is judged in memory, through its class.
            let team = try Base.object(context, "Team", "T3")
            team.setValue("T9x", forKey: "name")
            let renamed = try JoinPlanReviewTests.agrees(context, "Person", "team.name == 'T9x!'")
            #expect(renamed.agrees && Set(renamed.results) == t3, "\(renamed)")
            let plain = try JoinPlanReviewTests.agrees(context, "Person", "team.name == 'T9x'")
            #expect(plain.agrees && plain.results.isEmpty, "\(plain)")
            // ANY through the derived side: the members' names are theirs (Person has no class).
            let any = try JoinPlanReviewTests.agrees(context, "Team", "ANY members.team.name == 'T4'")
            #expect(any.agrees && any.results.count == 1, "\(any)")
        }
    }

    /// A team class that reverses the teams' order by name: "T0" reads as "T8", … "T8" as "T0".
    final class ReversedTeam: ManagedObject {
        override func value(forKey key: String) -> Any? {
            let value = super.value(forKey: key)
            guard key == "name", let name = value as? String, let n = Int(name.dropFirst()) else { return value }
            return "T\(8 - n)"
        }
    }

    @Test("a sort through a to-one orders unchanged teams by their stored names, in a fetch and a results controller, with and without pending changes")
    func sortThroughToOne() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Base.model(), classes: [(ReversedTeam.self, "Team")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Base.populate(context)
            context.reset()
            var request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "age < 40"))
            request.sortDescriptors = [FetchSortDescriptor(key: "team.name"), FetchSortDescriptor(key: "name")]
            func expected() throws -> [String] {
                // People aged under 40 (p0–p19, p50–p59), by their team's stored name (nil first), then name.
                let people = (0..<60).filter { $0 % 50 < 20 }.map { (n: $0, team: $0 % 10 < 9 ? "T\($0 % 10)" : nil) }
                return people.sorted { a, b in
                    if a.team != b.team { return (a.team ?? "") < (b.team ?? "") }
                    return "p\(a.n)" < "p\(b.n)"
                }.map { "p\($0.n)" }
            }
            func names(_ objects: [ManagedObject]) -> [String] { objects.map { $0.value(forKey: "name") as? String ?? "?" } }
            for pending in [false, true] {
                if pending { try Base.object(context, "Person", "p4").setValue(Int32(21), forKey: "age") }
                let fetched = try context.fetch(request)
                #expect(names(fetched) == (try expected()), "pending \(pending)")
                let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil)
                try controller.performFetch()
                #expect(names(try #require(controller.fetchedObjects)) == names(fetched), "pending \(pending)")
            }
        }
    }

    @Test("a results controller judges an unchanged related team by its stored name when a member changes, as a fetch does")
    func controllerMembership() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Base.model(), classes: [(ShoutingTeam.self, "Team")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Base.populate(context)
            context.reset()
            let request = FetchRequest(
                entityName: "Person", predicate: try FormatPredicate(format: "team.name == 'T3'"), sortDescriptors: [FetchSortDescriptor(key: "name")])
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil)
            try controller.performFetch()
            let delegate = RecordingDelegate(mirroring: controller)
            controller.delegate = delegate
            func agree(_ step: String, _ context: isolated ManagedObjectContext) throws {
                let shown = try #require(controller.fetchedObjects).map(\.objectID)
                let fetched = try context.fetch(request).map(\.objectID)
                #expect(shown == fetched, "\(step): controller \(shown.count), fetch \(fetched.count)")
                #expect(delegate.problems.isEmpty, "\(delegate.problems)")
            }
            try agree("fetched", context)
            #expect(controller.fetchedObjects?.count == 6)
            // A member changed: judged again, its unchanged team by the stored name (before,
            // through the class: "T3!", and it left the controller but not the fetch).
            try Base.object(context, "Person", "p13").setValue(Int32(70), forKey: "age")
            context.processPendingChanges()
            try agree("a member changed", context)
            #expect(controller.fetchedObjects?.count == 6)
            // The team itself changed (its rank): judged in memory, through the class.
            try Base.object(context, "Team", "T3").setValue(Int32(30), forKey: "rank")
            context.processPendingChanges()
            try agree("the team changed", context)
            #expect(controller.fetchedObjects?.isEmpty == true)
        }
    }

    @Test("a child context judging its parent's rows itself reads an unchanged team by its stored name, as the parent's judging does")
    func childJudgesAsParent() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Base.model(), classes: [(ShoutingTeam.self, "Team")])
        let parent = privateContext(coordinator)
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try Base.populate(context) }
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "team.name == 'T3'"))
            // Judged by the parent (the child changed nothing).
            #expect(try context.fetch(request).count == 6)
            // A change to a team has the child judge the parent's rows itself: T3, unchanged,
            // is read by its stored name (before, through the class: "T3!", nothing matched).
            try Base.object(context, "Team", "T5").setValue(Int32(50), forKey: "rank")
            #expect(try context.fetch(request).count == 6)
            #expect(try context.fetch(FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "team.name == 'T3!'"))).isEmpty)
        }
    }

    static func fetchedModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Attribute("rank", .int32)
                FetchedProperty("namesakes", entity: "Player", predicate: "nickname == $FETCH_SOURCE.name")
                // $FETCHED_PROPERTY alone can't be substituted: judged per candidate.
                FetchedProperty("judged", entity: "Player", predicate: "nickname == $FETCH_SOURCE.name AND $FETCHED_PROPERTY != nil")
            }
            Entity("Player") {
                Attribute("nickname", .string)
            }
        }
    }

    @Test("a fetched property reads $FETCH_SOURCE's key paths as a fetch reads the source, substituted or judged per candidate")
    func fetchedPropertySource() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.fetchedModel(), classes: [(ShoutingTeam.self, "Team")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Team").setValue("Reds", forKey: "name")
            for nickname in ["Reds", "Reds!", "Blues!"] {
                try context.insertNewObject(forEntityName: "Player").setValue(nickname, forKey: "nickname")
            }
            try context.save()
            context.reset()
            let team = try #require(try context.fetch(FetchRequest(entityName: "Team")).first)
            for key in ["namesakes", "judged"] {
                let found = (team.value(forKey: key) as? [ManagedObject])?.compactMap { $0.value(forKey: "nickname") as? String }
                #expect(found == ["Reds"], "\(key): the team's stored name")
            }
            // With pending changes the source is read in memory, through its class.
            let changed = try #require(try context.fetch(FetchRequest(entityName: "Team")).first)
            changed.setValue("Blues", forKey: "name")
            context.refresh(changed, mergeChanges: true)
            for key in ["namesakes", "judged"] {
                let found = (changed.value(forKey: key) as? [ManagedObject])?.compactMap { $0.value(forKey: "nickname") as? String }
                #expect(found == ["Blues!"], "\(key): the team's current name, through the class")
            }
        }
    }
}
