import Foundation
import Strata
import StrataLog
import StrataPredicate
import StrataTestSupport
import Testing

/// Session 22's review: join referrers taken as satisfying the join's comparison (spec 0008
/// Planner 3c), reverts meeting unsaved relationship changes (spec 0006 §25), and `IN` a
/// collection of integers.
@Suite("Session 22 review")
struct Session22ReviewTests {
    // MARK: Reverts

    /// Person {name, passport (one-to-one, recorded here), team}; Passport {number, person};
    /// Team {name, players (derived from Player.team)}; Player {name, team}.
    static func revertModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Person") {
                Attribute("name", .string)
                Relationship("passport", to: "Passport", inverse: "person")
            }
            Entity("Passport") {
                Attribute("name", .string)
                Relationship("person", to: "Person", inverse: "passport")
            }
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true, deleteRule: .nullify)
            }
            Entity("Player") {
                Attribute("name", .string)
                Relationship("team", to: "Team", inverse: "players")
                Relationship("favorite", to: "Team")
            }
        }
    }

    static func object(_ context: isolated ManagedObjectContext, _ entity: String, _ name: String) throws -> ManagedObject {
        try #require(try context.fetch(FetchRequest(entityName: entity, predicate: try FormatPredicate(format: "name == %@", name))).first)
    }

    static func token(_ coordinator: PersistentStoreCoordinator, _ sequence: UInt64) throws -> HistoryToken {
        HistoryToken(storeIdentifier: try #require(coordinator.persistentStores.first).identifier, sequence: sequence)
    }

    /// Saved (1): persons A, B; passports D1, D2 (A holds D1); teams T1, T2; players P1, P2 in T1.
    static func revertStore(_ dir: TemporaryDirectory) async throws -> PersistentStoreCoordinator {
        let coordinator = try openCoordinator(dir, model: try revertModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var made: [String: ManagedObject] = [:]
            for (entity, name) in [("Person", "A"), ("Person", "B"), ("Passport", "D1"), ("Passport", "D2"), ("Team", "T1"), ("Team", "T2"),
                                   ("Player", "P1"), ("Player", "P2")] {
                let object = try context.insertNewObject(forEntityName: entity)
                object.setValue(name, forKey: "name")
                made[name] = object
            }
            made["A"]?.setValue(made["D1"], forKey: "passport")
            made["P1"]?.setValue(made["T1"], forKey: "team")
            made["P2"]?.setValue(made["T1"], forKey: "team")
            try context.save()
        }
        return coordinator
    }

    @Test("a revert bringing back a deleted object refuses when this context deleted its related object unsaved, changing nothing; the save then holds the context's work")
    func revertOfDeleteMeetsUnsavedDelete() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await Self.revertStore(dir)
        // 2: P2 (in T1) deleted.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try Self.object(context, "Player", "P2"))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Unsaved: T1 deleted here; the revert would bring P2 back into T1.
            let t1 = try Self.object(context, "Team", "T1")
            context.delete(t1)
            #expect {
                try context.revertTransaction(at: try Self.token(coordinator, 2))
            } throws: { error in
                guard case .undoConflict(let object, _, _, let found) = error as? ContextError else { return false }
                return object == t1.objectID.description && found.contains("unsaved delete")
            }
            #expect(!context.insertedObjects.contains { $0.value(forKey: "name") as? String == "P2" }, "nothing changed")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 1)
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 1)
        }
    }

    @Test("a revert bringing back a person whose one-to-one passport this context gave to another person unsaved refuses, changing nothing")
    func revertOfDeleteMeetsUnsavedOneToOne() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await Self.revertStore(dir)
        // 2: A (holding D1) deleted.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try Self.object(context, "Person", "A"))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let b = try Self.object(context, "Person", "B")
            let d1 = try Self.object(context, "Passport", "D1")
            b.setValue(d1, forKey: "passport")
            #expect {
                try context.revertTransaction(at: try Self.token(coordinator, 2))
            } throws: { error in
                guard case .undoConflict(let object, _, _, let found) = error as? ContextError else { return false }
                return object == d1.objectID.description && found.contains("unsaved")
            }
            #expect((b.value(forKey: "passport") as? ManagedObject)?.objectID == d1.objectID, "the unsaved change stands")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Person")) == 1)
            #expect((try Self.object(context, "Person", "B").value(forKey: "passport") as? ManagedObject)?.value(forKey: "name") as? String == "D1")
        }
    }

    @Test("a revert bringing back a deleted object whose related objects this context changed otherwise goes ahead (held: an unsaved player joining the team)")
    func revertOfDeleteKeepsOtherMembers() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await Self.revertStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try Self.object(context, "Player", "P2"))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let p9 = try context.insertNewObject(forEntityName: "Player")
            p9.setValue("P9", forKey: "name")
            p9.setValue(try Self.object(context, "Team", "T1"), forKey: "team")
            try context.revertTransaction(at: try Self.token(coordinator, 2))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let players = try Self.object(context, "Team", "T1").value(forKey: "players") as? Set<ManagedObject> ?? []
            #expect(players.compactMap { $0.value(forKey: "name") as? String }.sorted() == ["P1", "P2", "P9"])
        }
    }

    @Test("a revert of an insert refuses when an unsaved change here points at the inserted object through a relationship without an inverse (before: applied, and the save failed); one the store holds already is taken back")
    func revertOfInsertMeetsUnsavedReference() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await Self.revertStore(dir)
        // 2: team T3 inserted, P2's favorite.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let t3 = try context.insertNewObject(forEntityName: "Team")
            t3.setValue("T3", forKey: "name")
            try Self.object(context, "Player", "P2").setValue(t3, forKey: "favorite")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let p1 = try Self.object(context, "Player", "P1")
            let t3 = try Self.object(context, "Team", "T3")
            p1.setValue(t3, forKey: "favorite")
            #expect {
                try context.revertTransaction(at: try Self.token(coordinator, 2))
            } throws: { error in
                guard case .undoConflict(let object, let property, _, let found) = error as? ContextError else { return false }
                return object == p1.objectID.description && property == "favorite" && found.contains("unsaved")
            }
            #expect(!t3.isDeleted, "nothing changed")
            context.rollback()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // An unsaved change elsewhere: the revert takes T3 and P2's favorite back.
            let p2 = try Self.object(context, "Player", "P2")
            p2.setValue("P2b", forKey: "name")
            try context.revertTransaction(at: try Self.token(coordinator, 2))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 2)
            #expect(try Self.object(context, "Player", "P2b").value(forKey: "favorite") == nil)
        }
    }

    @Test("a revert of an insert refuses when a later transaction pointed at the object through a relationship without an inverse (before: applied, and the save failed)")
    func revertOfInsertLinkedLaterOneWay() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await Self.revertStore(dir)
        // 2: T3 inserted; 3: P1's favorite set to it.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let t3 = try context.insertNewObject(forEntityName: "Team")
            t3.setValue("T3", forKey: "name")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try Self.object(context, "Player", "P1").setValue(try Self.object(context, "Team", "T3"), forKey: "favorite")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let p1 = try Self.object(context, "Player", "P1")
            #expect {
                try context.revertTransaction(at: try Self.token(coordinator, 2))
            } throws: { error in
                guard case .undoConflict(let object, let property, _, let found) = error as? ContextError else { return false }
                return object == p1.objectID.description && property == "favorite" && found.contains("later")
            }
            let changed = context.hasChanges
            #expect(!changed, "nothing changed")
            // Once the link is taken back (transaction 3 reverted), so is the insert.
            try context.revertTransaction(at: try Self.token(coordinator, 3))
            try context.save()
            try context.revertTransaction(at: try Self.token(coordinator, 2))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Team")) == 2)
        }
    }

    @Test("a revert bringing back a deleted post keeps an unsaved change to other members of its tags' posts (many-to-many, checked from the tags' side)")
    func revertOfDeleteKeepsManyToManyWork() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await RevertMembershipTests.store(dir)
        // 3: P (tagged a, b; chapters c2) deleted.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try RevertMembershipTests.object(context, "Post", "title", "P"))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Unsaved: Q tagged a, through a's own side.
            let a = try RevertMembershipTests.object(context, "Tag", "name", "a")
            a.mutableSetValue(forKey: "posts").add(try RevertMembershipTests.object(context, "Post", "title", "Q"))
            try context.revertTransaction(at: try RevertMembershipTests.token(coordinator, 3))
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(RevertMembershipTests.names(try RevertMembershipTests.object(context, "Post", "title", "P").value(forKey: "tags"), "name") == ["a", "b"])
            #expect(RevertMembershipTests.names(try RevertMembershipTests.object(context, "Post", "title", "Q").value(forKey: "tags"), "name") == ["a"])
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Deleted again (4); unsaved here: tag b deleted. Bringing P back into b refuses.
            context.delete(try RevertMembershipTests.object(context, "Post", "title", "P"))
            try context.save()
            let b = try RevertMembershipTests.object(context, "Tag", "name", "b")
            context.delete(b)
            #expect(throws: ContextError.self) { try context.revertTransaction(at: try RevertMembershipTests.token(coordinator, 5)) }
            #expect(try context.count(for: FetchRequest(entityName: "Post")) == 1)
        }
    }

    // MARK: Joins

    @Test("a derived one-to-one first relationship: a passport given to another person unsaved is judged as the full scan judges it")
    func joinThroughDerivedOneToOne() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await Self.revertStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let b = try Self.object(context, "Person", "B")
            b.setValue(try Self.object(context, "Passport", "D1"), forKey: "passport")
            for pending in [true, false] {
                for format in ["person.name == 'A'", "person.name == 'B'"] {
                    let got = try JoinPlanTests.check(context, "Passport", format, pending: pending)
                    #expect(got.agrees, "\(format), pending \(pending): \(got.plan)")
                }
            }
        }
    }

    @Test("referrers the context holds stale (another context moved one and deleted another): a clean target's referrers agree with the full scan")
    func joinStaleReferrers() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try JoinPlanTests.model())
        let viewer = privateContext(coordinator)
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            try JoinPlanTests.populate(context)
            context.reset()
            context.retainsRegisteredObjects = true
            let p5 = try JoinPlanTests.object(context, "Person", "p5")
            _ = p5.value(forKey: "team")
            _ = try JoinPlanTests.object(context, "Person", "p6").value(forKey: "team")
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try JoinPlanTests.object(context, "Person", "p5").setValue(try JoinPlanTests.object(context, "Team", "T3"), forKey: "team")
            context.delete(try JoinPlanTests.object(context, "Person", "p6"))
            try context.save()
        }
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            for pending in [true, false] {
                for format in ["team.name == 'T3'", "team.name == 'T5'", "team.name == 'T6'", "team.name == 'T3' OR name == 'p5'", "team.name == 'T3' AND team.name == 'T3'"] {
                    let got = try JoinPlanTests.check(context, "Person", format, pending: pending)
                    #expect(got.agrees, "\(format), pending \(pending): \(got.plan)")
                }
                for format in ["ANY members.name == 'p5'", "ANY members.name == 'p6'"] {
                    let got = try JoinPlanTests.check(context, "Team", format, pending: pending)
                    #expect(got.agrees, "\(format), pending \(pending): \(got.plan)")
                }
            }
        }
    }

    /// Rounds per seed (`STRATA_JOIN_ROUNDS`, small by default).
    static let joinRounds = Int(ProcessInfo.processInfo.environment["STRATA_JOIN_ROUNDS"] ?? "") ?? 6

    @Test("join plans agree with the full scan through random unsaved changes, moves through either side, inserts, deletes and another context's saves, with and without pending changes", arguments: [11, 12, 13] as [UInt64])
    func joinsRandomized(seed: UInt64) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try JoinPlanTests.model())
        let viewer = privateContext(coordinator)
        let writer = privateContext(coordinator)
        try await viewer.perform { (context: isolated ManagedObjectContext) throws in
            try JoinPlanTests.populate(context)
            context.reset()
            context.retainsRegisteredObjects = true
        }
        var generator = SeededGenerator(seed: seed)
        var failures: [String] = []
        let formats: [(String, String)] = [
            ("Person", "team.name == 'T3'"), ("Person", "team.name == 'T3' AND age > 30"), ("Person", "team.name IN {'T1', 'T4', 'X'}"),
            ("Person", "team.league.name == 'L1'"), ("Person", "team.league.name == 'L1' AND NOT (team.name == 'T4')"),
            ("Person", "team.name ==[c] 't5' AND (team.name ==[c] 't5' OR age < 25)"), ("Person", "ANY tags.label == 'tag1'"),
            ("Person", "ANY tags.label == 'tag2' AND team.name == 'T2'"),
            ("Team", "ANY members.name == 'p7'"), ("Team", "ANY members.age >= 60"), ("Team", "ANY members.age >= 60 AND rank < 5"),
            ("Tag", "ANY people.name IN {'p3', 'p4'}"), ("League", "ANY teams.members.name == 'p4'"), ("League", "ANY teams.name == 'T2'"),
            ("Team", "league.name == 'L2'"), ("Team", "ANY members.tags.label == 'tag3'"),
        ]
        for round in 0..<Self.joinRounds {
            let ops = (0..<3).map { _ in (Int.random(in: 0..<9, using: &generator), Int.random(in: 0..<60, using: &generator), Int.random(in: 0..<9, using: &generator)) }
            let useWriter = Bool.random(using: &generator)
            let work: @Sendable (isolated ManagedObjectContext) throws -> Void = { context in
                for (op, n, t) in ops {
                    let people = try context.fetch(FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "name == %@", "p\(n)")))
                    let teams = try context.fetch(FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "rank == %d", t)))
                    let leagues = try context.fetch(FetchRequest(entityName: "League"))
                    let tags = try context.fetch(FetchRequest(entityName: "Tag"))
                    guard let person = people.first else { continue }
                    switch op {
                    case 0: person.setValue(teams.first, forKey: "team")
                    case 1: teams.first?.setValue(["T3", "T5", "t5", "T1", "Y"][n % 5], forKey: "name")
                    case 2: teams.first?.setValue(leagues.isEmpty ? nil : leagues[n % leagues.count], forKey: "league")
                    case 3: leagues.isEmpty ? () : leagues[n % leagues.count].setValue(["L1", "L2", "Z"][t % 3], forKey: "name")
                    case 4: person.setValue(Int32(20 + (n * 7) % 50), forKey: "age")
                    case 5: if !tags.isEmpty { person.mutableSetValue(forKey: "tags").add(tags[t % tags.count]) }
                    case 6: if !tags.isEmpty { tags[t % tags.count].mutableSetValue(forKey: "people").remove(person) }
                    case 7: if let team = teams.first { team.mutableSetValue(forKey: "members").add(person) }
                    default:
                        if n % 3 == 0 { context.delete(person) } else {
                            let fresh = try context.insertNewObject(forEntityName: "Person")
                            fresh.setValue("p\(n % 10)", forKey: "name")
                            fresh.setValue(Int32(61), forKey: "age")
                            fresh.setValue(teams.first, forKey: "team")
                        }
                    }
                }
            }
            if useWriter {
                try await writer.perform { (context: isolated ManagedObjectContext) throws in
                    try work(context)
                    try context.save()
                    context.reset()
                }
            } else {
                try await viewer.perform { (context: isolated ManagedObjectContext) throws in
                    try work(context)
                    if round % 4 == 3 { do { try context.save() } catch { context.rollback() } }
                }
            }
            failures += try await viewer.perform { (context: isolated ManagedObjectContext) throws -> [String] in
                var found: [String] = []
                for (entity, format) in formats {
                    for pending in [true, false] {
                        let got = try JoinPlanTests.check(context, entity, format, pending: pending)
                        if !got.agrees { found.append("seed \(seed) round \(round) \(entity) \(format) pending=\(pending): \(got.plan)") }
                        // Sorted, a page of it, as IDs.
                        let predicate = try FormatPredicate(format: format)
                        var request = FetchRequest(entityName: entity, predicate: predicate)
                        request.includesPendingChanges = pending
                        request.sortDescriptors = [FetchSortDescriptor(key: entity == "Tag" ? "label" : "name", ascending: false)]
                        request.fetchLimit = 3
                        request.fetchOffset = 1
                        var forced = request
                        forced.predicate = FormatPredicate(.not(.not(predicate.node)))
                        if try context.fetchObjectIDs(request) != context.fetchObjectIDs(forced) {
                            found.append("seed \(seed) round \(round) \(entity) \(format) pending=\(pending), sorted page of IDs")
                        }
                    }
                }
                return found
            }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    // MARK: IN a collection of integers

    @Test("IN a constant collection of integers answers as comparing with each element: integers, Booleans, doubles, decimals, strings, nil, ANY/ALL, NOT, options (held)")
    func integerInAgreesWithEachElement() throws {
        let values: [Any?] = [1, 2, -1, 0, Int.max, Int64(3), 1.0, 1.5, 2.0000000000000004, Decimal(2), Decimal(string: "2.5"), true, false, "1", nil,
                              [1, 5] as [Any], [5, 6] as [Any], [] as [Any]]
        var matched = 0
        let collections = ["{1, 2}", "{0}", "{1, 2, 3, 9223372036854775807}", "{-1, 3}"]
        for collection in collections {
            let elements = collection.dropFirst().dropLast().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            let pairs: [(String, String)] = [
                ("v IN \(collection)", elements.map { "v == \($0)" }.joined(separator: " OR ")),
                ("NOT v IN \(collection)", "NOT (" + elements.map { "v == \($0)" }.joined(separator: " OR ") + ")"),
                ("v IN[c] \(collection)", elements.map { "v ==[c] \($0)" }.joined(separator: " OR ")),
                ("ANY v IN \(collection)", elements.map { "ANY v == \($0)" }.joined(separator: " OR ")),
                ("SUBQUERY(v, $x, $x IN \(collection)).@count == v.@count", "SUBQUERY(v, $x, " + elements.map { "$x == \($0)" }.joined(separator: " OR ") + ").@count == v.@count"),
            ]
            for (format, reference) in pairs {
                let predicate = try FormatPredicate(format: format)
                let expected = try FormatPredicate(format: reference)
                for value in values {
                    let object: [String: Any] = value.map { ["v": $0] } ?? [:]
                    let isCollection = value is [Any]
                    if format.hasPrefix("ANY") || format.hasPrefix("SUBQUERY") { guard isCollection else { continue } } else if isCollection { continue }
                    let got = try? predicate.evaluate(with: object)
                    let want = try? expected.evaluate(with: object)
                    if got == true { matched += 1 }
                    #expect(got == want, "\(format) with \(String(describing: value)): \(String(describing: got)) vs \(String(describing: want))")
                }
            }
        }
        #expect(matched > 20, "\(matched) matches")
    }
}
