import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Synchronization
import Testing

/// One-to-ones under merge policies, merges and undo; and the pending journal after a merge
/// policy's adoption (spec 0004 §4.1; spec 0006 §12, §16.1, §17.1, §18).
@Suite("One-to-one undo, merge policies and the pending journal", .serialized)
struct OneToOneUndoFixTests {
    typealias Passports = UndoRebaseCoverageTests.Passports

    /// The passports store (A:P1, B:P2, P3 no one's) with person C, partner-less; C's ID.
    static func passportsWithC(_ dir: TemporaryDirectory) async throws -> (Passports, ManagedObjectID) {
        let store = try await UndoRebaseCoverageTests.passports(dir)
        let c = try await privateContext(store.coordinator).perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("C", forKey: "name")
            try context.save()
            return person.objectID
        }
        var ids = store.ids
        ids["C"] = c
        return (Passports(coordinator: store.coordinator, ids: ids), c)
    }

    /// "A:P1 B:P2 C:-" for A, B and C, after checking both sides of every pair agree and no
    /// two passports name one person.
    static func pairs(_ context: isolated ManagedObjectContext, _ store: Passports, _ step: String) throws -> String {
        var text: [String] = []
        for name in ["A", "B", "C"] {
            let person = try store.object(name, context)
            let passport = person.value(forKey: "passport") as? ManagedObject
            if let passport {
                #expect((passport.value(forKey: "person") as? ManagedObject)?.objectID == person.objectID, "\(step): \(name)'s passport names another person")
            }
            text.append("\(name):\(passport?.value(forKey: "number") as? String ?? "-")")
        }
        var named: [ManagedObjectID] = []
        for number in ["P1", "P2", "P3"] {
            let passport = try store.object(number, context)
            if let person = passport.value(forKey: "person") as? ManagedObject {
                #expect((person.value(forKey: "passport") as? ManagedObject)?.objectID == passport.objectID, "\(step): \(number)'s person names another passport")
                #expect(!named.contains(person.objectID), "\(step): two passports name \(person.value(forKey: "name") ?? "?")")
                named.append(person.objectID)
            }
        }
        return text.joined(separator: " ")
    }

    /// The pairs a fresh coordinator reads from the store.
    static func storedPairs(_ dir: TemporaryDirectory, _ store: Passports) async throws -> String {
        let coordinator = try openCoordinator(dir, model: try UndoRebaseCoverageTests.passportModel())
        return try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try pairs(context, store, "reopened")
        }
    }

    // MARK: - A trumping merge policy resolves a one-to-one's second partner

    @Test("two contexts give partner-less C a passport each; the second save under object-trump or overwrite writes its pair and releases the other passport; undo and redo keep both sides agreeing")
    func contextTrumpingPolicyResolvesSecondPartner() async throws {
        for policy in [StandardMergePolicy.mergeByPropertyObjectTrump, .overwrite] {
            let dir = try TemporaryDirectory()
            let (store, c) = try await Self.passportsWithC(dir)
            let other = privateContext(store.coordinator, name: "other")
            try await privateContext(store.coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
                context.mergePolicy = policy
                try store.object("P3", context).setValue(try context.existingObject(with: c), forKey: "person")
                context.processPendingChanges()
                // Not merged: the commit finds C named by P1 (the other writer's) and P3.
                _ = try UndoRelationshipRebaseTests.save(other) { other in
                    try other.existingObject(with: try #require(store.ids["P1"])).setValue(try other.existingObject(with: c), forKey: "person")
                }
                // Before: refused, oneToOneViolation (storeRefused), whatever the policy.
                try context.save()
                #expect(try Self.pairs(context, store, "\(policy) saved") == "A:- B:P2 C:P3")
                // Undo takes C's pair back to the store's before this save: P1's.
                try context.undo()
                #expect(try Self.pairs(context, store, "\(policy) undone") == "A:- B:P2 C:P1")
                try context.redo()
                #expect(try Self.pairs(context, store, "\(policy) redone") == "A:- B:P2 C:P3")
                try context.save()
            }
            #expect(try await Self.storedPairs(dir, store) == "A:- B:P2 C:P3", "\(policy)")
        }
    }

    @Test("two contexts give partner-less C a passport each; the second save under store-trump or rollback keeps the store's pair and drops its own; nothing left to undo of it")
    func storeTrumpingPolicyKeepsStoredPartner() async throws {
        for policy in [StandardMergePolicy.mergeByPropertyStoreTrump, .rollback] {
            let dir = try TemporaryDirectory()
            let (store, c) = try await Self.passportsWithC(dir)
            let other = privateContext(store.coordinator, name: "other")
            try await privateContext(store.coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
                context.mergePolicy = policy
                try store.object("B", context).setValue("Bea", forKey: "name")
                context.processPendingChanges()
                try store.object("P3", context).setValue(try context.existingObject(with: c), forKey: "person")
                context.processPendingChanges()
                _ = try UndoRelationshipRebaseTests.save(other) { other in
                    try other.existingObject(with: try #require(store.ids["P1"])).setValue(try other.existingObject(with: c), forKey: "person")
                }
                try context.save()
                #expect(try Self.pairs(context, store, "\(policy) saved") == "A:- B:P2 C:P1")
                #expect(context.hasChanges == false)
                // The group that paired C with P3 wrote nothing: undo undoes the rename.
                try context.undo()
                #expect(try Self.pairs(context, store, "\(policy) undone") == "A:- B:P2 C:P1")
                #expect(try store.object("B", context).value(forKey: "name") as? String == "B")
                try context.save()
            }
            #expect(try await Self.storedPairs(dir, store) == "A:- B:P2 C:P1", "\(policy)")
        }
    }

    // MARK: - A child's undo checks a one-to-one's derived side

    @Test("a child's undo of its pushed release of A's passport, after the parent gave A another one, is a conflict on A.passport; nothing changes")
    func childUndoChecksDerivedOneToOne() async throws {
        let dir = try TemporaryDirectory()
        let store = try await UndoRebaseCoverageTests.passports(dir)
        let parent = privateContext(store.coordinator, name: "parent")
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let a = try store.object("A", context)
            context.userInfo["a"] = a
            a.setValue(nil, forKey: "passport")  // releases P1
            context.processPendingChanges()
            try context.save()  // pushed into the parent
            try parent.performAndWait { (parent: isolated ManagedObjectContext) throws in
                // The parent gives A passport P3 (its recorded side: P3.person).
                try store.object("P3", parent).setValue(try store.object("A", parent), forKey: "person")
                parent.processPendingChanges()
            }
            // Before: the undo was applied, giving A P1 back while the parent's P3 still named
            // A; the push then released P3 in the parent, the parent's change lost.
            do {
                try context.undo()
                Issue.record("the undo gave A back P1 over the parent's P3")
            } catch ContextError.undoConflict(_, let property, _, _) {
                #expect(property == "passport")
            }
            #expect(a.value(forKey: "passport") == nil, "nothing changed")
            #expect(try store.object("P1", context).value(forKey: "person") == nil)
        }
        try await parent.perform { (parent: isolated ManagedObjectContext) throws in
            #expect((try store.object("A", parent).value(forKey: "passport") as? ManagedObject)?.objectID == store.ids["P3"])
            try parent.save()
        }
        #expect(try await UndoRebaseCoverageTests.reopenedPairs(dir, store) == "A:P3 B:P2")
    }

    // MARK: - The pending journal keeps a pending redo's saved group whole

    /// Teams Otters, Herons and Comets (no players on Comets); Pat on Otters.
    static func renameAndDeleteGroup(
        _ context: isolated ManagedObjectContext, _ league: UndoRelationshipRebaseTests.League
    ) throws {
        try context.existingObject(with: league.herons).setValue("Herons II", forKey: "name")
        context.delete(try context.existingObject(with: league.comets))
        context.processPendingChanges()
    }

    @Test("a pending redo of a saved delete, the deletion dropped by the rollback policy at save: the saved group keeps the delete, so undoing it is checked as after a restart, not done in part")
    func rollbackOfRedoneDeleteKeepsSavedGroup() async throws {
        let dir = try TemporaryDirectory()
        let league = try await UndoRelationshipRebaseTests.league(dir)
        let other = privateContext(league.coordinator, name: "other")
        let context = editor(league.coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = StandardMergePolicy.rollback
            try Self.renameAndDeleteGroup(context, league)
            try context.save()  // 2
            try context.undo()
            try context.save()  // 3: undo of 2 (Comets back)
            try context.redo()  // pending: rename and delete again (Comets not loaded: a fault)
            _ = try UndoRelationshipRebaseTests.save(other) { other in  // 4
                try other.existingObject(with: league.comets).setValue("Comets II", forKey: "name")
            }
            // The rollback policy drops the redo's delete of Comets (changed in the store).
            // Before: no conflict was seen (the redone delete of a fault had no version to
            // check), and the save deleted Comets over the other writer's rename.
            try context.save()  // 5: redo of 2, the rename only
            #expect(try context.existingObject(with: league.comets).value(forKey: "name") as? String == "Comets II")
        }
        let inMemory = try await context.perform { (context: isolated ManagedObjectContext) throws -> String in
            do {
                try context.undo()
                return "undone"
            } catch ContextError.undoConflict(let object, _, _, _) {
                return "conflict on \(object)"
            }
        }
        // Persisted undo rebuilds group 2 from the log, the delete included.
        let restarted = try await editor(try openCoordinator(dir, model: try SeedModels.leagueManager)).perform {
            (context: isolated ManagedObjectContext) throws -> String in
            do {
                try context.undo()
                return "undone"
            } catch ContextError.undoConflict(let object, _, _, _) {
                return "conflict on \(object)"
            }
        }
        // Before: the delete had left the saved group itself, and the undo in memory undid the
        // rename alone, while after a restart the same undo was refused.
        #expect(inMemory == restarted)
        #expect(inMemory.hasSuffix("/Team/p3"), "\(inMemory)")
    }

    @Test("a pending redo of a saved rename of two teams, one deleted by another writer and the save's policy taking it out: the saved group keeps it, so undoing it is checked as after a restart")
    func storeDeletedObjectOfRedoKeepsSavedGroup() async throws {
        let dir = try TemporaryDirectory()
        let league = try await UndoRelationshipRebaseTests.league(dir)
        let other = privateContext(league.coordinator, name: "other")
        let context = editor(league.coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = StandardMergePolicy.mergeByPropertyObjectTrump
            try context.existingObject(with: league.herons).setValue("Herons II", forKey: "name")
            try context.existingObject(with: league.comets).setValue("Comets II", forKey: "name")
            context.processPendingChanges()
            try context.save()  // 2
            try context.undo()
            try context.save()  // 3
            try context.redo()  // pending
            _ = try UndoRelationshipRebaseTests.save(other) { other in  // 4
                other.delete(try other.existingObject(with: league.comets))
            }
            try context.save()  // 5: redo of 2, Herons only
        }
        let inMemory = try await context.perform { (context: isolated ManagedObjectContext) throws -> String in
            do {
                try context.undo()
                return "undone"
            } catch ContextError.undoConflict(let object, _, _, _) {
                return "conflict on \(object)"
            }
        }
        let restarted = try await editor(try openCoordinator(dir, model: try SeedModels.leagueManager)).perform {
            (context: isolated ManagedObjectContext) throws -> String in
            do {
                try context.undo()
                return "undone"
            } catch ContextError.undoConflict(let object, _, _, _) {
                return "conflict on \(object)"
            }
        }
        #expect(inMemory == restarted)
        #expect(inMemory.hasSuffix("/Team/p3"), "\(inMemory)")
    }

    // MARK: - A dropped to-one takes its derived far sides along

    @Test("two saved moves undone, another writer making the later undo's move too, merged: the undo that writes nothing names no transaction; the save is the undo of the other")
    func droppedToOneLeavesNoDerivedOnlyUndo() async throws {
        let dir = try TemporaryDirectory()
        let league = try await UndoRelationshipRebaseTests.league(dir)
        let other = privateContext(league.coordinator, name: "other")
        let context = privateContext(league.coordinator, name: "mine")
        let sequence = try await context.perform { (context: isolated ManagedObjectContext) throws -> UInt64 in
            try context.existingObject(with: league.comets).setValue("Comets II", forKey: "name")
            context.processPendingChanges()
            try context.save()  // 2
            try context.existingObject(with: league.pat).setValue(try context.existingObject(with: league.herons), forKey: "team")
            context.processPendingChanges()
            try context.save()  // 3
            try context.undo()  // Pat back to Otters (pending undo of 3)
            try context.undo()  // the rename (pending undo of 2)
            let save = try UndoRelationshipRebaseTests.save(other) { other in  // 4: Pat to Otters too
                try other.existingObject(with: league.pat).setValue(try other.existingObject(with: league.otters), forKey: "team")
            }
            context.mergeChanges(fromContextDidSave: save)
            try UndoRelationshipRebaseTests.expectAgreement(context, league, "merged")
            try context.save()  // 5
            try UndoRelationshipRebaseTests.expectAgreement(context, league, "saved")
            return try #require(league.coordinator.persistentStores.first).log.head
        }
        let written = try #require(league.coordinator.persistentStores.first).log.read { try $0.event(sequence) }
        // Before: the undo of 3, left holding the teams' lists only, wrote no group but named
        // the transaction: kind undo(of: 3) over the one group undoing 2.
        #expect(written.groups.map(\.origin) == [.undo(of: 2, group: 0)])
        #expect(written.kind == .undo(of: 2, group: 0))
        let (team, members) = try await UndoRelationshipRebaseTests.reopened(dir, league)
        #expect(team == "Otters")
        #expect(members["Comets"] == [])
    }

    // MARK: - A derived side follows the store under a pending undo

    @Test("A takes P3, saved, undone (pending: A back to P1), takes P3 again (no change of its own left); another writer gives A P2, merged: undo returns to the other writer's pair, not the pending undo's; redo, save and reopen agree")
    func derivedSideFollowsStoreUnderPendingUndo() async throws {
        let dir = try TemporaryDirectory()
        let store = try await UndoRebaseCoverageTests.passports(dir)
        let other = privateContext(store.coordinator, name: "other")
        try await privateContext(store.coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            let a = try store.object("A", context)
            context.userInfo["a"] = a
            a.setValue(try store.object("P3", context), forKey: "passport")
            context.processPendingChanges()
            try context.save()
            try context.undo()  // pending: A back to P1
            a.setValue(try store.object("P3", context), forKey: "passport")
            context.processPendingChanges()
            let save = try UndoRelationshipRebaseTests.save(other) { other in
                try other.existingObject(with: try #require(store.ids["A"])).setValue(
                    try other.existingObject(with: try #require(store.ids["P2"])), forKey: "passport")
            }
            context.mergeChanges(fromContextDidSave: save)
            #expect(try UndoRebaseCoverageTests.pairs(context, store, "merged") == "A:P2 B:-")
            try context.undo()
            // Before: A:P1, the pending undo's partner, which the save then wrote over the
            // other writer's pair (a to-one in the same place follows the store).
            #expect(try UndoRebaseCoverageTests.pairs(context, store, "undone") == "A:P2 B:-")
            try context.redo()
            #expect(try UndoRebaseCoverageTests.pairs(context, store, "redone") == "A:P3 B:-")
            try context.undo()
            try context.save()
            #expect(try UndoRebaseCoverageTests.pairs(context, store, "saved") == "A:P2 B:-")
        }
        #expect(try await UndoRebaseCoverageTests.reopenedPairs(dir, store) == "A:P2 B:-")
    }

    // MARK: - Randomized one-to-one runs

    @Test("seed 220 (shrunk): a pending undo gives B back P2; A takes P3 here, B takes P3 elsewhere, merged; undoing A's pairing leaves P3 free rather than pairing it with B, whom the context pairs with P2; the save isn't refused")
    func undoDoesNotPairWithPartnerKeptElsewhere() async throws {
        // B gives up P2, saved, undone (pending: B gets P2 back); P3 takes A here; B takes P3
        // elsewhere, merged; undo. Before, the undo gave P3 back to B (releasing P2 in memory)
        // while the pending undo still wrote P2 → B: the save was refused (oneToOneViolation).
        try await UndoRebaseCoverageTests.replayPairs("0:1:3,5:1:0,3:2:1,1:0:2,2:1:2,3:1:0", "seed 220")
    }

    @Test("seed 735 (shrunk): A gets P3 here, then P3 goes to B here (releasing B's P1), while another writer gives A P1, merged; undoing the release doesn't pair P1 with A, whom the earlier group pairs with P3; the save isn't refused")
    func undoDoesNotPairWithPartnerPairedByEarlierGroup() async throws {
        // B takes P1 elsewhere; A takes P3 here; P3 takes B here (P1 released); A takes P1
        // elsewhere, merged; P3 takes A here; save; undo twice. Before, the second undo gave P1
        // back to A (the store's partner the merge rebased the release to) while P3 named A
        // too, and the save was refused (oneToOneViolation). Fails on the session's start too.
        try await UndoRebaseCoverageTests.replayPairs("2:1:0,0:0:2,1:1:2,2:0:0,1:0:2,5:2:0,3:1:2,3:2:3", "seed 735")
    }

    @Test("seed 304 at 150 steps (shrunk): a derived change another writer made too, under a pending undo, keeps the groups as they were (only a side holding no change before the merge follows the store); the save isn't refused")
    func derivedChangeStoreMadeTooUnderPendingUndo() async throws {
        // Found by the sweep while the derived side's following the store (above) also took
        // a change the merge had just made equal to the store's; the save was refused.
        try await UndoRebaseCoverageTests.replayPairs(
            "0:0:3,5:1:2,3:1:1,1:0:1,2:0:1,5:2:2,2:0:2,1:1:2,2:0:0,3:2:0,2:1:1,2:1:2,4:2:0,3:2:0,1:1:0,5:0:2,3:1:0,3:1:0", "seed 304")
    }

    @Test("seed 562 at 150 steps (shrunk): a saved pairing undone, the undo made moot by another writer, redone; the other writer pairs them too, then pairs the person elsewhere: the pending redo no longer writes the pairing; the save isn't refused")
    func pendingRedoMootWithNoUnsavedGroup() async throws {
        // B takes P1 here; A takes P3 here; saved; undone; A gives up P3 elsewhere, merged;
        // redo; A takes P3 elsewhere, merged; A takes P2 elsewhere, merged. Before, with no
        // unsaved group the merge left the pending redo alone, and the save wrote P3 → A
        // over the other writer's P2 → A (refused, oneToOneViolation).
        try await UndoRebaseCoverageTests.replayPairs("1:1:0,0:0:2,5:0:1,3:0:3,2:0:3,4:0:2,2:0:2,2:0:1", "seed 562")
    }

    // MARK: - Randomized one-to-one sweep

    @Test(
        "sweep: the randomized one-to-one run for each seed of STRATA_ONE_TO_ONE_SEEDS (\"1-300\") at STRATA_ONE_TO_ONE_STEPS steps (default 40); the failing seeds are reported together",
        .enabled(if: ProcessInfo.processInfo.environment["STRATA_ONE_TO_ONE_SEEDS"] != nil, "set STRATA_ONE_TO_ONE_SEEDS to the seeds to run"))
    func oneToOneSweep() async throws {
        let environment = ProcessInfo.processInfo.environment
        let count = environment["STRATA_ONE_TO_ONE_STEPS"].flatMap(Int.init) ?? 40
        let failed = Mutex<[UInt64]>([])
        for seed in UndoRebaseSeedTests.seeds(environment["STRATA_ONE_TO_ONE_SEEDS"] ?? "") {
            var random = UndoRelationshipRebaseTests.SeededGenerator(state: seed)
            let steps = (0..<count).map { _ in
                UndoRebaseCoverageTests.PairStep(
                    op: Int.random(in: 0..<6, using: &random), person: Int.random(in: 0...2, using: &random), passport: Int.random(in: 0...3, using: &random))
            }
            try await withKnownIssue(isIntermittent: true) {
                try await UndoRebaseCoverageTests.playPairs(steps, "seed \(seed)")
            } matching: { _ in
                failed.withLock { if $0.last != seed { $0.append(seed) } }
                return true
            }
        }
        let seeds = failed.withLock { $0 }
        #expect(seeds.isEmpty, "failing seeds at \(count) steps: \(seeds.map(String.init).joined(separator: ","))")
    }
}
