import Foundation
import StrataLog
import StrataTestSupport
import Testing

@testable import Strata

/// Review of undo-group coalescing (DESIGN.md "The event": repeated sets keep the first old
/// and last new value, a value set back drops out, insert then update is an insert, insert then
/// delete is nothing, update then delete is a delete with the values before the group) and of
/// persisted undo (spec 0006 §9, §13).
@Suite("Contexts: coalescing and persisted undo review")
struct CoalescingPersistedUndoReviewTests {
    static let steps = Int(ProcessInfo.processInfo.environment["STRATA_COALESCING_STEPS"] ?? "") ?? 200

    static func player(_ context: isolated ManagedObjectContext, _ name: String) throws -> ManagedObject {
        try #require(try context.fetch(FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "name == %@", name))).first)
    }

    static func team(_ context: isolated ManagedObjectContext, _ name: String) throws -> ManagedObject {
        try #require(try context.fetch(FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "name == %@", name))).first)
    }

    /// ContextPropertyTests closes a group after every operation, so nothing is ever
    /// coalesced; here groups span several operations (inserts, updates, to-one moves that
    /// change both teams' to-many, deletes with nullify), closed at random, by undo, redo and
    /// save. An undo must bring back exactly the state before the group; a group whose
    /// operations net out to nothing must not be pushed at all.
    @Test("random multi-operation groups: undo restores the state before each group, redo the state after; net-nothing groups are dropped", arguments: [11, 12, 13, 14] as [UInt64])
    func coalescedGroupsMatchModel(seed: UInt64) async throws {
        let matched = try await Self.randomGroups(seed: seed, persisted: false)
        #expect(matched == Self.steps, "every step's state and stacks matched the model")
    }

    /// The same with persisted undo, the context restarted (a new coordinator and context
    /// reading its stacks back from the log) after saves whose stacks the log describes:
    /// groups read back hold only recorded sides and membership changes, and undoing them
    /// maintains inverses.
    @Test("random multi-operation groups with persisted undo and restarts after saves: groups read back from the log undo and redo as the live ones did", arguments: [21, 22, 23, 24] as [UInt64])
    func persistedGroupsMatchModel(seed: UInt64) async throws {
        let matched = try await Self.randomGroups(seed: seed, persisted: true)
        #expect(matched == Self.steps, "every step's state and stacks matched the model")
    }

    /// Runs the random steps against the model; returns how many matched it (all of them
    /// unless one diverged, which is recorded as an issue naming the step).
    static func randomGroups(seed: UInt64, persisted: Bool) async throws -> Int {
        let dir = try TemporaryDirectory()
        let model = try propertyModel()
        var coordinator = try openCoordinator(dir, model: model)
        var context = privateContext(coordinator, name: persisted ? "editor" : nil, author: persisted ? "alice" : nil, persistentUndo: persisted)
        var rng = SeededGenerator(state: seed)
        var expected = ExpectedState()
        var saved = ExpectedState()
        var groupStart = ExpectedState()  // the state when the open group began
        // The state before each closed group, and whether the group was saved (a group
        // undone before any save stays unsaved on the redo stack: the log can't know it).
        var undoStack: [(state: ExpectedState, saved: Bool)] = []
        var redoStack: [(state: ExpectedState, saved: Bool)] = []
        var diverged = false  // a rollback cleared stacks the log still describes
        var restarts = 0
        var counter = 0
        var log: [String] = []

        /// Closes the model's open group as the context does: pushed unless it nets out.
        func closeGroup() {
            if expected != groupStart {
                undoStack.append((groupStart, false))
                redoStack.removeAll()
            }
            groupStart = expected
        }

        for step in 0..<Self.steps {
            let roll = Int(rng.next() % 100)
            let teams = expected.teams.sorted()
            let players = expected.players.keys.sorted()
            var description = ""
            switch roll {
            case 0..<10:
                counter += 1
                let name = "t\(counter)"
                description = "insert team \(name)"
                expected.teams.insert(name)
                try await context.perform { context in
                    try context.insertNewObject(forEntityName: "Team").setValue(name, forKey: "name")
                }
            case 10..<24:
                counter += 1
                let name = "p\(counter)"
                let age = Int32(rng.next() % 80)
                let team = teams.isEmpty || rng.next() % 3 == 0 ? nil : teams[Int(rng.next() % UInt64(teams.count))]
                description = "insert player \(name) age \(age) team \(team ?? "-")"
                expected.players[name] = (age, team)
                try await context.perform { context in
                    let player = try context.insertNewObject(forEntityName: "Player")
                    player.setValue(name, forKey: "name")
                    player.setValue(age, forKey: "age")
                    if let team { player.setValue(try Self.team(context, team), forKey: "team") }
                }
            case 24..<40 where !players.isEmpty:
                let name = players[Int(rng.next() % UInt64(players.count))]
                // Often the value it had when the group began: a set back drops out.
                let original = groupStart.players[name]?.age
                let age = original != nil && rng.next() % 3 == 0 ? original ?? 0 : Int32(rng.next() % 80)
                description = "set \(name).age = \(age)"
                expected.players[name]?.age = age
                try await context.perform { context in try Self.player(context, name).setValue(age, forKey: "age") }
            case 40..<54 where !players.isEmpty:
                let name = players[Int(rng.next() % UInt64(players.count))]
                let original = groupStart.players[name]?.team
                let team: String?
                if let original, expected.teams.contains(original), rng.next() % 3 == 0 {
                    team = original
                } else {
                    team = teams.isEmpty || rng.next() % 4 == 0 ? nil : teams[Int(rng.next() % UInt64(teams.count))]
                }
                description = "set \(name).team = \(team ?? "-")"
                expected.players[name]?.team = team
                try await context.perform { context in
                    let player = try Self.player(context, name)
                    player.setValue(try team.map { try Self.team(context, $0) }, forKey: "team")
                }
            case 54..<60 where !teams.isEmpty:
                // To-many membership from the team's side: add or remove a player.
                let teamName = teams[Int(rng.next() % UInt64(teams.count))]
                guard let name = players.isEmpty ? nil : players[Int(rng.next() % UInt64(players.count))] else { continue }
                let remove = expected.players[name]?.team == teamName
                description = "\(remove ? "remove" : "add") \(name) \(remove ? "from" : "to") \(teamName).players"
                expected.players[name]?.team = remove ? nil : teamName
                try await context.perform { context in
                    let members = try Self.team(context, teamName).mutableSetValue(forKey: "players")
                    let player = try Self.player(context, name)
                    if remove { members.remove(player) } else { members.add(player) }
                }
            case 60..<66 where !players.isEmpty:
                let name = players[Int(rng.next() % UInt64(players.count))]
                description = "delete player \(name)"
                expected.players[name] = nil
                try await context.perform { context in context.delete(try Self.player(context, name)) }
            case 66..<69 where !teams.isEmpty:
                let name = teams[Int(rng.next() % UInt64(teams.count))]
                description = "delete team \(name) (nullify)"
                expected.teams.remove(name)
                for (player, value) in expected.players where value.team == name { expected.players[player]?.team = nil }
                try await context.perform { context in context.delete(try Self.team(context, name)) }
            case 69..<79:
                description = "processPendingChanges"
                closeGroup()
                await context.perform { context in context.processPendingChanges() }
            case 79..<87:
                closeGroup()
                guard let before = undoStack.popLast() else {
                    await context.perform { context in context.processPendingChanges() }
                    continue
                }
                description = "undo"
                redoStack.append((expected, before.saved))
                expected = before.state
                groupStart = expected
                try await context.perform { context in try context.undo() }
            case 87..<91:
                closeGroup()
                guard let after = redoStack.popLast() else {
                    await context.perform { context in context.processPendingChanges() }
                    continue
                }
                description = "redo"
                undoStack.append((expected, after.saved))
                expected = after.state
                groupStart = expected
                try await context.perform { context in try context.redo() }
            case 91..<98:
                description = "save"
                closeGroup()
                try await context.perform { context in try context.save() }
                saved = expected
                for index in undoStack.indices { undoStack[index].saved = true }
                let stored = try await privateContext(coordinator).perform { context in try observe(context) }
                #expect(stored == saved, "seed \(seed) step \(step): the store after save\n\(log.suffix(16).joined(separator: "\n"))")
                if persisted, !diverged, redoStack.allSatisfy(\.saved), rng.next() % 2 == 0 {
                    description = "save, restart"
                    restarts += 1
                    coordinator = try openCoordinator(dir, model: model)
                    context = privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true)
                    let problems = await context.perform { context in context.core.problems.map { "\($0)" } }
                    #expect(problems.isEmpty)
                }
            case 98..<100 where !persisted || rng.next() % 8 == 0:
                // Rare with persisted undo: the log still describes the stacks it clears.
                description = "rollback"
                expected = saved
                groupStart = saved
                undoStack.removeAll()
                redoStack.removeAll()
                diverged = true
                await context.perform { context in context.rollback() }
            default:
                continue
            }
            log.append("\(step): \(description)")
            let observed = try await context.perform { context in try observe(context) }
            if observed != expected {
                Issue.record("seed \(seed) step \(step) after \(description):\nexpected \(expected)\nobserved \(observed)\n\(log.suffix(16).joined(separator: "\n"))")
                return step
            }
            // The context's stacks are the model's: the open group counts for canUndo while it has changes.
            let (canUndo, canRedo) = await context.perform { context in (context.canUndo, context.canRedo) }
            // (An open group with changes that will net out still counts, so only closed states are compared.)
            let modelCanUndo = !undoStack.isEmpty
            if ["processPendingChanges", "undo", "redo", "save", "save, restart", "rollback"].contains(description), canUndo != modelCanUndo || canRedo != !redoStack.isEmpty {
                Issue.record("seed \(seed) step \(step) after \(description): canUndo \(canUndo) canRedo \(canRedo), model \(modelCanUndo) \(!redoStack.isEmpty)\n\(log.suffix(16).joined(separator: "\n"))")
                return step
            }
        }
        try await context.perform { context in try context.save() }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
        if persisted && Self.steps >= 100 { #expect(restarts > 0) }
        return Self.steps
    }

    // MARK: - Persisted undo

    /// Every (author, name) pair, nil included: each reads back only its own groups.
    static let pairs: [(author: String?, name: String?)] = [
        ("alice", "editor"), ("alice", "inspector"), ("bob", "editor"), (nil, "editor"), ("alice", nil), (nil, nil),
    ]

    @Test("contexts of the same author with other names, the same name with other authors, and nil author or name each undo only their own saved groups after a restart")
    func pairsAreSeparate() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        var coordinator = try openCoordinator(dir, model: model)
        var teams: [ManagedObjectID] = []
        for (index, pair) in Self.pairs.enumerated() {
            let id = try await privateContext(coordinator, name: pair.name, author: pair.author, persistentUndo: true).perform {
                (context: isolated ManagedObjectContext) throws in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("v0", forKey: "name")
                try context.save()
                team.setValue("v1 of \(index)", forKey: "name")
                context.setActionName("rename \(index)")
                try context.save()
                return team.objectID
            }
            teams.append(id)
        }
        coordinator = try openCoordinator(dir, model: model)
        let teamIDs = teams
        for (index, pair) in Self.pairs.enumerated() {
            try await privateContext(coordinator, name: pair.name, author: pair.author, persistentUndo: true).perform {
                (context: isolated ManagedObjectContext) throws in
                #expect(context.core.problems.isEmpty)
                #expect(context.undoActionName == "rename \(index)", "pair \(pair)")
                try context.undo()
                try context.save()
                // Its own team only; the others' keep their names.
                for (other, id) in teamIDs.enumerated() {
                    let name = try context.existingObject(with: id).value(forKey: "name") as? String
                    #expect(name == (other <= index ? "v0" : "v1 of \(other)"), "pair \(pair), team \(other)")
                }
                // Below it: the insert, then nothing of anyone else's.
                #expect(context.undoActionName == nil)
                #expect(context.canUndo == true)
                try context.undo()
                #expect(context.canUndo == false, "pair \(pair)")
                context.rollback()
            }
        }
    }

    @Test("many restarts in a row, each undoing or redoing one group interleaved with another writer's saves of another property: the values follow the stack; levelsOfUndo smaller than the history bounds it")
    func manyRestarts() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        var coordinator = try openCoordinator(dir, model: model)
        let teamID = try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("v0", forKey: "name")
            context.setActionName("create")
            try context.save()
            for index in 1...6 {
                team.setValue("v\(index)", forKey: "name")
                context.setActionName("g\(index)")
                try context.save()
            }
            return team.objectID
        }
        // Undo three times, one restart each, another writer saving a color between.
        var current = 6
        for round in 0..<6 {
            try await privateContext(coordinator, name: "sync", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: teamID).setValue("color \(round)", forKey: "uniformColor")
                try context.save()
            }
            coordinator = try openCoordinator(dir, model: model)
            let undoing = round < 4
            let before = current
            current += undoing ? -1 : 1
            let after = current
            try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
                (context: isolated ManagedObjectContext) throws in
                #expect(context.core.problems.isEmpty)
                #expect(context.undoActionName == "g\(before)", "round \(round)")
                #expect(context.redoActionName == (before == 6 ? nil : "g\(before + 1)"), "round \(round)")
                if undoing { try context.undo() } else { try context.redo() }
                try context.save()
                let team = try context.existingObject(with: teamID)
                #expect(team.value(forKey: "name") as? String == "v\(after)", "round \(round)")
                #expect(team.value(forKey: "uniformColor") as? String == "color \(round)", "round \(round)")
            }
        }
        // current is 4: g1...g4 below, g5 and g6 above. levelsOfUndo 2 keeps g4 and g3.
        coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            context.levelsOfUndo = 2
            var names: [String] = []
            while context.canUndo {
                names.append(context.undoActionName ?? "?")
                try context.undo()
            }
            #expect(names == ["g4", "g3"])
            #expect(context.redoActionName == "g3")
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "v2")
            try context.save()
        }
    }

    @Test("after a restart, another writer's change to the property a saved group set makes its undo (and a redo) fail with a conflict naming it; nothing is overwritten")
    func conflictAfterRestart() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        var coordinator = try openCoordinator(dir, model: model)
        let teamID = try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("A", forKey: "name")
            try context.save()
            team.setValue("B", forKey: "name")
            try context.save()
            team.setValue("red", forKey: "uniformColor")
            try context.save()
            try context.undo()  // the color
            try context.save()
            return team.objectID
        }
        try await privateContext(coordinator, name: "sync", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("C", forKey: "name")
            team.setValue("blue", forKey: "uniformColor")
            try context.save()
        }
        coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "C")
            #expect(context.canRedo == true)
            do {
                try context.redo()
                Issue.record("redo overwrote bob's color")
            } catch ContextError.undoConflict(_, let property, _, _) {
                #expect(property == "uniformColor")
            }
            #expect(context.canRedo == true)
            do {
                try context.undo()
                Issue.record("undo overwrote bob's name")
            } catch ContextError.undoConflict(_, let property, _, _) {
                #expect(property == "name")
            }
            #expect(context.canUndo == true)
            #expect(context.hasChanges == false)
            #expect(team.value(forKey: "name") as? String == "C")
            #expect(team.value(forKey: "uniformColor") as? String == "blue")
        }
    }

    @Test("saved groups compacted into segments are undone after a restart; after a purge only the groups after it are")
    func compactionAndPurge() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        var coordinator = try openCoordinator(dir, model: model)
        let teamID = try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("v0", forKey: "name")
            try context.save()
            for index in 1...3 {
                team.setValue("v\(index)", forKey: "name")
                context.setActionName("g\(index)")
                try context.save()
            }
            return team.objectID
        }
        let log = coordinator.persistentStores[0].log
        let g3 = try log.head
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            for index in 4...6 {
                team.setValue("v\(index)", forKey: "name")
                context.setActionName("g\(index)")
                try context.save()
            }
            try context.undo()  // g6 on the redo stack
            try context.save()
        }
        _ = try log.compact(CompactionRequest(before: try log.head + 1))
        coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            #expect(context.core.problems.isEmpty)
            #expect(context.redoActionName == "g6")
            #expect(context.undoActionName == "g5")
            try context.undo()
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "v4")
            // Left unsaved, not rolled back: rollback() drops the stacks for good (spec 0006 §13).
        }
        // Purge through g3's transaction.
        _ = try coordinator.persistentStores[0].log.purge(through: g3, author: "janitor")
        coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            #expect(context.core.problems.isEmpty)
            #expect(context.redoActionName == "g6")
            var names: [String] = []
            while context.canUndo {
                names.append(context.undoActionName ?? "?")
                try context.undo()
            }
            #expect(names == ["g5", "g4"])
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "v3")
            try context.save()
        }
    }

    /// The inverse of an insert is a delete: it throws away every value the object has. Undoing
    /// a saved insert after another writer changed the object (or redoing a saved delete after
    /// another writer changed the re-created object) must be refused like an update's undo,
    /// naming the property — before, the undo deleted the object with the other writer's
    /// value, live or after a restart, and the save wrote it.
    @Test("undo of a saved insert, and redo of a saved delete, after another writer changed the object: a conflict naming the property, nothing deleted", arguments: [false, true])
    func insertUndoAfterOtherWriter(restart: Bool) async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        var coordinator = try openCoordinator(dir, model: model)
        let alice = privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true)
        let (teamID, otherID) = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            // A saved team deleted, its delete undone and saved: the delete on the redo stack.
            let other = try context.insertNewObject(forEntityName: "Team")
            other.setValue("X", forKey: "name")
            try context.save()
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("A", forKey: "name")
            context.setActionName("create")
            try context.save()
            context.delete(other)
            context.setActionName("delete")
            try context.save()
            try context.undo()
            try context.save()
            return (team.objectID, other.objectID)
        }
        try await privateContext(coordinator, name: "sync", author: "bob").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("B", forKey: "name")
            try context.existingObject(with: otherID).setValue("Y", forKey: "name")
            try context.save()
        }
        var context = alice
        if restart {
            coordinator = try openCoordinator(dir, model: model)
            context = privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true)
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            #expect(context.redoActionName == "delete")
            do {
                try context.redo()
                Issue.record("the redo deleted the team bob renamed")
            } catch ContextError.undoConflict(let object, let property, _, let found) {
                #expect(object == otherID.description)
                #expect(property == "name")
                #expect(found.contains("Y"))
            }
            #expect(context.redoActionName == "delete")
            #expect(context.undoActionName == "create")
            do {
                try context.undo()
                Issue.record("the undo deleted the team bob renamed")
            } catch ContextError.undoConflict(let object, let property, _, let found) {
                #expect(object == teamID.description)
                #expect(property == "name")
                #expect(found.contains("B"))
            }
            #expect(context.undoActionName == "create")
            #expect(context.hasChanges == false)
            try context.save()
        }
        let names = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Team")).compactMap { $0.value(forKey: "name") as? String }.sorted()
        }
        #expect(names == ["B", "Y"])
    }

    /// `UndoManager.removeAllActions()`: "Clears the undo and redo stacks and reenables the
    /// manager." Before, registration disabled (twice) stayed disabled after it.
    @Test("removeAllUndoActions re-enables undo registration: a change after it is undoable")
    func removeAllReenables() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("A", forKey: "name")
            try context.save()
            context.disableUndoRegistration()
            context.disableUndoRegistration()
            team.setValue("B", forKey: "name")
            context.removeAllUndoActions()
            #expect(context.canUndo == false)
            team.setValue("C", forKey: "name")
            context.processPendingChanges()
            #expect(context.canUndo == true)
            try context.undo()
            #expect(team.value(forKey: "name") as? String == "B")
            // The old disables are gone: an enable now doesn't go below zero.
            context.enableUndoRegistration()
            team.setValue("D", forKey: "name")
            context.processPendingChanges()
            #expect(context.canUndo == true)
        }
    }

    static func listModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("List") {
                Attribute("name", .string)
                Relationship("entries", to: "Entry", inverse: "list", toMany: true, ordered: true)
                Relationship("tags", to: "Tag", inverse: "lists", toMany: true)
            }
            Entity("Entry") {
                Attribute("name", .string)
                Relationship("list", to: "List", inverse: "entries")
            }
            Entity("Tag") {
                Attribute("name", .string)
                Relationship("lists", to: "List", inverse: "tags", toMany: true)
            }
        }
    }

    static func listState(_ context: isolated ManagedObjectContext, _ id: ManagedObjectID) throws -> (entries: [String], tags: [String]) {
        let list = try context.existingObject(with: id)
        let entries = (list.value(forKey: "entries") as? [ManagedObject] ?? []).map { $0.value(forKey: "name") as? String ?? "?" }
        let tags = (list.value(forKey: "tags") as? Set<ManagedObject> ?? []).map { $0.value(forKey: "name") as? String ?? "?" }.sorted()
        return (entries, tags)
    }

    @Test("ordered and many-to-many membership: a move and a tag set back within a group drop out; a saved move and tag change undo and redo after restarts")
    func orderedAndManyToManyAcrossRestarts() async throws {
        let dir = try TemporaryDirectory()
        let model = try Self.listModel()
        var coordinator = try openCoordinator(dir, model: model)
        let listID = try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            let list = try context.insertNewObject(forEntityName: "List")
            for name in ["e1", "e2", "e3"] {
                let entry = try context.insertNewObject(forEntityName: "Entry")
                entry.setValue(name, forKey: "name")
                list.mutableSetValue(forKey: "entries").add(entry)
            }
            for name in ["t1", "t2"] {
                let tag = try context.insertNewObject(forEntityName: "Tag")
                tag.setValue(name, forKey: "name")
            }
            context.setActionName("create")
            try context.save()
            let tags = try context.fetch(FetchRequest(entityName: "Tag")).sorted { ($0.value(forKey: "name") as? String ?? "") < ($1.value(forKey: "name") as? String ?? "") }
            list.mutableSetValue(forKey: "tags").add(tags[0])
            context.setActionName("tag")
            try context.save()
            // Moved and moved back, tagged and untagged: nothing.
            list.mutableSetValue(forKey: "entries").moveObject(at: 2, to: 0)
            list.mutableSetValue(forKey: "entries").moveObject(at: 0, to: 2)
            list.mutableSetValue(forKey: "tags").add(tags[1])
            list.mutableSetValue(forKey: "tags").remove(tags[1])
            context.processPendingChanges()
            #expect(context.undoActionName == "tag")
            // A move, a tag swap and a removed entry, one group.
            list.mutableSetValue(forKey: "entries").moveObject(at: 2, to: 0)
            list.mutableSetValue(forKey: "tags").remove(tags[0])
            list.mutableSetValue(forKey: "tags").add(tags[1])
            let e2 = try #require((list.value(forKey: "entries") as? [ManagedObject])?.first { $0.value(forKey: "name") as? String == "e2" })
            e2.setValue(nil, forKey: "list")
            context.setActionName("rearrange")
            try context.save()
            let state = try Self.listState(context, list.objectID)
            #expect(state.entries == ["e3", "e1"])
            #expect(state.tags == ["t2"])
            return list.objectID
        }
        for (step, (undo, entries, tags)) in [
            (true, ["e1", "e2", "e3"], ["t1"]), (true, ["e1", "e2", "e3"], []), (false, ["e1", "e2", "e3"], ["t1"]), (false, ["e3", "e1"], ["t2"]),
            (true, ["e1", "e2", "e3"], ["t1"]),
        ].enumerated() {
            coordinator = try openCoordinator(dir, model: model)
            try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
                (context: isolated ManagedObjectContext) throws in
                #expect(context.core.problems.isEmpty)
                if undo { try context.undo() } else { try context.redo() }
                try context.save()
                let state = try Self.listState(context, listID)
                #expect(state.entries == entries, "step \(step)")
                #expect(state.tags == tags, "step \(step)")
            }
            let stored = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let state = try Self.listState(context, listID)
                return state.entries + state.tags
            }
            #expect(stored == entries + tags, "step \(step): the store")
        }
    }
}
