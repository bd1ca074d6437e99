import Foundation
import Strata
import StrataTestSupport
import Testing

/// Seed 003's person as a custom class with typed properties read through `get(_:as:)`.
final class PersonObject: ManagedObject {
    var firstName: String? { self.get("firstName") }
    var lastName: String? { self.get("lastName") }
    var age: Int32 { self.get("age") ?? 0 }
    var email: String? { self.get("email") }
    var score: Double { self.get("score") ?? 0 }
    var team: TeamObject? { self.get("team") }
    /// Reads two properties: not a single model key path.
    var fullName: String { "\(firstName ?? "") \(lastName ?? "")" }
    /// Not backed by the model at all.
    var nickname: String { "x" }
}

final class TeamObject: ManagedObject {
    var name: String? { value(forKey: "name") as? String }
}

/// Fills a `SeedModels.people` store: 3 teams, 30 people (ages 20…49, last names cycling
/// through five, scores 0…29), all saved.
func seedPeople(_ dir: TemporaryDirectory, classes: Bool = true) async throws -> PersistentStoreCoordinator {
    let coordinator = try openCoordinator(
        dir, model: try SeedModels.people, classes: classes ? [(PersonObject.self, "Person"), (TeamObject.self, "Team")] : [])
    let context = privateContext(coordinator)
    try await context.perform { (context: isolated ManagedObjectContext) throws in
        let teams = try ["Red", "Green", "Blue"].map { name in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue(name, forKey: "name")
            return team
        }
        let lastNames = ["Smith", "Jones", "Brown", "Taylor", "Adams"]
        for index in 0..<30 {
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("P\(index)", forKey: "firstName")
            person.setValue(lastNames[index % 5], forKey: "lastName")
            person.setValue("p\(index)@example.com", forKey: "email")
            person.setValue(Int32(20 + index), forKey: "age")
            person.setValue(Double(index), forKey: "score")
            person.setValue(teams[index % 3], forKey: "team")
        }
        try context.save()
    }
    return coordinator
}

@Suite("Fetch requests: result types, faulting options, templates, typed queries")
struct FetchRequestTests {
    @Test("object-ID results cross to another context (seed 003: ages 100…200, batch size 20)")
    func seed003ObjectIDs() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.person)
        let background = privateContext(coordinator)
        try await background.perform { (context: isolated ManagedObjectContext) throws in
            for age in stride(from: 0, to: 300, by: 3) {
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue("Person \(age)", forKey: "firstName")
                person.setValue(Int32(age), forKey: "age")
            }
            try context.save()
        }
        // The seed's background fetch: IDs only, age between 100 and 200, batch size 20.
        let ids = try await background.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Person")
            request.predicate = try FormatPredicate(format: "age BETWEEN {100, 200}")
            request.resultType = .managedObjectID
            request.fetchBatchSize = 20
            request.sortDescriptors = [FetchSortDescriptor(key: "age")]
            return try context.fetchObjectIDs(request)
        }
        #expect(ids.count == 33)  // 102, 105, …, 198
        let main = privateContext(coordinator)
        let ages = try await main.perform { (context: isolated ManagedObjectContext) throws in
            try ids.map { try context.object(with: $0).value(forKey: "age") as? Int32 ?? -1 }
        }
        #expect(ages == Array(stride(from: Int32(102), through: 200, by: 3)))
        // execute(_:) with each result type.
        let counts = try await background.perform { (context: isolated ManagedObjectContext) throws in
            var request = try FetchRequest(entityName: "Person", format: "age >= %@", 150)
            request.resultType = .count
            guard case .count(let count) = try context.execute(request) else { return -1 }
            return count
        }
        #expect(counts == 50)
    }

    @Test("seed 001: Post creationDate > %@ sorted by title")
    func seed001Posts() async throws {
        let model = try ManagedObjectModel {
            Entity("Post") {
                Attribute("title", .string)
                Attribute("creationDate", .date)
            }
        }
        let dir = try TemporaryDirectory()
        let context = privateContext(try openCoordinator(dir, model: model))
        let base = Date(timeIntervalSince1970: 1_700_000_000)
        let titles = try await context.perform { (context: isolated ManagedObjectContext) throws in
            for (offset, title) in ["Delta", "alpha", "Charlie", "Bravo", "Echo"].enumerated() {
                let post = try context.insertNewObject(forEntityName: "Post")
                post.setValue(title, forKey: "title")
                post.setValue(base.addingTimeInterval(Double(offset) * 86_400), forKey: "creationDate")
            }
            try context.save()
            var request = try FetchRequest(entityName: "Post", format: "creationDate > %@", base.addingTimeInterval(86_400))
            request.sortDescriptors = [FetchSortDescriptor(key: "title", caseInsensitive: true)]
            return try context.fetch(request).compactMap { $0.value(forKey: "title") as? String }
        }
        #expect(titles == ["Bravo", "Charlie", "Echo"])
    }

    @Test("seed 004: players sorted by lastName, and a team's players through prefetching")
    func seed004Players() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Wildcats", forKey: "name")
            for (first, last) in [("Ann", "Zimmer"), ("Bob", "Miller"), ("Cid", "Adams")] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(first, forKey: "firstName")
                player.setValue(last, forKey: "lastName")
                player.setValue(team, forKey: "team")
            }
            try context.save()
        }
        let fresh = privateContext(coordinator)
        let result = try await fresh.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Player", sortDescriptors: [FetchSortDescriptor(key: "lastName")])
            request.relationshipKeyPathsForPrefetching = ["team"]
            let players = try context.fetch(request)
            let team = players.first?.value(forKey: "team") as? ManagedObject
            let teamWasFault = team?.isFault ?? false
            let names = players.compactMap { $0.value(forKey: "lastName") as? String }
            return (names, teamWasFault, team?.value(forKey: "name") as? String)
        }
        #expect(result.0 == ["Adams", "Miller", "Zimmer"])
        #expect(result.1 == true, "prefetched destinations are faults holding their row")
        #expect(result.2 == "Wildcats")
    }

    @Test("prefetching reads destinations' rows: firing them needs no store (the store is gone)")
    func prefetchAvoidsStoreReads() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await seedPeople(dir)
        let context = privateContext(coordinator)
        let names = try await context.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Team")
            request.relationshipKeyPathsForPrefetching = ["members"]
            let teams = try context.fetch(request)
            let members = teams.flatMap { ($0.value(forKey: "members") as? Set<ManagedObject>) ?? [] }
            // Drop the store: rows already read keep working; nothing else could.
            for store in coordinator.persistentStores { try coordinator.remove(store) }
            return members.compactMap { $0.value(forKey: "email") as? String }
        }
        #expect(names.count == 30)
    }

    @Test("fetchBatchSize: later batches are faults without values until one of them fires, then the whole batch loads")
    func batchedFaults() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await seedPeople(dir)
        let context = privateContext(coordinator)
        let (ages, firstBatchReady) = try await context.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(key: "age")])
            request.fetchBatchSize = 8
            let people = try context.fetch(request)
            #expect(people.count == 30)
            #expect(people.allSatisfy { $0.isFault })
            // The first batch carries its rows: readable even with the store gone.
            let stores = coordinator.persistentStores
            for store in stores { try coordinator.remove(store) }
            let ready = people.prefix(8).allSatisfy { $0.value(forKey: "age") is Int32 }
            let later = people[8].value(forKey: "age")
            #expect(later == nil, "a later batch needs the store")
            return (people.map { $0.objectID }, ready)
        }
        #expect(firstBatchReady)
        #expect(ages.count == 30)
        // With the store there, firing one fault of a batch loads its batch-mates too.
        let coordinator2 = try openCoordinator(dir, model: try SeedModels.people)
        let again = privateContext(coordinator2)
        let loaded = try await again.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(key: "age")])
            request.fetchBatchSize = 8
            let people = try context.fetch(request)
            _ = people[9].value(forKey: "age")  // fires a fault of the second batch
            for store in coordinator2.persistentStores { try coordinator2.remove(store) }
            return (people[8..<16].compactMap { $0.value(forKey: "age") as? Int32 }, people[16].value(forKey: "age") as? Int32)
        }
        #expect(loaded.0 == Array(Int32(28)..<36), "the second batch loaded together")
        #expect(loaded.1 == nil, "the third batch did not")
    }

    @Test("returnsObjectsAsFaults false fires the faults (awakeFromFetch ran); includesPropertyValues false keeps no row")
    func faultOptions() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await seedPeople(dir)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Person")
            request.returnsObjectsAsFaults = false
            let people = try context.fetch(request)
            #expect(people.count == 30)
            #expect(people.allSatisfy { !$0.isFault })
        }
        let other = privateContext(coordinator)
        try await other.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(key: "age")])
            request.includesPropertyValues = false
            let people = try context.fetch(request)
            #expect(people.count == 30)
            for store in coordinator.persistentStores { try coordinator.remove(store) }
            #expect(people[0].value(forKey: "age") == nil, "no row came with the fetch")
        }
    }

    @Test("dictionaries: properties, to-one as object IDs, nil left out, distinct")
    func dictionaries() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await seedPeople(dir)
        let context = privateContext(coordinator)
        let (rows, unsaved, names, limited) = try await context.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "age < 23"))
            request.resultType = .dictionary
            request.propertiesToFetch = ["firstName", "age", "team", "team.name"]
            request.sortDescriptors = [FetchSortDescriptor(key: "age")]
            let rows = try context.fetchDictionaries(request)

            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("p-new@example.com", forKey: "email")
            person.setValue(Int32(5), forKey: "age")
            var withNil = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "age == 5"))
            withNil.propertiesToFetch = ["firstName", "email"]
            let unsaved = try context.fetchDictionaries(withNil)

            var distinct = FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(key: "lastName")])
            distinct.propertiesToFetch = ["lastName"]
            distinct.returnsDistinctResults = true
            distinct.predicate = try FormatPredicate(format: "lastName != nil")
            let names = try context.fetchDictionaries(distinct)
            distinct.fetchLimit = 2
            distinct.fetchOffset = 1
            return (rows, unsaved, names, try context.fetchDictionaries(distinct))
        }
        #expect(rows.count == 3)
        #expect(rows.map { $0["firstName"] as? String } == ["P0", "P1", "P2"])
        #expect(rows.map { $0["age"] as? Int32 } == [20, 21, 22])
        #expect(rows.map { $0["team.name"] as? String } == ["Red", "Green", "Blue"])
        #expect(rows.allSatisfy { $0["team"] is ManagedObjectID })
        #expect(unsaved.count == 1, "pending inserts are honoured")
        #expect(unsaved.first?.keys.sorted() == ["email"], "nil values are left out")
        #expect(names.compactMap { $0["lastName"] as? String } == ["Adams", "Brown", "Jones", "Smith", "Taylor"])
        #expect(limited.compactMap { $0["lastName"] as? String } == ["Brown", "Jones"])
    }

    @Test("dictionaries with group-by, aggregates and a having predicate")
    func groupBy() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await seedPeople(dir)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Person")
            request.resultType = .dictionary
            request.propertiesToGroupBy = ["lastName"]
            request.propertiesToFetch = [
                "lastName",
                .expression(name: "people", .count, keyPath: "email"),
                .expression(name: "oldest", .max, keyPath: "age"),
                .expression(name: "youngest", .min, keyPath: "age"),
                .expression(name: "total", .sum, keyPath: "age"),
                .expression(name: "meanScore", .average, keyPath: "score"),
            ]
            request.sortDescriptors = [FetchSortDescriptor(key: "lastName")]
            let rows = try context.fetchDictionaries(request)
            #expect(rows.map { $0["lastName"] as? String } == ["Adams", "Brown", "Jones", "Smith", "Taylor"])
            let smith = rows.first { $0["lastName"] as? String == "Smith" }
            // Smith: indexes 0, 5, 10, 15, 20, 25 → ages 20…45 step 5, scores 0…25 step 5.
            #expect(smith?["people"] as? Int64 == 6)
            #expect(smith?["oldest"] as? Int32 == 45)
            #expect(smith?["youngest"] as? Int32 == 20)
            #expect(smith?["total"] as? Int64 == 195)
            #expect(smith?["meanScore"] as? Double == 12.5)

            request.havingPredicate = try FormatPredicate(format: "total > 200")
            let heavy = try context.fetchDictionaries(request).compactMap { $0["lastName"] as? String }
            // Totals: Smith 195, Jones 201, Brown 207, Taylor 213, Adams 219.
            #expect(heavy == ["Adams", "Brown", "Jones", "Taylor"])
            request.sortDescriptors = [FetchSortDescriptor(key: "total", ascending: false)]
            request.fetchLimit = 2
            let value2 = try context.fetchDictionaries(request).compactMap { $0["lastName"] as? String }
            #expect(value2 == ["Adams", "Taylor"])

            // Aggregates over everything: one row.
            var all = FetchRequest(entityName: "Person")
            all.propertiesToFetch = [.expression(name: "n", .count, keyPath: "age"), .expression(name: "sum", .sum, keyPath: "score")]
            let totals = try context.fetchDictionaries(all)
            #expect(totals.count == 1)
            #expect(totals.first?["n"] as? Int64 == 30)
            #expect(totals.first?["sum"] as? Double == 435)
        }
    }

    @Test("dictionary requests name the part at fault")
    func dictionaryErrors() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await seedPeople(dir)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            func message(_ context: isolated ManagedObjectContext, _ build: (inout FetchRequest<ManagedObject>) -> Void) -> String {
                var request = FetchRequest(entityName: "Person")
                build(&request)
                do {
                    _ = try context.fetchDictionaries(request)
                    return "no error"
                } catch {
                    return "\(error)"
                }
            }
            let m0 = message(context) { $0.propertiesToFetch = ["shoeSize"] }
            #expect(m0.contains("propertiesToFetch[0]"), "\(m0)")
            let m1 = message(context) { $0.propertiesToFetch = ["shoeSize"] }
            #expect(m1.contains("shoeSize"), "\(m1)")
            let m2 = message(context) { $0.propertiesToFetch = [.expression(name: "s", .sum, keyPath: "lastName")] }
            #expect(m2.contains("numeric"), "\(m2)")
            let m3 = message(context) { $0.propertiesToFetch = ["firstName"]; $0.propertiesToGroupBy = ["lastName"] }
            #expect(m3.contains("propertiesToGroupBy"), "\(m3)")
            let m4 = message(context) { $0.propertiesToFetch = ["lastName", .expression(name: "n", .count, keyPath: "age")] }
            #expect(m4.contains("needs propertiesToGroupBy"), "\(m4)")
            let m5 = message(context) { $0.havingPredicate = .truePredicate }
            #expect(m5.contains("havingPredicate"), "\(m5)")
            let m6 = message(context) { $0.propertiesToFetch = ["team.members.age"] }
            #expect(m6.contains("not a to-one"), "\(m6)")
            let m7 = message(context) { $0.relationshipKeyPathsForPrefetching = ["age"] }
            #expect(m7.contains("not a relationship"), "\(m7)")
            let m8 = message(context) { $0.entityName = "Martian" }
            #expect(m8.contains("Martian"), "\(m8)")
            let m9 = message(context) { $0.fetchLimit = -1 }
            #expect(m9.contains("negative"), "\(m9)")
        }
    }

    @Test("fetch request templates with substitution variables; a missing variable is named")
    func templates() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.person)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            for age: Int32 in [50, 120, 180, 250] {
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue(age, forKey: "age")
            }
            try context.save()
            let model = coordinator.managedObjectModel
            let filled = try #require(try model.fetchRequestFromTemplate(withName: "peopleInAgeRange", substitutionVariables: ["MIN": 100, "MAX": 200]))
            let value3 = try context.count(for: filled)
            #expect(value3 == 2)
            var template = try #require(try model.fetchRequestTemplate(forName: "peopleInAgeRange"))
            template.substitutionVariables = ["MIN": .int32(0), "MAX": .int32(100)]
            let value4 = try context.count(for: template)
            #expect(value4 == 1)
            template.substitutionVariables = ["MIN": .int32(0)]
            let error = #expect(throws: ContextError.self) { try context.fetch(template) }
            #expect(error?.description.contains("MAX") == true)
            #expect(try model.fetchRequestTemplate(forName: "nope") == nil)
        }
    }

    @Test("fetched properties: evaluated with $FETCH_SOURCE, kept until the object is refreshed")
    func fetchedProperties() async throws {
        let model = try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true)
                FetchedProperty("veterans", entity: "Player", predicate: "team == $FETCH_SOURCE AND age >= 30")
                FetchedProperty("everyoneOld", entity: "Player", predicate: "age >= 40")
            }
            Entity("Player") {
                Attribute("age", .int16)
                Relationship("team", to: "Team", inverse: "players")
            }
        }
        let dir = try TemporaryDirectory()
        let context = privateContext(try openCoordinator(dir, model: model))
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let (red, blue) = (try context.insertNewObject(forEntityName: "Team"), try context.insertNewObject(forEntityName: "Team"))
            for (age, team) in [(25, red), (31, red), (45, red), (41, blue)] {
                let player = try context.insertNewObject(forEntityName: "Player")
                player.setValue(Int16(age), forKey: "age")
                player.setValue(team, forKey: "team")
            }
            try context.save()
            let veterans = (red.value(forKey: "veterans") as? [ManagedObject])?.compactMap { $0.value(forKey: "age") as? Int16 }
            #expect(veterans?.sorted() == [31, 45])
            #expect((blue.value(forKey: "everyoneOld") as? [ManagedObject])?.count == 2)
            let rookie = try context.insertNewObject(forEntityName: "Player")
            rookie.setValue(Int16(33), forKey: "age")
            rookie.setValue(red, forKey: "team")
            #expect((red.value(forKey: "veterans") as? [ManagedObject])?.count == 2, "kept: not re-evaluated (Core Data's fetched properties are not dynamic)")
            context.refresh(red, mergeChanges: true)
            #expect((red.value(forKey: "veterans") as? [ManagedObject])?.count == 3, "re-evaluated after a refresh, pending insert included")
        }
    }

    @Test("Swift key paths in sort descriptors and #Predicate, translated or evaluated in memory")
    func typedQueries() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await seedPeople(dir)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let request = FetchRequest(
                entityName: "Person", predicate: #Predicate<PersonObject> { $0.age >= 40 && $0.age < 45 },
                sortDescriptors: [FetchSortDescriptor(\PersonObject.age, ascending: false)])
            let value5 = try context.fetch(request, as: PersonObject.self).map(\.age)
            #expect(value5 == [44, 43, 42, 41, 40])

            // Through a to-one, with IN, BEGINSWITH and CONTAINS.
            let teams = FetchRequest(
                entityName: "Person", predicate: #Predicate<PersonObject> { $0.team?.name == "Red" && $0.lastName != nil },
                sortDescriptors: [FetchSortDescriptor(\PersonObject.team?.name), FetchSortDescriptor(\PersonObject.age)])
            let value6 = try context.fetch(teams, as: PersonObject.self).map(\.age)
            #expect(value6 == Array(stride(from: Int32(20), to: 50, by: 3)))
            let ages: [Int32] = [21, 22, 99]
            let inList = FetchRequest(entityName: "Person", predicate: #Predicate<PersonObject> { ages.contains($0.age) })
            let value7 = try context.count(for: inList)
            #expect(value7 == 2)
            let prefix = FetchRequest(
                entityName: "Person", predicate: #Predicate<PersonObject> { $0.lastName.flatMap { $0.starts(with: "Sm") } == true })
            let value8 = try context.count(for: prefix)
            #expect(value8 == 6, "a form that isn't translated is evaluated in memory")
            let contains = FetchRequest(entityName: "Person", predicate: #Predicate<PersonObject> { $0.email?.contains("p1") == true })
            let value9 = try context.count(for: contains)
            #expect(value9 == 11)

            // Evaluated in memory: a computed property the model doesn't know.
            let computed = FetchRequest(entityName: "Person", predicate: #Predicate<PersonObject> { $0.fullName == "P3 Taylor" })
            let value10 = try context.fetch(computed, as: PersonObject.self).map(\.age)
            #expect(value10 == [23])
            // A closure filter.
            var closure = FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(key: "age")])
            closure.filter { ($0 as? PersonObject)?.score ?? 0 > 26.5 }
            let value11 = try context.fetch(closure, as: PersonObject.self).map(\.age)
            #expect(value11 == [47, 48, 49])

            // A key path that reads two properties, or none, is refused with a clear error.
            let twoKeys = FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(\PersonObject.fullName)])
            let error = #expect(throws: ContextError.self) { try context.fetch(twoKeys) }
            #expect(error?.description.contains("sort descriptor 1") == true)
            let noKey = FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor(\PersonObject.nickname)])
            let none = #expect(throws: ContextError.self) { try context.fetch(noKey) }
            #expect(none?.description.contains("reads no model property") == true)
        }
    }

    @Test("sort options: nil first ascending and last descending, case- and diacritic-insensitive strings")
    func sortOptions() async throws {
        let model = try ManagedObjectModel {
            Entity("Word") { Attribute("text", .string) }
        }
        let dir = try TemporaryDirectory()
        let context = privateContext(try openCoordinator(dir, model: model))
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            for text in ["b", "É", "a", nil, "e", "B"] as [String?] {
                let word = try context.insertNewObject(forEntityName: "Word")
                word.setValue(text, forKey: "text")
            }
            try context.save()
            func sorted(_ descriptor: FetchSortDescriptor, _ context: isolated ManagedObjectContext) throws -> [String] {
                try context.fetch(FetchRequest(entityName: "Word", sortDescriptors: [descriptor])).map { $0.value(forKey: "text") as? String ?? "nil" }
            }
            let plain = try sorted(FetchSortDescriptor(key: "text"), context)
            let descending = try sorted(FetchSortDescriptor(key: "text", ascending: false), context)
            #expect(plain == ["nil", "B", "a", "b", "e", "É"])
            #expect(descending == ["É", "e", "b", "a", "B", "nil"])
            let folded = try sorted(FetchSortDescriptor(key: "text", caseInsensitive: true, diacriticInsensitive: true), context)
            #expect(folded.first == "nil")
            #expect(Set(folded[1...2]) == ["a"] || folded[1] == "a")
            #expect(Set(folded[2...3]) == ["b", "B"])
            #expect(Set(folded[4...5]) == ["e", "É"])
        }
    }

    @Test("numeric and localizedStandard sorts: digit runs by value, case folded; with a limit on an indexed attribute, unsaved changes, in a child context, for dictionaries and in memory")
    func numericSort() async throws {
        let model = try ManagedObjectModel {
            Entity("File") {
                Attribute("name", .string).indexed()
                Attribute("size", .int64)
            }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model)
        let context = privateContext(coordinator)
        let standard = ["file1", "File2", "file9", "file10", "File11", "file100", "image2", "Image10"]
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            for (index, name) in ["file10", "image2", "File11", "file1", "file100", "Image10"].enumerated() {
                let file = try context.insertNewObject(forEntityName: "File")
                file.setValue(name, forKey: "name")
                file.setValue(Int64(index), forKey: "size")
            }
            try context.save()
            // Two unsaved inserts take part.
            for name in ["file9", "File2"] { try context.insertNewObject(forEntityName: "File").setValue(name, forKey: "name") }
            func names(_ descriptor: FetchSortDescriptor, limit: Int = 0, _ context: isolated ManagedObjectContext) throws -> [String] {
                var request = FetchRequest(entityName: "File", sortDescriptors: [descriptor])
                request.fetchLimit = limit
                return try context.fetch(request).map { $0.value(forKey: "name") as? String ?? "nil" }
            }
            #expect(try names(.localizedStandard(key: "name"), context) == standard)
            #expect(try names(.localizedStandard(key: "name", ascending: false), context) == standard.reversed())
            // A limited sort on the indexed attribute isn't walked in the index's byte order.
            #expect(try names(.localizedStandard(key: "name"), limit: 3, context) == Array(standard.prefix(3)))
            let explained = try context.explain(FetchRequest(entityName: "File", sortDescriptors: [.localizedStandard(key: "name")]))
            #expect(explained.description.contains("(numeric)"), "\(explained)")
            // Numeric alone keeps case: capitals sort before lowercase.
            #expect(try names(FetchSortDescriptor(key: "name", numeric: true), context) == ["File2", "File11", "Image10", "file1", "file9", "file10", "file100", "image2"])
            // Plain order, for contrast: "file10" before "file9".
            let plain = try names(FetchSortDescriptor(key: "name"), context)
            #expect(plain == ["File11", "File2", "Image10", "file1", "file10", "file100", "file9", "image2"])
            // Dictionaries and in-memory sorting agree.
            var rows = FetchRequest(entityName: "File", sortDescriptors: [.localizedStandard(key: "name")])
            rows.resultType = .dictionary
            rows.propertiesToFetch = ["name"]
            #expect(try context.fetchDictionaries(rows).map { $0["name"] as? String ?? "nil" } == standard)
            let all = try context.fetch(FetchRequest(entityName: "File"))
            #expect(all.sorted(using: [.localizedStandard(key: "name")]).map { $0.value(forKey: "name") as? String ?? "nil" } == standard)
            try context.save()
        }
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: context)
        try await child.perform { (child: isolated ManagedObjectContext) throws in
            try child.insertNewObject(forEntityName: "File").setValue("file3", forKey: "name")
            let names = try child.fetch(FetchRequest(entityName: "File", sortDescriptors: [.localizedStandard(key: "name")])).map { $0.value(forKey: "name") as? String ?? "nil" }
            #expect(names == ["file1", "File2", "file3"] + standard.dropFirst(2))
        }
    }

    @Test("affectedStores: the coordinator's store is searched, an empty list searches none, a foreign store is refused")
    func affectedStores() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await seedPeople(dir)
        let otherDir = try TemporaryDirectory()
        let other = try openCoordinator(otherDir, model: try SeedModels.people)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Person")
            request.affectedStores = coordinator.persistentStores
            let value12 = try context.count(for: request)
            #expect(value12 == 30)
            request.affectedStores = []
            let value13 = try context.count(for: request)
            #expect(value13 == 0)
            request.affectedStores = other.persistentStores
            let error = #expect(throws: ContextError.self) { try context.fetch(request) }
            #expect(error?.description.contains("affectedStores") == true)
        }
    }

    @Test("fetch(_:) refuses a request for another result type, naming it")
    func resultTypeMismatch() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await seedPeople(dir)
        let context = privateContext(coordinator)
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Person")
            request.resultType = .dictionary
            let error = #expect(throws: ContextError.self) { try context.fetch(request) }
            #expect(error?.description.contains("resultType") == true)
            guard case .dictionaries(let rows) = try context.execute(request) else {
                Issue.record("execute gave another result type")
                return
            }
            #expect(rows.count == 30)
            #expect(rows.first?.keys.sorted() == ["age", "email", "firstName", "lastName", "score"], "every attribute by default")
        }
    }
}
