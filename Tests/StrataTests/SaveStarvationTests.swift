import Foundation
import Strata
import StrataTestSupport
import Synchronization
import Testing

/// A save whose first commit another writer beats checks its versions again and commits
/// inside one write transaction (spec 0006 §11 step 6), so a writer that commits the same
/// object without pause can't make it lose every round.
@Suite("Saving while another writer commits the same object without pause")
struct SaveStarvationTests {
    /// Saves the context makes while the other writer runs (`STRATA_STARVATION_SAVES`).
    static let saves = Int(ProcessInfo.processInfo.environment["STRATA_STARVATION_SAVES"] ?? "") ?? 40

    @Test("every save lands, under each merge policy that resolves conflicts, and the other writer's saves land too")
    func hotWriter() async throws {
        for policy in [StandardMergePolicy.mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump, .overwrite] {
            let dir = try TemporaryDirectory()
            let (coordinator, teamID) = try await leagueStore(dir)
            let hot = privateContext(coordinator, name: "hot")
            let saver = privateContext(coordinator, name: "saver")
            await hot.perform { (context: isolated ManagedObjectContext) in context.mergePolicy = .mergeByPropertyObjectTrump }
            await saver.perform { (context: isolated ManagedObjectContext) in context.mergePolicy = policy }

            // The other writer: renames the team and saves, again and again, until told to stop.
            let shared = HotWriterState()
            let hotWriter = Thread {
                var round = 0
                while !shared.stop.load(ordering: .acquiring) {
                    round += 1
                    let name = "hot-\(round)"
                    do {
                        try hot.performAndWait { (context: isolated ManagedObjectContext) throws in
                            try context.existingObject(with: teamID).setValue(name, forKey: "name")
                            try context.save()
                        }
                        shared.saves.add(1, ordering: .relaxed)
                    } catch {
                        shared.failure.withLock { $0 = $0 ?? "\(error)" }
                    }
                }
            }
            hotWriter.start()
            defer { shared.stop.store(true, ordering: .releasing) }
            // Let the other writer get going before the saves start.
            while shared.saves.load(ordering: .relaxed) < 3 && shared.failure.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(1)) }

            for round in 0..<Self.saves {
                try await saver.perform { (context: isolated ManagedObjectContext) throws in
                    let team = try context.existingObject(with: teamID)
                    team.setValue("color-\(round)", forKey: "uniformColor")
                    let player = try context.insertNewObject(forEntityName: "Player")
                    player.setValue("p\(round)", forKey: "lastName")
                    player.setValue(team, forKey: "team")
                    try context.save()
                }
            }
            shared.stop.store(true, ordering: .releasing)
            while !hotWriter.isFinished { try await Task.sleep(for: .milliseconds(1)) }
            #expect(shared.failure.withLock { $0 } == nil, "policy \(policy)")

            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let team = try context.existingObject(with: teamID)
                #expect(try context.count(for: FetchRequest(entityName: "Player")) == Self.saves, "policy \(policy)")
                #expect((team.value(forKey: "players") as? Set<ManagedObject>)?.count == Self.saves, "policy \(policy)")
                // The other writer never sets the color: the saver's last one stands.
                #expect(team.value(forKey: "uniformColor") as? String == "color-\(Self.saves - 1)", "policy \(policy)")
            }
        }
    }
}

/// What the test and its other-writer thread share.
private final class HotWriterState: Sendable {
    let stop = Atomic<Bool>(false)
    let saves = Atomic<Int>(0)
    let failure = Mutex<String?>(nil)
}
