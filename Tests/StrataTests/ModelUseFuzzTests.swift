import Foundation
import Strata
import StrataTestSupport
import Testing

/// Structurally mutated model files (members removed, values swapped for other members'
/// values or odd scalars, array elements duplicated): each is refused with a `ModelError`, or
/// it loads, round-trips through its own file, and a store with it takes an insert of every
/// concrete entity, a save, fetches sorted by every attribute, and a reopen — never a crash.
/// `STRATA_MODEL_FUZZ_SIZE` mutated files (default 150), `STRATA_MODEL_FUZZ_SEED`.
@Suite("Mutated model files, loaded and used")
struct ModelUseFuzzTests {
    private enum Step: CustomStringConvertible {
        case key(String), index(Int)
        var description: String {
            switch self {
            case .key(let key): key
            case .index(let index): "[\(index)]"
            }
        }
    }

    /// Every node's path, the root's included.
    private static func paths(_ node: Any, _ prefix: [Step] = [], into result: inout [[Step]]) {
        result.append(prefix)
        if let object = node as? [String: Any] {
            for key in object.keys.sorted() { paths(object[key] as Any, prefix + [.key(key)], into: &result) }
        } else if let array = node as? [Any] {
            for index in array.indices { paths(array[index], prefix + [.index(index)], into: &result) }
        }
    }

    private static func value(_ node: Any, at path: ArraySlice<Step>) -> Any? {
        guard let first = path.first else { return node }
        switch first {
        case .key(let key): return (node as? [String: Any])?[key].flatMap { value($0, at: path.dropFirst()) }
        case .index(let index):
            guard let array = node as? [Any], array.indices.contains(index) else { return nil }
            return value(array[index], at: path.dropFirst())
        }
    }

    /// `node` with the value at `path` replaced by `transform`'s result (nil: removed).
    private static func updating(_ node: Any, at path: ArraySlice<Step>, _ transform: (Any?) -> Any?) -> Any? {
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

    private static var scalars: [Any] { [
        0, -1, 1, 2, 65_536, Int64.max, Int64.min, 1.5, -0.0, 1e308, "", "x", "0", "-1", "1e400", "NaN", "name",
        "2024-02-30T00:00:00Z", "not a date", "Zm9v", "ZZZ", "SELF > 0", "SELF MATCHES \"(\"", "@count", "a.b",
        "count", "é", true, false, NSNull(), [Any](), [String: Any](), ["x"], [["name": "n"]],
        "int16", "int64", "decimal", "double", "float", "string", "boolean", "date", "binaryData", "uuid", "uri",
        "transformable", "cascade", "deny", "nullify", "noAction",
    ] }

    private static func mutate(_ root: Any, rng: inout SeededGenerator, log: inout [String]) -> Any {
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

    private static func sample(_ type: AttributeType) -> Any? {
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

    /// Inserts one object of every concrete entity, saves (a validation failure is fine),
    /// reads every property back, fetches sorted by every attribute, reopens.
    private static func use(_ model: ManagedObjectModel, in directory: TemporaryDirectory) async throws {
        let coordinator = try openCoordinator(directory, model: model)
        let entities = model.entities.filter { !$0.isAbstract }.map(\.name)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var objects: [ManagedObject] = []
            for name in entities { objects.append(try context.insertNewObject(forEntityName: name)) }
            // A value of its type in every writable attribute; every to-one set to an object
            // of its destination, every to-many given one.
            for object in objects {
                for attribute in object.entity.attributesByName.values where !attribute.isDerived {
                    object.setValue(sample(attribute.attributeType), forKey: attribute.name)
                }
                for relationship in object.entity.relationshipsByName.values {
                    guard model.entity(named: relationship.destinationEntityName) != nil,
                        let target = objects.first(where: { $0.entity.isKindOf(entityNamed: relationship.destinationEntityName) }) else { continue }
                    if relationship.isToMany {
                        if relationship.isOrdered {
                            object.mutableOrderedSetValue(forKey: relationship.name).add(target)
                        } else {
                            object.mutableSetValue(forKey: relationship.name).add(target)
                        }
                    } else {
                        object.setValue(target, forKey: relationship.name)
                    }
                }
            }
            do { try context.save() } catch let error as ContextError {
                #expect(!"\(error)".isEmpty)
                context.rollback()
            }
            for object in objects {
                for property in object.entity.properties { _ = object.value(forKey: property.name) }
            }
            for entity in model.entities {
                var request = FetchRequest(entityName: entity.name)
                _ = try context.fetch(request)
                for attribute in entity.attributesByName.keys.sorted() {
                    request.sortDescriptors = [FetchSortDescriptor(key: attribute)]
                    _ = try context.fetch(request)
                }
            }
            // Every object deleted (delete rules run; deny may refuse the save), then undone.
            for object in objects where !object.isDeleted && object.managedObjectContext != nil { context.delete(object) }
            do { try context.save() } catch let error as ContextError {
                #expect(!"\(error)".isEmpty)
                context.rollback()
            }
            if context.canUndo { try context.undo() }
        }
        let again = try openCoordinator(directory, model: model)
        try await privateContext(again).perform { (context: isolated ManagedObjectContext) throws in
            for name in entities { _ = try context.count(for: FetchRequest(entityName: name)) }
        }
    }

    @Test("every mutated model file is refused with a ModelError, or loads, round-trips and works in a store")
    func mutatedModelsLoadAndWork() async throws {
        let environment = ProcessInfo.processInfo.environment
        let size = environment["STRATA_MODEL_FUZZ_SIZE"].flatMap(Int.init) ?? 150
        let seed = environment["STRATA_MODEL_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0x30DE1
        var rng = SeededGenerator(seed: seed)
        let files = ["kitchen-sink.json", "derived-attributes.json", "indexes.json", "employee-department.json", "league-manager.json", "student-class.json", "run.json"]
        var roots: [(String, Any)] = []
        for file in files {
            roots.append((file, try JSONSerialization.jsonObject(with: try SpecFiles.data("0002-model-file/\(file)"))))
        }
        var (loaded, refused) = (0, 0)
        for iteration in 0..<size {
            let (file, base) = roots[iteration % roots.count]
            var log: [String] = []
            var root = base
            for _ in 0..<Int(rng.next() % 2 + 1) { root = Self.mutate(root, rng: &rng, log: &log) }
            guard let data = try? JSONSerialization.data(withJSONObject: root, options: [.sortedKeys]) else { continue }
            let context = "\(file), iteration \(iteration): \(log.joined(separator: "; "))"
            let model: ManagedObjectModel
            do {
                model = try ManagedObjectModel(jsonData: data)
            } catch {
                refused += 1
                #expect(!error.issues.isEmpty, "a refusal names its problems: \(context)")
                continue
            }
            loaded += 1
            let written = model.jsonData(prettyPrinted: false)
            let reread = try? ManagedObjectModel(jsonData: written)
            #expect(reread == model, "the loaded model round-trips through its own file: \(context)")
            let directory = try TemporaryDirectory()
            do {
                try await Self.use(model, in: directory)
            } catch {
                Issue.record("using a loaded model failed: \(error) — \(context)")
            }
        }
        #expect(loaded + refused >= size * 9 / 10)
        #expect(loaded > 0 && refused > 0, "\(loaded) loaded, \(refused) refused")
    }
}
