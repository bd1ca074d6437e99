public import Foundation
import StrataLog

/// A generation of a store — the state just after one of its transactions — that a context
/// can be pinned to (Core Data's `NSQueryGenerationToken`).
///
/// A context pinned to a generation reads the store as it was then: fetches, counts,
/// faults, relationship faults and `existingObject(with:)` all see the same snapshot, however
/// many saves other contexts and processes make meanwhile, until the context saves, merges,
/// is reset or is given another token. Take a context's token with
/// ``ManagedObjectContext/queryGenerationToken`` to pin another context to the same state.
///
/// ```swift
/// try await viewContext.perform { context in
///     try context.setQueryGenerationFrom(.current)   // pinned at the next read
///     let teams = try context.fetch(FetchRequest(entityName: "Team"))
///     // … a background context saves new teams; `context` keeps seeing the old list …
/// }
/// ```
///
/// Spec 0006 §22.
public struct QueryGenerationToken: Sendable, Hashable, Codable, CustomStringConvertible {
    enum Kind: Sendable, Hashable {
        case current
        case pinned(store: UUID, sequence: UInt64)
    }

    let kind: Kind

    init(kind: Kind) { self.kind = kind }

    /// The generation just after transaction `sequence` of the store `storeIdentifier`: for
    /// reading a store as of a point in its log (Strata's; Core Data's tokens come only from
    /// contexts). A context refuses it if it is past the store's head or purged.
    public init(storeIdentifier: UUID, sequence: UInt64) {
        kind = .pinned(store: storeIdentifier, sequence: sequence)
    }

    /// The token that pins a context to the store's newest generation at its next read
    /// (`NSQueryGenerationToken.current`).
    public static let current = QueryGenerationToken(kind: .current)

    /// The store the generation belongs to; nil for ``current``.
    public var storeIdentifier: UUID? {
        if case .pinned(let store, _) = kind { return store }
        return nil
    }

    /// The sequence number of the transaction the generation follows (0: the empty store);
    /// nil for ``current``. The same number `strata log` and the history API show.
    public var sequence: UInt64? {
        if case .pinned(_, let sequence) = kind { return sequence }
        return nil
    }

    /// "current", or "generation N of store UUID".
    public var description: String {
        switch kind {
        case .current: "current"
        case .pinned(let store, let sequence): "generation \(sequence) of store \(store.uuidString)"
        }
    }

    private enum CodingKeys: String, CodingKey {
        case current, store, sequence
    }

    /// Encodes `{"store":"UUID","sequence":N}`, or `{"current":true}` for ``current``.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch kind {
        case .current:
            try container.encode(true, forKey: .current)
        case .pinned(let store, let sequence):
            try container.encode(store, forKey: .store)
            try container.encode(sequence, forKey: .sequence)
        }
    }

    /// Decodes what ``encode(to:)`` writes.
    ///
    /// - Throws: `DecodingError` naming the missing or mistyped member.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if try container.decodeIfPresent(Bool.self, forKey: .current) == true {
            kind = .current
        } else {
            kind = .pinned(store: try container.decode(UUID.self, forKey: .store), sequence: try container.decode(UInt64.self, forKey: .sequence))
        }
    }
}

extension ContextCore {
    /// Reads the store as this context sees it: as of its query generation when pinned,
    /// otherwise the current state.
    func readPinned<R>(_ log: EventLog, _ body: (borrowing LogReader) throws -> R) throws -> R {
        guard let generation else { return try log.read(body) }
        // Read at the new generation: the one moved on from isn't pinned back to, and its
        // view (the old values of everything changed since it) is let go.
        retiredGeneration = nil
        do {
            return try log.read(pinnedTo: generation, body)
        } catch let error as LogError {
            guard case .historyPurged(let requested, let purged) = error, requested == generation.sequence else { throw error }
            throw ContextError.store(
                "this context is pinned to query generation \(requested), but the store's history through \(purged) was purged, so that state can't be read any more: pin a later generation (setQueryGenerationFrom(.current))",
                underlying: .log(error))
        }
    }

    /// The token of the generation the context reads; nil when it reads the current state.
    /// A context set to ``QueryGenerationToken/current`` that hasn't read yet is pinned now.
    var queryGenerationToken: QueryGenerationToken? {
        guard let generation else { return nil }
        guard let store = try? store() else { return .current }
        if generation.sequence == nil { _ = try? store.log.read(pinnedTo: generation) { _ in () } }
        guard let sequence = generation.sequence else { return .current }
        return QueryGenerationToken(kind: .pinned(store: store.identifier, sequence: sequence))
    }

    /// Pins the context to `token`'s generation, to the newest at the next read
    /// (``QueryGenerationToken/current``), or unpins it (nil).
    func setQueryGeneration(_ token: QueryGenerationToken?) throws {
        guard let token else {
            generation = nil
            retiredGeneration = nil
            return
        }
        guard parentContext == nil else {
            throw ContextError.invalidArgument(
                "a child context reads its parent, not the store, so it sees the parent's query generation: set the token on the root context")
        }
        switch token.kind {
        case .current:
            generation = GenerationView(sequence: nil)
        case .pinned(let storeIdentifier, let sequence):
            let store = try self.store()
            guard storeIdentifier == store.identifier else {
                throw ContextError.invalidArgument(
                    "the query generation token is for store \(storeIdentifier.uuidString); this context's store is \(store.identifier.uuidString)")
            }
            let (head, purged) = try store.log.read { reader in (try reader.head, try reader.purgedThrough) }
            guard sequence <= head else {
                throw ContextError.invalidArgument("query generation \(sequence) is past the store's newest transaction, \(head)")
            }
            guard sequence >= purged else {
                throw ContextError.invalidArgument(
                    "query generation \(sequence) can't be read: the store's history through \(purged) was purged")
            }
            // The view of a generation the context read before (a reset or a save moved it
            // on, and it is pinned back) is kept: it has already read the log since.
            if let retired = retiredGeneration, retired.sequence == sequence {
                generation = retired
            } else if generation?.sequence != sequence {
                generation = GenerationView(sequence: sequence)
            }
        }
    }

    /// After a save, a merge or a reset, a pinned context moves on (Core Data advances a
    /// pinned context's generation at these points): to `sequence` — the transaction saved
    /// or merged through — or, when nil, to the newest generation at its next read. Never
    /// backwards.
    func advanceGeneration(to sequence: UInt64?) {
        guard let generation else { return }
        guard let sequence, let pinned = generation.sequence else {
            if generation.sequence != nil { retiredGeneration = generation }
            self.generation = GenerationView(sequence: nil)
            return
        }
        if sequence > pinned {
            retiredGeneration = generation
            self.generation = GenerationView(sequence: sequence)
        }
    }
}
