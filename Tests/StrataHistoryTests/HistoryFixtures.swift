import Foundation
import Strata
import StrataTestSupport
import Testing

/// Teams, players (with `Captain` as a sub-entity), and sponsors: a to-one recorded side
/// (`Player.team`), its derived inverse (`Team.players`), and a many-to-many whose recorded
/// side (`Sponsor.teams`) changes by membership.
func historyModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Team") {
            Attribute("name", .string)
            Relationship("players", to: "Player", inverse: "team", toMany: true)
            Relationship("sponsors", to: "Sponsor", inverse: "teams", toMany: true)
        }
        Entity("Player") {
            Attribute("name", .string)
            Attribute("rating", .double)
            Relationship("team", to: "Team", inverse: "players")
        }
        Entity("Captain", parent: "Player") {
            Attribute("since", .date)
        }
        Entity("Sponsor") {
            Attribute("name", .string)
            Relationship("teams", to: "Team", inverse: "sponsors", toMany: true)
        }
    }
}

/// A coordinator with an event-log store in `directory` (a new one each call: a "restart").
func openCoordinator(_ directory: TemporaryDirectory, model: ManagedObjectModel, name: String = "store")
    throws -> PersistentStoreCoordinator
{
    let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
    var configuration = EventLog.Configuration()
    configuration.initialMapSize = 4 << 20
    try coordinator.addPersistentStore(type: .eventLog, at: directory.url.appendingPathComponent(name), configuration: configuration)
    return coordinator
}

/// The objects of ``makeLeagueHistory(_:)``.
struct LeagueIDs: Sendable {
    let otters: ManagedObjectID
    let ada: ManagedObjectID
    let cy: ManagedObjectID
    let acme: ManagedObjectID
}

/// Six transactions with every kind of change:
///
/// 1. alice/editor "Add Ada": insert Team Otters, Player Ada (team Otters)
/// 2. bob/importer: insert Captain Cy (team Otters), Sponsor Acme (teams [Otters])
/// 3. alice/editor, two groups: "Rename" Ada → "Ada L."; then Ada's rating nil → 4.5
/// 4. bob/importer: Acme leaves Otters (membership removed)
/// 5. bob/importer: delete Cy
/// 6. alice/editor: undo of 3's second group (rating 4.5 → nil), kind undo(of: 3, group: 1)
func makeLeagueHistory(_ coordinator: PersistentStoreCoordinator) async throws -> LeagueIDs {
    let editor = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "editor", transactionAuthor: "alice")
    let importer = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "importer", transactionAuthor: "bob")
    let (otters, ada) = try await editor.perform { (context: isolated ManagedObjectContext) throws in
        let team = try context.insertNewObject(forEntityName: "Team")
        team.setValue("Otters", forKey: "name")
        let player = try context.insertNewObject(forEntityName: "Player")
        player.setValue("Ada", forKey: "name")
        player.setValue(team, forKey: "team")
        context.setActionName("Add Ada")
        try context.save()
        return (team.objectID, player.objectID)
    }
    let (cy, acme) = try await importer.perform { (context: isolated ManagedObjectContext) throws in
        let team = try context.existingObject(with: otters)
        let captain = try context.insertNewObject(forEntityName: "Captain")
        captain.setValue("Cy", forKey: "name")
        captain.setValue(Date(timeIntervalSince1970: 1_767_225_600), forKey: "since")
        captain.setValue(team, forKey: "team")
        let sponsor = try context.insertNewObject(forEntityName: "Sponsor")
        sponsor.setValue("Acme", forKey: "name")
        sponsor.mutableSetValue(forKey: "teams").add(team)
        try context.save()
        return (captain.objectID, sponsor.objectID)
    }
    try await editor.perform { (context: isolated ManagedObjectContext) throws in
        let player = try context.existingObject(with: ada)
        player.setValue("Ada L.", forKey: "name")
        context.setActionName("Rename")
        context.processPendingChanges()
        player.setValue(4.5, forKey: "rating")
        try context.save()
    }
    try await importer.perform { (context: isolated ManagedObjectContext) throws in
        let sponsor = try context.existingObject(with: acme)
        sponsor.mutableSetValue(forKey: "teams").remove(try context.existingObject(with: otters))
        try context.save()
        context.delete(try context.existingObject(with: cy))
        try context.save()
    }
    try await editor.perform { (context: isolated ManagedObjectContext) throws in
        try context.undo()  // the rating group of transaction 3
        try context.save()
    }
    return LeagueIDs(otters: otters, ada: ada, cy: cy, acme: acme)
}

/// Runs the `StrataHistoryProbe` writer: COUNT transactions into `store` by `author`.
func startWriter(store: String, count: Int, author: String = "probe") throws -> (ChildProcess, Pipe) {
    let process = ChildProcess()
    process.executableURL = BuildProducts.executable("StrataHistoryProbe")
    process.arguments = ["write", store, String(count), author]
    let out = Pipe()
    process.standardOutput = out
    process.standardError = FileHandle.standardError
    try process.run()
    return (process, out)
}

/// The number of transactions the cross-process feed test writes (STRATA_FEED_TRANSACTIONS,
/// default 300; the long run uses 10,000).
var feedTransactionCount: Int {
    Int(ProcessInfo.processInfo.environment["STRATA_FEED_TRANSACTIONS"] ?? "") ?? 300
}
