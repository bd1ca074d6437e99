import Foundation
import StrataStorage

extension EventLog {
    /// Reports each object an ordered to-many's list names more than once (spec 0004 §8):
    /// location `Team/p1.players`, *"lists Player/p2 2 times (at 0 and 2), but an ordered
    /// to-many holds an object once; Team/p1's record was last written by event 7 (its
    /// version: the last event that wrote it, not necessarily the one that listed Player/p2
    /// again)"*. Reads the live
    /// records of the entities with an ordered to-many they record (a record that doesn't
    /// decode is the state comparison's to report).
    func checkOrderedListsHoldOnce(
        _ txn: borrowing LMDBTransaction, writer: TableWriter, report: (VerificationProblem.Kind, String, String) -> Void
    ) throws {
        // The entities, by code, that record an ordered to-many, and those relationships.
        var lists: [(code: UInt16, entity: String, properties: [String])] = []
        for entity in schema.entities.values {
            let names = entity.properties.filter { $0.relationship == .orderedToMany }.map(\.name)
            guard !names.isEmpty, let code = try? writer.entityCode(entity.name) else { continue }
            lists.append((code, entity.name, names))
        }
        for (code, entity, properties) in lists.sorted(by: { $0.code < $1.code }) {
            try txn.forEach(in: tables.state, range: .prefix([UInt8(code >> 8), UInt8(truncatingIfNeeded: code)])) { key, value in
                guard let objectKey = key.withUnsafeBytes({ ObjectKey($0) }),
                    let record = try? value.withUnsafeBytes({ raw in try writer.decodeRecord(raw, entityName: entity, context: "record") })
                else { return .next }
                for name in properties {
                    guard case .references(let ids)? = record.values[name], ids.count > 1 else { continue }
                    var positions: [StoredObjectID: [Int]] = [:]
                    for (position, id) in ids.enumerated() { positions[id, default: []].append(position) }
                    guard positions.count < ids.count else { continue }
                    var reported = Set<StoredObjectID>()
                    for id in ids where (positions[id]?.count ?? 0) > 1 && reported.insert(id).inserted {
                        let at = positions[id] ?? []
                        let places = at.count == 2 ? "\(at[0]) and \(at[1])" : at.map(String.init).joined(separator: ", ")
                        let holder = StoredObjectID(entity: entity, primaryKey: objectKey.primaryKey)
                        report(
                            .integrity, "\(holder).\(name)",
                            "lists \(id) \(at.count) times (at \(places)), but an ordered to-many holds an object once; \(holder)'s record was last written by event \(record.version) (its version: the last event that wrote it, not necessarily the one that listed \(id) again)")
                    }
                }
                return .next
            }
        }
    }
}

extension EventLog {
    /// The most objects a problem of ``checkPairedSidesAgree(_:writer:report:)`` names; the
    /// rest are counted.
    static let pairedSideNamesShown = 8

    /// Reports each object whose list on one side of a many-to-many ordered on both sides
    /// (both sides recorded, spec 0004 §4.1) lacks an object whose list on the other side
    /// holds it (spec 0004 §8): location `Song/p1.playlists`, *"doesn't list Playlist/p1,
    /// Playlist/p2, whose Playlist.songs lists hold it: …; Song/p1's record was last written
    /// by event 4"*. A commit keeps the two sides in agreement, and the replay reproduces
    /// what the events wrote, so a fill of the side that was skipped (before session 36 an
    /// earlier model's open could take it as done) left lists that only this finds. Reads
    /// the `referrers` rows of the opening model version's paired relationships, one lookup
    /// of the other side's row each; sides still marked to fill (``MetaKey/orderedSidesToFill``)
    /// have no lists yet and aren't checked.
    func checkPairedSidesAgree(
        _ txn: borrowing LMDBTransaction, writer: TableWriter, report: (VerificationProblem.Kind, String, String) -> Void
    ) throws {
        guard schema.hasPairedSides else { return }
        let marked = Set(
            try txn.value(forKey: MetaKey.orderedSidesToFill, in: tables.meta)
                .map { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) } ?? [])
        // A side's code → its inverse's code, the side's name and the inverse's property name.
        var sides: [UInt16: (inverse: UInt16, side: String, inverseName: String)] = [:]
        for entity in schema.entities.values {
            for property in entity.properties where property.declaringEntity == entity.name {
                guard let inverse = property.orderedInverse, let dot = inverse.firstIndex(of: "."),
                    !marked.contains(property.qualifiedName), !marked.contains(inverse),
                    let code = try? catalog.relationshipCode(property.qualifiedName),
                    let inverseCode = try? catalog.relationshipCode(inverse)
                else { continue }
                sides[code] = (inverseCode, property.qualifiedName, String(inverse[inverse.index(after: dot)...]))
            }
        }
        guard !sides.isEmpty else { return }
        // Runs of rows with one target and code: the target's list on the inverse side must
        // hold each source.
        var missing: [(target: ObjectKey, code: UInt16, sources: [ObjectKey])] = []
        try txn.forEach(in: tables.referrers) { key, _ in
            let row: (ObjectKey, UInt16, ObjectKey)? = key.withUnsafeBytes { raw in
                guard let target = ObjectKey(raw, at: 0), let code = readBigEndian(raw, at: 10, count: 2).map({ UInt16($0) }),
                    let source = ObjectKey(raw, at: 12)
                else { return nil }
                return (target, code, source)
            }
            guard let (target, code, source) = row, let pair = sides[code] else { return .next }
            let mirrored = try TableWriter.withLinkKey(source, pair.inverse, target) { try txn.containsKey($0, in: tables.referrers) }
            guard !mirrored else { return .next }
            if let last = missing.last, last.target == target, last.code == code {
                missing[missing.count - 1].sources.append(source)
            } else {
                missing.append((target, code, [source]))
            }
            return .next
        }
        func name(_ key: ObjectKey) -> String { (try? writer.id(key).description) ?? "entity \(key.entity) p\(key.primaryKey)" }
        for (target, code, sources) in missing {
            guard let pair = sides[code] else { continue }
            let holder = name(target)
            var names = sources.prefix(Self.pairedSideNamesShown).map(name).joined(separator: ", ")
            if sources.count > Self.pairedSideNamesShown { names += " and \(sources.count - Self.pairedSideNamesShown) more" }
            let version = (try? writer.id(target)).flatMap { id in (try? writer.readVersion(txn, target, entityName: id.entity)) ?? nil }
            let written = version.map { "; \(holder)'s record was last written by event \($0) (its version: the last event that wrote it)" } ?? ""
            report(
                .integrity, "\(holder).\(pair.inverseName)",
                "doesn't list \(names), whose \(pair.side) list\(sources.count == 1 ? "" : "s") hold\(sources.count == 1 ? "s" : "") it: both sides of a many-to-many ordered on both sides are recorded, and each object's list holds the objects whose lists on the other side hold it (a fill of the side that was skipped, or damage)\(written)")
        }
    }
}
