package import Foundation
internal import StrataPredicate

// MARK: - DerivationPlan

/// A derived attribute's derivation resolved against the model: the relationships it
/// follows, the attribute it reads, what it does with it — what the store computes at save
/// (`Specs/0002-model-file.md` §8 rule 11, `Specs/0006-context-undo.md` §24).
///
/// Resolved once per model by the model checker (which reports what can't be resolved) and
/// by the event log (which computes the values); the shapes are those Core Data's derived
/// attributes support.
package struct DerivationPlan: Sendable, Hashable {
    /// A to-many aggregate.
    package enum Aggregate: String, Sendable, Hashable {
        case count = "@count"
        case sum = "@sum"
        case average = "@avg"
        case minimum = "@min"
        case maximum = "@max"
    }

    /// A string function applied to the value read.
    package enum Transform: String, Sendable, Hashable {
        case lowercase, uppercase, canonical
    }

    /// One relationship the key path follows.
    package struct Step: Sendable, Hashable {
        /// The relationship's name.
        package let relationship: String
        /// The entity it is looked up on (the previous level's).
        package let source: String
        /// Its destination entity (the next level's).
        package let destination: String
        package let isToMany: Bool
    }

    /// The entity that declares the derived attribute.
    package let entity: String
    /// The derived attribute's name.
    package let attribute: String
    /// The derived attribute's declared type.
    package let type: AttributeType
    /// `now()`: the save's time; nothing is read.
    package let isNow: Bool
    /// The relationships followed, in order; at most one is to-many, and then ``aggregate``
    /// applies to it.
    package let steps: [Step]
    /// The aggregate over the to-many step.
    package let aggregate: Aggregate?
    /// The attribute read at the end of the steps (from each destination of the to-many
    /// step, for an aggregate); nil for `@count` and `now()`.
    package let source: String?
    /// The type of ``source``.
    package let sourceType: AttributeType?
    /// The entity that declares ``source`` (it may be inherited), for the dependency order.
    package let sourceDeclaringEntity: String?
    /// `lowercase`, `uppercase` or `canonical` of the value read.
    package let transform: Transform?

    /// The entity at each level: the derived attribute's entity (level 0), then each step's
    /// destination.
    package var levels: [String] { [entity] + steps.map(\.destination) }

    /// The property whose change at `level` can change the value: the next step's
    /// relationship, or at the last level the attribute read (nil: none).
    package func input(atLevel level: Int) -> String? {
        level < steps.count ? steps[level].relationship : source
    }

    /// `"Entity.attribute"`, for messages.
    package var qualifiedName: String { "\(entity).\(attribute)" }
}

// MARK: - Resolving

/// Why a derivation can't be resolved: the message the model checker reports.
package struct DerivationProblem: Error, Sendable, Hashable {
    package let message: String
    /// True when the cause is reported by another rule (an unknown destination entity), so
    /// the checker needn't report it again.
    package let isReportedElsewhere: Bool

    init(_ message: String, reportedElsewhere: Bool = false) {
        self.message = message
        isReportedElsewhere = reportedElsewhere
    }
}

extension DerivationPlan {
    /// What `derivation` of attribute `attribute` of `entity` (taken from `model`, so
    /// inherited properties count) computes, or why it can't be computed.
    package static func resolve(
        _ attribute: AttributeDescription, declaredBy entity: EntityDescription, in model: ManagedObjectModel
    ) -> Result<DerivationPlan, DerivationProblem> {
        guard let derivation = attribute.derivationExpression else {
            return .failure(DerivationProblem("attribute '\(attribute.name)' has no derivation"))
        }
        guard let expression = derivation.expression else {
            return .failure(DerivationProblem("derivation \"\(derivation.format)\" does not parse: \(derivation.syntaxError ?? "syntax error")"))
        }
        let supported = "a derivation is a key path (name, department.name), a to-many aggregate (employees.@count, employees.@sum.salary), now(), lowercase(…), uppercase(…) or canonical(…) of a key path"
        var transform: Transform?
        let path: FormatKeyPath
        switch expression {
        case .function(.now, let arguments) where arguments.isEmpty:
            guard attribute.attributeType == .date else {
                return .failure(DerivationProblem(
                    "type mismatch: now() gives a date, but attribute '\(attribute.name)' is \(attribute.attributeType)"))
            }
            return .success(DerivationPlan(
                entity: entity.name, attribute: attribute.name, type: attribute.attributeType, isNow: true, steps: [], aggregate: nil,
                source: nil, sourceType: nil, sourceDeclaringEntity: nil, transform: nil))
        case .function(let function, let arguments) where [.lowercase, .uppercase, .canonical].contains(function):
            guard arguments.count == 1, case .keyPath(let argument) = arguments[0] else {
                return .failure(DerivationProblem("\(function.rawValue)() in a derivation takes a key path to a string attribute, not \(arguments.map(\.description).joined(separator: ", "))"))
            }
            transform = Transform(rawValue: function.rawValue)
            path = argument
        case .keyPath(let keyPath):
            path = keyPath
        case .function(let function, _):
            return .failure(DerivationProblem("function \(function.rawValue)() is not supported in a derivation; \(supported)"))
        default:
            return .failure(DerivationProblem("\"\(derivation.format)\" is not a supported derivation; \(supported)"))
        }
        return resolvePath(path, transform: transform, attribute: attribute, entity: entity, model: model)
    }

    private static func resolvePath(
        _ path: FormatKeyPath, transform: Transform?, attribute: AttributeDescription, entity: EntityDescription,
        model: ManagedObjectModel
    ) -> Result<DerivationPlan, DerivationProblem> {
        var current = entity
        var steps: [Step] = []
        var aggregate: Aggregate?
        var source: AttributeDescription?
        var sourceEntity: EntityDescription?
        let components = path.components
        var index = 0
        func fail(_ message: String) -> Result<DerivationPlan, DerivationProblem> { .failure(DerivationProblem(message)) }
        while index < components.count {
            let component = components[index]
            index += 1
            guard case .key(let key) = component else {
                if case .collectionOperator(let op) = component {
                    return fail("collection operator \(op.rawValue) in \"\(path)\" must follow a to-many relationship")
                }
                continue
            }
            if source != nil {
                return fail("\"\(path)\" continues after attribute '\(source?.name ?? key)'; a key path in a derivation ends at an attribute")
            }
            guard let property = current.propertiesByName[key] else {
                return fail("unknown key '\(key)' in \"\(path)\": '\(current.name)' has no property named '\(key)'")
            }
            switch property {
            case .fetchedProperty:
                return fail("'\(key)' in \"\(path)\" is a fetched property of '\(current.name)'; a derivation reads stored attributes and relationships")
            case .attribute(let a):
                if a.isTransient {
                    return fail("'\(key)' in \"\(path)\" is a transient attribute of '\(current.name)', which the store never holds")
                }
                source = a
                sourceEntity = current
            case .relationship(let r):
                if r.isTransient {
                    return fail("'\(key)' in \"\(path)\" is a transient relationship of '\(current.name)', which the store never holds")
                }
                guard let destination = model.entitiesByName[r.destinationEntityName] else {
                    return .failure(DerivationProblem(
                        "relationship '\(key)' in \"\(path)\" leads to entity '\(r.destinationEntityName)', which does not exist",
                        reportedElsewhere: true))
                }
                steps.append(Step(relationship: key, source: current.name, destination: destination.name, isToMany: r.isToMany))
                current = destination
                guard r.isToMany else { continue }
                if aggregate != nil {
                    return fail("\"\(path)\" follows a second to-many relationship, '\(key)'; a derivation aggregates over one to-many relationship")
                }
                if transform != nil {
                    return fail("\"\(path)\" follows to-many relationship '\(key)'; a string function takes a key path through to-one relationships to one string")
                }
                let operators = "@count, @sum, @avg, @min or @max"
                guard index < components.count, case .collectionOperator(let op) = components[index] else {
                    return fail("to-many relationship '\(key)' in \"\(path)\" is not followed by an aggregate; follow it with \(operators) (\(key).@count)")
                }
                index += 1
                guard let found = Aggregate(rawValue: op.rawValue) else {
                    return fail("collection operator \(op.rawValue) in \"\(path)\" is not supported in a derivation; use \(operators)")
                }
                aggregate = found
                if found == .count, index < components.count {
                    return fail("nothing may follow @count in \"\(path)\"")
                }
                if found != .count, index == components.count {
                    return fail("\(found.rawValue) in \"\(path)\" needs the attribute it aggregates (\(key).\(found.rawValue).salary)")
                }
            }
        }
        if source == nil, aggregate != .count {
            let last = steps.last?.relationship ?? path.string
            return fail("\"\(path)\" ends at relationship '\(last)'; a derivation ends at an attribute (department.name) or aggregates a to-many relationship (employees.@count)")
        }
        let plan = DerivationPlan(
            entity: entity.name, attribute: attribute.name, type: attribute.attributeType, isNow: false, steps: steps,
            aggregate: aggregate, source: source?.name, sourceType: source?.attributeType,
            sourceDeclaringEntity: sourceEntity.flatMap { declaringEntity(of: source?.name ?? "", in: $0, model: model) },
            transform: transform)
        if let mismatch = plan.typeMismatch(path: path.description) { return fail(mismatch) }
        return .success(plan)
    }

    /// The entity among `entity` and its ancestors that declares the property `name`.
    package static func declaringEntity(of name: String, in entity: EntityDescription, model: ManagedObjectModel) -> String {
        if entity.attributes.contains(where: { $0.name == name }) { return entity.name }
        for ancestor in entity.superentityNames {
            if model.entitiesByName[ancestor]?.attributes.contains(where: { $0.name == name }) == true { return ancestor }
        }
        return entity.name
    }

    // MARK: - Types

    /// Why the value the derivation gives can't be stored in the attribute's declared type,
    /// or nil when it can.
    func typeMismatch(path: String) -> String? {
        let target = type
        let what: String
        if let transform {
            guard sourceType == .string else {
                return "\(transform.rawValue)() takes a string, but '\(source ?? "?")' is \(sourceType?.description ?? "?")"
            }
            what = "\(transform.rawValue)(\(path)) gives a string"
            return target == .string ? nil : "type mismatch: \(what), but attribute '\(attribute)' is \(target)"
        }
        guard let aggregate else {
            let found = sourceType ?? .string
            return Self.holds(target, valueOf: found)
                ? nil : "type mismatch: \(path) gives \(found) values, but attribute '\(attribute)' is \(target)"
        }
        switch aggregate {
        case .count:
            return target.isInteger ? nil : "type mismatch: \(path) gives an integer count, but attribute '\(attribute)' is \(target); make it int16, int32 or int64"
        case .sum, .average:
            guard let found = sourceType, found.isNumeric else {
                return "\(aggregate.rawValue) in \(path) needs a numeric attribute, but '\(source ?? "?")' is \(sourceType?.description ?? "?")"
            }
            let fits: Bool
            switch (aggregate, found) {
            case (.sum, _) where found.isInteger: fits = target.isInteger && target.integerWidth >= found.integerWidth || target == .decimal || target == .double
            case (.average, _) where found.isInteger: fits = target == .double || target == .float || target == .decimal
            case (_, .decimal): fits = target == .decimal
            default: fits = target == .double || target == .float
            }
            return fits ? nil : "type mismatch: \(path) gives \(Self.resultDescription(aggregate, found)), but attribute '\(attribute)' is \(target)"
        case .minimum, .maximum:
            guard let found = sourceType, found.isNumeric || found == .date || found == .string else {
                return "\(aggregate.rawValue) in \(path) needs a numeric, date or string attribute, but '\(source ?? "?")' is \(sourceType?.description ?? "?")"
            }
            return Self.holds(target, valueOf: found)
                ? nil : "type mismatch: \(path) gives \(found) values, but attribute '\(attribute)' is \(target)"
        }
    }

    private static func resultDescription(_ aggregate: Aggregate, _ found: AttributeType) -> String {
        switch (aggregate, found) {
        case (.average, _) where found.isInteger: "a fractional average of integers (double, float or decimal)"
        case (.sum, _) where found.isInteger: "an integer sum (an integer type at least as wide as \(found), decimal or double)"
        case (_, .decimal): "a decimal"
        default: "a floating-point number (double or float)"
        }
    }

    /// Whether an attribute of type `target` holds every value of type `found` exactly: the
    /// same type, a wider integer, a double for a float, or a decimal or double for an integer.
    static func holds(_ target: AttributeType, valueOf found: AttributeType) -> Bool {
        if target == found { return true }
        if found.isInteger {
            return target.isInteger && target.integerWidth >= found.integerWidth || target == .decimal || target == .double
        }
        return found == .float && target == .double
    }
}

extension AttributeType {
    /// Whether values are integers (`int16`, `int32`, `int64`).
    var isInteger: Bool { self == .int16 || self == .int32 || self == .int64 }
    /// The bit width of an integer type (0 for other types).
    var integerWidth: Int {
        switch self {
        case .int16: 16
        case .int32: 32
        case .int64: 64
        default: 0
        }
    }
}

// MARK: - Computing

/// A derived value that doesn't fit its attribute's type (an `int16` count above 32767,
/// an integer sum that overflows).
package struct DerivationOverflow: Error, Sendable, Hashable, CustomStringConvertible {
    package let description: String
}

extension DerivationPlan {
    /// The derived value for `object` in one state of the store, which `attribute` (the value
    /// of an attribute of an object, nil when it has none) and `related` (the destinations of
    /// a step's relationship from an object) read; `now` is the save's time.
    ///
    /// - Throws: ``DerivationOverflow`` when the value doesn't fit the attribute's type, and
    ///   what the readers throw.
    package func value<Object>(
        of object: Object, now: Date, attribute readAttribute: (String, Object) throws -> AttributeValue?,
        related: (Step, Object) throws -> [Object]
    ) throws -> AttributeValue? {
        if isNow { return .date(now) }
        // The to-one steps before the to-many one (or all of them).
        let split = steps.firstIndex(where: \.isToMany) ?? steps.count
        var reached = [object]
        for step in steps[..<split] {
            guard let current = reached.first, let next = try related(step, current).first else { return nil }
            reached = [next]
        }
        guard let start = reached.first else { return nil }
        guard let aggregate else {
            let value = try source.flatMap { try readAttribute($0, start) }
            return try finish(transformed(value))
        }
        let members = try related(steps[split], start)
        if aggregate == .count { return try finish(count: members.count) }
        // The values of the source attribute, each through the to-one steps after the to-many one.
        var values: [AttributeValue] = []
        values.reserveCapacity(members.count)
        for member in members {
            var end: Object? = member
            for step in steps[(split + 1)...] {
                guard let current = end else { break }
                end = try related(step, current).first
            }
            if let end, let source, let value = try readAttribute(source, end) { values.append(value) }
        }
        switch aggregate {
        case .count: return try finish(count: members.count)
        case .sum: return try sum(values)
        case .average: return try average(values)
        case .minimum, .maximum:
            let want: ComparisonResult = aggregate == .minimum ? .orderedAscending : .orderedDescending
            var best: AttributeValue?
            for value in values {
                if let current = best, Self.sortOrder(value, current) != want { continue }
                best = value
            }
            return try finish(best)
        }
    }

    /// Two values in sort order (spec 0008): a NaN number or a date at NaN after every
    /// number or date, equal to another NaN, so `@max` of values holding one is NaN and `@min`
    /// the least value wherever it stands (before, a NaN kept or lost the place it was met
    /// in: the result depended on the members' order).
    static func sortOrder(_ a: AttributeValue, _ b: AttributeValue) -> ComparisonResult? {
        func isNaN(_ value: AttributeValue) -> Bool {
            switch value {
            case .double(let v): v.isNaN
            case .float(let v): v.isNaN
            case .decimal(let v): v.isNaN
            case .date(let v): v.timeIntervalSinceReferenceDate.isNaN
            default: false
            }
        }
        let (nanA, nanB) = (isNaN(a), isNaN(b))
        if nanA || nanB { return nanA == nanB ? .orderedSame : (nanA ? .orderedDescending : .orderedAscending) }
        return AttributeValue.compare(a, b)
    }

    private func transformed(_ value: AttributeValue?) -> AttributeValue? {
        guard let transform, case .string(let string)? = value else { return value }
        switch transform {
        case .lowercase: return .string(string.lowercased())
        case .uppercase: return .string(string.uppercased())
        case .canonical: return .string(FormatFunction.canonical(string))
        }
    }

    /// `value` as the attribute's type.
    private func finish(_ value: AttributeValue?) throws -> AttributeValue? {
        guard let value else { return nil }
        if value.matches(type) { return value }
        return try converted(value.anyValue)
    }

    private func finish(count: Int) throws -> AttributeValue? { try converted(count) }

    private func converted(_ value: Any) throws -> AttributeValue {
        do {
            return try AttributeValue(any: value, for: type)
        } catch {
            throw DerivationOverflow(description: "the derived value \(value) of \(qualifiedName) does not fit its type \(type): \(error.reason)")
        }
    }

    private func sum(_ values: [AttributeValue]) throws -> AttributeValue? {
        switch sourceType {
        case let found? where found.isInteger:
            var total = 0
            // Wraps past Int's range, counted: the sum is exact when they cancel out, in any
            // order (before, Int.max, 1, -1 failed the save while -1, 1, Int.max didn't).
            var wraps = 0
            for value in values {
                guard let n = Self.integer(value) else { continue }
                let (result, overflow) = total.addingReportingOverflow(n)
                if overflow { wraps += n < 0 ? -1 : 1 }
                total = result
            }
            if wraps != 0 { throw DerivationOverflow(description: "the sum for \(qualifiedName) overflows 64-bit integers") }
            return try converted(total)
        case .decimal?:
            var total = Decimal(0)
            for case .decimal(let d) in values { total += d }
            return try converted(total)
        default:
            var total = 0.0
            for value in values { total += Self.floating(value) ?? 0 }
            return try converted(type == .float ? Float(total) as Any : total as Any)
        }
    }

    private func average(_ values: [AttributeValue]) throws -> AttributeValue? {
        guard !values.isEmpty else { return nil }
        if sourceType == .decimal || (sourceType?.isInteger == true && type == .decimal) {
            var total = Decimal(0)
            for value in values {
                if case .decimal(let d) = value { total += d } else if let n = Self.integer(value) { total += Decimal(n) }
            }
            return try converted(total / Decimal(values.count))
        }
        var total = 0.0
        for value in values { total += Self.floating(value) ?? 0 }
        let mean = total / Double(values.count)
        return try converted(type == .float ? Float(mean) as Any : mean as Any)
    }

    /// Whether ``adjusted(_:added:removed:)`` can keep the value: a `@count`, or a `@sum`,
    /// over the plan's only step, a to-many relationship.
    package var isKeptIncrementally: Bool {
        guard steps.count == 1, steps[0].isToMany else { return false }
        return aggregate == .count || aggregate == .sum
    }

    /// A `@count` or `@sum` kept from its stored value rather than computed from every
    /// member (``isKeptIncrementally``): `stored` less what the members that left (or whose
    /// value changed) held, plus what those that joined hold — `removed` and `added`, the
    /// members' source values (nil: a member without one). Nil when `stored` isn't a value
    /// of the aggregate's kind (the caller computes from every member instead).
    ///
    /// Integer and decimal sums are exact, as a fresh sum is; a floating-point sum kept this
    /// way can differ from a fresh one in its last digits (as SQL triggers keeping a running
    /// total do).
    ///
    /// - Throws: ``DerivationOverflow`` as ``value(of:now:attribute:related:)`` does.
    package func adjusted(_ stored: AttributeValue, added: [AttributeValue?], removed: [AttributeValue?]) throws -> AttributeValue? {
        switch aggregate {
        case .count?:
            guard let count = Self.integer(stored) else { return nil }
            let (result, overflow) = count.addingReportingOverflow(added.count - removed.count)
            if overflow || result < 0 { return nil }
            return try finish(count: result)
        case .sum?:
            switch sourceType {
            case let found? where found.isInteger:
                guard var total = Self.integer(stored) else { return nil }
                var wraps = 0  // as in sum(_:): exact when the wraps cancel out
                for (values, adding) in [(removed, false), (added, true)] {
                    for case let value? in values {
                        guard let n = Self.integer(value) else { continue }
                        // Subtracted, not added negated: -Int64.min overflows (before, a
                        // member holding Int64.min leaving the sum trapped).
                        let (result, overflow) = adding ? total.addingReportingOverflow(n) : total.subtractingReportingOverflow(n)
                        if overflow { wraps += (n < 0) == adding ? -1 : 1 }
                        total = result
                    }
                }
                if wraps != 0 { throw DerivationOverflow(description: "the sum for \(qualifiedName) overflows 64-bit integers") }
                return try converted(total)
            case .decimal?:
                guard case .decimal(var total) = stored else { return nil }
                for case .decimal(let d)? in removed { total -= d }
                for case .decimal(let d)? in added { total += d }
                return try converted(total)
            default:
                guard var total = Self.floating(stored) else { return nil }
                for case let value? in removed { total -= Self.floating(value) ?? 0 }
                for case let value? in added { total += Self.floating(value) ?? 0 }
                return try converted(type == .float ? Float(total) as Any : total as Any)
            }
        default:
            return nil
        }
    }

    private static func integer(_ value: AttributeValue) -> Int? {
        switch value {
        case .int16(let n): Int(n)
        case .int32(let n): Int(n)
        case .int64(let n): Int(n)
        default: nil
        }
    }

    private static func floating(_ value: AttributeValue) -> Double? {
        switch value {
        case .double(let d): d
        case .float(let f): Double(f)
        default: integer(value).map(Double.init)
        }
    }
}

// MARK: - The model's plans

extension ManagedObjectModel {
    /// Every derived attribute's plan, in an order where a derivation that reads another
    /// derived attribute comes after it; and the problems of those that can't be resolved
    /// (a model checked by ``validate()`` has none), as `(entity, attribute, message)`.
    package func derivationPlans() -> (plans: [DerivationPlan], problems: [(entity: String, attribute: String, message: String)]) {
        var plans: [DerivationPlan] = []
        var problems: [(entity: String, attribute: String, message: String)] = []
        for entity in entities {
            for attribute in entity.attributes where attribute.isDerived {
                switch DerivationPlan.resolve(attribute, declaredBy: entity, in: self) {
                case .success(let plan): plans.append(plan)
                case .failure(let problem): problems.append((entity.name, attribute.name, problem.message))
                }
            }
        }
        let (ordered, cycles) = DerivationPlan.dependencyOrder(plans)
        for cycle in cycles {
            problems.append((cycle.plan.entity, cycle.plan.attribute, cycle.message))
        }
        return (ordered, problems)
    }
}

extension DerivationPlan {
    /// `plans` ordered so that each comes after the derived attribute it reads, and the
    /// plans caught in a cycle (each with a message naming the cycle), left out of the order.
    static func dependencyOrder(_ plans: [DerivationPlan]) -> (ordered: [DerivationPlan], cycles: [(plan: DerivationPlan, message: String)]) {
        var byName: [String: DerivationPlan] = [:]
        for plan in plans { byName[plan.qualifiedName] = plan }
        func dependency(_ plan: DerivationPlan) -> String? {
            guard let entity = plan.sourceDeclaringEntity, let source = plan.source else { return nil }
            let name = "\(entity).\(source)"
            return byName[name] == nil ? nil : name
        }
        var ordered: [DerivationPlan] = []
        var cycles: [(plan: DerivationPlan, message: String)] = []
        var done: Set<String> = []
        for plan in plans where !done.contains(plan.qualifiedName) {
            // Walk the chain of dependencies from the plan; the chain ends at a plan that
            // reads no derived attribute, or comes back to a plan on it (a cycle).
            var chain: [String] = []
            var next: String? = plan.qualifiedName
            while let name = next, !done.contains(name), !chain.contains(name) {
                chain.append(name)
                next = byName[name].flatMap(dependency)
            }
            if let name = next, let start = chain.firstIndex(of: name) {
                let loop = Array(chain[start...]) + [name]
                for member in chain[start...] {
                    guard let cyclic = byName[member] else { continue }
                    cycles.append((cyclic, "derivation reads derived attributes in a cycle: \(loop.joined(separator: " → ")); a derived attribute can't depend on itself"))
                    done.insert(member)
                }
                chain.removeSubrange(start...)
            }
            for name in chain.reversed() where !done.contains(name) {
                if let found = byName[name] { ordered.append(found) }
                done.insert(name)
            }
        }
        return (ordered, cycles)
    }
}
