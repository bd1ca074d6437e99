import Dispatch
import Synchronization

/// Contexts held weakly, keyed by their core, reachable from any thread: a coordinator's
/// automatically merging contexts (its in-process broadcast of commits), a context's children.
final class ContextRegistry: Sendable {
    private struct Member: Sendable {
        weak var context: ManagedObjectContext?
        /// A child context's, in its parent's registry: the remaps its ancestors post (``RemapInbox``).
        var inbox: RemapInbox?
    }
    private let members = Mutex<[ObjectIdentifier: Member]>([:])

    /// Adds a context, keyed by its core (a child, in its parent's registry, with its remap inbox).
    func add(_ context: ManagedObjectContext, key: ObjectIdentifier, inbox: RemapInbox? = nil) {
        members.withLock { $0[key] = Member(context: context, inbox: inbox) }
    }

    /// The live members that have a remap inbox, with it.
    func contextsWithInboxes() -> [(context: ManagedObjectContext, inbox: RemapInbox)] {
        members.withLock { members in
            members.values.compactMap { member in member.context.flatMap { context in member.inbox.map { (context, $0) } } }
        }
    }

    /// Removes a context.
    func remove(key: ObjectIdentifier) {
        _ = members.withLock { $0.removeValue(forKey: key) }
    }

    /// The live contexts except the one keyed `excluded`; forgets released ones.
    func contexts(except excluded: ObjectIdentifier?) -> [ManagedObjectContext] {
        members.withLock { members in
            members = members.filter { $0.value.context != nil }
            return members.filter { $0.key != excluded }.compactMap(\.value.context)
        }
    }

    /// Transactions through `sequence` were committed (by the context keyed `source`, or by
    /// another process when nil): every other member merges them, asynchronously.
    func didCommit(through sequence: UInt64, source: ObjectIdentifier?) {
        for context in contexts(except: source) { context.scheduleMerge(through: sequence) }
    }
}

extension PersistentStoreCoordinator {
    /// Tells every automatically merging context of this coordinator that the store holds
    /// transactions through `head`; each merges the ones it hasn't seen on its own queue,
    /// without blocking the caller. Contexts call this after each save; a store watcher
    /// calls it when another process commits.
    public func mergeStoreChanges(through head: UInt64) {
        mergeHub.didCommit(through: head, source: nil)
    }

    /// Starts watching the store for commits (the store monitor: this process's commits and,
    /// through the file watcher, other processes') on behalf of automatically merging
    /// contexts, so another process's save is merged when it lands rather than when the
    /// context next runs. Idempotent; the watch lasts while the coordinator does.
    func watchStoreForMerging() {
        guard let store = try? requireStore() else { return }
        storeWatch.withLock { watch in
            guard watch == nil else { return }
            watch = store.log.storeMonitor.addObserver { [weak self] head in self?.mergeStoreChanges(through: head) }
        }
    }
}
