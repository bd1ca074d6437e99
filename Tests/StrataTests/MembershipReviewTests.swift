import Foundation
@testable import Strata
import StrataTestSupport
import Testing

/// Owners with an ordered to-many (items), a many-to-many (tags), a one-to-one (partner) and
/// a transient to-many (marks), each with an inverse.
private func membershipModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Owner") {
            Attribute("name", .string)
            Relationship("items", to: "Item", inverse: "owner", toMany: true, ordered: true)
            Relationship("tags", to: "Tag", inverse: "owners", toMany: true)
            Relationship("partner", to: "Partner", inverse: "owner")
            Relationship("marks", to: "Tag", inverse: "markedBy", toMany: true).transient()
        }
        Entity("Item") {
            Attribute("name", .string)
            Relationship("owner", to: "Owner", inverse: "items")
        }
        Entity("Tag") {
            Attribute("name", .string)
            Relationship("owners", to: "Owner", inverse: "tags", toMany: true)
            Relationship("markedBy", to: "Owner", inverse: "marks").transient()
        }
        Entity("Partner") {
            Attribute("name", .string)
            Relationship("owner", to: "Owner", inverse: "partner")
        }
    }
}

/// Saved: owners O and O2; O has items i1, i2, i3 (in that order), tags t1, t2 and partner
/// P1; O2 has partner P2; i4, t3, t4 relate to nothing. Returns each object's ID by name.
private func membershipStore(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, MembershipIDs) {
    let coordinator = try openCoordinator(dir, model: try membershipModel())
    let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
        var objects: [String: ManagedObject] = [:]
        let make = { (entity: String, name: String) throws -> ManagedObject in
            let object = try context.insertNewObject(forEntityName: entity)
            object.setValue(name, forKey: "name")
            objects[name] = object
            return object
        }
        let owner = try make("Owner", "O")
        let other = try make("Owner", "O2")
        let items = try ["i1", "i2", "i3"].map { try make("Item", $0) }
        _ = try make("Item", "i4")
        let tags = try ["t1", "t2"].map { try make("Tag", $0) }
        _ = try make("Tag", "t3")
        _ = try make("Tag", "t4")
        owner.setValue(items, forKey: "items")
        owner.setValue(Set(tags), forKey: "tags")
        owner.setValue(try make("Partner", "P1"), forKey: "partner")
        other.setValue(try make("Partner", "P2"), forKey: "partner")
        try context.save()
        return objects.mapValues(\.objectID)
    }
    return (coordinator, MembershipIDs(byName: ids))
}

/// The fixture's object IDs by name.
private struct MembershipIDs: Sendable {
    let byName: [String: ManagedObjectID]

    /// The object named `name` in `context` (a test failure if the fixture has no such name).
    func object(_ name: String, in context: isolated ManagedObjectContext) throws -> ManagedObject {
        try context.existingObject(with: try #require(byName[name], "no fixture object \(name)"))
    }
}

private func names(_ object: ManagedObject?, _ key: String) -> Set<String> {
    Set(((object?.value(forKey: key) as? Set<ManagedObject>) ?? []).compactMap { $0.value(forKey: "name") as? String })
}

private func orderedNames(_ object: ManagedObject?, _ key: String) -> [String] {
    ((object?.value(forKey: key) as? [ManagedObject]) ?? []).compactMap { $0.value(forKey: "name") as? String }
}

private func name(_ object: ManagedObject?, _ key: String) -> String? {
    (object?.value(forKey: key) as? ManagedObject)?.value(forKey: "name") as? String
}

@Suite("Contexts: membership changed in place through inverses (review)", .serialized)
struct MembershipReviewTests {
    @Test("many-to-many: adding then removing the same members through the inverse leaves no change, changedValues empty")
    func manyToManyAddThenRemove() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await membershipStore(dir)
        for undoEnabled in [true, false] {
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                context.isUndoEnabled = undoEnabled
                let owner = try ids.object("O", in: context)
                let t3 = try ids.object("t3", in: context)
                let t4 = try ids.object("t4", in: context)
                let t1 = try ids.object("t1", in: context)
                t3.mutableSetValue(forKey: "owners").add(owner)
                t4.mutableSetValue(forKey: "owners").add(owner)
                t1.mutableSetValue(forKey: "owners").remove(owner)
                #expect(names(owner, "tags") == ["t2", "t3", "t4"])
                #expect(owner.changedValues().keys.sorted() == ["tags"])
                t3.mutableSetValue(forKey: "owners").remove(owner)
                t1.mutableSetValue(forKey: "owners").add(owner)
                t4.mutableSetValue(forKey: "owners").remove(owner)
                #expect(names(owner, "tags") == ["t1", "t2"])
                #expect(owner.hasChanges == false, "undo enabled: \(undoEnabled)")
                #expect(owner.changedValues().isEmpty, "undo enabled: \(undoEnabled)")
                // The open group holds the sets until it closes (then they cancel out).
                context.processPendingChanges()
                #expect(context.hasChanges == false, "undo enabled: \(undoEnabled)")
                #expect(context.updatedObjects.isEmpty, "undo enabled: \(undoEnabled)")
            }
        }
    }

    @Test("many-to-many through the inverse: undo and redo of a group, rollback, then what is saved")
    func manyToManyUndoRedoSave() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await membershipStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let owner = try ids.object("O", in: context)
            let tag = { (name: String) throws -> ManagedObject in try ids.object(name, in: context) }
            try tag("t3").mutableSetValue(forKey: "owners").add(owner)
            try tag("t4").mutableSetValue(forKey: "owners").add(owner)
            try tag("t1").mutableSetValue(forKey: "owners").remove(owner)
            context.processPendingChanges()
            #expect(names(owner, "tags") == ["t2", "t3", "t4"])
            try context.undo()
            #expect(names(owner, "tags") == ["t1", "t2"])
            #expect(owner.hasChanges == false)
            #expect(names(try tag("t1"), "owners") == ["O"])
            #expect(names(try tag("t3"), "owners").isEmpty)
            try context.redo()
            #expect(names(owner, "tags") == ["t2", "t3", "t4"])
            #expect(names(try tag("t1"), "owners").isEmpty)
            // A second group on top, then rollback of everything.
            try tag("t1").mutableSetValue(forKey: "owners").add(owner)
            context.rollback()
            #expect(names(owner, "tags") == ["t1", "t2"])
            #expect(context.hasChanges == false)
            try tag("t3").mutableSetValue(forKey: "owners").add(owner)
            try tag("t4").mutableSetValue(forKey: "owners").add(owner)
            try tag("t2").mutableSetValue(forKey: "owners").remove(owner)
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(names(try ids.object("O", in: context), "tags") == ["t1", "t3", "t4"])
            #expect(names(try ids.object("t2", in: context), "owners").isEmpty)
        }
    }

    @Test("ordered to-many filled and emptied through the inverse keeps its order through undo, redo and save")
    func orderedThroughInverse() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await membershipStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let owner = try ids.object("O", in: context)
            for name in ["n1", "n2"] {
                let item = try context.insertNewObject(forEntityName: "Item")
                item.setValue(name, forKey: "name")
                item.setValue(owner, forKey: "owner")
            }
            try ids.object("i2", in: context).setValue(nil, forKey: "owner")
            try ids.object("i4", in: context).setValue(owner, forKey: "owner")
            #expect(orderedNames(owner, "items") == ["i1", "i3", "n1", "n2", "i4"])
            context.processPendingChanges()
            try context.undo()
            #expect(orderedNames(owner, "items") == ["i1", "i2", "i3"])
            #expect(owner.hasChanges == false)
            try context.redo()
            #expect(orderedNames(owner, "items") == ["i1", "i3", "n1", "n2", "i4"])
            // Removing and adding back the same member moves it to the end (a change).
            try ids.object("i1", in: context).setValue(nil, forKey: "owner")
            try ids.object("i1", in: context).setValue(owner, forKey: "owner")
            #expect(orderedNames(owner, "items") == ["i3", "n1", "n2", "i4", "i1"])
            try context.save()
            try context.undo()
            #expect(orderedNames(owner, "items") == ["i1", "i3", "n1", "n2", "i4"])
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(orderedNames(try ids.object("O", in: context), "items") == ["i1", "i3", "n1", "n2", "i4"])
        }
    }

    @Test("one-to-one: taking another's partner clears both previous sides; undo and redo restore them")
    func oneToOne() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await membershipStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let o = try ids.object("O", in: context)
            let o2 = try ids.object("O2", in: context)
            let p1 = try ids.object("P1", in: context)
            let p2 = try ids.object("P2", in: context)
            o.setValue(p2, forKey: "partner")
            #expect(name(o, "partner") == "P2" && name(p2, "owner") == "O")
            #expect(name(o2, "partner") == nil && name(p1, "owner") == nil)
            context.processPendingChanges()
            p1.setValue(o2, forKey: "owner")  // from the other side
            #expect(name(o2, "partner") == "P1" && name(p1, "owner") == "O2")
            p1.setValue(o, forKey: "owner")
            #expect(name(o, "partner") == "P1" && name(p2, "owner") == nil && name(o2, "partner") == nil)
            context.processPendingChanges()
            try context.undo()
            try context.undo()
            #expect(name(o, "partner") == "P1" && name(p1, "owner") == "O" && name(o2, "partner") == "P2" && name(p2, "owner") == "O2")
            #expect(context.hasChanges == false)
            try context.redo()
            try context.redo()
            #expect(name(o, "partner") == "P1" && name(p2, "owner") == nil && name(o2, "partner") == nil)
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(name(try ids.object("O", in: context), "partner") == "P1")
            #expect(name(try ids.object("P2", in: context), "owner") == nil)
            #expect(name(try ids.object("O2", in: context), "partner") == nil)
        }
    }

    @Test("a deleted member, then members added through the inverse in the same group; a deleted owner re-related; undo restores")
    func deletedThenRelated() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await membershipStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let owner = try ids.object("O", in: context)
            let i1 = try ids.object("i1", in: context)
            let i4 = try ids.object("i4", in: context)
            let t3 = try ids.object("t3", in: context)
            context.delete(i1)
            #expect(orderedNames(owner, "items") == ["i2", "i3"])
            i4.setValue(owner, forKey: "owner")
            t3.mutableSetValue(forKey: "owners").add(owner)
            context.delete(t3)
            #expect(names(owner, "tags") == ["t1", "t2"])
            #expect(orderedNames(owner, "items") == ["i2", "i3", "i4"])
            context.processPendingChanges()
            try context.undo()
            #expect(orderedNames(owner, "items") == ["i1", "i2", "i3"])
            #expect(names(owner, "tags") == ["t1", "t2"])
            #expect(i1.isDeleted == false && t3.isDeleted == false)
            #expect(context.hasChanges == false)
            try context.redo()
            #expect(orderedNames(owner, "items") == ["i2", "i3", "i4"])
            try context.undo()
            // The owner deleted, then an item related to it, in one group.
            context.delete(owner)
            #expect(name(i4, "owner") == nil)
            i4.setValue(owner, forKey: "owner")
            #expect(orderedNames(owner, "items").contains("i4"))
            context.processPendingChanges()
            try context.undo()
            #expect(owner.isDeleted == false)
            #expect(orderedNames(owner, "items") == ["i1", "i2", "i3"])
            #expect(name(i4, "owner") == nil)
            #expect(context.hasChanges == false)
        }
    }

    @Test("undo registration switched off and on within one group: the recorded changes undo, the others stay")
    func undoToggledMidGroup() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await membershipStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let owner = try ids.object("O", in: context)
            let tag = { (name: String) throws -> ManagedObject in try ids.object(name, in: context) }
            try tag("t3").mutableSetValue(forKey: "owners").add(owner)
            context.isUndoEnabled = false
            try tag("t4").mutableSetValue(forKey: "owners").add(owner)
            context.isUndoEnabled = true
            try tag("t1").mutableSetValue(forKey: "owners").remove(owner)
            #expect(names(owner, "tags") == ["t2", "t3", "t4"])
            context.processPendingChanges()
            try context.undo()
            // The owner's own value was recorded (old from before the group).
            #expect(names(owner, "tags") == ["t1", "t2"])
            #expect(names(try tag("t3"), "owners").isEmpty)
            #expect(names(try tag("t1"), "owners") == ["O"])
            try context.redo()
            #expect(names(owner, "tags") == ["t2", "t3", "t4"])
            #expect(names(try tag("t1"), "owners").isEmpty)
            #expect(names(try tag("t3"), "owners") == ["O"])
        }
        // Off first, then on: the first recorded change keeps the value it found.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let owner = try ids.object("O", in: context)
            let tag = { (name: String) throws -> ManagedObject in try ids.object(name, in: context) }
            context.isUndoEnabled = false
            try tag("t4").mutableSetValue(forKey: "owners").add(owner)
            context.isUndoEnabled = true
            try tag("t3").mutableSetValue(forKey: "owners").add(owner)
            try tag("t1").mutableSetValue(forKey: "owners").remove(owner)
            context.processPendingChanges()
            try context.undo()
            #expect(names(owner, "tags") == ["t1", "t2", "t4"])
            try context.redo()
            #expect(names(owner, "tags") == ["t2", "t3", "t4"])
        }
    }

    @Test("a child's save fills the parent's to-many through the inverse; the parent's undo, redo and save")
    func childContextFill() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await membershipStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            // The parent has a pending change of its own to the owner's tags.
            try ids.object("t3", in: context).mutableSetValue(forKey: "owners").add(try ids.object("O", in: context))
            context.processPendingChanges()
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let owner = try ids.object("O", in: context)
            #expect(names(owner, "tags") == ["t1", "t2", "t3"])
            for index in 0..<5 {
                let tag = try context.insertNewObject(forEntityName: "Tag")
                tag.setValue("c\(index)", forKey: "name")
                tag.mutableSetValue(forKey: "owners").add(owner)
            }
            try ids.object("t1", in: context).mutableSetValue(forKey: "owners").remove(owner)
            try ids.object("t3", in: context).mutableSetValue(forKey: "owners").remove(owner)
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let owner = try ids.object("O", in: context)
            let pushed: Set<String> = ["t2", "c0", "c1", "c2", "c3", "c4"]
            #expect(names(owner, "tags") == pushed)
            try context.undo()
            #expect(names(owner, "tags") == ["t1", "t2", "t3"])
            try context.redo()
            #expect(names(owner, "tags") == pushed)
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(names(try ids.object("O", in: context), "tags") == ["t2", "c0", "c1", "c2", "c3", "c4"])
        }
    }

    @Test("relationships to temporary IDs are remapped after save: pending values, undo and redo groups, a child's pending changes")
    func remapAfterSave() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await membershipStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let newOwnerID = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let owner = try ids.object("O", in: context)
            let fresh = try context.insertNewObject(forEntityName: "Owner")
            fresh.setValue("N", forKey: "name")
            var tags: [ManagedObject] = []
            for index in 0..<4 {
                let tag = try context.insertNewObject(forEntityName: "Tag")
                tag.setValue("n\(index)", forKey: "name")
                tag.mutableSetValue(forKey: "owners").add(fresh)
                tag.mutableSetValue(forKey: "owners").add(owner)
                tags.append(tag)
                let item = try context.insertNewObject(forEntityName: "Item")
                item.setValue("m\(index)", forKey: "name")
                item.setValue(fresh, forKey: "owner")
            }
            context.processPendingChanges()
            tags[0].mutableSetValue(forKey: "owners").remove(owner)
            context.processPendingChanges()
            try context.save()
            #expect(fresh.objectID.isTemporaryID == false)
            #expect(names(fresh, "tags") == ["n0", "n1", "n2", "n3"])
            #expect(names(owner, "tags") == ["t1", "t2", "n1", "n2", "n3"])
            try context.undo()
            #expect(names(owner, "tags") == ["t1", "t2", "n0", "n1", "n2", "n3"])
            try context.undo()
            #expect(names(owner, "tags") == ["t1", "t2"])
            #expect(fresh.isDeleted || fresh.managedObjectContext == nil)
            try context.redo()
            try context.redo()
            #expect(names(owner, "tags") == ["t1", "t2", "n1", "n2", "n3"])
            #expect(orderedNames(fresh, "items") == ["m0", "m1", "m2", "m3"])
            #expect(owner.hasChanges == false)
            try context.save()
            // Now an unsaved insert the child relates to.
            let another = try context.insertNewObject(forEntityName: "Owner")
            another.setValue("A", forKey: "name")
            context.processPendingChanges()
            return another.objectID
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let another = try context.existingObject(with: newOwnerID)
            for name in ["t3", "t4"] { try ids.object(name, in: context).mutableSetValue(forKey: "owners").add(another) }
            try ids.object("i4", in: context).setValue(another, forKey: "owner")
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let t3 = try ids.object("t3", in: context)
            let another = try #require((t3.value(forKey: "owners") as? Set<ManagedObject>)?.first)
            #expect(another.objectID.isTemporaryID == false)
            #expect(names(another, "tags") == ["t3", "t4"])
            #expect(orderedNames(another, "items") == ["i4"])
            try ids.object("t1", in: context).mutableSetValue(forKey: "owners").add(another)
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let t3 = try ids.object("t3", in: context)
            let another = try #require((t3.value(forKey: "owners") as? Set<ManagedObject>)?.first)
            #expect(names(another, "tags") == ["t1", "t3", "t4"])
            #expect(orderedNames(another, "items") == ["i4"])
            #expect(names(try ids.object("O", in: context), "tags") == ["t1", "t2", "n1", "n2", "n3"])
        }
    }

    @Test("a transient to-many filled through its transient inverse; undo and redo")
    func transientRelationship() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await membershipStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let owner = try ids.object("O", in: context)
            // Held: only transient changes don't keep an object in the context.
            let tags = try ["t1", "t2", "t3"].map { try ids.object($0, in: context) }
            for tag in tags { tag.setValue(owner, forKey: "markedBy") }
            tags[1].setValue(nil, forKey: "markedBy")
            #expect(names(owner, "marks") == ["t1", "t3"])
            context.processPendingChanges()
            try context.undo()
            #expect(names(owner, "marks").isEmpty)
            try context.redo()
            #expect(names(owner, "marks") == ["t1", "t3"])
            tags[0].setValue(nil, forKey: "markedBy")
            tags[2].setValue(nil, forKey: "markedBy")
            #expect(names(owner, "marks").isEmpty)
        }
    }
    @Test("persisted undo of members changed through the inverse (ordered and many-to-many) survives a restart; redo too")
    func persistentUndoOfInverseFill() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await membershipStore(dir)
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            let owner = try ids.object("O", in: context)
            let object = { (name: String) throws -> ManagedObject in try ids.object(name, in: context) }
            try object("t3").mutableSetValue(forKey: "owners").add(owner)
            try object("t4").mutableSetValue(forKey: "owners").add(owner)
            try object("t1").mutableSetValue(forKey: "owners").remove(owner)
            try object("i4").setValue(owner, forKey: "owner")
            try object("i2").setValue(nil, forKey: "owner")
            let fresh = try context.insertNewObject(forEntityName: "Tag")
            fresh.setValue("f", forKey: "name")
            fresh.mutableSetValue(forKey: "owners").add(owner)
            context.setActionName("Fill")
            try context.save()
        }
        func check(_ tags: Set<String>, _ items: [String]) async throws {
            try await privateContext(openCoordinator(dir, model: try membershipModel())).perform { (context: isolated ManagedObjectContext) throws in
                let owner = try ids.object("O", in: context)
                #expect(names(owner, "tags") == tags)
                #expect(orderedNames(owner, "items") == items)
                #expect(names(try ids.object("t1", in: context), "owners") == (tags.contains("t1") ? ["O"] : []))
            }
        }
        try await check(["t2", "t3", "t4", "f"], ["i1", "i3", "i4"])
        try await privateContext(openCoordinator(dir, model: try membershipModel()), name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            #expect(context.undoActionName == "Fill")
            try context.undo()
            let owner = try ids.object("O", in: context)
            #expect(names(owner, "tags") == ["t1", "t2"])
            #expect(orderedNames(owner, "items") == ["i1", "i2", "i3"])
            try context.save()
        }
        try await check(["t1", "t2"], ["i1", "i2", "i3"])
        try await privateContext(openCoordinator(dir, model: try membershipModel()), name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            try context.redo()
            try context.save()
        }
        try await check(["t2", "t3", "t4", "f"], ["i1", "i3", "i4"])
    }
    @Test("persisted undo of deleting a tag related many-to-many brings it back to its owners after a restart")
    func persistentUndoOfRelatedDelete() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, ids) = try await membershipStore(dir)
        try await privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true).perform { (context: isolated ManagedObjectContext) throws in
            context.delete(try ids.object("t1", in: context))
            try context.save()
        }
        try await privateContext(openCoordinator(dir, model: try membershipModel()), name: "editor", author: "alice", persistentUndo: true).perform {
            (context: isolated ManagedObjectContext) throws in
            try context.undo()
            #expect(names(try ids.object("O", in: context), "tags") == ["t1", "t2"])
            try context.save()
        }
        try await privateContext(openCoordinator(dir, model: try membershipModel())).perform { (context: isolated ManagedObjectContext) throws in
            #expect(names(try ids.object("O", in: context), "tags") == ["t1", "t2"])
            #expect(names(try ids.object("t1", in: context), "owners") == ["O"])
        }
    }
}
