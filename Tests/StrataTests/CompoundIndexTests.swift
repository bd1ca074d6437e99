import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// Named indexes (Core Data's `NSFetchIndexDescription`) in the store and the planner:
/// compound indexes read under fixed leading values, walked in a sort's order, kept by
/// saves, rebuilt when a model adds them, and read as of a pinned generation
/// (`Specs/0008-fetch-requests.md`, Planner 2, 5a and 7; spec 0004 §4.2).
@Suite("Compound indexes")
struct CompoundIndexTests {
    static let clubs = ["Reds", "Blues", "Greens"]
    static let positions = ["GK", "DF", "MF", "FW"]

    /// Players with a club, position, score and name; `Captain` a sub-entity. With
    /// `indexes` false, the same model without any index (the store before a migration);
    /// with `byX`, one named index `byX` over those properties of Player instead of all.
    static func model(indexes: Bool = true, byX: [String]? = nil) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true)
            }
            Entity("Player") {
                Attribute("name", .string)
                Attribute("club", .string)
                Attribute("position", .string)
                Attribute("score", .int32)
                Relationship("team", to: "Team", inverse: "players")
                if let byX {
                    FetchIndex("byX", elements: byX.map { FetchIndexElementDescription(propertyName: $0) })
                } else if indexes {
                    FetchIndex("byClubScore", "club", "score")
                    FetchIndex("byClubPositionName", "club", "position", "name")
                    FetchIndex("byScore", "score")
                    FetchIndex("byTeamScore", "team", "score")
                    Unique("club", "name")
                }
            }
            Entity("Captain", parent: "Player") {
                Attribute("armband", .boolean)
                if indexes && byX == nil { FetchIndex("byArmbandScore", elements: [.init(propertyName: "armband"), .init(propertyName: "score", isAscending: false)]) }
            }
        }
    }

    /// One player as the test knows it.
    struct Row: Equatable {
        var entity: String
        var name: String
        var club: String
        var position: String
        var score: Int32
        var armband: Bool?
    }

    /// Player n (1…300): club n % 3, position n % 4, score n * 7 % 50, name "p<n>"; every
    /// tenth a Captain, its armband n % 20 == 0.
    static let rows: [Row] = (1...300).map(row)

    static func row(_ n: Int) -> Row {
        let captain = n % 10 == 0
        let armband: Bool? = captain ? n % 20 == 0 : nil
        let score = Int32(n * 7 % 50)
        return Row(
            entity: captain ? "Captain" : "Player", name: "p\(n)", club: clubs[n % 3], position: positions[n % 4], score: score,
            armband: armband)
    }

    static func populate(_ coordinator: PersistentStoreCoordinator) async throws {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Town", forKey: "name")
            for (n, row) in rows.enumerated() {
                let player = try context.insertNewObject(forEntityName: row.entity)
                player.setValue(row.name, forKey: "name")
                player.setValue(row.club, forKey: "club")
                player.setValue(row.position, forKey: "position")
                player.setValue(row.score, forKey: "score")
                if let armband = row.armband { player.setValue(armband, forKey: "armband") }
                if n % 2 == 0 { player.setValue(team, forKey: "team") }
            }
            try context.save()
        }
    }

    static func request(_ format: String, entity: String = "Player", sort: [FetchSortDescriptor] = [], limit: Int = 0) throws -> FetchRequest<ManagedObject> {
        var request = FetchRequest(entityName: entity, predicate: try FormatPredicate(format: format))
        request.sortDescriptors = sort
        request.fetchLimit = limit
        return request
    }

    /// The names `request` fetches, in order.
    static func names(_ context: isolated ManagedObjectContext, _ request: FetchRequest<ManagedObject>) throws -> [String] {
        try context.fetch(request).map { $0.value(forKey: "name") as? String ?? "?" }
    }

    /// The names of `rows` matching `keep`, in store order: players, then captains, each in
    /// insertion order.
    static func expected(_ keep: (Row) -> Bool) -> [String] {
        let kept = rows.filter(keep)
        return (kept.filter { $0.entity == "Player" } + kept.filter { $0.entity == "Captain" }).map(\.name)
    }

    @Test("equality on the leading property and a range on the next read one compound index; results and count are the filter's")
    func prefixAndRange() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await Self.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let request = try Self.request("club == 'Reds' AND score > 20")
            let plan = try context.explain(request)
            #expect(plan.description == #"index scan Player[byClubScore] club = "Reds", score [21, +∞) (+1 sub-entity)"#)
            guard case .indexScan(let scan) = plan.kind else {
                Issue.record("not an index scan: \(plan)")
                return
            }
            #expect(scan.properties == ["club", "score"])
            #expect(scan.prefix == [.attribute(.string("Reds"))])
            #expect(scan.attribute == "score")
            #expect(scan.indexName == "byClubScore")
            #expect(plan.filter == nil, "the index answers both comparisons")
            let want = Self.expected { $0.club == "Reds" && $0.score > 20 }
            #expect(want.count > 3)
            #expect(try Self.names(context, request) == want)
            #expect(try context.count(for: request) == want.count)
        }
    }

    @Test("the index fixing the most properties wins; the rest is filtered")
    func mostSelectiveCompound() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await Self.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let request = try Self.request("club == 'Reds' AND position == 'GK' AND name BEGINSWITH 'p1'")
            let plan = try context.explain(request)
            #expect(
                plan.description
                    == #"index scan Player[byClubPositionName] club = "Reds", position = "GK" (+1 sub-entity) then filter (name BEGINSWITH "p1")"#)
            #expect(try Self.names(context, request) == Self.expected { $0.club == "Reds" && $0.position == "GK" && $0.name.hasPrefix("p1") })

            // A uniqueness constraint over two properties is an index too: it holds one object
            // here. (The model also has no named index over club, name; with one, the store
            // would read the constraint's, and explain names the constraint.)
            let unique = try Self.request("name == 'p4' AND club == 'Blues'")
            #expect(try context.explain(unique).description == #"index scan Player(club, name) club = "Blues", name = "p4" (+1 sub-entity)"#)
            #expect(try Self.names(context, unique) == ["p4"])
            let nobody = try Self.request("name == 'p4' AND club == 'Reds'")
            #expect(try Self.names(context, nobody) == [])
        }
    }

    @Test("a one-element named index is the attribute's index; a to-one element is read whole under its prefix")
    func singleElementAndReferenceElement() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await Self.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let request = try Self.request("score BETWEEN {10, 14}")
            #expect(try context.explain(request).description == "index scan Player.score [10, 14] (+1 sub-entity)")
            #expect(try Self.names(context, request) == Self.expected { (10...14).contains($0.score) })

            let walk = try Self.request("score > 40", sort: [FetchSortDescriptor(key: "score", ascending: false)], limit: 2)
            let walkPlan = try context.explain(walk).description
            #expect(walkPlan.hasPrefix("index order Player.score descending over [41, +∞), stops after 2"), "\(walkPlan)")
            let top = Self.rows.filter { $0.score > 40 }.sorted { $0.score > $1.score }
            #expect(try Self.names(context, walk) == Array(top.prefix(2)).map(\.name))
        }
    }

    @Test("a limited sort on the property after the fixed ones walks the compound index under the prefix, both directions")
    func orderUnderPrefix() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await Self.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for ascending in [true, false] {
                let request = try Self.request(
                    "club == 'Blues'", sort: [FetchSortDescriptor(key: "score", ascending: ascending), FetchSortDescriptor(key: "name")],
                    limit: 4)
                let plan = try context.explain(request)
                #expect(
                    plan.description
                        == #"index order Player[byClubScore] club = "Blues" by score \#(ascending ? "ascending" : "descending"), stops after 4 (+1 sub-entity); sorted by name"#)
                let blues = Self.rows.filter { $0.club == "Blues" }.sorted {
                    $0.score != $1.score ? (ascending ? $0.score < $1.score : $0.score > $1.score) : $0.name < $1.name
                }
                #expect(try Self.names(context, request) == Array(blues.prefix(4)).map(\.name))
            }
            // Another access holding fewer than max(64, 4 × limit) objects beats the walk: scan, sort in memory.
            let narrow = try Self.request(
                "club == 'Blues' AND position == 'GK'", sort: [FetchSortDescriptor(key: "score"), FetchSortDescriptor(key: "name")], limit: 4)
            let narrowPlan = try context.explain(narrow).description
            #expect(narrowPlan == #"index scan Player[byClubPositionName] club = "Blues", position = "GK" (+1 sub-entity); sorted by score, name; limit 4"#)
            let bluesGK = Self.rows.filter { $0.club == "Blues" && $0.position == "GK" }
            #expect(bluesGK.count < 64)
            #expect(try Self.names(context, narrow) == bluesGK.sorted { $0.score != $1.score ? $0.score < $1.score : $0.name < $1.name }.prefix(4).map(\.name))
            // A sort the leading property doesn't fix walks nothing compound: scan, sort in memory.
            let unfixed = try Self.request("club != 'Blues'", sort: [FetchSortDescriptor(key: "position")], limit: 3)
            #expect(try context.explain(unfixed).description.hasPrefix("full scan Player"))
        }
    }

    @Test("OR branches on one compound index with different prefixes make an index union")
    func unionOfPrefixes() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await Self.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let request = try Self.request("(club == 'Reds' AND score == 7) OR (club == 'Blues' AND score < 5)")
            let plan = try context.explain(request)
            #expect(
                plan.description
                    == #"index union Player[byClubScore] club = "Reds", score = 7 | Player[byClubScore] club = "Blues", score (-∞, 4] (+1 sub-entity)"#)
            let want = Self.expected { ($0.club == "Reds" && $0.score == 7) || ($0.club == "Blues" && $0.score < 5) }
            #expect(!want.isEmpty)
            #expect(try Self.names(context, request) == want)
            #expect(try context.count(for: request) == want.count)
        }
    }

    @Test("a sub-entity reads its own compound index and inherits its superentity's")
    func subEntities() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await Self.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let own = try Self.request("armband == YES AND score > 10", entity: "Captain")
            let ownPlan = try context.explain(own).description
            #expect(ownPlan == "index scan Captain[byArmbandScore] armband = YES, score [11, +∞)")
            #expect(try Self.names(context, own) == Self.expected { $0.armband == true && $0.score > 10 })
            let inherited = try Self.request("club == 'Greens' AND score >= 0", entity: "Captain")
            let inheritedPlan = try context.explain(inherited).description
            #expect(inheritedPlan == #"index scan Player[byClubScore] club = "Greens", score [0, +∞) for Captain"#)
            #expect(try Self.names(context, inherited) == Self.expected { $0.entity == "Captain" && $0.club == "Greens" })
            var playersOnly = try Self.request("club == 'Greens' AND score >= 0")
            playersOnly.includesSubentities = false
            #expect(try Self.names(context, playersOnly) == Self.expected { $0.entity == "Player" && $0.club == "Greens" })
        }
    }

    @Test("saves keep compound indexes: updates, deletes and unsaved changes are found where they are now")
    func maintainedBySaves() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await Self.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var rows = Self.rows
            let all = try context.fetch(FetchRequest(entityName: "Player"))
            for object in all {
                guard let name = object.value(forKey: "name") as? String, let n = Int(name.dropFirst()) else { continue }
                let i = n - 1
                if n % 5 == 0 {
                    context.delete(object)
                    rows[i].name = ""
                } else if n % 3 == 1 {
                    object.setValue("Reds", forKey: "club")
                    object.setValue(Int32(n), forKey: "score")
                    rows[i].club = "Reds"
                    rows[i].score = Int32(n)
                }
            }
            try context.save()
            let request = try Self.request("club == 'Reds' AND score BETWEEN {10, 40}")
            let want = rows.filter { !$0.name.isEmpty && $0.club == "Reds" && (10...40).contains($0.score) }.map(\.name)
            #expect(Set(try Self.names(context, request)) == Set(want))
            #expect(try context.count(for: request) == want.count)

            // Unsaved: one moved into the range, one out, one new.
            let into = try context.fetch(try Self.request("name == 'p2'"))[0]
            into.setValue("Reds", forKey: "club")
            into.setValue(Int32(12), forKey: "score")
            let out = try context.fetch(try Self.request("name == 'p4'"))[0]
            out.setValue(Int32(99), forKey: "score")
            let fresh = try context.insertNewObject(forEntityName: "Player")
            fresh.setValue("new", forKey: "name")
            fresh.setValue("Reds", forKey: "club")
            fresh.setValue(Int32(33), forKey: "score")
            var pending = Set(want)
            pending.insert("p2")
            pending.remove("p4")
            pending.insert("new")
            #expect(Set(try Self.names(context, request)) == pending)
            #expect(try context.count(for: request) == pending.count)
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    @Test("a store opened by a model that adds compound indexes rebuilds them; verify is clean; removing them again works")
    func addedByMigration() async throws {
        let dir = try TemporaryDirectory()
        do {
            let plain = try openCoordinator(dir, model: try Self.model(indexes: false))
            try await Self.populate(plain)
            try await privateContext(plain).perform { (context: isolated ManagedObjectContext) throws in
                #expect(try context.explain(try Self.request("club == 'Reds' AND score > 20")).description.hasPrefix("full scan Player"))
            }
        }
        let indexed = try openCoordinator(dir, model: try Self.model())
        try await privateContext(indexed).perform { (context: isolated ManagedObjectContext) throws in
            let request = try Self.request("club == 'Reds' AND score > 20")
            #expect(try context.explain(request).description.hasPrefix("index scan Player[byClubScore]"))
            #expect(try Self.names(context, request) == Self.expected { $0.club == "Reds" && $0.score > 20 })
        }
        #expect(try indexed.persistentStores[0].log.verify().isClean)
        let log = indexed.persistentStores[0].log
        let stored = try log.storedModel(version: log.modelVersion)
        #expect(stored.entity(named: "Player")?.indexes.map { $0.name } == ["byClubScore", "byClubPositionName", "byScore", "byTeamScore"], "the store's model file keeps the indexes")
        try indexed.remove(indexed.persistentStores[0])

        let plainAgain = try openCoordinator(dir, model: try Self.model(indexes: false))
        try await privateContext(plainAgain).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.names(context, try Self.request("club == 'Reds' AND score > 20")) == Self.expected { $0.club == "Reds" && $0.score > 20 })
        }
        #expect(try plainAgain.persistentStores[0].log.verify().isClean)
    }

    @Test("a context pinned to a generation reads a compound index as of it")
    func pinnedGeneration() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await Self.populate(coordinator)
        let reader = privateContext(coordinator)
        let request = try Self.request("club == 'Reds' AND score > 20")
        let before = Self.expected { $0.club == "Reds" && $0.score > 20 }
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            try context.setQueryGenerationFrom(.current)
            #expect(try Self.names(context, request) == before)
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for object in try context.fetch(try Self.request("club == 'Reds'")) {
                object.setValue(Int32(0), forKey: "score")
            }
            let newcomer = try context.insertNewObject(forEntityName: "Player")
            newcomer.setValue("late", forKey: "name")
            newcomer.setValue("Reds", forKey: "club")
            newcomer.setValue(Int32(45), forKey: "score")
            try context.save()
        }
        try await reader.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.explain(request).description.hasPrefix("index scan Player[byClubScore]"))
            #expect(try Self.names(context, request) == before, "the pinned generation's entries")
            try context.setQueryGenerationFrom(nil)
            #expect(try Self.names(context, request) == ["late"])
        }
    }

    @Test("the log's compound scan: prefix and range; too long a prefix and an unknown index are errors")
    func logScan() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await Self.populate(coordinator)
        let log = coordinator.persistentStores[0].log
        try log.read { reader in
            var found: [StoredObjectID] = []
            try reader.scanIndex(
                entity: "Player", properties: ["club", "position", "name"], prefix: [.attribute(.string("Reds")), .attribute(.string("GK"))], range: .all, reverse: true
            ) { id in
                found.append(id)
                return .next
            }
            let want = Self.rows.filter { $0.club == "Reds" && $0.position == "GK" }.map(\.name).sorted().reversed()
            #expect(found.count == want.count)
            let names = try found.map { try reader.object($0)?.values["name"] }
            #expect(names == want.map { LogValue.attribute(.string($0)) })
            #expect(
                try reader.countIndex(entity: "Player", properties: ["club", "score"], prefix: [.attribute(.string("Reds"))], range: .all)
                    == Self.rows.filter { $0.club == "Reds" }.count)
            #expect(try reader.hasIndex(entity: "Captain", properties: ["club", "score"]))
            #expect(try !reader.hasIndex(entity: "Player", properties: ["score", "club"]))
            #expect(throws: LogError.self) {
                try reader.scanIndex(entity: "Player", properties: ["club", "score"], prefix: [.attribute(.string("Reds")), .attribute(.int32(1))], range: .all) { _ in .next }
            }
            #expect(throws: LogError.self) {
                try reader.scanIndex(entity: "Player", properties: ["score", "club"], prefix: [], range: .all) { _ in .next }
            }
        }
    }

    @Test("team == %@ and team IN %@ read the store's references; with a compound index on (team, score) the team is a prefix")
    func relationshipEquality() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await Self.populate(coordinator)
        // Even-numbered insertions (odd n) are on the team.
        let onTeam = Set(Self.rows.enumerated().filter { $0.offset % 2 == 0 }.map(\.element.name))
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.fetch(FetchRequest(entityName: "Team"))[0]
            let equal = FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team == %@", team))
            // A compound index led by the relationship reads as well; on a tie it is preferred.
            let equalPlan = try context.explain(equal).description
            #expect(equalPlan == "index scan Player[byTeamScore] team = Team/p1 (+1 sub-entity)")
            #expect(try Self.names(context, equal) == Self.expected { onTeam.contains($0.name) })
            #expect(try context.count(for: equal) == onTeam.count)

            // With the compound index (team, score): the team fixes the prefix.
            let ranged = FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team == %@ AND score > 30", team))
            #expect(try context.explain(ranged).description == "index scan Player[byTeamScore] team = Team/p1, score [31, +∞) (+1 sub-entity)")
            #expect(try Self.names(context, ranged) == Self.expected { onTeam.contains($0.name) && $0.score > 30 })
            var walked = FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team == %@", team))
            walked.sortDescriptors = [FetchSortDescriptor(key: "score", ascending: false), FetchSortDescriptor(key: "name")]
            walked.fetchLimit = 3
            let walkPlan = try context.explain(walked).description
            #expect(walkPlan == "index order Player[byTeamScore] team = Team/p1 by score descending, stops after 3 (+1 sub-entity); sorted by name")
            let top = Self.rows.filter { onTeam.contains($0.name) }.sorted { $0.score != $1.score ? $0.score > $1.score : $0.name < $1.name }
            #expect(try Self.names(context, walked) == top.prefix(3).map(\.name))

            // An unsaved team: nothing stored refers to it, but pending changes are judged.
            let newTeam = try context.insertNewObject(forEntityName: "Team")
            let moved = try context.fetch(try Self.request("name == 'p1'"))[0]
            moved.setValue(newTeam, forKey: "team")
            let fresh = FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team == %@", newTeam))
            #expect(try context.explain(fresh).description.hasPrefix("no scan of Player"))
            #expect(try Self.names(context, fresh) == ["p1"])
            #expect(try !Self.names(context, equal).contains("p1"), "moved off the stored team (unsaved)")
        }
        // Without indexes: the store's references alone answer it.
        let plainDir = try TemporaryDirectory()
        let plain = try openCoordinator(plainDir, model: try Self.model(indexes: false))
        try await Self.populate(plain)
        try await privateContext(plain).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.fetch(FetchRequest(entityName: "Team"))[0]
            let equal = FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team == %@", team))
            let equalPlan = try context.explain(equal).description
            #expect(equalPlan == "index scan Player.team = Team/p1 (+1 sub-entity)")
            #expect(try Self.names(context, equal) == Self.expected { onTeam.contains($0.name) })
            #expect(try context.count(for: equal) == onTeam.count)
            let byID = FetchRequest(entityName: "Captain", predicate: try FormatPredicate(format: "team IN %@ AND score < 40", [team.objectID]))
            let byIDPlan = try context.explain(byID).description
            #expect(byIDPlan == "index scan Player.team = Team/p1 for Captain then filter (score < 40)")
            #expect(try Self.names(context, byID) == Self.expected { $0.entity == "Captain" && onTeam.contains($0.name) && $0.score < 40 })
            let none = FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team == %@ AND team IN %@", team, [ManagedObjectID]()))
            #expect(try context.explain(none).description.hasPrefix("no scan of Player"))
        }
        // An object ID of another store refers to nothing here.
        let otherDir = try TemporaryDirectory()
        let other = try openCoordinator(otherDir, model: try Self.model())
        try await Self.populate(other)
        let foreign = try await privateContext(other).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Team"))[0].objectID
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let request = FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "team == %@", foreign))
            #expect(try context.explain(request).description.hasPrefix("no scan of Player"))
            #expect(try Self.names(context, request) == [])
        }
    }

    @Test("SELF IN %@ and SELF == %@ read the objects themselves: deleted, other entities' and other stores' left out; unsaved ones judged")
    func objectsByID() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        try await Self.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let players = try context.fetch(try Self.request("name IN {'p3', 'p10', 'p20', 'p7'}"))
            let team = try context.fetch(FetchRequest(entityName: "Team"))[0]
            let ids = players.map(\.objectID) + [team.objectID]
            var request = FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "SELF IN %@", ids))
            request.sortDescriptors = [FetchSortDescriptor(key: "name")]
            let plan = try context.explain(request).description
            #expect(plan.hasPrefix("index scan Player.SELF IN {"), "\(plan)")
            #expect(!plan.contains("Team/"), "another entity's object is no Player: \(plan)")
            #expect(!plan.contains("then filter"))
            #expect(try Self.names(context, request) == ["p10", "p20", "p3", "p7"])
            #expect(try context.count(for: request) == 4)

            var captains = request
            captains.entityName = "Captain"
            #expect(try Self.names(context, captains) == ["p10", "p20"], "only the sub-entity's")

            let one = FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "SELF == %@", players[0]))
            #expect(try context.explain(one).description.hasPrefix("index scan Player.SELF = "))
            #expect(try context.fetch(one).map(\.objectID) == [players[0].objectID])

            // Deleted and saved: gone from the store, so not read; an unsaved insert by its temporary ID is judged.
            let gone = players[1]
            context.delete(gone)
            try context.save()
            let fresh = try context.insertNewObject(forEntityName: "Player")
            fresh.setValue("fresh", forKey: "name")
            let mixed = FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "SELF IN %@", ids + [fresh.objectID]))
            #expect(Set(try Self.names(context, mixed)) == Set(["p10", "p20", "p3", "p7", "fresh"]).subtracting([gone.value(forKey: "name") as? String ?? "?"]))
            let onlyFresh = FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "SELF == %@", fresh.objectID))
            #expect(try context.explain(onlyFresh).description.hasPrefix("no scan of Player"))
            #expect(try Self.names(context, onlyFresh) == ["fresh"])
        }
    }

    @Test("a named index over the same properties as a uniqueness constraint: explain names the index the store reads, the constraint's")
    func sameProperties() async throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Player") {
                Attribute("name", .string)
                Attribute("club", .string)
                FetchIndex("byClubName", "club", "name")
                Unique("club", "name")
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for n in 0..<10 {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("p\(n)", forKey: "name")
                player.setValue(n % 2 == 0 ? "Reds" : "Blues", forKey: "club")
            }
            try context.save()
            let request = try Self.request("club == 'Reds' AND name == 'p4'")
            #expect(try context.explain(request).description == #"index scan Player(club, name) club = "Reds", name = "p4""#)
            #expect(try Self.names(context, request) == ["p4"])
        }
    }
}
