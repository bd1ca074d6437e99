import Foundation
import Strata

// The context layer's scaling probe (from session 13's scaling review): each scenario's time
// at growing sizes, and the growth ratio between successive sizes, to spot work that grows
// faster than it should. Opt-in: `.build/release/StrataBenchmarks scale`; sizes from
// STRATA_BENCH_SCALE_SIZES (default 1000,2000,4000), scenarios from STRATA_BENCH_SCALE_ONLY.
// No peers: a ratio near 2 per doubling is linear, near 4 quadratic.

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


/// A scratch directory removed when the scenario is done with it.
private final class ScaleDirectory {
    let path: String
    init() throws { path = try scratchDirectory("scale") }
    deinit { remove(path) }
}

private func openCoordinator(_ directory: ScaleDirectory, model: ManagedObjectModel) throws -> PersistentStoreCoordinator {
    let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
    try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: directory.path).appendingPathComponent("store"))
    return coordinator
}

private func privateContext(_ coordinator: PersistentStoreCoordinator) -> ManagedObjectContext {
    ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
}

private func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
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

func runScaleProbe(sizes: [Int]) throws {
    heading("Scale probe (context layer): seconds per scenario at n = \(sizes.map(String.init).joined(separator: ", "))")
        let only = ProcessInfo.processInfo.environment["STRATA_BENCH_SCALE_ONLY"].map { Set($0.split(separator: ",").map(String.init)) }
    var scenarios: [(String, (Int) throws -> Double)] = []
    func scenario(_ name: String, _ body: @escaping (Int) throws -> Double) {
        if only == nil || only?.contains(name) == true { scenarios.append((name, body)) }
    }
    scenario("proxyAddUnordered") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        let ownerID = try seededStore(coordinator, items: 0, tags: n, related: false)
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            let tags = try context.fetch(FetchRequest(entityName: "Tag"))
            let proxy = owner.mutableSetValue(forKey: "tags")
            return seconds { for tag in tags { proxy.add(tag) } }
        }
    }
    scenario("proxyAddOrdered") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        let ownerID = try seededStore(coordinator, items: n, tags: 0, related: false)
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            let items = try context.fetch(FetchRequest(entityName: "Item"))
            let proxy = owner.mutableSetValue(forKey: "items")
            return seconds { for item in items { proxy.add(item) } }
        }
    }
    scenario("orderedInsertAtFront") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        let ownerID = try seededStore(coordinator, items: n, tags: 0, related: false)
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            let items = try context.fetch(FetchRequest(entityName: "Item"))
            let proxy = owner.mutableOrderedSetValue(forKey: "items")
            return seconds { for item in items { proxy.insert(item, at: 0) } }
        }
    }
    scenario("proxyRemove") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        let ownerID = try seededStore(coordinator, items: 0, tags: n)
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            let tags = try context.fetch(FetchRequest(entityName: "Tag"))
            let proxy = owner.mutableSetValue(forKey: "tags")
            return seconds { for tag in tags { proxy.remove(tag) } }
        }
    }
    scenario("proxyCount1000") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        let ownerID = try seededStore(coordinator, items: 0, tags: n)
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            let tags = try context.fetch(FetchRequest(entityName: "Tag"))
            let proxy = owner.mutableSetValue(forKey: "tags")
            return seconds { for i in 0..<1000 { _ = proxy.count; _ = proxy.contains(tags[i % tags.count]) } }
        }
    }
    scenario("setToOne") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        let ownerID = try seededStore(coordinator, items: n, tags: 0, related: false)
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            let items = try context.fetch(FetchRequest(entityName: "Item"))
            return seconds { for item in items { item.setValue(owner, forKey: "owner") } }
        }
    }
    scenario("deleteInserted") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            var items: [ManagedObject] = []
            for _ in 0..<n { items.append(try context.insertNewObject(forEntityName: "Item")) }
            return seconds { for item in items { context.delete(item) } }
        }
    }
    scenario("nullifyDelete") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        _ = try seededStore(coordinator, items: 0, tags: n)
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let tags = try context.fetch(FetchRequest(entityName: "Tag"))
            return try seconds {
                for tag in tags { context.delete(tag) }
                try context.save()
            }
        }
    }
    scenario("deleteItemsOfOrdered") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        _ = try seededStore(coordinator, items: n, tags: 0)
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let items = try context.fetch(FetchRequest(entityName: "Item"))
            return try seconds {
                for item in items { context.delete(item) }
                try context.save()
            }
        }
    }
    scenario("cascadeDelete") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        let ownerID = try seededStore(coordinator, items: n, tags: 0)
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            return try seconds {
                context.delete(owner)
                try context.save()
            }
        }
    }
    scenario("saveUpdates") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        _ = try seededStore(coordinator, items: n, tags: 0)
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let items = try context.fetch(FetchRequest(entityName: "Item"))
            for item in items { item.setValue("x", forKey: "name") }
            return try seconds { try context.save() }
        }
    }
    scenario("mergeIntoRegistered") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        _ = try seededStore(coordinator, items: n, tags: 0)
        let watcher = privateContext(coordinator)
        let held = try watcher.performAndWait { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let items = try context.fetch(FetchRequest(entityName: "Item"))
            for item in items { _ = item.value(forKey: "name") }
            return items.count
        }
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            for item in try context.fetch(FetchRequest(entityName: "Item")) { item.setValue("y", forKey: "name") }
            try context.save()
        }
        return try seconds {
            try watcher.performAndWait { (context: isolated ManagedObjectContext) throws in
                precondition(held == n)
                _ = try context.mergeStoreChanges()
            }
        }
    }
    scenario("mergeDeletesWithUnsaved") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        _ = try seededStore(coordinator, items: n, tags: n)
        let watcher = privateContext(coordinator)
        let held = Held()
        try watcher.performAndWait { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            // n unsaved changes (one open group), n other objects registered.
            for tag in try context.fetch(FetchRequest(entityName: "Tag")) { tag.setValue("changed", forKey: "name") }
            held.objects = try context.fetch(FetchRequest(entityName: "Item"))
        }
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            for item in try context.fetch(FetchRequest(entityName: "Item")) { context.delete(item) }
            try context.save()
        }
        return try seconds {
            try watcher.performAndWait { (context: isolated ManagedObjectContext) throws in
                _ = try context.mergeStoreChanges()
            }
        }
    }
    scenario("conflictLongHistory100") { n in
        // n versions of one object; 100 conflicting saves from a stale context.
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        let ownerID = try seededStore(coordinator, items: 0, tags: 0)
        let stale = privateContext(coordinator)
        let held = Held()
        try stale.performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            _ = owner.value(forKey: "name")
            held.objects = [owner]
        }
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.existingObject(with: ownerID)
            context.undoManagerDisabledForProbe()
            for i in 0..<n {
                owner.setValue("v\(i)", forKey: "name")
                try context.save()
            }
        }
        return seconds {
            stale.performAndWait { (context: isolated ManagedObjectContext) in
                for _ in 0..<100 {
                    held.objects[0].setValue("mine", forKey: "name")
                    _ = try? context.save()
                    context.rollback()
                }
            }
        }
    }
    scenario("refreshAll") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        _ = try seededStore(coordinator, items: n, tags: 0)
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let items = try context.fetch(FetchRequest(entityName: "Item"))
            for item in items { _ = item.value(forKey: "name") }
            return seconds { context.refreshAllObjects() }
        }
    }
    scenario("undoBigGroup") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            let owner = try context.insertNewObject(forEntityName: "Owner")
            try context.save()
            for _ in 0..<n { try context.insertNewObject(forEntityName: "Item").setValue(owner, forKey: "owner") }
            return try seconds {
                context.processPendingChanges()
                try context.undo()
                try context.redo()
            }
        }
    }
    scenario("manySmallGroups") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            context.levelsOfUndo = 0
            let owner = try context.insertNewObject(forEntityName: "Owner")
            return try seconds {
                for i in 0..<n {
                    owner.setValue("n\(i)", forKey: "name")
                    context.processPendingChanges()
                }
                for _ in 0..<min(n, 1000) { try context.undo() }
            }
        }
    }
    scenario("obtainPermanentIDs") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            var items: [ManagedObject] = []
            for _ in 0..<n { items.append(try context.insertNewObject(forEntityName: "Item")) }
            return try seconds { try context.obtainPermanentIDs(for: items) }
        }
    }
    scenario("fetchPending") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            for i in 0..<n { try context.insertNewObject(forEntityName: "Item").setValue("i\(i)", forKey: "name") }
            let request = FetchRequest(entityName: "Item", predicate: try FormatPredicate(format: "name == %@", "i1"))
            return try seconds { for _ in 0..<10 { _ = try context.fetch(request) } }
        }
    }
    scenario("compoundUnique") { n in
        let dir = try ScaleDirectory()
        let coordinator = try openCoordinator(dir, model: try scaleModel())
        try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            for i in 0..<n {
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue("a\(i)", forKey: "first")
                person.setValue("b", forKey: "last")
            }
            try context.save()
        }
        return try privateContext(coordinator).performAndWait { (context: isolated ManagedObjectContext) throws in
            for i in 0..<n {
                let person = try context.insertNewObject(forEntityName: "Person")
                // The last one clashes with a stored person.
                person.setValue(i == n - 1 ? "a0" : "c\(i)", forKey: "first")
                person.setValue("b", forKey: "last")
            }
            return seconds { _ = try? context.save() }
        }
    }
    for (name, body) in scenarios {
        var previous: Double?
        var line = "\(name):"
        for n in sizes {
            let t = try body(n)
            line += String(format: " n=%d %.4fs", n, t)
            if let previous, previous > 0 { line += String(format: " (x%.1f)", t / previous) }
            previous = t
        }
        say("  " + line)
    }
}
