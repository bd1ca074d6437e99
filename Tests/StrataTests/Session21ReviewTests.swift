import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// Review of compound indexes and relationship equality in the planner: each test is a
/// case where a fetch or a count disagreed with a full scan filtered in memory.
@Suite("Session 21 review: compound indexes and relationship equality")
struct Session21ReviewTests {
    /// The names of the objects `request` fetches, sorted, and what every object of the entity
    /// judged in memory by the request's predicate gives, sorted; with `count(for:)`.
    static func compare(
        _ context: isolated ManagedObjectContext, _ request: FetchRequest<ManagedObject>
    ) throws -> (got: [String], want: [String], count: Int) {
        let got = try context.fetch(request).map { $0.value(forKey: "name") as? String ?? "?" }.sorted()
        var all = FetchRequest(entityName: request.entityName)
        all.includesSubentities = request.includesSubentities
        all.includesPendingChanges = request.includesPendingChanges
        let want = try context.fetch(all).filter { object in
            try request.predicate?.evaluate(with: object, substitutionVariables: [:]) ?? true
        }.map { $0.value(forKey: "name") as? String ?? "?" }.sorted()
        return (got, want, try context.count(for: request))
    }

    @Test("an index union keeps an OR whose branch on an attribute's own index is read only in part")
    func unionMemberWithPartlyAnsweredBranchOwnIndex() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
        try await CompoundIndexTests.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // p3 scores 21 and p6 42; Greens are n % 3 == 2.
            let request = try CompoundIndexTests.request("score == 21 OR (score == 42 AND name BEGINSWITH 'zz') OR club == 'Greens'")
            let (got, want, count) = try Self.compare(context, request)
            let plan = try context.explain(request)
            #expect(!want.contains("p6"))
            #expect(got == want, "plan: \(plan)")
            #expect(count == want.count)
        }
    }

    @Test("a comparison inside an OR united on one compound prefix is not answered for the same comparison outside it")
    func unitedCompoundAnswersOnlyTheOr() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
        try await CompoundIndexTests.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Reds scoring 7 (p51, …) must not come back: only Reds scoring 14 (p102, p252) do.
            let request = try CompoundIndexTests.request("((club == 'Reds' AND score == 7) OR (club == 'Reds' AND score == 14)) AND score == 14")
            let (got, want, count) = try Self.compare(context, request)
            let plan = try context.explain(request)
            #expect(want == CompoundIndexTests.rows.filter { $0.club == "Reds" && $0.score == 14 }.map(\.name).sorted())
            #expect(!got.contains("p51"))
            #expect(got == want, "plan: \(plan)")
            #expect(count == want.count)
        }
    }

    @Test("an index union keeps an OR whose branch its member reads only in part")
    func unionMemberWithPartlyAnsweredBranch() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
        try await CompoundIndexTests.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Reds: p3 scores 21, p6 scores 42 (not named zz…); p15 scores 5.
            let request = try CompoundIndexTests.request(
                "(club == 'Reds' AND score == 21) OR (club == 'Reds' AND score == 42 AND name BEGINSWITH 'zz') OR score == 5")
            let (got, want, count) = try Self.compare(context, request)
            let plan = try context.explain(request)
            #expect(want == CompoundIndexTests.rows.filter { ($0.club == "Reds" && $0.score == 21) || $0.score == 5 }.map(\.name).sorted())
            #expect(!got.contains("p6"))
            #expect(got == want, "plan: \(plan)")
            #expect(count == want.count)
        }
    }
}

/// A model whose compound indexes lead with values whose keys are cut, shared or folded,
/// and with a to-one relationship first, in the middle and last.
enum ProbeModel {
    static let long = String(repeating: "L", count: 125)

    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("things", to: "Thing", inverse: "team", toMany: true)
            }
            Entity("Thing") {
                Attribute("name", .string)
                Attribute("label", .string)
                Attribute("price", .decimal)
                Attribute("score", .double)
                Attribute("flag", .boolean)
                Attribute("rank", .int16)
                Attribute("club", .string)
                Relationship("team", to: "Team", inverse: "things")
                FetchIndex("byLabelRank", "label", "rank")
                FetchIndex("byPriceRank", "price", "rank")
                FetchIndex("byScoreRank", "score", "rank")
                FetchIndex("byFlagRank", "flag", "rank")
                FetchIndex("byRankScore", "rank", "score")
                FetchIndex("byClubTeamRank", "club", "team", "rank")
                FetchIndex("byRankTeam", "rank", "team")
                FetchIndex("byTeamLabel", "team", "label")
            }
            Entity("SubThing", parent: "Thing") {
                Attribute("extra", .int32)
                FetchIndex("bySubLabelRank", "label", "rank")
            }
        }
    }

    static let labels: [String?] = [long + "a", long + "b", long, "caf\u{e9}", "cafe\u{301}", "x", nil]
    static let prices: [Decimal?] = [Decimal(string: "1.1"), Decimal(string: "1.10000000000000000001"), 2, nil]
    static let scores: [Double?] = [0.0, -0.0, .nan, 1.5, .infinity, -.infinity, nil]
    static let flags: [Bool?] = [true, false, nil]
    static let ranks: [Int16?] = [1, 2, 3, nil]
    static let clubs: [String?] = ["x", "y", nil]

    /// 84 things (every 5th a SubThing) over two teams and none.
    static func populate(_ coordinator: PersistentStoreCoordinator) async throws {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var teams: [ManagedObject] = []
            for name in ["A", "B", "C"] {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue(name, forKey: "name")
                teams.append(team)
            }
            for n in 0..<84 {
                let thing = try context.insertNewObject(forEntityName: n % 5 == 4 ? "SubThing" : "Thing")
                thing.setValue("t\(n)", forKey: "name")
                if let v = labels[n % labels.count] { thing.setValue(v, forKey: "label") }
                if let v = prices[n % prices.count] { thing.setValue(v, forKey: "price") }
                if let v = scores[(n / 2) % scores.count] { thing.setValue(v, forKey: "score") }
                if let v = flags[(n / 3) % flags.count] { thing.setValue(v, forKey: "flag") }
                if let v = ranks[(n / 5) % ranks.count] { thing.setValue(v, forKey: "rank") }
                if let v = clubs[(n / 7) % clubs.count] { thing.setValue(v, forKey: "club") }
                if n % 4 != 3 { thing.setValue(teams[n % 2], forKey: "team") }
            }
            try context.save()
        }
    }
}

extension Session21ReviewTests {
    /// Every request's fetch and count against the in-memory judgement of every object.
    static func checkAll(
        _ context: isolated ManagedObjectContext, _ requests: [FetchRequest<ManagedObject>], file: String = #fileID, line: Int = #line
    ) throws -> [String] {
        var failures: [String] = []
        for request in requests {
            let (got, want, count) = try compare(context, request)
            if got != want || count != want.count {
                failures.append("\(request.predicate?.description ?? "-") [sub \(request.includesSubentities)] plan \(try context.explain(request)): got \(got) count \(count), want \(want)")
            }
        }
        return failures
    }

    static func probes(_ context: isolated ManagedObjectContext, entity: String = "Thing") throws -> [FetchRequest<ManagedObject>] {
        let teams = try context.fetch(FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "name != nil")))
            .sorted { ($0.value(forKey: "name") as? String ?? "") < ($1.value(forKey: "name") as? String ?? "") }
        let (a, b, c) = (teams[0], teams[1], teams[2])
        let someThing = try context.fetch(FetchRequest(entityName: "Thing"))[0]
        let long = ProbeModel.long
        let formats: [(String, [Any])] = [
            ("label == %@ AND rank > 1", [long + "a"]),
            ("label == %@ AND rank == 2", [long + "b"]),
            ("label == %@ AND rank >= 1", [long]),
            ("label BETWEEN {%@, %@} AND rank > 0", [long + "a", long + "b"]),
            ("label IN {%@} AND rank >= 1", [long + "a"]),
            ("label IN %@ AND rank == 1", [[long + "a", long + "b"]]),
            ("label == %@ AND rank == 1", ["caf\u{e9}"]),
            ("label == %@ AND rank == 1", ["cafe\u{301}"]),
            ("label == %@ AND rank < 3", ["cafe\u{301}"]),
            ("label > %@ AND rank == 1", ["caf"]),
            ("price == %@ AND rank == 1", [Decimal(string: "1.1")!]),
            ("price == %@ AND rank >= 1", [Decimal(string: "1.10000000000000000001")!]),
            ("price == 1.1 AND rank >= 1", []),
            ("price == 2 AND rank > 1", []),
            ("score == 0 AND rank == 1", []),
            ("score == %@ AND rank >= 1", [-0.0]),
            ("score == %@ AND rank >= 1", [Double.nan]),
            ("score == %@ AND rank >= 1", [Double.infinity]),
            ("score < 0 AND rank == 2", []),
            ("flag == 1 AND rank == 2", []),
            ("flag == 0 AND rank >= 2", []),
            ("flag == 2 AND rank == 1", []),
            ("flag == YES AND rank > 1", []),
            ("flag == nil AND rank > 1", []),
            ("rank == 2.5 AND score > 0", []),
            ("rank == 2.0 AND score > 0", []),
            ("rank == %@ AND score >= 0", [true]),
            ("rank BETWEEN {2, 2} AND score > 1", []),
            ("rank == nil AND score > 0", []),
            ("rank == 2 AND team == %@", [a]),
            ("rank == 2 AND team IN %@", [[a, b]]),
            ("rank == 2 AND team == nil", []),
            ("club == 'x' AND team == %@ AND rank > 1", [a]),
            ("club == 'x' AND team == %@", [b]),
            ("club == 'x' AND team == nil AND rank > 1", []),
            ("club == nil AND team == %@ AND rank > 1", [a]),
            ("team == %@ AND team == %@", [a, b]),
            ("team == %@ AND team == %@", [a, a]),
            ("team == %@ OR team == %@", [a, c]),
            ("(team == %@ AND rank == 1) OR rank == 3", [a]),
            ("(team == %@ AND label == %@) OR (team == %@ AND label == %@)", [a, long + "a", b, "x"]),
            ("team == %@ AND label == %@", [a, long + "b"]),
            ("team == %@ AND label BEGINSWITH 'L'", [a]),
            ("team == %@", [someThing]),
            ("team == %@ AND rank == 1", [someThing]),
            ("team == %@", [c]),
            ("team IN %@", [[a.objectID, c.objectID]]),
            ("(rank == 1 AND score == 0) OR (rank == 1 AND score == 1.5) OR flag == YES", []),
            ("(label == %@ AND rank == 1) OR (label == %@ AND rank == 2)", [long + "a", long + "b"]),
        ]
        var requests: [FetchRequest<ManagedObject>] = []
        for (format, args) in formats {
            for includesSubentities in [true, false] {
                var request = FetchRequest(entityName: entity, predicate: try FormatPredicate(format: format, argumentArray: args))
                request.includesSubentities = includesSubentities
                requests.append(request)
            }
        }
        return requests
    }

    @Test("probes: cut, shared and folded prefix values, relationship elements; fetch and count equal an in-memory judgement")
    func probeCompoundPrefixes() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try ProbeModel.model())
        try await ProbeModel.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let failures = try Self.checkAll(context, try Self.probes(context)) + Self.checkAll(context, try Self.probes(context, entity: "SubThing"))
            #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}

extension Session21ReviewTests {
    /// The compound-index store with a second team, "Away", holding no one; the IDs of the
    /// teams ("Town", "Away").
    static func twoTeams(_ coordinator: PersistentStoreCoordinator) async throws -> (ManagedObjectID, ManagedObjectID) {
        try await CompoundIndexTests.populate(coordinator)
        return try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let away = try context.insertNewObject(forEntityName: "Team")
            away.setValue("Away", forKey: "name")
            try context.save()
            let town = try context.fetch(try FetchRequest(entityName: "Team", format: "name == 'Town'"))[0]
            return (town.objectID, away.objectID)
        }
    }

    static func relationshipRequests(_ town: ManagedObjectID, _ away: ManagedObjectID, pending: Bool = true) throws -> [FetchRequest<ManagedObject>] {
        let formats: [(String, [Any])] = [
            ("team == %@", [town]), ("team == %@", [away]), ("team IN %@", [[town, away]]),
            ("team == %@ AND score > 20", [town]), ("team == %@ AND score > 20", [away]),
            ("team == %@ OR club == 'Reds'", [away]), ("(team == %@ AND score < 10) OR (team == %@ AND score > 40)", [town, away]),
        ]
        var result: [FetchRequest<ManagedObject>] = []
        for (format, args) in formats {
            for entity in ["Player", "Captain"] {
                var request = FetchRequest(entityName: entity, predicate: try FormatPredicate(format: format, argumentArray: args))
                request.includesPendingChanges = pending
                result.append(request)
            }
        }
        return result
    }

    @Test("relationship equality with unsaved moves between teams, pending changes counted or not")
    func relationshipEqualityPending() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
        let (town, away) = try await Self.twoTeams(coordinator)
        let stored = try Self.relationshipRequests(town, away, pending: false)
        let (failures, got, counts) = try await privateContext(coordinator).perform {
            (context: isolated ManagedObjectContext) throws -> ([String], [[String]], [Int]) in
            let awayTeam = try context.existingObject(with: away)
            let townTeam = try context.existingObject(with: town)
            for name in ["p1", "p3", "p10", "p20"] {
                let player = try context.fetch(try CompoundIndexTests.request("name == '\(name)'"))[0]
                player.setValue(awayTeam, forKey: "team")
                player.setValue(Int32(45), forKey: "score")
            }
            let p2 = try context.fetch(try CompoundIndexTests.request("name == 'p2'"))[0]
            p2.setValue(townTeam, forKey: "team")
            let fresh = try context.insertNewObject(forEntityName: "Captain")
            fresh.setValue("fresh", forKey: "name")
            fresh.setValue(awayTeam, forKey: "team")
            fresh.setValue(Int32(41), forKey: "score")
            let gone = try context.fetch(try CompoundIndexTests.request("name == 'p5'"))[0]
            context.delete(gone)
            let failures = try Self.checkAll(context, try Self.relationshipRequests(town, away))
            // Without pending changes: the stored state.
            let got = try stored.map { try context.fetch($0).compactMap { $0.value(forKey: "name") as? String }.sorted() }
            let counts = try stored.map { try context.count(for: $0) }
            return (failures, got, counts)
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        let (want, wantCounts) = try await privateContext(coordinator).perform {
            (context: isolated ManagedObjectContext) throws -> ([[String]], [Int]) in
            (try stored.map { try context.fetch($0).compactMap { $0.value(forKey: "name") as? String }.sorted() }, try stored.map { try context.count(for: $0) })
        }
        #expect(got == want)
        #expect(counts == wantCounts)
    }

    /// Names (sorted) and counts of `requests` in `context`.
    static func answers(_ context: isolated ManagedObjectContext, _ requests: [FetchRequest<ManagedObject>]) throws -> [String] {
        try requests.map { request in
            let names = try context.fetch(request).compactMap { $0.value(forKey: "name") as? String }.sorted()
            return "\(names) #\(try context.count(for: request))"
        }
    }

    /// Moves players between the teams and changes scores, deletes one, inserts one, saves.
    static func shuffle(_ coordinator: PersistentStoreCoordinator, _ town: ManagedObjectID, _ away: ManagedObjectID) async throws {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let awayTeam = try context.existingObject(with: away)
            let townTeam = try context.existingObject(with: town)
            for name in ["p1", "p3", "p10", "p20"] {
                let player = try context.fetch(try CompoundIndexTests.request("name == '\(name)'"))[0]
                player.setValue(awayTeam, forKey: "team")
                player.setValue(Int32(45), forKey: "score")
            }
            try context.fetch(try CompoundIndexTests.request("name == 'p2'"))[0].setValue(townTeam, forKey: "team")
            try context.fetch(try CompoundIndexTests.request("name == 'p7'"))[0].setValue(nil, forKey: "team")
            context.delete(try context.fetch(try CompoundIndexTests.request("name == 'p5'"))[0])
            let fresh = try context.insertNewObject(forEntityName: "Captain")
            fresh.setValue("fresh", forKey: "name")
            fresh.setValue(awayTeam, forKey: "team")
            fresh.setValue(Int32(41), forKey: "score")
            try context.save()
        }
    }

    @Test("a pinned context reads relationship equalities (referrers and compound prefixes) as of its generation")
    func relationshipEqualityPinned() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
        let (town, away) = try await Self.twoTeams(coordinator)
        let requests = try Self.relationshipRequests(town, away)
        let reader = privateContext(coordinator)
        let before = try await reader.perform { (context: isolated ManagedObjectContext) throws -> [String] in
            try context.setQueryGenerationFrom(.current)
            return try Self.answers(context, requests)
        }
        try await Self.shuffle(coordinator, town, away)
        let pinned = try await reader.perform { (context: isolated ManagedObjectContext) throws -> [String] in
            try Self.answers(context, requests)
        }
        #expect(pinned == before)
        let after = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [String] in
            try Self.answers(context, requests)
        }
        #expect(after != before)
        let unpinned = try await reader.perform { (context: isolated ManagedObjectContext) throws -> [String] in
            try context.setQueryGenerationFrom(nil)
            return try Self.answers(context, requests)
        }
        #expect(unpinned == after)
        // What a scan finds, judged in memory.
        let failures = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [String] in
            try Self.checkAll(context, requests)
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    @Test("a child context's relationship equality sees its parent's unsaved moves and its own")
    func relationshipEqualityNested() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
        let (town, away) = try await Self.twoTeams(coordinator)
        let parent = privateContext(coordinator, name: "parent")
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent, name: "child")
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let awayTeam = try context.existingObject(with: away)
            for name in ["p1", "p3"] {
                try context.fetch(try CompoundIndexTests.request("name == '\(name)'"))[0].setValue(awayTeam, forKey: "team")
            }
        }
        let requests = try Self.relationshipRequests(town, away)
        let failures = try await child.perform { (context: isolated ManagedObjectContext) throws -> [String] in
            let townTeam = try context.existingObject(with: town)
            try context.fetch(try CompoundIndexTests.request("name == 'p3'"))[0].setValue(townTeam, forKey: "team")
            return try Self.checkAll(context, requests)
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    @Test("batch update and delete with relationship equalities select what the fetch selects")
    func relationshipEqualityBatch() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
        let (town, away) = try await Self.twoTeams(coordinator)
        try await Self.shuffle(coordinator, town, away)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (format, args) in [("team == %@", [away]), ("team == %@ AND score > 20", [town]), ("team IN %@ AND club == 'Reds'", [[town, away]])] as [(String, [Any])] {
                for entity in ["Player", "Captain"] {
                    let fetch = FetchRequest(entityName: entity, predicate: try FormatPredicate(format: format, argumentArray: args))
                    let want = Set(try context.fetch(fetch).map(\.objectID))
                    var update = BatchUpdateRequest(entityName: entity)
                    update.predicate = fetch.predicate
                    update.propertiesToUpdate = ["position": "ZZ"]
                    update.resultType = .objectIDs
                    let updated = Set(try context.execute(update).objectIDs ?? [])
                    #expect(updated == want, "\(format) \(entity)")
                }
            }
            let fetch = FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team == %@ AND score > 20", town))
            let want = Set(try context.fetch(fetch).map(\.objectID))
            var delete = BatchDeleteRequest(fetchRequest: fetch)
            delete.resultType = .objectIDs
            let deleted = Set(try context.execute(delete).objectIDs ?? [])
            #expect(deleted == want)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    @Test("a store opened read-only by a model that adds indexes the store doesn't have yet: fetches scan instead of failing")
    func readOnlyWithNewIndexes() async throws {
        let dir = try TemporaryDirectory()
        do {
            let plain = try openCoordinator(dir, model: try CompoundIndexTests.model(indexes: false))
            try await CompoundIndexTests.populate(plain)
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try CompoundIndexTests.model())
        var configuration = EventLog.Configuration()
        configuration.isReadOnly = true
        try coordinator.addPersistentStore(type: .eventLog, at: dir.url.appendingPathComponent("store"), configuration: configuration)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let requests = [
                try CompoundIndexTests.request("club == 'Reds' AND score > 20"),
                try CompoundIndexTests.request("score > 20"),
                try CompoundIndexTests.request("club == 'Reds'", sort: [FetchSortDescriptor(key: "score")], limit: 3),
                try CompoundIndexTests.request("(club == 'Reds' AND score == 7) OR (club == 'Blues' AND score < 5)"),
            ]
            for request in requests {
                let want = try context.fetch(FetchRequest(entityName: "Player")).filter { object in
                    try request.predicate?.evaluate(with: object, substitutionVariables: [:]) ?? true
                }.count
                #expect(throws: Never.self, "\(request.predicate?.description ?? "")") {
                    let got = try context.fetch(request)
                    #expect(got.count == (request.fetchLimit > 0 ? min(want, request.fetchLimit) : want))
                    let count = try context.count(for: request)
                    #expect(count == want || (request.fetchLimit > 0 && count == min(want, request.fetchLimit)), "\(count) of \(want)")
                }
            }
        }
    }

    @Test("an index keeping its name but changing its elements is rebuilt; verify stays clean both ways")
    func indexChangesElements() async throws {
        let dir = try TemporaryDirectory()
        do {
            let first = try openCoordinator(dir, model: try CompoundIndexTests.model(byX: ["club", "score"]))
            try await CompoundIndexTests.populate(first)
        }
        for elements in [["club", "position"], ["team", "club"], ["score", "club"], ["club", "score"]] {
            let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model(byX: elements))
            let (town, away) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> (ManagedObjectID, ManagedObjectID) in
                let teams = try context.fetch(FetchRequest(entityName: "Team"))
                return (teams[0].objectID, teams.last?.objectID ?? teams[0].objectID)
            }
            let failures = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [String] in
                let formats = [
                    "club == 'Reds' AND position == 'GK'", "club == 'Reds' AND score > 20", "score == 21 AND club == 'Reds'",
                    "club == 'Blues'",
                ]
                var requests = try formats.map { try CompoundIndexTests.request($0) }
                requests += try Self.relationshipRequests(town, away)
                return try Self.checkAll(context, requests)
            }
            #expect(failures.isEmpty, "\(elements): \(failures.joined(separator: "\n"))")
            #expect(try coordinator.persistentStores[0].log.verify().isClean, "\(elements)")
        }
    }

    @Test("after compaction, pinned and current relationship equalities and compound scans read as before; verify clean")
    func compactionThenFetch() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
        let (town, away) = try await Self.twoTeams(coordinator)
        let requests = try Self.relationshipRequests(town, away)
            + ["club == 'Reds' AND score > 20", "club == 'Blues' AND position == 'GK'"].map { try CompoundIndexTests.request($0) }
        let reader = privateContext(coordinator)
        let before = try await reader.perform { (context: isolated ManagedObjectContext) throws -> [String] in
            try context.setQueryGenerationFrom(.current)
            return try Self.answers(context, requests)
        }
        try await Self.shuffle(coordinator, town, away)
        let after = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [String] in
            try Self.answers(context, requests)
        }
        let log = coordinator.persistentStores[0].log
        try log.compact(CompactionRequest())
        let pinned = try await reader.perform { (context: isolated ManagedObjectContext) throws -> [String] in
            try Self.answers(context, requests)
        }
        #expect(pinned == before)
        let current = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [String] in
            try Self.answers(context, requests)
        }
        #expect(current == after)
        #expect(try log.verify().isClean)
    }

    @Test("limited sorts walking compound indexes under cut, shared and reference prefixes equal the unlimited sort's slice")
    func probeCompoundWalks() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try ProbeModel.model())
        try await ProbeModel.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Unsaved changes too: some moved, some new.
            let things = try context.fetch(FetchRequest(entityName: "Thing")).sorted { ($0.value(forKey: "name") as? String ?? "") < ($1.value(forKey: "name") as? String ?? "") }
            for (n, thing) in things.enumerated() where n % 9 == 0 {
                thing.setValue(Int16(n % 4), forKey: "rank")
                thing.setValue(Double(n) / 7, forKey: "score")
            }
            let base = try Self.probes(context).filter(\.includesSubentities)
            var failures: [String] = []
            for request in base {
                for key in ["rank", "score", "label", "price", "flag"] {
                    for ascending in [true, false] {
                        for (offset, limit) in [(0, 1), (0, 3), (2, 4)] {
                            var full = request
                            full.sortDescriptors = [FetchSortDescriptor(key: key, ascending: ascending), FetchSortDescriptor(key: "name")]
                            var limited = full
                            limited.fetchOffset = offset
                            limited.fetchLimit = limit
                            let all = try context.fetch(full).map { $0.value(forKey: "name") as? String ?? "?" }
                            let want = Array(all.dropFirst(offset).prefix(limit))
                            let got = try context.fetch(limited).map { $0.value(forKey: "name") as? String ?? "?" }
                            if got != want {
                                failures.append("\(request.predicate?.description ?? "-") by \(key) \(ascending) \(offset)/\(limit): plan \(try context.explain(limited)) got \(got) want \(want)")
                            }
                        }
                    }
                }
            }
            #expect(failures.isEmpty, "\(failures.prefix(8).joined(separator: "\n"))")
        }
    }

    @Test("relationship equality on a to-one without inverse, both sides of a one-to-one, and compound indexes over them")
    func oneToOneAndNoInverse() async throws {
        let model = try ManagedObjectModel {
            Entity("Car") {
                Attribute("name", .string)
            }
            Entity("Husband") {
                Attribute("name", .string)
                Attribute("age", .int32)
                Relationship("car", to: "Car")
                Relationship("wife", to: "Wife", inverse: "husband")
                FetchIndex("byCarAge", "car", "age")
                FetchIndex("byWifeAge", "wife", "age")
                FetchIndex("byAgeWife", "age", "wife")
            }
            Entity("Wife") {
                Attribute("name", .string)
                Attribute("age", .int32)
                Relationship("husband", to: "Husband", inverse: "wife")
                FetchIndex("byHusbandAge", "husband", "age")
                FetchIndex("byAgeHusband", "age", "husband")
            }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var cars: [ManagedObject] = []
            for n in 0..<3 {
                let car = try context.insertNewObject(forEntityName: "Car")
                car.setValue("c\(n)", forKey: "name")
                cars.append(car)
            }
            for n in 0..<12 {
                let husband = try context.insertNewObject(forEntityName: "Husband")
                husband.setValue("h\(n)", forKey: "name")
                husband.setValue(Int32(n % 4), forKey: "age")
                if n % 3 != 0 { husband.setValue(cars[n % 3], forKey: "car") }
                let wife = try context.insertNewObject(forEntityName: "Wife")
                wife.setValue("w\(n)", forKey: "name")
                wife.setValue(Int32(n % 5), forKey: "age")
                if n % 4 != 0 { husband.setValue(wife, forKey: "wife") }
            }
            try context.save()
            let husbands = try context.fetch(FetchRequest(entityName: "Husband")).sorted { ($0.value(forKey: "name") as? String ?? "") < ($1.value(forKey: "name") as? String ?? "") }
            let wives = try context.fetch(FetchRequest(entityName: "Wife")).sorted { ($0.value(forKey: "name") as? String ?? "") < ($1.value(forKey: "name") as? String ?? "") }
            // Unsaved: one husband swaps wives with another, one car changes.
            let w1 = husbands[1].value(forKey: "wife")
            husbands[1].setValue(husbands[2].value(forKey: "wife"), forKey: "wife")
            husbands[2].setValue(w1, forKey: "wife")
            husbands[5].setValue(cars[0], forKey: "car")
            let formats: [(String, String, [Any])] = [
                ("Husband", "car == %@", [cars[1]]), ("Husband", "car == %@ AND age > 1", [cars[2]]), ("Husband", "car IN %@", [[cars[0], cars[1]]]),
                ("Husband", "wife == %@", [wives[1]]), ("Husband", "wife == %@ AND age == 1", [wives[1]]), ("Husband", "age == 2 AND wife == %@", [wives[2]]),
                ("Wife", "husband == %@", [husbands[1]]), ("Wife", "husband == %@ AND age > 0", [husbands[2]]),
                ("Wife", "age == 1 AND husband == %@", [husbands[6]]), ("Wife", "husband IN %@", [[husbands[1], husbands[5]]]),
            ]
            var requests: [FetchRequest<ManagedObject>] = []
            for (entity, format, args) in formats {
                requests.append(FetchRequest(entityName: entity, predicate: try FormatPredicate(format: format, argumentArray: args)))
            }
            let failures = try Self.checkAll(context, requests)
            #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
            for request in requests where request.entityName == "Wife" {
                // The derived side is read through each husband's recorded wife (spec 0008 Planner 3a).
                let plan = try context.explain(request).description
                #expect(plan.contains("Wife.husband "), "\(plan)")
            }
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    @Test("relationship equality on an object saved after the predicate was made, and on a deleted object")
    func savedAfterPredicateAndDeleted() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
        let (town, _) = try await Self.twoTeams(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let fresh = try context.insertNewObject(forEntityName: "Team")
            fresh.setValue("Fresh", forKey: "name")
            for name in ["p1", "p2", "p10"] {
                try context.fetch(try CompoundIndexTests.request("name == '\(name)'"))[0].setValue(fresh, forKey: "team")
            }
            let early = [
                FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team == %@", fresh)),
                FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team == %@ AND score > 3", fresh)),
            ]
            let before = try Self.checkAll(context, early)
            #expect(before.isEmpty, "\(before.joined(separator: "\n"))")
            try context.save()
            let after = try Self.checkAll(context, early)
            #expect(after.isEmpty, "\(after.joined(separator: "\n"))")
            // A deleted team, unsaved then saved.
            let townTeam = try context.existingObject(with: town)
            let deleted = [
                FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team == %@", townTeam)),
                FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team == %@ AND score > 20", town)),
            ]
            context.delete(townTeam)
            let pendingDelete = try Self.checkAll(context, deleted)
            #expect(pendingDelete.isEmpty, "\(pendingDelete.joined(separator: "\n"))")
            try context.save()
            let savedDelete = try Self.checkAll(context, deleted)
            #expect(savedDelete.isEmpty, "\(savedDelete.joined(separator: "\n"))")
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    @Test("a compound index scan description made with no properties names no attribute instead of trapping")
    func indexScanWithoutProperties() {
        let scan = QueryPlan.IndexScan(properties: [], prefix: [], indexName: nil, indexEntity: "Player", ranges: [.all])
        #expect(scan.attribute == "")
        let fixed = QueryPlan.IndexScan(
            properties: ["club", "score"], prefix: [.attribute(.string("Reds")), .attribute(.int32(1))], indexName: "byClubScore",
            indexEntity: "Player", ranges: [.all])
        #expect(fixed.attribute == "score")
    }

    /// A random predicate over the probe model, with repeated comparisons and nested OR,
    /// AND and NOT, from a small pool so comparisons recur across branches.
    static func randomPredicate(_ rng: inout SeededGenerator, depth: Int, pool: [String]) -> String {
        let roll = Int.random(in: 0..<10, using: &rng)
        if depth == 0 || roll < 4 { return pool[Int.random(in: 0..<pool.count, using: &rng)] }
        let count = Int.random(in: 2...3, using: &rng)
        let parts = (0..<count).map { _ in randomPredicate(&rng, depth: depth - 1, pool: pool) }
        if roll == 9 { return "NOT (\(parts[0]))" }
        return "(" + parts.joined(separator: roll < 7 ? " AND " : " OR ") + ")"
    }

    @Test("random nested predicates whose comparisons recur across branches: fetch and count equal an in-memory judgement")
    func randomRecurringComparisons() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try ProbeModel.model())
        try await ProbeModel.populate(coordinator)
        let iterations = Int(ProcessInfo.processInfo.environment["STRATA_PLANNER_ITERATIONS"] ?? "") ?? 300
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let teams = try context.fetch(FetchRequest(entityName: "Team")).sorted { ($0.value(forKey: "name") as? String ?? "") < ($1.value(forKey: "name") as? String ?? "") }
            let long = ProbeModel.long
            let pool = [
                "rank == 1", "rank == 2", "rank > 1", "rank == nil", "score == 0", "score > 1", "score == 1.5",
                "flag == YES", "flag == NO", "club == 'x'", "club == 'y'", "label == 'x'", "label == '\(long)a'", "label == 'café'",
                "price == 2", "team == $A", "team == $B", "team IN {$A, $B}", "team == nil", "name BEGINSWITH 't1'",
                // Conjunctions a compound index reads under a prefix.
                "(label == 'x' AND rank == 1)", "(label == 'x' AND rank == 2)", "(score == 0 AND rank == 2)", "(rank == 2 AND score > 1)",
                "(flag == YES AND rank == 1)", "(flag == YES AND rank == 3)", "(club == 'x' AND team == $A)", "(club == 'x' AND team == $A AND rank == 1)",
            ]
            var rng = SeededGenerator(seed: 21)
            var failures: [String] = []
            for _ in 0..<iterations {
                let format = Self.randomPredicate(&rng, depth: 3, pool: pool)
                let predicate = try FormatPredicate(format: format)
                    .withSubstitutionVariables(["A": teams[0], "B": teams[1]] as [String: Any])
                var request = FetchRequest(entityName: "Thing", predicate: predicate)
                request.includesSubentities = Bool.random(using: &rng)
                failures += try Self.checkAll(context, [request])
                if failures.count >= 5 { break }
            }
            #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        }
    }

    @Test("a batch delete of a referenced team keeps compound indexes over the relationship right")
    func batchDeleteReferencedTeam() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
        let (town, away) = try await Self.twoTeams(coordinator)
        try await Self.shuffle(coordinator, town, away)
        let outcome = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> String in
            var delete = BatchDeleteRequest(fetchRequest: try FetchRequest(entityName: "Team", format: "name == 'Away'"))
            delete.resultType = .count
            do {
                _ = try context.execute(delete)
            } catch {
                return "refused: \(error)"
            }
            return "deleted"
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var requests = try Self.relationshipRequests(town, away)
            requests += try ["team == nil AND score > 20", "team == nil"].map { try CompoundIndexTests.request($0) }
            let failures = try Self.checkAll(context, requests)
            #expect(failures.isEmpty, "\(outcome): \(failures.joined(separator: "\n"))")
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean, "\(outcome)")
    }

    @Test("reopening with the same model (with a descending index element) adds no model version")
    func reopenKeepsVersion() async throws {
        let dir = try TemporaryDirectory()
        var versions: [Int] = []
        for _ in 0..<3 {
            let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
            versions.append(coordinator.persistentStores[0].log.modelVersion)
        }
        #expect(Set(versions).count == 1, "\(versions)")
        let probeDir = try TemporaryDirectory()
        var probeVersions: [Int] = []
        for _ in 0..<2 {
            probeVersions.append(try openCoordinator(probeDir, model: try ProbeModel.model()).persistentStores[0].log.modelVersion)
        }
        #expect(Set(probeVersions).count == 1, "\(probeVersions)")
    }

    @Test("a fetched results controller over team == %@ (a compound prefix, sorted by score) follows unsaved and saved moves")
    func resultsControllerOnTeam() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
        let (town, away) = try await Self.twoTeams(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let awayTeam = try context.existingObject(with: away)
            var request = FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team == %@ AND score > 10", town))
            request.sortDescriptors = [FetchSortDescriptor(key: "score", ascending: false), FetchSortDescriptor(key: "name")]
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            try controller.performFetch()
            // Without a delegate a controller doesn't follow changes (as in Core Data).
            let delegate = RecordingDelegate(mirroring: controller)
            controller.delegate = delegate
            #expect(names(controller.fetchedObjects) == names(try context.fetch(request)))
            // Move the top scorer away, unsaved, then saved.
            let top = try #require(controller.fetchedObjects?.first)
            top.setValue(awayTeam, forKey: "team")
            context.processPendingChanges()
            #expect(names(controller.fetchedObjects) == names(try context.fetch(request)))
            try context.save()
            #expect(names(controller.fetchedObjects) == names(try context.fetch(request)))
            try controller.performFetch()
            #expect(names(controller.fetchedObjects) == names(try context.fetch(request)))
            #expect(!names(controller.fetchedObjects).contains(top.value(forKey: "name") as? String ?? ""))
        }
    }

    /// Each relationship request sorted, limited and offset, against its unlimited sort's slice.
    static func walks(_ context: isolated ManagedObjectContext, _ town: ManagedObjectID, _ away: ManagedObjectID) throws -> [String] {
        var failures: [String] = []
        for request in try Self.relationshipRequests(town, away) {
            for ascending in [true, false] {
                var full = request
                full.sortDescriptors = [FetchSortDescriptor(key: "score", ascending: ascending), FetchSortDescriptor(key: "name")]
                let all = try context.fetch(full).map { $0.value(forKey: "name") as? String ?? "?" }
                for (offset, limit) in [(0, 1), (0, 3), (1, 2)] {
                    var limited = full
                    limited.fetchOffset = offset
                    limited.fetchLimit = limit
                    let got = try context.fetch(limited).map { $0.value(forKey: "name") as? String ?? "?" }
                    let want = Array(all.dropFirst(offset).prefix(limit))
                    if got != want { failures.append("\(try context.explain(limited)): got \(got) want \(want)") }
                }
            }
        }
        return failures
    }

    @Test("limited sorts under relationship equalities (walking team-prefixed compound indexes) with unsaved moves, pinned too")
    func relationshipWalksPendingAndPinned() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
        let (town, away) = try await Self.twoTeams(coordinator)
        let reader = privateContext(coordinator)
        let pinnedBefore = try await reader.perform { (context: isolated ManagedObjectContext) throws -> [String] in
            try context.setQueryGenerationFrom(.current)
            return try Self.walks(context, town, away)
        }
        #expect(pinnedBefore.isEmpty, "\(pinnedBefore.prefix(5).joined(separator: "\n"))")
        try await Self.shuffle(coordinator, town, away)
        let pinnedAfter = try await reader.perform { (context: isolated ManagedObjectContext) throws -> [String] in
            try Self.walks(context, town, away)
        }
        #expect(pinnedAfter.isEmpty, "\(pinnedAfter.prefix(5).joined(separator: "\n"))")
        let pending = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [String] in
            let awayTeam = try context.existingObject(with: away)
            let townTeam = try context.existingObject(with: town)
            for name in ["p2", "p4", "p9"] {
                let player = try context.fetch(try CompoundIndexTests.request("name == '\(name)'"))[0]
                player.setValue(awayTeam, forKey: "team")
                player.setValue(Int32(49), forKey: "score")
            }
            try context.fetch(try CompoundIndexTests.request("name == 'p1'"))[0].setValue(townTeam, forKey: "team")
            let fresh = try context.insertNewObject(forEntityName: "Player")
            fresh.setValue("zz", forKey: "name")
            fresh.setValue(townTeam, forKey: "team")
            fresh.setValue(Int32(48), forKey: "score")
            return try Self.walks(context, town, away)
        }
        #expect(pending.isEmpty, "\(pending.prefix(5).joined(separator: "\n"))")
    }
}
