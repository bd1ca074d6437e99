import Foundation
@testable import Strata
import StrataTestSupport
import Testing

/// Owners with an ordered, cascading to-many (items) and a many-to-many (tags, nullify both
/// ways), each with an inverse.
private func scaleModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Owner") {
            Attribute("name", .string)
            Relationship("items", to: "Item", inverse: "owner", toMany: true, ordered: true, deleteRule: .cascade)
            Relationship("tags", to: "Tag", inverse: "owners", toMany: true)
        }
        Entity("Item") {
            Attribute("name", .string)
            Relationship("owner", to: "Owner", inverse: "items")
        }
        Entity("Tag") {
            Attribute("name", .string)
            Relationship("owners", to: "Owner", inverse: "tags", toMany: true)
        }
        Entity("Person") {
            Attribute("first", .string)
            Attribute("last", .string)
            Unique("first", "last")
        }
    }
}

/// A saved owner "O" with `items` items and `tags` tags (names "i0"…, "t0"…); its ID.
private func seededStore(_ coordinator: PersistentStoreCoordinator, items: Int, tags: Int, related: Bool = true) throws -> ManagedObjectID {
    try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
        context.undoManagerDisabledForProbe()
        let owner = try context.insertNewObject(forEntityName: "Owner")
        owner.setValue("O", forKey: "name")
        var itemObjects: [ManagedObject] = []
        for i in 0..<items {
            let item = try context.insertNewObject(forEntityName: "Item")
            item.setValue("i\(i)", forKey: "name")
            itemObjects.append(item)
        }
        var tagObjects: [ManagedObject] = []
        for i in 0..<tags {
            let tag = try context.insertNewObject(forEntityName: "Tag")
            tag.setValue("t\(i)", forKey: "name")
            tagObjects.append(tag)
        }
        if related {
            owner.setValue(itemObjects, forKey: "items")
            owner.setValue(Set(tagObjects), forKey: "tags")
        }
        try context.save()
        return owner.objectID
    }
}

extension ManagedObjectContext {
    fileprivate func undoManagerDisabledForProbe() { levelsOfUndo = 1 }
}

/// Objects the probe keeps registered (an app's list holding them) across performs.
private final class Held: @unchecked Sendable { var objects: [ManagedObject] = [] }

/// Size for the correctness tests below (`STRATA_SCALE_SIZE`, small by default).
private let scaleSize = ProcessInfo.processInfo.environment["STRATA_SCALE_SIZE"].flatMap { Int($0) } ?? 120

private func names(_ value: Any?) -> [String] {
    switch value {
    case let set as Set<ManagedObject>: set.compactMap { $0.value(forKey: "name") as? String }.sorted()
    case let array as [ManagedObject]: array.compactMap { $0.value(forKey: "name") as? String }
    default: []
    }
}

@Suite struct ScaleContextReviewTests {
    /// A mutable set proxy filling and emptying a large to-many one member at a time (it had
    /// copied and compared the whole value for each): same members, inverses, undo and save.
    @Test func proxyAddAndRemoveOneAtATime() throws {
        let n = scaleSize
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        let ownerID = try seededStore(coordinator, items: n, tags: n, related: false)
        let other = try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let other = try context.insertNewObject(forEntityName: "Owner")
            other.setValue("O2", forKey: "name")
            try context.save()
            return other.objectID
        }
        let expected = try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            let second = try context.existingObject(with: other)
            let byName = { (entity: String) throws -> [ManagedObject] in
                try context.fetch(FetchRequest(entityName: entity, sortDescriptors: [FetchSortDescriptor(key: "name")]))
            }
            let tags = try byName("Tag")
            // Items in a scrambled order: the ordered relationship keeps the order added.
            let items = try byName("Item").enumerated().sorted { ($0.offset * 7919) % n < ($1.offset * 7919) % n }.map(\.element)
            // The first items start on the other owner: adding them here moves them.
            for item in items.prefix(3) { second.mutableSetValue(forKey: "items").add(item) }
            context.processPendingChanges()
            let tagProxy = owner.mutableSetValue(forKey: "tags")
            let itemProxy = owner.mutableSetValue(forKey: "items")
            for (tag, item) in zip(tags, items) {
                tagProxy.add(tag)
                tagProxy.add(tag)  // already a member: nothing
                itemProxy.add(item)
            }
            #expect(tagProxy.count == n)
            #expect(itemProxy.count == n)
            #expect(names(owner.value(forKey: "items")) == items.map { $0.value(forKey: "name") as? String ?? "" })
            #expect(names(second.value(forKey: "items")).isEmpty)
            for tag in tags { #expect((tag.value(forKey: "owners") as? Set<ManagedObject>) == [owner]) }
            for item in items { #expect(item.value(forKey: "owner") as? ManagedObject === owner) }
            // Undo takes the whole group back; redo brings it again.
            context.processPendingChanges()
            try context.undo()
            #expect(tagProxy.count == 0)
            #expect(names(second.value(forKey: "items")).count == 3)
            try context.redo()
            #expect(tagProxy.count == n)
            // Every other tag and item out again, one at a time.
            for (index, (tag, item)) in zip(tags, items).enumerated() where index % 2 == 0 {
                tagProxy.remove(tag)
                tagProxy.remove(tag)  // no longer a member: nothing
                itemProxy.remove(item)
            }
            #expect(tagProxy.count == n / 2)
            for (index, tag) in tags.enumerated() {
                #expect(((tag.value(forKey: "owners") as? Set<ManagedObject>) ?? []).isEmpty == (index % 2 == 0))
            }
            for (index, item) in items.enumerated() { #expect((item.value(forKey: "owner") == nil) == (index % 2 == 0)) }
            let expected = (
                tags: tags.enumerated().filter { $0.offset % 2 == 1 }.map { $0.element.value(forKey: "name") as? String ?? "" }.sorted(),
                items: items.enumerated().filter { $0.offset % 2 == 1 }.map { $0.element.value(forKey: "name") as? String ?? "" })
            #expect(names(owner.value(forKey: "tags")) == expected.tags)
            #expect(names(owner.value(forKey: "items")) == expected.items)
            try context.save()
            return expected
        }
        // What was saved, read back by a new coordinator.
        let reopened = try openCoordinator(dir, model: try scaleModel())
        try privateContext(reopened).performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            #expect(names(owner.value(forKey: "tags")) == expected.tags)
            #expect(names(owner.value(forKey: "items")) == expected.items)
            #expect(names(try context.existingObject(with: other).value(forKey: "items")).isEmpty)
        }
    }
}

extension ScaleContextReviewTests {
    /// Deleting many members of a to-many one by one (nullify: each had copied the rest of
    /// the inverse and recorded the copy for undo): the right members stay, in order, and
    /// undo brings the deleted ones back.
    @Test func nullifyManyMembers() throws {
        let n = scaleSize
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        let ownerID = try seededStore(coordinator, items: n, tags: n)
        let expected = try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            let allItems = names(owner.value(forKey: "items"))
            let allTags = names(owner.value(forKey: "tags"))
            for tag in try context.fetch(FetchRequest(entityName: "Tag")) where (tag.value(forKey: "name") as? String)?.hasSuffix("1") == true {
                context.delete(tag)
            }
            for item in try context.fetch(FetchRequest(entityName: "Item")) where (item.value(forKey: "name") as? String)?.hasSuffix("2") == true {
                context.delete(item)
            }
            let tags = allTags.filter { !$0.hasSuffix("1") }
            let items = allItems.filter { !$0.hasSuffix("2") }
            #expect(names(owner.value(forKey: "tags")) == tags)
            #expect(names(owner.value(forKey: "items")) == items)
            context.processPendingChanges()
            try context.undo()
            #expect(names(owner.value(forKey: "tags")) == allTags)
            #expect(names(owner.value(forKey: "items")) == allItems)
            try context.redo()
            #expect(names(owner.value(forKey: "items")) == items)
            try context.save()
            return (tags, items)
        }
        let reopened = try openCoordinator(dir, model: try scaleModel())
        try privateContext(reopened).performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            #expect(names(owner.value(forKey: "tags")) == expected.0)
            #expect(names(owner.value(forKey: "items")) == expected.1)
        }
    }

    /// Many new objects deleted before the save, in one undo group and across groups, with
    /// undo and redo bringing some back (each delete had scanned every insert): the save
    /// writes exactly the survivors, and an object deleted and brought back is saved.
    @Test func deleteAndUndoManyInsertedObjects() throws {
        let n = scaleSize
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            // Group 1: n items; every third deleted in the same group (insert then delete is nothing).
            var items: [ManagedObject] = []
            for i in 0..<n {
                let item = try context.insertNewObject(forEntityName: "Item")
                item.setValue("a\(i)", forKey: "name")
                items.append(item)
            }
            for (i, item) in items.enumerated() where i % 3 == 0 { context.delete(item) }
            context.processPendingChanges()
            // Group 2: the rest of the first half deleted.
            for (i, item) in items.enumerated() where i % 3 != 0 && i < n / 2 { context.delete(item) }
            context.processPendingChanges()
            #expect(context.insertedObjects.count == items.indices.filter { $0 % 3 != 0 && $0 >= n / 2 }.count)
            // Undo group 2: those come back (the same instances); redo deletes them again; undo again.
            try context.undo()
            try context.redo()
            try context.undo()
            let survivors = items.indices.filter { $0 % 3 != 0 }.map { "a\($0)" }
            #expect(Set(context.insertedObjects.compactMap { $0.value(forKey: "name") as? String }) == Set(survivors))
            // Group 3: a new item inserted and deleted, then undone: it comes back.
            let late = try context.insertNewObject(forEntityName: "Item")
            late.setValue("late", forKey: "name")
            context.processPendingChanges()
            context.delete(late)
            context.processPendingChanges()
            try context.undo()
            #expect(late.managedObjectContext != nil && late.isInserted)
            let pending = try context.fetch(FetchRequest(entityName: "Item"))
            #expect(Set(pending.compactMap { $0.value(forKey: "name") as? String }) == Set(survivors + ["late"]))
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: try scaleModel())
        try privateContext(reopened).performAndWait { (context: isolated ManagedObjectContext) throws in
            let saved = try context.fetch(FetchRequest(entityName: "Item")).compactMap { $0.value(forKey: "name") as? String }
            #expect(Set(saved) == Set((0..<n).filter { $0 % 3 != 0 }.map { "a\($0)" } + ["late"]))
            #expect(saved.count == (0..<n).filter { $0 % 3 != 0 }.count + 1)
        }
    }
}

extension ScaleContextReviewTests {
    /// An import into a store with a compound uniqueness constraint (no index) where some
    /// new objects clash with stored ones, and two new ones with each other: every clash is
    /// reported with the stored object it hits (each group had scanned the whole entity);
    /// an object moving to another value in the same save doesn't clash; the trump policy
    /// then upserts.
    @Test func compoundUniquenessClashesInALargeImport() throws {
        let n = scaleSize
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        let stored = try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            var people: [String: ManagedObject] = [:]
            for i in 0..<n {
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue("a\(i)", forKey: "first")
                person.setValue("b", forKey: "last")
                people["a\(i)"] = person
            }
            try context.save()
            return people.mapValues(\.objectID)
        }
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            try insertClashBatch(context, n: n, stored: stored)
            var thrown: (any Error)?
            do { try context.save() } catch { thrown = error }
            guard case .constraintConflicts(let conflicts)? = thrown as? ContextError else {
                Issue.record("expected constraint conflicts, got \(String(describing: thrown))")
                return
            }
            let byFirst = Dictionary(conflicts.map { (String(describing: $0.values[0]), $0) }, uniquingKeysWith: { a, _ in a })
            #expect(conflicts.count == 3)
            #expect(conflicts.map(\.databaseObject).compactMap { $0 }.sorted() == [stored["a1"], stored["a\(n - 1)"]].compactMap { $0 }.sorted())
            #expect(conflicts.filter { $0.databaseObject == nil }.map(\.conflictingObjects.count) == [2])
            #expect(byFirst.count == 3)
        }
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = StandardMergePolicy.mergeByPropertyObjectTrump
            try insertClashBatch(context, n: n, stored: stored)
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: try scaleModel())
        try privateContext(reopened).performAndWait { (context: isolated ManagedObjectContext) throws in
            let firsts = try context.fetch(FetchRequest(entityName: "Person")).compactMap { $0.value(forKey: "first") as? String }
            // n stored (a2 renamed "moved", then a2 inserted anew) + n c's + one d.
            #expect(firsts.count == 2 * n + 2)
            #expect(Set(firsts).count == firsts.count)
            #expect(firsts.contains("moved") && firsts.contains("a2") && firsts.contains("d"))
        }
    }
}

// New people c0…, plus clashes with a1, a(n-1) and (renamed away, so no clash) a2;
// and two new "d"s clashing with each other.
private func insertClashBatch(_ context: isolated ManagedObjectContext, n: Int, stored: [String: ManagedObjectID]) throws {
    for i in 0..<n {
        let person = try context.insertNewObject(forEntityName: "Person")
        person.setValue("c\(i)", forKey: "first")
        person.setValue("b", forKey: "last")
    }
    for first in ["a1", "a\(n - 1)", "a2", "d", "d"] {
        let person = try context.insertNewObject(forEntityName: "Person")
        person.setValue(first, forKey: "first")
        person.setValue("b", forKey: "last")
    }
    if let a2 = stored["a2"] { try context.existingObject(with: a2).setValue("moved", forKey: "first") }
}

extension ScaleContextReviewTests {
    /// A context with many unsaved changes merges another context's deletion of many of its
    /// registered objects, some of them changed here (each removal had scanned every unsaved
    /// group): the deleted ones leave the context and its undo groups, the other changes
    /// stay and save.
    @Test func mergeManyDeletesIntoAContextWithUnsavedChanges() throws {
        let n = scaleSize
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        _ = try seededStore(coordinator, items: n, tags: n)
        let watcher = privateContext(coordinator)
        let held = Held()
        try watcher.performAndWait { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            for tag in try context.fetch(FetchRequest(entityName: "Tag")) { tag.setValue("changed", forKey: "name") }
            context.processPendingChanges()
            held.objects = try context.fetch(FetchRequest(entityName: "Item"))
            // Every other item changed too (a second unsaved group).
            for (index, item) in held.objects.enumerated() where index % 2 == 0 { item.setValue("mine", forKey: "name") }
        }
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            for item in try context.fetch(FetchRequest(entityName: "Item")) { context.delete(item) }
            try context.save()
        }
        try watcher.performAndWait { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            #expect(held.objects.allSatisfy { $0.managedObjectContext == nil })
            let updated = context.updatedObjects
            #expect(updated.count == n && updated.allSatisfy { $0.entity.name == "Tag" })
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: try scaleModel())
        try privateContext(reopened).performAndWait { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Item")) == 0)
            let tagNames = try context.fetch(FetchRequest(entityName: "Tag")).compactMap { $0.value(forKey: "name") as? String }
            #expect(tagNames.count == n && tagNames.allSatisfy { $0 == "changed" })
        }
    }
}

extension ScaleContextReviewTests {
    /// An optimistic-locking conflict on an object with a long history (every conflict had
    /// read the object's whole version history): the versions reported are the one the
    /// context saw and the store's newest, and for a deletion in the store, the deleting
    /// transaction's.
    @Test func conflictOnAnObjectWithALongHistory() throws {
        let n = scaleSize
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        let ownerID = try seededStore(coordinator, items: 0, tags: 0)
        let stale = privateContext(coordinator)
        let held = Held()
        let seen = try stale.performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            _ = owner.value(forKey: "name")
            held.objects = [owner]
            return try coordinator.persistentStores[0].log.head
        }
        let writer = privateContext(coordinator)
        let last = try writer.performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            for i in 0..<n {
                owner.setValue("v\(i)", forKey: "name")
                try context.save()
            }
            return try coordinator.persistentStores[0].log.head
        }
        func expectConflict(newVersion: UInt64, deleted: Bool) throws {
            try stale.performAndWait { (context: isolated ManagedObjectContext) throws in
                let owner = held.objects[0]
                owner.setValue("mine", forKey: "name")
                var thrown: (any Error)?
                do { try context.save() } catch { thrown = error }
                guard case .mergeConflicts(let conflicts)? = thrown as? ContextError, let conflict = conflicts.first else {
                    Issue.record("expected a merge conflict, got \(String(describing: thrown))")
                    return
                }
                #expect(conflict.oldVersion == seen)
                #expect(conflict.newVersion == newVersion)
                #expect(conflict.isDeletedInStore == deleted)
                context.rollback()
            }
        }
        try expectConflict(newVersion: last, deleted: false)
        let deletedAt = try writer.performAndWait { (context: isolated ManagedObjectContext) throws in
            context.delete(try context.existingObject(with: ownerID))
            try context.save()
            return try coordinator.persistentStores[0].log.head
        }
        try expectConflict(newVersion: deletedAt, deleted: true)
    }
}

extension ScaleContextReviewTests {
    /// One save of a new owner with a large new to-many (each member a row of the owner's):
    /// the commit reserved room for every object's rows at the first object's count —
    /// objects × members × 40 bytes, which trapped ("failed to allocate 40961280032 bytes")
    /// at STRATA_SCALE_SIZE=16000. Everything saves and reads back.
    @Test func oneSaveOfAnOwnerWithALargeNewToMany() throws {
        let n = scaleSize
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        let ownerID = try seededStore(coordinator, items: n, tags: n)
        let reopened = try openCoordinator(dir, model: try scaleModel())
        try privateContext(reopened).performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            #expect(names(owner.value(forKey: "items")) == (0..<n).map { "i\($0)" })
            #expect(names(owner.value(forKey: "tags")).count == n)
        }
    }
}
