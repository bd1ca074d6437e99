import Foundation
import Strata
import StrataTestSupport
import Testing

// Review 25-4: key-value coding on managed objects and the stack (coordinator, container,
// object IDs), as a Core Data developer porting an app writes them by heart.

/// A shop: `Shop` with unordered `items` and ordered `queue`; `Item` with an integer, a
/// double, a decimal and a date, a to-one `shop` and a to-one `queuedAt`.
enum KVCStackModels {
    static var shop: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Shop") {
                    Attribute("name", .string)
                    Relationship("items", to: "Item", inverse: "shop", toMany: true)
                    Relationship("queue", to: "Item", inverse: "queuedAt", toMany: true, ordered: true)
                    Relationship("owner", to: "Owner", inverse: "shops")
                }
                Entity("Item") {
                    Attribute("name", .string)
                    Attribute("count", .int64)
                    Attribute("weight", .double)
                    Attribute("price", .decimal)
                    Attribute("added", .date)
                    Attribute("stock", .int16, default: 0).required()
                    Relationship("shop", to: "Shop", inverse: "items")
                    Relationship("queuedAt", to: "Shop", inverse: "queue")
                }
                Entity("Owner") {
                    Attribute("name", .string)
                    Relationship("shops", to: "Shop", inverse: "owner", toMany: true)
                }
            }
        }
    }
}

@Suite("Review 25-4: key-value coding on managed objects")
struct KVCStackReviewKVCTests {
    @Test("seed 000: department.employees.@sum.salary, @count, @avg, @min, @max, unions through a to-one then a to-many")
    func seedSum() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.employeeDepartment)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) in
            let department = try context.insertNewObject(forEntityName: "Department")
            department.setValue("R&D", forKey: "name")
            var first: ManagedObject?
            for (name, salary) in [("Ada", Decimal(100)), ("Bob", Decimal(50)), ("Cy", Decimal(50))] {
                let employee = try context.insertNewObject(forEntityName: "Employee")
                employee.setValue(name, forKey: "firstName")
                employee.setValue(salary, forKey: "salary")
                employee.setValue(department, forKey: "department")
                if first == nil { first = employee }
            }
            let ada = try #require(first)
            #expect(ada.value(forKeyPath: "department.employees.@sum.salary") as? Decimal == 200)
            #expect(ada.value(forKeyPath: "department.employees.@count") as? Int == 3)
            #expect(ada.value(forKeyPath: "department.employees.@min.salary") as? Decimal == 50)
            #expect(ada.value(forKeyPath: "department.employees.@max.salary") as? Decimal == 100)
            let distinct = ada.value(forKeyPath: "department.employees.@distinctUnionOfObjects.salary") as? [Any]
            #expect(distinct?.count == 2)
            let union = ada.value(forKeyPath: "department.employees.@unionOfObjects.salary") as? [Any]
            #expect(union?.count == 3)
            #expect(ada.value(forKeyPath: "department.name") as? String == "R&D")
            // A nil to-one in the middle of a path: nil, not a crash.
            #expect(ada.value(forKeyPath: "manager.department.name") == nil)
            #expect(ada.value(forKeyPath: "manager.directReports.@count") == nil)
            // A to-many in the middle: one value per member.
            let names = (department.value(forKeyPath: "employees.firstName") as? [Any])?.compactMap { $0 as? String }.sorted()
            #expect(names == ["Ada", "Bob", "Cy"])
            // Saved, then read again as faults.
            try context.save()
            context.reset()
            let fetched = try context.fetch(FetchRequest(entityName: "Department"))
            #expect(fetched.first?.value(forKeyPath: "employees.@sum.salary") as? Decimal == 200)
            #expect(fetched.first?.value(forKeyPath: "employees.@avg.salary") as? Decimal == Decimal(200) / 3)
        }
    }

    @Test("collection operators over empty collections, nil values, mixed number types and dates")
    func operatorsEdges() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCStackModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) in
            let shop = try context.insertNewObject(forEntityName: "Shop")
            #expect(shop.value(forKeyPath: "items.@count") as? Int == 0)
            #expect(shop.value(forKeyPath: "items.@sum.count") as? Int == 0)
            #expect(shop.value(forKeyPath: "items.@avg.count") == nil)
            #expect(shop.value(forKeyPath: "items.@min.added") == nil)
            #expect(shop.value(forKeyPath: "items.@max.added") == nil)
            #expect((shop.value(forKeyPath: "items.@unionOfObjects.name") as? [Any])?.isEmpty == true)
            let day = Date(timeIntervalSince1970: 86_400)
            for index in 0..<3 {
                let item = try context.insertNewObject(forEntityName: "Item")
                item.setValue(shop, forKey: "shop")
                if index < 2 {
                    item.setValue(Int64(index + 1), forKey: "count")
                    item.setValue(Double(index) + 0.5, forKey: "weight")
                    item.setValue(Decimal(string: "1.10"), forKey: "price")
                    item.setValue(day.addingTimeInterval(Double(index) * 86_400), forKey: "added")
                    item.setValue("n\(index)", forKey: "name")
                }
            }
            #expect(shop.value(forKeyPath: "items.@sum.count") as? Int == 3)
            // Foundation's @avg counts a nil as 0 ("In the case where the value is nil, 0 is
            // assumed instead"): (1 + 2 + 0) / 3, not (1 + 2) / 2.
            #expect(shop.value(forKeyPath: "items.@avg.count") as? Double == 1.0)
            #expect(shop.value(forKeyPath: "items.@avg.price") as? Decimal == Decimal(string: "2.20").map { $0 / 3 })
            #expect(shop.value(forKeyPath: "items.@sum.weight") as? Double == 2.0)
            #expect(shop.value(forKeyPath: "items.@sum.price") as? Decimal == Decimal(string: "2.20"))
            #expect(shop.value(forKeyPath: "items.@min.added") as? Date == day)
            #expect(shop.value(forKeyPath: "items.@max.added") as? Date == day.addingTimeInterval(86_400))
            #expect(shop.value(forKeyPath: "items.@min.count") as? Int64 == 1 || shop.value(forKeyPath: "items.@min.count") as? Int == 1)
            #expect((shop.value(forKeyPath: "items.@unionOfObjects.name") as? [Any])?.count == 2)
            #expect((shop.value(forKeyPath: "items.@distinctUnionOfObjects.name") as? [Any])?.count == 2)
            // Typed access.
            let item = try #require((shop.value(forKey: "items") as? Set<ManagedObject>)?.first { $0.value(forKey: "count") != nil })
            #expect(item.value(forKey: "count") is Int64)
            #expect(item.get("count", as: Int64.self) != nil)
            #expect(item.get("stock", as: Int16.self) == 0)
            // An Int set on an Int16 attribute reads back as Int16, as an NSNumber would.
            item.setValue(7, forKey: "stock")
            #expect(item.value(forKey: "stock") as? Int16 == 7)
            #expect(item.primitiveValue(forKey: "stock") as? Int16 == 7)
        }
    }

    @Test("unknown keys: nil on read, a clear unknownKey error at save, no crash")
    func unknownKeys() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCStackModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) in
            let shop = try context.insertNewObject(forEntityName: "Shop")
            #expect(shop.value(forKey: "nmae") == nil)
            #expect(shop.value(forKeyPath: "owner.nmae") == nil)
            #expect(shop.value(forKeyPath: "items.@sum.nmae") as? Int == 0)
            shop.setValue("x", forKey: "nmae")
            var caught: (any Error)?
            do { try context.save() } catch { caught = error }
            let text = caught.map { "\($0)" } ?? ""
            #expect(text.contains("nmae"), "\(text)")
        }
    }

    @Test("setValue(_:forKeyPath:) through a to-one, a nil to-one and a to-many; an unknown key on the way is a clear error")
    func setThroughKeyPath() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCStackModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) in
            let owner = try context.insertNewObject(forEntityName: "Owner")
            let shop = try context.insertNewObject(forEntityName: "Shop")
            let items = [try context.insertNewObject(forEntityName: "Item"), try context.insertNewObject(forEntityName: "Item")]
            shop.setValue(owner, forKey: "owner")
            shop.mutableSetValue(forKey: "items").addObjects(from: items)
            items[0].setValue("Acme", forKeyPath: "shop.owner.name")
            #expect(owner.value(forKey: "name") as? String == "Acme")
            shop.setValue("Main", forKeyPath: "name")
            #expect(shop.value(forKey: "name") as? String == "Main")
            owner.setValue(Int16(4), forKeyPath: "shops.items.stock")
            #expect(items.allSatisfy { $0.value(forKey: "stock") as? Int16 == 4 })
            // An empty to-one on the way: nothing is set, nothing fails.
            items[0].setValue("x", forKeyPath: "queuedAt.name")
            try context.save()
            items[0].setValue("x", forKeyPath: "shop.nmae.name")
            var caught: (any Error)?
            do { try context.save() } catch { caught = error }
            #expect("\(caught.map { "\($0)" } ?? "")".contains("nmae"))
        }
    }

    @Test("objectID and self through key-value coding; chains of to-many relationships flatten; deleted objects")
    func objectIDAndSelf() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCStackModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) in
            let owner = try context.insertNewObject(forEntityName: "Owner")
            var shops: [ManagedObject] = []
            for index in 0..<2 {
                let shop = try context.insertNewObject(forEntityName: "Shop")
                shop.setValue(owner, forKey: "owner")
                shops.append(shop)
                for _ in 0...index {
                    let item = try context.insertNewObject(forEntityName: "Item")
                    item.setValue(shop, forKey: "shop")
                    item.setValue("b\(index)", forKey: "name")
                }
            }
            try context.save()
            #expect(shops[0].value(forKey: "objectID") as? ManagedObjectID == shops[0].objectID)
            #expect(shops[0].value(forKeyPath: "owner.objectID") as? ManagedObjectID == owner.objectID)
            #expect(shops[0].value(forKey: "self") as? ManagedObject === shops[0])
            let ids = (owner.value(forKeyPath: "shops.objectID") as? [Any])?.compactMap { $0 as? ManagedObjectID }
            #expect(Set(ids ?? []) == Set(shops.map(\.objectID)))
            #expect((owner.value(forKeyPath: "shops.items") as? [Any])?.count == 3)
            #expect(owner.value(forKeyPath: "shops.items.@count") as? Int == 3)
            #expect(owner.value(forKeyPath: "shops.items.@max.name") as? String == "b1")
            #expect((owner.value(forKeyPath: "shops.@distinctUnionOfObjects.owner") as? [Any])?.count == 1)
            context.delete(shops[1])
            context.processPendingChanges()
            #expect(owner.value(forKeyPath: "shops.@count") as? Int == 1)
        }
    }

    @Test("odd key paths give nil or a count, never a crash")
    func oddKeyPaths() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCStackModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) in
            let shop = try context.insertNewObject(forEntityName: "Shop")
            let item = try context.insertNewObject(forEntityName: "Item")
            item.setValue(shop, forKey: "shop")
            item.setValue(Int64(2), forKey: "count")
            for path in ["", ".", "..", "@", "items.", ".items", "items..count", "items.@", "items.@foo.count", "items.@sum", "name.@count", "items.@count.x", "@count"] {
                _ = shop.value(forKeyPath: path)
                shop.setValue("x", forKeyPath: path)
            }
            #expect(shop.value(forKeyPath: "items.@avg.count") as? Double == 2)
            context.rollback()
        }
    }

    @Test("setNilValueForKey: nil on a required Int16 calls it; the default leaves the save to report the missing value")
    func setNil() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCStackModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) in
            let item = try context.insertNewObject(forEntityName: "Item")
            item.setValue(nil, forKey: "stock")
            #expect(item.value(forKey: "stock") == nil)
            #expect(throws: (any Error).self) { try context.save() }
            item.setValue(Int16(3), forKey: "stock")
            try context.save()
        }
    }

    @Test("mutable ordered proxy: add, insert at, remove at, move, replace; inverses kept; undo puts every step back")
    func orderedProxy() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCStackModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) in
            let shop = try context.insertNewObject(forEntityName: "Shop")
            let other = try context.insertNewObject(forEntityName: "Shop")
            var items: [ManagedObject] = []
            for index in 0..<4 {
                let item = try context.insertNewObject(forEntityName: "Item")
                item.setValue("i\(index)", forKey: "name")
                items.append(item)
            }
            try context.save()
            let queue = shop.mutableOrderedSetValue(forKey: "queue")
            queue.add(items[0])
            queue.add(items[1])
            queue.insert(items[2], at: 0)
            func names(_ owner: ManagedObject) -> [String] {
                (owner.value(forKey: "queue") as? [ManagedObject] ?? []).compactMap { $0.value(forKey: "name") as? String }
            }
            #expect(names(shop) == ["i2", "i0", "i1"])
            #expect(items[2].value(forKey: "queuedAt") as? ManagedObject === shop)
            context.processPendingChanges()
            queue.moveObject(at: 0, to: 2)
            #expect(names(shop) == ["i0", "i1", "i2"])
            context.processPendingChanges()
            queue.removeObject(at: 1)
            #expect(names(shop) == ["i0", "i2"])
            #expect(items[1].value(forKey: "queuedAt") == nil)
            context.processPendingChanges()
            queue.replaceObject(at: 0, with: items[3])
            #expect(names(shop) == ["i3", "i2"])
            #expect(items[0].value(forKey: "queuedAt") == nil)
            #expect(items[3].value(forKey: "queuedAt") as? ManagedObject === shop)
            context.processPendingChanges()
            // An object of another list moves over: it leaves that list.
            other.mutableOrderedSetValue(forKey: "queue").add(items[1])
            context.processPendingChanges()
            queue.insert(items[1], at: 1)
            #expect(names(shop) == ["i3", "i1", "i2"])
            #expect(names(other) == [])
            context.processPendingChanges()
            try context.undo()
            #expect(names(shop) == ["i3", "i2"])
            #expect(names(other) == ["i1"])
            try context.undo()
            try context.undo()
            #expect(names(shop) == ["i0", "i2"])
            #expect(items[3].value(forKey: "queuedAt") == nil)
            #expect(items[0].value(forKey: "queuedAt") as? ManagedObject === shop)
            try context.undo()
            try context.undo()
            try context.undo()
            #expect(names(shop) == [])
            #expect(items.allSatisfy { $0.value(forKey: "queuedAt") == nil })
            #expect(context.hasChanges == false)
        }
    }

    @Test("replaceObject(at:with:) with an object the relationship can't hold changes nothing and is a clear error at save")
    func replaceWithWrongEntity() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCStackModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) in
            let shop = try context.insertNewObject(forEntityName: "Shop")
            let item = try context.insertNewObject(forEntityName: "Item")
            let owner = try context.insertNewObject(forEntityName: "Owner")
            let queue = shop.mutableOrderedSetValue(forKey: "queue")
            queue.add(item)
            queue.replaceObject(at: 0, with: owner)
            #expect(queue.count == 1)
            #expect(queue.object(at: 0) === item)
            #expect(item.value(forKey: "queuedAt") as? ManagedObject === shop)
            queue.replaceObject(at: 3, with: item)
            var caught = ""
            do { try context.save() } catch { caught = "\(error)" }
            #expect(caught.contains("Owner"), "\(caught)")
        }
    }

    @Test("mutable set proxy: add, remove, removeAll, union, minus with inverses and undo")
    func setProxy() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCStackModels.shop)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) in
            let shop = try context.insertNewObject(forEntityName: "Shop")
            var items: [ManagedObject] = []
            for _ in 0..<3 { items.append(try context.insertNewObject(forEntityName: "Item")) }
            try context.save()
            let set = shop.mutableSetValue(forKey: "items")
            set.addObjects(from: items)
            #expect(set.count == 3)
            #expect(items.allSatisfy { $0.value(forKey: "shop") as? ManagedObject === shop })
            context.processPendingChanges()
            set.removeObjects(in: [items[0], items[1]])
            #expect(set.count == 1)
            #expect(items[0].value(forKey: "shop") == nil)
            context.processPendingChanges()
            set.removeAllObjects()
            #expect(set.count == 0)
            #expect(items[2].value(forKey: "shop") == nil)
            context.processPendingChanges()
            try context.undo()
            #expect(set.count == 1)
            #expect(items[2].value(forKey: "shop") as? ManagedObject === shop)
            try context.undo()
            #expect(set.count == 3)
        }
    }
}

@Suite("Review 25-4: the stack — coordinator, container, object IDs")
struct KVCStackReviewStackTests {
    @Test("metadata names the type and UUID; an in-memory store is added, removed and another added")
    func metadataAndInMemory() throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try KVCStackModels.shop)
        let store = try coordinator.addPersistentStore(type: .inMemory)
        let metadata = coordinator.metadata(for: store)
        #expect(metadata["StoreType"] == .string("inMemory") || metadata["StoreType"] == .string(store.type.rawValue))
        #expect(metadata["StoreUUID"] == .string(store.identifier.uuidString))
        #expect(store.url == nil)
        #expect(throws: (any Error).self) { try coordinator.addPersistentStore(type: .inMemory) }
        try coordinator.remove(store)
        #expect(coordinator.persistentStores.isEmpty)
        #expect(throws: (any Error).self) { try coordinator.remove(store) }
        let second = try coordinator.addPersistentStore(type: .inMemory)
        #expect(second.identifier != store.identifier)
        let dir = try TemporaryDirectory()
        let disk = PersistentStoreCoordinator(managedObjectModel: try KVCStackModels.shop)
        #expect(throws: (any Error).self) { try disk.addPersistentStore(type: .eventLog) }
        let url = dir.url.appendingPathComponent("Shop.strata")
        let added = try disk.addPersistentStore(type: .eventLog, at: url)
        #expect(disk.persistentStore(for: url) === added)
        #expect(disk.metadata(for: added)["StoreType"] == .string(added.type.rawValue))
    }

    @Test("managedObjectID(forURIRepresentation:): own permanent URIs resolve; another store's, an unknown entity's, a temporary or malformed one give nil")
    func uriResolution() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCStackModels.shop)
        let otherDir = try TemporaryDirectory()
        let other = try openCoordinator(otherDir, model: try KVCStackModels.shop)
        let context = privateContext(coordinator)
        let (temporary, permanent) = try await context.perform { (context: isolated ManagedObjectContext) in
            let shop = try context.insertNewObject(forEntityName: "Shop")
            let temporary = shop.objectID
            try context.save()
            return (temporary, shop.objectID)
        }
        #expect(temporary.isTemporaryID)
        #expect(!permanent.isTemporaryID)
        #expect(temporary != permanent)
        #expect(temporary.uriRepresentation().absoluteString.hasPrefix("x-strata:///Shop/t"))
        let uri = permanent.uriRepresentation()
        #expect(uri.absoluteString.hasPrefix("x-strata://\(try #require(coordinator.persistentStores.first).identifier.uuidString)/Shop/p"))
        #expect(coordinator.managedObjectID(forURIRepresentation: uri) == permanent)
        let lower = try #require(URL(string: uri.absoluteString.lowercased().replacingOccurrences(of: "/shop/", with: "/Shop/")))
        #expect(coordinator.managedObjectID(forURIRepresentation: lower) == permanent)
        #expect(other.managedObjectID(forURIRepresentation: uri) == nil)
        #expect(coordinator.managedObjectID(forURIRepresentation: temporary.uriRepresentation()) == nil)
        let store = try #require(coordinator.persistentStores.first).identifier.uuidString
        for bad in [
            "x-strata://\(store)/Nope/p1", "x-strata://\(store)/Shop/p0", "x-strata://\(store)/Shop/p01", "x-strata://\(store)/Shop/p",
            "x-strata://\(store)/Shop/1", "x-strata://\(store)/Shop/p1/extra", "x-coredata://\(store)/Shop/p1", "x-strata://not-a-uuid/Shop/p1",
            "x-strata://\(store)/Shop/p99999999999999999999", "x-strata://\(store)/Shop/p-1", "x-strata://\(store)/Shop/p1?x=1",
            "x-strata://\(store)/Shop/p1#f", "x-strata://\(store)//p1", "file:///tmp/x",
        ] {
            let url = try #require(URL(string: bad), "\(bad)")
            #expect(coordinator.managedObjectID(forURIRepresentation: url) == nil, "\(bad)")
        }
        try await context.perform { (context: isolated ManagedObjectContext) in
            let shop = try context.existingObject(with: permanent)
            #expect(shop.objectID == permanent)
        }
    }

    @Test("a well-formed URI of an object that never existed resolves to an ID; existingObject(with:) then throws a clear error")
    func neverExisted() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCStackModels.shop)
        let store = try #require(coordinator.persistentStores.first).identifier.uuidString
        let url = try #require(URL(string: "x-strata://\(store)/Shop/p999"))
        let id = try #require(coordinator.managedObjectID(forURIRepresentation: url))
        let context = privateContext(coordinator)
        let message = await context.perform { (context: isolated ManagedObjectContext) -> String in
            do {
                _ = try context.existingObject(with: id)
                return ""
            } catch {
                return "\(error)"
            }
        }
        #expect(message.contains("p999"), "\(message)")
        // After the store is removed, nothing resolves.
        try coordinator.remove(try #require(coordinator.persistentStores.first))
        #expect(coordinator.managedObjectID(forURIRepresentation: url) == nil)
    }

    @Test("remove a store and add it again at the same URL; destroy it and start over (a reset-the-store flow)")
    func removeAndReAdd() async throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("Shop.strata")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try KVCStackModels.shop)
        let previous = try await addRemoveAndAddAgain(coordinator, url)
        try await destroyAndReAdd(coordinator, url, previous: previous)
        #expect(coordinator.persistentStores.count == 1, "one store at the URL again, a new one")
        #expect(coordinator.persistentStores.first?.identifier != previous)
    }

    /// Adds, saves, removes, saves without a store, adds again, removes; returns the store's UUID.
    private func addRemoveAndAddAgain(_ coordinator: PersistentStoreCoordinator, _ url: URL) async throws -> UUID {
        let first = try coordinator.addPersistentStore(type: .eventLog, at: url)
        let context = privateContext(coordinator)
        let id = try await context.perform { (context: isolated ManagedObjectContext) in
            let shop = try context.insertNewObject(forEntityName: "Shop")
            shop.setValue("One", forKey: "name")
            try context.save()
            return shop.objectID
        }
        try coordinator.remove(first)
        let saveWithoutStore = await context.perform { (context: isolated ManagedObjectContext) -> String in
            do {
                let shop = try context.insertNewObject(forEntityName: "Shop")
                shop.setValue("Two", forKey: "name")
                try context.save()
                return ""
            } catch {
                context.rollback()
                return "\(error)"
            }
        }
        #expect(!saveWithoutStore.isEmpty)
        let second = try coordinator.addPersistentStore(type: .eventLog, at: url)
        #expect(second.identifier == first.identifier)
        #expect(coordinator.managedObjectID(forURIRepresentation: id.uriRepresentation()) == id)
        let fresh = privateContext(coordinator)
        let names = try await fresh.perform { (context: isolated ManagedObjectContext) in
            let shop = try context.insertNewObject(forEntityName: "Shop")
            shop.setValue("Three", forKey: "name")
            try context.save()
            return try context.fetch(FetchRequest(entityName: "Shop")).compactMap { $0.value(forKey: "name") as? String }.sorted()
        }
        #expect(names == ["One", "Three"])
        let firstUUID = first.identifier
        try coordinator.remove(second)
        // Core Data's reset-the-store flow, with the removed store still referenced here
        // (`first`, `second`): Strata keeps a store's files open while anything references
        // it, so the destroy is refused, naming the reason.
        var refused = ""
        do { try coordinator.destroyPersistentStore(at: url, type: .eventLog) } catch { refused = "\(error)" }
        #expect(refused.contains("in use"), "\(refused)")
        _ = (first, second)
        return firstUUID
    }

    @Test("the reset-the-store flow with a container: the viewContext, which lives on, doesn't keep the removed store open")
    func resetWithLiveViewContext() async throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("Shop.strata")
        let container = PersistentContainer(name: "Shop", managedObjectModel: try KVCStackModels.shop, storeURL: url)
        try container.loadPersistentStores()
        let count = try await container.viewContext.perform { (context: isolated ManagedObjectContext) in
            let shop = try context.insertNewObject(forEntityName: "Shop")
            shop.setValue("One", forKey: "name")
            try context.save()
            return try context.count(for: FetchRequest(entityName: "Shop"))
        }
        #expect(count == 1)
        let coordinator = container.persistentStoreCoordinator
        try await resetStore(coordinator, url)
        let after = try await container.viewContext.perform { (context: isolated ManagedObjectContext) in
            context.reset()
            return try context.count(for: FetchRequest(entityName: "Shop"))
        }
        #expect(after == 0)
    }

    private func resetStore(_ coordinator: PersistentStoreCoordinator, _ url: URL) async throws {
        for store in coordinator.persistentStores { try coordinator.remove(store) }
        try coordinator.destroyPersistentStore(at: url, type: .eventLog)
        try coordinator.addPersistentStore(type: .eventLog, at: url)
    }

    /// Destroys the store at `url` (no reference to it left) and adds a new one there.
    private func destroyAndReAdd(_ coordinator: PersistentStoreCoordinator, _ url: URL, previous: UUID) async throws {
        try coordinator.destroyPersistentStore(at: url, type: .eventLog)
        let third = try coordinator.addPersistentStore(type: .eventLog, at: url)
        #expect(third.identifier != previous)
        let count = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) in
            try context.count(for: FetchRequest(entityName: "Shop"))
        }
        #expect(count == 0)
    }

    @Test("ManagedObjectID: Sendable, Hashable, Codable through JSON; garbage decodes to a clear DecodingError")
    func objectIDCodable() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try KVCStackModels.shop)
        let context = privateContext(coordinator)
        let (temporary, permanent) = try await context.perform { (context: isolated ManagedObjectContext) in
            let item = try context.insertNewObject(forEntityName: "Item")
            let temporary = item.objectID
            try context.save()
            return (temporary, item.objectID)
        }
        let ids = [temporary, permanent]
        let data = try JSONEncoder().encode(ids)
        let decoded = try JSONDecoder().decode([ManagedObjectID].self, from: data)
        #expect(decoded == ids)
        #expect(Set(decoded).count == 2)
        #expect(decoded[1].hashValue == permanent.hashValue)
        struct Box: Codable { var id: ManagedObjectID }
        for garbage in [#"{"id":"hello"}"#, #"{"id":42}"#, #"{"id":"x-strata://X/Item/p1"}"#, #"{"id":null}"#] {
            var caught: (any Error)?
            do { _ = try JSONDecoder().decode(Box.self, from: Data(garbage.utf8)) } catch { caught = error }
            #expect(caught is DecodingError, "\(garbage)")
        }
        // Sendable: passes into another task.
        let sent = await Task.detached { permanent }.value
        #expect(sent == permanent)
    }

    @Test("PersistentContainer: name, model, store URL, viewContext on the main queue, background contexts share the store")
    func container() async throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("nested/Shop.strata")
        let container = PersistentContainer(name: "Shop", managedObjectModel: try KVCStackModels.shop, storeURL: url)
        #expect(container.name == "Shop")
        #expect(container.storeURL == url)
        #expect(container.managedObjectModel.entity(named: "Item") != nil)
        var loaded: PersistentStore?
        var failure: (any Error)?
        container.loadPersistentStores { store, error in
            loaded = store
            failure = error
        }
        #expect(failure == nil)
        #expect(loaded?.url == url)
        #expect(container.viewContext === container.viewContext)
        #expect(container.viewContext.concurrencyType == .mainQueue)
        let background = container.newBackgroundContext()
        #expect(background.concurrencyType == .privateQueue)
        #expect(background !== container.newBackgroundContext())
        let id = try await background.perform { (context: isolated ManagedObjectContext) in
            let shop = try context.insertNewObject(forEntityName: "Shop")
            shop.setValue("Corner", forKey: "name")
            try context.save()
            return shop.objectID
        }
        let name = try await container.viewContext.perform { (context: isolated ManagedObjectContext) in
            try context.existingObject(with: id).value(forKey: "name") as? String
        }
        #expect(name == "Corner")
        let again = try background.performAndWait { (context: isolated ManagedObjectContext) in
            try context.count(for: FetchRequest(entityName: "Shop"))
        }
        #expect(again == 1)
        // Loading again: a clear error, the store still there.
        var second: (any Error)?
        container.loadPersistentStores { _, error in second = error }
        #expect(second != nil)
        #expect(container.persistentStoreCoordinator.persistentStores.count == 1)
        // An in-memory container.
        let memory = PersistentContainer(name: "Mem", managedObjectModel: try KVCStackModels.shop, storeType: .inMemory)
        try memory.loadPersistentStores()
        #expect(memory.persistentStoreCoordinator.persistentStores.first?.type == .inMemory)
    }
}
