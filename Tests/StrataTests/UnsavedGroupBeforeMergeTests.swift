import Foundation
import Strata
import StrataTestSupport
import Testing

/// An unsaved undo group from before a merge, which doesn't know a member the merge brought
/// (spec 0006 §9, §16.1): Alice's first group changes her saved team (unsaved); Bob saves a
/// player on the team; Alice merges, her second group deletes Bob's player; she undoes both
/// (and, `redoing`, redoes both) and saves. Both sides of every link agree after each step,
/// and Bob's player stays on the team unless Alice's own redone delete takes it away.
@Suite("An unsaved undo group from before a merge, and a merged member a later group deletes")
struct UnsavedGroupBeforeMergeTests {
    /// What Alice's first group does to the team.
    enum TeamEdit: String, CaseIterable, Sendable {
        case rename, moveOwnPlayerOn, insertPlayerOn, moveOwnPlayerOff, deleteTeam
    }

    @Test("undoing a later group's delete of a merged member, then an earlier unsaved group: sides agree, the other writer's player stays (redo: goes by the context's own delete)", arguments: TeamEdit.allCases, [false, true])
    func undoBothThenSave(edit: TeamEdit, redoing: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoInsertLinkFixTests.probeModel)
        let alice = editor(coordinator), bob = privateContext(coordinator, name: "sync", author: "bob")
        let (teamID, ownID) = try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Tigers", forKey: "name")
            let own = try context.insertNewObject(forEntityName: "Player")
            own.setValue("Kim", forKey: "name")
            if edit == .moveOwnPlayerOff { own.setValue(team, forKey: "team") }
            try context.save()
            context.removeAllUndoActions()
            return (team.objectID, own.objectID)
        }
        // g1, unsaved.
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            _ = team.value(forKey: "players")
            switch edit {
            case .rename: team.setValue("Lions", forKey: "name")
            case .moveOwnPlayerOn: try context.existingObject(with: ownID).setValue(team, forKey: "team")
            case .insertPlayerOn: try context.insertNewObject(forEntityName: "Player").setValue(team, forKey: "team")
            case .moveOwnPlayerOff: try context.existingObject(with: ownID).setValue(nil, forKey: "team")
            case .deleteTeam: context.delete(team)
            }
            context.setActionName("g1")
            context.processPendingChanges()
        }
        let bobsID = try await bob.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Pat", forKey: "name")
            player.setValue(try context.existingObject(with: teamID), forKey: "team")
            try context.save()
            return player.objectID
        }
        try await alice.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            Self.check(context, "\(edit) after the merge")
            // g2: deletes Bob's player, unsaved.
            let bobs = try context.existingObject(with: bobsID)
            context.delete(bobs)
            context.setActionName("g2")
            context.processPendingChanges()
            Self.check(context, "\(edit) after g2")
            try context.undo()
            Self.check(context, "\(edit) after undoing g2")
            #expect(bobs.isDeleted == false)
            try context.undo()
            Self.check(context, "\(edit) after undoing g1")
            #expect((bobs.value(forKey: "team") as? ManagedObject)?.objectID == teamID, "\(edit): Bob's player on its team")
            if redoing {
                try context.redo()
                Self.check(context, "\(edit) after redoing g1")
                try context.redo()
                Self.check(context, "\(edit) after redoing g2")
            }
            try context.save()
            Self.check(context, "\(edit) after the save")
        }
        // The store, read fresh: Bob's player as Alice's work leaves it, both sides agreeing.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let problems = Self.disagreements(context)
            #expect(problems.isEmpty, "\(edit) in the store: \(problems)")
            let bobs = try? context.existingObject(with: bobsID)
            if redoing {
                #expect(bobs == nil, "\(edit): Alice's redone delete of Bob's player is saved")
                #expect(try context.count(for: FetchRequest(entityName: "Team")) == (edit == .deleteTeam ? 0 : 1))
            } else {
                #expect((bobs?.value(forKey: "team") as? ManagedObject)?.objectID == teamID, "\(edit): Bob's player still on the team")
                let team = try context.existingObject(with: teamID)
                #expect(team.value(forKey: "name") as? String == "Tigers")
                let own = try context.existingObject(with: ownID)
                #expect((own.value(forKey: "team") as? ManagedObject)?.objectID == (edit == .moveOwnPlayerOff ? teamID : nil))
                #expect(try context.count(for: FetchRequest(entityName: "Player")) == 2)
            }
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    static func check(_ context: isolated ManagedObjectContext, _ when: String) {
        let problems = disagreements(context)
        #expect(problems.isEmpty, "\(when): \(problems)")
    }

    /// Links whose two sides disagree in `context`.
    static func disagreements(_ context: isolated ManagedObjectContext) -> [String] {
        var problems: [String] = []
        for player in (try? context.fetch(FetchRequest(entityName: "Player"))) ?? [] {
            guard let team = player.value(forKey: "team") as? ManagedObject else { continue }
            // A link the store holds (the other writer's) to a team this context deletes is no
            // disagreement: a save would be refused (spec 0006 §16.1 step 4). Its own is.
            if team.isDeleted {
                if player.isInserted || player.changedValues()["team"] != nil { problems.append("\(player.objectID) on deleted \(team.objectID)") }
                continue
            }
            let members = (team.value(forKey: "players") as? Set<ManagedObject>) ?? []
            if !members.contains(player) { problems.append("\(team.objectID) doesn't list \(player.objectID)") }
        }
        for team in (try? context.fetch(FetchRequest(entityName: "Team"))) ?? [] {
            for member in (team.value(forKey: "players") as? Set<ManagedObject>) ?? [] where (member.value(forKey: "team") as? ManagedObject) !== team {
                problems.append("\(team.objectID) lists \(member.objectID), on \(String(describing: (member.value(forKey: "team") as? ManagedObject)?.objectID))")
            }
        }
        return problems
    }
}
