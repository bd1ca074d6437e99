import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// Reverting several saved transactions as one (`revertTransactions(at:)`, spec 0006 §25.6).
@Suite("Contexts: reverting several saved transactions as one")
struct RevertSeveralTransactionsTests {
    /// Transaction 1 ("setup"): team Otters (orange) with players Ada and Bob. Then, by
    /// "client": 2 renames the team "Herons"; 3 renames it "Kites" and sets Bob's email;
    /// 4 adds player Cy to the team. Returns the coordinator and the objects' IDs.
    private func clientStore(_ dir: TemporaryDirectory) async throws
        -> (PersistentStoreCoordinator, team: ManagedObjectID, bob: ManagedObjectID, cy: ManagedObjectID)
    {
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let (team, bob) = try await saveOtters(coordinator, color: "orange")
        let cy = try await privateContext(coordinator, name: "client", author: "client").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: team)
            team.setValue("Herons", forKey: "name")
            try context.save()
            team.setValue("Kites", forKey: "name")
            try context.existingObject(with: bob).setValue("bob@example.com", forKey: "email")
            try context.save()
            let cy = try context.insertNewObject(forEntityName: "Player")
            cy.setValue("Cy", forKey: "firstName")
            cy.setValue(team, forKey: "team")
            try context.save()
            return cy.objectID
        }
        return (coordinator, team, bob, cy)
    }

    private func tokens(_ coordinator: PersistentStoreCoordinator, _ sequences: [UInt64]) throws -> [HistoryToken] {
        let store = try #require(coordinator.persistentStores.first)
        return sequences.map { HistoryToken(storeIdentifier: store.identifier, sequence: $0) }
    }

    /// Expects reverting `tokens` to be refused with an undo conflict on `object`.`property`
    /// whose expected and found texts hold every one of `expected` and `found`, and the
    /// context to be left unchanged (no change, nothing to redo).
    private func expectRefused(
        _ context: isolated ManagedObjectContext, _ tokens: [HistoryToken], object: ManagedObjectID, property: String, expected: [String],
        found: [String], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(sourceLocation: sourceLocation) {
            try context.revertTransactions(at: tokens)
        } throws: { error in
            guard case .undoConflict(let conflicted, let key, let wanted, let held) = error as? ContextError else { return false }
            return conflicted == object.description && key == property && expected.allSatisfy(wanted.contains) && found.allSatisfy(held.contains)
        }
        let (changed, redoable) = (context.hasChanges, context.canRedo)
        #expect(!changed && !redoable, "nothing was changed", sourceLocation: sourceLocation)
    }

    private func log(_ coordinator: PersistentStoreCoordinator) throws -> EventLog {
        try #require(coordinator.persistentStores.first).log
    }

    @Test("three transactions of a client reverted in one save, in any order given: a value two of them changed goes back to before the first, the insert is deleted; one transaction holds the undo of each group, last first")
    func threeTransactionsInOneSave() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, bobID, cyID) = try await clientStore(dir)
        try await privateContext(coordinator, name: "ops", author: "alice").perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransactions(at: try tokens(coordinator, [4, 2, 3]))
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
            #expect(try context.existingObject(with: bobID).value(forKey: "email") == nil)
            #expect(context.deletedObjects.map(\.objectID) == [cyID])
            try context.save()
        }
        let saved = try log(coordinator).read { try $0.event(try $0.head) }
        #expect(saved.sequence == 5)
        #expect(saved.author == "alice")
        #expect(saved.kind == .undo(of: 4, group: 0))
        #expect(saved.groups.map(\.origin) == [.undo(of: 4, group: 0), .undo(of: 3, group: 0), .undo(of: 2, group: 0)])
        let reopened = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Otters")
            #expect(team.value(forKey: "uniformColor") as? String == "orange")
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == 2)
            #expect(throws: ContextError.self) { try context.existingObject(with: cyID) }
        }
        #expect(try log(reopened).verify().isClean)
    }

    @Test("one at a time, the first of two chained renames can't be reverted (the second changed its value); together they can")
    func chainedChangesRevertTogether() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await clientStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(throws: ContextError.self) { try context.revertTransaction(at: try tokens(coordinator, [2])[0]) }
            let changed = context.hasChanges
            #expect(!changed)
            try context.revertTransactions(at: try tokens(coordinator, [2, 3]))
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
            // Cy (transaction 4, not reverted) is still on the team.
            #expect((try context.existingObject(with: teamID).value(forKey: "players") as? Set<ManagedObject>)?.count == 3)
            // Reverted again: refused, saying by which transaction.
            #expect(throws: ContextError.invalidArgument("transaction 2 was reverted already, by transaction 5, and not redone since; nothing was changed")) {
                try context.revertTransactions(at: try tokens(coordinator, [2, 3]))
            }
        }
    }

    @Test("a transaction between two reverted ones that changed the same value, not reverted with them: undoConflict naming it; nothing changed in the context or the store")
    func transactionBetweenThemRefuses() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await clientStore(dir)
        // 5 (another author) renames the team "Swans"; 6 (the client) renames it "Rooks".
        try await privateContext(coordinator, author: "coach").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Swans", forKey: "name")
            try context.save()
        }
        try await privateContext(coordinator, author: "client").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Rooks", forKey: "name")
            try context.save()
        }
        let head = try log(coordinator).head
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try expectRefused(
                context, try tokens(coordinator, [2, 3, 6]), object: teamID, property: "name",
                expected: ["Kites", "transaction 3"], found: ["Swans", "from transaction 5, between them"])
            // With 5 among them, they revert: the name goes back to before 2.
            try context.revertTransactions(at: try tokens(coordinator, [2, 3, 5, 6]))
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
            context.rollback()
        }
        #expect(try log(coordinator).head == head, "nothing was written")
    }

    @Test("an object one inserted and a later one changed is deleted by reverting both; reverting the insert alone is refused")
    func insertChangedByALaterRevertedTransaction() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, _, cyID) = try await clientStore(dir)
        // 5 (the client) sets Cy's email.
        try await privateContext(coordinator, author: "client").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: cyID).setValue("cy@example.com", forKey: "email")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect {
                try context.revertTransaction(at: try tokens(coordinator, [4])[0])
            } throws: { error in
                guard case .undoConflict(_, _, _, let found) = error as? ContextError else { return false }
                return found.contains("transaction 5")
            }
            try context.revertTransactions(at: try tokens(coordinator, [4, 5]))
            #expect(context.deletedObjects.map(\.objectID) == [cyID])
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(throws: ContextError.self) { try context.existingObject(with: cyID) }
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 2)
        }
        #expect(try log(coordinator).verify().isClean)
    }

    @Test("redo of the revert applies them all again (saved as their redo, first first); rollback before a save discards the revert")
    func redoUndoAndRollback() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, bobID, _) = try await clientStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransactions(at: try tokens(coordinator, [2, 3]))
            context.rollback()
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Kites")
            let (changed, redoable) = (context.hasChanges, context.canRedo)
            #expect(!changed && !redoable)
            try context.revertTransactions(at: try tokens(coordinator, [2, 3]))
            try context.save()
            let canRedo = context.canRedo
            #expect(canRedo)
            try context.redo()
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Kites")
            #expect(try context.existingObject(with: bobID).value(forKey: "email") as? String == "bob@example.com")
            try context.save()
        }
        let redone = try log(coordinator).read { try $0.event(try $0.head) }
        #expect(redone.kind == .redo(of: 2, group: 0))
        #expect(redone.groups.map(\.origin) == [.redo(of: 2, group: 0), .redo(of: 3, group: 0)])
        #expect(try log(coordinator).verify().isClean)
    }

    @Test("a bad list: empty, a token past the head, a migration among them; the error names the transaction, and nothing is changed")
    func refusals() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, _, _) = try await clientStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(throws: ContextError.invalidArgument("no transaction to revert was given; nothing was changed")) {
                try context.revertTransactions(at: [])
            }
            #expect(throws: HistoryError.self) { try context.revertTransactions(at: try tokens(coordinator, [2, 99])) }
            #expect {
                try context.revertTransactions(at: try tokens(coordinator, [2, 0]))
            } throws: { error in
                guard case .invalidArgument(let text) = error as? ContextError else { return false }
                return text.contains("sequence 0")
            }
            let (changed, redoable) = (context.hasChanges, context.canRedo)
            #expect(!changed && !redoable)
            // The same transaction twice is one.
            try context.revertTransactions(at: try tokens(coordinator, [4, 4]))
            #expect(context.deletedObjects.count == 1)
        }
    }

    @Test("the client reverting its own three transactions together: after a restart its persisted undo has none of their groups left to undo, and redo brings each back (each group saved as the undo of its own)")
    func persistedUndoOfTheClient() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, bobID, cyID) = try await clientStore(dir)
        try await privateContext(coordinator, name: "client", author: "client").perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransactions(at: try tokens(coordinator, [2, 3, 4]))
            try context.save()
        }
        let restarted = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(restarted, name: "client", author: "client", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            let undoable = context.canUndo
            #expect(!undoable, "every group of the client's transactions was undone by the revert")
            for _ in 0..<3 { try context.redo() }
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Kites")
            #expect(try context.existingObject(with: bobID).value(forKey: "email") as? String == "bob@example.com")
            #expect(try context.existingObject(with: cyID).value(forKey: "firstName") as? String == "Cy")
            try context.save()
        }
        #expect(try log(restarted).verify().isClean)
    }

    /// Owners with a many-to-many `tags` and a one-way `fav` tag.
    private static func tagModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Owner") {
                Attribute("name", .string)
                Relationship("tags", to: "Tag", inverse: "owners", toMany: true)
                Relationship("fav", to: "Tag")
            }
            Entity("Tag") {
                Attribute("name", .string)
                Relationship("owners", to: "Owner", inverse: "tags", toMany: true)
            }
        }
    }

    /// Expects the revert of `sequences` refused as an undoConflict on `object`.`property`
    /// naming the link a transaction between them made, with nothing changed.
    private func expectLinkBetweenRefuses(
        _ coordinator: PersistentStoreCoordinator, _ sequences: [UInt64], object: ManagedObjectID, property: String, between: UInt64
    ) async throws {
        let head = try log(coordinator).head
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect {
                try context.revertTransactions(at: try tokens(coordinator, sequences))
            } throws: { error in
                guard case .undoConflict(let owner, let key, let expected, let found) = error as? ContextError else { return false }
                return owner == object.description && key == property && expected.contains("which the revert deletes")
                    && found.contains("transaction \(between) not reverted with them")
            }
            let (changed, redoable) = (context.hasChanges, context.canRedo)
            #expect(!changed && !redoable, "nothing was changed")
        }
        #expect(try log(coordinator).head == head, "nothing was written")
        #expect(try log(coordinator).verify().isClean)
    }

    @Test("a link a transaction between them made to an object one of them inserted, which a later one of them took back, refuses the revert (undoConflict naming it), nothing changed — a to-one with an inverse, a deleted object's, a many-to-many member's, a one-way to-one's (before, the revert deleted the object and put the link back, and the store refused the save)")
    func linkBetweenToAnInsertedObject() async throws {
        // To-one with an inverse: 2 (client) inserts X; 3 (coach) moves Bob to X; 4 (client) moves him on.
        do {
            let dir = try TemporaryDirectory()
            let (coordinator, _, bobID, _) = try await clientStore(dir)  // 1–4
            let x = try await privateContext(coordinator, author: "client").perform { (context: isolated ManagedObjectContext) throws in
                let x = try context.insertNewObject(forEntityName: "Team")
                x.setValue("X", forKey: "name")
                try context.save()  // 5
                return x.objectID
            }
            try await privateContext(coordinator, author: "coach").perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: bobID).setValue(try context.existingObject(with: x), forKey: "team")
                try context.save()  // 6
            }
            try await privateContext(coordinator, author: "client").perform { (context: isolated ManagedObjectContext) throws in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Y", forKey: "name")
                try context.existingObject(with: bobID).setValue(team, forKey: "team")
                try context.save()  // 7
            }
            try await expectLinkBetweenRefuses(coordinator, [5, 7], object: bobID, property: "team", between: 6)
        }
        // A deleted object's: 1 (client) inserts X; 2 (coach) inserts Zed on X; 3 (client) deletes Zed.
        do {
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
            let x = try await privateContext(coordinator, author: "client").perform { (context: isolated ManagedObjectContext) throws in
                let x = try context.insertNewObject(forEntityName: "Team")
                x.setValue("X", forKey: "name")
                try context.save()
                return x.objectID
            }
            let zed = try await privateContext(coordinator, author: "coach").perform { (context: isolated ManagedObjectContext) throws in
                let zed = try context.insertNewObject(forEntityName: "Player")
                zed.setValue("Zed", forKey: "firstName")
                zed.setValue(try context.existingObject(with: x), forKey: "team")
                try context.save()
                return zed.objectID
            }
            try await privateContext(coordinator, author: "client").perform { (context: isolated ManagedObjectContext) throws in
                context.delete(try context.existingObject(with: zed))
                try context.save()
            }
            try await expectLinkBetweenRefuses(coordinator, [1, 3], object: zed, property: "team", between: 2)
        }
        // A many-to-many member's and a one-way to-one's: 2 (client) inserts tag X; 3 (coach)
        // tags O with it (or makes it O's fav); 4 (client) takes it off.
        for oneWay in [false, true] {
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: try Self.tagModel())
            let owner = try await privateContext(coordinator, author: "setup").perform { (context: isolated ManagedObjectContext) throws in
                let owner = try context.insertNewObject(forEntityName: "Owner")
                owner.setValue("O", forKey: "name")
                try context.save()
                return owner.objectID
            }
            let x = try await privateContext(coordinator, author: "client").perform { (context: isolated ManagedObjectContext) throws in
                let x = try context.insertNewObject(forEntityName: "Tag")
                x.setValue("X", forKey: "name")
                try context.save()
                return x.objectID
            }
            for (author, link) in [("coach", true), ("client", false)] {
                try await privateContext(coordinator, author: author).perform { (context: isolated ManagedObjectContext) throws in
                    let (o, tag) = (try context.existingObject(with: owner), try context.existingObject(with: x))
                    if oneWay {
                        o.setValue(link ? tag : nil, forKey: "fav")
                    } else if link {
                        o.mutableSetValue(forKey: "tags").add(tag)
                    } else {
                        o.mutableSetValue(forKey: "tags").remove(tag)
                    }
                    try context.save()
                }
            }
            try await expectLinkBetweenRefuses(coordinator, [2, 4], object: owner, property: oneWay ? "fav" : "tags", between: 3)
        }
    }

    @Test("an object one of them inserted and a later one deleted, changed between them by a transaction not among them (a relationship the insert left empty: a one-way to-one, a many-to-many), refuses the revert naming that transaction; nothing changed (before, the revert went ahead and that work was silently left gone)")
    func insertedAndDeletedObjectChangedBetween() async throws {
        for oneWay in [false, true] {
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: try Self.tagModel())
            let (owner, tag) = try await privateContext(coordinator, author: "setup").perform { (context: isolated ManagedObjectContext) throws in
                let owner = try context.insertNewObject(forEntityName: "Owner")
                owner.setValue("O", forKey: "name")
                let tag = try context.insertNewObject(forEntityName: "Tag")
                tag.setValue("t", forKey: "name")
                try context.save()  // 1
                return (owner.objectID, tag.objectID)
            }
            let q = try await privateContext(coordinator, author: "client").perform { (context: isolated ManagedObjectContext) throws in
                let q = try context.insertNewObject(forEntityName: "Owner")
                q.setValue("Q", forKey: "name")
                try context.save()  // 2
                return q.objectID
            }
            try await privateContext(coordinator, author: "coach").perform { (context: isolated ManagedObjectContext) throws in
                let (object, tagObject) = (try context.existingObject(with: q), try context.existingObject(with: tag))
                if oneWay { object.setValue(tagObject, forKey: "fav") } else { object.mutableSetValue(forKey: "tags").add(tagObject) }
                try context.save()  // 3
            }
            try await privateContext(coordinator, author: "client").perform { (context: isolated ManagedObjectContext) throws in
                context.delete(try context.existingObject(with: q))
                try context.existingObject(with: owner).setValue("O2", forKey: "name")
                try context.save()  // 4
            }
            let head = try log(coordinator).head
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                try expectRefused(
                    context, try tokens(coordinator, [2, 4]), object: q, property: "(object)",
                    expected: ["transaction 2 inserted it"], found: ["transaction 3 changed it, between them"])
                // With 3 among them, they revert.
                try context.revertTransactions(at: try tokens(coordinator, [2, 3, 4]))
                #expect(try context.existingObject(with: owner).value(forKey: "name") as? String == "O")
                context.rollback()
            }
            #expect(try log(coordinator).head == head, "nothing was written")
        }
    }

    @Test("a value one of them set that transactions between them changed and set back before a later one of them changed it refuses the revert, naming the first of those; nothing changed (before, the equal values hid them, and the revert set back the earlier value over their work)")
    func valueChangedAndSetBackBetweenThem() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await clientStore(dir)  // 2: "Herons", 3: "Kites"
        // 5 (coach) renames it "Swans", 6 (coach) "Kites" again, 7 (client) "Rooks".
        for (author, name) in [("coach", "Swans"), ("coach", "Kites"), ("client", "Rooks")] {
            try await privateContext(coordinator, author: author).perform { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: teamID).setValue(name, forKey: "name")
                try context.save()
            }
        }
        let head = try log(coordinator).head
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try expectRefused(
                context, try tokens(coordinator, [2, 3, 7]), object: teamID, property: "name",
                expected: ["as transaction 3 left it"], found: ["after transaction 5 changed it, between them"])
            // With 5 and 6 among them they revert (4, between them too, changed no name: it added Cy).
            try context.revertTransactions(at: try tokens(coordinator, [2, 3, 5, 6, 7]))
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Otters")
            context.rollback()
        }
        #expect(try log(coordinator).head == head, "nothing was written")
    }

    @Test("a save and its undo reverted together with a later save whose value another transaction changed since: the conflict names that change, not the undo among them as a revert of the save")
    func undoAmongThemIsNoEarlierRevert() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await clientStore(dir)
        try await privateContext(coordinator, name: "client", author: "client").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Swans", forKey: "name")
            try context.save()  // 5
            try context.undo()
            try context.save()  // 6: undo of 5
            try context.existingObject(with: teamID).setValue("blue", forKey: "uniformColor")
            try context.save()  // 7
        }
        try await privateContext(coordinator, author: "coach").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("green", forKey: "uniformColor")
            try context.save()  // 8
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> Void in
            #expect {
                try context.revertTransactions(at: try tokens(coordinator, [5, 6, 7]))
            } throws: { error in
                guard case .undoConflict(let object, let property, _, let found) = error as? ContextError else { return false }
                return object == teamID.description && property == "uniformColor" && found.contains("green")
            }
        }
    }

    @Test("a save and its undo reverted together change nothing: refused saying their changes cancel out (not \"only derived ones\"), nothing changed")
    func saveAndItsUndoCancelOut() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, _, _) = try await clientStore(dir)
        try await privateContext(coordinator, name: "client", author: "client").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Swans", forKey: "name")
            try context.save()  // 5
            try context.undo()
            try context.save()  // 6: undo of 5
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(
                throws: ContextError.invalidArgument(
                    "transactions 5, 6 change no stored value this context keeps, taken together (what one of them changed another set back, or only derived values); nothing to revert")
            ) {
                try context.revertTransactions(at: try tokens(coordinator, [6, 5]))
            }
            let (changed, redoable) = (context.hasChanges, context.canRedo)
            #expect(!changed && !redoable)
        }
    }

    private static func isTagged(_ context: isolated ManagedObjectContext, _ owner: ManagedObjectID) throws -> Bool {
        !((try context.existingObject(with: owner).value(forKey: "tags") as? Set<ManagedObject>)?.isEmpty ?? true)
    }

    @Test("a to-many member one of them took out and a later one put back, moved in and out again between them by transactions not among them, refuses the revert naming the first (before, the two cancelled out and the member stayed in, over their removal); moved once between them, the revert keeps that move")
    func membershipMovedAndMovedBackBetweenThem() async throws {
        /// 1: O tagged t. Then each (author, tagged) tags or untags O with t; the first also renames O.
        // Each store in a directory that lives as long as the test (a directory deleted while
        // the store is open takes no more writes).
        let directories = (try TemporaryDirectory(), try TemporaryDirectory())
        defer { withExtendedLifetime(directories) {} }
        func store(_ directory: TemporaryDirectory, _ moves: [(String, Bool)]) async throws -> (PersistentStoreCoordinator, owner: ManagedObjectID, tag: ManagedObjectID) {
            let coordinator = try openCoordinator(directory, model: try Self.tagModel())
            let (owner, tag) = try await privateContext(coordinator, author: "setup").perform { (context: isolated ManagedObjectContext) throws in
                let owner = try context.insertNewObject(forEntityName: "Owner")
                owner.setValue("O", forKey: "name")
                let tag = try context.insertNewObject(forEntityName: "Tag")
                tag.setValue("t", forKey: "name")
                owner.mutableSetValue(forKey: "tags").add(tag)
                try context.save()
                return (owner.objectID, tag.objectID)
            }
            for (index, (author, tagged)) in moves.enumerated() {
                try await privateContext(coordinator, author: author).perform { (context: isolated ManagedObjectContext) throws in
                    let (o, t) = (try context.existingObject(with: owner), try context.existingObject(with: tag))
                    if tagged { o.mutableSetValue(forKey: "tags").add(t) } else { o.mutableSetValue(forKey: "tags").remove(t) }
                    if index == 0 { o.setValue("O2", forKey: "name") }
                    try context.save()
                }
            }
            return (coordinator, owner, tag)
        }
        // 2 (client) untags, 3 and 4 (coach) tag and untag, 5 (client) tags: without 2 and 5, O is untagged (4).
        let (coordinator, owner, tag) = try await store(directories.0, [("client", false), ("coach", true), ("coach", false), ("client", true)])
        let head = try log(coordinator).head
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try expectRefused(
                context, try tokens(coordinator, [2, 5]), object: owner, property: "tags",
                expected: ["\(tag.description) not in it, as transaction 2 left it"], found: ["after transaction 3 moved it, between them"])
            try context.revertTransactions(at: try tokens(coordinator, [2, 3, 4, 5]))
            #expect(try Self.isTagged(context, owner))
            context.rollback()
        }
        #expect(try log(coordinator).head == head, "nothing was written")
        // 2 (client) untags, 3 (coach) tags, 4 (client) untags: without 2 and 4, O is tagged (3).
        let (once, onceOwner, _) = try await store(directories.1, [("client", false), ("coach", true), ("client", false)])
        try await privateContext(once).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransactions(at: try tokens(once, [2, 4]))
            #expect(try Self.isTagged(context, onceOwner))
            try context.save()
        }
        #expect(try log(once).verify().isClean)
    }

    @Test("a model-version migration converting stored values (int16 to int64) is no one's work: two transactions around it that changed a value it converted revert together, and an object inserted before it is deleted by reverting its insert (before, the migration counted as a change between them, or to the object, and refused both)")
    func migrationConvertingValuesIsNoWork() async throws {
        let dir = try TemporaryDirectory()
        func model(_ version: Int) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                Entity("Player") {
                    Attribute("firstName", .string)
                    Attribute("score", version == 1 ? .int16 : .int64)
                }
            }
        }
        let first = try openCoordinator(dir, model: try model(1))
        let (bob, dee) = try await privateContext(first, author: "client").perform { (context: isolated ManagedObjectContext) throws in
            let bob = try context.insertNewObject(forEntityName: "Player")
            bob.setValue("Bob", forKey: "firstName")
            bob.setValue(Int16(5), forKey: "score")
            try context.save()  // 1
            bob.setValue(Int16(7), forKey: "score")
            try context.save()  // 2
            let dee = try context.insertNewObject(forEntityName: "Player")
            dee.setValue("Dee", forKey: "firstName")
            dee.setValue(Int16(3), forKey: "score")
            try context.save()  // 3
            return (bob.objectID, dee.objectID)
        }
        try first.remove(try #require(first.persistentStores.first))
        let coordinator = try openCoordinator(dir, model: try model(2))  // 4: the migration converts every score
        try await privateContext(coordinator, author: "client").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: bob).setValue(Int64(9), forKey: "score")
            try context.save()  // 5
        }
        #expect(try log(coordinator).read { try $0.event(4) }.kind == .migration)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransactions(at: try tokens(coordinator, [2, 5]))
            #expect(try context.existingObject(with: bob).value(forKey: "score") as? Int64 == 5)
            context.rollback()
            try context.revertTransaction(at: try tokens(coordinator, [3])[0])
            #expect(context.deletedObjects.map(\.objectID) == [dee])
            try context.save()
        }
        #expect(try log(coordinator).verify().isClean)
    }

    @Test("a delete and its undo among them are net no change of the object: with a later save, they revert (before, the delete stood, net, and the revert was refused: the object exists); the store holds the state before them, verify clean")
    func deleteAndItsUndoAmongThem() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID, bobID, _) = try await clientStore(dir)
        try await privateContext(coordinator, name: "client", author: "client").perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: bobID))
            try context.save()  // 5
            try context.undo()
            try context.save()  // 6: undo of 5, Bob back
            try context.existingObject(with: teamID).setValue("Swans", forKey: "name")
            try context.save()  // 7
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransactions(at: try tokens(coordinator, [5, 6, 7]))
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Kites")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: bobID).value(forKey: "email") as? String == "bob@example.com")
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Kites")
        }
        #expect(try log(coordinator).verify().isClean)
    }

    @Test("an object one of them deleted, brought back between them by a transaction not among them (a revert of that delete) and deleted again by a later one, refuses the revert naming the transaction that brought it back; nothing changed (before, the revert was accepted and the store refused the save: two inserts of the object)")
    func deletedObjectBroughtBackBetweenThem() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, bobID, _) = try await clientStore(dir)
        try await privateContext(coordinator, author: "client").perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: bobID))
            try context.save()  // 5
        }
        try await privateContext(coordinator, author: "ops").perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransaction(at: try tokens(coordinator, [5])[0])
            try context.save()  // 6: Bob back
        }
        try await privateContext(coordinator, author: "coach").perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: bobID).setValue("coach@example.com", forKey: "email")
            try context.save()  // 7
        }
        try await privateContext(coordinator, author: "client").perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: bobID))
            try context.save()  // 8
        }
        let head = try log(coordinator).head
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try expectRefused(
                context, try tokens(coordinator, [5, 8]), object: bobID, property: "(object)",
                expected: ["as transaction 5 left it"], found: ["brought back by transaction 6, between them"])
        }
        #expect(try log(coordinator).head == head, "nothing was written")
    }

    @Test("an object one of them inserted, another deleted, a third brought back (its undo) and a fourth changed: reverted together, it is deleted — no transaction between them brought it back")
    func insertedDeletedBroughtBackAndChangedAmongThem() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _, _, cyID) = try await clientStore(dir)  // 4 inserts Cy
        try await privateContext(coordinator, name: "client", author: "client").perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: cyID))
            try context.save()  // 5
            try context.undo()
            try context.save()  // 6: Cy back
            try context.existingObject(with: cyID).setValue("cy@example.com", forKey: "email")
            try context.save()  // 7
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.revertTransactions(at: try tokens(coordinator, [4, 5, 6, 7]))
            #expect(context.deletedObjects.map(\.objectID) == [cyID])
            try context.save()
        }
        #expect(try log(coordinator).verify().isClean)
    }
}
