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
        // Another restart: Team.fetchRequest() fetched untyped, then a #Predicate over the class.
        let again = try openCoordinator(dir, model: model)
        let untyped = try await privateContext(again).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(TypedTeam.fetchRequest()).map { ($0 as? TypedTeam)?.rank }
        }
        #expect(untyped == [3], "TypedTeam.fetchRequest() makes TypedTeam objects, as NSFetchRequest<Team> does")
        let third = try openCoordinator(dir, model: model)
        let filtered = try await privateContext(third).perform { (context: isolated ManagedObjectContext) throws in
            try context.fetch(FetchRequest(entityName: "TypedTeam", predicate: #Predicate<TypedTeam> { $0.rank == 3 })).map { ($0 as? TypedTeam)?.name }
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
