import Foundation
import StrataLog
import StrataTestSupport
import Testing

@testable import Strata

/// Persisted undo of groups a refresh split (spec 0006 §13, spec 0004 §10's `parts`) across
/// model versions and quits with an undo pending, the record made when a save fails, and
/// derived attributes merged from another writer through undo, redo and a restart.
@Suite("Contexts: persisted undo of split groups, failed saves and derived values")
struct PersistedUndoPartsFixTests {
    private static func name(_ context: isolated ManagedObjectContext, _ id: ManagedObjectID, key: String = "name") throws -> String? {
        try context.existingObject(with: id).value(forKey: key) as? String
    }

    /// The league store with Otters (the fixture's) and Kites saved by another context.
    private static func twoTeams(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, ManagedObjectID, ManagedObjectID) {
        let (coordinator, otters) = try await leagueStore(dir)
        let kites = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            try context.save()
            return team.objectID
        }
        return (coordinator, otters, kites)
    }

    /// The editor saves one group renaming Otters to Herons and Kites to Swans, undoes it and
    /// refreshes Otters without merging: the Otters part stays done (on the undo stack), the
    /// rest's undo waits to be saved (the rest on the redo stack).
    private static func splitWithPendingUndo(_ context: isolated ManagedObjectContext, _ otters: ManagedObjectID, _ kites: ManagedObjectID) throws {
        try context.existingObject(with: otters).setValue("Herons", forKey: "name")
        try context.existingObject(with: kites).setValue("Swans", forKey: "name")
        try context.save()
        try context.undo()
        context.refresh(try context.existingObject(with: otters), mergeChanges: false)
    }

    /// The league model's next version: `Team` renamed `Club` and its `name` renamed `title`
    /// (renaming identifiers), Player's `team` to it.
    private static var renamedLeague: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Club") {
                    Attribute("title", .string).renamed(from: "name")
                    Attribute("uniformColor", .string)
                    Relationship("players", to: "Player", inverse: "team", toMany: true, deleteRule: .cascade)
                }.renamed(from: "Team")
                Entity("Player") {
                    Attribute("firstName", .string)
                    Attribute("lastName", .string)
                    Attribute("email", .string)
                    Relationship("team", to: "Club", inverse: "players")
                }
            }
        }
    }

    /// The club titled `title`'s ID (under the renamed model).
    private static func club(_ context: isolated ManagedObjectContext, _ title: String) throws -> ManagedObjectID {
        let found = try context.fetch(FetchRequest(entityName: "Club", format: "title == %@", title))
        return try #require(found.first).objectID
    }

    // MARK: - Parts across model versions

    @Test("a part a refresh split off a group, recorded under a model version that a later one renames (entity and attribute): after opening with the later version the part is still undoable and the rest redoable")
    func splitPartFollowsEntityRename() async throws {
        let dir = try TemporaryDirectory()
        let (first, otters, kites) = try await Self.twoTeams(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            try Self.splitWithPendingUndo(context, otters, kites)
            try context.save()  // the undo of Swans only: Herons stays done
        }
        let renamed = try openCoordinator(dir, model: try Self.renamedLeague)
        try await editor(renamed).perform { (context: isolated ManagedObjectContext) throws in
            let herons = try Self.club(context, "Herons")
            let kitesClub = try Self.club(context, "Kites")
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(undoable, "the Otters part, recorded as Team/p1, is Club/p1 now")
            #expect(redoable, "the rest, recorded as Team/p2, is Club/p2 now")
            guard undoable, redoable else { return }
            try context.undo()
            #expect(try Self.name(context, herons, key: "title") == "Otters")
            try context.redo()
            try context.redo()
            #expect(try Self.name(context, herons, key: "title") == "Herons")
            #expect(try Self.name(context, kitesClub, key: "title") == "Swans")
            try context.undo()  // the rest again: Swans → Kites
            try context.save()
        }
        // Recorded again under the renamed model: read back the same way.
        let again = try openCoordinator(dir, model: try Self.renamedLeague)
        try await editor(again).perform { (context: isolated ManagedObjectContext) throws in
            let herons = try Self.club(context, "Herons")
            let kitesClub = try Self.club(context, "Kites")
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(undoable && redoable)
            try context.redo()
            #expect(try Self.name(context, kitesClub, key: "title") == "Swans")
            try context.undo()
            try context.undo()
            #expect(try Self.name(context, herons, key: "title") == "Otters")
            try context.save()
        }
        #expect(try #require(again.persistentStores.first).log.verify().isClean)
    }

    // MARK: - A split group's undo pending at a quit

    @Test("a group split with its rest's undo pending, recorded at once (levelsOfUndo set), then a quit that never saves the undo: the group is done and takes one undo step, as before the undo")
    func splitWithPendingUndoQuitIsOneStep() async throws {
        let dir = try TemporaryDirectory()
        let (first, otters, kites) = try await Self.twoTeams(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            try Self.splitWithPendingUndo(context, otters, kites)
            context.levelsOfUndo = 10  // records the stacks at once
        }  // quit: the undo of the rest is never saved
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.name(context, otters) == "Herons")
            #expect(try Self.name(context, kites) == "Swans")
            let redoable = context.canRedo
            #expect(!redoable, "the undo was never saved: the whole group is done")
            try context.undo()
            #expect(try Self.name(context, otters) == "Otters", "one step undoes the group, as the log alone gives it")
            #expect(try Self.name(context, kites) == "Kites")
            let undoable = context.canUndo
            #expect(!undoable)
            try context.save()
        }
        #expect(try #require(restarted.persistentStores.first).log.verify().isClean)
    }

    @Test("a group split with its rest's redo pending, recorded at once, then a quit that never saves the redo: the group is undone and takes one redo step; undone again after a second restart")
    func splitWithPendingRedoQuitIsOneStep() async throws {
        let dir = try TemporaryDirectory()
        let (first, otters, kites) = try await Self.twoTeams(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: otters).setValue("Herons", forKey: "name")
            try context.existingObject(with: kites).setValue("Swans", forKey: "name")
            try context.save()
            try context.undo()
            try context.save()
            try context.redo()  // pending
            context.refresh(try context.existingObject(with: otters), mergeChanges: false)  // Otters stays undone
            #expect(try Self.name(context, otters) == "Otters")
            #expect(try Self.name(context, kites) == "Swans")
            context.levelsOfUndo = 10  // records the stacks at once
        }  // quit: the redo of the rest is never saved
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.name(context, otters) == "Otters")
            #expect(try Self.name(context, kites) == "Kites")
            let undoable = context.canUndo
            #expect(!undoable, "the redo was never saved: the whole group is undone")
            try context.redo()
            #expect(try Self.name(context, otters) == "Herons", "one step redoes the group")
            #expect(try Self.name(context, kites) == "Swans")
            let redoable = context.canRedo
            #expect(!redoable)
            try context.save()
        }
        let again = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(again).perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            #expect(try Self.name(context, otters) == "Otters")
            #expect(try Self.name(context, kites) == "Kites")
            let undoable = context.canUndo
            #expect(!undoable)
            try context.save()
        }
        #expect(try #require(again.persistentStores.first).log.verify().isClean)
    }

    @Test("a part's undo pending while its rest's undo was saved, recorded at once, then a quit: the part is done (on the undo stack) and the rest undone (on the redo stack), each undone or redone without a conflict")
    func pendingUndoOfPartLeavesSavedRestOnRedo() async throws {
        let dir = try TemporaryDirectory()
        let (first, otters, kites) = try await Self.twoTeams(dir)
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            try Self.splitWithPendingUndo(context, otters, kites)
            try context.save()  // the rest's undo: Kites
            try context.undo()  // the part: Otters, unsaved
            #expect(try Self.name(context, otters) == "Otters")
            context.levelsOfUndo = 10  // records the stacks at once
        }  // quit: the part's undo is never saved
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.name(context, otters) == "Herons")
            #expect(try Self.name(context, kites) == "Kites")
            let (undoable, redoable) = (context.canUndo, context.canRedo)
            #expect(undoable && redoable, "the part on the undo stack, the rest (undone in the store) on the redo stack")
            guard undoable, redoable else { return }
            try context.undo()
            #expect(try Self.name(context, otters) == "Otters")
            try context.redo()
            try context.redo()
            #expect(try Self.name(context, kites) == "Swans")
            try context.save()
        }
        #expect(try #require(restarted.persistentStores.first).log.verify().isClean)
    }

    // MARK: - A failed save after a trim

    /// Teams with a unique `code`, a `rank` from 1 to 10 and a one-way `rival`.
    private static var rankedTeams: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Attribute("code", .string)
                    Attribute("rank", .int32, default: 1).required().range(min: .int32(1), max: .int32(10))
                    Relationship("rival", to: "Team")
                    Unique("code")
                }
            }
        }
    }

    /// At levelsOfUndo 2 the editor saves renames One and Two of team A, then makes a
    /// change `failing` breaks (given team C, which another writer deleted), whose save fails
    /// after its close dropped One's group; quits. After the restart the stacks are what they
    /// were in memory, less the unsaved group.
    private func checkTrimThenFailedSave(_ failing: @escaping @Sendable (isolated ManagedObjectContext, ManagedObject, ManagedObjectID) throws -> Void) async throws {
        let dir = try TemporaryDirectory()
        let model = try Self.rankedTeams
        let first = try openCoordinator(dir, model: model)
        let team = try await privateContext(first).perform { (context: isolated ManagedObjectContext) throws in
            for code in ["A", "B", "C"] {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Zero", forKey: "name")
                team.setValue(code, forKey: "code")
            }
            try context.save()
            return try #require(try context.fetch(FetchRequest(entityName: "Team", format: "code == 'A'")).first).objectID
        }
        let gone = try await privateContext(first).perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(try context.fetch(FetchRequest(entityName: "Team", format: "code == 'C'")).first)
            context.delete(team)
            try context.save()
            return team.objectID
        }
        try await editor(first).perform { (context: isolated ManagedObjectContext) throws in
            context.levelsOfUndo = 2
            let object = try context.existingObject(with: team)
            for name in ["One", "Two"] {
                object.setValue(name, forKey: "name")
                try context.save()
            }
            object.setValue("Three", forKey: "name")
            try failing(context, object, gone)
            #expect(throws: (any Error).self) { try context.save() }
            // In memory: Two's group and the unsaved one; One's dropped.
            try context.undo()
            try context.undo()
            #expect(try Self.name(context, team) == "One")
            let undoable = context.canUndo
            #expect(!undoable, "One's group was dropped when the save closed the third")
            try context.redo()
            try context.redo()
        }  // quit: the third group is never saved
        let restarted = try openCoordinator(dir, model: model)
        try await editor(restarted).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.name(context, team) == "Two")
            try context.undo()
            #expect(try Self.name(context, team) == "One")
            let undoable = context.canUndo
            #expect(!undoable, "the group the failed save's close dropped stays dropped")
            let redoable = context.canRedo
            #expect(redoable)
        }
    }

    @Test("levelsOfUndo trims saved work at a save's close and the save fails validation: after a quit, the dropped group stays dropped")
    func trimThenValidationFailure() async throws {
        try await checkTrimThenFailedSave { _, object, _ in object.setValue(Int32(99), forKey: "rank") }
    }

    @Test("levelsOfUndo trims saved work at a save's close and the store refuses the save (a uniqueness conflict): after a quit, the dropped group stays dropped")
    func trimThenUniquenessConflict() async throws {
        try await checkTrimThenFailedSave { _, object, _ in object.setValue("B", forKey: "code") }
    }

    @Test("levelsOfUndo trims saved work at a save's close and the store refuses its commit (a reference to a team another writer deleted): after a quit, the dropped group stays dropped")
    func trimThenRefusedCommit() async throws {
        try await checkTrimThenFailedSave { context, object, gone in object.setValue(try context.object(with: gone), forKey: "rival") }
    }

    // MARK: - Derived attributes merged under persisted undo

    /// The department's derived values and members, read in `context`.
    private static func derived(_ context: isolated ManagedObjectContext, _ department: ManagedObjectID) throws -> [String] {
        let object = try context.existingObject(with: department)
        let members = (object.value(forKey: "employees") as? Set<ManagedObject> ?? []).compactMap { $0.value(forKey: "name") as? String }.sorted()
        return [
            "\(object.value(forKey: "employeeCount") as? Int64 ?? -1)", "\(object.value(forKey: "totalSalary") as? Decimal ?? -1)",
            "\(object.value(forKey: "name") as? String ?? "nil")", "\(object.value(forKey: "searchName") as? String ?? "nil")",
        ] + members
    }

    /// The same read in a fresh context.
    private static func fresh(_ coordinator: PersistentStoreCoordinator, _ department: ManagedObjectID) async throws -> [String] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in try derived(context, department) }
    }

    @Test("a persisted-undo context's department, whose derived count and sum another writer changes (merged), through undo, save, restart, redo and undo: the values are a fresh fetch's and verify is clean")
    func derivedValuesMergedThroughUndoAndRestart() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.derivedAttributes
        let first = try openCoordinator(dir, model: model)
        let ids = try await editor(first).perform { (context: isolated ManagedObjectContext) throws -> (ManagedObjectID, ManagedObjectID) in
            let lab = try context.insertNewObject(forEntityName: "Department")
            lab.setValue("Lab", forKey: "name")
            let ida = try context.insertNewObject(forEntityName: "Employee")
            ida.setValue("Ida", forKey: "name")
            ida.setValue(Decimal(10), forKey: "salary")
            ida.setValue(lab, forKey: "department")
            try context.save()
            let bo = try context.insertNewObject(forEntityName: "Employee")  // group 2
            bo.setValue("Bo", forKey: "name")
            bo.setValue(Decimal(20), forKey: "salary")
            bo.setValue(lab, forKey: "department")
            try context.save()
            lab.setValue("Workshop", forKey: "name")  // group 3
            try context.save()
            return (lab.objectID, bo.objectID)
        }
        let (lab, bo) = ids
        let editorContext = editor(first)
        try await editorContext.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            #expect(try Self.derived(context, lab) == ["2", "30", "Workshop", "workshop", "Bo", "Ida"])
            try context.undo()  // the rename, pending
        }
        // Another writer adds Cy and raises Ida's salary: the count and the sum change.
        let save = try await privateContext(first).perform { (context: isolated ManagedObjectContext) throws -> ContextDidSave? in
            var seen: ContextDidSave?
            _ = context.addObserver { change in
                if case .didSave(let save) = change.notification { seen = save }
            }
            let cy = try context.insertNewObject(forEntityName: "Employee")
            cy.setValue("Cy", forKey: "name")
            cy.setValue(Decimal(5), forKey: "salary")
            cy.setValue(try context.existingObject(with: lab), forKey: "department")
            let ida = try #require(try context.fetch(FetchRequest(entityName: "Employee", format: "name == 'Ida'")).first)
            ida.setValue(Decimal(100), forKey: "salary")
            try context.save()
            return seen
        }
        let didSave = try #require(save)
        try await editorContext.perform { (context: isolated ManagedObjectContext) throws in
            context.mergeChanges(fromContextDidSave: didSave)
            #expect(try Self.derived(context, lab) == ["3", "125", "Lab", "workshop", "Bo", "Cy", "Ida"], "derived values follow the store; the unsaved undo keeps its name")
            try context.save()  // the rename's undo
            try context.undo()  // Bo's insert
            try context.save()
        }
        let undone = ["2", "105", "Lab", "lab", "Cy", "Ida"]
        try await editorContext.perform { (context: isolated ManagedObjectContext) throws in
            let derived = try Self.derived(context, lab)
            #expect(derived == undone)
            let gone = context.registeredObject(for: bo)?.isDeleted ?? true
            #expect(gone)
        }
        #expect(try await Self.fresh(first, lab) == undone)
        // Restart: redo Bo and the rename, undo them, each saved.
        let restarted = try openCoordinator(dir, model: model)
        let again = editor(restarted)
        try await again.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            let redoable = context.canRedo
            #expect(redoable)
            try context.redo()  // Bo back
            try context.save()
            try context.redo()  // the rename
            try context.save()
        }
        let redone = ["3", "125", "Workshop", "workshop", "Bo", "Cy", "Ida"]
        try await again.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.derived(context, lab) == redone)
        }
        #expect(try await Self.fresh(restarted, lab) == redone)
        try await again.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()  // the rename
            try context.undo()  // Bo
            try context.save()
        }
        try await again.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try Self.derived(context, lab) == undone)
        }
        #expect(try await Self.fresh(restarted, lab) == undone)
        #expect(try #require(restarted.persistentStores.first).log.verify().isClean)
    }

    @Test("an undo of a saved employee move pending in a persisted-undo context while another writer changes both departments' derived values (merged): saved, restarted, redone and undone, the values are a fresh fetch's and verify is clean")
    func derivedValuesMergedUnderPendingUndo() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.derivedAttributes
        let first = try openCoordinator(dir, model: model)
        let editorContext = editor(first)
        let ids = try await editorContext.perform { (context: isolated ManagedObjectContext) throws -> (ManagedObjectID, ManagedObjectID) in
            context.retainsRegisteredObjects = true
            var departments: [ManagedObject] = []
            for (name, people) in [("Art", [("Al", 1), ("Ann", 2)]), ("Law", [("Lu", 4)])] {
                let department = try context.insertNewObject(forEntityName: "Department")
                department.setValue(name, forKey: "name")
                for (person, salary) in people {
                    let employee = try context.insertNewObject(forEntityName: "Employee")
                    employee.setValue(person, forKey: "name")
                    employee.setValue(Decimal(salary), forKey: "salary")
                    employee.setValue(department, forKey: "department")
                }
                departments.append(department)
            }
            try context.save()
            let al = try #require(try context.fetch(FetchRequest(entityName: "Employee", format: "name == 'Al'")).first)
            al.setValue(departments[1], forKey: "department")  // Al moves to Law
            try context.save()
            try context.undo()  // back to Art, pending
            return (departments[0].objectID, departments[1].objectID)
        }
        let (art, law) = ids
        let save = try await privateContext(first).perform { (context: isolated ManagedObjectContext) throws -> ContextDidSave? in
            var seen: ContextDidSave?
            _ = context.addObserver { change in
                if case .didSave(let save) = change.notification { seen = save }
            }
            for (person, department) in [("Cy", art), ("Di", law)] {
                let employee = try context.insertNewObject(forEntityName: "Employee")
                employee.setValue(person, forKey: "name")
                employee.setValue(Decimal(8), forKey: "salary")
                employee.setValue(try context.existingObject(with: department), forKey: "department")
            }
            try context.save()
            return seen
        }
        let didSave = try #require(save)
        try await editorContext.perform { (context: isolated ManagedObjectContext) throws in
            context.mergeChanges(fromContextDidSave: didSave)
            #expect(try Self.derived(context, art) == ["2", "10", "Art", "art", "Al", "Ann", "Cy"], "Al back in Art (pending), Cy merged; count and sum the store's")
            #expect(try Self.derived(context, law) == ["3", "13", "Law", "law", "Di", "Lu"])
            try context.save()
            #expect(try Self.derived(context, art) == ["3", "11", "Art", "art", "Al", "Ann", "Cy"])
            #expect(try Self.derived(context, law) == ["2", "12", "Law", "law", "Di", "Lu"])
        }
        #expect(try await Self.fresh(first, art) == ["3", "11", "Art", "art", "Al", "Ann", "Cy"])
        #expect(try await Self.fresh(first, law) == ["2", "12", "Law", "law", "Di", "Lu"])
        let restarted = try openCoordinator(dir, model: model)
        let again = editor(restarted)
        try await again.perform { (context: isolated ManagedObjectContext) throws in
            context.retainsRegisteredObjects = true
            try context.redo()  // Al to Law again
            try context.save()
            #expect(try Self.derived(context, art) == ["2", "10", "Art", "art", "Ann", "Cy"])
            #expect(try Self.derived(context, law) == ["3", "13", "Law", "law", "Al", "Di", "Lu"])
        }
        #expect(try await Self.fresh(restarted, art) == ["2", "10", "Art", "art", "Ann", "Cy"])
        #expect(try await Self.fresh(restarted, law) == ["3", "13", "Law", "law", "Al", "Di", "Lu"])
        try await again.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()  // Al back to Art
            try context.save()
            #expect(try Self.derived(context, art) == ["3", "11", "Art", "art", "Al", "Ann", "Cy"])
            #expect(try Self.derived(context, law) == ["2", "12", "Law", "law", "Di", "Lu"])
        }
        #expect(try await Self.fresh(restarted, art) == ["3", "11", "Art", "art", "Al", "Ann", "Cy"])
        #expect(try await Self.fresh(restarted, law) == ["2", "12", "Law", "law", "Di", "Lu"])
        #expect(try #require(restarted.persistentStores.first).log.verify().isClean)
    }
}
