import Foundation
import Strata
import StrataModel
import StrataTestSupport
import Testing

/// Seed 001's `Run` with the seed's accessors: will/didAccess around the primitive read,
/// will/didChange around the primitive write, and `setNilValueForKey` through the setter.
final class AccessorRun: ManagedObject {
    var processID: Int32 {
        get {
            willAccessValue(forKey: "processID")
            defer { didAccessValue(forKey: "processID") }
            return primitiveValue(forKey: "processID") as? Int32 ?? 0
        }
        set {
            willChangeValue(forKey: "processID")
            setPrimitiveValue(newValue, forKey: "processID")
            didChangeValue(forKey: "processID")
        }
    }

    override func awakeFromInsert() {
        super.awakeFromInsert()
        setPrimitiveValue(Date(), forKey: "date")
    }

    override func setNilValueForKey(_ key: String) {
        if key == "processID" { processID = 0 } else { super.setNilValueForKey(key) }
    }
}

/// A player whose `team` accessor is written with primitive values and change notification.
final class AccessorPlayer: ManagedObject {
    var team: ManagedObject? {
        get {
            willAccessValue(forKey: "team")
            defer { didAccessValue(forKey: "team") }
            return primitiveValue(forKey: "team") as? ManagedObject
        }
        set {
            willChangeValue(forKey: "team")
            setPrimitiveValue(newValue, forKey: "team")
            didChangeValue(forKey: "team")
        }
    }
}

@Suite("Porting a Core Data app: API a ported app calls")
struct PortingAPIGapTests {
    @Test("gap: custom accessors with will/didChangeValue and primitive values (seed 001's Run) are tracked, undone and maintain inverses")
    func customAccessors() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.run, classes: [(AccessorRun.self, "Run")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let run = try context.insert(AccessorRun.self, entityName: "Run")
            run.processID = 5
            try context.save()
            #expect(!run.hasPersistentChangedValues)
            run.processID = 42
            #expect(run.isUpdated && run.hasPersistentChangedValues)
            #expect(run.changedValues()["processID"] as? Int32 == 42)
            context.setActionName("Set PID")
            context.processPendingChanges()
            #expect(context.undoActionName == "Set PID")
            try context.undo()
            #expect(run.processID == 5, "the custom setter's change was recorded for undo")
            try context.redo()
            run.setValue(nil, forKey: "processID")
            #expect(run.processID == 0, "setNilValueForKey went through the custom setter")
            try context.undo()
            #expect(run.processID == 42)
            try context.save()
        }
        let saved = try await privateContext(try openCoordinator(dir, model: try SeedModels.run)).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Run")).first?.value(forKey: "processID") as? Int32
        }
        #expect(saved == 42)

        // A to-one set by a custom setter keeps its inverse.
        let leagueDirectory = try TemporaryDirectory()
        defer { withExtendedLifetime(leagueDirectory) {} }
        let league = try openCoordinator(leagueDirectory, model: try SeedModels.leagueManager, classes: [(AccessorPlayer.self, "Player")])
        try await privateContext(league).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            let player = try context.insert(AccessorPlayer.self, entityName: "Player")
            player.team = team
            #expect((team.value(forKey: "players") as? Set<ManagedObject>) == [player])
            try context.save()
            player.team = nil
            #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.isEmpty == true)
            try context.undo()
            #expect((team.value(forKey: "players") as? Set<ManagedObject>) == [player])
            #expect(player.team == team)
        }
    }

    @Test("gap: mutableOrderedSetValue(forKey:) inserts, moves and removes by position, with inverses and undo; bad indexes are refused at save")
    func mutableOrderedSet() async throws {
        let dir = try TemporaryDirectory()
        let container = try libraryContainer(dir)
        try await container.performBackgroundTask { try seedLibrary($0) }
        try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            let austen = try #require(try context.fetch(try FetchRequest(entityName: "Author", format: "name == 'Jane Austen'")).first)
            let zola = try #require(try context.fetch(try FetchRequest(entityName: "Author", format: "name == 'Émile Zola'")).first)
            let books = austen.mutableOrderedSetValue(forKey: "books")
            func titles() -> [String] { books.objects.compactMap { $0.value(forKey: "title") as? String } }
            let nana = try #require(zola.mutableOrderedSetValue(forKey: "books").object(at: 1))
            books.insert(nana, at: 1)
            #expect(titles() == ["Emma", "Nana", "Persuasion", "Sanditon"])
            #expect(nana.value(forKey: "author") as? ManagedObject == austen, "inverse set")
            #expect(zola.mutableOrderedSetValue(forKey: "books").count == 1)
            books.moveObject(at: 3, to: 0)
            #expect(titles() == ["Sanditon", "Emma", "Nana", "Persuasion"])
            books.insert(nana, at: 0)
            #expect(titles() == ["Nana", "Sanditon", "Emma", "Persuasion"], "inserting a member moves it")
            books.removeObject(at: 3)
            #expect(titles() == ["Nana", "Sanditon", "Emma"])
            #expect(books.index(of: nana) == 0)
            #expect(books.object(at: 7) == nil)
            try context.save()
            try context.undo()
            #expect(titles() == ["Emma", "Persuasion", "Sanditon"])
            #expect(nana.value(forKey: "author") as? ManagedObject == zola)
            try context.save()
            books.insert(nana, at: 9)
            books.removeObject(at: -1)
            #expect(titles() == ["Emma", "Persuasion", "Sanditon"], "nothing changed")
            let error = #expect(throws: ContextError.self) { try context.save() }
            #expect(error?.description.contains("index 9 is out of range") == true, "\(String(describing: error))")
        }
        let titles = try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            let austen = try #require(try context.fetch(try FetchRequest(entityName: "Author", format: "name == 'Jane Austen'")).first)
            return austen.mutableOrderedSetValue(forKey: "books").objects.compactMap { $0.value(forKey: "title") as? String }
        }
        #expect(titles == ["Emma", "Persuasion", "Sanditon"])
    }

    @Test("gap: insert(Book.self) finds the entity the class is registered for (Core Data's Book(context:))")
    func insertByClass() async throws {
        let dir = try TemporaryDirectory()
        let container = try libraryContainer(dir)
        try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            let book = try context.insert(PortBook.self)
            #expect(book.entity.name == "Book" && book.isInserted)
            #expect(book.pages == 0, "default value set")
            let error = #expect(throws: ContextError.self) { try context.insert(AccessorRun.self) }
            #expect(error?.description.contains("registered for no entity") == true, "\(String(describing: error))")
        }
        let twice = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        twice.register(AccessorPlayer.self, forEntityName: "Player")
        twice.register(AccessorPlayer.self, forEntityName: "Team")
        _ = try twice.addPersistentStore(type: .inMemory)
        try await privateContext(twice).perform { (context: isolated ManagedObjectContext) throws in
            let error = #expect(throws: ContextError.self) { try context.insert(AccessorPlayer.self) }
            #expect(error?.description.contains("several entities (Player, Team)") == true, "\(String(describing: error))")
        }
    }

    @Test("gap: perform(_:) without await schedules blocks in order from code that isn't async (Core Data's non-async perform)")
    func fireAndForgetPerform() async throws {
        let dir = try TemporaryDirectory()
        let container = try libraryContainer(dir)
        let context = container.newBackgroundContext()
        let saves = context.notifications(.didSave)
        scheduleImport(on: context)
        var iterator = saves.makeAsyncIterator()
        let save = try #require(await iterator.next())
        #expect(save.inserted.count == 3)
        let names = try await context.perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Tag", sortDescriptors: [FetchSortDescriptor(key: "name")])).compactMap { $0.value(forKey: "name") as? String }
        }
        #expect(names == ["t0", "t1", "t2"])
        // The main-queue context too.
        let view = container.viewContext
        scheduleCount(on: view)
        let counted = await view.perform { (context: isolated ManagedObjectContext) in context.name }
        #expect(counted == "3 tags")
    }
}

@Suite("Porting a Core Data app: loading stores")
struct PortingLoadTests {
    @Test("gap: loadPersistentStores(completionHandler:) hands over the store, or the error that says why it didn't open")
    func loadWithCompletionHandler() throws {
        let dir = try TemporaryDirectory()
        let container = PersistentContainer(name: "Library", managedObjectModel: try PortModels.library, storeURL: dir.url.appendingPathComponent("Library.strata"))
        var loaded: PersistentStore?
        var failure: (any Error)?
        container.loadPersistentStores { store, error in
            loaded = store
            failure = error
        }
        #expect(failure == nil)
        #expect(loaded?.url?.standardizedFileURL.path == dir.url.appendingPathComponent("Library.strata").standardizedFileURL.path)
        #expect(loaded?.type == .eventLog)
        // Loading twice fails, as adding the same store twice does.
        container.loadPersistentStores { store, error in
            loaded = store
            failure = error
        }
        #expect(loaded == nil)
        #expect(failure.map { "\($0)" }?.contains("already has a store") == true, "\(String(describing: failure))")
    }
}

/// Code that isn't async, as a Core Data app's callbacks are: three blocks, then a save.
private func scheduleImport(on context: ManagedObjectContext) {
    for i in 0..<3 {
        context.perform { (context: isolated ManagedObjectContext) in
            let tag = try? context.insertNewObject(forEntityName: "Tag")
            tag?.setValue("t\(i)", forKey: "name")
        }
    }
    context.perform { (context: isolated ManagedObjectContext) in
        do { try context.save() } catch { Issue.record("\(error)") }
    }
}

private func scheduleCount(on context: ManagedObjectContext) {
    context.perform { (context: isolated ManagedObjectContext) in
        context.name = "\((try? context.count(for: FetchRequest(entityName: "Tag"))) ?? -1) tags"
    }
}

@Suite("Porting a Core Data app: sorting a to-many in memory")
struct PortingSortTests {
    @Test("gap: seed 004's sorted players — a to-many's set sorted by descriptors (sortedArray(using:)), key paths and Swift key paths included")
    func sortedPlayers() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager, classes: [(SortablePlayer.self, "Player")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            for (first, last) in [("Zed", "young"), ("Ann", "Adams"), ("Mo", "Miller"), ("Al", "Adams"), ("Bo", nil)] as [(String, String?)] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(first, forKey: "firstName")
                player.setValue(last, forKey: "lastName")
                player.setValue(team, forKey: "team")
            }
            let players = (team.value(forKey: "players") as? Set<ManagedObject>) ?? []
            func names(_ sorted: [ManagedObject]) -> [String] { sorted.compactMap { $0.value(forKey: "firstName") as? String } }
            #expect(names(players.sorted(using: [FetchSortDescriptor(key: "lastName", caseInsensitive: true), FetchSortDescriptor(key: "firstName")])) == ["Bo", "Al", "Ann", "Mo", "Zed"])
            #expect(names(players.sorted(using: [FetchSortDescriptor(key: "lastName")])).first == "Bo", "nil first")
            #expect(names(players.sorted(using: [FetchSortDescriptor(key: "team.name"), FetchSortDescriptor(key: "firstName", ascending: false)])) == ["Zed", "Mo", "Bo", "Ann", "Al"])
            let typed = players.compactMap { $0 as? SortablePlayer }
            #expect(names(typed.sorted(using: [FetchSortDescriptor(\SortablePlayer.firstName)])) == ["Al", "Ann", "Bo", "Mo", "Zed"])
        }
    }
}

final class SortablePlayer: ManagedObject {
    var firstName: String? { self.get("firstName") }
}
