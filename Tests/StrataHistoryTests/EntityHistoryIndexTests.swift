import Foundation
import Strata
import StrataTestSupport
import Testing

/// Entity history queries over ranges long enough to go through the per-object history
/// index (or, when the entities' objects changed in most transactions, past it): the same
/// transactions and changes as filtering every transaction, raw and compacted.
@Suite("History: entity queries through the per-object index")
struct EntityHistoryIndexTests {
    /// 400 transactions: mostly team renames; now and then a player, a captain or a
    /// sponsor inserted, changed or deleted, sometimes with a team in the same transaction.
    func busyLeague(_ dir: TemporaryDirectory) async throws -> PersistentStoreCoordinator {
        let coordinator = try openCoordinator(dir, model: try historyModel())
        var random = SeededGenerator(seed: 0x5EED_0400)
        let contexts = [
            ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "editor", transactionAuthor: "alice"),
            ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "importer", transactionAuthor: "bob"),
        ]
        var teams: [ManagedObjectID] = []
        var people: [ManagedObjectID] = []
        var sponsors: [ManagedObjectID] = []
        for n in 0..<400 {
            let roll = random.next() % 100
            let context = contexts[Int(random.next() % 2)]
            let (team, person, sponsor) = (teams.randomElement(using: &random), people.randomElement(using: &random), sponsors.randomElement(using: &random))
            let other = teams.randomElement(using: &random)
            let created: (ManagedObjectID?, ManagedObjectID?, ManagedObjectID?, ManagedObjectID?) = try await context.perform {
                (context: isolated ManagedObjectContext) throws in
                var made: (ManagedObjectID?, ManagedObjectID?, ManagedObjectID?, ManagedObjectID?) = (nil, nil, nil, nil)
                var inserted: [ManagedObject] = []
                if team == nil || roll < 70 {
                    if let team, roll >= 10 {
                        try context.existingObject(with: team).setValue("team \(n)", forKey: "name")
                        // Often a second team too: teams get more history rows than there are
                        // transactions.
                        if let other, other != team { try context.existingObject(with: other).setValue("other \(n)", forKey: "name") }
                    } else {
                        let new = try context.insertNewObject(forEntityName: "Team")
                        new.setValue("team \(n)", forKey: "name")
                        inserted.append(new)
                    }
                }
                if roll >= 70 && roll < 80 || (roll >= 95 && person == nil) {
                    let player = try context.insertNewObject(forEntityName: roll % 2 == 0 ? "Captain" : "Player")
                    player.setValue("player \(n)", forKey: "name")
                    if let team, roll >= 10 { player.setValue(try context.existingObject(with: team), forKey: "team") }
                    inserted.append(player)
                } else if roll >= 80 && roll < 90, let person {
                    try context.existingObject(with: person).setValue(Double(n), forKey: "rating")
                } else if roll >= 90 && roll < 95 {
                    let new = try context.insertNewObject(forEntityName: "Sponsor")
                    new.setValue("sponsor \(n)", forKey: "name")
                    if let team, roll >= 10 { new.mutableSetValue(forKey: "teams").add(try context.existingObject(with: team)) }
                    inserted.append(new)
                } else if roll >= 95, let person {
                    context.delete(try context.existingObject(with: person))
                    made.3 = person
                } else if roll >= 95, let sponsor {
                    try context.existingObject(with: sponsor).setValue("renamed \(n)", forKey: "name")
                }
                try context.save()
                for object in inserted {
                    switch object.entity.name {
                    case "Team": made.0 = object.objectID
                    case "Sponsor": made.2 = object.objectID
                    default: made.1 = object.objectID
                    }
                }
                return made
            }
            if let id = created.0 { teams.append(id) }
            if let id = created.1 { people.append(id) }
            if let id = created.2 { sponsors.append(id) }
            if let gone = created.3 { people.removeAll { $0 == gone } }
        }
        return coordinator
    }

    /// What `request` should return, as (sequence, changes): every transaction, filtered here.
    func expected(_ all: [HistoryTransaction], _ request: HistoryRequest, entities: Set<String>) -> [Selected] {
        var result: [Selected] = []
        for transaction in all {
            if let token = request.afterToken, transaction.sequence <= token.sequence { continue }
            if let range = request.sequenceRange, !range.contains(transaction.sequence) { continue }
            if let author = request.author, transaction.author != author { continue }
            let changes = transaction.changes.filter { entities.contains($0.entityName) }
            guard !changes.isEmpty else { continue }
            result.append(Selected(sequence: transaction.sequence, author: transaction.author, changes: changes))
            if request.fetchLimit > 0 && result.count == request.fetchLimit { break }
        }
        return result
    }

    struct Selected: Hashable, CustomStringConvertible {
        let sequence: UInt64
        let author: String?
        let changes: [HistoryChange]
        init(sequence: UInt64, author: String?, changes: [HistoryChange]) {
            self.sequence = sequence
            self.author = author
            self.changes = changes
        }
        init(_ transaction: HistoryTransaction) {
            self.init(sequence: transaction.sequence, author: transaction.author, changes: transaction.changes)
        }
        var description: String { "\(sequence): \(changes.map(\.changedObjectID))" }
    }

    @Test("entity queries (sub-entities or not, by author, after a token, in a range, limited) equal filtering every transaction, raw and compacted")
    func sameAsFiltering() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await busyLeague(dir)
        let all = try coordinator.history(HistoryRequest())
        #expect(all.count > 380, "a few saves had nothing to save")
        let log = try #require(coordinator.persistentStores.first).log
        // The premise: the players' rows in the index are fewer than the transactions, the
        // teams' more.
        let head = UInt64(all.count)
        let playerRows = try log.read { try $0.history(ofEntities: ["Player", "Captain"], after: 0, through: head, budget: Int(head)) }
        #expect(playerRows != nil && playerRows?.isEmpty == false)
        #expect(try log.read { try $0.history(ofEntities: ["Team"], after: 0, through: head, budget: Int(head)) } == nil)
        let cases: [(HistoryRequest, Set<String>)] = [
            (.entity("Player"), ["Player", "Captain"]),
            (.entity("Player", includesSubentities: false), ["Player"]),
            (.entity("Captain"), ["Captain"]),
            (.entity("Sponsor"), ["Sponsor"]),
            // Teams change in most transactions: the index has more of their rows than the
            // range has events, so every event is read instead.
            (.entity("Team"), ["Team"]),
        ]
        var requests: [(HistoryRequest, Set<String>)] = []
        for (request, entities) in cases {
            requests.append((request, entities))
            var byAuthor = request
            byAuthor.author = "bob"
            requests.append((byAuthor, entities))
            // Bounds on transactions the entity's objects changed in: each bound is where
            // an off-by-one would show.
            let touching = expected(all, request, entities: entities).map(\.sequence)
            var after = request
            after.afterToken = try #require(all.first { $0.sequence == touching[touching.count / 3] }).token
            requests.append((after, entities))
            var range = request
            range.sequenceRange = touching[touching.count / 4]...touching[touching.count * 3 / 4]
            requests.append((range, entities))
            requests.append((request.limited(to: 7), entities))
        }
        for compacted in [false, true] {
            if compacted {
                var compaction = CompactionRequest(before: 301)
                compaction.eventsPerFrame = 16
                #expect(try log.compact(compaction).moved == 1...300)
                #expect(try coordinator.history(HistoryRequest()) == all)
            }
            for (request, entities) in requests {
                let found = try coordinator.history(request).map(Selected.init)
                #expect(found == expected(all, request, entities: entities), "\(request) (compacted: \(compacted))")
            }
        }
        // The players' history is the index's rows: not every transaction.
        let players = try coordinator.history(.entity("Player"))
        #expect(players.count > 10 && players.count < 200)
    }
}
