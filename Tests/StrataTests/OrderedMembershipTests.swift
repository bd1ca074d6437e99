import Foundation
@testable import Strata
import StrataTestSupport
import Testing

/// Lists with an ordered to-many (entries) whose inverse is to-one, and tags, an unordered
/// many-to-many.
private func listModel() throws -> ManagedObjectModel {
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

private func names(_ value: Any?) -> [String] {
    switch value {
    case let array as [ManagedObject]: array.map { $0.value(forKey: "name") as? String ?? "?" }
    case let set as Set<ManagedObject>: set.map { $0.value(forKey: "name") as? String ?? "?" }.sorted()
    default: []
    }
}

/// Every read of a proxy agrees with the members it lists: `count`, `contains`,
/// `object(at:)` and `index(of:)` read the member IDs, `objects` the members.
private func expectConsistent(_ proxy: MutableRelationship, ordered: Bool, candidates: [ManagedObject]) {
    let members = proxy.objects
    #expect(proxy.count == members.count)
    for candidate in candidates {
        #expect(proxy.contains(candidate) == members.contains(candidate))
        if ordered {
            #expect(proxy.index(of: candidate) == members.firstIndex(of: candidate))
        } else {
            #expect((proxy.index(of: candidate) != nil) == members.contains(candidate))
        }
    }
    if ordered {
        for index in members.indices { #expect(proxy.object(at: index) === members[index]) }
    }
    #expect(proxy.object(at: members.count) == nil)
    #expect(proxy.object(at: -1) == nil)
}

@Suite struct OrderedMembershipTests {
    /// An ordered to-many filled from its to-one side and through its proxy, in a scrambled
    /// order, with entries moving between lists and added twice: the order is the order
    /// added, each entry once, inverses kept; undo, redo and a reopened store agree.
    @Test func orderedFillKeepsOrderAndMembersOnce() throws {
        let n = 300
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try listModel())
        let (firstID, secondID, expected) = try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let first = try context.insertNewObject(forEntityName: "List")
            first.setValue("first", forKey: "name")
            let second = try context.insertNewObject(forEntityName: "List")
            second.setValue("second", forKey: "name")
            var entries: [ManagedObject] = []
            for i in 0..<n {
                let entry = try context.insertNewObject(forEntityName: "Entry")
                entry.setValue(String(format: "e%03d", i), forKey: "name")
                entries.append(entry)
            }
            try context.save()
            let scrambled = entries.indices.map { entries[($0 * 7) % n] }
            // The first third from the to-one side, into `second`; then all of them through
            // `first`'s proxy (moving those), each twice; then one back to `second` by its
            // to-one, and set again to the list it already names.
            for entry in scrambled.prefix(n / 3) { entry.setValue(second, forKey: "list") }
            #expect(names(second.value(forKey: "entries")) == scrambled.prefix(n / 3).map { names([$0]).first ?? "" })
            let proxy = first.mutableOrderedSetValue(forKey: "entries")
            for entry in scrambled {
                proxy.add(entry)
                proxy.add(entry)
            }
            scrambled[5].setValue(second, forKey: "list")
            scrambled[6].setValue(first, forKey: "list")
            var expected = scrambled.map { names([$0]).first ?? "" }
            expected.remove(at: 5)
            #expect(names(first.value(forKey: "entries")) == expected)
            #expect(names(second.value(forKey: "entries")) == [names([scrambled[5]]).first ?? ""])
            #expect(proxy.count == n - 1)
            expectConsistent(proxy, ordered: true, candidates: Array(entries.prefix(20)) + [scrambled[5]])
            for entry in scrambled { #expect(entry.value(forKey: "list") as? ManagedObject === (entry === scrambled[5] ? second : first)) }
            // Undo the group, redo it.
            context.processPendingChanges()
            try context.undo()
            #expect(names(first.value(forKey: "entries")).isEmpty)
            #expect(proxy.count == 0)
            try context.redo()
            #expect(names(first.value(forKey: "entries")) == expected)
            try context.save()
            return (first.objectID, second.objectID, expected)
        }
        let reopened = try openCoordinator(dir, model: try listModel())
        try privateContext(reopened).performAndWait { (context: isolated ManagedObjectContext) throws in
            let first = try context.existingObject(with: firstID)
            #expect(names(first.value(forKey: "entries")) == expected)
            #expect(names(try context.existingObject(with: secondID).value(forKey: "entries")).count == 1)
        }
    }

    /// Entries that are faults in a new context, already on the list: adding them again
    /// through the proxy (their to-one side fires to say so) changes nothing; a removed one
    /// added back goes to the end.
    @Test func addingExistingMembersThatAreFaults() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try listModel())
        let listID = try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let list = try context.insertNewObject(forEntityName: "List")
            list.setValue("l", forKey: "name")
            var entries: [ManagedObject] = []
            for i in 0..<5 {
                let entry = try context.insertNewObject(forEntityName: "Entry")
                entry.setValue("e\(i)", forKey: "name")
                entries.append(entry)
            }
            list.setValue(entries, forKey: "entries")
            try context.save()
            return list.objectID
        }
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let list = try context.existingObject(with: listID)
            let proxy = list.mutableOrderedSetValue(forKey: "entries")
            let entries = proxy.objects
            #expect(entries.allSatisfy { $0.isFault })
            for entry in entries { proxy.add(entry) }
            let changed = context.hasChanges
            #expect(!changed)
            #expect(names(list.value(forKey: "entries")) == ["e0", "e1", "e2", "e3", "e4"])
            proxy.remove(entries[1])
            proxy.add(entries[1])
            #expect(names(list.value(forKey: "entries")) == ["e0", "e2", "e3", "e4", "e1"])
            #expect(proxy.index(of: entries[1]) == 4)
            #expect(proxy.object(at: 0) === entries[0])
            #expect(entries[1].value(forKey: "list") as? ManagedObject === list)
        }
    }

    /// The proxy's `count`, `contains`, `object(at:)` and `index(of:)` read the member IDs:
    /// they agree with its `objects` for saved members that are faults, unsaved additions
    /// and removals, a deleted member, and an unordered relationship; a key that isn't a
    /// to-many reads as empty.
    @Test func proxyReadsAgreeWithMembers() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try listModel())
        let listID = try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let list = try context.insertNewObject(forEntityName: "List")
            list.setValue("l", forKey: "name")
            for i in 0..<8 {
                let entry = try context.insertNewObject(forEntityName: "Entry")
                entry.setValue("e\(i)", forKey: "name")
                entry.setValue(list, forKey: "list")
                let tag = try context.insertNewObject(forEntityName: "Tag")
                tag.setValue("t\(i)", forKey: "name")
                list.mutableSetValue(forKey: "tags").add(tag)
            }
            try context.save()
            return list.objectID
        }
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let list = try context.existingObject(with: listID)
            let entries = list.mutableOrderedSetValue(forKey: "entries")
            let tags = list.mutableSetValue(forKey: "tags")
            let allEntries = try context.fetch(FetchRequest(entityName: "Entry"))
            let allTags = try context.fetch(FetchRequest(entityName: "Tag"))
            #expect(entries.count == 8)
            #expect(tags.count == 8)
            expectConsistent(entries, ordered: true, candidates: allEntries)
            expectConsistent(tags, ordered: false, candidates: allTags)
            // Unsaved changes: new members, removed members, a deleted one.
            let newEntry = try context.insertNewObject(forEntityName: "Entry")
            newEntry.setValue("new", forKey: "name")
            entries.insert(newEntry, at: 2)
            entries.remove(allEntries[0])
            context.delete(allEntries[3])
            let newTag = try context.insertNewObject(forEntityName: "Tag")
            newTag.setValue("new", forKey: "name")
            tags.add(newTag)
            tags.remove(allTags[1])
            context.delete(allTags[2])
            context.processPendingChanges()
            #expect(entries.count == 7)
            #expect(tags.count == 7)
            #expect(entries.contains(newEntry))
            #expect(!entries.contains(allEntries[0]))
            #expect(!entries.contains(allEntries[3]))
            #expect(entries.index(of: newEntry) == 1)
            #expect(tags.contains(newTag))
            #expect(!tags.contains(allTags[1]))
            #expect(!tags.contains(allTags[2]))
            expectConsistent(entries, ordered: true, candidates: allEntries + [newEntry])
            expectConsistent(tags, ordered: false, candidates: allTags + [newTag])
            // Not a to-many: nothing to count, nothing contained.
            let notToMany = list.mutableSetValue(forKey: "name")
            #expect(notToMany.count == 0)
            #expect(!notToMany.contains(newEntry))
        }
    }

    /// `insert(_:at:)`, `moveObject(at:to:)` and `removeObject(at:)` on the member IDs:
    /// building a list by inserting at the front gives the reverse order; inserting a member
    /// moves it (counted after its removal, as before); inserting another list's entry takes
    /// it from there with its inverse; positions out of range change nothing and fail the
    /// save naming the index; undo and redo restore; the saved list reads back.
    @Test func insertMoveAndRemoveAtPositions() throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try listModel())
        let (listID, expected) = try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let list = try context.insertNewObject(forEntityName: "List")
            list.setValue("l", forKey: "name")
            let other = try context.insertNewObject(forEntityName: "List")
            other.setValue("other", forKey: "name")
            var entries: [ManagedObject] = []
            for i in 0..<6 {
                let entry = try context.insertNewObject(forEntityName: "Entry")
                entry.setValue("e\(i)", forKey: "name")
                entries.append(entry)
            }
            let stranger = try context.insertNewObject(forEntityName: "Entry")
            stranger.setValue("s", forKey: "name")
            stranger.setValue(other, forKey: "list")
            try context.save()

            let proxy = list.mutableOrderedSetValue(forKey: "entries")
            for entry in entries { proxy.insert(entry, at: 0) }
            #expect(names(list.value(forKey: "entries")) == ["e5", "e4", "e3", "e2", "e1", "e0"])
            for entry in entries { #expect(entry.value(forKey: "list") as? ManagedObject === list) }
            proxy.insert(entries[5], at: 6)  // a member to the end: its index counts after removal
            #expect(names(list.value(forKey: "entries")) == ["e4", "e3", "e2", "e1", "e0", "e5"])
            proxy.insert(entries[5], at: 6)  // already there: nothing
            proxy.insert(stranger, at: 2)
            #expect(names(list.value(forKey: "entries")) == ["e4", "e3", "s", "e2", "e1", "e0", "e5"])
            #expect(names(other.value(forKey: "entries")).isEmpty)
            #expect(stranger.value(forKey: "list") as? ManagedObject === list)
            proxy.moveObject(at: 0, to: 6)
            proxy.moveObject(at: 3, to: 3)  // in place: nothing
            #expect(names(list.value(forKey: "entries")) == ["e3", "s", "e2", "e1", "e0", "e5", "e4"])
            proxy.removeObject(at: 1)
            #expect(stranger.value(forKey: "list") == nil)
            let expected = ["e3", "e2", "e1", "e0", "e5", "e4"]
            #expect(names(list.value(forKey: "entries")) == expected)
            context.processPendingChanges()
            try context.undo()
            #expect(names(list.value(forKey: "entries")).isEmpty)
            #expect(names(other.value(forKey: "entries")) == ["s"])
            try context.redo()
            #expect(names(list.value(forKey: "entries")) == expected)
            // Out of range: nothing changes, and the save says which index.
            proxy.insert(stranger, at: 7)
            proxy.moveObject(at: 0, to: 6)
            proxy.removeObject(at: -1)
            #expect(names(list.value(forKey: "entries")) == expected)
            #expect(names(other.value(forKey: "entries")).isEmpty)
            var refused = ""
            do { try context.save() } catch { refused = "\(error)" }
            #expect(refused.contains("insert(_:at:)") && refused.contains("index 7"))
            #expect(refused.contains("moveObject(at:to:)") && refused.contains("index 6"))
            #expect(refused.contains("removeObject(at:)") && refused.contains("index -1"))
            try context.save()
            return (list.objectID, expected)
        }
        let reopened = try openCoordinator(dir, model: try listModel())
        try privateContext(reopened).performAndWait { (context: isolated ManagedObjectContext) throws in
            #expect(names(try context.existingObject(with: listID).value(forKey: "entries")) == expected)
        }
    }
}
