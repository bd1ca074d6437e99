import Foundation
import StrataStorage

extension LogReader {
    /// The current state of every object, in memory.
    public func currentState() throws -> StateImage {
        var image = StateImage()
        for entity in log.schema.entities.keys.sorted() where !(log.schema.entities[entity]?.isAbstract ?? true) {
            try forEachObject(of: entity, includingSubentities: false) { object in
                image.objects[object.id] = object.values
                return .next
            }
        }
        return image
    }

    /// How `state(asOf:)` will build the state as of `sequence`, and what it costs in events.
    public enum AsOfPlan: Sendable, Hashable {
        /// Revert events from the head back to `sequence + 1`.
        case backwardFromHead(events: UInt64)
        /// Load the checkpoint at `checkpoint` and apply events up to `sequence`.
        case forwardFromCheckpoint(checkpoint: UInt64, events: UInt64)
        /// Replay from the first event.
        case forwardFromStart(events: UInt64)
    }

    /// The cheapest way to reach `sequence`: the fewest events to decode.
    public func plan(asOf sequence: UInt64) throws -> AsOfPlan {
        let head = try head
        guard sequence <= head else { throw LogError.sequenceOutOfRange(requested: sequence, head: head) }
        var best = AsOfPlan.backwardFromHead(events: head - sequence)
        var bestCost = head - sequence
        if sequence < bestCost {
            best = .forwardFromStart(events: sequence)
            bestCost = sequence
        }
        if let checkpoint = try checkpoint(atOrBefore: sequence), sequence - checkpoint < bestCost {
            best = .forwardFromCheckpoint(checkpoint: checkpoint, events: sequence - checkpoint)
        }
        return best
    }

    /// The state of the whole store as it was just after transaction `sequence` (0: empty),
    /// from before-images walking back from the head or events walking forward from a
    /// checkpoint, whichever decodes fewer events.
    public func state(asOf sequence: UInt64) throws -> StateImage {
        switch try plan(asOf: sequence) {
        case .backwardFromHead:
            var image = try currentState()
            var events: [TransactionEvent] = []
            try forEachEvent(from: sequence + 1) { event in
                events.append(event)
                return .next
            }
            for event in events.reversed() { image.revert(event) }
            return image
        case .forwardFromCheckpoint(let checkpoint, _):
            var image = try checkpointState(checkpoint)
            if sequence > checkpoint {
                try forEachEvent(from: checkpoint + 1, through: sequence) { event in
                    image.apply(event)
                    return .next
                }
            }
            return image
        case .forwardFromStart:
            var image = StateImage()
            if sequence > 0 {
                try forEachEvent(from: 1, through: sequence) { event in
                    image.apply(event)
                    return .next
                }
            }
            return image
        }
    }

    /// One object's values as they were just after transaction `sequence`; nil if it didn't
    /// exist then. Walks back only through the transactions that touched it.
    public func object(_ id: StoredObjectID, asOf sequence: UInt64) throws -> [String: LogValue]? {
        let head = try head
        guard sequence <= head else { throw LogError.sequenceOutOfRange(requested: sequence, head: head) }
        var image = StateImage()
        if let current = try object(id) { image.objects[id] = current.values }
        for touching in try history(of: id).reversed() where touching > sequence {
            let event = try event(touching)
            for change in event.changes.reversed() where change.objectID == id { image.revert(change) }
        }
        return image.objects[id]
    }

    // MARK: - Checkpoints

    /// The sequences that have a checkpoint, oldest first.
    public func checkpoints() throws -> [UInt64] {
        var result: [UInt64] = []
        try txn.forEach(in: tables.checkpoints) { key, _ in
            if key.byteCount == 8, let sequence = key.withUnsafeBytes({ readBigEndian($0) }) { result.append(sequence) }
            return .next
        }
        return result
    }

    func checkpoint(atOrBefore sequence: UInt64) throws -> UInt64? {
        var found: UInt64?
        try txn.forEach(
            in: tables.checkpoints, range: KeyRange(lowerBound: nil, upperBound: bigEndianBytes(sequence + 1)), reverse: true
        ) { key, _ in
            if key.byteCount == 8 {
                found = key.withUnsafeBytes { readBigEndian($0) }
                return .stop
            }
            return .next
        }
        return found
    }

    /// The state stored in the checkpoint at `sequence`.
    func checkpointState(_ sequence: UInt64) throws -> StateImage {
        var image = StateImage()
        var unordered: [(StoredObjectID, String, StoredObjectID)] = []
        try txn.forEach(in: tables.checkpoints, range: .prefix(bigEndianBytes(sequence) + [CheckpointTag.record])) { key, value in
            guard let objectKey = key.withUnsafeBytes({ ObjectKey($0, at: 9) }) else { return .next }
            let id = try writer.id(objectKey)
            let record = try value.withUnsafeBytes { raw in
                try writer.decodeRecord(raw, entityName: id.entity, context: "checkpoint \(sequence) record \(id)")
            }
            image.objects[id] = record.values
            return .next
        }
        try txn.forEach(in: tables.checkpoints, range: .prefix(bigEndianBytes(sequence) + [CheckpointTag.member])) { key, _ in
            guard let source = key.withUnsafeBytes({ ObjectKey($0, at: 9) }),
                let relationship = key.withUnsafeBytes({ readBigEndian($0, at: 19, count: 2) }),
                let target = key.withUnsafeBytes({ ObjectKey($0, at: 21) }),
                let qualified = log.catalog.relationshipName(UInt16(relationship))
            else { return .next }
            let property = String(qualified.split(separator: ".").last ?? "")
            unordered.append((try writer.id(source), property, try writer.id(target)))
            return .next
        }
        for (source, property, target) in unordered {
            var ids: [StoredObjectID] = []
            if case .references(let existing) = image.objects[source]?[property] { ids = existing }
            ids.append(target)
            image.objects[source, default: [:]][property] = .references(ids.sorted())
        }
        return image
    }
}

/// Row kinds inside a checkpoint.
enum CheckpointTag {
    static let record: UInt8 = 0x01
    static let member: UInt8 = 0x02
}

extension EventLog {
    /// Writes a checkpoint of the state at `sequence` inside the committing transaction:
    /// every record and membership row, so as-of reads near it replay few events.
    func writeCheckpoint(_ txn: borrowing LMDBTransaction, at sequence: UInt64) throws {
        let prefix = bigEndianBytes(sequence)
        var count: UInt64 = 0
        try txn.forEach(in: tables.state) { key, value in
            let rowKey = prefix + [CheckpointTag.record] + key.withUnsafeBytes { Array($0) }
            try txn.put(value.withUnsafeBytes { Array($0) }, forKey: rowKey, in: tables.checkpoints)
            count += 1
            return .next
        }
        try txn.forEach(in: tables.members) { key, _ in
            try txn.put([UInt8](), forKey: prefix + [CheckpointTag.member] + key.withUnsafeBytes { Array($0) }, in: tables.checkpoints)
            return .next
        }
        try txn.put(bigEndianBytes(count), forKey: prefix, in: tables.checkpoints)
        try thinCheckpoints(txn)
    }

    /// Removes checkpoints beyond ``Configuration/maximumCheckpoints``: each time, the one
    /// (never the newest) whose removal leaves the smallest gap between its neighbours.
    func thinCheckpoints(_ txn: borrowing LMDBTransaction) throws {
        var sequences: [UInt64] = []
        try txn.forEach(in: tables.checkpoints) { key, _ in
            if key.byteCount == 8, let sequence = key.withUnsafeBytes({ readBigEndian($0) }) { sequences.append(sequence) }
            return .next
        }
        let limit = max(1, configuration.maximumCheckpoints)
        while sequences.count > limit {
            var victim = 0
            var smallest = UInt64.max
            for index in 0..<(sequences.count - 1) {
                let previous = index == 0 ? 0 : sequences[index - 1]
                let gap = sequences[index + 1] - previous
                if gap < smallest {
                    smallest = gap
                    victim = index
                }
            }
            let prefix = bigEndianBytes(sequences[victim])
            var keys: [[UInt8]] = []
            try txn.forEach(in: tables.checkpoints, range: .prefix(prefix)) { key, _ in
                keys.append(key.withUnsafeBytes { Array($0) })
                return .next
            }
            for key in keys { try txn.delete(key: key, in: tables.checkpoints) }
            sequences.remove(at: victim)
        }
    }

    /// Writes a checkpoint of the current state now, in its own transaction.
    public func checkpoint() throws {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only") }
        try environment.write { txn in
            let head = try txn.value(forKey: MetaKey.head, in: tables.meta).flatMap { $0.withUnsafeBytes { readBigEndian($0) } } ?? 0
            try writeCheckpoint(txn, at: head)
        }
    }
}
