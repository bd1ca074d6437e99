import Foundation
import StrataStorage

extension EventLog {
    /// Reports each object an ordered to-many's list names more than once (spec 0004 §8):
    /// location `Team/p1.players`, *"lists Player/p2 2 times (at 0 and 2), but an ordered
    /// to-many holds an object once; the record was last written by event 7"*. Reads the live
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
                        report(
                            .integrity, "\(StoredObjectID(entity: entity, primaryKey: objectKey.primaryKey)).\(name)",
                            "lists \(id) \(at.count) times (at \(places)), but an ordered to-many holds an object once; the record was last written by event \(record.version)")
                    }
                }
                return .next
            }
        }
    }
}
