import Foundation
import Strata
import StrataTestSupport
import Testing

/// Undo and redo of a context's unsaved relationship changes after it merged another
/// writer's save of the same relationship (spec 0006 §16.1): the undo returns to what the
/// store holds — never to the value read before the merge — and both sides of every
/// relationship agree after each step and after a save and a reopen.
@Suite("Undo after a merge: relationships rebase as attributes do", .serialized)
struct UndoRelationshipRebaseTests {
    /// The league store with teams Otters, Herons and Comets and the player Pat on Otters.
    struct League: Sendable {
        let coordinator: PersistentStoreCoordinator
        let otters: ManagedObjectID
        let herons: ManagedObjectID
        let comets: ManagedObjectID
        let pat: ManagedObjectID
        var teams: [ManagedObjectID] { [otters, herons, comets] }
    }

    static func league(_ dir: TemporaryDirectory) async throws -> League {
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [ManagedObjectID] in
            var teams: [ManagedObject] = []
            for name in ["Otters", "Herons", "Comets"] {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue(name, forKey: "name")
                teams.append(team)
            }
            let pat = try context.insertNewObject(forEntityName: "Player")
            pat.setValue("Pat", forKey: "lastName")
            pat.setValue(teams[0], forKey: "team")
            try context.save()
            return teams.map(\.objectID) + [pat.objectID]
        }
        return League(coordinator: coordinator, otters: ids[0], herons: ids[1], comets: ids[2], pat: ids[3])
    }

    /// The name of Pat's team as `context` sees it.
    static func teamOfPat(_ context: isolated ManagedObjectContext, _ league: League) throws -> String? {
        (try context.existingObject(with: league.pat).value(forKey: "team") as? ManagedObject)?.value(forKey: "name") as? String
    }

    /// Checks that every team's players name it as their team, and that Pat's team lists
    /// Pat (the two sides of `Team.players` ↔ `Player.team` agree).
    static func expectAgreement(_ context: isolated ManagedObjectContext, _ league: League, _ step: String) throws {
        let pat = try context.existingObject(with: league.pat)
        var listing: [String] = []
        for id in league.teams {
            let team = try context.existingObject(with: id)
            let players = (team.value(forKey: "players") as? Set<ManagedObject>) ?? []
            for player in players {
                #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == id, "\(step): a member of \(id) names another team")
            }
            if players.contains(pat) { listing.append(team.value(forKey: "name") as? String ?? "?") }
        }
        let patTeam = (pat.value(forKey: "team") as? ManagedObject)?.value(forKey: "name") as? String
        #expect(listing == (patTeam.map { [$0] } ?? []), "\(step): Pat's team is \(patTeam ?? "nil") but listed by \(listing)")
    }

    /// Pat's team and each team's players, read by a fresh coordinator on the same store.
    static func reopened(_ dir: TemporaryDirectory, _ league: League) async throws -> (String?, [String: [String]]) {
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        return try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try expectAgreement(context, league, "reopened")
            var members: [String: [String]] = [:]
            for id in league.teams {
                let team = try context.existingObject(with: id)
                let players = (team.value(forKey: "players") as? Set<ManagedObject>) ?? []
                members[team.value(forKey: "name") as? String ?? "?"] = players.compactMap { $0.value(forKey: "lastName") as? String }.sorted()
            }
            return (try teamOfPat(context, league), members)
        }
    }

    /// Saves in `other` after `change`, returning its did-save.
    static func save(_ other: ManagedObjectContext, _ change: @Sendable (isolated ManagedObjectContext) throws -> Void) throws -> ContextDidSave {
        try other.performAndWait { (other: isolated ManagedObjectContext) throws -> ContextDidSave in
            try change(other)
            var captured: ContextDidSave?
            let token = other.addObserver { note in
                if case .didSave(let save) = note.notification { captured = save }
            }
            try other.save()
            other.removeObserver(token)
            return try #require(captured)
        }
    }

    @Test("to-one changed by another context, merged: undo puts the other writer's team back, not the one read before; redo, save and reopen agree")
    func toOneChangedElsewhereThenUndo() async throws {
        let dir = try TemporaryDirectory()
        let league = try await Self.league(dir)
        let other = privateContext(league.coordinator, name: "other")
        try await privateContext(league.coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            let pat = try context.existingObject(with: league.pat)
            pat.setValue(try context.existingObject(with: league.herons), forKey: "team")
            context.processPendingChanges()
            try Self.expectAgreement(context, league, "local change")
            let save = try Self.save(other) { other in
                try other.existingObject(with: league.pat).setValue(try other.existingObject(with: league.comets), forKey: "team")
            }
            context.mergeChanges(fromContextDidSave: save)
            #expect(try Self.teamOfPat(context, league) == "Herons", "the unsaved change wins the merge")
            try Self.expectAgreement(context, league, "merged")
            try context.undo()
            // Before: Otters, read before the merge, which the save then wrote over Comets.
            #expect(try Self.teamOfPat(context, league) == "Comets")
            try Self.expectAgreement(context, league, "undone")
            #expect(context.hasChanges == false, "undone: the context holds what the store holds")
            try context.redo()
            #expect(try Self.teamOfPat(context, league) == "Herons")
            try Self.expectAgreement(context, league, "redone")
            try context.undo()
            try context.save()
            try Self.expectAgreement(context, league, "saved")
        }
        let (team, members) = try await Self.reopened(dir, league)
        #expect(team == "Comets")
        #expect(members == ["Otters": [], "Herons": [], "Comets": ["Pat"]])
    }

    @Test("to-one changed by another context: redo after the undo, then save; the store has the context's change and both sides agree")
    func toOneChangedElsewhereRedoSaved() async throws {
        let dir = try TemporaryDirectory()
        let league = try await Self.league(dir)
        let other = privateContext(league.coordinator, name: "other")
        try await privateContext(league.coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: league.pat).setValue(try context.existingObject(with: league.herons), forKey: "team")
            context.processPendingChanges()
            let save = try Self.save(other) { other in
                try other.existingObject(with: league.pat).setValue(try other.existingObject(with: league.comets), forKey: "team")
            }
            context.mergeChanges(fromContextDidSave: save)
            try context.undo()
            try context.redo()
            try Self.expectAgreement(context, league, "redone")
            try context.save()
            try Self.expectAgreement(context, league, "saved")
        }
        let (team, members) = try await Self.reopened(dir, league)
        #expect(team == "Herons")
        #expect(members == ["Otters": [], "Herons": ["Pat"], "Comets": []])
    }

    @Test("to-many membership changed by another context, merged automatically: undo takes the player back to the other writer's team; redo; save and reopen agree")
    func toManyChangedElsewhereThenUndo() async throws {
        let dir = try TemporaryDirectory()
        let league = try await Self.league(dir)
        let other = privateContext(league.coordinator, name: "other")
        let context = privateContext(league.coordinator, name: "mine")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let herons = try context.existingObject(with: league.herons)
            herons.mutableSetValue(forKey: "players").add(try context.existingObject(with: league.pat))
            context.processPendingChanges()
            try Self.expectAgreement(context, league, "local change")
        }
        let merges = context.notifications(.didMerge)
        _ = try Self.save(other) { other in
            try other.existingObject(with: league.comets).mutableSetValue(forKey: "players").add(try other.existingObject(with: league.pat))
        }
        _ = await firstMerge(merges)  // a push into the parent merges with no sequence
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.teamOfPat(context, league) == "Herons")
            try Self.expectAgreement(context, league, "merged")
            try context.undo()
            #expect(try Self.teamOfPat(context, league) == "Comets")
            try Self.expectAgreement(context, league, "undone")
            #expect(context.hasChanges == false)
            try context.redo()
            #expect(try Self.teamOfPat(context, league) == "Herons")
            try Self.expectAgreement(context, league, "redone")
            try context.undo()
            try context.save()
        }
        let (team, members) = try await Self.reopened(dir, league)
        #expect(team == "Comets")
        #expect(members == ["Otters": [], "Herons": [], "Comets": ["Pat"]])
    }

    @Test("another writer moved the player to the same team: after the merge nothing is left to undo that would move it back")
    func toOneSameChangeElsewhere() async throws {
        let dir = try TemporaryDirectory()
        let league = try await Self.league(dir)
        let other = privateContext(league.coordinator, name: "other")
        try await privateContext(league.coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: league.pat).setValue(try context.existingObject(with: league.herons), forKey: "team")
            context.processPendingChanges()
            let save = try Self.save(other) { other in
                try other.existingObject(with: league.pat).setValue(try other.existingObject(with: league.herons), forKey: "team")
            }
            context.mergeChanges(fromContextDidSave: save)
            #expect(context.hasChanges == false)
            if context.canUndo { try context.undo() }
            // Before: undo moved Pat back to Otters in memory, and the save wrote it.
            #expect(try Self.teamOfPat(context, league) == "Herons")
            try Self.expectAgreement(context, league, "undone")
            #expect(context.hasChanges == false)
            try context.save()
        }
        let (team, _) = try await Self.reopened(dir, league)
        #expect(team == "Herons")
    }

    @Test("two coordinators on one store: the other one's save of the to-one, merged from the store; undo, redo, save and reopen agree")
    func toOneChangedByAnotherCoordinator() async throws {
        let dir = try TemporaryDirectory()
        let league = try await Self.league(dir)
        let second = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let context = privateContext(league.coordinator, name: "mine")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            try context.existingObject(with: league.pat).setValue(try context.existingObject(with: league.herons), forKey: "team")
            context.processPendingChanges()
        }
        try await privateContext(second, name: "other").perform { (other: isolated ManagedObjectContext) throws in
            try other.existingObject(with: league.pat).setValue(try other.existingObject(with: league.comets), forKey: "team")
            try other.save()
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            #expect(try Self.teamOfPat(context, league) == "Herons")
            try Self.expectAgreement(context, league, "merged")
            try context.undo()
            #expect(try Self.teamOfPat(context, league) == "Comets")
            try Self.expectAgreement(context, league, "undone")
            #expect(context.hasChanges == false)
            try context.redo()
            try Self.expectAgreement(context, league, "redone")
            try context.save()
            try Self.expectAgreement(context, league, "saved")
            try context.undo()
            #expect(try Self.teamOfPat(context, league) == "Comets", "undo of the saved move returns to the other writer's team")
            try Self.expectAgreement(context, league, "saved move undone")
            try context.save()
        }
        let (team, members) = try await Self.reopened(dir, league)
        #expect(team == "Comets")
        #expect(members == ["Otters": [], "Herons": [], "Comets": ["Pat"]])
    }

    @Test("refresh(_:mergeChanges: true) of the player alone after another context moved it: undo returns it to that team; both sides agree, nothing left changed")
    func toOneRefreshedThenUndo() async throws {
        let dir = try TemporaryDirectory()
        let league = try await Self.league(dir)
        let other = privateContext(league.coordinator, name: "other")
        try await privateContext(league.coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            let pat = try context.existingObject(with: league.pat)
            pat.setValue(try context.existingObject(with: league.herons), forKey: "team")
            context.processPendingChanges()
            _ = try Self.save(other) { other in
                try other.existingObject(with: league.pat).setValue(try other.existingObject(with: league.comets), forKey: "team")
            }
            context.refresh(pat, mergeChanges: true)
            #expect(try Self.teamOfPat(context, league) == "Herons")
            try Self.expectAgreement(context, league, "refreshed")
            try context.undo()
            #expect(try Self.teamOfPat(context, league) == "Comets")
            try Self.expectAgreement(context, league, "undone")
            #expect(context.hasChanges == false)
            try context.redo()
            try Self.expectAgreement(context, league, "redone")
            try context.save()
        }
        let (team, members) = try await Self.reopened(dir, league)
        #expect(team == "Herons")
        #expect(members == ["Otters": [], "Herons": ["Pat"], "Comets": []])
    }

    @Test("a move undone before another context moved the player: the merge follows the store, redo moves it from there, undo returns it there")
    func undoneMoveThenMergedThenRedo() async throws {
        let dir = try TemporaryDirectory()
        let league = try await Self.league(dir)
        let other = privateContext(league.coordinator, name: "other")
        try await privateContext(league.coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: league.pat).setValue(try context.existingObject(with: league.herons), forKey: "team")
            context.processPendingChanges()
            try context.undo()
            let save = try Self.save(other) { other in
                try other.existingObject(with: league.pat).setValue(try other.existingObject(with: league.comets), forKey: "team")
            }
            context.mergeChanges(fromContextDidSave: save)
            #expect(try Self.teamOfPat(context, league) == "Comets")
            try Self.expectAgreement(context, league, "merged")
            try context.redo()
            #expect(try Self.teamOfPat(context, league) == "Herons")
            try Self.expectAgreement(context, league, "redone")
            try context.undo()
            // Before: Otters, the team read before the merge.
            #expect(try Self.teamOfPat(context, league) == "Comets")
            try Self.expectAgreement(context, league, "undone again")
            #expect(context.hasChanges == false)
            try context.redo()
            try context.save()
        }
        let (team, members) = try await Self.reopened(dir, league)
        #expect(team == "Herons")
        #expect(members == ["Otters": [], "Herons": ["Pat"], "Comets": []])
    }

    @Test("an attribute change undone (the object no longer held) before another context renamed it: redo then undo returns to the other writer's name")
    func undoneRenameThenMergedThenRedo() async throws {
        let dir = try TemporaryDirectory()
        let league = try await Self.league(dir)
        let other = privateContext(league.coordinator, name: "other")
        try await privateContext(league.coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: league.otters).setValue("Ours", forKey: "name")
            context.processPendingChanges()
            try context.undo()
            let save = try Self.save(other) { other in
                try other.existingObject(with: league.otters).setValue("Theirs", forKey: "name")
            }
            context.mergeChanges(fromContextDidSave: save)
            try context.redo()
            #expect(try context.existingObject(with: league.otters).value(forKey: "name") as? String == "Ours")
            try context.undo()
            // Before: "Otters", read before the merge, and the save wrote it over "Theirs".
            #expect(try context.existingObject(with: league.otters).value(forKey: "name") as? String == "Theirs")
            #expect(context.hasChanges == false)
            try context.save()
        }
        #expect(try await privateContext(league.coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: league.otters).value(forKey: "name") as? String
        } == "Theirs")
    }

    @Test("a save resolving a conflict on the to-one with mergeByPropertyObjectTrump: after it, and after undoing it, both sides agree; undo returns the player to the other writer's team")
    func toOneConflictResolvedThenUndo() async throws {
        let dir = try TemporaryDirectory()
        let league = try await Self.league(dir)
        let other = privateContext(league.coordinator, name: "other")
        try await privateContext(league.coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = StandardMergePolicy.mergeByPropertyObjectTrump
            try context.existingObject(with: league.pat).setValue(try context.existingObject(with: league.herons), forKey: "team")
            _ = try Self.save(other) { other in
                try other.existingObject(with: league.pat).setValue(try other.existingObject(with: league.comets), forKey: "team")
            }
            try context.save()
            #expect(try Self.teamOfPat(context, league) == "Herons")
            try Self.expectAgreement(context, league, "saved")
            try context.undo()
            #expect(try Self.teamOfPat(context, league) == "Comets")
            try Self.expectAgreement(context, league, "undone")
            try context.save()
            try Self.expectAgreement(context, league, "undo saved")
        }
        let (team, members) = try await Self.reopened(dir, league)
        #expect(team == "Comets")
        #expect(members == ["Otters": [], "Herons": [], "Comets": ["Pat"]])
    }

    @Test("one side clears the to-one, the other moves it: undo returns to the other writer's value (a team or none); both sides agree at each step")
    func toOneClearedOnEitherSide() async throws {
        for mineClears in [true, false] {
            let dir = try TemporaryDirectory()
            let league = try await Self.league(dir)
            let other = privateContext(league.coordinator, name: "other")
            let expected = try await privateContext(league.coordinator, name: "mine").perform {
                (context: isolated ManagedObjectContext) throws -> String? in
                let pat = try context.existingObject(with: league.pat)
                pat.setValue(mineClears ? nil : try context.existingObject(with: league.herons), forKey: "team")
                context.processPendingChanges()
                let save = try Self.save(other) { other in
                    try other.existingObject(with: league.pat).setValue(mineClears ? try other.existingObject(with: league.comets) : nil, forKey: "team")
                }
                context.mergeChanges(fromContextDidSave: save)
                #expect(try Self.teamOfPat(context, league) == (mineClears ? nil : "Herons"))
                try Self.expectAgreement(context, league, "merged")
                try context.undo()
                let theirs: String? = mineClears ? "Comets" : nil
                #expect(try Self.teamOfPat(context, league) == theirs)
                try Self.expectAgreement(context, league, "undone")
                #expect(context.hasChanges == false)
                try context.redo()
                try Self.expectAgreement(context, league, "redone")
                try context.undo()
                try context.save()
                return theirs
            }
            let (team, _) = try await Self.reopened(dir, league)
            #expect(team == expected)
        }
    }

    @Test("nested: a sibling's move pushed into the parent, merged into an automatically merging child; undo, redo and the parent's save agree")
    func toOneChangedBySibling() async throws {
        let dir = try TemporaryDirectory()
        let league = try await Self.league(dir)
        let parent = privateContext(league.coordinator, name: "parent")
        let mine = childContext(parent, name: "mine")
        let sibling = childContext(parent, name: "sibling")
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let pat = try context.existingObject(with: league.pat)
            context.userInfo["pat"] = pat  // held: the merge refreshes it
            pat.setValue(try context.existingObject(with: league.herons), forKey: "team")
            context.processPendingChanges()
        }
        let merges = mine.notifications(.didMerge)
        try await sibling.perform { (other: isolated ManagedObjectContext) throws in
            try other.existingObject(with: league.pat).setValue(try other.existingObject(with: league.comets), forKey: "team")
            try other.save()
        }
        _ = await firstMerge(merges)  // a push into the parent merges with no sequence
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.teamOfPat(context, league) == "Herons")
            try Self.expectAgreement(context, league, "merged")
            try context.undo()
            #expect(try Self.teamOfPat(context, league) == "Comets")
            try Self.expectAgreement(context, league, "undone")
            try context.redo()
            try Self.expectAgreement(context, league, "redone")
            try context.undo()
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try Self.expectAgreement(context, league, "parent")
            #expect(try Self.teamOfPat(context, league) == "Comets")
            try context.save()
        }
        let (team, members) = try await Self.reopened(dir, league)
        #expect(team == "Comets")
        #expect(members == ["Otters": [], "Herons": [], "Comets": ["Pat"]])
    }

    /// Every player's team is the one listing it (and only that one).
    static func agree(_ context: isolated ManagedObjectContext, _ players: [ManagedObjectID], _ teams: [ManagedObjectID], _ step: String) throws {
        for id in players {
            let player = try context.existingObject(with: id)
            let team = (player.value(forKey: "team") as? ManagedObject)?.objectID
            var listing: [ManagedObjectID] = []
            for teamID in teams where ((try context.existingObject(with: teamID).value(forKey: "players") as? Set<ManagedObject>) ?? []).contains(player) {
                listing.append(teamID)
            }
            #expect(listing == (team.map { [$0] } ?? []), "\(step): \(id) names \(team?.description ?? "nil") but is listed by \(listing)")
        }
    }

    /// A small deterministic generator (SplitMix64) for the randomized sequence.
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

    @Test("randomized: moves here and saved elsewhere, merges, undo, redo and saves keep both sides agreeing (steps: STRATA_REBASE_STEPS, default 60)")
    func randomizedMovesKeepSidesAgreeing() async throws {
        let count = ProcessInfo.processInfo.environment["STRATA_REBASE_STEPS"].flatMap(Int.init) ?? 60
        var random = SeededGenerator(state: ProcessInfo.processInfo.environment["STRATA_REBASE_SEED"].flatMap(UInt64.init) ?? 28)
        // Three players (Pat, Quinn, Rae), the league's teams and "no team" (teams.count).
        let teamCount = 3
        let steps = (0..<count).map { _ in
            let player = Int.random(in: 0..<3, using: &random)
            let team = Int.random(in: 0...teamCount, using: &random)
            return UndoRebaseRandomFixTests.Step(op: Int.random(in: 0..<6, using: &random), player: player, team: team)
        }
        if ProcessInfo.processInfo.environment["STRATA_REBASE_TRACE"] != nil {
            print("TRACE " + steps.map { "\($0.op):\($0.player):\($0.team)" }.joined(separator: ","))
        }
        try await UndoRebaseRandomFixTests.play(steps)
    }

    @Test("a many-to-many member another context added too: undo doesn't remove the other writer's member; redo; save and reopen")
    func manyToManySameAdditionElsewhere() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try NestedMergeReviewTests.postsModel())
        let (postID, tagIDs) = try await NestedMergeReviewTests.postWithTags(coordinator)
        let other = privateContext(coordinator, name: "other")
        try await privateContext(coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            let post = try context.existingObject(with: postID)
            let tagB = try context.existingObject(with: tagIDs[1])
            #expect(Self.postsOf(tagB) == [])
            post.mutableSetValue(forKey: "tags").add(tagB)
            context.processPendingChanges()
            let save = try Self.save(other) { other in
                try other.existingObject(with: postID).mutableSetValue(forKey: "tags").add(try other.existingObject(with: tagIDs[1]))
            }
            context.mergeChanges(fromContextDidSave: save)
            #expect(NestedMergeReviewTests.tagNames(post) == ["a", "b"])
            #expect(context.hasChanges == false)
            if context.canUndo { try context.undo() }
            // Before: undo removed b, and the save removed the other writer's b from the store.
            #expect(NestedMergeReviewTests.tagNames(post) == ["a", "b"])
            #expect(Self.postsOf(tagB) == ["Hello"])
            #expect(context.hasChanges == false)
            if context.canRedo { try context.redo() }
            #expect(NestedMergeReviewTests.tagNames(post) == ["a", "b"])
            #expect(Self.postsOf(tagB) == ["Hello"])
            try context.save()
        }
        try await privateContext(try openCoordinator(dir, model: try NestedMergeReviewTests.postsModel())).perform {
            (context: isolated ManagedObjectContext) throws in
            #expect(NestedMergeReviewTests.tagNames(try context.existingObject(with: postID)) == ["a", "b"])
            #expect(Self.postsOf(try context.existingObject(with: tagIDs[1])) == ["Hello"])
        }
    }

    static func postsOf(_ tag: ManagedObject) -> [String] {
        ((tag.value(forKey: "posts") as? Set<ManagedObject>) ?? []).compactMap { $0.value(forKey: "title") as? String }
    }

    static func titles(_ playlist: ManagedObject) -> [String] {
        playlist.mutableOrderedSetValue(forKey: "songs").objects.compactMap { $0.value(forKey: "title") as? String }
    }

    /// Whether song `index` of `ids` (the playlist first) names the playlist as its own.
    static func isListed(_ context: isolated ManagedObjectContext, _ ids: [ManagedObjectID], _ index: Int) throws -> Bool {
        (try context.existingObject(with: ids[index]).value(forKey: "playlist") as? ManagedObject)?.objectID == ids[0]
    }

    static func playlistModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Playlist") {
                Attribute("name", .string)
                Relationship("songs", to: "Song", inverse: "playlist", toMany: true, ordered: true)
            }
            Entity("Song") {
                Attribute("title", .string)
                Relationship("playlist", to: "Playlist", inverse: "songs")
            }
        }
    }

    @Test("an ordered list another context inserted into at the front: undo of the context's append returns to the stored order; redo; save and reopen")
    func orderedListChangedElsewhere() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.playlistModel())
        let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [ManagedObjectID] in
            let playlist = try context.insertNewObject(forEntityName: "Playlist")
            var songs: [ManagedObject] = []
            for title in ["s1", "s2", "s3", "s4"] {
                let song = try context.insertNewObject(forEntityName: "Song")
                song.setValue(title, forKey: "title")
                songs.append(song)
            }
            playlist.setValue(Array(songs.prefix(2)), forKey: "songs")
            try context.save()
            return [playlist.objectID] + songs.map(\.objectID)
        }
        let other = privateContext(coordinator, name: "other")
        try await privateContext(coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            let playlist = try context.existingObject(with: ids[0])
            playlist.mutableOrderedSetValue(forKey: "songs").add(try context.existingObject(with: ids[3]))
            context.processPendingChanges()
            let save = try Self.save(other) { other in
                try other.existingObject(with: ids[0]).mutableOrderedSetValue(forKey: "songs").insert(try other.existingObject(with: ids[4]), at: 0)
            }
            context.mergeChanges(fromContextDidSave: save)
            #expect(Set(Self.titles(playlist)) == ["s1", "s2", "s3", "s4"])
            try context.undo()
            // Before: s1 s2 s4, the other writer's order lost, and saved so.
            #expect(Self.titles(playlist) == ["s4", "s1", "s2"])
            #expect(try Self.isListed(context, ids, 3) == false)
            #expect(try Self.isListed(context, ids, 4))
            #expect(context.hasChanges == false)
            try context.redo()
            #expect(Set(Self.titles(playlist)) == ["s1", "s2", "s3", "s4"])
            #expect(try Self.isListed(context, ids, 3))
            try context.undo()
            try context.save()
        }
        try await privateContext(try openCoordinator(dir, model: try Self.playlistModel())).perform { (context: isolated ManagedObjectContext) throws in
            #expect(Self.titles(try context.existingObject(with: ids[0])) == ["s4", "s1", "s2"])
        }
    }
}
