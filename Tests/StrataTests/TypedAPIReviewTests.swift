import Foundation
import Strata
import StrataTestSupport
import Testing

/// A class named after its entity, never registered explicitly: Core Data's generated
/// subclass, as a porter writes it.
final class TypedTeam: ManagedObject {
    var name: String? {
        get { get("name") }
        set { setValue(newValue, forKey: "name") }
    }
    var rank: Int64 {
        get { get("rank") ?? 0 }
        set { setValue(newValue, forKey: "rank") }
    }
    /// Computed from `rank`: not a model property, so no predicate can be written on it.
    var isTopTen: Bool { rank <= 10 }
    /// Computed from `rank`, in the other order.
    var negatedRank: Int64 { -rank }
}

private func typedModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("TypedTeam") {
            Attribute("name", .string)
            Attribute("rank", .int64)
        }
    }
}

@Suite("Typed subclass API (review 26-8)")
struct TypedAPIReviewTests {
    @Test("fetch(_:as:) of a class named after its entity, in a coordinator where the class was never used: returns the objects as that class, not an empty array")
    func typedFetchAfterRestart() async throws {
        let dir = try TemporaryDirectory()
        let model = try typedModel()
        do {
            let coordinator = try openCoordinator(dir, model: model)
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let team = try TypedTeam(context: context)
                team.name = "Owls"
                team.rank = 3
                try context.save()
            }
        }
        // A restart: a new coordinator, in which TypedTeam(context:) was never called.
        let coordinator = try openCoordinator(dir, model: model)
        let names = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(TypedTeam.fetchRequest(), as: TypedTeam.self).map(\.name)
        }
        #expect(names == ["Owls"], "the typed fetch found the saved team as TypedTeam")
        // Another restart: Team.fetchRequest() fetched with fetch(_:) (a FetchRequest<TypedTeam>), then a #Predicate over the class.
        let again = try openCoordinator(dir, model: model)
        let untyped = try await privateContext(again).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(TypedTeam.fetchRequest()).map(\.rank)
        }
        #expect(untyped == [3], "TypedTeam.fetchRequest() makes TypedTeam objects, as NSFetchRequest<Team> does")
        let third = try openCoordinator(dir, model: model)
        let filtered = try await privateContext(third).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "TypedTeam", predicate: #Predicate<TypedTeam> { $0.rank == 3 })).map(\.name)
        }
        #expect(filtered == ["Owls"], "a #Predicate over the class named as the entity fetches it")
    }

    @Test("#Predicate and sort over a computed property that transforms a model property: not translated as if it were the property (wrong results); evaluated in memory / refused")
    func computedPropertyNotMistranslated() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try typedModel(), classes: [(TypedTeam.self, "TypedTeam")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (name, rank) in [("A", 1), ("B", 5), ("C", 20)] {
                let team = try TypedTeam(context: context)
                team.name = name
                team.rank = Int64(rank)
            }
            try context.save()
            let top = try context.fetch(
                FetchRequest(entityName: "TypedTeam", predicate: #Predicate<TypedTeam> { $0.isTopTen }), as: TypedTeam.self)
            #expect(Set(top.compactMap(\.name)) == ["A", "B"], "isTopTen is rank <= 10, not rank == YES")
            let negative = try context.fetch(
                FetchRequest(entityName: "TypedTeam", predicate: #Predicate<TypedTeam> { $0.negatedRank < -4 }), as: TypedTeam.self)
            #expect(Set(negative.compactMap(\.name)) == ["B", "C"], "-rank < -4, not rank < -4")
            // A plain typed property still translates (and so is exact).
            let plain = try context.fetch(
                FetchRequest(entityName: "TypedTeam", predicate: #Predicate<TypedTeam> { $0.rank >= 5 }), as: TypedTeam.self)
            #expect(Set(plain.compactMap(\.name)) == ["B", "C"])
            // Sorting by a transformed value can't use the model property: refused, not sorted by rank.
            let sorted = FetchRequest(entityName: "TypedTeam", sortDescriptors: [FetchSortDescriptor(\TypedTeam.negatedRank)])
            #expect {
                _ = try context.fetch(sorted)
            } throws: { error in
                "\(error)".contains("negatedRank") || "\(error)".contains("computed")
            }
            let byRank = try context.fetch(
                FetchRequest(entityName: "TypedTeam", sortDescriptors: [FetchSortDescriptor(\TypedTeam.rank, ascending: false)]), as: TypedTeam.self)
            #expect(byRank.compactMap(\.name) == ["C", "B", "A"])
        }
    }

    @Test("sorted(using:) in memory by a computed key path: sorted by the computed value (it sorted by the property read, or not at all); model key paths as before")
    func inMemorySortByComputedKeyPath() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try typedModel(), classes: [(TypedTeam.self, "TypedTeam")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var teams: [TypedTeam] = []
            for (name, rank) in [("B", 5), ("A", 1), ("C", 20)] {
                let team = try TypedTeam(context: context)
                team.name = name
                team.rank = Int64(rank)
                teams.append(team)
            }
            #expect(teams.sorted(using: [FetchSortDescriptor(\TypedTeam.negatedRank)]).compactMap(\.name) == ["C", "B", "A"])
            #expect(teams.sorted(using: [FetchSortDescriptor(\TypedTeam.rank)]).compactMap(\.name) == ["A", "B", "C"])
            #expect(
                teams.sorted(using: [FetchSortDescriptor(\TypedTeam.isTopTen, ascending: false), FetchSortDescriptor(key: "name", ascending: false)])
                    .compactMap(\.name) == ["B", "A", "C"], "top ten first (true after false ascending), then by name descending")
        }
    }
}

class TypedPerson: ManagedObject {
    nonisolated(unsafe) static var log: [String] = []
    override func awakeFromInsert() {
        super.awakeFromInsert()
        Self.log.append("person.insert")
    }
    override func willSave() {
        super.willSave()
        Self.log.append("person.willSave")
    }
}

final class TypedEmployee: TypedPerson {
    var salary: Decimal? {
        get { get("salary") }
        set { setValue(newValue, forKey: "salary") }
    }
    var ratio: Float {
        get { get("ratio") ?? 0 }
        set { setValue(newValue, forKey: "ratio") }
    }
    var badge: UUID? {
        get { get("badge") }
        set { setValue(newValue, forKey: "badge") }
    }
    var home: URL? {
        get { get("home") }
        set { setValue(newValue, forKey: "home") }
    }
    var level: Int16 {
        get { get("level") ?? 0 }
        set { setValue(newValue, forKey: "level") }
    }
    override func awakeFromInsert() {
        super.awakeFromInsert()
        Self.log.append("employee.insert")
    }
    override func setNilValueForKey(_ key: String) {
        if key == "level" { setValue(Int16(1), forKey: key) } else { super.setNilValueForKey(key) }
    }
}

extension TypedAPIReviewTests {
    @Test("subclass of a subclass for a sub-entity: hooks run through super; Decimal, Float, UUID, URL, Int16 round trip through a restart; IDs JSON round trip across coordinators")
    func subclassScalarsAndIDs() async throws {
        let model = try ManagedObjectModel {
            Entity("TypedPerson") { Attribute("name", .string) }
            Entity("TypedEmployee", parent: "TypedPerson") {
                Attribute("salary", .decimal)
                Attribute("ratio", .float, default: 0).required()
                Attribute("badge", .uuid)
                Attribute("home", .uri)
                Attribute("level", .int16, default: 0).required()
            }
        }
        let dir = try TemporaryDirectory()
        TypedPerson.log = []
        let badge = UUID()
        let (data, tempData): (Data, Data) = try await {
            let coordinator = try openCoordinator(dir, model: model)
            return try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let employee = try TypedEmployee(context: context)
                let tempData = try JSONEncoder().encode(employee.objectID)
                employee.salary = Decimal(string: "1234.56")
                employee.ratio = 0.5
                employee.badge = badge
                employee.home = URL(string: "https://example.com/a")
                employee.level = 3
                employee.setValue(nil, forKey: "level")
                #expect(employee.level == 1, "setNilValueForKey override")
                try context.save()
                return (try JSONEncoder().encode(employee.objectID), tempData)
            }
        }()
        #expect(TypedPerson.log == ["person.insert", "employee.insert", "person.willSave"])
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let fetched = try context.fetch(TypedEmployee.fetchRequest(), as: TypedEmployee.self)
            #expect(fetched.count == 1)
            let id = try JSONDecoder().decode(ManagedObjectID.self, from: data)
            #expect(try context.existingObject(with: id) === fetched.first, "the decoded ID names the fetched object")
            if let e = fetched.first {
                #expect(e.salary == Decimal(string: "1234.56"))
                #expect(e.ratio == 0.5)
                #expect(e.badge == badge)
                #expect(e.home == URL(string: "https://example.com/a"))
                #expect(e.level == 1)
                #expect(coordinator.managedObjectID(forURIRepresentation: e.objectID.uriRepresentation()) == e.objectID)
            }
            let temp = try JSONDecoder().decode(ManagedObjectID.self, from: tempData)
            #expect(temp.isTemporaryID)
            #expect(throws: ContextError.self) { _ = try context.existingObject(with: temp) }
        }
    }
}

final class TypedItem: ManagedObject {
    var name: String? { self.get("name") }
    var count: Int32? { self.get("count") }
    var flag: Bool { self.get("flag") ?? false }
    var price: Double { self.get("price") ?? 0 }
}

extension TypedAPIReviewTests {
    @Test("#Predicate forms: a fetch finds what Predicate.evaluate accepts on every object (translated or not)")
    func predicateFormsAgreeWithEvaluate() async throws {
        let model = try ManagedObjectModel {
            Entity("TypedItem") {
                Attribute("name", .string)
                Attribute("count", .int32)
                Attribute("flag", .boolean)
                Attribute("price", .double)
            }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model, classes: [(TypedItem.self, "TypedItem")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let rows: [(String?, Int32?, Bool?, Double?)] = [
                ("apple", 1, true, 1.5), ("Apricot", nil, false, nil), (nil, 3, nil, -2), ("", 0, true, 0), ("banana", -5, false, .nan),
            ]
            for (name, count, flag, price) in rows {
                let item = try context.insertNewObject(forEntityName: "TypedItem")
                item.setValue(name, forKey: "name")
                item.setValue(count, forKey: "count")
                item.setValue(flag, forKey: "flag")
                item.setValue(price, forKey: "price")
            }
            try context.save()
            let wanted: [Int32] = [1, 3]
            let predicates: [(String, Predicate<TypedItem>)] = [
                ("count == nil", #Predicate<TypedItem> { $0.count == nil }),
                ("count != 1", #Predicate<TypedItem> { $0.count != 1 }),
                ("count != nil", #Predicate<TypedItem> { $0.count != nil }),
                ("name == nil", #Predicate<TypedItem> { $0.name == nil }),
                ("name != apple", #Predicate<TypedItem> { $0.name != "apple" }),
                ("flag", #Predicate<TypedItem> { $0.flag }),
                ("!flag", #Predicate<TypedItem> { !$0.flag }),
                ("price > 0", #Predicate<TypedItem> { $0.price > 0 }),
                ("price <= 0", #Predicate<TypedItem> { $0.price <= 0 }),
                ("!(price > 0)", #Predicate<TypedItem> { !($0.price > 0) }),
                ("[1,3].contains(count)", #Predicate<TypedItem> { wanted.contains($0.count ?? -1) }),
                ("price == 0", #Predicate<TypedItem> { $0.price == 0 }),
            ]
            let all = try context.fetch(FetchRequest(entityName: "TypedItem"), as: TypedItem.self)
            for (label, predicate) in predicates {
                let expected = Set(try all.filter { try predicate.evaluate($0) }.map(\.objectID))
                let found = Set(try context.fetch(FetchRequest(entityName: "TypedItem", predicate: predicate)).map(\.objectID))
                #expect(found == expected, "\(label)")
            }
        }
    }
}

final class TypedPlayer: ManagedObject {
    var team: TypedClub? { self.get("team") }
}
/// Named unlike its entity, and never registered.
final class TypedClub: ManagedObject {
    var name: String? { self.get("name") }
}

extension TypedAPIReviewTests {
    @Test("sort by \\Player.team?.name when the destination's class isn't registered: refused with a hint, not sorted by the team's ID")
    func toOneKeyPathWithUnregisteredDestination() async throws {
        let model = try ManagedObjectModel {
            Entity("Club") {
                Attribute("name", .string)
                Relationship("players", to: "TypedPlayer", inverse: "team", toMany: true)
            }
            Entity("TypedPlayer") { Relationship("team", to: "Club", inverse: "players") }
        }
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: model, classes: [(TypedPlayer.self, "TypedPlayer")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["Zebras", "Ants"] {
                let club = try context.insertNewObject(forEntityName: "Club")
                club.setValue(name, forKey: "name")
                let player = try TypedPlayer(context: context)
                player.setValue(club, forKey: "team")
            }
            try context.save()
            let request = FetchRequest(entityName: "TypedPlayer", sortDescriptors: [FetchSortDescriptor(\TypedPlayer.team?.name)])
            #expect {
                _ = try context.fetch(request)
            } throws: { error in
                "\(error)".contains("is the destination's class registered")
            }
            coordinator.register(TypedClub.self, forEntityName: "Club")
            context.reset()
            let sorted = try context.fetch(request, as: TypedPlayer.self).map { $0.team?.name }
            #expect(sorted == ["Ants", "Zebras"])
        }
    }
}
