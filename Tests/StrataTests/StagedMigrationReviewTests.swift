import Dispatch
import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Synchronization
import Testing

/// Review of staged migration (spec 0006 §19.6): plans checked on every add, the whole
/// migration inside the one-at-a-time lock, a pending didMigrate found again after the
/// plan changed.
extension StagedMigrationTests {
    /// Whether `error` is `invalidDescription` whose text contains `text`.
    static func isInvalidDescription(_ error: any Error, containing text: String) -> Bool {
        guard case .invalidDescription(let message) = error as? PersistentStoreError else { return false }
        return message.contains(text)
    }

    @Test("stages that don't make one path are an invalid description for a new store too (before, they were checked only once a store existed: a mistake tested on fresh installs showed first on users' upgrades); nothing is created")
    func invalidPlanOnNewStore() throws {
        let dir = try TemporaryDirectory()
        let manager = StagedMigrationManager([.lightweight([Self.v1People, Self.v2People, Self.v1People])])
        #expect {
            _ = try Self.load(dir, Self.v3People, manager)
        } throws: { error in
            Self.isInvalidDescription(error, containing: "meets model version 1 twice")
        }
        #expect(!FileManager.default.fileExists(atPath: Self.storeURL(dir).appendingPathComponent("data.mdb").path), "no store created")
    }
}
