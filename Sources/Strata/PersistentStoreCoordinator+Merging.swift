import Dispatch
import Synchronization

/// The coordinator's in-process broadcast of commits: after each transaction a context of
/// this coordinator commits, every automatically merging context (other than the one that
/// saved) is told, on its own queue, to merge through the new head.
final class MergeHub: Sendable {
    private struct Member: Sendable {
        weak var context: ManagedObjectContext?
    }
    private let members = Mutex<[ObjectIdentifier: Member]>([:])

    /// Adds an automatically merging context, keyed by its core.
    func add(_ context: ManagedObjectContext, key: ObjectIdentifier) {
        members.withLock { $0[key] = Member(context: context) }
    }

    /// Removes a context.
    func remove(key: ObjectIdentifier) {
        _ = members.withLock { $0.removeValue(forKey: key) }
    }

    /// Transactions through `sequence` were committed (by the context keyed `source`, or by
    /// another process when nil): every other member merges them, asynchronously.
    func didCommit(through sequence: UInt64, source: ObjectIdentifier?) {
        let targets = members.withLock { members -> [ManagedObjectContext] in
            members = members.filter { $0.value.context != nil }
            return members.filter { $0.key != source }.compactMap(\.value.context)
        }
        for context in targets { context.scheduleMerge(through: sequence) }
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
}
