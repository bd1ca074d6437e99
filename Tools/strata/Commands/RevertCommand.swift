import ArgumentParser
import Foundation
import Strata
import Synchronization

/// `strata revert`: undo saved transactions, whoever wrote them, as a new transaction.
struct RevertCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revert",
        abstract: "Revert saved transactions (a bad import, a buggy client's saves) with a new undo transaction.",
        discussion: """
            Opens the store writable with its newest model and reverts transaction SEQ as a
            context's undo of saved work does (spec 0006 §25): inserted objects are deleted,
            deleted ones brought back under their IDs, values and memberships set back; the
            model's validation and delete rules run at the save. It is written as a new
            transaction, "undo of SEQ" (SEQ itself an "undo of S" is reverted as "redo of S",
            a "redo of S" as "undo of S"), so the history keeps both.

            Several sequences are reverted as one, in one new transaction (spec 0006 §25.6):
            their changes taken together in log order, so a value two of them changed goes
            back to what it was before the first. Transactions between them that aren't
            listed are kept; if one of those changed a value a listed transaction set and a
            later listed one changed again, nothing is written and the transaction between
            them is named.

            Nothing is written, and the exit status is 1, if a later transaction changed what
            they changed (the conflict names the object, the property and both values), or if
            the save is refused. --dry-run checks the conflicts and prints what would be
            reverted without writing.

            Another process's write transaction makes the revert wait: after a second it says
            so on standard error, naming the process, and after --wait seconds (default 60;
            0: don't wait; forever) it gives up, nothing written, exit status 1.

            --where selects transactions by a predicate over their header, as strata log
            --where does (author, contextName, timestamp, processID, transactionNumber,
            storeID), with the sequences given or instead of them: every save, undo, redo and
            import it accepts is reverted with them (other kinds change no object the revert
            could take back, and are left out). None accepted and no sequence given: exit 1.

            Examples:
              strata log League.strata --author importer
              strata revert League.strata 1042 --dry-run
              strata revert League.strata 1042 --author "alice (ops)"
              strata revert League.strata 1042 1043 1050
              strata revert League.strata --where 'author == "sync-client" AND transactionNumber > 1040' --dry-run
            """
    )

    @OptionGroup var options: StoreOptions

    @Argument(help: ArgumentHelp("The sequence numbers of the transactions to revert (one or more, in any order).", valueName: "seq"))
    var sequences: [UInt64] = []

    @Option(
        name: .customLong("where"),
        help: ArgumentHelp(
            "Also revert every save, undo, redo and import this predicate accepts, over author, contextName, timestamp, processID, transactionNumber and storeID.",
            valueName: "predicate"))
    var transactionPredicate: String?

    @Option(help: "The author recorded on the revert transaction.")
    var author = "strata revert"

    @Flag(help: "Check and print what would be reverted, without writing.")
    var dryRun = false

    @OptionGroup var writerWait: WriterWaitOptions

    func validate() throws {
        // Before, `--author ''` recorded the revert with an empty author, naming no one.
        try refuseEmpty(author, "--author", "give the author to record on the revert transaction (default: strata revert)")
        guard !sequences.isEmpty || transactionPredicate != nil else {
            throw ValidationError("give the sequence number of at least one transaction to revert, or --where")
        }
        _ = try transactionPredicate.map(TransactionWhere.parse)
    }

    func run() throws {
        writerWait.install(store: options.store)
        try runCommand {
            let (head, sequences) = try settle()
            let named = sequences.count == 1 ? "transaction \(sequences[0])" : "transactions \(sequences.map(String.init).joined(separator: ", "))"
            let log = dryRun ? try options.openReadOnly() : try options.openWritable()
            let events = try log.read { reader in try sequences.map { try reader.event($0) } }
            let coordinator = PersistentStoreCoordinator(managedObjectModel: log.model)
            try coordinator.addPersistentStore(openedLog: log)
            let context = ManagedObjectContext(
                concurrencyType: .privateQueue, coordinator: coordinator, name: "strata revert", transactionAuthor: author)
            let tokens = sequences.map { HistoryToken(storeIdentifier: log.storeUUID, sequence: $0) }
            let dryRun = self.dryRun
            let out = OutputSink()
            defer { out.close() }
            for event in events { out.line("revert       \(EventText.header(event))") }
            do {
                // The save's own sequence, from its did-save notification (posted before save()
                // returns): the head read after it could already be another writer's commit.
                let savedSequence = Mutex<UInt64?>(nil)
                let observer = NotificationCenter.default.addObserver(
                    forName: ManagedObjectContext.didSaveObjectsNotification, object: context, queue: nil
                ) { notification in
                    let sequence = notification.userInfo?[ManagedObjectContext.NotificationKey.sequence.rawValue] as? UInt64
                    savedSequence.withLock { $0 = sequence }
                }
                defer { NotificationCenter.default.removeObserver(observer) }
                let written = try context.performAndWait { context -> UInt64? in
                    try context.revertTransactions(at: tokens)
                    guard !dryRun else { return nil }
                    try context.save()
                    return savedSequence.withLock { $0 } ?? head
                }
                guard let written else {
                    out.line("would write  the inverse of these changes (dry run: nothing was written)")
                    for event in events.reversed() {
                        for group in event.groups.reversed() {
                            for change in group.changes.reversed() {
                                for line in EventText.lines(Self.inverse(change), log) { out.line(line) }
                            }
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
                throw CommandFailure("\(named) can't be reverted, nothing was written: \(error)")
            } catch let error as HistoryError {
                out.close()
                throw CommandFailure("\(named) can't be reverted, nothing was written: \(error)")
            }
        }
    }

    /// The head and the sequences to revert, checked, settled on a read-only open (released
    /// on return): a revert refused for its arguments — a sequence past the head, 0, purged,
    /// or nothing `--where` accepts — doesn't open the store writable, which records the open
    /// in data.mdb.
    private func settle() throws -> (head: UInt64, sequences: [UInt64]) {
        let log = try options.openReadOnly()
        let (head, purged) = try log.read { reader in (try reader.head, try reader.purgedThrough) }
        var selected = Set(self.sequences)
        if let text = transactionPredicate {
            let predicate = try TransactionWhere.parse(text)
            let storeUUID = log.storeUUID
            try log.read { reader in
                guard purged < head else { return }
                try reader.forEachEvent(from: purged + 1, through: head, where: { TransactionWhere.accepts(predicate, $0, storeUUID: storeUUID) }) { event in
                    switch event.kind {
                    case .save, .undo, .redo, .import: selected.insert(event.sequence)
                    case .migration, .reservation, .purge: break
                    }
                    return .next
                }
            }
            guard !selected.isEmpty else {
                throw CommandFailure("no save, undo, redo or import is accepted by --where \(text); nothing was written")
            }
        }
        let sequences = selected.sorted()
        for sequence in sequences {
            guard sequence > 0 else { throw CommandFailure("sequence 0 is the point before the first transaction; nothing to revert") }
            try log.checkSequence(sequence, head: head)
            if sequence <= purged { throw CommandFailure("transaction \(sequence) was purged: the store's history through \(purged) is gone") }
        }
        return (head, sequences)
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
