internal import Foundation

// MARK: - KeyPathWalker

/// Reads key paths from `Any` values: key-value coding objects, dictionaries and
/// collections, with collection operators. Shared by `value(forKeyPath:)` and evaluation.
enum KeyPathWalker {
    /// The value at `path` starting from `root`.
    ///
    /// `nilsAverageAsZero`: `@avg` counts a nil value as 0, as `NSObject.value(forKeyPath:)`
    /// does (``KeyValueCoding/value(forKeyPath:)``); predicates leave nils out, as the
    /// store's aggregates (and SQL's `AVG`) do.
    static func value(of root: Any?, path: FormatKeyPath, nilsAverageAsZero: Bool = false) -> Any? {
        walk(root, path.components[...], nilsAverageAsZero)
    }

    /// Reads one component at a time. Nil, `NSNull` and empty optionals hidden in an `Any`
    /// need no unwrapping here: no cast below matches them, so they read as nil.
    private static func walk(_ value: Any?, _ components: ArraySlice<FormatKeyPath.Component>, _ nilsAverageAsZero: Bool) -> Any? {
        guard let first = components.first else { return value }
        guard let value else { return nil }
        let rest = components.dropFirst()
        switch first {
        case .collectionOperator(let op):
            guard let items = elements(of: value) else { return nil }
            return apply(op, to: items, rest: rest, nilsAverageAsZero)
        case .key(let key):
            if let dictionary = value as? [String: Any] {
                return walk(dictionary[key], rest, nilsAverageAsZero)
            }
            if let object = value as? any KeyValueCoding {
                // `key.@count`: counted by the object when it can (no element made).
                if case .collectionOperator(.count)? = rest.first, let count = object.count(forKey: key) { return count }
                return walk(object.value(forKey: key), rest, nilsAverageAsZero)
            }
            guard let items = elements(of: value) else {
                return walk(readKey(key, of: value), rest, nilsAverageAsZero)
            }
            // To-many: read the key from every element; collection results are flattened one
            // level, so chains of to-many relationships give one flat array.
            var mapped: [Any] = []
            mapped.reserveCapacity(items.count)
            for item in items {
                let read = OptionalUnwrapper.flatten(readKey(key, of: item))
                if let read, let inner = elements(of: read) {
                    mapped.append(contentsOf: inner)
                } else {
                    mapped.append(read ?? NSNull())
                }
            }
            return walk(mapped, rest, nilsAverageAsZero)
        }
    }

    /// The property `key` of a single (non-collection) value.
    static func readKey(_ key: String, of value: Any) -> Any? {
        if let dictionary = value as? [String: Any] {
            return dictionary[key]
        }
        if let object = value as? any KeyValueCoding {
            return object.value(forKey: key)
        }
        if let dictionary = value as? [AnyHashable: Any] {
            return dictionary[AnyHashable(key)]
        }
        return nil
    }

    /// The elements of a collection value (array, set, ordered set), or nil for anything
    /// else. Strings and dictionaries are not collections here. Foundation collection
    /// classes are only tried for class instances, so Swift values are never bridged.
    static func elements(of value: Any) -> [Any]? {
        if let array = value as? [Any] { return array }
        if let set = value as? Set<AnyHashable> { return set.map(\.base) }
        guard type(of: value) is AnyClass else {
            if let optional = value as? any OptionalBox, let wrapped = optional.wrappedAny {
                return elements(of: wrapped)
            }
            return nil
        }
        switch value {
        case is any KeyValueCoding:
            return nil
        case let ordered as NSOrderedSet:
            return ordered.array
        case let array as NSArray:
            return array.map { $0 }
        case let set as NSSet:
            return set.allObjects
        default:
            return nil
        }
    }

    // MARK: - Collection operators

    private static func apply(_ op: FormatKeyPath.CollectionOperator, to items: [Any],
                              rest: ArraySlice<FormatKeyPath.Component>, _ nilsAverageAsZero: Bool) -> Any? {
        if op == .count { return items.count }
        let values: [Any]
        if rest.isEmpty {
            values = items
        } else {
            values = elements(of: walk(items, rest, nilsAverageAsZero) ?? []) ?? []
        }
        switch op {
        case .count:
            return items.count
        case .sum:
            return Aggregates.sum(values.map { Value(any: $0) })?.any
        case .average:
            // Key-value coding's `@avg` counts a nil as 0 (the Key-Value Coding Programming
            // Guide: "In the case where the value is nil, 0 is assumed instead").
            let read = values.map { Value(any: $0) }
            return Aggregates.average(nilsAverageAsZero ? read.map { $0.isNull ? .int(0) : $0 } : read)?.any
        case .minimum:
            return Aggregates.extreme(values.map { Value(any: $0) }, want: .orderedAscending)?.any
        case .maximum:
            return Aggregates.extreme(values.map { Value(any: $0) }, want: .orderedDescending)?.any
        case .unionOfObjects, .unionOfArrays:
            return values.filter { OptionalUnwrapper.flatten($0) != nil }
        case .distinctUnionOfObjects, .distinctUnionOfArrays, .distinctUnionOfSets:
            return distinct(values.filter { OptionalUnwrapper.flatten($0) != nil })
        }
    }

    /// Stands for every NaN in ``distinct(_:)``.
    private struct AnyNaN: Hashable {}

    /// Removes duplicates, keeping first occurrences; unhashable values are kept as-is. Any
    /// NaN is any other (as `NSNumber`'s `isEqual:` finds, spec 0008): one is kept (before,
    /// every NaN was, a NaN being unequal to itself).
    private static func distinct(_ values: [Any]) -> [Any] {
        var seen = Set<AnyHashable>()
        var result: [Any] = []
        for value in values {
            if let number = Number(Value(any: value)), number.isNaN {
                if seen.insert(AnyHashable(AnyNaN())).inserted { result.append(value) }
            } else if let hashable = value as? AnyHashable {
                if seen.insert(hashable).inserted { result.append(value) }
            } else {
                result.append(value)
            }
        }
        return result
    }
}
