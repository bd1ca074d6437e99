import Foundation
import Strata
import StrataTestSupport
import Testing

/// The state the property test expects: teams by name; players by name with age and team.
struct ExpectedState: Equatable, Sendable {
    var teams: Set<String> = []
    var players: [String: (age: Int32, team: String?)] = [:]

    static func == (a: ExpectedState, b: ExpectedState) -> Bool {
        a.teams == b.teams && a.players.count == b.players.count
            && a.players.allSatisfy { key, value in b.players[key].map { $0.age == value.age && $0.team == value.team } ?? false }
    }
}


func propertyModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Team") {
            Attribute("name", .string)
            Relationship("players", to: "Player", inverse: "team", toMany: true)
        }
        Entity("Player") {
            Attribute("name", .string)
            Attribute("age", .int32, default: 20).required()
            Relationship("team", to: "Team", inverse: "players")
        }
    }
}

/// Reads the context's view of the state (pending changes included).
func observe(_ context: isolated ManagedObjectContext) throws -> ExpectedState {
    var state = ExpectedState()
    for team in try context.fetch(FetchRequest(entityName: "Team")) { state.teams.insert(team.value(forKey: "name") as? String ?? "?") }
    for player in try context.fetch(FetchRequest(entityName: "Player")) {
        state.players[player.value(forKey: "name") as? String ?? "?"] = (
            player.value(forKey: "age") as? Int32 ?? -1, (player.value(forKey: "team") as? ManagedObject)?.value(forKey: "name") as? String)
    }
    // Inverse consistency: every team's players point back at it.
    for team in try context.fetch(FetchRequest(entityName: "Team")) {
        for player in team.value(forKey: "players") as? Set<ManagedObject> ?? [] where (player.value(forKey: "team") as? ManagedObject) != team {
            throw ContextError.invalidArgument("inverse broken: \(player) is in \(team).players but its team differs")
        }
    }
    return state
}

@Suite("Contexts: property-based")
struct ContextPropertyTests {
    static let steps = Int(ProcessInfo.processInfo.environment["STRATA_PROPERTY_STEPS"] ?? "") ?? 250

    @Test("random inserts, updates, deletes, undo, redo, rollback and saves match a simple model", arguments: [1, 2, 3] as [UInt64])
    func randomOperations(seed: UInt64) async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try propertyModel())
        let context = privateContext(coordinator)
        var rng = SeededGenerator(state: seed)
        var expected = ExpectedState()
        var saved = ExpectedState()
        var undoStack: [ExpectedState] = []  // the state before each group
        var redoStack: [ExpectedState] = []
        var counter = 0
        var log: [String] = []

        for step in 0..<Self.steps {
            let roll = Int(rng.next() % 100)
            let teams = expected.teams.sorted()
            let players = expected.players.keys.sorted()
            var description = ""
            var changed = true
            let before = expected
            switch roll {
            case 0..<15:
                counter += 1
                let name = "t\(counter)"
                description = "insert team \(name)"
                expected.teams.insert(name)
                try await context.perform { context in
                    let team = try context.insertNewObject(forEntityName: "Team")
                    team.setValue(name, forKey: "name")
                }
            case 15..<35:
                counter += 1
                let name = "p\(counter)"
                let age = Int32(rng.next() % 80)
                let team = teams.isEmpty || rng.next() % 3 == 0 ? nil : teams[Int(rng.next() % UInt64(teams.count))]
                description = "insert player \(name) age \(age) team \(team ?? "-")"
                expected.players[name] = (age, team)
                try await context.perform { context in
                    let player = try context.insertNewObject(forEntityName: "Player")
                    player.setValue(name, forKey: "name")
                    player.setValue(age, forKey: "age")
                    if let team { player.setValue(try context.fetch(FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "name == %@", team))).first, forKey: "team") }
                }
            case 35..<50 where !players.isEmpty:
                let name = players[Int(rng.next() % UInt64(players.count))]
                let age = Int32(rng.next() % 80)
                description = "set \(name).age = \(age)"
                changed = expected.players[name]?.age != age
                expected.players[name]?.age = age
                try await context.perform { context in
                    let player = try #require(try context.fetch(FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "name == %@", name))).first)
                    player.setValue(age, forKey: "age")
                }
            case 50..<62 where !players.isEmpty:
                let name = players[Int(rng.next() % UInt64(players.count))]
                let team = teams.isEmpty || rng.next() % 4 == 0 ? nil : teams[Int(rng.next() % UInt64(teams.count))]
                description = "set \(name).team = \(team ?? "-")"
                changed = expected.players[name]?.team != team
                expected.players[name]?.team = team
                try await context.perform { context in
                    let player = try #require(try context.fetch(FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "name == %@", name))).first)
                    let target = try team.map { try #require(try context.fetch(FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "name == %@", $0))).first) }
                    player.setValue(target, forKey: "team")
                }
            case 62..<68 where !players.isEmpty:
                let name = players[Int(rng.next() % UInt64(players.count))]
                description = "delete player \(name)"
                expected.players[name] = nil
                try await context.perform { context in
                    context.delete(try #require(try context.fetch(FetchRequest(entityName: "Player", predicate: try FormatPredicate(format: "name == %@", name))).first))
                }
            case 68..<72 where !teams.isEmpty:
                let name = teams[Int(rng.next() % UInt64(teams.count))]
                description = "delete team \(name) (nullify)"
                expected.teams.remove(name)
                for (player, value) in expected.players where value.team == name { expected.players[player]?.team = nil }
                try await context.perform { context in
                    context.delete(try #require(try context.fetch(FetchRequest(entityName: "Team", predicate: try FormatPredicate(format: "name == %@", name))).first))
                }
            case 72..<82 where !undoStack.isEmpty:
                description = "undo"
                changed = false
                redoStack.append(expected)
                expected = undoStack.removeLast()
                try await context.perform { context in try context.undo() }
            case 82..<88 where !redoStack.isEmpty:
                description = "redo"
                changed = false
                undoStack.append(expected)
                expected = redoStack.removeLast()
                try await context.perform { context in try context.redo() }
            case 88..<96:
                description = "save"
                changed = false
                try await context.perform { context in try context.save() }
                saved = expected
                let fresh = privateContext(coordinator)
                let stored = try await fresh.perform { context in try observe(context) }
                #expect(stored == saved, "seed \(seed) step \(step): the store after save\n\(log.suffix(12).joined(separator: "\n"))")
            case 96..<100:
                description = "rollback"
                changed = false
                expected = saved
                undoStack.removeAll()
                redoStack.removeAll()
                await context.perform { context in context.rollback() }
            default:
                continue
            }
            if changed {
                undoStack.append(before)
                redoStack.removeAll()
                await context.perform { context in context.processPendingChanges() }
            }
            log.append("\(step): \(description)")
            let observed = try await context.perform { context in try observe(context) }
            if observed != expected {
                Issue.record("seed \(seed) step \(step) after \(description):\nexpected \(expected)\nobserved \(observed)\n\(log.suffix(12).joined(separator: "\n"))")
                return
            }
        }
        try await context.perform { context in try context.save() }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }
}
