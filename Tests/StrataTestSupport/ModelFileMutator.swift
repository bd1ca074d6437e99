import Foundation
public import StrataModel

/// Structural mutations of a model file's JSON, for fuzzing what loads a model and what uses
/// one: members removed, values replaced by odd scalars or by other members' values, array
/// elements duplicated, nodes copied over others, flags flipped, attribute types changed
/// (their defaults and bounds dropped with them).
///
/// ```swift
/// var rng = SeededGenerator(seed: 1)
/// var log: [String] = []
/// let mutated = ModelFileMutator.mutate(root, rng: &rng, log: &log)
/// ```
public enum ModelFileMutator {
    enum Step: CustomStringConvertible {
        case key(String), index(Int)
        var description: String {
            switch self {
            case .key(let key): key
            case .index(let index): "[\(index)]"
            }
        }
    }

    /// Every node's path, the root's included.
    static func paths(_ node: Any, _ prefix: [Step] = [], into result: inout [[Step]]) {
        result.append(prefix)
        if let object = node as? [String: Any] {
            for key in object.keys.sorted() { paths(object[key] as Any, prefix + [.key(key)], into: &result) }
        } else if let array = node as? [Any] {
            for index in array.indices { paths(array[index], prefix + [.index(index)], into: &result) }
        }
    }

    static func value(_ node: Any, at path: ArraySlice<Step>) -> Any? {
        guard let first = path.first else { return node }
        switch first {
        case .key(let key): return (node as? [String: Any])?[key].flatMap { value($0, at: path.dropFirst()) }
        case .index(let index):
            guard let array = node as? [Any], array.indices.contains(index) else { return nil }
            return value(array[index], at: path.dropFirst())
        }
    }

    /// `node` with the value at `path` replaced by `transform`'s result (nil: removed).
    static func updating(_ node: Any, at path: ArraySlice<Step>, _ transform: (Any?) -> Any?) -> Any? {
        guard let first = path.first else { return transform(node) }
        switch first {
        case .key(let key):
            guard var object = node as? [String: Any] else { return node }
            object[key] = updating(object[key] as Any, at: path.dropFirst(), transform)
            return object
        case .index(let index):
            guard var array = node as? [Any], array.indices.contains(index) else { return node }
            if let replaced = updating(array[index], at: path.dropFirst(), transform) {
                array[index] = replaced
            } else {
                array.remove(at: index)
            }
            return array
        }
    }

    static var scalars: [Any] { [
        0, -1, 1, 2, 65_536, Int64.max, Int64.min, 1.5, -0.0, 1e308, "", "x", "0", "-1", "1e400", "NaN", "name",
        "2024-02-30T00:00:00Z", "not a date", "Zm9v", "ZZZ", "SELF > 0", "SELF MATCHES \"(\"", "@count", "a.b",
        "count", "é", true, false, NSNull(), [Any](), [String: Any](), ["x"], [["name": "n"]],
        "int16", "int64", "decimal", "double", "float", "string", "boolean", "date", "binaryData", "uuid", "uri",
        "transformable", "cascade", "deny", "nullify", "noAction",
    ] }

    public static func mutate(_ root: Any, rng: inout SeededGenerator, log: inout [String]) -> Any {
        var all: [[Step]] = []
        paths(root, into: &all)
        let targets = all.filter { !$0.isEmpty }
        guard !targets.isEmpty else { return root }
        let path = targets[Int(rng.next() % UInt64(targets.count))]
        let name = path.map(\.description).joined(separator: ".")
        switch rng.next() % 7 {
        case 5:
            // A flag flipped where one is (optional, transient, indexed, toMany, ordered…).
            let flags = targets.filter { value(root, at: $0[...]) is Bool }
            guard !flags.isEmpty else { return root }
            let flag = flags[Int(rng.next() % UInt64(flags.count))]
            log.append("flip \(flag.map(\.description).joined(separator: "."))")
            return updating(root, at: flag[...]) { ($0 as? Bool).map { !$0 } } ?? root
        case 6:
            // An attribute's type changed, its default value and bounds dropped with it.
            let types = targets.filter { $0.last.map { "\($0)" } == "type" }
            guard !types.isEmpty else { return root }
            let typePath = types[Int(rng.next() % UInt64(types.count))]
            let names = ["int16", "int32", "int64", "decimal", "double", "float", "string", "boolean", "date", "binaryData", "uuid", "uri"]
            let type = names[Int(rng.next() % UInt64(names.count))]
            log.append("retype \(typePath.map(\.description).joined(separator: ".")) = \(type)")
            return updating(root, at: typePath.dropLast()) { node in
                guard var attribute = node as? [String: Any] else { return node }
                attribute["type"] = type
                for key in ["defaultValue", "minimumValue", "maximumValue", "minimumLength", "maximumLength", "regularExpression", "validationPredicates"] {
                    attribute[key] = nil
                }
                return attribute
            } ?? root
        case 0:
            log.append("remove \(name)")
            return updating(root, at: path[...]) { _ in nil } ?? root
        case 1:
            let scalar = scalars[Int(rng.next() % UInt64(scalars.count))]
            log.append("set \(name) = \(scalar)")
            return updating(root, at: path[...]) { _ in scalar } ?? root
        case 2:
            // Another member's value, strings especially: names, types, destinations moved.
            let strings = all.compactMap { value(root, at: $0[...]) as? String }
            let source = strings.isEmpty ? "" : strings[Int(rng.next() % UInt64(strings.count))]
            log.append("set \(name) = \"\(source)\"")
            return updating(root, at: path[...]) { _ in source } ?? root
        case 3:
            // Duplicate an element of the array the path ends in, or above it.
            var arrayPath = path
            while let last = arrayPath.last, case .key = last { arrayPath.removeLast() }
            guard !arrayPath.isEmpty else { return root }
            arrayPath.removeLast()
            log.append("duplicate in \(arrayPath.map(\.description).joined(separator: "."))")
            return updating(root, at: arrayPath[...]) { node in
                guard var array = node as? [Any], let first = array.first else { return node }
                array.append(first)
                return array
            } ?? root
        default:
            // Another node copied over this one (an entity over an entity, an attribute over a
            // relationship…).
            let source = targets[Int(rng.next() % UInt64(targets.count))]
            let copied = value(root, at: source[...])
            log.append("copy \(source.map(\.description).joined(separator: ".")) over \(name)")
            return updating(root, at: path[...]) { _ in copied } ?? root
        }
    }

    /// A value of `type` (nil for transformable), for filling in an attribute.
    public static func sample(_ type: AttributeType) -> Any? {
        switch type {
        case .int16: Int16(7)
        case .int32: Int32(7)
        case .int64: Int64(7)
        case .decimal: Decimal(string: "7.25")
        case .double: 7.5
        case .float: Float(7.5)
        case .string: "Seven"
        case .boolean: true
        case .date: Date(timeIntervalSince1970: 7)
        case .binaryData: Data([7])
        case .uuid: UUID(uuidString: "01020304-0506-0708-090A-0B0C0D0E0F10")
        case .uri: URL(string: "https://example.com/7")
        case .transformable: nil
        }
    }


    /// `node` (a model file's JSON) without validation rules on its attributes and
    /// relationships (bounds, lengths, patterns, predicates, counts), so sample values save.
    public static func withoutValidationRules(_ node: Any) -> Any {
        if var object = node as? [String: Any] {
            for key in ["regularExpression", "validationPredicates", "minimumValue", "maximumValue", "minimumLength", "maximumLength", "minCount", "maxCount"] {
                object[key] = nil
            }
            return object.mapValues(withoutValidationRules)
        }
        if let array = node as? [Any] { return array.map(withoutValidationRules) }
        return node
    }
}
