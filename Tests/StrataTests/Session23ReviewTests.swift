import Foundation
import Strata
import StrataPredicate
import StrataTestSupport
import Testing

/// Review of session 23's saved-state fetches (`Specs/0008-fetch-requests.md`, Pending
/// changes 3): a fetch with `includesPendingChanges = false` judges key paths through
/// relationships by the store's saved state, planned or scanned alike.
@Suite("Session 23 review: fetches of the saved state")
struct Session23ReviewTests {
    typealias Fixture = JoinPlanTests

    /// Owner {name, mood (transient), items (ordered, recorded), badge (one-to-one, the
    /// derived side), favorite (no inverse), cachedBest (transient to-one)};
    /// Item (abstract) {title, owner (derived)} with Book {pages} and Disc {minutes};
    /// Badge {code, holder (recorded)}.
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Owner") {
                Attribute("name", .string)
                Attribute("mood", .string).transient()
                Relationship("items", to: "Item", inverse: "owner", toMany: true, ordered: true)
                Relationship("badge", to: "Badge", inverse: "holder")
                Relationship("favorite", to: "Item")
                Relationship("cachedBest", to: "Item").transient()
            }
            Entity("Item", abstract: true) {
                Attribute("title", .string)
                Relationship("owner", to: "Owner", inverse: "items")
            }
            Entity("Book", parent: "Item") {
                Attribute("pages", .int32)
            }
            Entity("Disc", parent: "Item") {
                Attribute("minutes", .int32)
            }
            Entity("Badge") {
                Attribute("code", .string)
                Relationship("holder", to: "Owner", inverse: "badge")
            }
        }
    }

    /// Owners o0–o3; o_n holds items b_n (a book), d_n (a disc) in that order, badge B_n,
    /// favorite d_n.
    static func populate(_ context: isolated ManagedObjectContext) throws {
        for n in 0..<4 {
            let owner = try context.insertNewObject(forEntityName: "Owner")
            owner.setValue("o\(n)", forKey: "name")
            let book = try context.insertNewObject(forEntityName: "Book")
            book.setValue("b\(n)", forKey: "title")
            book.setValue(Int32(100 + n), forKey: "pages")
            let disc = try context.insertNewObject(forEntityName: "Disc")
            disc.setValue("d\(n)", forKey: "title")
            disc.setValue(Int32(60 + n), forKey: "minutes")
            owner.setValue([book, disc], forKey: "items")
            owner.setValue(disc, forKey: "favorite")
            let badge = try context.insertNewObject(forEntityName: "Badge")
            badge.setValue("B\(n)", forKey: "code")
            badge.setValue(owner, forKey: "holder")
        }
        try context.save()
    }

    static func one(_ context: isolated ManagedObjectContext, _ entity: String, _ format: String) throws -> ManagedObject {
        try #require(try context.fetch(FetchRequest(entityName: entity, predicate: try FormatPredicate(format: format))).first)
    }

    /// The names (`key`) of the results without pending changes, after checking the plan
    /// agrees with a forced full scan.
    static func saved(
        _ context: isolated ManagedObjectContext, _ entity: String, _ format: String, _ arguments: [Any] = [], key: String,
        pending: Bool = false
    ) throws -> [String] {
        let checked = try PlanAgreement.check(context, entity, format, arguments, pending: pending, pageKey: key)
        #expect(checked.agrees, "\(entity) \(format) pending=\(pending): plan \(checked.plan) gave \(checked.results), a full scan \(checked.forced)")
        return try checked.results.map { try context.existingObject(with: $0).value(forKey: key) as? String ?? "?" }.sorted()
    }

    @Test("@distinctUnionOfObjects over related objects read as saved keeps one of each, as over the context's objects")
    func distinctUnionOfSavedObjects() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            // Every team's six members name one team. Before, the saved state's related
            // objects (not hashable) were never merged: six "distinct" teams, no match.
            let format = "count(members.@distinctUnionOfObjects.team) == 1"
            let teams = (0..<9).map { "T\($0)" }
            #expect(try Self.saved(context, "Team", format, key: "name", pending: true) == teams)
            #expect(try Self.saved(context, "Team", format, key: "name") == teams)
            #expect(try Self.saved(context, "League", "count(teams.members.@distinctUnionOfObjects.team) == 3", key: "name").count == 2)
        }
    }

    @Test("a sort by a to-one object orders the same without pending changes as with them, nothing changed")
    func sortByAToOneObject() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            var request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "name IN {'p3', 'p1', 'p2', 'p14', 'p9'}"))
            request.sortDescriptors = [FetchSortDescriptor(key: "team", ascending: false)]
            let live = try context.fetch(request).map { $0.value(forKey: "name") as? String ?? "?" }
            #expect(live == ["p14", "p3", "p2", "p1", "p9"])
            // Before, the related objects read as saved all sorted alike: store order.
            request.includesPendingChanges = false
            #expect(try context.fetch(request).map { $0.value(forKey: "name") as? String ?? "?" } == live)
        }
    }

    @Test("dictionaries without pending changes read transient properties from the object, as the predicate does")
    func transientsInSavedDictionaries() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Self.populate(context)
            let o1 = try Self.one(context, "Owner", "name == 'o1'")
            o1.setValue("happy", forKey: "mood")
            let b1 = try Self.one(context, "Item", "title == 'b1'")
            o1.setValue(b1, forKey: "cachedBest")
            #expect(try Self.saved(context, "Owner", "mood == 'happy'", key: "name") == ["o1"])
            #expect(try Self.saved(context, "Book", "owner.mood == 'happy'", key: "title") == ["b1"])
            #expect(try Self.saved(context, "Owner", "cachedBest.title == 'b1'", key: "name") == ["o1"])
            var request = FetchRequest(entityName: "Owner", predicate: try FormatPredicate(format: "mood == 'happy'"))
            request.propertiesToFetch = ["name", "mood", "cachedBest", "cachedBest.title"]
            for pending in [true, false] {
                request.includesPendingChanges = pending
                // Before, without pending changes: no mood, and the transient relationship
                // was asked of the store ("entity Owner has no stored property").
                let rows = try context.fetchDictionaries(request)
                #expect(rows.count == 1)
                #expect(rows.first?["name"] as? String == "o1")
                #expect(rows.first?["mood"] as? String == "happy", "pending \(pending)")
                #expect(rows.first?["cachedBest"] as? ManagedObjectID == b1.objectID, "pending \(pending)")
                #expect(rows.first?["cachedBest.title"] as? String == "b1", "pending \(pending)")
            }
        }
    }

    @Test("saved dictionaries read a fault's fetched row, and a stale object's row from the store")
    func savedDictionariesOfFaultsAndStaleObjects() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        let viewer = privateContext(coordinator)
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            context.reset()
            context.retainsRegisteredObjects = true
            // p3 fired here (its values kept), p13 a fault.
            #expect(try Fixture.object(context, "Person", "p3").value(forKey: "age") as? Int32 == 23)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["p3", "p13"] { try Fixture.object(context, "Person", name).setValue(Int32(7), forKey: "age") }
            try context.save()
        }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "name IN {'p3', 'p13'}"))
            request.propertiesToFetch = ["name", "age"]
            request.sortDescriptors = [FetchSortDescriptor(key: "name")]
            request.includesPendingChanges = false
            #expect(try context.fetchDictionaries(request).map { $0["age"] as? Int32 } == [7, 7])
            // With pending changes the stale p3 shows the value it holds.
            request.includesPendingChanges = true
            #expect(try context.fetchDictionaries(request).map { $0["age"] as? Int32 } == [7, 23])
        }
    }

    @Test("a cycle through a relationship and its inverse, SELF among related objects, read as saved")
    func cycles() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            try Fixture.object(context, "Person", "p3").setValue(try Fixture.object(context, "Team", "T4"), forKey: "team")
            #expect(try Self.saved(context, "Person", "SELF IN team.members", key: "name").count == 54)
            #expect(try Self.saved(context, "Person", "ANY team.members.name == 'p3'", key: "name") == Fixture.teamThreeSorted)
            // Only the six people without a team (nil == nil).
            #expect(try Self.saved(context, "Person", "team.name == team.league.name", key: "name").count == 6)
            #expect(try Self.saved(context, "Person", "SUBQUERY(team.members, $m, $m.team == $m.team AND $m.name == 'p3').@count == 1", key: "name") == Fixture.teamThreeSorted)
            #expect(try Self.saved(context, "Team", "ALL members.team.name == name", key: "name").count == 9)
            #expect(try Self.saved(context, "Team", "NONE members.name == 'p3'", key: "name").count == 8)
        }
    }

    @Test("an in-memory store's saved state")
    func inMemoryStore() async throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Fixture.model())
        try coordinator.addPersistentStore(type: .inMemory)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            try Fixture.object(context, "Team", "T3").setValue("Zebras", forKey: "name")
            #expect(try Self.saved(context, "Person", "team.name == 'T3'", key: "name") == Fixture.teamThreeSorted)
            #expect(try Self.saved(context, "Team", "ANY members.name == 'p3'", key: "name") == ["Zebras"])
        }
    }

    @Test("sub-entities, an ordered to-many, a one-to-one's derived side, a relationship without an inverse: read as saved")
    func shapesOfRelationships() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Self.populate(context)
            let o1 = try Self.one(context, "Owner", "name == 'o1'")
            o1.setValue("renamed", forKey: "name")
            let d1 = try Self.one(context, "Item", "title == 'd1'")
            let b1 = try Self.one(context, "Item", "title == 'b1'")
            o1.setValue([d1, b1], forKey: "items")
            d1.setValue("dd", forKey: "title")
            let badge = try Self.one(context, "Badge", "code == 'B1'")
            badge.setValue("XX", forKey: "code")
            badge.setValue(try Self.one(context, "Owner", "name == 'o2'"), forKey: "holder")
            #expect(try Self.saved(context, "Item", "owner.name == 'o1'", key: "title") == ["b1", "dd"])
            #expect(try Self.saved(context, "Book", "owner.name == 'o1'", key: "title") == ["b1"])
            #expect(try Self.saved(context, "Owner", "items[FIRST].title == 'b1'", key: "name") == ["renamed"])
            #expect(try Self.saved(context, "Owner", "ANY items.title == 'd1'", key: "name") == ["renamed"])
            #expect(try Self.saved(context, "Owner", "badge.code == 'B1'", key: "name") == ["renamed"])
            #expect(try Self.saved(context, "Owner", "badge == %@", [badge], key: "name") == ["renamed"])
            #expect(try Self.saved(context, "Badge", "holder.name == 'o1'", key: "code") == ["XX"])
            #expect(try Self.saved(context, "Owner", "favorite.title == 'd1'", key: "name") == ["renamed"])
            #expect(try Self.saved(context, "Owner", "items.@count == 2", key: "name").count == 4)
            #expect(try Self.saved(context, "Owner", "SUBQUERY(items, $i, $i.title == 'd1').@count == 1", key: "name") == ["renamed"])
            #expect(try Self.saved(context, "Owner", "items.@max.title == 'd1'", key: "name") == ["renamed"])
            var request = FetchRequest(entityName: "Item", predicate: try FormatPredicate(format: "title IN {'b1', 'd1', 'dd'}"))
            request.propertiesToFetch = ["title", "owner.name", "owner"]
            request.sortDescriptors = [FetchSortDescriptor(key: "title")]
            request.includesPendingChanges = false
            let rows = try context.fetchDictionaries(request)
            #expect(rows.map { $0["title"] as? String } == ["b1", "d1"])
            #expect(rows.map { $0["owner.name"] as? String } == ["o1", "o1"])
            #expect(rows.map { $0["owner"] as? ManagedObjectID } == [o1.objectID, o1.objectID])
        }
    }
}

extension JoinPlanTests {
    /// T3's people by name, sorted as strings.
    static var teamThreeSorted: [String] { (0..<6).map { "p\($0 * 10 + 3)" }.sorted() }
}

/// The saved state as an oracle: a fetch without pending changes returns, in a context
/// holding anything (unsaved changes, stale objects and derived sides, a pinned
/// generation), what a fresh context with nothing registered returns from the same
/// store state — which objects, their order, a page, the IDs and the count.
extension Session23ReviewTests {

    static let oracleCases: [(String, String, [String])] = [
        ("Person", "team.name == 'T3'", ["team.name", "name"]),
        ("Person", "team.name BEGINSWITH 'T' AND age > 40", ["team.name", "name"]),
        ("Person", "team.league.name == 'L1'", ["team.league.name", "name"]),
        ("Person", "team.league.name == 'L1' OR team.rank > 5", ["team.rank", "name"]),
        ("Person", "ANY tags.label == 'tag1'", ["name"]),
        ("Person", "ANY tags.people.name == 'p3'", ["name"]),
        ("Person", "SUBQUERY(tags, $t, $t.label == 'tag2' AND $t.people.@count > 5).@count > 0", ["name"]),
        ("Person", "team.members.@count == 6", ["name"]),
        ("Person", "SELF IN team.members", ["name"]),
        ("Person", "team == nil", ["name"]),
        ("Person", "team.name == nil", ["name"]),
        ("Person", "team.name != 'T3'", ["team.name", "name"]),
        ("Person", "NOT (team.name IN {'T1', 'T3'})", ["team.name", "name"]),
        ("Person", "ALL tags.label BEGINSWITH 'tag'", ["name"]),
        ("Person", "NONE tags.label == 'tag0'", ["name"]),
        ("Person", "tags.@count >= 2", ["tags.@count", "name"]),
        ("Person", "team.members.@max.age > 65", ["name"]),
        ("Team", "ANY members.name == 'p3'", ["name"]),
        ("Team", "ANY members.name IN {'p3', 'p13', 'p4'}", ["name"]),
        ("Team", "members.@count == 6", ["members.@count", "name"]),
        ("Team", "members.@count != 6", ["name"]),
        ("Team", "SUBQUERY(members, $m, $m.age > 40).@count >= 3", ["name"]),
        ("Team", "ANY members.tags.label == 'tag3'", ["name"]),
        ("Team", "league.name == 'L0'", ["league.name", "name"]),
        ("Team", "ALL members.team.name == name", ["name"]),
        ("Team", "members.@sum.age > 250", ["members.@sum.age", "name"]),
        ("Team", "members.@avg.age > 40", ["name"]),
        ("League", "ANY teams.members.name == 'p4'", ["name"]),
        ("League", "teams.@count == 3", ["name"]),
        ("League", "ANY teams.name == 'T3'", ["name"]),
        ("Tag", "ANY people.team.name == 'T3'", ["label"]),
        ("Tag", "people.@count > 20", ["label"]),
        ("Tag", "ANY people.name == 'p3'", ["label"]),
        ("Team", "count(members.@distinctUnionOfObjects.team) == 1", ["name"]),
        ("Person", "age > 30", ["team", "name"]),
    ]

    /// Every case's results: the planned fetch (sorted by the keys, descending, through
    /// relationships), after checking it against `fetchObjectIDs`, `count(for:)` and the
    /// same predicate forced through a full scan, and a page of it (offset 1, limit 3).
    static func oracleResults(_ context: isolated ManagedObjectContext, pending: Bool) throws -> [String] {
        var out: [String] = []
        for (entity, format, sort) in oracleCases {
            var request = FetchRequest(entityName: entity, predicate: try FormatPredicate(format: format))
            request.includesPendingChanges = pending
            request.sortDescriptors = sort.map { FetchSortDescriptor(key: $0, ascending: false) }
            let ids = try context.fetch(request).map(\.objectID.description)
            let idOnly = try context.fetchObjectIDs(request).map(\.description)
            let count = try context.count(for: request)
            var scan = request
            scan.predicate = FormatPredicate(.not(.not(try FormatPredicate(format: format).node)))
            let scanned = try context.fetch(scan).map(\.objectID.description)
            var page = request
            page.fetchOffset = 1
            page.fetchLimit = 3
            let paged = try context.fetch(page).map(\.objectID.description)
            let plan = try context.explain(request).description
            #expect(ids == idOnly && ids == scanned && count == ids.count, "\(entity) \(format) pending \(pending): plan \(plan)")
            out.append("\(entity) \(format): \(ids.joined(separator: ",")) | \(paged.joined(separator: ","))")
        }
        return out
    }

    @Test("without pending changes, a context holding unsaved renames, moves, deletes and inserts gets what a fresh context gets from the store")
    func oracleWithUnsavedChanges() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        let oracle = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            context.reset()
            return try Self.oracleResults(context, pending: true)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            let t3 = try Fixture.object(context, "Team", "T3")
            t3.setValue("Zebras", forKey: "name")
            t3.setValue(Int32(77), forKey: "rank")
            t3.setValue(try Fixture.object(context, "League", "L2"), forKey: "league")
            try Fixture.object(context, "Person", "p3").setValue(try Fixture.object(context, "Team", "T4"), forKey: "team")
            try Fixture.object(context, "Person", "p13").setValue(nil, forKey: "team")
            try Fixture.object(context, "Person", "p4").setValue(Int32(99), forKey: "age")
            try Fixture.object(context, "Person", "p4").setValue("renamed", forKey: "name")
            context.delete(try Fixture.object(context, "Team", "T5"))
            context.delete(try Fixture.object(context, "Person", "p6"))
            try Fixture.object(context, "League", "L0").setValue("LL", forKey: "name")
            let tag = try #require(try context.fetch(FetchRequest(entityName: "Tag", predicate: try FormatPredicate(format: "label == 'tag1'"))).first)
            tag.setValue("tagX", forKey: "label")
            tag.setValue(Set<ManagedObject>(), forKey: "people")
            let newPerson = try context.insertNewObject(forEntityName: "Person")
            newPerson.setValue("p3", forKey: "name")
            newPerson.setValue(try Fixture.object(context, "Team", "T4"), forKey: "team")
            let newTeam = try context.insertNewObject(forEntityName: "Team")
            newTeam.setValue("T3", forKey: "name")
            try Fixture.object(context, "Person", "p23").setValue(newTeam, forKey: "team")
            let got = try Self.oracleResults(context, pending: false)
            for (a, b) in zip(got, oracle) where a != b { Issue.record("saved \(a)\n oracle \(b)") }
        }
    }

    @Test("without pending changes, a context holding objects and derived sides read before another context's save gets what a fresh context gets")
    func oracleWithStaleObjects() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        let viewer = privateContext(coordinator)
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            context.reset()
            context.retainsRegisteredObjects = true
            _ = try Self.oracleResults(context, pending: true)
            for team in try context.fetch(FetchRequest(entityName: "Team")) { _ = team.value(forKey: "members"); _ = team.value(forKey: "name") }
            for p in try context.fetch(FetchRequest(entityName: "Person")) { _ = p.value(forKey: "tags"); _ = p.value(forKey: "name") }
            for t in try context.fetch(FetchRequest(entityName: "Tag")) { _ = t.value(forKey: "people") }
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let t3 = try Fixture.object(context, "Team", "T3")
            t3.setValue("Zebras", forKey: "name")
            t3.setValue(try Fixture.object(context, "League", "L2"), forKey: "league")
            try Fixture.object(context, "Person", "p3").setValue(try Fixture.object(context, "Team", "T4"), forKey: "team")
            try Fixture.object(context, "Person", "p13").setValue(nil, forKey: "team")
            try Fixture.object(context, "Person", "p4").setValue("renamed", forKey: "name")
            context.delete(try Fixture.object(context, "Team", "T5"))
            context.delete(try Fixture.object(context, "Person", "p6"))
            let tag = try #require(try context.fetch(FetchRequest(entityName: "Tag", predicate: try FormatPredicate(format: "label == 'tag1'"))).first)
            tag.setValue(Set<ManagedObject>(), forKey: "people")
            try context.save()
        }
        let oracle = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Self.oracleResults(context, pending: true)
        }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            let got = try Self.oracleResults(context, pending: false)
            for (a, b) in zip(got, oracle) where a != b { Issue.record("saved \(a)\n oracle \(b)") }
        }
    }

    @Test("without pending changes, a pinned context with unsaved changes gets what a fresh context got at its generation")
    func oracleInAPinnedContext() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Fixture.model())
        let viewer = privateContext(coordinator)
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.populate(context)
            context.reset()
            context.retainsRegisteredObjects = true
            try context.setQueryGenerationFrom(.current)
            _ = try Self.oracleResults(context, pending: true)
        }
        let oracle = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Self.oracleResults(context, pending: true)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let t3 = try Fixture.object(context, "Team", "T3")
            t3.setValue("Zebras", forKey: "name")
            t3.setValue(try Fixture.object(context, "League", "L2"), forKey: "league")
            try Fixture.object(context, "Person", "p3").setValue(try Fixture.object(context, "Team", "T4"), forKey: "team")
            try Fixture.object(context, "Person", "p13").setValue(nil, forKey: "team")
            context.delete(try Fixture.object(context, "Team", "T5"))
            context.delete(try Fixture.object(context, "Person", "p6"))
            let tag = try #require(try context.fetch(FetchRequest(entityName: "Tag", predicate: try FormatPredicate(format: "label == 'tag1'"))).first)
            tag.setValue(Set<ManagedObject>(), forKey: "people")
            try context.save()
        }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            try Fixture.object(context, "Team", "T4").setValue("Zebras", forKey: "name")
            try Fixture.object(context, "Person", "p7").setValue(try Fixture.object(context, "Team", "T1"), forKey: "team")
            let got = try Self.oracleResults(context, pending: false)
            for (a, b) in zip(got, oracle) where a != b { Issue.record("saved \(a)\n oracle \(b)") }
        }
    }
}
