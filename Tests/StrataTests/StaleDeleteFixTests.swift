import Foundation
@testable import Strata
import StrataModel
import StrataTestSupport
import Testing

/// Teams and people: `Team.members` (delete rule `rule`) is derived from the recorded
/// `Person.team`; a one-to-one `Person.badge` derived from the recorded `Badge.holder`; an
/// unordered many-to-many `Tag.items` derived from the recorded `Item.tags`.
private func staleDeleteModel(_ rule: DeleteRule) throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Team") {
            Attribute("name", .string)
            Relationship("members", to: "Person", inverse: "team", toMany: true, deleteRule: rule)
        }
        Entity("Person") {
            Attribute("name", .string)
            Relationship("team", to: "Team", inverse: "members")
            Relationship("badge", to: "Badge", inverse: "holder")
        }
        Entity("Badge") {
            Attribute("name", .string)
            Relationship("holder", to: "Person", inverse: "badge")
        }
        Entity("Tag") {
            Attribute("name", .string)
            Relationship("items", to: "Item", inverse: "tags", toMany: true)
        }
        Entity("Item") {
            Attribute("name", .string)
            Relationship("tags", to: "Tag", inverse: "items", toMany: true)
        }
    }
}

private func name(_ object: ManagedObject?) -> String? { object?.value(forKey: "name") as? String }

/// What a fresh context reads: the team's members by name (nil: no team), each person's team.
private struct Stored: Equatable, Sendable {
    var members: [String]?
    var teams: [String: String]
}

private func stored(_ coordinator: PersistentStoreCoordinator) async throws -> Stored {
    try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> Stored in
        let team = try context.fetch(FetchRequest(entityName: "Team")).first
        let people = try context.fetch(FetchRequest(entityName: "Person"))
        let members = (team?.value(forKey: "members") as? Set<ManagedObject>).map { $0.compactMap(name).sorted() }
        var teams: [String: String] = [:]
        for person in people { teams[name(person) ?? "?"] = name(person.value(forKey: "team") as? ManagedObject) ?? "-" }
        return Stored(members: members, teams: teams)
    }
}

/// Team t8 with `p1` (unless `empty`) and a team-less `p19`. Context V loads t8 and its
/// members (and `p19`, when `viewerHoldsMover`); context O moves p19 into t8 and saves; V,
/// not merging, deletes t8 and saves under `policy`. Returns V's save error, the store's
/// state after, and whether the log verifies clean.
private func staleDelete(
    rule: DeleteRule, policy: any MergePolicy, empty: Bool = false, viewerHoldsMover: Bool = false
) async throws -> (error: ContextError?, stored: Stored, clean: Bool, team: ManagedObjectID, mover: ManagedObjectID) {
    let dir = try TemporaryDirectory()
    let coordinator = try openCoordinator(dir, model: try staleDeleteModel(rule))
    let (teamID, moverID) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        let team = try context.insertNewObject(forEntityName: "Team")
        team.setValue("t8", forKey: "name")
        if !empty {
            let p1 = try context.insertNewObject(forEntityName: "Person")
            p1.setValue("p1", forKey: "name")
            p1.setValue(team, forKey: "team")
        }
        let mover = try context.insertNewObject(forEntityName: "Person")
        mover.setValue("p19", forKey: "name")
        try context.save()
        return (team.objectID, mover.objectID)
    }
    let viewer = privateContext(coordinator, name: "V")
    let other = privateContext(coordinator, name: "O")
    let error = try await viewer.perform { (context: isolated ManagedObjectContext) throws -> ContextError? in
        context.mergePolicy = policy
        let team = try context.existingObject(with: teamID)
        let known = (team.value(forKey: "members") as? Set<ManagedObject>)?.compactMap(name).sorted()
        #expect(known == (empty ? [] : ["p1"]))
        if viewerHoldsMover { #expect(try context.existingObject(with: moverID).value(forKey: "team") == nil) }
        try other.performAndWait { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            try context.existingObject(with: moverID).setValue(team, forKey: "team")
            try context.save()
        }
        context.delete(team)
        do { try context.save() } catch let error as ContextError { return error }
        // Saved: nothing left unsaved, and the mover V held follows the rule in V too.
        let unsaved = context.hasChanges
        #expect(!unsaved)
        if viewerHoldsMover, rule == .nullify, policy is StandardMergePolicy, (policy as? StandardMergePolicy) != .rollback {
            #expect(try context.existingObject(with: moverID).value(forKey: "team") == nil)
        }
        return nil
    }
    let state = try await stored(coordinator)
    let clean = try coordinator.persistentStores[0].log.verify().isClean
    return (error, state, clean, teamID, moverID)
}

@Suite("A stale context's delete of an object another writer related something to", .serialized)
struct StaleDeleteFixTests {
    /// Before: the store refused the save ("Person/p2.team refers to Team/p1, which is not in
    /// the store"); now a merge conflict on the team, as in Core Data (the move changed the
    /// team's members, so its version), and nothing written.
    @Test(arguments: [DeleteRule.nullify, .cascade, .deny])
    func errorPolicyReportsConflictOnTheTeam(rule: DeleteRule) async throws {
        let result = try await staleDelete(rule: rule, policy: .error, empty: rule == .deny)
        guard case .mergeConflicts(let conflicts)? = result.error else {
            Issue.record("expected a merge conflict, got \(String(describing: result.error))")
            return
        }
        #expect(conflicts.map(\.objectID) == [result.team])
        #expect(conflicts.first?.isDeletedInContext == true)
        #expect(conflicts.first?.isDeletedInStore == false)
        // The conflict names the side and what the store relates to the team now.
        #expect(conflicts.first?.properties.map(\.name) == ["members"])
        if case .objects(let theirs)? = conflicts.first?.properties.first?.theirs { #expect(theirs.contains(result.mover)) }
        else { Issue.record("expected the store's members, got \(String(describing: conflicts.first?.properties))") }
        #expect(result.stored.members == (rule == .deny ? ["p19"] : ["p1", "p19"]))
        #expect(result.clean)
    }

    /// The trumping policies keep the deletion and apply its rule to the store's members:
    /// nullify takes p19 out of the team, no reference to the deleted team is written.
    @Test(arguments: [StandardMergePolicy.mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump, .overwrite])
    func trumpingPoliciesNullifyTheStoresMembers(policy: StandardMergePolicy) async throws {
        for holds in [false, true] {
            let result = try await staleDelete(rule: .nullify, policy: policy, viewerHoldsMover: holds)
            #expect(result.error == nil, "\(policy) holding p19: \(String(describing: result.error))")
            #expect(result.stored == Stored(members: nil, teams: ["p1": "-", "p19": "-"]))
            #expect(result.clean)
        }
    }

    /// Cascade deletes the member the other writer added too.
    @Test func trumpingPolicyCascadesToTheStoresMembers() async throws {
        for holds in [false, true] {
            let result = try await staleDelete(rule: .cascade, policy: .mergeByPropertyObjectTrump, viewerHoldsMover: holds)
            #expect(result.error == nil, "\(String(describing: result.error))")
            #expect(result.stored == Stored(members: nil, teams: [:]))
            #expect(result.clean)
        }
    }

    /// Deny refuses the deletion, naming the member the other writer added; nothing written.
    @Test func trumpingPolicyDenyNamesTheStoresMember() async throws {
        let result = try await staleDelete(rule: .deny, policy: .mergeByPropertyObjectTrump, empty: true)
        guard case .validation(let failures)? = result.error else {
            Issue.record("expected a validation failure, got \(String(describing: result.error))")
            return
        }
        #expect(failures.map(\.code) == [.relationshipDeniedDelete])
        #expect(failures.first?.message.contains(result.mover.description) == true, "\(failures.first?.message ?? "")")
        #expect(result.stored == Stored(members: ["p19"], teams: ["p19": "t8"]))
        #expect(result.clean)
    }

    /// Rollback drops the deletion: the team stays with both members.
    @Test func rollbackKeepsTheTeam() async throws {
        let result = try await staleDelete(rule: .nullify, policy: .rollback)
        #expect(result.error == nil, "\(String(describing: result.error))")
        #expect(result.stored == Stored(members: ["p1", "p19"], teams: ["p1": "t8", "p19": "t8"]))
        #expect(result.clean)
    }

    /// The same through a one-to-one's derived side (a badge given to the person V deletes)
    /// and an unordered many-to-many's (an item tagged with the tag V deletes).
    @Test func derivedOneToOneAndManyToMany() async throws {
        for policy in [StandardMergePolicy.error, .mergeByPropertyObjectTrump] {
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: try staleDeleteModel(.nullify))
            let (personID, badgeID, tagID, itemID) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let person = try context.insertNewObject(forEntityName: "Person")
                let badge = try context.insertNewObject(forEntityName: "Badge")
                let tag = try context.insertNewObject(forEntityName: "Tag")
                let item = try context.insertNewObject(forEntityName: "Item")
                try context.save()
                return (person.objectID, badge.objectID, tag.objectID, item.objectID)
            }
            let other = privateContext(coordinator, name: "O")
            let error = try await privateContext(coordinator, name: "V").perform { (context: isolated ManagedObjectContext) throws -> ContextError? in
                context.mergePolicy = policy
                let person = try context.existingObject(with: personID)
                let tag = try context.existingObject(with: tagID)
                #expect(person.value(forKey: "badge") == nil)
                #expect((tag.value(forKey: "items") as? Set<ManagedObject>)?.isEmpty == true)
                try other.performAndWait { (context: isolated ManagedObjectContext) throws in
                    try context.existingObject(with: badgeID).setValue(try context.existingObject(with: personID), forKey: "holder")
                    try context.existingObject(with: itemID).mutableSetValue(forKey: "tags").add(try context.existingObject(with: tagID))
                    try context.save()
                }
                context.delete(person)
                context.delete(tag)
                do { try context.save() } catch let error as ContextError { return error }
                return nil
            }
            if policy == .error {
                guard case .mergeConflicts(let conflicts)? = error else {
                    Issue.record("expected a merge conflict, got \(String(describing: error))")
                    continue
                }
                #expect(Set(conflicts.map(\.objectID)) == [personID, tagID])
            } else {
                #expect(error == nil, "\(String(describing: error))")
                try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                    #expect(try context.existingObject(with: badgeID).value(forKey: "holder") == nil)
                    #expect((try context.existingObject(with: itemID).value(forKey: "tags") as? Set<ManagedObject>)?.isEmpty == true)
                }
            }
            #expect(try coordinator.persistentStores[0].log.verify().isClean)
        }
    }

    /// The rule's changes join the delete's undo group: undoing it brings the team back with
    /// both members, in memory and, saved, in the store.
    @Test func undoAfterResolvedDelete() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try staleDeleteModel(.nullify))
        let (teamID, moverID) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("t8", forKey: "name")
            let p1 = try context.insertNewObject(forEntityName: "Person")
            p1.setValue("p1", forKey: "name")
            p1.setValue(team, forKey: "team")
            let mover = try context.insertNewObject(forEntityName: "Person")
            mover.setValue("p19", forKey: "name")
            try context.save()
            return (team.objectID, mover.objectID)
        }
        let other = privateContext(coordinator, name: "O")
        try await privateContext(coordinator, name: "V").perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = .mergeByPropertyObjectTrump
            let team = try context.existingObject(with: teamID)
            _ = team.value(forKey: "members")
            try other.performAndWait { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: moverID).setValue(try context.existingObject(with: teamID), forKey: "team")
                try context.save()
            }
            context.delete(team)
            try context.save()
            let mover = try context.existingObject(with: moverID)
            #expect(mover.value(forKey: "team") == nil)
            try context.undo()
            #expect((mover.value(forKey: "team") as? ManagedObject)?.objectID == teamID)
            let more = context.canUndo
            #expect(!more)
            let restored = try context.existingObject(with: teamID)
            #expect(!restored.isDeleted)
            #expect((restored.value(forKey: "members") as? Set<ManagedObject>)?.compactMap(name).sorted() == ["p1", "p19"])
            try context.save()
        }
        let state = try await stored(coordinator)
        #expect(state == Stored(members: ["p1", "p19"], teams: ["p1": "t8", "p19": "t8"]))
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}
