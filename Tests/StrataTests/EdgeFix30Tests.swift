import Foundation
@testable import Strata
import StrataPredicate
import StrataTestSupport
import Testing

/// A team whose `value(forKey: "name")` gives the name backwards — an override Core Data
/// forbids ("You must not override this method"), which a fetch consults for changed objects
/// only (spec 0008, Sort order).
final class BackwardsTeam: ManagedObject {
    override func value(forKey key: String) -> Any? {
        let value = super.value(forKey: key)
        guard key == "name", let name = value as? String else { return value }
        return String(name.reversed())
    }
}

/// Session 30 (helper 5): the storage layer's save error as the context's, a results
/// controller's order with a class overriding `value(forKey:)`, sorts folding each key once,
/// bare deep predicate trees let go without recursion, a child's undo conflict naming the
/// parent, and a to-one rebased at a merge keeping its place in an ordered list.
@Suite("Session 30: save errors, controller order, folded sorts, deep trees, child conflicts, ordered rebase", .serialized)
struct EdgeFix30Tests {
    // MARK: - 1. A save into a store whose data file was deleted while open

    @Test("a save into a store deleted while open throws the context's save error (ContextError.store, 256) naming the path and STRATA_DATA_FILE_GONE (before: the storage layer's LMDBError escaped save())")
    func deletedStoreSaveIsContextError() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let path = dir.url.appendingPathComponent("store").path
        try FileManager.default.removeItem(atPath: path)
        let (error, stillChanged) = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Team").setValue("Lost", forKey: "name")
            do {
                try context.save()
                return (nil as (any Error)?, context.hasChanges)
            } catch {
                return (error as (any Error)?, context.hasChanges)
            }
        }
        let thrown = try #require(error, "the save went through into a deleted store")
        let contextError = try #require(thrown as? ContextError, "not the context's error: \(type(of: thrown)) \(thrown)")
        guard case .store(let text, _) = contextError else {
            Issue.record("not ContextError.store: \(contextError)")
            return
        }
        #expect(contextError.code == 256)
        #expect(text.contains("\(path)/data.mdb is gone"), "\(text)")
        #expect(text.contains("STRATA_DATA_FILE_GONE"), "\(text)")
        #expect(text.contains("nothing was written"), "\(text)")
        #expect(stillChanged, "the context keeps its changes")
    }

    // MARK: - 2. A results controller's order with a class overriding value(forKey:)

    @Test("a results controller sorted by a key a registered class's value(forKey:) overrides orders its results as a plain fetch does, loaded, faults and changed alike (before: loaded results were keyed through the override and re-sorted)")
    func controllerOrderMatchesFetchWithOverride() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager, classes: [(BackwardsTeam.self, "Team")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Stored order by name: Ab, Ba, Cd, Dc; backwards: bA, aB, dC, cD (aB, bA, cD, dC).
            for name in ["Dc", "Ab", "Cd", "Ba"] {
                try context.insertNewObject(forEntityName: "Team").setValue(name, forKey: "name")
            }
            try context.save()
        }
        var storedOrder: [ManagedObjectID]?
        for loaded in [false, true] {
            for changed in [false, true] {
                let (shown, fetched) = try await privateContext(coordinator).perform {
                    (context: isolated ManagedObjectContext) throws -> ([ManagedObjectID], [ManagedObjectID]) in
                    let request = FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "name")])
                    let all = try context.fetch(request)
                    if loaded { for team in all { _ = team.value(forKey: "uniformColor") } }
                    if changed, let first = all.first { first.setValue("Red", forKey: "uniformColor") }
                    let fetched = try context.fetch(request).map(\.objectID)
                    let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil)
                    try controller.performFetch()
                    let shown = try #require(controller.fetchedObjects).map(\.objectID)
                    withExtendedLifetime(all) {}
                    return (shown, fetched)
                }
                #expect(shown == fetched, "loaded \(loaded), changed \(changed): controller \(shown), fetch \(fetched)")
                #expect(fetched.count == 4)
                // Without changes, the stored values' order (Ab, Ba, Cd, Dc), which faults have.
                if !changed {
                    if let storedOrder { #expect(shown == storedOrder, "the stored values' order, loaded \(loaded)") } else { storedOrder = shown }
                }
            }
        }
    }

    // MARK: - 3. Sorts fold each key once

    /// Strings that fold in tricky ways: case, diacritics, ß, dotted and dotless i, runs of
    /// digits, and several that are equal once folded (ties keep store order).
    static let trickyNames: [String?] = [
        "é", "e", "E", "É", "f", "ß", "ss", "SS", "Straße", "STRASSE", "strasse", "İ", "i", "I", "ı", "résumé", "Resume", "RESUME",
        "a", "A", "z", "Z", "file10", "File2", "file2", nil, "", "Ö", "o", "ö", "O", "ǅ", "ǆ", "Ǆ", "ﬁ", "fi",
    ]

    /// The descriptor sets checked: each option alone and together, ascending and descending,
    /// with a second descriptor breaking ties by the plain order.
    static var descriptorSets: [[FetchSortDescriptor]] {
        var sets: [[FetchSortDescriptor]] = []
        for (c, d, n) in [(true, false, false), (false, true, false), (true, true, false), (true, false, true), (true, true, true)] {
            for ascending in [true, false] {
                let first = FetchSortDescriptor(key: "name", ascending: ascending, caseInsensitive: c, diacriticInsensitive: d, numeric: n)
                sets.append([first])
                sets.append([first, FetchSortDescriptor(key: "uniformColor", ascending: !ascending)])
            }
        }
        return sets
    }

    /// `values` (each element's keys) in the order the sort gave before session 30: every
    /// comparison folding both strings (`compareValues`), ties in the given order.
    static func referenceOrder(_ values: [[Any?]], _ descriptors: [FetchSortDescriptor]) -> [Int] {
        values.indices.sorted { a, b in
            for (index, descriptor) in descriptors.enumerated() {
                var order = FetchSortDescriptor.compareValues(
                    values[a][index], values[b][index], caseInsensitive: descriptor.caseInsensitive,
                    diacriticInsensitive: descriptor.diacriticInsensitive, numeric: descriptor.numeric)
                if !descriptor.ascending, order != .orderedSame { order = order == .orderedAscending ? .orderedDescending : .orderedAscending }
                if order != .orderedSame { return order == .orderedAscending }
            }
            return a < b
        }
    }

    @Test("case- and diacritic-insensitive sorts (fetch, child fetch, controller, sorted(using:), grouped dictionaries) give the order folding at every comparison gave, ties in store order")
    func foldedSortsKeepTheirOrder() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let names = Self.trickyNames
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (index, name) in names.enumerated() {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue(name, forKey: "name")
                team.setValue(index % 3 == 0 ? "Red" : (index % 3 == 1 ? "blue" : nil), forKey: "uniformColor")
            }
            try context.save()
        }
        let parent = privateContext(coordinator, name: "parent")
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            // Store order: primary-key order, the order inserted.
            let stored = try context.fetch(FetchRequest(entityName: "Team")).sorted { $0.objectID < $1.objectID }
            let values = stored.map { [$0.value(forKey: "name"), $0.value(forKey: "uniformColor")] }
            for descriptors in Self.descriptorSets {
                let keys = values.map { row in descriptors.map { $0.key == "name" ? row[0] : row[1] } }
                let want = Self.referenceOrder(keys, descriptors).map { stored[$0].objectID }
                let request = FetchRequest(entityName: "Team", sortDescriptors: descriptors)
                #expect(try context.fetch(request).map(\.objectID) == want, "fetch \(descriptors)")
                #expect(stored.sorted(using: descriptors).map(\.objectID) == want, "sorted(using:) \(descriptors)")
                let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil)
                try controller.performFetch()
                #expect(controller.fetchedObjects?.map(\.objectID) == want, "controller \(descriptors)")
            }
            // Grouped dictionary rows, sorted by the folded name: one row per distinct name.
            for descriptors in Self.descriptorSets where descriptors.count == 1 {
                var request = FetchRequest(entityName: "Team", sortDescriptors: descriptors)
                request.resultType = .dictionary
                request.propertiesToFetch = ["name"]
                request.propertiesToGroupBy = ["name"]
                let rows = try context.fetchDictionaries(request).map { $0["name"] as? String }
                var distinct: [String?] = []
                for name in names where !distinct.contains(where: { $0 == name }) { distinct.append(name) }
                // Rows come in the order of the objects' sort, then are sorted stably.
                let firstOrder = Self.referenceOrder(distinct.map { [$0] }, descriptors).map { distinct[$0] }
                let want = Self.referenceOrder(firstOrder.map { [$0] }, descriptors).map { firstOrder[$0] }
                #expect(rows == want, "dictionaries \(descriptors): \(rows) vs \(want)")
            }
        }
        // A child's fetch sorts the parent's objects the same way.
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let stored = try context.fetch(FetchRequest(entityName: "Team")).sorted { $0.objectID < $1.objectID }
            let values = stored.map { [$0.value(forKey: "name"), $0.value(forKey: "uniformColor")] }
            for descriptors in Self.descriptorSets {
                let keys = values.map { row in descriptors.map { $0.key == "name" ? row[0] : row[1] } }
                let want = Self.referenceOrder(keys, descriptors).map { stored[$0].objectID }
                #expect(try context.fetch(FetchRequest(entityName: "Team", sortDescriptors: descriptors)).map(\.objectID) == want, "child fetch \(descriptors)")
            }
        }
    }

    @Test("a folded sort key compares folded as both strings folded at each comparison did, for every pair of tricky strings and option set")
    func foldedComparisonIsTheOldComparison() {
        let strings = Self.trickyNames.compactMap { $0 }
        for options: String.CompareOptions in [[.caseInsensitive], [.diacriticInsensitive], [.caseInsensitive, .diacriticInsensitive]] {
            for numeric in [false, true] {
                let descriptor = FetchSortDescriptor(
                    key: "name", caseInsensitive: options.contains(.caseInsensitive), diacriticInsensitive: options.contains(.diacriticInsensitive),
                    numeric: numeric)
                for a in strings {
                    for b in strings {
                        let old = FetchSortDescriptor.compareValues(
                            a, b, caseInsensitive: descriptor.caseInsensitive, diacriticInsensitive: descriptor.diacriticInsensitive, numeric: numeric)
                        let folded = FetchSortDescriptor.compareFolded(
                            FetchSortDescriptor.fold(a, descriptor.foldingOptions), FetchSortDescriptor.fold(b, descriptor.foldingOptions), numeric: numeric)
                        #expect(old == folded, "\(a) vs \(b), \(options), numeric \(numeric)")
                    }
                }
            }
        }
    }

    // MARK: - 4. Bare deep trees let go without recursion

    /// Levels of the deep trees (deep enough that a recursive release crashed, fast to build).
    static var deepLevels: Int {
        ProcessInfo.processInfo.environment["STRATA_DEEP_TREE_LEVELS"].flatMap(Int.init) ?? 100_000
    }

    @Test("a bare PredicateNode or FormatExpression 100,000+ levels deep is let go with dismantle (before: no way to free a bare tree but wrapping it in a predicate; the release recursed and crashed); a copy sharing it stays whole")
    func bareDeepTreesDismantle() throws {
        let levels = Self.deepLevels
        let leaf = try FormatPredicate(format: "age > 3").node
        var node = leaf
        for level in 0..<levels { node = level % 2 == 0 ? .not(node) : .and([node, leaf]) }
        var copy = node
        PredicateNode.dismantle(&node)
        #expect(node == .constant(true))
        #expect(copy.nestingDepth > levels, "the copy keeps its tree")
        PredicateNode.dismantle(&copy)
        #expect(copy == .constant(true))

        var expression = FormatExpression.keyPath("a")
        for level in 0..<levels { expression = .arithmetic(level % 2 == 0 ? .add : .multiply, expression, .constant(.integer(1))) }
        FormatExpression.dismantle(&expression)
        #expect(expression == .evaluatedObject)

        // A deep predicate's node, read and kept after the predicate went.
        var built = leaf
        for _ in 0..<levels { built = .not(.and([built, leaf])) }
        var predicate: FormatPredicate? = FormatPredicate(built)
        PredicateNode.dismantle(&built)
        var kept = try #require(predicate?.node)
        predicate = nil
        #expect(kept.nestingDepth > levels)
        PredicateNode.dismantle(&kept)
        #expect(predicate == nil)
    }

    // MARK: - 6. A child's undo conflict names the parent

    @Test("a child's undo of a pushed rename the parent has changed since is refused naming the parent context's value (before: 'the store holds' it, though the store never did)")
    func childUndoConflictNamesParent() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Herons", forKey: "name")
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Comets", forKey: "name")
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            do {
                try context.undo()
                Issue.record("the undo went through over the parent's change")
            } catch let error as ContextError {
                guard case .undoConflict(let object, let property, let expected, let found) = error else {
                    Issue.record("not an undo conflict: \(error)")
                    return
                }
                #expect(object == teamID.description && property == "name")
                #expect(expected.contains("Herons"), "\(expected)")
                #expect(found.contains("Comets") && found.hasSuffix(ContextError.parentContextHolds), "\(found)")
                let text = error.description
                #expect(text.contains("but the parent context holds ") && text.contains("Comets") && text.contains(", set there later by a change not on this undo stack"), "\(text)")
                #expect(!text.contains("the store holds"), "\(text)")
                #expect(text.contains("until the parent context holds the expected value again"), "\(text)")
                #expect(error.code == 133020)
            }
        }
        // A root context's conflict still names the store.
        let other = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let editor = privateContext(coordinator, name: "editor")
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Kites", forKey: "name")
            try context.save()
        }
        try await privateContext(other).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: teamID).setValue("Gulls", forKey: "name")
            try context.save()
        }
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            let found = expectUndoConflict { try context.undo() }
            #expect(found?.found.hasSuffix(ContextError.parentContextHolds) == false)
            let text = ContextError.undoConflict(object: "o", property: "p", expected: "e", found: found?.found ?? "").description
            #expect(text.contains("the store holds"), "\(text)")
        }
    }

    // MARK: - 7. A to-one rebased at a merge keeps its place in an ordered list

    /// Lists with an ordered to-many (entries, inverse to-one Entry.list).
    static func listModel() throws -> ManagedObjectModel {
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

    static func entryNames(_ list: ManagedObject) -> [String] {
        list.mutableOrderedSetValue(forKey: "entries").objects.map { $0.value(forKey: "name") as? String ?? "?" }
    }

    @Test("another writer moves an entry into the front of a list whose append this context undid: redo and undo keep the entry at the front, where the store has it (before: the groups kept the list read before, and the redo dropped the entry from the list, and the save wrote that)")
    func movedToOneKeepsItsPlace() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.listModel())
        // A = [a1, p], C = [c1]; x in no list.
        let ids = try await privateContext(coordinator, name: "setup").perform { (context: isolated ManagedObjectContext) throws -> [String: ManagedObjectID] in
            var objects: [String: ManagedObject] = [:]
            for name in ["A", "C"] {
                let list = try context.insertNewObject(forEntityName: "List")
                list.setValue(name, forKey: "name")
                objects[name] = list
            }
            for (name, list) in [("a1", "A"), ("p", "A"), ("c1", "C"), ("x", nil)] as [(String, String?)] {
                let entry = try context.insertNewObject(forEntityName: "Entry")
                entry.setValue(name, forKey: "name")
                if let list { objects[list]?.mutableOrderedSetValue(forKey: "entries").add(entry) }
                objects[name] = entry
            }
            try context.save()
            return objects.mapValues(\.objectID)
        }
        let mine = privateContext(coordinator, name: "mine")
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            let c = try context.existingObject(with: try #require(ids["C"]))
            // p loaded and held: the merge re-reads it and rebases its moved to-one.
            let p = try context.existingObject(with: try #require(ids["p"]))
            _ = p.value(forKey: "name")
            context.userInfo["p"] = p
            c.mutableOrderedSetValue(forKey: "entries").add(try context.existingObject(with: try #require(ids["x"])))
            context.processPendingChanges()
            #expect(Self.entryNames(c) == ["c1", "x"])
            try context.undo()
            #expect(Self.entryNames(c) == ["c1"])
            context.userInfo["C"] = c
        }
        // Another writer moves p into C at the front.
        let other = try openCoordinator(dir, model: try Self.listModel())
        try await privateContext(other, name: "other").perform { (context: isolated ManagedObjectContext) throws in
            let c = try context.existingObject(with: try #require(ids["C"]))
            c.mutableOrderedSetValue(forKey: "entries").insert(try context.existingObject(with: try #require(ids["p"])), at: 0)
            try context.save()
            #expect(Self.entryNames(c) == ["p", "c1"])
        }
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            let c = try #require(context.userInfo["C"] as? ManagedObject)
            #expect(Self.entryNames(c) == ["p", "c1"], "merged: the store's list")
            try context.redo()
            #expect(Self.entryNames(c) == ["p", "c1", "x"], "redo appends x to the store's list")
            try context.undo()
            #expect(Self.entryNames(c) == ["p", "c1"], "undo takes x back, p where the store has it")
            #expect(!context.hasChanges || !(c.changedValues().keys.contains("entries")), "no reorder left to save: \(c.changedValues())")
            try context.redo()
            try context.save()
        }
        let stored = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            Self.entryNames(try context.existingObject(with: try #require(ids["C"])))
        }
        #expect(stored == ["p", "c1", "x"])
    }

    @Test("the same with the append set back by a second group (both done, the list unchanged): undoing each keeps the entry another writer moved in at the front")
    func movedInEntryStaysThroughSetBackGroups() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.listModel())
        let ids = try await privateContext(coordinator, name: "setup").perform { (context: isolated ManagedObjectContext) throws -> [String: ManagedObjectID] in
            let a = try context.insertNewObject(forEntityName: "List"), c = try context.insertNewObject(forEntityName: "List")
            a.setValue("A", forKey: "name")
            c.setValue("C", forKey: "name")
            var objects: [String: ManagedObject] = ["A": a, "C": c]
            for (name, list) in [("a1", a), ("p", a), ("c1", c), ("x", nil)] as [(String, ManagedObject?)] {
                let entry = try context.insertNewObject(forEntityName: "Entry")
                entry.setValue(name, forKey: "name")
                list?.mutableOrderedSetValue(forKey: "entries").add(entry)
                objects[name] = entry
            }
            try context.save()
            return objects.mapValues(\.objectID)
        }
        let mine = privateContext(coordinator, name: "mine")
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            let c = try context.existingObject(with: try #require(ids["C"]))
            let x = try context.existingObject(with: try #require(ids["x"]))
            c.mutableOrderedSetValue(forKey: "entries").add(x)
            context.processPendingChanges()
            c.mutableOrderedSetValue(forKey: "entries").remove(x)
            context.processPendingChanges()
            #expect(Self.entryNames(c) == ["c1"])
            context.userInfo["C"] = c
        }
        let other = try openCoordinator(dir, model: try Self.listModel())
        try await privateContext(other, name: "other").perform { (context: isolated ManagedObjectContext) throws in
            let c = try context.existingObject(with: try #require(ids["C"]))
            c.mutableOrderedSetValue(forKey: "entries").insert(try context.existingObject(with: try #require(ids["p"])), at: 0)
            try context.save()
        }
        try await mine.perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.mergeStoreChanges()
            let c = try #require(context.userInfo["C"] as? ManagedObject)
            #expect(Self.entryNames(c) == ["p", "c1"])
            try context.undo()
            #expect(Self.entryNames(c) == ["p", "c1", "x"], "undoing the removal puts x back, p stays first")
            try context.undo()
            #expect(Self.entryNames(c) == ["p", "c1"], "undoing the append")
            try context.redo()
            try context.redo()
            #expect(Self.entryNames(c) == ["p", "c1"])
            try context.save()
        }
        let stored = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            Self.entryNames(try context.existingObject(with: try #require(ids["C"])))
        }
        #expect(stored == ["p", "c1"])
    }
}
