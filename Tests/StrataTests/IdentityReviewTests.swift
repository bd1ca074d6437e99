import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// Session 27 review of object identity, URIs and the store stack (specs 0005, 0006 §3, §19).
@Suite("Identity review (session 27)")
struct IdentityReviewTests {
    /// The error `body` throws, or nil with a recorded issue.
    func thrown(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> (any Error)? {
        do {
            try body()
            Issue.record("expected an error, got none", sourceLocation: sourceLocation)
        } catch {
            return error
        }
        return nil
    }

    // MARK: - URIs

    @Test("fix: the URI of an object of every entity name the model allows resolves back to its ID and decodes (before, ⅫTeam's and TeamⒶ's resolved to nil and didn't decode: the parser had a narrower rule of its own)")
    func everyModelNameRoundTrips() async throws {
        for name in ["ⅫTeam", "TeamⒶ", "Café", "_Under", "日本", "Ω2"] {
            let model = try ManagedObjectModel { Entity(name) { Attribute("name", .string) } }
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: model)
            let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let object = try context.insertNewObject(forEntityName: name)
                object.setValue("value of \(name)", forKey: "name")
                try context.save()
                return object.objectID
            }
            let uri = id.uriRepresentation()
            #expect(ObjectURI.parse(uri) != nil, "\(name): \(uri)")
            #expect(coordinator.managedObjectID(forURIRepresentation: uri) == id, "\(name): \(uri)")
            let decoded = try? JSONDecoder().decode(ManagedObjectID.self, from: JSONEncoder().encode(id))
            #expect(decoded == id, "\(name)")
            let value = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                guard let resolved = coordinator.managedObjectID(forURIRepresentation: uri) else { return nil as String? }
                return try context.existingObject(with: resolved).value(forKey: "name") as? String
            }
            #expect(value == "value of \(name)")
        }
        // Names the model refuses stay refused.
        for text in ["x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/1Team/p1", "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Te-am/p1",
                     "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Te%20am/p1", "x-strata:///%E2%91%A0Team/t6F1C2A3B-0000-4000-8000-00000000ABCD"] {
            #expect(ObjectURI.parse(text) == nil, "\(text)")
        }
    }

    // MARK: - Store URLs

    @Test("fix: a URL that isn't a file URL is refused, naming it, by addPersistentStore, a container, destroy, replace and migrate — nothing is created or deleted at its path (before, https://host/DIR/web made a store at DIR/web that persistentStore(for:) didn't find, and destroy deleted the store at the path)")
    func nonFileURLsAreRefused() async throws {
        let dir = try TemporaryDirectory()
        let web = try #require(URL(string: "https://example.com\(dir.path)/web"))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        let error = thrown { try coordinator.addPersistentStore(type: .eventLog, at: web) }
        #expect((error as? ContextError).map { "\($0)".contains(web.absoluteString) && "\($0)".contains("not a file URL") } == true, "\(String(describing: error))")
        #expect(coordinator.persistentStores.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: dir.file("web")))

        let container = PersistentContainer(name: "League", managedObjectModel: try SeedModels.leagueManager, storeURL: web)
        #expect(thrown { try container.loadPersistentStores() } is ContextError)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)

        // A store at the path the web URL's path names: destroy, replace and migrate leave it.
        let local = dir.url.appendingPathComponent("web")
        let owner = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        let store = try owner.addPersistentStore(type: .eventLog, at: local)
        try await privateContext(owner).perform { (context: isolated ManagedObjectContext) throws in
            try context.insertNewObject(forEntityName: "Team").setValue("Otters", forKey: "name")
            try context.save()
        }
        try owner.remove(store)
        let other = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        #expect(thrown { try other.destroyPersistentStore(at: web, type: .eventLog) } is ContextError)
        #expect(thrown { try other.replacePersistentStore(at: web, withPersistentStoreFrom: local, type: .eventLog) } is ContextError)
        #expect(thrown { _ = try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: web) } is ContextError)
        let added = try other.addPersistentStore(type: .eventLog, at: local)
        let elsewhere = try #require(URL(string: "https://example.com\(dir.path)/moved"))
        #expect(thrown { try other.migratePersistentStore(added, to: elsewhere) } is ContextError)
        #expect(other.persistentStores.first === added)
        #expect(!FileManager.default.fileExists(atPath: dir.file("moved")))
        let names = try await privateContext(other).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "Team")).compactMap { $0.value(forKey: "name") as? String }
        }
        #expect(names == ["Otters"])
    }

    // MARK: - Resolving IDs in a context

    @Test("fix: object(with:), existingObject(with:) and existingObjects(with:) say which case an ID they can't resolve is — another store's, another context's temporary ID, an unknown or abstract entity (before, every case said 'a temporary ID of another context or names an unknown entity')")
    func unresolvableIDErrorsSayWhich() async throws {
        let model = try ManagedObjectModel {
            Entity("Item", abstract: true) { Attribute("title", .string) }
            Entity("Book", parent: "Item") {}
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model)
        let otherDir = try TemporaryDirectory()
        let otherCoordinator = try openCoordinator(otherDir, model: model)
        let (foreign, foreignTemporary) = try await privateContext(otherCoordinator).perform { (context: isolated ManagedObjectContext) throws in
            let saved = try context.insertNewObject(forEntityName: "Book")
            try context.save()
            return (saved.objectID, try context.insertNewObject(forEntityName: "Book").objectID)
        }
        let store = try #require(coordinator.persistentStores.first).identifier.uuidString
        let abstract = try JSONDecoder().decode(ManagedObjectID.self, from: Data("\"x-strata://\(store)/Item/p1\"".utf8))
        let unknown = try JSONDecoder().decode(ManagedObjectID.self, from: Data("\"x-strata://\(store)/Song/p1\"".utf8))
        let cases: [(ManagedObjectID, String)] = [
            (foreign, "belongs to the store \(foreign.uriRepresentation().host ?? "?"), not this coordinator's store (\(store))"),
            (foreignTemporary, "is a temporary ID this context doesn't hold"),
            (abstract, "names the abstract entity Item"),
            (unknown, "names the entity Song, which the model doesn't have"),
        ]
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (id, says) in cases {
                for (call, body) in [
                    ("object(with:)", { _ = try context.object(with: id) }), ("existingObject(with:)", { _ = try context.existingObject(with: id) }),
                    ("existingObjects(with:)", { _ = try context.existingObjects(with: [id]) }),
                ] as [(String, () throws -> Void)] {
                    let error = thrown(body) as? ContextError
                    #expect(error?.code == 134030, "\(call) \(id)")
                    #expect(error.map { "\($0)".contains(says) } == true, "\(call) \(id): \(String(describing: error))")
                }
            }
        }
    }

    // MARK: - obtainPermanentIDs

    @Test("fix: obtainPermanentIDs on a read-only store fails with a context error (256, NSCocoaErrorDomain) saying the store is read-only, as a save does, and the object keeps its temporary ID (before, the log's own LogError escaped)")
    func obtainPermanentIDsReadOnly() async throws {
        let dir = try TemporaryDirectory()
        let writer = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try writer.remove(try #require(writer.persistentStores.first))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        let description = PersistentStoreDescription(url: dir.url.appendingPathComponent("store"))
        description.isReadOnly = true
        try coordinator.addPersistentStore(with: description)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            let temporary = team.objectID
            let error = thrown { try context.obtainPermanentIDs(for: [team]) }
            #expect(error is ContextError, "\(String(describing: error))")
            #expect(error.map { ($0 as NSError).domain } == NSCocoaErrorDomain)
            #expect((error as? ContextError)?.code == 256)
            #expect(error.map { "\($0)".contains("read-only") } == true)
            #expect(team.objectID == temporary && context.registeredObject(for: temporary) === team)
        }
    }

    // MARK: - Adding a store

    @Test("fix: adding a store at a file or at a directory of the user's gives PersistentStoreError.notAStore (259), a read-only add of a missing store noStore (260), through a container too, naming the path — nothing is written there (before, the log's own LogError escaped: 'The operation could not be completed. (StrataLog.LogError error 16.)')")
    func addingANonStoreIsAStoreError() throws {
        let dir = try TemporaryDirectory()
        try Data("hello".utf8).write(to: dir.url.appendingPathComponent("file"))
        try FileManager.default.createDirectory(atPath: dir.file("docs"), withIntermediateDirectories: true)
        try Data("mine".utf8).write(to: dir.url.appendingPathComponent("docs/notes.txt"))
        var readOnly = EventLog.Configuration()
        readOnly.isReadOnly = true
        let cases: [(String, EventLog.Configuration, Int)] = [
            ("file", EventLog.Configuration(), 259), ("docs", EventLog.Configuration(), 259), ("missing", readOnly, 260),
        ]
        for (name, configuration, code) in cases {
            let url = dir.url.appendingPathComponent(name)
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
            let error = thrown { try coordinator.addPersistentStore(type: .eventLog, at: url, configuration: configuration) }
            #expect(error is PersistentStoreError, "\(name): \(String(describing: error))")
            let ns = error.map { $0 as NSError }
            #expect(ns?.domain == NSCocoaErrorDomain && ns?.code == code, "\(name)")
            #expect(ns.map { $0.localizedDescription.contains(url.path) } == true, "\(name): \(String(describing: ns?.localizedDescription))")
            #expect(coordinator.persistentStores.isEmpty)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.file("docs")) == ["notes.txt"])
        #expect(!FileManager.default.fileExists(atPath: dir.file("missing")))
        let container = PersistentContainer(name: "League", managedObjectModel: try SeedModels.leagueManager, storeURL: dir.url.appendingPathComponent("docs"))
        var reported: (any Error)?
        container.loadPersistentStores { store, error in
            #expect(store == nil)
            reported = error
        }
        #expect(reported is PersistentStoreError, "\(String(describing: reported))")
    }

    @Test("fix: a read-only add of a store whose newest model isn't the coordinator's is PersistentStoreError.incompatibleModel (134100) naming the path and saying why, and writes nothing (before, the log's own LogError.modelMismatch escaped)")
    func readOnlyAddWithAnotherModel() throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("store")
        try PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager).addPersistentStore(type: .eventLog, at: url)
        let before = try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: url)
        let changed = try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Attribute("founded", .int64)
            }
        }
        let description = PersistentStoreDescription(url: url)
        description.isReadOnly = true
        let container = PersistentContainer(name: "League", managedObjectModel: changed, storeURL: url)
        container.persistentStoreDescriptions = [description]
        let error = thrown { try container.loadPersistentStores() }
        guard case .incompatibleModel(let path, let reason)? = error as? PersistentStoreError else {
            Issue.record("\(String(describing: error))")
            return
        }
        #expect(path == url.path)
        #expect(reason.contains("read-only"), "\(reason)")
        #expect(error.map { ($0 as NSError).code } == 134100)
        #expect(try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: url) == before)
    }
}
