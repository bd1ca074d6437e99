internal import Foundation

// MARK: - JSONValue

/// A parsed JSON document that keeps object key order and number spelling.
///
/// The model file layer reads and writes through this type instead of `JSONDecoder` so that
/// (1) every error can name its JSON location and line, (2) numbers keep their exact text
/// (an `int64` default or a decimal never passes through `Double`), and (3) output key order
/// is fixed by the writer, so a saved model file diffs cleanly.
enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    /// A number, kept as written (`-1`, `2.5e3`).
    case number(String)
    case string(String)
    case array([JSONValue])
    /// An object; members keep their order.
    case object([(key: String, value: JSONValue)])

    static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)):
            a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    // MARK: - Access

    /// The member named `key` of an object, or nil.
    subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    /// A short name of the value's kind for error messages.
    var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a Boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    // MARK: - Writing

    /// The value as UTF-8 JSON text. Pretty output indents by two spaces and puts each
    /// member on its own line; arrays of scalars stay on one line so short lists read well.
    func serialized(pretty: Bool) -> String {
        var out = ""
        write(into: &out, pretty: pretty, indent: 0)
        return out
    }

    private func write(into out: inout String, pretty: Bool, indent: Int) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): out += n
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let items):
            if items.isEmpty { out += "[]"; return }
            let scalar = items.allSatisfy { !$0.isContainer }
            if !pretty || scalar {
                out += "["
                for (i, item) in items.enumerated() {
                    if i > 0 { out += pretty ? ", " : "," }
                    item.write(into: &out, pretty: pretty, indent: indent)
                }
                out += "]"
                return
            }
            out += "[\n"
            for (i, item) in items.enumerated() {
                out += String(repeating: " ", count: indent + 2)
                item.write(into: &out, pretty: pretty, indent: indent + 2)
                out += i == items.count - 1 ? "\n" : ",\n"
            }
            out += String(repeating: " ", count: indent) + "]"
        case .object(let members):
            if members.isEmpty { out += "{}"; return }
            out += pretty ? "{\n" : "{"
            for (i, member) in members.enumerated() {
                if pretty { out += String(repeating: " ", count: indent + 2) }
                JSONValue.writeString(member.key, into: &out)
                out += pretty ? ": " : ":"
                member.value.write(into: &out, pretty: pretty, indent: indent + 2)
                if i < members.count - 1 { out += "," }
                if pretty { out += "\n" }
            }
            if pretty { out += String(repeating: " ", count: indent) }
            out += "}"
        }
    }

    private var isContainer: Bool {
        switch self {
        case .array, .object: true
        default: false
        }
    }

    private static func writeString(_ s: String, into out: inout String) {
        out += JSONText.quoted(s)
    }
}

// MARK: - JSONText

/// JSON string literals as Strata writes them everywhere (model files, `strata` output):
/// `"`, `\`, and control characters escaped, everything else as UTF-8.
public enum JSONText {
    /// `s` as a quoted JSON string literal.
    ///
    /// ```swift
    /// JSONText.quoted("a\"b")  // "\"a\\\"b\""
    /// ```
    public static func quoted(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
        return out
    }
}
