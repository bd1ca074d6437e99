import Foundation
@testable import Strata
@testable import StrataLog
import StrataTestSupport
import Testing

/// Session 31 fixes: a removed attribute added back (spec 0004 §4.7), NaN dates in sorts and
/// min/max (spec 0008), grouping of canonically equivalent strings (spec 0008), and as-of
/// reads before a paired side's fill (spec 0004 §4.1).
@Suite("Model versions adding back, NaN dates, grouped strings, as-of before a paired side's fill", .serialized)
struct ModelAndAggregateFixTests {
    // MARK: - A removed attribute added back

    static func player(nickname: String?) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Player") {
                Attribute("name", .string)
                if let nickname { Attribute("nickname", .string, default: .string(nickname)) }
            }
        }
    }

    static func nicknames(_ coordinator: PersistentStoreCoordinator) async throws -> [String] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Player")
            request.sortDescriptors = [FetchSortDescriptor(key: "name")]
            return try context.fetch(request).map {
                "\($0.value(forKey: "name") as? String ?? "?")=\($0.value(forKey: "nickname") as? String ?? "nil")"
            }
        }
    }

    static func insertPlayer(_ coordinator: PersistentStoreCoordinator, _ name: String) async throws {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(name, forKey: "name")
            try context.save()
        }
    }

    @Test("an attribute a version removed, added back with only a default (the first version's hash), is a new version: existing objects take the default, as Core Data's lightweight migration gives them")
    func removedAttributeAddedBack() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.url.appendingPathComponent("store").path
        try await Self.insertPlayer(try openCoordinator(dir, model: try Self.player(nickname: "x")), "Ada")
        try await Self.insertPlayer(try openCoordinatorRemoving(dir, model: try Self.player(nickname: nil)), "Bob")
        #expect(try EventLog(openingExistingAt: path).modelVersion == 2)

        let third = try openCoordinator(dir, model: try Self.player(nickname: "y"))
        #expect(third.persistentStores[0].log.modelVersion == 3, "a new version, not version 1 again")
        #expect(try await Self.nicknames(third) == ["Ada=y", "Bob=y"])
        let log = try EventLog(openingExistingAt: path)
        #expect(log.modelVersion == 3)
        #expect(log.storedModels().count == 3)

        // The version that removed it is an earlier app's model now: it opens as itself,
        // and what it writes is migrated at the next open of version 3.
        let second = try openCoordinator(dir, model: try Self.player(nickname: nil))
        #expect(second.persistentStores[0].log.modelVersion == 2)
        try await Self.insertPlayer(second, "Cy")
        let again = try openCoordinator(dir, model: try Self.player(nickname: "y"))
        #expect(again.persistentStores[0].log.modelVersion == 3)
        #expect(try await Self.nicknames(again) == ["Ada=y", "Bob=y", "Cy=y"])
        #expect(try EventLog(openingExistingAt: path).storedModels().count == 3, "no version stored on each open")
        #expect(try again.persistentStores[0].log.verify().isClean)
    }

    @Test("an earlier stored version that lacks what the newest has still opens as itself (an earlier app's), adding back nothing")
    func earlierVersionStillOpensAsItself() async throws {
        let dir = try TemporaryDirectory()
        func model(_ extra: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                Entity("Player") {
                    Attribute("name", .string)
                    if extra { Attribute("club", .string) }
                }
            }
        }
        try await Self.insertPlayer(try openCoordinator(dir, model: try model(false)), "Ada")
        try await Self.insertPlayer(try openCoordinator(dir, model: try model(true)), "Bob")
        let earlier = try openCoordinator(dir, model: try model(false))
        #expect(earlier.persistentStores[0].log.modelVersion == 1)
        #expect(earlier.persistentStores[0].log.storedModels().count == 2)
    }
}
