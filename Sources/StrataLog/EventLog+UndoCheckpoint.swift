import Foundation
import StrataStorage

/// A persisted-undo context's stacks as they stood when it last dropped groups (spec 0004
/// §10, `meta undoStacks:` + the pair's hash): the groups still on its undo and redo stacks,
/// as of the log's head then. Persisted undo (spec 0006 §13) reads the pair's transactions
/// after ``through`` as usual and takes the stacks below them from here instead of from the
/// older transactions, so groups the context dropped (`levelsOfUndo`, `rollback()`,
/// `reset()`, `removeAllUndoActions()`) stay dropped after a restart.
public struct UndoCheckpoint: Sendable, Equatable, Codable {
    /// A saved group: its transaction and its index there — or a part of it, the changes of
    /// some of its objects (a refresh split the group, spec 0006 §13).
    public struct GroupRef: Sendable, Hashable, Codable {
        /// The transaction that saved the group.
        public let sequence: UInt64
        /// The group's index among that transaction's change groups.
        public let group: Int
        /// For a part of the group: the objects whose changes it holds, in ascending order;
        /// nil for the whole group.
        public let objects: [StoredObjectID]?

        /// A reference to group `group` of transaction `sequence` — to its changes of
        /// `objects` only, when given.
        public init(sequence: UInt64, group: Int, objects: [StoredObjectID]? = nil) {
            self.sequence = sequence
            self.group = group
            self.objects = objects?.sorted()
        }

        /// The same group (or part) of transaction `sequence`.
        public func with(sequence: UInt64) -> GroupRef { GroupRef(sequence: sequence, group: group, objects: objects) }

        /// Whether this names group `group` of transaction `sequence`, whole or a part.
        public func names(_ sequence: UInt64, _ group: Int) -> Bool { self.sequence == sequence && self.group == group }
    }

    /// The pair's transactions through this sequence are summed up by the stacks below.
    public let through: UInt64
    /// The undo stack, bottom first.
    public let undo: [GroupRef]
    /// The redo stack, bottom first.
    public let redo: [GroupRef]
    /// The model version the context that wrote it opened the store with: the one whose
    /// entity names its parts' objects carry (``GroupRef/objects``), which a later version
    /// may rename. Nil for a record written before Strata kept it: its names are read as the
    /// opening model's.
    public let modelVersion: Int?

    /// A checkpoint of the stacks `undo` and `redo` (bottom first) as of sequence `through`,
    /// its parts' objects named as model version `modelVersion` names them.
    public init(through: UInt64, undo: [GroupRef], redo: [GroupRef], modelVersion: Int? = nil) {
        self.through = through
        self.undo = undo
        self.redo = redo
        self.modelVersion = modelVersion
    }
}

/// The record as stored: the checkpoint and the pair it is for (two pairs may share a hash).
private struct StoredUndoCheckpoint: Codable {
    /// A stack entry that is a part of its group: the stack ("undo" or "redo"), its index
    /// there (bottom first) and the objects whose changes it holds (spec 0004 §10).
    struct Part: Codable {
        struct Object: Codable {
            var entity: String
            var primaryKey: UInt64
        }
        var stack: String
        var index: Int
        var objects: [Object]
    }
    var author: String?
    var context: String?
    var through: UInt64
    var undo: [[UInt64]]
    var redo: [[UInt64]]
    /// Absent when no entry is a part (a reader that doesn't know it reads each part's group whole).
    var parts: [Part]?
    /// The writer's model version, whose entity names the parts' objects carry; absent in a
    /// record written before it was kept.
    var modelVersion: Int?
}

extension MetaKey {
    /// The prefix of every undo checkpoint's key.
    static let undoCheckpointPrefix = Array("undoStacks:".utf8)

    /// `undoStacks:` + the pair hash in 16 lowercase hex digits.
    static func undoCheckpoint(author: String?, contextName: String?) -> [UInt8] {
        let hash = String(ContextIndex.pairHash(author: author, contextName: contextName), radix: 16)
        return undoCheckpointPrefix + Array((String(repeating: "0", count: 16 - hash.count) + hash).utf8)
    }
}

extension LogReader {
    /// The undo checkpoint of (`author`, `contextName`), nil when it has none (or a pair
    /// sharing its hash wrote the row last).
    ///
    /// - Throws: ``LogError/malformed(_:)`` for a row that doesn't decode.
    public func undoCheckpoint(author: String?, contextName: String?) throws -> UndoCheckpoint? {
        let key = MetaKey.undoCheckpoint(author: author, contextName: contextName)
        guard let bytes = try txn.value(forKey: key, in: tables.meta) else { return nil }
        let stored: StoredUndoCheckpoint
        do {
            stored = try JSONDecoder().decode(StoredUndoCheckpoint.self, from: Data(bytes))
        } catch {
            throw LogError.malformed("the store's undo checkpoint \(String(decoding: key, as: UTF8.self)) doesn't decode: \(error)")
        }
        guard stored.author == author, stored.context == contextName else { return nil }
        func refs(_ pairs: [[UInt64]], _ stack: String) throws -> [UndoCheckpoint.GroupRef] {
            var parts: [Int: [StoredObjectID]] = [:]
            for part in stored.parts ?? [] where part.stack == stack {
                guard pairs.indices.contains(part.index) else {
                    throw LogError.malformed("the store's undo checkpoint \(String(decoding: key, as: UTF8.self)) names a part at \(stack) index \(part.index), past its \(pairs.count) groups")
                }
                parts[part.index] = part.objects.map { StoredObjectID(entity: $0.entity, primaryKey: $0.primaryKey) }
            }
            return try pairs.enumerated().map { index, pair in
                guard pair.count == 2, pair[1] <= UInt64(Int.max) else {
                    throw LogError.malformed("the store's undo checkpoint \(String(decoding: key, as: UTF8.self)) names a group as \(pair), not [sequence, group]")
                }
                return UndoCheckpoint.GroupRef(sequence: pair[0], group: Int(pair[1]), objects: parts[index])
            }
        }
        return UndoCheckpoint(
            through: stored.through, undo: try refs(stored.undo, "undo"), redo: try refs(stored.redo, "redo"),
            modelVersion: try stored.modelVersion ?? inferredModelVersion(of: stored))
    }

    /// For a record with parts written before records kept the writer's model version
    /// (session 30's Strata): the version its `through` transaction was written with — the
    /// writer's own save when the record came with it, else the version the store was in
    /// when it was written (spec 0004 §10). Nil when that transaction isn't there to say
    /// (purged, past the head, unreadable): the parts are then read under the reader's names,
    /// as before.
    private func inferredModelVersion(of stored: StoredUndoCheckpoint) throws -> Int? {
        guard stored.parts != nil, stored.through > 0, stored.through <= (try head), stored.through >= (try purgedThrough) else { return nil }
        return try? modelVersion(asOf: stored.through)
    }
}

extension LogReader {
    /// The undo checkpoint rows, as stored, of every pair whose checkpoint is as of
    /// `sequence` or earlier: what a copy of the log through `sequence` carries
    /// (``EventLog/replay(through:into:)``), where the record stands for the pair's stacks as
    /// it does here. A later one describes stacks of transactions the copy doesn't hold and is
    /// left out (the copy reads that pair's stacks from its log, as a store without a record
    /// does), and so is a row that doesn't decode.
    func undoCheckpointRows(through sequence: UInt64) throws -> [(key: [UInt8], value: [UInt8])] {
        var rows: [(key: [UInt8], value: [UInt8])] = []
        try txn.forEach(in: tables.meta, range: .prefix(MetaKey.undoCheckpointPrefix)) { key, value in
            let bytes = value.withUnsafeBytes { Array($0) }
            if let stored = try? JSONDecoder().decode(StoredUndoCheckpoint.self, from: Data(bytes)), stored.through <= sequence {
                rows.append((key.withUnsafeBytes { Array($0) }, bytes))
            }
            return .next
        }
        return rows
    }
}

extension EventLog {
    /// Records (`author`, `contextName`)'s undo and redo stacks, bottom first, as of the
    /// head now, in its own write transaction; the head is the checkpoint's
    /// ``UndoCheckpoint/through``. It is no part of the log: no event is written.
    ///
    /// - Throws: ``LogError/invalidOperation(_:)`` for a store open read-only; ``LMDBError``
    ///   for I/O failures.
    @discardableResult
    public func setUndoCheckpoint(
        author: String?, contextName: String?, undo: [UndoCheckpoint.GroupRef], redo: [UndoCheckpoint.GroupRef]
    ) throws -> UndoCheckpoint {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only: an undo checkpoint can't be set") }
        return try environment.write { txn in
            let head = try number(MetaKey.head, txn)
            try writeUndoCheckpoint(author: author, contextName: contextName, through: head, undo: undo, redo: redo, txn)
            return UndoCheckpoint(through: head, undo: undo, redo: redo, modelVersion: modelVersion)
        }
    }

    /// Puts the undo checkpoint row in `txn` (also a commit's, ``TransactionDraft/undoCheckpoint``),
    /// with this handle's model version: the one its parts' objects are named in.
    func writeUndoCheckpoint(
        author: String?, contextName: String?, through: UInt64, undo: [UndoCheckpoint.GroupRef], redo: [UndoCheckpoint.GroupRef],
        _ txn: borrowing LMDBTransaction
    ) throws {
        var parts: [StoredUndoCheckpoint.Part] = []
        for (stack, refs) in [("undo", undo), ("redo", redo)] {
            for (index, ref) in refs.enumerated() {
                guard let objects = ref.objects else { continue }
                parts.append(.init(stack: stack, index: index, objects: objects.map { .init(entity: $0.entity, primaryKey: $0.primaryKey) }))
            }
        }
        let stored = StoredUndoCheckpoint(
            author: author, context: contextName, through: through,
            undo: undo.map { [$0.sequence, UInt64($0.group)] }, redo: redo.map { [$0.sequence, UInt64($0.group)] },
            parts: parts.isEmpty ? nil : parts, modelVersion: modelVersion)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        try txn.put(Array(try encoder.encode(stored)), forKey: MetaKey.undoCheckpoint(author: author, contextName: contextName), in: tables.meta)
    }
}
