import Foundation
import StrataModel
import StrataPredicate

// Swift-typed queries for custom classes: key paths such as `\Person.age` and Foundation's
// `#Predicate`. A key path is mapped to the model property it reads by evaluating it on a
// probe instance whose `value(forKey:)` records the key instead of reading a value, so a
// typed property must read through `value(forKey:)` (the pattern ManagedObject documents).

/// A Swift key path of a custom class, kept until a fetch resolves it against the model.
struct SwiftKeyPath: Sendable, Hashable {
    let keyPath: any AnyKeyPath & Sendable

    init<Root, Value>(_ keyPath: any KeyPath<Root, Value> & Sendable) { self.keyPath = keyPath }

    static func == (lhs: SwiftKeyPath, rhs: SwiftKeyPath) -> Bool { (lhs.keyPath as AnyKeyPath) == (rhs.keyPath as AnyKeyPath) }
    func hash(into hasher: inout Hasher) { hasher.combine(keyPath as AnyKeyPath) }
}

/// A Foundation `#Predicate` over a custom class: translated to a format predicate where
/// it can be (spec 0008 lists the forms), evaluated in memory where it can't.
struct SwiftPredicate: Sendable {
    /// Translates against the model; `nil` predicate when nothing could be translated.
    let translate: @Sendable (KeyPathResolver, _ entity: String) -> PredicateTranslation
    /// Evaluates the original predicate on one object.
    let evaluate: @Sendable (ManagedObject) throws -> Bool

    init<T: ManagedObject>(_ predicate: Predicate<T>) {
        translate = { resolver, entity in
            PredicateTranslator(resolver: resolver, rootEntity: entity, input: String(describing: predicate.variable))
                .translate(predicate.expression)
        }
        evaluate = { object in
            guard let typed = object as? T else {
                throw ContextError.invalidFetchRequest(
                    part: "predicate", reason: "#Predicate<\(T.self)> can't evaluate \(object.objectID), an instance of \(type(of: object)); register \(T.self) for its entity")
            }
            return try predicate.evaluate(typed)
        }
    }
}

/// The result of translating a `#Predicate`: the format predicate (if any part translated)
/// and whether it says exactly what the original says (else the original is also evaluated
/// in memory on the candidates).
struct PredicateTranslation {
    var predicate: FormatPredicate?
    var isExact: Bool
}

/// Records the keys a probe object reads while a key path is evaluated on it.
final class KeyProbe {
    struct Read {
        let reader: ObjectIdentifier
        let key: String
        let produced: ObjectIdentifier?
        /// The value the probe answered for an attribute (``sentinel(for:round:)``).
        let sentinel: Any?
        /// Whether the property read is an optional attribute.
        let optionalAttribute: Bool
    }
    var reads: [Read] = []
    /// Which of the two sentinel values attributes read as (0 or 1); 2: they read as nil.
    let round: Int
    /// Probe objects handed out for to-one reads, kept alive until the probe is done.
    var probes: [ManagedObject] = []
    let core: ContextCore

    init(core: ContextCore, round: Int = 0) {
        self.core = core
        self.round = round
    }

    func makeProbe(for entity: EntityInfo) -> ManagedObject {
        let type = core.coordinator.objectClass(for: entity)
        let probe = type.init(ObjectCreation(entity: entity, objectID: .temporary(entity.entity.name), registry: core.objects))
        probe.keyProbe = self
        probes.append(probe)
        return probe
    }

    /// What `value(forKey:)` answers on a probe: another probe for a to-one (so a key path
    /// can continue through it), an empty collection for a to-many, a sentinel value of an
    /// attribute's type (so the resolver can tell a property that returns the attribute's
    /// value from one that computes something from it), nil otherwise.
    func record(_ key: String, on object: ManagedObject) -> Any? {
        var produced: ManagedObject?
        var result: Any?
        var sentinel: Any?
        var optionalAttribute = false
        if let property = object.info.properties[key] {
            switch property.kind {
            case .toOne:
                if let destination = property.destination.flatMap({ core.entities[$0] }) {
                    produced = makeProbe(for: destination)
                    result = produced
                }
            case .toMany(let ordered):
                result = ordered ? [ManagedObject]() as Any : Set<ManagedObject>() as Any
            case .attribute(let type):
                sentinel = Self.sentinel(for: type, round: round)
                result = sentinel
                optionalAttribute = property.isOptional
            }
        }
        reads.append(Read(reader: ObjectIdentifier(object), key: key, produced: produced.map { ObjectIdentifier($0) }, sentinel: sentinel,
            optionalAttribute: optionalAttribute))
        return result
    }

    /// A value of `type`'s Swift type that a transformation (negating, scaling, clamping,
    /// trimming, changing case, comparing) would not give back unchanged in both rounds;
    /// nil for a type without one (transformable values). Small numbers, so that a
    /// computed property's arithmetic on them can't overflow.
    static func sentinel(for type: AttributeType, round: Int) -> Any? {
        guard round < 2 else { return nil }
        let n = round == 0 ? 2 : 3
        switch type {
        case .int16: return Int16(n)
        case .int32: return Int32(n)
        case .int64: return Int64(n)
        case .decimal: return Decimal(n * 100 + 25) / 100
        case .double: return Double(n) + 0.25
        case .float: return Float(n) + 0.25
        case .string: return " Strata Probe \(n) "
        case .boolean: return round == 0
        case .date: return Date(timeIntervalSinceReferenceDate: Double(n) * 1_000 + 0.25)
        case .binaryData: return Data([0x53, UInt8(n)])
        case .uuid: return UUID(uuid: (0x53, 0x54, 0x52, 0x41, 0x54, 0x41, 0, 0, 0, 0, 0, 0, 0, 0, 0, UInt8(n)))
        case .uri: return URL(string: "x-strata-probe://value/\(n)")
        default: return nil
        }
    }

    /// Whether `result`, what a key path gave on the probe, is the value the probe answered
    /// for its last read: the attribute's sentinel (a number of another type with the same
    /// value counts), or the probe made for a to-one (nil counts: a class registered for
    /// another type answers nil for the destination). A to-many, or a type without a
    /// sentinel, can't be checked and counts.
    static func gives(_ result: Any?, backFrom read: Read, valueType: Any.Type) -> Bool {
        let value = result.map(PredicateTranslator.unwrap)
        let got: Any? = value is NSNull ? nil : value
        if let produced = read.produced {
            // Nil from a key path whose value is an object: the class registered for the
            // destination isn't the one the property casts to. From one whose value is not
            // an object (`\Player.team?.name` with no class registered for Team, so `team`
            // read nil), the key path ended early and means something else.
            guard let got else { return unwrappedType(valueType) is ManagedObject.Type }
            return (got as AnyObject) is ManagedObject && ObjectIdentifier(got as AnyObject) == produced
        }
        guard let sentinel = read.sentinel else { return true }
        guard let got else { return false }
        if let a = FetchSortDescriptor.number(sentinel), let b = FetchSortDescriptor.number(got) { return a == b }
        guard let a = sentinel as? AnyHashable, let b = got as? AnyHashable else { return false }
        return a == b
    }

    /// `type` without its optional layers.
    static func unwrappedType(_ type: Any.Type) -> Any.Type {
        guard let optional = type as? any OptionalType.Type else { return type }
        return unwrappedType(optional.wrappedType)
    }
}

/// Maps Swift key paths of custom classes to model key paths for one context.
final class KeyPathResolver {
    let core: ContextCore
    init(core: ContextCore) { self.core = core }

    /// The model key path `keyPath` reads when applied to an object of `entityName`, and the
    /// entity it ends on (for a to-one) so a chain can continue.
    func resolve(_ keyPath: AnyKeyPath, from entityName: String) throws -> (path: String, entity: String?) {
        guard let info = core.entities[entityName] else { throw ContextError.unknownEntity(entityName) }
        let probe = KeyProbe(core: core)
        let root = probe.makeProbe(for: info)
        // A key path of another class reads nothing here (the subscript answers nil).
        let result = root[keyPath: keyPath]
        // The reads must form one chain: the first on the root, each next on the probe the
        // previous read produced.
        var expected = ObjectIdentifier(root)
        var keys: [String] = []
        var entity: String? = entityName
        for read in probe.reads {
            guard read.reader == expected else {
                throw ContextError.invalidArgument(
                    "key path \(keyPath) reads several properties (\(probe.reads.map(\.key).joined(separator: ", "))); sort or filter by one model property")
            }
            keys.append(read.key)
            let property = entity.flatMap { core.entities[$0]?.properties[read.key] }
            entity = property?.destination
            if let produced = read.produced { expected = produced } else { expected = ObjectIdentifier(NSNull.self) }
        }
        guard !keys.isEmpty else {
            throw ContextError.invalidArgument(
                "key path \(keyPath) reads no model property of entity \(entityName) (class \(type(of: root))): the key path's root must be the class registered for the entity, and the property must read through value(forKey:)")
        }
        // The property must give back what it read, not compute from it (`rank <= 10`,
        // `-rank`): else a predicate or sort on it isn't one on the model property. Checked
        // with two different values, on a second probe.
        let second = KeyProbe(core: core, round: 1)
        let secondRoot = second.makeProbe(for: info)
        let secondResult = secondRoot[keyPath: keyPath]
        guard let last = probe.reads.last, let secondLast = second.reads.last, second.reads.map(\.key) == keys,
            KeyProbe.gives(result, backFrom: last, valueType: type(of: keyPath).valueType),
            KeyProbe.gives(secondResult, backFrom: secondLast, valueType: type(of: keyPath).valueType)
        else {
            throw ContextError.invalidArgument(
                "key path \(keyPath) computes its value from \(entityName).\(keys.joined(separator: ".")) rather than returning it, so it can't be stated on the model (a to-one read as nil: is the destination's class registered?); sort or filter by a property that returns the model value")
        }
        return (keys.joined(separator: "."), entity)
    }

    /// Whether `keyPath` (one ``resolve(_:from:)`` accepts) gives a value where the optional
    /// attribute it reads is nil — a typed property with a default, `get("price") ?? 0` —
    /// so a comparison on it can hold for objects whose attribute is nil, where the same
    /// comparison on the attribute doesn't.
    func substitutesDefault(_ keyPath: AnyKeyPath, from entityName: String) -> Bool {
        guard let info = core.entities[entityName] else { return false }
        let probe = KeyProbe(core: core, round: 2)
        let root = probe.makeProbe(for: info)
        let result = root[keyPath: keyPath]
        guard let last = probe.reads.last, last.optionalAttribute, let result else { return false }
        return !(PredicateTranslator.unwrap(result) is NSNull)
    }
}

/// Translates the expression tree of a Foundation `Predicate` into the predicate language,
/// by reflecting on Foundation's public `PredicateExpressions` values.
struct PredicateTranslator {
    let resolver: KeyPathResolver
    /// The entity fetched: the input variable's entity.
    let rootEntity: String
    /// The description of the predicate's input variable (`Variable(0)`).
    let input: String

    /// A fragment of format text with its `%@`/`%K` arguments.
    struct Fragment {
        var format: String
        var arguments: [Any]
    }

    func translate(_ expression: Any) -> PredicateTranslation {
        guard let (fragment, exact) = node(expression) else { return PredicateTranslation(predicate: nil, isExact: false) }
        guard let predicate = try? FormatPredicate(format: fragment.format, argumentArray: fragment.arguments) else {
            return PredicateTranslation(predicate: nil, isExact: false)
        }
        return PredicateTranslation(predicate: predicate, isExact: exact)
    }

    static func kind(_ value: Any) -> String {
        let name = String(describing: type(of: value))
        return String(name.prefix { $0 != "<" })
    }

    static func child(_ value: Any, _ label: String) -> Any? {
        Mirror(reflecting: value).children.first { $0.label == label }?.value
    }

    /// A Boolean expression; the flag says whether the fragment is exact.
    func node(_ expression: Any) -> (Fragment, Bool)? {
        let child = { (label: String) in Self.child(expression, label) }
        switch Self.kind(expression) {
        case "Conjunction":
            let left = child("lhs").flatMap(node)
            let right = child("rhs").flatMap(node)
            switch (left, right) {
            case let ((l, le)?, (r, re)?):
                return (Fragment(format: "(\(l.format)) AND (\(r.format))", arguments: l.arguments + r.arguments), le && re)
            case let ((l, _)?, nil): return (l, false)
            case let (nil, (r, _)?): return (r, false)
            default: return nil
            }
        case "Disjunction":
            guard let (l, le) = child("lhs").flatMap(node), let (r, re) = child("rhs").flatMap(node), le, re else { return nil }
            return (Fragment(format: "(\(l.format)) OR (\(r.format))", arguments: l.arguments + r.arguments), true)
        case "Negation":
            guard let (inner, exact) = child("wrapped").flatMap(node), exact else { return nil }
            return (Fragment(format: "NOT (\(inner.format))", arguments: inner.arguments), true)
        case "Equal", "NotEqual":
            let op = Self.kind(expression) == "Equal" ? "==" : "!="
            return comparison(child("lhs"), op, child("rhs"))
        case "Comparison":
            let op: String
            switch child("op").map({ String(describing: $0) }) {
            case "lessThan": op = "<"
            case "lessThanOrEqual": op = "<="
            case "greaterThan": op = ">"
            case "greaterThanOrEqual": op = ">="
            default: return nil
            }
            return comparison(child("lhs"), op, child("rhs"))
        case "SequenceContains":
            // `[1, 2].contains($0.age)` → age IN {1, 2}; `$0.tags.contains(x)` is left to memory.
            guard let element = child("element"), let key = keyPath(element), let values = child("sequence").flatMap(constant),
                let list = values as? [Any]
            else { return nil }
            return guarded(Fragment(format: "%K IN %@", arguments: [key, list]), key: key, of: element)
        case "SequenceStartsWith":
            guard let base = child("base"), let key = keyPath(base), let prefix = child("prefix").flatMap(constant) as? String else {
                return nil
            }
            // Every string starts with "" in Swift, while BEGINSWITH "" is false (spec 0003).
            if prefix.isEmpty { return (Fragment(format: "TRUEPREDICATE", arguments: []), true) }
            return guarded(Fragment(format: "%K BEGINSWITH %@", arguments: [key, prefix]), key: key, of: base)
        case "CollectionContainsCollection":
            guard let base = child("base"), let key = keyPath(base), let other = child("other").flatMap(constant) as? String else {
                return nil
            }
            // Every string contains "" in Swift, while CONTAINS "" is false (spec 0003).
            if other.isEmpty { return (Fragment(format: "TRUEPREDICATE", arguments: []), true) }
            return guarded(Fragment(format: "%K CONTAINS %@", arguments: [key, other]), key: key, of: base)
        case "Value":
            if let flag = Self.child(expression, "value") as? Bool { return (Fragment(format: flag ? "TRUEPREDICATE" : "FALSEPREDICATE", arguments: []), true) }
            return nil
        case "KeyPath":
            // A Boolean property used as a condition: `$0.isActive`.
            guard let key = keyPath(expression) else { return nil }
            return guarded(Fragment(format: "%K == YES", arguments: [key]), key: key, of: expression)
        default:
            return nil
        }
    }

    func comparison(_ lhs: Any?, _ op: String, _ rhs: Any?) -> (Fragment, Bool)? {
        guard let lhs, let rhs else { return nil }
        if let key = keyPath(lhs) {
            if Self.kind(rhs) == "NilLiteral" { return (Fragment(format: "%K \(op) nil", arguments: [key]), true) }
            guard let value = constant(rhs) else { return nil }
            if value is NSNull { return (Fragment(format: "%K \(op) nil", arguments: [key]), true) }
            return guarded(Fragment(format: "%K \(op) %@", arguments: [key, value]), key: key, of: lhs)
        }
        if let key = keyPath(rhs) {
            if Self.kind(lhs) == "NilLiteral" { return (Fragment(format: "nil \(op) %K", arguments: [key]), true) }
            guard let value = constant(lhs) else { return nil }
            if value is NSNull { return (Fragment(format: "nil \(op) %K", arguments: [key]), true) }
            return guarded(Fragment(format: "%@ \(op) %K", arguments: [value, key]), key: key, of: rhs)
        }
        return nil
    }

    /// The model key path of a `KeyPath` expression (or an optional chain of them) on the
    /// input variable.
    func keyPath(_ expression: Any) -> String? {
        resolvedPath(expression, variable: input)?.path
    }

    /// Whether the key path expression substitutes a default for a nil attribute
    /// (``KeyPathResolver/substitutesDefault(_:from:)``, on its last key path).
    func substitutesDefault(_ expression: Any) -> Bool {
        switch Self.kind(expression) {
        case "KeyPath":
            guard let root = Self.child(expression, "root"), let keyPath = Self.child(expression, "keyPath") as? AnyKeyPath else { return false }
            if Self.kind(root) == "Variable" { return resolver.substitutesDefault(keyPath, from: rootEntity) }
            guard let entity = resolvedPath(root, variable: input)?.entity else { return false }
            return resolver.substitutesDefault(keyPath, from: entity)
        case "OptionalFlatMap":
            guard let wrapped = Self.child(expression, "wrapped"), let transform = Self.child(expression, "transform"),
                let entity = resolvedPath(wrapped, variable: input)?.entity,
                let keyPath = Self.child(transform, "keyPath") as? AnyKeyPath
            else { return false }
            return resolver.substitutesDefault(keyPath, from: entity)
        default:
            return false
        }
    }

    /// `fragment` on key path `key` read from `expression`: as it is, exact — or, when the
    /// typed property substitutes a default for nil, widened with `OR key == nil` and not
    /// exact, so the original predicate decides those objects in memory (the comparison on
    /// the attribute misses them; on the property's default it may hold).
    func guarded(_ fragment: Fragment, key: String, of expression: Any) -> (Fragment, Bool) {
        guard substitutesDefault(expression) else { return (fragment, true) }
        return (Fragment(format: "(\(fragment.format)) OR %K == nil", arguments: fragment.arguments + [key]), false)
    }

    func resolvedPath(_ expression: Any, variable: String) -> (path: String, entity: String?)? {
        switch Self.kind(expression) {
        case "KeyPath":
            guard let root = Self.child(expression, "root"), let keyPath = Self.child(expression, "keyPath") as? AnyKeyPath else { return nil }
            if Self.kind(root) == "Variable" {
                guard String(describing: root) == variable else { return nil }
                return try? resolver.resolve(keyPath, from: rootEntity)
            }
            guard let base = resolvedPath(root, variable: variable), let entity = base.entity,
                let next = try? resolver.resolve(keyPath, from: entity)
            else { return nil }
            return (base.path + "." + next.path, next.entity)
        case "OptionalFlatMap":
            guard let wrapped = Self.child(expression, "wrapped"), let inner = Self.child(expression, "variable"),
                let transform = Self.child(expression, "transform"),
                let outer = resolvedPath(wrapped, variable: variable), let entity = outer.entity,
                Self.kind(transform) == "KeyPath", let root = Self.child(transform, "root"),
                String(describing: root) == String(describing: inner),
                let keyPath = Self.child(transform, "keyPath") as? AnyKeyPath,
                let next = try? resolver.resolve(keyPath, from: entity)
            else { return nil }
            return (outer.path + "." + next.path, next.entity)
        default:
            return nil
        }
    }

    /// The value of a `Value` expression (nil optionals as `NSNull`).
    func constant(_ expression: Any) -> Any? {
        guard Self.kind(expression) == "Value", let value = Self.child(expression, "value") else { return nil }
        return Self.unwrap(value)
    }

    static func unwrap(_ value: Any) -> Any {
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .optional {
            guard let inner = mirror.children.first?.value else { return NSNull() }
            return unwrap(inner)
        }
        if mirror.displayStyle == .collection || mirror.displayStyle == .set {
            return mirror.children.map { unwrap($0.value) }
        }
        return value
    }
}

/// Optional's wrapped type, to see through optional key path values.
protocol OptionalType { static var wrappedType: Any.Type { get } }
extension Optional: OptionalType { static var wrappedType: Any.Type { Wrapped.self } }
