import ArgumentParser
import Foundation
import Strata

/// `strata migrate`: what opening a store with a new model would do, tried on a copy.
struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Try a model file's migration on a copy of a store: what it changes, or why it is refused.",
        discussion: """
            Copies the store (a consistent copy, as replacing a store makes one) and opens the
            copy writable with the model in MODEL_FILE (a model file, spec 0002), as an app
            with that model would at its first open: the model-version migration runs (spec
            0004 §4.3–4.6). Prints the model version the copy stores the model as, each
            migration transaction with its inserts, updates and deletes per entity, and what
            verify finds in the migrated copy; or why the migration is refused (the objects
            and values it can't take over), exit status 1. STORE itself is opened read-only
            and never changed. The copy is deleted afterwards, unless --into keeps it (a
            store with STORE's UUID); a refused migration keeps nothing there.

            Examples:
              strata migrate League.strata League-v4.json
              strata migrate League.strata League-v4.json --into /tmp/league-v4.strata
            """
    )

    @OptionGroup var options: StoreOptions

    @Argument(help: ArgumentHelp("The model file to migrate to (JSON, spec 0002).", valueName: "model-file"))
    var modelFile: String

    @Option(help: ArgumentHelp("Keep the migrated copy as a store in this directory (new, or empty).", valueName: "dir"))
    var into: String?

    @Flag(
        name: .customLong("allow-removing"),
        help: "Migrate to a model that lacks entities or stored properties the store's model has, taking their values out (an app opening with it is refused unless it allows that).")
    var allowRemoving = false

    func validate() throws {
        try refuseEmpty(modelFile, "MODEL_FILE", "give the path of a model file (JSON, spec 0002)")
        try refuseEmpty(into, "--into", "give the path of a directory")
        if let into, FileManager.default.fileExists(atPath: into) {
            let contents = (try? FileManager.default.contentsOfDirectory(atPath: into)) ?? ["?"]
            if !contents.isEmpty { throw ValidationError("--into \(into) already exists and is not an empty directory") }
        }
    }

    func run() throws {
        try runCommand {
            // A file that can't be read is named with the system's reason (`No such file or
            // directory`, `Is a directory`; before, Foundation's error dump), one that doesn't
            // load with the model's problems.
            let data: Data
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: modelFile))
            } catch {
                throw CommandFailure("\(modelFile): can't read the model file: \(OutputSink.reason(error))")
            }
            let model: ManagedObjectModel
            do {
                model = try ManagedObjectModel(jsonData: data)
            } catch {
                throw CommandFailure("\(modelFile): \(error)")
            }
            // The copy (without --into) and verify's scratch environment go there.
            let temporary = try existingTemporaryDirectory()
            let source = try options.openReadOnly()
            let scratch = into == nil
                ? (temporary as NSString).appendingPathComponent("strata-migrate-\(UUID().uuidString)")
                : nil
            let path = into ?? (scratch.map { ($0 as NSString).appendingPathComponent("store") } ?? "")
            defer { if let scratch { try? FileManager.default.removeItem(atPath: scratch) } }
            // A copy the migration doesn't get through isn't kept in --into: it would be an
            // unmigrated store there. What --into made goes; a directory given empty stays empty.
            // Only the copy is removed, and the directories made for it that are still empty:
            // a copy that failed (DIR taken meanwhile) leaves DIR and what is in it alone.
            let createdInto = into.flatMap { EventLog.firstMissingAncestor(of: $0) }
            var copied = false
            var keep = false
            defer {
                if let into, !keep {
                    if copied, createdInto != nil {
                        try? FileManager.default.removeItem(atPath: into)
                    } else if copied {
                        for entry in (try? FileManager.default.contentsOfDirectory(atPath: into)) ?? [] {
                            try? FileManager.default.removeItem(atPath: (into as NSString).appendingPathComponent(entry))
                        }
                    }
                    if let createdInto {
                        EventLog.removeEmptyDirectories(from: (into as NSString).deletingLastPathComponent, through: createdInto)
                    }
                }
            }
            try EventLog.replaceStore(at: path, withCopyOf: source)
            copied = true
            // The copy's head, not the store's: an app may have committed since the copy.
            let head = try EventLog(openingExistingAt: path).head
            let out = OutputSink()
            defer { out.close() }

            let copy: EventLog
            do {
                var configuration = EventLog.Configuration()
                configuration.allowsRemovingEntitiesAndProperties = allowRemoving
                copy = try EventLog(path: path, model: model, configuration: configuration)
            } catch let error as LogError {
                // What refuses a model version's migration (spec 0004 §4.3–4.6): a value it
                // can't take over, a uniqueness constraint the objects break, a derived value
                // that doesn't fit its type.
                let reason: String
                switch error {
                case .migration(let detail): reason = detail
                // A model lacking what the store's model has (spec 0004 §4.7), without
                // --allow-removing.
                // The copy's path reads as STORE's.
                case .modelMismatch(let detail):
                    reason = detail.replacingOccurrences(of: path, with: options.store) + " (strata migrate: --allow-removing)"
                case .uniquenessViolation, .derivation: reason = error.description
                default: throw error
                }
                out.line("refused: the store can't be migrated to \(modelFile): \(reason)")
                out.line("(nothing was written to \(options.store)\(into.map { "; nothing was kept at \($0)" } ?? ""))")
                out.close()
                throw ExitStatus.failure
            }
            let stored = source.storedModels().map(\.version)
            out.line("model        \(modelFile) is model version \(copy.modelVersion)"
                + (stored.contains(copy.modelVersion) ? " (stored already)" : " (new; the store has \(stored.map(String.init).joined(separator: ", ")))"))
            // An earlier version than the one the store's data is in: its open migrates nothing
            // back (spec 0004 §4.5), so the data stays in the later version's terms (before,
            // "nothing to migrate: the store's data is in this model's terms already").
            if copy.modelVersion < source.modelVersion {
                out.line(
                    "refused: \(modelFile) is model version \(copy.modelVersion), earlier than model version \(source.modelVersion), which the store's data is in: an open with an earlier model migrates nothing back (spec 0004 §4.5): the data stays in model version \(source.modelVersion)'s terms, and this model can't change the objects written with properties it lacks")
                out.line("(nothing was written to \(options.store)\(into.map { "; nothing was kept at \($0)" } ?? ""))")
                out.close()
                throw ExitStatus.failure
            }
            keep = true  // migrated: --into keeps it, whatever verify finds in it
            let events = try copy.read { reader in
                let migrated = try reader.head
                return migrated > head ? try (head + 1...migrated).map { try reader.event($0) } : []
            }
            if events.isEmpty { out.line("migration    nothing to migrate: the store's data is in this model's terms already") }
            for event in events {
                var counts: [String: (inserts: Int, updates: Int, deletes: Int)] = [:]
                for change in event.groups.flatMap(\.changes) {
                    switch change {
                    case .insert(let id, _): counts[id.entity, default: (0, 0, 0)].inserts += 1
                    case .update(let id, _): counts[id.entity, default: (0, 0, 0)].updates += 1
                    case .delete(let id, _): counts[id.entity, default: (0, 0, 0)].deletes += 1
                    }
                }
                let summary = counts.isEmpty
                    ? "no object changes (indexes rebuilt)"
                    : counts.sorted { $0.key < $1.key }.map { entity, count in
                        [("inserted", count.inserts), ("updated", count.updates), ("deleted", count.deletes)]
                            .filter { $0.1 > 0 }.map { "\($0.1) \($0.0)" }.joined(separator: ", ") + " \(entity)"
                    }.joined(separator: "; ")
                let role = event.modelVersion == copy.modelVersion
                    ? ""
                    : " (taking out values model version \(copy.modelVersion) stores under other names, or not at all)"
                out.line("migration    #\(event.sequence) in model version \(event.modelVersion)\(role): \(summary)")
            }
            // Relationships the model makes lead to another entity (--allow-removing): their
            // values were dropped (spec 0004 §4.5).
            for drop in copy.lastMigrationDrops { out.line("dropped      \(drop)") }
            let report = try copy.verify()
            for problem in report.problems { out.line("verify       \(problem)") }
            out.line("verify       \(report.isClean ? "no problems" : "\(report.problems.count) problem\(report.problems.count == 1 ? "" : "s")") in the migrated copy")
            if let into { out.line("kept         the migrated copy is at \(into) (with the store's UUID)") }
            if !report.isClean {
                out.close()
                throw ExitStatus.failure
            }
        }
    }
}
