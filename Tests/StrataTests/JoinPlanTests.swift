import Foundation
import Strata
import StrataPredicate
import StrataTestSupport
import Testing

/// Comparisons through a relationship key path (`team.name == "T3"`,
/// `team.league.name == "L1"`, `ANY members.name == "p7"`), planned by fetching the
/// destination's matching objects first and reading their referrers
/// (`Specs/0008-fetch-requests.md`, Planner 3c). Every result is checked against the same
/// predicate forced through a full scan, with unsaved changes, stale objects and a pinned
/// generation in play.
@Suite("Join plans")
struct JoinPlanTests {
    /// League {name indexed} ← Team {name, rank, league} ← Person {name, age, team};
    /// `League.teams` and `Team.members` are the derived sides.
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("League") {
                Attribute("name", .string).indexed()
                Relationship("teams", to: "Team", inverse: "league", toMany: true)
            }
            Entity("Team") {
                Attribute("name", .string)
                Attribute("rank", .int32)
                Relationship("league", to: "League", inverse: "teams")
                Relationship("members", to: "Person", inverse: "team", toMany: true, deleteRule: .nullify)
            }
            Entity("Person") {
                Attribute("name", .string)
                Attribute("age", .int32).indexed()
                Relationship("team", to: "Team", inverse: "members")
                Relationship("tags", to: "Tag", inverse: "people", toMany: true)
            }
            Entity("Tag") {
                Attribute("label", .string)
                Relationship("people", to: "Person", inverse: "tags", toMany: true)
            }
        }
    }

    /// Whether person n has tag t (of 4): a many-to-many, `Person.tags` recorded.
    static func tagged(_ n: Int, _ t: Int) -> Bool { (n + t) % 4 == 0 || t == n % 3 }

    /// 3 leagues L0–L2; 9 teams T0–T8 (rank n, league n % 3, T8 in no league); 60 people
    /// p0–p59 (age 20 + n % 50, team n % 10: those with 9 have no team).
    static func populate(_ context: isolated ManagedObjectContext) throws {
        let leagues = try (0..<3).map { n in
            let league = try context.insertNewObject(forEntityName: "League")
            league.setValue("L\(n)", forKey: "name")
            return league
        }
        let teams = try (0..<9).map { n in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("T\(n)", forKey: "name")
            team.setValue(Int32(n), forKey: "rank")
            if n < 8 { team.setValue(leagues[n % 3], forKey: "league") }
            return team
        }
        let tags = try (0..<4).map { t in
            let tag = try context.insertNewObject(forEntityName: "Tag")
            tag.setValue("tag\(t)", forKey: "label")
            return tag
        }
        for n in 0..<60 {
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("p\(n)", forKey: "name")
            person.setValue(Int32(20 + n % 50), forKey: "age")
            if n % 10 < 9 { person.setValue(teams[n % 10], forKey: "team") }
            person.setValue(Set((0..<4).filter { tagged(n, $0) }.map { tags[$0] }), forKey: "tags")
        }
        try context.save()
    }

    static func object(_ context: isolated ManagedObjectContext, _ entity: String, _ name: String) throws -> ManagedObject {
        try #require(try context.fetch(FetchRequest(entityName: entity, predicate: try FormatPredicate(format: "name == %@", name))).first)
    }

    /// The plan of `format` on `entity`, its results, and whether its results (in order) and
    /// count equal the same predicate forced through a full scan (`NOT NOT`).
    static func check(
        _ context: isolated ManagedObjectContext, _ entity: String, _ format: String, _ arguments: [Any] = [],
        pending: Bool = true
    ) throws -> (plan: String, results: [ManagedObjectID], agrees: Bool) {
        let checked = try PlanAgreement.check(context, entity, format, arguments, pending: pending)
        return (checked.plan, checked.results, checked.agrees)
    }

    static func names(_ context: isolated ManagedObjectContext, _ ids: [ManagedObjectID]) throws -> [String] {
        try ids.map { try context.existingObject(with: $0).value(forKey: "name") as? String ?? "?" }
    }

    @Test("a to-one key path, a chain of them, a to-many with ANY, in every operator the planner serves")
    func plansAndResults() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Self.populate(context)
            let l1 = try Self.object(context, "League", "L1")
            let cases: [(entity: String, format: String, arguments: [Any], plan: String, count: Int)] = [
                ("Person", "team.name == 'T3'", [], "index scan Person.team IN (full scan Team then filter (name == \"T3\")) [1 object]", 6),
                ("Person", "'T3' == team.name", [], "index scan Person.team IN (full scan Team", 6),
                ("Person", "team.name IN {'T1', 'T2'}", [], "index scan Person.team IN (full scan Team", 12),
                ("Person", "team.name BEGINSWITH 'T'", [], "index scan Person.team IN (full scan Team", 54),
                ("Person", "team.name ==[c] 't4'", [], "index scan Person.team IN (full scan Team", 6),
                ("Person", "team.rank BETWEEN {2, 4}", [], "index scan Person.team IN (full scan Team", 18),
                ("Person", "team.rank > 6", [], "index scan Person.team IN (full scan Team", 12),
                ("Person", "team.name == 'T3' AND age > 40", [], "index scan Person.team IN (full scan Team", 3),
                ("Person", "team.name == 'T1' OR team.name == 'T2'", [], "index scan Person.team IN {Team/p", 12),
                ("Person", "team.league.name == 'L1'", [],
                 "index scan Person.team IN (index scan Team.league IN (index scan League.name = \"L1\") [1 object] then filter (league.name == \"L1\")) [3 objects] then filter (team.league.name == \"L1\")", 18),
                ("Person", "team.league == %@", [l1], "index scan Person.team IN (index scan Team.league = League/p", 18),
                ("Team", "ANY members.name == 'p7'", [], "index scan Team.members CONTAINS ANY (full scan Person then filter", 1),
                ("Team", "ANY members.age >= 65", [], "index scan Team.members CONTAINS ANY (index scan Person.age [65, ", 4),
                ("League", "ANY teams.members.name == 'p4'", [], "index scan League.teams CONTAINS ANY (index scan Team.members CONTAINS ANY", 1),
                ("Person", "team.name == 'nobody'", [], "no scan of Person", 0),
            ]
            // A recorded to-many (Person.tags) and the derived side of a many-to-many (Tag.people).
            let taggedOne = (0..<60).filter { Self.tagged($0, 1) }.count
            let teamsOfTagged = Set((0..<60).filter { Self.tagged($0, 2) && $0 % 10 < 9 }.map { $0 % 10 }).count
            let moreCases: [(entity: String, format: String, arguments: [Any], plan: String, count: Int)] = [
                ("Person", "ANY tags.label == 'tag1'", [], "index scan Person.tags CONTAINS ANY (full scan Tag then filter (label == \"tag1\")) [1 object]", taggedOne),
                ("Tag", "ANY people.name IN {'p3', 'p4'}", [], "index scan Tag.people CONTAINS ANY (full scan Person then filter (name IN", (0..<4).filter { Self.tagged(3, $0) || Self.tagged(4, $0) }.count),
                ("Team", "ANY members.tags.label == 'tag2'", [], "index scan Team.members CONTAINS ANY (index scan Person.tags CONTAINS ANY (full scan Tag", teamsOfTagged),
            ]
            for (entity, format, arguments, plan, count) in cases + moreCases {
                let (got, results, agrees) = try Self.check(context, entity, format, arguments)
                #expect(got.hasPrefix(plan), "\(entity) \(format): \(got)")
                #expect(agrees, "\(entity) \(format): \(results)")
                #expect(results.count == count, "\(entity) \(format): \(results.count) results")
            }
            // Not served: a comparison a nil path satisfies, `!=`, ALL/NONE, NOT, a direct
            // comparison through a to-many, a transient or unknown end.
            for format in [
                "team.name == nil", "team.name != 'T1'", "ALL members.name == 'p1'", "NONE members.name == 'p1'", "NOT (team.name == 'T1')",
                "team.name IN {'T1', nil}",
            ] {
                let entity = format.contains("members") ? "Team" : "Person"
                let (got, _, agrees) = try Self.check(context, entity, format)
                #expect(got.hasPrefix("full scan"), "\(format): \(got)")
                #expect(agrees, "\(format)")
            }
        }
    }

    @Test("unsaved renames, moves, inserts and deletes are judged as a full scan judges them; explain counts the changed targets")
    func pendingChanges() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Self.populate(context)
            let t3 = try Self.object(context, "Team", "T3")
            let t5 = try Self.object(context, "Team", "T5")
            // Unsaved: T3 renamed, p0 moved to T5, a new team with p1, T2 deleted (its people's team nullified).
            t3.setValue("Renamed", forKey: "name")
            try Self.object(context, "Person", "p0").setValue(t5, forKey: "team")
            let fresh = try context.insertNewObject(forEntityName: "Team")
            fresh.setValue("Fresh", forKey: "name")
            try Self.object(context, "Person", "p1").setValue(fresh, forKey: "team")
            context.delete(try Self.object(context, "Team", "T2"))
            // The inverse (derived) sides changed too: the teams p0 left and joined are changed objects.
            #expect(t5.hasChanges)

            let renamed = try Self.check(context, "Person", "team.name == 'Renamed'")
            #expect(renamed.agrees && renamed.results.count == 6, "\(renamed)")
            #expect(renamed.plan.contains("+ "), "the renamed team is a target: \(renamed.plan)")
            let old = try Self.check(context, "Person", "team.name == 'T3'")
            #expect(old.agrees && old.results.isEmpty, "\(old)")
            let moved = try Self.check(context, "Person", "team.name == 'T5'")
            #expect(moved.agrees && moved.results.count == 7)
            #expect(try Self.names(context, moved.results).contains("p0"))
            let joined = try Self.check(context, "Person", "team.name == 'Fresh'")
            #expect(joined.agrees)
            #expect(try Self.names(context, joined.results) == ["p1"])
            let deleted = try Self.check(context, "Person", "team.name == 'T2'")
            #expect(deleted.agrees && deleted.results.isEmpty)
            // p2 gains tag3 and loses its others (unsaved): the recorded to-many as the context holds it.
            let tag3 = try #require(try context.fetch(FetchRequest(entityName: "Tag", predicate: try FormatPredicate(format: "label == 'tag3'"))).first)
            try Self.object(context, "Person", "p2").setValue(Set([tag3]), forKey: "tags")
            for label in ["tag0", "tag1", "tag2", "tag3"] {
                let tagged = try Self.check(context, "Person", "ANY tags.label == %@", [label])
                #expect(tagged.agrees, "\(label): \(tagged)")
                #expect(try Self.names(context, tagged.results).contains("p2") == (label == "tag3"), "\(label)")
            }
            let members = try Self.check(context, "Team", "ANY members.name == 'p0'")
            #expect(members.agrees, "\(members)")
            #expect(try Self.names(context, members.results) == ["T5"])
            // Stored state only: the saved teams judged through the objects as the context holds them, as a full scan does.
            for format in ["team.name == 'Renamed'", "team.name == 'T3'", "team.name == 'T5'", "team.name == 'Fresh'"] {
                let stored = try Self.check(context, "Person", format, pending: false)
                #expect(stored.agrees, "\(format), stored state only: \(stored)")
            }
        }
    }

    @Test("an object the context holds with an older version than the store's is a target: the plan agrees with the full scan")
    func staleObjects() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        let viewer = privateContext(coordinator)
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            try Self.populate(context)
            // Held, so the fired T3 stays registered with its values between blocks.
            context.retainsRegisteredObjects = true
            // Fire T3 here: the viewer holds its values as of now.
            #expect(try Self.object(context, "Team", "T3").value(forKey: "name") as? String == "T3")
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Self.object(context, "Team", "T3").setValue("Elsewhere", forKey: "name")
            try context.save()
        }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            // Not merged: the viewer's T3 still reads "T3", the store "Elsewhere".
            let stale = try Self.check(context, "Person", "team.name == 'T3'")
            #expect(stale.agrees && stale.results.count == 6, "\(stale)")
            #expect(stale.plan.contains("+ 1 changed here"), "\(stale.plan)")
            let stored = try Self.check(context, "Person", "team.name == 'Elsewhere'")
            #expect(stored.agrees && stored.results.isEmpty, "\(stored)")
            // Once refreshed, the store's name.
            context.refreshAllObjects()
            let fresh = try Self.check(context, "Person", "team.name == 'Elsewhere'")
            #expect(fresh.agrees && fresh.results.count == 6, "\(fresh)")
            #expect(!fresh.plan.contains("changed here"), "\(fresh.plan)")
        }
    }

    @Test("a pinned generation reads the destination as it was")
    func pinnedGeneration() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        let reader = privateContext(coordinator)
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            try Self.populate(context)
            context.reset()
            try context.setQueryGenerationFrom(.current)
            _ = try context.count(for: FetchRequest(entityName: "Team"))
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Self.object(context, "League", "L1").setValue("Moved", forKey: "name")
            try Self.object(context, "Team", "T4").setValue("T4b", forKey: "name")
            try context.save()
        }
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            let league = try Self.check(context, "Person", "team.league.name == 'L1'")
            #expect(league.agrees && league.results.count == 18, "\(league)")
            let moved = try Self.check(context, "Person", "team.league.name == 'Moved'")
            #expect(moved.agrees && moved.results.isEmpty)
            let team = try Self.check(context, "Person", "team.name == 'T4'")
            #expect(team.agrees && team.results.count == 6)
            try context.setQueryGenerationFrom(nil)
            context.reset()
            let now = try Self.check(context, "Person", "team.league.name == 'Moved'")
            #expect(now.agrees && now.results.count == 18)
        }
    }

    @Test("a destination larger than the fetched entity and 4,096 objects, more than 4,096 targets or entries, or too many registered objects of it: left to a full scan")
    func limits() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Self.populate(context)
            for n in 0..<4100 {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("X\(n)", forKey: "name")
            }
            try context.save()
            // 4,109 teams, `name` unindexed, 60 people: scanning the teams to find the targets
            // costs more than scanning the people, so it is not planned.
            let unindexed = try Self.check(context, "Person", "team.name == 'T3'")
            #expect(unindexed.plan.hasPrefix("full scan Person"), "\(unindexed.plan)")
            #expect(unindexed.agrees && unindexed.results.count == 6)
            // 4,160 people: now the teams are no more than the people.
            for n in 0..<4100 {
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue("q\(n)", forKey: "name")
                person.setValue(Int32(30), forKey: "age")
            }
            try context.save()
            let scanned = try Self.check(context, "Person", "team.name == 'T3'")
            #expect(scanned.plan.hasPrefix("index scan Person.team IN (full scan Team then filter (name == \"T3\")) [1 object]"), "\(scanned.plan)")
            #expect(scanned.agrees && scanned.results.count == 6)
            // Through a to-many, the destination is scanned whatever its size (a full scan of the
            // teams would read every member of each).
            let members = try Self.check(context, "Team", "ANY members.name == 'p7'")
            #expect(members.plan.hasPrefix("index scan Team.members CONTAINS ANY (full scan Person"), "\(members.plan)")
            #expect(members.agrees && members.results.count == 1)
            // More than 4,096 targets, or index entries to read: not planned.
            let many = try Self.check(context, "Person", "team.name BEGINSWITH 'X'")
            #expect(many.plan.hasPrefix("full scan Person"), "\(many.plan)")
            #expect(many.agrees && many.results.isEmpty)
            let entries = try Self.check(context, "Team", "ANY members.age == 30")
            #expect(entries.plan.hasPrefix("full scan Team"), "\(entries.plan)")
            #expect(entries.agrees)
            // Leagues are few and indexed, but 4,109 registered teams (held here) are too many to check.
            context.retainsRegisteredObjects = true
            let teams = try context.fetch(FetchRequest(entityName: "Team"))
            #expect(teams.count == 4109)
            for team in teams { _ = team.value(forKey: "name") }
            let held = try Self.check(context, "Person", "team.league.name == 'L1'")
            #expect(held.plan.hasPrefix("full scan Person"), "\(held.plan)")
            #expect(held.agrees && held.results.count == 18)
        }
    }
}
