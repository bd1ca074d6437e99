import Synchronization

/// Temporary IDs an ancestor has made permanent, posted into each descendant context at once
/// (on the ancestor's queue), for the descendant to take in before it next looks up an
/// object by ID, fetches, or serves a child of its own (spec 0006 §18.4). The message on the
/// descendant's queue that takes them in runs only after the block running there (and, for
/// a grandchild, after the middle context's), and a descendant that met the permanent ID
/// before that — through its parent's values, a fetch, a URI — made a second object for it:
/// two objects shared the ID once the message came (before session 36).
final class RemapInbox: Sendable {
    /// One ancestor's remap: old to new, and new to old (for ``formerID(of:)``).
    struct Remap: Sendable {
        let map: [ManagedObjectID: ManagedObjectID]
        let former: [ManagedObjectID: ManagedObjectID]

        init(_ map: [ManagedObjectID: ManagedObjectID]) {
            self.map = map
            former = Dictionary(map.map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        }
    }

    private let remaps = Mutex<[Remap]>([])
    /// How many remaps wait: read without the lock, so a lookup finding nothing registered
    /// pays one atomic load when none does.
    private let waiting = Atomic<Int>(0)

    /// Posts one remap.
    func post(_ remap: Remap) {
        remaps.withLock { remaps in
            remaps.append(remap)
            waiting.store(remaps.count, ordering: .releasing)
        }
    }

    /// Whether no remap waits.
    var isEmpty: Bool { waiting.load(ordering: .acquiring) == 0 }

    /// The waiting remaps' maps, oldest first; none wait afterwards.
    func take() -> [[ManagedObjectID: ManagedObjectID]] {
        guard !isEmpty else { return [] }
        return remaps.withLock { remaps in
            let taken = remaps.map(\.map)
            remaps = []
            waiting.store(0, ordering: .releasing)
            return taken
        }
    }

    /// The temporary ID a waiting remap makes `permanent`, if one does.
    func formerID(of permanent: ManagedObjectID) -> ManagedObjectID? {
        guard !isEmpty else { return nil }
        return remaps.withLock { remaps in remaps.lazy.reversed().compactMap { $0.former[permanent] }.first }
    }
}
