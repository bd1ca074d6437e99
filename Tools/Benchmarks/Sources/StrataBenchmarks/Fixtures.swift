import Foundation
import Strata

/// The benchmark model: `Person {firstName, lastName, email (indexed, unique), age (int32,
/// indexed), score (double)}` with a to-one `team` → `Team {name}`, inverse `members`.
/// The same shape as `SeedModels.people` in the test support. With `teamAgeIndex`, Person
/// also has the named index `byTeamAge` over (team, age).
func peopleModel(teamAgeIndex: Bool = false) throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Person") {
            Attribute("firstName", .string)
            Attribute("lastName", .string)
            Attribute("email", .string).indexed()
            Attribute("age", .int32).indexed()
            Attribute("score", .double)
            Relationship("team", to: "Team", inverse: "members")
            Unique("email")
            if teamAgeIndex { FetchIndex("byTeamAge", "team", "age") }
        }
        Entity("Team") {
            Attribute("name", .string)
            Relationship("members", to: "Person", inverse: "team", toMany: true)
        }
    }
}

/// One person's values, generated once and handed to every peer.
struct PersonRow: Sendable {
    var firstName: String
    var lastName: String
    var email: String
    var age: Int32
    var score: Double
    /// Index into the teams, 0-based.
    var team: Int
}

let teamNames = ["Otters", "Herons", "Foxes", "Badgers", "Kestrels", "Lynxes", "Ravens", "Salmon"]

private let firstNames = [
    "Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Margaret", "Ken", "Dennis", "Frances",
    "John", "Radia", "Leslie", "Tony", "Niklaus", "Shafi", "Butler", "Fran", "Robin", "Sophie",
    "Lynn", "Jim", "Adele", "Ivan", "Karen", "Guido", "Bjarne", "Anita", "Tim", "Hedy",
]
private let lastNames = [
    "Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Hamilton", "Thompson", "Ritchie",
    "Allen", "Backus", "Perlman", "Lamport", "Hoare", "Wirth", "Goldwasser", "Lampson", "Milner",
    "Wilson", "Conway", "Gray", "Goldberg", "Sutherland", "Jones", "Rossum", "Stroustrup", "Borg",
    "Berners-Lee", "Lamarr", "Kay",
]

/// `count` people with unique emails, deterministic for a seed.
func makePeople(_ count: Int, seed: UInt64 = 42, startingAt first: Int = 0) -> [PersonRow] {
    var random = SplitMix64(seed: seed)
    return (first..<(first + count)).map { makePerson($0, &random) }
}

/// Person number `n` (its email is unique by `n`), drawing the rest from `random`.
func makePerson(_ n: Int, _ random: inout SplitMix64) -> PersonRow {
    let firstName = firstNames[Int(random.next() % UInt64(firstNames.count))]
    let lastName = lastNames[Int(random.next() % UInt64(lastNames.count))]
    return PersonRow(
        firstName: firstName, lastName: lastName,
        email: "\(firstName.lowercased()).\(lastName.lowercased()).\(n)@example.com",
        age: Int32(18 + random.next() % 63),
        score: Double(random.next() % 100_000) / 100,
        team: Int(random.next() % UInt64(teamNames.count)))
}

extension PersonRow {
    /// The draft values, with the team as a draft reference.
    func draftValues(team: DraftObjectID) -> [String: DraftValue] {
        [
            "firstName": .attribute(.string(firstName)),
            "lastName": .attribute(.string(lastName)),
            "email": .attribute(.string(email)),
            "age": .attribute(.int32(age)),
            "score": .attribute(.double(score)),
            "team": .reference(team),
        ]
    }
}

/// The store configuration the write benchmarks use: Strata's defaults (durable commits),
/// with the map pre-sized so no run pays for growing it (the floor gets the same size).
func benchConfiguration() -> EventLog.Configuration {
    var configuration = EventLog.Configuration()
    configuration.initialMapSize = benchMapSize
    return configuration
}

let benchMapSize = 4 << 30
