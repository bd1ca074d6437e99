import Foundation
import Strata
import Synchronization
import StrataTestSupport
import Testing

// MARK: - Fixtures

/// Teams and people, with an indexed `age`, a sub-entity `Employee`, a date, a transient
/// attribute and a to-one/to-many pair.
func queryModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Team") {
            Attribute("name", .string)
            Relationship("members", to: "Person", inverse: "team", toMany: true)
        }
        Entity("Person") {
            Attribute("name", .string)
            Attribute("age", .int32).indexed()
            Attribute("nickname", .string)
            Attribute("joined", .date)
            Attribute("mood", .string).transient()
            Relationship("team", to: "Team", inverse: "members")
        }
        Entity("Employee", parent: "Person") {
            Attribute("salary", .double)
        }
    }
}

/// A person to insert: entity, name, age, nickname, team name, salary.
struct PersonRow: Sendable {
    var entity = "Person"
    var name: String
    var age: Int32?
    var nickname: String?
    var team: String?
    var salary: Double?
}

/// 2026-01-01T00:00:00Z, Ada's `joined`.
let queryEpoch = Date(timeIntervalSince1970: 1_767_225_600)

/// The people every query test starts with: Person and Employee objects, two of the same
/// age, one without an age, some without a team or nickname.
let queryPeople: [PersonRow] = [
    PersonRow(name: "Ada", age: 31, nickname: "A", team: "Otters"),
    PersonRow(name: "Ben", age: 24, team: "Herons"),
    PersonRow(name: "Cy", age: 40, nickname: "C"),
    PersonRow(name: "Dee", age: 31, team: "Otters"),
    PersonRow(name: "Eve", age: 58),
    PersonRow(name: "Hal", age: nil, team: "Herons"),
    PersonRow(entity: "Employee", name: "Fay", age: 35, team: "Otters", salary: 5000),
    PersonRow(entity: "Employee", name: "Gus", age: 22, team: "Herons", salary: 3000.5),
]

/// Inserts `people` (and the teams they name, if missing) and saves, through `context`.
func insertPeople(_ people: [PersonRow], into context: ManagedObjectContext) throws {
    try context.performAndWait { context in
        var teams: [String: ManagedObject] = [:]
        for team in try context.fetch(FetchRequest(entityName: "Team")) {
            if let name = team.value(forKey: "name") as? String { teams[name] = team }
        }
        for row in people {
            let person = try context.insertNewObject(forEntityName: row.entity)
            person.setValue(row.name, forKey: "name")
            person.setValue(row.age, forKey: "age")
            person.setValue(row.nickname, forKey: "nickname")
            person.setValue("cheerful", forKey: "mood")
            if row.name == "Ada" { person.setValue(queryEpoch, forKey: "joined") }
            if let salary = row.salary { person.setValue(salary, forKey: "salary") }
            if let name = row.team {
                if teams[name] == nil {
                    let team = try context.insertNewObject(forEntityName: "Team")
                    team.setValue(name, forKey: "name")
                    teams[name] = team
                }
                person.setValue(teams[name], forKey: "team")
            }
        }
        try context.save()
    }
}

/// A store of `queryPeople` written through a managed object context, closed again.
struct QueryStore {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory("strata-query")
        path = directory.file("People.strata")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try queryModel())
        try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: path))
        try insertPeople(queryPeople, into: ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator))
    }
}

/// The URIs a fetch through the library returns, in order, and the plan it runs with.
func libraryFetch(_ context: ManagedObjectContext, _ request: FetchRequest<ManagedObject>) throws -> (uris: [String], plan: String, count: Int) {
    try context.performAndWait { context in
        (try context.fetch(request).map { $0.objectID.uriRepresentation().absoluteString },
         try context.explain(request).description, try context.count(for: request))
    }
}

/// The same, on a store the test opens as an app does, then closes.
func libraryFetch(_ path: String, _ request: FetchRequest<ManagedObject>) throws -> (uris: [String], plan: String, count: Int) {
    let coordinator = PersistentStoreCoordinator(managedObjectModel: try queryModel())
    try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: path))
    return try libraryFetch(ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator), request)
}

/// `strata query` with `--format ndjson`: exit 0, and each line parsed.
func queryObjects(_ arguments: String...) throws -> [[String: Any]] { try queryObjects(arguments) }

/// `strata query ARGUMENTS --format ndjson`: exit 0, and each line parsed.
func queryObjects(_ arguments: [String]) throws -> [[String: Any]] {
    let result = try runProcess(BuildProducts.executable("strata"), ["query"] + arguments + ["--format", "ndjson"])
    #expect(result.status == 0, "\(arguments): \(result.standardError)")
    return try result.standardOutput.split(separator: "\n").map { line in
        try #require(try parseJSON(String(line)) as? [String: Any])
    }
}

func uris(_ objects: [[String: Any]]) -> [String] { objects.map { $0["uri"] as? String ?? "?" } }
func names(_ objects: [[String: Any]]) -> [String] {
    objects.map { ($0["values"] as? [String: Any])?["name"] as? String ?? "?" }
}

// MARK: - Tests

@Suite("strata query")
struct QueryCommandTests {
    @Test("results and their order match a fetch through the library on the same store")
    func matchesLibrary() throws {
        let store = try QueryStore()
        let cases: [([String], FetchRequest<ManagedObject>)] = [
            ([], FetchRequest(entityName: "Person")),
            (["--sort", "name"], FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(key: "name")])),
            (["--where", "age >= 30", "--sort", "age:desc", "--sort", "name:asc"],
             FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "age >= 30"),
                          sortDescriptors: [FetchSortDescriptor(key: "age", ascending: false), FetchSortDescriptor(key: "name")])),
            (["--where", "team.name == \"Otters\" OR nickname != nil", "--sort", "team.name", "--sort", "name"],
             FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "team.name == 'Otters' OR nickname != nil"),
                          sortDescriptors: [FetchSortDescriptor(key: "team.name"), FetchSortDescriptor(key: "name")])),
            (["--sort", "age", "--offset", "1", "--limit", "4"], {
                var request = FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(key: "age")])
                request.fetchOffset = 1
                request.fetchLimit = 4
                return request
            }()),
            (["--where", "members.@count >= 2"], FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "members.@count >= 2"))),
        ]
        for (options, request) in cases {
            let objects = try queryObjects([store.path, request.entityName] + options)
            let expected = try libraryFetch(store.path, request)
            #expect(!expected.uris.isEmpty, "\(options)")
            #expect(uris(objects) == expected.uris, "\(options)")
        }
    }

    @Test("a result of several print chunks (2,650 people, chunks of 1,000): every object once, in the library's order, values intact, nothing on stderr")
    func severalChunks() throws {
        let store = try QueryStore()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try queryModel())
        try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: store.path))
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        var many: [PersonRow] = []
        for index in 0..<2_642 {
            let entity = index % 7 == 0 ? "Employee" : "Person"
            let team: String? = index % 3 == 0 ? nil : "Otters"
            many.append(PersonRow(entity: entity, name: "n\(index)", age: Int32(index % 50), team: team))
        }
        try insertPeople(many, into: context)
        let cases: [([String], FetchRequest<ManagedObject>)] = [
            ([], FetchRequest(entityName: "Person")),
            (["--sort", "age:desc", "--sort", "name"],
             FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(key: "age", ascending: false), FetchSortDescriptor(key: "name")])),
            (["--where", "team.name == \"Otters\"", "--sort", "name"],
             FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "team.name == 'Otters'"), sortDescriptors: [FetchSortDescriptor(key: "name")])),
        ]
        for (options, request) in cases {
            let result = try runProcess(BuildProducts.executable("strata"), ["query", store.path, request.entityName] + options + ["--format", "ndjson"])
            #expect(result.status == 0)
            #expect(result.standardError.isEmpty, "\(options): \(result.standardError)")
            let objects = try result.standardOutput.split(separator: "\n").map { try #require(try parseJSON(String($0)) as? [String: Any]) }
            let expected = try libraryFetch(context, request)
            #expect(expected.uris.count > 1_000, "\(options)")
            #expect(uris(objects) == expected.uris, "\(options)")
            #expect(Set(uris(objects)).count == objects.count)
        }
        // The values of an object in the third chunk, and the json form's whole document.
        let all = try queryObjects(store.path, "Person", "--sort", "name")
        let late = try #require(all.first { ($0["values"] as? [String: Any])?["name"] as? String == "n2640" })
        let values = try #require(late["values"] as? [String: Any])
        #expect(values["age"] as? Int == 40)
        #expect(late["entity"] as? String == "Person")
        let json = try strata("query", store.path, "Person", "--sort", "name")
        let document = try #require(try parseJSON(json.standardOutput) as? [String: Any])
        #expect((document["objects"] as? [Any])?.count == all.count)
    }

    @Test("saves landing while a query prints don't change what it prints: every object as of the generation the query started at, which stderr names and --at reproduces byte for byte")
    func concurrentSave() throws {
        let store = try QueryStore()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try queryModel())
        try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: store.path))
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try insertPeople((0..<8_000).map { PersonRow(name: "w\($0)", age: Int32($0 % 50)) }, into: context)
        // Another writer works from the end of store order (printed last), one save each,
        // until told to stop: renaming one person, deleting the next.
        let stop = Atomic<Bool>(false)
        let writer = DispatchGroup()
        writer.enter()
        DispatchQueue.global().async {
            defer { writer.leave() }
            try? context.performAndWait { context in
                var ids = try context.fetchObjectIDs(FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "name BEGINSWITH 'w'")))
                var rename = true
                while !stop.load(ordering: .relaxed), let last = ids.popLast() {
                    let person = try context.existingObject(with: last)
                    if rename { person.setValue("renamed", forKey: "name") } else { context.delete(person) }
                    rename.toggle()
                    try context.save()
                }
            }
        }
        var noted: [(sequence: String, output: String)] = []
        for _ in 0..<20 where noted.count < 2 {
            let result = try runProcess(BuildProducts.executable("strata"), ["query", store.path, "Person", "--format", "ndjson"])
            #expect(result.status == 0, "\(result.standardError)")
            let lines = result.standardOutput.split(separator: "\n")
            let objects = try lines.map { try #require(try parseJSON(String($0)) as? [String: Any]) }
            #expect(Set(uris(objects)).count == objects.count, "each object once")
            guard let range = result.standardError.range(of: #"^the store changed while the query ran \(head (\d+) -> (\d+)\): the objects are printed as they were at (\d+)\n$"#, options: .regularExpression) else {
                #expect(result.standardError.isEmpty, "\(result.standardError)")
                continue
            }
            let sequence = String(result.standardError[range].split(separator: " ").last?.dropLast() ?? "")
            noted.append((sequence, result.standardOutput))
        }
        stop.store(true, ordering: .relaxed)
        writer.wait()
        #expect(!noted.isEmpty, "a query ran while saves landed")
        for (sequence, output) in noted {
            // The same generation, asked for after the writer stopped: the same bytes.
            let again = try runProcess(BuildProducts.executable("strata"), ["query", store.path, "Person", "--format", "ndjson", "--at", sequence])
            #expect(again.status == 0 && again.standardError.isEmpty, "\(again.standardError)")
            #expect(again.standardOutput == output, "--at \(sequence) prints what the query printed")
            let count = try runProcess(BuildProducts.executable("strata"), ["query", store.path, "Person", "--count", "--at", sequence])
            #expect(count.standardOutput == "\(output.split(separator: "\n").count)\n")
        }
        // And differs from the store now.
        let now = try runProcess(BuildProducts.executable("strata"), ["query", store.path, "Person", "--format", "ndjson"])
        #expect(noted.allSatisfy { $0.output != now.standardOutput })
    }

    @Test("--at SEQ: the query as of that transaction (objects, --count, --explain); past the head is exit 1")
    func atSequence() throws {
        let store = try QueryStore()
        let before = try strata("query", store.path, "Person", "--sort", "name", "--format", "ndjson")
        let beforeCount = try strata("query", store.path, "Person", "--where", "age >= 30", "--count")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try queryModel())
        try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: store.path))
        let head = try coordinator.persistentStores[0].log.head
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait { context in
            for person in try context.fetch(try FetchRequest(entityName: "Person", format: "age >= 30")) { person.setValue(Int32(1), forKey: "age") }
            try context.save()
        }
        try insertPeople([PersonRow(name: "Zed", age: 99)], into: context)
        let now = try strata("query", store.path, "Person", "--sort", "name", "--format", "ndjson")
        #expect(now.standardOutput != before.standardOutput, "the saves changed what a query prints")
        let then = try strata("query", store.path, "Person", "--sort", "name", "--format", "ndjson", "--at", "\(head)")
        #expect(then.standardOutput == before.standardOutput && then.standardError.isEmpty)
        let thenCount = try strata("query", store.path, "Person", "--where", "age >= 30", "--count", "--at", "\(head)")
        #expect(thenCount.standardOutput == beforeCount.standardOutput && beforeCount.standardOutput != "0\n")
        #expect(try strata("query", store.path, "Person", "--where", "age >= 30", "--count").standardOutput == "1\n")
        let explained = try strata("query", store.path, "Person", "--where", "age == 31", "--explain", "--at", "\(head)")
        #expect(explained.standardOutput.hasPrefix("index scan Person.age"))
        let future = try runProcess(BuildProducts.executable("strata"), ["query", store.path, "Person", "--at", "\(head + 100)"])
        #expect(future.status == 1)
        #expect(future.standardError == "strata: sequence \(head + 100) is past the head (\(head + 2))\n", "\(future.standardError)")
    }

    @Test("each object: entity, URI, every attribute but transient ones, both sides of relationships, export's JSON values")
    func values() throws {
        let store = try QueryStore()
        let people = try queryObjects(store.path, "Person", "--sort", "name")
        let teams = try queryObjects(store.path, "Team", "--sort", "name")
        #expect(names(teams) == ["Herons", "Otters"])
        let otters = try #require(teams.last)
        let ada = try #require(people.first)
        let fay = try #require(people.first { ($0["values"] as? [String: Any])?["name"] as? String == "Fay" })
        let hal = try #require(people.first { ($0["values"] as? [String: Any])?["name"] as? String == "Hal" })

        let adaURI = try #require(ada["uri"] as? String)
        let ottersURI = try #require(otters["uri"] as? String)
        #expect(ada["entity"] as? String == "Person")
        #expect(adaURI.hasPrefix("x-strata://") && adaURI.contains("/Person/p"))
        let adaValues = try #require(ada["values"] as? [String: Any])
        #expect(Set(adaValues.keys) == ["age", "joined", "name", "nickname", "team"])  // no transient mood
        #expect(adaValues["age"] as? Int == 31)
        #expect(adaValues["nickname"] as? String == "A")
        #expect(adaValues["joined"] as? String == "2026-01-01T00:00:00.000000Z")
        #expect(adaValues["team"] as? String == ottersURI)

        #expect(fay["entity"] as? String == "Employee")
        let fayValues = try #require(fay["values"] as? [String: Any])
        #expect(Set(fayValues.keys) == ["age", "joined", "name", "nickname", "salary", "team"])
        #expect(fayValues["salary"] as? Double == 5000)
        #expect(fayValues["nickname"] is NSNull)
        #expect(fayValues["joined"] is NSNull)
        #expect((hal["values"] as? [String: Any])?["age"] is NSNull)

        // The to-many side, in key order (entity, then primary key).
        let members = try #require((otters["values"] as? [String: Any])?["members"] as? [String])
        let expected = try libraryFetch(store.path, FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "team.name == 'Otters'")))
        #expect(Set(members) == Set(expected.uris))
        #expect(members.count == 3)
        #expect(members.first?.contains("/Employee/p") == true)  // "Employee" sorts before "Person"
        #expect(members.contains(adaURI))

        // The raw line is export's ndjson shape.
        let raw = try strata("query", store.path, "Person", "--where", "name == 'Ada'", "--format", "ndjson")
        #expect(raw.standardOutput.hasPrefix("{\"entity\":\"Person\",\"uri\":\"\(adaURI)\",\"values\":{\"age\":31,\"joined\":\"2026-01-01T00:00:00.000000Z\",\"name\":\"Ada\",\"nickname\":\"A\",\"team\":\"\(ottersURI)\"}}\n"))
    }

    @Test("values are export's: every value export writes for an object, query writes the same (binary data, doubles, booleans, dates, ordered and many-to-many relationships)")
    func sameValuesAsExport() throws {
        let store = try makeLeagueStore()
        let export = try strata("export", store.path, "--format", "ndjson")
        #expect(export.status == 0)
        let exported = try export.standardOutput.split(separator: "\n").map { try #require(try parseJSON(String($0)) as? [String: Any]) }
        #expect(exported.count == 5)
        func canonical(_ value: Any?) throws -> String {
            String(decoding: try JSONSerialization.data(withJSONObject: [value ?? NSNull()], options: [.sortedKeys]), as: UTF8.self)
        }
        var compared = 0
        for entity in ["Player", "Sponsor", "Team"] {
            let queried = try queryObjects(store.path, entity)
            let expected = exported.filter { $0["entity"] as? String == entity }
            #expect(uris(queried) == uris(expected), "\(entity)")  // no sort: store order, as export's key order
            for (query, export) in zip(queried, expected) {
                let queryValues = try #require(query["values"] as? [String: Any])
                let exportValues = try #require(export["values"] as? [String: Any])
                for (key, value) in exportValues {
                    // A to-many never set is null in the log's export; the object shows it empty.
                    let toMany = ["lineup", "teams"].contains(key)
                    let wanted = try canonical(toMany && value is NSNull ? [String]() : value)
                    #expect(try canonical(queryValues[key]) == wanted, "\(entity).\(key)")
                    compared += 1
                }
            }
        }
        #expect(compared >= 20)
        // Query writes the inverse sides export leaves out.
        let team = try #require(try queryObjects(store.path, "Team", "--where", "name == 'Otters'").first?["values"] as? [String: Any])
        #expect(team["players"] as? [String] == [store.uri("Player", 1), store.uri("Player", 3)])
        #expect(team["sponsors"] as? [String] == [store.uri("Sponsor", 1)])
        #expect(team["lineup"] as? [String] == [store.uri("Player", 1)])
        let player = try #require(try queryObjects(store.path, "Player", "--where", "age == 31").first?["values"] as? [String: Any])
        #expect(player["photo"] as? String == "AAH+/w==")
        #expect(player["lineupTeam"] as? String == store.uri("Team", 1))
    }

    @Test("--format json (the default): one document with the store, the entity and the objects, one per line")
    func jsonDocument() throws {
        let store = try QueryStore()
        let result = try strata("query", store.path, "Person", "--sort", "name", "--limit", "3")
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n")
        #expect(lines.count == 5)
        let document = try #require(try parseJSON(result.standardOutput) as? [String: Any])
        let uuid = try EventLog(openingExistingAt: store.path).storeUUID
        #expect(document["store"] as? String == uuid.uuidString)
        #expect(document["entity"] as? String == "Person")
        let objects = try #require(document["objects"] as? [[String: Any]])
        #expect(names(objects) == ["Ada", "Ben", "Cy"])
        #expect(uris(objects) == uris(try queryObjects(store.path, "Person", "--sort", "name", "--limit", "3")))
    }

    @Test("--explain with an index: the plan names the index, as the library's explain does; nothing else is printed")
    func explainIndex() throws {
        let store = try QueryStore()
        let result = try strata("query", store.path, "Person", "--where", "age BETWEEN {30, 40}", "--explain")
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput == "index scan Person.age [30, 40] (+1 sub-entity)\n")
        let request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "age BETWEEN {30, 40}"))
        #expect(result.standardOutput == (try libraryFetch(store.path, request).plan) + "\n")
        #expect(result.standardError.isEmpty)

        let limited = try strata("query", store.path, "Person", "--where", "age > 30 AND name BEGINSWITH 'D'", "--sort", "name", "--limit", "2", "--explain")
        #expect(limited.status == 0)
        #expect(limited.standardOutput.hasPrefix("index scan Person.age [31, +∞) (+1 sub-entity) then filter"), "\(limited.standardOutput)")
        #expect(limited.standardOutput.contains("then filter (name BEGINSWITH \"D\")"))
        #expect(limited.standardOutput.contains("limit 2"))
    }

    @Test("--explain without a usable index: a full scan, then the filter")
    func explainFullScan() throws {
        let store = try QueryStore()
        let result = try strata("query", store.path, "Person", "--where", "name BEGINSWITH 'A'", "--explain")
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput == "full scan Person (+1 sub-entity) then filter (name BEGINSWITH \"A\")\n")
        let none = try strata("query", store.path, "Team", "--explain")
        #expect(none.standardOutput == "full scan Team\n")
    }

    @Test("--sort KEY:desc: descending, nil last; ties keep store order")
    func sortDescending() throws {
        let store = try QueryStore()
        let objects = try queryObjects(store.path, "Person", "--sort", "age:desc")
        let ages = objects.map { ($0["values"] as? [String: Any])?["age"] as? Int }
        #expect(ages == [58, 40, 35, 31, 31, 24, 22, nil])
        #expect(names(objects) == ["Eve", "Cy", "Fay", "Ada", "Dee", "Ben", "Gus", "Hal"])
        let ascending = try queryObjects(store.path, "Person", "--sort", "age:asc", "--sort", "name:desc")
        #expect(names(ascending) == ["Hal", "Gus", "Ben", "Dee", "Ada", "Fay", "Cy", "Eve"])
    }

    @Test("--offset and --limit apply after the sort")
    func limitOffset() throws {
        let store = try QueryStore()
        let all = names(try queryObjects(store.path, "Person", "--sort", "name"))
        #expect(all == ["Ada", "Ben", "Cy", "Dee", "Eve", "Fay", "Gus", "Hal"])
        #expect(names(try queryObjects(store.path, "Person", "--sort", "name", "--limit", "3")) == ["Ada", "Ben", "Cy"])
        #expect(names(try queryObjects(store.path, "Person", "--sort", "name", "--offset", "2", "--limit", "3")) == ["Cy", "Dee", "Eve"])
        #expect(names(try queryObjects(store.path, "Person", "--sort", "name", "--offset", "6")) == ["Gus", "Hal"])
        #expect(names(try queryObjects(store.path, "Person", "--sort", "name", "--limit", "0")) == all)

        let past = try strata("query", store.path, "Person", "--offset", "20", "--format", "ndjson")
        #expect(past.status == 0)
        #expect(past.standardOutput.isEmpty)
        #expect(past.standardError.contains("no objects match"))
    }

    @Test("--count prints the number only, as count(for:) gives it, offset and limit applied")
    func count() throws {
        let store = try QueryStore()
        let cases: [([String], Int)] = [
            ([], 8), (["--where", "age >= 31"], 5), (["--where", "age >= 31", "--limit", "2"], 2),
            (["--where", "age >= 31", "--offset", "4"], 1), (["--where", "team == nil"], 2),
            (["--no-subentities"], 6), (["--where", "age > 100"], 0),
        ]
        for (options, expected) in cases {
            let result = try runProcess(BuildProducts.executable("strata"), ["query", store.path, "Person", "--count"] + options)
            #expect(result.status == 0, "\(options): \(result.standardError)")
            #expect(result.standardOutput == "\(expected)\n", "\(options)")
            #expect(result.standardError.isEmpty)
        }
        var request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "age >= 31"))
        request.fetchLimit = 2
        #expect(try libraryFetch(store.path, request).count == 2)
    }

    @Test("sub-entities: included by default, left out with --no-subentities")
    func subentities() throws {
        let store = try QueryStore()
        let all = try queryObjects(store.path, "Person", "--sort", "name")
        #expect(Set(all.compactMap { $0["entity"] as? String }) == ["Person", "Employee"])
        #expect(all.count == 8)
        let own = try queryObjects(store.path, "Person", "--sort", "name", "--no-subentities")
        #expect(names(own) == ["Ada", "Ben", "Cy", "Dee", "Eve", "Hal"])
        #expect(own.allSatisfy { $0["entity"] as? String == "Person" })
        var request = FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(key: "name")])
        request.includesSubentities = false
        #expect(uris(own) == (try libraryFetch(store.path, request).uris))
        let employees = try queryObjects(store.path, "Employee", "--where", "age < 30")
        #expect(names(employees) == ["Gus"])

        let explain = try strata("query", store.path, "Person", "--where", "age == 31", "--no-subentities", "--explain")
        #expect(explain.standardOutput == "index scan Person.age = 31 (sub-entities excluded)\n")
    }

    @Test("bad usage is exit 64 naming the option: a predicate that doesn't parse, a bad --sort, negative numbers, combined modes")
    func badUsage() throws {
        let store = try QueryStore()
        let syntax = try strata("query", store.path, "Person", "--where", "age >> 3")
        #expect(syntax.status == 64)
        #expect(syntax.standardError.contains("--where 'age >> 3': syntax error at position 5"), "\(syntax.standardError)")
        #expect(syntax.standardError.contains("  age >> 3\n       ^"), "\(syntax.standardError)")
        let unclosed = try strata("query", store.path, "Person", "--where", "name == 'Ada")
        #expect(unclosed.status == 64)
        #expect(unclosed.standardError.contains("--where"))

        let cases: [([String], String)] = [
            (["--limit", "-1"], "--limit -1 is negative"),
            (["--offset", "-3"], "--offset -3 is negative"),
            (["--limit", "ten"], "ten"),
            (["--sort", "name:up"], "--sort name:up: the direction \"up\" is neither asc nor desc"),
            (["--sort", ":desc"], "--sort :desc"),
            (["--sort", "a:b:c"], "--sort a:b:c"),
            (["--count", "--explain"], "--count and --explain"),
            (["--count", "--format", "json"], "--format json applies to the objects printed"),
            (["--format", "csv"], "csv"),
        ]
        for (options, message) in cases {
            let result = try runProcess(BuildProducts.executable("strata"), ["query", store.path, "Person"] + options)
            #expect(result.status == 64, "\(options)")
            #expect(result.standardError.contains(message), "\(options): \(result.standardError)")
            #expect(result.standardOutput.isEmpty, "\(options)")
        }
        let missing = try strata("query", store.path)
        #expect(missing.status == 64)
    }

    @Test("what the store's model refuses is exit 1 naming the part at fault: entity, key paths, types")
    func refusedByTheModel() throws {
        let store = try QueryStore()
        let cases: [([String], String)] = [
            (["Referee"], "the store's model has no entity Referee (entities: Employee, Person, Team)"),
            (["Person", "--where", "titel == 'x'"], "--where \"titel == 'x'\": entity Person has no property \"titel\""),
            (["Person", "--where", "team.nmae == 'Otters'"], "entity Team has no property \"nmae\""),
            (["Person", "--sort", "name", "--sort", "nmae:desc"], "--sort nmae:desc: entity Person has no property \"nmae\""),
            (["Person", "--where", "age == 'old'"], "--where \"age == 'old'\": age (Integer 32) compared with \"old\" (string)"),
            (["Person", "--where", "age BEGINSWITH '3'", "--count"], "BEGINSWITH"),
            (["Person", "--where", "age > $MIN", "--explain"], "no value for substitution variable $MIN"),
            (["Person", "--where", "name MATCHES '('"], "--where \"name MATCHES '('\": evaluation error: MATCHES pattern \"(\" is not a valid regular expression"),
        ]
        for (arguments, message) in cases {
            let result = try runProcess(BuildProducts.executable("strata"), ["query", store.path] + arguments)
            #expect(result.status == 1, "\(arguments)")
            #expect(result.standardError.hasPrefix("strata: "), "\(arguments): \(result.standardError)")
            #expect(result.standardError.contains(message), "\(arguments): \(result.standardError)")
            #expect(result.standardOutput.isEmpty, "\(arguments): \(result.standardOutput)")
        }
    }

    @Test("no store, or not a Strata store: exit 1, `no Strata store at PATH`, nothing created")
    func notAStore() throws {
        let directory = try TemporaryDirectory()
        let missing = directory.file("nothing-here")
        let file = directory.file("notes.txt")
        try "hello".write(toFile: file, atomically: true, encoding: .utf8)
        let empty = directory.file("empty")
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        for path in [missing, file, empty] {
            let result = try strata("query", path, "Person")
            #expect(result.status == 1)
            #expect(result.standardError.contains("no Strata store at \(path)"), "\(result.standardError)")
        }
        #expect(!FileManager.default.fileExists(atPath: missing))
        #expect(try FileManager.default.contentsOfDirectory(atPath: empty).isEmpty)
    }

    @Test("the store is unchanged afterwards: the head, every file's bytes and modification time")
    func readOnly() throws {
        let store = try QueryStore()
        let headBefore = try EventLog(openingExistingAt: store.path).head
        let before = try snapshotFiles(store.path)
        let runs: [[String]] = [
            ["Person"], ["Person", "--where", "age > 30", "--sort", "name:desc", "--limit", "2"], ["Team", "--format", "ndjson"],
            ["Person", "--count"], ["Person", "--where", "age == 31", "--explain"], ["Referee"],
            ["Person", "--where", "titel == 1"], ["Person", "--where", "age >> 1"],
        ]
        for arguments in runs {
            _ = try runProcess(BuildProducts.executable("strata"), ["query", store.path] + arguments)
        }
        let after = try snapshotFiles(store.path)
        #expect(Set(before.keys) == Set(after.keys))
        for (name, (bytes, mtime)) in before {
            #expect(after[name]?.0 == bytes, "\(name) changed")
            #expect(after[name]?.1 == mtime, "\(name)'s mtime changed")
        }
        #expect(try EventLog(openingExistingAt: store.path).head == headBefore)
    }

    @Test("works while an app holds the store open and writes: each query sees the saves before it")
    func besideAWriter() throws {
        let store = try QueryStore()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try queryModel())
        try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: store.path))
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "app")

        try insertPeople([PersonRow(name: "Ivy", age: 33, team: "Otters")], into: context)
        let request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "age >= 33"), sortDescriptors: [FetchSortDescriptor(key: "age")])
        let first = try queryObjects(store.path, "Person", "--where", "age >= 33", "--sort", "age")
        #expect(names(first) == ["Ivy", "Fay", "Cy", "Eve"])
        #expect(uris(first) == (try libraryFetch(context, request).uris))

        try insertPeople([PersonRow(entity: "Employee", name: "Jo", age: 45, salary: 1)], into: context)
        let second = try queryObjects(store.path, "Person", "--where", "age >= 33", "--sort", "age")
        #expect(names(second) == ["Ivy", "Fay", "Cy", "Jo", "Eve"])
        #expect(uris(second) == (try libraryFetch(context, request).uris))
        let count = try strata("query", store.path, "Person", "--count")
        #expect(count.standardOutput == "10\n")

        // The app goes on saving afterwards.
        try insertPeople([PersonRow(name: "Kit", age: 19)], into: context)
        #expect(try libraryFetch(context, FetchRequest(entityName: "Person")).count == 11)
    }

    @Test("help has the synopsis and examples")
    func help() throws {
        let result = try strata("help", "query")
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("Examples:"))
        #expect(result.standardOutput.contains("--no-subentities"))
        #expect(result.standardOutput.contains("--explain"))
    }
}
