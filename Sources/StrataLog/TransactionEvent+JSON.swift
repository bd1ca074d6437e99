import Foundation
import StrataModel

extension TransactionEvent {
    /// The event as JSON-compatible values (`Specs/0004-event-log.md` §9): what test vectors
    /// and `strata log --format json` use. Objects are written `Entity/pN`.
    ///
    /// ```json
    /// {"sequence": 2, "timestamp": "2026-01-01T00:00:00.000000Z", "kind": {"type": "save"}, ...}
    /// ```
    public var jsonObject: [String: Any] {
        var object: [String: Any] = [
            "sequence": sequence,
            "timestamp": Self.timestampString(timestamp),
            "processID": Int(processID),
            "modelVersion": modelVersion,
            "kind": Self.json(kind),
            "groups": groups.map { group -> [String: Any] in
                var g: [String: Any] = ["changes": group.changes.map(Self.json)]
                if let name = group.actionName { g["actionName"] = name }
                switch group.origin {
                case .undo(let of, let index)?: g["origin"] = ["type": "undo", "of": of, "group": index]
                case .redo(let of, let index)?: g["origin"] = ["type": "redo", "of": of, "group": index]
                case nil: break
                }
                if !group.isRecordedForUndo { g["recordedForUndo"] = false }
                return g
            },
        ]
        if let author { object["author"] = author }
        if let contextName { object["contextName"] = contextName }
        return object
    }

    /// The event as canonical JSON text: sorted keys, no extra whitespace.
    public var jsonText: String {
        let data = (try? JSONSerialization.data(withJSONObject: jsonObject, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    /// `2026-01-01T00:00:00.000000Z`: UTC with microseconds, the stored precision. A date
    /// value with no microseconds since 1970 (NaN, infinite or too far out) is its seconds
    /// since 1970 as number text (`100000000000000.0`, `1e+20`, `nan`), never a made-up date.
    static func timestampString(_ date: Date) -> String {
        ISO8601.format(date, fixedMicroseconds: true)
    }

    static func json(_ kind: TransactionKind) -> [String: Any] {
        switch kind {
        case .save: ["type": "save"]
        case .undo(let of, let group): ["type": "undo", "of": of, "group": group]
        case .redo(let of, let group): ["type": "redo", "of": of, "group": group]
        case .migration: ["type": "migration"]
        case .import: ["type": "import"]
        case .reservation(let entity, let range):
            ["type": "reservation", "entity": entity, "first": range.lowerBound, "last": range.upperBound]
        case .purge(let through): ["type": "purge", "through": through]
        }
    }

    static func json(_ change: Change) -> [String: Any] {
        switch change {
        case .insert(let id, let values):
            ["op": "insert", "object": id.description, "values": values.mapValues(json)]
        case .update(let id, let changes):
            [
                "op": "update", "object": id.description,
                "changes": changes.map { change -> [String: Any] in
                    switch change {
                    case .value(let property, let before, let after):
                        ["property": property, "before": json(before), "after": json(after)]
                    case .membership(let property, let added, let removed):
                        ["property": property, "added": added.map(\.description), "removed": removed.map(\.description)]
                    }
                },
            ]
        case .delete(let id, let before):
            ["op": "delete", "object": id.description, "before": before.mapValues(json)]
        }
    }

    /// A value as JSON: `null`, `{"int32": 5}`, `{"reference": "Team/p1"}`, …
    public static func json(_ value: LogValue) -> Any {
        switch value {
        case .null: return NSNull()
        case .reference(let id): return ["reference": id.description]
        case .references(let ids): return ["references": ids.map(\.description)]
        case .attribute(let attribute):
            switch attribute {
            case .int16(let v): return ["int16": Int(v)]
            case .int32(let v): return ["int32": Int(v)]
            case .int64(let v): return ["int64": String(v)]
            case .decimal(let v): return ["decimal": v.description]
            case .double(let v): return ["double": v.isFinite ? v as Any : String(v)]
            case .float(let v): return ["float": v.isFinite ? Double(v) as Any : String(v)]
            case .string(let v): return ["string": v]
            case .boolean(let v): return ["boolean": v]
            case .date(let v): return ["date": timestampString(v)]
            case .binaryData(let v): return ["binaryData": v.base64EncodedString()]
            case .uuid(let v): return ["uuid": v.uuidString]
            case .uri(let v): return ["uri": v.absoluteString]
            case .transformable(let v): return ["transformable": v.base64EncodedString()]
            }
        }
    }
}
