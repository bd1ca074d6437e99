import ArgumentParser
import Foundation
import Strata

/// `strata revert`: undo one saved transaction, whoever wrote it, as a new transaction.
struct RevertCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revert",
        abstract: "Revert a saved transaction (a bad import, a buggy client's save) with a new undo transaction.",
        discussion: """
            Opens the store writable with its newest model and reverts transaction SEQ as a
            context's undo of saved work does (spec 0006 §25): inserted objects are deleted,
            deleted ones brought back under their IDs, values and memberships set back; the
            model's validation and delete rules run at the save. It is written as a new
            transaction, "undo of SEQ", so the history keeps both.

            Nothing is written, and the exit status is 1, if a later transaction changed what
            SEQ changed (the conflict names the object, the property and both values), or if
            the save is refused. --dry-run checks the conflicts and prints what would be
            reverted without writing.

            Examples:
              strata log League.strata --author importer
              strata revert League.strata 1042 --dry-run
              strata revert League.strata 1042 --author "alice (ops)"
            """
    )

    @OptionGroup var options: StoreOptions

    @Argument(help: ArgumentHelp("The sequence number of the transaction to revert.", valueName: "seq"))
    var sequence: UInt64

    @Option(help: "The author recorded on the revert transaction.")
    var author = "strata revert"

    @Flag(help: "Check and print what would be reverted, without writing.")
    var dryRun = false

    func run() throws {
        try runCommand {
            let log = dryRun ? try options.openReadOnly() : try options.openWritable()
            let (head, purged) = try log.read { reader in (try reader.head, try reader.purgedThrough) }
            guard sequence > 0 else { throw CommandFailure("sequence 0 is the point before the first transaction; nothing to revert") }
            try log.checkSequence(sequence, head: head)
            if sequence <= purged { throw CommandFailure("transaction \(sequence) was purged: the store's history through \(purged) is gone") }
            let event = try log.read { reader in try reader.event(sequence) }
            let coordinator = PersistentStoreCoordinator(managedObjectModel: log.model)
            try coordinator.addPersistentStore(openedLog: log)
            let context = ManagedObjectContext(
                concurrencyType: .privateQueue, coordinator: coordinator, name: "strata revert", transactionAuthor: author)
            let token = HistoryToken(storeIdentifier: log.storeUUID, sequence: sequence)
            let dryRun = self.dryRun
            let out = OutputSink()
            defer { out.close() }
            out.line("revert       \(EventText.header(event))")
            do {
                let written = try context.performAndWait { context -> UInt64? in
                    try context.revertTransaction(at: token)
                    guard !dryRun else { return nil }
                    try context.save()
                    return try log.read { reader in try reader.head }
                }
                guard let written else {
                    out.line("would write  the inverse of these changes (dry run: nothing was written)")
                    for group in event.groups.reversed() {
                        for change in group.changes.reversed() {
                            for line in EventText.lines(Self.inverse(change), log) { out.line(line) }
                        }
                    }
                    return
                }
                guard written > head else {
                    out.line("wrote        nothing: the revert changes no stored value")
                    return
                }
                let saved = try log.read { reader in try reader.event(written) }
                out.line("wrote        \(EventText.header(saved))")
                for line in EventText.lines(saved, groups: saved.groups, log).dropFirst() { out.line(line) }
            } catch let error as ContextError {
                out.close()
                throw CommandFailure("transaction \(sequence) can't be reverted, nothing was written: \(error)")
            } catch let error as HistoryError {
                out.close()
                throw CommandFailure("transaction \(sequence) can't be reverted, nothing was written: \(error)")
            }
        }
    }

    /// What reverting `change` does, as a change.
    static func inverse(_ change: Change) -> Change {
        switch change {
        case .insert(let id, let values): .delete(id, before: values)
        case .delete(let id, let before): .insert(id, values: before)
        case .update(let id, let changes):
            .update(id, changes: changes.map { change in
                switch change {
                case .value(let property, let before, let after): .value(property: property, before: after, after: before)
                case .membership(let property, let added, let removed): .membership(property: property, added: removed, removed: added)
                }
            })
        }
    }
}
