import Foundation
import Strata
import StrataTestSupport
import Testing

/// Review probes of model-version migration through a coordinator (spec 0004 §4.5–4.6,
/// spec 0006 §13).
@Suite("Contexts: migration review")
struct MigrationReviewContextTests {
    static func model(renamed: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            if renamed {
                Entity("Athlete") { Attribute("name", .string) }.renamed(from: "Player")
            } else {
                Entity("Player") { Attribute("name", .string) }
            }
        }
    }

    @Test("a persisted undo group saved by an earlier model on an object that moved to another key undoes that object, never the one now holding its old key")
    func undoFollowsRekeyedObject() async throws {
        let dir = try TemporaryDirectory()
        func names(_ coordinator: PersistentStoreCoordinator) async throws -> Set<String> {
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                Set(try context.fetch(FetchRequest(entityName: "Athlete")).compactMap { $0.value(forKey: "name") as? String })
            }
        }
        var coordinator = try openCoordinator(dir, model: try Self.model(renamed: false))
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Player").setValue("Ann", forKey: "name")
            try context.save()
        }
        coordinator = try openCoordinator(dir, model: try Self.model(renamed: true))
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Athlete").setValue("Ben", forKey: "name")
            try context.save()
        }
        coordinator = try openCoordinator(dir, model: try Self.model(renamed: false))
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Player").setValue("Cy", forKey: "name")
            try context.save()
        }
        coordinator = try openCoordinator(dir, model: try Self.model(renamed: true))
        #expect(try await names(coordinator) == ["Ann", "Ben", "Cy"])
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            if context.canUndo {
                try? context.undo()
                try? context.save()
            }
        }
        let left = try await names(coordinator)
        #expect(left.contains("Ben"), "Ben, who holds Cy's old key, isn't undone: \(left)")
    }
}

extension MigrationReviewContextTests {
    static func teamModel(v2: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                if v2 {
                    Relationship("roster", to: "Athlete", inverse: "club", toMany: true).renamed(from: "players")
                } else {
                    Relationship("players", to: "Player", inverse: "team", toMany: true)
                }
            }
            if v2 {
                Entity("Athlete") {
                    Attribute("name", .string)
                    Relationship("club", to: "Team", inverse: "roster").renamed(from: "team")
                }.renamed(from: "Player")
            } else {
                Entity("Player") {
                    Attribute("name", .string)
                    Attribute("scratch", .string)
                    Relationship("team", to: "Team", inverse: "players")
                }
            }
        }
    }

    @Test("history across an entity and relationship rename lists every transaction (take-outs in the old names, the put-back in the new); persisted undo of groups saved before it: a removed property's change is skipped, a renamed relationship's undone and redone")
    func historyAndUndoAcrossRenames() async throws {
        let dir = try TemporaryDirectory()
        var coordinator = try openCoordinator(dir, model: try Self.teamModel(v2: false))
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let a = try context.insertNewObject(forEntityName: "Team")
            a.setValue("A", forKey: "name")
            let b = try context.insertNewObject(forEntityName: "Team")
            b.setValue("B", forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ann", forKey: "name")
            player.setValue(a, forKey: "team")
            try context.save()
            player.setValue(b, forKey: "team")
            try context.save()
            player.setValue("s", forKey: "scratch")
            try context.save()
        }
        let before = try coordinator.history(HistoryRequest()).count
        coordinator = try openCoordinatorRemoving(dir, model: try Self.teamModel(v2: true))
        let history = try coordinator.history(HistoryRequest())
        #expect(history.count > before)
        var byEntity = HistoryRequest()
        byEntity.entityName = "Athlete"
        #expect(try coordinator.history(byEntity).isEmpty == false)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let athletes = try context.fetch(FetchRequest(entityName: "Athlete"))
            let athlete = try #require(athletes.first)
            #expect((athlete.value(forKey: "club") as? ManagedObject)?.value(forKey: "name") as? String == "B")
            // The scratch group: its only property is gone, nothing to undo in it.
            try context.undo()
            try context.save()
            #expect((athlete.value(forKey: "club") as? ManagedObject)?.value(forKey: "name") as? String == "B")
            try context.undo()
            try context.save()
            #expect((athlete.value(forKey: "club") as? ManagedObject)?.value(forKey: "name") as? String == "A", "the club move undone under the new name")
            try context.redo()
            try context.save()
            #expect((athlete.value(forKey: "club") as? ManagedObject)?.value(forKey: "name") as? String == "B")
        }
        #expect(try coordinator.history(HistoryRequest()).count > history.count)
    }
}

extension MigrationReviewContextTests {
    @Test("persisted undo after a refused model version: a group saved before it undoes under the names the store kept")
    func undoAfterRefusedVersion() async throws {
        let dir = try TemporaryDirectory()
        let v1 = try ManagedObjectModel { Entity("Task") { Attribute("title", .string); Attribute("count", .int64) } }
        var coordinator = try openCoordinator(dir, model: v1)
        let id = try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let task = try context.insertNewObject(forEntityName: "Task")
            task.setValue("A", forKey: "title")
            task.setValue(Int64(70_000), forKey: "count")
            try context.save()
            task.setValue("B", forKey: "title")
            try context.save()
            return task.objectID
        }
        // A version the store refuses (a lossy conversion): nothing migrated.
        let refused = try ManagedObjectModel {
            Entity("Task") { Attribute("heading", .string).renamed(from: "title"); Attribute("count", .int16) }
        }
        #expect(throws: (any Error).self) { _ = try openCoordinator(dir, model: refused) }
        // The next version keeps the name and adds an attribute with a default.
        let v3 = try ManagedObjectModel {
            Entity("Task") { Attribute("title", .string); Attribute("count", .int64); Attribute("rank", .int32, default: 1).required() }
        }
        coordinator = try openCoordinator(dir, model: v3)
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let task = try context.existingObject(with: id)
            #expect(task.value(forKey: "title") as? String == "B")
            try context.undo()
            #expect(task.value(forKey: "title") as? String == "A", "the title change is undone")
        }
    }
}

extension MigrationReviewContextTests {
    static func lineupModel(ordered: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("lineup", to: "Player", inverse: "lineupTeam", toMany: true, ordered: ordered)
            }
            Entity("Player") {
                Attribute("name", .string)
                Relationship("lineupTeam", to: "Team", inverse: "lineup")
            }
        }
    }

    @Test("persisted undo of a group that set an ordered to-many, after a version makes it unordered (recorded on the inverse now): undo and redo")
    func undoAcrossResidedRelationship() async throws {
        let dir = try TemporaryDirectory()
        var coordinator = try openCoordinator(dir, model: try Self.lineupModel(ordered: true))
        let teamID = try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            let a = try context.insertNewObject(forEntityName: "Player")
            a.setValue("a", forKey: "name")
            let b = try context.insertNewObject(forEntityName: "Player")
            b.setValue("b", forKey: "name")
            try context.save()
            team.setValue([b, a], forKey: "lineup")
            try context.save()
            return team.objectID
        }
        coordinator = try openCoordinator(dir, model: try Self.lineupModel(ordered: false))
        try await editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            func names() -> Set<String> {
                Set(((team.value(forKey: "lineup") as? Set<ManagedObject>) ?? []).compactMap { $0.value(forKey: "name") as? String })
            }
            #expect(names() == ["a", "b"])
            try context.undo()
            #expect(names().isEmpty, "the lineup set undone")
            try context.save()
            try context.redo()
            #expect(names() == ["a", "b"])
            try context.save()
        }
        coordinator = try openCoordinator(dir, model: try Self.lineupModel(ordered: false))
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(((team.value(forKey: "lineup") as? Set<ManagedObject>) ?? []).count == 2)
        }
    }
}

@Suite("Contexts: migration failures' errors (spec 0006 §19.1)")
struct MigrationFailureErrorTests {
    @Test("a migration whose objects break a uniqueness constraint fails the add with migrationConstraintViolation (134111, NSMigrationConstraintViolationError), not the log's error; a derived value that doesn't fit fails it with migrationFailed (134110); nothing written either way")
    func constraintBrokenByMigration() async throws {
        let dir = try TemporaryDirectory()
        let plain = try ManagedObjectModel {
            Entity("Player") {
                Attribute("email", .string)
                Attribute("points", .int16)
            }
        }
        var coordinator = try openCoordinator(dir, model: plain)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for points in [Int16(30_000), 30_000] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue("same@example.com", forKey: "email")
                player.setValue(points, forKey: "points")
            }
            try context.save()
        }
        let constrained = try ManagedObjectModel {
            Entity("Player") {
                Attribute("email", .string)
                Attribute("points", .int16)
                Unique("email")
            }
        }
        do {
            _ = try openCoordinator(dir, model: constrained)
            Issue.record("the migration was accepted")
        } catch let error as PersistentStoreError {
            guard case .migrationConstraintViolation(_, let reason) = error else {
                Issue.record("expected migrationConstraintViolation, got \(error)")
                return
            }
            #expect(reason.contains("email") && reason.contains("same@example.com") && reason.contains("Player/p1"))
            #expect((error as NSError).code == 134111 && (error as NSError).domain == NSCocoaErrorDomain)
        }
        // A team's derived total of its players' int16 points: 60,000 doesn't fit an int16.
        let teams = { (derived: Bool) in
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    if derived { Attribute("total", .int16).derived(from: "players.@sum.points") }
                    Relationship("players", to: "Player", inverse: "team", toMany: true)
                }
                Entity("Player") {
                    Attribute("email", .string)
                    Attribute("points", .int16)
                    Relationship("team", to: "Team", inverse: "players")
                }
            }
        }
        coordinator = try openCoordinator(dir, model: try teams(false))
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            for player in try context.fetch(FetchRequest(entityName: "Player")) { player.setValue(team, forKey: "team") }
            try context.save()
        }
        do {
            _ = try openCoordinator(dir, model: try teams(true))
            Issue.record("the migration was accepted")
        } catch let error as PersistentStoreError {
            guard case .migrationFailed(_, let reason) = error else {
                Issue.record("expected migrationFailed, got \(error)")
                return
            }
            #expect(reason.contains("total"), "\(reason)")
            #expect((error as NSError).code == 134110)
        }
        // Nothing was written: the store opens with its model, both players on the team.
        coordinator = try openCoordinator(dir, model: try teams(false))
        let members = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Team")).first.flatMap { ($0.value(forKey: "players") as? Set<ManagedObject>)?.count }
        }
        #expect(members == 2)
    }
}
