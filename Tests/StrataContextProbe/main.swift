// A second process for the context-merging tests (issue 8): it saves through a context on a
// store another process has open, or watches that store through an automatically merging
// context. Store model: SeedModels.leagueManager. Output is unbuffered, one line per step.
//
//   StrataContextProbe save  STORE TEAM_URI NAME   rename the team to NAME, insert the player
//                                                  "Probe" on it, delete every team named
//                                                  "Doomed"; save; print "saved SEQ PLAYER_URI"
//   StrataContextProbe watch STORE TEAM_URI        load the team in an automatically merging
//                                                  context, print "ready NAME"; then for each
//                                                  line "check" on standard input run an empty
//                                                  perform (the head check merges what other
//                                                  processes saved) and print "name NAME
//                                                  MERGED_THROUGH"; exit at end of input
//   StrataContextProbe mainqueue STORE             a container's view context under dispatchMain()
//                                                  (MainQueue.swift); exit 0 when every call ran
//   StrataContextProbe staged STORE                add the StagedPeopleModels store at version
//                                                  3 through a staged migration (Staged.swift)
//                                                  printing its steps; "loaded" at the end
//   StrataContextProbe set|insert|purge|loop|die|stall|publish-wait … the multi-process review's modes (Review.swift)
import Foundation
import Strata
import StrataTestSupport

func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("StrataContextProbe: \(text)\n".utf8))
    exit(1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "staged" { runStaged(arguments) }
if arguments.first == "mainqueue" { runMainQueue(arguments) }
if let mode = arguments.first, ["set", "insert", "purge", "loop", "die", "stall", "publish-wait"].contains(mode) { runReview(arguments) }
guard arguments.count >= 3 else { fail("usage: save STORE TEAM_URI NAME | watch STORE TEAM_URI") }

do {
    let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
    try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: arguments[1]))
    guard let uri = URL(string: arguments[2]), let teamID = coordinator.managedObjectID(forURIRepresentation: uri) else {
        fail("not a team of this store: \(arguments[2])")
    }
    let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "probe", transactionAuthor: "probe")
    switch arguments[0] {
    case "save":
        guard arguments.count == 4 else { fail("save needs STORE TEAM_URI NAME") }
        let name = arguments[3]
        let (sequence, player) = try context.performAndWait { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue(name, forKey: "name")
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Probe", forKey: "lastName")
            player.setValue(team, forKey: "team")
            let doomed = try FormatPredicate(format: "name == %@", "Doomed")
            for team in try context.fetch(FetchRequest(entityName: "Team", predicate: doomed)) { context.delete(team) }
            try context.save()
            return (try coordinator.persistentStores[0].log.head, player.objectID)
        }
        say("saved \(sequence) \(player)")
    case "watch":
        let name = try context.performAndWait { (context: isolated ManagedObjectContext) throws in
            context.automaticallyMergesChangesFromParent = true
            let team = try context.existingObject(with: teamID)
            return team.value(forKey: "name") as? String ?? "nil"
        }
        say("ready \(name)")
        while let line = readLine() {
            guard line == "check" else { continue }
            let (current, through) = try context.performAndWait { (context: isolated ManagedObjectContext) throws in
                let team = try context.existingObject(with: teamID)
                return (team.value(forKey: "name") as? String ?? "nil", try context.mergeStoreChanges())
            }
            say("name \(current) \(through)")
        }
    default:
        fail("unknown command \(arguments[0])")
    }
} catch {
    fail("\(error)")
}
