import Foundation

/// Joins the `events` table's rows into events (`Specs/0004-event-log.md` §3.4), checking
/// the keys as it goes: each is 12 bytes (sequence · chunk), and an event's chunks are
/// numbered 0, 1, 2, … without gaps. A row that breaks this is noted as the event's
/// ``damage``, so a missing middle chunk is reported as such instead of as a checksum that
/// doesn't match (or, for a missing first chunk, bytes that aren't an event).
struct EventChunks {
    /// The pending event's bytes so far.
    private(set) var bytes: [UInt8] = []
    /// The pending event's sequence.
    private(set) var sequence: UInt64 = 0
    /// What is wrong with the pending event's rows; nil if nothing.
    private(set) var damage: String?
    private var nextChunk: UInt64 = 0
    private var started = false

    /// Whether an event is pending.
    var isEmpty: Bool { !started }

    /// The sequence a key of the `events` table names: its first 8 bytes (a shorter key's
    /// bytes padded with zeros).
    static func sequence(of key: UnsafeRawBufferPointer) -> UInt64 {
        var value: UInt64 = 0
        for i in 0..<8 { value = value << 8 | UInt64(i < key.count ? key[i] : 0) }
        return value
    }

    /// Whether the row under `key` belongs to another event than the pending one: take the
    /// pending one first.
    func startsAnotherEvent(_ key: UnsafeRawBufferPointer) -> Bool {
        started && Self.sequence(of: key) != sequence
    }

    /// Adds the row `key` → `value` to the pending event (starting one if none is pending).
    mutating func add(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        if !started {
            started = true
            sequence = Self.sequence(of: key)
            nextChunk = 0
            damage = nil
        }
        if key.count != 12 {
            note("the events table holds a key of \(key.count) bytes (\(key.map { String(format: "%02x", $0) }.joined())) for it, not 12 (sequence · chunk)")
        } else if let chunk = readBigEndian(key, at: 8, count: 4), chunk != nextChunk {
            if chunk < nextChunk {
                note("its chunks are out of order in the events table (chunk \(chunk) after chunk \(nextChunk - 1))")
            } else if nextChunk == 0 {
                note("chunk 0 of its bytes is missing from the events table (the first stored is chunk \(chunk))")
            } else {
                note("chunk \(nextChunk) of its bytes is missing from the events table (chunk \(chunk) follows chunk \(nextChunk - 1))")
            }
            nextChunk = chunk + 1
        } else {
            nextChunk += 1
        }
        bytes.append(contentsOf: value)
    }

    private mutating func note(_ what: String) {
        if damage == nil { damage = what }
    }

    /// Takes the pending event: its sequence, bytes and damage; none is pending afterwards.
    mutating func take() -> (sequence: UInt64, bytes: [UInt8], damage: String?) {
        defer {
            bytes.removeAll(keepingCapacity: true)
            started = false
            damage = nil
        }
        return (sequence, bytes, damage)
    }

    /// The error for `damage` of the event `sequence`.
    /// The error for a raw event found under `sequence` where event `expected` belonged.
    static func densityError(expected: UInt64, found sequence: UInt64) -> LogError {
        .malformed(
            sequence > expected
                ? "event \(expected) is missing from the log (the raw events go on at \(sequence))"
                : "the events table holds a row under sequence \(sequence) where event \(expected) was expected")
    }

    static func error(_ sequence: UInt64, _ damage: String) -> LogError {
        .malformed("event \(sequence): \(damage)")
    }
}
