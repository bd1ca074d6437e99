import ArgumentParser
import Foundation
import Strata

/// `strata demo`: builds seed 004's League Manager as a store with a real history, made
/// through managed object contexts the way an app makes it, then compacts part of it.
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Build a demo store: seed 004's League Manager with a real history, partly compacted.",
        discussion: """
            Creates the League Manager of seed 004 (Team: name, uniformColor, to-many
            players with cascade delete; Player: firstName, lastName, email, team) in
            DIR, and writes its history through two managed object contexts: the coach
            adds three teams with their players; the assistant edits emails, moves a
            player to another team and renames a team; the coach deletes a team (the
            cascade deletes its players), changes a uniform colour, undoes that and
            saves the undo. Then the store is closed and reopened (the coach's undo
            stack comes back from the log), one more player is saved, and the older half
            of the history is compacted into a zstd segment. Prints each transaction as
            it is saved, a summary, and commands to try on the store next.

            DIR (default strata-demo in the current directory) must not exist or be
            empty; --force replaces a DIR that holds a Strata store (and only such a
            DIR).

            Examples:
              strata demo
              strata demo /tmp/league --force
              strata demo && strata log strata-demo
            """
    )

    @Argument(help: ArgumentHelp("Where to build the store: a new or empty directory.", valueName: "dir"))
    var directory = "strata-demo"

    @Flag(help: "Replace DIR if it already holds a Strata store.")
    var force = false

    func validate() throws {
        guard !directory.isEmpty else { throw ValidationError("the directory is empty text; give a directory that doesn't exist or is empty") }
        let fileManager = FileManager.default
        if let store = Self.enclosingStore(of: directory) {
            throw ValidationError(
                "\(directory) is inside the store at \(store): a store there would be in the other's directory (which then couldn't be destroyed or replaced); give a directory outside it")
        }
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: directory, isDirectory: &isDirectory) else { return }
        guard isDirectory.boolValue else {
            throw ValidationError("\(directory) is a file; give a directory that doesn't exist or is empty")
        }
        let contents = (try? fileManager.contentsOfDirectory(atPath: directory)) ?? []
        guard !contents.isEmpty else { return }
        guard force else {
            throw ValidationError("\(directory) already exists and isn't empty; give another directory, or --force to replace it")
        }
        let dataFile = (directory as NSString).appendingPathComponent("data.mdb")
        guard fileManager.fileExists(atPath: dataFile) else {
            throw ValidationError(
                "\(directory) isn't a Strata store (it has no data.mdb), so --force won't remove it; give another directory")
        }
    }

    /// The directory above `path` (symlinks resolved) that holds a Strata store (a
    /// `data.mdb`), nil when none does: the demo's store isn't made inside another store's
    /// directory, as `replay --into` and `migrate --into` refuse to (before, `strata demo
    /// League.strata/demo` wrote one there, and League.strata then held a directory Strata
    /// doesn't create in a store).
    static func enclosingStore(of path: String) -> String? {
        let fileManager = FileManager.default
        var url = URL(fileURLWithPath: path).standardizedFileURL
        // DIR itself holding a store is what --force replaces: only the directories above it.
        var checksItself = false
        while !fileManager.fileExists(atPath: url.path), url.pathComponents.count > 1 {
            url.deleteLastPathComponent()
            checksItself = true
        }
        url = url.resolvingSymlinksInPath()
        while true {
            if checksItself, fileManager.fileExists(atPath: url.appendingPathComponent("data.mdb").path) { return url.path }
            guard url.pathComponents.count > 1 else { return nil }
            url.deleteLastPathComponent()
            checksItself = true
        }
    }

    func run() throws {
        try runCommand {
            let fileManager = FileManager.default
            if force, fileManager.fileExists(atPath: directory) {
                // As a store is destroyed (validate checked DIR holds one): refused while any
                // process has it open, which would go on reading a store deleted under it.
                try EventLog.destroyStore(at: directory)
                if fileManager.fileExists(atPath: directory) { try fileManager.removeItem(atPath: directory) }
            }
            do {
                try fileManager.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                // Before, Foundation's error dump (`Error Domain=NSCocoaErrorDomain Code=4 …`).
                throw CommandFailure("cannot create the demo's directory \(directory): \(OutputSink.reason(error))")
            }
            try LeagueDemo(directory: directory).run()
        }
    }
}

// MARK: - The demo's story

/// Writes the League Manager's history and prints it.
private struct LeagueDemo {
    let directory: String
    var url: URL { URL(fileURLWithPath: directory, isDirectory: true) }

    /// Seed 004's model, built the same way as the tests' `SeedModels.leagueManager`.
    static func leagueManager() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Attribute("uniformColor", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true, deleteRule: .cascade)
            }
            Entity("Player") {
                Attribute("firstName", .string)
                Attribute("lastName", .string)
                Attribute("email", .string)
                Relationship("team", to: "Team", inverse: "players")
            }
        }
    }

    /// The teams the coach adds first: name, colour, players (first and last names).
    static let teams: [(name: String, color: String, players: [(String, String)])] = [
        ("Otters", "green", [("Ada", "Ng"), ("Ben", "Okafor"), ("Cleo", "Park")]),
        ("Herons", "blue", [("Dev", "Shah"), ("Eli", "Moreau"), ("Fay", "Lind")]),
        ("Comets", "orange", [("Gus", "Ito"), ("Hana", "Berg")]),
    ]

    /// What the first session leaves for the rest of the demo.
    struct FirstSession {
        var teamIDs: [String: ManagedObjectID] = [:]
        var playerIDs: [String: ManagedObjectID] = [:]
        /// The sequence of the cascade delete.
        var deleteSequence: UInt64 = 0
    }

    func run() throws {
        let model = try Self.leagueManager()
        try writeLine("strata demo: seed 004's League Manager, written through two contexts, in \(directory)")
        try writeLine()
        let first = try firstSession(model)
        let (teamNames, playerCount) = try secondSession(model, first)
        // Both coordinators are gone now, so this is the only handle on the store.
        try compactAndSummarize(first, teamNames: teamNames, playerCount: playerCount)
    }

    /// Coach and assistant build and edit the league; the coach deletes a team and undoes an edit.
    private func firstSession(_ model: ManagedObjectModel) throws -> FirstSession {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: .eventLog, at: url)
        let coach = Writer(
            context: ManagedObjectContext(
                concurrencyType: .privateQueue, coordinator: coordinator, name: "roster", transactionAuthor: "coach",
                persistentUndo: true),
            author: "coach", log: store.log)
        let assistant = Writer(
            context: ManagedObjectContext(
                concurrencyType: .privateQueue, coordinator: coordinator, name: "office", transactionAuthor: "assistant"),
            author: "assistant", log: store.log)
        var session = FirstSession()

        // 1–3: the coach adds three teams with their players, one save each.
        for team in Self.teams {
            let names = team.players.map { "\($0.0) \($0.1)" }
            let ids = try coach.save("added team \(team.name) (\(team.color)) with \(names.joined(separator: ", "))") { context in
                let object = try context.insertNewObject(forEntityName: "Team")
                object.setValue(team.name, forKey: "name")
                object.setValue(team.color, forKey: "uniformColor")
                var players: [(String, ManagedObject)] = []
                for (firstName, lastName) in team.players {
                    let player = try context.insertNewObject(forEntityName: "Player")
                    player.setValue(firstName, forKey: "firstName")
                    player.setValue(lastName, forKey: "lastName")
                    player.setValue("\(firstName.lowercased())@\(team.name.lowercased()).example", forKey: "email")
                    player.setValue(object, forKey: "team")
                    players.append(("\(firstName) \(lastName)", player))
                }
                context.setActionName("Add Team")
                try context.save()
                var ids = ["team": object.objectID]
                for (name, player) in players { ids[name] = player.objectID }
                return ids
            }
            session.teamIDs[team.name] = ids["team"]
            for (name, id) in ids where name != "team" { session.playerIDs[name] = id }
        }
        let otters = try required(session.teamIDs["Otters"], "team Otters")
        let herons = try required(session.teamIDs["Herons"], "team Herons")
        let comets = try required(session.teamIDs["Comets"], "team Comets")
        let ada = try required(session.playerIDs["Ada Ng"], "player Ada Ng")
        let dev = try required(session.playerIDs["Dev Shah"], "player Dev Shah")
        let eli = try required(session.playerIDs["Eli Moreau"], "player Eli Moreau")

        // 4–6: the assistant, in another context, edits what the coach saved.
        try assistant.save("changed the emails of Ada Ng and Dev Shah") { context in
            try context.existingObject(with: ada).setValue("ada.ng@league.example", forKey: "email")
            try context.existingObject(with: dev).setValue("dev.shah@league.example", forKey: "email")
            context.setActionName("Edit Emails")
            try context.save()
        }
        try assistant.save("moved Eli Moreau from Herons to Otters") { context in
            try context.existingObject(with: eli).setValue(try context.existingObject(with: otters), forKey: "team")
            context.setActionName("Move Player")
            try context.save()
        }
        try assistant.save("renamed Herons to Grey Herons") { context in
            try context.existingObject(with: herons).setValue("Grey Herons", forKey: "name")
            context.setActionName("Rename Team")
            try context.save()
        }

        // 7: the coach deletes a team; the cascade rule deletes its players with it.
        try coach.save("deleted team Comets; the cascade deleted Gus Ito and Hana Berg") { context in
            context.delete(try context.existingObject(with: comets))
            context.setActionName("Delete Team")
            try context.save()
        }
        session.deleteSequence = try store.log.head

        // 8–9: an edit, then its undo, saved as a transaction of kind undo.
        try coach.save("changed the Otters' uniform colour from green to teal") { context in
            try context.existingObject(with: otters).setValue("teal", forKey: "uniformColor")
            context.setActionName("Change Uniform Colour")
            try context.save()
        }
        let editSequence = try store.log.head
        try coach.save("undid #\(editSequence) and saved the undo: the Otters are green again") { context in
            try context.undo()
            try context.save()
        }
        return session
    }

    /// A restart: a new coordinator and context on the same store; one more save.
    private func secondSession(_ model: ManagedObjectModel, _ first: FirstSession) throws -> ([String], Int) {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: .eventLog, at: url)
        let context = ManagedObjectContext(
            concurrencyType: .privateQueue, coordinator: coordinator, name: "roster", transactionAuthor: "coach",
            persistentUndo: true)
        let (undoName, redoName) = context.performAndWait { context in (context.undoActionName, context.redoActionName) }
        var rebuilt: [String] = []
        if let undoName { rebuilt.append("undo \"\(undoName)\"") }
        if let redoName { rebuilt.append("redo \"\(redoName)\"") }
        try writeLine(Writer.line("", "restart", "closed the store and opened it again"))
        if !rebuilt.isEmpty {
            try writeLine(Writer.line("", "", "the coach's undo stack came back from the log: \(rebuilt.joined(separator: ", "))"))
        }
        let herons = try required(first.teamIDs["Herons"], "team Herons")
        let coach = Writer(context: context, author: "coach", log: store.log)
        try coach.save("added Ivy Quinn to Grey Herons") { context in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ivy", forKey: "firstName")
            player.setValue("Quinn", forKey: "lastName")
            player.setValue("ivy@herons.example", forKey: "email")
            player.setValue(try context.existingObject(with: herons), forKey: "team")
            context.setActionName("Add Player")
            try context.save()
        }
        return try context.performAndWait { context in
            let teams = try context.fetch(FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "name")]))
            let players = try context.count(for: FetchRequest(entityName: "Player"))
            return (teams.compactMap { $0.value(forKey: "name") as? String }, players)
        }
    }

    /// Moves the history up to the cascade delete into a segment, then prints the summary
    /// and the commands to try next.
    private func compactAndSummarize(_ first: FirstSession, teamNames: [String], playerCount: Int) throws {
        let log = try EventLog(openingExistingAt: directory, readOnly: false)
        let report = try log.compact(CompactionRequest(before: first.deleteSequence))
        let head = try log.head
        var authors: [String: Int] = [:]
        var undos = 0
        try log.read { reader in
            try reader.forEachEvent { event in
                authors[event.author ?? "(none)", default: 0] += 1
                if case .undo = event.kind { undos += 1 }
                return .next
            }
        }
        try writeLine()
        if let moved = report.moved {
            let file = report.segmentFile.map { "segments/" + ($0 as NSString).lastPathComponent } ?? "a segment"
            try writeLine(
                "compacted events \(moved.lowerBound)…\(moved.upperBound) into \(file): \(report.rawBytes) bytes raw → \(report.compressedBytes) bytes (ratio \(String(format: "%.2f", report.ratio))); events \(moved.upperBound + 1)…\(head) stay raw"
            )
        } else {
            try writeLine("compacted nothing: horizon \(report.horizon), limited by \(report.limitedBy)")
        }
        try writeLine()
        let byAuthor = authors.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }
            .map { "\($0.value) by \($0.key)" }.joined(separator: ", ")
        let absolute = url.standardizedFileURL.path
        try writeLine("store         \(absolute) (\(log.storeUUID.uuidString))")
        try writeLine("teams         \(teamNames.count): \(teamNames.joined(separator: ", "))")
        try writeLine("players       \(playerCount)")
        try writeLine("transactions  \(head): \(byAuthor); \(undos) undo\(undos == 1 ? "" : "s")")
        try writeLine()

        let dir = Self.shellQuoted(directory)
        var csvDirectory = directory
        while csvDirectory.count > 1 && csvDirectory.hasSuffix("/") { csvDirectory.removeLast() }
        let eli = first.playerIDs["Eli Moreau"].map { $0.uriRepresentation().absoluteString } ?? ""
        let beforeDelete = first.deleteSequence - 1
        let commands: [(String, String)] = [
            ("strata log \(dir)", "the whole audit trail, segment and raw log alike"),
            ("strata info \(dir)", "identity, counts, the segment, file sizes"),
            ("strata log \(dir) --author assistant", "only the assistant's transactions"),
            ("strata log \(dir) --kind undo", "the saved undo, and what it reverted"),
            ("strata log \(dir) --last 3", "the newest three transactions (--follow: then new ones as they commit)"),
            ("strata replay \(dir) --to \(beforeDelete)", "the league just before the cascade delete"),
            ("strata replay \(dir) --diff \(beforeDelete)..\(first.deleteSequence)", "what the cascade delete removed"),
            ("strata replay \(dir) --object \(Self.shellQuoted(eli))", "Eli Moreau's history, value by value"),
            ("strata export \(dir) --format csv --output \(Self.shellQuoted(csvDirectory + "-csv"))", "Team.csv and Player.csv"),
            ("strata verify \(dir)", "checksums, the segment, the state rebuilt and compared"),
            ("strata revert \(dir) \(head) --dry-run", "what taking back the last save would write"),
            ("strata model \(dir) --dot", "the model as Graphviz (pipe it to dot -Tsvg)"),
        ]
        // Comments line up after the commands, except after a long one (the URI's).
        let width = commands.map(\.0.count).filter { $0 <= 56 }.max() ?? 0
        try writeLine("Try next:")
        for (command, comment) in commands {
            try writeLine("  \(command.padding(toLength: max(width, command.count), withPad: " ", startingAt: 0))  # \(comment)")
        }
    }

    /// `text` as one shell word: as it is when that's safe, single-quoted otherwise.
    static func shellQuoted(_ text: String) -> String {
        let safe = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@%+=,")
        if !text.isEmpty && text.allSatisfy({ safe.contains($0) }) { return text }
        return "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    private func required<T>(_ value: T?, _ what: String) throws -> T {
        guard let value else { throw CommandFailure("demo: \(what) is missing") }
        return value
    }
}

/// One context of the demo and who it writes as.
private struct Writer {
    let context: ManagedObjectContext
    let author: String
    let log: EventLog

    /// Runs `body` (which saves) on the context, then prints the transaction it wrote.
    @discardableResult
    func save<T: Sendable>(_ summary: String, _ body: @Sendable (isolated ManagedObjectContext) throws -> T) throws -> T {
        let before = try log.head
        let result = try context.performAndWait { context in try body(context) }
        let head = try log.head
        guard head == before + 1 else {
            throw CommandFailure("demo: expected one transaction for \"\(summary)\", the log went from \(before) to \(head)")
        }
        try writeLine(Self.line("#\(head)", author, summary))
        return result
    }

    /// `  #7   coach      deleted …`: sequence, author, what happened, in columns.
    static func line(_ sequence: String, _ author: String, _ text: String) -> String {
        "  " + sequence.padding(toLength: 4, withPad: " ", startingAt: 0) + " "
            + author.padding(toLength: 10, withPad: " ", startingAt: 0) + " " + text
    }
}
