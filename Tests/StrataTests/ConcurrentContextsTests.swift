import Foundation
import Strata
import StrataTestSupport
import Synchronization
import Testing

/// Several background contexts on their own threads insert, update, move, delete and undo
/// players and teams at the same time, each with its own merge policy, saving as they go.
/// Whatever the interleaving: no crash, a failed save is an error naming a conflict, the
/// store verifies clean, and every context that refreshes sees the store's state with
/// inverses on both sides. Size: STRATA_CONCURRENT_ROUNDS (default 60 per context).
@Suite("Contexts: concurrent writers")
struct ConcurrentContextsTests {
    @Test("three contexts writing the same objects at once, with different merge policies: no crash, verify clean, inverses whole")
    func concurrentWriters() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for t in 0..<4 {
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("team \(t)", forKey: "name")
                for p in 0..<5 {
                    let player = try context.insertNewObject(forEntityName: "Player")
                    player.setValue("p\(t)-\(p)", forKey: "firstName")
                    player.setValue(team, forKey: "team")
                }
            }
            try context.save()
        }
        let rounds = Int(ProcessInfo.processInfo.environment["STRATA_CONCURRENT_ROUNDS"] ?? "") ?? 60
        let policies: [StandardMergePolicy] = [.error, .mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump, .overwrite]
        let outcome = Outcome()
        let finished = DispatchSemaphore(value: 0)
        for writer in 0..<3 {
                Thread {
                    defer { finished.signal() }
                    let context = ManagedObjectContext(
                        concurrencyType: .privateQueue, coordinator: coordinator, name: "writer \(writer)", transactionAuthor: "w\(writer)")
                    context.performAndWait { (context: isolated ManagedObjectContext) in
                        var random = SeededGenerator(seed: UInt64(0xC0C0 + writer))
                        context.mergePolicy = policies[writer % policies.count]
                        context.automaticallyMergesChangesFromParent = writer == 1
                        for round in 0..<rounds {
                            do {
                                let players = try context.fetch(FetchRequest(entityName: "Player"))
                                let teams = try context.fetch(FetchRequest(entityName: "Team"))
                                for _ in 0..<(1 + random.next() % 4) {
                                    switch random.next() % 6 {
                                    case 0:
                                        let player = try context.insertNewObject(forEntityName: "Player")
                                        player.setValue("new \(writer)-\(round)", forKey: "firstName")
                                        if let team = teams.randomElement(using: &random) { player.setValue(team, forKey: "team") }
                                    case 1:
                                        if let player = players.randomElement(using: &random), !player.isDeleted { context.delete(player) }
                                    case 2:
                                        if let player = players.randomElement(using: &random), !player.isDeleted {
                                            player.setValue(teams.randomElement(using: &random), forKey: "team")
                                        }
                                    case 3:
                                        if let team = teams.randomElement(using: &random), !team.isDeleted {
                                            team.setValue("team \(writer)-\(round)", forKey: "uniformColor")
                                        }
                                    default:
                                        if let player = players.randomElement(using: &random), !player.isDeleted {
                                            player.setValue("\(writer)-\(round)", forKey: "lastName")
                                        }
                                    }
                                }
                                if random.next() % 5 == 0 && context.canUndo { try context.undo() }
                                try context.save()
                                outcome.saves.withLock { $0 += 1 }
                            } catch let error as ContextError {
                                // A conflict the policy refused, or an undo another writer
                                // made impossible: named, and the context starts over.
                                let text = "\(error)"
                                if !(text.contains("conflict") || text.contains("another writer") || text.contains("deleted")
                                    || text.contains("gave up") || text.contains("no longer") || text.contains("not found")
                                    || text.contains("missing"))
                                {
                                    outcome.unexpected.withLock { $0.append("writer \(writer) round \(round): \(text)") }
                                }
                                context.rollback()
                                context.refreshAllObjects()
                            } catch {
                                outcome.unexpected.withLock { $0.append("writer \(writer) round \(round): \(error)") }
                                context.rollback()
                            }
                        }
                    }
                }.start()
        }
        for _ in 0..<3 { finished.wait() }
        #expect(outcome.unexpected.withLock { $0 }.isEmpty, "\(outcome.unexpected.withLock { $0 }.prefix(5))")
        #expect(outcome.saves.withLock { $0 } > rounds, "most saves went through")
        let log = try #require(coordinator.persistentStores.first).log
        let report = try log.verify()
        #expect(report.problems.isEmpty, "\(report.problems.prefix(5))")
        // A fresh context sees both sides of every team–player link.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for player in try context.fetch(FetchRequest(entityName: "Player")) {
                guard let team = player.value(forKey: "team") as? ManagedObject else { continue }
                let members = team.value(forKey: "players") as? Set<ManagedObject> ?? []
                #expect(members.contains(player), "\(player.objectID) is on \(team.objectID), which doesn't list it")
            }
            for team in try context.fetch(FetchRequest(entityName: "Team")) {
                for player in team.value(forKey: "players") as? Set<ManagedObject> ?? [] {
                    #expect((player.value(forKey: "team") as? ManagedObject)?.objectID == team.objectID)
                }
            }
        }
    }
}

/// What the writers of ``ConcurrentContextsTests`` report.
final class Outcome: Sendable {
    let unexpected = Mutex<[String]>([])
    let saves = Mutex(0)
}
