import Foundation
@testable import Strata
import StrataTestSupport
import Testing

/// People with reflexive relationships (each its own inverse): a one-to-one `spouse`, an
/// unordered many-to-many `friends` and an ordered many-to-many `links`.
private func reflexiveModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Person") {
            Attribute("name", .string)
            Relationship("spouse", to: "Person", inverse: "spouse")
            Relationship("friends", to: "Person", inverse: "friends", toMany: true)
            Relationship("links", to: "Person", inverse: "links", toMany: true, ordered: true)
        }
    }
}

/// A tree whose relationships are declared on an abstract `Node`: `parent` (nullify) and
/// `children` (cascade), used by the sub-entities `Folder` and `File`.
private func treeModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Node", abstract: true) {
            Attribute("name", .string)
            Relationship("parent", to: "Node", inverse: "children")
            Relationship("children", to: "Node", inverse: "parent", toMany: true, deleteRule: .cascade)
        }
        Entity("Folder", parent: "Node") {}
        Entity("File", parent: "Node") {}
    }
}

/// Departments cascade to employees; an employee's own department is deny (a delete the
/// department's cascade reaches is allowed: the department goes too) and so are its badges.
private func denyModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Dept") {
            Attribute("name", .string)
            Relationship("employees", to: "Employee", inverse: "department", toMany: true, deleteRule: .cascade)
        }
        Entity("Employee") {
            Attribute("name", .string)
            Relationship("department", to: "Dept", inverse: "employees", deleteRule: .deny)
            Relationship("badges", to: "Badge", inverse: "holder", toMany: true, deleteRule: .deny)
        }
        Entity("Badge") {
            Attribute("name", .string)
            Relationship("holder", to: "Employee", inverse: "badges")
        }
    }
}

/// Crews hold two or three members in order; a member's crew is required.
private func crewModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Crew") {
            Attribute("name", .string)
            Relationship("members", to: "Member", inverse: "crew", toMany: true, ordered: true).count(min: 2, max: 3)
        }
        Entity("Member") {
            Attribute("name", .string)
            Relationship("crew", to: "Crew", inverse: "members").required()
        }
    }
}

private func codes(_ error: any Error) -> [Int] {
    guard case ContextError.validation(let failures) = error else { return [] }
    return failures.map(\.code.rawValue).sorted()
}

private func label(_ object: ManagedObject?) -> String? { object?.value(forKey: "name") as? String }

private func labels(_ object: ManagedObject?, _ key: String) -> Set<String> {
    Set(((object?.value(forKey: key) as? Set<ManagedObject>) ?? []).compactMap(label))
}

private func orderedLabels(_ object: ManagedObject?, _ key: String) -> [String] {
    ((object?.value(forKey: key) as? [ManagedObject]) ?? []).compactMap(label)
}

private func make(_ context: isolated ManagedObjectContext, _ entity: String, _ name: String) throws -> ManagedObject {
    let object = try context.insertNewObject(forEntityName: entity)
    object.setValue(name, forKey: "name")
    return object
}

@Suite("Contexts: relationships, inverses, delete rules and counts (review)", .serialized)
struct RelationshipReviewTests {
    @Test("reflexive ordered to-many: an object linked to itself through the proxy is in its list once (add, insert at, setValue), and saves so")
    func reflexiveOrderedSelfLink() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try reflexiveModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let a = try make(context, "Person", "a")
            let b = try make(context, "Person", "b")
            a.mutableOrderedSetValue(forKey: "links").add(b)
            a.mutableOrderedSetValue(forKey: "links").add(a)
            #expect(orderedLabels(a, "links") == ["b", "a"])
            #expect(orderedLabels(b, "links") == ["a"])
            let c = try make(context, "Person", "c")
            c.mutableOrderedSetValue(forKey: "links").insert(c, at: 0)
            #expect(orderedLabels(c, "links") == ["c"])
            let d = try make(context, "Person", "d")
            try context.save()
            d.mutableOrderedSetValue(forKey: "links").add(d)
            #expect(orderedLabels(d, "links") == ["d"])
            context.processPendingChanges()
            d.mutableOrderedSetValue(forKey: "links").remove(d)
            #expect(orderedLabels(d, "links") == [])
            try context.undo()
            #expect(orderedLabels(d, "links") == ["d"])
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: try reflexiveModel())
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            let people = try context.fetch(FetchRequest(entityName: "Person"))
            let byName = Dictionary(uniqueKeysWithValues: people.map { (label($0) ?? "", $0) })
            #expect(orderedLabels(byName["a"], "links") == ["b", "a"])
            #expect(orderedLabels(byName["b"], "links") == ["a"])
            #expect(orderedLabels(byName["c"], "links") == ["c"])
        }
    }

    @Test("reflexive one-to-one (spouse): both sides follow a set, a steal, a self-partner and a nullifying delete; undo, save, reopen")
    func reflexiveOneToOne() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try reflexiveModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let a = try make(context, "Person", "a")
            let b = try make(context, "Person", "b")
            let c = try make(context, "Person", "c")
            a.setValue(b, forKey: "spouse")
            #expect(label(b.value(forKey: "spouse") as? ManagedObject) == "a")
            try context.save()
            c.setValue(b, forKey: "spouse")
            #expect(a.value(forKey: "spouse") == nil)
            #expect(label(b.value(forKey: "spouse") as? ManagedObject) == "c")
            context.processPendingChanges()
            try context.undo()
            #expect(label(a.value(forKey: "spouse") as? ManagedObject) == "b")
            #expect(label(b.value(forKey: "spouse") as? ManagedObject) == "a")
            #expect(c.value(forKey: "spouse") == nil)
            try context.redo()
            #expect(label(b.value(forKey: "spouse") as? ManagedObject) == "c")
            a.setValue(a, forKey: "spouse")
            #expect(label(a.value(forKey: "spouse") as? ManagedObject) == "a")
            try context.save()
            context.delete(b)
            #expect(c.value(forKey: "spouse") == nil)
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: try reflexiveModel())
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            let people = try context.fetch(FetchRequest(entityName: "Person"))
            let byName = Dictionary(uniqueKeysWithValues: people.map { (label($0) ?? "", $0) })
            #expect(byName.keys.sorted() == ["a", "c"])
            #expect(label(byName["a"]?.value(forKey: "spouse") as? ManagedObject) == "a")
            #expect(byName["c"]?.value(forKey: "spouse") == nil)
        }
    }

    @Test("reflexive many-to-many (friends): add, remove, self-friend, a delete nullifies every friend; undo and reopen agree")
    func reflexiveManyToMany() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try reflexiveModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let a = try make(context, "Person", "a")
            let b = try make(context, "Person", "b")
            let c = try make(context, "Person", "c")
            a.mutableSetValue(forKey: "friends").add(b)
            c.setValue(Set([a, b, c]), forKey: "friends")
            #expect(labels(a, "friends") == ["b", "c"])
            #expect(labels(b, "friends") == ["a", "c"])
            #expect(labels(c, "friends") == ["a", "b", "c"])
            try context.save()
            context.delete(b)
            #expect(labels(a, "friends") == ["c"])
            #expect(labels(c, "friends") == ["a", "c"])
            context.processPendingChanges()
            try context.undo()
            #expect(labels(a, "friends") == ["b", "c"])
            #expect(labels(b, "friends") == ["a", "c"])
            c.mutableSetValue(forKey: "friends").remove(c)
            #expect(labels(c, "friends") == ["a", "b"])
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: try reflexiveModel())
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            let people = try context.fetch(FetchRequest(entityName: "Person"))
            let byName = Dictionary(uniqueKeysWithValues: people.map { (label($0) ?? "", $0) })
            #expect(labels(byName["a"], "friends") == ["b", "c"])
            #expect(labels(byName["b"], "friends") == ["a", "c"])
            #expect(labels(byName["c"], "friends") == ["a", "b"])
        }
    }

    @Test("a tree on an abstract entity: a file moved between folders leaves the old one; deleting the root cascades through folders and files; undo, save, reopen")
    func abstractTree() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try treeModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let root = try make(context, "Folder", "root")
            let sub = try make(context, "Folder", "sub")
            let x = try make(context, "File", "x")
            let y = try make(context, "File", "y")
            root.mutableSetValue(forKey: "children").addObjects(from: [sub, x])
            y.setValue(sub, forKey: "parent")
            #expect(labels(root, "children") == ["sub", "x"])
            #expect(labels(sub, "children") == ["y"])
            try context.save()
            y.setValue(root, forKey: "parent")
            #expect(labels(sub, "children") == [])
            #expect(labels(root, "children") == ["sub", "x", "y"])
            x.mutableSetValue(forKey: "children").add(sub)  // a file may hold nodes too (declared on Node)
            #expect(label(sub.value(forKey: "parent") as? ManagedObject) == "x")
            #expect(labels(root, "children") == ["x", "y"])
            try context.save()
            context.delete(root)
            #expect(Set(context.deletedObjects.compactMap(label)) == ["root", "sub", "x", "y"])
            context.processPendingChanges()
            try context.undo()
            #expect(context.deletedObjects.isEmpty)
            #expect(labels(root, "children") == ["x", "y"])
            #expect(labels(x, "children") == ["sub"])
            #expect(label(sub.value(forKey: "parent") as? ManagedObject) == "x")
            try context.redo()
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Node")) == 0)
        }
        let reopened = try openCoordinator(dir, model: try treeModel())
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Node")) == 0)
        }
    }

    @Test("cascade into an employee whose department is deny passes (the department goes too); its badges' deny fails the save (1600) alone; rollback restores both sides")
    func cascadeIntoDeny() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try denyModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let dept = try make(context, "Dept", "d")
            let e1 = try make(context, "Employee", "e1")
            let e2 = try make(context, "Employee", "e2")
            let badge = try make(context, "Badge", "b")
            dept.setValue(Set([e1, e2]), forKey: "employees")
            badge.setValue(e1, forKey: "holder")
            try context.save()
            context.delete(dept)
            #expect(e1.isDeleted && e2.isDeleted)
            do {
                try context.save()
                Issue.record("the save went through with a badge denying e1's delete")
            } catch {
                guard case ContextError.validation(let failures) = error else { throw error }
                #expect(failures.map(\.code.rawValue) == [1600])
                #expect(failures.map(\.key) == ["badges"])
            }
            context.rollback()
            #expect(!dept.isDeleted && !e1.isDeleted && !e2.isDeleted)
            #expect(labels(dept, "employees") == ["e1", "e2"])
            #expect(label(e1.value(forKey: "department") as? ManagedObject) == "d")
            #expect(label(badge.value(forKey: "holder") as? ManagedObject) == "e1")
            context.delete(badge)
            context.delete(dept)
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: try denyModel())
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.count(for: FetchRequest(entityName: "Employee")) == 0)
            #expect(try context.count(for: FetchRequest(entityName: "Dept")) == 0)
            #expect(try context.count(for: FetchRequest(entityName: "Badge")) == 0)
        }
    }

    @Test("an ordered to-many's min and max counts at save through the ordered proxy (1580, 1590) and a required to-one left empty (1570)")
    func orderedCounts() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try crewModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let crew = try make(context, "Crew", "c")
            let other = try make(context, "Crew", "o")
            let members = try (1...5).map { try make(context, "Member", "m\($0)") }
            crew.mutableOrderedSetValue(forKey: "members").addObjects(from: Array(members[0..<3]))
            other.mutableOrderedSetValue(forKey: "members").addObjects(from: Array(members[3..<5]))
            try context.save()
            // Max: a fourth member moved in from the other crew leaves it one short too.
            crew.mutableOrderedSetValue(forKey: "members").insert(members[3], at: 0)
            #expect(orderedLabels(crew, "members") == ["m4", "m1", "m2", "m3"])
            #expect(orderedLabels(other, "members") == ["m5"])
            do {
                try context.save()
                Issue.record("saved a crew of four and a crew of one")
            } catch { #expect(codes(error) == [1580, 1590]) }
            context.rollback()
            // A member removed at an index has no crew (1570) and leaves the crew short.
            other.mutableOrderedSetValue(forKey: "members").removeObject(at: 1)
            #expect(members[4].value(forKey: "crew") == nil)
            do {
                try context.save()
                Issue.record("saved a crew of one and a member with no crew")
            } catch { #expect(codes(error) == [1570, 1580]) }
            try context.undo()
            #expect(orderedLabels(other, "members") == ["m4", "m5"])
            try context.save()
        }
    }

    @Test("persisted undo after a restart of reflexive changes (friends, spouse, links) puts both sides back, in memory and in the store")
    func reflexivePersistedUndo() async throws {
        let dir = try TemporaryDirectory()
        try await editor(try openCoordinator(dir, model: try reflexiveModel())).perform { (context: isolated ManagedObjectContext) throws in
            let a = try make(context, "Person", "a")
            let b = try make(context, "Person", "b")
            let c = try make(context, "Person", "c")
            a.setValue(b, forKey: "spouse")
            c.setValue(Set([a, b]), forKey: "friends")
            a.setValue([c, b], forKey: "links")
            try context.save()
            b.setValue(c, forKey: "spouse")
            a.mutableSetValue(forKey: "friends").add(b)
            b.mutableOrderedSetValue(forKey: "links").insert(b, at: 0)
            try context.save()
        }
        try await editor(try openCoordinator(dir, model: try reflexiveModel())).perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            try context.save()
        }
        try await editor(try openCoordinator(dir, model: try reflexiveModel())).perform { (context: isolated ManagedObjectContext) throws in
            let people = try context.fetch(FetchRequest(entityName: "Person"))
            let byName = Dictionary(uniqueKeysWithValues: people.map { (label($0) ?? "", $0) })
            #expect(label(byName["a"]?.value(forKey: "spouse") as? ManagedObject) == "b")
            #expect(label(byName["b"]?.value(forKey: "spouse") as? ManagedObject) == "a")
            #expect(byName["c"]?.value(forKey: "spouse") == nil)
            #expect(labels(byName["a"], "friends") == ["c"])
            #expect(labels(byName["b"], "friends") == ["c"])
            #expect(labels(byName["c"], "friends") == ["a", "b"])
            #expect(orderedLabels(byName["a"], "links") == ["c", "b"])
            #expect(orderedLabels(byName["b"], "links") == ["a"])
            #expect(orderedLabels(byName["c"], "links") == ["a"])
        }
    }

    @Test("a to-many without an inverse: cascade deletes its members, undo brings them back in it; a member's delete leaves the owner naming it (refused by the store)")
    func noInverseCascade() async throws {
        let model = try ManagedObjectModel {
            Entity("Box") {
                Attribute("name", .string)
                Relationship("things", to: "Thing", toMany: true, deleteRule: .cascade)
            }
            Entity("Thing") { Attribute("name", .string) }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let box = try make(context, "Box", "box")
            let things = try ["t1", "t2"].map { try make(context, "Thing", $0) }
            box.mutableSetValue(forKey: "things").addObjects(from: things)
            try context.save()
            context.delete(box)
            #expect(things.map(\.isDeleted) == [true, true])
            context.processPendingChanges()
            try context.undo()
            #expect(things.map(\.isDeleted) == [false, false])
            #expect(labels(box, "things") == ["t1", "t2"])
            let hasChanges = context.hasChanges
            #expect(!hasChanges)
            context.delete(things[0])
            #expect(labels(box, "things") == ["t1", "t2"])
            do {
                try context.save()
                Issue.record("saved a box naming a deleted thing")
            } catch {
                #expect((error as? ContextError)?.code == 133021)
            }
            box.mutableSetValue(forKey: "things").remove(things[0])
            try context.save()
            context.delete(box)
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Thing")) == 0)
        }
    }

    /// Spec 0004 §4.1 records both sides of a many-to-many ordered on both sides (since session
    /// 30; before, the second side was derived and its own order wasn't stored), as Core Data
    /// keeps both orders.
    @Test("a many-to-many ordered on both sides: each side keeps its own order after a save and a reopen")
    func bothSidesOrdered() async throws {
        let model = try ManagedObjectModel {
            Entity("Playlist") {
                Attribute("name", .string)
                Relationship("songs", to: "Song", inverse: "playlists", toMany: true, ordered: true)
            }
            Entity("Song") {
                Attribute("name", .string)
                Relationship("playlists", to: "Playlist", inverse: "songs", toMany: true, ordered: true)
            }
        }
        let dir = try TemporaryDirectory()
        try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            let p1 = try make(context, "Playlist", "p1")
            let p2 = try make(context, "Playlist", "p2")
            let s1 = try make(context, "Song", "s1")
            let s2 = try make(context, "Song", "s2")
            p1.setValue([s2, s1], forKey: "songs")
            s1.setValue([p2, p1], forKey: "playlists")
            #expect(orderedLabels(s1, "playlists") == ["p2", "p1"])
            #expect(orderedLabels(p1, "songs") == ["s2", "s1"])
            try context.save()
            s1.mutableOrderedSetValue(forKey: "playlists").moveObject(at: 1, to: 0)
            #expect(orderedLabels(s1, "playlists") == ["p1", "p2"])
            try context.save()
            s1.mutableOrderedSetValue(forKey: "playlists").moveObject(at: 1, to: 0)
            try context.save()
        }
        try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            let songs = try context.fetch(FetchRequest(entityName: "Song"))
            let s1 = try #require(songs.first { label($0) == "s1" })
            let playlists = try context.fetch(FetchRequest(entityName: "Playlist"))
            let p1 = try #require(playlists.first { label($0) == "p1" })
            #expect(orderedLabels(p1, "songs") == ["s2", "s1"])
            #expect(Set(orderedLabels(s1, "playlists")) == ["p1", "p2"])
            // Both sides are recorded (spec 0004 §4.1), so each keeps its own order.
            #expect(orderedLabels(s1, "playlists") == ["p2", "p1"])
        }
    }

    @Test("a cascade reaching an object inserted in an earlier group: undo brings it back in its owner's list, redo removes it again, the save writes neither")
    func cascadeIntoEarlierInsert() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try treeModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let root = try make(context, "Folder", "root")
            let old = try make(context, "File", "old")
            old.setValue(root, forKey: "parent")
            try context.save()
            let new = try make(context, "File", "new")
            root.mutableSetValue(forKey: "children").add(new)
            context.processPendingChanges()
            context.delete(root)
            #expect(new.managedObjectContext == nil)
            #expect(old.isDeleted)
            context.processPendingChanges()
            try context.undo()
            #expect(new.managedObjectContext != nil && new.isInserted)
            #expect(labels(root, "children") == ["new", "old"])
            #expect(label(new.value(forKey: "parent") as? ManagedObject) == "root")
            try context.redo()
            #expect(new.managedObjectContext == nil)
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Node")) == 0)
            try context.undo()
            #expect(labels(root, "children") == ["new", "old"])
            try context.save()
        }
        let reopened = try openCoordinator(dir, model: try treeModel())
        try await privateContext(reopened).perform { (context: isolated ManagedObjectContext) throws in
            let nodes = try context.fetch(FetchRequest(entityName: "Node"))
            let root = try #require(nodes.first { label($0) == "root" })
            #expect(labels(root, "children") == ["new", "old"])
            #expect(nodes.count == 3)
        }
    }

    @Test("persisted undo after a restart of a cascade through an abstract entity's tree (folders and files) gives back every node and both sides of each link")
    func abstractTreePersistedUndo() async throws {
        let dir = try TemporaryDirectory()
        try await editor(try openCoordinator(dir, model: try treeModel())).perform { (context: isolated ManagedObjectContext) throws in
            let root = try make(context, "Folder", "root")
            let sub = try make(context, "Folder", "sub")
            let x = try make(context, "File", "x")
            let y = try make(context, "File", "y")
            sub.setValue(root, forKey: "parent")
            x.setValue(root, forKey: "parent")
            y.setValue(sub, forKey: "parent")
            try context.save()
            context.delete(sub)
            try context.save()
        }
        try await editor(try openCoordinator(dir, model: try treeModel())).perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            try context.save()
        }
        try await editor(try openCoordinator(dir, model: try treeModel())).perform { (context: isolated ManagedObjectContext) throws in
            let nodes = try context.fetch(FetchRequest(entityName: "Node"))
            let byName = Dictionary(uniqueKeysWithValues: nodes.map { (label($0) ?? "", $0) })
            #expect(byName.keys.sorted() == ["root", "sub", "x", "y"])
            #expect(labels(byName["root"], "children") == ["sub", "x"])
            #expect(labels(byName["sub"], "children") == ["y"])
            #expect(byName["sub"]?.entity.name == "Folder")
            #expect(label(byName["y"]?.value(forKey: "parent") as? ManagedObject) == "sub")
        }
    }

    @Test("a one-to-one pair on one entity (mentor ↔ mentee): a steal clears the old pair, an object its own mentor, undo of both")
    func sameEntityOneToOne() async throws {
        let model = try ManagedObjectModel {
            Entity("Person") {
                Attribute("name", .string)
                Relationship("mentor", to: "Person", inverse: "mentee")
                Relationship("mentee", to: "Person", inverse: "mentor")
            }
        }
        let dir = try TemporaryDirectory()
        try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            let a = try make(context, "Person", "a")
            let b = try make(context, "Person", "b")
            let c = try make(context, "Person", "c")
            a.setValue(b, forKey: "mentor")
            try context.save()
            c.setValue(b, forKey: "mentor")
            #expect(a.value(forKey: "mentor") == nil)
            #expect(label(b.value(forKey: "mentee") as? ManagedObject) == "c")
            context.processPendingChanges()
            a.setValue(a, forKey: "mentor")
            #expect(label(a.value(forKey: "mentee") as? ManagedObject) == "a")
            context.processPendingChanges()
            b.setValue(a, forKey: "mentor")
            #expect(a.value(forKey: "mentor") == nil)
            #expect(label(a.value(forKey: "mentee") as? ManagedObject) == "b")
            try context.save()
            try context.undo()
            try context.undo()
            try context.undo()
            #expect(label(a.value(forKey: "mentor") as? ManagedObject) == "b")
            #expect(label(b.value(forKey: "mentee") as? ManagedObject) == "a")
            #expect(b.value(forKey: "mentor") == nil && c.value(forKey: "mentor") == nil && a.value(forKey: "mentee") == nil)
            try context.save()
        }
        try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            let people = try context.fetch(FetchRequest(entityName: "Person"))
            let byName = Dictionary(uniqueKeysWithValues: people.map { (label($0) ?? "", $0) })
            #expect(label(byName["a"]?.value(forKey: "mentor") as? ManagedObject) == "b")
            #expect(label(byName["b"]?.value(forKey: "mentee") as? ManagedObject) == "a")
            #expect(byName["a"]?.value(forKey: "mentee") == nil)
            #expect(byName["c"]?.value(forKey: "mentor") == nil)
        }
    }

    @Test("an object related to a deleted one after its delete lets go of it at the save, as Core Data's end-of-event propagation does: no stale inverse, no refused save; undo restores")
    func relinkedAfterDelete() async throws {
        let model = try ManagedObjectModel {
            Entity("Dept") {
                Attribute("name", .string)
                Relationship("employees", to: "Employee", inverse: "department", toMany: true)
            }
            Entity("Employee") {
                Attribute("name", .string)
                Relationship("department", to: "Dept", inverse: "employees")
                Relationship("friends", to: "Employee", inverse: "friends", toMany: true)
            }
        }
        let dir = try TemporaryDirectory()
        try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            let d1 = try make(context, "Dept", "d1")
            let d2 = try make(context, "Dept", "d2")
            let d3 = try make(context, "Dept", "d3")
            let e = try make(context, "Employee", "e")
            let f = try make(context, "Employee", "f")
            let g = try make(context, "Employee", "g")
            e.setValue(d1, forKey: "department")
            f.setValue(d1, forKey: "department")
            try context.save()
            context.delete(e)
            #expect(labels(d1, "employees") == ["f"])
            // The deleted employee moved (its recorded to-one set), the other deleted one
            // added to a department's derived to-many and to a friend's recorded one.
            e.setValue(d2, forKey: "department")
            context.delete(f)
            d3.mutableSetValue(forKey: "employees").add(f)
            g.mutableSetValue(forKey: "friends").add(e)
            try context.save()
            #expect(labels(d2, "employees") == [])
            #expect(labels(d3, "employees") == [])
            #expect(labels(g, "friends") == [])
            #expect(try context.count(for: FetchRequest(entityName: "Employee")) == 1)
            try context.undo()
            #expect(labels(d1, "employees") == ["e", "f"])
            #expect(labels(d2, "employees") == [])
            #expect(labels(d3, "employees") == [])
            #expect(labels(g, "friends") == [])
            try context.save()
        }
        try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            let depts = try context.fetch(FetchRequest(entityName: "Dept"))
            let byName = Dictionary(uniqueKeysWithValues: depts.map { (label($0) ?? "", $0) })
            #expect(labels(byName["d1"], "employees") == ["e", "f"])
            #expect(labels(byName["d2"], "employees") == [])
            #expect(labels(byName["d3"], "employees") == [])
        }
    }

    @Test("a changed object naming an object the same save deletes through a noAction relationship fails validation (1550, dangling reference), nothing written; cleared, the save goes")
    func danglingAfterNoActionDelete() async throws {
        let model = try ManagedObjectModel {
            Entity("Dept") {
                Attribute("name", .string)
                Relationship("employees", to: "Employee", inverse: "department", toMany: true, deleteRule: .noAction)
            }
            Entity("Employee") {
                Attribute("name", .string)
                Relationship("department", to: "Dept", inverse: "employees")
            }
        }
        let dir = try TemporaryDirectory()
        try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            let d1 = try make(context, "Dept", "d1")
            let e = try make(context, "Employee", "e")
            try context.save()
            context.delete(d1)
            e.setValue(d1, forKey: "department")
            do {
                try context.save()
                Issue.record("saved an employee naming a deleted department")
            } catch {
                guard case ContextError.validation(let found) = error else { throw error }
                #expect(found.map(\.code.rawValue) == [1550])
                #expect(found.first?.message.contains("which this save deletes: a dangling reference") == true, "\(found)")
            }
            e.setValue(nil, forKey: "department")
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Dept")) == 0)
        }
    }

    @Test("a delete and a relink after it in one group, undone and redone before the save: the save still lets go of the deleted object")
    func relinkedAfterDeleteRedo() async throws {
        let model = try ManagedObjectModel {
            Entity("Dept") {
                Attribute("name", .string)
                Relationship("employees", to: "Employee", inverse: "department", toMany: true)
            }
            Entity("Employee") {
                Attribute("name", .string)
                Relationship("department", to: "Dept", inverse: "employees")
            }
        }
        let dir = try TemporaryDirectory()
        try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            let d1 = try make(context, "Dept", "d1")
            let d2 = try make(context, "Dept", "d2")
            let e = try make(context, "Employee", "e")
            e.setValue(d1, forKey: "department")
            try context.save()
            context.delete(e)
            e.setValue(d2, forKey: "department")
            context.processPendingChanges()
            try context.undo()
            #expect(labels(d1, "employees") == ["e"])
            #expect(labels(d2, "employees") == [])
            try context.save()
            try context.redo()
            #expect(e.isDeleted)
            try context.save()
            #expect(labels(d1, "employees") == [])
            #expect(labels(d2, "employees") == [])
        }
    }

    @Test("a transient relationship follows its delete rule too: a deleted tag leaves its owner's transient marks (nullify); undo puts it back")
    func transientRelationshipDelete() async throws {
        let model = try ManagedObjectModel {
            Entity("Owner") {
                Attribute("name", .string)
                Relationship("marks", to: "Tag", inverse: "markedBy", toMany: true).transient()
            }
            Entity("Tag") {
                Attribute("name", .string)
                Relationship("markedBy", to: "Owner", inverse: "marks").transient()
            }
        }
        let dir = try TemporaryDirectory()
        try await privateContext(try openCoordinator(dir, model: model)).perform { (context: isolated ManagedObjectContext) throws in
            let o = try make(context, "Owner", "o")
            let t = try make(context, "Tag", "t")
            let u = try make(context, "Tag", "u")
            try context.save()
            o.mutableSetValue(forKey: "marks").addObjects(from: [t, u])
            context.processPendingChanges()
            context.delete(t)
            #expect(labels(o, "marks") == ["u"])
            context.processPendingChanges()
            try context.undo()
            #expect(labels(o, "marks") == ["t", "u"])
            #expect(label(t.value(forKey: "markedBy") as? ManagedObject) == "o")
            try context.redo()
            try context.save()
            #expect(labels(o, "marks") == ["u"])
            #expect(try context.count(for: FetchRequest(entityName: "Tag")) == 1)
        }
    }
}
