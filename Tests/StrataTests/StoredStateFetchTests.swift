import Foundation
import Strata
import StrataLog
import StrataPredicate
import StrataTestSupport
import Testing

/// A fetch with `includesPendingChanges = false` judges by the store's saved state, key
/// paths through relationships included (`Specs/0008-fetch-requests.md`, Pending changes
/// 3): `team.name` reads the team's stored row, `members` the store's references, whatever
/// the context holds unsaved or read earlier. Every case is checked planned (a join or a
/// reference plan) and forced through a full scan, with the count and the IDs.
@Suite("Fetches of the saved state through relationships")
struct StoredStateFetchTests {
    typealias Fixture = JoinPlanTests

    /// The names of the planned fetch's results, after checking that the plan, the forced
    /// full scan, `fetchObjectIDs` and `count(for:)` agree (and the plan starts `plan`).
    static func saved(
        _ context: isolated ManagedObjectContext, _ entity: String, _ format: String, _ arguments: [Any] = [], plan: String? = nil,
        pending: Bool = false
    ) throws -> [String] {
        let key = entity == "Tag" ? "label" : "name"
        let checked = try PlanAgreement.check(context, entity, format, arguments, pending: pending, pageKey: key)
        #expect(checked.agrees, "\(entity) \(format) pending=\(pending): plan \(checked.plan) gave \(checked.results), a full scan \(checked.forced)")
        if let plan { #expect(checked.plan.hasPrefix(plan), "\(entity) \(format): \(checked.plan)") }
        let names = try checked.results.map { try context.existingObject(with: $0).value(forKey: key) as? String ?? "?" }
        return names.sorted { $0.localizedStandardCompare($1) == .orderedAscending }
    }

    /// T3's people: p3, p13, … p53.
    static let teamThree = (0..<6).map { "p\($0 * 10 + 3)" }

    @Test("a team renamed here unsaved: without pending changes its people match its saved name, with them its new one")
    func unsavedRenameOfARelatedObject() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            try Fixture.object(context, "Team", "T3").setValue("Zebras", forKey: "name")
            #expect(try Self.saved(context, "Person", "team.name == 'T3'", plan: "index scan Person.team IN (full scan Team") == Self.teamThree)
            #expect(try Self.saved(context, "Person", "team.name == 'Zebras'").isEmpty)
            #expect(try Self.saved(context, "Person", "team.name == 'T3'", pending: true).isEmpty)
            #expect(try Self.saved(context, "Person", "team.name == 'Zebras'", pending: true) == Self.teamThree)
            // The join's plan finds no target "changed here" without pending changes.
            var request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "team.name == 'T3'"))
            request.includesPendingChanges = false
            #expect(!(try context.explain(request).description.contains("changed here")))
            // A sort through the relationship orders by the saved names too: p3's team
            // sorts before p4's as saved ("T3"), after it as renamed ("Zebras").
            var sorted = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "name IN {'p3', 'p4'}"))
            sorted.sortDescriptors = [FetchSortDescriptor(key: "team.name")]
            sorted.includesPendingChanges = false
            #expect(try context.fetch(sorted).map { $0.value(forKey: "name") as? String } == ["p3", "p4"])
            sorted.includesPendingChanges = true
            #expect(try context.fetch(sorted).map { $0.value(forKey: "name") as? String } == ["p4", "p3"])
        }
    }

    @Test("a person moved, a team deleted, unsaved: the saved references decide, both sides of the relationship")
    func unsavedMovesAndDeletes() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            let p3 = try Fixture.object(context, "Person", "p3")
            p3.setValue(try Fixture.object(context, "Team", "T4"), forKey: "team")
            // The moved person still matches its saved team's name; its new team's doesn't.
            #expect(try Self.saved(context, "Person", "team.name == 'T3'") == Self.teamThree)
            #expect(try Self.saved(context, "Person", "team.name == 'T4'") == (0..<6).map { "p\($0 * 10 + 4)" })
            // The derived side: T3 holds p3 as saved (a reference plan and a join).
            #expect(try Self.saved(context, "Team", "ANY members == %@", [p3], plan: "index scan Team.members CONTAINS") == ["T3"])
            #expect(try Self.saved(context, "Team", "ANY members.name == 'p3'", plan: "index scan Team.members CONTAINS ANY") == ["T3"])
            #expect(try Self.saved(context, "Team", "ANY members.name == 'p3'", pending: true) == ["T4"])
            // Counts through the derived side: every team holds 6 people as saved.
            #expect(try Self.saved(context, "Team", "members.@count == 6").count == 9)
            #expect(try Self.saved(context, "Team", "members.@count == 6", pending: true).count == 7)
            #expect(try Self.saved(context, "Team", "SUBQUERY(members, $m, $m.name == 'p3').@count == 1") == ["T3"])
            // A team deleted here (its people's `team` nullified, unsaved) is still theirs as saved.
            context.delete(try Fixture.object(context, "Team", "T5"))
            #expect(try Self.saved(context, "Person", "team.name == 'T5'") == (0..<6).map { "p\($0 * 10 + 5)" })
            #expect(try Self.saved(context, "Person", "team.name == 'T5'", pending: true).isEmpty)
            #expect(try Self.saved(context, "Person", "team.league.name == 'L2'").count == 12)
        }
    }

    @Test("another context's saved rename, not merged here: the store's name decides, not the stale object's")
    func staleObjectsHere() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        let viewer = privateContext(coordinator)
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            context.reset()
            context.retainsRegisteredObjects = true
            // Loaded here and kept: T3 with its name, and its members read through the
            // derived side.
            let team = try Fixture.object(context, "Team", "T3")
            #expect(team.value(forKey: "name") as? String == "T3")
            #expect((team.value(forKey: "members") as? Set<ManagedObject>)?.count == 6)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.object(context, "Team", "T3").setValue("Herons", forKey: "name")
            try Fixture.object(context, "Person", "p13").setValue(try Fixture.object(context, "Team", "T4"), forKey: "team")
            try context.save()
        }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            let moved = Self.teamThree.filter { $0 != "p13" }
            #expect(try Self.saved(context, "Person", "team.name == 'Herons'") == moved)
            #expect(try Self.saved(context, "Person", "team.name == 'T3'").isEmpty)
            #expect(try Self.saved(context, "Team", "ANY members.name == 'p13'") == ["T4"])
            // T3 is returned as the context holds it: by the name it read before.
            #expect(try Self.saved(context, "Team", "members.@count == 5") == ["T3"])
            // With pending changes, the stale T3 is judged as the context holds it (p13's
            // row, read since, names T4).
            #expect(try Self.saved(context, "Person", "team.name == 'T3'", pending: true) == moved)
        }
    }

    @Test("a context pinned to a query generation judges related objects as of it")
    func pinnedGeneration() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        let pinned = privateContext(coordinator)
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            try context.setQueryGenerationFrom(.current)
            #expect(try Self.saved(context, "Person", "team.name == 'T3'") == Self.teamThree)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.object(context, "Team", "T3").setValue("Herons", forKey: "name")
            try Fixture.object(context, "Person", "p23").setValue(nil, forKey: "team")
            try context.save()
        }
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.saved(context, "Person", "team.name == 'T3'") == Self.teamThree)
            #expect(try Self.saved(context, "Person", "team.name == 'Herons'").isEmpty)
            #expect(try Self.saved(context, "Team", "ANY members.name == 'p23'") == ["T3"])
            #expect(try Self.saved(context, "Team", "members.@count == 6").count == 9)
        }
    }

    @Test("a many-to-many's both sides and a chain of to-ones, each member changed here, read as saved")
    func manyToManyAndChains() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            let tag1 = try #require(try context.fetch(FetchRequest(entityName: "Tag", predicate: try FormatPredicate(format: "label == 'tag1'"))).first)
            let taggedOne = (0..<60).filter { Fixture.tagged($0, 1) }.map { "p\($0)" }
            // Unsaved: tag1 relabelled, taken off every person holding it, a league renamed.
            tag1.setValue("renamed", forKey: "label")
            tag1.setValue(Set<ManagedObject>(), forKey: "people")
            try Fixture.object(context, "League", "L1").setValue("Renamed", forKey: "name")
            #expect(try Self.saved(context, "Person", "ANY tags.label == 'tag1'") == taggedOne)
            #expect(try Self.saved(context, "Person", "ANY tags.label == 'tag1'", pending: true).isEmpty)
            #expect(try Self.saved(context, "Tag", "people.@count == %d", [taggedOne.count]).contains("renamed"), "the objects returned show their current values")
            #expect(try Self.saved(context, "Person", "team.league.name == 'L1'").count == 18)
            #expect(try Self.saved(context, "Person", "team.league.name == 'L1'", pending: true).isEmpty)
        }
    }

    @Test("dictionary results without pending changes hold the saved values, key paths and groups included")
    func dictionariesOfTheSavedState() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            try Fixture.object(context, "Team", "T3").setValue("Zebras", forKey: "name")
            let p3 = try Fixture.object(context, "Person", "p3")
            p3.setValue("renamed", forKey: "name")
            p3.setValue(try Fixture.object(context, "Team", "T4"), forKey: "team")
            var request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "name IN {'p3', 'p13'}"))
            request.sortDescriptors = [FetchSortDescriptor(key: "name")]
            request.propertiesToFetch = ["name", "team.name"]
            request.includesPendingChanges = false
            let rows = try context.fetchDictionaries(request)
            #expect(rows.map { $0["name"] as? String } == ["p13", "p3"])
            #expect(rows.map { $0["team.name"] as? String } == ["T3", "T3"])
            // With pending changes: the renamed p3 no longer matches; p13's team is "Zebras".
            request.includesPendingChanges = true
            let current = try context.fetchDictionaries(request)
            #expect(current.map { $0["name"] as? String } == ["p13"])
            #expect(current.map { $0["team.name"] as? String } == ["Zebras"])
            // Grouped by a key path through the relationship, counted: the saved teams.
            var grouped = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "age < 25"))
            grouped.propertiesToFetch = ["team.name", .expression(name: "people", .count, keyPath: "name")]
            grouped.propertiesToGroupBy = ["team.name"]
            grouped.sortDescriptors = [FetchSortDescriptor(key: "team.name")]
            grouped.includesPendingChanges = false
            let groups = try context.fetchDictionaries(grouped)
            #expect(groups.map { $0["team.name"] as? String } == ["T0", "T1", "T2", "T3", "T4"])
            #expect(groups.map { $0["people"] as? Int64 } == [2, 2, 2, 2, 2])
        }
    }

    /// A batch update setting the age of the people `format` selects to 99, counting them.
    static func ageUpdate(_ format: String) throws -> BatchUpdateRequest {
        var update = BatchUpdateRequest(entityName: "Person")
        update.predicate = try FormatPredicate(format: format)
        update.propertiesToUpdate = ["age": Int32(99)]
        update.resultType = .count
        return update
    }

    @Test("a batch request's selection through a relationship reads the saved state: an unsaved rename here takes no part")
    func batchSelectionThroughARelationship() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            try Fixture.object(context, "Team", "T3").setValue("Zebras", forKey: "name")
            // Before session 23 the unsaved name decided: T3's six people were updated.
            #expect(try context.execute(try Self.ageUpdate("team.name == 'Zebras'")).count == 0)
            #expect(try context.execute(try Self.ageUpdate("team.name == 'T3'")).count == 6)
            var delete = BatchDeleteRequest(fetchRequest: FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "ANY tags.label == 'tag0' AND team.name == 'T3'")))
            delete.resultType = .count
            #expect(try context.execute(delete).count == (0..<60).filter { $0 % 10 == 3 && Fixture.tagged($0, 0) }.count)
        }
    }

    @Test("a batch request in a context pinned to a query generation selects through relationships as the store is now")
    func batchSelectionInAPinnedContext() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        let pinned = privateContext(coordinator)
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            try context.setQueryGenerationFrom(.current)
            _ = try context.count(for: FetchRequest(entityName: "Person"))
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.object(context, "Team", "T3").setValue("Herons", forKey: "name")
            try context.save()
        }
        try await pinned.perform { (context: isolated ManagedObjectContext) throws in
            // The pinned fetch still sees "T3"; the batch selects in the store as it is.
            #expect(try Self.saved(context, "Person", "team.name == 'T3'") == Self.teamThree)
            #expect(try context.execute(try Self.ageUpdate("team.name == 'Herons'")).count == 6)
            #expect(try context.execute(try Self.ageUpdate("team.name == 'T3'")).count == 0)
        }
    }

    @Test("a child context's dictionaries without pending changes hold its parent's current values: the parent is its store")
    func childContextDictionaries() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        let parent = privateContext(coordinator)
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            try Fixture.object(context, "Team", "T3").setValue("Zebras", forKey: "name")
            try context.insertNewObject(forEntityName: "Team").setValue("T9", forKey: "name")
        }
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "rank == nil OR rank == 3"))
            request.propertiesToFetch = ["name"]
            request.sortDescriptors = [FetchSortDescriptor(key: "name")]
            request.includesPendingChanges = false
            #expect(try context.fetchDictionaries(request).map { $0["name"] as? String } == ["T9", "Zebras"])
        }
    }

    @Test("a save committed while a fetch without pending changes runs isn't half seen: related rows are read as of the fetch's snapshot")
    func saveDuringTheFetch() async throws {
        let model = try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("members", to: "Person", inverse: "team", toMany: true)
            }
            Entity("Person") {
                Attribute("name", .string)
                Attribute("probe", .int64).transient()
                Relationship("team", to: "Team", inverse: "members")
            }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model, classes: [(CommittingProbe.self, "Person")])
        let log = try #require(coordinator.persistentStores.first).log
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let teams = try (0..<3).map { n in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("T\(n)", forKey: "name")
                return team
            }
            for n in 0..<9 {
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue("p\(n)", forKey: "name")
                person.setValue(teams[n % 3], forKey: "team")
            }
            try context.save()
            let t2 = try #require(UInt64(teams[2].objectID.uriRepresentation().lastPathComponent.dropFirst()))
            context.reset()
            // The first person judged reads `probe`, which commits T2's rename in the middle
            // of the fetch; T2's row is read after it.
            CommittingProbe.armRename(StoredObjectID(entity: "Team", primaryKey: t2), to: "Renamed", in: log)
            // (The OR keeps the join plan, which would read T2 before the first person, out.)
            var request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "probe == 1 AND (team.name == 'T2' OR name == 'nobody')"))
            request.includesPendingChanges = false
            #expect(try context.explain(request).description.hasPrefix("full scan Person"))
            let found = try context.fetch(request).compactMap { $0.value(forKey: "name") as? String }
            #expect(CommittingProbe.fired, "the probe committed during the fetch")
            #expect(found == ["p2", "p5", "p8"], "T2 as of the fetch's snapshot, not renamed by the save committed meanwhile")
            #expect(try log.read { try $0.head } == 2)
            // Dictionaries: the rows' values are read as of the fetch's snapshot too, so the
            // team matched as "T2" is "T2" in the rows (before, read after the fetch).
            context.reset()
            CommittingProbe.armRename(StoredObjectID(entity: "Team", primaryKey: t2), to: "Renamed again", in: log)
            var dictionaries = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "probe == 1 AND (team.name == 'Renamed' OR name == 'nobody')"))
            dictionaries.includesPendingChanges = false
            dictionaries.propertiesToFetch = ["name", "team.name"]
            dictionaries.sortDescriptors = [FetchSortDescriptor(key: "name")]
            let rows = try context.fetchDictionaries(dictionaries)
            #expect(CommittingProbe.fired)
            #expect(rows.map { $0["name"] as? String } == ["p2", "p5", "p8"])
            #expect(rows.map { $0["team.name"] as? String } == ["Renamed", "Renamed", "Renamed"], "\(rows)")
        }
    }
}

/// A person whose transient `probe` reads 1, running the armed action (once) the first
/// time it is read: a save committed in the middle of a fetch.
final class CommittingProbe: ManagedObject {
    nonisolated(unsafe) static var action: (() throws -> Void)?
    nonisolated(unsafe) static var fired = false

    static func arm(_ action: @escaping () throws -> Void) {
        self.action = action
        fired = false
    }

    /// Arms a commit, by another writer, renaming `team` to `name`.
    static func armRename(_ team: StoredObjectID, to name: String, in log: EventLog) {
        arm {
            var rename = TransactionDraft(author: "elsewhere")
            rename.update(.stored(team), values: ["name": .attribute(.string(name))])
            _ = try log.commit(rename)
        }
    }

    override func value(forKey key: String) -> Any? {
        guard key == "probe" else { return super.value(forKey: key) }
        if let action = Self.action {
            Self.action = nil
            Self.fired = (try? action()) != nil
        }
        return Int64(1)
    }
}
