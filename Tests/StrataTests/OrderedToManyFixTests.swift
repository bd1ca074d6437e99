import Foundation
@testable import Strata
import StrataTestSupport
import Testing

/// Session 29: an ordered to-many pushed from a child into its parent and merged from another
/// writer keeps the other side's changes and order (spec 0006 §16.1, §18.3), and the nested
/// contexts' version table stays bounded.
@Suite("Session 29: ordered to-manys through nested contexts and merges", .serialized)
struct OrderedToManyFixTests {
    /// Lists with an ordered to-many (entries, inverse to-one Entry.list).
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("List") {
                Attribute("name", .string)
                Relationship("entries", to: "Entry", inverse: "list", toMany: true, ordered: true)
            }
            Entity("Entry") {
                Attribute("name", .string)
                Relationship("list", to: "List", inverse: "entries")
            }
        }
    }

    /// A list "L" holding `listed` in that order, and entries `loose` in no list; returns the
    /// list's ID and every entry's ID by name.
    static func store(_ coordinator: PersistentStoreCoordinator, listed: [String], loose: [String] = [])
        async throws -> (ManagedObjectID, [String: ManagedObjectID])
    {
        try await privateContext(coordinator, name: "setup").perform { (context: isolated ManagedObjectContext) throws in
            let list = try context.insertNewObject(forEntityName: "List")
            list.setValue("L", forKey: "name")
            var entries: [String: ManagedObject] = [:]
            for name in listed + loose {
                let entry = try context.insertNewObject(forEntityName: "Entry")
                entry.setValue(name, forKey: "name")
                entries[name] = entry
            }
            let members = list.mutableOrderedSetValue(forKey: "entries")
            for name in listed { if let entry = entries[name] { members.add(entry) } }
            try context.save()
            return (list.objectID, entries.mapValues(\.objectID))
        }
    }

    static func names(_ list: ManagedObject) -> [String] {
        list.mutableOrderedSetValue(forKey: "entries").objects.map { $0.value(forKey: "name") as? String ?? "?" }
    }

    /// The list's entries as a fresh context reads them from the store, and the list each
    /// entry named says it is in.
    static func stored(_ coordinator: PersistentStoreCoordinator, _ listID: ManagedObjectID, _ ids: [String: ManagedObjectID])
        async throws -> (entries: [String], inList: [String])
    {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let list = try context.existingObject(with: listID)
            var inList: [String] = []
            for (name, id) in ids.sorted(by: { $0.key < $1.key }) {
                if (try context.existingObject(with: id).value(forKey: "list") as? ManagedObject)?.objectID == listID { inList.append(name) }
            }
            return (names(list), inList)
        }
    }

    static func entry(_ context: isolated ManagedObjectContext, _ ids: [String: ManagedObjectID], _ name: String) throws -> ManagedObject {
        try context.existingObject(with: try #require(ids[name]))
    }

    // MARK: - 1. A child's push

    @Test("a child's removal and append in an ordered list, pushed: the parent's unsaved insertion the child didn't see stays in its place")
    func childPushKeepsParentsInsertion() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        let (listID, ids) = try await Self.store(coordinator, listed: ["e1", "e2", "e3"], loose: ["p", "x"])
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let list = try context.existingObject(with: listID)
            #expect(Self.names(list) == ["e1", "e2", "e3"])
            context.userInfo["list"] = list
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let list = try context.existingObject(with: listID)
            list.mutableOrderedSetValue(forKey: "entries").insert(try Self.entry(context, ids, "p"), at: 1)
            #expect(Self.names(list) == ["e1", "p", "e2", "e3"])
            context.userInfo["list"] = list
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let list = try #require(context.userInfo["list"] as? ManagedObject)
            let entries = list.mutableOrderedSetValue(forKey: "entries")
            entries.removeObject(at: 2)
            entries.add(try Self.entry(context, ids, "x"))
            #expect(Self.names(list) == ["e1", "e2", "x"])
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let list = try #require(context.userInfo["list"] as? ManagedObject)
            #expect(Self.names(list) == ["e1", "p", "e2", "x"], "the parent's insertion of p stays where it put it")
            #expect((try Self.entry(context, ids, "p").value(forKey: "list") as? ManagedObject) === list)
            try context.undo()
            #expect(Self.names(list) == ["e1", "p", "e2", "e3"], "undo of the push takes back the child's change only")
            try context.redo()
            try context.save()
        }
        let stored = try await Self.stored(coordinator, listID, ids)
        #expect(stored.entries == ["e1", "p", "e2", "x"])
        #expect(stored.inList == ["e1", "e2", "p", "x"])
    }

    @Test("a child's reorder, pushed: only the member it moved moves; the parent's unsaved removal and append stay")
    func childPushedReorderMovesOnlyWhatItMoved() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        let (listID, ids) = try await Self.store(coordinator, listed: ["e1", "e2", "e3", "e4"], loose: ["p"])
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let list = try context.existingObject(with: listID)
            #expect(Self.names(list) == ["e1", "e2", "e3", "e4"])
            context.userInfo["list"] = list
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let list = try context.existingObject(with: listID)
            let entries = list.mutableOrderedSetValue(forKey: "entries")
            entries.removeObject(at: 3)
            entries.add(try Self.entry(context, ids, "p"))
            #expect(Self.names(list) == ["e1", "e2", "e3", "p"])
            context.userInfo["list"] = list
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let list = try #require(context.userInfo["list"] as? ManagedObject)
            list.mutableOrderedSetValue(forKey: "entries").moveObject(at: 2, to: 0)
            #expect(Self.names(list) == ["e3", "e1", "e2", "e4"])
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let list = try #require(context.userInfo["list"] as? ManagedObject)
            #expect(Self.names(list) == ["e3", "e1", "e2", "p"], "e4 stays removed, p stays last")
            #expect(try Self.entry(context, ids, "e4").value(forKey: "list") == nil)
            try context.save()
        }
        let stored = try await Self.stored(coordinator, listID, ids)
        #expect(stored.entries == ["e3", "e1", "e2", "p"])
        #expect(stored.inList == ["e1", "e2", "e3", "p"])
    }

    @Test("a grandchild's insertion between two members, pushed twice: it lands before the member that follows it, the parents' own changes kept")
    func grandchildInsertionThroughTwoLevels() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        let (listID, ids) = try await Self.store(coordinator, listed: ["e1", "e2", "e3"], loose: ["m", "r", "x"])
        let root = privateContext(coordinator, name: "root")
        let middle = childContext(root, name: "middle")
        let leaf = childContext(middle, name: "leaf")
        try await leaf.perform { (context: isolated ManagedObjectContext) throws in
            context.userInfo["list"] = try context.existingObject(with: listID)
        }
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            let list = try context.existingObject(with: listID)
            list.mutableOrderedSetValue(forKey: "entries").insert(try Self.entry(context, ids, "r"), at: 0)
            context.userInfo["list"] = list
        }
        try await middle.perform { (context: isolated ManagedObjectContext) throws in
            let list = try context.existingObject(with: listID)
            list.mutableOrderedSetValue(forKey: "entries").add(try Self.entry(context, ids, "m"))
            context.userInfo["list"] = list
        }
        try await leaf.perform { (context: isolated ManagedObjectContext) throws in
            let list = try #require(context.userInfo["list"] as? ManagedObject)
            list.mutableOrderedSetValue(forKey: "entries").insert(try Self.entry(context, ids, "x"), at: 2)
            #expect(Self.names(list) == ["e1", "e2", "x", "e3"])
            try context.save()
        }
        try await middle.perform { (context: isolated ManagedObjectContext) throws in
            let list = try #require(context.userInfo["list"] as? ManagedObject)
            #expect(Self.names(list) == ["r", "e1", "e2", "x", "e3", "m"])
            try context.save()
        }
        try await root.perform { (context: isolated ManagedObjectContext) throws in
            let list = try #require(context.userInfo["list"] as? ManagedObject)
            #expect(Self.names(list) == ["r", "e1", "e2", "x", "e3", "m"])
            try context.save()
        }
        #expect(try await Self.stored(coordinator, listID, ids).entries == ["r", "e1", "e2", "x", "e3", "m"])
    }

    @Test("a child's undo of a pushed append, the parent having inserted a member of its own: no conflict, the push takes back the append only; a member the parent took out since is a conflict")
    func childUndoOfPushedChangeOverParentsOwn() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        let (listID, ids) = try await Self.store(coordinator, listed: ["e1", "e2", "e3"], loose: ["p", "x", "y"])
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.userInfo["list"] = try context.existingObject(with: listID)
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let list = try context.existingObject(with: listID)
            list.mutableOrderedSetValue(forKey: "entries").insert(try Self.entry(context, ids, "p"), at: 1)
            context.userInfo["list"] = list
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let list = try #require(context.userInfo["list"] as? ManagedObject)
            list.mutableOrderedSetValue(forKey: "entries").add(try Self.entry(context, ids, "x"))
            try context.save()
            try context.undo()
            #expect(Self.names(list) == ["e1", "e2", "e3"])
            try context.save()
            list.mutableOrderedSetValue(forKey: "entries").add(try Self.entry(context, ids, "y"))
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let list = try #require(context.userInfo["list"] as? ManagedObject)
            #expect(Self.names(list) == ["e1", "p", "e2", "e3", "y"])
            list.mutableOrderedSetValue(forKey: "entries").remove(try Self.entry(context, ids, "y"))
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let list = try #require(context.userInfo["list"] as? ManagedObject)
            do {
                try context.undo()
                Issue.record("undoing the append of y, which the parent took out since, was not refused")
            } catch ContextError.undoConflict(_, let property, _, _) {
                #expect(property == "entries")
            }
            #expect(Self.names(list) == ["e1", "e2", "e3", "y"], "a refused undo changes nothing")
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        #expect(try await Self.stored(coordinator, listID, ids).entries == ["e1", "p", "e2", "e3"])
    }

    // MARK: - 2. A merge of another writer's change

    /// The other writer's change to the list, saved through its own coordinator.
    static func otherWriter(_ dir: TemporaryDirectory, _ listID: ManagedObjectID, _ ids: [String: ManagedObjectID],
        _ change: @escaping @Sendable (isolated ManagedObjectContext, ManagedObject) throws -> Void) async throws
    {
        let other = try openCoordinator(dir, model: try Self.model())
        try await privateContext(other, name: "other").perform { (context: isolated ManagedObjectContext) throws in
            try change(context, try context.existingObject(with: listID))
            try context.save()
        }
    }

    @Test("another writer's reorder, merged into a context with no unsaved change of the list (also one changed and changed back): the store's order exactly")
    func mergedReorderWithoutOwnChange() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        let (listID, ids) = try await Self.store(coordinator, listed: ["e1", "e2", "e3"])
        let context = privateContext(coordinator, name: "mine")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let list = try context.existingObject(with: listID)
            list.setValue("renamed", forKey: "name")  // a change of another property
            let entries = list.mutableOrderedSetValue(forKey: "entries")
            entries.moveObject(at: 0, to: 2)
            entries.moveObject(at: 2, to: 0)  // changed back
            #expect(Self.names(list) == ["e1", "e2", "e3"])
            context.userInfo["list"] = list
        }
        try await Self.otherWriter(dir, listID, ids) { _, list in list.mutableOrderedSetValue(forKey: "entries").moveObject(at: 2, to: 0) }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            let list = try #require(context.userInfo["list"] as? ManagedObject)
            #expect(Self.names(list) == ["e3", "e1", "e2"], "the other writer's order")
            try context.save()
        }
        #expect(try await Self.stored(coordinator, listID, ids).entries == ["e3", "e1", "e2"])
    }

    @Test("another writer's reorder merged into a context that appended a member: the store's order, the appended member last")
    func mergedReorderUnderOwnAppend() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        let (listID, ids) = try await Self.store(coordinator, listed: ["e1", "e2", "e3"], loose: ["x"])
        let context = privateContext(coordinator, name: "mine")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let list = try context.existingObject(with: listID)
            list.mutableOrderedSetValue(forKey: "entries").add(try Self.entry(context, ids, "x"))
            context.userInfo["list"] = list
        }
        try await Self.otherWriter(dir, listID, ids) { _, list in list.mutableOrderedSetValue(forKey: "entries").moveObject(at: 2, to: 0) }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            let list = try #require(context.userInfo["list"] as? ManagedObject)
            #expect(Self.names(list) == ["e3", "e1", "e2", "x"])
            try context.undo()
            #expect(Self.names(list) == ["e3", "e1", "e2"], "undo returns to the store's list")
            try context.redo()
            #expect(Self.names(list) == ["e3", "e1", "e2", "x"])
            try context.save()
        }
        #expect(try await Self.stored(coordinator, listID, ids).entries == ["e3", "e1", "e2", "x"])
    }

    @Test("a context's own move merged with another writer's insertion at the front and removal: both apply, undo and redo agree")
    func mergedInsertionUnderOwnMove() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        let (listID, ids) = try await Self.store(coordinator, listed: ["e1", "e2", "e3"], loose: ["y"])
        let context = privateContext(coordinator, name: "mine")
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let list = try context.existingObject(with: listID)
            list.mutableOrderedSetValue(forKey: "entries").moveObject(at: 2, to: 0)
            #expect(Self.names(list) == ["e3", "e1", "e2"])
            context.userInfo["list"] = list
        }
        let y = try #require(ids["y"])
        try await Self.otherWriter(dir, listID, ids) { context, list in
            let entries = list.mutableOrderedSetValue(forKey: "entries")
            entries.removeObject(at: 1)
            entries.insert(try context.existingObject(with: y), at: 0)
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            let list = try #require(context.userInfo["list"] as? ManagedObject)
            #expect(Self.names(list) == ["y", "e3", "e1"], "e3 moved before e1, y first, e2 gone")
            try context.undo()
            #expect(Self.names(list) == ["y", "e1", "e3"], "undo returns to the store's order")
            try context.redo()
            #expect(Self.names(list) == ["y", "e3", "e1"])
            try context.save()
        }
        #expect(try await Self.stored(coordinator, listID, ids).entries == ["y", "e3", "e1"])
    }

    @Test("the rebase rule: removals, insertions before the following member, moves as the fewest members moved")
    func rebaseRule() {
        #expect(OrderedRebase.rebase(base: [1, 2, 3], ours: [1, 2, 3], onto: [3, 1]) == [3, 1])
        #expect(OrderedRebase.rebase(base: [1, 2, 3], ours: [2, 1, 3], onto: [1, 2, 3]) == [2, 1, 3])
        #expect(OrderedRebase.rebase(base: [1, 2, 3], ours: [1, 2, 3, 9], onto: [1, 2, 3, 8]) == [1, 2, 3, 8, 9])
        #expect(OrderedRebase.rebase(base: [1, 2, 3], ours: [9, 1, 2, 3], onto: [8, 1, 2, 3]) == [8, 9, 1, 2, 3])
        #expect(OrderedRebase.rebase(base: [1, 2, 3, 4], ours: [2, 1, 3, 4], onto: [1, 2, 4, 3]) == [2, 1, 4, 3], "both reorders kept")
        #expect(OrderedRebase.rebase(base: [1, 2, 3], ours: [1, 9, 2], onto: [1, 3]) == [1, 9], "2 removed there stays out; 9 goes before 2's place: the end")
        #expect(OrderedRebase.rebase(base: [1, 2], ours: [1, 2, 5], onto: [5, 1, 2]) == [5, 1, 2], "both inserted 5: theirs' place")
    }

    @Test("the rebase rule on random lists: what ours removed is out, what it inserted is in, theirs' other members stay, each once, in ours' order where theirs left them alone")
    func rebaseRuleRandomized() {
        let rounds = Int(ProcessInfo.processInfo.environment["STRATA_ORDERED_REBASE_ROUNDS"] ?? "") ?? 300
        var generator = SystemRandomNumberGenerator()
        func edit(_ list: [Int], fresh: inout Int) -> [Int] {
            var list = list
            for _ in 0..<Int.random(in: 0...4, using: &generator) {
                switch Int.random(in: 0..<3, using: &generator) {
                case 0 where !list.isEmpty: list.remove(at: Int.random(in: 0..<list.count, using: &generator))
                case 1:
                    fresh += 1
                    list.insert(fresh, at: Int.random(in: 0...list.count, using: &generator))
                default:
                    guard list.count > 1 else { continue }
                    let member = list.remove(at: Int.random(in: 0..<list.count, using: &generator))
                    list.insert(member, at: Int.random(in: 0...list.count, using: &generator))
                }
            }
            return list
        }
        for _ in 0..<rounds {
            let base = Array(0..<Int.random(in: 0...8, using: &generator))
            var fresh = 100
            let ours = edit(base, fresh: &fresh)
            fresh = 200
            let theirs = edit(base, fresh: &fresh)
            let result = OrderedRebase.rebase(base: base, ours: ours, onto: theirs)
            let context = "base \(base) ours \(ours) theirs \(theirs) → \(result)"
            #expect(Set(result).count == result.count, "each once: \(context)")
            let removedByOurs = Set(base).subtracting(ours), removedByTheirs = Set(base).subtracting(theirs)
            let insertedByOurs = Set(ours).subtracting(base), addedByTheirs = Set(theirs).subtracting(base)
            let expected = Set(base).subtracting(removedByOurs).subtracting(removedByTheirs).union(insertedByOurs).union(addedByTheirs)
            #expect(Set(result) == expected, "\(context)")
            #expect(OrderedRebase.rebase(base: base, ours: base, onto: theirs) == theirs)
            #expect(OrderedRebase.rebase(base: base, ours: ours, onto: base) == ours)
            // Members only ours touched (theirs kept base's order and added nothing): ours' order.
            if theirs.filter({ !removedByTheirs.contains($0) }) == base.filter({ !removedByTheirs.contains($0) }) && addedByTheirs.isEmpty {
                #expect(result == ours.filter { !removedByTheirs.contains($0) }, "\(context)")
            }
        }
    }

    // MARK: - 4. The version table

    @Test("a parent with a live child keeps version moves only for objects a child read: twenty saves leave at most one")
    func versionTableStaysBounded() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.model())
        let (listID, ids) = try await Self.store(coordinator, listed: ["e1", "e2"], loose: ["a", "b", "c"])
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            context.userInfo["list"] = try context.existingObject(with: listID)
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let list = try context.existingObject(with: listID)
            for round in 0..<20 {
                for name in ["a", "b", "c"] { try Self.entry(context, ids, name).setValue("\(name)\(round)", forKey: "name") }
                list.setValue("L\(round)", forKey: "name")
                try context.save()
            }
            let moves = context.core.versionMoves.values.reduce(0) { $0 + $1.count }
            #expect(moves <= 1, "moves kept: \(context.core.versionMoves)")
            #expect(context.core.childReadVersions.count <= 1)
        }
        // The child's read still counts as read at the parent's last save: no conflict.
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let list = try #require(context.userInfo["list"] as? ManagedObject)
            list.mutableOrderedSetValue(forKey: "entries").moveObject(at: 1, to: 0)
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        #expect(try await Self.stored(coordinator, listID, ids).entries == ["e2", "e1"])
    }
}
