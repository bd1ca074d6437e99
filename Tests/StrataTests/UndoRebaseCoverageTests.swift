import Foundation
import Strata
import StrataTestSupport
import Testing

/// Undo after a merge, the cases the rebase of spec 0006 §16.1 and the conflict check of §12
/// didn't cover: one-to-one relationships rebased at a merge, to-many entries of the pending
/// groups after a merge policy's adoption (§17.1), and the check of a saved group under a
/// pending undo a merge rebased to another writer's value — for to-many members, for undo of
/// an insert and in a child context (§18).
@Suite("Undo after a merge: one-to-one, to-many adoption, conflict checks", .serialized)
struct UndoRebaseCoverageTests {
    // MARK: - One-to-one

    /// Person {name, passport}; Passport {number, person}: a one-to-one (Passport.person is
    /// the recorded side, Person.passport the derived one).
    static func passportModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Person") {
                Attribute("name", .string)
                Relationship("passport", to: "Passport", inverse: "person")
            }
            Entity("Passport") {
                Attribute("number", .string)
                Relationship("person", to: "Person", inverse: "passport")
            }
        }
    }

    /// Saved: persons A and B, passports P1 (A's), P2 (B's) and P3 (no one's).
    struct Passports: Sendable {
        let coordinator: PersistentStoreCoordinator
        let ids: [String: ManagedObjectID]
        var persons: [ManagedObjectID] { ["A", "B"].compactMap { ids[$0] } }
        var passports: [ManagedObjectID] { ["P1", "P2", "P3"].compactMap { ids[$0] } }
        func object(_ name: String, _ context: isolated ManagedObjectContext) throws -> ManagedObject {
            try context.existingObject(with: try #require(ids[name]))
        }
    }

    static func passports(_ dir: TemporaryDirectory) async throws -> Passports {
        let coordinator = try openCoordinator(dir, model: try passportModel())
        let ids = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [String: ManagedObjectID] in
            var objects: [String: ManagedObject] = [:]
            for name in ["A", "B"] {
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue(name, forKey: "name")
                objects[name] = person
            }
            for number in ["P1", "P2", "P3"] {
                let passport = try context.insertNewObject(forEntityName: "Passport")
                passport.setValue(number, forKey: "number")
                objects[number] = passport
            }
            objects["P1"]?.setValue(objects["A"], forKey: "person")
            objects["P2"]?.setValue(objects["B"], forKey: "person")
            try context.save()
            return objects.mapValues(\.objectID)
        }
        return Passports(coordinator: coordinator, ids: ids)
    }

    /// "A:P1 B:P2" — each person's passport as `context` sees it — after checking that both
    /// sides of every pair agree.
    static func pairs(_ context: isolated ManagedObjectContext, _ store: Passports, _ step: String) throws -> String {
        var text: [String] = []
        for id in store.persons {
            let person = try context.existingObject(with: id)
            let passport = person.value(forKey: "passport") as? ManagedObject
            if let passport {
                #expect((passport.value(forKey: "person") as? ManagedObject)?.objectID == id, "\(step): \(person.value(forKey: "name") ?? "?")'s passport names another person")
            }
            text.append("\(person.value(forKey: "name") as? String ?? "?"):\(passport?.value(forKey: "number") as? String ?? "-")")
        }
        for id in store.passports {
            let passport = try context.existingObject(with: id)
            if let person = passport.value(forKey: "person") as? ManagedObject {
                #expect((person.value(forKey: "passport") as? ManagedObject)?.objectID == id, "\(step): \(passport.value(forKey: "number") ?? "?")'s person names another passport")
            }
        }
        return text.joined(separator: " ")
    }

    /// The pairs a fresh coordinator on the same store reads.
    static func reopenedPairs(_ dir: TemporaryDirectory, _ store: Passports) async throws -> String {
        let coordinator = try openCoordinator(dir, model: try passportModel())
        return try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try pairs(context, store, "reopened")
        }
    }

    @Test("one-to-one set here (derived side) and by another context, merged: undo returns to the other writer's pair, redo to the context's; both sides agree; save and reopen")
    func oneToOneChangedElsewhereThenUndo() async throws {
        for fromRecordedSide in [false, true] {
            let dir = try TemporaryDirectory()
            let store = try await Self.passports(dir)
            let other = privateContext(store.coordinator, name: "other")
            try await privateContext(store.coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
                if fromRecordedSide {
                    try store.object("P3", context).setValue(try store.object("A", context), forKey: "person")
                } else {
                    try store.object("A", context).setValue(try store.object("P3", context), forKey: "passport")
                }
                context.processPendingChanges()
                #expect(try Self.pairs(context, store, "local") == "A:P3 B:P2")
                let save = try UndoRelationshipRebaseTests.save(other) { other in
                    // A takes B's passport.
                    let a = try other.existingObject(with: try #require(store.ids["A"]))
                    a.setValue(try other.existingObject(with: try #require(store.ids["P2"])), forKey: "passport")
                }
                context.mergeChanges(fromContextDidSave: save)
                #expect(try Self.pairs(context, store, "merged") == "A:P3 B:-", "the context's change wins; P2 no longer names A")
                try context.undo()
                // Before: A back on P1 (read before the merge) while P2 still named A.
                #expect(try Self.pairs(context, store, "undone") == "A:P2 B:-")
                #expect(context.hasChanges == false, "undone: the context holds what the store holds")
                try context.redo()
                #expect(try Self.pairs(context, store, "redone") == "A:P3 B:-")
                try context.undo()
                try context.redo()
                try context.save()
                #expect(try Self.pairs(context, store, "saved") == "A:P3 B:-")
            }
            #expect(try await Self.reopenedPairs(dir, store) == "A:P3 B:-")
        }
    }

    @Test("one-to-one: another context gives the passport this context took to someone else; merged, both sides agree; undo returns to the store's pairs")
    func oneToOneDestinationTakenElsewhere() async throws {
        let dir = try TemporaryDirectory()
        let store = try await Self.passports(dir)
        let other = privateContext(store.coordinator, name: "other")
        try await privateContext(store.coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            try store.object("A", context).setValue(try store.object("P3", context), forKey: "passport")
            context.processPendingChanges()
            let save = try UndoRelationshipRebaseTests.save(other) { other in
                let b = try other.existingObject(with: try #require(store.ids["B"]))
                b.setValue(try other.existingObject(with: try #require(store.ids["P3"])), forKey: "passport")
            }
            context.mergeChanges(fromContextDidSave: save)
            // A keeps P3 (the context's change wins), so B, whose stored passport P3 is, has none.
            #expect(try Self.pairs(context, store, "merged") == "A:P3 B:-")
            try context.undo()
            #expect(try Self.pairs(context, store, "undone") == "A:P1 B:P3")
            #expect(context.hasChanges == false)
            try context.redo()
            #expect(try Self.pairs(context, store, "redone") == "A:P3 B:-")
            try context.undo()
            try context.save()
        }
        #expect(try await Self.reopenedPairs(dir, store) == "A:P1 B:P3")
    }

    // MARK: - To-many entries after a merge policy's adoption

    /// A playlist with songs s1, s2 (in that order); s3, s4, s5 on no playlist. IDs: the
    /// playlist first, then s1…s5.
    static func playlist(_ coordinator: PersistentStoreCoordinator) async throws -> [ManagedObjectID] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [ManagedObjectID] in
            let playlist = try context.insertNewObject(forEntityName: "Playlist")
            playlist.setValue("mix", forKey: "name")
            var songs: [ManagedObject] = []
            for title in ["s1", "s2", "s3", "s4", "s5"] {
                let song = try context.insertNewObject(forEntityName: "Song")
                song.setValue(title, forKey: "title")
                songs.append(song)
            }
            playlist.setValue(Array(songs.prefix(2)), forKey: "songs")
            try context.save()
            return [playlist.objectID] + songs.map(\.objectID)
        }
    }

    /// The playlist's titles (checking every song names it exactly when listed).
    static func songs(_ context: isolated ManagedObjectContext, _ ids: [ManagedObjectID], _ step: String) throws -> [String] {
        let playlist = try context.existingObject(with: ids[0])
        let listed = UndoRelationshipRebaseTests.titles(playlist)
        for id in ids.dropFirst() {
            let song = try context.existingObject(with: id)
            let names = (song.value(forKey: "playlist") as? ManagedObject)?.objectID == ids[0]
            let title = song.value(forKey: "title") as? String ?? "?"
            #expect(names == listed.contains(title), "\(step): \(title) names the playlist \(names) but listed \(listed.contains(title))")
        }
        return listed
    }

    static func storedSongs(_ dir: TemporaryDirectory, _ ids: [ManagedObjectID]) async throws -> [String] {
        let coordinator = try openCoordinator(dir, model: try UndoRelationshipRebaseTests.playlistModel())
        return try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try songs(context, ids, "reopened")
        }
    }

    @Test("a to-many member added here and by another context, the save's policy adopting the store's members: the group's far side goes too; undo and redo leave both sides agreeing")
    func sameMemberAdoptedAtSave() async throws {
        for policy in [StandardMergePolicy.mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump] {
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: try UndoRelationshipRebaseTests.playlistModel())
            let ids = try await Self.playlist(coordinator)
            let other = privateContext(coordinator, name: "other")
            try await privateContext(coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
                context.mergePolicy = policy
                let playlist = try context.existingObject(with: ids[0])
                playlist.mutableOrderedSetValue(forKey: "songs").add(try context.existingObject(with: ids[3]))
                context.processPendingChanges()
                _ = try UndoRelationshipRebaseTests.save(other) { other in
                    let songs = try other.existingObject(with: ids[0]).mutableOrderedSetValue(forKey: "songs")
                    songs.add(try other.existingObject(with: ids[3]))
                    songs.add(try other.existingObject(with: ids[5]))
                }
                // Not merged: the save meets the other writer's version and the policy adopts
                // its members, which hold the context's s3 too.
                try context.save()
                #expect(try Self.songs(context, ids, "saved") == ["s1", "s2", "s3", "s5"])
                // Before: the group kept s3's side (no playlist → the playlist), and undo took
                // s3 off the playlist in s3 only.
                if context.canUndo { try context.undo() }
                #expect(try Self.songs(context, ids, "undone") == ["s1", "s2", "s3", "s5"])
                if context.canRedo { try context.redo() }
                #expect(try Self.songs(context, ids, "redone") == ["s1", "s2", "s3", "s5"])
                #expect(context.hasChanges == false)
                try context.save()
            }
            #expect(try await Self.storedSongs(dir, ids) == ["s1", "s2", "s3", "s5"], "\(policy)")
        }
    }

    @Test("an unsaved to-many change, another writer's member saved meanwhile, the save's policy adopts it: undo of the saved group keeps the other writer's member")
    func unsavedToManyAdoptedAtSaveThenUndo() async throws {
        for policy in [StandardMergePolicy.mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump] {
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: try UndoRelationshipRebaseTests.playlistModel())
            let ids = try await Self.playlist(coordinator)
            let other = privateContext(coordinator, name: "other")
            try await privateContext(coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
                context.mergePolicy = policy
                let playlist = try context.existingObject(with: ids[0])
                playlist.mutableOrderedSetValue(forKey: "songs").add(try context.existingObject(with: ids[3]))
                context.processPendingChanges()
                playlist.mutableOrderedSetValue(forKey: "songs").remove(try context.existingObject(with: ids[1]))
                _ = try UndoRelationshipRebaseTests.save(other) { other in
                    try other.existingObject(with: ids[0]).mutableOrderedSetValue(forKey: "songs").insert(try other.existingObject(with: ids[5]), at: 0)
                }
                try context.save()
                #expect(Set(try Self.songs(context, ids, "saved")) == ["s2", "s3", "s5"])
                try context.undo()
                #expect(Set(try Self.songs(context, ids, "undone once")) == ["s1", "s2", "s3", "s5"])
                try context.undo()
                #expect(try Self.songs(context, ids, "undone twice") == ["s5", "s1", "s2"])
                try context.redo()
                #expect(Set(try Self.songs(context, ids, "redone")) == ["s1", "s2", "s3", "s5"])
                try context.save()
            }
            #expect(Set(try await Self.storedSongs(dir, ids)) == ["s1", "s2", "s3", "s5"], "\(policy)")
        }
    }

    // MARK: - Saved work under a pending undo a merge rebased

    @Test("to-many: undoing a saved addition under a pending undo a merge rebased to another writer's member is a conflict (before, the other writer's member was dropped)")
    func toManyUnderRebasedPendingUndo() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try UndoRelationshipRebaseTests.playlistModel())
        let ids = try await Self.playlist(coordinator)
        let other = privateContext(coordinator, name: "other")
        try await privateContext(coordinator, name: "mine").perform { (context: isolated ManagedObjectContext) throws in
            let playlist = try context.existingObject(with: ids[0])
            playlist.mutableOrderedSetValue(forKey: "songs").add(try context.existingObject(with: ids[3]))
            try context.save()  // group 1: + s3
            playlist.mutableOrderedSetValue(forKey: "songs").add(try context.existingObject(with: ids[4]))
            context.processPendingChanges()  // group 2: + s4, unsaved
            let save = try UndoRelationshipRebaseTests.save(other) { other in
                try other.existingObject(with: ids[0]).mutableOrderedSetValue(forKey: "songs").add(try other.existingObject(with: ids[5]))
            }
            context.mergeChanges(fromContextDidSave: save)
            try context.save()  // group 2 saved, rebased over s5
            try context.undo()  // pending: s4 out, s5 stays
            #expect(Set(try Self.songs(context, ids, "undone")) == ["s1", "s2", "s3", "s5"])
            #expect(throws: ContextError.self, "the group's members s1 s2 s3 aren't what the pending undo put back") { try context.undo() }
            #expect(Set(try Self.songs(context, ids, "refused")) == ["s1", "s2", "s3", "s5"], "nothing changed")
            try context.save()
        }
        #expect(Set(try await Self.storedSongs(dir, ids)) == ["s1", "s2", "s3", "s5"])
    }

    @Test("undo of a saved insert under a pending undo a merge rebased to another writer's value is a conflict (before, the object went with the other writer's value)")
    func insertUnderRebasedPendingUndo() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let other = privateContext(coordinator, name: "other")
        let context = privateContext(coordinator, name: "mine")
        let teamID = try await context.perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            try context.save()  // group 1: the insert
            team.setValue("Herons", forKey: "name")
            context.processPendingChanges()  // group 2: unsaved
            return team.objectID
        }
        let save = try UndoRelationshipRebaseTests.save(other) { other in
            try other.existingObject(with: teamID).setValue("Comets", forKey: "name")
        }
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            context.mergeChanges(fromContextDidSave: save)
            try context.save()  // group 2 saved: Comets → Herons
            try context.undo()  // pending: back to Comets
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Comets")
            #expect(throws: ContextError.self, "the insert's name Otters isn't what the pending undo put back") { try context.undo() }
            #expect(team.isDeleted == false && team.value(forKey: "name") as? String == "Comets", "nothing changed")
            try context.save()
        }
        #expect(try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).value(forKey: "name") as? String
        } == "Comets")
    }

    @Test("child context: undoing a pushed rename under a pending undo a merge from the parent rebased to a sibling's name is a conflict (before, the sibling's name was overwritten)")
    func childUnderRebasedPendingUndo() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let teamID = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> ManagedObjectID in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            try context.save()
            return team.objectID
        }
        let parent = privateContext(coordinator, name: "parent")
        let mine = childContext(parent, name: "mine")
        let sibling = childContext(parent, name: "sibling")
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let team = try context.existingObject(with: teamID)
            context.userInfo["team"] = team
            team.setValue("Herons", forKey: "name")
            try context.save()  // pushed: group 1 Otters → Herons
            team.setValue("Comets", forKey: "name")
            context.processPendingChanges()  // group 2, unsaved
        }
        let merges = mine.notifications(.didMerge)
        try await sibling.perform { (other: isolated ManagedObjectContext) throws in
            try other.existingObject(with: teamID).setValue("Sharks", forKey: "name")
            try other.save()
        }
        _ = await firstMerge(merges)
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            #expect(team.value(forKey: "name") as? String == "Comets")
            try context.save()  // group 2 pushed: Sharks → Comets
            try context.undo()  // pending: back to Sharks
            #expect(team.value(forKey: "name") as? String == "Sharks")
            #expect(throws: ContextError.self, "group 1's Herons isn't what the pending undo put back") { try context.undo() }
            #expect(team.value(forKey: "name") as? String == "Sharks", "nothing changed")
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            #expect(try context.existingObject(with: teamID).value(forKey: "name") as? String == "Sharks")
        }
    }
}
