import Foundation
import Strata
import StrataTestSupport
import Testing

/// Nested contexts (session 35): one object per ID in a child that has heard of the
/// permanent IDs its ancestors gave (spec 0006 §3.1, §18.4), and a grandchild's undo checked
/// down to the root on a one-to-one's derived side (§18.6).
@Suite("Nested contexts: old temporary IDs, a grandchild's undo of a one-to-one", .serialized)
struct NestedIdentityFixTests {
    // MARK: - An old temporary ID in a child

    /// The child pushes a team; its parent (the root, or the middle context of a grandchild)
    /// makes the team's ID permanent — by saving, or with `obtainPermanentIDs` — and the
    /// child hears of it (its object now has the permanent ID; a child without children keeps
    /// no alias table). The app still holds the old temporary ID. Before, `object(with:)`
    /// made a second object under it: two objects for one team in the child, the second a
    /// fault read through the parent, and `registeredObject(for:)` then gave that one.
    @Test("a child (or grandchild) told of the permanent ID its ancestors gave its pushed team: object(with:), existingObject(with:), existingObjects(with:) and registeredObject(for:) of the old temporary ID give the one object it holds; a relationship set to the ID names it", arguments: ["save", "obtain"], [false, true])
    func oldTemporaryIDIsTheSameObject(how: String, grandchild: Bool) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try NestedUndoChainTests.leagueModel(.nullify))
        let root = privateContext(coordinator, name: "root")
        let middle = childContext(root, name: "middle")
        let child = grandchild ? childContext(middle, name: "grandchild") : middle
        let ancestors = grandchild ? [middle, root] : [root]
        let temporaryID = try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Kites", forKey: "name")
            try context.save()
            context.userInfo["team"] = team  // held: the child keeps it registered
            return team.objectID
        }
        #expect(temporaryID.isTemporaryID)
        if grandchild { try await middle.perform { (context: isolated ManagedObjectContext) throws in try context.save() } }
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            if how == "save" {
                try context.save()
            } else {
                try context.obtainPermanentIDs(for: [try context.existingObject(with: temporaryID)])
            }
        }
        // The remap reaches each context on its queue; a block enqueued after it runs later.
        for context in ancestors.reversed() { try await context.perform { (_: isolated ManagedObjectContext) throws in } }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try #require(context.userInfo["team"] as? ManagedObject)
            #expect(team.objectID.isTemporaryID == false, "the child heard of the permanent ID (the test's premise)")
            #expect(try context.object(with: temporaryID) === team)
            #expect(try context.existingObject(with: temporaryID) === team)
            #expect(try context.existingObjects(with: [temporaryID, team.objectID]).map { $0 === team } == [true, true])
            #expect(context.registeredObject(for: temporaryID) === team)
            let teams = context.registeredObjects.filter { $0.entity.name == "Team" }
            #expect(teams.count == 1, "one object for the team, not \(teams.map(\.objectID))")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Pat", forKey: "firstName")
            player.setValue(temporaryID, forKey: "team")
            #expect(player.value(forKey: "team") as? ManagedObject === team)
            #expect((team.value(forKey: "players") as? Set<ManagedObject>) == [player])
            try context.save()
        }
        for context in ancestors { try await context.perform { (context: isolated ManagedObjectContext) throws in try context.save() } }
        let stored = try await NestedUndoChainTests.saveAndRead(privateContext(coordinator))
        #expect(stored.teams == ["Kites"] && stored.players == ["Pat": "Kites"])
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    /// A temporary ID the child itself made permanent (its own `obtainPermanentIDs`): no
    /// ancestor knows it, and the child keeps no alias table — refused as before, the
    /// message saying the ID may have been made permanent since; no object is made for it.
    @Test("a child's own obtainPermanentIDs: the old temporary ID is refused with invalidObject saying it may have been made permanent, no second object made")
    func ownObtainedIDRefusedClearly() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try NestedUndoChainTests.leagueModel(.nullify))
        let root = privateContext(coordinator, name: "root")
        let child = childContext(root, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            let temporaryID = team.objectID
            try context.obtainPermanentIDs(for: [team])
            #expect(team.objectID.isTemporaryID == false)
            do {
                _ = try context.object(with: temporaryID)
                Issue.record("object(with:) of the old temporary ID gave an object")
            } catch ContextError.invalidObject(let detail) {
                #expect(detail.contains(temporaryID.description) && detail.contains("made permanent"), "\(detail)")
            }
            #expect(context.registeredObject(for: temporaryID) == nil)
            #expect(context.registeredObjects.filter { $0.entity.name == "Team" }.count == 1)
        }
    }

    // MARK: - A grandchild's undo of a one-to-one

    /// Root ← middle ← grandchild over the passports store (A:P1, B:P2, P3 no one's; the
    /// recorded side is `Passport.person`, `Person.passport` derived). The grandchild takes
    /// A's passport away (or gives A passport P3); the pushes carry it to the root. The root
    /// then pairs A otherwise. Undoing the grandchild's change would, pushed, take A's new
    /// passport from it: the check of A's derived side — which the middle context, holding
    /// it unchanged as read from the root, met — must go on to the root. Before, only
    /// recorded properties were passed on: the undo went through and the pushes overwrote
    /// the root's pairing.
    @Test("a grandchild's undo of a one-to-one change pushed to the root, after the root paired the person otherwise: refused with undoConflict on the derived side, the root's pairing kept", arguments: ["release", "give"], [false, true])
    func grandchildUndoOverRootsOneToOne(change: String, rootSaves: Bool) async throws {
        let dir = try TemporaryDirectory()
        let store = try await UndoRebaseCoverageTests.passports(dir)
        let coordinator = store.coordinator
        let root = privateContext(coordinator, name: "root")
        let middle = childContext(root, name: "middle")
        let grandchild = childContext(middle, name: "grandchild")
        try await grandchild.perform { (context: isolated ManagedObjectContext) throws in
            let a = try store.object("A", context)
            if change == "release" {
                a.setValue(nil, forKey: "passport")  // A:P1 → A:-
            } else {
                a.setValue(try store.object("P3", context), forKey: "passport")  // A:P1 → A:P3
            }
            try context.save()
        }
        try await middle.perform { (context: isolated ManagedObjectContext) throws in
            // The middle context holds A (and its passports) as the push left them.
            context.userInfo["held"] = try store.passports.map { try context.existingObject(with: $0) } + [try store.object("A", context)]
            _ = try UndoRebaseCoverageTests.pairs(context, store, "middle")
            try context.save()
        }
        // The root gives A another passport: P2 (B's) — B loses it.
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            try store.object("P2", context).setValue(try store.object("A", context), forKey: "person")
            if rootSaves { try context.save() }
        }
        try await grandchild.perform { (context: isolated ManagedObjectContext) throws in
            // Saved either way: an undo let through shows what its pushes do to the root.
            if let conflict = expectUndoConflict({ try context.undo() }) {
                #expect(conflict.property == "passport", "\(conflict)")
                #expect(conflict.found == "\(try #require(store.ids["P2"]))" + ContextError.parentContextHolds, "\(conflict)")
                #expect(context.hasChanges == false)
            }
            try context.save()
        }
        try await middle.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        let rootPairs = try await root.perform { (context: isolated ManagedObjectContext) throws in
            try context.save()
            return try UndoRebaseCoverageTests.pairs(context, store, "root")
        }
        #expect(rootPairs == "A:P2 B:-", "the root's pairing stands: \(rootPairs)")
        #expect(try await UndoRebaseCoverageTests.reopenedPairs(dir, store) == rootPairs)
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}
