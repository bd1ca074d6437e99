import Foundation
import Strata

/// How values appear in the tool's output: text for people, plain JSON for exports, the
/// typed JSON of `Specs/0004-event-log.md` §9 (with URIs) for logs.
enum ValueRendering {
    // MARK: - Text

    /// `"Ng"`, `42`, `nil`, a reference as its URI, a list as `[uri, uri]`.
    ///
    /// A string is quoted as a JSON string literal (`"`, `\` and control characters
    /// escaped: `"a\"b\n"`), so a value is always one line and its end is where its quote
    /// is: a string holding a newline can't start a line that reads as another change.
    static func text(_ value: LogValue, _ log: EventLog) -> String {
        switch value {
        case .reference(let id): log.uri(id)
        case .references(let ids): "[" + ids.map { log.uri($0) }.joined(separator: ", ") + "]"
        case .attribute(let attribute): text(attribute)
        case .null: value.description
        }
    }

    /// An attribute value as ``text(_:_:)`` prints it.
    static func text(_ value: AttributeValue) -> String {
        switch value {
        case .string(let string): jsonString(string)
        case .date(let date): Timestamps.format(date)
        default: LogValue.attribute(value).description
        }
    }

    /// `text` with its control characters escaped as in JSON (`\n`, `\t`, `\u0000`), for
    /// a name printed bare on a line (an author, a context name): it stays on that line.
    static func oneLine(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.value < 0x20 }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            guard scalar.value < 0x20 else {
                out.unicodeScalars.append(scalar)
                continue
            }
            let quoted = JSONText.quoted(String(scalar))
            out += quoted.dropFirst().dropLast()
        }
        return out
    }

    // MARK: - Plain JSON (export)

    /// The value as plain JSON text: numbers, strings, booleans, `null`; dates as ISO 8601
    /// text; binary data and transformable values as base64 text; decimals as text (exact);
    /// non-finite floating-point numbers as the text `"nan"`, `"inf"`, `"-inf"`; references as
    /// URI text; to-many as an array of URI text.
    static func plainJSON(_ value: LogValue, _ log: EventLog) -> String {
        switch value {
        case .null: return "null"
        case .reference(let id): return jsonString(log.uri(id))
        case .references(let ids): return "[" + ids.map { jsonString(log.uri($0)) }.joined(separator: ",") + "]"
        case .attribute(let attribute):
            switch attribute {
            case .int16(let v): return String(v)
            case .int32(let v): return String(v)
            case .int64(let v): return String(v)
            case .decimal(let v): return jsonString(v.description)
            case .double(let v): return number(v)
            case .float(let v): return v.isFinite ? v.description : number(Double(v))
            case .string(let v): return jsonString(v)
            case .boolean(let v): return v ? "true" : "false"
            case .date(let v): return jsonString(Timestamps.format(v))
            case .binaryData(let v): return jsonString(v.base64EncodedString())
            case .uuid(let v): return jsonString(v.uuidString)
            case .uri(let v): return jsonString(v.absoluteString)
            case .transformable(let v): return jsonString(v.base64EncodedString())
            }
        }
    }

    static func number(_ v: Double) -> String {
        if v.isNaN { return "\"nan\"" }
        if v.isInfinite { return v < 0 ? "\"-inf\"" : "\"inf\"" }
        return v.description
    }

    /// The text as a JSON string literal (the same escaping as the model file).
    static func jsonString(_ text: String) -> String { JSONText.quoted(text) }

    /// Plain text for one CSV field (before quoting): empty for nil, URIs separated by single
    /// spaces for to-many, otherwise as in plain JSON without the quotes.
    static func csvText(_ value: LogValue, _ log: EventLog) -> String {
        switch value {
        case .null: return ""
        case .reference(let id): return log.uri(id)
        case .references(let ids): return ids.map { log.uri($0) }.joined(separator: " ")
        case .attribute(let attribute):
            switch attribute {
            case .string(let v): return v
            case .decimal(let v): return v.description
            case .double(let v): return v.isFinite ? v.description : (v.isNaN ? "nan" : (v < 0 ? "-inf" : "inf"))
            case .float(let v): return v.isFinite ? v.description : (v.isNaN ? "nan" : (v < 0 ? "-inf" : "inf"))
            case .date(let v): return Timestamps.format(v)
            case .binaryData(let v), .transformable(let v): return v.base64EncodedString()
            case .uuid(let v): return v.uuidString
            case .uri(let v): return v.absoluteString
            case .int16, .int32, .int64, .boolean: return plainJSON(value, log)
            }
        }
    }

    // MARK: - Event JSON (log)

    /// The event as canonical JSON (sorted keys, one line): spec 0004 §9's form with every
    /// object named by its full URI. `groups` replaces the event's groups (for filtered output).
    static func eventJSON(_ event: TransactionEvent, groups: [ChangeGroup], _ log: EventLog) -> String {
        var filtered = event
        filtered.groups = groups
        let object = withURIs(filtered.jsonObject, log)
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    /// Rewrites `Entity/pN` names under the keys that hold object names into URIs.
    private static func withURIs(_ value: Any, _ log: EventLog) -> Any {
        if let dictionary = value as? [String: Any] {
            var result: [String: Any] = [:]
            for (key, inner) in dictionary {
                switch (key, inner) {
                case ("object", let name as String), ("reference", let name as String):
                    result[key] = uriText(name, log)
                case ("references", let names as [String]), ("added", let names as [String]), ("removed", let names as [String]):
                    result[key] = names.map { uriText($0, log) }
                default:
                    result[key] = withURIs(inner, log)
                }
            }
            return result
        }
        if let array = value as? [Any] { return array.map { withURIs($0, log) } }
        return value
    }

    private static func uriText(_ name: String, _ log: EventLog) -> String {
        let parts = name.split(separator: "/")
        guard parts.count == 2, parts[1].hasPrefix("p"), let pk = UInt64(parts[1].dropFirst()) else { return name }
        return log.uri(StoredObjectID(entity: String(parts[0]), primaryKey: pk))
    }
}

/// Byte counts for people: `1.2 MiB (1234567 bytes)`.
func byteCount(_ bytes: Int) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes)
    var unit = 0
    while value >= 1024 && unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    return unit == 0 ? "\(bytes) bytes" : "\(String(format: "%.1f", value)) \(units[unit]) (\(bytes) bytes)"
}

/// The size of a file, or of every file under a directory.
func diskSize(_ path: String) -> Int {
    let fileManager = FileManager.default
    var isDirectory: ObjCBool = false
    guard fileManager.fileExists(atPath: path, isDirectory: &isDirectory) else { return 0 }
    if !isDirectory.boolValue {
        return ((try? fileManager.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }
    var total = 0
    for name in (try? fileManager.subpathsOfDirectory(atPath: path)) ?? [] {
        let full = (path as NSString).appendingPathComponent(name)
        if let attributes = try? fileManager.attributesOfItem(atPath: full), attributes[.type] as? FileAttributeType == .typeRegular {
            total += (attributes[.size] as? Int) ?? 0
        }
    }
    return total
}
