import Foundation
import Strata
import StrataTestSupport
import Testing

/// The coordinator's store management (spec 0006 §19): user metadata, reading and setting a
/// closed store's metadata, destroying and replacing stores, and store descriptions.
@Suite("Store management")
struct StoreManagementTests {
    // MARK: - Fixtures

    /// Saves teams named `names` through a new context on `coordinator`.
    func saveTeams(_ coordinator: PersistentStoreCoordinator, _ names: [String]) throws {
        try privateContext(coordinator).performAndWait { context in
            for name in names {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue(name, forKey: "name")
                try context.save()
            }
        }
    }

    /// The names of the store's teams, sorted.
    func teamNames(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
        try privateContext(coordinator).performAndWait { context in
            try context.fetch(FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "name")]))
                .map { $0.value(forKey: "name") as? String ?? "?" }
        }
    }

    /// A coordinator with the store at `url` added.
    func coordinator(at url: URL) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        try coordinator.addPersistentStore(type: .eventLog, at: url)
        return coordinator
    }

    /// Every file under `path` with its bytes.
    func contents(_ path: String) throws -> [String: Data] {
        var result: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(atPath: path)
        while let name = enumerator?.nextObject() as? String {
            let full = (path as NSString).appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue {
                result[name] = try Data(contentsOf: URL(fileURLWithPath: full))
            }
        }
        return result
    }

    /// A metadata dictionary with every value type, including exact-bit doubles and dates.
    static let sample: [String: MetadataValue] = [
        "name": "League import",
        "revision": 3,
        "largest": .integer(.max),
        "smallest": .integer(.min),
        "ratio": 0.1,
        "infinite": .double(-.infinity),
        "enabled": true,
        "lastSync": .date(Date(timeIntervalSinceReferenceDate: 786_245_000.123_456_789)),
        "token": .data(Data([0, 1, 2, 0xfe, 0xff])),
        "tags": ["a", 1, false],
        "nested": ["inner": ["deep": .data(Data())], "when": .date(Date(timeIntervalSinceReferenceDate: -1.5))],
        "unicode": "Zoë 🦦",
    ]

    // MARK: - User metadata

    @Test("user metadata of every type round-trips through the store: merged with Strata's keys, after a reopen, and read closed")
    func metadataRoundTrips() throws {
        let directory = try TemporaryDirectory()
        let url = directory.url.appendingPathComponent("store")
        let first = try coordinator(at: url)
        let store = try #require(first.persistentStores.first)
        let head = try store.log.head
        try first.setMetadata(Self.sample, for: store)
        let merged = first.metadata(for: store)
        for (key, value) in Self.sample { #expect(merged[key] == value, "\(key)") }
        #expect(merged["StoreUUID"] == .string(store.identifier.uuidString))
        #expect(merged["StoreType"] == "EventLog")
        #expect(merged["EntityVersionHash.Team"] != nil)
        #expect(try store.log.head == head, "setting metadata writes no event")
        try first.remove(store)

        let second = try coordinator(at: url)
        let reopened = second.metadata(for: try #require(second.persistentStores.first))
        #expect(reopened == merged)
        let closed = try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: url)
        #expect(closed == merged)
        #expect(try store.log.userMetadata() == Self.sample)
    }

    @Test("a NaN survives the store (it equals nothing, so it is checked apart)")
    func nanSurvives() throws {
        let directory = try TemporaryDirectory()
        let coordinator = try coordinator(at: directory.url.appendingPathComponent("store"))
        let store = try #require(coordinator.persistentStores.first)
        try coordinator.setMetadata(["nan": .double(.nan)], for: store)
        guard case .double(let value)? = try store.log.userMetadata()["nan"] else {
            Issue.record("no double stored")
            return
        }
        #expect(value.isNaN)
    }

    @Test("the read-change-set pattern: Strata's keys passed back unchanged are accepted; a key left out is removed")
    func readChangeSet() throws {
        let directory = try TemporaryDirectory()
        let url = directory.url.appendingPathComponent("store")
        let coordinator = try coordinator(at: url)
        let store = try #require(coordinator.persistentStores.first)
        var metadata = coordinator.metadata(for: store)
        metadata["imported"] = true
        metadata["source"] = "csv"
        try coordinator.setMetadata(metadata, for: store)
        var again = coordinator.metadata(for: store)
        #expect(again["imported"] == true)
        again["source"] = nil
        try coordinator.setMetadata(again, for: store)
        #expect(try store.log.userMetadata() == ["imported": true])
        #expect(coordinator.metadata(for: store)["source"] == nil)
        try coordinator.setMetadata([:], for: store)
        #expect(try store.log.userMetadata().isEmpty)
    }

    @Test("Strata's keys can't be changed: the error names the key and nothing is written")
    func reservedKeysRefused() throws {
        let directory = try TemporaryDirectory()
        let url = directory.url.appendingPathComponent("store")
        let coordinator = try coordinator(at: url)
        let store = try #require(coordinator.persistentStores.first)
        try coordinator.setMetadata(["kept": 1], for: store)
        for (key, value) in [
            ("StoreUUID", MetadataValue.string(UUID().uuidString)), ("StoreType", "InMemory"), ("ModelVersionHash", 7),
            ("EntityVersionHash.Team", "00"), ("EntityVersionHash.Stadium", "00"),
        ] {
            do {
                try coordinator.setMetadata(["kept": 2, key: value], for: store)
                Issue.record("\(key) was accepted")
            } catch let error as PersistentStoreError {
                guard case .reservedMetadataKey(let named, _) = error else {
                    Issue.record("\(key): \(error)")
                    continue
                }
                #expect(named == key)
                #expect(error.description.contains("\"\(key)\""), "\(error)")
                #expect((error as NSError).code == 134060)
            }
        }
        #expect(try store.log.userMetadata() == ["kept": 1])
        #expect(try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: url)["kept"] == 1)
    }

    struct Point: Sendable {}

    @Test("property-list values convert; anything else is refused naming the key (path) and its type, writing nothing")
    func propertyListValues() throws {
        let directory = try TemporaryDirectory()
        let coordinator = try coordinator(at: directory.url.appendingPathComponent("store"))
        let store = try #require(coordinator.persistentStores.first)
        let date = Date(timeIntervalSinceReferenceDate: 12.25)
        try coordinator.setMetadata(
            propertyList: [
                "s": "text", "i": 42, "u8": UInt8(7), "d": 2.5, "f": Float(0.5), "b": true, "date": date, "data": Data([9]),
                "list": [1, "two"] as [any Sendable], "map": ["k": 1] as [String: any Sendable],
            ], for: store)
        #expect(try store.log.userMetadata() == [
            "s": "text", "i": 42, "u8": 7, "d": 2.5, "f": 0.5, "b": true, "date": .date(date), "data": .data(Data([9])),
            "list": [1, "two"], "map": ["k": 1],
        ])
        let refusals: [(String, any Sendable, String, String)] = [
            ("point", Point(), "point", "Point"),
            ("list", [1, Point()] as [any Sendable], "list[1]", "Point"),
            ("map", ["inner": Point()] as [String: any Sendable], "map[\"inner\"]", "Point"),
            ("huge", UInt64.max, "huge", "UInt64"),
        ]
        for (key, value, path, type) in refusals {
            #expect {
                try coordinator.setMetadata(propertyList: ["fine": 1, key: value], for: store)
            } throws: { error in
                guard case .unsupportedMetadataValue(let named, let typeName) = error as? PersistentStoreError else { return false }
                return named == path && typeName == type && "\(error)".contains(type)
            }
        }
        #expect(try store.log.userMetadata()["fine"] == nil)
    }

    @Test("a read-only store's metadata can't be set")
    func readOnlyMetadata() throws {
        let directory = try TemporaryDirectory()
        let url = directory.url.appendingPathComponent("store")
        try saveTeams(try coordinator(at: url), ["Otters"])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        let description = PersistentStoreDescription(url: url)
        description.isReadOnly = true
        let store = try coordinator.addPersistentStore(with: description)
        #expect(store.isReadOnly)
        #expect(throws: PersistentStoreError.readOnlyStore(path: url.path)) { try coordinator.setMetadata(["a": 1], for: store) }
    }

    @Test("metadataForPersistentStore(type:at:) reads a closed store without writing; a missing path, a file and a non-store directory are named")
    func metadataOfClosedStore() throws {
        let directory = try TemporaryDirectory()
        let url = directory.url.appendingPathComponent("store")
        do {
            let coordinator = try coordinator(at: url)
            try coordinator.setMetadata(["owner": "ops"], for: try #require(coordinator.persistentStores.first))
        }
        // LMDB's lock file holds the reader table, which any read uses; the store's data is
        // what must not change.
        let before = try contents(url.path).filter { $0.key != "lock.mdb" }
        let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: url)
        #expect(metadata["owner"] == "ops")
        #expect(metadata["StoreType"] == "EventLog")
        #expect(try contents(url.path).filter { $0.key != "lock.mdb" } == before, "reading metadata wrote to the store")

        let missing = directory.url.appendingPathComponent("missing")
        #expect(throws: PersistentStoreError.noStore(path: missing.path)) {
            try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: missing)
        }
        #expect(!FileManager.default.fileExists(atPath: missing.path))
        let file = directory.file("notes.txt")
        try Data("hello".utf8).write(to: URL(fileURLWithPath: file))
        #expect {
            try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: URL(fileURLWithPath: file))
        } throws: { error in
            guard case .notAStore(let path, _) = error as? PersistentStoreError else { return false }
            return path == file && (error as NSError).code == 259
        }
        let other = directory.file("photos")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: false)
        #expect {
            try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: URL(fileURLWithPath: other))
        } throws: { error in
            guard case .notAStore(let path, _) = error as? PersistentStoreError else { return false }
            return path == other
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: other).isEmpty)
    }

    @Test("a damaged metadata row: adding the store and reading its metadata fail naming the key; the static setter replaces it")
    func damagedMetadataRow() throws {
        let directory = try TemporaryDirectory()
        let url = directory.url.appendingPathComponent("store")
        do { _ = try coordinator(at: url) }
        do {
            let environment = try LMDBEnvironment(path: url.path, databases: [DatabaseDescriptor("meta")])
            let meta = try environment.database(named: "meta")
            try environment.write { txn in
                try txn.put(Array(#"{"count": {"integer": "many"}}"#.utf8), forKey: Array("userMetadata".utf8), in: meta)
            }
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        #expect {
            try coordinator.addPersistentStore(type: .eventLog, at: url)
        } throws: { error in
            "\(error)".contains("\"count\"") && "\(error)".contains("many")
        }
        #expect(coordinator.persistentStores.isEmpty)
        #expect(throws: LogError.self) { try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: url) }
        try PersistentStoreCoordinator.setMetadata(["count": 3], type: .eventLog, at: url)
        let store = try coordinator.addPersistentStore(type: .eventLog, at: url)
        #expect(coordinator.metadata(for: store)["count"] == 3)
    }

    @Test("setMetadata(_:type:at:) sets a closed store's metadata with the same rules")
    func setMetadataOfClosedStore() throws {
        let directory = try TemporaryDirectory()
        let url = directory.url.appendingPathComponent("store")
        do { _ = try coordinator(at: url) }
        var metadata = try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: url)
        metadata["migratedBy"] = "tool"
        try PersistentStoreCoordinator.setMetadata(metadata, type: .eventLog, at: url)
        #expect(try PersistentStoreCoordinator.metadataForPersistentStore(type: .eventLog, at: url)["migratedBy"] == "tool")
        #expect(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator.setMetadata(["StoreUUID": "x"], type: .eventLog, at: url)
        }
        let reopened = try coordinator(at: url)
        #expect(reopened.metadata(for: try #require(reopened.persistentStores.first))["migratedBy"] == "tool")
    }

    // MARK: - Destroy

    @Test("destroy removes every file of a compacted store and its directory; a missing store is not an error")
    func destroyRemovesStore() throws {
        let directory = try TemporaryDirectory()
        let url = directory.url.appendingPathComponent("store")
        do {
            let coordinator = try coordinator(at: url)
            try saveTeams(coordinator, (0..<40).map { "Team \($0)" })
            let store = try #require(coordinator.persistentStores.first)
            var request = CompactionRequest(before: try store.log.head - 5)
            request.usesDictionary = true
            request.eventsPerFrame = 8
            _ = try store.log.compact(request)
            #expect(!(try store.log.segments()).isEmpty)
            try coordinator.remove(store)
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        try coordinator.destroyPersistentStore(at: url, type: .eventLog)
        #expect(!FileManager.default.fileExists(atPath: url.path))
        #expect(FileManager.default.fileExists(atPath: directory.path))
        try coordinator.destroyPersistentStore(at: url, type: .eventLog)
        // A new store can be made there.
        let fresh = try self.coordinator(at: url)
        #expect(try teamNames(fresh).isEmpty)
    }

    @Test("destroy refuses, removing nothing, a file, a directory with the user's files, and an environment that isn't a store")
    func destroyRefusesNonStore() throws {
        let directory = try TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)

        let documents = directory.file("Documents")
        try FileManager.default.createDirectory(atPath: documents, withIntermediateDirectories: false)
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: (documents as NSString).appendingPathComponent("thesis.txt")))
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: (documents as NSString).appendingPathComponent("data.mdb")))
        let before = try contents(documents)
        #expect {
            try coordinator.destroyPersistentStore(at: URL(fileURLWithPath: documents), type: .eventLog)
        } throws: { error in
            guard case .notAStore(_, let reason) = error as? PersistentStoreError else { return false }
            return reason.contains("thesis.txt")
        }
        #expect(try contents(documents) == before)

        // Only a data.mdb, but not an LMDB file.
        let fake = directory.file("fake")
        try FileManager.default.createDirectory(atPath: fake, withIntermediateDirectories: false)
        try Data(repeating: 0x5a, count: 8192).write(to: URL(fileURLWithPath: (fake as NSString).appendingPathComponent("data.mdb")))
        #expect(throws: PersistentStoreError.self) { try coordinator.destroyPersistentStore(at: URL(fileURLWithPath: fake), type: .eventLog) }
        #expect(FileManager.default.fileExists(atPath: (fake as NSString).appendingPathComponent("data.mdb")))

        // An LMDB environment of someone else's (no store identity).
        let foreign = directory.file("foreign")
        do {
            let environment = try LMDBEnvironment(path: foreign, databases: [DatabaseDescriptor("meta")])
            let meta = try environment.database(named: "meta")
            try environment.write { txn in try txn.put(Array("x".utf8), forKey: Array("other".utf8), in: meta) }
        }
        let foreignBefore = try contents(foreign)
        #expect(throws: PersistentStoreError.self) { try coordinator.destroyPersistentStore(at: URL(fileURLWithPath: foreign), type: .eventLog) }
        #expect(try contents(foreign).keys.contains("data.mdb"))
        #expect(try contents(foreign)["data.mdb"] == foreignBefore["data.mdb"])

        let file = directory.file("store.sqlite")
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        #expect(throws: PersistentStoreError.self) { try coordinator.destroyPersistentStore(at: URL(fileURLWithPath: file), type: .eventLog) }
        #expect(FileManager.default.fileExists(atPath: file))
    }

    @Test("destroy refuses a store this coordinator has, one open elsewhere in the process and one open in another process; the store stays whole")
    func destroyRefusesOpenStore() throws {
        let directory = try TemporaryDirectory()
        let url = directory.url.appendingPathComponent("store")
        let owner = try coordinator(at: url)
        try saveTeams(owner, ["Otters"])
        #expect {
            try owner.destroyPersistentStore(at: url, type: .eventLog)
        } throws: { error in
            guard case .storeInUse(let path, let detail) = error as? PersistentStoreError else { return false }
            return path == url.path && detail.contains("this coordinator")
        }
        let other = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        #expect {
            try other.destroyPersistentStore(at: url, type: .eventLog)
        } throws: { error in
            guard case .storeInUse(_, let detail) = error as? PersistentStoreError else { return false }
            return detail.contains("this process")
        }
        try saveTeams(owner, ["Herons"])
        #expect(try teamNames(owner) == ["Herons", "Otters"])
        let store = try #require(owner.persistentStores.first)
        #expect(try store.log.verify().isClean)
        try owner.remove(store)
    }

    @Test("destroy refuses a store another process has open, naming the process; once it exits, destroy works")
    func destroyRefusesStoreOpenInAnotherProcess() throws {
        let directory = try TemporaryDirectory()
        let url = directory.url.appendingPathComponent("store")
        let owner = try coordinator(at: url)
        let teamURI = try privateContext(owner).performAndWait { context in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            try context.save()
            return team.objectID.uriRepresentation().absoluteString
        }
        try owner.remove(try #require(owner.persistentStores.first))
        let probe = try ContextProbeProcess(["watch", url.path, teamURI])
        #expect(probe.nextLine() == "ready Otters")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        #expect {
            try coordinator.destroyPersistentStore(at: url, type: .eventLog)
        } throws: { error in
            guard case .storeInUse(_, let detail) = error as? PersistentStoreError else { return false }
            return detail.contains("process \(probe.process.processIdentifier)")
        }
        #expect(FileManager.default.fileExists(atPath: url.appendingPathComponent("data.mdb").path))
        // Replacing it is refused the same way.
        let sourceURL = directory.url.appendingPathComponent("source")
        do {
            let source = try self.coordinator(at: sourceURL)
            try source.remove(try #require(source.persistentStores.first))
        }
        #expect {
            try coordinator.replacePersistentStore(at: url, withPersistentStoreFrom: sourceURL, type: .eventLog)
        } throws: { error in
            guard case .storeInUse(_, let detail) = error as? PersistentStoreError else { return false }
            return detail.contains("process \(probe.process.processIdentifier)")
        }
        probe.send("check")
        #expect(probe.nextLine()?.hasPrefix("name Otters") == true, "the probe's store is still the one it opened")
        let (status, errors) = try probe.finish()
        #expect(status == 0, "\(errors)")
        try coordinator.destroyPersistentStore(at: url, type: .eventLog)
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }

    // MARK: - Replace

    @Test("replace copies a compacted store over another: verify is clean, contents, UUID and segments match, nothing is left beside it")
    func replaceCopiesCompactedStore() throws {
        let directory = try TemporaryDirectory()
        let sourceURL = directory.url.appendingPathComponent("source")
        let destinationURL = directory.url.appendingPathComponent("destination")
        let source = try coordinator(at: sourceURL)
        let sourceStore = try #require(source.persistentStores.first)
        // Enough transactions for zstd to train a dictionary (spec 0004 §7), one team each;
        // STRATA_REPLACE_TRANSACTIONS makes the store larger.
        let count = max(100, ProcessInfo.processInfo.environment["STRATA_REPLACE_TRANSACTIONS"].flatMap { Int($0) } ?? 300)
        let names = (0..<count).map { String(format: "Team %06d", $0) }
        for name in names {
            var draft = TransactionDraft(author: "seed")
            _ = draft.insert("Team", values: ["name": .attribute(.string(name))])
            try sourceStore.log.commit(draft)
        }
        var request = CompactionRequest(before: try sourceStore.log.head - 10)
        request.usesDictionary = true
        request.eventsPerFrame = 8
        _ = try sourceStore.log.compact(request)
        let segments = try sourceStore.log.segments()
        #expect(!segments.isEmpty)
        try source.setMetadata(["backup": "nightly"], for: sourceStore)
        do {
            let old = try coordinator(at: destinationURL)
            try saveTeams(old, ["Old team"])
            try old.remove(try #require(old.persistentStores.first))
        }

        // The source stays added (and written after) while it is copied.
        let manager = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        try manager.replacePersistentStore(at: destinationURL, withPersistentStoreFrom: sourceURL, type: .eventLog)
        try saveTeams(source, ["After the copy"])

        let copy = try EventLog(openingExistingAt: destinationURL.path, readOnly: true)
        #expect(try copy.verify().isClean)
        #expect(copy.storeUUID == sourceStore.identifier)
        #expect(try copy.segments() == segments)
        #expect(segments.contains { $0.dictionaryFileName != nil }, "the fixture should compact with a dictionary")
        let copied = try contents(destinationURL.path)
        let original = try contents(sourceURL.path)
        for name in segments.flatMap({ [$0.fileName] + ($0.dictionaryFileName.map { [$0] } ?? []) }).map({ "segments/\($0)" }) {
            #expect(copied[name] != nil && copied[name] == original[name], "\(name)")
        }
        let replaced = try coordinator(at: destinationURL)
        #expect(try teamNames(replaced) == names)
        #expect(replaced.metadata(for: try #require(replaced.persistentStores.first))["backup"] == "nightly")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix(".") }
        #expect(leftovers.isEmpty, "\(leftovers)")
        #expect(try teamNames(source).count == names.count + 1)
    }

    /// A store of `count` one-team transactions, compacted but for the last ten; its
    /// coordinator and segment file names.
    func compactedStore(at url: URL, count: Int = 200) throws -> (PersistentStoreCoordinator, [String]) {
        let coordinator = try coordinator(at: url)
        let store = try #require(coordinator.persistentStores.first)
        for index in 0..<count {
            var draft = TransactionDraft(author: "seed")
            _ = draft.insert("Team", values: ["name": .attribute(.string(String(format: "Team %04d", index)))])
            try store.log.commit(draft)
        }
        var request = CompactionRequest(before: try store.log.head - 10)
        request.eventsPerFrame = 16
        _ = try store.log.compact(request)
        return (coordinator, try store.log.segments().map(\.fileName))
    }

    @Test("a segment file a purge set aside after the copy's snapshot (.purged-T-NAME) is copied from there")
    func copyFindsSetAsideSegment() throws {
        let directory = try TemporaryDirectory()
        let sourceURL = directory.url.appendingPathComponent("source")
        let (source, files) = try compactedStore(at: sourceURL)
        let name = try #require(files.first)
        let segments = sourceURL.appendingPathComponent("segments")
        // What a purge committed after the copy's snapshot does to a file that snapshot names.
        try FileManager.default.moveItem(
            at: segments.appendingPathComponent(name), to: segments.appendingPathComponent(".purged-999999-\(name)"))
        let destinationURL = directory.url.appendingPathComponent("copy")
        try source.replacePersistentStore(at: destinationURL, withPersistentStoreFrom: sourceURL, type: .eventLog)
        let copy = try EventLog(openingExistingAt: destinationURL.path, readOnly: true)
        #expect(try copy.verify().isClean)
        #expect(try FileManager.default.contentsOfDirectory(atPath: destinationURL.appendingPathComponent("segments").path) == [name])
        #expect(try teamNames(try coordinator(at: destinationURL)).count == 200)
    }

    @Test("a copy that fails (a segment file missing) replaces nothing and leaves nothing beside the destination")
    func failedCopyReplacesNothing() throws {
        let directory = try TemporaryDirectory()
        let sourceURL = directory.url.appendingPathComponent("source")
        let (source, files) = try compactedStore(at: sourceURL)
        let name = try #require(files.first)
        try FileManager.default.removeItem(at: sourceURL.appendingPathComponent("segments/\(name)"))
        let destinationURL = directory.url.appendingPathComponent("destination")
        do {
            let old = try coordinator(at: destinationURL)
            try saveTeams(old, ["Old team"])
            try old.remove(try #require(old.persistentStores.first))
        }
        let before = try contents(destinationURL.path).filter { $0.key != "lock.mdb" }
        #expect {
            try source.replacePersistentStore(at: destinationURL, withPersistentStoreFrom: sourceURL, type: .eventLog)
        } throws: { error in
            "\(error)".contains(name)
        }
        #expect(try contents(destinationURL.path).filter { $0.key != "lock.mdb" } == before)
        #expect(try teamNames(try coordinator(at: destinationURL)) == ["Old team"])
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix(".") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test("replace creates a missing destination (parent directories too) from a closed source")
    func replaceCreatesDestination() throws {
        let directory = try TemporaryDirectory()
        let sourceURL = directory.url.appendingPathComponent("source")
        do {
            let source = try coordinator(at: sourceURL)
            try saveTeams(source, ["Otters", "Herons"])
            try source.remove(try #require(source.persistentStores.first))
        }
        let destinationURL = directory.url.appendingPathComponent("backups/one/store")
        let manager = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        try manager.replacePersistentStore(at: destinationURL, withPersistentStoreFrom: sourceURL, type: .eventLog)
        #expect(try EventLog(openingExistingAt: destinationURL.path, readOnly: true).verify().isClean)
        #expect(try teamNames(try coordinator(at: destinationURL)) == ["Herons", "Otters"])
    }

    @Test("replace refuses an open destination, a non-store destination, a missing source and the store itself, changing nothing")
    func replaceRefusals() throws {
        let directory = try TemporaryDirectory()
        let sourceURL = directory.url.appendingPathComponent("source")
        let destinationURL = directory.url.appendingPathComponent("destination")
        do {
            let source = try coordinator(at: sourceURL)
            try saveTeams(source, ["Otters"])
            try source.remove(try #require(source.persistentStores.first))
        }
        let holder = try coordinator(at: destinationURL)
        try saveTeams(holder, ["Keep"])
        #expect {
            try holder.replacePersistentStore(at: destinationURL, withPersistentStoreFrom: sourceURL, type: .eventLog)
        } throws: { error in
            guard case .storeInUse = error as? PersistentStoreError else { return false }
            return true
        }
        let other = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        #expect {
            try other.replacePersistentStore(at: destinationURL, withPersistentStoreFrom: sourceURL, type: .eventLog)
        } throws: { error in
            guard case .storeInUse(_, let detail) = error as? PersistentStoreError else { return false }
            return detail.contains("this process")
        }
        #expect(try teamNames(holder) == ["Keep"])

        let documents = directory.file("Documents")
        try FileManager.default.createDirectory(atPath: documents, withIntermediateDirectories: false)
        try Data("keep".utf8).write(to: URL(fileURLWithPath: (documents as NSString).appendingPathComponent("notes.txt")))
        #expect(throws: PersistentStoreError.self) {
            try other.replacePersistentStore(at: URL(fileURLWithPath: documents), withPersistentStoreFrom: sourceURL, type: .eventLog)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: documents) == ["notes.txt"])

        let missing = directory.url.appendingPathComponent("missing")
        #expect(throws: PersistentStoreError.noStore(path: missing.path)) {
            try other.replacePersistentStore(at: directory.url.appendingPathComponent("new"), withPersistentStoreFrom: missing, type: .eventLog)
        }
        #expect(throws: ContextError.self) {
            try other.replacePersistentStore(at: sourceURL, withPersistentStoreFrom: sourceURL, type: .eventLog)
        }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix(".") || $0 == "new" }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    // MARK: - Descriptions

    @Test("a container has one description for its store URL and type by default")
    func defaultDescription() throws {
        let directory = try TemporaryDirectory()
        let url = directory.url.appendingPathComponent("League.strata")
        let container = PersistentContainer(name: "League", managedObjectModel: try SeedModels.leagueManager, storeURL: url)
        let description = try #require(container.persistentStoreDescriptions.first)
        #expect(container.persistentStoreDescriptions.count == 1)
        #expect(description.url == url)
        #expect(description.type == .eventLog)
        #expect(!description.isReadOnly)
        try container.loadPersistentStores()
        let store = try #require(container.persistentStoreCoordinator.persistentStores.first)
        #expect(store.url == url)
    }

    @Test("Core Data's in-memory idioms: the URL /dev/null, or the type .inMemory, give an in-memory store")
    func inMemoryDescriptions() async throws {
        let directory = try TemporaryDirectory()
        for idiom in ["devnull", "type"] {
            let url = directory.url.appendingPathComponent("\(idiom).strata")
            let container = PersistentContainer(name: "League", managedObjectModel: try SeedModels.leagueManager, storeURL: url)
            if idiom == "devnull" {
                container.persistentStoreDescriptions.first?.url = URL(fileURLWithPath: "/dev/null")
            } else {
                container.persistentStoreDescriptions.first?.type = .inMemory
            }
            try container.loadPersistentStores()
            let store = try #require(container.persistentStoreCoordinator.persistentStores.first)
            #expect(store.type == .inMemory, "\(idiom)")
            #expect(store.url == nil)
            try saveTeams(container.persistentStoreCoordinator, ["Otters"])
            #expect(try teamNames(container.persistentStoreCoordinator) == ["Otters"])
            #expect(!FileManager.default.fileExists(atPath: url.path), "\(idiom)")
        }
    }

    @Test("an in-memory store takes user metadata; destroy, replace and the static metadata calls refuse .inMemory")
    func inMemoryStoreManagement() throws {
        let directory = try TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        let store = try coordinator.addPersistentStore(with: PersistentStoreDescription(type: .inMemory))
        try coordinator.setMetadata(["scratch": true], for: store)
        #expect(coordinator.metadata(for: store)["scratch"] == true)
        #expect(coordinator.metadata(for: store)["StoreType"] == "InMemory")
        let url = directory.url.appendingPathComponent("store")
        #expect(throws: ContextError.self) { try coordinator.destroyPersistentStore(at: url, type: .inMemory) }
        #expect(throws: ContextError.self) {
            try coordinator.replacePersistentStore(at: url, withPersistentStoreFrom: directory.url.appendingPathComponent("other"), type: .inMemory)
        }
        #expect(throws: ContextError.self) { try PersistentStoreCoordinator.metadataForPersistentStore(type: .inMemory, at: url) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
        let readOnly = PersistentStoreDescription(type: .inMemory)
        readOnly.isReadOnly = true
        #expect(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager).addPersistentStore(with: readOnly)
        }
        #expect(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager).addPersistentStore(with: PersistentStoreDescription())
        }
    }

    @Test("a read-only description: the store loads, reads work, a save fails naming the store and nothing is written")
    func readOnlyDescription() throws {
        let directory = try TemporaryDirectory()
        let url = directory.url.appendingPathComponent("League.strata")
        do {
            let writer = try coordinator(at: url)
            try saveTeams(writer, ["Otters"])
            try writer.remove(try #require(writer.persistentStores.first))
        }
        let before = try contents(url.path).filter { $0.key != "lock.mdb" }
        let container = PersistentContainer(name: "League", managedObjectModel: try SeedModels.leagueManager, storeURL: url)
        container.persistentStoreDescriptions.first?.isReadOnly = true
        try container.loadPersistentStores()
        let coordinator = container.persistentStoreCoordinator
        #expect(try teamNames(coordinator) == ["Otters"])
        let thrown = privateContext(coordinator).performAndWait { context -> (any Error)? in
            do {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Herons", forKey: "name")
                try context.save()
                return nil
            } catch {
                return error
            }
        }
        let error = try #require(thrown)
        #expect("\(error)".contains("read-only") && "\(error)".contains(url.path), "\(error)")
        try coordinator.remove(try #require(coordinator.persistentStores.first))
        #expect(try contents(url.path).filter { $0.key != "lock.mdb" } == before)
    }

    @Test("more than one description is refused at load, naming the count; none loads nothing")
    func descriptionCount() throws {
        let directory = try TemporaryDirectory()
        let container = PersistentContainer(
            name: "League", managedObjectModel: try SeedModels.leagueManager, storeURL: directory.url.appendingPathComponent("a"))
        container.persistentStoreDescriptions.append(PersistentStoreDescription(url: directory.url.appendingPathComponent("b")))
        #expect {
            try container.loadPersistentStores()
        } throws: { error in
            guard case .invalidDescription(let detail) = error as? PersistentStoreError else { return false }
            return detail.contains("2 store descriptions")
        }
        #expect(container.persistentStoreCoordinator.persistentStores.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
        container.persistentStoreDescriptions = []
        try container.loadPersistentStores()
        #expect(container.persistentStoreCoordinator.persistentStores.isEmpty)
    }

    @Test("a description's log configuration reaches the store; one may be shared with another task")
    func descriptionConfiguration() async throws {
        let directory = try TemporaryDirectory()
        let description = PersistentStoreDescription(url: directory.url.appendingPathComponent("store"))
        var configuration = EventLog.Configuration()
        configuration.checkpointInterval = 7
        configuration.durability = .fast
        description.logConfiguration = configuration
        await Task.detached { description.isReadOnly = false }.value
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        let store = try coordinator.addPersistentStore(with: description)
        #expect(store.log.configuration.checkpointInterval == 7)
        #expect(store.log.configuration.durability == .fast)
        #expect("\(description)".contains(directory.url.appendingPathComponent("store").path))
    }
}
